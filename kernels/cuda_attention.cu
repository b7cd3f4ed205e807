/* Paged grouped-query attention. One kernel serves decode and prefill: a work
 * item is up to q_tile tokens of one sequence; a block takes (item, kv head,
 * split of the positions), loads the item's queries of every query head of
 * that kv head into shared memory, streams the keys and values of its split in
 * tiles of 32 positions through shared memory (read once for all its queries:
 * GQA and prefill reuse) and keeps an online softmax per query row. Splits
 * write partial (max, sum, unnormalised output); a second kernel merges them
 * (flash-decoding). Causality: row r sees positions p <= pos(token of r); in a sliding-window layer
 * (plan.window = W > 0, Gemma 2 / 3) only pos - W + 1 <= p as well: every kernel starts at the tile
 * holding the item's earliest window start, a split wholly before it returns at once, and the merge reads
 * only the splits from the one holding the token's window start. Gemma 2's soft cap (plan.softcap) maps
 * each visible score, after the scale, to cap * tanh(s / cap) before the max and the softmax. gpt-oss's
 * attention sinks (plan.sinks: a logit per head in the softmax's sum, with no value) enter only where the
 * softmax is finished: the merge, or the one-split decode kernel's direct output (att_sink_den).
 *
 * Shared memory (floats), R = q_tile * group rows, hd = head_dim:
 *   qs[R][hd] | ks[32][hd+1] | vs[32][hd] | sc[R][32] | m[R] | l[R] | corr[R] | acc[R][hd] | rpos[R] (int)
 * ks rows are padded by one float so lanes reading different keys hit
 * different banks. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

#include "cuda_internal.cuh"
#ifndef CU_EMULATE
#include <mma.h>
#endif

#define ATT_THREADS 128
#define ATT_KT 32 /* positions per tile; equal to the warp size (softmax maps lane -> position) */

size_t cuda_att_smem(int q_tile, int group, int head_dim)
{
    size_t R = (size_t)q_tile * (size_t)group, hd = (size_t)head_dim;
    size_t floats = R * hd + ATT_KT * (hd + 1) + ATT_KT * hd + R * ATT_KT + 3 * R + R * hd + R;
    return floats * sizeof(float);
}

int cuda_att_q_tile(int group, int head_dim, size_t smem_max)
{
    for (int qt = 16; qt >= 1; qt--)
        if (cuda_att_smem(qt, group, head_dim) <= smem_max)
            return qt;
    return 0;
}

size_t cuda_att_ws_floats(const cu_att_plan *p, int n_tokens)
{
    return (size_t)n_tokens * (size_t)p->n_heads * (size_t)p->n_splits * (size_t)(p->head_dim + 2);
}

typedef struct {
    const float   *qkv;
    int            ld;
    cu_tokinfo     ti;
    const void    *kc, *vc;     /* this layer's cache */
    const float   *ksc, *vsc;   /* q8_0 cache: its scales, one per qg elements of a row (else NULL) */
    int            qg;
    const cu_att_item *items;
    float         *ws;          /* [n_tokens][n_heads][n_splits][hd + 2]: acc..., m, l */
    int            n_heads, n_kv, hd, group, block_size, q_tile, chunk, n_splits;
    float          scale;
    float         *out;         /* decode kernel with one split: the final output, written directly (no merge) */
    int            win;         /* sliding window (0: none): position p sees pos - win + 1 .. pos */
    float          cap;         /* soft cap of the scaled scores (0: none) */
    const float   *alibi;       /* ALiBi's slope per head (NULL: none; cu_att_plan) */
    const int32_t *qpos;        /* ... and the tokens' own positions */
    const float   *sinks;       /* gpt-oss's attention sink per head (NULL: none) */
} att_args;
#ifdef CU_EMULATE
static inline void cu_emu_arg_check(const att_args &a, int arg)
{
    cu_emu_check_dev_ptrs({ a.qkv, a.kc, a.vc, a.ksc, a.vsc, a.items, a.ws, a.out, a.qpos, a.alibi, a.sinks }, arg);
    cu_emu_arg_check(a.ti, arg);
}
#endif

/* The denominator that finishes a softmax of max M and sum L (the output o * num_scale / it): L, or with an
 * attention sink s (gpt-oss; sinks NULL: none) L + e^(s - M), numerator and denominator rescaled to max(M, s)
 * first so that neither overflows, as the CPU's softmax_sink takes the max with the sink. */
__device__ __forceinline__ float att_sink_den(float M, float L, const float *sinks, int h, float *num_scale)
{
    if (sinks == NULL) {
        *num_scale = 1.0f;
        return L;
    }
    const float s = sinks[h], M2 = fmaxf(M, s), f = expf(M - M2);
    *num_scale = f;
    return L * f + expf(s - M2);
}

/* The cache row of position p of a sequence, through its block table. */
__device__ __forceinline__ size_t kv_slot(const int32_t *table, int p, int block_size)
{
    return (size_t)table[p / block_size] * block_size + (size_t)(p % block_size);
}

/* Whether the query at position pos sees position p (causal; within the window when there is one). */
__device__ __forceinline__ bool att_sees(int p, int pos, int win)
{
    return p <= pos && (win <= 0 || p > pos - win);
}

/* A visible score after the scale: soft-capped when the model says so (Gemma 2). */
__device__ __forceinline__ float att_cap(float s, float cap)
{
    return cap > 0.0f ? cap * tanhf(s / cap) : s;
}

/* A visible score s of position p for query head h of token t, less ALiBi's bias where the model has it
 * (jina-bert-v2): the head's slope (llm_alibi_slope's, uploaded once) times the distance to the token's own
 * position. */
__device__ __forceinline__ float att_alibi(const att_args &a, float s, int p, int t, int h)
{
    if (a.alibi == NULL)
        return s;
    return s - a.alibi[h] * fabsf((float)(p - a.qpos[t]));
}

/* The first position any query of item `it` sees: its earliest token's window start (0 without a window).
 * The same value in every thread of a block (read before any barrier). */
__device__ __forceinline__ int att_item_lo(const att_args &a, const cu_att_item &it)
{
    if (a.win <= 0)
        return 0;
    int lo = INT_MAX;
    for (int i = 0; i < it.nq; i++)
        lo = min(lo, a.ti.pos[it.t0 + i] - a.win + 1);
    return max(lo, 0);
}

/* Where a split's tile walk starts: p_begin, or the tile (of kt positions from p_begin) holding lo. */
__device__ __forceinline__ int att_first(int p_begin, int lo, int kt)
{
    return lo > p_begin ? p_begin + (lo - p_begin) / kt * kt : p_begin;
}

/* Element i of a cache as a float: f32, f16, or a q8_0 cache's int8 times its group's scale (sc[i / qg]; the
 * CPU backend's kv_q8_dequant computes the same product). */
template <typename C> __device__ __forceinline__ float cache_ld(const C *p, const float *sc, int qg, size_t i);
template <> __device__ __forceinline__ float cache_ld<float>(const float *p, const float *, int, size_t i)
{
    return p[i];
}
template <> __device__ __forceinline__ float cache_ld<__half>(const __half *p, const float *, int, size_t i)
{
    return __half2float(p[i]);
}
template <> __device__ __forceinline__ float cache_ld<int8_t>(const int8_t *p, const float *sc, int qg, size_t i)
{
    return sc[i / (size_t)qg] * (float)p[i];
}

template <typename C>
__global__ void __launch_bounds__(ATT_THREADS) attention_kernel(att_args a)
{
    CU_PDL_ENTRY();
    CU_DYN_SMEM(smem);
    const cu_att_item it = a.items[blockIdx.z];
    const int g = blockIdx.y, split = blockIdx.x, hd = a.hd;
    const int p_begin = split * a.chunk;
    if (p_begin >= it.n_pos)
        return; /* uniform over the block, before any barrier */
    const int p_end = min(p_begin + a.chunk, it.n_pos), lo = att_item_lo(a, it);
    if (p_end <= lo)
        return; /* the split lies wholly before every query's window (the merge does not read it) */
    const int R = it.nq * a.group, RT = a.q_tile * a.group;
    const int kv_dim = a.n_kv * hd;
    float *qs = smem;
    float *ks = qs + (size_t)RT * hd;
    float *vs = ks + ATT_KT * (hd + 1);
    float *sc = vs + ATT_KT * hd;
    float *mrow = sc + RT * ATT_KT;
    float *lrow = mrow + RT;
    float *corr = lrow + RT;
    float *acc = corr + RT;
    int *rpos = (int *)(acc + (size_t)RT * hd);
    const C *kc = (const C *)a.kc, *vc = (const C *)a.vc;
    const int32_t *table = a.ti.tables + a.ti.tab[it.t0];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    /* Row r = (token it.t0 + r / group, query head g * group + r % group). */
    for (int idx = tid; idx < R * hd; idx += ATT_THREADS) {
        int r = idx / hd, d = idx % hd;
        int t = it.t0 + r / a.group, h = g * a.group + r % a.group;
        qs[idx] = a.qkv[(size_t)t * a.ld + (size_t)h * hd + d];
        acc[idx] = 0.0f;
    }
    for (int r = tid; r < R; r += ATT_THREADS) {
        mrow[r] = -INFINITY;
        lrow[r] = 0.0f;
        rpos[r] = a.ti.pos[it.t0 + r / a.group];
    }
    __syncthreads();

    for (int p0 = att_first(p_begin, lo, ATT_KT); p0 < p_end; p0 += ATT_KT) {
        for (int idx = tid; idx < ATT_KT * hd; idx += ATT_THREADS) {
            int j = idx / hd, d = idx % hd, p = p0 + j;
            float kv = 0.0f, vv = 0.0f;
            if (p < p_end) {
                size_t slot = kv_slot(table, p, a.block_size);
                size_t o = slot * (size_t)kv_dim + (size_t)g * hd + d;
                kv = cache_ld<C>(kc, a.ksc, a.qg, o);
                vv = cache_ld<C>(vc, a.vsc, a.qg, o);
            }
            ks[j * (hd + 1) + d] = kv;
            vs[j * hd + d] = vv;
        }
        __syncthreads();
        for (int idx = tid; idx < R * ATT_KT; idx += ATT_THREADS) {
            int r = idx / ATT_KT, j = idx % ATT_KT, p = p0 + j;
            float s = -INFINITY;
            if (p < p_end && att_sees(p, rpos[r], a.win)) {
                const float *qr = qs + (size_t)r * hd, *kr = ks + j * (hd + 1);
                float dot = 0.0f;
                for (int d = 0; d < hd; d++)
                    dot += qr[d] * kr[d];
                s = att_alibi(a, att_cap(dot * a.scale, a.cap), p, it.t0 + r / a.group, g * a.group + r % a.group);
            }
            sc[idx] = s;
        }
        __syncthreads();
        for (int r = warp; r < R; r += ATT_THREADS / 32) {
            float s = sc[r * ATT_KT + lane];
            float mt = s;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
            float m_old = mrow[r], m_new = fmaxf(m_old, mt);
            float p = 0.0f, cr = 1.0f;
            if (m_new != -INFINITY) {   /* else: nothing visible yet in this row */
                p = expf(s - m_new);      /* s = -inf gives 0 */
                cr = expf(m_old - m_new); /* m_old = -inf gives 0 */
            }
            float ps = p;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                ps += __shfl_xor_sync(0xffffffffu, ps, o);
            sc[r * ATT_KT + lane] = p;
            if (lane == 0) {
                mrow[r] = m_new;
                lrow[r] = lrow[r] * cr + ps;
                corr[r] = cr;
            }
        }
        __syncthreads();
        for (int idx = tid; idx < R * hd; idx += ATT_THREADS) {
            int r = idx / hd, d = idx % hd;
            const float *pr = sc + r * ATT_KT;
            float v = acc[idx] * corr[r];
#pragma unroll 8
            for (int j = 0; j < ATT_KT; j++)
                v += pr[j] * vs[j * hd + d];
            acc[idx] = v;
        }
        __syncthreads();
    }

    for (int idx = tid; idx < R * hd; idx += ATT_THREADS) {
        int r = idx / hd, d = idx % hd;
        int t = it.t0 + r / a.group, h = g * a.group + r % a.group;
        float *w = a.ws + (((size_t)t * a.n_heads + h) * a.n_splits + split) * (size_t)(hd + 2);
        w[d] = acc[idx];
        if (d == 0) {
            w[hd] = mrow[r];
            w[hd + 1] = lrow[r];
        }
    }
}

/* Prefill / mixed steps (plan q_tile > 1, head_dim a multiple of 16): the same work split as
 * attention_kernel (a block per item x kv head x split, the item's tokens x group query rows sharing each
 * K/V tile, online softmax, the same split-partials layout), with the two products on tensor cores
 * (nvcuda::wmma 16x16x16, half inputs, float accumulation):
 *   S = Q K^T  per 16x16 tile (Q pre-scaled and rounded to half, K tile as a col-major matrix_b) -> smem;
 *   scale is in Q; causal mask + online softmax by one warp per row in smem, P rounded to half, the row of
 *   the float output accumulator O (kept in smem) rescaled by exp(m_old - m_new) there;
 *   O += P V   per 16x16 output tile (accumulator loaded from / stored to smem around the mma).
 * Tiles of S and k-steps of P V whose positions all lie past the last position of their 16 rows are
 * skipped (causal). Rows are padded to a multiple of 16 (zero queries, masked), keys to TC_KT (zero K/V).
 * f32 caches are rounded to half on the way into shared memory (the scalar kernel keeps them float).
 * Shared memory (RP = q_tile * group rounded up to 16, hd = head_dim), in this order:
 *   qh[RP][hd+8] half | kh[TC_KT][hd+8] half | vh[TC_KT][hd+8] half | sc[RP][TC_KT+4] float |
 *   ph[RP][TC_KT+8] half | o[RP][hd+4] float | m[RP] | l[RP] | rpos[RP] (int)
 * The paddings keep every row 16-byte aligned (wmma's ldm rule) and every 16-row tile 32-byte aligned. */
#define TC_THREADS 128
#define TC_WARPS (TC_THREADS / 32)
#define TC_KT 64       /* positions per K/V tile */
#define TC_MAX_ROWS 64 /* query rows (tokens x group) per block at most */

__host__ __device__ static inline int tc_rows(int q_tile, int group) { return (q_tile * group + 15) & ~15; }

size_t cuda_att_tc_smem(int q_tile, int group, int head_dim)
{
    size_t RP = (size_t)tc_rows(q_tile, group), hd = (size_t)head_dim;
    return 2 * (RP * (hd + 8) + 2 * TC_KT * (hd + 8) + RP * (TC_KT + 8)) +
           4 * (RP * (TC_KT + 4) + RP * (hd + 4) + 3 * RP);
}

int cuda_att_tc_enabled(int head_dim)
{
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("LLM_CUDA_ATT_TC");
        env = !(e != NULL && strcmp(e, "0") == 0);
    }
    return env && head_dim > 0 && head_dim % 16 == 0;
}

int cuda_att_tc_q_tile(int group, int head_dim, size_t smem_max)
{
    if (!cuda_att_tc_enabled(head_dim))
        return 0;
    for (int qt = TC_MAX_ROWS; qt >= 2; qt--)
        if (tc_rows(qt, group) <= TC_MAX_ROWS && cuda_att_tc_smem(qt, group, head_dim) <= smem_max)
            return qt;
    return 0;
}

/* K and V rows p0 .. p0+TC_KT-1 of kv head g into kh / vh as half (rows at or past p_end: zero). */
template <typename C> struct tc_kv { /* f32 and q8_0 caches: element by element, rounded to half */
    static __device__ __forceinline__ void load(const att_args &a, const C *kc, const C *vc,
                                                const int32_t *table, int g, int p0, int p_end, __half *kh,
                                                __half *vh, int ldh)
    {
        const int hd = a.hd;
        const size_t kv_dim = (size_t)a.n_kv * hd;
        for (int idx = threadIdx.x; idx < TC_KT * hd; idx += TC_THREADS) {
            int j = idx / hd, d = idx % hd, p = p0 + j;
            float kk = 0.0f, vv = 0.0f;
            if (p < p_end) {
                size_t slot = kv_slot(table, p, a.block_size);
                size_t o = slot * kv_dim + (size_t)g * hd + d;
                kk = cache_ld<C>(kc, a.ksc, a.qg, o);
                vv = cache_ld<C>(vc, a.vsc, a.qg, o);
            }
            kh[(size_t)j * ldh + d] = __float2half_rn(kk);
            vh[(size_t)j * ldh + d] = __float2half_rn(vv);
        }
    }
};
template <> struct tc_kv<__half> {
    static __device__ __forceinline__ void load(const att_args &a, const __half *kc, const __half *vc,
                                                const int32_t *table, int g, int p0, int p_end, __half *kh,
                                                __half *vh, int ldh)
    {
        const int hd = a.hd, per = hd / 8; /* 16-byte pieces per row */
        const size_t kv_dim = (size_t)a.n_kv * hd;
        for (int idx = threadIdx.x; idx < TC_KT * per; idx += TC_THREADS) {
            int j = idx / per, c = idx % per, p = p0 + j;
            uint4 kk = { 0u, 0u, 0u, 0u }, vv = { 0u, 0u, 0u, 0u };
            if (p < p_end) {
                size_t slot = kv_slot(table, p, a.block_size);
                size_t o = slot * kv_dim + (size_t)g * hd + (size_t)c * 8;
                kk = __ldg((const uint4 *)(kc + o));
                vv = __ldg((const uint4 *)(vc + o));
            }
            *(uint4 *)(kh + (size_t)j * ldh + c * 8) = kk;
            *(uint4 *)(vh + (size_t)j * ldh + c * 8) = vv;
        }
    }
};

template <typename C>
__global__ void __launch_bounds__(TC_THREADS) attention_tc_kernel(att_args a)
{
    CU_PDL_ENTRY();
    using namespace nvcuda;
    CU_DYN_SMEM(smem);
    const cu_att_item it = a.items[blockIdx.z];
    const int g = blockIdx.y, split = blockIdx.x, hd = a.hd;
    const int p_begin = split * a.chunk;
    if (p_begin >= it.n_pos)
        return; /* uniform over the block, before any barrier */
    const int p_end = min(p_begin + a.chunk, it.n_pos), lo = att_item_lo(a, it);
    if (p_end <= lo)
        return; /* wholly before every query's window */
    const int R = it.nq * a.group, RP = (R + 15) & ~15, RT = tc_rows(a.q_tile, a.group);
    const int ldh = hd + 8, lds = TC_KT + 4, ldp = TC_KT + 8, ldo = hd + 4;
    __half *qh = (__half *)smem;
    __half *kh = qh + (size_t)RT * ldh;
    __half *vh = kh + (size_t)TC_KT * ldh;
    float *sc = (float *)(vh + (size_t)TC_KT * ldh);
    __half *ph = (__half *)(sc + (size_t)RT * lds);
    float *oc = (float *)(ph + (size_t)RT * ldp);
    float *mrow = oc + (size_t)RT * ldo;
    float *lrow = mrow + RT;
    int *rpos = (int *)(lrow + RT);
    const C *kc = (const C *)a.kc, *vc = (const C *)a.vc;
    const int32_t *table = a.ti.tables + a.ti.tab[it.t0];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    /* Row r = (token it.t0 + r / group, query head g * group + r % group); rows R..RP-1 are padding. */
    for (int idx = tid; idx < RP * hd; idx += TC_THREADS) {
        int r = idx / hd, d = idx % hd;
        float q = 0.0f;
        if (r < R) {
            int t = it.t0 + r / a.group, h = g * a.group + r % a.group;
            q = a.qkv[(size_t)t * a.ld + (size_t)h * hd + d] * a.scale;
        }
        qh[(size_t)r * ldh + d] = __float2half_rn(q);
        oc[(size_t)r * ldo + d] = 0.0f;
    }
    for (int r = tid; r < RP; r += TC_THREADS) {
        mrow[r] = -INFINITY;
        lrow[r] = 0.0f;
        rpos[r] = r < R ? a.ti.pos[it.t0 + r / a.group] : -1; /* padding rows see nothing */
    }
    __syncthreads();

    const int n_rt = RP / 16, n_kt = TC_KT / 16, n_dt = hd / 16;
    for (int p0 = att_first(p_begin, lo, TC_KT); p0 < p_end; p0 += TC_KT) {
        tc_kv<C>::load(a, kc, vc, table, g, p0, p_end, kh, vh, ldh);
        __syncthreads();
        /* S = Q K^T, one 16x16 tile per warp at a time */
        for (int tile = warp; tile < n_rt * n_kt; tile += TC_WARPS) {
            int i = tile / n_kt, j = tile % n_kt;
            int last = -1;
            for (int r = 16 * i; r < 16 * i + 16; r++)
                last = max(last, rpos[r]);
            if (p0 + 16 * j > last)
                continue; /* every position of this tile is masked for these rows: warp-uniform */
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> s;
            wmma::fill_fragment(s, 0.0f);
            for (int k = 0; k < n_dt; k++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> qa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> kb;
                wmma::load_matrix_sync(qa, qh + (size_t)(16 * i) * ldh + 16 * k, ldh);
                wmma::load_matrix_sync(kb, kh + (size_t)(16 * j) * ldh + 16 * k, ldh);
                wmma::mma_sync(s, qa, kb, s);
            }
            wmma::store_matrix_sync(sc + (size_t)(16 * i) * lds + 16 * j, s, lds, wmma::mem_row_major);
        }
        __syncthreads();
        /* online softmax: a warp per row, a lane per 2 positions; skipped tiles are masked here */
        for (int r = warp; r < RP; r += TC_WARPS) {
            float s[TC_KT / 32];
            float mt = -INFINITY;
#pragma unroll
            for (int u = 0; u < TC_KT / 32; u++) {
                int j = lane + 32 * u, p = p0 + j;
                s[u] = (p < p_end && att_sees(p, rpos[r], a.win))
                           ? att_alibi(a, att_cap(sc[(size_t)r * lds + j], a.cap), p, it.t0 + r / a.group,
                                       g * a.group + r % a.group)
                           : -INFINITY;
                mt = fmaxf(mt, s[u]);
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
            float m_old = mrow[r], m_new = fmaxf(m_old, mt), cr = 1.0f, ps = 0.0f;
            if (m_new != -INFINITY)        /* else: nothing visible yet in this row */
                cr = expf(m_old - m_new);  /* m_old = -inf gives 0 */
#pragma unroll
            for (int u = 0; u < TC_KT / 32; u++) {
                float pe = m_new != -INFINITY ? expf(s[u] - m_new) : 0.0f; /* s = -inf gives 0 */
                ps += pe;
                ph[(size_t)r * ldp + lane + 32 * u] = __float2half_rn(pe);
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                ps += __shfl_xor_sync(0xffffffffu, ps, o);
            for (int d = lane; d < hd; d += 32)
                oc[(size_t)r * ldo + d] *= cr;
            if (lane == 0) {
                mrow[r] = m_new;
                lrow[r] = lrow[r] * cr + ps;
            }
        }
        __syncthreads();
        /* O += P V, one 16x16 output tile per warp at a time */
        for (int tile = warp; tile < n_rt * n_dt; tile += TC_WARPS) {
            int i = tile / n_dt, j = tile % n_dt;
            int last = -1;
            for (int r = 16 * i; r < 16 * i + 16; r++)
                last = max(last, rpos[r]);
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> o;
            float *op = oc + (size_t)(16 * i) * ldo + 16 * j;
            wmma::load_matrix_sync(o, op, ldo, wmma::mem_row_major);
            for (int k = 0; k < n_kt; k++) {
                if (p0 + 16 * k > last)
                    break; /* the rest of P's row tile is zero */
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> pa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> vb;
                wmma::load_matrix_sync(pa, ph + (size_t)(16 * i) * ldp + 16 * k, ldp);
                wmma::load_matrix_sync(vb, vh + (size_t)(16 * k) * ldh + 16 * j, ldh);
                wmma::mma_sync(o, pa, vb, o);
            }
            wmma::store_matrix_sync(op, o, ldo, wmma::mem_row_major);
        }
        __syncthreads();
    }

    for (int idx = tid; idx < R * hd; idx += TC_THREADS) {
        int r = idx / hd, d = idx % hd;
        int t = it.t0 + r / a.group, h = g * a.group + r % a.group;
        float *w = a.ws + (((size_t)t * a.n_heads + h) * a.n_splits + split) * (size_t)(hd + 2);
        w[d] = oc[(size_t)r * ldo + d];
        if (d == 0) {
            w[hd] = mrow[r];
            w[hd + 1] = lrow[r];
        }
    }
}

/* Prefill / mixed steps on f16 caches, FlashAttention-2 style (LLM_CUDA_ATT_TC=2; head_dim 32, 64 or 128):
 * the same work split, rows and split partials as attention_tc_kernel, but S and P never leave registers.
 * A warp owns 16 query rows of the block's (at most) 64; per 64-position tile it computes its 16 x 64
 * scores with mma.sync m16n8k16 (Q fragments loaded once, K and V fragments by ldmatrix.x4), masks
 * and runs the online softmax on them in registers (a row's 64 scores are spread over the 4 lanes of a
 * quad: two shuffles for its max), rescales its 16 x head_dim output accumulator in registers, and feeds
 * P, rounded to half, straight back as the A operand of O += P V (the accumulator layout of S is the A
 * layout of P). K/V tiles are double-buffered by cp.async: tile i + 1 is in flight while tile i is used.
 * Per tile: 2 barriers (the wmma kernel has 4 and two shared-memory round trips of S and P). Warps whose
 * rows all lie before a tile skip it; score tiles of 8 positions and P V k-steps of 16 wholly past a
 * warp's last row are skipped. Same rounding points as the wmma kernel: Q scaled then rounded to half,
 * f16 K/V, P rounded to half, float accumulation.
 * Shared memory (halves): q[64][hd+8] | k[2][64][hd+8] | v[2][64][hd+8] (87,040 bytes at head_dim 128). */
#define MA_THREADS 128
#define MA_KT      64

size_t cuda_att_mma_smem(int head_dim) { return (size_t)(TC_MAX_ROWS + 4 * MA_KT) * (size_t)(head_dim + 8) * 2; }

int cuda_att_mma_ok(int head_dim, int kv16) { return kv16 && (head_dim == 32 || head_dim == 64 || head_dim == 128); }

__device__ __forceinline__ uint32_t ma_pack(float lo, float hi)
{
    return (uint32_t)__half_as_ushort(__float2half_rn(lo)) | ((uint32_t)__half_as_ushort(__float2half_rn(hi)) << 16);
}

/* K and V rows p0 .. p0+63 of kv head g into kd / vd (cp.async; rows at or past p_end: zeros). */
template <int HD>
__device__ __forceinline__ void ma_issue_kv(const att_args &a, const __half *kc, const __half *vc, const int32_t *table,
                                            int g, int p0, int p_end, __half *kd, __half *vd)
{
    constexpr int PER = HD / 8, LD = HD + 8;
    const size_t kv_dim = (size_t)a.n_kv * HD;
    for (int idx = threadIdx.x; idx < MA_KT * PER; idx += MA_THREADS) {
        int j = idx / PER, c = idx % PER, p = p0 + j;
        bool ok = p < p_end;
        size_t o = ok ? kv_slot(table, p, a.block_size) * kv_dim + (size_t)g * HD + (size_t)c * 8 : 0;
        cu_cp_async<16>(kd + j * LD + c * 8, kc + o, ok);
        cu_cp_async<16>(vd + j * LD + c * 8, vc + o, ok);
    }
}

template <int HD>
__global__ void __launch_bounds__(MA_THREADS) attention_mma_kernel(att_args a)
{
    CU_PDL_ENTRY();
    CU_DYN_SMEM(smem);
    constexpr int LD = HD + 8, NK = HD / 16, NO = HD / 8, NS = MA_KT / 8;
    const cu_att_item it = a.items[blockIdx.z];
    const int gk = blockIdx.y, split = blockIdx.x;
    const int p_begin = split * a.chunk;
    if (p_begin >= it.n_pos)
        return; /* uniform over the block, before any barrier */
    const int p_end = min(p_begin + a.chunk, it.n_pos), lo = att_item_lo(a, it);
    if (p_end <= lo)
        return; /* wholly before every query's window */
    const int p_first = att_first(p_begin, lo, MA_KT);
    const int R = it.nq * a.group;
    __half *qs = (__half *)smem, *kbuf = qs + TC_MAX_ROWS * LD, *vbuf = kbuf + 2 * MA_KT * LD;
    const __half *kc = (const __half *)a.kc, *vc = (const __half *)a.vc;
    const int32_t *table = a.ti.tables + a.ti.tab[it.t0];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;

    ma_issue_kv<HD>(a, kc, vc, table, gk, p_first, p_end, kbuf, vbuf);
    CU_CP_COMMIT();
    /* Row r = (token it.t0 + r / group, query head gk * group + r % group), scaled, as half; rows past R: 0 */
    for (int idx = threadIdx.x; idx < TC_MAX_ROWS * HD; idx += MA_THREADS) {
        int r = idx / HD, d = idx % HD;
        float q = 0.0f;
        if (r < R) {
            int tk = it.t0 + r / a.group, h = gk * a.group + r % a.group;
            q = a.qkv[(size_t)tk * a.ld + (size_t)h * HD + d] * a.scale;
        }
        qs[r * LD + d] = __float2half_rn(q);
    }
    __syncthreads();
    /* this lane's rows: r0 (accumulator elements 0, 1) and r1 = r0 + 8 (elements 2, 3); -1: padding */
    const int r0 = 16 * warp + g, r1 = r0 + 8;
    const int pos0 = r0 < R ? a.ti.pos[it.t0 + r0 / a.group] : -1;
    const int pos1 = r1 < R ? a.ti.pos[it.t0 + r1 / a.group] : -1;
    float lastf = (float)max(pos0, pos1); /* positions < 2^24: exact */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        lastf = fmaxf(lastf, __shfl_xor_sync(0xffffffffu, lastf, o));
    const int last = (int)lastf; /* the warp's last visible position (-1: no real rows): warp-uniform */
    uint32_t qa[NK][4];
#pragma unroll
    for (int k = 0; k < NK; k++) {
        qa[k][0] = *(const uint32_t *)(qs + r0 * LD + 16 * k + 2 * t);
        qa[k][1] = *(const uint32_t *)(qs + r1 * LD + 16 * k + 2 * t);
        qa[k][2] = *(const uint32_t *)(qs + r0 * LD + 16 * k + 2 * t + 8);
        qa[k][3] = *(const uint32_t *)(qs + r1 * LD + 16 * k + 2 * t + 8);
    }
    float o[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

    int buf = 0;
    for (int p0 = p_first; p0 < p_end; p0 += MA_KT, buf ^= 1) {
        if (p0 + MA_KT < p_end) /* the next tile into the other buffer (its last reader passed the barrier below) */
            ma_issue_kv<HD>(a, kc, vc, table, gk, p0 + MA_KT, p_end, kbuf + (buf ^ 1) * MA_KT * LD,
                            vbuf + (buf ^ 1) * MA_KT * LD);
        CU_CP_COMMIT();
        CU_CP_WAIT(1); /* this tile's copies (not the next one's) have landed */
        __syncthreads();
        if (p0 <= last) {
            const __half *ks = kbuf + buf * MA_KT * LD, *vs = vbuf + buf * MA_KT * LD;
            float s[NS][4];
#pragma unroll
            for (int j = 0; j < NS; j += 2) { /* two 8-position score tiles a K load */
                s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
                s[j + 1][0] = s[j + 1][1] = s[j + 1][2] = s[j + 1][3] = 0.0f;
                if (p0 + 8 * j > last)
                    continue; /* masked below */
#pragma unroll
                for (int k = 0; k < NK; k++) {
                    /* B[k][n] = K[n][k]: matrices (positions 8j / 8j + 8) x (dims 16k / 16k + 8) */
                    uint32_t kb[4];
                    cu_ldmatrix_x4(kb, ks + (8 * j + 8 * (lane >> 4) + (lane & 7)) * LD + 16 * k +
                                           8 * ((lane >> 3) & 1));
                    cu_mma_16816(s[j], qa[k], kb);
                    if (p0 + 8 * (j + 1) <= last)
                        cu_mma_16816(s[j + 1], qa[k], kb + 2);
                }
            }
            float mt0 = -INFINITY, mt1 = -INFINITY;
#pragma unroll
            for (int j = 0; j < NS; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int p = p0 + 8 * j + 2 * t + e;
                    s[j][e] = p < p_end && att_sees(p, pos0, a.win)
                                  ? att_alibi(a, att_cap(s[j][e], a.cap), p, it.t0 + r0 / a.group,
                                              gk * a.group + r0 % a.group)
                                  : -INFINITY;
                    s[j][2 + e] = p < p_end && att_sees(p, pos1, a.win)
                                      ? att_alibi(a, att_cap(s[j][2 + e], a.cap), p, it.t0 + r1 / a.group,
                                                  gk * a.group + r1 % a.group)
                                      : -INFINITY;
                    mt0 = fmaxf(mt0, s[j][e]);
                    mt1 = fmaxf(mt1, s[j][2 + e]);
                }
            mt0 = fmaxf(mt0, __shfl_xor_sync(0xffffffffu, mt0, 1));
            mt0 = fmaxf(mt0, __shfl_xor_sync(0xffffffffu, mt0, 2));
            mt1 = fmaxf(mt1, __shfl_xor_sync(0xffffffffu, mt1, 1));
            mt1 = fmaxf(mt1, __shfl_xor_sync(0xffffffffu, mt1, 2));
            const float mn0 = fmaxf(m0, mt0), mn1 = fmaxf(m1, mt1);
            const float c0 = mn0 == -INFINITY ? 1.0f : expf(m0 - mn0); /* m = -inf gives 0 */
            const float c1 = mn1 == -INFINITY ? 1.0f : expf(m1 - mn1);
            m0 = mn0;
            m1 = mn1;
            l0 *= c0;
            l1 *= c1;
#pragma unroll
            for (int n = 0; n < NO; n++) {
                o[n][0] *= c0;
                o[n][1] *= c0;
                o[n][2] *= c1;
                o[n][3] *= c1;
            }
#pragma unroll
            for (int j = 0; j < NS; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    s[j][e] = mn0 == -INFINITY ? 0.0f : expf(s[j][e] - mn0); /* s = -inf gives 0 */
                    s[j][2 + e] = mn1 == -INFINITY ? 0.0f : expf(s[j][2 + e] - mn1);
                    l0 += s[j][e];
                    l1 += s[j][2 + e];
                }
#pragma unroll
            for (int kk = 0; kk < MA_KT / 16; kk++) {
                if (p0 + 16 * kk > last)
                    break; /* the rest of P is zero */
                const uint32_t pa[4] = { ma_pack(s[2 * kk][0], s[2 * kk][1]), ma_pack(s[2 * kk][2], s[2 * kk][3]),
                                         ma_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                         ma_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]) };
#pragma unroll
                for (int n = 0; n < NO; n += 2) {
                    /* B[k][n] = V[k][n], transposed on the way: matrices (positions 16kk / +8) x (dims 8n / +8) */
                    uint32_t vb[4];
                    cu_ldmatrix_x4_trans(vb, vs + (16 * kk + (lane & 15)) * LD + 8 * n + 8 * (lane >> 4));
                    cu_mma_16816(o[n], pa, vb);
                    cu_mma_16816(o[n + 1], pa, vb + 2);
                }
            }
        }
        __syncthreads(); /* everyone is done with this buffer before the next iteration refills it */
    }
    CU_CP_WAIT(0); /* only an empty group is left */
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int r = half ? r1 : r0;
        if (r >= R)
            continue;
        const int tk = it.t0 + r / a.group, h = gk * a.group + r % a.group;
        float *w = a.ws + (((size_t)tk * a.n_heads + h) * a.n_splits + split) * (size_t)(HD + 2);
#pragma unroll
        for (int n = 0; n < NO; n++) {
            w[8 * n + 2 * t] = o[n][2 * half];
            w[8 * n + 2 * t + 1] = o[n][2 * half + 1];
        }
        if (t == 0) {
            w[HD] = half ? m1 : m0;
            w[HD + 1] = half ? l1 : l0;
        }
    }
}

/* Decode steps (every item one token, q_tile 1): a block takes (token, kv head, split) like the kernel
 * above, but keeps the work in registers: a warp takes every DEC_WARPS-th position of the split, each
 * lane holds DPL = head_dim / 32 dimensions of the group's queries, of one key and one value row (one
 * vector load each: a warp reads a whole 256-byte f16 row at once), the dot products are warp sums,
 * and each warp keeps its own online softmax per query head; the warps' partials are combined through
 * shared memory at the end into the same (acc, max, sum) split layout, so the merge kernel is shared.
 * Why: the tiled kernel sizes its work for prefill tiles (scores one thread per (row, key) over the
 * whole head_dim from shared memory, K/V staged element by element), which left decode at large batch
 * spending more time in attention than in every weight matrix together. */
#define DEC_WARPS 4
#define DEC_MAXG 8 /* query heads per kv head handled here */
#define DEC_U 4    /* positions per warp in flight (loads issued together) */

template <typename C, int DPL> struct kv_row;
template <> struct kv_row<__half, 1> {
    static __device__ __forceinline__ void ld(const __half *p, float *o) { o[0] = __half2float(p[0]); }
};
template <> struct kv_row<__half, 2> {
    static __device__ __forceinline__ void ld(const __half *p, float *o)
    {
        unsigned u = __ldg((const unsigned *)p);
        o[0] = __half2float(__ushort_as_half((unsigned short)(u & 0xffffu)));
        o[1] = __half2float(__ushort_as_half((unsigned short)(u >> 16)));
    }
};
template <> struct kv_row<__half, 4> {
    static __device__ __forceinline__ void ld(const __half *p, float *o)
    {
        uint2 u = __ldg((const uint2 *)p);
        const unsigned w[2] = { u.x, u.y };
#pragma unroll
        for (int i = 0; i < 2; i++) {
            o[2 * i] = __half2float(__ushort_as_half((unsigned short)(w[i] & 0xffffu)));
            o[2 * i + 1] = __half2float(__ushort_as_half((unsigned short)(w[i] >> 16)));
        }
    }
};
template <> struct kv_row<__half, 8> { /* head_dim 256 (Gemma 2 / 3): one 16-byte load a lane */
    static __device__ __forceinline__ void ld(const __half *p, float *o)
    {
        uint4 u = __ldg((const uint4 *)p);
        const unsigned w[4] = { u.x, u.y, u.z, u.w };
#pragma unroll
        for (int i = 0; i < 4; i++) {
            o[2 * i] = __half2float(__ushort_as_half((unsigned short)(w[i] & 0xffffu)));
            o[2 * i + 1] = __half2float(__ushort_as_half((unsigned short)(w[i] >> 16)));
        }
    }
};
template <int DPL> struct kv_row<float, DPL> {
    static __device__ __forceinline__ void ld(const float *p, float *o)
    {
        if (DPL % 4 == 0) {
#pragma unroll
            for (int i = 0; i < DPL / 4; i++) {
                float4 v = __ldg((const float4 *)p + i);
                o[4 * i] = v.x; o[4 * i + 1] = v.y; o[4 * i + 2] = v.z; o[4 * i + 3] = v.w;
            }
        } else {
#pragma unroll
            for (int i = 0; i < DPL; i++)
                o[i] = p[i];
        }
    }
};

/* q8_0: a lane's DPL int8s of a row (one 1-8 byte load), times its group's scale after the load
 * (kv_scale; DPL <= 8 <= qg and both powers of two, so a lane's dims share one group). */
template <int DPL> struct kv_row<int8_t, DPL> {
    static __device__ __forceinline__ void ld(const int8_t *p, float *o)
    {
        if (DPL >= 4) {
#pragma unroll
            for (int w = 0; w < DPL / 4; w++) {
                unsigned u = __ldg((const unsigned *)p + w);
#pragma unroll
                for (int i = 0; i < 4; i++)
                    o[4 * w + i] = (float)(int8_t)(u >> (8 * i));
            }
        } else {
#pragma unroll
            for (int i = 0; i < DPL; i++)
                o[i] = (float)p[i];
        }
    }
};
template <typename C, int DPL>
__device__ __forceinline__ void kv_scale(const float *sc, size_t i, float *o)
{
    if constexpr (std::is_same<C, int8_t>::value) {
        const float d = __ldg(sc + i);
#pragma unroll
        for (int j = 0; j < DPL; j++)
            o[j] = d * o[j];
    }
}

__device__ __forceinline__ float warp_allsum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* GM: the group size rounded up to 1, 2, 4 or 8 (the per-head registers are sized by it) */
template <typename C, int DPL, int GM>
__global__ void __launch_bounds__(DEC_WARPS * 32) attention_decode_kernel(att_args a)
{
    CU_PDL_ENTRY();
    constexpr int HD = 32 * DPL;
    __shared__ float sm_m[DEC_WARPS][GM], sm_l[DEC_WARPS][GM];
    __shared__ float sm_acc[DEC_WARPS][GM][HD];
    const cu_att_item it = a.items[blockIdx.z];
    const int g0 = blockIdx.y, split = blockIdx.x, G = a.group;
    const int p_begin = split * a.chunk;
    if (p_begin >= it.n_pos)
        return; /* uniform over the block, before the barrier */
    const int p_end = min(p_begin + a.chunk, it.n_pos), lo = att_item_lo(a, it);
    if (p_end <= lo)
        return; /* wholly before the token's window (the merge does not read this split) */
    const int p_start = max(p_begin, lo); /* one token: its window is the one range lo .. pos */
    const int p_stop = min(p_end, a.ti.pos[it.t0] + 1); /* (p_end unless pos lies past the input: ti.last) */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, t = it.t0;
    const size_t kv_dim = (size_t)a.n_kv * HD;
    const int32_t *table = a.ti.tables + a.ti.tab[t];
    const size_t sc_off = (size_t)g0 * HD + (size_t)lane * DPL; /* this lane's first dim in a row */
    const C *kc = (const C *)a.kc + sc_off;
    const C *vc = (const C *)a.vc + sc_off;

    float q[GM][DPL], acc[GM][DPL], m[GM], l[GM];
#pragma unroll
    for (int g = 0; g < GM; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            q[g][i] = g < G ? a.qkv[(size_t)t * a.ld + (size_t)(g0 * G + g) * HD + lane * DPL + i] * a.scale : 0.0f;
            acc[g][i] = 0.0f;
        }
    }
    for (int p0 = p_start + warp; p0 < p_stop; p0 += DEC_WARPS * DEC_U) {
        float k[DEC_U][DPL], v[DEC_U][DPL];
#pragma unroll
        for (int u = 0; u < DEC_U; u++) {
            int p = p0 + u * DEC_WARPS;
            if (p < p_stop) {
                size_t slot = kv_slot(table, p, a.block_size);
                kv_row<C, DPL>::ld(kc + slot * kv_dim, k[u]);
                kv_row<C, DPL>::ld(vc + slot * kv_dim, v[u]);
                kv_scale<C, DPL>(a.ksc, (slot * kv_dim + sc_off) / (size_t)a.qg, k[u]);
                kv_scale<C, DPL>(a.vsc, (slot * kv_dim + sc_off) / (size_t)a.qg, v[u]);
            }
        }
#pragma unroll
        for (int u = 0; u < DEC_U; u++) {
            if (p0 + u * DEC_WARPS >= p_stop)
                break; /* uniform over the warp */
#pragma unroll
            for (int g = 0; g < GM; g++) {
                if (g >= G)
                    break;
                float s = 0.0f;
#pragma unroll
                for (int i = 0; i < DPL; i++)
                    s += q[g][i] * k[u][i];
                s = att_alibi(a, att_cap(warp_allsum(s), a.cap), p0 + u * DEC_WARPS, t, g0 * G + g);
                float mn = fmaxf(m[g], s);
                float cr = expf(m[g] - mn); /* m = -inf (first position) gives 0 */
                float pe = expf(s - mn);
                l[g] = l[g] * cr + pe;
#pragma unroll
                for (int i = 0; i < DPL; i++)
                    acc[g][i] = acc[g][i] * cr + pe * v[u][i];
                m[g] = mn;
            }
        }
    }
#pragma unroll
    for (int g = 0; g < GM; g++) {
        if (g >= G)
            break;
        if (lane == 0) {
            sm_m[warp][g] = m[g];
            sm_l[warp][g] = l[g];
        }
#pragma unroll
        for (int i = 0; i < DPL; i++)
            sm_acc[warp][g][lane * DPL + i] = acc[g][i];
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < G * HD; idx += DEC_WARPS * 32) {
        int g = idx / HD, d = idx % HD;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < DEC_WARPS; w++)
            M = fmaxf(M, sm_m[w][g]);
        float o = 0.0f, L = 0.0f;
#pragma unroll
        for (int w = 0; w < DEC_WARPS; w++) {
            float f = sm_m[w][g] == -INFINITY ? 0.0f : expf(sm_m[w][g] - M); /* a warp with no position */
            o += f * sm_acc[w][g][d];
            L += f * sm_l[w][g];
        }
        if (a.out != NULL) { /* one split: what the merge would compute, o / L (+ the sink) */
            float f, den = att_sink_den(M, L, a.sinks, g0 * G + g, &f);
            a.out[((size_t)t * a.n_heads + (size_t)(g0 * G + g)) * HD + d] = o * f / den;
            continue;
        }
        float *ws = a.ws + (((size_t)t * a.n_heads + (size_t)(g0 * G + g)) * a.n_splits + split) * (size_t)(HD + 2);
        ws[d] = o;
        if (d == 0) {
            ws[HD] = M;
            ws[HD + 1] = L;
        }
    }
}

template <typename C, int GM>
static int attention_decode_launch_g(const cu_att_plan *p, const att_args &a, cudaStream_t st)
{
    dim3 grid((unsigned)p->n_splits, (unsigned)p->n_kv_heads, (unsigned)p->n_items);
    switch (p->head_dim) {
    case 32:  CU_LAUNCH((attention_decode_kernel<C, 1, GM>), grid, DEC_WARPS * 32, 0, st, a); return 1;
    case 64:  CU_LAUNCH((attention_decode_kernel<C, 2, GM>), grid, DEC_WARPS * 32, 0, st, a); return 1;
    case 128: CU_LAUNCH((attention_decode_kernel<C, 4, GM>), grid, DEC_WARPS * 32, 0, st, a); return 1;
    case 256: CU_LAUNCH((attention_decode_kernel<C, 8, GM>), grid, DEC_WARPS * 32, 0, st, a); return 1;
    default:  return 0; /* other head sizes: the tiled kernel */
    }
}

template <typename C>
static int attention_decode_launch(const cu_att_plan *p, const att_args &a, cudaStream_t st)
{
    if (a.group <= 1) return attention_decode_launch_g<C, 1>(p, a, st);
    if (a.group <= 2) return attention_decode_launch_g<C, 2>(p, a, st);
    if (a.group <= 4) return attention_decode_launch_g<C, 4>(p, a, st);
    return attention_decode_launch_g<C, 8>(p, a, st);
}

/* out[t][h*hd + d] = merge of the splits that cover positions 0..pos(t) (with a window: from the split holding
 * pos(t) - win + 1; the kernels skip the splits before it; with ti.last, to the split holding last(t) at most);
 * with sinks, head h's sink in the sum. */
__global__ void attention_merge_kernel(const float *ws, cu_tokinfo ti, float *out, int n_heads, int hd, int chunk,
                                       int n_splits, int win, const float *sinks)
{
    CU_PDL_ENTRY();
    int t = blockIdx.x / n_heads, h = blockIdx.x % n_heads;
    int pos = ti.pos[t], s0 = win > 0 && pos - win + 1 > 0 ? (pos - win + 1) / chunk : 0;
    int ns = (ti.last != NULL ? min(pos, ti.last[t]) : pos) / chunk + 1; /* (the splits past the input: none) */
    const float *w = ws + ((size_t)t * n_heads + h) * n_splits * (size_t)(hd + 2);
    float M = -INFINITY;
    for (int s = s0; s < ns; s++)
        M = fmaxf(M, w[(size_t)s * (hd + 2) + hd]);
    float den = 0.0f;
    for (int s = s0; s < ns; s++) {
        const float *ws_s = w + (size_t)s * (hd + 2);
        den += expf(ws_s[hd] - M) * ws_s[hd + 1];
    }
    float f;
    den = att_sink_den(M, den, sinks, h, &f);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float num = 0.0f;
        for (int s = s0; s < ns; s++) {
            const float *ws_s = w + (size_t)s * (hd + 2);
            num += expf(ws_s[hd] - M) * ws_s[d];
        }
        out[(size_t)t * n_heads * hd + (size_t)h * hd + d] = num * f / den;
    }
}

int cuda_att_prepare(size_t smem_max)
{
    if (cudaFuncSetAttribute(attention_kernel<float>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem_max) != cudaSuccess ||
        cudaFuncSetAttribute(attention_kernel<__half>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem_max) != cudaSuccess ||
        cudaFuncSetAttribute(attention_tc_kernel<float>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem_max) != cudaSuccess ||
        cudaFuncSetAttribute(attention_tc_kernel<__half>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem_max) != cudaSuccess ||
        cudaFuncSetAttribute(attention_kernel<int8_t>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem_max) != cudaSuccess ||
        cudaFuncSetAttribute(attention_tc_kernel<int8_t>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem_max) != cudaSuccess)
        return -1;
    return 0;
}

/* The mma.sync kernel's instantiation for head_dim 32, 64 or 128 (cuda_att_mma_ok). */
typedef void (*att_kernel_fn)(att_args);
static att_kernel_fn mma_kernel(int head_dim)
{
    return head_dim == 32 ? attention_mma_kernel<32> : head_dim == 64 ? attention_mma_kernel<64>
                                                                       : attention_mma_kernel<128>;
}

int cuda_att_mma_prepare(int head_dim)
{
    if (cudaFuncSetAttribute(mma_kernel(head_dim), cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)cuda_att_mma_smem(head_dim)) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return 0;
}

void cuda_attention(const cu_att_plan *p, const cu_att_item *items, const float *qkv, int ld, const cu_tokinfo *ti,
                    const cu_kv *kv, int layer, float *ws, float *out, int n_tokens, cudaStream_t st)
{
    cu_kv_layer kl = cu_kv_at(kv, layer);
    att_args a;
    a.qkv = qkv;
    a.ld = ld;
    a.ti = *ti;
    a.kc = kl.k;
    a.vc = kl.v;
    a.ksc = kl.ks;
    a.vsc = kl.vs;
    a.qg = kv->qg > 0 ? kv->qg : 1;
    a.items = items;
    a.ws = ws;
    a.n_heads = p->n_heads;
    a.n_kv = p->n_kv_heads;
    a.hd = p->head_dim;
    a.group = p->n_heads / p->n_kv_heads;
    a.block_size = p->block_size;
    a.q_tile = p->q_tile;
    a.chunk = p->chunk;
    a.n_splits = p->n_splits;
    a.scale = p->scale;
    a.win = p->window;
    a.cap = p->softcap;
    a.alibi = p->alibi;
    a.qpos = p->qpos;
    a.sinks = p->sinks;
    /* decode steps: the register kernel where the shape allows (LLM_CUDA_ATT_DECODE=0: never) */
    static int dec_env = -1;
    if (dec_env < 0) {
        const char *e = getenv("LLM_CUDA_ATT_DECODE");
        dec_env = !(e != NULL && strcmp(e, "0") == 0);
    }
    int done = 0, direct = 0;
    a.out = NULL;
    if (dec_env && p->q_tile == 1 && a.group <= DEC_MAXG) {
        direct = p->n_splits == 1; /* every token's positions in one block: it finishes the softmax itself */
        a.out = direct ? out : NULL;
        done = kv->q8     ? attention_decode_launch<int8_t>(p, a, st)
               : kv->kv16 ? attention_decode_launch<__half>(p, a, st)
                          : attention_decode_launch<float>(p, a, st);
        direct &= done;
    }
    if (!done && p->tc) {
        /* prefill / mixed steps: tensor cores (the host chose q_tile_max for this kernel's shared memory) */
        dim3 grid((unsigned)p->n_splits, (unsigned)p->n_kv_heads, (unsigned)p->n_items);
        size_t smem = cuda_att_tc_smem(p->q_tile, a.group, p->head_dim);
        void (*k)(att_args) = kv->q8     ? attention_tc_kernel<int8_t>
                              : kv->kv16 ? attention_tc_kernel<__half>
                                         : attention_tc_kernel<float>;
        if (p->mma) { /* LLM_CUDA_ATT_TC=2 or the tuner's choice */
            smem = cuda_att_mma_smem(p->head_dim);
            k = mma_kernel(p->head_dim);
        }
        CU_LAUNCH(k, grid, TC_THREADS, smem, st, a);
        done = 1;
    }
    if (!done) {
        dim3 grid((unsigned)p->n_splits, (unsigned)p->n_kv_heads, (unsigned)p->n_items);
        size_t smem = cuda_att_smem(p->q_tile, a.group, p->head_dim);
        void (*k)(att_args) = kv->q8 ? attention_kernel<int8_t> : kv->kv16 ? attention_kernel<__half>
                                                                            : attention_kernel<float>;
        CU_LAUNCH(k, grid, ATT_THREADS, smem, st, a);
    }
    if (direct)
        return;
    int mthreads = p->head_dim < 256 ? p->head_dim : 256;
    CU_LAUNCH(attention_merge_kernel, (unsigned)(n_tokens * p->n_heads), mthreads, 0, st, ws, *ti, out, p->n_heads,
              p->head_dim, p->chunk, p->n_splits, p->window, p->sinks);
}
