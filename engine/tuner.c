/* The adaptive batching controller (policy in tuner.h). */
#include "tuner.h"

#include <stdio.h>
#include <string.h>

int llm_tuner_config_check(const llm_tuner_config *c, char *err, size_t cap)
{
    const llm_tuner_knobs *lo = &c->min, *hi = &c->max;
    if (lo->max_batch_size < 1 || lo->max_batched_tokens < 1 || lo->batch_timeout_ms < 0) {
        snprintf(err, cap, "tuning bounds: batch size and token budget must be >= 1, timeout >= 0");
        return -1;
    }
    if (lo->max_batch_size > hi->max_batch_size || lo->batch_timeout_ms > hi->batch_timeout_ms ||
        lo->max_batched_tokens > hi->max_batched_tokens) {
        snprintf(err, cap, "tuning bounds: a minimum is above its maximum (batch %d..%d, timeout %d..%d ms, "
                           "tokens %d..%d)", lo->max_batch_size, hi->max_batch_size, lo->batch_timeout_ms,
                 hi->batch_timeout_ms, lo->max_batched_tokens, hi->max_batched_tokens);
        return -1;
    }
    if (hi->max_batched_tokens < lo->max_batch_size) {
        snprintf(err, cap, "tuning bounds: max token budget %d is below the minimum batch size %d",
                 hi->max_batched_tokens, lo->max_batch_size);
        return -1;
    }
    if (c->slo_ttft_ms < 0 || c->slo_tpot_ms < 0 || c->cooldown < 0) {
        snprintf(err, cap, "tuning: targets and cooldown must not be negative");
        return -1;
    }
    return 0;
}

static int clamp(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static void clamp_knobs(const llm_tuner_config *c, llm_tuner_knobs *k)
{
    k->max_batch_size = clamp(k->max_batch_size, c->min.max_batch_size, c->max.max_batch_size);
    k->batch_timeout_ms = clamp(k->batch_timeout_ms, c->min.batch_timeout_ms, c->max.batch_timeout_ms);
    k->max_batched_tokens = clamp(k->max_batched_tokens, c->min.max_batched_tokens, c->max.max_batched_tokens);
    if (k->max_batched_tokens < k->max_batch_size) /* every running request decodes each step */
        k->max_batched_tokens = clamp(k->max_batch_size, c->min.max_batched_tokens, c->max.max_batched_tokens);
}

void llm_tuner_init(llm_tuner *t, const llm_tuner_config *c, const llm_tuner_knobs *start)
{
    memset(t, 0, sizeof(*t));
    t->cfg = *c;
    t->knobs = *start;
    clamp_knobs(c, &t->knobs);
}

/* v grown or shrunk by a quarter, by at least one */
static int by_quarter(int v, int up)
{
    int d = v / 4 > 0 ? v / 4 : 1;
    return up ? v + d : v - d;
}

int llm_tuner_step(llm_tuner *t, const llm_tuner_input *in, char *why, size_t cap)
{
    if (t->wait > 0) {
        t->wait--;
        return 0;
    }
    const llm_tuner_config *c = &t->cfg;
    llm_tuner_knobs k = t->knobs;
    int have_ttft = c->slo_ttft_ms > 0 && in->n_ttft > 0, have_tpot = c->slo_tpot_ms > 0 && in->n_tpot > 0;
    int tpot_bad = have_tpot && in->tpot_p95_ms > c->slo_tpot_ms;
    int tpot_room = !have_tpot || in->tpot_p95_ms < 0.7 * c->slo_tpot_ms;
    int ttft_bad = have_ttft && in->ttft_p95_ms > c->slo_ttft_ms;
    int ttft_room = have_ttft && in->ttft_p95_ms < 0.5 * c->slo_ttft_ms;
    const char *rule;
    if (tpot_bad) {
        k.max_batch_size = by_quarter(k.max_batch_size, 0);
        k.max_batched_tokens = by_quarter(k.max_batched_tokens, 0);
        rule = "TPOT over target: smaller batches";
    } else if (ttft_bad && in->queue_depth > 0 && tpot_room) {
        k.max_batch_size = by_quarter(k.max_batch_size, 1);
        k.max_batched_tokens = by_quarter(k.max_batched_tokens, 1);
        k.batch_timeout_ms = c->min.batch_timeout_ms;
        rule = "TTFT over target with a queue and TPOT headroom: larger batches";
    } else if (ttft_bad) {
        k.batch_timeout_ms /= 2;
        rule = "TTFT over target: shorter batch-fill hold";
    } else if (ttft_room && tpot_room && in->queue_depth > 0) {
        k.max_batch_size++;
        rule = "both targets met with headroom and a queue: one more sequence per batch";
    } else {
        return 0;
    }
    clamp_knobs(c, &k);
    if (memcmp(&k, &t->knobs, sizeof(k)) == 0)
        return 0; /* already at the bound */
    snprintf(why, cap,
             "%s (ttft p95 %.1f ms / target %.1f, tpot p95 %.1f ms / target %.1f, queue %lld, running %lld, "
             "step p50 %.1f ms): max_batch_size %d -> %d, batch_timeout_ms %d -> %d, max_batched_tokens %d -> %d",
             rule, in->ttft_p95_ms, c->slo_ttft_ms, in->tpot_p95_ms, c->slo_tpot_ms, (long long)in->queue_depth,
             (long long)in->running, in->step_p50_ms, t->knobs.max_batch_size, k.max_batch_size,
             t->knobs.batch_timeout_ms, k.batch_timeout_ms, t->knobs.max_batched_tokens, k.max_batched_tokens);
    t->knobs = k;
    t->wait = c->cooldown;
    return 1;
}

#define LD(x) atomic_load_explicit(&m->x, memory_order_relaxed)

static void snap_hist(const llm_shm_hist *h, uint64_t *out)
{
    for (int i = 0; i < LLM_HIST_BUCKETS; i++)
        out[i] = atomic_load_explicit((_Atomic uint64_t *)&h->bucket[i], memory_order_relaxed);
}

void llm_metrics_snapshot(const llm_shm_metrics *m_, llm_metrics_snap *s)
{
    llm_shm_metrics *m = (llm_shm_metrics *)m_; /* atomic loads take non-const pointers */
    s->submitted = LD(submitted);
    s->finished = LD(finished);
    s->cancelled = LD(cancelled);
    s->failed = LD(failed);
    s->rejected_no_slot = LD(rejected_no_slot);
    s->rejected_ring_full = LD(rejected_ring_full);
    s->rejected_not_ready = LD(rejected_not_ready);
    s->reclaimed_slots = LD(reclaimed_slots);
    s->tokens_in = LD(tokens_in);
    s->tokens_out = LD(tokens_out);
    s->preemptions = LD(preemptions);
    s->oom_shrinks = LD(oom_shrinks);
    s->oom_recoveries = LD(oom_recoveries);
    s->mem_cap_tokens = LD(mem_cap_tokens);
    s->mem_cap_batch = LD(mem_cap_batch);
    s->slots_in_use = LD(slots_in_use);
    s->running = LD(running);
    s->batch_size = LD(batch_size);
    s->kv_blocks_used = LD(kv_blocks_used);
    s->kv_blocks_free = LD(kv_blocks_free);
    s->kv_blocks_cached = LD(kv_blocks_cached);
    s->kv_window_blocks_used = LD(kv_window_blocks_used);
    s->kv_window_blocks_free = LD(kv_window_blocks_free);
    s->tokens_cached = LD(tokens_cached);
    s->queue_depth = LD(queue_depth);
    s->waiters = LD(waiters);
    snap_hist(&m->ttft, s->ttft);
    snap_hist(&m->tpot, s->tpot);
    snap_hist(&m->step_time, s->step);
    snap_hist(&m->queue_time, s->queue);
}

/* quantile (ms) of the interval's observations: cur - prev, per bucket */
static double delta_quantile(const uint64_t *prev, const uint64_t *cur, double q, uint64_t *n)
{
    llm_shm_hist h;
    memset(&h, 0, sizeof(h));
    uint64_t total = 0;
    for (int i = 0; i < LLM_HIST_BUCKETS; i++) {
        uint64_t d = cur[i] >= prev[i] ? cur[i] - prev[i] : 0;
        atomic_store_explicit(&h.bucket[i], d, memory_order_relaxed);
        total += d;
    }
    *n = total;
    if (total == 0)
        return 0;
    uint64_t ns = llm_hist_quantile(&h, q);
    if (ns == UINT64_MAX) /* the +Inf bucket: report the last finite bound */
        ns = llm_hist_bucket_upper_ns(LLM_HIST_BUCKETS - 2);
    return (double)ns / 1e6;
}

void llm_tuner_input_from(const llm_metrics_snap *prev, const llm_metrics_snap *cur, llm_tuner_input *in)
{
    memset(in, 0, sizeof(*in));
    in->ttft_p95_ms = delta_quantile(prev->ttft, cur->ttft, 0.95, &in->n_ttft);
    in->tpot_p95_ms = delta_quantile(prev->tpot, cur->tpot, 0.95, &in->n_tpot);
    in->step_p50_ms = delta_quantile(prev->step, cur->step, 0.5, &in->n_steps);
    in->queue_depth = cur->queue_depth;
    in->running = cur->running;
}
