/* Metrics block helpers: log-scale latency histograms (bucket i holds values up
 * to 2^i microseconds), written by one writer with relaxed atomics and read by
 * anyone (a reader may see a count one observation ahead of the buckets). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall(futex), getrandom, abstract sockets; nginx builds us without it */
#endif
#include "llm_shm.h"

uint64_t llm_hist_bucket_upper_ns(int i)
{
    if (i >= LLM_HIST_BUCKETS - 1)
        return UINT64_MAX;
    return (UINT64_C(1) << i) * 1000u;
}

void llm_hist_observe(llm_shm_hist *h, uint64_t ns)
{
    uint64_t us = (ns + 999) / 1000;
    int i = 0;
    while (i < LLM_HIST_BUCKETS - 1 && us > (UINT64_C(1) << i))
        i++;
    atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

uint64_t llm_hist_quantile(const llm_shm_hist *h, double q)
{
    uint64_t n[LLM_HIST_BUCKETS], total = 0;
    for (int i = 0; i < LLM_HIST_BUCKETS; i++) {
        n[i] = atomic_load_explicit((_Atomic uint64_t *)&h->bucket[i], memory_order_relaxed);
        total += n[i];
    }
    if (total == 0)
        return 0;
    uint64_t want = (uint64_t)(q * (double)total);
    if (want >= total)
        want = total - 1;
    uint64_t acc = 0;
    for (int i = 0; i < LLM_HIST_BUCKETS; i++) {
        acc += n[i];
        if (acc > want)
            return llm_hist_bucket_upper_ns(i);
    }
    return UINT64_MAX;
}
