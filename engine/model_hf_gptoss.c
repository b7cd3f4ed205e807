/* gpt-oss's Hugging Face directories (GptOssForCausalLM, model_type gpt_oss): its config and its mixture of
 * experts, in either of the two forms transformers reads:
 *  - MXFP4, as OpenAI ships gpt-oss-20b / -120b (quantization_config.quant_method "mxfp4"): per layer
 *    mlp.experts.gate_up_proj_blocks U8 [E][2 ff][dim / 32][16] and _scales U8 [E][2 ff][dim / 32], down_proj_*
 *    [E][dim][ff / 32](...): rows are output features; a block's byte i holds element 2i in its low nibble and
 *    2i + 1 in its high one (FP4 E2M1 codes), its scale byte is an E8M0 power of two (2^(s - 127));
 *  - unquantised (BF16 / F16 / F32, as transformers saves a dequantised model): gate_up_proj [E][dim][2 ff] and
 *    down_proj [E][ff][dim], the products' inputs first (x @ W);
 * gate and up interleaved in both: output feature 2j is gate row j, 2j + 1 up row j (transformers' gate_up[...,
 * ::2] and [..., 1::2]). The MXFP4 blocks are repacked into GGML's MXFP4 blocks (elements j and j + 16 in byte
 * j, the same scale byte; what llama.cpp's converter does), so they run as a GGUF's do; the unquantised ones
 * are transposed into our [rows][cols] matrices, their dtype kept. The biases: gate_up_proj_bias [E][2 ff] (the
 * same interleave), down_proj_bias [E][dim], the router's mlp.router.weight / bias. */
#include "model.h"
#include "model_priv.h"
#include "gguf_quants.h"
#include "parallel.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

int llm_hf_gptoss_config(llm_model *m, const cJSON *root, const char *path, llm_err *err)
{
    llm_config *c = &m->cfg;
    if (llm_hf_cfg_int(root, "num_local_experts", &c->n_expert, 0, 1, path, err) ||
        llm_hf_cfg_int(root, "num_experts_per_tok", &c->n_expert_used, 0, 0, path, err) ||
        (c->n_expert_used == 0 && llm_hf_cfg_int(root, "experts_per_token", &c->n_expert_used, 0, 1, path, err)))
        return -1;
    c->expert_ff = c->hidden_dim; /* intermediate_size: each expert's width */
    c->moe_norm_topk = 1;         /* the softmax of the chosen experts' logits */
    c->act = LLM_ACT_SWIGLU_OAI;
    float limit = llm_hf_cfg_float(root, "swiglu_limit", LLM_OAI_LIMIT);
    if (limit != LLM_OAI_LIMIT) {
        llm_seterr(err, "%s: swiglu_limit %g: gpt-oss's clamp is 7 (the only one supported)", path, (double)limit);
        return -1;
    }
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (!cJSON_IsNumber(sw) || sw->valuedouble < 1 || sw->valuedouble > (double)(1 << 30)) {
        llm_seterr(err, "%s: gpt-oss needs a sliding_window (its windowed layers')", path);
        return -1;
    }
    c->swa_window = (int)sw->valuedouble;
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(root, "attention_bias");
    if (bias != NULL && !cJSON_IsTrue(bias)) {
        llm_seterr(err, "%s: attention_bias false: gpt-oss's projections have biases", path);
        return -1;
    }
    return 0;
}

/* A tensor by name with its shape checked: dims dimensions of these sizes, U8 (u8) or a float type. */
static const st_tensor *take_shaped(const llm_model *m, const st_set *s, const char *name, int u8, int dims,
                                    const uint64_t *shape, llm_err *err)
{
    const st_tensor *t = st_set_find(s, name);
    int ok = t != NULL && t->kind == (u8 ? ST_U8 : ST_FLOAT) && t->n_dims == dims;
    for (int d = 0; ok && d < dims; d++)
        ok = t->shape[d] == shape[d];
    if (!ok) {
        char want[96];
        int n = 0;
        for (int d = 0; d < dims && n < (int)sizeof(want) - 24; d++)
            n += snprintf(want + n, sizeof(want) - (size_t)n, "%s%llu", d ? ", " : "", (unsigned long long)shape[d]);
        llm_seterr(err, "%s: tensor %s %s: gpt-oss needs %s [%s]", m->path, name, t == NULL ? "is missing"
                   : "has another type or shape", u8 ? "U8" : "a float type", want);
        return NULL;
    }
    return t;
}

/* GGML's MXFP4 block (scale byte, then elements j and j + 16 in byte j) from Hugging Face's (elements 2i and
 * 2i + 1 in byte i) and its scale. */
static void mxfp4_block(uint8_t *out, const uint8_t *hf, uint8_t scale)
{
    uint8_t v[32];
    for (int i = 0; i < 16; i++) {
        v[2 * i] = hf[i] & 0xF;
        v[2 * i + 1] = hf[i] >> 4;
    }
    out[0] = scale;
    for (int j = 0; j < 16; j++)
        out[1 + j] = (uint8_t)(v[j] | v[j + 16] << 4);
}

typedef struct {
    const uint8_t *src;   /* blocks: [E][R][nb][16] + scales [E][R][nb]; plain: [E][in][out] elements */
    const uint8_t *scales;
    uint8_t       *dst;   /* [E][parts][rows][...] */
    int64_t        e0, e1, R, cols;
    int            parts; /* 2: gate | up interleaved by rows (R = 2 rows), 1: as it is */
    size_t         es;    /* plain: element bytes */
} oss_job;

/* Expert e's rows, de-interleaved: output row r of part p is source row parts * r + p. */
static void *repack_blocks(void *arg)
{
    oss_job *j = arg;
    const int64_t nb = j->cols / 32, rows = j->R / j->parts;
    for (int64_t e = j->e0; e < j->e1; e++)
        for (int64_t sr = 0; sr < j->R; sr++) {
            int64_t p = sr % j->parts, r = sr / j->parts;
            uint8_t *o = j->dst + ((size_t)(e * j->parts + p) * (size_t)rows + (size_t)r) * (size_t)nb * 17;
            const uint8_t *b = j->src + ((size_t)e * (size_t)j->R + (size_t)sr) * (size_t)nb * 16;
            const uint8_t *sc = j->scales + ((size_t)e * (size_t)j->R + (size_t)sr) * (size_t)nb;
            for (int64_t k = 0; k < nb; k++)
                mxfp4_block(o + k * 17, b + k * 16, sc[k]);
        }
    return NULL;
}

/* Expert e's [in][R] matrix transposed into [R][in] rows, de-interleaved as repack_blocks'; in = cols. */
static void *transpose_plain(void *arg)
{
    oss_job *j = arg;
    const int64_t in = j->cols, rows = j->R / j->parts;
    const size_t es = j->es;
    enum { TILE = 64 }; /* (tiles: a column walk of gpt-oss-20b's experts would miss the cache on every element) */
    for (int64_t e = j->e0; e < j->e1; e++) {
        const uint8_t *w = j->src + (size_t)e * (size_t)in * (size_t)j->R * es;
        for (int64_t s0 = 0; s0 < j->R; s0 += TILE)
            for (int64_t i0 = 0; i0 < in; i0 += TILE)
                for (int64_t sr = s0; sr < s0 + TILE && sr < j->R; sr++) {
                    int64_t p = sr % j->parts, r = sr / j->parts;
                    uint8_t *o = j->dst + ((size_t)(e * j->parts + p) * (size_t)rows + (size_t)r) * (size_t)in * es;
                    for (int64_t i = i0; i < i0 + TILE && i < in; i++)
                        memcpy(o + (size_t)i * es, w + ((size_t)i * (size_t)j->R + (size_t)sr) * es, es);
                }
    }
    return NULL;
}

/* One kind of a layer's experts (which 0: gate_up_proj, R = 2 ff rows of dim, two parts; 1: down_proj, R = dim
 * rows of ff) into L->experts. */
static int take_kind(llm_model *m, const st_set *s, int l, llm_layer *L, int which, llm_err *err)
{
    const llm_config *c = &m->cfg;
    const int64_t E = c->n_expert, ff = c->expert_ff, dim = c->dim;
    const int64_t R = which == 0 ? 2 * ff : dim, cols = which == 0 ? dim : ff;
    const int parts = which == 0 ? 2 : 1;
    const char *kind = which == 0 ? "gate_up_proj" : "down_proj";
    char n[160], ns[160];
    snprintf(n, sizeof(n), "model.layers.%d.mlp.experts.%s_blocks", l, kind);
    int mx = st_set_find(s, n) != NULL;
    oss_job job = { .R = R, .cols = cols, .parts = parts };
    const st_tensor *t, *ts = NULL;
    size_t row_bytes;
    if (mx) {
        if (cols % 32 != 0) {
            llm_seterr(err, "%s: %s: MXFP4 rows of %lld are not whole blocks of 32", m->path, n, (long long)cols);
            return -1;
        }
        uint64_t shape[4] = { (uint64_t)E, (uint64_t)R, (uint64_t)cols / 32, 16 };
        snprintf(ns, sizeof(ns), "model.layers.%d.mlp.experts.%s_scales", l, kind);
        if ((t = take_shaped(m, s, n, 1, 4, shape, err)) == NULL || (ts = take_shaped(m, s, ns, 1, 3, shape, err)) == NULL)
            return -1;
        job.scales = ts->data;
        row_bytes = (size_t)cols / 32 * 17;
    } else {
        snprintf(n, sizeof(n), "model.layers.%d.mlp.experts.%s", l, kind);
        uint64_t shape[3] = { (uint64_t)E, (uint64_t)cols, (uint64_t)R }; /* inputs first */
        if ((t = take_shaped(m, s, n, 0, 3, shape, err)) == NULL)
            return -1;
        job.es = llm_dtype_block_bytes(t->type);
        row_bytes = (size_t)cols * job.es;
    }
    job.src = t->data;
    uint8_t *dst = malloc((size_t)E * (size_t)R * row_bytes);
    if (llm_model_own(m, dst, err) != 0)
        return -1;
    job.dst = dst;
    oss_job jobs[LLM_PARALLEL_MAX];
    int nj = llm_parallel_jobs((size_t)E, 1);
    for (int k = 0; k < nj; k++) {
        jobs[k] = job;
        jobs[k].e0 = E * k / nj;
        jobs[k].e1 = E * (k + 1) / nj;
    }
    llm_parallel_run(nj, mx ? repack_blocks : transpose_plain, jobs, sizeof(jobs[0]));
    const int64_t rows = R / parts;
    for (int64_t e = 0; e < E; e++)
        for (int p = 0; p < parts; p++) {
            llm_tensor *x = &L->experts[3 * e + (which == 0 ? p : 2)];
            const uint8_t *d = dst + (size_t)(e * parts + p) * (size_t)rows * row_bytes;
            if (mx) {
                if (llm_gguf_use_blocks(m, n, GGML_MXFP4, d, cols, rows, x, err) != 0)
                    return -1;
            } else {
                *x = (llm_tensor){ .type = t->type, .ne = { cols, rows }, .data = d };
            }
        }
    return 0;
}

/* The experts' biases as F32 [E][rows]: gate_up_proj_bias [E][2 ff] de-interleaved into gate's and up's,
 * down_proj_bias [E][dim]. */
static int take_biases(llm_model *m, const st_set *s, int l, llm_layer *L, llm_err *err)
{
    const llm_config *c = &m->cfg;
    const int64_t E = c->n_expert, ff = c->expert_ff, dim = c->dim;
    for (int which = 0; which < 2; which++) {
        char n[160];
        snprintf(n, sizeof(n), "model.layers.%d.mlp.experts.%s_bias", l, which == 0 ? "gate_up_proj" : "down_proj");
        const int64_t w = which == 0 ? 2 * ff : dim;
        uint64_t shape[2] = { (uint64_t)E, (uint64_t)w };
        const st_tensor *t = take_shaped(m, s, n, 0, 2, shape, err);
        if (t == NULL)
            return -1;
        float *f = malloc((size_t)(E * w) * sizeof(float));
        if (llm_model_own(m, f, err) != 0)
            return -1;
        float *row = which == 0 ? malloc((size_t)w * sizeof(float)) : NULL;
        if (which == 0 && row == NULL) {
            llm_seterr(err, "%s: out of memory", m->path);
            return -1;
        }
        size_t rb = llm_dtype_row_bytes(t->type, (uint64_t)w);
        for (int64_t e = 0; e < E; e++) {
            const uint8_t *src = (const uint8_t *)t->data + (size_t)e * rb;
            if (which == 1) {
                llm_row_to_f32(t->type, src, f + e * dim, (size_t)dim);
                continue;
            }
            llm_row_to_f32(t->type, src, row, (size_t)w);
            for (int64_t j = 0; j < ff; j++) { /* gate's [E][ff] first, then up's */
                f[e * ff + j] = row[2 * j];
                f[E * ff + e * ff + j] = row[2 * j + 1];
            }
        }
        free(row);
        if (which == 0) {
            L->exp_b[0] = (llm_tensor){ .type = LLM_F32, .ne = { ff, E }, .data = f };
            L->exp_b[1] = (llm_tensor){ .type = LLM_F32, .ne = { ff, E }, .data = f + E * ff };
        } else {
            L->exp_b[2] = (llm_tensor){ .type = LLM_F32, .ne = { dim, E }, .data = f };
        }
    }
    return 0;
}

int llm_hf_gptoss_experts(llm_model *m, const st_set *s, int l, llm_layer *L, llm_err *err)
{
    char n[160];
    snprintf(n, sizeof(n), "model.layers.%d.mlp.router.weight", l);
    if (llm_hf_take(m, s, n, &L->ffn_gate_inp, 1, err) != 0)
        return -1;
    snprintf(n, sizeof(n), "model.layers.%d.mlp.router.bias", l);
    if (llm_hf_take_norm(m, s, n, &L->ffn_gate_inp_b, err) != 0)
        return -1;
    L->experts = calloc((size_t)m->cfg.n_expert * 3, sizeof(llm_tensor));
    if (llm_model_own(m, L->experts, err) != 0)
        return -1;
    return take_kind(m, s, l, L, 0, err) || take_kind(m, s, l, L, 1, err) || take_biases(m, s, l, L, err) ? -1 : 0;
}
