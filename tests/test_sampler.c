/* Sampler: validation, greedy, seeded determinism, each filter's effect on a
 * crafted distribution, large-vocab filters against a full-sort reference,
 * sampling frequencies (fixed seed, so deterministic), penalties and their
 * windows, logit bias, logprobs. */
#include "tap.h"
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BIG_VOCAB 128256

static uint64_t lcg_state = 12345;
static double lcg01(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg_state >> 11) * 0x1.0p-53;
}

static llm_sampler *mk(llm_sampling_params p, int vocab)
{
    llm_sampler *s = llm_sampler_new(&p, vocab);
    if (s == NULL) {
        diag("llm_sampler_new failed");
        exit(1);
    }
    return s;
}

static llm_sampling_params params(float t)
{
    llm_sampling_params p;
    llm_sampling_defaults(&p);
    p.temperature = t;
    return p;
}

static int near(double a, double b, double tol) { return fabs(a - b) <= tol; }

static void test_validate(void)
{
    llm_sampling_params p;
    llm_sampling_defaults(&p);
    char msg[200] = "";
    is_int(llm_sampling_validate(&p, msg, sizeof msg), 0, "defaults validate");
#define BAD(field, expr, word) do {                                                   \
        llm_sampling_params q = p; q.field = expr; msg[0] = 0;                      \
        int rc = llm_sampling_validate(&q, msg, sizeof msg);                        \
        ok(rc == -1 && strstr(msg, word) != NULL, "%s = %s rejected: %s", #field, #expr, msg); \
        ok(llm_sampler_new(&q, 10) == NULL, "sampler_new refuses %s = %s", #field, #expr); \
    } while (0)
    BAD(temperature, -0.1f, "temperature");
    BAD(temperature, 2.5f, "temperature");
    BAD(temperature, NAN, "temperature");
    BAD(top_p, 0.0f, "top_p");
    BAD(top_p, 1.01f, "top_p");
    BAD(top_k, -1, "top_k");
    BAD(min_p, -0.01f, "min_p");
    BAD(min_p, 1.5f, "min_p");
    BAD(repetition_penalty, 0.0f, "repetition_penalty");
    BAD(repetition_penalty, 11.0f, "repetition_penalty");
    BAD(presence_penalty, 2.5f, "presence_penalty");
    BAD(frequency_penalty, -2.5f, "frequency_penalty");
    BAD(penalty_last_n, -2, "penalty_last_n");
    BAD(n_logprobs, 21, "logprobs");
    BAD(n_logprobs, -1, "logprobs");
#undef BAD
    llm_sampling_params q = p;
    q.temperature = 2.0f; q.top_p = 1.0f; q.top_k = 1000000; q.min_p = 1.0f;
    q.repetition_penalty = 10.0f; q.presence_penalty = -2.0f; q.frequency_penalty = 2.0f;
    q.penalty_last_n = 64; q.n_logprobs = 20;
    is_int(llm_sampling_validate(&q, msg, sizeof msg), 0, "boundary values accepted");
    ok(llm_sampler_new(&p, 0) == NULL, "vocab 0 refused");
    ok(llm_sampling_validate(&(llm_sampling_params){ .temperature = -1 }, NULL, 0) == -1,
       "validate with no message buffer");
}

static void test_greedy_and_logprobs(void)
{
    llm_sampling_params p = params(0.0f);
    p.n_logprobs = 16;
    llm_sampler *s = mk(p, 16);
    float logits[16], copy[16];
    for (int i = 0; i < 16; i++)
        logits[i] = (float)((i * 7) % 5) - 2.0f; /* max 2 at i = 2, 7, 12 (ties) */
    memcpy(copy, logits, sizeof logits);
    llm_sample_result r;
    int32_t id = llm_sampler_sample(s, logits, &r);
    is_int(id, 2, "greedy picks the max, lowest id among ties");
    is_int(r.id, 2, "result id matches");
    double z = 0;
    for (int i = 0; i < 16; i++)
        z += exp(copy[i]);
    ok(near(r.logprob, copy[2] - log(z), 1e-5), "chosen logprob is log-softmax (%f)", r.logprob);
    is_int(r.n_top, 16, "n_top = n_logprobs");
    double sum = 0;
    int sorted = 1;
    for (int i = 0; i < r.n_top; i++) {
        sum += exp(r.top[i].logprob);
        if (i > 0 && (r.top[i].logprob > r.top[i - 1].logprob ||
                      (r.top[i].logprob == r.top[i - 1].logprob && r.top[i].id < r.top[i - 1].id)))
            sorted = 0;
    }
    ok(near(sum, 1.0, 1e-5), "all-vocab logprobs sum to 1 (%f)", sum);
    ok(sorted, "top logprobs descending, ties by id");
    ok(r.top[0].id == 2 && r.top[1].id == 7 && r.top[2].id == 12, "the tied maxima come first, in id order");
    llm_sampler_free(s);

    /* logprobs ignore temperature and truncation (OpenAI semantics) */
    p = params(0.3f);
    p.top_k = 2;
    p.n_logprobs = 3;
    s = mk(p, 16);
    memcpy(logits, copy, sizeof logits);
    id = llm_sampler_sample(s, logits, &r);
    ok(id == 2 || id == 7, "top_k 2 keeps the two lowest-id maxima");
    ok(near(r.logprob, copy[id] - log(z), 1e-5), "chosen logprob before temperature/top-k");
    ok(r.n_top == 3 && r.top[2].id == 12 && near(r.top[2].logprob, 2.0 - log(z), 1e-5),
       "top logprobs are not truncated by top_k");
    llm_sampler_free(s);

    /* NaN and +inf logits */
    p = params(0.0f);
    s = mk(p, 4);
    float odd[4] = { NAN, 1.0f, NAN, 0.5f };
    is_int(llm_sampler_sample(s, odd, NULL), 1, "NaN logits never win");
    float inf[4] = { 0.0f, INFINITY, 3.0f, INFINITY };
    is_int(llm_sampler_sample(s, inf, NULL), 1, "+inf wins, lowest id");
    llm_sampler_free(s);
    p = params(1.0f);
    p.n_logprobs = 2;
    s = mk(p, 4);
    float all_nan[4] = { NAN, NAN, NAN, NAN };
    id = llm_sampler_sample(s, all_nan, &r);
    ok(id == 0 && r.logprob == -INFINITY, "all-NaN logits give id 0 without crashing");
    float one_inf[4] = { 0.0f, INFINITY, NAN, 1.0f };
    is_int(llm_sampler_sample(s, one_inf, NULL), 1, "sampling with +inf picks it");
    llm_sampler_free(s);
}

/* A crafted 6-token distribution on shuffled ids. */
static const int   craft_ids[6] = { 5, 0, 3, 1, 4, 2 };
static const float craft_p[6] = { 0.40f, 0.25f, 0.15f, 0.10f, 0.06f, 0.04f };

static void craft(float *logits)
{
    for (int i = 0; i < 6; i++)
        logits[craft_ids[i]] = logf(craft_p[i]) + 3.0f;
}

/* The sampler's candidate order is unspecified: sort (ids, probs) by logit
 * descending, ties by id, to compare with expectations. */
static const float *sort_key;
typedef struct { int32_t id; float p; } pair_t;
static int pair_cmp(const void *x, const void *y)
{
    const pair_t *a = x, *b = y;
    float la = sort_key[a->id], lb = sort_key[b->id];
    if (la != lb) return la > lb ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}
static void sort_dist(int32_t *ids, float *probs, int n, const float *logits)
{
    pair_t *t = malloc((size_t)n * sizeof(pair_t));
    for (int i = 0; i < n; i++)
        t[i] = (pair_t){ ids[i], probs[i] };
    sort_key = logits;
    qsort(t, (size_t)n, sizeof(pair_t), pair_cmp);
    for (int i = 0; i < n; i++) {
        ids[i] = t[i].id;
        probs[i] = t[i].p;
    }
    free(t);
}

static int dist(llm_sampling_params p, int32_t *ids, float *probs)
{
    llm_sampler *s = mk(p, 6);
    float logits[6], orig[6];
    craft(logits);
    craft(orig);
    int n = llm_sampler_distribution(s, logits, ids, probs, 6);
    sort_dist(ids, probs, n, orig);
    llm_sampler_free(s);
    return n;
}

static void test_filters(void)
{
    int32_t ids[6];
    float pr[6];
    llm_sampling_params p = params(1.0f);

    int n = dist(p, ids, pr);
    double sum = 0;
    int okp = 1;
    for (int i = 0; i < n; i++) {
        sum += pr[i];
        okp &= near(pr[i], craft_p[ids[i] == 5 ? 0 : ids[i] == 0 ? 1 : ids[i] == 3 ? 2 : ids[i] == 1 ? 3 : ids[i] == 4 ? 4 : 5], 1e-5);
    }
    ok(n == 6 && okp && near(sum, 1, 1e-5), "no filter: full distribution");
    ok(ids[0] == 5 && ids[5] == 2, "sorted for comparison");

    p.top_k = 3;
    n = dist(p, ids, pr);
    ok(n == 3 && ids[0] == 5 && ids[1] == 0 && ids[2] == 3, "top_k 3 keeps the 3 most likely, in order");
    ok(near(pr[0], 0.5, 1e-5) && near(pr[1], 0.3125, 1e-5) && near(pr[2], 0.1875, 1e-5), "top_k renormalises");

    p = params(1.0f);
    p.top_p = 0.6f;
    n = dist(p, ids, pr);
    ok(n == 2 && ids[0] == 5 && ids[1] == 0, "top_p 0.6 keeps 2 (0.40 + 0.25)");
    p.top_p = 0.7f;
    is_int(dist(p, ids, pr), 3, "top_p 0.7 keeps 3");
    p.top_p = 0.3f;
    n = dist(p, ids, pr);
    ok(n == 1 && ids[0] == 5 && pr[0] == 1.0f, "top_p below the max keeps only the max");

    p.top_k = 4;
    p.top_p = 0.8f; /* over the top 4 (mass 0.9): 0.444, 0.722, 0.889 */
    is_int(dist(p, ids, pr), 3, "top_p applies to the top_k-renormalised distribution");

    p = params(1.0f);
    p.min_p = 0.3f; /* p >= 0.12 */
    n = dist(p, ids, pr);
    int j5 = -1;
    for (int i = 0; i < n; i++)
        if (ids[i] == 5) j5 = i;
    ok(n == 3 && j5 >= 0 && near(pr[j5], 0.4 / 0.8, 1e-5), "min_p 0.3 keeps p >= 0.12");
    p.min_p = 1.0f;
    is_int(dist(p, ids, pr), 1, "min_p 1 keeps the max only");
    p.min_p = 0.2f; /* >= 0.08: 4 tokens */
    p.top_p = 0.95f; /* would keep 5 */
    is_int(dist(p, ids, pr), 4, "min_p cuts inside the nucleus");

    p = params(0.5f);
    n = dist(p, ids, pr);
    double z2 = 0;
    for (int i = 0; i < 6; i++)
        z2 += craft_p[i] * craft_p[i];
    int i5 = -1;
    for (int i = 0; i < n; i++)
        if (ids[i] == 5) i5 = i;
    ok(n == 6 && i5 >= 0 && near(pr[i5], 0.16 / z2, 1e-5), "temperature 0.5 squares the probabilities");
    p = params(2.0f);
    n = dist(p, ids, pr);
    double zs = 0;
    for (int i = 0; i < 6; i++)
        zs += sqrt(craft_p[i]);
    i5 = -1;
    for (int i = 0; i < n; i++)
        if (ids[i] == 5) i5 = i;
    ok(i5 >= 0 && near(pr[i5], sqrt(0.4) / zs, 1e-5), "temperature 2 flattens (square root)");

    p = params(0.0f);
    n = dist(p, ids, pr);
    ok(n == 1 && ids[0] == 5 && pr[0] == 1.0f, "greedy distribution is one-hot");
}

typedef struct { float l; int32_t id; } ref_t;
static int ref_cmp(const void *x, const void *y)
{
    const ref_t *a = x, *b = y;
    if (a->l != b->l) return a->l > b->l ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Large vocab: filters against a full-sort reference. */
static void test_big_vocab(void)
{
    float *logits = malloc(BIG_VOCAB * sizeof(float)), *work = malloc(BIG_VOCAB * sizeof(float));
    ref_t *ref = malloc(BIG_VOCAB * sizeof(ref_t));
    int32_t *ids = malloc(BIG_VOCAB * sizeof(int32_t));
    float *pr = malloc(BIG_VOCAB * sizeof(float));
    if (!logits || !work || !ref || !ids || !pr) { ok(0, "alloc"); return; }

    for (int round = 0; round < 2; round++) {
        /* round 0: peaked (a few dominant tokens); round 1: nearly flat, so
         * the nucleus spans most of the vocabulary and many ties occur */
        for (int i = 0; i < BIG_VOCAB; i++)
            logits[i] = round == 0 ? (float)(8.0 * pow(lcg01(), 30.0) + lcg01())
                                   : (float)((int)(lcg01() * 64) / 64.0);
        for (int i = 0; i < BIG_VOCAB; i++)
            ref[i] = (ref_t){ logits[i], i };
        qsort(ref, BIG_VOCAB, sizeof(ref_t), ref_cmp);
        double z = 0;
        for (int i = 0; i < BIG_VOCAB; i++)
            z += exp(ref[i].l - ref[0].l);

        llm_sampling_params p = params(1.0f);
        p.top_k = 40;
        llm_sampler *s = mk(p, BIG_VOCAB);
        memcpy(work, logits, BIG_VOCAB * sizeof(float));
        int n = llm_sampler_distribution(s, work, ids, pr, BIG_VOCAB);
        sort_dist(ids, pr, n, logits);
        int same = n == 40;
        for (int i = 0; i < n && same; i++)
            same = ids[i] == ref[i].id;
        ok(same, "round %d: top_k 40 = the reference's first 40 (ties by id)", round);
        llm_sampler_free(s);

        p = params(1.0f);
        p.top_p = 0.9f;
        s = mk(p, BIG_VOCAB);
        memcpy(work, logits, BIG_VOCAB * sizeof(float));
        n = llm_sampler_distribution(s, work, ids, pr, BIG_VOCAB);
        sort_dist(ids, pr, n, logits);
        double cum = 0;
        int want = 0;
        while (want < BIG_VOCAB && cum < 0.9 * z)
            cum += exp(ref[want++].l - ref[0].l);
        same = abs(n - want) <= 1; /* float vs double sums at the boundary */
        for (int i = 0; i < n && i < want && same; i++)
            same = ids[i] == ref[i].id;
        ok(same, "round %d: top_p 0.9 keeps the reference nucleus (%d vs %d)", round, n, want);
        llm_sampler_free(s);

        p.min_p = 0.5f;
        s = mk(p, BIG_VOCAB);
        memcpy(work, logits, BIG_VOCAB * sizeof(float));
        n = llm_sampler_distribution(s, work, ids, pr, BIG_VOCAB);
        sort_dist(ids, pr, n, logits);
        int same_m = 1;
        for (int i = 0; i < n && same_m; i++)
            same_m = ids[i] == ref[i].id;
        int want_m = 0;
        while (want_m < want && exp(ref[want_m].l - ref[0].l) >= 0.5 - 1e-6)
            want_m++;
        ok(same_m && abs(n - want_m) <= 1, "round %d: top_p + min_p 0.5 (%d vs %d)", round, n, want_m);
        llm_sampler_free(s);

        /* sampling stays inside the filtered set */
        p = params(0.8f);
        p.top_k = 50;
        p.top_p = 0.95f;
        p.seed = 7;
        s = mk(p, BIG_VOCAB);
        int inside = 1;
        for (int k = 0; k < 50; k++) {
            memcpy(work, logits, BIG_VOCAB * sizeof(float));
            int32_t id = llm_sampler_sample(s, work, NULL);
            int rank = -1;
            for (int i = 0; i < 50; i++)
                if (ref[i].id == id) rank = i;
            inside &= rank >= 0;
        }
        ok(inside, "round %d: 50 draws with top_k 50 / top_p 0.95 all inside the top 50", round);
        llm_sampler_free(s);
    }
    free(logits); free(work); free(ref); free(ids); free(pr);
}

static void random_logits(float *l, int v, uint64_t step)
{
    uint64_t x = step * 0x9e3779b97f4a7c15ULL + 1;
    for (int i = 0; i < v; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        l[i] = (float)((x >> 40) % 1000) / 250.0f;
    }
}

static void test_determinism(void)
{
    enum { V = 1000, STEPS = 200 };
    float l[V];
    int32_t a[STEPS], b[STEPS], c[STEPS], d[STEPS];
    llm_sampling_params p = params(1.0f);
    p.seed = 42;
    p.top_p = 0.9f;
    p.n_logprobs = 0;
    llm_sampler *s1 = mk(p, V), *s2, *s3;
    p.n_logprobs = 5; /* logprobs must not change the draws */
    s2 = mk(p, V);
    p.seed = 43;
    s3 = mk(p, V);
    llm_sample_result r;
    for (int i = 0; i < STEPS; i++) {
        random_logits(l, V, (uint64_t)i); a[i] = llm_sampler_sample(s1, l, NULL);
        random_logits(l, V, (uint64_t)i); c[i] = llm_sampler_sample(s3, l, NULL); /* interleaved */
        random_logits(l, V, (uint64_t)i); b[i] = llm_sampler_sample(s2, l, &r);
    }
    llm_sampler_free(s1); llm_sampler_free(s2); llm_sampler_free(s3);
    ok(!memcmp(a, b, sizeof a), "same seed, same logits: same tokens (with or without logprobs, interleaved)");
    int diff = 0;
    for (int i = 0; i < STEPS; i++)
        diff += a[i] != c[i];
    ok(diff > STEPS / 2, "a different seed gives different tokens (%d of %d differ)", diff, STEPS);

    /* a fresh sampler replays exactly */
    p.seed = 42;
    p.n_logprobs = 0;
    s1 = mk(p, V);
    for (int i = 0; i < STEPS; i++) {
        random_logits(l, V, (uint64_t)i);
        d[i] = llm_sampler_sample(s1, l, NULL);
    }
    llm_sampler_free(s1);
    ok(!memcmp(a, d, sizeof a), "replay with the same seed");
}

static void test_frequencies(void)
{
    enum { N = 40000 };
    const double pw[4] = { 0.5, 0.3, 0.15, 0.05 };
    llm_sampling_params p = params(1.0f);
    p.seed = 2024;
    llm_sampler *s = mk(p, 4);
    int cnt[4] = { 0 };
    for (int k = 0; k < N; k++) {
        float l[4];
        for (int i = 0; i < 4; i++)
            l[i] = (float)log(pw[i]);
        cnt[llm_sampler_sample(s, l, NULL)]++;
    }
    llm_sampler_free(s);
    int good = 1;
    for (int i = 0; i < 4; i++) {
        double sd = sqrt(N * pw[i] * (1 - pw[i]));
        good &= fabs(cnt[i] - N * pw[i]) < 4 * sd;
        diag("token %d: %d draws, expected %.0f +- %.0f", i, cnt[i], N * pw[i], sd);
    }
    ok(good, "frequencies within 4 sigma of the distribution");

    p.top_k = 2;
    p.temperature = 0.5f; /* top 2 squared: 0.25 : 0.09 */
    s = mk(p, 4);
    memset(cnt, 0, sizeof cnt);
    for (int k = 0; k < N; k++) {
        float l[4];
        for (int i = 0; i < 4; i++)
            l[i] = (float)log(pw[i]);
        cnt[llm_sampler_sample(s, l, NULL)]++;
    }
    llm_sampler_free(s);
    double q0 = 0.25 / 0.34, sd = sqrt(N * q0 * (1 - q0));
    ok(cnt[2] == 0 && cnt[3] == 0 && fabs(cnt[0] - N * q0) < 4 * sd,
       "top_k 2 at temperature 0.5: %d / %d (expected %.0f)", cnt[0], cnt[1], N * q0);

    /* top_p 0.85 keeps 0.5, 0.3, 0.15 (the nucleus is drawn unsorted) */
    p = params(1.0f);
    p.seed = 99;
    p.top_p = 0.85f;
    s = mk(p, 4);
    memset(cnt, 0, sizeof cnt);
    for (int k = 0; k < N; k++) {
        float l[4];
        for (int i = 0; i < 4; i++)
            l[i] = (float)log(pw[i]);
        cnt[llm_sampler_sample(s, l, NULL)]++;
    }
    llm_sampler_free(s);
    good = cnt[3] == 0;
    for (int i = 0; i < 3; i++) {
        double q = pw[i] / 0.95, sdq = sqrt(N * q * (1 - q));
        good &= fabs(cnt[i] - N * q) < 4 * sdq;
    }
    ok(good, "top_p 0.85 frequencies: %d %d %d %d", cnt[0], cnt[1], cnt[2], cnt[3]);
}

static void test_penalties(void)
{
    llm_sampling_params p = params(0.0f);
    p.repetition_penalty = 2.0f;
    p.penalty_last_n = 0;
    llm_sampler *s = mk(p, 4);
    llm_sampler_accept(s, 0, 1);
    llm_sampler_accept(s, 1, 0);
    llm_sampler_accept(s, 1, 0);
    llm_sampler_accept(s, 99, 0);  /* out of range: ignored */
    llm_sampler_accept(s, -1, 0);
    float l[4] = { 2.0f, -2.0f, 1.5f, 0.0f };
    is_int(llm_sampler_sample(s, l, NULL), 2, "repetition penalty moves the argmax");
    ok(l[0] == 1.0f && l[1] == -4.0f && l[2] == 1.5f && l[3] == 0.0f,
       "repetition: positive divided, negative multiplied, unseen untouched");
    llm_sampler_free(s);

    p = params(0.0f);
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    s = mk(p, 4); /* default window: output only */
    llm_sampler_accept(s, 0, 1); /* prompt: not counted */
    llm_sampler_accept(s, 2, 0);
    llm_sampler_accept(s, 2, 0);
    llm_sampler_accept(s, 2, 0);
    llm_sampler_accept(s, 3, 0);
    float m[4] = { 1.0f, 1.0f, 1.0f, 1.0f };
    llm_sampler_sample(s, m, NULL);
    ok(m[0] == 1.0f && m[1] == 1.0f && near(m[2], 1.0 - 0.5 - 0.75, 1e-6) && near(m[3], 1.0 - 0.5 - 0.25, 1e-6),
       "presence + frequency * count on generated tokens only");
    llm_sampler_free(s);

    p.penalty_last_n = 0; /* prompt counts too */
    s = mk(p, 4);
    llm_sampler_accept(s, 0, 1);
    float m2[4] = { 1.0f, 1.0f, 1.0f, 1.0f };
    llm_sampler_sample(s, m2, NULL);
    ok(near(m2[0], 0.25, 1e-6), "penalty_last_n 0 counts the prompt");
    llm_sampler_free(s);

    p.penalty_last_n = 2; /* sliding window over prompt + output */
    s = mk(p, 4);
    llm_sampler_accept(s, 0, 1);
    llm_sampler_accept(s, 1, 0);
    llm_sampler_accept(s, 1, 0);
    float m3[4] = { 1.0f, 1.0f, 1.0f, 1.0f };
    llm_sampler_sample(s, m3, NULL);
    ok(m3[0] == 1.0f && near(m3[1], 1.0 - 0.5 - 0.5, 1e-6), "window 2: token 0 fell out, token 1 counted twice");
    llm_sampler_accept(s, 2, 0);
    llm_sampler_accept(s, 3, 0);
    float m4[4] = { 1.0f, 1.0f, 1.0f, 1.0f };
    llm_sampler_sample(s, m4, NULL);
    ok(m4[0] == 1.0f && m4[1] == 1.0f && near(m4[2], 0.25, 1e-6) && near(m4[3], 0.25, 1e-6),
       "window slides: only the last 2 count");
    llm_sampler_free(s);

    /* a window larger than its first allocation, growing then sliding */
    p = params(0.0f);
    p.frequency_penalty = 0.005f;
    p.penalty_last_n = 300;
    s = mk(p, 4);
    for (int i = 0; i < 300; i++)
        llm_sampler_accept(s, 0, 0);
    for (int i = 0; i < 200; i++)
        llm_sampler_accept(s, 1, 1);
    float m6[4] = { 1.0f, 1.0f, 1.0f, 1.0f };
    llm_sampler_sample(s, m6, NULL);
    ok(near(m6[0], 0.5, 1e-5) && near(m6[1], 0.0, 1e-5) && m6[2] == 1.0f,
       "window 300 after 500 tokens: counts 100 and 200 (%g %g)", m6[0], m6[1]);
    llm_sampler_free(s);
    p.penalty_last_n = 1 << 30; /* huge windows cost only what is used */
    s = mk(p, 4);
    for (int i = 0; i < 1000; i++)
        llm_sampler_accept(s, 3, 0);
    float m7[4] = { 1.0f, 1.0f, 1.0f, 1.0f };
    llm_sampler_sample(s, m7, NULL);
    ok(near(m7[3], 1.0 - 5.0, 1e-4), "window 2^30: all 1000 tokens counted");
    llm_sampler_free(s);
    ok(llm_sampler_sample(NULL, m7, NULL) == -1 && llm_sampling_validate(NULL, NULL, 0) == -1,
       "NULL sampler / params refused");

    /* negative presence encourages; logprobs are over penalised logits */
    p = params(0.0f);
    p.presence_penalty = -2.0f;
    p.n_logprobs = 1;
    s = mk(p, 3);
    llm_sampler_accept(s, 1, 0);
    float m5[3] = { 1.0f, 0.0f, 0.5f };
    llm_sample_result r;
    is_int(llm_sampler_sample(s, m5, &r), 1, "negative presence penalty promotes a seen token");
    double z = exp(1.0) + exp(2.0) + exp(0.5);
    ok(near(r.logprob, 2.0 - log(z), 1e-5) && r.top[0].id == 1, "logprob uses the penalised logits");
    llm_sampler_free(s);
}

/* The draw as sampler.h defines it, written out plainly: fixed-point weights, full sort, t = floor(u * Z),
 * first token whose running mass exceeds t. */
static int32_t ref_draw(const float *l, int v, float temp, double u)
{
    ref_t *r = malloc((size_t)v * sizeof(ref_t));
    for (int i = 0; i < v; i++)
        r[i] = (ref_t){ l[i], i };
    qsort(r, (size_t)v, sizeof(ref_t), ref_cmp);
    uint64_t z = 0, acc = 0;
    uint64_t *w = malloc((size_t)v * sizeof(uint64_t));
    for (int i = 0; i < v; i++)
        z += w[i] = (uint64_t)(expf((r[i].l - r[0].l) * (1.0f / temp)) * 0x1p40f);
    uint64_t t = (uint64_t)(u * (double)z);
    int32_t id = r[v - 1].id;
    for (int i = 0; i < v; i++)
        if ((acc += w[i]) > t) {
            id = r[i].id;
            break;
        }
    free(r);
    free(w);
    return id;
}

/* What a device sampler is given (llm_sampler_device_row) and how the draw is defined. */
/* Locally typical sampling: against a reference (entropy, surprise distances, closest first until the mass),
 * frequencies that exclude the most likely token, composition with top-k, and no device row. */
static void test_typical(void)
{
    enum { N = 40000 };
    const double pw[4] = { 0.5, 0.3, 0.15, 0.05 };
    /* H = 1.1422; |-log p - H| = 0.449, 0.062, 0.755, 1.853: closest first 1, 0, 2, 3 */
    llm_sampling_params p = params(1.0f);
    p.seed = 7;
    p.typical_p = 0.7f; /* 0.3 then 0.8: tokens 1 and 0 */
    llm_sampler *s = mk(p, 4);
    int32_t ids[4];
    float pr[4];
    float l[4];
    for (int i = 0; i < 4; i++)
        l[i] = (float)log(pw[i]);
    int n = llm_sampler_distribution(s, l, ids, pr, 4);
    int has0 = 0, has1 = 0;
    for (int i = 0; i < n; i++) {
        has0 |= ids[i] == 0 && near(pr[i], 0.625, 1e-5);
        has1 |= ids[i] == 1 && near(pr[i], 0.375, 1e-5);
    }
    ok(n == 2 && has0 && has1, "typical_p 0.7 keeps the two closest to the entropy (0.3, then 0.5), renormalised");
    int cnt[4] = { 0 };
    for (int k = 0; k < N; k++) {
        for (int i = 0; i < 4; i++)
            l[i] = (float)log(pw[i]);
        cnt[llm_sampler_sample(s, l, NULL)]++;
    }
    double sd = sqrt(N * 0.625 * 0.375);
    ok(cnt[2] == 0 && cnt[3] == 0 && fabs(cnt[0] - N * 0.625) < 4 * sd, "typical_p 0.7 frequencies: %d %d %d %d",
       cnt[0], cnt[1], cnt[2], cnt[3]);
    llm_sampling_row r;
    ok(llm_sampler_device_row(s, &r, NULL, 0) == -1, "a typical row is not a device row (drawn on the host)");
    llm_sampler_free(s);

    p.typical_p = 0.2f; /* the closest alone: token 1, not the most likely */
    s = mk(p, 4);
    int only1 = 1;
    for (int k = 0; k < 200; k++) {
        for (int i = 0; i < 4; i++)
            l[i] = (float)log(pw[i]);
        only1 &= llm_sampler_sample(s, l, NULL) == 1;
    }
    ok(only1, "typical_p 0.2 keeps only the token of typical surprise, not the most likely one");
    llm_sampler_free(s);

    p.typical_p = 1.0f;
    s = mk(p, 4);
    for (int i = 0; i < 4; i++)
        l[i] = (float)log(pw[i]);
    is_int(llm_sampler_distribution(s, l, ids, pr, 4), 4, "typical_p 1: off");
    llm_sampler_free(s);
    p.typical_p = 0.0f;
    s = mk(p, 4);
    for (int i = 0; i < 4; i++)
        l[i] = (float)log(pw[i]);
    is_int(llm_sampler_distribution(s, l, ids, pr, 4), 4, "typical_p 0: off too (a zeroed struct)");
    llm_sampler_free(s);

    /* after top-k 3 (0.526, 0.316, 0.158: H = 0.983; distances 0.340, 0.170, 0.862): 1 then 0 */
    p.typical_p = 0.35f;
    p.top_k = 3;
    s = mk(p, 4);
    for (int i = 0; i < 4; i++)
        l[i] = (float)log(pw[i]);
    n = llm_sampler_distribution(s, l, ids, pr, 4);
    ok(n == 2, "typical over the top-k survivors: 0.316 < 0.35, so two kept (%d)", n);
    llm_sampler_free(s);

    /* a large random vocabulary against a plain reference */
    enum { V = 5000 };
    static float big[V], work[V];
    static int32_t bid[V];
    static float bpr[V];
    int same = 1;
    for (int t = 0; t < 20; t++) {
        random_logits(big, V, (uint64_t)t + 500);
        memcpy(work, big, sizeof work);
        llm_sampling_params q = params(1.0f);
        q.typical_p = 0.1f + 0.04f * (float)t;
        llm_sampler *bs = mk(q, V);
        n = llm_sampler_distribution(bs, work, bid, bpr, V);
        llm_sampler_free(bs);
        /* reference: softmax in double, entropy, sort by distance (ties: larger logit, lower id) */
        double mx = -INFINITY, z = 0, h = 0;
        for (int i = 0; i < V; i++) if (big[i] > mx) mx = big[i];
        static double pq[V], dd[V];
        static int ord[V];
        for (int i = 0; i < V; i++) z += pq[i] = exp((double)big[i] - mx);
        for (int i = 0; i < V; i++) { pq[i] /= z; if (pq[i] > 0) h -= pq[i] * log(pq[i]); }
        for (int i = 0; i < V; i++) { dd[i] = fabs(-log(pq[i]) - h); ord[i] = i; }
        for (int i = 1; i < V; i++) { /* insertion sort by distance */
            int x = ord[i], j = i - 1;
            while (j >= 0 && (dd[ord[j]] > dd[x] || (dd[ord[j]] == dd[x] && (big[ord[j]] < big[x] ||
                   (big[ord[j]] == big[x] && ord[j] > x))))) {
                ord[j + 1] = ord[j];
                j--;
            }
            ord[j + 1] = x;
        }
        double m = 0;
        int k = 0;
        while (k < V && (k == 0 || m < q.typical_p)) m += pq[ord[k++]];
        static char in[V];
        memset(in, 0, sizeof in);
        for (int i = 0; i < k; i++) in[ord[i]] = 1;
        int match = n == k;
        for (int i = 0; match && i < n; i++) match = in[bid[i]];
        if (!match) diag("typical_p %.2f: %d kept, reference %d", (double)q.typical_p, n, k);
        same &= match;
    }
    ok(same, "20 random 5000-token rows: the kept set is the reference's");
}

static void test_device_row(void)
{
    enum { V = 1000, STEPS = 300 };
    float l[V], l2[V];
    llm_sampling_params p = params(0.8f);
    p.seed = 77;
    llm_sampler *a = mk(p, V), *b = mk(p, V);
    int same = 1, peek_stable = 1;
    for (int i = 0; i < STEPS; i++) {
        random_logits(l, V, (uint64_t)i + 1000);
        for (int j = 0; j < V; j += 7) /* ties, so the id order matters */
            l[j] = l[0];
        memcpy(l2, l, sizeof l);
        llm_sampling_row r, r2;
        llm_sampler_device_row(a, &r, NULL, 0);
        llm_sampler_device_row(a, &r2, NULL, 0);
        peek_stable &= r.u == r2.u && r.u >= 0.0 && r.u < 1.0;
        llm_sampler_device_commit(a);
        int32_t want = ref_draw(l, V, 0.8f, r.u);
        same &= llm_sampler_sample(b, l2, NULL) == want;
    }
    ok(peek_stable, "device_row peeks the next draw without advancing the PRNG");
    ok(same, "%d draws: the sampler picks the first token in total order whose fixed-point running mass "
       "exceeds floor(u * Z), u = the draw device_row peeked", STEPS);
    llm_sampler_free(a);
    llm_sampler_free(b);

    p = params(1.0f);
    p.frequency_penalty = 0.5f;
    p.penalty_last_n = 0;
    p.top_k = 5;
    p.n_logprobs = 3;
    a = mk(p, 10);
    int32_t seq[6] = { 3, 4, 3, 9, 3, 4 };
    for (int i = 0; i < 6; i++)
        llm_sampler_accept(a, seq[i], i < 2);
    int32_t pen[20];
    llm_sampling_row r;
    is_int(llm_sampler_device_pairs(a), 3, "3 distinct tokens in the penalty window");
    is_int(llm_sampler_device_row(a, &r, pen, 2), -1, "too small a pair buffer is refused");
    is_int(llm_sampler_device_row(a, &r, pen, 20), 3, "3 pairs written");
    int c3 = 0, c4 = 0, c9 = 0;
    for (int i = 0; i < 3; i++) {
        c3 += pen[2 * i] == 3 ? pen[2 * i + 1] : 0;
        c4 += pen[2 * i] == 4 ? pen[2 * i + 1] : 0;
        c9 += pen[2 * i] == 9 ? pen[2 * i + 1] : 0;
    }
    ok(c3 == 3 && c4 == 2 && c9 == 1 && r.pen_n == 3, "pairs hold each id's count (3 x3, 4 x2, 9 x1)");
    ok(r.p.temperature == 1.0f && r.p.top_k == 5 && r.p.top_p == 1.0f && r.p.frequency_penalty == 0.5f &&
       r.p.n_logprobs == 3, "parameters copied");
    llm_sampler_free(a);

    /* the host reference of the device call: same token as the sampler that peeked the row */
    p = params(0.9f);
    p.seed = 3;
    p.top_p = 0.8f;
    p.presence_penalty = 0.5f;
    p.n_logprobs = 2;
    a = mk(p, 10);
    for (int i = 0; i < 5; i++)
        llm_sampler_accept(a, (int32_t)(i * 3 % 10), 0);
    float lg[10], lg2[10];
    for (int i = 0; i < 10; i++)
        lg[i] = lg2[i] = (float)((i * 7) % 10) / 3.0f;
    r.pen_off = 0;
    int np = llm_sampler_device_row(a, &r, pen, 20);
    llm_sample_result ra, rb;
    int32_t want = llm_sampler_sample(a, lg, &ra);
    int32_t got = llm_sampler_sample_row(&r, pen, lg2, 10, &rb);
    ok(np == 5 && got == want && rb.logprob == ra.logprob && rb.n_top == 2 && rb.top[0].id == ra.top[0].id,
       "llm_sampler_sample_row makes the call the sampler would (token %d vs %d)", got, want);
    llm_sampling_row bad = r;
    bad.p.top_p = 0.0f;
    is_int(llm_sampler_sample_row(&bad, pen, lg2, 10, NULL), -1, "sample_row: parameters out of range refused");
    is_int(llm_sampler_sample_row(&r, NULL, lg2, 10, NULL), -1, "sample_row: pairs announced but missing");
    is_int(llm_sampler_sample_row(NULL, pen, lg2, 10, NULL), -1, "sample_row: no row");
    int32_t hostile[4] = { -5, 3, 99, 2 }; /* ids outside the vocabulary are ignored */
    bad = r;
    bad.pen_n = 2;
    bad.pen_off = 0;
    ok(llm_sampler_sample_row(&bad, hostile, lg2, 10, NULL) >= 0, "sample_row: pair ids outside the vocabulary ignored");
    llm_sampler_free(a);

    p = params(1e-39f); /* 1 / T is not finite: greedy */
    a = mk(p, 10);
    llm_sampler_device_row(a, &r, pen, 20);
    ok(r.p.temperature == 0.0f && r.u == 0.0 && r.pen_n == 0, "a greedy call reaches the device as temperature 0");
    llm_sampler_free(a);
}

static void test_logit_bias(void)
{
    enum { V = 8 };
    float base[V] = { 1.0f, 3.0f, 2.0f, 0.5f, 2.5f, -1.0f, 0.0f, 2.9f }, l[V];
    llm_sampling_params p = params(0.0f);
    llm_sampler *s = mk(p, V);
    ok(llm_sampler_plain_greedy(s), "greedy without a bias is a plain argmax");
    llm_logit_bias bad[][1] = { { { -1, 1.0f } }, { { V, 1.0f } }, { { 2, 100.5f } }, { { 2, -101.0f } },
                                { { 2, NAN } } };
    int refused = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused &= llm_sampler_set_bias(s, bad[i], 1) == -1;
    ok(refused, "set_bias refuses ids outside the vocabulary, |bias| > 100 and NaN");
    ok(llm_sampler_plain_greedy(s), "a refused bias leaves the sampler as it was");
    is_int(llm_sampler_set_bias(s, NULL, 1), -1, "set_bias: entries announced but missing");

    llm_logit_bias ban[] = { { 1, -100.0f } };
    is_int(llm_sampler_set_bias(s, ban, 1), 0, "set_bias takes a valid entry");
    ok(!llm_sampler_plain_greedy(s), "greedy with a bias is not a plain argmax (it goes to the sampling call)");
    memcpy(l, base, sizeof l);
    is_int(llm_sampler_sample(s, l, NULL), 7, "-100 bans the best token: greedy takes the next (2.9)");
    ok(l[1] == 3.0f - 100.0f, "the bias is added to the logit (%g)", (double)l[1]);

    /* an id given twice: the last counts; biases are set anew by each call */
    llm_logit_bias twice[] = { { 5, 10.0f }, { 3, 2.0f }, { 5, 0.25f } };
    llm_sampler_set_bias(s, twice, 3);
    memcpy(l, base, sizeof l);
    is_int(llm_sampler_sample(s, l, NULL), 1, "the earlier bias list is gone; id 5's last bias (0.25) counts");
    ok(l[5] == -0.75f && l[3] == 2.5f, "ids 5 and 3 biased once each (%g, %g)", (double)l[5], (double)l[3]);
    llm_logit_bias boost[] = { { 6, 3.5f } };
    llm_sampler_set_bias(s, boost, 1);
    memcpy(l, base, sizeof l);
    is_int(llm_sampler_sample(s, l, NULL), 6, "+3.5 lifts token 6 (0 -> 3.5) over the best (3)");
    is_int(llm_sampler_set_bias(s, NULL, 0), 0, "an empty list clears the biases");
    ok(llm_sampler_plain_greedy(s), "... and greedy is a plain argmax again");
    llm_sampler_free(s);

    /* before the penalties (sampler.h's order), and the logprobs are those of the biased distribution */
    p = params(0.0f);
    p.repetition_penalty = 2.0f;
    p.n_logprobs = 2;
    s = mk(p, V);
    llm_sampler_accept(s, 2, 0);
    llm_logit_bias b2[] = { { 2, -3.0f }, { 4, 1.0f } };
    llm_sampler_set_bias(s, b2, 2);
    memcpy(l, base, sizeof l);
    llm_sample_result r;
    is_int(llm_sampler_sample(s, l, &r), 4, "biased 4 (3.5) wins");
    ok(l[2] == -2.0f, "token 2: biased first (2 - 3 = -1), then the repetition penalty on a negative logit "
       "(x2 = -2): got %g", (double)l[2]);
    double z = 0.0;
    for (int i = 0; i < V; i++)
        z += exp((double)l[i]);
    ok(near(r.logprob, 3.5 - log(z), 1e-5) && r.top[0].id == 4 && r.top[1].id == 1,
       "logprobs of the biased, penalised logits (%f)", r.logprob);
    llm_sampler_free(s);

    /* the device call carries the biases after the penalty pairs, as float bits; sample_row reproduces it */
    p = params(0.7f);
    p.seed = 11;
    p.frequency_penalty = 0.4f;
    p.top_p = 0.9f;
    p.n_logprobs = 3;
    llm_sampler *a = mk(p, V), *b = mk(p, V);
    for (int i = 0; i < 4; i++) {
        llm_sampler_accept(a, (int32_t)(i * 3 % V), 0);
        llm_sampler_accept(b, (int32_t)(i * 3 % V), 0);
    }
    llm_logit_bias b3[] = { { 7, -2.0f }, { 0, 1.5f }, { 7, 0.5f } };
    llm_sampler_set_bias(a, b3, 3);
    llm_sampler_set_bias(b, b3, 3);
    int np = llm_sampler_device_pairs(a);
    int32_t pen[32];
    llm_sampling_row row;
    is_int(llm_sampler_device_row(a, &row, pen, np - 1), -1, "device_row: a buffer one pair short is refused");
    int got_np = llm_sampler_device_row(a, &row, pen, 32);
    float b7;
    memcpy(&b7, &pen[2 * (row.pen_n + 1) + 1], sizeof b7);
    ok(got_np == np && row.pen_n == 4 && row.bias_n == 2 && pen[2 * row.pen_n] == 0 &&
       pen[2 * (row.pen_n + 1)] == 7 && b7 == 0.5f,
       "device_row: 4 penalty pairs, then 2 bias pairs in id order (0, 7 with its last bias 0.5)");
    int same = 1;
    for (int step = 0; step < 40; step++) {
        float x[V], y[V];
        for (int i = 0; i < V; i++)
            x[i] = y[i] = base[i] + (float)((step * 5 + i * 3) % 7) * 0.3f;
        row.pen_off = 0;
        np = llm_sampler_device_row(a, &row, pen, 32);
        llm_sample_result ra, rb;
        int32_t got = llm_sampler_sample_row(&row, pen, x, V, &ra);
        llm_sampler_device_commit(a);
        int32_t want = llm_sampler_sample(b, y, &rb);
        same &= got == want && ra.logprob == rb.logprob && ra.n_top == rb.n_top && ra.top[0].id == rb.top[0].id;
        llm_sampler_accept(a, want, 0);
        llm_sampler_accept(b, want, 0);
    }
    ok(same, "40 steps: sample_row from the device pairs makes the sampler's call (ids, logprobs, top-n)");
    row.bias_n = -1;
    is_int(llm_sampler_sample_row(&row, pen, l, V, NULL), -1, "sample_row: a negative bias count is refused");
    llm_sampler_free(a);
    llm_sampler_free(b);
}

int main(void)
{
    test_validate();
    test_greedy_and_logprobs();
    test_filters();
    test_big_vocab();
    test_determinism();
    test_frequencies();
    test_penalties();
    test_device_row();
    test_typical();
    test_logit_bias();
    return done_testing();
}
