/* Internal state of the CPU backend, shared by its files (forward.c drives a
 * step; matmul.c, attention.c and rope.c are the parallel phases). */
#ifndef LLM_CPU_BACKEND_H
#define LLM_CPU_BACKEND_H

#include "backend.h"
#include "cpu/kernels.h"
#include "cpu/threadpool.h"

typedef struct {
    int    half_dim;     /* head_dim / 2 */
    int    n_pos;        /* positions covered (seq_len) */
    float *cos, *sin;    /* [n_pos][half_dim] */
} cpu_rope;

/* A matrix in a packed format (kernels.h: CPU_PK_*). */
typedef struct cpu_pk_mat {
    const uint8_t *data;
    cpu_pk_fmt     fmt;
} cpu_pk_mat;

typedef struct {
    const llm_model   *m;
    const cpu_kernels *kern;
    cpu_threadpool    *pool;
    int                pool_shared; /* pool is another backend's (opts.share_threads): not ours to stop */
    int nth;
    int kv_blocks, block_size, q_dim, kv_dim;
    int swa_blocks;                /* the window pool's blocks (llm_backend_opts.swa_blocks; 0: none) */
    /* per layer, [kv_blocks * block_size][kv_dim] (a sliding-window layer with a window pool: swa_blocks *
     * block_size) of float, or of f16 (uint16_t) when kv16, or of int8 when kvq8, then with a float scale
     * per kv_g elements in kscale / vscale (element i's: [i / kv_g]); layer l's starts at element
     * layer_off[l] */
    void *kcache, *vcache;
    size_t *layer_off;             /* [n_layers + 1]: the last is the cache's size in elements */
    int kv16, kvq8, kv_g;
    float *kscale, *vscale;
    float *kvdq;                   /* kvq8: [nth][2][block_size * head_dim] a block's K and V rows as floats */
    size_t kv_es;                  /* bytes per cached element: 1, 2 or 4 */
    cpu_rope rope;
    cpu_rope rope_swa;             /* sliding-window layers' (cfg.rope_theta_swa), when the model has one */
    /* per-step scratch, grown to the largest batch seen */
    int cap;
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2;
    float *hid;                    /* [hid_cap][dim] hidden rows wanted as such (LLM_WANT_HIDDEN) */
    int hid_cap;
    cpu_q8_act *qact;
    uint16_t *xbf;                 /* activations as bf16 (kernels.h: bf16_act) */
    uint16_t *xsplit;              /* activations as bf16 hi + lo (kernels.h: gemm_f16_tiled; NULL without it) */
    float *scores;                 /* [nth][CPU_ATT_TILE][seq_len] attention weights */
    int *att_tiles;                /* [cap + 1] first token of each attention tile (attention.c) */
    int *att_end;                  /* [cap] an encoder's tiles: the last position their sequence has this step */
    float *wbuf;                   /* [nth][wbuf_floats]: weight rows widened to floats (or split, gemm_f16_tiled) */
    size_t wbuf_floats;            /* CPU_MM_CHUNK_ROWS * widest K */
    /* mixture of experts (moe.c): a pass's router logits, each token's choices, and the chosen experts'
     * rows (a token's activations once per expert it goes to), grown to moe_cap rows */
    int moe_cap;
    float *moe_logits;             /* [tokens][n_expert] */
    int *moe_pos;                  /* [tokens * n_expert_used]: the row of each (token, choice) */
    float *moe_w;                  /* [tokens * n_expert_used]: its weight */
    float *moe_x, *moe_g, *moe_u, *moe_y; /* [rows][dim], [rows][expert_ff] x 2, [rows][dim] */
    float *moe_s;                  /* [tokens][dim]: a shared expert's output (Qwen 2 MoE) */
    cpu_pk_mat *packed;            /* [n_layers][llm_layer_n_mats] packed matrices (data NULL: as stored) */
    cpu_pk_mat packed_cls;         /* the classifier packed (data NULL: as stored) */
    uint8_t *packed_arena;         /* where the packed copies live */
} cpu_state;

/* A matrix in a packed format (kernels.h: CPU_PK_*). */
/* A layer's matrices, in llm_layer_mats' order (prefault.c touches them, repack.c packs them): the seven
 * dense ones, then a MoE layer's router and experts (llm_mat_expert). */
enum { CPU_W_Q, CPU_W_K, CPU_W_V, CPU_W_O, CPU_W_GATE, CPU_W_UP, CPU_W_DOWN };
static inline int cpu_layer_mats(const llm_model *m, int l, const llm_tensor *mats[LLM_LAYER_MATS_MAX])
{
    llm_layer_mats(&m->layers[l], &m->cfg, (llm_tensor **)mats); /* read-only here */
    return llm_layer_n_mats(&m->cfg);
}

/* ---- rope.c ---- */
/* Tables for positions [0, n_pos): the model's theta, Llama 3 scaling or its
 * rope_freqs divisors; swa: the sliding-window layers' (llm_rope_freq_swa).
 * -1 on allocation failure. */
int  cpu_rope_init(cpu_rope *r, const llm_model *m, int n_pos, int swa);
void cpu_rope_free(cpu_rope *r);
/* Rotate n_heads heads of head_dim floats in place for position pos. */
void cpu_rope_apply(const cpu_rope *r, llm_rope_layout layout, float *v, int n_heads, int pos);

/* ---- matmul.c ---- */
#define CPU_MM_CHUNK_ROWS 32  /* weight rows per work item (a multiple of every tile height) */
/* From this many tokens on, quantised / half weights are widened to floats once
 * per chunk and multiplied with the float GEMM (faster and exact activations);
 * below it (decode), integer dot products against Q8 activations stream them. */
#define CPU_MM_WIDEN_MIN_TOKENS 12
#define CPU_MM_MAX_OUTS (2 * LLM_MAX_EXPERTS) /* outputs of one cpu_matmul (an expert's gate and up each) */
typedef struct {
    const llm_tensor *w;
    float *y;          /* y[t*ldy + row] */
    size_t ldy;
    int accumulate;    /* y += W x instead of y = W x */
    const cpu_pk_mat *packed; /* w packed for kern->gemm_packed (repack.c), or NULL */
    int t0, nt;        /* nt > 0: only activation rows [t0, t0 + nt) (an expert's tokens); 0: all n */
} cpu_mm_out;

typedef struct {
    const float *x;        /* n rows of K floats, xs floats apart */
    size_t xs;
    int n, K;
    const float *norm;     /* if set: first x -> xn = rmsnorm(x) * norm (xn rows, K floats apart) */
    float *xn;
    float eps;
    int layer_norm;        /* with norm: LayerNorm without a bias instead of rmsnorm (ModernBERT) */
    const cpu_mm_out *outs;
    int n_outs;
    int swiglu;            /* outs = {gate, up} pairs: afterwards gate <- silu(gate) * up */
    int gelu;              /* with swiglu: gelu(gate) * up instead (GeGLU): LLM_ACT_GELU_TANH or _ERF (model.h), or
                            * LLM_ACT_SWIGLU_OAI (gpt-oss's clamped one) */
    const float *const *bias; /* NULL, or per output its bias (NULL: none), added to each row of its product */
    /* runs after all rows are done (after a barrier), on every thread */
    void (*post)(void *ctx, int ith, int nth);
    void *post_ctx;
} cpu_mm;

void cpu_matmul(cpu_state *st, const cpu_mm *mm);
/* x = LayerNorm(x) * w + b over n floats (b NULL: no bias), mean and variance summed in double. */
void cpu_layer_norm(float *x, int n, const float *w, const float *b, float eps);

/* ---- repack.c ---- */
#define CPU_PK_MAX 256 /* matrices packed per parallel pass */
/* 1 when k has gemm_packed and LLM_CPU_REPACK is not 0. */
int  cpu_packing_on(const cpu_kernels *k);
/* Where cpu_packing_on: each layer's Q8_0/Q4_0 matrices repacked into
 * st->packed, on all threads (those llm_cpu_prepare_model packed in place are
 * used where they are). -1 when out of memory (cpu_repack_free then undoes it). */
int  cpu_repack_weights(cpu_state *st);
void cpu_repack_free(cpu_state *st);
/* Row row of a packed K-column matrix P (format f) as floats (embedding lookups of a packed tied classifier). */
void cpu_pk_row_to_f32(cpu_pk_fmt f, const uint8_t *P, int K, size_t row, float *out);
/* One matrix (rows a multiple of 32 elements) in packed format f: its size,
 * and packed into dst. Q8_0 / Q4_0 from its rows (f: cpu_pk_fmt_of(type));
 * CPU_PK_Q4_M from its Q4_K source (t->src). */
size_t cpu_packed_bytes(const llm_tensor *t, cpu_pk_fmt f);
void   cpu_pack_matrix(const llm_tensor *t, cpu_pk_fmt f, uint8_t *dst);
/* Matrix mat (CPU_W_*, LLM_MAT_ROUTER, llm_mat_expert) of a layer as packed, or NULL. */
static inline const cpu_pk_mat *cpu_packed(const cpu_state *st, int layer, int mat)
{
    const cpu_pk_mat *p = st->packed != NULL ? &st->packed[layer * llm_layer_n_mats(&st->m->cfg) + mat] : NULL;
    return p != NULL && p->data != NULL ? p : NULL;
}

/* ---- moe.c ---- */
/* Tokens per pass of the mixture-of-experts FFN: at most this many rows of expert activations at a time. */
#define CPU_MOE_ROWS 4096
static inline int cpu_moe_pass_tokens(const llm_config *c)
{
    int p = CPU_MOE_ROWS / (c->n_expert_used > 0 ? c->n_expert_used : 1);
    return p > 0 ? p : 1;
}
/* x[t] += the experts' FFN of rmsnorm(x[t]) for the n tokens of st->x (layer l's router and experts). */
int  cpu_moe_ffn(cpu_state *st, int l, int n);
void cpu_moe_free(cpu_state *st);

/* ---- prefault.c ---- */
/* Bring every weight page into the process and zero the KV cache and thread
 * buffers (parallel) before the first step. */
void cpu_prefault_weights(cpu_state *st);
/* A buffer of at least bytes, on transparent huge pages where the kernel
 * gives them on request (from 2 MiB on); free() releases it. */
void *cpu_alloc_huge(size_t bytes);

/* ---- attention.c ---- */
#define CPU_ATT_TILE 16 /* queries of one sequence sharing each KV block read */
/* att[t] = softmax(q[t] . K[0..pos_t]) V for each token and head, reading the
 * paged cache of layer l (this step's K/V already written). */
void cpu_attention(cpu_state *st, const llm_batch *b, int layer);

/* Cache slot (row index into a layer's cache) of position pos of a sequence. */
/* Layer l's block table of sequence s: its window table where the layer's KV lives in the window pool. */
static inline const int32_t *cpu_kv_table(const cpu_state *st, const llm_seq_view *s, int layer)
{
    return st->swa_blocks > 0 && st->m->layers[layer].swa ? s->swa_blocks : s->blocks;
}

static inline size_t cpu_kv_slot(const cpu_state *st, const llm_seq_view *s, int layer, int pos)
{
    return (size_t)cpu_kv_table(st, s, layer)[pos / st->block_size] * (size_t)st->block_size +
           (size_t)(pos % st->block_size);
}

/* Blocks in layer l's pool. */
static inline int cpu_kv_layer_blocks(const cpu_state *st, int layer)
{
    return st->swa_blocks > 0 && st->m->layers[layer].swa ? st->swa_blocks : st->kv_blocks;
}

#endif
