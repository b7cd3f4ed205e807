/* llama.cpp server's /completion answer and stream events (see ngx_http_llm_lcpp_out.h). */
#include "ngx_http_llm_lcpp_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t lc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ngx_http_llm_lc_init(ngx_http_llm_lc_t *lc, const ngx_http_llm_resp_t *resp, const llm_api_req *q, int max_tokens,
                         int32_t n_ctx, uint32_t n_prompt, char *prompt_text)
{
    memset(lc, 0, sizeof *lc);
    lc->prompt_text = prompt_text;
    lc->resp = resp;
    lc->q = q;
    lc->probs = q->logprobs && q->top_logprobs > 0;
    lc->max_tokens = max_tokens;
    lc->n_ctx = n_ctx;
    lc->n_prompt = n_prompt;
    lc->t0 = lc_now();
    lc->ids = cJSON_CreateArray();
    if (lc->ids != NULL) return 0;
    free(lc->prompt_text);
    lc->prompt_text = NULL;
    return -1;
}

void ngx_http_llm_lc_first(ngx_http_llm_lc_t *lc)
{
    if (lc->t_first == 0) lc->t_first = lc_now();
}

static void lc_free(void *b)
{
    ngx_http_llm_lc_t *lc = b;
    free(lc->text.data);
    free(lc->prompt_text);
    cJSON_Delete(lc->ids);
    cJSON_Delete(lc->probs_all);
    memset(lc, 0, sizeof *lc);
}

/* A token as llama.cpp lists its probabilities: {"id", "token", "bytes", "logprob"} (from TGI's token shape). */
static cJSON *lc_prob1(const cJSON *t)
{
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(t, "text");
    const char *s = cJSON_IsString(text) ? text->valuestring : "";
    cJSON *o = cJSON_CreateObject(), *bytes = ngx_http_llm_bytes_array(s, strlen(s));
    if (o == NULL || bytes == NULL) { cJSON_Delete(o); cJSON_Delete(bytes); return NULL; }
    cJSON_AddItemToObject(o, "id", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(t, "id"), 1));
    cJSON_AddStringToObject(o, "token", s);
    cJSON_AddItemToObject(o, "bytes", bytes);
    cJSON_AddItemToObject(o, "logprob", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(t, "logprob"), 1));
    return o;
}

/* A token's completion_probabilities entry: itself and its top_logprobs. */
static cJSON *lc_prob(const cJSON *t)
{
    cJSON *o = lc_prob1(t), *top = o ? cJSON_AddArrayToObject(o, "top_logprobs") : NULL, *x;
    if (top == NULL) { cJSON_Delete(o); return NULL; }
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(t, "top_tokens")) {
        cJSON *p = lc_prob1(x);
        if (p == NULL) { cJSON_Delete(o); return NULL; }
        cJSON_AddItemToArray(top, p);
    }
    return o;
}

static int lc_begin(void *b, cJSON *ev)
{
    (void)b;
    (void)ev;
    return 0;
}

/* {"index": 0, "content", "tokens", "stop"}: the start of every event and of the answer. */
static cJSON *lc_head(const char *s, size_t len, cJSON *ids, int stop)
{
    cJSON *o = cJSON_CreateObject(), *c = ngx_http_llm_clean_string(s, len);
    if (o == NULL || c == NULL || ids == NULL || !cJSON_AddNumberToObject(o, "index", 0)) {
        cJSON_Delete(o);
        cJSON_Delete(c);
        cJSON_Delete(ids);
        return NULL;
    }
    cJSON_AddItemToObject(o, "content", c);
    cJSON_AddItemToObject(o, "tokens", ids);
    if (!cJSON_AddBoolToObject(o, "stop", stop) || !cJSON_AddNumberToObject(o, "id_slot", -1)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static int lc_text(void *b, cJSON *ev, int reasoning, const char *s, size_t len, cJSON *lp)
{
    ngx_http_llm_lc_t *lc = b;
    (void)reasoning;
    if (ngx_http_llm_text_append(&lc->text, s, len)) { cJSON_Delete(lp); return -1; }
    if (ev == NULL) { /* the whole answer: lp is its tokens (return_tokens, n_probs) */
        cJSON *t;
        cJSON_ArrayForEach(t, lp) {
            lc->n_tokens++;
            if (lc->q->lcpp_tokens)
                cJSON_AddItemToArray(lc->ids, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(t, "id"), 1));
            if (lc->probs) {
                if (lc->probs_all == NULL && (lc->probs_all = cJSON_CreateArray()) == NULL) { cJSON_Delete(lp); return -1; }
                cJSON_AddItemToArray(lc->probs_all, lc_prob(t));
            }
        }
        cJSON_Delete(lp);
        return 0;
    }
    cJSON *ids = cJSON_CreateArray();
    if (lp != NULL && ids != NULL) {
        lc->n_tokens++;
        cJSON_AddItemToArray(ids, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(lp, "id"), 1));
    }
    cJSON *o = lc_head(s, len, ids, 0);
    if (o == NULL || !cJSON_AddNumberToObject(o, "tokens_predicted", lc->n_tokens) ||
        !cJSON_AddNumberToObject(o, "tokens_evaluated", lc->n_prompt)) {
        cJSON_Delete(o);
        cJSON_Delete(lp);
        return -1;
    }
    if (lc->probs && lp != NULL) {
        cJSON *a = cJSON_AddArrayToObject(o, "completion_probabilities"), *p = lc_prob(lp);
        if (a == NULL || p == NULL) { cJSON_Delete(o); cJSON_Delete(p); cJSON_Delete(lp); return -1; }
        cJSON_AddItemToArray(a, p);
    }
    cJSON_Delete(lp);
    cJSON_AddItemToArray(ev, o);
    return 0;
}

static int lc_calls(void *b, cJSON *ev, const ngx_http_llm_call_t *calls, int n)
{
    (void)b; (void)ev; (void)calls; (void)n; /* (completions have no tools) */
    return 0;
}

/* generation_settings: the parameters as served. */
static cJSON *lc_settings(const ngx_http_llm_lc_t *lc)
{
    const llm_api_req *q = lc->q;
    cJSON *g = cJSON_CreateObject(), *stop = g ? cJSON_AddArrayToObject(g, "stop") : NULL;
    if (stop == NULL) { cJSON_Delete(g); return NULL; }
    cJSON_AddNumberToObject(g, "n_ctx", lc->n_ctx);
    cJSON_AddNumberToObject(g, "n_predict", lc->max_tokens);
    cJSON_AddStringToObject(g, "model", lc->resp->model);
    /* the request's seed; llama.cpp's 4294967295 ("random") when it gave none (the one drawn is 64 bits) */
    cJSON_AddNumberToObject(g, "seed", q->has_seed ? (double)q->seed : 4294967295.0);
    cJSON_AddNumberToObject(g, "temperature", q->temperature);
    cJSON_AddNumberToObject(g, "top_k", q->top_k);
    cJSON_AddNumberToObject(g, "top_p", q->top_p);
    cJSON_AddNumberToObject(g, "min_p", q->min_p);
    cJSON_AddNumberToObject(g, "typical_p", q->typical_p);
    cJSON_AddNumberToObject(g, "repeat_penalty", q->repetition_penalty);
    cJSON_AddNumberToObject(g, "repeat_last_n", q->penalty_last_n > 0 ? q->penalty_last_n : -1);
    cJSON_AddNumberToObject(g, "presence_penalty", q->presence_penalty);
    cJSON_AddNumberToObject(g, "frequency_penalty", q->frequency_penalty);
    cJSON_AddBoolToObject(g, "ignore_eos", q->ignore_eos);
    cJSON_AddNumberToObject(g, "n_probs", q->logprobs ? q->top_logprobs : 0);
    cJSON_AddBoolToObject(g, "stream", q->stream);
    for (int i = 0; i < q->n_stop; i++) cJSON_AddItemToArray(stop, ngx_http_llm_clean_string(q->stop[i], q->stop_len[i]));
    return g;
}

/* The answer's fields after "stop" (the stream's last event has them too). */
static int lc_tail(ngx_http_llm_lc_t *lc, cJSON *o, const ngx_http_llm_end_t *end)
{
    uint64_t now = lc_now(), first = lc->t_first ? lc->t_first : now;
    double pms = (double)(first - lc->t0) / 1e6, gms = (double)(now - first) / 1e6;
    uint32_t pn = end->input > end->cached ? end->input - end->cached : 0, gn = end->output;
    const char *type = end->finish != NULL && !strcmp(end->finish, "length") ? "limit" : end->stop_seq ? "word" : "eos";
    cJSON *g = lc_settings(lc), *t = cJSON_CreateObject(), *prompt = NULL;
    if (g == NULL || t == NULL) goto oom;
    cJSON_AddStringToObject(o, "model", lc->resp->model);
    cJSON_AddNumberToObject(o, "tokens_predicted", gn);
    cJSON_AddNumberToObject(o, "tokens_evaluated", end->input);
    cJSON_AddItemToObject(o, "generation_settings", g);
    g = NULL;
    prompt = lc->prompt_text ? ngx_http_llm_clean_string(lc->prompt_text, strlen(lc->prompt_text))
           : ngx_http_llm_clean_string(lc->q->prompt, lc->q->prompt ? lc->q->prompt_len : 0);
    if (prompt == NULL) goto oom;
    cJSON_AddItemToObject(o, "prompt", prompt);
    cJSON_AddBoolToObject(o, "has_new_line", lc->text.len > 0 && memchr(lc->text.data, '\n', lc->text.len) != NULL);
    cJSON_AddBoolToObject(o, "truncated", 0);
    cJSON_AddStringToObject(o, "stop_type", type);
    cJSON_AddStringToObject(o, "stopping_word", end->stop_seq ? end->stop_seq : "");
    cJSON_AddNumberToObject(o, "tokens_cached", end->cached);
    cJSON_AddNumberToObject(t, "prompt_n", pn);
    cJSON_AddNumberToObject(t, "prompt_ms", pms);
    cJSON_AddNumberToObject(t, "prompt_per_token_ms", pn ? pms / pn : 0);
    cJSON_AddNumberToObject(t, "prompt_per_second", pms > 0 ? pn * 1e3 / pms : 0);
    cJSON_AddNumberToObject(t, "predicted_n", gn);
    cJSON_AddNumberToObject(t, "predicted_ms", gms);
    cJSON_AddNumberToObject(t, "predicted_per_token_ms", gn ? gms / gn : 0);
    cJSON_AddNumberToObject(t, "predicted_per_second", gms > 0 ? gn * 1e3 / gms : 0);
    cJSON_AddItemToObject(o, "timings", t);
    return 0;
oom:
    cJSON_Delete(g);
    cJSON_Delete(t);
    return -1;
}

/* response_fields: the answer's fields kept, "a/b" as the member b of a under the name "a/b" (as llama.cpp
 * names it); a field the answer does not have is left out. Takes o; NULL out of memory. */
static cJSON *lc_fields(const cJSON *fields, cJSON *o)
{
    if (fields == NULL || o == NULL) return o;
    cJSON *n = cJSON_CreateObject();
    const cJSON *f;
    cJSON_ArrayForEach(f, fields) {
        const cJSON *v = o;
        const char *p = f->valuestring;
        char part[128];
        while (v != NULL && *p) {
            const char *sl = strchr(p, '/');
            size_t l = sl ? (size_t)(sl - p) : strlen(p);
            if (l >= sizeof part) { v = NULL; break; }
            memcpy(part, p, l);
            part[l] = 0;
            v = cJSON_GetObjectItemCaseSensitive(v, part);
            p += l + (sl != NULL);
        }
        if (n != NULL && v != NULL && v != o && cJSON_GetObjectItemCaseSensitive(n, f->valuestring) == NULL)
            cJSON_AddItemToObject(n, f->valuestring, cJSON_Duplicate(v, 1));
    }
    cJSON_Delete(o);
    return n;
}

static int lc_end(void *b, cJSON *ev, const ngx_http_llm_end_t *end, cJSON **out)
{
    ngx_http_llm_lc_t *lc = b;
    if (ev != NULL) {
        cJSON *last = lc_head("", 0, cJSON_CreateArray(), 1);
        if (last == NULL || lc_tail(lc, last, end) || (last = lc_fields(lc->q->response_fields, last)) == NULL) {
            cJSON_Delete(last);
            return -1;
        }
        cJSON_AddItemToArray(ev, last);
    }
    if (out == NULL) return 0;
    cJSON *ids = lc->ids;
    lc->ids = NULL;
    cJSON *o = lc_head(lc->text.data, lc->text.len, ids, 1);
    if (o == NULL || lc_tail(lc, o, end)) { cJSON_Delete(o); return -1; }
    if (lc->probs) {
        cJSON_AddItemToObject(o, "completion_probabilities", lc->probs_all ? lc->probs_all : cJSON_CreateArray());
        lc->probs_all = NULL;
    }
    if ((o = lc_fields(lc->q->response_fields, o)) == NULL) return -1;
    *out = o;
    return 0;
}

/* llama.cpp's error object: {"error": {"code", "message", "type"}}. */
static int lc_error(void *b, cJSON *ev, const char *code, const char *type, const char *message)
{
    (void)b;
    (void)code;
    cJSON *o = cJSON_CreateObject(), *e = o ? cJSON_AddObjectToObject(o, "error") : NULL;
    if (e == NULL || !cJSON_AddNumberToObject(e, "code", 500) || !cJSON_AddStringToObject(e, "message", message) ||
        !cJSON_AddStringToObject(e, "type", type ? type : "server_error")) {
        cJSON_Delete(o);
        return -1;
    }
    cJSON_AddItemToArray(ev, o);
    return 0;
}

const ngx_http_llm_typed_t ngx_http_llm_lc_typed = { lc_begin, lc_text, lc_calls, lc_end, lc_error, lc_free, 0, 1 };
