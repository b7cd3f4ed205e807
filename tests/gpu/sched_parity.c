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
 * --oom 1 (the CPU emulation of CUDA only: it reads the emulated device's memory
 * use and sets its capacity) runs the GPU side again, out of device memory:
 *   1. a KV pool asked far larger than the device: it must be sized from the
 *      memory fraction instead (and the run still identical);
 *   2. the device capped halfway between what init used and the first run's peak,
 *      so that some step's scratch cannot be had: the backend must report
 *      LLM_BACKEND_NOMEM, the scheduler shrink its steps (oom_shrinks > 0) and every
 *      request still finish with the same greedy tokens;
 *   3. with --oom-sweep G, requests of G tokens, one run for each device allocation a
 *      run makes after init, that allocation refused: every run must finish with the
 *      same greedy tokens (the refusal surfaced as LLM_BACKEND_NOMEM, or absorbed).
 *   sched_parity --model PATH [--gen 24] [--max-lp-diff 1e-3] [--min-sampled 0] [--oom 0|1 [--oom-sweep G]] [--spec K]
 *   (LLM_CUDA_LIB: the backend) */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_util.h"
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

/* What a run submits: nreq requests of gen tokens, steps of at most step_tokens tokens. */
typedef struct {
    int gen, nreq, step_tokens;
    int spec;   /* n-gram speculation drafts a step (scheduler spec_tokens), 0 = off */
} workload;

static int run(llm_backend *be, int vocab, const workload *w, result *res, llm_sched_stats *stats)
{
    llm_err err = { { 0 } };
    llm_sched_config cfg = { 0 };
    cfg.max_batch_size = 16;
    cfg.max_batched_tokens = w->step_tokens; /* prompts are chunked: mixed steps before the decode-only ones */
    cfg.spec_tokens = w->spec; /* drafts: several rows of one sequence in a step, argmaxed on the device */
    cfg.oom_recover_ms = 20; /* after a step ran out of memory, back to full steps soon (emulated steps are slow) */
    llm_sched *s = llm_sched_create(be, &cfg, &err);
    if (s == NULL) {
        fprintf(stderr, "scheduler: %s\n", err.msg);
        return -1;
    }
    memset(res, 0, NREQ * sizeof(*res));
    const int nreq = w->nreq, gen = w->gen;
    int submitted = 0, guard = 0, more = 1;
    while ((more || submitted < nreq) && guard++ < 100000) {
        for (int k = 0; k < 2 && submitted < nreq; k++, submitted++) { /* two arrivals per step */
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
        while (llm_sched_next_output(s, &o)) {
            if (o.finish == LLM_SCHED_FINISH_ERROR) {
                fprintf(stderr, "request %llu failed (error %d): %s\n", (unsigned long long)o.id, o.error,
                        llm_sched_last_error(s));
                llm_sched_destroy(s);
                return -1;
            }
            take(res, &o);
        }
    }
    if (stats != NULL)
        llm_sched_get_stats(s, stats);
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

/* Greedy requests identical (logprobs within max_lp), at least min_sampled seeded sampled ones identical.
 * Prints one line; 1 when it fails. */
static int compare(const char *what, const result *rc, const result *rg, const workload *w, double max_lp,
                   int min_sampled)
{
    int greedy_same = 0, greedy_n = 0, sampled_same = 0, sampled_n = 0;
    double lp_diff = 0.0;
    for (int i = 0; i < w->nreq; i++) {
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
    printf("scheduler%s, %d requests x %d tokens: greedy requests identical %d of %d (logprob max |diff| %.3g), "
           "seeded sampled requests identical %d of %d (at least %d wanted)%s\n", what, w->nreq, w->gen, greedy_same,
           greedy_n, lp_diff, sampled_same, sampled_n, min_sampled, bad ? "  <-- FAIL" : "");
    return bad;
}

/* The emulated device's memory controls (kernels/cuda_emu.cc), found in the library LLM_CUDA_LIB loaded. */
typedef struct {
    void *h;
    size_t (*used)(void), (*peak)(void);
    void (*limit)(size_t);
    unsigned long (*allocs)(void);
    void (*fail_nth)(unsigned long);
} emu_mem;

static int emu_mem_find(emu_mem *e)
{
    const char *lib = getenv("LLM_CUDA_LIB");
    memset(e, 0, sizeof(*e));
    e->h = lib != NULL ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (e->h == NULL)
        return -1;
    *(void **)&e->used = dlsym(e->h, "cu_emu_mem_used");
    *(void **)&e->peak = dlsym(e->h, "cu_emu_mem_peak");
    *(void **)&e->limit = dlsym(e->h, "cu_emu_mem_limit");
    *(void **)&e->allocs = dlsym(e->h, "cu_emu_mem_allocs");
    *(void **)&e->fail_nth = dlsym(e->h, "cu_emu_mem_fail_nth");
    return e->used && e->peak && e->limit && e->allocs && e->fail_nth ? 0 : -1;
}

/* 3. Every device allocation a run makes after init refused in turn, one a run: each refusal must come
 * back as LLM_BACKEND_NOMEM (the scheduler shrinks its step) or be absorbed by a fallback, and every
 * request finish with the same greedy tokens. The number of checks failed. */
static int fail_each(const llm_model *m, const llm_backend_opts *o, llm_backend *cpu, const workload *w,
                     double max_lp, const emu_mem *e)
{
    static result rc[NREQ], rg[NREQ];
    llm_err err = { { 0 } };
    llm_sched_stats st;
    if (run(cpu, m->cfg.vocab_size, w, rc, NULL) != 0)
        return 1;
    llm_backend *gpu = make_cuda(m, o, &err);
    unsigned long a0 = e->allocs();
    if (gpu == NULL || run(gpu, m->cfg.vocab_size, w, rg, NULL) != 0) {
        printf("allocation failures: the counting run failed: %s  <-- FAIL\n", err.msg);
        llm_backend_free(gpu);
        return 1;
    }
    unsigned long n = e->allocs() - a0;
    llm_backend_free(gpu);
    int fails = 0, shrank = 0;
    for (unsigned long k = 1; k <= n; k++) {
        char what[64];
        snprintf(what, sizeof(what), " (allocation %lu of %lu refused)", k, n);
        gpu = make_cuda(m, o, &err);
        if (gpu == NULL) {
            printf("scheduler%s: init failed: %s  <-- FAIL\n", what, err.msg);
            fails++;
            continue;
        }
        e->fail_nth(k);
        int rr = run(gpu, m->cfg.vocab_size, w, rg, &st);
        e->fail_nth(0);
        if (rr != 0) {
            printf("scheduler%s: the run failed  <-- FAIL\n", what);
            fails++;
        } else {
            fails += compare(what, rc, rg, w, max_lp, 0);
            shrank += st.oom_shrinks > 0;
        }
        llm_backend_free(gpu);
    }
    printf("allocation failures: each of the %lu device allocations after init refused in turn (%d requests of "
           "%d tokens, steps of %d): %d runs shrank their steps%s\n", n, w->nreq, w->gen, w->step_tokens, shrank,
           fails ? "  <-- FAIL" : ", every run finished with the same greedy tokens");
    return fails;
}

/* The out-of-memory runs of --oom (see the top of the file); rc is the CPU backend's result of w, used_init
 * and peak the device memory the first CUDA run had after init and at most. The number of checks failed. */
static int oom_runs(const llm_model *m, const llm_backend_opts *o, llm_backend *cpu, const result *rc,
                    const workload *w, double max_lp, int min_sampled, size_t used_init, size_t peak,
                    const workload *sweep, const emu_mem *e)
{
    int fails = 0;
    static result rg[NREQ];
    llm_err err = { { 0 } };
    llm_sched_stats st;

    /* 1. A pool of 400,000 blocks (stories260K: 2.3 GiB in q8_0, 8 GiB in f32) on a device with 1 GiB more
     * than init used: sized automatically. */
    llm_backend_opts big = *o;
    big.kv_blocks = 400000;
    e->limit(used_init + ((size_t)1 << 30));
    llm_backend *gpu = make_cuda(m, &big, &err);
    if (gpu == NULL || run(gpu, m->cfg.vocab_size, w, rg, NULL) != 0) {
        printf("oversized KV pool: %s  <-- FAIL\n", gpu == NULL ? err.msg : "the run failed");
        fails++;
    } else {
        int shrunk = gpu->opts.kv_blocks > 0 && gpu->opts.kv_blocks < big.kv_blocks;
        printf("oversized KV pool: %d blocks asked, %d allocated%s\n", big.kv_blocks, gpu->opts.kv_blocks,
               shrunk ? "" : "  <-- FAIL");
        fails += !shrunk + compare(" (oversized KV pool)", rc, rg, w, max_lp, min_sampled);
    }
    llm_backend_free(gpu);

    /* 2. Capped between init and the first run's peak: some step's scratch fails, the scheduler shrinks. */
    size_t cap = used_init + (peak - used_init) / 2;
    e->limit(cap);
    gpu = make_cuda(m, o, &err);
    if (gpu == NULL || run(gpu, m->cfg.vocab_size, w, rg, &st) != 0) {
        printf("device capped at %zu bytes: %s  <-- FAIL\n", cap, gpu == NULL ? err.msg : "the run failed");
        fails++;
    } else {
        int shrank = st.oom_shrinks > 0;
        printf("device capped at %zu bytes (init %zu, peak %zu): %llu steps refused, %llu preemptions%s\n", cap,
               used_init, peak, (unsigned long long)st.oom_shrinks, (unsigned long long)st.preemptions,
               shrank ? "" : "  <-- FAIL (no step ran out of memory)");
        fails += !shrank + compare(" (out of device memory)", rc, rg, w, max_lp, min_sampled);
    }
    llm_backend_free(gpu);
    e->limit(0);

    if (sweep->gen > 0)
        fails += fail_each(m, o, cpu, sweep, max_lp, e);
    if (e->used() != 0) {
        printf("device memory still allocated after every backend was freed: %zu bytes  <-- FAIL\n", e->used());
        fails++;
    }
    return fails;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* in order with the backend's lines on stderr */
    const char *path = arg(argc, argv, "--model", NULL);
    if (path == NULL) {
        fprintf(stderr, "usage: sched_parity --model PATH [--gen 24] [--max-lp-diff 1e-3] [--min-sampled 0] "
                "[--oom 0|1 [--oom-sweep G]] [--spec K] [--tp N [--ep 1]]\n");
        return 2;
    }
    workload w = { atoi(arg(argc, argv, "--gen", "24")), NREQ, 64, atoi(arg(argc, argv, "--spec", "0")) };
    if (w.spec > 0) /* speculation runs while at most LLM_SCHED_SPEC_SEQS requests do */
        w.nreq = LLM_SCHED_SPEC_SEQS;
    double max_lp = atof(arg(argc, argv, "--max-lp-diff", "1e-3"));
    int min_sampled = atoi(arg(argc, argv, "--min-sampled", "0"));
    int oom = atoi(arg(argc, argv, "--oom", "0"));
    /* The sweep: 8 requests (one of each kind), steps of 16 tokens, so that the decode graphs' buffers grow
     * in the graph path, not already in the prefill steps. */
    workload sweep = { atoi(arg(argc, argv, "--oom-sweep", "0")), 8, 16, 0 };
    if (w.gen < 1 || w.gen > MAXG)
        w.gen = w.gen < 1 ? 1 : MAXG;
    if (sweep.gen < 0 || sweep.gen > MAXG)
        sweep.gen = sweep.gen < 0 ? 0 : MAXG;
    llm_err err = { { 0 } };
    llm_model *m = llm_model_load(path, NULL, &err);
    if (m == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    llm_backend_opts o = { 0 };
    o.block_size = 16;
    o.kv_blocks = NREQ * ((80 + MAXG) / 16 + 1);
    o.kv_dtype = llm_kv_dtype_parse(getenv("LLM_CUDA_KV")); /* the same cache type on both sides */
    if (o.kv_dtype < 0)
        o.kv_dtype = LLM_KV_AUTO;
    llm_backend *cpu = llm_backend_create("cpu", m, &o, &err);
    /* --tp N: the CUDA side split over N devices (engine/backend_tp.c; not with --oom, whose device memory is
     * this process's) */
    llm_backend_opts og = o;
    og.tp_size = oom ? 1 : atoi(arg(argc, argv, "--tp", "1"));
    og.tp_ep = atoi(arg(argc, argv, "--ep", "0")); /* (--ep 1: experts dealt out whole) */
    llm_backend *gpu = cpu == NULL ? NULL : og.tp_size > 1 ? llm_backend_create("cuda", m, &og, &err)
                                                           : make_cuda(m, &o, &err);
    emu_mem e = { 0 };
    int fails = 0;
    if (oom && gpu != NULL && emu_mem_find(&e) != 0) {
        printf("--oom: LLM_CUDA_LIB is not the CPU emulation of CUDA (no cu_emu_mem_* functions)  <-- FAIL\n");
        fails++;
    }
    size_t used_init = oom && fails == 0 && gpu != NULL ? e.used() : 0, peak = 0;
    static result rc[NREQ], rg[NREQ];
    llm_sched_stats st = { 0 };
    if (fails > 0 || cpu == NULL || gpu == NULL || gpu->forward_device == NULL ||
        run(cpu, m->cfg.vocab_size, &w, rc, NULL) != 0 || run(gpu, m->cfg.vocab_size, &w, rg, &st) != 0) {
        fprintf(stderr, "error: %s\n", gpu != NULL && gpu->forward_device == NULL ? "no forward_device" : err.msg);
        fails++;
    } else {
        fails += compare(w.spec ? " with n-gram speculation" : "", rc, rg, &w, max_lp, min_sampled);
        if (og.tp_size > 1) /* (a rank's device capped by CU_EMU_MEM_DEVICE: steps refused by every rank) */
            printf("  split over %d devices: %llu steps refused for memory, %llu preemptions\n", og.tp_size,
                   (unsigned long long)st.oom_shrinks, (unsigned long long)st.preemptions);
        if (w.spec)
            printf("  speculation on the device: %llu of %llu drafted tokens confirmed, %llu tokens in %llu steps\n",
                   (unsigned long long)st.spec_accepted, (unsigned long long)st.spec_drafted,
                   (unsigned long long)st.tokens_out, (unsigned long long)st.steps);
        peak = oom ? e.peak() : 0;
    }
    llm_backend_free(gpu);
    if (oom && fails == 0)
        fails += oom_runs(m, &o, cpu, rc, &w, max_lp, min_sampled, used_init, peak, &sweep, &e);
    if (oom && e.h != NULL)
        dlclose(e.h);
    llm_backend_free(cpu);
    llm_model_free(m);
    printf("%s\n", fails == 0 ? "PASS" : "FAIL");
    return fails == 0 ? 0 : 1;
}
