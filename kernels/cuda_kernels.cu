/* Element-wise kernels of the CUDA backend (embedding gather, RMSNorm, SwiGLU,
 * RoPE + KV-cache write) and the matrix products: a warp-per-row GEMV with
 * fused dequantisation for small batches, cuBLAS for larger ones. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <type_traits>

#include "cuda_wload.cuh"

template <int NT>
__device__ __forceinline__ void gemv_store(float (&acc)[NT], float *y, int ldy, int r, int accumulate, int lane)
{
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float s = warp_sum(acc[t]);
        if (lane == 0) {
            float *p = y + (size_t)t * ldy + r;
            *p = accumulate ? *p + s : s;
        }
    }
}

/* With programmatic dependent launch (LLM_CUDA_PDL=1), a GEMV warp asks L2 for its weight row before it
 * waits for the previous kernel: the weights do not depend on it, so they stream in during its tail. */
#ifndef CU_EMULATE
__constant__ int cu_dev_pdl;
#endif
__device__ __forceinline__ void pdl_prefetch_row(const uint8_t *row, size_t bytes, int lane)
{
#ifndef CU_EMULATE
    if (!cu_dev_pdl)
        return;
    for (size_t o = (size_t)lane * 128; o < bytes; o += 32 * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(row + o));
#else
    (void)row, (void)bytes, (void)lane;
#endif
}

void cuda_set_pdl(int on)
{
    cu_pdl = on;
#ifndef CU_EMULATE
    cudaMemcpyToSymbol(cu_dev_pdl, &on, sizeof on);
#endif
}

template <int T, int NT>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_vec_kernel(cu_mat W, const float *__restrict__ x, int ldx, float *y, int ldy, int accumulate)
{
    constexpr int E = wchunk<T>::E;
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    if (r >= W.rows)
        return; /* whole warp: r is uniform across it */
    const uint8_t *row = (const uint8_t *)W.w + (size_t)r * W.row_bytes;
    pdl_prefetch_row(row, W.row_bytes, lane);
    CU_PDL_ENTRY();
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++)
        acc[t] = 0.0f;
    int nchunks = W.cols / E;
#pragma unroll 4
    for (int c = lane; c < nchunks; c += 32) {
        float w[E];
        wchunk<T>::load(W, row, r, c, w);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float4 *xp = (const float4 *)(x + (size_t)t * ldx + (size_t)c * E);
#pragma unroll
            for (int i = 0; i < E / 4; i++) {
                float4 xv = __ldg(xp + i);
                acc[t] += w[4 * i] * xv.x + w[4 * i + 1] * xv.y + w[4 * i + 2] * xv.z + w[4 * i + 3] * xv.w;
            }
        }
    }
    /* Tail of rows whose length is not a multiple of E (float types only). */
    for (int k = nchunks * E + lane; k < W.cols; k += 32) {
        float wv = mat_elem(W, r, k);
#pragma unroll
        for (int t = 0; t < NT; t++)
            acc[t] += wv * x[(size_t)t * ldx + k];
    }
    gemv_store<NT>(acc, y, ldy, r, accumulate, lane);
}

/* Any layout, element by element: rows not 16-byte aligned (e.g. F16 with an odd width). */
template <int NT>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_scalar_kernel(cu_mat W, const float *__restrict__ x, int ldx, float *y, int ldy, int accumulate)
{
    CU_PDL_ENTRY();
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    if (r >= W.rows)
        return;
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++)
        acc[t] = 0.0f;
    for (int k = lane; k < W.cols; k += 32) {
        float wv = mat_elem(W, r, k);
#pragma unroll
        for (int t = 0; t < NT; t++)
            acc[t] += wv * x[(size_t)t * ldx + k];
    }
    gemv_store<NT>(acc, y, ldy, r, accumulate, lane);
}

/* ---- Fused decode GEMVs (n <= the GEMV's token limit; LLM_CUDA_FUSE=0 turns them off) ----
 * Two rows per warp, with the RMSNorm of the input folded in: the sum of x^2 comes from the same loads of x
 * as the dot products, the norm weight multiplies x element by element, and 1/rms scales the two sums at
 * the end (no normalised copy of x, no RMSNorm launch). The epilogue then does what used to be a kernel of
 * its own:
 *  GF_SWIGLU  rows j (gate) and hidden + j (up) of the fused gate|up matrix: h[j] = silu(gate) * up
 *             (with gelu: gelu_tanh(gate) * up, Gemma's GeGLU);
 *  GF_ROPE_KV a RoPE pair of one q or k head (or two v rows) of the fused QKV matrix: q rotated into the
 *             qkv buffer (the attention reads it there), k rotated and v written into the paged KV cache.
 * Per decode layer: 5 launches fewer (2 RMSNorm, RoPE + KV write, SwiGLU... and their round trips). */
enum { GF_SWIGLU = 0, GF_ROPE_KV = 1, GF_PLAIN = 2 /* int8 kernel only: y (+)= W x, no norm */ };

typedef struct {
    const float *norm;       /* RMSNorm weight of the input */
    float        eps;
    float       *out;        /* h (GF_SWIGLU) or the qkv buffer (GF_ROPE_KV: q is written there) */
    int          ldo;
    int          hidden;     /* GF_SWIGLU: up rows start here */
    cu_tokinfo   ti;         /* GF_ROPE_KV: positions and block tables of the tokens */
    const float *cos_t, *sin_t;
    int          half, q_dim, kv_dim, layout, kv16, block_size;
    void        *kc, *vc;    /* this layer's K and V cache */
    int          accumulate; /* GF_PLAIN: out += instead of = */
    int          gelu;       /* GF_SWIGLU: GeGLU instead of SwiGLU */
} cu_gemv_fuse;
#ifdef CU_EMULATE
static inline void cu_emu_arg_check(const cu_gemv_fuse &f, int arg)
{
    cu_emu_check_dev_ptrs({ f.norm, f.out, f.cos_t, f.sin_t, f.kc, f.vc }, arg);
    cu_emu_arg_check(f.ti, arg);
}
#endif

/* Row pair p of a fused matrix: the rows (ra, rb) a warp takes and, for a RoPE pair, its index pi. */
template <int EPI>
__device__ __forceinline__ void fused_rows(const cu_gemv_fuse &f, int p, int &ra, int &rb, int &pi)
{
    pi = 0;
    if (EPI == GF_PLAIN) {
        ra = 2 * p;
        rb = ra + 1;
    } else if (EPI == GF_SWIGLU) {
        ra = p;
        rb = p + f.hidden;
    } else if (p < (f.q_dim + f.kv_dim) / 2) { /* a RoPE pair of a q or k head */
        int head = p / f.half;
        pi = p % f.half;
        ra = head * 2 * f.half + (f.layout == LLM_ROPE_ADJACENT ? 2 * pi : pi);
        rb = ra + (f.layout == LLM_ROPE_ADJACENT ? 1 : f.half);
    } else { /* two v rows */
        ra = 2 * p;
        rb = ra + 1;
    }
}

/* The epilogue of token t's normalised sums (sa, sb) of rows (ra, rb): h = silu(gate) * up, or RoPE and q
 * into f.out / k, v into the paged cache, exactly as swiglu_kernel / rope_kv_kernel. */
template <int EPI>
__device__ __forceinline__ void fused_store(const cu_gemv_fuse &f, int t, int p, int ra, int rb, int pi, float sa,
                                            float sb)
{
    if (EPI == GF_PLAIN) {
        float *o = f.out + (size_t)t * f.ldo + ra;
        o[0] = f.accumulate ? o[0] + sa : sa;
        o[1] = f.accumulate ? o[1] + sb : sb;
        return;
    }
    if (EPI == GF_SWIGLU) {
        f.out[(size_t)t * f.ldo + p] = cu_glu(sa, sb, f.gelu);
        return;
    }
    int pos = f.ti.pos[t];
    size_t slot = (size_t)f.ti.tables[f.ti.tab[t] + pos / f.block_size] * f.block_size +
                  (size_t)(pos % f.block_size);
    size_t cbase = slot * (size_t)f.kv_dim;
    float va = sa, vb = sb;
    void *cache = f.vc;
    size_t ca = 0, cb = 0;
    if (ra < f.q_dim + f.kv_dim) { /* rotate as rope_kv_kernel */
        if (f.cos_t != NULL) { /* (none: a NoPE layer) */
            float cs = f.cos_t[(size_t)pos * f.half + pi], sn = f.sin_t[(size_t)pos * f.half + pi];
            va = sa * cs - sb * sn;
            vb = sa * sn + sb * cs;
        }
        if (ra < f.q_dim) {
            f.out[(size_t)t * f.ldo + ra] = va;
            f.out[(size_t)t * f.ldo + rb] = vb;
            return;
        }
        cache = f.kc;
        ca = cbase + (size_t)(ra - f.q_dim);
        cb = cbase + (size_t)(rb - f.q_dim);
    } else {
        ca = cbase + (size_t)(ra - f.q_dim - f.kv_dim);
        cb = ca + 1;
    }
    if (f.kv16) {
        ((__half *)cache)[ca] = __float2half_rn(va);
        ((__half *)cache)[cb] = __float2half_rn(vb);
    } else {
        ((float *)cache)[ca] = va;
        ((float *)cache)[cb] = vb;
    }
}

template <int T, int NT, int EPI>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_fused_kernel(cu_mat W, const float *__restrict__ x, int ldx, cu_gemv_fuse f)
{
    constexpr int E = wchunk<T>::E;
    const int lane = threadIdx.x & 31, p = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    if (p >= W.rows / 2)
        return; /* whole warp */
    int ra, rb, pi;
    fused_rows<EPI>(f, p, ra, rb, pi);
    const uint8_t *wa_row = (const uint8_t *)W.w + (size_t)ra * W.row_bytes;
    const uint8_t *wb_row = (const uint8_t *)W.w + (size_t)rb * W.row_bytes;
    pdl_prefetch_row(wa_row, W.row_bytes, lane);
    pdl_prefetch_row(wb_row, W.row_bytes, lane);
    CU_PDL_ENTRY(); /* nothing above read memory another kernel writes */
    float acc[2][NT], ss[NT];
#pragma unroll
    for (int t = 0; t < NT; t++)
        acc[0][t] = acc[1][t] = ss[t] = 0.0f;
    const int nchunks = W.cols / E;
#pragma unroll 2
    for (int c = lane; c < nchunks; c += 32) {
        float wa[E], wb[E];
        wchunk<T>::load(W, wa_row, ra, c, wa);
        wchunk<T>::load(W, wb_row, rb, c, wb);
        const float4 *gp = (const float4 *)(f.norm + (size_t)c * E);
#pragma unroll
        for (int i = 0; i < E / 4; i++) {
            float4 g = __ldg(gp + i);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                float4 xv = __ldg((const float4 *)(x + (size_t)t * ldx + (size_t)c * E) + i);
                ss[t] += xv.x * xv.x + xv.y * xv.y + xv.z * xv.z + xv.w * xv.w;
                float x0 = xv.x * g.x, x1 = xv.y * g.y, x2 = xv.z * g.z, x3 = xv.w * g.w;
                acc[0][t] += wa[4 * i] * x0 + wa[4 * i + 1] * x1 + wa[4 * i + 2] * x2 + wa[4 * i + 3] * x3;
                acc[1][t] += wb[4 * i] * x0 + wb[4 * i + 1] * x1 + wb[4 * i + 2] * x2 + wb[4 * i + 3] * x3;
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float sa = warp_sum(acc[0][t]), sb = warp_sum(acc[1][t]), sq = warp_sum(ss[t]);
        if (lane != 0)
            continue;
        float inv = 1.0f / sqrtf(sq / (float)W.cols + f.eps); /* as rmsnorm_kernel */
        fused_store<EPI>(f, t, p, ra, rb, pi, sa * inv, sb * inv);
    }
}

/* ---- The same fused GEMVs on int8 activations (Q8_0/Q4_0 weights, LLM_CUDA_GEMV_DP4A=1 or the tuner's
 * "quant dp4a", with fusion on) ----
 * The block first normalises x (RMSNorm) and quantises it per 32-element block as the CPU backend does
 * (d = max|v| / 127, q = rint(v / d)) into shared memory, then each warp runs the dp4a products of its row
 * pair from there: no quant_act_kernel launch and no RMSNorm launch, 1 byte of activation per weight from
 * shared memory instead of 4 from L1, and the same epilogues. Blocks of FI8_WARPS warps (16 rows) share
 * one quantisation of x. */
#define FI8_WARPS 8

/* One 32-element block of activations, lane i holding element i, quantised as the CPU backend does:
 * d = max|v| / 127, q = rint(v / d) into *q_lane, and (d, d * sum of the block's q) into *ds. */
__device__ __forceinline__ void quant_block(float v, int8_t *q_lane, float2 *ds, int lane)
{
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    float q = rintf(v * id);
    *q_lane = (int8_t)q;
    float sum = warp_sum(q); /* integers below 2^12: exact in float */
    if (lane == 0)
        *ds = make_float2(d, d * sum);
}

/* Shared memory of the int8 copy of nt tokens' activations of width K: quants, then (d, d * sum) per block. */
static size_t fi8_smem(int nt, int K)
{
    return (size_t)nt * (size_t)K + (size_t)nt * (size_t)(K / LLM_QK) * sizeof(float2);
}

template <int T, int NT, int EPI>
__global__ void __launch_bounds__(FI8_WARPS * 32)
gemv_fused_i8_kernel(cu_mat W, const float *__restrict__ x, int ldx, cu_gemv_fuse f)
{
    CU_DYN_SMEM(smem);
    const int K = W.cols, nb = K / LLM_QK;
    int8_t *xq = (int8_t *)smem;                 /* [NT][K] */
    float2 *xds = (float2 *)(xq + (size_t)NT * K); /* [NT][nb]: d, d * sum of the block's quants */
    __shared__ float red[FI8_WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int p = blockIdx.x * FI8_WARPS + warp;
    int ra = 0, rb = 0, pi = 0;
    const bool active = p < W.rows / 2; /* warps past the matrix still help quantise */
    if (active)
        fused_rows<EPI>(f, p, ra, rb, pi);
    const uint8_t *wa_row = (const uint8_t *)W.w + (size_t)ra * W.row_bytes;
    const uint8_t *wb_row = (const uint8_t *)W.w + (size_t)rb * W.row_bytes;
    if (active) {
        pdl_prefetch_row(wa_row, W.row_bytes, lane);
        pdl_prefetch_row(wb_row, W.row_bytes, lane);
    }
    CU_PDL_ENTRY();
    for (int t = 0; t < NT; t++) {
        const float *xt = x + (size_t)t * ldx;
        if (EPI == GF_PLAIN) { /* the activations as they are */
            for (int b = warp; b < nb; b += FI8_WARPS)
                quant_block(xt[b * LLM_QK + lane], xq + (size_t)t * K + b * LLM_QK + lane, xds + (size_t)t * nb + b,
                            lane);
            continue;
        }
        float ss = 0.0f;
        for (int k = threadIdx.x; k < K; k += FI8_WARPS * 32)
            ss += xt[k] * xt[k];
        ss = warp_sum(ss);
        if (lane == 0)
            red[warp] = ss;
        __syncthreads();
        ss = 0.0f;
        for (int w = 0; w < FI8_WARPS; w++)
            ss += red[w];
        const float inv = 1.0f / sqrtf(ss / (float)K + f.eps); /* as rmsnorm_kernel */
        for (int b = warp; b < nb; b += FI8_WARPS) {
            int k = b * LLM_QK + lane;
            quant_block(xt[k] * inv * f.norm[k], xq + (size_t)t * K + k, xds + (size_t)t * nb + b, lane);
        }
        __syncthreads(); /* red[] is reused by the next token */
    }
    __syncthreads(); /* xq / xds complete */
    if (!active)
        return;
    float acc[2][NT];
#pragma unroll
    for (int t = 0; t < NT; t++)
        acc[0][t] = acc[1][t] = 0.0f;
    const uint16_t *sa_sc = W.scales + (size_t)ra * nb * cu_type_nsc(T), *sb_sc = W.scales + (size_t)rb * nb * cu_type_nsc(T);
    constexpr int PB = qchunk<T>::PER_BLOCK, X = qchunk<T>::X;
#pragma unroll 2
    for (int c = lane; c < PB * nb; c += 32) {
        uint4 wa = __ldg((const uint4 *)(wa_row + (size_t)c * 16));
        uint4 wb = __ldg((const uint4 *)(wb_row + (size_t)c * 16));
        const cu_qsc da = qscale<T>(sa_sc, c / PB), db = qscale<T>(sb_sc, c / PB);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const uint4 *xp = (const uint4 *)(xq + (size_t)t * K + (size_t)c * 16 * X); /* shared memory */
            uint4 xv[X];
#pragma unroll
            for (int i = 0; i < X; i++)
                xv[i] = xp[i];
            const float2 ds = xds[(size_t)t * nb + c / PB];
            acc[0][t] += qchunk<T>::dot(wa, da, xv, ds);
            acc[1][t] += qchunk<T>::dot(wb, db, xv, ds);
        }
    }
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float sa = warp_sum(acc[0][t]), sb = warp_sum(acc[1][t]);
        if (lane == 0)
            fused_store<EPI>(f, t, p, ra, rb, pi, sa, sb);
    }
}

/* 1 when the int8 fused GEMV takes W for n tokens: dp4a on, a block type, an even row count, and x's int8
 * copy for the tokens of one launch (at most CU_GEMV_MAX_TOKENS) within the 48 KiB of shared memory a block
 * gets without opting in. */
static int fused_i8_ok(const cu_mm_ctx *c, const cu_mat *W, int n)
{
    int nt = n < CU_GEMV_MAX_TOKENS ? n : CU_GEMV_MAX_TOKENS;
    return c->dp4a && cu_type_q(W->type) && W->cols % LLM_QK == 0 &&
           W->rows % 2 == 0 && fi8_smem(nt, W->cols) <= 48 * 1024;
}

int cuda_gemv_fused_ok(const cu_mm_ctx *c, const cu_mat *W, int n, int ldx)
{
    if (!cuda_mm_use_gemv(c, W, n) || c->shape_r > 0 || !cuda_gemv_ok(W, ldx) || W->rows % 2 != 0)
        return 0;
    if (c->dp4a && cu_type_q(W->type))
        return fused_i8_ok(c, W, n);
    int e = W->type == LLM_F32 ? 4 : W->type == LLM_Q8_0 ? 16 : cu_type_q(W->type) ? 32 : 8;
    return (W->type == LLM_F32 || W->type == LLM_F16 || W->type == LLM_BF16 || cu_type_q(W->type)) &&
           W->cols % e == 0;
}

template <int EPI, int NT>
static void gemv_fused_nt(const cu_mm_ctx *c, const cu_mat *W, const float *x, int ldx, const cu_gemv_fuse *f)
{
    cudaStream_t st = c->stream;
    if (c->dp4a && cu_type_q(W->type)) { /* cuda_gemv_fused_ok: fused_i8_ok */
        dim3 grid((unsigned)((W->rows / 2 + FI8_WARPS - 1) / FI8_WARPS)), block(FI8_WARPS * 32);
        size_t sm = fi8_smem(NT, W->cols);
        with_qtype(W->type, [&](auto T) {
            CU_LAUNCH((gemv_fused_i8_kernel<decltype(T)::value, NT, EPI>), grid, block, sm, st, *W, x, ldx, *f);
        });
        return;
    }
    dim3 grid((unsigned)((W->rows / 2 + GEMV_WARPS - 1) / GEMV_WARPS)), block(GEMV_WARPS * 32);
    with_wtype(W->type, [&](auto T) {
        CU_LAUNCH((gemv_fused_kernel<decltype(T)::value, NT, EPI>), grid, block, 0, st, *W, x, ldx, *f);
    });
}

template <int EPI>
static void gemv_fused(const cu_mm_ctx *c, const cu_mat *W, const float *x, int ldx, int n, cu_gemv_fuse f)
{
    for (int t0 = 0; t0 < n; t0 += CU_GEMV_MAX_TOKENS) {
        int nt = n - t0 < CU_GEMV_MAX_TOKENS ? n - t0 : CU_GEMV_MAX_TOKENS;
        cu_gemv_fuse g = f;
        g.out = f.out + (size_t)t0 * f.ldo;
        if (EPI == GF_ROPE_KV) {
            g.ti.pos = f.ti.pos + t0;
            g.ti.tab = f.ti.tab + t0;
        }
        const float *xs = x + (size_t)t0 * ldx;
        with_nt(nt, [&](auto k) { gemv_fused_nt<EPI, decltype(k)::value>(c, W, xs, ldx, &g); });
    }
}

static cu_gemv_fuse fuse_base(const float *norm, float eps, float *out, int ldo)
{
    cu_gemv_fuse f;
    memset(&f, 0, sizeof f);
    f.norm = norm;
    f.eps = eps;
    f.out = out;
    f.ldo = ldo;
    return f;
}

void cuda_gemv_norm_swiglu(const cu_mm_ctx *c, const cu_mat *W, const float *x, int ldx, int n, const float *norm,
                           float eps, float *h, int ldh, int gelu)
{
    cu_gemv_fuse f = fuse_base(norm, eps, h, ldh);
    f.hidden = W->rows / 2;
    f.gelu = gelu;
    gemv_fused<GF_SWIGLU>(c, W, x, ldx, n, f);
}

void cuda_gemv_norm_qkv_rope(const cu_mm_ctx *c, const cu_mat *W, const float *x, int ldx, int n, const float *norm,
                             float eps, float *qkv, int ld, const cu_tokinfo *ti, const float *cos_t,
                             const float *sin_t, int half, int n_heads, int n_kv_heads, int layout, const cu_kv *kv,
                             int layer, int block_size)
{
    cu_kv_layer kl = cu_kv_at(kv, layer);
    cu_gemv_fuse f = fuse_base(norm, eps, qkv, ld);
    f.ti = *ti;
    f.cos_t = cos_t;
    f.sin_t = sin_t;
    f.half = half;
    f.q_dim = n_heads * 2 * half;
    f.kv_dim = n_kv_heads * 2 * half;
    f.layout = layout;
    f.kc = kl.k;
    f.vc = kl.v;
    f.kv16 = kv->kv16; /* not q8_0: its groups span more than the epilogue sees (the caller steps aside) */
    f.block_size = block_size;
    gemv_fused<GF_ROPE_KV>(c, W, x, ldx, n, f);
}

/* One token, F16/BF16 weights, another shape of work (LLM_CUDA_GEMV_SHAPE=RxU, cu_mm_ctx.shape_r/u):
 * R rows per warp, U 16-byte chunks of each row loaded before any is used. The default kernel is about
 * R=1, U=4; bench/gpu_kernels_bench (part designs) times the shapes alone, this runs them in the model. */
/* The shape kernels' helpers: a warp's j-th row, clamped to the last one (past it: loaded, never stored),
 * and the store of its R sums (y (+)= each, rows past the matrix skipped). */
__device__ __forceinline__ int shape_row(const cu_mat &W, int r) { return r < W.rows ? r : W.rows - 1; }

template <int R>
__device__ __forceinline__ void shape_store(float (&acc)[R], float *y, int r0, int rows, int accumulate, int lane)
{
#pragma unroll
    for (int j = 0; j < R; j++) {
        float v = warp_sum(acc[j]);
        if (lane == 0 && r0 + j < rows)
            y[r0 + j] = accumulate ? y[r0 + j] + v : v;
    }
}

template <int T, int R, int U>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_shape_kernel(cu_mat W, const float *__restrict__ x, float *y, int accumulate)
{
    CU_PDL_ENTRY();
    int lane = threadIdx.x & 31, r0 = (blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5)) * R;
    if (r0 >= W.rows)
        return;
    const int nch = W.cols / 8; /* 16-byte chunks of 8 halves */
    float acc[R];
#pragma unroll
    for (int j = 0; j < R; j++)
        acc[j] = 0.0f;
    for (int c0 = lane; c0 < nch; c0 += 32 * U) {
        uint4 wv[R][U];
#pragma unroll
        for (int j = 0; j < R; j++)
#pragma unroll
            for (int u = 0; u < U; u++) {
                int c = c0 + 32 * u, r = shape_row(W, r0 + j);
                const uint8_t *row = (const uint8_t *)W.w + (size_t)r * W.row_bytes;
                wv[j][u] = c < nch ? __ldg((const uint4 *)row + c) : make_uint4(0u, 0u, 0u, 0u);
            }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = c0 + 32 * u;
            if (c >= nch)
                break;
            const float4 *xp = (const float4 *)(x + (size_t)c * 8);
            float4 xa = __ldg(xp), xb = __ldg(xp + 1);
            const float xv[8] = { xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w };
#pragma unroll
            for (int j = 0; j < R; j++) {
                const uint32_t h[4] = { wv[j][u].x, wv[j][u].y, wv[j][u].z, wv[j][u].w };
                float s = 0.0f;
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    float lo = T == LLM_BF16 ? __uint_as_float(h[i] << 16) : f16_f((uint16_t)(h[i] & 0xffffu));
                    float hi = T == LLM_BF16 ? __uint_as_float(h[i] & 0xffff0000u) : f16_f((uint16_t)(h[i] >> 16));
                    s += lo * xv[2 * i] + hi * xv[2 * i + 1];
                }
                acc[j] += s;
            }
        }
    }
    shape_store<R>(acc, y, r0, W.rows, accumulate, lane);
}

template <int T, int R, int U>
static void gemv_shape_launch(const cu_mat *W, const float *x, float *y, int acc, cudaStream_t st)
{
    dim3 grid((unsigned)((W->rows + GEMV_WARPS * R - 1) / (GEMV_WARPS * R))), block(GEMV_WARPS * 32);
    CU_LAUNCH((gemv_shape_kernel<T, R, U>), grid, block, 0, st, *W, x, y, acc);
}

int cuda_gemv_shape_ok(int r, int u)
{
#define SHAPE_OK(R_, U_) if (r == R_ && u == U_) return 1;
    GEMV_SHAPES(SHAPE_OK)
#undef SHAPE_OK
    return 0;
}

/* 1 when the shape switch took the call. */
static int gemv_shape(int r, int u, const cu_mat *W, const float *x, float *y, int acc, cudaStream_t st)
{
    if (W->type != LLM_BF16 && W->type != LLM_F16)
        return 0;
    int bf = W->type == LLM_BF16;
#define SHAPE(R_, U_)                                                                                  \
    if (r == R_ && u == U_) {                                                                          \
        if (bf)                                                                                        \
            gemv_shape_launch<LLM_BF16, R_, U_>(W, x, y, acc, st);                                      \
        else                                                                                           \
            gemv_shape_launch<LLM_F16, R_, U_>(W, x, y, acc, st);                                       \
        return 1;                                                                                      \
    }
    GEMV_SHAPES(SHAPE)
#undef SHAPE
    return 0;
}

int cuda_gemv_ok(const cu_mat *W, int ldx)
{
    return W->row_bytes % 16 == 0 && ((uintptr_t)W->w & 15) == 0 && ldx % 4 == 0;
}

/* f(std::integral_constant<int, NT>()) for NT = nt (1 .. CU_GEMV_MAX_TOKENS): the token count as a template
 * argument for the GEMV kernels. */
template <typename F> static void with_nt(int nt, F f)
{
    switch (nt) {
    case 1: f(std::integral_constant<int, 1>()); break;
    case 2: f(std::integral_constant<int, 2>()); break;
    case 3: f(std::integral_constant<int, 3>()); break;
    case 4: f(std::integral_constant<int, 4>()); break;
    case 5: f(std::integral_constant<int, 5>()); break;
    case 6: f(std::integral_constant<int, 6>()); break;
    case 7: f(std::integral_constant<int, 7>()); break;
    default: f(std::integral_constant<int, 8>()); break;
    }
}

template <int NT>
static void gemv_launch(const cu_mat *W, const float *x, int ldx, float *y, int ldy, int acc, cudaStream_t st)
{
    dim3 grid((unsigned)((W->rows + GEMV_WARPS - 1) / GEMV_WARPS)), block(GEMV_WARPS * 32);
    void (*k)(cu_mat, const float *, int, float *, int, int) = gemv_scalar_kernel<NT>;
    if (cuda_gemv_ok(W, ldx) && ((uintptr_t)x & 15) == 0)
        with_wtype(W->type, [&](auto T) { k = gemv_vec_kernel<decltype(T)::value, NT>; });
    CU_LAUNCH(k, grid, block, 0, st, *W, x, ldx, y, ldy, acc);
}

void cuda_gemv(const cu_mat *W, const float *x, int ldx, float *y, int ldy, int n, int accumulate,
               cudaStream_t st)
{
    for (int t0 = 0; t0 < n; t0 += CU_GEMV_MAX_TOKENS) {
        int nt = n - t0 < CU_GEMV_MAX_TOKENS ? n - t0 : CU_GEMV_MAX_TOKENS;
        const float *xs = x + (size_t)t0 * ldx;
        float *ys = y + (size_t)t0 * ldy;
        with_nt(nt, [&](auto k) { gemv_launch<decltype(k)::value>(W, xs, ldx, ys, ldy, accumulate, st); });
    }
}

/* ---- GEMV on int8 activations (LLM_CUDA_GEMV_DP4A=1) ----
 * Q8_0 and Q4_0 weights against activations quantised per 32-element block the
 * way the CPU backend does it (d = max|x| / 127, q = rint(x / d), s = d * sum q):
 * four dp4a per 16 weight bytes instead of 16-32 float FMAs, and 1 byte of
 * activation read per element instead of 4 (the float GEMV's activation reads
 * from L1 outweigh its weight reads 8:1 for Q4_0). */
__global__ void quant_act_kernel(const float *x, int ldx, int K, int n, int8_t *xq, float2 *xds)
{
    CU_PDL_ENTRY();
    int gw = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31, nb = K / LLM_QK;
    if (gw >= n * nb)
        return; /* whole warp */
    int t = gw / nb, b = gw % nb;
    quant_block(x[(size_t)t * ldx + (size_t)b * LLM_QK + lane], xq + (size_t)t * K + (size_t)b * LLM_QK + lane,
                xds + (size_t)t * nb + b, lane);
}

template <int T, int NT>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_dp4a_kernel(cu_mat W, const int8_t *__restrict__ xq, const float2 *__restrict__ xds, float *y, int ldy,
                 int accumulate)
{
    CU_PDL_ENTRY();
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    if (r >= W.rows)
        return;
    const int K = W.cols, nb = K / LLM_QK;
    const uint8_t *row = (const uint8_t *)W.w + (size_t)r * W.row_bytes;
    const uint16_t *sc = W.scales + (size_t)r * nb * cu_type_nsc(T);
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++)
        acc[t] = 0.0f;
    constexpr int PB = qchunk<T>::PER_BLOCK;
#pragma unroll 4
    for (int c = lane; c < PB * nb; c += 32) {
        uint4 w = __ldg((const uint4 *)(row + (size_t)c * 16));
        const cu_qsc dw = qscale<T>(sc, c / PB);
#pragma unroll
        for (int t = 0; t < NT; t++)
            acc[t] += qdot<T>(w, dw, xq + (size_t)t * K, c, xds[(size_t)t * nb + c / PB]);
    }
    gemv_store<NT>(acc, y, ldy, r, accumulate, lane);
}

template <int NT>
static void gemv_dp4a_launch(const cu_mm_ctx *c, const cu_mat *W, float *y, int ldy, int acc)
{
    dim3 grid((unsigned)((W->rows + GEMV_WARPS - 1) / GEMV_WARPS)), block(GEMV_WARPS * 32);
    const float2 *xds = (const float2 *)c->xds;
    with_qtype(W->type, [&](auto T) {
        CU_LAUNCH((gemv_dp4a_kernel<decltype(T)::value, NT>), grid, block, 0, c->stream, *W, c->xq, xds, y, ldy, acc);
    });
}

/* One token on int8 activations in another shape of work (LLM_CUDA_GEMV_SHAPE=RxU with LLM_CUDA_GEMV_DP4A=1):
 * R rows per warp, U chunks (a Q4_0 block / half a Q8_0 block: 16 weight bytes) loaded before any is used. */
template <int T, int R, int U>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_dp4a_shape_kernel(cu_mat W, const int8_t *__restrict__ xq, const float2 *__restrict__ xds, float *y,
                       int accumulate)
{
    CU_PDL_ENTRY();
    int lane = threadIdx.x & 31, r0 = (blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5)) * R;
    if (r0 >= W.rows)
        return;
    const int nb = W.cols / LLM_QK, nch = qchunk<T>::PER_BLOCK * nb;
    float acc[R];
#pragma unroll
    for (int j = 0; j < R; j++)
        acc[j] = 0.0f;
    for (int c0 = lane; c0 < nch; c0 += 32 * U) {
        uint4 wv[R][U];
        cu_qsc dw[R][U];
#pragma unroll
        for (int j = 0; j < R; j++)
#pragma unroll
            for (int u = 0; u < U; u++) {
                int c = c0 + 32 * u, r = shape_row(W, r0 + j);
                const uint8_t *row = (const uint8_t *)W.w + (size_t)r * W.row_bytes;
                int blk = c / qchunk<T>::PER_BLOCK;
                wv[j][u] = c < nch ? __ldg((const uint4 *)(row + (size_t)c * 16)) : make_uint4(0u, 0u, 0u, 0u);
                dw[j][u] = qscale<T>(W.scales + (size_t)r * nb * cu_type_nsc(T), c < nch ? blk : 0);
            }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = c0 + 32 * u;
            if (c >= nch)
                break;
            uint4 xv[qchunk<T>::X];
            qload<T>(xq, c, xv);
            const float2 ds = xds[c / qchunk<T>::PER_BLOCK];
#pragma unroll
            for (int j = 0; j < R; j++)
                acc[j] += qchunk<T>::dot(wv[j][u], dw[j][u], xv, ds);
        }
    }
    shape_store<R>(acc, y, r0, W.rows, accumulate, lane);
}

/* 1 when the shape switch took the one-token int8 GEMV (after quant_act_kernel filled c->xq / c->xds). */
static int gemv_dp4a_shape(const cu_mm_ctx *c, const cu_mat *W, float *y, int acc)
{
    int r = c->shape_r, u = c->shape_u, q8 = W->type == LLM_Q8_0;
    if (W->type != LLM_Q8_0 && W->type != LLM_Q4_0)
        return 0; /* the shapes are for Q8_0 / Q4_0: the default kernel takes the others */
    dim3 block(GEMV_WARPS * 32);
    const float2 *xds = (const float2 *)c->xds;
#define DSHAPE(R_, U_)                                                                                          \
    if (r == R_ && u == U_) {                                                                                   \
        dim3 grid((unsigned)((W->rows + GEMV_WARPS * R_ - 1) / (GEMV_WARPS * R_)));                            \
        if (q8)                                                                                                 \
            CU_LAUNCH((gemv_dp4a_shape_kernel<LLM_Q8_0, R_, U_>), grid, block, 0, c->stream, *W, c->xq, xds, y, \
                      acc);                                                                                     \
        else                                                                                                    \
            CU_LAUNCH((gemv_dp4a_shape_kernel<LLM_Q4_0, R_, U_>), grid, block, 0, c->stream, *W, c->xq, xds, y, \
                      acc);                                                                                     \
        return 1;                                                                                               \
    }
    GEMV_SHAPES(DSHAPE)
#undef DSHAPE
    return 0;
}

/* 1 when W goes through the int8 GEMV (dp4a on, a block type, rows and buffers that fit). */
static int dp4a_ok(const cu_mm_ctx *c, const cu_mat *W, int ldx)
{
    return c->dp4a && c->xq != NULL && cu_type_q(W->type) && W->cols % LLM_QK == 0 && W->cols <= c->xq_k &&
           cuda_gemv_ok(W, ldx);
}

void cuda_quant_act(const float *x, int ldx, int K, int n, int8_t *xq, void *xds, cudaStream_t st)
{
    size_t warps = (size_t)n * (size_t)(K / LLM_QK);
    CU_LAUNCH(quant_act_kernel, (unsigned)((warps + 7) / 8), 256, 0, st, x, ldx, K, n, xq, (float2 *)xds);
}

static void gemv_dp4a(const cu_mm_ctx *c, const cu_mat *W, const float *x, int ldx, float *y, int ldy, int n,
                      int accumulate)
{
    for (int t0 = 0; t0 < n; t0 += CU_GEMV_MAX_TOKENS) {
        int nt = n - t0 < CU_GEMV_MAX_TOKENS ? n - t0 : CU_GEMV_MAX_TOKENS;
        cuda_quant_act(x + (size_t)t0 * ldx, ldx, W->cols, nt, c->xq, c->xds, c->stream);
        float *ys = y + (size_t)t0 * ldy;
        if (nt == 1 && c->shape_r > 0 && gemv_dp4a_shape(c, W, ys, accumulate))
            continue;
        with_nt(nt, [&](auto k) { gemv_dp4a_launch<decltype(k)::value>(c, W, ys, ldy, accumulate); });
    }
}

/* ---- cuBLAS path ---- */
/* Activations [n][ldx] floats to [n][K] bf16/f16: a row of blocks per token (no division per element). Row t
 * of the output is x's row rows[t] where rows is given (the experts' gathered tokens, cuda_moe.cu), else t. */
__global__ void to_half_kernel(const float *x, int ldx, const int32_t *rows, void *out, int K, int bf16)
{
    CU_PDL_ENTRY();
    const float *xr = x + (size_t)(rows != NULL ? rows[blockIdx.y] : (int32_t)blockIdx.y) * ldx;
    size_t o = (size_t)blockIdx.y * K;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < K; k += gridDim.x * blockDim.x) {
        if (bf16)
            ((__nv_bfloat16 *)out)[o + k] = __float2bfloat16_rn(xr[k]);
        else
            ((__half *)out)[o + k] = __float2half_rn(xr[k]);
    }
}

void cuda_to_half(const float *x, int ldx, const int32_t *rows, void *out, int K, int n, int bf16, cudaStream_t st)
{
    int bx = (K + 255) / 256;
    for (int t0 = 0; t0 < n; t0 += 65535) { /* grid.y limit */
        int nt = n - t0 < 65535 ? n - t0 : 65535;
        if (rows != NULL)
            CU_LAUNCH(to_half_kernel, dim3((unsigned)(bx < 16 ? bx : 16), (unsigned)nt), 256, 0, st, x, ldx,
                      rows + t0, (char *)out + (size_t)t0 * K * 2, K, bf16);
        else
            CU_LAUNCH(to_half_kernel, dim3((unsigned)(bx < 16 ? bx : 16), (unsigned)nt), 256, 0, st,
                      x + (size_t)t0 * ldx, ldx, (const int32_t *)NULL, (char *)out + (size_t)t0 * K * 2, K, bf16);
    }
}

/* Block-type rows to bf16 [rows][cols] for cuBLAS, one thread per 16 bytes of quants (a wchunk: 16 or 32
 * elements): the values the GEMVs compute with, rounded once. */
template <int T>
__global__ void dequant_bf16_kernel(cu_mat W, __nv_bfloat16 *out)
{
    CU_PDL_ENTRY();
    constexpr int E = wchunk<T>::E;
    const int per_row = W.cols / E;
    const size_t total = (size_t)W.rows * (size_t)per_row;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(i / (size_t)per_row), c = (int)(i % (size_t)per_row);
        float w[E];
        wchunk<T>::load(W, (const uint8_t *)W.w + (size_t)r * W.row_bytes, r, c, w);
        __nv_bfloat16 *o = out + (size_t)r * W.cols + (size_t)c * E;
#pragma unroll
        for (int e = 0; e < E; e++)
            o[e] = __float2bfloat16_rn(w[e]);
    }
}

static unsigned grid_for(size_t total)
{
    size_t g = (total + 255) / 256;
    return (unsigned)(g > 65535 * 16 ? 65535 * 16 : (g == 0 ? 1 : g));
}

/* Grow a device buffer; waits for the stream first since earlier kernels may still read it. */
static int grow(void **p, size_t *cap, size_t need, cudaStream_t st, unsigned *gen)
{
    if (need <= *cap)
        return 0;
    (*gen)++;
    cudaStreamSynchronize(st);
    cudaFree(*p);
    *p = NULL;
    *cap = 0;
    if (cudaMalloc(p, need) != cudaSuccess) {
        *p = NULL;
        return -1;
    }
    *cap = need;
    return 0;
}

void cuda_matmul_release(cu_mm_ctx *c)
{
    cudaStreamSynchronize(c->stream);
    cudaFree(c->act16);
    cudaFree(c->deq);
    cudaFree(c->tc_part);
    c->act16 = c->deq = NULL;
    c->tc_part = NULL;
    c->act16_bytes = c->deq_bytes = c->tc_part_bytes = 0;
    c->gen++;
}

int cuda_mm_use_gemv(const cu_mm_ctx *c, const cu_mat *W, int n)
{
    if (W->type == LLM_Q8_0 || W->type == CU_Q6)
        return n <= c->gemv_max_q8;
    if (W->type == LLM_Q4_0 || W->type == CU_Q4_M || W->type == CU_Q5_M || cu_type_lvl(W->type) ||
        W->type == CU_Q2_M || W->type == CU_Q3)
        return n <= c->gemv_max_q4;
    return n <= (W->type == LLM_F32 ? CU_GEMV_MAX_TOKENS : c->gemv_max);
}

int cuda_mm_use_tc(const cu_mm_ctx *c, const cu_mat *W, int n)
{
    int q = cu_type_q(W->type);
    return n <= (q ? c->tc_max_q : c->tc_max) && !cuda_mm_use_gemv(c, W, n) && cuda_tcgemm_ok(W);
}

int cuda_matmul_reserve(cu_mm_ctx *c, const cu_mat *W, int n)
{
    if (cuda_mm_use_gemv(c, W, n) || W->type == LLM_F32)
        return 0;
    if (cuda_mm_use_tc(c, W, n))
        return grow((void **)&c->tc_part, &c->tc_part_bytes, cuda_tcgemm_scratch(W, n, c->sms), c->stream,
                    &c->gen) != 0 ||
               grow(&c->act16, &c->act16_bytes, (size_t)n * (size_t)W->cols * 2, c->stream, &c->gen) != 0
                   ? -1 : 0;
    size_t R = (size_t)W->rows, K = (size_t)W->cols;
    if (cu_type_q(W->type) && grow(&c->deq, &c->deq_bytes, R * K * 2, c->stream, &c->gen))
        return -1;
    return grow(&c->act16, &c->act16_bytes, (size_t)n * K * 2, c->stream, &c->gen);
}

int cuda_matmul(cu_mm_ctx *c, const cu_mat *W, const float *x, int ldx, float *y, int ldy, int n, int accumulate,
                char *msg, size_t msg_len)
{
    if (cuda_mm_use_gemv(c, W, n)) {
        if (c->fuse && fused_i8_ok(c, W, n) && !(n == 1 && c->shape_r > 0)) {
            /* int8 GEMV that quantises its activations itself (no quant_act_kernel launch) */
            cu_gemv_fuse f = fuse_base(NULL, 0.0f, y, ldy);
            f.accumulate = accumulate;
            gemv_fused<GF_PLAIN>(c, W, x, ldx, n, f);
            return 0;
        }
        if (dp4a_ok(c, W, ldx))
            gemv_dp4a(c, W, x, ldx, y, ldy, n, accumulate);
        else if (!(n == 1 && c->shape_r > 0 && cuda_gemv_ok(W, ldx) && ((uintptr_t)x & 15) == 0 &&
                   W->cols % 8 == 0 && gemv_shape(c->shape_r, c->shape_u, W, x, y, accumulate, c->stream)))
            cuda_gemv(W, x, ldx, y, ldy, n, accumulate, c->stream);
        return 0;
    }
    int K = W->cols, R = W->rows;
    if (cuda_mm_use_tc(c, W, n)) {
        if (cuda_matmul_reserve(c, W, n) != 0) {
            snprintf(msg, msg_len, "cuda backend: out of device memory for a %d-token product with %dx%d", n, R, K);
            c->nomem = 1;
            return -1;
        }
        if (x != NULL)
            cuda_to_half(x, ldx, NULL, c->act16, K, n, W->type != LLM_F16, c->stream);
        cuda_tcgemm(W, c->act16, n, y, ldy, accumulate, c->tc_part, c->sms, c->stream);
        return 0;
    }
    const float one = 1.0f, zero = 0.0f;
    const float *beta = accumulate ? &one : &zero;
    /* Row-major W [R][K] is column-major K x R (ld K); x [n][K] is K x n; y [n][R] is R x n: y = W^T x. */
    cublasStatus_t s;
    if (W->type == LLM_F32) {
        s = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, R, n, K, &one, W->w, CUDA_R_32F, K, x, CUDA_R_32F, ldx,
                         beta, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else {
        int bf16 = W->type != LLM_F16;
        cudaDataType_t ht = bf16 ? CUDA_R_16BF : CUDA_R_16F;
        const void *A = W->w;
        if (cu_type_q(W->type)) {
            if (grow(&c->deq, &c->deq_bytes, (size_t)R * (size_t)K * 2, c->stream, &c->gen) != 0) {
                snprintf(msg, msg_len, "cuda backend: out of device memory for a %dx%d dequantised matrix", R, K);
                return -1;
            }
            unsigned g = grid_for((size_t)R * W->row_bytes / 16);
            __nv_bfloat16 *deq = (__nv_bfloat16 *)c->deq;
            with_qtype(W->type, [&](auto T) {
                CU_LAUNCH(dequant_bf16_kernel<decltype(T)::value>, g, 256, 0, c->stream, *W, deq);
            });
            A = c->deq;
        }
        if (grow(&c->act16, &c->act16_bytes, (size_t)n * (size_t)K * 2, c->stream, &c->gen) != 0) {
            snprintf(msg, msg_len, "cuda backend: out of device memory for %d activations of %d", n, K);
            c->nomem = 1;
            return -1;
        }
        if (x != NULL)
            cuda_to_half(x, ldx, NULL, c->act16, K, n, bf16, c->stream);
        s = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, R, n, K, &one, A, ht, K, c->act16, ht, K, beta, y,
                         CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    cu_launches++; /* a cuBLAS call, counted as one launch */
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(msg, msg_len, "cuda backend: cublasGemmEx (%dx%dx%d, %s) failed with status %d", R, n, K,
                 W->type == LLM_F32 ? "f32" : "half", (int)s);
        return -1;
    }
    return 0;
}

/* ---- element-wise ---- */
__global__ void embed_kernel(cu_mat E, const int32_t *tokens, float *x, float scale)
{
    CU_PDL_ENTRY();
    int t = blockIdx.x, tok = tokens[t];
    for (int k = threadIdx.x; k < E.cols; k += blockDim.x) {
        float v = mat_elem(E, tok, k);
        x[(size_t)t * E.cols + k] = scale > 0.0f ? v * scale : v;
    }
}

void cuda_embed(const cu_mat *E, const int32_t *tokens, float *x, int n, float scale, cudaStream_t st)
{
    CU_LAUNCH(embed_kernel, n, 256, 0, st, *E, tokens, x, scale);
}

/* One block per logits row: the CPU sampler's greedy (engine/sampler.c: NaN -> -inf, +inf -> FLT_MAX, first
 * index of the maximum) and the chosen id's log-softmax, -log(sum exp(l - max)) (its logit is the max). */
__global__ void __launch_bounds__(256) argmax_kernel(const float *logits, int vocab, int32_t *ids, float *lps)
{
    CU_PDL_ENTRY();
    __shared__ float bv[256];
    __shared__ int bi[256];
    __shared__ float red[9];
    const float *row = logits + (size_t)blockIdx.x * vocab;
    float best = -INFINITY;
    int id = INT_MAX;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) { /* ascending: an equal value later never wins */
        float v = row[i];
        v = v != v ? -INFINITY : (v > FLT_MAX ? FLT_MAX : v);
        if (v > best || (v == best && i < id)) {
            best = v;
            id = i;
        }
    }
    bv[threadIdx.x] = best;
    bi[threadIdx.x] = id;
    __syncthreads();
    for (int o = 128; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o) {
            float v = bv[threadIdx.x + o];
            int j = bi[threadIdx.x + o];
            if (v > bv[threadIdx.x] || (v == bv[threadIdx.x] && j < bi[threadIdx.x])) {
                bv[threadIdx.x] = v;
                bi[threadIdx.x] = j;
            }
        }
        __syncthreads();
    }
    float M = bv[0];
    int win = bi[0];
    float z = 0.0f;
    if (M != -INFINITY)
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
            float v = row[i];
            v = v != v ? -INFINITY : (v > FLT_MAX ? FLT_MAX : v);
            z += expf(v - M);
        }
    z = block_sum_256(z, red);
    if (threadIdx.x == 0) {
        ids[blockIdx.x] = win;
        lps[blockIdx.x] = M == -INFINITY ? -INFINITY : -logf(z);
    }
}

void cuda_argmax(const float *logits, int vocab, int rows, int32_t *ids, float *lps, cudaStream_t st)
{
    CU_LAUNCH(argmax_kernel, rows, 256, 0, st, logits, vocab, ids, lps);
}

/* Output element stores for the kernels that can write float or 16-bit activations. */
__device__ __forceinline__ void out_store(float *p, float v) { *p = v; }
__device__ __forceinline__ void out_store(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void out_store(__half *p, float v) { *p = __float2half_rn(v); }

/* y[i] = x[src] / rms(x[src]) * w, src = rows ? rows[i] : i. */
template <typename OT>
__global__ void __launch_bounds__(256) rmsnorm_kernel(const float *x, int ldx, const float *w, OT *y, int ldy,
                                                      int dim, float eps, const int32_t *rows)
{
    CU_PDL_ENTRY();
    __shared__ float red[9];
    int i = blockIdx.x, src = rows != NULL ? rows[i] : i;
    const float *xr = x + (size_t)src * ldx;
    float ss = 0.0f;
    for (int k = threadIdx.x; k < dim; k += blockDim.x)
        ss += xr[k] * xr[k];
    ss = block_sum_256(ss, red);
    float s = 1.0f / sqrtf(ss / (float)dim + eps);
    OT *yr = y + (size_t)i * ldy;
    for (int k = threadIdx.x; k < dim; k += blockDim.x)
        out_store(yr + k, xr[k] * s * w[k]);
}

void cuda_rmsnorm(const float *x, int ldx, const float *w, float *y, int ldy, int n, int dim, float eps,
                  const int32_t *rows, cudaStream_t st)
{
    CU_LAUNCH(rmsnorm_kernel<float>, n, 256, 0, st, x, ldx, w, y, ldy, dim, eps, rows);
}

/* x[i] += y[i] / rms(y[i]) * w, a block per row: rmsnorm_kernel's formula, added to the residual (Gemma 2 / 3's
 * norm after attention and after the FFN, as engine/cpu/forward.c's post_norm_add). */
__global__ void __launch_bounds__(256) rmsnorm_add_kernel(const float *y, const float *w, float *x, int dim, float eps)
{
    CU_PDL_ENTRY();
    __shared__ float red[9];
    const float *yr = y + (size_t)blockIdx.x * dim;
    float *xr = x + (size_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int k = threadIdx.x; k < dim; k += blockDim.x)
        ss += yr[k] * yr[k];
    ss = block_sum_256(ss, red);
    float s = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int k = threadIdx.x; k < dim; k += blockDim.x)
        xr[k] += yr[k] * s * w[k];
}

void cuda_rmsnorm_add(const float *y, const float *w, float *x, int n, int dim, float eps, cudaStream_t st)
{
    CU_LAUNCH(rmsnorm_add_kernel, n, 256, 0, st, y, w, x, dim, eps);
}

/* Granite's scaled residual: x[t] += y[t] * s. */
__global__ void add_scaled_kernel(const float *y, float s, float *x, int dim)
{
    CU_PDL_ENTRY();
    const float *yr = y + (size_t)blockIdx.x * dim;
    float *xr = x + (size_t)blockIdx.x * dim;
    for (int k = threadIdx.x; k < dim; k += blockDim.x)
        xr[k] += yr[k] * s;
}

void cuda_add_scaled(const float *y, float s, float *x, int n, int dim, cudaStream_t st)
{
    CU_LAUNCH(add_scaled_kernel, n, 256, 0, st, y, s, x, dim);
}

/* gpt-oss's output projection's and router's biases: y[t][i] += b[i], a block a row. */
__global__ void add_bias_kernel(float *y, int ld, const float *b, int cols)
{
    CU_PDL_ENTRY();
    float *yr = y + (size_t)blockIdx.x * ld;
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
        yr[i] += b[i];
}

void cuda_add_bias(float *y, int ld, const float *b, int cols, int n, cudaStream_t st)
{
    CU_LAUNCH(add_bias_kernel, n, cols < 256 ? 32 * ((cols + 31) / 32) : 256, 0, st, y, ld, b, cols);
}

/* Gemma 2's final logit soft cap (cap > 0) and Granite's logit scale (mul), in place over n rows (before the
 * argmax, the sampler and the copies out). */
__global__ void logits_post_kernel(float *x, int ld, int cols, int n, float cap, float mul)
{
    CU_PDL_ENTRY();
    size_t total = (size_t)n * (size_t)cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        float *p = x + i / (size_t)cols * (size_t)ld + i % (size_t)cols;
        float v = cap > 0.0f ? cap * tanhf(*p / cap) : *p;
        *p = mul != 1.0f ? v * mul : v;
    }
}

void cuda_logits_post(float *x, int ld, int cols, int n, float cap, float mul, cudaStream_t st)
{
    CU_LAUNCH(logits_post_kernel, grid_for((size_t)n * cols), 256, 0, st, x, ld, cols, n, cap, mul);
}

template <typename OT>
__global__ void swiglu_kernel(const float *gu, int ld, OT *h, int hidden, int n, int gelu)
{
    CU_PDL_ENTRY();
    size_t total = (size_t)n * (size_t)hidden;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / (size_t)hidden, j = i % (size_t)hidden;
        float g = gu[t * (size_t)ld + j], u = gu[t * (size_t)ld + (size_t)hidden + j];
        out_store(h + i, cu_glu(g, u, gelu));
    }
}

void cuda_swiglu(const float *gu, int ld, float *h, int hidden, int n, int gelu, cudaStream_t st)
{
    CU_LAUNCH(swiglu_kernel<float>, grid_for((size_t)n * hidden), 256, 0, st, gu, ld, h, hidden, n, gelu);
}

/* ---- products whose activations the producer writes in 16 bits ----
 * For the n that go to cuBLAS or the tensor-core GEMM (which read bf16/f16 activations), the RMSNorm or the
 * SwiGLU before the product writes them straight into c->act16 in the weight's 16-bit type, instead of a
 * float copy that to_half_kernel then converts: one launch and one pass over the activations fewer. */
int cuda_mm_act16(const cu_mm_ctx *c, const cu_mat *W, int n)
{
    return !cuda_mm_use_gemv(c, W, n) && W->type != LLM_F32;
}

int cuda_rmsnorm_act16(cu_mm_ctx *c, const cu_mat *W, const float *x, int ldx, const float *w, int n, float eps)
{
    if (cuda_matmul_reserve(c, W, n) != 0 || c->act16 == NULL) {
        c->nomem = 1;
        return -1;
    }
    if (W->type == LLM_F16)
        CU_LAUNCH(rmsnorm_kernel<__half>, n, 256, 0, c->stream, x, ldx, w, (__half *)c->act16, W->cols, W->cols,
                  eps, (const int32_t *)NULL);
    else
        CU_LAUNCH(rmsnorm_kernel<__nv_bfloat16>, n, 256, 0, c->stream, x, ldx, w, (__nv_bfloat16 *)c->act16,
                  W->cols, W->cols, eps, (const int32_t *)NULL);
    return 0;
}

void cuda_glu16(const float *gu, int ld, void *h, int hidden, int n, int gelu, int f16, cudaStream_t st)
{
    unsigned g = grid_for((size_t)n * hidden);
    if (f16)
        CU_LAUNCH(swiglu_kernel<__half>, g, 256, 0, st, gu, ld, (__half *)h, hidden, n, gelu);
    else
        CU_LAUNCH(swiglu_kernel<__nv_bfloat16>, g, 256, 0, st, gu, ld, (__nv_bfloat16 *)h, hidden, n, gelu);
}

int cuda_swiglu_act16(cu_mm_ctx *c, const cu_mat *W, const float *gu, int ld, int n, int gelu)
{
    if (cuda_matmul_reserve(c, W, n) != 0 || c->act16 == NULL) {
        c->nomem = 1;
        return -1;
    }
    cuda_glu16(gu, ld, c->act16, W->cols, n, gelu, W->type == LLM_F16, c->stream);
    return 0;
}

/* One token per block: biases added over the whole [q | k | v] row, then one warp per q / k head:
 * x = x / rms(x) * w (Qwen 3's q_norm / k_norm, the same eps as the layer norms); full (OLMo 2): one warp for
 * the whole q row and one for the whole k row, their norms as wide; with ss, the rows' sums of squares are
 * given (token t's q and k: ss[2t], ss[2t + 1], over rows `parts` times as wide: tensor parallelism's). */
__global__ void __launch_bounds__(128) qkv_prep_kernel(float *qkv, int ld, const float *bq, const float *bk,
                                                       const float *bv, const float *q_norm, const float *k_norm,
                                                       int n_heads, int n_kv, int hd, int full, float eps,
                                                       const float *ss_in, int parts)
{
    CU_PDL_ENTRY();
    float *row = qkv + (size_t)blockIdx.x * ld;
    int q_dim = n_heads * hd, kv_dim = n_kv * hd;
    if (bq != NULL) {
        for (int i = threadIdx.x; i < q_dim + 2 * kv_dim; i += blockDim.x)
            row[i] += i < q_dim ? bq[i] : i < q_dim + kv_dim ? bk[i - q_dim] : bv[i - q_dim - kv_dim];
        __syncthreads();
    }
    if (q_norm == NULL)
        return;
    const int nq = full ? 1 : n_heads, nk = full ? 1 : n_kv;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int h = warp; h < nq + nk; h += blockDim.x / 32) {
        const int len = full ? (h < nq ? q_dim : kv_dim) : hd;
        float *x = h < nq ? row + (size_t)h * len : row + q_dim + (size_t)(h - nq) * len; /* k after q */
        const float *w = h < nq ? q_norm : k_norm;
        float ss = 0.0f;
        if (ss_in != NULL) {
            ss = ss_in[(size_t)blockIdx.x * 2 + (h < nq ? 0 : 1)];
        } else {
            for (int i = lane; i < len; i += 32)
                ss += x[i] * x[i];
            ss = warp_sum(ss);
        }
        float r = 1.0f / sqrtf(ss / (float)(len * parts) + eps);
        for (int i = lane; i < len; i += 32)
            x[i] = x[i] * r * w[i];
    }
}

void cuda_qkv_prep(float *qkv, int ld, int n, const float *bq, const float *bk, const float *bv,
                   const float *q_norm, const float *k_norm, int n_heads, int n_kv_heads, int head_dim, int full,
                   float eps, const float *ss, int parts, cudaStream_t st)
{
    CU_LAUNCH(qkv_prep_kernel, n, 128, 0, st, qkv, ld, bq, bk, bv, q_norm, k_norm, n_heads, n_kv_heads, head_dim,
              full, eps, ss, parts);
}

/* ss[2t], ss[2t + 1] = the sums of squares of token t's q row (q_dim floats) and k row (kv_dim, after q): a
 * block a token, a warp a row. */
__global__ void __launch_bounds__(64) qk_ssq_kernel(const float *qkv, int ld, int q_dim, int kv_dim, float *ss)
{
    CU_PDL_ENTRY();
    const float *row = qkv + (size_t)blockIdx.x * ld;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, len = warp == 0 ? q_dim : kv_dim;
    const float *x = warp == 0 ? row : row + q_dim;
    float s = 0.0f;
    for (int i = lane; i < len; i += 32)
        s += x[i] * x[i];
    s = warp_sum(s);
    if (lane == 0)
        ss[(size_t)blockIdx.x * 2 + warp] = s;
}

void cuda_qk_ssq(const float *qkv, int ld, int n, int q_dim, int kv_dim, float *ss, cudaStream_t st)
{
    CU_LAUNCH(qk_ssq_kernel, n, 64, 0, st, qkv, ld, q_dim, kv_dim, ss);
}

/* One token's RoPE by a block's threads: q's heads rotated in place, k's into kout (f16 where kout16, else f32;
 * [n_kv][hd]) with the tables' row of the token's position (cs / sn NULL: a NoPE layer, nothing rotated). */
__device__ __forceinline__ void rope_token(float *q, const float *k, const float *cs, const float *sn, int half,
                                           int n_heads, int n_kv, int layout, void *kout, int kout16)
{
    int hd = 2 * half, total = (n_heads + n_kv) * half;
    for (int idx = threadIdx.x; idx < total; idx += blockDim.x) {
        int h = idx / half, i = idx % half;
        int i0 = layout == LLM_ROPE_ADJACENT ? 2 * i : i;
        int i1 = layout == LLM_ROPE_ADJACENT ? 2 * i + 1 : i + half;
        const float *b = h < n_heads ? q + (size_t)h * hd : k + (size_t)(h - n_heads) * hd;
        float a0 = b[i0], a1 = b[i1];
        float r0 = cs != NULL ? a0 * cs[i] - a1 * sn[i] : a0, r1 = cs != NULL ? a0 * sn[i] + a1 * cs[i] : a1;
        if (h < n_heads) {
            q[(size_t)h * hd + i0] = r0;
            q[(size_t)h * hd + i1] = r1;
            continue;
        }
        size_t o = (size_t)(h - n_heads) * hd;
        if (kout16) {
            ((__half *)kout)[o + i0] = __float2half_rn(r0);
            ((__half *)kout)[o + i1] = __float2half_rn(r1);
        } else {
            ((float *)kout)[o + i0] = r0;
            ((float *)kout)[o + i1] = r1;
        }
    }
}

/* Rotate q (in place) and k (into the cache) of one token per block; copy v into the cache. */
__global__ void rope_kv_kernel(float *qkv, int ld, cu_tokinfo ti, const float *cos_t, const float *sin_t, int half,
                               int n_heads, int n_kv, int layout, void *kc, void *vc, int kv16, int block_size)
{
    CU_PDL_ENTRY();
    int t = blockIdx.x, pos = ti.pos[t], hd = 2 * half, kv_dim = n_kv * hd;
    float *q = qkv + (size_t)t * ld, *k = q + (size_t)n_heads * hd, *v = k + kv_dim;
    size_t slot = (size_t)ti.tables[ti.tab[t] + pos / block_size] * block_size + (size_t)(pos % block_size);
    size_t cbase = slot * (size_t)kv_dim;
    const float *cs = cos_t != NULL ? cos_t + (size_t)pos * half : NULL; /* NULL: a NoPE layer */
    rope_token(q, k, cs, cs != NULL ? sin_t + (size_t)pos * half : NULL, half, n_heads, n_kv, layout,
               (char *)kc + cbase * (kv16 ? 2 : 4), kv16);
    for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
        if (kv16)
            ((__half *)vc)[cbase + i] = __float2half_rn(v[i]);
        else
            ((float *)vc)[cbase + i] = v[i];
    }
}

/* rope_kv_kernel for a q8_0 cache: q rotated in place as there; the token's rotated k and its v staged in
 * shared memory ([k | v], 2 * kv_dim floats), then quantised as the CPU backend's kv_q8_quant does, so both
 * backends cache the same bits: per group of qg (8, 16 or 32) elements, scale s = max |x| / 127 and
 * q = x * (1 / s) rounded to nearest even (0 for an all-zero group). A group is qg consecutive lanes of a
 * warp (qg divides 32), its max a few shuffles. */
__global__ void rope_kv_q8_kernel(float *qkv, int ld, cu_tokinfo ti, const float *cos_t, const float *sin_t,
                                  int half, int n_heads, int n_kv, int layout, int8_t *kc, int8_t *vc, float *ks,
                                  float *vs, int qg, int block_size)
{
    CU_PDL_ENTRY();
    CU_DYN_SMEM(kvs);
    int t = blockIdx.x, pos = ti.pos[t], hd = 2 * half, kv_dim = n_kv * hd;
    float *q = qkv + (size_t)t * ld, *k = q + (size_t)n_heads * hd, *v = k + kv_dim;
    size_t slot = (size_t)ti.tables[ti.tab[t] + pos / block_size] * block_size + (size_t)(pos % block_size);
    size_t cbase = slot * (size_t)kv_dim;
    const float *cs = cos_t != NULL ? cos_t + (size_t)pos * half : NULL; /* NULL: a NoPE layer */
    rope_token(q, k, cs, cs != NULL ? sin_t + (size_t)pos * half : NULL, half, n_heads, n_kv, layout, kvs, 0);
    for (int i = threadIdx.x; i < kv_dim; i += blockDim.x)
        kvs[kv_dim + i] = v[i];
    __syncthreads();
    const int n2 = 2 * kv_dim, nr = (n2 + 31) & ~31; /* whole warps take part in the shuffles */
    for (int e = threadIdx.x; e < nr; e += blockDim.x) {
        float x = e < n2 ? kvs[e] : 0.0f, amax = fabsf(x);
        for (int o = qg / 2; o > 0; o >>= 1)
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        if (e >= n2)
            continue;
        float sc = amax / 127.0f, inv = sc > 0.0f ? 1.0f / sc : 0.0f;
        int isv = e >= kv_dim, i = e - isv * kv_dim;
        (isv ? vc : kc)[cbase + i] = (int8_t)rintf(x * inv);
        if (i % qg == 0)
            (isv ? vs : ks)[cbase / qg + i / qg] = sc;
    }
}

void cuda_rope_kv_write(float *qkv, int ld, const cu_tokinfo *ti, int n, const float *cos_t, const float *sin_t,
                        int half, int n_heads, int n_kv_heads, int layout, const cu_kv *kv, int layer,
                        int block_size, cudaStream_t st)
{
    cu_kv_layer kl = cu_kv_at(kv, layer);
    if (kv->q8) {
        size_t smem = 2 * (size_t)n_kv_heads * 2 * (size_t)half * sizeof(float);
        CU_LAUNCH(rope_kv_q8_kernel, n, 128, smem, st, qkv, ld, *ti, cos_t, sin_t, half, n_heads, n_kv_heads,
                  layout, (int8_t *)kl.k, (int8_t *)kl.v, kl.ks, kl.vs, kv->qg, block_size);
        return;
    }
    CU_LAUNCH(rope_kv_kernel, n, 128, 0, st, qkv, ld, *ti, cos_t, sin_t, half, n_heads, n_kv_heads, layout, kl.k,
              kl.v, kv->kv16, block_size);
}
