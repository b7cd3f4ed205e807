/* CPU backend forward pass on a tiny random model built in memory: batched
 * prefill == token-by-token decode, mixed sequences == alone, rotate-half
 * layout with permuted Q/K == adjacent, thread counts and ISAs agree, rope
 * scaling paths, bad batches give errors; plus stories260K greedy ids. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_util.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_features.h"
#include "tap.h"

enum { DIM = 64, HIDDEN = 96, LAYERS = 2, HEADS = 4, KV_HEADS = 2, HD = 16, VOCAB = 50, SEQ = 64 };

static uint64_t rng_state;
static float frand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

typedef struct {
    llm_model m;
    void *bufs[LAYERS * 9 + 8];
    int nbufs;
} test_model;

static llm_tensor mat(test_model *tm, llm_dtype t, int cols, int rows, const float *src, float scale)
{
    float *f = malloc((size_t)cols * rows * sizeof(float));
    for (int i = 0; i < cols * rows; i++)
        f[i] = src != NULL ? src[i] : frand() * scale;
    void *q = malloc(llm_dtype_row_bytes(t, (uint64_t)cols) * (size_t)rows);
    for (int r = 0; r < rows; r++)
        llm_row_from_f32(t, f + (size_t)r * cols, (uint8_t *)q + llm_dtype_row_bytes(t, (uint64_t)cols) * r,
                         (size_t)cols);
    free(f);
    tm->bufs[tm->nbufs++] = q;
    return (llm_tensor){ .type = t, .ne = { cols, rows }, .data = q };
}

/* Rows of an adjacent-layout Q/K matrix reordered for rotate-half rope. */
static float *permute_half(const llm_tensor *w, int n_heads)
{
    float *src = malloc((size_t)w->ne[0] * w->ne[1] * sizeof(float));
    float *dst = malloc((size_t)w->ne[0] * w->ne[1] * sizeof(float));
    llm_row_to_f32(LLM_F32, w->data, src, (size_t)(w->ne[0] * w->ne[1]));
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < HD; i++) {
            int from = h * HD + (i < HD / 2 ? 2 * i : 2 * (i - HD / 2) + 1);
            memcpy(dst + (size_t)(h * HD + i) * w->ne[0], src + (size_t)from * w->ne[0], (size_t)w->ne[0] * 4);
        }
    free(src);
    return dst;
}

static void build(test_model *tm, llm_dtype t, uint64_t seed, const test_model *adjacent)
{
    memset(tm, 0, sizeof(*tm));
    rng_state = seed;
    llm_config *c = &tm->m.cfg;
    c->dim = DIM; c->hidden_dim = HIDDEN; c->n_layers = LAYERS; c->n_heads = HEADS; c->n_kv_heads = KV_HEADS;
    c->head_dim = HD; c->vocab_size = VOCAB; c->seq_len = SEQ; c->rope_theta = 10000.0f; c->norm_eps = 1e-5f;
    c->tied_embeddings = 1; c->bos_id = 1; c->eos_id = 2;
    c->rope_layout = adjacent != NULL ? LLM_ROPE_HALF : LLM_ROPE_ADJACENT;
    tm->m.layers = calloc(LAYERS, sizeof(llm_layer));
    tm->bufs[tm->nbufs++] = tm->m.layers;
    for (int l = 0; l < LAYERS; l++) {
        llm_layer *L = &tm->m.layers[l];
        float nw[DIM];
        for (int i = 0; i < DIM; i++) nw[i] = 1.0f + 0.2f * frand();
        L->attn_norm = mat(tm, LLM_F32, DIM, 1, nw, 1);
        if (adjacent != NULL) {
            float *pq = permute_half(&adjacent->m.layers[l].wq, HEADS);
            float *pk = permute_half(&adjacent->m.layers[l].wk, KV_HEADS);
            L->wq = mat(tm, t, DIM, HEADS * HD, pq, 1);
            L->wk = mat(tm, t, DIM, KV_HEADS * HD, pk, 1);
            free(pq); free(pk);
            for (int i = 0; i < DIM * (HEADS + KV_HEADS) * HD; i++) frand(); /* keep the stream aligned */
        } else {
            L->wq = mat(tm, t, DIM, HEADS * HD, NULL, 0.3f);
            L->wk = mat(tm, t, DIM, KV_HEADS * HD, NULL, 0.3f);
        }
        L->wv = mat(tm, t, DIM, KV_HEADS * HD, NULL, 0.3f);
        L->wo = mat(tm, t, HEADS * HD, DIM, NULL, 0.2f);
        for (int i = 0; i < DIM; i++) nw[i] = 1.0f + 0.2f * frand();
        L->ffn_norm = mat(tm, LLM_F32, DIM, 1, nw, 1);
        L->w_gate = mat(tm, t, DIM, HIDDEN, NULL, 0.3f);
        L->w_up = mat(tm, t, DIM, HIDDEN, NULL, 0.3f);
        L->w_down = mat(tm, t, HIDDEN, DIM, NULL, 0.2f);
    }
    float nw[DIM];
    for (int i = 0; i < DIM; i++) nw[i] = 1.0f;
    tm->m.out_norm = mat(tm, LLM_F32, DIM, 1, nw, 1);
    tm->m.tok_embd = mat(tm, t, DIM, VOCAB, NULL, 1.0f);
    tm->m.output = tm->m.tok_embd;
}

static void release(test_model *tm)
{
    for (int i = 0; i < tm->nbufs; i++)
        free(tm->bufs[i]);
}

static llm_backend *make_backend(const llm_model *m, int threads)
{
    llm_err err;
    llm_backend_opts o = { .threads = threads, .kv_blocks = 40, .block_size = 4 };
    llm_backend *b = llm_backend_create("cpu", m, &o, &err);
    if (b == NULL)
        diag("backend: %s", err.msg);
    return b;
}

/* Block tables: sequence s uses blocks s, s+3, s+6, ... (interleaved, not in order). */
static int32_t tables[3][12];
static llm_seq_view views[3];
static void init_tables(void)
{
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < 12; i++)
            tables[s][i] = (int32_t)(39 - (s + 3 * i));
        views[s] = (llm_seq_view){ tables[s], 12, NULL };
    }
}

static const int32_t prompt_a[] = { 1, 7, 33, 12, 5, 48, 20, 9, 30, 11, 44, 3, 17, 29, 36, 2, 41, 13, 8, 21 };
static const int32_t prompt_b[] = { 1, 22, 3, 17, 40, 8, 26 };

/* All tokens of one sequence in one batch (every logit wanted). */
static int run_prefill(llm_backend *b, const int32_t *toks, int n, int seq_idx, float *logits)
{
    int32_t pos[32], seq[32];
    uint8_t want[32];
    for (int i = 0; i < n; i++) { pos[i] = i; seq[i] = seq_idx; want[i] = 1; }
    llm_batch bt = { n, toks, pos, seq, want, 3, views };
    llm_err err;
    int rc = b->ops->forward(b, &bt, logits, &err);
    if (rc != 0) diag("forward: %s", err.msg);
    return rc;
}

static int run_decode(llm_backend *b, const int32_t *toks, int n, int seq_idx, float *logits)
{
    for (int i = 0; i < n; i++) {
        int32_t pos = i, seq = seq_idx;
        uint8_t want = 1;
        llm_batch bt = { 1, &toks[i], &pos, &seq, &want, 3, views };
        llm_err err;
        if (b->ops->forward(b, &bt, logits + (size_t)i * VOCAB, &err) != 0) {
            diag("forward: %s", err.msg);
            return -1;
        }
    }
    return 0;
}

static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double mx = 0.0, scale = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        mx = d > mx ? d : mx;
        scale = fabs(b[i]) > scale ? fabs(b[i]) : scale;
    }
    return mx / scale;
}

static void test_prefill_vs_decode(llm_dtype t)
{
    test_model tm;
    build(&tm, t, 42, NULL);
    int n = (int)(sizeof(prompt_a) / sizeof(prompt_a[0]));
    float *lp = malloc((size_t)n * VOCAB * sizeof(float)), *ld = malloc((size_t)n * VOCAB * sizeof(float));
    llm_backend *b1 = make_backend(&tm.m, 2), *b2 = make_backend(&tm.m, 2);
    ok(b1 && b2 && run_prefill(b1, prompt_a, n, 0, lp) == 0 && run_decode(b2, prompt_a, n, 0, ld) == 0,
       "%s: prefill and decode run", llm_dtype_name(t));
    double d = max_rel_diff(lp, ld, (size_t)n * VOCAB);
    /* Batches of CPU_MM_WIDEN_MIN_TOKENS or more multiply quantised weights with
     * float activations, single tokens with Q8 ones: equal up to that rounding. */
    double tol = cpu_dtype_wants_q8(t) ? 6e-2 : 1e-4;
    /* F16 products of that many tokens on AMX tiles (kernels.h: gemm_f16_tiled) keep 16 bits of each
     * activation (two bf16), single tokens all of them: 1.7e-4 apart on this model */
    llm_err e;
    const cpu_kernels *def = cpu_kernels_select(&e);
    if (t == LLM_F16 && def != NULL && def->gemm_f16_tiled != NULL)
        tol = 1e-3;
    ok(d < tol, "%s: batched prefill (%d tokens) logits == token-by-token decode logits (rel diff %.2g)",
       llm_dtype_name(t), n, d);
    /* A short batch takes the same integer path as decode: equal to rounding. */
    int ns = CPU_MM_WIDEN_MIN_TOKENS - 1;
    llm_backend_free(b1);
    b1 = make_backend(&tm.m, 2);
    ok(b1 && run_prefill(b1, prompt_a, ns, 0, lp) == 0, "%s: short prefill runs", llm_dtype_name(t));
    d = max_rel_diff(lp, ld, (size_t)ns * VOCAB);
    ok(d < 1e-5, "%s: batched prefill (%d tokens) logits == decode logits (rel diff %.2g)", llm_dtype_name(t), ns, d);
    llm_backend_free(b1); llm_backend_free(b2);
    free(lp); free(ld);
    release(&tm);
}

static void test_mixed_sequences(void)
{
    test_model tm;
    build(&tm, LLM_F32, 7, NULL);
    int na = 14, nb = 7;
    float *alone = malloc((size_t)(na + nb) * VOCAB * sizeof(float));
    float *mixed = malloc((size_t)(na + nb) * VOCAB * sizeof(float));
    llm_backend *b = make_backend(&tm.m, 2);
    run_prefill(b, prompt_a, na, 0, alone);
    llm_backend_free(b);
    b = make_backend(&tm.m, 2);
    run_prefill(b, prompt_b, nb, 2, alone + (size_t)na * VOCAB);
    llm_backend_free(b);
    /* Interleave: a0 b0 a1 b1 ..., logits come back in batch order. */
    int32_t toks[32], pos[32], seq[32];
    uint8_t want[32];
    int n = 0, ia = 0, ib = 0;
    while (ia < na || ib < nb) {
        if (ia < na) { toks[n] = prompt_a[ia]; pos[n] = ia; seq[n] = 0; want[n++] = 1; ia++; }
        if (ib < nb) { toks[n] = prompt_b[ib]; pos[n] = ib; seq[n] = 2; want[n++] = 1; ib++; }
    }
    b = make_backend(&tm.m, 2);
    llm_batch bt = { n, toks, pos, seq, want, 3, views };
    llm_err err;
    ok(b->ops->forward(b, &bt, mixed, &err) == 0, "mixed batch of two sequences runs");
    double worst = 0.0;
    ia = ib = 0;
    for (int i = 0; i < n; i++) {
        const float *ref = seq[i] == 0 ? alone + (size_t)(ia++) * VOCAB : alone + (size_t)(na + ib++) * VOCAB;
        double d = max_rel_diff(mixed + (size_t)i * VOCAB, ref, VOCAB);
        worst = d > worst ? d : worst;
    }
    ok(worst < 1e-5, "two sequences in one batch == each alone (rel diff %.2g)", worst);

    /* Only some logits wanted: rows come back compacted in batch order. */
    for (int i = 0; i < n; i++) want[i] = (i % 3 == 1);
    llm_backend_free(b);
    b = make_backend(&tm.m, 2);
    ok(b->ops->forward(b, &bt, mixed, &err) == 0, "mixed batch with sparse want_logits runs");
    int k = 0;
    worst = 0.0;
    ia = ib = 0;
    for (int i = 0; i < n; i++) {
        const float *ref = seq[i] == 0 ? alone + (size_t)(ia++) * VOCAB : alone + (size_t)(na + ib++) * VOCAB;
        if (!want[i]) continue;
        double d = max_rel_diff(mixed + (size_t)(k++) * VOCAB, ref, VOCAB);
        worst = d > worst ? d : worst;
    }
    ok(worst < 1e-5, "sparse want_logits rows match (rel diff %.2g)", worst);
    llm_backend_free(b);
    free(alone); free(mixed);
    release(&tm);
}

/* LLM_WANT_HIDDEN rows (embeddings) beside logits rows, on stories260K (dim 64, vocabulary 512): the
 * logits rows are what they are alone, and a hidden row is the classifier's input: the final norm's output,
 * so the classifier applied to it gives that token's logits. A model whose hidden size is larger than its
 * vocabulary has no room for it in a row: refused. */
static void test_hidden_rows(void)
{
    llm_err err;
    llm_model *m = llm_model_load("../shared/models/stories260K/stories260K.gguf", NULL, &err);
    if (m == NULL) {
        ok(0, "load stories260K: %s", err.msg);
        return;
    }
    const llm_config *c = &m->cfg;
    const llm_tensor *W = llm_classifier(m);
    ok(W->type == LLM_F32 && c->dim <= c->vocab_size, "stories260K: F32 classifier, dim <= vocab");
    int na = 14, V = c->vocab_size;
    float *alone = malloc((size_t)na * V * sizeof(float)), *out = malloc((size_t)na * V * sizeof(float));
    int32_t pos[32], seq[32], table[4] = { 3, 0, 2, 1 };
    uint8_t want[32];
    llm_seq_view v = { table, 4, NULL };
    for (int i = 0; i < na; i++) {
        pos[i] = i;
        seq[i] = 0;
        want[i] = 1;
    }
    llm_backend_opts o = { .threads = 2, .kv_blocks = 4, .block_size = 16 };
    llm_backend *b = llm_backend_create("cpu", m, &o, &err);
    llm_batch bt = { na, prompt_a, pos, seq, want, 1, &v };
    ok(b != NULL && b->ops->forward(b, &bt, alone, &err) == 0, "every row's logits");
    llm_backend_free(b);
    for (int i = 0; i < na; i++)
        want[i] = i % 3 == 0 ? 0 : i % 3 == 1 ? LLM_WANT_HIDDEN : 1;
    want[na - 1] = LLM_WANT_HIDDEN;
    b = llm_backend_create("cpu", m, &o, &err);
    ok(b != NULL && b->ops->forward(b, &bt, out, &err) == 0, "hidden and logits rows in one batch");
    double worst_l = 0.0, worst_h = 0.0;
    int nh = 0;
    for (int i = 0, k = 0; i < na; i++) {
        if (!want[i]) continue;
        const float *row = out + (size_t)(k++) * V, *ref = alone + (size_t)i * V;
        if (want[i] == 1) {
            double d = max_rel_diff(row, ref, (size_t)V);
            worst_l = d > worst_l ? d : worst_l;
            continue;
        }
        nh++;
        float *lg = malloc((size_t)V * sizeof(float));
        for (int t = 0; t < V; t++) {
            double acc = 0.0;
            for (int j = 0; j < c->dim; j++) acc += (double)((const float *)W->data)[(size_t)t * c->dim + j] * row[j];
            lg[t] = (float)acc;
        }
        double d = max_rel_diff(lg, ref, (size_t)V);
        worst_h = d > worst_h ? d : worst_h;
        free(lg);
    }
    ok(nh == 5, "five hidden rows");
    ok(worst_l < 1e-5, "logits rows among hidden rows match (rel diff %.2g)", worst_l);
    ok(worst_h < 1e-4, "classifier x hidden row == that token's logits (rel diff %.2g)", worst_h);
    llm_backend_free(b);
    llm_model_free(m);
    free(alone); free(out);

    test_model tm; /* dim 64, vocabulary 50 */
    build(&tm, LLM_F32, 7, NULL);
    b = make_backend(&tm.m, 2);
    float *lg = malloc((size_t)na * VOCAB * sizeof(float));
    llm_batch bt2 = { na, prompt_a, pos, seq, want, 1, views };
    ok(b->ops->forward(b, &bt2, lg, &err) == -1 && strstr(err.msg, "hidden") != NULL,
       "hidden rows refused when dim > vocabulary: %s", err.msg);
    free(lg);
    llm_backend_free(b);
    release(&tm);
}

static void test_half_layout(void)
{
    test_model adj, half;
    build(&adj, LLM_F32, 99, NULL);
    build(&half, LLM_F32, 99, &adj);
    int n = 16;
    float *la = malloc((size_t)n * VOCAB * sizeof(float)), *lh = malloc((size_t)n * VOCAB * sizeof(float));
    llm_backend *ba = make_backend(&adj.m, 2), *bh = make_backend(&half.m, 2);
    run_prefill(ba, prompt_a, n, 1, la);
    run_prefill(bh, prompt_a, n, 1, lh);
    double d = max_rel_diff(lh, la, (size_t)n * VOCAB);
    ok(d < 1e-4, "rotate-half layout with permuted Q/K == adjacent layout (rel diff %.2g)", d);
    llm_backend_free(ba); llm_backend_free(bh);
    free(la); free(lh);
    release(&adj); release(&half);
}

static void test_threads_and_isas(llm_dtype t)
{
    test_model tm;
    build(&tm, t, 5, NULL);
    int n = 20;
    float *ref = malloc((size_t)n * VOCAB * sizeof(float)), *got = malloc((size_t)n * VOCAB * sizeof(float));
    llm_backend *b = make_backend(&tm.m, 1);
    run_prefill(b, prompt_a, n, 0, ref);
    llm_backend_free(b);
    for (int th = 2; th <= 4; th++) {
        b = make_backend(&tm.m, th);
        run_prefill(b, prompt_a, n, 0, got);
        llm_backend_free(b);
        double d = max_rel_diff(got, ref, (size_t)n * VOCAB);
        ok(d < 1e-5, "%s: %d threads == 1 thread (rel diff %.2g)", llm_dtype_name(t), th, d);
    }
    /* Across instruction sets, against the generic kernels. Their prefill widens
     * Q8_0/Q4_0 weights to floats; a table that keeps them on integer products
     * (int8_prefill: activations quantised to Q8 as in decode) is held to the
     * generic kernels' token-by-token decode instead, which does the same. */
    setenv("LLM_CPU_ISA", "generic", 1);
    float *dec = malloc((size_t)n * VOCAB * sizeof(float));
    b = make_backend(&tm.m, 2);
    run_prefill(b, prompt_a, n, 0, got);
    llm_backend_free(b);
    b = make_backend(&tm.m, 2);
    run_decode(b, prompt_a, n, 0, dec);
    llm_backend_free(b);
    llm_err err;
    unsetenv("LLM_CPU_ISA");
    const cpu_kernels *def = cpu_kernels_select(&err);
    int def_int8 = def != NULL && def->int8_prefill && cpu_dtype_wants_q8(t);
    /* A table with bf16 activations (kernels.h: bf16_act) rounds them to 8 bits of mantissa (2^-9) where
     * the generic kernels keep floats: through two layers that is up to ~1% of the largest logit. */
    double tol_bf = t == LLM_BF16 ? 2e-2 : 2e-3;
    double d = max_rel_diff(def_int8 ? dec : got, ref, (size_t)n * VOCAB);
    ok(d < (def != NULL && def->bf16_act ? tol_bf : 2e-3), "%s: generic kernels == default kernels (%s; rel diff %.2g)",
       llm_dtype_name(t), def_int8 ? "int8 prefill: against generic decode" : "prefill", d);
    for (int isa = CPU_ISA_AVX2; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_supported((cpu_isa)isa)) continue;
        int int8 = cpu_kernels_for((cpu_isa)isa)->int8_prefill && cpu_dtype_wants_q8(t);
        setenv("LLM_CPU_ISA", cpu_isa_name((cpu_isa)isa), 1);
        b = make_backend(&tm.m, 2);
        run_prefill(b, prompt_a, n, 0, ref);
        llm_backend_free(b);
        d = max_rel_diff(ref, int8 ? dec : got, (size_t)n * VOCAB);
        int bf = cpu_kernels_for((cpu_isa)isa)->bf16_act;
        ok(d < (bf ? tol_bf : 2e-3), "%s: %s kernels == generic (%s; rel diff %.2g)", llm_dtype_name(t),
           cpu_isa_name((cpu_isa)isa), int8 ? "int8 prefill: against generic decode"
                                            : bf && t == LLM_BF16 ? "prefill, bf16 activations" : "prefill", d);
    }
    if (def != NULL && def->gemm_packed != NULL && cpu_dtype_wants_q8(t)) { /* the matrices as stored */
        setenv("LLM_CPU_REPACK", "0", 1);
        b = make_backend(&tm.m, 2);
        run_prefill(b, prompt_a, n, 0, ref);
        llm_backend_free(b);
        unsetenv("LLM_CPU_REPACK");
        d = max_rel_diff(ref, dec, (size_t)n * VOCAB);
        ok(d < 2e-3, "%s: %s kernels without repacking == generic decode (rel diff %.2g)", llm_dtype_name(t),
           def->name, d);
    }
    free(dec);
    unsetenv("LLM_CPU_ISA");
    free(ref); free(got);
    release(&tm);
}

static void test_rope_scaling(void)
{
    test_model tm;
    build(&tm, LLM_F32, 3, NULL);
    int n = 6;
    float *l0 = malloc((size_t)n * VOCAB * sizeof(float)), *l1 = malloc((size_t)n * VOCAB * sizeof(float));
    llm_backend *b = make_backend(&tm.m, 2);
    run_prefill(b, prompt_a, n, 0, l0);
    llm_backend_free(b);
    float ones[HD / 2];
    for (int i = 0; i < HD / 2; i++) ones[i] = 1.0f;
    tm.m.rope_freqs = ones;
    b = make_backend(&tm.m, 2);
    run_prefill(b, prompt_a, n, 0, l1);
    llm_backend_free(b);
    ok(max_rel_diff(l1, l0, (size_t)n * VOCAB) < 1e-6, "rope_freqs of all ones == plain rope");
    tm.m.rope_freqs = NULL;
    /* Llama 3 scaling with an original context so large that every frequency is
     * "high" (wavelen < orig/high_factor): unchanged. */
    tm.m.cfg.rope_scaling = 1; tm.m.cfg.rope_factor = 8; tm.m.cfg.rope_low_freq_factor = 1;
    tm.m.cfg.rope_high_freq_factor = 4; tm.m.cfg.rope_orig_ctx = 1 << 30;
    b = make_backend(&tm.m, 2);
    run_prefill(b, prompt_a, n, 0, l1);
    llm_backend_free(b);
    ok(max_rel_diff(l1, l0, (size_t)n * VOCAB) < 1e-6, "llama3 scaling leaves high frequencies alone");
    tm.m.cfg.rope_orig_ctx = 8; /* now most frequencies are divided by 8: logits change */
    b = make_backend(&tm.m, 2);
    run_prefill(b, prompt_a, n, 0, l1);
    llm_backend_free(b);
    ok(max_rel_diff(l1, l0, (size_t)n * VOCAB) > 1e-4, "llama3 scaling changes low frequencies");
    free(l0); free(l1);
    release(&tm);
}

static void test_errors(void)
{
    test_model tm;
    build(&tm, LLM_F32, 1, NULL);
    llm_err err;
    llm_backend *b = make_backend(&tm.m, 2);
    float logits[VOCAB * 2];
    int32_t tok = VOCAB, pos = 0, seq = 0;
    uint8_t want = 1;
    llm_batch bt = { 1, &tok, &pos, &seq, &want, 3, views };
    ok(b->ops->forward(b, &bt, logits, &err) != 0 && strstr(err.msg, "vocabulary"), "bad token id: %s", err.msg);
    tok = 3; pos = 12 * 4;
    ok(b->ops->forward(b, &bt, logits, &err) != 0 && strstr(err.msg, "block table"), "uncovered position: %s",
       err.msg);
    pos = SEQ;
    ok(b->ops->forward(b, &bt, logits, &err) != 0, "position past the context: %s", err.msg);
    pos = 0; seq = 5;
    ok(b->ops->forward(b, &bt, logits, &err) != 0, "bad sequence index: %s", err.msg);
    seq = 0;
    int32_t bad_table[1] = { 40 };
    llm_seq_view bad = { bad_table, 1, NULL };
    llm_batch bb = { 1, &tok, &pos, &seq, &want, 1, &bad };
    ok(b->ops->forward(b, &bb, logits, &err) != 0, "block id outside the pool: %s", err.msg);
    llm_backend_free(b);

    llm_backend_opts o = { 0 };
    ok(llm_backend_create("tpu", &tm.m, &o, &err) == NULL && strstr(err.msg, "tpu"), "unknown backend: %s", err.msg);
    b = llm_backend_create("cuda", &tm.m, &o, &err);
    ok(b != NULL || strstr(err.msg, "cuda") != NULL, "cuda backend: created or a clear error (%s)",
       b ? "created" : err.msg);
    llm_backend_free(b);
    setenv("LLM_CPU_ISA", "sse9", 1);
    ok(llm_backend_create("cpu", &tm.m, &o, &err) == NULL && strstr(err.msg, "LLM_CPU_ISA"), "bad LLM_CPU_ISA: %s",
       err.msg);
    unsetenv("LLM_CPU_ISA");
    tm.m.layers[1].wq.ne[0] = DIM + 1;
    ok(llm_backend_create("cpu", &tm.m, &o, &err) == NULL && strstr(err.msg, "attn_q"), "bad shape: %s", err.msg);
    tm.m.layers[1].wq.ne[0] = DIM;
    b = llm_backend_create("cpu", &tm.m, &o, &err);
    ok(b != NULL && b->opts.threads >= 1 && b->opts.block_size == 16 && b->opts.kv_blocks == SEQ / 16,
       "defaults resolved: threads %d, block_size %d, kv_blocks %d", b ? b->opts.threads : -1,
       b ? b->opts.block_size : -1, b ? b->opts.kv_blocks : -1);
    llm_backend_free(b);
    release(&tm);
}

static void test_stories260k(void)
{
    const char *paths[] = { "../shared/models/stories260K/stories260K.gguf", "../shared/models/stories260K/stories260K.bin" };
    static const int32_t want_ids[10] = { 432, 383, 286, 261, 376, 298, 315, 421, 395, 317 };
    for (int f = 0; f < 2; f++) {
        llm_err err;
        llm_model *m = llm_model_load(paths[f], NULL, &err);
        if (m == NULL) {
            ok(0, "load %s: %s", paths[f], err.msg);
            continue;
        }
        llm_backend_opts o = { .threads = 2, .kv_blocks = 4, .block_size = 16 };
        llm_backend *b = llm_backend_create("cpu", m, &o, &err);
        int32_t toks[16] = { 1, 403, 407, 261, 378 }, pos[16], seq[16] = { 0 }, table[4] = { 3, 0, 2, 1 };
        uint8_t want[16] = { 0, 0, 0, 0, 1 };
        llm_seq_view v = { table, 4, NULL };
        float *logits = malloc((size_t)m->cfg.vocab_size * sizeof(float));
        int n = 5, same = b != NULL;
        for (int i = 0; i < n; i++) pos[i] = i;
        llm_batch bt = { n, toks, pos, seq, want, 1, &v };
        for (int g = 0; g < 10 && same; g++) {
            if (b->ops->forward(b, &bt, logits, &err) != 0) { diag("%s", err.msg); same = 0; break; }
            int best = 0;
            for (int i = 1; i < m->cfg.vocab_size; i++)
                if (logits[i] > logits[best]) best = i;
            if (best != want_ids[g]) { diag("step %d: got %d, want %d", g, best, want_ids[g]); same = 0; }
            toks[n] = best; pos[0] = n; want[0] = 1;
            bt = (llm_batch){ 1, &toks[n], pos, seq, want, 1, &v };
            n++;
        }
        ok(same, "stories260K (%s) greedy ids match llama2.c's", strrchr(paths[f], '/') + 1);
        free(logits);
        llm_backend_free(b);
        llm_model_free(m);
    }
}

/* Matrices the model owns (converted at load) are packed in place by
 * llm_backend_prepare: logits the same bits as the packed copy of the same
 * weights; without it they run as stored; other kernel tables and backends
 * refuse the packed model. */
static void test_prepare_in_place(llm_dtype t)
{
    llm_err err;
    const cpu_kernels *def = cpu_kernels_select(&err);
    int on = def != NULL && def->gemm_packed != NULL;
    test_model tm;
    build(&tm, t, 9, NULL);
    int n = 20;
    size_t bytes = (size_t)n * VOCAB * sizeof(float);
    float *ref = malloc(bytes), *got = malloc(bytes);
    llm_backend *b = make_backend(&tm.m, 2); /* not owned: packed into a copy */
    run_prefill(b, prompt_a, n, 0, ref);
    llm_backend_free(b);

    void *owned[LAYERS * LLM_LAYER_MATS];
    for (int l = 0; l < LAYERS; l++) {
        const llm_tensor *mats[LLM_LAYER_MATS_MAX];
        int nm = cpu_layer_mats(&tm.m, l, mats);
        for (int i = 0; i < nm; i++)
            owned[l * LLM_LAYER_MATS + i] = (void *)(uintptr_t)mats[i]->data;
    }
    tm.m.owned = owned;
    tm.m.n_owned = LAYERS * LLM_LAYER_MATS;
    b = make_backend(&tm.m, 2); /* owned, not prepared: as stored */
    run_prefill(b, prompt_a, n, 0, got);
    llm_backend_free(b);
    double d = max_rel_diff(got, ref, (size_t)n * VOCAB);
    ok(d < 2e-3, "%s: converted matrices, unprepared, run as stored (rel diff %.2g)", llm_dtype_name(t), d);

    llm_backend_opts o = { .threads = 3 };
    int rc = llm_backend_prepare("cpu", &tm.m, &o, &err);
    ok(rc == 0, "%s: llm_backend_prepare(cpu)", llm_dtype_name(t));
    ok(llm_model_cpu_packed(&tm.m, NULL) == (on ? LAYERS * LLM_LAYER_MATS : 0), "%s: converted matrices %s in place", llm_dtype_name(t),
       on ? "packed" : "left as stored (no packed kernels here)");
    ok(llm_backend_prepare("cpu", &tm.m, &o, &err) == 0, "%s: a second prepare changes nothing",
       llm_dtype_name(t));
    b = make_backend(&tm.m, 2);
    memset(got, 0, bytes);
    run_prefill(b, prompt_a, n, 0, got);
    llm_backend_free(b);
    ok(memcmp(got, ref, bytes) == 0, "%s: packed in place == packed copy, bit for bit", llm_dtype_name(t));
    if (on) {
        setenv("LLM_CPU_REPACK", "0", 1);
        llm_backend_opts bo = { .threads = 1, .kv_blocks = 40, .block_size = 4 };
        b = llm_backend_create("cpu", &tm.m, &bo, &err);
        ok(b == NULL && strstr(err.msg, "packed in place") != NULL,
           "%s: LLM_CPU_REPACK=0 refuses the packed model: %s", llm_dtype_name(t), b == NULL ? err.msg : "created");
        llm_backend_free(b);
        unsetenv("LLM_CPU_REPACK");
        b = llm_backend_create("cuda", &tm.m, &bo, &err);
        ok(b == NULL && strstr(err.msg, "packed for the cpu backend") != NULL, "%s: cuda refuses it: %s",
           llm_dtype_name(t), b == NULL ? err.msg : "created");
        llm_backend_free(b);
    }
    tm.m.owned = NULL;
    tm.m.n_owned = 0;
    free(ref); free(got);
    release(&tm);
}

/* Step buffers sized and touched at init (scratch_tokens) change nothing but when pages are faulted in. */
static void test_scratch_at_init(void)
{
    test_model tm;
    build(&tm, LLM_Q8_0, 11, NULL);
    int n = 20;
    size_t bytes = (size_t)n * VOCAB * sizeof(float);
    float *ref = malloc(bytes), *got = malloc(bytes);
    llm_backend *b = make_backend(&tm.m, 2);
    run_prefill(b, prompt_a, n, 0, ref);
    llm_backend_free(b);
    llm_err err;
    llm_backend_opts o = { .threads = 2, .kv_blocks = 40, .block_size = 4, .scratch_tokens = 7 };
    b = llm_backend_create("cpu", &tm.m, &o, &err);
    ok(b != NULL, "scratch_tokens 7: backend created");
    if (b != NULL) {
        run_prefill(b, prompt_a, n, 0, got); /* 20 > 7: grows on the way, as without */
        ok(memcmp(got, ref, bytes) == 0, "scratch sized at init: the same logits bits");
        llm_backend_free(b);
    }
    free(ref); free(got);
    release(&tm);
}

/* Decode attention takes a GQA group's heads in one work item where that leaves two items a thread (1
 * thread: 2 KV heads, grouped) and one head an item otherwise (3 threads): the same logits bits, over the
 * f32 and the f16 cache, since each query runs the same kernel calls in the same order. */
static void test_gqa_grouped_decode(void)
{
    test_model tm;
    build(&tm, LLM_Q8_0, 9, NULL);
    int n = (int)(sizeof(prompt_a) / sizeof(prompt_a[0]));
    size_t bytes = (size_t)n * VOCAB * sizeof(float);
    float *l1 = malloc(bytes), *l3 = malloc(bytes);
    for (int kv = LLM_KV_F32; kv <= LLM_KV_F16; kv++) {
        llm_err err;
        llm_backend_opts o1 = { .threads = 1, .kv_blocks = 40, .block_size = 4, .kv_dtype = kv }, o3 = o1;
        o3.threads = 3;
        llm_backend *b1 = llm_backend_create("cpu", &tm.m, &o1, &err), *b3 = llm_backend_create("cpu", &tm.m, &o3, &err);
        ok(b1 && b3 && run_decode(b1, prompt_a, n, 1, l1) == 0 && run_decode(b3, prompt_a, n, 1, l3) == 0 &&
           memcmp(l1, l3, bytes) == 0, "%s cache: decode with GQA groups per work item == one head per item, bit for bit",
           kv == LLM_KV_F16 ? "f16" : "f32");
        llm_backend_free(b1); llm_backend_free(b3);
    }
    free(l1); free(l3);
    release(&tm);
}

/* The KV cache type: auto is f16 except for all-F32 models; f16 moves logits by its rounding only, and
 * prefill still equals decode over it. */
static void test_kv_f16(void)
{
    test_model tm, tq;
    build(&tm, LLM_F32, 5, NULL);
    build(&tq, LLM_Q8_0, 5, NULL);
    llm_err err;
    llm_backend_opts o = { .threads = 2, .kv_blocks = 40, .block_size = 4 };
    llm_backend *ba = llm_backend_create("cpu", &tm.m, &o, &err), *bq = llm_backend_create("cpu", &tq.m, &o, &err);
    ok(ba != NULL && ba->opts.kv_dtype == LLM_KV_F32, "auto KV cache: f32 for an all-F32 model");
    ok(bq != NULL && bq->opts.kv_dtype == LLM_KV_F16, "auto KV cache: f16 for a Q8_0 model");
    llm_backend_free(bq);
    o.kv_dtype = LLM_KV_F16;
    llm_backend *bh = llm_backend_create("cpu", &tm.m, &o, &err), *bd = llm_backend_create("cpu", &tm.m, &o, &err);
    int n = (int)(sizeof(prompt_a) / sizeof(prompt_a[0]));
    size_t sz = (size_t)n * VOCAB;
    float *l32 = malloc(sz * sizeof(float)), *l16 = malloc(sz * sizeof(float)), *ld = malloc(sz * sizeof(float));
    ok(ba && bh && bd && run_prefill(ba, prompt_a, n, 0, l32) == 0 && run_prefill(bh, prompt_a, n, 0, l16) == 0 &&
       run_decode(bd, prompt_a, n, 0, ld) == 0, "f32 and f16 KV caches run");
    double d = max_rel_diff(l16, l32, sz);
    ok(d > 0 && d < 1e-2, "f16 KV cache: logits within its rounding of the f32 cache's (rel diff %.2g)", d);
    d = max_rel_diff(l16, ld, sz);
    ok(d < 1e-4, "f16 KV cache: batched prefill == token-by-token decode (rel diff %.2g)", d);
    llm_backend_free(ba); llm_backend_free(bh); llm_backend_free(bd);
    free(l32); free(l16); free(ld);
    release(&tm);
    release(&tq);
}

/* The Q8_0 KV cache (head_dim 16: one scale per head row): logits within its rounding of the f32 cache's, the
 * same top token at all but near ties; batched prefill == token-by-token decode and 2 threads == 3, bit for
 * bit (the rows are read back as the same floats either way). */
static void test_kv_q8(void)
{
    test_model tm;
    build(&tm, LLM_Q8_0, 13, NULL);
    llm_err err;
    int n = (int)(sizeof(prompt_a) / sizeof(prompt_a[0]));
    size_t sz = (size_t)n * VOCAB, bytes = sz * sizeof(float);
    float *l32 = malloc(bytes), *lq = malloc(bytes), *ld = malloc(bytes), *l3 = malloc(bytes);
    llm_backend_opts o = { .threads = 2, .kv_blocks = 40, .block_size = 4, .kv_dtype = LLM_KV_F32 };
    llm_backend *bf = llm_backend_create("cpu", &tm.m, &o, &err);
    o.kv_dtype = LLM_KV_Q8_0;
    llm_backend *bq = llm_backend_create("cpu", &tm.m, &o, &err), *bd = llm_backend_create("cpu", &tm.m, &o, &err);
    o.threads = 3;
    llm_backend *b3 = llm_backend_create("cpu", &tm.m, &o, &err);
    ok(bq != NULL && bq->opts.kv_dtype == LLM_KV_Q8_0, "q8_0 KV cache: created");
    ok(bf && bq && bd && b3 && run_prefill(bf, prompt_a, n, 0, l32) == 0 && run_prefill(bq, prompt_a, n, 0, lq) == 0 &&
       run_decode(bd, prompt_a, n, 0, ld) == 0 && run_decode(b3, prompt_a, n, 0, l3) == 0, "q8_0 KV cache runs");
    double d = max_rel_diff(lq, l32, sz);
    ok(d > 0 && d < 5e-2, "q8_0 KV cache: logits within its rounding of the f32 cache's (rel diff %.2g)", d);
    int same_top = 0;
    for (int t = 0; t < n; t++) {
        int a = 0, b = 0;
        for (int v = 1; v < VOCAB; v++) {
            a = lq[(size_t)t * VOCAB + v] > lq[(size_t)t * VOCAB + a] ? v : a;
            b = l32[(size_t)t * VOCAB + v] > l32[(size_t)t * VOCAB + b] ? v : b;
        }
        same_top += a == b;
    }
    ok(same_top >= n - 2, "q8_0 KV cache: the f32 cache's top token at %d of %d positions", same_top, n);
    ok(memcmp(lq, ld, bytes) == 0, "q8_0 KV cache: batched prefill == token-by-token decode, bit for bit");
    ok(memcmp(ld, l3, bytes) == 0, "q8_0 KV cache: 2 threads == 3, bit for bit");
    llm_backend_free(bf); llm_backend_free(bq); llm_backend_free(bd); llm_backend_free(b3);
    free(l32); free(lq); free(ld); free(l3);
    release(&tm);
}

int main(void)
{
    init_tables();
    const llm_dtype types[] = { LLM_F32, LLM_F16, LLM_BF16, LLM_Q8_0, LLM_Q4_0 };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        test_prefill_vs_decode(types[i]);
    test_mixed_sequences();
    test_hidden_rows();
    test_half_layout();
    test_threads_and_isas(LLM_F32);
    test_threads_and_isas(LLM_Q4_0);
    test_threads_and_isas(LLM_BF16);
    test_prepare_in_place(LLM_Q8_0);
    test_prepare_in_place(LLM_Q4_0);
    test_scratch_at_init();
    test_kv_f16();
    test_kv_q8();
    test_gqa_grouped_decode();
    test_rope_scaling();
    test_errors();
    test_stories260k();
    return done_testing();
}
