/* Which kernel table this CPU can run, and the LLM_CPU_ISA override. */
#ifndef LLM_CPU_FEATURES_H
#define LLM_CPU_FEATURES_H

#include "common.h"
#include "cpu/kernels.h"

/* In order of preference: the default is the last one this CPU supports. */
typedef enum { CPU_ISA_GENERIC = 0, CPU_ISA_AVX2 = 1, CPU_ISA_AVX512 = 2, CPU_ISA_AVX2VNNI = 3, CPU_ISA_AVX512VNNI = 4,
               CPU_ISA_AVX512BF16 = 5, CPU_ISA_AVX512AMX = 6, CPU_ISA_COUNT } cpu_isa;

const char *cpu_isa_name(cpu_isa isa);
int  cpu_isa_supported(cpu_isa isa);         /* 1 when this CPU can run it */
const cpu_kernels *cpu_kernels_for(cpu_isa isa);
/* The best supported table, or the one LLM_CPU_ISA names (generic|avx2|avx512|avx2vnni|avx512vnni|avx512bf16|avx512amx);
 * NULL + err when that variable is unknown or names an ISA this CPU lacks. */
const cpu_kernels *cpu_kernels_select(llm_err *err);

#endif
