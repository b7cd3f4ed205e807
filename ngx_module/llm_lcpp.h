/* llama.cpp server's own completion API (POST /completion, also /completions: not the OpenAI one) -> the
 * completions body it means, so that clients written for llama.cpp's server (its native endpoint: SillyTavern's
 * and other front ends' llama.cpp backends, scripts) run on the same path as the OpenAI API. Plain C + cJSON
 * (no nginx headers).
 *
 * prompt (a string or token ids), n_predict (-1: as many as the server allows; unset: its default),
 * temperature, top_k (0: off), top_p, min_p, typical_p, repeat_penalty, repeat_last_n (the penalties' window:
 * N tokens, -1 the whole context, 0 no penalty), presence_penalty, frequency_penalty, seed (-1: random), stop,
 * stream, ignore_eos, logit_bias ([[id, bias or false], ...] or {"id": bias}), n_probs (the alternatives of each
 * token, up to 20), return_tokens, grammar, json_schema. cache_prompt, id_slot, n_keep, min_keep, samplers,
 * n_cache_reuse, timings_per_token, return_progress and t_max_prompt_ms are accepted and change nothing (the
 * engine's prefix cache is always on; its sampler order is fixed); mirostat, dry_multiplier, xtc_probability and
 * dynatemp_range only at their neutral value (0), n_cmpl only 1, post_sampling_probs only false, lora only
 * empty: anything else is a 400 naming it. n_indent (a line after the first indented less ends the answer, cut
 * before its first character), t_max_predict_ms (once a newline is out, the answer ends that long after its
 * first token) and response_fields (the answer's fields kept, "a/b" as b of a under that name) are followed. Unset sampling parameters are this server's defaults (as on
 * every endpoint), not llama.cpp's (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05). */
#ifndef LLM_LCPP_H
#define LLM_LCPP_H

#include <cjson/cJSON.h>

#include "llm_api.h"

/* The completions body that body means, or NULL with e (a 400 naming the field). r gets the answer's options:
 * lcpp_tokens (return_tokens), penalty_last_n, max_tokens_all (n_predict -1), n_indent, t_max_predict_ms,
 * response_fields. infill: /infill's body (input_prefix, input_suffix, input_extra [{"filename", "text"}], prompt:
 * the text after the middle token, all optional): r->infill and its parts, the prompt made by the module. */
cJSON *llm_lcpp_to_body(const cJSON *body, int infill, llm_api_req *r, llm_api_err *e);

/* Names an error's param as llama.cpp's body has it (max_tokens -> n_predict, ...), in the message too. */
void llm_lcpp_param(llm_api_err *e);

#endif
