/* Engine restarts through `llm-engine serve` on stories260K: an engine killed
 * with SIGKILL (with and without a successor) ends its clients' in-flight
 * requests with ENGINE_GONE, never a hang; the restarted engine has a new
 * generation and serves new requests correctly; SIGTERM drains (running
 * requests finish, new ones are refused NOT_READY) and exits 0. */
#include "serve_harness.h"
#include "tap.h"

/* Starts a long request and reads its first token. */
static int start_long(llm_client *c, llm_req *r)
{
    h_request q;
    h_prompt(&q, 8, 5);
    h_params(&q, 200, 0.0f, 0);
    q.p.n_stop = 0;
    q.p.flags |= LLM_PARAM_IGNORE_EOS;
    if (llm_client_start(c, q.prompt, (uint32_t)q.n_prompt, &q.p, 1, r) != LLM_SHM_OK)
        return -1;
    llm_shm_token t;
    double t0 = h_now();
    while (h_now() - t0 < 60.0 && !h_engine_died()) {
        int k = llm_client_read(c, *r, &t, 1, NULL);
        if (k != 0)
            return k == 1 ? 0 : -1;
        llm_client_wait(c, 20);
    }
    return -1;
}

/* Reads r until it fails or ends; returns the read error (or OK when it
 * ended normally). *n counts the tokens read. 60 s cap = a hang. */
static int read_to_end(llm_client *c, llm_req r, int *n, llm_req_status *st)
{
    llm_shm_token t[16];
    double t0 = h_now();
    *n = 0;
    while (h_now() - t0 < 60.0 && !h_engine_died()) {
        int k = llm_client_read(c, r, t, 16, st);
        if (k < 0)
            return k;
        *n += k;
        if (st->done)
            return LLM_SHM_OK;
        if (k == 0)
            llm_client_wait(c, 20);
    }
    return 1; /* hung */
}

static int same(const h_request *a, const h_request *b)
{
    return a->finish == b->finish && a->n_out == b->n_out &&
           memcmp(a->out, b->out, (size_t)a->n_out * sizeof(int32_t)) == 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    h_find_engine(argv[0]);
    char name[64];
    snprintf(name, sizeof(name), "trestart-%d", (int)getpid());
    char emsg[256];
    llm_client *c = llm_client_new(name, emsg, sizeof(emsg));
    ok(c != NULL, "client created (%s)", c != NULL ? "ok" : emsg);
    if (c == NULL)
        return done_testing();
    llm_client_set_stale_ns(c, 300000000ull);

    pid_t e = h_engine_start(name, NULL);
    ok(h_engine_wait_ready(c, e) == 0, "engine A ready");
    uint64_t gen_a = llm_client_generation(c);
    h_request ref;
    h_prompt(&ref, 12, 11);
    h_params(&ref, 24, 0.0f, 0);
    ok(h_run(c, &ref, 1, 1) == 0 && ref.n_out > 0, "reference request: %d tokens", ref.n_out);

    /* 1. SIGKILL, no successor: the client notices the dead engine. */
    llm_req r;
    ok(start_long(c, &r) == 0, "long request streaming on A");
    h_engine_stop(e, SIGKILL);
    int n;
    llm_req_status st;
    is_int(read_to_end(c, r, &n, &st), LLM_SHM_E_ENGINE_GONE, "in-flight request: ENGINE_GONE (engine killed, none after)");
    llm_client_release(c, r);
    int rc = llm_client_check(c);
    ok(rc == LLM_SHM_E_ENGINE_GONE || rc == LLM_SHM_E_NOENT, "check: engine gone (%s)", llm_shm_strerror(rc));
    h_request q = ref;
    ok(h_run(c, &q, 1, 1) == 0 && q.start_rc != LLM_SHM_OK, "new request refused at once while no engine (%s)",
       llm_shm_strerror(q.start_rc));

    /* 2. Restart: new generation, correct service. */
    e = h_engine_start(name, NULL);
    ok(h_engine_wait_ready(c, e) == 0, "engine B ready after the SIGKILL");
    uint64_t gen_b = llm_client_generation(c);
    ok(gen_b != 0 && gen_b != gen_a, "new generation (%llu -> %llu)", (unsigned long long)gen_a,
       (unsigned long long)gen_b);
    q = ref;
    ok(h_run(c, &q, 1, 1) == 0 && same(&q, &ref), "engine B serves the reference request correctly");

    /* 3. SIGKILL with a successor started at once: the old request fails, the
     * old handle keeps failing, new requests go to the successor. */
    ok(start_long(c, &r) == 0, "long request streaming on B");
    h_engine_stop(e, SIGKILL);
    e = h_engine_start(name, NULL);
    is_int(read_to_end(c, r, &n, &st), LLM_SHM_E_ENGINE_GONE, "in-flight request: ENGINE_GONE (engine replaced)");
    ok(h_engine_wait_ready(c, e) == 0, "engine C ready");
    uint64_t gen_c = llm_client_generation(c);
    ok(gen_c != gen_b && gen_c != gen_a, "generation changed again");
    llm_shm_token t;
    is_int(llm_client_read(c, r, &t, 1, &st), LLM_SHM_E_ENGINE_GONE, "the old handle keeps answering ENGINE_GONE");
    llm_client_release(c, r);
    q = ref;
    ok(h_run(c, &q, 1, 1) == 0 && same(&q, &ref), "engine C serves the reference request correctly");
    ok(h_wait_idle(c, 1), "engine C idle, one client attached");
    h_engine_stop(e, SIGTERM);

    /* 4. SIGTERM drains: a request back-pressured by a 16-entry stream keeps
     * the engine draining; new requests are NOT_READY; it ends, the engine exits 0. */
    const char *small_stream[] = { "--stream-cap", "16", NULL };
    e = h_engine_start(name, small_stream);
    ok(h_engine_wait_ready(c, e) == 0, "engine D ready");
    ok(start_long(c, &r) == 0, "long request streaming on D");
    kill(e, SIGTERM);
    const llm_shm_map *m = llm_client_map(c);
    double t0 = h_now();
    while (atomic_load(&m->hdr->state) != LLM_ENGINE_DRAINING && h_now() - t0 < 60.0 && !h_engine_died())
        h_sleep_ms(5);
    is_int(atomic_load(&m->hdr->state), LLM_ENGINE_DRAINING, "SIGTERM: engine draining");
    llm_req r2;
    is_int(llm_client_start(c, ref.prompt, (uint32_t)ref.n_prompt, &ref.p, 2, &r2), LLM_SHM_E_NOT_READY,
           "draining: a new request is refused NOT_READY");
    is_int(read_to_end(c, r, &n, &st), LLM_SHM_OK, "the running request finishes while draining");
    ok(st.finish == LLM_FINISH_LENGTH && n == 199, "all of it: %d more tokens after the first", n);
    llm_client_release(c, r);
    int es = h_engine_stop(e, 0);
    ok(WIFEXITED(es) && WEXITSTATUS(es) == 0, "drained engine exited 0");
    llm_client_free(c);
    return done_testing();
}
