/* Decode steps through CUDA Graphs: one graph per (batch-size bucket, attention
 * split class), captured the first time that pair is seen and replayed after.
 *
 * A decode step (the scheduler's steady state) is a batch where every token
 * wants logits and each sequence has exactly one token. Its n tokens are padded
 * up to the bucket B (1, 2, 4, ..., 256) with dummy tokens (token 0 at position
 * 0) whose block table is the backend's private scratch block past the pool
 * (and past the window pool, for its layers), so their KV writes and attention
 * touch nothing the scheduler owns; their logits rows are computed but not
 * copied back.
 *
 * Everything a captured launch reads through a pointer lives at a fixed device
 * address: the per-step ints (tokens | pos | table offsets | attention items |
 * with a window pool the window tables' offsets | block tables, then the window
 * tables) are uploaded into st->dint with a layout fixed by B before the graph
 * is launched, and kernels read positions, offsets and lengths from there. The
 * attention plan is the one argument that depends on the data (how many
 * position splits per item, and their length): the key's second part is the
 * split class, max position <= 64 << class, and the plan is made for the class's
 * upper bound; splits past a token's own length exit at once (the kernel's
 * early return) and the merge reads each token's position. Where the bucket
 * alone fills the device (B * kv heads >= 2 * SMs, one split), every length
 * shares class 0.
 *
 * A captured graph also holds the addresses of the scratch buffers; they only
 * ever grow, and each move bumps a generation counter (cuda_buf_gen), so a graph
 * captured before a move is dropped and captured again. All growth happens
 * before the capture begins: nothing is allocated or synchronised inside it.
 * The on-device argmax (forward_device) is part of every graph; which rows'
 * logits are copied back is decided after the launch.
 * If capture, instantiation or launch fails, one line goes to stderr and every
 * later step runs eagerly (the failing step too): graphs are a speed-up, never
 * a reason to fail a request. LLM_CUDA_GRAPHS=0 (or LLM_CUDA_SYNC=1, which
 * synchronises between stages, or LLM_CUDA_EVENTS=1, which times them) keeps every step eager; LLM_CUDA_STATS=1 prints
 * the counters when the backend is destroyed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"

static const int bucket_size[CU_GRAPH_BUCKETS] = { 1, 2, 4, 8, 16, 32, 64, 128, 256 };

void cuda_graphs_init(cu_state *st)
{
    cu_graphs *G = &st->graphs;
    memset(G, 0, sizeof(*G));
    const char *env = getenv("LLM_CUDA_GRAPHS"), *stats = getenv("LLM_CUDA_STATS");
    /* (an encoder's steps are whole inputs: no decode steps to capture) */
    G->enabled = !(env != NULL && strcmp(env, "0") == 0) && !st->debug_sync && !st->stage_events &&
                 !st->m->cfg.bidirectional;
    G->stats = stats != NULL && stats[0] == '1';
}

static void drop_all(cu_graphs *G)
{
    for (int i = 0; i < CU_GRAPH_BUCKETS; i++)
        for (int j = 0; j < CU_GRAPH_CLASSES; j++)
            if (G->g[i][j].exec != NULL) {
                cudaGraphExecDestroy(G->g[i][j].exec);
                G->g[i][j].exec = NULL;
            }
}

void cuda_graphs_destroy(cu_state *st)
{
    cu_graphs *G = &st->graphs;
    drop_all(G);
    if (!G->stats)
        return;
    char per[256] = "";
    size_t len = 0;
    for (int i = 0; i < CU_GRAPH_BUCKETS && len < sizeof(per); i++)
        if (G->bucket_replays[i] > 0)
            len += (size_t)snprintf(per + len, sizeof(per) - len, " %d:%ld", bucket_size[i], G->bucket_replays[i]);
    fprintf(stderr, "cuda: graphs %s: %ld captured, %ld replays (bucket:replays%s), %ld steps eager; "
            "%ld steps with on-device argmax, %ld rows sampled on the device\n", G->enabled ? "on" : "off", G->captures,
            G->replays, per, G->eager_steps, G->argmax_steps, st->samp.rows);
}

int cuda_bucket_size(int bi) { return bucket_size[bi]; }

int cuda_bucket_index(int n)
{
    int bi = 0;
    while (bi < CU_GRAPH_BUCKETS - 1 && bucket_size[bi] < n)
        bi++;
    return bi;
}

/* The bucket of a decode step, or -1 for any other step. */
static int bucket_of(const llm_batch *b)
{
    int n = b->n_tokens;
    if (n > bucket_size[CU_GRAPH_BUCKETS - 1])
        return -1;
    for (int i = 0; i < n; i++)
        if (b->want_logits[i] != 1) /* every token samples (hidden rows: eager steps copy them) */
            return -1;
    uint8_t *seen = (uint8_t *)calloc((size_t)b->n_seqs, 1);
    if (seen == NULL)
        return -1;
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        ok = !seen[b->seq[i]];
        seen[b->seq[i]] = 1;
    }
    free(seen);
    return ok ? cuda_bucket_index(n) : -1;
}

/* The attention plan of bucket B for steps whose longest sequence has max_npos positions; returns the
 * split class. One item per token (q_tile 1). */
static int graph_plan(const cu_state *st, int B, int max_npos, cu_att_plan *p)
{
    const llm_config *c = &st->m->cfg;
    p->n_heads = c->n_heads;
    p->n_kv_heads = c->n_kv_heads;
    p->head_dim = c->head_dim;
    p->block_size = st->block_size;
    p->scale = llm_attn_scale(c);
    p->window = 0; /* per layer: cuda_enqueue_step */
    p->softcap = 0.0f;
    p->alibi = NULL;
    p->qpos = NULL;
    p->q_tile = 1;
    p->tc = 0; /* decode only: never the tensor-core prefill kernels */
    p->mma = 0;
    p->n_items = B;
    long work = (long)B * c->n_kv_heads;
    long want = (2L * st->n_sms + work - 1) / work;
    long cap = c->seq_len;
    int cls = 0;
    if (want > 1) {
        long lim = 64;
        while (lim < max_npos) {
            lim *= 2;
            cls++;
        }
        cap = lim < cap ? lim : cap;
    } else {
        want = 1;
    }
    long chunk = (cap + want - 1) / want;
    chunk = (chunk + 31) / 32 * 32;
    p->chunk = (int)chunk;
    p->n_splits = (int)((cap + chunk - 1) / chunk);
    return cls;
}

/* Every buffer the step's launches use, grown to bucket B now (outside any capture), and to what any
 * step of this bucket can need (every split class, full-context block tables), so that the buffers move,
 * and the bucket's graphs are captured again, as few times as possible. */
static int reserve(cu_state *st, int B, const cu_att_plan *p)
{
    const llm_config *c = &st->m->cfg;
    cu_att_plan widest = *p;
    long work = (long)B * c->n_kv_heads, want = (2L * st->n_sms + work - 1) / work;
    widest.n_splits = want > 1 ? (int)want : 1; /* graph_plan never makes more splits than `want` */
    if (widest.n_splits < p->n_splits)
        widest.n_splits = p->n_splits;
    size_t max_tab = 1 + (size_t)B * (size_t)((c->seq_len + st->block_size - 1) / st->block_size);
    const int win = st->swa_blocks > 0;
    if (cuda_ensure_ints(st, (size_t)(win ? 7 : 6) * B + (win ? 2 : 1) * max_tab) != 0)
        return -1;
    if (cuda_ensure_scratch(st, B) != 0 || cuda_ensure_ws(st, cuda_att_ws_floats(&widest, B)) != 0 ||
        cuda_ensure_logits(st, B) != 0 || cuda_matmul_reserve(&st->mm, &st->output, B) != 0)
        return -1;
    for (int l = 0; l < c->n_layers; l++) {
        const cu_layer *L = &st->layers[l];
        for (int i = 0; i < L->qkv.n; i++)
            if (cuda_matmul_reserve(&st->mm, &L->qkv.m[i], B) != 0)
                return -1;
        for (int i = 0; i < L->gate_up.n; i++)
            if (cuda_matmul_reserve(&st->mm, &L->gate_up.m[i], B) != 0)
                return -1;
        if (cuda_matmul_reserve(&st->mm, &L->wo, B) != 0 || cuda_matmul_reserve(&st->mm, &L->down, B) != 0 ||
            cuda_matmul_reserve(&st->mm, &L->router, B) != 0) /* (absent ones are zero: F32, nothing to reserve) */
            return -1;
    }
    return 0;
}

/* Capture the step's launches into *exec. 0, or -1 with the reason in why. */
int cuda_graph_capture(cu_state *st, const cu_step *sp, cudaGraphExec_t *exec, char *why, size_t why_len)
{
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamBeginCapture(st->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "begin capture: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return -1;
    }
    llm_err qerr;
    qerr.msg[0] = '\0';
    int rc = cuda_enqueue_step(st, sp, &qerr);
    e = cudaStreamEndCapture(st->stream, &g); /* always: leaves capture mode even after a failure */
    if (rc != 0 || e != cudaSuccess || g == NULL) {
        snprintf(why, why_len, "capture: %s", rc != 0 ? qerr.msg : cudaGetErrorString(e));
        if (g != NULL)
            cudaGraphDestroy(g);
        cudaGetLastError();
        return -1;
    }
    e = cudaGraphInstantiate(exec, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        *exec = NULL;
        snprintf(why, why_len, "instantiate: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return -1;
    }
    return 0;
}

static int give_up(cu_state *st, const char *why)
{
    cu_graphs *G = &st->graphs;
    fprintf(stderr, "cuda: CUDA graph %s; decode steps run without graphs from now on\n", why);
    cudaStreamSynchronize(st->stream);
    cudaGetLastError();
    drop_all(G);
    G->enabled = 0;
    G->eager_steps++;
    return 1;
}

/* The step of bucket B (index bi) for b's n tokens, padded to B (b == NULL: B padding tokens, as the kernel
 * tuner times them): buffers grown for the bucket, the per-step ints uploaded, sp filled. Returns the split
 * class, or -1 with err filled. */
static int step_setup(cu_state *st, const llm_batch *b, int B, cu_step *sp, llm_err *err)
{
    int n = b != NULL ? b->n_tokens : 0, bs = st->block_size;
    const int win = st->swa_blocks > 0;
    /* Block tables: the scratch block's one-entry table first, then each token's sequence's table (its
     * block ids were checked against the pool by the caller's check_batch); with a window pool, its tables
     * after them in the same order (its scratch block's first), which the window layers reach through their
     * own offsets (the tokens' offsets + n_tab). */
    size_t n_tab = 1;
    int max_npos = 1;
    for (int i = 0; i < n; i++) {
        n_tab += (size_t)(b->pos[i] / bs + 1);
        max_npos = b->pos[i] + 1 > max_npos ? b->pos[i] + 1 : max_npos;
    }
    int cls = graph_plan(st, B, max_npos, &sp->plan);
    /* Per-step ints, fixed layout for B: tokens | pos | tab | items (3 ints each) | window tab | tables. */
    size_t n_ints = (size_t)(win ? 7 : 6) * B + (win ? 2 : 1) * n_tab;
    if (reserve(st, B, &sp->plan) != 0 || cuda_ensure_ints(st, n_ints) != 0) {
        llm_err_set(err, "cuda backend: out of device memory for a decode step of %d tokens", B);
        st->mm.nomem = 1; /* the scheduler retries with fewer sequences */
        return -1;
    }
    int32_t *h_tok = st->hint, *h_pos = h_tok + B, *h_tab = h_pos + B;
    cu_att_item *h_items = (cu_att_item *)(h_tab + B);
    int32_t *h_wtab = (int32_t *)(h_items + B), *h_tables = h_wtab + (win ? B : 0), *h_wtables = h_tables + n_tab;
    h_tables[0] = st->kv_scratch;
    if (win)
        h_wtables[0] = st->swa_blocks; /* the window pool's scratch block */
    size_t off = 1;
    for (int i = 0; i < B; i++) {
        if (i < n) {
            int need = b->pos[i] / bs + 1;
            h_tok[i] = b->tokens[i];
            h_pos[i] = b->pos[i];
            h_tab[i] = (int32_t)off;
            memcpy(h_tables + off, b->seqs[b->seq[i]].blocks, (size_t)need * 4);
            if (win)
                memcpy(h_wtables + off, b->seqs[b->seq[i]].swa_blocks, (size_t)need * 4);
            off += (size_t)need;
        } else {
            h_tok[i] = 0;
            h_pos[i] = 0;
            h_tab[i] = 0;
        }
        if (win)
            h_wtab[i] = h_tab[i] + (int32_t)n_tab;
        h_items[i].t0 = i;
        h_items[i].nq = 1;
        h_items[i].n_pos = h_pos[i] + 1;
    }
    cudaError_t e = cudaMemcpyAsync(st->dint, st->hint, n_ints * 4, cudaMemcpyHostToDevice, st->stream);
    if (e != cudaSuccess) {
        llm_err_set(err, "cuda backend: batch upload: %s", cudaGetErrorString(e));
        return -1;
    }
    sp->n = B;
    sp->nw = B;
    sp->d_tok = st->dint;
    sp->d_want = NULL;
    sp->ti.pos = st->dint + B;
    sp->ti.tab = st->dint + 2 * B;
    sp->d_items = (const cu_att_item *)(st->dint + 3 * B);
    sp->ti.tables = st->dint + (win ? 7 : 6) * B;
    sp->ti.last = NULL;
    sp->ti_win = sp->ti;
    if (win)
        sp->ti_win.tab = st->dint + 6 * B;
    sp->hidden_only = 0;
    sp->argmax = 1; /* always in the graph, so one graph serves steps with and without on-device greedy */
    return cls;
}

int cuda_graph_dummy_step(cu_state *st, int B, cu_step *sp, llm_err *err)
{
    return step_setup(st, NULL, B, sp, err) < 0 ? -1 : 0;
}

int cuda_graph_forward(cu_state *st, const llm_batch *b, const llm_device_out *am, float *logits, llm_err *err)
{
    cu_graphs *G = &st->graphs;
    int bi = G->enabled ? bucket_of(b) : -1;
    if (bi < 0) {
        G->eager_steps++;
        return 1;
    }
    int B = bucket_size[bi], n = b->n_tokens;
    if (logits == NULL) {
        llm_err_set(err, "cuda backend: logits requested but no output buffer given");
        return -1;
    }
    cu_step sp;
    int cls = step_setup(st, b, B, &sp, err);
    if (cls < 0)
        return -1;
    if (!cuda_tp_agree(st, 1)) { /* another rank of the split model cannot take this step */
        cudaStreamSynchronize(st->stream);
        llm_err_set(err, "cuda backend: another GPU of the split model is out of memory for %d tokens", B);
        st->mm.nomem = 1;
        return -1;
    }
    cu_graph *gr = &G->g[bi][cls];
    unsigned gen = cuda_buf_gen(st);
    if (gr->exec != NULL && gr->gen != gen) {
        cudaGraphExecDestroy(gr->exec);
        gr->exec = NULL;
    }
    if (gr->exec == NULL) {
        char why[sizeof(err->msg) + 32];
        if (cuda_graph_capture(st, &sp, &gr->exec, why, sizeof(why)) != 0)
            return give_up(st, why);
        gr->gen = gen;
        G->captures++;
    }
    cudaError_t e = cudaGraphLaunch(gr->exec, st->stream);
    if (e != cudaSuccess) {
        char why[128];
        snprintf(why, sizeof(why), "launch failed (%s)", cudaGetErrorString(e));
        return give_up(st, why);
    }
    G->replays++;
    G->bucket_replays[bi]++;
    if (cuda_copy_out(st, b, am, n, logits, &e) == 0)
        e = cudaStreamSynchronize(st->stream);
    if (e == cudaSuccess)
        e = cudaGetLastError();
    if (e != cudaSuccess) {
        llm_err_set(err, "cuda backend: forward failed (graph of %d tokens): %s", B, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}
