/* GGUF loader for the "llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "granitemoe", "olmo2", "olmoe",
 * "gemma", "gemma2", "gemma3", "phi3", "smollm3", "granite", "ernie4_5", "ernie4_5-moe", "glm4moe", "exaone", "exaone4" and
 * "seed_oss" architectures:
 * <arch>.* hyper-parameters, blk.N.* tensors (Qwen 2's q/k/v biases, Qwen 3's
 * and Gemma 3's per-head q/k norms, Gemma 2 / 3's norms after attention and
 * FFN, the experts of Qwen 2 / 3 MoE (Qwen 2's with a shared expert), of
 * llama files with an expert_count (Mixtral) and of Granite MoE (GraniteMoeShared's
 * with an ungated shared expert), Phi 3's fused matrices; SmolLM3
 * and Granite (and Granite MoE) are llamas with NoPE layers / four scales; all but those three
 * rotate NeoX-style, halves rather than pairs); "bert", "nomic-bert" and "jina-bert-v2" are model_gguf_bert.c's. */
#include "model.h"
#include "model_priv.h"
#include "gguf.h"
#include "gguf_quants.h"
#include "parallel.h"
#include "tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int llm_gguf_get_int(llm_model *m, const char *key, int *out, int def, int required, llm_err *err)
{
    int64_t v;
    if (gguf_get_i64(m->gguf, key, &v) != 0) {
        if (gguf_find_kv(m->gguf, key) != NULL) { /* there, of another type: not taken as absent */
            llm_seterr(err, "%s: metadata key %s is not an integer", m->path, key);
            return -1;
        }
        if (required) {
            llm_seterr(err, "%s: missing or non-integer metadata key %s", m->path, key);
            return -1;
        }
        *out = def;
        return 0;
    }
    if (v < 0 || v > (1 << 30)) {
        llm_seterr(err, "%s: metadata %s = %lld is out of range", m->path, key, (long long)v);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A tensor of a read-only type (gguf_quants.h) as owned Q8_0: each row
 * dequantised, then quantised again per 32-block; rows split over threads
 * (about 3 ns an element on one core: a 3B model's 3.2 G elements take ~10 s
 * alone). */
typedef struct {
    const gguf_tensor *t;
    uint8_t           *out;
    size_t             r0, r1;
    int                oom;
} requant_job;

static void *requant_rows(void *arg)
{
    requant_job *j = arg;
    size_t cols = (size_t)j->t->ne[0];
    size_t src_row = gguf_qtype_row_bytes(j->t->type, cols), dst_row = llm_dtype_row_bytes(LLM_Q8_0, cols);
    float *tmp = malloc(cols * sizeof(float));
    if (tmp == NULL) {
        j->oom = 1;
        return NULL;
    }
    const uint8_t *src = j->t->data;
    for (size_t r = j->r0; r < j->r1; r++) {
        if (j->t->type == GGML_MXFP4 || j->t->type == GGML_Q4_1) { /* (exact where they can be) */
            (j->t->type == GGML_MXFP4 ? gguf_mxfp4_row_to_q8_0 : gguf_q4_1_row_to_q8_0)(src + r * src_row,
                                                                                        j->out + r * dst_row, cols);
            continue;
        }
        gguf_qtype_to_f32(j->t->type, src + r * src_row, tmp, cols);
        llm_row_from_f32(LLM_Q8_0, tmp, j->out + r * dst_row, cols);
    }
    free(tmp);
    return NULL;
}

static void note_converted(llm_model *m, uint32_t type)
{
    const char *name = gguf_qtype_name(type);
    if (strstr(m->converted_from, name) == NULL && strlen(m->converted_from) + strlen(name) + 2 < sizeof(m->converted_from)) {
        if (m->converted_from[0])
            strcat(m->converted_from, " ");
        strcat(m->converted_from, name);
    }
    m->n_converted++;
}

static int requantize(llm_model *m, const gguf_tensor *t, llm_tensor *dst, llm_err *err)
{
    if (m->defer_kq && gguf_qtype_converted(t->type)) { /* see model.h */
        note_converted(m, t->type);
        dst->type = LLM_Q8_0; /* what it becomes unless a backend takes the blocks */
        dst->data = NULL;
        dst->src = t->data;
        dst->src_type = t->type;
        return 0;
    }
    size_t cols = (size_t)t->ne[0], rows = (size_t)t->ne[1];
    size_t dst_row = llm_dtype_row_bytes(LLM_Q8_0, cols);
    uint8_t *out = dst_row != 0 && rows <= SIZE_MAX / dst_row ? malloc(rows * dst_row) : NULL;
    if (llm_model_own(m, out, err) != 0)
        goto oom;
    size_t n = (size_t)llm_parallel_jobs(rows, 16);
    requant_job jobs[LLM_PARALLEL_MAX];
    int oom = 0;
    for (size_t i = 0; i < n; i++)
        jobs[i] = (requant_job){ t, out, rows * i / n, rows * (i + 1) / n, 0 };
    llm_parallel_run((int)n, requant_rows, jobs, sizeof(jobs[0]));
    for (size_t i = 0; i < n; i++)
        oom |= jobs[i].oom;
    if (oom)
        goto oom;
    if (!dst->src) /* not counted yet (a deferred one was, at load) */
        note_converted(m, t->type);
    dst->type = LLM_Q8_0;
    dst->data = out;
    dst->src = t->data;
    dst->src_type = t->type;
    return 0;
oom:
    llm_seterr(err, "%s: out of memory converting tensor %.*s (%s) to q8_0", m->path, (int)t->name.len, t->name.ptr,
               gguf_qtype_name(t->type));
    return -1;
}

/* GGUF tensor (or view) t as the [rows x cols] llm_tensor dst: used in place, or converted where our kernels
 * do not take its type. */
static int use(llm_model *m, const gguf_tensor *t, int64_t cols, int64_t rows, llm_tensor *dst, llm_err *err)
{
    dst->ne[0] = cols;
    dst->ne[1] = rows;
    if (gguf_qtype_converted(t->type))
        return requantize(m, t, dst, err);
    dst->type = (llm_dtype)t->type;
    dst->data = t->data;
    return 0;
}

int llm_gguf_use_blocks(llm_model *m, const char *name, uint32_t type, const void *data, int64_t cols, int64_t rows,
                        llm_tensor *dst, llm_err *err)
{
    gguf_tensor t = { .name = { strlen(name), name }, .n_dims = 2, .ne = { (uint64_t)cols, (uint64_t)rows, 1, 1 },
                      .type = type, .data = data, .nbytes = gguf_qtype_row_bytes(type, (uint64_t)cols) * (size_t)rows };
    return use(m, &t, cols, rows, dst, err);
}

/* A 1-D or 2-D GGUF tensor as an llm_tensor (NULL data when absent and optional). */
int llm_gguf_take(llm_model *m, const char *name, llm_tensor *dst, int required, llm_err *err)
{
    const gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    if (t == NULL) {
        if (required)
            llm_seterr(err, "%s: missing tensor %s", m->path, name);
        return required ? -1 : 0;
    }
    if (t->ne[2] != 1 || t->ne[3] != 1 || t->ne[0] > INT64_MAX || t->ne[1] > INT64_MAX) {
        llm_seterr(err, "%s: tensor %s must be 1-D or 2-D", m->path, name);
        return -1;
    }
    return use(m, t, (int64_t)t->ne[0], (int64_t)t->ne[1], dst, err);
}

/* A reranker's classifier head (llama.cpp's rank conversion: cls.output, a few rows of dim), as floats. Its
 * rows are taken in the order of <arch>.classifier.output_labels, which must be "yes" then "no" when given
 * (what Qwen3-Reranker's conversion writes; /v1/rerank scores P(yes) / (P(yes) + P(no))). */
static int rank_head(llm_model *m, const gguf_ctx *g, const char *arch, llm_err *err)
{
    const gguf_tensor *t = gguf_find_tensor(g, "cls.output.weight");
    if (t == NULL)
        return 0; /* a rank model without that head: its logits serve */
    if (t->ne[0] != (uint64_t)m->cfg.dim || t->ne[1] < 1 || t->ne[1] > LLM_MODEL_MAX_CLS || t->ne[2] != 1 ||
        t->ne[3] != 1 || !gguf_qtype_known(t->type)) {
        llm_seterr(err, "%s: cls.output.weight must be 1 to %d rows of %d (a known type)", m->path, LLM_MODEL_MAX_CLS,
                   m->cfg.dim);
        return -1;
    }
    char key[96];
    snprintf(key, sizeof(key), "%s.classifier.output_labels", arch);
    const gguf_kv *kv = gguf_find_kv(g, key);
    static const char *const want[2] = { "yes", "no" };
    for (uint64_t i = 0; kv != NULL && kv->type == GGUF_TYPE_ARRAY && kv->arr_type == GGUF_TYPE_STRING && i < 2; i++)
        if (kv->arr_n != t->ne[1] || kv->strs[i].len != strlen(want[i]) ||
            memcmp(kv->strs[i].ptr, want[i], kv->strs[i].len) != 0) {
            llm_seterr(err, "%s: %s must be [\"yes\", \"no\"] (a Qwen3-Reranker-style head)", m->path, key);
            return -1;
        }
    float *cls = malloc((size_t)t->ne[1] * (size_t)m->cfg.dim * sizeof(float));
    if (llm_model_own(m, cls, err) != 0) /* (NULL: out of memory) */
        return -1;
    size_t rb = gguf_qtype_row_bytes(t->type, t->ne[0]);
    for (uint64_t r = 0; r < t->ne[1]; r++)
        gguf_qtype_to_f32(t->type, (const uint8_t *)t->data + r * rb, cls + r * (size_t)m->cfg.dim, (size_t)t->ne[0]);
    m->cls = cls;
    m->n_cls = (int)t->ne[1];
    return 0;
}

/* sentence-transformers' Dense modules as llama.cpp's converter stores EmbeddingGemma's: dense_2.weight [dim ->
 * n] and dense_3.weight [n -> dim], no bias; both or neither. As F32 (llm_model_dense_apply's). */
static int dense_modules(llm_model *m, const gguf_ctx *g, llm_err *err)
{
    const gguf_tensor *up = gguf_find_tensor(g, "dense_2.weight"), *down = gguf_find_tensor(g, "dense_3.weight");
    if (up == NULL && down == NULL)
        return 0;
    int64_t n = up != NULL ? (int64_t)up->ne[1] : 0;
    llm_tensor tu = { 0 }, td = { 0 };
    if (up == NULL || down == NULL || n < 1 || n > (1 << 20) || gguf_find_tensor(g, "dense_2.bias") != NULL ||
        gguf_find_tensor(g, "dense_3.bias") != NULL) {
        llm_seterr(err, "%s: dense_2.weight and dense_3.weight come together, without biases", m->path);
        return -1;
    }
    if (llm_gguf_take(m, "dense_2.weight", &tu, 1, err) || llm_gguf_take(m, "dense_3.weight", &td, 1, err) ||
        llm_model_f32_copy(m, &tu, "dense_2.weight", m->cfg.dim, n, &m->dense_up, err) ||
        llm_model_f32_copy(m, &td, "dense_3.weight", n, m->cfg.dim, &m->dense_down, err))
        return -1;
    m->dense_n = (int)n;
    return 0;
}

/* Rows r0 .. r0 + n of a tensor (its matrices' rows counted on through the higher dimensions), as a 2-D
 * tensor of its own: a view into the file. */
static gguf_tensor rows_view(const gguf_tensor *t, uint64_t r0, uint64_t n)
{
    gguf_tensor v = *t;
    size_t rb = gguf_qtype_row_bytes(t->type, t->ne[0]);
    v.data = (const uint8_t *)t->data + r0 * rb;
    v.nbytes = n * rb;
    v.n_dims = 2;
    v.ne[1] = n;
    v.ne[2] = v.ne[3] = 1;
    return v;
}

/* Phi 3's fused matrices as the three (attn_qkv: q, k, v) or two (ffn_up: gate, up) matrices they stack, by
 * rows: views into the file (or converted each, as any matrix of a converted type). */
int llm_gguf_take_fused(llm_model *m, int l, const char *suffix, const int64_t *rows, int n, llm_tensor *const *dst,
                        llm_err *err)
{
    char name[96];
    snprintf(name, sizeof(name), "blk.%d.%s.weight", l, suffix);
    const gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += rows[i];
    if (t == NULL) {
        llm_seterr(err, "%s: missing tensor %s", m->path, name);
        return -1;
    }
    if (t->ne[0] != (uint64_t)m->cfg.dim || t->ne[1] != (uint64_t)total || t->ne[2] != 1 || t->ne[3] != 1) {
        llm_seterr(err, "%s: tensor %s is [%llu x %llu], the config needs [%lld x %d]", m->path, name,
                   (unsigned long long)t->ne[1], (unsigned long long)t->ne[0], (long long)total, m->cfg.dim);
        return -1;
    }
    int64_t r0 = 0;
    for (int i = 0; i < n; i++) {
        gguf_tensor v = rows_view(t, (uint64_t)r0, (uint64_t)rows[i]);
        if (use(m, &v, m->cfg.dim, rows[i], dst[i], err) != 0)
            return -1;
        r0 += rows[i];
    }
    return 0;
}

/* Expert e's [ne1 x ne0] matrix of a 3-D tensor [ne2 experts][ne1][ne0]. */
static gguf_tensor expert_slice(const gguf_tensor *t, uint64_t e)
{
    return rows_view(t, e * t->ne[1], t->ne[1]);
}

/* A MoE layer's experts: blk.N.ffn_{gate,up,down}_exps ([n_expert][rows][cols] each) as n_expert matrices of
 * each kind in L->experts (gate, up, down per expert). */
static int take_experts(llm_model *m, int l, llm_layer *L, llm_err *err)
{
    const llm_config *c = &m->cfg;
    static const char *const kinds[3] = { "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps" };
    L->experts = calloc((size_t)c->n_expert * 3, sizeof(llm_tensor));
    if (llm_model_own(m, L->experts, err) != 0)
        return -1;
    for (int i = 0; i < 3; i++) {
        char n[96];
        snprintf(n, sizeof(n), "blk.%d.%s.weight", l, kinds[i]);
        const gguf_tensor *t = gguf_find_tensor(m->gguf, n);
        if (t == NULL) {
            snprintf(n, sizeof(n), "blk.%d.ffn_gate.0.weight", l);
            if (gguf_find_tensor(m->gguf, n) != NULL)
                llm_seterr(err, "%s: experts stored one tensor each (%s: an old Mixtral conversion) are not "
                           "supported; convert the model again with a current llama.cpp", m->path, n);
            else
                llm_seterr(err, "%s: missing tensor blk.%d.%s.weight", m->path, l, kinds[i]);
            return -1;
        }
        uint64_t rows = i < 2 ? (uint64_t)c->expert_ff : (uint64_t)c->dim;
        uint64_t cols = i < 2 ? (uint64_t)c->dim : (uint64_t)c->expert_ff;
        if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != (uint64_t)c->n_expert || t->ne[3] != 1) {
            llm_seterr(err, "%s: tensor %s is [%llu x %llu x %llu], the config needs [%d experts x %llu x %llu]",
                       m->path, n, (unsigned long long)t->ne[2], (unsigned long long)t->ne[1],
                       (unsigned long long)t->ne[0], c->n_expert, (unsigned long long)rows, (unsigned long long)cols);
            return -1;
        }
        for (int e = 0; e < c->n_expert; e++) {
            gguf_tensor v = expert_slice(t, (uint64_t)e);
            if (use(m, &v, (int64_t)cols, (int64_t)rows, &L->experts[3 * e + i], err) != 0)
                return -1;
        }
    }
    return 0;
}

/* gpt-oss's layer l biases of its router ([n_expert]) and of its experts' gate, up ([expert_ff x n_expert])
 * and down ([dim x n_expert]) projections, F32. */
static int gptoss_biases(llm_model *m, int l, llm_layer *L, llm_err *err)
{
    const llm_config *c = &m->cfg;
    static const char *const names[3] = { "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps" };
    char n[96];
    snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp.bias", l);
    if (llm_gguf_take_vec(m, n, &L->ffn_gate_inp_b, 1, err) != 0)
        return -1;
    for (int i = 0; i < 3; i++) {
        snprintf(n, sizeof(n), "blk.%d.%s.bias", l, names[i]);
        const gguf_tensor *t = gguf_find_tensor(m->gguf, n);
        uint64_t rows = i < 2 ? (uint64_t)c->expert_ff : (uint64_t)c->dim;
        if (t == NULL || t->type != LLM_F32 || t->ne[0] != rows || t->ne[1] != (uint64_t)c->n_expert ||
            t->ne[2] != 1 || t->ne[3] != 1) {
            llm_seterr(err, "%s: tensor %s %s: gpt-oss needs it, f32 [%d experts x %llu]", m->path, n,
                       t == NULL ? "is missing" : "has another type or shape", c->n_expert, (unsigned long long)rows);
            return -1;
        }
        L->exp_b[i] = (llm_tensor){ .type = LLM_F32, .ne = { (int64_t)rows, c->n_expert }, .data = t->data };
    }
    return 0;
}

/* <arch>.expert_count and the like (Qwen 3 MoE; llama with experts: Mixtral), as llama.cpp reads them. */
static int moe_keys(llm_model *m, const char *arch, llm_err *err)
{
    llm_config *c = &m->cfg;
    char k[96];
    snprintf(k, sizeof(k), "%s.expert_count", arch);
    if (llm_gguf_get_int(m, k, &c->n_expert, 0, 0, err) != 0)
        return -1;
    int qwen2moe = strcmp(arch, "qwen2moe") == 0, olmoe = strcmp(arch, "olmoe") == 0;
    if (c->n_expert == 0) {
        if (qwen2moe || olmoe || strcmp(arch, "qwen3moe") == 0 || strcmp(arch, "granitemoe") == 0 ||
            strcmp(arch, "ernie4_5-moe") == 0 || strcmp(arch, "glm4moe") == 0 || strcmp(arch, "gpt-oss") == 0) {
            llm_seterr(err, "%s: missing %s", m->path, k);
            return -1;
        }
        return 0;
    }
    snprintf(k, sizeof(k), "%s.expert_used_count", arch);
    if (llm_gguf_get_int(m, k, &c->n_expert_used, 0, 1, err) != 0)
        return -1;
    snprintf(k, sizeof(k), "%s.expert_feed_forward_length", arch);
    int dense_ff = c->hidden_dim;
    if (llm_gguf_get_int(m, k, &c->expert_ff, c->hidden_dim, 0, err) != 0)
        return -1;
    int glm = strcmp(arch, "glm4moe") == 0;
    if (strcmp(arch, "ernie4_5-moe") == 0 || glm) {
        /* ERNIE 4.5 MoE, GLM-4.5: its first layers dense, feed_forward_length wide; a mixture of experts on every
         * layer after them (llama.cpp loads no other interleave than 1: its loader puts experts on every later
         * layer; GLM-4.5 has no such key) */
        int step = 0;
        snprintf(k, sizeof(k), "%s.leading_dense_block_count", arch);
        if (llm_gguf_get_int(m, k, &c->moe_dense_lead, 0, 0, err) != 0)
            return -1;
        snprintf(k, sizeof(k), "%s.interleave_moe_layer_step", arch);
        if (llm_gguf_get_int(m, k, &step, 1, 0, err) != 0)
            return -1;
        if (step != 1 || c->moe_dense_lead < 0 || c->moe_dense_lead >= c->n_layers) {
            llm_seterr(err, "%s: %s.interleave_moe_layer_step %d / leading_dense_block_count %d: only experts on "
                       "every layer after the leading dense ones (a step of 1) are supported", m->path, arch, step,
                       c->moe_dense_lead);
            return -1;
        }
        c->dense_ff = c->moe_dense_lead > 0 ? dense_ff : 0;
    }
    /* Qwen 2 MoE's shared expert, GraniteMoeShared's (whose experts are feed_forward_length wide); GLM-4.5's
     * shared experts run as one, expert_shared_count times an expert's width */
    int n_shared = 1;
    snprintf(k, sizeof(k), "%s.expert_shared_count", arch);
    if (glm && llm_gguf_get_int(m, k, &n_shared, 1, 0, err) != 0)
        return -1;
    if (n_shared < 0 || n_shared > 64) {
        llm_seterr(err, "%s: bad %s %d", m->path, k, n_shared);
        return -1;
    }
    snprintf(k, sizeof(k), "%s.expert_shared_feed_forward_length", arch);
    if (llm_gguf_get_int(m, k, &c->hidden_dim, glm ? n_shared * c->expert_ff : c->hidden_dim, 0, err) != 0)
        return -1;
    if (glm) {
        /* its router: sigmoids (llama.cpp's expert_gating_func 2, its default for glm4moe; 1 is a softmax), the
         * chosen weights times expert_weights_scale */
        int gating = 2;
        snprintf(k, sizeof(k), "%s.expert_gating_func", arch);
        if (llm_gguf_get_int(m, k, &gating, 2, 0, err) != 0)
            return -1;
        if (gating != 1 && gating != 2) {
            llm_seterr(err, "%s: %s %d: 1 (softmax) or 2 (sigmoid)", m->path, k, gating);
            return -1;
        }
        c->moe_sigmoid = gating == 2;
        snprintf(k, sizeof(k), "%s.expert_weights_scale", arch);
        c->moe_w_scale = 1.0f;
        gguf_get_f32(m->gguf, k, &c->moe_w_scale);
        if (!(c->moe_w_scale > 0.0f && c->moe_w_scale <= 1000.0f)) {
            llm_seterr(err, "%s: bad %s", m->path, k);
            return -1;
        }
    }
    /* Mixtral and Qwen 3 MoE renormalise the chosen experts' weights, Qwen 2 MoE and OLMoE do not (llama.cpp
     * hard-codes both); our writer says expert_weights_norm where a config.json's norm_topk_prob said otherwise */
    int norm = !qwen2moe && !olmoe && strcmp(arch, "glm4moe") != 0; /* (llama.cpp's GLM-4.5 default: false) */
    snprintf(k, sizeof(k), "%s.expert_weights_norm", arch);
    gguf_get_bool(m->gguf, k, &norm);
    if (strcmp(arch, "gpt-oss") == 0) /* the softmax of the chosen experts' logits: renormalised, whatever a key says */
        norm = 1;
    c->moe_norm_topk = norm;
    if (c->n_expert < 2 || c->n_expert > LLM_MAX_EXPERTS || c->n_expert_used < 1 || c->n_expert_used > c->n_expert) {
        llm_seterr(err, "%s: bad mixture of experts: %d experts, %d used per token (2 to %d experts)", m->path,
                   c->n_expert, c->n_expert_used, LLM_MAX_EXPERTS);
        return -1;
    }
    return 0;
}

int llm_gguf_take_norm(llm_model *m, const char *name, llm_tensor *dst, llm_err *err)
{
    llm_tensor t = { 0 };
    if (llm_gguf_take(m, name, &t, 1, err) != 0)
        return -1;
    if (t.ne[1] != 1) {
        llm_seterr(err, "%s: norm tensor %s must be 1-D", m->path, name);
        return -1;
    }
    return llm_model_norm_f32(m, dst, t.type, t.data, t.ne[0], name, err);
}

/* A per-layer vector (bias, q/k norm) as F32, or absent when optional. */
int llm_gguf_take_vec(llm_model *m, const char *name, llm_tensor *dst, int required, llm_err *err)
{
    if (gguf_find_tensor(m->gguf, name) == NULL && !required)
        return 0;
    return llm_gguf_take_norm(m, name, dst, err);
}

/* <arch>.rope.scaling.*: YaRN (factor, original_context_length, attn_factor multiplying its 1 + 0.1 ln factor,
 * yarn_beta_fast / slow) and linear (factor; or the older <arch>.rope.scale_linear), as llama.cpp reads them.
 * Llama 3's comes as a rope_freqs tensor, LongRoPE as two factor tensors (longrope()). The other kinds (a
 * longrope type without those tensors, DeepSeek's yarn_log_multiplier) are refused with an error naming them:
 * run unscaled, their angles would be wrong at every position. */
static int rope_scaling_keys(llm_model *m, const gguf_ctx *g, const char *arch, llm_err *err)
{
    llm_config *c = &m->cfg;
    char k[128], type[32] = "";
    float f = 0.0f, lin = 0.0f;
#define KEY(name) (snprintf(k, sizeof(k), "%s.rope." name, arch), k)
    gguf_get_str(g, KEY("scaling.type"), type, sizeof(type));
    gguf_get_f32(g, KEY("scaling.factor"), &f);
    if (gguf_get_f32(g, KEY("scale_linear"), &lin) == 0 && lin != 1.0f && lin > 0.0f && type[0] == 0) {
        strcpy(type, "linear");
        f = lin;
    }
    if (type[0] == 0 || strcmp(type, "none") == 0)
        return 0;
    if ((strcmp(type, "longrope") == 0 || strcmp(type, "su") == 0) &&
        gguf_find_tensor(g, "rope_factors_long.weight") != NULL)
        return 0; /* its factors are tensors: longrope() */
    int yarn = strcmp(type, "yarn") == 0;
    if (!yarn && strcmp(type, "linear") != 0) {
        llm_seterr(err, "%s: rope scaling '%s' (%s.rope.scaling.type) is not supported (yarn, linear)", m->path, type,
                   arch);
        return -1;
    }
    float attn = 1.0f, log_mul = 0.0f;
    uint32_t orig = 0;
    c->yarn_beta_fast = 32.0f;
    c->yarn_beta_slow = 1.0f;
    gguf_get_f32(g, KEY("scaling.attn_factor"), &attn);
    gguf_get_f32(g, KEY("scaling.yarn_beta_fast"), &c->yarn_beta_fast);
    gguf_get_f32(g, KEY("scaling.yarn_beta_slow"), &c->yarn_beta_slow);
    gguf_get_f32(g, KEY("scaling.yarn_log_multiplier"), &log_mul);
    if (gguf_get_u32(g, KEY("scaling.original_context_length"), &orig) != 0 || orig == 0)
        orig = (uint32_t)c->seq_len;
#undef KEY
    if (log_mul != 0.0f) {
        llm_seterr(err, "%s: rope scaling with a yarn_log_multiplier is not supported", m->path);
        return -1;
    }
    if (!(f >= 1.0f && attn > 0.0f && c->yarn_beta_fast > c->yarn_beta_slow && c->yarn_beta_slow > 0.0f) ||
        orig > (1u << 24)) {
        llm_seterr(err, "%s: bad %s rope scaling values (factor %g, attn_factor %g)", m->path, type, (double)f,
                   (double)attn);
        return -1;
    }
    c->rope_scaling = yarn ? LLM_ROPE_SCALING_YARN : LLM_ROPE_SCALING_LINEAR;
    c->rope_factor = f;
    c->rope_orig_ctx = (int)orig;
    c->rope_mscale = attn * llm_yarn_mscale(f); /* llama.cpp's attn_factor multiplies it */
    return 0;
}

/* EXAONE 4's windows, as llama.cpp sets them: only a 64-layer model (the 32B) has them, 4096 wide unless
 * attention.sliding_window says otherwise, on all but the last of every sliding_window_pattern layers (4); the
 * others are global and rotate nothing. Multi-token-prediction layers are refused. */
static int exaone4_keys(llm_model *m, const gguf_ctx *g, int *period, llm_err *err)
{
    llm_config *c = &m->cfg;
    uint32_t v = 0;
    if (gguf_get_u32(g, "exaone4.nextn_predict_layers", &v) == 0 && v > 0) {
        llm_seterr(err, "%s: exaone4.nextn_predict_layers %u: multi-token-prediction layers are not supported",
                   m->path, v);
        return -1;
    }
    *period = 4;
    if (c->n_layers != 64)
        return 0;
    uint32_t win = 4096, per = 4;
    gguf_get_u32(g, "exaone4.attention.sliding_window", &win);
    if ((gguf_find_kv(g, "exaone4.attention.sliding_window_pattern") != NULL &&
         gguf_get_u32(g, "exaone4.attention.sliding_window_pattern", &per) != 0) ||
        win == 0 || win > (1u << 30) || per < 2 || per > 64) {
        llm_seterr(err, "%s: bad exaone4.attention.sliding_window (%u) or sliding_window_pattern (a period, 2 to 64)",
                   m->path, win);
        return -1;
    }
    c->swa_window = (int)win;
    *period = (int)per;
    return 0;
}

/* Granite's four scales, all required as llama.cpp requires them (0: that one not applied): the embedding
 * row times embedding_scale, scores times attention.scale (instead of head_dim^-1/2), each block's output
 * times residual_scale before the residual add, the logits times 1 / logit_scale. */
static int granite_keys(llm_model *m, const gguf_ctx *g, const char *arch, llm_err *err)
{
    static const char *const keys[4] = { "embedding_scale", "attention.scale", "residual_scale", "logit_scale" };
    llm_config *c = &m->cfg;
    float *dst[4] = { &c->embd_scale, &c->attn_scale, &c->residual_scale, &c->logit_scale };
    for (int i = 0; i < 4; i++) {
        char k[96];
        snprintf(k, sizeof(k), "%s.%s", arch, keys[i]);
        if (gguf_get_f32(g, k, dst[i]) != 0 || !(*dst[i] >= 0.0f && *dst[i] < 1e6f)) {
            llm_seterr(err, "%s: missing or bad %s", m->path, k);
            return -1;
        }
    }
    return 0;
}

/* What Gemma's architectures differ in, as llama.cpp reads and hard-codes it: the embedding scaled by
 * sqrt(dim), GeGLU, scores scaled by query_pre_attn_scalar^-1/2 (head_dim; the 27B models' dim / heads, which
 * llama.cpp tells by their layer count), Gemma 2's sliding window on every other layer and its soft caps,
 * Gemma 3's on five layers of six with rope base 10000 there. The norms' weights come with Gemma's 1 + w
 * already added by the converter. */
static int gemma_keys(llm_model *m, const gguf_ctx *g, const char *arch, int gemma2, int gemma3, llm_err *err)
{
    llm_config *c = &m->cfg;
    char k[96];
    c->act = LLM_ACT_GELU_TANH;
    c->embd_scale = sqrtf((float)c->dim);
    int big = (gemma2 && c->n_layers == 46) || (gemma3 && c->n_layers == 62);
    if (big && c->dim % c->n_heads == 0)
        c->attn_scale = 1.0f / sqrtf((float)(c->dim / c->n_heads));
    if (!gemma2 && !gemma3)
        return 0;
    uint32_t win = gemma2 ? 4096 : 0;
    snprintf(k, sizeof(k), "%s.attention.sliding_window", arch);
    if ((gguf_get_u32(g, k, &win) != 0 && gemma3) || win == 0 || win > (1u << 30)) {
        llm_seterr(err, "%s: missing or bad %s", m->path, k);
        return -1;
    }
    c->swa_window = (int)win;
    if (gemma3) { /* (llama.cpp's Gemma 3 hard-codes 10000; EmbeddingGemma's files say it) */
        c->rope_theta_swa = 10000.0f;
        snprintf(k, sizeof(k), "%s.rope.freq_base_swa", arch);
        gguf_get_f32(g, k, &c->rope_theta_swa);
        if (!(c->rope_theta_swa > 0.0f)) {
            llm_seterr(err, "%s: bad %s", m->path, k);
            return -1;
        }
    }
    if (gemma2) {
        c->attn_softcap = 50.0f;
        c->final_softcap = 30.0f;
        snprintf(k, sizeof(k), "%s.attn_logit_softcapping", arch);
        gguf_get_f32(g, k, &c->attn_softcap);
        snprintf(k, sizeof(k), "%s.final_logit_softcapping", arch);
        gguf_get_f32(g, k, &c->final_softcap);
        if (!(c->attn_softcap >= 0.0f) || !(c->final_softcap >= 0.0f)) {
            llm_seterr(err, "%s: bad soft-capping values", m->path);
            return -1;
        }
    }
    return 0;
}

/* LongRoPE (rope_factors_long / _short.weight, f32 [head_dim / 2] each; <arch>.rope.scaling.attn_factor and
 * original_context_length), as llama.cpp's converter writes Phi 3's 128k models and llama.cpp runs them: the
 * long divisors when the context is longer than the original one (llm_rope_freq), cos and sin times the
 * attention factor at every position. A file with only one of the two, or with per-layer copies, is refused. */
static int longrope(llm_model *m, const gguf_ctx *g, const char *arch, llm_err *err)
{
    llm_config *c = &m->cfg;
    const gguf_tensor *lt = gguf_find_tensor(g, "rope_factors_long.weight");
    const gguf_tensor *st = gguf_find_tensor(g, "rope_factors_short.weight");
    if (lt == NULL && st == NULL) {
        if (gguf_find_tensor(g, "blk.0.rope_factors_long.weight") != NULL) {
            llm_seterr(err, "%s: per-layer rope_factors_long tensors are not supported", m->path);
            return -1;
        }
        return 0;
    }
    const gguf_tensor *t[2] = { lt, st };
    int rot = (c->rope_dims > 0 ? c->rope_dims : c->head_dim) / 2; /* one factor per rotating frequency */
    for (int i = 0; i < 2; i++)
        if (t[i] == NULL || t[i]->type != LLM_F32 || t[i]->ne[0] != (uint64_t)rot || t[i]->ne[1] != 1) {
            llm_seterr(err, "%s: LongRoPE needs rope_factors_long and rope_factors_short, f32 [%d] each", m->path,
                       rot);
            return -1;
        }
    if (c->rope_scaling != LLM_ROPE_SCALING_NONE || gguf_find_tensor(g, "rope_freqs.weight") != NULL) {
        llm_seterr(err, "%s: LongRoPE factors with another rope scaling", m->path);
        return -1;
    }
    char k[128];
    float attn = 1.0f;
    uint32_t orig = 0;
    snprintf(k, sizeof(k), "%s.rope.scaling.attn_factor", arch);
    gguf_get_f32(g, k, &attn);
    snprintf(k, sizeof(k), "%s.rope.scaling.original_context_length", arch);
    if (gguf_get_u32(g, k, &orig) != 0 || orig == 0)
        orig = (uint32_t)c->seq_len;
    const float *lf = lt->data, *sf = st->data;
    int ok = attn > 0.0f && attn < 100.0f && orig <= (1u << 24);
    for (int i = 0; i < rot; i++)
        ok &= lf[i] > 0.0f && lf[i] < 1e6f && sf[i] > 0.0f && sf[i] < 1e6f; /* NaN fails too */
    if (!ok) {
        llm_seterr(err, "%s: bad LongRoPE values (factors in (0, 1e6), attn_factor %g)", m->path, (double)attn);
        return -1;
    }
    m->rope_long = lf;
    m->rope_short = sf;
    c->rope_scaling = LLM_ROPE_SCALING_LONGROPE;
    c->rope_orig_ctx = (int)orig;
    c->rope_mscale = attn;
    return 0;
}

/* A partial rotary's head, reordered for the whole-rotation kernels (rotate-half layout): slot j of head_dim
 * holds the file's dim partial_slot(j): the first rope_dims/2 rotated dims, then half the passing
 * ones, then the other rope_dims/2 rotated dims (paired with the first), then the rest of the passing ones. */
static int partial_slot(const llm_config *c, int j)
{
    int half = c->head_dim / 2, r = c->rope_dims / 2, pass = half - r;
    if (j < r)
        return j;
    if (j < half)
        return 2 * r + (j - r);
    if (j < half + r)
        return r + (j - half);
    return 2 * r + pass + (j - half - r);
}

/* Rows of a matrix (or a vector's elements, rows of 1) reordered: row j of the result is row from[j % hd] of
 * head j / hd, into memory the model owns; the file's blocks too where the matrix was converted at load. */
static int reorder_heads(llm_model *m, llm_tensor *t, int hd, const int *from, llm_err *err)
{
    int vec = t->ne[1] == 1;
    size_t rows = vec ? (size_t)t->ne[0] : (size_t)t->ne[1];
    const void *have[2] = { t->data, t->src };
    size_t rb[2] = { vec ? sizeof(float) : llm_dtype_row_bytes(t->type, (uint64_t)t->ne[0]),
                     t->src != NULL ? gguf_qtype_row_bytes(t->src_type, (size_t)t->ne[0]) : 0 };
    for (int k = 0; k < 2; k++) {
        if (have[k] == NULL)
            continue;
        uint8_t *out = malloc(rows * rb[k]);
        if (llm_model_own(m, out, err) != 0)
            return -1;
        for (size_t r = 0; r < rows; r++)
            memcpy(out + r * rb[k], (const uint8_t *)have[k] + (r - r % (size_t)hd + (size_t)from[r % (size_t)hd]) *
                   rb[k], rb[k]);
        *(k == 0 ? &t->data : &t->src) = out;
    }
    return 0;
}

/* Partial rotary on rotate-half heads (Phi-4-mini: 96 of 128 dims rotate): each q and k head's rows (and
 * biases, q/k norms) reordered by partial_slot, so the whole-rotation kernels of both backends pair
 * them right and the passing dims meet identity entries of the rope tables (llm_rope_rotates); q.k is the
 * same sum in another order. Costs a copy of wq and wk. */
int llm_model_partial_rotary(llm_model *m, llm_err *err)
{
    const llm_config *c = &m->cfg;
    if (c->rope_dims <= 0 || c->rope_dims == c->head_dim)
        return 0;
    if (c->rope_layout != LLM_ROPE_HALF ||
        (c->rope_scaling != LLM_ROPE_SCALING_NONE && c->rope_scaling != LLM_ROPE_SCALING_LONGROPE)) {
        llm_seterr(err, "%s: partial rope with this layout or rope scaling is not supported", m->path);
        return -1;
    }
    int *from = malloc((size_t)c->head_dim * sizeof(int));
    if (from == NULL) {
        llm_seterr(err, "%s: out of memory", m->path);
        return -1;
    }
    for (int j = 0; j < c->head_dim; j++)
        from[j] = partial_slot(c, j);
    int rc = 0;
    for (int l = 0; l < c->n_layers && rc == 0; l++) {
        llm_layer *L = &m->layers[l];
        llm_tensor *ts[6] = { &L->wq, &L->wk, &L->bq, &L->bk, &L->q_norm, &L->k_norm };
        for (int i = 0; i < 6 && rc == 0; i++)
            if (ts[i]->data != NULL || ts[i]->src != NULL)
                rc = reorder_heads(m, ts[i], c->head_dim, from, err);
    }
    free(from);
    return rc;
}

static int load(llm_model *m, llm_err *err)
{
    gguf_ctx *g = m->gguf;
    char arch[sizeof m->arch] = "";
    if (gguf_get_str(g, "general.architecture", arch, sizeof(arch)) != 0) {
        llm_seterr(err, "%s: missing general.architecture", m->path);
        return -1;
    }
    if (!llm_model_arch_ok(arch)) {
        char names[512];
        llm_model_arch_list(names, sizeof(names));
        llm_seterr(err, "%s: unsupported architecture '%s' (%s)", m->path, arch, names);
        return -1;
    }
    snprintf(m->arch, sizeof(m->arch), "%s", arch);
    if (strcmp(arch, "bert") == 0 || strcmp(arch, "nomic-bert") == 0 || strcmp(arch, "jina-bert-v2") == 0)
        /* encoders (model_gguf_bert.c) */
        return llm_gguf_load_bert(m, err);
    if (strcmp(arch, "modern-bert") == 0)
        return llm_gguf_load_modern_bert(m, err);
    /* EmbeddingGemma: Gemma 3's layers without the causal mask (a symmetric window), then Dense modules */
    int gemma_embd = strcmp(arch, "gemma-embedding") == 0;
    int qwen3 = strcmp(arch, "qwen3") == 0 || strcmp(arch, "qwen3moe") == 0;
    int gemma3 = strcmp(arch, "gemma3") == 0 || gemma_embd;
    int gemma2 = strcmp(arch, "gemma2") == 0, gemma = gemma2 || gemma3 || strcmp(arch, "gemma") == 0;
    int phi3 = strcmp(arch, "phi3") == 0, smollm3 = strcmp(arch, "smollm3") == 0;
    int granite = strcmp(arch, "granite") == 0, granitemoe = strcmp(arch, "granitemoe") == 0;
    int olmo2 = strcmp(arch, "olmo2") == 0; /* OLMo 2 and 3: normed after the blocks, q / k norms over whole rows */
    int olmoe = strcmp(arch, "olmoe") == 0; /* OLMoE: a pre-norm mixture of experts with OLMo 2's q / k norms */
    int seed_oss = strcmp(arch, "seed_oss") == 0; /* Seed-OSS: Qwen 2's q/k/v biases, the FFN norm renamed */
    int ernie_moe = strcmp(arch, "ernie4_5-moe") == 0; /* dense leading layers, then experts + a shared one */
    /* GLM-4.5: ERNIE's layout with Qwen 2's q/k/v biases, a sigmoid router, partial rope, and a last layer for
     * multi-token prediction (NextN) that the forward pass leaves out, as llama.cpp's does */
    int glm4moe = strcmp(arch, "glm4moe") == 0;
    /* EXAONE 4: OLMo 2's norm placement with per-head q/k norms; the 32B's windows, global layers without rope */
    int exaone4 = strcmp(arch, "exaone4") == 0;
    /* gpt-oss: biases on every projection (the experts' too), a sink per head, a window on every other layer
     * (the first of each pair, as llama.cpp's fixed pattern), its experts' clamped SwiGLU */
    int gptoss = strcmp(arch, "gpt-oss") == 0;
    /* windowed layers: all but the last of every `period` (0: every layer, a windowed llama's) */
    int period = olmo2 ? 4 : gemma2 || gptoss ? 2 : gemma ? 6 : 0;
    /* Tensors no architecture here has: refused rather than left out of the sums. */
    static const char *const unused[] = { "blk.0.attn_output.bias", "blk.0.ffn_gate.bias", "blk.0.ffn_up.bias",
                                          "blk.0.ffn_down.bias", "output.bias" };
    for (size_t i = gptoss; i < sizeof(unused) / sizeof(unused[0]); i++) /* (gpt-oss's output bias: below) */
        if (gguf_find_tensor(g, unused[i]) != NULL) {
            llm_seterr(err, "%s: tensor %s is not supported (architecture %s)", m->path, unused[i], arch);
            return -1;
        }
    gguf_get_str(g, "general.name", m->name, sizeof(m->name));
    llm_config *c = &m->cfg;
    int rope_dims = 0;
    char k[7][96];
    static const char *const keys[7] = { "embedding_length", "block_count", "feed_forward_length",
                                         "attention.head_count", "attention.head_count_kv", "context_length",
                                         "attention.key_length" };
    for (int i = 0; i < 7; i++)
        snprintf(k[i], sizeof(k[i]), "%s.%s", arch, keys[i]);
    char rdk[96], thk[96], epk[96];
    snprintf(rdk, sizeof(rdk), "%s.rope.dimension_count", arch);
    snprintf(thk, sizeof(thk), "%s.rope.freq_base", arch);
    snprintf(epk, sizeof(epk), "%s.attention.layer_norm_rms_epsilon", arch);
    if (llm_gguf_get_int(m, k[0], &c->dim, 0, 1, err) || llm_gguf_get_int(m, k[1], &c->n_layers, 0, 1, err) ||
        llm_gguf_get_int(m, k[2], &c->hidden_dim, 0, 1, err) || llm_gguf_get_int(m, k[3], &c->n_heads, 0, 1, err) ||
        llm_gguf_get_int(m, k[4], &c->n_kv_heads, c->n_heads, 0, err) || llm_gguf_get_int(m, k[5], &c->seq_len, 2048, 0, err) ||
        llm_gguf_get_int(m, k[6], &c->head_dim, 0, 0, err) || llm_gguf_get_int(m, rdk, &rope_dims, 0, 0, err))
        return -1;
    if (c->n_layers <= 0 || c->n_layers > 4096 || c->n_heads <= 0) {
        llm_seterr(err, "%s: bad block_count %d / head_count %d", m->path, c->n_layers, c->n_heads);
        return -1;
    }
    if (glm4moe) { /* block_count counts its NextN layers: their tensors stay in the file, unread */
        int nextn = 0;
        char nk[96];
        snprintf(nk, sizeof(nk), "%s.nextn_predict_layers", arch);
        if (llm_gguf_get_int(m, nk, &nextn, 0, 0, err) != 0)
            return -1;
        if (nextn >= c->n_layers) {
            llm_seterr(err, "%s: %s %d leaves no layer of %d", m->path, nk, nextn, c->n_layers);
            return -1;
        }
        c->n_layers -= nextn;
    }
    if (c->head_dim == 0 && c->dim % c->n_heads == 0)
        c->head_dim = c->dim / c->n_heads;
    if (rope_dims != 0 && rope_dims != c->head_dim) { /* Phi-4-mini's, GLM-4.5's partial rotary (llm_model_partial_rotary()) */
        if (!(phi3 || glm4moe) || rope_dims < 2 || rope_dims > c->head_dim || rope_dims % 2 != 0) {
            llm_seterr(err, "%s: partial rope (rope.dimension_count %d, head_dim %d) is not supported (phi3 and "
                       "glm4moe only)", m->path, rope_dims, c->head_dim);
            return -1;
        }
        c->rope_dims = rope_dims;
    }
    if (rope_scaling_keys(m, g, arch, err) != 0 || (gemma && gemma_keys(m, g, arch, gemma2, gemma3, err) != 0) ||
        ((granite || granitemoe) && granite_keys(m, g, arch, err) != 0) || moe_keys(m, arch, err) != 0)
        return -1;
    /* a llama with a window on every layer: what our writer saves of Mistral 7B v0.1's; OLMo 3's on three
     * layers of four (llama.cpp's fixed pattern), whose rope there is never scaled (its YaRN is the global
     * layers') */
    uint32_t win = 0;
    char wk[96];
    snprintf(wk, sizeof(wk), "%s.attention.sliding_window", arch);
    if ((strcmp(arch, "llama") == 0 || olmo2 || gptoss) && gguf_get_u32(g, wk, &win) == 0) {
        if (win == 0 || win > (1u << 30)) {
            llm_seterr(err, "%s: bad %s", m->path, wk);
            return -1;
        }
        c->swa_window = (int)win;
    }
    c->post_norm_only = olmo2 || exaone4;
    if (gptoss) {
        if (c->n_expert == 0 || c->swa_window == 0) {
            llm_seterr(err, "%s: gpt-oss without %s.expert_count or %s", m->path, arch, wk);
            return -1;
        }
        c->act = LLM_ACT_SWIGLU_OAI;
    }
    c->qk_norm_full = olmo2 || olmoe;
    if (exaone4 && exaone4_keys(m, g, &period, err) != 0)
        return -1;
    /* Phi 3's 128k variants scale their rope per frequency (LongRoPE). phi3.attention.sliding_window is not
     * applied, as llama.cpp does not (it disables Phi's window). */
    if (longrope(m, g, arch, err) != 0)
        return -1;
    if ((phi3 || smollm3 || granite) && c->n_expert > 0) {
        llm_seterr(err, "%s: a %s model with experts is not supported", m->path, arch);
        return -1;
    }
    if (c->n_expert == 0 && gguf_find_tensor(g, "blk.0.ffn_gate_inp.weight") != NULL) {
        llm_seterr(err, "%s: tensor blk.0.ffn_gate_inp.weight (a router) without %s.expert_count", m->path, arch);
        return -1;
    }
    char plk[96];
    uint32_t pooling = 0;
    snprintf(plk, sizeof(plk), "%s.pooling_type", arch);
    if (gguf_get_u32(g, plk, &pooling) == 0 && pooling <= LLM_POOL_LAST)
        m->pooling = (int)pooling; /* an embedding model's (RANK: a reranker's head, below) */
    if (pooling == LLM_POOL_RANK && rank_head(m, g, arch, err) != 0)
        return -1;
    c->bidirectional = gemma_embd;
    if (gemma_embd && m->pooling == LLM_POOL_NONE)
        m->pooling = LLM_POOL_MEAN;
    c->rope_theta = 10000.0f;
    gguf_get_f32(g, thk, &c->rope_theta);
    if (olmo2 && c->swa_window > 0)
        c->rope_theta_swa = c->rope_theta;
    c->norm_eps = 1e-5f;
    gguf_get_f32(g, epk, &c->norm_eps);
    /* llama.cpp's converter permutes a llama's q/k rows for pair rotation; Qwen's stay as trained (NeoX) */
    c->rope_layout = llm_arch_llama_like(arch) ? LLM_ROPE_ADJACENT : LLM_ROPE_HALF;
    int64_t id;
    if (gguf_get_i64(g, "tokenizer.ggml.bos_token_id", &id) == 0 && id < INT32_MAX)
        c->bos_id = (int)id;
    if (gguf_get_i64(g, "tokenizer.ggml.eos_token_id", &id) == 0 && id < INT32_MAX)
        c->eos_id = (int)id;

    if (llm_gguf_take(m, "token_embd.weight", &m->tok_embd, 1, err) != 0)
        return -1;
    if (m->tok_embd.ne[1] > (1 << 24)) {
        llm_seterr(err, "%s: token_embd has %lld rows (vocab too large)", m->path, (long long)m->tok_embd.ne[1]);
        return -1;
    }
    c->vocab_size = (int)m->tok_embd.ne[1];
    if (llm_gguf_take_norm(m, "output_norm.weight", &m->out_norm, err) || llm_gguf_take(m, "output.weight", &m->output, 0, err))
        return -1;
    c->tied_embeddings = m->output.data == NULL && m->output.src == NULL; /* absent, not deferred */

    m->layers = calloc((size_t)c->n_layers, sizeof(llm_layer));
    if (llm_model_own(m, m->layers, err) != 0)
        return -1;
    for (int l = 0; l < c->n_layers; l++) {
        llm_layer *L = &m->layers[l];
        char n[96];
#define T(suffix, field) snprintf(n, sizeof(n), "blk.%d." suffix ".weight", l); \
        if (llm_gguf_take(m, n, &L->field, 1, err)) return -1;
#define N(suffix, field) snprintf(n, sizeof(n), "blk.%d." suffix ".weight", l); \
        if (llm_gguf_take_norm(m, n, &L->field, err)) return -1;
        if (!c->post_norm_only) {
            N("attn_norm", attn_norm)
        } else { /* OLMo 2 norms after its blocks only: a norm before them would be left out of the sums */
            static const char *const pre[2] = { "attn_norm", "ffn_norm" };
            for (int i = 0; i < 2; i++) {
                snprintf(n, sizeof(n), "blk.%d.%s.weight", l, pre[i]);
                if (gguf_find_tensor(g, n) != NULL) {
                    llm_seterr(err, "%s: tensor %s is not supported (architecture %s)", m->path, n, arch);
                    return -1;
                }
            }
        }
        if (phi3) { /* q|k|v and gate|up stacked by rows */
            int64_t qkv[3] = { (int64_t)c->n_heads * c->head_dim, (int64_t)c->n_kv_heads * c->head_dim,
                               (int64_t)c->n_kv_heads * c->head_dim }, gu[2] = { c->hidden_dim, c->hidden_dim };
            llm_tensor *qd[3] = { &L->wq, &L->wk, &L->wv }, *gd[2] = { &L->w_gate, &L->w_up };
            if (llm_gguf_take_fused(m, l, "attn_qkv", qkv, 3, qd, err) || llm_gguf_take_fused(m, l, "ffn_up", gu, 2, gd, err))
                return -1;
            T("attn_output", wo)
        } else {
            T("attn_q", wq) T("attn_k", wk) T("attn_v", wv) T("attn_output", wo)
        }
        if (!c->post_norm_only) {
            if (seed_oss || glm4moe || gptoss) { /* (its pre-FFN norm under the post-attention name, as llama.cpp
                                                   * maps Seed-OSS, GLM-4.5 and gpt-oss) */
                N("post_attention_norm", ffn_norm)
            } else {
                N("ffn_norm", ffn_norm)
            }
        }
        L->dense = l < c->moe_dense_lead;
        if (phi3) {
            T("ffn_down", w_down)
        } else if (!llm_layer_moe(c, L)) {
            T("ffn_gate", w_gate) T("ffn_up", w_up) T("ffn_down", w_down)
            /* a dense layer among experts: its list of experts, all absent */
            if (L->dense && llm_model_own(m, L->experts = calloc((size_t)c->n_expert * 3, sizeof(llm_tensor)),
                                          err) != 0)
                return -1;
        } else {
            T("ffn_gate_inp", ffn_gate_inp)
            if (take_experts(m, l, L, err) != 0)
                return -1;
            if (gptoss && gptoss_biases(m, l, L, err) != 0)
                return -1;
            /* the router's bias for choosing (not weighting) experts: ERNIE 4.5 MoE's, GLM-4.5's */
            snprintf(n, sizeof(n), "blk.%d.exp_probs_b.bias", l);
            if (llm_gguf_take_vec(m, n, &L->exp_probs_b, 0, err) != 0)
                return -1;
            /* a shared expert: Qwen 2 MoE's behind a sigmoid gate, GraniteMoeShared's added as it is */
            char sn[96];
            snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp_shexp.weight", l);
            snprintf(sn, sizeof(sn), "blk.%d.ffn_gate_shexp.weight", l);
            int gated = gguf_find_tensor(g, n) != NULL;
            if (gated && granitemoe) {
                llm_seterr(err, "%s: tensor %s is not supported (architecture %s)", m->path, n, arch);
                return -1;
            }
            if (gated && llm_gguf_take_vec(m, n, &L->shexp_gate, 1, err) != 0)
                return -1;
            if (gated || ((granitemoe || ernie_moe || glm4moe) && gguf_find_tensor(g, sn) != NULL)) {
                T("ffn_gate_shexp", w_gate) T("ffn_up_shexp", w_up) T("ffn_down_shexp", w_down)
            }
        }
#undef T
#undef N
#define V(suffix, field, required) snprintf(n, sizeof(n), "blk.%d." suffix, l); \
        if (llm_gguf_take_vec(m, n, &L->field, required, err)) return -1;
        V("attn_q.bias", bq, 0) V("attn_k.bias", bk, 0) V("attn_v.bias", bv, 0)
        V("attn_q_norm.weight", q_norm, qwen3 || gemma3 || olmo2 || olmoe || exaone4)
        V("attn_k_norm.weight", k_norm, qwen3 || gemma3 || olmo2 || olmoe || exaone4)
        V("attn_output.bias", bo, gptoss) V("attn_sinks.weight", attn_sinks, gptoss)
        if (!seed_oss && !glm4moe && !gptoss) { /* (Seed-OSS's, GLM-4.5's and gpt-oss's tensor of that name is their
                                                 * FFN norm, above) */
            V("post_attention_norm.weight", post_attn_norm, gemma2 || gemma3 || c->post_norm_only)
        }
        V("post_ffw_norm.weight", post_ffn_norm, gemma2 || gemma3 || c->post_norm_only)
#undef V
        L->swa = c->swa_window > 0 && (period == 0 || l % period < period - 1);
        L->nope = (smollm3 && (l + 1) % 4 == 0) || /* llama.cpp's n_no_rope_layer_step, 4 (no GGUF key says it) */
                  (exaone4 && c->swa_window > 0 && !L->swa); /* EXAONE 4's global layers in a windowed model */
    }
    const gguf_tensor *rf = gguf_find_tensor(g, "rope_freqs.weight");
    if (rf != NULL) {
        if (rf->type != LLM_F32 || rf->ne[0] != (uint64_t)(c->head_dim / 2) || rf->ne[1] != 1) {
            llm_seterr(err, "%s: rope_freqs.weight must be f32 [%d] (got %s [%llu])", m->path, c->head_dim / 2,
                       llm_dtype_name(rf->type), (unsigned long long)rf->ne[0]);
            return -1;
        }
        m->rope_freqs = rf->data;
    }
    if (llm_model_partial_rotary(m, err) != 0 || dense_modules(m, g, err) != 0 || llm_model_validate(m, err) != 0)
        return -1;
    return 0;
}

llm_model *llm_model_load_gguf(const char *path, unsigned flags, llm_err *err)
{
    llm_model *m = llm_model_alloc("gguf", path, err);
    if (m == NULL)
        return NULL;
    m->defer_kq = (flags & LLM_LOAD_DEFER_KQ) != 0;
    m->gguf = gguf_open(path, err);
    if (m->gguf == NULL || load(m, err) != 0 ||
        (gguf_find_kv(m->gguf, "tokenizer.ggml.model") != NULL && (m->tok = llm_tok_load_gguf(m->gguf, err)) == NULL)) {
        llm_model_free(m);
        return NULL;
    }
    m->file_bytes = m->gguf->size;
    return m;
}

int llm_model_has_deferred_except(const llm_model *m, uint64_t keep)
{
    /* the matrices whose conversion LLM_LOAD_DEFER_KQ may defer: all of them */
    int n = llm_model_n_mats(m), any = 0;
    llm_tensor **t = malloc((size_t)n * sizeof(*t));
    if (t == NULL)
        return 1; /* no memory: say so, creating fails later */
    llm_model_mats((llm_model *)(uintptr_t)m, t);
    for (int i = 0; i < n && !any; i++)
        any = t[i]->data == NULL && t[i]->src != NULL && !(t[i]->src_type < 64 && (keep >> t[i]->src_type & 1u));
    free(t);
    return any;
}

int llm_model_finish_deferred_except(llm_model *m, uint64_t keep, llm_err *err)
{
    m->defer_kq = 0; /* requantize converts from here on */
    int n = llm_model_n_mats(m), rc = 0;
    llm_tensor **t = malloc((size_t)n * sizeof(*t));
    if (t == NULL) {
        llm_seterr(err, "%s: out of memory", m->path);
        return -1;
    }
    llm_model_mats(m, t);
    for (int i = 0; i < n && rc == 0; i++) {
        if (t[i]->data != NULL || t[i]->src == NULL || (t[i]->src_type < 64 && (keep >> t[i]->src_type & 1u)))
            continue;
        const void *src = t[i]->src;
        llm_tensor done = *t[i];
        /* the file's tensor again, for requantize (its name for errors) */
        const gguf_tensor *gt = NULL;
        gguf_tensor own; /* blocks a loader made (Hugging Face's MXFP4 experts repacked): the tensor itself */
        if (m->gguf == NULL) {
            own = (gguf_tensor){ .name = { 6, "blocks" }, .n_dims = 2,
                                 .ne = { (uint64_t)done.ne[0], (uint64_t)done.ne[1], 1, 1 }, .type = done.src_type,
                                 .data = src,
                                 .nbytes = gguf_qtype_row_bytes(done.src_type, (uint64_t)done.ne[0]) * (size_t)done.ne[1] };
            gt = &own;
        }
        for (uint64_t k = 0; m->gguf != NULL && k < m->gguf->n_tensors && gt == NULL; k++) {
            const gguf_tensor *f = &m->gguf->tensors[k];
            if ((const uint8_t *)src >= (const uint8_t *)f->data &&
                (const uint8_t *)src < (const uint8_t *)f->data + f->nbytes)
                gt = f;
        }
        gguf_tensor part; /* an expert's matrix of a 3-D tensor: its slice */
        if (gt != NULL && gt->ne[2] > 1) {
            size_t bytes = gguf_qtype_row_bytes(gt->type, gt->ne[0]) * (size_t)gt->ne[1];
            part = expert_slice(gt, (uint64_t)((const uint8_t *)src - (const uint8_t *)gt->data) / bytes);
            gt = part.data == src ? &part : NULL;
        }
        if (gt == NULL || gt->data != src) {
            llm_seterr(err, "%s: a deferred tensor is not in the file", m->path);
            rc = -1;
        } else if ((rc = requantize(m, gt, &done, err)) == 0) {
            for (int k = i; k < n; k++) /* aliases share the conversion */
                if (t[k]->data == NULL && t[k]->src == src)
                    t[k]->data = done.data;
        }
    }
    free(t);
    return rc;
}
