/* CPU backend microbenchmark at stories110m shapes (dim 768, hidden 2048,
 * 12 layers, 12 heads, vocab 32000), random weights (timings do not depend
 * on values):
 *   1. each matmul shape x weight type, 1 token (decode GEMV) and 128 tokens
 *      (prefill GEMM): ms per call (best of many), GFLOP/s, weight GB/s;
 *   2. a whole forward pass: 128-token prefill, then 128 single-token decodes.
 * Build: make build/libllm.a && cc -O2 -std=c11 -D_GNU_SOURCE -Iengine
 *          bench/cpu_kernels_bench.c build/libllm.a -lcjson -lpcre2-8 -lpthread -lm -o build/cpu_kernels_bench
 * Run:   build/cpu_kernels_bench [threads=2] [dtypes=f16,q8_0,q4_0] [mode=all|matmul|forward|prefill] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_features.h"

enum { DIM = 768, HIDDEN = 2048, LAYERS = 12, HEADS = 12, VOCAB = 32000, SEQ = 1024, NPROMPT = 128, NGEN = 128 };

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float frnd(void) { return ((float)(rnd() >> 8) / 16777216.0f - 0.5f) * 0.1f; }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* With one thread, the matmul timings use this thread's CPU time: immune to
 * other processes taking the core (a noisy shared machine). */
static int use_cpu_clock;
static double tnow(void)
{
    struct timespec ts;
    clock_gettime(use_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A rows x cols random matrix of type t (values irrelevant; fast to make). */
static llm_tensor make_mat(llm_dtype t, int cols, int rows)
{
    size_t rb = llm_dtype_row_bytes(t, (uint64_t)cols), bytes = rb * (size_t)rows;
    uint8_t *p = malloc(bytes);
    if (p == NULL) { fprintf(stderr, "out of memory\n"); exit(1); }
    if (t == LLM_F32) {
        for (size_t i = 0; i < bytes / 4; i++) ((float *)p)[i] = frnd();
    } else if (t == LLM_F16 || t == LLM_BF16) {
        uint16_t tab[256];
        for (int i = 0; i < 256; i++) tab[i] = t == LLM_F16 ? llm_f32_to_fp16(frnd()) : llm_f32_to_bf16(frnd());
        for (size_t i = 0; i < bytes / 2; i++) { uint16_t h = tab[rnd() & 255]; memcpy(p + 2 * i, &h, 2); }
    } else {
        size_t bb = llm_dtype_block_bytes(t);
        uint16_t d = llm_f32_to_fp16(0.002f);
        for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rnd();
        for (size_t b = 0; b < bytes / bb; b++) memcpy(p + b * bb, &d, 2);
    }
    return (llm_tensor){ t, { cols, rows }, p };
}

static void bench_matmul(int threads, llm_dtype t)
{
    static const struct { const char *name; int cols, rows; } shapes[] = {
        { "wq/wo 768x768", DIM, DIM }, { "gate/up 2048x768", DIM, HIDDEN },
        { "down 768x2048", HIDDEN, DIM }, { "classifier 32000x768", DIM, VOCAB },
    };
    cpu_state st = { 0 };
    use_cpu_clock = threads == 1;
    llm_err err;
    st.kern = cpu_kernels_select(&err);
    st.pool = cpu_pool_create(threads);
    st.nth = threads;
    int ns[2] = { 1, NPROMPT };
    float *x = malloc((size_t)NPROMPT * HIDDEN * sizeof(float));
    float *y = malloc((size_t)NPROMPT * VOCAB * sizeof(float));
    st.qact = malloc((size_t)NPROMPT * (HIDDEN / LLM_QK) * sizeof(cpu_q8_act));
    st.wbuf_floats = (size_t)CPU_MM_CHUNK_ROWS * HIDDEN;
    st.wbuf = malloc((size_t)threads * st.wbuf_floats * sizeof(float));
    for (int i = 0; i < NPROMPT * HIDDEN; i++) x[i] = frnd();
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        llm_tensor w = make_mat(t, shapes[s].cols, shapes[s].rows);
        size_t wbytes = llm_dtype_row_bytes(t, (uint64_t)w.ne[0]) * (size_t)w.ne[1];
        for (int k = 0; k < 2; k++) {
            int n = ns[k];
            cpu_mm_out o = { &w, y, (size_t)w.ne[1], 0 };
            cpu_mm mm = { .x = x, .xs = (size_t)w.ne[0], .n = n, .K = (int)w.ne[0], .outs = &o, .n_outs = 1 };
            cpu_matmul(&st, &mm);
            /* best single call over ~0.3 s: the least disturbed by other load */
            double t0 = now(), per = 1e9;
            do {
                double a = tnow();
                cpu_matmul(&st, &mm);
                double e = tnow() - a;
                per = e < per ? e : per;
            } while (now() - t0 < 0.3);
            double flops = 2.0 * w.ne[0] * w.ne[1] * n;
            printf("%-5s %-22s n=%-4d %9.3f ms %8.1f GFLOP/s %7.1f GB/s\n", llm_dtype_name(t), shapes[s].name, n,
                   per * 1e3, flops / per * 1e-9, wbytes / per * 1e-9);
        }
        free((void *)w.data);
    }
    free(x); free(y); free(st.qact); free(st.wbuf);
    cpu_pool_destroy(st.pool);
}

static void bench_forward(int threads, llm_dtype t, int ngen)
{
    llm_model m;
    memset(&m, 0, sizeof(m));
    llm_config *c = &m.cfg;
    c->dim = DIM; c->hidden_dim = HIDDEN; c->n_layers = LAYERS; c->n_heads = HEADS; c->n_kv_heads = HEADS;
    c->head_dim = DIM / HEADS; c->vocab_size = VOCAB; c->seq_len = SEQ; c->rope_theta = 10000.0f;
    c->norm_eps = 1e-5f; c->tied_embeddings = 0;
    m.layers = calloc(LAYERS, sizeof(llm_layer));
    float *ones = malloc(DIM * sizeof(float));
    for (int i = 0; i < DIM; i++) ones[i] = 1.0f;
    llm_tensor norm = { LLM_F32, { DIM, 1 }, ones };
    for (int l = 0; l < LAYERS; l++) {
        llm_layer *L = &m.layers[l];
        L->attn_norm = L->ffn_norm = norm;
        L->wq = make_mat(t, DIM, DIM); L->wk = make_mat(t, DIM, DIM); L->wv = make_mat(t, DIM, DIM);
        L->wo = make_mat(t, DIM, DIM);
        L->w_gate = make_mat(t, DIM, HIDDEN); L->w_up = make_mat(t, DIM, HIDDEN); L->w_down = make_mat(t, HIDDEN, DIM);
    }
    m.tok_embd = make_mat(t, DIM, VOCAB);
    m.output = make_mat(t, DIM, VOCAB);
    m.out_norm = norm;
    llm_err err;
    llm_backend_opts o = { .threads = threads, .block_size = 16, .kv_blocks = (NPROMPT + NGEN) / 16 + 1 };
    use_cpu_clock = threads == 1;
    llm_backend *b = llm_backend_create("cpu", &m, &o, &err);
    if (b == NULL) { fprintf(stderr, "%s\n", err.msg); exit(1); }
    int32_t toks[NPROMPT], pos[NPROMPT], seq[NPROMPT] = { 0 }, table[64];
    uint8_t want[NPROMPT] = { 0 };
    for (int i = 0; i < NPROMPT; i++) { toks[i] = 1 + (i * 37) % 400; pos[i] = i; }
    for (int i = 0; i < 64; i++) table[i] = i;
    want[NPROMPT - 1] = 1;
    llm_seq_view v = { table, b->opts.kv_blocks, NULL };
    float *logits = malloc(VOCAB * sizeof(float));
    double best_p = 1e9, best_d = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        llm_batch bp = { NPROMPT, toks, pos, seq, want, 1, &v };
        double t0 = tnow();
        if (b->ops->forward(b, &bp, logits, &err) != 0) { fprintf(stderr, "%s\n", err.msg); exit(1); }
        double t1 = tnow();
        for (int g = 0; g < ngen; g++) {
            int32_t tk = 5 + g, p = NPROMPT + g;
            uint8_t w = 1;
            llm_batch bd = { 1, &tk, &p, seq, &w, 1, &v };
            if (b->ops->forward(b, &bd, logits, &err) != 0) { fprintf(stderr, "%s\n", err.msg); exit(1); }
        }
        double t2 = tnow();
        best_p = t1 - t0 < best_p ? t1 - t0 : best_p;
        best_d = t2 - t1 < best_d ? t2 - t1 : best_d;
    }
    printf("%-5s forward (%s, %d threads%s): prefill %d tok %.1f tok/s, decode %d tok %.1f tok/s\n",
           llm_dtype_name(t), ((const cpu_state *)b->impl)->kern->name, threads, use_cpu_clock ? ", CPU time" : "", NPROMPT, NPROMPT / best_p,
           ngen, ngen / best_d);
    llm_backend_free(b);
    for (int l = 0; l < LAYERS; l++) {
        llm_layer *L = &m.layers[l];
        free((void *)L->wq.data); free((void *)L->wk.data); free((void *)L->wv.data); free((void *)L->wo.data);
        free((void *)L->w_gate.data); free((void *)L->w_up.data); free((void *)L->w_down.data);
    }
    free((void *)m.tok_embd.data); free((void *)m.output.data); free(m.layers); free(ones); free(logits);
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    const char *dtypes = argc > 2 ? argv[2] : "f16,q8_0,q4_0";
    const char *mode = argc > 3 ? argv[3] : "all";
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", dtypes);
    for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
        llm_dtype t;
        if (llm_dtype_from_name(tok, &t) != 0) { fprintf(stderr, "unknown dtype %s\n", tok); return 2; }
        if (strcmp(mode, "all") == 0 || strcmp(mode, "matmul") == 0) bench_matmul(threads, t);
        if (strcmp(mode, "matmul") != 0) bench_forward(threads, t, strcmp(mode, "prefill") == 0 ? 0 : NGEN);
    }
    return 0;
}
