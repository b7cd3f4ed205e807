/* POST /v1/embeddings (and Ollama's /api/embed): each input -> token ids -> the engine (an LLM_PARAM_EMBED
 * request: the prompt's hidden state after the final norm, pooled as the engine pools) -> the vector, cut to
 * `dimensions` and made unit length -> OpenAI's list of embeddings (Ollama's "embeddings").
 * POST /v1/rerank: each document -> Qwen3-Reranker's judging prompt (a system instruction to answer "yes" or
 * "no", then "<Instruct>: ...\n<Query>: ...\n<Document>: ..." as the user's turn, in the model's chat format,
 * with the empty think block of a template that thinks) -> the engine (a scoring request: one token, the
 * logprobs of "yes" and "no" at the answer's first position; on a reranker GGUF with a classifier head, an
 * embedding request whose result is that head's "yes" and "no" outputs) -> relevance P(yes) / (P(yes) + P(no))
 * -> the documents by relevance (Jina's / Cohere's / vLLM's shape).
 * Inputs go to the engine a window at a time, so a request of OpenAI's 2,048 inputs never needs more slots
 * than the window. */
#include "ngx_http_llm_module.h"

#include <math.h>

#define NGX_LLM_EMBED_WINDOW 32 /* inputs of one request in the engine at once */

typedef struct {
    llm_req   h;
    unsigned  started:1, done:1, scored:1;
    float    *vec;                /* n_embd floats once done (malloc'd) */
    double    score;              /* rerank: the document's relevance */
} ngx_http_llm_emb_item_t;

typedef struct {
    ngx_http_request_t      *r;
    ngx_http_llm_engine_t   *eng;
    ngx_http_llm_pending_t   pend;  /* on the engine's active queue while it waits */
    unsigned                 finished:1, rerank:1, rank_head:1; /* rerank by the model's classifier head */
    llm_api_req              q;
    int                      n, n_started, n_done, in_flight;
    int                      redo;  /* below n_started, where inputs to start again (a failover) may be */
    int                      failovers;
    unsigned                 orphaned:1; /* its engine went away; waiting for one to go on on */
    int32_t                **ids;  /* [n] each malloc'd */
    size_t                  *n_ids;
    ngx_http_llm_emb_item_t *item;
    uint32_t                 n_embd, n_prompt;
    llm_shm_params           p;
    uint64_t                 tag;
    char                     model[256];
    ngx_event_t              timer;
    ngx_msec_t               start, request_timeout;
} ngx_http_llm_emb_ctx_t;

static void ngx_http_llm_emb_cleanup(void *data)
{
    ngx_http_llm_emb_ctx_t *ctx = data;
    ngx_http_llm_pending_remove(&ctx->pend);
    if (ctx->timer.timer_set) ngx_del_timer(&ctx->timer);
    if (!ctx->finished) {
        ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(ctx->r, ngx_http_llm_module);
        if (mcf->counters) (void)ngx_atomic_fetch_add(&mcf->counters->client_aborts, 1);
        ngx_log_error(NGX_LOG_INFO, ctx->r->connection->log, 0, "llm: client went away before its %s were ready; "
                      "cancelling them in the engine", ctx->rerank ? "document scores" : "embeddings");
    }
    for (int i = 0; ctx->item && i < ctx->n; i++) {
        /* releasing an unfinished request cancels it in the engine */
        if (ctx->item[i].started && ctx->eng->client) llm_client_release(ctx->eng->client, ctx->item[i].h);
        ctx->item[i].started = 0;
        free(ctx->item[i].vec);
    }
    for (int i = 0; ctx->ids && i < ctx->n; i++) free(ctx->ids[i]);
    free(ctx->ids);
    free(ctx->n_ids);
    llm_api_req_free(&ctx->q);
}

/* Ends the request with rc (a status, or what a send returned); ctx must not be touched afterwards. */
static void ngx_http_llm_emb_done(ngx_http_llm_emb_ctx_t *ctx, ngx_int_t rc)
{
    ngx_http_request_t *r = ctx->r;
    ngx_connection_t *c = r->connection;
    ctx->finished = 1;
    ngx_http_llm_pending_remove(&ctx->pend);
    if (ctx->timer.timer_set) ngx_del_timer(&ctx->timer);
    ngx_http_finalize_request(r, rc);
    ngx_http_run_posted_requests(c);
}

static void ngx_http_llm_emb_fail(ngx_http_llm_emb_ctx_t *ctx, int status, const char *code, const char *msg)
{
    ngx_http_llm_emb_done(ctx, ngx_http_llm_error(ctx->r, status, NULL, code, "%s", msg));
}

/* ---------------- the response ---------------- */

static u_char *ngx_http_llm_emb_floats(u_char *p, const float *v, int n)
{
    for (int i = 0; i < n; i++) {
        char num[32];
        /* %.9g: a float read back is the same float */
        int l = snprintf(num, sizeof num, "%s%.9g", i ? "," : "", (double)v[i]);
        p = ngx_cpymem(p, num, (size_t)l);
    }
    return p;
}

/* {"object":"list","data":[{"object":"embedding","index":i,"embedding":[...] or "<base64>"}],"model",...,
 * "usage":{"prompt_tokens","total_tokens"}}, each vector cut to `dimensions` and of unit length; Ollama's
 * /api/embed: {"model","embeddings":[[...],...],"total_duration","load_duration","prompt_eval_count"}; its older
 * /api/embeddings: {"embedding":[...]}, the vector as the engine pooled it (not made unit length, as Ollama's). */
static ngx_int_t ngx_http_llm_emb_respond(ngx_http_llm_emb_ctx_t *ctx)
{
    ngx_http_request_t *r = ctx->r;
    int ollama = ctx->q.api == LLM_API_OLLAMA_EMBED, legacy = ctx->q.api == LLM_API_OLLAMA_EMBEDDINGS;
    int d = ctx->q.dimensions ? ctx->q.dimensions : (int)ctx->n_embd;
    size_t per = ctx->q.base64 ? ((size_t)d * 4 + 2) / 3 * 4 + 2 : (size_t)d * 17;
    size_t cap = 256 + 6 * ngx_strlen(ctx->model) + (size_t)ctx->n * (per + 64); /* \uXXXX at worst */
    u_char *buf = ngx_pnalloc(r->pool, cap), *p = buf;
    float *v = ngx_palloc(r->pool, (size_t)d * sizeof(float));
    if (buf == NULL || v == NULL) return ngx_http_llm_error(r, 500, NULL, NULL, "out of memory");
    cJSON *model = cJSON_CreateString(ctx->model);
    char *ms = model ? cJSON_PrintUnformatted(model) : NULL;
    cJSON_Delete(model);
    if (ms == NULL) return ngx_http_llm_error(r, 500, NULL, NULL, "out of memory");
    if (legacy) p = ngx_cpymem(p, "{\"embedding\":", 13);
    else if (ollama) p = ngx_sprintf(p, "{\"model\":%s,\"embeddings\":[", ms);
    else p = ngx_cpymem(p, "{\"object\":\"list\",\"data\":[", 25);
    for (int i = 0; i < ctx->n; i++) {
        double ss = 0.0;
        for (int k = 0; k < d; k++) ss += (double)ctx->item[i].vec[k] * ctx->item[i].vec[k];
        float s = legacy ? 1.0f : ss > 0.0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
        for (int k = 0; k < d; k++) v[k] = ctx->item[i].vec[k] * s;
        if (ollama || legacy) {
            p = ngx_sprintf(p, "%s[", i ? "," : "");
            p = ngx_http_llm_emb_floats(p, v, d);
            *p++ = ']';
            continue;
        }
        p = ngx_sprintf(p, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", i);
        if (ctx->q.base64) { /* little-endian float32 bytes, as OpenAI's */
            ngx_str_t src = { (size_t)d * sizeof(float), (u_char *)v }, dst = { 0, p + 1 };
            *p = '"';
            ngx_encode_base64(&dst, &src);
            p += 1 + dst.len;
            *p++ = '"';
        } else {
            *p++ = '[';
            p = ngx_http_llm_emb_floats(p, v, d);
            *p++ = ']';
        }
        *p++ = '}';
    }
    if (legacy)
        p = ngx_cpymem(p, "}\n", 2);
    else if (ollama) /* the duration as the worker measured it, in ns */
        p = ngx_sprintf(p, "],\"total_duration\":%M,\"load_duration\":0,\"prompt_eval_count\":%uD}\n",
                        (ngx_msec_t)(ngx_current_msec - ctx->start) * 1000000, ctx->n_prompt);
    else
        p = ngx_sprintf(p, "],\"model\":%s,\"usage\":{\"prompt_tokens\":%uD,\"total_tokens\":%uD}}\n", ms,
                        ctx->n_prompt, ctx->n_prompt);
    cJSON_free(ms);
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    if (mcf->counters) (void)ngx_atomic_fetch_add(&mcf->counters->prompt_tokens, ctx->n_prompt);
    return ngx_http_llm_send_text(r, 200, "application/json", buf, (size_t)(p - buf));
}

/* {"id", "model", "results": [{"index", "relevance_score", "document": {"text"}?}, ...] by relevance (ties: the
 * documents' order), top_n of them, "usage"}. */
static ngx_int_t ngx_http_llm_rerank_respond(ngx_http_llm_emb_ctx_t *ctx)
{
    ngx_http_request_t *r = ctx->r;
    int *order = ngx_palloc(r->pool, (size_t)ctx->n * sizeof *order);
    if (order == NULL) return ngx_http_llm_error(r, 500, NULL, NULL, "out of memory");
    for (int i = 0; i < ctx->n; i++) { /* insertion by relevance, stable */
        int k = i;
        while (k > 0 && ctx->item[order[k - 1]].score < ctx->item[i].score) { order[k] = order[k - 1]; k--; }
        order[k] = i;
    }
    char id[40];
    ngx_snprintf((u_char *)id, sizeof id, "rerank-%016xL%Z", ctx->tag);
    cJSON *o = cJSON_CreateObject();
    cJSON *res = o && cJSON_AddStringToObject(o, "id", id) && cJSON_AddStringToObject(o, "model", ctx->model)
                 ? cJSON_AddArrayToObject(o, "results") : NULL;
    int top = ctx->q.top_n > 0 ? ctx->q.top_n : ctx->n, bad = res == NULL;
    for (int j = 0; j < top && !bad; j++) {
        const ngx_http_llm_emb_item_t *it = &ctx->item[order[j]];
        cJSON *x = cJSON_CreateObject(), *d = NULL;
        bad = x == NULL || !cJSON_AddNumberToObject(x, "index", order[j]) ||
              !cJSON_AddNumberToObject(x, "relevance_score", it->score) ||
              (ctx->q.return_documents && ((d = cJSON_AddObjectToObject(x, "document")) == NULL ||
                                          !cJSON_AddStringToObject(d, "text", ctx->q.batch[order[j]])));
        if (x != NULL) cJSON_AddItemToArray(res, x);
    }
    cJSON *u = o ? cJSON_CreateObject() : NULL;
    if (bad || u == NULL || !cJSON_AddNumberToObject(u, "prompt_tokens", ctx->n_prompt) ||
        !cJSON_AddNumberToObject(u, "total_tokens", ctx->n_prompt)) {
        cJSON_Delete(o);
        cJSON_Delete(u);
        return ngx_http_llm_error(r, 500, NULL, NULL, "out of memory");
    }
    cJSON_AddItemToObject(o, "usage", u);
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    if (mcf->counters) (void)ngx_atomic_fetch_add(&mcf->counters->prompt_tokens, ctx->n_prompt);
    return ngx_http_llm_send_cjson(r, 200, o);
}

/* ---------------- the engine ---------------- */

/* Starts inputs while the window has room: first those a failover left to start again, then the next ones.
 * 0; 1 when the engine has no slot now (tried again at the next wake-up or within a second); -1 with e filled
 * (nothing of this request in the engine: a full queue is a 429 then). */
static int ngx_http_llm_emb_start_more(ngx_http_llm_emb_ctx_t *ctx, llm_api_err *e)
{
    while (ctx->in_flight < NGX_LLM_EMBED_WINDOW) {
        while (ctx->redo < ctx->n_started && (ctx->item[ctx->redo].done || ctx->item[ctx->redo].started))
            ctx->redo++;
        int i = ctx->redo < ctx->n_started ? ctx->redo : ctx->n_started;
        if (i >= ctx->n) break;
        ngx_http_llm_emb_item_t *it = &ctx->item[i];
        int rc = llm_client_start(ctx->eng->client, ctx->ids[i], (uint32_t)ctx->n_ids[i], &ctx->p, ctx->tag, &it->h);
        if ((rc == LLM_SHM_E_NO_SLOT || rc == LLM_SHM_E_RING_FULL) && ctx->in_flight > 0) return 1;
        if (rc != LLM_SHM_OK) {
            ngx_http_llm_start_err(rc, e);
            return -1;
        }
        it->started = 1;
        if (i == ctx->n_started) ctx->n_started++;
        ctx->in_flight++;
    }
    return 0;
}

/* The request's engine went away (a crash, kill -9) before every input was done: those not done start again,
 * from the token ids kept for this, on a ready engine: another replica (llm_engine A B ...), or the same engine
 * once its supervisor has restarted it; those done are kept (nothing was sent yet). Once per request. 1 when
 * they have started (the request is on that engine's queue), -1 while no engine is ready (it waits on this
 * one's queue, stepped by its one-second check, until its timer), 0 when it cannot. */
static int ngx_http_llm_emb_failover(ngx_http_llm_emb_ctx_t *ctx)
{
    if (ctx->failovers > 0) return 0;
    ngx_http_llm_engine_t *old = ctx->eng;
    if (!ctx->orphaned) { /* (the old requests are gone: releasing only forgets the handles) */
        for (int i = 0; i < ctx->n_started; i++) {
            if (ctx->item[i].started && old->client) llm_client_release(old->client, ctx->item[i].h);
            ctx->item[i].started = 0;
        }
        ctx->in_flight = 0;
        ctx->redo = 0;
        ctx->orphaned = 1;
    }
    llm_api_err e;
    ngx_http_llm_engine_t *eng = ngx_http_llm_pick_engine(ctx->r, NULL, 0, NULL);
    ngx_http_llm_log_t *log = ngx_http_llm_log(ctx->r);
    if (ngx_http_llm_engine_ready(eng, &e) != LLM_SHM_OK) {
        if (log != NULL) log->eng = old;
        return -1;
    }
    ngx_http_llm_pending_remove(&ctx->pend);
    ctx->eng = eng;
    ctx->failovers++;
    ctx->orphaned = 0;
    if (ngx_http_llm_emb_start_more(ctx, &e) < 0) return 0; /* (the cleanup releases those started) */
    ngx_log_error(NGX_LOG_WARN, ctx->r->connection->log, 0,
                  "llm: engine \"%V\" went away with %d of the request's %d %s to do; they go on on \"%V\"%s",
                  &old->name, ctx->n - ctx->n_done, ctx->n, ctx->rerank ? "documents" : "inputs", &eng->name,
                  eng == old ? " (restarted)" : "");
    ngx_http_llm_pending_add(eng, &ctx->pend);
    return 1;
}

/* Takes what the engine finished; answers when every input is done. 1 while it goes on. */
static int ngx_http_llm_emb_step(void *data)
{
    ngx_http_llm_emb_ctx_t *ctx = data;
    if (ctx->orphaned) { /* waiting for an engine to go on on */
        int rc = ngx_http_llm_emb_failover(ctx);
        if (rc != 0) return rc < 0;
        ngx_http_llm_emb_fail(ctx, 503, "engine_restarted", "the engine stopped or restarted during the request");
        return 0;
    }
    llm_client *c = ctx->eng->client;
    for (int i = 0; i < ctx->n_started; i++) {
        ngx_http_llm_emb_item_t *it = &ctx->item[i];
        if (it->done || !it->started) continue; /* (not started: after a failover, for start_more) */
        llm_shm_token tk[1];
        llm_req_status st;
        int k = llm_client_read(c, it->h, tk, 1, &st);
        if (k < 0) {
            int f = k == LLM_SHM_E_ENGINE_GONE ? ngx_http_llm_emb_failover(ctx) : 0;
            if (f != 0) return f < 0; /* started again elsewhere (0), or waiting here (1) */
            ngx_http_llm_emb_fail(ctx, 503, "engine_restarted", k == LLM_SHM_E_ENGINE_GONE
                                  ? "the engine stopped or restarted during the request" : llm_shm_strerror(k));
            return 0;
        }
        if (k > 0 && ctx->rerank && !ctx->rank_head && !it->scored && tk[0].n_top == 2 &&
            tk[0].top[0].id == ctx->p.score_ids[0] &&
            tk[0].top[1].id == ctx->p.score_ids[1]) { /* P(yes) / (P(yes) + P(no)) */
            it->score = 1.0 / (1.0 + exp((double)tk[0].top[1].logprob - (double)tk[0].top[0].logprob));
            it->scored = 1;
        }
        if (!st.done) continue;
        if (st.finish == LLM_FINISH_ERROR && st.error == LLM_SHM_E_QUEUE_FULL) {
            ngx_http_llm_emb_fail(ctx, 429, "queue_full", "the engine's request queue is full; retry later");
            return 0;
        }
        float head[2]; /* the classifier head's "yes" and "no" outputs, or its one output */
        int nh = (int)ctx->n_embd;
        if (ctx->rank_head && st.finish == LLM_FINISH_STOP && llm_client_result(c, it->h, head, (uint32_t)nh) == nh) {
            it->score = 1.0 / (1.0 + exp(nh == 2 ? (double)head[1] - (double)head[0] : -(double)head[0]));
            it->scored = 1;
        }
        if (ctx->rerank && !it->scored) {
            char m[160];
            ngx_snprintf((u_char *)m, sizeof m, "the engine gave no score for document %d (finish %d, code %d)%Z",
                         i, (int)st.finish, (int)st.error);
            ngx_http_llm_emb_fail(ctx, 503, "engine_error", m);
            return 0;
        }
        it->vec = ctx->rerank ? NULL : malloc(ctx->n_embd * sizeof(float));
        int got = !ctx->rerank && st.finish == LLM_FINISH_STOP && it->vec
                  ? llm_client_result(c, it->h, it->vec, ctx->n_embd) : -1;
        if (!ctx->rerank && got != (int)ctx->n_embd) {
            char m[160];
            ngx_snprintf((u_char *)m, sizeof m, "the engine gave no embedding for input %d (finish %d, code %d)%Z",
                         i, (int)st.finish, (int)st.error);
            ngx_http_llm_emb_fail(ctx, 503, "engine_error", m);
            return 0;
        }
        llm_client_release(c, it->h); /* its slot goes to the next input */
        it->started = 0;
        it->done = 1;
        ctx->n_done++;
        ctx->in_flight--;
    }
    if (ctx->n_done == ctx->n) {
        ngx_http_llm_emb_done(ctx, ctx->rerank ? ngx_http_llm_rerank_respond(ctx) : ngx_http_llm_emb_respond(ctx));
        return 0;
    }
    llm_api_err e;
    if (ngx_http_llm_emb_start_more(ctx, &e) >= 0) return 1;
    ngx_http_llm_emb_done(ctx, ngx_http_llm_send_error(ctx->r, &e));
    return 0;
}

/* llm_queue_timeout until the first input is done (the engine took the request), llm_request_timeout in all. */
static void ngx_http_llm_emb_timeout(ngx_event_t *ev)
{
    ngx_http_llm_emb_ctx_t *ctx = ev->data;
    ngx_msec_t elapsed = ngx_current_msec - ctx->start;
    if (ctx->n_done > 0 && elapsed < ctx->request_timeout) {
        ngx_add_timer(&ctx->timer, ctx->request_timeout - elapsed);
        return;
    }
    ngx_http_llm_emb_fail(ctx, 504, "timeout", ctx->n_done > 0 ? "the request timed out (llm_request_timeout)"
                                                            : "the request timed out waiting for the engine "
                                                              "(llm_queue_timeout)");
}

/* ---------------- start ---------------- */

static const char RERANK_SYSTEM[] = "Judge whether the Document meets the requirements based on the Query and the "
                                    "Instruct provided. Note that the answer can only be \"yes\" or \"no\".";
static const char RERANK_INSTRUCT[] = "Given a web search query, retrieve relevant passages that answer the query";

/* A decoder reranker's judging prompt for one document (Qwen3-Reranker's chat: the instruction, query and
 * document in the user's turn, answered at once, no thinking) as token ids. 0, or -1 with e set. */
static int ngx_http_llm_judge_encode(ngx_http_llm_emb_ctx_t *ctx, const char *instr, const char *doc, size_t doc_len,
                                     int32_t **ids, size_t *n, llm_api_err *e)
{
    llm_api_req one;
    llm_api_prompt_at(&ctx->q, 0, &one);
    size_t len = strlen(instr) + strlen(ctx->q.query) + doc_len + 48;
    u_char *c = ngx_pnalloc(ctx->r->pool, len);
    if (c == NULL) { llm_api_seterr(e, 500, NULL, NULL, "out of memory"); return -1; }
    ngx_snprintf(c, len, "<Instruct>: %s\n<Query>: %s\n<Document>: %*s%Z", instr, ctx->q.query, doc_len, doc);
    llm_chat_msg judge[2] = { { .role = "system", .content = RERANK_SYSTEM },
                              { .role = "user", .content = (const char *)c } };
    one.kind = LLM_API_CHAT;
    one.prompt = NULL;
    one.ids = NULL;
    one.msgs = judge;
    one.n_msgs = 2;
    one.add_generation_prompt = 1;
    one.enable_thinking = 0;
    one.tool_mode = 0;
    free(*ids);
    *ids = NULL;
    return ngx_http_llm_encode_prompt(ctx->r, &one, ids, n, e) != 0 ? -1 : 0;
}

/* "truncate": a judging prompt over the limit, its document cut by the tokens it is over (and a few more where
 * the cut text tokenizes longer at the seam). 0, or -1 with e set (the prompt is too long without it). */
static int ngx_http_llm_judge_truncate(ngx_http_llm_emb_ctx_t *ctx, llm_tokenizer *tok, const char *instr,
                                       const char *doc, size_t doc_len, size_t limit, int32_t **ids, size_t *n,
                                       llm_api_err *e)
{
    int32_t *d = NULL;
    int nd = llm_tok_encode(tok, doc, doc_len, 0, &d), rc = 0;
    for (int slack = 2; rc == 0 && *n > limit && slack <= 64; slack *= 4) {
        long keep = (long)nd - (long)(*n - limit) - slack;
        char *cut = keep > 0 ? llm_tok_decode_ex(tok, d, (size_t)keep, 0) : NULL;
        if (cut == NULL)
            break;
        rc = ngx_http_llm_judge_encode(ctx, instr, cut, strlen(cut), ids, n, e);
        free(cut);
    }
    free(d);
    return rc;
}

/* Token ids of every input (text: BOS as the tokenizer says, EOS where it asks for one; rerank: a document's
 * judging prompt, or a cross-encoder's pair), each checked against the engine's context; with "truncate", an
 * input over it is cut to fit instead (its end: a text's closing EOS, a pair's last separator kept; a
 * judging prompt's document shortened). NGX_OK, or NGX_DECLINED with e set. */
static ngx_int_t ngx_http_llm_emb_encode(ngx_http_llm_emb_ctx_t *ctx, llm_tokenizer *tok, llm_api_err *e)
{
    const llm_shm_map *m = llm_client_map(ctx->eng->client);
    uint32_t ctx_len = m->hdr->model.ctx_len;
    size_t limit = ctx_len - 1 < m->hdr->caps.max_prompt ? ctx_len - 1 : m->hdr->caps.max_prompt;
    int eos = llm_tok_add_eos(tok) ? llm_tok_eos(tok) : -1;
    const char *what = ctx->rerank ? "document" : "input", *instr = ctx->q.instruction ? ctx->q.instruction
                                                                                      : RERANK_INSTRUCT;
    for (int i = 0; i < ctx->n; i++) {
        llm_api_req one;
        llm_api_prompt_at(&ctx->q, i, &one);
        int text = one.ids == NULL && !ctx->rerank, keep_tail = 0, b_at = 0;
        one.kind = LLM_API_COMPLETIONS; /* a text as a completion's prompt is encoded */
        if (ctx->rerank && m->hdr->model.encoder) {
            /* the pair as the model's tokenizer writes one (BERT's [SEP], RoBERTa's </s></s> between) */
            int n = llm_tok_encode_pair(tok, ctx->q.query, strlen(ctx->q.query), one.prompt, one.prompt_len,
                                        &ctx->ids[i], &b_at);
            if (n < 0) {
                llm_api_seterr(e, 500, NULL, NULL, "out of memory");
                return NGX_DECLINED;
            }
            ctx->n_ids[i] = (size_t)n;
            keep_tail = 1;
        } else if (ctx->rerank) {
            if (ngx_http_llm_judge_encode(ctx, instr, one.prompt, one.prompt_len, &ctx->ids[i], &ctx->n_ids[i], e))
                goto fail;
            if (ctx->q.truncate && ctx->n_ids[i] > limit &&
                ngx_http_llm_judge_truncate(ctx, tok, instr, one.prompt, one.prompt_len, limit, &ctx->ids[i],
                                            &ctx->n_ids[i], e))
                goto fail;
        } else if (ngx_http_llm_encode_prompt(ctx->r, &one, &ctx->ids[i], &ctx->n_ids[i], e)) {
            goto fail;
        }
        if (text && eos >= 0) {
            int32_t *ids = realloc(ctx->ids[i], (ctx->n_ids[i] + 1) * sizeof *ids);
            if (ids == NULL) {
                llm_api_seterr(e, 500, NULL, NULL, "out of memory");
                return NGX_DECLINED;
            }
            ctx->ids[i] = ids;
            ids[ctx->n_ids[i]++] = eos;
            keep_tail = 1;
        }
        /* truncate: the first tokens that fit, the closing EOS / separator kept (never into a pair's query) */
        if (ctx->q.truncate && ctx->n_ids[i] > limit && limit >= 2 && (size_t)b_at < limit - keep_tail) {
            if (keep_tail)
                ctx->ids[i][limit - 1] = ctx->ids[i][ctx->n_ids[i] - 1];
            ctx->n_ids[i] = limit;
        }
        if (ctx->n_ids[i] >= ctx_len || ctx->n_ids[i] > m->hdr->caps.max_prompt) {
            llm_api_seterr(e, 400, ctx->rerank ? "documents" : "input", "context_length_exceeded",
                           "%s %d is %zu tokens%s; this model's context length is %u tokens%s", what, i,
                           ctx->n_ids[i],
                           !ctx->rerank                  ? ""
                           : m->hdr->model.encoder ? " with the query"
                                                   : " with the query and the judging prompt",
                           ctx_len,
                           ctx->q.truncate ? " (too long even cut: the query is)" : " (\"truncate\": true cuts it)");
            return NGX_DECLINED;
        }
        ctx->n_prompt += (uint32_t)ctx->n_ids[i];
        continue;
    fail: {
        size_t l = ngx_strlen(e->message);
        if (ctx->n > 1) ngx_snprintf((u_char *)e->message + l, sizeof e->message - l - 1, " (%s %d)%Z", what, i);
        ngx_cpystrn((u_char *)e->param, (u_char *)(ctx->rerank ? "documents" : "input"), sizeof e->param);
        return NGX_DECLINED;
    }
    }
    return NGX_OK;
}

static ngx_int_t ngx_http_llm_emb_start(ngx_http_request_t *r, llm_api_req *q, int rerank)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    llm_api_err e;
    ngx_http_llm_emb_ctx_t *ctx = ngx_pcalloc(r->pool, sizeof(*ctx));
    ngx_pool_cleanup_t *cln = ctx ? ngx_pool_cleanup_add(r->pool, 0) : NULL;
    if (cln == NULL) { llm_api_req_free(q); return NGX_HTTP_INTERNAL_SERVER_ERROR; }
    ctx->r = r;
    ctx->q = *q; /* ctx owns the request from here; the cleanup frees it */
    ctx->eng = ngx_http_llm_pick_engine(r, NULL, 0, NULL);
    ctx->finished = 1; /* until the engine has it, an early return is not an abort */
    ctx->rerank = rerank != 0;
    ctx->n = ctx->q.n_prompts > 1 ? ctx->q.n_prompts : 1;
    cln->handler = ngx_http_llm_emb_cleanup;
    cln->data = ctx;
    ctx->item = ngx_pcalloc(r->pool, (size_t)ctx->n * sizeof *ctx->item);
    ctx->ids = calloc((size_t)ctx->n, sizeof *ctx->ids);
    ctx->n_ids = calloc((size_t)ctx->n, sizeof *ctx->n_ids);
    if (ctx->item == NULL || ctx->ids == NULL || ctx->n_ids == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    if (lcf->tok == NULL || lcf->tok->tok == NULL)
        return ngx_http_llm_error(r, 500, NULL, NULL, "no tokenizer configured (llm_model_path)");
    if (ngx_http_llm_engine_ready(ctx->eng, &e) != LLM_SHM_OK) return ngx_http_llm_send_error(r, &e);
    const llm_shm_map *m = llm_client_map(ctx->eng->client);
    llm_shm_params_defaults(&ctx->p);
    if (rerank && m->hdr->model.encoder && m->hdr->model.n_cls == 0)
        return ngx_http_llm_error(r, 400, NULL, "rerank_unsupported", "this model is an embedding model (BERT, "
                                  "XLM-RoBERTa, EmbeddingGemma), not a reranker: /v1/rerank needs a reranker");
    if (rerank && (m->hdr->model.n_cls == 0 || m->hdr->model.n_cls > 2)) {
        int32_t yes = llm_tok_find(lcf->tok->tok, "yes"), no = llm_tok_find(lcf->tok->tok, "no");
        if (yes < 0 || no < 0)
            return ngx_http_llm_error(r, 400, NULL, "rerank_unsupported", "this model's vocabulary has no \"yes\" "
                                      "and \"no\" tokens, which /v1/rerank scores (a Qwen3-Reranker-style model)");
        if (m->hdr->caps.max_top < 2)
            return ngx_http_llm_error(r, 500, NULL, "rerank_unavailable", "the engine reports no logprobs");
        ctx->p.n_score = 2;
        ctx->p.score_ids[0] = yes;
        ctx->p.score_ids[1] = no;
    } else if (rerank) { /* a reranker GGUF's classifier head ("yes", "no" rows, or one) on the last hidden state */
        ctx->rank_head = 1;
        ctx->n_embd = m->hdr->model.n_cls;
        ctx->p.flags = LLM_PARAM_EMBED | LLM_PARAM_RANK;
    } else {
        ctx->n_embd = m->hdr->model.n_embd;
        if (ctx->n_embd == 0) /* an engine that says nothing of a hidden size (t/echo_engine.c) */
            return ngx_http_llm_error(r, 400, NULL, "embeddings_unsupported", "the engine \"%V\" serves no embeddings",
                                      &ctx->eng->name);
        if (ctx->n_embd > LLM_SHM_RESULT_MAX(m->hdr))
            return ngx_http_llm_error(r, 500, NULL, "embeddings_unavailable",
                                      "an embedding of %uD floats does not fit the engine's result area of %uz floats "
                                      "(serve --stream-cap)", ctx->n_embd, (size_t)LLM_SHM_RESULT_MAX(m->hdr));
        if (ctx->q.dimensions > (int)ctx->n_embd)
            return ngx_http_llm_error(r, 400, "dimensions", "invalid_value",
                                      "dimensions is %d; this model's embeddings have %uD", ctx->q.dimensions,
                                      ctx->n_embd);
        ctx->p.flags = LLM_PARAM_EMBED;
    }
    if (ngx_http_llm_emb_encode(ctx, lcf->tok->tok, &e) != NGX_OK) return ngx_http_llm_send_error(r, &e);
    ctx->p.max_tokens = 1;
    ctx->p.priority = (int32_t)lcf->priority;
    static uint64_t serial;
    ctx->tag = ((uint64_t)ngx_pid << 40) ^ ++serial ^ (1ull << 39);
    ngx_http_llm_model_id(r, ctx->model, sizeof ctx->model);
    ngx_http_llm_log_t *log = ngx_http_llm_log(r);
    if (log == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    log->model = ctx->model;
    log->prompt_tokens = ctx->n_prompt; /* (an embedding generates nothing) */
    log->started = 1;
    if (ngx_http_llm_emb_start_more(ctx, &e) < 0) return ngx_http_llm_send_error(r, &e);
    ctx->finished = 0;
    ctx->timer.handler = ngx_http_llm_emb_timeout;
    ctx->timer.data = ctx;
    ctx->timer.log = r->connection->log;
    ctx->start = ngx_current_msec;
    ctx->request_timeout = lcf->request_timeout;
    ngx_add_timer(&ctx->timer, ngx_min(lcf->queue_timeout, lcf->request_timeout));
    /* a client that goes away finalizes the request; the cleanup cancels what the engine still holds */
    r->read_event_handler = ngx_http_test_reading;
    ctx->pend.step = ngx_http_llm_emb_step;
    ctx->pend.ctx = ctx;
    ngx_http_llm_pending_add(ctx->eng, &ctx->pend);
    return NGX_DONE;
}

ngx_int_t ngx_http_llm_embeddings(ngx_http_request_t *r, llm_api_req *q) { return ngx_http_llm_emb_start(r, q, 0); }

ngx_int_t ngx_http_llm_rerank(ngx_http_request_t *r, llm_api_req *q) { return ngx_http_llm_emb_start(r, q, 1); }
