/* AVX2 + FMA + F16C kernel table (8-wide float tiles). */

#define KX_NAME "avx2"
#include "cpu/kernels_avx2.h"
#include "cpu/kernels_x86.h"

const cpu_kernels *cpu_kernels_avx2(void)
{
    return &kx_table;
}
