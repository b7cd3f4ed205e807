/* The serve loop: shm submissions -> scheduler -> token streams. One thread. */
#include "serve.h"

#include "backend_util.h"
#include "llm_server.h"
#include "tokenizer.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

/* Per-slot engine-side state; a slot holds at most one live request, so the
 * scheduler id is the slot index. */
typedef struct {
    uint8_t live;
    uint8_t cancel_sent;
    uint8_t rank;        /* its result is the classifier head's outputs (LLM_PARAM_RANK) */
} slot_state;

typedef struct {
    llm_server      *srv;
    llm_shm_metrics *met;
    slot_state      *slots;
    int              n_slots;
    int              live;
    int              max_waiting; /* scheduler queue bound, 0 = none */
    int              pooling;     /* of embedding requests */
    const llm_model *model;       /* its classifier head (rank requests) */
    uint64_t         oom_shrinks, oom_recoveries; /* last seen, for the log */
} serve_ctx;

static int can_emit(void *ctx, uint64_t id, void *user)
{
    serve_ctx *c = ctx;
    (void)user;
    return llm_server_stream_space(c->srv, (uint32_t)id) > 0;
}

static int emit_room(void *ctx, uint64_t id, void *user)
{
    serve_ctx *c = ctx;
    (void)user;
    uint32_t n = llm_server_stream_space(c->srv, (uint32_t)id);
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

static void on_output(void *ctx, const llm_sched_output *o)
{
    serve_ctx *c = ctx;
    uint32_t slot = (uint32_t)o->id;
    llm_server_set_cached(c->srv, slot, o->n_cached > 0 ? (uint32_t)o->n_cached : 0);
    if (o->embedding != NULL && slot < (uint32_t)c->n_slots && c->slots[slot].rank) {
        /* a rank request: the classifier head's outputs on the last token's hidden state ([CLS]'s: BERT) */
        const llm_model *m = c->model;
        float r[LLM_MODEL_MAX_CLS];
        if (o->n_embd == m->cfg.dim) {
            llm_model_rank_apply(m, o->embedding, r);
            (void)llm_server_put_result(c->srv, slot, r, (uint32_t)m->n_cls);
        }
    } else if (o->embedding != NULL) {
        (void)llm_server_put_result(c->srv, slot, o->embedding, (uint32_t)o->n_embd); /* too large: no result */
    }
    if (o->token >= 0) {
        llm_shm_logprob top[LLM_SHM_MAX_TOP];
        int n_top = o->n_top < LLM_SHM_MAX_TOP ? o->n_top : LLM_SHM_MAX_TOP;
        for (int i = 0; i < n_top; i++) {
            top[i].id = o->top[i].id;
            top[i].logprob = o->top[i].logprob;
        }
        /* can_emit guaranteed room; a failure means the client let go (INVAL). */
        /* llm_server_push / llm_server_finish / the pop count tokens and finishes
         * in the metrics block and fill the TTFT, TPOT and queue-time histograms
         * (from the slot's submit time, which includes the ring hop). */
        llm_server_push_ex(c->srv, slot, o->token, o->logprob, top, (uint32_t)n_top, o->prompt ? LLM_ENTRY_PROMPT : 0);
    }
    if (o->finish == LLM_SCHED_FINISH_NONE)
        return;
    llm_finish_reason why = (llm_finish_reason)o->finish;
    int32_t error = 0;
    if (why == LLM_FINISH_ERROR)
        error = o->error == LLM_SCHED_E_NOMEM ? LLM_SHM_E_NOMEM : LLM_SHM_E_BACKEND;
    llm_server_finish(c->srv, slot, why, error);
    if (slot < (uint32_t)c->n_slots && c->slots[slot].live) {
        c->slots[slot].live = 0;
        c->live--;
    }
}

/* Turn one popped slot into a scheduler request (or end it with an error). */
static void admit(serve_ctx *c, llm_sched *sched, uint32_t slot)
{
    uint32_t n = 0;
    const int32_t *prompt = llm_server_prompt(c->srv, slot, &n);
    const llm_shm_params *p = llm_server_params(c->srv, slot);
    llm_sched_request r;
    memset(&r, 0, sizeof(r));
    r.id = slot;
    r.prompt = prompt;
    r.n_prompt = (int)n;
    llm_sampling_defaults(&r.sampling);
    r.sampling.temperature = p->temperature;
    r.sampling.top_k = p->top_k;
    r.sampling.top_p = p->top_p;
    r.sampling.min_p = p->min_p;
    r.sampling.typical_p = p->typical_p;
    r.sampling.repetition_penalty = p->repetition_penalty;
    r.sampling.presence_penalty = p->presence_penalty;
    r.sampling.frequency_penalty = p->frequency_penalty;
    r.sampling.penalty_last_n = p->penalty_last_n;
    r.sampling.seed = p->seed;
    r.sampling.n_logprobs = p->n_logprobs;
    /* the slot is untrusted memory: a count beyond the array reaches the scheduler as -1, which it refuses */
    llm_logit_bias bias[LLM_SHM_MAX_BIAS];
    uint32_t nb = p->n_bias;
    for (uint32_t i = 0; i < nb && i < LLM_SHM_MAX_BIAS; i++)
        bias[i] = (llm_logit_bias){ p->bias[i].id, p->bias[i].bias };
    r.bias = bias;
    r.n_bias = nb <= LLM_SHM_MAX_BIAS ? (int)nb : -1;
    r.json = (p->flags & LLM_PARAM_JSON) != 0;
    uint32_t schema_len = 0;
    r.schema = llm_server_schema(c->srv, slot, &schema_len); /* compiled (and checked) by the scheduler */
    r.schema_len = schema_len;
    r.regex = (p->flags & LLM_PARAM_REGEX) != 0;
    r.grammar = (p->flags & LLM_PARAM_GRAMMAR) != 0;
    r.priority = p->priority > -INT32_MAX ? -p->priority : INT32_MAX; /* the scheduler takes higher first */
    r.prompt_logprobs = (p->flags & LLM_PARAM_PROMPT_LOGPROBS) != 0;
    r.embed = (p->flags & LLM_PARAM_EMBED) ? c->pooling : LLM_SCHED_EMBED_NONE;
    int rank = (p->flags & LLM_PARAM_EMBED) && (p->flags & LLM_PARAM_RANK);
    if (rank && c->model->n_cls == 0) {
        fprintf(stderr, "serve: request in slot %u refused: a rank request and the model has no classifier head\n",
                slot);
        llm_server_finish(c->srv, slot, LLM_FINISH_ERROR, LLM_SHM_E_INVAL);
        return;
    }
    if (rank) { /* the head applies to the last token's hidden state, a BERT cross-encoder's to [CLS]'s */
        int pool = llm_model_rank_pool(c->model);
        r.embed = pool == LLM_POOL_MEAN ? LLM_SCHED_EMBED_MEAN : pool == LLM_POOL_CLS ? LLM_SCHED_EMBED_CLS
                                                                                     : LLM_SCHED_EMBED_LAST;
    }
    r.reasoning = (p->flags & LLM_PARAM_REASONING) != 0; /* ids checked against the vocabulary by the scheduler */
    r.reason_start = p->reason_start;
    r.reason_end = p->reason_end;
    r.n_reason_end = p->n_reason_end <= LLM_SHM_MAX_REASON_END ? (int)p->n_reason_end : -1; /* (-1: refused) */
    r.max_tokens = p->max_tokens;
    r.min_tokens = p->min_tokens > 0 ? p->min_tokens : 0;
    r.stop_ids = p->stop_ids;
    r.n_stop = (int)(p->n_stop <= LLM_SCHED_MAX_STOP ? p->n_stop : LLM_SCHED_MAX_STOP);
    r.score_ids = p->score_ids;
    r.n_score = p->n_score <= LLM_SHM_MAX_SCORE && p->n_score <= LLM_SCHED_MAX_SCORE ? (int)p->n_score : -1;
    /* A full queue gets its own code (the client may retry: 429); the
     * scheduler's other refusals are malformed requests. */
    llm_sched_stats st;
    llm_sched_get_stats(sched, &st);
    if (c->max_waiting > 0 && st.waiting >= c->max_waiting) {
        llm_server_finish(c->srv, slot, LLM_FINISH_ERROR, LLM_SHM_E_QUEUE_FULL);
        return;
    }
    llm_err err = { { 0 } };
    if (llm_sched_submit(sched, &r, &err) != 0) {
        fprintf(stderr, "serve: request in slot %u refused: %s\n", slot, err.msg);
        llm_server_finish(c->srv, slot, LLM_FINISH_ERROR, LLM_SHM_E_INVAL);
        return;
    }
    c->slots[slot].live = 1;
    c->slots[slot].cancel_sent = 0;
    c->slots[slot].rank = rank;
    c->live++;
}

static void publish_gauges(serve_ctx *c, const llm_sched *sched)
{
    llm_sched_stats st;
    llm_sched_get_stats(sched, &st);
    atomic_store_explicit(&c->met->batch_size, st.last_batch_seqs, memory_order_relaxed);
    atomic_store_explicit(&c->met->running, st.running, memory_order_relaxed);
    atomic_store_explicit(&c->met->kv_blocks_used, st.kv.used, memory_order_relaxed);
    atomic_store_explicit(&c->met->kv_blocks_free, st.kv.free + st.kv.cached, memory_order_relaxed);
    atomic_store_explicit(&c->met->kv_blocks_cached, st.kv.cached, memory_order_relaxed);
    atomic_store_explicit(&c->met->kv_window_blocks_used, st.kvw.used, memory_order_relaxed);
    atomic_store_explicit(&c->met->kv_window_blocks_free, st.kvw.free + st.kvw.cached, memory_order_relaxed);
    atomic_store_explicit(&c->met->tokens_cached, st.cached_tokens, memory_order_relaxed);
    atomic_store_explicit(&c->met->queue_depth, st.waiting, memory_order_relaxed);
    atomic_store_explicit(&c->met->prefill_pending, st.prefill_pending, memory_order_relaxed);
    atomic_store_explicit(&c->met->preemptions, st.preemptions, memory_order_relaxed);
    atomic_store_explicit(&c->met->spec_drafted, st.spec_drafted, memory_order_relaxed);
    atomic_store_explicit(&c->met->spec_accepted, st.spec_accepted, memory_order_relaxed);
    atomic_store_explicit(&c->met->mem_cap_tokens, st.mem_cap_tokens, memory_order_relaxed);
    atomic_store_explicit(&c->met->mem_cap_batch, st.mem_cap_batch, memory_order_relaxed);
    if (st.oom_shrinks != c->oom_shrinks || st.oom_recoveries != c->oom_recoveries) {
        if (st.oom_shrinks != c->oom_shrinks)
            fprintf(stderr, "serve: %s\n", llm_sched_last_error(sched));
        else
            fprintf(stderr, "serve: load fell, memory cap lifted: steps back to the knobs' size\n");
        c->oom_shrinks = st.oom_shrinks;
        c->oom_recoveries = st.oom_recoveries;
    }
    atomic_store_explicit(&c->met->oom_shrinks, st.oom_shrinks, memory_order_relaxed);
    atomic_store_explicit(&c->met->oom_recoveries, st.oom_recoveries, memory_order_relaxed);
}

/* Apply knobs a supervisor's tuner wrote into the metrics block (llm_shm_tuning)
 * and publish what is in force. Cheap: one atomic load when nothing changed. */
static void apply_tuning(llm_shm_tuning *t, llm_sched *sched, int force_publish)
{
    uint32_t seq = atomic_load_explicit(&t->seq, memory_order_acquire);
    if (!force_publish && seq == atomic_load_explicit(&t->applied, memory_order_relaxed))
        return;
    if (seq != 0 &&
        llm_sched_set_knobs(sched, atomic_load(&t->want_max_batch_size), atomic_load(&t->want_batch_timeout_ms),
                            atomic_load(&t->want_max_batched_tokens)) != 0)
        fprintf(stderr, "serve: tuning #%u refused (above the configured bounds)\n", seq);
    int mbs, bto, mbt;
    llm_sched_get_knobs(sched, &mbs, &bto, &mbt);
    atomic_store(&t->cur_max_batch_size, mbs);
    atomic_store(&t->cur_batch_timeout_ms, bto);
    atomic_store(&t->cur_max_batched_tokens, mbt);
    atomic_store_explicit(&t->applied, seq, memory_order_release);
}

static void model_description(const llm_model *m, llm_shm_model *d)
{
    memset(d, 0, sizeof(*d));
    const char *name = m->name[0] ? m->name : m->arch;
    size_t n = strnlen(name, sizeof(d->name) - 1);
    memcpy(d->name, name, n); /* d was zeroed: stays NUL-terminated */
    d->vocab_size = (uint32_t)m->cfg.vocab_size;
    d->ctx_len = (uint32_t)m->cfg.seq_len;
    d->bos_id = m->cfg.bos_id;
    d->eos_id = m->cfg.eos_id;
    if (m->tok != NULL) {
        d->n_eog = (uint32_t)llm_tok_eog_ids(m->tok, d->eog_ids, LLM_SHM_MAX_EOG);
        d->tok_kind = (uint32_t)llm_tok_kind_of(m->tok);
    } else if (m->cfg.eos_id >= 0) {
        d->n_eog = 1;
        d->eog_ids[0] = m->cfg.eos_id;
    }
}

int llm_serve(llm_model *m, llm_backend *b, const llm_serve_opts *o, llm_err *err)
{
    serve_ctx c;
    memset(&c, 0, sizeof(c));
    c.n_slots = o->n_slots;
    c.max_waiting = o->sched.max_waiting;
    c.pooling = o->pooling == LLM_SCHED_EMBED_MEAN || o->pooling == LLM_SCHED_EMBED_CLS ? o->pooling
                                                                                         : LLM_SCHED_EMBED_LAST;
    c.model = m;
    c.slots = calloc((size_t)o->n_slots, sizeof(*c.slots));
    if (c.slots == NULL) {
        llm_seterr(err, "out of memory");
        return -1;
    }

    llm_sched_config sc = o->sched;
    sc.on_output = on_output;
    sc.can_emit = can_emit;
    sc.emit_room = emit_room;
    sc.cb_ctx = &c;
    /* JSON mode's token bytes; without a tokenizer such requests are refused */
    llm_json_vocab *jv = m->tok != NULL ? llm_json_vocab_new(m->tok) : NULL;
    if (m->tok != NULL && jv == NULL) {
        llm_seterr(err, "out of memory");
        free(c.slots);
        return -1;
    }
    sc.json_vocab = jv;
    llm_sched *sched = llm_sched_create(b, &sc, err);
    if (sched == NULL) {
        llm_json_vocab_free(jv);
        free(c.slots);
        return -1;
    }

    llm_server_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.name = o->shm_name;
    cfg.mode = o->shm_mode;
    cfg.caps.n_slots = (uint32_t)o->n_slots;
    cfg.caps.ring_size = 1;
    while (cfg.caps.ring_size < (uint32_t)o->n_slots)
        cfg.caps.ring_size <<= 1; /* never smaller than the slots: a full ring means no slot */
    cfg.caps.max_prompt = (uint32_t)llm_sched_context_limit(sched) - 1; /* room for one generated token */
    cfg.caps.stream_cap = (uint32_t)o->stream_cap;
    cfg.caps.max_top = LLM_SHM_MAX_TOP;
    cfg.caps.n_waiters = 1024;
    model_description(m, &cfg.model);
    cfg.model.ctx_len = (uint32_t)llm_sched_context_limit(sched);
    cfg.model.n_embd = (uint32_t)m->cfg.dim;
    cfg.model.pooling = (uint32_t)c.pooling;
    cfg.model.n_cls = (uint32_t)m->n_cls;
    cfg.model.encoder = (uint32_t)m->cfg.bidirectional; /* embeddings only, inputs whole */
    char msg[256];
    c.srv = llm_server_create(&cfg, msg, sizeof(msg));
    if (c.srv == NULL) {
        llm_seterr(err, "cannot create segment '%s': %s", o->shm_name, msg);
        llm_sched_destroy(sched);
        llm_json_vocab_free(jv);
        free(c.slots);
        return -1;
    }
    c.met = llm_server_map(c.srv)->metrics;

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    apply_tuning(&c.met->tuning, sched, 1);
    llm_server_set_state(c.srv, LLM_ENGINE_READY);
    fprintf(stderr, "serve: ready on /llm-%s (generation %llu): %d slots, %d KV blocks of %d tokens, context %d\n",
            o->shm_name, (unsigned long long)llm_server_generation(c.srv), o->n_slots, b->opts.kv_blocks,
            b->opts.block_size, llm_sched_context_limit(sched));
    if (b->opts.swa_blocks > 0) {
        int nw = llm_swa_pool_layers(b->model), bs = b->opts.block_size, kd = b->opts.kv_dtype;
        long long main_b = (long long)b->opts.kv_blocks * bs * llm_kv_layers_token_bytes(b->model, kd,
                                                                                          b->model->cfg.n_layers - nw);
        long long win_b = (long long)b->opts.swa_blocks * bs * llm_kv_layers_token_bytes(b->model, kd, nw);
        fprintf(stderr, "serve: --swa-kv window: the %d sliding-window layers' KV in a window pool of %d blocks "
                "(%lld MiB; window %d tokens), the other %d layers' in the main pool (%lld MiB)\n",
                nw, b->opts.swa_blocks, win_b >> 20, b->model->cfg.swa_window, b->model->cfg.n_layers - nw,
                main_b >> 20);
    }

    int rc = 0, draining = 0;
    while (!(stop_signal == SIGINT || (draining && c.live == 0))) {
        if (stop_signal == SIGTERM && !draining) {
            draining = 1;
            llm_server_set_state(c.srv, LLM_ENGINE_DRAINING);
            fprintf(stderr, "serve: SIGTERM, draining %d running requests\n", c.live);
        }
        /* Draining: clients submit no more (their submit sees the state), so what the ring still holds was
         * submitted before it changed: it runs like the rest (a replica's rolling restart drops nothing). */
        uint32_t slot;
        while (llm_server_pop(c.srv, &slot))
            admit(&c, sched, slot);
        llm_server_reap(c.srv, 0);
        apply_tuning(&c.met->tuning, sched, 0);
        for (int i = 0; i < c.n_slots; i++) {
            if (c.slots[i].live && !c.slots[i].cancel_sent && llm_server_cancelled(c.srv, (uint32_t)i)) {
                llm_sched_cancel(sched, (uint64_t)i);
                c.slots[i].cancel_sent = 1;
            }
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int st = llm_sched_step(sched);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (st < 0)
            fprintf(stderr, "serve: step failed: %s\n", llm_sched_last_error(sched));
        llm_sched_stats ss;
        llm_sched_get_stats(sched, &ss);
        if (ss.last_batch_tokens > 0 && st != 0)
            llm_hist_observe(&c.met->step_time, (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull +
                                                    (uint64_t)(t1.tv_nsec - t0.tv_nsec));
        publish_gauges(&c, sched);
        llm_server_heartbeat(c.srv);
        /* Sleep on the doorbell when there is nothing to step; back-pressured
         * streams (clients not reading) are re-checked every millisecond. */
        int wait = llm_sched_wait_ms(sched);
        if (wait < 0)
            wait = c.live > 0 ? 1 : 100;
        if (wait != 0)
            llm_server_wait(c.srv, wait > 100 ? 100 : wait);
    }
    llm_sched_stats fs;
    llm_sched_get_stats(sched, &fs);
    if (fs.spec_drafted > 0)
        fprintf(stderr, "serve: %s speculation: %llu of %llu drafted tokens confirmed (%.0f%%), %llu tokens out in "
                "%llu steps (%.1f s drafting)\n", o->sched.draft != NULL ? "draft-model" : "n-gram",
                (unsigned long long)fs.spec_accepted, (unsigned long long)fs.spec_drafted,
                100.0 * (double)fs.spec_accepted / (double)fs.spec_drafted, (unsigned long long)fs.tokens_out,
                (unsigned long long)fs.steps, fs.draft_ms / 1000.0);
    fprintf(stderr, "serve: stopping (%s)\n", stop_signal == SIGINT ? "SIGINT" : "drained");
    llm_server_destroy(c.srv);
    llm_sched_destroy(sched);
    llm_json_vocab_free(jv);
    free(c.slots);
    return rc;
}
