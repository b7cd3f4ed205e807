/* Read-only GGUF weight types: sizes, names and row dequantisers (ggml's block
 * layouts; see gguf_quants.h). Blocks are read byte by byte with little-endian
 * 16-bit scales, so no alignment is assumed. */
#include <math.h>
#include <string.h>

#include "gguf_quants.h"

typedef struct {
    uint32_t    type;
    const char *name;
    uint32_t    elems;  /* per block */
    uint32_t    bytes;  /* per block */
} qtype_info;

static const qtype_info qtypes[] = {
    { GGML_Q4_1, "q4_1", 32, 20 },         /* d, m (fp16); 16 bytes of nibbles */
    { GGML_Q5_0, "q5_0", 32, 22 },         /* d; 4 bytes of 5th bits; 16 bytes of nibbles */
    { GGML_Q5_1, "q5_1", 32, 24 },         /* d, m; 5th bits; nibbles */
    { GGML_Q2_K, "q2_K", LLM_QK_K, 84 },   /* 16 scale|min bytes; 64 bytes of 2-bit q; d, dmin */
    { GGML_Q3_K, "q3_K", LLM_QK_K, 110 },  /* 32 bytes of 3rd bits; 64 bytes of 2-bit q; 12 bytes of 6-bit scales; d */
    { GGML_Q4_K, "q4_K", LLM_QK_K, 144 },  /* d, dmin; 12 bytes of 6-bit scales and mins; 128 bytes of nibbles */
    { GGML_Q5_K, "q5_K", LLM_QK_K, 176 },  /* as q4_K + 32 bytes of 5th bits before the nibbles */
    { GGML_Q6_K, "q6_K", LLM_QK_K, 210 },  /* 128 bytes of low nibbles; 64 of high 2 bits; 16 int8 scales; d */
    { GGML_IQ4_NL, "iq4_nl", 32, 18 },     /* d; 16 bytes of nibbles indexing iq4_values */
    { GGML_IQ4_XS, "iq4_xs", LLM_QK_K, 136 }, /* d; 2 + 4 bytes of 6-bit sub-block scales; 128 of nibbles */
    { GGML_MXFP4, "mxfp4", 32, 17 },       /* e (E8M0 scale); 16 bytes of FP4 (E2M1) nibbles */
};

static const qtype_info *info(uint32_t t)
{
    for (size_t i = 0; i < sizeof(qtypes) / sizeof(qtypes[0]); i++)
        if (qtypes[i].type == t)
            return &qtypes[i];
    return NULL;
}

int gguf_qtype_converted(uint32_t t) { return info(t) != NULL; }
int gguf_qtype_known(uint32_t t) { return llm_dtype_valid(t) || info(t) != NULL; }

const char *gguf_qtype_name(uint32_t t)
{
    const qtype_info *q = info(t);
    return q ? q->name : llm_dtype_name((llm_dtype)t);
}

size_t gguf_qtype_row_bytes(uint32_t t, uint64_t n)
{
    const qtype_info *q = info(t);
    if (q == NULL)
        return llm_dtype_valid(t) ? llm_dtype_row_bytes((llm_dtype)t, n) : 0;
    return n % q->elems ? 0 : (size_t)(n / q->elems) * q->bytes;
}

static float half_at(const uint8_t *p) { return llm_fp16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Q4_1 / Q5_0 / Q5_1: element j < 16 is the low nibble of qs[j], element
 * j + 16 the high one; Q5's fifth bit of element j is bit j of the 32-bit qh. */
static void block_q4_1(const uint8_t *b, float *y)
{
    float d = half_at(b), m = half_at(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(qs[j] & 0xF) * d + m;
        y[j + 16] = (float)(qs[j] >> 4) * d + m;
    }
}

static uint32_t qh_at(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static void block_q5(const uint8_t *b, float *y, int with_min)
{
    float d = half_at(b), m = with_min ? half_at(b + 2) : 0.0f;
    const uint8_t *p = b + (with_min ? 4 : 2);
    uint32_t qh = qh_at(p);
    const uint8_t *qs = p + 4;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
        int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        if (with_min) {
            y[j] = (float)lo * d + m;
            y[j + 16] = (float)hi * d + m;
        } else {
            y[j] = (float)(lo - 16) * d;
            y[j + 16] = (float)(hi - 16) * d;
        }
    }
}

/* Q2_K: 16 groups of 16, their quants as gguf_q2_K_ints reads them; group g's
 * byte scales[g] holds its scale (low 4 bits) and min (high 4).
 * x = d * scale * q - dmin * min. */
static void block_q2_K(const uint8_t *b, float *y)
{
    uint8_t q[LLM_QK_K];
    gguf_q2_K_ints(b, q);
    float d = half_at(b + 80), dmin = half_at(b + 82);
    for (int i = 0; i < LLM_QK_K; i++) {
        float dl = d * (float)(b[i / 16] & 0xF), ml = dmin * (float)(b[i / 16] >> 4);
        y[i] = dl * (float)q[i] - ml;
    }
}

/* Q3_K: like Q2_K's 2-bit layout, plus a third bit per element in hmask (bit
 * k of byte l for the k-th pass over element l's qs byte); a clear bit
 * subtracts 4. 16 signed 6-bit scales (stored +32): the low 4 bits of scale i
 * are nibble (i / 8) of byte i % 8, its high 2 bits are bits 2*(i / 4) of
 * byte 8 + i % 4. */
static void block_q3_K(const uint8_t *b, float *y)
{
    int8_t v[LLM_QK_K], scale[16];
    gguf_q3_K_ints(b, v, scale);
    float d = half_at(b + 108);
    for (int i = 0; i < LLM_QK_K; i++)
        y[i] = d * (float)scale[i / 16] * (float)v[i];
}

/* Q4_K / Q5_K: 8 groups of 32; each 64 elements read 32 bytes of nibbles,
 * the low nibbles for the first group, the high ones for the second. Q5_K's
 * fifth bit for group g is bit g of qh[l]. x = d * scale * q - dmin * min. */
static void block_q45_K(const uint8_t *b, float *y, int five)
{
    float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t *s = b + 4, *qh = b + 16, *q = b + (five ? 48 : 16);
    for (int g = 0; g < 8; g += 2, q += 32) {
        for (int part = 0; part < 2; part++) {
            int sc, mn;
            scale_min_k4(g + part, s, &sc, &mn);
            float dl = d * (float)sc, ml = dmin * (float)mn;
            for (int l = 0; l < 32; l++) {
                int v = part ? q[l] >> 4 : q[l] & 0xF;
                if (five)
                    v += ((qh[l] >> (g + part)) & 1) << 4;
                *y++ = dl * (float)v - ml;
            }
        }
    }
}

/* Q6_K: per half super-block (128 elements), 64 bytes of ql and 32 of qh:
 * element l + 32k (k = 0..3, l < 32) has low nibble k / 2 of ql[l + 32 (k % 2)]
 * and high 2 bits 2k of qh[l]; value - 32, times d and the int8 scale of its
 * group of 16. */
static void block_q6_K(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = half_at(b + 208);
    for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, y += 128) {
        for (int k = 0; k < 4; k++) {
            for (int l = 0; l < 32; l++) {
                int lo = (ql[l + 32 * (k % 2)] >> (4 * (k / 2))) & 0xF;
                int v = (lo | ((qh[l] >> (2 * k)) & 3) << 4) - 32;
                y[l + 32 * k] = d * (float)sc[l / 16 + 2 * k] * (float)v;
            }
        }
    }
}

/* IQ4_NL / IQ4_XS: a nibble indexes a fixed non-uniform table of 16 int8 levels (denser near zero, where
 * most weights are), times the block's scale; element j < 16 of a 32-block is the low nibble of qs[j],
 * j + 16 the high one. IQ4_XS: 8 sub-blocks of 32 in a super-block, each scale d * (s - 32) with s 6 bits:
 * its low 4 from scales_l (byte ib / 2, nibble ib % 2), its high 2 from the 16-bit scales_h (bits 2 ib). */
static const int8_t iq4_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };
static void block_iq4_32(const uint8_t *qs, float d, float *y)
{
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)iq4_values[qs[j] & 0xF];
        y[j + 16] = d * (float)iq4_values[qs[j] >> 4];
    }
}
static void block_iq4_xs(const uint8_t *b, float *y)
{
    float d = half_at(b);
    unsigned sh = (unsigned)(b[2] | b[3] << 8);
    for (int ib = 0; ib < 8; ib++) {
        int s = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (int)((sh >> (2 * ib)) & 3) << 4;
        block_iq4_32(b + 8 + 16 * ib, d * (float)(s - 32), y + 32 * ib);
    }
}

/* MXFP4 (OCP Microscaling, gpt-oss's experts): a nibble is an FP4 E2M1 number (sign, 2 exponent bits, 1
 * mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6), here doubled to integers as a table, times the block's power of
 * two 2^(e - 127) halved; element j < 16 is the low nibble of qs[j], j + 16 the high one. */
static const int8_t mxfp4_values[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
static void block_mxfp4(const uint8_t *b, float *y)
{
    float d = ldexpf(1.0f, (int)b[0] - 128);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)mxfp4_values[b[1 + j] & 0xF];
        y[j + 16] = d * (float)mxfp4_values[b[1 + j] >> 4];
    }
}

int gguf_mxfp4_row_to_q8_0(const void *src, void *dst, size_t n)
{
    const uint8_t *b = src;
    uint8_t *o = dst;
    for (size_t i = 0; i < n; i += 32, b += 17, o += sizeof(llm_block_q8_0)) {
        if (b[0] < 104 || b[0] > 143) { /* 2^(e - 128) outside fp16's range: rounded through floats */
            float y[32];
            block_mxfp4(b, y);
            llm_row_from_f32(LLM_Q8_0, y, o, 32);
            continue;
        }
        uint16_t d = llm_f32_to_fp16(ldexpf(1.0f, (int)b[0] - 128)); /* exact: a power of two in range */
        o[0] = (uint8_t)d;
        o[1] = (uint8_t)(d >> 8);
        for (int j = 0; j < 16; j++) {
            o[2 + j] = (uint8_t)mxfp4_values[b[1 + j] & 0xF];
            o[2 + j + 16] = (uint8_t)mxfp4_values[b[1 + j] >> 4];
        }
    }
    return 0;
}

int gguf_q4_1_row_to_q8_0(const void *src, void *dst, size_t n)
{
    const uint8_t *b = src;
    uint8_t *o = dst;
    for (size_t i = 0; i < n; i += 32, b += 20, o += sizeof(llm_block_q8_0)) {
        float d = half_at(b), mn = half_at(b + 2);
        float k = d != 0.0f && isfinite(d) && isfinite(mn) ? nearbyintf(mn / d) : NAN;
        if (!(fabsf(mn / d - k) <= 1.0f / 64 && k >= -127.0f && k <= 112.0f)) { /* through floats */
            float y[32];
            block_q4_1(b, y);
            llm_row_from_f32(LLM_Q8_0, y, o, 32);
            continue;
        }
        memcpy(o, b, 2); /* d itself: the values d * (q + k) */
        for (int j = 0; j < 16; j++) {
            o[2 + j] = (uint8_t)(int8_t)((b[4 + j] & 0xF) + (int)k);
            o[2 + j + 16] = (uint8_t)(int8_t)((b[4 + j] >> 4) + (int)k);
        }
    }
    return 0;
}

void gguf_qtype_to_f32(uint32_t t, const void *src, float *dst, size_t n)
{
    const qtype_info *q = info(t);
    if (q == NULL) {
        llm_row_to_f32((llm_dtype)t, src, dst, n);
        return;
    }
    const uint8_t *b = src;
    for (size_t i = 0; i < n; i += q->elems, b += q->bytes, dst += q->elems) {
        switch (t) {
        case GGML_Q4_1: block_q4_1(b, dst); break;
        case GGML_Q5_0: block_q5(b, dst, 0); break;
        case GGML_Q5_1: block_q5(b, dst, 1); break;
        case GGML_Q2_K: block_q2_K(b, dst); break;
        case GGML_Q3_K: block_q3_K(b, dst); break;
        case GGML_Q4_K: block_q45_K(b, dst, 0); break;
        case GGML_Q5_K: block_q45_K(b, dst, 1); break;
        case GGML_Q6_K: block_q6_K(b, dst); break;
        case GGML_IQ4_NL: block_iq4_32(b + 2, half_at(b), dst); break;
        case GGML_IQ4_XS: block_iq4_xs(b, dst); break;
        case GGML_MXFP4: block_mxfp4(b, dst); break;
        }
    }
}

/* ---------- writing Q2_K / Q4_K / Q5_K (gen-model --dtype q2_K / q4_K / q5_K) ---------- */

/* fp16 bits h at p, little-endian (half_at's inverse) */
static void put_half(uint8_t *p, uint16_t h)
{
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
}

/* One least-squares step for a group of n floats v (sum sx, sum of squares sxx) quantised as x ~ sc q - m, q
 * in 0..top: the quants against *sc, *m (rounded half up; clamped), then the scale and min >= 0 that best fit
 * v with those quants into *sc, *m. Returns that fit's squared error (sxx - sc sum(q v) + m sx, the normal
 * equations' residual), or -1 where no fit is possible (all quants alike; *sc, *m kept). */
static float fit_step(const float *v, int n, int top, float sx, float sxx, float *sc, float *m)
{
    float sq = 0.0f, sqq = 0.0f, sqx = 0.0f, is = 1.0f / *sc;
    for (int l = 0; l < n; l++) {
        int q = (int)((v[l] + *m) * is + 0.5f);
        float fq = (float)(q < 0 ? 0 : q > top ? top : q);
        sq += fq;
        sqq += fq * fq;
        sqx += fq * v[l];
    }
    float det = (float)n * sqq - sq * sq;
    if (det <= 0.0f)
        return -1.0f;
    float ns = ((float)n * sqx - sq * sx) / det, nm = -(sqq * sx - sq * sqx) / det;
    if (nm < 0.0f) { /* the K-quants' min is not negative: the best scale with none */
        nm = 0.0f;
        ns = sqq > 0.0f ? sqx / sqq : 0.0f;
    }
    if (!(ns > 0.0f))
        return -1.0f;
    *sc = ns;
    *m = nm;
    return (float)((double)sxx - (double)ns * sqx + (double)nm * sx);
}

/* The scale sc and offset m >= 0 of a group of n floats whose quants q in 0..top fit x ~ sc q - m: the range
 * [min(0, min x), max x] over top steps, refined by three least-squares steps. With cands > 1 (Q2_K: four
 * levels, where an outlier costs the rest of the group much) the range goes over cands step counts evenly
 * from top - 0.5 to top + 0.5 instead, which lets the ends be clipped: each candidate takes one step, the
 * one of least squared error the other two (Q2_K's rounding error: 4 candidates 8.7% below ggml's weighted
 * search on tests/parity/ggml_ref.c's rows, 11 of them 8.9%, one 6.9%). */
static void fit_scale_min(const float *v, int n, int top, int cands, float *sc_out, float *m_out)
{
    float lo = 0.0f, hi = v[0], sx = 0.0f, sxx = 0.0f;
    for (int l = 0; l < n; l++) {
        lo = v[l] < lo ? v[l] : lo;
        hi = v[l] > hi ? v[l] : hi;
        sx += v[l];
        sxx += v[l] * v[l];
    }
    float sc = hi > lo ? (hi - lo) / (float)top : 0.0f, m = -lo;
    if (cands > 1 && sc > 0.0f) {
        float best = INFINITY, bsc = sc, bm = m;
        for (int c = 0; c < cands; c++) {
            float csc = (hi - lo) / ((float)top - 0.5f + (float)c / (float)(cands - 1)), cm = -lo;
            float err = fit_step(v, n, top, sx, sxx, &csc, &cm);
            if (err >= 0.0f && err < best) {
                best = err;
                bsc = csc;
                bm = cm;
            }
        }
        sc = bsc;
        m = bm;
    }
    for (int it = cands > 1 ? 1 : 0; it < 3 && sc > 0.0f; it++)
        if (fit_step(v, n, top, sx, sxx, &sc, &m) < 0.0f)
            break;
    *sc_out = sc;
    *m_out = m;
}

/* Q4_K / Q5_K: per sub-block of 32 fit_scale_min over 15 steps (31 for Q5_K); the super-block's 8 scales and
 * 8 mins as 6-bit multiples of d = max scale / 63 and dmin = max m / 63 (fp16); then each element's nibble
 * against the stored (rounded) scale and min, so the nibbles fit what a reader reconstructs: x ~ d sc q -
 * dmin mn. Not llama.cpp's weighted search over candidate scales (tests/parity/gguf_quants.t measures the
 * rounding error of both). */
static void quantize_block_q45_K(const float *x, uint8_t *b, int five)
{
    const int top = five ? 31 : 15;
    float scale[8], mins[8], max_scale = 0.0f, max_min = 0.0f;
    for (int g = 0; g < 8; g++) {
        fit_scale_min(x + 32 * g, 32, top, 1, &scale[g], &mins[g]);
        max_scale = scale[g] > max_scale ? scale[g] : max_scale;
        max_min = mins[g] > max_min ? mins[g] : max_min;
    }
    uint16_t dh = llm_f32_to_fp16(max_scale / 63.0f), mh = llm_f32_to_fp16(max_min / 63.0f);
    float d = llm_fp16_to_f32(dh), dmin = llm_fp16_to_f32(mh);
    uint8_t sc[8], mn[8];
    for (int g = 0; g < 8; g++) {
        int s = d > 0.0f ? (int)lrintf(scale[g] / d) : 0, m = dmin > 0.0f ? (int)lrintf(mins[g] / dmin) : 0;
        sc[g] = (uint8_t)(s < 0 ? 0 : s > 63 ? 63 : s);
        mn[g] = (uint8_t)(m < 0 ? 0 : m > 63 ? 63 : m);
    }
    memset(b, 0, five ? 176 : 144);
    put_half(b, dh);
    put_half(b + 2, mh);
    uint8_t *s = b + 4; /* scale_min_k4's layout, inverted */
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)((mn[j] & 63) | (mn[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
    /* Q5_K: the fifth bit of element l of sub-block g is bit g of qh[l] (b + 16), the nibbles after them */
    uint8_t *qh = b + 16, *nib = b + (five ? 48 : 16);
    for (int g = 0; g < 8; g++) {
        float es = d * (float)sc[g], em = dmin * (float)mn[g];
        uint8_t *qs = nib + 32 * (g / 2);
        for (int l = 0; l < 32; l++) {
            int q = es > 0.0f ? (int)lrintf((x[32 * g + l] + em) / es) : 0;
            q = q < 0 ? 0 : q > top ? top : q;
            qs[l] |= (uint8_t)(g % 2 ? (q & 15) << 4 : q & 15);
            if (five)
                qh[l] |= (uint8_t)((q >> 4) << g);
        }
    }
}

/* One Q2_K super-block from 256 floats: each group of 16's fit_scale_min over 3 steps (16 candidates), the
 * 16 scales and 16 mins as 4-bit multiples of d = max scale / 15 and dmin = max m / 15 (fp16), then each
 * quant against the stored scale and min, so that x ~ d sc q - dmin mn; the bits in gguf_q2_K_ints' layout. */
static void quantize_block_q2_K(const float *x, uint8_t *b)
{
    float scale[16], mins[16], max_scale = 0.0f, max_min = 0.0f;
    for (int g = 0; g < 16; g++) {
        fit_scale_min(x + 16 * g, 16, 3, 4, &scale[g], &mins[g]);
        max_scale = fmaxf(max_scale, scale[g]);
        max_min = fmaxf(max_min, mins[g]);
    }
    uint16_t dh = llm_f32_to_fp16(max_scale / 15.0f), mh = llm_f32_to_fp16(max_min / 15.0f);
    float d = llm_fp16_to_f32(dh), dmin = llm_fp16_to_f32(mh);
    memset(b, 0, 84);
    for (int g = 0; g < 16; g++) {
        int sc = d > 0.0f ? (int)lrintf(scale[g] / d) : 0, mn = dmin > 0.0f ? (int)lrintf(mins[g] / dmin) : 0;
        sc = sc < 0 ? 0 : sc > 15 ? 15 : sc;
        mn = mn < 0 ? 0 : mn > 15 ? 15 : mn;
        b[g] = (uint8_t)(sc | mn << 4);
        float es = d * (float)sc, em = dmin * (float)mn;
        for (int l = 0; l < 16; l++) {
            int e = 16 * g + l, q = es > 0.0f ? (int)lrintf((x[e] + em) / es) : 0;
            q = q < 0 ? 0 : q > 3 ? 3 : q;
            /* element 128h + 32k + j: 2 bits at 2k of qs[32h + j] (qs at 16) */
            b[16 + 32 * (e / 128) + e % 32] |= (uint8_t)(q << (2 * (e % 128 / 32)));
        }
    }
    put_half(b + 80, dh);
    put_half(b + 82, mh);
}

/* The scale s of a group of 16 whose quants q = round(x / s) in -4..3 fit x best: for candidates that map
 * the largest-magnitude element m to -t (t from 3 to 4.5: the sign of s puts m on the side with 4 steps),
 * the least-squares scale of those quants, sum(x q) / sum(q q), kept where its squared error, sum(x x) -
 * sum(x q)^2 / sum(q q), is the smallest. */
static float q3_group_scale(const float *x)
{
    float m = 0.0f;
    for (int l = 0; l < 16; l++)
        m = fabsf(x[l]) > fabsf(m) ? x[l] : m;
    float best = 0.0f, best_fit = 0.0f; /* the largest sum(x q)^2 / sum(q q): the smallest error */
    for (int k = 0; k <= 15 && m != 0.0f; k++) {
        float is = -(3.0f + 0.1f * (float)k) / m, sxq = 0.0f, sqq = 0.0f;
        for (int l = 0; l < 16; l++) { /* |x is| <= 4.5: rounded half away from zero without a libm call */
            float f = x[l] * is;
            int v = (int)(f + (f < 0.0f ? -0.5f : 0.5f));
            v = v < -4 ? -4 : v > 3 ? 3 : v;
            sxq += x[l] * (float)v;
            sqq += (float)(v * v);
        }
        if (sqq > 0.0f && sxq * sxq / sqq > best_fit) {
            best_fit = sxq * sxq / sqq;
            best = sxq / sqq;
        }
    }
    return best;
}

/* One Q3_K super-block from 256 floats: each group of 16's scale (q3_group_scale) as a 6-bit signed multiple
 * (-32..31) of d (fp16: the largest positive scale / 31 or negative one / 32, whichever is larger), then
 * each quant against the stored scale, so that x ~ d sc q; the bits in gguf_q3_K_ints' layout. */
static void quantize_block_q3_K(const float *x, uint8_t *b)
{
    float s[16], d = 0.0f;
    for (int g = 0; g < 16; g++) {
        s[g] = q3_group_scale(x + 16 * g);
        d = fmaxf(d, s[g] > 0.0f ? s[g] / 31.0f : -s[g] / 32.0f);
    }
    uint16_t dh = llm_f32_to_fp16(d);
    d = llm_fp16_to_f32(dh);
    memset(b, 0, 110);
    uint8_t *hm = b, *qs = b + 32, *sb = b + 96;
    for (int g = 0; g < 16; g++) {
        int sc = d > 0.0f ? (int)lrintf(s[g] / d) : 0;
        sc = sc < -32 ? -32 : sc > 31 ? 31 : sc;
        sb[g % 8] |= (uint8_t)(((sc + 32) & 0xF) << (4 * (g / 8)));
        sb[8 + g % 4] |= (uint8_t)(((sc + 32) >> 4) << (2 * (g / 4)));
        float es = d * (float)sc;
        for (int l = 0; l < 16; l++) {
            int e = 16 * g + l, v = es != 0.0f ? (int)lrintf(x[e] / es) : 0;
            v = v < -4 ? -4 : v > 3 ? 3 : v;
            /* element 128h + 32k + j: 2 bits at 2k of qs[32h + j], its third bit (set: q >= 0) bit 4h + k of
             * hmask[j]; the 2 bits hold q, or q + 4 where that bit is clear */
            int h = e / 128, k = e % 128 / 32, j = e % 32;
            qs[32 * h + j] |= (uint8_t)((v & 3) << (2 * k));
            hm[j] |= (uint8_t)((v >= 0) << (4 * h + k));
        }
    }
    put_half(b + 108, dh);
}


int gguf_kq_written(uint32_t t)
{
    return t == GGML_Q2_K || t == GGML_Q3_K || t == GGML_Q4_K || t == GGML_Q5_K;
}

uint32_t gguf_write_type(uint32_t want, uint64_t ne0)
{
    if (gguf_kq_written(want) && ne0 % LLM_QK_K != 0)
        want = LLM_Q8_0; /* rows narrower than a super-block: the nearest block type */
    return gguf_qtype_row_bytes(want, ne0) != 0 ? want : LLM_F16;
}

void gguf_row_from_f32(uint32_t t, const float *x, void *dst, size_t n)
{
    if (!gguf_kq_written(t)) {
        llm_row_from_f32((llm_dtype)t, x, dst, n);
        return;
    }
    uint8_t *b = dst;
    const size_t bb = gguf_qtype_row_bytes(t, LLM_QK_K);
    for (size_t i = 0; i + LLM_QK_K <= n; i += LLM_QK_K, b += bb) { /* one super-block at a time */
        if (t == GGML_Q2_K)
            quantize_block_q2_K(x + i, b);
        else if (t == GGML_Q3_K)
            quantize_block_q3_K(x + i, b);
        else
            quantize_block_q45_K(x + i, b, t == GGML_Q5_K);
    }
}
