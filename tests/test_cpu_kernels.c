/* CPU kernels against a double-precision scalar reference: every weight type,
 * GEMV (1 token) and GEMM (many), odd sizes and tile tails, accumulate mode,
 * on every instruction set this machine runs; activation quantisation; dot /
 * axpy; the thread pool (jobs and in-job barriers). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/cpu_features.h"
#include "cpu/kernels.h"
#include "cpu/threadpool.h"
#include "gguf_quants.h"
#include "tap.h"

static uint64_t rng_state = 12345;
static float frand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

/* One gemm case: nr x K weights of type t, nt activations; returns the worst
 * error relative to sum |w*x| of its dot product. */
static double gemm_case(const cpu_kernels *k, llm_dtype t, int K, int nr, int nt, int accumulate)
{
    size_t rb = llm_dtype_row_bytes(t, (uint64_t)K);
    float *wf = malloc((size_t)nr * K * sizeof(float)), *wd = malloc((size_t)nr * K * sizeof(float));
    uint8_t *w = malloc(rb * (size_t)nr);
    float *x = malloc((size_t)nt * K * sizeof(float)), *xd = malloc((size_t)nt * K * sizeof(float));
    int q8 = cpu_dtype_wants_q8(t);
    cpu_q8_act *xq = malloc((size_t)nt * (size_t)(K / LLM_QK + 1) * sizeof(cpu_q8_act));
    float *y = malloc((size_t)nt * (nr + 3) * sizeof(float)), *y0 = malloc((size_t)nt * (nr + 3) * sizeof(float));
    size_t ldy = (size_t)nr + 3; /* a padded output stride */
    for (int i = 0; i < nr * K; i++) wf[i] = frand() * (i % 7 == 0 ? 3.0f : 1.0f);
    for (int i = 0; i < nt * K; i++) x[i] = frand() * (i % 5 == 0 ? 4.0f : 1.0f);
    for (int r = 0; r < nr; r++) {
        llm_row_from_f32(t, wf + (size_t)r * K, w + rb * r, (size_t)K);
        llm_row_to_f32(t, w + rb * r, wd + (size_t)r * K, (size_t)K);
    }
    /* The reference sees the activations as the kernel does (dequantised Q8, or rounded to bf16). */
    int bf = t == LLM_BF16 && k->bf16_act;
    uint16_t *xb = malloc((size_t)nt * K * sizeof(uint16_t));
    for (int j = 0; j < nt; j++) {
        if (bf) {
            llm_row_from_f32(LLM_BF16, x + (size_t)j * K, xb + (size_t)j * K, (size_t)K);
            llm_row_to_f32(LLM_BF16, xb + (size_t)j * K, xd + (size_t)j * K, (size_t)K);
        } else if (q8) {
            k->quantize_act(x + (size_t)j * K, xq + (size_t)j * (K / LLM_QK), K);
            for (int b = 0; b < K / LLM_QK; b++)
                for (int e = 0; e < LLM_QK; e++)
                    xd[(size_t)j * K + b * LLM_QK + e] = xq[(size_t)j * (K / LLM_QK) + b].d *
                                                         xq[(size_t)j * (K / LLM_QK) + b].qs[e];
        } else {
            memcpy(xd + (size_t)j * K, x + (size_t)j * K, (size_t)K * sizeof(float));
        }
    }
    for (size_t i = 0; i < (size_t)nt * ldy; i++) y[i] = y0[i] = frand();
    cpu_gemm_fn g = cpu_gemm_for(k, t);
    const void *X = bf ? (const void *)xb : q8 ? (const void *)xq : (const void *)x;
    size_t xs = bf ? (size_t)K * sizeof(uint16_t) : q8 ? (size_t)(K / LLM_QK) * sizeof(cpu_q8_act)
                                                       : (size_t)K * sizeof(float);
    g(K, w, rb, nr, X, xs, nt, y, ldy, accumulate);
    double worst = 0.0;
    for (int j = 0; j < nt; j++) {
        for (int r = 0; r < nr; r++) {
            double s = 0.0, mag = 1e-30;
            for (int e = 0; e < K; e++) {
                double p = (double)wd[(size_t)r * K + e] * xd[(size_t)j * K + e];
                s += p;
                mag += fabs(p);
            }
            if (accumulate) { s += y0[(size_t)j * ldy + r]; mag += fabs(y0[(size_t)j * ldy + r]); }
            double err = fabs(s - y[(size_t)j * ldy + r]) / mag;
            worst = err > worst ? err : worst;
        }
        for (size_t r = (size_t)nr; r < ldy; r++) /* padding untouched */
            if (y[(size_t)j * ldy + r] != y0[(size_t)j * ldy + r]) worst = 1e9;
    }
    free(wf); free(wd); free(w); free(x); free(xd); free(xq); free(xb); free(y); free(y0);
    return worst;
}

static void test_gemm(const cpu_kernels *k)
{
    const llm_dtype types[] = { LLM_F32, LLM_F16, LLM_BF16, LLM_Q8_0, LLM_Q4_0 };
    const int Ks_float[] = { 1, 7, 8, 17, 32, 100, 768 }, Ks_q[] = { 32, 64, 96, 800 };
    const int nrs[] = { 1, 3, 4, 5, 9, 13 }, nts[] = { 1, 2, 3, 4, 7, 11 };
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        llm_dtype t = types[ti];
        int q = cpu_dtype_wants_q8(t);
        const int *Ks = q ? Ks_q : Ks_float;
        int nK = q ? 4 : 7;
        double worst_v = 0.0, worst_m = 0.0;
        for (int a = 0; a < nK; a++)
            for (size_t b = 0; b < sizeof(nrs) / sizeof(nrs[0]); b++)
                for (size_t c = 0; c < sizeof(nts) / sizeof(nts[0]); c++) {
                    double e = gemm_case(k, t, Ks[a], nrs[b], nts[c], (int)((a + b + c) & 1));
                    if (nts[c] == 1) worst_v = e > worst_v ? e : worst_v;
                    else worst_m = e > worst_m ? e : worst_m;
                }
        ok(worst_v < 1e-5, "%s %s gemv (1 token): worst relative error %.2g", k->name, llm_dtype_name(t), worst_v);
        ok(worst_m < 1e-5, "%s %s gemm (tiles and tails): worst relative error %.2g", k->name, llm_dtype_name(t),
           worst_m);
    }
}

/* Q8_0 / Q4_0: a token's outputs do not depend on how many tokens share the
 * call (tile shapes, the VNNI pair kernel and its lone-token tail, 1-token
 * GEMV): every token of a 13-token GEMM over 37 rows (tiles and row tails)
 * gives the same bits as that token alone. */
/* BF16 on bf16 dot products: the same, with activations as bf16. */
static void test_bf16_batch_invariant(const cpu_kernels *k)
{
    enum { K = 200, NR = 37, NT = 13 }; /* K: 6 vectors of 32 and a tail of 8 */
    if (!k->bf16_act)
        return;
    size_t rb = llm_dtype_row_bytes(LLM_BF16, K);
    uint8_t *w = malloc(rb * NR);
    uint16_t *xb = malloc(NT * K * sizeof(uint16_t));
    float *row = malloc(K * sizeof(float)), *y = malloc(NT * NR * sizeof(float)), one[NR];
    for (int r = 0; r < NR; r++) {
        for (int e = 0; e < K; e++) row[e] = frand();
        llm_row_from_f32(LLM_BF16, row, w + rb * r, K);
    }
    for (int j = 0; j < NT; j++) {
        for (int e = 0; e < K; e++) row[e] = frand() * 3.0f;
        llm_row_from_f32(LLM_BF16, row, xb + (size_t)j * K, K);
    }
    k->gemm_bf16(K, w, rb, NR, xb, K * sizeof(uint16_t), NT, y, NR, 0);
    int same = 1;
    for (int j = 0; j < NT; j++) {
        k->gemm_bf16(K, w, rb, NR, xb + (size_t)j * K, K * sizeof(uint16_t), 1, one, NR, 0);
        same &= memcmp(one, y + (size_t)j * NR, sizeof(one)) == 0;
    }
    ok(same, "%s bf16 (bf16 activations): each of %d tokens in one GEMM gives the bits of that token alone",
       k->name, NT);
    free(w); free(xb); free(row); free(y);
}

/* One product on AMX tiles (the avx512amx table): nr x K weights of type t (BF16: gemm_bf16_tiled over the tile
 * layout; F16: gemm_f16_tiled over the split one) times nt activations, accumulating or not, against double
 * sums of the weights times the activations the kernel sees (BF16: rounded to bf16; F16: the floats, of which
 * the split keeps 16 bits: within 2^-15, where rounding them to bf16 would be 2^-9 off); the worst error
 * relative to sum |w x|, 1e9 when the output's padding was written. */
static double tiled_case(const cpu_kernels *k, llm_dtype t, int K, int nr, int nt, int acc)
{
    int f16 = t == LLM_F16, ng = (nt + CPU_BF16_TILE_T - 1) / CPU_BF16_TILE_T;
    size_t rb = (size_t)K * 2, xs = f16 ? (size_t)K * sizeof(float) : rb, ldy = (size_t)nr + 3;
    uint16_t *w = malloc(rb * (size_t)nr), *X = malloc((size_t)ng * CPU_BF16_TILE_T * xs);
    uint16_t *scratch = malloc(2 * rb * (size_t)nr);
    float *x = malloc((size_t)nt * K * sizeof(float)), *row = malloc((size_t)K * sizeof(float));
    float *y = malloc((size_t)nt * ldy * sizeof(float)), *y0 = malloc((size_t)nt * ldy * sizeof(float));
    for (int r = 0; r < nr; r++) {
        for (int e = 0; e < K; e++) row[e] = frand() * (e % 7 == 0 ? 3.0f : 1.0f);
        llm_row_from_f32(t, row, w + (size_t)r * K, (size_t)K);
    }
    memset(X, 0xff, (size_t)ng * CPU_BF16_TILE_T * xs); /* NaNs where the padding must go */
    for (int j = 0; j < nt; j++) {
        for (int e = 0; e < K; e++) x[(size_t)j * K + e] = frand() * (e % 5 == 0 ? 4.0f : 1.0f);
        if (f16)
            cpu_bf16_act_store_split(K, x + (size_t)j * K, j, X);
        else
            cpu_bf16_act_store(1, K, x + (size_t)j * K, j, X);
    }
    cpu_bf16_act_pad(f16, K, nt, X);
    for (size_t i = 0; i < (size_t)nt * ldy; i++) y[i] = y0[i] = frand();
    if (f16)
        k->gemm_f16_tiled(K, w, rb, nr, X, xs, nt, y, ldy, acc, scratch);
    else
        k->gemm_bf16_tiled(K, w, rb, nr, X, xs, nt, y, ldy, acc);
    double worst = 0.0;
    for (int j = 0; j < nt; j++) {
        for (int r = 0; r < nr; r++) {
            double s = acc ? y0[(size_t)j * ldy + r] : 0.0, mag = 1e-30 + fabs(s);
            for (int e = 0; e < K; e++) {
                uint16_t wv = w[(size_t)r * K + e];
                float xv = x[(size_t)j * K + e];
                double p = (double)(f16 ? llm_fp16_to_f32(wv) : llm_bf16_to_f32(wv)) *
                           (f16 ? xv : llm_bf16_to_f32(llm_f32_to_bf16(xv)));
                s += p;
                mag += fabs(p);
            }
            double err = fabs(s - y[(size_t)j * ldy + r]) / mag;
            worst = err > worst || err != err ? err : worst;
        }
        for (size_t r = (size_t)nr; r < ldy; r++) /* padding untouched */
            if (y[(size_t)j * ldy + r] != y0[(size_t)j * ldy + r]) worst = 1e9;
    }
    free(w); free(X); free(scratch); free(x); free(row); free(y); free(y0);
    return worst;
}

/* BF16 and F16 on AMX tiles: whole 16-row tiles, pairs of them, the rows past the last tile and partial token
 * groups; then (BF16, which decode takes too) every token of a 40-token call against that token alone in its
 * own buffer, bit for bit. */
static void test_tiled(const cpu_kernels *k)
{
    if (k->gemm_bf16_tiled == NULL || k->gemm_f16_tiled == NULL)
        return;
    const int Ks[] = { 32, 96, 800 }, nrs[] = { 1, 13, 16, 37, 64, 70 }, nts[] = { 1, 5, 16, 17, 33, 40 };
    for (int f16 = 0; f16 < 2; f16++) {
        double worst = 0.0;
        int n_case = 0;
        for (size_t a = 0; a < sizeof(Ks) / sizeof(Ks[0]); a++)
            for (size_t b = 0; b < sizeof(nrs) / sizeof(nrs[0]); b++)
                for (size_t c = 0; c < sizeof(nts) / sizeof(nts[0]); c++, n_case++) {
                    double e = tiled_case(k, f16 ? LLM_F16 : LLM_BF16, Ks[a], nrs[b], nts[c], (int)((a + b + c) & 1));
                    worst = e > worst || e != e ? e : worst;
                }
        ok(worst < (f16 ? 3e-5 : 1e-5), "%s %s on AMX tiles%s: %d cases (K, rows, tokens), worst relative error %.2g",
           k->name, f16 ? "f16" : "bf16", f16 ? " (split activations)" : "", n_case, worst);
    }

    enum { K = 160, NR = 53, NT = 40 };
    uint16_t *w = malloc((size_t)NR * K * 2), *X = malloc((size_t)48 * K * 2), *X1 = malloc((size_t)16 * K * 2);
    float *row = malloc(K * sizeof(float)), *y = malloc((size_t)NT * NR * sizeof(float)), one[NR];
    for (int r = 0; r < NR; r++) {
        for (int e = 0; e < K; e++) row[e] = frand();
        llm_row_from_f32(LLM_BF16, row, w + (size_t)r * K, K);
    }
    float *xs = malloc((size_t)NT * K * sizeof(float));
    for (int t = 0; t < NT; t++) {
        for (int e = 0; e < K; e++) xs[(size_t)t * K + e] = frand() * 3.0f;
        cpu_bf16_act_store(1, K, xs + (size_t)t * K, t, X);
    }
    cpu_bf16_act_pad(0, K, NT, X);
    k->gemm_bf16_tiled(K, w, (size_t)K * 2, NR, X, (size_t)K * 2, NT, y, NR, 0);
    int same = 1;
    for (int t = 0; t < NT; t++) {
        cpu_bf16_act_store(1, K, xs + (size_t)t * K, 0, X1);
        cpu_bf16_act_pad(0, K, 1, X1);
        k->gemm_bf16_tiled(K, w, (size_t)K * 2, NR, X1, (size_t)K * 2, 1, one, NR, 0);
        same &= memcmp(one, y + (size_t)t * NR, sizeof(one)) == 0;
    }
    ok(same, "%s bf16 on AMX tiles: each of %d tokens in one call gives the bits of that token alone", k->name, NT);
    free(w); free(X); free(X1); free(row); free(y); free(xs);
}

static void test_gemm_batch_invariant(const cpu_kernels *k)
{
    enum { K = 256, NR = 37, NT = 13 };
    for (int q4 = 0; q4 < 2; q4++) {
        llm_dtype t = q4 ? LLM_Q4_0 : LLM_Q8_0;
        size_t rb = llm_dtype_row_bytes(t, K), xs = (K / LLM_QK) * sizeof(cpu_q8_act);
        uint8_t *w = malloc(rb * NR);
        cpu_q8_act *xq = malloc(NT * xs);
        float *row = malloc(K * sizeof(float)), *y = malloc(NT * NR * sizeof(float)), one[NR];
        for (int r = 0; r < NR; r++) {
            for (int e = 0; e < K; e++) row[e] = frand();
            llm_row_from_f32(t, row, w + rb * r, K);
        }
        for (int j = 0; j < NT; j++) {
            for (int e = 0; e < K; e++) row[e] = frand() * (e % 9 == 0 ? 5.0f : 1.0f);
            k->quantize_act(row, xq + (size_t)j * (K / LLM_QK), K);
        }
        cpu_gemm_for(k, t)(K, w, rb, NR, xq, xs, NT, y, NR, 0);
        int same = 1;
        for (int j = 0; j < NT; j++) {
            cpu_gemm_for(k, t)(K, w, rb, NR, (const uint8_t *)xq + j * xs, xs, 1, one, NR, 0);
            same &= memcmp(one, y + (size_t)j * NR, sizeof(one)) == 0;
        }
        ok(same, "%s %s: each of %d tokens in one GEMM gives the bits of that token alone", k->name,
           llm_dtype_name(t), NT);
        free(w); free(xq); free(row); free(y);
    }
}

/* n random Q4_K super-blocks (d, dmin small; any 6-bit scales and nibbles). */
static void random_q4_K(uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++, b += 144) {
        uint16_t d = llm_f32_to_fp16(0.002f + 0.01f * fabsf(frand())), dm = llm_f32_to_fp16(0.004f * fabsf(frand()));
        memcpy(b, &d, 2);
        memcpy(b + 2, &dm, 2);
        for (int k = 4; k < 144; k++)
            b[k] = (uint8_t)(frand() * 128.0f + 128.0f);
    }
}

/* n random Q5_K super-blocks (Q4_K's header; any fifth bits and nibbles). */
static void random_q5_K(uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++, b += 176) {
        random_q4_K(b, 1); /* the first 144 bytes: d, dmin, scales, then random */
        for (int k = 144; k < 176; k++)
            b[k] = (uint8_t)(frand() * 128.0f + 128.0f);
    }
}

/* n random super-blocks of bb bytes that end with their fp16 d, as Q6_K (210) and Q3_K (110) do: any
 * quants and scales, d small. */
static void random_d_last(uint8_t *b, size_t n, size_t bb)
{
    for (size_t i = 0; i < n; i++, b += bb) {
        for (size_t k = 0; k < bb - 2; k++)
            b[k] = (uint8_t)(frand() * 128.0f + 128.0f);
        uint16_t d = llm_f32_to_fp16(0.0001f + 0.0004f * fabsf(frand()));
        memcpy(b + bb - 2, &d, 2);
    }
}

/* n random Q2_K super-blocks (any 4-bit scales, mins and quants; d, dmin small). */
static void random_q2_K(uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++, b += 84) {
        for (int k = 0; k < 80; k++)
            b[k] = (uint8_t)(frand() * 128.0f + 128.0f);
        uint16_t d = llm_f32_to_fp16(0.0005f + 0.002f * fabsf(frand())), dm = llm_f32_to_fp16(0.002f * fabsf(frand()));
        memcpy(b + 80, &d, 2);
        memcpy(b + 82, &dm, 2);
    }
}

/* Element e (< 256) of a Q2_K super-block as its quant q (0..3), group scale d * sc and min dmin * m, written
 * out from ggml's layout (scales: 16 bytes, scale low nibble and min high; qs: 64; d, dmin: fp16) rather than
 * taken from gguf_quants.h: pass p = e % 128 / 32 over its half's 32 qs bytes at shift 2p. */
static void q2_K_elem(const uint8_t *sb, int e, int *q, float *scale, float *min)
{
    int g = e / 16, p = e % 128 / 32, l = e % 32;
    *q = (sb[16 + 32 * (e / 128) + l] >> (2 * p)) & 3;
    *scale = llm_fp16_to_f32((uint16_t)(sb[80] | sb[81] << 8)) * (float)(sb[g] & 0xF);
    *min = llm_fp16_to_f32((uint16_t)(sb[82] | sb[83] << 8)) * (float)(sb[g] >> 4);
}

/* Element e (< 256) of a Q6_K super-block as its quant q (0..63) and group scale d * sc, written out from
 * ggml's layout (ql: 128 bytes, qh: 64, scales: 16 int8, d: fp16) rather than taken from repack.c. */
static void q6_K_elem(const uint8_t *sb, int e, int *q, float *scale)
{
    int half = e / 128, i = e % 128, k = i / 32, l = i % 32;
    int lo = (sb[64 * half + l + 32 * (k % 2)] >> (4 * (k / 2))) & 0xF;
    int hi = (sb[128 + 32 * half + l] >> (2 * k)) & 3;
    *q = lo | hi << 4;
    *scale = llm_fp16_to_f32((uint16_t)(sb[208] | sb[209] << 8)) * (float)(int8_t)sb[192 + 8 * half + 2 * k + l / 16];
}

/* Element e (< 256) of a Q3_K super-block as its quant q (-4..3) and group scale d * (sc - 32), written out
 * from ggml's layout (hmask: 32 bytes, qs: 64, scales: 12, d: fp16) rather than taken from gguf_quants.c:
 * pass p = e / 32 over the half's qs bytes (shift 2 (p % 4)) and hmask bit p; 6-bit scale g = e / 16 has its
 * low 4 bits in nibble g / 8 of byte g % 8 and its high 2 at bits 2 (g / 4) of byte 8 + g % 4. */
static void q3_K_elem(const uint8_t *sb, int e, int *q, float *scale)
{
    int p = e / 32, l = e % 32, g = e / 16;
    int lo = (sb[32 + 32 * (e / 128) + l] >> (2 * (p % 4))) & 3, hm = (sb[l] >> p) & 1;
    *q = lo - (hm ? 0 : 4);
    int sc = ((sb[96 + g % 8] >> (4 * (g / 8))) & 0xF) | ((sb[104 + g % 4] >> (2 * (g / 4))) & 3) << 4;
    *scale = llm_fp16_to_f32((uint16_t)(sb[108] | sb[109] << 8)) * (float)(sc - 32);
}

/* Row r of a matrix in format f as the packed weights mean it: Q8_0/Q4_0 its
 * rows; Q4_M the Q4_K sub-blocks with scale and min rounded to fp16; Q6 the
 * Q6_K groups with d * scale rounded to fp16; Q3 the Q3_K groups the same
 * way; Q2_M the Q2_K ones with scale and min rounded to fp16. */
static void packed_row_ref(const llm_tensor *t, cpu_pk_fmt f, int r, float *out)
{
    int K = (int)t->ne[0];
    if (f == CPU_PK_MX4) { /* MXFP4: each block's power of two times its codes' FP4 values, written out here */
        static const float fp4[8] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f };
        const uint8_t *row = (const uint8_t *)t->src + (size_t)r * (size_t)(K / 32) * 17;
        for (int e = 0; e < K; e++) {
            const uint8_t *b = row + (size_t)(e / 32) * 17;
            int j = e % 32, code = j < 16 ? b[1 + j] & 15 : b[1 + j - 16] >> 4;
            out[e] = ldexpf(1.0f, (int)b[0] - 127) * (code & 8 ? -fp4[code & 7] : fp4[code & 7]);
        }
        return;
    }
    if (f == CPU_PK_Q3) {
        const uint8_t *row = (const uint8_t *)t->src + (size_t)r * (size_t)(K / 256) * 110;
        for (int e = 0; e < K; e++) {
            int q;
            float scale;
            q3_K_elem(row + (size_t)(e / 256) * 110, e % 256, &q, &scale);
            out[e] = llm_fp16_to_f32(llm_f32_to_fp16(scale)) * (float)q;
        }
        return;
    }
    if (f == CPU_PK_Q2_M) {
        const uint8_t *row = (const uint8_t *)t->src + (size_t)r * (size_t)(K / 256) * 84;
        for (int e = 0; e < K; e++) {
            int q;
            float scale, min;
            q2_K_elem(row + (size_t)(e / 256) * 84, e % 256, &q, &scale, &min);
            out[e] = llm_fp16_to_f32(llm_f32_to_fp16(scale)) * (float)q - llm_fp16_to_f32(llm_f32_to_fp16(min));
        }
        return;
    }
    if (f == CPU_PK_Q6) {
        const uint8_t *row = (const uint8_t *)t->src + (size_t)r * (size_t)(K / 256) * 210;
        for (int e = 0; e < K; e++) {
            int q;
            float scale;
            q6_K_elem(row + (size_t)(e / 256) * 210, e % 256, &q, &scale);
            out[e] = llm_fp16_to_f32(llm_f32_to_fp16(scale)) * (float)(q - 32);
        }
        return;
    }
    if (f == CPU_PK_Q5_M) { /* ggml's layout: d, dmin, scales[12], qh[32], qs[128] */
        const uint8_t *row = (const uint8_t *)t->src + (size_t)r * (size_t)(K / 256) * 176;
        for (int b = 0; b < K / LLM_QK; b++) {
            const uint8_t *sb = row + (size_t)(b / 8) * 176;
            int g = b % 8;
            float scale, min;
            gguf_q4_K_sub(sb, g, &scale, &min, NULL);
            scale = llm_fp16_to_f32(llm_f32_to_fp16(scale));
            min = llm_fp16_to_f32(llm_f32_to_fp16(min));
            for (int l = 0; l < LLM_QK; l++) {
                int q = (g % 2 ? sb[48 + 32 * (g / 2) + l] >> 4 : sb[48 + 32 * (g / 2) + l] & 0xF) |
                        ((sb[16 + l] >> g) & 1) << 4;
                out[b * LLM_QK + l] = scale * (float)q - min;
            }
        }
        return;
    }
    if (f != CPU_PK_Q4_M) {
        size_t rb = llm_dtype_row_bytes(t->type, (uint64_t)K);
        llm_row_to_f32(t->type, (const uint8_t *)t->data + rb * (size_t)r, out, (size_t)K);
        return;
    }
    const uint8_t *row = (const uint8_t *)t->src + (size_t)r * (size_t)(K / 256) * 144;
    for (int b = 0; b < K / LLM_QK; b++) {
        float scale, min;
        uint8_t q[32];
        gguf_q4_K_sub(row + (size_t)(b / 8) * 144, b % 8, &scale, &min, q);
        scale = llm_fp16_to_f32(llm_f32_to_fp16(scale));
        min = llm_fp16_to_f32(llm_f32_to_fp16(min));
        for (int e = 0; e < LLM_QK; e++)
            out[b * LLM_QK + e] = scale * (float)q[e] - min;
    }
}

/* A random K-quant source of nr rows of K for tw in format f (Q4_M: Q4_K blocks, Q5_M: Q5_K, Q6: Q6_K, Q2_M:
 * Q2_K, Q3: Q3_K), and into *worst the largest difference between the file's values (gguf_quants.c) and
 * what the packed format means (packed_row_ref), relative to each sub-block's range. */
static uint8_t *kquant_source(llm_tensor *tw, cpu_pk_fmt f, int K, int nr, double *worst)
{
    const int q2 = f == CPU_PK_Q2_M, q3 = f == CPU_PK_Q3;
    if (f == CPU_PK_MX4) { /* MXFP4 blocks: powers of two 2^-23 .. 2^16 (e 104 .. 143), random codes */
        size_t n = (size_t)(K / 32) * (size_t)nr;
        uint8_t *src = malloc(n * 17);
        for (size_t i = 0; i < n; i++) {
            src[i * 17] = (uint8_t)(104 + (int)(i * 7 % 40));
            for (int j = 1; j < 17; j++)
                src[i * 17 + (size_t)j] = (uint8_t)(rand() & 0xff);
        }
        tw->src = src;
        tw->src_type = GGML_MXFP4;
        float *fq = malloc((size_t)K * sizeof(float)), *row = malloc((size_t)K * sizeof(float));
        for (int r = 0; r < nr; r++) { /* the file's values (gguf_quants.c) are what the packed format means */
            gguf_qtype_to_f32(GGML_MXFP4, src + (size_t)r * (K / 32) * 17, fq, (size_t)K);
            packed_row_ref(tw, f, r, row);
            for (int e = 0; e < K; e++)
                if (fq[e] != row[e])
                    *worst = 1.0;
        }
        free(fq);
        free(row);
        return src;
    }
    size_t bytes = f == CPU_PK_Q4_M ? 144 : f == CPU_PK_Q5_M ? 176 : q2 ? 84 : q3 ? 110 : 210;
    size_t n = (size_t)(K / 256) * (size_t)nr;
    uint8_t *src = malloc(n * bytes);
    if (f == CPU_PK_Q4_M)
        random_q4_K(src, n);
    else if (f == CPU_PK_Q5_M)
        random_q5_K(src, n);
    else if (q2)
        random_q2_K(src, n);
    else
        random_d_last(src, n, bytes); /* Q3_K or Q6_K */
    tw->src = src;
    tw->src_type = f == CPU_PK_Q4_M ? GGML_Q4_K : f == CPU_PK_Q5_M ? GGML_Q5_K : q2 ? GGML_Q2_K : q3 ? GGML_Q3_K
                                                                                                  : GGML_Q6_K;
    float *fq = malloc((size_t)K * sizeof(float)), *row = malloc((size_t)K * sizeof(float));
    for (int r = 0; r < nr; r++) {
        gguf_qtype_to_f32(tw->src_type, src + (size_t)r * (K / 256) * bytes, fq, (size_t)K);
        packed_row_ref(tw, f, r, row);
        for (int e = 0; e < K; e++) {
            const uint8_t *sb = src + ((size_t)r * (K / 256) + (size_t)e / 256) * bytes;
            double range;
            if (q2) {
                int q;
                float scale, min;
                q2_K_elem(sb, e % 256, &q, &scale, &min);
                range = 3.0 * fabs(scale) + fabs(min) + 1e-30;
            } else if (f == CPU_PK_Q6 || q3) {
                int q;
                float scale;
                (q3 ? q3_K_elem : q6_K_elem)(sb, e % 256, &q, &scale);
                range = (q3 ? 4.0 : 32.0) * fabs(scale) + 1e-30;
            } else {
                float scale, min;
                gguf_q4_K_sub(sb, e % 256 / 32, &scale, &min, NULL); /* Q5_K shares Q4_K's header */
                range = (f == CPU_PK_Q5_M ? 31.0 : 15.0) * fabs(scale) + fabs(min);
            }
            double rel = fabs((double)fq[e] - row[e]) / range;
            *worst = rel > *worst ? rel : *worst;
        }
    }
    free(fq);
    free(row);
    return src;
}

/* Packed Q8_0 / Q4_0 / Q4_M / Q6 / Q5_M / Q2_M / Q3 / MX4 (repack.c + gemm_packed):
 * against the double reference over row tails (groups of 8) and
 * token tails (pairs, a lone token), with accumulate; and each token alone
 * gives the bits it gets in a batch. The K-quant ones are also held to the
 * file's own values (gguf_quants.c): only the fp16 rounding of the folded
 * scales apart. */
static void test_gemm_packed(const cpu_kernels *k)
{
    if (k->gemm_packed == NULL)
        return;
    /* nt 16 and 37: several token tiles and their tails in one call */
    const int Ks[] = { 32, 96, 256, 512 }, nrs[] = { 1, 7, 8, 9, 16, 17, 37 }, nts[] = { 1, 2, 3, 6, 7, 13, 16, 37 };
    static const char *const names[] = { "q8_0", "q4_0", "q4_M (from q4_K)", "q6 (from q6_K)", "q5_M (from q5_K)",
                                         "q2_M (from q2_K)", "q3 (from q3_K)", "mx4 (from mxfp4)" };
    for (int fi = 0; fi < 8; fi++) {
        cpu_pk_fmt f = (cpu_pk_fmt)fi;
        llm_dtype t = f == CPU_PK_Q4_0 ? LLM_Q4_0 : LLM_Q8_0;
        double worst = 0.0, worst_src = 0.0;
        int same = 1, rows_back = 1;
        for (size_t a = 0; a < sizeof(Ks) / sizeof(Ks[0]); a++)
            for (size_t b = 0; b < sizeof(nrs) / sizeof(nrs[0]); b++)
                for (size_t c = 0; c < sizeof(nts) / sizeof(nts[0]); c++) {
                    int K = Ks[a], nr = nrs[b], nt = nts[c], accumulate = (int)((a + b + c) & 1);
                    if (f >= CPU_PK_Q4_M && f != CPU_PK_MX4 && K % 256 != 0)
                        continue;
                    size_t rb = llm_dtype_row_bytes(t, (uint64_t)K), xs = (size_t)(K / LLM_QK) * sizeof(cpu_q8_act);
                    size_t ldy = (size_t)nr + 2;
                    uint8_t *w = malloc(rb * (size_t)nr), *src = NULL;
                    float *row = malloc((size_t)K * sizeof(float)), *wd = malloc((size_t)nr * K * sizeof(float));
                    cpu_q8_act *xq = malloc((size_t)nt * xs);
                    float *y = malloc((size_t)nt * ldy * sizeof(float)), *y0 = malloc((size_t)nt * ldy * sizeof(float));
                    llm_tensor tw = { .type = t, .ne = { K, nr }, .data = w };
                    if (f >= CPU_PK_Q4_M) {
                        src = kquant_source(&tw, f, K, nr, &worst_src);
                    } else {
                        for (int r = 0; r < nr; r++) {
                            for (int e = 0; e < K; e++) row[e] = frand() * (e % 7 == 0 ? 3.0f : 1.0f);
                            llm_row_from_f32(t, row, w + rb * r, (size_t)K);
                        }
                    }
                    for (int r = 0; r < nr; r++)
                        packed_row_ref(&tw, f, r, wd + (size_t)r * K);
                    for (int j = 0; j < nt; j++) {
                        for (int e = 0; e < K; e++) row[e] = frand() * (e % 5 == 0 ? 4.0f : 1.0f);
                        k->quantize_act(row, (cpu_q8_act *)((uint8_t *)xq + (size_t)j * xs), K);
                    }
                    uint8_t *p = malloc(cpu_packed_bytes(&tw, f));
                    cpu_pack_matrix(&tw, f, p);
                    for (int r = 0; r < nr; r++) { /* rows read back (embedding lookups): equal values (Q3's
                                                      * d q - 4 d gives +0 where d times a zero quant may be -0) */
                        float back[512];
                        cpu_pk_row_to_f32(f, p, K, (size_t)r, back);
                        for (int e = 0; e < K; e++)
                            rows_back &= back[e] == wd[(size_t)r * K + e];
                    }
                    for (size_t i = 0; i < (size_t)nt * ldy; i++) y[i] = y0[i] = frand();
                    k->gemm_packed(f, K, p, nr, xq, xs, nt, y, ldy, accumulate);
                    for (int j = 0; j < nt; j++) {
                        const cpu_q8_act *xa = (const cpu_q8_act *)((const uint8_t *)xq + (size_t)j * xs);
                        for (int r = 0; r < nr; r++) {
                            double sum = 0.0, mag = 1e-30;
                            for (int e = 0; e < K; e++) {
                                double pr = (double)wd[(size_t)r * K + e] * xa[e / LLM_QK].d * xa[e / LLM_QK].qs[e % LLM_QK];
                                sum += pr;
                                mag += fabs(pr);
                            }
                            if (accumulate) { sum += y0[(size_t)j * ldy + r]; mag += fabs(y0[(size_t)j * ldy + r]); }
                            double err = fabs(sum - y[(size_t)j * ldy + r]) / mag;
                            worst = err > worst ? err : worst;
                        }
                        for (size_t r = (size_t)nr; r < ldy; r++)
                            if (y[(size_t)j * ldy + r] != y0[(size_t)j * ldy + r]) worst = 1e9;
                        float one[40];
                        k->gemm_packed(f, K, p, nr, xa, xs, 1, one, (size_t)nr, 0);
                        if (!accumulate)
                            same &= memcmp(one, y + (size_t)j * ldy, (size_t)nr * sizeof(float)) == 0;
                    }
                    free(w); free(src); free(row); free(wd); free(xq); free(y); free(y0); free(p);
                }
        ok(worst < 1e-5, "%s packed %s gemm (row groups, token pairs, tails): worst relative error %.2g", k->name,
           names[fi], worst);
        ok(same, "%s packed %s: each token alone gives the bits it gets in a batch", k->name, names[fi]);
        ok(rows_back, "%s packed %s: every row read back as its values", k->name, names[fi]);
        if (f == CPU_PK_MX4)
            ok(worst_src == 0.0, "%s packed %s: weights exactly the MXFP4 file's", k->name, names[fi]);
        else if (f >= CPU_PK_Q4_M)
            ok(worst_src <= 4.9e-4, "%s packed %s: weights within fp16 rounding (2^-11) of the %s file's "
               "(worst %.2g of the sub-block's range)",
               k->name, names[fi], f == CPU_PK_Q2_M ? "Q2_K" : f == CPU_PK_Q3 ? "Q3_K" : f == CPU_PK_Q6 ? "Q6_K"
                                 : f == CPU_PK_Q5_M ? "Q5_K" : "Q4_K",
               worst_src);
    }
}

static void test_dequant(const cpu_kernels *k)
{
    const llm_dtype types[] = { LLM_F32, LLM_F16, LLM_BF16, LLM_Q8_0, LLM_Q4_0 };
    int same = 1;
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        llm_dtype t = types[ti];
        int K = cpu_dtype_wants_q8(t) ? 96 : 37;
        size_t rb = llm_dtype_row_bytes(t, (uint64_t)K);
        float src[3 * 96], ref[3 * 96], got[3 * 96];
        uint8_t w[3 * 96 * 4];
        for (int i = 0; i < 3 * K; i++) src[i] = frand() * 3.0f;
        for (int r = 0; r < 3; r++) {
            llm_row_from_f32(t, src + r * K, w + rb * r, (size_t)K);
            llm_row_to_f32(t, w + rb * r, ref + r * K, (size_t)K);
        }
        k->dequant_rows(t, w, rb, 3, K, got);
        same &= memcmp(ref, got, (size_t)(3 * K) * sizeof(float)) == 0;
    }
    ok(same, "%s dequant_rows == llm_row_to_f32 exactly, every type", k->name);
}

static void test_quantize(const cpu_kernels *k)
{
    enum { K = 256 };
    float x[K];
    cpu_q8_act q[K / LLM_QK], ref[K / LLM_QK];
    for (int i = 0; i < K; i++) x[i] = frand() * (i < 32 ? 0.0f : (float)(i % 9));
    k->quantize_act(x, q, K);
    cpu_kernels_generic()->quantize_act(x, ref, K);
    int same = 1, sums = 1;
    double worst = 0.0;
    for (int b = 0; b < K / LLM_QK; b++) {
        int sum = 0, lo = 0;
        for (int e = 0; e < LLM_QK; e++) {
            same &= abs(q[b].qs[e] - ref[b].qs[e]) <= 1;
            sum += q[b].qs[e];
            lo += e < LLM_QK / 2 ? q[b].qs[e] : 0;
            double err = fabs(q[b].d * q[b].qs[e] - x[b * LLM_QK + e]);
            worst = err / (q[b].d + 1e-30) > worst ? err / (q[b].d + 1e-30) : worst;
        }
        same &= fabsf(q[b].d - ref[b].d) <= 1e-7f * ref[b].d && fabsf(q[b].s - q[b].d * (float)sum) <= 1e-5f;
        sums &= q[b].isum == sum && q[b].isum_lo == lo;
    }
    ok(same && q[0].d == 0.0f, "%s quantize_act agrees with generic (zero block gives d = 0)", k->name);
    ok(sums, "%s quantize_act: isum and isum_lo are the sums of the block's quants and of its first 16", k->name);
    ok(worst <= 0.5 + 1e-3, "%s quantize_act error within half a step (%.3g)", k->name, worst);
}

/* f32 -> f16 (the f16 KV cache's writes): llm_f32_to_fp16's values for normals, halfway cases, subnormals,
 * overflow, infinities; NaN stays NaN. */
static void test_f32_to_f16(const cpu_kernels *k)
{
    enum { N = 4099 };
    float *x = malloc(N * sizeof(float));
    uint16_t *y = malloc(N * sizeof(uint16_t));
    for (int i = 0; i < N; i++) {
        float scale = i % 5 == 0 ? 1e-6f : i % 5 == 1 ? 6e-5f : i % 5 == 2 ? 70000.0f : 1.0f;
        x[i] = frand() * scale;
    }
    x[3] = 1.0f + 1.0f / 2048.0f;  /* halfway between two halves: to even */
    x[4] = 1.0f + 3.0f / 2048.0f;
    x[6] = 65519.0f;               /* rounds down to 65504 */
    x[7] = 65520.0f;               /* rounds up: inf */
    x[8] = INFINITY;
    x[9] = -INFINITY;
    x[11] = 5.9604645e-08f;        /* the smallest subnormal half */
    x[12] = NAN;
    k->f32_to_f16(x, y, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        uint16_t want = llm_f32_to_fp16(x[i]);
        bad += isnan(x[i]) ? !((y[i] & 0x7c00) == 0x7c00 && (y[i] & 0x3ff) != 0) : y[i] != want;
    }
    ok(bad == 0, "%s f32_to_f16 == llm_f32_to_fp16 (rounding, subnormals, overflow, inf; NaN stays NaN): %d differ",
       k->name, bad);
    free(x); free(y);
}

/* The Q8_0 KV cache's rows: every table writes the generic table's bytes and scales (so a cache means the
 * same whichever table wrote it), within half a step of x per element; all-zero groups give zeros; and the
 * rows come back as d q exactly, for groups of 32, 16 and 8 (head_dims 128, 80 and 8). */
static void test_kv_q8(const cpu_kernels *k)
{
    enum { N = 640 };
    const cpu_kernels *g = cpu_kernels_generic();
    float x[N], back[N], d[N / 8], dg[N / 8];
    int8_t q[N], qg[N];
    int same = 1, exact = 1, zeros = 1;
    double worst = 0.0;
    for (int gs = 32; gs >= 8; gs /= 2) {
        for (int i = 0; i < N; i++)
            x[i] = frand() * (i % 97 == 0 ? 40.0f : 1.0f);
        for (int i = 0; i < gs; i++)
            x[2 * gs + i] = 0.0f; /* one all-zero group */
        k->kv_q8_quant(x, q, d, gs, N);
        g->kv_q8_quant(x, qg, dg, gs, N);
        same &= memcmp(q, qg, sizeof(q)) == 0 && memcmp(d, dg, (size_t)(N / gs) * sizeof(float)) == 0;
        k->kv_q8_dequant(q, d, gs, N, back);
        for (int i = 0; i < N; i++) {
            exact &= back[i] == d[i / gs] * (float)q[i];
            if (d[i / gs] > 0.0f) {
                double e = fabs((double)back[i] - x[i]) / d[i / gs];
                worst = e > worst ? e : worst;
            }
        }
        zeros &= d[2] == 0.0f;
        for (int i = 0; i < gs; i++)
            zeros &= q[2 * gs + i] == 0 && back[2 * gs + i] == 0.0f;
    }
    ok(same, "%s kv_q8_quant: the generic table's quants and scales, groups of 32, 16, 8", k->name);
    ok(exact && zeros, "%s kv_q8_dequant: d q exactly; an all-zero group stays zeros", k->name);
    ok(worst <= 0.5 + 1e-3, "%s kv_q8 round trip within half a step (%.3g)", k->name, worst);
}

static void test_vec(const cpu_kernels *k)
{
    double worst = 0.0;
    for (int n = 1; n < 70; n += 3) {
        float a[70], b[70], y[70], y0[70];
        for (int i = 0; i < n; i++) { a[i] = frand(); b[i] = frand(); y[i] = y0[i] = frand(); }
        double s = 0.0, mag = 1e-30;
        for (int i = 0; i < n; i++) { s += (double)a[i] * b[i]; mag += fabs((double)a[i] * b[i]); }
        double e = fabs(k->dot_f32(a, b, n) - s) / mag;
        worst = e > worst ? e : worst;
        k->axpy_f32(0.75f, a, y, n);
        for (int i = 0; i < n; i++) {
            e = fabs(y[i] - (y0[i] + 0.75 * a[i]));
            worst = e > worst ? e : worst;
        }
    }
    ok(worst < 1e-5, "%s dot_f32 / axpy_f32 (odd lengths): worst error %.2g", k->name, worst);
}

/* gelu_erf against the exact GELU in double (erf from libm), odd lengths so the tails run too */
static void test_gelu_erf(const cpu_kernels *k)
{
    double worst = 0.0;
    for (int n = 1; n < 90; n += 7) {
        float x[90], b[90];
        double want[90];
        for (int i = 0; i < n; i++) {
            x[i] = frand() * 6.0f;
            b[i] = frand();
            double v = (double)(x[i] + b[i]);
            want[i] = 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
        }
        k->gelu_erf(x, b, n);
        for (int i = 0; i < n; i++) {
            double e = fabs(x[i] - want[i]) / (1.0 + fabs(want[i]));
            worst = e > worst ? e : worst;
        }
    }
    float big[2] = { 30.0f, -30.0f }, zero[2] = { 0.0f, 0.0f };
    k->gelu_erf(big, zero, 2);
    ok(worst < 1e-6 && big[0] == 30.0f && big[1] == 0.0f, "%s gelu_erf: worst error %.2g (of 1 + |gelu|); "
       "gelu(30) = 30, gelu(-30) = 0", k->name, worst);
}

static void test_attn_swiglu(const cpu_kernels *k)
{
    double worst_s = 0.0, worst_a = 0.0, worst_g = 0.0;
    int f16_diff = 0;
    const int hds[] = { 4, 16, 36, 64, 72, 128 };
    for (size_t c = 0; c < sizeof(hds) / sizeof(hds[0]); c++) {
        int hd = hds[c], n = 1 + (int)c * 3, stride = hd * 3 + 1;
        float *q = malloc((size_t)hd * sizeof(float)), *kv = malloc((size_t)n * stride * sizeof(float));
        float *sc = malloc((size_t)n * sizeof(float)), *out = malloc((size_t)hd * sizeof(float));
        double *ref = malloc((size_t)hd * sizeof(double));
        for (int i = 0; i < hd; i++) { q[i] = frand(); out[i] = frand(); ref[i] = out[i]; }
        for (int i = 0; i < n * stride; i++) kv[i] = frand();
        k->attn_scores(q, kv, (size_t)stride, n, hd, 0.125f, sc);
        for (int p = 0; p < n; p++) {
            double s = 0.0;
            for (int i = 0; i < hd; i++) s += (double)q[i] * kv[(size_t)p * stride + i];
            worst_s = fabs(s * 0.125 - sc[p]) > worst_s ? fabs(s * 0.125 - sc[p]) : worst_s;
            for (int i = 0; i < hd; i++) ref[i] += (double)sc[p] * kv[(size_t)p * stride + i];
        }
        float *out0 = malloc((size_t)hd * sizeof(float));
        memcpy(out0, out, (size_t)hd * sizeof(float));
        k->attn_accum(sc, kv, (size_t)stride, n, hd, out);
        for (int i = 0; i < hd; i++)
            worst_a = fabs(ref[i] - out[i]) > worst_a ? fabs(ref[i] - out[i]) : worst_a;
        /* An f16 cache: the same bits as the f32 kernels over the same values widened. */
        uint16_t *kh = malloc((size_t)n * stride * sizeof(uint16_t));
        float *sc_h = malloc((size_t)n * sizeof(float)), *out_h = malloc((size_t)hd * sizeof(float));
        for (int i = 0; i < n * stride; i++) {
            kh[i] = llm_f32_to_fp16(kv[i]);
            kv[i] = llm_fp16_to_f32(kh[i]);
        }
        memcpy(out, out0, (size_t)hd * sizeof(float));
        memcpy(out_h, out0, (size_t)hd * sizeof(float));
        k->attn_scores(q, kv, (size_t)stride, n, hd, 0.125f, sc);
        k->attn_scores_h(q, kh, (size_t)stride, n, hd, 0.125f, sc_h);
        k->attn_accum(sc, kv, (size_t)stride, n, hd, out);
        k->attn_accum_h(sc, kh, (size_t)stride, n, hd, out_h);
        f16_diff += memcmp(sc, sc_h, (size_t)n * sizeof(float)) != 0;
        f16_diff += memcmp(out, out_h, (size_t)hd * sizeof(float)) != 0;
        free(q); free(kv); free(sc); free(out); free(ref); free(out0); free(kh); free(sc_h); free(out_h);
    }
    ok(worst_s < 1e-5 && worst_a < 1e-5, "%s attention scores / accumulate (strided, odd head sizes): %.2g %.2g",
       k->name, worst_s, worst_a);
    ok(f16_diff == 0, "%s attention over an f16 cache: the f32 kernels' bits on the widened values (%d differ)",
       k->name, f16_diff);
    /* Several queries at once: each query's bits as alone, over shapes in and out of the fast paths. */
    int mq_diff = 0, mq_cases = 0;
    const int mq_hd[] = { 16, 36, 64, 128 }, mq_n[] = { 16, 7, 4 };
    for (size_t c = 0; c < sizeof(mq_hd) / sizeof(mq_hd[0]); c++)
        for (size_t e = 0; e < sizeof(mq_n) / sizeof(mq_n[0]); e++)
            for (int nq = 1; nq <= 7; nq += 2) {
                int hd = mq_hd[c], n = mq_n[e], stride = hd * 2 + 3;
                float *qs = malloc((size_t)nq * hd * sizeof(float)), *kv = malloc((size_t)n * stride * sizeof(float));
                float *a1 = malloc((size_t)nq * n * sizeof(float)), *am = malloc((size_t)nq * n * sizeof(float));
                float *o1 = malloc((size_t)nq * hd * sizeof(float)), *om = malloc((size_t)nq * hd * sizeof(float));
                uint16_t *kh = malloc((size_t)n * stride * sizeof(uint16_t));
                const float *qp[7], *ap[7];
                float *amp[7], *omp[7];
                for (int i = 0; i < nq * hd; i++) qs[i] = frand(), o1[i] = om[i] = frand();
                for (int i = 0; i < n * stride; i++) kv[i] = frand(), kh[i] = llm_f32_to_fp16(kv[i]);
                for (int j = 0; j < nq; j++) {
                    qp[j] = qs + (size_t)j * hd;
                    amp[j] = am + (size_t)j * n;
                    ap[j] = am + (size_t)j * n;
                    omp[j] = om + (size_t)j * hd;
                }
                for (int h16 = 0; h16 < 2; h16++) {
                    for (int j = 0; j < nq; j++) {
                        if (h16) {
                            k->attn_scores_h(qp[j], kh, (size_t)stride, n, hd, 0.125f, a1 + (size_t)j * n);
                            k->attn_accum_h(a1 + (size_t)j * n, kh, (size_t)stride, n, hd, o1 + (size_t)j * hd);
                        } else {
                            k->attn_scores(qp[j], kv, (size_t)stride, n, hd, 0.125f, a1 + (size_t)j * n);
                            k->attn_accum(a1 + (size_t)j * n, kv, (size_t)stride, n, hd, o1 + (size_t)j * hd);
                        }
                    }
                    if (h16) {
                        k->attn_scores_mq_h(qp, nq, kh, (size_t)stride, n, hd, 0.125f, amp);
                        k->attn_accum_mq_h(ap, nq, kh, (size_t)stride, n, hd, omp);
                    } else {
                        k->attn_scores_mq(qp, nq, kv, (size_t)stride, n, hd, 0.125f, amp);
                        k->attn_accum_mq(ap, nq, kv, (size_t)stride, n, hd, omp);
                    }
                    mq_diff += memcmp(a1, am, (size_t)nq * n * sizeof(float)) != 0;
                    mq_diff += memcmp(o1, om, (size_t)nq * hd * sizeof(float)) != 0;
                    mq_cases += 2;
                }
                free(qs); free(kv); free(a1); free(am); free(o1); free(om); free(kh);
            }
    ok(mq_diff == 0, "%s attention for several queries at once: each query's bits as alone (%d of %d differ)",
       k->name, mq_diff, mq_cases);
    float g[203], u[203], g0[203];
    for (int i = 0; i < 203; i++) { g0[i] = g[i] = (frand() * 12.0f) * (i == 7 ? 20.0f : 1.0f); u[i] = frand(); }
    k->swiglu(g, u, 203);
    for (int i = 0; i < 203; i++) {
        double want = g0[i] / (1.0 + exp(-(double)g0[i])) * u[i];
        double e = fabs(want - g[i]) / (fabs(want) + 1e-6);
        worst_g = e > worst_g ? e : worst_g;
    }
    ok(worst_g < 1e-5, "%s swiglu (including |x| > 80): worst relative error %.2g", k->name, worst_g);
    /* softmax against a double reference, at lengths around the vector width; and the generic kernel's
     * maximum, exponentials and scaling done by hand give its bits */
    double worst_e = 0.0;
    int same_generic = 1;
    for (int n = 1; n <= 37; n += 4) {
        float e[37], e0[37];
        for (int i = 0; i < n; i++) e0[i] = e[i] = frand() * 30.0f - (i == 5 ? 200.0f : 0.0f);
        k->softmax(e, n);
        double mx = -INFINITY, sum = 0.0;
        for (int i = 0; i < n; i++) mx = e0[i] > mx ? e0[i] : mx;
        for (int i = 0; i < n; i++) sum += exp((double)e0[i] - mx);
        for (int i = 0; i < n; i++) {
            double w = exp((double)e0[i] - mx) / sum;
            worst_e = fabs(w - e[i]) / (w + 1e-30) > worst_e ? fabs(w - e[i]) / (w + 1e-30) : worst_e;
        }
        if (k == cpu_kernels_generic()) {
            float mxf = -INFINITY, s = 0.0f, g[37];
            for (int i = 0; i < n; i++) mxf = e0[i] > mxf ? e0[i] : mxf;
            for (int i = 0; i < n; i++) { g[i] = expf(e0[i] - mxf); s += g[i]; }
            for (int i = 0; i < n; i++) g[i] *= 1.0f / s;
            same_generic &= memcmp(g, e, (size_t)n * sizeof(float)) == 0;
        }
    }
    ok(worst_e < 1e-5 && same_generic, "%s softmax: worst relative error %.2g", k->name, worst_e);
}

typedef struct {
    _Atomic int hits[8];
    _Atomic int phase1;
    int bad;
} pool_ctx;

static void pool_job(void *ctx, int ith, int nth)
{
    pool_ctx *c = ctx;
    atomic_fetch_add(&c->hits[ith], 1);
    atomic_fetch_add(&c->phase1, 1);
    extern cpu_threadpool *test_pool;
    cpu_pool_barrier(test_pool);
    if (atomic_load(&c->phase1) != nth) c->bad = 1; /* everyone passed phase 1 */
    cpu_pool_barrier(test_pool);
    if (ith == 0) atomic_store(&c->phase1, 0);
    cpu_pool_barrier(test_pool);
}

cpu_threadpool *test_pool;

static void test_pool_jobs(void)
{
    for (int n = 1; n <= 4; n++) {
        test_pool = cpu_pool_create(n);
        pool_ctx c;
        memset(&c, 0, sizeof(c));
        for (int rep = 0; rep < 500; rep++)
            cpu_pool_run(test_pool, pool_job, &c);
        int all = 1;
        for (int i = 0; i < n; i++) all &= atomic_load(&c.hits[i]) == 500;
        ok(all && !c.bad && cpu_pool_threads(test_pool) == n, "thread pool of %d: 500 jobs, every thread ran each, "
           "barriers held", n);
        cpu_pool_destroy(test_pool);
    }
}

int main(void)
{
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_supported((cpu_isa)isa)) {
            diag("%s not supported here: kernels built but not run", cpu_isa_name((cpu_isa)isa));
            continue;
        }
        const cpu_kernels *k = cpu_kernels_for((cpu_isa)isa);
        test_gemm(k);
        test_gemm_batch_invariant(k);
        test_bf16_batch_invariant(k);
        test_tiled(k);
        test_gemm_packed(k);
        test_quantize(k);
        test_dequant(k);
        test_vec(k);
        test_gelu_erf(k);
        test_f32_to_f16(k);
        test_kv_q8(k);
        test_attn_swiglu(k);
    }
    ok(cpu_kernels_avx512() != NULL && strcmp(cpu_kernels_avx512()->name, "avx512") == 0, "avx512 table is linked");
    llm_err err;
    const cpu_kernels *best = cpu_kernels_select(&err);
    ok(best != NULL, "default kernel table: %s", best ? best->name : err.msg);
    test_pool_jobs();
    return done_testing();
}
