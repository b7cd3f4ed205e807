/* The CPU backend: init (kernel choice, thread pool, rope tables, paged KV
 * cache), forward (one step over a batch of tokens from many sequences) and
 * destroy. Each layer is five parallel phases: norm+QKV+rope+cache write,
 * attention, output projection (+residual), norm+gate/up+SwiGLU, down (+residual);
 * a mixture-of-experts layer's FFN is moe.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_util.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_features.h"

static const llm_tensor *classifier(const llm_model *m)
{
    return llm_classifier(m);
}

static int check_model(const llm_model *m, llm_err *err)
{
    return llm_model_check(m, "cpu backend", err);
}

static void free_scratch(cpu_state *st)
{
    free(st->x); free(st->xb); free(st->q); free(st->k); free(st->v);
    free(st->att); free(st->hb); free(st->hb2); free(st->qact); free(st->att_tiles); free(st->att_end); free(st->xbf); free(st->xsplit);
    st->x = st->xb = st->q = st->k = st->v = st->att = st->hb = st->hb2 = NULL;
    st->qact = NULL;
    st->att_tiles = NULL;
    st->att_end = NULL;
    st->xbf = NULL;
    st->xsplit = NULL;
    st->cap = 0;
}

/* The widest row a matmul reads (its K), and how many activation rows a step of n tokens quantises: n, or a
 * mixture-of-experts pass's rows (a token's once per expert it goes to). */
static int widest_k(const cpu_state *st)
{
    const llm_config *c = &st->m->cfg;
    int w = c->dim > st->q_dim ? c->dim : st->q_dim;
    w = w > llm_ff_max(c) ? w : llm_ff_max(c);
    return w > c->expert_ff ? w : c->expert_ff;
}

static size_t act_rows(const llm_config *c, int n)
{
    if (c->n_expert == 0)
        return (size_t)n;
    int p = n < cpu_moe_pass_tokens(c) ? n : cpu_moe_pass_tokens(c);
    size_t r = (size_t)p * (size_t)c->n_expert_used;
    return r > (size_t)n ? r : (size_t)n;
}

/* Rows of st->xbf for A activation rows: whole groups of the tile layout (kernels.h). */
static size_t xbf_rows(size_t A)
{
    return (A + CPU_BF16_TILE_T - 1) / CPU_BF16_TILE_T * CPU_BF16_TILE_T;
}

static int ensure_scratch(cpu_state *st, int n)
{
    if (n <= st->cap)
        return 0;
    const llm_config *c = &st->m->cfg;
    free_scratch(st);
    size_t N = (size_t)n, A = act_rows(c, n);
    int widest = widest_k(st);
    st->x   = malloc(N * c->dim * sizeof(float));
    st->xb  = malloc(N * widest * sizeof(float));
    st->q   = malloc(N * st->q_dim * sizeof(float));
    st->k   = malloc(N * st->kv_dim * sizeof(float));
    st->v   = malloc(N * st->kv_dim * sizeof(float));
    st->att = malloc(N * st->q_dim * sizeof(float));
    st->hb  = malloc(N * llm_ff_max(c) * sizeof(float));
    st->hb2 = malloc(N * llm_ff_max(c) * sizeof(float));
    st->qact = malloc(A * (size_t)(widest / LLM_QK + 1) * sizeof(cpu_q8_act));
    st->att_tiles = malloc((N + 1) * sizeof(int));
    st->att_end = malloc(N * sizeof(int));
    st->xbf = malloc(xbf_rows(A) * widest * sizeof(uint16_t));
    st->xsplit = st->kern->gemm_f16_tiled != NULL ? malloc(xbf_rows(N) * widest * sizeof(float)) : NULL;
    if (!st->x || !st->xb || !st->q || !st->k || !st->v || !st->att || !st->hb || !st->hb2 || !st->qact ||
        !st->att_tiles || !st->att_end || !st->xbf || (st->kern->gemm_f16_tiled != NULL && !st->xsplit)) {
        free_scratch(st);
        return -1;
    }
    st->cap = n;
    return 0;
}

/* Room for n hidden rows (embeddings). */
static int ensure_hidden(cpu_state *st, int n)
{
    if (n <= st->hid_cap)
        return 0;
    float *h = realloc(st->hid, (size_t)n * (size_t)st->m->cfg.dim * sizeof(float));
    if (h == NULL)
        return -1;
    st->hid = h;
    st->hid_cap = n;
    return 0;
}

/* ensure_scratch for n tokens, with every page touched now rather than in the first step. */
static int prefault_scratch(cpu_state *st, int n)
{
    if (ensure_scratch(st, n) != 0)
        return -1;
    const llm_config *c = &st->m->cfg;
    size_t N = (size_t)n, A = act_rows(c, n);
    int widest = widest_k(st);
    memset(st->x, 0, N * c->dim * sizeof(float));
    memset(st->xb, 0, N * widest * sizeof(float));
    memset(st->q, 0, N * st->q_dim * sizeof(float));
    memset(st->att, 0, N * st->q_dim * sizeof(float));
    memset(st->k, 0, N * st->kv_dim * sizeof(float));
    memset(st->v, 0, N * st->kv_dim * sizeof(float));
    memset(st->hb, 0, N * llm_ff_max(c) * sizeof(float));
    memset(st->hb2, 0, N * llm_ff_max(c) * sizeof(float));
    memset(st->qact, 0, A * (size_t)(widest / LLM_QK + 1) * sizeof(cpu_q8_act));
    memset(st->xbf, 0, xbf_rows(A) * widest * sizeof(uint16_t));
    if (st->xsplit != NULL)
        memset(st->xsplit, 0, xbf_rows(N) * widest * sizeof(float));
    return 0;
}

static void cpu_destroy(llm_backend *b)
{
    cpu_state *st = b->impl;
    if (st == NULL)
        return;
    if (!st->pool_shared)
        cpu_pool_destroy(st->pool);
    free_scratch(st);
    free(st->hid);
    cpu_rope_free(&st->rope);
    cpu_rope_free(&st->rope_swa);
    free(st->kcache);
    free(st->vcache);
    free(st->layer_off);
    free(st->kscale);
    free(st->vscale);
    free(st->kvdq);
    free(st->scores);
    free(st->wbuf);
    cpu_moe_free(st);
    cpu_repack_free(st);
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
    if (llm_model_cpu_packed(m, NULL) && !cpu_packing_on(kern)) {
        llm_seterr(err, "cpu backend: this model's converted weights were packed in place for the VNNI kernels, "
                   "but the %s kernels (LLM_CPU_ISA, LLM_CPU_REPACK=0) read them as stored", kern->name);
        return -1;
    }
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
    const cpu_state *share = b->opts.share_threads != NULL && b->opts.share_threads->ops == &llm_cpu_backend_ops
                           ? b->opts.share_threads->impl : NULL;
    if (share != NULL)
        st->nth = b->opts.threads = share->nth;
    st->kv_blocks = b->opts.kv_blocks;
    st->block_size = b->opts.block_size;
    if (b->opts.swa_blocks < 0 || llm_swa_pool_layers(m) == 0)
        b->opts.swa_blocks = 0;
    st->swa_blocks = b->opts.swa_blocks;
    st->q_dim = c->n_heads * c->head_dim;
    st->kv_dim = c->n_kv_heads * c->head_dim;
    st->kvq8 = b->opts.kv_dtype == LLM_KV_Q8_0;
    st->kv16 = !st->kvq8 && llm_kv_f16(m, b->opts.kv_dtype);
    st->kv_es = st->kvq8 ? 1 : st->kv16 ? sizeof(uint16_t) : sizeof(float);
    st->kv_g = llm_kv_q8_group(c->head_dim);
    b->opts.kv_dtype = st->kvq8 ? LLM_KV_Q8_0 : st->kv16 ? LLM_KV_F16 : LLM_KV_F32;
    st->layer_off = malloc(((size_t)c->n_layers + 1) * sizeof(size_t));
    if (st->layer_off == NULL) {
        llm_seterr(err, "cpu backend: out of memory");
        cpu_destroy(b);
        return -1;
    }
    st->layer_off[0] = 0;
    for (int l = 0; l < c->n_layers; l++)
        st->layer_off[l + 1] = st->layer_off[l] +
                               (size_t)cpu_kv_layer_blocks(st, l) * (size_t)st->block_size * (size_t)st->kv_dim;
    size_t cache = st->layer_off[c->n_layers];
    /* the blocks allocated first are zeroed by cpu_prefault_weights, the rest fault in when first used */
    st->kcache = cpu_alloc_huge(cache * st->kv_es);
    st->vcache = cpu_alloc_huge(cache * st->kv_es);
    if (st->kvq8) {
        st->kscale = cpu_alloc_huge(cache / (size_t)st->kv_g * sizeof(float));
        st->vscale = cpu_alloc_huge(cache / (size_t)st->kv_g * sizeof(float));
        st->kvdq = malloc((size_t)st->nth * 2 * (size_t)st->block_size * (size_t)c->head_dim * sizeof(float));
    }
    /* (pages untouched past what a tile's positions use: long contexts commit only what they need) */
    st->scores = malloc((size_t)st->nth * CPU_ATT_TILE * (size_t)c->seq_len * sizeof(float));
    st->wbuf_floats = (size_t)CPU_MM_CHUNK_ROWS * (size_t)widest_k(st);
    st->wbuf = malloc((size_t)st->nth * st->wbuf_floats * sizeof(float));
    if (st->kcache == NULL || st->vcache == NULL || st->scores == NULL || st->wbuf == NULL ||
        (st->kvq8 && (st->kscale == NULL || st->vscale == NULL || st->kvdq == NULL)) ||
        cpu_rope_init(&st->rope, m, c->seq_len, 0) != 0 ||
        (c->rope_theta_swa > 0.0f && cpu_rope_init(&st->rope_swa, m, c->seq_len, 1) != 0)) {
        llm_seterr(err, "cpu backend: out of memory for a KV cache of %d blocks of %d tokens (%zu MiB)",
                   st->kv_blocks, st->block_size,
                   2 * (cache * st->kv_es + (st->kvq8 ? cache / (size_t)st->kv_g * sizeof(float) : 0)) >> 20);
        cpu_destroy(b);
        return -1;
    }
    st->pool_shared = share != NULL;
    st->pool = share != NULL ? share->pool : cpu_pool_create(st->nth);
    if (st->pool == NULL) {
        llm_seterr(err, "cpu backend: cannot start %d threads", st->nth);
        cpu_destroy(b);
        return -1;
    }
    if (cpu_repack_weights(st) != 0) {
        llm_seterr(err, "cpu backend: out of memory repacking the weights (LLM_CPU_REPACK=0 keeps them as stored)");
        cpu_destroy(b);
        return -1;
    }
    cpu_prefault_weights(st);
    if (b->opts.scratch_tokens > 0 && prefault_scratch(st, b->opts.scratch_tokens) != 0) {
        llm_seterr(err, "cpu backend: out of memory for steps of %d tokens", b->opts.scratch_tokens);
        cpu_destroy(b);
        return -1;
    }
    return 0;
}

static int check_batch(const cpu_state *st, const llm_batch *b, llm_err *err)
{
    return llm_batch_check(b, &st->m->cfg, st->block_size, st->kv_blocks, st->swa_blocks, "cpu backend", err);
}

typedef struct {
    cpu_state *st;
    const llm_batch *b;
    int layer;
} qkv_post_ctx;

/* y += b over n floats (a projection's bias). */
static void add_bias(float *y, const llm_tensor *b, int n)
{
    const float *w = b->data;
    for (int i = 0; i < n; i++)
        y[i] += w[i];
}

/* RMSNorm of each of n_heads heads of hd floats in place, weights w[hd] (Qwen 3's q/k norm). */
static void head_norm(float *x, int n_heads, int hd, const llm_tensor *w, float eps)
{
    const float *g = w->data;
    for (int h = 0; h < n_heads; h++, x += hd) {
        float ss = 0.0f;
        for (int i = 0; i < hd; i++)
            ss += x[i] * x[i];
        float r = 1.0f / sqrtf(ss / (float)hd + eps);
        for (int i = 0; i < hd; i++)
            x[i] = x[i] * r * g[i];
    }
}

/* After the QKV projections: the biases and q/k norms the model has, rotate q
 * and k, store k and v in the cache. */
static void qkv_post(void *ctx, int ith, int nth)
{
    qkv_post_ctx *p = ctx;
    cpu_state *st = p->st;
    const llm_config *c = &st->m->cfg;
    const llm_layer *L = &st->m->layers[p->layer];
    size_t layer_off = st->layer_off[p->layer];
    for (int t = ith; t < p->b->n_tokens; t += nth) {
        int pos = p->b->pos[t];
        float *q = st->q + (size_t)t * st->q_dim, *k = st->k + (size_t)t * st->kv_dim;
        if (L->bq.data != NULL) {
            add_bias(q, &L->bq, st->q_dim);
            add_bias(k, &L->bk, st->kv_dim);
            add_bias(st->v + (size_t)t * st->kv_dim, &L->bv, st->kv_dim);
        }
        if (L->q_norm.data != NULL && c->qk_norm_full) { /* OLMo 2: over the whole q and k rows */
            head_norm(q, 1, st->q_dim, &L->q_norm, c->norm_eps);
            head_norm(k, 1, st->kv_dim, &L->k_norm, c->norm_eps);
        } else if (L->q_norm.data != NULL) {
            head_norm(q, c->n_heads, c->head_dim, &L->q_norm, c->norm_eps);
            head_norm(k, c->n_kv_heads, c->head_dim, &L->k_norm, c->norm_eps);
        }
        const cpu_rope *rope = L->swa && st->rope_swa.cos != NULL ? &st->rope_swa : &st->rope;
        if (!L->nope) { /* SmolLM3's NoPE layers attend without positions */
            cpu_rope_apply(rope, c->rope_layout, q, c->n_heads, pos);
            cpu_rope_apply(rope, c->rope_layout, k, c->n_kv_heads, pos);
        }
        size_t slot = cpu_kv_slot(st, &p->b->seqs[p->b->seq[t]], p->layer, pos);
        size_t at = layer_off + slot * st->kv_dim;
        const float *v = st->v + (size_t)t * st->kv_dim;
        if (st->kvq8) {
            size_t sc = at / (size_t)st->kv_g;
            st->kern->kv_q8_quant(k, (int8_t *)st->kcache + at, st->kscale + sc, st->kv_g, st->kv_dim);
            st->kern->kv_q8_quant(v, (int8_t *)st->vcache + at, st->vscale + sc, st->kv_g, st->kv_dim);
        } else if (st->kv16) {
            st->kern->f32_to_f16(k, (uint16_t *)st->kcache + at, st->kv_dim);
            st->kern->f32_to_f16(v, (uint16_t *)st->vcache + at, st->kv_dim);
        } else {
            memcpy((float *)st->kcache + at, k, (size_t)st->kv_dim * sizeof(float));
            memcpy((float *)st->vcache + at, v, (size_t)st->kv_dim * sizeof(float));
        }
    }
}

/* Gemma 2 / 3's norm after attention and after the FFN: x += rmsnorm(y) * w, or Granite's scaled residual:
 * x += y * s, or an encoder's post-norm block: x = LayerNorm(x + y + bias) * w + ln_b; y the block's output
 * (tokens split over threads, after the projection's barrier). */
typedef struct {
    cpu_state *st;
    const float *w;  /* the norm's weights, or NULL: scale */
    float s;
    int n;
    const float *bias, *ln_b; /* set: the encoder's LayerNorm (ln_b its bias, bias the projection's) */
} post_norm_ctx;

static void post_norm_add(void *ctx, int ith, int nth)
{
    post_norm_ctx *p = ctx;
    cpu_state *st = p->st;
    int dim = st->m->cfg.dim;
    for (int t = ith; t < p->n; t += nth) {
        const float *y = st->xb + (size_t)t * dim;
        float *x = st->x + (size_t)t * dim;
        if (p->ln_b != NULL) {
            if (p->bias != NULL)
                for (int i = 0; i < dim; i++)
                    x[i] += y[i] + p->bias[i];
            else /* (nomic-bert: no biases) */
                for (int i = 0; i < dim; i++)
                    x[i] += y[i];
            cpu_layer_norm(x, dim, p->w, p->ln_b, st->m->cfg.norm_eps);
            continue;
        }
        if (p->w == NULL && p->bias != NULL) { /* gpt-oss's output bias */
            for (int i = 0; i < dim; i++)
                x[i] += y[i] + p->bias[i];
            continue;
        }
        if (p->w == NULL) {
            for (int i = 0; i < dim; i++)
                x[i] += y[i] * p->s;
            continue;
        }
        float r = 1.0f / sqrtf(st->kern->dot_f32(y, y, dim) / (float)dim + st->m->cfg.norm_eps);
        for (int i = 0; i < dim; i++)
            x[i] += y[i] * r * p->w[i];
    }
}

static void project_out_ln(cpu_state *st, const llm_tensor *w, const cpu_pk_mat *packed, const float *x, int K,
                           int n, const llm_tensor *post_norm, const llm_tensor *bias, const llm_tensor *ln_b);

/* The output projection of a block (wo, w_down) over n rows of x: added to the residual st->x, or, where the
 * layer has a post norm or the model a residual scale, written to st->xb and added normed / scaled. */
static void project_out(cpu_state *st, const llm_tensor *w, const cpu_pk_mat *packed, const float *x, int K, int n,
                        const llm_tensor *post_norm)
{
    project_out_ln(st, w, packed, x, K, n, post_norm, NULL, NULL);
}

/* project_out, or with bias and ln_b (an encoder's block): x = LayerNorm(x + W x' + bias) * post_norm + ln_b. */
static void project_out_ln(cpu_state *st, const llm_tensor *w, const cpu_pk_mat *packed, const float *x, int K,
                           int n, const llm_tensor *post_norm, const llm_tensor *bias, const llm_tensor *ln_b)
{
    float rs = st->m->cfg.residual_scale;
    int dim = st->m->cfg.dim, post = post_norm->data != NULL || rs > 0.0f || (bias != NULL && bias->data != NULL);
    post_norm_ctx pn = { st, post_norm->data, rs, n, bias != NULL ? bias->data : NULL,
                         ln_b != NULL ? ln_b->data : NULL };
    cpu_mm_out o = { w, post ? st->xb : st->x, (size_t)dim, !post, packed, 0, 0 };
    cpu_mm mm = { .x = x, .xs = (size_t)K, .n = n, .K = K, .outs = &o, .n_outs = 1,
                  .post = post ? post_norm_add : NULL, .post_ctx = &pn };
    cpu_matmul(st, &mm);
}

/* An encoder's embedding of token t of type `type`: the token's, its position's (BERT's learned ones; nomic-bert
 * rotates instead) and its type's rows summed, LayerNorm'd. */
static void encoder_embed(cpu_state *st, const llm_batch *b, int t, int type, float *x)
{
    const llm_model *m = st->m;
    int dim = m->cfg.dim;
    float *tmp = st->xb + (size_t)t * dim; /* (xb is free until the first layer) */
    const llm_tensor *add[2] = { &m->pos_embd, &m->type_embd };
    size_t row[2] = { (size_t)b->pos[t], (size_t)type };
    for (int k = 0; k < 2; k++) {
        if (add[k]->data == NULL)
            continue;
        size_t rb = llm_dtype_row_bytes(add[k]->type, (uint64_t)dim);
        llm_row_to_f32(add[k]->type, (const uint8_t *)add[k]->data + row[k] * rb, tmp, (size_t)dim);
        for (int i = 0; i < dim; i++)
            x[i] += tmp[i];
    }
    cpu_layer_norm(x, dim, m->embd_norm.data, m->embd_norm_b.data, m->cfg.norm_eps);
}

/* An encoder's FFN activation: h = gelu(h + b_up) over its rows (BERT's exact, erf GELU; kernels.h). */
typedef struct {
    cpu_state *st;
    const float *bias;
    int n;
} ffn_act_ctx;

static void ffn_act(void *ctx, int ith, int nth)
{
    ffn_act_ctx *p = ctx;
    int hd = p->st->m->cfg.hidden_dim;
    for (int t = ith; t < p->n; t += nth)
        p->st->kern->gelu_erf(p->st->hb + (size_t)t * hd, p->bias, hd);
}

/* An encoder's FFN over the n rows of st->x, post-norm: BERT's up, GELU, down; nomic-bert's gate|up, SwiGLU,
 * down; jina-bert-v2's gate|up, erf GELU of the gate times up, down. */
static void encoder_ffn(cpu_state *st, int l, int n)
{
    const llm_config *c = &st->m->cfg;
    const llm_layer *L = &st->m->layers[l];
    if (L->w_gate.data != NULL) {
        cpu_mm_out gu[2] = {
            { &L->w_gate, st->hb, (size_t)c->hidden_dim, 0, cpu_packed(st, l, CPU_W_GATE), 0, 0 },
            { &L->w_up, st->hb2, (size_t)c->hidden_dim, 0, cpu_packed(st, l, CPU_W_UP), 0, 0 },
        };
        /* SwiGLU (jina's erf GELU gate) fused into the product's chunks */
        cpu_mm mf = { .x = st->x, .xs = (size_t)c->dim, .n = n, .K = c->dim, .outs = gu, .n_outs = 2,
                      .swiglu = 1, .gelu = c->act };
        cpu_matmul(st, &mf);
        project_out_ln(st, &L->w_down, cpu_packed(st, l, CPU_W_DOWN), st->hb, c->hidden_dim, n, &L->ffn_norm,
                       &L->b_down, &L->ffn_norm_b);
        return;
    }
    ffn_act_ctx fa = { st, L->b_up.data, n };
    cpu_mm_out up = { &L->w_up, st->hb, (size_t)c->hidden_dim, 0, cpu_packed(st, l, CPU_W_UP), 0, 0 };
    cpu_mm mu = { .x = st->x, .xs = (size_t)c->dim, .n = n, .K = c->dim, .outs = &up, .n_outs = 1,
                  .post = ffn_act, .post_ctx = &fa };
    cpu_matmul(st, &mu);
    project_out_ln(st, &L->w_down, cpu_packed(st, l, CPU_W_DOWN), st->hb, c->hidden_dim, n, &L->ffn_norm,
                   &L->b_down, &L->ffn_norm_b);
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
    for (int t = 0; c->bidirectional && t < n; t++) /* every input whole: positions 0, 1, ... of one sequence */
        if (b->pos[t] != (t == 0 || b->seq[t] != b->seq[t - 1] ? 0 : b->pos[t - 1] + 1)) {
            llm_seterr(err, "cpu backend: an encoder's input must be whole in one step (batch index %d, position %d)",
                       t, b->pos[t]);
            return -1;
        }
    size_t erow = llm_dtype_row_bytes(m->tok_embd.type, (uint64_t)c->dim);
    int type = 0; /* an encoder's: 1 after its input's first [SEP] (a pair's second text), else 0 */
    for (int t = 0; t < n; t++) {
        if (t == 0 || b->seq[t] != b->seq[t - 1])
            type = 0;
        if (m->tok_embd.cpu_packed) /* a tied classifier packed at prepare */
            cpu_pk_row_to_f32((cpu_pk_fmt)(m->tok_embd.cpu_packed - 1), m->tok_embd.data, c->dim,
                              (size_t)b->tokens[t], st->x + (size_t)t * c->dim);
        else
            llm_row_to_f32(m->tok_embd.type, (const uint8_t *)m->tok_embd.data + (size_t)b->tokens[t] * erow,
                           st->x + (size_t)t * c->dim, (size_t)c->dim);
        if (c->embd_scale > 0.0f) /* Gemma: sqrt(dim); Granite: its embedding_scale */
            for (int i = 0; i < c->dim; i++)
                st->x[(size_t)t * c->dim + i] *= c->embd_scale;
        if (c->encoder) {
            encoder_embed(st, b, t, type, st->x + (size_t)t * c->dim);
            type = b->tokens[t] == c->sep_id && c->n_types > 1 ? 1 : type;
        } else if (c->layer_norm) { /* ModernBERT's embedding norm */
            cpu_layer_norm(st->x + (size_t)t * c->dim, c->dim, m->embd_norm.data, NULL, c->norm_eps);
        }
    }

    for (int l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &m->layers[l];
        qkv_post_ctx pc = { st, b, l };
        cpu_mm_out qkv[3] = {
            { &L->wq, st->q, (size_t)st->q_dim, 0, cpu_packed(st, l, CPU_W_Q), 0, 0 },
            { &L->wk, st->k, (size_t)st->kv_dim, 0, cpu_packed(st, l, CPU_W_K), 0, 0 },
            { &L->wv, st->v, (size_t)st->kv_dim, 0, cpu_packed(st, l, CPU_W_V), 0, 0 },
        };
        cpu_mm mm = { .x = st->x, .xs = (size_t)c->dim, .n = n, .K = c->dim, .norm = L->attn_norm.data,
                      .xn = st->xb, .eps = c->norm_eps, .layer_norm = c->layer_norm, .outs = qkv, .n_outs = 3,
                      .post = qkv_post, .post_ctx = &pc };
        if (c->encoder) /* post-norm: the block reads x itself */
            mm.norm = NULL, mm.xn = NULL;
        cpu_matmul(st, &mm);

        cpu_attention(st, b, l);

        if (c->encoder) {
            project_out_ln(st, &L->wo, cpu_packed(st, l, CPU_W_O), st->att, st->q_dim, n, &L->attn_norm, &L->bo,
                           &L->attn_norm_b);
            encoder_ffn(st, l, n);
            continue;
        }

        /* (bo: gpt-oss's output bias; absent, no data: as project_out) */
        project_out_ln(st, &L->wo, cpu_packed(st, l, CPU_W_O), st->att, st->q_dim, n, &L->post_attn_norm, &L->bo,
                       NULL);

        if (llm_layer_moe(c, L)) {
            if (cpu_moe_ffn(st, l, n) != 0) {
                llm_seterr(err, "cpu backend: out of memory for the experts of a batch of %d tokens", n);
                return LLM_BACKEND_NOMEM;
            }
            continue;
        }

        const int ff = llm_layer_ff(c, L); /* (ERNIE 4.5 MoE's dense layers are wider than its shared experts) */
        cpu_mm_out gu[2] = {
            { &L->w_gate, st->hb, (size_t)ff, 0, cpu_packed(st, l, CPU_W_GATE), 0, 0 },
            { &L->w_up, st->hb2, (size_t)ff, 0, cpu_packed(st, l, CPU_W_UP), 0, 0 },
        };
        cpu_mm mf = { .x = st->x, .xs = (size_t)c->dim, .n = n, .K = c->dim, .norm = L->ffn_norm.data,
                      .xn = st->xb, .eps = c->norm_eps, .layer_norm = c->layer_norm, .outs = gu, .n_outs = 2,
                      .swiglu = 1, .gelu = c->act };
        cpu_matmul(st, &mf);

        project_out(st, &L->w_down, cpu_packed(st, l, CPU_W_DOWN), st->hb, ff, n, &L->post_ffn_norm);
    }

    /* Gather the rows that want logits (in batch order), then norm + classifier. Rows that want their
     * hidden state (LLM_WANT_HIDDEN) are normed into st->hid and take no part in the classifier. */
    int nw = 0, nh = 0, nrows = 0;
    for (int t = 0; t < n; t++)
        nh += b->want_logits[t] == LLM_WANT_HIDDEN;
    if (nh > 0 && c->dim > c->vocab_size) {
        llm_seterr(err, "cpu backend: hidden rows wanted, but the hidden size (%d) is larger than a row of logits "
                   "(%d)", c->dim, c->vocab_size);
        return -1;
    }
    if (nh > 0 && ensure_hidden(st, nh) != 0) {
        llm_seterr(err, "cpu backend: out of memory for %d hidden rows", nh);
        return LLM_BACKEND_NOMEM;
    }
    nh = 0;
    for (int t = 0; t < n; t++) {
        if (!b->want_logits[t])
            continue;
        nrows++;
        if (b->want_logits[t] == LLM_WANT_HIDDEN) {
            float *h = st->hid + (size_t)nh++ * c->dim;
            memcpy(h, st->x + (size_t)t * c->dim, (size_t)c->dim * sizeof(float));
            if (c->layer_norm)
                cpu_layer_norm(h, c->dim, m->out_norm.data, NULL, c->norm_eps);
            else if (!c->encoder) /* (an encoder's blocks end normed) */
                head_norm(h, 1, c->dim, &m->out_norm, c->norm_eps);
            continue;
        }
        if (nw != t)
            memmove(st->x + (size_t)nw * c->dim, st->x + (size_t)t * c->dim, (size_t)c->dim * sizeof(float));
        nw++;
    }
    if (nrows == 0)
        return 0;
    if (logits == NULL) {
        llm_seterr(err, "cpu backend: logits requested but no output buffer given");
        return -1;
    }
    if (nw > 0 && c->encoder) {
        llm_seterr(err, "cpu backend: an encoder (%s) has no language-model head: it gives hidden states only",
                   m->arch);
        return -1;
    }
    if (nw > 0) {
        cpu_mm_out out = { classifier(m), logits, (size_t)c->vocab_size, 0,
                           st->packed_cls.data != NULL ? &st->packed_cls : NULL, 0, 0 };
        cpu_mm mc = { .x = st->x, .xs = (size_t)c->dim, .n = nw, .K = c->dim, .norm = m->out_norm.data,
                      .xn = st->xb, .eps = c->norm_eps, .outs = &out, .n_outs = 1 };
        cpu_matmul(st, &mc);
        if (c->final_softcap > 0.0f) /* Gemma 2 */
            for (size_t i = 0; i < (size_t)nw * c->vocab_size; i++)
                logits[i] = c->final_softcap * tanhf(logits[i] / c->final_softcap);
        if (c->logit_scale > 0.0f) { /* Granite: as llama.cpp, times the reciprocal */
            float inv = 1.0f / c->logit_scale;
            for (size_t i = 0; i < (size_t)nw * c->vocab_size; i++)
                logits[i] *= inv;
        }
    }
    if (nh > 0) /* logits rows 0 .. nw-1 spread to their places (from the back: a row only moves up), then
                 * the hidden rows into theirs */
        for (int t = n - 1, row = nrows - 1, lw = nw - 1; t >= 0; t--) {
            if (!b->want_logits[t])
                continue;
            float *dst = logits + (size_t)row-- * c->vocab_size;
            if (b->want_logits[t] == LLM_WANT_HIDDEN) {
                memcpy(dst, st->hid + (size_t)--nh * c->dim, (size_t)c->dim * sizeof(float));
            } else {
                if (dst != logits + (size_t)lw * c->vocab_size)
                    memmove(dst, logits + (size_t)lw * c->vocab_size, (size_t)c->vocab_size * sizeof(float));
                lw--;
            }
        }
    return 0;
}

const llm_backend_ops llm_cpu_backend_ops = {
    .name = "cpu",
    .init = cpu_init,
    .forward = cpu_forward,
    .destroy = cpu_destroy,
};
