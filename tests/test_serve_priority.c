/* Request priority through `llm-engine serve` (llm_shm_params.priority, lower first, as vLLM's; the
 * module's llm_priority and the body's "priority" end up there): a batch of one sequence is held by a
 * request whose client does not read (a 2-entry stream: back-pressure keeps it running and the batch
 * full), three requests queue behind it with priorities 5, 0 and -2, in that order; once the first is let
 * go, the queue must run -2, then 0, then 5 (their first tokens' engine times, from the slots), each
 * to its end, whatever their arrival order. A second round with equal priorities keeps arrival order. */
#include "serve_harness.h"
#include "tap.h"

#define NQ 3

static int wait_metric(const llm_shm_map *m, _Atomic int64_t *v, int64_t want)
{
    double t0 = h_now();
    while (atomic_load(v) != want) {
        if (h_now() - t0 > 60.0 || h_engine_died())
            return -1;
        h_sleep_ms(2);
    }
    (void)m;
    return 0;
}

/* One round: returns 1 when the queued requests' first tokens came in the order `expect` (indices). */
static int round_trip(llm_client *c, const int *prio, const int *expect, const char *what)
{
    const llm_shm_map *m = llm_client_map(c);
    h_request hold, q[NQ];
    h_prompt(&hold, 6, 1);
    h_params(&hold, 200, 0.0f, 0);
    hold.p.flags |= LLM_PARAM_IGNORE_EOS;
    hold.p.n_stop = 0;
    llm_req rh, r[NQ];
    if (llm_client_start(c, hold.prompt, (uint32_t)hold.n_prompt, &hold.p, 0, &rh) != LLM_SHM_OK ||
        wait_metric(m, &m->metrics->running, 1) != 0) {
        diag("%s: the holding request did not start", what);
        return 0;
    }
    for (int i = 0; i < NQ; i++) {
        h_prompt(&q[i], 5 + i, 10 + (uint64_t)i);
        h_params(&q[i], 4, 0.0f, 0);
        q[i].p.priority = prio[i];
        if (llm_client_start(c, q[i].prompt, (uint32_t)q[i].n_prompt, &q[i].p, (uint64_t)i + 1, &r[i]) != LLM_SHM_OK ||
            wait_metric(m, &m->metrics->queue_depth, i + 1) != 0) {
            diag("%s: request %d did not queue", what, i);
            return 0;
        }
    }
    llm_client_release(c, rh); /* cancels the holder: the batch opens */
    int done[NQ] = { 0 }, left = NQ;
    uint64_t first[NQ] = { 0 };
    double t0 = h_now();
    while (left > 0 && h_now() - t0 < 60.0 && !h_engine_died()) {
        for (int i = 0; i < NQ; i++) {
            if (done[i])
                continue;
            llm_shm_token tk[8];
            llm_req_status st;
            int k = llm_client_read(c, r[i], tk, 8, &st);
            if (k < 0) {
                diag("%s: read %d: %s", what, i, llm_shm_strerror(k));
                return 0;
            }
            if (st.done) {
                first[i] = llm_shm_slot_at(m, r[i].slot)->first_ns;
                llm_client_release(c, r[i]);
                done[i] = 1;
                left--;
            }
        }
        h_sleep_ms(1);
    }
    if (left > 0) {
        diag("%s: %d requests did not finish", what, left);
        return 0;
    }
    diag("%s: first tokens at +%.3f, +%.3f, +%.3f ms (priorities %d, %d, %d)", what,
         (double)(first[0] - first[expect[0]]) / 1e6, (double)(first[1] - first[expect[0]]) / 1e6,
         (double)(first[2] - first[expect[0]]) / 1e6, prio[0], prio[1], prio[2]);
    return first[expect[0]] < first[expect[1]] && first[expect[1]] < first[expect[2]];
}

int main(int argc, char **argv)
{
    (void)argc;
    h_find_engine(argv[0]);
    char name[64];
    snprintf(name, sizeof(name), "tprio-%d", (int)getpid());
    char emsg[256];
    llm_client *c = llm_client_new(name, emsg, sizeof(emsg));
    ok(c != NULL, "client created (%s)", c != NULL ? "ok" : emsg);
    if (c == NULL)
        return done_testing();
    const char *opts[] = { "--slots", "8", "--max-batch-size", "1", "--stream-cap", "2", "--batch-timeout-ms", "0",
                           NULL };
    pid_t e = h_engine_start(name, opts);
    ok(h_engine_wait_ready(c, e) == 0, "engine ready (a batch of one, 2-entry streams)");

    const int prio[NQ] = { 5, 0, -2 }, by_prio[NQ] = { 2, 1, 0 };
    ok(round_trip(c, prio, by_prio, "priorities 5, 0, -2"), "queued in the order 5, 0, -2: run -2, 0, 5");
    const int same[NQ] = { 0, 0, 0 }, arrival[NQ] = { 0, 1, 2 };
    ok(round_trip(c, same, arrival, "equal priorities"), "equal priorities: arrival order");
    const int extreme[NQ] = { INT32_MAX, 0, INT32_MIN }, by_ext[NQ] = { 2, 1, 0 };
    ok(round_trip(c, extreme, by_ext, "INT32_MAX, 0, INT32_MIN"), "the extremes of the field order as numbers (no overflow)");

    h_request after;
    h_prompt(&after, 5, 99);
    h_params(&after, 6, 0.0f, 0);
    ok(h_run(c, &after, 1, 1) == 0 && after.finish == LLM_FINISH_LENGTH && after.n_out == 6,
       "a request with the default priority afterwards: served (%d tokens)", after.n_out);
    ok(!h_engine_died(), "engine still up");
    h_engine_stop(e, SIGTERM);
    llm_client_free(c);
    return done_testing();
}
