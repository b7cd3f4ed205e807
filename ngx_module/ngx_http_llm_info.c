/* Endpoints that need no generation: /health, /v1/models, /tokenize,
 * /detokenize; and prompt encoding (text or chat template). /metrics: ngx_http_llm_metrics.c. */
#include "ngx_http_llm_module.h"
#include "llm_tools.h"
#include "ngx_http_llm_format.h"

static llm_tokenizer *ngx_http_llm_tok(ngx_http_request_t *r)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    return lcf->tok ? lcf->tok->tok : NULL;
}

/* One engine's readiness into o: status (ok, starting, unavailable), and the model and generation when up, or
 * the reason. 1 when ready. */
static int ngx_http_llm_engine_health(ngx_http_llm_engine_t *eng, cJSON *o)
{
    llm_api_err e;
    int rc = ngx_http_llm_engine_ready(eng, &e);
    if (rc == LLM_SHM_OK) {
        const llm_shm_map *m = llm_client_map(eng->client);
        cJSON_AddStringToObject(o, "status", "ok");
        cJSON_AddStringToObject(o, "model", m->hdr->model.name);
        char gen[24];
        snprintf(gen, sizeof gen, "%016llx", (unsigned long long)m->hdr->generation);
        cJSON_AddStringToObject(o, "generation", gen); /* 64-bit: a string keeps every bit */
        return 1;
    }
    cJSON_AddStringToObject(o, "status", rc == LLM_SHM_E_NOT_READY ? "starting" : "unavailable");
    cJSON_AddStringToObject(o, "reason", llm_shm_strerror(rc));
    return 0;
}

/* A model's readiness into o: its engine's; with replicas, the first ready one's, "degraded" while some are
 * down, and each under "engines" by name. 1 when it can serve (a replica is ready). */
static int ngx_http_llm_health_of(ngx_http_request_t *r, ngx_http_llm_loc_conf_t *lcf, cJSON *o)
{
    int up = ngx_http_llm_engine_health(ngx_http_llm_lcf_engine(r, lcf), o);
    if (lcf->n_replicas <= 1) return up;
    cJSON *list = cJSON_AddArrayToObject(o, "engines");
    ngx_uint_t n_up = 0;
    for (ngx_uint_t i = 0; list != NULL && i < lcf->n_replicas; i++) {
        ngx_http_llm_engine_t *eng = ngx_http_llm_replica(r, lcf, i);
        cJSON *one = cJSON_CreateObject();
        if (one == NULL) break;
        char name[LLM_SHM_MAX_NAME];
        ngx_cpystrn((u_char *)name, eng->name.data, ngx_min(sizeof name, eng->name.len + 1));
        cJSON_AddStringToObject(one, "engine", name);
        n_up += ngx_http_llm_engine_health(eng, one);
        cJSON_AddItemToArray(list, one);
    }
    if (up && n_up < lcf->n_replicas) cJSON_SetValuestring(cJSON_GetObjectItem(o, "status"), "degraded");
    return up;
}

/* 200 when the engine is ready, else 503. With llm_models: every model's engine, each under "models" by its
 * id; 200 only when all are ready. */
ngx_int_t ngx_http_llm_health(ngx_http_request_t *r)
{
    ngx_http_llm_loc_conf_t *lcfs[NGX_LLM_MAX_ROUTES + 1];
    ngx_uint_t n = ngx_http_llm_served(r, lcfs);
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    int ready = ngx_http_llm_health_of(r, lcfs[0], o);
    if (n > 1) {
        cJSON *models = cJSON_AddArrayToObject(o, "models");
        for (ngx_uint_t i = 0; models != NULL && i < n; i++) {
            char buf[256];
            cJSON *one = cJSON_CreateObject();
            if (one == NULL) break;
            cJSON_AddStringToObject(one, "id", ngx_http_llm_lcf_model_id(lcfs[i], buf, sizeof buf));
            ready &= i == 0 ? 1 : ngx_http_llm_health_of(r, lcfs[i], one);
            if (i == 0) cJSON_AddStringToObject(one, "status", cJSON_GetStringValue(cJSON_GetObjectItem(o, "status")));
            cJSON_AddItemToArray(models, one);
        }
        if (!ready) cJSON_SetValuestring(cJSON_GetObjectItem(o, "status"), "degraded");
    }
    return ngx_http_llm_send_cjson(r, ready ? 200 : 503, o);
}

/* Context length of lcf's engine: from the engine when attached, else unknown (0). */
static uint32_t ngx_http_llm_lcf_ctx_len(ngx_http_request_t *r, ngx_http_llm_loc_conf_t *lcf)
{
    ngx_http_llm_engine_t *eng = ngx_http_llm_lcf_engine(r, lcf);
    const llm_shm_map *m = eng->client ? llm_client_map(eng->client) : NULL;
    return m ? m->hdr->model.ctx_len : 0;
}

static uint32_t ngx_http_llm_ctx_len(ngx_http_request_t *r)
{
    return ngx_http_llm_lcf_ctx_len(r, ngx_http_get_module_loc_conf(r, ngx_http_llm_module));
}

/* s as a NUL-terminated string in the request's pool, or NULL. */
static char *ngx_http_llm_cstr(ngx_http_request_t *r, const ngx_str_t *s)
{
    char *c = ngx_pnalloc(r->pool, s->len + 1);
    if (c != NULL) *(char *)ngx_cpymem(c, s->data, s->len) = 0;
    return c;
}

/* The model object of name, served by lcf's engine. */
static cJSON *ngx_http_llm_model_obj(ngx_http_request_t *r, ngx_http_llm_loc_conf_t *lcf, const char *id)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    ngx_http_llm_engine_t *eng = ngx_http_llm_lcf_engine(r, lcf);
    if (eng->client) (void)llm_client_attach(eng->client); /* for max_model_len; absence is fine */
    cJSON *m = cJSON_CreateObject();
    if (m == NULL) return NULL;
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)mcf->started);
    cJSON_AddStringToObject(m, "owned_by", "ngx_llm");
    uint32_t ctx = ngx_http_llm_lcf_ctx_len(r, lcf);
    if (ctx) cJSON_AddNumberToObject(m, "max_model_len", ctx);
    return m;
}

ngx_int_t ngx_http_llm_models(ngx_http_request_t *r, ngx_str_t *want)
{
    char buf[256];
    if (want) {
        ngx_http_llm_loc_conf_t *lcf = want->len && !(want->len == 1 && want->data[0] == '*')
                                     ? ngx_http_llm_find_model(r, want->data, want->len) : NULL;
        char *name = lcf ? ngx_http_llm_cstr(r, want) : NULL;
        if (lcf == NULL) return ngx_http_llm_error(r, 404, "model", "model_not_found", "The model '%V' does not exist", want);
        if (name == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
        return ngx_http_llm_send_cjson(r, 200, ngx_http_llm_model_obj(r, lcf, name));
    }
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    if (data == NULL) { cJSON_Delete(o); return NGX_HTTP_INTERNAL_SERVER_ERROR; }
    /* every model served here (this location's, then its llm_models'), each with its aliases as models of their
     * own ("*" is not a name) */
    ngx_http_llm_loc_conf_t *lcfs[NGX_LLM_MAX_ROUTES + 1];
    ngx_uint_t n = ngx_http_llm_served(r, lcfs);
    for (ngx_uint_t k = 0; k < n; k++) {
        cJSON *m = ngx_http_llm_model_obj(r, lcfs[k], ngx_http_llm_lcf_model_id(lcfs[k], buf, sizeof buf));
        if (m == NULL) { cJSON_Delete(o); return NGX_HTTP_INTERNAL_SERVER_ERROR; }
        cJSON_AddItemToArray(data, m);
        ngx_str_t *a = lcfs[k]->model_aliases ? lcfs[k]->model_aliases->elts : NULL;
        for (ngx_uint_t i = 0; a != NULL && i < lcfs[k]->model_aliases->nelts; i++) {
            if (a[i].len == 1 && a[i].data[0] == '*') continue;
            char *name = ngx_http_llm_cstr(r, &a[i]);
            if (name == NULL) { cJSON_Delete(o); return NGX_HTTP_INTERNAL_SERVER_ERROR; }
            cJSON_AddItemToArray(data, ngx_http_llm_model_obj(r, lcfs[k], name));
        }
    }
    return ngx_http_llm_send_cjson(r, 200, o);
}

/* Encodes plain text without turning special-token text into control ids. */
static int encode_text(llm_tokenizer *tok, const char *s, size_t len, int flags, int32_t **ids, size_t *n, size_t *cap)
{
    int32_t *t = NULL;
    int k = llm_tok_encode(tok, s, len, flags, &t);
    if (k < 0) return -1;
    if (*n + (size_t)k > *cap) {
        size_t nc = (*cap ? *cap : 64);
        while (nc < *n + (size_t)k) nc *= 2;
        int32_t *ni = realloc(*ids, nc * sizeof *ni);
        if (ni == NULL) { free(t); return -1; }
        *ids = ni;
        *cap = nc;
    }
    if (k) memcpy(*ids + *n, t, (size_t)k * sizeof *t);
    *n += (size_t)k;
    free(t);
    return 0;
}

int ngx_http_llm_encode_prompt(ngx_http_request_t *r, llm_api_req *q, int32_t **ids, size_t *n, llm_api_err *e)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    llm_tokenizer *tok = ngx_http_llm_tok(r);
    size_t cap = 0;
    *ids = NULL;
    *n = 0;
    if (tok == NULL) { llm_api_seterr(e, 500, NULL, NULL, "no tokenizer configured (llm_model_path)"); return -1; }
    if (q->ids) { /* token-id prompt: check the range */
        int vocab = llm_tok_vocab_size(tok);
        for (size_t i = 0; i < q->n_ids; i++)
            if (q->ids[i] >= vocab) {
                llm_api_seterr(e, 400, q->kind == LLM_API_DETOKENIZE ? "tokens" : "prompt", "invalid_value",
                               "token id %d at index %zu is outside the vocabulary (size %d)", (int)q->ids[i], i, vocab);
                return -1;
            }
        *ids = malloc((q->n_ids + 1) * sizeof **ids);
        if (*ids == NULL) goto oom;
        memcpy(*ids, q->ids, q->n_ids * sizeof **ids);
        *n = q->n_ids;
        return 0;
    }
    if (q->msgs) {
        llm_chat_format f = lcf->chat_format ? (llm_chat_format)lcf->chat_format : lcf->tok->chat;
        llm_chat_out out;
        llm_err err = { "" };
        /* the tools go into the prompt with today's date as Llama 3.2's and Granite 3.3's templates write it (and
         * SmolLM3's its system turn) */
        char date[32], date_long[48];
        time_t now = ngx_time();
        struct tm tm;
        ngx_libc_localtime(now, &tm);
        strftime(date, sizeof date, "%d %b %Y", &tm);
        strftime(date_long, sizeof date_long, "%B %d, %Y", &tm);
        llm_chat_tools tools = { q->tool_defs, date,
                                 llm_tools_prompt_opens_call(q), date_long };
        /* a template's own system message when the conversation has none, as it renders: a ChatML template's
         * (Qwen 2.5's), Granite's dated one (with tools Granite's tool turn is the renderer's) */
        const llm_chat_msg *msgs = q->msgs;
        size_t n_msgs = q->n_msgs;
        const char *own = f == LLM_CHAT_CHATML ? lcf->tok->default_system : NULL;
        char *granite = NULL;
        if (f == LLM_CHAT_GRANITE && lcf->tok->granite_system && q->tool_mode == LLM_TOOLS_OFF &&
            (own = granite = llm_chat_granite_system_text(date_long)) == NULL)
            goto oom;
        if (own != NULL && (n_msgs == 0 || strcmp(msgs[0].role, "system"))) {
            llm_chat_msg *m = ngx_palloc(r->pool, (n_msgs + 1) * sizeof *m);
            char *text = m ? ngx_pnalloc(r->pool, strlen(own) + 1) : NULL;
            if (text == NULL) { free(granite); goto oom; }
            ngx_memcpy(text, own, strlen(own) + 1);
            m[0] = (llm_chat_msg){ .role = "system", .content = text };
            ngx_memcpy(m + 1, msgs, n_msgs * sizeof *m);
            msgs = m;
            n_msgs++;
        }
        free(granite);
        char date_dmy[48], date_iso[32];
        strftime(date_dmy, sizeof date_dmy, "%d %B %Y", &tm);
        strftime(date_iso, sizeof date_iso, "%Y-%m-%d", &tm);
        llm_chat_vars vars = { .date_dmy = date_dmy, .no_think = q->enable_thinking == 0,
                               .think = q->enable_thinking == 1, .bos = lcf->tok->bos_text,
                               .eos = lcf->tok->eos_text,
                               .thinking_budget = q->thinking_budget > 0 ? q->thinking_budget : 0,
                               .date_iso = date_iso, .reasoning_effort = q->reasoning_effort };
        if (llm_chat_render_ex(f, msgs, n_msgs, q->tool_mode != LLM_TOOLS_OFF ? &tools : NULL, &vars,
                               q->add_generation_prompt, &out, &err)) {
            llm_api_seterr(e, 400, "messages", "invalid_value", "%s", err.msg);
            return -1;
        }
        /* Qwen 3's enable_thinking false (a call the prompt opened is answered at once anyway), whether or not
         * llm_reasoning splits the answers (SmolLM3's, EXAONE 4's, Seed-OSS's and GLM-4.5's templates write their
         * own; DeepSeek's have no switch) */
        if (lcf->tok->think && q->enable_thinking == 0 && q->add_generation_prompt && !tools.open_call &&
            f != LLM_CHAT_SMOLLM3 && f != LLM_CHAT_DEEPSEEK3 && f != LLM_CHAT_DEEPSEEK_R1 && f != LLM_CHAT_EXAONE4 &&
            f != LLM_CHAT_SEED_OSS && f != LLM_CHAT_GLM45 && llm_chat_no_think(&out)) {
            llm_chat_out_free(&out);
            llm_api_seterr(e, 500, NULL, NULL, "out of memory");
            return -1;
        }
        /* Control tokens the vocabulary lacks (ChatML markers on a Llama 2 model) become
         * text, merged with the text around them so it is encoded as one piece. */
        ngx_http_llm_text_t pend = { NULL, 0, 0 };
        int bad = 0;
        for (size_t i = 0; i < out.n && !bad; i++) {
            llm_chat_seg *s = &out.seg[i];
            int id = s->special ? llm_tok_find(tok, s->text) : -1;
            if (id < 0) { bad = ngx_http_llm_text_append(&pend, s->text, s->len); continue; }
            if (pend.len) {
                bad = encode_text(tok, pend.data, pend.len, 0, ids, n, &cap);
                pend.len = 0;
            }
            if (!bad && *n + 1 > cap) {
                int32_t *ni = realloc(*ids, (cap = cap * 2 + 16) * sizeof *ni);
                if (ni == NULL) bad = -1; else *ids = ni;
            }
            if (!bad) (*ids)[(*n)++] = id;
        }
        if (!bad && pend.len) bad = encode_text(tok, pend.data, pend.len, 0, ids, n, &cap);
        free(pend.data);
        llm_chat_out_free(&out);
        if (bad) goto oom;
        return 0;
    }
    if (q->infill) { /* llama.cpp's /infill: the other files, prefix, suffix, then the middle */
        int32_t fim[3];
        if (llm_tok_fim_ids(tok, fim) != 0) {
            llm_api_seterr(e, 400, "input_prefix", "invalid_value",
                           "/infill: this model has no fill-in-the-middle tokens (<|fim_prefix|> ...)");
            return -1;
        }
        int nf = q->infill_extra ? cJSON_GetArraySize(q->infill_extra) : 0, k = 0;
        llm_tok_file *files = nf > 0 ? ngx_palloc(r->pool, (size_t)nf * sizeof *files) : NULL;
        if (nf > 0 && files == NULL) goto oom;
        const cJSON *c;
        cJSON_ArrayForEach(c, q->infill_extra) {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "filename");
            const char *name = cJSON_IsString(fn) ? fn->valuestring : "tmp"; /* (llama.cpp's name for none) */
            const char *text = cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring;
            files[k++] = (llm_tok_file){ name, text, strlen(name), strlen(text) };
        }
        /* what fits (llama.cpp trims the files and the prefix / suffix to the context too): the context less the
         * answer's room (its max tokens, at most half of it), at most what a request may hold */
        size_t budget = 0;
        ngx_http_llm_engine_t *eng = ngx_http_llm_engine(r);
        if (eng->client != NULL && llm_client_attach(eng->client) == LLM_SHM_OK) {
            const llm_shm_map *mp = llm_client_map(eng->client);
            size_t cl = mp->hdr->model.ctx_len;
            size_t want = (size_t)ngx_http_llm_answer_tokens(lcf, q);
            budget = cl - ngx_min(want, cl / 2);
            if (budget > mp->hdr->caps.max_prompt) budget = mp->hdr->caps.max_prompt;
        }
        int m = llm_tok_encode_infill(tok, q->infill_prefix, q->infill_prefix_len, q->infill_suffix, q->infill_suffix_len,
                                      q->prompt ? q->prompt : "", q->prompt_len, files, k, budget, ids);
        if (m < 0) goto oom;
        *n = (size_t)m;
        return 0;
    }
    if (q->suffix) { /* fill in the middle */
        int32_t fim[3];
        if (llm_tok_fim_ids(tok, fim) != 0) {
            llm_api_seterr(e, 400, "suffix", "invalid_value",
                           "'suffix': this model has no fill-in-the-middle tokens (<|fim_prefix|> ...)");
            return -1;
        }
        int k = llm_tok_encode_fim(tok, q->prompt ? q->prompt : "", q->prompt_len, q->suffix, q->suffix_len, ids);
        if (k < 0) goto oom;
        *n = (size_t)k;
        return 0;
    }
    if (encode_text(tok, q->prompt ? q->prompt : "", q->prompt_len, q->add_special ? LLM_TOK_ADD_BOS : 0, ids, n, &cap))
        goto oom;
    return 0;
oom:
    free(*ids);
    *ids = NULL;
    llm_api_seterr(e, 500, NULL, NULL, "out of memory encoding the prompt");
    return -1;
}

ngx_int_t ngx_http_llm_tokenize(ngx_http_request_t *r, llm_api_req *q)
{
    int32_t *ids;
    size_t n;
    llm_api_err e;
    if (ngx_http_llm_encode_prompt(r, q, &ids, &n, &e)) return ngx_http_llm_send_error(r, &e);
    if (q->api == LLM_API_MESSAGES) { /* Anthropic's count_tokens: the prompt's tokens, tools and system included */
        free(ids);
        cJSON *o = cJSON_CreateObject();
        if (o == NULL || !cJSON_AddNumberToObject(o, "input_tokens", (double)n)) {
            cJSON_Delete(o);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        return ngx_http_llm_send_cjson(r, 200, o);
    }
    ngx_http_llm_engine_t *eng = ngx_http_llm_engine(r);
    if (eng->client) (void)llm_client_attach(eng->client); /* for max_model_len; absence is fine */
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "tokens");
    llm_tokenizer *tok = ngx_http_llm_tok(r);
    for (size_t i = 0; a && i < n; i++) {
        if (!q->with_pieces) {
            cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
            continue;
        }
        /* llama.cpp's with_pieces: {"id", "piece"}, the piece a string when it is valid UTF-8, else its bytes */
        const char *s = "";
        size_t len = 0;
        if (llm_tok_piece(tok, ids[i], &s, &len) != 0) { s = ""; len = 0; }
        cJSON *t = cJSON_CreateObject(), *pc;
        char *clean = ngx_http_llm_utf8_clean(s, len);
        pc = clean != NULL && strlen(clean) == len && memcmp(clean, s, len) == 0 ? cJSON_CreateString(clean)
                                                                                 : ngx_http_llm_bytes_array(s, len);
        free(clean);
        cJSON_AddNumberToObject(t, "id", ids[i]);
        cJSON_AddItemToObject(t, "piece", pc);
        cJSON_AddItemToArray(a, t);
    }
    free(ids);
    cJSON_AddNumberToObject(o, "count", (double)n);
    uint32_t ctx = ngx_http_llm_ctx_len(r);
    if (ctx) cJSON_AddNumberToObject(o, "max_model_len", ctx);
    return ngx_http_llm_send_cjson(r, 200, o);
}

ngx_int_t ngx_http_llm_response_item(ngx_http_request_t *r, ngx_str_t *id)
{
    if (!ngx_http_llm_store_on(r))
        return ngx_http_llm_error(r, NGX_HTTP_NOT_FOUND, NULL, "not_found",
                                  "this server keeps no responses (llm_responses_store is off)");
    if (r->method == NGX_HTTP_DELETE) {
        if (!ngx_http_llm_store_delete(r, id->data, id->len))
            return ngx_http_llm_error(r, NGX_HTTP_NOT_FOUND, NULL, "not_found", "response '%V' not found", id);
        cJSON *o = cJSON_CreateObject();
        if (o == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
        char *s = ngx_http_llm_cstr(r, id);
        if (s == NULL) { cJSON_Delete(o); return NGX_HTTP_INTERNAL_SERVER_ERROR; }
        cJSON_AddStringToObject(o, "id", s);
        cJSON_AddStringToObject(o, "object", "response");
        cJSON_AddTrueToObject(o, "deleted");
        return ngx_http_llm_send_cjson(r, 200, o);
    }
    char *s = ngx_http_llm_store_get(r, id->data, id->len);
    if (s == NULL) return ngx_http_llm_error(r, NGX_HTTP_NOT_FOUND, NULL, "not_found", "response '%V' not found", id);
    ngx_int_t rc = ngx_http_llm_send_json(r, 200, s, ngx_strlen(s));
    free(s);
    return rc;
}

/* GET /v1/responses/<id>/input_items[?order=asc|desc&limit=N&after=ITEM]: a kept response's input items, a page
 * of OpenAI's list (newest first by default, 20 a page, at most 100). */
ngx_int_t ngx_http_llm_response_inputs(ngx_http_request_t *r, ngx_str_t *id)
{
    if (!ngx_http_llm_store_on(r))
        return ngx_http_llm_error(r, NGX_HTTP_NOT_FOUND, NULL, "not_found",
                                  "this server keeps no responses (llm_responses_store is off)");
    ngx_str_t v;
    int desc = 1;
    ngx_int_t limit = 20;
    if (ngx_http_arg(r, (u_char *)"order", 5, &v) == NGX_OK) {
        if (v.len == 3 && ngx_strncmp(v.data, "asc", 3) == 0) desc = 0;
        else if (!(v.len == 4 && ngx_strncmp(v.data, "desc", 4) == 0))
            return ngx_http_llm_error(r, 400, "order", "invalid_value", "order must be asc or desc");
    }
    if (ngx_http_arg(r, (u_char *)"limit", 5, &v) == NGX_OK &&
        ((limit = ngx_atoi(v.data, v.len)) == NGX_ERROR || limit < 1 || limit > 100))
        return ngx_http_llm_error(r, 400, "limit", "invalid_value", "limit must be 1 to 100");
    ngx_str_t after = ngx_null_string;
    (void)ngx_http_arg(r, (u_char *)"after", 5, &after);
    cJSON *items = ngx_http_llm_store_input_items(r, id->data, id->len);
    if (items == NULL) return ngx_http_llm_error(r, NGX_HTTP_NOT_FOUND, NULL, "not_found", "response '%V' not found", id);
    int n = cJSON_GetArraySize(items), from = 0, found = after.len == 0;
    cJSON *o = cJSON_CreateObject(), *data = o ? cJSON_AddArrayToObject(o, "data") : NULL;
    if (data == NULL) { cJSON_Delete(o); cJSON_Delete(items); return NGX_HTTP_INTERNAL_SERVER_ERROR; }
    for (int i = 0; i < n && !found; i++) { /* the page starts after the item named by after */
        const cJSON *iid = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(items, desc ? n - 1 - i : i), "id");
        if (cJSON_IsString(iid) && strlen(iid->valuestring) == after.len &&
            ngx_strncmp(iid->valuestring, after.data, after.len) == 0) {
            found = 1;
            from = i + 1;
        }
    }
    if (!found) {
        cJSON_Delete(o);
        cJSON_Delete(items);
        return ngx_http_llm_error(r, 400, "after", "invalid_value", "no input item '%V' in response '%V'", &after, id);
    }
    int end = from + (int)limit < n ? from + (int)limit : n;
    for (int i = from; i < end; i++)
        cJSON_AddItemToArray(data, cJSON_Duplicate(cJSON_GetArrayItem(items, desc ? n - 1 - i : i), 1));
    cJSON_Delete(items);
    cJSON_AddStringToObject(o, "object", "list");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(data, 0), "id");
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(data, end - from - 1), "id");
    if (cJSON_IsString(f)) cJSON_AddStringToObject(o, "first_id", f->valuestring); else cJSON_AddNullToObject(o, "first_id");
    if (cJSON_IsString(l)) cJSON_AddStringToObject(o, "last_id", l->valuestring); else cJSON_AddNullToObject(o, "last_id");
    cJSON_AddBoolToObject(o, "has_more", end < n);
    return ngx_http_llm_send_cjson(r, 200, o);
}

ngx_int_t ngx_http_llm_detokenize(ngx_http_request_t *r, llm_api_req *q)
{
    llm_tokenizer *tok = ngx_http_llm_tok(r);
    int vocab = llm_tok_vocab_size(tok);
    for (size_t i = 0; i < q->n_ids; i++)
        if (q->ids[i] >= vocab)
            return ngx_http_llm_error(r, 400, "tokens", "invalid_value",
                                      "token id %D at index %uz is outside the vocabulary (size %d)",
                                      q->ids[i], i, vocab);
    /* The streaming detokenizer gives exact bytes (a <0x00> byte token included);
     * the JSON string carries them as valid UTF-8 (invalid bytes and NUL -> U+FFFD). */
    llm_detok d;
    llm_detok_init(&d, tok);
    ngx_http_llm_text_t t = { NULL, 0, 0 };
    char piece[1024];
    int bad = ngx_http_llm_text_append(&t, "", 0);
    for (size_t i = 0; i < q->n_ids && !bad; i++) {
        size_t n = llm_detok_push(&d, q->ids[i], piece, sizeof piece);
        bad = ngx_http_llm_text_append(&t, piece, n);
    }
    if (!bad) bad = ngx_http_llm_text_append(&t, piece, llm_detok_flush(&d, piece, sizeof piece));
    char *text = bad ? NULL : ngx_http_llm_utf8_clean(t.data, t.len);
    free(t.data);
    if (text == NULL) return ngx_http_llm_error(r, 500, NULL, NULL, "out of memory decoding");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "prompt", text);
    cJSON_AddStringToObject(o, "content", text); /* (llama.cpp's name for it) */
    free(text);
    return ngx_http_llm_send_cjson(r, 200, o);
}

/* TGI's GET /info: the model and the limits its validation applies (max_input_tokens: the most a prompt may
 * hold; max_total_tokens: the context), as TGI's clients read them. */
ngx_int_t ngx_http_llm_tgi_info(ngx_http_request_t *r)
{
    llm_api_err e;
    char buf[256];
    ngx_http_llm_engine_t *eng = ngx_http_llm_engine(r);
    if (ngx_http_llm_engine_ready(eng, &e) != LLM_SHM_OK) return ngx_http_llm_send_error(r, &e);
    const llm_shm_map *m = llm_client_map(eng->client);
    uint32_t ctx = m->hdr->model.ctx_len, in = ctx > 0 ? ctx - 1 : 0;
    if (m->hdr->caps.max_prompt < in) in = m->hdr->caps.max_prompt;
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    cJSON_AddStringToObject(o, "model_id", ngx_http_llm_model_id(r, buf, sizeof buf));
    cJSON_AddNullToObject(o, "model_sha");
    cJSON_AddStringToObject(o, "model_pipeline_tag", m->hdr->model.encoder ? "feature-extraction" : "text-generation");
    cJSON_AddNumberToObject(o, "max_concurrent_requests", m->hdr->caps.n_slots);
    cJSON_AddNumberToObject(o, "max_best_of", 1);
    cJSON_AddNumberToObject(o, "max_stop_sequences", LLM_STOP_MAX);
    cJSON_AddNumberToObject(o, "max_input_tokens", in);
    cJSON_AddNumberToObject(o, "max_total_tokens", ctx);
    cJSON_AddNumberToObject(o, "validation_workers", 1);
    cJSON_AddNumberToObject(o, "max_client_batch_size", 1);
    cJSON_AddStringToObject(o, "router", "ngx_llm");
    cJSON_AddNullToObject(o, "sha");
    cJSON_AddNullToObject(o, "docker_label");
    return ngx_http_llm_send_cjson(r, 200, o);
}

/* llama.cpp server's GET /props: the defaults a request gets here (this server's, not llama.cpp's), the slots,
 * the model file and its chat template, as llama.cpp's web UI and clients read them. */
ngx_int_t ngx_http_llm_lcpp_props(ngx_http_request_t *r)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    llm_api_err e;
    ngx_http_llm_engine_t *eng = ngx_http_llm_engine(r);
    if (ngx_http_llm_engine_ready(eng, &e) != LLM_SHM_OK) return ngx_http_llm_send_error(r, &e);
    const llm_shm_map *m = llm_client_map(eng->client);
    llm_api_req none = { 0 };
    ngx_int_t dflt = ngx_http_llm_answer_tokens(lcf, &none);
    const char *tmpl = lcf->tok ? llm_tok_chat_template(lcf->tok->tok) : NULL;
    char *path = lcf->tok ? ngx_http_llm_cstr(r, &lcf->tok->path) : NULL;
    cJSON *o = cJSON_CreateObject(), *d = cJSON_AddObjectToObject(o, "default_generation_settings");
    cJSON *p = d ? cJSON_AddObjectToObject(d, "params") : NULL, *mod = cJSON_AddObjectToObject(o, "modalities");
    if (p == NULL || mod == NULL) { cJSON_Delete(o); return NGX_HTTP_INTERNAL_SERVER_ERROR; }
    cJSON_AddNumberToObject(d, "n_ctx", m->hdr->model.ctx_len);
    cJSON_AddNumberToObject(p, "n_predict", (double)dflt);
    cJSON_AddNumberToObject(p, "seed", 4294967295.0);
    cJSON_AddNumberToObject(p, "temperature", 1);
    cJSON_AddNumberToObject(p, "top_k", 0);
    cJSON_AddNumberToObject(p, "top_p", 1);
    cJSON_AddNumberToObject(p, "min_p", 0);
    cJSON_AddNumberToObject(p, "typical_p", 1);
    cJSON_AddNumberToObject(p, "repeat_penalty", 1);
    cJSON_AddNumberToObject(p, "repeat_last_n", -1);
    cJSON_AddNumberToObject(p, "presence_penalty", 0);
    cJSON_AddNumberToObject(p, "frequency_penalty", 0);
    cJSON_AddNumberToObject(p, "n_probs", 0);
    cJSON_AddNumberToObject(o, "total_slots", m->hdr->caps.n_slots);
    cJSON_AddStringToObject(o, "model_path", path ? path : "");
    cJSON_AddStringToObject(o, "chat_template", tmpl ? tmpl : "");
    cJSON_AddFalseToObject(mod, "vision");
    cJSON_AddFalseToObject(mod, "audio");
    cJSON_AddStringToObject(o, "build_info", "ngx_llm");
    return ngx_http_llm_send_cjson(r, 200, o);
}
