/* End to end through `llm-engine serve` on stories260K: 64 concurrent
 * mixed-length requests (greedy and seeded sampling, some sharing a prompt
 * prefix) give exactly the tokens each gives when run alone, also with a KV
 * pool small enough to force preemption and chunked prefill. */
#include "serve_harness.h"
#include "tap.h"

#define N_REQ 64

static h_request conc[N_REQ], alone[N_REQ], tight[N_REQ];

static void make_requests(h_request *rq)
{
    uint64_t rs = 42;
    h_request shared;
    h_prompt(&shared, 24, 7);
    for (int i = 0; i < N_REQ; i++) {
        h_request *r = &rq[i];
        int len = h_rand_in(&rs, 1, 60);
        h_prompt(r, len, 1000 + (uint64_t)i);
        if (i % 4 == 3 && len > 24) /* shared prefix: prefix-cache hits while batched */
            memcpy(r->prompt, shared.prompt, 24 * sizeof(int32_t));
        /* every 8th runs long enough to meet EOS or the small pool's context limit */
        int max_tokens = i % 8 == 5 ? h_rand_in(&rs, 150, 300) : h_rand_in(&rs, 4, 64);
        if (i % 2 == 0)
            h_params(r, max_tokens, 0.0f, 0);
        else
            h_params(r, max_tokens, 0.8f, 5000 + (uint64_t)i);
    }
}

/* got[i] must equal alone[i]; with a context limit ctx (the small pool), a
 * request that filled it ends LENGTH with a prefix of the alone tokens. */
static int compare(const char *what, const h_request *got, int ctx)
{
    int bad = 0;
    for (int i = 0; i < N_REQ; i++) {
        const h_request *a = &alone[i], *g = &got[i];
        if (ctx > 0 && g->n_prompt + g->n_out == ctx && g->n_out < a->n_out) {
            if (g->finish != LLM_FINISH_LENGTH || !h_same_prefix(a->out, a->n_out, g->out, g->n_out)) {
                if (bad++ < 4)
                    diag("%s: request %d stopped at the context limit but its tokens differ", what, i);
            }
            continue;
        }
        if (g->start_rc != LLM_SHM_OK || g->read_rc != LLM_SHM_OK || g->finish != a->finish || g->n_out != a->n_out ||
            memcmp(g->out, a->out, (size_t)a->n_out * sizeof(int32_t)) != 0) {
            if (bad++ < 4)
                diag("%s: request %d (prompt %d, %s) differs: %d tokens finish %d (alone: %d tokens finish %d)", what,
                     i, a->n_prompt, a->p.temperature > 0 ? "sampled" : "greedy", g->n_out, g->finish, a->n_out,
                     a->finish);
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    (void)argc;
    h_find_engine(argv[0]);
    char name[64];
    snprintf(name, sizeof(name), "tparity-%d", (int)getpid());
    char emsg[256];
    llm_client *c = llm_client_new(name, emsg, sizeof(emsg));
    ok(c != NULL, "client created (%s)", c != NULL ? "ok" : emsg);
    if (c == NULL)
        return done_testing();

    /* Batch up to 64, small token budget: prompts are prefilled in chunks beside decodes. */
    const char *big[] = { "--max-batch-size", "64", "--max-batched-tokens", "96", "--batch-timeout-ms", "2", NULL };
    pid_t e = h_engine_start(name, big);
    ok(h_engine_wait_ready(c, e) == 0, "engine ready (pid %d)", (int)e);

    make_requests(conc);
    memcpy(alone, conc, sizeof(conc));
    memcpy(tight, conc, sizeof(conc));
    ok(h_run(c, conc, N_REQ, N_REQ) == 0, "64 concurrent requests ended");
    const llm_shm_map *m = llm_client_map(c);
    diag("batched steps observed: %llu", (unsigned long long)atomic_load(&m->metrics->step_time.count));
    for (int i = 0; i < N_REQ; i++)
        ok(h_run(c, &alone[i], 1, 1) == 0 && alone[i].finish > 0, "request %d alone: %d tokens", i, alone[i].n_out);
    int n_stop = 0, n_len = 0;
    for (int i = 0; i < N_REQ; i++)
        n_stop += alone[i].finish == LLM_FINISH_STOP, n_len += alone[i].finish == LLM_FINISH_LENGTH;
    diag("alone: %d ended at EOS, %d at max_tokens", n_stop, n_len);
    is_int(compare("concurrent", conc, 0), 0, "64 concurrent = each alone (greedy and seeded)");
    ok(h_wait_idle(c, 1), "engine idle afterwards");
    h_engine_stop(e, SIGTERM);

    /* 10 blocks of 16 tokens: at most 160 tokens in flight, requests hold up to
     * 124; decodes preempt younger requests, which are recomputed later. */
    const char *small[] = { "--max-batch-size", "64", "--kv-blocks", "10", "--block-size", "16", NULL };
    e = h_engine_start(name, small);
    ok(h_engine_wait_ready(c, e) == 0, "engine with a 160-token KV pool ready");
    ok(h_run(c, tight, N_REQ, N_REQ) == 0, "64 concurrent requests on the small pool ended");
    int n_ctx = 0;
    for (int i = 0; i < N_REQ; i++)
        n_ctx += tight[i].n_prompt + tight[i].n_out == 160;
    diag("small pool: %d requests ended at the 160-token context", n_ctx);
    is_int(compare("small pool", tight, 160), 0, "64 concurrent on a small KV pool (preemption) = each alone");
    ok(h_wait_idle(c, 1), "no KV block or slot held afterwards");
    h_diag_metrics(c);
    int st = h_engine_stop(e, SIGTERM);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SIGTERM: engine drained and exited 0");
    llm_client_free(c);
    return done_testing();
}
