/* AVX-512 + VNNI + BF16 kernel table (Zen 4, Sapphire Rapids and later): the
 * avx512vnni one, with BF16 weights multiplied on vdpbf16ps against
 * activations rounded to bf16 (kernels.h: bf16_act), where the others widen
 * both to floats. */
#define KX_NAME "avx512bf16"
#define KX_VNNI 1
#define KX_INT8_PREFILL 1
#define KX_BF16 1
#include "cpu/kernels_avx512.h"
#include "cpu/kernels_x86.h"

const cpu_kernels *cpu_kernels_avx512bf16(void)
{
    return &kx_table;
}
