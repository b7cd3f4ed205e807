/* A trained model whose matrices llama.cpp will K-quantise: stories260K
 * (64-wide rows, too narrow for the 256-element K-quant blocks) re-saved as
 * an equivalent F32 GGUF with 256-wide rows.
 *
 *   pad_model IN.gguf OUT.gguf
 *
 * Residual-stream element i moves to 4i and FFN element j to j*256/hidden;
 * every other element is zero, so each 32-element group of a padded row holds
 * real weights. Zeros add nothing to any product, SwiGLU of 0 is 0, and the
 * RMS over 4x the elements is halved, which norm weights / 2 and eps / 4
 * undo: the padded model computes the same logits. Attention shapes (heads x
 * head_dim) are unchanged: llama.attention.key_length keeps head_dim. */
#include "model.h"
#include "model_write.h"

#include <stdio.h>
#include <stdlib.h>

enum { WIDE = 256 };

/* dst[rmap(r)][cmap(c)] = src[r][c] * scale; everything else zero. */
static float *spread(const llm_tensor *t, int rows_out, int cols_out, int rstep, int cstep, int hidden, float scale)
{
    int rows = (int)t->ne[1], cols = (int)t->ne[0];
    float *src = malloc(sizeof(float) * (size_t)cols), *dst = calloc((size_t)rows_out * cols_out, sizeof(float));
    if (src == NULL || dst == NULL) {
        free(src), free(dst);
        return NULL;
    }
    const uint8_t *p = t->data;
    size_t rb = llm_dtype_row_bytes(t->type, (uint64_t)cols);
    for (int r = 0; r < rows; r++) {
        llm_row_to_f32(t->type, p + (size_t)r * rb, src, (size_t)cols);
        int rr = rstep ? r * rstep : r * WIDE / hidden;
        for (int c = 0; c < cols; c++) {
            int cc = cstep ? c * cstep : c * WIDE / hidden;
            dst[(size_t)rr * cols_out + cc] = src[c] * scale;
        }
    }
    free(src);
    return dst;
}

static int widen(llm_tensor *t, int rows_out, int cols_out, int rstep, int cstep, int hidden, float scale)
{
    float *d = spread(t, rows_out, cols_out, rstep, cstep, hidden, scale);
    if (d == NULL)
        return -1;
    t->type = LLM_F32;
    t->ne[0] = cols_out;
    t->ne[1] = rows_out;
    t->data = d; /* leaked with the process: a one-shot tool */
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: pad_model IN OUT.gguf\n");
        return 2;
    }
    llm_err err = { { 0 } };
    llm_model *m = llm_model_load(argv[1], NULL, &err);
    if (m == NULL) {
        fprintf(stderr, "pad_model: %s\n", err.msg);
        return 1;
    }
    llm_config *c = &m->cfg;
    int dim = c->dim, hidden = c->hidden_dim, q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    if (WIDE % dim != 0 || hidden > WIDE || dim > WIDE) {
        fprintf(stderr, "pad_model: dim %d / hidden %d do not fit %d-wide rows\n", dim, hidden, WIDE);
        return 1;
    }
    int s = WIDE / dim, fail = 0;
    float norm_scale = 1.0f / __builtin_sqrtf((float)s);
    fail |= widen(&m->tok_embd, c->vocab_size, WIDE, 1, s, hidden, 1.0f);
    fail |= widen(&m->out_norm, 1, WIDE, 1, s, hidden, norm_scale);
    if (!c->tied_embeddings)
        fail |= widen(&m->output, c->vocab_size, WIDE, 1, s, hidden, 1.0f);
    for (int l = 0; l < c->n_layers && !fail; l++) {
        llm_layer *L = &m->layers[l];
        fail |= widen(&L->attn_norm, 1, WIDE, 1, s, hidden, norm_scale);
        fail |= widen(&L->ffn_norm, 1, WIDE, 1, s, hidden, norm_scale);
        fail |= widen(&L->wq, q, WIDE, 1, s, hidden, 1.0f);
        fail |= widen(&L->wk, kv, WIDE, 1, s, hidden, 1.0f);
        fail |= widen(&L->wv, kv, WIDE, 1, s, hidden, 1.0f);
        fail |= widen(&L->wo, WIDE, q, s, 1, hidden, 1.0f);
        fail |= widen(&L->w_gate, WIDE, WIDE, 0, s, hidden, 1.0f);
        fail |= widen(&L->w_up, WIDE, WIDE, 0, s, hidden, 1.0f);
        fail |= widen(&L->w_down, WIDE, WIDE, s, 0, hidden, 1.0f);
    }
    if (fail) {
        fprintf(stderr, "pad_model: out of memory\n");
        return 1;
    }
    c->dim = WIDE;
    c->hidden_dim = WIDE;
    c->norm_eps /= (float)s;
    if (llm_model_save_gguf(m, LLM_F32, argv[2], &err) != 0) {
        fprintf(stderr, "pad_model: %s\n", err.msg);
        return 1;
    }
    return 0;
}
