/* Request parsing and validation for the OpenAI-compatible endpoints. */
#include "llm_api.h"
#include "json_regex.h"
#include "json_schema.h"
#include "llm_tools.h"
#include "llm_responses.h"
#include "llm_messages.h"
#include "llm_ollama.h"
#include "llm_tgi.h"
#include "llm_lcpp.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void llm_api_seterr(llm_api_err *e, int status, const char *param, const char *code, const char *fmt, ...)
{
    va_list ap;
    e->status = status;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    const char *type = status == 404 ? "not_found_error"
                     : status == 413 ? "request_too_large"
                     : status == 429 ? "rate_limit_error"
                     : status == 405 ? "invalid_request_error"
                     : status >= 500 ? (status == 504 ? "timeout_error" : "server_error")
                     : "invalid_request_error";
    snprintf(e->type, sizeof e->type, "%s", type);
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
}

char *llm_api_error_json(const llm_api_err *e)
{
    cJSON *root = cJSON_CreateObject(), *o = cJSON_AddObjectToObject(root, "error");
    if (!o) { cJSON_Delete(root); return NULL; }
    cJSON_AddStringToObject(o, "message", e->message);
    cJSON_AddStringToObject(o, "type", e->type);
    if (e->param[0]) cJSON_AddStringToObject(o, "param", e->param); else cJSON_AddNullToObject(o, "param");
    if (e->code[0]) cJSON_AddStringToObject(o, "code", e->code); else cJSON_AddNullToObject(o, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

void llm_api_req_free(llm_api_req *r)
{
    cJSON_Delete(r->root);
    cJSON_Delete(r->body);
    free(r->ids);
    for (size_t i = 0; r->msgs != NULL && i < r->n_msgs; i++) llm_tools_calls_free((llm_chat_call *)r->msgs[i].calls,
                                                                                  r->msgs[i].n_calls);
    free(r->msgs);
    free(r->bias_ids);
    cJSON_free(r->schema);
    free(r->tool_defs);
    free(r->bias);
    if (r->batch_ids)
        for (int i = 0; i < r->n_prompts; i++) free(r->batch_ids[i]);
    free(r->batch_ids);
    free(r->batch_n_ids);
    free(r->batch);
    free(r->batch_len);
    memset(r, 0, sizeof *r);
}

/* ---- typed field getters: 0 absent/null, 1 present and valid, -1 error set ---- */

const cJSON *llm_api_field(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}


static int get_num(const cJSON *o, const char *name, double lo, double hi, double *out, llm_api_err *e)
{
    const cJSON *v = llm_api_field(o, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        llm_api_seterr(e, 400, name, "invalid_type", "'%s' must be a number", name);
        return -1;
    }
    if (v->valuedouble < lo || v->valuedouble > hi) {
        llm_api_seterr(e, 400, name, "invalid_value", "'%s' must be between %g and %g, got %g",
                       name, lo, hi, v->valuedouble);
        return -1;
    }
    *out = v->valuedouble;
    return 1;
}

static int get_int(const cJSON *o, const char *name, double lo, double hi, long long *out, llm_api_err *e)
{
    const cJSON *v = llm_api_field(o, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || floor(v->valuedouble) != v->valuedouble) {
        llm_api_seterr(e, 400, name, "invalid_type", "'%s' must be an integer", name);
        return -1;
    }
    if (v->valuedouble < lo || v->valuedouble > hi) {
        llm_api_seterr(e, 400, name, "invalid_value", "'%s' must be between %.0f and %.0f, got %.0f",
                       name, lo, hi, v->valuedouble);
        return -1;
    }
    *out = (long long)v->valuedouble;
    return 1;
}

static int get_bool(const cJSON *o, const char *name, int *out, llm_api_err *e)
{
    const cJSON *v = llm_api_field(o, name);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) {
        llm_api_seterr(e, 400, name, "invalid_type", "'%s' must be a boolean", name);
        return -1;
    }
    *out = cJSON_IsTrue(v);
    return 1;
}

static int get_str(const cJSON *o, const char *name, const char **out, llm_api_err *e)
{
    const cJSON *v = llm_api_field(o, name);
    if (!v) return 0;
    if (!cJSON_IsString(v)) {
        llm_api_seterr(e, 400, name, "invalid_type", "'%s' must be a string", name);
        return -1;
    }
    *out = v->valuestring;
    return 1;
}

/* Token ids: an array of non-negative integers (upper bound checked against the vocabulary later). */
static int get_ids(const cJSON *a, const char *name, int32_t **out, size_t *n, llm_api_err *e)
{
    int cnt = cJSON_GetArraySize(a);
    int32_t *ids = malloc(((size_t)cnt + 1) * sizeof *ids);
    if (!ids) { llm_api_seterr(e, 500, NULL, NULL, "out of memory"); return -1; }
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) {
        if (!cJSON_IsNumber(x) || floor(x->valuedouble) != x->valuedouble ||
            x->valuedouble < 0 || x->valuedouble > 2147483647.0) {
            free(ids);
            llm_api_seterr(e, 400, name, "invalid_type", "'%s' must be an array of token ids (non-negative integers)", name);
            return -1;
        }
        ids[i++] = (int32_t)x->valuedouble;
    }
    *out = ids;
    *n = (size_t)i;
    return 1;
}

/* A list of several prompts (the request's field `name`: prompt, input): all strings, or all non-empty arrays
 * of token ids. */
static int parse_batch(const cJSON *p, const char *name, int cnt, llm_api_req *r, llm_api_err *e)
{
    int strings = cJSON_IsString(cJSON_GetArrayItem(p, 0));
    if (strings) {
        r->batch = calloc((size_t)cnt, sizeof *r->batch);
        r->batch_len = calloc((size_t)cnt, sizeof *r->batch_len);
    } else {
        r->batch_ids = calloc((size_t)cnt, sizeof *r->batch_ids);
        r->batch_n_ids = calloc((size_t)cnt, sizeof *r->batch_n_ids);
    }
    if (strings ? !r->batch || !r->batch_len : !r->batch_ids || !r->batch_n_ids) {
        llm_api_seterr(e, 500, NULL, NULL, "out of memory");
        return -1;
    }
    r->n_prompts = cnt;
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, p) {
        if (strings ? !cJSON_IsString(x) : !cJSON_IsArray(x)) {
            llm_api_seterr(e, 400, name, "invalid_type",
                           "'%s' as a list holds strings or arrays of token ids, not both (%s %d)", name, name, i);
            return -1;
        }
        if (strings) {
            r->batch[i] = x->valuestring;
            r->batch_len[i] = strlen(x->valuestring);
        } else {
            if (cJSON_GetArraySize(x) == 0) {
                llm_api_seterr(e, 400, name, "invalid_value", "%s %d of the list is empty", name, i);
                return -1;
            }
            if (get_ids(x, name, &r->batch_ids[i], &r->batch_n_ids[i], e) < 0) return -1;
        }
        i++;
    }
    return 0;
}

/* The prompt(s) in field `name`: a string, token ids, or a list of either (at most max). */
static int parse_prompt(const cJSON *root, const char *name, int max, llm_api_req *r, llm_api_err *e)
{
    const cJSON *p = llm_api_field(root, name);
    r->n_prompts = 1;
    if (!p) { llm_api_seterr(e, 400, name, "missing_required_parameter", "'%s' is required", name); return -1; }
    if (cJSON_IsString(p)) { r->prompt = p->valuestring; r->prompt_len = strlen(p->valuestring); return 0; }
    if (cJSON_IsArray(p)) {
        int cnt = cJSON_GetArraySize(p);
        if (cnt == 0) { llm_api_seterr(e, 400, name, "invalid_value", "'%s' must not be empty", name); return -1; }
        const cJSON *first = cJSON_GetArrayItem(p, 0);
        if (cJSON_IsString(first) || cJSON_IsArray(first)) { /* one prompt in a list, or several (batched) */
            if (cnt > max) {
                llm_api_seterr(e, 400, name, "invalid_value", "%d %ss in one request; at most %d", cnt, name, max);
                return -1;
            }
            if (cnt > 1) return parse_batch(p, name, cnt, r, e);
            if (cJSON_IsString(first)) {
                r->prompt = first->valuestring;
                r->prompt_len = strlen(first->valuestring);
                return 0;
            }
            p = first;
            if (cJSON_GetArraySize(p) == 0) {
                llm_api_seterr(e, 400, name, "invalid_value", "'%s' must not be empty", name);
                return -1;
            }
        }
        return get_ids(p, name, &r->ids, &r->n_ids, e) < 0 ? -1 : 0;
    }
    llm_api_seterr(e, 400, name, "invalid_type", "'%s' must be a string or an array of token ids", name);
    return -1;
}

/* POST /v1/embeddings: input, encoding_format, dimensions, user (OpenAI's); truncate (TEI's). */
static int parse_embeddings(const cJSON *root, llm_api_req *r, llm_api_err *e)
{
    if (parse_prompt(root, "input", LLM_API_MAX_INPUTS, r, e)) return -1;
    for (int i = 0; r->batch && i < r->n_prompts; i++)
        if (r->batch_len[i] == 0) {
            llm_api_seterr(e, 400, "input", "invalid_value", "input %d is an empty string", i);
            return -1;
        }
    if (r->prompt && r->prompt_len == 0) {
        llm_api_seterr(e, 400, "input", "invalid_value", "'input' must not be an empty string");
        return -1;
    }
    const char *fmt = NULL;
    if (get_str(root, "encoding_format", &fmt, e) < 0) return -1;
    if (fmt && strcmp(fmt, "float") != 0 && strcmp(fmt, "base64") != 0) {
        llm_api_seterr(e, 400, "encoding_format", "invalid_value", "'encoding_format' is \"float\" or \"base64\"");
        return -1;
    }
    r->base64 = fmt && strcmp(fmt, "base64") == 0;
    long long d = 0;
    if (get_int(root, "dimensions", 1, 1 << 20, &d, e) < 0 || get_bool(root, "truncate", &r->truncate, e) < 0)
        return -1;
    r->dimensions = (int)d;
    return get_str(root, "user", &r->user, e) < 0 ? -1 : 0;
}

/* POST /v1/rerank: query, documents (strings or {"text": ...}), top_n, return_documents, instruction, truncate. */
static int parse_rerank(const cJSON *root, llm_api_req *r, llm_api_err *e)
{
    if (get_str(root, "query", &r->query, e) < 0) return -1;
    if (r->query == NULL || r->query[0] == 0) {
        llm_api_seterr(e, 400, "query", "missing_required_parameter", "'query' (a non-empty string) is required");
        return -1;
    }
    const cJSON *d = llm_api_field(root, "documents"), *x;
    int n = cJSON_IsArray(d) ? cJSON_GetArraySize(d) : -1;
    if (n < 1 || n > LLM_API_MAX_DOCUMENTS) {
        llm_api_seterr(e, 400, "documents", d ? "invalid_value" : "missing_required_parameter",
                       "'documents' must be an array of 1 to %d strings or {\"text\": ...} objects",
                       LLM_API_MAX_DOCUMENTS);
        return -1;
    }
    r->batch = malloc((size_t)n * sizeof *r->batch);
    r->batch_len = malloc((size_t)n * sizeof *r->batch_len);
    if (r->batch == NULL || r->batch_len == NULL) { llm_api_seterr(e, 500, NULL, NULL, "out of memory"); return -1; }
    int i = 0;
    cJSON_ArrayForEach(x, d) {
        const cJSON *t = cJSON_IsObject(x) ? cJSON_GetObjectItemCaseSensitive(x, "text") : x;
        if (!cJSON_IsString(t)) {
            llm_api_seterr(e, 400, "documents", "invalid_type", "documents[%d] must be a string or {\"text\": ...}", i);
            return -1;
        }
        r->batch[i] = t->valuestring;
        r->batch_len[i++] = strlen(t->valuestring);
    }
    r->n_prompts = n;
    long long top = 0;
    if (get_int(root, "top_n", 1, 1e9, &top, e) < 0 ||
        get_bool(root, "return_documents", &r->return_documents, e) < 0 ||
        get_bool(root, "truncate", &r->truncate, e) < 0 || get_str(root, "instruction", &r->instruction, e) < 0)
        return -1;
    r->top_n = top > n ? n : (int)top;
    return 0;
}

void llm_api_prompt_at(const llm_api_req *r, int i, llm_api_req *one)
{
    *one = *r;
    one->n_prompts = 1;
    one->batch = NULL;
    one->batch_len = NULL;
    one->batch_ids = NULL;
    one->batch_n_ids = NULL;
    if (r->n_prompts <= 1) return;
    if (r->batch) {
        one->prompt = r->batch[i];
        one->prompt_len = r->batch_len[i];
    } else {
        one->ids = r->batch_ids[i];
        one->n_ids = r->batch_n_ids[i];
    }
}

/* content: a string, or an array of {"type":"text","text":...} parts (joined). */
static int message_text(cJSON *m, size_t i, const char **out, llm_api_err *e)
{
    cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!c || cJSON_IsNull(c)) { *out = ""; return 0; }
    if (cJSON_IsString(c)) { *out = c->valuestring; return 0; }
    if (cJSON_IsArray(c)) {
        size_t len = 0;
        cJSON *part;
        cJSON_ArrayForEach(part, c) {
            cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "type");
            cJSON *x = cJSON_GetObjectItemCaseSensitive(part, "text");
            if (!cJSON_IsObject(part) || !cJSON_IsString(t) || strcmp(t->valuestring, "text") || !cJSON_IsString(x)) {
                llm_api_seterr(e, 400, "messages", "invalid_value",
                               "messages[%zu].content: only text parts ({\"type\":\"text\",\"text\":...}) are supported", i);
                return -1;
            }
            len += strlen(x->valuestring);
        }
        char *joined = malloc(len + 1), *p = joined;
        if (!joined) { llm_api_seterr(e, 500, NULL, NULL, "out of memory"); return -1; }
        cJSON_ArrayForEach(part, c) {
            const char *x = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
            size_t l = strlen(x);
            memcpy(p, x, l);
            p += l;
        }
        *p = 0;
        /* Keep the joined text alive with the tree: replace the array by a string. */
        cJSON *s = cJSON_CreateString(joined);
        free(joined);
        if (!s) { llm_api_seterr(e, 500, NULL, NULL, "out of memory"); return -1; }
        cJSON_ReplaceItemInObjectCaseSensitive(m, "content", s);
        *out = s->valuestring;
        return 0;
    }
    llm_api_seterr(e, 400, "messages", "invalid_type", "messages[%zu].content must be a string or an array of text parts", i);
    return -1;
}

static int parse_messages(cJSON *root, llm_api_req *r, llm_api_err *e)
{
    cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!a || cJSON_IsNull(a)) {
        llm_api_seterr(e, 400, "messages", "missing_required_parameter", "'messages' is required");
        return -1;
    }
    if (!cJSON_IsArray(a)) { llm_api_seterr(e, 400, "messages", "invalid_type", "'messages' must be an array"); return -1; }
    int cnt = cJSON_GetArraySize(a);
    if (cnt == 0) { llm_api_seterr(e, 400, "messages", "invalid_value", "'messages' must not be empty"); return -1; }
    r->msgs = calloc((size_t)cnt, sizeof *r->msgs);
    if (!r->msgs) { llm_api_seterr(e, 500, NULL, NULL, "out of memory"); return -1; }
    cJSON *m;
    size_t i = 0;
    cJSON_ArrayForEach(m, a) {
        if (!cJSON_IsObject(m)) {
            llm_api_seterr(e, 400, "messages", "invalid_type", "messages[%zu] must be an object", i);
            return -1;
        }
        cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role)) {
            llm_api_seterr(e, 400, "messages", "invalid_value", "messages[%zu].role must be a string", i);
            return -1;
        }
        const char *rs = role->valuestring;
        if (!strcmp(rs, "developer")) rs = "system"; /* OpenAI's newer name for the system role */
        else if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "tool")) {
            llm_api_seterr(e, 400, "messages", "invalid_value",
                           "messages[%zu].role must be one of system, developer, user, assistant, tool", i);
            return -1;
        }
        r->msgs[i].role = rs;
        const cJSON *call_id = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id");
        if (!strcmp(rs, "tool") && call_id && !cJSON_IsNull(call_id)) {
            if (!cJSON_IsString(call_id)) {
                llm_api_seterr(e, 400, "messages", "invalid_type", "messages[%zu].tool_call_id must be a string", i);
                return -1;
            }
            r->msgs[i].call_id = call_id->valuestring; /* the call it answers (Mistral's formats write it) */
        }
        cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (!strcmp(rs, "assistant") && calls && !cJSON_IsNull(calls)) {
            /* the calls, which the chat template writes as the model did; the content (if any) beside them */
            llm_chat_call *cl = NULL;
            size_t ncl = 0;
            if (llm_tools_history_calls(calls, i, r->chat_format, &cl, &ncl, e)) return -1;
            r->msgs[i].calls = cl;
            r->msgs[i].n_calls = ncl;
            r->n_msgs = i + 1; /* so that llm_api_req_free frees the calls if a later message fails */
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
            if (c == NULL || cJSON_IsNull(c)) r->msgs[i].content = "";
            else if (message_text(m, i, &r->msgs[i].content, e)) return -1;
            i++;
            continue;
        }
        if (message_text(m, i, &r->msgs[i].content, e)) return -1;
        i++;
    }
    r->n_msgs = i;
    return 0;
}

/* A reasoning effort (OpenAI's reasoning_effort; gpt-oss's template writes it into its system message): "low",
 * "medium" or "high" ("minimal", OpenAI's other value, as "low"). */
static int parse_effort(const cJSON *obj, const char *name, llm_api_req *r, llm_api_err *e)
{
    const cJSON *v = llm_api_field(obj, strrchr(name, '.') ? strrchr(name, '.') + 1 : name);
    if (v == NULL || cJSON_IsNull(v)) return 0;
    static const char *const ok[] = { "low", "medium", "high", "minimal" };
    for (size_t i = 0; cJSON_IsString(v) && i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(v->valuestring, ok[i]) == 0) {
            r->reasoning_effort = i == 3 ? "low" : ok[i];
            return 0;
        }
    llm_api_seterr(e, 400, name, "invalid_value", "'%s' must be \"low\", \"medium\" or \"high\"", name);
    return -1;
}

/* vLLM's chat_template_kwargs: the variables a Jinja template would get. enable_thinking (Qwen 3, EXAONE 4, GLM-4.5,
 * Seed-OSS's thinking_budget 0) and thinking_budget (Seed-OSS's; 0 is enable_thinking false) are the ones the built-in
 * templates read; others are accepted and have no effect, as with a template that does not use them. */
static int parse_template_kwargs(const cJSON *root, llm_api_req *r, llm_api_err *e)
{
    if (parse_effort(root, "reasoning_effort", r, e)) return -1;
    const cJSON *k = llm_api_field(root, "chat_template_kwargs");
    if (!k) return 0;
    if (!cJSON_IsObject(k)) {
        llm_api_seterr(e, 400, "chat_template_kwargs", "invalid_type", "'chat_template_kwargs' must be an object");
        return -1;
    }
    const cJSON *t = llm_api_field(k, "enable_thinking");
    if (t && !cJSON_IsBool(t)) {
        llm_api_seterr(e, 400, "chat_template_kwargs", "invalid_type", "'chat_template_kwargs.enable_thinking' must be "
                       "a boolean");
        return -1;
    }
    if (t) r->enable_thinking = cJSON_IsTrue(t);
    const cJSON *b = llm_api_field(k, "thinking_budget"); /* Seed-OSS's: -1 (none), 0 (no thinking), or tokens */
    if (b && (!cJSON_IsNumber(b) || b->valuedouble != (double)(int)b->valuedouble || b->valuedouble < -1 ||
              b->valuedouble > 1e6)) {
        llm_api_seterr(e, 400, "chat_template_kwargs", "invalid_value", "'chat_template_kwargs.thinking_budget' must be "
                       "an integer from -1 (no budget) to 1000000");
        return -1;
    }
    if (b) r->thinking_budget = (int)b->valuedouble;
    if (r->thinking_budget == 0 && r->chat_format == LLM_CHAT_SEED_OSS)
        r->enable_thinking = 0; /* (its template's thinking_budget 0: no reasoning) */
    return parse_effort(k, "chat_template_kwargs.reasoning_effort", r, e);
}

static int parse_stop(const cJSON *root, llm_api_req *r, llm_api_err *e)
{
    const cJSON *s = llm_api_field(root, "stop");
    if (!s) return 0;
    if (cJSON_IsString(s)) {
        if (strlen(s->valuestring) > LLM_STOP_MAX_LEN) goto too_long;
        if (s->valuestring[0]) {
            r->stop[0] = s->valuestring;
            r->stop_len[0] = strlen(s->valuestring);
            r->n_stop = 1;
        }
        return 0;
    }
    if (!cJSON_IsArray(s)) goto bad;
    if (cJSON_GetArraySize(s) > LLM_STOP_MAX) {
        llm_api_seterr(e, 400, "stop", "invalid_value", "at most %d stop sequences are supported", LLM_STOP_MAX);
        return -1;
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, s) {
        if (!cJSON_IsString(x)) goto bad;
        size_t l = strlen(x->valuestring);
        if (l > LLM_STOP_MAX_LEN) goto too_long;
        if (!l) continue;
        r->stop[r->n_stop] = x->valuestring;
        r->stop_len[r->n_stop++] = l;
    }
    return 0;
bad:
    llm_api_seterr(e, 400, "stop", "invalid_type", "'stop' must be a string or an array of strings");
    return -1;
too_long:
    llm_api_seterr(e, 400, "stop", "invalid_value", "stop sequences are limited to %d bytes", LLM_STOP_MAX_LEN);
    return -1;
}

/* A token id as an object key: decimal digits only, at most INT32_MAX. */
static int key_token_id(const char *k, int32_t *out)
{
    long long v = 0;
    if (k == NULL || *k == '\0')
        return -1;
    for (const char *c = k; *c; c++) {
        if (*c < '0' || *c > '9' || c - k >= 10)
            return -1;
        v = v * 10 + (*c - '0');
    }
    if (v > 2147483647LL)
        return -1;
    *out = (int32_t)v;
    return 0;
}

static int parse_logit_bias(const cJSON *root, llm_api_req *r, llm_api_err *e)
{
    const cJSON *o = llm_api_field(root, "logit_bias"), *x;
    if (!o) return 0;
    if (!cJSON_IsObject(o)) {
        llm_api_seterr(e, 400, "logit_bias", "invalid_type", "'logit_bias' must be an object mapping token ids to biases");
        return -1;
    }
    int cnt = cJSON_GetArraySize(o);
    if (cnt == 0) return 0;
    if (cnt > LLM_API_MAX_BIAS) {
        llm_api_seterr(e, 400, "logit_bias", "invalid_value", "'logit_bias' has %d entries; at most %d are allowed",
                       cnt, LLM_API_MAX_BIAS);
        return -1;
    }
    r->bias_ids = malloc((size_t)cnt * sizeof *r->bias_ids);
    r->bias = malloc((size_t)cnt * sizeof *r->bias);
    if (!r->bias_ids || !r->bias) { llm_api_seterr(e, 500, NULL, NULL, "out of memory"); return -1; }
    cJSON_ArrayForEach(x, o) {
        int32_t id;
        if (key_token_id(x->string, &id)) {
            llm_api_seterr(e, 400, "logit_bias", "invalid_value",
                           "'logit_bias' keys must be token ids (non-negative integers), got \"%.40s\"", x->string);
            return -1;
        }
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < -LLM_API_BIAS_LIMIT ||
            x->valuedouble > LLM_API_BIAS_LIMIT) {
            llm_api_seterr(e, 400, "logit_bias", "invalid_value",
                           "'logit_bias' values must be numbers between %g and %g (token %d)",
                           -LLM_API_BIAS_LIMIT, LLM_API_BIAS_LIMIT, (int)id);
            return -1;
        }
        r->bias_ids[r->n_bias] = id;
        r->bias[r->n_bias++] = (float)x->valuedouble;
    }
    return 0;
}

/* vLLM's stop_token_ids: at most LLM_API_MAX_STOP_IDS ids (checked against the vocabulary later). */
static int parse_stop_token_ids(const cJSON *root, llm_api_req *r, llm_api_err *e)
{
    const cJSON *a = llm_api_field(root, "stop_token_ids");
    if (!a) return 0;
    if (!cJSON_IsArray(a)) {
        llm_api_seterr(e, 400, "stop_token_ids", "invalid_type", "'stop_token_ids' must be an array of token ids");
        return -1;
    }
    if (cJSON_GetArraySize(a) > LLM_API_MAX_STOP_IDS) {
        llm_api_seterr(e, 400, "stop_token_ids", "invalid_value", "at most %d stop_token_ids", LLM_API_MAX_STOP_IDS);
        return -1;
    }
    int32_t *ids;
    size_t n;
    if (get_ids(a, "stop_token_ids", &ids, &n, e) < 0) return -1;
    memcpy(r->stop_token_ids, ids, n * sizeof *ids);
    r->n_stop_token_ids = (int)n;
    free(ids);
    return 0;
}

/* What this server does not do, refused rather than ignored (a client would take the answer for one that
 * honoured it): the legacy functions (tools replace them), function calling on completions, insertion,
 * best_of. Empty lists, "none" and best_of 1 are fine. */
/* completions' suffix: insertion, through the model's fill-in-the-middle tokens (the module encodes it). */
static int parse_suffix(const cJSON *root, llm_api_req *r, llm_api_err *e)
{
    const cJSON *sfx = llm_api_field(root, "suffix");
    if (r->kind == LLM_API_COMPLETIONS && sfx) { /* insertion: the model's fill-in-the-middle tokens (the module) */
        if (!cJSON_IsString(sfx)) {
            llm_api_seterr(e, 400, "suffix", "invalid_type", "'suffix' must be a string");
            return -1;
        }
        if (sfx->valuestring[0] != '\0') {
            if (r->ids || r->batch_ids || r->echo) {
                llm_api_seterr(e, 400, "suffix", "invalid_value", "'suffix' goes with a text prompt (not token ids), "
                               "without 'echo'");
                return -1;
            }
            r->suffix = sfx->valuestring;
            r->suffix_len = strlen(sfx->valuestring);
        }
    }
    return 0;
}

static int refuse_unsupported(const cJSON *root, const llm_api_req *r, llm_api_err *e)
{
    const cJSON *fs = llm_api_field(root, "functions");
    if (fs && (!cJSON_IsArray(fs) || cJSON_GetArraySize(fs) > 0)) {
        llm_api_seterr(e, 400, "functions", "unsupported_parameter",
                       "'functions' (the legacy form of function calling) is not supported: give 'tools'");
        return -1;
    }
    const cJSON *fc = llm_api_field(root, "function_call");
    if (fc && !(cJSON_IsString(fc) && (!strcmp(fc->valuestring, "none") || !strcmp(fc->valuestring, "auto")))) {
        llm_api_seterr(e, 400, "function_call", "unsupported_parameter",
                       "'function_call' (the legacy form of function calling) is not supported: give 'tool_choice'");
        return -1;
    }
    const cJSON *tools = llm_api_field(root, "tools");
    if (r->kind == LLM_API_COMPLETIONS && tools && (!cJSON_IsArray(tools) || cJSON_GetArraySize(tools) > 0)) {
        llm_api_seterr(e, 400, "tools", "unsupported_parameter", "'tools' (function calling) is for /v1/chat/completions");
        return -1;
    }
    const cJSON *bo = llm_api_field(root, "best_of");
    if (bo && !(cJSON_IsNumber(bo) && (bo->valuedouble == 1 || bo->valuedouble == r->n))) {
        llm_api_seterr(e, 400, "best_of", "unsupported_parameter",
                       "'best_of' above 'n' is not supported by this server: ask for 'n' choices and pick");
        return -1;
    }
    return 0;
}

/* A JSON Schema (a cJSON value) for constrained output: compiled to check it, kept as compact text. */
static int take_schema(const cJSON *schema, const char *param, llm_api_req *r, llm_api_err *e)
{
    char why[256];
    llm_schema *sc = llm_schema_compile(schema, why, sizeof why);
    if (sc == NULL) {
        llm_api_seterr(e, 400, param, "invalid_schema", "%s", why);
        return -1;
    }
    llm_schema_free(sc);
    r->schema = cJSON_PrintUnformatted(schema);
    if (r->schema == NULL) {
        llm_api_seterr(e, 500, NULL, NULL, "out of memory");
        return -1;
    }
    r->schema_len = strlen(r->schema);
    if (r->schema_len > LLM_SCHEMA_MAX_TEXT) {
        llm_api_seterr(e, 400, param, "invalid_schema", "the schema takes more than %d bytes", LLM_SCHEMA_MAX_TEXT);
        return -1;
    }
    return 0;
}

/* vLLM's guided_json: a schema, or its text. */
static int take_schema_or_text(const cJSON *g, const char *param, llm_api_req *r, llm_api_err *e)
{
    if (!cJSON_IsString(g)) return take_schema(g, param, r, e);
    cJSON *doc = cJSON_Parse(g->valuestring);
    if (doc == NULL) {
        llm_api_seterr(e, 400, param, "invalid_schema", "'%s' is a string that is not JSON", param);
        return -1;
    }
    int rc = take_schema(doc, param, r, e);
    cJSON_Delete(doc);
    return rc;
}

/* A regular expression the whole output matches (vLLM's guided_regex): checked by compiling it as the engine
 * will (json_schema.h), kept as it is. */
static int take_regex(const char *src, size_t len, const char *param, llm_api_req *r, llm_api_err *e)
{
    char why[256];
    llm_schema *sc = len > 0 ? llm_schema_regex(src, len, why, sizeof why) : NULL;
    if (sc == NULL) {
        llm_api_seterr(e, 400, param, "invalid_value", "%s", len > 0 ? why : "the regular expression is empty");
        return -1;
    }
    llm_schema_free(sc);
    if ((r->schema = cJSON_malloc(len + 1)) == NULL) {
        llm_api_seterr(e, 500, NULL, NULL, "out of memory");
        return -1;
    }
    memcpy(r->schema, src, len);
    r->schema[len] = '\0';
    r->schema_len = len;
    r->regex = 1;
    return 0;
}

/* A GBNF grammar the whole output is a text of (llama.cpp's grammar, vLLM's guided_grammar in that form):
 * checked by compiling it as the engine will (grammar.h), kept as it is. */
static int take_grammar(const cJSON *g, const char *param, const char *name, llm_api_req *r, llm_api_err *e)
{
    if (!cJSON_IsString(g)) {
        llm_api_seterr(e, 400, param, "invalid_type", "'%s' must be a string (a GBNF grammar)", name);
        return -1;
    }
    char why[256];
    size_t len = strlen(g->valuestring);
    llm_schema *sc = len > 0 ? llm_schema_grammar(g->valuestring, len, why, sizeof why) : NULL;
    if (sc == NULL) {
        llm_api_seterr(e, 400, param, "invalid_value", "%s", len > 0 ? why : "the grammar is empty");
        return -1;
    }
    llm_schema_free(sc);
    if ((r->schema = cJSON_malloc(len + 1)) == NULL) {
        llm_api_seterr(e, 500, NULL, NULL, "out of memory");
        return -1;
    }
    memcpy(r->schema, g->valuestring, len + 1);
    r->schema_len = len;
    r->grammar = 1;
    return 0;
}

/* vLLM's guided_choice: the output is one of the strings, as the regex of their alternation (each string's
 * metacharacters escaped; tab, newline and carriage return as escapes, other control characters refused). */
static int take_choice(const cJSON *c, const char *param, llm_api_req *r, llm_api_err *e)
{
    int n = cJSON_IsArray(c) ? cJSON_GetArraySize(c) : 0;
    if (n < 1 || n > 256) {
        llm_api_seterr(e, 400, param, "invalid_value", "'%s' must be a list of 1 to 256 strings", param);
        return -1;
    }
    char re[LLM_REGEX_MAX_LEN];
    size_t at = 0;
    int i = 0;
    for (const cJSON *x = c->child; x != NULL; x = x->next, i++) {
        if (!cJSON_IsString(x) || x->valuestring[0] == '\0') {
            llm_api_seterr(e, 400, param, "invalid_value", "'%s[%d]' must be a string that is not empty", param, i);
            return -1;
        }
        if (i > 0 && at < sizeof re) re[at++] = '|';
        for (const unsigned char *p = (const unsigned char *)x->valuestring; *p && at + 2 < sizeof re; p++) {
            if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') {
                llm_api_seterr(e, 400, param, "invalid_value", "'%s[%d]' holds a control character", param, i);
                return -1;
            }
            if (*p == '\t' || *p == '\n' || *p == '\r') {
                re[at++] = '\\';
                re[at++] = *p == '\t' ? 't' : *p == '\n' ? 'n' : 'r';
            } else {
                if (strchr("\\^$.|?*+()[]{}/-", *p) != NULL) re[at++] = '\\';
                re[at++] = (char)*p;
            }
        }
        if (at + 2 >= sizeof re) {
            llm_api_seterr(e, 400, param, "invalid_value", "'%s' takes more than %d bytes as a regular expression",
                           param, LLM_REGEX_MAX_LEN - 6);
            return -1;
        }
    }
    return take_regex(re, at, param, r, e);
}

/* vLLM's structured_outputs: {"json": schema} (or its text), {"regex": "..."}, {"choice": [...]} or
 * {"grammar": "..."}, one of them. */
static int take_structured(const cJSON *so, llm_api_req *r, llm_api_err *e)
{
    const cJSON *j = cJSON_IsObject(so) ? llm_api_field(so, "json") : NULL;
    const cJSON *x = cJSON_IsObject(so) ? llm_api_field(so, "regex") : NULL;
    const cJSON *c = cJSON_IsObject(so) ? llm_api_field(so, "choice") : NULL;
    const cJSON *g = cJSON_IsObject(so) ? llm_api_field(so, "grammar") : NULL;
    if (!cJSON_IsObject(so) || (j != NULL) + (x != NULL) + (c != NULL) + (g != NULL) != 1) {
        llm_api_seterr(e, 400, "structured_outputs", "invalid_value",
                       "'structured_outputs' must be an object with one of 'json', 'regex', 'choice' or 'grammar'");
        return -1;
    }
    if (x != NULL && !cJSON_IsString(x)) {
        llm_api_seterr(e, 400, "structured_outputs", "invalid_type", "'structured_outputs.regex' must be a string");
        return -1;
    }
    if (x != NULL) return take_regex(x->valuestring, strlen(x->valuestring), "structured_outputs", r, e);
    if (g != NULL) return take_grammar(g, "structured_outputs", "structured_outputs.grammar", r, e);
    if (c != NULL) return take_choice(c, "structured_outputs", r, e);
    return take_schema_or_text(j, "structured_outputs", r, e);
}

/* response_format: {"type": "text"}, {"type": "json_object"} (JSON mode) or {"type": "json_schema",
 * "json_schema": {"name", "schema", "strict", "description"}} (without a schema: JSON mode); vLLM's
 * guided_json (a schema, or its text), guided_regex, guided_choice, guided_grammar and structured_outputs;
 * llama.cpp's json_schema and grammar: one of them. */
static int parse_response_format(const cJSON *root, llm_api_req *r, llm_api_err *e)
{
    const cJSON *o = llm_api_field(root, "response_format"), *g = llm_api_field(root, "guided_json");
    const cJSON *gr = llm_api_field(root, "guided_regex"), *gc = llm_api_field(root, "guided_choice");
    const cJSON *so = llm_api_field(root, "structured_outputs"), *lj = llm_api_field(root, "json_schema");
    const cJSON *lg = llm_api_field(root, "grammar"), *gg = llm_api_field(root, "guided_grammar");
    if ((o != NULL) + (g != NULL) + (gr != NULL) + (gc != NULL) + (so != NULL) + (lj != NULL) + (lg != NULL) +
        (gg != NULL) > 1) {
        const char *param = g ? "guided_json" : gr ? "guided_regex" : gc ? "guided_choice" : gg ? "guided_grammar"
                            : so ? "structured_outputs" : lj ? "json_schema" : "grammar";
        llm_api_seterr(e, 400, param,
                       "invalid_value", "give one of 'response_format', 'guided_json', 'guided_regex', "
                       "'guided_choice', 'guided_grammar', 'structured_outputs', 'json_schema' and 'grammar'");
        return -1;
    }
    if (lg) return take_grammar(lg, "grammar", "grammar", r, e); /* llama.cpp server's */
    if (gg) return take_grammar(gg, "guided_grammar", "guided_grammar", r, e);
    if (lj) return take_schema_or_text(lj, "json_schema", r, e); /* llama.cpp server's */
    if (gr && !cJSON_IsString(gr)) {
        llm_api_seterr(e, 400, "guided_regex", "invalid_type", "'guided_regex' must be a string");
        return -1;
    }
    if (gr) return take_regex(gr->valuestring, strlen(gr->valuestring), "guided_regex", r, e);
    if (gc) return take_choice(gc, "guided_choice", r, e);
    if (so) return take_structured(so, r, e);
    if (g) return take_schema_or_text(g, "guided_json", r, e);
    if (!o) return 0;
    const char *type = NULL;
    if (!cJSON_IsObject(o) || get_str(o, "type", &type, e) != 1) {
        llm_api_seterr(e, 400, "response_format", "invalid_type",
                       "'response_format' must be an object with a 'type': \"text\", \"json_object\" or \"json_schema\"");
        return -1;
    }
    if (!strcmp(type, "json_object")) {
        r->json = 1;
        return 0;
    }
    if (!strcmp(type, "text")) return 0;
    if (strcmp(type, "json_schema") != 0) {
        llm_api_seterr(e, 400, "response_format", "invalid_value",
                       "response_format type must be \"text\", \"json_object\" or \"json_schema\", got \"%.40s\"", type);
        return -1;
    }
    const cJSON *js = llm_api_field(o, "json_schema");
    if (!cJSON_IsObject(js)) {
        llm_api_seterr(e, 400, "response_format", "invalid_value",
                       "response_format type \"json_schema\" needs a 'json_schema' object with the 'schema'");
        return -1;
    }
    const cJSON *name = llm_api_field(js, "name"), *schema = llm_api_field(js, "schema");
    if (name && !cJSON_IsString(name)) {
        llm_api_seterr(e, 400, "response_format", "invalid_type", "'json_schema.name' must be a string");
        return -1;
    }
    if (!schema) { /* no schema: any JSON object, as JSON mode */
        r->json = 1;
        return 0;
    }
    return take_schema(schema, "response_format", r, e);
}

static int parse_sampling(const cJSON *root, llm_api_req *r, llm_api_err *e)
{
    long long iv;
    int rc, b;

    /* max_completion_tokens is the chat API's newer name; either is accepted. 0 only with echo. */
    if (r->kind == LLM_API_COMPLETIONS && get_bool(root, "echo", &r->echo, e) < 0) return -1;
    if ((rc = get_int(root, "max_tokens", r->echo ? 0 : 1, 1e9, &iv, e)) < 0) return -1;
    if (rc) r->max_tokens = (int)iv;
    if (rc && iv == 0) r->echo_only = 1;
    if ((rc = get_int(root, "max_completion_tokens", 1, 1e9, &iv, e)) < 0) return -1;
    if (rc) r->max_tokens = (int)iv;

    if (get_num(root, "temperature", 0, 2, &r->temperature, e) < 0) return -1;
    if (get_num(root, "top_p", 0, 1, &r->top_p, e) < 0) return -1;
    if (llm_api_field(root, "top_p") && r->top_p <= 0) {
        llm_api_seterr(e, 400, "top_p", "invalid_value", "'top_p' must be in (0, 1]");
        return -1;
    }
    if ((rc = get_int(root, "top_k", -1, 1e9, &iv, e)) < 0) return -1;
    if (rc) r->top_k = iv < 0 ? 0 : (int)iv; /* -1 means off, as in vLLM */
    if (get_num(root, "min_p", 0, 1, &r->min_p, e) < 0) return -1;
    if (get_num(root, "typical_p", 0, 1, &r->typical_p, e) < 0) return -1;
    if (llm_api_field(root, "typical_p") && r->typical_p <= 0) {
        llm_api_seterr(e, 400, "typical_p", "invalid_value", "'typical_p' must be in (0, 1] (1: off)");
        return -1;
    }
    if (get_num(root, "presence_penalty", -2, 2, &r->presence_penalty, e) < 0) return -1;
    if (get_num(root, "frequency_penalty", -2, 2, &r->frequency_penalty, e) < 0) return -1;
    if (get_num(root, "repetition_penalty", 0, 10, &r->repetition_penalty, e) < 0) return -1;
    if (llm_api_field(root, "repetition_penalty") && r->repetition_penalty <= 0) {
        llm_api_seterr(e, 400, "repetition_penalty", "invalid_value", "'repetition_penalty' must be > 0");
        return -1;
    }
    if ((rc = get_int(root, "seed", -9.2e18, 9.2e18, &iv, e)) < 0) return -1;
    if (rc) { r->has_seed = 1; r->seed = (uint64_t)iv; }
    if ((rc = get_int(root, "min_tokens", 0, 1e9, &iv, e)) < 0) return -1;
    if (rc) r->min_tokens = (int)iv;
    if (parse_stop_token_ids(root, r, e)) return -1;
    if ((rc = get_int(root, "priority", -LLM_API_MAX_PRIORITY, LLM_API_MAX_PRIORITY, &iv, e)) < 0) return -1;
    if (rc) { r->has_priority = 1; r->priority = (int)iv; }
    if ((rc = get_int(root, "n", 1, LLM_API_MAX_N, &iv, e)) < 0) return -1;
    if (rc) r->n = (int)iv;
    if (r->n_prompts * r->n > LLM_API_MAX_CHOICES) {
        llm_api_seterr(e, 400, "n", "invalid_value", "%d prompts x n = %d choices; at most %d in one request",
                       r->n_prompts, r->n_prompts * r->n, LLM_API_MAX_CHOICES);
        return -1;
    }

    if (r->kind == LLM_API_CHAT) {
        if (get_bool(root, "logprobs", &r->logprobs, e) < 0) return -1;
        if ((rc = get_int(root, "top_logprobs", 0, LLM_API_MAX_LOGPROBS, &iv, e)) < 0) return -1;
        if (rc) {
            if (!r->logprobs) {
                llm_api_seterr(e, 400, "top_logprobs", "invalid_value", "'top_logprobs' requires 'logprobs' to be true");
                return -1;
            }
            r->top_logprobs = (int)iv;
        }
    } else {
        /* completions: logprobs is the number of alternatives (0 = only the chosen token's) */
        if ((rc = get_int(root, "logprobs", 0, LLM_API_MAX_LOGPROBS, &iv, e)) < 0) return -1;
        if (rc) { r->logprobs = 1; r->top_logprobs = (int)iv; }
    }
    if (parse_stop(root, r, e)) return -1;
    if (get_bool(root, "stream", &r->stream, e) < 0) return -1;
    const cJSON *so = llm_api_field(root, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so)) {
            llm_api_seterr(e, 400, "stream_options", "invalid_type", "'stream_options' must be an object");
            return -1;
        }
        if (!r->stream) {
            llm_api_seterr(e, 400, "stream_options", "invalid_value", "'stream_options' is only allowed when 'stream' is true");
            return -1;
        }
        if (get_bool(so, "include_usage", &r->include_usage, e) < 0) return -1;
    }
    if ((rc = get_bool(root, "ignore_eos", &b, e)) < 0) return -1;
    if (rc) r->ignore_eos = b;
    if (get_str(root, "user", &r->user, e) < 0 || get_str(root, "prompt_cache_key", &r->cache_key, e) < 0) return -1;
    if (parse_response_format(root, r, e)) return -1;
    if (refuse_unsupported(root, r, e) || parse_suffix(root, r, e)) return -1;
    return parse_logit_bias(root, r, e);
}

int llm_api_parse(llm_api_kind kind, const char *body, size_t len, llm_api_req *r, llm_api_err *e)
{
    return llm_api_parse_chat(kind, body, len, LLM_CHAT_LLAMA3, r, e);
}

int llm_api_parse_chat(llm_api_kind kind, const char *body, size_t len, int chat_format, llm_api_req *r,
                       llm_api_err *e)
{
    return llm_api_parse_with_history(kind, body, len, chat_format, NULL, NULL, r, e);
}

int llm_api_parse_with_history(llm_api_kind kind, const char *body, size_t len, int chat_format,
                               llm_api_history_fn history, void *data, llm_api_req *r, llm_api_err *e)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->chat_format = chat_format;
    r->parallel_calls = 1;
    r->enable_thinking = -1;
    r->thinking_budget = -1;
    r->temperature = 1.0;
    r->top_p = 1.0;
    r->typical_p = 1.0;
    r->repetition_penalty = 1.0;
    r->n = 1;
    r->n_prompts = 1;
    r->add_special = 1;
    r->add_generation_prompt = 1;

    if (!body || len == 0) {
        llm_api_seterr(e, 400, NULL, "invalid_json", "request body is empty: expected a JSON object");
        return -1;
    }
    const char *end = NULL;
    r->root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!r->root) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        llm_api_seterr(e, 400, NULL, "invalid_json", "request body is not valid JSON (error near byte %zu)", at);
        return -1;
    }
    if (!cJSON_IsObject(r->root)) {
        llm_api_seterr(e, 400, NULL, "invalid_json", "request body must be a JSON object");
        return -1;
    }
    cJSON *root = r->root;
    if (get_str(root, "model", &r->model, e) < 0) return -1;
    if (kind == LLM_API_RESPONSES || kind == LLM_API_MESSAGES) { /* from here on the chat body it means */
        cJSON *past = NULL; /* the Responses API: the conversation before previous_response_id */
        const cJSON *prev = kind == LLM_API_RESPONSES ? llm_api_field(root, "previous_response_id") : NULL;
        if (prev != NULL && history != NULL) {
            if (!cJSON_IsString(prev)) {
                llm_api_seterr(e, 400, "previous_response_id", "invalid_type", "'previous_response_id' must be a string");
                return -1;
            }
            if ((past = history(data, prev->valuestring, e)) == NULL) return -1;
        }
        cJSON *chat = kind == LLM_API_RESPONSES ? llm_responses_to_chat(root, past, e) : llm_messages_to_chat(root, e);
        cJSON_Delete(past);
        if (chat == NULL) return -1;
        r->body = root;
        r->root = root = chat;
        r->api = kind;
        r->kind = kind = LLM_API_CHAT;
    } else if (kind == LLM_API_OLLAMA_EMBED || kind == LLM_API_OLLAMA_EMBEDDINGS) {
        cJSON *b = llm_ollama_embed_body(root, kind == LLM_API_OLLAMA_EMBEDDINGS, e);
        if (b == NULL) return -1;
        r->body = root;
        r->root = root = b;
        r->api = kind;
        r->kind = kind = LLM_API_EMBEDDINGS;
        if (get_str(root, "model", &r->model, e) < 0) return -1; /* without Ollama's ":latest" */
    } else if (kind == LLM_API_OLLAMA_CHAT || kind == LLM_API_OLLAMA_GENERATE) {
        int completion, load;
        cJSON *b = llm_ollama_to_body(root, kind == LLM_API_OLLAMA_GENERATE, &completion, &load, e);
        if (b == NULL) return -1;
        r->body = root;
        r->root = root = b;
        r->api = kind;
        if (get_str(root, "model", &r->model, e) < 0) return -1; /* without Ollama's ":latest" */
        if (load) {
            r->ollama_load = 1;
            return 0;
        }
        r->kind = kind = completion ? LLM_API_COMPLETIONS : LLM_API_CHAT;
        const cJSON *o = llm_api_field(r->body, "options");
        const cJSON *np = cJSON_IsObject(o) ? llm_api_field(o, "num_predict") : NULL;
        r->max_tokens_all = cJSON_IsNumber(np) && np->valuedouble < 0;
    } else if (LLM_API_TOKENWISE(kind)) { /* TGI's, llama.cpp's /completion and /infill: completions */
        int lcpp = kind == LLM_API_LCPP || kind == LLM_API_LCPP_INFILL;
        cJSON *b = lcpp ? llm_lcpp_to_body(root, kind == LLM_API_LCPP_INFILL, r, e) : llm_tgi_to_body(root, kind, r, e);
        if (b == NULL) {
            if (lcpp) llm_lcpp_param(e);
            else llm_tgi_param(e);
            return -1;
        }
        r->body = root;
        r->root = root = b;
        r->api = lcpp ? LLM_API_LCPP : kind;
        r->kind = kind = LLM_API_COMPLETIONS;
        r->model = NULL; /* TGI's and llama.cpp's servers serve one model and read no name (their clients may send
                          * their own); with llm_models a name one of them answers to still routes the request */
    }

    switch (kind) {
    case LLM_API_COMPLETIONS:
        if (parse_prompt(root, "prompt", LLM_API_MAX_CHOICES, r, e) || parse_sampling(root, r, e)) {
            if (r->api == LLM_API_OLLAMA_GENERATE) llm_ollama_param(e);
            if (LLM_API_IS_TGI(r->api)) llm_tgi_param(e);
            if (r->api == LLM_API_LCPP) llm_lcpp_param(e);
            return -1;
        }
        return 0;
    case LLM_API_CHAT:
        if (parse_messages(root, r, e) || get_bool(root, "add_generation_prompt", &r->add_generation_prompt, e) < 0 ||
            parse_template_kwargs(root, r, e) || parse_sampling(root, r, e) || llm_tools_parse(root, r, e)) {
            if (r->api == LLM_API_RESPONSES) llm_responses_param(e);
            if (r->api == LLM_API_MESSAGES) llm_messages_param(e);
            if (r->api == LLM_API_OLLAMA_CHAT || r->api == LLM_API_OLLAMA_GENERATE) llm_ollama_param(e);
            return -1;
        }
        return 0;
    case LLM_API_RESPONSES:
    case LLM_API_MESSAGES:
    case LLM_API_OLLAMA_CHAT:
    case LLM_API_OLLAMA_GENERATE:
    case LLM_API_OLLAMA_EMBED:
    case LLM_API_OLLAMA_EMBEDDINGS:
    case LLM_API_TGI:
    case LLM_API_TGI_GENERATE:
    case LLM_API_TGI_STREAM:
    case LLM_API_LCPP:
    case LLM_API_LCPP_INFILL:
        break; /* parsed as LLM_API_CHAT (or COMPLETIONS, EMBEDDINGS) */
    case LLM_API_TOKENIZE: {
        /* vLLM's shape: {"prompt": "..."} or {"messages": [...]}, plus add_special_tokens. */
        if (llm_api_field(root, "messages")) {
            if (parse_messages(root, r, e)) return -1;
            if (get_bool(root, "add_generation_prompt", &r->add_generation_prompt, e) < 0) return -1;
            if (parse_template_kwargs(root, r, e)) return -1;
            if (llm_tools_parse(root, r, e)) return -1; /* the prompt a chat with these tools would get */
        } else if (!llm_api_field(root, "prompt") && llm_api_field(root, "content")) {
            /* llama.cpp's shape: {"content": "..."}, add_special (default false), with_pieces */
            const char *p = NULL;
            if (get_str(root, "content", &p, e) < 0) return -1;
            r->prompt = p;
            r->prompt_len = strlen(p);
            r->add_special = 0;
            if (get_bool(root, "add_special", &r->add_special, e) < 0 ||
                get_bool(root, "with_pieces", &r->with_pieces, e) < 0) return -1;
        } else {
            const char *p = NULL;
            int rc = get_str(root, "prompt", &p, e);
            if (rc < 0) return -1;
            if (!rc) {
                llm_api_seterr(e, 400, "prompt", "missing_required_parameter", "'prompt' (a string), 'messages' or "
                               "'content' (llama.cpp's) is required");
                return -1;
            }
            r->prompt = p;
            r->prompt_len = strlen(p);
        }
        if (get_bool(root, "add_special_tokens", &r->add_special, e) < 0) return -1;
        return 0;
    }
    case LLM_API_EMBEDDINGS:
        return parse_embeddings(root, r, e);
    case LLM_API_RERANK:
        r->return_documents = 1;
        return parse_rerank(root, r, e);
    case LLM_API_DETOKENIZE: {
        const cJSON *t = llm_api_field(root, "tokens");
        if (!t) {
            llm_api_seterr(e, 400, "tokens", "missing_required_parameter", "'tokens' (an array of token ids) is required");
            return -1;
        }
        if (!cJSON_IsArray(t)) {
            llm_api_seterr(e, 400, "tokens", "invalid_type", "'tokens' must be an array of token ids");
            return -1;
        }
        return get_ids(t, "tokens", &r->ids, &r->n_ids, e) < 0 ? -1 : 0;
    }
    }
    llm_api_seterr(e, 500, NULL, NULL, "unknown request kind");
    return -1;
}
