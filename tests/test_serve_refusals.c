/* Refusals through `llm-engine serve` on stories260K are immediate and
 * distinct, and nothing blocks:
 *   no free slot           -> llm_client_start: LLM_SHM_E_NO_SLOT
 *   prompt beyond the pool -> llm_client_start: LLM_SHM_E_TOO_LONG (the
 *                             segment's max_prompt is min(context, KV pool))
 *   engine queue full      -> request FAILED at once, error LLM_SHM_E_QUEUE_FULL
 *   KV pool contended      -> requests wait or are preempted, then complete
 *                             exactly as alone (not refused, not stuck)
 *   JSON Schema too long   -> llm_client_start_schema: LLM_SHM_E_TOO_LONG
 *   a schema the engine refuses (a client that skipped the module's check)
 *                          -> request FAILED at once, error LLM_SHM_E_INVAL
 * (A full submission ring cannot happen with serve: the ring has at least as
 * many cells as there are slots, so NO_SLOT comes first; tests/test_shm.c
 * covers RING_FULL.) */
#include "serve_harness.h"
#include "tap.h"
#include "tokenizer.h"

#include <cjson/cJSON.h>

/* One request with a JSON Schema, read to its end: the finish reason (error in *error) and its text.
 * Whitespace tokens get bias -100: this story model would rather fill its tokens with them. */
static int run_schema(llm_client *c, const char *schema, const llm_tokenizer *tok, char *text, size_t cap, int *error)
{
    h_request q;
    h_prompt(&q, 6, 77);
    h_params(&q, 48, 0.8f, 5);
    for (int id = 0; tok != NULL && id < llm_tok_vocab_size(tok) && q.p.n_bias < LLM_SHM_MAX_BIAS; id++) {
        const char *p;
        size_t n;
        if (llm_tok_piece(tok, id, &p, &n) == 0 && n > 0 && strspn(p, " \n\t\r") >= n)
            q.p.bias[q.p.n_bias++] = (llm_shm_bias){ id, -100.0f };
    }
    llm_req r;
    *error = 0;
    text[0] = '\0';
    int rc = llm_client_start_schema(c, q.prompt, (uint32_t)q.n_prompt, &q.p, schema, (uint32_t)strlen(schema), 0, &r);
    if (rc != LLM_SHM_OK)
        return rc;
    llm_req_status st;
    size_t len = 0;
    double t0 = h_now();
    int k;
    do {
        llm_shm_token t[16];
        k = llm_client_read(c, r, t, 16, &st);
        for (int i = 0; i < k; i++) {
            const char *p;
            size_t n;
            if (tok != NULL && llm_tok_piece(tok, t[i].id, &p, &n) == 0 && len + n < cap) {
                memcpy(text + len, p, n);
                text[len += n] = '\0';
            }
        }
        if (k == 0 && !st.done)
            llm_client_wait(c, 20);
    } while (k >= 0 && !st.done && h_now() - t0 < 60.0 && !h_engine_died());
    llm_client_release(c, r);
    *error = st.error;
    return k < 0 ? k : st.done ? (int)st.finish : -100;
}

int main(int argc, char **argv)
{
    (void)argc;
    h_find_engine(argv[0]);
    char name[64];
    snprintf(name, sizeof(name), "trefuse-%d", (int)getpid());
    char emsg[256];
    llm_client *c = llm_client_new(name, emsg, sizeof(emsg));
    ok(c != NULL, "client created (%s)", c != NULL ? "ok" : emsg);
    if (c == NULL)
        return done_testing();

    /* 4 slots, batch of 2, queue of 2, a 64-token KV pool. */
    const char *opts[] = { "--slots", "4", "--max-batch-size", "2", "--max-waiting", "2", "--kv-blocks", "4",
                           "--block-size", "16", "--batch-timeout-ms", "0", NULL };
    pid_t e = h_engine_start(name, opts);
    ok(h_engine_wait_ready(c, e) == 0, "engine ready");
    const llm_shm_map *m = llm_client_map(c);
    is_int(m->hdr->caps.max_prompt, 63, "segment: prompts up to 63 tokens (the 64 the KV pool holds, less one to generate)");
    is_int(m->hdr->model.ctx_len, 64, "segment: context 64 (the KV pool)");

    /* No slot. */
    llm_req held[4];
    int n_held = 0;
    while (n_held < 4 && llm_client_reserve(c, &held[n_held]) == LLM_SHM_OK)
        n_held++;
    is_int(n_held, 4, "4 slots reserved");
    h_request q;
    h_prompt(&q, 5, 1);
    h_params(&q, 8, 0.0f, 0);
    llm_req r;
    is_int(llm_client_start(c, q.prompt, (uint32_t)q.n_prompt, &q.p, 0, &r), LLM_SHM_E_NO_SLOT,
           "every slot in use: NO_SLOT at once");
    ok(atomic_load(&m->metrics->rejected_no_slot) >= 1, "counted in rejected_no_slot");
    for (int i = 0; i < n_held; i++)
        llm_client_release(c, held[i]);

    /* Out of KV: a prompt the pool can never hold. */
    h_request big;
    h_prompt(&big, 64, 2);
    h_params(&big, 8, 0.0f, 0);
    is_int(llm_client_start(c, big.prompt, 64, &big.p, 0, &r), LLM_SHM_E_TOO_LONG,
           "64-token prompt on a 64-token pool (no room to generate): TOO_LONG at once");

    /* Queue full: the engine is stopped while 4 requests go in, so it pops all
     * four at once: 2 fit the queue, 2 are refused with QUEUE_FULL. */
    h_request four[4];
    for (int i = 0; i < 4; i++) {
        h_prompt(&four[i], 6 + i, 20 + (uint64_t)i);
        h_params(&four[i], 12, 0.0f, 0);
    }
    kill(e, SIGSTOP);
    llm_req fr[4];
    int started = 0;
    for (int i = 0; i < 4; i++)
        started += llm_client_start(c, four[i].prompt, (uint32_t)four[i].n_prompt, &four[i].p, (uint64_t)i, &fr[i]) ==
                   LLM_SHM_OK;
    kill(e, SIGCONT);
    is_int(started, 4, "4 requests submitted to a stopped engine");
    int refused = 0, served = 0;
    for (int i = 0; i < 4; i++) {
        llm_shm_token t[16];
        llm_req_status st;
        int n = 0, k;
        double t0 = h_now();
        do {
            k = llm_client_read(c, fr[i], t, 16, &st);
            n += k > 0 ? k : 0;
            if (k == 0 && !st.done)
                llm_client_wait(c, 20);
        } while (k >= 0 && !st.done && h_now() - t0 < 60.0 && !h_engine_died());
        if (k >= 0 && st.done && st.finish == LLM_FINISH_ERROR && st.error == LLM_SHM_E_QUEUE_FULL && n == 0)
            refused++;
        else if (k >= 0 && st.done && st.finish == LLM_FINISH_LENGTH && n == 12)
            served++;
        else
            diag("request %d: read %d done %d finish %d error %d tokens %d", i, k, st.done, st.finish, st.error, n);
        llm_client_release(c, fr[i]);
    }
    is_int(served, 2, "2 requests fit the queue and are served");
    is_int(refused, 2, "2 refused with error QUEUE_FULL (%s), no token", llm_shm_strerror(LLM_SHM_E_QUEUE_FULL));
    is_int(atomic_load(&m->metrics->failed), 2, "metrics: failed counts the 2 refusals once");
    ok(LLM_SHM_E_QUEUE_FULL != LLM_SHM_E_NO_SLOT && LLM_SHM_E_QUEUE_FULL != LLM_SHM_E_TOO_LONG &&
           LLM_SHM_E_QUEUE_FULL != LLM_SHM_E_NOT_READY && LLM_SHM_E_QUEUE_FULL != LLM_SHM_E_INVAL,
       "the codes are distinct");

    /* JSON Schemas in the slot: one that does not fit the prompt area with the prompt, one the engine
     * refuses (the module would have answered 400), one it follows. */
    char schema[512], text[256];
    int error = 0;
    snprintf(schema, sizeof schema, "{\"enum\":[\"%0*d\"]}", 63 * 4, 0);
    h_request sq;
    h_prompt(&sq, 6, 3);
    h_params(&sq, 8, 0.0f, 0);
    is_int(llm_client_start_schema(c, sq.prompt, 6, &sq.p, schema, (uint32_t)strlen(schema), 0, &r), LLM_SHM_E_TOO_LONG,
           "a schema that does not fit the slot beside the prompt: TOO_LONG at once");
    is_int(run_schema(c, "{\"type\":\"integer\",\"multipleOf\":3}", NULL, text, sizeof text, &error), LLM_FINISH_ERROR,
           "a schema the engine refuses: the request fails");
    is_int(error, LLM_SHM_E_INVAL, "... with INVAL, nothing generated");
    llm_err terr = { { 0 } };
    llm_tokenizer *tok = llm_tok_load("../shared/models/stories260K/tok512.bin", &terr);
    ok(tok != NULL, "stories260K tokenizer %s", terr.msg);
    int fin = tok != NULL ? run_schema(c, "{\"enum\":[\"yes\",\"no\",7]}", tok, text, sizeof text, &error) : -1;
    ok(fin == LLM_FINISH_STOP && (!strcmp(text, "\"yes\"") || !strcmp(text, "\"no\"") || !strcmp(text, "7")),
       "a schema the engine follows: one of its values, then stop (finish %d): %s", fin, text);
    fin = tok != NULL ? run_schema(c, "{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":2,\"maxItems\":2}",
                                   tok, text, sizeof text, &error)
                      : -1;
    cJSON *arr = cJSON_Parse(text);
    ok(fin == LLM_FINISH_STOP && cJSON_GetArraySize(arr) == 2 && cJSON_IsBool(cJSON_GetArrayItem(arr, 0)) &&
           cJSON_IsBool(cJSON_GetArrayItem(arr, 1)),
       "an array of two booleans, then stop (finish %d): %s", fin, text);
    cJSON_Delete(arr);
    llm_tok_free(tok);

    /* KV contention: two 40-token prompts with 20 tokens each cannot share a
     * 64-token pool; both complete, each exactly as alone. */
    h_request two[2], alone[2];
    for (int i = 0; i < 2; i++) {
        h_prompt(&two[i], 40, 40 + (uint64_t)i);
        h_params(&two[i], 20, i == 1 ? 0.7f : 0.0f, 9);
        two[i].p.n_stop = 0;
        two[i].p.flags |= LLM_PARAM_IGNORE_EOS;
        alone[i] = two[i];
        ok(h_run(c, &alone[i], 1, 1) == 0 && alone[i].n_out == 20, "request %d alone: 20 tokens", i);
    }
    ok(h_run(c, two, 2, 2) == 0, "both together on the contended pool ended");
    for (int i = 0; i < 2; i++)
        ok(two[i].finish == LLM_FINISH_LENGTH && two[i].n_out == 20 &&
               memcmp(two[i].out, alone[i].out, 20 * sizeof(int32_t)) == 0,
           "request %d: same 20 tokens as alone", i);

    /* Last, as it once crashed the engine (a token appended past the
     * request's buffer): the longest prompt the segment takes, which leaves
     * room for exactly one generated token. */
    h_prompt(&big, 63, 2);
    ok(h_run(c, &big, 1, 1) == 0 && big.finish == LLM_FINISH_LENGTH && big.n_out == 1,
       "63-token prompt in a 64-token pool: served, ends LENGTH after %d token", big.n_out);

    ok(h_wait_idle(c, 1), "no slot or KV block held afterwards");
    h_diag_metrics(c);
    int st = h_engine_stop(e, SIGTERM);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "engine exited 0");
    llm_client_free(c);
    return done_testing();
}
