/* Building a chat-completions body (cJSON) out of another API's body: what the Responses API (llm_responses.c)
 * and Anthropic's Messages API (llm_messages.c) translators share. Each returns 0, or -1 with e set. Plain C +
 * cJSON (no nginx headers). */
#ifndef LLM_CHAT_BODY_H
#define LLM_CHAT_BODY_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "llm_api.h"

/* o's "type" when it is a string, else NULL. */
const char *llm_cb_type(const cJSON *o);
/* e = 500 out of memory; returns -1. */
int    llm_cb_oom(llm_api_err *e);
/* A new {"role": role} at the end of msgs, or NULL (out of memory). */
cJSON *llm_cb_message(cJSON *msgs, const char *role);
/* The last message of msgs when its role is `role`, else NULL. */
cJSON *llm_cb_last(cJSON *msgs, const char *role);
/* dst[names[i]] = a copy of src[names[i]] for each one src has. */
int    llm_cb_copy(cJSON *dst, const cJSON *src, const char *const *names, size_t n, llm_api_err *e);
/* dst[as] = a copy of v (v may be NULL: nothing). */
int    llm_cb_put_copy(cJSON *dst, const char *as, const cJSON *v, llm_api_err *e);
/* A tool call {"id", "type": "function", "function": {"name", "arguments"}} added to the assistant message m. */
int    llm_cb_call(cJSON *m, const char *id, const char *name, const char *args, llm_api_err *e);
/* A tool's result: {"role": "tool", "tool_call_id": id, "content": text} at the end of msgs; text is taken. */
int    llm_cb_tool_result(cJSON *msgs, const char *id, cJSON *text, llm_api_err *e);
/* A chat tool {"type": "function", "function": {"name", "description", "parameters"}} from a flat tool t:
 * its name, description and (under `schema_key`) parameters; strict copied when present. */
int    llm_cb_tool(cJSON *tools, const cJSON *t, const char *schema_key, llm_api_err *e);
/* chat["tools"] from an array of flat tools, each through llm_cb_tool: a tool's "type" must be `type` (or absent,
 * when type_optional); else a 400 naming tools, which says only `kind` tools (`shape`) are supported. */
int    llm_cb_tools(cJSON *chat, const cJSON *tools, const char *type, int type_optional, const char *schema_key,
                    const char *kind, const char *shape, llm_api_err *e);
/* A content of text parts as one new cJSON string: a string (null or absent: ""), or an array of parts, each
 * an object whose "type" is one of types[0..n_types) and whose text is its member "text" ("refusal" for a part
 * of type "refusal"). NULL when it is not: *bad is the index of the part refused (-1: c is neither a string
 * nor an array) and *bad_type its type (or NULL), for the caller's 400; or out of memory (*bad -2, e set). */
cJSON *llm_cb_text_parts(const cJSON *c, const char *const *types, int n_types, int *bad, const char **bad_type,
                         llm_api_err *e);
/* 1 when v is a number with no fraction. */
int    llm_cb_whole(const cJSON *v);
/* e's param renamed from ours to theirs (another API's name for it), and 'ours' (quoted) in its message too. */
void   llm_cb_rename(llm_api_err *e, const char *ours, const char *theirs);
/* The same by a table: the entry whose ours is e's param, if any. 1 when it renamed it. */
typedef struct { const char *ours, *theirs; } llm_cb_name;
int    llm_cb_rename_in(llm_api_err *e, const llm_cb_name *names, size_t n);
/* texts[0..n) joined, as a new cJSON string, or NULL (e: out of memory). */
cJSON *llm_cb_join(const char *const *texts, int n, llm_api_err *e);

#endif
