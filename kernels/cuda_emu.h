/* A CPU emulation of the small part of CUDA the backend uses, for testing the
 * kernels' index math, barriers and host logic where no GPU exists (compiled
 * with g++ -DCU_EMULATE; tests/gpu/emu_parity.sh). Each CUDA thread of a block
 * is a fiber; __syncthreads and warp shuffles are barriers over the block / warp;
 * a block runs warp by warp (each as far as it can go), blocks one after another; "device" memory is host memory
 * and every call completes before it returns. Not used by the real build.
 * Stream capture (CUDA Graphs): between cudaStreamBeginCapture and
 * cudaStreamEndCapture, kernel launches, cudaMemcpyAsync, cudaMemsetAsync and
 * cublasGemmEx on the capturing stream are recorded instead of run (argument
 * values frozen at capture time, memory read when the graph is replayed, as on
 * a GPU); cudaMalloc/Free, host allocation, synchronous copies and memsets and
 * any synchronisation fail with cudaErrorStreamCaptureUnsupported and
 * invalidate the capture, as the real runtime does, so such mistakes show up.
 * Test knobs: CU_EMU_SMS=N sets the reported SM count (default 4); CU_EMU_DEVICES=N the device count
 * (default 1);
 * CU_EMU_CAPTURE_FAIL=1 makes every cudaStreamEndCapture fail (fallback test);
 * CU_EMU_MEM=N[K|M|G] gives the device that capacity (with CU_EMU_MEM_DEVICE=D only device D, in a process that
 * set it; CU_EMU_MEM_FAIL_NTH=K refuses its K-th cudaMalloc): cudaMalloc past it fails and
 * cudaMemGetInfo reports it (tests may also call the exported cu_emu_mem_limit,
 * cu_emu_mem_used, cu_emu_mem_peak, cu_emu_mem_allocs and cu_emu_mem_fail_nth;
 * out-of-memory tests). */
#ifndef LLM_CUDA_EMU_H
#define LLM_CUDA_EMU_H

#include <functional>
#include <initializer_list>
#include <tuple>
#include <type_traits>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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
static inline float4 make_float4(float x, float y, float z, float w)
{
    float4 v;
    v.x = x; v.y = y; v.z = z; v.w = w;
    return v;
}
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
    uint4 v;
    v.x = x; v.y = y; v.z = z; v.w = w;
    return v;
}
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

inline int cu_pdl = 0;       /* LLM_CUDA_PDL: read by the backend, nothing to change here */
inline long cu_launches = 0; /* kernels launched (or captured) so far, for LLM_CUDA_STATS */

void cu_emu_smem_check(const void *kernel, size_t smem); /* aborts: over the kernel's allowance */
/* Every pointer argument of a launch must point into memory cudaMalloc returned (or be NULL): host memory,
 * which the emulated kernels could read, faults on a GPU. A struct argument's pointers are checked by an
 * overload of cu_emu_arg_check next to the struct (found by argument-dependent lookup). */
void cu_emu_check_dev_ptr(const void *p, int arg);
static inline void cu_emu_check_dev_ptrs(std::initializer_list<const void *> ps, int arg)
{
    for (const void *p : ps)
        cu_emu_check_dev_ptr(p, arg);
}
template <typename T> static inline void cu_emu_arg_check(const T &v, int arg)
{
    if constexpr (std::is_pointer<T>::value)
        cu_emu_check_dev_ptr((const void *)v, arg);
}

/* Arguments are converted to the kernel's parameter types and copied when the launch is made, as
 * CUDA does: a captured launch must not read an argument expression (e.g. `*ti` through a pointer to a
 * caller's local) again when the graph replays. */
template <typename... P, typename... A>
static inline void cu_emu_launch_args(cudaStream_t s, dim3 grid, dim3 block, size_t smem, void (*k)(P...),
                                      A &&...args)
{
    cu_launches++;
    cu_emu_smem_check(reinterpret_cast<const void *>(k), smem);
    std::tuple<typename std::decay<P>::type...> frozen(std::forward<A>(args)...);
    std::apply([](const auto &...a) { int i = 0; (cu_emu_arg_check(a, i++), ...); }, frozen);
    cu_emu_launch_on(s, grid, block, smem, [=]() { std::apply(k, frozen); });
}
#define CU_LAUNCH(k, grid, block, smem, stream, ...) \
    cu_emu_launch_args((stream), dim3(grid), dim3(block), (size_t)(smem), k, __VA_ARGS__)
#define CU_DYN_SMEM(name) float *name = cu_emu_dyn_smem()
/* Blocks and launches run one after another here: programmatic dependent launch has nothing to overlap. */
#define CU_PDL_ENTRY() do { } while (0)

/* cp.async (cuda_internal.cuh has the real one). Emulated at its most hostile timing: the destination is
 * poisoned (0xff bytes: NaN in every float type) when the copy is issued, and the data lands only when the
 * issuing thread's CU_CP_WAIT covers its group; so reading a buffer before the wait + __syncthreads, or
 * issuing into a buffer another thread may still read, gives NaN and fails the checks. A thread that
 * exits with copies never waited for aborts the run. */
void cu_emu_cp_async(void *dst, const void *src, int bytes, bool valid);
void cu_emu_cp_commit(void);
void cu_emu_cp_wait(int n);
template <int BYTES> static inline void cu_cp_async(void *dst, const void *src, bool valid)
{
    static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
    cu_emu_cp_async(dst, src, BYTES, valid);
}
/* mma.sync m16n8k16 (f16 in, f32 accumulate) with PTX's per-lane register layout (cuda_internal.cuh):
 * a warp collective; every lane hands in its fragments and takes out its four results, so a kernel that
 * puts an element in the wrong register gets a wrong product here as on a GPU. */
void cu_mma_16816(float *d, const uint32_t *a, const uint32_t *b);
/* ldmatrix.x4 (and .trans) in PTX's layout (cuda_internal.cuh): a warp collective over the lanes' row
 * addresses, which must lie in shared memory and be 16-byte aligned. */
void cu_emu_ldmatrix(uint32_t *r, const void *row, bool trans);
static inline void cu_ldmatrix_x4(uint32_t *r, const void *row) { cu_emu_ldmatrix(r, row, false); }
static inline void cu_ldmatrix_x4_trans(uint32_t *r, const void *row) { cu_emu_ldmatrix(r, row, true); }
#define CU_CP_COMMIT() cu_emu_cp_commit()
#define CU_CP_WAIT(n)  cu_emu_cp_wait(n)

/* ---- device intrinsics ---- */
template <typename T> static inline T __ldg(const T *p) { return *p; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
/* c + the dot product of a's and b's four signed bytes */
static inline int __dp4a(int a, int b, int c)
{
    for (int i = 0; i < 4; i++)
        c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
}
/* byte i of the result: byte (s >> 4i) & 7 of the 8 bytes {y, x} (x the low four), or with bit 3 of that
 * selector nibble set, that byte's sign bit in all 8 bits (PTX prmt's default mode) */
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
    uint64_t v = (uint64_t)y << 32 | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) {
        unsigned sel = (s >> (4 * i)) & 15u, b = (unsigned)(v >> (8 * (sel & 7u))) & 0xffu;
        if (sel & 8u)
            b = (b & 0x80u) ? 0xffu : 0u;
        r |= b << (8 * i);
    }
    return r;
}
static inline __half __ushort_as_half(uint16_t b) { __half h; h.b = b; return h; }
static inline unsigned short __half_as_ushort(__half h) { return h.b; }
float  __half2float(__half h);
__half __float2half_rn(float f);
__nv_bfloat16 __float2bfloat16_rn(float f);
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.b; }

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
cudaError_t cudaEventCreate(cudaEvent_t *e);
/* Host time between the two records (every emulated call completes before it returns). */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
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
/* A kernel may be launched with more than 48 KiB of dynamic shared memory only up to what
 * cudaFuncSetAttribute allowed it (a GPU refuses the launch); the emulation keeps each kernel's allowance
 * and aborts such a launch, which otherwise would show only on a device. */
cudaError_t cu_emu_smem_allow(const void *kernel, int bytes);
template <typename F> static inline cudaError_t cudaFuncSetAttribute(F k, cudaFuncAttribute a, int v)
{
    return a == cudaFuncAttributeMaxDynamicSharedMemorySize ? cu_emu_smem_allow(reinterpret_cast<const void *>(k), v)
                                                            : cudaSuccess;
}

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

/* ---- nvcuda::wmma (the 16x16x16 subset the prefill attention kernel uses) ----
 * On a GPU the 32 lanes of a warp call these together and each holds part of the tile; here every lane
 * (fiber) holds the whole tile and computes the whole product redundantly. Each call is a warp barrier
 * that aborts unless all 32 lanes reach it with the same pointer; pointers must be 32-byte aligned and
 * ldm a multiple of 16 bytes, as CUDA requires. Inputs are stored already rounded to their half/bf16 type
 * (the values the tensor cores see); products and sums are float. Not emulated: the hardware's order of
 * accumulation inside one mma (float sums may differ in the last bits), the per-lane element mapping. */
void cu_emu_warp_collective(const void *p, const char *what);
float cu_emu_bf16_to_float(__nv_bfloat16 b);
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major = 0, mem_col_major = 1 };
template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "emulated wmma: 16x16x16 only");
    enum { num_elements = 256 };
    float x[256]; /* the whole tile, [row][col] */
};
static inline float emu_elem(const __half &h) { return __half2float(h); }
static inline float emu_elem(const __nv_bfloat16 &b) { return cu_emu_bf16_to_float(b); }
static inline float emu_elem(const float &f) { return f; }
static inline float emu_round(float v, const __half *) { return __half2float(__float2half_rn(v)); }
static inline float emu_round(float v, const __nv_bfloat16 *) { return cu_emu_bf16_to_float(__float2bfloat16_rn(v)); }
static inline float emu_round(float v, const float *) { return v; }
static inline void emu_check(const void *p, unsigned ldm, size_t es, const char *what)
{
    cu_emu_warp_collective(p, what);
    if (((uintptr_t)p & 31u) != 0 || (ldm * es) % 16 != 0) {
        fprintf(stderr, "cuda emulation: %s: pointer %p not 32-byte aligned or ldm %u not a multiple of 16 bytes\n",
                what, p, ldm);
        abort();
    }
}
template <typename Use, typename T, typename L>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const T *p, unsigned ldm)
{
    static_assert(!std::is_same<Use, accumulator>::value, "accumulator loads take a layout_t");
    emu_check(p, ldm, sizeof(T), "wmma::load_matrix_sync");
    const bool rm = std::is_same<L, row_major>::value;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.x[r * 16 + c] = emu_elem(rm ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r]);
}
static inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ldm,
                                    layout_t l)
{
    emu_check(p, ldm, 4, "wmma::load_matrix_sync (accumulator)");
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.x[r * 16 + c] = l == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
}
static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm,
                                     layout_t l)
{
    emu_check(p, ldm, 4, "wmma::store_matrix_sync");
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            (l == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r]) = f.x[r * 16 + c];
}
template <typename Use, typename T, typename L>
static inline void fill_fragment(fragment<Use, 16, 16, 16, T, L> &f, float v)
{
    cu_emu_warp_collective(NULL, "wmma::fill_fragment");
    float r = emu_round(v, (const T *)NULL);
    for (int i = 0; i < 256; i++)
        f.x[i] = r;
}
template <typename T, typename LA, typename LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                            const fragment<matrix_b, 16, 16, 16, T, LB> &b,
                            const fragment<accumulator, 16, 16, 16, float> &c)
{
    cu_emu_warp_collective(NULL, "wmma::mma_sync");
    float t[256];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = c.x[i * 16 + j];
            for (int k = 0; k < 16; k++)
                s += a.x[i * 16 + k] * b.x[k * 16 + j];
            t[i * 16 + j] = s;
        }
    memcpy(d.x, t, sizeof t);
}
} // namespace wmma
} // namespace nvcuda

#endif
