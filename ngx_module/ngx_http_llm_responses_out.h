/* The Responses API's output (POST /v1/responses): the response object and, streamed, its typed events
 * (response.created, response.output_item.added, response.output_text.delta, ..., response.completed), built
 * as the answer arrives. An answer's output items, in order: a reasoning item (a reasoning model's <think>
 * part), a message (its text), then one function_call item per tool call. The same builder makes the whole
 * response (no events asked for: ev NULL) and the stream. cJSON only (no nginx). */
#ifndef NGX_HTTP_LLM_RESPONSES_OUT_H
#define NGX_HTTP_LLM_RESPONSES_OUT_H

#include <stdint.h>
#include <cjson/cJSON.h>

#include "ngx_http_llm_format.h"

typedef struct {
    const ngx_http_llm_resp_t *resp;  /* id ("resp_..."), model, created */
    const cJSON *req;       /* the Responses body: the fields the response echoes (instructions, tools, ...) */
    int          seq;       /* the next event's sequence_number */
    int          n_items;   /* output items opened so far */
    int          open;      /* the item being written: 0 none, 1 reasoning, 2 message */
    int          had_message;
    char         item_id[48];
    ngx_http_llm_text_t text; /* the open item's text so far */
    cJSON       *lp;        /* the open message's logprobs entries, or NULL (no logprobs asked) */
    int          logprobs;  /* the message's text carries logprobs */
    int          stored;    /* the response is kept (llm_responses_store): its "store" */
    cJSON       *output;    /* the items done */
} ngx_http_llm_rs_t;

/* 0, or -1 out of memory. stored: the response will be kept. */
int  ngx_http_llm_rs_init(ngx_http_llm_rs_t *rs, const ngx_http_llm_resp_t *resp, const cJSON *req, int logprobs,
                          int stored);
void ngx_http_llm_rs_free(ngx_http_llm_rs_t *rs);

/* Each appends its events ({"type", "sequence_number", ...}) to the array ev (NULL: none are made) and returns
 * 0, or -1 out of memory. */
/* response.created and response.in_progress. */
int ngx_http_llm_rs_begin(ngx_http_llm_rs_t *rs, cJSON *ev);
/* Text of the answer: reasoning (1) or the message's (0). lp: a chat logprobs object ({"content": [...]}) for
 * the message's text, or NULL; taken. Logprobs of reasoning tokens are dropped (the API has none for them). */
int ngx_http_llm_rs_text(ngx_http_llm_rs_t *rs, cJSON *ev, int reasoning, const char *s, size_t len, cJSON *lp);
/* The answer's tool calls, each a function_call item. */
int ngx_http_llm_rs_calls(ngx_http_llm_rs_t *rs, cJSON *ev, const ngx_http_llm_call_t *calls, int n);
/* The answer is over: the open item closes, then response.completed (or response.incomplete after
 * max_output_tokens). *out, when out is not NULL: the whole response object. */
int ngx_http_llm_rs_end(ngx_http_llm_rs_t *rs, cJSON *ev, const ngx_http_llm_end_t *end, cJSON **out);
/* A failure mid-stream: an "error" event, then response.failed. */
int ngx_http_llm_rs_error(ngx_http_llm_rs_t *rs, cJSON *ev, const char *code, const char *message);

/* The builder as ngx_http_llm_typed_t operations (b: an ngx_http_llm_rs_t made by ngx_http_llm_rs_init). */
extern const ngx_http_llm_typed_t ngx_http_llm_rs_typed;

#endif
