/* What every backend checks and computes the same way: the model and batch
 * contracts of backend.h and the RoPE frequencies. Header-only because the CUDA library
 * (kernels/, a separate .so) links nothing from libllm. */
#ifndef LLM_BACKEND_UTIL_H
#define LLM_BACKEND_UTIL_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "model.h"

/* YaRN's dimension (of head_dim) that turns n_rot times over the original context (llama.cpp's and Hugging
 * Face's find_correction_dim). */
static inline double llm_yarn_corr_dim(const llm_config *c, double n_rot)
{
    return c->head_dim * log(c->rope_orig_ctx / (n_rot * 6.283185307179586)) / (2.0 * log((double)c->rope_theta));
}

/* 1 where frequency i of head_dim/2 rotates its pair; 0 past a partial rotary's dims, whose table entries are
 * the identity (cos 1, sin 0, no attention factor): those dims pass through. */
static inline int llm_rope_rotates(const llm_config *c, int i)
{
    return c->rope_dims <= 0 || 2 * i < c->rope_dims;
}

/* Frequency i of head_dim/2 after Llama 3 scaling (Hugging Face's
 * _compute_llama3_parameters), llama.cpp's rope_freqs divisors, YaRN (_compute_yarn_parameters: frequencies
 * below the correction range interpolated by 1/factor, above it kept, a linear ramp between) or linear
 * scaling. */
static inline double llm_rope_freq(const llm_model *m, int i)
{
    const llm_config *c = &m->cfg;
    if (!llm_rope_rotates(c, i))
        return 0.0; /* past a partial rotary's dims: they pass through */
    double nd = c->rope_dims > 0 ? c->rope_dims : c->head_dim;
    double freq = pow((double)c->rope_theta, -2.0 * i / nd);
    if (m->rope_freqs != NULL)
        return freq / (double)m->rope_freqs[i];
    if (c->rope_scaling == LLM_ROPE_SCALING_LONGROPE) /* as llama.cpp: by the context the model runs with */
        return freq / (double)(c->seq_len > c->rope_orig_ctx ? m->rope_long : m->rope_short)[i];
    if (c->rope_scaling == LLM_ROPE_SCALING_NONE)
        return freq;
    if (c->rope_scaling == LLM_ROPE_SCALING_LINEAR)
        return freq / c->rope_factor;
    if (c->rope_scaling == LLM_ROPE_SCALING_YARN) {
        double lo = llm_yarn_corr_dim(c, c->yarn_beta_fast), hi = llm_yarn_corr_dim(c, c->yarn_beta_slow);
        if (!c->yarn_no_truncate) {
            lo = floor(lo);
            hi = ceil(hi);
        }
        lo = lo > 0 ? lo : 0;
        hi = hi < c->head_dim - 1 ? hi : c->head_dim - 1;
        double y = (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
        double keep = 1.0 - (y < 0 ? 0 : y > 1 ? 1 : y); /* 1: extrapolated (as trained), 0: interpolated */
        return freq / c->rope_factor * (1.0 - keep) + freq * keep;
    }
    double factor = c->rope_factor, lo = c->rope_low_freq_factor, hi = c->rope_high_freq_factor;
    double old_ctx = c->rope_orig_ctx;
    double low_wavelen = old_ctx / lo, high_wavelen = old_ctx / hi;
    double wavelen = 6.283185307179586 / freq;
    if (wavelen < high_wavelen)
        return freq;
    if (wavelen > low_wavelen)
        return freq / factor;
    double smooth = (old_ctx / wavelen - lo) / (hi - lo);
    return (1.0 - smooth) * freq / factor + smooth * freq;
}

/* What the rope's cos and sin are multiplied by: YaRN's attention factor (1 + 0.1 ln factor, or the model's
 * own), LongRoPE's (the file's attn_factor, with either set of divisors), 1 otherwise. */
static inline double llm_rope_mscale(const llm_model *m)
{
    int r = m->cfg.rope_scaling;
    return (r == LLM_ROPE_SCALING_YARN || r == LLM_ROPE_SCALING_LONGROPE) && m->rope_freqs == NULL ? m->cfg.rope_mscale
                                                                                                    : 1.0;
}

/* Layers whose KV may live in a window pool (llm_backend_opts.swa_blocks): the causal sliding-window layers
 * (an encoder's symmetric window reads ahead of its position: none). */
static inline int llm_swa_pool_layers(const llm_model *m)
{
    int n = 0;
    if (m->cfg.bidirectional || m->cfg.swa_window <= 0)
        return 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        n += m->layers[l].swa != 0;
    return n;
}

/* A batch a backend may run: tokens in the vocabulary, sequences named, positions in the context and
 * covered by their block tables, block ids inside the pool of kv_blocks (and, with a window pool of
 * swa_blocks > 0, each window table's ids inside it). 0, or -1 with err filled ("<who>: ..."). */
static inline int llm_batch_check(const llm_batch *b, const llm_config *c, int block_size, int kv_blocks,
                                  int swa_blocks, const char *who, llm_err *err)
{
    if (b->n_tokens <= 0 || b->tokens == NULL || b->pos == NULL || b->seq == NULL || b->want_logits == NULL ||
        b->n_seqs <= 0 || b->seqs == NULL) {
        snprintf(err->msg, sizeof(err->msg), "%s: empty or incomplete batch", who);
        return -1;
    }
    for (int i = 0; i < b->n_tokens; i++) {
        int tok = b->tokens[i], pos = b->pos[i], s = b->seq[i];
        if (tok < 0 || tok >= c->vocab_size) {
            snprintf(err->msg, sizeof(err->msg), "%s: token %d at batch index %d is outside the vocabulary of %d",
                     who, tok, i, c->vocab_size);
            return -1;
        }
        if (s < 0 || s >= b->n_seqs) {
            snprintf(err->msg, sizeof(err->msg), "%s: batch index %d names sequence %d of %d", who, i, s, b->n_seqs);
            return -1;
        }
        if (pos < 0 || pos >= c->seq_len) {
            snprintf(err->msg, sizeof(err->msg), "%s: position %d at batch index %d is outside the context of %d",
                     who, pos, i, c->seq_len);
            return -1;
        }
        const llm_seq_view *v = &b->seqs[s];
        if (v->blocks == NULL || pos / block_size >= v->n_blocks) {
            snprintf(err->msg, sizeof(err->msg), "%s: sequence %d's block table does not cover position %d", who,
                     s, pos);
            return -1;
        }
        /* the tables up to the last position of a run of consecutive positions of one sequence, once per run
         * (a long prompt's chunk would otherwise read them once per token) */
        if (i + 1 < b->n_tokens && b->seq[i + 1] == s && b->pos[i + 1] == pos + 1)
            continue;
        for (int k = 0; k <= pos / block_size; k++)
            if (v->blocks[k] < 0 || v->blocks[k] >= kv_blocks) {
                snprintf(err->msg, sizeof(err->msg), "%s: sequence %d uses KV block %d of a pool of %d", who, s,
                         v->blocks[k], kv_blocks);
                return -1;
            }
        if (swa_blocks > 0 && v->swa_blocks == NULL) {
            snprintf(err->msg, sizeof(err->msg), "%s: sequence %d has no window table", who, s);
            return -1;
        }
        for (int k = 0; swa_blocks > 0 && k <= pos / block_size; k++)
            if (v->swa_blocks[k] < 0 || v->swa_blocks[k] >= swa_blocks) {
                snprintf(err->msg, sizeof(err->msg), "%s: sequence %d uses window block %d of a pool of %d", who,
                         s, v->swa_blocks[k], swa_blocks);
                return -1;
            }
    }
    return 0;
}

/* A weight a backend can run: present (its data, or only its file blocks where llm_backend_prepare left a
 * Q4_K / Q6_K matrix for the CUDA upload: llm_backend_create lets no other backend see that), of a known type, of
 * the expected shape (cols x rows), F32 where f32_only (norms), and a whole number of blocks per row for
 * the block types. */
static inline int llm_tensor_check(const llm_tensor *t, const char *what, int layer, int64_t cols, int64_t rows,
                                   int f32_only, const char *who, llm_err *err)
{
    int ty = (int)t->type;
    if ((t->data == NULL && t->src == NULL) || !(ty == LLM_F32 || ty == LLM_F16 || ty == LLM_BF16 || ty == LLM_Q8_0 || ty == LLM_Q4_0)) {
        snprintf(err->msg, sizeof(err->msg), "%s: tensor %s (layer %d) is missing or has an unknown type", who,
                 what, layer);
        return -1;
    }
    if (t->ne[0] != cols || t->ne[1] != rows) {
        snprintf(err->msg, sizeof(err->msg), "%s: tensor %s (layer %d) is %lldx%lld, expected %lldx%lld", who,
                 what, layer, (long long)t->ne[0], (long long)t->ne[1], (long long)cols, (long long)rows);
        return -1;
    }
    if (f32_only && ty != LLM_F32) {
        snprintf(err->msg, sizeof(err->msg), "%s: norm %s (layer %d) must be f32", who, what, layer);
        return -1;
    }
    if ((ty == LLM_Q8_0 || ty == LLM_Q4_0) && cols % LLM_QK != 0) {
        snprintf(err->msg, sizeof(err->msg), "%s: tensor %s (layer %d): row of %lld is not a whole number of "
                 "blocks of %d", who, what, layer, (long long)cols, LLM_QK);
        return -1;
    }
    return 0;
}

/* The tensor the classifier uses: the embeddings when tied (or no output matrix). */
static inline const llm_tensor *llm_classifier(const llm_model *m)
{
    return m->cfg.tied_embeddings || m->output.data == NULL ? &m->tok_embd : &m->output;
}

/* 1 when every layer matrix of m and its embedding are F32. */
static inline int llm_model_all_f32(const llm_model *m)
{
    if (m->tok_embd.type != LLM_F32)
        return 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        llm_tensor *mats[LLM_LAYER_MATS_MAX];
        llm_layer_mats(&m->layers[l], &m->cfg, mats);
        for (int i = 0; i < llm_layer_n_mats(&m->cfg); i++)
            if (mats[i]->type != LLM_F32)
                return 0;
    }
    return 1;
}

/* "auto", "f32", "f16", "q8_0" (NULL: auto) -> LLM_KV_*; -1 for anything else. */
static inline int llm_kv_dtype_parse(const char *s)
{
    if (s == NULL || strcmp(s, "auto") == 0)
        return LLM_KV_AUTO;
    return strcmp(s, "f32") == 0    ? LLM_KV_F32
           : strcmp(s, "f16") == 0  ? LLM_KV_F16
           : strcmp(s, "q8_0") == 0 ? LLM_KV_Q8_0
                                    : -1;
}

/* A Q8_0 KV cache's elements per scale: 32 (llama.cpp's q8_0 block), or for a head_dim that 32 does not divide
 * the largest power of two that does (a scale never spans two heads). */
static inline int llm_kv_q8_group(int head_dim)
{
    int g = 32;
    while (head_dim % g != 0)
        g /= 2;
    return g;
}


/* 1: a KV cache asked for as kv_dtype (LLM_KV_*) on m holds f16, 0: f32. */
static inline int llm_kv_f16(const llm_model *m, int kv_dtype)
{
    return kv_dtype == LLM_KV_F16 || (kv_dtype == LLM_KV_AUTO && !llm_model_all_f32(m));
}

/* Bytes a token takes in a KV cache of type kv_dtype on m (K and V) in n_layers layers. */
static inline long long llm_kv_layers_token_bytes(const llm_model *m, int kv_dtype, int n_layers)
{
    const llm_config *c = &m->cfg;
    long long n = 2LL * n_layers * c->n_kv_heads * c->head_dim;
    if (kv_dtype == LLM_KV_Q8_0)
        return n + n / llm_kv_q8_group(c->head_dim) * (long long)sizeof(float);
    return n * (llm_kv_f16(m, kv_dtype) ? 2 : 4);
}

/* Bytes a token takes in a KV cache of type kv_dtype on m (K and V, every layer). */
static inline long long llm_kv_token_bytes(const llm_model *m, int kv_dtype)
{
    return llm_kv_layers_token_bytes(m, kv_dtype, m->cfg.n_layers);
}

/* An encoder's weights (llm_config.encoder), checked as llm_model_check's below. */
static inline int llm_encoder_check(const llm_model *m, const char *who, llm_err *err)
{
    const llm_config *c = &m->cfg;
    if (c->n_kv_heads != c->n_heads || c->n_expert != 0 || c->n_types < 1 ||
        llm_tensor_check(&m->tok_embd, "token_embd", -1, c->dim, c->vocab_size, 0, who, err) ||
        (m->pos_embd.data != NULL && /* (absent: rope positions, nomic-bert) */
         llm_tensor_check(&m->pos_embd, "position_embd", -1, c->dim, c->seq_len, 0, who, err)) ||
        llm_tensor_check(&m->type_embd, "token_types", -1, c->dim, c->n_types, 0, who, err) ||
        llm_tensor_check(&m->embd_norm, "token_embd_norm", -1, c->dim, 1, 1, who, err) ||
        llm_tensor_check(&m->embd_norm_b, "token_embd_norm.bias", -1, c->dim, 1, 1, who, err)) {
        if (err->msg[0] == '\0')
            snprintf(err->msg, sizeof(err->msg), "%s: bad encoder configuration", who);
        return -1;
    }
    int qd = c->n_heads * c->head_dim;
    for (int l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &m->layers[l];
        const llm_tensor *w[6] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_up, &L->w_down };
        const llm_tensor *b[6] = { &L->bq, &L->bk, &L->bv, &L->bo, &L->b_up, &L->b_down };
        static const char *const names[6] = { "attn_q", "attn_k", "attn_v", "attn_output", "ffn_up", "ffn_down" };
        int rows[6] = { qd, qd, qd, c->dim, c->hidden_dim, c->dim }, cols[6] = { c->dim, c->dim, c->dim, qd, c->dim,
                                                                                 c->hidden_dim };
        for (int i = 0; i < 6; i++) /* (biases: BERT's, not nomic-bert's) */
            if (llm_tensor_check(w[i], names[i], l, cols[i], rows[i], 0, who, err) ||
                (b[i]->data != NULL && llm_tensor_check(b[i], names[i], l, rows[i], 1, 1, who, err)))
                return -1;
        if ((m->pos_embd.data == NULL && L->nope && c->alibi_max_bias == 0.0f) || /* (jina: ALiBi) */
            ((L->w_gate.data != NULL || L->w_gate.src != NULL) &&
             llm_tensor_check(&L->w_gate, "ffn_gate", l, c->dim, c->hidden_dim, 0, who, err))) {
            if (err->msg[0] == '\0')
                snprintf(err->msg, sizeof(err->msg), "%s: layer %d of an encoder without position embeddings does "
                         "not rotate", who, l);
            return -1;
        }
        if (llm_tensor_check(&L->attn_norm, "attn_output_norm", l, c->dim, 1, 1, who, err) ||
            llm_tensor_check(&L->attn_norm_b, "attn_output_norm.bias", l, c->dim, 1, 1, who, err) ||
            llm_tensor_check(&L->ffn_norm, "layer_output_norm", l, c->dim, 1, 1, who, err) ||
            llm_tensor_check(&L->ffn_norm_b, "layer_output_norm.bias", l, c->dim, 1, 1, who, err))
            return -1;
    }
    return 0;
}

/* A model a backend can run: a sane configuration and every weight checked as above. */
static inline int llm_model_check(const llm_model *m, const char *who, llm_err *err)
{
    const llm_config *c = &m->cfg;
    if (c->dim <= 0 || c->hidden_dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
        c->head_dim <= 0 || (c->head_dim & 1) || c->vocab_size <= 0 || c->seq_len <= 0 ||
        c->n_heads % c->n_kv_heads != 0 || m->layers == NULL) {
        snprintf(err->msg, sizeof(err->msg), "%s: invalid model configuration (dim %d, hidden %d, layers %d, "
                 "heads %d/%d, head_dim %d, vocab %d, seq_len %d)", who, c->dim, c->hidden_dim, c->n_layers,
                 c->n_heads, c->n_kv_heads, c->head_dim, c->vocab_size, c->seq_len);
        return -1;
    }
    int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    if (c->encoder)
        return llm_encoder_check(m, who, err);
    if (llm_tensor_check(&m->tok_embd, "token_embd", -1, c->dim, c->vocab_size, 0, who, err) ||
        llm_tensor_check(&m->out_norm, "output_norm", -1, c->dim, 1, 1, who, err) ||
        llm_tensor_check(llm_classifier(m), "output", -1, c->dim, c->vocab_size, 0, who, err) ||
        (c->layer_norm && llm_tensor_check(&m->embd_norm, "token_embd_norm", -1, c->dim, 1, 1, who, err)))
        return -1;
    for (int l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &m->layers[l];
        /* (ModernBERT's first layer has no attention norm) */
        int attn_norm = !(c->layer_norm && l == 0 && L->attn_norm.data == NULL) && !c->post_norm_only;
        /* (OLMo 2: no norms before the blocks, q / k norms over whole rows) */
        int qn = c->qk_norm_full ? qd : c->head_dim, kn = c->qk_norm_full ? kvd : c->head_dim;
        if ((attn_norm && llm_tensor_check(&L->attn_norm, "attn_norm", l, c->dim, 1, 1, who, err)) ||
            llm_tensor_check(&L->wq, "attn_q", l, c->dim, qd, 0, who, err) ||
            llm_tensor_check(&L->wk, "attn_k", l, c->dim, kvd, 0, who, err) ||
            llm_tensor_check(&L->wv, "attn_v", l, c->dim, kvd, 0, who, err) ||
            llm_tensor_check(&L->wo, "attn_output", l, qd, c->dim, 0, who, err) ||
            (!c->post_norm_only && llm_tensor_check(&L->ffn_norm, "ffn_norm", l, c->dim, 1, 1, who, err)))
            return -1;
        const int ff = llm_layer_ff(c, L);
        if (!llm_layer_moe(c, L) &&
            (llm_tensor_check(&L->w_gate, "ffn_gate", l, c->dim, ff, 0, who, err) ||
             llm_tensor_check(&L->w_up, "ffn_up", l, c->dim, ff, 0, who, err) ||
             llm_tensor_check(&L->w_down, "ffn_down", l, ff, c->dim, 0, who, err)))
            return -1;
        if (llm_layer_moe(c, L)) {
            if (L->experts == NULL || c->n_expert_used < 1 || c->n_expert_used > c->n_expert ||
                c->n_expert > LLM_MAX_EXPERTS) {
                snprintf(err->msg, sizeof(err->msg), "%s: layer %d: bad experts (%d, %d used)", who, l, c->n_expert,
                         c->n_expert_used);
                return -1;
            }
            if (llm_tensor_check(&L->ffn_gate_inp, "ffn_gate_inp", l, c->dim, c->n_expert, 0, who, err) ||
                (L->exp_probs_b.data != NULL &&
                 llm_tensor_check(&L->exp_probs_b, "exp_probs_b", l, c->n_expert, 1, 1, who, err)))
                return -1;
            if (llm_layer_has_shared(L) && /* a shared expert, gated (Qwen 2 MoE) or not (GraniteMoeShared) */
                (llm_tensor_check(&L->w_gate, "ffn_gate_shexp", l, c->dim, c->hidden_dim, 0, who, err) ||
                 llm_tensor_check(&L->w_up, "ffn_up_shexp", l, c->dim, c->hidden_dim, 0, who, err) ||
                 llm_tensor_check(&L->w_down, "ffn_down_shexp", l, c->hidden_dim, c->dim, 0, who, err) ||
                 (L->shexp_gate.data != NULL &&
                  llm_tensor_check(&L->shexp_gate, "ffn_gate_inp_shexp", l, c->dim, 1, 1, who, err))))
                return -1;
            for (int i = 0; i < 3 * c->n_expert; i++)
                if (llm_expert_held(c, i / 3) && /* (a share of a model split by experts holds only its own) */
                    llm_tensor_check(&L->experts[i], i % 3 == 0 ? "ffn_gate_exps" : i % 3 == 1 ? "ffn_up_exps"
                                                                                                : "ffn_down_exps",
                                     l, i % 3 < 2 ? c->dim : c->expert_ff, i % 3 < 2 ? c->expert_ff : c->dim, 0, who,
                                     err))
                    return -1;
        }
        /* the optional vectors: all three biases or none, both q/k norms or neither */
        if ((L->bq.data != NULL || L->bk.data != NULL || L->bv.data != NULL) &&
            (llm_tensor_check(&L->bq, "attn_q.bias", l, qd, 1, 1, who, err) ||
             llm_tensor_check(&L->bk, "attn_k.bias", l, kvd, 1, 1, who, err) ||
             llm_tensor_check(&L->bv, "attn_v.bias", l, kvd, 1, 1, who, err)))
            return -1;
        if ((L->q_norm.data != NULL || L->k_norm.data != NULL) &&
            (llm_tensor_check(&L->q_norm, "attn_q_norm", l, qn, 1, 1, who, err) ||
             llm_tensor_check(&L->k_norm, "attn_k_norm", l, kn, 1, 1, who, err)))
            return -1;
        if ((L->post_attn_norm.data != NULL || L->post_ffn_norm.data != NULL || c->post_norm_only) &&
            (llm_tensor_check(&L->post_attn_norm, "post_attention_norm", l, c->dim, 1, 1, who, err) ||
             llm_tensor_check(&L->post_ffn_norm, "post_ffw_norm", l, c->dim, 1, 1, who, err)))
            return -1;
    }
    if ((c->act != LLM_ACT_SILU && c->act != LLM_ACT_GELU_TANH && !(c->act == LLM_ACT_GELU_ERF && c->layer_norm) &&
         !(c->act == LLM_ACT_SWIGLU_OAI && c->n_expert > 0)) ||
        c->swa_window < 0) {
        snprintf(err->msg, sizeof(err->msg), "%s: unknown activation %d or window %d", who, c->act, c->swa_window);
        return -1;
    }
    return 0;
}

/* Frequency i of a sliding-window layer (Gemma 3's local layers: their own base, never scaled). */
static inline double llm_rope_freq_swa(const llm_model *m, int i)
{
    const llm_config *c = &m->cfg;
    if (c->rope_theta_swa <= 0.0f)
        return llm_rope_freq(m, i);
    return pow((double)c->rope_theta_swa, -2.0 * i / (double)c->head_dim);
}


#endif
