/* GET /metrics: Prometheus text. The module's counters (its shared zone, summed over workers), then the
 * engine's block: with llm_models every model's engine, with replicas every replica, each series once per
 * engine labelled model="ID" / engine="NAME" under one TYPE line; one engine: unlabelled. */
#include "ngx_http_llm_module.h"

typedef struct { u_char *p, *end; } ngx_http_llm_w;

static void wr(ngx_http_llm_w *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    w->p = ngx_vslprintf(w->p, w->end, fmt, ap);
    va_end(ap);
}

/* One engine's block on /metrics: its labels ("" with one engine, else model="ID" and / or engine="NAME",
 * escaped) and its metrics (NULL: not attached). */
typedef struct {
    const char      *lab;
    llm_shm_metrics *x;
    int              up;
} ngx_http_llm_msrc_t;

/* name, with the source's label and more labels (more: "" or `le="..."`) */
static void wr_name(ngx_http_llm_w *w, const char *name, const char *suffix, const char *lab, const char *more)
{
    wr(w, "%s%s", name, suffix);
    if (*lab || *more) wr(w, "{%s%s%s}", lab, *lab && *more ? "," : "", more);
}

static void wr_hist(ngx_http_llm_w *w, const char *name, const char *help, const ngx_http_llm_msrc_t *src,
                    ngx_uint_t n, size_t off)
{
    wr(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (ngx_uint_t k = 0; k < n; k++) {
        if (src[k].x == NULL) continue;
        llm_shm_hist *h = (llm_shm_hist *)((u_char *)src[k].x + off);
        uint64_t cum = 0;
        char le[32];
        for (int i = 0; i < LLM_HIST_BUCKETS; i++) {
            cum += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
            uint64_t up = llm_hist_bucket_upper_ns(i);
            if (up == UINT64_MAX) snprintf(le, sizeof le, "le=\"+Inf\"");
            else snprintf(le, sizeof le, "le=\"%.6f\"", (double)up / 1e9);
            wr_name(w, name, "_bucket", src[k].lab, le);
            wr(w, " %uL\n", cum);
        }
        wr_name(w, name, "_sum", src[k].lab, "");
        wr(w, " %.6f\n", (double)atomic_load(&h->sum_ns) / 1e9);
        wr_name(w, name, "_count", src[k].lab, "");
        wr(w, " %uL\n", (uint64_t)atomic_load(&h->count));
    }
}

/* A label value as Prometheus reads it: backslash, quote and newline escaped. */
static char *ngx_http_llm_label(ngx_http_request_t *r, const char *key, const char *v)
{
    size_t n = strlen(key) + 4;
    for (const char *p = v; *p; p++) n += (*p == '\\' || *p == '"' || *p == '\n') ? 2 : 1;
    char *o = ngx_pnalloc(r->pool, n), *q = o;
    if (o == NULL) return NULL;
    q += sprintf(q, "%s=\"", key);
    for (const char *p = v; *p; p++) {
        if (*p == '\\' || *p == '"' || *p == '\n') *q++ = '\\';
        *q++ = *p == '\n' ? 'n' : *p;
    }
    *q++ = '"';
    *q = 0;
    return o;
}



ngx_int_t ngx_http_llm_metrics(ngx_http_request_t *r)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    ngx_http_llm_loc_conf_t *lcfs[NGX_LLM_MAX_ROUTES + 1];
    ngx_uint_t nm = ngx_http_llm_served(r, lcfs), n = 0, replicas = 0;
    for (ngx_uint_t k = 0; k < nm; k++) {
        n += lcfs[k]->n_replicas > 0 ? lcfs[k]->n_replicas : 1;
        replicas |= lcfs[k]->n_replicas > 1;
    }
    ngx_http_llm_msrc_t *src = ngx_pnalloc(r->pool, n * sizeof(*src));
    size_t cap = 16 * 1024 + n * 24 * 1024;
    if (src == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    u_char *buf = ngx_pnalloc(r->pool, cap);
    if (buf == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    ngx_http_llm_w w = { buf, buf + cap };

    ngx_http_llm_counters_t *c = mcf->counters;
    if (c) {
        static const char *ep[] = { "other", "auto", "completions", "chat", "models", "tokenize", "detokenize",
                                    "health", "metrics", "embeddings", "responses",
                                    "messages", "count_tokens", "response_item",
                                    "response_input_items", "rerank", "ollama_chat", "ollama_generate", "ollama_embed", "ollama_embeddings",
                                    "ollama_tags", "ollama_ps", "ollama_show", "ollama_version", "root",
                                    "tgi", "tgi_generate", "tgi_generate_stream", "tgi_info",
                                    "llamacpp_completion", "llamacpp_props", "llamacpp_infill" };
        wr(&w, "# HELP llm_http_requests_total Requests seen by the nginx module, by endpoint.\n"
               "# TYPE llm_http_requests_total counter\n");
        for (int i = 0; i < NGX_LLM_N_HANDLERS; i++)
            if (i != NGX_LLM_AUTO) wr(&w, "llm_http_requests_total{endpoint=\"%s\"} %uA\n", ep[i], c->requests[i]);
        wr(&w, "# HELP llm_http_responses_total Responses sent by the nginx module, by status.\n"
               "# TYPE llm_http_responses_total counter\n");
        struct { const char *s; ngx_atomic_t v; } st[] = {
            { "2xx", c->status_2xx }, { "400", c->status_400 }, { "401", c->status_401 }, { "404", c->status_404 }, { "405", c->status_405 },
            { "413", c->status_413 }, { "422", c->status_422 }, { "429", c->status_429 }, { "503", c->status_503 }, { "504", c->status_504 },
            { "5xx", c->status_5xx },
        };
        for (size_t i = 0; i < sizeof st / sizeof st[0]; i++)
            wr(&w, "llm_http_responses_total{status=\"%s\"} %uA\n", st[i].s, st[i].v);
        wr(&w, "# TYPE llm_http_streams_total counter\nllm_http_streams_total %uA\n", c->streams);
        wr(&w, "# TYPE llm_http_client_aborts_total counter\nllm_http_client_aborts_total %uA\n", c->client_aborts);
        wr(&w, "# TYPE llm_http_prompt_tokens_total counter\nllm_http_prompt_tokens_total %uA\n", c->prompt_tokens);
        wr(&w, "# TYPE llm_http_completion_tokens_total counter\nllm_http_completion_tokens_total %uA\n",
           c->completion_tokens);
    }

    n = 0;
    for (ngx_uint_t k = 0; k < nm; k++) {
        char id[256], name[LLM_SHM_MAX_NAME];
        llm_api_err e;
        const char *model = nm > 1 ? ngx_http_llm_label(r, "model", ngx_http_llm_lcf_model_id(lcfs[k], id, sizeof id)) : "";
        for (ngx_uint_t i = 0; i == 0 || i < lcfs[k]->n_replicas; i++, n++) {
            ngx_http_llm_engine_t *eng = ngx_http_llm_replica(r, lcfs[k], i);
            src[n].up = ngx_http_llm_engine_ready(eng, &e) == LLM_SHM_OK;
            const llm_shm_map *m = eng->client ? llm_client_map(eng->client) : NULL;
            src[n].x = m ? m->metrics : NULL;
            ngx_cpystrn((u_char *)name, eng->name.data, ngx_min(sizeof name, eng->name.len + 1));
            const char *engine = replicas ? ngx_http_llm_label(r, "engine", name) : "";
            if (model == NULL || engine == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
            char *lab = ngx_pnalloc(r->pool, strlen(model) + strlen(engine) + 2);
            if (lab == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
            sprintf(lab, "%s%s%s", model, *model && *engine ? "," : "", engine);
            src[n].lab = lab;
        }
    }
    wr(&w, "# HELP llm_engine_up 1 when the engine is attached and ready.\n# TYPE llm_engine_up gauge\n");
    for (ngx_uint_t k = 0; k < n; k++) {
        wr_name(&w, "llm_engine_up", "", src[k].lab, "");
        wr(&w, " %d\n", src[k].up);
    }
    /* each series: HELP and TYPE once, then a sample a model */
#define FAMILY(name, type, help, value) do {                                             \
        wr(&w, "# HELP " name " " help "\n# TYPE " name " " type "\n");                \
        for (ngx_uint_t k = 0; k < n; k++) {                                            \
            llm_shm_metrics *x = src[k].x;                                              \
            if (x == NULL) continue;                                                    \
            wr_name(&w, name, "", src[k].lab, "");                                      \
            wr(&w, " %L\n", (int64_t)(value));                                          \
        }                                                                               \
    } while (0)
#define CTR(name, field, help) FAMILY(name, "counter", help, atomic_load(&x->field))
#define GAU(name, field, help) FAMILY(name, "gauge", help, atomic_load(&x->field))
    CTR("llm_requests_submitted_total", submitted, "Requests submitted to the engine.");
    CTR("llm_requests_finished_total", finished, "Requests the engine finished.");
    CTR("llm_requests_cancelled_total", cancelled, "Requests cancelled.");
    CTR("llm_requests_failed_total", failed, "Requests that failed in the engine.");
    CTR("llm_rejected_no_slot_total", rejected_no_slot, "Submissions refused: every slot busy.");
    CTR("llm_rejected_ring_full_total", rejected_ring_full, "Submissions refused: ring full.");
    CTR("llm_rejected_not_ready_total", rejected_not_ready, "Submissions refused: engine not ready.");
    CTR("llm_reclaimed_slots_total", reclaimed_slots, "Slots reclaimed from dead clients.");
    CTR("llm_prompt_tokens_total", tokens_in, "Prompt tokens processed.");
    CTR("llm_generation_tokens_total", tokens_out, "Tokens generated.");
    GAU("llm_slots_in_use", slots_in_use, "Request slots not free.");
    GAU("llm_requests_running", running, "Requests running.");
    GAU("llm_batch_size", batch_size, "Sequences in the current batch.");
    GAU("llm_kv_blocks_used", kv_blocks_used, "KV-cache blocks in use.");
    GAU("llm_kv_blocks_free", kv_blocks_free, "KV-cache blocks free (prefix-cache blocks included).");
    GAU("llm_kv_blocks_cached", kv_blocks_cached, "Free KV-cache blocks kept for the prefix cache.");
    GAU("llm_kv_window_blocks_used", kv_window_blocks_used,
        "Window-pool blocks in use (sliding-window layers, --swa-kv window; 0 without one).");
    GAU("llm_kv_window_blocks_free", kv_window_blocks_free, "Window-pool blocks free (0 without one).");
    CTR("llm_prompt_tokens_cached_total", tokens_cached,
        "Prompt tokens served by the prefix cache instead of computed.");
    GAU("llm_queue_depth", queue_depth, "Requests waiting in the engine for the batch.");
    GAU("llm_prompt_tokens_pending", prefill_pending, "Prompt tokens of the engine's requests not computed yet.");
    CTR("llm_preemptions_total", preemptions, "Running requests preempted (KV pool full or memory cap).");
    CTR("llm_spec_draft_tokens_total", spec_drafted, "Tokens drafted for speculation (serve --spec-ngram or --draft-model).");
    CTR("llm_spec_accepted_tokens_total", spec_accepted, "Drafted tokens the model confirmed (kept).");
    CTR("llm_oom_shrinks_total", oom_shrinks, "Engine steps the backend had no memory for (steps capped smaller).");
    CTR("llm_oom_recoveries_total", oom_recoveries, "Memory caps lifted after load fell.");
    GAU("llm_mem_cap_tokens", mem_cap_tokens, "Tokens per step under the memory cap (0 = no cap).");
    GAU("llm_mem_cap_batch", mem_cap_batch, "Sequences per step under the memory cap (0 = no cap).");
    GAU("llm_waiters", waiters, "Attached clients.");
#undef CTR
#undef GAU
#undef FAMILY
    wr_hist(&w, "llm_step_seconds", "Engine step time.", src, n, offsetof(llm_shm_metrics, step_time));
    wr_hist(&w, "llm_time_to_first_token_seconds", "Time to first token.", src, n, offsetof(llm_shm_metrics, ttft));
    wr_hist(&w, "llm_time_per_output_token_seconds", "Time per output token.", src, n,
            offsetof(llm_shm_metrics, tpot));
    wr_hist(&w, "llm_queue_time_seconds", "Time from submission to start.", src, n,
            offsetof(llm_shm_metrics, queue_time));
    if (w.p == w.end) return ngx_http_llm_error(r, 500, NULL, NULL, "metrics text past its buffer");
    return ngx_http_llm_send_text(r, 200, "text/plain; version=0.0.4", buf, (size_t)(w.p - buf));
}
