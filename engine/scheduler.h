/* The scheduler: iteration-level (continuous) batching over a backend with a
 * paged KV cache. Requests join and leave the running batch at every step.
 * No threads inside: the caller (the serve loop) submits, cancels and calls
 * llm_sched_step from one thread.
 *
 * A step:
 *   1. Cancelled requests end (CANCELLED output); their KV blocks are freed.
 *   2. Running requests in decode get one token each, oldest first (a request
 *      whose next token would be sampled is skipped this step when the
 *      can_emit callback says its output has no room: back-pressure).
 *      A decode that needs a new KV block when none is left preempts the
 *      youngest running request not yet placed in this step (possibly itself):
 *      its blocks are freed and it goes back to the queue, ahead of later
 *      arrivals of its priority, to be recomputed from prompt + tokens generated
 *      so far. Its sampler (PRNG, penalty history) is kept, so its results do
 *      not change.
 *   3. Running requests still in prefill get chunks from the remaining token
 *      budget (max_batched_tokens), oldest first, shrunk to the blocks left.
 *   4. Waiting requests are admitted in queue order (priority, higher first,
 *      then arrival) while the batch has room (max_batch_size sequences, token
 *      budget left) and the KV pool has the blocks for the first chunk,
 *      counting the prompt's prefix-cache hits, plus one spare block for each
 *      running request whose next decode starts a new block. The head of the
 *      queue is never overtaken: when it does not fit, admission stops. (With
 *      can_emit saying no, a new request's prefill stops short of its last
 *      token.)
 *      Batch-fill hold (only when no request is running): admission is held
 *      while the batch it would form, n = min(waiting, max_batch_size), is not
 *      in preferred_batch_sizes, a preferred size p with n < p <=
 *      max_batch_size exists, and the oldest waiting request has waited less
 *      than batch_timeout_ms. Without preferred sizes or with timeout 0 nothing
 *      is held.
 *   5. One backend forward over all chunks (want_logits only on each
 *      sequence's last token, and only when that is the sequence's last known
 *      token, i.e. it samples now); full prompt blocks are registered in the
 *      prefix cache; each sequence that got logits samples one token (its own
 *      llm_sampler, per-request seed; penalties see prompt + generated) and
 *      emits it. A request ends after a stop id (the stop token is emitted,
 *      finish STOP), after max_tokens (LENGTH) or when the context (the model's,
 *      or the KV pool's if smaller) is full (LENGTH).
 * A prompt is matched against the prefix cache at admission up to its last
 * token, which is always computed (its logits are needed).
 * An embedding request (embed) generates nothing: its rows are the hidden
 * states after the final norm (LLM_WANT_HIDDEN), pooled, and it ends with
 * its prompt. With spec_tokens, a plain greedy decode carries drafts (n-gram
 * speculation, below) and may take several tokens in one step.
 *
 * Out of memory (self-healing): when the backend's forward reports
 * LLM_BACKEND_NOMEM (scratch for a batch this large could not be allocated;
 * nothing was computed), the step is not failed: a memory cap of half the
 * step's tokens (and at most as many sequences) is set under the batching
 * knobs, the youngest running requests beyond the sequence cap are preempted
 * (recomputed later, results unchanged), and the next step retries smaller.
 * Only a single-token step that still fails ends its request (ERROR, NOMEM).
 * Recovery: once the cap has not been binding (fewer than half its sequences
 * running or waiting and fewer than half its tokens stepped) for
 * oom_recover_ms, it doubles; at the knobs' values it is lifted. A failure
 * right after a growth doubles that hold (up to 64x), a full recovery resets
 * it. Counted in llm_sched_stats (oom_shrinks, oom_recoveries, mem_cap_*). */
#ifndef LLM_SCHEDULER_H
#define LLM_SCHEDULER_H

#include "backend.h"
#include "json_schema.h"
#include "kv_cache.h"
#include "sampler.h"

#define LLM_SCHED_MAX_PREFERRED 16
#define LLM_SCHED_MAX_STOP      16
#define LLM_SCHED_MAX_SCORE     4
#define LLM_SCHED_MAX_REASON_END 4
#define LLM_SCHED_SPEC_SEQS     8   /* speculation only while at most this many requests run */
#define LLM_SCHED_MAX_SPEC      16  /* spec_tokens at most */

/* Values match shm's llm_finish_reason. */
typedef enum {
    LLM_SCHED_FINISH_NONE      = 0,
    LLM_SCHED_FINISH_STOP      = 1,
    LLM_SCHED_FINISH_LENGTH    = 2,
    LLM_SCHED_FINISH_CANCELLED = 3,
    LLM_SCHED_FINISH_ERROR     = 4,
} llm_sched_finish;

typedef enum {
    LLM_SCHED_E_NONE    = 0,
    LLM_SCHED_E_BACKEND = 1, /* the backend's forward failed (llm_sched_last_error) */
    LLM_SCHED_E_NOMEM   = 2,
} llm_sched_error;

/* One output record: a token (token >= 0) and/or the end of the request
 * (finish != NONE). The last token of a request carries its finish reason; a
 * request cancelled or failed between tokens gets a record with token -1. */
typedef struct {
    uint64_t          id;
    void             *user;
    int32_t           token;
    float             logprob;    /* of token under the model (penalised, before temperature) */
    int               n_top;
    llm_token_logprob top[LLM_SAMPLING_MAX_LOGPROBS];
    int               prompt;     /* 1: token is a prompt token and logprob its prompt logprob, not output */
    const float      *embedding;  /* an embedding request's last record (token -1, STOP): its pooled hidden
                                   * state, n_embd floats (not normalised); valid until the next
                                   * llm_sched_step or llm_sched_destroy. NULL otherwise */
    int               n_embd;
    llm_sched_finish  finish;
    int               error;      /* llm_sched_error when finish == ERROR */
    /* request figures (filled on every record; timings are final on the last) */
    int               n_prompt, n_generated;
    int               n_cached;   /* prompt tokens taken from the prefix cache at (last) admission */
    int               n_preempted;
    double            queue_ms;   /* submit -> first admission */
    double            ttft_ms;    /* submit -> first token */
    double            tpot_ms;    /* mean time between later tokens */
} llm_sched_output;

typedef struct {
    int max_batch_size;        /* running sequences at most (0 = 64) */
    int max_batched_tokens;    /* tokens per step, decodes + prefill chunks (0 = 512) */
    int preferred_batch_sizes[LLM_SCHED_MAX_PREFERRED];
    int n_preferred;
    int batch_timeout_ms;      /* batch-fill hold, see above (0 = never hold) */
    int max_waiting;           /* queue bound: submit refuses beyond it (0 = unbounded) */
    int oom_recover_ms;        /* hold before a memory cap grows back, see above (0 = 1000) */
    /* Outputs go to on_output when set, else to a queue drained by llm_sched_next_output. */
    void (*on_output)(void *ctx, const llm_sched_output *o);
    /* Optional back-pressure: 0 = the request cannot take a token now (skipped this step). */
    int  (*can_emit)(void *ctx, uint64_t id, void *user);
    /* Optional: how many outputs the request can take now (prompt logprobs are held to it). */
    int  (*emit_room)(void *ctx, uint64_t id, void *user);
    void *cb_ctx;
    /* The vocabulary's bytes for JSON-mode and JSON Schema requests (json_mode.h); NULL: such requests
     * are refused. */
    const llm_json_vocab *json_vocab;
    /* Helper threads that make those requests' masks while the forward pass runs (mask_pool.h); 0: the
     * scheduler thread makes each after the forward. */
    int mask_threads;
    /* N-gram speculation (prompt lookup): a request in decode (greedy or sampled; not JSON-masked, not
     * min_tokens) gets up to spec_tokens drafted
     * tokens a step, the ones that followed the latest earlier occurrence of its last 2-3 tokens in its own
     * prompt and output; the step computes them with its token, and each draft the request's own choice at
     * that position confirms (its argmax, or its draw: the same PRNG state and penalties as without drafts) is
     * kept (a step then emits several tokens; the output is the same as without). Only while at
     * most LLM_SCHED_SPEC_SEQS requests run; drafts never preempt and fit the KV pool, the token budget and
     * the output room. 0 = off. */
    int spec_tokens;
    /* Draft-model speculation: with a draft (a backend of a smaller model over the same vocabulary, its own
     * KV pool), the spec_tokens drafts come from it instead of the n-gram lookup: before each step it takes
     * the speculating decodes' tokens it has not seen (their prompt, the first time) and then drafts greedily,
     * one batched call per draft token; what the target confirms is kept as above (same output), and the
     * draft's KV of confirmed drafts stands. Not owned. NULL = n-gram drafts.
     * Each draft costs a call of the draft model, so how many a sequence gets adapts to how many it has had
     * confirmed: it starts at spec_tokens; all confirmed, one more next time (up to spec_tokens); else one
     * past those confirmed (at least one). draft_fixed: always spec_tokens. */
    llm_backend *draft;
    int          draft_fixed;
    /* Optional clock (monotonic ns) for tests; NULL = CLOCK_MONOTONIC. */
    uint64_t (*now_ns)(void *ctx);
} llm_sched_config;

typedef struct {
    uint64_t            id;        /* caller's id, unique among live requests */
    void               *user;      /* handed back in outputs */
    const int32_t      *prompt;    /* copied */
    int                 n_prompt;
    llm_sampling_params sampling;
    const llm_logit_bias *bias;      /* copied; n_bias entries (llm_sampler_set_bias) */
    int                 n_bias;
    int                 prompt_logprobs; /* 1: first the logprob (and sampling.n_logprobs alternatives) of
                                      * each prompt token from the second on, as outputs with prompt = 1, from
                                      * the raw logits; such a request does not use the prefix cache */
    int                 json;        /* 1: JSON mode, the output is one JSON object (json_mode.h); it ends
                                      * ("stop") when the object closes, end-of-generation is masked */
    const char         *schema;      /* JSON Schema text (json_schema.h), schema_len bytes, or NULL: the
                                      * output is one value it accepts, ending ("stop") when it is whole;
                                      * compiled at submit (a schema it refuses: submit fails) */
    size_t              schema_len;
    int                 regex;       /* 1: schema is instead a regular expression the whole output matches
                                      * (llm_schema_regex); end-of-generation is let through where it may end */
    int                 grammar;     /* 1: schema is instead a GBNF grammar (llm_schema_grammar), ended as a regex */
    int                 max_tokens;  /* >= 1 */
    int                 min_tokens;  /* the stop ids cannot be generated before this many tokens (vLLM's) */
    const int32_t      *stop_ids;    /* copied; eog ids go here unless ignore_eos */
    int                 n_stop;      /* 0..LLM_SCHED_MAX_STOP */
    int                 priority;    /* higher first; equal: FIFO */
    int                 reasoning;   /* JSON mode / a schema on a reasoning model: the first token (or the
                                      * first after whitespace-only ones) may be reason_start (<think>)
                                      * besides what the mask allows; if it is, nothing is
                                      * masked until the reason_end sequence (</think>; gpt-oss's <|channel|>
                                      * final <|message|>) has been generated (0: the mask holds from the first
                                      * token; without json or schema: not used) */
    int32_t             reason_start;
    const int32_t      *reason_end;  /* copied; n_reason_end ids (1..LLM_SCHED_MAX_REASON_END) */
    int                 n_reason_end;
    const int32_t      *score_ids;   /* copied; n_score ids (0..LLM_SCHED_MAX_SCORE) whose logprobs each sampled
                                      * token's output reports in its top[] (in this order, instead of the top
                                      * sampling.n_logprobs), from the raw logits (before penalties and
                                      * masks); the rows come back from a device backend (scoring, /v1/rerank) */
    int                 n_score;
    int                 embed;       /* LLM_SCHED_EMBED_*: no token is generated; the prompt's hidden states
                                      * after the final norm, pooled, come back in the last output (its
                                      * embedding); max_tokens, sampling and stop ids are not used */
} llm_sched_request;

/* Pooling of an embedding request: the last prompt token's hidden state (decoder embedding models:
 * Qwen3-Embedding, e5-mistral, gte-Qwen2), or the mean over the prompt's tokens (such a request does not use
 * the prefix cache: every position is computed; a step spends at most 64 rows on it, as on prompt
 * logprobs). */
enum { LLM_SCHED_EMBED_NONE = 0, LLM_SCHED_EMBED_LAST = 1, LLM_SCHED_EMBED_MEAN = 2, LLM_SCHED_EMBED_CLS = 3 };
/* LLM_SCHED_EMBED_CLS: the first token's hidden state (BERT's [CLS]). A CLS request, and every request on an
 * encoder model (llm_config.encoder: whose tokens see the whole input), is computed in one step, never in
 * chunks nor from the prefix cache; an encoder's step may spend a row on each of its positions (mean
 * pooling), and an encoder takes embedding requests only, each at most the scheduler's max_batched_tokens
 * long. */

typedef struct {
    int      running, waiting;       /* now */
    long     prefill_pending;        /* now: prompt tokens (recomputes too) of those requests not yet computed */
    int      last_batch_seqs, last_batch_tokens;
    uint64_t steps;
    uint64_t prompt_tokens;          /* submitted */
    uint64_t tokens_in;              /* prefill tokens computed (recompute included) */
    uint64_t tokens_out;             /* tokens generated */
    uint64_t cached_tokens;          /* prompt tokens served by the prefix cache */
    uint64_t masks_pooled;           /* constrained rows whose mask the mask pool made during the forward */
    uint64_t spec_drafted, spec_accepted; /* speculation (n-gram or draft model): tokens drafted, and confirmed */
    uint64_t draft_failures;              /* draft-model calls that failed (those steps went without drafts) */
    double   draft_ms;                    /* time spent in the draft model */
    uint64_t preemptions;
    uint64_t finished[5];            /* by llm_sched_finish */
    int      max_step_tokens;        /* largest batch seen */
    double   last_step_ms, total_step_ms;  /* forward + sampling */
    uint64_t oom_shrinks;            /* steps the backend had no memory for (cap set or lowered) */
    uint64_t oom_recoveries;         /* memory caps lifted again */
    int      mem_cap_tokens, mem_cap_batch;  /* memory cap in force (0 = none) */
    llm_kv_stats kv;
    llm_kv_stats kvw;                /* the window pool's (backend opts.swa_blocks; all 0 without one) */
} llm_sched_stats;

typedef struct llm_sched llm_sched;

/* The scheduler drives b (not owned) over its resolved opts.kv_blocks /
 * opts.block_size. NULL + err on a bad config or out of memory. */
llm_sched *llm_sched_create(llm_backend *b, const llm_sched_config *cfg, llm_err *err);
/* Frees everything, live requests included (no outputs for them). */
void       llm_sched_destroy(llm_sched *s);

/* Queue a request. 0, or -1 + err: bad prompt (empty, id outside the vocab,
 * longer than the context), bad sampling params, max_tokens < 1, too many stop
 * ids, duplicate live id, queue full, out of memory. */
int  llm_sched_submit(llm_sched *s, const llm_sched_request *r, llm_err *err);
/* Flag a live request; it ends (CANCELLED, blocks freed) at the next step.
 * 0, or -1 for an unknown id. */
int  llm_sched_cancel(llm_sched *s, uint64_t id);

/* Run one step. 1 = requests remain (call again; see llm_sched_wait_ms),
 * 0 = idle, -1 = the backend failed (the batch's requests ended with ERROR;
 * the others go on; message in llm_sched_last_error). */
int  llm_sched_step(llm_sched *s);
/* How long the serve loop may sleep before the next step is useful, barring
 * new submissions or cancellations: 0 = step now; -1 = nothing to do until
 * something changes (no request at all, or the last step placed nothing
 * because every running request waits on back-pressure: poll for output
 * room); else ms until the batch-fill hold ends. */
int  llm_sched_wait_ms(llm_sched *s);

/* Next queued output (when no on_output callback): 1, or 0 when none. */
int  llm_sched_next_output(llm_sched *s, llm_sched_output *out);

void        llm_sched_get_stats(const llm_sched *s, llm_sched_stats *st);
const char *llm_sched_last_error(const llm_sched *s);
/* Tokens a request may hold in all (prompt + generated): min(model context, KV pool). */
int         llm_sched_context_limit(const llm_sched *s);

/* Change the batching knobs of a live scheduler (adaptive tuning). 0 keeps
 * max_batch_size / max_batched_tokens, -1 keeps batch_timeout_ms. The batch
 * buffers were sized at creation, so the creation values are upper bounds:
 * -1 (nothing changed) for a value above them or negative. */
int  llm_sched_set_knobs(llm_sched *s, int max_batch_size, int batch_timeout_ms, int max_batched_tokens);
void llm_sched_get_knobs(const llm_sched *s, int *max_batch_size, int *batch_timeout_ms, int *max_batched_tokens);

#endif
