/* Stress through `llm-engine serve` on stories260K: 5,000 requests with random
 * prompt lengths and budgets, random cancellations and early releases, and a
 * client process SIGKILLed mid-stream (its streams full, the engine
 * back-pressured). Every token that comes back is checked against the same
 * request run alone; afterwards the metrics block shows no slot, stream or KV
 * block held and the engine still serves a correct request. */
#include "serve_harness.h"
#include "tap.h"

#define N_REQ    5000
#define N_PROMPT 24   /* distinct (prompt, sampling) references */
#define MAX_TOK  8
#define N_VICTIM 6    /* requests of the killed client */

static h_request ref[N_PROMPT];
static h_request rq[N_REQ];

/* The client that dies: starts long requests, reads one token of each, tells
 * the parent, then stops reading (its streams fill up) until it is killed. */
static void victim(const char *name, int fd)
{
    char emsg[256];
    llm_client *c = llm_client_new(name, emsg, sizeof(emsg));
    if (c == NULL || llm_client_attach(c) != LLM_SHM_OK)
        _exit(1);
    llm_req r[N_VICTIM];
    for (int i = 0; i < N_VICTIM; i++) {
        h_request q;
        h_prompt(&q, 10 + i, 99 + (uint64_t)i);
        h_params(&q, 400, 0.0f, 0);
        q.p.n_stop = 0;
        q.p.flags |= LLM_PARAM_IGNORE_EOS;
        if (llm_client_start(c, q.prompt, (uint32_t)q.n_prompt, &q.p, (uint64_t)i, &r[i]) != LLM_SHM_OK)
            _exit(2);
    }
    for (int i = 0; i < N_VICTIM; i++) {
        llm_shm_token t;
        while (llm_client_read(c, r[i], &t, 1, NULL) == 0)
            llm_client_wait(c, 20);
    }
    if (write(fd, "x", 1) != 1)
        _exit(3);
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    (void)argc;
    h_find_engine(argv[0]);
    char name[64];
    snprintf(name, sizeof(name), "tstress-%d", (int)getpid());
    char emsg[256];
    llm_client *c = llm_client_new(name, emsg, sizeof(emsg));
    ok(c != NULL, "client created (%s)", c != NULL ? "ok" : emsg);
    if (c == NULL)
        return done_testing();

    /* 64 slots (fewer than the client's concurrency: NO_SLOT retries), short
     * streams (back-pressure), small pool (preemption). */
    const char *opts[] = { "--slots", "64", "--stream-cap", "16", "--max-batch-size", "32", "--kv-blocks", "48",
                           "--block-size", "16", "--batch-timeout-ms", "0", NULL };
    pid_t e = h_engine_start(name, opts);
    ok(h_engine_wait_ready(c, e) == 0, "engine ready");

    uint64_t rs = 2024;
    for (int i = 0; i < N_PROMPT; i++) {
        h_prompt(&ref[i], h_rand_in(&rs, 1, 40), 300 + (uint64_t)i);
        h_params(&ref[i], MAX_TOK, i % 3 == 2 ? 0.9f : 0.0f, 77 + (uint64_t)i);
    }
    ok(h_run(c, ref, N_PROMPT, 1) == 0, "references run alone");

    int pfd[2];
    ok(pipe(pfd) == 0, "pipe");
    fflush(stdout);
    pid_t v = fork();
    if (v == 0) {
        close(pfd[0]);
        victim(name, pfd[1]);
    }
    close(pfd[1]);
    char x;
    ok(read(pfd[0], &x, 1) == 1, "victim client has %d requests streaming", N_VICTIM);
    close(pfd[0]);
    h_sleep_ms(50); /* its streams fill up: the engine back-pressures them */
    kill(v, SIGKILL);
    int vst;
    waitpid(v, &vst, 0);
    ok(WIFSIGNALED(vst) && WTERMSIG(vst) == SIGKILL, "victim client SIGKILLed mid-stream");

    int n_cancel = 0, n_release = 0;
    for (int i = 0; i < N_REQ; i++) {
        h_request *r = &rq[i];
        int k = (int)(h_rand(&rs) % N_PROMPT);
        *r = ref[k];
        r->p.max_tokens = h_rand_in(&rs, 1, MAX_TOK);
        r->cancel_after = r->release_after = -1;
        int dice = h_rand_in(&rs, 0, 99);
        if (dice < 10)
            r->cancel_after = h_rand_in(&rs, 0, 3), n_cancel++;
        else if (dice < 15)
            r->release_after = h_rand_in(&rs, 0, 3), n_release++;
        r->start_rc = k; /* remembered until h_run overwrites it */
    }
    int which[N_REQ];
    for (int i = 0; i < N_REQ; i++)
        which[i] = rq[i].start_rc;
    diag("%d requests: %d with a cancel, %d released early", N_REQ, n_cancel, n_release);
    ok(h_run(c, rq, N_REQ, 96) == 0, "5000 requests ended");

    int bad = 0, n_done = 0, n_cancelled = 0, n_gone = 0;
    for (int i = 0; i < N_REQ; i++) {
        const h_request *r = &rq[i], *a = &ref[which[i]];
        int want = a->n_out < r->p.max_tokens ? a->n_out : r->p.max_tokens;
        int good = r->start_rc == LLM_SHM_OK && r->read_rc == LLM_SHM_OK && h_same_prefix(a->out, a->n_out, r->out, r->n_out);
        if (r->finish == LLM_FINISH_STOP || r->finish == LLM_FINISH_LENGTH)
            good = good && r->n_out == want, n_done++;
        else if (r->finish == LLM_FINISH_CANCELLED)
            good = good && r->cancelled, n_cancelled++;
        else if (r->finish == -1)
            n_gone++;
        else
            good = 0;
        if (!good && bad++ < 5)
            diag("request %d (ref %d): start %d read %d finish %d error %d, %d tokens (want %d)", i, which[i],
                 r->start_rc, r->read_rc, r->finish, r->error, r->n_out, want);
    }
    diag("%d completed, %d cancelled by the engine, %d released early", n_done, n_cancelled, n_gone);
    is_int(bad, 0, "every token of every request equals the request run alone");

    ok(h_wait_idle(c, 1), "settled: no slot, stream, running request or KV block held; the dead client reaped");
    h_diag_metrics(c);
    const llm_shm_map *m = llm_client_map(c);
    llm_shm_metrics *met = m->metrics;
    ok(atomic_load(&met->submitted) == atomic_load(&met->finished) + atomic_load(&met->cancelled) + atomic_load(&met->failed),
       "metrics: every submitted request counted once as finished, cancelled or failed");
    is_int(atomic_load(&met->waiters), 1, "waiters gauge back to 1 (the dead client's entry freed and counted)");
    ok(atomic_load(&m->metrics->reclaimed_slots) >= 1, "the killed client's slots were reclaimed");

    h_request last = ref[0];
    ok(h_run(c, &last, 1, 1) == 0 && last.finish == ref[0].finish && last.n_out == ref[0].n_out &&
           memcmp(last.out, ref[0].out, (size_t)last.n_out * sizeof(int32_t)) == 0,
       "engine still serves a correct request");
    int st = h_engine_stop(e, SIGTERM);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "engine drained and exited 0");
    llm_client_free(c);
    return done_testing();
}
