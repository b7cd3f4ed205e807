/* llm-client: submits requests straight through the shared-memory ring (no
 * nginx), tokenizing on the client side as nginx workers do, and prints one
 * JSON line per request: text, ids, finish reason, time to first token and
 * time per output token. --concurrency C keeps C requests in flight until
 * --requests R have completed. */
#include "cli.h"
#include "llm_client.h"
#include "tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int      live;
    llm_req  req;
    int32_t *ids;
    int      n_ids, cap_ids;
    double   t_submit, t_first, t_last;
} inflight;

static const char *finish_name(llm_finish_reason f)
{
    switch (f) {
    case LLM_FINISH_STOP:      return "stop";
    case LLM_FINISH_LENGTH:    return "length";
    case LLM_FINISH_CANCELLED: return "cancelled";
    case LLM_FINISH_ERROR:     return "error";
    default:                   return "none";
    }
}

static void print_result(const llm_tokenizer *tok, inflight *f, const char *finish, const char *error)
{
    cJSON *o = cJSON_CreateObject();
    char *text = llm_tok_decode(tok, f->ids, (size_t)f->n_ids);
    cJSON_AddStringToObject(o, "text", text != NULL ? text : "");
    free(text);
    cJSON *ids = cJSON_AddArrayToObject(o, "ids");
    for (int i = 0; i < f->n_ids; i++)
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(f->ids[i]));
    cJSON_AddStringToObject(o, "finish_reason", finish);
    if (error != NULL)
        cJSON_AddStringToObject(o, "error", error);
    cJSON_AddNumberToObject(o, "ttft_ms", f->n_ids > 0 ? (f->t_first - f->t_submit) * 1e3 : 0.0);
    cJSON_AddNumberToObject(o, "tpot_ms", f->n_ids > 1 ? (f->t_last - f->t_first) * 1e3 / (f->n_ids - 1) : 0.0);
    char *s = cJSON_PrintUnformatted(o);
    if (s != NULL)
        puts(s);
    fflush(stdout);
    free(s);
    cJSON_Delete(o);
}

int main(int argc, char **argv)
{
    static const char *const known[] = {
        "shm=", "model=", "tokenizer=", "prompt=", "max-tokens=", "temperature=", "top-p=", "top-k=",
        "seed=", "concurrency=", "requests=", "ignore-eos", "timeout-ms=", NULL,
    };
    llm_args a = { argc - 1, argv + 1 };
    if (llm_args_check(&a, known) != 0)
        return 2;
    const char *name = llm_arg_str(&a, "shm"), *prompt = llm_arg_str(&a, "prompt");
    const char *tok_path = llm_arg_str(&a, "tokenizer");
    if (tok_path == NULL)
        tok_path = llm_arg_str(&a, "model");
    if (name == NULL || prompt == NULL || tok_path == NULL) {
        fprintf(stderr, "usage: llm-client --shm NAME (--model PATH | --tokenizer PATH) --prompt TEXT --max-tokens N\n"
                        "                  [--temperature T] [--top-p P] [--top-k K] [--seed S] [--ignore-eos]\n"
                        "                  [--concurrency C] [--requests R] [--timeout-ms MS]\n");
        return 2;
    }
    llm_shm_params p;
    llm_shm_params_defaults(&p);
    p.max_tokens = (int32_t)llm_arg_long(&a, "max-tokens", 16, 1, 1 << 24);
    p.temperature = (float)llm_arg_double(&a, "temperature", 0.0, 0.0, 2.0);
    p.top_p = (float)llm_arg_double(&a, "top-p", 1.0, 0.0, 1.0);
    p.top_k = (int32_t)llm_arg_long(&a, "top-k", 0, 0, 1 << 30);
    p.seed = (uint64_t)llm_arg_long(&a, "seed", 0, 0, (long)(~0UL >> 1));
    int conc = (int)llm_arg_long(&a, "concurrency", 1, 1, 4096);
    int total = (int)llm_arg_long(&a, "requests", conc, 1, 1 << 24);
    int timeout_ms = (int)llm_arg_long(&a, "timeout-ms", 600000, 1, 1 << 30);

    llm_err err = { { 0 } };
    llm_tokenizer *tok = llm_tok_load(tok_path, &err);
    if (tok == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    int32_t *ids = NULL;
    int n = llm_tok_encode(tok, prompt, strlen(prompt), LLM_TOK_ADD_BOS, &ids);
    if (llm_arg_flag(&a, "ignore-eos")) {
        p.flags |= LLM_PARAM_IGNORE_EOS;
    } else {
        int k = llm_tok_eog_ids(tok, p.stop_ids, LLM_SHM_MAX_STOP);
        p.n_stop = (uint32_t)(k > 0 ? k : 0);
    }

    char emsg[256];
    llm_client *c = llm_client_new(name, emsg, sizeof(emsg));
    int rc = 0;
    if (c == NULL || n <= 0) {
        fprintf(stderr, "error: %s\n", c == NULL ? emsg : "empty prompt");
        free(ids);
        llm_tok_free(tok);
        return 1;
    }
    int arc = llm_client_attach(c);
    if (arc != LLM_SHM_OK) {
        fprintf(stderr, "error: engine '%s': %s\n", name, llm_shm_strerror(arc));
        rc = 1;
        goto out;
    }

    inflight *fl = calloc((size_t)conc, sizeof(*fl));
    int started = 0, done = 0;
    double t_start = llm_now_sec();
    while (done < total && fl != NULL) {
        /* Keep conc requests in flight. */
        for (int i = 0; i < conc && started < total; i++) {
            if (fl[i].live)
                continue;
            inflight *f = &fl[i];
            int src = llm_client_start(c, ids, (uint32_t)n, &p, (uint64_t)started, &f->req);
            if (src != LLM_SHM_OK) {
                f->n_ids = 0;
                print_result(tok, f, "error", llm_shm_strerror(src));
                started++;
                done++;
                rc = 1;
                continue;
            }
            f->live = 1;
            f->n_ids = 0;
            f->t_submit = llm_now_sec();
            started++;
        }
        int progressed = 0;
        for (int i = 0; i < conc; i++) {
            inflight *f = &fl[i];
            if (!f->live)
                continue;
            llm_shm_token t[64];
            llm_req_status st;
            int k = llm_client_read(c, f->req, t, 64, &st);
            if (k < 0) {
                print_result(tok, f, "error", llm_shm_strerror(k));
                llm_client_release(c, f->req);
                f->live = 0;
                done++;
                rc = 1;
                continue;
            }
            if (k > 0) {
                double now = llm_now_sec();
                if (f->n_ids == 0)
                    f->t_first = now;
                f->t_last = now;
                if (f->n_ids + k > f->cap_ids) {
                    int ncap = (f->n_ids + k) * 2;
                    int32_t *nb = realloc(f->ids, (size_t)ncap * sizeof(*nb));
                    if (nb == NULL)
                        abort();
                    f->ids = nb;
                    f->cap_ids = ncap;
                }
                for (int j = 0; j < k; j++)
                    f->ids[f->n_ids++] = t[j].id;
                progressed = 1;
            }
            if (st.done) {
                print_result(tok, f, finish_name(st.finish), st.finish == LLM_FINISH_ERROR ? llm_shm_strerror(st.error) : NULL);
                if (st.finish == LLM_FINISH_ERROR)
                    rc = 1;
                llm_client_release(c, f->req);
                f->live = 0;
                done++;
                progressed = 1;
            }
        }
        if (!progressed) {
            if ((llm_now_sec() - t_start) * 1e3 > timeout_ms) {
                fprintf(stderr, "error: timed out after %d ms\n", timeout_ms);
                rc = 1;
                break;
            }
            if (llm_client_wait(c, 100) == 0 && llm_client_check(c) != LLM_SHM_OK) {
                int chk = llm_client_check(c);
                if (chk == LLM_SHM_E_ENGINE_GONE || chk == LLM_SHM_E_NOENT)
                    continue; /* reads now fail with ENGINE_GONE and end the requests */
            }
        }
    }
    if (fl != NULL)
        for (int i = 0; i < conc; i++)
            free(fl[i].ids);
    free(fl);
out:
    llm_client_free(c);
    free(ids);
    llm_tok_free(tok);
    return rc;
}
