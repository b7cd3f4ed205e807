/* Shared-memory hop benchmark with a no-op model (one token per request, at once).
 *   1. raw submission ring: messages/s, P producer threads, one consumer spinning
 *   2. request throughput: requests/s through the full protocol (reserve, fill,
 *      submit, doorbell, pop, push, finish, wake-up datagram, read, release),
 *      P producer processes with K requests in flight each
 *   3. submit-to-first-token-notification latency, one request at a time (the
 *      engine idles on its futex between requests; the client sleeps in poll)
 * Prints figures; never passes or fails on a time.
 * Build: see shm/README.md (gcc -O2 -Ishm bench/ring_bench.c with every shm .c file, -lpthread)
 * Usage: ring_bench [-p producers] [-k in-flight] [-n requests] [-l latency samples] */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "llm_client.h"
#include "llm_server.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_name[64];
static _Atomic int g_stop;

/* ---- 1. raw ring ---- */
typedef struct { llm_shm_ring *r; uint32_t size; long n; } ring_arg;

static void *ring_producer(void *a)
{
    ring_arg *ra = a;
    for (long i = 0; i < ra->n; i++)
        while (llm_ring_push(ra->r, ra->size, (uint32_t)(i & 0xffff)) != 0)
            ;
    return NULL;
}

static void bench_ring(int producers, long per)
{
    uint32_t size = 1024;
    llm_shm_ring *r = aligned_alloc(64, (sizeof *r + size * 8 + 63) / 64 * 64);
    llm_ring_init(r, size);
    pthread_t th[64];
    ring_arg ra = { r, size, per };
    uint64_t t0 = llm_shm_now_ns();
    for (int i = 0; i < producers; i++)
        pthread_create(&th[i], NULL, ring_producer, &ra);
    long got = 0, want = per * producers;
    while (got < want)
        if (llm_ring_pop(r, size) >= 0)
            got++;
    uint64_t dt = llm_shm_now_ns() - t0;
    for (int i = 0; i < producers; i++)
        pthread_join(th[i], NULL);
    printf("ring: %d producer thread(s), 1 consumer, %ld messages: %.2f M messages/s\n", producers, want,
           (double)want / ((double)dt / 1e9) / 1e6);
    free(r);
}

/* ---- the no-op engine ---- */
static void *engine(void *a)
{
    llm_server *s = a;
    while (!atomic_load(&g_stop)) {
        uint32_t slot;
        int any = 0;
        llm_server_reap(s, 0);
        while (llm_server_pop(s, &slot)) {
            uint32_t n;
            const int32_t *p = llm_server_prompt(s, slot, &n);
            llm_server_push(s, slot, p[0], 0.0f, NULL, 0);
            llm_server_finish(s, slot, LLM_FINISH_LENGTH, 0);
            any = 1;
        }
        if (!any)
            llm_server_wait(s, 100);
    }
    return NULL;
}

/* ---- 2. request throughput, producer processes ---- */
static long producer_proc(long n, int k)
{
    char err[256];
    llm_client *c = llm_client_new(g_name, err, sizeof err);
    if (!c)
        return -1;
    llm_req *rq = calloc((size_t)k, sizeof *rq);
    int *busy = calloc((size_t)k, sizeof *busy);
    llm_shm_params p;
    llm_shm_params_defaults(&p);
    p.max_tokens = 1;
    long started = 0, done = 0;
    while (done < n) {
        int progress = 0;
        for (int i = 0; i < k; i++) {
            if (!busy[i] && started < n) {
                int32_t tok = (int32_t)(started % 500);
                if (llm_client_start(c, &tok, 1, &p, 0, &rq[i]) == 0) {
                    busy[i] = 1;
                    started++;
                    progress = 1;
                }
            }
            if (busy[i]) {
                llm_shm_token t;
                llm_req_status st;
                int r = llm_client_read(c, rq[i], &t, 1, &st);
                if (r < 0)
                    return -1;
                if (st.done) {
                    llm_client_release(c, rq[i]);
                    busy[i] = 0;
                    done++;
                    progress = 1;
                }
            }
        }
        if (!progress)
            llm_client_wait(c, 100);
    }
    free(rq);
    free(busy);
    llm_client_free(c);
    return done;
}

static void bench_requests(int producers, int k, long per)
{
    uint64_t t0 = llm_shm_now_ns();
    pid_t kids[64];
    for (int i = 0; i < producers; i++) {
        kids[i] = fork();
        if (kids[i] == 0)
            _exit(producer_proc(per, k) == per ? 0 : 1);
    }
    int bad = 0;
    for (int i = 0; i < producers; i++) {
        int st;
        waitpid(kids[i], &st, 0);
        bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    uint64_t dt = llm_shm_now_ns() - t0;
    printf("requests: %d producer process(es) x %d in flight, %ld requests (1 token each): %.0f requests/s%s\n",
           producers, k, per * producers, (double)(per * producers) / ((double)dt / 1e9),
           bad ? "  (SOME PRODUCERS FAILED)" : "");
}

/* ---- 3. latency ---- */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void bench_latency(long n)
{
    char err[256];
    llm_client *c = llm_client_new(g_name, err, sizeof err);
    uint64_t *lat = malloc((size_t)n * sizeof *lat);
    llm_shm_params p;
    llm_shm_params_defaults(&p);
    p.max_tokens = 1;
    long got = 0;
    for (long i = 0; i < n; i++) {
        int32_t tok = (int32_t)(i % 500);
        llm_req r;
        usleep(50); /* let the engine go back to sleep on its futex: the full hop each time */
        uint64_t t0 = llm_shm_now_ns();
        if (llm_client_start(c, &tok, 1, &p, 0, &r) != 0)
            continue;
        for (;;) {
            llm_shm_token t;
            llm_req_status st;
            int k = llm_client_read(c, r, &t, 1, &st);
            if (k > 0) {
                lat[got++] = llm_shm_now_ns() - t0;
                break;
            }
            if (k < 0)
                break;
            if (!llm_client_arm(c)) {
                struct pollfd pfd = { llm_client_fd(c), POLLIN, 0 };
                poll(&pfd, 1, 1000);
            }
            llm_client_drain(c);
        }
        llm_client_release(c, r);
    }
    qsort(lat, (size_t)got, sizeof *lat, cmp_u64);
    if (got)
        printf("latency submit -> first token (client woken by datagram, engine woken by futex), %ld samples: "
               "p50 %.1f us, p99 %.1f us, max %.1f us\n",
               got, (double)lat[got / 2] / 1e3, (double)lat[got * 99 / 100] / 1e3, (double)lat[got - 1] / 1e3);
    free(lat);
    llm_client_free(c);
}

int main(int argc, char **argv)
{
    int producers = 2, k = 32;
    long n = 200000, nlat = 20000;
    int opt;
    while ((opt = getopt(argc, argv, "p:k:n:l:")) != -1) {
        switch (opt) {
        case 'p': producers = atoi(optarg); break;
        case 'k': k = atoi(optarg); break;
        case 'n': n = atol(optarg); break;
        case 'l': nlat = atol(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-p producers] [-k in-flight] [-n requests] [-l latency samples]\n", argv[0]);
            return 2;
        }
    }
    if (producers < 1 || producers > 64 || k < 1 || n < 1 || nlat < 1) {
        fprintf(stderr, "ring_bench: -p 1..64, -k >= 1, -n >= 1, -l >= 1\n");
        return 2;
    }
    printf("ring_bench: %ld cores online\n", sysconf(_SC_NPROCESSORS_ONLN));
    bench_ring(1, n * 5);
    bench_ring(producers, n * 5 / producers);

    snprintf(g_name, sizeof g_name, "ring-bench-%d", (int)getpid());
    llm_server_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.name = g_name;
    cfg.caps = (llm_shm_caps){ .n_slots = (uint32_t)(producers * k + 8), .ring_size = 1024, .max_prompt = 16,
                               .stream_cap = 16, .max_top = 0, .n_waiters = 72 };
    if (cfg.caps.ring_size < cfg.caps.n_slots) {
        uint32_t rs = 1024;
        while (rs < cfg.caps.n_slots)
            rs <<= 1;
        cfg.caps.ring_size = rs;
    }
    snprintf(cfg.model.name, sizeof cfg.model.name, "noop");
    char err[256];
    llm_server *s = llm_server_create(&cfg, err, sizeof err);
    if (!s) {
        fprintf(stderr, "ring_bench: %s\n", err);
        return 1;
    }
    llm_server_set_state(s, LLM_ENGINE_READY);
    pthread_t eng;
    pthread_create(&eng, NULL, engine, s);
    bench_requests(1, k, n);
    bench_requests(producers, k, n / producers);
    bench_latency(nlat);
    llm_shm_metrics *m = llm_server_map(s)->metrics;
    printf("engine: %llu requests finished, %llu doorbell futex wakes, %llu wake-up datagrams; "
           "engine-side ttft p50 <= %llu us, p99 <= %llu us (log buckets)\n",
           (unsigned long long)atomic_load(&m->finished), (unsigned long long)atomic_load(&m->doorbell_wakes),
           (unsigned long long)atomic_load(&m->notifies_sent),
           (unsigned long long)llm_hist_quantile(&m->ttft, 0.5) / 1000,
           (unsigned long long)llm_hist_quantile(&m->ttft, 0.99) / 1000);
    atomic_store(&g_stop, 1);
    atomic_fetch_add(&llm_server_map(s)->hdr->doorbell, 1);
    llm_futex_wake(&llm_server_map(s)->hdr->doorbell, 1);
    pthread_join(eng, NULL);
    llm_server_destroy(s);
    return 0;
}
