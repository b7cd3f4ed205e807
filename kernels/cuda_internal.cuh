/* Internal declarations of the CUDA backend (kernels/ .cu files): device weight
 * layout, per-step state and the kernel launchers the forward pass calls.
 *
 * Weight layout on the device (repacked at load, see cuda_load.cu):
 *  - F32 / F16 / BF16 matrices: row-major as in the file, rows of `cols`
 *    elements (y = W x is a dot product of x with each row).
 *  - Q8_0: split into `w` = int8 quants, row-major [rows][cols], and
 *    `scales` = fp16 [rows][cols/32]. Q4_0: `w` = packed nibbles,
 *    [rows][cols/2] bytes, each 32-element block's 16 bytes in GGUF order
 *    (low nibbles elements 0..15, high nibbles 16..31), `scales` as Q8_0.
 *    Splitting the 34/18-byte blocks gives 16-byte aligned, coalesced loads.
 *  - Q, K and V of a layer are concatenated into one [q+2kv][dim] matrix and
 *    gate and up into one [2*hidden][dim] matrix when their dtypes agree, so
 *    one launch computes all of them. */
#ifndef LLM_CUDA_INTERNAL_CUH
#define LLM_CUDA_INTERNAL_CUH

#ifdef CU_EMULATE
#include "cuda_emu.h"   /* CPU emulation for testing without a GPU (tests/gpu/emu_parity.sh) */
#else
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <type_traits>
#include <utility>
/* Programmatic dependent launch (LLM_CUDA_PDL=1, Hopper): kernels are launched with the attribute that lets
 * the next kernel in the stream be scheduled before this one has finished, so its blocks fill the SMs the
 * tail of this one leaves idle and its launch latency is hidden. Every kernel starts with CU_PDL_ENTRY:
 * wait until the previous kernel in the stream has finished and its writes are visible (so nothing is read
 * or written early), then allow the next one to launch. Without the attribute both are no-ops. The GEMVs
 * and the tensor-core GEMM start their weight loads (which no kernel writes) before it. */
#define CU_PDL_ENTRY()                                            \
    do {                                                          \
        asm volatile("griddepcontrol.wait;" ::: "memory");        \
        asm volatile("griddepcontrol.launch_dependents;" :::);    \
    } while (0)
/* Asynchronous global -> shared copies (cp.async, sm_80+): BYTES (4, 8 or 16) from src to dst, or zeros when
 * !valid (src is then not read). A thread's copies form a group at CU_CP_COMMIT(); CU_CP_WAIT(n) returns
 * once at most n of its committed groups are still in flight. Another thread sees the data only after its
 * issuer's wait and a __syncthreads(). */
template <int BYTES>
__device__ __forceinline__ void cu_cp_async(void *dst, const void *src, bool valid)
{
    static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    if (BYTES == 16) /* .cg: through L2 only, the weights are read once */
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(valid ? 16 : 0)
                     : "memory");
    else if (BYTES == 8)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(s), "l"(src), "r"(valid ? 8 : 0)
                     : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(s), "l"(src), "r"(valid ? 4 : 0)
                     : "memory");
}
/* d (+)= A B on the tensor cores, one m16n8k16 tile a warp (f16 inputs, f32 accumulators), with PTX's
 * register layout (g = lane / 4, t = lane % 4; each u32 holds two halves, the lower column / k first):
 *   a[0] A[g][2t..2t+1]   a[1] A[g+8][2t..]   a[2] A[g][2t+8..]   a[3] A[g+8][2t+8..]
 *   b[0] B[2t..2t+1][g]   b[1] B[2t+8..2t+9][g]
 *   d[0..1] D[g][2t..2t+1]   d[2..3] D[g+8][2t..2t+1] */
__device__ __forceinline__ void cu_mma_16816(float *d, const uint32_t *a, const uint32_t *b)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
/* ldmatrix.x4 (16-bit elements): lane L gives the shared address of row L & 7 of 8x8 matrix L >> 3 (16 bytes,
 * 16-byte aligned); r[i] gets matrix i's elements (L / 4, 2 (L % 4) .. +1), or with _trans its elements
 * (2 (L % 4) .. +1, L / 4) (the transposed matrix), the lower column / row first: the A / B fragments of
 * cu_mma_16816 straight from row-major tiles. */
__device__ __forceinline__ void cu_ldmatrix_x4(uint32_t *r, const void *row)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s) : "memory");
}
__device__ __forceinline__ void cu_ldmatrix_x4_trans(uint32_t *r, const void *row)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s) : "memory");
}
#define CU_CP_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define CU_CP_WAIT(n)  asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory")
inline int cu_pdl = 0;       /* set once by the backend (cuda_backend.cu) from LLM_CUDA_PDL */
inline long cu_launches = 0; /* kernels launched (or captured) so far, for LLM_CUDA_STATS */
template <typename... P, typename... A>
static inline void cu_launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, A &&...args)
{
    cu_launches++;
    if (!cu_pdl) {
        k<<<grid, block, smem, st>>>(std::forward<A>(args)...);
        return;
    }
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    cudaLaunchKernelEx(&cfg, k, std::forward<A>(args)...);
}
/* Kernel launch written once for both builds (k may be a pointer to a __global__ function). */
#define CU_LAUNCH(k, grid, block, smem, stream, ...) \
    cu_launch((k), dim3(grid), dim3(block), (size_t)(smem), (stream), __VA_ARGS__)
#define CU_DYN_SMEM(name) extern __shared__ __align__(128) float name[] /* wmma needs 32-byte aligned tiles */
#endif
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

extern "C" {
#include "backend.h"
#include "backend_util.h"
}

/* The shared object stands alone (llm-engine does not export libllm's
 * symbols to what it dlopen()s), so it formats its own errors. */
static inline void llm_err_set(llm_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void llm_err_set(llm_err *err, const char *fmt, ...)
{
    if (err == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
}

/* A device-only weight type (GGUF's id for Q4_K, the file type it comes from): 4-bit quants in Q4_0's order
 * [rows][cols/2] and a pair of fp16 (d, m) per 32-block, w = d * q - m: a Q4_K sub-block with its 6-bit scale
 * and min folded into fp16 values, as the CPU backend's Q4_M packing does (5 bits a weight, not Q8_0's 8.5). */
#define CU_Q4_M 12
/* A matrix the model has: data, or (a Q4_K / Q6_K one llm_backend_prepare left for the upload) its blocks. */
static inline int cu_has_mat(const llm_tensor *t) { return t->data != NULL || t->src != NULL; }
/* Another (GGUF's id for Q6_K): 6-bit quants q, w = d (q - 32) with an fp16 d per 16 weights (a Q6_K group's
 * int8 scale folded in, as the CPU's Q6 packing does), 7 bits a weight: the low nibbles in Q4_0's order
 * [rows][cols/2] (byte j of a 32-block: elements j and j + 16, so each nibble half is one group of 16), and in
 * `scales` 6 uint16 a block: d0, d1, then two 32-bit words of the high 2 bits, elements 0-15 and 16-31;
 * element j of a half (j = 4 i + k) at bits 8 k + 2 i and up, so (word >> 2 i) & 0x03030303 puts the high
 * bits of elements 4i .. 4i+3 in bytes 0-3, beside the nibble bytes the int8 and tensor-core paths read. */
#define CU_Q6 14
/* And (GGUF's id for Q5_K) CU_Q4_M with a fifth bit: q = nibble + 16 * bit (0-31), w = d * q - m, 6 bits a
 * weight: the nibbles as CU_Q4_M's, and in `scales` 4 uint16 a block: d, m, then one 32-bit word of the fifth
 * bits (bit i: element i), as the CPU's Q5_M packing folds a Q5_K sub-block. */
#define CU_Q5_M 13
/* And (GGUF's id for IQ4_NL) the 4-bit i-quants, IQ4_NL and IQ4_XS: Q4_0's nibbles and an fp16 d per 32-block
 * (IQ4_XS's 6-bit sub-block scale folded in), w = d * iq4 level(q), the levels a fixed table of 16 int8
 * values (iq4_bytes below); 4.5 bits a weight. */
#define CU_IQ4 20
/* And (GGUF's id for MXFP4) gpt-oss's experts: Q4_0's nibbles holding FP4 E2M1 codes, w = d * level(q), the
 * levels the codes' values doubled (0, ±1, ±2, ±3, ±4, ±6, ±8, ±12: mx4_bytes below) and d the block's power of
 * two halved, exact in fp16 (cuda_load.cu refuses a block past fp16's range); 4.5 bits a weight (the file's
 * 4.25; a Q8_0 copy: 8.5). Every path takes it as CU_IQ4 with its own table (cu_type_lvl). */
#define CU_MX4 39
/* And (GGUF's id for Q2_K) the 2-bit K-quants: q (0-3) in Q4_0's nibbles (each nibble half of a 32-block is one
 * of Q2_K's groups of 16), w = d q - m with an fp16 (d, m) per group: in `scales` 4 uint16 a block, d0, d1, m0,
 * m1, the super-block's d and dmin times the group's 4-bit scale and min, each rounded to fp16 once
 * (gguf_q23_K_fold). 6 bits a weight (Q8_0's copy: 8.5). */
#define CU_Q2_M 10
/* And (GGUF's id for Q3_K) the 3-bit K-quants: q (0-7: the signed quant + 4) in Q4_0's nibbles, w = d (q - 4)
 * with an fp16 d per group of 16: in `scales` 2 uint16 a block, d0, d1, the super-block's d times the group's
 * 6-bit scale - 32, rounded once (gguf_q23_K_fold). 5 bits a weight (Q8_0's copy: 8.5). */
#define CU_Q3 11
/* The block-quantised types (every path takes them: float and int8 GEMVs, tensor-core GEMM, cuBLAS on a
 * dequantised copy); their uint16 scale words per 32-block. */
static inline __host__ __device__ int cu_type_q(int t)
{
    return t == LLM_Q8_0 || t == LLM_Q4_0 || t == CU_Q4_M || t == CU_Q5_M || t == CU_Q6 || t == CU_IQ4 ||
           t == CU_Q2_M || t == CU_Q3 || t == CU_MX4;
}
/* The nibble types whose quants are looked up in a table of 16 int8 levels (w = d * level(q)). */
static inline constexpr __host__ __device__ int cu_type_lvl(int t) { return t == CU_IQ4 || t == CU_MX4; }
static inline constexpr __host__ __device__ int cu_type_nsc(int t)
{
    return t == CU_Q4_M || t == CU_Q3 ? 2 : t == CU_Q5_M || t == CU_Q2_M ? 4 : t == CU_Q6 ? 6 : 1;
}
/* Bits 2i, 2i+1 of element j = 4i + k of a CU_Q6 half's high-bit word h (see above). */
static inline __host__ __device__ int cu_q6_hi(uint32_t h, int j)
{
    return (int)((h >> (8 * (j % 4) + 2 * (j / 4))) & 3u);
}
/* The levels of the 4 bytes of a (each 0-15) in a table of 16 int8 levels held as 4 words (t0 | t1: entries
 * 0-7, t2 | t3: 8-15, little-endian), as 4 int8 bytes: two byte permutes pick from the table's halves by the
 * low 3 bits, bit 3 chooses between them. */
static __device__ __forceinline__ uint32_t lvl_lookup(uint32_t a, uint32_t t0, uint32_t t1, uint32_t t2, uint32_t t3)
{
    const uint32_t t = a & 0x07070707u;
    const uint32_t sel = (t & 0x7u) | ((t >> 4) & 0x70u) | ((t >> 8) & 0x700u) | ((t >> 12) & 0x7000u);
    const uint32_t lo = __byte_perm(t0, t1, sel), hi = __byte_perm(t2, t3, sel);
    const uint32_t m = ((a >> 3) & 0x01010101u) * 0xffu;
    return (hi & m) | (lo & ~m);
}
/* CU_IQ4's levels: -127 -104 -83 -65 | -49 -35 -22 -10 | 1 13 25 38 | 53 69 89 113 */
static __device__ __forceinline__ uint32_t iq4_bytes(uint32_t a)
{
    return lvl_lookup(a, 0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u);
}
/* CU_MX4's levels: 0 1 2 3 | 4 6 8 12 | 0 -1 -2 -3 | -4 -6 -8 -12 */
static __device__ __forceinline__ uint32_t mx4_bytes(uint32_t a)
{
    return lvl_lookup(a, 0x03020100u, 0x0C080604u, 0xFDFEFF00u, 0xF4F8FAFCu);
}
/* A level type's (cu_type_lvl) levels of 4 nibbles at once, and of one. */
template <int T> static __device__ __forceinline__ uint32_t lvl_bytes(uint32_t a)
{
    return T == CU_MX4 ? mx4_bytes(a) : iq4_bytes(a);
}
static __device__ __forceinline__ int lvl_level(int t, int q)
{
    return (int)(int8_t)((t == CU_MX4 ? mx4_bytes((uint32_t)q) : iq4_bytes((uint32_t)q)) & 0xffu);
}

/* f(std::integral_constant<int, T>()) for a matrix of type t: the block types (cu_type_q) in with_qtype, every
 * type a GEMV kernel takes in with_wtype (so a new type is one more case here, not one at every launch). */
template <typename F> static void with_qtype(int t, F f)
{
    switch (t) {
    case LLM_Q8_0: f(std::integral_constant<int, LLM_Q8_0>()); break;
    case CU_Q4_M:  f(std::integral_constant<int, CU_Q4_M>()); break;
    case CU_Q5_M:  f(std::integral_constant<int, CU_Q5_M>()); break;
    case CU_Q6:    f(std::integral_constant<int, CU_Q6>()); break;
    case CU_IQ4:   f(std::integral_constant<int, CU_IQ4>()); break;
    case CU_MX4:   f(std::integral_constant<int, CU_MX4>()); break;
    case CU_Q2_M:  f(std::integral_constant<int, CU_Q2_M>()); break;
    case CU_Q3:    f(std::integral_constant<int, CU_Q3>()); break;
    default:       f(std::integral_constant<int, LLM_Q4_0>()); break;
    }
}
template <typename F> static void with_wtype(int t, F f)
{
    switch (t) {
    case LLM_F32:  f(std::integral_constant<int, LLM_F32>()); break;
    case LLM_F16:  f(std::integral_constant<int, LLM_F16>()); break;
    case LLM_BF16: f(std::integral_constant<int, LLM_BF16>()); break;
    default:       with_qtype(t, f); break;
    }
}

typedef struct {
    int            type;     /* llm_dtype, or a CU_* type above */
    int            rows, cols;
    const void    *w;        /* see the layout above */
    const uint16_t *scales;  /* fp16 bits, block types only: [rows][cols/32][cu_type_nsc] */
    size_t         row_bytes;/* bytes of one row of w */
} cu_mat;

typedef struct {
    int    n;                /* 1, 2 or 3 matrices (fused when 1) */
    cu_mat m[3];
} cu_matset;

typedef struct {
    const float *attn_norm, *ffn_norm;
    /* Optional (NULL when the model has none): Qwen 2's q/k/v biases, Qwen 3's / Gemma 3's per-head q/k norms,
     * Gemma 2 / 3's norms of the attention's and the FFN's outputs before the residual adds */
    const float *bq, *bk, *bv, *q_norm, *k_norm, *post_attn_norm, *post_ffn_norm;
    int       swa;           /* a sliding-window layer (cfg.swa_window; its rope tables: rope_*_swa) */
    int       nope;          /* SmolLM3: q and k not rotated (the rope kernels get no tables) */
    cu_matset qkv;           /* outputs [q | k | v] */
    cu_mat    wo;
    cu_matset gate_up;       /* outputs [gate | up] */
    cu_mat    down;
    /* Mixture of experts (moe: cfg.n_expert > 0 but for dense layers; gate_up and down are then the shared expert
     * (shared = 1), or absent): the router, every expert's gate, up and down on the device ([n_expert][3], for the kernels) and
     * expert 0's here (their types and shapes, which every expert of the layer shares), the shared expert's
     * gate (Qwen 2 MoE's; NULL when it is added ungated, as GraniteMoeShared's) */
    cu_mat        router;
    const cu_mat *experts;
    cu_mat        exp0[3];
    int           shared;
    const float  *shexp_gate;
    const float  *exp_bias;  /* ERNIE 4.5 MoE's bias choosing the experts (llm_layer.exp_probs_b), or NULL */
    /* gpt-oss's (NULL for the others): each query head's attention sink, the router's bias [n_expert] (added to
     * its logits) and the experts' gate / up [n_expert][ff] and down [n_expert][dim] biases; its output
     * projection's bias is bo below */
    const float  *sinks, *router_b, *exp_b[3];
    int           moe;       /* 0: a dense FFN (every layer of a dense model, ERNIE 4.5 MoE's first ones) */
    int           ff;        /* the dense FFN's (or shared expert's) width: llm_layer_ff */
    /* An encoder's (BERT; NULL otherwise): the output projection's, up's and down's biases and those of the
     * LayerNorms after the attention and the FFN (attn_norm, ffn_norm their weights); gate_up is then up alone.
     * A decoder's bo: gpt-oss's output projection's bias. */
    const float  *bo, *b_up, *b_down, *attn_norm_b, *ffn_norm_b;
} cu_layer;

/* ---- kernels (cuda_kernels.cu) ---- */
/* y[t*ldy + r] (+)= sum_k W[r][k] * x[t*ldx + k] for t < n (any n: small n uses
 * the fused-dequant GEMV, larger n cuBLAS; see cuda_matmul). */
typedef struct {
    cublasHandle_t blas;
    cudaStream_t   stream;
    void          *act16;      /* activations converted to bf16/f16 for cuBLAS */
    size_t         act16_bytes;
    void          *deq;        /* dequantised bf16 weights for quantised GEMMs */
    size_t         deq_bytes;
    int            nomem;      /* set when a scratch allocation failed (forward reports LLM_BACKEND_NOMEM) */
    unsigned       gen;        /* bumped whenever act16 or deq moves (captured graphs point at them) */
    int            gemv_max;   /* float weights: at most this many tokens take the GEMV (LLM_CUDA_GEMV_MAX) */
    int            gemv_max_q8, gemv_max_q4; /* Q8_0 / Q4_0 weights: the same (LLM_CUDA_GEMV_MAX_Q sets both) */
    /* LLM_CUDA_GEMV_DP4A=1: Q8_0/Q4_0 GEMVs on int8 activations (dp4a), as the CPU backend computes them */
    int            dp4a;
    int8_t        *xq;         /* [CU_GEMV_MAX_TOKENS][xq_k] quantised activations */
    float         *xds;        /* [CU_GEMV_MAX_TOKENS][xq_k / 32][2]: scale d, d * sum of the block's quants */
    int            xq_k;       /* widest K they hold */
    /* LLM_CUDA_GEMV_SHAPE=RxU: one-token F16/BF16 GEMVs with R rows per warp and U loads in flight per lane
     * (0 = the default kernel); for measuring shapes in the model (cuda_gemv_shape_ok lists them) */
    int            shape_r, shape_u;
    /* Products of more tokens than the GEMV takes, up to this many, on the tensor-core weight-only GEMM
     * (cuda_tcgemm.cu) instead of cuBLAS: tc_max for BF16/F16 weights (default 0: off), tc_max_q for Q8_0/Q4_0
     * (default 64); LLM_CUDA_TC_GEMM=N sets both */
    int            tc_max, tc_max_q;
    /* Fused decode GEMVs (LLM_CUDA_FUSE, default on): RMSNorm + QKV + RoPE/KV write and RMSNorm + gate|up +
     * SwiGLU as one kernel each; with dp4a, every int8 GEMV quantises its activations itself */
    int            fuse;
    int            sms;        /* the device's SM count (the GEMM's K split) */
    float         *tc_part;    /* its partial sums when K is split */
    size_t         tc_part_bytes;
} cu_mm_ctx;

int  cuda_gemv_ok(const cu_mat *W, int ldx);
int  cuda_gemv_shape_ok(int r, int u);
/* The shapes LLM_CUDA_GEMV_SHAPE accepts (R rows per warp, U loads in flight), for both one-token GEMVs. */
#define GEMV_SHAPES(X) X(1, 4) X(1, 8) X(1, 12) X(2, 2) X(2, 4) X(4, 2)
void cuda_gemv(const cu_mat *W, const float *x, int ldx, float *y, int ldy, int n, int accumulate,
               cudaStream_t st);
/* Programmatic dependent launch on or off for every later launch (LLM_CUDA_PDL; cuda_kernels.cu). */
void cuda_set_pdl(int on);
/* Dispatches GEMV vs cuBLAS vs the tensor-core GEMM. x == NULL: the activations are already in c->act16
 * in 16 bits (only where cuda_mm_act16 says so; written by cuda_rmsnorm_act16 / cuda_swiglu_act16).
 * Returns 0, or -1 with msg filled. */
int  cuda_matmul(cu_mm_ctx *c, const cu_mat *W, const float *x, int ldx, float *y, int ldy, int n,
                 int accumulate, char *msg, size_t msg_len);
/* Grows the scratch cuda_matmul would need for n tokens, so that the call itself allocates nothing
 * (required inside a stream capture). 0, or -1 out of device memory. */
int  cuda_matmul_reserve(cu_mm_ctx *c, const cu_mat *W, int n);
/* Frees the scratch above (it grows again on demand), e.g. after the kernel tuner tried paths that need more. */
void cuda_matmul_release(cu_mm_ctx *c);
/* 1 when the product of n tokens with W reads 16-bit activations from c->act16 (cuBLAS or the tensor-core
 * GEMM, 16-bit or quantised weights); then these write them there (RMSNorm / SwiGLU of n rows, in W's
 * 16-bit type), growing the scratch first. 0, or -1 out of device memory (c->nomem set). */
int  cuda_mm_act16(const cu_mm_ctx *c, const cu_mat *W, int n);
int  cuda_rmsnorm_act16(cu_mm_ctx *c, const cu_mat *W, const float *x, int ldx, const float *w, int n, float eps);
int  cuda_swiglu_act16(cu_mm_ctx *c, const cu_mat *W, const float *gu, int ld, int n, int gelu);
/* Tokens one GEMV launch takes at most (larger n on the GEMV path is split). */
#define CU_GEMV_MAX_TOKENS 8
/* cuda_matmul's choice: 1 when n tokens take the GEMV path for W. */
int  cuda_mm_use_gemv(const cu_mm_ctx *c, const cu_mat *W, int n);

/* Fused decode GEMVs (cuda_kernels.cu): RMSNorm of x folded into the product with the fused gate|up matrix
 * and SwiGLU as its epilogue (h [n][ldh]), or into the product with the fused QKV matrix and RoPE + the
 * paged KV-cache write as its epilogue (q rotated into qkv [n][ld]; k, v into the cache). For the n that
 * cuda_matmul would send to the GEMV (cuda_gemv_fused_ok); with dp4a on, Q8_0/Q4_0 weights take the int8
 * variant (x normalised and quantised in shared memory). On c->stream. */
typedef struct cu_tokinfo cu_tokinfo;
typedef struct cu_kv cu_kv;
int  cuda_gemv_fused_ok(const cu_mm_ctx *c, const cu_mat *W, int n, int ldx);
void cuda_gemv_norm_swiglu(const cu_mm_ctx *c, const cu_mat *W, const float *x, int ldx, int n, const float *norm,
                           float eps, float *h, int ldh, int gelu);
void cuda_gemv_norm_qkv_rope(const cu_mm_ctx *c, const cu_mat *W, const float *x, int ldx, int n, const float *norm,
                             float eps, float *qkv, int ld, const cu_tokinfo *ti, const float *cos_t,
                             const float *sin_t, int half, int n_heads, int n_kv_heads, int layout, const cu_kv *kv,
                             int layer, int block_size);

/* ---- tensor-core weight-only GEMM (cuda_tcgemm.cu) ----
 * y[t*ldy + r] (+)= sum_k W[r][k] * xa[t*K + k], xa the activations rounded to 16 bits (bf16, or f16 for F16
 * weights); `part` holds cuda_tcgemm_scratch(W, n, sms) bytes (NULL when that is 0). */
/* Once per process before use: allows the kernel its shared memory (over the default 48 KiB). 0, or -1
 * (the device refuses: then cuda_tcgemm_ok is 0 for every matrix and cuBLAS takes those products). */
int    cuda_tcgemm_prepare(void);
int    cuda_tcgemm_ok(const cu_mat *W);
int    cuda_tcgemm_splits(const cu_mat *W, int n, int sms);
size_t cuda_tcgemm_scratch(const cu_mat *W, int n, int sms);
void   cuda_tcgemm(const cu_mat *W, const void *xa, int n, float *y, int ldy, int accumulate, float *part, int sms,
                   cudaStream_t st);
/* The same over the rows of several matrices (a MoE layer's experts, cuda_moe.cu): expert e's rows
 * off[e] .. off[e+1] of xa (16-bit, rows of W.cols) times mats[3 e + which] into those rows of y, for E
 * experts whose offsets are on the device (the launch does not depend on them: one block per group of 64 of
 * an expert's rows, the grid sized for `rows` = off[E] at most). `host` is expert 0's gate, up, down (the
 * types and shapes every expert shares; cuda_tcgemm_ok must hold for host[which]). No K split. */
typedef struct {
    const cu_mat  *mats;   /* NULL: an ordinary product */
    int            which;
    const int32_t *off;
    int            E;
} cu_tg_group;
void   cuda_tcgemm_grouped(const cu_mat *host, const cu_tg_group *G, const void *xa, int rows, float *y, int ldy,
                           cudaStream_t st);
/* cuda_matmul's choice: 1 when n tokens take the tensor-core GEMM for W. */
int    cuda_mm_use_tc(const cu_mm_ctx *c, const cu_mat *W, int n);

/* Per row of logits [rows][vocab]: ids[r] = argmax as the CPU sampler's greedy (NaN as -inf, +inf as
 * FLT_MAX, ties: lowest id) and lps[r] = its log-softmax. */
void cuda_argmax(const float *logits, int vocab, int rows, int32_t *ids, float *lps, cudaStream_t st);
/* x = row tokens[t] of E, times scale when scale > 0 (Gemma: sqrt(dim)). */
void cuda_embed(const cu_mat *E, const int32_t *tokens, float *x, int n, float scale, cudaStream_t st);
void cuda_rmsnorm(const float *x, int ldx, const float *w, float *y, int ldy, int n, int dim, float eps,
                  const int32_t *rows, cudaStream_t st);
/* As cuda_rmsnorm, a LayerNorm without bias (ModernBERT's norms: llm_config.layer_norm; cuda_encoder.cu). */
void cuda_layer_norm(const float *x, int ldx, const float *w, float *y, int ldy, int n, int dim, float eps,
                     const int32_t *rows, cudaStream_t st);
/* x[t] += y[t] / rms(y[t]) * w for n rows of dim (Gemma 2 / 3's norms after attention and FFN). */
void cuda_rmsnorm_add(const float *y, const float *w, float *x, int n, int dim, float eps, cudaStream_t st);
/* h = silu(gate) * up, or with gelu: gelu_tanh(gate) * up (GeGLU, llm_gelu_tanh). */
void cuda_swiglu(const float *gu, int ld, float *h, int hidden, int n, int gelu, cudaStream_t st);
/* GLU(gate, up) of n rows [gate | up] (row stride ld) into h [n][hidden] in f16 (f16) or bf16. */
void cuda_glu16(const float *gu, int ld, void *h, int hidden, int n, int gelu, int f16, cudaStream_t st);
/* Activations [n][ldx] floats to int8 [n][K] per 32-block as the CPU backend does: quants into xq, (d, d * sum q)
 * float pairs into xds [n][K / 32]. */
void cuda_quant_act(const float *x, int ldx, int K, int n, int8_t *xq, void *xds, cudaStream_t st);
/* Rows of x (row stride ldx; row t is x[rows[t]] where rows is given) to [n][K] bf16 (bf16) or f16. */
void cuda_to_half(const float *x, int ldx, const int32_t *rows, void *out, int K, int n, int bf16, cudaStream_t st);
/* x[i] = cap * tanh(x[i] / cap) when cap > 0 (Gemma 2's final logit soft cap), then x[i] *= mul when mul != 1
 * (Granite's 1 / logit scale), for n rows of `cols` floats, ld apart. */
void cuda_logits_post(float *x, int ld, int cols, int n, float cap, float mul, cudaStream_t st);
/* x[t] += y[t] * s for n rows of dim (Granite's residual scale). */
void cuda_add_scaled(const float *y, float s, float *x, int n, int dim, cudaStream_t st);
/* The KV cache: f32, f16 (kv16) or q8_0 (q8: int8 elements, each group of qg = llm_kv_q8_group(head_dim)
 * elements of a row with a float scale in ks / vs, as the CPU backend's q8_0 cache). */
typedef struct cu_kv_layer { /* K, V (and q8_0's scales): a pool's arrays, or where a layer's share begins */
    void  *k, *v;
    float *ks, *vs;
} cu_kv_layer;
typedef struct cu_kv {
    int    kv16, q8, qg;
    /* The pools' arrays, each its layers' [blocks + 1 (the padding tokens' scratch block)][block_size][kv_dim]
     * one after the other (q8: and their scales, [..][kv_dim / qg]): [0] the main pool (kv_blocks), [1] the
     * window pool (cu_state.swa_blocks > 0: the sliding-window layers', which then have nothing in [0]) */
    cu_kv_layer pool[2];
    cu_kv_layer *at;           /* [n_layers] (host): where layer l's share of its pool begins */
} cu_kv;

static inline const char *cu_kv_name(const cu_kv *kv) { return kv->q8 ? "q8_0" : kv->kv16 ? "f16" : "f32"; }
static inline size_t cu_kv_es(const cu_kv *kv) { return kv->q8 ? 1 : kv->kv16 ? 2 : 4; } /* bytes an element */

/* Layer l's K and V caches (and, for q8_0, their scales). */
static inline cu_kv_layer cu_kv_at(const cu_kv *kv, int l) { return kv->at[l]; }

/* Per-step token description on the device. */
typedef struct cu_tokinfo {
    const int32_t *pos;        /* [n] */
    const int32_t *tab;        /* [n] offset of the token's block table in `tables` */
    const int32_t *tables;     /* concatenated block tables */
    const int32_t *last;       /* [n] or NULL: the last position token t's attention may read when pos[t] lies
                                * past it (cu_step.ti_swa) */
} cu_tokinfo;

#ifdef CU_EMULATE
/* The pointers inside the structs kernels take, checked at launch as pointer arguments are (cuda_emu.h). */
static inline void cu_emu_arg_check(const cu_mat &m, int arg)
{
    cu_emu_check_dev_ptrs({ m.w, m.scales }, arg);
}
static inline void cu_emu_arg_check(const cu_tokinfo &t, int arg)
{
    cu_emu_check_dev_ptrs({ t.pos, t.tab, t.tables, t.last }, arg);
}
#endif

/* y[t][i] += b[i] for n rows of `cols` floats, ld apart (gpt-oss's output projection's and router's biases). */
void cuda_add_bias(float *y, int ld, const float *b, int cols, int n, cudaStream_t st);
/* Before the rope: [q | k | v] += biases (when bq), then each q and k head RMS-normalised with the
 * weights q_norm / k_norm (when q_norm; full: the whole q row and the whole k row, OLMo 2's), n tokens of ld
 * floats. ss (full only; else NULL, parts 1): each token's q and k rows' sums of squares, given, over rows parts
 * times as wide as these (a model split over GPUs: cuda_qk_ssq's, summed over the ranks). */
void cuda_qkv_prep(float *qkv, int ld, int n, const float *bq, const float *bk, const float *bv,
                   const float *q_norm, const float *k_norm, int n_heads, int n_kv_heads, int head_dim, int full,
                   float eps, const float *ss, int parts, cudaStream_t st);
/* ss[2t], ss[2t + 1]: the sums of squares of token t's q row (q_dim) and k row (kv_dim), n tokens of ld. */
void cuda_qk_ssq(const float *qkv, int ld, int n, int q_dim, int kv_dim, float *ss, cudaStream_t st);
void cuda_rope_kv_write(float *qkv, int ld, const cu_tokinfo *ti, int n, const float *cos_t, const float *sin_t,
                        int half, int n_heads, int n_kv_heads, int layout, const cu_kv *kv, int layer,
                        int block_size, cudaStream_t st);

/* ---- mixture of experts (cuda_moe.cu; the steps as engine/cpu/moe.c computes them) ----
 * route: per token of logits [n][E], its k experts of highest logit (ties: the lower index; with bias, of
 *   highest probability + bias) into ids [n][k] and their softmax probabilities (sigmoid: the logits'
 *   sigmoids; renormalised over the k when norm_topk; times scale) into wts [n][k]; with shexp_gate,
 *   sg[t] = sigmoid(xn[t] . shexp_gate). k <= 32, E <= LLM_MAX_EXPERTS.
 * sort: the n*k choices grouped by expert (offsets off[0 .. E]), tokens in order within one: row p of the
 *   groups holds token tok[p], choice i went to row pos[i]; then off[E + 1] = how many experts were chosen and
 *   off[E + 2 ...] their ids (off holds 2 E + 2). Only the experts [lo, hi) (those this device holds: expert
 *   parallelism; else 0, E) get rows: another's choice has pos -1, tok past the last row is 0.
 * gate_up: h[p] = GLU(gate_e . xn[tok[p]], up_e . xn[tok[p]]) for every row p of every expert e ([n*k][ff]).
 * down: o[p] = down_e . h[p] ([n*k][dim]), `rows` = n*k.
 * With q (where cuda_moe_i8_ok(host)): on int8 activations (dp4a), which gate_up / down first quantise into
 *   q's buffers (xq: [n*k][max(dim, ff)] bytes; xds: a (d, d * sum q) float pair per 32 of those).
 * combine: x[t] += sum_j wts[t][j] o[pos[t*k + j]] over pos >= 0 (+ sg[t] sh[t] with a shared expert, sh
 *   [n][dim]; sg NULL: an ungated one, + sh[t]); rs > 0 (Granite's residual scale): x[t] += rs * (that sum).
 * `host` is the layer's exp0, `mats` its experts on the device. */
void cuda_moe_route(const float *logits, const float *bias, int n, int E, int k, int norm_topk, int sigmoid,
                    float scale, const float *xn, int dim, const float *shexp_gate, int32_t *ids, float *wts, float *sg,
                    cudaStream_t st);
void cuda_moe_sort(const int32_t *ids, int n, int k, int E, int lo, int hi, int32_t *off, int32_t *tok,
                   int32_t *pos, cudaStream_t st);
typedef struct { int8_t *xq; void *xds; } cu_moe_i8;
int  cuda_moe_i8_ok(const cu_mat *host);
/* b: the experts' biases (gpt-oss's cu_layer.exp_b: gate, up [E][ff], down [E][dim]), or NULL: none; added to
 * the products before the GLU and to the down projection's rows. */
void cuda_moe_gate_up(const cu_mat *host, const cu_mat *mats, int E, int n, int k, const int32_t *off,
                      const int32_t *tok, const float *xn, int dim, const cu_moe_i8 *q, const float *const *b,
                      float *h, int gelu, cudaStream_t st);
void cuda_moe_down(const cu_mat *host, const cu_mat *mats, int E, int rows, const int32_t *off, const float *h,
                   const cu_moe_i8 *q, const float *const *b, float *o, cudaStream_t st);
/* x += the combination (times rs where rs > 0); set: x = it (times rs where rs > 0), a rank's partial sum */
void cuda_moe_combine(float *x, int n, int dim, int k, const float *o, const int32_t *pos, const float *wts,
                      const float *sh, const float *sg, float rs, int set, cudaStream_t st);
/* gate_up + down on the tensor cores (cuda_tcgemm_grouped) for `rows` (= n*k) rows: xn gathered into x16
 * (16 bits, [rows][dim]), gate|up into gu ([rows][2 ff]), GLU into h16 ([rows][ff]), down into o. Where
 * cuda_moe_tc_ok(host). */
int  cuda_moe_tc_ok(const cu_mat *host);
void cuda_moe_tc(const cu_mat *host, const cu_mat *mats, int E, const int32_t *off, const int32_t *tok, int rows,
                 const float *xn, int dim, void *x16, float *gu, void *h16, float *o, const float *const *b, int gelu,
                 cudaStream_t st);

/* ---- attention (cuda_attention.cu) ---- */
typedef struct {
    int t0, nq;                /* tokens t0 .. t0+nq-1, one sequence */
    int n_pos;                 /* positions 0 .. n_pos-1 are read (max pos + 1) */
} cu_att_item;

typedef struct {
    int   n_heads, n_kv_heads, head_dim, block_size;
    float scale;
    int   q_tile;              /* tokens per item at most */
    int   chunk;               /* positions per split (multiple of 32) */
    int   n_splits;            /* max over items */
    int   n_items;
    int   tc;                  /* 1: attention_tc_kernel (tensor cores; q_tile > 1, head_dim % 16 == 0) */
    int   mma;                 /* with tc: attention_mma_kernel instead (st->att_mma) */
    /* Per layer (cuda_enqueue_step sets them; 0: none): the query at position p sees only p - window + 1 .. p
     * (a sliding-window layer), and scores s (already scaled) become softcap * tanh(s / softcap) */
    int   window;
    float softcap;
    /* ALiBi (jina-bert-v2; NULL: none): head h's score of position p less alibi[h] * |p - qpos[t]|, alibi the
     * heads' slopes on the device (cu_state.alibi), qpos the tokens' own positions (an encoder's mask table
     * holds its input's last) */
    const float *alibi;
    const int32_t *qpos;
    /* gpt-oss's attention sinks (NULL: none): head h's softmax has one more logit, sinks[h] (unscaled), in its
     * sum and no value; applied where the splits are merged (or the one-split decode kernel finishes) */
    const float *sinks;
} cu_att_plan;

/* Largest q_tile whose shared memory fits `smem_max` bytes (0 if none). */
int    cuda_att_q_tile(int group, int head_dim, size_t smem_max);
size_t cuda_att_smem(int q_tile, int group, int head_dim);
/* The tensor-core prefill kernel: enabled unless LLM_CUDA_ATT_TC=0 and for head_dim % 16 == 0; its shared
 * memory; its largest q_tile (>= 2) within `smem_max` and 64 query rows per block, 0 when not usable. */
int    cuda_att_tc_enabled(int head_dim);
/* The mma.sync prefill kernel (attention_mma_kernel): for f16 caches and head_dim 32/64/128; its shared
 * memory; allowing it that much (0, or -1: refused). */
int    cuda_att_mma_ok(int head_dim, int kv16);
size_t cuda_att_mma_smem(int head_dim);
int    cuda_att_mma_prepare(int head_dim);
size_t cuda_att_tc_smem(int q_tile, int group, int head_dim);
int    cuda_att_tc_q_tile(int group, int head_dim, size_t smem_max);
/* Partial-result floats needed for n tokens. */
size_t cuda_att_ws_floats(const cu_att_plan *p, int n_tokens);
int    cuda_att_prepare(size_t smem_max);   /* raise the dynamic shared-memory limit; 0 ok */
void   cuda_attention(const cu_att_plan *p, const cu_att_item *items, const float *qkv, int ld,
                      const cu_tokinfo *ti, const cu_kv *kv, int layer, float *ws, float *out, int n_tokens,
                      cudaStream_t st);

/* ---- decode-step CUDA graphs (cuda_graph.cu) ---- */
#define CU_GRAPH_BUCKETS 9         /* batch sizes 1, 2, 4, ..., 256 */
#define CU_GRAPH_CLASSES 26        /* attention split classes: max position <= 64 << class */
#define CU_MAX_STAGES 16           /* named stages of a step, for LLM_CUDA_SYNC timing */
#define CU_MAX_EVENTS 1024         /* stage events of one step (LLM_CUDA_EVENTS): 9 a layer + 3 */
typedef struct {
    cudaGraphExec_t exec;
    unsigned        gen;           /* buffer generation it was captured against */
} cu_graph;
typedef struct {
    int      enabled;              /* 0: LLM_CUDA_GRAPHS=0, LLM_CUDA_SYNC=1, or a capture failed */
    int      stats;                /* LLM_CUDA_STATS=1: counters to stderr at destroy */
    cu_graph g[CU_GRAPH_BUCKETS][CU_GRAPH_CLASSES];
    long     captures, replays, eager_steps, bucket_replays[CU_GRAPH_BUCKETS];
    long     argmax_steps;         /* steps that returned on-device greedy ids (forward_device) */
} cu_graphs;

/* ---- kernel tuning (cuda_tune.cu) ----
 * The product-path switches of cu_mm_ctx and the fusion switch, as one value: what LLM_CUDA_GEMV_MAX /
 * _GEMV_MAX_Q / _GEMV_DP4A / _GEMV_SHAPE / _TC_GEMM / _FUSE set at init, and what the tuner picks per
 * batch-size bucket. */
typedef struct {
    int gemv_max, gemv_max_q8, gemv_max_q4, dp4a, shape_r, shape_u, tc_max, tc_max_q, fuse;
} cu_knobs;
typedef struct {
    int      on;                   /* the tuner ran (or its file was read): knobs per bucket below */
    cu_knobs k[CU_GRAPH_BUCKETS];  /* per bucket; buckets it did not reach keep the defaults */
    cu_knobs def;                  /* the defaults (environment or built-in) */
    double   seconds;              /* time init spent tuning */
} cu_tune;

/* ---- sampling on the device (cuda_sample.cu) ---- */
/* Buffers of the LLM_ROW_SAMPLE rows of a step, grown before any launch. Device and pinned host memory have
 * the same layout: rows [cap] | pen pairs [pen_cap] (uploaded), then ids [cap] | logprobs [cap] |
 * n_top [cap] | top [cap][LLM_SAMPLING_MAX_LOGPROBS] (downloaded). */
typedef struct {
    char  *dev, *host;
    int    cap, pen_cap;
    long   rows;                 /* rows sampled on the device so far (LLM_CUDA_STATS) */
} cu_sampler;

/* Per sampled row (grid = n): the whole llm_sampler_sample call of engine/sampler.c on its logits row.
 * threads: per row, 256 or 1024 (0 = 1024 for up to 64 rows, else 256). */
void cuda_sample(float *logits, int vocab, int n, const llm_sampling_row *rows, const int32_t *pen, int32_t *ids,
                 float *lps, llm_token_logprob *top, int32_t *n_top, int threads, cudaStream_t st);

/* ---- backend state (cuda_backend.cu, cuda_load.cu) ---- */
typedef struct {
    const llm_model *m;
    int    device;
    int    q_dim, kv_dim, qkv_ld, gu_ld, block_size, kv_blocks;
    cudaStream_t stream;
    cu_mm_ctx    mm;
    /* weights */
    cu_mat  tok_embd, output;
    const float *out_norm;           /* (NULL for an encoder) */
    cu_mat  pos_embd, type_embd;     /* an encoder's learned positions and token types, its embedding's LayerNorm */
    const float *embd_norm, *embd_norm_b;
    cu_layer *layers;
    float  *rope_cos, *rope_sin;     /* [seq_len][head_dim/2] */
    float  *rope_cos_swa, *rope_sin_swa; /* the sliding-window layers' (cfg.rope_theta_swa), else the above */
    float  *alibi;                   /* ALiBi's slope per head (llm_alibi_slope; jina-bert-v2), else NULL */
    void  **allocs; int n_allocs, cap_allocs;  /* every weight allocation, freed at destroy */
    size_t  weight_bytes;
    cu_kv   kv;
    int     kv_scratch;              /* one KV block past the pool: padding tokens of graph steps write here */
    int     swa_blocks;              /* the window pool's blocks (llm_backend_opts.swa_blocks; 0: none); its
                                      * scratch block is the one past them, block swa_blocks */
    void   *blas_ws;                 /* cuBLAS workspace, fixed so GEMMs can be captured */
    /* attention */
    int     q_tile_max, n_sms;
    int     att_tc;                  /* steps with q_tile > 1 use the tensor-core kernel (q_tile_max sized for it) */
    int     att_mma;                 /* ... the mma.sync one (LLM_CUDA_ATT_TC=2, or the tuner's choice) */
    int     att_mma_tune;            /* the tuner may choose (f16 KV, a head_dim it takes, LLM_CUDA_ATT_TC unset) */
    size_t  smem_max;
    /* per-step scratch, grown to the largest batch seen */
    int     cap;
    float  *x, *xn, *qkv, *att, *gu, *h, *logits;
    /* ... and a mixture of experts' (cuda_moe_*): router logits [cap][E], choice weights [cap][k], shared
     * gates [cap], hidden [cap*k][expert_ff], expert outputs [cap*k][dim], shared expert's [cap][dim] in
     * moe_f (each 64-float aligned); ids, pos, tok [cap*k] and off [2E+2] in moe_i */
    float  *moe_f, *moe_rl, *moe_w, *moe_sg, *moe_h, *moe_o, *moe_sh;
    int32_t *moe_i, *moe_ids, *moe_pos, *moe_tok, *moe_off;
    /* ... the tensor-core path's: gate|up [cap*k][2 expert_ff], 16-bit activations [cap*k][dim] and hidden
     * [cap*k][expert_ff]; it takes steps of at least moe_tc tokens (LLM_CUDA_MOE_TC; default: 8 rows an
     * expert on average, n * k >= 8 E; 0: never) */
    float  *moe_gu;
    void   *moe_x16, *moe_h16;
    /* the int8 copies of the experts' activations when dp4a is on (cu_moe_i8; carved from moe_f) */
    cu_moe_i8 moe_q;
    int     moe_tc;
    float  *ws; size_t ws_floats;
    int32_t *dint; size_t dint_cap;  /* per-step ints on the device */
    int32_t *hint; size_t hint_cap;  /* their pinned host copy */
    int     logits_cap;              /* rows st->logits holds (and am_ids / am_lp) */
    int32_t *am_ids; float *am_lp;   /* on-device greedy per logits row */
    unsigned buf_gen;                /* bumped whenever a per-step buffer above moves */
    int     debug_sync;              /* LLM_CUDA_SYNC=1 */
    /* LLM_CUDA_SYNC=1 with LLM_CUDA_STATS=1: wall time per stage (synchronised), printed at destroy */
    int     stage_timing;
    /* ... kept apart for decode steps (every item one token) [0] and prefill / mixed steps [1], so that a
     * benchmark's prompt prefills do not blur its decode figures */
    double  stage_ms[2][CU_MAX_STAGES];
    const char *stage_name[CU_MAX_STAGES];
    long    stage_steps[2];
    /* LLM_CUDA_STATS: launches one decode step enqueued (cuBLAS calls counted as one), at 1 token and at the
     * most tokens seen */
    long    launches_b1, launches_bn;
    int     bn;
    int     stage_kind;
    /* LLM_CUDA_EVENTS=1: the same table from CUDA events recorded after each stage, no synchronisation in
     * between (graphs off): GPU time per stage with the kernels queued back to back, launch gaps included
     * where the host fell behind. Events of the step in flight and the stage each one ends. */
    int     stage_events;
    cudaEvent_t ev[CU_MAX_EVENTS];
    const char *ev_stage[CU_MAX_EVENTS];
    int     n_ev;
    double  stage_t;                 /* when the last stage ended (ms, CLOCK_MONOTONIC) */
    cu_graphs graphs;
    cu_sampler samp;
    cu_tune tune;
    /* Tensor parallelism (cuda_tp.cu): this rank of size (1: the model whole on this device); the
     * communicator, a device int for the agreement, and this forward call's agreement (0: not yet; 1: every
     * rank takes the step; 2: refused). */
    struct {
        int   rank, size, agreed;
        void *comm;
        int32_t *flag;
    } tp;
} cu_state;

/* ---- tensor parallelism (cuda_tp.cu) ---- */
/* Joins the ranks' communicator named by o->tp_id (o->tp_size > 1; else nothing). 0, or -1 + err. */
int  cuda_tp_init(cu_state *st, const llm_backend_opts *o, llm_err *err);
void cuda_tp_free(cu_state *st);
/* recv[0 .. n) = send[0 .. n) summed over the ranks (in place where send is recv; each rank's own choice),
 * enqueued on st->stream (captured by a graph like a kernel). */
void cuda_tp_allreduce(cu_state *st, const float *send, float *recv, size_t n);
/* Once per forward call, before its first launch (and at its end where it failed before that): the minimum
 * of every rank's ok, blocking; later calls in the same forward return ok. One rank (1) always agrees. */
int  cuda_tp_agree(cu_state *st, int ok);

/* Whether layer L keeps its KV in the window pool, read and written through the window tables (cu_step.ti_win). */
static inline int cu_in_window_pool(const cu_state *st, const cu_layer *L) { return st->swa_blocks > 0 && L->swa; }

/* One step as the kernels see it: every pointer is device memory uploaded before the launches. */
typedef struct {
    int n;                           /* tokens processed (the bucket size in a graph step) */
    int nw;                          /* rows of logits computed into st->logits */
    const int32_t *d_tok;            /* [n] */
    const int32_t *d_want;           /* [nw] rows whose logits are computed; NULL = rows 0 .. nw-1 */
    const cu_att_item *d_items;      /* [plan.n_items] */
    cu_tokinfo ti;
    /* A window pool's layers (cu_in_window_pool): ti with their own table offsets (or tables), whose entries are
     * blocks of that pool */
    cu_tokinfo ti_win;
    /* Without the causal mask (an encoder, cuda_encoder.cu; EmbeddingGemma's global layers): ti with pos[t] =
     * the last position of token t's input, the attention kernels' mask, so that every query sees its whole
     * input (the items' n_pos end there too) */
    cu_tokinfo ti_att;
    /* EmbeddingGemma's sliding-window layers, where position p sees p - w/2 .. p + w/2 (w = swa_window): ti
     * with pos[t] = p + w/2 and last = ti_att.pos, run with the causal window 2 (w/2) + 1, so that the kernels
     * read p - w/2 .. min(p + w/2, the input's last) */
    cu_tokinfo ti_swa;
    int hidden_only;                 /* every wanted row a hidden state: no classifier */
    cu_att_plan plan;
    int argmax;                      /* also fill am_ids / am_lp for the nw rows */
} cu_step;

/* cuda_backend.cu: queue every launch of a step on st->stream (no allocation, no sync unless
 * debug_sync): 0, or -1 with err filled. */
int  cuda_enqueue_step(cu_state *st, const cu_step *sp, llm_err *err);
/* cuda_encoder.cu: the same for an encoder's step (cuda_enqueue_step calls it): the hidden states of the
 * sp->nw wanted rows in st->xn. */
int  cuda_encoder_step(cu_state *st, const cu_step *sp, llm_err *err);
/* cuda_backend.cu: after the launches of a stage: 0, or -1 with err filled (a launch error; with debug_sync,
 * any error of the stage); stage timing where asked for. */
int  cuda_stage_check(cu_state *st, const char *stage, int layer, llm_err *err);
/* y[:, off ...] = S[i] x for each matrix of the set, their rows side by side (ldy apart). 0 or -1. */
int  cuda_mm_set(cu_state *st, const cu_matset *S, const float *x, int ldx, float *y, int ldy, int n, llm_err *err);
/* Per-step buffers grown outside any capture (each bumps buf_gen when it moves): 0 or -1. */
int  cuda_ensure_scratch(cu_state *st, int n);
int  cuda_ensure_ints(cu_state *st, size_t n_ints);
int  cuda_ensure_ws(cu_state *st, size_t floats);
int  cuda_ensure_logits(cu_state *st, int rows);
/* Queue the copies of a step's results to the caller: every logits row, or, with am, the ids and logprobs
 * of all rows and the logits rows of tokens without mode. 0 or -1 (error code in *e). */
int  cuda_copy_out(cu_state *st, const llm_batch *b, const llm_device_out *am, int nw, float *logits,
                   cudaError_t *e);
static inline unsigned cuda_buf_gen(const cu_state *st) { return st->buf_gen + st->mm.gen; }

/* cuda_sample.cu: dv's sampled rows are consistent with the batch (rows that exist, in increasing order,
 * each a LLM_ROW_SAMPLE token's; pairs in range; parameters in the ranges llm_sampling_validate allows):
 * 0, or -1 with err filled. */
int  cuda_sample_check(const llm_batch *b, const llm_device_out *dv, llm_err *err);
/* Room for n rows and n_pen pairs (outside any capture): 0, or -1 out of memory. */
int  cuda_sample_reserve(cu_state *st, int n, int n_pen);
/* Queue the upload of dv's rows and pairs, the sampling kernel over st->logits and the download of the
 * results: 0 or -1 (error code in *e). */
int  cuda_sample_enqueue(cu_state *st, const llm_device_out *dv, cudaError_t *e);
/* After the stream synchronised: the results into dv (ids / logprob at each row, n_top / top per sample). */
void cuda_sample_scatter(cu_state *st, const llm_device_out *dv);
void cuda_sample_free(cu_state *st);

/* cuda_graph.cu */
void cuda_graphs_init(cu_state *st);
int  cuda_bucket_size(int bi);     /* 1, 2, 4, ..., 256 */
int  cuda_bucket_index(int n);     /* the smallest bucket of at least n tokens (the last one past 256) */
/* An all-padding decode step of B tokens (a bucket size): buffers grown, its ints uploaded, sp filled, as a
 * graph step of B tokens would be. 0, or -1 with err filled. */
int  cuda_graph_dummy_step(cu_state *st, int B, cu_step *sp, llm_err *err);
/* Capture sp's launches into *exec (outside the graph cache). 0, or -1 with the reason in why. */
int  cuda_graph_capture(cu_state *st, const cu_step *sp, cudaGraphExec_t *exec, char *why, size_t why_len);
/* A decode step (every token wants logits, one token per sequence, at most 256) through the graph of
 * its (bucket, split class): 0 done, -1 error with err filled, 1 not such a step or graphs off: run it
 * eagerly. A capture that fails disables graphs for good (one line to stderr) and answers 1. */
int  cuda_graph_forward(cu_state *st, const llm_batch *b, const llm_device_out *am, float *logits, llm_err *err);
void cuda_graphs_destroy(cu_state *st);

/* cuda_tune.cu: the knobs now in effect / put k in effect (mm switches, fusion). */
/* One eager step (prefill / mixed shapes) with the logits rows copied to `logits` (cuda_backend.cu). */
int    cuda_forward_eager(cu_state *st, const llm_batch *b, float *logits, llm_err *err);
cu_knobs cuda_knobs_get(const cu_state *st);
void     cuda_knobs_set(cu_state *st, const cu_knobs *k);
/* Times the product paths on all-padding decode steps of each bucket up to max_batch (graphs as the backend
 * runs them) and keeps the fastest knobs per bucket in st->tune; or reads them from `file` when it holds a
 * tuning of this device, library and model (and writes it there after timing). Also decides programmatic
 * dependent launch. 0, or -1 with err filled (a device error: the backend cannot go on). */
int      cuda_tune_run(cu_state *st, int max_batch, int reps, const char *file, llm_err *err);

/* Upload the model's weights (repacked as described above) and the rope
 * tables. 0, or -1 with err filled (allocations made are in st->allocs). */
int  cuda_load_weights(cu_state *st, int threads, llm_err *err); /* threads: host threads staging (0: all cores) */
void cuda_free_weights(cu_state *st);

#endif
