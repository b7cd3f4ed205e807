/* Continuous batching over a paged KV cache: see scheduler.h for the policy. */
#include "scheduler.h"
#include "draft.h"
#include "mask_pool.h"

_Static_assert(LLM_DRAFT_MAX >= LLM_SCHED_MAX_SPEC, "a request's drafts fit the drafter's");

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Logits rows a step may spend on prompt logprobs and mean-pooled embeddings (each a vocabulary of
 * floats: 32 MiB at 128K). */
#define PLP_ROWS 64

typedef struct {
    uint64_t id;
    void    *user;
    int      priority;
    uint64_t arrival;          /* submission order; kept across preemption */
    int32_t *tokens;           /* prompt, then generated tokens */
    int      n_tokens, cap;
    int      n_prompt, n_gen, max_tokens;
    int32_t  stop[LLM_SCHED_MAX_STOP];
    int      n_stop;
    int32_t  score[LLM_SCHED_MAX_SCORE]; /* ids whose logprobs each output reports (scoring) */
    int      n_score;
    int      n_computed;       /* tokens whose KV is in the cache */
    int      prompt_len;       /* tokens treated as prompt (counted as tokens in) */
    llm_kv_seq   kv;
    llm_kv_seq   kvw;          /* its window table (s->kvw): the window layers' blocks, those before the window
                                * given back (llm_kv_seq_drop_front); never shorter than kv */
    llm_sampler *smp;
    int      plp;              /* prompt logprobs wanted */
    int      plp_next;         /* the next prompt position whose logprob goes out (from 1) */
    int      n_top_lp;         /* alternatives with each */
    int      embed;            /* LLM_SCHED_EMBED_*: hidden rows pooled into emb, nothing generated */
    float   *emb;              /* [dim] the pooled sum so far */
    int      emb_n;            /* rows summed into it */
    int      min_tokens;       /* stop ids masked until this many were generated */
    llm_schema       *schema;  /* JSON mode or a JSON Schema: tokens masked by con (json_schema.h) */
    llm_schema_state *con;
    int32_t  reason_start;     /* a reasoning model's <think> (-1: none) */
    int32_t  reason_end[LLM_SCHED_MAX_REASON_END]; /* the ids that end its thinking, in order (</think>) */
    int      n_reason_end;
    int      thinking;         /* it opened with reason_start and has not written reason_end: no mask yet */
    int      lead_ws;          /* every token it wrote is whitespace: it may still open its thinking */
    uint64_t         *allow;   /* con's mask for this step, made by the mask pool (allow_ready) */
    int               allow_ready, allow_left;
    int      cancelled;
    int      n_cached, n_preempted;
    uint64_t t_submit, t_admit, t_first, t_last;
    /* this step */
    int      placed, chunk;
    int      n_draft;          /* drafted tokens in the chunk (in tokens[] past n_tokens), n-gram speculation */
    int      spec_skip, spec_miss; /* decodes left without drafts, and drafts rejected whole in a row: a text
                                    * that does not repeat itself stops costing draft rows (back-off: 1, 3, 7,
                                    * 15 decodes) */
    llm_drafter_seq dseq;      /* draft-model speculation: its state in the drafter */
    llm_draft_req   dreq;      /* this step's ask of the drafter, and its drafts (dreq.out, n_out), before placing */
    int      d_k;              /* drafts it asks the draft model for: 1..spec_tokens, adapting */
} sreq;

enum { PLACE_OK, PLACE_SKIP, PLACE_SELF_PREEMPTED };

struct llm_sched {
    llm_backend     *be;
    llm_sched_config cfg;
    llm_kv_cache    *kv;
    llm_kv_cache    *kvw;      /* the window pool (backend opts.swa_blocks > 0), else NULL */
    int win;                   /* the model's sliding window (positions a query sees), with kvw */
    int vocab, ctx_limit, bs;
    sreq **waiting;            /* sorted: priority desc, arrival asc */
    int    n_waiting, cap_waiting;
    sreq **running;            /* admission order: the last is the youngest */
    int    n_running;
    uint64_t next_arrival;
    /* the step's batch */
    int32_t *b_tok, *b_pos, *b_seq;
    uint8_t *b_want;
    llm_seq_view *b_views;
    sreq   **b_reqs;           /* [seq index] */
    int      b_n, b_nseq, budget;
    float   *logits;
    int      logit_rows;       /* rows logits holds: one a sequence, plus PLP_ROWS once prompt logprobs came */
    int      plp_room, b_plp;  /* this step: rows left for prompt logprobs and mean pooling, and taken */
    float  **emb_done;         /* embeddings handed out this step (llm_sched_output.embedding), freed at the next */
    int      n_emb_done, cap_emb_done;
    llm_mask_pool *masks;      /* cfg.mask_threads helper threads, or NULL */
    llm_drafter   *drafter;    /* cfg.draft's, or NULL (n-gram drafts) */
    llm_draft_req *d_reqs[LLM_SCHED_SPEC_SEQS]; /* this step's asks of the drafter (in their requests) */
    llm_mask_job  *m_jobs;     /* this step's masks, for m_reqs[] */
    sreq         **m_reqs;
    int            m_n;
    /* output queue (ring) when there is no callback */
    llm_sched_output *outq;
    size_t oq_head, oq_n, oq_cap;
    llm_sched_stats st;
    int idle_step;             /* the last step placed no token */
    int cap_batch, cap_tokens; /* creation-time sizes of the batch buffers: llm_sched_set_knobs' bounds */
    /* memory cap after LLM_BACKEND_NOMEM (see scheduler.h); 0 = none */
    int      mem_tokens, mem_batch;
    uint64_t mem_busy_ns;      /* the cap was last binding (or set) at this time */
    int      mem_hold_ms;      /* non-binding time needed before it grows */
    int      mem_grew;         /* the last change was a growth */
    char errmsg[700];
    /* results made on the device (be->forward_device): per-token modes, per-row ids and logprobs, per
     * sampled row its llm_sampling_row, top-n and index (dv_sidx[row], -1 if none), the penalty pairs;
     * allocated at first use */
    uint8_t *dv_mode;
    int32_t *dv_ids, *dv_ntop, *dv_sidx, *dv_pen;
    float   *dv_lp;
    llm_sampling_row  *dv_rows;
    llm_token_logprob *dv_top;
    int      dv_pen_cap;
    int      dv_cap;           /* rows the arrays above hold (logit_rows when made: drafts make more rows than
                                * sequences) */
};

static uint64_t clock_ns(const llm_sched *s)
{
    if (s->cfg.now_ns != NULL)
        return s->cfg.now_ns(s->cfg.cb_ctx);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double ms_between(uint64_t a, uint64_t b) { return b > a ? (double)(b - a) / 1e6 : 0.0; }

/* ---------------------------------------------------------------- create */

llm_sched *llm_sched_create(llm_backend *b, const llm_sched_config *cfg, llm_err *err)
{
    if (b == NULL || b->model == NULL || b->ops == NULL || b->ops->forward == NULL) {
        llm_seterr(err, "scheduler: no backend or model");
        return NULL;
    }
    llm_sched_config c = { 0 };
    if (cfg != NULL)
        c = *cfg;
    if (c.max_batch_size == 0)
        c.max_batch_size = 64;
    if (c.max_batched_tokens == 0)
        c.max_batched_tokens = 512;
    if (c.oom_recover_ms == 0)
        c.oom_recover_ms = 1000;
    if (c.oom_recover_ms < 0) {
        llm_seterr(err, "scheduler: oom_recover_ms must be >= 0");
        return NULL;
    }
    if (c.max_batch_size < 1 || c.max_batched_tokens < 1 || c.batch_timeout_ms < 0 || c.max_waiting < 0 ||
        c.n_preferred < 0 || c.n_preferred > LLM_SCHED_MAX_PREFERRED || c.spec_tokens < 0 ||
        c.spec_tokens > LLM_SCHED_MAX_SPEC) {
        llm_seterr(err, "scheduler: max_batch_size and max_batched_tokens must be >= 1, batch_timeout_ms and "
                        "max_waiting >= 0, at most %d preferred batch sizes, spec_tokens 0..%d", LLM_SCHED_MAX_PREFERRED,
                   LLM_SCHED_MAX_SPEC);
        return NULL;
    }
    for (int i = 0; i < c.n_preferred; i++)
        if (c.preferred_batch_sizes[i] < 1) {
            llm_seterr(err, "scheduler: preferred batch size %d is not positive", c.preferred_batch_sizes[i]);
            return NULL;
        }
    const llm_config *mc = &b->model->cfg;
    if (mc->vocab_size < 1 || mc->seq_len < 1 || b->opts.kv_blocks < 1 || b->opts.block_size < 1) {
        llm_seterr(err, "scheduler: backend has no KV pool (kv_blocks %d, block_size %d) or model no vocab/context",
                   b->opts.kv_blocks, b->opts.block_size);
        return NULL;
    }
    llm_sched *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        llm_seterr(err, "scheduler: out of memory");
        return NULL;
    }
    s->be = b;
    s->cfg = c;
    s->cap_batch = c.max_batch_size;
    s->cap_tokens = c.max_batched_tokens;
    s->mem_hold_ms = c.oom_recover_ms;
    s->vocab = mc->vocab_size;
    s->bs = b->opts.block_size;
    long pool = (long)b->opts.kv_blocks * s->bs;
    s->ctx_limit = pool < mc->seq_len ? (int)pool : mc->seq_len;
    size_t nt = (size_t)c.max_batched_tokens, ns = (size_t)c.max_batch_size;
    s->kv = llm_kv_create(b->opts.kv_blocks, s->bs);
    if (b->opts.swa_blocks > 0) {
        /* a lone decode must fit: its window's blocks and one more (the window start inside a block) */
        s->win = mc->swa_window;
        int least = (s->win + s->bs - 1) / s->bs + 1;
        if (b->opts.swa_blocks < least) {
            llm_seterr(err, "scheduler: a window pool of %d blocks cannot hold one sequence's window of %d tokens "
                       "(%d blocks of %d)", b->opts.swa_blocks, s->win, least, s->bs);
            llm_sched_destroy(s);
            return NULL;
        }
        s->kvw = llm_kv_create(b->opts.swa_blocks, s->bs);
    }
    s->running = calloc(ns, sizeof(sreq *));
    s->b_tok = malloc(nt * sizeof(int32_t));
    s->b_pos = malloc(nt * sizeof(int32_t));
    s->b_seq = malloc(nt * sizeof(int32_t));
    s->b_want = malloc(nt);
    s->b_views = calloc(ns, sizeof(llm_seq_view));
    s->b_reqs = calloc(ns, sizeof(sreq *));
    /* rows: one a sequence, plus the drafts of the requests that may speculate */
    s->logit_rows = (int)ns + (c.spec_tokens > 0 ? LLM_SCHED_SPEC_SEQS * c.spec_tokens : 0);
    s->logits = malloc((size_t)s->logit_rows * (size_t)s->vocab * sizeof(float));
    if (s->kv == NULL || (b->opts.swa_blocks > 0 && s->kvw == NULL) || s->running == NULL || s->b_tok == NULL ||
        s->b_pos == NULL || s->b_seq == NULL ||
        s->b_want == NULL || s->b_views == NULL || s->b_reqs == NULL || s->logits == NULL) {
        llm_sched_destroy(s);
        llm_seterr(err, "scheduler: out of memory");
        return NULL;
    }
    if (c.draft != NULL) {
        llm_err derr = { { 0 } };
        if (c.spec_tokens < 1 || (s->drafter = llm_drafter_create(c.draft, s->vocab, (int)nt, &derr)) == NULL) {
            llm_sched_destroy(s);
            llm_seterr(err, "scheduler: %s", c.spec_tokens < 1 ? "a draft model needs spec_tokens >= 1" : derr.msg);
            return NULL;
        }
    }
    if (c.mask_threads < 0) {
        llm_sched_destroy(s);
        llm_seterr(err, "scheduler: mask_threads must be >= 0");
        return NULL;
    }
    if (c.mask_threads > 0 && c.json_vocab != NULL) {
        s->masks = llm_mask_pool_new(c.mask_threads, c.json_vocab, s->vocab);
        s->m_jobs = calloc(ns, sizeof(llm_mask_job));
        s->m_reqs = calloc(ns, sizeof(sreq *));
        if (s->masks == NULL || s->m_jobs == NULL || s->m_reqs == NULL) {
            llm_sched_destroy(s);
            llm_seterr(err, "scheduler: could not start %d mask threads", c.mask_threads);
            return NULL;
        }
    }
    return s;
}

/* Before the forward: the masks of the constrained requests that sample this step go to the mask pool. */
static void masks_start(llm_sched *s)
{
    s->m_n = 0;
    if (s->masks == NULL)
        return;
    for (int i = 0; i < s->b_nseq; i++) {
        sreq *r = s->b_reqs[i];
        if (r->con == NULL || r->thinking || r->n_computed + r->chunk < r->n_tokens)
            continue; /* not constrained (yet), or mid-prefill: nothing to sample yet */
        r->allow_ready = 0;
        s->m_jobs[s->m_n] = (llm_mask_job){ r->con, r->allow, 0 };
        s->m_reqs[s->m_n++] = r;
    }
    llm_mask_pool_start(s->masks, s->m_jobs, s->m_n);
}

/* After it: the masks are ready for row_token. */
static void masks_wait(llm_sched *s)
{
    if (s->masks == NULL)
        return;
    llm_mask_pool_wait(s->masks);
    s->st.masks_pooled += (uint64_t)s->m_n;
    for (int i = 0; i < s->m_n; i++) {
        s->m_reqs[i]->allow_left = s->m_jobs[i].left;
        s->m_reqs[i]->allow_ready = 1;
    }
}

static void emb_done_free(llm_sched *s)
{
    for (int i = 0; i < s->n_emb_done; i++)
        free(s->emb_done[i]);
    s->n_emb_done = 0;
}

/* Give back r's blocks in both pools. */
static void seq_release(llm_sched *s, sreq *r)
{
    llm_kv_seq_release(s->kv, &r->kv);
    if (s->kvw != NULL)
        llm_kv_seq_release(s->kvw, &r->kvw);
}

/* Tokens past r's computed ones that its table q and the free blocks of pool kv hold. */
static long pool_room(const llm_sched *s, const llm_kv_cache *kv, const llm_kv_seq *q, const sreq *r)
{
    return (long)(q->n_blocks + llm_kv_available(kv)) * s->bs - r->n_computed;
}

/* ... in both pools. */
static long seq_room(const llm_sched *s, const sreq *r)
{
    long room = pool_room(s, s->kv, &r->kv, r);
    if (s->kvw != NULL) {
        long w = pool_room(s, s->kvw, &r->kvw, r);
        room = w < room ? w : room;
    }
    return room;
}

/* Grow r's tables to hold positions [0, n_tokens): 0, or -1 (the main one unchanged). The window table first,
 * so that it is never the shorter. */
static int seq_reserve(llm_sched *s, sreq *r, int n_tokens)
{
    if (s->kvw != NULL && llm_kv_seq_reserve(s->kvw, &r->kvw, n_tokens) != 0)
        return -1;
    return llm_kv_seq_reserve(s->kv, &r->kv, n_tokens);
}

static void req_free(llm_sched *s, sreq *r)
{
    seq_release(s, r);
    if (s->drafter != NULL)
        llm_drafter_release(s->drafter, &r->dseq);
    free(r->emb);
    free(r->allow);
    llm_schema_state_free(r->con);
    llm_schema_free(r->schema);
    llm_sampler_free(r->smp);
    free(r->tokens);
    free(r);
}

/* The device-output arrays (device_prepare), gone: made again when next needed. */
static void dv_free(llm_sched *s)
{
    free(s->dv_mode); free(s->dv_ids); free(s->dv_ntop); free(s->dv_sidx);
    free(s->dv_lp); free(s->dv_rows); free(s->dv_top);
    s->dv_mode = NULL;
    s->dv_ids = s->dv_ntop = s->dv_sidx = NULL;
    s->dv_lp = NULL;
    s->dv_rows = NULL;
    s->dv_top = NULL;
    s->dv_cap = 0;
}

void llm_sched_destroy(llm_sched *s)
{
    if (s == NULL)
        return;
    llm_mask_pool_free(s->masks); /* waits for masks in flight: they read requests freed below */
    free(s->m_jobs);
    free(s->m_reqs);
    for (int i = 0; i < s->n_running; i++)
        req_free(s, s->running[i]);
    for (int i = 0; i < s->n_waiting; i++)
        req_free(s, s->waiting[i]);
    llm_kv_destroy(s->kv);
    llm_kv_destroy(s->kvw);
    llm_drafter_destroy(s->drafter);
    free(s->running);
    free(s->waiting);
    free(s->b_tok);
    free(s->b_pos);
    free(s->b_seq);
    free(s->b_want);
    free(s->b_views);
    free(s->b_reqs);
    free(s->logits);
    dv_free(s);
    free(s->dv_pen);
    free(s->outq);
    emb_done_free(s);
    free(s->emb_done);
    free(s);
}

int         llm_sched_context_limit(const llm_sched *s) { return s->ctx_limit; }

int llm_sched_set_knobs(llm_sched *s, int max_batch_size, int batch_timeout_ms, int max_batched_tokens)
{
    if (max_batch_size < 0 || max_batch_size > s->cap_batch || max_batched_tokens < 0 ||
        max_batched_tokens > s->cap_tokens || batch_timeout_ms < -1)
        return -1;
    /* Lowering a bound below what runs now is fine: running requests keep going,
     * admission waits until the batch is back under it. */
    if (max_batch_size > 0)
        s->cfg.max_batch_size = max_batch_size;
    if (max_batched_tokens > 0)
        s->cfg.max_batched_tokens = max_batched_tokens;
    if (batch_timeout_ms >= 0)
        s->cfg.batch_timeout_ms = batch_timeout_ms;
    return 0;
}

void llm_sched_get_knobs(const llm_sched *s, int *max_batch_size, int *batch_timeout_ms, int *max_batched_tokens)
{
    *max_batch_size = s->cfg.max_batch_size;
    *batch_timeout_ms = s->cfg.batch_timeout_ms;
    *max_batched_tokens = s->cfg.max_batched_tokens;
}
const char *llm_sched_last_error(const llm_sched *s) { return s->errmsg; }

/* ---------------------------------------------------------------- queues */

static sreq *find_req(llm_sched *s, uint64_t id)
{
    for (int i = 0; i < s->n_running; i++)
        if (s->running[i]->id == id)
            return s->running[i];
    for (int i = 0; i < s->n_waiting; i++)
        if (s->waiting[i]->id == id)
            return s->waiting[i];
    return NULL;
}

static int queue_before(const sreq *a, const sreq *b)
{
    return a->priority != b->priority ? a->priority > b->priority : a->arrival < b->arrival;
}

/* Insert in queue order; -1 on out of memory. */
static int waiting_insert(llm_sched *s, sreq *r)
{
    if (s->n_waiting == s->cap_waiting) {
        int cap = s->cap_waiting > 0 ? 2 * s->cap_waiting : 16;
        sreq **nw = realloc(s->waiting, (size_t)cap * sizeof(*nw));
        if (nw == NULL)
            return -1;
        s->waiting = nw;
        s->cap_waiting = cap;
    }
    int i = s->n_waiting;
    while (i > 0 && queue_before(r, s->waiting[i - 1]))
        i--;
    memmove(s->waiting + i + 1, s->waiting + i, (size_t)(s->n_waiting - i) * sizeof(*s->waiting));
    s->waiting[i] = r;
    s->n_waiting++;
    return 0;
}

static void waiting_remove_at(llm_sched *s, int i)
{
    memmove(s->waiting + i, s->waiting + i + 1, (size_t)(s->n_waiting - i - 1) * sizeof(*s->waiting));
    s->n_waiting--;
}

static void running_remove(llm_sched *s, sreq *r)
{
    for (int i = 0; i < s->n_running; i++)
        if (s->running[i] == r) {
            memmove(s->running + i, s->running + i + 1, (size_t)(s->n_running - i - 1) * sizeof(*s->running));
            s->n_running--;
            return;
        }
}

/* ---------------------------------------------------------------- outputs */

static void emit_out(llm_sched *s, const sreq *r, int32_t token, const llm_sample_result *res,
                     llm_sched_finish fin, int error, int prompt)
{
    llm_sched_output o;
    memset(&o, 0, sizeof(o));
    o.prompt = prompt;
    o.id = r->id;
    o.user = r->user;
    o.token = token;
    if (res != NULL) {
        o.logprob = res->logprob;
        o.n_top = res->n_top;
        memcpy(o.top, res->top, (size_t)res->n_top * sizeof(o.top[0]));
    }
    o.finish = fin;
    o.error = error;
    if (r->embed && fin == LLM_SCHED_FINISH_STOP && r->emb != NULL) {
        o.embedding = r->emb;
        o.n_embd = s->be->model->cfg.dim;
    }
    o.n_prompt = r->n_prompt;
    o.n_generated = r->n_gen;
    o.n_cached = r->n_cached;
    o.n_preempted = r->n_preempted;
    o.queue_ms = r->t_admit ? ms_between(r->t_submit, r->t_admit) : 0.0;
    o.ttft_ms = r->t_first ? ms_between(r->t_submit, r->t_first) : 0.0;
    o.tpot_ms = r->n_gen > 1 ? ms_between(r->t_first, r->t_last) / (r->n_gen - 1) : 0.0;
    if (s->cfg.on_output != NULL) {
        s->cfg.on_output(s->cfg.cb_ctx, &o);
        return;
    }
    if (s->oq_n == s->oq_cap) {
        size_t cap = s->oq_cap > 0 ? 2 * s->oq_cap : 64;
        llm_sched_output *nq = malloc(cap * sizeof(*nq));
        if (nq == NULL)
            return; /* out of memory: the record is lost, the request still ends */
        for (size_t i = 0; i < s->oq_n; i++)
            nq[i] = s->outq[(s->oq_head + i) % s->oq_cap];
        free(s->outq);
        s->outq = nq;
        s->oq_cap = cap;
        s->oq_head = 0;
    }
    s->outq[(s->oq_head + s->oq_n) % s->oq_cap] = o;
    s->oq_n++;
}

static void emit(llm_sched *s, const sreq *r, int32_t token, const llm_sample_result *res,
                 llm_sched_finish fin, int error)
{
    emit_out(s, r, token, res, fin, error, 0);
}

int llm_sched_next_output(llm_sched *s, llm_sched_output *out)
{
    if (s->oq_n == 0)
        return 0;
    *out = s->outq[s->oq_head];
    s->oq_head = (s->oq_head + 1) % s->oq_cap;
    s->oq_n--;
    return 1;
}

/* End a request that is in no queue any more: output, then free. */
static void finish(llm_sched *s, sreq *r, int32_t token, const llm_sample_result *res,
                   llm_sched_finish fin, int error)
{
    s->st.finished[fin]++;
    seq_release(s, r);
    if (r->embed && fin == LLM_SCHED_FINISH_STOP && r->emb != NULL && s->n_emb_done == s->cap_emb_done) {
        /* the output points at the embedding until the next step (a queued output is read after this call) */
        int cap = s->cap_emb_done > 0 ? 2 * s->cap_emb_done : 16;
        float **d = realloc(s->emb_done, (size_t)cap * sizeof(*d));
        if (d != NULL) {
            s->emb_done = d;
            s->cap_emb_done = cap;
        } else { /* out of memory: the output goes without it (the client is told there is none) */
            free(r->emb);
            r->emb = NULL;
        }
    }
    emit(s, r, token, res, fin, error);
    if (r->embed && fin == LLM_SCHED_FINISH_STOP && r->emb != NULL) {
        s->emb_done[s->n_emb_done++] = r->emb;
        r->emb = NULL;
    }
    req_free(s, r);
}

/* ---------------------------------------------------------------- submit / cancel */

/* 1 when r is computed in one step (no chunks, no prefix cache): every request on an encoder, whose tokens
 * see the whole input, and a CLS-pooled one, whose one hidden row is its first position's. */
static int one_step(const llm_sched *s, const sreq *r)
{
    return s->be->model->cfg.bidirectional || r->embed == LLM_SCHED_EMBED_CLS;
}

/* Logits rows kept beside one a sequence for prompt logprobs and mean pooling: an encoder's input takes a row
 * a position in its one step. */
static int plp_cap(const llm_sched *s)
{
    return s->be->model->cfg.bidirectional && s->ctx_limit > PLP_ROWS ? s->ctx_limit : PLP_ROWS;
}

int llm_sched_submit(llm_sched *s, const llm_sched_request *q, llm_err *err)
{
    if (q == NULL || q->prompt == NULL || q->n_prompt < 1) {
        llm_seterr(err, "request has an empty prompt");
        return -1;
    }
    if (q->n_prompt >= s->ctx_limit) { /* at least one generated token must fit */
        llm_seterr(err, "prompt of %d tokens leaves no room in the context of %d tokens", q->n_prompt, s->ctx_limit);
        return -1;
    }
    for (int i = 0; i < q->n_prompt; i++)
        if (q->prompt[i] < 0 || q->prompt[i] >= s->vocab) {
            llm_seterr(err, "prompt token %d at index %d is outside the vocabulary of %d", q->prompt[i], i, s->vocab);
            return -1;
        }
    if (q->min_tokens < 0) {
        llm_seterr(err, "min_tokens must be at least 0 (got %d)", q->min_tokens);
        return -1;
    }
    if (q->max_tokens < 1) {
        llm_seterr(err, "max_tokens must be at least 1 (got %d)", q->max_tokens);
        return -1;
    }
    if (q->n_stop < 0 || q->n_stop > LLM_SCHED_MAX_STOP || (q->n_stop > 0 && q->stop_ids == NULL)) {
        llm_seterr(err, "at most %d stop token ids", LLM_SCHED_MAX_STOP);
        return -1;
    }
    if (q->n_score < 0 || q->n_score > LLM_SCHED_MAX_SCORE ||
        (q->n_score > 0 && (q->score_ids == NULL || q->embed || q->json || q->schema != NULL || q->min_tokens > 0))) {
        llm_seterr(err, "scoring: 0 to %d token ids, and not with an embedding, JSON or min_tokens",
                   LLM_SCHED_MAX_SCORE);
        return -1;
    }
    for (int i = 0; i < q->n_score; i++)
        if (q->score_ids[i] < 0 || q->score_ids[i] >= s->vocab) {
            llm_seterr(err, "scoring: token id %d is outside the vocabulary of %d", q->score_ids[i], s->vocab);
            return -1;
        }
    if (q->embed < LLM_SCHED_EMBED_NONE || q->embed > LLM_SCHED_EMBED_CLS) {
        llm_seterr(err, "embed: pooling %d is none of LLM_SCHED_EMBED_*", q->embed);
        return -1;
    }
    if (s->be->model->cfg.bidirectional && !q->embed) {
        llm_seterr(err, "this model is an encoder (%s): it computes embeddings and does not generate",
                   s->be->model->arch);
        return -1;
    }
    if ((s->be->model->cfg.bidirectional || q->embed == LLM_SCHED_EMBED_CLS) && q->n_prompt > s->cap_tokens) {
        llm_seterr(err, "%s input is computed in one step: %d tokens, more than a step's %d (--max-batched-tokens)",
                   s->be->model->cfg.bidirectional ? "an encoder's" : "a CLS-pooled", q->n_prompt, s->cap_tokens);
        return -1;
    }
    if (q->reasoning && (q->json || q->schema != NULL)) {
        int bad = q->reason_start < 0 || q->reason_start >= s->vocab || q->n_reason_end < 1 ||
                  q->n_reason_end > LLM_SCHED_MAX_REASON_END || q->reason_end == NULL;
        for (int i = 0; !bad && i < q->n_reason_end; i++)
            bad = q->reason_end[i] < 0 || q->reason_end[i] >= s->vocab;
        /* (a one-token end must differ from the start: gpt-oss's three begin with it) */
        if (bad || (q->n_reason_end == 1 && q->reason_end[0] == q->reason_start)) {
            llm_seterr(err, "reasoning tokens: a start id and 1 to %d end ids below %d (one end id: not the start)",
                       LLM_SCHED_MAX_REASON_END, s->vocab);
            return -1;
        }
    }
    if (q->embed && q->prompt_logprobs) {
        llm_seterr(err, "an embedding request has no prompt logprobs");
        return -1;
    }
    if (q->embed && s->be->model->cfg.dim > s->vocab) {
        llm_seterr(err, "embeddings: the hidden size (%d) is larger than the vocabulary (%d), whose rows carry it",
                   s->be->model->cfg.dim, s->vocab);
        return -1;
    }
    if ((q->prompt_logprobs || q->embed == LLM_SCHED_EMBED_MEAN) && s->logit_rows < s->cap_batch + plp_cap(s)) {
        float *l = realloc(s->logits, (size_t)(s->cap_batch + plp_cap(s)) * (size_t)s->vocab * sizeof(float));
        if (l == NULL) {
            llm_seterr(err, "scheduler: out of memory for prompt logprobs");
            return -1;
        }
        s->logits = l;
        s->logit_rows = s->cap_batch + plp_cap(s);
    }
    if ((q->json || q->schema != NULL) && s->cfg.json_vocab == NULL) {
        llm_seterr(err, "%s needs the model's tokenizer, which this engine does not have",
                   q->schema == NULL ? "JSON mode" : q->grammar ? "a grammar" : q->regex ? "a regular expression"
                                                                          : "a JSON Schema");
        return -1;
    }
    if (q->n_bias < 0 || (q->n_bias > 0 && q->bias == NULL)) {
        llm_seterr(err, "logit bias: %d entries", q->n_bias);
        return -1;
    }
    for (int i = 0; i < q->n_bias; i++)
        if (q->bias[i].id < 0 || q->bias[i].id >= s->vocab ||
            !(q->bias[i].bias >= -LLM_SAMPLING_MAX_BIAS && q->bias[i].bias <= LLM_SAMPLING_MAX_BIAS)) {
            llm_seterr(err, "logit bias %g for token %d: token ids are 0..%d, biases -%g..%g", (double)q->bias[i].bias,
                       q->bias[i].id, s->vocab - 1, (double)LLM_SAMPLING_MAX_BIAS, (double)LLM_SAMPLING_MAX_BIAS);
            return -1;
        }
    char msg[256];
    if (llm_sampling_validate(&q->sampling, msg, sizeof(msg)) != 0) {
        llm_seterr(err, "%s", msg);
        return -1;
    }
    if (find_req(s, q->id) != NULL) {
        llm_seterr(err, "request id %llu is already live", (unsigned long long)q->id);
        return -1;
    }
    if (s->cfg.max_waiting > 0 && s->n_waiting >= s->cfg.max_waiting) {
        llm_seterr(err, "queue full (%d requests waiting)", s->n_waiting);
        return -1;
    }
    llm_schema *schema = NULL;
    if (q->json || q->schema != NULL) { /* JSON mode is the schema of any object */
        char msg[256];
        schema = q->schema != NULL && q->grammar ? llm_schema_grammar(q->schema, q->schema_len, msg, sizeof msg)
                 : q->schema != NULL && q->regex ? llm_schema_regex(q->schema, q->schema_len, msg, sizeof msg)
                 : q->schema != NULL           ? llm_schema_parse(q->schema, q->schema_len, msg, sizeof msg)
                                     : llm_schema_parse(LLM_SCHEMA_JSON_OBJECT, strlen(LLM_SCHEMA_JSON_OBJECT), msg,
                                                        sizeof msg);
        if (schema == NULL) {
            llm_seterr(err, "%s", msg);
            return -1;
        }
    }
    sreq *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        llm_schema_free(schema);
        goto oom;
    }
    r->schema = schema;
    r->embed = q->embed;
    r->d_k = s->cfg.spec_tokens;
    r->reason_start = schema != NULL && q->reasoning ? q->reason_start : -1;
    if (r->reason_start >= 0) {
        r->n_reason_end = q->n_reason_end;
        memcpy(r->reason_end, q->reason_end, (size_t)q->n_reason_end * sizeof(int32_t));
    }
    if (r->embed && (r->emb = calloc((size_t)s->be->model->cfg.dim, sizeof(float))) == NULL) {
        req_free(s, r);
        goto oom;
    }
    /* room for every token the request can hold, so appending never fails */
    long cap = (long)q->n_prompt + q->max_tokens;
    r->cap = cap < s->ctx_limit ? (int)cap : s->ctx_limit;
    r->tokens = malloc((size_t)r->cap * sizeof(int32_t));
    r->smp = llm_sampler_new(&q->sampling, s->vocab);
    if (schema != NULL) {
        r->con = llm_schema_state_new(schema);
        if (s->masks != NULL)
            r->allow = malloc((size_t)(s->vocab + 63) / 64 * sizeof(uint64_t));
    }
    if (r->tokens == NULL || r->smp == NULL || llm_sampler_set_bias(r->smp, q->bias, q->n_bias) != 0 ||
        (schema != NULL && (r->con == NULL || (s->masks != NULL && r->allow == NULL)))) {
        req_free(s, r);
        goto oom;
    }
    r->id = q->id;
    r->user = q->user;
    r->priority = q->priority;
    r->arrival = s->next_arrival++;
    memcpy(r->tokens, q->prompt, (size_t)q->n_prompt * sizeof(int32_t));
    r->n_tokens = r->n_prompt = r->prompt_len = q->n_prompt;
    r->max_tokens = q->max_tokens;
    r->min_tokens = q->min_tokens;
    r->plp = q->prompt_logprobs != 0;
    r->plp_next = 1;
    r->n_top_lp = q->sampling.n_logprobs;
    if (q->n_stop > 0)
        memcpy(r->stop, q->stop_ids, (size_t)q->n_stop * sizeof(int32_t));
    r->n_stop = q->n_stop;
    if (q->n_score > 0)
        memcpy(r->score, q->score_ids, (size_t)q->n_score * sizeof(int32_t));
    r->n_score = q->n_score;
    for (int i = 0; i < q->n_prompt; i++)
        llm_sampler_accept(r->smp, q->prompt[i], 1);
    r->t_submit = clock_ns(s);
    if (waiting_insert(s, r) != 0) {
        req_free(s, r);
        goto oom;
    }
    s->st.prompt_tokens += (uint64_t)q->n_prompt;
    return 0;
oom:
    llm_seterr(err, "scheduler: out of memory");
    return -1;
}

int llm_sched_cancel(llm_sched *s, uint64_t id)
{
    sreq *r = find_req(s, id);
    if (r == NULL)
        return -1;
    r->cancelled = 1;
    return 0;
}

static void process_cancels(llm_sched *s)
{
    for (int i = 0; i < s->n_running;) {
        sreq *r = s->running[i];
        if (r->cancelled) {
            running_remove(s, r);
            finish(s, r, -1, NULL, LLM_SCHED_FINISH_CANCELLED, 0);
        } else {
            i++;
        }
    }
    for (int i = 0; i < s->n_waiting;) {
        sreq *r = s->waiting[i];
        if (r->cancelled) {
            waiting_remove_at(s, i);
            finish(s, r, -1, NULL, LLM_SCHED_FINISH_CANCELLED, 0);
        } else {
            i++;
        }
    }
}

/* ---------------------------------------------------------------- building a step */

/* Back to the queue, to be recomputed from prompt + generated tokens. */
static void preempt(llm_sched *s, sreq *r)
{
    running_remove(s, r);
    seq_release(s, r);
    if (s->drafter != NULL) /* (its draft blocks go back too: a waiting request holds none) */
        llm_drafter_release(s->drafter, &r->dseq);
    r->dreq.n_out = 0;
    r->n_computed = 0;
    r->prompt_len = r->n_tokens;
    r->n_preempted++;
    if (r->emb != NULL) { /* recomputed from the start: so is its sum */
        memset(r->emb, 0, (size_t)s->be->model->cfg.dim * sizeof(float));
        r->emb_n = 0;
    }
    s->st.preemptions++;
    if (waiting_insert(s, r) != 0) {
        s->st.finished[LLM_SCHED_FINISH_ERROR]++;
        emit(s, r, -1, NULL, LLM_SCHED_FINISH_ERROR, LLM_SCHED_E_NOMEM);
        req_free(s, r);
    }
}

static sreq *youngest_unplaced(llm_sched *s)
{
    for (int i = s->n_running - 1; i >= 0; i--)
        if (!s->running[i]->placed)
            return s->running[i];
    return NULL;
}

/* Rows r takes in [from, from + n) beside its last token's: the prompt positions whose logits it still
 * needs for its prompt logprobs (position q gives token q + 1's), or whose hidden states it sums (mean
 * pooling). */
static int plp_rows(const sreq *r, int from, int n)
{
    if (!r->plp && r->embed != LLM_SCHED_EMBED_MEAN)
        return 0;
    int lo = r->plp && from < r->plp_next - 1 ? r->plp_next - 1 : from;
    int hi = from + n < r->n_prompt - 1 ? from + n : r->n_prompt - 1;
    return hi > lo ? hi - lo : 0;
}

/* n cut so that r's prompt-logprob rows fit this step's rows and its client's stream (one entry kept for
 * the sampled token); 0 when none fits. */
static int plp_clamp(llm_sched *s, const sreq *r, int from, int n)
{
    if (plp_rows(r, from, n) == 0)
        return n;
    int room = s->plp_room;
    if (r->plp && s->cfg.emit_room != NULL) {
        int e = s->cfg.emit_room(s->cfg.cb_ctx, r->id, r->user) - 1;
        room = e < room ? e : room;
    }
    room = room > 0 ? room : 0;
    int lo = r->plp && from < r->plp_next - 1 ? r->plp_next - 1 : from;
    if (plp_rows(r, from, n) > room)
        n = lo + room - from;
    return n;
}

static void add_chunk(llm_sched *s, sreq *r, int n)
{
    int si = s->b_nseq++;
    s->b_reqs[si] = r;
    s->b_views[si].blocks = r->kv.blocks;
    s->b_views[si].n_blocks = r->kv.n_blocks;
    s->b_views[si].swa_blocks = s->kvw != NULL ? r->kvw.blocks : NULL;
    for (int k = 0; k < n; k++) {
        int t = s->b_n++, p = r->n_computed + k;
        s->b_tok[t] = r->tokens[p];
        s->b_pos[t] = p;
        s->b_seq[t] = si;
        s->b_want[t] = (k == n - 1 && p == r->n_tokens - 1) || (r->plp && p < r->n_prompt - 1 && p >= r->plp_next - 1) ||
                       (r->n_draft > 0 && p >= r->n_tokens - 1); /* a speculating decode: every row is checked */
        if (r->embed && (r->embed == LLM_SCHED_EMBED_MEAN || s->b_want[t]))
            s->b_want[t] = LLM_WANT_HIDDEN;
        if (r->embed == LLM_SCHED_EMBED_CLS) /* (one step: its first position's row is its only one) */
            s->b_want[t] = p == 0 ? LLM_WANT_HIDDEN : 0;
    }
    int rows = plp_rows(r, r->n_computed, n);
    s->plp_room -= rows;
    s->b_plp += rows;
    r->placed = 1;
    r->chunk = n;
    s->budget -= n;
}

static int host_masked(const sreq *r);

/* Whether r's decodes may carry drafts at all: not JSON-masked on the host (a thinking JSON request would
 * need its mask mid-step), not constrained, not scoring its prompt, not an embedding. */
static int may_speculate(const sreq *r)
{
    return !host_masked(r) && r->con == NULL && !r->plp && !r->embed;
}

/* N-gram speculation: drafts for r (a decode), written past its last token (tokens[n_tokens..]): what
 * followed the latest earlier occurrence of its last 3 or 2 tokens (copied on through the drafts themselves,
 * so a loop shorter than the drafts repeats), at most cfg.spec_tokens and `room` (KV
 * positions free without preempting) and what the step's budget, the logits rows, the output room, the
 * request's tokens and the context leave. Returns how many (0: none), with the rows taken.
 * A draft stands when the token the request takes at its position (row_token, in order: a sampled request's
 * draws and penalties advance exactly as without drafts) is the draft, so the output is the same token for
 * token, greedy or sampled. */
static int spec_draft(llm_sched *s, sreq *r, int room)
{
    int k = s->cfg.spec_tokens;
    if (k == 0 || s->n_running > LLM_SCHED_SPEC_SEQS || !may_speculate(r))
        return 0;
    if (r->spec_skip > 0) {
        r->spec_skip--;
        return 0;
    }
    int L = r->n_tokens;
    int lim[7] = { room, s->budget - 1, s->plp_room, r->cap - L, r->max_tokens - r->n_gen - 1, s->ctx_limit - L,
                   s->cfg.emit_room != NULL ? s->cfg.emit_room(s->cfg.cb_ctx, r->id, r->user) - 1 : k };
    for (int i = 0; i < 7; i++)
        k = lim[i] < k ? lim[i] : k;
    if (k <= 0)
        return 0;
    int32_t *t = r->tokens;
    if (s->drafter != NULL) { /* the draft model's, made before the step (draft_models) */
        k = r->dreq.n_out < k ? r->dreq.n_out : k;
        if (k <= 0)
            return 0;
        memcpy(t + L, r->dreq.out, (size_t)k * sizeof(int32_t));
        r->n_draft = k;
        s->plp_room -= k;
        s->st.spec_drafted += (uint64_t)k;
        return k;
    }
    for (int n = 3; n >= 2; n--) { /* (one token alone predicts too little to pay for its rows) */
        if (L <= n)
            continue;
        for (int i = L - n - 1; i >= 0; i--) { /* the latest earlier occurrence of the last n tokens */
            if (memcmp(t + i, t + L - n, (size_t)n * sizeof(int32_t)) != 0)
                continue;
            for (int j = 0; j < k; j++) /* what followed it; in a loop shorter than k, the loop again */
                t[L + j] = t[i + n + j];
            r->n_draft = k;
            s->plp_room -= k;
            s->st.spec_drafted += (uint64_t)k;
            return k;
        }
    }
    return 0;
}

/* Draft-model speculation: the draft model's drafts for the decodes that may speculate this step (as
 * spec_draft would let them: not masked, not scoring, not backing off), all in one round of batched calls
 * before the step is built; spec_draft then takes what the step has room for. */
static void draft_models(llm_sched *s)
{
    if (s->drafter == NULL)
        return;
    for (int i = 0; i < s->n_running; i++)
        s->running[i]->dreq.n_out = 0;
    if (s->n_running > LLM_SCHED_SPEC_SEQS)
        return;
    int n = 0;
    for (int i = 0; i < s->n_running; i++) {
        sreq *r = s->running[i];
        if (r->n_tokens - r->n_computed != 1 || !may_speculate(r) || r->spec_skip > 0)
            continue;
        int k = r->d_k;
        int lim[3] = { r->max_tokens - r->n_gen - 1, s->ctx_limit - r->n_tokens, r->cap - r->n_tokens };
        for (int j = 0; j < 3; j++)
            k = lim[j] < k ? lim[j] : k;
        if (k <= 0)
            continue;
        r->dreq = (llm_draft_req){ .tokens = r->tokens, .n_tokens = r->n_tokens, .k = k, .seq = &r->dseq };
        s->d_reqs[n++] = &r->dreq;
    }
    if (n == 0)
        return;
    llm_err err = { { 0 } };
    uint64_t t0 = clock_ns(s);
    if (llm_drafter_run(s->drafter, s->d_reqs, n, &err) != 0)
        s->st.draft_failures++; /* no drafts this step; the sequences start over in the drafter */
    s->st.draft_ms += ms_between(t0, clock_ns(s));
}

/* Place up to `want` of a running request's pending tokens. must_all: all or
 * nothing (decodes). may_preempt: free blocks by preempting the youngest
 * unplaced request (possibly r itself) until at least one token fits. */
static int place(llm_sched *s, sreq *r, int must_all, int may_preempt)
{
    int pending = r->n_tokens - r->n_computed;
    int n = pending < s->budget ? pending : s->budget;
    if (n <= 0)
        return PLACE_SKIP;
    if (r->n_computed + n == r->n_tokens && s->cfg.can_emit != NULL &&
        !s->cfg.can_emit(s->cfg.cb_ctx, r->id, r->user)) {
        if (must_all || n == 1)
            return PLACE_SKIP;  /* its output has no room: it would sample now */
        n--;                     /* compute all but the sampling token */
    }
    if ((n = plp_clamp(s, r, r->n_computed, n)) <= 0)
        return PLACE_SKIP;
    int need_min = must_all ? n : 1;
    for (;;) {
        long fits = seq_room(s, r);
        if (fits >= need_min) {
            if (fits < n)
                n = (int)fits;
            break;
        }
        if (!may_preempt)
            return PLACE_SKIP;
        sreq *v = youngest_unplaced(s);
        preempt(s, v);
        if (v == r)
            return PLACE_SELF_PREEMPTED;
    }
    r->n_draft = 0;
    if (must_all && n == 1 && pending == 1) /* a decode: drafts ride along where they fit without preempting */
        n += spec_draft(s, r, (int)seq_room(s, r) - 1);
    if (seq_reserve(s, r, r->n_computed + n) != 0) {
        if (n == 1 + r->n_draft && r->n_draft > 0 && seq_reserve(s, r, r->n_computed + 1) == 0) {
            s->plp_room += r->n_draft; /* drafts dropped: only the decode */
            s->st.spec_drafted -= (uint64_t)r->n_draft;
            r->n_draft = 0;
            n = 1;
        } else {
            r->n_draft = 0;
            return PLACE_SKIP; /* out of memory for the table */
        }
    }
    add_chunk(s, r, n);
    return PLACE_OK;
}

/* Blocks the running requests will need for their next decode after this step, in the main pool (window 0)
 * or the window pool (1). */
static int spare_blocks(const llm_sched *s, int window)
{
    int spare = 0;
    for (int i = 0; i < s->n_running; i++) {
        const sreq *r = s->running[i];
        /* after this step the next position written is `done`; a request
         * still mid-prefill can shrink its next chunk, a decode cannot */
        int done = r->n_computed + (r->placed ? r->chunk : 0);
        if (done >= r->n_tokens - 1 && done + 1 > (window ? r->kvw.n_blocks : r->kv.n_blocks) * s->bs)
            spare++;
    }
    return spare;
}

/* ---------------------------------------------------------------- memory cap */

/* The batching knobs under the memory cap. */
static int eff_batch(const llm_sched *s)
{
    return s->mem_batch > 0 && s->mem_batch < s->cfg.max_batch_size ? s->mem_batch : s->cfg.max_batch_size;
}

static int eff_tokens(const llm_sched *s)
{
    return s->mem_tokens > 0 && s->mem_tokens < s->cfg.max_batched_tokens ? s->mem_tokens : s->cfg.max_batched_tokens;
}

#define MEM_HOLD_MAX_FACTOR 64

/* The backend had no memory for the step just built (n tokens, nseq sequences;
 * nothing computed). Cap the steps at half of it and shed the youngest running
 * requests beyond the sequence cap. 0 = retry smaller, -1 = it was one token. */
static int mem_shrink(llm_sched *s, int n, int nseq, uint64_t now)
{
    s->st.oom_shrinks++;
    if (s->mem_grew && s->mem_hold_ms < s->cfg.oom_recover_ms * MEM_HOLD_MAX_FACTOR)
        s->mem_hold_ms *= 2; /* the growth came too early: wait longer next time */
    s->mem_grew = 0;
    s->mem_busy_ns = now;
    int tokens = n / 2 > 0 ? n / 2 : 1;
    int batch = eff_batch(s) < tokens ? eff_batch(s) : tokens;
    if (nseq > 1 && batch > nseq / 2)
        batch = nseq / 2; /* a batch of decodes: fewer sequences, not only fewer tokens */
    s->mem_tokens = tokens;
    s->mem_batch = batch;
    if (n <= 1)
        return -1; /* nothing smaller to try: the caller fails that request */
    while (s->n_running > batch)
        preempt(s, s->running[s->n_running - 1]);
    return 0;
}

/* Whether the cap held anything back in this step (or there is a queue). */
static void mem_note_load(llm_sched *s, uint64_t now)
{
    if (s->mem_tokens == 0)
        return;
    if ((s->n_running + s->n_waiting) * 2 > s->mem_batch || s->b_n * 2 > s->mem_tokens)
        s->mem_busy_ns = now;
}

/* Load fell: grow the cap back, one doubling per hold, lifted at the knobs. */
static void mem_recover(llm_sched *s, uint64_t now)
{
    if (s->mem_tokens == 0 || now - s->mem_busy_ns < (uint64_t)s->mem_hold_ms * 1000000ull)
        return;
    s->mem_tokens *= 2;
    s->mem_batch *= 2;
    s->mem_busy_ns = now;
    s->mem_grew = 1;
    if (s->mem_tokens >= s->cfg.max_batched_tokens && s->mem_batch >= s->cfg.max_batch_size) {
        s->mem_tokens = s->mem_batch = 0;
        s->mem_hold_ms = s->cfg.oom_recover_ms;
        s->st.oom_recoveries++;
    }
}

static int is_preferred(const llm_sched *s, int n)
{
    for (int i = 0; i < s->cfg.n_preferred; i++)
        if (s->cfg.preferred_batch_sizes[i] == n)
            return 1;
    return 0;
}

/* ns the batch-fill hold has left, 0 when admission may go ahead. */
static uint64_t hold_left_ns(const llm_sched *s, uint64_t now)
{
    if (s->n_running > 0 || s->n_waiting == 0 || s->cfg.n_preferred == 0 || s->cfg.batch_timeout_ms == 0)
        return 0;
    int mb = eff_batch(s);
    int n = s->n_waiting < mb ? s->n_waiting : mb;
    if (is_preferred(s, n))
        return 0;
    int larger = 0;
    for (int i = 0; i < s->cfg.n_preferred; i++) {
        int p = s->cfg.preferred_batch_sizes[i];
        larger |= p > n && p <= mb;
    }
    if (!larger)
        return 0;
    uint64_t oldest = s->waiting[0]->t_submit;
    for (int i = 1; i < s->n_waiting; i++)
        if (s->waiting[i]->t_submit < oldest)
            oldest = s->waiting[i]->t_submit;
    uint64_t limit = oldest + (uint64_t)s->cfg.batch_timeout_ms * 1000000ull;
    return now < limit ? limit - now : 0;
}

static void admit(llm_sched *s, uint64_t now)
{
    if (hold_left_ns(s, now) > 0)
        return;
    int mb = eff_batch(s);
    while (s->n_waiting > 0 && s->n_running < mb && s->budget > 0) {
        sreq *r = s->waiting[0];
        int hits_cached = 0;
        int one = one_step(s, r), whole = one || r->plp || r->embed == LLM_SCHED_EMBED_MEAN; /* every position */
        int m = whole ? 0 : llm_kv_peek_prefix(s->kv, r->tokens, r->n_tokens - 1, &hits_cached), hits_w = 0;
        if (s->kvw != NULL && m > 0) { /* a prefix also needs the blocks its next query reads in the window pool */
            int mw = llm_kv_peek_window(s->kvw, r->tokens, m, s->win - 1, &hits_w);
            if (mw < m)
                m = llm_kv_peek_prefix(s->kv, r->tokens, mw, &hits_cached);
        }
        /* a one-step input alone in a step may pass a budget lowered below it (tuning, memory) */
        int budget = one && s->b_n == 0 && r->n_tokens <= s->cap_tokens ? r->n_tokens : s->budget;
        int n = r->n_tokens - m < budget ? r->n_tokens - m : budget;
        long blocks = (long)llm_kv_available(s->kv) - hits_cached - spare_blocks(s, 0);
        if (s->kvw != NULL) {
            long w = (long)llm_kv_available(s->kvw) - hits_w - spare_blocks(s, 1);
            blocks = w < blocks ? w : blocks;
        }
        if (blocks * s->bs < n)
            n = blocks > 0 ? (int)(blocks * s->bs) : 0;
        if (n > 0 && !one && m + n == r->n_tokens && s->cfg.can_emit != NULL &&
            !s->cfg.can_emit(s->cfg.cb_ctx, r->id, r->user))
            n--; /* no room for its first token yet: prefill all but the last token */
        if (n > 0)
            n = plp_clamp(s, r, m, n);
        if (n <= 0 || (one && n < r->n_tokens))
            break; /* the head does not fit: it is not overtaken */
        waiting_remove_at(s, 0);
        int got = whole ? 0 : llm_kv_seq_match_prefix(s->kv, &r->kv, r->tokens, m);
        if (got > 0 && s->kvw != NULL && llm_kv_seq_match_window(s->kvw, &r->kvw, r->tokens, got, s->win - 1) != got)
            got = -1;
        if (got < 0 || seq_reserve(s, r, got + n) != 0) {
            finish(s, r, -1, NULL, LLM_SCHED_FINISH_ERROR, LLM_SCHED_E_NOMEM);
            continue;
        }
        r->n_computed = got;
        r->n_cached = got;
        s->st.cached_tokens += (uint64_t)got;
        if (r->t_admit == 0)
            r->t_admit = now;
        s->running[s->n_running++] = r;
        add_chunk(s, r, n);
    }
}

static void build_batch(llm_sched *s, uint64_t now)
{
    s->b_n = s->b_nseq = 0;
    s->budget = eff_tokens(s);
    s->plp_room = s->logit_rows - s->cap_batch;
    s->b_plp = 0;
    uint64_t preempted_before = s->st.preemptions;
    for (int i = 0; i < s->n_running; i++)
        s->running[i]->placed = 0;
    /* decodes, oldest first */
    for (int i = 0; i < s->n_running;) {
        sreq *r = s->running[i];
        if (!r->placed && r->n_tokens - r->n_computed == 1 && place(s, r, 1, 1) == PLACE_SELF_PREEMPTED)
            continue; /* running[i] is now the next one */
        i++;
    }
    /* prefill chunks of running requests; preemption only to break a standstill */
    for (int i = 0; i < s->n_running;) {
        sreq *r = s->running[i];
        if (!r->placed && r->n_tokens - r->n_computed > 1 && place(s, r, 0, s->b_n == 0) == PLACE_SELF_PREEMPTED)
            continue;
        i++;
    }
    /* no admission in a step that had to preempt: the freed blocks went to the
     * running requests, and re-admitting the victim at once would only thrash */
    if (s->st.preemptions == preempted_before)
        admit(s, now);
}

/* ---------------------------------------------------------------- a step */

static int is_stop(const sreq *r, int32_t t)
{
    for (int i = 0; i < r->n_stop; i++)
        if (r->stop[i] == t)
            return 1;
    return 0;
}

/* A request whose next row the host masks (JSON mode, a schema; stop ids under min_tokens), an embedding's or
 * a scoring one's: its row comes back. */
static int host_masked(const sreq *r)
{
    return (r->con != NULL && !r->thinking) || r->embed || r->n_score > 0 ||
           (r->n_gen < r->min_tokens && r->n_stop > 0);
}

/* Rows that need not come back as logits (at batch 256 x 128K vocab that is 128 MiB a step not copied, and
 * no 128K-wide pass on the host per request): a plain argmax (llm_sampler_plain_greedy) when the backend
 * offers forward_device, any other sampling call when it also offers device_sampling (the device gets the
 * parameters, the penalty pairs and the draw the request's PRNG would make). Rows whose pairs do not fit in
 * memory stay logits rows. 1 when this step uses it (dv filled). */
static int device_prepare(llm_sched *s, llm_device_out *dv)
{
    if (s->be->forward_device == NULL)
        return 0;
    if (s->dv_mode != NULL && s->dv_cap < s->logit_rows)
        dv_free(s); /* the logits rows grew: made again below */
    if (s->dv_mode == NULL) {
        size_t nb = (size_t)s->logit_rows; /* indexed by row (and sampled rows are at most that many) */
        s->dv_mode = malloc((size_t)s->cap_tokens);
        s->dv_ids = malloc(nb * sizeof(int32_t));
        s->dv_ntop = malloc(nb * sizeof(int32_t));
        s->dv_sidx = malloc(nb * sizeof(int32_t));
        s->dv_lp = malloc(nb * sizeof(float));
        s->dv_rows = malloc(nb * sizeof(llm_sampling_row));
        s->dv_top = malloc(nb * LLM_SAMPLING_MAX_LOGPROBS * sizeof(llm_token_logprob));
        if (s->dv_mode == NULL || s->dv_ids == NULL || s->dv_ntop == NULL || s->dv_sidx == NULL ||
            s->dv_lp == NULL || s->dv_rows == NULL || s->dv_top == NULL) {
            dv_free(s);
            return 0; /* plain forward this step; tried again next step */
        }
        s->dv_cap = s->logit_rows;
    }
    int any = 0, row = 0, ns = 0, np = 0;
    for (int i = 0; i < s->b_n; i++) {
        s->dv_mode[i] = LLM_ROW_LOGITS;
        if (!s->b_want[i])
            continue;
        const sreq *rq = s->b_reqs[s->b_seq[i]];
        llm_sampler *smp = rq->smp;
        s->dv_sidx[row] = -1;
        if (host_masked(rq)) {
            /* JSON mode or min_tokens masks the row's logits on the host: it comes back whole */
        } else if (llm_sampler_plain_greedy(smp)) {
            s->dv_mode[i] = LLM_ROW_ARGMAX;
        } else if (rq->n_draft > 0) {
            /* a sampled request's drafts: each row's draw follows the one before it (and its token's penalty),
             * so the rows come back whole and are drawn on the host in turn */
        } else if (s->be->device_sampling) {
            int need = llm_sampler_device_pairs(smp);
            if (np + need > s->dv_pen_cap) {
                int cap = (np + need) * 2 > 1024 ? (np + need) * 2 : 1024;
                int32_t *p = realloc(s->dv_pen, (size_t)cap * 2 * sizeof(int32_t));
                if (p != NULL) {
                    s->dv_pen = p;
                    s->dv_pen_cap = cap;
                }
            }
            llm_sampling_row *sr = &s->dv_rows[ns];
            if (np + need <= s->dv_pen_cap &&
                llm_sampler_device_row(smp, sr, s->dv_pen + 2 * (size_t)np, s->dv_pen_cap - np) >= 0) {
                sr->pen_off = np;
                sr->row = row;
                np += sr->pen_n + sr->bias_n;
                s->dv_sidx[row] = ns++;
                s->dv_mode[i] = LLM_ROW_SAMPLE;
            }
        }
        any |= s->dv_mode[i] != LLM_ROW_LOGITS;
        row++;
    }
    memset(dv, 0, sizeof(*dv));
    dv->mode = s->dv_mode;
    dv->ids = s->dv_ids;
    dv->logprob = s->dv_lp;
    dv->n_sample = ns;
    dv->sample = s->dv_rows;
    dv->pen = s->dv_pen;
    dv->n_pen = np;
    dv->top = s->dv_top;
    dv->n_top = s->dv_ntop;
    return any;
}

/* r's prompt-logprob rows of this step, from logits row `row` on: one output each (prompt = 1). Returns
 * the row after them. */
static int prompt_logprobs_out(llm_sched *s, sreq *r, int from, int row)
{
    if (!r->plp)
        return row;
    int n = plp_rows(r, from, r->chunk);
    int q = from > r->plp_next - 1 ? from : r->plp_next - 1;
    for (int k = 0; k < n; k++, q++, row++) {
        llm_sample_result res;
        int32_t id = r->tokens[q + 1];
        if (llm_token_logprobs(s->logits + (size_t)row * (size_t)s->vocab, s->vocab, id, r->n_top_lp, &res) == 0)
            emit_out(s, r, id, &res, LLM_SCHED_FINISH_NONE, 0, 1);
        r->plp_next = q + 2;
    }
    return row;
}

/* Adds n hidden rows (the start of logits rows row, row + 1, ...) to r's pooled sum. Returns the row after them. */
static int embed_add(llm_sched *s, sreq *r, int row, int n)
{
    int dim = s->be->model->cfg.dim;
    for (int k = 0; k < n; k++, row++) {
        const float *h = s->logits + (size_t)row * (size_t)s->vocab;
        for (int i = 0; i < dim; i++)
            r->emb[i] += h[i];
        r->emb_n++;
    }
    return row;
}

/* r's prompt is computed, its last row is `row`: its pooled hidden state goes out with its end. */
static void embed_finish(llm_sched *s, sreq *r, int row)
{
    int dim = s->be->model->cfg.dim;
    if (r->embed == LLM_SCHED_EMBED_LAST || r->embed == LLM_SCHED_EMBED_CLS) {
        memcpy(r->emb, s->logits + (size_t)row * (size_t)s->vocab, (size_t)dim * sizeof(float));
    } else {
        embed_add(s, r, row, 1);
        for (int i = 0; i < dim; i++)
            r->emb[i] /= (float)r->emb_n;
    }
    llm_model_dense_apply(s->be->model, r->emb); /* (EmbeddingGemma's Dense modules; nothing for others) */
    running_remove(s, r);
    finish(s, r, -1, NULL, LLM_SCHED_FINISH_STOP, 0);
}

/* The token of logits row `row` of request r, from the device's results or by sampling its logits. */
static int32_t row_token(llm_sched *s, sreq *r, int use_dv, int row, llm_sample_result *res)
{
    if (use_dv && !host_masked(r) && llm_sampler_plain_greedy(r->smp)) { /* the row's logits were not copied back */
        res->id = s->dv_ids[row];
        res->logprob = s->dv_lp[row];
        res->n_top = 0;
        return res->id;
    }
    int j = use_dv ? s->dv_sidx[row] : -1;
    if (j >= 0) { /* sampled on the device */
        res->id = s->dv_ids[row];
        res->logprob = s->dv_lp[row];
        res->n_top = s->dv_ntop[j];
        memcpy(res->top, s->dv_top + (size_t)j * LLM_SAMPLING_MAX_LOGPROBS,
               (size_t)res->n_top * sizeof(llm_token_logprob));
        llm_sampler_device_commit(r->smp);
        return res->id;
    }
    float *lg = s->logits + (size_t)row * (size_t)s->vocab;
    llm_token_logprob score[LLM_SCHED_MAX_SCORE]; /* from the raw row, before penalties and masks */
    for (int k = 0; k < r->n_score; k++) {
        llm_sample_result one;
        score[k].id = r->score[k];
        score[k].logprob = llm_token_logprobs(lg, s->vocab, r->score[k], 0, &one) == 0 ? one.logprob : -INFINITY;
    }
    if (r->n_score > 0) {
        int32_t t = llm_sampler_sample(r->smp, lg, res);
        res->n_top = r->n_score;
        memcpy(res->top, score, (size_t)r->n_score * sizeof(score[0]));
        return t;
    }
    if (r->n_gen < r->min_tokens) /* no stop id before min_tokens */
        for (int i = 0; i < r->n_stop; i++)
            if (r->stop[i] >= 0 && r->stop[i] < s->vocab)
                lg[r->stop[i]] = -INFINITY;
    /* a reasoning model's first token may open its thinking instead (reason_start kept through the mask), or
     * its first after whitespace (GLM-4.5 writes a newline before <think>; JSON takes leading whitespace) */
    int open = r->con != NULL && !r->thinking && (r->n_gen == 0 || r->lead_ws) && r->reason_start >= 0;
    float keep = open ? lg[r->reason_start] : 0.0f;
    /* a regex's whole match that may go on: the stop ids are kept through the mask (they end it here) */
    int can_end = r->con != NULL && !r->thinking && llm_schema_can_end(r->con);
    float stop_lg[LLM_SCHED_MAX_STOP];
    for (int i = 0; can_end && i < r->n_stop; i++)
        stop_lg[i] = r->stop[i] >= 0 && r->stop[i] < s->vocab ? lg[r->stop[i]] : -INFINITY;
    if (r->con != NULL && r->thinking) {
        /* thinking: nothing masked until reason_end */
    } else if (r->con != NULL && r->allow_ready) { /* made by the mask pool during the forward */
        r->allow_ready = 0;
        if (r->allow_left == 0 && !open && !can_end)
            return -1;
        llm_json_mask_apply(r->allow, lg, s->vocab);
    } else if (r->con != NULL && llm_schema_mask(r->con, s->cfg.json_vocab, lg, s->vocab) == 0 && !open &&
               !can_end) {
        return -1; /* no token can continue the JSON text */
    }
    if (open)
        lg[r->reason_start] = keep;
    for (int i = 0; can_end && i < r->n_stop; i++)
        if (r->stop[i] >= 0 && r->stop[i] < s->vocab)
            lg[r->stop[i]] = stop_lg[i];
    return llm_sampler_sample(r->smp, lg, res);
}

/* Token t's text is whitespace only (and not empty). */
static int all_ws(const llm_json_vocab *v, int32_t t)
{
    size_t n = 0;
    const char *p = llm_json_token_bytes(v, t, &n);
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
            return 0;
    return n > 0;
}

/* r's generated tokens end with its reason_end sequence. */
static int ends_thinking(const sreq *r)
{
    int n = r->n_reason_end;
    return r->n_gen >= n && memcmp(r->tokens + r->n_tokens - n, r->reason_end, (size_t)n * sizeof(int32_t)) == 0;
}

/* r takes token t (sampled at time t1): appended, emitted; the request ends after a stop id, a whole JSON
 * value, max_tokens or a full context (t < 0: no token could continue its JSON). 1 when it ended. */
static int take_token(llm_sched *s, sreq *r, int32_t t, const llm_sample_result *res, uint64_t t1)
{
    if (t < 0) { /* JSON with no token left (never with a vocabulary that has single bytes) */
        running_remove(s, r);
        finish(s, r, -1, NULL, LLM_SCHED_FINISH_STOP, 0);
        return 1;
    }
    llm_sampler_accept(r->smp, t, 0);
    r->tokens[r->n_tokens++] = t;
    r->n_gen++;
    s->st.tokens_out++;
    r->t_last = t1;
    if (r->t_first == 0)
        r->t_first = t1;
    llm_sched_finish fin = LLM_SCHED_FINISH_NONE;
    if (r->con != NULL && r->thinking)
        r->thinking = !ends_thinking(r);
    else if (r->con != NULL && (r->n_gen == 1 || r->lead_ws) && r->reason_start >= 0 && t == r->reason_start)
        r->thinking = 1; /* it thinks first: the mask waits for reason_end */
    else if (r->con != NULL)
        (void)llm_schema_accept(r->con, s->cfg.json_vocab, t); /* the mask let only such tokens through */
    if (r->con != NULL && r->reason_start >= 0)
        r->lead_ws = (r->n_gen == 1 || r->lead_ws) && !r->thinking && all_ws(s->cfg.json_vocab, t);
    if (is_stop(r, t) || (r->con != NULL && !r->thinking && llm_schema_done(r->con)))
        fin = LLM_SCHED_FINISH_STOP;
    else if (r->n_gen >= r->max_tokens || r->n_tokens >= s->ctx_limit)
        fin = LLM_SCHED_FINISH_LENGTH;
    if (fin == LLM_SCHED_FINISH_NONE) {
        emit(s, r, t, res, fin, 0);
        return 0;
    }
    running_remove(s, r);
    finish(s, r, t, res, fin, 0);
    return 1;
}

int llm_sched_step(llm_sched *s)
{
    uint64_t t0 = clock_ns(s);
    emb_done_free(s); /* the last step's outputs were read */
    process_cancels(s);
    mem_recover(s, t0);
    draft_models(s);
    build_batch(s, t0);
    mem_note_load(s, t0);
    s->idle_step = s->b_n == 0;
    if (s->b_n == 0)
        return s->n_running > 0 || s->n_waiting > 0;

    llm_batch batch = { s->b_n, s->b_tok, s->b_pos, s->b_seq, s->b_want, s->b_nseq, s->b_views };
    llm_err err = { { 0 } };
    llm_device_out dv;
    int use_dv = s->b_plp == 0 && device_prepare(s, &dv); /* prompt-logprob rows: every row comes back */
    masks_start(s); /* the constrained requests' masks, made while the forward runs */
    int rc = use_dv ? s->be->forward_device(s->be, &batch, &dv, s->logits, &err)
                    : s->be->ops->forward(s->be, &batch, s->logits, &err);
    masks_wait(s);
    uint64_t t1 = clock_ns(s);
    s->st.steps++;
    s->st.last_batch_seqs = s->b_nseq;
    s->st.last_batch_tokens = s->b_n;
    if (s->b_n > s->st.max_step_tokens)
        s->st.max_step_tokens = s->b_n;
    for (int i = 0; rc != 0 && i < s->b_nseq; i++)
        s->b_reqs[i]->n_draft = 0; /* nothing was computed: drafts are made again */
    if (rc == LLM_BACKEND_NOMEM && mem_shrink(s, s->b_n, s->b_nseq, t1) == 0) {
        snprintf(s->errmsg, sizeof(s->errmsg), "backend out of memory at a step of %d tokens (%d sequences): %.400s; "
                 "steps now capped at %d tokens, %d sequences", s->b_n, s->b_nseq, err.msg, s->mem_tokens,
                 s->mem_batch);
        return 1; /* nothing computed: the same requests go again, smaller */
    }
    if (rc != 0) {
        snprintf(s->errmsg, sizeof(s->errmsg), "backend forward failed: %s", err.msg);
        for (int i = 0; i < s->b_nseq; i++) {
            sreq *r = s->b_reqs[i];
            running_remove(s, r);
            finish(s, r, -1, NULL, LLM_SCHED_FINISH_ERROR,
                   rc == LLM_BACKEND_NOMEM ? LLM_SCHED_E_NOMEM : LLM_SCHED_E_BACKEND);
        }
        return -1;
    }

    int row = 0;
    for (int i = 0; i < s->b_nseq; i++) {
        sreq *r = s->b_reqs[i];
        int from = r->n_computed;
        row = prompt_logprobs_out(s, r, from, row);
        if (r->embed == LLM_SCHED_EMBED_MEAN)
            row = embed_add(s, r, row, plp_rows(r, from, r->chunk));
        int nd = r->n_draft; /* drafts: computed, but not the request's tokens unless confirmed below */
        r->n_draft = 0;
        r->n_computed += r->chunk - nd;
        if (from < r->prompt_len)
            s->st.tokens_in += (uint64_t)((r->n_computed < r->prompt_len ? r->n_computed : r->prompt_len) - from);
        /* The prefix cache takes every whole block computed, generated tokens' too: a conversation's next turn
         * (its prompt this one's with the answer after it) finds the answer's KV as well. An encoder's KV depends
         * on the whole input: no prefix to share, and its blocks go back to the free stack hot, not to the LRU. */
        if (!s->be->model->cfg.bidirectional) {
            llm_kv_seq_commit(s->kv, &r->kv, r->tokens, r->n_computed);
            if (s->kvw != NULL) /* (before the drop below: a block given back unregistered is lost to the cache) */
                llm_kv_seq_commit(s->kvw, &r->kvw, r->tokens, r->n_computed);
        }
        if (s->kvw != NULL) /* the next query, at n_computed, sees back to n_computed - win + 1 */
            llm_kv_seq_drop_front(s->kvw, &r->kvw, r->n_computed - s->win + 1);
        if (r->n_computed < r->n_tokens)
            continue; /* mid-prefill: nothing to sample yet */
        if (r->embed) {
            embed_finish(s, r, row++);
            continue;
        }
        /* the token after the last computed one; then, while it is the next draft, the next one's */
        int end = row + 1 + nd, confirmed = 0, ended = 0;
        for (int j = 0; j <= nd; j++) {
            llm_sample_result res;
            int32_t t = row_token(s, r, use_dv, row++, &res);
            int32_t draft = j < nd ? r->tokens[r->n_tokens] : -1; /* overwritten by the token taken */
            if ((ended = take_token(s, r, t, &res, t1)) || j == nd || t != draft)
                break; /* (an ended request is freed) */
            r->n_computed++; /* the draft was this token: its KV entry, computed this step, stands */
            confirmed++;
        }
        s->st.spec_accepted += (uint64_t)confirmed;
        if (s->drafter != NULL && !ended) /* the draft's KV of the confirmed drafts stands */
            llm_drafter_confirm(&r->dseq, confirmed);
        if (nd > 0 && !ended) { /* no draft confirmed: back off; one confirmed: draft every step again */
            r->spec_miss = confirmed > 0 ? 0 : r->spec_miss < 4 ? r->spec_miss + 1 : 4;
            r->spec_skip = (1 << r->spec_miss) - 1;
            if (s->drafter != NULL && !s->cfg.draft_fixed) /* the draft model's length follows its record */
                r->d_k = confirmed < nd ? confirmed + 1 : r->d_k < s->cfg.spec_tokens ? r->d_k + 1 : r->d_k;
        }
        row = end;
    }
    uint64_t t2 = clock_ns(s);
    s->st.last_step_ms = ms_between(t0, t2);
    s->st.total_step_ms += s->st.last_step_ms;
    return s->n_running > 0 || s->n_waiting > 0;
}

int llm_sched_wait_ms(llm_sched *s)
{
    if (s->n_running > 0)
        return s->idle_step ? -1 : 0; /* idle: every running request waits on back-pressure */
    if (s->n_waiting == 0)
        return -1;
    uint64_t left = hold_left_ns(s, clock_ns(s));
    return left == 0 ? 0 : (int)((left + 999999) / 1000000);
}

void llm_sched_get_stats(const llm_sched *s, llm_sched_stats *st)
{
    *st = s->st;
    st->mem_cap_tokens = s->mem_tokens;
    st->mem_cap_batch = s->mem_batch;
    st->running = s->n_running;
    st->waiting = s->n_waiting;
    st->prefill_pending = 0;
    for (int i = 0; i < s->n_running + s->n_waiting; i++) {
        const sreq *r = i < s->n_running ? s->running[i] : s->waiting[i - s->n_running];
        if (r->n_computed < r->prompt_len)
            st->prefill_pending += r->prompt_len - r->n_computed;
    }
    llm_kv_get_stats(s->kv, &st->kv);
    memset(&st->kvw, 0, sizeof(st->kvw));
    if (s->kvw != NULL)
        llm_kv_get_stats(s->kvw, &st->kvw);
}
