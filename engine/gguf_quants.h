/* GGUF weight types the engine reads but does not compute with: llama.cpp's
 * older Q4_1 / Q5_0 / Q5_1, the K-quants Q2_K .. Q6_K (the types of the
 * Q4_K_M, Q5_K_M, Q6_K ... files most people download) and the two 4-bit
 * i-quants IQ4_NL / IQ4_XS (a non-uniform level table; the other i-quants,
 * with their large lattice codebooks, are refused). Their block layouts
 * are ggml's; the loader dequantises each row and re-quantises it to Q8_0
 * (model_gguf.c), so every backend sees only the types in common.h. The
 * exceptions, whose layer matrices are not converted at all when the loader
 * is told to defer them (LLM_LOAD_DEFER_KQ): Q2_K .. Q6_K, which the CPU
 * backend packs from their blocks (cpu/repack.c, CPU_PK_Q2_M, _Q3, _Q4_M,
 * _Q5_M, _Q6), and all of them on the CUDA backend, which uploads them from
 * their blocks (kernels/cuda_load.cu, kq_types).
 *
 * Why Q8_0 and not a kernel per type: one conversion at load makes every such
 * file work on the CPU and CUDA backends alike; Q8_0 keeps 8 bits per weight
 * where the source has 2-6, so the re-quantisation adds at most 1/254 of a
 * 32-block's largest weight (a few percent of the source's own step). The
 * cost: memory and bandwidth of Q8_0 (8.5 bits per weight) instead of the
 * file's 2.6-6.6, which is why the common types above went native. */
#ifndef LLM_GGUF_QUANTS_H
#define LLM_GGUF_QUANTS_H

#include <string.h>
#include <strings.h>

#include "common.h"

/* ggml type ids of the read-only types. */
enum {
    GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7,
    GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12, GGML_Q5_K = 13, GGML_Q6_K = 14,
    GGML_IQ4_NL = 20, GGML_IQ4_XS = 23, GGML_MXFP4 = 39,
};

#define LLM_QK_K 256 /* elements per K-quant super-block */

/* 1 for a type the loader can read: those of common.h and the ones above. */
int         gguf_qtype_known(uint32_t t);
/* 1 for a read-only type above (converted at load, or with LLM_LOAD_DEFER_KQ (model.h) left to the backend,
 * which may take it from its blocks: the CUDA backend takes them all, kernels/cuda_load.cu's kq_types). */
int         gguf_qtype_converted(uint32_t t);
const char *gguf_qtype_name(uint32_t t);           /* "q4_K", ...; "unknown" */
/* Bytes of a row of n elements; 0 if t is unknown or n not a multiple of its block. */
size_t      gguf_qtype_row_bytes(uint32_t t, uint64_t n);
/* MXFP4 to Q8_0 without rounding where it can: a block's power of two in fp16's range becomes the Q8_0
 * scale and its values (integers up to 12) the quants; the others through floats. n a multiple of 32. */
int         gguf_mxfp4_row_to_q8_0(const void *src, void *dst, size_t n);
/* Q4_1 to Q8_0 keeping each block's scale where its min is a whole number of scales (to 1/64 of one: the min
 * rounded to fp16): the blocks of an integer checkpoint's asymmetric 4-bit weights, scale * (q - zero), which
 * model_hf_intq.c hands the CUDA backend as Q4_1, come back exactly; other blocks through floats. */
int         gguf_q4_1_row_to_q8_0(const void *src, void *dst, size_t n);
/* Dequantise n elements (a multiple of the block) of any known type. */
void        gguf_qtype_to_f32(uint32_t t, const void *src, float *dst, size_t n);
/* 1 for the K-quant types the writers produce: GGML_Q2_K, GGML_Q3_K, GGML_Q4_K, GGML_Q5_K. */
int         gguf_kq_written(uint32_t t);
/* The type a writer gives a matrix with rows of ne0 elements when asked for want (an llm_dtype or a
 * gguf_kq_written type): want where its blocks fit the row, else Q8_0 for K-quant rows, else F16. */
uint32_t    gguf_write_type(uint32_t want, uint64_t ne0);
/* A row of n floats in type t (an llm_dtype or a gguf_kq_written type). */
void        gguf_row_from_f32(uint32_t t, const float *x, void *dst, size_t n);

/* The 8 6-bit (scale, min) pairs of Q4_K / Q5_K in 12 bytes: pairs 0-3 are the
 * low 6 bits of bytes 0-3 / 4-7; pairs 4-7 take their low 4 bits from the
 * nibbles of bytes 8-11 and their high 2 from the top bits of bytes 0-3 / 4-7. */
static inline void scale_min_k4(int j, const uint8_t *s, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
        *mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Sub-block g (0..7) of a Q4_K super-block: its elements are scale * q[i] - min
 * (q may be NULL: scale and min only). Its nibbles are the low (g even) or
 * high (g odd) halves of the block's bytes 16 + 32 * (g / 2) .. + 31. Inline:
 * the CUDA library (its own shared object) repacks Q4_K with it too. */
static inline void gguf_q4_K_sub(const void *blk, int g, float *scale, float *min, uint8_t q[32])
{
    const uint8_t *b = (const uint8_t *)blk, *qs = b + 16 + 32 * (g / 2);
    int sc, mn;
    scale_min_k4(g, b + 4, &sc, &mn);
    *scale = llm_fp16_to_f32((uint16_t)(b[0] | b[1] << 8)) * (float)sc;
    *min = llm_fp16_to_f32((uint16_t)(b[2] | b[3] << 8)) * (float)mn;
    for (int l = 0; q != NULL && l < 32; l++)
        q[l] = (uint8_t)(g % 2 ? qs[l] >> 4 : qs[l] & 0xF);
}

/* 1 when name is one of the comma-separated names in list (letter case aside), or list is NULL: the
 * LLM_CUDA_KQ list of file types the CUDA backend takes from their blocks. Inline for the CUDA library. */
static inline int gguf_type_listed(const char *list, const char *name)
{
    if (list == NULL)
        return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncasecmp(p, name, n) == 0)
            return 1;
        p += len + (e != NULL);
    }
    return 0;
}

/* A Q3_K super-block's 256 quants (-4..3) and 16 scales (-32..31), in element order: scale g is elements
 * 16g .. 16g + 15's. hmask (32 bytes): bit p of byte l is element 32p + l's third bit (clear: subtract 4);
 * qs (64): element 128h + 32k + l's 2 bits at 2k of byte 32h + l; scale g's low 4 bits are nibble g / 8 of
 * byte 96 + g % 8, its high 2 bits 2 (g / 4) of byte 104 + g % 4; fp16 d at 108. */
static inline void gguf_q3_K_ints(const uint8_t *b, int8_t *v, int8_t *scale)
{
    const uint8_t *hm = b, *q = b + 32, *s = b + 96;
    for (int i = 0; i < 16; i++) {
        int lo = (s[i % 8] >> (4 * (i / 8))) & 0xF;
        int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        scale[i] = (int8_t)((lo | hi << 4) - 32);
    }
    int bit = 0;
    for (int half = 0; half < 2; half++, q += 32)
        for (int shift = 0; shift < 8; shift += 2, bit++)
            for (int e = 0; e < 32; e++)
                *v++ = (int8_t)(((q[e] >> shift) & 3) - ((hm[e] >> bit) & 1 ? 0 : 4));
}

/* A Q2_K super-block's 256 quants (0..3) in element order, its qs (32 bytes at 16) laid out as Q3_K's above;
 * byte g of its first 16 holds group g's (elements 16g .. 16g + 15) 4-bit scale (low) and min (high); fp16 d
 * at 80, dmin at 82: an element is d scale q - dmin min. */
static inline void gguf_q2_K_ints(const uint8_t *b, uint8_t *v)
{
    const uint8_t *q = b + 16;
    for (int half = 0; half < 2; half++, q += 32)
        for (int shift = 0; shift < 8; shift += 2)
            for (int e = 0; e < 32; e++)
                *v++ = (uint8_t)((q[e] >> shift) & 3);
}

/* A Q2_K (q2 1) or Q3_K super-block as the backends' formats hold it (CPU_PK_Q2_M / CPU_PK_Q3, cpu/kernels.h;
 * CU_Q2_M / CU_Q3, kernels/cuda_internal.cuh), quants in nibbles with an fp16 (d, m) per group of 16, w = d q - m:
 * q its 256 quants as 0..7 (Q2_K's as they are, Q3_K's signed ones + 4); dm[g] group g's d and m as fp16 bits.
 * Q2_K: d scale and dmin min, each rounded once; Q3_K: d (scale - 32) rounded once and m = 4 times that
 * (exact), so d q - m is exactly that d times the file's quant. Inline for the CUDA library. */
static inline void gguf_q23_K_fold(const uint8_t *sb, int q2, uint8_t *q, uint16_t dm[16][2])
{
    if (q2) {
        gguf_q2_K_ints(sb, q);
        const float d = llm_fp16_to_f32((uint16_t)(sb[80] | sb[81] << 8));
        const float dmin = llm_fp16_to_f32((uint16_t)(sb[82] | sb[83] << 8));
        for (int g = 0; g < 16; g++) {
            dm[g][0] = llm_f32_to_fp16(d * (float)(sb[g] & 0xF));
            dm[g][1] = llm_f32_to_fp16(dmin * (float)(sb[g] >> 4));
        }
        return;
    }
    int8_t v[LLM_QK_K], scale[16];
    gguf_q3_K_ints(sb, v, scale);
    const float d = llm_fp16_to_f32((uint16_t)(sb[108] | sb[109] << 8));
    for (int e = 0; e < LLM_QK_K; e++)
        q[e] = (uint8_t)(v[e] + 4);
    for (int g = 0; g < 16; g++) {
        dm[g][0] = llm_f32_to_fp16(d * (float)scale[g]);
        dm[g][1] = llm_f32_to_fp16(4.0f * llm_fp16_to_f32(dm[g][0]));
    }
}

#endif
