/* The CUDA emulation's stream capture (kernels/cuda_emu.*) behaves as the
 * runtime does where the backend relies on it: arguments are frozen at capture
 * time, memory is read at replay time, operations replay in order, and an
 * allocation, a synchronisation or a GEMM without a workspace inside a capture
 * fails and invalidates it. Built and run by tests/gpu/emu_parity.sh:
 *   g++ -std=c++17 -DCU_EMULATE -Ikernels tests/gpu/emu_capture.cc kernels/cuda_emu.cc */
#include <stdio.h>

#include "cuda_emu.h"

static int fails;
static void check(bool cond, const char *what)
{
    printf("%s - %s\n", cond ? "ok" : "not ok", what);
    fails += !cond;
}

__global__ void add_kernel(const float *x, float *y, float k, int n)
{
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        y[i] += x[i] * k;
}

int main(void)
{
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *x = NULL, *y = NULL;
    cudaMalloc(&x, 64 * sizeof(float));
    cudaMalloc(&y, 64 * sizeof(float));
    float hx[64], hy[64];
    for (int i = 0; i < 64; i++)
        hx[i] = (float)i;

    /* 1. record: upload x, zero y, y += 2x; nothing runs until the replay. */
    float k = 2.0f;
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
    cudaMemcpyAsync(x, hx, sizeof(hx), cudaMemcpyHostToDevice, s);
    cudaMemsetAsync(y, 0, 64 * sizeof(float), s);
    CU_LAUNCH(add_kernel, 2, 32, 0, s, x, y, k, 64);
    k = 100.0f; /* the launch keeps the value it had when captured */
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    check(cudaStreamEndCapture(s, &g) == cudaSuccess && g != NULL, "end capture gives a graph");
    check(cudaGraphInstantiate(&ge, g, 0) == cudaSuccess, "instantiate");
    cudaMemcpy(hy, y, sizeof(hy), cudaMemcpyDeviceToHost);
    check(hy[5] != hy[5], "nothing ran during capture (y still NaN-poisoned)");
    hx[5] = 50.0f; /* memory is read at replay time */
    check(cudaGraphLaunch(ge, s) == cudaSuccess, "launch");
    cudaMemcpy(hy, y, sizeof(hy), cudaMemcpyDeviceToHost);
    check(hy[5] == 100.0f && hy[7] == 14.0f, "replay: frozen k = 2, x read at replay (y[5] = 2 * 50)");
    cudaGraphLaunch(ge, s);
    cudaMemcpy(hy, y, sizeof(hy), cudaMemcpyDeviceToHost);
    check(hy[7] == 14.0f, "replays again in order (memset before the add)");
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);

    /* 2. illegal calls inside a capture fail and invalidate it. */
    const char *names[3] = { "cudaMalloc", "cudaStreamSynchronize", "cudaMemcpy (synchronous)" };
    for (int c = 0; c < 3; c++) {
        cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
        void *p = NULL;
        cudaError_t e = c == 0 ? cudaMalloc(&p, 16) : c == 1 ? cudaStreamSynchronize(s) : cudaMemcpy(hy, y, 4,
                                                                                                  cudaMemcpyDeviceToHost);
        g = NULL;
        cudaError_t end = cudaStreamEndCapture(s, &g);
        char what[96];
        snprintf(what, sizeof(what), "%s inside a capture fails and invalidates it", names[c]);
        check(e == cudaErrorStreamCaptureUnsupported && end == cudaErrorStreamCaptureInvalidated && g == NULL, what);
        check(cudaGetLastError() != cudaSuccess && cudaGetLastError() == cudaSuccess, "the error is reported once");
    }

    /* 3. cuBLAS inside a capture needs a workspace. */
    cublasHandle_t h;
    cublasCreate(&h);
    cublasSetStream(h, s);
    const float one = 1.0f, zero = 0.0f;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    cublasStatus_t bs = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 8, 8, 8, &one, x, CUDA_R_32F, 8, x, CUDA_R_32F, 8,
                                     &zero, y, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    check(bs != CUBLAS_STATUS_SUCCESS && cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated,
          "cublasGemmEx captured without cublasSetWorkspace fails");
    void *ws = NULL;
    cudaMalloc(&ws, 1 << 20);
    cublasSetWorkspace(h, ws, 1 << 20);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    bs = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 8, 8, 8, &one, x, CUDA_R_32F, 8, x, CUDA_R_32F, 8, &zero, y,
                      CUDA_R_32F, 8, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    check(bs == CUBLAS_STATUS_SUCCESS && cudaStreamEndCapture(s, &g) == cudaSuccess, "with a workspace it records");
    cudaGraphInstantiate(&ge, g, 0);
    cudaGraphLaunch(ge, s);
    cudaMemcpy(hy, y, sizeof(hy), cudaMemcpyDeviceToHost);
    float want = 0.0f; /* y[0] = sum_l x[l] * x[l] over the first column, x as uploaded in part 1 (x[5] = 50) */
    for (int l = 0; l < 8; l++)
        want += hx[l] * hx[l];
    check(hy[0] == want, "the recorded GEMM ran at replay");
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cublasDestroy(h);
    cudaFree(ws);
    cudaFree(x);
    cudaFree(y);
    cudaStreamDestroy(s);
    printf("%s\n", fails == 0 ? "PASS" : "FAIL");
    return fails == 0 ? 0 : 1;
}
