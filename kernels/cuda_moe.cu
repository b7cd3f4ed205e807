/* The mixture-of-experts FFN on the device (Qwen 3 MoE, Qwen 2 MoE, Mixtral, Granite MoE, OLMoE, ERNIE 4.5 MoE,
 * GLM-4.5, gpt-oss), as
 * engine/cpu/moe.c computes it, with no host round trip (so decode steps still go through CUDA Graphs):
 *  1. route: per token, the softmax over the router's logits (GLM-4.5: their sigmoids), the k experts of highest
 *     logit (ties: the lower index; with a bias, ERNIE 4.5 MoE's or GLM-4.5's, of highest probability + bias) and
 *     their probabilities, renormalised over the k when the model says so, times GLM-4.5's scale; with a shared
 *     expert, its gate sigmoid(xn . shexp_gate);
 *  2. sort: the n*k (token, choice) rows grouped by expert, tokens in order within an expert (one block; the
 *     rows' order is the CPU's, though the results would not depend on it);
 *  3. gate/up: per active expert, its gate and up rows against its tokens' normed activations, SwiGLU (or
 *     GeGLU, or gpt-oss's clamped SwiGLU after its gate and up biases) as the epilogue, into the row's hidden
 *     activations;
 *  4. down: per active expert, its down rows against those (+ gpt-oss's down bias);
 *  5. combine: each token's k rows weighted and added to the residual (and the shared expert's output, times
 *     its gate where it has one), in the CPU's order.
 * Steps 3 and 4 are grids of (row blocks, chosen experts), the experts listed by the sort on the device (the
 * grid has a row for as many as could be chosen, min(E, n*k); the rows past those chosen return at once), so a
 * decode step reads only the chosen experts' weights, each once per 8 of its tokens. Steps with many rows
 * per expert take the tensor-core weight GEMM instead (cuda_tcgemm_grouped: 64 rows of an expert a block),
 * on the activations gathered in expert order and rounded to 16 bits. */
#include <math.h>

#include "cuda_wload.cuh"

#define MOE_NT 8 /* a warp's tokens per pass over its weight row */

/* One warp per token: lanes hold experts lane, lane + 32, ... (at most LLM_MAX_EXPERTS). */
__global__ void __launch_bounds__(128)
moe_route_kernel(const float *logits, const float *bias, int n, int E, int k, int norm_topk, int sigmoid,
                 float scale, const float *xn, int dim, const float *shexp_gate, int32_t *ids, float *wts, float *sg)
{
    CU_PDL_ENTRY();
    int lane = threadIdx.x & 31, t = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (t >= n)
        return; /* whole warp */
    const float *lg = logits + (size_t)t * E;
    float mx = -INFINITY;
    for (int e = lane; e < E; e += 32)
        mx = fmaxf(mx, lg[e]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0.0f;
    for (int e = lane; e < E; e += 32)
        sum += expf(lg[e] - mx);
    sum = warp_sum(sum);
    /* an expert's probability: its softmax, or (GLM-4.5) the sigmoid of its logit */
#define MOE_P(e) (sigmoid ? 1.0f / (1.0f + expf(-lg[e])) : expf(lg[e] - mx) / sum)
    unsigned taken = 0; /* bit i: expert lane + 32 i chosen already */
    float sel_sum = 0.0f, my_w = 0.0f;
    int my_id = 0;
    for (int j = 0; j < k; j++) {
        float bv = -INFINITY;
        int be = -1;
        for (int e = lane, i = 0; e < E; e += 32, i++) {
            /* what chooses: the logit (the probability keeps its order), or with a bias (ERNIE 4.5 MoE's,
             * GLM-4.5's) the probability + bias */
            float v = bias == NULL ? lg[e] : MOE_P(e) + bias[e];
            if (!(taken >> i & 1u) && (be < 0 || v > bv)) {
                bv = v;
                be = e;
            }
        }
        /* the warp's best: highest score, then lowest index (be < 0: the lane has none left) */
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oe = (int)__shfl_xor_sync(0xffffffffu, (float)be, o);
            if (oe >= 0 && (be < 0 || ov > bv || (ov == bv && oe < be))) {
                bv = ov;
                be = oe;
            }
        }
        if ((be & 31) == lane)
            taken |= 1u << (be >> 5);
        float w = MOE_P(be); /* (its probability, without the bias) */
        sel_sum += w;
        if (lane == j) {
            my_id = be;
            my_w = w;
        }
    }
    if (lane < k) {
        ids[(size_t)t * k + lane] = my_id;
        wts[(size_t)t * k + lane] = (norm_topk ? my_w / sel_sum : my_w) * scale;
    }
    if (shexp_gate != NULL) {
        float d = 0.0f;
        for (int i = lane; i < dim; i += 32)
            d += xn[(size_t)t * dim + i] * shexp_gate[i];
        d = warp_sum(d);
        if (lane == 0)
            sg[t] = 1.0f / (1.0f + expf(-d));
    }
}

/* One block: off[e] .. off[e+1] are expert e's rows; row p holds token tok[p]; choice i (= t*k + j) went to
 * row pos[i]. S = blockDim / E threads per expert (at least 1) each take a slice of the choices in order:
 * count their expert's, then (after a scan over (expert, slice) in that order) place them, so an expert's
 * rows come out in token order, the CPU's, the same on every run (no atomics). Only the experts this device
 * holds, [lo, hi) (expert parallelism; else all), get rows: a choice of another has pos -1, and the rows past
 * the last placed one read token 0 (kernels that run over all rows gather something valid, then unused). */
#define MOE_SORT_THREADS 1024
__global__ void __launch_bounds__(MOE_SORT_THREADS)
moe_sort_kernel(const int32_t *ids, int rows, int k, int E, int lo, int hi, int32_t *off, int32_t *tok,
                int32_t *pos)
{
    CU_PDL_ENTRY();
    __shared__ int start[MOE_SORT_THREADS + 1]; /* per (expert, slice), then their running sum */
    const int S = blockDim.x / E > 1 ? blockDim.x / E : 1;
    for (int u = threadIdx.x; u < E * S; u += blockDim.x) {
        const int e = u / S, q = u % S, i0 = (int)((long)rows * q / S), i1 = (int)((long)rows * (q + 1) / S);
        int c = 0;
        for (int i = i0; i < i1 && e >= lo && e < hi; i++)
            c += ids[i] == e;
        start[u] = c;
    }
    for (int i = threadIdx.x; i < rows; i += blockDim.x)
        if (ids[i] < lo || ids[i] >= hi)
            pos[i] = -1;
    __syncthreads();
    if (threadIdx.x == 0) {
        int sum = 0;
        for (int u = 0; u < E * S; u++) {
            int c = start[u];
            start[u] = sum;
            sum += c;
        }
        start[E * S] = sum;
    }
    __syncthreads();
    for (int e = threadIdx.x; e <= E; e += blockDim.x)
        off[e] = start[e * S];
    for (int p = start[E * S] + threadIdx.x; p < rows; p += blockDim.x)
        tok[p] = 0;
    if (threadIdx.x == 0) { /* the experts chosen at all: their count, then their ids (the products' grids) */
        int na = 0;
        for (int e = 0; e < E; e++)
            if (start[(e + 1) * S] > start[e * S])
                off[E + 2 + na++] = e;
        off[E + 1] = na;
    }
    for (int u = threadIdx.x; u < E * S; u += blockDim.x) {
        const int e = u / S, q = u % S, i0 = (int)((long)rows * q / S), i1 = (int)((long)rows * (q + 1) / S);
        int p = start[u];
        for (int i = i0; i < i1 && e >= lo && e < hi; i++)
            if (ids[i] == e) {
                tok[p] = i / k;
                pos[i] = p++;
            }
    }
}

/* The block's expert e = the blockIdx.y-th chosen one (off[n_exp + 2 + y]), its rows p0 .. p1 = off[e] ..
 * off[e+1], and the warp's output row r of matrix `which` W = mats[3e + which] (U: the next one, up, with
 * GLU; else W). false where there is nothing to do: blocks past the chosen count (off[n_exp + 1]), warps past
 * the matrix's rows (whole blocks / warps, as nothing after it synchronises). */
template <int GLU>
static __device__ __forceinline__ bool moe_warp_row(const cu_mat *mats, int which, int n_exp, const int32_t *off,
                                                    cu_mat &W, cu_mat &U, int &e, int &r, int &p0, int &p1)
{
    if ((int)blockIdx.y >= off[n_exp + 1])
        return false;
    e = off[n_exp + 2 + blockIdx.y];
    p0 = off[e];
    p1 = off[e + 1];
    W = mats[3 * e + which];
    r = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    if (r >= W.rows)
        return false;
    U = GLU ? mats[3 * e + which + 1] : W;
    return true;
}

/* A warp per output row r of the block's expert's matrix (moe_warp_row): y[p][r] = W[r] . x[tok[p]] (x[p]
 * when tok is NULL) for its rows p; with GLU `which` is the gate and the warp computes up's row r too:
 * y[p][r] = glu(gate, up). Rows in passes of MOE_NT. bw, bu (NULL: none): W's and U's biases, [n_exp][rows]. */
template <int T, int GLU>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
moe_mm_kernel(const cu_mat *mats, int which, int n_exp, const int32_t *off, const int32_t *tok, const float *x,
              int ldx, int vec, const float *bw, const float *bu, float *y, int ldy, int gelu)
{
    CU_PDL_ENTRY();
    cu_mat W, U;
    int e, r, p0, p1;
    if (!moe_warp_row<GLU>(mats, which, n_exp, off, W, U, e, r, p0, p1))
        return;
    const float bg = bw != NULL ? bw[(size_t)e * W.rows + r] : 0.0f;
    const float bup = GLU && bu != NULL ? bu[(size_t)e * W.rows + r] : 0.0f;
    const int lane = threadIdx.x & 31;
    constexpr int E = wchunk<T>::E;
    const uint8_t *rw = (const uint8_t *)W.w + (size_t)r * W.row_bytes;
    const uint8_t *ru = (const uint8_t *)U.w + (size_t)r * U.row_bytes;
    const int nchunks = vec ? W.cols / E : 0;
    for (int p = p0; p < p1; p += MOE_NT) {
        const int nt = p1 - p < MOE_NT ? p1 - p : MOE_NT;
        const float *xr[MOE_NT];
#pragma unroll
        for (int t = 0; t < MOE_NT; t++) {
            int q = p + (t < nt ? t : nt - 1);
            xr[t] = x + (size_t)(tok != NULL ? tok[q] : q) * ldx;
        }
        float ag[MOE_NT], au[MOE_NT];
#pragma unroll
        for (int t = 0; t < MOE_NT; t++)
            ag[t] = au[t] = 0.0f;
        for (int c = lane; c < nchunks; c += 32) {
            float wg[E], wu[E];
            wchunk<T>::load(W, rw, r, c, wg);
            if (GLU)
                wchunk<T>::load(U, ru, r, c, wu);
#pragma unroll
            for (int t = 0; t < MOE_NT; t++) {
                if (t >= nt)
                    break;
                const float4 *xp = (const float4 *)(xr[t] + (size_t)c * E);
#pragma unroll
                for (int i = 0; i < E / 4; i++) {
                    float4 xv = __ldg(xp + i);
                    ag[t] += wg[4 * i] * xv.x + wg[4 * i + 1] * xv.y + wg[4 * i + 2] * xv.z + wg[4 * i + 3] * xv.w;
                    if (GLU)
                        au[t] += wu[4 * i] * xv.x + wu[4 * i + 1] * xv.y + wu[4 * i + 2] * xv.z +
                                 wu[4 * i + 3] * xv.w;
                }
            }
        }
        /* rows whose chunks are not 16-byte aligned, element by element */
        for (int kk = nchunks * E + lane; kk < W.cols; kk += 32) {
            float g = mat_elem(W, r, kk), u = GLU ? mat_elem(U, r, kk) : 0.0f;
#pragma unroll
            for (int t = 0; t < MOE_NT; t++)
                if (t < nt) {
                    ag[t] += g * xr[t][kk];
                    au[t] += u * xr[t][kk];
                }
        }
#pragma unroll
        for (int t = 0; t < MOE_NT; t++) {
            float g = warp_sum(ag[t]) + bg, u = GLU ? warp_sum(au[t]) + bup : 0.0f;
            if (lane == 0 && t < nt)
                y[(size_t)(p + t) * ldy + r] = GLU ? cu_glu(g, u, gelu) : g;
        }
    }
}

/* moe_mm_kernel on int8 activations (LLM_CUDA_GEMV_DP4A=1, experts of a cu_type_q type): the same grid, warps and
 * passes; row a of the activations (a = tok[p], or p) is xq[a][0 .. K) with (d, d * sum q) per 32-block in
 * xds[a], as cuda_quant_act writes it: the CPU backend's arithmetic, and 1 byte read per element, not 4. */
template <int T, int GLU>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
moe_mm_i8_kernel(const cu_mat *mats, int which, int n_exp, const int32_t *off, const int32_t *tok,
                 const int8_t *__restrict__ xq, const float2 *__restrict__ xds, const float *bw, const float *bu,
                 float *y, int ldy, int gelu)
{
    CU_PDL_ENTRY();
    cu_mat W, U;
    int e, r, p0, p1;
    if (!moe_warp_row<GLU>(mats, which, n_exp, off, W, U, e, r, p0, p1))
        return;
    const float bg = bw != NULL ? bw[(size_t)e * W.rows + r] : 0.0f;
    const float bup = GLU && bu != NULL ? bu[(size_t)e * W.rows + r] : 0.0f;
    const int lane = threadIdx.x & 31;
    constexpr int PB = qchunk<T>::PER_BLOCK;
    const int K = W.cols, nb = K / LLM_QK;
    const uint8_t *rw = (const uint8_t *)W.w + (size_t)r * W.row_bytes;
    const uint8_t *ru = (const uint8_t *)U.w + (size_t)r * U.row_bytes;
    const uint16_t *sw = W.scales + (size_t)r * nb * cu_type_nsc(T), *su = U.scales + (size_t)r * nb * cu_type_nsc(T);
    for (int p = p0; p < p1; p += MOE_NT) {
        const int nt = p1 - p < MOE_NT ? p1 - p : MOE_NT;
        const int8_t *xr[MOE_NT];
        const float2 *dr[MOE_NT];
#pragma unroll
        for (int t = 0; t < MOE_NT; t++) {
            int q = p + (t < nt ? t : nt - 1), a = tok != NULL ? tok[q] : q;
            xr[t] = xq + (size_t)a * K;
            dr[t] = xds + (size_t)a * nb;
        }
        float ag[MOE_NT], au[MOE_NT];
#pragma unroll
        for (int t = 0; t < MOE_NT; t++)
            ag[t] = au[t] = 0.0f;
        for (int c = lane; c < PB * nb; c += 32) {
            uint4 wg = __ldg((const uint4 *)(rw + (size_t)c * 16)), wu = wg;
            cu_qsc dg = qscale<T>(sw, c / PB), du = dg;
            if (GLU) {
                wu = __ldg((const uint4 *)(ru + (size_t)c * 16));
                du = qscale<T>(su, c / PB);
            }
#pragma unroll
            for (int t = 0; t < MOE_NT; t++) {
                if (t >= nt)
                    break;
                const float2 ds = dr[t][c / PB];
                ag[t] += qdot<T>(wg, dg, xr[t], c, ds);
                if (GLU)
                    au[t] += qdot<T>(wu, du, xr[t], c, ds);
            }
        }
#pragma unroll
        for (int t = 0; t < MOE_NT; t++) {
            float g = warp_sum(ag[t]) + bg, u = GLU ? warp_sum(au[t]) + bup : 0.0f;
            if (lane == 0 && t < nt)
                y[(size_t)(p + t) * ldy + r] = GLU ? cu_glu(g, u, gelu) : g;
        }
    }
}

/* x[t] += sum_j wts[t][j] * o[pos[t][j]], then + sg[t] * sh[t] with a shared expert (sg NULL: ungated, + sh[t]):
 * the CPU's order; with Granite's residual scale rs > 0, x[t] += rs * (that sum, from 0), as the CPU. With set,
 * x[t] = that sum from 0 (times rs): a rank's partial sum, for tensor parallelism (cuda_backend.cu sums it in).
 * A choice with pos -1 (an expert another device holds) is left out. */
__global__ void __launch_bounds__(256)
moe_combine_kernel(float *x, int dim, int k, const float *o, const int32_t *pos, const float *wts, const float *sh,
                   const float *sg, float rs, int set)
{
    CU_PDL_ENTRY();
    const int t = blockIdx.x;
    const float g = sh != NULL && sg != NULL ? sg[t] : 1.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = rs > 0.0f || set ? 0.0f : x[(size_t)t * dim + i];
        for (int j = 0; j < k; j++) {
            const int p = pos[(size_t)t * k + j];
            if (p >= 0)
                v += wts[(size_t)t * k + j] * o[(size_t)p * dim + i];
        }
        if (sh != NULL)
            v += g * sh[(size_t)t * dim + i];
        x[(size_t)t * dim + i] = rs > 0.0f ? (set ? 0.0f : x[(size_t)t * dim + i]) + rs * v : v;
    }
}

/* gpt-oss's experts' biases after the grouped GEMM: y[p][i] += b[e][i] for each row p of expert e's group
 * (off[e] <= p < off[e + 1], found by bisection), a block a row. */
__global__ void moe_bias_kernel(float *y, int ldy, const float *b, int cols, int n_exp, const int32_t *off)
{
    CU_PDL_ENTRY();
    const int p = blockIdx.x;
    int lo = 0, hi = n_exp - 1; /* the last e with off[e] <= p: the group holding p, empty ones before it */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (off[mid] <= p)
            lo = mid;
        else
            hi = mid - 1;
    }
    const float *be = b + (size_t)lo * cols;
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
        y[(size_t)p * ldy + i] += be[i];
}

static void moe_bias(float *y, int ldy, const float *b, int cols, int E, const int32_t *off, int rows, cudaStream_t st)
{
    CU_LAUNCH(moe_bias_kernel, (unsigned)rows, 256, 0, st, y, ldy, b, cols, E, off);
}

int cuda_moe_tc_ok(const cu_mat *host)
{
    return cuda_tcgemm_ok(&host[0]) && cuda_tcgemm_ok(&host[1]) && cuda_tcgemm_ok(&host[2]);
}

void cuda_moe_tc(const cu_mat *host, const cu_mat *mats, int E, const int32_t *off, const int32_t *tok, int rows,
                 const float *xn, int dim, void *x16, float *gu, void *h16, float *o, const float *const *b, int gelu,
                 cudaStream_t st)
{
    const int ff = host[0].rows;
    /* x16 = the gathered tokens' normed rows, h16 = GLU(gate, up), both in the weights' 16-bit type */
    cuda_to_half(xn, dim, tok, x16, dim, rows, host[0].type != LLM_F16, st);
    cu_tg_group G = { mats, 0, off, E };
    cuda_tcgemm_grouped(host, &G, x16, rows, gu, 2 * ff, st);
    G.which = 1;
    cuda_tcgemm_grouped(host, &G, x16, rows, gu + ff, 2 * ff, st);
    if (b != NULL) {
        moe_bias(gu, 2 * ff, b[0], ff, E, off, rows, st);
        moe_bias(gu + ff, 2 * ff, b[1], ff, E, off, rows, st);
    }
    cuda_glu16(gu, 2 * ff, h16, ff, rows, gelu, host[2].type == LLM_F16, st);
    G.which = 2;
    cuda_tcgemm_grouped(host, &G, h16, rows, o, host[2].rows, st);
    if (b != NULL)
        moe_bias(o, host[2].rows, b[2], host[2].rows, E, off, rows, st);
}

void cuda_moe_route(const float *logits, const float *bias, int n, int E, int k, int norm_topk, int sigmoid,
                    float scale, const float *xn, int dim, const float *shexp_gate, int32_t *ids, float *wts, float *sg,
                    cudaStream_t st)
{
    CU_LAUNCH(moe_route_kernel, (unsigned)((n + 3) / 4), 128, 0, st, logits, bias, n, E, k, norm_topk, sigmoid,
              scale > 0.0f ? scale : 1.0f, xn, dim, shexp_gate, ids, wts, sg);
}

void cuda_moe_sort(const int32_t *ids, int n, int k, int E, int lo, int hi, int32_t *off, int32_t *tok,
                   int32_t *pos, cudaStream_t st)
{
    /* E <= LLM_MAX_EXPERTS (256) <= MOE_SORT_THREADS: every expert has a slice at least */
    CU_LAUNCH(moe_sort_kernel, 1, MOE_SORT_THREADS, 0, st, ids, n * k, k, E, lo, hi, off, tok, pos);
}

template <int GLU>
static void mm_launch(const cu_mat *host, const cu_mat *mats, int which, int E, int rows, const int32_t *off,
                      const int32_t *tok, const float *x, int ldx, const cu_moe_i8 *q, const float *const *b, float *y,
                      int ldy, int gelu, cudaStream_t st)
{
    const float *bw = b != NULL ? b[which] : NULL, *bu = b != NULL && GLU ? b[which + 1] : NULL;
    const cu_mat *W = &host[which];
    /* a row of blocks per chosen expert: at most E, at most one per (token, choice) row */
    dim3 grid((unsigned)((W->rows + GEMV_WARPS - 1) / GEMV_WARPS), (unsigned)(rows < E ? rows : E));
    dim3 block(GEMV_WARPS * 32);
    if (q != NULL) {
        const float2 *xds = (const float2 *)q->xds;
        with_qtype(W->type, [&](auto T) {
            CU_LAUNCH((moe_mm_i8_kernel<decltype(T)::value, GLU>), grid, block, 0, st, mats, which, E, off, tok,
                      q->xq, xds, bw, bu, y, ldy, gelu);
        });
        return;
    }
    int vec = cuda_gemv_ok(W, ldx) && ((uintptr_t)x & 15) == 0 && (!GLU || cuda_gemv_ok(&host[which + 1], ldx));
    with_wtype(W->type, [&](auto T) {
        CU_LAUNCH((moe_mm_kernel<decltype(T)::value, GLU>), grid, block, 0, st, mats, which, E, off, tok, x, ldx,
                  vec, bw, bu, y, ldy, gelu);
    });
}

static int quant_block_type(const cu_mat *W)
{
    return cu_type_q(W->type) && W->cols % LLM_QK == 0 &&
           (W->row_bytes & 15) == 0 && ((uintptr_t)W->w & 15) == 0;
}

int cuda_moe_i8_ok(const cu_mat *host)
{
    return quant_block_type(&host[0]) && quant_block_type(&host[1]) && quant_block_type(&host[2]) &&
           host[0].type == host[1].type;
}

void cuda_moe_gate_up(const cu_mat *host, const cu_mat *mats, int E, int n, int k, const int32_t *off,
                      const int32_t *tok, const float *xn, int dim, const cu_moe_i8 *q, const float *const *b,
                      float *h, int gelu, cudaStream_t st)
{
    if (q != NULL) /* the n tokens' normed rows, once; the experts' rows read them through tok */
        cuda_quant_act(xn, dim, dim, n, q->xq, q->xds, st);
    mm_launch<1>(host, mats, 0, E, n * k, off, tok, xn, dim, q, b, h, host[0].rows, gelu, st);
}

void cuda_moe_down(const cu_mat *host, const cu_mat *mats, int E, int rows, const int32_t *off, const float *h,
                   const cu_moe_i8 *q, const float *const *b, float *o, cudaStream_t st)
{
    if (q != NULL)
        cuda_quant_act(h, host[2].cols, host[2].cols, rows, q->xq, q->xds, st);
    mm_launch<0>(host, mats, 2, E, rows, off, NULL, h, host[2].cols, q, b, o, host[2].rows, 0, st);
}

void cuda_moe_combine(float *x, int n, int dim, int k, const float *o, const int32_t *pos, const float *wts,
                      const float *sh, const float *sg, float rs, int set, cudaStream_t st)
{
    CU_LAUNCH(moe_combine_kernel, (unsigned)n, 256, 0, st, x, dim, k, o, pos, wts, sh, sg, rs, set);
}
