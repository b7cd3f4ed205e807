/* Responses API bodies -> chat-completions bodies (see llm_responses.h). */
#include "llm_responses.h"
#include "llm_chat_body.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fields that mean the same in both APIs (or are the servers' common extensions), copied as they are. */
static const char *const same_fields[] = {
    "model", "temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "logit_bias", "stop", "user", "stream", "parallel_tool_calls", "priority", "ignore_eos",
    "min_tokens", "stop_token_ids", "chat_template_kwargs", "guided_json", "guided_regex", "guided_choice",
    "guided_grammar", "grammar", "structured_outputs", "top_logprobs", "prompt_cache_key",
};

/* A content of text parts as one string: a string, or parts input_text / output_text / text (their "text")
 * and refusal (its "refusal"). Returns a new cJSON string, or NULL with e set. */
static cJSON *content_text(const cJSON *c, const char *where, llm_api_err *e)
{
    static const char *const types[] = { "input_text", "output_text", "text", "refusal" };
    int bad;
    const char *t;
    cJSON *out = llm_cb_text_parts(c, types, 4, &bad, &t, e);
    if (out == NULL && bad == -1)
        llm_api_seterr(e, 400, "input", "invalid_type", "%s must be a string or an array of text parts", where);
    else if (out == NULL && bad >= 0)
        llm_api_seterr(e, 400, "input", "invalid_value",
                       "%s[%d]: only text parts ({\"type\": \"input_text\", \"text\": ...}) are supported%s%.32s",
                       where, bad, t ? "; got " : "", t ? t : "");
    return out;
}

static const char *req_str(const cJSON *o, const char *name, const char *where, int k, llm_api_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (cJSON_IsString(v)) return v->valuestring;
    llm_api_seterr(e, 400, "input", "invalid_value", "%s[%d].%s must be a string", where, k, name);
    return NULL;
}

/* A function_call item: a tool call of the assistant turn it belongs to (the message just before, when that is
 * the assistant's: the Responses API gives a turn's text and calls as separate items). */
static int add_function_call(cJSON *msgs, const cJSON *it, int k, llm_api_err *e)
{
    const char *call_id = req_str(it, "call_id", "input", k, e), *name = call_id ? req_str(it, "name", "input", k, e) : NULL;
    const char *args = name ? req_str(it, "arguments", "input", k, e) : NULL;
    if (args == NULL) return -1;
    cJSON *m = llm_cb_last(msgs, "assistant");
    if (m == NULL && ((m = llm_cb_message(msgs, "assistant")) == NULL || cJSON_AddNullToObject(m, "content") == NULL))
        return llm_cb_oom(e);
    return llm_cb_call(m, call_id, name, args, e);
}

static int add_items(cJSON *msgs, const cJSON *items, llm_api_err *e);

/* input -> messages (after the instructions' system message and the stored conversation, if any). */
static int add_input(cJSON *msgs, const cJSON *input, llm_api_err *e)
{
    if (input == NULL) {
        llm_api_seterr(e, 400, "input", "missing_required_parameter", "'input' is required");
        return -1;
    }
    if (cJSON_IsString(input)) {
        cJSON *m = llm_cb_message(msgs, "user");
        return m && cJSON_AddStringToObject(m, "content", input->valuestring) ? 0 : llm_cb_oom(e);
    }
    if (!cJSON_IsArray(input)) {
        llm_api_seterr(e, 400, "input", "invalid_type", "'input' must be a string or an array of items");
        return -1;
    }
    if (cJSON_GetArraySize(input) > LLM_RESPONSES_MAX_ITEMS) {
        llm_api_seterr(e, 400, "input", "invalid_value", "at most %d input items", LLM_RESPONSES_MAX_ITEMS);
        return -1;
    }
    return add_items(msgs, input, e);
}

/* Input items (messages, function calls and their outputs, reasoning) -> messages. */
static int add_items(cJSON *msgs, const cJSON *input, llm_api_err *e)
{
    const cJSON *it;
    int k = 0;
    cJSON_ArrayForEach(it, input) {
        if (!cJSON_IsObject(it)) {
            llm_api_seterr(e, 400, "input", "invalid_type", "input[%d] must be an object", k);
            return -1;
        }
        const char *t = llm_cb_type(it);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        if (t == NULL && cJSON_GetObjectItemCaseSensitive(it, "type") != NULL) {
            llm_api_seterr(e, 400, "input", "invalid_type", "input[%d].type must be a string", k);
            return -1;
        }
        if (t == NULL || !strcmp(t, "message")) {
            if (!cJSON_IsString(role)) {
                llm_api_seterr(e, 400, "input", "invalid_value", "input[%d].role must be a string", k);
                return -1;
            }
            const char *r = role->valuestring;
            if (strcmp(r, "user") && strcmp(r, "system") && strcmp(r, "developer") && strcmp(r, "assistant")) {
                llm_api_seterr(e, 400, "input", "invalid_value",
                               "input[%d].role must be one of user, system, developer, assistant", k);
                return -1;
            }
            char where[32];
            snprintf(where, sizeof where, "input[%d].content", k);
            cJSON *text = content_text(cJSON_GetObjectItemCaseSensitive(it, "content"), where, e);
            if (text == NULL) return -1;
            cJSON *m = llm_cb_message(msgs, r);
            if (m == NULL) { cJSON_Delete(text); return llm_cb_oom(e); }
            cJSON_AddItemToObject(m, "content", text);
        } else if (!strcmp(t, "function_call")) {
            if (add_function_call(msgs, it, k, e)) return -1;
        } else if (!strcmp(t, "function_call_output")) {
            const char *call_id = req_str(it, "call_id", "input", k, e);
            if (call_id == NULL) return -1;
            char where[32];
            snprintf(where, sizeof where, "input[%d].output", k);
            const cJSON *out = cJSON_GetObjectItemCaseSensitive(it, "output");
            if (out == NULL) {
                llm_api_seterr(e, 400, "input", "invalid_value", "input[%d].output is required", k);
                return -1;
            }
            cJSON *text = content_text(out, where, e);
            if (text == NULL || llm_cb_tool_result(msgs, call_id, text, e)) return -1;
        } else if (strcmp(t, "reasoning") != 0) {
            /* reasoning items are left out, as chat templates leave earlier turns' reasoning out */
            llm_api_seterr(e, 400, "input", "invalid_value",
                           "input[%d]: items of type \"%.40s\" are not supported (message, function_call, "
                           "function_call_output and reasoning are)%s", k, t,
                           !strcmp(t, "item_reference") ? "; this server keeps no earlier items" : "");
            return -1;
        }
        k++;
    }
    return 0;
}


/* tool_choice: "none" / "auto" / "required", or {"type": "function", "name"} -> {"type": "function",
 * "function": {"name"}}. */
static int add_tool_choice(cJSON *chat, const cJSON *tc, llm_api_err *e)
{
    if (cJSON_IsString(tc)) return llm_cb_put_copy(chat, "tool_choice", tc, e);
    const char *type = llm_cb_type(tc);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(tc, "name");
    if (type == NULL || strcmp(type, "function") || !cJSON_IsString(name)) {
        llm_api_seterr(e, 400, "tool_choice", "invalid_value", "'tool_choice' must be \"none\", \"auto\", \"required\" "
                       "or {\"type\": \"function\", \"name\": ...}");
        return -1;
    }
    cJSON *c = cJSON_AddObjectToObject(chat, "tool_choice"), *f = c ? cJSON_AddObjectToObject(c, "function") : NULL;
    if (f == NULL || !cJSON_AddStringToObject(c, "type", "function") ||
        !cJSON_AddStringToObject(f, "name", name->valuestring)) return llm_cb_oom(e);
    return 0;
}

/* text: {"format": {"type": "text"} | {"type": "json_object"} | {"type": "json_schema", "name", "schema",
 * "strict"}} -> response_format. */
static int add_text_format(cJSON *chat, const cJSON *text, llm_api_err *e)
{
    if (!cJSON_IsObject(text)) {
        llm_api_seterr(e, 400, "text", "invalid_type", "'text' must be an object with a 'format'");
        return -1;
    }
    const cJSON *f = llm_api_field(text, "format");
    if (f == NULL) return 0;
    const char *type = llm_cb_type(f);
    if (type == NULL) {
        llm_api_seterr(e, 400, "text.format", "invalid_type",
                       "'text.format' must be an object with a 'type': \"text\", \"json_object\" or \"json_schema\"");
        return -1;
    }
    cJSON *rf = cJSON_AddObjectToObject(chat, "response_format");
    if (rf == NULL || !cJSON_AddStringToObject(rf, "type", type)) return llm_cb_oom(e);
    if (strcmp(type, "json_schema") != 0) return 0; /* llm_api.c checks the type */
    cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
    if (js == NULL) return llm_cb_oom(e);
    static const char *const keys[] = { "name", "schema", "strict", "description" };
    if (llm_cb_copy(js, f, keys, sizeof keys / sizeof keys[0], e)) return -1;
    if (!cJSON_GetObjectItemCaseSensitive(js, "schema")) {
        llm_api_seterr(e, 400, "text.format", "invalid_value", "text.format type \"json_schema\" needs a 'schema'");
        return -1;
    }
    return 0;
}

/* What this server cannot do with a Responses body: a 400 naming the field. */
static int refuse(const cJSON *body, const cJSON *past, llm_api_err *e)
{
    static const char *const stored[] = { "previous_response_id", "conversation", "prompt" };
    for (size_t i = past != NULL; i < sizeof stored / sizeof stored[0]; i++)
        if (llm_api_field(body, stored[i])) {
            llm_api_seterr(e, 400, stored[i], "unsupported_parameter",
                           "'%s' needs responses kept by the server; this one keeps none: send the whole "
                           "conversation in 'input'", stored[i]);
            return -1;
        }
    const cJSON *bg = llm_api_field(body, "background");
    if (bg && !cJSON_IsFalse(bg)) {
        llm_api_seterr(e, 400, "background", "unsupported_parameter",
                       "background responses are not supported (stream instead)");
        return -1;
    }
    const cJSON *tr = llm_api_field(body, "truncation");
    if (tr && !(cJSON_IsString(tr) && !strcmp(tr->valuestring, "disabled"))) {
        llm_api_seterr(e, 400, "truncation", "unsupported_parameter",
                       "only truncation \"disabled\" is supported: a conversation longer than the context is a 400");
        return -1;
    }
    if (llm_api_field(body, "n") || llm_api_field(body, "messages")) {
        llm_api_seterr(e, 400, llm_api_field(body, "n") ? "n" : "messages", "unsupported_parameter",
                       "the Responses API takes 'input' and makes one answer (this is a chat completions field)");
        return -1;
    }
    return 0;
}

/* include ["message.output_text.logprobs"] or top_logprobs >= 1: the text's logprobs. Other include values
 * ask for output this server does not make (encrypted reasoning, search results) and change nothing. */
static int wants_logprobs(const cJSON *body, llm_api_err *e)
{
    const cJSON *inc = llm_api_field(body, "include"), *s;
    if (inc && !cJSON_IsArray(inc)) {
        llm_api_seterr(e, 400, "include", "invalid_type", "'include' must be an array of strings");
        return -1;
    }
    int want = 0;
    cJSON_ArrayForEach(s, inc) {
        if (!cJSON_IsString(s)) {
            llm_api_seterr(e, 400, "include", "invalid_type", "'include' must be an array of strings");
            return -1;
        }
        if (!strcmp(s->valuestring, "message.output_text.logprobs")) want = 1;
    }
    const cJSON *top = llm_api_field(body, "top_logprobs");
    return want || (cJSON_IsNumber(top) && top->valuedouble >= 1);
}

cJSON *llm_responses_to_chat(const cJSON *body, const cJSON *past, llm_api_err *e)
{
    if (refuse(body, past, e)) return NULL;
    cJSON *chat = cJSON_CreateObject(), *msgs = chat ? cJSON_AddArrayToObject(chat, "messages") : NULL;
    if (msgs == NULL) { cJSON_Delete(chat); llm_cb_oom(e); return NULL; }
    if (llm_cb_copy(chat, body, same_fields, sizeof same_fields / sizeof same_fields[0], e)) goto fail;
    const cJSON *ins = llm_api_field(body, "instructions");
    if (ins) {
        if (!cJSON_IsString(ins)) {
            llm_api_seterr(e, 400, "instructions", "invalid_type", "'instructions' must be a string");
            goto fail;
        }
        cJSON *m = llm_cb_message(msgs, "system");
        if (m == NULL || !cJSON_AddStringToObject(m, "content", ins->valuestring)) goto fail_oom;
    }
    /* the stored conversation (its turns' instructions are not carried over, as OpenAI's are not) */
    if (past != NULL && add_items(msgs, past, e)) goto fail;
    if (add_input(msgs, llm_api_field(body, "input"), e)) goto fail;
    if (llm_cb_put_copy(chat, "max_tokens", llm_api_field(body, "max_output_tokens"), e)) goto fail;
    const cJSON *v;
    /* tools: [{"type": "function", "name", "description"?, "parameters"?, "strict"?}]; hosted tools are refused */
    if ((v = llm_api_field(body, "tools")) &&
        llm_cb_tools(chat, v, "function", 0, "parameters", "function",
                     "{\"type\": \"function\", \"name\": ..., \"parameters\": ...}", e))
        goto fail;
    if ((v = llm_api_field(body, "tool_choice")) && add_tool_choice(chat, v, e)) goto fail;
    if ((v = llm_api_field(body, "text")) && add_text_format(chat, v, e)) goto fail;
    int lp = wants_logprobs(body, e);
    if (lp < 0) goto fail;
    if (lp && !cJSON_AddTrueToObject(chat, "logprobs")) goto fail_oom;
    if ((v = llm_api_field(body, "reasoning"))) {
        const cJSON *eff = cJSON_IsObject(v) ? llm_api_field(v, "effort") : NULL;
        if (!cJSON_IsObject(v) || (eff && !cJSON_IsString(eff))) {
            llm_api_seterr(e, 400, "reasoning", "invalid_type", "'reasoning' must be an object with a string 'effort'");
            goto fail;
        }
        /* the template's switch (enable_thinking): effort "none" turns Qwen 3's off, another effort EXAONE 4's
         * on */
        if (eff && !llm_api_field(chat, "chat_template_kwargs")) {
            cJSON *k = cJSON_AddObjectToObject(chat, "chat_template_kwargs");
            if (k == NULL || !cJSON_AddBoolToObject(k, "enable_thinking", strcmp(eff->valuestring, "none") != 0))
                goto fail_oom;
        }
    }
    return chat;
fail_oom:
    llm_cb_oom(e);
fail:
    cJSON_Delete(chat);
    return NULL;
}

void llm_responses_param(llm_api_err *e)
{
    static const struct { const char *chat, *responses; } names[] = {
        { "messages", "input" }, { "max_tokens", "max_output_tokens" }, { "response_format", "text.format" },
        { "logprobs", "include" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(e->param, names[i].chat)) {
            snprintf(e->param, sizeof e->param, "%s", names[i].responses);
            return;
        }
}
