/* `llm_status;`: the dashboard's JSON. Current counters and gauges of the
 * engine's metrics block, its state, and the last ten minutes of one-second
 * samples. The samples live in a shared zone ("llm_status") so every worker
 * answers with the same history: each worker runs a one-second timer, and the
 * first one to take the zone's lock when a sample is due writes it. Latency
 * percentiles in a sample come from the histogram buckets gained since the
 * previous sample (a moving window), not from the totals since start. */
#include <math.h>

#include "ngx_http_llm_module.h"

#define NGX_LLM_STATUS_SAMPLES 600   /* ten minutes at one a second */
#define NGX_LLM_STATUS_PERIOD  1000  /* ms */

enum { H_TTFT, H_TPOT, H_STEP, H_QUEUE, H_N };

/* One sample; a latency of -1 means no observation in its interval (null in JSON). */
typedef struct {
    int64_t t_ms;                      /* wall clock, ms since the epoch */
    int32_t up;                        /* engine attached and ready */
    float   tokens_out_per_s, tokens_in_per_s, finished_per_s, failed_per_s;
    float   tokens_cached_per_s;       /* prompt tokens served by the prefix cache */
    float   batch_size, running, queue_depth, kv_blocks_used, kv_blocks_free, slots_in_use;
    float   kv_window_blocks_used;     /* the window pool (serve --swa-kv window) */
    float   preempted;                 /* preemptions in the interval */
    float   max_batch_size, batch_timeout_ms, max_batched_tokens; /* knobs in force (tuner) */
    float   mem_cap_tokens;            /* memory cap on a step's tokens after out of memory (0 = none) */
    float   p50_ms[H_N], p99_ms[H_N];
} ngx_http_llm_sample_t;

/* The zone: the ring of samples and what the next sample's differences start from. */
typedef struct {
    ngx_uint_t            head, count;        /* next index to write, samples held */
    ngx_msec_t            last_ms;            /* ngx_current_msec of the last sample (same clock in every worker) */
    uint64_t              generation;         /* engine the base counters below came from (0 = none) */
    uint64_t              tokens_out, tokens_in, tokens_cached, finished, failed, preemptions;
    uint64_t              hist[H_N][LLM_HIST_BUCKETS];
    ngx_http_llm_sample_t s[NGX_LLM_STATUS_SAMPLES];
} ngx_http_llm_history_t;

typedef struct {
    ngx_slab_pool_t         *shpool;
    ngx_http_llm_history_t  *hist;
    ngx_http_llm_loc_conf_t *lcf;      /* the first llm_status location: its engine is the one sampled */
    ngx_event_t              timer;    /* per worker (after fork) */
    ngx_cycle_t             *cycle;
} ngx_http_llm_status_ctx_t;

static ngx_str_t ngx_http_llm_status_zone_name = ngx_string("llm_status");

static llm_shm_hist *hist_of(llm_shm_metrics *x, int i)
{
    return i == H_TTFT ? &x->ttft : i == H_TPOT ? &x->tpot : i == H_STEP ? &x->step_time : &x->queue_time;
}

/* Quantile of the buckets gained since base, in ms; -1 when nothing was observed. */
static float window_quantile(const llm_shm_hist *now, const uint64_t *base, double q)
{
    llm_shm_hist d;
    uint64_t n = 0;
    memset(&d, 0, sizeof d);
    for (int b = 0; b < LLM_HIST_BUCKETS; b++) {
        uint64_t v = atomic_load_explicit(&((llm_shm_hist *)now)->bucket[b], memory_order_relaxed);
        v = v >= base[b] ? v - base[b] : 0;
        atomic_store_explicit(&d.bucket[b], v, memory_order_relaxed);
        n += v;
    }
    if (n == 0) return -1.0f;
    atomic_store_explicit(&d.count, n, memory_order_relaxed);
    uint64_t ns = llm_hist_quantile(&d, q);
    if (ns == UINT64_MAX) ns = llm_hist_bucket_upper_ns(LLM_HIST_BUCKETS - 2); /* +Inf bucket: the largest finite bound */
    return (float)((double)ns / 1e6);
}

static uint64_t ld(_Atomic uint64_t *a) { return atomic_load_explicit(a, memory_order_relaxed); }
static int64_t  ldi(_Atomic int64_t *a) { return atomic_load_explicit(a, memory_order_relaxed); }

static float rate(uint64_t now, uint64_t base, double secs)
{
    return now >= base && secs > 0 ? (float)((double)(now - base) / secs) : 0.0f;
}

/* Takes one sample into the ring (zone locked). m is NULL when the engine is unavailable. */
static void ngx_http_llm_status_sample(ngx_http_llm_history_t *h, const llm_shm_map *m, int up)
{
    ngx_http_llm_sample_t *s = &h->s[h->head];
    double secs = h->count ? (double)(ngx_current_msec - h->last_ms) / 1000.0 : 0;
    ngx_memzero(s, sizeof *s);
    ngx_time_t *tp = ngx_timeofday();
    s->t_ms = (int64_t)tp->sec * 1000 + tp->msec;
    s->up = up;
    for (int i = 0; i < H_N; i++) s->p50_ms[i] = s->p99_ms[i] = -1.0f;
    if (m) {
        llm_shm_metrics *x = m->metrics;
        /* A new engine starts its counters from zero: its first sample has no differences. */
        int same = h->generation == m->hdr->generation;
        uint64_t out = ld(&x->tokens_out), in = ld(&x->tokens_in), fin = ld(&x->finished), fail = ld(&x->failed);
        uint64_t pre = ld(&x->preemptions), cached = ld(&x->tokens_cached);
        if (same) {
            s->tokens_out_per_s = rate(out, h->tokens_out, secs);
            s->tokens_in_per_s = rate(in, h->tokens_in, secs);
            s->tokens_cached_per_s = rate(cached, h->tokens_cached, secs);
            s->finished_per_s = rate(fin, h->finished, secs);
            s->failed_per_s = rate(fail, h->failed, secs);
            s->preempted = pre >= h->preemptions ? (float)(pre - h->preemptions) : 0;
            for (int i = 0; i < H_N; i++) {
                s->p50_ms[i] = window_quantile(hist_of(x, i), h->hist[i], 0.50);
                s->p99_ms[i] = window_quantile(hist_of(x, i), h->hist[i], 0.99);
            }
        }
        s->batch_size = (float)ldi(&x->batch_size);
        s->running = (float)ldi(&x->running);
        s->queue_depth = (float)ldi(&x->queue_depth);
        s->kv_blocks_used = (float)ldi(&x->kv_blocks_used);
        s->kv_blocks_free = (float)ldi(&x->kv_blocks_free);
        s->kv_window_blocks_used = (float)ldi(&x->kv_window_blocks_used);
        s->slots_in_use = (float)ldi(&x->slots_in_use);
        s->max_batch_size = (float)atomic_load(&x->tuning.cur_max_batch_size);
        s->batch_timeout_ms = (float)atomic_load(&x->tuning.cur_batch_timeout_ms);
        s->max_batched_tokens = (float)atomic_load(&x->tuning.cur_max_batched_tokens);
        s->mem_cap_tokens = (float)ldi(&x->mem_cap_tokens);
        h->generation = m->hdr->generation;
        h->tokens_out = out;
        h->tokens_in = in;
        h->tokens_cached = cached;
        h->finished = fin;
        h->failed = fail;
        h->preemptions = pre;
        for (int i = 0; i < H_N; i++)
            for (int b = 0; b < LLM_HIST_BUCKETS; b++) h->hist[i][b] = ld(&hist_of(x, i)->bucket[b]);
    } else {
        h->generation = 0;
    }
    h->last_ms = ngx_current_msec;
    h->head = (h->head + 1) % NGX_LLM_STATUS_SAMPLES;
    if (h->count < NGX_LLM_STATUS_SAMPLES) h->count++;
}

static ngx_http_llm_engine_t *ngx_http_llm_status_engine(ngx_http_llm_status_ctx_t *ctx)
{
    ngx_http_llm_main_conf_t *mcf = ngx_http_cycle_get_module_main_conf(ctx->cycle, ngx_http_llm_module);
    if (mcf == NULL || ctx->lcf->engine_idx >= mcf->engines.nelts) return NULL;
    return &((ngx_http_llm_engine_t *)mcf->engines.elts)[ctx->lcf->engine_idx];
}

static void ngx_http_llm_status_tick(ngx_event_t *ev)
{
    ngx_http_llm_status_ctx_t *ctx = ev->data;
    if (ngx_exiting || ngx_quit || ngx_terminate) return;
    ngx_http_llm_history_t *h = ctx->hist;
    /* Any worker may sample; the lock and the age check keep it to one a second. */
    if (h && ngx_shmtx_trylock(&ctx->shpool->mutex)) {
        if (h->count == 0 || ngx_current_msec - h->last_ms >= NGX_LLM_STATUS_PERIOD - 50) {
            ngx_http_llm_engine_t *eng = ngx_http_llm_status_engine(ctx);
            llm_api_err e;
            int up = eng && ngx_http_llm_engine_ready(eng, &e) == LLM_SHM_OK;
            const llm_shm_map *m = eng && eng->client ? llm_client_map(eng->client) : NULL;
            ngx_http_llm_status_sample(h, m && m->hdr ? m : NULL, up);
        }
        ngx_shmtx_unlock(&ctx->shpool->mutex);
    }
    ngx_add_timer(ev, NGX_LLM_STATUS_PERIOD);
}

static ngx_int_t ngx_http_llm_status_zone_init(ngx_shm_zone_t *zone, void *data)
{
    ngx_http_llm_status_ctx_t *ctx = zone->data, *old = data;
    ctx->shpool = (ngx_slab_pool_t *)zone->shm.addr;
    if (old) { /* reload: keep the history */
        ctx->hist = old->hist;
        return NGX_OK;
    }
    if (zone->shm.exists) { ctx->hist = ctx->shpool->data; return NGX_OK; }
    ctx->hist = ngx_slab_calloc(ctx->shpool, sizeof(ngx_http_llm_history_t));
    if (ctx->hist == NULL) return NGX_ERROR;
    ctx->shpool->data = ctx->hist;
    return NGX_OK;
}

static ngx_http_llm_status_ctx_t *ngx_http_llm_status_ctx(ngx_cycle_t *cycle)
{
    ngx_list_part_t *part = &cycle->shared_memory.part;
    ngx_shm_zone_t *z = part->elts;
    for (ngx_uint_t i = 0;; i++) {
        if (i >= part->nelts) {
            if (part->next == NULL) return NULL;
            part = part->next;
            z = part->elts;
            i = 0;
        }
        if (z[i].tag == &ngx_http_llm_module && z[i].shm.name.len == ngx_http_llm_status_zone_name.len &&
            ngx_strncmp(z[i].shm.name.data, ngx_http_llm_status_zone_name.data, z[i].shm.name.len) == 0)
            return z[i].data;
    }
}

char *ngx_http_llm_status_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_loc_conf_t *lcf = conf;
    if (lcf->handler != NGX_CONF_UNSET_UINT) return "is duplicate";
    /* Configured like a metrics location (an engine, no tokenizer); served by our handler. */
    lcf->handler = NGX_LLM_METRICS;
    ngx_http_core_loc_conf_t *clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_llm_status_handler;

    size_t size = ngx_align(sizeof(ngx_http_llm_history_t) + 64 * 1024, ngx_pagesize);
    ngx_shm_zone_t *zone = ngx_shared_memory_add(cf, &ngx_http_llm_status_zone_name, size, &ngx_http_llm_module);
    if (zone == NULL) return NGX_CONF_ERROR;
    if (zone->data == NULL) { /* the first llm_status location of this configuration */
        ngx_http_llm_status_ctx_t *ctx = ngx_pcalloc(cf->pool, sizeof *ctx);
        if (ctx == NULL) return NGX_CONF_ERROR;
        ctx->lcf = lcf;
        zone->init = ngx_http_llm_status_zone_init;
        zone->data = ctx;
    }
    return NGX_CONF_OK;
}

ngx_int_t ngx_http_llm_status_init_process(ngx_cycle_t *cycle)
{
    ngx_http_llm_status_ctx_t *ctx = ngx_http_llm_status_ctx(cycle);
    if (ctx == NULL) return NGX_OK;
    ctx->cycle = cycle;
    ctx->timer.handler = ngx_http_llm_status_tick;
    ctx->timer.data = ctx;
    ctx->timer.log = cycle->log;
    ctx->timer.cancelable = 1; /* never holds up a graceful exit */
    ngx_add_timer(&ctx->timer, NGX_LLM_STATUS_PERIOD);
    return NGX_OK;
}

/* ---------------- the JSON ---------------- */

static const char *hist_name[H_N] = { "ttft", "tpot", "step", "queue" };

/* Three decimals: the float samples would print as 1595.74462890625. */
static cJSON *num3(double v) { return cJSON_CreateNumber(round(v * 1000.0) / 1000.0); }

static void add_u64(cJSON *o, const char *k, uint64_t v) { cJSON_AddNumberToObject(o, k, (double)v); }

static cJSON *ngx_http_llm_status_current(const llm_shm_map *m)
{
    llm_shm_metrics *x = m->metrics;
    cJSON *c = cJSON_CreateObject();
    if (c == NULL) return NULL;
    add_u64(c, "submitted", ld(&x->submitted));
    add_u64(c, "finished", ld(&x->finished));
    add_u64(c, "cancelled", ld(&x->cancelled));
    add_u64(c, "failed", ld(&x->failed));
    add_u64(c, "rejected", ld(&x->rejected_no_slot) + ld(&x->rejected_ring_full) + ld(&x->rejected_not_ready));
    add_u64(c, "tokens_in", ld(&x->tokens_in));
    add_u64(c, "tokens_out", ld(&x->tokens_out));
    add_u64(c, "preemptions", ld(&x->preemptions));
    add_u64(c, "oom_shrinks", ld(&x->oom_shrinks));
    add_u64(c, "oom_recoveries", ld(&x->oom_recoveries));
    cJSON_AddNumberToObject(c, "mem_cap_tokens", (double)ldi(&x->mem_cap_tokens));
    cJSON_AddNumberToObject(c, "mem_cap_batch", (double)ldi(&x->mem_cap_batch));
    cJSON_AddNumberToObject(c, "slots_in_use", (double)ldi(&x->slots_in_use));
    cJSON_AddNumberToObject(c, "running", (double)ldi(&x->running));
    cJSON_AddNumberToObject(c, "batch_size", (double)ldi(&x->batch_size));
    cJSON_AddNumberToObject(c, "queue_depth", (double)ldi(&x->queue_depth));
    cJSON_AddNumberToObject(c, "kv_blocks_used", (double)ldi(&x->kv_blocks_used));
    cJSON_AddNumberToObject(c, "kv_blocks_free", (double)ldi(&x->kv_blocks_free));
    cJSON_AddNumberToObject(c, "kv_blocks_cached", (double)ldi(&x->kv_blocks_cached));
    cJSON_AddNumberToObject(c, "kv_window_blocks_used", (double)ldi(&x->kv_window_blocks_used));
    cJSON_AddNumberToObject(c, "kv_window_blocks_free", (double)ldi(&x->kv_window_blocks_free));
    add_u64(c, "tokens_cached", ld(&x->tokens_cached));
    cJSON_AddNumberToObject(c, "waiters", (double)ldi(&x->waiters));
    if (atomic_load(&x->tuning.cur_max_batch_size) > 0) { /* the engine publishes its knobs */
        cJSON *tu = cJSON_AddObjectToObject(c, "tuning");
        cJSON_AddNumberToObject(tu, "max_batch_size", atomic_load(&x->tuning.cur_max_batch_size));
        cJSON_AddNumberToObject(tu, "batch_timeout_ms", atomic_load(&x->tuning.cur_batch_timeout_ms));
        cJSON_AddNumberToObject(tu, "max_batched_tokens", atomic_load(&x->tuning.cur_max_batched_tokens));
    }
    /* Since the engine started, in ms (bucket upper bounds: powers of two microseconds). */
    cJSON *q = cJSON_AddObjectToObject(c, "latency_ms");
    for (int i = 0; q && i < H_N; i++) {
        llm_shm_hist *hh = hist_of(x, i);
        cJSON *o = cJSON_AddObjectToObject(q, hist_name[i]);
        if (o == NULL) break;
        uint64_t n = ld(&hh->count);
        add_u64(o, "count", n);
        if (n == 0) continue;
        uint64_t p50 = llm_hist_quantile(hh, 0.50), p99 = llm_hist_quantile(hh, 0.99);
        cJSON_AddNumberToObject(o, "mean", (double)ld(&hh->sum_ns) / (double)n / 1e6);
        if (p50 != UINT64_MAX) cJSON_AddNumberToObject(o, "p50", (double)p50 / 1e6);
        if (p99 != UINT64_MAX) cJSON_AddNumberToObject(o, "p99", (double)p99 / 1e6);
    }
    return c;
}

static cJSON *ngx_http_llm_status_engine_obj(const llm_shm_map *m, int rc)
{
    static const char *states[] = { "starting", "ready", "draining", "stopped" };
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NULL;
    cJSON_AddBoolToObject(o, "up", rc == LLM_SHM_OK);
    if (m == NULL) {
        cJSON_AddStringToObject(o, "state", "unavailable");
        cJSON_AddStringToObject(o, "reason", llm_shm_strerror(rc));
        return o;
    }
    uint32_t st = atomic_load(&m->hdr->state);
    cJSON_AddStringToObject(o, "state", st < 4 ? states[st] : "unknown");
    if (rc != LLM_SHM_OK) cJSON_AddStringToObject(o, "reason", llm_shm_strerror(rc));
    char gen[24];
    snprintf(gen, sizeof gen, "%016llx", (unsigned long long)m->hdr->generation);
    cJSON_AddStringToObject(o, "generation", gen);
    cJSON_AddNumberToObject(o, "pid", m->hdr->engine_pid);
    uint64_t hb = atomic_load(&m->hdr->heartbeat_ns), now = llm_shm_now_ns();
    cJSON_AddNumberToObject(o, "heartbeat_age_ms", now > hb ? (double)(now - hb) / 1e6 : 0);
    cJSON_AddStringToObject(o, "model", m->hdr->model.name);
    cJSON_AddNumberToObject(o, "ctx_len", m->hdr->model.ctx_len);
    cJSON_AddNumberToObject(o, "n_slots", m->hdr->caps.n_slots);
    return o;
}

/* Columns (one array per series, uPlot's shape), oldest first. */
static cJSON *ngx_http_llm_status_history(const ngx_http_llm_history_t *h)
{
    static const struct { const char *name; size_t off; } cols[] = {
#define COL(f) { #f, offsetof(ngx_http_llm_sample_t, f) }
        COL(tokens_out_per_s), COL(tokens_in_per_s), COL(tokens_cached_per_s), COL(finished_per_s),
        COL(failed_per_s), COL(batch_size), COL(running), COL(queue_depth), COL(kv_blocks_used),
        COL(kv_blocks_free), COL(kv_window_blocks_used),
        COL(slots_in_use), COL(preempted), COL(max_batch_size), COL(batch_timeout_ms),
        COL(max_batched_tokens), COL(mem_cap_tokens),
#undef COL
    };
    enum { NCOLS = sizeof cols / sizeof cols[0] };
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NULL;
    cJSON *t = cJSON_AddArrayToObject(o, "t"), *up = cJSON_AddArrayToObject(o, "up");
    cJSON *a[NCOLS], *p50[H_N], *p99[H_N];
    for (int i = 0; i < NCOLS; i++) a[i] = cJSON_AddArrayToObject(o, cols[i].name);
    for (int i = 0; i < H_N; i++) {
        char k[32];
        snprintf(k, sizeof k, "%s_p50_ms", hist_name[i]);
        p50[i] = cJSON_AddArrayToObject(o, k);
        snprintf(k, sizeof k, "%s_p99_ms", hist_name[i]);
        p99[i] = cJSON_AddArrayToObject(o, k);
    }
    ngx_uint_t start = (h->head + NGX_LLM_STATUS_SAMPLES - h->count) % NGX_LLM_STATUS_SAMPLES;
    for (ngx_uint_t k = 0; k < h->count; k++) {
        const ngx_http_llm_sample_t *s = &h->s[(start + k) % NGX_LLM_STATUS_SAMPLES];
        cJSON_AddItemToArray(t, cJSON_CreateNumber((double)s->t_ms / 1000.0)); /* seconds, as uPlot wants */
        cJSON_AddItemToArray(up, cJSON_CreateNumber(s->up));
        for (int i = 0; i < NCOLS; i++)
            cJSON_AddItemToArray(a[i], num3(*(const float *)((const char *)s + cols[i].off)));
        for (int i = 0; i < H_N; i++) {
            cJSON_AddItemToArray(p50[i], s->p50_ms[i] < 0 ? cJSON_CreateNull() : num3(s->p50_ms[i]));
            cJSON_AddItemToArray(p99[i], s->p99_ms[i] < 0 ? cJSON_CreateNull() : num3(s->p99_ms[i]));
        }
    }
    return o;
}

ngx_int_t ngx_http_llm_status_handler(ngx_http_request_t *r)
{
    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD)))
        return ngx_http_llm_error(r, NGX_HTTP_NOT_ALLOWED, NULL, "method_not_allowed",
                                  "method %V is not allowed here (use GET or HEAD)", &r->method_name);
    if (ngx_http_discard_request_body(r) != NGX_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;

    llm_api_err e;
    ngx_http_llm_engine_t *eng = ngx_http_llm_engine(r);
    int rc = ngx_http_llm_engine_ready(eng, &e);
    const llm_shm_map *m = eng->client ? llm_client_map(eng->client) : NULL;
    if (m && m->hdr == NULL) m = NULL;

    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;
    ngx_time_t *tp = ngx_timeofday();
    cJSON_AddNumberToObject(o, "time", (double)tp->sec + tp->msec / 1000.0);
    cJSON_AddNumberToObject(o, "sample_period_s", NGX_LLM_STATUS_PERIOD / 1000.0);
    cJSON_AddItemToObject(o, "engine", ngx_http_llm_status_engine_obj(m, rc));
    if (m) cJSON_AddItemToObject(o, "current", ngx_http_llm_status_current(m));

    ngx_http_llm_status_ctx_t *ctx = ngx_http_llm_status_ctx((ngx_cycle_t *)ngx_cycle);
    ngx_http_llm_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    /* The history is of one engine: the first llm_status location's. */
    if (ctx && ctx->hist && ctx->lcf->engine_idx == lcf->engine_idx) {
        ngx_http_llm_history_t *copy = ngx_palloc(r->pool, sizeof *copy);
        if (copy == NULL) { cJSON_Delete(o); return NGX_HTTP_INTERNAL_SERVER_ERROR; }
        ngx_shmtx_lock(&ctx->shpool->mutex);
        ngx_memcpy(copy, ctx->hist, sizeof *copy);
        ngx_shmtx_unlock(&ctx->shpool->mutex);
        cJSON_AddItemToObject(o, "history", ngx_http_llm_status_history(copy));
    }
    return ngx_http_llm_send_cjson(r, 200, o);
}
