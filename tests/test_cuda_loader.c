/* The CUDA backend loader on machines without it: clear errors, never a crash.
 * (With a GPU, tests/gpu/run_parity.sh covers the loaded backend.) */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_loader.h"
#include "tap.h"

int main(void)
{
    llm_err err = { { 0 } };

    setenv("LLM_CUDA_LIB", "/nonexistent/libllm_cuda.so", 1);
    ok(llm_cuda_ops_load(&err) == NULL, "a missing library is refused");
    ok(strstr(err.msg, "/nonexistent/libllm_cuda.so") != NULL && strstr(err.msg, "not found") != NULL,
       "the error names the path: %s", err.msg);

    /* A file that is not a shared object: dlopen fails, the message says so. */
    setenv("LLM_CUDA_LIB", "tests/tap.h", 1);
    memset(&err, 0, sizeof(err));
    ok(llm_cuda_ops_load(&err) == NULL, "a file that is not a library is refused");
    ok(strstr(err.msg, "cannot load tests/tap.h") != NULL, "the error names the file: %s", err.msg);

    /* A real library without the entry point: libm, found through one of its functions. */
    Dl_info info;
    double (*volatile cosf_ptr)(double) = cos;
    if (dladdr((void *)cosf_ptr, &info) != 0 && info.dli_fname != NULL && info.dli_fname[0] == '/') {
        setenv("LLM_CUDA_LIB", info.dli_fname, 1);
        memset(&err, 0, sizeof(err));
        ok(llm_cuda_ops_load(&err) == NULL, "a library without the backend's entry point is refused");
        ok(strstr(err.msg, LLM_CUDA_OPS_SYMBOL) != NULL, "the error names the missing symbol: %s", err.msg);
    } else {
        diag("libm's path not found through dladdr; skipping the symbol check");
    }

    unsetenv("LLM_CUDA_LIB");
    return done_testing();
}
