/* Anthropic's Messages API message object and stream events (see ngx_http_llm_messages_out.h). */
#include "ngx_http_llm_messages_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MS_NONE = 0, MS_THINKING, MS_TEXT };

/* A new event {"type": type} at the end of ev; NULL when ev is NULL or out of memory. */
static cJSON *ms_event(cJSON *ev, const char *type)
{
    if (ev == NULL) return NULL;
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NULL;
    cJSON_AddItemToArray(ev, o);
    return cJSON_AddStringToObject(o, "type", type) ? o : NULL;
}

#define EVENT(o, call) do { if (((o) = (call)) == NULL && ev != NULL) return -1; } while (0)

/* {"type": "content_block_start" | "content_block_stop", "index", ["content_block": block]} (block taken). */
static int block_event(ngx_http_llm_ms_t *ms, cJSON *ev, const char *type, cJSON *block)
{
    cJSON *o = ms_event(ev, type);
    if (o == NULL) {
        cJSON_Delete(block);
        return ev != NULL ? -1 : 0;
    }
    cJSON_AddNumberToObject(o, "index", ms->n_blocks - 1);
    if (block != NULL) cJSON_AddItemToObject(o, "content_block", block);
    return 0;
}

/* The open block: as content_block_start gives it (empty) or whole. */
static cJSON *open_block(const ngx_http_llm_ms_t *ms, int whole)
{
    cJSON *b = cJSON_CreateObject();
    if (b == NULL) return NULL;
    int thinking = ms->open == MS_THINKING;
    cJSON_AddStringToObject(b, "type", thinking ? "thinking" : "text");
    cJSON_AddItemToObject(b, thinking ? "thinking" : "text",
                          whole ? ngx_http_llm_clean_string(ms->text.data, ms->text.len) : cJSON_CreateString(""));
    if (thinking) cJSON_AddStringToObject(b, "signature", ""); /* nothing to sign: the thinking is the model's text */
    return b;
}

static int close_block(ngx_http_llm_ms_t *ms, cJSON *ev)
{
    if (ms->open == MS_NONE) return 0;
    cJSON *b = open_block(ms, 1);
    if (b == NULL) return -1;
    cJSON_AddItemToArray(ms->content, b);
    if (block_event(ms, ev, "content_block_stop", NULL)) return -1;
    ms->open = MS_NONE;
    ms->text.len = 0;
    return 0;
}

static int open_new(ngx_http_llm_ms_t *ms, cJSON *ev, int kind)
{
    if (close_block(ms, ev)) return -1;
    ms->open = kind;
    ms->n_blocks++;
    return block_event(ms, ev, "content_block_start", ev ? open_block(ms, 0) : NULL);
}

int ngx_http_llm_ms_init(ngx_http_llm_ms_t *ms, const ngx_http_llm_resp_t *resp, uint32_t input_tokens)
{
    memset(ms, 0, sizeof *ms);
    ms->resp = resp;
    ms->input = input_tokens;
    ms->content = cJSON_CreateArray();
    return ms->content ? 0 : -1;
}

void ngx_http_llm_ms_free(ngx_http_llm_ms_t *ms)
{
    cJSON_Delete(ms->content);
    free(ms->text.data);
    memset(ms, 0, sizeof *ms);
}

/* Anthropic's usage: input_tokens are the prompt's not read from the cache, cache_read_input_tokens the others. */
static cJSON *ms_usage(uint32_t input, uint32_t cached, uint32_t output)
{
    cJSON *u = cJSON_CreateObject();
    if (u == NULL) return NULL;
    cJSON_AddNumberToObject(u, "input_tokens", input - (cached < input ? cached : input));
    cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
    cJSON_AddNumberToObject(u, "cache_read_input_tokens", cached);
    cJSON_AddNumberToObject(u, "output_tokens", output);
    return u;
}

/* The message: content so far, stop_reason (NULL: null) and usage. */
static cJSON *ms_message(const ngx_http_llm_ms_t *ms, const char *stop_reason, const char *stop_seq, cJSON *usage)
{
    cJSON *m = cJSON_CreateObject();
    if (m == NULL) { cJSON_Delete(usage); return NULL; }
    cJSON_AddStringToObject(m, "id", ms->resp->id);
    cJSON_AddStringToObject(m, "type", "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddStringToObject(m, "model", ms->resp->model);
    cJSON_AddItemToObject(m, "content", cJSON_Duplicate(ms->content, 1));
    if (stop_reason) cJSON_AddStringToObject(m, "stop_reason", stop_reason); else cJSON_AddNullToObject(m, "stop_reason");
    if (stop_seq) cJSON_AddStringToObject(m, "stop_sequence", stop_seq); else cJSON_AddNullToObject(m, "stop_sequence");
    if (usage) cJSON_AddItemToObject(m, "usage", usage);
    return m;
}

static int ms_begin(void *b, cJSON *ev)
{
    ngx_http_llm_ms_t *ms = b;
    cJSON *o;
    EVENT(o, ms_event(ev, "message_start"));
    if (o != NULL) cJSON_AddItemToObject(o, "message", ms_message(ms, NULL, NULL, ms_usage(ms->input, 0, 0)));
    return 0;
}

static int ms_text(void *b, cJSON *ev, int reasoning, const char *s, size_t len, cJSON *lp)
{
    ngx_http_llm_ms_t *ms = b;
    cJSON_Delete(lp); /* the API has no logprobs */
    if (len == 0) return 0;
    int kind = reasoning ? MS_THINKING : MS_TEXT;
    if (ms->open != kind && open_new(ms, ev, kind)) return -1;
    if (ngx_http_llm_text_append(&ms->text, s, len)) return -1;
    cJSON *o;
    EVENT(o, ms_event(ev, "content_block_delta"));
    if (o != NULL) {
        cJSON_AddNumberToObject(o, "index", ms->n_blocks - 1);
        cJSON *d = cJSON_AddObjectToObject(o, "delta");
        cJSON_AddStringToObject(d, "type", reasoning ? "thinking_delta" : "text_delta");
        cJSON_AddItemToObject(d, reasoning ? "thinking" : "text", ngx_http_llm_clean_string(s, len));
    }
    return 0;
}

/* A tool_use block for a call: id toolu_..., input the arguments as an object ({} when they are not one). */
static cJSON *tool_use(const ngx_http_llm_call_t *c, int whole)
{
    cJSON *b = cJSON_CreateObject();
    if (b == NULL) return NULL;
    char id[48];
    snprintf(id, sizeof id, "toolu_%s", strncmp(c->id, "call_", 5) ? c->id : c->id + 5);
    cJSON_AddStringToObject(b, "type", "tool_use");
    cJSON_AddStringToObject(b, "id", id);
    cJSON_AddStringToObject(b, "name", c->name);
    cJSON *in = whole ? cJSON_Parse(c->args) : NULL;
    if (!cJSON_IsObject(in)) {
        cJSON_Delete(in);
        in = cJSON_CreateObject();
    }
    cJSON_AddItemToObject(b, "input", in);
    return b;
}

static int ms_calls(void *b, cJSON *ev, const ngx_http_llm_call_t *calls, int n)
{
    ngx_http_llm_ms_t *ms = b;
    if (close_block(ms, ev)) return -1;
    for (int k = 0; k < n; k++) {
        ms->n_blocks++;
        cJSON *whole = tool_use(&calls[k], 1);
        if (whole == NULL) return -1;
        cJSON_AddItemToArray(ms->content, whole);
        if (block_event(ms, ev, "content_block_start", ev ? tool_use(&calls[k], 0) : NULL)) return -1;
        cJSON *o;
        EVENT(o, ms_event(ev, "content_block_delta"));
        if (o != NULL) {
            cJSON_AddNumberToObject(o, "index", ms->n_blocks - 1);
            cJSON *d = cJSON_AddObjectToObject(o, "delta");
            cJSON_AddStringToObject(d, "type", "input_json_delta");
            cJSON_AddStringToObject(d, "partial_json", calls[k].args);
        }
        if (block_event(ms, ev, "content_block_stop", NULL)) return -1;
    }
    return 0;
}

static const char *stop_reason(const ngx_http_llm_end_t *end)
{
    if (end->finish != NULL && !strcmp(end->finish, "length")) return "max_tokens";
    if (end->finish != NULL && !strcmp(end->finish, "tool_calls")) return "tool_use";
    return end->stop_seq != NULL ? "stop_sequence" : "end_turn";
}

static int ms_end(void *b, cJSON *ev, const ngx_http_llm_end_t *end, cJSON **out)
{
    ngx_http_llm_ms_t *ms = b;
    if (cJSON_GetArraySize(ms->content) == 0 && ms->open == MS_NONE && open_new(ms, ev, MS_TEXT)) return -1;
    if (close_block(ms, ev)) return -1;
    const char *reason = stop_reason(end);
    cJSON *o;
    EVENT(o, ms_event(ev, "message_delta"));
    if (o != NULL) {
        cJSON *d = cJSON_AddObjectToObject(o, "delta");
        cJSON_AddStringToObject(d, "stop_reason", reason);
        if (end->stop_seq) cJSON_AddStringToObject(d, "stop_sequence", end->stop_seq);
        else cJSON_AddNullToObject(d, "stop_sequence");
        cJSON *u = cJSON_AddObjectToObject(o, "usage");
        cJSON_AddNumberToObject(u, "output_tokens", end->output);
    }
    EVENT(o, ms_event(ev, "message_stop"));
    if (out != NULL && (*out = ms_message(ms, reason, end->stop_seq, ms_usage(end->input, end->cached, end->output))) == NULL)
        return -1;
    return 0;
}

static const char *anthropic_type(const char *type, int status)
{
    if (status == 401) return "authentication_error";
    if (status == 503) return "overloaded_error";
    return type == NULL || !strcmp(type, "server_error") ? "api_error" : type;
}

static int ms_error(void *b, cJSON *ev, const char *code, const char *type, const char *message)
{
    (void)b;
    (void)code;
    cJSON *o;
    EVENT(o, ms_event(ev, "error"));
    if (o != NULL) {
        cJSON *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "type", anthropic_type(type, 0));
        cJSON_AddStringToObject(e, "message", message);
    }
    return 0;
}

static void ms_free(void *b) { ngx_http_llm_ms_free(b); }

const ngx_http_llm_typed_t ngx_http_llm_ms_typed = { ms_begin, ms_text, ms_calls, ms_end, ms_error, ms_free, 0, 0 };

char *ngx_http_llm_ms_error_json(const llm_api_err *e)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *o = root && cJSON_AddStringToObject(root, "type", "error") ? cJSON_AddObjectToObject(root, "error") : NULL;
    if (o == NULL) { cJSON_Delete(root); return NULL; }
    cJSON_AddStringToObject(o, "type", anthropic_type(e->type, e->status));
    cJSON_AddStringToObject(o, "message", e->message);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}
