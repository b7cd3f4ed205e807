/* Anthropic's Messages API (POST /v1/messages, what Claude clients and the Anthropic SDKs speak) as a way into
 * the chat path: a Messages body is turned into the chat-completions body it means, which llm_api.c then
 * parses and checks as any chat body:
 *   system (a string or text blocks) -> a system message first,
 *   messages: text blocks -> content, an assistant's tool_use blocks -> its tool_calls (input as JSON text),
 *     a user's tool_result blocks -> tool messages (in order, before its text), thinking blocks left out,
 *   stop_sequences -> stop, tools ({"name", "description", "input_schema"}) -> chat tools,
 *   tool_choice auto / any / tool / none -> auto / required / named / none (disable_parallel_tool_use ->
 *   parallel_tool_calls false), thinking {"type": "disabled"} -> enable_thinking false,
 *   metadata.user_id -> user.
 * Images, documents, server tools (web search, code execution, ...) and MCP servers are refused. Plain C +
 * cJSON (no nginx headers). */
#ifndef LLM_MESSAGES_H
#define LLM_MESSAGES_H

#include <cjson/cJSON.h>

#include "llm_api.h"

#define LLM_MESSAGES_MAX_BLOCKS 4096 /* content blocks over all messages */

/* The chat body for Messages body `body` (a new tree; body is not changed), or NULL with e set (400). */
cJSON *llm_messages_to_chat(const cJSON *body, llm_api_err *e);

/* An error found in the chat body names the field as the Messages body has it (stop -> stop_sequences, ...). */
void   llm_messages_param(llm_api_err *e);

#endif
