/* Results made on the device, through the scheduler (llm_backend.forward_device):
 * a fake backend computes each logits row from (token, position, sequence);
 * with forward_device it returns, for LLM_ROW_ARGMAX rows, the argmax and its
 * logprob the way engine/sampler.c computes them, and with device_sampling, for
 * LLM_ROW_SAMPLE rows, what llm_sampler_sample_row makes of the row's
 * parameters, penalty pairs and draw (the reference the CUDA kernel is checked
 * against); it poisons those rows' logits with NaN, so a scheduler that still
 * read them would emit other tokens. The same requests (plain greedy, greedy
 * with logprobs, greedy with penalties, seeded sampling plain / with filters
 * and top logprobs / with penalties) must give identical tokens, logprobs and
 * top logprobs in the three runs, exactly the plain-greedy requests' rows may
 * come back as ARGMAX and every other row as SAMPLE. Requests 7-11 carry logit
 * biases (a ban, small raises and cuts) and 13-17 one +100 bias (bias_of), which
 * the device rows get as pairs after the penalty pairs. Also checks
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
#define NREQ  18
#define MAXG  24

typedef struct {
    long flagged_rows, argmax_calls, sampled_rows;
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
        if (am->mode[t] == LLM_ROW_SAMPLE) {
            int j = 0;
            while (j < am->n_sample && am->sample[j].row != row)
                j++;
            if (j == am->n_sample || !b->device_sampling) {
                llm_seterr(err, "fake: sampled row %d without its parameters", row);
                return -1;
            }
            llm_sample_result r;
            am->ids[row] = llm_sampler_sample_row(&am->sample[j], am->pen, lg, VOCAB, &r);
            am->logprob[row] = r.logprob;
            am->n_top[j] = r.n_top;
            memcpy(am->top + (size_t)j * LLM_SAMPLING_MAX_LOGPROBS, r.top, sizeof r.top);
            f->sampled_rows++;
        } else if (am->mode[t] == LLM_ROW_ARGMAX) {
            f->flagged_rows++;
        }
        if (am->mode[t] != LLM_ROW_LOGITS)
            for (int i = 0; i < VOCAB; i++)
                lg[i] = NAN;
        row++;
    }
    return 0;
}

static const llm_backend_ops fake_ops = { "fake", fake_init, fake_forward, fake_destroy };

typedef struct {
    int32_t tok[MAXG];
    float   lp[MAXG];
    int     n_top[MAXG];
    llm_token_logprob top[MAXG][3];
    int     n;
} result;

#define KINDS 6

static void spec(int i, llm_sampling_params *sp, int32_t *prompt, int *n_prompt, int *max_tokens)
{
    llm_sampling_defaults(sp);
    switch (i % KINDS) {
    case 0: sp->temperature = 0; break;                                 /* plain greedy */
    case 1: sp->temperature = 0; sp->n_logprobs = 2; break;             /* greedy + top logprobs */
    case 2: sp->temperature = 0; sp->repetition_penalty = 1.3f; break;  /* greedy + penalty */
    case 3: sp->temperature = 0.8f; sp->seed = 77 + (uint64_t)i; break; /* seeded sampling */
    case 4:                                                             /* ... with filters and logprobs */
        sp->temperature = 1.2f;
        sp->top_k = 20;
        sp->top_p = 0.9f;
        sp->min_p = 0.02f;
        sp->n_logprobs = 3;
        sp->seed = 5 + (uint64_t)i;
        break;
    default:                                                            /* ... with penalties, whole context */
        sp->temperature = 0.9f;
        sp->frequency_penalty = 0.7f;
        sp->presence_penalty = 0.3f;
        sp->repetition_penalty = 1.2f;
        sp->penalty_last_n = 0;
        sp->seed = 9 + (uint64_t)i;
        break;
    }
    *n_prompt = 1 + (int)(mix((uint64_t)i + 5) % 30);
    for (int k = 0; k < *n_prompt; k++)
        prompt[k] = (int32_t)(mix((uint64_t)(i * 100 + k)) % VOCAB);
    *max_tokens = 8 + i % MAXG < MAXG ? 8 + i % MAXG : MAXG;
}

/* Request i's logit biases (none for plain-greedy kinds, so that they stay plain). */
static int bias_of(int i, llm_logit_bias *b)
{
    if (i % KINDS == 0)
        return 0;
    if (i >= 7 && i <= 11) {
        b[0] = (llm_logit_bias){ (int32_t)(i * 7 % VOCAB), -100.0f };
        b[1] = (llm_logit_bias){ (int32_t)((i * 11 + 3) % VOCAB), 1.75f };
        b[2] = (llm_logit_bias){ (int32_t)((i * 5 + 1) % VOCAB), -0.5f };
        return 3;
    }
    if (i >= 13) {
        b[0] = (llm_logit_bias){ (int32_t)(i * 7 % VOCAB), 100.0f };
        return 1;
    }
    return 0;
}

/* mode 0: plain forward; 1: forward_device (argmax rows); 2: forward_device with device_sampling. */
static int run(int mode, result *res, long *flagged, long *sampled, long *plain_tokens)
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
    if (mode >= 1)
        be.forward_device = fake_forward_device;
    be.device_sampling = mode == 2;
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
        llm_logit_bias bias[4];
        rq.bias = bias;
        rq.n_bias = bias_of(i, bias);
        if (llm_sched_submit(s, &rq, &err) != 0) {
            diag("submit: %s", err.msg);
            return -1;
        }
    }
    int guard = 0, more = 1;
    while (more && guard++ < 10000) {
        more = llm_sched_step(s) > 0;
        llm_sched_output o;
        while (llm_sched_next_output(s, &o))
            if (o.token >= 0 && res[o.id].n < MAXG) {
                result *r = &res[o.id];
                r->tok[r->n] = o.token;
                r->lp[r->n] = o.logprob;
                r->n_top[r->n] = o.n_top;
                memcpy(r->top[r->n], o.top, sizeof r->top[0]);
                r->n++;
            }
    }
    *flagged = ((fake_impl *)be.impl)->flagged_rows;
    *sampled = ((fake_impl *)be.impl)->sampled_rows;
    *plain_tokens = 0;
    for (int i = 0; i < NREQ; i += KINDS)
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

    static result res[3][NREQ];
    long fl[3], sa[3], pl[3], all = 0;
    for (int m = 0; m < 3; m++)
        ok(run(m, res[m], &fl[m], &sa[m], &pl[m]) == 0, "scheduler run %d (%s)", m,
           m == 0 ? "plain backend" : m == 1 ? "forward_device, argmax rows" : "forward_device, sampled rows too");
    for (int i = 0; i < NREQ; i++)
        all += res[0][i].n;
    for (int m = 1; m < 3; m++) {
        int same = 1;
        for (int i = 0; i < NREQ; i++) {
            const result *a = &res[0][i], *b = &res[m][i];
            if (a->n != b->n || memcmp(a->tok, b->tok, (size_t)a->n * sizeof(int32_t)) != 0) {
                diag("run %d, request %d (kind %d): tokens differ", m, i, i % KINDS);
                same = 0;
                continue;
            }
            for (int k = 0; k < a->n; k++) {
                int top_same = a->n_top[k] == b->n_top[k];
                for (int j = 0; top_same && j < a->n_top[k] && j < 3; j++)
                    top_same = a->top[k][j].id == b->top[k][j].id &&
                               fabsf(a->top[k][j].logprob - b->top[k][j].logprob) <= 1e-6f;
                if (!(fabsf(a->lp[k] - b->lp[k]) <= 1e-6f) || !top_same) {
                    diag("run %d, request %d token %d: logprob %g vs %g, top-n %s", m, i, k, (double)a->lp[k],
                         (double)b->lp[k], top_same ? "same" : "differ");
                    same = 0;
                    break;
                }
            }
        }
        ok(same, "run %d: identical tokens, logprobs and top logprobs with the device rows' logits poisoned", m);
    }
    int banned_absent = 1, forced = 1;
    for (int i = 0; i < NREQ; i++) {
        llm_logit_bias b[4];
        int nb = bias_of(i, b);
        for (int k = 0; k < res[0][i].n && nb > 0; k++) {
            banned_absent &= b[0].bias > 0.0f || res[0][i].tok[k] != b[0].id;
            forced &= b[0].bias < 0.0f || res[0][i].tok[k] == b[0].id;
        }
    }
    ok(banned_absent, "a token biased by -100 never comes out");
    ok(forced && res[0][13].n > 0, "a token biased by +100 is every token of its request (greedy, sampled, penalised)");
    ok(pl[0] > 0 && res[0][0].n > 0, "plain-greedy requests generated tokens (%ld of %ld)", pl[0], all);
    is_int((int)fl[1], (int)pl[1], "argmax run: exactly the plain-greedy requests' rows came back as ids");
    is_int((int)sa[1], 0, "argmax run: no row sampled on the device without device_sampling");
    is_int((int)fl[2], (int)pl[2], "sampling run: the plain-greedy rows as argmax ids");
    is_int((int)sa[2], (int)(all - pl[2]), "sampling run: every other row sampled on the device");
    return done_testing();
}
