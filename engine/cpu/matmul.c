/* Parallel matrix multiply over a batch of activations: optional RMSNorm and
 * Q8 quantisation of the activations (tokens split over threads), then the
 * weight rows of all outputs cut into chunks that threads take from a shared
 * counter; each chunk runs the kernel over every token, in token blocks that
 * stay cache-resident, so a weight row is read from memory once per step. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "cpu/cpu_backend.h"

#define CHUNK_ROWS CPU_MM_CHUNK_ROWS
#ifndef TOKEN_BLOCK
#define TOKEN_BLOCK  24  /* tokens per kernel call: a multiple of every tile width; their Q8 activations stay in L1 */
#endif
/* The chunks are cut into one contiguous range per thread (up to this many ranges), which a thread takes in
 * order before it helps with the others': each thread then reads one long stream of weights, which the
 * hardware prefetcher follows, where one shared counter interleaved the threads' chunks (32 rows each) and
 * restarted every thread's stream at each one. */
#define MM_RANGES 64
#define TILED_TOKEN_BLOCK 32 /* gemm_bf16_tiled's: two groups of CPU_BF16_TILE_T, so calls start at a group */

typedef struct {
    cpu_state *st;
    const cpu_mm *mm;
    int need_q8;
    int need_bf16;     /* activations rounded to bf16 too (bf16_act) */
    int tiled;         /* ... in the tile layout, for gemm_bf16_tiled (kernels.h) */
    int split;         /* F16 weights on gemm_f16_tiled: activations in the split tile layout (st->xsplit) */
    const float *xf;   /* float activations (x or its normalised copy) */
    size_t xfs;
    int n_units;       /* outputs scheduled: each output, or with swiglu each (gate, up) pair */
    int chunks[CPU_MM_MAX_OUTS + 1]; /* prefix sums of chunk counts per unit */
    int n_ranges;
    struct {
        _Alignas(64) _Atomic int next;     /* the range's next chunk; a cache line each */
        int end;
    } range[MM_RANGES];
} mm_job;

static void rmsnorm_row(const cpu_kernels *k, const float *x, const float *w, float *y, int n, float eps)
{
    float ss = k->dot_f32(x, x, n) / (float)n;
    float s = 1.0f / sqrtf(ss + eps);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * s * w[i];
}

/* x = LayerNorm(x) * w + b over n floats (BERT's; b NULL: none, ModernBERT's), mean and variance summed in
 * double. */
void cpu_layer_norm(float *x, int n, const float *w, const float *b, float eps)
{
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    float mean = (float)(sum / n);
    for (int i = 0; i < n; i++) {
        float d = x[i] - mean;
        sq += (double)d * d;
    }
    float r = 1.0f / sqrtf((float)(sq / n) + eps);
    for (int i = 0; i < n; i++)
        x[i] = (x[i] - mean) * r * w[i] + (b != NULL ? b[i] : 0.0f);
}

/* BF16 weights on a table that takes bf16 activations (kernels.h: bf16_act). */
static int bf16_act(const cpu_kernels *k, llm_dtype t)
{
    return t == LLM_BF16 && k->bf16_act;
}

static int widen(const cpu_kernels *k, llm_dtype t, int n)
{
    return t != LLM_F32 && n >= CPU_MM_WIDEN_MIN_TOKENS && !(k->int8_prefill && cpu_dtype_wants_q8(t)) &&
           !bf16_act(k, t);
}

/* The activation rows an output reads: [*t0, *t0 + return). */
static int out_rows(const cpu_mm *mm, const cpu_mm_out *o, int *t0)
{
    *t0 = o->nt > 0 ? o->t0 : 0;
    return o->nt > 0 ? o->nt : mm->n;
}

static void run_rows(mm_job *j, const cpu_mm_out *o, int r0, int r1, int ith)
{
    const cpu_mm *mm = j->mm;
    int tb, n = out_rows(mm, o, &tb);
    const cpu_kernels *k = j->st->kern;
    llm_dtype t = o->w->type;
    size_t ws = llm_dtype_row_bytes(t, (uint64_t)mm->K);
    const uint8_t *w = (const uint8_t *)o->w->data + (size_t)r0 * ws;
    const void *x;
    size_t xs;
    /* r0 is a multiple of CHUNK_ROWS, so of CPU_PK_ROWS */
    const uint8_t *packed = o->packed == NULL ? NULL
        : o->packed->data + (size_t)(r0 / CPU_PK_ROWS) * (size_t)(mm->K / LLM_QK) * cpu_pk_block_bytes(o->packed->fmt);
    if (packed == NULL && t == LLM_F16 && j->split) { /* all tokens in one call: the weights split once */
        k->gemm_f16_tiled(mm->K, w, ws, r1 - r0, j->st->xsplit, (size_t)mm->K * sizeof(float), n,
                          o->y + r0, o->ldy, o->accumulate, (uint16_t *)(j->st->wbuf + (size_t)ith * j->st->wbuf_floats));
        return;
    }
    if (packed == NULL && widen(k, t, n)) {
        float *buf = j->st->wbuf + (size_t)ith * j->st->wbuf_floats;
        k->dequant_rows(t, w, ws, r1 - r0, mm->K, buf);
        w = (const uint8_t *)buf;
        ws = (size_t)mm->K * sizeof(float);
        t = LLM_F32;
    }
    if (bf16_act(k, t)) {
        x = j->st->xbf;
        xs = (size_t)mm->K * sizeof(uint16_t);
    } else if (cpu_dtype_wants_q8(t)) {
        x = j->st->qact;
        xs = (size_t)(mm->K / LLM_QK) * sizeof(cpu_q8_act);
    } else {
        x = j->xf;
        xs = j->xfs * sizeof(float);
    }
    int tiled = j->tiled && t == LLM_BF16;
    cpu_gemm_fn gemm = tiled ? k->gemm_bf16_tiled : cpu_gemm_for(k, t);
    const int block = tiled ? TILED_TOKEN_BLOCK : TOKEN_BLOCK;
    /* (Splitting K as well measured slower: the tiles' reductions dominate.) */
    for (int t0 = tb; t0 < tb + n; t0 += block) {
        int nt = tb + n - t0 < block ? tb + n - t0 : block;
        const uint8_t *xt = (const uint8_t *)x + (size_t)t0 * xs;
        float *yt = o->y + (size_t)t0 * o->ldy + r0;
        if (packed != NULL)
            k->gemm_packed(o->packed->fmt, mm->K, packed, r1 - r0, xt, xs, nt, yt, o->ldy, o->accumulate);
        else
            gemm(mm->K, w, ws, r1 - r0, xt, xs, nt, yt, o->ldy, o->accumulate);
    }
}

/* Output o's bias (mm->bias[o]) over rows [r0, r1) of each of its products. */
static void add_bias(const cpu_mm *mm, int o, int r0, int r1)
{
    const float *b = mm->bias != NULL ? mm->bias[o] : NULL;
    if (b == NULL)
        return;
    const cpu_mm_out *out = &mm->outs[o];
    int tb, n = out_rows(mm, out, &tb);
    for (int t = tb; t < tb + n; t++) {
        float *y = out->y + (size_t)t * out->ldy;
        for (int r = r0; r < r1; r++)
            y[r] += b[r];
    }
}

/* Work item c: CHUNK_ROWS rows of one output (with swiglu, of the gate and the up one, then their product). */
static void run_chunk(mm_job *j, int c, int ith)
{
    const cpu_mm *mm = j->mm;
    cpu_state *st = j->st;
    int lo = 0, hi = j->n_units - 1; /* the unit u with chunks[u] <= c < chunks[u + 1] */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (j->chunks[mid] <= c)
            lo = mid;
        else
            hi = mid - 1;
    }
    int o = mm->swiglu ? 2 * lo : lo;
    const cpu_mm_out *out = &mm->outs[o];
    int rows = (int)out->w->ne[1];
    int r0 = (c - j->chunks[lo]) * CHUNK_ROWS;
    int r1 = r0 + CHUNK_ROWS < rows ? r0 + CHUNK_ROWS : rows;
    run_rows(j, out, r0, r1, ith);
    add_bias(mm, o, r0, r1);
    if (mm->swiglu) {
        const cpu_mm_out *up = out + 1;
        run_rows(j, up, r0, r1, ith);
        add_bias(mm, o + 1, r0, r1);
        int tb, n = out_rows(mm, out, &tb);
        for (int t = tb; t < tb + n; t++) {
            float *g = out->y + (size_t)t * out->ldy + r0;
            const float *u = up->y + (size_t)t * up->ldy + r0;
            if (mm->gelu == LLM_ACT_GELU_ERF) /* (jina-bert-v2's, ModernBERT's exact GELU) */
                for (int i = 0; i < r1 - r0; i++)
                    g[i] = cpu_gelu_erf1(g[i]) * u[i];
            else if (mm->gelu == LLM_ACT_SWIGLU_OAI)
                for (int i = 0; i < r1 - r0; i++)
                    g[i] = llm_swiglu_oai(g[i], u[i]);
            else
                (mm->gelu ? st->kern->geglu : st->kern->swiglu)(g, u, r1 - r0);
        }
    }
}

static void mm_worker(void *ctx, int ith, int nth)
{
    mm_job *j = ctx;
    const cpu_mm *mm = j->mm;
    cpu_state *st = j->st;
    int nb = mm->K / LLM_QK;

    if (mm->norm != NULL || j->need_q8 || j->need_bf16 || j->split) {
        /* a thread takes a token at a time, or a whole group of the tile layouts (whose rows it interleaves) */
        const int step = j->tiled || j->split ? CPU_BF16_TILE_T : 1;
        for (int u = ith * step; u < mm->n; u += nth * step) {
            for (int t = u; t < u + step && t < mm->n; t++) {
                const float *xr = mm->x + (size_t)t * mm->xs;
                if (mm->norm != NULL) {
                    float *xn = mm->xn + (size_t)t * mm->K;
                    if (mm->layer_norm) {
                        memcpy(xn, xr, (size_t)mm->K * sizeof(float));
                        cpu_layer_norm(xn, mm->K, mm->norm, NULL, mm->eps);
                    } else {
                        rmsnorm_row(st->kern, xr, mm->norm, xn, mm->K, mm->eps);
                    }
                    xr = xn;
                }
                if (j->need_q8)
                    st->kern->quantize_act(xr, st->qact + (size_t)t * nb, mm->K);
                if (j->need_bf16)
                    cpu_bf16_act_store(j->tiled, mm->K, xr, t, st->xbf);
                if (j->split)
                    cpu_bf16_act_store_split(mm->K, xr, t, st->xsplit);
            }
            if (j->tiled && u + step >= mm->n)
                cpu_bf16_act_pad(0, mm->K, mm->n, st->xbf);
            if (j->split && u + step >= mm->n)
                cpu_bf16_act_pad(1, mm->K, mm->n, st->xsplit);
        }
        cpu_pool_barrier(st->pool);
    }

    for (int v = 0; v < j->n_ranges; v++) { /* its own range, then the others' rest */
        int rg = (ith + v) % j->n_ranges;
        for (int c; (c = atomic_fetch_add_explicit(&j->range[rg].next, 1, memory_order_relaxed)) < j->range[rg].end;)
            run_chunk(j, c, ith);
    }
    if (mm->post != NULL) {
        cpu_pool_barrier(st->pool);
        mm->post(mm->post_ctx, ith, nth);
    }
}

void cpu_matmul(cpu_state *st, const cpu_mm *mm)
{
    mm_job j = { .st = st, .mm = mm };
    j.xf = mm->norm != NULL ? mm->xn : mm->x;
    j.xfs = mm->norm != NULL ? (size_t)mm->K : mm->xs;
    j.n_units = mm->swiglu ? mm->n_outs / 2 : mm->n_outs; /* swiglu: a chunk does gate and up rows */
    j.chunks[0] = 0;
    for (int o = 0; o < mm->n_outs; o++) {
        const cpu_mm_out *out = &mm->outs[o];
        int tb, n = out_rows(mm, out, &tb);
        j.need_bf16 |= out->packed == NULL && bf16_act(st->kern, out->w->type);
        j.need_q8 |= out->packed != NULL ||
                     (cpu_dtype_wants_q8(out->w->type) && !widen(st->kern, out->w->type, n));
        if (!mm->swiglu || o % 2 == 0) {
            int u = mm->swiglu ? o / 2 : o, rows = (int)out->w->ne[1];
            j.chunks[u + 1] = j.chunks[u] + (rows + CHUNK_ROWS - 1) / CHUNK_ROWS;
        }
    }
    /* The tile layout where the table has AMX and every output reads all rows from the first (an expert's
     * rows start anywhere: its products keep the row layout, so a matrix always takes the same kernel). */
    int whole = mm->K % 32 == 0;
    for (int o = 0; o < mm->n_outs; o++) {
        whole &= mm->outs[o].nt == 0;
        j.split |= mm->outs[o].packed == NULL && mm->outs[o].w->type == LLM_F16;
    }
    j.tiled = j.need_bf16 && st->kern->gemm_bf16_tiled != NULL && whole;
    /* F16 products of many tokens (those widened to floats otherwise) on AMX tiles; not decode, where
     * splitting every weight per token cost 3x the step (measured) */
    j.split &= st->kern->gemm_f16_tiled != NULL && whole && widen(st->kern, LLM_F16, mm->n);
    int total = j.chunks[j.n_units], nth = cpu_pool_threads(st->pool);
    j.n_ranges = nth < MM_RANGES ? nth : MM_RANGES;
    for (int r = 0; r < j.n_ranges; r++) {
        atomic_init(&j.range[r].next, (int)((long)total * r / j.n_ranges));
        j.range[r].end = (int)((long)total * (r + 1) / j.n_ranges);
    }
    cpu_pool_run(st->pool, mm_worker, &j);
}

/* The tile layouts' writers round a chunk of the row at a time with llm_row_from_f32 (whose loop vectorises)
 * and then scatter its pairs into the token's column. */
#define ACT_CHUNK 256

/* Pairs of the bf16 values h (n of them) into column c of the rows from p0 on, 16 pairs a row apart. */
static void scatter_pairs(const uint16_t *h, int n, uint32_t *col, int p0)
{
    for (int i = 0; i < n / 2; i++)
        col[(size_t)(p0 + i) * CPU_BF16_TILE_T] = (uint32_t)h[2 * i] | (uint32_t)h[2 * i + 1] << 16;
}

void cpu_bf16_act_store(int tiled, int K, const float *x, int t, uint16_t *X)
{
    if (!tiled) {
        llm_row_from_f32(LLM_BF16, x, X + (size_t)t * (size_t)K, (size_t)K);
        return;
    }
    uint32_t *g = (uint32_t *)(void *)(X + (size_t)(t - t % CPU_BF16_TILE_T) * (size_t)K) + t % CPU_BF16_TILE_T;
    uint16_t h[ACT_CHUNK];
    for (int e = 0; e < K; e += ACT_CHUNK) {
        int n = K - e < ACT_CHUNK ? K - e : ACT_CHUNK;
        llm_row_from_f32(LLM_BF16, x + e, h, (size_t)n);
        scatter_pairs(h, n, g, e / 2);
    }
}

void cpu_bf16_act_store_split(int K, const float *x, int t, uint16_t *X)
{
    uint32_t *hi = (uint32_t *)(void *)(X + (size_t)(t - t % CPU_BF16_TILE_T) * 2 * (size_t)K) + t % CPU_BF16_TILE_T;
    uint32_t *lo = hi + (size_t)CPU_BF16_TILE_T * (size_t)K / 2;
    uint16_t h[ACT_CHUNK], l[ACT_CHUNK];
    float rest[ACT_CHUNK];
    for (int e = 0; e < K; e += ACT_CHUNK) {
        int n = K - e < ACT_CHUNK ? K - e : ACT_CHUNK;
        llm_row_from_f32(LLM_BF16, x + e, h, (size_t)n);
        for (int i = 0; i < n; i++) { /* x - hi, exactly (hi's bits widened: the low 16 zero) */
            uint32_t u = (uint32_t)h[i] << 16;
            float hf;
            memcpy(&hf, &u, 4);
            rest[i] = x[e + i] - hf;
        }
        llm_row_from_f32(LLM_BF16, rest, l, (size_t)n);
        scatter_pairs(h, n, hi, e / 2);
        scatter_pairs(l, n, lo, e / 2);
    }
}

void cpu_bf16_act_pad(int split, int K, int n, uint16_t *X)
{
    int c0 = n % CPU_BF16_TILE_T;
    if (c0 == 0)
        return;
    for (int part = 0; part <= split; part++) { /* hi (or the plain tile layout), then lo */
        uint32_t *g = (uint32_t *)(void *)(X + (size_t)(n - c0) * (size_t)(split ? 2 : 1) * (size_t)K) +
                      (size_t)part * CPU_BF16_TILE_T * (size_t)K / 2;
        for (int p = 0; p < K / 2; p++)
            for (int c = c0; c < CPU_BF16_TILE_T; c++)
                g[(size_t)p * CPU_BF16_TILE_T + c] = 0;
    }
}
