/* On-device greedy through the scheduler (llm_backend.forward_device): a fake
 * backend computes each logits row from (token, position, sequence); with
 * forward_device it returns, for flagged rows, the argmax and its logprob the
 * way engine/sampler.c computes them and poisons those rows' logits with NaN,
 * so a scheduler that still read them would emit other tokens. The same
 * requests (plain greedy, greedy with logprobs, greedy with penalties, seeded
 * sampling) must give identical tokens and logprobs with and without it, and
 * exactly the plain-greedy requests' rows may be flagged. Also checks
 * llm_sampler_plain_greedy. */
#include "backend.h"
#include "model.h"
#include "sampler.h"
#include "scheduler.h"
#include "tap.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB 64
#define NREQ  12
#define MAXG  24

typedef struct {
    long flagged_rows, argmax_calls;
} fake_impl;

static uint64_t mix(uint64_t h)
{
    h ^= h >> 31;
    h *= 0x7fb5d329728ea185ull;
    h ^= h >> 27;
    h *= 0x81dadef4bc2dd44dull;
    return h ^ (h >> 33);
}

static int fake_init(llm_backend *b, llm_err *err)
{
    (void)err;
    b->impl = calloc(1, sizeof(fake_impl));
    return b->impl != NULL ? 0 : -1;
}

static void fake_destroy(llm_backend *b) { free(b->impl); }

static void fake_row(const llm_batch *bt, int t, float *lg)
{
    uint64_t h = mix((uint64_t)bt->tokens[t] * 1000003u + (uint64_t)bt->pos[t] * 7919u);
    for (int i = 0; i < VOCAB; i++)
        lg[i] = (float)((mix(h + (uint64_t)i) >> 11) * 0x1.0p-53 * 6.0 - 3.0);
}

static int fake_forward(llm_backend *b, const llm_batch *bt, float *logits, llm_err *err)
{
    (void)b;
    (void)err;
    for (int t = 0, row = 0; t < bt->n_tokens; t++)
        if (bt->want_logits[t])
            fake_row(bt, t, logits + (size_t)row++ * VOCAB);
    return 0;
}

/* As engine/sampler.c: greedy = first index of the maximum, logprob = l[id] - (max + log sum exp(l - max)). */
static int fake_forward_device(llm_backend *b, const llm_batch *bt, const llm_device_out *am, float *logits,
                               llm_err *err)
{
    fake_impl *f = b->impl;
    f->argmax_calls++;
    if (fake_forward(b, bt, logits, err) != 0)
        return -1;
    for (int t = 0, row = 0; t < bt->n_tokens; t++) {
        if (!bt->want_logits[t])
            continue;
        float *lg = logits + (size_t)row * VOCAB;
        int id = 0;
        for (int i = 1; i < VOCAB; i++)
            if (lg[i] > lg[id])
                id = i;
        double z = 0.0;
        for (int i = 0; i < VOCAB; i++)
            z += expf(lg[i] - lg[id]);
        am->ids[row] = id;
        am->logprob[row] = (float)(lg[id] - ((double)lg[id] + log(z)));
        if (am->mode[t]) {
            f->flagged_rows++;
            for (int i = 0; i < VOCAB; i++)
                lg[i] = NAN;
        }
        row++;
    }
    return 0;
}

static const llm_backend_ops fake_ops = { "fake", fake_init, fake_forward, fake_destroy };

typedef struct {
    int32_t tok[MAXG];
    float   lp[MAXG];
    int     n;
} result;

static void spec(int i, llm_sampling_params *sp, int32_t *prompt, int *n_prompt, int *max_tokens)
{
    llm_sampling_defaults(sp);
    switch (i % 4) {
    case 0: sp->temperature = 0; break;                                 /* plain greedy */
    case 1: sp->temperature = 0; sp->n_logprobs = 2; break;             /* greedy + top logprobs */
    case 2: sp->temperature = 0; sp->repetition_penalty = 1.3f; break;  /* greedy + penalty */
    default: sp->temperature = 0.8f; sp->seed = 77 + (uint64_t)i; break;
    }
    *n_prompt = 1 + (int)(mix((uint64_t)i + 5) % 30);
    for (int k = 0; k < *n_prompt; k++)
        prompt[k] = (int32_t)(mix((uint64_t)(i * 100 + k)) % VOCAB);
    *max_tokens = 8 + i % MAXG < MAXG ? 8 + i % MAXG : MAXG;
}

static int run(int with_argmax, result *res, long *flagged, long *plain_tokens)
{
    llm_model model;
    memset(&model, 0, sizeof(model));
    model.cfg.vocab_size = VOCAB;
    model.cfg.seq_len = 256;
    llm_backend be;
    memset(&be, 0, sizeof(be));
    be.ops = &fake_ops;
    be.model = &model;
    be.opts.kv_blocks = 128;
    be.opts.block_size = 8;
    llm_err err = { { 0 } };
    if (fake_init(&be, &err) != 0)
        return -1;
    if (with_argmax)
        be.forward_device = fake_forward_device;
    llm_sched_config cfg = { 0 };
    cfg.max_batch_size = 8;
    cfg.max_batched_tokens = 64;
    llm_sched *s = llm_sched_create(&be, &cfg, &err);
    if (s == NULL) {
        diag("create: %s", err.msg);
        fake_destroy(&be);
        return -1;
    }
    memset(res, 0, NREQ * sizeof(*res));
    for (int i = 0; i < NREQ; i++) {
        int32_t prompt[32];
        llm_sched_request rq = { 0 };
        rq.id = (uint64_t)i;
        rq.prompt = prompt;
        spec(i, &rq.sampling, prompt, &rq.n_prompt, &rq.max_tokens);
        if (llm_sched_submit(s, &rq, &err) != 0) {
            diag("submit: %s", err.msg);
            return -1;
        }
    }
    int guard = 0;
    while (llm_sched_step(s) > 0 && guard++ < 10000) {
        llm_sched_output o;
        while (llm_sched_next_output(s, &o))
            if (o.token >= 0 && res[o.id].n < MAXG) {
                res[o.id].tok[res[o.id].n] = o.token;
                res[o.id].lp[res[o.id].n++] = o.logprob;
            }
    }
    llm_sched_output o;
    while (llm_sched_next_output(s, &o))
        if (o.token >= 0 && res[o.id].n < MAXG) {
            res[o.id].tok[res[o.id].n] = o.token;
            res[o.id].lp[res[o.id].n++] = o.logprob;
        }
    *flagged = ((fake_impl *)be.impl)->flagged_rows;
    *plain_tokens = 0;
    for (int i = 0; i < NREQ; i += 4)
        *plain_tokens += res[i].n;
    llm_sched_destroy(s);
    fake_destroy(&be);
    return 0;
}

int main(void)
{
    llm_sampling_params p;
    llm_sampling_defaults(&p);
    llm_sampler *smp = llm_sampler_new(&p, VOCAB);
    is_int(llm_sampler_plain_greedy(smp), 0, "default sampling (temperature 1) is not plain greedy");
    llm_sampler_free(smp);
    p.temperature = 0;
    smp = llm_sampler_new(&p, VOCAB);
    is_int(llm_sampler_plain_greedy(smp), 1, "temperature 0, no penalties, no logprobs: plain greedy");
    llm_sampler_free(smp);
    p.n_logprobs = 1;
    smp = llm_sampler_new(&p, VOCAB);
    is_int(llm_sampler_plain_greedy(smp), 0, "top logprobs asked: not plain");
    llm_sampler_free(smp);
    p.n_logprobs = 0;
    p.presence_penalty = 0.5f;
    smp = llm_sampler_new(&p, VOCAB);
    is_int(llm_sampler_plain_greedy(smp), 0, "presence penalty: not plain");
    llm_sampler_free(smp);
    is_int(llm_sampler_plain_greedy(NULL), 0, "NULL sampler: not plain");

    static result a[NREQ], b[NREQ];
    long fa = 0, fb = 0, pa = 0, pb = 0;
    ok(run(0, a, &fa, &pa) == 0, "scheduler run with a plain backend");
    ok(run(1, b, &fb, &pb) == 0, "scheduler run with forward_device");
    int same = 1;
    for (int i = 0; i < NREQ; i++) {
        if (a[i].n != b[i].n || memcmp(a[i].tok, b[i].tok, (size_t)a[i].n * sizeof(int32_t)) != 0) {
            diag("request %d: tokens differ", i);
            same = 0;
        }
        for (int k = 0; k < a[i].n && k < b[i].n; k++)
            if (!(fabsf(a[i].lp[k] - b[i].lp[k]) <= 1e-6f)) {
                diag("request %d token %d: logprob %g vs %g", i, k, (double)a[i].lp[k], (double)b[i].lp[k]);
                same = 0;
                break;
            }
    }
    ok(same, "identical tokens and logprobs with the argmax rows' logits poisoned");
    ok(pa > 0 && a[0].n > 0, "plain-greedy requests generated tokens (%ld)", pa);
    is_int((int)fb, (int)pb, "exactly the plain-greedy requests' rows came back as ids");
    return done_testing();
}
