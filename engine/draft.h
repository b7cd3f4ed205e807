/* Draft-model speculation's drafter: a smaller model over the same vocabulary, on a backend of its own
 * (its own paged KV pool), that proposes the next few tokens of several sequences at once.
 *
 * A sequence's state here is how many of its tokens the draft's KV holds. To draft, the drafter first
 * computes the tokens it has not seen (a new sequence's whole prompt, else what the target took since the
 * last step), batched over the sequences, and takes the argmax after the last one; then it feeds each draft
 * back, one batched call per draft token. The target checks the drafts (scheduler.c); llm_drafter_confirm
 * then keeps the draft's KV of those it confirmed, so the next round starts from there. Greedy drafts: the
 * target's own choice decides what stands, so the output does not depend on the draft model. */
#ifndef LLM_DRAFT_H
#define LLM_DRAFT_H

#include "backend.h"
#include "kv_cache.h"

#define LLM_DRAFT_MAX 16 /* drafts a sequence at most (LLM_SCHED_MAX_SPEC) */

typedef struct llm_drafter llm_drafter;

typedef struct {
    llm_kv_seq kv;       /* its table in the draft's pool */
    int        computed; /* tokens whose KV the draft holds and that stand */
    int        base;     /* the sequence's length when it last drafted (its drafts sit at base..) */
    int        n;        /* drafts made then */
} llm_drafter_seq;

typedef struct {
    const int32_t   *tokens;  /* the sequence so far; its last token is the target's next to compute */
    int              n_tokens;
    int              k;       /* drafts wanted, 1..LLM_DRAFT_MAX */
    llm_drafter_seq *seq;
    int32_t          out[LLM_DRAFT_MAX]; /* out: the drafts */
    int              n_out;   /* out: how many (0: none; the pool had no room) */
} llm_draft_req;

/* be: the draft model's backend (not owned); target_vocab: the target's vocabulary size (a draft id at or
 * past it ends that sequence's drafts); max_tokens: tokens a draft call may hold (its catch-up chunks). */
llm_drafter *llm_drafter_create(llm_backend *be, int target_vocab, int max_tokens, llm_err *err);
void         llm_drafter_destroy(llm_drafter *d);
/* Drafts for n sequences. 0, or -1 when the draft backend failed (err; no drafts, the sequences' state
 * dropped: they start over). A sequence whose table cannot grow gets none (its state dropped too). */
int  llm_drafter_run(llm_drafter *d, llm_draft_req **reqs, int n, llm_err *err);
/* After the target's step: `confirmed` of the last drafts stood; their KV stands with them. */
void llm_drafter_confirm(llm_drafter_seq *q, int confirmed);
/* The sequence is done (or preempted): its blocks go back. */
void llm_drafter_release(llm_drafter *d, llm_drafter_seq *q);
/* The draft pool's blocks: in use, and in all. */
void llm_drafter_blocks(const llm_drafter *d, int *used, int *total);

#endif
