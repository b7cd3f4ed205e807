/* TGI's API answer and stream events (see ngx_http_llm_tgi_out.h). */
#include "ngx_http_llm_tgi_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ngx_http_llm_tg_init(ngx_http_llm_tg_t *tg, const llm_api_req *q, int sampled, uint64_t seed, int32_t eos_id)
{
    memset(tg, 0, sizeof *tg);
    tg->list = q->api == LLM_API_TGI && !q->stream;
    tg->details = q->tgi_details;
    if (q->tgi_full_text) {
        tg->prompt = q->prompt;
        tg->prompt_len = q->prompt_len;
    }
    tg->sampled = sampled;
    tg->seed = seed;
    tg->eos_id = eos_id;
    return 0;
}

static void tg_free(void *b)
{
    ngx_http_llm_tg_t *tg = b;
    free(tg->text.data);
    free(tg->held_text.data);
    free(tg->pending.data);
    cJSON_Delete(tg->held);
    cJSON_Delete(tg->tokens);
    memset(tg, 0, sizeof *tg);
}

/* {"id", "text", "logprob", "special"}; text NULL: the token's own. */
static cJSON *tg_tok(const llm_tokenizer *tok, int32_t id, float logprob, int special)
{
    const char *s = "";
    size_t len = 0;
    if (tok != NULL && llm_tok_piece(tok, id, &s, &len) != 0) { s = ""; len = 0; }
    cJSON *o = cJSON_CreateObject(), *t = ngx_http_llm_clean_string(s, len);
    if (o == NULL || t == NULL || !cJSON_AddNumberToObject(o, "id", id)) goto oom;
    cJSON_AddItemToObject(o, "text", t);
    t = NULL;
    if (!cJSON_AddNumberToObject(o, "logprob", logprob) || !cJSON_AddBoolToObject(o, "special", special)) goto oom;
    return o;
oom:
    cJSON_Delete(t);
    cJSON_Delete(o);
    return NULL;
}

cJSON *ngx_http_llm_tg_token(const llm_tokenizer *tok, const llm_shm_token *tk, int top_n)
{
    cJSON *o = tg_tok(tok, tk->id, tk->logprob, 0);
    if (o == NULL || top_n <= 0) return o;
    cJSON *top = cJSON_AddArrayToObject(o, "top_tokens");
    if (top == NULL) { cJSON_Delete(o); return NULL; }
    for (uint32_t j = 0; j < tk->n_top && (int)j < top_n; j++) {
        cJSON *t = tg_tok(tok, tk->top[j].id, tk->top[j].logprob, 0);
        if (t == NULL) { cJSON_Delete(o); return NULL; }
        cJSON_AddItemToArray(top, t);
    }
    return o;
}

/* The held event's token text set and the event appended to ev. */
static int tg_push_held(ngx_http_llm_tg_t *tg, cJSON *ev)
{
    cJSON *t = ngx_http_llm_clean_string(tg->held_text.data, tg->held_text.len);
    cJSON *tok = cJSON_GetObjectItemCaseSensitive(tg->held, "token");
    if (t == NULL || tok == NULL) { cJSON_Delete(t); return -1; }
    cJSON_ReplaceItemInObjectCaseSensitive(tok, "text", t);
    cJSON_AddItemToArray(ev, tg->held);
    tg->held = NULL;
    tg->held_text.len = 0;
    return 0;
}

/* A new held event for token tk (taken): its text what was pending and s. */
static int tg_hold(ngx_http_llm_tg_t *tg, cJSON *tk, const char *s, size_t len)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *top = cJSON_DetachItemFromObjectCaseSensitive(tk, "top_tokens");
    if (o == NULL || !cJSON_AddNumberToObject(o, "index", ++tg->index)) goto oom;
    cJSON_AddItemToObject(o, "token", tk);
    tk = NULL;
    if (top != NULL) cJSON_AddItemToObject(o, "top_tokens", top);
    else if (!cJSON_AddNullToObject(o, "top_tokens")) goto oom;
    top = NULL;
    if (!cJSON_AddNullToObject(o, "generated_text") || !cJSON_AddNullToObject(o, "details")) goto oom;
    tg->held_text.len = 0;
    if (ngx_http_llm_text_append(&tg->held_text, tg->pending.data, tg->pending.len) ||
        ngx_http_llm_text_append(&tg->held_text, s, len)) goto oom;
    tg->pending.len = 0;
    tg->held = o;
    return 0;
oom:
    cJSON_Delete(tk);
    cJSON_Delete(top);
    cJSON_Delete(o);
    return -1;
}

static int tg_begin(void *b, cJSON *ev)
{
    (void)b;
    (void)ev; /* the stream opens with its first token */
    return 0;
}

static int tg_text(void *b, cJSON *ev, int reasoning, const char *s, size_t len, cJSON *lp)
{
    ngx_http_llm_tg_t *tg = b;
    (void)reasoning; /* (completions: none) */
    if (ngx_http_llm_text_append(&tg->text, s, len)) { cJSON_Delete(lp); return -1; }
    if (ev == NULL) { /* the whole answer: lp is its tokens */
        if (lp != NULL) {
            cJSON_Delete(tg->tokens);
            tg->tokens = lp;
        }
        return 0;
    }
    if (lp == NULL) /* text without a token (what was held at the end): with the last token, or the next */
        return ngx_http_llm_text_append(tg->held ? &tg->held_text : &tg->pending, s, len);
    if (tg->held != NULL && tg_push_held(tg, ev)) { cJSON_Delete(lp); return -1; }
    return tg_hold(tg, lp, s, len);
}

static int tg_calls(void *b, cJSON *ev, const ngx_http_llm_call_t *calls, int n)
{
    (void)b; (void)ev; (void)calls; (void)n; /* (completions have no tools) */
    return 0;
}

/* generated_text: the prompt (return_full_text) and the text. */
static cJSON *tg_generated(const ngx_http_llm_tg_t *tg)
{
    ngx_http_llm_text_t all = { NULL, 0, 0 };
    if (ngx_http_llm_text_append(&all, tg->prompt ? tg->prompt : "", tg->prompt ? tg->prompt_len : 0) ||
        ngx_http_llm_text_append(&all, tg->text.data, tg->text.len)) {
        free(all.data);
        return NULL;
    }
    cJSON *s = ngx_http_llm_clean_string(all.data, all.len);
    free(all.data);
    return s;
}

static const char *tg_reason(const ngx_http_llm_end_t *end)
{
    return end->finish != NULL && !strcmp(end->finish, "length") ? "length"
         : end->stop_seq != NULL ? "stop_sequence" : "eos_token";
}

/* details: finish_reason, generated_tokens, seed; streamed input_length, else prefill and tokens (and top_tokens). */
static cJSON *tg_details(ngx_http_llm_tg_t *tg, const ngx_http_llm_end_t *end, int stream)
{
    cJSON *d = cJSON_CreateObject();
    if (d == NULL || !cJSON_AddStringToObject(d, "finish_reason", tg_reason(end)) ||
        !cJSON_AddNumberToObject(d, "generated_tokens", end->output)) goto oom;
    if (!(tg->sampled ? cJSON_AddNumberToObject(d, "seed", (double)tg->seed) : cJSON_AddNullToObject(d, "seed"))) goto oom;
    if (stream) {
        if (!cJSON_AddNumberToObject(d, "input_length", end->input)) goto oom;
        return d;
    }
    if (!cJSON_AddArrayToObject(d, "prefill")) goto oom;
    cJSON *toks = tg->tokens ? tg->tokens : cJSON_CreateArray(), *tops = NULL, *t;
    tg->tokens = NULL;
    if (toks == NULL) goto oom;
    cJSON_AddItemToObject(d, "tokens", toks);
    cJSON_ArrayForEach(t, toks) { /* each token's alternatives, as a list beside the tokens */
        cJSON *top = cJSON_DetachItemFromObjectCaseSensitive(t, "top_tokens");
        if (top == NULL) continue;
        if (tops == NULL && (tops = cJSON_AddArrayToObject(d, "top_tokens")) == NULL) { cJSON_Delete(top); goto oom; }
        cJSON_AddItemToArray(tops, top);
    }
    return d;
oom:
    cJSON_Delete(d);
    return NULL;
}

static int tg_end(void *b, cJSON *ev, const ngx_http_llm_end_t *end, cJSON **out)
{
    ngx_http_llm_tg_t *tg = b;
    if (ev != NULL) {
        /* no token released text (the first was the end): the stream ends with the end-of-generation token */
        if (tg->held == NULL) {
            cJSON *eos = tg_tok(NULL, tg->eos_id, 0, 1);
            if (eos == NULL || tg_hold(tg, eos, "", 0)) return -1;
            cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(tg->held, "token"), "logprob",
                                                   cJSON_CreateNull());
        }
        cJSON *last = tg->held, *g = tg_generated(tg);
        if (g == NULL) return -1;
        cJSON_ReplaceItemInObjectCaseSensitive(last, "generated_text", g);
        if (tg->details) {
            cJSON *d = tg_details(tg, end, 1);
            if (d == NULL) return -1;
            cJSON_ReplaceItemInObjectCaseSensitive(last, "details", d);
        }
        if (tg_push_held(tg, ev)) return -1;
    }
    if (out == NULL) return 0;
    cJSON *o = cJSON_CreateObject(), *g = tg_generated(tg);
    if (o == NULL || g == NULL) { cJSON_Delete(o); cJSON_Delete(g); return -1; }
    cJSON_AddItemToObject(o, "generated_text", g);
    if (tg->details) {
        cJSON *d = tg_details(tg, end, 0);
        if (d == NULL) { cJSON_Delete(o); return -1; }
        cJSON_AddItemToObject(o, "details", d);
    }
    if (tg->list) {
        cJSON *a = cJSON_CreateArray();
        if (a == NULL) { cJSON_Delete(o); return -1; }
        cJSON_AddItemToArray(a, o);
        o = a;
    }
    *out = o;
    return 0;
}

static int tg_error(void *b, cJSON *ev, const char *code, const char *type, const char *message)
{
    (void)b;
    (void)type;
    cJSON *o = cJSON_CreateObject();
    int overloaded = code != NULL && !strcmp(code, "queue_full");
    if (o == NULL || !cJSON_AddStringToObject(o, "error", message) ||
        !cJSON_AddStringToObject(o, "error_type", overloaded ? "overloaded" : "generation")) {
        cJSON_Delete(o);
        return -1;
    }
    cJSON_AddItemToArray(ev, o);
    return 0;
}

const ngx_http_llm_typed_t ngx_http_llm_tg_typed = { tg_begin, tg_text, tg_calls, tg_end, tg_error, tg_free, 0, 1 };
