/* dtype helpers, half-precision conversions, reference (de)quantisers. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *llm_read_file(const char *path, size_t max, size_t *len, llm_err *err)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        llm_seterr(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && (unsigned long)n <= max && fseek(f, 0, SEEK_SET) == 0)
        buf = malloc((size_t)n + 1);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf == NULL) {
        llm_seterr(err, "%s: cannot read%s", path, n >= 0 && (unsigned long)n > max ? " (too large)" : "");
        return NULL;
    }
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

void llm_seterr(llm_err *err, const char *fmt, ...)
{
    if (err == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
}

int llm_dtype_valid(uint32_t t)
{
    return t == LLM_F32 || t == LLM_F16 || t == LLM_Q4_0 || t == LLM_Q8_0 || t == LLM_BF16;
}

const char *llm_dtype_name(llm_dtype t)
{
    switch (t) {
    case LLM_F32:  return "f32";
    case LLM_F16:  return "f16";
    case LLM_Q4_0: return "q4_0";
    case LLM_Q8_0: return "q8_0";
    case LLM_BF16: return "bf16";
    }
    return "unknown";
}

int llm_dtype_from_name(const char *name, llm_dtype *out)
{
    static const llm_dtype all[] = { LLM_F32, LLM_F16, LLM_BF16, LLM_Q8_0, LLM_Q4_0 };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        if (strcasecmp(name, llm_dtype_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -1;
}

size_t llm_dtype_block_elems(llm_dtype t)
{
    return (t == LLM_Q4_0 || t == LLM_Q8_0) ? LLM_QK : 1;
}

size_t llm_dtype_block_bytes(llm_dtype t)
{
    switch (t) {
    case LLM_F32:  return 4;
    case LLM_F16:  return 2;
    case LLM_BF16: return 2;
    case LLM_Q8_0: return sizeof(llm_block_q8_0);
    case LLM_Q4_0: return sizeof(llm_block_q4_0);
    }
    return 0;
}

size_t llm_dtype_row_bytes(llm_dtype t, uint64_t n)
{
    size_t be = llm_dtype_block_elems(t), bb = llm_dtype_block_bytes(t);
    if (bb == 0 || n % be != 0)
        return 0;
    return (size_t)(n / be) * bb;
}

float llm_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Round to nearest even; a NaN stays a NaN. Branch-free so that row loops vectorise
 * (the CPU backend rounds every activation row for its bf16 kernels). */
static inline uint16_t bf16_round(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t nan = (x & 0x7fffffffu) > 0x7f800000u;
    uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return (uint16_t)(nan ? (x >> 16) | 0x40u : r);
}

uint16_t llm_f32_to_bf16(float f)
{
    return bf16_round(f);
}

void llm_row_to_f32(llm_dtype t, const void *src, float *dst, size_t n)
{
    switch (t) {
    case LLM_F32:
        memcpy(dst, src, n * sizeof(float));
        return;
    case LLM_F16: {
        const uint8_t *p = src;
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = llm_fp16_to_f32(h);
        }
        return;
    }
    case LLM_BF16: {
        const uint8_t *p = src;
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = llm_bf16_to_f32(h);
        }
        return;
    }
    case LLM_Q8_0: {
        const llm_block_q8_0 *b = src;
        for (size_t i = 0; i < n / LLM_QK; i++) {
            float d = llm_fp16_to_f32(b[i].d);
            for (int j = 0; j < LLM_QK; j++)
                dst[i * LLM_QK + j] = d * b[i].qs[j];
        }
        return;
    }
    case LLM_Q4_0: {
        const llm_block_q4_0 *b = src;
        for (size_t i = 0; i < n / LLM_QK; i++) {
            float d = llm_fp16_to_f32(b[i].d);
            for (int j = 0; j < LLM_QK / 2; j++) {
                dst[i * LLM_QK + j] = d * ((b[i].qs[j] & 0x0f) - 8);
                dst[i * LLM_QK + j + LLM_QK / 2] = d * ((b[i].qs[j] >> 4) - 8);
            }
        }
        return;
    }
    }
}

/* Quantisers follow ggml's reference rounding so files match llama.cpp's. */
void llm_row_from_f32(llm_dtype t, const float *src, void *dst, size_t n)
{
    switch (t) {
    case LLM_F32:
        memcpy(dst, src, n * sizeof(float));
        return;
    case LLM_F16: {
        uint8_t *p = dst;
        for (size_t i = 0; i < n; i++) {
            uint16_t h = llm_f32_to_fp16(src[i]);
            memcpy(p + 2 * i, &h, 2);
        }
        return;
    }
    case LLM_BF16: {
        uint8_t *p = dst;
        for (size_t i = 0; i < n; i++) {
            uint16_t h = bf16_round(src[i]);
            memcpy(p + 2 * i, &h, 2);
        }
        return;
    }
    case LLM_Q8_0: {
        llm_block_q8_0 *b = dst;
        for (size_t i = 0; i < n / LLM_QK; i++) {
            const float *x = src + i * LLM_QK;
            float amax = 0.0f;
            for (int j = 0; j < LLM_QK; j++) {
                float a = fabsf(x[j]);
                amax = a > amax ? a : amax; /* fmaxf's result, NaN skipped; vectorises */
            }
            float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            b[i].d = llm_f32_to_fp16(d);
            /* roundf (half away from zero) without the libm call, so the loop
             * vectorises: v - trunc(v) is exact for |v| <= 127.5. */
            for (int j = 0; j < LLM_QK; j++) {
                float v = x[j] * id;
                int q = (int)v;
                float fr = v - (float)q;
                b[i].qs[j] = (int8_t)(q + (fr >= 0.5f) - (fr <= -0.5f));
            }
        }
        return;
    }
    case LLM_Q4_0: {
        llm_block_q4_0 *b = dst;
        for (size_t i = 0; i < n / LLM_QK; i++) {
            const float *x = src + i * LLM_QK;
            float amax = 0.0f, max = 0.0f;
            for (int j = 0; j < LLM_QK; j++) {
                if (fabsf(x[j]) > amax) {
                    amax = fabsf(x[j]);
                    max = x[j];
                }
            }
            float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            b[i].d = llm_f32_to_fp16(d);
            for (int j = 0; j < LLM_QK / 2; j++) {
                int q0 = (int)(x[j] * id + 8.5f), q1 = (int)(x[j + LLM_QK / 2] * id + 8.5f);
                q0 = q0 > 15 ? 15 : q0;
                q1 = q1 > 15 ? 15 : q1;
                b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
            }
        }
        return;
    }
    }
}

int llm_grow(void **p, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    if (need > (1u << 31))
        return -1;
    uint32_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (q == NULL)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}
