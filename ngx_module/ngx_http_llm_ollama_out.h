/* Ollama's API output (POST /api/chat, /api/generate): the answer object and, streamed, its lines of
 * newline-delimited JSON (application/x-ndjson): one {"model", "created_at", "message": {"role":
 * "assistant", "content" | "thinking" | "tool_calls"}, "done": false} per piece of the answer (/api/generate:
 * "response" / "thinking" instead of "message"), then the last one with "done": true, "done_reason"
 * ("stop" or "length") and the counts and durations (ns): total_duration, load_duration (0: the model is
 * loaded by the engine before anything is served), prompt_eval_count / _duration (until the first token),
 * eval_count / _duration (after it), as measured in the nginx worker. The same builder makes the whole
 * answer (stream false). cJSON only (no nginx). */
#ifndef NGX_HTTP_LLM_OLLAMA_OUT_H
#define NGX_HTTP_LLM_OLLAMA_OUT_H

#include <cjson/cJSON.h>

#include "ngx_http_llm_format.h"

typedef struct {
    const ngx_http_llm_resp_t *resp; /* model */
    int          generate;  /* /api/generate's shape */
    ngx_http_llm_text_t content, thinking; /* the answer so far */
    cJSON       *calls;     /* its tool_calls, or NULL */
    uint64_t     t0, t_first; /* CLOCK_MONOTONIC ns (llm_shm_now_ns's clock): the request (set at init; the caller
                               * may set an earlier one), its first token (0: none yet) */
} ngx_http_llm_ol_t;

/* 0, or -1 out of memory. generate: /api/generate's shape. */
int  ngx_http_llm_ol_init(ngx_http_llm_ol_t *ol, const ngx_http_llm_resp_t *resp, int generate);
void ngx_http_llm_ol_free(ngx_http_llm_ol_t *ol);
/* The first token came (prompt_eval_duration ends, eval_duration starts). */
void ngx_http_llm_ol_first(ngx_http_llm_ol_t *ol);

/* The builder as ngx_http_llm_typed_t operations (ndjson: each event is one line). */
extern const ngx_http_llm_typed_t ngx_http_llm_ol_typed;

/* Ollama's answer to /api/generate without a prompt (the model "loaded"): done, done_reason "load". */
cJSON *ngx_http_llm_ol_load(const char *model);

#endif
