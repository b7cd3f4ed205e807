/* Ollama's API bodies -> chat-completions / completions bodies (see llm_ollama.h). */
#include "llm_ollama.h"
#include "llm_chat_body.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int o_bad(llm_api_err *e, const char *param, const char *code, const char *fmt, const char *what)
{
    llm_api_seterr(e, 400, param, code, fmt, what ? what : "");
    return -1;
}

/* options -> the chat body's sampling fields. */
static int o_options(cJSON *out, const cJSON *opts, llm_api_err *e)
{
    static const struct { const char *name, *as; } same[] = {
        { "temperature", "temperature" }, { "top_p", "top_p" }, { "top_k", "top_k" }, { "min_p", "min_p" },
        { "typical_p", "typical_p" }, { "seed", "seed" }, { "stop", "stop" }, { "repeat_penalty", "repetition_penalty" },
        { "presence_penalty", "presence_penalty" }, { "frequency_penalty", "frequency_penalty" },
    };
    /* the deployment's knobs (the engine's and nginx's configuration decides them) and Ollama's own */
    static const char *const ignored[] = {
        "num_ctx", "num_batch", "num_gpu", "main_gpu", "num_thread", "use_mmap", "use_mlock", "numa", "low_vram",
        "vocab_only", "num_keep", "repeat_last_n", "penalize_newline", "f16_kv", "logits_all", "embedding_only",
        "mirostat_tau", "mirostat_eta",
    };
    /* sampling Ollama has and this server does not: only their neutral values */
    static const struct { const char *name; double neutral; } neutral[] = {
        { "mirostat", 0 }, { "tfs_z", 1 },
    };
    if (opts == NULL || cJSON_IsNull(opts)) return 0;
    if (!cJSON_IsObject(opts)) return o_bad(e, "options", "invalid_type", "'options' must be an object%s", NULL);
    const cJSON *o;
    cJSON_ArrayForEach(o, opts) {
        const char *k = o->string;
        size_t i;
        for (i = 0; i < sizeof same / sizeof same[0] && strcmp(k, same[i].name); i++) {}
        if (i < sizeof same / sizeof same[0]) {
            if (llm_cb_put_copy(out, same[i].as, o, e)) return -1;
            continue;
        }
        if (!strcmp(k, "num_predict")) {
            if (!cJSON_IsNumber(o) || o->valuedouble != (double)(long long)o->valuedouble || o->valuedouble < -2)
                return o_bad(e, "options.num_predict", "invalid_value", "'options.num_predict' must be a whole "
                             "number, -1 or -2 (up to the context)%s", NULL);
            if (o->valuedouble >= 0 && !cJSON_AddNumberToObject(out, "max_tokens", o->valuedouble))
                return llm_cb_oom(e);
            continue;
        }
        for (i = 0; i < sizeof ignored / sizeof ignored[0] && strcmp(k, ignored[i]); i++) {}
        if (i < sizeof ignored / sizeof ignored[0]) continue;
        for (i = 0; i < sizeof neutral / sizeof neutral[0] && strcmp(k, neutral[i].name); i++) {}
        if (i < sizeof neutral / sizeof neutral[0]) {
            if (cJSON_IsNumber(o) && o->valuedouble == neutral[i].neutral) continue;
            llm_api_seterr(e, 400, "options", "unsupported_parameter", "option '%s' is not supported by this server "
                           "(only %g, its neutral value)", k, neutral[i].neutral);
            return -1;
        }
        llm_api_seterr(e, 400, "options", "unsupported_parameter", "option '%.64s' is not supported", k);
        return -1;
    }
    return 0;
}

/* format: "json" (JSON mode), a JSON Schema object, or "" / null (none). */
static int o_format(cJSON *out, const cJSON *f, llm_api_err *e)
{
    if (f == NULL || cJSON_IsNull(f) || (cJSON_IsString(f) && f->valuestring[0] == 0)) return 0;
    cJSON *rf = cJSON_AddObjectToObject(out, "response_format");
    if (rf == NULL) return llm_cb_oom(e);
    if (cJSON_IsString(f) && !strcmp(f->valuestring, "json"))
        return cJSON_AddStringToObject(rf, "type", "json_object") ? 0 : llm_cb_oom(e);
    if (!cJSON_IsObject(f))
        return o_bad(e, "format", "invalid_value", "'format' must be \"json\" or a JSON Schema object%s", NULL);
    cJSON *js = cJSON_AddStringToObject(rf, "type", "json_schema") ? cJSON_AddObjectToObject(rf, "json_schema") : NULL;
    if (js == NULL || !cJSON_AddStringToObject(js, "name", "format")) return llm_cb_oom(e);
    return llm_cb_put_copy(js, "schema", f, e);
}

/* think: true / false -> the template's switch (enable_thinking); "low" / "medium" / "high" (gpt-oss's levels)
 * -> reasoning_effort. */
static int o_think(cJSON *out, const cJSON *t, llm_api_err *e)
{
    if (t == NULL || cJSON_IsNull(t)) return 0;
    if (cJSON_IsBool(t)) {
        cJSON *k = cJSON_AddObjectToObject(out, "chat_template_kwargs");
        return k && cJSON_AddBoolToObject(k, "enable_thinking", cJSON_IsTrue(t)) ? 0 : llm_cb_oom(e);
    }
    if (cJSON_IsString(t) && (!strcmp(t->valuestring, "low") || !strcmp(t->valuestring, "medium") ||
                              !strcmp(t->valuestring, "high")))
        return cJSON_AddStringToObject(out, "reasoning_effort", t->valuestring) ? 0 : llm_cb_oom(e);
    return o_bad(e, "think", "invalid_value", "'think' must be true, false, \"low\", \"medium\" or \"high\"%s", NULL);
}

/* The body's model, without Ollama's default tag. */
static int o_model(cJSON *out, const cJSON *body, llm_api_err *e)
{
    const cJSON *model = llm_api_field(body, "model");
    if (!cJSON_IsString(model)) return llm_cb_put_copy(out, "model", model, e);
    char *name = strndup(model->valuestring, llm_ollama_name_len(model->valuestring));
    int ok = name != NULL && cJSON_AddStringToObject(out, "model", name) != NULL;
    free(name);
    return ok ? 0 : llm_cb_oom(e);
}

/* What every body has: model, options, format, stream (default true), think. */
static int o_common(cJSON *out, const cJSON *body, llm_api_err *e)
{
    const cJSON *s = llm_api_field(body, "stream");
    if (s != NULL && !cJSON_IsBool(s) && !cJSON_IsNull(s))
        return o_bad(e, "stream", "invalid_type", "'stream' must be a boolean%s", NULL);
    if (o_model(out, body, e)) return -1;
    if (!cJSON_AddBoolToObject(out, "stream", s == NULL || cJSON_IsNull(s) || cJSON_IsTrue(s))) return llm_cb_oom(e);
    const cJSON *imgs = llm_api_field(body, "images");
    if (imgs && !(cJSON_IsArray(imgs) && cJSON_GetArraySize(imgs) == 0) && !cJSON_IsNull(imgs))
        return o_bad(e, "images", "unsupported_parameter", "images are not supported by this server%s", NULL);
    return o_options(out, llm_api_field(body, "options"), e) || o_format(out, llm_api_field(body, "format"), e) ||
           o_think(out, llm_api_field(body, "think"), e) ? -1 : 0;
}

/* An assistant message's tool_calls [{"function": {"name", "arguments": {...}}}] as chat calls with ids call_<k>
 * (k counted over the conversation); the ids the tool messages after it answer, in order. */
static int o_calls(cJSON *m, const cJSON *calls, int i, int *next_id, llm_api_err *e)
{
    if (!cJSON_IsArray(calls)) {
        llm_api_seterr(e, 400, "messages", "invalid_type", "messages[%d].tool_calls must be an array", i);
        return -1;
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name"), *args = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        if (!cJSON_IsObject(f) || !cJSON_IsString(name) || (args && !cJSON_IsObject(args) && !cJSON_IsString(args))) {
            llm_api_seterr(e, 400, "messages", "invalid_value", "messages[%d].tool_calls: each must be {\"function\": "
                           "{\"name\", \"arguments\": {...}}}", i);
            return -1;
        }
        char id[32], *text = args == NULL ? NULL : cJSON_IsString(args) ? NULL : cJSON_PrintUnformatted(args);
        snprintf(id, sizeof id, "call_%d", (*next_id)++);
        int rc = llm_cb_call(m, id, name->valuestring, args == NULL ? "{}" : text ? text : args->valuestring, e);
        cJSON_free(text);
        if (rc) return -1;
    }
    return 0;
}

static int o_messages(cJSON *msgs, const cJSON *a, llm_api_err *e)
{
    if (a == NULL) return o_bad(e, "messages", "missing_required_parameter", "'messages' is required%s", NULL);
    if (!cJSON_IsArray(a)) return o_bad(e, "messages", "invalid_type", "'messages' must be an array%s", NULL);
    const cJSON *m;
    int i = 0, next_id = 0, answered = 0; /* calls so far, and how many of them tool messages answered */
    cJSON_ArrayForEach(m, a) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"), *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        const cJSON *imgs = cJSON_GetObjectItemCaseSensitive(m, "images"), *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        const char *r = cJSON_IsString(role) ? role->valuestring : "";
        if (!cJSON_IsObject(m) || (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool"))) {
            llm_api_seterr(e, 400, "messages", "invalid_value", "messages[%d] must be an object with 'role' system, "
                           "user, assistant or tool", i);
            return -1;
        }
        if (c != NULL && !cJSON_IsString(c) && !cJSON_IsNull(c)) {
            llm_api_seterr(e, 400, "messages", "invalid_type", "messages[%d].content must be a string", i);
            return -1;
        }
        if (imgs && !cJSON_IsNull(imgs) && !(cJSON_IsArray(imgs) && cJSON_GetArraySize(imgs) == 0)) {
            llm_api_seterr(e, 400, "messages", "unsupported_parameter", "messages[%d]: images are not supported by "
                           "this server", i);
            return -1;
        }
        const char *text = cJSON_IsString(c) ? c->valuestring : "";
        if (!strcmp(r, "tool")) { /* answers the next unanswered call (Ollama's tool messages carry no id) */
            char id[32];
            snprintf(id, sizeof id, "call_%d", answered < next_id ? answered++ : next_id - 1 < 0 ? 0 : next_id - 1);
            cJSON *t = cJSON_CreateString(text);
            if (t == NULL) return llm_cb_oom(e);
            if (llm_cb_tool_result(msgs, id, t, e)) return -1;
        } else {
            cJSON *o = llm_cb_message(msgs, r);
            if (o == NULL || !cJSON_AddStringToObject(o, "content", text)) return llm_cb_oom(e);
            if (calls && !cJSON_IsNull(calls) && strcmp(r, "assistant")) {
                llm_api_seterr(e, 400, "messages", "invalid_value", "messages[%d]: only an assistant message has "
                               "tool_calls", i);
                return -1;
            }
            if (calls && !cJSON_IsNull(calls)) {
                answered = next_id;
                if (o_calls(o, calls, i, &next_id, e)) return -1;
            }
        }
        i++;
    }
    return 0;
}

/* /api/generate: the prompt as a completion (raw) or as a chat's user message after the system's. */
static int o_generate(cJSON *out, const cJSON *body, int *completion, int *load, llm_api_err *e)
{
    const cJSON *p = llm_api_field(body, "prompt"), *sys = llm_api_field(body, "system"), *raw = llm_api_field(body, "raw");
    const cJSON *tpl = llm_api_field(body, "template"), *ctx = llm_api_field(body, "context");
    const cJSON *sfx = llm_api_field(body, "suffix");
    if (p != NULL && !cJSON_IsString(p) && !cJSON_IsNull(p))
        return o_bad(e, "prompt", "invalid_type", "'prompt' must be a string%s", NULL);
    if (raw != NULL && !cJSON_IsBool(raw)) return o_bad(e, "raw", "invalid_type", "'raw' must be a boolean%s", NULL);
    if (tpl && !cJSON_IsNull(tpl) && !(cJSON_IsString(tpl) && tpl->valuestring[0] == 0))
        return o_bad(e, "template", "unsupported_parameter", "a request's own 'template' is not supported: the "
                     "model's chat template applies (or raw: true)%s", NULL);
    if (ctx && !cJSON_IsNull(ctx) && !(cJSON_IsArray(ctx) && cJSON_GetArraySize(ctx) == 0))
        return o_bad(e, "context", "unsupported_parameter", "'context' (the deprecated token context) is not "
                     "supported: send the conversation to /api/chat%s", NULL);
    if (sys && !cJSON_IsString(sys) && !cJSON_IsNull(sys))
        return o_bad(e, "system", "invalid_type", "'system' must be a string%s", NULL);
    if (sfx && !cJSON_IsString(sfx) && !cJSON_IsNull(sfx))
        return o_bad(e, "suffix", "invalid_type", "'suffix' must be a string%s", NULL);
    const char *text = cJSON_IsString(p) ? p->valuestring : "";
    int has_sfx = cJSON_IsString(sfx) && sfx->valuestring[0] != 0;
    if (text[0] == 0 && !has_sfx) { /* Ollama's call to load the model */
        *load = 1;
        return 0;
    }
    *completion = cJSON_IsTrue(raw) || has_sfx; /* a suffix: fill in the middle, a completion */
    if (*completion) {
        if (cJSON_IsString(sys) && sys->valuestring[0] != 0)
            return o_bad(e, "system", "invalid_value", "'system' goes with a templated prompt, not raw or a suffix%s",
                         NULL);
        if (!cJSON_AddStringToObject(out, "prompt", text)) return llm_cb_oom(e);
        return has_sfx && !cJSON_AddStringToObject(out, "suffix", sfx->valuestring) ? llm_cb_oom(e) : 0;
    }
    cJSON *msgs = cJSON_AddArrayToObject(out, "messages"), *m;
    if (msgs == NULL) return llm_cb_oom(e);
    if (cJSON_IsString(sys) && sys->valuestring[0] != 0 &&
        ((m = llm_cb_message(msgs, "system")) == NULL || !cJSON_AddStringToObject(m, "content", sys->valuestring)))
        return llm_cb_oom(e);
    if ((m = llm_cb_message(msgs, "user")) == NULL || !cJSON_AddStringToObject(m, "content", text)) return llm_cb_oom(e);
    return 0;
}

cJSON *llm_ollama_to_body(const cJSON *body, int generate, int *completion, int *load, llm_api_err *e)
{
    *completion = *load = 0;
    cJSON *out = cJSON_CreateObject(), *msgs;
    if (out == NULL) { llm_cb_oom(e); return NULL; }
    if (o_common(out, body, e)) goto fail;
    if (generate) {
        if (o_generate(out, body, completion, load, e)) goto fail;
        if (*load) return out; /* its model only */
        if (*completion) { /* a completion has no chat fields */
            cJSON_DeleteItemFromObjectCaseSensitive(out, "chat_template_kwargs");
            cJSON_DeleteItemFromObjectCaseSensitive(out, "reasoning_effort");
        }
        return out;
    }
    if ((msgs = cJSON_AddArrayToObject(out, "messages")) == NULL) { llm_cb_oom(e); goto fail; }
    if (o_messages(msgs, llm_api_field(body, "messages"), e)) goto fail;
    const cJSON *t = llm_api_field(body, "tools");
    if (t && !cJSON_IsNull(t) && !(cJSON_IsArray(t) && cJSON_GetArraySize(t) == 0) && llm_cb_put_copy(out, "tools", t, e))
        goto fail;
    return out;
fail:
    cJSON_Delete(out);
    return NULL;
}

size_t llm_ollama_name_len(const char *name)
{
    size_t n = strlen(name);
    return n > 7 && !strcmp(name + n - 7, ":latest") ? n - 7 : n;
}

cJSON *llm_ollama_embed_body(const cJSON *body, int legacy, llm_api_err *e)
{
    cJSON *out = cJSON_CreateObject();
    if (out == NULL) { llm_cb_oom(e); return NULL; }
    if (legacy) {
        const cJSON *p = llm_api_field(body, "prompt");
        if (!cJSON_IsString(p)) {
            o_bad(e, "prompt", p ? "invalid_type" : "missing_required_parameter", "'prompt' (a string) is required%s",
                  NULL);
            goto fail;
        }
        if (o_model(out, body, e) || llm_cb_put_copy(out, "input", p, e)) goto fail;
        return out;
    }
    const cJSON *t = llm_api_field(body, "truncate");
    if (t != NULL && !cJSON_IsBool(t) && !cJSON_IsNull(t)) {
        o_bad(e, "truncate", "invalid_type", "'truncate' must be a boolean%s", NULL);
        goto fail;
    }
    if (o_model(out, body, e) || llm_cb_put_copy(out, "input", llm_api_field(body, "input"), e) ||
        llm_cb_put_copy(out, "dimensions", llm_api_field(body, "dimensions"), e))
        goto fail;
    /* Ollama cuts an input over the context unless truncate is false */
    if (!cJSON_AddBoolToObject(out, "truncate", !cJSON_IsFalse(t))) { llm_cb_oom(e); goto fail; }
    return out;
fail:
    cJSON_Delete(out);
    return NULL;
}

void llm_ollama_param(llm_api_err *e)
{
    static const struct { const char *ours, *theirs; } names[] = {
        { "max_tokens", "options.num_predict" }, { "temperature", "options.temperature" },
        { "top_p", "options.top_p" }, { "top_k", "options.top_k" }, { "min_p", "options.min_p" }, { "typical_p", "options.typical_p" },
        { "seed", "options.seed" }, { "stop", "options.stop" }, { "repetition_penalty", "options.repeat_penalty" },
        { "presence_penalty", "options.presence_penalty" }, { "frequency_penalty", "options.frequency_penalty" },
        { "response_format", "format" }, { "chat_template_kwargs", "think" }, { "reasoning_effort", "think" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(e->param, names[i].ours)) {
            snprintf(e->param, sizeof e->param, "%s", names[i].theirs);
            return;
        }
}

char *llm_ollama_error_json(const llm_api_err *e)
{
    cJSON *root = cJSON_CreateObject();
    if (root == NULL || !cJSON_AddStringToObject(root, "error", e->message)) { cJSON_Delete(root); return NULL; }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}
