/* One rank's share of a model for tensor parallelism (Megatron's split): the attention's heads and the FFN's
 * width are divided among the ranks, each rank holding its q/k/v rows (its heads) and its gate/up rows (its
 * columns of the FFN) whole, and the columns of wo and w_down that read them; each rank's wo and w_down
 * products are partial sums of the residual update, added up over the ranks (an all-reduce) before the
 * residual add. Everything else (embedding, norms, classifier) is held by every rank whole. */
#include <stdlib.h>
#include <string.h>

#include "gguf_quants.h"
#include "model_priv.h"
#include "model_tp.h"

/* Rows [r0, r0 + nr) of a matrix (or elements of a vector): a view, no copy. */
static int slice_rows(llm_tensor *t, int64_t r0, int64_t nr)
{
    if (t->data == NULL && t->src == NULL)
        return 0;
    int vec = t->ne[1] == 1;
    int64_t n = vec ? t->ne[0] : t->ne[1];
    if (r0 + nr > n)
        return -1;
    if (vec) { /* an F32 vector (biases): elements */
        if (t->type != LLM_F32 || t->src != NULL)
            return -1;
        t->data = (const float *)t->data + r0;
        t->ne[0] = nr;
        return 0;
    }
    if (t->data != NULL)
        t->data = (const char *)t->data + (size_t)r0 * gguf_qtype_row_bytes(t->type, (uint64_t)t->ne[0]);
    if (t->src != NULL)
        t->src = (const char *)t->src + (size_t)r0 * gguf_qtype_row_bytes(t->src_type, (uint64_t)t->ne[0]);
    t->ne[1] = nr;
    return 0;
}

/* Columns [c0, c0 + nc) of every row of one layout: a copy, each row's run of whole blocks. */
static const void *copy_cols(llm_model *s, const void *data, uint32_t type, int64_t ne0, int64_t rows, int64_t c0,
                             int64_t nc)
{
    size_t rb = gguf_qtype_row_bytes(type, (uint64_t)ne0), off = gguf_qtype_row_bytes(type, (uint64_t)c0);
    size_t nb = gguf_qtype_row_bytes(type, (uint64_t)nc);
    if (rb == 0 || nb == 0 || (c0 > 0 && off == 0))
        return NULL;
    char *p = malloc((size_t)rows * nb);
    if (p == NULL || llm_model_own(s, p, NULL) != 0)
        return NULL;
    for (int64_t r = 0; r < rows; r++)
        memcpy(p + (size_t)r * nb, (const char *)data + (size_t)r * rb + off, nb);
    return p;
}

static int slice_cols(llm_model *s, llm_tensor *t, int64_t c0, int64_t nc)
{
    if (t->data == NULL && t->src == NULL)
        return 0;
    if (t->ne[1] == 1 || c0 + nc > t->ne[0])
        return -1;
    if (t->data != NULL && (t->data = copy_cols(s, t->data, t->type, t->ne[0], t->ne[1], c0, nc)) == NULL)
        return -1;
    if (t->src != NULL && (t->src = copy_cols(s, t->src, t->src_type, t->ne[0], t->ne[1], c0, nc)) == NULL)
        return -1;
    t->ne[0] = nc;
    return 0;
}

int llm_model_tp_check(const llm_model *m, int size, llm_err *err)
{
    const llm_config *c = &m->cfg;
    const char *why = NULL;
    if (size < 1 || size > LLM_TP_MAX)
        why = "the number of ranks is out of range";
    else if (c->encoder || c->bidirectional || c->layer_norm)
        why = "it is an encoder / embedding model (those are small: run them on one GPU)";
    else if (c->n_expert > 0)
        why = "it is a mixture of experts (its experts are not split yet)";
    else if (c->qk_norm_full)
        why = "its q/k norms span every head (OLMo 2)";
    else if (c->n_heads % size != 0 || c->n_kv_heads % size != 0 || c->hidden_dim % size != 0)
        why = "its query heads, KV heads and FFN width must each divide by the number of ranks";
    for (int l = 0; why == NULL && l < c->n_layers; l++) {
        const llm_layer *L = &m->layers[l];
        if (L->attn_sinks.data != NULL || L->bo.data != NULL)
            why = "its attention has sinks or an output bias (gpt-oss)";
        else if (L->wo.cpu_packed || L->w_down.cpu_packed || L->wq.cpu_packed)
            why = "its weights were packed for the CPU";
        /* a rank's share of a row of wo / w_down must be whole blocks of the row's type */
        int64_t qc = (int64_t)c->n_heads * c->head_dim / size, fc = c->hidden_dim / size;
        const llm_tensor *t[2] = { &L->wo, &L->w_down };
        const int64_t cols[2] = { qc, fc };
        for (int i = 0; i < 2 && why == NULL; i++)
            if ((t[i]->data != NULL && gguf_qtype_row_bytes(t[i]->type, (uint64_t)cols[i]) == 0) ||
                (t[i]->src != NULL && gguf_qtype_row_bytes(t[i]->src_type, (uint64_t)cols[i]) == 0))
                why = "a rank's share of a row of the output or down projection is not whole blocks of its type";
    }
    if (why != NULL) {
        llm_seterr(err, "tensor parallelism over %d GPUs: %s: %s", size, m->path[0] ? m->path : "model", why);
        return -1;
    }
    return 0;
}

llm_model *llm_model_tp_shard(const llm_model *m, int rank, int size, llm_err *err)
{
    if (llm_model_tp_check(m, size, err) != 0)
        return NULL;
    llm_model *s = malloc(sizeof(*s));
    if (s == NULL) {
        llm_seterr(err, "tensor parallelism: out of memory");
        return NULL;
    }
    *s = *m;
    /* the shard owns only what it makes; the parent keeps its files, tokenizer and buffers */
    s->owned = NULL;
    s->n_owned = 0;
    s->maps = NULL;
    s->map_sizes = NULL;
    s->n_maps = 0;
    s->gguf = NULL;
    llm_config *c = &s->cfg;
    const int hq = c->n_heads / size, hkv = c->n_kv_heads / size, ff = c->hidden_dim / size, hd = c->head_dim;
    s->layers = malloc((size_t)c->n_layers * sizeof(llm_layer));
    if (s->layers == NULL || llm_model_own(s, s->layers, NULL) != 0) {
        llm_model_tp_free(s);
        llm_seterr(err, "tensor parallelism: out of memory");
        return NULL;
    }
    memcpy(s->layers, m->layers, (size_t)c->n_layers * sizeof(llm_layer));
    for (int l = 0; l < c->n_layers; l++) {
        llm_layer *L = &s->layers[l];
        int rc = slice_rows(&L->wq, (int64_t)rank * hq * hd, (int64_t)hq * hd) |
                 slice_rows(&L->wk, (int64_t)rank * hkv * hd, (int64_t)hkv * hd) |
                 slice_rows(&L->wv, (int64_t)rank * hkv * hd, (int64_t)hkv * hd) |
                 slice_rows(&L->bq, (int64_t)rank * hq * hd, (int64_t)hq * hd) |
                 slice_rows(&L->bk, (int64_t)rank * hkv * hd, (int64_t)hkv * hd) |
                 slice_rows(&L->bv, (int64_t)rank * hkv * hd, (int64_t)hkv * hd) |
                 slice_rows(&L->w_gate, (int64_t)rank * ff, ff) | slice_rows(&L->w_up, (int64_t)rank * ff, ff) |
                 slice_cols(s, &L->wo, (int64_t)rank * hq * hd, (int64_t)hq * hd) |
                 slice_cols(s, &L->w_down, (int64_t)rank * ff, ff);
        if (rc != 0) {
            llm_model_tp_free(s);
            llm_seterr(err, "tensor parallelism: layer %d of %s could not be split over %d GPUs (or out of memory)",
                       l, m->path, size);
            return NULL;
        }
    }
    c->n_heads = hq;
    c->n_kv_heads = hkv;
    c->hidden_dim = ff;
    return s;
}

void llm_model_tp_free(llm_model *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < s->n_owned; i++)
        free(s->owned[i]);
    free(s->owned);
    free(s);
}
