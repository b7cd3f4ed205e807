/* dlopen() loader for the CUDA backend: see backend_cuda_loader.h. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend_cuda_loader.h"

typedef const llm_backend_ops *(*ops_fn)(void);
typedef int (*probe_fn)(char *msg, size_t len);

typedef int (*tp_id_fn)(unsigned char *id, int size, char *msg, size_t len);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const llm_backend_ops *loaded;
static tp_id_fn tp_id;

/* <directory of /proc/self/exe>/libllm_cuda.so (a build directory), else <that>/../lib/ngx_llm/libllm_cuda.so
 * where it is there (`make install`); -1 when the link cannot be read. */
static int default_path(char *out, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    if ((size_t)snprintf(out, len, "%s/libllm_cuda.so", exe) >= len)
        return -1;
    char inst[PATH_MAX + 32];
    if (access(out, R_OK) != 0 && (size_t)snprintf(inst, sizeof(inst), "%s/../lib/ngx_llm/libllm_cuda.so", exe) < len &&
        access(inst, R_OK) == 0)
        snprintf(out, len, "%s", inst);
    return 0;
}

static const llm_backend_ops *load_locked(llm_err *err)
{
    char path[PATH_MAX + 32];
    const char *env = getenv("LLM_CUDA_LIB");
    if (env != NULL && env[0] != '\0') {
        snprintf(path, sizeof(path), "%s", env);
    } else if (default_path(path, sizeof(path)) != 0) {
        llm_seterr(err, "backend \"cuda\": cannot locate the running executable (/proc/self/exe) to find "
                   "libllm_cuda.so; set LLM_CUDA_LIB to its path");
        return NULL;
    }
    if (access(path, R_OK) != 0) {
        llm_seterr(err, "backend \"cuda\": %s not found: build it with `make cuda` on a machine with nvcc, "
                   "or set LLM_CUDA_LIB", path);
        return NULL;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        llm_seterr(err, "backend \"cuda\": cannot load %s: %s", path, dlerror());
        return NULL;
    }
    ops_fn get = (ops_fn)dlsym(h, LLM_CUDA_OPS_SYMBOL);
    probe_fn probe = (probe_fn)dlsym(h, LLM_CUDA_PROBE_SYMBOL);
    if (get == NULL || probe == NULL) {
        llm_seterr(err, "backend \"cuda\": %s lacks %s/%s (not a CUDA backend of this version)", path,
                   LLM_CUDA_OPS_SYMBOL, LLM_CUDA_PROBE_SYMBOL);
        dlclose(h);
        return NULL;
    }
    char why[256] = "";
    int n = probe(why, sizeof(why));
    if (n <= 0) {
        llm_seterr(err, "backend \"cuda\": no CUDA device available (%s)", n < 0 ? why : "device count is 0");
        dlclose(h);
        return NULL;
    }
    tp_id = (tp_id_fn)dlsym(h, LLM_CUDA_TP_ID_SYMBOL); /* (a library without it cannot split a model) */
    /* Stays loaded for the life of the process: the ops point into it. */
    return get();
}

const llm_backend_ops *llm_cuda_ops_load(llm_err *err)
{
    pthread_mutex_lock(&lock);
    if (loaded == NULL)
        loaded = load_locked(err);
    const llm_backend_ops *ops = loaded;
    pthread_mutex_unlock(&lock);
    return ops;
}

int llm_cuda_tp_id(unsigned char *id, int size, llm_err *err)
{
    if (llm_cuda_ops_load(err) == NULL)
        return -1;
    if (tp_id == NULL) {
        llm_seterr(err, "backend \"cuda\": this libllm_cuda.so cannot split a model over GPUs (no %s)",
                   LLM_CUDA_TP_ID_SYMBOL);
        return -1;
    }
    char why[256] = "";
    if (tp_id(id, size, why, sizeof(why)) != 0) {
        llm_seterr(err, "tensor parallelism: %s", why);
        return -1;
    }
    return 0;
}
