/* Function calling for the chat endpoint (OpenAI's tools / tool_choice) in the model's chat format
 * (engine/chat_template.h): Llama 3.1's JSON tool calls (the model answers one call as {"name": ...,
 * "parameters": {...}}), ChatML's Hermes / Qwen form (<tool_call>{"name": ..., "arguments": {...}}
 * </tool_call>, several in an answer), Mistral's ([TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]) or
 * Granite's (<|tool_call|>[...] likewise); [TOOL_CALLS] and <|tool_call|> are control tokens, which the
 * module's detokenizer keeps in the text when tools are on. The tools go into the prompt, and an answer that
 * is a call (or, in the tagged formats, ends in calls) goes back as a tool_calls message. With tool_choice
 * "required" or a named function the answer is held to the calls' JSON Schema (engine/json_schema.h), so it is
 * always well-formed calls; with "auto" the model chooses. Plain C + cJSON, like llm_api.c (no nginx headers). */
#ifndef LLM_TOOLS_H
#define LLM_TOOLS_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "llm_api.h"

#define LLM_API_MAX_TOOLS 64
#define LLM_TOOLS_MAX_CALLS 8 /* calls read from one answer (ChatML, Mistral; Llama 3 writes one) */

enum {
    LLM_TOOLS_OFF = 0,  /* no tools, or tool_choice "none": the tools stay out of the prompt */
    LLM_TOOLS_AUTO,     /* the model calls one or answers in text */
    LLM_TOOLS_REQUIRED, /* the answer is a call of one of the tools */
    LLM_TOOLS_NAMED,    /* the answer is a call of tool_choice's function */
};

/* A call read from an answer: name and arguments (compact JSON object text), malloc'd. */
typedef struct {
    char *name;
    char *args;
} llm_tool_call;

/* tools, tool_choice and parallel_tool_calls of a chat body into r (in r->chat_format: Llama 3, ChatML,
 * Granite or Mistral v3 / v3-tekken / v7, else a 400): tool_mode, tools, tool_defs, parallel_calls, and for
 * required / named the calls' schema in r->schema. 0, or -1 with e (400). */
int   llm_tools_parse(const cJSON *root, llm_api_req *r, llm_api_err *e);
/* 1 when the chat format has function calling (tools are refused for the others). */
int   llm_tools_supported(int chat_format);
/* An assistant message's tool_calls (message i) as the chat template takes them: *calls malloc'd (names and
 * ids point into the tree, arguments malloc'd as tojson prints them; llm_tools_calls_free), or -1 with e.
 * Llama 3 takes one call a message. */
int   llm_tools_history_calls(const cJSON *tool_calls, size_t i, int chat_format, llm_chat_call **calls, size_t *n,
                              llm_api_err *e);
void  llm_tools_calls_free(llm_chat_call *calls, size_t n);
/* tool_choice required / named in a format whose generation prompt opens the call (all but Qwen3-Coder's,
 * Seed-OSS's and GLM-4.5's XML calls, whose held answer is a JSON array of calls, written after any reasoning). */
int   llm_tools_prompt_opens_call(const llm_api_req *r);
/* A generated text read as calls of r's tools: the number of calls (at most LLM_TOOLS_MAX_CALLS; 0: the
 * text is plain content), each in calls[] (llm_tool_call_free each), and *content_len the bytes of text
 * before the first call (ChatML and Mistral: text may precede the calls; whitespace before them left out).
 * Llama 3 (and a ChatML answer that tool_choice opened inside a call): the whole text, around whitespace, is
 * one call's JSON ("arguments" taken for "parameters" and the other way round); Mistral's and Granite's,
 * after the tag (the prompt's with tool_choice required or named): a JSON array of calls (or one call); Qwen3-Coder's,
 * Seed-OSS's and GLM-4.5's with tool_choice required or named: such an array alone. GLM-4.5's calls (auto):
 * <tool_call>NAME <arg_key>K</arg_key> <arg_value>V</arg_value> ... </tool_call> blocks, each closed, the values typed
 * by the tool's parameter schema as Qwen3-Coder's are. */
int   llm_tools_output(const llm_api_req *r, const char *text, size_t len, llm_tool_call *calls, size_t *content_len);
void  llm_tool_call_free(llm_tool_call *c);
/* tool_choice auto, streamed: 1 while text (so far) may still turn out to be a call. */
int   llm_tools_may_be_call(const llm_api_req *r, const char *text, size_t len);
/* The tag r's format opens calls with, which text may come before ("<tool_call>", "[TOOL_CALLS]",
 * "<|tool_call|>"), or NULL. */
const char *llm_tools_call_tag(const llm_api_req *r);
/* The tags r's calls are read by (the call tag, its closing tag, GLM-4.5's argument tags), at most cap of them:
 * their text must reach the reader where the vocabulary makes them control tokens. */
int   llm_tools_text_tags(const llm_api_req *r, const char **tags, int cap);
/* A tagged format, tool_choice auto, streamed: how far text[0..len) can go out as content, from sent on: up
 * to the tag (found at or after sent), or to the end less a tail that may begin one. */
size_t llm_tools_content_end(const llm_api_req *r, const char *text, size_t len, size_t sent);
/* Python's json.dumps(v, ensure_ascii=False, indent=indent), as chat templates' tojson prints (indent < 0:
 * one line with ", " and ": "). malloc'd, or NULL. */
char *llm_tools_dumps(const cJSON *v, int indent);

#endif
