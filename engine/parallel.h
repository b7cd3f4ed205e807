/* Row-parallel work at load (re-quantisation, LoRA merges, gen-model's quantisation, the CUDA backend's
 * repacking of weights) on the machine's cores. Inline for the CUDA library, which stands alone. */
#ifndef LLM_PARALLEL_H
#define LLM_PARALLEL_H

#include <pthread.h>
#include <stddef.h>
#include <unistd.h>

#define LLM_PARALLEL_MAX 32
/* How many jobs to split `rows` rows into: the online cores (at most LLM_PARALLEL_MAX), no more than one per
 * min_rows rows, at least 1. */
static inline int llm_parallel_jobs(size_t rows, size_t min_rows)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t n = cpus < 1 ? 1 : cpus > LLM_PARALLEL_MAX ? LLM_PARALLEL_MAX : (size_t)cpus;
    size_t most = min_rows > 0 ? rows / min_rows + 1 : rows;
    if (n > most)
        n = most;
    return n < 1 ? 1 : (int)n;
}

/* fn(jobs + i * job_size) for i < n (n <= LLM_PARALLEL_MAX): job 0, and any whose thread could not start, on
 * the calling thread, the others on threads of their own; returns when all are done. */
static inline void llm_parallel_run(int n, void *(*fn)(void *), void *jobs, size_t job_size)
{
    pthread_t tid[LLM_PARALLEL_MAX];
    int started[LLM_PARALLEL_MAX] = { 0 };
    if (n > LLM_PARALLEL_MAX)
        n = LLM_PARALLEL_MAX;
    for (int i = 1; i < n; i++)
        started[i] = pthread_create(&tid[i], NULL, fn, (char *)jobs + (size_t)i * job_size) == 0;
    for (int i = 0; i < n; i++)
        if (!started[i])
            fn((char *)jobs + (size_t)i * job_size);
    for (int i = 1; i < n; i++)
        if (started[i])
            pthread_join(tid[i], NULL);
}

#endif
