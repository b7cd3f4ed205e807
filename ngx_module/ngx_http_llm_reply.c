/* Sending whole responses: JSON bodies, OpenAI-shaped errors, plain text. */
#include "ngx_http_llm_module.h"
#include "ngx_http_llm_messages_out.h"
#include "llm_ollama.h"
#include "llm_tgi.h"

void ngx_http_llm_count_status(ngx_http_request_t *r, ngx_uint_t status)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    ngx_http_llm_counters_t *c = mcf->counters;
    if (c == NULL) return;
    ngx_atomic_t *a = status < 300 ? &c->status_2xx : status == 400 ? &c->status_400 : status == 401 ? &c->status_401 : status == 404 ? &c->status_404
                    : status == 405 ? &c->status_405 : status == 413 ? &c->status_413 : status == 422 ? &c->status_422 : status == 429 ? &c->status_429
                    : status == 503 ? &c->status_503 : status == 504 ? &c->status_504 : &c->status_5xx;
    (void)ngx_atomic_fetch_add(a, 1);
}

ngx_int_t ngx_http_llm_send_text(ngx_http_request_t *r, ngx_uint_t status, const char *ctype, u_char *data, size_t len)
{
    ngx_http_llm_count_status(r, status);
    r->headers_out.status = status;
    if (status == 422) { /* (nginx has no reason phrase for it) */
        ngx_str_set(&r->headers_out.status_line, "422 Unprocessable Entity");
    }
    r->headers_out.content_length_n = (off_t)len;
    r->headers_out.content_type.data = (u_char *)ctype;
    r->headers_out.content_type.len = ngx_strlen(ctype);
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;
    ngx_int_t rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) return rc;
    ngx_buf_t *b = ngx_calloc_buf(r->pool);
    if (b == NULL) return NGX_ERROR;
    b->pos = data;
    b->last = data + len;
    b->memory = len ? 1 : 0;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;
    ngx_chain_t out = { b, NULL };
    return ngx_http_output_filter(r, &out);
}

ngx_int_t ngx_http_llm_send_json(ngx_http_request_t *r, ngx_uint_t status, const char *json, size_t len)
{
    u_char *p = ngx_pnalloc(r->pool, len + 1);
    if (p == NULL) return NGX_ERROR;
    ngx_memcpy(p, json, len);
    p[len] = '\n';
    return ngx_http_llm_send_text(r, status, "application/json", p, len + 1);
}

ngx_int_t ngx_http_llm_send_cjson(ngx_http_request_t *r, ngx_uint_t status, cJSON *obj)
{
    char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (s == NULL) return ngx_http_llm_error(r, 500, NULL, NULL, "out of memory formatting the response");
    ngx_int_t rc = ngx_http_llm_send_json(r, status, s, strlen(s));
    cJSON_free(s);
    return rc;
}

ngx_int_t ngx_http_llm_send_error(ngx_http_request_t *r, const llm_api_err *e)
{
    if (e->status == 429 || e->status == 503) {
        ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);
        if (h) {
            h->hash = 1;
            ngx_str_set(&h->key, "Retry-After");
            ngx_str_set(&h->value, "1");
        }
    }
    /* Anthropic's clients read {"type": "error", "error": {"type", "message"}}, Ollama's {"error": message} */
    ngx_uint_t h = ngx_http_llm_endpoint(r);
    /* TGI's clients read {"error", "error_type"}, and a refused request is its 422 */
    int tgi = h >= NGX_LLM_TGI && h <= NGX_LLM_TGI_INFO;
    char *s = h == NGX_LLM_MESSAGES || h == NGX_LLM_COUNT_TOKENS ? ngx_http_llm_ms_error_json(e)
            : h >= NGX_LLM_OLLAMA_CHAT && h <= NGX_LLM_OLLAMA_VERSION ? llm_ollama_error_json(e)
            : tgi ? llm_tgi_error_json(e) : llm_api_error_json(e);
    if (s == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    ngx_int_t rc = ngx_http_llm_send_json(r, (ngx_uint_t)(tgi ? llm_tgi_status(e->status) : e->status), s, strlen(s));
    cJSON_free(s);
    return rc;
}

ngx_int_t ngx_http_llm_error(ngx_http_request_t *r, int status, const char *param, const char *code,
                             const char *fmt, ...)
{
    llm_api_err e;
    u_char msg[512];
    va_list ap;
    va_start(ap, fmt);
    u_char *end = ngx_vslprintf(msg, msg + sizeof msg - 1, fmt, ap); /* nginx formats: %V, %uz, %O */
    va_end(ap);
    *end = 0;
    llm_api_seterr(&e, status, param, code, "%s", (char *)msg);
    return ngx_http_llm_send_error(r, &e);
}
