/* A Hugging Face checkpoint's quantization_config, as transformers and vLLM read it, into m->hfq:
 *  - fp8: block-wise FP8 (Qwen3-*-FP8; "weight_block_size" [rows, cols]; model_hf_fp8.c);
 *  - gptq: AutoGPTQ / GPTQModel ("bits" 4 or 8, "group_size", "sym", "desc_act", "checkpoint_format" gptq or
 *    gptq_v2: the first stores zero points minus one);
 *  - awq: AutoAWQ's GEMM packing ("bits" 4, "group_size", "zero_point", "version" gemm);
 *  - compressed-tensors: llm-compressor's (RedHatAI's W4A16, W8A16, W8A8 and FP8 releases): "format"
 *    pack-quantized, int-quantized / naive-quantized, or float-quantized, the weights' scheme in config_groups;
 *    activation quantisation (W8A8, FP8-dynamic) is run as weight-only, activations in float;
 *  - mxfp4: gpt-oss's experts (model_hf_gptoss.c).
 * Everything else (bitsandbytes, HQQ, EXL2, AQLM, sparse or rotated compressed-tensors, NVFP4, ...) is refused by
 * name: the loader would otherwise read packed integers as weights or miss a transform. */
#include "model.h"
#include "model_priv.h"

#include "json_file.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static int quant_config_of(llm_model *m, const cJSON *q, const char *path, llm_err *err);

const char *llm_hfq_name(int method)
{
    static const char *const names[] = { "none", "fp8", "mxfp4", "gptq", "awq", "compressed-tensors" };
    return method >= 0 && method <= LLM_HFQ_CT ? names[method] : "?";
}

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

/* A boolean key (def when absent or null); -1 for another type. */
static int bool_of(const cJSON *o, const char *key, int def)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    return j == NULL || cJSON_IsNull(j) ? def : cJSON_IsBool(j) ? cJSON_IsTrue(j) : -1;
}

static int fp8_config(llm_model *m, const cJSON *q, const char *path, llm_err *err)
{
    const char *fmt = str_of(q, "fmt");
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(q, "weight_block_size");
    if (cJSON_GetObjectItemCaseSensitive(q, "fmt") != NULL && !(fmt != NULL && strcmp(fmt, "e4m3") == 0)) {
        llm_seterr(err, "%s: quantization_config fmt '%s': FP8 weights in e4m3 only", path, fmt ? fmt : "?");
        return -1;
    }
    int ok = cJSON_IsArray(bs) && cJSON_GetArraySize(bs) == 2;
    for (int i = 0; ok && i < 2; i++) {
        const cJSON *v = cJSON_GetArrayItem(bs, i);
        ok = cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= 65536 && v->valuedouble == (int)v->valuedouble;
        if (ok)
            m->hfq.fp8_block[i] = (int)v->valuedouble;
    }
    if (!ok) {
        llm_seterr(err, "%s: quantization_config weight_block_size must be [rows, cols] of a scale's block (a "
                   "per-tensor FP8 scale is not supported)", path);
        return -1;
    }
    return 0;
}

/* bits and group_size of GPTQ and AWQ (AutoAWQ's quant_config.json: w_bit, q_group_size); group_size -1 (one
 * group per row) is kept as 0. */
static int bits_group(llm_model *m, const cJSON *q, const char *method, int allow8, const char *path, llm_err *err)
{
    int awq_keys = cJSON_GetObjectItemCaseSensitive(q, "bits") == NULL &&
                   cJSON_GetObjectItemCaseSensitive(q, "w_bit") != NULL;
    if (llm_hf_cfg_int(q, awq_keys ? "w_bit" : "bits", &m->hfq.bits, 4, 0, path, err) != 0 ||
        llm_hf_cfg_int(q, awq_keys ? "q_group_size" : "group_size", &m->hfq.group, 128, 0, path, err) != 0)
        return -1;
    if (m->hfq.bits != 4 && !(allow8 && m->hfq.bits == 8)) {
        llm_seterr(err, "%s: %s with %d-bit weights is not supported (%s)", path, method, m->hfq.bits,
                   allow8 ? "4 or 8 bits" : "4 bits");
        return -1;
    }
    if (m->hfq.group == 0 || m->hfq.group < -1) {
        llm_seterr(err, "%s: %s group_size %d (a positive number of columns, or -1)", path, method, m->hfq.group);
        return -1;
    }
    m->hfq.group = m->hfq.group < 0 ? 0 : m->hfq.group;
    return 0;
}

static int gptq_config(llm_model *m, const cJSON *q, const char *path, llm_err *err)
{
    if (bits_group(m, q, "gptq", 1, path, err) != 0)
        return -1;
    m->hfq.sym = bool_of(q, "sym", 1);
    const char *fmt = str_of(q, "checkpoint_format");
    if (fmt == NULL)
        fmt = str_of(q, "format"); /* (GPTQModel's key) */
    if (m->hfq.sym < 0 || (fmt != NULL && strcmp(fmt, "gptq") != 0 && strcmp(fmt, "gptq_v2") != 0)) {
        llm_seterr(err, "%s: gptq checkpoint_format '%s' is not supported (gptq, gptq_v2)", path, fmt ? fmt : "?");
        return -1;
    }
    m->hfq.zeros_v1 = fmt == NULL || strcmp(fmt, "gptq") == 0;
    return 0;
}

static int awq_config(llm_model *m, const cJSON *q, const char *path, llm_err *err)
{
    const char *ver = str_of(q, "version");
    if (bits_group(m, q, "awq", 0, path, err) != 0)
        return -1;
    if (ver != NULL && strcasecmp(ver, "gemm") != 0) {
        llm_seterr(err, "%s: awq version '%s' is not supported (its GEMM packing only)", path, ver);
        return -1;
    }
    if (bool_of(q, "zero_point", 1) != 1) {
        llm_seterr(err, "%s: awq without zero points is not supported", path);
        return -1;
    }
    m->hfq.sym = 0;
    return 0;
}

/* A non-empty object or array (or a string / number): what sparsity_config and transform_config must not be. */
static int present(const cJSON *j)
{
    return j != NULL && !cJSON_IsNull(j) && !((cJSON_IsObject(j) || cJSON_IsArray(j)) && j->child == NULL);
}

/* compressed-tensors: every config group's weights one scheme this loader carries (their tensors then say which
 * form each Linear has); sparsity and transforms refused. */
static int ct_config(llm_model *m, const cJSON *q, const char *path, llm_err *err)
{
    static const char *const formats[] = { "pack-quantized", "int-quantized", "naive-quantized", "float-quantized" };
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(q, "sparsity_config");
    const char *spf = cJSON_IsObject(sp) ? str_of(sp, "format") : NULL;
    if (present(sp) && !(spf != NULL && strcmp(spf, "dense") == 0)) {
        llm_seterr(err, "%s: compressed-tensors sparsity_config (format '%s') is not supported", path,
                   spf ? spf : "?");
        return -1;
    }
    if (present(cJSON_GetObjectItemCaseSensitive(q, "transform_config"))) {
        llm_seterr(err, "%s: compressed-tensors transform_config (rotated weights) is not supported", path);
        return -1;
    }
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(q, "config_groups"), *g;
    if (!cJSON_IsObject(groups) || groups->child == NULL) {
        llm_seterr(err, "%s: compressed-tensors quantization_config lacks config_groups", path);
        return -1;
    }
    int ints = 0;
    cJSON_ArrayForEach(g, groups) {
        const char *fmt = str_of(g, "format");
        if (fmt == NULL)
            fmt = str_of(q, "format");
        size_t f = 0;
        while (f < 4 && (fmt == NULL || strcmp(fmt, formats[f]) != 0))
            f++;
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(g, "weights");
        const char *type = str_of(w, "type"), *strategy = str_of(w, "strategy");
        int bits = 0, sym = bool_of(w, "symmetric", 1);
        if (f == 4) {
            llm_seterr(err, "%s: compressed-tensors format '%s' is not supported (pack-quantized, int-quantized, "
                       "naive-quantized, float-quantized)", path, fmt ? fmt : "?");
            return -1;
        }
        if (!cJSON_IsObject(w) || type == NULL || llm_hf_cfg_int(w, "num_bits", &bits, 0, 1, path, err) != 0 ||
            sym < 0) {
            llm_seterr(err, "%s: compressed-tensors group %s: weights need type, num_bits and symmetric", path,
                       g->string);
            return -1;
        }
        int is_float = strcmp(type, "float") == 0;
        if (!(is_float ? bits == 8 && f == 3 : strcmp(type, "int") == 0 && (bits == 4 || bits == 8) && f < 3)) {
            llm_seterr(err, "%s: compressed-tensors group %s: %d-bit %s weights in format %s are not supported "
                       "(int 4 or 8 bits packed or int-quantized; float 8 bits float-quantized)", path, g->string,
                       bits, type, fmt);
            return -1;
        }
        if (strategy != NULL && strcmp(strategy, "tensor") != 0 && strcmp(strategy, "channel") != 0 &&
            strcmp(strategy, "group") != 0 && !(is_float && strcmp(strategy, "block") == 0)) {
            llm_seterr(err, "%s: compressed-tensors group %s: weight strategy '%s' is not supported", path,
                       g->string, strategy);
            return -1;
        }
        if (!is_float) { /* (the packed tensors need the width; their shapes carry the rest) */
            if (ints && (bits != m->hfq.bits || sym != m->hfq.sym)) {
                llm_seterr(err, "%s: compressed-tensors groups with different integer schemes are not supported",
                           path);
                return -1;
            }
            ints = 1;
            m->hfq.bits = bits;
            m->hfq.sym = sym;
            llm_hf_cfg_int(w, "group_size", &m->hfq.group, 0, 0, path, err);
            m->hfq.group = m->hfq.group < 0 ? 0 : m->hfq.group;
        }
        if (present(cJSON_GetObjectItemCaseSensitive(g, "input_activations")))
            m->hfq.act_quant = 1;
    }
    return 0;
}

/* The older tools' own file beside config.json: AutoGPTQ's quantize_config.json, AutoAWQ's quant_config.json
 * (NULL: neither); *method what it means unless it says. */
static cJSON *side_config(const char *path, const char **method, char *side, size_t cap)
{
    static const char *const files[2][2] = { { "quantize_config.json", "gptq" }, { "quant_config.json", "awq" } };
    const char *slash = strrchr(path, '/');
    int dl = slash != NULL ? (int)(slash - path) : 1;
    for (int i = 0; i < 2; i++) {
        snprintf(side, cap, "%.*s/%s", dl, slash != NULL ? path : ".", files[i][0]);
        llm_err e;
        cJSON *j = access(side, R_OK) == 0 ? llm_json_read_file(side, &e) : NULL;
        if (cJSON_IsObject(j)) {
            *method = files[i][1];
            return j;
        }
        cJSON_Delete(j);
    }
    return NULL;
}

int llm_hf_quant_config(llm_model *m, const cJSON *root, const char *path, llm_err *err)
{
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    if (q == NULL || cJSON_IsNull(q))
        q = cJSON_GetObjectItemCaseSensitive(root, "compression_config"); /* (compressed-tensors' older key) */
    if (q == NULL || cJSON_IsNull(q)) {
        char side[1200];
        const char *method = NULL;
        cJSON *j = side_config(path, &method, side, sizeof(side));
        if (j == NULL)
            return 0;
        if (str_of(j, "quant_method") == NULL)
            cJSON_AddStringToObject(j, "quant_method", method);
        int rc = quant_config_of(m, j, side, err);
        cJSON_Delete(j);
        return rc;
    }
    return quant_config_of(m, q, path, err);
}

static int quant_config_of(llm_model *m, const cJSON *q, const char *path, llm_err *err)
{
    const char *qm = str_of(q, "quant_method");
    static const struct {
        const char *name;
        int method;
        int (*parse)(llm_model *, const cJSON *, const char *, llm_err *);
    } known[] = {
        { "fp8", LLM_HFQ_FP8, fp8_config }, { "gptq", LLM_HFQ_GPTQ, gptq_config },
        { "awq", LLM_HFQ_AWQ, awq_config }, { "compressed-tensors", LLM_HFQ_CT, ct_config },
    };
    for (size_t i = 0; qm != NULL && i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(qm, known[i].name) == 0) {
            m->hfq.method = known[i].method;
            return known[i].parse(m, q, path, err);
        }
    if (qm != NULL && strcmp(qm, "mxfp4") == 0 && strcmp(m->arch, "gpt-oss") == 0) {
        m->hfq.method = LLM_HFQ_MXFP4;
        return 0;
    }
    llm_seterr(err, "%s: quantization_config quant_method '%s' is not supported (fp8, gptq, awq, compressed-tensors, "
               "gpt-oss's mxfp4): use the unquantised checkpoint or a GGUF", path, qm ? qm : "?");
    return -1;
}
