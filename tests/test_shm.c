/* shm protocol: layout validation, ring, request life cycle, refusals,
 * cancellation, stream back-pressure, wake-ups, multi-producer (threads and
 * processes), engine restart / death, reclaiming the slots of a killed client. */
#include "tap.h"
#include "llm_client.h"
#include "llm_server.h"
#include "test_shm_engine.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_name[64];
static char err[512];

static llm_server_config cfg_of(uint32_t n_slots, uint32_t ring, uint32_t max_prompt, uint32_t stream)
{
    llm_server_config c;
    memset(&c, 0, sizeof c);
    c.name = g_name;
    c.caps = (llm_shm_caps){ .n_slots = n_slots, .ring_size = ring, .max_prompt = max_prompt,
                             .stream_cap = stream, .max_top = 4, .n_waiters = 16 };
    snprintf(c.model.name, sizeof c.model.name, "noop");
    c.model.vocab_size = 512;
    c.model.ctx_len = 256;
    c.model.bos_id = 1;
    c.model.eos_id = 2;
    c.model.n_eog = 1;
    c.model.eog_ids[0] = 2;
    return c;
}

static llm_server *server(uint32_t n_slots, uint32_t ring, uint32_t max_prompt, uint32_t stream)
{
    llm_server_config c = cfg_of(n_slots, ring, max_prompt, stream);
    llm_server *s = llm_server_create(&c, err, sizeof err);
    if (!s)
        diag("server: %s", err);
    else
        llm_server_set_state(s, LLM_ENGINE_READY);
    return s;
}

static int all_free(llm_server *s)
{
    llm_shm_map *m = llm_server_map(s);
    for (uint32_t i = 0; i < m->hdr->caps.n_slots; i++)
        if (atomic_load(&llm_shm_slot_at(m, i)->word) != LLM_SLOT_FREE)
            return 0;
    return atomic_load(&m->metrics->slots_in_use) == 0;
}

static void test_layout(void)
{
    llm_shm_header h;
    llm_shm_caps c = { 8, 8, 16, 16, 4, 4 };
    ok(llm_shm_layout(&c, &h, err, sizeof err) == 0, "layout of sane capacities");
    ok(h.off_slots % 4096 == 0 && h.slot_stride % 64 == 0, "slots page- and line-aligned");
    c.ring_size = 6;
    ok(llm_shm_layout(&c, &h, err, sizeof err) < 0, "ring size must be a power of two: %s", err);
    c.ring_size = 8;
    c.stream_cap = 1;
    ok(llm_shm_layout(&c, &h, err, sizeof err) < 0, "stream_cap 1 refused");
    c.stream_cap = 16;
    c.max_top = 21;
    ok(llm_shm_layout(&c, &h, err, sizeof err) < 0, "max_top > 20 refused");
    char p[80];
    ok(llm_shm_path("a/b", p, sizeof p) < 0 && llm_shm_path("", p, sizeof p) < 0, "bad names refused");
    ok(llm_shm_path("x", p, sizeof p) == 0 && strcmp(p, "/llm-x") == 0, "name maps to /llm-x");

    /* start time of a process, field 22 of /proc/<pid>/stat (comm may hold spaces and parens) */
    char buf[1024] = "";
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f))
            buf[0] = 0;
        fclose(f);
    }
    char *q = strrchr(buf, ')');
    unsigned long long want = 0;
    if (q)
        sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &want);
    ok(want != 0 && llm_shm_proc_starttime(getpid()) == want, "process start time read from /proc (%llu)", want);
    ok(llm_shm_pid_alive(getpid()) && !llm_shm_pid_alive(-1), "pid liveness");

    llm_shm_map m;
    is_int(llm_shm_open_map(g_name, &m, err, sizeof err), LLM_SHM_E_NOENT, "no segment: NOENT");
    /* a foreign object under our name is refused, not trusted */
    char path[80];
    llm_shm_path(g_name, path, sizeof path);
    int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    ok(fd >= 0 && ftruncate(fd, 65536) == 0, "made a junk segment");
    unsigned char *junk = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    memset(junk, 0xAB, 65536);
    munmap(junk, 65536);
    close(fd);
    is_int(llm_shm_open_map(g_name, &m, err, sizeof err), LLM_SHM_E_BADSEG, "junk segment: BADSEG (%s)", err);
    llm_client *cl = llm_client_new(g_name, err, sizeof err);
    is_int(llm_client_attach(cl), LLM_SHM_E_BADSEG, "client refuses junk");
    llm_client_free(cl);
    shm_unlink(path);
}

static void test_ring(void)
{
    uint32_t size = 8;
    llm_shm_ring *r = calloc(1, sizeof *r + size * 8);
    llm_ring_init(r, size);
    is_int(llm_ring_pop(r, size), -1, "empty ring pops nothing");
    int okc = 0;
    for (uint32_t i = 0; i < size; i++)
        okc += llm_ring_push(r, size, 100 + i) == 0;
    is_int(okc, size, "fills to capacity");
    is_int(llm_ring_push(r, size, 1), LLM_SHM_E_RING_FULL, "full ring refuses at once");
    is_int(llm_ring_depth(r), size, "depth = size");
    int order = 1;
    for (uint32_t i = 0; i < size; i++)
        order &= llm_ring_pop(r, size) == 100 + i;
    ok(order, "FIFO order");
    /* many laps */
    int laps_ok = 1;
    for (uint32_t i = 0; i < 10000; i++) {
        laps_ok &= llm_ring_push(r, size, i % 5000) == 0 && llm_ring_push(r, size, (i + 1) % 5000) == 0;
        laps_ok &= llm_ring_pop(r, size) == i % 5000 && llm_ring_pop(r, size) == (i + 1) % 5000;
    }
    ok(laps_ok, "20000 pushes and pops over many laps");
    /* A producer killed after claiming its cell but before moving head: simulate the claim. */
    uint64_t p = atomic_load(&r->head);
    atomic_store(&r->cell[p & (size - 1)], ((p + 1) << 24) | 42);
    ok(llm_ring_ready(r, size), "claimed cell is ready for the consumer even though head lags");
    is_int(llm_ring_push(r, size, 43), 0, "next producer helps head past the dead one's cell");
    ok(llm_ring_contains(r, size, 42) && llm_ring_contains(r, size, 43), "both queued");
    ok(llm_ring_pop(r, size) == 42 && llm_ring_pop(r, size) == 43, "both delivered in order");
    free(r);
}

static void test_life_cycle(void)
{
    llm_client *c = llm_client_new(g_name, err, sizeof err);
    ok(c != NULL, "client created without an engine");
    llm_req r;
    is_int(llm_client_reserve(c, &r), LLM_SHM_E_NOENT, "no engine: NOENT");

    llm_server_config cfg = cfg_of(4, 4, 32, 8);
    llm_server *s = llm_server_create(&cfg, err, sizeof err);
    ok(s != NULL, "server created");
    is_int(llm_client_reserve(c, &r), LLM_SHM_E_NOT_READY, "engine starting: NOT_READY");
    llm_server_set_state(s, LLM_ENGINE_READY);
    const llm_shm_map *m = llm_client_map(c);
    ok(m && strcmp(m->hdr->model.name, "noop") == 0 && m->hdr->model.vocab_size == 512, "model description visible");
    is_int(llm_client_generation(c), llm_server_generation(s), "same generation");

    int32_t prompt[5] = { 1, 10, 11, 12, 13 };
    llm_shm_params p;
    llm_shm_params_defaults(&p);
    p.max_tokens = 3;
    p.n_logprobs = 2;
    is_int(llm_client_start(c, prompt, 5, &p, 77, &r), 0, "request submitted");
    is_int(llm_server_wait(s, 0), 1, "engine sees a submission");
    uint32_t slot = 99;
    is_int(llm_server_pop(s, &slot), 1, "engine pops it");
    ok(slot == r.slot, "the client's slot");
    uint32_t np;
    const int32_t *pp = llm_server_prompt(s, slot, &np);
    ok(np == 5 && memcmp(pp, prompt, sizeof prompt) == 0, "prompt arrives intact");
    ok(llm_server_params(s, slot)->max_tokens == 3 && llm_server_tag(s, slot) == 77, "params and tag arrive");
    is_int(llm_server_pop(s, &slot), 0, "ring now empty");

    llm_shm_token tk[8];
    llm_req_status st;
    is_int(llm_client_read(c, r, tk, 8, &st), 0, "nothing to read yet");
    ok(!st.done, "not done");
    ok(llm_client_arm(c) == 0, "armed: nothing pending");
    llm_shm_logprob top[2] = { { 5, -0.1f }, { 6, -2.0f } };
    is_int(llm_server_push(s, slot, 5, -0.1f, top, 2), 0, "push token 1");
    is_int(llm_server_push(s, slot, 6, -0.2f, NULL, 0), 0, "push token 2");
    struct pollfd pfd = { llm_client_fd(c), POLLIN, 0 };
    ok(poll(&pfd, 1, 5000) == 1, "client fd readable after a push");
    is_int(llm_client_drain(c), 1, "one datagram for two pushes (coalesced)");
    is_int(llm_client_read(c, r, tk, 1, &st), 1, "read one (max 1)");
    ok(tk[0].id == 5 && tk[0].n_top == 2 && tk[0].top[1].id == 6 && tk[0].top[1].logprob == -2.0f,
       "token with top logprobs");
    is_int(llm_server_finish(s, slot, LLM_FINISH_LENGTH, 0), 0, "engine finishes");
    is_int(llm_client_read(c, r, tk, 8, &st), 1, "rest of the stream");
    ok(tk[0].id == 6 && st.done && st.finish == LLM_FINISH_LENGTH && st.n_generated == 2, "done, length");
    is_int(llm_client_release(c, r), 0, "release");
    is_int(llm_client_read(c, r, tk, 8, &st), LLM_SHM_E_INVAL, "released handle refused");
    ok(all_free(s), "every slot free again");
    llm_shm_metrics *mt = llm_server_map(s)->metrics;
    ok(atomic_load(&mt->submitted) == 1 && atomic_load(&mt->finished) == 1 && atomic_load(&mt->tokens_out) == 2 &&
       atomic_load(&mt->tokens_in) == 5 && atomic_load(&mt->ttft.count) == 1, "metrics counted");

    /* refusals */
    int32_t big[40] = { 1 };
    is_int(llm_client_start(c, big, 40, &p, 0, &r), LLM_SHM_E_TOO_LONG, "prompt over slot capacity refused");
    p.n_logprobs = 9;
    is_int(llm_client_start(c, prompt, 5, &p, 0, &r), LLM_SHM_E_INVAL, "n_logprobs over max_top refused");
    p.n_logprobs = 0;
    llm_req rs[5];
    int n_ok = 0;
    for (int i = 0; i < 4; i++)
        n_ok += llm_client_reserve(c, &rs[i]) == 0;
    is_int(n_ok, 4, "reserved all four slots");
    is_int(llm_client_reserve(c, &rs[4]), LLM_SHM_E_NO_SLOT, "fifth: NO_SLOT at once");
    for (int i = 0; i < 4; i++)
        llm_client_release(c, rs[i]);
    ok(all_free(s) && atomic_load(&mt->rejected_no_slot) == 1, "released; rejection counted");
    llm_client_free(c);
    llm_server_reap(s, 1);
    is_int(atomic_load(&mt->waiters), 0, "detached client's waiter reaped");
    llm_server_destroy(s);
}

static void test_ring_full_and_cancel(void)
{
    llm_server *s = server(8, 2, 16, 4);
    llm_client *c = llm_client_new(g_name, err, sizeof err);
    int32_t prompt[3] = { 3, 4, 5 };
    llm_shm_params p;
    llm_shm_params_defaults(&p);
    p.max_tokens = 100;
    llm_req r[4];
    is_int(llm_client_start(c, prompt, 3, &p, 1, &r[0]), 0, "submit 1");
    is_int(llm_client_start(c, prompt, 3, &p, 2, &r[1]), 0, "submit 2");
    is_int(llm_client_reserve(c, &r[2]), 0, "reserve 3");
    is_int(llm_client_fill(c, r[2], prompt, 3, &p, 3), 0, "fill 3");
    is_int(llm_client_submit(c, r[2]), LLM_SHM_E_RING_FULL, "ring of 2 full: RING_FULL at once");
    llm_shm_metrics *mt = llm_server_map(s)->metrics;
    is_int(atomic_load(&mt->rejected_ring_full), 1, "counted");

    /* cancel while queued: the engine ends it at pop, the client sees CANCELLED */
    is_int(llm_client_cancel(c, r[0]), 0, "cancel queued request");
    uint32_t slot;
    is_int(llm_server_pop(s, &slot), 1, "pop skips the cancelled one");
    ok(slot == r[1].slot, "and returns the next");
    llm_shm_token tk[8];
    llm_req_status st;
    is_int(llm_client_read(c, r[0], tk, 8, &st), 0, "cancelled request has no tokens");
    ok(st.done && st.finish == LLM_FINISH_CANCELLED, "finish reason cancelled");
    llm_client_release(c, r[0]);
    is_int(llm_client_submit(c, r[2]), 0, "room again: submit 3");

    /* stream back-pressure */
    int pushed = 0;
    while (llm_server_push(s, slot, 9, 0, NULL, 0) == 0)
        pushed++;
    is_int(pushed, 4, "stream of 4 fills");
    is_int(llm_server_push(s, slot, 9, 0, NULL, 0), LLM_SHM_E_STREAM_FULL, "then STREAM_FULL");
    is_int(llm_client_read(c, r[1], tk, 2, &st), 2, "client reads 2");
    is_int(llm_server_stream_space(s, slot), 2, "2 free again");
    /* cancel while running */
    ok(!llm_server_cancelled(s, slot), "not cancelled yet");
    llm_client_cancel(c, r[1]);
    ok(llm_server_cancelled(s, slot), "engine sees the cancel flag");
    llm_server_finish(s, slot, LLM_FINISH_CANCELLED, 0);
    is_int(llm_client_read(c, r[1], tk, 8, &st), 2, "tokens made before the cancel still readable");
    ok(st.done && st.finish == LLM_FINISH_CANCELLED, "then cancelled");
    llm_client_release(c, r[1]);

    /* let go of a running request without reading: the engine frees it when it ends */
    is_int(llm_server_pop(s, &slot), 1, "pop request 3");
    llm_server_push(s, slot, 1, 0, NULL, 0);
    is_int(llm_client_release(c, r[2]), 0, "release while running");
    ok(llm_server_cancelled(s, slot), "engine sees it as cancelled");
    ok(!all_free(s), "slot still held by the engine");
    llm_server_finish(s, slot, LLM_FINISH_CANCELLED, 0);
    /* and a queued one released before the engine looks */
    is_int(llm_client_start(c, prompt, 3, &p, 4, &r[3]), 0, "submit 4");
    llm_client_release(c, r[3]);
    is_int(llm_server_pop(s, &slot), 0, "pop frees the released submission and finds nothing");
    ok(all_free(s), "all slots free");
    ok(atomic_load(&mt->submitted) == atomic_load(&mt->finished) + atomic_load(&mt->cancelled) +
                                             atomic_load(&mt->failed),
       "submitted = finished + cancelled + failed");
    llm_client_free(c);
    llm_server_destroy(s);
}

/* ---- multi-producer: threads, then processes, against the no-op engine ---- */

/* Run n requests through c, checking every token; 0 when all correct. */
static int producer_run(llm_client *c, int n, unsigned seed)
{
    int bad = 0;
    llm_shm_params p;
    llm_shm_params_defaults(&p);
    for (int i = 0; i < n; i++) {
        int32_t prompt[8];
        uint32_t np = 1 + (uint32_t)(rand_r(&seed) % 8);
        for (uint32_t k = 0; k < np; k++)
            prompt[k] = (int32_t)(rand_r(&seed) % 500);
        p.max_tokens = 1 + (int)(rand_r(&seed) % 12);
        llm_req r;
        int rc;
        while ((rc = llm_client_start(c, prompt, np, &p, (uint64_t)i, &r)) == LLM_SHM_E_NO_SLOT ||
               rc == LLM_SHM_E_RING_FULL)
            llm_client_wait(c, 5);
        if (rc != 0)
            return 1000 + -rc;
        uint32_t got = 0;
        for (;;) {
            llm_shm_token tk[16];
            llm_req_status st;
            int k = llm_client_read(c, r, tk, 16, &st);
            if (k < 0)
                return 2000 + -k;
            for (int j = 0; j < k; j++, got++)
                bad += tk[j].id != noop_token(prompt, np, got);
            if (st.done) {
                bad += st.finish != LLM_FINISH_LENGTH || got != (uint32_t)p.max_tokens;
                break;
            }
            if (k == 0)
                llm_client_wait(c, 50);
        }
        llm_client_release(c, r);
    }
    return bad;
}

typedef struct { int n; unsigned seed; int result; } prod_arg;

static void *producer_thread(void *a)
{
    prod_arg *pa = a;
    llm_client *c = llm_client_new(g_name, err, sizeof err);
    pa->result = c ? producer_run(c, pa->n, pa->seed) : -1;
    llm_client_free(c);
    return NULL;
}

static void test_mpsc(void)
{
    llm_server *s = server(16, 8, 8, 4);
    noop_engine e;
    noop_init(&e, s, 6, 1000);
    pthread_t eng, th[4];
    pthread_create(&eng, NULL, noop_thread, &e);
    prod_arg pa[4];
    for (int i = 0; i < 4; i++) {
        pa[i] = (prod_arg){ 300, 1234u + (unsigned)i, -1 };
        pthread_create(&th[i], NULL, producer_thread, &pa[i]);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += pa[i].result != 0;
        if (pa[i].result)
            diag("producer %d: %d", i, pa[i].result);
    }
    ok(bad == 0, "4 producer threads x 300 requests, every token right");
    atomic_store(&e.stop, 1);
    llm_server_wait(s, 0);
    pthread_join(eng, NULL);
    llm_shm_metrics *mt = llm_server_map(s)->metrics;
    is_int(atomic_load(&mt->finished), 1200, "1200 finished");
    ok(all_free(s) && e.kv_used == 0 && e.n_run == 0, "no slot or KV block left");

    /* processes: children attach on their own, the engine runs in this thread */
    pid_t kids[3];
    for (int i = 0; i < 3; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            llm_client *c = llm_client_new(g_name, err, sizeof err);
            int r = c ? producer_run(c, 200, 99u + (unsigned)i) : 1;
            llm_client_free(c);
            _exit(r ? 1 : 0);
        }
    }
    int alive = 3, status_bad = 0;
    while (alive) {
        if (!noop_step(&e))
            llm_server_wait(s, 5);
        int stt;
        pid_t w = waitpid(-1, &stt, WNOHANG);
        if (w > 0) {
            alive--;
            status_bad += !(WIFEXITED(stt) && WEXITSTATUS(stt) == 0);
        }
    }
    is_int(status_bad, 0, "3 producer processes x 200 requests, every token right");
    is_int(atomic_load(&mt->finished), 1800, "1800 finished in all");
    llm_server_reap(s, 1);
    ok(all_free(s) && e.kv_used == 0, "nothing leaked");
    is_int(atomic_load(&mt->waiters), 0, "every waiter gone");
    noop_fini(&e);
    llm_server_destroy(s);
}

/* ---- restart and death of the engine ---- */
static void test_generation(void)
{
    llm_server *s1 = server(4, 4, 8, 8);
    llm_client *c = llm_client_new(g_name, err, sizeof err);
    int32_t prompt[2] = { 5, 6 };
    llm_shm_params p;
    llm_shm_params_defaults(&p);
    llm_req r, r2;
    is_int(llm_client_start(c, prompt, 2, &p, 1, &r), 0, "request on generation 1");
    uint64_t g1 = llm_client_generation(c);
    uint32_t slot;
    llm_server_pop(s1, &slot);
    llm_server_push(s1, slot, 11, 0, NULL, 0);

    llm_shm_token tk[4];
    llm_req_status st;
    is_int(llm_client_read(c, r, tk, 4, &st), 1, "token 1 read");
    llm_server_push(s1, slot, 12, 0, NULL, 0);
    llm_client_drain(c);
    ok(llm_client_arm(c) == 1, "token 2 pending: arm says do not sleep");
    /* a restart (same process here, so the liveness refusal does not apply) */
    llm_server *s2 = server(4, 4, 8, 8);
    ok(s2 != NULL, "new engine created over the old name: %s", s2 ? "" : err);
    ok(llm_server_generation(s2) != g1, "new generation");
    struct pollfd pl = { llm_client_fd(c), POLLIN, 0 };
    ok(poll(&pl, 1, 5000) == 1, "sleeping old-generation client woken by the new engine");
    llm_client_drain(c);
    ok(llm_client_arm(c) == 1, "and told to look (engine stopped)");
    is_int(llm_client_read(c, r, tk, 4, &st), 1, "token pushed before the restart still readable");
    is_int(llm_client_read(c, r, tk, 4, &st), LLM_SHM_E_ENGINE_GONE, "then ENGINE_GONE, not a hang");
    is_int(llm_client_check(c), LLM_SHM_E_ENGINE_GONE, "check says gone");
    is_int(llm_client_start(c, prompt, 2, &p, 2, &r2), 0, "next request re-attaches");
    ok(llm_client_generation(c) == llm_server_generation(s2), "to the new generation");
    is_int(llm_client_read(c, r, tk, 4, &st), LLM_SHM_E_ENGINE_GONE, "old handle stays ENGINE_GONE");
    is_int(llm_client_release(c, r), 0, "old handle released harmlessly");
    is_int(llm_server_pop(s2, &slot), 1, "new engine gets the new request");
    llm_server_finish(s2, slot, LLM_FINISH_STOP, 0);
    is_int(llm_client_read(c, r2, tk, 4, &st), 0, "new request done");
    ok(st.done && st.finish == LLM_FINISH_STOP, "finished STOP");
    llm_client_release(c, r2);
    llm_server_destroy(s1); /* must not unlink its successor's segment */
    llm_shm_map m;
    is_int(llm_shm_open_map(g_name, &m, err, sizeof err), 0, "successor's segment survives old destroy");
    llm_shm_unmap(&m);
    llm_client_free(c);
    llm_server_destroy(s2);
    is_int(llm_shm_open_map(g_name, &m, err, sizeof err), LLM_SHM_E_NOENT, "destroy unlinks");

    /* an engine process killed with SIGKILL, no successor */
    int pfd[2];
    if (pipe(pfd) != 0)
        return;
    pid_t kid = fork();
    if (kid == 0) {
        llm_server *s = server(4, 4, 8, 8);
        char b = s ? 1 : 0;
        if (write(pfd[1], &b, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    char b = 0;
    ok(read(pfd[0], &b, 1) == 1 && b == 1, "engine child up");
    close(pfd[0]);
    close(pfd[1]);
    c = llm_client_new(g_name, err, sizeof err);
    llm_client_set_stale_ns(c, 0);
    is_int(llm_client_start(c, prompt, 2, &p, 1, &r), 0, "request to the child engine");
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    is_int(llm_client_check(c), LLM_SHM_E_ENGINE_GONE, "dead engine pid: ENGINE_GONE");
    is_int(llm_client_read(c, r, tk, 4, &st), LLM_SHM_E_ENGINE_GONE, "in-flight request errors out");
    is_int(llm_client_reserve(c, &r2), LLM_SHM_E_NOENT, "no successor: engine not running");
    llm_client_release(c, r);
    llm_client_free(c);
    /* a new engine takes over the dead one's name */
    llm_server *s3 = server(4, 4, 8, 8);
    ok(s3 != NULL, "new engine replaces the dead one's segment");
    llm_server_destroy(s3);
}

/* ---- a client killed at awkward moments ---- */
static void test_dead_owner(void)
{
    llm_server *s = server(8, 8, 8, 8);
    llm_shm_map *m = llm_server_map(s);
    int pfd[2];
    if (pipe(pfd) != 0)
        return;
    pid_t kid = fork();
    if (kid == 0) {
        llm_client *c = llm_client_new(g_name, err, sizeof err);
        int32_t prompt[2] = { 5, 6 };
        llm_shm_params p;
        llm_shm_params_defaults(&p);
        llm_req r;
        int fails = 0;
        fails += llm_client_start(c, prompt, 2, &p, 1, &r) != 0; /* will be running */
        fails += llm_client_start(c, prompt, 2, &p, 2, &r) != 0; /* stays queued */
        fails += llm_client_reserve(c, &r) != 0;                 /* reserved only */
        /* died between SUBMITTED and its ring push: */
        fails += llm_client_reserve(c, &r) != 0;
        const llm_shm_map *cm = llm_client_map(c);
        llm_shm_slot *sl = llm_shm_slot_at(cm, r.slot);
        atomic_store(&sl->word, (atomic_load(&sl->word) & ~0xfu) | LLM_SLOT_SUBMITTED);
        /* died in the middle of registering a second waiter: */
        for (uint32_t i = 0; i < cm->hdr->caps.n_waiters; i++) {
            uint64_t w = LLM_WAITER_WORD(LLM_WAITER_FREE, 0);
            if (atomic_compare_exchange_strong(&cm->waiters[i].word, &w,
                                               LLM_WAITER_WORD(LLM_WAITER_CLAIMING, getpid())))
                break;
        }
        char b = fails ? 0 : 1;
        if (write(pfd[1], &b, 1) != 1)
            _exit(1);
        raise(SIGKILL);
    }
    char b = 0;
    ok(read(pfd[0], &b, 1) == 1 && b == 1, "child set up its slots");
    close(pfd[0]);
    close(pfd[1]);
    uint32_t slot;
    is_int(llm_server_pop(s, &slot), 1, "engine runs the child's first request");
    waitpid(kid, NULL, 0);
    is_int(atomic_load(&m->metrics->slots_in_use), 4, "child died holding 4 slots");
    is_int(llm_server_reap(s, 1), 4, "reaper reclaims all 4");
    ok(llm_server_cancelled(s, slot), "running one flagged cancelled");
    is_int(atomic_load(&m->metrics->slots_in_use), 2, "reserved and unqueued-submitted freed at once");
    is_int(atomic_load(&m->metrics->waiters), 0, "both waiter entries freed");
    uint32_t s2;
    is_int(llm_server_pop(s, &s2), 0, "queued one freed when popped");
    llm_server_finish(s, slot, LLM_FINISH_CANCELLED, 0);
    ok(all_free(s), "every slot free");
    is_int(atomic_load(&m->metrics->reclaimed_slots), 4, "4 reclaimed");
    llm_server_destroy(s);
}

/* An embedding's result (LLM_PARAM_EMBED) travels back in the slot's stream area: put before the finish,
 * read once finished, refused before that, beyond the area, or when tokens were streamed. */
static void test_result(void)
{
    llm_server *s = server(2, 2, 32, 8); /* stream area: 8 entries of 16 + 4 * 8 bytes = 96 floats */
    llm_client *c = llm_client_new(g_name, err, sizeof err);
    int32_t prompt[3] = { 1, 10, 11 };
    llm_shm_params p;
    llm_shm_params_defaults(&p);
    p.flags = LLM_PARAM_EMBED;
    llm_req r;
    uint32_t slot;
    float v[100], got[100];
    for (int i = 0; i < 100; i++) v[i] = 0.5f * (float)i - 3.0f;
    ok(LLM_SHM_RESULT_MAX(llm_client_map(c) ? llm_client_map(c)->hdr : llm_server_map(s)->hdr) == 96,
       "a result holds up to 96 floats here");
    is_int(llm_client_start(c, prompt, 3, &p, 1, &r), 0, "embedding request submitted");
    is_int(llm_server_pop(s, &slot), 1, "popped");
    ok((llm_server_params(s, slot)->flags & LLM_PARAM_EMBED) != 0, "the flag arrives");
    is_int(llm_client_result(c, r, got, 100), LLM_SHM_E_INVAL, "no result before the end");
    is_int(llm_server_put_result(s, slot, v, 97), LLM_SHM_E_INVAL, "97 floats do not fit");
    is_int(llm_server_put_result(s, slot, v, 96), 0, "96 do");
    is_int(llm_server_finish(s, slot, LLM_FINISH_STOP, 0), 0, "finished");
    llm_shm_token tk[2];
    llm_req_status st;
    is_int(llm_client_read(c, r, tk, 2, &st), 0, "no tokens");
    ok(st.done && st.finish == LLM_FINISH_STOP, "done");
    memset(got, 0, sizeof got);
    is_int(llm_client_result(c, r, got, 100), 96, "96 floats back");
    ok(memcmp(got, v, 96 * sizeof(float)) == 0, "the engine's floats");
    is_int(llm_client_result(c, r, got, 10), 10, "at most max");
    llm_client_release(c, r);

    p.flags = 0; /* a request that streamed a token has no result */
    is_int(llm_client_start(c, prompt, 3, &p, 2, &r), 0, "plain request");
    is_int(llm_server_pop(s, &slot), 1, "popped");
    is_int(llm_server_push(s, slot, 5, -0.1f, NULL, 0), 0, "a token");
    is_int(llm_server_put_result(s, slot, v, 4), LLM_SHM_E_INVAL, "no result over streamed tokens");
    is_int(llm_server_finish(s, slot, LLM_FINISH_STOP, 0), 0, "finished");
    is_int(llm_client_read(c, r, tk, 2, &st), 1, "its token");
    is_int(llm_client_result(c, r, got, 100), 0, "no result");
    llm_client_release(c, r);
    ok(all_free(s), "every slot free again");
    llm_client_free(c);
    llm_server_destroy(s);
}

int main(void)
{
    snprintf(g_name, sizeof g_name, "test-shm-%d", (int)getpid());
    test_layout();
    test_ring();
    test_life_cycle();
    test_result();
    test_ring_full_and_cancel();
    test_mpsc();
    test_generation();
    test_dead_owner();
    char path[80];
    llm_shm_path(g_name, path, sizeof path);
    shm_unlink(path); /* in case a failed check left one */
    return done_testing();
}
