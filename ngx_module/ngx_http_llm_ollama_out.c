/* Ollama's API answer and stream lines (see ngx_http_llm_ollama_out.h). */
#include "ngx_http_llm_ollama_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ngx_http_llm_ol_init(ngx_http_llm_ol_t *ol, const ngx_http_llm_resp_t *resp, int generate)
{
    memset(ol, 0, sizeof *ol);
    ol->resp = resp;
    ol->generate = generate;
    ol->t0 = mono_ns();
    return 0;
}

void ngx_http_llm_ol_free(ngx_http_llm_ol_t *ol)
{
    free(ol->content.data);
    free(ol->thinking.data);
    cJSON_Delete(ol->calls);
    memset(ol, 0, sizeof *ol);
}

void ngx_http_llm_ol_first(ngx_http_llm_ol_t *ol)
{
    if (ol->t_first == 0) ol->t_first = mono_ns();
}

/* {"model", "created_at"} (created_at: RFC 3339 in UTC with nanoseconds, as Ollama writes it). */
static cJSON *ol_head(const char *model)
{
    struct timespec ts;
    struct tm tm;
    char at[48];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(at + n, sizeof at - n, ".%09ldZ", (long)ts.tv_nsec);
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NULL;
    if (!cJSON_AddStringToObject(o, "model", model) || !cJSON_AddStringToObject(o, "created_at", at)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *ngx_http_llm_ol_load(const char *model)
{
    cJSON *o = ol_head(model);
    if (o == NULL) return NULL;
    if (!cJSON_AddStringToObject(o, "response", "") || !cJSON_AddTrueToObject(o, "done") ||
        !cJSON_AddStringToObject(o, "done_reason", "load")) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* A line (or the answer) with its text fields: content (NULL: ""), thinking (NULL: none), calls (a copy). */
static cJSON *ol_item(const ngx_http_llm_ol_t *ol, const char *content, size_t clen, const char *thinking,
                      size_t tlen, const cJSON *calls, int done)
{
    cJSON *o = ol_head(ol->resp->model), *m = o;
    if (o == NULL) return NULL;
    if (!ol->generate) {
        m = cJSON_AddObjectToObject(o, "message");
        if (m == NULL || !cJSON_AddStringToObject(m, "role", "assistant")) goto oom;
    }
    cJSON *c = ngx_http_llm_clean_string(content, content ? clen : 0);
    if (c == NULL) goto oom;
    cJSON_AddItemToObject(m, ol->generate ? "response" : "content", c);
    if (thinking != NULL) {
        cJSON *t = ngx_http_llm_clean_string(thinking, tlen);
        if (t == NULL) goto oom;
        cJSON_AddItemToObject(m, "thinking", t);
    }
    if (calls != NULL) {
        cJSON *d = cJSON_Duplicate(calls, 1);
        if (d == NULL) goto oom;
        cJSON_AddItemToObject(m, "tool_calls", d);
    }
    if (!cJSON_AddBoolToObject(o, "done", done)) goto oom;
    return o;
oom:
    cJSON_Delete(o);
    return NULL;
}

/* Appends a line to ev (ev NULL: nothing); 0, or -1 out of memory. */
static int ol_push(cJSON *ev, cJSON *line)
{
    if (line == NULL) return -1;
    cJSON_AddItemToArray(ev, line);
    return 0;
}

static int ol_begin(void *b, cJSON *ev)
{
    (void)b;
    (void)ev; /* Ollama's stream opens with its first piece */
    return 0;
}

static int ol_text(void *b, cJSON *ev, int reasoning, const char *s, size_t len, cJSON *lp)
{
    ngx_http_llm_ol_t *ol = b;
    cJSON_Delete(lp); /* the API has no logprobs */
    if (len == 0) return 0;
    if (ngx_http_llm_text_append(reasoning ? &ol->thinking : &ol->content, s, len)) return -1;
    if (ev == NULL) return 0;
    return ol_push(ev, reasoning ? ol_item(ol, NULL, 0, s, len, NULL, 0) : ol_item(ol, s, len, NULL, 0, NULL, 0));
}

/* Ollama's tool call: {"function": {"name", "arguments": {...}}} (arguments an object; {} when they are not). */
static int ol_calls(void *b, cJSON *ev, const ngx_http_llm_call_t *calls, int n)
{
    ngx_http_llm_ol_t *ol = b;
    cJSON *now = cJSON_CreateArray();
    if (now == NULL) return -1;
    for (int k = 0; k < n; k++) {
        cJSON *c = cJSON_CreateObject(), *f = c ? cJSON_AddObjectToObject(c, "function") : NULL;
        cJSON_AddItemToArray(now, c);
        if (f == NULL || !cJSON_AddStringToObject(f, "name", calls[k].name)) goto oom;
        cJSON *args = cJSON_Parse(calls[k].args);
        if (!cJSON_IsObject(args)) {
            cJSON_Delete(args);
            args = cJSON_CreateObject();
        }
        if (args == NULL) goto oom;
        cJSON_AddItemToObject(f, "arguments", args);
    }
    if (ev != NULL && ol_push(ev, ol_item(ol, NULL, 0, NULL, 0, now, 0))) goto oom;
    if (ol->calls == NULL) {
        ol->calls = now;
        return 0;
    }
    cJSON *c;
    while ((c = cJSON_DetachItemFromArray(now, 0)) != NULL) cJSON_AddItemToArray(ol->calls, c);
    cJSON_Delete(now);
    return 0;
oom:
    cJSON_Delete(now);
    return -1;
}

/* done_reason, the counts and the durations. */
static int ol_done(const ngx_http_llm_ol_t *ol, cJSON *o, const ngx_http_llm_end_t *end)
{
    uint64_t now = mono_ns(), first = ol->t_first ? ol->t_first : now;
    const char *reason = end->finish != NULL && !strcmp(end->finish, "length") ? "length" : "stop";
    return cJSON_AddStringToObject(o, "done_reason", reason) &&
           cJSON_AddNumberToObject(o, "total_duration", (double)(now - ol->t0)) &&
           cJSON_AddNumberToObject(o, "load_duration", 0) &&
           cJSON_AddNumberToObject(o, "prompt_eval_count", end->input) &&
           cJSON_AddNumberToObject(o, "prompt_eval_duration", (double)(first - ol->t0)) &&
           cJSON_AddNumberToObject(o, "eval_count", end->output) &&
           cJSON_AddNumberToObject(o, "eval_duration", (double)(now - first)) ? 0 : -1;
}

static int ol_end(void *b, cJSON *ev, const ngx_http_llm_end_t *end, cJSON **out)
{
    ngx_http_llm_ol_t *ol = b;
    if (ev != NULL) { /* the last line: no text of its own */
        cJSON *last = ol_item(ol, NULL, 0, NULL, 0, NULL, 1);
        if (ol_push(ev, last) || ol_done(ol, last, end)) return -1;
    }
    if (out != NULL) {
        *out = ol_item(ol, ol->content.data, ol->content.len, ol->thinking.len ? ol->thinking.data : NULL,
                       ol->thinking.len, ol->calls, 1);
        if (*out == NULL || ol_done(ol, *out, end)) return -1;
    }
    return 0;
}

static int ol_error(void *b, cJSON *ev, const char *code, const char *type, const char *message)
{
    (void)b;
    (void)code;
    (void)type;
    cJSON *o = cJSON_CreateObject();
    if (o == NULL || !cJSON_AddStringToObject(o, "error", message)) {
        cJSON_Delete(o);
        return -1;
    }
    cJSON_AddItemToArray(ev, o);
    return 0;
}

static void ol_free(void *b) { ngx_http_llm_ol_free(b); }

const ngx_http_llm_typed_t ngx_http_llm_ol_typed = { ol_begin, ol_text, ol_calls, ol_end, ol_error, ol_free, 1, 0 };
