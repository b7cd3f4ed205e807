/* llm_engine NAME ...: replicas of one model, an engine each (one a GPU: `--device N`; or one a CPU socket).
 *
 * A new request goes to the ready replica with the fewest requests in flight (its segment's slots in use, which
 * every worker's submissions count at once), ties taken in turn; it stays there until it ends, unless that
 * replica dies before its first token (ngx_http_llm_failover, in ngx_http_llm_generate.c, starts it again on
 * another). A replica that is down or restarting is passed over, so the others go on serving. $llm_engine
 * names the choice (ngx_http_llm_vars.c); /health and /metrics look at every replica (ngx_http_llm_info.c,
 * ngx_http_llm_metrics.c). */
#include "ngx_http_llm_module.h"

char *ngx_http_llm_engine_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    (void)cmd;
    ngx_http_llm_loc_conf_t *lcf = conf;
    ngx_str_t *v = cf->args->elts;
    if (lcf->engine_names != NGX_CONF_UNSET_PTR) return "is duplicate";
    if (cf->args->nelts - 1 > NGX_LLM_MAX_REPLICAS) return "takes at most 16 engines";
    lcf->engine_names = ngx_array_create(cf->pool, cf->args->nelts - 1, sizeof(ngx_str_t));
    if (lcf->engine_names == NULL) return NGX_CONF_ERROR;
    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        for (ngx_uint_t j = 1; j < i; j++)
            if (v[j].len == v[i].len && ngx_strncmp(v[j].data, v[i].data, v[i].len) == 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "llm_engine \"%V\" named twice", &v[i]);
                return NGX_CONF_ERROR;
            }
        ngx_str_t *n = ngx_array_push(lcf->engine_names);
        if (n == NULL) return NGX_CONF_ERROR;
        *n = v[i];
    }
    return NGX_CONF_OK;
}

ngx_http_llm_engine_t *ngx_http_llm_replica(ngx_http_request_t *r, ngx_http_llm_loc_conf_t *lcf, ngx_uint_t i)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    return &((ngx_http_llm_engine_t *)mcf->engines.elts)[lcf->replicas[i]];
}

ngx_http_llm_engine_t *ngx_http_llm_lcf_engine(ngx_http_request_t *r, ngx_http_llm_loc_conf_t *lcf)
{
    llm_api_err e;
    for (ngx_uint_t i = 0; lcf->n_replicas > 1 && i < lcf->n_replicas; i++) {
        ngx_http_llm_engine_t *eng = ngx_http_llm_replica(r, lcf, i);
        if (ngx_http_llm_engine_ready(eng, &e) == LLM_SHM_OK) return eng;
    }
    return ngx_http_llm_replica(r, lcf, 0);
}

ngx_http_llm_engine_t *ngx_http_llm_pick_engine(ngx_http_request_t *r)
{
    static ngx_uint_t turn; /* this worker's: where ties start */
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    ngx_http_llm_engine_t *best = ngx_http_llm_replica(r, lcf, 0);
    if (lcf->n_replicas > 1) {
        int64_t least = -1;
        llm_api_err e;
        for (ngx_uint_t k = 0; k < lcf->n_replicas; k++) {
            ngx_http_llm_engine_t *eng = ngx_http_llm_replica(r, lcf, (turn + k) % lcf->n_replicas);
            if (ngx_http_llm_engine_ready(eng, &e) != LLM_SHM_OK) continue;
            int64_t load = atomic_load(&llm_client_map(eng->client)->metrics->slots_in_use);
            if (least < 0 || load < least) {
                least = load;
                best = eng;
            }
        }
        turn++;
    }
    ngx_http_llm_log_t *l = ngx_http_llm_log(r);
    if (l != NULL) l->eng = best;
    return best;
}
