/* POST /v1/completions and /v1/chat/completions: prompt -> token ids ->
 * engine (n independent sequences) -> detokenize -> stop strings -> one JSON
 * response, or Server-Sent Events as tokens arrive. */
#include "ngx_http_llm_module.h"
#include "ngx_http_llm_format.h"
#include "ngx_http_llm_responses_out.h"
#include "ngx_http_llm_messages_out.h"
#include "ngx_http_llm_ollama_out.h"
#include "ngx_http_llm_tgi_out.h"
#include "ngx_http_llm_lcpp_out.h"
#include "llm_reasoning.h"
#include "llm_tools.h"

#if LLM_API_MAX_BIAS > LLM_SHM_MAX_BIAS
#error "a request's logit_bias entries must fit in a slot"
#endif

typedef struct {
    llm_req          h;
    uint64_t         seed;        /* its parameters' seed and max_tokens (the rest: ctx->p), for a failover */
    int32_t          max_tokens;
    unsigned         started:1, done:1;
    const char      *finish;      /* "stop" / "length" once done */
    llm_detok        detok;
    llm_detok        pdetok;      /* echo: the prompt's text */
    unsigned         echo_open:1; /* echo: prompt text may be held in pdetok */
    llm_stop_matcher stop;
    uint32_t         n_gen;
    ngx_http_llm_text_t text;     /* whole text (non-streaming) */
    cJSON           *lp;          /* logprobs being collected (non-streaming), or NULL */
    size_t           text_off;    /* completions logprobs text_offset */
    unsigned         hold:1;      /* function calling, streamed: the text is held while it may be a call */
    uint32_t         n_cached;    /* prompt tokens the engine's prefix cache served */
    ngx_http_llm_call_t calls[LLM_TOOLS_MAX_CALLS]; /* the answer read as tool calls (name, args malloc'd) */
    int              n_calls;
    size_t           content_len; /* with calls: the text before them */
    size_t           sent;        /* ChatML, streamed: bytes of text already sent as content (the rest may be
                                   * calls) */
    llm_think        think;       /* a reasoning model's answer: where it is in <think> */
    ngx_http_llm_text_t reasoning; /* its reasoning (non-streaming) */
    uint32_t         n_reasoning; /* tokens of it (the Responses API's usage counts them) */
    /* llama.cpp's n_indent: from a newline on, text is held (ind) until its line shows its indentation */
    ngx_http_llm_text_t ind;
    unsigned         ind_hold:1, seen_nl:1; /* holding; a newline went out or is held (t_max_predict_ms) */
} ngx_http_llm_seq_t;

typedef struct {
    int      n;
    int32_t **ids;   /* [n], each malloc'd */
    size_t  *n_ids;
} ngx_http_llm_prompts_t;

static void ngx_http_llm_prompts_free(ngx_http_llm_prompts_t *pr)
{
    for (int i = 0; pr->ids && i < pr->n; i++) free(pr->ids[i]);
    free(pr->ids);
    free(pr->n_ids);
    pr->ids = NULL;
    pr->n_ids = NULL;
}

typedef struct {
    ngx_http_request_t    *r;
    ngx_http_llm_engine_t *eng;
    /* what it takes to start the choices again, should the engine go away before the first token
     * (ngx_http_llm_failover): on another replica, or on the same engine restarted */
    ngx_http_llm_prompts_t pr;
    llm_shm_params        *p;
    ngx_uint_t             failovers;
    unsigned               orphaned:1;   /* its engine went away; it waits for one to go on on */
    uint64_t               tag;
    ngx_http_llm_log_t    *log;          /* what the request's variables read */
    ngx_http_llm_pending_t pend;         /* on the engine's active queue while it waits */
    unsigned               header_sent:1, finished:1, got_token:1;
    llm_api_req            q;
    llm_tokenizer         *tok;
    int32_t                eog[LLM_SHM_MAX_EOG];
    int                    n_eog;
    int                    n, n_done;    /* choices: prompts x n */
    ngx_http_llm_seq_t    *seq;          /* [n], from the request pool */
    uint32_t               n_prompt;
    ngx_http_llm_resp_t    resp;      /* id, model, created, kind */
    /* the Responses API, Anthropic's Messages API or Ollama's (q.api): the answer built as typed events */
    const ngx_http_llm_typed_t *typed; /* its builder's operations, or NULL */
    void                  *tb;        /* its builder: &rs, &ms or &ol */
    ngx_http_llm_rs_t      rs;
    ngx_http_llm_ms_t      ms;
    ngx_http_llm_ol_t      ol;        /* Ollama's /api/chat and /api/generate */
    ngx_http_llm_tg_t      tg;        /* TGI's /generate, /generate_stream and POST / */
    ngx_http_llm_lc_t      lc;        /* llama.cpp's /completion */
    unsigned               store:1;   /* the Responses API: keep the response (llm_responses_store) */
    ngx_msec_t             start;
    ngx_msec_t             queue_timeout, request_timeout;
    ngx_event_t            timer;
    ngx_chain_t           *free, *busy;  /* stream output buffers */
} ngx_http_llm_ctx_t;

static void ngx_http_llm_cleanup(void *data)
{
    ngx_http_llm_ctx_t *ctx = data;
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(ctx->r, ngx_http_llm_module);
    ngx_http_llm_pending_remove(&ctx->pend);
    if (ctx->timer.timer_set) ngx_del_timer(&ctx->timer);
    if (!ctx->finished) {
        if (mcf->counters) (void)ngx_atomic_fetch_add(&mcf->counters->client_aborts, 1);
        ngx_log_error(NGX_LOG_INFO, ctx->r->connection->log, 0,
                      "llm: client went away before the response was complete; cancelling it in the engine");
    }
    for (int i = 0; i < ctx->n; i++) {
        ngx_http_llm_seq_t *s = &ctx->seq[i];
        /* Releasing an unfinished request cancels it: the engine frees its KV blocks. */
        if (s->started && ctx->eng->client) llm_client_release(ctx->eng->client, s->h);
        s->started = 0;
        llm_stop_free(&s->stop);
        free(s->text.data);
        free(s->reasoning.data);
        free(s->ind.data);
        cJSON_Delete(s->lp);
        for (int k = 0; k < s->n_calls; k++) {
            free((char *)s->calls[k].name);
            free((char *)s->calls[k].args);
        }
        s->n_calls = 0;
    }
    if (ctx->typed) ctx->typed->free(ctx->tb);
    ctx->typed = NULL;
    ngx_http_llm_prompts_free(&ctx->pr);
    llm_api_req_free(&ctx->q);
}

/* ---------------- output ---------------- */

/* Sends bytes now. Buffers are reused once the client took them (free/busy
 * chains), so a long stream does not grow the request pool per token. */
static ngx_int_t ngx_http_llm_emit(ngx_http_llm_ctx_t *ctx, const char *data, size_t len, int last)
{
    ngx_http_request_t *r = ctx->r;
    ngx_buf_tag_t tag = (ngx_buf_tag_t)&ngx_http_llm_module;
    ngx_chain_t *cl = ngx_chain_get_free_buf(r->pool, &ctx->free);
    if (cl == NULL) return NGX_ERROR;
    ngx_buf_t *b = cl->buf;
    if (len > (size_t)(b->end - b->start)) {
        size_t size = ngx_max(len, 1024);
        b->start = ngx_palloc(r->pool, size);
        if (b->start == NULL) return NGX_ERROR;
        b->end = b->start + size;
    }
    b->pos = b->start;
    b->last = len ? ngx_cpymem(b->start, data, len) : b->start;
    b->temporary = len ? 1 : 0; /* an empty buffer must be "special" (flush / last) */
    b->memory = 0;
    b->flush = 1;
    b->last_buf = (last && r == r->main) ? 1 : 0;
    b->last_in_chain = last ? 1 : 0;
    b->tag = tag;
    cl->next = NULL;
    ngx_int_t rc = ngx_http_output_filter(r, cl);
    ngx_chain_update_chains(r->pool, &ctx->free, &ctx->busy, &cl, tag);
    return rc;
}

/* "data: <json>\n\n" */
static ngx_int_t ngx_http_llm_emit_event(ngx_http_llm_ctx_t *ctx, cJSON *obj)
{
    char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (s == NULL) return NGX_ERROR;
    size_t l = strlen(s);
    char *ev = malloc(l + 8);
    if (ev == NULL) { cJSON_free(s); return NGX_ERROR; }
    memcpy(ev, "data: ", 6);
    memcpy(ev + 6, s, l);
    memcpy(ev + 6 + l, "\n\n", 2);
    cJSON_free(s);
    ngx_int_t rc = ngx_http_llm_emit(ctx, ev, l + 8, 0);
    free(ev);
    return rc;
}

/* Typed events (the Responses and Messages APIs): "event: <type>\ndata: <json>\n\n" each; an ndjson API's
 * (Ollama's): "<json>\n" each; a data-only API's (TGI's): "data: <json>\n\n" each. Takes ev. */
static ngx_int_t ngx_http_llm_emit_typed(ngx_http_llm_ctx_t *ctx, cJSON *ev)
{
    ngx_int_t rc = ev ? NGX_OK : NGX_ERROR;
    int nd = ctx->typed->ndjson;
    for (cJSON *o = ev ? ev->child : NULL; o != NULL && rc == NGX_OK; o = o->next) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
        char *js = cJSON_PrintUnformatted(o);
        int plain = nd || ctx->typed->data_only;
        if (js == NULL || (!plain && !cJSON_IsString(t))) { cJSON_free(js); rc = NGX_ERROR; break; }
        size_t tl = plain ? 0 : strlen(t->valuestring), l = strlen(js);
        char *buf = malloc(tl + l + 16);
        if (buf != NULL) {
            size_t n = (size_t)((nd ? ngx_sprintf((u_char *)buf, "%s\n", js)
                                 : ctx->typed->data_only ? ngx_sprintf((u_char *)buf, "data: %s\n\n", js)
                                 : ngx_sprintf((u_char *)buf, "event: %s\ndata: %s\n\n", t->valuestring, js))
                                - (u_char *)buf);
            rc = ngx_http_llm_emit(ctx, buf, n, 0);
        } else {
            rc = NGX_ERROR;
        }
        free(buf);
        cJSON_free(js);
    }
    cJSON_Delete(ev);
    return rc;
}

/* Streamed output of choice i, in the request's API: chat / completions chunks or typed events.
 * Each returns 0, or -1 on an output failure. Text (lp: its logprobs, taken): */
static int ngx_http_llm_stream_text(ngx_http_llm_ctx_t *ctx, int i, const char *t, size_t len, cJSON *lp)
{
    if (ctx->typed) {
        cJSON *ev = cJSON_CreateArray();
        if (ev == NULL) { cJSON_Delete(lp); return -1; }
        if (ctx->typed->text(ctx->tb, ev, 0, t, len, lp)) { cJSON_Delete(ev); return -1; }
        return ngx_http_llm_emit_typed(ctx, ev) == NGX_ERROR ? -1 : 0;
    }
    return ngx_http_llm_emit_event(ctx, ngx_http_llm_chunk(&ctx->resp, i, t, len, 0, lp, NULL)) == NGX_ERROR ? -1 : 0;
}

/* A reasoning model's reasoning: */
static int ngx_http_llm_stream_reasoning(ngx_http_llm_ctx_t *ctx, int i, const char *t, size_t len)
{
    if (ctx->typed) {
        cJSON *ev = cJSON_CreateArray();
        if (ev == NULL || ctx->typed->text(ctx->tb, ev, 1, t, len, NULL)) { cJSON_Delete(ev); return -1; }
        return ngx_http_llm_emit_typed(ctx, ev) == NGX_ERROR ? -1 : 0;
    }
    return ngx_http_llm_emit_event(ctx, ngx_http_llm_reasoning_chunk(&ctx->resp, i, t, len)) == NGX_ERROR ? -1 : 0;
}

/* Tool calls, each whole: */
static int ngx_http_llm_stream_calls(ngx_http_llm_ctx_t *ctx, int i, const ngx_http_llm_call_t *calls, int n)
{
    if (ctx->typed) {
        cJSON *ev = cJSON_CreateArray();
        if (ev == NULL || ctx->typed->calls(ctx->tb, ev, calls, n)) { cJSON_Delete(ev); return -1; }
        return ngx_http_llm_emit_typed(ctx, ev) == NGX_ERROR ? -1 : 0;
    }
    return ngx_http_llm_emit_event(ctx, ngx_http_llm_call_chunk(&ctx->resp, i, calls, n)) == NGX_ERROR ? -1 : 0;
}

static ngx_int_t ngx_http_llm_send_stream_header(ngx_http_llm_ctx_t *ctx)
{
    ngx_http_request_t *r = ctx->r;
    static const struct { const char *k, *v; } hs[] = { { "Cache-Control", "no-cache" }, { "X-Accel-Buffering", "no" } };
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
        ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL) return NGX_ERROR;
        h->hash = 1;
        h->key.data = (u_char *)hs[i].k;
        h->key.len = ngx_strlen(hs[i].k);
        h->value.data = (u_char *)hs[i].v;
        h->value.len = ngx_strlen(hs[i].v);
    }
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = -1;
    if (ctx->typed && ctx->typed->ndjson) {
        ngx_str_set(&r->headers_out.content_type, "application/x-ndjson");
    } else {
        ngx_str_set(&r->headers_out.content_type, "text/event-stream");
    }
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    ngx_http_llm_count_status(r, 200);
    ctx->header_sent = 1;
    ngx_int_t rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK) return NGX_ERROR;
    if (ctx->typed) { /* response.created, response.in_progress; message_start */
        cJSON *ev = cJSON_CreateArray();
        if (ev == NULL || ctx->typed->begin(ctx->tb, ev)) { cJSON_Delete(ev); return NGX_ERROR; }
        return ngx_http_llm_emit_typed(ctx, ev);
    }
    if (ctx->resp.kind == LLM_API_CHAT)  /* the first chunk of each choice carries the role */
        for (int i = 0; i < ctx->n; i++)
            if (ngx_http_llm_emit_event(ctx, ngx_http_llm_chunk(&ctx->resp, i, "", 0, 1, NULL, NULL)) == NGX_ERROR)
                return NGX_ERROR;
    return NGX_OK;
}

/* Ends the request: finalizes it; ctx must not be touched afterwards. */
static void ngx_http_llm_done(ngx_http_llm_ctx_t *ctx, ngx_int_t rc)
{
    ngx_http_request_t *r = ctx->r;
    ngx_connection_t *c = r->connection;
    /* A failed write to a client that went away is an abort too (logged, counted). */
    ctx->finished = !(rc == NGX_ERROR && c->error);
    ngx_http_llm_pending_remove(&ctx->pend);
    if (ctx->timer.timer_set) ngx_del_timer(&ctx->timer);
    ngx_http_finalize_request(r, rc);
    ngx_http_run_posted_requests(c);
}

/* Fails the request: an error response, or an error event when streaming. */
static void ngx_http_llm_fail(ngx_http_llm_ctx_t *ctx, int status, const char *code, const char *msg)
{
    llm_api_err e;
    llm_api_seterr(&e, status, NULL, code, "%s", msg);
    ctx->log->finish = code;
    if (!ctx->header_sent) {
        ngx_http_llm_done(ctx, ngx_http_llm_send_error(ctx->r, &e));
        return;
    }
    ngx_int_t rc = NGX_ERROR;
    if (ctx->typed) { /* an "error" event (Responses: then response.failed); these streams have no [DONE] */
        cJSON *ev = cJSON_CreateArray();
        if (ev != NULL && ctx->typed->error(ctx->tb, ev, code, e.type, msg) != 0) { cJSON_Delete(ev); ev = NULL; }
        if (ev != NULL && ngx_http_llm_emit_typed(ctx, ev) != NGX_ERROR) rc = ngx_http_llm_emit(ctx, NULL, 0, 1);
        ngx_http_llm_done(ctx, rc == NGX_ERROR ? NGX_ERROR : NGX_OK);
        return;
    }
    char *s = llm_api_error_json(&e);
    if (s) {
        cJSON *o = cJSON_Parse(s);
        cJSON_free(s);
        if (ngx_http_llm_emit_event(ctx, o) != NGX_ERROR)
            rc = ngx_http_llm_emit(ctx, "data: [DONE]\n\n", 14, 1);
    }
    ngx_http_llm_done(ctx, rc == NGX_ERROR ? NGX_ERROR : NGX_OK);
}

/* ---------------- tokens -> text ---------------- */

static int ngx_http_llm_is_eog(ngx_http_llm_ctx_t *ctx, int32_t id)
{
    for (int i = 0; i < ctx->n_eog; i++) if (ctx->eog[i] == id) return 1;
    return 0;
}

/* A token that ends the choice without text: end-of-generation (unless ignore_eos) or a stop_token_ids id. */
static int ngx_http_llm_is_stop_token(ngx_http_llm_ctx_t *ctx, int32_t id)
{
    for (int i = 0; i < ctx->q.n_stop_token_ids; i++) if (ctx->q.stop_token_ids[i] == id) return 1;
    return !ctx->q.ignore_eos && ngx_http_llm_is_eog(ctx, id);
}

/* Function calling, streamed: the text is held while it may be a call. With tool_choice "auto" in Llama 3's
 * format the first byte that is neither whitespace nor '{' says it is not: what was held goes out, and the
 * rest streams as it comes. In ChatML and Mistral's formats, text streams as content up to a "<tool_call>" /
 * "[TOOL_CALLS]" (held back while it may be one), and from there on is held: the calls go out at the end. */
static int ngx_http_llm_hold(ngx_http_llm_ctx_t *ctx, int i, const char *t, size_t len)
{
    ngx_http_llm_seq_t *s = &ctx->seq[i];
    if (ngx_http_llm_text_append(&s->text, t, len)) return -1;
    if (ctx->q.tool_mode == LLM_TOOLS_AUTO && llm_tools_call_tag(&ctx->q) != NULL) {
        size_t safe = llm_tools_content_end(&ctx->q, s->text.data, s->text.len, s->sent), from = s->sent;
        if (safe == s->sent) return 0;
        s->sent = safe;
        return ngx_http_llm_stream_text(ctx, i, s->text.data + from, safe - from, NULL);
    }
    if (ctx->q.tool_mode != LLM_TOOLS_AUTO || llm_tools_may_be_call(&ctx->q, s->text.data, s->text.len)) return 0;
    s->hold = 0;
    size_t held = s->text.len;
    s->text.len = 0;
    return ngx_http_llm_stream_text(ctx, i, s->text.data, held, NULL);
}

/* Appends text to a choice: to the stream as a chunk, or to its text buffer. */
static int ngx_http_llm_out(ngx_http_llm_ctx_t *ctx, int i, const char *t, size_t len, cJSON *lp)
{
    ngx_http_llm_seq_t *s = &ctx->seq[i];
    if (ctx->q.stream && s->hold) {
        cJSON_Delete(lp); /* logprobs are refused with streamed tools */
        return ngx_http_llm_hold(ctx, i, t, len);
    }
    if (ctx->q.stream) {
        if (len == 0 && lp == NULL) return 0;
        return ngx_http_llm_stream_text(ctx, i, t, len, lp);
    }
    cJSON_Delete(lp);
    return ngx_http_llm_text_append(&s->text, t, len);
}

/* The reasoning filter's sink: reasoning to its stream chunk or buffer, content on to ngx_http_llm_out. */
typedef struct {
    ngx_http_llm_ctx_t *ctx;
    int                 i;
    cJSON              *lp;  /* the token's logprobs, sent with its first content (or alone at the end) */
} ngx_http_llm_think_sink_t;

static int ngx_http_llm_think_emit(void *user, int reasoning, const char *t, size_t len)
{
    ngx_http_llm_think_sink_t *k = user;
    ngx_http_llm_seq_t *s = &k->ctx->seq[k->i];
    if (!reasoning) {
        cJSON *lp = k->lp;
        k->lp = NULL;
        return ngx_http_llm_out(k->ctx, k->i, t, len, lp);
    }
    if (!k->ctx->q.stream) return ngx_http_llm_text_append(&s->reasoning, t, len);
    return ngx_http_llm_stream_reasoning(k->ctx, k->i, t, len);
}

/* Generated text of choice i: through the <think> splitter for a reasoning model's chat, else as it is.
 * end: the answer is over (what the splitter holds goes out). */
static int ngx_http_llm_out_gen(ngx_http_llm_ctx_t *ctx, int i, const char *t, size_t len, cJSON *lp, int end)
{
    if (!ctx->q.think) return ngx_http_llm_out(ctx, i, t, len, lp);
    ngx_http_llm_think_sink_t k = { ctx, i, lp };
    int rc = llm_think_feed(&ctx->seq[i].think, t, len, ngx_http_llm_think_emit, &k);
    if (rc == 0 && end) rc = llm_think_end(&ctx->seq[i].think, ngx_http_llm_think_emit, &k);
    if (k.lp != NULL) { /* no content came with this token */
        if (rc == 0) rc = ngx_http_llm_out(ctx, i, "", 0, k.lp);
        else cJSON_Delete(k.lp);
    }
    return rc;
}

/* A logprobs entry of choice i: collected for the response (NULL back), or wrapped for its stream chunk. */
static cJSON *ngx_http_llm_lp_take(ngx_http_llm_ctx_t *ctx, ngx_http_llm_seq_t *s, cJSON *entry)
{
    if (ctx->q.stream) return ngx_http_llm_logprobs_wrap(&ctx->resp, entry);
    if (s->lp == NULL) s->lp = ngx_http_llm_logprobs_new(&ctx->resp);
    ngx_http_llm_logprobs_add(&ctx->resp, s->lp, entry);
    return NULL;
}

/* TGI's API and llama.cpp's /completion: each token, streamed with the text it releases (NULL back: collected
 * for the answer's details.tokens / tokens / completion_probabilities, or not kept). */
static cJSON *ngx_http_llm_token_take(ngx_http_llm_ctx_t *ctx, ngx_http_llm_seq_t *s, const llm_shm_token *tk)
{
    if (!ctx->q.stream && !ctx->q.tgi_details && !ctx->q.lcpp_tokens && !(ctx->q.api == LLM_API_LCPP && ctx->q.logprobs))
        return NULL;
    cJSON *t = ngx_http_llm_tg_token(ctx->tok, tk, ctx->q.logprobs ? ctx->q.top_logprobs : 0);
    if (ctx->q.stream || t == NULL) return t;
    if (s->lp == NULL) s->lp = cJSON_CreateArray();
    if (s->lp != NULL) cJSON_AddItemToArray(s->lp, t);
    else cJSON_Delete(t);
    return NULL;
}

/* echo: one prompt token of choice i, its text and (with logprobs) its entry: tk NULL for the first
 * token, whose logprob is null. */
static int ngx_http_llm_echo_token(ngx_http_llm_ctx_t *ctx, int i, int32_t id, const llm_shm_token *tk)
{
    ngx_http_llm_seq_t *s = &ctx->seq[i];
    char piece[1024];
    size_t n = llm_detok_push(&s->pdetok, id, piece, sizeof piece);
    cJSON *lp = NULL;
    if (ctx->q.logprobs)
        lp = ngx_http_llm_lp_take(ctx, s, tk ? ngx_http_llm_logprob_entry(&ctx->resp, ctx->tok, tk, ctx->q.top_logprobs,
                                                                          s->text_off)
                                             : ngx_http_llm_logprob_entry_null(&ctx->resp, ctx->tok, id, s->text_off));
    s->text_off += n;
    s->echo_open = 1;
    return ngx_http_llm_out(ctx, i, piece, n, lp);
}

/* echo: the prompt is over; what its text held back goes out. */
static int ngx_http_llm_echo_close(ngx_http_llm_ctx_t *ctx, int i)
{
    ngx_http_llm_seq_t *s = &ctx->seq[i];
    if (!s->echo_open) return 0;
    s->echo_open = 0;
    char tail[64];
    size_t n = llm_detok_flush(&s->pdetok, tail, sizeof tail);
    s->text_off += n;
    return ngx_http_llm_out(ctx, i, tail, n, NULL);
}

/* Function calling: a choice's answer is over; read it as tool calls (finish "tool_calls"), and when
 * streamed send the calls, or the text held back as content. */
static int ngx_http_llm_tool_end(ngx_http_llm_ctx_t *ctx, int i)
{
    ngx_http_llm_seq_t *s = &ctx->seq[i];
    if (ctx->q.tool_mode == LLM_TOOLS_OFF) return 0;
    llm_tool_call got[LLM_TOOLS_MAX_CALLS];
    /* streamed ChatML / Mistral: what was sent was content; the calls are read from the rest */
    const char *rest = s->text.data ? s->text.data + s->sent : NULL;
    int n = llm_tools_output(&ctx->q, rest, s->text.len - s->sent, got, &s->content_len);
    for (int k = 0; k < n; k++) {
        ngx_snprintf((u_char *)s->calls[k].id, sizeof s->calls[k].id, "call_%08xD%08xD%08xD%Z",
                     (uint32_t)ngx_random(), (uint32_t)ngx_random(), (uint32_t)ngx_random());
        s->calls[k].name = got[k].name;
        s->calls[k].args = got[k].args;
    }
    s->n_calls = n;
    if (n > 0) s->finish = "tool_calls";
    if (!ctx->q.stream || !s->hold) return 0;
    s->hold = 0;
    if (n == 0 && s->text.len == s->sent) return 0; /* all of it went out as content */
    return n > 0 ? ngx_http_llm_stream_calls(ctx, i, s->calls, n)
                 : ngx_http_llm_stream_text(ctx, i, rest, s->text.len - s->sent, NULL);
}

/* llama.cpp's n_indent over text t of choice i: what goes out now is appended to o; 1 when a line after the
 * first is indented less than n_indent, the answer then ending before its first character (its newline and
 * indentation out, as llama.cpp cuts it); 0 otherwise; -1 out of memory. end: the answer is over (what is held
 * goes out). */
static int ngx_http_llm_indent(ngx_http_llm_ctx_t *ctx, ngx_http_llm_seq_t *s, const char *t, size_t len, int end,
                               ngx_http_llm_text_t *o)
{
    for (size_t k = 0; k < len; k++) {
        char c = t[k];
        if (c == '\n') s->seen_nl = 1;
        if (!s->ind_hold) {
            if (c == '\n') { /* a line starts: held from its newline */
                s->ind_hold = 1;
                s->ind.len = 0;
                if (ngx_http_llm_text_append(&s->ind, t + k, 1)) return -1;
            } else if (ngx_http_llm_text_append(o, t + k, 1)) {
                return -1;
            }
            continue;
        }
        if (c == '\n') { /* a blank line: out, and the next one held */
            if (ngx_http_llm_text_append(o, s->ind.data, s->ind.len)) return -1;
            s->ind.len = 0;
            if (ngx_http_llm_text_append(&s->ind, t + k, 1)) return -1;
            continue;
        }
        if (c == ' ' || c == '\t') {
            if (ngx_http_llm_text_append(&s->ind, t + k, 1)) return -1;
            continue;
        }
        /* the line's first character: its indentation is what is held after the newline */
        s->ind_hold = 0;
        if (ngx_http_llm_text_append(o, s->ind.data, s->ind.len)) return -1;
        if ((int)s->ind.len - 1 < ctx->q.n_indent) return 1;
        if (ngx_http_llm_text_append(o, t + k, 1)) return -1;
    }
    if (end && s->ind_hold) {
        s->ind_hold = 0;
        if (ngx_http_llm_text_append(o, s->ind.data, s->ind.len)) return -1;
    }
    return 0;
}

/* Choice i is over, for this reason: released in the engine (what it has not generated yet is cancelled), and
 * read as tool calls where the request has tools. */
static int ngx_http_llm_close(ngx_http_llm_ctx_t *ctx, int i, const char *finish)
{
    ngx_http_llm_seq_t *s = &ctx->seq[i];
    s->finish = finish;
    s->done = 1;
    ctx->n_done++;
    llm_client_release(ctx->eng->client, s->h);
    s->started = 0;
    return ngx_http_llm_tool_end(ctx, i);
}

/* Text of choice i after the stop strings: through n_indent's check when the request has one. 1 when that
 * ended the answer. */
static int ngx_http_llm_out_editor(ngx_http_llm_ctx_t *ctx, int i, const char *t, size_t len, cJSON *lp, int end)
{
    ngx_http_llm_seq_t *s = &ctx->seq[i];
    if (ctx->q.n_indent <= 0) {
        if (memchr(t, '\n', len) != NULL) s->seen_nl = 1;
        return ngx_http_llm_out_gen(ctx, i, t, len, lp, end);
    }
    ngx_http_llm_text_t o = { NULL, 0, 0 };
    int cut = ngx_http_llm_indent(ctx, s, t, len, end, &o);
    int rc = cut < 0 ? -1 : ngx_http_llm_out_gen(ctx, i, o.data ? o.data : "", o.len, lp, end || cut);
    free(o.data);
    if (cut < 0) cJSON_Delete(lp);
    return rc < 0 ? -1 : cut;
}

/* Takes one token of choice i. Returns -1 on an output failure. */
static int ngx_http_llm_token(ngx_http_llm_ctx_t *ctx, int i, const llm_shm_token *tk)
{
    ngx_http_llm_seq_t *s = &ctx->seq[i];
    if (tk->flags & LLM_ENTRY_PROMPT) return ctx->q.echo ? ngx_http_llm_echo_token(ctx, i, tk->id, tk) : 0;
    if (ngx_http_llm_echo_close(ctx, i)) return -1;
    if (ctx->q.echo_only) /* max_tokens 0: the prompt was all; the token the engine made is dropped */
        return ngx_http_llm_close(ctx, i, "length");
    s->n_gen++;
    ctx->log->completion_tokens++;
    if (ngx_http_llm_is_stop_token(ctx, tk->id)) {
        s->finish = "stop"; /* the engine ends the request right after */
        return 0;
    }
    char piece[1024];
    size_t n = llm_detok_push(&s->detok, tk->id, piece, sizeof piece);
    const char *out;
    size_t olen;
    int hit = llm_stop_push(&s->stop, piece, n, &out, &olen);
    if (hit < 0) return -1;
    cJSON *lp = NULL;
    if (LLM_API_TOKENWISE(ctx->q.api))
        lp = ngx_http_llm_token_take(ctx, s, tk);
    else if (ctx->q.logprobs)
        lp = ngx_http_llm_lp_take(ctx, s, ngx_http_llm_logprob_entry(&ctx->resp, ctx->tok, tk, ctx->q.top_logprobs,
                                                                     s->text_off));
    s->text_off += olen;
    int before = s->think.state;
    int cut = ngx_http_llm_out_editor(ctx, i, out, olen, lp, hit);
    if (cut < 0) return -1;
    if (!cut && !hit && ctx->q.t_max_predict_ms > 0 && s->seen_nl && ctx->got_token &&
        ngx_current_msec - (ctx->start + ctx->log->ttft) >= (ngx_msec_t)ctx->q.t_max_predict_ms) {
        /* llama.cpp's t_max_predict_ms: the answer ends here, with what the stop strings hold */
        llm_stop_flush(&s->stop, &out, &olen);
        if (ngx_http_llm_out_editor(ctx, i, out, olen, NULL, 1) < 0) return -1;
        cut = 1;
    }
    if (cut) return ngx_http_llm_close(ctx, i, "length"); /* (n_indent, t_max_predict_ms: stop_type limit) */
    /* a token of the reasoning: from <think> to </think> */
    if (ctx->q.think && (before == LLM_THINK_LEAD || before == LLM_THINK_IN || s->think.state == LLM_THINK_LEAD ||
                         s->think.state == LLM_THINK_IN)) s->n_reasoning++;
    return hit ? ngx_http_llm_close(ctx, i, "stop") : 0;
}

/* A choice ended in the engine: flush held text, record the reason. */
static int ngx_http_llm_seq_end(ngx_http_llm_ctx_t *ctx, int i, const llm_req_status *st)
{
    ngx_http_llm_seq_t *s = &ctx->seq[i];
    if (ngx_http_llm_echo_close(ctx, i)) return -1;
    char tail[64];
    size_t n = llm_detok_flush(&s->detok, tail, sizeof tail);
    const char *out;
    size_t olen;
    int hit = llm_stop_push(&s->stop, tail, n, &out, &olen);
    int cut = hit < 0 ? -1 : ngx_http_llm_out_editor(ctx, i, out, olen, NULL, hit);
    if (cut < 0) return -1;
    if (!hit && !cut) {
        llm_stop_flush(&s->stop, &out, &olen);
        if ((cut = ngx_http_llm_out_editor(ctx, i, out, olen, NULL, 1)) < 0) return -1;
    }
    return ngx_http_llm_close(ctx, i, cut ? "length" : hit || st->finish == LLM_FINISH_STOP ? "stop"
                                      : st->finish == LLM_FINISH_LENGTH ? "length" : s->finish ? s->finish : "stop");
}

/* The Responses API with llm_responses_store: keeps response `out` (taken; NULL: nothing) with this turn's
 * items, the request's input (a string as its user message) then the output. A response too large for the
 * zone is left out (logged); the answer goes on either way. */
static void ngx_http_llm_keep(ngx_http_llm_ctx_t *ctx, cJSON *out)
{
    if (out == NULL) return;
    const cJSON *in = llm_api_field(ctx->q.body, "input"), *prev = llm_api_field(ctx->q.body, "previous_response_id");
    cJSON *items = cJSON_IsArray(in) ? cJSON_Duplicate(in, 1) : cJSON_CreateArray(), *o;
    int k = 0;
    if (items != NULL && cJSON_IsString(in)) { /* its user message; made a typed message below */
        cJSON *m = cJSON_CreateObject();
        if (m != NULL && cJSON_AddStringToObject(m, "role", "user") && cJSON_AddStringToObject(m, "content", in->valuestring))
            cJSON_AddItemToArray(items, m);
        else
            cJSON_Delete(m);
    }
    /* input items as OpenAI lists them (input_items): an id where they have none (its pages go by id), a
     * message's type and its text as parts */
    cJSON_ArrayForEach(o, items) {
        char iid[96];
        ngx_snprintf((u_char *)iid, sizeof iid, "item_%s_%d%Z", ctx->resp.id + 5, k++);
        if (!cJSON_IsObject(o)) continue;
        if (cJSON_GetObjectItemCaseSensitive(o, "id") == NULL) cJSON_AddStringToObject(o, "id", iid);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(o, "role"), *c = cJSON_GetObjectItemCaseSensitive(o, "content");
        if (!cJSON_IsString(role)) continue;
        if (cJSON_GetObjectItemCaseSensitive(o, "type") == NULL) cJSON_AddStringToObject(o, "type", "message");
        if (!cJSON_IsString(c)) continue;
        cJSON *parts = cJSON_CreateArray(), *part = parts ? cJSON_CreateObject() : NULL;
        if (part == NULL) { cJSON_Delete(parts); continue; }
        cJSON_AddItemToArray(parts, part);
        cJSON_AddStringToObject(part, "type", strcmp(role->valuestring, "assistant") ? "input_text" : "output_text");
        cJSON_AddStringToObject(part, "text", c->valuestring);
        cJSON_ReplaceItemInObjectCaseSensitive(o, "content", parts);
    }
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(out, "output"))
        if (items != NULL) cJSON_AddItemToArray(items, cJSON_Duplicate(o, 1));
    char *it = items ? cJSON_PrintUnformatted(items) : NULL, *resp = cJSON_PrintUnformatted(out);
    if (it != NULL && resp != NULL)
        (void)ngx_http_llm_store_put(ctx->r, ctx->resp.id, cJSON_IsString(prev) ? prev->valuestring : NULL, it,
                                     (uint32_t)k, resp);
    cJSON_free(it);
    cJSON_free(resp);
    cJSON_Delete(items);
    cJSON_Delete(out);
}

/* A typed API's end: its last events (streamed), or the whole response built from the answer. */
static ngx_int_t ngx_http_llm_typed_complete(ngx_http_llm_ctx_t *ctx, const ngx_http_llm_usage_t *cu)
{
    ngx_http_llm_seq_t *s = &ctx->seq[0];
    const ngx_http_llm_typed_t *ty = ctx->typed;
    ngx_http_llm_end_t u = { s->finish, s->stop.which >= 0 ? s->stop.stop[s->stop.which] : NULL, cu->prompt,
                             cu->completion, cu->cached, s->n_reasoning };
    cJSON *out = NULL;
    if (ctx->q.stream) {
        cJSON *ev = cJSON_CreateArray();
        if (ev == NULL || ty->end(ctx->tb, ev, &u, ctx->store ? &out : NULL)) { cJSON_Delete(ev); return NGX_ERROR; }
        ngx_http_llm_keep(ctx, out); /* before the last byte: a client may ask for it as soon as it has it */
        if (ngx_http_llm_emit_typed(ctx, ev) == NGX_ERROR) return NGX_ERROR;
        return ngx_http_llm_emit(ctx, NULL, 0, 1);
    }
    cJSON *lp = s->lp;
    s->lp = NULL;
    int rc = 0;
    if (s->reasoning.len > 0) rc = ty->text(ctx->tb, NULL, 1, s->reasoning.data, s->reasoning.len, NULL);
    size_t len = s->n_calls > 0 ? s->content_len : s->text.len;
    if (rc == 0 && (len > 0 || lp != NULL)) rc = ty->text(ctx->tb, NULL, 0, s->text.data, len, lp);
    else cJSON_Delete(lp);
    if (rc == 0 && s->n_calls > 0) rc = ty->calls(ctx->tb, NULL, s->calls, s->n_calls);
    if (rc == 0) rc = ty->end(ctx->tb, NULL, &u, &out);
    if (rc != 0) return NGX_ERROR;
    if (ctx->store) {
        cJSON *copy = cJSON_Duplicate(out, 1);
        ngx_http_llm_keep(ctx, copy);
    }
    return ngx_http_llm_send_cjson(ctx->r, 200, out);
}

static ngx_int_t ngx_http_llm_complete(ngx_http_llm_ctx_t *ctx)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(ctx->r, ngx_http_llm_module);
    uint32_t gen = 0;
    for (int i = 0; i < ctx->n; i++) gen += ctx->seq[i].n_gen;
    /* a prompt counts once however many choices it has: its first choice's cache hits */
    ngx_http_llm_usage_t u = { ctx->n_prompt, gen, 0 };
    for (int i = 0; i < ctx->n; i += ctx->q.n) u.cached += ctx->seq[i].n_cached;
    ctx->log->cached_tokens = u.cached;
    ctx->log->finish = ctx->seq[0].finish; /* (the first choice's) */
    if (mcf->counters) {
        (void)ngx_atomic_fetch_add(&mcf->counters->prompt_tokens, ctx->n_prompt);
        (void)ngx_atomic_fetch_add(&mcf->counters->completion_tokens, gen);
    }
    if (ctx->typed) return ngx_http_llm_typed_complete(ctx, &u);
    if (ctx->q.stream) {
        for (int i = 0; i < ctx->n; i++)
            if (ngx_http_llm_emit_event(ctx, ngx_http_llm_chunk(&ctx->resp, i, "", 0, 0, NULL, ctx->seq[i].finish))
                == NGX_ERROR) return NGX_ERROR;
        if (ctx->q.include_usage &&
            ngx_http_llm_emit_event(ctx, ngx_http_llm_usage_chunk(&ctx->resp, &u)) == NGX_ERROR)
            return NGX_ERROR;
        return ngx_http_llm_emit(ctx, "data: [DONE]\n\n", 14, 1);
    }
    ngx_http_llm_choice_t *ch = ngx_palloc(ctx->r->pool, (size_t)ctx->n * sizeof *ch);
    if (ch == NULL) return NGX_ERROR;
    for (int i = 0; i < ctx->n; i++) {
        ch[i].text = ctx->seq[i].text.data ? ctx->seq[i].text.data : "";
        ch[i].n_calls = ctx->seq[i].n_calls;
        ch[i].calls = ch[i].n_calls > 0 ? ctx->seq[i].calls : NULL;
        ch[i].len = ch[i].n_calls > 0 ? ctx->seq[i].content_len : ctx->seq[i].text.len;
        ch[i].finish = ctx->seq[i].finish;
        ch[i].think = ctx->q.think;
        ch[i].reasoning = ctx->seq[i].reasoning.data;
        ch[i].reasoning_len = ctx->seq[i].reasoning.len;
        ch[i].logprobs = ctx->seq[i].lp;
        ctx->seq[i].lp = NULL; /* the response takes it */
    }
    return ngx_http_llm_send_cjson(ctx->r, 200, ngx_http_llm_response(&ctx->resp, ch, ctx->n, &u));
}

/* The request's engine went away (a crash, kill -9) before any of its tokens came: its choices start again,
 * from the prompts and parameters kept for this (seed included), on a ready engine: another replica
 * (llm_engine A B ...), or the same engine once its supervisor has restarted it. Once per request (a request
 * that brings engines down does not go round them all). 1 when they have started (the request is on that
 * engine's queue), -1 while no engine is ready (it waits on this one's queue, stepped by its one-second check,
 * up to llm_queue_timeout), 0 when it cannot (a token came, or it went on once already). */
static int ngx_http_llm_failover(ngx_http_llm_ctx_t *ctx)
{
    if (ctx->got_token || ctx->p == NULL || ctx->pr.ids == NULL || ctx->failovers > 0) return 0;
    ngx_http_llm_engine_t *old = ctx->eng;
    if (!ctx->orphaned) { /* (the old generation is gone: releasing only forgets the handles) */
        for (int i = 0; i < ctx->n; i++) {
            if (ctx->seq[i].started && old->client) llm_client_release(old->client, ctx->seq[i].h);
            ctx->seq[i].started = 0;
        }
        ctx->orphaned = 1;
    }
    llm_api_err e;
    ngx_http_llm_engine_t *eng = ngx_http_llm_pick_engine(ctx->r, ctx->pr.ids[0], ctx->pr.n_ids[0], ctx->q.cache_key);
    if (ngx_http_llm_engine_ready(eng, &e) != LLM_SHM_OK) {
        ctx->log->eng = old;
        return -1;
    }
    ngx_http_llm_pending_remove(&ctx->pend);
    ctx->eng = eng;
    ctx->failovers++;
    ctx->orphaned = 0;
    for (int i = 0; i < ctx->n; i++) {
        ngx_http_llm_seq_t *s = &ctx->seq[i];
        if (s->done) continue;
        int pi = i / ctx->q.n;
        llm_shm_params p = *ctx->p;
        p.seed = s->seed;
        p.max_tokens = s->max_tokens;
        if (llm_client_start_schema(eng->client, ctx->pr.ids[pi], (uint32_t)ctx->pr.n_ids[pi], &p, ctx->q.schema,
                                    (uint32_t)ctx->q.schema_len, ctx->tag, &s->h) != LLM_SHM_OK)
            return 0; /* (the cleanup releases those started) */
        s->started = 1;
    }
    ngx_log_error(NGX_LOG_WARN, ctx->r->connection->log, 0,
                  "llm: engine \"%V\" went away before the request's first token; it goes on on \"%V\"%s",
                  &old->name, &eng->name, eng == old ? " (restarted)" : "");
    ngx_http_llm_pending_add(eng, &ctx->pend);
    return 1;
}

/* Reads what the engine has for one request; finalizes it when complete. Returns 1 if still running (0: it
 * has been finalized, or moved to another engine's queue by a failover). */
static int ngx_http_llm_step(void *data)
{
    ngx_http_llm_ctx_t *ctx = data;
    if (ctx->orphaned) { /* waiting for an engine to go on on */
        int rc = ngx_http_llm_failover(ctx);
        if (rc != 0) return rc < 0;
        ngx_http_llm_fail(ctx, 503, "engine_restarted", "the engine stopped or restarted during the request");
        return 0;
    }
    llm_client *c = ctx->eng->client;
    for (int i = 0; i < ctx->n; i++) {
        ngx_http_llm_seq_t *s = &ctx->seq[i];
        while (!s->done) {
            llm_shm_token tk[16];
            llm_req_status st;
            int k = llm_client_read(c, s->h, tk, 16, &st);
            if (k < 0) {
                int f = k == LLM_SHM_E_ENGINE_GONE ? ngx_http_llm_failover(ctx) : 0;
                if (f != 0) return f < 0; /* started again elsewhere (0), or waiting here (1) */
                ngx_http_llm_fail(ctx, 503, "engine_restarted",
                                  k == LLM_SHM_E_ENGINE_GONE ? "the engine stopped or restarted during the request"
                                                             : llm_shm_strerror(k));
                return 0;
            }
            if (k > 0 && !ctx->got_token) {
                ctx->got_token = 1;
                ctx->log->ttft = ngx_current_msec - ctx->start;
                ctx->log->has_ttft = 1;
            }
            if (k > 0 && ctx->typed == &ngx_http_llm_ol_typed) ngx_http_llm_ol_first(&ctx->ol);
            if (k > 0 && ctx->typed == &ngx_http_llm_lc_typed) ngx_http_llm_lc_first(&ctx->lc);
            if (k > 0 || st.done) s->n_cached = st.n_cached;
            for (int j = 0; j < k && !s->done; j++)
                if (ngx_http_llm_token(ctx, i, &tk[j])) { ngx_http_llm_done(ctx, NGX_ERROR); return 0; }
            if (s->done) break;
            if (st.done) {
                if (st.finish == LLM_FINISH_ERROR && st.error == LLM_SHM_E_QUEUE_FULL) {
                    /* the engine's queue bound (serve --max-waiting): retry later */
                    ngx_http_llm_fail(ctx, 429, "queue_full", "the engine's request queue is full; retry later");
                    return 0;
                }
                if (st.finish == LLM_FINISH_ERROR || (st.finish == LLM_FINISH_CANCELLED && s->finish == NULL)) {
                    char m[128];
                    ngx_snprintf((u_char *)m, sizeof m, "the engine ended the request (%s, code %d)%Z",
                                 st.finish == LLM_FINISH_ERROR ? "error" : "cancelled", (int)st.error);
                    ngx_http_llm_fail(ctx, 503, "engine_error", m);
                    return 0;
                }
                if (ngx_http_llm_seq_end(ctx, i, &st)) { ngx_http_llm_done(ctx, NGX_ERROR); return 0; }
                break;
            }
            if (k < 16) break;
        }
    }
    if (ctx->n_done < ctx->n) return 1;
    ngx_http_llm_done(ctx, ngx_http_llm_complete(ctx));
    return 0;
}

static void ngx_http_llm_timeout(ngx_event_t *ev)
{
    ngx_http_llm_ctx_t *ctx = ev->data;
    ngx_msec_t elapsed = ngx_current_msec - ctx->start;
    if (ctx->got_token && elapsed < ctx->request_timeout) {
        ngx_add_timer(&ctx->timer, ctx->request_timeout - elapsed);
        return;
    }
    ngx_http_llm_fail(ctx, 504, "timeout", ctx->got_token ? "the request timed out (llm_request_timeout)"
                                                           : "the request timed out waiting for the engine "
                                                             "(llm_queue_timeout)");
}

/* Flushes output the client could not take yet. */
static void ngx_http_llm_write_handler(ngx_http_request_t *r)
{
    if (r->connection->buffered && ngx_http_output_filter(r, NULL) == NGX_ERROR)
        ngx_http_finalize_request(r, NGX_ERROR);
}

/* ---------------- start ---------------- */

int ngx_http_llm_start_err(int rc, llm_api_err *e)
{
    switch (rc) {
    case LLM_SHM_E_NO_SLOT:
    case LLM_SHM_E_RING_FULL:
        llm_api_seterr(e, 429, NULL, "queue_full", "the engine's queue is full; retry later (%s)", llm_shm_strerror(rc));
        return 429;
    case LLM_SHM_E_TOO_LONG:
        llm_api_seterr(e, 400, "prompt", "context_length_exceeded",
                       "the prompt (with the JSON Schema, if any) is longer than the engine accepts");
        return 400;
    default:
        llm_api_seterr(e, 503, NULL, "engine_unavailable", "the engine is not available: %s", llm_shm_strerror(rc));
        return 503;
    }
}

/* ---------------- prompts ---------------- */

/* Token ids of every prompt, and the engine (replica) they go to, each checked against its context. NGX_OK; NGX_DECLINED with e set
 * (a 4xx/5xx to send); NGX_ERROR (no memory). */
static ngx_int_t ngx_http_llm_prompts_encode(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx, int np,
                                             ngx_http_llm_prompts_t *pr, llm_api_err *e)
{
    pr->n = np;
    pr->ids = calloc((size_t)np, sizeof *pr->ids);
    pr->n_ids = calloc((size_t)np, sizeof *pr->n_ids);
    if (pr->ids == NULL || pr->n_ids == NULL) { ngx_http_llm_prompts_free(pr); return NGX_ERROR; }
    for (int i = 0; i < np; i++) {
        llm_api_req one;
        llm_api_prompt_at(&ctx->q, i, &one);
        int enc = ngx_http_llm_encode_prompt(r, &one, &pr->ids[i], &pr->n_ids[i], e);
        if (enc == 0 && ctx->q.keep_last > 0 && pr->n_ids[i] > (size_t)ctx->q.keep_last) { /* TGI's truncate */
            size_t drop = pr->n_ids[i] - (size_t)ctx->q.keep_last;
            memmove(pr->ids[i], pr->ids[i] + drop, (size_t)ctx->q.keep_last * sizeof *pr->ids[i]);
            pr->n_ids[i] = (size_t)ctx->q.keep_last;
        }
        if (enc) {
            if (np > 1) {
                size_t l = ngx_strlen(e->message);
                ngx_snprintf((u_char *)e->message + l, sizeof e->message - l - 1, " (prompt %d)%Z", i);
            }
            ngx_http_llm_prompts_free(pr);
            return NGX_DECLINED;
        }
    }
    ctx->eng = ngx_http_llm_pick_engine(r, pr->ids[0], pr->n_ids[0], ctx->q.cache_key); /* (by the first) */
    if (ngx_http_llm_engine_ready(ctx->eng, e) != LLM_SHM_OK) { ngx_http_llm_prompts_free(pr); return NGX_DECLINED; }
    const llm_shm_map *m = llm_client_map(ctx->eng->client);
    uint32_t ctx_len = m->hdr->model.ctx_len;
    for (int i = 0; i < np; i++)
        if (pr->n_ids[i] >= ctx_len || pr->n_ids[i] > m->hdr->caps.max_prompt) {
            char which[32] = "";
            if (np > 1) ngx_snprintf((u_char *)which, sizeof which, " %d%Z", i);
            llm_api_seterr(e, 400, ctx->q.api == LLM_API_RESPONSES ? "input" : ctx->q.api == LLM_API_OLLAMA_GENERATE ? "prompt"
                           : LLM_API_IS_TGI(ctx->q.api) ? "inputs"
                           : ctx->q.kind == LLM_API_CHAT ? "messages" : "prompt",
                           "context_length_exceeded",
                           "the prompt%s is %zu tokens; this model's context length is %u tokens "
                           "(and a request may hold at most %u prompt tokens)",
                           which, pr->n_ids[i], ctx_len, m->hdr->caps.max_prompt);
            ngx_http_llm_prompts_free(pr);
            return NGX_DECLINED;
        }
    return NGX_OK;
}

/* Starts every choice in the engine and arms the request's timer. */
static ngx_int_t ngx_http_llm_start(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx, const ngx_http_llm_prompts_t *pr,
                                    int max_tokens, llm_api_err *e)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    const llm_shm_map *m = llm_client_map(ctx->eng->client);
    uint32_t ctx_len = m->hdr->model.ctx_len;
    uint64_t t_start = llm_shm_now_ns(); /* Ollama's durations count from here, before the engine has the request */
    if (m->hdr->model.encoder)
        return ngx_http_llm_error(r, 400, NULL, "model_not_generative", "this model is an embedding model (its "
                                  "tokens see their whole input: BERT, XLM-RoBERTa, ModernBERT, EmbeddingGemma): it "
                                  "serves /v1/embeddings and does not generate text");
    llm_shm_params p;
    llm_shm_params_defaults(&p);
    p.temperature = (float)ctx->q.temperature;
    p.top_k = ctx->q.top_k;
    p.top_p = (float)ctx->q.top_p;
    p.min_p = (float)ctx->q.min_p;
    p.typical_p = (float)ctx->q.typical_p;
    p.penalty_last_n = ctx->q.penalty_last_n;
    p.repetition_penalty = (float)ctx->q.repetition_penalty;
    p.presence_penalty = (float)ctx->q.presence_penalty;
    p.frequency_penalty = (float)ctx->q.frequency_penalty;
    p.n_logprobs = ctx->q.logprobs ? ctx->q.top_logprobs : 0;
    if ((uint32_t)p.n_logprobs > m->hdr->caps.max_top) p.n_logprobs = (int32_t)m->hdr->caps.max_top;
    ctx->n_prompt = 0;
    for (int i = 0; i < pr->n; i++) ctx->n_prompt += (uint32_t)pr->n_ids[i];
    ctx->n_eog = llm_tok_eog_ids(ctx->tok, ctx->eog, LLM_SHM_MAX_EOG);
    for (int i = 0; i < ctx->q.n_bias; i++) {
        if ((uint32_t)ctx->q.bias_ids[i] >= m->hdr->model.vocab_size) {
            return ngx_http_llm_error(r, 400, "logit_bias", "invalid_value",
                                      "logit_bias: token id %D is outside this model's vocabulary of %uD tokens",
                                      ctx->q.bias_ids[i], m->hdr->model.vocab_size);
        }
        p.bias[i] = (llm_shm_bias){ ctx->q.bias_ids[i], ctx->q.bias[i] };
    }
    p.n_bias = (uint32_t)ctx->q.n_bias;
    if (ctx->q.json) p.flags |= LLM_PARAM_JSON;
    if (ctx->q.regex) p.flags |= LLM_PARAM_REGEX;
    if (ctx->q.grammar) p.flags |= LLM_PARAM_GRAMMAR;
    /* a reasoning model thinks before a JSON answer: the mask holds from </think> on (gpt-oss's: from its final
     * channel's header on; vLLM's reasoning parsers do the same). Not for tool_choice required / named where
     * the prompt opens the call itself. */
    if ((ctx->q.json || ctx->q.schema) && ctx->q.kind == LLM_API_CHAT && lcf->tok->think &&
        llm_chat_thinks(ctx->q.chat_format, ctx->q.enable_thinking) && !llm_tools_prompt_opens_call(&ctx->q) &&
        lcf->tok->n_reason_end > 0) {
        p.flags |= LLM_PARAM_REASONING;
        p.reason_start = lcf->tok->reason_start;
        p.n_reason_end = (uint32_t)lcf->tok->n_reason_end;
        ngx_memcpy(p.reason_end, lcf->tok->reason_end, sizeof p.reason_end);
    }
    /* a request may ask to wait longer than its location says, not to go ahead of it */
    p.priority = (int32_t)lcf->priority;
    if (ctx->q.has_priority && ctx->q.priority > p.priority) p.priority = ctx->q.priority;
    if (ctx->q.echo && ctx->q.logprobs) p.flags |= LLM_PARAM_PROMPT_LOGPROBS;
    if (ctx->q.ignore_eos) p.flags |= LLM_PARAM_IGNORE_EOS;
    else
        for (int i = 0; i < ctx->n_eog && p.n_stop < LLM_SHM_MAX_STOP; i++) p.stop_ids[p.n_stop++] = ctx->eog[i];
    for (int i = 0; i < ctx->q.n_stop_token_ids && p.n_stop < LLM_SHM_MAX_STOP; i++) {
        if ((uint32_t)ctx->q.stop_token_ids[i] >= m->hdr->model.vocab_size)
            return ngx_http_llm_error(r, 400, "stop_token_ids", "invalid_value",
                                      "stop_token_ids: token id %D is outside this model's vocabulary of %uD tokens",
                                      ctx->q.stop_token_ids[i], m->hdr->model.vocab_size);
        p.stop_ids[p.n_stop++] = ctx->q.stop_token_ids[i];
    }
    p.min_tokens = ctx->q.min_tokens;
    /* kept for a failover (the prompts too, by the caller) */
    if ((ctx->p = ngx_palloc(r->pool, sizeof(*ctx->p))) == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    *ctx->p = p;

    ngx_http_llm_resp_init(&ctx->resp, ctx->q.kind, ngx_http_llm_model_id(r, ctx->resp.model, sizeof ctx->resp.model));
    ctx->log->model = ctx->resp.model;
    ctx->log->prompt_tokens = ctx->n_prompt;
    ctx->log->started = 1;
    static uint64_t serial;
    uint64_t tag = ((uint64_t)ngx_pid << 40) ^ ++serial;
    ctx->tag = tag;
    for (int i = 0; i < ctx->n; i++) {
        ngx_http_llm_seq_t *s = &ctx->seq[i];
        llm_detok_init(&s->detok, ctx->tok);
        llm_detok_init(&s->pdetok, ctx->tok);
        /* A completion continues its prompt: prompt + text is the whole text, so a first token's leading
         * space stays (" there", not "there"; SentencePiece drops it only at the start of a text). A chat
         * message starts a text of its own. */
        if (ctx->q.kind == LLM_API_COMPLETIONS) s->detok.at_start = 0;
        /* the tags of this model's reasoning; DeepSeek R1's and EXAONE Deep's (and EXAONE 4's, thinking) generation
         * prompt opened it: the answer starts inside it (not with JSON held to a schema, which starts at once) */
        s->think.open = lcf->tok->think_open;
        s->think.close = lcf->tok->think_close;
        s->think.lead_ws = llm_chat_answer_leads_ws(ctx->q.chat_format);
        s->think.after = lcf->tok->think_after;
        s->think.direct = lcf->tok->think_direct;
        s->think.preamble = lcf->tok->think_preamble;
        if (ctx->q.think && llm_chat_prompt_opens_think(ctx->q.chat_format, ctx->q.enable_thinking) &&
            ctx->q.add_generation_prompt && !ctx->q.json && ctx->q.schema == NULL)
            s->think.state = LLM_THINK_LEAD;
        /* a reasoning model's tags stay in its chat answers where they are control tokens (for the splitter, or
         * as the model wrote them with llm_reasoning off) ... */
        if (lcf->tok->think && ctx->q.kind == LLM_API_CHAT) {
            s->detok.keep[0] = lcf->tok->think_start;
            s->detok.keep[1] = lcf->tok->think_end;
        }
        if (lcf->tok->harmony && ctx->q.kind == LLM_API_CHAT) { /* (its calls are read by these tokens too) */
            static const char *const hm[5] = { "<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|constrain|>" };
            for (int k = 0; k < 5; k++) s->detok.keep[k] = llm_tok_find(ctx->tok, hm[k]);
        }
        /* ... and so do the tags calls are read by (Mistral's [TOOL_CALLS], GLM-4.5's <arg_key> ...) */
        const char *tags[LLM_DETOK_KEEP - 2];
        int n_tags = ctx->q.tool_mode != LLM_TOOLS_OFF ? llm_tools_text_tags(&ctx->q, tags, LLM_DETOK_KEEP - 2) : 0;
        for (int k = 0; k < n_tags; k++) s->detok.keep[2 + k] = llm_tok_find(ctx->tok, tags[k]);
        s->hold = ctx->q.stream && ctx->q.tool_mode != LLM_TOOLS_OFF;
        if (llm_stop_init(&s->stop, ctx->q.stop, ctx->q.stop_len, ctx->q.n_stop)) {
            return ngx_http_llm_error(r, 500, NULL, NULL, "out of memory");
        }
        p.seed = ctx->q.has_seed ? ctx->q.seed + (uint64_t)i
                                 : ((uint64_t)ngx_random() << 32) ^ (uint64_t)ngx_random() ^ tag;
        int pi = i / ctx->q.n;
        p.max_tokens = ngx_min(max_tokens, (int)(ctx_len - pr->n_ids[pi])); /* the context: "length" */
        s->seed = p.seed;
        s->max_tokens = p.max_tokens;
        int rc = llm_client_start_schema(ctx->eng->client, pr->ids[pi], (uint32_t)pr->n_ids[pi], &p, ctx->q.schema,
                                         (uint32_t)ctx->q.schema_len, tag, &s->h);
        if (rc != LLM_SHM_OK) {
            ngx_http_llm_start_err(rc, e);
            return ngx_http_llm_send_error(r, e); /* the cleanup releases the started ones */
        }
        s->started = 1;
    }
    ngx_snprintf((u_char *)ctx->resp.id, sizeof ctx->resp.id, "%s%016xL%Z",
                 ctx->q.api == LLM_API_RESPONSES ? "resp_" : ctx->q.api == LLM_API_MESSAGES ? "msg_"
                 : ctx->q.kind == LLM_API_CHAT ? "chatcmpl-" : "cmpl-", tag ^ ((uint64_t)ngx_time() << 20));
    if (ctx->q.api == LLM_API_RESPONSES) {
        ctx->store = ngx_http_llm_store_on(r) && !cJSON_IsFalse(llm_api_field(ctx->q.body, "store"));
        if (ngx_http_llm_rs_init(&ctx->rs, &ctx->resp, ctx->q.body, ctx->q.logprobs, ctx->store)) return NGX_ERROR;
        ctx->typed = &ngx_http_llm_rs_typed;
        ctx->tb = &ctx->rs;
    } else if (ctx->q.api == LLM_API_MESSAGES) {
        if (ngx_http_llm_ms_init(&ctx->ms, &ctx->resp, ctx->n_prompt)) return NGX_ERROR;
        ctx->typed = &ngx_http_llm_ms_typed;
        ctx->tb = &ctx->ms;
    } else if (ctx->q.api == LLM_API_OLLAMA_CHAT || ctx->q.api == LLM_API_OLLAMA_GENERATE) {
        if (ngx_http_llm_ol_init(&ctx->ol, &ctx->resp, ctx->q.api == LLM_API_OLLAMA_GENERATE)) return NGX_ERROR;
        ctx->ol.t0 = t_start;
        ctx->typed = &ngx_http_llm_ol_typed;
        ctx->tb = &ctx->ol;
    } else if (LLM_API_IS_TGI(ctx->q.api)) {
        if (ngx_http_llm_tg_init(&ctx->tg, &ctx->q, p.temperature > 0, ctx->seq[0].seed, ctx->n_eog ? ctx->eog[0] : -1))
            return NGX_ERROR;
        ctx->typed = &ngx_http_llm_tg_typed;
        ctx->tb = &ctx->tg;
    } else if (ctx->q.api == LLM_API_LCPP) {
        if (ngx_http_llm_lc_init(&ctx->lc, &ctx->resp, &ctx->q, max_tokens, (int32_t)ctx_len, ctx->n_prompt,
                                 ctx->q.ids || ctx->q.infill ? llm_tok_decode_ex(ctx->tok, pr->ids[0], pr->n_ids[0], 0)
                                                             : NULL))
            return NGX_ERROR;
        ctx->lc.t0 = t_start;
        ctx->typed = &ngx_http_llm_lc_typed;
        ctx->tb = &ctx->lc;
    }
    ctx->finished = 0;

    if (ctx->q.stream) {
        if (mcf->counters) (void)ngx_atomic_fetch_add(&mcf->counters->streams, 1);
        if (ngx_http_llm_send_stream_header(ctx) != NGX_OK) return NGX_ERROR;
    }
    /* echo: the prompt's text now; with logprobs only its first token (null logprob), the engine sends
     * the others' */
    for (int i = 0; ctx->q.echo && i < ctx->n; i++) {
        const int32_t *ids = pr->ids[i / ctx->q.n];
        size_t n = ctx->q.logprobs ? 1 : pr->n_ids[i / ctx->q.n];
        for (size_t k = 0; k < n; k++)
            if (ngx_http_llm_echo_token(ctx, i, ids[k], NULL)) return NGX_ERROR;
        if (!ctx->q.logprobs && ngx_http_llm_echo_close(ctx, i)) return NGX_ERROR;
    }
    ctx->start = ngx_current_msec;
    ctx->queue_timeout = lcf->queue_timeout;
    ctx->request_timeout = lcf->request_timeout;
    ctx->timer.handler = ngx_http_llm_timeout;
    ctx->timer.data = ctx;
    ctx->timer.log = r->connection->log;
    ngx_add_timer(&ctx->timer, ngx_min(ctx->queue_timeout, ctx->request_timeout));

    /* A client that goes away finalizes the request; the cleanup cancels it in the engine. */
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_llm_write_handler;
    ctx->pend.step = ngx_http_llm_step;
    ctx->pend.ctx = ctx;
    ngx_http_llm_pending_add(ctx->eng, &ctx->pend);
    return NGX_DONE;
}

ngx_int_t ngx_http_llm_generate(ngx_http_request_t *r, llm_api_req *q)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    llm_api_err e;

    ngx_http_llm_ctx_t *ctx = ngx_pcalloc(r->pool, sizeof(*ctx));
    ngx_pool_cleanup_t *cln = ctx ? ngx_pool_cleanup_add(r->pool, 0) : NULL;
    if (cln == NULL) { llm_api_req_free(q); return NGX_HTTP_INTERNAL_SERVER_ERROR; }
    ctx->r = r;
    ctx->q = *q;           /* ctx owns the request from here; the cleanup frees it */
    ctx->tok = lcf->tok->tok;
    ctx->finished = 1;     /* until the engine has it, an early return is not an abort */
    cln->handler = ngx_http_llm_cleanup;
    cln->data = ctx;
    if ((ctx->log = ngx_http_llm_log(r)) == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    int np = ctx->q.n_prompts > 1 ? ctx->q.n_prompts : 1, n = np * ctx->q.n;
    ctx->seq = ngx_pcalloc(r->pool, (size_t)n * sizeof *ctx->seq);
    if (ctx->seq == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    ctx->n = n;            /* choice i: prompt i / q.n (OpenAI's order for a list of prompts) */

    int max_tokens = ctx->q.echo_only ? 1 : (int)ngx_http_llm_answer_tokens(lcf, &ctx->q);
    if (max_tokens > lcf->max_tokens) {
        const char *name = ctx->q.api == LLM_API_RESPONSES ? "max_output_tokens"
                         : ctx->q.api == LLM_API_OLLAMA_CHAT || ctx->q.api == LLM_API_OLLAMA_GENERATE ? "options.num_predict"
                         : LLM_API_IS_TGI(ctx->q.api) ? "parameters.max_new_tokens"
                         : ctx->q.api == LLM_API_LCPP ? "n_predict"
                         : "max_tokens";
        return ngx_http_llm_error(r, 400, name, "invalid_value", "%s is %d; this server allows at most %i", name,
                                  max_tokens, lcf->max_tokens);
    }
    if (ctx->q.min_tokens > max_tokens && !ctx->q.echo_only)
        return ngx_http_llm_error(r, 400, "min_tokens", "invalid_value",
                                  "min_tokens (%d) is more than max_tokens (%d)", ctx->q.min_tokens, max_tokens);
    ngx_http_llm_prompts_t pr;
    ngx_int_t rc = ngx_http_llm_prompts_encode(r, ctx, np, &pr, &e);
    if (rc != NGX_OK) return rc == NGX_DECLINED ? ngx_http_llm_send_error(r, &e) : NGX_HTTP_INTERNAL_SERVER_ERROR;
    rc = ngx_http_llm_start(r, ctx, &pr, max_tokens, &e);
    if (rc == NGX_DONE && ctx->p != NULL) ctx->pr = pr; /* (the cleanup frees them) */
    else ngx_http_llm_prompts_free(&pr);
    return rc;
}
