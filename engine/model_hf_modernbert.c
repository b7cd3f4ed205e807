/* Hugging Face ModernBERT directories (config.json model_type "modernbert"): ModernBertModel as
 * sentence-transformers saves modernbert-embed-base or gte-modernbert-base (tensors embeddings.*, layers.N.*,
 * final_norm), and ModernBertForMaskedLM checkpoints (ModernBERT-base: the same under "model.", the MLM head
 * beside it left out). Loaded into the llm_model the GGUF loader (model_gguf_modernbert.c) fills, arch
 * "modern-bert", so everything after the load is the same: a pre-norm encoder on the decoder's path, its
 * norms LayerNorms without a bias, q|k|v fused in Wqkv and the GLU's input|gate in Wi (row views into the
 * file), a symmetric window on all layers but every global_attn_every_n_layers-th. Biases, classifier and
 * reranker heads are refused. */
#include "model.h"
#include "model_priv.h"
#include "tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 for a ModernBertForSequenceClassification (a reranker: gte-reranker-modernbert-base). */
static int modern_bert_rank(const cJSON *root)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(root, "architectures"))
        if (cJSON_IsString(a) && strcmp(a->valuestring, "ModernBertForSequenceClassification") == 0)
            return 1;
    return 0;
}

/* A rope base: rope_parameters.KIND.rope_theta (newer transformers), else the flat key (older); absent: def,
 * null (local_rope_theta: none of its own): if_null. 0, or -1 + err. */
static int rope_base(const cJSON *root, const char *kind, const char *flat, float def, float if_null, float *out,
                     const char *path, llm_err *err)
{
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "rope_parameters"),
                                                       kind);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, flat);
    if (cJSON_IsObject(rp)) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rp, "rope_type");
        if (ty != NULL && !(cJSON_IsString(ty) && strcmp(ty->valuestring, "default") == 0)) {
            llm_seterr(err, "%s: rope_parameters.%s.rope_type '%s' is not supported (default)", path, kind,
                       cJSON_IsString(ty) ? ty->valuestring : "?");
            return -1;
        }
        v = cJSON_GetObjectItemCaseSensitive(rp, "rope_theta");
    }
    *out = v == NULL ? def : cJSON_IsNull(v) ? if_null : cJSON_IsNumber(v) ? (float)v->valuedouble : -1.0f;
    if (!(*out > 1.0f && *out < 1e12f)) {
        llm_seterr(err, "%s: bad %s rope base (%s)", path, kind, flat);
        return -1;
    }
    return 0;
}

int llm_hf_modern_bert_config(llm_model *m, const cJSON *root, const char *path, llm_err *err)
{
    llm_config *c = &m->cfg;
    const cJSON *a;
    /* embedding models, and rerankers (a classifier's head after the pooling, llm_model_rank_apply) */
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(root, "architectures"))
        if (!cJSON_IsString(a) ||
            (strcmp(a->valuestring, "ModernBertModel") != 0 && strcmp(a->valuestring, "ModernBertForMaskedLM") != 0 &&
             strcmp(a->valuestring, "ModernBertForSequenceClassification") != 0)) {
            llm_seterr(err, "%s: architecture %s is not supported: ModernBERT embedding models and rerankers only "
                       "(ModernBertModel, ModernBertForMaskedLM, ModernBertForSequenceClassification)", path,
                       cJSON_IsString(a) ? a->valuestring : "?");
            return -1;
        }
    if (modern_bert_rank(root)) { /* its head: dense, GELU, LayerNorm, classifier on the mean or [CLS] */
        const cJSON *cp = cJSON_GetObjectItemCaseSensitive(root, "classifier_pooling");
        const cJSON *ca = cJSON_GetObjectItemCaseSensitive(root, "classifier_activation");
        int mean = !cJSON_IsString(cp) || strcmp(cp->valuestring, "mean") == 0;
        if ((cJSON_IsString(cp) && !mean && strcmp(cp->valuestring, "cls") != 0) ||
            (ca != NULL && !(cJSON_IsString(ca) && strcmp(ca->valuestring, "gelu") == 0))) {
            llm_seterr(err, "%s: a ModernBERT classifier with classifier_pooling '%s' and classifier_activation '%s' "
                       "is not supported (mean or cls; gelu)", path, cJSON_IsString(cp) ? cp->valuestring : "?",
                       cJSON_IsString(ca) ? ca->valuestring : "?");
            return -1;
        }
        m->pooling = mean ? LLM_POOL_MEAN : LLM_POOL_CLS;
    }
    static const char *const biases[] = { "norm_bias", "attention_bias", "mlp_bias" };
    for (size_t i = 0; i < sizeof(biases) / sizeof(biases[0]); i++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, biases[i]))) {
            llm_seterr(err, "%s: %s true is not supported (ModernBERT without biases only)", path, biases[i]);
            return -1;
        }
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_activation");
    c->act = cJSON_IsString(act) ? llm_modern_bert_act(act->valuestring) : act == NULL ? LLM_ACT_GELU_ERF : -1;
    if (c->act < 0) {
        llm_seterr(err, "%s: hidden_activation '%s' is not supported (gelu, gelu_pytorch_tanh, gelu_new, silu)", path,
                   cJSON_IsString(act) ? act->valuestring : "?");
        return -1;
    }
    int every = 3, cls = -1, sep = -1;
    if (llm_hf_cfg_int(root, "hidden_size", &c->dim, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "intermediate_size", &c->hidden_dim, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "num_hidden_layers", &c->n_layers, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "num_attention_heads", &c->n_heads, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "max_position_embeddings", &c->seq_len, 8192, 0, path, err) ||
        llm_hf_cfg_int(root, "local_attention", &c->swa_window, 128, 0, path, err) ||
        llm_hf_cfg_int(root, "global_attn_every_n_layers", &every, 3, 0, path, err) ||
        llm_hf_cfg_int(root, "bos_token_id", &c->bos_id, -1, 0, path, err) ||
        llm_hf_cfg_int(root, "eos_token_id", &c->eos_id, -1, 0, path, err) ||
        llm_hf_cfg_int(root, "cls_token_id", &cls, c->bos_id, 0, path, err) ||
        llm_hf_cfg_int(root, "sep_token_id", &sep, c->eos_id, 0, path, err))
        return -1;
    if (c->n_layers <= 0 || c->n_layers > 4096 || c->n_heads <= 0 || c->dim <= 0 || c->dim % c->n_heads != 0 ||
        c->seq_len < 2 || c->swa_window < 1 || every < 1 || every > 4096) {
        llm_seterr(err, "%s: bad modernbert config: hidden_size %d, %d heads, %d layers, %d positions, "
                   "local_attention %d, global_attn_every_n_layers %d", path, c->dim, c->n_heads, c->n_layers,
                   c->seq_len, c->swa_window, every);
        return -1;
    }
    /* (the windowed layers' base: local_rope_theta, null meaning the global one, as transformers reads it) */
    if (rope_base(root, "full_attention", "global_rope_theta", 160000.0f, -1.0f, &c->rope_theta, path, err) ||
        rope_base(root, "sliding_attention", "local_rope_theta", 10000.0f, c->rope_theta, &c->rope_theta_swa, path,
                  err))
        return -1;
    c->norm_eps = llm_hf_cfg_float(root, "norm_eps", 1e-5f);
    if (!(c->norm_eps > 0.0f && c->norm_eps < 1.0f)) {
        llm_seterr(err, "%s: bad norm_eps %g", path, (double)c->norm_eps);
        return -1;
    }
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->dim / c->n_heads;
    c->bos_id = cls; /* [CLS] text [SEP], as the tokenizer's post-processor writes an input */
    c->eos_id = sep;
    c->sep_id = -1;
    c->bidirectional = 1;
    c->layer_norm = 1;
    c->rope_layout = LLM_ROPE_HALF;
    c->tied_embeddings = 1; /* no language-model head: an embedding model */
    snprintf(m->arch, sizeof(m->arch), "modern-bert");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(root, "_name_or_path");
    snprintf(m->name, sizeof(m->name), "%s", cJSON_IsString(nm) && nm->valuestring[0] ? nm->valuestring : "modernbert");
    return 0;
}

/* Any bias or classifier tensor, which the model would run without: refused (the MLM head's, head.* and
 * decoder.bias, is not run and may stay; a reranker's, head.* and classifier.*, is). */
static int foreign_tensors(llm_model *m, const st_set *s, int rank, llm_err *err)
{
    for (size_t f = 0; f < s->n_files; f++)
        for (size_t i = 0; i < s->files[f]->n; i++) {
            const char *n = s->files[f]->t[i].name;
            size_t len = strlen(n);
            if (rank && (strncmp(n, "classifier.", 11) == 0 || strncmp(n, "head.", 5) == 0))
                continue;
            if (strncmp(n, "classifier.", 11) == 0) {
                llm_seterr(err, "%s: tensor %s: a ModernBERT classifier's head is not supported (embedding models "
                           "only)", m->path, n);
                return -1;
            }
            if (len > 5 && strcmp(n + len - 5, ".bias") == 0 && strncmp(n, "head.", 5) != 0 &&
                strncmp(n, "decoder.", 8) != 0) {
                llm_seterr(err, "%s: tensor %s is not supported (ModernBERT without biases only)", m->path, n);
                return -1;
            }
        }
    return 0;
}

/* ModernBertForSequenceClassification's head (at the top, beside "model."): head.dense (a bias with
 * classifier_bias), GELU, head.norm (no bias), classifier (num_labels rows and their biases). */
static int classifier_head(llm_model *m, const st_set *s, llm_err *err)
{
    const st_tensor *t = st_set_find(s, "classifier.weight");
    int d = m->cfg.dim;
    if (t == NULL || t->n_dims != 2 || !st_is_float(t) || t->shape[0] < 1 || t->shape[0] > LLM_MODEL_MAX_CLS ||
        d > LLM_MODEL_MAX_POOLER) {
        llm_seterr(err, "%s: a ModernBERT classifier needs classifier.weight of 1 to %d rows (and a width up to %d)",
                   m->path, LLM_MODEL_MAX_CLS, LLM_MODEL_MAX_POOLER);
        return -1;
    }
    int n = (int)t->shape[0];
    if (st_set_find(s, "head.norm.bias") != NULL) {
        llm_seterr(err, "%s: head.norm.bias is not supported (ModernBERT without biases only)", m->path);
        return -1;
    }
    if (llm_hf_take_f32(m, s, "classifier.weight", d, n, 1, &m->cls, err) ||
        llm_hf_take_f32(m, s, "classifier.bias", n, 1, 1, &m->cls_b, err) ||
        llm_hf_take_f32(m, s, "head.dense.weight", d, d, 1, &m->cls_dense, err) ||
        llm_hf_take_f32(m, s, "head.dense.bias", d, 1, 0, &m->cls_dense_b, err) ||
        llm_hf_take_f32(m, s, "head.norm.weight", d, 1, 1, &m->cls_norm, err))
        return -1;
    m->n_cls = n;
    return 0;
}

int llm_hf_modern_bert_tensors(llm_model *m, const st_set *s, const cJSON *root, llm_err *err)
{
    llm_config *c = &m->cfg;
    /* ModernBertForMaskedLM's encoder is under "model.", a bare ModernBertModel's at the top */
    const char *pre = st_set_find(s, "model.embeddings.tok_embeddings.weight") != NULL ? "model." : "";
    char n[160];
#define NAME(...) (snprintf(n, sizeof(n), __VA_ARGS__), n)
    const int rank = modern_bert_rank(root);
    if (foreign_tensors(m, s, rank, err) ||
        llm_hf_take(m, s, NAME("%sembeddings.tok_embeddings.weight", pre), &m->tok_embd, 1, err) ||
        llm_hf_take_norm(m, s, NAME("%sembeddings.norm.weight", pre), &m->embd_norm, err) ||
        llm_hf_take_norm(m, s, NAME("%sfinal_norm.weight", pre), &m->out_norm, err))
        return -1;
    if (m->tok_embd.ne[1] > (1 << 24)) {
        llm_seterr(err, "%s: tok_embeddings has %lld rows (vocab too large)", m->path, (long long)m->tok_embd.ne[1]);
        return -1;
    }
    c->vocab_size = (int)m->tok_embd.ne[1];
    int every = 3;
    llm_hf_cfg_int(root, "global_attn_every_n_layers", &every, 3, 0, m->path, err); /* (checked with the config) */
    m->layers = calloc((size_t)c->n_layers, sizeof(llm_layer));
    if (llm_model_own(m, m->layers, err) != 0)
        return -1;
    const int64_t q = (int64_t)c->n_heads * c->head_dim, qkv[3] = { q, q, q }, gu[2] = { c->hidden_dim, c->hidden_dim };
    for (int l = 0; l < c->n_layers; l++) {
        llm_layer *L = &m->layers[l];
        llm_tensor *qd[3] = { &L->wq, &L->wk, &L->wv }, *gd[2] = { &L->w_gate, &L->w_up };
        /* the first layer's attn_norm is an Identity (no tensor): it reads the normed embedding as it is */
        NAME("%slayers.%d.attn_norm.weight", pre, l);
        if ((l > 0 || st_set_find(s, n) != NULL) && llm_hf_take_norm(m, s, n, &L->attn_norm, err))
            return -1;
        /* Wi: the first half through the activation (w_gate), times the second (w_up), as GGUF's ffn_up */
        if (llm_hf_take_fused(m, s, NAME("%slayers.%d.attn.Wqkv.weight", pre, l), qkv, 3, qd, err) ||
            llm_hf_take(m, s, NAME("%slayers.%d.attn.Wo.weight", pre, l), &L->wo, 1, err) ||
            llm_hf_take_norm(m, s, NAME("%slayers.%d.mlp_norm.weight", pre, l), &L->ffn_norm, err) ||
            llm_hf_take_fused(m, s, NAME("%slayers.%d.mlp.Wi.weight", pre, l), gu, 2, gd, err) ||
            llm_hf_take(m, s, NAME("%slayers.%d.mlp.Wo.weight", pre, l), &L->w_down, 1, err))
            return -1;
        L->swa = l % every != 0; /* global: 0, every, 2 * every, ... */
    }
#undef NAME
    return llm_model_validate(m, err) != 0 || (rank && classifier_head(m, s, err) != 0) ? -1 : 0;
}

void llm_modern_bert_tokens(llm_model *m)
{
    if (m->tok != NULL)
        llm_tok_set_bos_eos(m->tok, m->cfg.bos_id, m->cfg.eos_id);
}
