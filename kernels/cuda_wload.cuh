/* Device helpers shared by the GEMVs (cuda_kernels.cu) and the experts' products (cuda_moe.cu): 16-bit
 * conversions, the FFN's gate activation, one element of a weight matrix in any layout, 16-byte chunks of a
 * weight row dequantised to floats (wchunk<T>::load) or multiplied with int8 activations (qchunk<T>), a warp's
 * and a block's sum (also the encoder's kernels, cuda_encoder.cu). Static: every .cu file that includes it
 * has its own copy (the emulation links them all into one library). */
#ifndef LLM_CUDA_WLOAD_CUH
#define LLM_CUDA_WLOAD_CUH

#include "cuda_internal.cuh"

#define GEMV_WARPS 4

static __device__ __forceinline__ float bf16_f(uint32_t h) { return __uint_as_float(h << 16); }
/* The FFN's gate activation times up (gelu: an LLM_ACT_*): SwiGLU silu(g) * u, or Gemma's GeGLU gelu_tanh(g) * u (as
 * llm_gelu_tanh, engine/common.h, computes it; the CPU's vector kernels use the equal g * sigmoid(2y), y the tanh's
 * argument), the erf GELU's, or gpt-oss's clamped one. */
static __device__ __forceinline__ float cu_glu(float g, float u, int gelu)
{
    if (gelu == 3) { /* gpt-oss's clamped SwiGLU (llm_swiglu_oai) */
        g = fminf(g, LLM_OAI_LIMIT);
        u = fminf(fmaxf(u, -LLM_OAI_LIMIT), LLM_OAI_LIMIT);
        return g / (1.0f + expf(-LLM_OAI_ALPHA * g)) * (u + 1.0f);
    }
    if (gelu == 2) /* jina-bert-v2's exact (erf) GELU */
        return 0.5f * g * (1.0f + erff(g * 0.7071067811865476f)) * u;
    if (gelu)
        return 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g))) * u;
    return g / (1.0f + expf(-g)) * u;
}
static __device__ __forceinline__ float f16_f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

/* A CU_Q4_M block's (d, m) from its two fp16 scales. */
static __device__ __forceinline__ float2 cu_q4m_dm(const uint16_t *p)
{
    return make_float2(f16_f(p[0]), f16_f(p[1]));
}

/* A CU_Q5_M block's (d, m) and fifth bits from its 4 scale words (8-byte aligned). */
static __device__ __forceinline__ void cu_q5m_scales(const uint16_t *p, float2 &dm, uint32_t &h)
{
    const uint2 v = __ldg((const uint2 *)p);
    dm = make_float2(f16_f((uint16_t)(v.x & 0xffffu)), f16_f((uint16_t)(v.x >> 16)));
    h = v.y;
}

/* The two fp16 values of a 32-bit word, low half first. */
static __device__ __forceinline__ float2 f16x2_f(uint32_t v)
{
    return make_float2(f16_f((uint16_t)(v & 0xffffu)), f16_f((uint16_t)(v >> 16)));
}

/* A CU_Q3 block's 2 scale words (4-byte aligned): (d0, d1). */
static __device__ __forceinline__ float2 cu_q3_scales(const uint16_t *p) { return f16x2_f(__ldg((const uint32_t *)p)); }

/* A CU_Q2_M block's 4 scale words (8-byte aligned): (d0, d1, m0, m1). */
static __device__ __forceinline__ float4 cu_q2m_scales(const uint16_t *p)
{
    const uint2 v = __ldg((const uint2 *)p);
    const float2 d = f16x2_f(v.x), m = f16x2_f(v.y);
    return make_float4(d.x, d.y, m.x, m.y);
}

/* Element i (0-31) of a CU_Q6 block: its nibble bytes nb (16), its 6 scale words sc. */
static __device__ __forceinline__ float cu_q6_elem(const uint8_t *nb, const uint16_t *sc, int i)
{
    int h = i >> 4, j = i & 15;
    int lo = h ? nb[j] >> 4 : nb[j] & 15;
    uint32_t hw = (uint32_t)sc[2 + 2 * h] | (uint32_t)sc[3 + 2 * h] << 16;
    int q = lo | cu_q6_hi(hw, j) << 4;
    return f16_f(sc[h]) * (float)(q - 32);
}

/* One element W[r][k] in any layout (slow path: embedding, dequant, odd shapes). */
static __device__ float mat_elem(const cu_mat &W, int r, int k)
{
    size_t i = (size_t)r * (size_t)W.cols + (size_t)k;
    switch (W.type) {
    case LLM_F32:  return ((const float *)W.w)[i];
    case LLM_F16:  return f16_f(((const uint16_t *)W.w)[i]);
    case LLM_BF16: return bf16_f(((const uint16_t *)W.w)[i]);
    case LLM_Q8_0: {
        float d = f16_f(W.scales[(size_t)r * (W.cols / LLM_QK) + k / LLM_QK]);
        return d * (float)((const int8_t *)W.w)[i];
    }
    case LLM_Q4_0:
    case CU_IQ4:
    case CU_MX4:
    case CU_Q4_M:
    case CU_Q5_M:
    case CU_Q2_M:
    case CU_Q3: {
        const uint8_t *blk = (const uint8_t *)W.w + (size_t)r * W.row_bytes + (size_t)(k / LLM_QK) * 16;
        int j = k % LLM_QK;
        int q = j < 16 ? (blk[j] & 15) : (blk[j - 16] >> 4);
        size_t b = (size_t)r * (W.cols / LLM_QK) + k / LLM_QK;
        if (W.type == CU_Q5_M) {
            const uint16_t *sc = W.scales + 4 * b;
            uint32_t h = (uint32_t)sc[2] | (uint32_t)sc[3] << 16;
            return f16_f(sc[0]) * (float)(q | (int)((h >> j) & 1u) << 4) - f16_f(sc[1]);
        }
        if (W.type == CU_Q4_M)
            return f16_f(W.scales[2 * b]) * (float)q - f16_f(W.scales[2 * b + 1]);
        if (W.type == CU_Q2_M)
            return f16_f(W.scales[4 * b + j / 16]) * (float)q - f16_f(W.scales[4 * b + 2 + j / 16]);
        if (W.type == CU_Q3)
            return f16_f(W.scales[2 * b + j / 16]) * (float)(q - 4);
        if (cu_type_lvl(W.type))
            return f16_f(W.scales[b]) * (float)lvl_level(W.type, q);
        return f16_f(W.scales[b]) * (float)(q - 8);
    }
    case CU_Q6: {
        size_t b = (size_t)r * (W.cols / LLM_QK) + k / LLM_QK;
        return cu_q6_elem((const uint8_t *)W.w + (size_t)r * W.row_bytes + (size_t)(k / LLM_QK) * 16,
                          W.scales + b * 6, k % LLM_QK);
    }
    default: return 0.0f;
    }
}

/* ---- GEMV: one warp per weight row, each lane loads 16 bytes of the row per
 * step (E elements), dequantises and multiplies with NT tokens' activations. */
template <int T> struct wchunk;

template <> struct wchunk<LLM_F32> {
    enum { E = 4 };
    static __device__ __forceinline__ void load(const cu_mat &, const uint8_t *row, int, int c, float *w)
    {
        float4 v = __ldg((const float4 *)(row + (size_t)c * 16));
        w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
    }
};
template <> struct wchunk<LLM_F16> {
    enum { E = 8 };
    static __device__ __forceinline__ void load(const cu_mat &, const uint8_t *row, int, int c, float *w)
    {
        uint4 v = __ldg((const uint4 *)(row + (size_t)c * 16));
        const uint32_t u[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[2 * i]     = f16_f((uint16_t)(u[i] & 0xffffu));
            w[2 * i + 1] = f16_f((uint16_t)(u[i] >> 16));
        }
    }
};
template <> struct wchunk<LLM_BF16> {
    enum { E = 8 };
    static __device__ __forceinline__ void load(const cu_mat &, const uint8_t *row, int, int c, float *w)
    {
        uint4 v = __ldg((const uint4 *)(row + (size_t)c * 16));
        const uint32_t u[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[2 * i]     = __uint_as_float(u[i] << 16);
            w[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
        }
    }
};
template <> struct wchunk<LLM_Q8_0> {
    enum { E = 16 }; /* half a block */
    static __device__ __forceinline__ void load(const cu_mat &W, const uint8_t *row, int r, int c, float *w)
    {
        uint4 v = __ldg((const uint4 *)(row + (size_t)c * 16));
        float d = f16_f(W.scales[(size_t)r * (W.cols / LLM_QK) + c / 2]);
        const uint32_t u[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
        for (int i = 0; i < 16; i++)
            w[i] = d * (float)(int8_t)((u[i / 4] >> (8 * (i % 4))) & 0xffu);
    }
};
/* one block, Q4_0's nibble order: w = d (q - 8), or for CU_IQ4 / CU_MX4 d level(q) (four levels at once:
 * lvl_bytes) */
template <int T> struct wchunk_d4 {
    enum { E = 32 };
    static __device__ __forceinline__ void load(const cu_mat &W, const uint8_t *row, int r, int c, float *w)
    {
        uint4 v = __ldg((const uint4 *)(row + (size_t)c * 16));
        float d = f16_f(W.scales[(size_t)r * (W.cols / LLM_QK) + c]);
        const uint32_t u[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t a = u[i] & 0x0f0f0f0fu, b = (u[i] >> 4) & 0x0f0f0f0fu;
            if (cu_type_lvl(T)) {
                a = lvl_bytes<T>(a);
                b = lvl_bytes<T>(b);
            }
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int qa = (int)((a >> (8 * k)) & 0xffu), qb = (int)((b >> (8 * k)) & 0xffu);
                w[4 * i + k]      = d * (float)(cu_type_lvl(T) ? (int)(int8_t)qa : qa - 8);
                w[16 + 4 * i + k] = d * (float)(cu_type_lvl(T) ? (int)(int8_t)qb : qb - 8);
            }
        }
    }
};
template <> struct wchunk<LLM_Q4_0> : wchunk_d4<LLM_Q4_0> {};
template <> struct wchunk<CU_IQ4> : wchunk_d4<CU_IQ4> {};
template <> struct wchunk<CU_MX4> : wchunk_d4<CU_MX4> {};

/* ---- int8 activations (dp4a): chunk c of a Q8_0 row is half a block (16 weights), of the 4-bit-nibble types
 * (Q4_0, CU_IQ4, CU_Q4_M, CU_Q5_M, CU_Q6, CU_Q2_M, CU_Q3) a block (32 weights in 16 bytes). dot: chunk c's 16
 * weight bytes w, with its block's scales s (qscale), against the X 16-byte words xv of the activations' quants
 * that chunk covers
 * (quantised per 32-block as the CPU backend does, with (d, d * sum q) ds), in integers, then scaled to a
 * float; qdot: the same with the words read from global memory at xq (the row's start). */
struct cu_qsc {
    float    d, e;   /* the block's scale; its min (CU_Q4_M, CU_Q5_M) or its second half's scale (CU_Q6, CU_Q2_M,
                      * CU_Q3) */
    uint32_t h0, h1; /* CU_Q5_M's fifth bits (h0); CU_Q6's high 2 bits, elements 0-15 (h0) and 16-31 (h1) */
    float    m0, m1; /* CU_Q2_M's mins of elements 0-15 and 16-31 */
};
template <int T> struct qchunk;
template <> struct qchunk<LLM_Q8_0> {
    enum { PER_BLOCK = 2, X = 1 };
    static __device__ __forceinline__ float dot(uint4 w, const cu_qsc &s, const uint4 *xv, float2 ds)
    {
        int si = __dp4a((int)w.x, (int)xv[0].x, 0);
        si = __dp4a((int)w.y, (int)xv[0].y, si);
        si = __dp4a((int)w.z, (int)xv[0].z, si);
        si = __dp4a((int)w.w, (int)xv[0].w, si);
        return s.d * ds.x * (float)si;
    }
};
/* Bits 0-3 of v to bit 0 of bytes 0-3 (shifted copies that do not overlap, so the product carries nothing). */
static __device__ __forceinline__ uint32_t bits_to_bytes(uint32_t v) { return (v * 0x00204081u) & 0x01010101u; }
/* Word i of a nibble block (byte j: element j in the low nibble, j + 16 in the high one: Q4_0's order) as the
 * int8 quants of elements 4i .. 4i+3 (a) and 16+4i .. (b): CU_Q5_M's fifth bits added as 16, CU_Q6's high 2
 * bits as 16 and 32 and then 32 taken off, CU_Q3's 4 taken off (signed bytes; each byte's top bit set first
 * keeps its borrow in). */
template <int T> static __device__ __forceinline__ void nib_bytes(uint32_t w, const cu_qsc &s, int i, uint32_t &a,
                                                                   uint32_t &b)
{
    a = w & 0x0f0f0f0fu;
    b = (w >> 4) & 0x0f0f0f0fu;
    if (T == CU_Q5_M) {
        a |= bits_to_bytes((s.h0 >> (4 * i)) & 15u) << 4;
        b |= bits_to_bytes((s.h0 >> (16 + 4 * i)) & 15u) << 4;
    } else if (T == CU_Q6) {
        a = ((a | ((s.h0 >> (2 * i)) & 0x03030303u) << 4 | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
        b = ((b | ((s.h1 >> (2 * i)) & 0x03030303u) << 4 | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
    } else if (T == CU_Q3) { /* q - 4, the same way */
        a = ((a | 0x80808080u) - 0x04040404u) ^ 0x80808080u;
        b = ((b | 0x80808080u) - 0x04040404u) ^ 0x80808080u;
    } else if (cu_type_lvl(T)) {
        a = lvl_bytes<T>(a);
        b = lvl_bytes<T>(b);
    }
}
/* Q4_0: d (dx sum(q xq) - 8 dx sum xq); CU_Q4_M / CU_Q5_M (w = d q - m): d dx sum(q xq) - m dx sum xq; CU_Q6:
 * dx (d0 sum over the first 16 + d1 sum over the second) of (q - 32) xq, CU_Q3 the same of (q - 4) xq; CU_IQ4:
 * d dx sum(level xq); CU_Q2_M: dx (d0 sum(q xq) over the first 16 + d1 over the second) - m0 dx sum xq over the
 * first 16 (a dp4a with ones) - m1 (dx sum xq - that). */
template <int T> struct qchunk_nib {
    enum { PER_BLOCK = 1, X = 2 };
    static __device__ __forceinline__ float dot(uint4 w, const cu_qsc &s, const uint4 *xv, float2 ds)
    {
        const unsigned wv[4] = { w.x, w.y, w.z, w.w };
        const unsigned lo[4] = { xv[0].x, xv[0].y, xv[0].z, xv[0].w }, hi[4] = { xv[1].x, xv[1].y, xv[1].z, xv[1].w };
        int sa = 0, sb = 0, xl = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t a, b;
            nib_bytes<T>(wv[i], s, i, a, b);
            sa = __dp4a((int)a, (int)lo[i], sa);
            if (T == CU_Q6 || T == CU_Q2_M || T == CU_Q3)
                sb = __dp4a((int)b, (int)hi[i], sb);
            else
                sa = __dp4a((int)b, (int)hi[i], sa);
            if (T == CU_Q2_M)
                xl = __dp4a(0x01010101, (int)lo[i], xl);
        }
        if (T == CU_Q6 || T == CU_Q3)
            return ds.x * (s.d * (float)sa + s.e * (float)sb);
        if (T == CU_Q2_M) {
            const float xs0 = ds.x * (float)xl;
            return ds.x * (s.d * (float)sa + s.e * (float)sb) - s.m0 * xs0 - s.m1 * (ds.y - xs0);
        }
        if (T == LLM_Q4_0)
            return s.d * (ds.x * (float)sa - 8.0f * ds.y);
        if (cu_type_lvl(T))
            return s.d * ds.x * (float)sa;
        return s.d * ds.x * (float)sa - s.e * ds.y;
    }
};
template <> struct qchunk<LLM_Q4_0> : qchunk_nib<LLM_Q4_0> {};
template <> struct qchunk<CU_Q4_M> : qchunk_nib<CU_Q4_M> {};
template <> struct qchunk<CU_Q5_M> : qchunk_nib<CU_Q5_M> {};
template <> struct qchunk<CU_Q6> : qchunk_nib<CU_Q6> {};
template <> struct qchunk<CU_IQ4> : qchunk_nib<CU_IQ4> {};
template <> struct qchunk<CU_MX4> : qchunk_nib<CU_MX4> {};
template <> struct qchunk<CU_Q2_M> : qchunk_nib<CU_Q2_M> {};
template <> struct qchunk<CU_Q3> : qchunk_nib<CU_Q3> {};
/* The weight block's scales as qchunk<T> takes them (cu_qsc); sc is the row's scales (W.scales + r * nb *
 * cu_type_nsc(T)), blk the block. */
template <int T> static __device__ __forceinline__ cu_qsc qscale(const uint16_t *sc, int blk)
{
    cu_qsc s = { 0.0f, 0.0f, 0u, 0u, 0.0f, 0.0f };
    if (T == CU_Q2_M) {
        const float4 v = cu_q2m_scales(sc + (size_t)blk * 4);
        s.d = v.x;
        s.e = v.y;
        s.m0 = v.z;
        s.m1 = v.w;
    } else if (T == CU_Q3) {
        const float2 de = cu_q3_scales(sc + (size_t)blk * 2);
        s.d = de.x;
        s.e = de.y;
    } else if (T == CU_Q5_M) {
        float2 dm;
        cu_q5m_scales(sc + (size_t)blk * 4, dm, s.h0);
        s.d = dm.x;
        s.e = dm.y;
    } else if (T == CU_Q4_M) {
        const float2 dm = cu_q4m_dm(sc + (size_t)blk * 2);
        s.d = dm.x;
        s.e = dm.y;
    } else if (T == CU_Q6) { /* 12 bytes a block: 4-byte aligned */
        const uint32_t *p = (const uint32_t *)(sc + (size_t)blk * 6);
        const float2 de = f16x2_f(__ldg(p));
        s.d = de.x;
        s.e = de.y;
        s.h0 = __ldg(p + 1);
        s.h1 = __ldg(p + 2);
    } else {
        s.d = f16_f(sc[blk]);
    }
    return s;
}
/* The X words of activation quants chunk c covers, from global memory at xq (the row's start). */
template <int T> static __device__ __forceinline__ void qload(const int8_t *xq, int c, uint4 *xv)
{
    const uint4 *xp = (const uint4 *)(xq + (size_t)c * 16 * qchunk<T>::X);
#pragma unroll
    for (int i = 0; i < qchunk<T>::X; i++)
        xv[i] = __ldg(xp + i);
}
template <int T>
static __device__ __forceinline__ float qdot(uint4 w, const cu_qsc &s, const int8_t *xq, int c, float2 ds)
{
    uint4 xv[qchunk<T>::X];
    qload<T>(xq, c, xv);
    return qchunk<T>::dot(w, s, xv, ds);
}

/* one block: Q4_0's nibble order, w = d q - m with a (d, m) per half of 16 from the block's scale words: CU_Q4_M
 * and CU_Q5_M one pair for both halves (CU_Q5_M: q's fifth bits too), CU_Q2_M a pair each, CU_Q3 a d each and
 * m = 4 d (d q - 4 d is d (q - 4) exactly) */
template <int T> struct wchunk_dm {
    enum { E = 32 };
    static __device__ __forceinline__ void load(const cu_mat &W, const uint8_t *row, int r, int c, float *w)
    {
        uint4 v = __ldg((const uint4 *)(row + (size_t)c * 16));
        const size_t b = (size_t)r * (W.cols / LLM_QK) + c;
        float4 s; /* d0, d1, m0, m1 */
        uint32_t h = 0;
        if (T == CU_Q2_M) {
            s = cu_q2m_scales(W.scales + b * 4);
        } else if (T == CU_Q3) {
            const float2 d = cu_q3_scales(W.scales + b * 2);
            s = make_float4(d.x, d.y, 4.0f * d.x, 4.0f * d.y);
        } else {
            float2 dm;
            if (T == CU_Q5_M)
                cu_q5m_scales(W.scales + b * 4, dm, h);
            else
                dm = cu_q4m_dm(W.scales + b * 2);
            s = make_float4(dm.x, dm.x, dm.y, dm.y);
        }
        const uint32_t u[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
        for (int i = 0; i < 16; i++) {
            uint32_t q = (u[i / 4] >> (8 * (i % 4))) & 0xffu;
            w[i]      = s.x * (float)((q & 15u) | ((h >> i) & 1u) << 4) - s.z;
            w[i + 16] = s.y * (float)((q >> 4) | ((h >> (16 + i)) & 1u) << 4) - s.w;
        }
    }
};
template <> struct wchunk<CU_Q4_M> : wchunk_dm<CU_Q4_M> {};
template <> struct wchunk<CU_Q5_M> : wchunk_dm<CU_Q5_M> {};
template <> struct wchunk<CU_Q2_M> : wchunk_dm<CU_Q2_M> {};
template <> struct wchunk<CU_Q3> : wchunk_dm<CU_Q3> {};

template <> struct wchunk<CU_Q6> {
    enum { E = 32 }; /* one block: nibbles from the row, the high bits and the two scales from `scales` */
    static __device__ __forceinline__ void load(const cu_mat &W, const uint8_t *row, int r, int c, float *w)
    {
        uint4 v = __ldg((const uint4 *)(row + (size_t)c * 16));
        const uint32_t *s = (const uint32_t *)(W.scales + ((size_t)r * (W.cols / LLM_QK) + c) * 6);
        const uint32_t ds = __ldg(s), h0 = __ldg(s + 1), h1 = __ldg(s + 2);
        const float d0 = f16_f((uint16_t)(ds & 0xffffu)), d1 = f16_f((uint16_t)(ds >> 16));
        const uint32_t u[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
        for (int i = 0; i < 16; i++) {
            uint32_t b = (u[i / 4] >> (8 * (i % 4))) & 0xffu;
            w[i]      = d0 * (float)((int)(b & 15u) + (cu_q6_hi(h0, i) << 4) - 32);
            w[i + 16] = d1 * (float)((int)(b >> 4) + (cu_q6_hi(h1, i) << 4) - 32);
        }
    }
};

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum over the block (256 threads); every thread gets the total (red: 9 floats of shared memory). */
static __device__ __forceinline__ float block_sum_256(float v, float *red)
{
    v = warp_sum(v);
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0)
        red[w] = v;
    __syncthreads();
    float s = 0.0f;
    if (threadIdx.x < 32) {
        s = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.0f;
        s = warp_sum(s);
        if (lane == 0)
            red[8] = s;
    }
    __syncthreads();
    return red[8];
}

#endif
