/* Function calling for the chat endpoint (OpenAI's tools / tool_choice) in Llama 3.1's JSON tool-call
 * format: the tools go into the prompt (engine/chat_template.h), the model answers a call as
 * {"name": ..., "parameters": {...}}, and such an answer goes back as a tool_calls message. With
 * tool_choice "required" or a named function the answer is held to the calls' JSON Schema
 * (engine/json_schema.h), so it is always a call; with "auto" the model chooses and the answer is read as
 * a call when it is one. Plain C + cJSON, like llm_api.c (no nginx headers). */
#ifndef LLM_TOOLS_H
#define LLM_TOOLS_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "llm_api.h"

#define LLM_API_MAX_TOOLS 64

enum {
    LLM_TOOLS_OFF = 0,  /* no tools, or tool_choice "none": the tools stay out of the prompt */
    LLM_TOOLS_AUTO,     /* the model calls one or answers in text */
    LLM_TOOLS_REQUIRED, /* the answer is a call of one of the tools */
    LLM_TOOLS_NAMED,    /* the answer is a call of tool_choice's function */
};

/* tools, tool_choice and parallel_tool_calls of a chat body into r: tool_mode, tools, tool_defs, and for
 * required / named the calls' schema in r->schema. 0, or -1 with e (400). */
int   llm_tools_parse(const cJSON *root, llm_api_req *r, llm_api_err *e);
/* An assistant message's tool_calls (message i) as the text the model wrote for them: malloc'd, or NULL
 * with e. Llama 3.1 writes one call a turn. */
char *llm_tools_history_call(const cJSON *tool_calls, size_t i, llm_api_err *e);
/* A generated text read as a call of one of r's tools (whitespace around it allowed; "arguments" taken for
 * "parameters"): 1 with *name and *args (compact JSON) malloc'd, else 0. */
int   llm_tools_output(const llm_api_req *r, const char *text, size_t len, char **name, char **args);
/* Python's json.dumps(v, ensure_ascii=False, indent=indent), as chat templates' tojson prints (indent < 0:
 * one line with ", " and ": "). malloc'd, or NULL. */
char *llm_tools_dumps(const cJSON *v, int indent);

#endif
