/* End-to-end harness for the serve tests: starts the real engine binary
 * (<build>/llm-engine, found next to the test binary's directory) on
 * stories260K, and drives requests through shm/llm_client.h.
 * Every wait has a generous cap so that a bug fails a test instead of hanging
 * CI; no test asserts on how long anything took. */
#ifndef SERVE_HARNESS_H
#define SERVE_HARNESS_H

#include "llm_client.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define H_MODEL   "../shared/models/stories260K/stories260K.gguf"
#define H_VOCAB   512
#define H_BOS     1
#define H_EOS     2
#define H_MAX_OUT 512
#define H_MAX_PROMPT 512

static char h_engine_bin[4096];
/* The engine started last; a crash of it must fail the test, not hang it. */
static pid_t h_engine_pid = -1, h_reaped_pid = -1;
static int   h_reaped_status, h_crashed; /* h_crashed: it died by itself (sticky until the next start) */

/* <dir of argv0>/../llm-engine: build/tests/test_x -> build/llm-engine. */
static void h_find_engine(const char *argv0)
{
    const char *env = getenv("LLM_ENGINE_BIN");
    if (env != NULL) {
        snprintf(h_engine_bin, sizeof(h_engine_bin), "%s", env);
        return;
    }
    const char *slash = strrchr(argv0, '/');
    int dir = slash != NULL ? (int)(slash - argv0) : 0;
    snprintf(h_engine_bin, sizeof(h_engine_bin), "%.*s%s../llm-engine", dir, argv0, dir > 0 ? "/" : "");
}

static void h_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static double h_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Starts `llm-engine serve --model stories260K --shm name --threads 1 <extra...>`
 * (extra is NULL-terminated). Engine stdout/stderr go to the test's stderr. */
static pid_t h_engine_start(const char *name, const char *const *extra)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = h_engine_bin;
    argv[n++] = "serve";
    argv[n++] = "--model";
    argv[n++] = H_MODEL;
    argv[n++] = "--shm";
    argv[n++] = name;
    argv[n++] = "--threads";
    argv[n++] = "1";
    argv[n++] = "--no-supervise"; /* the tests signal the engine process itself */
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 62; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(2, 1); /* keep TAP output clean */
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a crashed test leaves no engine behind */
        execv(h_engine_bin, (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", h_engine_bin, strerror(errno));
        _exit(127);
    }
    h_engine_pid = pid;
    h_crashed = 0;
    return pid;
}

/* 1 (and a diagnostic) if the engine started last has exited by itself. */
static int h_engine_died(void)
{
    if (h_engine_pid <= 0)
        return h_crashed;
    int st;
    if (waitpid(h_engine_pid, &st, WNOHANG) != h_engine_pid)
        return 0;
    h_reaped_pid = h_engine_pid;
    h_reaped_status = st;
    h_engine_pid = -1;
    h_crashed = 1;
    printf("# engine %d died: %s %d\n", (int)h_reaped_pid, WIFSIGNALED(st) ? "signal" : "exit status",
           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    return 1;
}

/* Attaches c to the engine once it is READY. 0, or -1 if the engine exited or
 * did not come up within 60 s. */
static int h_engine_wait_ready(llm_client *c, pid_t pid)
{
    double t0 = h_now();
    while (h_now() - t0 < 60.0) {
        if (pid == h_engine_pid && h_engine_died())
            return -1;
        /* attached is not enough: a slow start (ASan) can leave the header up but the engine still STARTING,
         * when reservations are refused */
        if (llm_client_attach(c) == LLM_SHM_OK &&
            atomic_load(&llm_client_map(c)->hdr->state) == LLM_ENGINE_READY)
            return 0;
        h_sleep_ms(20);
    }
    return -1;
}

/* Sends sig and reaps the engine (a zombie would still look alive to clients).
 * Returns the wait status; a SIGTERM that does not end it within 60 s is
 * followed by SIGKILL (and -1). */
static int h_engine_stop(pid_t pid, int sig)
{
    if (pid == h_reaped_pid)
        return h_reaped_status;
    if (pid == h_engine_pid)
        h_engine_pid = -1;
    kill(pid, sig);
    double t0 = h_now();
    int st = 0;
    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (h_now() - t0 > 60.0) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        h_sleep_ms(5);
    }
    return st;
}

/* Deterministic PRNG (splitmix64). */
static uint64_t h_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline int h_rand_in(uint64_t *s, int lo, int hi) { return lo + (int)(h_rand(s) % (uint64_t)(hi - lo + 1)); }

/* One request and what came back. */
typedef struct {
    int32_t        prompt[H_MAX_PROMPT];
    int            n_prompt;
    llm_shm_params p;
    int            cancel_after;   /* cancel once this many tokens were read; -1 never */
    int            release_after;  /* let go (release unfinished) after this many tokens; -1 never */
    /* results */
    int32_t        out[H_MAX_OUT];
    int            n_out;
    int            start_rc;       /* llm_client_start's code (OK or a refusal) */
    int            read_rc;        /* a read error (e.g. ENGINE_GONE), else OK */
    int            finish;         /* llm_finish_reason, or -1 when released early */
    int            error;          /* engine error code when finish == ERROR */
    int            cancelled;      /* the client asked to cancel */
} h_request;

/* BOS + n-1 token ids from seed (ids 3..vocab-1: no BOS/EOS inside). */
static inline void h_prompt(h_request *r, int n, uint64_t seed)
{
    r->n_prompt = n;
    r->prompt[0] = H_BOS;
    for (int i = 1; i < n; i++)
        r->prompt[i] = h_rand_in(&seed, 3, H_VOCAB - 1);
}

/* Greedy (temperature 0) or seeded sampling, stopping at EOS, max_tokens. */
static inline void h_params(h_request *r, int max_tokens, float temperature, uint64_t seed)
{
    llm_shm_params_defaults(&r->p);
    r->p.max_tokens = max_tokens;
    r->p.temperature = temperature;
    r->p.top_p = temperature > 0 ? 0.95f : 1.0f;
    r->p.top_k = temperature > 0 ? 40 : 0;
    r->p.seed = seed;
    r->p.n_stop = 1;
    r->p.stop_ids[0] = H_EOS;
    r->cancel_after = -1;
    r->release_after = -1;
}

/* Runs n requests keeping up to conc in flight (NO_SLOT / RING_FULL: retried
 * when one ends). Returns 0 when every request ended, -1 if the 300 s safety
 * cap hit (a hang). */
static int h_run(llm_client *c, h_request *rq, int n, int conc)
{
    typedef struct { int idx; llm_req req; } fl_t;
    fl_t *fl = calloc((size_t)conc, sizeof(*fl));
    for (int i = 0; i < conc; i++)
        fl[i].idx = -1;
    int next = 0, done = 0, rc = 0;
    double t0 = h_now();
    for (int i = 0; i < n; i++) {
        rq[i].n_out = 0;
        rq[i].start_rc = rq[i].read_rc = LLM_SHM_OK;
        rq[i].finish = LLM_FINISH_NONE;
        rq[i].error = 0;
        rq[i].cancelled = 0;
    }
    while (done < n) {
        int progressed = 0;
        for (int k = 0; k < conc && next < n; k++) {
            if (fl[k].idx >= 0)
                continue;
            h_request *r = &rq[next];
            int src = llm_client_start(c, r->prompt, (uint32_t)r->n_prompt, &r->p, (uint64_t)next, &fl[k].req);
            if (src == LLM_SHM_E_NO_SLOT || src == LLM_SHM_E_RING_FULL)
                break; /* wait for one to end */
            progressed = 1;
            if (src != LLM_SHM_OK) {
                r->start_rc = src;
                next++;
                done++;
                continue;
            }
            fl[k].idx = next++;
        }
        for (int k = 0; k < conc; k++) {
            if (fl[k].idx < 0)
                continue;
            h_request *r = &rq[fl[k].idx];
            llm_shm_token t[32];
            llm_req_status st;
            int got = llm_client_read(c, fl[k].req, t, 32, &st);
            if (got < 0) {
                r->read_rc = got;
                llm_client_release(c, fl[k].req);
                fl[k].idx = -1;
                done++;
                progressed = 1;
                continue;
            }
            for (int j = 0; j < got && r->n_out < H_MAX_OUT; j++)
                r->out[r->n_out++] = t[j].id;
            if (got > 0)
                progressed = 1;
            if (st.done) {
                r->finish = (int)st.finish;
                r->error = st.error;
                llm_client_release(c, fl[k].req);
                fl[k].idx = -1;
                done++;
                progressed = 1;
                continue;
            }
            if (r->release_after >= 0 && r->n_out >= r->release_after) {
                r->finish = -1;
                llm_client_release(c, fl[k].req);
                fl[k].idx = -1;
                done++;
                progressed = 1;
                continue;
            }
            if (r->cancel_after >= 0 && r->n_out >= r->cancel_after && !r->cancelled) {
                r->cancelled = 1;
                llm_client_cancel(c, fl[k].req);
            }
        }
        if (!progressed) {
            if (h_now() - t0 > 300.0 || h_engine_died()) {
                rc = -1;
                break;
            }
            llm_client_wait(c, 20);
        }
    }
    for (int k = 0; k < conc; k++)
        if (fl[k].idx >= 0)
            llm_client_release(c, fl[k].req);
    free(fl);
    return rc;
}

/* Out of a, as many as b has: equal? */
static inline int h_same_prefix(const int32_t *a, int na, const int32_t *b, int nb)
{
    return nb <= na && memcmp(a, b, (size_t)nb * sizeof(int32_t)) == 0;
}

/* Client entries in the waiter table that are not FREE. */
static inline int h_waiter_entries(const llm_shm_map *m)
{
    int n = 0;
    for (uint32_t i = 0; i < m->hdr->caps.n_waiters; i++)
        n += LLM_WAITER_STATE(atomic_load(&m->waiters[i].word)) != LLM_WAITER_FREE;
    return n;
}

/* Waits (up to 60 s) until the metrics block shows nothing in use: no slot,
 * no running request, no KV block held, and `waiters` clients attached (in
 * the waiters gauge and in the waiter table).
 * Returns 1 when settled. */
static inline int h_wait_idle(llm_client *c, int waiters)
{
    const llm_shm_map *m = llm_client_map(c);
    if (m == NULL)
        return 0;
    double t0 = h_now();
    while (h_now() - t0 < 60.0) {
        llm_shm_metrics *x = m->metrics;
        if (atomic_load(&x->slots_in_use) == 0 && atomic_load(&x->running) == 0 &&
            atomic_load(&x->kv_blocks_used) == 0 && h_waiter_entries(m) == waiters &&
            atomic_load(&x->waiters) == waiters)
            return 1;
        if (h_engine_died())
            return 0;
        llm_client_check(c);
        h_sleep_ms(10);
    }
    return 0;
}

static inline void h_diag_metrics(llm_client *c)
{
    const llm_shm_map *m = llm_client_map(c);
    if (m == NULL)
        return;
    llm_shm_metrics *x = m->metrics;
    printf("# metrics: slots_in_use %lld running %lld kv_blocks_used %lld kv_blocks_free %lld waiters %lld "
           "submitted %llu finished %llu cancelled %llu failed %llu reclaimed %llu tokens_out %llu\n",
           (long long)atomic_load(&x->slots_in_use), (long long)atomic_load(&x->running),
           (long long)atomic_load(&x->kv_blocks_used), (long long)atomic_load(&x->kv_blocks_free),
           (long long)atomic_load(&x->waiters), (unsigned long long)atomic_load(&x->submitted),
           (unsigned long long)atomic_load(&x->finished), (unsigned long long)atomic_load(&x->cancelled),
           (unsigned long long)atomic_load(&x->failed), (unsigned long long)atomic_load(&x->reclaimed_slots),
           (unsigned long long)atomic_load(&x->tokens_out));
    for (uint32_t i = 0; i < m->hdr->caps.n_waiters; i++) {
        uint64_t w = atomic_load(&m->waiters[i].word);
        if (LLM_WAITER_STATE(w) != LLM_WAITER_FREE)
            printf("# waiter %u: state %u pid %d%s\n", i, LLM_WAITER_STATE(w), (int)LLM_WAITER_PID(w),
                   LLM_WAITER_PID(w) == getpid() ? " (this test)" : "");
    }
}

#endif
