/* The CUDA backend: init (device, weights, KV pool), forward (one step over a
 * batch of tokens from many sequences, the same math as engine/cpu/forward.c;
 * forward_device returns, for rows not in LLM_ROW_LOGITS mode, only the greedy id or the token sampled
 * on the device, cuda_sample.cu) and destroy.
 * Built into build/libllm_cuda.so, which llm-engine dlopen()s
 * (engine/backend_cuda_loader.c); its one exported symbol is
 * llm_cuda_backend_get_ops. All work runs on one stream; forward returns after
 * the stream has finished, like the CPU backend. Decode steps go through CUDA
 * Graphs (cuda_graph.cu); every other step is launched here, kernel by kernel.
 * Environment: LLM_CUDA_KV=f32|f16 picks the KV-cache type where opts.kv_dtype is
 * LLM_KV_AUTO (f16, f32 for all-F32 models: llm_kv_f16); LLM_CUDA_SYNC=1 checks for errors after every stage;
 * LLM_CUDA_GRAPHS=0 turns graphs off; LLM_CUDA_STATS=1 prints graph counters;
 * LLM_CUDA_EVENTS=1 times each stage with CUDA events (graphs off, no syncs). Init ends with the kernel
 * tuning (cuda_tune.cu), which picks the product paths per batch-size bucket on this device. */
#include <limits.h>
#include <time.h>
#include <stdlib.h>

#include "cuda_internal.cuh"

#define CU_MAX_TOKENS 65535 /* attention grid.z limit on work items */
#define CU_BLAS_WS_BYTES (32 << 20) /* what NVIDIA suggests for Hopper */

static int check_model(const llm_model *m, llm_err *err)
{
    const llm_config *c = &m->cfg;
    if (llm_model_check(m, "cuda backend", err) != 0)
        return -1;
    if (c->n_expert > 0 && c->n_expert_used > 32) { /* cuda_moe_route: a lane per choice */
        snprintf(err->msg, sizeof(err->msg), "cuda backend: %d experts per token (at most 32 here; --backend cpu "
                 "takes more)", c->n_expert_used);
        return -1;
    }
    int e0, e1; /* the experts held (a share of a model split by experts: its own, model_tp.c) */
    llm_experts_held(c, &e0, &e1);
    for (int l = 0; l < c->n_layers && c->n_expert > 0; l++)
        for (int e = e0; e < e1 && llm_layer_moe(c, &m->layers[l]); e++) {
            const llm_tensor *x = &m->layers[l].experts[3 * e], *x0 = &m->layers[l].experts[3 * e0];
            if (x[0].type != x0[0].type || x[1].type != x0[0].type || x[2].type != x0[2].type) {
                snprintf(err->msg, sizeof(err->msg), "cuda backend: layer %d: expert %d's weight types differ "
                         "(the experts' gate and up must share one type, their down one type): convert the model "
                         "with --dtype", l, e);
                return -1;
            }
        }
    return 0;
}

typedef struct {
    cu_state st;
} cu_impl;

static void free_scratch(cu_state *st)
{
    cudaFree(st->x); cudaFree(st->xn); cudaFree(st->qkv); cudaFree(st->att); cudaFree(st->gu); cudaFree(st->h);
    cudaFree(st->moe_f); cudaFree(st->moe_i);
    st->x = st->xn = st->qkv = st->att = st->gu = st->h = st->moe_f = NULL;
    st->moe_i = NULL;
    st->cap = 0;
}

static void cu_destroy(llm_backend *b)
{
    cu_impl *im = (cu_impl *)b->impl;
    if (im == NULL)
        return;
    cu_state *st = &im->st;
    cudaSetDevice(st->device);
    if (st->stream != NULL)
        cudaStreamSynchronize(st->stream);
    if (st->graphs.stats && (st->launches_b1 > 0 || st->launches_bn > 0))
        fprintf(stderr, "cuda: kernel launches per decode step (a cuBLAS call counts one, the sampler apart): "
                "%ld at 1 token, %ld at %d tokens\n", st->launches_b1, st->launches_bn, st->bn);
    for (int k = 0; k < 2 && (st->stage_timing || st->stage_events); k++) {
        if (st->stage_steps[k] == 0)
            continue;
        double tot = 0;
        for (int i = 0; i < CU_MAX_STAGES && st->stage_name[i] != NULL; i++)
            tot += st->stage_ms[k][i];
        fprintf(stderr, "cuda: stage times over %ld %s steps (%s), ms per step:", st->stage_steps[k],
                k == 0 ? "decode" : "prefill/mixed",
                st->stage_events ? "GPU time between events, no synchronisation" : "synchronised after each stage");
        for (int i = 0; i < CU_MAX_STAGES && st->stage_name[i] != NULL; i++)
            fprintf(stderr, " %s %.3f (%.0f%%);", st->stage_name[i], st->stage_ms[k][i] / (double)st->stage_steps[k],
                    tot > 0 ? 100.0 * st->stage_ms[k][i] / tot : 0.0);
        fprintf(stderr, " total %.3f\n", tot / (double)st->stage_steps[k]);
    }
    for (int i = 0; i < CU_MAX_EVENTS && st->stage_events; i++)
        if (st->ev[i] != NULL)
            cudaEventDestroy(st->ev[i]);
    cuda_graphs_destroy(st);
    cuda_tp_free(st);
    free_scratch(st);
    cudaFree(st->logits);
    cudaFree(st->am_ids);
    cudaFree(st->am_lp);
    cuda_sample_free(st);
    cudaFree(st->ws);
    cudaFree(st->dint);
    cudaFreeHost(st->hint);
    cudaFree(st->mm.act16);
    cudaFree(st->mm.deq);
    cudaFree(st->mm.tc_part);
    cudaFree(st->mm.xq);
    cudaFree(st->mm.xds);
    cudaFree(st->blas_ws);
    for (int p = 0; p < 2; p++) {
        cudaFree(st->kv.pool[p].k);
        cudaFree(st->kv.pool[p].v);
        cudaFree(st->kv.pool[p].ks);
        cudaFree(st->kv.pool[p].vs);
    }
    free(st->kv.at);
    if (st->mm.blas != NULL)
        cublasDestroy(st->mm.blas);
    cuda_free_weights(st);
    if (st->stream != NULL)
        cudaStreamDestroy(st->stream);
    free(im);
    b->impl = NULL;
}

/* The mixture-of-experts scratch of n tokens (cu_state.moe_f, moe_i; 0 for a dense model): the float
 * buffers in the order moe_carve cuts them, each rounded up to 64 floats (16-byte loads, 16-byte rows). */
#define MOE_ALIGN(f) (((f) + 63) / 64 * 64)
static size_t moe_carve(const llm_config *c, size_t n, float *base, float **out)
{
    if (c->n_expert == 0)
        return 0;
    size_t k = (size_t)c->n_expert_used, R = n * k, ff = (size_t)c->expert_ff, dim = (size_t)c->dim;
    const size_t wide = dim > ff ? dim : ff; /* the int8 activations: bytes, then a float pair per 32 */
    const size_t sizes[11] = { n * (size_t)c->n_expert, R, n, R * ff, R * dim, n * dim, R * 2 * ff,
                               (R * dim + 1) / 2, (R * ff + 1) / 2, (R * wide + 3) / 4, R * wide / 32 * 2 };
    size_t off = 0;
    for (int i = 0; i < 11; i++) {
        if (out != NULL)
            out[i] = base + off;
        off += MOE_ALIGN(sizes[i]);
    }
    return off;
}
static size_t moe_floats(const llm_config *c, size_t n) { return moe_carve(c, n, NULL, NULL); }
static size_t moe_ints(const llm_config *c, size_t n)
{
    return c->n_expert == 0 ? 0 : n * 3 * (size_t)c->n_expert_used + 2 * (size_t)c->n_expert + 2;
}

static size_t scratch_floats(const cu_state *st, int n)
{
    const llm_config *c = &st->m->cfg;
    size_t per = (size_t)c->dim * 2 + (size_t)st->qkv_ld + (size_t)st->q_dim + (size_t)st->gu_ld +
                 (size_t)st->gu_ld / 2;
    return (per + moe_floats(c, 1) + moe_ints(c, 1)) * (size_t)n;
}

/* A pool of *blocks blocks (+ the padding tokens' scratch block) for layers taking el bytes of K (and as many
 * of V) and sc bytes of their scales a block, zeroed; each try 10% smaller when the device refuses. 0 with
 * *blocks what it got (nothing allocated where el is 0: a pool no layer uses), or -1 with err filled. */
static int alloc_pool(cu_kv_layer *p, size_t el, size_t sc, long *blocks, const char *what, llm_err *err)
{
    if (el == 0)
        return 0;
    for (;;) {
        size_t nb = (size_t)(*blocks + 1);
        cudaError_t e1 = cudaMalloc(&p->k, el * nb);
        if (e1 == cudaSuccess)
            e1 = cudaMalloc(&p->v, el * nb);
        if (e1 == cudaSuccess && sc > 0)
            e1 = cudaMalloc((void **)&p->ks, sc * nb);
        if (e1 == cudaSuccess && sc > 0)
            e1 = cudaMalloc((void **)&p->vs, sc * nb);
        if (e1 == cudaSuccess)
            break;
        cudaFree(p->k);
        cudaFree(p->v);
        cudaFree(p->ks);
        p->k = p->v = NULL;
        p->ks = p->vs = NULL;
        cudaGetLastError(); /* allocation failures are not sticky; clear it */
        long next = *blocks * 9 / 10;
        if (next >= *blocks)
            next = *blocks - 1;
        if (next < 1) {
            llm_err_set(err, "cuda backend: cannot allocate a %s of even one block (%zu bytes): %s", what,
                        2 * (el + sc), cudaGetErrorString(e1));
            return -1;
        }
        *blocks = next;
    }
    size_t nb = (size_t)(*blocks + 1);
    cudaError_t e = cudaMemset(p->k, 0, el * nb);
    if (e == cudaSuccess)
        e = cudaMemset(p->v, 0, el * nb);
    if (e == cudaSuccess && sc > 0)
        e = cudaMemset(p->ks, 0, sc * nb);
    if (e == cudaSuccess && sc > 0)
        e = cudaMemset(p->vs, 0, sc * nb);
    if (e != cudaSuccess) {
        llm_err_set(err, "cuda backend: clearing the %s: %s", what, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* Bytes a block of a KV pool takes for n of the layers: of K (or of V), or (scales) of their q8_0 scales. */
static size_t kv_block_bytes(const cu_state *st, int n, int scales)
{
    size_t el = (size_t)n * (size_t)st->block_size * (size_t)st->kv_dim;
    if (scales)
        return st->kv.q8 ? el / (size_t)st->kv.qg * sizeof(float) : 0;
    return el * cu_kv_es(&st->kv);
}

/* The KV pools. With a window pool (opts.swa_blocks > 0 on a model with llm_swa_pool_layers, else resolved to
 * 0) the sliding-window layers keep their KV there and the main pool holds the other layers'; the window pool
 * is placed first, so what it takes is off the main pool's budget. The main pool: opts.kv_blocks when that
 * fits in free device memory, else (or when 0) what gpu_memory_fraction of the device leaves after a reserve
 * for the activations. Each shrinks on failure. */
static int alloc_kv(llm_backend *b, cu_state *st, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    const char *env = getenv("LLM_CUDA_KV");
    st->kv.kv16 = llm_kv_f16(st->m, b->opts.kv_dtype);
    if (b->opts.kv_dtype == LLM_KV_AUTO && env != NULL && strcmp(env, "f32") == 0)
        st->kv.kv16 = 0;
    else if (b->opts.kv_dtype == LLM_KV_AUTO && env != NULL && strcmp(env, "f16") == 0)
        st->kv.kv16 = 1;
    st->kv.q8 = b->opts.kv_dtype == LLM_KV_Q8_0 ||
                (b->opts.kv_dtype == LLM_KV_AUTO && env != NULL && strcmp(env, "q8_0") == 0);
    st->kv.qg = llm_kv_q8_group(c->head_dim);
    if (st->kv.q8)
        st->kv.kv16 = 0;
    b->opts.kv_dtype = st->kv.q8 ? LLM_KV_Q8_0 : st->kv.kv16 ? LLM_KV_F16 : LLM_KV_F32;
    int n_win = llm_swa_pool_layers(st->m);
    if (b->opts.swa_blocks < 0 || n_win == 0)
        b->opts.swa_blocks = 0;
    if (b->opts.swa_blocks == 0)
        n_win = 0;
    st->swa_blocks = b->opts.swa_blocks; /* (cu_in_window_pool from here on) */
    size_t es = cu_kv_es(&st->kv);
    size_t layer_el = (size_t)st->block_size * (size_t)st->kv_dim; /* one layer's K (or V) elements a block */
    int n_main = c->n_layers - n_win;
    size_t per_block_el = kv_block_bytes(st, n_main, 0), per_block_sc = kv_block_bytes(st, n_main, 1);
    size_t per_block = per_block_el + per_block_sc;
    size_t win_el = kv_block_bytes(st, n_win, 0), win_sc = kv_block_bytes(st, n_win, 1), win_block = win_el + win_sc;
    /* A model whose every layer is in the window pool has a main pool of tables only, which costs nothing on
     * the device: it is sized as the whole model's pool would be, not to the whole budget's worth of blocks. */
    size_t size_block = per_block > 0 ? per_block
                                      : kv_block_bytes(st, c->n_layers, 0) + kv_block_bytes(st, c->n_layers, 1);
    long blocks = b->opts.kv_blocks;
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        llm_err_set(err, "cuda backend: cudaMemGetInfo: %s", cudaGetErrorString(e));
        return -1;
    }
    double frac = b->opts.gpu_memory_fraction > 0 ? b->opts.gpu_memory_fraction : 0.90;
    double reserve = (double)scratch_floats(st, 2048) * 4 + (double)(512u << 20);
    double budget = (double)total_b * frac - (double)(total_b - free_b) - reserve;
    long swb = st->swa_blocks;
    /* A window pool that would take more than the budget is cut to half of it (the main pool has the rest). */
    if (swb > 0 && (double)(2 * win_block) * (double)(swb + 1) > budget) {
        long fit = budget > 0 ? (long)(budget / 2 / (double)(2 * win_block)) - 1 : 0;
        fprintf(stderr, "cuda: a window pool of %ld blocks (%.2f GiB) does not fit in the %.2f GiB that "
                "--gpu-memory-fraction leaves; %ld blocks instead\n", swb,
                (double)(2 * win_block) * (double)swb / (1 << 30), budget > 0 ? budget / (1 << 30) : 0.0,
                fit > 1 ? fit : 1);
        swb = fit > 1 ? fit : 1;
    }
    long swb_asked = swb;
    if (swb > 0 && alloc_pool(&st->kv.pool[1], win_el, win_sc, &swb, "window KV pool", err) != 0)
        return -1;
    if (swb < swb_asked)
        fprintf(stderr, "cuda: window KV pool shrunk from %ld to %ld blocks (device memory)\n", swb_asked, swb);
    size_t win_bytes = swb > 0 ? 2 * win_block * (size_t)(swb + 1) : 0;
    free_b = free_b > win_bytes ? free_b - win_bytes : 0;
    budget -= (double)win_bytes;
    /* An explicit pool that cannot fit would take the memory the steps' activations need and then fail
     * every step, so it is sized as an automatic one instead (and says so). */
    if (blocks > 0 && (double)(2 * per_block) * (double)(blocks + 1) > (double)free_b) {
        fprintf(stderr, "cuda: a KV pool of %ld blocks (%.2f GiB) does not fit in the %.2f GiB free; sized from "
                "--gpu-memory-fraction instead\n", blocks, (double)(2 * per_block) * (double)blocks / (1 << 30),
                (double)free_b / (1 << 30));
        blocks = 0;
    }
    if (blocks == 0) {
        blocks = budget > 0 ? (long)(budget / (double)(2 * size_block)) : 0;
        if (blocks > INT_MAX / 2)
            blocks = INT_MAX / 2;
        if (blocks < 1) {
            llm_err_set(err, "cuda backend: no device memory left for a KV cache (%.2f GiB free of %.2f GiB, "
                        "fraction %.2f%s)", (double)free_b / (1 << 30), (double)total_b / (1 << 30), frac,
                        swb > 0 ? ", after the window pool" : "");
            return -1;
        }
    }
    long asked = blocks;
    if (alloc_pool(&st->kv.pool[0], per_block_el, per_block_sc, &blocks, "KV cache", err) != 0)
        return -1;
    if (blocks < asked)
        fprintf(stderr, "cuda: KV pool shrunk from %ld to %ld blocks (device memory)\n", asked, blocks);
    st->kv.at = (cu_kv_layer *)calloc((size_t)c->n_layers, sizeof(cu_kv_layer));
    if (st->kv.at == NULL) {
        llm_err_set(err, "cuda backend: out of host memory");
        return -1;
    }
    /* each layer's share: the next (blocks + 1) * layer_el elements of its pool */
    size_t off[2] = { 0, 0 };
    for (int l = 0; l < c->n_layers; l++) {
        int w = cu_in_window_pool(st, &st->layers[l]);
        const cu_kv_layer *P = &st->kv.pool[w];
        cu_kv_layer *A = &st->kv.at[l];
        A->k = (char *)P->k + off[w] * es;
        A->v = (char *)P->v + off[w] * es;
        A->ks = st->kv.q8 ? P->ks + off[w] / (size_t)st->kv.qg : NULL;
        A->vs = st->kv.q8 ? P->vs + off[w] / (size_t)st->kv.qg : NULL;
        off[w] += (size_t)((w ? swb : blocks) + 1) * layer_el;
    }
    st->kv_blocks = (int)blocks;
    st->kv_scratch = (int)blocks;
    st->swa_blocks = (int)swb;
    b->opts.kv_blocks = (int)blocks;
    b->opts.swa_blocks = (int)swb;
    char wline[128] = "";
    if (swb > 0)
        snprintf(wline, sizeof(wline), "; window pool of %ld blocks for %d of %d layers (%.2f GiB)", swb, n_win,
                 c->n_layers, 2.0 * (double)(win_block * (size_t)swb) / (double)(1u << 30));
    fprintf(stderr, "cuda: KV pool of %ld blocks x %d tokens (%.2f GiB, %s)%s\n", blocks, st->block_size,
            2.0 * (double)(per_block * (size_t)blocks) / (double)(1u << 30), cu_kv_name(&st->kv), wline);
    return 0;
}

static int cu_forward_device(llm_backend *be, const llm_batch *b, const llm_device_out *am, float *logits,
                             llm_err *err);

/* Kernel tuning (cuda_tune.cu): on unless opts or LLM_CUDA_TUNE=0 say off, a knob is set by hand (`hand`),
 * or the stages are being timed; under the CPU emulation only when opts or LLM_CUDA_TUNE=1 ask for it. */
static int tune_wanted(const llm_backend *b, const cu_state *st, const char *hand)
{
    const char *env = getenv("LLM_CUDA_TUNE");
    int want = env != NULL ? strcmp(env, "0") != 0 : b->opts.kernel_tune >= 0;
#ifdef CU_EMULATE
    if (env == NULL) /* emulated steps are slow: only when asked for */
        want = b->opts.kernel_tune > 0;
#endif
    if (want && hand != NULL) {
        fprintf(stderr, "cuda: kernel tuning off: %s is set\n", hand);
        return 0;
    }
    /* (split over several GPUs, each timed step would wait on the other ranks' collectives) */
    if (want && b->opts.tp_size > 1) {
        fprintf(stderr, "cuda: kernel tuning off: the model is split over %d GPUs\n", b->opts.tp_size);
        return 0;
    }
    /* (an encoder's steps are whole inputs, never the decode steps the tuner times) */
    return want && !st->debug_sync && !st->stage_events && !st->m->cfg.bidirectional;
}

/* Int8 activation buffers for the dp4a GEMV: when LLM_CUDA_GEMV_DP4A=1 asks for it, or for the tuner to try
 * it on a model with Q8_0/Q4_0 weights. */
static void alloc_dp4a(cu_state *st, int tune)
{
    int q = 0;
    for (int l = 0; l < st->m->cfg.n_layers && !q; l++)
        q = cu_type_q(st->layers[l].down.type) || cu_type_q(st->layers[l].wo.type);
    if (!st->mm.dp4a && !(tune && q))
        return;
    const llm_config *cf = &st->m->cfg;
    int kmax = cf->dim > llm_ff_max(cf) ? cf->dim : llm_ff_max(cf);
    kmax = kmax > cf->n_heads * cf->head_dim ? kmax : cf->n_heads * cf->head_dim;
    size_t nbq = (size_t)CU_GEMV_MAX_TOKENS * (size_t)kmax;
    if (cudaMalloc((void **)&st->mm.xq, nbq) == cudaSuccess &&
        cudaMalloc((void **)&st->mm.xds, nbq / LLM_QK * 2 * sizeof(float)) == cudaSuccess) {
        st->mm.xq_k = kmax;
        return;
    }
    cudaGetLastError();
    cudaFree(st->mm.xq);
    st->mm.xq = NULL;
    if (st->mm.dp4a)
        fprintf(stderr, "cuda: no memory for int8 activations: LLM_CUDA_GEMV_DP4A ignored\n");
    st->mm.dp4a = st->tune.def.dp4a = 0;
}

static int cu_init(llm_backend *b, llm_err *err)
{
    const llm_model *m = b->model;
    if (check_model(m, err) != 0)
        return -1;
    const llm_config *c = &m->cfg;
    if (b->opts.kv_blocks < 0 || b->opts.block_size < 0 || b->opts.device < 0 ||
        b->opts.gpu_memory_fraction < 0 || b->opts.gpu_memory_fraction > 1) {
        llm_err_set(err, "cuda backend: negative kv_blocks, block_size or device, or gpu_memory_fraction "
                    "outside [0, 1]");
        return -1;
    }
    /* rope_kv_q8_kernel stages a token's k and v rows in shared memory (within the default 48 KiB) */
    if (b->opts.kv_dtype == LLM_KV_Q8_0 && 8 * (size_t)c->n_kv_heads * (size_t)c->head_dim > 48 * 1024) {
        llm_err_set(err, "cuda backend: a q8_0 KV cache needs n_kv_heads * head_dim <= 6144 (this model: %d)",
                    c->n_kv_heads * c->head_dim);
        return -1;
    }
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        llm_err_set(err, "cuda backend: no CUDA device available (%s)",
                    e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
        return -1;
    }
    if (b->opts.device >= ndev) {
        llm_err_set(err, "cuda backend: device %d requested, %d present", b->opts.device, ndev);
        return -1;
    }
    if ((e = cudaSetDevice(b->opts.device)) != cudaSuccess) {
        llm_err_set(err, "cuda backend: cudaSetDevice(%d): %s", b->opts.device, cudaGetErrorString(e));
        return -1;
    }
    if (b->opts.block_size == 0)
        b->opts.block_size = 16;
    const int load_threads = b->opts.threads; /* the weights' staging on the host; the steps use one */
    b->opts.threads = 1;

    cu_impl *im = (cu_impl *)calloc(1, sizeof(*im));
    if (im == NULL) {
        llm_err_set(err, "cuda backend: out of host memory");
        return -1;
    }
    b->impl = im;
    cu_state *st = &im->st;
    const char *dbg = getenv("LLM_CUDA_SYNC");
    st->debug_sync = dbg != NULL && dbg[0] == '1';
    const char *stats = getenv("LLM_CUDA_STATS");
    st->stage_timing = st->debug_sync && stats != NULL && stats[0] == '1';
    const char *evs = getenv("LLM_CUDA_EVENTS");
    st->stage_events = !st->stage_timing && evs != NULL && evs[0] == '1';
    for (int i = 0; i < CU_MAX_EVENTS && st->stage_events; i++)
        if (cudaEventCreate(&st->ev[i]) != cudaSuccess) {
            st->ev[i] = NULL;
            st->stage_events = 0; /* no timing then; the backend still runs */
            cudaGetLastError();
        }
    st->m = m;
    st->device = b->opts.device;
    st->block_size = b->opts.block_size;
    st->q_dim = c->n_heads * c->head_dim;
    st->kv_dim = c->n_kv_heads * c->head_dim;
    st->qkv_ld = st->q_dim + 2 * st->kv_dim;
    /* gate|up rows of the widest dense FFN (or Qwen 2 MoE's shared expert; ERNIE 4.5 MoE's dense first layers are
     * wider than its shared experts); a mixture of experts without dense layers or a shared expert has none,
     * and its hidden_dim (the file's dense width) sizes nothing: 1 keeps the buffers real */
    const llm_layer *moe0 = llm_moe_layer0(m);
    st->gu_ld = 2 * (moe0 == NULL || c->dense_ff > 0 || cu_has_mat(&moe0->w_gate) ? llm_ff_max(c) : 1);

    cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, st->device)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        llm_err_set(err, "cuda backend: device setup: %s", cudaGetErrorString(e));
        cu_destroy(b);
        return -1;
    }
    st->n_sms = prop.multiProcessorCount;
    int group = c->n_heads / c->n_kv_heads;
    int qt_scalar = cuda_att_q_tile(group, c->head_dim, prop.sharedMemPerBlockOptin);
    int qt_tc = cuda_att_tc_q_tile(group, c->head_dim, prop.sharedMemPerBlockOptin);
    /* With the tensor-core kernel every step with q_tile > 1 goes to it, so items are sized for its shared
     * memory; the scalar kernel then only sees q_tile 1 (decode shapes the register kernel does not take). */
    st->att_tc = qt_tc >= 2;
    st->q_tile_max = st->att_tc ? qt_tc : qt_scalar;
    if (qt_scalar == 0) {
        llm_err_set(err, "cuda backend: head_dim %d with %d query heads per kv head needs more shared memory "
                    "than the device's %zu bytes", c->head_dim, group, (size_t)prop.sharedMemPerBlockOptin);
        cu_destroy(b);
        return -1;
    }
    st->smem_max = cuda_att_smem(st->att_tc ? 1 : st->q_tile_max, group, c->head_dim);
    if (st->att_tc && cuda_att_tc_smem(st->q_tile_max, group, c->head_dim) > st->smem_max)
        st->smem_max = cuda_att_tc_smem(st->q_tile_max, group, c->head_dim);
    if (cuda_att_prepare(st->smem_max) != 0) {
        llm_err_set(err, "cuda backend: cannot allow %zu bytes of shared memory for attention", st->smem_max);
        cu_destroy(b);
        return -1;
    }
    if (cuda_tcgemm_prepare() != 0)
        fprintf(stderr, "cuda: the tensor-core weight GEMM's shared memory was refused; cuBLAS takes its products\n");
    cublasStatus_t bs = cublasCreate(&st->mm.blas);
    if (bs != CUBLAS_STATUS_SUCCESS || cublasSetStream(st->mm.blas, st->stream) != CUBLAS_STATUS_SUCCESS) {
        st->mm.blas = bs == CUBLAS_STATUS_SUCCESS ? st->mm.blas : NULL;
        llm_err_set(err, "cuda backend: cuBLAS initialisation failed (status %d)", (int)bs);
        cu_destroy(b);
        return -1;
    }
    st->mm.stream = st->stream;
    /* GEMV (fused dequantisation) up to this many tokens, cuBLAS above. Measured on the H200 (3B preset,
     * tests/gpu/profile.sh): bf16 cuBLAS wins from 2 tokens (batch 8: 4.1 vs 9.6 ms a step); Q4_0's GEMV
     * up to 4 (cuBLAS first dequantises every matrix: 18 ms a step at any batch); Q8_0's GEMV at 8 tokens
     * (16.1 ms) still beat its cuBLAS path at 32 (18.5 ms), so it keeps 8. */
    const char *gm = getenv("LLM_CUDA_GEMV_MAX"), *gq = getenv("LLM_CUDA_GEMV_MAX_Q");
    st->mm.gemv_max = gm != NULL ? atoi(gm) : 1;
    st->mm.gemv_max_q8 = gq != NULL ? atoi(gq) : CU_GEMV_MAX_TOKENS;
    st->mm.gemv_max_q4 = gq != NULL ? atoi(gq) : 4;
    const char *sh = getenv("LLM_CUDA_GEMV_SHAPE");
    if (sh != NULL && sh[0] != '\0') {
        int r = 0, u = 0;
        if (sscanf(sh, "%dx%d", &r, &u) == 2 && cuda_gemv_shape_ok(r, u)) {
            st->mm.shape_r = r;
            st->mm.shape_u = u;
        } else {
            fprintf(stderr, "cuda: LLM_CUDA_GEMV_SHAPE=%s is not one of 1x4 1x8 1x12 2x2 2x4 4x2: ignored\n", sh);
        }
    }
    /* RMSNorm + QKV + RoPE + KV write and RMSNorm + gate|up + SwiGLU as one GEMV each where the GEMV takes
     * the step (cuda_gemv_fused_ok); LLM_CUDA_FUSE=0 launches them one by one as before. */
    const char *fu = getenv("LLM_CUDA_FUSE");
    st->mm.fuse = !(fu != NULL && strcmp(fu, "0") == 0);
    /* Programmatic dependent launch for every kernel (see cuda_internal.cuh); off unless the tuner or
     * LLM_CUDA_PDL=1 turns it on. */
    const char *pdl = getenv("LLM_CUDA_PDL");
    cuda_set_pdl(pdl != NULL && strcmp(pdl, "1") == 0);
    /* Tensor-core weight-only GEMM for GEMV_MAX < n <= N tokens (cuda_tcgemm.cu). By default (the tuner
     * off) up to 64 tokens for Q8_0/Q4_0 only: there the alternative writes a dequantised bf16 copy of each
     * matrix every call (~18 ms a step at any batch on the H200). LLM_CUDA_TC_GEMM=N sets the limit for all
     * (0: off). */
    const char *tc = getenv("LLM_CUDA_TC_GEMM");
    st->mm.tc_max = tc != NULL ? atoi(tc) : 0;
    st->mm.tc_max_q = tc != NULL ? atoi(tc) : 64;
    st->mm.sms = st->n_sms;
    /* Mixture-of-experts steps of at least LLM_CUDA_MOE_TC=N tokens take the grouped tensor-core GEMM (0:
     * never); by default those with 8 rows an expert on average (not measured on a GPU yet) */
    const char *mt = getenv("LLM_CUDA_MOE_TC");
    st->moe_tc = mt != NULL && atoi(mt) >= 0 ? atoi(mt) : -1;
    const char *dp = getenv("LLM_CUDA_GEMV_DP4A");
    st->mm.dp4a = dp != NULL && strcmp(dp, "1") == 0; /* needs the buffers alloc_dp4a makes after the load */
    st->tune.def = cuda_knobs_get(st);
    /* Any of these set by hand means the user measures one path: the tuner leaves the knobs alone. */
    const char *hand = gm != NULL ? "LLM_CUDA_GEMV_MAX" : gq != NULL ? "LLM_CUDA_GEMV_MAX_Q"
                       : sh != NULL ? "LLM_CUDA_GEMV_SHAPE" : fu != NULL ? "LLM_CUDA_FUSE"
                       : pdl != NULL ? "LLM_CUDA_PDL" : tc != NULL ? "LLM_CUDA_TC_GEMM"
                       : dp != NULL ? "LLM_CUDA_GEMV_DP4A" : NULL;
    /* A fixed cuBLAS workspace: without one, cuBLAS may allocate inside a graph capture. */
    if ((e = cudaMalloc(&st->blas_ws, CU_BLAS_WS_BYTES)) != cudaSuccess ||
        cublasSetWorkspace(st->mm.blas, st->blas_ws, CU_BLAS_WS_BYTES) != CUBLAS_STATUS_SUCCESS) {
        llm_err_set(err, "cuda backend: cannot set a %d MiB cuBLAS workspace (%s)", CU_BLAS_WS_BYTES >> 20,
                    cudaGetErrorString(e));
        cu_destroy(b);
        return -1;
    }
    fprintf(stderr, "cuda: %s, %d SMs, %.1f GiB\n", prop.name, prop.multiProcessorCount,
            (double)prop.totalGlobalMem / (double)(1u << 30));
    int tune = tune_wanted(b, st, hand);
    if (cuda_load_weights(st, load_threads, err) != 0 || alloc_kv(b, st, err) != 0) {
        cu_destroy(b);
        return -1;
    }
    alloc_dp4a(st, tune);
    /* Prefill attention on the mma.sync kernel: LLM_CUDA_ATT_TC=2 forces it, =1 the wmma kernel; unset, the
     * kernel tuning times both (f16 KV and a head_dim it takes). */
    const char *atc = getenv("LLM_CUDA_ATT_TC");
    int mma_ok = st->att_tc && cuda_att_mma_ok(c->head_dim, st->kv.kv16) && cuda_att_mma_prepare(c->head_dim) == 0;
    st->att_mma = mma_ok && atc != NULL && strcmp(atc, "2") == 0;
    st->att_mma_tune = mma_ok && atc == NULL;
    if (atc != NULL && strcmp(atc, "2") == 0 && !mma_ok)
        fprintf(stderr, "cuda: LLM_CUDA_ATT_TC=2 needs an f16 KV cache and head_dim 32, 64 or 128: the wmma "
                "prefill attention runs\n");
    /* The KV memset ran on the legacy stream, which a non-blocking stream does not wait for. */
    if ((e = cudaDeviceSynchronize()) != cudaSuccess) {
        llm_err_set(err, "cuda backend: initialisation: %s", cudaGetErrorString(e));
        cu_destroy(b);
        return -1;
    }
    cuda_graphs_init(st);
    if (tune) {
        const char *reps = getenv("LLM_CUDA_TUNE_REPS"), *mx = getenv("LLM_CUDA_TUNE_MAX");
        const char *file = getenv("LLM_CUDA_TUNE_FILE");
        int max_batch = mx != NULL ? atoi(mx) : b->opts.tune_max_batch > 0 ? b->opts.tune_max_batch : 256;
        if (cuda_tune_run(st, max_batch, reps != NULL ? atoi(reps) : 5, file != NULL ? file : b->opts.tune_file,
                          err) != 0) {
            cu_destroy(b);
            return -1;
        }
        b->tune_s = st->tune.seconds;
    }
    if (cuda_tp_init(st, &b->opts, err) != 0) {
        cu_destroy(b);
        return -1;
    }
    b->forward_device = cu_forward_device;
    b->weight_bytes = st->weight_bytes;
    const char *ds = getenv("LLM_CUDA_SAMPLE"); /* 0: sampled requests' logits go to the host sampler */
    b->device_sampling = !(ds != NULL && strcmp(ds, "0") == 0);
    return 0;
}

/* Host-side checks, as the CPU backend makes them: nothing out of range reaches a kernel. */
static int check_batch(const cu_state *st, const llm_batch *b, llm_err *err)
{
    if (b->n_tokens > CU_MAX_TOKENS) {
        llm_err_set(err, "cuda backend: a step of %d tokens is more than %d", b->n_tokens, CU_MAX_TOKENS);
        return -1;
    }
    const llm_config *c = &st->m->cfg;
    if (llm_batch_check(b, c, st->block_size, st->kv_blocks, st->swa_blocks, "cuda backend", err) != 0)
        return -1;
    for (int t = 0; c->bidirectional && t < b->n_tokens; t++) { /* as engine/cpu/forward.c: inputs whole, no logits */
        if (b->pos[t] != (t == 0 || b->seq[t] != b->seq[t - 1] ? 0 : b->pos[t - 1] + 1)) {
            llm_err_set(err, "cuda backend: an encoder's input must be whole in one step (batch index %d, "
                        "position %d)", t, b->pos[t]);
            return -1;
        }
        if (b->want_logits[t] && b->want_logits[t] != LLM_WANT_HIDDEN) {
            llm_err_set(err, "cuda backend: an embedding model (%s) gives hidden states only, no logits",
                        st->m->arch);
            return -1;
        }
    }
    return 0;
}

static int grow_dev(cu_state *st, void **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    st->buf_gen++;
    cudaStreamSynchronize(st->stream);
    cudaFree(*p);
    *p = NULL;
    *cap = 0;
    if (cudaMalloc(p, need) != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        return -1;
    }
    *cap = need;
    return 0;
}

int cuda_ensure_scratch(cu_state *st, int n)
{
    if (n <= st->cap)
        return 0;
    const llm_config *c = &st->m->cfg;
    st->buf_gen++;
    cudaStreamSynchronize(st->stream);
    free_scratch(st);
    size_t N = (size_t)n;
    if (cudaMalloc(&st->x, N * c->dim * 4) != cudaSuccess || cudaMalloc(&st->xn, N * c->dim * 4) != cudaSuccess ||
        cudaMalloc(&st->qkv, N * st->qkv_ld * 4) != cudaSuccess ||
        cudaMalloc(&st->att, N * st->q_dim * 4) != cudaSuccess ||
        cudaMalloc(&st->gu, N * st->gu_ld * 4) != cudaSuccess ||
        cudaMalloc(&st->h, N * (st->gu_ld / 2) * 4) != cudaSuccess ||
        (c->n_expert > 0 && (cudaMalloc(&st->moe_f, moe_floats(c, N) * 4) != cudaSuccess ||
                             cudaMalloc(&st->moe_i, moe_ints(c, N) * 4) != cudaSuccess))) {
        cudaGetLastError();
        free_scratch(st);
        return -1;
    }
    if (c->n_expert > 0) {
        size_t k = (size_t)c->n_expert_used;
        float *b[11];
        moe_carve(c, N, st->moe_f, b);
        st->moe_rl = b[0];
        st->moe_w = b[1];
        st->moe_sg = b[2];
        st->moe_h = b[3];
        st->moe_o = b[4];
        st->moe_sh = b[5];
        st->moe_gu = b[6];
        st->moe_x16 = b[7];
        st->moe_h16 = b[8];
        st->moe_q.xq = (int8_t *)b[9];
        st->moe_q.xds = b[10];
        st->moe_ids = st->moe_i;
        st->moe_pos = st->moe_ids + N * k;
        st->moe_tok = st->moe_pos + N * k;
        st->moe_off = st->moe_tok + N * k;
    }
    st->cap = n;
    return 0;
}

/* The pinned host buffer for per-step ints (doubled when it grows) and its device twin. */
int cuda_ensure_ints(cu_state *st, size_t n_ints)
{
    if (n_ints * 4 > st->hint_cap) {
        cudaStreamSynchronize(st->stream);
        cudaFreeHost(st->hint);
        st->hint = NULL;
        st->hint_cap = 0;
        if (cudaHostAlloc((void **)&st->hint, n_ints * 4 * 2, cudaHostAllocDefault) != cudaSuccess) {
            cudaGetLastError();
            st->hint = NULL;
            return -1;
        }
        st->hint_cap = n_ints * 4 * 2;
    }
    return grow_dev(st, (void **)&st->dint, &st->dint_cap, st->hint_cap);
}

int cuda_ensure_ws(cu_state *st, size_t floats)
{
    return grow_dev(st, (void **)&st->ws, &st->ws_floats, floats * 4) == 0 ? 0 : -1;
}

int cuda_ensure_logits(cu_state *st, int rows)
{
    if (rows <= st->logits_cap)
        return 0;
    st->buf_gen++;
    cudaStreamSynchronize(st->stream);
    cudaFree(st->logits);
    cudaFree(st->am_ids);
    cudaFree(st->am_lp);
    st->logits = NULL;
    st->am_ids = NULL;
    st->am_lp = NULL;
    st->logits_cap = 0;
    if (cudaMalloc(&st->logits, (size_t)rows * st->m->cfg.vocab_size * 4) != cudaSuccess ||
        cudaMalloc(&st->am_ids, (size_t)rows * 4) != cudaSuccess ||
        cudaMalloc(&st->am_lp, (size_t)rows * 4) != cudaSuccess) {
        cudaGetLastError();
        cudaFree(st->logits);
        cudaFree(st->am_ids);
        st->logits = NULL;
        st->am_ids = NULL;
        st->am_lp = NULL;
        return -1;
    }
    st->logits_cap = rows;
    return 0;
}

int cuda_mm_set(cu_state *st, const cu_matset *S, const float *x, int ldx, float *y, int ldy, int n, llm_err *err)
{
    int off = 0;
    for (int i = 0; i < S->n; i++) {
        if (cuda_matmul(&st->mm, &S->m[i], x, ldx, y + off, ldy, n, 0, err->msg, sizeof(err->msg)) != 0)
            return -1;
        off += S->m[i].rows;
    }
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Synchronised wall time of the stage that just ended (LLM_CUDA_SYNC=1 and LLM_CUDA_STATS=1). */
static void stage_time(cu_state *st, const char *stage)
{
    double t = now_ms();
    for (int i = 0; i < CU_MAX_STAGES; i++) {
        if (st->stage_name[i] == NULL)
            st->stage_name[i] = stage;
        if (st->stage_name[i] == stage) {
            st->stage_ms[st->stage_kind][i] += t - st->stage_t;
            break;
        }
    }
    st->stage_t = t;
}

int cuda_stage_check(cu_state *st, const char *stage, int layer, llm_err *err)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && st->debug_sync)
        e = cudaStreamSynchronize(st->stream);
    if (e != cudaSuccess) {
        llm_err_set(err, "cuda backend: %s (layer %d): %s", stage, layer, cudaGetErrorString(e));
        return -1;
    }
    if (st->stage_timing)
        stage_time(st, stage);
    if (st->stage_events && st->n_ev < CU_MAX_EVENTS) {
        st->ev_stage[st->n_ev] = stage;
        cudaEventRecord(st->ev[st->n_ev++], st->stream);
    }
    return 0;
}

/* LLM_CUDA_EVENTS: after the step's stream finished, each stage's time is the span from the event before it. */
static void stage_events_collect(cu_state *st)
{
    for (int k = 1; k < st->n_ev; k++) {
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, st->ev[k - 1], st->ev[k]) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        for (int i = 0; i < CU_MAX_STAGES; i++) {
            if (st->stage_name[i] == NULL)
                st->stage_name[i] = st->ev_stage[k];
            if (st->stage_name[i] == st->ev_stage[k]) {
                st->stage_ms[st->stage_kind][i] += ms;
                break;
            }
        }
    }
    st->n_ev = 0;
}


/* A 16-bit activation write or its product failed: out of device memory for the scratch, or a cuBLAS error
 * already in err->msg. */
static int act16_fail(cu_state *st, llm_err *err, const char *what)
{
    if (st->mm.nomem)
        llm_err_set(err, "cuda backend: out of device memory for the %s activations", what);
    return -1;
}

/* out = S · RMSNorm(x) for n tokens: the norm writes the 16-bit activations the product reads where it goes
 * through cuBLAS / the tensor-core GEMM, else a float copy the GEMV (or a set of several matrices) reads.
 * norm NULL (OLMo 2, normed after its blocks only): out = S · x. */
static int norm_product(cu_state *st, const cu_matset *S, const float *norm, float *out, int ld, int n,
                        const char *what, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    if (c->layer_norm) { /* ModernBERT: a LayerNorm (none before its first layer's attention) */
        if (norm != NULL)
            cuda_layer_norm(st->x, c->dim, norm, st->xn, c->dim, n, c->dim, c->norm_eps, NULL, st->stream);
        return cuda_mm_set(st, S, norm != NULL ? st->xn : st->x, c->dim, out, ld, n, err);
    }
    if (norm == NULL)
        return cuda_mm_set(st, S, st->x, c->dim, out, ld, n, err);
    if (S->n == 1 && cuda_mm_act16(&st->mm, &S->m[0], n)) {
        if (cuda_rmsnorm_act16(&st->mm, &S->m[0], st->x, c->dim, norm, n, c->norm_eps) != 0 ||
            cuda_matmul(&st->mm, &S->m[0], NULL, 0, out, ld, n, 0, err->msg, sizeof(err->msg)) != 0)
            return act16_fail(st, err, what);
        return 0;
    }
    cuda_rmsnorm(st->x, c->dim, norm, st->xn, c->dim, n, c->dim, c->norm_eps, NULL, st->stream);
    return cuda_mm_set(st, S, st->xn, c->dim, out, ld, n, err);
}

/* The tables a layer's KV write and causal attention go through: its pool's (a window pool's own tables). */
static const cu_tokinfo *layer_ti(const cu_state *st, const cu_step *sp, const cu_layer *L)
{
    return cu_in_window_pool(st, L) ? &sp->ti_win : &sp->ti;
}

/* x -> RMSNorm -> QKV -> RoPE on q, k and v into the paged cache: one fused GEMV where the GEMV takes the
 * step; else the norm (writing the 16-bit activations when cuBLAS / the tensor-core GEMM reads them), the
 * product, the biases and q/k norms of the models that have them (qkv_prep_kernel) and rope_kv_kernel. */
static int layer_attention_in(cu_state *st, const cu_step *sp, const cu_layer *L, int l, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    const int n = sp->n;
    /* Qwen, Gemma 3: biases / q-k norms between product and rope */
    int prep = L->bq != NULL || L->q_norm != NULL;
    /* Gemma 3's sliding-window layers rotate with their own tables (the same ones for every other model) */
    const float *cos_t = L->swa ? st->rope_cos_swa : st->rope_cos, *sin_t = L->swa ? st->rope_sin_swa : st->rope_sin;
    if (L->nope) /* SmolLM3's NoPE layers: no tables, the kernels then write q and k unrotated */
        cos_t = sin_t = NULL;
    const cu_tokinfo *ti = layer_ti(st, sp, L);
    /* a q8_0 cache's scale spans 8-32 elements of a row, more than the fused GEMV's epilogue sees at once */
    if (!prep && !st->kv.q8 && st->mm.fuse && !c->layer_norm && L->attn_norm != NULL && L->qkv.n == 1 &&
        cuda_gemv_fused_ok(&st->mm, &L->qkv.m[0], n, c->dim)) {
        cuda_gemv_norm_qkv_rope(&st->mm, &L->qkv.m[0], st->x, c->dim, n, L->attn_norm, c->norm_eps, st->qkv,
                                st->qkv_ld, ti, cos_t, sin_t, c->head_dim / 2, c->n_heads, c->n_kv_heads,
                                (int)c->rope_layout, &st->kv, l, st->block_size);
        return cuda_stage_check(st, "norm + qkv", l, err);
    }
    if (norm_product(st, &L->qkv, L->attn_norm, st->qkv, st->qkv_ld, n, "qkv", err) != 0 ||
        cuda_stage_check(st, "norm + qkv", l, err))
        return -1;
    if (prep && c->qk_norm_full && L->q_norm != NULL && st->tp.size > 1) {
        /* OLMo 2's norms span whole q / k rows, which are split over the ranks: each rank's sums of squares
         * (in xn, free after the product) summed over the ranks first */
        if (L->bq != NULL)
            cuda_qkv_prep(st->qkv, st->qkv_ld, n, L->bq, L->bk, L->bv, NULL, NULL, c->n_heads, c->n_kv_heads,
                          c->head_dim, 0, c->norm_eps, NULL, 1, st->stream);
        cuda_qk_ssq(st->qkv, st->qkv_ld, n, c->n_heads * c->head_dim, c->n_kv_heads * c->head_dim, st->xn,
                    st->stream);
        cuda_tp_allreduce(st, st->xn, st->xn, (size_t)n * 2);
        cuda_qkv_prep(st->qkv, st->qkv_ld, n, NULL, NULL, NULL, L->q_norm, L->k_norm, c->n_heads, c->n_kv_heads,
                      c->head_dim, 1, c->norm_eps, st->xn, st->tp.size, st->stream);
    } else if (prep) {
        cuda_qkv_prep(st->qkv, st->qkv_ld, n, L->bq, L->bk, L->bv, L->q_norm, L->k_norm, c->n_heads, c->n_kv_heads,
                      c->head_dim, c->qk_norm_full, c->norm_eps, NULL, 1, st->stream);
    }
    cuda_rope_kv_write(st->qkv, st->qkv_ld, ti, n, cos_t, sin_t, c->head_dim / 2, c->n_heads, c->n_kv_heads,
                       (int)c->rope_layout, &st->kv, l, st->block_size, st->stream);
    return cuda_stage_check(st, "rope + kv write", l, err);
}

/* The output projection of a block (wo, w_down) of n rows, added to the residual x: accumulated into x by the
 * product itself, or, where the layer has a norm after the block (Gemma 2 / 3) or the model a residual scale
 * (Granite), written to st->xn (free between the norms that fill it) and added normed, x += RMSNorm(W·in) * post
 * (cuda_rmsnorm_add), or scaled, x += W·in * residual_scale (cuda_add_scaled). bias (gpt-oss's bo; NULL: none)
 * is added to the product first. Split over GPUs, each rank's product is a partial sum: rank 0 accumulates its
 * own into x as on one GPU, the others write theirs aside, and the all-reduce sums them all into x (nothing to
 * add after it); normed or scaled, every rank's goes aside and the sum there is then added as above. */
static int project_out(cu_state *st, const cu_mat *W, const float *in, int ldin, int n, const float *bias,
                       const float *post, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    const int tp = st->tp.size > 1, scaled = post != NULL || c->residual_scale > 0.0f;
    const int aside = scaled || (tp && st->tp.rank > 0);
    float *y = aside ? st->xn : st->x, *sum = scaled ? st->xn : st->x;
    if (cuda_matmul(&st->mm, W, in, ldin, y, c->dim, n, !aside, err->msg, sizeof(err->msg)))
        return -1;
    if (tp)
        cuda_tp_allreduce(st, y, sum, (size_t)n * (size_t)c->dim);
    if (bias != NULL)
        cuda_add_bias(sum, c->dim, bias, c->dim, n, st->stream);
    if (post != NULL)
        cuda_rmsnorm_add(st->xn, post, st->x, n, c->dim, c->norm_eps, st->stream);
    else if (scaled)
        cuda_add_scaled(st->xn, c->residual_scale, st->x, n, c->dim, st->stream);
    return 0;
}

/* x += Wdown · SwiGLU(gate|up · RMSNorm(x)) (GeGLU for Gemma): the norm, product and SwiGLU as one fused GEMV
 * where the GEMV takes the step; else the norm and the SwiGLU write 16-bit activations for cuBLAS / the
 * tensor-core GEMM. */
static int layer_ffn(cu_state *st, const cu_layer *L, int l, int n, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    const int gelu = c->act; /* (cu_glu: 0 SiLU, 1 tanh GELU, 2 ModernBERT's erf GELU) */
    int down16 = 0; /* the SwiGLU wrote the down projection's 16-bit activations */
    if (st->mm.fuse && !c->layer_norm && L->ffn_norm != NULL && L->gate_up.n == 1 &&
        cuda_gemv_fused_ok(&st->mm, &L->gate_up.m[0], n, c->dim)) {
        cuda_gemv_norm_swiglu(&st->mm, &L->gate_up.m[0], st->x, c->dim, n, L->ffn_norm, c->norm_eps, st->h,
                              L->ff, gelu);
        if (cuda_stage_check(st, "norm + gate/up", l, err))
            return -1;
    } else {
        if (norm_product(st, &L->gate_up, L->ffn_norm, st->gu, st->gu_ld, n, "gate/up", err) != 0 ||
            cuda_stage_check(st, "norm + gate/up", l, err))
            return -1;
        down16 = cuda_mm_act16(&st->mm, &L->down, n);
        if (down16 ? cuda_swiglu_act16(&st->mm, &L->down, st->gu, st->gu_ld, n, gelu) != 0
                   : (cuda_swiglu(st->gu, st->gu_ld, st->h, L->ff, n, gelu, st->stream), 0))
            return act16_fail(st, err, "swiglu");
        if (cuda_stage_check(st, "swiglu", l, err))
            return -1;
    }
    if (project_out(st, &L->down, down16 ? NULL : st->h, L->ff, n, NULL, L->post_ffn_norm, err) != 0)
        return -1;
    return cuda_stage_check(st, "down", l, err);
}

/* The mixture-of-experts FFN (cuda_moe.cu): x += the token's chosen experts, weighted (+ the shared expert:
 * Qwen 2 MoE's gated, GraniteMoeShared's as it is), with the routing on the device; gpt-oss's router and experts
 * with their biases. */
static int layer_moe(cu_state *st, const cu_layer *L, int l, int n, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    const int E = c->n_expert, k = c->n_expert_used, gelu = c->act;
    const float *const *eb = L->exp_b[0] != NULL ? L->exp_b : NULL;
    cudaStream_t s = st->stream;
    cuda_rmsnorm(st->x, c->dim, L->ffn_norm, st->xn, c->dim, n, c->dim, c->norm_eps, NULL, s);
    if (cuda_matmul(&st->mm, &L->router, st->xn, c->dim, st->moe_rl, E, n, 0, err->msg, sizeof(err->msg)) != 0)
        return -1;
    if (L->router_b != NULL)
        cuda_add_bias(st->moe_rl, E, L->router_b, E, n, s);
    if (cuda_stage_check(st, "norm + router", l, err))
        return -1;
    if (L->shared) { /* the shared expert, dense, into moe_sh */
        if (cuda_mm_set(st, &L->gate_up, st->xn, c->dim, st->gu, st->gu_ld, n, err) != 0)
            return -1;
        cuda_swiglu(st->gu, st->gu_ld, st->h, L->ff, n, gelu, s);
        if (cuda_matmul(&st->mm, &L->down, st->h, L->ff, st->moe_sh, c->dim, n, 0, err->msg,
                        sizeof(err->msg)) != 0 || cuda_stage_check(st, "shared expert", l, err))
            return -1;
    }
    cuda_moe_route(st->moe_rl, L->exp_bias, n, E, k, c->moe_norm_topk, c->moe_sigmoid, c->moe_w_scale, st->xn, c->dim,
                   L->shexp_gate, st->moe_ids, st->moe_w, st->moe_sg, s);
    /* split by experts (model_tp.c), this device's rows are its own experts' choices only */
    int lo, hi;
    llm_experts_held(c, &lo, &hi);
    cuda_moe_sort(st->moe_ids, n, k, E, lo, hi, st->moe_off, st->moe_tok, st->moe_pos, s);
    if (cuda_stage_check(st, "route", l, err))
        return -1;
    int tc = st->moe_tc < 0 ? n * k >= 8 * E : st->moe_tc > 0 && n >= st->moe_tc;
    if (tc && cuda_moe_tc_ok(L->exp0)) {
        cuda_moe_tc(L->exp0, L->experts, E, st->moe_off, st->moe_tok, n * k, st->xn, c->dim, st->moe_x16,
                    st->moe_gu, st->moe_h16, st->moe_o, eb, gelu, s);
        if (cuda_stage_check(st, "experts (tensor cores)", l, err))
            return -1;
    } else {
        /* quantised experts on int8 activations when the dense GEMVs are (dp4a: the tuning's or the env's) */
        const cu_moe_i8 *q = st->mm.dp4a && cuda_moe_i8_ok(L->exp0) ? &st->moe_q : NULL;
        cuda_moe_gate_up(L->exp0, L->experts, E, n, k, st->moe_off, st->moe_tok, st->xn, c->dim, q, eb, st->moe_h,
                         gelu, s);
        if (cuda_stage_check(st, "experts gate/up", l, err))
            return -1;
        cuda_moe_down(L->exp0, L->experts, E, n * k, st->moe_off, st->moe_h, q, eb, st->moe_o, s);
        if (cuda_stage_check(st, "experts down", l, err))
            return -1;
    }
    /* split over GPUs, each rank's experts and shared expert give partial sums: rank 0 combines its own into x as
     * on one GPU, the others write theirs (scaled alike) aside (xn, read by nothing after the experts), and the
     * all-reduce sums them all into x */
    const int tp = st->tp.size > 1, mine = !tp || st->tp.rank == 0;
    cuda_moe_combine(mine ? st->x : st->xn, n, c->dim, k, st->moe_o, st->moe_pos, st->moe_w,
                     L->shared ? st->moe_sh : NULL, L->shexp_gate != NULL ? st->moe_sg : NULL, c->residual_scale,
                     !mine, s);
    if (tp)
        cuda_tp_allreduce(st, mine ? st->x : st->xn, st->x, (size_t)n * (size_t)c->dim);
    return cuda_stage_check(st, "combine", l, err);
}

int cuda_enqueue_step(cu_state *st, const cu_step *sp, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    cudaStream_t s = st->stream;
    int n = sp->n;
    if (st->stage_timing) {
        cudaStreamSynchronize(s);
        st->stage_t = now_ms();
        st->stage_kind = sp->plan.q_tile > 1;
        st->stage_steps[st->stage_kind]++;
    }
    if (st->stage_events) {
        st->stage_kind = sp->plan.q_tile > 1;
        st->stage_steps[st->stage_kind]++;
        st->ev_stage[0] = NULL;
        cudaEventRecord(st->ev[0], s);
        st->n_ev = 1;
    }
    if (c->encoder)
        return cuda_encoder_step(st, sp, err);
    const long launches0 = cu_launches;
    cuda_embed(&st->tok_embd, sp->d_tok, st->x, n, c->embd_scale, s);
    if (c->layer_norm) /* ModernBERT's embedding norm */
        cuda_layer_norm(st->x, c->dim, st->embd_norm, st->x, c->dim, n, c->dim, c->norm_eps, NULL, s);
    if (cuda_stage_check(st, "embedding", -1, err))
        return -1;
    for (int l = 0; l < c->n_layers; l++) {
        const cu_layer *L = &st->layers[l];
        if (layer_attention_in(st, sp, L, l, err) != 0)
            return -1;
        cu_att_plan plan = sp->plan; /* per layer: Gemma's sliding window and soft cap */
        plan.window = L->swa ? c->swa_window : 0;
        plan.softcap = c->attn_softcap;
        plan.sinks = L->sinks; /* (gpt-oss's) */
        const cu_tokinfo *ti = layer_ti(st, sp, L);
        if (c->bidirectional) { /* EmbeddingGemma: see cu_step */
            ti = L->swa ? &sp->ti_swa : &sp->ti_att;
            plan.window = L->swa ? c->swa_window / 2 * 2 + 1 : 0;
        }
        cuda_attention(&plan, sp->d_items, st->qkv, st->qkv_ld, ti, &st->kv, l, st->ws, st->att, n, s);
        if (cuda_stage_check(st, "attention", l, err))
            return -1;
        if (project_out(st, &L->wo, st->att, st->q_dim, n, L->bo, L->post_attn_norm, err) != 0)
            return -1;
        if (cuda_stage_check(st, "output projection", l, err))
            return -1;
        if ((L->moe ? layer_moe(st, L, l, n, err) : layer_ffn(st, L, l, n, err)) != 0)
            return -1;
    }
    if (sp->nw > 0) {
        (c->layer_norm ? cuda_layer_norm : cuda_rmsnorm)(st->x, c->dim, st->out_norm, st->xn, c->dim, sp->nw, c->dim,
                                                         c->norm_eps, sp->d_want, s);
    }
    if (sp->nw > 0 && !sp->hidden_only) {
        if (cuda_matmul(&st->mm, &st->output, st->xn, c->dim, st->logits, c->vocab_size, sp->nw, 0, err->msg,
                        sizeof(err->msg)))
            return -1;
        /* Gemma 2's cap, Granite's scale: before the argmax, the sampler and the copies out */
        if (c->final_softcap > 0.0f || c->logit_scale > 0.0f)
            cuda_logits_post(st->logits, c->vocab_size, c->vocab_size, sp->nw, c->final_softcap,
                             c->logit_scale > 0.0f ? 1.0f / c->logit_scale : 1.0f, s);
        if (sp->argmax)
            cuda_argmax(st->logits, c->vocab_size, sp->nw, st->am_ids, st->am_lp, s);
        if (cuda_stage_check(st, "classifier", -1, err))
            return -1;
    }
    if (sp->plan.q_tile == 1 && n == 1) /* a decode step (every item one token) */
        st->launches_b1 = cu_launches - launches0;
    else if (sp->plan.q_tile == 1 && n >= st->bn) {
        st->launches_bn = cu_launches - launches0;
        st->bn = n;
    }
    return 0;
}

int cuda_copy_out(cu_state *st, const llm_batch *b, const llm_device_out *am, int nw, float *logits, cudaError_t *e)
{
    size_t row_bytes = (size_t)st->m->cfg.vocab_size * 4;
    cudaStream_t s = st->stream;
    if (am == NULL) {
        *e = cudaMemcpyAsync(logits, st->logits, (size_t)nw * row_bytes, cudaMemcpyDeviceToHost, s);
        return *e == cudaSuccess ? 0 : -1;
    }
    if (cuda_sample_enqueue(st, am, e) != 0)
        return -1;
    if ((*e = cudaMemcpyAsync(am->ids, st->am_ids, (size_t)nw * 4, cudaMemcpyDeviceToHost, s)) != cudaSuccess ||
        (*e = cudaMemcpyAsync(am->logprob, st->am_lp, (size_t)nw * 4, cudaMemcpyDeviceToHost, s)) != cudaSuccess)
        return -1;
    /* Logits rows of the other tokens, one copy per run of consecutive rows. */
    int row = 0, run0 = -1;
    for (int i = 0; i <= b->n_tokens; i++) {
        int end = i == b->n_tokens;
        if (!end && !b->want_logits[i])
            continue;
        int skip = end || am->mode[i] != LLM_ROW_LOGITS;
        if (!skip && run0 < 0)
            run0 = row;
        if (skip && run0 >= 0) {
            *e = cudaMemcpyAsync((char *)logits + (size_t)run0 * row_bytes, (const char *)st->logits +
                                 (size_t)run0 * row_bytes, (size_t)(row - run0) * row_bytes,
                                 cudaMemcpyDeviceToHost, s);
            if (*e != cudaSuccess)
                return -1;
            run0 = -1;
        }
        row++;
    }
    return 0;
}

/* Rows that want their hidden state (LLM_WANT_HIDDEN): the final norm's output for row w is row w of st->xn
 * (the classifier's input); it goes over the start of the row's logits, after them in stream order. */
static int copy_hidden(cu_state *st, const llm_batch *b, float *logits, cudaError_t *e)
{
    const llm_config *c = &st->m->cfg;
    for (int i = 0, row = 0; i < b->n_tokens; i++) {
        if (!b->want_logits[i])
            continue;
        if (b->want_logits[i] == LLM_WANT_HIDDEN &&
            (*e = cudaMemcpyAsync(logits + (size_t)row * c->vocab_size, st->xn + (size_t)row * c->dim,
                                  (size_t)c->dim * 4, cudaMemcpyDeviceToHost, st->stream)) != cudaSuccess)
            return -1;
        row++;
    }
    return 0;
}

/* Any step, launch by launch. */
static int forward_eager(cu_state *st, const llm_batch *b, const llm_device_out *am, float *logits, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    int n = b->n_tokens, bs = st->block_size;

    /* Blocks each sequence needs this step (ids already checked against the pool by check_batch). */
    int *need = (int *)calloc((size_t)b->n_seqs, sizeof(int));
    int *toff = (int *)calloc((size_t)b->n_seqs, sizeof(int));
    if (need == NULL || toff == NULL) {
        free(need);
        free(toff);
        llm_err_set(err, "cuda backend: out of host memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int nb = b->pos[i] / bs + 1;
        if (nb > need[b->seq[i]])
            need[b->seq[i]] = nb;
    }
    size_t n_tab = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        toff[s] = (int)n_tab;
        n_tab += (size_t)need[s];
    }
    int nw = 0, nh = 0;
    for (int i = 0; i < n; i++) {
        nw += b->want_logits[i] != 0;
        nh += b->want_logits[i] == LLM_WANT_HIDDEN;
    }
    if (nh > 0 && c->dim > c->vocab_size) {
        free(need);
        free(toff);
        llm_err_set(err, "cuda backend: hidden rows wanted, but the hidden size (%d) is larger than a row of "
                    "logits (%d)", c->dim, c->vocab_size);
        return -1;
    }
    if (nw > 0 && logits == NULL) {
        free(need);
        free(toff);
        llm_err_set(err, "cuda backend: logits requested but no output buffer given");
        return -1;
    }

    /* Per-step ints: tokens | pos | tab | want rows | items (3 ints each) | block tables, with a window pool its
     * tables (at the same offsets: tab), and without the causal mask the attention's positions (each token's
     * input's last; and for a symmetric window pos + window / 2: cu_step). */
    const int swa_bidir = c->bidirectional && c->swa_window > 0;
    const size_t n_wtab = st->swa_blocks > 0 ? n_tab : 0;
    size_t n_ints = 3 * (size_t)n + (size_t)nw + 3 * (size_t)n + n_tab + n_wtab +
                    (c->bidirectional ? (size_t)n : 0) + (swa_bidir ? (size_t)n : 0);
    if (cuda_ensure_ints(st, n_ints) != 0 || cuda_ensure_scratch(st, n) != 0) {
        free(need);
        free(toff);
        llm_err_set(err, "cuda backend: out of memory for a batch of %d tokens", n);
        return LLM_BACKEND_NOMEM;
    }
    int32_t *h_tok = st->hint, *h_pos = h_tok + n, *h_tab = h_pos + n, *h_want = h_tab + n;
    cu_att_item *h_items = (cu_att_item *)(h_want + nw);
    int32_t *h_tables = (int32_t *)(h_items + n);
    memcpy(h_tok, b->tokens, (size_t)n * 4);
    memcpy(h_pos, b->pos, (size_t)n * 4);
    for (int i = 0, w = 0; i < n; i++) {
        h_tab[i] = toff[b->seq[i]];
        if (b->want_logits[i])
            h_want[w++] = i;
    }
    int32_t *h_wtables = h_tables + n_tab;
    for (int s = 0; s < b->n_seqs; s++) {
        if (need[s] > 0)
            memcpy(h_tables + toff[s], b->seqs[s].blocks, (size_t)need[s] * 4);
        if (need[s] > 0 && n_wtab > 0)
            memcpy(h_wtables + toff[s], b->seqs[s].swa_blocks, (size_t)need[s] * 4);
    }
    int32_t *h_apos = h_wtables + n_wtab, *h_swpos = h_apos + n; /* (bidirectional) */
    for (int i = n - 1, last = 0; i >= 0 && c->bidirectional; i--) {
        if (i == n - 1 || b->seq[i + 1] != b->seq[i])
            last = b->pos[i];
        h_apos[i] = last;
    }
    for (int i = 0; i < n && swa_bidir; i++)
        h_swpos[i] = b->pos[i] + c->swa_window / 2;
    const int32_t *apos = c->bidirectional ? h_apos : b->pos;
    free(need);
    free(toff);

    /* Attention work items: runs of up to q_tile_max tokens of one sequence. */
    cu_step sp;
    cu_att_plan *plan = &sp.plan;
    plan->n_heads = c->n_heads;
    plan->n_kv_heads = c->n_kv_heads;
    plan->head_dim = c->head_dim;
    plan->block_size = bs;
    plan->scale = llm_attn_scale(c);
    plan->window = 0; /* per layer: cuda_enqueue_step */
    plan->softcap = 0.0f;
    plan->alibi = NULL; /* (the encoder's step sets it) */
    plan->qpos = NULL;
    int n_items = 0, q_tile = 1, max_npos = 1;
    for (int i = 0; i < n; i++) {
        cu_att_item *cur = n_items > 0 ? &h_items[n_items - 1] : NULL;
        if (cur == NULL || b->seq[i] != b->seq[cur->t0] || cur->nq == st->q_tile_max) {
            cur = &h_items[n_items++];
            cur->t0 = i;
            cur->nq = 0;
            cur->n_pos = 0;
        }
        cur->nq++;
        if (apos[i] + 1 > cur->n_pos)
            cur->n_pos = apos[i] + 1;
        q_tile = cur->nq > q_tile ? cur->nq : q_tile;
        max_npos = cur->n_pos > max_npos ? cur->n_pos : max_npos;
    }
    long work = (long)n_items * c->n_kv_heads;
    long want_splits = (2L * st->n_sms + work - 1) / work;
    long chunk = (max_npos + want_splits - 1) / want_splits;
    chunk = (chunk + 31) / 32 * 32;
    plan->q_tile = q_tile;
    plan->tc = st->att_tc && q_tile > 1;
    plan->mma = plan->tc && st->att_mma;
    plan->chunk = (int)chunk;
    plan->n_splits = (int)((max_npos + chunk - 1) / chunk);
    plan->n_items = n_items;
    size_t wsf = cuda_att_ws_floats(plan, n);
    if (cuda_ensure_ws(st, wsf) != 0) {
        llm_err_set(err, "cuda backend: out of device memory for attention partials (%zu MiB)", wsf * 4 >> 20);
        return LLM_BACKEND_NOMEM;
    }
    /* only hidden states wanted (an embedding model's step): no classifier, no logits */
    const int hidden_only = nw > 0 && nh == nw && am == NULL;
    if (nw > 0 && !hidden_only && cuda_ensure_logits(st, nw) != 0) {
        llm_err_set(err, "cuda backend: out of device memory for %d rows of logits", nw);
        return LLM_BACKEND_NOMEM;
    }
    cudaError_t e = cudaMemcpyAsync(st->dint, st->hint, n_ints * 4, cudaMemcpyHostToDevice, st->stream);
    if (e != cudaSuccess) {
        llm_err_set(err, "cuda backend: batch upload: %s", cudaGetErrorString(e));
        return -1;
    }
    sp.n = n;
    sp.nw = nw;
    sp.d_tok = st->dint;
    sp.d_want = st->dint + 3 * n;
    sp.d_items = (const cu_att_item *)(sp.d_want + nw);
    sp.ti.pos = st->dint + n;
    sp.ti.tab = st->dint + 2 * n;
    sp.ti.tables = (const int32_t *)(sp.d_items + n);
    sp.ti.last = NULL;
    sp.ti_win = sp.ti;
    if (n_wtab > 0)
        sp.ti_win.tables = sp.ti.tables + n_tab;
    sp.ti_att = sp.ti;
    sp.ti_swa = sp.ti;
    if (c->bidirectional) {
        sp.ti_att.pos = sp.ti.tables + n_tab + n_wtab;
        sp.ti_swa.pos = sp.ti_att.pos + n;
        sp.ti_swa.last = sp.ti_att.pos;
    }
    sp.hidden_only = hidden_only;
    sp.argmax = am != NULL;
    if (!cuda_tp_agree(st, 1)) { /* another rank cannot take this step */
        cudaStreamSynchronize(st->stream);
        llm_err_set(err, "cuda backend: another GPU of the split model is out of memory for %d tokens", n);
        return LLM_BACKEND_NOMEM;
    }
    if (cuda_enqueue_step(st, &sp, err) != 0)
        return -1;
    /* (an embedding model's rows are all hidden states: no logits to copy) */
    if (nw > 0 && ((!hidden_only && cuda_copy_out(st, b, am, nw, logits, &e) != 0) ||
                   copy_hidden(st, b, logits, &e) != 0)) {
        llm_err_set(err, "cuda backend: logits copy: %s", cudaGetErrorString(e));
        return -1;
    }
    if (st->stage_events && st->n_ev < CU_MAX_EVENTS) {
        st->ev_stage[st->n_ev] = "sampling + copies out";
        cudaEventRecord(st->ev[st->n_ev++], st->stream);
    }
    /* Always wait: the pinned batch buffer is rewritten by the next step. */
    e = cudaStreamSynchronize(st->stream);
    if (e == cudaSuccess)
        e = cudaGetLastError();
    if (e == cudaSuccess && st->stage_events)
        stage_events_collect(st);
    if (e != cudaSuccess) {
        llm_err_set(err, "cuda backend: forward failed: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

int cuda_forward_eager(cu_state *st, const llm_batch *b, float *logits, llm_err *err)
{
    return forward_eager(st, b, NULL, logits, err);
}

static int forward_any(llm_backend *be, const llm_batch *b, const llm_device_out *am, float *logits, llm_err *err)
{
    cu_state *st = &((cu_impl *)be->impl)->st;
    cudaSetDevice(st->device); /* the calling thread may not be the one that ran init */
    cudaStreamSynchronize(st->stream); /* a failed earlier step may have left work queued */
    if (check_batch(st, b, err) != 0)
        return -1;
    st->graphs.argmax_steps += am != NULL;
    /* A scratch allocation that failed inside a matrix product is out of memory
     * too: the scheduler shrinks its step instead of failing the requests. */
    st->mm.nomem = 0;
    if (st->tune.on) /* the knobs the tuner chose for this step's batch-size bucket */
        cuda_knobs_set(st, &st->tune.k[cuda_bucket_index(b->n_tokens)]);
    int rc = cuda_graph_forward(st, b, am, logits, err);
    if (rc == 1)
        rc = forward_eager(st, b, am, logits, err);
    return rc == -1 && st->mm.nomem ? LLM_BACKEND_NOMEM : rc;
}

/* Split over GPUs, every forward call takes part in exactly one agreement (cuda_tp_agree): where it failed
 * before its own, here, so that the other ranks refuse the step too instead of waiting in a collective this
 * rank never joins. */
static int tp_finish(llm_backend *be, int rc, llm_err *err)
{
    cu_state *st = &((cu_impl *)be->impl)->st;
    if (st->tp.size > 1 && !st->tp.agreed && !cuda_tp_agree(st, rc == 0) && rc == 0) {
        llm_err_set(err, "cuda backend: another GPU of the split model refused the step");
        rc = LLM_BACKEND_NOMEM;
    }
    /* failed after every rank took the step: some of its collectives ran, the others' wait; the ranks are
     * out of step for good (engine/backend_tp.c ends them) */
    if (st->tp.size > 1 && st->tp.agreed == 1 && rc != 0) {
        size_t l = strlen(err->msg);
        snprintf(err->msg + l, sizeof(err->msg) - l, " (midway through a step of the split model)");
        rc = LLM_BACKEND_BROKEN;
    }
    return rc;
}

static int cu_forward(llm_backend *be, const llm_batch *b, float *logits, llm_err *err)
{
    ((cu_impl *)be->impl)->st.tp.agreed = 0;
    return tp_finish(be, forward_any(be, b, NULL, logits, err), err);
}

/* be->forward_device: as forward; dv is used only when some token with want_logits is not LLM_ROW_LOGITS. */
static int forward_dv(llm_backend *be, const llm_batch *b, const llm_device_out *dv, float *logits, llm_err *err)
{
    int any = 0;
    if (dv != NULL && dv->mode != NULL && b != NULL && b->want_logits != NULL && b->tokens != NULL)
        for (int i = 0; i < b->n_tokens && !any; i++)
            any = b->want_logits[i] && dv->mode[i] != LLM_ROW_LOGITS;
    if (!any)
        return forward_any(be, b, NULL, logits, err);
    if (dv->ids == NULL || dv->logprob == NULL) {
        llm_err_set(err, "cuda backend: device results requested but no ids / logprob output given");
        return -1;
    }
    if (b->n_tokens < 0 || cuda_sample_check(b, dv, err) != 0)
        return -1;
    cu_state *st = &((cu_impl *)be->impl)->st;
    cudaSetDevice(st->device);
    if (cuda_sample_reserve(st, dv->n_sample, dv->n_pen) != 0) {
        llm_err_set(err, "cuda backend: out of memory for %d sampled rows", dv->n_sample);
        return LLM_BACKEND_NOMEM;
    }
    int rc = forward_any(be, b, dv, logits, err);
    if (rc == 0)
        cuda_sample_scatter(st, dv);
    return rc;
}

static int cu_forward_device(llm_backend *be, const llm_batch *b, const llm_device_out *dv, float *logits,
                             llm_err *err)
{
    ((cu_impl *)be->impl)->st.tp.agreed = 0;
    return tp_finish(be, forward_dv(be, b, dv, logits, err), err);
}

static const llm_backend_ops cuda_ops = { "cuda", cu_init, cu_forward, cu_destroy };

extern "C" __attribute__((visibility("default"))) const llm_backend_ops *llm_cuda_backend_get_ops(void)
{
    return &cuda_ops;
}

/* For the loader: the number of CUDA devices, or -1 with the reason in msg. */
extern "C" __attribute__((visibility("default"))) int llm_cuda_backend_probe(char *msg, size_t msg_len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(msg, msg_len, "%s", cudaGetErrorString(e));
        return -1;
    }
    return n;
}
