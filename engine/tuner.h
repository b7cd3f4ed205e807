/* Adaptive batching: a controller that, once per interval, looks at the
 * interval's TTFT / TPOT percentiles and the queue depth and moves the
 * scheduler's knobs (max batch size, batch timeout, prefill token budget)
 * inside configured bounds to meet latency targets. Pure logic, no I/O: the
 * supervisor feeds it metric snapshots and publishes its decisions.
 *
 * Policy, first rule that fires wins; after a change the controller waits
 * `cooldown` intervals so the change shows in the figures:
 *   1. TPOT p95 over its target: batches are too slow per step, shrink max
 *      batch size and token budget by a quarter (prefill chunks lengthen steps).
 *   2. TTFT p95 over its target with requests queued and TPOT headroom (p95
 *      under 70% of its target): admit more, grow batch size and token budget
 *      by a quarter and drop the batch timeout to its minimum.
 *   3. TTFT p95 over its target otherwise: halve the batch timeout (holding
 *      requests to fill a batch costs TTFT).
 *   4. Both well inside their targets (TTFT p95 under half, TPOT under 70%)
 *      with requests still queued: grow the batch by one (throughput).
 * The token budget never goes below the batch size, so every running request
 * can decode each step. */
#ifndef LLM_TUNER_H
#define LLM_TUNER_H

#include "llm_shm.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int max_batch_size, batch_timeout_ms, max_batched_tokens;
} llm_tuner_knobs;

typedef struct {
    double slo_ttft_ms, slo_tpot_ms;  /* targets on the p95; 0 = none */
    llm_tuner_knobs min, max;         /* bounds, inclusive */
    int cooldown;                     /* intervals to wait after a change */
} llm_tuner_config;

/* One interval's figures. */
typedef struct {
    double   ttft_p95_ms, tpot_p95_ms, step_p50_ms;
    uint64_t n_ttft, n_tpot, n_steps; /* observations in the interval */
    int64_t  queue_depth, running;    /* gauges at the end of the interval */
} llm_tuner_input;

typedef struct {
    llm_tuner_config cfg;
    llm_tuner_knobs  knobs;
    int              wait;            /* intervals left in the cooldown */
} llm_tuner;

/* Raw copy of the metrics block's counters, gauges and histograms. */
typedef struct {
    uint64_t submitted, finished, cancelled, failed;
    uint64_t rejected_no_slot, rejected_ring_full, rejected_not_ready, reclaimed_slots;
    uint64_t tokens_in, tokens_out, tokens_cached, preemptions, oom_shrinks, oom_recoveries;
    int64_t  mem_cap_tokens, mem_cap_batch, kv_blocks_cached, kv_window_blocks_used, kv_window_blocks_free;
    int64_t  slots_in_use, running, batch_size, kv_blocks_used, kv_blocks_free, queue_depth, waiters;
    uint64_t ttft[LLM_HIST_BUCKETS], tpot[LLM_HIST_BUCKETS], step[LLM_HIST_BUCKETS], queue[LLM_HIST_BUCKETS];
} llm_metrics_snap;

/* Checks the bounds (min <= max, batch >= 1, tokens >= 1, timeout >= 0, max
 * tokens >= min batch). 0, or -1 with a message. */
int  llm_tuner_config_check(const llm_tuner_config *c, char *err, size_t cap);
/* start is clamped into the bounds. */
void llm_tuner_init(llm_tuner *t, const llm_tuner_config *c, const llm_tuner_knobs *start);
/* One interval. Returns 1 when the knobs changed (t->knobs, reason in why:
 * the figures that caused it), else 0. */
int  llm_tuner_step(llm_tuner *t, const llm_tuner_input *in, char *why, size_t cap);

void llm_metrics_snapshot(const llm_shm_metrics *m, llm_metrics_snap *s);
/* Interval figures from two snapshots of the same segment (quantiles over the
 * histogram deltas, gauges from cur). */
void llm_tuner_input_from(const llm_metrics_snap *prev, const llm_metrics_snap *cur, llm_tuner_input *in);

#endif
