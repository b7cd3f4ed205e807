/* Backend creation by name. The CUDA backend lives in a shared library loaded
 * on first use (backend_cuda_loader.c), so the engine runs without CUDA. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cuda_loader.h"
#include "backend_tp.h"
#include "cpu/kernels.h"
#include "gguf_quants.h"

/* The deferred types a backend uploads from the file's blocks itself (a mask of ggml type ids; 0: none): the
 * CUDA backend takes every one (gguf_qtype_converted; kernels/cuda_load.cu: kq_types), those of them
 * LLM_CUDA_KQ lists when it is set (q8_0: none, Q8_0 copies). */
static uint64_t kept_types(const char *name)
{
    const char *list = getenv("LLM_CUDA_KQ");
    uint64_t keep = 0;
    for (uint32_t t = 0; t < 64 && strcmp(name, "cuda") == 0; t++)
        if (gguf_qtype_converted(t) && gguf_type_listed(list, gguf_qtype_name(t)))
            keep |= (uint64_t)1 << t;
    return keep;
}

int llm_backend_prepare(const char *name, llm_model *m, const llm_backend_opts *o, llm_err *err)
{
    if (name == NULL || m == NULL)
        return 0;
    int cpu = strcmp(name, "cpu") == 0;
    if (cpu && llm_cpu_prepare_model(m, o, err) != 0) /* takes the deferred Q4_K it can */
        return -1;
    uint64_t keep = kept_types(name);
    if (llm_model_has_deferred_except(m, keep)) { /* the rest become Q8_0, then packed in place on the CPU */
        if (llm_model_finish_deferred_except(m, keep, err) != 0 || (cpu && llm_cpu_prepare_model(m, o, err) != 0))
            return -1;
    }
    return 0;
}

void llm_backend_prepare_report(const llm_model *m, void *FILE_stream)
{
    int by[LLM_CPU_PK_KINDS], n = llm_model_cpu_packed(m, by);
    if (n > 0)
        fprintf((FILE *)FILE_stream, "prepare: %d converted matrices packed for the cpu kernels; %d of them q4_K, "
                "kept at 5 bits a weight, %d q5_K at 6, %d q6_K at 7, %d q3_K at 5, %d q2_K at 6, %d mxfp4 at 4.5\n",
                n, by[CPU_PK_Q4_M], by[CPU_PK_Q5_M], by[CPU_PK_Q6], by[CPU_PK_Q3], by[CPU_PK_Q2_M], by[CPU_PK_MX4]);
}

llm_backend *llm_backend_create(const char *name, const llm_model *m, const llm_backend_opts *o, llm_err *err)
{
    if (o != NULL && o->tp_size > 1 && name != NULL && m != NULL) {
        if (strcmp(name, "cuda") != 0) {
            llm_seterr(err, "tensor parallelism (%d ranks) is for the cuda backend", o->tp_size);
            return NULL;
        }
        if (llm_model_has_deferred_except(m, kept_types(name))) {
            llm_seterr(err, "backend: %s was loaded with conversions deferred; llm_backend_prepare it first", m->path);
            return NULL;
        }
        return llm_tp_backend_create(m, o, err);
    }
    return llm_backend_create_single(name, m, o, err);
}

llm_backend *llm_backend_create_single(const char *name, const llm_model *m, const llm_backend_opts *o, llm_err *err)
{
    const llm_backend_ops *ops = NULL;
    if (name == NULL || m == NULL) {
        llm_seterr(err, "backend: no %s given", name == NULL ? "backend name" : "model");
        return NULL;
    }
    if (llm_model_has_deferred_except(m, kept_types(name))) {
        llm_seterr(err, "backend: %s was loaded with conversions deferred; llm_backend_prepare it first", m->path);
        return NULL;
    }
    if (strcmp(name, "cpu") == 0) {
        ops = &llm_cpu_backend_ops;
    } else if (strcmp(name, "cuda") == 0) {
        if (llm_model_cpu_packed(m, NULL)) {
            llm_seterr(err, "backend cuda: this model's converted weights were packed for the cpu backend");
            return NULL;
        }
        ops = llm_cuda_ops_load(err);
        if (ops == NULL)
            return NULL;
    } else {
        llm_seterr(err, "unknown backend \"%s\" (expected \"cpu\" or \"cuda\")", name);
        return NULL;
    }
    llm_backend *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        llm_seterr(err, "backend: out of memory");
        return NULL;
    }
    b->ops = ops;
    b->model = m;
    if (o != NULL)
        b->opts = *o;
    if (ops->init(b, err) != 0) {
        free(b);
        return NULL;
    }
    return b;
}

void llm_backend_free(llm_backend *b)
{
    if (b == NULL)
        return;
    if (b->ops != NULL && b->ops->destroy != NULL)
        b->ops->destroy(b);
    free(b);
}
