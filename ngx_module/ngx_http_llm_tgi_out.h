/* TGI's API output (POST /generate, /generate_stream, POST /): the answer {"generated_text", "details"} (POST /
 * without stream: a list of one) and, streamed, one Server-Sent Event per token, "data: {"index", "token":
 * {"id", "text", "logprob", "special"}, "top_tokens", "generated_text": null, "details": null}", the last one
 * with generated_text and (parameters.details) details {"finish_reason" ("length", "eos_token" or
 * "stop_sequence"), "generated_tokens", "seed" (null when greedy), "input_length"}; no [DONE]. A token's text in
 * the stream is the text that token released (a stop string's first bytes are held until it is known not to be
 * one; a character split over tokens comes whole), so the tokens' texts join into generated_text. The whole
 * answer's details list each token with its own text. cJSON only (no nginx). */
#ifndef NGX_HTTP_LLM_TGI_OUT_H
#define NGX_HTTP_LLM_TGI_OUT_H

#include <cjson/cJSON.h>

#include "ngx_http_llm_format.h"

typedef struct {
    int          list;        /* POST / without stream: the answer in a list of one */
    int          details;     /* parameters.details */
    const char  *prompt;      /* parameters.return_full_text: generated_text starts with it; else NULL */
    size_t       prompt_len;
    int          sampled;     /* details.seed is seed (else null: greedy) */
    uint64_t     seed;
    int32_t      eos_id;      /* the token a stream that released no text ends with (-1: none) */
    ngx_http_llm_text_t text; /* the generated text so far */
    cJSON       *held;        /* streamed: the last token's event, sent when the next token comes or at the end */
    ngx_http_llm_text_t held_text; /* its text (a flush may add to it) */
    ngx_http_llm_text_t pending;   /* text that came before any token, sent with the first */
    int          index;       /* the stream's token index (from 1) */
    cJSON       *tokens;      /* the whole answer: details.tokens (each may hold its "top_tokens"), or NULL */
} ngx_http_llm_tg_t;

/* 0, or -1 out of memory. */
int ngx_http_llm_tg_init(ngx_http_llm_tg_t *tg, const llm_api_req *q, int sampled, uint64_t seed, int32_t eos_id);

/* TGI's token {"id", "text" (the token's own), "logprob", "special": false}, with "top_tokens" (the n_top
 * most likely, each such a token) when top_n > 0; NULL out of memory. Given to the builder's text operation. */
cJSON *ngx_http_llm_tg_token(const llm_tokenizer *tok, const llm_shm_token *tk, int top_n);

/* The builder as ngx_http_llm_typed_t operations (data_only: each event is "data: <json>"). */
extern const ngx_http_llm_typed_t ngx_http_llm_tg_typed;

#endif
