/* FP8 Hugging Face checkpoints: quantization_config {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size":
 * [bo, bi]} (Qwen3-*-FP8, Qwen3-Coder-*-FP8 and the other block-wise FP8 releases, as transformers' FP8
 * integration and vLLM read them): each quantised Linear's weight is F8_E4M3 [out][in] beside its
 * weight_scale_inv, F32 or BF16 [ceil(out / bo)][ceil(in / bi)]: weight = fp8 value * the scale of its block.
 * compressed-tensors' float-quantized (RedHatAI's *-FP8 and *-FP8-dynamic) is the same with weight_scale, per
 * output channel [out, 1], per tensor [1], or per block.
 * Dequantised at load into owned BF16 matrices (the product rounded once, to nearest even), which every product
 * path runs; twice the file's bytes in memory. The layers' norms, the embedding and the head stay as stored. */
#include "model.h"
#include "model_priv.h"
#include "parallel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    const uint8_t *w;       /* [rows][cols] E4M3 */
    const void    *scale;   /* [sr][sc] of type st */
    llm_dtype      st;
    int64_t        cols, sc, bo, bi, r0, r1;
    uint16_t      *out;     /* [rows][cols] BF16 */
    int            bad;     /* a NaN code, or a scale that is not finite */
} fp8_job;

/* The E4M3 codes' values: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 subnormal; S.1111.111
 * NaN (there is no infinity). */
static float e4m3_value(uint8_t b)
{
    int e = (b >> 3) & 15, mant = b & 7;
    float v = e == 0 ? ldexpf((float)mant / 8.0f, -6) : ldexpf(1.0f + (float)mant / 8.0f, e - 7);
    if (e == 15 && mant == 7)
        v = NAN;
    return b & 0x80 ? -v : v;
}

static void *fp8_rows(void *arg)
{
    fp8_job *j = arg;
    float lut[256], *row = malloc((size_t)j->cols * sizeof(float)), *sc = malloc((size_t)j->sc * sizeof(float));
    if (row == NULL || sc == NULL) {
        j->bad = 2;
        free(row);
        free(sc);
        return NULL;
    }
    for (int i = 0; i < 256; i++)
        lut[i] = e4m3_value((uint8_t)i);
    const size_t srb = llm_dtype_row_bytes(j->st, (uint64_t)j->sc);
    for (int64_t r = j->r0; r < j->r1; r++) {
        llm_row_to_f32(j->st, (const uint8_t *)j->scale + (size_t)(r / j->bo) * srb, sc, (size_t)j->sc);
        const uint8_t *w = j->w + (size_t)r * (size_t)j->cols;
        for (int64_t c = 0; c < j->cols; c++) {
            float s = sc[c / j->bi], v = lut[w[c]];
            if (!isfinite(s) || v != v)
                j->bad = 1;
            row[c] = v * s;
        }
        llm_row_from_f32(LLM_BF16, row, j->out + (size_t)r * (size_t)j->cols, (size_t)j->cols);
    }
    free(row);
    free(sc);
    return NULL;
}

int llm_hf_fp8_take(llm_model *m, const char *name, const st_tensor *t, const st_tensor *scale, const int *block,
                    llm_tensor *dst, llm_err *err)
{
    if (m->hfq.method != LLM_HFQ_FP8 && m->hfq.method != LLM_HFQ_CT) {
        llm_seterr(err, "%s: tensor %s is F8_E4M3 but config.json has no fp8 quantization_config", m->path, name);
        return -1;
    }
    if (t->n_dims != 2) {
        llm_seterr(err, "%s: FP8 tensor %s must be 2-D", m->path, name);
        return -1;
    }
    const int64_t rows = (int64_t)t->shape[0], cols = (int64_t)t->shape[1];
    int64_t bo = rows, bi = cols; /* one scale (compressed-tensors' per tensor: [1], [] or [1, 1]) */
    if (block != NULL) {
        bo = block[0];
        bi = block[1];
    } else if (scale != NULL && scale->n_dims == 2 && scale->shape[0] > 0 && scale->shape[1] > 0) {
        bo = (rows + (int64_t)scale->shape[0] - 1) / (int64_t)scale->shape[0];
        bi = (cols + (int64_t)scale->shape[1] - 1) / (int64_t)scale->shape[1];
    }
    const uint64_t sr = (uint64_t)((rows + bo - 1) / bo), sc = (uint64_t)((cols + bi - 1) / bi);
    uint64_t scale_n = 1;
    for (int d = 0; scale != NULL && d < scale->n_dims; d++)
        scale_n *= scale->shape[d];
    int shape_ok = scale != NULL && (scale->n_dims == 2 ? scale->shape[0] == sr && scale->shape[1] == sc
                                                        : block == NULL && scale->n_dims <= 1 && scale_n == 1);
    if (!shape_ok || !st_is_float(scale) || (scale->type != LLM_F32 && scale->type != LLM_BF16)) {
        if (block != NULL)
            llm_seterr(err, "%s: FP8 tensor %s needs %s_scale_inv, F32 or BF16 [%llu, %llu] (blocks of %lld x %lld)",
                       m->path, name, name, (unsigned long long)sr, (unsigned long long)sc, (long long)bo,
                       (long long)bi);
        else
            llm_seterr(err, "%s: FP8 tensor %s needs its weight_scale, F32 or BF16: [%lld, 1] per channel, [1] per "
                       "tensor, or per block", m->path, name, (long long)rows);
        return -1;
    }
    uint16_t *out = malloc((size_t)rows * (size_t)cols * sizeof(uint16_t));
    if (llm_model_own(m, out, err) != 0)
        return -1;
    fp8_job jobs[LLM_PARALLEL_MAX];
    int nj = llm_parallel_jobs((size_t)rows, 64), bad = 0;
    for (int k = 0; k < nj; k++)
        jobs[k] = (fp8_job){ t->data, scale->data, scale->type, cols, (int64_t)sc, bo, bi, rows * k / nj,
                             rows * (k + 1) / nj, out, 0 };
    llm_parallel_run(nj, fp8_rows, jobs, sizeof(jobs[0]));
    for (int k = 0; k < nj; k++)
        bad = jobs[k].bad > bad ? jobs[k].bad : bad;
    if (bad) {
        llm_seterr(err, bad == 2 ? "%s: out of memory dequantising %s" : "%s: FP8 tensor %s holds a NaN code or a "
                   "scale that is not finite", m->path, name);
        return -1;
    }
    *dst = (llm_tensor){ .type = LLM_BF16, .ne = { cols, rows }, .data = out };
    m->hfq.n_fp8++;
    return 0;
}
