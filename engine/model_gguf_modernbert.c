/* GGUF loader for "modern-bert" (ModernBERT as llama.cpp converts it: modernbert-embed-base, gte-modernbert-base,
 * ...): a pre-norm encoder that runs on the decoder's path without the causal mask (llm_config.bidirectional),
 * its norms LayerNorms without a bias (llm_config.layer_norm: the embedding's token_embd_norm, each layer's
 * attn_norm and ffn_norm, output_norm; the first layer has no attn_norm), q|k|v fused in attn_qkv, GeGLU with
 * gate|up fused in ffn_up (the first half through the exact GELU, times the second), NeoX rope on every layer,
 * and a symmetric sliding window (sliding_window / 2 each side) on all layers but every
 * sliding_window_pattern-th (0, 3, 6, ...: global), the windowed ones with their own rope base
 * (rope.freq_base_swa). No biases anywhere; files with any are refused, as are ModernBERT rerankers' heads. */
#include "model.h"
#include "model_priv.h"
#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int llm_modern_bert_act(const char *name)
{
    if (strcmp(name, "gelu") == 0) /* transformers' "gelu": the exact, erf one */
        return LLM_ACT_GELU_ERF;
    if (strcmp(name, "gelu_pytorch_tanh") == 0 || strcmp(name, "gelu_new") == 0 || strcmp(name, "gelu_fast") == 0)
        return LLM_ACT_GELU_TANH;
    if (strcmp(name, "silu") == 0 || strcmp(name, "swish") == 0)
        return LLM_ACT_SILU;
    return -1;
}

/* hidden_activation, when the file says it (IBM's Granite Embedding R2 models: SwiGLU) */
static int activation(llm_model *m, const char *key, llm_err *err)
{
    char act[32] = "gelu";
    gguf_get_str(m->gguf, key, act, sizeof(act));
    if ((m->cfg.act = llm_modern_bert_act(act)) < 0) {
        llm_seterr(err, "%s: %s \"%s\" is not supported (gelu, gelu_pytorch_tanh, silu)", m->path, key, act);
        return -1;
    }
    return 0;
}

static int take_layer(llm_model *m, int l, llm_layer *L, int pattern, llm_err *err)
{
    const llm_config *c = &m->cfg;
    char n[96];
    static const char *const biases[] = { "attn_qkv.bias", "attn_output.bias", "ffn_up.bias", "ffn_down.bias",
                                          "attn_norm.bias", "ffn_norm.bias" };
    for (size_t i = 0; i < sizeof(biases) / sizeof(biases[0]); i++) {
        snprintf(n, sizeof(n), "blk.%d.%s", l, biases[i]);
        if (gguf_find_tensor(m->gguf, n) != NULL) {
            llm_seterr(err, "%s: tensor %s is not supported (ModernBERT without biases only)", m->path, n);
            return -1;
        }
    }
    snprintf(n, sizeof(n), "blk.%d.attn_norm.weight", l);
    if ((l > 0 || gguf_find_tensor(m->gguf, n) != NULL) && llm_gguf_take_norm(m, n, &L->attn_norm, err) != 0)
        return -1;
    const int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    const int64_t qkv[3] = { q, kv, kv }, gu[2] = { c->hidden_dim, c->hidden_dim };
    llm_tensor *qd[3] = { &L->wq, &L->wk, &L->wv }, *gd[2] = { &L->w_gate, &L->w_up };
    if (llm_gguf_take_fused(m, l, "attn_qkv", qkv, 3, qd, err) != 0 || llm_gguf_take_fused(m, l, "ffn_up", gu, 2, gd, err))
        return -1;
    snprintf(n, sizeof(n), "blk.%d.attn_output.weight", l);
    if (llm_gguf_take(m, n, &L->wo, 1, err) != 0)
        return -1;
    snprintf(n, sizeof(n), "blk.%d.ffn_norm.weight", l);
    if (llm_gguf_take_norm(m, n, &L->ffn_norm, err) != 0)
        return -1;
    snprintf(n, sizeof(n), "blk.%d.ffn_down.weight", l);
    if (llm_gguf_take(m, n, &L->w_down, 1, err) != 0)
        return -1;
    L->swa = c->swa_window > 0 && l % pattern != 0; /* llama.cpp's dense-first pattern */
    return 0;
}

int llm_gguf_load_modern_bert(llm_model *m, llm_err *err)
{
    gguf_ctx *g = m->gguf;
    llm_config *c = &m->cfg;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof(key), "%s." suffix, m->arch), key)
    if (llm_gguf_encoder_dims(m, 8192, err) != 0)
        return -1;
    c->bidirectional = 1;
    c->layer_norm = 1;
    c->rope_layout = LLM_ROPE_HALF;
    c->norm_eps = 1e-5f;
    gguf_get_f32(g, KEY("attention.layer_norm_epsilon"), &c->norm_eps);
    c->rope_theta = 160000.0f; /* ModernBERT's global_rope_theta */
    gguf_get_f32(g, KEY("rope.freq_base"), &c->rope_theta);
    if (!(c->rope_theta > 1.0f && c->rope_theta < 1e12f) || !(c->norm_eps > 0.0f && c->norm_eps < 1.0f)) {
        llm_seterr(err, "%s: bad rope.freq_base %g or layer_norm_epsilon %g", m->path, (double)c->rope_theta,
                   (double)c->norm_eps);
        return -1;
    }
    uint32_t win = 0, pattern = 3;
    gguf_get_u32(g, KEY("attention.sliding_window"), &win);
    const gguf_kv *pk = gguf_find_kv(g, KEY("attention.sliding_window_pattern"));
    if (win > (1u << 30) || (pk != NULL && (gguf_get_u32(g, key, &pattern) != 0 || pattern == 0 || pattern > 4096))) {
        llm_seterr(err, "%s: bad sliding window %u or %s (one global layer every N, N from 1 to 4096)", m->path, win,
                   key);
        return -1;
    }
    c->swa_window = (int)win;
    if (win > 0) { /* (absent: the windowed layers rotate as the global ones, as llama.cpp does) */
        c->rope_theta_swa = c->rope_theta;
        gguf_get_f32(g, KEY("rope.freq_base_swa"), &c->rope_theta_swa);
        if (!(c->rope_theta_swa > 1.0f && c->rope_theta_swa < 1e12f)) {
            llm_seterr(err, "%s: bad %s %g", m->path, key, (double)c->rope_theta_swa);
            return -1;
        }
    }
    if (activation(m, KEY("hidden_activation"), err) != 0)
        return -1;
    uint32_t pooling = LLM_POOL_MEAN;
    gguf_get_u32(g, KEY("pooling_type"), &pooling);
#undef KEY
    if (pooling == LLM_POOL_RANK || gguf_find_tensor(g, "cls.output.weight") != NULL) {
        llm_seterr(err, "%s: a ModernBERT reranker's head (pooling type rank, cls.*) is not supported: embedding "
                   "models only", m->path);
        return -1;
    }
    m->pooling = pooling == LLM_POOL_CLS || pooling == LLM_POOL_LAST ? (int)pooling : LLM_POOL_MEAN;
    int64_t id;
    c->bos_id = c->eos_id = c->sep_id = -1;
    if (gguf_get_i64(g, "tokenizer.ggml.bos_token_id", &id) == 0 && id >= 0 && id < INT32_MAX)
        c->bos_id = (int)id;
    if (gguf_get_i64(g, "tokenizer.ggml.eos_token_id", &id) == 0 && id >= 0 && id < INT32_MAX)
        c->eos_id = (int)id;

    if (gguf_find_tensor(g, "token_embd_norm.bias") != NULL || gguf_find_tensor(g, "output_norm.bias") != NULL) {
        llm_seterr(err, "%s: norms with a bias are not supported (ModernBERT without biases only)", m->path);
        return -1;
    }
    if (llm_gguf_take(m, "token_embd.weight", &m->tok_embd, 1, err) ||
        llm_gguf_take_norm(m, "token_embd_norm.weight", &m->embd_norm, err) ||
        llm_gguf_take_norm(m, "output_norm.weight", &m->out_norm, err))
        return -1;
    if (m->tok_embd.ne[1] > (1 << 24)) {
        llm_seterr(err, "%s: token_embd has %lld rows (vocab too large)", m->path, (long long)m->tok_embd.ne[1]);
        return -1;
    }
    c->vocab_size = (int)m->tok_embd.ne[1];
    c->tied_embeddings = 1; /* no language-model head: an embedding model */

    m->layers = calloc((size_t)c->n_layers, sizeof(llm_layer));
    if (llm_model_own(m, m->layers, err) != 0)
        return -1;
    for (int l = 0; l < c->n_layers; l++)
        if (take_layer(m, l, &m->layers[l], (int)pattern, err) != 0)
            return -1;
    return llm_model_validate(m, err);
}
