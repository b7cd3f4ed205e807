/* llama2.c checkpoint loader: 7 int32 header, then f32 tensors in run.c's order. */
#include "model.h"
#include "model_priv.h"
#include "tokenizer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    const uint8_t *base;
    size_t size, pos;
} cursor;

/* Next n floats (n already overflow-checked by the caller's size check). */
static const float *next(cursor *c, uint64_t n)
{
    const float *p = (const float *)(c->base + c->pos);
    c->pos += (size_t)n * 4;
    return p;
}

static void mat(llm_tensor *t, const float *p, int64_t rows, int64_t cols)
{
    t->type = LLM_F32;
    t->ne[0] = cols;
    t->ne[1] = rows;
    t->data = p;
}

static int find_tokenizer(llm_model *m, int vocab, llm_err *err)
{
    char dir[1024], cand[1200];
    snprintf(dir, sizeof(dir), "%s", m->path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = 0;
    else
        snprintf(dir, sizeof(dir), ".");
    const char *names[2] = { "tokenizer.bin", NULL };
    char tokn[32];
    snprintf(tokn, sizeof(tokn), "tok%d.bin", vocab);
    names[1] = tokn;
    for (int i = 0; i < 2; i++) {
        snprintf(cand, sizeof(cand), "%s/%s", dir, names[i]);
        if (access(cand, R_OK) != 0)
            continue;
        m->tok = llm_tok_load_llama2c(cand, vocab, err);
        if (m->tok == NULL)
            return -1;
        size_t n = strlen(cand);
        if (n < sizeof(m->tok_path))
            memcpy(m->tok_path, cand, n + 1);
        return 0;
    }
    return 0; /* none beside the checkpoint: the caller may pass one */
}

static int load(llm_model *m, llm_err *err)
{
    size_t size;
    const uint8_t *base = llm_model_map_file(m, m->path, &size, err);
    if (base == NULL)
        return -1;
    m->file_bytes = size;
    int32_t h[7];
    if (size < sizeof(h)) {
        llm_seterr(err, "%s: truncated llama2.c checkpoint (%zu bytes, header needs 28)", m->path, size);
        return -1;
    }
    memcpy(h, base, sizeof(h));
    llm_config *c = &m->cfg;
    int shared = h[5] > 0;
    c->dim = h[0]; c->hidden_dim = h[1]; c->n_layers = h[2]; c->n_heads = h[3]; c->n_kv_heads = h[4];
    c->vocab_size = h[5] == INT32_MIN ? 0 : (h[5] < 0 ? -h[5] : h[5]);
    c->seq_len = h[6];
    if (c->dim <= 0 || c->dim > 65536 || c->hidden_dim <= 0 || c->hidden_dim > 262144 || c->n_layers <= 0 ||
        c->n_layers > 1024 || c->n_heads <= 0 || c->n_kv_heads <= 0 || c->n_kv_heads > c->n_heads ||
        c->vocab_size <= 0 || c->vocab_size > (1 << 22) || c->seq_len <= 0 || c->seq_len > (1 << 22) ||
        c->dim % c->n_heads != 0) {
        llm_seterr(err, "%s: not a llama2.c checkpoint (header dim %d hidden %d layers %d heads %d kv %d vocab %d "
                   "seq %d)", m->path, h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
        return -1;
    }
    uint64_t D = (uint64_t)c->dim, H = (uint64_t)c->hidden_dim, L = (uint64_t)c->n_layers, V = (uint64_t)c->vocab_size;
    uint64_t hs = D / (uint64_t)c->n_heads, kv = hs * (uint64_t)c->n_kv_heads;
    /* Bounded above by the checks, so no overflow in 64 bits. */
    uint64_t floats = V * D + L * D + L * D * D + 2 * L * D * kv + L * D * D + L * D + 3 * L * D * H + D +
                      (uint64_t)c->seq_len * hs + (shared ? 0 : V * D);
    if (floats > (size - sizeof(h)) / 4) {
        llm_seterr(err, "%s: truncated llama2.c checkpoint: header needs %llu bytes of weights, file has %zu",
                   m->path, (unsigned long long)floats * 4, size - sizeof(h));
        return -1;
    }
    c->head_dim = (int)hs;
    c->rope_theta = 10000.0f;
    c->norm_eps = 1e-5f;
    c->rope_layout = LLM_ROPE_ADJACENT;
    c->bos_id = 1;
    c->eos_id = 2;
    snprintf(m->name, sizeof(m->name), "llama2.c checkpoint");
    m->layers = calloc((size_t)L, sizeof(llm_layer));
    if (llm_model_own(m, m->layers, err) != 0)
        return -1;
    cursor cur = { base, size, sizeof(h) };
    mat(&m->tok_embd, next(&cur, V * D), (int64_t)V, (int64_t)D);
    const float *att_norm = next(&cur, L * D);
    const float *wq = next(&cur, L * D * D), *wk = next(&cur, L * D * kv), *wv = next(&cur, L * D * kv);
    const float *wo = next(&cur, L * D * D);
    const float *ffn_norm = next(&cur, L * D);
    const float *w1 = next(&cur, L * D * H), *w2 = next(&cur, L * H * D), *w3 = next(&cur, L * D * H);
    const float *fin = next(&cur, D);
    next(&cur, (uint64_t)c->seq_len * hs); /* freq_cis_real + freq_cis_imag (seq_len * hs/2 each) */
    if (!shared)
        mat(&m->output, next(&cur, V * D), (int64_t)V, (int64_t)D);
    for (uint64_t l = 0; l < L; l++) {
        llm_layer *Y = &m->layers[l];
        char what[48];
        snprintf(what, sizeof(what), "layer %d rms_att", (int)l);
        if (llm_model_norm_f32(m, &Y->attn_norm, LLM_F32, att_norm + l * D, (int64_t)D, what, err))
            return -1;
        snprintf(what, sizeof(what), "layer %d rms_ffn", (int)l);
        if (llm_model_norm_f32(m, &Y->ffn_norm, LLM_F32, ffn_norm + l * D, (int64_t)D, what, err))
            return -1;
        mat(&Y->wq, wq + l * D * D, (int64_t)D, (int64_t)D);
        mat(&Y->wk, wk + l * D * kv, (int64_t)kv, (int64_t)D);
        mat(&Y->wv, wv + l * D * kv, (int64_t)kv, (int64_t)D);
        mat(&Y->wo, wo + l * D * D, (int64_t)D, (int64_t)D);
        mat(&Y->w_gate, w1 + l * D * H, (int64_t)H, (int64_t)D);
        mat(&Y->w_down, w2 + l * H * D, (int64_t)D, (int64_t)H);
        mat(&Y->w_up, w3 + l * D * H, (int64_t)H, (int64_t)D);
    }
    if (llm_model_norm_f32(m, &m->out_norm, LLM_F32, fin, (int64_t)D, "rms_final", err) != 0)
        return -1;
    if (llm_model_validate(m, err) != 0)
        return -1;
    return find_tokenizer(m, c->vocab_size, err);
}

llm_model *llm_model_load_llama2c(const char *path, llm_err *err)
{
    llm_model *m = llm_model_alloc("llama2c", path, err);
    if (m == NULL)
        return NULL;
    if (load(m, err) != 0) {
        llm_model_free(m);
        return NULL;
    }
    return m;
}
