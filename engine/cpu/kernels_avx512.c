/* AVX-512 kernel table: 16-wide float tiles; the quantised kernels are the
 * AVX2 ones (same source, kernels_x86.h). */

#define KX_NAME "avx512"
#include "cpu/kernels_avx512.h"
#include "cpu/kernels_x86.h"

const cpu_kernels *cpu_kernels_avx512(void)
{
    return &kx_table;
}
