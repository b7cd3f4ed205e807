/* The CPU backend: init (kernel choice, thread pool, rope tables, paged KV
 * cache), forward (one step over a batch of tokens from many sequences) and
 * destroy. Each layer is five parallel phases: norm+QKV+rope+cache write,
 * attention, output projection (+residual), norm+gate/up+SwiGLU, down (+residual). */
#include <stdlib.h>
#include <unistd.h>

#include "cpu/cpu_backend.h"
#include "cpu/cpu_features.h"

static int check_tensor(const llm_tensor *t, const char *what, int layer, int64_t cols, int64_t rows,
                        int f32_only, llm_err *err)
{
    if (t->data == NULL || !llm_dtype_valid((uint32_t)t->type)) {
        llm_seterr(err, "cpu backend: tensor %s (layer %d) is missing or has an unknown type", what, layer);
        return -1;
    }
    if (t->ne[0] != cols || t->ne[1] != rows) {
        llm_seterr(err, "cpu backend: tensor %s (layer %d) is %lldx%lld, expected %lldx%lld", what, layer,
                   (long long)t->ne[0], (long long)t->ne[1], (long long)cols, (long long)rows);
        return -1;
    }
    if (f32_only && t->type != LLM_F32) {
        llm_seterr(err, "cpu backend: norm %s (layer %d) must be f32, is %s", what, layer,
                   llm_dtype_name(t->type));
        return -1;
    }
    if (llm_dtype_row_bytes(t->type, (uint64_t)cols) == 0) {
        llm_seterr(err, "cpu backend: tensor %s (layer %d): row of %lld is not a whole number of %s blocks",
                   what, layer, (long long)cols, llm_dtype_name(t->type));
        return -1;
    }
    return 0;
}

static const llm_tensor *classifier(const llm_model *m)
{
    return m->cfg.tied_embeddings || m->output.data == NULL ? &m->tok_embd : &m->output;
}

static int check_model(const llm_model *m, llm_err *err)
{
    const llm_config *c = &m->cfg;
    if (c->dim <= 0 || c->hidden_dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
        c->head_dim <= 0 || (c->head_dim & 1) || c->vocab_size <= 0 || c->seq_len <= 0 ||
        c->n_heads % c->n_kv_heads != 0 || m->layers == NULL) {
        llm_seterr(err, "cpu backend: invalid model configuration (dim %d, hidden %d, layers %d, heads %d/%d, "
                   "head_dim %d, vocab %d, seq_len %d)", c->dim, c->hidden_dim, c->n_layers, c->n_heads,
                   c->n_kv_heads, c->head_dim, c->vocab_size, c->seq_len);
        return -1;
    }
    int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    if (check_tensor(&m->tok_embd, "token_embd", -1, c->dim, c->vocab_size, 0, err) ||
        check_tensor(&m->out_norm, "output_norm", -1, c->dim, 1, 1, err) ||
        check_tensor(classifier(m), "output", -1, c->dim, c->vocab_size, 0, err))
        return -1;
    for (int l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &m->layers[l];
        if (check_tensor(&L->attn_norm, "attn_norm", l, c->dim, 1, 1, err) ||
            check_tensor(&L->wq, "attn_q", l, c->dim, qd, 0, err) ||
            check_tensor(&L->wk, "attn_k", l, c->dim, kvd, 0, err) ||
            check_tensor(&L->wv, "attn_v", l, c->dim, kvd, 0, err) ||
            check_tensor(&L->wo, "attn_output", l, qd, c->dim, 0, err) ||
            check_tensor(&L->ffn_norm, "ffn_norm", l, c->dim, 1, 1, err) ||
            check_tensor(&L->w_gate, "ffn_gate", l, c->dim, c->hidden_dim, 0, err) ||
            check_tensor(&L->w_up, "ffn_up", l, c->dim, c->hidden_dim, 0, err) ||
            check_tensor(&L->w_down, "ffn_down", l, c->hidden_dim, c->dim, 0, err))
            return -1;
    }
    return 0;
}

static void free_scratch(cpu_state *st)
{
    free(st->x); free(st->xb); free(st->q); free(st->k); free(st->v);
    free(st->att); free(st->hb); free(st->hb2); free(st->qact);
    st->x = st->xb = st->q = st->k = st->v = st->att = st->hb = st->hb2 = NULL;
    st->qact = NULL;
    st->cap = 0;
}

static int ensure_scratch(cpu_state *st, int n)
{
    if (n <= st->cap)
        return 0;
    const llm_config *c = &st->m->cfg;
    free_scratch(st);
    size_t N = (size_t)n;
    int widest = c->dim > st->q_dim ? c->dim : st->q_dim;
    widest = widest > c->hidden_dim ? widest : c->hidden_dim;
    st->x   = malloc(N * c->dim * sizeof(float));
    st->xb  = malloc(N * widest * sizeof(float));
    st->q   = malloc(N * st->q_dim * sizeof(float));
    st->k   = malloc(N * st->kv_dim * sizeof(float));
    st->v   = malloc(N * st->kv_dim * sizeof(float));
    st->att = malloc(N * st->q_dim * sizeof(float));
    st->hb  = malloc(N * c->hidden_dim * sizeof(float));
    st->hb2 = malloc(N * c->hidden_dim * sizeof(float));
    st->qact = malloc(N * (size_t)(widest / LLM_QK + 1) * sizeof(cpu_q8_act));
    if (!st->x || !st->xb || !st->q || !st->k || !st->v || !st->att || !st->hb || !st->hb2 || !st->qact) {
        free_scratch(st);
        return -1;
    }
    st->cap = n;
    return 0;
}

static void cpu_destroy(llm_backend *b)
{
    cpu_state *st = b->impl;
    if (st == NULL)
        return;
    cpu_pool_destroy(st->pool);
    free_scratch(st);
    cpu_rope_free(&st->rope);
    free(st->kcache);
    free(st->vcache);
    free(st->scores);
    free(st->wbuf);
    free(st);
    b->impl = NULL;
}

static int cpu_init(llm_backend *b, llm_err *err)
{
    const llm_model *m = b->model;
    if (check_model(m, err) != 0)
        return -1;
    const llm_config *c = &m->cfg;
    const cpu_kernels *kern = cpu_kernels_select(err);
    if (kern == NULL)
        return -1;
    if (b->opts.threads < 0 || b->opts.kv_blocks < 0 || b->opts.block_size < 0) {
        llm_seterr(err, "cpu backend: negative threads, kv_blocks or block_size");
        return -1;
    }
    if (b->opts.threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        b->opts.threads = n > 0 ? (int)n : 1;
    }
    if (b->opts.block_size == 0)
        b->opts.block_size = 16;
    if (b->opts.kv_blocks == 0)
        b->opts.kv_blocks = (c->seq_len + b->opts.block_size - 1) / b->opts.block_size;

    cpu_state *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        llm_seterr(err, "cpu backend: out of memory");
        return -1;
    }
    b->impl = st;
    st->m = m;
    st->kern = kern;
    st->nth = b->opts.threads;
    st->kv_blocks = b->opts.kv_blocks;
    st->block_size = b->opts.block_size;
    st->q_dim = c->n_heads * c->head_dim;
    st->kv_dim = c->n_kv_heads * c->head_dim;
    size_t cache = (size_t)c->n_layers * (size_t)st->kv_blocks * (size_t)st->block_size * (size_t)st->kv_dim;
    st->kcache = malloc(cache * sizeof(float)); /* zeroed by cpu_prefault_weights */
    st->vcache = malloc(cache * sizeof(float));
    st->scores = malloc((size_t)st->nth * (size_t)c->seq_len * sizeof(float));
    int widest = c->dim > st->q_dim ? c->dim : st->q_dim;
    widest = widest > c->hidden_dim ? widest : c->hidden_dim;
    st->wbuf_floats = (size_t)CPU_MM_CHUNK_ROWS * (size_t)widest;
    st->wbuf = malloc((size_t)st->nth * st->wbuf_floats * sizeof(float));
    if (st->kcache == NULL || st->vcache == NULL || st->scores == NULL || st->wbuf == NULL ||
        cpu_rope_init(&st->rope, m, c->seq_len) != 0) {
        llm_seterr(err, "cpu backend: out of memory for a KV cache of %d blocks of %d tokens (%zu MiB)",
                   st->kv_blocks, st->block_size, 2 * cache * sizeof(float) >> 20);
        cpu_destroy(b);
        return -1;
    }
    st->pool = cpu_pool_create(st->nth);
    if (st->pool == NULL) {
        llm_seterr(err, "cpu backend: cannot start %d threads", st->nth);
        cpu_destroy(b);
        return -1;
    }
    cpu_prefault_weights(st);
    return 0;
}

static int check_batch(const cpu_state *st, const llm_batch *b, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    if (b->n_tokens <= 0 || b->tokens == NULL || b->pos == NULL || b->seq == NULL || b->want_logits == NULL ||
        b->n_seqs <= 0 || b->seqs == NULL) {
        llm_seterr(err, "cpu backend: empty or incomplete batch");
        return -1;
    }
    for (int i = 0; i < b->n_tokens; i++) {
        int tok = b->tokens[i], pos = b->pos[i], s = b->seq[i];
        if (tok < 0 || tok >= c->vocab_size) {
            llm_seterr(err, "cpu backend: token %d at batch index %d is outside the vocabulary of %d", tok, i,
                       c->vocab_size);
            return -1;
        }
        if (s < 0 || s >= b->n_seqs) {
            llm_seterr(err, "cpu backend: batch index %d names sequence %d of %d", i, s, b->n_seqs);
            return -1;
        }
        if (pos < 0 || pos >= c->seq_len) {
            llm_seterr(err, "cpu backend: position %d at batch index %d is outside the context of %d", pos, i,
                       c->seq_len);
            return -1;
        }
        const llm_seq_view *v = &b->seqs[s];
        if (v->blocks == NULL || pos / st->block_size >= v->n_blocks) {
            llm_seterr(err, "cpu backend: sequence %d's block table does not cover position %d", s, pos);
            return -1;
        }
        for (int k = 0; k <= pos / st->block_size; k++)
            if (v->blocks[k] < 0 || v->blocks[k] >= st->kv_blocks) {
                llm_seterr(err, "cpu backend: sequence %d uses KV block %d of a pool of %d", s, v->blocks[k],
                           st->kv_blocks);
                return -1;
            }
    }
    return 0;
}

typedef struct {
    cpu_state *st;
    const llm_batch *b;
    int layer;
} qkv_post_ctx;

/* After the QKV projections: rotate q and k, store k and v in the cache. */
static void qkv_post(void *ctx, int ith, int nth)
{
    qkv_post_ctx *p = ctx;
    cpu_state *st = p->st;
    const llm_config *c = &st->m->cfg;
    size_t layer_off = (size_t)p->layer * (size_t)st->kv_blocks * (size_t)st->block_size * (size_t)st->kv_dim;
    for (int t = ith; t < p->b->n_tokens; t += nth) {
        int pos = p->b->pos[t];
        float *q = st->q + (size_t)t * st->q_dim, *k = st->k + (size_t)t * st->kv_dim;
        cpu_rope_apply(&st->rope, c->rope_layout, q, c->n_heads, pos);
        cpu_rope_apply(&st->rope, c->rope_layout, k, c->n_kv_heads, pos);
        size_t slot = cpu_kv_slot(st, &p->b->seqs[p->b->seq[t]], pos);
        memcpy(st->kcache + layer_off + slot * st->kv_dim, k, (size_t)st->kv_dim * sizeof(float));
        memcpy(st->vcache + layer_off + slot * st->kv_dim, st->v + (size_t)t * st->kv_dim,
               (size_t)st->kv_dim * sizeof(float));
    }
}

static int cpu_forward(llm_backend *be, const llm_batch *b, float *logits, llm_err *err)
{
    cpu_state *st = be->impl;
    const llm_model *m = st->m;
    const llm_config *c = &m->cfg;
    if (check_batch(st, b, err) != 0)
        return -1;
    int n = b->n_tokens;
    if (ensure_scratch(st, n) != 0) {
        llm_seterr(err, "cpu backend: out of memory for a batch of %d tokens", n);
        return LLM_BACKEND_NOMEM;
    }
    size_t erow = llm_dtype_row_bytes(m->tok_embd.type, (uint64_t)c->dim);
    for (int t = 0; t < n; t++)
        llm_row_to_f32(m->tok_embd.type, (const uint8_t *)m->tok_embd.data + (size_t)b->tokens[t] * erow,
                       st->x + (size_t)t * c->dim, (size_t)c->dim);

    for (int l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &m->layers[l];
        qkv_post_ctx pc = { st, b, l };
        cpu_mm_out qkv[3] = {
            { &L->wq, st->q, (size_t)st->q_dim, 0 },
            { &L->wk, st->k, (size_t)st->kv_dim, 0 },
            { &L->wv, st->v, (size_t)st->kv_dim, 0 },
        };
        cpu_mm mm = { .x = st->x, .xs = (size_t)c->dim, .n = n, .K = c->dim, .norm = L->attn_norm.data,
                      .xn = st->xb, .eps = c->norm_eps, .outs = qkv, .n_outs = 3,
                      .post = qkv_post, .post_ctx = &pc };
        cpu_matmul(st, &mm);

        cpu_attention(st, b, l);

        cpu_mm_out wo = { &L->wo, st->x, (size_t)c->dim, 1 };
        cpu_mm mo = { .x = st->att, .xs = (size_t)st->q_dim, .n = n, .K = st->q_dim, .outs = &wo, .n_outs = 1 };
        cpu_matmul(st, &mo);

        cpu_mm_out gu[2] = {
            { &L->w_gate, st->hb, (size_t)c->hidden_dim, 0 },
            { &L->w_up, st->hb2, (size_t)c->hidden_dim, 0 },
        };
        cpu_mm mf = { .x = st->x, .xs = (size_t)c->dim, .n = n, .K = c->dim, .norm = L->ffn_norm.data,
                      .xn = st->xb, .eps = c->norm_eps, .outs = gu, .n_outs = 2, .swiglu = 1 };
        cpu_matmul(st, &mf);

        cpu_mm_out wd = { &L->w_down, st->x, (size_t)c->dim, 1 };
        cpu_mm md = { .x = st->hb, .xs = (size_t)c->hidden_dim, .n = n, .K = c->hidden_dim, .outs = &wd,
                      .n_outs = 1 };
        cpu_matmul(st, &md);
    }

    /* Gather the rows that want logits (in batch order), then norm + classifier. */
    int nw = 0;
    for (int t = 0; t < n; t++)
        if (b->want_logits[t]) {
            if (nw != t)
                memmove(st->x + (size_t)nw * c->dim, st->x + (size_t)t * c->dim, (size_t)c->dim * sizeof(float));
            nw++;
        }
    if (nw == 0)
        return 0;
    if (logits == NULL) {
        llm_seterr(err, "cpu backend: logits requested but no output buffer given");
        return -1;
    }
    cpu_mm_out out = { classifier(m), logits, (size_t)c->vocab_size, 0 };
    cpu_mm mc = { .x = st->x, .xs = (size_t)c->dim, .n = nw, .K = c->dim, .norm = m->out_norm.data,
                  .xn = st->xb, .eps = c->norm_eps, .outs = &out, .n_outs = 1 };
    cpu_matmul(st, &mc);
    return 0;
}

const llm_backend_ops llm_cpu_backend_ops = {
    .name = "cpu",
    .init = cpu_init,
    .forward = cpu_forward,
    .destroy = cpu_destroy,
};
