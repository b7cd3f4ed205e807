/* Helper threads that compute constrained-decoding masks (json_schema.h) while the scheduler thread runs
 * the forward pass: a mask depends only on the tokens a request already accepted, so the masks of the
 * requests that sample this step can be made before their logits exist, and applied after. */
#ifndef LLM_MASK_POOL_H
#define LLM_MASK_POOL_H

#include <stdint.h>

#include "json_schema.h"

typedef struct {
    const llm_schema_state *state; /* not changed */
    uint64_t               *allow; /* (n_logits + 63) / 64 words, written */
    int                     left;  /* tokens left, written */
} llm_mask_job;

typedef struct llm_mask_pool llm_mask_pool;

/* threads >= 1 helper threads masking over v's n_logits tokens. NULL: no memory or no thread. */
llm_mask_pool *llm_mask_pool_new(int threads, const llm_json_vocab *v, int n_logits);
/* Waits for work in flight, then stops and joins the threads. */
void           llm_mask_pool_free(llm_mask_pool *p);
/* Hands the pool n jobs (the array is read until llm_mask_pool_wait returns) and returns at once. */
void           llm_mask_pool_start(llm_mask_pool *p, llm_mask_job *jobs, int n);
/* Returns once every job of the last start is done (at once when there was none). */
void           llm_mask_pool_wait(llm_mask_pool *p);

#endif
