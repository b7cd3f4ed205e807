/* The backend interface: the CPU backend implements it now, the CUDA backend
 * next. A forward call runs one step over a batch of tokens from any number of
 * sequences (prefill chunks and decodes mixed, each at its own position); the
 * KV cache is paged: fixed-size blocks from one pool, addressed per sequence
 * through a block table. */
#ifndef LLM_BACKEND_H
#define LLM_BACKEND_H

#include "common.h"
#include "model.h"
#include "sampler.h"

typedef struct {
    const int32_t *blocks;   /* block table: blocks[i] holds positions [i*bs, (i+1)*bs) */
    int            n_blocks;
    /* With a window pool (llm_backend_opts.swa_blocks > 0): the sliding-window layers' table, n_blocks
     * entries indexed as blocks, ids in that pool; the entries wholly before a step's earliest window start
     * may be stale (blocks given back, which no kernel reads). NULL otherwise. */
    const int32_t *swa_blocks;
} llm_seq_view;

typedef struct {
    int            n_tokens;
    const int32_t *tokens;      /* [n_tokens] */
    const int32_t *pos;         /* [n_tokens] position within its sequence */
    const int32_t *seq;         /* [n_tokens] index into seqs */
    const uint8_t *want_logits; /* [n_tokens] 1 = return this token's logits; LLM_WANT_HIDDEN = its hidden
                                 * state after the final norm instead (an embedding: dim floats at the start
                                 * of its row of the output, the rest of the row not written) */
    int            n_seqs;
    const llm_seq_view *seqs;   /* must cover every position written this step */
} llm_batch;

#define LLM_WANT_HIDDEN 2

#define LLM_TP_ID_BYTES 128 /* NCCL's unique id */

typedef struct {
    int threads;     /* CPU threads (0 = all cores) */
    int kv_blocks;   /* blocks in the KV pool (0: CPU enough for one full-context sequence, CUDA see there) */
    int block_size;  /* tokens per KV block (default 16) */
    /* The window pool: blocks of KV for the sliding-window layers alone (llm_swa_pool_layers), which then
     * keep nothing in the main pool; a sequence holds only its window's blocks there (the scheduler gives
     * back the older ones), so those layers cost memory by window, not by context. 0: every layer's KV in
     * the main pool. A backend resolves it to 0 for a model without such layers. */
    int swa_blocks;
    int device;      /* GPU index */
    /* CUDA: share of the device's total memory the backend may hold in all
     * (weights, scratch, KV pool) when kv_blocks is 0 (0 = 0.90). */
    float gpu_memory_fraction;
    /* CUDA: time the product paths (GEMV, int8 GEMV, tensor-core GEMM, cuBLAS, fusion, GEMV shapes,
     * programmatic dependent launch) on this device at start and keep the fastest per batch-size bucket,
     * and the prefill attention kernels on one prefill step (kernels/cuda_tune.cu): 0 = default (on), 1 on,
     * -1 off; for batches of up to tune_max_batch tokens
     * (0 = 256); tune_file (NULL = none) keeps the result between starts. */
    int         kernel_tune;
    int         tune_max_batch;
    const char *tune_file;
    /* CPU: size the per-step buffers for steps of this many tokens at init and touch their pages there, as
     * llama.cpp allocates its compute buffers with the context (0: they grow at the first step that needs
     * more, which then pays the page faults). */
    int         scratch_tokens;
    /* Element type of the KV cache: LLM_KV_AUTO, LLM_KV_F32, LLM_KV_F16 (llm_kv_f16 in backend_util.h) or
     * LLM_KV_Q8_0 (CPU backend). */
    int         kv_dtype;
    /* CPU: run on this (CPU) backend's threads instead of starting its own: a draft model's backend beside
     * the target's (the scheduler calls them one after the other, never at once), so that two pools do not
     * spin against each other on the same cores. NULL: its own. */
    const struct llm_backend *share_threads;
    /* Tensor parallelism (CUDA; engine/backend_tp.c): the model is split over tp_size GPUs, one process each,
     * device + rank; 0 or 1: not split. tp_rank and tp_id (the ranks' communicator, llm_cuda_tp_id) are
     * filled by backend_tp.c for each rank's own backend. tp_ep: a mixture of experts' experts dealt out whole
     * to the ranks (expert parallelism) instead of each split by columns (model_tp.h). */
    int           tp_size, tp_rank, tp_ep;
    unsigned char tp_id[LLM_TP_ID_BYTES];
} llm_backend_opts;

/* KV cache element types (llm_backend_opts.kv_dtype). AUTO is f16, as llama.cpp's and vLLM's default, except
 * for a model whose matrices are all F32 (a reference model, kept bit for bit with its f32 outputs). Q8_0 is
 * int8 with a float scale per group of llm_kv_q8_group(head_dim) elements (1.125 bytes an element at 32): the
 * CPU backend's, for twice the context or sequences of f16 in the same memory. */
enum { LLM_KV_AUTO = 0, LLM_KV_F32 = 1, LLM_KV_F16 = 2, LLM_KV_Q8_0 = 3 };

typedef struct llm_backend llm_backend;

#define LLM_BACKEND_NOMEM (-2) /* forward: out of (host or device) memory for this batch */
/* forward, a model split over GPUs (backend_tp.c): the step failed after its collectives had begun, so the ranks
 * are out of step and the backend can take no more steps */
#define LLM_BACKEND_BROKEN (-3)

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

/* What comes back for a token with want_logits set, per token (llm_device_out.mode). */
enum {
    LLM_ROW_LOGITS = 0, /* its vocab_size floats */
    LLM_ROW_ARGMAX = 1, /* only its greedy id and logprob: ids / logprob as the CPU sampler's greedy (NaN counts
                         * as -inf, +inf as FLT_MAX, ties: lowest id) and log-softmax of that id (-inf when every
                         * logit is -inf/NaN) */
    LLM_ROW_SAMPLE = 2  /* sampled on the device (backends with device_sampling): the whole llm_sampler_sample
                         * call described by its llm_sampling_row (sampler.h): id, logprob, top-n */
};

/* Results on the device instead of logits (forward_device). A row that is not LLM_ROW_LOGITS keeps its
 * place in the logits output but is not written. */
typedef struct {
    const uint8_t *mode;      /* [n_tokens] LLM_ROW_* (read for tokens with want_logits) */
    int32_t       *ids;       /* [rows] out, row order as logits, for ARGMAX and SAMPLE rows */
    float         *logprob;   /* [rows] out: log-softmax of that id (penalised logits for SAMPLE rows) */
    /* LLM_ROW_SAMPLE rows: one llm_sampling_row each (.row = its logits row, .pen_off into pen) */
    int                     n_sample;
    const llm_sampling_row *sample;   /* [n_sample] */
    const int32_t          *pen;      /* [n_pen][2]: id, count */
    int                     n_pen;
    llm_token_logprob      *top;      /* [n_sample][LLM_SAMPLING_MAX_LOGPROBS] out: top n_logprobs */
    int32_t                *n_top;    /* [n_sample] out */
} llm_device_out;

struct llm_backend {
    const llm_backend_ops *ops;
    const llm_model       *model;
    llm_backend_opts       opts;   /* resolved values (threads, kv_blocks, block_size) after init */
    void                  *impl;
    /* Optional (NULL = not offered; set by init): forward, except that the rows of tokens whose
     * dv->mode is not LLM_ROW_LOGITS come back through dv instead of as vocab_size floats. */
    int (*forward_device)(llm_backend *b, const llm_batch *batch, const llm_device_out *dv, float *logits,
                          llm_err *err);
    int device_sampling;  /* 1: forward_device takes LLM_ROW_SAMPLE rows (else ARGMAX only) */
    double tune_s;        /* seconds init spent on kernel tuning (CUDA; 0 when it did not run) */
    size_t weight_bytes;  /* bytes of weights as the backend holds them (CUDA: on the device, with scales;
                           * 0: as the model's, llm_model.weight_bytes) */
};

/* Before the first backend of this name is created on m, and before a fork
 * that shares m with a worker: lets the backend rearrange, in place, weights
 * that m converted at load (K-quants, held in m's own memory) instead of
 * holding a second copy of them. "cpu": those matrices are packed for the
 * VNNI kernels where the CPU has them (cpu/repack.c); m then runs on the CPU
 * backend only (llm_backend_create refuses the others). Other names: nothing
 * to do. 0 ok, -1 + err. */
int llm_backend_prepare(const char *name, llm_model *m, const llm_backend_opts *o, llm_err *err);
/* One line on stream (a FILE *) saying what llm_backend_prepare rearranged; nothing if nothing. */
void llm_backend_prepare_report(const llm_model *m, void *FILE_stream);
int llm_cpu_prepare_model(llm_model *m, const llm_backend_opts *o, llm_err *err);

/* name: "cpu" (or "cuda" when built with it). NULL + err on failure. With o->tp_size > 1 ("cuda"): the model
 * split over that many GPUs (backend_tp.h). */
llm_backend *llm_backend_create(const char *name, const llm_model *m, const llm_backend_opts *o, llm_err *err);
/* The same on one device, whatever o->tp_size says (o->tp_rank / tp_id: this rank's share of a split model). */
llm_backend *llm_backend_create_single(const char *name, const llm_model *m, const llm_backend_opts *o, llm_err *err);
void         llm_backend_free(llm_backend *b);

extern const llm_backend_ops llm_cpu_backend_ops;

#endif
