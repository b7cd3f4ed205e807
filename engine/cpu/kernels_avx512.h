/* The AVX-512 float vector macros (16-wide tiles) for kernels_x86.h, shared by
 * the avx512 and avx512vnni tables. */
#ifndef LLM_CPU_KERNELS_AVX512_H
#define LLM_CPU_KERNELS_AVX512_H

#include <immintrin.h>

#define KX_VW 16
#define KX_VF __m512
#define KX_FRM 4
#define KX_FRN 4
#define KX_ZERO() _mm512_setzero_ps()
#define KX_SET1(a) _mm512_set1_ps(a)
#define KX_LOADF(p) _mm512_loadu_ps(p)
#define KX_STOREF(p, v) _mm512_storeu_ps(p, v)
#define KX_LOAD_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define KX_LOAD_BF16(p) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define KX_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define KX_ADD(a, b) _mm512_add_ps(a, b)
#define KX_HSUM(v) _mm512_reduce_add_ps(v)

#endif
