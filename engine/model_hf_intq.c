/* Integer weight-only checkpoints: a Linear's weight as GPTQ, AWQ or compressed-tensors store it, repacked at load
 * into the engine's own block types, which every backend runs (the CPU's packed Q4_0 / Q8_0 kernels, the CUDA
 * backend's fused-dequantisation GEMV):
 *  - GPTQ: qweight I32 [in * bits / 32][out] (packed along the input), qzeros I32 [groups][out * bits / 32],
 *    scales [groups][out], g_idx I32 [in] (each input's group; act-order permutes them);
 *  - AWQ (GEMM): qweight I32 [in][out / 8] and qzeros I32 [groups][out / 8], packed along the output in the
 *    order 0 2 4 6 1 3 5 7, scales [groups][out];
 *  - compressed-tensors pack-quantized: weight_packed I32 [out][in * bits / 32] (offset by 2^(bits-1)),
 *    weight_scale [out][groups], weight_zero_point I32 [out * bits / 32][groups] when asymmetric (also offset),
 *    weight_g_idx I32 [in]; int-quantized: weight I8 [out][in], weight_scale, weight_zero_point I8.
 * Every one of them means weight = scale * (q - zero), the scale and zero of the weight's group. Each 32-weight
 * block of a row becomes one Q4_0 block (4-bit symmetric checkpoints: q - zero in -8..7) or Q8_0 block (the
 * others: 8-bit, or asymmetric 4-bit, whose q - zero spans -15..15), the block's scale the group's, when all 32
 * share one scale that fp16 holds and q - zero fits: then every weight is carried exactly. A block that does not
 * (act-order groups crossing it, scales fp16 cannot hold) is re-quantised from its float weights, and counted
 * (info: "re-quantised"). The memory is the block type's: 4.5 bits a weight for Q4_0, 8.5 for Q8_0. */
#include "model.h"
#include "gguf_quants.h"
#include "model_priv.h"
#include "parallel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FMT_GPTQ, FMT_AWQ, FMT_CT_PACK, FMT_CT_INT8 };

typedef struct {
    int            fmt, bits;
    int64_t        rows, cols, groups, group; /* out, in; groups; columns per group without g_idx */
    const uint8_t *q, *zero;                  /* packed (I32) or I8 values; zero NULL: symmetric */
    const uint8_t *g_idx;                     /* I32 [cols] or NULL */
    const uint8_t *scale;
    llm_dtype      scale_type;
    int            scale_scalar;              /* compressed-tensors' per-tensor scale */
    int            zero_fixed, zero_plus;     /* symmetric: the zero; GPTQ v1: stored zeros are one less */
    llm_dtype      out_type;                  /* LLM_Q4_0 or LLM_Q8_0 */
    int            q4_1;                      /* instead, Q4_1 blocks (below) */
} intq_src;

static uint32_t ld32(const uint8_t *p, int64_t i)
{
    uint32_t v;
    memcpy(&v, p + 4 * i, 4);
    return v;
}

static float scale_at(const intq_src *s, int64_t i)
{
    if (s->scale_scalar)
        i = 0;
    if (s->scale_type == LLM_F32) {
        float f;
        memcpy(&f, s->scale + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, s->scale + 2 * i, 2);
    return s->scale_type == LLM_F16 ? llm_fp16_to_f32(h) : llm_bf16_to_f32(h);
}

/* The value (bits wide) at index i of a packed run: word i / (32 / bits), field i % (32 / bits), low first. */
static int packed_at(const uint8_t *p, int64_t i, int bits)
{
    int pf = 32 / bits;
    return (int)(ld32(p, i / pf) >> (bits * (int)(i % pf)) & ((1u << bits) - 1));
}

/* AWQ's packing: output column 8j + c sits in field awq_field[c] of word j. */
static const int awq_field[8] = { 0, 4, 1, 5, 2, 6, 3, 7 };

/* Row r (an output) as integers v (q - zero) and each weight's scale sc; the number of the weights' groups out of
 * range (a bad g_idx) as a negative return. */
static int decode_row(const intq_src *s, int64_t r, int32_t *v, float *sc, int32_t *zero)
{
    const int64_t rows = s->rows, cols = s->cols, pf = 32 / s->bits;
    for (int64_t i = 0; i < cols; i++) {
        int64_t g = s->g_idx != NULL ? (int64_t)(int32_t)ld32(s->g_idx, i) : s->group > 0 ? i / s->group : 0;
        if (g < 0 || g >= s->groups)
            return -1;
        int q, z = s->zero_fixed;
        switch (s->fmt) {
        case FMT_GPTQ: /* [in / pf][out], input i in field i % pf */
            q = (int)(ld32(s->q, (i / pf) * rows + r) >> (s->bits * (int)(i % pf)) & ((1u << s->bits) - 1));
            if (s->zero != NULL)
                z = packed_at(s->zero, g * rows + r, s->bits) + s->zero_plus;
            sc[i] = scale_at(s, g * rows + r);
            break;
        case FMT_AWQ: /* [in][out / 8] */
            q = (int)(ld32(s->q, i * (rows / 8) + r / 8) >> (4 * awq_field[r % 8]) & 15);
            z = (int)(ld32(s->zero, g * (rows / 8) + r / 8) >> (4 * awq_field[r % 8]) & 15);
            sc[i] = scale_at(s, g * rows + r);
            break;
        case FMT_CT_PACK: { /* [out][in / pf]; zero points [out / pf][groups], packed along the outputs */
            int64_t words = (cols + pf - 1) / pf;
            q = packed_at(s->q + 4 * r * words, i, s->bits);
            if (s->zero != NULL)
                z = (int)(ld32(s->zero, (r / pf) * s->groups + g) >> (s->bits * (int)(r % pf)) &
                          ((1u << s->bits) - 1));
            sc[i] = scale_at(s, r * s->groups + g);
            break;
        }
        default: /* FMT_CT_INT8: [out][in] signed */
            q = (int8_t)s->q[r * cols + i];
            if (s->zero != NULL)
                z = (int8_t)s->zero[r * s->groups + g];
            sc[i] = scale_at(s, r * s->groups + g);
            break;
        }
        v[i] = q - z;
        if (zero != NULL)
            zero[i] = z;
    }
    return 0;
}

typedef struct {
    const intq_src *s;
    int64_t         r0, r1;
    uint8_t        *out;
    long long       requant;
    int             bad;    /* 1 a group index out of range, 2 a scale that is not finite, 3 out of memory */
} intq_job;

/* A 32-weight block as the output type: exactly when its weights share one scale fp16 holds and their integers
 * fit the type; else re-quantised from the floats (1 returned). */
static int emit_block(llm_dtype t, const int32_t *v, const float *sc, void *dst)
{
    const int lo = t == LLM_Q4_0 ? -8 : -127, hi = t == LLM_Q4_0 ? 7 : 127;
    const uint16_t h = llm_f32_to_fp16(sc[0]);
    int exact = llm_fp16_to_f32(h) == sc[0];
    for (int k = 0; exact && k < LLM_QK; k++)
        exact = sc[k] == sc[0] && v[k] >= lo && v[k] <= hi;
    if (!exact) {
        float w[LLM_QK];
        for (int k = 0; k < LLM_QK; k++)
            w[k] = (float)v[k] * sc[k];
        llm_row_from_f32(t, w, dst, LLM_QK);
        return 1;
    }
    if (t == LLM_Q4_0) {
        llm_block_q4_0 *b = dst;
        b->d = h;
        for (int k = 0; k < LLM_QK / 2; k++)
            b->qs[k] = (uint8_t)((v[k] + 8) | (v[k + LLM_QK / 2] + 8) << 4);
    } else {
        llm_block_q8_0 *b = dst;
        b->d = h;
        for (int k = 0; k < LLM_QK; k++)
            b->qs[k] = (int8_t)v[k];
    }
    return 0;
}

/* A 32-weight block of one group as ggml's Q4_1 (fp16 d and m, 16 bytes of nibbles; x = d * q + m): d the
 * scale, m -zero * scale rounded to fp16 (the only rounding: 2^-11 of it). */
static void emit_q4_1(const int32_t *v, const float *sc, const int32_t *zero, uint8_t *b)
{
    uint16_t d = llm_f32_to_fp16(sc[0]), m = llm_f32_to_fp16(-(float)zero[0] * sc[0]);
    memcpy(b, &d, 2);
    memcpy(b + 2, &m, 2);
    for (int k = 0; k < LLM_QK / 2; k++)
        b[4 + k] = (uint8_t)((v[k] + zero[k]) | (v[k + LLM_QK / 2] + zero[k + LLM_QK / 2]) << 4);
}

static void *intq_rows(void *arg)
{
    intq_job *j = arg;
    const intq_src *s = j->s;
    int32_t *v = malloc((size_t)s->cols * sizeof(int32_t)), *zero = malloc((size_t)s->cols * sizeof(int32_t));
    float *sc = malloc((size_t)s->cols * sizeof(float));
    const size_t rb = s->q4_1 ? (size_t)s->cols / LLM_QK * 20 : llm_dtype_row_bytes(s->out_type, (uint64_t)s->cols),
                 bb = s->q4_1 ? 20 : llm_dtype_row_bytes(s->out_type, LLM_QK);
    for (int64_t r = j->r0; r < j->r1 && !j->bad; r++) {
        if (v == NULL || sc == NULL || zero == NULL) {
            j->bad = 3;
            break;
        }
        if (decode_row(s, r, v, sc, zero) != 0) {
            j->bad = 1;
            break;
        }
        for (int64_t i = 0; i < s->cols; i++)
            if (!isfinite(sc[i]))
                j->bad = 2;
        for (int64_t b = 0; b < s->cols / LLM_QK && !j->bad; b++) {
            uint8_t *o = j->out + (size_t)r * rb + b * bb;
            if (s->q4_1)
                emit_q4_1(v + b * LLM_QK, sc + b * LLM_QK, zero + b * LLM_QK, o);
            else
                j->requant += emit_block(s->out_type, v + b * LLM_QK, sc + b * LLM_QK, o);
        }
    }
    free(v);
    free(zero);
    free(sc);
    return NULL;
}

/* 1 when every 32-weight block of the rows lies in one group (its scale and zero shared). */
static int blocks_in_groups(const intq_src *s)
{
    for (int64_t i = 0; i < s->cols; i++) {
        int64_t g = s->g_idx != NULL ? (int64_t)(int32_t)ld32(s->g_idx, i) : s->group > 0 ? i / s->group : 0,
                g0 = s->g_idx != NULL ? (int64_t)(int32_t)ld32(s->g_idx, i - i % LLM_QK)
                                      : s->group > 0 ? (i - i % LLM_QK) / s->group : 0;
        if (g != g0)
            return 0;
    }
    return 1;
}

/* "<base>.<suffix>" of a Linear whose weight is base.weight. */
static const st_tensor *part(const st_set *set, const char *base, const char *suffix)
{
    char n[240];
    snprintf(n, sizeof(n), "%s.%s", base, suffix);
    return llm_hf_find(set, n);
}

static int is2d(const st_tensor *t, st_kind kind)
{
    return t != NULL && t->kind == kind && t->n_dims == 2 && t->shape[0] > 0 && t->shape[1] > 0;
}

static int scale_ok(const st_tensor *t, uint64_t d0, uint64_t d1)
{
    return t != NULL && st_is_float(t) && t->n_dims == 2 && t->shape[0] == d0 && t->shape[1] == d1;
}

/* The parts of GPTQ / AWQ / compressed-tensors' Linear base into *s; 0 when it has none of them, 1 found and
 * checked, -1 + err. */
static int find_parts(llm_model *m, const st_set *set, const char *base, const char *name, intq_src *s, llm_err *err)
{
    const int bits = m->hfq.bits > 0 ? m->hfq.bits : 8, pf = 32 / bits; /* (0: no integer scheme configured) */
    const st_tensor *qw, *qz, *sc, *gi;
    memset(s, 0, sizeof(*s));
    s->bits = bits;
    if (m->hfq.method != LLM_HFQ_CT && (qw = part(set, base, "qweight")) != NULL) {
        qz = part(set, base, "qzeros");
        sc = part(set, base, "scales");
        gi = part(set, base, "g_idx");
        int awq = m->hfq.method == LLM_HFQ_AWQ;
        s->fmt = awq ? FMT_AWQ : FMT_GPTQ;
        if (!is2d(qw, ST_I32) || sc == NULL || sc->n_dims != 2) {
            llm_seterr(err, "%s: %s.qweight needs I32 [%s] and %s.scales [groups, out]", m->path, base,
                       awq ? "in, out / 8" : "in * bits / 32, out", base);
            return -1;
        }
        s->rows = awq ? (int64_t)qw->shape[1] * 8 : (int64_t)qw->shape[1];
        s->cols = awq ? (int64_t)qw->shape[0] : (int64_t)qw->shape[0] * pf;
        s->groups = (int64_t)sc->shape[0];
        int zeros_ok = is2d(qz, ST_I32) && qz->shape[0] == (uint64_t)s->groups &&
                       qz->shape[1] * (uint64_t)pf == (uint64_t)s->rows;
        if (!scale_ok(sc, (uint64_t)s->groups, (uint64_t)s->rows) || !zeros_ok) {
            llm_seterr(err, "%s: %s: qweight [%llu, %llu] needs scales [groups, %lld] and qzeros I32 [groups, %lld]",
                       m->path, base, (unsigned long long)qw->shape[0], (unsigned long long)qw->shape[1],
                       (long long)s->rows, (long long)s->rows / pf);
            return -1;
        }
        s->q = qw->data;
        s->zero = qz->data;
        s->zero_plus = !awq && m->hfq.zeros_v1;
        s->g_idx = gi != NULL && !awq ? gi->data : NULL;
        if (gi != NULL && !awq && (gi->kind != ST_I32 || gi->n_dims != 1 || gi->shape[0] != (uint64_t)s->cols)) {
            llm_seterr(err, "%s: %s.g_idx must be I32 [%lld]", m->path, base, (long long)s->cols);
            return -1;
        }
    } else if (m->hfq.method == LLM_HFQ_CT && ((qw = part(set, base, "weight_packed")) != NULL ||
                                               ((qw = llm_hf_find(set, name)) != NULL && qw->kind == ST_I8))) {
        int packed = qw->kind != ST_I8;
        s->fmt = packed ? FMT_CT_PACK : FMT_CT_INT8;
        sc = part(set, base, "weight_scale");
        qz = part(set, base, "weight_zero_point");
        gi = part(set, base, "weight_g_idx");
        if (packed ? !is2d(qw, ST_I32) || m->hfq.bits == 0 : !is2d(qw, ST_I8)) {
            llm_seterr(err, "%s: %s: a quantised weight is 2-D, weight_packed I32 (under an integer scheme in "
                       "config_groups) or weight I8", m->path, base);
            return -1;
        }
        s->bits = packed ? bits : 8;
        s->q = qw->data;
        s->rows = (int64_t)qw->shape[0];
        s->cols = (int64_t)qw->shape[1] * (packed ? 32 / s->bits : 1);
        uint64_t sn = 1;
        for (int d = 0; sc != NULL && d < sc->n_dims; d++)
            sn *= sc->shape[d];
        s->scale_scalar = sc != NULL && sc->n_dims <= 1 && sn == 1;
        s->groups = s->scale_scalar ? 1 : sc != NULL && sc->n_dims == 2 ? (int64_t)sc->shape[1] : 0;
        if (sc == NULL || !st_is_float(sc) ||
            !(s->scale_scalar || (s->groups > 0 && scale_ok(sc, (uint64_t)s->rows, (uint64_t)s->groups) &&
                                  s->cols % s->groups == 0))) {
            llm_seterr(err, "%s: %s needs weight_scale [%lld, groups] (groups dividing its %lld columns) or [1]",
                       m->path, base, (long long)s->rows, (long long)s->cols);
            return -1;
        }
        if (qz != NULL) {
            int zok = packed ? is2d(qz, ST_I32) && qz->shape[0] == (uint64_t)((s->rows + pf - 1) / pf) &&
                                   qz->shape[1] == (uint64_t)s->groups
                             : is2d(qz, ST_I8) && qz->shape[0] == (uint64_t)s->rows &&
                                   qz->shape[1] == (uint64_t)s->groups;
            if (!zok || s->scale_scalar) {
                llm_seterr(err, "%s: %s.weight_zero_point must be %s [%lld, %lld]", m->path, base,
                           packed ? "I32" : "I8", (long long)(packed ? (s->rows + pf - 1) / pf : s->rows),
                           (long long)s->groups);
                return -1;
            }
            s->zero = qz->data;
        }
        /* (the packed values and zero points are stored offset by 2^(bits-1): cancelled by the difference) */
        s->zero_fixed = packed && qz == NULL ? 1 << (s->bits - 1) : 0;
        s->g_idx = gi != NULL ? gi->data : NULL;
        if (gi != NULL && (gi->kind != ST_I32 || gi->n_dims != 1 || gi->shape[0] != (uint64_t)s->cols)) {
            llm_seterr(err, "%s: %s.weight_g_idx must be I32 [%lld]", m->path, base, (long long)s->cols);
            return -1;
        }
    } else {
        return 0;
    }
    s->scale = sc->data;
    s->scale_type = sc->type;
    s->group = s->groups > 0 ? (s->cols + s->groups - 1) / s->groups : s->cols;
    if (s->fmt <= FMT_AWQ && s->g_idx == NULL) { /* GPTQ / AWQ: groups of group_size columns (0: one) */
        int64_t want = m->hfq.group > 0 ? (s->cols + m->hfq.group - 1) / m->hfq.group : 1;
        if (s->groups != want) {
            llm_seterr(err, "%s: %s has %lld groups of scales; %lld columns in groups of %d make %lld", m->path, base,
                       (long long)s->groups, (long long)s->cols, m->hfq.group, (long long)want);
            return -1;
        }
        s->group = m->hfq.group > 0 ? m->hfq.group : s->cols;
    }
    if (s->cols % LLM_QK != 0) {
        llm_seterr(err, "%s: %s has rows of %lld weights: repacking needs a multiple of %d", m->path, base,
                   (long long)s->cols, LLM_QK);
        return -1;
    }
    /* 4-bit symmetric: Q4_0; the rest Q8_0 */
    s->out_type = s->bits == 4 && (s->fmt == FMT_CT_PACK ? s->zero == NULL : s->fmt == FMT_GPTQ && m->hfq.sym)
                      ? LLM_Q4_0 : LLM_Q8_0;
    /* Asymmetric 4-bit for a backend that takes blocks (LLM_LOAD_DEFER_KQ): ggml's Q4_1, which the CUDA backend
     * uploads as its own 5-bit-a-weight type where Q8_0 takes 8.5; any other backend gets Q8_0 converted from
     * them, each block's scale kept (gguf_q4_1_row_to_q8_0): the same values as the Q8_0 above. */
    s->q4_1 = m->defer_kq && s->out_type == LLM_Q8_0 && s->bits == 4 && blocks_in_groups(s);
    return 1;
}

int llm_hf_intq_take(llm_model *m, const st_set *set, const char *name, llm_tensor *dst, llm_err *err)
{
    size_t n = strlen(name);
    char base[200];
    if (n < 8 || n >= sizeof(base) || strcmp(name + n - 7, ".weight") != 0)
        return 0;
    memcpy(base, name, n - 7);
    base[n - 7] = '\0';
    intq_src s;
    int rc = find_parts(m, set, base, name, &s, err);
    if (rc <= 0)
        return rc;
    const size_t rb = s.q4_1 ? (size_t)s.cols / LLM_QK * 20 : llm_dtype_row_bytes(s.out_type, (uint64_t)s.cols);
    uint8_t *out = malloc((size_t)s.rows * rb);
    if (llm_model_own(m, out, err) != 0)
        return -1;
    intq_job jobs[LLM_PARALLEL_MAX];
    int nj = llm_parallel_jobs((size_t)s.rows, 32), bad = 0;
    for (int k = 0; k < nj; k++)
        jobs[k] = (intq_job){ &s, s.rows * k / nj, s.rows * (k + 1) / nj, out, 0, 0 };
    llm_parallel_run(nj, intq_rows, jobs, sizeof(jobs[0]));
    for (int k = 0; k < nj; k++) {
        bad = jobs[k].bad > bad ? jobs[k].bad : bad;
        m->hfq.n_requant += jobs[k].requant;
    }
    if (bad) {
        static const char *const why[] = { "", "a g_idx group out of range", "a scale that is not finite",
                                           "no memory to decode its rows" };
        llm_seterr(err, "%s: %s: %s", m->path, base, why[bad]);
        return -1;
    }
    m->hfq.n_blocks += (long long)s.rows * (s.cols / LLM_QK);
    if (s.q4_1) {
        m->hfq.n_q4_1++;
        return llm_gguf_use_blocks(m, name, GGML_Q4_1, out, s.cols, s.rows, dst, err) == 0 ? 1 : -1;
    }
    if (s.out_type == LLM_Q4_0)
        m->hfq.n_q4_0++;
    else
        m->hfq.n_q8_0++;
    *dst = (llm_tensor){ .type = s.out_type, .ne = { s.cols, s.rows }, .data = out };
    return 1;
}
