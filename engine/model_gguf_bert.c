/* GGUF loader for "bert" (BERT-family embedding models as llama.cpp converts them: bge, all-MiniLM, e5,
 * gte, ...): bert.* hyper-parameters, learned positions and token types, a LayerNorm'd embedding, post-norm
 * blocks with a bias on every projection (llm_config.encoder says what the forward does with them); and
 * "nomic-bert" (nomic-embed-text v1 / v1.5): the same blocks without biases, positions by rope (NeoX halves,
 * nomic-bert.rope.freq_base) instead of learned rows, q|k|v fused in attn_qkv, and a SwiGLU FFN (ffn_gate,
 * ffn_up, ffn_down); and "jina-bert-v2" (jina-embeddings-v2 small / base): BERT's blocks without positions
 * (ALiBi: llm_config.alibi_max_bias) and with a GELU-gated FFN (ffn_gate activated, times ffn_up, no bias on
 * either). The variants with q / k LayerNorms or a second attention norm (jina's code, German, Spanish models)
 * are refused. */
#include "model.h"
#include "model_priv.h"
#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A LayerNorm's weight and bias (NAME.weight, NAME.bias) as F32. */
static int take_layer_norm(llm_model *m, const char *name, llm_tensor *w, llm_tensor *b, llm_err *err)
{
    char n[96];
    snprintf(n, sizeof(n), "%s.weight", name);
    if (llm_gguf_take_norm(m, n, w, err) != 0)
        return -1;
    snprintf(n, sizeof(n), "%s.bias", name);
    return llm_gguf_take_vec(m, n, b, 1, err);
}

enum { KIND_BERT, KIND_NOMIC, KIND_JINA };

static int take_layer(llm_model *m, int l, llm_layer *L, int kind, llm_err *err)
{
    const int nomic = kind == KIND_NOMIC, jina = kind == KIND_JINA;
    static const char *const mats[7] = { "attn_q", "attn_k", "attn_v", "attn_output", "ffn_up", "ffn_down",
                                         "ffn_gate" };
    llm_tensor *w[7] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_up, &L->w_down, &L->w_gate };
    llm_tensor *b[6] = { &L->bq, &L->bk, &L->bv, &L->bo, &L->b_up, &L->b_down };
    char n[96];
    if (nomic) { /* q|k|v stacked (no biases: nomic's projections have none) */
        const int64_t rows[3] = { m->cfg.dim, m->cfg.dim, m->cfg.dim };
        if (llm_gguf_take_fused(m, l, "attn_qkv", rows, 3, w, err) != 0)
            return -1;
    }
    for (int i = nomic ? 3 : 0; i < (nomic || jina ? 7 : 6); i++) {
        snprintf(n, sizeof(n), "blk.%d.%s.weight", l, mats[i]);
        if (llm_gguf_take(m, n, w[i], 1, err) != 0)
            return -1;
        snprintf(n, sizeof(n), "blk.%d.%s.bias", l, mats[i]);
        /* (jina's gated_layers, ffn_gate | ffn_up, have no bias) */
        if (i < 6 && llm_gguf_take_vec(m, n, b[i], !nomic && !(jina && i == 4), err) != 0)
            return -1;
    }
    static const char *const foreign[3][3] = { { "ffn_gate.weight" }, { "attn_qkv.bias" },
                                               { "attn_q_norm.weight", "attn_k_norm.weight", "attn_norm_2.weight" } };
    for (int i = 0; i < 3 && foreign[kind][i] != NULL; i++) { /* (jina-bert's GLU in a bert file; a nomic file
                                   * with q/k/v biases; jina's variants with q / k norms or a second attention norm) */
        snprintf(n, sizeof(n), "blk.%d.%s", l, foreign[kind][i]);
        if (gguf_find_tensor(m->gguf, n) != NULL) {
            llm_seterr(err, "%s: tensor %s is not supported in %s", m->path, n, m->arch);
            return -1;
        }
    }
    char ln[64];
    snprintf(ln, sizeof(ln), "blk.%d.attn_output_norm", l);
    if (take_layer_norm(m, ln, &L->attn_norm, &L->attn_norm_b, err) != 0)
        return -1;
    snprintf(ln, sizeof(ln), "blk.%d.layer_output_norm", l);
    if (take_layer_norm(m, ln, &L->ffn_norm, &L->ffn_norm_b, err) != 0)
        return -1;
    L->nope = !nomic; /* BERT's positions come from the embedding, nomic's from rope, jina's from ALiBi */
    return 0;
}

/* A tensor of rows x cols (rows 1 and cols given: a vector of cols) as owned F32; absent: *out NULL unless
 * required. */
static int take_f32(llm_model *m, const char *name, int64_t cols, int64_t rows, int required, const float **out,
                    llm_err *err)
{
    llm_tensor t = { 0 };
    *out = NULL;
    if (llm_gguf_take(m, name, &t, required, err) != 0)
        return -1;
    if (t.data == NULL && t.src == NULL)
        return 0;
    return llm_model_f32_copy(m, &t, name, cols, rows, out, err);
}

/* A cross-encoder's head (pooling type rank, as llama.cpp converts BertForSequenceClassification): the
 * pooler cls.weight / cls.bias ([dim x dim], then tanh; optional) and the classifier cls.output.weight /
 * .bias (1 to LLM_MODEL_MAX_CLS rows). */
static int cross_encoder_head(llm_model *m, llm_err *err)
{
    const gguf_tensor *t = gguf_find_tensor(m->gguf, "cls.output.weight");
    int d = m->cfg.dim;
    if (t == NULL || t->ne[1] < 1 || t->ne[1] > LLM_MODEL_MAX_CLS || d > LLM_MODEL_MAX_POOLER) {
        llm_seterr(err, "%s: a BERT cross-encoder (pooling type rank) needs cls.output.weight of 1 to %d rows (and a "
                   "width up to %d)", m->path, LLM_MODEL_MAX_CLS, LLM_MODEL_MAX_POOLER);
        return -1;
    }
    int n = (int)t->ne[1];
    if (take_f32(m, "cls.output.weight", d, n, 1, &m->cls, err) || take_f32(m, "cls.output.bias", n, 1, 0, &m->cls_b, err) ||
        take_f32(m, "cls.weight", d, d, 0, &m->cls_dense, err) || take_f32(m, "cls.bias", d, 1, 0, &m->cls_dense_b, err))
        return -1;
    m->n_cls = n;
    return 0;
}

int llm_gguf_encoder_dims(llm_model *m, int def_ctx, llm_err *err)
{
    llm_config *c = &m->cfg;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof(key), "%s." suffix, m->arch), key)
    gguf_get_str(m->gguf, "general.name", m->name, sizeof(m->name));
    int causal = 0;
    if (gguf_get_bool(m->gguf, KEY("attention.causal"), &causal) == 0 && causal) {
        llm_seterr(err, "%s: a causal %s (%s true) is not supported", m->path, m->arch, key);
        return -1;
    }
    if (llm_gguf_get_int(m, KEY("embedding_length"), &c->dim, 0, 1, err) ||
        llm_gguf_get_int(m, KEY("block_count"), &c->n_layers, 0, 1, err) ||
        llm_gguf_get_int(m, KEY("feed_forward_length"), &c->hidden_dim, 0, 1, err) ||
        llm_gguf_get_int(m, KEY("attention.head_count"), &c->n_heads, 0, 1, err) ||
        llm_gguf_get_int(m, KEY("attention.head_count_kv"), &c->n_kv_heads, c->n_heads, 0, err) ||
        llm_gguf_get_int(m, KEY("context_length"), &c->seq_len, def_ctx, 0, err))
        return -1;
#undef KEY
    if (c->n_layers <= 0 || c->n_layers > 4096 || c->n_heads <= 0 || c->dim % c->n_heads != 0 || c->seq_len < 2) {
        llm_seterr(err, "%s: bad %s config: dim %d, %d heads, %d blocks, context %d", m->path, m->arch, c->dim,
                   c->n_heads, c->n_layers, c->seq_len);
        return -1;
    }
    c->head_dim = c->dim / c->n_heads;
    return 0;
}

int llm_gguf_load_bert(llm_model *m, llm_err *err)
{
    gguf_ctx *g = m->gguf;
    llm_config *c = &m->cfg;
    const int nomic = strcmp(m->arch, "nomic-bert") == 0, jina = strcmp(m->arch, "jina-bert-v2") == 0;
    const int kind = nomic ? KIND_NOMIC : jina ? KIND_JINA : KIND_BERT;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof(key), "%s." suffix, m->arch), key)
    if (llm_gguf_encoder_dims(m, nomic ? 2048 : jina ? 8192 : 512, err) != 0)
        return -1;
    c->encoder = 1;
    c->n_kv_heads = c->n_heads;
    c->norm_eps = 1e-12f;
    gguf_get_f32(g, KEY("attention.layer_norm_epsilon"), &c->norm_eps);
    c->rope_theta = 1000.0f; /* (BERT: no rope, every layer is nope; nomic-embed-text's base, when absent) */
    gguf_get_f32(g, KEY("rope.freq_base"), &c->rope_theta);
    c->rope_layout = LLM_ROPE_HALF; /* NeoX: llama.cpp rotates nomic-bert's halves */
    if (!(c->rope_theta > 1.0f && c->rope_theta < 1e12f)) {
        llm_seterr(err, "%s: bad %s %g", m->path, KEY("rope.freq_base"), (double)c->rope_theta);
        return -1;
    }
    if (jina) { /* ALiBi with jina's (and llama.cpp's) maximum bias, a GELU-gated FFN */
        c->alibi_max_bias = 8.0f;
        c->act = LLM_ACT_GELU_ERF;
    }
    /* BERT's [CLS], nomic's and jina's mean, when not said */
    uint32_t pooling = nomic || jina ? LLM_POOL_MEAN : LLM_POOL_CLS;
    gguf_get_u32(g, KEY("pooling_type"), &pooling);
#undef KEY
    /* a cross-encoder's head reads [CLS] too */
    m->pooling = pooling == LLM_POOL_MEAN || pooling == LLM_POOL_LAST ? (int)pooling : LLM_POOL_CLS;
    int64_t id;
    c->bos_id = c->eos_id = c->sep_id = -1;
    if (gguf_get_i64(g, "tokenizer.ggml.bos_token_id", &id) == 0 && id >= 0 && id < INT32_MAX)
        c->bos_id = (int)id;
    if (gguf_get_i64(g, "tokenizer.ggml.eos_token_id", &id) == 0 && id >= 0 && id < INT32_MAX)
        c->eos_id = c->sep_id = (int)id;
    if (gguf_get_i64(g, "tokenizer.ggml.seperator_token_id", &id) == 0 && id >= 0 && id < INT32_MAX)
        c->sep_id = (int)id;

    if (llm_gguf_take(m, "token_embd.weight", &m->tok_embd, 1, err) ||
        (kind == KIND_BERT && llm_gguf_take(m, "position_embd.weight", &m->pos_embd, 1, err)) ||
        llm_gguf_take(m, "token_types.weight", &m->type_embd, 1, err) ||
        take_layer_norm(m, "token_embd_norm", &m->embd_norm, &m->embd_norm_b, err))
        return -1;
    if (llm_encoder_embeddings(m, err) != 0)
        return -1;
    c->tied_embeddings = 1;         /* no language-model head: output is the embedding, never used */

    m->layers = calloc((size_t)c->n_layers, sizeof(llm_layer));
    if (llm_model_own(m, m->layers, err) != 0)
        return -1;
    for (int l = 0; l < c->n_layers; l++)
        if (take_layer(m, l, &m->layers[l], kind, err) != 0)
            return -1;
    if (llm_model_validate(m, err) != 0 || (pooling == LLM_POOL_RANK && cross_encoder_head(m, err) != 0))
        return -1;
    if (c->sep_id >= c->vocab_size) {
        llm_seterr(err, "%s: separator id %d outside the vocabulary of %d", m->path, c->sep_id, c->vocab_size);
        return -1;
    }
    return 0;
}
