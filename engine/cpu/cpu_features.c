/* Runtime ISA detection and kernel table choice. */
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu/cpu_features.h"

static const char *const isa_names[CPU_ISA_COUNT] = { "generic", "avx2", "avx512", "avx2vnni", "avx512vnni",
                                                               "avx512bf16", "avx512amx" };

const char *cpu_isa_name(cpu_isa isa)
{
    return isa >= 0 && isa < CPU_ISA_COUNT ? isa_names[isa] : "?";
}

/* Linux hands out the AMX tile state (8 KiB of registers a thread) only to a process that asks for it
 * (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA), once, for all its threads and children. */
static int amx_permitted(void)
{
    static int permitted = -1;
    if (permitted < 0)
        permitted = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
    return permitted;
}

int cpu_isa_supported(cpu_isa isa)
{
    __builtin_cpu_init();
    switch (isa) {
    case CPU_ISA_GENERIC:
        return 1;
    case CPU_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    case CPU_ISA_AVX512:
        return cpu_isa_supported(CPU_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq");
    case CPU_ISA_AVX2VNNI:
        return cpu_isa_supported(CPU_ISA_AVX2) && __builtin_cpu_supports("avxvnni");
    case CPU_ISA_AVX512VNNI:
        return cpu_isa_supported(CPU_ISA_AVX512) && __builtin_cpu_supports("avx512vnni");
    case CPU_ISA_AVX512BF16:
        return cpu_isa_supported(CPU_ISA_AVX512VNNI) && __builtin_cpu_supports("avx512bf16");
    case CPU_ISA_AVX512AMX:
        return cpu_isa_supported(CPU_ISA_AVX512BF16) && __builtin_cpu_supports("amx-tile") &&
               __builtin_cpu_supports("amx-bf16") && amx_permitted();
    default:
        return 0;
    }
}

const cpu_kernels *cpu_kernels_for(cpu_isa isa)
{
    switch (isa) {
    case CPU_ISA_GENERIC: return cpu_kernels_generic();
    case CPU_ISA_AVX2:    return cpu_kernels_avx2();
    case CPU_ISA_AVX512:  return cpu_kernels_avx512();
    case CPU_ISA_AVX2VNNI: return cpu_kernels_avx2vnni();
    case CPU_ISA_AVX512VNNI: return cpu_kernels_avx512vnni();
    case CPU_ISA_AVX512BF16: return cpu_kernels_avx512bf16();
    case CPU_ISA_AVX512AMX: return cpu_kernels_avx512amx();
    default:              return NULL;
    }
}

const cpu_kernels *cpu_kernels_select(llm_err *err)
{
    const char *env = getenv("LLM_CPU_ISA");
    if (env != NULL && env[0] != '\0') {
        for (int i = 0; i < CPU_ISA_COUNT; i++) {
            if (strcmp(env, isa_names[i]) != 0)
                continue;
            if (!cpu_isa_supported((cpu_isa)i)) {
                llm_seterr(err, "LLM_CPU_ISA=%s, but this CPU does not support %s", env, env);
                return NULL;
            }
            return cpu_kernels_for((cpu_isa)i);
        }
        llm_seterr(err, "LLM_CPU_ISA=%s is not one of generic, avx2, avx512, avx2vnni, avx512vnni, avx512bf16, avx512amx", env);
        return NULL;
    }
    for (int i = CPU_ISA_COUNT - 1; i > 0; i--)
        if (cpu_isa_supported((cpu_isa)i))
            return cpu_kernels_for((cpu_isa)i);
    return cpu_kernels_generic();
}

cpu_gemm_fn cpu_gemm_for(const cpu_kernels *k, llm_dtype t)
{
    switch (t) {
    case LLM_F32:  return k->gemm_f32;
    case LLM_F16:  return k->gemm_f16;
    case LLM_BF16: return k->gemm_bf16;
    case LLM_Q8_0: return k->gemm_q8_0;
    case LLM_Q4_0: return k->gemm_q4_0;
    }
    return NULL;
}

int cpu_dtype_wants_q8(llm_dtype t)
{
    return t == LLM_Q8_0 || t == LLM_Q4_0;
}
