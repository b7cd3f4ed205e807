/* Anthropic's Messages API output (POST /v1/messages): the message object and, streamed, its events
 * (message_start, content_block_start / _delta / _stop per block, message_delta, message_stop), built as the
 * answer arrives. The message's content blocks, in order: a thinking block (a reasoning model's <think> part),
 * a text block, then one tool_use block per tool call (input: the call's arguments as an object). The same
 * builder makes the whole message (no events asked for) and the stream. cJSON only (no nginx). */
#ifndef NGX_HTTP_LLM_MESSAGES_OUT_H
#define NGX_HTTP_LLM_MESSAGES_OUT_H

#include <cjson/cJSON.h>

#include "ngx_http_llm_format.h"

typedef struct {
    const ngx_http_llm_resp_t *resp;  /* id ("msg_..."), model */
    int          n_blocks;  /* content blocks opened so far */
    int          open;      /* the block being written: 0 none, 1 thinking, 2 text */
    ngx_http_llm_text_t text; /* the open block's text so far */
    cJSON       *content;   /* the blocks done */
    uint32_t     input;     /* prompt tokens (message_start's usage) */
} ngx_http_llm_ms_t;

/* 0, or -1 out of memory. input_tokens: the prompt's (the stream's first event reports them). */
int  ngx_http_llm_ms_init(ngx_http_llm_ms_t *ms, const ngx_http_llm_resp_t *resp, uint32_t input_tokens);
void ngx_http_llm_ms_free(ngx_http_llm_ms_t *ms);

/* The builder as ngx_http_llm_typed_t operations (b: an ngx_http_llm_ms_t made by ngx_http_llm_ms_init). */
extern const ngx_http_llm_typed_t ngx_http_llm_ms_typed;

/* {"type": "error", "error": {"type", "message"}}: Anthropic's error object for an API error; malloc'd text. */
char *ngx_http_llm_ms_error_json(const llm_api_err *e);

#endif
