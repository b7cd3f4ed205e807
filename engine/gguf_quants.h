/* GGUF weight types the engine reads but does not compute with: llama.cpp's
 * older Q4_1 / Q5_0 / Q5_1 and the K-quants Q2_K .. Q6_K (the types of the
 * Q4_K_M, Q5_K_M, Q6_K ... files most people download). Their block layouts
 * are ggml's; the loader dequantises each row and re-quantises it to Q8_0
 * (model_gguf.c), so every backend sees only the types in common.h. The
 * exceptions: Q4_K and Q6_K matrices, which the CPU backend packs from their
 * blocks (cpu/repack.c, CPU_PK_Q4_M and CPU_PK_Q6); layer matrices of those
 * types are not converted at all when the loader is told to defer them
 * (LLM_LOAD_DEFER_KQ).
 *
 * Why Q8_0 and not a kernel per type: one conversion at load makes every such
 * file work on the CPU and CUDA backends alike; Q8_0 keeps 8 bits per weight
 * where the source has 2-6, so the re-quantisation adds at most 1/254 of a
 * 32-block's largest weight (a few percent of the source's own step). The
 * cost: memory and bandwidth of Q8_0 (8.5 bits per weight) instead of the
 * file's 2.6-6.6. */
#ifndef LLM_GGUF_QUANTS_H
#define LLM_GGUF_QUANTS_H

#include "common.h"

/* ggml type ids of the read-only types. */
enum {
    GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7,
    GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12, GGML_Q5_K = 13, GGML_Q6_K = 14,
};

#define LLM_QK_K 256 /* elements per K-quant super-block */

/* 1 for a type the loader can read: those of common.h and the ones above. */
int         gguf_qtype_known(uint32_t t);
/* 1 for a read-only type above (converted at load). */
int         gguf_qtype_converted(uint32_t t);
const char *gguf_qtype_name(uint32_t t);           /* "q4_K", ...; "unknown" */
/* Bytes of a row of n elements; 0 if t is unknown or n not a multiple of its block. */
size_t      gguf_qtype_row_bytes(uint32_t t, uint64_t n);
/* Dequantise n elements (a multiple of the block) of any known type. */
void        gguf_qtype_to_f32(uint32_t t, const void *src, float *dst, size_t n);
/* Sub-block g (0..7) of a Q4_K super-block: its elements are scale * q[i] - min
 * (q may be NULL: scale and min only). Its nibbles are the low (g even) or
 * high (g odd) halves of the block's bytes 16 + 32 * (g / 2) .. + 31. */
void        gguf_q4_K_sub(const void *blk, int g, float *scale, float *min, uint8_t q[32]);

#endif
