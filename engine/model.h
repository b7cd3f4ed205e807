/* The one model description every backend runs from: hyper-parameters, weight
 * tensors (pointers into memory-mapped files: no copy on the CPU path) and the
 * tokenizer that came with the model. */
#ifndef LLM_MODEL_H
#define LLM_MODEL_H

#include "common.h"

#include <math.h>

struct llm_tokenizer;
struct gguf_ctx;

/* A 1-D or 2-D weight. 2-D: ne[1] rows of ne[0] elements, rows contiguous
 * (y = W x is a dot product of x with each row). 1-D: ne[1] == 1. */
typedef struct {
    llm_dtype   type;
    int64_t     ne[2];
    const void *data;
    /* Not 0: data (a matrix the model converted at load) is no longer rows
     * but the CPU VNNI kernels' packed format cpu_packed - 1 (cpu/kernels.h
     * CPU_PK_*), made by llm_cpu_prepare_model; only the CPU backend can run
     * it. */
    int         cpu_packed;
    /* Converted at load: the file's data and its ggml type id (else NULL, 0). */
    const void *src;
    uint32_t    src_type;
} llm_tensor;

typedef enum {
    LLM_ROPE_ADJACENT = 0, /* rotate pairs (2i, 2i+1): llama2.c, llama.cpp "normal", GGUF llama */
    LLM_ROPE_HALF     = 1, /* rotate (i, i + d/2): Hugging Face rotate_half / NeoX */
} llm_rope_layout;

enum { LLM_ROPE_SCALING_NONE = 0, LLM_ROPE_SCALING_LLAMA3 = 1, LLM_ROPE_SCALING_YARN = 2, LLM_ROPE_SCALING_LINEAR = 3,
       LLM_ROPE_SCALING_LONGROPE = 4 };

/* LongRoPE's attention factor when the model gives none (transformers' and llama.cpp's converter's): sqrt(1 + ln s /
 * ln orig) for s = ctx / orig > 1, else 1. */
static inline float llm_longrope_mscale(int ctx, int orig)
{
    double s = orig > 1 ? (double)ctx / orig : 1.0;
    return s > 1.0 ? (float)sqrt(1.0 + log(s) / log((double)orig)) : 1.0f;
}
/* YaRN's attention factor for a scaling factor, when the model gives none of its own: 1 + 0.1 ln factor. */
static inline float llm_yarn_mscale(float factor)
{
    return factor > 1.0f ? 0.1f * logf(factor) + 1.0f : 1.0f;
}

typedef struct {
    int   dim;          /* embedding width */
    int   hidden_dim;   /* FFN width */
    int   n_layers;
    int   n_heads;
    int   n_kv_heads;
    int   head_dim;     /* usually dim / n_heads */
    int   vocab_size;
    int   seq_len;      /* context length */
    float rope_theta;
    float norm_eps;
    llm_rope_layout rope_layout;
    /* Partial rotary (Phi-4-mini): the first rope_dims of a head rotate, the rest pass through (0: all). A
     * rotate-half model's q / k rows are reordered at load (model_gguf.c) so that the rotated pairs
     * lie at (i, i + head_dim / 2) as for a whole rotation, the passing dims paired with frequency 0. */
    int   rope_dims;
    /* Rope scaling (LLM_ROPE_SCALING_*): Llama 3's (factor, low / high frequency factors, original context),
     * YaRN (factor, original context, beta fast / slow, and rope_mscale: what cos and sin are multiplied by),
     * linear (every frequency / factor), LongRoPE (Phi 3's 128k models: per-frequency divisors, llm_model's
     * rope_long where the context is longer than rope_orig_ctx, else rope_short, and rope_mscale). */
    int   rope_scaling;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int   rope_orig_ctx;
    float rope_mscale, yarn_beta_fast, yarn_beta_slow;
    /* YaRN's correction range as computed, not widened to whole dimensions (floor / ceil): Hugging Face's
     * "truncate": false (gpt-oss's config; llama.cpp and GGUF always round it, so 0 there) */
    int   yarn_no_truncate;
    int   tied_embeddings; /* classifier shares tok_embd */
    int   bos_id, eos_id;  /* -1 when unknown */
    /* Gemma 2 / 3 (0 for the others, which then run as before): */
    int   act;             /* the FFN's gate activation: LLM_ACT_SILU (SwiGLU) or LLM_ACT_GELU_TANH (GeGLU) */
    float embd_scale;      /* the embedding row is multiplied by it (Gemma: sqrt(dim)); 0: not scaled */
    float attn_scale;      /* scores are q.k * attn_scale (Gemma: query_pre_attn_scalar^-1/2); 0: head_dim^-1/2 */
    int   swa_window;      /* a sliding-window layer (llm_layer.swa) sees its last swa_window positions */
    float rope_theta_swa;  /* rope base of the sliding-window layers, unscaled (Gemma 3: 10000); 0: as the others */
    float attn_softcap;    /* Gemma 2: scores become cap * tanh(score / cap); 0: none */
    float final_softcap;   /* Gemma 2: logits become cap * tanh(logit / cap); 0: none */
    /* Granite (0 for the others): */
    float residual_scale;  /* each block's output (attention, FFN) is multiplied by it before the residual add */
    float logit_scale;     /* logits are multiplied by 1 / logit_scale */
    /* Mixture of experts (Qwen 3 MoE, Qwen 2 MoE, Mixtral, Granite MoE; 0 for dense models): every layer's FFN
     * is n_expert SwiGLU experts of width expert_ff, each token's n_expert_used highest-routed ones weighted by
     * their softmax probabilities (renormalised over those chosen when moe_norm_topk); hidden_dim is then the
     * shared expert's width (Qwen 2 MoE, GraniteMoeShared), or unused. */
    int   n_expert, n_expert_used, expert_ff, moe_norm_topk;
    /* ERNIE 4.5 MoE: its first moe_dense_lead layers are dense FFNs dense_ff wide (llm_layer.dense; the
     * others are mixtures of experts, hidden_dim being their shared experts' width); 0: none. */
    int   moe_dense_lead, dense_ff;
    /* GLM-4.5 MoE: the router's probabilities are the sigmoids of its logits, not their softmax (chosen with
     * llm_layer.exp_probs_b, weighted by the sigmoids, renormalised with moe_norm_topk), and the chosen experts'
     * weights are then multiplied by moe_w_scale (routed_scaling_factor; 0: 1). */
    int   moe_sigmoid;
    float moe_w_scale;
    /* Expert parallelism (a rank's share of a model split over GPUs, model_tp.c): the experts this share holds,
     * [expert_lo, expert_hi), whole; the others' tensors are absent (routing still weighs all n_expert). 0, 0:
     * all of them (every model as loaded). */
    int   expert_lo, expert_hi;
    /* An encoder (BERT: GGUF "bert"; 0 for the decoders above): every token attends to its whole input (no
     * causal mask, so an input is computed in one step), learned absolute positions and token types are
     * added to the embedding and LayerNorm'd, each block is post-norm (x = LayerNorm(x + block(x))) with a
     * bias on every projection and LayerNorm, the FFN is up -> GELU -> down (no gate), no rope and no final
     * norm: the hidden states are the output (embeddings; there is no language-model head). */
    int   encoder;
    /* Attention without the causal mask: every token sees its whole input, computed in one step (encoders;
     * and EmbeddingGemma, GGUF "gemma-embedding": Gemma 3's decoder layers with a symmetric sliding window of
     * swa_window / 2 each side, an embedding model that does not generate). */
    int   bidirectional;
    int   n_types;         /* encoder: rows of the token-type embedding (BERT: 2) */
    /* ALiBi (jina-bert-v2, GGUF "jina-bert-v2"; 0 for the others): no positions at all; head h's score of key
     * position k for the query at q is lowered by llm_alibi_slope(h) * |q - k| (a symmetric bias: its encoder
     * is bidirectional), the slopes 2^(-alibi_max_bias * (h + 1) / n_heads) for a power-of-two head count. */
    float alibi_max_bias;
    int   sep_id;          /* encoder: [SEP]; the tokens after an input's first one are type 1 (a pair's second
                            * text: a cross-encoder's document), as BERT's tokenizer marks them; -1: none */
    /* ModernBERT (GGUF "modern-bert"; 0 for the others): the pre-norm layers' norms (attn_norm, ffn_norm,
     * out_norm, and the embedding's embd_norm) are LayerNorms without a bias, (x - mean) / sd * w, not
     * RMSNorms; a layer without attn_norm (its first) reads the residual as it is. */
    int   layer_norm;
    /* OLMo 2 / 3 (GGUF "olmo2"; 0 for the others): no norm before attention or the FFN (attn_norm and ffn_norm
     * absent), only post_attn_norm / post_ffn_norm on the blocks' outputs (x += RMSNorm(block(x)) * w); and
     * q_norm / k_norm span the whole projected q (n_heads * head_dim) and k (n_kv_heads * head_dim) rows, not
     * one head each (qk_norm_full). */
    int   post_norm_only, qk_norm_full;
} llm_config;

#define LLM_MAX_EXPERTS 256

enum { LLM_ACT_SILU = 0, LLM_ACT_GELU_TANH = 1, LLM_ACT_GELU_ERF = 2 /* jina-bert-v2's and ModernBERT's gate */,
       /* gpt-oss's experts: g = min(gate, 7), u = clamp(up, -7, 7), g * sigmoid(1.702 g) * (u + 1) */
       LLM_ACT_SWIGLU_OAI = 3 };
#define LLM_OAI_ALPHA 1.702f
#define LLM_OAI_LIMIT 7.0f

/* gpt-oss's gated unit of one gate / up pair (LLM_ACT_SWIGLU_OAI). */
static inline float llm_swiglu_oai(float g, float u)
{
    g = g < LLM_OAI_LIMIT ? g : LLM_OAI_LIMIT;
    u = u < -LLM_OAI_LIMIT ? -LLM_OAI_LIMIT : u > LLM_OAI_LIMIT ? LLM_OAI_LIMIT : u;
    return g / (1.0f + expf(-LLM_OAI_ALPHA * g)) * (u + 1.0f);
}

/* ALiBi's slope of head h (llm_config.alibi_max_bias): for n heads and p the largest power of two <= n,
 * 2^(-b/p)^(h+1) for the first p heads, then 2^(-b/2p)^(2(h-p)+1) (the odd powers of the slopes of 2p
 * heads), as the ALiBi paper and jina-bert (and llama.cpp's softmax) define them. */
static inline float llm_alibi_slope(const llm_config *c, int h)
{
    int p = 1;
    while (p * 2 <= c->n_heads)
        p *= 2;
    float b = c->alibi_max_bias;
    return h < p ? powf(2.0f, -b / (float)p * (float)(h + 1)) : powf(2.0f, -b / (float)(2 * p) * (float)(2 * (h - p) + 1));
}

/* The attention's score scale. */
static inline float llm_attn_scale(const llm_config *c)
{
    return c->attn_scale > 0.0f ? c->attn_scale : 1.0f / sqrtf((float)c->head_dim);
}

typedef struct {
    llm_tensor attn_norm;           /* F32, [dim] */
    llm_tensor wq, wk, wv, wo;      /* [n_heads*head_dim x dim], [kv x dim], [kv x dim], [dim x n_heads*head_dim] */
    llm_tensor ffn_norm;            /* F32, [dim] */
    llm_tensor w_gate, w_up;        /* [hidden x dim] */
    llm_tensor w_down;              /* [dim x hidden] */
    /* Optional, F32 (data NULL when the architecture has none), applied to q and k before rope: */
    llm_tensor bq, bk, bv;          /* Qwen 2: biases of the q, k, v projections, [q], [kv], [kv] */
    llm_tensor q_norm, k_norm;      /* Qwen 3, Gemma 3: RMSNorm of each q / k head, weights [head_dim] */
    /* Gemma 2 / 3: RMSNorm of the attention's and of the FFN's output before each residual add, [dim] */
    llm_tensor post_attn_norm, post_ffn_norm;
    int        swa;                 /* 1: a sliding-window layer (cfg.swa_window, cfg.rope_theta_swa) */
    int        nope;                /* 1: q and k are not rotated (SmolLM3: every fourth layer) */
    /* Mixture of experts (cfg.n_expert > 0; w_gate, w_up, w_down are then absent, no data and no src, or
     * a shared expert, hidden_dim wide, run on every token: Qwen 2 MoE's, its output scaled by
     * sigmoid(x . shexp_gate), or GraniteMoeShared's, added as it is (no shexp_gate)): */
    llm_tensor ffn_gate_inp;        /* the router, [n_expert x dim] */
    /* F32 [n_expert] or absent: added to the router's probabilities to choose the experts, not to weight them
     * (ERNIE 4.5 MoE's e_score_correction_bias, GGUF exp_probs_b) */
    llm_tensor exp_probs_b;
    /* 1: a dense FFN (w_gate, w_up, w_down, cfg.dense_ff wide) in a model with experts (cfg.moe_dense_lead);
     * its experts are then absent (the list of n_expert * 3 is there, its tensors without data) */
    int        dense;
    llm_tensor shexp_gate;          /* F32 [dim], with a gated shared expert */
    llm_tensor *experts;            /* [n_expert][3]: expert e's gate, up [expert_ff x dim] and down [dim x expert_ff] */
    /* Encoder (cfg.encoder): attn_norm and ffn_norm are the LayerNorms after the attention's and the FFN's
     * residual adds (GGUF attn_output_norm, layer_output_norm), these their biases, and bo, b_up, b_down the
     * output, up and down projections' biases (F32); w_gate is absent. */
    llm_tensor attn_norm_b, ffn_norm_b, bo, b_up, b_down;
    /* gpt-oss (F32; data NULL for the others): bo above is its output projection's bias; attn_sinks [n_heads]
     * each head's sink, a logit that takes part in the softmax's sum and has no value; ffn_gate_inp_b
     * [n_expert] the router's bias (added to its logits); exp_b gate / up [expert_ff x n_expert] and down
     * [dim x n_expert], the experts' biases (column e is expert e's) */
    llm_tensor attn_sinks, ffn_gate_inp_b, exp_b[3];
} llm_layer;

/* A mixture of experts' layer with a shared expert (llm_layer's w_gate, w_up, w_down). */
static inline int llm_layer_has_shared(const llm_layer *L)
{
    return L->w_gate.data != NULL || L->w_gate.src != NULL;
}

/* A layer whose FFN is a mixture of experts. */
static inline int llm_layer_moe(const llm_config *c, const llm_layer *L)
{
    return c->n_expert > 0 && !L->dense;
}

/* The experts whose tensors are held, [*lo, *hi): all, except in a share of a model split by experts. */
static inline void llm_experts_held(const llm_config *c, int *lo, int *hi)
{
    *lo = c->expert_hi > 0 ? c->expert_lo : 0;
    *hi = c->expert_hi > 0 ? c->expert_hi : c->n_expert;
}
static inline int llm_expert_held(const llm_config *c, int e)
{
    int lo, hi;
    llm_experts_held(c, &lo, &hi);
    return e >= lo && e < hi;
}

/* A layer's FFN width: a dense layer's, or a mixture of experts' shared expert's (hidden_dim). */
static inline int llm_layer_ff(const llm_config *c, const llm_layer *L)
{
    return L->dense ? c->dense_ff : c->hidden_dim;
}

/* The widest FFN of any layer (what scratch buffers hold). */
static inline int llm_ff_max(const llm_config *c)
{
    return c->dense_ff > c->hidden_dim ? c->dense_ff : c->hidden_dim;
}

/* A layer's matrices, in this order: wq, wk, wv, wo, w_gate, w_up, w_down (the dense layer's seven), then
 * with experts the router and each expert's gate, up, down. Absent ones (a MoE layer's dense FFN) are in the
 * list with neither data nor src. */
enum { LLM_LAYER_MATS = 7, LLM_MAT_ROUTER = 7, LLM_LAYER_MATS_MAX = 8 + 3 * LLM_MAX_EXPERTS };
static inline int llm_layer_n_mats(const llm_config *c)
{
    return LLM_LAYER_MATS + (c->n_expert > 0 ? 1 + 3 * c->n_expert : 0);
}
/* Index in that list of expert e's gate (which 0), up (1) or down (2). */
static inline int llm_mat_expert(int e, int which) { return LLM_MAT_ROUTER + 1 + 3 * e + which; }
static inline void llm_layer_mats(llm_layer *L, const llm_config *c, llm_tensor **mats)
{
    mats[0] = &L->wq, mats[1] = &L->wk, mats[2] = &L->wv, mats[3] = &L->wo;
    mats[4] = &L->w_gate, mats[5] = &L->w_up, mats[6] = &L->w_down;
    if (c->n_expert > 0) {
        mats[LLM_MAT_ROUTER] = &L->ffn_gate_inp;
        for (int i = 0; i < 3 * c->n_expert; i++)
            mats[LLM_MAT_ROUTER + 1 + i] = &L->experts[i];
    }
}

enum { LLM_POOL_NONE = 0, LLM_POOL_MEAN = 1, LLM_POOL_CLS = 2, LLM_POOL_LAST = 3, LLM_POOL_RANK = 4 };
#define LLM_MODEL_MAX_CLS 4
#define LLM_MODEL_MAX_POOLER 8192 /* a BERT pooler's width (cls_dense) at most */

typedef struct llm_model {
    llm_config  cfg;
    llm_tensor  tok_embd;           /* [vocab x dim], any dtype */
    llm_tensor  out_norm;           /* F32, [dim] */
    llm_tensor  output;             /* [vocab x dim]; same as tok_embd when tied */
    llm_layer  *layers;             /* n_layers */
    /* Encoder (cfg.encoder): learned positions [seq_len x dim] and token types [n_types x dim] (any dtype),
     * the embedding's LayerNorm (F32 weight and bias); out_norm is then absent. ModernBERT (cfg.layer_norm):
     * embd_norm only (no bias), and out_norm. */
    llm_tensor  pos_embd, type_embd, embd_norm, embd_norm_b;
    int         pos_offset;         /* HF RoBERTa: position rows before the first position (padding_idx + 1) */
    /* Per-frequency divisors from GGUF rope_freqs.weight (head_dim/2 floats), or NULL. */
    const float *rope_freqs;
    /* LongRoPE's divisors (rope_factors_long / _short.weight, head_dim/2 floats each), or NULL. */
    const float *rope_long, *rope_short;

    struct llm_tokenizer *tok;      /* NULL when the model file carries none and none was given */

    char   arch[32];                /* "llama", "qwen2", "qwen3", "gemma2", "gemma3", ... (llm_model_arch_ok) */
    int    pooling;                 /* how the model pools embeddings, llama.cpp's numbers (GGUF
                                     * <arch>.pooling_type): LLM_POOL_NONE (not said), _MEAN, _CLS, _LAST */
    /* A reranker's classifier head (GGUF pooling type rank and cls.output, as llama.cpp converts
     * Qwen3-Reranker: the language-model head's "yes" and "no" rows, the head itself left out when it is
     * not the embedding): n_cls rows of dim floats, applied to the last token's hidden state after the final
     * norm; NULL when the model has none. */
    const float *cls;
    int    n_cls;
    /* A BERT cross-encoder's head (cfg.encoder, pooling type rank): the [CLS] state goes through cls_dense
     * ([dim x dim], and its bias) and tanh (BERT's pooler) before cls, whose bias is cls_b ([n_cls]); each NULL
     * when the file has none. */
    const float *cls_dense, *cls_dense_b, *cls_b;
    /* ModernBERT's classifier head (ModernBertForSequenceClassification, gte-reranker-modernbert-base): cls_dense
     * (cls_dense_b where it has one), the exact GELU, then a LayerNorm without bias (this, cfg.norm_eps) in
     * place of BERT's tanh; read on the model's own pooling (mean or [CLS]); NULL for the others. */
    const float *cls_norm;
    /* sentence-transformers' Dense modules after the pooling (EmbeddingGemma: dim -> dense_n -> dim, no bias,
     * no activation; GGUF dense_2 / dense_3), F32, or NULL. */
    const float *dense_up, *dense_down;
    int    dense_n;
    char   name[128];
    char   format[16];              /* "gguf", "llama2c", "hf" */
    char   path[1024];
    size_t file_bytes;              /* total bytes of the model file(s) */
    size_t weight_bytes;            /* bytes of all weight tensors */
    char   tok_path[1024];          /* tokenizer file loaded from a path (llama2.c / override), "" otherwise */
    /* GGUF tensors of read-only types (gguf_quants.h) re-quantised to Q8_0 at load. */
    int    n_converted;
    char   converted_from[64];      /* their types, e.g. "q4_K q6_K" */
    int    defer_kq;              /* LLM_LOAD_DEFER_KQ was given */
    /* A Hugging Face checkpoint's quantization_config (model_hf_qconfig.c). Its quantised matrices are converted
     * at load: FP8 dequantised to owned BF16 (model_hf_fp8.c); integer weights (GPTQ, AWQ, compressed-tensors)
     * repacked as Q4_0 (4-bit, symmetric) or Q8_0, each 32-weight block carried exactly where its weights share
     * one scale that fp16 holds, else re-quantised (model_hf_intq.c). */
    struct {
        int  method;              /* LLM_HFQ_* */
        int  fp8_block[2];        /* block-wise FP8's weight_block_size (rows, cols); 0: not one */
        int  bits, group, sym;    /* integer weights: bits (4, 8), columns per group (0: per channel), symmetric */
        int  zeros_v1;            /* GPTQ's first checkpoint format: zero points stored minus one */
        int  act_quant;           /* the checkpoint also quantises activations (W8A8): run as weight-only */
        int  n_fp8, n_q4_0, n_q8_0;   /* matrices converted */
        int  n_q4_1;              /* ... as Q4_1 blocks for a backend that takes them (model_hf_intq.c) */
        long long n_blocks, n_requant; /* 32-weight blocks written, and those re-quantised */
    } hfq;

    /* Ownership (private to the loaders). */
    struct gguf_ctx *gguf;
    void  **maps;   size_t *map_sizes; int n_maps;
    void  **owned;  int n_owned;    /* small converted tensors (norms to F32), layer array, ... */
} llm_model;

/* A model's first mixture-of-experts layer (the one whose shared expert, or its absence, every other shares);
 * NULL for a dense model. */
static inline const llm_layer *llm_moe_layer0(const llm_model *m)
{
    for (int l = 0; m->layers != NULL && l < m->cfg.n_layers; l++)
        if (llm_layer_moe(&m->cfg, &m->layers[l]))
            return &m->layers[l];
    return NULL;
}

/* Every matrix of m: each layer's (llm_layer_mats), then the embedding and the classifier slot
 * (m->output, absent when tied), as a NULL-free array of llm_model_n_mats(m) pointers in mats. */
static inline int llm_model_n_mats(const llm_model *m)
{
    return m->cfg.n_layers * llm_layer_n_mats(&m->cfg) + 2;
}
static inline void llm_model_mats(llm_model *m, llm_tensor **mats)
{
    int per = llm_layer_n_mats(&m->cfg);
    for (int l = 0; l < m->cfg.n_layers; l++)
        llm_layer_mats(&m->layers[l], &m->cfg, mats + l * per);
    mats[m->cfg.n_layers * per] = &m->tok_embd;
    mats[m->cfg.n_layers * per + 1] = &m->output;
}

/* A reranker's head on a pooled hidden state h (dim floats): out[k] = cls[k] . p + cls_b[k], p = h, or
 * tanh(cls_dense h + cls_dense_b) for a BERT cross-encoder, LayerNorm(gelu(cls_dense h)) * cls_norm for
 * ModernBERT's; n_cls values. */
void llm_model_rank_apply(const llm_model *m, const float *h, float *out);
/* The pooling (LLM_POOL_*) whose hidden state a reranker's head reads: the last token's (a decoder judging
 * "yes" / "no"), [CLS]'s (a BERT cross-encoder), or ModernBERT's own classifier pooling (mean or [CLS]). */
static inline int llm_model_rank_pool(const llm_model *m)
{
    return m->cls_norm != NULL ? (m->pooling == LLM_POOL_MEAN ? LLM_POOL_MEAN : LLM_POOL_CLS)
           : m->cfg.encoder    ? LLM_POOL_CLS
                               : LLM_POOL_LAST;
}
/* A pooled embedding (dim floats) through the model's Dense modules in place (nothing without them). */
void llm_model_dense_apply(const llm_model *m, float *v);

/* Load by sniffing the path: a directory (Hugging Face: config.json + safetensors),
 * a GGUF file (magic), or a llama2.c checkpoint (then tokenizer_path, or
 * tokenizer.bin / tok<N>.bin beside it). tokenizer_path overrides the model's own.
 * Norm vectors are converted to F32 at load; matrices stay mapped as stored. */
llm_model *llm_model_load(const char *path, const char *tokenizer_path, llm_err *err);
/* As llm_model_load, with flags:
 * LLM_LOAD_DEFER_KQ  GGUF layer matrices in Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
 *   IQ4_NL, IQ4_XS, Q4_1, Q5_0 and Q5_1 are not converted to Q8_0 at load
 *   but left to llm_backend_prepare (data NULL, src set), which the caller
 *   must call before creating a backend: the CPU backend packs the K-quants
 *   from the file's blocks (5-7 bits a weight) rather than from a Q8_0 copy
 *   it would throw away, the CUDA backend uploads all ten from their
 *   blocks; the rest are converted then. (A Hugging Face gpt-oss's MXFP4
 *   experts too: blocks the loader repacked, data NULL, src set; and an
 *   integer checkpoint's asymmetric 4-bit matrices, as Q4_1 blocks.) */
#define LLM_LOAD_DEFER_KQ 1u
llm_model *llm_model_load_ex(const char *path, const char *tokenizer_path, unsigned flags, llm_err *err);
void       llm_model_free(llm_model *m);

/* Format-specific entry points (used by llm_model_load). */
llm_model *llm_model_load_gguf(const char *path, unsigned flags, llm_err *err);
/* Converts to Q8_0 the layer matrices whose conversion LLM_LOAD_DEFER_KQ
 * deferred and nothing else took (data still NULL), except those whose file
 * type is in keep (a mask of ggml type ids, 1 << id, ids below 64; 0: none):
 * the CUDA backend uploads the K-quant, IQ4 and MXFP4 matrices from their
 * blocks and has no use for a Q8_0 copy. 0 ok, -1 + err. */
int llm_model_finish_deferred_except(llm_model *m, uint64_t keep, llm_err *err);
/* 1 while some layer matrix of a type not in keep has neither data nor a
 * packed form (deferred). */
int llm_model_has_deferred_except(const llm_model *m, uint64_t keep);
llm_model *llm_model_load_llama2c(const char *path, llm_err *err);
llm_model *llm_model_load_hf(const char *dir, unsigned flags, llm_err *err);

/* 1 for the architectures the loaders take: "llama" (Llama 1-3, Mistral, and the
 * like), "qwen2" (q/k/v biases) and "qwen3" (per-head q/k RMSNorm), ... */
int llm_model_arch_ok(const char *arch);
/* Those architectures' names, comma-separated, into buf (for messages). */
void llm_model_arch_list(char *buf, size_t cap);
/* 1 for the architectures llama.cpp converts as it does a llama (q / k rows permuted so that rope rotates
 * adjacent pairs in the file): llama, smollm3 (Llama with NoPE layers), granite (Llama with scales). */
int llm_arch_llama_like(const char *arch);

/* Fill cfg-derived fields and check every tensor's type and shape against cfg. */
int llm_model_validate(llm_model *m, llm_err *err);

/* 1 when p is a buffer the model allocated (a tensor converted at load), not
 * a mapped file: backends that copy weights skip those rather than hold two
 * copies in memory. */
int llm_model_owns(const llm_model *m, const void *p);

/* How many matrices of m (layers' and the classifier) are in a CPU packed
 * format (llm_tensor.cpu_packed), and (if not NULL) how many in each
 * (by_fmt[cpu_packed - 1]: cpu/kernels.h's cpu_pk_fmt). */
#define LLM_CPU_PK_KINDS 8
int llm_model_cpu_packed(const llm_model *m, int by_fmt[LLM_CPU_PK_KINDS]);

/* Human-readable description (info subcommand). */
void llm_model_describe(const llm_model *m, void *FILE_stream);

#endif
