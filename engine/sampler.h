/* Token sampling: greedy, temperature, top-k, top-p, min-p, repetition /
 * presence / frequency penalties, per-request seed, top-n logprobs. */
#ifndef LLM_SAMPLER_H
#define LLM_SAMPLER_H

#include <stdint.h>

typedef struct {
    float    temperature;        /* 0 = greedy */
    int      top_k;              /* 0 = off */
    float    top_p;              /* 1 = off */
    float    min_p;              /* 0 = off */
    float    repetition_penalty; /* 1 = off (CTRL-style, divides positive logits) */
    float    presence_penalty;   /* 0 = off (OpenAI) */
    float    frequency_penalty;  /* 0 = off (OpenAI) */
    int      penalty_last_n;     /* window for penalties over prompt+output; 0 = all, -1 = output only */
    uint64_t seed;
    int      n_logprobs;         /* top-n logprobs to report, 0..20 */
} llm_sampling_params;

void llm_sampling_defaults(llm_sampling_params *p);
/* Check ranges; 0 ok, -1 and a message in msg. */
int  llm_sampling_validate(const llm_sampling_params *p, char *msg, size_t cap);

typedef struct { int32_t id; float logprob; } llm_token_logprob;

typedef struct {
    int32_t           id;        /* chosen token */
    float             logprob;   /* of the chosen token (under the model's distribution, before truncation) */
    int               n_top;
    llm_token_logprob top[20];
} llm_sample_result;

typedef struct llm_sampler llm_sampler;

llm_sampler *llm_sampler_new(const llm_sampling_params *p, int vocab_size);
void         llm_sampler_free(llm_sampler *s);
/* Record a token as part of the context (prompt tokens and every generated token). */
void         llm_sampler_accept(llm_sampler *s, int32_t id, int is_prompt);
/* Sample from logits (modified in place). Deterministic for a given seed and history. */
int32_t      llm_sampler_sample(llm_sampler *s, float *logits, llm_sample_result *res /* may be NULL */);

#endif
