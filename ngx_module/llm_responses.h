/* OpenAI's Responses API (POST /v1/responses) as a way into the chat path: a Responses body is turned into
 * the chat-completions body it means, which llm_api.c then parses and checks as any chat body:
 *   input (a string, or message / function_call / function_call_output items) -> messages,
 *   instructions -> a system message before them, max_output_tokens -> max_tokens,
 *   flat function tools ({"type": "function", "name", "parameters"}) -> chat tools, tool_choice likewise,
 *   text.format -> response_format, include "message.output_text.logprobs" / top_logprobs -> logprobs,
 *   reasoning.effort "none" -> chat_template_kwargs.enable_thinking false.
 * previous_response_id is the module's to resolve (llm_responses_store: ngx_http_llm_store.c); conversation
 * objects and background responses are refused. Plain C + cJSON (no nginx headers). */
#ifndef LLM_RESPONSES_H
#define LLM_RESPONSES_H

#include <cjson/cJSON.h>

#include "llm_api.h"

#define LLM_RESPONSES_MAX_ITEMS 1024 /* input items */

/* The chat body for Responses body `body` (a new tree; body is not changed), or NULL with e set (400). past:
 * the conversation before previous_response_id as input items (they go before the body's input), or NULL:
 * then previous_response_id is refused. */
cJSON *llm_responses_to_chat(const cJSON *body, const cJSON *past, llm_api_err *e);

/* An error found in the chat body names the field as the Responses body has it (messages -> input, ...). */
void   llm_responses_param(llm_api_err *e);

#endif
