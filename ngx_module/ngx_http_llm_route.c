/* llm_models @name ...: several models behind one location, picked by the request's "model".
 *
 * Each model keeps its own named location (its engine, tokenizer, chat template, limits); the location
 * clients call lists them. A request whose body names one of their models (its llm_model_name, the file
 * name, or an llm_model_alias) is passed there with ngx_http_named_location once the body is in; the body
 * stays read, so the named location's handler parses it with its own chat template. /v1/models,
 * /api/tags and /api/ps list every model, GET /v1/models/<id> finds any of them.
 *
 * Names are resolved at postconfiguration, when each server's named locations are known, so that
 * `nginx -t` reports a name that is not there. */
#include "ngx_http_llm_module.h"
#include "llm_ollama.h"

/* A list of routes and the server it was written in, kept until postconfiguration. */
typedef struct {
    ngx_array_t              *routes;  /* ngx_http_llm_route_t */
    ngx_http_core_srv_conf_t *cscf;
    ngx_str_t                 file;
    ngx_uint_t                line;
} ngx_http_llm_route_set_t;

char *ngx_http_llm_models_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    (void)cmd;
    ngx_http_llm_loc_conf_t *lcf = conf;
    ngx_http_llm_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);
    ngx_str_t *v = cf->args->elts;
    if (lcf->routes != NGX_CONF_UNSET_PTR) return "is duplicate";
    lcf->routes = ngx_array_create(cf->pool, cf->args->nelts - 1, sizeof(ngx_http_llm_route_t));
    if (lcf->routes == NULL) return NGX_CONF_ERROR;
    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        if (v[i].len < 2 || v[i].data[0] != '@') {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "llm_models \"%V\": expected a named location (@name)", &v[i]);
            return NGX_CONF_ERROR;
        }
        ngx_http_llm_route_t *rt = ngx_array_push(lcf->routes);
        if (rt == NULL) return NGX_CONF_ERROR;
        rt->name = v[i];
        rt->lcf = NULL;
    }
    if (lcf->routes->nelts > NGX_LLM_MAX_ROUTES) return "takes at most 64 named locations";
    if (mcf->route_sets.elts == NULL &&
        ngx_array_init(&mcf->route_sets, cf->pool, 4, sizeof(ngx_http_llm_route_set_t)) != NGX_OK)
        return NGX_CONF_ERROR;
    ngx_http_llm_route_set_t *s = ngx_array_push(&mcf->route_sets);
    if (s == NULL) return NGX_CONF_ERROR;
    s->routes = lcf->routes;
    s->cscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_core_module);
    s->file = cf->conf_file->file.name;
    s->line = cf->conf_file->line;
    return NGX_CONF_OK;
}

ngx_int_t ngx_http_llm_routes_resolve(ngx_conf_t *cf)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);
    ngx_http_llm_route_set_t *s = mcf->route_sets.elts;
    for (ngx_uint_t i = 0; i < mcf->route_sets.nelts; i++) {
        ngx_http_llm_route_t *rt = s[i].routes->elts;
        for (ngx_uint_t j = 0; j < s[i].routes->nelts; j++) {
            ngx_http_core_loc_conf_t **clcfp = s[i].cscf->named_locations;
            for (; clcfp != NULL && *clcfp != NULL; clcfp++)
                if ((*clcfp)->name.len == rt[j].name.len &&
                    ngx_strncmp((*clcfp)->name.data, rt[j].name.data, rt[j].name.len) == 0)
                    break;
            if (clcfp == NULL || *clcfp == NULL) {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "llm_models \"%V\": no such named location in its server in %V:%ui",
                              &rt[j].name, &s[i].file, s[i].line);
                return NGX_ERROR;
            }
            rt[j].lcf = (*clcfp)->loc_conf[ngx_http_llm_module.ctx_index];
            if (rt[j].lcf->handler == NGX_LLM_OFF || rt[j].lcf->handler == NGX_LLM_METRICS ||
                rt[j].lcf->handler == NGX_LLM_HEALTH) {
                ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                              "llm_models \"%V\": that location serves no model (it needs llm_api) in %V:%ui",
                              &rt[j].name, &s[i].file, s[i].line);
                return NGX_ERROR;
            }
        }
    }
    return NGX_OK;
}

int ngx_http_llm_model_names(ngx_http_llm_loc_conf_t *lcf, const u_char *name, size_t len)
{
    char buf[256];
    const char *id = ngx_http_llm_lcf_model_id(lcf, buf, sizeof buf);
    if (strlen(id) == len && ngx_strncmp(id, name, len) == 0) return 2;
    int any = 0;
    ngx_str_t *a = lcf->model_aliases ? lcf->model_aliases->elts : NULL;
    for (ngx_uint_t i = 0; a != NULL && i < lcf->model_aliases->nelts; i++) {
        if (a[i].len == 1 && a[i].data[0] == '*') any = 1;
        else if (a[i].len == len && ngx_strncmp(a[i].data, name, len) == 0) return 2;
    }
    return any;
}

ngx_uint_t ngx_http_llm_served(ngx_http_request_t *r, ngx_http_llm_loc_conf_t **out)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    ngx_http_core_loc_conf_t *clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);
    ngx_uint_t n = 0;
    out[n++] = lcf;
    if (lcf->routes == NULL || clcf->named) return n;
    ngx_http_llm_route_t *rt = lcf->routes->elts;
    for (ngx_uint_t i = 0; i < lcf->routes->nelts && n < NGX_LLM_MAX_ROUTES + 1; i++) out[n++] = rt[i].lcf;
    return n;
}

ngx_http_llm_loc_conf_t *ngx_http_llm_find_model(ngx_http_request_t *r, const u_char *name, size_t len)
{
    ngx_http_llm_loc_conf_t *lcfs[NGX_LLM_MAX_ROUTES + 1];
    ngx_uint_t n = ngx_http_llm_served(r, lcfs);
    for (int want = 2; want >= 1; want--) /* exact names first, then a location that takes any */
        for (ngx_uint_t i = 0; i < n; i++)
            if (ngx_http_llm_model_names(lcfs[i], name, len) == want) return lcfs[i];
    return NULL;
}

ngx_int_t ngx_http_llm_route_body(ngx_http_request_t *r, ngx_uint_t h, const u_char *body, size_t len)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    ngx_http_core_loc_conf_t *clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);
    if (lcf->routes == NULL || clcf->named) return NGX_DECLINED;
    cJSON *root = cJSON_ParseWithLength((const char *)body, len);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsString(m) && h == NGX_LLM_OLLAMA_SHOW) m = cJSON_GetObjectItemCaseSensitive(root, "name");
    ngx_http_llm_loc_conf_t *to = NULL;
    if (cJSON_IsString(m)) { /* Ollama's names may carry the ":latest" tag */
        int ollama = h >= NGX_LLM_OLLAMA_CHAT && h <= NGX_LLM_OLLAMA_VERSION;
        size_t n = ollama ? llm_ollama_name_len(m->valuestring) : strlen(m->valuestring);
        to = ngx_http_llm_find_model(r, (const u_char *)m->valuestring, n);
    }
    cJSON_Delete(root);
    if (to == NULL || to == lcf) return NGX_DECLINED; /* served here, or not known: this location answers */
    ngx_http_llm_route_t *rt = lcf->routes->elts;
    for (ngx_uint_t i = 0; i < lcf->routes->nelts; i++) {
        if (rt[i].lcf != to) continue;
        ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
        /* counted again where it is served */
        if (mcf->counters) (void)ngx_atomic_fetch_add(&mcf->counters->requests[h], (ngx_atomic_int_t)-1);
        return ngx_http_named_location(r, &rt[i].name);
    }
    return NGX_DECLINED;
}
