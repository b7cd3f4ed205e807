/* The Responses API's response object and stream events (see ngx_http_llm_responses_out.h). */
#include "ngx_http_llm_responses_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RS_NONE = 0, RS_REASONING, RS_MESSAGE };

/* o[name] = item; item is freed when o is NULL (no event is being made) or the add fails. */
static void rs_put(cJSON *o, const char *name, cJSON *item)
{
    if (o == NULL || item == NULL || !cJSON_AddItemToObject(o, name, item)) cJSON_Delete(item);
}

/* A new event of this type in ev, numbered; NULL when ev is NULL (nothing to make) or out of memory. */
static cJSON *rs_event(ngx_http_llm_rs_t *rs, cJSON *ev, const char *type)
{
    int seq = rs->seq++;
    if (ev == NULL) return NULL;
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NULL;
    cJSON_AddItemToArray(ev, o);
    if (!cJSON_AddStringToObject(o, "type", type) || !cJSON_AddNumberToObject(o, "sequence_number", seq)) return NULL;
    return o;
}

/* An event with its item's place: item_id, output_index and (content >= 0) content_index. */
static cJSON *item_event(ngx_http_llm_rs_t *rs, cJSON *ev, const char *type, int content)
{
    cJSON *o = rs_event(rs, ev, type);
    if (o == NULL) return NULL;
    cJSON_AddStringToObject(o, "item_id", rs->item_id);
    cJSON_AddNumberToObject(o, "output_index", rs->n_items - 1);
    if (content >= 0) cJSON_AddNumberToObject(o, "content_index", content);
    return o;
}

#define EVENT(o, call) do { if (((o) = (call)) == NULL && ev != NULL) return -1; } while (0)

/* The open item's content part: {"type": "reasoning_text", "text"} or {"type": "output_text", "text",
 * "annotations": [], "logprobs": [...]}. */
static cJSON *rs_part(const ngx_http_llm_rs_t *rs, int whole)
{
    cJSON *p = cJSON_CreateObject();
    if (p == NULL) return NULL;
    cJSON_AddStringToObject(p, "type", rs->open == RS_REASONING ? "reasoning_text" : "output_text");
    rs_put(p, "text", whole ? ngx_http_llm_clean_string(rs->text.data, rs->text.len) : cJSON_CreateString(""));
    if (rs->open == RS_MESSAGE) {
        cJSON_AddArrayToObject(p, "annotations");
        rs_put(p, "logprobs", whole && rs->lp ? cJSON_Duplicate(rs->lp, 1) : cJSON_CreateArray());
    }
    return p;
}

/* The open item: in progress (empty), or whole with this status. */
static cJSON *open_item(const ngx_http_llm_rs_t *rs, const char *status)
{
    cJSON *it = cJSON_CreateObject();
    if (it == NULL) return NULL;
    cJSON_AddStringToObject(it, "id", rs->item_id);
    cJSON *content;
    if (rs->open == RS_REASONING) {
        cJSON_AddStringToObject(it, "type", "reasoning");
        cJSON_AddArrayToObject(it, "summary");
        content = cJSON_AddArrayToObject(it, "content");
        cJSON_AddStringToObject(it, "status", status ? status : "in_progress");
    } else {
        cJSON_AddStringToObject(it, "type", "message");
        cJSON_AddStringToObject(it, "status", status ? status : "in_progress");
        cJSON_AddStringToObject(it, "role", "assistant");
        content = cJSON_AddArrayToObject(it, "content");
    }
    if (status != NULL && content != NULL) cJSON_AddItemToArray(content, rs_part(rs, 1));
    return it;
}

static void set_item_id(ngx_http_llm_rs_t *rs, const char *prefix)
{
    const char *tail = strncmp(rs->resp->id, "resp_", 5) ? rs->resp->id : rs->resp->id + 5;
    snprintf(rs->item_id, sizeof rs->item_id, "%s_%.24s_%d", prefix, tail, rs->n_items);
}

static int close_item(ngx_http_llm_rs_t *rs, cJSON *ev, const char *status)
{
    if (rs->open == RS_NONE) return 0;
    cJSON *o;
    if (rs->open == RS_REASONING) {
        EVENT(o, item_event(rs, ev, "response.reasoning_text.done", 0));
    } else {
        EVENT(o, item_event(rs, ev, "response.output_text.done", 0));
        rs_put(o, "logprobs", rs->lp ? cJSON_Duplicate(rs->lp, 1) : cJSON_CreateArray());
    }
    rs_put(o, "text", o ? ngx_http_llm_clean_string(rs->text.data, rs->text.len) : NULL);
    EVENT(o, item_event(rs, ev, "response.content_part.done", 0));
    rs_put(o, "part", o ? rs_part(rs, 1) : NULL);
    cJSON *it = open_item(rs, status);
    if (it == NULL) return -1;
    EVENT(o, rs_event(rs, ev, "response.output_item.done"));
    if (o != NULL) {
        cJSON_AddNumberToObject(o, "output_index", rs->n_items - 1);
        rs_put(o, "item", cJSON_Duplicate(it, 1));
    }
    cJSON_AddItemToArray(rs->output, it);
    rs->open = RS_NONE;
    rs->text.len = 0;
    cJSON_Delete(rs->lp);
    rs->lp = NULL;
    return 0;
}

static int open_new(ngx_http_llm_rs_t *rs, cJSON *ev, int kind)
{
    if (close_item(rs, ev, "completed")) return -1;
    rs->open = kind;
    rs->n_items++;
    set_item_id(rs, kind == RS_REASONING ? "rs" : "msg");
    if (kind == RS_MESSAGE) {
        rs->had_message = 1;
        if (rs->logprobs && (rs->lp = cJSON_CreateArray()) == NULL) return -1;
    }
    cJSON *o;
    EVENT(o, rs_event(rs, ev, "response.output_item.added"));
    if (o != NULL) {
        cJSON_AddNumberToObject(o, "output_index", rs->n_items - 1);
        rs_put(o, "item", open_item(rs, NULL));
    }
    EVENT(o, item_event(rs, ev, "response.content_part.added", 0));
    rs_put(o, "part", o ? rs_part(rs, 0) : NULL);
    return 0;
}

int ngx_http_llm_rs_init(ngx_http_llm_rs_t *rs, const ngx_http_llm_resp_t *resp, const cJSON *req, int logprobs,
                         int stored)
{
    memset(rs, 0, sizeof *rs);
    rs->stored = stored;
    rs->resp = resp;
    rs->req = req;
    rs->logprobs = logprobs;
    rs->output = cJSON_CreateArray();
    return rs->output ? 0 : -1;
}

void ngx_http_llm_rs_free(ngx_http_llm_rs_t *rs)
{
    cJSON_Delete(rs->output);
    cJSON_Delete(rs->lp);
    free(rs->text.data);
    memset(rs, 0, sizeof *rs);
}

/* The request's field, or dflt (taken) when it has none. */
static void rs_echo(cJSON *o, const cJSON *req, const char *name, cJSON *dflt)
{
    const cJSON *v = req ? llm_api_field(req, name) : NULL;
    if (v != NULL) {
        cJSON_Delete(dflt);
        dflt = cJSON_Duplicate(v, 1);
    }
    rs_put(o, name, dflt);
}

static cJSON *rs_usage(const ngx_http_llm_end_t *u)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NULL;
    cJSON_AddNumberToObject(o, "input_tokens", u->input);
    cJSON *d = cJSON_AddObjectToObject(o, "input_tokens_details");
    if (d) cJSON_AddNumberToObject(d, "cached_tokens", u->cached);
    cJSON_AddNumberToObject(o, "output_tokens", u->output);
    d = cJSON_AddObjectToObject(o, "output_tokens_details");
    if (d) cJSON_AddNumberToObject(d, "reasoning_tokens", u->reasoning);
    cJSON_AddNumberToObject(o, "total_tokens", (double)u->input + u->output);
    return o;
}

/* The response object as it stands: status in_progress, completed, incomplete or failed. */
static cJSON *rs_response(const ngx_http_llm_rs_t *rs, const char *status, const ngx_http_llm_end_t *u,
                       const char *err_code, const char *err_msg)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NULL;
    const cJSON *req = rs->req;
    cJSON_AddStringToObject(o, "id", rs->resp->id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", (double)rs->resp->created);
    cJSON_AddStringToObject(o, "status", status);
    cJSON_AddFalseToObject(o, "background");
    if (err_code != NULL) {
        cJSON *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "code", err_code);
        cJSON_AddStringToObject(e, "message", err_msg);
    } else {
        cJSON_AddNullToObject(o, "error");
    }
    if (!strcmp(status, "incomplete")) {
        cJSON *d = cJSON_AddObjectToObject(o, "incomplete_details");
        cJSON_AddStringToObject(d, "reason", "max_output_tokens");
    } else {
        cJSON_AddNullToObject(o, "incomplete_details");
    }
    rs_echo(o, req, "instructions", cJSON_CreateNull());
    rs_echo(o, req, "max_output_tokens", cJSON_CreateNull());
    rs_echo(o, req, "metadata", cJSON_CreateObject());
    cJSON_AddStringToObject(o, "model", rs->resp->model);
    rs_put(o, "output", cJSON_Duplicate(rs->output, 1));
    rs_echo(o, req, "parallel_tool_calls", cJSON_CreateTrue());
    rs_echo(o, req, "previous_response_id", cJSON_CreateNull());
    cJSON *r = cJSON_AddObjectToObject(o, "reasoning");
    const cJSON *effort = llm_api_field(llm_api_field(req, "reasoning"), "effort");
    rs_put(r, "effort", effort ? cJSON_Duplicate(effort, 0) : cJSON_CreateNull());
    cJSON_AddNullToObject(r, "summary");
    cJSON_AddBoolToObject(o, "store", rs->stored);
    rs_echo(o, req, "temperature", cJSON_CreateNumber(1));
    cJSON *text = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(text, "format");
    cJSON_AddStringToObject(f, "type", "text");
    rs_echo(o, req, "text", text);
    rs_echo(o, req, "tool_choice", cJSON_CreateString("auto"));
    rs_echo(o, req, "tools", cJSON_CreateArray());
    rs_echo(o, req, "top_logprobs", cJSON_CreateNumber(0));
    rs_echo(o, req, "top_p", cJSON_CreateNumber(1));
    cJSON_AddStringToObject(o, "truncation", "disabled");
    rs_put(o, "usage", u ? rs_usage(u) : cJSON_CreateNull());
    rs_echo(o, req, "user", cJSON_CreateNull());
    return o;
}

int ngx_http_llm_rs_begin(ngx_http_llm_rs_t *rs, cJSON *ev)
{
    static const char *const types[] = { "response.created", "response.in_progress" };
    for (int i = 0; i < 2; i++) {
        cJSON *o;
        EVENT(o, rs_event(rs, ev, types[i]));
        rs_put(o, "response", o ? rs_response(rs, "in_progress", NULL, NULL, NULL) : NULL);
    }
    return 0;
}

int ngx_http_llm_rs_text(ngx_http_llm_rs_t *rs, cJSON *ev, int reasoning, const char *s, size_t len, cJSON *lp)
{
    cJSON *entries = lp ? cJSON_DetachItemFromObjectCaseSensitive(lp, "content") : NULL;
    cJSON_Delete(lp);
    if (reasoning || (len == 0 && (entries == NULL || rs->open == RS_REASONING))) {
        cJSON_Delete(entries); /* reasoning tokens' logprobs: the API has no place for them */
        entries = NULL;
        if (!reasoning || len == 0) return 0;
    }
    int kind = reasoning ? RS_REASONING : RS_MESSAGE;
    if (rs->open != kind && open_new(rs, ev, kind)) { cJSON_Delete(entries); return -1; }
    if (ngx_http_llm_text_append(&rs->text, s, len)) { cJSON_Delete(entries); return -1; }
    cJSON *o = item_event(rs, ev, reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", 0);
    if (o == NULL && ev != NULL) { cJSON_Delete(entries); return -1; }
    rs_put(o, "delta", o ? ngx_http_llm_clean_string(s, len) : NULL);
    if (!reasoning) rs_put(o, "logprobs", entries ? cJSON_Duplicate(entries, 1) : cJSON_CreateArray());
    cJSON *en;
    while (entries && rs->lp && (en = cJSON_DetachItemFromArray(entries, 0)) != NULL) cJSON_AddItemToArray(rs->lp, en);
    cJSON_Delete(entries);
    return 0;
}

int ngx_http_llm_rs_calls(ngx_http_llm_rs_t *rs, cJSON *ev, const ngx_http_llm_call_t *calls, int n)
{
    if (close_item(rs, ev, "completed")) return -1;
    for (int k = 0; k < n; k++) {
        rs->n_items++;
        set_item_id(rs, "fc");
        cJSON *it = cJSON_CreateObject();
        if (it == NULL) return -1;
        cJSON_AddStringToObject(it, "id", rs->item_id);
        cJSON_AddStringToObject(it, "type", "function_call");
        cJSON_AddStringToObject(it, "status", "in_progress");
        cJSON_AddStringToObject(it, "call_id", calls[k].id);
        cJSON_AddStringToObject(it, "name", calls[k].name);
        cJSON_AddStringToObject(it, "arguments", "");
        cJSON_AddItemToArray(rs->output, it);
        cJSON *o;
        EVENT(o, rs_event(rs, ev, "response.output_item.added"));
        if (o != NULL) {
            cJSON_AddNumberToObject(o, "output_index", rs->n_items - 1);
            rs_put(o, "item", cJSON_Duplicate(it, 1));
        }
        EVENT(o, item_event(rs, ev, "response.function_call_arguments.delta", -1));
        if (o != NULL) cJSON_AddStringToObject(o, "delta", calls[k].args);
        EVENT(o, item_event(rs, ev, "response.function_call_arguments.done", -1));
        if (o != NULL) {
            cJSON_AddStringToObject(o, "name", calls[k].name);
            cJSON_AddStringToObject(o, "arguments", calls[k].args);
        }
        cJSON_ReplaceItemInObjectCaseSensitive(it, "status", cJSON_CreateString("completed"));
        cJSON_ReplaceItemInObjectCaseSensitive(it, "arguments", cJSON_CreateString(calls[k].args));
        EVENT(o, rs_event(rs, ev, "response.output_item.done"));
        if (o != NULL) {
            cJSON_AddNumberToObject(o, "output_index", rs->n_items - 1);
            rs_put(o, "item", cJSON_Duplicate(it, 1));
        }
    }
    return 0;
}

int ngx_http_llm_rs_end(ngx_http_llm_rs_t *rs, cJSON *ev, const ngx_http_llm_end_t *u, cJSON **out)
{
    int cut = u->finish != NULL && !strcmp(u->finish, "length");
    const char *status = cut ? "incomplete" : "completed";
    if (cJSON_GetArraySize(rs->output) == 0 && rs->open == RS_NONE && open_new(rs, ev, RS_MESSAGE)) return -1;
    if (close_item(rs, ev, status)) return -1;
    cJSON *o;
    EVENT(o, rs_event(rs, ev, cut ? "response.incomplete" : "response.completed"));
    cJSON *r = rs_response(rs, status, u, NULL, NULL);
    if (r == NULL) return -1;
    if (out != NULL) {
        rs_put(o, "response", o ? cJSON_Duplicate(r, 1) : NULL);
        *out = r;
    } else {
        rs_put(o, "response", r); /* freed when there is no event */
    }
    return 0;
}

int ngx_http_llm_rs_error(ngx_http_llm_rs_t *rs, cJSON *ev, const char *code, const char *message)
{
    cJSON *o;
    EVENT(o, rs_event(rs, ev, "error"));
    if (o != NULL) {
        cJSON_AddStringToObject(o, "code", code);
        cJSON_AddStringToObject(o, "message", message);
        cJSON_AddNullToObject(o, "param");
    }
    EVENT(o, rs_event(rs, ev, "response.failed"));
    rs_put(o, "response", o ? rs_response(rs, "failed", NULL, code, message) : NULL);
    return 0;
}

static int op_begin(void *b, cJSON *ev) { return ngx_http_llm_rs_begin(b, ev); }
static int op_text(void *b, cJSON *ev, int reasoning, const char *s, size_t len, cJSON *lp)
{
    return ngx_http_llm_rs_text(b, ev, reasoning, s, len, lp);
}
static int op_calls(void *b, cJSON *ev, const ngx_http_llm_call_t *calls, int n) { return ngx_http_llm_rs_calls(b, ev, calls, n); }
static int op_end(void *b, cJSON *ev, const ngx_http_llm_end_t *end, cJSON **out) { return ngx_http_llm_rs_end(b, ev, end, out); }
static int op_error(void *b, cJSON *ev, const char *code, const char *type, const char *message)
{
    (void)type;
    return ngx_http_llm_rs_error(b, ev, code, message);
}
static void op_free(void *b) { ngx_http_llm_rs_free(b); }

const ngx_http_llm_typed_t ngx_http_llm_rs_typed = { op_begin, op_text, op_calls, op_end, op_error, op_free, 0, 0 };
