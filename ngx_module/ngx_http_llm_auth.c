/* API keys (llm_api_key): "Authorization: Bearer <key>" on every endpoint but /health and /metrics, as
 * OpenAI's API and vLLM's --api-key ask for it, or "x-api-key: <key>", as Anthropic's API and SDKs send it; a
 * missing or wrong key is a 401 in the endpoint's error shape. */
#include "ngx_http_llm_module.h"

char *ngx_http_llm_api_key_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    (void)cmd;
    ngx_http_llm_loc_conf_t *lcf = conf;
    ngx_str_t *v = cf->args->elts;
    if (lcf->api_keys != NGX_CONF_UNSET_PTR) return "is duplicate";
    if (cf->args->nelts == 2 && ngx_strcmp(v[1].data, "off") == 0) {
        lcf->api_keys = NULL; /* no check here, whatever an enclosing level says */
        return NGX_CONF_OK;
    }
    lcf->api_keys = ngx_array_create(cf->pool, cf->args->nelts - 1, sizeof(ngx_str_t));
    if (lcf->api_keys == NULL) return NGX_CONF_ERROR;
    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        if (v[i].len == 0) return "takes non-empty keys";
        ngx_str_t *k = ngx_array_push(lcf->api_keys);
        if (k == NULL) return NGX_CONF_ERROR;
        *k = v[i];
    }
    return NGX_CONF_OK;
}

/* Equal without an early exit on the first differing byte (the length is not hidden). */
static int ngx_http_llm_key_equal(const ngx_str_t *a, const u_char *b, size_t len)
{
    if (a->len != len) return 0;
    u_char d = 0;
    for (size_t i = 0; i < len; i++) d |= a->data[i] ^ b[i];
    return d == 0;
}

static int ngx_http_llm_key_ok(const ngx_array_t *keys, const u_char *p, size_t len)
{
    int ok = 0;
    ngx_str_t *k = keys->elts;
    for (ngx_uint_t i = 0; i < keys->nelts; i++) ok |= ngx_http_llm_key_equal(&k[i], p, len);
    return ok;
}

/* The request's x-api-key header, or NULL. */
static ngx_table_elt_t *ngx_http_llm_x_api_key(ngx_http_request_t *r)
{
    for (ngx_list_part_t *part = &r->headers_in.headers.part; part != NULL; part = part->next) {
        ngx_table_elt_t *h = part->elts;
        for (ngx_uint_t i = 0; i < part->nelts; i++)
            if (h[i].key.len == 9 && ngx_strncasecmp(h[i].key.data, (u_char *)"x-api-key", 9) == 0) return &h[i];
    }
    return NULL;
}

ngx_int_t ngx_http_llm_check_api_key(ngx_http_request_t *r, ngx_uint_t h)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    if (lcf->api_keys == NULL || lcf->api_keys->nelts == 0 || h == NGX_LLM_HEALTH || h == NGX_LLM_METRICS ||
        h == NGX_LLM_OFF)
        return NGX_OK;
    ngx_table_elt_t *a = r->headers_in.authorization, *x = a == NULL ? ngx_http_llm_x_api_key(r) : NULL;
    const char *why = "missing API key: send \"Authorization: Bearer <key>\" (or \"x-api-key: <key>\")";
    if (x != NULL) {
        if (ngx_http_llm_key_ok(lcf->api_keys, x->value.data, x->value.len)) return NGX_OK;
        why = "incorrect API key";
    } else if (a != NULL) {
        u_char *p = a->value.data, *end = p + a->value.len;
        if (a->value.len > 7 && ngx_strncasecmp(p, (u_char *)"bearer ", 7) == 0) {
            p += 7;
            while (p < end && *p == ' ') p++;
            if (ngx_http_llm_key_ok(lcf->api_keys, p, (size_t)(end - p))) return NGX_OK;
            why = "incorrect API key";
        } else {
            why = "the Authorization header must be \"Bearer <key>\"";
        }
    }
    if (ngx_http_discard_request_body(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    ngx_table_elt_t *w = ngx_list_push(&r->headers_out.headers);
    if (w != NULL) {
        w->hash = 1;
        ngx_str_set(&w->key, "WWW-Authenticate");
        ngx_str_set(&w->value, "Bearer");
    }
    return ngx_http_llm_error(r, NGX_HTTP_UNAUTHORIZED, NULL, "invalid_api_key", "%s", why);
}
