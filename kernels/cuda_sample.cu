/* Sampling on the device: one block per sampled row of logits runs the whole of engine/sampler.c's
 * llm_sampler_sample on the row st->logits already holds (sampler.h gives the definition both follow):
 * logit biases from (id, float bits) pairs, penalties from (id, count) pairs, NaN / inf cleaning,
 * log-softmax of the chosen token and the top-n,
 * greedy or temperature + top-k + min-p + top-p + the draw with the u the host peeked from the request's
 * PRNG. Only ids, logprobs and top-n lists go back to the host instead of 128K floats a row.
 *
 * No sort: every selection is a radix select over an order-preserving 32-bit key of the logit, four
 * passes of a 256-bin histogram (the high byte first), then a pass over the ties of the final key in id
 * order (the total order is larger logit, then lower id). Histograms hold counts (top-k, top-n) or
 * fixed-point weights W = floor(p / p_max * 2^40) (top-p, the draw): integers, so shared-memory atomics
 * add them up exactly in any order and the result does not depend on scheduling. The row stays in
 * global memory (L2-resident: 512 KB a row) and each pass re-reads it. */
#include "cuda_internal.cuh"

#include <float.h>
#include <limits.h>

#ifdef CU_EMULATE
/* Fibers switch only at barriers, so a plain read-modify-write is atomic here. */
template <typename T> static inline T atomicAdd(T *p, T v)
{
    T o = *p;
    *p = o + v;
    return o;
}
#endif

/* Threads per row: SB_MANY when there are enough rows to fill the device, SB_FEW (a row's passes spread
 * over 4x the threads) when a handful of rows would each leave one SM working alone. */
#define SB_MANY 256
#define SB_FEW  1024

/* "At least as good as" bound in the total order: key > K, or key == K and id <= I. */
typedef struct {
    uint32_t key;
    int      id;
} bound;

__device__ static inline bound mk_bound(uint32_t key, int id)
{
    bound b;
    b.key = key;
    b.id = id;
    return b;
}
#define BOUND_ALL mk_bound(0u, INT_MAX)

__device__ static inline float clean(float x)
{
    x = x != x ? -INFINITY : x;
    return x > FLT_MAX ? FLT_MAX : x;
}

/* Larger float -> larger key; -0 and +0 (equal logits) share a key. */
__device__ static inline uint32_t okey(float x)
{
    uint32_t u = __float_as_uint(x == 0.0f ? 0.0f : x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ static inline int ge(uint32_t key, int id, bound b) { return key > b.key || (key == b.key && id <= b.id); }

__device__ static inline uint64_t fixed_w(float w) { return (uint64_t)(w * 0x1p40f); }

/* What a pass over the row filters and weighs: the candidate set is every token at least as good as
 * `k` (top-k) and `p` (top-p) with w >= min_p; weights are 1 (counts) or W. */
typedef struct {
    const float *row;
    int   vocab;
    float maxl, invt, min_p;
    bound k, p;
    int   mass;
} pass_spec;

__device__ static inline int take(const pass_spec *ps, int i, uint32_t *key, uint64_t *wt)
{
    float l = clean(ps->row[i]);
    *key = okey(l);
    if (!ge(*key, i, ps->k) || !ge(*key, i, ps->p))
        return 0;
    if (ps->mass || ps->min_p > 0.0f) {
        float w = expf((l - ps->maxl) * ps->invt);
        if (ps->min_p > 0.0f && !(w >= ps->min_p))
            return 0;
        *wt = ps->mass ? fixed_w(w) : 1;
    } else {
        *wt = 1;
    }
    return 1;
}

template <int SB> struct select_smem {
    unsigned long long hist[256];
    unsigned long long part[SB];     /* per thread */
    unsigned long long wsum[SB / 32]; /* per warp */
    uint64_t rem;
    uint32_t prefix;
    int      sel_thread;
    bound    out;
};

/* wsum[w] = the sum of part[] over warp w's threads (lane 0 of each warp adds its 32); ends with a barrier. */
template <int SB> __device__ static void warp_sums(select_smem<SB> *sm)
{
    int tid = threadIdx.x;
    if ((tid & 31) == 0) {
        uint64_t w = 0;
        for (int j = 0; j < 32; j++)
            w += sm->part[tid + j];
        sm->wsum[tid >> 5] = w;
    }
    __syncthreads();
}

/* The first thread t (in thread order) at which the running sum of part[] exceeds rem, and rem minus the
 * sum before t, into sm->sel_thread / sm->rem (SB - 1 and what is left if none). Two levels: each warp's
 * lane 0 adds its 32 entries, thread 0 walks the warp sums, then the chosen warp's lane 0 its 32 entries.
 * Call with part[] written and a barrier behind; ends with a barrier. */
template <int SB> __device__ static void find_crossing(select_smem<SB> *sm)
{
    int tid = threadIdx.x;
    warp_sums<SB>(sm);
    if (tid == 0) {
        uint64_t acc = 0, rem = sm->rem;
        int wsel = SB / 32 - 1;
        for (int w = 0; w < SB / 32; w++) {
            if (acc + sm->wsum[w] > rem) {
                wsel = w;
                break;
            }
            acc += sm->wsum[w];
        }
        rem -= acc;
        acc = 0;
        int t = wsel * 32 + 31;
        for (int j = wsel * 32; j < wsel * 32 + 32; j++) {
            if (acc + sm->part[j] > rem) {
                t = j;
                break;
            }
            acc += sm->part[j];
        }
        sm->rem = rem - acc;
        sm->sel_thread = t;
    }
    __syncthreads();
}

/* Block-wide: the first candidate in the total order whose running weight exceeds thr (the caller knows
 * the candidates weigh more than thr in all). Every thread gets the bound. */
template <int SB> __device__ static bound radix_select(const pass_spec *ps, uint64_t thr, select_smem<SB> *sm)
{
    int tid = threadIdx.x;
    uint32_t prefix = 0, pmask = 0;
    if (tid == 0)
        sm->rem = thr;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = tid; b < 256; b += SB)
            sm->hist[b] = 0;
        __syncthreads();
        for (int i = tid; i < ps->vocab; i += SB) {
            uint32_t key;
            uint64_t wt;
            if (take(ps, i, &key, &wt) && (key & pmask) == prefix)
                atomicAdd(&sm->hist[(key >> shift) & 255u], (unsigned long long)wt);
        }
        __syncthreads();
        if (tid == 0) {
            uint64_t acc = 0, rem = sm->rem;
            int sel = 0;
            for (int b = 255; b >= 0; b--) {
                if (acc + sm->hist[b] > rem) {
                    sel = b;
                    break;
                }
                acc += sm->hist[b];
            }
            sm->rem = rem - acc;
            sm->prefix = prefix | ((uint32_t)sel << shift);
        }
        __syncthreads();
        prefix = sm->prefix;
        pmask |= 255u << shift;
    }
    /* Ties of key `prefix` in id order: thread t holds the contiguous ids [t*chunk, (t+1)*chunk). */
    int chunk = (ps->vocab + SB - 1) / SB, lo = tid * chunk, hi = min(ps->vocab, lo + chunk);
    uint64_t mine = 0;
    for (int i = lo; i < hi; i++) {
        uint32_t key;
        uint64_t wt;
        if (take(ps, i, &key, &wt) && key == prefix)
            mine += wt;
    }
    sm->part[tid] = mine;
    if (tid == 0)
        sm->out = mk_bound(prefix, INT_MAX); /* only if rounding ran past every tie (cannot with integers) */
    __syncthreads();
    find_crossing<SB>(sm);
    if (tid == sm->sel_thread) {
        uint64_t acc = 0, rem = sm->rem;
        for (int i = lo; i < hi; i++) {
            uint32_t key;
            uint64_t wt;
            if (take(ps, i, &key, &wt) && key == prefix && (acc += wt) > rem) {
                sm->out = mk_bound(prefix, i);
                break;
            }
        }
    }
    __syncthreads();
    return sm->out;
}

/* Block-wide sum of the candidates' weights. */
template <int SB> __device__ static uint64_t weigh(const pass_spec *ps, select_smem<SB> *sm)
{
    int tid = threadIdx.x;
    uint64_t mine = 0;
    for (int i = tid; i < ps->vocab; i += SB) {
        uint32_t key;
        uint64_t wt;
        if (take(ps, i, &key, &wt))
            mine += wt;
    }
    sm->part[tid] = mine;
    __syncthreads();
    warp_sums<SB>(sm);
    if (tid == 0) {
        uint64_t t = 0;
        for (int w = 0; w < SB / 32; w++)
            t += sm->wsum[w];
        sm->rem = t;
    }
    __syncthreads();
    uint64_t t = sm->rem;
    __syncthreads();
    return t;
}

template <int SB>
__global__ void __launch_bounds__(SB) sample_kernel(float *logits, int vocab, const llm_sampling_row *rows,
                                                    const int32_t *pen, int32_t *ids, float *lps,
                                                    llm_token_logprob *top, int32_t *n_top)
{
    CU_PDL_ENTRY();
    __shared__ select_smem<SB> sm;
    __shared__ float bv[SB];
    __shared__ int bi[SB];
    __shared__ double bz[SB];
    __shared__ llm_token_logprob tl[LLM_SAMPLING_MAX_LOGPROBS];
    __shared__ int n_tl;
    const llm_sampling_row r = rows[blockIdx.x];
    float *row = logits + (size_t)r.row * vocab;
    int tid = threadIdx.x;

    /* 0. logit biases, then 1. penalties (each list's ids are distinct: no two threads write one logit) */
    const int32_t *bp = pen + 2 * (size_t)(r.pen_off + r.pen_n);
    for (int j = tid; j < r.bias_n; j += SB) {
        int id = bp[2 * j];
        if (id >= 0 && id < vocab)
            row[id] += __int_as_float(bp[2 * j + 1]);
    }
    __syncthreads();
    for (int j = tid; j < r.pen_n; j += SB) {
        int id = pen[2 * (r.pen_off + j)], cnt = pen[2 * (r.pen_off + j) + 1];
        if (id < 0 || id >= vocab)
            continue;
        float l = row[id];
        if (r.p.repetition_penalty != 1.0f)
            l = l > 0.0f ? l / r.p.repetition_penalty : l * r.p.repetition_penalty;
        l -= r.p.frequency_penalty * (float)cnt + r.p.presence_penalty;
        row[id] = l;
    }
    __syncthreads();

    /* 2. max (first index: the greedy id) and the log-softmax normaliser */
    float best = -INFINITY;
    int bid = INT_MAX;
    for (int i = tid; i < vocab; i += SB) {
        float v = clean(row[i]);
        if (v > best || (v == best && i < bid)) {
            best = v;
            bid = i;
        }
    }
    bv[tid] = best;
    bi[tid] = bid;
    __syncthreads();
    for (int o = SB / 2; o > 0; o >>= 1) {
        if (tid < o) {
            float v = bv[tid + o];
            int j = bi[tid + o];
            if (v > bv[tid] || (v == bv[tid] && j < bi[tid])) {
                bv[tid] = v;
                bi[tid] = j;
            }
        }
        __syncthreads();
    }
    float maxl = bv[0];
    int argmax = maxl == -INFINITY ? 0 : bi[0];
    double z = 0.0;
    if (maxl != -INFINITY)
        for (int i = tid; i < vocab; i += SB)
            z += (double)expf(clean(row[i]) - maxl);
    bz[tid] = z;
    __syncthreads();
    for (int o = SB / 2; o > 0; o >>= 1) {
        if (tid < o)
            bz[tid] += bz[tid + o];
        __syncthreads();
    }
    double lse = maxl == -INFINITY ? 0.0 : (double)maxl + log(bz[0]);

    /* 3. the token */
    int chosen = argmax;
    if (r.p.temperature != 0.0f && maxl != -INFINITY) {
        pass_spec ps = { row, vocab, maxl, 1.0f / r.p.temperature, 0.0f, BOUND_ALL, BOUND_ALL, 0 };
        if (r.p.top_k > 0 && r.p.top_k < vocab)
            ps.k = radix_select<SB>(&ps, (uint64_t)r.p.top_k - 1, &sm);
        ps.mass = 1;
        if (r.p.top_p < 1.0f) {
            uint64_t target = (uint64_t)ceil((double)r.p.top_p * (double)weigh<SB>(&ps, &sm)); /* top-k's mass */
            ps.min_p = r.p.min_p;
            if (weigh<SB>(&ps, &sm) >= target)
                ps.p = radix_select<SB>(&ps, target - 1, &sm);
        }
        ps.min_p = r.p.min_p;
        uint64_t zf = weigh<SB>(&ps, &sm);
        uint64_t t = (uint64_t)(r.u * (double)zf);
        if (t >= zf)
            t = zf - 1;
        chosen = radix_select<SB>(&ps, t, &sm).id;
    }

    /* 4. top-n logprobs: the n best, gathered then ordered by one thread */
    int n = r.p.n_logprobs < vocab ? r.p.n_logprobs : vocab;
    if (n > 0) {
        pass_spec ps = { row, vocab, maxl, 1.0f, 0.0f, BOUND_ALL, BOUND_ALL, 0 };
        ps.k = radix_select<SB>(&ps, (uint64_t)n - 1, &sm);
        if (tid == 0)
            n_tl = 0;
        __syncthreads();
        for (int i = tid; i < vocab; i += SB) {
            float l = clean(row[i]);
            if (ge(okey(l), i, ps.k)) {
                int at = atomicAdd(&n_tl, 1);
                if (at < LLM_SAMPLING_MAX_LOGPROBS) {
                    tl[at].id = i;
                    tl[at].logprob = l;
                }
            }
        }
        __syncthreads();
        if (tid == 0) {
            int m = n_tl < n ? n_tl : n;
            for (int a = 1; a < m; a++) { /* insertion sort: larger logit, then lower id */
                llm_token_logprob x = tl[a];
                int b = a;
                while (b > 0 && (x.logprob > tl[b - 1].logprob ||
                                 (x.logprob == tl[b - 1].logprob && x.id < tl[b - 1].id))) {
                    tl[b] = tl[b - 1];
                    b--;
                }
                tl[b] = x;
            }
            llm_token_logprob *out = top + (size_t)blockIdx.x * LLM_SAMPLING_MAX_LOGPROBS;
            for (int a = 0; a < m; a++) {
                out[a].id = tl[a].id;
                out[a].logprob = (float)((double)tl[a].logprob - lse);
            }
            n_top[blockIdx.x] = m;
        }
    } else if (tid == 0) {
        n_top[blockIdx.x] = 0;
    }
    if (tid == 0) {
        ids[blockIdx.x] = chosen;
        lps[blockIdx.x] = (float)((double)clean(row[chosen]) - lse);
    }
}

void cuda_sample(float *logits, int vocab, int n, const llm_sampling_row *rows, const int32_t *pen, int32_t *ids,
                 float *lps, llm_token_logprob *top, int32_t *n_top, int threads, cudaStream_t st)
{
    if (n <= 0)
        return;
    if (threads == 0)
        threads = n <= 64 ? SB_FEW : SB_MANY;
    if (threads == SB_FEW)
        CU_LAUNCH(sample_kernel<SB_FEW>, n, SB_FEW, 0, st, logits, vocab, rows, pen, ids, lps, top, n_top);
    else
        CU_LAUNCH(sample_kernel<SB_MANY>, n, SB_MANY, 0, st, logits, vocab, rows, pen, ids, lps, top, n_top);
}

/* ---- host side ---- */

static size_t up_bytes(int cap, int pen_cap) { return (size_t)cap * sizeof(llm_sampling_row) + (size_t)pen_cap * 8; }
static size_t down_bytes(int cap)
{
    return (size_t)cap * 12 + (size_t)cap * LLM_SAMPLING_MAX_LOGPROBS * sizeof(llm_token_logprob);
}

int cuda_sample_check(const llm_batch *b, const llm_device_out *dv, llm_err *err)
{
    int n = 0, row = 0, j = 0;
    for (int i = 0; i < b->n_tokens; i++) {
        if (!b->want_logits[i])
            continue;
        if (dv->mode[i] > LLM_ROW_SAMPLE) {
            llm_err_set(err, "cuda backend: token %d: unknown result mode %d", i, dv->mode[i]);
            return -1;
        }
        if (dv->mode[i] == LLM_ROW_SAMPLE) {
            n++;
            if (j >= dv->n_sample || dv->sample[j].row != row) {
                llm_err_set(err, "cuda backend: sampled rows do not match the tokens' modes (row %d)", row);
                return -1;
            }
            j++;
        }
        row++;
    }
    if (n != dv->n_sample || (n > 0 && (dv->sample == NULL || dv->top == NULL || dv->n_top == NULL)) ||
        dv->n_pen < 0 || (dv->n_pen > 0 && dv->pen == NULL)) {
        llm_err_set(err, "cuda backend: %d sampled rows for %d tokens in sampling mode, or an output missing",
                    dv->n_sample, n);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        const llm_sampling_row *r = &dv->sample[k];
        float it = r->p.temperature != 0.0f ? 1.0f / r->p.temperature : 0.0f;
        if (!(r->p.temperature >= 0.0f && r->p.temperature <= LLM_SAMPLING_MAX_TEMPERATURE) || !isfinite(it) ||
            !(r->p.top_p > 0.0f && r->p.top_p <= 1.0f) || !(r->p.min_p >= 0.0f && r->p.min_p <= 1.0f) ||
            !(r->p.repetition_penalty > 0.0f && r->p.repetition_penalty <= 10.0f) ||
            !(r->p.presence_penalty >= -2.0f && r->p.presence_penalty <= 2.0f) ||
            !(r->p.frequency_penalty >= -2.0f && r->p.frequency_penalty <= 2.0f) ||
            r->p.n_logprobs < 0 || r->p.n_logprobs > LLM_SAMPLING_MAX_LOGPROBS || !(r->u >= 0.0 && r->u < 1.0) ||
            r->pen_off < 0 || r->pen_n < 0 || r->bias_n < 0 || r->pen_off > dv->n_pen - r->pen_n ||
            r->bias_n > dv->n_pen - r->pen_off - r->pen_n) {
            llm_err_set(err, "cuda backend: sampled row %d: parameters or penalty pairs out of range", r->row);
            return -1;
        }
    }
    return 0;
}

void cuda_sample_free(cu_state *st)
{
    cudaFree(st->samp.dev);
    cudaFreeHost(st->samp.host);
    st->samp.dev = st->samp.host = NULL;
    st->samp.cap = st->samp.pen_cap = 0;
}

int cuda_sample_reserve(cu_state *st, int n, int n_pen)
{
    cu_sampler *sp = &st->samp;
    if (n <= sp->cap && n_pen <= sp->pen_cap)
        return 0;
    int cap = n > sp->cap ? (n > 2 * sp->cap ? n : 2 * sp->cap) : sp->cap;
    int pen_cap = n_pen > sp->pen_cap ? (n_pen > 2 * sp->pen_cap ? n_pen : 2 * sp->pen_cap) : sp->pen_cap;
    cap = cap < 16 ? 16 : cap;
    pen_cap = pen_cap < 1024 ? 1024 : pen_cap;
    long rows = sp->rows;
    cudaStreamSynchronize(st->stream);
    cuda_sample_free(st);
    size_t bytes = up_bytes(cap, pen_cap) + down_bytes(cap);
    if (cudaMalloc(&sp->dev, bytes) != cudaSuccess ||
        cudaHostAlloc((void **)&sp->host, bytes, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        cuda_sample_free(st);
        return -1;
    }
    sp->cap = cap;
    sp->pen_cap = pen_cap;
    sp->rows = rows;
    return 0;
}

int cuda_sample_enqueue(cu_state *st, const llm_device_out *dv, cudaError_t *e)
{
    cu_sampler *sp = &st->samp;
    int n = dv->n_sample;
    if (n == 0)
        return 0;
    size_t rows_b = (size_t)n * sizeof(llm_sampling_row), pen_at = (size_t)sp->cap * sizeof(llm_sampling_row);
    size_t down = up_bytes(sp->cap, sp->pen_cap), lp_at = down + (size_t)sp->cap * 4,
           nt_at = down + (size_t)sp->cap * 8, top_at = down + (size_t)sp->cap * 12;
    memcpy(sp->host, dv->sample, rows_b);
    if (dv->n_pen > 0) /* no penalty windows: dv->pen may be NULL, which memcpy may not take even for 0 bytes */
        memcpy(sp->host + pen_at, dv->pen, (size_t)dv->n_pen * 8);
    if ((*e = cudaMemcpyAsync(sp->dev, sp->host, pen_at + (size_t)dv->n_pen * 8, cudaMemcpyHostToDevice,
                              st->stream)) != cudaSuccess)
        return -1;
    cuda_sample(st->logits, st->m->cfg.vocab_size, n, (const llm_sampling_row *)sp->dev,
                (const int32_t *)(sp->dev + pen_at), (int32_t *)(sp->dev + down), (float *)(sp->dev + lp_at),
                (llm_token_logprob *)(sp->dev + top_at), (int32_t *)(sp->dev + nt_at), 0, st->stream);
    *e = cudaMemcpyAsync(sp->host + down, sp->dev + down, top_at - down + (size_t)n * LLM_SAMPLING_MAX_LOGPROBS * sizeof(llm_token_logprob), cudaMemcpyDeviceToHost,
                         st->stream);
    sp->rows += n;
    return *e == cudaSuccess ? 0 : -1;
}

void cuda_sample_scatter(cu_state *st, const llm_device_out *dv)
{
    cu_sampler *sp = &st->samp;
    size_t down = up_bytes(sp->cap, sp->pen_cap);
    const int32_t *ids = (const int32_t *)(sp->host + down), *nt = (const int32_t *)(sp->host + down + sp->cap * 8);
    const float *lp = (const float *)(sp->host + down + (size_t)sp->cap * 4);
    const llm_token_logprob *top = (const llm_token_logprob *)(sp->host + down + (size_t)sp->cap * 12);
    for (int j = 0; j < dv->n_sample; j++) {
        int row = dv->sample[j].row;
        dv->ids[row] = ids[j];
        dv->logprob[row] = lp[j];
        dv->n_top[j] = nt[j];
        memcpy(dv->top + (size_t)j * LLM_SAMPLING_MAX_LOGPROBS, top + (size_t)j * LLM_SAMPLING_MAX_LOGPROBS,
               (size_t)nt[j] * sizeof(llm_token_logprob));
    }
}
