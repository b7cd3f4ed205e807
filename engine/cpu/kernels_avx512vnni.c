/* AVX-512 + VNNI kernel table: the AVX-512 one, with the Q8_0/Q4_0 products
 * of two or more tokens on vpdpbusd (kx_vtile in kernels_x86.h); prefill
 * stays on them instead of widening the weights to floats. */
#define KX_NAME "avx512vnni"
#define KX_VNNI 1
#define KX_INT8_PREFILL 1
#include "cpu/kernels_avx512.h"
#include "cpu/kernels_x86.h"

const cpu_kernels *cpu_kernels_avx512vnni(void)
{
    return &kx_table;
}
