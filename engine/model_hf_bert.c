/* Hugging Face BERT directories (config.json model_type "bert"): BertModel as sentence-transformers saves
 * bge-small / -base / -large, all-MiniLM, e5, gte (tensors embeddings.* and encoder.layer.N.*), and
 * BertForSequenceClassification cross-encoders (the same under "bert.", plus bert.pooler.dense and
 * classifier). And XLM-RoBERTa's (model_type "xlm-roberta": bge-m3, multilingual-e5, bge-reranker-v2-m3):
 * the same tensors (under "roberta." in XLMRobertaForSequenceClassification, whose head is
 * classifier.dense and classifier.out_proj), position rows counted from padding_idx + 1 as RoBERTa numbers
 * positions, one token type. Loaded into the llm_model the GGUF loader (model_gguf_bert.c) fills, so
 * everything after the load is the same; the tokenizer is the directory's tokenizer.json (WordPiece, or
 * Unigram for XLM-RoBERTa). */
#include "model.h"
#include "model_priv.h"
#include "tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int llm_hf_bert_config(llm_model *m, const cJSON *root, const char *path, llm_err *err)
{
    llm_config *c = &m->cfg;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    const cJSON *pe = cJSON_GetObjectItemCaseSensitive(root, "position_embedding_type");
    if (cJSON_IsString(act) && strcmp(act->valuestring, "gelu") != 0) {
        llm_seterr(err, "%s: hidden_act '%s' is not supported (BERT's exact gelu is)", path, act->valuestring);
        return -1;
    }
    if (cJSON_IsString(pe) && strcmp(pe->valuestring, "alibi") == 0) { /* jina-embeddings-v2 (its remote code) */
        llm_seterr(err, "%s: an ALiBi BERT (jina-bert-v2) loads from GGUF only: convert it with llama.cpp's "
                   "convert_hf_to_gguf.py", path);
        return -1;
    }
    if ((pe != NULL && !cJSON_IsNull(pe) && (!cJSON_IsString(pe) || strcmp(pe->valuestring, "absolute") != 0)) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "is_decoder"))) {
        llm_seterr(err, "%s: only absolute positions and an encoder (not is_decoder) are supported", path);
        return -1;
    }
    int types = 0, pad = 0;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    int roberta = cJSON_IsString(mt) && strcmp(mt->valuestring, "xlm-roberta") == 0;
    if (llm_hf_cfg_int(root, "pad_token_id", &pad, 1, 0, path, err))
        return -1;
    m->pos_offset = roberta ? pad + 1 : 0; /* RoBERTa's positions start after the padding's */
    if (llm_hf_cfg_int(root, "hidden_size", &c->dim, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "intermediate_size", &c->hidden_dim, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "num_hidden_layers", &c->n_layers, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "num_attention_heads", &c->n_heads, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "max_position_embeddings", &c->seq_len, 512, 0, path, err) ||
        llm_hf_cfg_int(root, "type_vocab_size", &types, 2, 0, path, err))
        return -1;
    if (c->n_layers <= 0 || c->n_layers > 4096 || c->n_heads <= 0 || c->dim <= 0 || c->dim % c->n_heads != 0 ||
        c->seq_len < 2 || pad < 0 || m->pos_offset > c->seq_len - 2) {
        llm_seterr(err, "%s: bad bert config: hidden_size %d, %d heads, %d layers, %d positions", path, c->dim,
                   c->n_heads, c->n_layers, c->seq_len);
        return -1;
    }
    c->seq_len -= m->pos_offset; /* max_position_embeddings counts the rows before the first position */
    c->encoder = 1;
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->dim / c->n_heads;
    c->norm_eps = llm_hf_cfg_float(root, "layer_norm_eps", 1e-12f);
    c->rope_theta = 10000.0f; /* (no rope: every layer is nope) */
    c->tied_embeddings = 1;   /* no language-model head */
    c->bos_id = c->eos_id = c->sep_id = -1; /* from the tokenizer (llm_hf_bert_tokens) */
    snprintf(m->arch, sizeof(m->arch), "bert");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(root, "_name_or_path");
    snprintf(m->name, sizeof(m->name), "%s", cJSON_IsString(nm) && nm->valuestring[0] ? nm->valuestring : "bert");
    return 0;
}

/* prefix + name: BERT's own tensors are under "bert." in a BertFor* model, at the top in a BertModel. */
static const char *bert_name(char *buf, size_t len, const char *prefix, const char *name)
{
    snprintf(buf, len, "%s%s", prefix, name);
    return buf;
}

/* A LayerNorm (NAME.weight / .bias, or the TensorFlow-era NAME.gamma / .beta) as F32. */
static int take_layer_norm(llm_model *m, const st_set *s, const char *name, llm_tensor *w, llm_tensor *b,
                           llm_err *err)
{
    char n[192];
    snprintf(n, sizeof(n), "%s.weight", name);
    int tf = st_set_find(s, n) == NULL;
    snprintf(n, sizeof(n), "%s.%s", name, tf ? "gamma" : "weight");
    if (llm_hf_take_norm(m, s, n, w, err) != 0)
        return -1;
    snprintf(n, sizeof(n), "%s.%s", name, tf ? "beta" : "bias");
    return llm_hf_take_norm(m, s, n, b, err);
}

/* A linear layer: NAME.weight as it is, NAME.bias as F32. */
static int take_linear(llm_model *m, const st_set *s, const char *name, llm_tensor *w, llm_tensor *b, llm_err *err)
{
    char n[192];
    snprintf(n, sizeof(n), "%s.weight", name);
    if (llm_hf_take(m, s, n, w, 1, err) != 0)
        return -1;
    snprintf(n, sizeof(n), "%s.bias", name);
    return llm_hf_take_norm(m, s, n, b, err);
}

/* BertForSequenceClassification's head: pooler (dense, tanh) and classifier on [CLS], as the GGUF loader
 * reads cls / cls.output; XLMRobertaForSequenceClassification's: classifier.dense (tanh) and
 * classifier.out_proj, the same math. n_cls = num_labels. */
static int cross_encoder_head(llm_model *m, const st_set *s, const char *prefix, llm_err *err)
{
    int roberta = st_set_find(s, "classifier.out_proj.weight") != NULL;
    const char *out_w = roberta ? "classifier.out_proj.weight" : "classifier.weight";
    const char *out_b = roberta ? "classifier.out_proj.bias" : "classifier.bias";
    const st_tensor *t = st_set_find(s, out_w);
    int d = m->cfg.dim;
    if (t->n_dims != 2 || !st_is_float(t) || t->shape[0] < 1 || t->shape[0] > LLM_MODEL_MAX_CLS ||
        d > LLM_MODEL_MAX_POOLER) {
        llm_seterr(err, "%s: a BERT cross-encoder needs %s of 1 to %d rows (and a width up to %d)", m->path, out_w,
                   LLM_MODEL_MAX_CLS, LLM_MODEL_MAX_POOLER);
        return -1;
    }
    int n = (int)t->shape[0];
    char pw[64], pb[64];
    if (roberta) {
        snprintf(pw, sizeof(pw), "classifier.dense.weight");
        snprintf(pb, sizeof(pb), "classifier.dense.bias");
    } else {
        bert_name(pw, sizeof(pw), prefix, "pooler.dense.weight");
        bert_name(pb, sizeof(pb), prefix, "pooler.dense.bias");
    }
    if (llm_hf_take_f32(m, s, out_w, d, n, 1, &m->cls, err) || llm_hf_take_f32(m, s, out_b, n, 1, 1, &m->cls_b, err) ||
        llm_hf_take_f32(m, s, pw, d, d, 1, &m->cls_dense, err) ||
        llm_hf_take_f32(m, s, pb, d, 1, 1, &m->cls_dense_b, err))
        return -1;
    m->n_cls = n;
    return 0;
}

int llm_hf_bert_tensors(llm_model *m, const st_set *s, llm_err *err)
{
    llm_config *c = &m->cfg;
    const char *pre = st_set_find(s, "bert.embeddings.word_embeddings.weight") != NULL      ? "bert."
                      : st_set_find(s, "roberta.embeddings.word_embeddings.weight") != NULL ? "roberta."
                                                                                              : "";
    char n[192], ln[160];
    if (llm_hf_take(m, s, bert_name(n, sizeof(n), pre, "embeddings.word_embeddings.weight"), &m->tok_embd, 1,
                    err) ||
        llm_hf_take(m, s, bert_name(n, sizeof(n), pre, "embeddings.position_embeddings.weight"), &m->pos_embd, 1,
                    err) ||
        llm_hf_take(m, s, bert_name(n, sizeof(n), pre, "embeddings.token_type_embeddings.weight"),
                    &m->type_embd, 1, err) ||
        take_layer_norm(m, s, bert_name(ln, sizeof(ln), pre, "embeddings.LayerNorm"), &m->embd_norm,
                        &m->embd_norm_b, err))
        return -1;
    if (m->pos_offset > 0) { /* RoBERTa: position p is row padding_idx + 1 + p */
        if (m->pos_embd.ne[1] < c->seq_len + m->pos_offset) {
            llm_seterr(err, "%s: %lld position rows for %d positions after the padding's %d", m->path,
                       (long long)m->pos_embd.ne[1], c->seq_len, m->pos_offset);
            return -1;
        }
        m->pos_embd.data = (const uint8_t *)m->pos_embd.data +
                           (size_t)m->pos_offset * llm_dtype_row_bytes(m->pos_embd.type, (uint64_t)m->pos_embd.ne[0]);
        m->pos_embd.ne[1] -= m->pos_offset;
    }
    if (llm_encoder_embeddings(m, err) != 0)
        return -1;
    m->layers = calloc((size_t)c->n_layers, sizeof(llm_layer));
    if (llm_model_own(m, m->layers, err) != 0)
        return -1;
    for (int l = 0; l < c->n_layers; l++) {
        llm_layer *L = &m->layers[l];
        static const char *const lin[6] = { "attention.self.query", "attention.self.key", "attention.self.value",
                                            "attention.output.dense", "intermediate.dense", "output.dense" };
        llm_tensor *w[6] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_up, &L->w_down };
        llm_tensor *b[6] = { &L->bq, &L->bk, &L->bv, &L->bo, &L->b_up, &L->b_down };
        for (int i = 0; i < 6; i++) {
            char base[160];
            snprintf(base, sizeof(base), "%sencoder.layer.%d.%s", pre, l, lin[i]);
            if (take_linear(m, s, base, w[i], b[i], err) != 0)
                return -1;
        }
        snprintf(ln, sizeof(ln), "%sencoder.layer.%d.attention.output.LayerNorm", pre, l);
        if (take_layer_norm(m, s, ln, &L->attn_norm, &L->attn_norm_b, err) != 0)
            return -1;
        snprintf(ln, sizeof(ln), "%sencoder.layer.%d.output.LayerNorm", pre, l);
        if (take_layer_norm(m, s, ln, &L->ffn_norm, &L->ffn_norm_b, err) != 0)
            return -1;
        L->nope = 1; /* positions come from the embedding, not rope */
    }
    if (llm_model_validate(m, err) != 0 ||
        ((st_set_find(s, "classifier.weight") != NULL || st_set_find(s, "classifier.out_proj.weight") != NULL) &&
         cross_encoder_head(m, s, pre, err) != 0))
        return -1;
    /* sentence-transformers' 1_Pooling says mean / CLS; otherwise (and for a cross-encoder's head) [CLS] */
    if (m->n_cls > 0 || m->pooling == LLM_POOL_NONE)
        m->pooling = LLM_POOL_CLS;
    return 0;
}

void llm_hf_bert_tokens(llm_model *m)
{
    llm_config *c = &m->cfg;
    if (m->tok == NULL)
        return; /* token ids only: every token type 0 */
    int cls = llm_tok_bos(m->tok), sep = llm_tok_eos(m->tok);
    c->bos_id = cls < c->vocab_size ? cls : -1;
    c->eos_id = c->sep_id = sep < c->vocab_size ? sep : -1;
}
