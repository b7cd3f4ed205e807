/* Thread pool: a job generation counter that workers watch (spin, then futex
 * sleep), a done counter the caller watches, and a sense-reversing barrier for
 * phases inside one job. Spins yield after a while so an oversubscribed machine
 * (more threads than cores, e.g. tests) still makes progress. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu/threadpool.h"

#define SPIN_BEFORE_YIELD 2000
#define SPIN_BEFORE_SLEEP 200000

typedef struct {
    cpu_threadpool *pool;
    int ith;
} worker_arg;

struct cpu_threadpool {
    int n;
    pthread_t *threads;
    worker_arg *args;
    _Atomic uint32_t gen;      /* bumped for each job (futex word) */
    _Atomic int sleepers;
    _Atomic int done;          /* workers finished with the current job */
    _Atomic int stop;
    cpu_job_fn fn;
    void *ctx;
    /* barrier */
    _Atomic int bar_count;
    _Atomic uint32_t bar_sense;
};

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    cpu_threadpool *p = wa->pool;
    uint32_t seen = 0;
    for (;;) {
        uint32_t g;
        long spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
            if (++spins < SPIN_BEFORE_YIELD) {
                cpu_relax();
            } else if (spins < SPIN_BEFORE_SLEEP) {
                sched_yield();
            } else {
                atomic_fetch_add(&p->sleepers, 1);
                if (atomic_load(&p->gen) == seen)
                    futex_wait(&p->gen, seen);
                atomic_fetch_sub(&p->sleepers, 1);
                spins = 0;
            }
        }
        seen = g;
        if (atomic_load_explicit(&p->stop, memory_order_acquire))
            return NULL;
        p->fn(p->ctx, wa->ith, p->n);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

cpu_threadpool *cpu_pool_create(int n_threads)
{
    if (n_threads < 1)
        n_threads = 1;
    cpu_threadpool *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->n = n_threads;
    p->threads = calloc((size_t)n_threads, sizeof(*p->threads));
    p->args = calloc((size_t)n_threads, sizeof(*p->args));
    if (p->threads == NULL || p->args == NULL) {
        free(p->threads);
        free(p->args);
        free(p);
        errno = ENOMEM;
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        p->args[i].pool = p;
        p->args[i].ith = i;
        int rc = pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]);
        if (rc != 0) {
            p->n = i; /* stop the ones already started */
            cpu_pool_destroy(p);
            errno = rc;
            return NULL;
        }
    }
    return p;
}

void cpu_pool_destroy(cpu_threadpool *p)
{
    if (p == NULL)
        return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    futex_wake_all(&p->gen);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->args);
    free(p);
}

int cpu_pool_threads(const cpu_threadpool *p)
{
    return p->n;
}

void cpu_pool_run(cpu_threadpool *p, cpu_job_fn fn, void *ctx)
{
    if (p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    if (atomic_load(&p->sleepers) > 0)
        futex_wake_all(&p->gen);
    fn(ctx, 0, p->n);
    long spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) != p->n - 1) {
        if (++spins < SPIN_BEFORE_YIELD)
            cpu_relax();
        else
            sched_yield();
    }
}

void cpu_pool_barrier(cpu_threadpool *p)
{
    if (p->n == 1)
        return;
    uint32_t sense = atomic_load_explicit(&p->bar_sense, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == p->n - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_store_explicit(&p->bar_sense, sense + 1, memory_order_release);
        return;
    }
    long spins = 0;
    while (atomic_load_explicit(&p->bar_sense, memory_order_acquire) == sense) {
        if (++spins < SPIN_BEFORE_YIELD)
            cpu_relax();
        else
            sched_yield();
    }
}
