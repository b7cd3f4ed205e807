/* Response, chunk and logprobs JSON (see ngx_http_llm_format.h). */
#include "ngx_http_llm_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int ngx_http_llm_text_append(ngx_http_llm_text_t *t, const char *s, size_t len)
{
    if (t->len + len + 1 > t->cap) {
        size_t nc = t->cap ? t->cap : 256;
        while (nc < t->len + len + 1) nc *= 2;
        char *nd = realloc(t->data, nc);
        if (nd == NULL) return -1;
        t->data = nd;
        t->cap = nc;
    }
    if (len) memcpy(t->data + t->len, s, len);
    t->len += len;
    t->data[t->len] = 0;
    return 0;
}

void ngx_http_llm_resp_init(ngx_http_llm_resp_t *r, llm_api_kind kind, const char *model)
{
    r->kind = kind;
    if (model != r->model) snprintf(r->model, sizeof r->model, "%s", model);
    r->created = (long long)time(NULL);
    r->id[0] = 0;
}

/* Length of a valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t k;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) { k = 2; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { k = 3; min = 0x800; }
    else if (c >= 0xf0 && c <= 0xf4) { k = 4; min = 0x10000; }
    else return 0;
    if (n < k) return 0;
    unsigned cp = c & (0x7f >> k);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return k;
}

char *ngx_http_llm_utf8_clean(const char *s, size_t len)
{
    char *o = malloc(len * 3 + 1), *p = o;
    if (o == NULL) return NULL;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t k = utf8_seq(u + i, len - i);
        if (k == 0 || (k == 1 && u[i] == 0)) { memcpy(p, "\xef\xbf\xbd", 3); p += 3; i++; continue; }
        memcpy(p, u + i, k);
        p += k;
        i += k;
    }
    *p = 0;
    return o;
}

cJSON *ngx_http_llm_clean_string(const char *s, size_t len)
{
    char *c = ngx_http_llm_utf8_clean(s ? s : "", s ? len : 0);
    cJSON *o = cJSON_CreateString(c ? c : "");
    free(c);
    return o;
}

static void add_text(cJSON *o, const char *name, const char *s, size_t len)
{
    cJSON *v = ngx_http_llm_clean_string(s, len);
    if (v != NULL && !cJSON_AddItemToObject(o, name, v)) cJSON_Delete(v);
}

static cJSON *envelope(const ngx_http_llm_resp_t *r, int chunk)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NULL;
    cJSON_AddStringToObject(o, "id", r->id);
    cJSON_AddStringToObject(o, "object", r->kind == LLM_API_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                                 : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)r->created);
    cJSON_AddStringToObject(o, "model", r->model);
    return o;
}

/* [{"index"?, "id", "type": "function", "function": {"name", "arguments"}}, ...] */
static cJSON *tool_calls(const ngx_http_llm_call_t *calls, int n, int with_index)
{
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < n && a != NULL; k++) {
        cJSON *t = cJSON_CreateObject();
        if (t == NULL) { cJSON_Delete(a); return NULL; }
        if (with_index) cJSON_AddNumberToObject(t, "index", k);
        cJSON_AddStringToObject(t, "id", calls[k].id);
        cJSON_AddStringToObject(t, "type", "function");
        cJSON *f = cJSON_AddObjectToObject(t, "function");
        cJSON_AddStringToObject(f, "name", calls[k].name);
        cJSON_AddStringToObject(f, "arguments", calls[k].args);
        cJSON_AddItemToArray(a, t);
    }
    return a;
}

static cJSON *usage(const ngx_http_llm_usage_t *n)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", n->prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", n->completion);
    cJSON_AddNumberToObject(u, "total_tokens", (double)n->prompt + n->completion);
    if (n->cached > 0) {
        cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
        if (d) cJSON_AddNumberToObject(d, "cached_tokens", n->cached);
    }
    return u;
}

cJSON *ngx_http_llm_response(const ngx_http_llm_resp_t *r, ngx_http_llm_choice_t *ch, int n,
                             const ngx_http_llm_usage_t *u)
{
    cJSON *o = envelope(r, 0), *a = o ? cJSON_AddArrayToObject(o, "choices") : NULL;
    for (int i = 0; i < n; i++) {
        cJSON *c = cJSON_CreateObject();
        if (c == NULL || a == NULL) { cJSON_Delete(c); cJSON_Delete(ch[i].logprobs); ch[i].logprobs = NULL; continue; }
        cJSON_AddNumberToObject(c, "index", i);
        if (r->kind == LLM_API_CHAT) {
            cJSON *m = cJSON_AddObjectToObject(c, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            if (ch[i].n_calls > 0) {
                if (ch[i].len > 0) add_text(m, "content", ch[i].text, ch[i].len);
                else cJSON_AddNullToObject(m, "content");
                cJSON_AddItemToObject(m, "tool_calls", tool_calls(ch[i].calls, ch[i].n_calls, 0));
            } else {
                add_text(m, "content", ch[i].text, ch[i].len);
            }
            if (ch[i].think && ch[i].reasoning_len > 0) add_text(m, "reasoning_content", ch[i].reasoning, ch[i].reasoning_len);
            else if (ch[i].think) cJSON_AddNullToObject(m, "reasoning_content");
        } else {
            add_text(c, "text", ch[i].text, ch[i].len);
        }
        if (ch[i].logprobs) cJSON_AddItemToObject(c, "logprobs", ch[i].logprobs);
        else cJSON_AddNullToObject(c, "logprobs");
        ch[i].logprobs = NULL;
        cJSON_AddStringToObject(c, "finish_reason", ch[i].finish ? ch[i].finish : "stop");
        cJSON_AddItemToArray(a, c);
    }
    if (o) cJSON_AddItemToObject(o, "usage", usage(u));
    return o;
}

cJSON *ngx_http_llm_chunk(const ngx_http_llm_resp_t *r, int i, const char *text, size_t len, int role,
                          cJSON *lp, const char *finish)
{
    cJSON *o = envelope(r, 1), *a = o ? cJSON_AddArrayToObject(o, "choices") : NULL, *c = cJSON_CreateObject();
    if (a == NULL || c == NULL) { cJSON_Delete(o); cJSON_Delete(c); cJSON_Delete(lp); return NULL; }
    cJSON_AddNumberToObject(c, "index", i);
    if (r->kind == LLM_API_CHAT) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (role) cJSON_AddStringToObject(d, "role", "assistant");
        if (!finish) add_text(d, "content", text, len);
    } else {
        add_text(c, "text", text, len);
    }
    if (lp) cJSON_AddItemToObject(c, "logprobs", lp); else cJSON_AddNullToObject(c, "logprobs");
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish); else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(a, c);
    return o;
}

cJSON *ngx_http_llm_call_chunk(const ngx_http_llm_resp_t *r, int i, const ngx_http_llm_call_t *calls, int n)
{
    cJSON *o = envelope(r, 1), *a = o ? cJSON_AddArrayToObject(o, "choices") : NULL, *c = cJSON_CreateObject();
    if (a == NULL || c == NULL) { cJSON_Delete(o); cJSON_Delete(c); return NULL; }
    cJSON_AddNumberToObject(c, "index", i);
    cJSON *d = cJSON_AddObjectToObject(c, "delta");
    cJSON_AddItemToObject(d, "tool_calls", tool_calls(calls, n, 1));
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(a, c);
    return o;
}

cJSON *ngx_http_llm_reasoning_chunk(const ngx_http_llm_resp_t *r, int i, const char *text, size_t len)
{
    cJSON *o = envelope(r, 1), *a = o ? cJSON_AddArrayToObject(o, "choices") : NULL, *c = cJSON_CreateObject();
    if (a == NULL || c == NULL) { cJSON_Delete(o); cJSON_Delete(c); return NULL; }
    cJSON_AddNumberToObject(c, "index", i);
    cJSON *d = cJSON_AddObjectToObject(c, "delta");
    add_text(d, "reasoning_content", text, len);
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(a, c);
    return o;
}

cJSON *ngx_http_llm_usage_chunk(const ngx_http_llm_resp_t *r, const ngx_http_llm_usage_t *u)
{
    cJSON *o = envelope(r, 1);
    if (o == NULL) return NULL;
    cJSON_AddArrayToObject(o, "choices");
    cJSON_AddItemToObject(o, "usage", usage(u));
    return o;
}

cJSON *ngx_http_llm_bytes_array(const char *s, size_t len)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < len; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)s[i]));
    return a;
}

static void piece(const llm_tokenizer *tok, int32_t id, const char **s, size_t *len)
{
    if (llm_tok_piece(tok, id, s, len) != 0) { *s = ""; *len = 0; }
}

/* Entry: {"token","logprob","bytes","top_logprobs":[{"token","logprob","bytes"}],"text_offset"}. */
cJSON *ngx_http_llm_logprob_entry(const ngx_http_llm_resp_t *r, const llm_tokenizer *tok,
                                  const llm_shm_token *tk, int top_n, size_t text_off)
{
    (void)r;
    cJSON *e = cJSON_CreateObject();
    if (e == NULL) return NULL;
    const char *s;
    size_t len;
    piece(tok, tk->id, &s, &len);
    add_text(e, "token", s, len);
    cJSON_AddNumberToObject(e, "logprob", tk->logprob);
    cJSON_AddItemToObject(e, "bytes", ngx_http_llm_bytes_array(s, len));
    cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
    for (uint32_t j = 0; top && j < tk->n_top && (int)j < top_n; j++) {
        cJSON *t = cJSON_CreateObject();
        piece(tok, tk->top[j].id, &s, &len);
        add_text(t, "token", s, len);
        cJSON_AddNumberToObject(t, "logprob", tk->top[j].logprob);
        cJSON_AddItemToObject(t, "bytes", ngx_http_llm_bytes_array(s, len));
        cJSON_AddItemToArray(top, t);
    }
    cJSON_AddNumberToObject(e, "text_offset", (double)text_off);
    return e;
}

cJSON *ngx_http_llm_logprob_entry_null(const ngx_http_llm_resp_t *r, const llm_tokenizer *tok, int32_t id,
                                       size_t text_off)
{
    (void)r;
    cJSON *e = cJSON_CreateObject();
    if (e == NULL) return NULL;
    const char *s;
    size_t len;
    piece(tok, id, &s, &len);
    add_text(e, "token", s, len);
    cJSON_AddNullToObject(e, "logprob");
    cJSON_AddItemToObject(e, "bytes", ngx_http_llm_bytes_array(s, len));
    cJSON_AddNullToObject(e, "top_logprobs");
    cJSON_AddNumberToObject(e, "text_offset", (double)text_off);
    return e;
}

cJSON *ngx_http_llm_logprobs_new(const ngx_http_llm_resp_t *r)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NULL;
    if (r->kind == LLM_API_CHAT) {
        cJSON_AddArrayToObject(o, "content");
    } else {
        cJSON_AddArrayToObject(o, "tokens");
        cJSON_AddArrayToObject(o, "token_logprobs");
        cJSON_AddArrayToObject(o, "top_logprobs");
        cJSON_AddArrayToObject(o, "text_offset");
    }
    return o;
}

void ngx_http_llm_logprobs_add(const ngx_http_llm_resp_t *r, cJSON *lp, cJSON *e)
{
    if (lp == NULL || e == NULL) { cJSON_Delete(e); return; }
    if (r->kind == LLM_API_CHAT) {
        cJSON_DeleteItemFromObject(e, "text_offset");
        cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "content"), e);
        return;
    }
    /* completions: parallel arrays; top_logprobs as {token: logprob} maps */
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "tokens"), cJSON_DetachItemFromObject(e, "token"));
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "token_logprobs"), cJSON_DetachItemFromObject(e, "logprob"));
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "text_offset"), cJSON_DetachItemFromObject(e, "text_offset"));
    if (cJSON_IsNull(cJSON_GetObjectItem(e, "top_logprobs"))) { /* a first prompt token: nothing to condition on */
        cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "top_logprobs"), cJSON_CreateNull());
        cJSON_Delete(e);
        return;
    }
    cJSON *map = cJSON_CreateObject(), *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(e, "top_logprobs")) {
        const cJSON *tok = cJSON_GetObjectItem(t, "token"), *l = cJSON_GetObjectItem(t, "logprob");
        if (map && tok && l && !cJSON_GetObjectItemCaseSensitive(map, tok->valuestring))
            cJSON_AddNumberToObject(map, tok->valuestring, l->valuedouble);
    }
    cJSON_AddItemToArray(cJSON_GetObjectItem(lp, "top_logprobs"), map);
    cJSON_Delete(e);
}

cJSON *ngx_http_llm_logprobs_wrap(const ngx_http_llm_resp_t *r, cJSON *entry)
{
    cJSON *lp = ngx_http_llm_logprobs_new(r);
    ngx_http_llm_logprobs_add(r, lp, entry);
    return lp;
}
