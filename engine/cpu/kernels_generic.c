/* Portable scalar kernels: the reference the SIMD tables are tested against
 * and the fallback on CPUs without AVX2. */
#include <math.h>

#include "cpu/kernels.h"

static float ld_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return llm_fp16_to_f32(h);
}

static float ld_bf16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return llm_bf16_to_f32(h);
}

static void store(float *y, float v, int accumulate)
{
    *y = accumulate ? *y + v : v;
}

static void gemm_f32(int K, const void *W, size_t ws, int nr, const void *X, size_t xs, int nt,
                     float *Y, size_t ldy, int acc)
{
    for (int r = 0; r < nr; r++) {
        const float *w = (const float *)((const uint8_t *)W + (size_t)r * ws);
        for (int t = 0; t < nt; t++) {
            const float *x = (const float *)((const uint8_t *)X + (size_t)t * xs);
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s += w[k] * x[k];
            store(&Y[(size_t)t * ldy + r], s, acc);
        }
    }
}

/* Half-precision rows: widen a row once into a buffer, then reuse it per token. */
#define GEMM_HALF(name, conv)                                                         \
static void name(int K, const void *W, size_t ws, int nr, const void *X, size_t xs,   \
                 int nt, float *Y, size_t ldy, int acc)                               \
{                                                                                     \
    float buf[1024];                                                                  \
    for (int r = 0; r < nr; r++) {                                                    \
        const uint8_t *w = (const uint8_t *)W + (size_t)r * ws;                       \
        for (int t = 0; t < nt; t++) {                                                \
            const float *x = (const float *)((const uint8_t *)X + (size_t)t * xs);    \
            float s = 0.0f;                                                           \
            for (int k0 = 0; k0 < K; k0 += 1024) {                                    \
                int n = K - k0 < 1024 ? K - k0 : 1024;                                \
                for (int k = 0; k < n; k++)                                           \
                    buf[k] = conv(w + 2 * (size_t)(k0 + k));                          \
                for (int k = 0; k < n; k++)                                           \
                    s += buf[k] * x[k0 + k];                                          \
            }                                                                         \
            store(&Y[(size_t)t * ldy + r], s, acc);                                   \
        }                                                                             \
    }                                                                                 \
}
GEMM_HALF(gemm_f16, ld_f16)
GEMM_HALF(gemm_bf16, ld_bf16)

static void gemm_q8_0(int K, const void *W, size_t ws, int nr, const void *X, size_t xs, int nt,
                      float *Y, size_t ldy, int acc)
{
    int nb = K / LLM_QK;
    for (int r = 0; r < nr; r++) {
        const llm_block_q8_0 *w = (const llm_block_q8_0 *)((const uint8_t *)W + (size_t)r * ws);
        for (int t = 0; t < nt; t++) {
            const cpu_q8_act *x = (const cpu_q8_act *)((const uint8_t *)X + (size_t)t * xs);
            float s = 0.0f;
            for (int b = 0; b < nb; b++) {
                int32_t d = 0;
                for (int j = 0; j < LLM_QK; j++)
                    d += (int32_t)w[b].qs[j] * x[b].qs[j];
                s += llm_fp16_to_f32(w[b].d) * x[b].d * (float)d;
            }
            store(&Y[(size_t)t * ldy + r], s, acc);
        }
    }
}

static void gemm_q4_0(int K, const void *W, size_t ws, int nr, const void *X, size_t xs, int nt,
                      float *Y, size_t ldy, int acc)
{
    int nb = K / LLM_QK;
    for (int r = 0; r < nr; r++) {
        const llm_block_q4_0 *w = (const llm_block_q4_0 *)((const uint8_t *)W + (size_t)r * ws);
        for (int t = 0; t < nt; t++) {
            const cpu_q8_act *x = (const cpu_q8_act *)((const uint8_t *)X + (size_t)t * xs);
            float s = 0.0f;
            for (int b = 0; b < nb; b++) {
                int32_t d = 0;
                for (int j = 0; j < LLM_QK / 2; j++)
                    d += (int32_t)(w[b].qs[j] & 0x0f) * x[b].qs[j] +
                         (int32_t)(w[b].qs[j] >> 4) * x[b].qs[j + LLM_QK / 2];
                /* sum((q-8)*x) = sum(q*x) - 8*sum(x) */
                s += llm_fp16_to_f32(w[b].d) * (x[b].d * (float)d - 8.0f * x[b].s);
            }
            store(&Y[(size_t)t * ldy + r], s, acc);
        }
    }
}

static void quantize_act(const float *x, cpu_q8_act *y, int K)
{
    for (int b = 0; b < K / LLM_QK; b++) {
        const float *v = x + (size_t)b * LLM_QK;
        float amax = 0.0f;
        for (int j = 0; j < LLM_QK; j++)
            amax = fmaxf(amax, fabsf(v[j]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0, lo = 0;
        for (int j = 0; j < LLM_QK; j++) {
            int q = (int)lrintf(v[j] * id);
            y[b].qs[j] = (int8_t)q;
            sum += q;
            lo += j < LLM_QK / 2 ? q : 0;
        }
        y[b].d = d;
        y[b].s = d * (float)sum;
        y[b].isum = (int16_t)sum;
        y[b].isum_lo = (int16_t)lo;
        y[b].fsum_lo = (float)lo;
        y[b].fsum_hi = (float)(sum - lo);
    }
}

static float dot_f32(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void axpy_f32(float a, const float *x, float *y, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void attn_scores(const float *q, const float *k, size_t stride, int n, int hd, float scale, float *out)
{
    for (int i = 0; i < n; i++)
        out[i] = dot_f32(q, k + (size_t)i * stride, hd) * scale;
}

static void attn_accum(const float *a, const float *v, size_t stride, int n, int hd, float *out)
{
    for (int i = 0; i < n; i++)
        axpy_f32(a[i], v + (size_t)i * stride, out, hd);
}

static void attn_scores_h(const float *q, const uint16_t *k, size_t stride, int n, int hd, float scale, float *out)
{
    for (int i = 0; i < n; i++) {
        const uint16_t *ki = k + (size_t)i * stride;
        float s = 0.0f;
        for (int d = 0; d < hd; d++)
            s += q[d] * llm_fp16_to_f32(ki[d]);
        out[i] = s * scale;
    }
}

static void attn_accum_h(const float *a, const uint16_t *v, size_t stride, int n, int hd, float *out)
{
    for (int i = 0; i < n; i++)
        for (int d = 0; d < hd; d++)
            out[d] += a[i] * llm_fp16_to_f32(v[(size_t)i * stride + d]);
}

static void attn_scores_mq(const float *const *q, int nq, const float *k, size_t stride, int n, int hd, float scale,
                           float *const *out)
{
    for (int j = 0; j < nq; j++)
        attn_scores(q[j], k, stride, n, hd, scale, out[j]);
}

static void attn_accum_mq(const float *const *a, int nq, const float *v, size_t stride, int n, int hd,
                          float *const *out)
{
    for (int j = 0; j < nq; j++)
        attn_accum(a[j], v, stride, n, hd, out[j]);
}

static void attn_scores_mq_h(const float *const *q, int nq, const uint16_t *k, size_t stride, int n, int hd,
                             float scale, float *const *out)
{
    for (int j = 0; j < nq; j++)
        attn_scores_h(q[j], k, stride, n, hd, scale, out[j]);
}

static void attn_accum_mq_h(const float *const *a, int nq, const uint16_t *v, size_t stride, int n, int hd,
                            float *const *out)
{
    for (int j = 0; j < nq; j++)
        attn_accum_h(a[j], v, stride, n, hd, out[j]);
}

static void f32_to_f16(const float *x, uint16_t *y, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = llm_f32_to_fp16(x[i]);
}

static void swiglu(float *g, const float *u, int n)
{
    for (int i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void geglu(float *g, const float *u, int n)
{
    for (int i = 0; i < n; i++)
        g[i] = llm_gelu_tanh(g[i]) * u[i];
}

static void dequant_rows(llm_dtype t, const void *w, size_t ws, int nr, int K, float *out)
{
    for (int r = 0; r < nr; r++)
        llm_row_to_f32(t, (const uint8_t *)w + (size_t)r * ws, out + (size_t)r * K, (size_t)K);
}

static void softmax(float *x, int n)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int i = 0; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++)
        x[i] *= inv;
}

static void kv_q8_quant(const float *x, int8_t *q, float *d, int g, int n)
{
    for (int i = 0; i < n; i += g) {
        float amax = 0.0f;
        for (int j = i; j < i + g; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        float s = amax / 127.0f, inv = s > 0.0f ? 1.0f / s : 0.0f;
        d[i / g] = s;
        for (int j = i; j < i + g; j++)
            q[j] = (int8_t)lrintf(x[j] * inv);
    }
}

static void kv_q8_dequant(const int8_t *q, const float *d, int g, int n, float *out)
{
    for (int i = 0; i < n; i++)
        out[i] = d[i / g] * (float)q[i];
}

static void gelu_erf(float *x, const float *b, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = cpu_gelu_erf1(x[i] + b[i]);
}

static const cpu_kernels generic = {
    "generic", gemm_f32, gemm_f16, gemm_bf16, gemm_q8_0, gemm_q4_0, quantize_act, dot_f32, axpy_f32,
    attn_scores, attn_accum, attn_scores_h, attn_accum_h, attn_scores_mq, attn_accum_mq, attn_scores_mq_h,
    attn_accum_mq_h, dequant_rows, f32_to_f16, softmax, swiglu, geglu, 0, NULL, 0, NULL, NULL, kv_q8_quant,
    kv_q8_dequant, gelu_erf,
};

const cpu_kernels *cpu_kernels_generic(void)
{
    return &generic;
}
