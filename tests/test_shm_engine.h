/* A no-op "model" behind llm_server for the shm tests: continuous batching of
 * up to max_batch requests, one token per request per step, token i of a request
 * being noop_token(prompt, i); fake KV blocks (one per 16 positions) so leaks
 * show. Runs as a thread (noop_thread) or step by step (noop_step). */
#ifndef TEST_SHM_ENGINE_H
#define TEST_SHM_ENGINE_H

#include "llm_server.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define NOOP_KV_BLOCK 16
#define NOOP_STOP_TOKEN 7 /* finishing with LLM_FINISH_STOP when listed in params.stop_ids */

static inline int32_t noop_token(const int32_t *prompt, uint32_t n_prompt, uint32_t i)
{
    return (int32_t)(((uint32_t)prompt[0] * 7u + n_prompt * 3u + i) % 500u);
}

typedef struct {
    llm_server *srv;
    _Atomic int stop;
    uint32_t    max_batch;
    uint32_t   *run;      /* running slots */
    uint32_t   *made;     /* tokens made, per slot */
    uint32_t   *blocks;   /* KV blocks held, per slot */
    uint32_t    n_run;
    int64_t     kv_total, kv_used;
    uint64_t    steps;
} noop_engine;

static inline void noop_init(noop_engine *e, llm_server *srv, uint32_t max_batch, int64_t kv_total)
{
    memset(e, 0, sizeof *e);
    uint32_t n = llm_server_map(srv)->hdr->caps.n_slots;
    e->srv = srv;
    e->max_batch = max_batch;
    e->run = calloc(n, sizeof *e->run);
    e->made = calloc(n, sizeof *e->made);
    e->blocks = calloc(n, sizeof *e->blocks);
    e->kv_total = kv_total;
}

static inline void noop_fini(noop_engine *e)
{
    free(e->run);
    free(e->made);
    free(e->blocks);
}

static inline void noop_publish_kv(noop_engine *e)
{
    llm_shm_metrics *m = llm_server_map(e->srv)->metrics;
    atomic_store(&m->kv_blocks_used, e->kv_used);
    atomic_store(&m->kv_blocks_free, e->kv_total - e->kv_used);
    atomic_store(&m->batch_size, (int64_t)e->n_run);
}

static inline void noop_end(noop_engine *e, uint32_t k, llm_finish_reason why)
{
    uint32_t slot = e->run[k];
    llm_server_finish(e->srv, slot, why, 0);
    e->kv_used -= e->blocks[slot];
    e->blocks[slot] = 0;
    e->run[k] = e->run[--e->n_run];
}

/* One scheduler step. Returns the number of tokens pushed plus requests admitted/ended. */
static inline int noop_step(noop_engine *e)
{
    int work = 0;
    uint64_t t0 = llm_shm_now_ns();
    llm_server_reap(e->srv, 0);
    uint32_t slot;
    while (e->n_run < e->max_batch && llm_server_pop(e->srv, &slot)) {
        uint32_t np;
        llm_server_prompt(e->srv, slot, &np);
        e->made[slot] = 0;
        e->blocks[slot] = (np + NOOP_KV_BLOCK) / NOOP_KV_BLOCK;
        e->kv_used += e->blocks[slot];
        e->run[e->n_run++] = slot;
        work++;
    }
    for (uint32_t k = 0; k < e->n_run;) {
        slot = e->run[k];
        const llm_shm_params *p = llm_server_params(e->srv, slot);
        if (llm_server_cancelled(e->srv, slot)) {
            noop_end(e, k, LLM_FINISH_CANCELLED);
            work++;
            continue;
        }
        if (llm_server_stream_space(e->srv, slot) == 0) { /* client behind: this one waits */
            k++;
            continue;
        }
        uint32_t np;
        const int32_t *prompt = llm_server_prompt(e->srv, slot, &np);
        int32_t tok = noop_token(prompt, np, e->made[slot]);
        llm_shm_logprob top[2] = { { tok, -0.5f }, { tok + 1, -1.5f } };
        llm_server_push(e->srv, slot, tok, -0.5f, top, p->n_logprobs < 2 ? (uint32_t)p->n_logprobs : 2);
        e->made[slot]++;
        work++;
        uint32_t pos = np + e->made[slot];
        if (pos % NOOP_KV_BLOCK == 0) {
            e->blocks[slot]++;
            e->kv_used++;
        }
        int stop = 0;
        for (uint32_t i = 0; i < p->n_stop; i++)
            stop |= p->stop_ids[i] == tok;
        if (stop) {
            noop_end(e, k, LLM_FINISH_STOP);
            continue;
        }
        if (e->made[slot] >= (uint32_t)p->max_tokens) {
            noop_end(e, k, LLM_FINISH_LENGTH);
            continue;
        }
        k++;
    }
    noop_publish_kv(e);
    if (work)
        llm_hist_observe(&llm_server_map(e->srv)->metrics->step_time, llm_shm_now_ns() - t0);
    e->steps++;
    return work;
}

static inline void *noop_thread(void *arg)
{
    noop_engine *e = arg;
    while (!atomic_load(&e->stop)) {
        if (noop_step(e))
            continue;
        /* nothing to do: sleep on the doorbell (short when stalled on full streams) */
        llm_server_wait(e->srv, e->n_run ? 1 : 20);
    }
    return NULL;
}

#endif
