/* Re-save a loaded model as GGUF (llama.cpp layout) or as a Hugging Face directory. */
#include "gguf_quants.h"
#include "json_file.h"
#include "parallel.h"
#include "model_priv.h"
#include "model_write.h"
#include "gguf.h"
#include "tokenizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

void llm_llama3_rope_freqs(const llm_config *c, float *out)
{
    /* float32 throughout, as the converter's torch arithmetic is */
    const float two_pi = 6.28318530717958647692f;
    float lo_wavelen = (float)c->rope_orig_ctx / c->rope_low_freq_factor;
    float hi_wavelen = (float)c->rope_orig_ctx / c->rope_high_freq_factor;
    for (int i = 0; i < c->head_dim / 2; i++) {
        float freq = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->head_dim);
        float wavelen = two_pi / freq;
        if (wavelen < hi_wavelen) {
            out[i] = 1.0f;
        } else if (wavelen > lo_wavelen) {
            out[i] = c->rope_factor;
        } else {
            float smooth = ((float)c->rope_orig_ctx / wavelen - c->rope_low_freq_factor) /
                           (c->rope_high_freq_factor - c->rope_low_freq_factor);
            out[i] = 1.0f / ((1.0f - smooth) / c->rope_factor + smooth);
        }
    }
}

static uint32_t file_type(llm_dtype t)
{
    switch ((uint32_t)t) {
    case LLM_F32: return 0;
    case LLM_F16: return 1;
    case LLM_Q4_0: return 2;
    case LLM_Q8_0: return 7;
    case LLM_BF16: return 32;
    case GGML_Q2_K: return 10; /* llama.cpp's "mostly Q2_K" */
    case GGML_Q3_K: return 11; /* llama.cpp's "mostly Q3_K_S" */
    case GGML_Q4_K: return 14; /* "mostly Q4_K_S" */
    case GGML_Q5_K: return 16; /* "mostly Q5_K_S" */
    }
    return 0;
}

void llm_gguf_w_meta(gguf_writer *w, const char *arch, const llm_config *c, int shared, const char *name,
                     llm_dtype dtype)
{
    char k[96];
#define KEY(suffix) (snprintf(k, sizeof(k), "%s." suffix, arch), k)
    gguf_w_str(w, "general.architecture", arch);
    gguf_w_str(w, "general.name", name);
    gguf_w_u32(w, "general.file_type", file_type(dtype));
    gguf_w_u32(w, KEY("context_length"), (uint32_t)c->seq_len);
    gguf_w_u32(w, KEY("embedding_length"), (uint32_t)c->dim);
    gguf_w_u32(w, KEY("block_count"), (uint32_t)c->n_layers);
    /* (Granite MoE's is its experts' width, as llama.cpp's converter writes it; a shared expert's below) */
    int granitemoe = strcmp(arch, "granitemoe") == 0, ff_is_experts = granitemoe || strcmp(arch, "olmoe") == 0;
    int ernie_moe = strcmp(arch, "ernie4_5-moe") == 0; /* (its dense layers' width) */
    int glm = strcmp(arch, "glm4moe") == 0;
    gguf_w_u32(w, KEY("feed_forward_length"),
               (uint32_t)(ff_is_experts ? c->expert_ff : c->dense_ff > 0 ? c->dense_ff : c->hidden_dim));
    gguf_w_u32(w, KEY("attention.head_count"), (uint32_t)c->n_heads);
    gguf_w_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_heads);
    gguf_w_u32(w, KEY("rope.dimension_count"), (uint32_t)(c->rope_dims > 0 ? c->rope_dims : c->head_dim));
    if (c->head_dim * c->n_heads != c->dim) {
        gguf_w_u32(w, KEY("attention.key_length"), (uint32_t)c->head_dim);
        gguf_w_u32(w, KEY("attention.value_length"), (uint32_t)c->head_dim);
    }
    gguf_w_f32(w, KEY("rope.freq_base"), c->rope_theta);
    gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), c->norm_eps);
    gguf_w_u32(w, KEY("vocab_size"), (uint32_t)c->vocab_size);
    if (c->swa_window > 0)
        gguf_w_u32(w, KEY("attention.sliding_window"), (uint32_t)c->swa_window);
    if (c->n_expert > 0) {
        gguf_w_u32(w, KEY("expert_count"), (uint32_t)c->n_expert);
        gguf_w_u32(w, KEY("expert_used_count"), (uint32_t)c->n_expert_used);
        if (strcmp(arch, "llama") != 0 && !ff_is_experts) /* a llama's experts are feed_forward_length wide */
            gguf_w_u32(w, KEY("expert_feed_forward_length"), (uint32_t)c->expert_ff);
        int qwen2moe = strcmp(arch, "qwen2moe") == 0, olmoe = strcmp(arch, "olmoe") == 0;
        if (qwen2moe || ((granitemoe || ernie_moe) && shared)) /* the shared expert */
            gguf_w_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)c->hidden_dim);
        if (ernie_moe) { /* (llama.cpp requires both) */
            gguf_w_u32(w, KEY("leading_dense_block_count"), (uint32_t)c->moe_dense_lead);
            gguf_w_u32(w, KEY("interleave_moe_layer_step"), 1);
        }
        if (glm) { /* as llama.cpp's converter writes GLM-4.5 (no NextN layer here) */
            gguf_w_u32(w, KEY("expert_shared_count"), shared ? (uint32_t)(c->hidden_dim / c->expert_ff) : 0);
            gguf_w_u32(w, KEY("leading_dense_block_count"), (uint32_t)c->moe_dense_lead);
            gguf_w_u32(w, KEY("expert_gating_func"), c->moe_sigmoid ? 2 : 1);
            gguf_w_f32(w, KEY("expert_weights_scale"), c->moe_w_scale > 0.0f ? c->moe_w_scale : 1.0f);
            gguf_w_u32(w, KEY("nextn_predict_layers"), 0);
        }
        /* not the architecture's way (which llama.cpp keeps whatever this says; GLM-4.5's default is false) */
        if (glm || c->moe_norm_topk == (qwen2moe || olmoe))
            gguf_w_bool(w, KEY("expert_weights_norm"), c->moe_norm_topk);
    }
    if (strcmp(arch, "granite") == 0 || granitemoe) {
        gguf_w_f32(w, KEY("embedding_scale"), c->embd_scale);
        gguf_w_f32(w, KEY("attention.scale"), c->attn_scale);
        gguf_w_f32(w, KEY("residual_scale"), c->residual_scale);
        gguf_w_f32(w, KEY("logit_scale"), c->logit_scale);
    }
    if (strcmp(arch, "gemma2") == 0) {
        gguf_w_f32(w, KEY("attn_logit_softcapping"), c->attn_softcap);
        gguf_w_f32(w, KEY("final_logit_softcapping"), c->final_softcap);
    }
    if (c->rope_scaling == LLM_ROPE_SCALING_LONGROPE) { /* the factors are tensors (the caller's) */
        gguf_w_f32(w, KEY("rope.scaling.attn_factor"), c->rope_mscale);
        gguf_w_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)c->rope_orig_ctx);
    }
    if (c->rope_scaling == LLM_ROPE_SCALING_YARN || c->rope_scaling == LLM_ROPE_SCALING_LINEAR) {
        int yarn = c->rope_scaling == LLM_ROPE_SCALING_YARN;
        gguf_w_str(w, KEY("rope.scaling.type"), yarn ? "yarn" : "linear");
        gguf_w_f32(w, KEY("rope.scaling.factor"), c->rope_factor);
        gguf_w_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)c->rope_orig_ctx);
        if (yarn) { /* llama.cpp's attn_factor multiplies 1 + 0.1 ln factor */
            float base = llm_yarn_mscale(c->rope_factor);
            if (fabsf(c->rope_mscale / base - 1.0f) > 1e-6f)
                gguf_w_f32(w, KEY("rope.scaling.attn_factor"), c->rope_mscale / base);
            if (c->yarn_beta_fast != 32.0f || c->yarn_beta_slow != 1.0f) {
                gguf_w_f32(w, KEY("rope.scaling.yarn_beta_fast"), c->yarn_beta_fast);
                gguf_w_f32(w, KEY("rope.scaling.yarn_beta_slow"), c->yarn_beta_slow);
            }
        }
    }
#undef KEY
}

/* ---------- tensor conversion while writing ---------- */

typedef struct {
    const llm_tensor *src;
    llm_dtype dst;
    int perm;        /* 0 none, 1 half->adjacent (to GGUF), 2 adjacent->half (to HF), 3 a partial rotary's
                      * reordered heads back to the file's order (rope_dims of head_dim rotating) */
    int head_dim, rope_dims;
    float *tmp;      /* ne[0] floats */
    float add;       /* added to a vector's elements (Gemma's norms: 1 + w in memory and GGUF, w in HF) */
    int n_exp;       /* > 0: src is expert 0's matrix of a kind in a layer's experts (llm_layer.experts, 3 apart),
                      * written as one [n_exp][rows][cols] tensor ... */
    int exp_parts;   /* ... or, 2, [n_exp][2 rows][cols]: each expert's src kind then the next stacked (Granite
                      * MoE's gate | up) */
    const llm_tensor *part[3]; /* n_part > 0: these matrices stacked by rows, one tensor (Phi 3's attn_qkv, ffn_up) */
    int n_part, perm_parts;    /* ... perm applying to the first perm_parts of them (q and k of q|k|v) */
} conv;

static int64_t src_row(const conv *c, int64_t r)
{
    if (c->perm == 0)
        return r;
    int64_t hd = c->head_dim, half = hd / 2, base = r - r % hd, p = r % hd;
    if (c->perm == 1) /* dst p = 2i + j reads HF row j*half + i */
        return base + (p % 2) * half + p / 2;
    if (c->perm == 3) { /* the file's dim p from our slot: partial_slot's inverse (model_gguf.c) */
        int64_t r2 = c->rope_dims / 2, pass = half - r2;
        return base + (p < r2 ? p : p < 2 * r2 ? half + (p - r2) : p < 2 * r2 + pass ? r2 + (p - 2 * r2)
                                                                                    : half + r2 + (p - 2 * r2 - pass));
    }
    return base + 2 * (p % half) + p / half; /* dst p = j*half + i reads GGUF row 2i + j */
}

/* Rows row0 .. row0 + n of a conversion into dst, with tmp (ne[0] floats) for rows that go through f32. */
static void conv_rows(const conv *c, uint64_t row0, uint64_t n, uint8_t *dst, float *tmp)
{
    size_t n0 = (size_t)c->src->ne[0];
    size_t db = gguf_qtype_row_bytes(c->dst, n0);
    for (uint64_t i = 0; i < n; i++) {
        const llm_tensor *t = c->src;
        int64_t r = (int64_t)(row0 + i);
        if (c->n_exp > 0) { /* row r of the 3-D tensor: expert r / (parts rows)'s part, its row r % rows */
            int64_t rows = c->src->ne[1], parts = c->exp_parts > 1 ? c->exp_parts : 1;
            t += 3 * (r / (rows * parts)) + (r / rows) % parts;
            r %= rows;
        }
        int pi = 0;
        for (; pi < c->n_part; pi++) { /* row r of the stack: the part it falls in */
            t = c->part[pi];
            if (r < t->ne[1])
                break;
            r -= t->ne[1];
        }
        int64_t sr = c->n_part > 0 && pi >= c->perm_parts ? r : src_row(c, r);
        size_t sb = llm_dtype_row_bytes(t->type, n0);
        uint8_t *d = dst + i * db;
        if (t->src != NULL && t->type != c->dst) {
            /* converted at load (K-quants, Q4_1, Q5_*): from the file's own blocks, rounded once (copied when
             * they are what is asked for) */
            size_t fb = gguf_qtype_row_bytes(t->src_type, n0);
            const uint8_t *f = (const uint8_t *)t->src + (size_t)sr * fb;
            if (t->src_type == (uint32_t)c->dst) {
                memcpy(d, f, fb);
            } else {
                gguf_qtype_to_f32(t->src_type, f, tmp, n0);
                gguf_row_from_f32(c->dst, tmp, d, n0);
            }
            continue;
        }
        const uint8_t *s = (const uint8_t *)t->data + (size_t)sr * sb;
        if (t->type == c->dst) {
            memcpy(d, s, sb);
        } else {
            llm_row_to_f32(t->type, s, tmp, n0);
            gguf_row_from_f32(c->dst, tmp, d, n0);
        }
    }
}

typedef struct {
    const conv *c;
    uint64_t    row0, n; /* rows row0 .. row0 + n of the tensor, written from dst */
    uint8_t    *dst;
    float      *tmp;     /* job 0: the conversion's own; others their own, NULL if it could not be had */
} conv_job;

static void *conv_job_run(void *arg)
{
    conv_job *j = arg;
    if (j->tmp != NULL)
        conv_rows(j->c, j->row0, j->n, j->dst, j->tmp);
    return NULL;
}

/* The rows of a chunk on all cores (K-quant writers' fits cost 10-35 ns a weight: minutes for a 3B model on
 * one); a job whose buffer could not be allocated is done by the caller afterwards. */
static int conv_fill(void *user, uint64_t row0, uint64_t n, void *dst, llm_err *err)
{
    (void)err;
    conv *c = user;
    size_t db = gguf_qtype_row_bytes(c->dst, (size_t)c->src->ne[0]);
    conv_job jobs[LLM_PARALLEL_MAX];
    int nj = llm_parallel_jobs((size_t)n, 16);
    for (int k = 0; k < nj; k++) {
        uint64_t a = n * (uint64_t)k / (uint64_t)nj, b = n * (uint64_t)(k + 1) / (uint64_t)nj;
        jobs[k] = (conv_job){ c, row0 + a, b - a, (uint8_t *)dst + a * db,
                              k == 0 ? c->tmp : malloc((size_t)c->src->ne[0] * sizeof(float)) };
    }
    llm_parallel_run(nj, conv_job_run, jobs, sizeof(jobs[0]));
    for (int k = 1; k < nj; k++) {
        if (jobs[k].tmp == NULL)
            conv_rows(c, jobs[k].row0, jobs[k].n, jobs[k].dst, c->tmp);
        free(jobs[k].tmp);
    }
    return 0;
}

typedef struct {
    conv   *cv;
    int     n, cap;
    llm_err *err;
    int     oom;
    int     rope_dims; /* a partial rotary's (perm 3 conversions take it) */
} conv_list;

static conv *conv_add(conv_list *l, const llm_tensor *t, llm_dtype dst, int perm, int head_dim)
{
    if (l->n == l->cap) {
        l->oom = 1; /* sized up front */
        return NULL;
    }
    conv *c = &l->cv[l->n];
    c->src = t; c->dst = dst; c->perm = perm; c->head_dim = head_dim; c->n_exp = 0; c->exp_parts = 0; c->n_part = 0;
    c->rope_dims = perm == 3 ? l->rope_dims : 0; c->perm_parts = 0;
    c->tmp = malloc((size_t)t->ne[0] * sizeof(float));
    if (c->tmp == NULL) {
        l->oom = 1;
        return NULL;
    }
    l->n++;
    return c;
}

static void conv_free(conv_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->cv[i].tmp);
    free(l->cv);
}

/* Quantised types need rows that are a multiple of their block (Q4_K / Q5_K: 256, else Q8_0); others fall back to f16. */
static llm_dtype mat_type(llm_dtype want, int64_t ne0)
{
    return (llm_dtype)gguf_write_type((uint32_t)want, (uint64_t)ne0);
}

static void add_mat(gguf_writer *w, conv_list *l, const char *name, const llm_tensor *t, llm_dtype dt, int perm,
                    int head_dim)
{
    llm_dtype d = t->ne[1] == 1 && t->type == LLM_F32 && dt == LLM_F32 ? LLM_F32 : dt;
    d = t->ne[1] == 1 ? LLM_F32 : mat_type(d, t->ne[0]); /* 1-D tensors (norms) stay f32 */
    conv *c = conv_add(l, t, d, perm, head_dim);
    if (c == NULL)
        return;
    uint64_t ne[2] = { (uint64_t)t->ne[0], (uint64_t)t->ne[1] };
    gguf_w_tensor_fill(w, name, d, t->ne[1] == 1 ? 1 : 2, ne, conv_fill, c);
}

/* A layer's experts of one kind (which: 0 gate, 1 up, 2 down) as one 3-D tensor, llama.cpp's ffn_*_exps. */
static void add_experts(gguf_writer *w, conv_list *l, const char *name, const llm_layer *L, int n_exp, int which,
                        llm_dtype dt)
{
    const llm_tensor *t = &L->experts[which];
    conv *c = conv_add(l, t, mat_type(dt, t->ne[0]), 0, 0);
    if (c == NULL)
        return;
    c->n_exp = n_exp;
    uint64_t ne[3] = { (uint64_t)t->ne[0], (uint64_t)t->ne[1], (uint64_t)n_exp };
    gguf_w_tensor_fill(w, name, c->dst, 3, ne, conv_fill, c);
}

/* n matrices of the same width as one, their rows stacked in order (Phi 3's q|k|v and gate|up); a partial
 * rotary's q and k heads (rope_dims > 0, the first two parts) back in the file's order. */
static void add_fused(gguf_writer *w, conv_list *l, const char *name, const llm_tensor *const *parts, int n,
                      llm_dtype dt, int rope_dims, int head_dim)
{
    conv *c = conv_add(l, parts[0], mat_type(dt, parts[0]->ne[0]), rope_dims > 0 ? 3 : 0, head_dim);
    if (c == NULL)
        return;
    c->rope_dims = rope_dims;
    c->perm_parts = rope_dims > 0 ? 2 : 0;
    uint64_t ne[2] = { (uint64_t)parts[0]->ne[0], 0 };
    for (int i = 0; i < n; i++) {
        c->part[i] = parts[i];
        ne[1] += (uint64_t)parts[i]->ne[1];
    }
    c->n_part = n;
    gguf_w_tensor_fill(w, name, c->dst, 2, ne, conv_fill, c);
}

/* One row of n floats (a bias, a q/k norm) with its elements permuted as a matrix's rows would be. */
static int conv_fill_vec(void *user, uint64_t row0, uint64_t n, void *dst, llm_err *err)
{
    (void)row0; (void)n; (void)err;
    conv *c = user;
    const float *s = c->src->data; /* vectors are F32 once loaded */
    for (int64_t i = 0; i < c->src->ne[0]; i++)
        c->tmp[i] = s[src_row(c, i)] + c->add;
    llm_row_from_f32(c->dst, c->tmp, dst, (size_t)c->src->ne[0]);
    return 0;
}

static void add_vec(gguf_writer *w, conv_list *l, const char *name, const llm_tensor *t, int perm, int head_dim)
{
    conv *c = conv_add(l, t, LLM_F32, perm, head_dim);
    if (c == NULL)
        return;
    uint64_t ne[1] = { (uint64_t)t->ne[0] };
    gguf_w_tensor_fill(w, name, LLM_F32, 1, ne, conv_fill_vec, c);
}

/* Every tokenizer.* key but add_eos_token, which the caller writes from the loaded tokenizer (gen-model
 * --add-eos may have changed it). */
static void copy_tokenizer_keys(gguf_writer *w, const gguf_ctx *g)
{
    static const char add_eos[] = "tokenizer.ggml.add_eos_token";
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (kv->key.len > 10 && memcmp(kv->key.ptr, "tokenizer.", 10) == 0 &&
            !(kv->key.len == sizeof(add_eos) - 1 && memcmp(kv->key.ptr, add_eos, kv->key.len) == 0))
            gguf_w_kv_copy(w, kv);
    }
}

/* Tokenizer of the source: its GGUF keys, or converted from the file it was loaded from. */
static int write_tokenizer_meta(gguf_writer *w, const llm_model *m, llm_err *err)
{
    if (strcmp(m->format, "gguf") == 0 && m->gguf != NULL && m->tok_path[0] == 0) {
        copy_tokenizer_keys(w, m->gguf);
        gguf_w_bool(w, "tokenizer.ggml.add_eos_token", m->tok != NULL && llm_tok_add_eos(m->tok));
        return 0;
    }
    if (m->tok != NULL && llm_tok_kind_of(m->tok) == LLM_TOK_WPM) /* a BERT's (tokenizer.json) */
        return llm_gguf_w_wpm_from_tok(w, m->tok, m->cfg.n_types > 0 ? m->cfg.n_types : 2, err);
    if (m->tok != NULL && llm_tok_kind_of(m->tok) == LLM_TOK_UGM) /* an XLM-RoBERTa's (tokenizer.json) */
        return llm_gguf_w_ugm_from_tok(w, m->tok, m->cfg.n_types > 0 ? m->cfg.n_types : 1, err);
    int modern = strcmp(m->arch, "modern-bert") == 0; /* [CLS] text [SEP]: the config's ids */
    if (m->tok_path[0] != 0) {
        size_t n = strlen(m->tok_path);
        if (n > 5 && strcmp(m->tok_path + n - 5, ".json") == 0)
            return modern ? llm_gguf_w_bpe_cls_sep_from_hf(w, m->tok_path, m->cfg.bos_id, m->cfg.eos_id, err)
                          : llm_gguf_w_bpe_from_hf(w, m->tok_path, NULL, err);
        if (n > 5 && strcmp(m->tok_path + n - 5, ".gguf") == 0) {
            gguf_ctx *g = gguf_open(m->tok_path, err);
            if (g == NULL)
                return -1;
            copy_tokenizer_keys(w, g);
            gguf_close(g);
            gguf_w_bool(w, "tokenizer.ggml.add_eos_token", m->tok != NULL && llm_tok_add_eos(m->tok));
            return 0;
        }
        if (n > 6 && strcmp(m->tok_path + n - 6, ".model") == 0 && m->tok != NULL) /* SentencePiece's own */
            return llm_gguf_w_spm_from_tok(w, m->tok, err);
        return llm_gguf_w_spm_from_llama2c(w, m->tok_path, m->cfg.vocab_size, err);
    }
    if (strcmp(m->format, "hf") == 0) {
        char p[1100];
        snprintf(p, sizeof(p), "%s/tokenizer.json", m->path);
        if (access(p, R_OK) == 0)
            return modern ? llm_gguf_w_bpe_cls_sep_from_hf(w, p, m->cfg.bos_id, m->cfg.eos_id, err)
                          : llm_gguf_w_bpe_from_hf(w, p, NULL, err);
        if (m->tok != NULL && llm_tok_kind_of(m->tok) == LLM_TOK_SPM) /* the directory's tokenizer.model */
            return llm_gguf_w_spm_from_tok(w, m->tok, err);
    }
    return 0; /* no tokenizer known: weights only */
}

int llm_model_rank_head(llm_model *m, llm_err *err)
{
    int32_t id[2] = { m->tok ? llm_tok_find(m->tok, "yes") : -1, m->tok ? llm_tok_find(m->tok, "no") : -1 };
    const llm_tensor *head = m->cfg.tied_embeddings ? &m->tok_embd : &m->output;
    if (id[0] < 0 || id[1] < 0 || id[0] >= head->ne[1] || id[1] >= head->ne[1]) {
        llm_seterr(err, "%s: a reranker's head needs a tokenizer with the tokens \"yes\" and \"no\"", m->path);
        return -1;
    }
    if (!gguf_qtype_known((uint32_t)head->type) || head->data == NULL) {
        llm_seterr(err, "%s: the language-model head cannot be read here", m->path);
        return -1;
    }
    float *cls = malloc(2 * (size_t)m->cfg.dim * sizeof(float));
    if (llm_model_own(m, cls, err) != 0)
        return -1;
    size_t rb = gguf_qtype_row_bytes((uint32_t)head->type, (uint64_t)m->cfg.dim);
    for (int k = 0; k < 2; k++)
        gguf_qtype_to_f32((uint32_t)head->type, (const uint8_t *)head->data + (size_t)id[k] * rb,
                          cls + (size_t)k * (size_t)m->cfg.dim, (size_t)m->cfg.dim);
    m->cls = cls;
    m->n_cls = 2;
    return 0;
}

/* A BERT (nomic-bert, jina-bert-v2) encoder's tensors as llama.cpp's converter names them (model_gguf_bert.c reads them
 * back): the positions' and token types' rows stay F32 as it keeps them; a cross-encoder's head as cls /
 * cls.output. */
static void add_bert(gguf_writer *w, conv_list *l, const llm_model *m, llm_dtype dtype)
{
    const llm_config *c = &m->cfg;
    int hd = c->head_dim;
    add_mat(w, l, "token_embd.weight", &m->tok_embd, dtype, 0, hd);
    if (m->pos_embd.data != NULL) /* (nomic-bert rotates instead) */
        add_mat(w, l, "position_embd.weight", &m->pos_embd, LLM_F32, 0, hd);
    add_mat(w, l, "token_types.weight", &m->type_embd, LLM_F32, 0, hd);
    add_vec(w, l, "token_embd_norm.weight", &m->embd_norm, 0, hd);
    add_vec(w, l, "token_embd_norm.bias", &m->embd_norm_b, 0, hd);
    for (int i = 0; i < c->n_layers; i++) {
        const llm_layer *L = &m->layers[i];
        static const char *const lin[6] = { "attn_q", "attn_k", "attn_v", "attn_output", "ffn_up", "ffn_down" };
        const llm_tensor *wt[6] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_up, &L->w_down };
        const llm_tensor *bt[6] = { &L->bq, &L->bk, &L->bv, &L->bo, &L->b_up, &L->b_down };
        char n[64];
        /* nomic-bert: q|k|v fused, a SwiGLU FFN, no biases; jina-bert-v2: BERT's with a gated FFN */
        int nomic = L->w_gate.data != NULL && c->alibi_max_bias == 0.0f;
        if (nomic) {
            snprintf(n, sizeof(n), "blk.%d.attn_qkv.weight", i);
            add_fused(w, l, n, wt, 3, dtype, 0, hd);
        }
        if (L->w_gate.data != NULL) {
            snprintf(n, sizeof(n), "blk.%d.ffn_gate.weight", i);
            add_mat(w, l, n, &L->w_gate, dtype, 0, hd);
        }
        for (int k = nomic ? 3 : 0; k < 6; k++) {
            snprintf(n, sizeof(n), "blk.%d.%s.weight", i, lin[k]);
            add_mat(w, l, n, wt[k], dtype, 0, hd);
            snprintf(n, sizeof(n), "blk.%d.%s.bias", i, lin[k]);
            if (bt[k]->data != NULL)
                add_vec(w, l, n, bt[k], 0, hd);
        }
        const llm_tensor *nt[4] = { &L->attn_norm, &L->attn_norm_b, &L->ffn_norm, &L->ffn_norm_b };
        static const char *const norms[4] = { "attn_output_norm.weight", "attn_output_norm.bias",
                                              "layer_output_norm.weight", "layer_output_norm.bias" };
        for (int k = 0; k < 4; k++) {
            snprintf(n, sizeof(n), "blk.%d.%s", i, norms[k]);
            add_vec(w, l, n, nt[k], 0, hd);
        }
    }
    if (m->n_cls > 0) {
        uint64_t out[2] = { (uint64_t)c->dim, (uint64_t)m->n_cls }, dense[2] = { (uint64_t)c->dim, (uint64_t)c->dim };
        gguf_w_tensor(w, "cls.output.weight", LLM_F32, 2, out, m->cls);
        if (m->cls_b != NULL)
            gguf_w_tensor(w, "cls.output.bias", LLM_F32, 1, &out[1], m->cls_b);
        if (m->cls_dense != NULL) {
            gguf_w_tensor(w, "cls.weight", LLM_F32, 2, dense, m->cls_dense);
            gguf_w_tensor(w, "cls.bias", LLM_F32, 1, &dense[0], m->cls_dense_b);
        }
    }
}

/* ModernBERT's windowed layers as both formats say them: all but every N-th (0, N, 2N, ...); N (the layer
 * count when only the first is global, 1 without a window), or -1 + err when they are laid out otherwise. */
static int modern_bert_pattern(const llm_model *m, const char *path, llm_err *err)
{
    const llm_config *c = &m->cfg;
    int pattern = c->n_layers;
    for (int l = 1; l < c->n_layers; l++)
        if (!m->layers[l].swa) {
            pattern = l;
            break;
        }
    for (int l = 0; c->swa_window > 0 && l < c->n_layers; l++)
        if (m->layers[l].swa != (l % pattern != 0)) {
            llm_seterr(err, "%s: the windowed layers are not all but every N-th one: not a ModernBERT", path);
            return -1;
        }
    return c->swa_window > 0 ? pattern : 1;
}

/* hidden_activation's name for the FFN's gate (transformers' names, as both formats keep it). */
static const char *act_name(int act)
{
    return act == LLM_ACT_GELU_ERF ? "gelu" : act == LLM_ACT_GELU_TANH ? "gelu_pytorch_tanh" : "silu";
}

/* ModernBERT's keys (its norms' epsilon, the window's pattern, the activation) beside llm_gguf_w_meta's. */
static int modern_bert_keys(gguf_writer *w, const llm_model *m, const char *path, llm_err *err)
{
    const llm_config *c = &m->cfg;
    int pattern = modern_bert_pattern(m, path, err);
    if (pattern < 0)
        return -1;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof(key), "modern-bert." suffix), key)
    gguf_w_f32(w, KEY("attention.layer_norm_epsilon"), c->norm_eps);
    gguf_w_bool(w, KEY("attention.causal"), 0);
    if (c->swa_window > 0)
        gguf_w_u32(w, KEY("attention.sliding_window_pattern"), (uint32_t)pattern);
    gguf_w_str(w, KEY("hidden_activation"), act_name(c->act));
#undef KEY
    return 0;
}

int llm_model_save_gguf(const llm_model *m, llm_dtype dtype, const char *path, llm_err *err)
{
    const llm_config *c = &m->cfg;
    if (m->cls_norm != NULL) { /* (llama.cpp's layout of its head and classifier pooling is not settled here) */
        llm_seterr(err, "%s: re-saving a ModernBERT reranker is not supported: serve its Hugging Face directory", path);
        return -1;
    }
    gguf_writer *w = gguf_writer_new();
    conv_list l = { 0 };
    l.cap = 24 * c->n_layers + 3; /* at most 19 tensors a layer (gpt-oss) */
    l.cv = calloc((size_t)l.cap, sizeof(conv));
    float *rf = NULL;
    int rc = -1;
    if (w == NULL || l.cv == NULL) {
        llm_seterr(err, "%s: out of memory", path);
        goto out;
    }
    /* a partial rotary's q / k rows are reordered in memory: written back in the file's order (add_fused) */
    int partial = c->rope_dims > 0 && c->rope_dims != c->head_dim ? c->rope_dims : 0;
    int glm = strcmp(m->arch, "glm4moe") == 0, gptoss = strcmp(m->arch, "gpt-oss") == 0;
    if (partial && strcmp(m->arch, "phi3") != 0 && !glm) {
        llm_seterr(err, "%s: re-saving a partial-rotary %s model is not supported (phi3's, glm4moe's)", path,
                   m->arch);
        goto out;
    }
    /* (a Hugging Face directory's layer_types: GGUF has no key for them. Its rope_scaling.truncate false has none
     * either: the file rounds YaRN's correction range, as llama.cpp runs every gpt-oss GGUF) */
    for (int i = 0; gptoss && i < c->n_layers; i++)
        if (m->layers[i].swa != (i % 2 == 0)) {
            llm_seterr(err, "%s: a gpt-oss GGUF windows every other layer, the first of each pair (llama.cpp's "
                       "pattern); this model's layer %d does not: serve its directory as it is", path, i);
            goto out;
        }
    l.rope_dims = partial;
    llm_gguf_w_meta(w, m->arch, c, c->n_expert > 0 && llm_layer_has_shared(llm_moe_layer0(m)),
                    m->name[0] ? m->name : "model", dtype);
    if (strcmp(m->arch, "exaone4") == 0 && c->swa_window > 0) { /* its windows' period: the first global layer */
        int per = 1;
        while (per < c->n_layers && m->layers[per - 1].swa)
            per++;
        gguf_w_u32(w, "exaone4.attention.sliding_window_pattern", (uint32_t)per);
    }
    if (m->pooling != LLM_POOL_NONE || m->n_cls > 0) {
        char key[64];
        snprintf(key, sizeof(key), "%s.pooling_type", m->arch);
        gguf_w_u32(w, key, m->n_cls > 0 ? LLM_POOL_RANK : (uint32_t)m->pooling);
    }
    if (c->encoder) { /* BERT / nomic-bert: their own keys and tensors (add_bert), then the tokenizer */
        char key[96];
        snprintf(key, sizeof(key), "%s.attention.layer_norm_epsilon", m->arch);
        gguf_w_f32(w, key, c->norm_eps);
        snprintf(key, sizeof(key), "%s.attention.causal", m->arch);
        gguf_w_bool(w, key, 0);
        add_bert(w, &l, m, dtype);
        if (write_tokenizer_meta(w, m, err) != 0)
            goto out;
        goto write;
    }
    int modern = c->layer_norm; /* ModernBERT: its keys, its embedding's norm, fused tensors as Phi 3's */
    if (modern && strcmp(m->arch, "modern-bert") != 0) {
        llm_seterr(err, "%s: LayerNorms without a bias are modern-bert's (not %s's)", path, m->arch);
        goto out;
    }
    if (modern && modern_bert_keys(w, m, path, err) != 0)
        goto out;
    if (c->bidirectional || m->dense_up != NULL) { /* EmbeddingGemma: its local rope base and Dense modules */
        char key[96];
        snprintf(key, sizeof(key), "%s.rope.freq_base_swa", m->arch);
        if (c->rope_theta_swa > 0.0f)
            gguf_w_f32(w, key, c->rope_theta_swa);
        if (m->dense_up != NULL) {
            static const char *const fk[4] = { "dense_2_feat_in", "dense_2_feat_out", "dense_3_feat_in",
                                               "dense_3_feat_out" };
            const uint32_t fv[4] = { (uint32_t)c->dim, (uint32_t)m->dense_n, (uint32_t)m->dense_n, (uint32_t)c->dim };
            for (int i = 0; i < 4; i++) {
                snprintf(key, sizeof(key), "%s.%s", m->arch, fk[i]);
                gguf_w_u32(w, key, fv[i]);
            }
            uint64_t up[2] = { (uint64_t)c->dim, (uint64_t)m->dense_n }, down[2] = { (uint64_t)m->dense_n,
                                                                                    (uint64_t)c->dim };
            gguf_w_tensor(w, "dense_2.weight", LLM_F32, 2, up, m->dense_up);
            gguf_w_tensor(w, "dense_3.weight", LLM_F32, 2, down, m->dense_down);
        }
    }
    if (m->n_cls == 2) { /* a reranker's head: its rows are "yes" and "no" (llm_model_rank_head) */
        static const char *const labels[2] = { "yes", "no" };
        static const size_t lens[2] = { 3, 2 };
        char key[96];
        snprintf(key, sizeof(key), "%s.classifier.output_labels", m->arch);
        gguf_w_arr_str(w, key, labels, lens, 2);
        uint64_t ne[2] = { (uint64_t)c->dim, 2 };
        gguf_w_tensor(w, "cls.output.weight", LLM_F32, 2, ne, m->cls);
    }
    if (write_tokenizer_meta(w, m, err) != 0)
        goto out;
    /* a GGUF llama (smollm3, granite) rotates pairs (the converter permutes q/k rows); Qwen GGUFs keep HF's
     * halves */
    int llama = llm_arch_llama_like(m->arch);
    if (!llama && c->rope_layout != LLM_ROPE_HALF) {
        llm_seterr(err, "%s: a %s model rotates halves; this one rotates pairs", path, m->arch);
        goto out;
    }
    int perm = llama && c->rope_layout == LLM_ROPE_HALF ? 1 : 0, hd = c->head_dim;
    int qk = partial ? 3 : perm; /* q and k rows (their biases and norms too) */
    int phi3 = strcmp(m->arch, "phi3") == 0 || modern;
    add_mat(w, &l, "token_embd.weight", &m->tok_embd, dtype, 0, hd);
    if (modern)
        add_vec(w, &l, "token_embd_norm.weight", &m->embd_norm, 0, hd);
    add_mat(w, &l, "output_norm.weight", &m->out_norm, dtype, 0, hd);
    if (!c->tied_embeddings && m->n_cls == 0) /* (a reranker's conversion leaves its head out: cls.output) */
        add_mat(w, &l, "output.weight", &m->output, dtype, 0, hd);
    uint64_t nrf = (uint64_t)(c->rope_dims > 0 ? c->rope_dims : hd) / 2; /* one per rotating frequency */
    if (m->rope_long != NULL) {
        gguf_w_tensor(w, "rope_factors_long.weight", LLM_F32, 1, &nrf, m->rope_long);
        gguf_w_tensor(w, "rope_factors_short.weight", LLM_F32, 1, &nrf, m->rope_short);
    }
    if (m->rope_freqs != NULL) {
        gguf_w_tensor(w, "rope_freqs.weight", LLM_F32, 1, &nrf, m->rope_freqs);
    } else if (c->rope_scaling == LLM_ROPE_SCALING_LLAMA3) {
        if ((rf = malloc(nrf * sizeof(float))) == NULL) {
            llm_seterr(err, "%s: out of memory", path);
            goto out;
        }
        llm_llama3_rope_freqs(c, rf);
        gguf_w_tensor(w, "rope_freqs.weight", LLM_F32, 1, &nrf, rf);
    }
    for (int i = 0; i < c->n_layers; i++) {
        const llm_layer *L = &m->layers[i];
        char n[64];
#define M(suffix, field, p) snprintf(n, sizeof(n), "blk.%d." suffix ".weight", i); \
        add_mat(w, &l, n, &L->field, dtype, p, hd);
        if (L->attn_norm.data != NULL) { /* (ModernBERT's first layer has none) */
            M("attn_norm", attn_norm, 0)
        }
        if (phi3) { /* as llama.cpp's converter writes Phi 3 (and ModernBERT): q|k|v and gate|up fused */
            const llm_tensor *qkv[3] = { &L->wq, &L->wk, &L->wv }, *gu[2] = { &L->w_gate, &L->w_up };
            snprintf(n, sizeof(n), "blk.%d.attn_qkv.weight", i);
            add_fused(w, &l, n, qkv, 3, dtype, partial, hd);
            M("attn_output", wo, 0) M("ffn_norm", ffn_norm, 0)
            snprintf(n, sizeof(n), "blk.%d.ffn_up.weight", i);
            add_fused(w, &l, n, gu, 2, dtype, 0, hd);
            M("ffn_down", w_down, 0)
        } else {
            M("attn_q", wq, qk) M("attn_k", wk, qk) M("attn_v", wv, 0) M("attn_output", wo, 0)
            if (L->ffn_norm.data != NULL && (strcmp(m->arch, "seed_oss") == 0 || glm || gptoss)) { /* (llama.cpp's) */
                M("post_attention_norm", ffn_norm, 0)
            } else if (L->ffn_norm.data != NULL) { /* (OLMo 2 has none: it norms the blocks' outputs) */
                M("ffn_norm", ffn_norm, 0)
            }
        }
        if (!llm_layer_moe(c, L) && !phi3) {
            M("ffn_gate", w_gate, 0) M("ffn_up", w_up, 0) M("ffn_down", w_down, 0)
        } else if (llm_layer_moe(c, L)) { /* the router stays F32, as llama.cpp's converter keeps it */
            snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp.weight", i);
            add_mat(w, &l, n, &L->ffn_gate_inp, LLM_F32, 0, hd);
            if (L->exp_probs_b.data != NULL) { /* ERNIE 4.5 MoE's, GLM-4.5's selection bias */
                snprintf(n, sizeof(n), "blk.%d.exp_probs_b.bias", i);
                add_vec(w, &l, n, &L->exp_probs_b, 0, hd);
            }
            if (L->ffn_gate_inp_b.data != NULL) { /* gpt-oss's router's bias */
                snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp.bias", i);
                add_vec(w, &l, n, &L->ffn_gate_inp_b, 0, hd);
            }
            static const char *const kinds[3] = { "gate", "up", "down" };
            for (int k = 0; k < 3; k++) {
                snprintf(n, sizeof(n), "blk.%d.ffn_%s_exps.weight", i, kinds[k]);
                add_experts(w, &l, n, L, c->n_expert, k, dtype);
                if (L->exp_b[k].data != NULL) { /* gpt-oss's experts' biases, [n_expert][rows] in F32 */
                    snprintf(n, sizeof(n), "blk.%d.ffn_%s_exps.bias", i, kinds[k]);
                    add_mat(w, &l, n, &L->exp_b[k], LLM_F32, 0, hd);
                }
            }
            if (L->shexp_gate.data != NULL) { /* Qwen 2 MoE's shared expert's gate */
                snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp_shexp.weight", i);
                add_vec(w, &l, n, &L->shexp_gate, 0, hd);
            }
            if (llm_layer_has_shared(L)) { /* a shared expert (Qwen 2 MoE's, GraniteMoeShared's) */
                M("ffn_gate_shexp", w_gate, 0) M("ffn_up_shexp", w_up, 0) M("ffn_down_shexp", w_down, 0)
            }
        }
#undef M
        /* biases follow their matrix's rows, a q/k norm's weights a head's (the permutation too) */
#define V(name, field, p) snprintf(n, sizeof(n), "blk.%d." name, i); \
        if (L->field.data != NULL) add_vec(w, &l, n, &L->field, p, hd);
        V("attn_q.bias", bq, qk) V("attn_k.bias", bk, qk) V("attn_v.bias", bv, 0)
        V("attn_q_norm.weight", q_norm, qk) V("attn_k_norm.weight", k_norm, qk)
        V("post_attention_norm.weight", post_attn_norm, 0) V("post_ffw_norm.weight", post_ffn_norm, 0)
        V("attn_output.bias", bo, 0) V("attn_sinks.weight", attn_sinks, 0) /* (gpt-oss's) */
#undef V
    }
write:
    if (l.oom) {
        llm_seterr(err, "%s: out of memory", path);
        goto out;
    }
    rc = gguf_writer_write(w, path, err);
out:
    gguf_writer_free(w);
    conv_free(&l);
    free(rf);
    return rc;
}

/* ---------- Hugging Face directory ---------- */

typedef struct {
    char name[96];
    const llm_tensor *t;
    int perm;
    float add;
    uint64_t off, nbytes;
    int64_t rows;                /* t's, or the parts' together */
    const llm_tensor *part[3];   /* n_part > 0: these matrices stacked by rows, one tensor (ModernBERT's Wqkv, Wi;
                                  * Phi 3's qkv_proj, gate_up_proj) */
    int n_part, perm_parts;      /* perm applying to the first perm_parts of them (a partial rotary's q and k) */
    int n_exp, exp_parts;        /* n_exp > 0: t is expert 0's matrix of a kind, the layer's experts written as one
                                  * [n_exp][exp_parts x its rows][cols] tensor (Granite MoE's; conv's n_exp) */
    int oss;                     /* LLM_HF_OSS_*: one of layer L's gpt-oss expert tensors (model_write_gptoss.c) */
    const llm_layer *L;
} hf_entry;

static const char *st_dtype(llm_dtype t)
{
    return t == LLM_F32 ? "F32" : t == LLM_F16 ? "F16" : "BF16";
}

/* A float as the shortest decimal that reads back as it (norm_eps 1e-05, not 9.99999974737875e-06). */
static double short_float(float v)
{
    char b[32];
    for (int p = 6; p <= 9; p++) {
        snprintf(b, sizeof(b), "%.*g", p, (double)v);
        if ((float)strtod(b, NULL) == v)
            break;
    }
    return strtod(b, NULL);
}

/* ModernBERT's config.json (transformers' ModernBertConfig; a bare ModernBertModel, as sentence-transformers
 * saves modernbert-embed-base): its heads all of hidden_size / num_attention_heads, no biases, [CLS] and
 * [SEP] the model's BOS and EOS. */
static int write_modern_bert_config(const llm_model *m, const char *dir, llm_dtype dtype, llm_err *err)
{
    const llm_config *c = &m->cfg;
    int every = modern_bert_pattern(m, dir, err);
    if (every < 0)
        return -1;
    if (c->n_kv_heads != c->n_heads || c->head_dim * c->n_heads != c->dim) {
        llm_seterr(err, "%s: a ModernBERT's heads are hidden_size / num_attention_heads wide, as many for k and v "
                   "as for q; this model's are not", dir);
        return -1;
    }
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "architectures"), cJSON_CreateString("ModernBertModel"));
    cJSON_AddStringToObject(j, "model_type", "modernbert");
    if (m->name[0] != 0) /* (the name the loader shows) */
        cJSON_AddStringToObject(j, "_name_or_path", m->name);
    const struct { const char *key; double v; } num[] = {
        { "hidden_size", c->dim }, { "intermediate_size", c->hidden_dim }, { "num_hidden_layers", c->n_layers },
        { "num_attention_heads", c->n_heads }, { "vocab_size", c->vocab_size },
        { "max_position_embeddings", c->seq_len }, { "norm_eps", short_float(c->norm_eps) },
        { "global_rope_theta", short_float(c->rope_theta) },
        { "local_rope_theta", short_float(c->rope_theta_swa > 0.0f ? c->rope_theta_swa : c->rope_theta) },
        /* (without a window every layer is global; local_attention is then transformers' default) */
        { "local_attention", c->swa_window > 0 ? c->swa_window : 128 }, { "global_attn_every_n_layers", every },
    };
    for (size_t i = 0; i < sizeof(num) / sizeof(num[0]); i++)
        cJSON_AddNumberToObject(j, num[i].key, num[i].v);
    static const char *const biases[] = { "norm_bias", "attention_bias", "mlp_bias" };
    for (size_t i = 0; i < sizeof(biases) / sizeof(biases[0]); i++)
        cJSON_AddBoolToObject(j, biases[i], 0);
    cJSON_AddStringToObject(j, "hidden_activation", act_name(c->act));
    cJSON_AddStringToObject(j, "classifier_pooling", m->pooling == LLM_POOL_CLS ? "cls" : "mean");
    static const char *const ids[2][2] = { { "bos_token_id", "cls_token_id" }, { "eos_token_id", "sep_token_id" } };
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2 && (i ? c->eos_id : c->bos_id) >= 0; k++)
            cJSON_AddNumberToObject(j, ids[i][k], i ? c->eos_id : c->bos_id);
    cJSON_AddStringToObject(j, "torch_dtype", dtype == LLM_F32 ? "float32" : dtype == LLM_F16 ? "float16" : "bfloat16");
    char path[1100];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    int rc = llm_json_write_file(path, j, 1, err);
    cJSON_Delete(j);
    return rc;
}

static int write_config(const llm_model *m, const char *dir, llm_dtype dtype, llm_err *err)
{
    if (strcmp(m->arch, "modern-bert") == 0)
        return write_modern_bert_config(m, dir, dtype, err);
    const llm_config *c = &m->cfg;
    cJSON *j = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(j, "architectures");
    static const char *const names[][3] = {
        { "qwen2", "Qwen2ForCausalLM", "qwen2" }, { "qwen3", "Qwen3ForCausalLM", "qwen3" },
        { "qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe" }, { "mixtral", "MixtralForCausalLM", "mixtral" },
        { "qwen2moe", "Qwen2MoeForCausalLM", "qwen2_moe" }, { "mistral", "MistralForCausalLM", "mistral" },
        { "gemma", "GemmaForCausalLM", "gemma" }, { "gemma2", "Gemma2ForCausalLM", "gemma2" },
        { "gemma3", "Gemma3ForCausalLM", "gemma3_text" }, { "smollm3", "SmolLM3ForCausalLM", "smollm3" },
        { "granite", "GraniteForCausalLM", "granite" }, { "gemma-embedding", "Gemma3TextModel", "gemma3_text" },
        { "granitemoe", "GraniteMoeForCausalLM", "granitemoe" },
        { "granitemoeshared", "GraniteMoeSharedForCausalLM", "granitemoeshared" },
        { "olmo2", "Olmo2ForCausalLM", "olmo2" }, { "olmo3", "Olmo3ForCausalLM", "olmo3" },
        { "olmoe", "OlmoeForCausalLM", "olmoe" }, { "ernie4_5", "Ernie4_5ForCausalLM", "ernie4_5" },
        { "ernie4_5-moe", "Ernie4_5_MoeForCausalLM", "ernie4_5_moe" }, { "glm4moe", "Glm4MoeForCausalLM", "glm4_moe" },
        { "seed_oss", "SeedOssForCausalLM", "seed_oss" }, { "exaone4", "Exaone4ForCausalLM", "exaone4" },
        { "exaone", "ExaoneForCausalLM", "exaone" }, { "gpt-oss", "GptOssForCausalLM", "gpt_oss" },
        { "phi3", "Phi3ForCausalLM", "phi3" },
        { "llama", "LlamaForCausalLM", "llama" },
    };
    size_t a = 0;
    int llama = strcmp(m->arch, "llama") == 0;
    int granitemoe = strcmp(m->arch, "granitemoe") == 0;
    int shared = c->n_expert > 0 && llm_layer_has_shared(llm_moe_layer0(m));
    const char *an = llama && c->n_expert > 0      ? "mixtral"
                     : llama && c->swa_window > 0 ? "mistral"
                     : granitemoe && shared       ? "granitemoeshared"
                     : strcmp(m->arch, "olmo2") == 0 && c->swa_window > 0 ? "olmo3"
                                                  : m->arch;
    while (a + 1 < sizeof(names) / sizeof(names[0]) && strcmp(an, names[a][0]) != 0)
        a++;
    cJSON_AddItemToArray(arch, cJSON_CreateString(names[a][1]));
    cJSON_AddStringToObject(j, "model_type", names[a][2]);
    if (strncmp(m->arch, "qwen2", 5) != 0) /* Qwen 2 (and its MoE) always has the biases; the others say */
        cJSON_AddBoolToObject(j, "attention_bias", m->layers[0].bq.data != NULL);
    if (strncmp(m->arch, "gemma", 5) == 0) {
        cJSON_AddStringToObject(j, "hidden_activation", "gelu_pytorch_tanh");
        float s = llm_attn_scale(c);
        cJSON_AddNumberToObject(j, "query_pre_attn_scalar", (double)lroundf(1.0f / (s * s)));
        if (c->swa_window > 0) {
            cJSON_AddNumberToObject(j, "sliding_window", c->swa_window);
            cJSON *lt = cJSON_AddArrayToObject(j, "layer_types");
            for (int l = 0; l < c->n_layers; l++)
                cJSON_AddItemToArray(lt, cJSON_CreateString(m->layers[l].swa ? "sliding_attention"
                                                                              : "full_attention"));
        }
        if (c->rope_theta_swa > 0.0f)
            cJSON_AddNumberToObject(j, "rope_local_base_freq", c->rope_theta_swa);
        if (c->bidirectional) /* EmbeddingGemma */
            cJSON_AddBoolToObject(j, "use_bidirectional_attention", 1);
        if (c->attn_softcap > 0.0f)
            cJSON_AddNumberToObject(j, "attn_logit_softcapping", c->attn_softcap);
        if (c->final_softcap > 0.0f)
            cJSON_AddNumberToObject(j, "final_logit_softcapping", c->final_softcap);
    }
    if (llama && c->swa_window > 0) /* Mistral 7B v0.1's window */
        cJSON_AddNumberToObject(j, "sliding_window", c->swa_window);
    if ((strcmp(m->arch, "olmo2") == 0 || strcmp(m->arch, "exaone4") == 0) && c->swa_window > 0) {
        /* OLMo 3's windows, EXAONE 4's (its global layers without rope, as transformers runs them) */
        cJSON_AddNumberToObject(j, "sliding_window", c->swa_window);
        cJSON *lt = cJSON_AddArrayToObject(j, "layer_types");
        for (int l = 0; l < c->n_layers; l++)
            cJSON_AddItemToArray(lt, cJSON_CreateString(m->layers[l].swa ? "sliding_attention" : "full_attention"));
    }
    if (strcmp(m->arch, "smollm3") == 0) {
        cJSON *nr = cJSON_AddArrayToObject(j, "no_rope_layers");
        for (int l = 0; l < c->n_layers; l++)
            cJSON_AddItemToArray(nr, cJSON_CreateNumber(m->layers[l].nope ? 0 : 1));
    }
    if (strcmp(m->arch, "granite") == 0 || granitemoe) {
        cJSON_AddNumberToObject(j, "embedding_multiplier", c->embd_scale);
        cJSON_AddNumberToObject(j, "attention_multiplier", c->attn_scale);
        cJSON_AddNumberToObject(j, "residual_multiplier", c->residual_scale);
        cJSON_AddNumberToObject(j, "logits_scaling", c->logit_scale);
    }
    cJSON_AddNumberToObject(j, "hidden_size", c->dim);
    int olmoe = strcmp(m->arch, "olmoe") == 0;
    int gptoss = strcmp(m->arch, "gpt-oss") == 0;
    cJSON_AddNumberToObject(j, "intermediate_size", granitemoe || olmoe || gptoss ? c->expert_ff
                                                    : c->dense_ff > 0      ? c->dense_ff
                                                                           : c->hidden_dim);
    if (strcmp(m->arch, "ernie4_5-moe") == 0) { /* its shared experts as one, moe_num_shared_experts times as wide */
        cJSON_AddNumberToObject(j, "moe_num_experts", c->n_expert);
        cJSON_AddNumberToObject(j, "moe_k", c->n_expert_used);
        cJSON_AddNumberToObject(j, "moe_intermediate_size", c->expert_ff);
        cJSON_AddNumberToObject(j, "moe_num_shared_experts", shared ? c->hidden_dim / c->expert_ff : 0);
        cJSON_AddNumberToObject(j, "moe_layer_start_index", c->moe_dense_lead);
        cJSON_AddNumberToObject(j, "moe_layer_end_index", c->n_layers - 1);
        cJSON_AddNumberToObject(j, "moe_layer_interval", 1);
        cJSON_AddBoolToObject(j, "use_bias", 0);
    } else if (strcmp(m->arch, "glm4moe") == 0) { /* as zai-org's configs (one group; no multi-token prediction) */
        cJSON_AddNumberToObject(j, "n_routed_experts", c->n_expert);
        cJSON_AddNumberToObject(j, "moe_intermediate_size", c->expert_ff);
        cJSON_AddNumberToObject(j, "n_shared_experts", shared ? c->hidden_dim / c->expert_ff : 0);
        cJSON_AddNumberToObject(j, "first_k_dense_replace", c->moe_dense_lead);
        cJSON_AddNumberToObject(j, "routed_scaling_factor", c->moe_w_scale > 0.0f ? c->moe_w_scale : 1.0f);
        cJSON_AddBoolToObject(j, "norm_topk_prob", c->moe_norm_topk);
        cJSON_AddNumberToObject(j, "partial_rotary_factor",
                                c->rope_dims > 0 ? (double)c->rope_dims / c->head_dim : 1.0);
        cJSON_AddNumberToObject(j, "n_group", 1);
        cJSON_AddNumberToObject(j, "topk_group", 1);
        cJSON_AddBoolToObject(j, "use_qk_norm", m->layers[0].q_norm.data != NULL);
        cJSON_AddNumberToObject(j, "num_nextn_predict_layers", 0);
    } else if (granitemoe) { /* experts as wide as intermediate_size, always renormalised; GraniteMoeShared's shared one */
        cJSON_AddNumberToObject(j, "num_local_experts", c->n_expert);
        if (shared)
            cJSON_AddNumberToObject(j, "shared_intermediate_size", c->hidden_dim);
    } else if (gptoss) { /* (model_write_gptoss.c) */
        llm_hf_gptoss_config_json(j, m, llm_hf_gptoss_mx(m));
    } else if (olmoe) { /* experts as wide as intermediate_size */
        cJSON_AddNumberToObject(j, "num_experts", c->n_expert);
        cJSON_AddBoolToObject(j, "norm_topk_prob", c->moe_norm_topk);
    } else if (c->n_expert > 0 && strncmp(an, "qwen", 4) == 0) {
        cJSON_AddNumberToObject(j, "num_experts", c->n_expert);
        cJSON_AddNumberToObject(j, "moe_intermediate_size", c->expert_ff);
        cJSON_AddBoolToObject(j, "norm_topk_prob", c->moe_norm_topk);
        if (strcmp(an, "qwen2moe") == 0)
            cJSON_AddNumberToObject(j, "shared_expert_intermediate_size",
                                    m->layers[0].shexp_gate.data != NULL ? c->hidden_dim : 0);
    } else if (c->n_expert > 0) { /* Mixtral: experts as wide as intermediate_size, always renormalised */
        cJSON_AddNumberToObject(j, "num_local_experts", c->n_expert);
    }
    if (c->n_expert > 0 && strcmp(m->arch, "ernie4_5-moe") != 0)
        cJSON_AddNumberToObject(j, "num_experts_per_tok", c->n_expert_used);
    if (strcmp(m->arch, "phi3") == 0 && c->rope_dims > 0) /* Phi-4-mini's */
        cJSON_AddNumberToObject(j, "partial_rotary_factor", (double)c->rope_dims / c->head_dim);
    int exaone = strcmp(m->arch, "exaone") == 0; /* (EXAONE 3.x's remote code names a few keys its own way) */
    if (exaone)
        cJSON_AddStringToObject(j, "activation_function", "silu");
    cJSON_AddNumberToObject(j, exaone ? "num_layers" : "num_hidden_layers", c->n_layers);
    cJSON_AddNumberToObject(j, "num_attention_heads", c->n_heads);
    cJSON_AddNumberToObject(j, "num_key_value_heads", c->n_kv_heads);
    cJSON_AddNumberToObject(j, "head_dim", c->head_dim);
    cJSON_AddNumberToObject(j, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(j, "max_position_embeddings", c->seq_len);
    cJSON_AddNumberToObject(j, "rope_theta", c->rope_theta);
    cJSON_AddNumberToObject(j, exaone ? "layer_norm_epsilon" : "rms_norm_eps", c->norm_eps);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", c->tied_embeddings);
    if (c->bos_id >= 0)
        cJSON_AddNumberToObject(j, "bos_token_id", c->bos_id);
    if (c->eos_id >= 0)
        cJSON_AddNumberToObject(j, "eos_token_id", c->eos_id);
    cJSON_AddStringToObject(j, "torch_dtype", dtype == LLM_F32 ? "float32" : dtype == LLM_F16 ? "float16" : "bfloat16");
    if (c->rope_scaling == LLM_ROPE_SCALING_YARN || c->rope_scaling == LLM_ROPE_SCALING_LINEAR) {
        cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
        int yarn = c->rope_scaling == LLM_ROPE_SCALING_YARN;
        cJSON_AddStringToObject(rs, "rope_type", yarn ? "yarn" : "linear");
        cJSON_AddNumberToObject(rs, "factor", c->rope_factor);
        if (yarn) {
            cJSON_AddNumberToObject(rs, "original_max_position_embeddings", c->rope_orig_ctx);
            cJSON_AddNumberToObject(rs, "attention_factor", c->rope_mscale);
            cJSON_AddNumberToObject(rs, "beta_fast", c->yarn_beta_fast);
            cJSON_AddNumberToObject(rs, "beta_slow", c->yarn_beta_slow);
            if (c->yarn_no_truncate) /* (gpt-oss's) */
                cJSON_AddBoolToObject(rs, "truncate", 0);
        }
    } else if (c->rope_scaling == LLM_ROPE_SCALING_LONGROPE && m->rope_long != NULL) { /* Phi 3's 128k models */
        cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
        cJSON_AddStringToObject(rs, "type", "longrope");
        const int rot = (c->rope_dims > 0 ? c->rope_dims : c->head_dim) / 2;
        for (int k = 0; k < 2; k++) {
            cJSON *a = cJSON_AddArrayToObject(rs, k == 0 ? "long_factor" : "short_factor");
            for (int i = 0; i < rot; i++)
                cJSON_AddItemToArray(a, cJSON_CreateNumber(short_float((k == 0 ? m->rope_long : m->rope_short)[i])));
        }
        cJSON_AddNumberToObject(j, "original_max_position_embeddings", c->rope_orig_ctx);
        if (c->rope_mscale != llm_longrope_mscale(c->seq_len, c->rope_orig_ctx)) /* (where not the default) */
            cJSON_AddNumberToObject(rs, "attention_factor", short_float(c->rope_mscale));
    } else if (c->rope_scaling == LLM_ROPE_SCALING_LLAMA3) {
        cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", "llama3");
        cJSON_AddNumberToObject(rs, "factor", c->rope_factor);
        cJSON_AddNumberToObject(rs, "low_freq_factor", c->rope_low_freq_factor);
        cJSON_AddNumberToObject(rs, "high_freq_factor", c->rope_high_freq_factor);
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings", c->rope_orig_ctx);
    }
    char path[1100];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    int rc = llm_json_write_file(path, j, 1, err);
    cJSON_Delete(j);
    return rc;
}

/* An embedding model's pooling as sentence-transformers writes it (1_Pooling/config.json); nothing without. */
static int write_pooling(const llm_model *m, const char *dir, llm_err *err)
{
    if (m->pooling == LLM_POOL_NONE)
        return 0;
    char path[1100];
    snprintf(path, sizeof(path), "%s/1_Pooling", dir);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        llm_seterr(err, "%s: cannot create directory: %s", path, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof(path), "%s/1_Pooling/config.json", dir);
    FILE *f = fopen(path, "w");
    int rc = f != NULL && fprintf(f, "{\"word_embedding_dimension\": %d, \"pooling_mode_cls_token\": %s, "
                                  "\"pooling_mode_mean_tokens\": %s, \"pooling_mode_lasttoken\": %s}\n", m->cfg.dim,
                                  m->pooling == LLM_POOL_CLS ? "true" : "false",
                                  m->pooling == LLM_POOL_MEAN ? "true" : "false",
                                  m->pooling == LLM_POOL_LAST ? "true" : "false") > 0 ? 0 : -1;
    if (f != NULL && fclose(f) != 0)
        rc = -1;
    if (rc != 0)
        llm_seterr(err, "%s: cannot write: %s", path, strerror(errno));
    return rc;
}

/* sentence-transformers' Dense module DIR/SUB (config.json; model.safetensors' F32 linear.weight [out x in], no
 * bias, Identity activation): EmbeddingGemma's. */
static int write_dense(const char *dir, const char *sub, int in, int out, const float *w, llm_err *err)
{
    char path[1100], hdr[256];
    snprintf(path, sizeof(path), "%s/%s", dir, sub);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        llm_seterr(err, "%s: cannot create directory: %s", path, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof(path), "%s/%s/config.json", dir, sub);
    FILE *f = fopen(path, "w");
    int rc = f != NULL && fprintf(f, "{\"in_features\": %d, \"out_features\": %d, \"bias\": false, "
                                  "\"activation_function\": \"torch.nn.modules.linear.Identity\"}\n", in, out) > 0
                 ? 0 : -1;
    if (f != NULL && fclose(f) != 0)
        rc = -1;
    size_t bytes = (size_t)in * (size_t)out * sizeof(float);
    int hl = snprintf(hdr, sizeof(hdr), "{\"linear.weight\":{\"dtype\":\"F32\",\"shape\":[%d,%d],"
                      "\"data_offsets\":[0,%zu]}}", out, in, bytes);
    while (hl % 8 != 0)
        hdr[hl++] = ' ';
    uint64_t n = (uint64_t)hl;
    if (rc == 0) {
        snprintf(path, sizeof(path), "%s/%s/model.safetensors", dir, sub);
        f = fopen(path, "wb");
        rc = f != NULL && fwrite(&n, 8, 1, f) == 1 && fwrite(hdr, 1, (size_t)hl, f) == (size_t)hl &&
                     fwrite(w, 1, bytes, f) == bytes ? 0 : -1;
        if (f != NULL && fclose(f) != 0)
            rc = -1;
    }
    if (rc != 0)
        llm_seterr(err, "%s: cannot write: %s", path, strerror(errno));
    return rc;
}

/* EmbeddingGemma's Dense modules, and modules.json listing what sentence-transformers loads in turn (also for
 * a ModernBERT without them: the model, its pooling, the normalisation). */
static int write_st_modules(const llm_model *m, const char *dir, llm_err *err)
{
    int modern = strcmp(m->arch, "modern-bert") == 0 && m->pooling != LLM_POOL_NONE;
    if (m->dense_up == NULL && !modern)
        return 0;
    if (m->dense_up != NULL && (write_dense(dir, "2_Dense", m->cfg.dim, m->dense_n, m->dense_up, err) != 0 ||
                                write_dense(dir, "3_Dense", m->dense_n, m->cfg.dim, m->dense_down, err) != 0))
        return -1;
    char path[1100];
    snprintf(path, sizeof(path), "%s/modules.json", dir);
    FILE *f = fopen(path, "w");
    static const char *const mods[][3] = {
        { "0", "", "sentence_transformers.models.Transformer" },
        { "1", "1_Pooling", "sentence_transformers.models.Pooling" },
        { "2", "2_Dense", "sentence_transformers.models.Dense" },
        { "3", "3_Dense", "sentence_transformers.models.Dense" },
        { "4", "4_Normalize", "sentence_transformers.models.Normalize" },
        { "2", "2_Normalize", "sentence_transformers.models.Normalize" },
    };
    static const int with_dense[] = { 0, 1, 2, 3, 4 }, without[] = { 0, 1, 5 };
    const int *list = m->dense_up != NULL ? with_dense : without, n = m->dense_up != NULL ? 5 : 3;
    int rc = f != NULL && fputs("[", f) >= 0 ? 0 : -1;
    for (int i = 0; rc == 0 && i < n; i++)
        rc = fprintf(f, "%s{\"idx\": %s, \"name\": \"%s\", \"path\": \"%s\", \"type\": \"%s\"}", i ? ", " : "",
                     mods[list[i]][0], mods[list[i]][0], mods[list[i]][1], mods[list[i]][2]) > 0 ? 0 : -1;
    if (rc == 0 && fputs("]\n", f) < 0)
        rc = -1;
    if (f != NULL && fclose(f) != 0)
        rc = -1;
    if (rc != 0)
        llm_seterr(err, "%s: cannot write: %s", path, strerror(errno));
    return rc;
}

/* A whole file copied (read first: from and to may be the same file). 0, or -1 + err. */
static int copy_file(const char *from, const char *to, llm_err *err)
{
    FILE *f = fopen(from, "rb");
    char *buf = NULL;
    long n = -1;
    if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0)
        buf = malloc((size_t)n + 1);
    int rc = buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n ? 0 : -1;
    if (f != NULL)
        fclose(f);
    if (rc != 0) {
        llm_seterr(err, "%s: cannot read: %s", from, strerror(errno));
    } else {
        f = fopen(to, "wb");
        rc = f != NULL && fwrite(buf, 1, (size_t)n, f) == (size_t)n ? 0 : -1;
        if (f != NULL && fclose(f) != 0)
            rc = -1;
        if (rc != 0)
            llm_seterr(err, "%s: cannot write: %s", to, strerror(errno));
    }
    free(buf);
    return rc;
}

/* A ModernBERT's tokenizer beside it (tokenizer.json, tokenizer_config.json), so that the directory loads
 * alone: a GGUF's vocabulary converted (llm_hf_w_bpe_from_gguf), a directory's (or the --tokenizer given's)
 * files copied; nothing for the other models, nor without a tokenizer or from a llama2.c one. */
static int write_tokenizer_files(const llm_model *m, const char *dir, llm_err *err)
{
    if (strcmp(m->arch, "modern-bert") != 0 || m->tok == NULL)
        return 0;
    const char *from = m->tok_path[0] ? m->tok_path : m->path;
    size_t n = strlen(from);
    if (m->tok_path[0] == 0 && m->gguf != NULL)
        return llm_hf_w_bpe_from_gguf(m->gguf, dir, m->cfg.bos_id, m->cfg.eos_id, m->cfg.seq_len, err);
    if (n > 5 && strcmp(from + n - 5, ".gguf") == 0) {
        gguf_ctx *g = gguf_open(from, err);
        int rc = g == NULL ? -1 : llm_hf_w_bpe_from_gguf(g, dir, m->cfg.bos_id, m->cfg.eos_id, m->cfg.seq_len, err);
        gguf_close(g);
        return rc;
    }
    char src[1100], dst[1100];
    int json = n > 5 && strcmp(from + n - 5, ".json") == 0;
    const char *slash = strrchr(from, '/');
    for (int i = 0; i < 2; i++) { /* tokenizer.json, then tokenizer_config.json beside it (if there is one) */
        static const char *const names[2] = { "tokenizer.json", "tokenizer_config.json" };
        if (json && i == 0)
            snprintf(src, sizeof(src), "%s", from);
        else if (json)
            snprintf(src, sizeof(src), "%.*s%s", slash ? (int)(slash - from + 1) : 0, from, names[i]);
        else
            snprintf(src, sizeof(src), "%s/%s", from, names[i]);
        snprintf(dst, sizeof(dst), "%s/%s", dir, names[i]);
        if (access(src, R_OK) == 0 && copy_file(src, dst, err) != 0)
            return -1;
    }
    return 0;
}

/* An entry of n matrices of the same width stacked by rows, written as one tensor. */
static void fused_entry(hf_entry *e, const char *name, const llm_tensor *const *parts, int n)
{
    snprintf(e->name, sizeof(e->name), "%s", name);
    e->t = parts[0];
    e->n_part = n;
    for (int p = 0; p < n; p++) {
        e->part[p] = parts[p];
        e->rows += parts[p]->ne[1];
    }
}

/* A layer's experts of one kind as one 3-D tensor (hf_entry's n_exp; parts 2: gate | up). */
static void exp_entry(hf_entry *e, const char *name, const llm_tensor *exp0, int n_exp, int parts)
{
    snprintf(e->name, sizeof(e->name), "%s", name);
    e->t = exp0;
    e->n_exp = n_exp;
    e->exp_parts = parts;
    e->rows = (int64_t)n_exp * parts * exp0->ne[1];
}

/* A decoder's tensors under transformers' names (Llama, Mistral, Qwen, Gemma, SmolLM3, Granite, their MoE):
 * their count. */

static int decoder_entries(const llm_model *m, hf_entry *e)
{
    int granitemoe = strcmp(m->arch, "granitemoe") == 0, gptoss = strcmp(m->arch, "gpt-oss") == 0;
    int mx = gptoss && llm_hf_gptoss_mx(m), phi3 = strcmp(m->arch, "phi3") == 0;
    const llm_config *c = &m->cfg;
    /* (an ERNIE 4.5 directory keeps its adjacent pairs) */
    int k = 0, perm = c->rope_layout == LLM_ROPE_ADJACENT && strncmp(m->arch, "ernie4_5", 8) != 0 ? 2 : 0;
    int ernie_moe = strcmp(m->arch, "ernie4_5-moe") == 0, glm = strcmp(m->arch, "glm4moe") == 0;
    /* (OLMoE's, ERNIE 4.5 MoE's and GLM-4.5's experts are named as Qwen's) */
    int qwen_moe = strcmp(m->arch, "qwen3moe") == 0 || strcmp(m->arch, "qwen2moe") == 0 || strcmp(m->arch, "olmoe") == 0 ||
                   ernie_moe || glm;
    /* a partial rotary's q / k rows (biases, norms) back in the file's order */
    int qk = c->rope_dims > 0 && c->rope_dims != c->head_dim ? 3 : perm;
    int gemma = strncmp(m->arch, "gemma", 5) == 0, gemma23 = gemma && m->layers[0].post_attn_norm.data != NULL;
    float nadd = gemma ? -1.0f : 0.0f; /* Gemma's norms are stored as w, scaling by 1 + w */
#define ADD(nm, tensor, p) do { snprintf(e[k].name, sizeof(e[k].name), "%s", nm); e[k].t = (tensor); \
        e[k].rows = e[k].t->ne[1]; e[k].perm = (p); e[k].add = strstr(e[k].name, "norm") != NULL ? nadd : 0.0f; \
        k++; } while (0)
    ADD("model.embed_tokens.weight", &m->tok_embd, 0);
    ADD("model.norm.weight", &m->out_norm, 0);
    if (!c->tied_embeddings)
        ADD("lm_head.weight", &m->output, 0);
    for (int i = 0; i < c->n_layers; i++) {
        const llm_layer *L = &m->layers[i];
        char nm[96];
#define L_(suffix, field, p) snprintf(nm, sizeof(nm), "model.layers.%d." suffix ".weight", i); ADD(nm, &L->field, p);
        if (!c->post_norm_only) {
            L_("input_layernorm", attn_norm, 0)
        }
        if (phi3) { /* q|k|v and gate|up stacked, as Phi3ForCausalLM's */
            const llm_tensor *qkv[3] = { &L->wq, &L->wk, &L->wv };
            snprintf(nm, sizeof(nm), "model.layers.%d.self_attn.qkv_proj.weight", i);
            fused_entry(&e[k], nm, qkv, 3);
            e[k].perm = qk;
            e[k++].perm_parts = 2;
            L_("self_attn.o_proj", wo, 0)
        } else {
            L_("self_attn.q_proj", wq, qk) L_("self_attn.k_proj", wk, qk)
            L_("self_attn.v_proj", wv, 0) L_("self_attn.o_proj", wo, 0)
        }
        if (c->post_norm_only) { /* OLMo 2: the blocks' outputs' norms only */
            L_("post_attention_layernorm", post_attn_norm, 0)
            L_("post_feedforward_layernorm", post_ffn_norm, 0)
        } else if (gemma23) {
            L_("post_attention_layernorm", post_attn_norm, 0)
            L_("pre_feedforward_layernorm", ffn_norm, 0)
            L_("post_feedforward_layernorm", post_ffn_norm, 0)
        } else {
            L_("post_attention_layernorm", ffn_norm, 0)
        }
        if (phi3) {
            const llm_tensor *gu[2] = { &L->w_gate, &L->w_up };
            snprintf(nm, sizeof(nm), "model.layers.%d.mlp.gate_up_proj.weight", i);
            fused_entry(&e[k++], nm, gu, 2);
            L_("mlp.down_proj", w_down, 0)
        } else if (!llm_layer_moe(c, L)) { /* (ERNIE 4.5 MoE's dense first layers too) */
            L_("mlp.gate_proj", w_gate, 0) L_("mlp.up_proj", w_up, 0) L_("mlp.down_proj", w_down, 0)
        } else if (gptoss) { /* its router (and bias), experts (MXFP4 or not) and their biases */
            L_("mlp.router", ffn_gate_inp, 0)
            snprintf(nm, sizeof(nm), "model.layers.%d.mlp.router.bias", i);
            ADD(nm, &L->ffn_gate_inp_b, 0);
            static const char *const kn[2][4] = { { "gate_up_proj", "gate_up_proj_bias", "down_proj", "" },
                                                  { "gate_up_proj_blocks", "gate_up_proj_scales", "down_proj_blocks",
                                                    "down_proj_scales" } };
            static const int kk[2][4] = { { LLM_HF_OSS_GU, LLM_HF_OSS_GU_BIAS, LLM_HF_OSS_DOWN, 0 },
                                          { LLM_HF_OSS_GU_BLOCKS, LLM_HF_OSS_GU_SCALES, LLM_HF_OSS_DOWN_BLOCKS,
                                            LLM_HF_OSS_DOWN_SCALES } };
            for (int x = 0; x < 4; x++)
                if (kk[mx][x] != 0) {
                    snprintf(e[k].name, sizeof(e[k].name), "model.layers.%d.mlp.experts.%s", i, kn[mx][x]);
                    e[k].t = &L->experts[0];
                    e[k].oss = kk[mx][x];
                    e[k++].L = L;
                }
            if (mx) {
                snprintf(e[k].name, sizeof(e[k].name), "model.layers.%d.mlp.experts.gate_up_proj_bias", i);
                e[k].t = &L->experts[0];
                e[k].oss = LLM_HF_OSS_GU_BIAS;
                e[k++].L = L;
            }
            snprintf(nm, sizeof(nm), "model.layers.%d.mlp.experts.down_proj_bias", i);
            ADD(nm, &L->exp_b[2], 0);
        } else if (granitemoe) { /* its router, parallel experts (3-D: gate | up, down) and shared expert */
            snprintf(nm, sizeof(nm), "model.layers.%d.block_sparse_moe.router.layer.weight", i);
            ADD(nm, &L->ffn_gate_inp, 0);
            snprintf(nm, sizeof(nm), "model.layers.%d.block_sparse_moe.input_linear.weight", i);
            exp_entry(&e[k++], nm, &L->experts[0], c->n_expert, 2);
            snprintf(nm, sizeof(nm), "model.layers.%d.block_sparse_moe.output_linear.weight", i);
            exp_entry(&e[k++], nm, &L->experts[2], c->n_expert, 1);
            if (llm_layer_has_shared(L)) {
                const llm_tensor *gu[2] = { &L->w_gate, &L->w_up };
                snprintf(nm, sizeof(nm), "model.layers.%d.shared_mlp.input_linear.weight", i);
                fused_entry(&e[k++], nm, gu, 2);
                L_("shared_mlp.output_linear", w_down, 0)
            }
        } else { /* Qwen 3 MoE's names (ERNIE 4.5 MoE's too), or Mixtral's (w1 gate, w3 up, w2 down) */
            const char *moe = qwen_moe ? "mlp" : "block_sparse_moe";
            static const char *const qn[3] = { "gate_proj", "up_proj", "down_proj" }, *const mn[3] = { "w1", "w3", "w2" };
            snprintf(nm, sizeof(nm), "model.layers.%d.%s.gate.weight", i, moe);
            ADD(nm, &L->ffn_gate_inp, 0);
            for (int x = 0; x < c->n_expert; x++)
                for (int w = 0; w < 3; w++) {
                    snprintf(nm, sizeof(nm), "model.layers.%d.%s.experts.%d.%s.weight", i, moe, x,
                             qwen_moe ? qn[w] : mn[w]);
                    ADD(nm, &L->experts[3 * x + w], 0);
                }
            if ((ernie_moe || glm) && L->exp_probs_b.data != NULL) { /* the bias choosing the experts (ERNIE's
                                                                     * [1, n_expert]) */
                snprintf(nm, sizeof(nm), ernie_moe ? "model.layers.%d.mlp.moe_statics.e_score_correction_bias"
                                                   : "model.layers.%d.mlp.gate.e_score_correction_bias", i);
                ADD(nm, &L->exp_probs_b, 0);
            }
            if ((ernie_moe || glm) && llm_layer_has_shared(L)) { /* the shared experts, as one */
                L_("mlp.shared_experts.gate_proj", w_gate, 0) L_("mlp.shared_experts.up_proj", w_up, 0)
                L_("mlp.shared_experts.down_proj", w_down, 0)
            }
            if (L->shexp_gate.data != NULL) { /* Qwen 2 MoE's shared expert */
                L_("mlp.shared_expert.gate_proj", w_gate, 0) L_("mlp.shared_expert.up_proj", w_up, 0)
                L_("mlp.shared_expert.down_proj", w_down, 0) L_("mlp.shared_expert_gate", shexp_gate, 0)
            }
        }
#undef L_
#define V_(name, field, p) snprintf(nm, sizeof(nm), "model.layers.%d." name, i); \
        if (L->field.data != NULL) ADD(nm, &L->field, p);
        V_("self_attn.q_proj.bias", bq, qk) V_("self_attn.k_proj.bias", bk, qk)
        V_("self_attn.v_proj.bias", bv, 0)
        V_("self_attn.q_norm.weight", q_norm, qk) V_("self_attn.k_norm.weight", k_norm, qk)
        V_("self_attn.o_proj.bias", bo, 0) V_("self_attn.sinks", attn_sinks, 0) /* (gpt-oss's) */
#undef V_
    }
#undef ADD
    for (int i = 0; c->bidirectional && i < k; i++) /* a bare Gemma3TextModel's names, as sentence-transformers */
        if (strncmp(e[i].name, "model.", 6) == 0)
            memmove(e[i].name, e[i].name + 6, strlen(e[i].name + 6) + 1);
    for (int i = 0; strcmp(m->arch, "exaone") == 0 && i < k; i++) /* EXAONE 3.x's own names */
        llm_hf_exaone_name(e[i].name, sizeof(e[i].name));
    return k;
}

/* ModernBERT's tensors as a bare ModernBertModel names them: q|k|v stacked in attn.Wqkv, the GLU's input (the
 * activated half, w_gate) then its multiplier (w_up) in mlp.Wi, no attn_norm in the first layer; their count. */
static int modern_bert_entries(const llm_model *m, hf_entry *e)
{
    int k = 0;
    char nm[96];
#define ADD(nm, tensor) do { snprintf(e[k].name, sizeof(e[k].name), "%s", nm); e[k].t = (tensor); \
        e[k].rows = e[k].t->ne[1]; k++; } while (0)
    ADD("embeddings.tok_embeddings.weight", &m->tok_embd);
    ADD("embeddings.norm.weight", &m->embd_norm);
    for (int i = 0; i < m->cfg.n_layers; i++) {
        const llm_layer *L = &m->layers[i];
        const llm_tensor *qkv[3] = { &L->wq, &L->wk, &L->wv }, *gu[2] = { &L->w_gate, &L->w_up };
#define L_(suffix) snprintf(nm, sizeof(nm), "layers.%d." suffix ".weight", i)
        if (L->attn_norm.data != NULL) {
            L_("attn_norm");
            ADD(nm, &L->attn_norm);
        }
        L_("attn.Wqkv");
        fused_entry(&e[k++], nm, qkv, 3);
        L_("attn.Wo");
        ADD(nm, &L->wo);
        L_("mlp_norm");
        ADD(nm, &L->ffn_norm);
        L_("mlp.Wi");
        fused_entry(&e[k++], nm, gu, 2);
        L_("mlp.Wo");
        ADD(nm, &L->w_down);
#undef L_
    }
    ADD("final_norm.weight", &m->out_norm);
#undef ADD
    return k;
}

int llm_model_save_hf(const llm_model *m, llm_dtype dtype, const char *dir, llm_err *err)
{
    if (dtype != LLM_F32 && dtype != LLM_F16 && dtype != LLM_BF16) {
        llm_seterr(err, "%s: safetensors output supports f32, f16 and bf16 (not %s)", dir, llm_dtype_name(dtype));
        return -1;
    }
    if (m->cfg.encoder) {
        llm_seterr(err, "%s: a %s model is saved as GGUF only (not --format hf)", dir, m->arch);
        return -1;
    }
    if (m->cls_norm != NULL) {
        llm_seterr(err, "%s: re-saving a ModernBERT reranker is not supported: serve its Hugging Face directory", dir);
        return -1;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        llm_seterr(err, "%s: cannot create directory: %s", dir, strerror(errno));
        return -1;
    }
    if (write_config(m, dir, dtype, err) != 0 || write_pooling(m, dir, err) != 0 || write_st_modules(m, dir, err) != 0 ||
        write_tokenizer_files(m, dir, err) != 0)
        return -1;
    const llm_config *c = &m->cfg;
    if (c->n_expert > 0 && strcmp(m->arch, "llama") == 0 && (c->expert_ff != c->hidden_dim || !c->moe_norm_topk)) {
        llm_seterr(err, "%s: a Mixtral's experts are intermediate_size wide and renormalised; this model's are not",
                   dir);
        return -1;
    }
    const llm_layer *moe0 = llm_moe_layer0(m);
    if ((strcmp(m->arch, "ernie4_5-moe") == 0 || strcmp(m->arch, "glm4moe") == 0) && moe0 != NULL &&
        llm_layer_has_shared(moe0) && c->hidden_dim % c->expert_ff != 0) {
        llm_seterr(err, "%s: %s's shared experts are a whole number of experts wide (%d over experts of %d)", dir,
                   m->arch, c->hidden_dim, c->expert_ff);
        return -1;
    }
    int n = (16 + 3 * c->n_expert + 1) * c->n_layers + 3, k = 0;
    hf_entry *e = calloc((size_t)n, sizeof(*e));
    float *tmp = NULL;
    uint8_t *row = NULL;
    FILE *f = NULL;
    char *hdr = NULL;
    int rc = -1;
    char path[1100];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    if (e == NULL)
        goto oom;
    k = strcmp(m->arch, "modern-bert") == 0 ? modern_bert_entries(m, e) : decoder_entries(m, e);
    cJSON *j = cJSON_CreateObject();
    uint64_t off = 0;
    int64_t maxcols = 0;
    for (int i = 0; i < k; i++) {
        const llm_tensor *t = e[i].t;
        e[i].off = off;
        if (e[i].oss) { /* gpt-oss's experts: their own shapes */
            uint64_t shape[4];
            int nd;
            const char *st;
            e[i].nbytes = llm_hf_gptoss_shape(m, e[i].oss, dtype, shape, &nd, &st);
            off += e[i].nbytes;
            cJSON *o = cJSON_AddObjectToObject(j, e[i].name);
            cJSON_AddStringToObject(o, "dtype", st != NULL ? st : st_dtype(dtype));
            cJSON *sh = cJSON_AddArrayToObject(o, "shape");
            for (int d = 0; d < nd; d++)
                cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)shape[d]));
            cJSON *of = cJSON_AddArrayToObject(o, "data_offsets");
            cJSON_AddItemToArray(of, cJSON_CreateNumber((double)e[i].off));
            cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(e[i].off + e[i].nbytes)));
            continue;
        }
        e[i].nbytes = (uint64_t)t->ne[0] * (uint64_t)e[i].rows * llm_dtype_block_bytes(dtype);
        off += e[i].nbytes;
        if (t->ne[0] > maxcols)
            maxcols = t->ne[0];
        cJSON *o = cJSON_AddObjectToObject(j, e[i].name);
        cJSON_AddStringToObject(o, "dtype", st_dtype(dtype));
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        if (e[i].n_exp > 0) /* [n_exp][its rows][cols] */
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)e[i].n_exp));
        /* (a Linear(dim, 1): [1, dim]; ERNIE's bias is [1, n_expert], GLM-4.5's [n_expert]) */
        if (e[i].rows > 1 || strstr(e[i].name, "shared_expert_gate") != NULL || strstr(e[i].name, "moe_statics") != NULL)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)(e[i].n_exp > 0 ? e[i].rows / e[i].n_exp
                                                                                  : e[i].rows)));
        cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->ne[0]));
        cJSON *of = cJSON_AddArrayToObject(o, "data_offsets");
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)e[i].off));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(e[i].off + e[i].nbytes)));
    }
    hdr = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    tmp = malloc((size_t)maxcols * sizeof(float));
    row = malloc((size_t)maxcols * 4);
    if (hdr == NULL || tmp == NULL || row == NULL)
        goto oom;
    f = fopen(path, "wb");
    if (f == NULL)
        goto ioerr;
    uint64_t hl = strlen(hdr), padded = (hl + 7) / 8 * 8;
    if (fwrite(&padded, 8, 1, f) != 1 || fwrite(hdr, 1, hl, f) != hl)
        goto ioerr;
    for (uint64_t i = hl; i < padded; i++)
        if (fputc(' ', f) == EOF)
            goto ioerr;
    for (int i = 0; i < k; i++) {
        if (e[i].oss) {
            if (llm_hf_gptoss_write(f, m, e[i].L, e[i].oss, dtype, err) != 0)
                goto out;
            continue;
        }
        conv cv = { .src = e[i].t, .dst = dtype, .perm = e[i].perm, .head_dim = c->head_dim, .rope_dims = c->rope_dims,
                    .tmp = tmp, .add = e[i].add,
                    .n_part = e[i].n_part, .part = { e[i].part[0], e[i].part[1], e[i].part[2] },
                    .perm_parts = e[i].perm_parts,
                    .n_exp = e[i].n_exp, .exp_parts = e[i].exp_parts };
        size_t rb = (size_t)e[i].t->ne[0] * llm_dtype_block_bytes(dtype);
        for (int64_t r = 0; r < e[i].rows; r++) {
            if (e[i].rows == 1) /* a vector: a bias's elements move as its matrix's rows */
                conv_fill_vec(&cv, 0, 1, row, err);
            else
                conv_fill(&cv, (uint64_t)r, 1, row, err);
            if (fwrite(row, 1, rb, f) != rb)
                goto ioerr;
        }
    }
    if (fclose(f) != 0) {
        f = NULL;
        goto ioerr;
    }
    f = NULL;
    rc = 0;
    goto out;
oom:
    llm_seterr(err, "%s: out of memory", dir);
    goto out;
ioerr:
    llm_seterr(err, "%s: write failed: %s", path, strerror(errno));
out:
    if (f != NULL)
        fclose(f);
    free(e);
    free(tmp);
    free(row);
    free(hdr);
    return rc;
}
