/* AVX-512 + VNNI + BF16 + AMX kernel table (Sapphire Rapids and later Xeons):
 * the avx512bf16 one, with BF16 weights multiplied on AMX tiles
 * (gemm_bf16_tiled) where a product's activations can take the tile layout. */
#define KX_NAME "avx512amx"
#define KX_VNNI 1
#define KX_INT8_PREFILL 1
#define KX_BF16 1
#define KX_AMX 1
#include "cpu/kernels_avx512.h"
#include "cpu/kernels_x86.h"

const cpu_kernels *cpu_kernels_avx512amx(void)
{
    return &kx_table;
}
