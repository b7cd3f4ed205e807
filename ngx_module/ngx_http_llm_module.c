/* Directives, configuration, worker start/stop, endpoint dispatch and request
 * body reading for ngx_http_llm_module. */
#include "ngx_http_llm_module.h"

static void *ngx_http_llm_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_llm_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_llm_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_llm_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static char *ngx_http_llm_api(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_llm_metrics_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_llm_chat_template_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_llm_priority_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_llm_model_alias_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t ngx_http_llm_postconf(ngx_conf_t *cf);
static ngx_int_t ngx_http_llm_init_process(ngx_cycle_t *cycle);
static void ngx_http_llm_exit_process(ngx_cycle_t *cycle);
static ngx_int_t ngx_http_llm_handler(ngx_http_request_t *r);

static ngx_conf_enum_t ngx_http_llm_balance_modes[] = {
    { ngx_string("least"), NGX_LLM_BALANCE_LEAST },
    { ngx_string("prefix"), NGX_LLM_BALANCE_PREFIX },
    { ngx_null_string, 0 }
};

static ngx_command_t ngx_http_llm_commands[] = {
    { ngx_string("llm_api"),
      NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS | NGX_CONF_TAKE1,
      ngx_http_llm_api, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    { ngx_string("llm_metrics"),
      NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
      ngx_http_llm_metrics_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    { ngx_string("llm_status"),
      NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
      ngx_http_llm_status_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    { ngx_string("llm_engine"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_1MORE,
      ngx_http_llm_engine_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    { ngx_string("llm_balance"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, balance), &ngx_http_llm_balance_modes },
    { ngx_string("llm_model_path"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_str_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, model_path), NULL },
    { ngx_string("llm_model_name"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_str_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, model_name), NULL },
    { ngx_string("llm_model_alias"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_1MORE,
      ngx_http_llm_model_alias_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    { ngx_string("llm_models"),
      NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_1MORE,
      ngx_http_llm_models_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    { ngx_string("llm_default_max_tokens"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_num_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, default_max_tokens), NULL },
    { ngx_string("llm_max_tokens"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_num_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, max_tokens), NULL },
    { ngx_string("llm_request_timeout"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, request_timeout), NULL },
    { ngx_string("llm_queue_timeout"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, queue_timeout), NULL },
    { ngx_string("llm_max_body_size"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_size_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, max_body), NULL },
    { ngx_string("llm_priority"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_http_llm_priority_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    { ngx_string("llm_api_key"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_1MORE,
      ngx_http_llm_api_key_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    { ngx_string("llm_reasoning"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
      ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, reasoning), NULL },
    { ngx_string("llm_responses_store"),
      NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_http_llm_store_directive, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
    { ngx_string("llm_chat_template"),
      NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
      ngx_http_llm_chat_template_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    ngx_null_command
};

static ngx_http_module_t ngx_http_llm_module_ctx = {
    ngx_http_llm_vars_preconf,     /* preconfiguration: $llm_* */
    ngx_http_llm_postconf,         /* postconfiguration */
    ngx_http_llm_create_main_conf, /* create main configuration */
    ngx_http_llm_init_main_conf,   /* init main configuration */
    NULL, NULL,                    /* server configuration */
    ngx_http_llm_create_loc_conf,  /* create location configuration */
    ngx_http_llm_merge_loc_conf    /* merge location configuration */
};

ngx_module_t ngx_http_llm_module = {
    NGX_MODULE_V1,
    &ngx_http_llm_module_ctx,
    ngx_http_llm_commands,
    NGX_HTTP_MODULE,
    NULL,                          /* init master */
    NULL,                          /* init module */
    ngx_http_llm_init_process,     /* init process */
    NULL,                          /* init thread */
    NULL,                          /* exit thread */
    ngx_http_llm_exit_process,     /* exit process */
    NULL,                          /* exit master */
    NGX_MODULE_V1_PADDING
};

/* ---------------- configuration ---------------- */

static void ngx_http_llm_free_toks(void *data)
{
    ngx_array_t *a = data;
    ngx_http_llm_tok_t *t = a->elts;
    for (ngx_uint_t i = 0; i < a->nelts; i++)
        if (t[i].tok) { llm_tok_free(t[i].tok); t[i].tok = NULL; }
}

static void *ngx_http_llm_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_llm_main_conf_t *mcf = ngx_pcalloc(cf->pool, sizeof(*mcf));
    if (mcf == NULL) return NULL;
    if (ngx_array_init(&mcf->engines, cf->pool, 2, sizeof(ngx_http_llm_engine_t)) != NGX_OK ||
        ngx_array_init(&mcf->toks, cf->pool, 2, sizeof(ngx_http_llm_tok_t)) != NGX_OK)
        return NULL;
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) return NULL;
    cln->handler = ngx_http_llm_free_toks;
    cln->data = &mcf->toks;
    mcf->started = ngx_time();
    return mcf;
}

static char *ngx_http_llm_init_main_conf(ngx_conf_t *cf, void *conf)
{
    return NGX_CONF_OK;
}

static void *ngx_http_llm_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_pcalloc(cf->pool, sizeof(*lcf));
    if (lcf == NULL) return NULL;
    lcf->handler = NGX_CONF_UNSET_UINT;
    lcf->engine_names = NGX_CONF_UNSET_PTR;
    lcf->balance = NGX_CONF_UNSET_UINT;
    lcf->default_max_tokens = NGX_CONF_UNSET;
    lcf->max_tokens = NGX_CONF_UNSET;
    lcf->request_timeout = NGX_CONF_UNSET_MSEC;
    lcf->queue_timeout = NGX_CONF_UNSET_MSEC;
    lcf->max_body = NGX_CONF_UNSET_SIZE;
    lcf->chat_format = NGX_CONF_UNSET_UINT;
    lcf->api_keys = NGX_CONF_UNSET_PTR;
    lcf->model_aliases = NGX_CONF_UNSET_PTR;
    lcf->routes = NGX_CONF_UNSET_PTR;
    lcf->priority = NGX_CONF_UNSET;
    lcf->reasoning = NGX_CONF_UNSET;
    return lcf;
}

/* A token's text, NUL-terminated in the pool, or NULL (no such token, no memory). */
static const char *ngx_http_llm_token_text(ngx_pool_t *pool, const llm_tokenizer *tok, int id)
{
    const char *b;
    size_t len;
    if (id < 0 || llm_tok_piece(tok, id, &b, &len) != 0) return NULL;
    char *s = ngx_pnalloc(pool, len + 1);
    if (s == NULL) return NULL;
    ngx_memcpy(s, b, len);
    s[len] = 0;
    return s;
}

/* Loads (once per path) the tokenizer the workers use. */
static ngx_http_llm_tok_t *ngx_http_llm_tok_get(ngx_conf_t *cf, ngx_str_t *path)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);
    ngx_http_llm_tok_t *t = mcf->toks.elts;
    for (ngx_uint_t i = 0; i < mcf->toks.nelts; i++)
        if (t[i].path.len == path->len && ngx_strncmp(t[i].path.data, path->data, path->len) == 0)
            return &t[i];
    char *cpath = ngx_pnalloc(cf->pool, path->len + 1);
    if (cpath == NULL) return NULL;
    ngx_memcpy(cpath, path->data, path->len);
    cpath[path->len] = 0;
    llm_err err = { "" };
    llm_tokenizer *tok = llm_tok_load(cpath, &err);
    if (tok == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "llm_model_path \"%s\": %s", cpath, err.msg);
        return NULL;
    }
    ngx_http_llm_tok_t *n = ngx_array_push(&mcf->toks);
    if (n == NULL) { llm_tok_free(tok); return NULL; }
    n->path = *path;
    n->tok = tok;
    ngx_http_llm_ollama_facts(cpath, n);
    n->chat = llm_chat_detect(llm_tok_chat_template(tok), (int)llm_tok_kind_of(tok));
    /* a reasoning model: a template that writes <think>, Seed-OSS's <seed:think> or EXAONE Deep's <thought> */
    const char *tmpl = llm_tok_chat_template(tok);
    static const char *const tags[][2] = { { "<think>", "</think>" }, { "<seed:think>", "</seed:think>" },
                                           { "<thought>", "</thought>" } };
    size_t k = 0;
    while (k < sizeof tags / sizeof tags[0] && (tmpl == NULL || strstr(tmpl, tags[k][0]) == NULL)) k++;
    n->think = k < sizeof tags / sizeof tags[0];
    n->think_open = tags[n->think ? k : 0][0];
    n->think_close = tags[n->think ? k : 0][1];
    n->think_after = n->think_direct = n->think_preamble = NULL;
    n->harmony = n->chat == LLM_CHAT_GPT_OSS;
    if (n->harmony) { /* gpt-oss: its analysis channel's message is the reasoning, its final channel's the answer */
        n->think = 1;
        n->think_open = "<|channel|>analysis<|message|>";
        n->think_close = "<|end|>";
        n->think_after = "<|start|>assistant";
        n->think_direct = "<|channel|>final<|message|>";
        n->think_preamble = "<|channel|>commentary<|message|>";
    }
    /* the tags as single tokens (Qwen 3's): a JSON answer's mask then waits for the thinking to end */
    n->think_start = n->think ? llm_tok_find(tok, n->think_open) : -1;
    n->think_end = n->think ? llm_tok_find(tok, n->think_close) : -1;
    n->reason_start = n->think_start;
    n->reason_end[0] = n->think_end;
    n->n_reason_end = n->think_start >= 0 && n->think_end >= 0;
    if (n->harmony) { /* its answer opens <|channel|>; the final channel's header ends the analysis */
        int32_t *ids = NULL;
        int k = llm_tok_encode(tok, n->think_direct, strlen(n->think_direct), LLM_TOK_PARSE_SPECIAL, &ids);
        n->reason_start = llm_tok_find(tok, "<|channel|>");
        n->n_reason_end = 0;
        if (k >= 2 && k <= LLM_SHM_MAX_REASON_END && ids[0] == n->reason_start && n->reason_start >= 0) {
            ngx_memcpy(n->reason_end, ids, (size_t)k * sizeof(int32_t));
            n->n_reason_end = k;
        }
        free(ids);
    }
    n->bos_text = ngx_http_llm_token_text(cf->pool, tok, llm_tok_bos(tok));
    n->eos_text = ngx_http_llm_token_text(cf->pool, tok, llm_tok_eos(tok));
    n->granite_system = llm_chat_granite_own_system(llm_tok_chat_template(tok));
    char *ds = llm_chat_default_system(llm_tok_chat_template(tok));
    n->default_system = NULL;
    if (ds != NULL) {
        size_t dl = strlen(ds) + 1;
        char *p = ngx_pnalloc(cf->pool, dl);
        if (p != NULL) { ngx_memcpy(p, ds, dl); n->default_system = p; }
        free(ds);
    }
    return n;
}

static ngx_int_t ngx_http_llm_engine_index(ngx_conf_t *cf, ngx_str_t *name, ngx_uint_t *idx)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);
    ngx_http_llm_engine_t *e = mcf->engines.elts;
    for (ngx_uint_t i = 0; i < mcf->engines.nelts; i++)
        if (e[i].name.len == name->len && ngx_strncmp(e[i].name.data, name->data, name->len) == 0) {
            *idx = i;
            return NGX_OK;
        }
    if (name->len == 0 || name->len > LLM_SHM_MAX_NAME - 1 || ngx_strlchr(name->data, name->data + name->len, '/')) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "llm_engine \"%V\": a name of 1..%d characters without '/'",
                           name, LLM_SHM_MAX_NAME - 1);
        return NGX_ERROR;
    }
    ngx_http_llm_engine_t *n = ngx_array_push(&mcf->engines);
    if (n == NULL) return NGX_ERROR;
    ngx_memzero(n, sizeof(*n));
    n->name = *name;
    *idx = mcf->engines.nelts - 1;
    return NGX_OK;
}

static char *ngx_http_llm_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_llm_loc_conf_t *prev = parent, *conf = child;

    ngx_conf_merge_uint_value(conf->handler, prev->handler, NGX_LLM_OFF);
    ngx_conf_merge_ptr_value(conf->engine_names, prev->engine_names, NULL);
    ngx_conf_merge_uint_value(conf->balance, prev->balance, NGX_LLM_BALANCE_PREFIX);
    ngx_conf_merge_str_value(conf->model_path, prev->model_path, "");
    ngx_conf_merge_str_value(conf->model_name, prev->model_name, "");
    ngx_conf_merge_ptr_value(conf->model_aliases, prev->model_aliases, NULL);
    ngx_conf_merge_ptr_value(conf->routes, prev->routes, NULL);
    /* Left unset (not 256) so a location lowering llm_max_tokens lowers the default with it. */
    ngx_conf_merge_value(conf->default_max_tokens, prev->default_max_tokens, NGX_CONF_UNSET);
    ngx_conf_merge_value(conf->max_tokens, prev->max_tokens, 4096);
    ngx_conf_merge_msec_value(conf->request_timeout, prev->request_timeout, 600000);
    ngx_conf_merge_msec_value(conf->queue_timeout, prev->queue_timeout, 60000);
    ngx_conf_merge_size_value(conf->max_body, prev->max_body, 1024 * 1024);
    ngx_conf_merge_uint_value(conf->chat_format, prev->chat_format, 0);
    ngx_conf_merge_ptr_value(conf->api_keys, prev->api_keys, NULL);
    ngx_conf_merge_value(conf->priority, prev->priority, 0);
    ngx_conf_merge_value(conf->reasoning, prev->reasoning, 1);

    if (conf->max_tokens < 1 || (conf->default_max_tokens != NGX_CONF_UNSET &&
                                 (conf->default_max_tokens < 1 || conf->default_max_tokens > conf->max_tokens))) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "llm_default_max_tokens (%i) must be between 1 and llm_max_tokens (%i)",
                           conf->default_max_tokens, conf->max_tokens);
        return NGX_CONF_ERROR;
    }
    if (conf->handler == NGX_LLM_OFF) return NGX_CONF_OK;

    if (conf->handler != NGX_LLM_METRICS && conf->handler != NGX_LLM_HEALTH) {
        if (conf->model_path.len == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "llm_api needs llm_model_path (the model or tokenizer file the workers tokenize with)");
            return NGX_CONF_ERROR;
        }
    }
    if (conf->model_path.len) {
        conf->tok = prev->model_path.len == conf->model_path.len && prev->tok &&
                    ngx_strncmp(prev->model_path.data, conf->model_path.data, conf->model_path.len) == 0
                  ? prev->tok : ngx_http_llm_tok_get(cf, &conf->model_path);
        if (conf->tok == NULL) return NGX_CONF_ERROR;
    }
    static ngx_str_t dflt = ngx_string("default");
    ngx_str_t *names = conf->engine_names ? conf->engine_names->elts : &dflt;
    conf->n_replicas = conf->engine_names ? conf->engine_names->nelts : 1;
    for (ngx_uint_t i = 0; i < conf->n_replicas; i++)
        if (ngx_http_llm_engine_index(cf, &names[i], &conf->replicas[i]) != NGX_OK) return NGX_CONF_ERROR;
    conf->engine_idx = conf->replicas[0];
    return ngx_http_llm_balance_conf(cf, conf) == NGX_OK ? NGX_CONF_OK : NGX_CONF_ERROR;
}

static char *ngx_http_llm_set_handler(ngx_conf_t *cf, ngx_http_llm_loc_conf_t *lcf, ngx_uint_t h)
{
    if (lcf->handler != NGX_CONF_UNSET_UINT) return "is duplicate";
    lcf->handler = h;
    ngx_http_core_loc_conf_t *clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_llm_handler;
    return NGX_CONF_OK;
}

static char *ngx_http_llm_api(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    static const struct { const char *name; ngx_uint_t h; } kinds[] = {
        { "auto", NGX_LLM_AUTO }, { "completions", NGX_LLM_COMPLETIONS }, { "chat", NGX_LLM_CHAT },
        { "models", NGX_LLM_MODELS }, { "tokenize", NGX_LLM_TOKENIZE }, { "detokenize", NGX_LLM_DETOKENIZE },
        { "health", NGX_LLM_HEALTH }, { "metrics", NGX_LLM_METRICS }, { "embeddings", NGX_LLM_EMBEDDINGS },
        { "responses", NGX_LLM_RESPONSES }, { "messages", NGX_LLM_MESSAGES }, { "count_tokens", NGX_LLM_COUNT_TOKENS },
        { "rerank", NGX_LLM_RERANK }, { "ollama_chat", NGX_LLM_OLLAMA_CHAT },
        { "ollama_generate", NGX_LLM_OLLAMA_GENERATE }, { "ollama_embed", NGX_LLM_OLLAMA_EMBED },
        { "ollama_embeddings", NGX_LLM_OLLAMA_EMBEDDINGS },
        { "ollama_tags", NGX_LLM_OLLAMA_TAGS }, { "ollama_ps", NGX_LLM_OLLAMA_PS },
        { "ollama_show", NGX_LLM_OLLAMA_SHOW }, { "ollama_version", NGX_LLM_OLLAMA_VERSION },
        { "tgi", NGX_LLM_TGI }, { "tgi_generate", NGX_LLM_TGI_GENERATE },
        { "tgi_generate_stream", NGX_LLM_TGI_STREAM }, { "tgi_info", NGX_LLM_TGI_INFO },
        { "llamacpp_completion", NGX_LLM_LCPP_COMPLETION }, { "llamacpp_props", NGX_LLM_LCPP_PROPS },
        { "llamacpp_infill", NGX_LLM_LCPP_INFILL },
    };
    ngx_str_t *v = cf->args->elts;
    if (cf->args->nelts == 1) return ngx_http_llm_set_handler(cf, conf, NGX_LLM_AUTO);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (v[1].len == ngx_strlen(kinds[i].name) && ngx_strncmp(v[1].data, kinds[i].name, v[1].len) == 0)
            return ngx_http_llm_set_handler(cf, conf, kinds[i].h);
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "llm_api \"%V\": expected auto, completions, chat, responses, "
                       "messages, count_tokens, embeddings, rerank, models, tokenize, detokenize, health, metrics, "
                       "ollama_chat, ollama_generate, ollama_embed, ollama_embeddings, ollama_tags, ollama_ps, ollama_show, "
                       "ollama_version, tgi, tgi_generate, tgi_generate_stream, tgi_info, llamacpp_completion, llamacpp_infill or llamacpp_props",
                       &v[1]);
    return NGX_CONF_ERROR;
}

static char *ngx_http_llm_metrics_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    return ngx_http_llm_set_handler(cf, conf, NGX_LLM_METRICS);
}

/* llm_priority N: a signed number (ngx_conf_set_num_slot takes none below 0). */
/* llm_model_alias NAME ...: every name (repeated directives add more). */
static char *ngx_http_llm_model_alias_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    (void)cmd;
    ngx_http_llm_loc_conf_t *lcf = conf;
    ngx_str_t *v = cf->args->elts;
    if (lcf->model_aliases == NGX_CONF_UNSET_PTR &&
        (lcf->model_aliases = ngx_array_create(cf->pool, cf->args->nelts - 1, sizeof(ngx_str_t))) == NULL)
        return NGX_CONF_ERROR;
    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        if (v[i].len == 0) return "takes non-empty names";
        ngx_str_t *a = ngx_array_push(lcf->model_aliases);
        if (a == NULL) return NGX_CONF_ERROR;
        *a = v[i];
    }
    return NGX_CONF_OK;
}

static char *ngx_http_llm_priority_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    (void)cmd;
    ngx_http_llm_loc_conf_t *lcf = conf;
    ngx_str_t *v = cf->args->elts;
    if (lcf->priority != NGX_CONF_UNSET) return "is duplicate";
    int neg = v[1].len > 1 && v[1].data[0] == '-';
    ngx_int_t n = ngx_atoi(v[1].data + neg, v[1].len - (size_t)neg);
    if (n == NGX_ERROR || n > LLM_API_MAX_PRIORITY) return "takes a whole number between -1000000 and 1000000";
    lcf->priority = neg ? -n : n;
    return NGX_CONF_OK;
}

static char *ngx_http_llm_chat_template_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_loc_conf_t *lcf = conf;
    ngx_str_t *v = cf->args->elts;
    if (lcf->chat_format != NGX_CONF_UNSET_UINT) return "is duplicate";
    if (v[1].len == 4 && ngx_strncmp(v[1].data, "auto", 4) == 0) { lcf->chat_format = 0; return NGX_CONF_OK; }
    char name[32];
    if (v[1].len >= sizeof name) goto bad;
    ngx_memcpy(name, v[1].data, v[1].len);
    name[v[1].len] = 0;
    lcf->chat_format = llm_chat_format_from_name(name);
    if (lcf->chat_format) return NGX_CONF_OK;
bad:
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "llm_chat_template \"%V\": expected auto, llama3, llama2, chatml, gemma, phi3, phi4-mini, phi4, "
                       "granite, mistral-v1, mistral-v3, mistral-v3-tekken, mistral-v7, smollm3, deepseek3, "
                       "deepseek-r1, exaone3, exaone-deep, exaone4, ernie, tulu, seed-oss, qwen3-coder, glm4.5 or gpt-oss",
                       &v[1]);
    return NGX_CONF_ERROR;
}

static ngx_int_t ngx_http_llm_zone_init(ngx_shm_zone_t *zone, void *data)
{
    ngx_http_llm_main_conf_t *mcf = zone->data;
    if (data) { /* reload: keep the old counters (data is the old configuration's, which the master then frees) */
        mcf->counters = ((ngx_http_llm_main_conf_t *)data)->counters;
        return NGX_OK;
    }
    ngx_slab_pool_t *shpool = (ngx_slab_pool_t *)zone->shm.addr;
    if (zone->shm.exists) { mcf->counters = shpool->data; return NGX_OK; }
    mcf->counters = ngx_slab_calloc(shpool, sizeof(ngx_http_llm_counters_t));
    if (mcf->counters == NULL) return NGX_ERROR;
    shpool->data = mcf->counters;
    return NGX_OK;
}

static ngx_int_t ngx_http_llm_postconf(ngx_conf_t *cf)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);
    if (ngx_http_llm_routes_resolve(cf) != NGX_OK) return NGX_ERROR;
    if (mcf->engines.nelts == 0) return NGX_OK; /* module loaded but unused */
    static ngx_str_t zname = ngx_string("llm_counters");
    mcf->zone = ngx_shared_memory_add(cf, &zname, 64 * 1024, &ngx_http_llm_module);
    if (mcf->zone == NULL) return NGX_ERROR;
    mcf->zone->init = ngx_http_llm_zone_init;
    mcf->zone->data = mcf;
    return NGX_OK;
}

static ngx_int_t ngx_http_llm_init_process(ngx_cycle_t *cycle)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_llm_module);
    if (mcf == NULL) return NGX_OK;
    ngx_http_llm_engine_t *e = mcf->engines.elts;
    for (ngx_uint_t i = 0; i < mcf->engines.nelts; i++)
        if (ngx_http_llm_engine_init_process(cycle, &e[i]) != NGX_OK) return NGX_ERROR;
    return ngx_http_llm_status_init_process(cycle);
}

static void ngx_http_llm_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_llm_module);
    if (mcf == NULL) return;
    ngx_http_llm_engine_t *e = mcf->engines.elts;
    for (ngx_uint_t i = 0; i < mcf->engines.nelts; i++) ngx_http_llm_engine_exit_process(&e[i]);
}

/* ---------------- helpers shared by the endpoints ---------------- */

ngx_http_llm_engine_t *ngx_http_llm_engine(ngx_http_request_t *r)
{
    return ngx_http_llm_lcf_engine(r, ngx_http_get_module_loc_conf(r, ngx_http_llm_module));
}

const char *ngx_http_llm_model_id(ngx_http_request_t *r, char *buf, size_t cap)
{
    return ngx_http_llm_lcf_model_id(ngx_http_get_module_loc_conf(r, ngx_http_llm_module), buf, cap);
}

/* The model id clients see: llm_model_name, else the file name. */
const char *ngx_http_llm_lcf_model_id(ngx_http_llm_loc_conf_t *lcf, char *buf, size_t cap)
{
    if (lcf->model_name.len) {
        ngx_cpystrn((u_char *)buf, lcf->model_name.data, ngx_min(cap, lcf->model_name.len + 1));
        return buf;
    }
    ngx_str_t *p = &lcf->model_path;
    size_t i = p->len;
    while (i > 0 && p->data[i - 1] == '/') i--;
    size_t end = i;
    while (i > 0 && p->data[i - 1] != '/') i--;
    if (end == i) return "model";
    ngx_cpystrn((u_char *)buf, p->data + i, ngx_min(cap, end - i + 1));
    return buf;
}

int ngx_http_llm_check_model(ngx_http_request_t *r, const char *model, llm_api_err *e)
{
    char buf[256], list[512];
    if (model == NULL) return 0;
    if (ngx_http_llm_model_names(ngx_http_get_module_loc_conf(r, ngx_http_llm_module), (const u_char *)model,
                                 strlen(model)))
        return 0;
    /* the models served here: this location's and its llm_models' */
    ngx_http_llm_loc_conf_t *lcfs[NGX_LLM_MAX_ROUTES + 1];
    ngx_uint_t n = ngx_http_llm_served(r, lcfs);
    size_t at = 0;
    for (ngx_uint_t i = 0; i < n && at < sizeof list; i++) {
        int k = snprintf(list + at, sizeof list - at, "%s'%s'", i ? ", " : "",
                         ngx_http_llm_lcf_model_id(lcfs[i], buf, sizeof buf));
        if (k < 0) break;
        at += (size_t)k;
    }
    list[sizeof list - 1] = 0;
    llm_api_seterr(e, 404, "model", "model_not_found", "The model '%s' does not exist (this server serves %s)",
                   model, list);
    return 404;
}

int ngx_http_llm_engine_ready(ngx_http_llm_engine_t *eng, llm_api_err *e)
{
    if (eng->client == NULL) {
        llm_api_seterr(e, 503, NULL, "engine_unavailable", "the engine client could not be created in this worker");
        return LLM_SHM_E_SYS;
    }
    int rc = llm_client_attach(eng->client);
    if (rc == LLM_SHM_OK) rc = llm_client_check(eng->client);
    if (rc == LLM_SHM_OK) return rc;
    llm_api_seterr(e, 503, NULL, "engine_unavailable", "the engine \"%.*s\" is not ready: %s",
                   (int)eng->name.len, eng->name.data, llm_shm_strerror(rc));
    return rc;
}

/* ---------------- dispatch and body reading ---------------- */

static ngx_uint_t ngx_http_llm_route(ngx_http_request_t *r, ngx_str_t *model_id)
{
    static const struct { const char *tail; ngx_uint_t h; } routes[] = {
        { "/v1/chat/completions", NGX_LLM_CHAT }, { "/v1/completions", NGX_LLM_COMPLETIONS },
        { "/v1/embeddings", NGX_LLM_EMBEDDINGS }, { "/v1/responses", NGX_LLM_RESPONSES },
        { "/v1/messages", NGX_LLM_MESSAGES }, { "/v1/messages/count_tokens", NGX_LLM_COUNT_TOKENS },
        { "/v1/models", NGX_LLM_MODELS }, { "/tokenize", NGX_LLM_TOKENIZE },
        { "/detokenize", NGX_LLM_DETOKENIZE }, { "/health", NGX_LLM_HEALTH }, { "/metrics", NGX_LLM_METRICS },
        { "/rerank", NGX_LLM_RERANK }, /* /v1/rerank, /v2/rerank (Cohere's) and /rerank alike */
        { "/api/chat", NGX_LLM_OLLAMA_CHAT }, { "/api/generate", NGX_LLM_OLLAMA_GENERATE },
        { "/api/embed", NGX_LLM_OLLAMA_EMBED }, { "/api/embeddings", NGX_LLM_OLLAMA_EMBEDDINGS },
        { "/api/tags", NGX_LLM_OLLAMA_TAGS }, { "/api/ps", NGX_LLM_OLLAMA_PS }, { "/api/show", NGX_LLM_OLLAMA_SHOW },
        { "/api/version", NGX_LLM_OLLAMA_VERSION },
        /* TGI's (after Ollama's /api/generate, which ends the same way) */
        { "/generate", NGX_LLM_TGI_GENERATE }, { "/generate_stream", NGX_LLM_TGI_STREAM }, { "/info", NGX_LLM_TGI_INFO },
        /* llama.cpp's own (after /v1/completions and /v1/chat/completions, which end the same way) */
        { "/completion", NGX_LLM_LCPP_COMPLETION }, { "/completions", NGX_LLM_LCPP_COMPLETION },
        { "/props", NGX_LLM_LCPP_PROPS }, { "/infill", NGX_LLM_LCPP_INFILL },
    };
    ngx_str_t *u = &r->uri;
    size_t len = u->len;
    if (len == 1 && u->data[0] == '/') return (r->method & NGX_HTTP_POST) ? NGX_LLM_TGI : NGX_LLM_ROOT; /* TGI's POST / */
    while (len > 1 && u->data[len - 1] == '/') len--;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        size_t tl = ngx_strlen(routes[i].tail);
        if (len >= tl && ngx_strncmp(u->data + len - tl, routes[i].tail, tl) == 0) return routes[i].h;
    }
    /* /v1/responses/<id>/input_items (the id in model_id) */
    static const char inputs[] = "/input_items";
    u_char *ri = ngx_strnstr(u->data, "/v1/responses/", len);
    if (ri != NULL && len > sizeof inputs - 1 &&
        ngx_strncmp(u->data + len - (sizeof inputs - 1), inputs, sizeof inputs - 1) == 0 &&
        u->data + len - (sizeof inputs - 1) > ri + 14) {
        model_id->data = ri + 14;
        model_id->len = (size_t)(u->data + len - (sizeof inputs - 1) - model_id->data);
        if (!ngx_strlchr(model_id->data, model_id->data + model_id->len, '/')) return NGX_LLM_RESPONSE_INPUTS;
    }
    /* /v1/models/<id>, /v1/responses/<id> (the id in model_id) */
    static const struct { const char *dir; ngx_uint_t h; } items[] = {
        { "/v1/models/", NGX_LLM_MODELS }, { "/v1/responses/", NGX_LLM_RESPONSE_ITEM },
    };
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        size_t dl = ngx_strlen(items[i].dir);
        u_char *p = ngx_strnstr(u->data, (char *)items[i].dir, len);
        if (p == NULL) continue;
        model_id->data = p + dl;
        model_id->len = (size_t)(u->data + len - model_id->data);
        if (model_id->len && !ngx_strlchr(model_id->data, model_id->data + model_id->len, '/')) return items[i].h;
    }
    return NGX_LLM_OFF;
}

ngx_uint_t ngx_http_llm_endpoint(ngx_http_request_t *r)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    ngx_str_t id = ngx_null_string;
    return lcf->handler == NGX_LLM_AUTO ? ngx_http_llm_route(r, &id) : lcf->handler;
}

static ngx_int_t ngx_http_llm_method_not_allowed(ngx_http_request_t *r, const char *allow)
{
    ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);
    if (h) {
        h->hash = 1;
        ngx_str_set(&h->key, "Allow");
        h->value.data = (u_char *)allow;
        h->value.len = ngx_strlen(allow);
    }
    ngx_http_discard_request_body(r);
    return ngx_http_llm_error(r, NGX_HTTP_NOT_ALLOWED, NULL, "method_not_allowed",
                              "method %V is not allowed here (use %s)", &r->method_name, allow);
}

/* The body in one contiguous piece (it may have gone to a temp file). */
static ngx_int_t ngx_http_llm_body(ngx_http_request_t *r, u_char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    if (r->request_body == NULL || r->request_body->bufs == NULL) return NGX_OK;
    size_t total = 0;
    /* A buffer is in memory, in the temp file, or neither (a special marker buffer). */
    for (ngx_chain_t *cl = r->request_body->bufs; cl; cl = cl->next)
        total += ngx_buf_in_memory(cl->buf) ? (size_t)(cl->buf->last - cl->buf->pos)
               : (cl->buf->in_file && cl->buf->file) ? (size_t)(cl->buf->file_last - cl->buf->file_pos) : 0;
    u_char *p = ngx_pnalloc(r->pool, total + 1);
    if (p == NULL) return NGX_ERROR;
    size_t at = 0;
    for (ngx_chain_t *cl = r->request_body->bufs; cl; cl = cl->next) {
        ngx_buf_t *b = cl->buf;
        if (ngx_buf_in_memory(b)) {
            ngx_memcpy(p + at, b->pos, (size_t)(b->last - b->pos));
            at += (size_t)(b->last - b->pos);
        } else if (b->in_file && b->file) {
            ssize_t n = ngx_read_file(b->file, p + at, (size_t)(b->file_last - b->file_pos), b->file_pos);
            if (n != b->file_last - b->file_pos) return NGX_ERROR;
            at += (size_t)n;
        }
    }
    p[at] = 0;
    *data = p;
    *len = at;
    return NGX_OK;
}

static void ngx_http_llm_body_handler(ngx_http_request_t *r)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    ngx_http_llm_log_t *l = ngx_http_llm_log(r);
    if (l == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    ngx_uint_t h = l->handler;
    u_char *body;
    size_t len;
    if (ngx_http_llm_body(r, &body, &len) != NGX_OK) {
        ngx_http_finalize_request(r, ngx_http_llm_error(r, 500, NULL, NULL, "could not read the request body"));
        return;
    }
    if (len > lcf->max_body) {
        ngx_http_finalize_request(r, ngx_http_llm_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE, NULL, "body_too_large",
                                                        "request body of %uz bytes exceeds the limit of %uz bytes",
                                                        len, lcf->max_body));
        return;
    }
    llm_api_kind kind = h == NGX_LLM_CHAT ? LLM_API_CHAT : h == NGX_LLM_COMPLETIONS ? LLM_API_COMPLETIONS
                      : h == NGX_LLM_EMBEDDINGS ? LLM_API_EMBEDDINGS : h == NGX_LLM_RESPONSES ? LLM_API_RESPONSES
                      : h == NGX_LLM_RERANK ? LLM_API_RERANK
                      : h == NGX_LLM_OLLAMA_CHAT ? LLM_API_OLLAMA_CHAT : h == NGX_LLM_OLLAMA_GENERATE ? LLM_API_OLLAMA_GENERATE
                      : h == NGX_LLM_TGI ? LLM_API_TGI : h == NGX_LLM_TGI_GENERATE ? LLM_API_TGI_GENERATE
                      : h == NGX_LLM_TGI_STREAM ? LLM_API_TGI_STREAM : h == NGX_LLM_LCPP_COMPLETION ? LLM_API_LCPP
                      : h == NGX_LLM_LCPP_INFILL ? LLM_API_LCPP_INFILL
                      : h == NGX_LLM_OLLAMA_EMBED ? LLM_API_OLLAMA_EMBED
                      : h == NGX_LLM_OLLAMA_EMBEDDINGS ? LLM_API_OLLAMA_EMBEDDINGS
                      : h == NGX_LLM_MESSAGES || h == NGX_LLM_COUNT_TOKENS ? LLM_API_MESSAGES
                      : h == NGX_LLM_TOKENIZE ? LLM_API_TOKENIZE : LLM_API_DETOKENIZE;
    if (ngx_http_llm_route_body(r, h, body, len) == NGX_DONE) { /* another model's location serves it */
        ngx_http_finalize_request(r, NGX_DONE);
        return;
    }
    if (h == NGX_LLM_OLLAMA_SHOW) {
        ngx_http_finalize_request(r, ngx_http_llm_ollama_show_body(r, (const char *)body, len));
        return;
    }
    llm_api_req q;
    llm_api_err e;
    llm_chat_format chat = lcf->chat_format ? (llm_chat_format)lcf->chat_format
                         : lcf->tok ? lcf->tok->chat : LLM_CHAT_LLAMA3;
    /* the Responses API's previous_response_id: the conversation from the store (ngx_http_llm_store.c) */
    if (llm_api_parse_with_history(kind, (const char *)body, len, chat, ngx_http_llm_store_history, r, &q, &e) != 0 ||
        ngx_http_llm_check_model(r, q.model, &e)) {
        llm_api_req_free(&q);
        ngx_http_finalize_request(r, ngx_http_llm_send_error(r, &e));
        return;
    }
    if (q.ollama_load) { /* Ollama's "load the model": it is, as long as the engine is */
        ngx_int_t lrc = ngx_http_llm_ollama_load(r, &q);
        llm_api_req_free(&q);
        ngx_http_finalize_request(r, lrc);
        return;
    }
    /* a reasoning model's chat answers: <think> split off into reasoning_content */
    q.think = (q.kind == LLM_API_CHAT || (kind == LLM_API_TOKENIZE && q.msgs)) && lcf->tok && lcf->tok->think &&
              lcf->reasoning;
    ngx_int_t rc;
    switch (h) {
    case NGX_LLM_TOKENIZE:
    case NGX_LLM_COUNT_TOKENS: rc = ngx_http_llm_tokenize(r, &q); llm_api_req_free(&q); break;
    case NGX_LLM_DETOKENIZE: rc = ngx_http_llm_detokenize(r, &q); llm_api_req_free(&q); break;
    case NGX_LLM_EMBEDDINGS:
    case NGX_LLM_OLLAMA_EMBED:
    case NGX_LLM_OLLAMA_EMBEDDINGS: rc = ngx_http_llm_embeddings(r, &q); break; /* owns q */
    case NGX_LLM_RERANK:     rc = ngx_http_llm_rerank(r, &q); break; /* owns q */
    default:                 rc = ngx_http_llm_generate(r, &q); break; /* owns q */
    }
    if (rc != NGX_DONE) ngx_http_finalize_request(r, rc);
    /* NGX_DONE: the request goes on; it is finalized when the last token is out. */
}

static ngx_int_t ngx_http_llm_handler(ngx_http_request_t *r)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    ngx_str_t model_id = ngx_null_string;
    ngx_uint_t h = lcf->handler;
    if (h == NGX_LLM_AUTO) h = ngx_http_llm_route(r, &model_id);
    if (mcf->counters) (void)ngx_atomic_fetch_add(&mcf->counters->requests[h], 1);
    ngx_int_t krc = ngx_http_llm_check_api_key(r, h);
    if (krc != NGX_OK) return krc;

    switch (h) {
    case NGX_LLM_OFF:
        ngx_http_discard_request_body(r);
        return ngx_http_llm_error(r, NGX_HTTP_NOT_FOUND, NULL, "not_found", "no such endpoint: %V", &r->uri);
    case NGX_LLM_RESPONSE_INPUTS:
        if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) return ngx_http_llm_method_not_allowed(r, "GET, HEAD");
        if (ngx_http_discard_request_body(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
        return ngx_http_llm_response_inputs(r, &model_id);
    case NGX_LLM_RESPONSE_ITEM:
        if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD | NGX_HTTP_DELETE)))
            return ngx_http_llm_method_not_allowed(r, "GET, HEAD, DELETE");
        if (ngx_http_discard_request_body(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
        return ngx_http_llm_response_item(r, &model_id);
    case NGX_LLM_MODELS:
    case NGX_LLM_HEALTH:
    case NGX_LLM_METRICS:
    case NGX_LLM_OLLAMA_TAGS:
    case NGX_LLM_OLLAMA_PS:
    case NGX_LLM_OLLAMA_VERSION:
    case NGX_LLM_TGI_INFO:
    case NGX_LLM_LCPP_PROPS:
    case NGX_LLM_ROOT:
        if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD))) return ngx_http_llm_method_not_allowed(r, "GET, HEAD");
        if (ngx_http_discard_request_body(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
        return h == NGX_LLM_MODELS ? ngx_http_llm_models(r, model_id.len ? &model_id : NULL)
             : h == NGX_LLM_HEALTH ? ngx_http_llm_health(r) : h == NGX_LLM_METRICS ? ngx_http_llm_metrics(r)
             : h == NGX_LLM_OLLAMA_TAGS || h == NGX_LLM_OLLAMA_PS ? ngx_http_llm_ollama_tags(r, h == NGX_LLM_OLLAMA_PS)
             : h == NGX_LLM_OLLAMA_VERSION ? ngx_http_llm_ollama_version(r)
             : h == NGX_LLM_TGI_INFO ? ngx_http_llm_tgi_info(r) : h == NGX_LLM_LCPP_PROPS ? ngx_http_llm_lcpp_props(r)
             : ngx_http_llm_send_text(r, 200, "text/plain", (u_char *)"ngx_llm is running\n", 19);
    default:
        break;
    }
    if (!(r->method & NGX_HTTP_POST)) return ngx_http_llm_method_not_allowed(r, "POST");
    if (r->headers_in.content_length_n > 0 && (size_t)r->headers_in.content_length_n > lcf->max_body) {
        ngx_http_discard_request_body(r);
        return ngx_http_llm_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE, NULL, "body_too_large",
                                  "request body of %O bytes exceeds the limit of %uz bytes",
                                  r->headers_in.content_length_n, lcf->max_body);
    }
    /* The handler kind travels in the request's record until the body is in. */
    ngx_http_llm_log_t *l = ngx_http_llm_log(r);
    if (l == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    l->handler = h;
    r->request_body_in_single_buf = 1;
    ngx_int_t rc = ngx_http_read_client_request_body(r, ngx_http_llm_body_handler);
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) return rc;
    return NGX_DONE;
}
