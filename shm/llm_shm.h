/* The shared-memory segment between the engine (single consumer) and the nginx
 * workers (producers): fixed, versioned layout in POSIX shm "/llm-<name>".
 * Plain C11 + Linux (futex, abstract Unix sockets); no nginx, engine or CUDA
 * headers. See shm/README.md for the protocol and its crash-safety argument.
 *
 * Layout (offsets stored in the header, every part 64-byte aligned):
 *   header | metrics | waiters[n_waiters] | ring | slots[n_slots]
 * A slot is: llm_shm_slot | prompt int32[max_prompt] | stream entries[stream_cap]. */
#ifndef LLM_SHM_H
#define LLM_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define LLM_SHM_MAGIC    0x31304d48534d4c4cULL /* "LLMSHM01" little-endian */
#define LLM_SHM_VERSION  15u
#define LLM_SHM_MAX_NAME 48   /* segment name, without the "/llm-" prefix */
#define LLM_SHM_MAX_EOG  8
#define LLM_SHM_MAX_STOP 16
#define LLM_SHM_MAX_TOP  20   /* top-n logprobs per token, upper bound */
#define LLM_SHM_MAX_BIAS 1024 /* logit biases per request */
#define LLM_SHM_MAX_SCORE 4   /* token ids a scoring request reports the logprobs of */
#define LLM_SHM_MAX_REASON_END 4 /* ids of the sequence that ends a reasoning model's thinking */
#define LLM_SHM_MAX_SLOTS   (1u << 16)
#define LLM_SHM_MAX_WAITERS (1u << 15)

/* Return codes of every shm function: >= 0 success, < 0 one of these. */
enum {
    LLM_SHM_OK           = 0,
    LLM_SHM_E_NOENT      = -1,  /* no segment: engine not running */
    LLM_SHM_E_BADSEG     = -2,  /* wrong magic / layout version / sizes */
    LLM_SHM_E_NOT_READY  = -3,  /* engine starting or draining: 503 */
    LLM_SHM_E_ENGINE_GONE= -4,  /* engine died or restarted (generation changed) */
    LLM_SHM_E_NO_SLOT    = -5,  /* every request slot in use: 429 */
    LLM_SHM_E_RING_FULL  = -6,  /* submission ring full: 429 */
    LLM_SHM_E_TOO_LONG   = -7,  /* prompt longer than a slot holds */
    LLM_SHM_E_INVAL      = -8,  /* bad argument, stale handle or wrong state */
    LLM_SHM_E_SYS        = -9,  /* a system call failed (errno kept) */
    LLM_SHM_E_NO_WAITER  = -10, /* waiter table full */
    LLM_SHM_E_STREAM_FULL= -11, /* engine side: client has not read its tokens */
    LLM_SHM_E_BUSY       = -12, /* engine side: another live engine owns the name */
    /* Only as the error of a FAILED request (llm_req_status.error), set by the engine: */
    LLM_SHM_E_QUEUE_FULL = -13, /* the engine's waiting queue is full (serve --max-waiting): 429, retry */
    LLM_SHM_E_BACKEND    = -14, /* the forward pass failed */
    LLM_SHM_E_NOMEM      = -15, /* the engine ran out of memory */
};
const char *llm_shm_strerror(int rc);

typedef enum {
    LLM_ENGINE_STARTING = 0,
    LLM_ENGINE_READY    = 1,
    LLM_ENGINE_DRAINING = 2, /* finishing running requests, refusing new ones */
    LLM_ENGINE_STOPPED  = 3, /* segment dead: every client request ends with ENGINE_GONE */
} llm_engine_state;

/* Slot state machine, in the low 4 bits of llm_shm_slot.word:
 *   FREE -> RESERVED (client CAS) -> SUBMITTED (client, then ring push) -> RUNNING (engine pop)
 *        -> FINISHED | CANCELLED | FAILED (engine) -> FREE (client release)
 * Bit 4 DETACHED: the client let go before the end; whoever ends the request frees the slot.
 * Bits 16..31: index of the owning waiter, set in the same CAS as RESERVED, so a
 * client killed at any instruction never leaves a slot with an unknown owner. */
enum {
    LLM_SLOT_FREE = 0, LLM_SLOT_RESERVED = 1, LLM_SLOT_SUBMITTED = 2, LLM_SLOT_RUNNING = 3,
    LLM_SLOT_FINISHED = 4, LLM_SLOT_CANCELLED = 5, LLM_SLOT_FAILED = 6,
};
#define LLM_SLOT_STATE(w)    ((w) & 0xfu)
#define LLM_SLOT_DETACHED    0x10u
#define LLM_SLOT_OWNER(w)    ((w) >> 16)
#define LLM_SLOT_WORD(st, owner) ((uint32_t)(st) | ((uint32_t)(owner) << 16))
#define LLM_SLOT_TERMINAL(st) ((st) >= LLM_SLOT_FINISHED)

typedef enum {
    LLM_FINISH_NONE = 0,
    LLM_FINISH_STOP = 1,      /* end-of-generation or stop token */
    LLM_FINISH_LENGTH = 2,    /* max_tokens or context length */
    LLM_FINISH_CANCELLED = 3,
    LLM_FINISH_ERROR = 4,     /* see error code */
} llm_finish_reason;

/* Model description published by the engine. */
typedef struct {
    char     name[64];
    uint32_t vocab_size;
    uint32_t ctx_len;
    int32_t  bos_id, eos_id;       /* -1 if none */
    uint32_t n_eog;
    int32_t  eog_ids[LLM_SHM_MAX_EOG];
    uint32_t tok_kind;             /* 1 SentencePiece BPE, 2 byte-level BPE, 3 WordPiece (engine/tokenizer.h) */
    uint32_t n_embd;               /* floats in an embedding (LLM_PARAM_EMBED): the hidden size */
    uint32_t pooling;              /* the engine's pooling of embeddings: 1 last token, 2 mean, 3 first (CLS) */
    uint32_t n_cls;                /* a reranker's classifier head: its outputs (LLM_PARAM_RANK), 0 = none */
    uint32_t encoder;              /* 1: an encoder (BERT): embeddings only, no generation */
} llm_shm_model;

/* OpenAI's logit_bias entry: bias added to token id's logit before sampling. */
typedef struct {
    int32_t id;
    float   bias;
} llm_shm_bias;

/* Sampling parameters as they travel; fixed-width so the layout never changes with the compiler.
 * bias[] comes last: a client copies only its first n_bias entries into a slot. */
typedef struct {
    float    temperature;          /* 0 = greedy */
    int32_t  top_k;                /* 0 = off */
    float    top_p;                /* 1 = off */
    float    min_p;                /* 0 = off */
    float    typical_p;            /* 0 or 1 = off (locally typical sampling) */
    float    repetition_penalty;   /* 1 = off */
    float    presence_penalty;
    float    frequency_penalty;
    int32_t  penalty_last_n;       /* 0 = all, -1 = output only */
    uint64_t seed;
    int32_t  max_tokens;           /* > 0 */
    int32_t  n_logprobs;           /* 0..caps.max_top */
    uint32_t n_stop;
    int32_t  stop_ids[LLM_SHM_MAX_STOP];
    uint32_t flags;                /* LLM_PARAM_* */
    int32_t  priority;             /* queue order: lower first (vLLM's sense), equal: arrival */
    int32_t  min_tokens;           /* stop_ids cannot be generated before this many tokens */
    uint32_t schema_len;           /* bytes of JSON Schema text after the prompt ids in the prompt area */
    /* LLM_PARAM_REASONING: the id that opens a reasoning model's thinking (<think>) and the n_reason_end ids that
     * end it (</think>; gpt-oss's <|channel|> final <|message|>) */
    int32_t  reason_start;
    uint32_t n_reason_end;         /* 1..LLM_SHM_MAX_REASON_END */
    int32_t  reason_end[LLM_SHM_MAX_REASON_END];
    /* Scoring (/v1/rerank): the first generated token's entry reports, in its top[], the logprobs of these
     * ids at that position (in this order, instead of the top n_logprobs); 0 = off. Needs max_top >= n_score. */
    uint32_t n_score;              /* 0..LLM_SHM_MAX_SCORE */
    int32_t  score_ids[LLM_SHM_MAX_SCORE];
    uint32_t n_bias;               /* 0..LLM_SHM_MAX_BIAS */
    llm_shm_bias bias[LLM_SHM_MAX_BIAS];
} llm_shm_params;
/* Bytes of p a copy must take (the used part of bias[]); n_bias is checked by the caller. */
#define LLM_SHM_PARAMS_USED(p) (offsetof(llm_shm_params, bias) + (size_t)(p)->n_bias * sizeof(llm_shm_bias))
#define LLM_PARAM_IGNORE_EOS 1u
#define LLM_PARAM_JSON       2u /* JSON mode: the output is one JSON object (engine/json_mode.h) */
/* The prompt area's int32 words a prompt of n ids and schema_len bytes of schema text take. */
#define LLM_SHM_PROMPT_WORDS(n, schema_len) ((uint64_t)(n) + ((uint64_t)(schema_len) + 3) / 4)
#define LLM_PARAM_PROMPT_LOGPROBS 4u /* the prompt tokens' logprobs (and n_logprobs alternatives) first */
/* An embedding: nothing is generated; the prompt's hidden state, pooled as the engine pools
 * (llm_shm_model.pooling), is left in the slot's token-stream area, which it does not otherwise use, when it
 * finishes (llm_shm_slot.n_result floats, at most LLM_SHM_RESULT_MAX(hdr); llm_client_result). */
#define LLM_PARAM_EMBED 8u
/* A reasoning model's JSON mode / JSON Schema request: the answer may open with reason_start, and then the
 * mask holds only after the reason_end sequence (the model thinks first, as vLLM's reasoning parsers let it). */
#define LLM_PARAM_REASONING 16u
/* With LLM_PARAM_EMBED on a model with a classifier head (llm_shm_model.n_cls): the result is that head's
 * n_cls outputs on the last token's hidden state (llama.cpp's rank pooling; /v1/rerank), not the embedding. */
#define LLM_PARAM_RANK 32u
/* The schema text is instead a regular expression that the whole output matches, its bytes as they are
 * (engine/json_schema.h: llm_schema_regex; vLLM's guided_regex and guided_choice). */
#define LLM_PARAM_REGEX 64u
/* The schema text is instead a GBNF grammar that the whole output is a text of (engine/grammar.h;
 * llama.cpp's grammar, vLLM's guided_grammar). */
#define LLM_PARAM_GRAMMAR 128u

void llm_shm_params_defaults(llm_shm_params *p); /* greedy, max_tokens 16 */

typedef struct { int32_t id; float logprob; } llm_shm_logprob;

/* One generated token as the client reads it. */
typedef struct {
    int32_t         id;
    float           logprob;
    uint32_t        n_top;
    uint32_t        flags;        /* LLM_ENTRY_* */
    llm_shm_logprob top[LLM_SHM_MAX_TOP];
} llm_shm_token;

/* Capacities fixed at creation. */
typedef struct {
    uint32_t n_slots;     /* concurrent requests */
    uint32_t ring_size;   /* submission ring entries, power of two >= 2 */
    uint32_t max_prompt;  /* prompt token ids per slot */
    uint32_t stream_cap;  /* token stream entries per slot, power of two >= 2 */
    uint32_t max_top;     /* top-n logprobs stored per stream entry, 0..20 */
    uint32_t n_waiters;   /* client processes (or threads) attached at once */
} llm_shm_caps;

#define LLM_CACHELINE 64
#define LLM_ALIGNED __attribute__((aligned(LLM_CACHELINE)))

/* ---- metrics block: written by the engine (and rejections by clients), read by anyone ---- */
#define LLM_HIST_BUCKETS 28 /* bucket i counts values <= 2^i microseconds; the last is +Inf */

typedef struct {
    _Atomic uint64_t bucket[LLM_HIST_BUCKETS];
    _Atomic uint64_t count;
    _Atomic uint64_t sum_ns;
} llm_shm_hist;

/* Batching knobs changed live by a supervisor's tuner (engine/tuner.c): it writes
 * want_* and then bumps seq; the engine applies them at its next loop, writes
 * what is in force into cur_* and sets applied = seq. 0 in a want_* field keeps
 * that knob (batch_timeout_ms: -1 keeps it). */
typedef struct {
    _Atomic uint32_t seq, applied;
    _Atomic int32_t  want_max_batch_size, want_batch_timeout_ms, want_max_batched_tokens;
    _Atomic int32_t  cur_max_batch_size, cur_batch_timeout_ms, cur_max_batched_tokens;
} llm_shm_tuning;

typedef struct {
    /* requests by outcome */
    _Atomic uint64_t submitted, finished, cancelled, failed;
    _Atomic uint64_t rejected_no_slot, rejected_ring_full, rejected_not_ready;
    _Atomic uint64_t reclaimed_slots;   /* freed because the owner died */
    _Atomic uint64_t tokens_in, tokens_out;
    /* gauges */
    _Atomic int64_t  slots_in_use;      /* not FREE */
    _Atomic int64_t  running;           /* slots RUNNING (the engine's batch may be smaller) */
    _Atomic int64_t  batch_size;        /* set by the engine scheduler */
    _Atomic int64_t  kv_blocks_used, kv_blocks_free; /* set by the engine scheduler */
    _Atomic int64_t  kv_blocks_cached;  /* of the free ones: kept for the prefix cache (reusable) */
    _Atomic int64_t  kv_window_blocks_used, kv_window_blocks_free; /* the window pool (serve --swa-kv window) */
    _Atomic uint64_t tokens_cached;     /* prompt tokens served by the prefix cache (not computed) */
    _Atomic int64_t  queue_depth;       /* requests admitted by the engine, waiting for the batch */
    _Atomic int64_t  prefill_pending;   /* their prompt tokens not computed yet, running ones' too */
    _Atomic uint64_t preemptions;       /* running requests sent back to the queue (KV pool full) */
    _Atomic uint64_t oom_shrinks;       /* steps the backend had no memory for: steps capped smaller */
    _Atomic uint64_t oom_recoveries;    /* memory caps lifted again after load fell */
    _Atomic uint64_t spec_drafted, spec_accepted; /* n-gram speculation: tokens drafted, and confirmed */
    _Atomic int64_t  mem_cap_tokens, mem_cap_batch; /* memory cap in force (0 = none) */
    _Atomic int64_t  waiters;           /* registered clients */
    _Atomic uint64_t notifies_sent, doorbell_wakes;
    llm_shm_hist     step_time, ttft, tpot, queue_time;
    llm_shm_tuning   tuning;
} llm_shm_metrics;

void     llm_hist_observe(llm_shm_hist *h, uint64_t ns);
/* Approximate quantile (0..1) from the buckets, in ns (upper bound of the bucket). */
uint64_t llm_hist_quantile(const llm_shm_hist *h, double q);
uint64_t llm_hist_bucket_upper_ns(int i); /* UINT64_MAX for the last */

/* ---- waiters: one per attached client, for wake-ups back to it ---- */
enum { LLM_WAITER_FREE = 0, LLM_WAITER_CLAIMING = 1, LLM_WAITER_ACTIVE = 2, LLM_WAITER_GONE = 3 };
#define LLM_WAITER_WORD(st, pid) (((uint64_t)(uint32_t)(pid) << 8) | (uint64_t)(st))
#define LLM_WAITER_STATE(w) ((uint32_t)((w) & 0xff))
#define LLM_WAITER_PID(w)   ((int32_t)(uint32_t)((w) >> 8))

typedef struct {
    _Atomic uint64_t word;        /* state + pid in one CAS-able word */
    _Atomic uint32_t waiting;     /* client is about to sleep: engine sends one datagram */
    uint32_t         gen;         /* bumped each time the entry is claimed */
    uint64_t         starttime;   /* /proc/<pid>/stat field 22, guards against pid reuse (0 = unknown) */
    char             sock[56];    /* abstract Unix datagram socket name (without the leading NUL) */
} LLM_ALIGNED llm_shm_waiter;

/* ---- submission ring: bounded multi-producer, single-consumer, crash-tolerant ----
 * Cell word = seq (40 bits) << 24 | slot (24 bits). A producer claims a cell with one
 * CAS on the cell itself (empty-for-pos -> full-for-pos) and only then advances head,
 * which any producer may help with: a producer killed between the two steps leaves
 * the ring consistent. */
typedef struct {
    LLM_ALIGNED _Atomic uint64_t head; /* next position to fill (producers) */
    LLM_ALIGNED _Atomic uint64_t tail; /* next position to take (the engine only) */
    LLM_ALIGNED _Atomic uint64_t cell[]; /* ring_size words */
} llm_shm_ring;

/* ---- request slot ---- */
typedef struct {
    _Atomic uint32_t word;        /* state | DETACHED | owner << 16 */
    _Atomic uint32_t cancel;      /* set by the client (or by the reaper) */
    _Atomic uint32_t ticket;      /* bumped at every reserve; stale handles are refused */
    uint32_t         n_prompt;
    llm_shm_params   params;
    uint64_t         tag;         /* client's own id for the request */
    uint64_t         submit_ns;   /* monotonic, set by the client at submit */
    uint64_t         start_ns;    /* set by the engine at pop */
    uint64_t         first_ns, last_ns; /* first / latest token pushed */
    uint32_t         finish;      /* llm_finish_reason, valid once terminal */
    int32_t          error;       /* engine error code for FAILED */
    uint32_t         n_generated;
    uint32_t         n_cached;    /* prompt tokens the engine's prefix cache served (set before the first token) */
    uint32_t         n_result;    /* LLM_PARAM_EMBED: floats of the result in the stream area (set before FINISHED) */
    /* token stream: the engine pushes at head, the client takes at tail */
    LLM_ALIGNED _Atomic uint64_t stream_head;
    LLM_ALIGNED _Atomic uint64_t stream_tail;
} LLM_ALIGNED llm_shm_slot;

/* ---- header ---- */
typedef struct {
    uint64_t         magic;
    uint32_t         version;
    uint32_t         header_size;
    uint64_t         total_size;
    uint64_t         generation;   /* unique per engine start; constant for the segment */
    int32_t          engine_pid;
    uint32_t         pad0_;
    _Atomic uint32_t state;        /* llm_engine_state */
    uint32_t         pad1_;
    _Atomic uint64_t heartbeat_ns; /* CLOCK_MONOTONIC of the engine's last loop */
    llm_shm_model    model;
    llm_shm_caps     caps;
    uint64_t         off_metrics, off_waiters, off_ring, off_slots;
    uint64_t         slot_stride;  /* bytes per slot including prompt and stream */
    uint64_t         entry_size;   /* bytes per stream entry */
    uint64_t         off_prompt, off_stream; /* inside a slot */
    char             name[LLM_SHM_MAX_NAME];
    /* doorbell: the engine sleeps on this futex word when idle */
    LLM_ALIGNED _Atomic uint32_t doorbell;
    _Atomic uint32_t engine_sleeping;
} LLM_ALIGNED llm_shm_header;

/* Stream entry header; top[] of caps.max_top pairs follows. */
typedef struct {
    int32_t  id;
    float    logprob;
    uint32_t n_top;
    uint32_t flags;   /* LLM_ENTRY_* */
} llm_shm_entry;
/* A prompt token's logprob (LLM_PARAM_PROMPT_LOGPROBS): these come first, in prompt order from the
 * second prompt token on, and are not generated tokens. */
#define LLM_ENTRY_PROMPT 1u

/* Floats an embedding's result may hold: the token-stream area of a slot. */
#define LLM_SHM_RESULT_MAX(hdr) ((hdr)->caps.stream_cap * (hdr)->entry_size / sizeof(float))
static inline float *llm_shm_result_of(const llm_shm_header *h, void *slot)
{
    return (float *)((unsigned char *)slot + h->off_stream);
}

/* ---- a mapped segment, as either side sees it ---- */
typedef struct {
    unsigned char   *base;
    size_t           size;
    int              fd;
    llm_shm_header  *hdr;
    llm_shm_metrics *metrics;
    llm_shm_waiter  *waiters;
    llm_shm_ring    *ring;
    unsigned char   *slots;
} llm_shm_map;

/* Sizes and offsets for caps (validated: powers of two, limits); -1 on bad caps, message in err. */
int  llm_shm_layout(const llm_shm_caps *caps, llm_shm_header *hdr, char *err, size_t cap);
/* "/llm-<name>" into out; -1 if the name is empty, too long or has '/'. */
int  llm_shm_path(const char *name, char *out, size_t cap);
/* Map an existing segment and validate it (magic, version, sizes, offsets). */
int  llm_shm_open_map(const char *name, llm_shm_map *m, char *err, size_t cap);
void llm_shm_unmap(llm_shm_map *m);
/* Fill the pointers of m from m->base (after validation or creation). */
void llm_shm_bind(llm_shm_map *m);

static inline llm_shm_slot *llm_shm_slot_at(const llm_shm_map *m, uint32_t i)
{
    return (llm_shm_slot *)(m->slots + (size_t)i * m->hdr->slot_stride);
}
static inline int32_t *llm_shm_prompt_of(const llm_shm_map *m, llm_shm_slot *s)
{
    return (int32_t *)((unsigned char *)s + m->hdr->off_prompt);
}
static inline llm_shm_entry *llm_shm_entry_of(const llm_shm_map *m, llm_shm_slot *s, uint64_t pos)
{
    return (llm_shm_entry *)((unsigned char *)s + m->hdr->off_stream +
                             (size_t)(pos & (m->hdr->caps.stream_cap - 1)) * m->hdr->entry_size);
}

/* Ring operations (llm_ring.c). push: 0, or LLM_SHM_E_RING_FULL. pop: slot index, or -1 if empty. */
int      llm_ring_push(llm_shm_ring *r, uint32_t size, uint32_t slot);
int64_t  llm_ring_pop(llm_shm_ring *r, uint32_t size);
void     llm_ring_init(llm_shm_ring *r, uint32_t size);
uint64_t llm_ring_depth(const llm_shm_ring *r);
/* Engine only: is the entry at the tail filled? (head may lag behind a producer that died) */
int      llm_ring_ready(llm_shm_ring *r, uint32_t size);
/* Engine only: is slot currently queued in the ring? (used when reclaiming a dead owner's slot) */
int      llm_ring_contains(llm_shm_ring *r, uint32_t size, uint32_t slot);

/* Helpers shared by both sides (llm_shm.c). */
uint64_t llm_shm_now_ns(void);                 /* CLOCK_MONOTONIC */
uint64_t llm_shm_proc_starttime(int pid);      /* 0 if unknown */
int      llm_shm_pid_alive(int pid);           /* 0 only when kill(pid, 0) says ESRCH */
int      llm_futex_wait(_Atomic uint32_t *w, uint32_t expect, int timeout_ms); /* 0 woke, 1 timeout/changed */
void     llm_futex_wake(_Atomic uint32_t *w, int n);
/* Producer side of the doorbell: wake the engine if it sleeps. */
void     llm_shm_ring_doorbell(llm_shm_header *h, llm_shm_metrics *m);

#endif
