/* A compiled grammar, as grammar.c builds it and grammar_match.c reads it. */
#ifndef LLM_GRAMMAR_PRIV_H
#define LLM_GRAMMAR_PRIV_H

#include "grammar.h"

/* An element: its kind in the top two bits, its argument below. A rule's alternatives lie one after
 * another in el[], each ended by G_END. el[0] is the start, G_REF of root, then G_END. */
#define G_END 0u
#define G_SET (1u << 30)
#define G_REF (2u << 30)
#define G_KIND(e) ((e) & (3u << 30))
#define G_ARG(e)  ((e) & ((1u << 30) - 1))

typedef struct {
    uint64_t ascii[2];  /* code points below 0x80 */
    uint32_t off, n;    /* its ranges at or past 0x80 in rng[], sorted, apart */
} llm_grammar_set;

struct llm_grammar {
    uint32_t        *el;
    uint32_t         n_el;
    uint32_t        *rule_start, *rule_nalt; /* a rule's first alternative in el[], and how many */
    uint32_t         n_rules;
    llm_grammar_set *sets;
    uint32_t         n_sets;
    uint32_t        *rng;   /* pairs lo, hi (inclusive) */
    uint32_t         n_rng;
};

static inline int llm_grammar_set_has(const llm_grammar *g, const llm_grammar_set *s, uint32_t cp)
{
    if (cp < 128)
        return (int)((s->ascii[cp >> 6] >> (cp & 63)) & 1u);
    const uint32_t *r = g->rng + 2 * s->off;
    for (uint32_t i = 0; i < s->n && r[2 * i] <= cp; i++)
        if (cp <= r[2 * i + 1])
            return 1;
    return 0;
}

/* Some code point of [lo, hi] (all >= 0x80) is in s. */
static inline int llm_grammar_set_meets(const llm_grammar *g, const llm_grammar_set *s, uint32_t lo, uint32_t hi)
{
    const uint32_t *r = g->rng + 2 * s->off;
    for (uint32_t i = 0; i < s->n && r[2 * i] <= hi; i++)
        if (r[2 * i + 1] >= lo)
            return 1;
    return 0;
}

#endif
