/* JSON shapes of OpenAI responses, stream chunks and logprobs (cJSON, no nginx). */
#ifndef NGX_HTTP_LLM_FORMAT_H
#define NGX_HTTP_LLM_FORMAT_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "llm_api.h"
#include "llm_shm.h"
#include "tokenizer.h"

typedef struct {
    char  *data;
    size_t len, cap;
} ngx_http_llm_text_t;

/* 0, or -1 out of memory. */
int ngx_http_llm_text_append(ngx_http_llm_text_t *t, const char *s, size_t len);

typedef struct {
    llm_api_kind kind;      /* LLM_API_COMPLETIONS or LLM_API_CHAT */
    char         id[64];
    char         model[256];
    long long    created;
} ngx_http_llm_resp_t;

void ngx_http_llm_resp_init(ngx_http_llm_resp_t *r, llm_api_kind kind, const char *model);

/* A tool call (function calling): one of the message's tool_calls. */
typedef struct {
    char        id[32];     /* "call_..." */
    const char *name;
    const char *args;       /* JSON text */
} ngx_http_llm_call_t;

typedef struct {
    const char *text;       /* with calls: the content before them (len 0: content null) */
    size_t      len;
    const char *finish;     /* "stop" / "length" / "tool_calls" */
    cJSON      *logprobs;   /* taken by ngx_http_llm_response, or NULL */
    const ngx_http_llm_call_t *calls; /* chat: the answer's tool calls, or NULL */
    int         n_calls;
    int         think;      /* chat with a reasoning model: message.reasoning_content (null when none) */
    const char *reasoning;
    size_t      reasoning_len;
} ngx_http_llm_choice_t;

/* Token counts: usage {"prompt_tokens", "completion_tokens", "total_tokens"}, with
 * "prompt_tokens_details": {"cached_tokens"} when the prefix cache served some of the prompt. */
typedef struct {
    uint32_t prompt, completion, cached;
} ngx_http_llm_usage_t;

/* How an answer ended, for the APIs whose answers are built as typed events (below). */
typedef struct {
    const char *finish;     /* "stop", "length" or "tool_calls" */
    const char *stop_seq;   /* the stop string that ended it, or NULL */
    uint32_t    input, output, cached, reasoning; /* token counts: prompt, generated, prompt from the prefix
                                                   * cache, generated inside <think> */
} ngx_http_llm_end_t;

/* An API whose answer is built as typed events (the Responses API, ngx_http_llm_responses_out.h; Anthropic's
 * Messages API, ngx_http_llm_messages_out.h): its builder's operations on the builder b. Each appends its
 * events ({"type", ...}, sent as "event: <type>" / "data: <json>") to the array ev (NULL: none made, the
 * builder only keeps the answer) and returns 0, or -1 out of memory.
 *   begin: the stream opens;  text: reasoning (1) or answer text (0), lp a chat logprobs object or NULL (taken);
 *   calls: the answer's tool calls;  end: the answer is over, *out (when out is not NULL) the whole response
 *   object;  error: a failure mid-stream;  free: the builder's memory. An ndjson API (Ollama's,
 *   ngx_http_llm_ollama_out.h) sends each event as a line of JSON and needs no "type" in it. */
typedef struct {
    int  (*begin)(void *b, cJSON *ev);
    int  (*text)(void *b, cJSON *ev, int reasoning, const char *s, size_t len, cJSON *lp);
    int  (*calls)(void *b, cJSON *ev, const ngx_http_llm_call_t *calls, int n);
    int  (*end)(void *b, cJSON *ev, const ngx_http_llm_end_t *end, cJSON **out);
    int  (*error)(void *b, cJSON *ev, const char *code, const char *type, const char *message);
    void (*free)(void *b);
    int  ndjson;            /* each event is sent as one line of JSON (Ollama's streams), not as SSE */
    int  data_only;         /* each event is sent as "data: <json>" with no "event:" line (TGI's streams) */
} ngx_http_llm_typed_t;

/* Whole (non-streaming) response. */
cJSON *ngx_http_llm_response(const ngx_http_llm_resp_t *r, ngx_http_llm_choice_t *ch, int n,
                             const ngx_http_llm_usage_t *u);
/* One stream chunk for choice i: text, or (role) the chat role opener, or a finish reason. Takes lp. */
cJSON *ngx_http_llm_chunk(const ngx_http_llm_resp_t *r, int i, const char *text, size_t len, int role,
                          cJSON *lp, const char *finish);
/* The stream chunk of choice i's tool calls, each whole (the SDKs join deltas; one is a whole call). */
cJSON *ngx_http_llm_call_chunk(const ngx_http_llm_resp_t *r, int i, const ngx_http_llm_call_t *calls, int n);
/* A stream chunk of choice i's reasoning: delta.reasoning_content. */
cJSON *ngx_http_llm_reasoning_chunk(const ngx_http_llm_resp_t *r, int i, const char *text, size_t len);
cJSON *ngx_http_llm_usage_chunk(const ngx_http_llm_resp_t *r, const ngx_http_llm_usage_t *u);

/* Logprobs: one entry per token, collected into the response's shape
 * (chat: {"content":[...]}, completions: tokens / token_logprobs / top_logprobs / text_offset). */
cJSON *ngx_http_llm_logprob_entry(const ngx_http_llm_resp_t *r, const llm_tokenizer *tok,
                                  const llm_shm_token *tk, int top_n, size_t text_off);
/* The same for a prompt's first token (echo): logprob and top_logprobs null. */
cJSON *ngx_http_llm_logprob_entry_null(const ngx_http_llm_resp_t *r, const llm_tokenizer *tok, int32_t id,
                                       size_t text_off);
cJSON *ngx_http_llm_logprobs_new(const ngx_http_llm_resp_t *r);
void   ngx_http_llm_logprobs_add(const ngx_http_llm_resp_t *r, cJSON *lp, cJSON *entry); /* takes entry */
cJSON *ngx_http_llm_logprobs_wrap(const ngx_http_llm_resp_t *r, cJSON *entry);      /* new + add */

/* s's bytes as a JSON array of numbers (logprobs' "bytes"); NULL out of memory. */
cJSON *ngx_http_llm_bytes_array(const char *s, size_t len);
/* Copies s into a NUL-terminated string of valid UTF-8 (invalid bytes -> U+FFFD); malloc'd. */
char *ngx_http_llm_utf8_clean(const char *s, size_t len);
/* The same as a cJSON string (s may be NULL when len is 0); NULL out of memory. */
cJSON *ngx_http_llm_clean_string(const char *s, size_t len);

#endif
