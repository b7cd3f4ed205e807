/* The backend interface: the CPU backend implements it now, the CUDA backend
 * next. A forward call runs one step over a batch of tokens from any number of
 * sequences (prefill chunks and decodes mixed, each at its own position); the
 * KV cache is paged: fixed-size blocks from one pool, addressed per sequence
 * through a block table. */
#ifndef LLM_BACKEND_H
#define LLM_BACKEND_H

#include "common.h"
#include "model.h"

typedef struct {
    const int32_t *blocks;   /* block table: blocks[i] holds positions [i*bs, (i+1)*bs) */
    int            n_blocks;
} llm_seq_view;

typedef struct {
    int            n_tokens;
    const int32_t *tokens;      /* [n_tokens] */
    const int32_t *pos;         /* [n_tokens] position within its sequence */
    const int32_t *seq;         /* [n_tokens] index into seqs */
    const uint8_t *want_logits; /* [n_tokens] 1 = return this token's logits */
    int            n_seqs;
    const llm_seq_view *seqs;   /* must cover every position written this step */
} llm_batch;

typedef struct {
    int threads;     /* CPU threads (0 = all cores) */
    int kv_blocks;   /* blocks in the KV pool (0 = enough for one full-context sequence) */
    int block_size;  /* tokens per KV block (default 16) */
    int device;      /* GPU index */
    /* CUDA: share of the device's total memory the backend may hold in all
     * (weights, scratch, KV pool) when kv_blocks is 0 (0 = 0.90). */
    float gpu_memory_fraction;
} llm_backend_opts;

typedef struct llm_backend llm_backend;

#define LLM_BACKEND_NOMEM (-2) /* forward: out of (host or device) memory for this batch */

typedef struct {
    const char *name;
    int  (*init)(llm_backend *b, llm_err *err);
    /* logits: one row of vocab_size floats per token with want_logits set, in batch order.
     * 0 ok; LLM_BACKEND_NOMEM when memory for a batch this large could not be
     * had (nothing was computed and nothing is left half-written that the
     * caller relies on: a smaller batch may fit, so the scheduler shrinks its
     * step and retries); -1 any other failure. */
    int  (*forward)(llm_backend *b, const llm_batch *batch, float *logits, llm_err *err);
    void (*destroy)(llm_backend *b);
} llm_backend_ops;

/* Greedy on the device, for backends that offer it (see forward_argmax below). */
typedef struct {
    const uint8_t *argmax_only; /* [n_tokens] 1 = only this token's greedy id comes back (want_logits must be
                                 * set too); its logits row keeps its place in the output but is not written */
    int32_t       *ids;         /* [rows] out, row order as logits, filled for every row: the row's argmax as
                                 * the CPU sampler's greedy (NaN counts as -inf, +inf as FLT_MAX, ties: lowest id) */
    float         *logprob;     /* [rows] out: log-softmax of that id (-inf when every logit is -inf/NaN) */
} llm_argmax_out;

struct llm_backend {
    const llm_backend_ops *ops;
    const llm_model       *model;
    llm_backend_opts       opts;   /* resolved values (threads, kv_blocks, block_size) after init */
    void                  *impl;
    /* Optional (NULL = not offered; set by init): forward, except that the rows of tokens with
     * am->argmax_only set come back as am->ids / am->logprob instead of vocab_size floats. */
    int (*forward_argmax)(llm_backend *b, const llm_batch *batch, const llm_argmax_out *am, float *logits,
                          llm_err *err);
};

/* name: "cpu" (or "cuda" when built with it). NULL + err on failure. */
llm_backend *llm_backend_create(const char *name, const llm_model *m, const llm_backend_opts *o, llm_err *err);
void         llm_backend_free(llm_backend *b);

extern const llm_backend_ops llm_cpu_backend_ops;

#endif
