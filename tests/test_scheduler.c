/* Scheduler tests. A fake backend computes each token's KV entry as a hash of
 * (token, position, the previous position's entry read through the block
 * table) and each logits row from a hash of every entry the sequence reads, so
 * a wrong position, block table, shared-block overwrite or missing recompute
 * changes the output. Every scenario compares each request's tokens, logprobs
 * and finish reason with the same request run alone. The last part runs the
 * same check on the real stories260K model with the CPU backend. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include "backend.h"
#include "model.h"
#include "model_gen.h"
#include "scheduler.h"
#include "tap.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ fake backend */

typedef struct {
    uint64_t *kvv;       /* [kv_blocks * block_size] */
    uint8_t  *written;
    int max_tokens_seen;
    int fail;            /* next forward fails */
    int nomem_above;     /* > 0: a batch of more tokens reports LLM_BACKEND_NOMEM; < 0: every batch */
    int nomem_hits;
} fake_impl;

static uint64_t mix(uint64_t h)
{
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

static int fake_init(llm_backend *b, llm_err *err)
{
    fake_impl *f = calloc(1, sizeof(*f));
    size_t n = (size_t)b->opts.kv_blocks * (size_t)b->opts.block_size;
    if (f == NULL || (f->kvv = calloc(n, sizeof(uint64_t))) == NULL || (f->written = calloc(n, 1)) == NULL) {
        if (f != NULL)
            free(f->kvv);
        free(f);
        llm_seterr(err, "fake: out of memory");
        return -1;
    }
    b->impl = f;
    return 0;
}

static void fake_destroy(llm_backend *b)
{
    fake_impl *f = b->impl;
    free(f->kvv);
    free(f->written);
    free(f);
}

static long fake_slot(const llm_backend *b, const llm_seq_view *v, int pos)
{
    int bs = b->opts.block_size, i = pos / bs;
    if (pos < 0 || i >= v->n_blocks || v->blocks[i] < 0 || v->blocks[i] >= b->opts.kv_blocks)
        return -1;
    return (long)v->blocks[i] * bs + pos % bs;
}

static int fake_forward(llm_backend *b, const llm_batch *bt, float *logits, llm_err *err)
{
    fake_impl *f = b->impl;
    int vocab = b->model->cfg.vocab_size, row = 0;
    if (f->fail) {
        f->fail = 0;
        llm_seterr(err, "fake: injected failure");
        return -1;
    }
    if (f->nomem_above != 0 && (f->nomem_above < 0 || bt->n_tokens > f->nomem_above)) {
        f->nomem_hits++;
        llm_seterr(err, "fake: no memory for %d tokens", bt->n_tokens);
        return LLM_BACKEND_NOMEM;
    }
    if (bt->n_tokens > f->max_tokens_seen)
        f->max_tokens_seen = bt->n_tokens;
    for (int t = 0; t < bt->n_tokens; t++) {
        if (bt->seq[t] < 0 || bt->seq[t] >= bt->n_seqs) {
            llm_seterr(err, "fake: bad seq index");
            return -1;
        }
        const llm_seq_view *v = &bt->seqs[bt->seq[t]];
        int pos = bt->pos[t];
        long slot = fake_slot(b, v, pos), prev = pos > 0 ? fake_slot(b, v, pos - 1) : -2;
        if (slot < 0 || prev == -1 || (prev >= 0 && !f->written[prev])) {
            llm_seterr(err, "fake: position %d not covered or previous entry unwritten", pos);
            return -1;
        }
        uint64_t pv = prev >= 0 ? f->kvv[prev] : 0;
        f->kvv[slot] = mix(pv * 31 + (uint64_t)bt->tokens[t] * 0x9e3779b97f4a7c15ull + (uint64_t)pos);
        f->written[slot] = 1;
        if (!bt->want_logits[t])
            continue;
        uint64_t acc = 0;
        for (int p = 0; p <= pos; p++)
            acc = mix(acc ^ f->kvv[fake_slot(b, v, p)]);
        float *lg = logits + (size_t)row++ * vocab;
        for (int i = 0; i < vocab; i++) /* a hidden row (LLM_WANT_HIDDEN) is told apart: 100 above */
            lg[i] = (float)((mix(acc + (uint64_t)i) >> 11) * 0x1.0p-53 * 8.0 - 4.0) +
                    (bt->want_logits[t] == LLM_WANT_HIDDEN ? 100.0f : 0.0f);
    }
    return 0;
}

static const llm_backend_ops fake_ops = { "fake", fake_init, fake_forward, fake_destroy };

typedef struct {
    llm_model   model;
    llm_backend be;
} fake_env;

static void fake_env_init(fake_env *e, int vocab, int seq_len, int kv_blocks, int bs)
{
    memset(e, 0, sizeof(*e));
    e->model.cfg.vocab_size = vocab;
    e->model.cfg.seq_len = seq_len;
    e->be.ops = &fake_ops;
    e->be.model = &e->model;
    e->be.opts.kv_blocks = kv_blocks;
    e->be.opts.block_size = bs;
    llm_err err;
    if (fake_init(&e->be, &err) != 0)
        abort();
}

static void fake_env_free(fake_env *e) { fake_destroy(&e->be); }

/* ------------------------------------------------------------ requests and results */

#define NREQ   64
#define MAXGEN 64

typedef struct {
    int32_t prompt[200];
    int n_prompt, max_tokens, n_stop;
    int32_t stop[2];
    llm_sampling_params sp;
    int priority;
} req_spec;

typedef struct {
    int32_t tok[MAXGEN];
    float   lp[MAXGEN];
    int32_t top0[MAXGEN];
    int n, finish, records_after_end, n_cached, n_preempted;
} result;

static uint64_t rng_state;
static uint32_t rnd(uint32_t n)
{
    rng_state = mix(rng_state + 0x9e3779b97f4a7c15ull);
    return (uint32_t)(rng_state >> 33) % n;
}

/* 64 mixed requests: prompt lengths 1..~90, some sharing a 37-token prefix
 * (prefix cache), greedy and seeded sampling with penalties, some with stop ids. */
static void make_specs(req_spec *r, int n, int vocab, int max_prompt, int max_gen)
{
    int32_t common[37];
    rng_state = 12345;
    for (int i = 0; i < 37; i++)
        common[i] = (int32_t)rnd((uint32_t)vocab);
    for (int i = 0; i < n; i++) {
        req_spec *q = &r[i];
        memset(q, 0, sizeof(*q));
        q->n_prompt = 1 + (int)rnd((uint32_t)max_prompt);
        for (int k = 0; k < q->n_prompt; k++)
            q->prompt[k] = (int32_t)rnd((uint32_t)vocab);
        if (i % 4 == 1 && q->n_prompt > 37)
            memcpy(q->prompt, common, sizeof(common));
        if (i % 8 == 3) { /* identical prompt to the previous shared one */
            q->n_prompt = 45;
            memcpy(q->prompt, common, sizeof(common));
            for (int k = 37; k < 45; k++)
                q->prompt[k] = (int32_t)k;
        }
        q->max_tokens = 1 + (int)rnd((uint32_t)max_gen - 1);
        llm_sampling_defaults(&q->sp);
        if (i % 2 == 0) {
            q->sp.temperature = 0;
        } else {
            q->sp.temperature = 0.9f;
            q->sp.top_k = (i % 3) * 10;
            q->sp.top_p = i % 5 == 0 ? 0.8f : 1.0f;
            q->sp.seed = 1000 + (uint64_t)i;
        }
        if (i % 6 == 0) {
            q->sp.repetition_penalty = 1.3f;
            q->sp.frequency_penalty = 0.5f;
            q->sp.penalty_last_n = 0; /* prompt + output */
        }
        q->sp.n_logprobs = i % 4 == 2 ? 3 : 0;
        if (i % 3 == 0) {
            q->stop[0] = 1;
            q->stop[1] = 2;
            q->n_stop = 2;
        }
    }
}

typedef struct {
    result *res;
    int n_outputs;
} collect;

static void take(result *res, const llm_sched_output *o)
{
    result *r = &res[o->id];
    if (r->finish != 0) {
        r->records_after_end++;
        return;
    }
    if (o->token >= 0 && r->n < MAXGEN) {
        r->tok[r->n] = o->token;
        r->lp[r->n] = o->logprob;
        r->top0[r->n] = o->n_top > 0 ? o->top[0].id : -1;
        r->n++;
    }
    if (o->finish != LLM_SCHED_FINISH_NONE) {
        r->finish = o->finish;
        r->n_cached = o->n_cached;
        r->n_preempted = o->n_preempted;
    }
}

static void drain(llm_sched *s, result *res)
{
    llm_sched_output o;
    while (llm_sched_next_output(s, &o))
        take(res, &o);
}

static int submit_spec(llm_sched *s, const req_spec *q, uint64_t id)
{
    llm_sched_request rq = { 0 };
    rq.id = id;
    rq.prompt = q->prompt;
    rq.n_prompt = q->n_prompt;
    rq.sampling = q->sp;
    rq.max_tokens = q->max_tokens;
    rq.stop_ids = q->stop;
    rq.n_stop = q->n_stop;
    rq.priority = q->priority;
    llm_err err = { { 0 } };
    int rc = llm_sched_submit(s, &rq, &err);
    if (rc != 0)
        diag("submit %llu: %s", (unsigned long long)id, err.msg);
    return rc;
}

/* Run specs through one scheduler; per_step = submissions per step (0 = all at once). */
static int run_all(llm_backend *be, const llm_sched_config *cfg, const req_spec *specs, int n, int per_step,
                   result *res, llm_sched_stats *st)
{
    llm_err err = { { 0 } };
    llm_sched *s = llm_sched_create(be, cfg, &err);
    if (s == NULL) {
        diag("create: %s", err.msg);
        return -1;
    }
    memset(res, 0, (size_t)n * sizeof(*res));
    int next = 0, guard = 0, rc = 1;
    while ((rc == 1 || next < n) && guard++ < 100000) {
        int k = per_step > 0 ? per_step : n;
        for (; k > 0 && next < n; k--, next++)
            if (submit_spec(s, &specs[next], (uint64_t)next) != 0)
                return -1;
        rc = llm_sched_step(s);
        drain(s, res);
        if (rc < 0) {
            diag("step: %s", llm_sched_last_error(s));
            break;
        }
    }
    if (st != NULL)
        llm_sched_get_stats(s, st);
    llm_sched_destroy(s);
    return rc;
}

static void run_alone(llm_backend *be, const llm_sched_config *cfg, const req_spec *specs, int n, result *res)
{
    for (int i = 0; i < n; i++) {
        result one[1];
        req_spec q = specs[i];
        llm_sched_config c = *cfg;
        llm_err err;
        llm_sched *s = llm_sched_create(be, &c, &err);
        memset(one, 0, sizeof(one));
        submit_spec(s, &q, 0);
        while (llm_sched_step(s) == 1)
            drain(s, one);
        drain(s, one);
        llm_sched_destroy(s);
        res[i] = one[0];
    }
}

/* Same tokens, bitwise-same logprobs, same finish. */
static int compare(const result *a, const result *b, int n, const char *what)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int same = a[i].n == b[i].n && a[i].finish == b[i].finish && a[i].finish != 0 &&
                   memcmp(a[i].tok, b[i].tok, (size_t)a[i].n * sizeof(int32_t)) == 0 &&
                   memcmp(a[i].lp, b[i].lp, (size_t)a[i].n * sizeof(float)) == 0 &&
                   memcmp(a[i].top0, b[i].top0, (size_t)a[i].n * sizeof(int32_t)) == 0 &&
                   a[i].records_after_end == 0 && b[i].records_after_end == 0;
        if (!same && bad++ < 3) {
            diag("%s: request %d differs: n %d/%d finish %d/%d", what, i, a[i].n, b[i].n, a[i].finish, b[i].finish);
            for (int k = 0; k < a[i].n && k < b[i].n; k++)
                if (a[i].tok[k] != b[i].tok[k] || a[i].lp[k] != b[i].lp[k]) {
                    diag("  first difference at token %d: %d (%.9g) vs %d (%.9g)", k, a[i].tok[k], a[i].lp[k],
                         b[i].tok[k], b[i].lp[k]);
                    break;
                }
        }
    }
    return bad;
}

static int all_finished_ok(const result *r, int n)
{
    for (int i = 0; i < n; i++)
        if (r[i].finish != LLM_SCHED_FINISH_STOP && r[i].finish != LLM_SCHED_FINISH_LENGTH)
            return 0;
    return 1;
}

/* ------------------------------------------------------------ fake-backend scenarios */

static void test_batching_independence(void)
{
    const int vocab = 64;
    static req_spec specs[NREQ];
    static result alone[NREQ], got[NREQ];
    make_specs(specs, NREQ, vocab, 90, MAXGEN);
    fake_env e;
    fake_env_init(&e, vocab, 256, 2048, 16);
    llm_sched_config cfg = { 0 };
    run_alone(&e.be, &cfg, specs, NREQ, alone);
    ok(all_finished_ok(alone, NREQ), "alone: every request finished with STOP or LENGTH");
    int stops = 0, lens = 0;
    for (int i = 0; i < NREQ; i++) {
        stops += alone[i].finish == LLM_SCHED_FINISH_STOP;
        lens += alone[i].n;
    }
    diag("alone: %d stopped on a stop id, %d tokens generated in all", stops, lens);
    ok(stops > 0, "some requests end on a stop id");

    llm_sched_stats st;
    is_int(run_all(&e.be, &cfg, specs, NREQ, 0, got, &st), 0, "64 at once: ran to idle");
    is_int(compare(got, alone, NREQ, "64 at once"), 0, "64 concurrent requests = each run alone");
    diag("64 at once: %llu steps, largest step %d tokens", (unsigned long long)st.steps, st.max_step_tokens);
    is_int(st.finished[LLM_SCHED_FINISH_STOP] + st.finished[LLM_SCHED_FINISH_LENGTH], NREQ, "64 finished");
    is_int(st.kv.used, 0, "no block held after all finished");
    ok(st.tokens_out == (uint64_t)lens, "tokens_out %llu = %d", (unsigned long long)st.tokens_out, lens);

    /* staggered arrivals: requests join a running batch; later ones hit the prefix cache */
    is_int(run_all(&e.be, &cfg, specs, NREQ, 3, got, &st), 0, "staggered: ran to idle");
    is_int(compare(got, alone, NREQ, "staggered"), 0, "staggered arrivals = alone");
    ok(st.cached_tokens > 0 && st.kv.hits > 0, "prefix cache hits: %llu tokens, %llu blocks",
       (unsigned long long)st.cached_tokens, (unsigned long long)st.kv.hits);
    int cached_reqs = 0;
    for (int i = 0; i < NREQ; i++)
        cached_reqs += got[i].n_cached > 0;
    ok(cached_reqs >= 4, "%d requests started from cached prefix blocks", cached_reqs);

    /* chunked prefill under a small token budget and batch limit */
    llm_sched_config small = { 0 };
    small.max_batched_tokens = 7;
    small.max_batch_size = 5;
    e.be.impl = e.be.impl; /* same backend */
    ((fake_impl *)e.be.impl)->max_tokens_seen = 0;
    is_int(run_all(&e.be, &small, specs, NREQ, 0, got, &st), 0, "budget 7: ran to idle");
    is_int(compare(got, alone, NREQ, "budget 7"), 0, "chunked prefill (7 tokens/step, 5 seqs) = alone");
    ok(st.max_step_tokens <= 7 && ((fake_impl *)e.be.impl)->max_tokens_seen <= 7, "no step over 7 tokens (%d)",
       st.max_step_tokens);
    ok(st.tokens_in >= st.prompt_tokens - st.cached_tokens, "every prompt token computed or cached");

    /* budget smaller than the running batch: decodes take turns */
    small.max_batched_tokens = 3;
    small.max_batch_size = 8;
    is_int(run_all(&e.be, &small, specs, 16, 0, got, &st), 0, "budget 3, batch 8: ran to idle");
    is_int(compare(got, alone, 16, "budget 3"), 0, "budget below batch size = alone");
    fake_env_free(&e);

    /* preemption by recompute in a tiny pool: 24 blocks of 8 tokens (192 = the longest request's need) */
    fake_env t;
    fake_env_init(&t, vocab, 256, 24, 8);
    static result alone_t[NREQ];
    run_alone(&t.be, &cfg, specs, NREQ, alone_t);
    is_int(compare(alone_t, alone, NREQ, "pool 24x8 alone"), 0, "small pool alone = big pool alone");
    llm_sched_config pc = { 0 };
    pc.max_batched_tokens = 64;
    is_int(run_all(&t.be, &pc, specs, NREQ, 0, got, &st), 0, "tiny pool: ran to idle");
    is_int(compare(got, alone_t, NREQ, "tiny pool"), 0, "with preemption = alone");
    ok(st.preemptions > 0, "%llu preemptions", (unsigned long long)st.preemptions);
    int pre = 0;
    for (int i = 0; i < NREQ; i++)
        pre += got[i].n_preempted > 0;
    diag("tiny pool: %d requests preempted, %llu steps, %llu evictions", pre, (unsigned long long)st.steps,
         (unsigned long long)st.kv.evictions);
    is_int(st.kv.used, 0, "tiny pool: no block held at the end");
    is_int(run_all(&t.be, &pc, specs, NREQ, 2, got, &st), 0, "tiny pool staggered: ran to idle");
    is_int(compare(got, alone_t, NREQ, "tiny pool staggered"), 0, "tiny pool, staggered = alone");
    fake_env_free(&t);
}

/* A conversation's next turn: its prompt is the last one's with the answer and a new question after it. The
 * answer's KV, computed as it was generated, is in the prefix cache too: all but the last answer token's (never
 * fed back), so 5 whole blocks of 18 + 4. */
static void test_prefix_generated(void)
{
    fake_env e;
    fake_env_init(&e, 64, 256, 64, 4);
    llm_err err;
    llm_sched *s = llm_sched_create(&e.be, NULL, &err);
    static req_spec q[2];
    memset(q, 0, sizeof(q));
    for (int i = 0; i < 2; i++) {
        llm_sampling_defaults(&q[i].sp);
        q[i].sp.temperature = 0;
        q[i].max_tokens = 5;
    }
    q[0].n_prompt = 18;
    for (int k = 0; k < 18; k++)
        q[0].prompt[k] = (int32_t)(k * 5 % 64);
    result res[2], alone[2];
    memset(res, 0, sizeof(res));
    submit_spec(s, &q[0], 0);
    llm_sched_stats st0, st;
    llm_sched_get_stats(s, &st0);
    is_int((int)st0.prefill_pending, 18, "submitted: 18 prompt tokens pending");
    llm_sched_step(s);
    llm_sched_get_stats(s, &st0);
    is_int((int)st0.prefill_pending, 0, "after its prefill: none");
    while (llm_sched_step(s) == 1)
        drain(s, res);
    drain(s, res);
    is_int(res[0].n, 5, "first turn: 5 tokens");
    memcpy(q[1].prompt, q[0].prompt, sizeof(int32_t) * 18);
    memcpy(q[1].prompt + 18, res[0].tok, sizeof(int32_t) * 5);
    q[1].prompt[23] = 9;
    q[1].prompt[24] = 11;
    q[1].n_prompt = 25;
    llm_sched_get_stats(s, &st0);
    submit_spec(s, &q[1], 1);
    while (llm_sched_step(s) == 1)
        drain(s, res);
    drain(s, res);
    llm_sched_get_stats(s, &st);
    is_int((int)(st.cached_tokens - st0.cached_tokens), 20, "next turn: 20 tokens cached (the prompt and 2 of the "
           "answer's tokens in whole blocks)");
    is_int(res[1].n_cached, 20, "... reported with its output");
    run_alone(&e.be, &(llm_sched_config){ 0 }, q, 2, alone);
    is_int(compare(res, alone, 2, "next turn"), 0, "its tokens = alone (no cache)");
    llm_sched_destroy(s);
    /* in chunks of 7: what is pending goes down a chunk a step (what replicas are weighed by) */
    s = llm_sched_create(&e.be, &(llm_sched_config){ .max_batched_tokens = 7 }, &err);
    q[0].prompt[0] = 63; /* (not from the cache) */
    submit_spec(s, &q[0], 0);
    int left[4];
    for (int k = 0; k < 4; k++) {
        llm_sched_get_stats(s, &st);
        left[k] = (int)st.prefill_pending;
        llm_sched_step(s);
    }
    ok(left[0] == 18 && left[1] == 11 && left[2] == 4 && left[3] == 0, "chunks of 7: %d, %d, %d, %d tokens pending",
       left[0], left[1], left[2], left[3]);
    llm_sched_destroy(s);
    fake_env_free(&e);
}

static void test_prefix_sharing(void)
{
    fake_env e;
    fake_env_init(&e, 64, 256, 64, 4);
    llm_err err;
    llm_sched *s = llm_sched_create(&e.be, NULL, &err);
    static req_spec q[3];
    result res[3], alone[3];
    memset(q, 0, sizeof(q));
    for (int i = 0; i < 3; i++) {
        llm_sampling_defaults(&q[i].sp);
        q[i].sp.temperature = 0;
        q[i].max_tokens = 5;
        q[i].n_prompt = i == 2 ? 16 : 18; /* request 2's prompt is exactly 4 full blocks */
        for (int k = 0; k < q[i].n_prompt; k++)
            q[i].prompt[k] = (int32_t)(k * 7 % 64);
    }
    q[1].prompt[17] = 60;
    run_alone(&e.be, &(llm_sched_config){ 0 }, q, 3, alone);
    memset(res, 0, sizeof(res));
    submit_spec(s, &q[0], 0);
    llm_sched_step(s); /* prefill of 0 registers its 4 full blocks */
    submit_spec(s, &q[1], 1);
    submit_spec(s, &q[2], 2);
    llm_sched_step(s);
    llm_sched_stats st;
    llm_sched_get_stats(s, &st);
    is_int(st.cached_tokens, 16 + 12, "request 1 reuses 16 tokens, request 2 12 (its last block is recomputed)");
    ok(st.kv.used < 5 + 5 + 4, "shared blocks counted once (%d used)", st.kv.used);
    while (llm_sched_step(s) == 1)
        drain(s, res);
    drain(s, res);
    is_int(compare(res, alone, 3, "prefix"), 0, "shared-prefix results = alone");
    llm_sched_get_stats(s, &st);
    ok(st.kv.used == 0 && st.kv.cached >= 4, "all released; %d blocks stay cached", st.kv.cached);
    llm_sched_destroy(s);
    fake_env_free(&e);
}

static void test_cancel(void)
{
    fake_env e;
    fake_env_init(&e, 64, 256, 64, 4);
    llm_sched_config cfg = { 0 };
    cfg.max_batch_size = 2;
    llm_err err;
    llm_sched *s = llm_sched_create(&e.be, &cfg, &err);
    req_spec q;
    memset(&q, 0, sizeof(q));
    llm_sampling_defaults(&q.sp);
    q.sp.temperature = 0;
    q.n_prompt = 10;
    for (int k = 0; k < 10; k++)
        q.prompt[k] = 5 + k;
    q.max_tokens = 50;
    result res[3];
    memset(res, 0, sizeof(res));
    for (int i = 0; i < 3; i++) {
        q.prompt[0] = 20 + i; /* distinct prompts: no sharing */
        submit_spec(s, &q, (uint64_t)i);
    }
    for (int i = 0; i < 3; i++)
        llm_sched_step(s);
    drain(s, res);
    llm_sched_stats st;
    llm_sched_get_stats(s, &st);
    ok(st.running == 2 && st.waiting == 1, "2 running, 1 waiting");
    int used_before = st.kv.used;
    is_int(llm_sched_cancel(s, 0), 0, "cancel running request 0");
    is_int(llm_sched_cancel(s, 2), 0, "cancel waiting request 2");
    is_int(llm_sched_cancel(s, 77), -1, "unknown id: -1");
    llm_sched_step(s);
    drain(s, res);
    is_int(res[0].finish, LLM_SCHED_FINISH_CANCELLED, "request 0 CANCELLED");
    is_int(res[2].finish, LLM_SCHED_FINISH_CANCELLED, "request 2 CANCELLED");
    is_int(res[2].n, 0, "request 2 produced nothing");
    llm_sched_get_stats(s, &st);
    ok(st.kv.used < used_before, "blocks freed (%d -> %d)", used_before, st.kv.used);
    is_int(st.running, 1, "one left running");
    llm_sched_cancel(s, 1);
    is_int(llm_sched_step(s), 0, "idle after the last cancel");
    drain(s, res);
    llm_sched_get_stats(s, &st);
    is_int(st.kv.used, 0, "no block held");
    is_int(st.finished[LLM_SCHED_FINISH_CANCELLED], 3, "3 cancelled");
    ok(res[0].records_after_end == 0 && res[1].records_after_end == 0, "nothing after the end");
    llm_sched_destroy(s);
    fake_env_free(&e);
}

static int order[8], n_order;
static void on_out(void *ctx, const llm_sched_output *o)
{
    (void)ctx;
    if (o->finish != LLM_SCHED_FINISH_NONE && n_order < 8)
        order[n_order++] = (int)o->id;
}

static void test_priority_and_callback(void)
{
    fake_env e;
    fake_env_init(&e, 64, 256, 64, 4);
    llm_sched_config cfg = { 0 };
    cfg.max_batch_size = 1;
    cfg.on_output = on_out;
    llm_err err;
    llm_sched *s = llm_sched_create(&e.be, &cfg, &err);
    req_spec q;
    memset(&q, 0, sizeof(q));
    llm_sampling_defaults(&q.sp);
    q.sp.temperature = 0;
    q.n_prompt = 3;
    q.max_tokens = 2;
    q.priority = 0;
    submit_spec(s, &q, 1);
    submit_spec(s, &q, 2);
    q.priority = 5;
    submit_spec(s, &q, 3);
    while (llm_sched_step(s) == 1)
        ;
    ok(n_order == 3 && order[0] == 3 && order[1] == 1 && order[2] == 2, "priority first, then FIFO (%d %d %d)",
       order[0], order[1], order[2]);
    llm_sched_output o;
    is_int(llm_sched_next_output(s, &o), 0, "callback mode: queue stays empty");
    llm_sched_destroy(s);
    fake_env_free(&e);
}

static uint64_t fake_now;
static uint64_t now_fn(void *ctx) { (void)ctx; return fake_now; }

static void test_hold(void)
{
    fake_env e;
    fake_env_init(&e, 64, 256, 64, 4);
    llm_sched_config cfg = { 0 };
    cfg.max_batch_size = 8;
    cfg.preferred_batch_sizes[0] = 4;
    cfg.preferred_batch_sizes[1] = 8;
    cfg.n_preferred = 2;
    cfg.batch_timeout_ms = 10;
    cfg.now_ns = now_fn;
    fake_now = 1000000000ull;
    llm_err err;
    llm_sched *s = llm_sched_create(&e.be, &cfg, &err);
    req_spec q;
    memset(&q, 0, sizeof(q));
    llm_sampling_defaults(&q.sp);
    q.sp.temperature = 0;
    q.n_prompt = 3;
    q.max_tokens = 2;
    llm_sched_stats st;
    is_int(llm_sched_wait_ms(s), -1, "empty: nothing to wait for");
    submit_spec(s, &q, 0);
    submit_spec(s, &q, 1);
    is_int(llm_sched_step(s), 1, "2 waiting, held for a batch of 4");
    llm_sched_get_stats(s, &st);
    ok(st.steps == 0 && st.waiting == 2, "no step ran");
    is_int(llm_sched_wait_ms(s), 10, "wait 10 ms");
    fake_now += 4000000;
    is_int(llm_sched_wait_ms(s), 6, "6 ms left");
    submit_spec(s, &q, 2);
    submit_spec(s, &q, 3);
    llm_sched_step(s);
    llm_sched_get_stats(s, &st);
    is_int(st.last_batch_seqs, 4, "reaching preferred size 4 admits at once");
    while (llm_sched_step(s) == 1)
        ;
    submit_spec(s, &q, 4);
    llm_sched_step(s);
    llm_sched_get_stats(s, &st);
    is_int(st.waiting, 1, "a lone request is held");
    fake_now += 10000000;
    is_int(llm_sched_wait_ms(s), 0, "timeout passed: step now");
    llm_sched_step(s);
    llm_sched_get_stats(s, &st);
    ok(st.waiting == 0 && st.last_batch_seqs == 1, "admitted after the timeout");
    while (llm_sched_step(s) == 1)
        ;
    for (int i = 0; i < 9; i++)
        submit_spec(s, &q, (uint64_t)(10 + i));
    llm_sched_step(s);
    llm_sched_get_stats(s, &st);
    ok(st.running == 8 && st.waiting == 1, "9 waiting: max_batch_size 8 admitted without waiting");
    llm_sched_destroy(s);
    fake_env_free(&e);
}

static int blocked_id = -1;
static int can_emit_fn(void *ctx, uint64_t id, void *user)
{
    (void)ctx;
    (void)user;
    return blocked_id != -2 && (int)id != blocked_id;
}

static void test_backpressure_and_errors(void)
{
    fake_env e;
    fake_env_init(&e, 64, 40, 64, 4);
    static req_spec q[4];
    result res[4], alone[4];
    memset(q, 0, sizeof(q));
    for (int i = 0; i < 4; i++) {
        llm_sampling_defaults(&q[i].sp);
        q[i].sp.temperature = 0.7f;
        q[i].sp.seed = (uint64_t)i;
        q[i].n_prompt = 5 + i;
        for (int k = 0; k < q[i].n_prompt; k++)
            q[i].prompt[k] = (int32_t)(3 + k + i);
        q[i].max_tokens = 12;
    }
    llm_sched_config cfg = { 0 };
    run_alone(&e.be, &cfg, q, 4, alone);
    cfg.can_emit = can_emit_fn;
    llm_err err;
    llm_sched *s = llm_sched_create(&e.be, &cfg, &err);
    memset(res, 0, sizeof(res));
    for (int i = 0; i < 4; i++)
        submit_spec(s, &q[i], (uint64_t)i);
    blocked_id = 2;
    for (int i = 0; i < 5; i++)
        llm_sched_step(s);
    drain(s, res);
    is_int(res[2].n, 0, "blocked request emitted nothing");
    ok(res[0].n == 5 && res[1].n == 5, "others went on");
    blocked_id = -2; /* every stream full */
    is_int(llm_sched_step(s), 1, "all blocked: work remains");
    is_int(llm_sched_wait_ms(s), -1, "all blocked: nothing to step (-1)");
    blocked_id = -1;
    while (llm_sched_step(s) == 1)
        drain(s, res);
    drain(s, res);
    is_int(compare(res, alone, 4, "back-pressure"), 0, "back-pressure does not change results");
    llm_sched_destroy(s);

    /* context limit: model context 40 */
    s = llm_sched_create(&e.be, NULL, &err);
    is_int(llm_sched_context_limit(s), 40, "context limit = model's 40");
    req_spec big = q[0];
    big.n_prompt = 37;
    for (int k = 0; k < 37; k++)
        big.prompt[k] = k;
    memset(res, 0, sizeof(res));
    submit_spec(s, &big, 0);
    while (llm_sched_step(s) == 1)
        ;
    drain(s, res);
    ok(res[0].n == 3 && res[0].finish == LLM_SCHED_FINISH_LENGTH, "context full after 3 tokens: LENGTH (%d)",
       res[0].n);

    /* invalid submissions */
    llm_sched_request rq = { 0 };
    int32_t toks[50] = { 0 };
    rq.prompt = toks;
    rq.n_prompt = 2;
    rq.max_tokens = 1;
    llm_sampling_defaults(&rq.sampling);
    rq.id = 9;
    is_int(llm_sched_submit(s, &rq, &err), 0, "valid request accepted");
    is_int(llm_sched_submit(s, &rq, &err), -1, "duplicate id refused");
    ok(strstr(err.msg, "already live") != NULL, "message: %s", err.msg);
    rq.id = 10;
    rq.n_prompt = 0;
    is_int(llm_sched_submit(s, &rq, &err), -1, "empty prompt refused");
    rq.n_prompt = 41;
    is_int(llm_sched_submit(s, &rq, &err), -1, "prompt over the context refused");
    ok(strstr(err.msg, "leaves no room") != NULL, "message: %s", err.msg);
    rq.n_prompt = 40; /* exactly the context: no room for a generated token */
    is_int(llm_sched_submit(s, &rq, &err), -1, "prompt filling the whole context refused");
    rq.n_prompt = 2;
    toks[1] = 64;
    is_int(llm_sched_submit(s, &rq, &err), -1, "token outside the vocabulary refused");
    toks[1] = 0;
    rq.max_tokens = 0;
    is_int(llm_sched_submit(s, &rq, &err), -1, "max_tokens 0 refused");
    rq.max_tokens = 1;
    rq.sampling.temperature = -1;
    is_int(llm_sched_submit(s, &rq, &err), -1, "bad sampling refused");
    rq.sampling.temperature = 0;
    rq.n_stop = LLM_SCHED_MAX_STOP + 1;
    rq.stop_ids = toks;
    is_int(llm_sched_submit(s, &rq, &err), -1, "too many stop ids refused");
    rq.n_stop = 0;
    llm_logit_bias lb[2] = { { 3, -100.0f }, { 64, 1.0f } };
    rq.bias = lb;
    rq.n_bias = 2;
    is_int(llm_sched_submit(s, &rq, &err), -1, "logit bias for a token outside the vocabulary refused");
    ok(strstr(err.msg, "logit bias") != NULL, "message: %s", err.msg);
    lb[1] = (llm_logit_bias){ 4, -100.5f };
    is_int(llm_sched_submit(s, &rq, &err), -1, "logit bias below -100 refused");
    rq.n_bias = -1;
    is_int(llm_sched_submit(s, &rq, &err), -1, "negative logit bias count refused");
    rq.n_bias = 1;
    rq.bias = NULL;
    is_int(llm_sched_submit(s, &rq, &err), -1, "logit bias count without entries refused");
    rq.n_bias = 0;

    /* backend failure: the batch's requests end with ERROR, blocks freed */
    ((fake_impl *)e.be.impl)->fail = 1;
    memset(res, 0, sizeof(res));
    is_int(llm_sched_step(s), -1, "step reports the backend failure");
    ok(strstr(llm_sched_last_error(s), "injected") != NULL, "message: %s", llm_sched_last_error(s));
    llm_sched_output o;
    ok(llm_sched_next_output(s, &o) && o.id == 9 && o.finish == LLM_SCHED_FINISH_ERROR &&
       o.error == LLM_SCHED_E_BACKEND && o.token == -1, "ERROR record");
    llm_sched_stats st;
    llm_sched_get_stats(s, &st);
    ok(st.kv.used == 0 && st.running == 0, "nothing held after the failure");
    llm_sched_destroy(s);

    cfg = (llm_sched_config){ 0 };
    cfg.max_batch_size = -1;
    ok(llm_sched_create(&e.be, &cfg, &err) == NULL, "bad config refused: %s", err.msg);
    cfg.max_batch_size = 0;
    cfg.max_waiting = 1;
    s = llm_sched_create(&e.be, &cfg, &err);
    rq.id = 1;
    is_int(llm_sched_submit(s, &rq, &err), 0, "first fits the queue");
    rq.id = 2;
    is_int(llm_sched_submit(s, &rq, &err), -1, "queue full refused");
    llm_sched_destroy(s); /* with a live request: freed without outputs */
    fake_env_free(&e);
}

/* ------------------------------------------------------------ out of memory */

/* The backend runs out of memory above 40 tokens a step: the scheduler shrinks
 * its steps instead of failing requests, results stay those of each request
 * run alone, and the cap is lifted once memory is back and load has fallen. */
static void test_oom_self_heal(void)
{
    const int vocab = 64;
    static req_spec specs[NREQ];
    static result alone[NREQ], got[NREQ];
    make_specs(specs, NREQ, vocab, 90, MAXGEN);
    fake_env e;
    fake_env_init(&e, vocab, 256, 2048, 16);
    fake_impl *f = e.be.impl;
    llm_sched_config cfg = { 0 };
    run_alone(&e.be, &cfg, specs, NREQ, alone);

    cfg.oom_recover_ms = 50;
    cfg.now_ns = now_fn;
    fake_now = 1000000000ull;
    llm_err err;
    llm_sched *s = llm_sched_create(&e.be, &cfg, &err);
    memset(got, 0, sizeof(got));
    for (int i = 0; i < NREQ; i++)
        submit_spec(s, &specs[i], (uint64_t)i);
    f->nomem_above = 40;
    f->max_tokens_seen = 0;
    int rc, guard = 0, failed_steps = 0, max_cap = 0;
    llm_sched_stats st;
    while ((rc = llm_sched_step(s)) != 0 && guard++ < 100000) {
        failed_steps += rc < 0;
        drain(s, got);
        llm_sched_get_stats(s, &st);
        if (st.mem_cap_tokens > max_cap)
            max_cap = st.mem_cap_tokens;
        fake_now += 1000000; /* 1 ms a step */
    }
    drain(s, got);
    llm_sched_get_stats(s, &st);
    is_int(failed_steps, 0, "no step failed");
    is_int(compare(got, alone, NREQ, "out of memory"), 0, "64 requests through out-of-memory steps = alone");
    ok(st.oom_shrinks >= 1 && f->nomem_hits == (int)st.oom_shrinks, "%llu shrinks (backend refused %d steps)",
       (unsigned long long)st.oom_shrinks, f->nomem_hits);
    ok(f->max_tokens_seen <= 40, "no computed step over 40 tokens (%d)", f->max_tokens_seen);
    ok(max_cap > 0 && max_cap <= 256, "a cap was in force (at most %d tokens)", max_cap);
    is_int((int)st.finished[LLM_SCHED_FINISH_ERROR], 0, "no request failed");
    is_int(st.kv.used, 0, "no block held");
    diag("oom: %llu shrinks, %llu recoveries, %llu preemptions, %llu steps", (unsigned long long)st.oom_shrinks,
         (unsigned long long)st.oom_recoveries, (unsigned long long)st.preemptions, (unsigned long long)st.steps);

    /* memory is back and nothing runs: the cap doubles every hold until lifted */
    f->nomem_above = 0;
    uint64_t rec0 = st.oom_recoveries;
    for (int i = 0; i < 100 && st.mem_cap_tokens != 0; i++) {
        fake_now += 4000000000ull; /* 4 s: past any hold (at most 64 x 50 ms) */
        llm_sched_step(s);
        llm_sched_get_stats(s, &st);
    }
    ok(st.mem_cap_tokens == 0 && st.mem_cap_batch == 0, "cap lifted once load fell");
    is_int((int)(st.oom_recoveries - rec0), 1, "the lift is counted as one recovery");
    /* full size again: a 90-token prompt goes in one step */
    f->max_tokens_seen = 0;
    submit_spec(s, &specs[0], 0);
    memset(got, 0, sizeof(got));
    while (llm_sched_step(s) == 1)
        drain(s, got);
    drain(s, got);
    ok(f->max_tokens_seen == specs[0].n_prompt, "after recovery a %d-token prefill is one step (%d)",
       specs[0].n_prompt, f->max_tokens_seen);
    is_int(compare(got, alone, 1, "after recovery"), 0, "same result after recovery");

    /* no memory even for one token: that request fails (NOMEM), the scheduler goes on */
    f->nomem_above = -1;
    submit_spec(s, &specs[1], 1);
    int steps = 0;
    while ((rc = llm_sched_step(s)) == 1 && steps < 50)
        steps++;
    is_int(rc, -1, "a one-token step out of memory fails");
    llm_sched_output o;
    ok(llm_sched_next_output(s, &o) && o.id == 1 && o.finish == LLM_SCHED_FINISH_ERROR &&
       o.error == LLM_SCHED_E_NOMEM, "its request ends with ERROR / NOMEM");
    llm_sched_get_stats(s, &st);
    ok(st.kv.used == 0 && st.running == 0 && st.waiting == 0, "nothing held");
    ok(strstr(llm_sched_last_error(s), "no memory for 1 tokens") != NULL, "message: %s", llm_sched_last_error(s));
    f->nomem_above = 0;
    llm_sched_destroy(s);

    cfg.oom_recover_ms = -1;
    ok(llm_sched_create(&e.be, &cfg, &err) == NULL, "negative oom_recover_ms refused: %s", err.msg);
    fake_env_free(&e);
}

/* ------------------------------------------------------------ real model */

static void test_mask_pool(llm_backend *be, const llm_model *m);

static void test_real_model(void)
{
    const char *path = "../shared/models/stories260K/stories260K.gguf";
    if (access(path, R_OK) != 0) {
        ok(1, "# SKIP %s not found", path);
        return;
    }
    llm_err err = { { 0 } };
    llm_model *m = llm_model_load(path, NULL, &err);
    ok(m != NULL, "stories260K loaded %s", m == NULL ? err.msg : "");
    if (m == NULL)
        return;
    llm_backend_opts bo = { 0 };
    bo.threads = 1; /* a 260K model: threads cost more than they give (sanitizer runs) */
    bo.block_size = 16;
    bo.kv_blocks = 1024;
    llm_backend *be = llm_backend_create("cpu", m, &bo, &err);
    ok(be != NULL, "cpu backend %s", be == NULL ? err.msg : "");
    if (be == NULL) {
        llm_model_free(m);
        return;
    }
    static req_spec specs[NREQ];
    static result alone[NREQ], got[NREQ];
    make_specs(specs, NREQ, m->cfg.vocab_size, 60, 24);
    for (int i = 0; i < NREQ; i++)
        specs[i].prompt[0] = 1; /* BOS */
    llm_sched_config cfg = { 0 };
    run_alone(be, &cfg, specs, NREQ, alone);
    ok(all_finished_ok(alone, NREQ), "stories260K alone: all finished");

    /* the known-good greedy continuation through the scheduler */
    req_spec once = specs[0];
    int32_t known[5] = { 1, 403, 407, 261, 378 }, want[10] = { 432, 383, 286, 261, 376, 298, 315, 421, 395, 317 };
    memcpy(once.prompt, known, sizeof(known));
    once.n_prompt = 5;
    once.max_tokens = 10;
    once.n_stop = 0;
    llm_sampling_defaults(&once.sp);
    once.sp.temperature = 0;
    result r1[1];
    run_alone(be, &cfg, &once, 1, r1);
    ok(r1[0].n == 10 && memcmp(r1[0].tok, want, sizeof(want)) == 0, "greedy 'Once upon a time' ids as known-good");

    llm_sched_stats st;
    is_int(run_all(be, &cfg, specs, NREQ, 0, got, &st), 0, "stories260K, 64 at once: ran to idle");
    is_int(compare(got, alone, NREQ, "stories260K 64 at once"), 0, "64 concurrent = alone (greedy and seeded)");
    diag("64 at once: %llu steps, %.1f ms in steps, %llu tokens out", (unsigned long long)st.steps,
         st.total_step_ms, (unsigned long long)st.tokens_out);
    llm_sched_config small = { 0 };
    small.max_batched_tokens = 24;
    small.max_batch_size = 24;
    is_int(run_all(be, &small, specs, NREQ, 4, got, &st), 0, "stories260K staggered, budget 24: ran to idle");
    is_int(compare(got, alone, NREQ, "stories260K staggered"), 0, "staggered + chunked prefill + prefix cache = alone");
    diag("staggered: %llu cached prompt tokens, %llu steps", (unsigned long long)st.cached_tokens,
         (unsigned long long)st.steps);
    test_mask_pool(be, m);

    /* n-gram speculation: 8 requests of 60 tokens (greedy ones speculate: stories260K repeats itself, so drafts
     * are confirmed), the same tokens and logprobs as each alone without it; seeded ones beside them too */
    static req_spec sp8[8];
    static result alone8[8], got8[8];
    memcpy(sp8, specs, sizeof(sp8));
    for (int i = 0; i < 8; i++) {
        sp8[i].max_tokens = MAXGEN - 4;
        sp8[i].n_stop = 0;
        if (i % 4 != 3) {
            llm_sampling_defaults(&sp8[i].sp);
            sp8[i].sp.temperature = 0;
        }
    }
    run_alone(be, &cfg, sp8, 8, alone8);
    llm_sched_config spec = { 0 };
    spec.max_batch_size = 8;
    spec.max_batched_tokens = 64;
    spec.spec_tokens = 4;
    is_int(run_all(be, &spec, sp8, 8, 2, got8, &st), 0, "speculation: 8 requests, 2 arriving a step: ran to idle");
    is_int(compare(got8, alone8, 8, "speculation"), 0, "with n-gram speculation = alone without it");
    ok(st.spec_accepted > 0 && st.spec_accepted <= st.spec_drafted && st.steps < st.tokens_out,
       "%llu of %llu drafted tokens confirmed: %llu tokens out in %llu steps", (unsigned long long)st.spec_accepted,
       (unsigned long long)st.spec_drafted, (unsigned long long)st.tokens_out, (unsigned long long)st.steps);
    static req_spec greedy6[6];
    for (int i = 0, k = 0; i < 8; i++)
        if (i % 4 != 3)
            greedy6[k++] = sp8[i];
    llm_sched_stats st0;
    run_all(be, &spec, greedy6, 6, 0, got8, &st);
    spec.spec_tokens = 0;
    run_all(be, &spec, greedy6, 6, 0, got8, &st0);
    ok(st.steps < st0.steps, "6 greedy requests: fewer steps than without (%llu against %llu)",
       (unsigned long long)st.steps, (unsigned long long)st0.steps);
    /* sampled requests speculate too: each draft stands when the request's own draw at its position (the same
     * PRNG state and penalties as without drafts) is the draft; low temperatures, penalties, top-p, logprobs */
    static req_spec samp8[8];
    for (int i = 0; i < 8; i++) {
        samp8[i] = sp8[i];
        llm_sampling_defaults(&samp8[i].sp);
        samp8[i].sp.temperature = 0.2f + 0.1f * (float)(i % 4);
        samp8[i].sp.seed = 77 + (uint64_t)i;
        samp8[i].sp.top_p = i % 3 == 0 ? 0.9f : 1.0f;
        samp8[i].sp.top_k = i % 3 == 1 ? 20 : 0;
        samp8[i].sp.presence_penalty = i % 4 == 2 ? 0.3f : 0.0f;
        samp8[i].sp.repetition_penalty = i % 4 == 3 ? 1.1f : 1.0f;
        samp8[i].sp.n_logprobs = i % 2 ? 2 : 0;
    }
    run_alone(be, &cfg, samp8, 8, alone8);
    spec.spec_tokens = 4;
    is_int(run_all(be, &spec, samp8, 8, 2, got8, &st), 0, "speculation, 8 sampled requests: ran to idle");
    is_int(compare(got8, alone8, 8, "sampled speculation"), 0, "sampled, with n-gram speculation = alone without it");
    ok(st.spec_accepted > 0 && st.spec_accepted <= st.spec_drafted, "sampled: %llu of %llu drafted tokens confirmed",
       (unsigned long long)st.spec_accepted, (unsigned long long)st.spec_drafted);
    llm_backend_free(be);

    /* tiny pool: preemption by recompute on the real model */
    bo.kv_blocks = 8; /* 128 tokens: the longest request (60 + 24) fits alone */
    be = llm_backend_create("cpu", m, &bo, &err);
    if (be != NULL) {
        /* the pool still holds the longest request (context limit unchanged), so alone runs are the same */
        is_int(run_all(be, &small, specs, 24, 0, got, &st), 0, "stories260K tiny pool, 24 requests: ran to idle");
        is_int(compare(got, alone, 24, "stories260K tiny pool"), 0, "with preemption = alone");
        ok(st.preemptions > 0, "%llu preemptions", (unsigned long long)st.preemptions);
        llm_sched_config spec = small;
        spec.max_batch_size = 8;
        spec.spec_tokens = 8;
        is_int(run_all(be, &spec, specs, 8, 0, got, &st), 0, "tiny pool with speculation: ran to idle");
        is_int(compare(got, alone, 8, "tiny pool, speculation"), 0, "with speculation and preemption = alone");
        llm_backend_free(be);
    }
    llm_model_free(m);
}

/* Constrained requests (JSON mode and JSON Schemas: a pattern, bounds, an enum) sampled with seeds on the
 * real model, 16 at once: the masks made by the mask pool during the forward (2 threads) and those made on
 * the scheduler thread after it must give the same tokens, and each output must be the schema's. */
#define CON_N 16
typedef struct {
    int32_t tok[80];
    int     n, finish;
} con_result;

static void con_run(llm_backend *be, const llm_json_vocab *v, int mask_threads, con_result *out, uint64_t *pooled)
{
    static const char *const schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":3,\"maximum\":250},"
        "\"c\":{\"type\":\"string\",\"pattern\":\"^[a-z]{2}[0-9]$\"},\"e\":{\"enum\":[\"yes\",\"no\"]}},"
        "\"required\":[\"n\",\"c\",\"e\"]}",
        "{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":3}",
        NULL, /* JSON mode */
    };
    llm_sched_config cfg = { 0 };
    cfg.json_vocab = v;
    cfg.mask_threads = mask_threads;
    cfg.max_batch_size = CON_N;
    llm_err err = { { 0 } };
    llm_sched *s = llm_sched_create(be, &cfg, &err);
    memset(out, 0, CON_N * sizeof(*out));
    if (s == NULL) {
        diag("scheduler: %s", err.msg);
        return;
    }
    int32_t prompt[4] = { 1, 403, 407, 261 };
    /* this story model would rather write whitespace: banned, so values end within the budget */
    static llm_logit_bias ws[64];
    int n_ws = 0;
    for (int id = 0; id < llm_json_vocab_size(v) && n_ws < 64; id++) {
        size_t n;
        const char *p = llm_json_token_bytes(v, id, &n);
        if (p != NULL && n > 0 && strspn(p, " \n\t\r") >= n)
            ws[n_ws++] = (llm_logit_bias){ id, -100.0f };
    }
    for (int i = 0; i < CON_N; i++) {
        llm_sched_request rq = { 0 };
        rq.id = (uint64_t)i;
        rq.prompt = prompt;
        rq.n_prompt = 4;
        llm_sampling_defaults(&rq.sampling);
        rq.sampling.temperature = 1.0f;
        rq.sampling.seed = 100 + (uint64_t)i;
        rq.max_tokens = 80;
        rq.bias = ws;
        rq.n_bias = n_ws;
        const char *sch = schemas[i % 3];
        rq.json = sch == NULL;
        rq.schema = sch;
        rq.schema_len = sch ? strlen(sch) : 0;
        if (llm_sched_submit(s, &rq, &err) != 0)
            diag("submit: %s", err.msg);
    }
    int guard = 0, more = 1;
    while (more && guard++ < 10000) {
        more = llm_sched_step(s) > 0;
        llm_sched_output o;
        while (llm_sched_next_output(s, &o)) {
            con_result *r = &out[o.id];
            if (o.token >= 0 && r->n < 80)
                r->tok[r->n++] = o.token;
            if (o.finish != LLM_SCHED_FINISH_NONE)
                r->finish = (int)o.finish;
        }
    }
    llm_sched_stats st;
    llm_sched_get_stats(s, &st);
    *pooled = st.masks_pooled;
    llm_sched_destroy(s);
}

/* One request on the real model (seed 0 at temperature temp; 0: greedy), whitespace tokens banned; JSON mode
 * when json, a reasoning model's <think> / </think> when rs >= 0. Returns the tokens it wrote. */
static int reason_run(llm_backend *be, const llm_json_vocab *v, int mask_threads, const int32_t *prompt, int np,
                      float temp, int json, int32_t rs, const int32_t *re, int n_re, const llm_logit_bias *bias,
                      int n_bias,
                      int32_t *tok, int *finish)
{
    llm_sched_config cfg = { 0 };
    cfg.json_vocab = v;
    cfg.mask_threads = mask_threads;
    llm_err err = { { 0 } };
    llm_sched *s = llm_sched_create(be, &cfg, &err);
    if (s == NULL)
        return 0;
    llm_sched_request rq = { 0 };
    rq.prompt = prompt;
    rq.n_prompt = np;
    llm_sampling_defaults(&rq.sampling);
    rq.sampling.temperature = temp;
    rq.max_tokens = 60;
    rq.bias = bias;
    rq.n_bias = n_bias;
    rq.json = json;
    rq.reasoning = rs >= 0;
    rq.reason_start = rs;
    rq.reason_end = re;
    rq.n_reason_end = n_re;
    int n = 0;
    if (llm_sched_submit(s, &rq, &err) != 0)
        diag("submit: %s", err.msg);
    for (int guard = 0, more = 1; more && guard < 1000; guard++) {
        more = llm_sched_step(s) > 0;
        llm_sched_output o;
        while (llm_sched_next_output(s, &o)) {
            if (o.token >= 0 && n < 60)
                tok[n++] = o.token;
            if (o.finish != LLM_SCHED_FINISH_NONE)
                *finish = (int)o.finish;
        }
    }
    llm_sched_destroy(s);
    return n;
}

/* Every token after the first `skip` continues one JSON object (JSON mode's recogniser); 1 if so. */
static int json_after(const llm_json_vocab *v, const int32_t *tok, int n, int skip)
{
    llm_schema *sc = llm_schema_parse(LLM_SCHEMA_JSON_OBJECT, strlen(LLM_SCHEMA_JSON_OBJECT), NULL, 0);
    llm_schema_state *st = sc ? llm_schema_state_new(sc) : NULL;
    int good = st != NULL && n > skip;
    for (int k = skip; good && k < n; k++)
        good = llm_schema_accept(st, v, tok[k]) == 0;
    llm_schema_state_free(st);
    llm_schema_free(sc);
    return good;
}

/* JSON mode on a reasoning model: the first token may open its thinking (reason_start); until reason_end the
 * output is the model's own, then the mask holds. Stand-ins on stories260K: its greedy 1st and 4th tokens
 * after "Once upon a time" as <think> and </think>. The tokens are the plain greedy ones up to </think>,
 * then one JSON object (none of the plain greedy text's); with a reason_start the model does not want,
 * JSON mode's own tokens from the first. With and without the mask pool. */
static void test_reasoning_json(llm_backend *be, const llm_json_vocab *v)
{
    int32_t prompt[5] = { 1, 403, 407, 261, 378 }, g[60], b[60], d[60], e[60];
    static llm_logit_bias ws[65];
    int n_ws = 0, fin = 0;
    for (int id = 0; id < llm_json_vocab_size(v) && n_ws < 64; id++) {
        size_t n;
        const char *p = llm_json_token_bytes(v, id, &n);
        if (p != NULL && n > 0 && strspn(p, " \n\t\r") >= n)
            ws[n_ws++] = (llm_logit_bias){ id, -100.0f };
    }
    int ng = reason_run(be, v, 0, prompt, 5, 1.0f, 0, -1, NULL, 0, ws, n_ws, g, &fin);
    ok(ng >= 6 && !json_after(v, g, ng, 4), "plain greedy: %d tokens, not JSON after its 4th", ng);
    if (ng < 6)
        return;
    int fe = 0, ne = reason_run(be, v, 0, prompt, 5, 1.0f, 1, -1, NULL, 0, ws, n_ws, e, &fe);
    ok(ne > 0 && json_after(v, e, ne, 0) && memcmp(e, g, 4 * sizeof(int32_t)) != 0,
       "JSON mode alone: JSON from the first token");
    ws[n_ws] = (llm_logit_bias){ 77, -100.0f }; /* a <think> it does not want */
    for (int mt = 0; mt <= 2; mt += 2) {
        int fb = 0, nb = reason_run(be, v, mt, prompt, 5, 1.0f, 1, g[0], &g[3], 1, ws, n_ws, b, &fb);
        ok(nb > 4 && memcmp(b, g, 4 * sizeof(int32_t)) == 0 && json_after(v, b, nb, 4),
           "mask threads %d: thinking is the model's own (4 tokens), then %d tokens of one JSON object (%s)", mt,
           nb - 4, fb == LLM_SCHED_FINISH_STOP ? "stop" : "length");
        int fd = 0, nd = reason_run(be, v, mt, prompt, 5, 1.0f, 1, 77, &g[3], 1, ws, n_ws + 1, d, &fd);
        ok(nd == ne && memcmp(d, e, (size_t)ne * sizeof(int32_t)) == 0 && fd == fe,
           "mask threads %d: an answer that does not open with <think> is held from its first token", mt);
    }
    /* An end of several ids (gpt-oss's <|channel|> final <|message|>, whose first is also the start): the
     * greedy 1st-3rd tokens end the thinking that the 1st opened, as one id would have; the 2nd and 4th, never
     * written one after the other, do not end it where they are written apart: the plain greedy text, up to
     * where (if ever) they are written together, and JSON after it. */
    int fb = 0, nb = reason_run(be, v, 2, prompt, 5, 1.0f, 1, g[0], (const int32_t[]){ g[1], g[2], g[3] }, 3, ws,
                                n_ws, b, &fb);
    ok(nb > 4 && memcmp(b, g, 4 * sizeof(int32_t)) == 0 && json_after(v, b, nb, 4),
       "end of 3 ids: thinking is the model's own (4 tokens), then %d tokens of one JSON object", nb - 4);
    nb = reason_run(be, v, 2, prompt, 5, 1.0f, 1, g[0], g, 3, ws, n_ws, b, &fb);
    ok(nb > 3 && memcmp(b, g, 3 * sizeof(int32_t)) == 0 && json_after(v, b, nb, 3),
       "an end that starts with the start id (<|channel|> ...): the start does not end it alone, then JSON");
    int end = 0;
    for (int k = 2; k < ng && end == 0; k++)
        if (g[k - 1] == g[1] && g[k] == g[3])
            end = k + 1;
    nb = reason_run(be, v, 2, prompt, 5, 1.0f, 1, g[0], (const int32_t[]){ g[1], g[3] }, 2, ws, n_ws, b, &fb);
    ok(end == 0 ? nb == ng && memcmp(b, g, (size_t)ng * sizeof(int32_t)) == 0
                : nb > end && memcmp(b, g, (size_t)end * sizeof(int32_t)) == 0 && json_after(v, b, nb, end),
       "an end of 2 ids written apart does not end the thinking (%s)",
       end == 0 ? "never together: the plain text throughout" : "together later: JSON from there");
    /* ends the scheduler refuses: one id that is the start, none, five, one outside the vocabulary */
    llm_sched_config cfg = { 0 };
    cfg.json_vocab = v;
    llm_err err = { { 0 } };
    llm_sched *s = llm_sched_create(be, &cfg, &err);
    if (s == NULL)
        return;
    llm_sched_request rq = { 0 };
    rq.prompt = prompt;
    rq.n_prompt = 5;
    llm_sampling_defaults(&rq.sampling);
    rq.max_tokens = 1;
    rq.json = 1;
    rq.reasoning = 1;
    rq.reason_start = 7;
    static const int32_t ends[5] = { 7, 8, 9, 10, 11 };
    static const struct { const int32_t *end; int n; } bad[] = { { ends, 1 }, { ends, 0 }, { ends, 5 }, { NULL, 1 } };
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rq.reason_end = bad[i].end;
        rq.n_reason_end = bad[i].n;
        refused += llm_sched_submit(s, &rq, &err) != 0 && strstr(err.msg, "reasoning tokens") != NULL;
    }
    int32_t outside[2] = { 8, llm_json_vocab_size(v) };
    rq.reason_end = outside;
    rq.n_reason_end = 2;
    refused += llm_sched_submit(s, &rq, &err) != 0;
    rq.reason_end = ends;
    rq.n_reason_end = 3;
    ok(refused == 5 && llm_sched_submit(s, &rq, &err) == 0,
       "reasoning ends refused: one id that is the start, none, five, NULL, an id outside (%d of 5); 3 from the "
       "start taken", refused);
    llm_sched_destroy(s);
}

/* The same with a newline first (GLM-4.5 writes one before <think>): after 62 tokens of its greedy story,
 * stories260K's next are "\n" (13), then 438 310 439: stand-ins for <think> and </think> 438 and 439. The
 * newline (JSON's leading whitespace) does not close the door: the answer is the model's own four tokens,
 * then one JSON object. */
static void test_reasoning_json_after_ws(llm_backend *be, const llm_json_vocab *v)
{
    static const int32_t prompt[62] = {
        1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337,
        410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266,
        268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426 };
    int32_t g[60], b[60];
    static llm_logit_bias ws[65];
    int n_ws = 0, fin = 0;
    for (int id = 0; id < llm_json_vocab_size(v) && n_ws < 64; id++) {
        size_t n;
        const char *p = llm_json_token_bytes(v, id, &n);
        if (id != 13 && p != NULL && n > 0 && strspn(p, " \n\t\r") >= n)
            ws[n_ws++] = (llm_logit_bias){ id, -100.0f };
    }
    int ng = reason_run(be, v, 0, prompt, 62, 0.0f, 0, -1, NULL, 0, ws, n_ws, g, &fin);
    ok(ng >= 4 && g[0] == 13 && g[1] == 438 && g[3] == 439, "plain greedy: a newline, then 438 . 439 (%d %d %d %d)",
       g[0], ng > 1 ? g[1] : -1, ng > 2 ? g[2] : -1, ng > 3 ? g[3] : -1);
    if (ng < 4)
        return;
    for (int mt = 0; mt <= 2; mt += 2) {
        int fb = 0, nb = reason_run(be, v, mt, prompt, 62, 0.0f, 1, 438, (const int32_t[]){ 439 }, 1, ws, n_ws, b,
                                    &fb);
        ok(nb > 4 && memcmp(b, g, 4 * sizeof(int32_t)) == 0 && json_after(v, b, nb, 4),
           "mask threads %d: a newline, then its thinking (3 tokens), then %d tokens of one JSON object", mt,
           nb - 4);
    }
}

/* A regex over the whole output (vLLM's guided_regex), or a GBNF grammar (llama.cpp's grammar): the
 * end-of-generation token (2, favoured by +50 here so that the model takes it wherever it may) is masked until the
 * output is a whole match that could go on, then let through, and ends the request there; where nothing can
 * follow, the request ends by itself. With and without the mask pool. */
static void test_regex_request(llm_backend *be, const llm_json_vocab *v)
{
    static const struct { const char *re; const char *want; int grammar, eos; } cases[] = {
        { "[0-9]{2}( [a-z]+)?", "^[0-9]{2}$", 0, 1 },     /* may end after two digits: the end token does */
        { "(cat|dog)-[0-9]", "^(cat|dog)-[0-9]$", 0, 0 }, /* nothing can follow: it ends by itself */
        { "root ::= [0-9]{2} (\" \" [a-z]+)?", "^[0-9]{2}$", 1, 1 },
        { "root ::= (\"cat\" | \"dog\") \"-\" [0-9]", "^(cat|dog)-[0-9]$", 1, 0 },
        { "root ::= \"(\" ([a-z] | root){0,2} \")\"", "^(\\((?:[a-z]|(?1)){0,2}\\))$", 1, 0 }, /* nested */
    };
    for (int mt = 0; mt <= 2; mt += 2)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            llm_sched_config cfg = { 0 };
            cfg.json_vocab = v;
            cfg.mask_threads = mt;
            llm_err err = { { 0 } };
            llm_sched *s = llm_sched_create(be, &cfg, &err);
            int32_t prompt[4] = { 1, 403, 407, 261 }, stop = 2, tok[40];
            llm_logit_bias eos = { 2, 50.0f };
            llm_sched_request rq = { 0 };
            rq.prompt = prompt;
            rq.n_prompt = 4;
            llm_sampling_defaults(&rq.sampling);
            rq.sampling.temperature = 0.8f;
            rq.sampling.seed = 7;
            rq.max_tokens = 40;
            rq.stop_ids = &stop;
            rq.n_stop = 1;
            rq.bias = &eos;
            rq.n_bias = 1;
            rq.regex = !cases[c].grammar;
            rq.grammar = cases[c].grammar;
            rq.schema = cases[c].re;
            rq.schema_len = strlen(cases[c].re);
            int n = 0, finish = 0;
            if (s == NULL || llm_sched_submit(s, &rq, &err) != 0)
                diag("regex request: %s", err.msg);
            for (int guard = 0, more = s != NULL; more && guard < 1000; guard++) {
                more = llm_sched_step(s) > 0;
                llm_sched_output o;
                while (llm_sched_next_output(s, &o)) {
                    if (o.token >= 0 && n < 40)
                        tok[n++] = o.token;
                    if (o.finish != LLM_SCHED_FINISH_NONE)
                        finish = (int)o.finish;
                }
            }
            llm_sched_destroy(s);
            char text[256];
            size_t len = 0;
            int ended_by_eos = n > 0 && tok[n - 1] == stop;
            for (int k = 0; k < n - ended_by_eos; k++) {
                size_t b;
                const char *p = llm_json_token_bytes(v, tok[k], &b);
                if (p != NULL && len + b < sizeof text) {
                    memcpy(text + len, p, b);
                    len += b;
                }
            }
            text[len] = '\0';
            int ecode;
            PCRE2_SIZE eoff;
            pcre2_code *re = pcre2_compile((PCRE2_SPTR)cases[c].want, PCRE2_ZERO_TERMINATED, 0, &ecode, &eoff, NULL);
            pcre2_match_data *md = re != NULL ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
            int match = md != NULL && pcre2_match(re, (PCRE2_SPTR)text, len, 0, 0, md, NULL) >= 0;
            pcre2_match_data_free(md);
            pcre2_code_free(re);
            ok(match && finish == LLM_SCHED_FINISH_STOP && ended_by_eos == cases[c].eos,
               "mask threads %d: %s %s: '%s', %s (finish %d)", mt, cases[c].grammar ? "grammar" : "regex", cases[c].re, text,
               ended_by_eos ? "ended by the end token" : "ended when nothing could follow", finish);
        }
}

static void test_mask_pool(llm_backend *be, const llm_model *m)
{
    llm_json_vocab *v = llm_json_vocab_new(m->tok);
    ok(v != NULL, "stories260K vocabulary for masks");
    if (v == NULL)
        return;
    static con_result serial[CON_N], pooled[CON_N];
    uint64_t by_pool0 = 0, by_pool2 = 0;
    con_run(be, v, 0, serial, &by_pool0);
    con_run(be, v, 2, pooled, &by_pool2);
    ok(by_pool0 == 0 && by_pool2 > 0, "with 2 mask threads the pool made %llu masks (none without)",
       (unsigned long long)by_pool2);
    int same = 1, stopped = 0;
    for (int i = 0; i < CON_N; i++) {
        same &= serial[i].n == pooled[i].n && serial[i].finish == pooled[i].finish &&
                memcmp(serial[i].tok, pooled[i].tok, (size_t)serial[i].n * sizeof(int32_t)) == 0;
        stopped += serial[i].finish == LLM_SCHED_FINISH_STOP;
    }
    ok(same, "16 constrained requests: masks from the pool during the forward = masks after it (same tokens)");
    ok(stopped > 0, "%d of 16 finished their value (stop) within 80 tokens", stopped);
    /* each finished output is accepted whole by its schema again (and so was never outside it) */
    int valid = 1;
    for (int i = 0; i < CON_N; i++) {
        if (pooled[i].finish != LLM_SCHED_FINISH_STOP)
            continue;
        char text[1024];
        size_t len = 0;
        for (int k = 0; k < pooled[i].n; k++) {
            size_t n;
            const char *p = llm_json_token_bytes(v, pooled[i].tok[k], &n);
            if (p != NULL && len + n < sizeof text) {
                memcpy(text + len, p, n);
                len += n;
            }
        }
        text[len] = '\0';
        cJSON *j = cJSON_ParseWithLength(text, len);
        valid &= j != NULL;
        if (j == NULL)
            diag("request %d: not JSON: %s", i, text);
        cJSON_Delete(j);
    }
    ok(valid, "the finished outputs parse as JSON");
    test_reasoning_json(be, v);
    test_reasoning_json_after_ws(be, v);
    test_regex_request(be, v);
    llm_json_vocab_free(v);
}

/* Prompt logprobs: a 150-token prompt (more rows than a step spends on them, so it spans steps), a short
 * one, and a request without them sharing the long one's prefix, under a tight token budget and KV pool
 * (chunks, preemption). Each prompt logprob must be the log-softmax of the whole prompt's one-pass logits
 * at that position (a fresh fake backend, one forward), once each, in order, before any generated token;
 * the generated tokens must be those of the same requests without prompt logprobs. */
#define PLP_LONG 150
typedef struct {
    int     n_prompt_out, order_ok, gen;
    int32_t tok[PLP_LONG], gtok[16];
    float   lp[PLP_LONG];
    int32_t top0[PLP_LONG];
} plp_result;

static void plp_run(int with_plp, const req_spec *q, int n, plp_result *out, llm_sched_stats *st)
{
    fake_env e;
    fake_env_init(&e, 64, 256, 21, 8);
    llm_sched_config cfg = { 0 };
    cfg.max_batch_size = 3;
    cfg.max_batched_tokens = 40;
    llm_err err = { { 0 } };
    llm_sched *s = llm_sched_create(&e.be, &cfg, &err);
    memset(out, 0, (size_t)n * sizeof(*out));
    for (int i = 0; i < n; i++) {
        llm_sched_request rq = { 0 };
        rq.id = (uint64_t)i;
        rq.prompt = q[i].prompt;
        rq.n_prompt = q[i].n_prompt;
        rq.sampling = q[i].sp;
        rq.max_tokens = q[i].max_tokens;
        rq.prompt_logprobs = with_plp && i < 2;
        out[i].order_ok = 1;
        if (llm_sched_submit(s, &rq, &err) != 0)
            diag("submit: %s", err.msg);
    }
    int guard = 0, more = 1;
    while (more && guard++ < 10000) {
        more = llm_sched_step(s) > 0;
        llm_sched_output o;
        while (llm_sched_next_output(s, &o)) {
            plp_result *r = &out[o.id];
            if (o.prompt) {
                r->order_ok &= r->gen == 0 && r->n_prompt_out < PLP_LONG;
                if (r->n_prompt_out < PLP_LONG) {
                    r->tok[r->n_prompt_out] = o.token;
                    r->lp[r->n_prompt_out] = o.logprob;
                    r->top0[r->n_prompt_out] = o.n_top > 0 ? o.top[0].id : -1;
                    r->n_prompt_out++;
                }
            } else if (o.token >= 0 && r->gen < 16) {
                r->gtok[r->gen++] = o.token;
            }
        }
    }
    llm_sched_get_stats(s, st);
    llm_sched_destroy(s);
    fake_env_free(&e);
}

/* The reference of the prompt tests: every row of one forward over the whole prompt (n <= PLP_LONG tokens)
 * on a fresh fake backend (malloc'd, n x 64 floats), or NULL. */
static float *whole_prompt_rows(const int32_t *prompt, int n)
{
    fake_env e;
    fake_env_init(&e, 64, 256, 26, 8);
    int32_t pos[PLP_LONG], seq[PLP_LONG] = { 0 }, blocks[32];
    uint8_t want[PLP_LONG];
    for (int k = 0; k < n; k++) {
        pos[k] = k;
        want[k] = 1;
    }
    for (int b = 0; b < 32; b++)
        blocks[b] = b < 26 ? b : -1;
    llm_seq_view view = { blocks, (n + 7) / 8, NULL };
    llm_batch b = { n, prompt, pos, seq, want, 1, &view };
    float *lg = malloc((size_t)n * 64 * sizeof(float));
    llm_err err = { { 0 } };
    if (lg != NULL && e.be.ops->forward(&e.be, &b, lg, &err) != 0) {
        free(lg);
        lg = NULL;
    }
    fake_env_free(&e);
    return lg;
}

static void test_prompt_logprobs(void)
{
    static req_spec q[3];
    memset(q, 0, sizeof(q));
    const int lens[3] = { PLP_LONG, 20, 60 };
    for (int i = 0; i < 3; i++) {
        llm_sampling_defaults(&q[i].sp);
        q[i].sp.temperature = i == 1 ? 0.8f : 0.0f;
        q[i].sp.seed = 7;
        q[i].sp.n_logprobs = 2;
        q[i].max_tokens = 6;
        q[i].n_prompt = lens[i];
        for (int k = 0; k < lens[i]; k++)
            q[i].prompt[k] = (int32_t)((k * 13 + i * (k > 40)) % 64); /* 2 shares 0's first 41 tokens */
    }
    static plp_result with[3], without[3];
    llm_sched_stats st, st0;
    plp_run(1, q, 3, with, &st);
    plp_run(0, q, 3, without, &st0);
    ok(st.preemptions > 0, "the tight pool preempted requests (%llu)", (unsigned long long)st.preemptions);
    for (int i = 0; i < 2; i++) {
        /* the reference: the whole prompt in one forward on a fresh backend */
        int n = q[i].n_prompt;
        float *lg = whole_prompt_rows(q[i].prompt, n);
        int same = lg != NULL && with[i].n_prompt_out == n - 1;
        for (int k = 0; same && k < n - 1; k++) {
            llm_sample_result res;
            llm_token_logprobs(lg + (size_t)k * 64, 64, q[i].prompt[k + 1], 2, &res);
            same &= with[i].tok[k] == q[i].prompt[k + 1] && with[i].lp[k] == res.logprob &&
                    with[i].top0[k] == res.top[0].id;
        }
        ok(same && with[i].order_ok, "request %d: %d prompt logprobs, each once, in order, before the output, "
           "equal to one forward over the whole prompt", i, with[i].n_prompt_out);
        ok(with[i].gen == without[i].gen && memcmp(with[i].gtok, without[i].gtok, sizeof with[i].gtok) == 0,
           "request %d: the same %d generated tokens as without prompt logprobs", i, with[i].gen);
        free(lg);
    }
    ok(with[2].n_prompt_out == 0 && with[2].gen == without[2].gen &&
       memcmp(with[2].gtok, without[2].gtok, sizeof with[2].gtok) == 0,
       "a request without them: no prompt outputs, the same tokens");
    ok(st.cached_tokens < st0.cached_tokens || st0.cached_tokens == 0,
       "prompt-logprob requests take nothing from the prefix cache (%llu cached tokens against %llu)",
       (unsigned long long)st.cached_tokens, (unsigned long long)st0.cached_tokens);
}

/* Scoring (score_ids, /v1/rerank): each generated token's output reports the logprobs of the given ids at
 * its position, from the raw row (the prompt's last row for the first), as one forward over the whole prompt
 * gives them; the tokens are those of the same request without scoring; bad ids are refused. */
static void test_scoring(void)
{
    int32_t prompt[24];
    for (int k = 0; k < 24; k++) prompt[k] = (int32_t)((k * 7 + 3) % 64);
    static const int32_t ids[2] = { 5, 41 };
    int32_t tok[2][4];
    int ngen[2] = { 0, 0 }, scored = 0, tops = 1;
    float first[2] = { 0, 0 };
    for (int with = 0; with < 2; with++) {
        fake_env e;
        fake_env_init(&e, 64, 256, 21, 8);
        llm_sched_config cfg = { 0 };
        cfg.max_batched_tokens = 10; /* the prompt in chunks */
        llm_err err = { { 0 } };
        llm_sched *s = llm_sched_create(&e.be, &cfg, &err);
        llm_sched_request rq = { 0 };
        rq.prompt = prompt;
        rq.n_prompt = 24;
        llm_sampling_defaults(&rq.sampling);
        rq.max_tokens = 3;
        rq.score_ids = with ? ids : NULL;
        rq.n_score = with ? 2 : 0;
        if (llm_sched_submit(s, &rq, &err) != 0) diag("submit: %s", err.msg);
        for (int guard = 0, more = 1; more && guard < 1000; guard++) {
            more = llm_sched_step(s) > 0;
            llm_sched_output o;
            while (llm_sched_next_output(s, &o)) {
                if (o.token < 0 || ngen[with] >= 4) continue;
                if (with && ngen[with] == 0 && o.n_top == 2 && o.top[0].id == 5 && o.top[1].id == 41) {
                    scored = 1;
                    first[0] = o.top[0].logprob;
                    first[1] = o.top[1].logprob;
                }
                tops &= !with || (o.n_top == 2 && o.top[0].id == 5);
                tok[with][ngen[with]++] = o.token;
            }
        }
        if (with) {
            static const int32_t bad[1] = { 64 };
            rq.score_ids = bad;
            rq.n_score = 1;
            ok(llm_sched_submit(s, &rq, &err) != 0 && strstr(err.msg, "outside the vocabulary"),
               "scoring: an id outside the vocabulary is refused: %s", err.msg);
            rq.score_ids = ids;
            rq.json = 1;
            ok(llm_sched_submit(s, &rq, &err) != 0, "scoring: not with JSON mode: %s", err.msg);
        }
        llm_sched_destroy(s);
        fake_env_free(&e);
    }
    float *lg = whole_prompt_rows(prompt, 24);
    llm_sample_result a, b;
    int same = lg != NULL && llm_token_logprobs(lg + 23 * 64, 64, 5, 0, &a) == 0 &&
               llm_token_logprobs(lg + 23 * 64, 64, 41, 0, &b) == 0 && a.logprob == first[0] && b.logprob == first[1];
    ok(scored && same && tops, "scoring: the first token reports the logprobs of ids 5 and 41 at the prompt's last "
       "position (%.6f, %.6f), as one forward over the prompt gives them; every token reports them", first[0],
       first[1]);
    ok(ngen[0] == 3 && ngen[1] == 3 && memcmp(tok[0], tok[1], 3 * sizeof(int32_t)) == 0,
       "scoring: the same tokens as without it");
    free(lg);
}

/* Embedding requests (LLM_SCHED_EMBED_*) among generating ones, through a pool tight enough to preempt and
 * chunks of at most 40 tokens: each comes back as one record (token -1, STOP) whose embedding is the first dim
 * floats of the last prompt row (LAST) or their mean over every prompt row (MEAN), as one forward over the
 * whole prompt gives them; the generating requests' tokens are what they are without them. */
#define EMB_DIM 8
typedef struct {
    int   records, token, finish, gen, n_embd;
    float emb[EMB_DIM];
    int32_t gtok[16];
} emb_result;

static void emb_run(int with_embed, const req_spec *q, const int *pooling, int n, emb_result *out,
                    llm_sched_stats *st)
{
    fake_env e;
    fake_env_init(&e, 64, 256, 21, 8);
    e.model.cfg.dim = EMB_DIM;
    llm_sched_config cfg = { 0 };
    cfg.max_batch_size = 3;
    cfg.max_batched_tokens = 40;
    llm_err err = { { 0 } };
    llm_sched *s = llm_sched_create(&e.be, &cfg, &err);
    memset(out, 0, (size_t)n * sizeof(*out));
    for (int i = 0; i < n; i++) {
        if (!with_embed && pooling[i])
            continue;
        llm_sched_request rq = { 0 };
        rq.id = (uint64_t)i;
        rq.prompt = q[i].prompt;
        rq.n_prompt = q[i].n_prompt;
        rq.sampling = q[i].sp;
        rq.max_tokens = q[i].max_tokens;
        rq.embed = pooling[i];
        if (llm_sched_submit(s, &rq, &err) != 0)
            diag("submit: %s", err.msg);
    }
    int guard = 0, more = 1;
    while (more && guard++ < 10000) {
        more = llm_sched_step(s) > 0;
        llm_sched_output o;
        while (llm_sched_next_output(s, &o)) {
            emb_result *r = &out[o.id];
            r->records++;
            r->token = o.token;
            r->finish = o.finish;
            if (o.token >= 0 && r->gen < 16)
                r->gtok[r->gen++] = o.token;
            if (o.embedding != NULL) {
                r->n_embd = o.n_embd;
                memcpy(r->emb, o.embedding, sizeof r->emb);
            }
        }
    }
    llm_sched_get_stats(s, st);
    llm_sched_destroy(s);
    fake_env_free(&e);
}

static void test_embeddings(void)
{
    static req_spec q[4];
    memset(q, 0, sizeof(q));
    /* two generating requests first: their decodes preempt the mean-pooled one while it is mid-prefill */
    const int lens[4] = { 60, 30, PLP_LONG, 50 };
    const int pooling[4] = { 0, 0, LLM_SCHED_EMBED_MEAN, LLM_SCHED_EMBED_LAST };
    for (int i = 0; i < 4; i++) {
        llm_sampling_defaults(&q[i].sp);
        q[i].sp.temperature = i == 1 ? 0.8f : 0.0f;
        q[i].sp.seed = 7;
        q[i].max_tokens = 16;
        q[i].n_prompt = lens[i];
        for (int k = 0; k < lens[i]; k++)
            q[i].prompt[k] = (int32_t)((k * 13 + i * (k > 40)) % 64); /* 0 and 3 share 2's first 41 tokens */
    }
    static emb_result with[4], without[4];
    llm_sched_stats st, st0;
    emb_run(1, q, pooling, 4, with, &st);
    emb_run(0, q, pooling, 4, without, &st0);
    ok(st.preemptions > 0, "embeddings: the tight pool preempted requests (%llu)", (unsigned long long)st.preemptions);
    for (int i = 2; i < 4; i++) {
        int n = q[i].n_prompt;
        float *lg = whole_prompt_rows(q[i].prompt, n), ref[EMB_DIM] = { 0 };
        int rc = lg != NULL ? 0 : -1;
        for (int k = pooling[i] == LLM_SCHED_EMBED_MEAN ? 0 : n - 1; rc == 0 && k < n; k++)
            for (int j = 0; j < EMB_DIM; j++)
                ref[j] += lg[(size_t)k * 64 + j] + 100.0f; /* the fake's hidden rows */
        double worst = 0.0;
        for (int j = 0; j < EMB_DIM; j++) {
            if (pooling[i] == LLM_SCHED_EMBED_MEAN)
                ref[j] /= (float)n;
            double d = fabs((double)ref[j] - with[i].emb[j]);
            worst = d > worst ? d : worst;
        }
        ok(rc == 0 && with[i].records == 1 && with[i].token == -1 && with[i].finish == LLM_SCHED_FINISH_STOP &&
           with[i].gen == 0 && with[i].n_embd == EMB_DIM && worst < 1e-5,
           "request %d (%s pooling, %d tokens): one record, no token, STOP, the embedding of one forward over the "
           "prompt (max diff %.2g)", i, i == 2 ? "mean" : "last", n, worst);
        free(lg);
    }
    int same = 1;
    for (int i = 0; i < 2; i++)
        same &= with[i].gen == without[i].gen && memcmp(with[i].gtok, without[i].gtok, sizeof with[i].gtok) == 0 &&
                with[i].n_embd == 0;
    ok(same, "generating requests beside them: the same tokens, no embedding");
    ok(st.tokens_out == st0.tokens_out, "embeddings generate nothing (%llu tokens out, %llu without them)",
       (unsigned long long)st.tokens_out, (unsigned long long)st0.tokens_out);

    /* refused: a pooling that is none of them, with prompt logprobs, a hidden size above the vocabulary */
    fake_env e;
    fake_env_init(&e, 64, 256, 21, 8);
    e.model.cfg.dim = EMB_DIM;
    llm_err err = { { 0 } };
    llm_sched *s = llm_sched_create(&e.be, NULL, &err);
    llm_sched_request rq = { 0 };
    rq.prompt = q[3].prompt;
    rq.n_prompt = 5;
    llm_sampling_defaults(&rq.sampling);
    rq.max_tokens = 1;
    rq.embed = 4;
    ok(llm_sched_submit(s, &rq, &err) == -1, "pooling 4 refused: %s", err.msg);
    rq.embed = LLM_SCHED_EMBED_LAST;
    rq.prompt_logprobs = 1;
    ok(llm_sched_submit(s, &rq, &err) == -1, "embedding with prompt logprobs refused: %s", err.msg);
    rq.prompt_logprobs = 0;
    e.model.cfg.dim = 65;
    ok(llm_sched_submit(s, &rq, &err) == -1, "hidden size above the vocabulary refused: %s", err.msg);
    llm_sched_destroy(s);
    fake_env_free(&e);
}

/* min_tokens: the stop ids cannot be generated before it. The greedy first token of a request is made its
 * stop id: without min_tokens it ends the request at once; with min_tokens 3 the first 3 tokens avoid it
 * and the request goes on. */
static void test_min_tokens(void)
{
    fake_env e;
    fake_env_init(&e, 64, 256, 64, 4);
    llm_err err = { { 0 } };
    int32_t prompt[6] = { 1, 9, 17, 33, 2, 40 }, stop[1];
    int toks[3][8], n[3], fin[3];
    for (int run = 0; run < 3; run++) {
        llm_sched *s = llm_sched_create(&e.be, NULL, &err);
        llm_sched_request rq = { 0 };
        rq.id = 1;
        rq.prompt = prompt;
        rq.n_prompt = 6;
        llm_sampling_defaults(&rq.sampling);
        rq.sampling.temperature = 0;
        rq.max_tokens = 8;
        if (run > 0) {
            rq.stop_ids = stop;
            rq.n_stop = 1;
            rq.min_tokens = run == 2 ? 3 : 0;
        }
        llm_sched_submit(s, &rq, &err);
        n[run] = 0;
        fin[run] = -1;
        int more = 1;
        while (more) {
            more = llm_sched_step(s) == 1;
            llm_sched_output o;
            while (llm_sched_next_output(s, &o)) {
                if (o.token >= 0 && n[run] < 8)
                    toks[run][n[run]++] = o.token;
                if (o.finish != LLM_SCHED_FINISH_NONE)
                    fin[run] = o.finish;
            }
        }
        llm_sched_destroy(s);
        if (run == 0)
            stop[0] = toks[0][0];
    }
    ok(n[1] == 1 && fin[1] == LLM_SCHED_FINISH_STOP, "the greedy first token as a stop id ends the request at once");
    int avoided = n[2] >= 3;
    for (int i = 0; i < 3 && i < n[2]; i++)
        avoided &= toks[2][i] != stop[0];
    ok(avoided && toks[2][0] != toks[0][0], "min_tokens 3: the first 3 tokens avoid the stop id (%d tokens, %s)", n[2],
       fin[2] == LLM_SCHED_FINISH_STOP ? "then it stopped" : "to max_tokens");
    llm_sched_request bad = { 0 };
    bad.id = 2;
    bad.prompt = prompt;
    bad.n_prompt = 6;
    llm_sampling_defaults(&bad.sampling);
    bad.max_tokens = 4;
    bad.min_tokens = -1;
    llm_sched *s = llm_sched_create(&e.be, NULL, &err);
    is_int(llm_sched_submit(s, &bad, &err), -1, "a negative min_tokens is refused");
    llm_sched_destroy(s);
    fake_env_free(&e);
}

/* The window pool (backend opts.swa_blocks): a model with sliding-window layers keeps their KV in a pool
 * of its own where each sequence holds only its window's blocks. Requests far longer than the window,
 * staggered, chunked, greedy and sampled, some sharing prompts (the prefix cache: the main pool's blocks and
 * the window pool's last window of them), give the same tokens and logprobs as each alone with every
 * layer's KV in one pool, in a window pool much smaller than their contexts (its blocks given back and
 * taken by other sequences while their stale ids stay in the tables) and in the smallest one the
 * scheduler takes (steps shrink, requests wait or are preempted). Bit for bit: with F32 weights a token's
 * logits do not depend on its step, window layers included. */
/* specs[0 .. n/2) to the end, then specs[n/2 .. n) on the same scheduler (its prefix cache). */
static int run_waves(llm_backend *be, const llm_sched_config *cfg, const req_spec *specs, int n, result *res,
                     llm_sched_stats *st)
{
    llm_err err = { { 0 } };
    llm_sched *s = llm_sched_create(be, cfg, &err);
    if (s == NULL)
        return -1;
    memset(res, 0, (size_t)n * sizeof(*res));
    int rc = 0;
    for (int w = 0; w < 2 && rc == 0; w++) {
        for (int i = w * n / 2; i < (w + 1) * n / 2; i++)
            if (submit_spec(s, &specs[i], (uint64_t)i) != 0)
                rc = -1;
        int k;
        while (rc == 0 && (k = llm_sched_step(s)) != 0) {
            drain(s, res);
            rc = k < 0 ? -1 : 0;
        }
        drain(s, res);
    }
    llm_sched_get_stats(s, st);
    llm_sched_destroy(s);
    return rc;
}

enum { WP_FULL, WP_WIN, WP_ROOMY, WP_TIGHT, WP_SMALL, WP_N };

/* test_window_pool's runs on one model: be[] as there. */
static void window_pool_runs(const llm_model *m, llm_backend *const *be, const int *pools, int bs,
                             const char *preset)
{
    const int n = 8;
    static req_spec specs[8];
    static result alone[8], same[8], got[8];
    make_specs(specs, n, m->cfg.vocab_size, 50, 2);
    long tokens = 0;
    for (int i = 0; i < n; i++) {
        if (i >= n / 2) /* the first half's prompts again (for the prefix cache), sampled or not in turn */
            memcpy(specs[i].prompt, specs[i - n / 2].prompt, sizeof(specs[i].prompt)),
                specs[i].n_prompt = specs[i - n / 2].n_prompt;
        specs[i].prompt[0] = m->cfg.bos_id;
        specs[i].max_tokens = 40;
        specs[i].n_stop = 0;
        tokens += specs[i].n_prompt + specs[i].max_tokens;
    }
    llm_sched_config cfg = { 0 };
    cfg.max_batched_tokens = 24; /* prompts in chunks */
    cfg.max_batch_size = 8;
    run_alone(be[WP_FULL], &cfg, specs, n, alone);
    ok(all_finished_ok(alone, n), "%s alone, one pool: all finished", preset);
    llm_sched_stats st;
    is_int(run_all(be[WP_FULL], &cfg, specs, n, 2, same, &st), 0, "%s staggered, one pool: ran to idle", preset);
    is_int(run_all(be[WP_WIN], &cfg, specs, n, 2, got, &st), 0, "%s, window pool of %d blocks: ran to idle", preset,
           pools[WP_WIN]);
    is_int(compare(got, same, n, "window pool"), 0, "%s: staggered in a window pool = in one pool", preset);
    /* (F32 weights: a token's bits do not depend on its step, sliding-window layers included) */
    is_int(compare(same, alone, n, "one pool / alone"), 0, "%s: staggered in one pool = alone", preset);
    ok(st.kvw.n_blocks == pools[WP_WIN] && st.kvw.used == 0 && st.kv.used == 0 && tokens > (long)pools[WP_WIN] * bs,
       "%s: %ld tokens of context through %d window blocks of %d, all given back", preset, tokens, pools[WP_WIN], bs);
    is_int(run_waves(be[WP_ROOMY], &cfg, specs, n, got, &st), 0, "%s, a window pool of %d blocks: the same prompts "
           "again, in a second wave", preset, pools[WP_ROOMY]);
    is_int(compare(got, alone, n, "second wave"), 0, "%s: the second wave = alone", preset);
    ok(st.cached_tokens >= 100 && st.kvw.hits > 0, "%s: the second wave took %llu prompt tokens from the prefix "
       "cache, with %llu window blocks", preset, (unsigned long long)st.cached_tokens,
       (unsigned long long)st.kvw.hits);
    is_int(run_all(be[WP_TIGHT], &cfg, specs, n, 0, got, &st), 0, "%s, the smallest window pool (%d blocks): ran to "
           "idle", preset, pools[WP_TIGHT]);
    is_int(compare(got, alone, n, "smallest window pool"), 0, "%s: all at once in the smallest window pool = alone",
           preset);
    llm_err err = { { 0 } };
    llm_sched *s = llm_sched_create(be[WP_SMALL], &cfg, &err);
    ok(s == NULL && strstr(err.msg, "window pool") != NULL, "%s: a window pool below one window refused: %s", preset,
       err.msg);
    llm_sched_destroy(s);
}

static void test_window_pool(const char *preset)
{
    char dir[] = "/tmp/llm-sched-swa-XXXXXX", path[600];
    if (mkdtemp(dir) == NULL) {
        ok(0, "mkdtemp");
        return;
    }
    snprintf(path, sizeof(path), "%s/m.gguf", dir);
    llm_err err = { { 0 } };
    ok(llm_model_generate(preset, LLM_F32, 7, path, "../shared", &err) == 0, "gen %s: %s", preset, err.msg);
    llm_model *m = llm_model_load(path, NULL, &err);
    unlink(path);
    rmdir(dir);
    ok(m != NULL, "%s loads %s", preset, m == NULL ? err.msg : "");
    if (m == NULL)
        return;
    /* one pool; a few windows' blocks; room for the prompts' last windows while others run; the smallest the
     * scheduler takes; one block less */
    const int bs = 4, least = (m->cfg.swa_window + bs - 1) / bs + 1;
    const int pools[WP_N] = { 0, 6 * least, 24 * least, least, least - 1 };
    llm_backend *be[WP_N];
    llm_backend_opts bo = { 0 };
    bo.threads = 1;
    bo.block_size = bs;
    bo.kv_blocks = 512;
    int made = 1;
    for (int i = 0; i < WP_N; i++) {
        bo.swa_blocks = pools[i];
        be[i] = llm_backend_create("cpu", m, &bo, &err);
        made &= be[i] != NULL;
    }
    ok(made && be[WP_FULL]->opts.swa_blocks == 0 && be[WP_WIN]->opts.swa_blocks == pools[WP_WIN],
       "%s: backends with and without a window pool %s", preset, err.msg);
    if (made)
        window_pool_runs(m, be, pools, bs, preset);
    for (int i = 0; i < WP_N; i++)
        llm_backend_free(be[i]);
    llm_model_free(m);
}


/* Draft-model speculation. On the fake backend a second fake is the same "model" (its logits hash the same
 * tokens and positions), so every greedy draft must stand: a draft KV out of step (a wrong position, a stale
 * or skipped token, a block table that does not cover it) changes its drafts or fails the fake's checks. A
 * fake with a smaller vocabulary drafts mostly wrong. Every run must give each request's tokens, logprobs and
 * finish as alone without speculation. Then the real stories260K as its own draft on the CPU backend. */
static void draft_specs(req_spec *sp, int n, int vocab, int greedy, int stops)
{
    make_specs(sp, n, vocab, 60, MAXGEN - 8);
    for (int i = 0; i < n; i++) {
        sp[i].max_tokens = 20 + 5 * i;
        if (!stops)
            sp[i].n_stop = 0;
        if (greedy) {
            llm_sampling_defaults(&sp[i].sp);
            sp[i].sp.temperature = 0;
        }
    }
}

static void test_draft_model(void)
{
    fake_env t, d;
    fake_env_init(&t, 97, 256, 256, 4);
    fake_env_init(&d, 97, 256, 128, 8); /* its own pool and block size */
    static req_spec sp[8];
    static result alone[8], got[8];
    llm_sched_config cfg = { 0 };
    cfg.max_batch_size = 8;
    cfg.max_batched_tokens = 48;
    llm_sched_stats st;

    draft_specs(sp, 8, 97, 1, 0);
    run_alone(&t.be, &cfg, sp, 8, alone);
    llm_sched_config dc = cfg;
    dc.spec_tokens = 4;
    dc.draft = &d.be;
    is_int(run_all(&t.be, &dc, sp, 8, 2, got, &st), 0, "draft model, 8 greedy requests, 2 arriving a step: ran to idle");
    is_int(compare(got, alone, 8, "draft model"), 0, "with a draft model = alone without");
    ok(st.spec_drafted > 0 && st.spec_accepted == st.spec_drafted && st.steps < st.tokens_out / 2,
       "the same model as draft: all %llu of %llu drafts confirmed, %llu tokens in %llu steps",
       (unsigned long long)st.spec_accepted, (unsigned long long)st.spec_drafted, (unsigned long long)st.tokens_out,
       (unsigned long long)st.steps);

    /* sampled requests, stop ids, penalties, logprobs: drafts stand where the draw is the draft */
    draft_specs(sp, 8, 97, 0, 1);
    run_alone(&t.be, &cfg, sp, 8, alone);
    is_int(run_all(&t.be, &dc, sp, 8, 0, got, &st), 0, "draft model, sampled requests: ran to idle");
    is_int(compare(got, alone, 8, "draft model sampled"), 0, "sampled, with a draft model = alone without");
    ok(st.spec_accepted <= st.spec_drafted, "sampled: %llu of %llu confirmed", (unsigned long long)st.spec_accepted,
       (unsigned long long)st.spec_drafted);

    /* a draft pool too small for the longer sequences (they go without), and a draft call that fails */
    draft_specs(sp, 8, 97, 1, 0);
    run_alone(&t.be, &cfg, sp, 8, alone);
    fake_env small;
    fake_env_init(&small, 97, 256, 12, 4); /* 48 positions */
    ((fake_impl *)small.be.impl)->fail = 1;
    dc.draft = &small.be;
    is_int(run_all(&t.be, &dc, sp, 8, 0, got, &st), 0, "a small draft pool and a failed draft call: ran to idle");
    is_int(compare(got, alone, 8, "small draft pool"), 0, "... = alone");
    ok(st.draft_failures == 1 && st.spec_accepted == st.spec_drafted && st.spec_drafted > 0,
       "one failed draft call; %llu of %llu drafts confirmed", (unsigned long long)st.spec_accepted,
       (unsigned long long)st.spec_drafted);
    fake_env_free(&small);

    /* another "model": a vocabulary of 61 drafts mostly wrong; the output is still the target's */
    fake_env other;
    fake_env_init(&other, 61, 256, 128, 4);
    dc.draft = &other.be;
    is_int(run_all(&t.be, &dc, sp, 8, 0, got, &st), 0, "a different draft model: ran to idle");
    is_int(compare(got, alone, 8, "different draft"), 0, "... = alone");
    ok(st.spec_accepted < st.spec_drafted, "%llu of %llu of its drafts confirmed", (unsigned long long)st.spec_accepted,
       (unsigned long long)st.spec_drafted);
    /* its lengths adapt: a sequence asks for one past what it last had confirmed; draft_fixed: always 4 */
    llm_sched_stats fx;
    dc.draft_fixed = 1;
    is_int(run_all(&t.be, &dc, sp, 8, 0, got, &fx), 0, "a different draft model, fixed length: ran to idle");
    is_int(compare(got, alone, 8, "different draft, fixed"), 0, "... = alone");
    ok(st.spec_drafted < fx.spec_drafted && st.spec_drafted - st.spec_accepted < fx.spec_drafted - fx.spec_accepted,
       "adapting, %llu drafts (%llu confirmed); fixed at 4, %llu (%llu confirmed)", (unsigned long long)st.spec_drafted,
       (unsigned long long)st.spec_accepted, (unsigned long long)fx.spec_drafted,
       (unsigned long long)fx.spec_accepted);
    dc.draft_fixed = 0;
    fake_env_free(&other);

    /* spec_tokens 0 with a draft is refused */
    dc.draft = &d.be;
    dc.spec_tokens = 0;
    llm_err err = { { 0 } };
    llm_sched *s = llm_sched_create(&t.be, &dc, &err);
    ok(s == NULL && strstr(err.msg, "spec_tokens") != NULL, "a draft without spec_tokens refused: %s", err.msg);
    llm_sched_destroy(s);
    fake_env_free(&d);
    fake_env_free(&t);

    /* stories260K drafting for itself: its own backend and pool, on the target's threads */
    llm_model *m = llm_model_load("../shared/models/stories260K/stories260K.gguf", NULL, &err);
    if (m == NULL) {
        diag("stories260K: %s", err.msg);
        return;
    }
    llm_backend_opts bo = { 0 };
    bo.threads = 1;
    bo.block_size = 16;
    bo.kv_blocks = 256;
    llm_backend *be = llm_backend_create("cpu", m, &bo, &err);
    llm_backend_opts dbo = bo;
    dbo.kv_blocks = 64;
    dbo.share_threads = be;
    llm_backend *db = be != NULL ? llm_backend_create("cpu", m, &dbo, &err) : NULL;
    ok(db != NULL, "stories260K draft backend on the target's threads %s", db == NULL ? err.msg : "");
    if (db != NULL) {
        draft_specs(sp, 8, m->cfg.vocab_size, 1, 1);
        for (int i = 0; i < 8; i++)
            sp[i].prompt[0] = 1; /* BOS */
        run_alone(be, &cfg, sp, 8, alone);
        dc.spec_tokens = 6;
        dc.draft = db;
        is_int(run_all(be, &dc, sp, 8, 2, got, &st), 0, "stories260K with itself as draft: ran to idle");
        is_int(compare(got, alone, 8, "stories260K draft"), 0, "... = alone");
        ok(st.spec_accepted * 10 >= st.spec_drafted * 9 && st.spec_drafted > 0,
           "%llu of %llu drafts confirmed (%llu tokens in %llu steps, %.1f ms drafting)",
           (unsigned long long)st.spec_accepted, (unsigned long long)st.spec_drafted,
           (unsigned long long)st.tokens_out, (unsigned long long)st.steps, st.draft_ms);
        draft_specs(sp, 8, m->cfg.vocab_size, 0, 1);
        for (int i = 0; i < 8; i++)
            sp[i].prompt[0] = 1;
        run_alone(be, &cfg, sp, 8, alone);
        is_int(run_all(be, &dc, sp, 8, 0, got, &st), 0, "stories260K self-draft, sampled: ran to idle");
        is_int(compare(got, alone, 8, "stories260K draft sampled"), 0, "... = alone");
    }
    llm_backend_free(db);
    llm_backend_free(be);
    llm_model_free(m);
}

int main(void)
{
    test_batching_independence();
    test_prefix_sharing();
    test_prefix_generated();
    test_cancel();
    test_priority_and_callback();
    test_hold();
    test_backpressure_and_errors();
    test_oom_self_heal();
    test_prompt_logprobs();
    test_scoring();
    test_embeddings();
    test_min_tokens();
    test_draft_model();
    test_real_model();
    test_window_pool("tiny-gemma3");
    test_window_pool("tiny-gpt-oss");
    return done_testing();
}
