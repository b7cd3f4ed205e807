/* GGUF writer + reader: every metadata type and tensor type round-trips;
 * malformed files (bad magic/version, truncation, bad tensors, absurd counts) fail cleanly;
 * Q3_K blocks made Q6_K keep their values bit for bit. */
#include "gguf.h"
#include "gguf_quants.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp_path[256];

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    if (fread(b, 1, (size_t)sz, f) != (size_t)sz) { free(b); b = NULL; }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static const llm_dtype types[5] = { LLM_F32, LLM_F16, LLM_BF16, LLM_Q8_0, LLM_Q4_0 };
static uint8_t tdata[5][4 * 64 * 3];

/* Writes a file with every metadata type and one tensor of each type. */
static int write_sample(const char *path, uint32_t alignment)
{
    gguf_writer *w = gguf_writer_new();
    if (alignment)
        gguf_w_u32(w, "general.alignment", alignment);
    gguf_w_u8(w, "t.u8", 200);
    gguf_w_i8(w, "t.i8", -100);
    gguf_w_u16(w, "t.u16", 60000);
    gguf_w_i16(w, "t.i16", -30000);
    gguf_w_u32(w, "t.u32", 4000000000u);
    gguf_w_i32(w, "t.i32", -2000000000);
    gguf_w_u64(w, "t.u64", 1ULL << 60);
    gguf_w_i64(w, "t.i64", -(1LL << 60));
    gguf_w_f32(w, "t.f32", 1.5f);
    gguf_w_f64(w, "t.f64", -2.25);
    gguf_w_bool(w, "t.bool", 1);
    gguf_w_str(w, "t.str", "hello \xe2\x96\x81 world");
    int32_t ai[3] = { -1, 0, 7 };
    gguf_w_arr(w, "t.arr_i32", GGUF_TYPE_INT32, ai, 3);
    float af[2] = { 0.5f, -4.0f };
    gguf_w_arr(w, "t.arr_f32", GGUF_TYPE_FLOAT32, af, 2);
    const char *as[3] = { "a", "", "ccc" };
    gguf_w_arr_str(w, "t.arr_str", as, NULL, 3);
    size_t lens[2] = { 3, 1 };
    const char *bs[2] = { "x\0y", "z" };
    gguf_w_arr_str(w, "t.arr_bin", bs, lens, 2);
    for (int i = 0; i < 5; i++) {
        uint64_t ne[2] = { 64, 3 };
        size_t nb = llm_dtype_row_bytes(types[i], 64) * 3;
        for (size_t b = 0; b < nb; b++)
            tdata[i][b] = (uint8_t)(b * 7 + i);
        char name[32];
        snprintf(name, sizeof(name), "tensor.%s", llm_dtype_name(types[i]));
        gguf_w_tensor(w, name, types[i], 2, ne, tdata[i]);
    }
    llm_err err = { { 0 } };
    int rc = gguf_writer_write(w, path, &err);
    if (rc != 0)
        diag("write: %s", err.msg);
    gguf_writer_free(w);
    return rc;
}

static void test_roundtrip(uint32_t alignment)
{
    ok(write_sample(tmp_path, alignment) == 0, "write sample (alignment %u)", alignment);
    llm_err err = { { 0 } };
    gguf_ctx *g = gguf_open(tmp_path, &err);
    ok(g != NULL, "reopen: %s", g ? "ok" : err.msg);
    if (g == NULL)
        return;
    is_int(g->version, 3, "version 3");
    is_int(g->alignment, alignment ? alignment : 32, "alignment");
    int64_t v; uint32_t u; float f; int b;
    ok(gguf_get_i64(g, "t.u8", &v) == 0 && v == 200, "u8");
    ok(gguf_get_i64(g, "t.i8", &v) == 0 && v == -100, "i8");
    ok(gguf_get_i64(g, "t.u16", &v) == 0 && v == 60000, "u16");
    ok(gguf_get_i64(g, "t.i16", &v) == 0 && v == -30000, "i16");
    ok(gguf_get_u32(g, "t.u32", &u) == 0 && u == 4000000000u, "u32");
    ok(gguf_get_i64(g, "t.i32", &v) == 0 && v == -2000000000, "i32");
    ok(gguf_get_u32(g, "t.i32", &u) == -1, "negative value does not fit u32");
    ok(gguf_get_i64(g, "t.u64", &v) == 0 && v == (1LL << 60), "u64");
    ok(gguf_get_i64(g, "t.i64", &v) == 0 && v == -(1LL << 60), "i64");
    ok(gguf_get_f32(g, "t.f32", &f) == 0 && f == 1.5f, "f32");
    ok(gguf_get_f32(g, "t.f64", &f) == 0 && f == -2.25f, "f64");
    ok(gguf_get_bool(g, "t.bool", &b) == 0 && b == 1, "bool");
    ok(gguf_get_i64(g, "t.str", &v) == -1, "string is not an integer");
    char s[64];
    ok(gguf_get_str(g, "t.str", s, sizeof(s)) == 0 && strcmp(s, "hello \xe2\x96\x81 world") == 0, "string");
    ok(gguf_get_str(g, "t.str", s, 6) == 0 && strcmp(s, "hello") == 0, "string truncated to cap");
    ok(gguf_get_str(g, "missing", s, sizeof(s)) == -1, "missing key");
    const gguf_kv *kv = gguf_find_kv(g, "t.arr_i32");
    ok(kv && kv->arr_n == 3 && gguf_arr_i64(kv, 0, &v) == 0 && v == -1 && gguf_arr_i64(kv, 2, &v) == 0 && v == 7,
       "i32 array");
    ok(gguf_arr_i64(kv, 3, &v) == -1, "array index bounds-checked");
    kv = gguf_find_kv(g, "t.arr_f32");
    ok(kv && gguf_arr_f32(kv, 1, &f) == 0 && f == -4.0f, "f32 array");
    kv = gguf_find_kv(g, "t.arr_str");
    ok(kv && kv->arr_type == GGUF_TYPE_STRING && kv->arr_n == 3 && kv->strs[2].len == 3 &&
       memcmp(kv->strs[2].ptr, "ccc", 3) == 0 && kv->strs[1].len == 0, "string array");
    kv = gguf_find_kv(g, "t.arr_bin");
    ok(kv && kv->strs[0].len == 3 && memcmp(kv->strs[0].ptr, "x\0y", 3) == 0, "string array with explicit lengths");
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof(name), "tensor.%s", llm_dtype_name(types[i]));
        const gguf_tensor *t = gguf_find_tensor(g, name);
        size_t nb = llm_dtype_row_bytes(types[i], 64) * 3;
        ok(t && t->type == types[i] && t->ne[0] == 64 && t->ne[1] == 3 && t->n_dims == 2 && t->nbytes == nb &&
           memcmp(t->data, tdata[i], nb) == 0 && t->offset % g->alignment == 0 &&
           ((const uint8_t *)t->data - g->base) % g->alignment == 0, "tensor %s round-trips, aligned", name);
    }
    ok(gguf_find_tensor(g, "nope") == NULL, "missing tensor");

    /* Copying every kv into a new writer reproduces the metadata. */
    gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < g->n_kv; i++)
        gguf_w_kv_copy(w, &g->kv[i]);
    char p2[300];
    snprintf(p2, sizeof(p2), "%s.copy", tmp_path);
    ok(gguf_writer_write(w, p2, &err) == 0, "write copy");
    gguf_writer_free(w);
    gguf_ctx *g2 = gguf_open(p2, &err);
    ok(g2 && g2->n_kv == g->n_kv && gguf_get_str(g2, "t.str", s, sizeof(s)) == 0 &&
       gguf_find_kv(g2, "t.arr_str")->arr_n == 3, "kv copy round-trips");
    gguf_close(g2);
    unlink(p2);
    gguf_close(g);
}

/* Helpers to build raw files by hand. */
typedef struct { uint8_t b[4096]; size_t n; } buf;
static void b_put(buf *b, const void *p, size_t n) { memcpy(b->b + b->n, p, n); b->n += n; }
static void b_u32(buf *b, uint32_t v) { b_put(b, &v, 4); }
static void b_u64(buf *b, uint64_t v) { b_put(b, &v, 8); }
static void b_str(buf *b, const char *s) { b_u64(b, strlen(s)); b_put(b, s, strlen(s)); }

static int fails(const void *p, size_t n, const char *want, const char *what)
{
    llm_err err = { { 0 } };
    gguf_ctx *g = gguf_open_mem(p, n, &err);
    int r = g == NULL && err.msg[0] != 0 && (want == NULL || strstr(err.msg, want) != NULL);
    if (!r)
        diag("%s: got '%s'", what, g ? "(opened)" : err.msg);
    gguf_close(g);
    return r;
}

static void test_malformed(void)
{
    size_t n;
    ok(write_sample(tmp_path, 0) == 0, "write sample");
    uint8_t *f = slurp(tmp_path, &n);
    ok(f != NULL && n > 0, "read sample back");
    if (f == NULL)
        return;
    uint8_t *c = malloc(n);

    memcpy(c, f, n); c[0] = 'X';
    ok(fails(c, n, "bad magic", "magic"), "bad magic");
    memcpy(c, f, n); c[4] = 4;
    ok(fails(c, n, "version", "version"), "bad version 4");
    memcpy(c, f, n); c[4] = 1;
    ok(fails(c, n, "version", "version"), "version 1 rejected");
    int trunc_ok = 1;
    for (size_t cut = 0; cut < n; cut += (cut < 2000 ? 1 : 97))
        trunc_ok &= fails(f, cut, NULL, "truncated");
    ok(trunc_ok, "every truncation point fails cleanly");
    memcpy(c, f, n); uint64_t huge = 1ULL << 62; memcpy(c + 8, &huge, 8);
    ok(fails(c, n, "absurd", "tensors"), "absurd tensor count");
    memcpy(c, f, n); memcpy(c + 16, &huge, 8);
    ok(fails(c, n, "absurd", "kvs"), "absurd kv count");

    /* Hand-built files for the tensor checks. */
    buf b = { .n = 0 };
    b_u32(&b, 0x46554747u); b_u32(&b, 3); b_u64(&b, 1); b_u64(&b, 0);
    b_str(&b, "w"); b_u32(&b, 2); b_u64(&b, 32); b_u64(&b, 2); b_u32(&b, 16 /* IQ2_XXS */); b_u64(&b, 0);
    while (b.n % 32) b.b[b.n++] = 0;
    memset(b.b + b.n, 0, 1024); b.n += 1024;
    ok(fails(b.b, b.n, "unsupported type id 16", "type"), "unsupported tensor type names tensor and type");
    b.n = 0; /* Q5_K is read (converted to q8_0 at load), but its rows are 256 elements */
    b_u32(&b, 0x46554747u); b_u32(&b, 3); b_u64(&b, 1); b_u64(&b, 0);
    b_str(&b, "w"); b_u32(&b, 2); b_u64(&b, 32); b_u64(&b, 2); b_u32(&b, 13 /* Q5_K */); b_u64(&b, 0);
    while (b.n % 32) b.b[b.n++] = 0;
    memset(b.b + b.n, 0, 1024); b.n += 1024;
    ok(fails(b.b, b.n, "not a multiple of the q5_K block size", "type"), "K-quant row of 32 elements refused");
    b.n = 0; /* a Q4_K tensor of 2 rows of 256 elements opens, 144 bytes a row */
    b_u32(&b, 0x46554747u); b_u32(&b, 3); b_u64(&b, 1); b_u64(&b, 0);
    b_str(&b, "w"); b_u32(&b, 2); b_u64(&b, 256); b_u64(&b, 2); b_u32(&b, 12 /* Q4_K */); b_u64(&b, 0);
    while (b.n % 32) b.b[b.n++] = 0;
    memset(b.b + b.n, 0, 1024); b.n += 1024;
    {
        llm_err err = { { 0 } };
        gguf_ctx *g = gguf_open_mem(b.b, b.n, &err);
        const gguf_tensor *t = g ? gguf_find_tensor(g, "w") : NULL;
        ok(t != NULL && t->type == 12 && t->nbytes == 2 * 144, "Q4_K tensor opens with its size (%s)",
           g ? "opened" : err.msg);
        gguf_close(g);
    }

    b.n = 0;
    b_u32(&b, 0x46554747u); b_u32(&b, 3); b_u64(&b, 1); b_u64(&b, 0);
    b_str(&b, "w"); b_u32(&b, 2); b_u64(&b, 32); b_u64(&b, 2); b_u32(&b, 0); b_u64(&b, 64);
    while (b.n % 32) b.b[b.n++] = 0;
    memset(b.b + b.n, 0, 256); b.n += 256;
    ok(fails(b.b, b.n, "outside the file", "oob"), "tensor out of bounds");

    b.n = 0;
    b_u32(&b, 0x46554747u); b_u32(&b, 3); b_u64(&b, 1); b_u64(&b, 0);
    b_str(&b, "w"); b_u32(&b, 1); b_u64(&b, 8); b_u32(&b, 0); b_u64(&b, 4);
    while (b.n % 32) b.b[b.n++] = 0;
    memset(b.b + b.n, 0, 256); b.n += 256;
    ok(fails(b.b, b.n, "not aligned", "misaligned"), "misaligned tensor offset");

    b.n = 0;
    b_u32(&b, 0x46554747u); b_u32(&b, 3); b_u64(&b, 1); b_u64(&b, 0);
    b_str(&b, "w"); b_u32(&b, 1); b_u64(&b, 33); b_u32(&b, 8); b_u64(&b, 0);
    while (b.n % 32) b.b[b.n++] = 0;
    memset(b.b + b.n, 0, 256); b.n += 256;
    ok(fails(b.b, b.n, "block size", "block"), "q8_0 row not a multiple of 32");

    b.n = 0;
    b_u32(&b, 0x46554747u); b_u32(&b, 3); b_u64(&b, 1); b_u64(&b, 0);
    b_str(&b, "w"); b_u32(&b, 4); b_u64(&b, 1ULL << 40); b_u64(&b, 1ULL << 40); b_u64(&b, 1ULL << 40);
    b_u64(&b, 1ULL << 40); b_u32(&b, 0); b_u64(&b, 0);
    ok(fails(b.b, b.n, NULL, "overflow"), "tensor size overflow");

    b.n = 0;
    b_u32(&b, 0x46554747u); b_u32(&b, 3); b_u64(&b, 2); b_u64(&b, 0);
    b_str(&b, "w"); b_u32(&b, 1); b_u64(&b, 8); b_u32(&b, 0); b_u64(&b, 0);
    b_str(&b, "w"); b_u32(&b, 1); b_u64(&b, 8); b_u32(&b, 0); b_u64(&b, 32);
    while (b.n % 32) b.b[b.n++] = 0;
    memset(b.b + b.n, 0, 256); b.n += 256;
    ok(fails(b.b, b.n, "duplicate tensor", "dup"), "duplicate tensor names");

    b.n = 0;
    b_u32(&b, 0x46554747u); b_u32(&b, 3); b_u64(&b, 0); b_u64(&b, 1);
    b_str(&b, "general.alignment"); b_u32(&b, GGUF_TYPE_UINT32); b_u32(&b, 48);
    ok(fails(b.b, b.n, "power of two", "align"), "non-power-of-two alignment");

    b.n = 0;
    b_u32(&b, 0x46554747u); b_u32(&b, 3); b_u64(&b, 0); b_u64(&b, 1);
    b_str(&b, "k"); b_u32(&b, 77); b_u32(&b, 0);
    ok(fails(b.b, b.n, "unknown value type", "vt"), "unknown value type");

    /* Nested arrays of arrays parse and are skipped; too-deep nesting fails. */
    b.n = 0;
    b_u32(&b, 0x46554747u); b_u32(&b, 3); b_u64(&b, 0); b_u64(&b, 2);
    b_str(&b, "nested"); b_u32(&b, GGUF_TYPE_ARRAY); b_u32(&b, GGUF_TYPE_ARRAY); b_u64(&b, 2);
    b_u32(&b, GGUF_TYPE_UINT8); b_u64(&b, 3); b_put(&b, "abc", 3);
    b_u32(&b, GGUF_TYPE_STRING); b_u64(&b, 1); b_str(&b, "xy");
    b_str(&b, "after"); b_u32(&b, GGUF_TYPE_UINT32); b_u32(&b, 5);
    llm_err err = { { 0 } };
    gguf_ctx *g = gguf_open_mem(b.b, b.n, &err);
    uint32_t u = 0;
    ok(g && gguf_get_u32(g, "after", &u) == 0 && u == 5 && gguf_find_kv(g, "nested")->arr_n == 2,
       "array of arrays parsed and skipped: %s", g ? "ok" : err.msg);
    int64_t v;
    ok(g && gguf_arr_i64(gguf_find_kv(g, "nested"), 0, &v) == -1, "nested array elements are not integers");
    /* Copying the nested array reproduces it byte for byte. */
    gguf_writer *w = gguf_writer_new();
    if (g)
        gguf_w_kv_copy(w, gguf_find_kv(g, "nested"));
    ok(gguf_writer_write(w, tmp_path, &err) == 0, "write nested copy");
    gguf_writer_free(w);
    gguf_ctx *g2 = gguf_open(tmp_path, &err);
    ok(g2 && gguf_find_kv(g2, "nested") && gguf_find_kv(g2, "nested")->arr_n == 2, "nested array copy re-reads");
    gguf_close(g2);
    gguf_close(g);

    b.n = 0;
    b_u32(&b, 0x46554747u); b_u32(&b, 3); b_u64(&b, 0); b_u64(&b, 1);
    b_str(&b, "deep"); b_u32(&b, GGUF_TYPE_ARRAY);
    for (int i = 0; i < 20; i++) { b_u32(&b, GGUF_TYPE_ARRAY); b_u64(&b, 1); }
    b_u32(&b, GGUF_TYPE_UINT8); b_u64(&b, 0);
    ok(fails(b.b, b.n, "nested deeper", "deep"), "over-deep nesting rejected");

    b.n = 0;
    b_u32(&b, 0x46554747u); b_u32(&b, 3); b_u64(&b, 0); b_u64(&b, 1);
    b_str(&b, "arr"); b_u32(&b, GGUF_TYPE_ARRAY); b_u32(&b, GGUF_TYPE_STRING); b_u64(&b, 1ULL << 59);
    ok(fails(b.b, b.n, "does not fit", "arr"), "absurd array length");

    ok(gguf_open("/nonexistent/x.gguf", &err) == NULL && strstr(err.msg, "/nonexistent/x.gguf"),
       "missing file error names the file");
    free(c);
    free(f);
}

/* gguf_q23_K_fold on random Q2_K and Q3_K super-blocks (every byte pattern of quants, scales and mins; d of
 * both signs, small and large): every d q - m within the fp16 rounding of its folded scale and min (2^-11 of
 * the group's range) of ggml's value (gguf_qtype_to_f32), and for Q3_K exactly (fp16 d) times the file's
 * quant, the min 4 d taking the + 4 off with no rounding. */
static void test_q23_K_fold(void)
{
    enum { N = 512 };
    const float ds[] = { 1e-4f, -3e-3f, 0.5f, -7.0f, 2e-4f }; /* folded scales stay normal fp16 numbers */
    for (int q2 = 0; q2 < 2; q2++) {
        const size_t bb = q2 ? 84 : 110, d_at = q2 ? 80 : 108;
        uint8_t *src = malloc((size_t)N * bb);
        float *want = malloc((size_t)N * 256 * sizeof(float));
        uint32_t x = 12345;
        for (size_t i = 0; i < (size_t)N * bb; i++) {
            x = x * 1103515245u + 12345u;
            src[i] = (uint8_t)(x >> 16);
        }
        for (int i = 0; i < N; i++) {
            uint16_t d = llm_f32_to_fp16(ds[i % 5] * (1.0f + (float)(i % 7) / 8.0f));
            uint16_t dmin = llm_f32_to_fp16(ds[(i + 2) % 5] * (1.0f + (float)(i % 3) / 4.0f));
            memcpy(src + (size_t)i * bb + d_at, &d, 2);
            if (q2)
                memcpy(src + (size_t)i * bb + 82, &dmin, 2);
        }
        gguf_qtype_to_f32(q2 ? GGML_Q2_K : GGML_Q3_K, src, want, (size_t)N * 256);
        double worst = 0.0;
        size_t inexact = 0, zero = 0;
        for (int i = 0; i < N; i++) {
            uint8_t q[256];
            uint16_t dm[16][2];
            gguf_q23_K_fold(src + (size_t)i * bb, q2, q, dm);
            for (int e = 0; e < 256; e++) {
                float d = llm_fp16_to_f32(dm[e / 16][0]), m = llm_fp16_to_f32(dm[e / 16][1]);
                float got = d * (float)q[e] - m, w = want[(size_t)i * 256 + e];
                /* the group's range: its largest |value| in the file, scale and min as ggml applies them */
                double range = q2 ? 3.0 * fabs(d) + fabs(m) : 4.0 * fabs(d);
                double err = fabs((double)got - (double)w) / (range > 0.0 ? range : 1.0);
                worst = err > worst ? err : worst;
                if (!q2 && got != d * (float)((int)q[e] - 4))
                    inexact++;
                zero += w == 0.0f;
                if (q[e] > (q2 ? 3 : 7))
                    worst = 1.0;
            }
        }
        ok(worst <= 4.9e-4 && inexact == 0 && zero < (size_t)N * 256 / 4,
           "%s folded to 3-bit quants with an fp16 (d, m) per 16: %d super-blocks, worst %.2g of a group's range, "
           "%zu values not d times the file's quant", q2 ? "q2_K" : "q3_K", N, worst, inexact);
        free(src);
        free(want);
    }
}

/* gguf_q4_1_row_to_q8_0: blocks whose min is -zero * scale rounded to fp16 (an AWQ / GPTQ group's, as
 * model_hf_intq.c writes them) come back as scale * (q - zero) exactly, the scale kept; a block with any other
 * min goes through floats, within half a Q8_0 step of ggml's value. */
static void test_q4_1_to_q8_0(void)
{
    enum { N = 64 };
    uint8_t src[N * 20];
    llm_block_q8_0 out[N];
    float want[N * 32];
    uint32_t x = 777;
    for (int i = 0; i < N; i++) {
        uint8_t *b = src + i * 20;
        float s = 1e-3f * (float)(1 + i % 13) * (i % 2 ? 1.0f : 0.37f);
        int zero = i % 16;
        uint16_t d = llm_f32_to_fp16(s), m = llm_f32_to_fp16(i < N - 4 ? -(float)zero * llm_fp16_to_f32(d)
                                                                          : 0.0123f * (float)(i - N + 5));
        memcpy(b, &d, 2);
        memcpy(b + 2, &m, 2);
        for (int j = 0; j < 16; j++) {
            x = x * 1103515245u + 12345u;
            b[4 + j] = (uint8_t)(x >> 16);
        }
    }
    gguf_qtype_to_f32(GGML_Q4_1, src, want, N * 32);
    gguf_q4_1_row_to_q8_0(src, out, N * 32);
    int exact = 1, kept = 1;
    double far = 0.0;
    for (int i = 0; i < N; i++) {
        const uint8_t *b = src + i * 20;
        float d = llm_fp16_to_f32(out[i].d);
        for (int e = 0; e < 32; e++) {
            int q = e < 16 ? b[4 + e] & 0xF : b[4 + e - 16] >> 4;
            float got = d * (float)out[i].qs[e];
            if (i < N - 4) {
                float s = llm_fp16_to_f32((uint16_t)(b[0] | b[1] << 8));
                exact &= got == s * (float)(q - i % 16);
                kept &= out[i].d == (uint16_t)(b[0] | b[1] << 8);
            } else {
                double err = fabs((double)got - (double)want[i * 32 + e]) / fabs((double)d);
                far = err > far ? err : far;
            }
        }
    }
    ok(exact && kept && far <= 0.5 + 1e-3, "q4_1 to q8_0: %d blocks of -zero * scale mins exact with their scale, "
       "4 others within %.3g of a Q8_0 step", N - 4, far);
}

int main(void)
{
    snprintf(tmp_path, sizeof(tmp_path), "/tmp/test_gguf_%d.gguf", (int)getpid());
    test_roundtrip(0);
    test_roundtrip(64);
    test_malformed();
    test_q23_K_fold();
    test_q4_1_to_q8_0();
    unlink(tmp_path);
    return done_testing();
}
