/* Ollama's API, the endpoints that are not a generation: GET /api/tags, /api/ps, POST /api/show,
 * GET /api/version, and /api/generate without a prompt (its call that loads a model). /api/chat and /api/generate themselves run as
 * chat / completions requests (llm_ollama.h) answered by ngx_http_llm_ollama_out.h's builder. */
#include "ngx_http_llm_module.h"
#include "ngx_http_llm_ollama_out.h"
#include "llm_ollama.h"
#include "llm_tools.h"
#include "gguf.h"

#include <sys/stat.h>
#include <time.h>

/* The Ollama API version whose endpoints and fields this module answers (clients check it). */
#define NGX_LLM_OLLAMA_API_VERSION "0.12.0"

/* llama.cpp's names of general.file_type (llama_ftype) for the types files come in. */
static const char *ngx_http_llm_ftype_name(uint32_t t)
{
    static const struct { uint32_t t; const char *name; } names[] = {
        { 0, "F32" }, { 1, "F16" }, { 2, "Q4_0" }, { 3, "Q4_1" }, { 7, "Q8_0" }, { 8, "Q5_0" }, { 9, "Q5_1" },
        { 10, "Q2_K" }, { 11, "Q3_K_S" }, { 12, "Q3_K_M" }, { 13, "Q3_K_L" }, { 14, "Q4_K_S" }, { 15, "Q4_K_M" },
        { 16, "Q5_K_S" }, { 17, "Q5_K_M" }, { 18, "Q6_K" }, { 25, "IQ4_NL" }, { 30, "IQ4_XS" }, { 32, "BF16" },
        { 38, "MXFP4_MOE" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].t == t) return names[i].name;
    return "";
}

void ngx_http_llm_ollama_facts(const char *path, ngx_http_llm_tok_t *t)
{
    struct stat st;
    t->family[0] = t->param_size[0] = t->quant[0] = 0;
    t->format = "";
    t->file_size = 0;
    if (stat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) { /* a Hugging Face directory: its size is its files' */
        t->format = "safetensors";
        return;
    }
    t->file_size = (double)st.st_size;
    size_t n = strlen(path);
    if (n < 5 || strcmp(path + n - 5, ".gguf") != 0) return;
    t->format = "gguf";
    llm_err err = { "" };
    gguf_ctx *g = gguf_open(path, &err);
    if (g == NULL) return;
    (void)gguf_get_str(g, "general.architecture", t->family, sizeof t->family);
    uint32_t ft;
    if (gguf_get_u32(g, "general.file_type", &ft) == 0)
        snprintf(t->quant, sizeof t->quant, "%s", ngx_http_llm_ftype_name(ft));
    double p = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        p += (double)g->tensors[i].ne[0] * (double)g->tensors[i].ne[1] * (double)g->tensors[i].ne[2] *
             (double)g->tensors[i].ne[3];
    if (p >= 1e9) snprintf(t->param_size, sizeof t->param_size, "%.1fB", p / 1e9);
    else if (p >= 1e6) snprintf(t->param_size, sizeof t->param_size, "%.0fM", p / 1e6);
    else if (p > 0) snprintf(t->param_size, sizeof t->param_size, "%.0fK", p / 1e3);
    gguf_close(g);
}

static cJSON *ngx_http_llm_ollama_details(ngx_http_llm_loc_conf_t *lcf)
{
    const ngx_http_llm_tok_t *t = lcf->tok;
    cJSON *d = cJSON_CreateObject();
    if (d == NULL) return NULL;
    cJSON_AddStringToObject(d, "parent_model", "");
    cJSON_AddStringToObject(d, "format", t ? t->format : "");
    cJSON_AddStringToObject(d, "family", t ? t->family : "");
    if (t && t->family[0]) {
        cJSON *f = cJSON_AddArrayToObject(d, "families");
        if (f) cJSON_AddItemToArray(f, cJSON_CreateString(t->family));
    } else {
        cJSON_AddNullToObject(d, "families");
    }
    cJSON_AddStringToObject(d, "parameter_size", t ? t->param_size : "");
    cJSON_AddStringToObject(d, "quantization_level", t ? t->quant : "");
    return d;
}

/* modified_at: when the module started serving the model (RFC 3339). */
static void ngx_http_llm_ollama_modified(ngx_http_request_t *r, char *at, size_t cap)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    struct tm tm;
    gmtime_r(&mcf->started, &tm);
    strftime(at, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* One entry of /api/tags for the name given; of /api/ps (ps): expires_at (never: the engine holds the model
 * until it stops), size_vram (not known to the module: 0) and context_length as well. */
static cJSON *ngx_http_llm_ollama_entry(ngx_http_request_t *r, ngx_http_llm_loc_conf_t *lcf, const char *name, int ps,
                                        uint32_t ctx_len)
{
    double size = lcf->tok ? lcf->tok->file_size : 0;
    char at[32];
    ngx_http_llm_ollama_modified(r, at, sizeof at);
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NULL;
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "model", name);
    cJSON_AddStringToObject(o, "modified_at", at);
    cJSON_AddNumberToObject(o, "size", size);
    cJSON_AddStringToObject(o, "digest", "");
    cJSON_AddItemToObject(o, "details", ngx_http_llm_ollama_details(lcf));
    if (ps) {
        cJSON_AddStringToObject(o, "expires_at", "9999-12-31T23:59:59Z");
        cJSON_AddNumberToObject(o, "size_vram", 0);
        cJSON_AddNumberToObject(o, "context_length", ctx_len);
    }
    return o;
}

ngx_int_t ngx_http_llm_ollama_tags(ngx_http_request_t *r, int ps)
{
    char buf[256];
    cJSON *o = cJSON_CreateObject(), *models = o ? cJSON_AddArrayToObject(o, "models") : NULL;
    if (models == NULL) { cJSON_Delete(o); return NGX_HTTP_INTERNAL_SERVER_ERROR; }
    /* every model served here (this location's, then its llm_models'), with its aliases as models of their own
     * ("*" is not a name); /api/ps: those whose engine is ready (loaded) */
    ngx_http_llm_loc_conf_t *lcfs[NGX_LLM_MAX_ROUTES + 1];
    ngx_uint_t n = ngx_http_llm_served(r, lcfs);
    for (ngx_uint_t k = 0; k < n; k++) {
        uint32_t ctx_len = 0;
        if (ps) {
            llm_api_err e;
            ngx_http_llm_engine_t *eng = ngx_http_llm_lcf_engine(r, lcfs[k]);
            if (ngx_http_llm_engine_ready(eng, &e) != LLM_SHM_OK) continue;
            ctx_len = llm_client_map(eng->client)->hdr->model.ctx_len;
        }
        const char *id = ngx_http_llm_lcf_model_id(lcfs[k], buf, sizeof buf);
        cJSON_AddItemToArray(models, ngx_http_llm_ollama_entry(r, lcfs[k], id, ps, ctx_len));
        ngx_str_t *a = lcfs[k]->model_aliases ? lcfs[k]->model_aliases->elts : NULL;
        for (ngx_uint_t i = 0; a != NULL && i < lcfs[k]->model_aliases->nelts; i++) {
            if (a[i].len == 1 && a[i].data[0] == '*') continue;
            char *name = ngx_pnalloc(r->pool, a[i].len + 1);
            if (name == NULL) { cJSON_Delete(o); return NGX_HTTP_INTERNAL_SERVER_ERROR; }
            *(char *)ngx_cpymem(name, a[i].data, a[i].len) = 0;
            cJSON_AddItemToArray(models, ngx_http_llm_ollama_entry(r, lcfs[k], name, ps, ctx_len));
        }
    }
    return ngx_http_llm_send_cjson(r, 200, o);
}

ngx_int_t ngx_http_llm_ollama_version(ngx_http_request_t *r)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL || !cJSON_AddStringToObject(o, "version", NGX_LLM_OLLAMA_API_VERSION)) {
        cJSON_Delete(o);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    return ngx_http_llm_send_cjson(r, 200, o);
}

/* The model a body names ("model", or the older "name"), its ":latest" tag dropped; NULL when none. */
static char *ngx_http_llm_ollama_name(ngx_http_request_t *r, const cJSON *root)
{
    const cJSON *m = llm_api_field(root, "model");
    if (!cJSON_IsString(m)) m = llm_api_field(root, "name");
    if (!cJSON_IsString(m)) return NULL;
    size_t n = llm_ollama_name_len(m->valuestring);
    char *s = ngx_pnalloc(r->pool, n + 1);
    if (s != NULL) *(char *)ngx_cpymem(s, m->valuestring, n) = 0;
    return s;
}

ngx_int_t ngx_http_llm_ollama_show_body(ngx_http_request_t *r, const char *body, size_t len)
{
    llm_api_err e;
    cJSON *root = cJSON_ParseWithLength(body, len);
    char *name = root ? ngx_http_llm_ollama_name(r, root) : NULL;
    cJSON_Delete(root);
    if (name == NULL) {
        llm_api_seterr(&e, 400, "model", "missing_required_parameter", "a JSON body with 'model' (a string) is required");
        return ngx_http_llm_send_error(r, &e);
    }
    if (ngx_http_llm_check_model(r, name, &e)) return ngx_http_llm_send_error(r, &e);
    return ngx_http_llm_ollama_show(r, name);
}

ngx_int_t ngx_http_llm_ollama_show(ngx_http_request_t *r, const char *name)
{
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    ngx_http_llm_engine_t *eng = ngx_http_llm_engine(r);
    if (eng->client) (void)llm_client_attach(eng->client); /* for the context length and the kind; absence is fine */
    const llm_shm_map *m = eng->client ? llm_client_map(eng->client) : NULL;
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    cJSON_AddStringToObject(o, "modelfile", "");
    cJSON_AddStringToObject(o, "parameters", "");
    cJSON_AddStringToObject(o, "template", "");
    cJSON_AddItemToObject(o, "details", ngx_http_llm_ollama_details(lcf));
    cJSON *info = cJSON_AddObjectToObject(o, "model_info");
    if (info != NULL) {
        cJSON_AddStringToObject(info, "general.name", name);
        if (m != NULL) cJSON_AddNumberToObject(info, "general.context_length", m->hdr->model.ctx_len);
    }
    /* what the model can be asked: completion (a decoder), embedding (an engine pools hidden states for any
     * model, an encoder's only job), tools (its chat format has function calling), thinking (<think>) */
    cJSON *caps = cJSON_AddArrayToObject(o, "capabilities");
    int encoder = m != NULL && m->hdr->model.encoder;
    llm_chat_format chat = lcf->chat_format ? (llm_chat_format)lcf->chat_format
                         : lcf->tok ? lcf->tok->chat : LLM_CHAT_LLAMA3;
    if (caps != NULL) {
        if (!encoder) cJSON_AddItemToArray(caps, cJSON_CreateString("completion"));
        cJSON_AddItemToArray(caps, cJSON_CreateString("embedding"));
        if (!encoder && llm_tools_supported(chat)) cJSON_AddItemToArray(caps, cJSON_CreateString("tools"));
        if (!encoder && lcf->tok && lcf->tok->think && lcf->reasoning)
            cJSON_AddItemToArray(caps, cJSON_CreateString("thinking"));
    }
    char at[32];
    ngx_http_llm_ollama_modified(r, at, sizeof at);
    cJSON_AddStringToObject(o, "modified_at", at);
    return ngx_http_llm_send_cjson(r, 200, o);
}

ngx_int_t ngx_http_llm_ollama_load(ngx_http_request_t *r, const llm_api_req *q)
{
    llm_api_err e;
    char buf[256];
    if (ngx_http_llm_engine_ready(ngx_http_llm_engine(r), &e) != LLM_SHM_OK) return ngx_http_llm_send_error(r, &e);
    cJSON *o = ngx_http_llm_ol_load(q->model ? q->model : ngx_http_llm_model_id(r, buf, sizeof buf));
    return o ? ngx_http_llm_send_cjson(r, 200, o) : NGX_HTTP_INTERNAL_SERVER_ERROR;
}
