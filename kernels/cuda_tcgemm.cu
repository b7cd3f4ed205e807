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
 * further blocks, dispatched right after it so that they find the same weights in L2), and walks its share of K in 64-wide stages. Per stage, the W tile is copied (BF16/F16) or
 * dequantised to bf16 (Q8_0/Q4_0, the same d * q rounding as the cuBLAS path's dequant_bf16_kernel) into
 * shared memory beside the activations (rounded to 16 bits once per call by to_half_kernel, as for
 * cuBLAS), and each warp runs 16x16x16 wmma products with float accumulation; the next stage's global
 * loads are issued before the current stage's products, so they are in flight meanwhile. When W has few
 * row blocks (3,072 rows: 48 for up to 64 tokens), K is split over gridDim.y blocks so the grid covers the
 * SMs twice; their partial sums go to scratch and tg_reduce_kernel adds them in a fixed order (no atomics:
 * the result does not vary from run to run). More tokens are more blocks, so fewer splits (and a scratch
 * that stays small). */
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
#define TG_SMEM    (2 * TG_M * TG_LD * 2) /* W and activation tiles; the output staging reuses them */
static_assert(TG_NMAX * TG_LDO * 4 <= TG_SMEM, "output staging must fit in the tiles' space");

__device__ __forceinline__ float tg_f16(uint16_t h) { return __half2float(__ushort_as_half(h)); }

/* Two dequantised values as a pair of bf16 (a in the low half: the lower address). */
__device__ __forceinline__ uint32_t tg_pack(float a, float b)
{
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(a)) |
           ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(b)) << 16);
}

/* The W tile of one stage: rows r0..r0+63, columns k0..k0+63; `fetch` issues the global loads into
 * registers (rows past the matrix: zeros), `store` writes them to shared memory as 16-bit values. */
template <int T> struct tg_w;

template <int T> struct tg_w16 { /* BF16 / F16: 64 x 64 x 2 bytes = 512 x 16 bytes, 4 per thread */
    enum { N = 4 };
    static __device__ __forceinline__ void fetch(const cu_mat &W, int r0, int k0, uint4 *v, float *)
    {
#pragma unroll
        for (int i = 0; i < N; i++) {
            int idx = threadIdx.x + i * TG_THREADS, row = idx >> 3, c = idx & 7, r = r0 + row;
            v[i] = r < W.rows ? __ldg((const uint4 *)((const uint8_t *)W.w + (size_t)r * W.row_bytes +
                                                      (size_t)(k0 + c * 8) * 2))
                              : make_uint4(0u, 0u, 0u, 0u);
        }
    }
    template <typename HT> static __device__ __forceinline__ void store(const uint4 *v, const float *, HT *Ws)
    {
#pragma unroll
        for (int i = 0; i < N; i++) {
            int idx = threadIdx.x + i * TG_THREADS, row = idx >> 3, c = idx & 7;
            *(uint4 *)(Ws + row * TG_LD + c * 8) = v[i];
        }
    }
};
template <> struct tg_w<LLM_BF16> : tg_w16<LLM_BF16> {};
template <> struct tg_w<LLM_F16> : tg_w16<LLM_F16> {};

template <> struct tg_w<LLM_Q8_0> { /* 64 rows x 64 int8 = 256 x 16 bytes (half a block each), 2 per thread */
    enum { N = 2 };
    static __device__ __forceinline__ void fetch(const cu_mat &W, int r0, int k0, uint4 *v, float *d)
    {
#pragma unroll
        for (int i = 0; i < N; i++) {
            int idx = threadIdx.x + i * TG_THREADS, row = idx >> 2, c = idx & 3, r = r0 + row;
            int k = k0 + c * 16;
            if (r < W.rows) {
                v[i] = __ldg((const uint4 *)((const uint8_t *)W.w + (size_t)r * W.row_bytes + (size_t)k));
                d[i] = tg_f16(__ldg(W.scales + (size_t)r * (W.cols / LLM_QK) + k / LLM_QK));
            } else {
                v[i] = make_uint4(0u, 0u, 0u, 0u);
                d[i] = 0.0f;
            }
        }
    }
    template <typename HT> static __device__ __forceinline__ void store(const uint4 *v, const float *d, HT *Ws)
    {
#pragma unroll
        for (int i = 0; i < N; i++) {
            int idx = threadIdx.x + i * TG_THREADS, row = idx >> 2, c = idx & 3;
            const uint32_t u[4] = { v[i].x, v[i].y, v[i].z, v[i].w };
            uint32_t o[8];
#pragma unroll
            for (int e = 0; e < 16; e += 2)
                o[e / 2] = tg_pack(d[i] * (float)(int8_t)((u[e / 4] >> (8 * (e % 4))) & 0xffu),
                                   d[i] * (float)(int8_t)((u[e / 4] >> (8 * (e % 4) + 8)) & 0xffu));
            uint4 *p = (uint4 *)(Ws + row * TG_LD + c * 16);
            p[0] = make_uint4(o[0], o[1], o[2], o[3]);
            p[1] = make_uint4(o[4], o[5], o[6], o[7]);
        }
    }
};

template <> struct tg_w<LLM_Q4_0> { /* 64 rows x 2 blocks of 16 bytes = 128 x 16 bytes, 1 per thread */
    enum { N = 1 };
    static __device__ __forceinline__ void fetch(const cu_mat &W, int r0, int k0, uint4 *v, float *d)
    {
        int row = threadIdx.x >> 1, b = threadIdx.x & 1, r = r0 + row, blk = k0 / LLM_QK + b;
        if (r < W.rows) {
            v[0] = __ldg((const uint4 *)((const uint8_t *)W.w + (size_t)r * W.row_bytes + (size_t)blk * 16));
            d[0] = tg_f16(__ldg(W.scales + (size_t)r * (W.cols / LLM_QK) + blk));
        } else {
            v[0] = make_uint4(0u, 0u, 0u, 0u);
            d[0] = 0.0f;
        }
    }
    template <typename HT> static __device__ __forceinline__ void store(const uint4 *v, const float *d, HT *Ws)
    {
        int row = threadIdx.x >> 1, b = threadIdx.x & 1;
        const uint32_t u[4] = { v[0].x, v[0].y, v[0].z, v[0].w };
        uint32_t lo[8], hi[8]; /* byte e: element e (low nibble) and e + 16 (high) */
#pragma unroll
        for (int e = 0; e < 16; e += 2) {
            uint32_t q0 = (u[e / 4] >> (8 * (e % 4))) & 0xffu, q1 = (u[e / 4] >> (8 * (e % 4) + 8)) & 0xffu;
            lo[e / 2] = tg_pack(d[0] * (float)((int)(q0 & 15u) - 8), d[0] * (float)((int)(q1 & 15u) - 8));
            hi[e / 2] = tg_pack(d[0] * (float)((int)(q0 >> 4) - 8), d[0] * (float)((int)(q1 >> 4) - 8));
        }
        uint4 *p = (uint4 *)(Ws + row * TG_LD + b * LLM_QK);
        p[0] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
        p[1] = make_uint4(lo[4], lo[5], lo[6], lo[7]);
        p[2] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
        p[3] = make_uint4(hi[4], hi[5], hi[6], hi[7]);
    }
};

/* The activation tile of one stage: NT * 16 token rows x 64 columns of the 16-bit x, 8 x 16 bytes a row
 * (tokens past n: zeros). */
template <int NT>
__device__ __forceinline__ void tg_fetch_x(const uint16_t *xa, int K, int n, int t0, int k0, uint4 *v)
{
#pragma unroll
    for (int i = 0; i < NT; i++) {
        int idx = threadIdx.x + i * TG_THREADS, t = t0 + (idx >> 3), c = idx & 7;
        v[i] = t < n ? __ldg((const uint4 *)(xa + (size_t)t * K + k0 + c * 8)) : make_uint4(0u, 0u, 0u, 0u);
    }
}

template <int T, typename HT, int NT>
__global__ void __launch_bounds__(TG_THREADS)
tg_kernel(cu_mat W, const uint16_t *__restrict__ xa, int n, float *y, int ldy, int accumulate, float *part)
{
    using namespace nvcuda;
    CU_DYN_SMEM(smem);
    HT *Ws = (HT *)smem, *Xs = Ws + TG_M * TG_LD;
    float *Os = (float *)smem; /* after the last stage */
    const int warp = threadIdx.x >> 5;
    /* blockIdx.x (dispatched fastest): the token group, then y: the K split, z: the row block; so the blocks
     * that read the same weight tile run side by side and all but the first find it in L2 */
    const int r0 = blockIdx.z * TG_M, split = blockIdx.y, S = gridDim.y, t0 = blockIdx.x * TG_NMAX;
    const int K = W.cols, ns = K / TG_BK, s0 = split * ns / S, s1 = (split + 1) * ns / S;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[NT];
#pragma unroll
    for (int j = 0; j < NT; j++)
        wmma::fill_fragment(acc[j], 0.0f);
    uint4 wv[tg_w<T>::N], xv[NT];
    float wd[tg_w<T>::N];
    if (s0 < s1)
        tg_w<T>::fetch(W, r0, s0 * TG_BK, wv, wd); /* the weights: before the wait (see CU_PDL_ENTRY) */
    CU_PDL_ENTRY();
    if (s0 < s1)
        tg_fetch_x<NT>(xa, K, n, t0, s0 * TG_BK, xv);
    for (int s = s0; s < s1; s++) {
        tg_w<T>::store(wv, wd, Ws);
#pragma unroll
        for (int i = 0; i < NT; i++) {
            int idx = threadIdx.x + i * TG_THREADS;
            *(uint4 *)(Xs + (idx >> 3) * TG_LD + (idx & 7) * 8) = xv[i];
        }
        __syncthreads();
        if (s + 1 < s1) { /* next stage's loads, in flight during this stage's products */
            tg_w<T>::fetch(W, r0, (s + 1) * TG_BK, wv, wd);
            tg_fetch_x<NT>(xa, K, n, t0, (s + 1) * TG_BK, xv);
        }
#pragma unroll
        for (int kk = 0; kk < TG_BK / 16; kk++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, HT, wmma::row_major> a;
            wmma::load_matrix_sync(a, Ws + (16 * warp) * TG_LD + 16 * kk, TG_LD);
#pragma unroll
            for (int j = 0; j < NT; j++) {
                /* B = x^T: element (k, t) at Xs[t][k], i.e. column-major with leading dimension TG_LD */
                wmma::fragment<wmma::matrix_b, 16, 16, 16, HT, wmma::col_major> b;
                wmma::load_matrix_sync(b, Xs + (16 * j) * TG_LD + 16 * kk, TG_LD);
                wmma::mma_sync(acc[j], a, b, acc[j]);
            }
        }
        __syncthreads();
    }
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
    return (W->type == LLM_BF16 || W->type == LLM_F16 || W->type == LLM_Q8_0 || W->type == LLM_Q4_0) &&
           W->cols % TG_BK == 0 && W->row_bytes % 16 == 0 && ((uintptr_t)W->w & 15) == 0;
}

int cuda_tcgemm_splits(const cu_mat *W, int n, int sms)
{
    int blocks = (W->rows + TG_M - 1) / TG_M * ((n + TG_NMAX - 1) / TG_NMAX), stages = W->cols / TG_BK;
    int s = (2 * (sms > 0 ? sms : 1) + blocks - 1) / blocks; /* cover the SMs twice */
    int cap = stages / 2 < 16 ? stages / 2 : 16;              /* >= 2 stages a split (prefetch) */
    return s > cap ? (cap > 1 ? cap : 1) : s;
}

size_t cuda_tcgemm_scratch(const cu_mat *W, int n, int sms)
{
    int s = cuda_tcgemm_splits(W, n, sms);
    return s > 1 ? (size_t)s * (size_t)n * (size_t)W->rows * sizeof(float) : 0;
}

template <int T, typename HT>
static void tg_launch(const cu_mat *W, const uint16_t *xa, int n, float *y, int ldy, int acc, float *part, int S,
                      cudaStream_t st)
{
    int tiles = (n < TG_NMAX ? n : TG_NMAX) + 15;
    dim3 grid((unsigned)((n + TG_NMAX - 1) / TG_NMAX), (unsigned)S, (unsigned)((W->rows + TG_M - 1) / TG_M));
    switch (tiles / 16) {
    case 1: CU_LAUNCH((tg_kernel<T, HT, 1>), grid, TG_THREADS, TG_SMEM, st, *W, xa, n, y, ldy, acc, part); break;
    case 2: CU_LAUNCH((tg_kernel<T, HT, 2>), grid, TG_THREADS, TG_SMEM, st, *W, xa, n, y, ldy, acc, part); break;
    case 3: CU_LAUNCH((tg_kernel<T, HT, 3>), grid, TG_THREADS, TG_SMEM, st, *W, xa, n, y, ldy, acc, part); break;
    default: CU_LAUNCH((tg_kernel<T, HT, 4>), grid, TG_THREADS, TG_SMEM, st, *W, xa, n, y, ldy, acc, part); break;
    }
}

void cuda_tcgemm(const cu_mat *W, const void *xa, int n, float *y, int ldy, int accumulate, float *part, int sms,
                 cudaStream_t st)
{
    const uint16_t *x = (const uint16_t *)xa;
    int S = cuda_tcgemm_splits(W, n, sms);
    switch (W->type) {
    case LLM_F16:  tg_launch<LLM_F16, __half>(W, x, n, y, ldy, accumulate, part, S, st); break;
    case LLM_BF16: tg_launch<LLM_BF16, __nv_bfloat16>(W, x, n, y, ldy, accumulate, part, S, st); break;
    case LLM_Q8_0: tg_launch<LLM_Q8_0, __nv_bfloat16>(W, x, n, y, ldy, accumulate, part, S, st); break;
    default:       tg_launch<LLM_Q4_0, __nv_bfloat16>(W, x, n, y, ldy, accumulate, part, S, st); break;
    }
    if (S > 1) {
        int total = n * W->rows, blocks = (total + 255) / 256;
        CU_LAUNCH(tg_reduce_kernel, blocks < 4096 ? blocks : 4096, 256, 0, st, part, S, n, W->rows, y, ldy,
                  accumulate);
    }
}
