/* Prints, from a running engine's segment, the batching knobs in force
 * ("max_batch_size N batch_timeout_ms N max_batched_tokens N seq N applied N") and
 * the TTFT and TPOT histograms' bucket counts ("ttft C0 .. C27", "tpot ..."),
 * so that the caller can take percentiles over the deltas of two readings,
 * and the out-of-memory figures ("oom_shrinks N oom_recoveries N
 * mem_cap_tokens N mem_cap_batch N failed N finished N"), and the KV pools' gauges and the prefix cache's
 * count ("kv_blocks_used N kv_blocks_free N kv_blocks_cached N kv_window_blocks_used N
 * kv_window_blocks_free N tokens_in N tokens_cached N").
 * Built and run by tests/serve/tuning.t, oom.t and pools.t (usage: shm_knobs NAME). */
#include "llm_shm.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s SHM_NAME\n", argv[0]);
        return 2;
    }
    llm_shm_map m;
    char err[256];
    if (llm_shm_open_map(argv[1], &m, err, sizeof err) != LLM_SHM_OK) {
        fprintf(stderr, "shm_knobs: %s: %s\n", argv[1], err);
        return 1;
    }
    const llm_shm_tuning *t = &m.metrics->tuning;
    printf("max_batch_size %d batch_timeout_ms %d max_batched_tokens %d seq %u applied %u\n",
           (int)atomic_load(&t->cur_max_batch_size), (int)atomic_load(&t->cur_batch_timeout_ms),
           (int)atomic_load(&t->cur_max_batched_tokens), (unsigned)atomic_load(&t->seq),
           (unsigned)atomic_load(&t->applied));
    llm_shm_metrics *x = m.metrics;
    printf("oom_shrinks %llu oom_recoveries %llu mem_cap_tokens %lld mem_cap_batch %lld failed %llu finished %llu\n",
           (unsigned long long)atomic_load(&x->oom_shrinks), (unsigned long long)atomic_load(&x->oom_recoveries),
           (long long)atomic_load(&x->mem_cap_tokens), (long long)atomic_load(&x->mem_cap_batch),
           (unsigned long long)atomic_load(&x->failed), (unsigned long long)atomic_load(&x->finished));
    printf("kv_blocks_used %lld kv_blocks_free %lld kv_blocks_cached %lld kv_window_blocks_used %lld "
           "kv_window_blocks_free %lld tokens_in %llu tokens_cached %llu\n",
           (long long)atomic_load(&x->kv_blocks_used), (long long)atomic_load(&x->kv_blocks_free),
           (long long)atomic_load(&x->kv_blocks_cached), (long long)atomic_load(&x->kv_window_blocks_used),
           (long long)atomic_load(&x->kv_window_blocks_free), (unsigned long long)atomic_load(&x->tokens_in),
           (unsigned long long)atomic_load(&x->tokens_cached));
    const llm_shm_hist *h[2] = {&m.metrics->ttft, &m.metrics->tpot};
    for (int k = 0; k < 2; k++) {
        printf("%s", k == 0 ? "ttft" : "tpot");
        for (int i = 0; i < LLM_HIST_BUCKETS; i++)
            printf(" %llu", (unsigned long long)atomic_load(&h[k]->bucket[i]));
        printf("\n");
    }
    llm_shm_unmap(&m);
    return 0;
}
