/* One rank's share of a model for tensor parallelism (Megatron's split): the attention's heads and the FFN's
 * width are divided among the ranks, each rank holding its q/k/v rows (its heads) and its gate/up rows (its
 * columns of the FFN) whole, and the columns of wo and w_down that read them; each rank's wo and w_down
 * products are partial sums of the residual update, added up over the ranks (an all-reduce) before the
 * residual add. A mixture of experts is split the same way inside every expert (each rank holds a slice of
 * each expert's width, as vLLM's tensor-parallel experts): the router runs whole on every rank on the same
 * input, so every rank chooses the same experts, and the weighted sum of the chosen experts' partial outputs
 * is again a partial sum. Or, with expert parallelism (ep), the experts are dealt out whole, rank r holding
 * experts [r E / size, (r + 1) E / size): each rank weighs only the chosen experts it holds, and the sum over the
 * ranks is the whole mixture (a shared expert is still split by columns). That takes any expert width and block
 * type (Qwen3-30B-A3B's 768 columns in Q4_K do not split over 2 in whole 256-blocks), and a rank reads whole
 * experts; the ranks' shares of a step's work follow the router's choices.
 * Everything else (embedding, norms, router, classifier) is held by every rank whole.
 * gpt-oss: a sink per head goes with its head; the output projection's bias is added after the sum. */
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

/* width when some layer has a dense FFN (or shared expert) that wide, else 0 (a width the model does not use) */
static int has_ffn(const llm_model *m, int width)
{
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const llm_layer *L = &m->layers[l];
        if ((L->w_gate.data != NULL || L->w_gate.src != NULL) && llm_layer_ff(&m->cfg, L) == width)
            return width;
    }
    return 0;
}

/* Whether the first `cols` columns of t's rows (and so each rank's run of them) are whole blocks of its type. */
static int whole_blocks(const llm_tensor *t, int64_t cols)
{
    return (t->data == NULL || gguf_qtype_row_bytes(t->type, (uint64_t)cols) > 0) &&
           (t->src == NULL || gguf_qtype_row_bytes(t->src_type, (uint64_t)cols) > 0);
}

/* An F32 tensor of the same shape, all zeros: the share's own. */
static int zero(llm_model *s, llm_tensor *t)
{
    if (t->type != LLM_F32 || t->src != NULL)
        return -1;
    void *p = calloc((size_t)t->ne[0] * (size_t)t->ne[1], sizeof(float));
    if (p == NULL || llm_model_own(s, p, NULL) != 0)
        return -1;
    t->data = p;
    return 0;
}

int llm_model_tp_check(const llm_model *m, int size, int ep, llm_err *err)
{
    const llm_config *c = &m->cfg;
    const char *why = NULL;
    ep = ep && c->n_expert > 0;
    if (size < 1 || size > LLM_TP_MAX)
        why = "the number of ranks is out of range";
    else if (c->encoder || c->bidirectional || c->layer_norm)
        why = "it is an encoder / embedding model (those are small: run them on one GPU)";
    else if (c->n_heads % size != 0 || c->n_kv_heads % size != 0 || has_ffn(m, c->hidden_dim) % size != 0 ||
             has_ffn(m, c->dense_ff) % size != 0 || (!ep && c->expert_ff % size != 0))
        why = ep ? "its query heads, KV heads and FFN width (a shared expert's) must each divide by the number of "
                   "ranks"
                 : "its query heads, KV heads and FFN width must each divide by the number of ranks (and each "
                   "expert's width)";
    else if (ep && c->n_expert < size)
        why = "it has fewer experts than ranks (expert parallelism deals them out whole)";
    for (int l = 0; why == NULL && l < c->n_layers; l++) {
        const llm_layer *L = &m->layers[l];
        if (L->wo.cpu_packed || L->w_down.cpu_packed || L->wq.cpu_packed)
            why = "its weights were packed for the CPU";
        /* a rank's share of a row of wo / w_down / an expert's down must be whole blocks of the row's type */
        int whole = whole_blocks(&L->wo, (int64_t)c->n_heads * c->head_dim / size) &&
                    whole_blocks(&L->w_down, llm_layer_ff(c, L) / size);
        for (int e = 0; e < c->n_expert && !ep && llm_layer_moe(c, L); e++)
            whole = whole && whole_blocks(&L->experts[3 * e + 2], c->expert_ff / size);
        if (why == NULL && !whole)
            why = "a rank's share of a row of the output or down projection (or an expert's) is not whole blocks of "
                  "its type";
    }
    if (why != NULL) {
        llm_seterr(err, "tensor parallelism over %d GPUs%s: %s: %s", size, ep ? " (experts whole)" : "",
                   m->path[0] ? m->path : "model", why);
        return -1;
    }
    return 0;
}

/* Expert parallelism: the experts outside [lo, hi) absent from the share's own list (the held ones views). */
static void hold_experts(llm_tensor *experts, int n_expert, int lo, int hi)
{
    for (int i = 0; i < 3 * n_expert; i++)
        if (i / 3 < lo || i / 3 >= hi) {
            experts[i].data = NULL;
            experts[i].src = NULL;
        }
}

llm_model *llm_model_tp_shard(const llm_model *m, int rank, int size, int ep, llm_err *err)
{
    if (llm_model_tp_check(m, size, ep, err) != 0)
        return NULL;
    ep = ep && m->cfg.n_expert > 0;
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
    const int hq = c->n_heads / size, hkv = c->n_kv_heads / size, hd = c->head_dim;
    const int eff = ep ? c->expert_ff : c->expert_ff / size, lo = rank * c->n_expert / size,
              hi = (rank + 1) * c->n_expert / size;
    s->layers = malloc((size_t)c->n_layers * sizeof(llm_layer));
    if (s->layers == NULL || llm_model_own(s, s->layers, NULL) != 0) {
        llm_model_tp_free(s);
        llm_seterr(err, "tensor parallelism: out of memory");
        return NULL;
    }
    memcpy(s->layers, m->layers, (size_t)c->n_layers * sizeof(llm_layer));
    for (int l = 0; l < c->n_layers; l++) {
        llm_layer *L = &s->layers[l];
        const int ff = llm_layer_ff(c, L) / size;
        int rc = 0;
        if (llm_layer_moe(c, L)) { /* the experts' list is the share's own, each expert's slice as below */
            const llm_tensor *all = L->experts;
            size_t bytes = (size_t)3 * (size_t)c->n_expert * sizeof(llm_tensor);
            if ((L->experts = malloc(bytes)) == NULL || llm_model_own(s, L->experts, NULL) != 0)
                rc = -1;
            else
                memcpy(L->experts, all, bytes);
            if (ep && rc == 0) /* (gpt-oss's experts' biases: whole, a row per expert) */
                hold_experts(L->experts, c->n_expert, lo, hi);
            for (int e = 0; e < c->n_expert && rc == 0 && !ep; e++) {
                llm_tensor *x = &L->experts[3 * e];
                rc = slice_rows(&x[0], (int64_t)rank * eff, eff) | slice_rows(&x[1], (int64_t)rank * eff, eff) |
                     slice_cols(s, &x[2], (int64_t)rank * eff, eff);
            }
            /* gpt-oss's experts' biases: gate / up per column (expert e's row of [expert_ff x n_expert] sliced
             * as its gate rows are); down's is added to each expert's output, which is a partial sum here, so
             * once: rank 0 keeps it, the others add zeros */
            if (rc == 0 && !ep && L->exp_b[0].data != NULL)
                rc = slice_cols(s, &L->exp_b[0], (int64_t)rank * eff, eff) |
                     slice_cols(s, &L->exp_b[1], (int64_t)rank * eff, eff) | (rank > 0 ? zero(s, &L->exp_b[2]) : 0);
        }
        rc |= slice_rows(&L->wq, (int64_t)rank * hq * hd, (int64_t)hq * hd) |
                 slice_rows(&L->wk, (int64_t)rank * hkv * hd, (int64_t)hkv * hd) |
                 slice_rows(&L->wv, (int64_t)rank * hkv * hd, (int64_t)hkv * hd) |
                 slice_rows(&L->bq, (int64_t)rank * hq * hd, (int64_t)hq * hd) |
                 slice_rows(&L->bk, (int64_t)rank * hkv * hd, (int64_t)hkv * hd) |
                 slice_rows(&L->bv, (int64_t)rank * hkv * hd, (int64_t)hkv * hd) |
                 slice_rows(&L->attn_sinks, (int64_t)rank * hq, hq) | /* (a sink per head; bo is added after the sum) */
                 /* OLMo 2's q / k norms over whole rows: their weights by element (the sums of squares are summed
                  * over the ranks by the backend); per-head norms are whole */
                 (c->qk_norm_full ? slice_rows(&L->q_norm, (int64_t)rank * hq * hd, (int64_t)hq * hd) |
                                        slice_rows(&L->k_norm, (int64_t)rank * hkv * hd, (int64_t)hkv * hd)
                                  : 0) |
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
    c->hidden_dim /= size; /* (where unused, a width that need not divide: no layer reads it) */
    c->dense_ff /= size;
    c->expert_ff = eff;
    if (ep) {
        c->expert_lo = lo;
        c->expert_hi = hi;
    }
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
