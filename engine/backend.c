/* Backend creation by name. The CUDA backend lives in a shared library loaded
 * on first use (backend_cuda_loader.c), so the engine runs without CUDA. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cuda_loader.h"

llm_backend *llm_backend_create(const char *name, const llm_model *m, const llm_backend_opts *o, llm_err *err)
{
    const llm_backend_ops *ops = NULL;
    if (name == NULL || m == NULL) {
        llm_seterr(err, "backend: no %s given", name == NULL ? "backend name" : "model");
        return NULL;
    }
    if (strcmp(name, "cpu") == 0) {
        ops = &llm_cpu_backend_ops;
    } else if (strcmp(name, "cuda") == 0) {
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
