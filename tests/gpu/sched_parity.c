/* The scheduler over the CUDA backend against the scheduler over the CPU
 * backend, on a real model: 16 requests of 8 kinds (plain greedy; greedy with
 * top logprobs; greedy with penalties; seeded sampling plain, with top-k +
 * top-p + min-p + logprobs, with penalties) arriving over the first steps, so
 * steps mix prefill chunks and decodes, then settle into decode-only steps
 * (CUDA Graphs). Through llm_backend.forward_device the plain-greedy rows come
 * back as on-device argmax ids and every other row is sampled on the device
 * (kernels/cuda_sample.cu) from the draw the request's PRNG makes.
 * Greedy requests must give identical tokens, logprobs within --max-lp-diff;
 * seeded sampled requests must be identical in at least --min-sampled of them
 * (the same draw on logits equal to ~1e-5 picks the same token unless it falls
 * within that of a boundary).
 *   sched_parity --model PATH [--gen 24] [--max-lp-diff 1e-3] [--min-sampled 0]   (LLM_CUDA_LIB: the backend) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cuda_loader.h"
#include "model.h"
#include "scheduler.h"

#define NREQ 16
#define MAXG 64

typedef struct {
    int32_t tok[MAXG];
    float   lp[MAXG];
    int     n;
} result;

static llm_backend *make_cuda(const llm_model *m, const llm_backend_opts *o, llm_err *err)
{
    const llm_backend_ops *ops = llm_cuda_ops_load(err);
    if (ops == NULL)
        return NULL;
    llm_backend *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->ops = ops;
    b->model = m;
    b->opts = *o;
    if (ops->init(b, err) != 0) {
        free(b);
        return NULL;
    }
    return b;
}

/* 0 plain greedy, 1 greedy + logprobs, 2 greedy + penalties, 3 sampled, 4 sampled + top-k/top-p/min-p +
 * logprobs, 5 sampled + penalties; requests 6 and 7 of each 8 are plain greedy and sampled again. */
static int kind(int i)
{
    static const int k[8] = { 0, 1, 2, 3, 4, 5, 0, 3 };
    return k[i % 8];
}
static int sampled(int i) { return kind(i) >= 3; }

static void take(result *res, const llm_sched_output *o)
{
    result *r = &res[o->id];
    if (o->token >= 0 && r->n < MAXG) {
        r->tok[r->n] = o->token;
        r->lp[r->n++] = o->logprob;
    }
}

static int run(llm_backend *be, int vocab, int gen, result *res)
{
    llm_err err = { { 0 } };
    llm_sched_config cfg = { 0 };
    cfg.max_batch_size = 16;
    cfg.max_batched_tokens = 64; /* prompts are chunked: mixed steps before the decode-only ones */
    llm_sched *s = llm_sched_create(be, &cfg, &err);
    if (s == NULL) {
        fprintf(stderr, "scheduler: %s\n", err.msg);
        return -1;
    }
    memset(res, 0, NREQ * sizeof(*res));
    int submitted = 0, guard = 0, more = 1;
    while ((more || submitted < NREQ) && guard++ < 100000) {
        for (int k = 0; k < 2 && submitted < NREQ; k++, submitted++) { /* two arrivals per step */
            int i = submitted;
            int32_t prompt[80];
            int np = 3 + (i * 13) % 70;
            for (int j = 0; j < np; j++)
                prompt[j] = (int32_t)((1 + (uint32_t)i * 7919u + (uint32_t)j * 104729u) % (uint32_t)vocab);
            llm_sched_request rq = { 0 };
            rq.id = (uint64_t)i;
            rq.prompt = prompt;
            rq.n_prompt = np;
            rq.max_tokens = gen;
            llm_sampling_defaults(&rq.sampling);
            llm_sampling_params *sp = &rq.sampling;
            sp->temperature = sampled(i) ? 0.8f : 0.0f;
            sp->seed = 1234 + (uint64_t)i;
            sp->n_logprobs = kind(i) == 1 ? 3 : kind(i) == 4 ? 5 : 0;
            if (kind(i) == 2 || kind(i) == 5) {
                sp->repetition_penalty = 1.3f;
                sp->frequency_penalty = 0.4f;
                sp->presence_penalty = 0.2f;
                sp->penalty_last_n = kind(i) == 2 ? 0 : -1;
            }
            if (kind(i) == 4) {
                sp->top_k = 40;
                sp->top_p = 0.9f;
                sp->min_p = 0.02f;
            }
            if (llm_sched_submit(s, &rq, &err) != 0) {
                fprintf(stderr, "submit: %s\n", err.msg);
                llm_sched_destroy(s);
                return -1;
            }
        }
        more = llm_sched_step(s);
        if (more < 0) {
            fprintf(stderr, "step: %s\n", llm_sched_last_error(s));
            llm_sched_destroy(s);
            return -1;
        }
        llm_sched_output o;
        while (llm_sched_next_output(s, &o))
            take(res, &o);
    }
    llm_sched_destroy(s);
    return 0;
}

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return def;
}

int main(int argc, char **argv)
{
    const char *path = arg(argc, argv, "--model", NULL);
    if (path == NULL) {
        fprintf(stderr, "usage: sched_parity --model PATH [--gen 24] [--max-lp-diff 1e-3] [--min-sampled 0]\n");
        return 2;
    }
    int gen = atoi(arg(argc, argv, "--gen", "24"));
    double max_lp = atof(arg(argc, argv, "--max-lp-diff", "1e-3"));
    int min_sampled = atoi(arg(argc, argv, "--min-sampled", "0"));
    if (gen < 1 || gen > MAXG)
        gen = gen < 1 ? 1 : MAXG;
    llm_err err = { { 0 } };
    llm_model *m = llm_model_load(path, NULL, &err);
    if (m == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    llm_backend_opts o = { 0 };
    o.block_size = 16;
    o.kv_blocks = NREQ * ((80 + MAXG) / 16 + 1);
    llm_backend *cpu = llm_backend_create("cpu", m, &o, &err);
    llm_backend *gpu = cpu != NULL ? make_cuda(m, &o, &err) : NULL;
    static result rc[NREQ], rg[NREQ];
    int fails = 0;
    if (cpu == NULL || gpu == NULL || gpu->forward_device == NULL || run(cpu, m->cfg.vocab_size, gen, rc) != 0 ||
        run(gpu, m->cfg.vocab_size, gen, rg) != 0) {
        fprintf(stderr, "error: %s\n", gpu != NULL && gpu->forward_device == NULL ? "no forward_device" : err.msg);
        fails++;
    } else {
        int greedy_same = 0, greedy_n = 0, sampled_same = 0, sampled_n = 0;
        double lp_diff = 0.0;
        for (int i = 0; i < NREQ; i++) {
            int same = rc[i].n == rg[i].n && memcmp(rc[i].tok, rg[i].tok, (size_t)rc[i].n * sizeof(int32_t)) == 0;
            if (sampled(i)) {
                sampled_same += same;
                sampled_n++;
                continue;
            }
            greedy_same += same;
            greedy_n++;
            if (!same)
                printf("  request %d (greedy, kind %d): tokens differ\n", i, kind(i));
            for (int k = 0; same && k < rc[i].n; k++) {
                double d = fabs((double)rc[i].lp[k] - (double)rg[i].lp[k]);
                lp_diff = d <= lp_diff ? lp_diff : (isnan(d) ? INFINITY : d);
            }
        }
        int bad = greedy_same != greedy_n || !(lp_diff <= max_lp) || sampled_same < min_sampled;
        printf("scheduler, %d requests x %d tokens: greedy requests identical %d of %d (logprob max |diff| %.3g), "
               "seeded sampled requests identical %d of %d (at least %d wanted)%s\n", NREQ, gen, greedy_same,
               greedy_n, lp_diff, sampled_same, sampled_n, min_sampled, bad ? "  <-- FAIL" : "");
        fails += bad;
    }
    llm_backend_free(gpu);
    llm_backend_free(cpu);
    llm_model_free(m);
    printf("%s\n", fails == 0 ? "PASS" : "FAIL");
    return fails == 0 ? 0 : 1;
}
