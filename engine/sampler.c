/* Token sampler: logit bias, penalties, logprobs, greedy / temperature / top-k / top-p /
 * min-p, seeded xoshiro256** draws.  Semantics and order: see sampler.h. */
#include "sampler.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float    l;  /* logit (penalised, cleaned) */
    float    w;  /* exp((l - max) / T) = p / p_max */
    uint64_t W;  /* fixed_w(w): the weight top-p and the draw add up */
    int32_t  id;
} cand;

struct llm_sampler {
    llm_sampling_params p;
    int      vocab;
    uint64_t rng[4];
    /* Penalty window: occurrences per id, and the ids with a non-zero count
     * (seen_pos maps id -> index in seen, or -1) so penalties cost O(distinct). */
    int32_t *count, *seen, *seen_pos;
    int      n_seen;
    /* The last `window` ids when penalty_last_n > 0.  Allocated as tokens
     * arrive (a window may be far larger than any real context); it only
     * wraps once full, so growing is a plain realloc. */
    int32_t *ring;
    int      ring_len, ring_head, ring_cap, window;
    cand    *cand;   /* vocab-sized scratch */
    struct typ { double score; int32_t at; } *typ; /* vocab-sized scratch of typical sampling (when set) */
    llm_logit_bias *bias; /* ascending ids, distinct */
    int      n_bias;
};

/* ---- PRNG: xoshiro256** seeded through splitmix64 ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t s[4]) { return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53; }

/* ---- parameters ---- */

void llm_sampling_defaults(llm_sampling_params *p)
{
    memset(p, 0, sizeof(*p));
    p->temperature = 1.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->typical_p = 1.0f;
    p->repetition_penalty = 1.0f;
    p->presence_penalty = 0.0f;
    p->frequency_penalty = 0.0f;
    p->penalty_last_n = -1;
    p->seed = 0;
    p->n_logprobs = 0;
}

/* Written as !(in range) so NaN fails every check. */
int llm_sampling_validate(const llm_sampling_params *p, char *msg, size_t cap)
{
    const char *m = NULL;
    char buf[160];
    if (p == NULL) {
        m = "no sampling parameters";
    } else if (!(p->temperature >= 0.0f && p->temperature <= LLM_SAMPLING_MAX_TEMPERATURE)) {
        snprintf(buf, sizeof buf, "temperature must be between 0 and %g (got %g)",
                 (double)LLM_SAMPLING_MAX_TEMPERATURE, (double)p->temperature);
        m = buf;
    } else if (!(p->top_p > 0.0f && p->top_p <= 1.0f)) {
        snprintf(buf, sizeof buf, "top_p must be greater than 0 and at most 1 (got %g)", (double)p->top_p);
        m = buf;
    } else if (p->top_k < 0) {
        snprintf(buf, sizeof buf, "top_k must be 0 (off) or positive (got %d)", p->top_k);
        m = buf;
    } else if (!(p->min_p >= 0.0f && p->min_p <= 1.0f)) {
        snprintf(buf, sizeof buf, "min_p must be between 0 and 1 (got %g)", (double)p->min_p);
        m = buf;
    } else if (!(p->typical_p >= 0.0f && p->typical_p <= 1.0f)) {
        snprintf(buf, sizeof buf, "typical_p must be between 0 and 1 (got %g)", (double)p->typical_p);
        m = buf;
    } else if (!(p->repetition_penalty > 0.0f && p->repetition_penalty <= 10.0f)) {
        snprintf(buf, sizeof buf, "repetition_penalty must be greater than 0 and at most 10 (got %g)",
                 (double)p->repetition_penalty);
        m = buf;
    } else if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f)) {
        snprintf(buf, sizeof buf, "presence_penalty must be between -2 and 2 (got %g)", (double)p->presence_penalty);
        m = buf;
    } else if (!(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f)) {
        snprintf(buf, sizeof buf, "frequency_penalty must be between -2 and 2 (got %g)", (double)p->frequency_penalty);
        m = buf;
    } else if (p->penalty_last_n < -1) {
        snprintf(buf, sizeof buf, "penalty_last_n must be -1 (output only), 0 (all) or a window size (got %d)",
                 p->penalty_last_n);
        m = buf;
    } else if (p->n_logprobs < 0 || p->n_logprobs > LLM_SAMPLING_MAX_LOGPROBS) {
        snprintf(buf, sizeof buf, "logprobs must be between 0 and %d (got %d)", LLM_SAMPLING_MAX_LOGPROBS,
                 p->n_logprobs);
        m = buf;
    }
    if (m == NULL)
        return 0;
    if (msg != NULL && cap > 0)
        snprintf(msg, cap, "%s", m);
    return -1;
}

/* ---- lifecycle and history ---- */

static int typical_on(const llm_sampling_params *p) { return p->typical_p > 0.0f && p->typical_p < 1.0f; }

llm_sampler *llm_sampler_new(const llm_sampling_params *p, int vocab_size)
{
    if (p == NULL || vocab_size <= 0 || llm_sampling_validate(p, NULL, 0) != 0)
        return NULL;
    llm_sampler *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->p = *p;
    s->vocab = vocab_size;
    size_t v = (size_t)vocab_size;
    s->count = calloc(v, sizeof(int32_t));
    s->seen = malloc(v * sizeof(int32_t));
    s->seen_pos = malloc(v * sizeof(int32_t));
    s->cand = malloc(v * sizeof(cand));
    s->typ = typical_on(p) ? malloc(v * sizeof(*s->typ)) : NULL;
    s->window = p->penalty_last_n;
    if (s->count == NULL || s->seen == NULL || s->seen_pos == NULL || s->cand == NULL ||
        (typical_on(p) && s->typ == NULL)) {
        llm_sampler_free(s);
        return NULL;
    }
    for (size_t i = 0; i < v; i++)
        s->seen_pos[i] = -1;
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    return s;
}

void llm_sampler_free(llm_sampler *s)
{
    if (s == NULL)
        return;
    free(s->count);
    free(s->seen);
    free(s->typ);
    free(s->seen_pos);
    free(s->ring);
    free(s->cand);
    free(s->bias);
    free(s);
}

typedef struct { llm_logit_bias b; int at; } bias_at;

static int cmp_bias_at(const void *x, const void *y)
{
    const bias_at *a = x, *b = y;
    if (a->b.id != b->b.id)
        return (a->b.id > b->b.id) - (a->b.id < b->b.id);
    return (a->at > b->at) - (a->at < b->at);
}

int llm_sampler_set_bias(llm_sampler *s, const llm_logit_bias *b, int n)
{
    if (s == NULL || n < 0 || (n > 0 && b == NULL))
        return -1;
    for (int i = 0; i < n; i++) /* written as !(in range) so NaN fails */
        if (b[i].id < 0 || b[i].id >= s->vocab ||
            !(b[i].bias >= -LLM_SAMPLING_MAX_BIAS && b[i].bias <= LLM_SAMPLING_MAX_BIAS))
            return -1;
    if (n == 0) {
        free(s->bias);
        s->bias = NULL;
        s->n_bias = 0;
        return 0;
    }
    bias_at *t = malloc((size_t)n * sizeof(*t));
    if (t == NULL)
        return -1;
    for (int i = 0; i < n; i++)
        t[i] = (bias_at){ b[i], i };
    qsort(t, (size_t)n, sizeof(*t), cmp_bias_at);
    int m = 0;
    for (int i = 0; i < n; i++) { /* one entry an id, its last */
        if (m > 0 && t[m - 1].b.id == t[i].b.id)
            m--;
        t[m++] = t[i];
    }
    for (int i = 0; i < m; i++) /* in place: an llm_logit_bias is no larger than a bias_at */
        ((llm_logit_bias *)t)[i] = t[i].b;
    free(s->bias);
    s->bias = (llm_logit_bias *)t;
    s->n_bias = m;
    return 0;
}

static void count_add(llm_sampler *s, int32_t id, int d)
{
    int32_t c = s->count[id] += d;
    if (c == 1 && d > 0) {
        s->seen_pos[id] = s->n_seen;
        s->seen[s->n_seen++] = id;
    } else if (c == 0) {
        int at = s->seen_pos[id];
        int32_t last = s->seen[--s->n_seen];
        s->seen[at] = last;
        s->seen_pos[last] = at;
        s->seen_pos[id] = -1;
    }
}

void llm_sampler_accept(llm_sampler *s, int32_t id, int is_prompt)
{
    if (s == NULL || id < 0 || id >= s->vocab)
        return;
    int n = s->window;
    if (n == -1 && is_prompt)
        return;
    if (n > 0 && s->ring_len == s->ring_cap && s->ring_cap < n) {
        int cap = s->ring_cap == 0 ? 256 : s->ring_cap;
        cap = cap > n / 2 ? n : cap * 2;
        int32_t *r = realloc(s->ring, (size_t)cap * sizeof(int32_t));
        if (r != NULL) {
            s->ring = r;
            s->ring_cap = cap;
        } else if (s->ring_cap > 0) {
            n = s->window = s->ring_cap; /* out of memory: a smaller window */
        } else {
            n = s->window = 0; /* out of memory: count everything, no window */
        }
    }
    if (n > 0) {
        if (s->ring_len == n) {
            count_add(s, s->ring[s->ring_head], -1);
            s->ring[s->ring_head] = id;
            s->ring_head = (s->ring_head + 1) % n;
        } else {
            s->ring[s->ring_len++] = id;
        }
    }
    count_add(s, id, +1);
}

/* ---- shared steps ---- */

/* NaN -> -inf, +inf -> FLT_MAX (branch-free so it vectorises). */
static void clean_row(float *logits, int n)
{
    for (int i = 0; i < n; i++) {
        float x = logits[i];
        x = x != x ? -INFINITY : x;
        logits[i] = x > FLT_MAX ? FLT_MAX : x;
    }
}

/* Logit biases, penalties over the window, then NaN -> -inf, +inf -> FLT_MAX. */
static void apply_penalties(llm_sampler *s, float *logits)
{
    const llm_sampling_params *p = &s->p;
    for (int i = 0; i < s->n_bias; i++)
        logits[s->bias[i].id] += s->bias[i].bias;
    if (p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f) {
        for (int i = 0; i < s->n_seen; i++) {
            int32_t id = s->seen[i];
            float l = logits[id];
            if (p->repetition_penalty != 1.0f)
                l = l > 0.0f ? l / p->repetition_penalty : l * p->repetition_penalty;
            l -= p->frequency_penalty * (float)s->count[id] + p->presence_penalty;
            logits[id] = l;
        }
    }
    clean_row(logits, s->vocab);
}

/* Largest value; eight independent lanes so the loop is not one long
 * compare-and-select dependency chain.  Logits are NaN-free here. */
static float max_value(const float *x, int n)
{
    float m[8];
    for (int j = 0; j < 8; j++)
        m[j] = -INFINITY;
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
    for (; i < n; i++)
        m[0] = x[i] > m[0] ? x[i] : m[0];
    for (int j = 1; j < 8; j++)
        m[0] = m[j] > m[0] ? m[j] : m[0];
    return m[0];
}

/* First index holding the maximum (ties: lowest id). */
static int32_t argmax(const float *x, int n)
{
    float m = max_value(x, n);
    for (int i = 0; i < n; i++)
        if (x[i] == m)
            return i;
    return 0;
}

/* Total order: larger logit first, then lower id. */
static int better(const cand *a, const cand *b) { return a->l > b->l || (a->l == b->l && a->id < b->id); }

/* Partial selection (Wirth's select, median-of-three pivot): afterwards c[0..k)
 * hold the k best of c[0..n) in some order. O(n) on average. */
static void select_top(cand *c, int n, int k)
{
    if (k <= 0 || k >= n)
        return;
    int lo = 0, hi = n - 1, t = k - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const cand *a = &c[lo], *b = &c[mid], *d = &c[hi], *m;
        if (better(a, b))
            m = better(b, d) ? b : (better(a, d) ? d : a);
        else
            m = better(a, d) ? a : (better(b, d) ? d : b);
        cand x = *m;
        int i = lo, j = hi;
        do {
            while (better(&c[i], &x)) i++;
            while (better(&x, &c[j])) j--;
            if (i <= j) {
                cand tmp = c[i];
                c[i] = c[j];
                c[j] = tmp;
                i++;
                j--;
            }
        } while (i <= j);
        if (j < t) lo = i;
        if (t < i) hi = j;
    }
}

static int cmp_cand(const void *x, const void *y)
{
    const cand *a = x, *b = y;
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

static void swap_cand(cand *a, cand *b)
{
    cand t = *a;
    *a = *b;
    *b = t;
}

/* Fixed-point weight of a candidate for top-p and the draw: W = floor(w * 2^40) (w = p / p_max in (0, 1]).
 * Integer masses add up exactly in any order, so the device sampler (kernels/cuda_sample.cu) reaches the
 * same nucleus and the same draw as this one from the same logits. A token with p < 2^-40 p_max weighs 0
 * (at most vocab * 2^-40 of the mass: 1e-7 at 128K tokens). */
static uint64_t fixed_w(float w) { return (uint64_t)(w * 0x1p40f); }

/* Order-preserving key of a logit: a larger float has a larger key; -0 and +0 share one. */
static uint32_t okey(float x)
{
    uint32_t u;
    x = x == 0.0f ? 0.0f : x;
    memcpy(&u, &x, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static int cmp_id(const void *x, const void *y)
{
    const cand *a = x, *b = y;
    return (a->id > b->id) - (a->id < b->id);
}

/* The first candidate in the total order whose running mass exceeds thr (the caller knows the candidates
 * weigh more than thr). No sort: a radix descent on the key, digits of 12, 12 and 8 bits, the bin where
 * the mass crosses thr chosen each time and its members moved to the front; the members of the last bin
 * share one logit and are walked in id order. Two passes over the candidates, then a few over a bin.
 * Rearranges c[0..n) (the same definition as the device's radix select, kernels/cuda_sample.cu). */
static cand find_mass(cand *c, int n, uint64_t thr)
{
    static const int shift[3] = { 20, 8, 0 }, bits[3] = { 12, 12, 8 };
    uint64_t hist[1 << 12];
    uint64_t rem = thr;
    int m = n;
    for (int d = 0; d < 3; d++) {
        uint32_t mask = (1u << bits[d]) - 1;
        memset(hist, 0, (mask + 1) * sizeof(uint64_t));
        for (int i = 0; i < m; i++)
            hist[(okey(c[i].l) >> shift[d]) & mask] += c[i].W;
        uint32_t b = mask;
        uint64_t acc = 0;
        while (b > 0 && acc + hist[b] <= rem)
            acc += hist[b--];
        rem -= acc;
        int j = 0;
        for (int i = 0; i < m; i++)
            if (((okey(c[i].l) >> shift[d]) & mask) == b)
                swap_cand(&c[i], &c[j++]);
        m = j;
    }
    if (m > 1)
        qsort(c, (size_t)m, sizeof(cand), cmp_id);
    uint64_t acc = 0;
    for (int i = 0; i < m; i++)
        if ((acc += c[i].W) > rem)
            return c[i];
    return c[m > 0 ? m - 1 : 0]; /* not reached while thr < the mass */
}

static int typical_keep(llm_sampler *s, int n);

/* Candidates after temperature, top-k, min-p, top-p and typical-p in s->cand[0..n) (unordered), with their weights;
 * returns n >= 1. No sorting anywhere: top-k is a partial selection, min-p a filter, top-p a selection on
 * the mass. */
static int build_candidates(llm_sampler *s, const float *logits)
{
    const llm_sampling_params *p = &s->p;
    int v = s->vocab;
    cand *c = s->cand;
    float invt = 1.0f / p->temperature;
    float maxl = max_value(logits, v);
    if (maxl == -INFINITY) { /* nothing is possible: fall back to id 0 */
        c[0] = (cand){ maxl, 1.0f, 1, 0 };
        return 1;
    }
    int n = v;
    if (p->top_k > 0 && p->top_k < v) {
        for (int i = 0; i < v; i++)
            c[i] = (cand){ logits[i], 0.0f, 0, i };
        n = p->top_k;
        select_top(c, v, n);
        for (int i = 0; i < n; i++) {
            c[i].w = expf((c[i].l - maxl) * invt);
            c[i].W = fixed_w(c[i].w);
        }
    } else {
        for (int i = 0; i < v; i++) {
            float w = expf((logits[i] - maxl) * invt);
            c[i] = (cand){ logits[i], w, fixed_w(w), i };
        }
    }
    /* top-p's mass is over the top-k survivors, before min-p */
    uint64_t target = 0;
    if (p->top_p < 1.0f) {
        uint64_t z = 0;
        for (int i = 0; i < n; i++)
            z += c[i].W;
        target = (uint64_t)ceil((double)p->top_p * (double)z);
    }
    /* min-p and top-p each keep a prefix of the sorted order, so the result
     * is the shorter one: filter by min-p first (w = p / p_max), then look for
     * the nucleus inside; if min-p's set holds less than top_p of the mass,
     * the whole set is kept. */
    if (p->min_p > 0.0f) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if (c[i].w >= p->min_p)
                c[k++] = c[i];
        n = k; /* >= 1: the max has w = 1 */
    }
    if (p->top_p < 1.0f) {
        uint64_t zc = 0;
        for (int i = 0; i < n; i++)
            zc += c[i].W;
        if (zc >= target) { /* the nucleus: every candidate up to the one where the mass reaches target */
            cand x = find_mass(c, n, target - 1);
            int k = 0;
            for (int i = 0; i < n; i++)
                if (better(&c[i], &x) || c[i].id == x.id)
                    c[k++] = c[i];
            n = k;
        }
    }
    if (typical_on(p) && n > 1)
        n = typical_keep(s, n);
    return n;
}

/* Closest surprise first; then the total order (larger logit, then lower id). */
static int cmp_typ(const void *x, const void *y, void *arg)
{
    const struct typ *a = x, *b = y;
    const cand *c = arg;
    if (a->score != b->score)
        return a->score < b->score ? -1 : 1;
    return better(&c[a->at], &c[b->at]) ? -1 : better(&c[b->at], &c[a->at]) ? 1 : 0;
}

static int cmp_typ_at(const void *x, const void *y)
{
    const struct typ *a = x, *b = y;
    return (a->at > b->at) - (a->at < b->at);
}

/* Locally typical sampling over c[0..n): q = w / sum(w), H = -sum q log q; the candidates by |-log q - H|,
 * closest first, are kept until their mass reaches typical_p (at least one). Returns the candidates kept,
 * compacted to the front in their order. Doubles throughout: it runs on the host only. */
static int typical_keep(llm_sampler *s, int n)
{
    cand *c = s->cand;
    struct typ *t = s->typ;
    double z = 0.0, h = 0.0;
    for (int i = 0; i < n; i++)
        z += c[i].w;
    for (int i = 0; i < n; i++) {
        double q = c[i].w / z;
        if (q > 0.0)
            h -= q * log(q);
    }
    for (int i = 0; i < n; i++) {
        double q = c[i].w / z;
        t[i].score = q > 0.0 ? fabs(-log(q) - h) : INFINITY;
        t[i].at = i;
    }
    qsort_r(t, (size_t)n, sizeof(*t), cmp_typ, c);
    double mass = 0.0;
    int k = 0;
    while (k < n && (k == 0 || mass < (double)s->p.typical_p))
        mass += c[t[k++].at].w / z;
    /* the kept ones back in c's order (their indices ascending, each at or after its new place) */
    qsort(t, (size_t)k, sizeof(*t), cmp_typ_at);
    int m = 0;
    for (; m < k; m++)
        c[m] = c[t[m].at];
    return m;
}

/* The draw, as the device sampler makes it: t = floor(u * Z) over the candidates' total weight Z; the token
 * is the first one, in the total order (larger logit, then lower id), whose running mass exceeds t. */
static int32_t draw(llm_sampler *s, int n, double u)
{
    cand *c = s->cand;
    uint64_t z = 0;
    for (int i = 0; i < n; i++)
        z += c[i].W;
    uint64_t t = (uint64_t)(u * (double)z);
    if (t >= z)
        t = z - 1;
    return find_mass(c, n, t).id;
}

static int greedy(const llm_sampler *s)
{
    return s->p.temperature == 0.0f || !isfinite(1.0f / s->p.temperature);
}

/* Log-softmax of the penalised logits: chosen token's logprob and the top n. */
static void logprobs_of(const float *logits, int v, int n_top, int32_t id, llm_sample_result *res)
{
    float maxl = max_value(logits, v);
    double z = 0.0;
    for (int i = 0; i < v; i++)
        z += expf(logits[i] - maxl);
    double lse = maxl == -INFINITY ? 0.0 : (double)maxl + log(z);
    res->id = id;
    res->logprob = (float)(logits[id] - lse);

    int want = n_top < v ? n_top : v, n = 0;
    llm_token_logprob *top = res->top;
    for (int i = 0; i < v && want > 0; i++) {
        float l = logits[i];
        if (n == want && !(l > top[n - 1].logprob))
            continue;
        int at = n < want ? n++ : want - 1; /* ascending ids: equals stay first */
        while (at > 0 && l > top[at - 1].logprob) {
            top[at] = top[at - 1];
            at--;
        }
        top[at] = (llm_token_logprob){ i, l };
    }
    for (int i = 0; i < n; i++)
        top[i].logprob = (float)(top[i].logprob - lse);
    res->n_top = n;
}

static void fill_logprobs(const llm_sampler *s, const float *logits, int32_t id, llm_sample_result *res)
{
    logprobs_of(logits, s->vocab, s->p.n_logprobs, id, res);
}

int llm_token_logprobs(float *logits, int vocab, int32_t id, int n_top, llm_sample_result *res)
{
    if (logits == NULL || res == NULL || vocab <= 0 || id < 0 || id >= vocab || n_top < 0 ||
        n_top > LLM_SAMPLING_MAX_LOGPROBS)
        return -1;
    clean_row(logits, vocab);
    logprobs_of(logits, vocab, n_top, id, res);
    return 0;
}

/* ---- public sampling ---- */

/* One sampling call; u: the draw (NULL = the next one of s's PRNG). */
static int32_t sample_with(llm_sampler *s, float *logits, const double *u, llm_sample_result *res)
{
    apply_penalties(s, logits);
    int32_t id;
    if (greedy(s)) {
        id = argmax(logits, s->vocab);
    } else {
        int n = build_candidates(s, logits);
        id = draw(s, n, u != NULL ? *u : rng_uniform(s->rng));
    }
    if (res != NULL)
        fill_logprobs(s, logits, id, res);
    return id;
}

int32_t llm_sampler_sample(llm_sampler *s, float *logits, llm_sample_result *res)
{
    if (s == NULL || logits == NULL)
        return -1;
    return sample_with(s, logits, NULL, res);
}

int llm_sampler_plain_greedy(const llm_sampler *s)
{
    if (s == NULL)
        return 0;
    const llm_sampling_params *p = &s->p;
    return greedy(s) && s->n_bias == 0 && p->n_logprobs == 0 && p->repetition_penalty == 1.0f &&
           p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f;
}

int llm_sampler_distribution(llm_sampler *s, float *logits, int32_t *ids, float *probs, int cap)
{
    if (s == NULL || logits == NULL || cap < 0 || (cap > 0 && (ids == NULL || probs == NULL)))
        return -1;
    apply_penalties(s, logits);
    if (greedy(s)) {
        if (cap > 0) {
            ids[0] = argmax(logits, s->vocab);
            probs[0] = 1.0f;
        }
        return 1;
    }
    int n = build_candidates(s, logits);
    cand *c = s->cand;
    qsort(c, (size_t)n, sizeof(cand), cmp_cand); /* the order the draw walks */
    uint64_t z = 0;
    for (int i = 0; i < n; i++)
        z += c[i].W;
    for (int i = 0; i < n && i < cap; i++) {
        ids[i] = c[i].id;
        probs[i] = (float)((double)c[i].W / (double)z);
    }
    return n;
}

/* ---- sampling on a device ---- */

static int penalty_pairs(const llm_sampler *s)
{
    const llm_sampling_params *p = &s->p;
    return p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f
               ? s->n_seen : 0;
}

int llm_sampler_device_pairs(const llm_sampler *s)
{
    return s == NULL ? 0 : penalty_pairs(s) + s->n_bias;
}

int llm_sampler_device_row(const llm_sampler *s, llm_sampling_row *r, int32_t *pen, int pen_cap)
{
    if (s == NULL || r == NULL)
        return -1;
    int np = penalty_pairs(s), nb = s->n_bias;
    if (np + nb > pen_cap || (np + nb > 0 && pen == NULL))
        return -1;
    if (typical_on(&s->p) && !greedy(s))
        return -1; /* typical sampling is drawn on the host (the device sampler does not make it) */
    r->p = s->p;
    if (greedy(s))
        r->p.temperature = 0.0f;
    r->pen_n = np;
    r->bias_n = nb;
    for (int i = 0; i < np; i++) {
        pen[2 * i] = s->seen[i];
        pen[2 * i + 1] = s->count[s->seen[i]];
    }
    for (int i = 0; i < nb; i++) {
        pen[2 * (np + i)] = s->bias[i].id;
        memcpy(&pen[2 * (np + i) + 1], &s->bias[i].bias, sizeof(float));
    }
    uint64_t peek[4];
    memcpy(peek, s->rng, sizeof peek);
    r->u = greedy(s) ? 0.0 : rng_uniform(peek);
    return np + nb;
}

int32_t llm_sampler_sample_row(const llm_sampling_row *r, const int32_t *pen, float *logits, int vocab,
                               llm_sample_result *res)
{
    if (r == NULL || logits == NULL || vocab <= 0 || r->pen_n < 0 || r->bias_n < 0 ||
        (r->pen_n + r->bias_n > 0 && pen == NULL))
        return -1;
    llm_sampler *s = llm_sampler_new(&r->p, vocab); /* NULL when a parameter is out of range */
    if (s == NULL)
        return -1;
    const int32_t *pp = pen + 2 * (size_t)r->pen_off;
    for (int i = 0; i < r->pen_n; i++) { /* the window as counts (ids outside the vocabulary ignored) */
        int32_t id = pp[2 * i], c = pp[2 * i + 1];
        if (id < 0 || id >= vocab || c <= 0 || s->count[id] != 0)
            continue;
        s->count[id] = c;
        s->seen_pos[id] = s->n_seen;
        s->seen[s->n_seen++] = id;
    }
    /* the biases as pairs of id and float bits; a device ignores ids outside the vocabulary, as here */
    const int32_t *bp = pp + 2 * (size_t)r->pen_n;
    s->bias = r->bias_n > 0 ? malloc((size_t)r->bias_n * sizeof(llm_logit_bias)) : NULL;
    if (r->bias_n > 0 && s->bias == NULL) {
        llm_sampler_free(s);
        return -1;
    }
    for (int i = 0; i < r->bias_n; i++) {
        llm_logit_bias b = { bp[2 * i], 0.0f };
        memcpy(&b.bias, &bp[2 * i + 1], sizeof(float));
        if (b.id >= 0 && b.id < vocab)
            s->bias[s->n_bias++] = b;
    }
    int32_t id = sample_with(s, logits, &r->u, res);
    llm_sampler_free(s);
    return id;
}

void llm_sampler_device_commit(llm_sampler *s)
{
    if (s != NULL && !greedy(s))
        (void)rng_uniform(s->rng);
}
