/* The AVX2 float vector macros (8-wide tiles) for kernels_x86.h, shared by
 * the avx2 and avx2vnni tables. */
#ifndef LLM_CPU_KERNELS_AVX2_H
#define LLM_CPU_KERNELS_AVX2_H

#include <immintrin.h>

#define KX_VW 8
#define KX_VF __m256
#ifndef KX_FRM
#define KX_FRM 3
#define KX_FRN 4
#endif
#define KX_ZERO() _mm256_setzero_ps()
#define KX_SET1(a) _mm256_set1_ps(a)
#define KX_LOADF(p) _mm256_loadu_ps(p)
#define KX_STOREF(p, v) _mm256_storeu_ps(p, v)
#define KX_LOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define KX_LOAD_BF16(p) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define KX_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define KX_ADD(a, b) _mm256_add_ps(a, b)
#define KX_HSUM(v) kx_hsum256(v)

#endif
