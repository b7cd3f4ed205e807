/* Row-parallel work at load (re-quantisation, LoRA merges) on the machine's cores. */
#ifndef LLM_PARALLEL_H
#define LLM_PARALLEL_H

#include <stddef.h>

#define LLM_PARALLEL_MAX 32
/* How many jobs to split `rows` rows into: the online cores (at most LLM_PARALLEL_MAX), no more than one per
 * min_rows rows, at least 1. */
int  llm_parallel_jobs(size_t rows, size_t min_rows);
/* fn(jobs + i * job_size) for i < n (n <= LLM_PARALLEL_MAX): job 0, and any whose thread could not start, on
 * the calling thread, the others on threads of their own; returns when all are done. */
void llm_parallel_run(int n, void *(*fn)(void *), void *jobs, size_t job_size);

#endif
