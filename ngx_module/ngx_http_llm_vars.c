/* The module's variables, for log_format and add_header: what a request did, from its record
 * (ngx_http_llm_log_t). Not found ("-" in a log) where the request never got that far.
 *   $llm_engine             the engine (replica) that took it (llm_engine A B ...)
 *   $llm_model              the model id it was answered with
 *   $llm_prompt_tokens      its prompt tokens (all its prompts)
 *   $llm_completion_tokens  tokens generated for it, so far (a client that went away: until then)
 *   $llm_cached_tokens      prompt tokens the prefix cache served
 *   $llm_ttft               seconds from its submission to the engine to its first token, 0.123
 *   $llm_finish_reason      how it ended: stop, length, tool_calls ... (its first choice's), or the code of the
 *                           error it ended with (timeout, engine_restarted ...); none for a client gone away */
#include "ngx_http_llm_module.h"

enum { VAR_ENGINE, VAR_MODEL, VAR_PROMPT, VAR_COMPLETION, VAR_CACHED, VAR_TTFT, VAR_FINISH };

ngx_http_llm_log_t *ngx_http_llm_log(ngx_http_request_t *r)
{
    ngx_http_llm_log_t *l = ngx_http_get_module_ctx(r, ngx_http_llm_module);
    if (l == NULL && (l = ngx_pcalloc(r->pool, sizeof(*l))) != NULL) ngx_http_set_ctx(r, l, ngx_http_llm_module);
    return l;
}

static ngx_int_t ngx_http_llm_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_http_llm_log_t *l = ngx_http_get_module_ctx(r, ngx_http_llm_module);
    v->not_found = 1;
    if (l == NULL) return NGX_OK;
    u_char *p;
    switch (data) {
    case VAR_ENGINE:
        if (l->eng == NULL) return NGX_OK;
        v->data = l->eng->name.data;
        v->len = l->eng->name.len;
        break;
    case VAR_MODEL:
    case VAR_FINISH:
        if ((p = (u_char *)(data == VAR_MODEL ? l->model : l->finish)) == NULL) return NGX_OK;
        v->data = p;
        v->len = ngx_strlen(p);
        break;
    case VAR_TTFT:
        if (!l->has_ttft || (p = ngx_pnalloc(r->pool, NGX_TIME_T_LEN + 4)) == NULL) return NGX_OK;
        v->data = p;
        v->len = ngx_sprintf(p, "%T.%03M", (time_t)(l->ttft / 1000), l->ttft % 1000) - p;
        break;
    default:
        if (!l->started || (p = ngx_pnalloc(r->pool, NGX_INT32_LEN)) == NULL) return NGX_OK;
        v->data = p;
        v->len = ngx_sprintf(p, "%uD", data == VAR_PROMPT ? l->prompt_tokens : data == VAR_COMPLETION
                                        ? l->completion_tokens : l->cached_tokens) - p;
        break;
    }
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;
    return NGX_OK;
}

ngx_int_t ngx_http_llm_vars_preconf(ngx_conf_t *cf)
{
    static ngx_str_t names[] = { ngx_string("llm_engine"), ngx_string("llm_model"), ngx_string("llm_prompt_tokens"),
                                 ngx_string("llm_completion_tokens"), ngx_string("llm_cached_tokens"),
                                 ngx_string("llm_ttft"), ngx_string("llm_finish_reason") };
    for (ngx_uint_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ngx_http_variable_t *var = ngx_http_add_variable(cf, &names[i], NGX_HTTP_VAR_NOCACHEABLE);
        if (var == NULL) return NGX_ERROR;
        var->get_handler = ngx_http_llm_variable;
        var->data = i;
    }
    return NGX_OK;
}
