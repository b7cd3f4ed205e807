/* shm stress: 5,000 requests with random prompt lengths, token budgets, stop
 * ids and client-side cancellations / early releases from 3 producer threads,
 * plus a client process SIGKILLed mid-stream, through the no-op engine. Then:
 * every token was right, no slot, stream or KV block leaked (metrics block),
 * the counters add up, and the engine still serves. */
#include "tap.h"
#include "llm_client.h"
#include "llm_server.h"
#include "test_shm_engine.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_REQ      5000
#define N_PROD     3
#define MAX_PROMPT 64
#define VICTIM_REQ 6
#define IN_FLIGHT  6 /* requests each producer drives at once */

static char g_name[64];
static char err[512];

typedef struct {
    int      n;
    unsigned seed;
    int      bad;          /* wrong tokens / finish reasons */
    int      errors;       /* unexpected return codes */
    int      no_slot, ring_full; /* refusals, retried later */
    int      cancelled, released, completed;
} prod;

enum { MODE_FULL, MODE_CANCEL_EARLY, MODE_CANCEL_MID, MODE_RELEASE_EARLY, MODE_RELEASE_MID };

/* One request a producer is driving, like one connection of an nginx worker. */
typedef struct {
    int            busy;
    llm_req        r;
    int32_t        prompt[MAX_PROMPT];
    uint32_t       np;
    llm_shm_params par;
    int            stop_at;   /* index of the token that is a stop id, or -1 */
    int            mode, mid, cancelled;
    uint32_t       got;
} job;

static int pick_mode(unsigned *seed)
{
    int r = (int)(rand_r(seed) % 100);
    return r < 10 ? MODE_CANCEL_EARLY : r < 20 ? MODE_CANCEL_MID : r < 25 ? MODE_RELEASE_EARLY
         : r < 30 ? MODE_RELEASE_MID : MODE_FULL;
}

static void job_make(prod *p, job *j)
{
    j->np = 1 + (uint32_t)(rand_r(&p->seed) % MAX_PROMPT);
    for (uint32_t k = 0; k < j->np; k++)
        j->prompt[k] = (int32_t)(rand_r(&p->seed) % 500);
    llm_shm_params_defaults(&j->par);
    j->par.max_tokens = 1 + (int)(rand_r(&p->seed) % 40);
    j->par.n_logprobs = (int)(rand_r(&p->seed) % 3);
    j->stop_at = -1;
    if (rand_r(&p->seed) % 10 == 0) {
        j->stop_at = (int)(rand_r(&p->seed) % (unsigned)j->par.max_tokens);
        j->par.n_stop = 1;
        j->par.stop_ids[0] = noop_token(j->prompt, j->np, (uint32_t)j->stop_at);
    }
    j->mode = pick_mode(&p->seed);
    j->mid = (int)(rand_r(&p->seed) % (unsigned)j->par.max_tokens);
    j->cancelled = 0;
    j->got = 0;
}

/* Start a made job: 1 started, 0 refused (retry later), -1 error. */
static int job_start(llm_client *c, prod *p, job *j, int i)
{
    int rc = llm_client_start(c, j->prompt, j->np, &j->par, (uint64_t)i, &j->r);
    if (rc == LLM_SHM_E_NO_SLOT || rc == LLM_SHM_E_RING_FULL) {
        *(rc == LLM_SHM_E_NO_SLOT ? &p->no_slot : &p->ring_full) += 1;
        return 0;
    }
    if (rc != 0) {
        p->errors++;
        diag("start: %s", llm_shm_strerror(rc));
        return -1;
    }
    j->busy = 1;
    if (j->mode == MODE_RELEASE_EARLY) {
        p->released++;
        p->errors += llm_client_release(c, j->r) != 0;
        j->busy = 0;
    } else if (j->mode == MODE_CANCEL_EARLY) {
        llm_client_cancel(c, j->r);
        j->cancelled = 1;
    }
    return 1;
}

/* Read what is there; returns 1 if anything happened. */
static int job_poll(llm_client *c, prod *p, job *j)
{
    llm_shm_token tk[8];
    llm_req_status st;
    int k = llm_client_read(c, j->r, tk, 8, &st);
    if (k < 0) {
        p->errors++;
        diag("read: %s", llm_shm_strerror(k));
        llm_client_release(c, j->r);
        j->busy = 0;
        return 1;
    }
    for (int t = 0; t < k; t++, j->got++) {
        p->bad += tk[t].id != noop_token(j->prompt, j->np, j->got);
        p->bad += tk[t].n_top != (uint32_t)j->par.n_logprobs;
    }
    if (st.done) {
        uint32_t want = j->stop_at >= 0 ? (uint32_t)j->stop_at + 1 : (uint32_t)j->par.max_tokens;
        llm_finish_reason wf = j->stop_at >= 0 ? LLM_FINISH_STOP : LLM_FINISH_LENGTH;
        if (j->cancelled && st.finish == LLM_FINISH_CANCELLED)
            p->bad += j->got > want; /* a prefix */
        else
            p->bad += st.finish != wf || j->got != want;
        p->cancelled += st.finish == LLM_FINISH_CANCELLED;
        p->completed++;
        p->errors += llm_client_release(c, j->r) != 0;
        j->busy = 0;
        return 1;
    }
    if (!j->cancelled && (int)j->got > j->mid) {
        if (j->mode == MODE_CANCEL_MID) {
            llm_client_cancel(c, j->r);
            j->cancelled = 1;
        } else if (j->mode == MODE_RELEASE_MID) {
            p->released++;
            p->errors += llm_client_release(c, j->r) != 0;
            j->busy = 0;
            return 1;
        }
    }
    return k > 0;
}

static void *producer(void *a)
{
    prod *p = a;
    llm_client *c = llm_client_new(g_name, err, sizeof err);
    if (!c) {
        p->errors++;
        return NULL;
    }
    job jobs[IN_FLIGHT];
    memset(jobs, 0, sizeof jobs);
    int made = 0, waiting[IN_FLIGHT] = { 0 }; /* waiting: made, not yet accepted */
    for (;;) {
        int progress = 0, active = 0;
        for (int k = 0; k < IN_FLIGHT; k++) {
            job *j = &jobs[k];
            if (!j->busy && !waiting[k] && made < p->n) {
                job_make(p, j);
                waiting[k] = ++made;
            }
            if (waiting[k]) {
                int rc = job_start(c, p, j, waiting[k]);
                if (rc < 0)
                    goto out;
                if (rc > 0) {
                    waiting[k] = 0;
                    progress++;
                }
            }
            if (j->busy)
                progress += job_poll(c, p, j);
            active += j->busy || waiting[k];
        }
        if (!active && made >= p->n)
            break;
        if (!progress)
            llm_client_wait(c, 20);
    }
out:
    for (int k = 0; k < IN_FLIGHT; k++)
        if (jobs[k].busy)
            llm_client_release(c, jobs[k].r);
    p->n = made;
    llm_client_free(c);
    return NULL;
}

/* The victim: starts long requests, reads a few tokens of each, reports, then waits to be killed. */
static void victim(int wfd)
{
    llm_client *c = llm_client_new(g_name, err, sizeof err);
    llm_req r[VICTIM_REQ];
    llm_shm_params par;
    llm_shm_params_defaults(&par);
    par.max_tokens = 1000;
    for (int i = 0; i < VICTIM_REQ; i++) {
        int32_t prompt[3] = { i, i + 1, i + 2 };
        int rc;
        while ((rc = llm_client_start(c, prompt, 3, &par, 900 + (uint64_t)i, &r[i])) == LLM_SHM_E_NOT_READY ||
               rc == LLM_SHM_E_NO_SLOT || rc == LLM_SHM_E_RING_FULL)
            usleep(1000);
        if (rc != 0)
            _exit(1);
    }
    int got[VICTIM_REQ] = { 0 }, ready = 0;
    while (ready < VICTIM_REQ) {
        ready = 0;
        for (int i = 0; i < VICTIM_REQ; i++) {
            llm_shm_token tk[2];
            if (got[i] < 3) {
                int k = llm_client_read(c, r[i], tk, 2, NULL);
                if (k < 0)
                    _exit(2);
                got[i] += k;
            }
            ready += got[i] >= 3;
        }
        if (ready < VICTIM_REQ)
            llm_client_wait(c, 20);
    }
    char b = 1;
    if (write(wfd, &b, 1) != 1)
        _exit(3);
    for (;;)
        pause(); /* mid-stream: its streams fill, the engine stalls those requests */
}

int main(void)
{
    snprintf(g_name, sizeof g_name, "test-shm-stress-%d", (int)getpid());
    llm_server_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.name = g_name;
    cfg.caps = (llm_shm_caps){ .n_slots = 16, .ring_size = 8, .max_prompt = MAX_PROMPT, .stream_cap = 8,
                               .max_top = 4, .n_waiters = 16 };
    snprintf(cfg.model.name, sizeof cfg.model.name, "noop");
    cfg.reap_interval_ns = 10000000; /* 10 ms */
    llm_server *s = llm_server_create(&cfg, err, sizeof err);
    ok(s != NULL, "engine segment created");
    if (!s) {
        diag("%s", err);
        return done_testing();
    }
    llm_shm_metrics *m = llm_server_map(s)->metrics;

    int pfd[2];
    if (pipe(pfd) != 0)
        return 1;
    pid_t kid = fork(); /* before any thread */
    if (kid == 0) {
        close(pfd[0]);
        victim(pfd[1]);
    }
    close(pfd[1]);

    noop_engine e;
    noop_init(&e, s, 6, 4096);
    pthread_t eng, th[N_PROD];
    pthread_create(&eng, NULL, noop_thread, &e);
    llm_server_set_state(s, LLM_ENGINE_READY);

    char b = 0;
    ok(read(pfd[0], &b, 1) == 1 && b == 1, "victim client is mid-stream on %d requests", VICTIM_REQ);
    close(pfd[0]);

    prod ps[N_PROD];
    for (int i = 0; i < N_PROD; i++) {
        memset(&ps[i], 0, sizeof ps[i]);
        ps[i].n = N_REQ / N_PROD + (i < N_REQ % N_PROD);
        ps[i].seed = 7u + 1000u * (unsigned)i;
        pthread_create(&th[i], NULL, producer, &ps[i]);
    }
    kill(kid, SIGKILL); /* while the producers run */
    int st;
    waitpid(kid, &st, 0);
    ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "victim killed with SIGKILL");

    prod tot;
    memset(&tot, 0, sizeof tot);
    int n_req = 0;
    for (int i = 0; i < N_PROD; i++) {
        pthread_join(th[i], NULL);
        n_req += ps[i].n;
        tot.bad += ps[i].bad;
        tot.errors += ps[i].errors;
        tot.no_slot += ps[i].no_slot;
        tot.ring_full += ps[i].ring_full;
        tot.cancelled += ps[i].cancelled;
        tot.released += ps[i].released;
        tot.completed += ps[i].completed;
    }
    is_int(n_req, N_REQ, "%d requests issued", N_REQ);
    is_int(tot.errors, 0, "no unexpected error codes");
    is_int(tot.bad, 0, "every token and finish reason right");
    diag("completed %d (cancelled %d), released early %d, refused and retried: no slot %d, ring full %d",
         tot.completed, tot.cancelled, tot.released, tot.no_slot, tot.ring_full);
    ok(tot.cancelled > 0 && tot.released > 0, "cancellations and early releases happened");
    ok(atomic_load(&m->rejected_no_slot) == (uint64_t)tot.no_slot &&
           atomic_load(&m->rejected_ring_full) == (uint64_t)tot.ring_full,
       "metrics count the refusals");

    /* The engine drains what was let go and reaps the victim; wait (bounded) for it. */
    for (int i = 0; i < 10000 && (atomic_load(&m->slots_in_use) != 0 || atomic_load(&m->waiters) != 0); i++)
        usleep(1000);

    /* still serving */
    llm_client *c = llm_client_new(g_name, err, sizeof err);
    int32_t prompt[4] = { 9, 8, 7, 6 };
    llm_shm_params par;
    llm_shm_params_defaults(&par);
    par.max_tokens = 5;
    llm_req r;
    is_int(llm_client_start(c, prompt, 4, &par, 1, &r), 0, "a new request after the storm");
    int got = 0, good = 1;
    llm_req_status rs = { 0 };
    while (!rs.done) {
        llm_shm_token tk[8];
        int k = llm_client_read(c, r, tk, 8, &rs);
        if (k < 0)
            break;
        for (int j = 0; j < k; j++, got++)
            good &= tk[j].id == noop_token(prompt, 4, (uint32_t)got);
        if (k == 0 && !rs.done)
            llm_client_wait(c, 20);
    }
    ok(rs.done && got == 5 && good && rs.finish == LLM_FINISH_LENGTH, "engine still serves correctly");
    llm_client_release(c, r);
    llm_client_free(c);

    atomic_store(&e.stop, 1);
    pthread_join(eng, NULL);
    llm_server_reap(s, 1);
    while (noop_step(&e)) /* anything the last reap cancelled */
        ;

    int free_all = 1;
    for (uint32_t i = 0; i < cfg.caps.n_slots; i++)
        free_all &= atomic_load(&llm_shm_slot_at(llm_server_map(s), i)->word) == LLM_SLOT_FREE;
    ok(free_all, "every slot FREE");
    is_int(atomic_load(&m->slots_in_use), 0, "metrics: slots in use 0");
    is_int(atomic_load(&m->running), 0, "metrics: running 0");
    is_int(atomic_load(&m->kv_blocks_used), 0, "metrics: KV blocks used 0");
    is_int(atomic_load(&m->kv_blocks_free), 4096, "metrics: all KV blocks free");
    is_int(atomic_load(&m->waiters), 0, "metrics: no waiter left (victim reaped)");
    ok(atomic_load(&m->reclaimed_slots) >= VICTIM_REQ, "victim's %d slots reclaimed (%llu)", VICTIM_REQ,
       (unsigned long long)atomic_load(&m->reclaimed_slots));
    uint64_t sub = atomic_load(&m->submitted), fin = atomic_load(&m->finished), can = atomic_load(&m->cancelled),
             fail = atomic_load(&m->failed);
    is_int(sub, N_REQ + VICTIM_REQ + 1, "submitted counted");
    is_int(sub, fin + can + fail, "submitted = finished + cancelled + failed");
    is_int(fail, 0, "nothing failed");
    ok(llm_ring_depth(llm_server_map(s)->ring) == 0, "ring empty");
    diag("finished %llu cancelled %llu reclaimed %llu tokens out %llu steps %llu; ttft p50 <= %llu us, "
         "p99 <= %llu us", (unsigned long long)fin, (unsigned long long)can,
         (unsigned long long)atomic_load(&m->reclaimed_slots), (unsigned long long)atomic_load(&m->tokens_out),
         (unsigned long long)e.steps, (unsigned long long)llm_hist_quantile(&m->ttft, 0.5) / 1000,
         (unsigned long long)llm_hist_quantile(&m->ttft, 0.99) / 1000);
    noop_fini(&e);
    llm_server_destroy(s);
    return done_testing();
}
