/* Token sampling: logit bias, greedy, temperature, top-k, top-p, min-p, repetition /
 * presence / frequency penalties, per-request seed, top-n logprobs.
 *
 * Order of operations in llm_sampler_sample (the HF / vLLM order):
 *   0. logit bias (OpenAI's logit_bias): logit[id] += bias for each (id, bias)
 *      the request set (llm_sampler_set_bias).
 *   1. penalties on the biased logits, for every token id seen inside the penalty
 *      window (count = its occurrences there):
 *        repetition (CTRL): logit > 0 ? logit / r : logit * r
 *        then logit -= frequency * count + presence * (count > 0)   (OpenAI)
 *      The window is the same for all three: penalty_last_n = -1 (the default,
 *      OpenAI semantics) counts generated tokens only; 0 counts prompt and
 *      output; N > 0 counts the last N tokens of prompt + output.
 *   2. logprobs: log-softmax of these penalised logits, before temperature and
 *      truncation (OpenAI semantics): the chosen token's logprob and the top
 *      n_logprobs (ties: lower id first).
 *   3. temperature 0: argmax (ties: lowest id).  Otherwise the logits are
 *      divided by the temperature, then top-k, then top-p (nucleus: the
 *      smallest set of most likely tokens whose probability, renormalised over
 *      the top-k survivors, reaches top_p), then min-p (keep p >= min_p * p_max;
 *      relative to the max, so renormalising does not change it), then locally
 *      typical sampling (typical_p: of the survivors, renormalised, the tokens
 *      whose surprise -log q is closest to their entropy, closest first, until
 *      their mass reaches typical_p; host only: a row with typical_p is never a
 *      device row), and one token
 *      is drawn with the request's PRNG (xoshiro256** seeded via splitmix64).
 *      Exactly one draw per non-greedy call, so the same seed and the same
 *      logits sequence always give the same tokens.
 *      Masses are fixed point, W = floor(p / p_max * 2^40), so that they add
 *      up exactly in any order: the nucleus is the smallest prefix of the
 *      total order (larger logit, then lower id) with W-mass >= ceil(top_p *
 *      the top-k survivors' mass), and the draw, u uniform in [0, 1),
 *      t = floor(u * Z), picks the first token of that order whose running
 *      W-mass exceeds t. A device that follows the same definition
 *      (kernels/cuda_sample.cu) picks the same token from the same logits.
 * NaN logits count as -inf, +inf as FLT_MAX. */
#ifndef LLM_SAMPLER_H
#define LLM_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    float    temperature;        /* 0 = greedy */
    int      top_k;              /* 0 = off */
    float    top_p;              /* 1 = off */
    float    min_p;              /* 0 = off */
    float    typical_p;          /* 1 or 0 = off (locally typical sampling, Meister et al.) */
    float    repetition_penalty; /* 1 = off (CTRL-style, divides positive logits) */
    float    presence_penalty;   /* 0 = off (OpenAI) */
    float    frequency_penalty;  /* 0 = off (OpenAI) */
    int      penalty_last_n;     /* window for penalties over prompt+output; 0 = all, -1 = output only */
    uint64_t seed;
    int      n_logprobs;         /* top-n logprobs to report, 0..20 */
} llm_sampling_params;

/* Largest temperature llm_sampling_validate accepts (OpenAI's range is 0..2). */
#define LLM_SAMPLING_MAX_TEMPERATURE 2.0f
#define LLM_SAMPLING_MAX_LOGPROBS    20

/* OpenAI defaults: temperature 1, no truncation, no penalties, penalty window
 * = output only, seed 0 (a server should pick a random seed when the request
 * has none), no logprobs. */
void llm_sampling_defaults(llm_sampling_params *p);
/* Check ranges; 0 ok, -1 and a message in msg.  temperature [0, 2], top_p (0, 1],
 * top_k >= 0 (>= vocab means off), min_p [0, 1], typical_p [0, 1], repetition (0, 10],
 * presence / frequency [-2, 2], penalty_last_n >= -1, n_logprobs 0..20. */
int  llm_sampling_validate(const llm_sampling_params *p, char *msg, size_t cap);

typedef struct { int32_t id; float logprob; } llm_token_logprob;

typedef struct {
    int32_t           id;        /* chosen token */
    float             logprob;   /* of the chosen token (under the model's distribution, before truncation) */
    int               n_top;
    llm_token_logprob top[20];
} llm_sample_result;

typedef struct llm_sampler llm_sampler;

/* The log-softmax of a row of raw model logits (NaN counts as -inf, +inf as FLT_MAX; logits cleaned in
 * place) at token id, and the n_top best (ties: lower id): what a prompt token's logprob is (no penalty,
 * bias or temperature). 0, or -1 for bad arguments. */
int          llm_token_logprobs(float *logits, int vocab, int32_t id, int n_top, llm_sample_result *res);

llm_sampler *llm_sampler_new(const llm_sampling_params *p, int vocab_size);
void         llm_sampler_free(llm_sampler *s);
/* OpenAI's logit_bias: a value added to a token's logit before everything else (step 0 above). */
typedef struct { int32_t id; float bias; } llm_logit_bias;
#define LLM_SAMPLING_MAX_BIAS 100.0f /* |bias| at most this (OpenAI: -100 bans a token, 100 forces it) */

/* Set s's logit biases (replacing any set before): ids in [0, vocab), |bias| <= LLM_SAMPLING_MAX_BIAS; an id
 * given twice keeps its last bias. 0, or -1 with s unchanged for a bad entry, NULL or no memory. */
int          llm_sampler_set_bias(llm_sampler *s, const llm_logit_bias *b, int n);
/* Record a token as part of the context (prompt tokens and every generated token).
 * Ids outside [0, vocab) are ignored. */
void         llm_sampler_accept(llm_sampler *s, int32_t id, int is_prompt);
/* Sample from logits (modified in place: penalties applied, NaN/inf cleaned).
 * Deterministic for a given seed and history.  -1 if s or logits is NULL. */
int32_t      llm_sampler_sample(llm_sampler *s, float *logits, llm_sample_result *res /* may be NULL */);

/* 1 when llm_sampler_sample is a plain argmax of the cleaned logits: greedy, no logit bias, no penalties
 * and no top-n logprobs; the chosen token's logprob is then log-softmax(logits)[argmax] (what a backend's on-device
 * argmax returns, see llm_argmax_out in backend.h). 0 otherwise or for NULL. */
int          llm_sampler_plain_greedy(const llm_sampler *s);

/* The distribution step 3 would draw from, without drawing (the PRNG is not
 * advanced): applies the penalties to logits in place like llm_sampler_sample,
 * writes up to cap candidates (ids, renormalised probabilities W / Z) in the
 * order the draw walks them (the total order, best first) and returns how many
 * candidates survive (greedy: 1). For tests and debugging. */
int          llm_sampler_distribution(llm_sampler *s, float *logits, int32_t *ids, float *probs, int cap);

/* ---- the same call made by a device (backend.h: LLM_ROW_SAMPLE) ----
 * The device gets the parameters, the penalty window as (id, count) pairs and
 * the uniform draw this call would make; it applies the steps above to the row
 * of logits it holds and returns what llm_sampler_sample would (id, logprob,
 * top-n). The PRNG stays here: llm_sampler_device_commit advances it once the
 * step succeeded, so a step retried (out of memory) draws the same u again. */
typedef struct {
    llm_sampling_params p;        /* the request's, temperature 0 when the call is greedy (also for temperatures
                                   * whose inverse is not finite); seed and penalty_last_n are not used */
    int32_t pen_off, pen_n;       /* pairs pen[2 * pen_off ...]: id, count; set pen_off yourself */
    int32_t bias_n;               /* then bias_n pairs pen[2 * (pen_off + pen_n) ...]: id, the bias's float bits */
    int32_t row;                  /* the logits row (set by the caller) */
    double  u;                    /* the next draw of the request's PRNG, [0, 1) (0 when greedy) */
} llm_sampling_row;

/* Pairs a device call needs now: the penalty window's (0 when no penalty is set) plus the logit biases. */
int          llm_sampler_device_pairs(const llm_sampler *s);
/* Fill r (all but pen_off and row) and up to pen_cap pairs; the PRNG is not advanced.
 * Returns the pairs written, -1 when pen_cap is too small or s / r is NULL. */
int          llm_sampler_device_row(const llm_sampler *s, llm_sampling_row *r, int32_t *pen, int pen_cap);
/* The device made the draw llm_sampler_device_row peeked: advance the PRNG (nothing when greedy). */
void         llm_sampler_device_commit(llm_sampler *s);
/* The call a device makes for r, made here (a reference for devices, and what a backend without a device
 * sampler could run): pairs pen[2 * r->pen_off ...] as the penalty window and the biases, r->u as the draw; logits
 * modified in place as by llm_sampler_sample. -1 for NULL arguments or parameters out of range. */
int32_t      llm_sampler_sample_row(const llm_sampling_row *r, const int32_t *pen, float *logits, int vocab,
                                    llm_sample_result *res);

#endif
