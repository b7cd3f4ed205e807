/* gpt-oss as a Hugging Face directory (GptOssForCausalLM, what model_hf_gptoss.c reads): its config keys and
 * its experts, as MXFP4 blocks and scales where every expert matrix came as MXFP4 (the file's blocks, repacked
 * back: lossless, as OpenAI ships the model), else unquantised in the directory's dtype ([E][dim][2 ff] and
 * [E][ff][dim], inputs first, gate and up interleaved: transformers' layout). */
#include "model.h"
#include "model_priv.h"
#include "gguf_quants.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

/* 1 when every expert matrix kept the file's MXFP4 blocks (src). */
int llm_hf_gptoss_mx(const llm_model *m)
{
    const llm_config *c = &m->cfg;
    for (int l = 0; l < c->n_layers; l++)
        for (int i = 0; llm_layer_moe(c, &m->layers[l]) && i < 3 * c->n_expert; i++) {
            const llm_tensor *t = &m->layers[l].experts[i];
            if (t->src == NULL || t->src_type != GGML_MXFP4 || t->ne[0] % 32 != 0)
                return 0;
        }
    return 1;
}

void llm_hf_gptoss_config_json(cJSON *j, const llm_model *m, int mx)
{
    const llm_config *c = &m->cfg;
    cJSON_AddNumberToObject(j, "num_local_experts", c->n_expert);
    cJSON_AddNumberToObject(j, "experts_per_token", c->n_expert_used);
    cJSON_AddNumberToObject(j, "sliding_window", c->swa_window);
    cJSON *lt = cJSON_AddArrayToObject(j, "layer_types");
    for (int l = 0; l < c->n_layers; l++)
        cJSON_AddItemToArray(lt, cJSON_CreateString(m->layers[l].swa ? "sliding_attention" : "full_attention"));
    cJSON_AddNumberToObject(j, "swiglu_limit", LLM_OAI_LIMIT);
    cJSON_AddStringToObject(j, "hidden_act", "silu");
    if (mx) { /* as openai/gpt-oss-20b's */
        cJSON *q = cJSON_AddObjectToObject(j, "quantization_config");
        cJSON_AddStringToObject(q, "quant_method", "mxfp4");
        cJSON *keep = cJSON_AddArrayToObject(q, "modules_to_not_convert");
        static const char *const not_mx[] = { "model.layers.*.self_attn", "model.layers.*.mlp.router",
                                              "model.embed_tokens", "lm_head" };
        for (size_t i = 0; i < sizeof(not_mx) / sizeof(not_mx[0]); i++)
            cJSON_AddItemToArray(keep, cJSON_CreateString(not_mx[i]));
    }
}

/* The entry kinds (LLM_HF_OSS_*): their safetensors dtype (NULL: the directory's), shape and bytes. */
uint64_t llm_hf_gptoss_shape(const llm_model *m, int kind, llm_dtype dtype, uint64_t *shape, int *nd,
                             const char **st)
{
    const llm_config *c = &m->cfg;
    const uint64_t E = (uint64_t)c->n_expert, ff = (uint64_t)c->expert_ff, dim = (uint64_t)c->dim;
    const uint64_t R = kind == LLM_HF_OSS_DOWN_BLOCKS || kind == LLM_HF_OSS_DOWN_SCALES ? dim : 2 * ff;
    const uint64_t nb = (kind == LLM_HF_OSS_DOWN_BLOCKS || kind == LLM_HF_OSS_DOWN_SCALES ? ff : dim) / 32;
    size_t es = llm_dtype_block_bytes(dtype);
    *st = "U8";
    switch (kind) {
    case LLM_HF_OSS_GU:
    case LLM_HF_OSS_DOWN:
        *st = NULL; /* (the directory's dtype) */
        *nd = 3;
        shape[0] = E;
        shape[1] = kind == LLM_HF_OSS_GU ? dim : ff;
        shape[2] = kind == LLM_HF_OSS_GU ? 2 * ff : dim;
        return E * dim * (kind == LLM_HF_OSS_GU ? 2 * ff : ff) * es;
    case LLM_HF_OSS_GU_BIAS:
        *st = NULL; /* (the directory's dtype) */
        *nd = 2;
        shape[0] = E;
        shape[1] = 2 * ff;
        return E * 2 * ff * es;
    case LLM_HF_OSS_GU_BLOCKS:
    case LLM_HF_OSS_DOWN_BLOCKS:
        *nd = 4;
        shape[0] = E, shape[1] = R, shape[2] = nb, shape[3] = 16;
        return E * R * nb * 16;
    default: /* scales */
        *nd = 3;
        shape[0] = E, shape[1] = R, shape[2] = nb;
        return E * R * nb;
    }
}

/* Row r of matrix t as floats (from the file's blocks where it kept them). */
static void row_f32(const llm_tensor *t, int64_t r, float *out)
{
    size_t n = (size_t)t->ne[0];
    if (t->src != NULL)
        gguf_qtype_to_f32(t->src_type, (const uint8_t *)t->src + (size_t)r * gguf_qtype_row_bytes(t->src_type, n), out,
                          n);
    else
        llm_row_to_f32(t->type, (const uint8_t *)t->data + (size_t)r * llm_dtype_row_bytes(t->type, n), out, n);
}

/* Row r of an MXFP4 matrix as Hugging Face's blocks (16 bytes a block: elements 2i, 2i + 1 in byte i) and
 * scales (a byte a block), GGML's blocks repacked. */
static void row_mx(const llm_tensor *t, int64_t r, uint8_t *blocks, uint8_t *scales)
{
    size_t nb = (size_t)t->ne[0] / 32;
    const uint8_t *b = (const uint8_t *)t->src + (size_t)r * nb * 17;
    for (size_t k = 0; k < nb; k++, b += 17) {
        uint8_t v[32];
        for (int j = 0; j < 16; j++) {
            v[j] = b[1 + j] & 0xF;
            v[j + 16] = b[1 + j] >> 4;
        }
        scales[k] = b[0];
        for (int i = 0; i < 16; i++)
            blocks[k * 16 + i] = (uint8_t)(v[2 * i] | v[2 * i + 1] << 4);
    }
}

int llm_hf_gptoss_write(FILE *f, const llm_model *m, const llm_layer *L, int kind, llm_dtype dtype, llm_err *err)
{
    const llm_config *c = &m->cfg;
    const int64_t E = c->n_expert, ff = c->expert_ff, dim = c->dim;
    const size_t es = llm_dtype_block_bytes(dtype);
    int down = kind == LLM_HF_OSS_DOWN || kind == LLM_HF_OSS_DOWN_BLOCKS || kind == LLM_HF_OSS_DOWN_SCALES;
    /* per expert: its matrices as floats (unquantised kinds), one output row, a row's blocks */
    const int64_t cols = down ? ff : dim, rows = down ? dim : ff, parts = down ? 1 : 2;
    const size_t widest = (size_t)(2 * ff > dim ? 2 * ff : dim);
    float *w = malloc((size_t)(parts * rows * cols) * sizeof(float)), *o = malloc(widest * sizeof(float));
    uint8_t *out = malloc(widest * 4 + (size_t)cols);
    int rc = -1;
    if (w == NULL || o == NULL || out == NULL) {
        llm_seterr(err, "out of memory writing gpt-oss's experts");
        goto done;
    }
    for (int64_t e = 0; e < E; e++) {
        const llm_tensor *t[2] = { &L->experts[3 * e + (down ? 2 : 0)], &L->experts[3 * e + 1] };
        if (kind == LLM_HF_OSS_GU_BIAS) { /* [2 ff]: gate j, up j interleaved */
            for (int64_t j = 0; j < ff; j++)
                for (int p = 0; p < 2; p++)
                    o[2 * j + p] = ((const float *)L->exp_b[p].data)[e * ff + j];
            gguf_row_from_f32(dtype, o, out, (size_t)(2 * ff));
            if (fwrite(out, es, (size_t)(2 * ff), f) != (size_t)(2 * ff))
                goto ioerr;
            continue;
        }
        if (kind == LLM_HF_OSS_GU || kind == LLM_HF_OSS_DOWN) {
            for (int p = 0; p < parts; p++)
                for (int64_t r = 0; r < rows; r++)
                    row_f32(t[p], r, w + (size_t)((p * rows + r) * cols));
            const int64_t width = parts * rows;
            for (int64_t i = 0; i < cols; i++) {
                /* a row of the transposed matrix, input i's outputs: feature x is part x % parts's row x / parts */
                for (int64_t x = 0; x < width; x++)
                    o[x] = w[((x % parts) * rows + x / parts) * cols + i];
                gguf_row_from_f32(dtype, o, out, (size_t)width);
                if (fwrite(out, es, (size_t)width, f) != (size_t)width)
                    goto ioerr;
            }
            continue;
        }
        int scales = kind == LLM_HF_OSS_GU_SCALES || kind == LLM_HF_OSS_DOWN_SCALES;
        const size_t nb = (size_t)cols / 32;
        for (int64_t x = 0; x < parts * rows; x++) { /* rows in the file's order: gate 0, up 0, gate 1, ... */
            row_mx(t[x % parts], x / parts, out, out + nb * 16);
            size_t n = scales ? nb : nb * 16;
            if (fwrite(scales ? out + nb * 16 : out, 1, n, f) != n)
                goto ioerr;
        }
    }
    rc = 0;
    goto done;
ioerr:
    llm_seterr(err, "write failed writing gpt-oss's experts");
done:
    free(w);
    free(o);
    free(out);
    return rc;
}
