/* llama.cpp server's /completion output: the answer {"index", "content", "tokens", "id_slot", "stop": true,
 * "model", "tokens_predicted", "tokens_evaluated", "generation_settings", "prompt", "has_new_line", "truncated",
 * "stop_type" ("eos", "limit" or "word"), "stopping_word", "tokens_cached", "timings" {prompt_n, prompt_ms,
 * prompt_per_token_ms, prompt_per_second, predicted_n, predicted_ms, predicted_per_token_ms,
 * predicted_per_second}, and with n_probs "completion_probabilities" [{"id", "token", "bytes", "logprob",
 * "top_logprobs": [...]}]}; streamed, one "data: {"index", "content", "tokens": [id], "stop": false, "id_slot",
 * "tokens_predicted", "tokens_evaluated"}" event a token (its content the text it released), then the last one
 * with "stop": true and the answer's other fields (its content empty); no [DONE]. Times as measured in the nginx
 * worker (the prompt: until the first token). cJSON only (no nginx). */
#ifndef NGX_HTTP_LLM_LCPP_OUT_H
#define NGX_HTTP_LLM_LCPP_OUT_H

#include <cjson/cJSON.h>

#include "ngx_http_llm_format.h"

typedef struct {
    const ngx_http_llm_resp_t *resp; /* model */
    const llm_api_req *q;     /* the request (generation_settings, prompt); outlives the builder */
    int          probs;       /* n_probs > 0: completion_probabilities */
    int          max_tokens;  /* n_predict as served */
    int32_t      n_ctx;
    uint32_t     n_prompt;    /* the prompt's tokens (tokens_evaluated) */
    char        *prompt_text; /* the prompt as text when the request did not give it whole (token ids, /infill):
                               * malloc'd, taken at init; or NULL */
    ngx_http_llm_text_t text; /* the content so far */
    cJSON       *ids;         /* the generated ids (return_tokens, or the stream's count) */
    cJSON       *probs_all;   /* the whole answer: completion_probabilities */
    uint32_t     n_tokens;    /* tokens so far */
    uint64_t     t0, t_first; /* CLOCK_MONOTONIC ns: the request, its first token (0: none yet) */
} ngx_http_llm_lc_t;

/* 0, or -1 out of memory. */
int  ngx_http_llm_lc_init(ngx_http_llm_lc_t *lc, const ngx_http_llm_resp_t *resp, const llm_api_req *q, int max_tokens,
                          int32_t n_ctx, uint32_t n_prompt, char *prompt_text);
/* The first token came (the prompt's time ends). */
void ngx_http_llm_lc_first(ngx_http_llm_lc_t *lc);

/* The builder as ngx_http_llm_typed_t operations (data_only); its text operation takes the tokens as
 * ngx_http_llm_tg_token makes them (ngx_http_llm_tgi_out.h). */
extern const ngx_http_llm_typed_t ngx_http_llm_lc_typed;

#endif
