/* Paged grouped-query attention. One kernel serves decode and prefill: a work
 * item is up to q_tile tokens of one sequence; a block takes (item, kv head,
 * split of the positions), loads the item's queries of every query head of
 * that kv head into shared memory, streams the keys and values of its split in
 * tiles of 32 positions through shared memory (read once for all its queries:
 * GQA and prefill reuse) and keeps an online softmax per query row. Splits
 * write partial (max, sum, unnormalised output); a second kernel merges them
 * (flash-decoding). Causality: row r sees positions p <= pos(token of r).
 *
 * Shared memory (floats), R = q_tile * group rows, hd = head_dim:
 *   qs[R][hd] | ks[32][hd+1] | vs[32][hd] | sc[R][32] | m[R] | l[R] | corr[R] | acc[R][hd] | rpos[R] (int)
 * ks rows are padded by one float so lanes reading different keys hit
 * different banks. */
#include <math.h>

#include "cuda_internal.cuh"

#define ATT_THREADS 128
#define ATT_KT 32 /* positions per tile; equal to the warp size (softmax maps lane -> position) */

size_t cuda_att_smem(int q_tile, int group, int head_dim)
{
    size_t R = (size_t)q_tile * (size_t)group, hd = (size_t)head_dim;
    size_t floats = R * hd + ATT_KT * (hd + 1) + ATT_KT * hd + R * ATT_KT + 3 * R + R * hd + R;
    return floats * sizeof(float);
}

int cuda_att_q_tile(int group, int head_dim, size_t smem_max)
{
    for (int qt = 16; qt >= 1; qt--)
        if (cuda_att_smem(qt, group, head_dim) <= smem_max)
            return qt;
    return 0;
}

size_t cuda_att_ws_floats(const cu_att_plan *p, int n_tokens)
{
    return (size_t)n_tokens * (size_t)p->n_heads * (size_t)p->n_splits * (size_t)(p->head_dim + 2);
}

typedef struct {
    const float   *qkv;
    int            ld;
    cu_tokinfo     ti;
    const void    *kc, *vc;     /* this layer's cache */
    const cu_att_item *items;
    float         *ws;          /* [n_tokens][n_heads][n_splits][hd + 2]: acc..., m, l */
    int            n_heads, n_kv, hd, group, block_size, q_tile, chunk, n_splits;
    float          scale;
} att_args;

template <typename C> __device__ __forceinline__ float cache_ld(const C *p, size_t i);
template <> __device__ __forceinline__ float cache_ld<float>(const float *p, size_t i) { return p[i]; }
template <> __device__ __forceinline__ float cache_ld<__half>(const __half *p, size_t i) { return __half2float(p[i]); }

template <typename C>
__global__ void __launch_bounds__(ATT_THREADS) attention_kernel(att_args a)
{
    CU_DYN_SMEM(smem);
    const cu_att_item it = a.items[blockIdx.z];
    const int g = blockIdx.y, split = blockIdx.x, hd = a.hd;
    const int p_begin = split * a.chunk;
    if (p_begin >= it.n_pos)
        return; /* uniform over the block, before any barrier */
    const int p_end = min(p_begin + a.chunk, it.n_pos);
    const int R = it.nq * a.group, RT = a.q_tile * a.group;
    const int kv_dim = a.n_kv * hd;
    float *qs = smem;
    float *ks = qs + (size_t)RT * hd;
    float *vs = ks + ATT_KT * (hd + 1);
    float *sc = vs + ATT_KT * hd;
    float *mrow = sc + RT * ATT_KT;
    float *lrow = mrow + RT;
    float *corr = lrow + RT;
    float *acc = corr + RT;
    int *rpos = (int *)(acc + (size_t)RT * hd);
    const C *kc = (const C *)a.kc, *vc = (const C *)a.vc;
    const int32_t *table = a.ti.tables + a.ti.tab[it.t0];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    /* Row r = (token it.t0 + r / group, query head g * group + r % group). */
    for (int idx = tid; idx < R * hd; idx += ATT_THREADS) {
        int r = idx / hd, d = idx % hd;
        int t = it.t0 + r / a.group, h = g * a.group + r % a.group;
        qs[idx] = a.qkv[(size_t)t * a.ld + (size_t)h * hd + d];
        acc[idx] = 0.0f;
    }
    for (int r = tid; r < R; r += ATT_THREADS) {
        mrow[r] = -INFINITY;
        lrow[r] = 0.0f;
        rpos[r] = a.ti.pos[it.t0 + r / a.group];
    }
    __syncthreads();

    for (int p0 = p_begin; p0 < p_end; p0 += ATT_KT) {
        for (int idx = tid; idx < ATT_KT * hd; idx += ATT_THREADS) {
            int j = idx / hd, d = idx % hd, p = p0 + j;
            float kv = 0.0f, vv = 0.0f;
            if (p < p_end) {
                size_t slot = (size_t)table[p / a.block_size] * a.block_size + (size_t)(p % a.block_size);
                size_t o = slot * (size_t)kv_dim + (size_t)g * hd + d;
                kv = cache_ld<C>(kc, o);
                vv = cache_ld<C>(vc, o);
            }
            ks[j * (hd + 1) + d] = kv;
            vs[j * hd + d] = vv;
        }
        __syncthreads();
        for (int idx = tid; idx < R * ATT_KT; idx += ATT_THREADS) {
            int r = idx / ATT_KT, j = idx % ATT_KT, p = p0 + j;
            float s = -INFINITY;
            if (p < p_end && p <= rpos[r]) {
                const float *qr = qs + (size_t)r * hd, *kr = ks + j * (hd + 1);
                float dot = 0.0f;
                for (int d = 0; d < hd; d++)
                    dot += qr[d] * kr[d];
                s = dot * a.scale;
            }
            sc[idx] = s;
        }
        __syncthreads();
        for (int r = warp; r < R; r += ATT_THREADS / 32) {
            float s = sc[r * ATT_KT + lane];
            float mt = s;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
            float m_old = mrow[r], m_new = fmaxf(m_old, mt);
            float p = 0.0f, cr = 1.0f;
            if (m_new != -INFINITY) {   /* else: nothing visible yet in this row */
                p = expf(s - m_new);      /* s = -inf gives 0 */
                cr = expf(m_old - m_new); /* m_old = -inf gives 0 */
            }
            float ps = p;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                ps += __shfl_xor_sync(0xffffffffu, ps, o);
            sc[r * ATT_KT + lane] = p;
            if (lane == 0) {
                mrow[r] = m_new;
                lrow[r] = lrow[r] * cr + ps;
                corr[r] = cr;
            }
        }
        __syncthreads();
        for (int idx = tid; idx < R * hd; idx += ATT_THREADS) {
            int r = idx / hd, d = idx % hd;
            const float *pr = sc + r * ATT_KT;
            float v = acc[idx] * corr[r];
#pragma unroll 8
            for (int j = 0; j < ATT_KT; j++)
                v += pr[j] * vs[j * hd + d];
            acc[idx] = v;
        }
        __syncthreads();
    }

    for (int idx = tid; idx < R * hd; idx += ATT_THREADS) {
        int r = idx / hd, d = idx % hd;
        int t = it.t0 + r / a.group, h = g * a.group + r % a.group;
        float *w = a.ws + (((size_t)t * a.n_heads + h) * a.n_splits + split) * (size_t)(hd + 2);
        w[d] = acc[idx];
        if (d == 0) {
            w[hd] = mrow[r];
            w[hd + 1] = lrow[r];
        }
    }
}

/* out[t][h*hd + d] = merge of the splits that cover positions 0..pos(t). */
__global__ void attention_merge_kernel(const float *ws, cu_tokinfo ti, float *out, int n_heads, int hd, int chunk,
                                       int n_splits)
{
    int t = blockIdx.x / n_heads, h = blockIdx.x % n_heads;
    int ns = ti.pos[t] / chunk + 1;
    const float *w = ws + ((size_t)t * n_heads + h) * n_splits * (size_t)(hd + 2);
    float M = -INFINITY;
    for (int s = 0; s < ns; s++)
        M = fmaxf(M, w[(size_t)s * (hd + 2) + hd]);
    float den = 0.0f;
    for (int s = 0; s < ns; s++) {
        const float *ws_s = w + (size_t)s * (hd + 2);
        den += expf(ws_s[hd] - M) * ws_s[hd + 1];
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float num = 0.0f;
        for (int s = 0; s < ns; s++) {
            const float *ws_s = w + (size_t)s * (hd + 2);
            num += expf(ws_s[hd] - M) * ws_s[d];
        }
        out[(size_t)t * n_heads * hd + (size_t)h * hd + d] = num / den;
    }
}

int cuda_att_prepare(size_t smem_max)
{
    if (cudaFuncSetAttribute(attention_kernel<float>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem_max) != cudaSuccess ||
        cudaFuncSetAttribute(attention_kernel<__half>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem_max) != cudaSuccess)
        return -1;
    return 0;
}

void cuda_attention(const cu_att_plan *p, const cu_att_item *items, const float *qkv, int ld, const cu_tokinfo *ti,
                    const cu_kv *kv, int layer, float *ws, float *out, int n_tokens, cudaStream_t st)
{
    size_t es = kv->kv16 ? 2 : 4;
    att_args a;
    a.qkv = qkv;
    a.ld = ld;
    a.ti = *ti;
    a.kc = (const char *)kv->k + (size_t)layer * kv->layer_elems * es;
    a.vc = (const char *)kv->v + (size_t)layer * kv->layer_elems * es;
    a.items = items;
    a.ws = ws;
    a.n_heads = p->n_heads;
    a.n_kv = p->n_kv_heads;
    a.hd = p->head_dim;
    a.group = p->n_heads / p->n_kv_heads;
    a.block_size = p->block_size;
    a.q_tile = p->q_tile;
    a.chunk = p->chunk;
    a.n_splits = p->n_splits;
    a.scale = p->scale;
    dim3 grid((unsigned)p->n_splits, (unsigned)p->n_kv_heads, (unsigned)p->n_items);
    size_t smem = cuda_att_smem(p->q_tile, a.group, p->head_dim);
    void (*k)(att_args) = kv->kv16 ? attention_kernel<__half> : attention_kernel<float>;
    CU_LAUNCH(k, grid, ATT_THREADS, smem, st, a);
    int mthreads = p->head_dim < 256 ? p->head_dim : 256;
    CU_LAUNCH(attention_merge_kernel, (unsigned)(n_tokens * p->n_heads), mthreads, 0, st, ws, *ti, out, p->n_heads,
              p->head_dim, p->chunk, p->n_splits);
}
