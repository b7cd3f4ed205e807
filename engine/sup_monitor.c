/* Supervisor-side sampling, tuning and publishing (see sup_monitor.h). */
#include "sup_monitor.h"

#include "redis_pub.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct llm_monitor {
    char              name[LLM_SHM_MAX_NAME];
    llm_shm_map       map;
    int               mapped;
    int               worker_pid;
    llm_metrics_snap  prev;
    uint64_t          prev_ns;
    int               have_prev;
    int               tune;
    llm_tuner         tuner;
    llm_redis        *redis;
    int               tuning_dirty; /* knobs not yet saved to Redis */
    uint64_t          restarts;
};

void llm_monitor_event(llm_monitor *m, const char *type, const char *fmt, ...)
{
    char detail[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    fprintf(stderr, "supervisor: %s: %s\n", type, detail);
    if (m->redis != NULL)
        llm_redis_event(m->redis, type, detail);
}

llm_monitor *llm_monitor_new(const llm_supervisor_opts *o, char *err, size_t cap)
{
    llm_monitor *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    snprintf(m->name, sizeof m->name, "%s", o->shm_name);
    m->map.fd = -1;
    m->tune = o->tune;
    llm_tuner_config tc = o->tuner;
    if (!o->tune) { /* no tuner: the bounds are the command line's knobs */
        memset(&tc, 0, sizeof(tc));
        tc.min = tc.max = o->knobs;
    }
    if (llm_tuner_config_check(&tc, err, cap) != 0) {
        free(m);
        return NULL;
    }
    llm_tuner_init(&m->tuner, &tc, &o->knobs);
    if (o->redis_url != NULL) {
        m->redis = llm_redis_new(o->redis_url, o->shm_name, err, cap);
        if (m->redis == NULL) {
            free(m);
            return NULL;
        }
        llm_tuner_knobs k;
        int rc = llm_redis_load_tuning(m->redis, &k.max_batch_size, &k.batch_timeout_ms, &k.max_batched_tokens);
        if (rc == 1 && o->tune) {
            llm_tuner_init(&m->tuner, &tc, &k);
            fprintf(stderr, "supervisor: tuning state from redis: max_batch_size %d, batch_timeout_ms %d, "
                            "max_batched_tokens %d\n", m->tuner.knobs.max_batch_size,
                    m->tuner.knobs.batch_timeout_ms, m->tuner.knobs.max_batched_tokens);
        }
        m->tuning_dirty = o->tune;
    }
    return m;
}

void llm_monitor_detach(llm_monitor *m)
{
    if (m->mapped)
        llm_shm_unmap(&m->map);
    m->mapped = 0;
    m->have_prev = 0;
}

void llm_monitor_free(llm_monitor *m)
{
    if (m == NULL)
        return;
    llm_monitor_detach(m);
    llm_redis_free(m->redis);
    free(m);
}

void llm_monitor_count_restart(llm_monitor *m)
{
    m->restarts++;
}

void llm_monitor_before_fork(llm_monitor *m)
{
    llm_redis_disconnect(m->redis);
}

static void push_knobs(llm_monitor *m)
{
    llm_shm_tuning *t = &m->map.metrics->tuning;
    atomic_store(&t->want_max_batch_size, m->tuner.knobs.max_batch_size);
    atomic_store(&t->want_batch_timeout_ms, m->tuner.knobs.batch_timeout_ms);
    atomic_store(&t->want_max_batched_tokens, m->tuner.knobs.max_batched_tokens);
    atomic_fetch_add_explicit(&t->seq, 1, memory_order_release);
}

int llm_monitor_poll(llm_monitor *m, int worker_pid)
{
    if (m->mapped) {
        llm_shm_header *h = m->map.hdr;
        if (h->engine_pid == worker_pid && atomic_load(&h->state) != LLM_ENGINE_STOPPED)
            return atomic_load(&h->state) == LLM_ENGINE_READY;
        llm_monitor_detach(m);
    }
    char err[256];
    if (llm_shm_open_map(m->name, &m->map, err, sizeof err) != LLM_SHM_OK)
        return 0;
    /* a stale segment of a dead worker, or the new one not READY yet: look again later */
    if (m->map.hdr->engine_pid != worker_pid || atomic_load(&m->map.hdr->state) != LLM_ENGINE_READY) {
        llm_shm_unmap(&m->map);
        return 0;
    }
    m->mapped = 1;
    m->worker_pid = worker_pid;
    push_knobs(m); /* a restarted worker starts from the tuned values */
    llm_metrics_snapshot(m->map.metrics, &m->prev);
    m->prev_ns = llm_shm_now_ns();
    m->have_prev = 1;
    return 1;
}

#define NUM(field, fmt, val) do { \
        fields[n] = field; \
        snprintf(vals[n], sizeof vals[n], fmt, val); \
        n++; \
    } while (0)

static void publish(llm_monitor *m, const llm_metrics_snap *c, const llm_tuner_input *in, double dt)
{
    const char *fields[48];
    char vals[48][32];
    int n = 0;
    const llm_shm_tuning *t = &m->map.metrics->tuning;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    NUM("ts_ms", "%lld", (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    NUM("generation", "%llu", (unsigned long long)m->map.hdr->generation);
    NUM("worker_pid", "%d", m->worker_pid);
    NUM("restarts", "%llu", (unsigned long long)m->restarts);
    NUM("submitted", "%llu", (unsigned long long)c->submitted);
    NUM("finished", "%llu", (unsigned long long)c->finished);
    NUM("cancelled", "%llu", (unsigned long long)c->cancelled);
    NUM("failed", "%llu", (unsigned long long)c->failed);
    NUM("rejected_no_slot", "%llu", (unsigned long long)c->rejected_no_slot);
    NUM("rejected_ring_full", "%llu", (unsigned long long)c->rejected_ring_full);
    NUM("rejected_not_ready", "%llu", (unsigned long long)c->rejected_not_ready);
    NUM("reclaimed_slots", "%llu", (unsigned long long)c->reclaimed_slots);
    NUM("tokens_in", "%llu", (unsigned long long)c->tokens_in);
    NUM("tokens_out", "%llu", (unsigned long long)c->tokens_out);
    NUM("tokens_out_per_s", "%.1f", dt > 0 ? (double)(c->tokens_out - m->prev.tokens_out) / dt : 0.0);
    NUM("requests_per_s", "%.2f", dt > 0 ? (double)(c->finished - m->prev.finished) / dt : 0.0);
    NUM("preemptions", "%llu", (unsigned long long)c->preemptions);
    NUM("oom_shrinks", "%llu", (unsigned long long)c->oom_shrinks);
    NUM("oom_recoveries", "%llu", (unsigned long long)c->oom_recoveries);
    NUM("mem_cap_tokens", "%lld", (long long)c->mem_cap_tokens);
    NUM("mem_cap_batch", "%lld", (long long)c->mem_cap_batch);
    NUM("slots_in_use", "%lld", (long long)c->slots_in_use);
    NUM("running", "%lld", (long long)c->running);
    NUM("batch_size", "%lld", (long long)c->batch_size);
    NUM("queue_depth", "%lld", (long long)c->queue_depth);
    NUM("kv_blocks_used", "%lld", (long long)c->kv_blocks_used);
    NUM("kv_blocks_free", "%lld", (long long)c->kv_blocks_free);
    NUM("kv_blocks_cached", "%lld", (long long)c->kv_blocks_cached);
    NUM("kv_window_blocks_used", "%lld", (long long)c->kv_window_blocks_used);
    NUM("kv_window_blocks_free", "%lld", (long long)c->kv_window_blocks_free);
    NUM("tokens_cached", "%llu", (unsigned long long)c->tokens_cached);
    NUM("waiters", "%lld", (long long)c->waiters);
    NUM("ttft_p95_ms", "%.3f", in->ttft_p95_ms);
    NUM("tpot_p95_ms", "%.3f", in->tpot_p95_ms);
    NUM("step_p50_ms", "%.3f", in->step_p50_ms);
    NUM("max_batch_size", "%d", (int)atomic_load((_Atomic int32_t *)&t->cur_max_batch_size));
    NUM("batch_timeout_ms", "%d", (int)atomic_load((_Atomic int32_t *)&t->cur_batch_timeout_ms));
    NUM("max_batched_tokens", "%d", (int)atomic_load((_Atomic int32_t *)&t->cur_max_batched_tokens));
    const char *v[48];
    for (int i = 0; i < n; i++)
        v[i] = vals[i];
    llm_redis_publish(m->redis, fields, v, n);
}

void llm_monitor_tick(llm_monitor *m)
{
    if (m->redis != NULL) {
        llm_redis_event(m->redis, NULL, NULL); /* deliver queued events */
        if (m->tuning_dirty &&
            llm_redis_save_tuning(m->redis, m->tuner.knobs.max_batch_size, m->tuner.knobs.batch_timeout_ms,
                                  m->tuner.knobs.max_batched_tokens) == 0)
            m->tuning_dirty = 0;
    }
    if (!m->mapped || !m->have_prev)
        return;
    llm_metrics_snap cur;
    llm_metrics_snapshot(m->map.metrics, &cur);
    uint64_t now = llm_shm_now_ns();
    double dt = (double)(now - m->prev_ns) / 1e9;
    llm_tuner_input in;
    llm_tuner_input_from(&m->prev, &cur, &in);
    /* KV pool exhaustion is recovered from by preemption, a backend out of
     * memory by smaller steps (engine/scheduler.h); failures include what
     * could not be recovered from */
    int oom = cur.oom_shrinks > m->prev.oom_shrinks;
    if (cur.preemptions > m->prev.preemptions)
        llm_monitor_event(m, "kv_preemption", "%llu running requests preempted in the last %.1f s (%s; "
                                              "%lld blocks used, %lld free)",
                          (unsigned long long)(cur.preemptions - m->prev.preemptions), dt,
                          oom ? "KV pool full or the memory cap" : "KV pool full",
                          (long long)cur.kv_blocks_used, (long long)cur.kv_blocks_free);
    if (oom)
        llm_monitor_event(m, "oom_shrink", "backend out of memory %llu times in the last %.1f s: steps capped at "
                                           "%lld tokens, %lld sequences (knobs %d / %d)",
                          (unsigned long long)(cur.oom_shrinks - m->prev.oom_shrinks), dt,
                          (long long)cur.mem_cap_tokens, (long long)cur.mem_cap_batch,
                          (int)atomic_load(&m->map.metrics->tuning.cur_max_batched_tokens),
                          (int)atomic_load(&m->map.metrics->tuning.cur_max_batch_size));
    if (cur.oom_recoveries > m->prev.oom_recoveries)
        llm_monitor_event(m, "oom_recover", "load fell: memory cap lifted, steps back to %d tokens, %d sequences",
                          (int)atomic_load(&m->map.metrics->tuning.cur_max_batched_tokens),
                          (int)atomic_load(&m->map.metrics->tuning.cur_max_batch_size));
    if (cur.failed > m->prev.failed)
        llm_monitor_event(m, "request_failures", "%llu requests failed in the last %.1f s (backend error or out of "
                                                 "memory)", (unsigned long long)(cur.failed - m->prev.failed), dt);
    if (m->tune) {
        char why[512];
        if (llm_tuner_step(&m->tuner, &in, why, sizeof why)) {
            push_knobs(m);
            llm_monitor_event(m, "tuning", "%s", why);
            m->tuning_dirty = m->redis != NULL;
            if (m->redis != NULL &&
                llm_redis_save_tuning(m->redis, m->tuner.knobs.max_batch_size, m->tuner.knobs.batch_timeout_ms,
                                      m->tuner.knobs.max_batched_tokens) == 0)
                m->tuning_dirty = 0;
        }
    }
    if (m->redis != NULL)
        publish(m, &cur, &in, dt);
    m->prev = cur;
    m->prev_ns = now;
}
