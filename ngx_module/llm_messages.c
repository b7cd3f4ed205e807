/* Anthropic Messages API bodies -> chat-completions bodies (see llm_messages.h). */
#include "llm_messages.h"
#include "llm_chat_body.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fields that mean the same in both APIs (or are the servers' common extensions), copied as they are. */
static const char *const m_same_fields[] = {
    "model", "max_tokens", "temperature", "top_p", "top_k", "stream", "seed", "min_p", "presence_penalty",
    "frequency_penalty", "repetition_penalty", "logit_bias", "priority", "ignore_eos", "min_tokens",
    "stop_token_ids", "chat_template_kwargs", "guided_json", "guided_regex", "guided_choice", "structured_outputs",
    "guided_grammar", "grammar",
};

static int m_bad(llm_api_err *e, const char *param, const char *code, const char *msg, int i, int k, const char *what)
{
    char where[48];
    if (k >= 0) snprintf(where, sizeof where, "messages[%d].content[%d]", i, k);
    else snprintf(where, sizeof where, "messages[%d]", i);
    llm_api_seterr(e, 400, param, code, "%s: %s%.40s", where, msg, what ? what : "");
    return -1;
}

/* Text blocks ({"type": "text", "text"}) or a string, joined: a new cJSON string, or NULL with e. */
static cJSON *m_text_of(const cJSON *c, int i, int k, llm_api_err *e)
{
    static const char *const types[] = { "text" };
    int bad;
    const char *t;
    cJSON *out = llm_cb_text_parts(c, types, 1, &bad, &t, e);
    if (out == NULL && bad == -1) m_bad(e, "messages", "invalid_type", "must be a string or an array of text blocks", i, k, NULL);
    else if (out == NULL && bad >= 0)
        m_bad(e, "messages", "invalid_value", "only text blocks are supported inside it; got ", i, k, t ? t : "?");
    return out;
}

/* Appends text to message m's content (a string, made here when m has none). */
static int m_append_text(cJSON *m, const char *s, llm_api_err *e)
{
    cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    const char *parts[2] = { cJSON_IsString(c) ? c->valuestring : "", s };
    cJSON *joined = llm_cb_join(parts, 2, e);
    if (joined == NULL) return -1;
    if (c != NULL) cJSON_ReplaceItemInObjectCaseSensitive(m, "content", joined);
    else cJSON_AddItemToObject(m, "content", joined);
    return 0;
}

/* One message's content blocks. A user's tool_result blocks become tool messages (each where it stands), its text
 * blocks user messages; an assistant's text is its content and its tool_use blocks its calls. */
static int m_add_blocks(cJSON *msgs, const char *role, const cJSON *blocks, int i, int *n_blocks, llm_api_err *e)
{
    int user = !strcmp(role, "user"), k = 0;
    cJSON *asst = NULL, *cur = NULL; /* cur: the user message this message's text goes into (after a result: a new one) */
    if (!user && ((asst = llm_cb_message(msgs, "assistant")) == NULL || !cJSON_AddStringToObject(asst, "content", "")))
        return llm_cb_oom(e);
    const cJSON *b;
    cJSON_ArrayForEach(b, blocks) {
        if (++*n_blocks > LLM_MESSAGES_MAX_BLOCKS) {
            llm_api_seterr(e, 400, "messages", "invalid_value", "at most %d content blocks", LLM_MESSAGES_MAX_BLOCKS);
            return -1;
        }
        const char *t = llm_cb_type(b);
        if (!cJSON_IsObject(b) || t == NULL) return m_bad(e, "messages", "invalid_type", "must be a block with a 'type'", i, k, NULL);
        if (!strcmp(t, "text")) {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(b, "text");
            if (!cJSON_IsString(x)) return m_bad(e, "messages", "invalid_value", "'text' must be a string", i, k, NULL);
            if (user && cur == NULL && (cur = llm_cb_message(msgs, "user")) == NULL) return llm_cb_oom(e);
            if (m_append_text(user ? cur : asst, x->valuestring, e)) return -1;
        } else if (!strcmp(t, "tool_use") && !user) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id"), *name = cJSON_GetObjectItemCaseSensitive(b, "name");
            const cJSON *input = cJSON_GetObjectItemCaseSensitive(b, "input");
            if (!cJSON_IsString(id) || !cJSON_IsString(name) || !cJSON_IsObject(input))
                return m_bad(e, "messages", "invalid_value", "a tool_use block needs 'id', 'name' and an 'input' object",
                           i, k, NULL);
            char *args = cJSON_PrintUnformatted(input);
            if (args == NULL) return llm_cb_oom(e);
            int rc = llm_cb_call(asst, id->valuestring, name->valuestring, args, e);
            cJSON_free(args);
            if (rc) return -1;
        } else if (!strcmp(t, "tool_result") && user) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "tool_use_id");
            if (!cJSON_IsString(id)) return m_bad(e, "messages", "invalid_value", "a tool_result needs 'tool_use_id'", i, k, NULL);
            cJSON *text = m_text_of(cJSON_GetObjectItemCaseSensitive(b, "content"), i, k, e);
            if (text == NULL) return -1;
            const cJSON *err = cJSON_GetObjectItemCaseSensitive(b, "is_error");
            if (cJSON_IsTrue(err)) { /* the model is told, as Anthropic's own prompt format tells it */
                const char *parts[2] = { "Error: ", text->valuestring };
                cJSON *t2 = llm_cb_join(parts, 2, e);
                cJSON_Delete(text);
                if ((text = t2) == NULL) return -1;
            }
            if (llm_cb_tool_result(msgs, id->valuestring, text, e)) return -1;
            cur = NULL;
        } else if (strcmp(t, "thinking") && strcmp(t, "redacted_thinking")) {
            /* thinking blocks are left out, as chat templates leave earlier reasoning out */
            return m_bad(e, "messages", "invalid_value", !strcmp(t, "tool_use") || !strcmp(t, "tool_result")
                       ? "this block is not allowed in this role's message: " : "blocks of this type are not supported: ",
                       i, k, t);
        }
        k++;
    }
    if (asst != NULL && cJSON_GetObjectItemCaseSensitive(asst, "tool_calls") &&
        !strcmp(cJSON_GetObjectItemCaseSensitive(asst, "content")->valuestring, ""))
        cJSON_ReplaceItemInObjectCaseSensitive(asst, "content", cJSON_CreateNull());
    return 0;
}

static int m_add_messages(cJSON *msgs, const cJSON *a, llm_api_err *e)
{
    if (a == NULL) {
        llm_api_seterr(e, 400, "messages", "missing_required_parameter", "'messages' is required");
        return -1;
    }
    if (!cJSON_IsArray(a)) {
        llm_api_seterr(e, 400, "messages", "invalid_type", "'messages' must be an array");
        return -1;
    }
    const cJSON *m;
    int i = 0, n_blocks = 0;
    cJSON_ArrayForEach(m, a) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"), *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role) ||
            (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant")))
            return m_bad(e, "messages", "invalid_value", "must be an object with 'role' user or assistant", i, -1, NULL);
        if (cJSON_IsString(c)) {
            cJSON *o = llm_cb_message(msgs, role->valuestring);
            if (o == NULL || !cJSON_AddStringToObject(o, "content", c->valuestring)) return llm_cb_oom(e);
        } else if (cJSON_IsArray(c)) {
            if (m_add_blocks(msgs, role->valuestring, c, i, &n_blocks, e)) return -1;
        } else {
            return m_bad(e, "messages", "invalid_type", "'content' must be a string or an array of blocks", i, -1, NULL);
        }
        i++;
    }
    return 0;
}


/* tool_choice {"type": "auto" | "any" | "tool" (with "name") | "none", "disable_parallel_tool_use"}. */
static int m_add_tool_choice(cJSON *chat, const cJSON *tc, llm_api_err *e)
{
    const char *type = llm_cb_type(tc);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(tc, "name"), *dp = cJSON_GetObjectItemCaseSensitive(tc, "disable_parallel_tool_use");
    if (type == NULL || (strcmp(type, "auto") && strcmp(type, "any") && strcmp(type, "none") &&
                         (strcmp(type, "tool") || !cJSON_IsString(name)))) {
        llm_api_seterr(e, 400, "tool_choice", "invalid_value", "'tool_choice' must be {\"type\": \"auto\"}, {\"type\": "
                       "\"any\"}, {\"type\": \"none\"} or {\"type\": \"tool\", \"name\": ...}");
        return -1;
    }
    if (cJSON_IsTrue(dp) && !cJSON_AddFalseToObject(chat, "parallel_tool_calls")) return llm_cb_oom(e);
    if (strcmp(type, "tool") != 0)
        return cJSON_AddStringToObject(chat, "tool_choice", !strcmp(type, "any") ? "required" : type) ? 0 : llm_cb_oom(e);
    cJSON *c = cJSON_AddObjectToObject(chat, "tool_choice"), *f = c ? cJSON_AddObjectToObject(c, "function") : NULL;
    if (f == NULL || !cJSON_AddStringToObject(c, "type", "function") ||
        !cJSON_AddStringToObject(f, "name", name->valuestring)) return llm_cb_oom(e);
    return 0;
}

cJSON *llm_messages_to_chat(const cJSON *body, llm_api_err *e)
{
    const cJSON *mcp = llm_api_field(body, "mcp_servers");
    if (mcp && !(cJSON_IsArray(mcp) && cJSON_GetArraySize(mcp) == 0)) {
        llm_api_seterr(e, 400, "mcp_servers", "unsupported_parameter", "MCP servers are not supported");
        return NULL;
    }
    cJSON *chat = cJSON_CreateObject(), *msgs = chat ? cJSON_AddArrayToObject(chat, "messages") : NULL;
    if (msgs == NULL) { cJSON_Delete(chat); llm_cb_oom(e); return NULL; }
    if (llm_cb_copy(chat, body, m_same_fields, sizeof m_same_fields / sizeof m_same_fields[0], e)) goto fail;
    const cJSON *sys = llm_api_field(body, "system"), *v;
    if (sys) {
        cJSON *text = cJSON_IsString(sys) || cJSON_IsArray(sys) ? m_text_of(sys, 0, -1, e) : NULL;
        if (text == NULL) {
            llm_api_seterr(e, 400, "system", "invalid_value", "'system' must be a string or an array of text blocks");
            goto fail;
        }
        cJSON *m = llm_cb_message(msgs, "system");
        if (m == NULL) { cJSON_Delete(text); llm_cb_oom(e); goto fail; }
        cJSON_AddItemToObject(m, "content", text);
    }
    if (m_add_messages(msgs, llm_api_field(body, "messages"), e)) goto fail;
    if (llm_cb_put_copy(chat, "stop", llm_api_field(body, "stop_sequences"), e)) goto fail;
    /* tools: [{"name", "description", "input_schema"}] (type absent or "custom"); server tools are refused */
    if ((v = llm_api_field(body, "tools")) &&
        llm_cb_tools(chat, v, "custom", 1, "input_schema", "client", "{\"name\", \"description\", \"input_schema\"}", e))
        goto fail;
    if ((v = llm_api_field(body, "tool_choice")) && m_add_tool_choice(chat, v, e)) goto fail;
    if ((v = llm_api_field(body, "thinking"))) {
        const char *t = llm_cb_type(v);
        if (t == NULL || (strcmp(t, "enabled") && strcmp(t, "disabled"))) {
            llm_api_seterr(e, 400, "thinking", "invalid_value", "'thinking' must be {\"type\": \"enabled\" | \"disabled\"}");
            goto fail;
        }
        /* the template's switch (enable_thinking): "disabled" turns Qwen 3's off, "enabled" EXAONE 4's on;
         * budget_tokens is not enforced */
        if (!llm_api_field(chat, "chat_template_kwargs")) {
            cJSON *k = cJSON_AddObjectToObject(chat, "chat_template_kwargs");
            if (k == NULL || !cJSON_AddBoolToObject(k, "enable_thinking", strcmp(t, "disabled") != 0)) {
                llm_cb_oom(e);
                goto fail;
            }
        }
    }
    if ((v = llm_api_field(body, "metadata"))) {
        const cJSON *u = cJSON_IsObject(v) ? llm_api_field(v, "user_id") : NULL;
        if (!cJSON_IsObject(v) || (u && !cJSON_IsString(u))) {
            llm_api_seterr(e, 400, "metadata", "invalid_type", "'metadata' must be an object with a string 'user_id'");
            goto fail;
        }
        if (llm_cb_put_copy(chat, "user", u, e)) goto fail;
    }
    return chat;
fail:
    cJSON_Delete(chat);
    return NULL;
}

void llm_messages_param(llm_api_err *e)
{
    if (!strcmp(e->param, "stop")) snprintf(e->param, sizeof e->param, "stop_sequences");
    else if (!strcmp(e->param, "user")) snprintf(e->param, sizeof e->param, "metadata");
}
