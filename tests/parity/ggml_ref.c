/* llama.cpp as the reference for the GGUF types we only read (engine/gguf_quants.h),
 * through the shared libraries node-llama-cpp ships (bench/llamacpp; no headers:
 * the few C entry points are declared here).
 *
 *   ggml_ref dequant LIBDIR
 *       TAP: for every read-only type, rows quantised by ggml's own quantiser
 *       (ggml_quantize_chunk) and rows of random block bytes are dequantised by
 *       ggml (dequantize_row_*) and by gguf_qtype_to_f32; the values must agree.
 *   ggml_ref quantize LIBDIR IN.gguf OUT.gguf FTYPE
 *       llama.cpp's model quantiser (llama_model_quantize), FTYPE a llama_ftype
 *       name (q4_K_M, q6_K, ...), to make test files the way users get them;
 *       FTYPE-layers (q4_K_M-layers): every layer matrix in its main type
 *       (llama-quantize --pure), the token embedding and output in q8_0. */
#include "gguf_quants.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef void (*dequant_fn)(const void *x, float *y, int64_t k);
typedef size_t (*quantize_chunk_fn)(int type, const float *src, void *dst, int64_t start, int64_t nrows,
                                    int64_t n_per_row, const float *imatrix);

static void *open_lib(const char *dir, const char *file)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL)
        fprintf(stderr, "ggml_ref: %s\n", dlerror());
    return h;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float next_unit(void) { return (float)(next_u32() & 0xffffff) / 16777216.0f; }

/* Where each type keeps its fp16 scales (byte offsets within a block), so that
 * random blocks get finite ones. */
static const struct { uint32_t type; int off[2]; } scale_at[] = {
    { GGML_Q4_1, { 0, 2 } }, { GGML_Q5_0, { 0, -1 } }, { GGML_Q5_1, { 0, 2 } }, { GGML_Q2_K, { 80, 82 } },
    { GGML_Q3_K, { 108, -1 } }, { GGML_Q4_K, { 0, 2 } }, { GGML_Q5_K, { 0, 2 } }, { GGML_Q6_K, { 208, -1 } },
    { GGML_IQ4_NL, { 0, -1 } }, { GGML_IQ4_XS, { 0, -1 } },
};

static int tests_run, tests_failed;
static void ok(int cond, const char *fmt, const char *a, const char *b)
{
    tests_run++;
    if (!cond)
        tests_failed++;
    printf("%s %d - ", cond ? "ok" : "not ok", tests_run);
    printf(fmt, a, b);
    printf("\n");
}

/* Largest |a - b| relative to the row's largest |b|; NaN when one is NaN and the other not. */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double m = 0, top = 0;
    for (size_t i = 0; i < n; i++)
        top = fmax(top, fabs(b[i]));
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i]))
            return NAN;
        if (!isnan(a[i]))
            m = fmax(m, fabs((double)a[i] - b[i]));
    }
    return top > 0 ? m / top : m;
}

static int dequant(const char *dir)
{
    void *base = open_lib(dir, "libggml-base.so");
    if (base == NULL)
        return 1;
    quantize_chunk_fn qchunk = (quantize_chunk_fn)dlsym(base, "ggml_quantize_chunk");
    static const uint32_t types[] = { GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q2_K, GGML_Q3_K,
                                      GGML_Q4_K, GGML_Q5_K, GGML_Q6_K, GGML_IQ4_NL, GGML_IQ4_XS };
    enum { ROWS = 64, COLS = 1024 };
    float *src = malloc(sizeof(float) * ROWS * COLS), *ref = malloc(sizeof(float) * COLS),
          *ours = malloc(sizeof(float) * COLS);
    uint8_t *q = malloc((size_t)ROWS * COLS * 2), *q8 = malloc(llm_dtype_row_bytes(LLM_Q8_0, COLS));
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        const char *name = gguf_qtype_name(types[t]);
        char sym[64];
        snprintf(sym, sizeof(sym), "dequantize_row_%s", name);
        dequant_fn ref_fn = (dequant_fn)dlsym(base, sym);
        if (ref_fn == NULL || qchunk == NULL) {
            ok(0, "%s: ggml exports %s", name, sym);
            continue;
        }
        size_t row = gguf_qtype_row_bytes(types[t], COLS);
        /* Weights like a trained model's: mostly small, some rows offset, a few outliers. */
        for (int r = 0; r < ROWS; r++) {
            float scale = 0.02f * (1 + r % 7), shift = r % 5 == 0 ? 0.01f * (float)(r % 3) : 0.0f;
            for (int c = 0; c < COLS; c++) {
                float g = (next_unit() + next_unit() + next_unit() - 1.5f) * 2.0f;
                src[r * COLS + c] = scale * g + shift + (next_u32() % 997 == 0 ? 0.5f : 0.0f);
            }
        }
        qchunk((int)types[t], src, q, 0, ROWS, COLS, NULL);
        double worst = 0, err_file = 0, err_loaded = 0;
        for (int r = 0; r < ROWS; r++) {
            ref_fn(q + r * row, ref, COLS);
            gguf_qtype_to_f32(types[t], q + r * row, ours, COLS);
            double d = rel_diff(ours, ref, COLS);
            worst = isnan(d) || isnan(worst) ? NAN : fmax(worst, d);
            /* What the loader keeps: the row re-quantised to Q8_0. */
            llm_row_from_f32(LLM_Q8_0, ours, q8, COLS);
            llm_row_to_f32(LLM_Q8_0, q8, ours, COLS);
            for (int c = 0; c < COLS; c++) {
                double x = src[r * COLS + c];
                err_file += (ref[c] - x) * (ref[c] - x);
                err_loaded += (ours[c] - x) * (ours[c] - x);
            }
        }
        char what[200];
        snprintf(what, sizeof(what), "max |ours - ggml| / max |ggml| = %.3g", worst);
        ok(worst <= 1e-6, "%s, quantised by ggml: %s", name, what);
        /* Re-quantising to Q8_0 adds little to the file's own rounding error. */
        double ratio = sqrt(err_loaded / err_file);
        snprintf(what, sizeof(what), "rms error vs the original floats: file %.3g, loaded as q8_0 %.3g (x%.4f)",
                 sqrt(err_file / (ROWS * COLS)), sqrt(err_loaded / (ROWS * COLS)), ratio);
        ok(ratio <= 1.06, "%s: %s", name, what);
        if (gguf_kq_written(types[t])) {
            /* Our own Q3_K / Q4_K / Q5_K writer (gen-model --dtype q3_K / q4_K / q5_K) on the same rows: ggml
             * reads its blocks as we do, and its rounding error against ggml's quantiser's (a weighted search;
             * ours a least-squares fit) */
            double fmt = 0, err_ours = 0;
            for (int r = 0; r < ROWS; r++) {
                gguf_row_from_f32(types[t], src + (size_t)r * COLS, q, COLS);
                ref_fn(q, ref, COLS);
                gguf_qtype_to_f32(types[t], q, ours, COLS);
                double d = rel_diff(ours, ref, COLS);
                fmt = isnan(d) || isnan(fmt) ? NAN : fmax(fmt, d);
                for (int c = 0; c < COLS; c++)
                    err_ours += (ours[c] - src[r * COLS + c]) * (ours[c] - src[r * COLS + c]);
            }
            snprintf(what, sizeof(what), "max |ours - ggml| / max |ggml| = %.3g", fmt);
            ok(fmt <= 1e-6, "%s written by gen-model, read by ggml: %s", name, what);
            snprintf(what, sizeof(what), "rms error %.3g, ggml's quantiser %.3g (x%.3f)",
                     sqrt(err_ours / (ROWS * COLS)), sqrt(err_file / (ROWS * COLS)), sqrt(err_ours / err_file));
            ok(sqrt(err_ours / err_file) <= 1.1, "%s written by gen-model: %s", name, what);
        }
        /* Random block bytes (every bit pattern of quants, scales and high bits), finite fp16 scales. */
        worst = 0;
        for (int r = 0; r < ROWS; r++) {
            for (size_t i = 0; i < row; i++)
                q[i] = (uint8_t)next_u32();
            size_t be = gguf_qtype_row_bytes(types[t], 32) != 0 ? 32 : LLM_QK_K, bb = row / (COLS / be);
            for (size_t s = 0; s < sizeof(scale_at) / sizeof(scale_at[0]); s++) {
                if (scale_at[s].type != types[t])
                    continue;
                for (size_t b = 0; b < COLS / be; b++)
                    for (int k = 0; k < 2; k++)
                        if (scale_at[s].off[k] >= 0) {
                            uint16_t h = llm_f32_to_fp16((next_unit() - 0.3f) * 0.01f);
                            memcpy(q + b * bb + (size_t)scale_at[s].off[k], &h, 2);
                        }
            }
            ref_fn(q, ref, COLS);
            gguf_qtype_to_f32(types[t], q, ours, COLS);
            double d = rel_diff(ours, ref, COLS);
            worst = isnan(d) || isnan(worst) ? NAN : fmax(worst, d);
        }
        snprintf(what, sizeof(what), "max |ours - ggml| / max |ggml| = %.3g", worst);
        ok(worst <= 1e-6, "%s, random blocks: %s", name, what);
    }
    free(src), free(ref), free(ours), free(q), free(q8);
    printf("1..%d\n", tests_run);
    return tests_failed != 0;
}

/* llama_ftype values (llama.h) of the file types users download. */
static const struct { const char *name; int ftype; } ftypes[] = {
    { "q4_1", 3 }, { "q8_0", 7 }, { "q5_0", 8 }, { "q5_1", 9 }, { "q2_K", 10 }, { "q3_K_S", 11 },
    { "q3_K_M", 12 }, { "q3_K_L", 13 }, { "q4_K_S", 14 }, { "q4_K_M", 15 }, { "q5_K_S", 16 },
    { "q5_K_M", 17 }, { "q6_K", 18 }, { "iq4_nl", 25 }, { "iq4_xs", 30 }, { "mxfp4_moe", 38 },
};

static int quantize(const char *dir, const char *in, const char *out, const char *ftype_arg)
{
    /* FTYPE-layers: every layer matrix in the file type's main type (llama-quantize --pure), the token
     * embedding and the output in q8_0 (--token-embedding-type / --output-tensor-type q8_0) */
    char ftype_name[64];
    snprintf(ftype_name, sizeof(ftype_name), "%s", ftype_arg);
    char *dash = strstr(ftype_name, "-layers");
    int pure = dash != NULL && dash[7] == '\0';
    if (pure)
        *dash = '\0';
    int ftype = -1;
    for (size_t i = 0; i < sizeof(ftypes) / sizeof(ftypes[0]); i++)
        if (strcasecmp(ftypes[i].name, ftype_name) == 0)
            ftype = ftypes[i].ftype;
    if (ftype < 0) {
        fprintf(stderr, "ggml_ref: unknown file type %s\n", ftype_name);
        return 2;
    }
    void *h = open_lib(dir, "libllama.v0.4.0.so");
    if (h == NULL)
        return 1;
    /* llama_model_quantize_params is returned by value; its first two fields
     * are int32 nthread and the ftype, the rest stays at llama.cpp's defaults.
     * The buffer is larger than the struct of any llama.cpp version. */
    typedef struct { _Alignas(16) unsigned char b[1024]; } params_buf;
    params_buf (*defaults)(void) = (params_buf(*)(void))dlsym(h, "llama_model_quantize_default_params");
    uint32_t (*quant)(const char *, const char *, const void *) =
        (uint32_t(*)(const char *, const char *, const void *))dlsym(h, "llama_model_quantize");
    void (*backend_init)(void) = (void (*)(void))dlsym(h, "llama_backend_init");
    if (defaults == NULL || quant == NULL) {
        fprintf(stderr, "ggml_ref: libllama lacks llama_model_quantize\n");
        return 1;
    }
    if (backend_init != NULL)
        backend_init();
    params_buf p = defaults();
    int32_t nthread = 2;
    memcpy(p.b, &nthread, 4);
    memcpy(p.b + 4, &ftype, 4);
    if (pure) {
        /* then: int32 output_tensor_type and token_embedding_type (both GGML_TYPE_COUNT by default), bools
         * allow_requantize (0), quantize_output_tensor (1), only_copy (0), pure (0): set pure only when the
         * defaults show that layout */
        int32_t ot, et;
        memcpy(&ot, p.b + 8, 4);
        memcpy(&et, p.b + 12, 4);
        if (ot != et || ot < 30 || ot > 100 || p.b[16] != 0 || p.b[17] != 1 || p.b[18] != 0 || p.b[19] != 0) {
            fprintf(stderr, "ggml_ref: this libllama's quantize parameters are not laid out as expected: no -layers\n");
            return 1;
        }
        const int32_t q8_0 = 8; /* ggml_type */
        memcpy(p.b + 8, &q8_0, 4);
        memcpy(p.b + 12, &q8_0, 4);
        p.b[19] = 1;
    }
    return quant(in, out, &p) != 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "dequant") == 0)
        return dequant(argv[2]);
    if (argc == 6 && strcmp(argv[1], "quantize") == 0)
        return quantize(argv[2], argv[3], argv[4], argv[5]);
    fprintf(stderr, "usage: ggml_ref dequant LIBDIR | ggml_ref quantize LIBDIR IN.gguf OUT.gguf FTYPE\n");
    return 2;
}
