/* AVX2 + AVX-VNNI kernel table (cores with VNNI but no AVX-512): the AVX2
 * one, with Q8_0/Q4_0 products over repacked weights on the 256-bit vpdpbusd
 * (kx_ptile8 in kernels_x86.h); prefill stays on integer products. */
#define KX_NAME "avx2vnni"
#define KX_AVXVNNI 1
#define KX_INT8_PREFILL 1
#include "cpu/kernels_avx2.h"
#include "cpu/kernels_x86.h"

const cpu_kernels *cpu_kernels_avx2vnni(void)
{
    return &kx_table;
}
