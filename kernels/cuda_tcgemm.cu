/* Weight-only GEMM on tensor cores for a few to a few hundred tokens (LLM_CUDA_TC_GEMM=N):
 * y[t][r] (+)= sum_k W[r][k] * x[t][k] for BF16 / F16 / Q8_0 / Q4_0 weights.
 *
 * Why: between the one-token GEMV and a prefill-sized GEMM, a decode step of 8-256 sequences reads every
 * weight once and multiplies it with that many activation rows. The float GEMV does 8-32 FMAs per weight
 * per token and rereads the activations from L1 per row (its cost grows with the tokens: bf16 batch 8
 * took 9.6 ms a step on the H200 against cuBLAS's 4.1), and the cuBLAS path for Q8_0 / Q4_0 first writes
 * a bf16 copy of every matrix and reads it back (~18 ms a step at any batch, three times the bytes of the
 * bf16 model). Here the quantised blocks are dequantised in shared memory and never leave the SM.
 *
 * How: a block takes 64 rows of W (16 per warp) and up to 64 tokens (further groups of 64 tokens are
 * further blocks, dispatched right after it so that they find the same weights in L2), and walks its share
 * of K in 64-wide stages through a ring of TG_STAGES stages in shared memory, filled by cp.async: while
 * the warps multiply stage i, the copies of stages i+1..i+3 (weights as stored, activations rounded to 16
 * bits once per call by to_half_kernel or written so by the norm / SwiGLU) are in flight, with no
 * registers held for them. BF16/F16 tiles are multiplied where they land; Q8_0/Q4_0 tiles are first
 * dequantised into one bf16 tile (the same d * q rounding as the cuBLAS path's dequant_bf16_kernel). Each
 * warp runs 16x16x16 wmma products with float accumulation. When W has few row blocks (3,072 rows: 48 for
 * up to 64 tokens), K is split over gridDim.y blocks so that each SM has 2-4 blocks (cuda_tcgemm_splits);
 * their partial sums go to scratch and tg_reduce_kernel adds them in a fixed order (no atomics: the
 * result does not vary from run to run). More tokens are more blocks, so fewer splits (and a scratch
 * that stays small).
 * Until 2026-12 the tiles went through registers with one stage of prefetch (~8 KB of weights in flight a
 * block, 2 blocks a SM: too little to cover the memory latency at full bandwidth by Little's law) and
 * 48-124 registers a thread; now 40-80. */
#include "cuda_internal.cuh"

#ifndef CU_EMULATE
#include <mma.h>
#endif

#define TG_WARPS   4
#define TG_THREADS (TG_WARPS * 32)
#define TG_M       (16 * TG_WARPS) /* rows of W per block */
#define TG_BK      64              /* K per stage */
#define TG_LD      (TG_BK + 8)     /* 16-bit elements per shared row: the pad staggers rows over banks */
#define TG_NMAX    64              /* tokens per block: 4 wmma tiles */
#define TG_LDO     (TG_M + 4)      /* floats per token row of the output staging */
#define TG_STAGES  4               /* stages in the shared-memory ring: 3 in flight while one is used */

static int tg_ready; /* cuda_tcgemm_prepare succeeded: without it no product takes this kernel */

__device__ __forceinline__ float tg_f16(uint16_t h) { return __half2float(__ushort_as_half(h)); }

/* Two dequantised values as a pair of bf16 (a in the low half: the lower address). */
__device__ __forceinline__ uint32_t tg_pack(float a, float b)
{
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(a)) |
           ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(b)) << 16);
}

/* One stage of W in shared memory: rows r0..r0+63, columns k0..k0+63, as stored in device memory (RAW
 * bytes: 16-bit rows padded to TG_LD, or the int8 / nibble rows, then 2 fp16 scales a row). `issue` starts
 * its cp.async copies (rows past the matrix: zeros); `dequant` (Q8_0/Q4_0) writes it as bf16 [64][TG_LD],
 * d * q rounded once, the same values as the cuBLAS path's dequant_bf16_kernel. 16-bit tiles are used as
 * they land. */
template <int T> struct tg_w;

template <int T> struct tg_w16 { /* BF16 / F16: 64 x 64 x 2 bytes = 512 x 16 bytes, 4 per thread */
    enum { RAW = TG_M * TG_LD * 2, QUANT = 0 };
    static __device__ __forceinline__ void issue(const cu_mat &W, int r0, int k0, uint8_t *raw)
    {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int idx = threadIdx.x + i * TG_THREADS, row = idx >> 3, c = idx & 7, r = r0 + row;
            bool ok = r < W.rows;
            const uint8_t *src = (const uint8_t *)W.w + (ok ? (size_t)r * W.row_bytes + (size_t)(k0 + c * 8) * 2 : 0);
            cu_cp_async<16>(raw + ((size_t)row * TG_LD + c * 8) * 2, src, ok);
        }
    }
};
template <> struct tg_w<LLM_BF16> : tg_w16<LLM_BF16> {};
template <> struct tg_w<LLM_F16> : tg_w16<LLM_F16> {};

/* The 2 scales (4 bytes: blocks k0/32 and k0/32 + 1) of each of the 64 rows, one copy each by threads 0-63. */
__device__ __forceinline__ void tg_issue_scales(const cu_mat &W, int r0, int k0, uint16_t *sc)
{
    if (threadIdx.x < TG_M) {
        int r = r0 + threadIdx.x;
        bool ok = r < W.rows;
        const uint16_t *src = W.scales + (ok ? (size_t)r * (W.cols / LLM_QK) + k0 / LLM_QK : 0);
        cu_cp_async<4>(sc + 2 * threadIdx.x, src, ok);
    }
}

template <> struct tg_w<LLM_Q8_0> { /* 64 rows x 64 int8 = 256 x 16 bytes (half a block each), 2 per thread */
    enum { LQ = 80, RAW = TG_M * LQ + TG_M * 4, QUANT = 1 }; /* row stride 80: 16-byte aligned, staggered */
    static __device__ __forceinline__ void issue(const cu_mat &W, int r0, int k0, uint8_t *raw)
    {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int idx = threadIdx.x + i * TG_THREADS, row = idx >> 2, c = idx & 3, r = r0 + row;
            bool ok = r < W.rows;
            const uint8_t *src = (const uint8_t *)W.w + (ok ? (size_t)r * W.row_bytes + (size_t)(k0 + c * 16) : 0);
            cu_cp_async<16>(raw + row * LQ + c * 16, src, ok);
        }
        tg_issue_scales(W, r0, k0, (uint16_t *)(raw + TG_M * LQ));
    }
    static __device__ __forceinline__ void dequant(const uint8_t *raw, __nv_bfloat16 *Wd)
    {
        const uint16_t *sc = (const uint16_t *)(raw + TG_M * LQ);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int idx = threadIdx.x + i * TG_THREADS, row = idx >> 2, c = idx & 3;
            uint4 v = *(const uint4 *)(raw + row * LQ + c * 16);
            float d = tg_f16(sc[2 * row + (c >> 1)]);
            const uint32_t u[4] = { v.x, v.y, v.z, v.w };
            uint32_t o[8];
#pragma unroll
            for (int e = 0; e < 16; e += 2)
                o[e / 2] = tg_pack(d * (float)(int8_t)((u[e / 4] >> (8 * (e % 4))) & 0xffu),
                                   d * (float)(int8_t)((u[e / 4] >> (8 * (e % 4) + 8)) & 0xffu));
            uint4 *p = (uint4 *)(Wd + row * TG_LD + c * 16);
            p[0] = make_uint4(o[0], o[1], o[2], o[3]);
            p[1] = make_uint4(o[4], o[5], o[6], o[7]);
        }
    }
};

/* The nibble types, NSC scale words a block: Q4_0 (1: w = d (q - 8), a scale a block: tg_issue_scales), CU_IQ4
 * and CU_MX4 (1: w = d level(q)), CU_Q4_M (2: w = d q - m, a (d, m) pair a block), CU_Q5_M (4: q with a fifth bit, (d, m,
 * bits) a block), CU_Q2_M (4: w = d q - m, a (d, m) per half, (d0, d1, m0, m1)), CU_Q3 (2: w = d (q - 4), a d
 * per half) and CU_Q6 (6: q with 2 high bits, w = d (q - 32), a d per half, (d0, d1, bits, bits)): 64 rows
 * x 2 blocks of 16 bytes = 128 x 16 bytes, 1 per thread; the other types' scale words by the same thread (4 or
 * 8 bytes, one copy; CU_Q6's 12, 4-byte aligned, three). d q - m is d (q - 8) or d (q - 32) exactly (an fp16 d
 * times a 6-bit q fits a float's mantissa). */
template <int T> struct tg_w4 {
    enum { NSC = cu_type_nsc(T), LQ = 48, RAW = TG_M * LQ + TG_M * 4 * NSC, QUANT = 1 };
    static __device__ __forceinline__ void issue(const cu_mat &W, int r0, int k0, uint8_t *raw)
    {
        int row = threadIdx.x >> 1, b = threadIdx.x & 1, r = r0 + row;
        bool ok = r < W.rows;
        const uint8_t *src = (const uint8_t *)W.w + (ok ? (size_t)r * W.row_bytes + (size_t)(k0 / LLM_QK + b) * 16 : 0);
        cu_cp_async<16>(raw + row * LQ + b * 16, src, ok);
        if constexpr (NSC == 1) {
            tg_issue_scales(W, r0, k0, (uint16_t *)(raw + TG_M * LQ));
        } else {
            const uint16_t *ssrc = W.scales + (ok ? ((size_t)r * (W.cols / LLM_QK) + k0 / LLM_QK + b) * NSC : 0);
            uint16_t *sdst = (uint16_t *)(raw + TG_M * LQ) + 2 * NSC * row + NSC * b;
            if constexpr (NSC == 6) {
#pragma unroll
                for (int i = 0; i < 3; i++)
                    cu_cp_async<4>(sdst + 2 * i, ssrc + 2 * i, ok);
            } else {
                cu_cp_async<2 * NSC>(sdst, ssrc, ok);
            }
        }
    }
    static __device__ __forceinline__ void dequant(const uint8_t *raw, __nv_bfloat16 *Wd)
    {
        const uint16_t *sc = (const uint16_t *)(raw + TG_M * LQ);
        int row = threadIdx.x >> 1, b = threadIdx.x & 1;
        uint4 v = *(const uint4 *)(raw + row * LQ + b * 16);
        const uint16_t *s = sc + (NSC == 1 ? 2 * row + b : 2 * NSC * row + NSC * b);
        /* the scale and offset of elements 0-15 (d, m) and 16-31 (dh, mh); the high bits above each nibble */
        const bool halves = NSC == 6 || T == CU_Q2_M || T == CU_Q3;
        const float d = tg_f16(s[0]), dh = halves ? tg_f16(s[1]) : d;
        const float m = T == LLM_Q4_0 ? 8.0f * d : cu_type_lvl(T) ? 0.0f : NSC == 6 ? 32.0f * d : T == CU_Q3 ? 4.0f * d
                        : T == CU_Q2_M ? tg_f16(s[2]) : tg_f16(s[1]);
        const float mh = NSC == 6 ? 32.0f * dh : T == CU_Q3 ? 4.0f * dh : T == CU_Q2_M ? tg_f16(s[3]) : m;
        const uint32_t h0 = T == CU_Q5_M || NSC == 6 ? (uint32_t)s[2] | (uint32_t)s[3] << 16 : 0u;
        const uint32_t h1 = NSC == 6 ? (uint32_t)s[4] | (uint32_t)s[5] << 16 : 0u;
        const uint32_t u[4] = { v.x, v.y, v.z, v.w };
        uint32_t la[4] = { 0u, 0u, 0u, 0u }, lb[4] = { 0u, 0u, 0u, 0u }; /* CU_IQ4, CU_MX4: the nibbles' levels */
        if (cu_type_lvl(T)) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                la[i] = lvl_bytes<T>(u[i] & 0x0f0f0f0fu);
                lb[i] = lvl_bytes<T>((u[i] >> 4) & 0x0f0f0f0fu);
            }
        }
        uint32_t lo[8], hi[8]; /* byte e: element e (low nibble) and e + 16 (high) */
#pragma unroll
        for (int e = 0; e < 16; e += 2) {
            uint32_t q0 = (u[e / 4] >> (8 * (e % 4))) & 0xffu, q1 = (u[e / 4] >> (8 * (e % 4) + 8)) & 0xffu;
            int a0 = (int)(q0 & 15u), a1 = (int)(q1 & 15u), b0 = (int)(q0 >> 4), b1 = (int)(q1 >> 4);
            if (cu_type_lvl(T)) {
                a0 = (int8_t)((la[e / 4] >> (8 * (e % 4))) & 0xffu);
                a1 = (int8_t)((la[e / 4] >> (8 * (e % 4) + 8)) & 0xffu);
                b0 = (int8_t)((lb[e / 4] >> (8 * (e % 4))) & 0xffu);
                b1 = (int8_t)((lb[e / 4] >> (8 * (e % 4) + 8)) & 0xffu);
            } else if (T == CU_Q5_M) { /* fifth bits: element i at bit i */
                a0 |= (int)((h0 >> e) & 1u) << 4;
                a1 |= (int)((h0 >> (e + 1)) & 1u) << 4;
                b0 |= (int)((h0 >> (16 + e)) & 1u) << 4;
                b1 |= (int)((h0 >> (17 + e)) & 1u) << 4;
            } else if (NSC == 6) {
                a0 |= cu_q6_hi(h0, e) << 4;
                a1 |= cu_q6_hi(h0, e + 1) << 4;
                b0 |= cu_q6_hi(h1, e) << 4;
                b1 |= cu_q6_hi(h1, e + 1) << 4;
            }
            lo[e / 2] = tg_pack(d * (float)a0 - m, d * (float)a1 - m);
            hi[e / 2] = tg_pack(dh * (float)b0 - mh, dh * (float)b1 - mh);
        }
        uint4 *p = (uint4 *)(Wd + row * TG_LD + b * LLM_QK);
        p[0] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
        p[1] = make_uint4(lo[4], lo[5], lo[6], lo[7]);
        p[2] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
        p[3] = make_uint4(hi[4], hi[5], hi[6], hi[7]);
    }
};
template <> struct tg_w<LLM_Q4_0> : tg_w4<LLM_Q4_0> {};
template <> struct tg_w<CU_IQ4> : tg_w4<CU_IQ4> {};
template <> struct tg_w<CU_MX4> : tg_w4<CU_MX4> {};
template <> struct tg_w<CU_Q4_M> : tg_w4<CU_Q4_M> {};
template <> struct tg_w<CU_Q5_M> : tg_w4<CU_Q5_M> {};
template <> struct tg_w<CU_Q6> : tg_w4<CU_Q6> {};
template <> struct tg_w<CU_Q2_M> : tg_w4<CU_Q2_M> {};
template <> struct tg_w<CU_Q3> : tg_w4<CU_Q3> {};

/* The activation tile of one stage: NT * 16 token rows x 64 columns of the 16-bit x, 8 x 16 bytes a row
 * (tokens past n: zeros). */
template <int NT>
__device__ __forceinline__ void tg_issue_x(const uint16_t *xa, int K, int n, int t0, int k0, uint16_t *Xs)
{
#pragma unroll
    for (int i = 0; i < NT; i++) {
        int idx = threadIdx.x + i * TG_THREADS, t = t0 + (idx >> 3), c = idx & 7;
        bool ok = t < n;
        cu_cp_async<16>(Xs + (idx >> 3) * TG_LD + c * 8, xa + (ok ? (size_t)t * K + k0 + c * 8 : 0), ok);
    }
}

/* Shared memory of tg_kernel<T, NT>: TG_STAGES x (W stage + activation stage), then for Q8_0/Q4_0 the
 * dequantised bf16 tile; the output staging (NT * 16 token rows of TG_LDO floats) reuses it at the end. */
template <int T, int NT> struct tg_smem {
    enum {
        X = NT * 16 * TG_LD * 2,
        STAGE = tg_w<T>::RAW + X,
        WD = tg_w<T>::QUANT ? TG_M * TG_LD * 2 : 0,
        TILES = TG_STAGES * STAGE + WD,
        OUT = NT * 16 * TG_LDO * 4,
        BYTES = TILES > OUT ? TILES : OUT
    };
    static_assert(tg_w<T>::RAW % 128 == 0 && X % 128 == 0, "stages must keep wmma tiles 32-byte aligned");
};

#ifdef CU_EMULATE
static inline void cu_emu_arg_check(const cu_tg_group &g, int arg)
{
    cu_emu_check_dev_ptrs({ g.mats, g.off }, arg);
}
#endif

template <int T, typename HT, int NT>
__global__ void __launch_bounds__(TG_THREADS)
tg_kernel(cu_mat W, const uint16_t *__restrict__ xa, int n, float *y, int ldy, int accumulate, float *part,
          cu_tg_group G)
{
    using namespace nvcuda;
    typedef tg_smem<T, NT> L;
    CU_DYN_SMEM(smem);
    uint8_t *ring = (uint8_t *)smem;
    HT *Wd = (HT *)(ring + TG_STAGES * L::STAGE); /* Q8_0 / Q4_0: the dequantised tile */
    float *Os = (float *)smem;                    /* after the last stage */
    const int warp = threadIdx.x >> 5;
    /* blockIdx.x (dispatched fastest): the token group, then y: the K split, z: the row block; so the blocks
     * that read the same weight tile run side by side and all but the first find it in L2 */
    const int r0 = blockIdx.z * TG_M, split = blockIdx.y, S = gridDim.y;
    int t0 = blockIdx.x * TG_NMAX;
    if (G.mats != NULL) {
        /* Grouped: token group blockIdx.x counts through every expert's groups in turn; the rows of expert e
         * are off[e] .. off[e+1] of xa and y (written by earlier kernels: read after the wait) */
        CU_PDL_ENTRY();
        int j = blockIdx.x, e = 0;
        for (; e < G.E; e++) {
            int groups = (G.off[e + 1] - G.off[e] + TG_NMAX - 1) / TG_NMAX;
            if (j < groups)
                break;
            j -= groups;
        }
        if (e == G.E)
            return; /* past the last expert's groups: the whole block */
        W = G.mats[3 * e + G.which];
        xa += (size_t)G.off[e] * W.cols;
        y += (size_t)G.off[e] * ldy;
        n = G.off[e + 1] - G.off[e];
        t0 = j * TG_NMAX;
    }
    const int K = W.cols, ns = K / TG_BK, s0 = split * ns / S, nst = (split + 1) * ns / S - s0;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[NT];
#pragma unroll
    for (int j = 0; j < NT; j++)
        wmma::fill_fragment(acc[j], 0.0f);
    /* Prologue: the first TG_STAGES - 1 stages in flight, one commit group each (group 0 also holds the
     * later stages' weights, which are copied before the wait: see CU_PDL_ENTRY). */
#pragma unroll
    for (int i = 0; i < TG_STAGES - 1; i++)
        if (i < nst)
            tg_w<T>::issue(W, r0, (s0 + i) * TG_BK, ring + i * L::STAGE);
    CU_PDL_ENTRY();
#pragma unroll
    for (int i = 0; i < TG_STAGES - 1; i++) {
        if (i < nst)
            tg_issue_x<NT>(xa, K, n, t0, (s0 + i) * TG_BK, (uint16_t *)(ring + i * L::STAGE + tg_w<T>::RAW));
        CU_CP_COMMIT();
    }
    for (int i = 0; i < nst; i++) {
        CU_CP_WAIT(TG_STAGES - 2); /* this thread's copies of stage i have landed */
        __syncthreads();           /* everyone's have; and everyone is done with stage i - 1's buffer */
        int nx = i + TG_STAGES - 1;
        if (nx < nst) {            /* into the buffer stage i - 1 used */
            uint8_t *b = ring + (nx % TG_STAGES) * L::STAGE;
            tg_w<T>::issue(W, r0, (s0 + nx) * TG_BK, b);
            tg_issue_x<NT>(xa, K, n, t0, (s0 + nx) * TG_BK, (uint16_t *)(b + tg_w<T>::RAW));
        }
        CU_CP_COMMIT();            /* (empty near the end: keeps the wait count above right) */
        uint8_t *b = ring + (i % TG_STAGES) * L::STAGE;
        const HT *A = (const HT *)b, *Xs = (const HT *)(b + tg_w<T>::RAW);
        if constexpr (tg_w<T>::QUANT != 0) {
            tg_w<T>::dequant(b, (__nv_bfloat16 *)Wd);
            __syncthreads();
            A = Wd;
        }
#pragma unroll
        for (int kk = 0; kk < TG_BK / 16; kk++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, HT, wmma::row_major> a;
            wmma::load_matrix_sync(a, A + (16 * warp) * TG_LD + 16 * kk, TG_LD);
#pragma unroll
            for (int j = 0; j < NT; j++) {
                /* B = x^T: element (k, t) at Xs[t][k], i.e. column-major with leading dimension TG_LD */
                wmma::fragment<wmma::matrix_b, 16, 16, 16, HT, wmma::col_major> bf;
                wmma::load_matrix_sync(bf, Xs + (16 * j) * TG_LD + 16 * kk, TG_LD);
                wmma::mma_sync(acc[j], a, bf, acc[j]);
            }
        }
    }
    CU_CP_WAIT(0); /* only empty groups are left; the staging below overwrites the ring */
    __syncthreads();
    /* Tile (row, token) to Os[token][row], then out along the rows (coalesced). */
#pragma unroll
    for (int j = 0; j < NT; j++)
        wmma::store_matrix_sync(Os + (16 * j) * TG_LDO + 16 * warp, acc[j], TG_LDO, wmma::mem_col_major);
    __syncthreads();
    const int nt = min(n - t0, NT * 16);
    float *dst = S > 1 ? part + ((size_t)split * n + t0) * W.rows : y + (size_t)t0 * ldy;
    const size_t ld = S > 1 ? (size_t)W.rows : (size_t)ldy;
    for (int i = threadIdx.x; i < nt * TG_M; i += TG_THREADS) {
        int t = i / TG_M, r = i % TG_M;
        if (r0 + r >= W.rows)
            continue;
        float v = Os[t * TG_LDO + r];
        float *p = dst + (size_t)t * ld + r0 + r;
        *p = S == 1 && accumulate ? *p + v : v;
    }
}

/* y[t][r] (+)= the S partial sums of (t, r), in split order. */
__global__ void tg_reduce_kernel(const float *part, int S, int n, int R, float *y, int ldy, int accumulate)
{
    CU_PDL_ENTRY();
    const int total = n * R;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        int t = i / R, r = i % R;
        float *p = y + (size_t)t * ldy + r;
        float s = accumulate ? *p : 0.0f;
        for (int k = 0; k < S; k++)
            s += part[((size_t)k * n + t) * R + r];
        *p = s;
    }
}

int cuda_tcgemm_ok(const cu_mat *W)
{
    int q = cu_type_q(W->type);
    return tg_ready && (W->type == LLM_BF16 || W->type == LLM_F16 || q) && W->cols % TG_BK == 0 &&
           W->row_bytes % 16 == 0 && ((uintptr_t)W->w & 15) == 0 && (!q || ((uintptr_t)W->scales & 3) == 0);
}

int cuda_tcgemm_splits(const cu_mat *W, int n, int sms)
{
    int blocks = (W->rows + TG_M - 1) / TG_M * ((n + TG_NMAX - 1) / TG_NMAX), stages = W->cols / TG_BK;
    /* Blocks a SM, for ~27 KB or more of weights in flight per SM (Little's law at ~4 TB/s and ~1 us over
     * 132 SMs): a block has TG_STAGES - 1 stages in flight, 9 KB each for 16-bit weights, 4.3 KB for
     * Q8_0, 2.3 KB for Q4_0. Shared memory lets 3-4 blocks share a SM. */
    int cover = W->type == LLM_Q8_0 ? 3 : cu_type_q(W->type) ? 4 : 2;
    int s = (cover * (sms > 0 ? sms : 1) + blocks - 1) / blocks;
    int cap = stages / 2 < 16 ? stages / 2 : 16;              /* >= 2 stages a split (prefetch) */
    return s > cap ? (cap > 1 ? cap : 1) : s;
}

size_t cuda_tcgemm_scratch(const cu_mat *W, int n, int sms)
{
    int s = cuda_tcgemm_splits(W, n, sms);
    return s > 1 ? (size_t)s * (size_t)n * (size_t)W->rows * sizeof(float) : 0;
}

template <int T, typename HT, int NT>
static void tg_launch_nt(const cu_mat *W, const uint16_t *xa, int n, float *y, int ldy, int acc, float *part, int S,
                         cudaStream_t st)
{
    dim3 grid((unsigned)((n + TG_NMAX - 1) / TG_NMAX), (unsigned)S, (unsigned)((W->rows + TG_M - 1) / TG_M));
    cu_tg_group none = {};
    CU_LAUNCH((tg_kernel<T, HT, NT>), grid, TG_THREADS, (tg_smem<T, NT>::BYTES), st, *W, xa, n, y, ldy, acc, part,
              none);
}

template <int T, typename HT>
static void tg_launch(const cu_mat *W, const uint16_t *xa, int n, float *y, int ldy, int acc, float *part, int S,
                      cudaStream_t st)
{
    switch (((n < TG_NMAX ? n : TG_NMAX) + 15) / 16) { /* 16-token tiles a block */
    case 1: tg_launch_nt<T, HT, 1>(W, xa, n, y, ldy, acc, part, S, st); break;
    case 2: tg_launch_nt<T, HT, 2>(W, xa, n, y, ldy, acc, part, S, st); break;
    case 3: tg_launch_nt<T, HT, 3>(W, xa, n, y, ldy, acc, part, S, st); break;
    default: tg_launch_nt<T, HT, 4>(W, xa, n, y, ldy, acc, part, S, st); break;
    }
}

/* Shared memory above the default 48 KiB a block, for every instantiation (non-zero: refused). */
template <int T, typename HT, int NT> static int tg_allow_nt(void)
{
    return cudaFuncSetAttribute(tg_kernel<T, HT, NT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                tg_smem<T, NT>::BYTES) != cudaSuccess;
}
template <int T, typename HT> static int tg_allow(void)
{
    return tg_allow_nt<T, HT, 1>() || tg_allow_nt<T, HT, 2>() || tg_allow_nt<T, HT, 3>() || tg_allow_nt<T, HT, 4>();
}

int cuda_tcgemm_prepare(void)
{
    tg_ready = !(tg_allow<LLM_F16, __half>() || tg_allow<LLM_BF16, __nv_bfloat16>() ||
                 tg_allow<LLM_Q8_0, __nv_bfloat16>() || tg_allow<LLM_Q4_0, __nv_bfloat16>() ||
                 tg_allow<CU_Q4_M, __nv_bfloat16>() || tg_allow<CU_Q5_M, __nv_bfloat16>() ||
                 tg_allow<CU_Q6, __nv_bfloat16>() || tg_allow<CU_IQ4, __nv_bfloat16>() ||
                 tg_allow<CU_MX4, __nv_bfloat16>() ||
                 tg_allow<CU_Q2_M, __nv_bfloat16>() || tg_allow<CU_Q3, __nv_bfloat16>());
    if (!tg_ready)
        (void)cudaGetLastError(); /* not sticky; leave no error for the next check */
    return tg_ready ? 0 : -1;
}

void cuda_tcgemm(const cu_mat *W, const void *xa, int n, float *y, int ldy, int accumulate, float *part, int sms,
                 cudaStream_t st)
{
    const uint16_t *x = (const uint16_t *)xa;
    int S = cuda_tcgemm_splits(W, n, sms);
    switch (W->type) {
    case LLM_F16:  tg_launch<LLM_F16, __half>(W, x, n, y, ldy, accumulate, part, S, st); break;
    case LLM_BF16: tg_launch<LLM_BF16, __nv_bfloat16>(W, x, n, y, ldy, accumulate, part, S, st); break;
    default:
        with_qtype(W->type, [&](auto T) {
            tg_launch<decltype(T)::value, __nv_bfloat16>(W, x, n, y, ldy, accumulate, part, S, st);
        });
        break;
    }
    if (S > 1) {
        int total = n * W->rows, blocks = (total + 255) / 256;
        CU_LAUNCH(tg_reduce_kernel, blocks < 4096 ? blocks : 4096, 256, 0, st, part, S, n, W->rows, y, ldy,
                  accumulate);
    }
}

void cuda_tcgemm_grouped(const cu_mat *host, const cu_tg_group *G, const void *xa, int rows, float *y, int ldy,
                         cudaStream_t st)
{
    const cu_mat *W = &host[G->which];
    /* every expert's token groups: sum of ceil(rows_e / 64) <= rows / 64 + E; the blocks past them return */
    dim3 grid((unsigned)((rows + TG_NMAX - 1) / TG_NMAX + G->E), 1, (unsigned)((W->rows + TG_M - 1) / TG_M));
    const uint16_t *x = (const uint16_t *)xa;
#define TG_GROUPED(T, HT) \
    CU_LAUNCH((tg_kernel<T, HT, 4>), grid, TG_THREADS, (tg_smem<T, 4>::BYTES), st, *W, x, 0, y, ldy, 0, \
              (float *)NULL, *G)
    switch (W->type) {
    case LLM_F16:  TG_GROUPED(LLM_F16, __half); break;
    case LLM_BF16: TG_GROUPED(LLM_BF16, __nv_bfloat16); break;
    default:       with_qtype(W->type, [&](auto T) { TG_GROUPED(decltype(T)::value, __nv_bfloat16); }); break;
    }
#undef TG_GROUPED
}
