/* Persistent worker threads for the CPU backend. A job runs on every thread
 * (the caller is thread 0); workers spin briefly between jobs, then sleep on a
 * futex, so back-to-back kernel launches cost well under a microsecond. */
#ifndef LLM_CPU_THREADPOOL_H
#define LLM_CPU_THREADPOOL_H

typedef struct cpu_threadpool cpu_threadpool;
typedef void (*cpu_job_fn)(void *ctx, int ith, int nth);

/* n_threads total, including the caller; NULL on failure (errno set). */
cpu_threadpool *cpu_pool_create(int n_threads);
void cpu_pool_destroy(cpu_threadpool *p);
int  cpu_pool_threads(const cpu_threadpool *p);
/* Run fn(ctx, ith, nth) on all threads; returns when every thread has finished. */
void cpu_pool_run(cpu_threadpool *p, cpu_job_fn fn, void *ctx);
/* Inside a job: wait until all nth threads reach this point. */
void cpu_pool_barrier(cpu_threadpool *p);

#endif
