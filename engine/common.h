/* Shared basics for the engine: tensor element types (GGUF's own ids and block
 * layouts), half-precision conversions and the error message carrier. */
#ifndef LLM_COMMON_H
#define LLM_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Values are GGUF's ggml_type ids, so a tensor's type field maps 1:1. */
typedef enum {
    LLM_F32  = 0,
    LLM_F16  = 1,
    LLM_Q4_0 = 2,
    LLM_Q8_0 = 8,
    LLM_BF16 = 30,
} llm_dtype;

#define LLM_QK 32 /* elements per Q8_0 / Q4_0 block */

/* GGUF block layouts (identical to ggml's, so files interoperate). */
typedef struct {
    uint16_t d;          /* fp16 scale */
    int8_t   qs[LLM_QK]; /* x = d * qs[i] */
} llm_block_q8_0;        /* 34 bytes */

typedef struct {
    uint16_t d;              /* fp16 scale */
    uint8_t  qs[LLM_QK / 2]; /* low nibbles: elements 0..15, high nibbles: 16..31; x = d * (q - 8) */
} llm_block_q4_0;            /* 18 bytes */

/* Errors travel as a message buffer; functions return NULL / -1 and fill it. */
typedef struct {
    char msg[512];
} llm_err;

void llm_seterr(llm_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A whole file, malloc'd with a NUL after it (*len: its size), or NULL with err (it cannot be opened, read, or
 * is over max bytes). */
char *llm_read_file(const char *path, size_t max, size_t *len, llm_err *err);
/* Grows the array *p of *cap elements of size bytes to hold need (doubling from 16): 0, or -1 (no memory, or
 * need past 2^31 elements) with *p and *cap unchanged. */
int   llm_grow(void **p, uint32_t *cap, uint32_t need, size_t size);

int         llm_dtype_valid(uint32_t t);          /* one of the types above */
const char *llm_dtype_name(llm_dtype t);          /* "f32", "q8_0", ... */
int         llm_dtype_from_name(const char *name, llm_dtype *out); /* 0 ok, -1 unknown */
size_t      llm_dtype_block_elems(llm_dtype t);   /* 1 or 32 */
size_t      llm_dtype_block_bytes(llm_dtype t);   /* 4, 2, 18, 34, 2 */
/* Bytes for a row of n elements; 0 if n is not a multiple of the block size. */
size_t      llm_dtype_row_bytes(llm_dtype t, uint64_t n);

/* IEEE half <-> float, bit-exact, handling subnormals, inf and NaN (inline: the packing at load converts a
 * scale per 16 or 32 weights, where a call per conversion cost a fifth of the time). */
static inline float llm_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do { e++; man <<= 1; } while ((man & 0x400) == 0);
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t llm_f32_to_fp16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf / nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00);
    if (absx < 0x38800000u) { /* below smallest normal half: subnormal or zero */
        if (absx < 0x33000000u)
            return (uint16_t)sign;
        /* half subnormal m * 2^-24: m = man * 2^(e - 126), rounded to nearest even */
        uint32_t e = absx >> 23, man = (absx & 0x7fffff) | 0x800000;
        uint32_t s = 126 - e;
        uint32_t r = man >> s, rem = man & ((1u << s) - 1), half = 1u << (s - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((absx - 0x38000000u) >> 13);
    uint32_t rem = absx & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
        r++;
    return (uint16_t)(sign | r);
}

float    llm_bf16_to_f32(uint16_t h);
uint16_t llm_f32_to_bf16(float f);   /* round to nearest even */

/* Dequantise / convert n elements of a row (n a multiple of the block size). */
void llm_row_to_f32(llm_dtype t, const void *src, float *dst, size_t n);
/* Quantise / convert n floats into type t (reference, scalar). */
void llm_row_from_f32(llm_dtype t, const float *src, void *dst, size_t n);

/* GELU, tanh approximation (Hugging Face's gelu_pytorch_tanh, ggml's gelu): Gemma's FFN activation. */
static inline float llm_gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

#endif
