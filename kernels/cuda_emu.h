/* A CPU emulation of the small part of CUDA the backend uses, for testing the
 * kernels' index math, barriers and host logic where no GPU exists (compiled
 * with g++ -DCU_EMULATE; tests/gpu/emu_parity.sh). Each CUDA thread of a block
 * is a fiber (ucontext); __syncthreads and warp shuffles are barriers over the
 * block / warp; blocks run one after another; "device" memory is host memory
 * and every call completes before it returns. Not used by the real build.
 * Stream capture (CUDA Graphs): between cudaStreamBeginCapture and
 * cudaStreamEndCapture, kernel launches, cudaMemcpyAsync, cudaMemsetAsync and
 * cublasGemmEx on the capturing stream are recorded instead of run (argument
 * values frozen at capture time, memory read when the graph is replayed, as on
 * a GPU); cudaMalloc/Free, host allocation, synchronous copies and memsets and
 * any synchronisation fail with cudaErrorStreamCaptureUnsupported and
 * invalidate the capture, as the real runtime does, so such mistakes show up.
 * Test knobs: CU_EMU_SMS=N sets the reported SM count (default 4);
 * CU_EMU_CAPTURE_FAIL=1 makes every cudaStreamEndCapture fail (fallback test). */
#ifndef LLM_CUDA_EMU_H
#define LLM_CUDA_EMU_H

#include <functional>
#include <tuple>
#include <type_traits>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- types ---- */
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(8) float2 { float x, y; };
static inline float2 make_float2(float x, float y) { float2 v; v.x = x; v.y = y; return v; }
struct __half { uint16_t b; };
struct __nv_bfloat16 { uint16_t b; };

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static  /* blocks run one at a time: a static is shared by the block's fibers */

/* ---- thread indices of the running fiber ---- */
dim3 cu_emu_thread_idx(void);
dim3 cu_emu_block_idx(void);
dim3 cu_emu_block_dim(void);
dim3 cu_emu_grid_dim(void);
#define threadIdx cu_emu_thread_idx()
#define blockIdx  cu_emu_block_idx()
#define blockDim  cu_emu_block_dim()
#define gridDim   cu_emu_grid_dim()

void  __syncthreads(void);
float __shfl_xor_sync(unsigned mask, float v, int lane_mask);
float *cu_emu_dyn_smem(void);
void  cu_emu_launch(dim3 grid, dim3 block, size_t smem, std::function<void()> body);
/* Runs the launch now, or records it when `stream` is being captured. */
typedef struct cu_emu_stream *cudaStream_t;
void  cu_emu_launch_on(cudaStream_t s, dim3 grid, dim3 block, size_t smem, std::function<void()> body);

/* Arguments are converted to the kernel's parameter types and copied when the launch is made, as
 * CUDA does: a captured launch must not read an argument expression (e.g. `*ti` through a pointer to a
 * caller's local) again when the graph replays. */
template <typename... P, typename... A>
static inline void cu_emu_launch_args(cudaStream_t s, dim3 grid, dim3 block, size_t smem, void (*k)(P...),
                                      A &&...args)
{
    std::tuple<typename std::decay<P>::type...> frozen(std::forward<A>(args)...);
    cu_emu_launch_on(s, grid, block, smem, [=]() { std::apply(k, frozen); });
}
#define CU_LAUNCH(k, grid, block, smem, stream, ...) \
    cu_emu_launch_args((stream), dim3(grid), dim3(block), (size_t)(smem), k, __VA_ARGS__)
#define CU_DYN_SMEM(name) float *name = cu_emu_dyn_smem()

/* ---- device intrinsics ---- */
template <typename T> static inline T __ldg(const T *p) { return *p; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline int min(int a, int b) { return a < b ? a : b; }
/* c + the dot product of a's and b's four signed bytes */
static inline int __dp4a(int a, int b, int c)
{
    for (int i = 0; i < 4; i++)
        c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
}
static inline __half __ushort_as_half(uint16_t b) { __half h; h.b = b; return h; }
float  __half2float(__half h);
__half __float2half_rn(float f);
__nv_bfloat16 __float2bfloat16_rn(float f);

/* ---- runtime API ---- */
typedef enum {
    cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
    cudaErrorStreamCaptureUnsupported = 900, cudaErrorStreamCaptureInvalidated = 901
} cudaError_t;
typedef struct cu_emu_graph *cudaGraph_t;
typedef struct cu_emu_graph *cudaGraphExec_t; /* an instantiated graph is a copy of the recording */
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1, cudaStreamCaptureModeRelaxed = 2
};
typedef struct cu_emu_event *cudaEvent_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
#define cudaStreamNonBlocking 1u
#define cudaEventDisableTiming 2u
#define cudaHostAllocDefault 0u
struct cudaDeviceProp {
    char   name[256];
    int    multiProcessorCount;
    size_t sharedMemPerBlockOptin, totalGlobalMem;
};
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaMalloc(void **p, size_t n);
template <typename T> static inline cudaError_t cudaMalloc(T **p, size_t n) { return cudaMalloc((void **)p, n); }
cudaError_t cudaFree(void *p);
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaMemset(void *d, int v, size_t n);
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
template <typename F> static inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }

/* ---- cuBLAS ---- */
typedef struct cu_emu_blas *cublasHandle_t;
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
/* Without a workspace set, a capture that reaches cublasGemmEx fails (cuBLAS would allocate one). */
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t at, int lda, const void *B,
                            cudaDataType_t bt, int ldb, const void *beta, void *C, cudaDataType_t ct, int ldc,
                            cublasComputeType_t comp, cublasGemmAlgo_t algo);

#endif
