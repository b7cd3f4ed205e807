/* CPU compute kernels: one function table per instruction set (generic C,
 * AVX2+FMA+F16C, AVX-512), picked at run time by cpu_features.c. */
#ifndef LLM_CPU_KERNELS_H
#define LLM_CPU_KERNELS_H

#include <stddef.h>
#include <math.h>
#include <stdint.h>

#include "common.h"

/* An activation block quantised for the integer dot products against Q8_0 and
 * Q4_0 weights: float scale (no fp16 round trip in the inner loop), plus
 * s = d * sum(qs) (lets Q4_0's -8 offset be applied once per block). */
typedef struct {
    float   d;
    float   s;
    int16_t isum;     /* sum(qs): the packed VNNI kernels take their offset off with it */
    int16_t isum_lo;  /* sum(qs[0..15]): the same for the two halves of CPU_PK_Q6, _Q2_M, _Q3 */
    float   fsum_lo, fsum_hi; /* isum_lo and isum - isum_lo as floats: CPU_PK_Q2_M's mins, as memory operands */
    int8_t  qs[LLM_QK];
} cpu_q8_act; /* 52 bytes */

/* Y[t*ldy + r] = dot(row r of W, activation t)  (accumulate: +=) for r < nr,
 * t < nt. Weight rows are w_stride bytes apart; activations x_stride bytes apart
 * (rows of K floats for F32/F16/BF16 weights, rows of K/32 cpu_q8_act for
 * Q8_0/Q4_0). K is a multiple of 32 for the quantised types. */
typedef void (*cpu_gemm_fn)(int K, const void *W, size_t w_stride, int nr,
                            const void *X, size_t x_stride, int nt,
                            float *Y, size_t ldy, int accumulate);

/* Weights repacked for the VNNI kernels (cpu/repack.c), so that one 32-bit
 * lane of a 512-bit register accumulates a whole block's dot product for one
 * row: rows in groups of CPU_PK_ROWS (16; the last group padded with zero
 * rows); per group, per 32-element block, a header then the quants:
 *   CPU_PK_Q8_0  uint16_t d[16], the rows' fp16 scales (32 bytes); for
 *                k = 0..7 the 16 rows' elements 4k..4k+3 as w + 128
 *                (unsigned bytes; 512 bytes). Q8_0's bytes in another order.
 *   CPU_PK_Q4_0  d[16] as above; for k = 0..3 the 16 rows' bytes
 *                qs[4k..4k+3] (256 bytes; low nibbles are elements 4k..,
 *                high nibbles 16+4k..). Q4_0's bytes in another order.
 *   CPU_PK_Q4_M  d[16] then m[16], fp16 (64 bytes); nibbles q as Q4_0's;
 *                an element is d * q - m. llama.cpp's Q4_K (the bulk of
 *                Q4_K_M files), whose 32-element sub-blocks carry a 6-bit
 *                scale and min under the super-block's d and dmin, at 5 bits
 *                a weight instead of Q8_0's 8.5 (d * scale and dmin * min
 *                rounded to fp16).
 *   CPU_PK_Q6    d0[16] then d1[16], fp16 (64 bytes): the scales of
 *                elements 0..15 and 16..31; the low 4 bits of q as Q4_0's
 *                nibbles (256 bytes); then their high 2 bits, 64 bytes per
 *                two steps: byte 4r+e of vector p holds those of elements
 *                4k+e (bits 0-1) and 16+4k+e (bits 2-3) for k = 2p, and
 *                for k = 2p+1 in bits 4-5 and 6-7 (128 bytes). An element is
 *                d * (q - 32), q in 0..63. llama.cpp's Q6_K (Q6_K files,
 *                and the classifier and some layers of Q4_K_M / Q5_K_M
 *                ones), whose groups of 16 carry an int8 scale under the
 *                super-block's d, at 7 bits a weight instead of 8.5 (d * scale
 *                rounded to fp16).
 *   CPU_PK_Q5_M  Q4_M's header and nibbles (q's low 4 bits), then 64 bytes
 *                of fifth bits: byte 4r+e holds those of elements 4k+e in
 *                bit k and 16+4k+e in bit 4+k, k = 0..3. An element is
 *                d * q - m, q in 0..31. llama.cpp's Q5_K (the bulk of Q5_K_M
 *                files) at 6 bits a weight instead of 8.5.
 *   CPU_PK_Q2_M  d0[16], d1[16], m0[16], m1[16], fp16 (128 bytes): the scales
 *                and mins of elements 0..15 and 16..31; nibbles q as Q4_0's.
 *                An element is d * q - m, q in 0..3. llama.cpp's Q2_K (the
 *                bulk of Q2_K files), whose groups of 16 carry a 4-bit scale
 *                and min, folded as gguf_q23_K_fold does, at 6 bits a weight
 *                instead of 8.5.
 *   CPU_PK_Q3    d0[16] then d1[16], fp16 (64 bytes): the scales of elements
 *                0..15 and 16..31; nibbles q as Q4_0's. An element is
 *                d * (q - 4), q in 0..7. llama.cpp's Q3_K (the bulk of Q3_K_*
 *                files), whose groups of 16 carry a 6-bit scale, folded the
 *                same way, at 5 bits a weight instead of 8.5.
 *   CPU_PK_MX4   d[16], fp16, and nibbles as Q4_0's, but a nibble is an
 *                MXFP4 code (FP4 E2M1: sign, 2 exponent bits, 1 mantissa
 *                bit) whose value doubled, 0, ±1, ±2, ±3, ±4, ±6, ±8, ±12,
 *                the kernels look up (cpu_mx4_values; + 12 as the unsigned
 *                operand, 12 taken off with the activations' sum) times d,
 *                the block's power of two halved (exact in fp16 for every
 *                block of a gpt-oss file: else the matrix becomes Q8_0).
 *                gpt-oss's experts at 4.5 bits a weight instead of 8.5. */
typedef enum { CPU_PK_Q8_0, CPU_PK_Q4_0, CPU_PK_Q4_M, CPU_PK_Q6, CPU_PK_Q5_M, CPU_PK_Q2_M, CPU_PK_Q3,
               CPU_PK_MX4 } cpu_pk_fmt;
/* CPU_PK_MX4's codes as their doubled values plus 12 (the kernels' unsigned operand, 0..24). */
static const uint8_t cpu_mx4_values[16] = { 12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0 };
#define CPU_PK_ROWS 16
static inline size_t cpu_pk_head_bytes(cpu_pk_fmt f)
{
    return f == CPU_PK_Q8_0 || f == CPU_PK_Q4_0 || f == CPU_PK_MX4 ? 32 : f == CPU_PK_Q2_M ? 128 : 64;
}
static inline size_t cpu_pk_block_bytes(cpu_pk_fmt f)
{
    return cpu_pk_head_bytes(f) + (f == CPU_PK_Q8_0 ? 512 : f == CPU_PK_Q6 ? 384 : f == CPU_PK_Q5_M ? 320 : 256);
}
/* The packed format of a stored Q8_0 / Q4_0 matrix. */
static inline cpu_pk_fmt cpu_pk_fmt_of(llm_dtype t) { return t == LLM_Q4_0 ? CPU_PK_Q4_0 : CPU_PK_Q8_0; }

/* Like cpu_gemm_fn over packed weights (activations: cpu_q8_act): P is the
 * group holding row 0 (rows nr of them from there), groups K/32 *
 * cpu_pk_block_bytes(f) bytes apart. */
typedef void (*cpu_gemm_packed_fn)(cpu_pk_fmt f, int K, const void *P, int nr, const void *X, size_t x_stride,
                                   int nt, float *Y, size_t ldy, int accumulate);

typedef struct {
    const char *name;
    cpu_gemm_fn gemm_f32, gemm_f16, gemm_bf16, gemm_q8_0, gemm_q4_0;
    /* Quantise K floats (K a multiple of 32) into K/32 activation blocks. */
    void  (*quantize_act)(const float *x, cpu_q8_act *y, int K);
    float (*dot_f32)(const float *a, const float *b, int n);
    void  (*axpy_f32)(float a, const float *x, float *y, int n); /* y += a*x */
    /* Attention over n cached positions whose vectors (hd floats) are stride
     * floats apart: out[i] = scale * q.k_i;  out += sum_i a[i] * v_i. */
    void  (*attn_scores)(const float *q, const float *k, size_t stride, int n, int hd, float scale, float *out);
    void  (*attn_accum)(const float *a, const float *v, size_t stride, int n, int hd, float *out);
    /* The same over an f16 cache (vectors of hd uint16_t, stride elements apart). */
    void  (*attn_scores_h)(const float *q, const uint16_t *k, size_t stride, int n, int hd, float scale, float *out);
    void  (*attn_accum_h)(const float *a, const uint16_t *v, size_t stride, int n, int hd, float *out);
    /* The four above for nq queries over the same n positions: query j's q[j] / a[j] / out[j], each with the
     * bits the single-query kernel gives it. */
    void  (*attn_scores_mq)(const float *const *q, int nq, const float *k, size_t stride, int n, int hd,
                            float scale, float *const *out);
    void  (*attn_accum_mq)(const float *const *a, int nq, const float *v, size_t stride, int n, int hd,
                           float *const *out);
    void  (*attn_scores_mq_h)(const float *const *q, int nq, const uint16_t *k, size_t stride, int n, int hd,
                              float scale, float *const *out);
    void  (*attn_accum_mq_h)(const float *const *a, int nq, const uint16_t *v, size_t stride, int n, int hd,
                             float *const *out);
    /* Widen nr rows of K elements (rows ws bytes apart) of a Q8_0/Q4_0/F16/BF16
     * matrix into floats, rows K floats apart. */
    void  (*dequant_rows)(llm_dtype t, const void *w, size_t ws, int nr, int K, float *out);
    /* y[i] = x[i] as IEEE half, rounded to nearest even (llm_f32_to_fp16's values; NaN stays NaN): the f16 KV
     * cache's writes */
    void  (*f32_to_f16)(const float *x, uint16_t *y, int n);
    /* x = softmax(x) over n values: exp(x[i] - max) times 1 / their sum */
    void  (*softmax)(float *x, int n);
    /* g[i] = silu(g[i]) * u[i] */
    void  (*swiglu)(float *g, const float *u, int n);
    /* g[i] = gelu_tanh(g[i]) * u[i] (Gemma's GeGLU), computed as x * sigmoid(2y): 0.5 (1 + tanh y) is that */
    void  (*geglu)(float *g, const float *u, int n);
    /* 1: Q8_0/Q4_0 products of many tokens that are not packed (the classifier,
     * converted K-quants, LLM_CPU_REPACK=0) stay on the integer kernels, so a
     * token's bits do not depend on the batch (the VNNI tables); 0: widen
     * from CPU_MM_WIDEN_MIN_TOKENS tokens on. */
    int   int8_prefill;
    /* Products over packed weights (CPU_PK_*), any number of tokens; NULL
     * where the table has none (then matrices stay as stored). */
    cpu_gemm_packed_fn gemm_packed;
    /* 1: gemm_bf16 takes its activations as bf16 (rows of K uint16_t, rounded
     * to nearest even by llm_f32_to_bf16; matmul.c converts them once per
     * product) and runs on bf16 dot products, for any number of tokens;
     * 0: as floats. */
    int   bf16_act;
    /* BF16 weights x bf16 activations on AMX tiles (the avx512amx table; NULL elsewhere): K a multiple of 32,
     * the activations in the tile layout below (cpu_bf16_act_store), the first token at the start of a group;
     * any number of tokens and rows. Every (row, token) pair is one chain over K whatever the batch, as on
     * gemm_bf16, so a token gets the same bits alone or in a batch. */
    cpu_gemm_fn gemm_bf16_tiled;
    /* F16 weights on AMX tiles for products of many tokens (the avx512amx table; NULL elsewhere): each weight
     * is exactly the sum of two bf16 (hi + lo), each activation nearly (16 bits of mantissa: the split tile
     * layout below, cpu_bf16_act_store_split), and hi hi + hi lo + lo hi are summed in fp32: the products of
     * the f16 weights with activations finer than f16's. K a multiple of 32, all nt tokens in one call (the
     * weights are split once per call, into scratch: 2 nr K uint16_t), the first token at a group. */
    void (*gemm_f16_tiled)(int K, const void *W, size_t ws, int nr, const void *X, size_t xs, int nt, float *Y,
                           size_t ldy, int acc, uint16_t *scratch);
    /* A row of a Q8_0 KV cache (LLM_KV_Q8_0), n floats, n a multiple of g: per group of g, d = max |x| / 127
     * and q = x * (1 / d) rounded to nearest even (0 where the group is all zeros); the same bytes in every
     * table. */
    void (*kv_q8_quant)(const float *x, int8_t *q, float *d, int g, int n);
    /* ... and back (attention.c): out[i] = d[i / g] * q[i] (exact: an int8 times a float, rounded once). */
    void (*kv_q8_dequant)(const int8_t *q, const float *d, int g, int n, float *out);
    /* x[i] = gelu(x[i] + b[i]), the exact GELU x Phi(x) (a BERT encoder's FFN), erf by Abramowitz and Stegun's
     * 7.1.26 (absolute error below 1.5e-7) in every table, cpu_gelu_erf1's formula */
    void (*gelu_erf)(float *x, const float *b, int n);
} cpu_kernels;

/* One value of gelu_erf: erf(|z|) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^-z^2, t = 1 / (1 + p |z|). */
static inline float cpu_gelu_erf1(float v)
{
    float z = fabsf(v) * 0.70710678118654752f, t = 1.0f / (1.0f + 0.3275911f * z);
    float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    float e = 1.0f - poly * expf(-z * z);
    return 0.5f * v * (1.0f + (v < 0.0f ? -e : e));
}

/* The tile layout of bf16 activations for gemm_bf16_tiled (AMX's second operand: rows of 16 32-bit pairs):
 * tokens in groups of CPU_BF16_TILE_T, a group K/2 rows of 16 pairs, row p column c holding token 16 g + c's
 * elements 2p (low half) and 2p + 1; a group takes the bytes of 16 rows of K bf16, so token t's group starts
 * where row t would (t a multiple of 16), and a buffer holds whole groups. */
#define CPU_BF16_TILE_T 16
/* The split tile layout: x = hi + lo, hi = x rounded to bf16 and lo = the rest rounded; a group of 16 tokens is
 * its hi values in the tile layout, then its lo values: the bytes of 16 rows of K floats, so token t's group
 * starts where row t of K floats would. */

/* Kernel tables per instruction set; each returns the same static table. */
const cpu_kernels *cpu_kernels_generic(void);
const cpu_kernels *cpu_kernels_avx2(void);
const cpu_kernels *cpu_kernels_avx512(void);
const cpu_kernels *cpu_kernels_avx512vnni(void);
const cpu_kernels *cpu_kernels_avx2vnni(void);
const cpu_kernels *cpu_kernels_avx512bf16(void);
const cpu_kernels *cpu_kernels_avx512amx(void);

/* Activation row x (K floats) of token t as bf16 (llm_f32_to_bf16) into X: at row t (tiled 0) or in the tile
 * layout (tiled 1: K a multiple of 32). */
void cpu_bf16_act_store(int tiled, int K, const float *x, int t, uint16_t *X);
/* The same in the split tile layout (K a multiple of 32). */
void cpu_bf16_act_store_split(int K, const float *x, int t, uint16_t *X);
/* Tile layout (split 0) or split tile layout (1): zero the columns of tokens n .. the end of n - 1's group
 * (what the tiled kernels read past the last token). */
void cpu_bf16_act_pad(int split, int K, int n, uint16_t *X);

/* The gemm for a weight type, NULL for an unknown one. */
cpu_gemm_fn cpu_gemm_for(const cpu_kernels *k, llm_dtype t);
/* Whether activations for weight type t are cpu_q8_act blocks (else floats). */
int cpu_dtype_wants_q8(llm_dtype t);

#endif
