/* Hugging Face Text Generation Inference's API bodies (POST /generate, /generate_stream, and POST / which
 * streams when the body says "stream": true) -> the completions body they mean, so that TGI's clients
 * (huggingface_hub's InferenceClient.text_generation, @huggingface/inference's textGeneration, LangChain's
 * HuggingFaceEndpoint, ...) run on the same path as the OpenAI API. Plain C + cJSON (no nginx headers).
 *
 * {"inputs": "...", "parameters": {...}, "stream": bool}. parameters: max_new_tokens (max_tokens), temperature
 * (> 0), top_k (> 0), top_p (0 < p <= 1), repetition_penalty (> 0), frequency_penalty, seed, stop (a list of
 * strings), typical_p, do_sample (default false: greedy unless it or a sampling parameter is given, as TGI
 * decides),
 * details, return_full_text, truncate (only the input's last N tokens are read), top_n_tokens (the alternatives
 * of each token, up to 20), grammar ({"type": "json", "value": a JSON Schema (object or text)}, {"type":
 * "regex", "value": "..."}, {"type": "json_schema", "value": {"name", "schema"}}). best_of only 1,
 * watermark only false, decoder_input_details only false, adapter_id only null: anything else is
 * refused (422 "validation", as TGI refuses what it cannot do). Unknown parameters are ignored (as TGI). */
#ifndef LLM_TGI_H
#define LLM_TGI_H

#include <cjson/cJSON.h>

#include "llm_api.h"

/* The completions body that body means (with "stream" set from the endpoint, or from the body for POST /),
 * or NULL with e (a 400 naming the parameter; the module answers it as TGI's 422). kind: LLM_API_TGI,
 * _TGI_GENERATE or _TGI_STREAM. r gets the answer's options: tgi_details, tgi_full_text, keep_last. */
cJSON *llm_tgi_to_body(const cJSON *body, int kind, llm_api_req *r, llm_api_err *e);

/* Names an error's param as TGI's body has it (max_tokens -> parameters.max_new_tokens, ...). */
void llm_tgi_param(llm_api_err *e);

/* TGI's error object: {"error": message, "error_type": "validation" (4xx), "overloaded" (429, 503) or
 * "generation"}; malloc'd text. The status TGI answers with: 422 for what it calls validation (a 400 here). */
char *llm_tgi_error_json(const llm_api_err *e);
int   llm_tgi_status(int status);

#endif
