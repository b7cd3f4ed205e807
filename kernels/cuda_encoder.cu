/* An encoder's step on the device (BERT: GGUF "bert"; nomic-bert), the math of engine/cpu/forward.c's encoder
 * path:
 *   x = LayerNorm(E[token] + P[position] + T[type]) (type 1 after the input's first [SEP], a pair's second text;
 *       nomic-bert has no P)
 *   per layer, post-norm:
 *     q, k, v = W x + b; k, v into the paged cache unrotated (BERT: learned positions) or rotated (nomic-bert)
 *     x = LayerNorm(x + Wo attention + bo)          every query sees its whole input (below)
 *     x = LayerNorm(x + Wdown gelu(Wup x + bup) + bdown)   exact (erf) GELU; nomic-bert: SwiGLU(gate, up)
 *   the wanted rows of x are the hidden states (no final norm, no classifier); nomic-bert has no biases.
 * Attention is the decoders' paged kernels (cuda_attention.cu) unchanged: they mask a key at position p
 * for the query whose position is below p, so cuda_backend.cu hands them, for an encoder, a position table
 * where each token holds its input's last position (cu_step.ti_att) and items that read the whole input;
 * k and v are written at the real positions (cu_step.ti). Inputs are whole in one step (check_batch). */
#include "cuda_wload.cuh"

/* xr = (xr - mean) / sqrt(var + eps) * w + b (b NULL: none) over one row of dim floats, a block of 256
 * threads; each thread reads back only the elements it wrote itself. */
static __device__ void layer_norm_row(float *xr, int dim, const float *w, const float *b, float eps, float *red)
{
    float s = 0.0f;
    for (int k = threadIdx.x; k < dim; k += blockDim.x)
        s += xr[k];
    const float mean = block_sum_256(s, red) / (float)dim;
    float q = 0.0f;
    for (int k = threadIdx.x; k < dim; k += blockDim.x) {
        float d = xr[k] - mean;
        q += d * d;
    }
    const float r = 1.0f / sqrtf(block_sum_256(q, red) / (float)dim + eps);
    for (int k = threadIdx.x; k < dim; k += blockDim.x)
        xr[k] = (xr[k] - mean) * r * w[k] + (b != NULL ? b[k] : 0.0f);
}

/* y[i] = LayerNorm(x[rows[i]]) * w, no bias (rows NULL: row i; y may be x), a block per row: ModernBERT's
 * norms on the decoders' path (cuda_backend.cu, where the others' are RMSNorms). */
__global__ void __launch_bounds__(256) layer_norm_kernel(const float *x, int ldx, const float *w, float *y, int ldy,
                                                         int dim, float eps, const int32_t *rows)
{
    CU_PDL_ENTRY();
    __shared__ float red[9];
    const int i = blockIdx.x, src = rows != NULL ? rows[i] : i;
    const float *xr = x + (size_t)src * ldx;
    float *yr = y + (size_t)i * ldy;
    for (int k = threadIdx.x; k < dim; k += blockDim.x) /* (each thread its own elements: in place is safe) */
        yr[k] = xr[k];
    layer_norm_row(yr, dim, w, NULL, eps, red);
}

void cuda_layer_norm(const float *x, int ldx, const float *w, float *y, int ldy, int n, int dim, float eps,
                     const int32_t *rows, cudaStream_t st)
{
    CU_LAUNCH(layer_norm_kernel, n, 256, 0, st, x, ldx, w, y, ldy, dim, eps, rows);
}

/* A block per token: the embeddings' rows summed (P's when P.w is set), LayerNorm'd. Token t's input starts at
 * t - pos[t]. */
__global__ void __launch_bounds__(256) encoder_embed_kernel(cu_mat E, cu_mat P, cu_mat T, const int32_t *tok,
                                                            const int32_t *pos, int sep, int n_types,
                                                            const float *w, const float *b, float eps, float *x)
{
    CU_PDL_ENTRY();
    __shared__ float red[9];
    __shared__ int after_sep;
    const int t = blockIdx.x, p = pos[t], dim = E.cols;
    if (threadIdx.x == 0)
        after_sep = 0;
    __syncthreads();
    if (n_types > 1 && sep >= 0)
        for (int i = t - p + (int)threadIdx.x; i < t; i += blockDim.x)
            if (tok[i] == sep)
                after_sep = 1; /* (every writer writes 1) */
    __syncthreads();
    const int type = after_sep;
    float *xr = x + (size_t)t * dim;
    for (int k = threadIdx.x; k < dim; k += blockDim.x) { /* (the CPU's order) */
        float v = mat_elem(E, tok[t], k);
        if (P.w != NULL)
            v += mat_elem(P, p, k);
        xr[k] = v + mat_elem(T, type, k);
    }
    layer_norm_row(xr, dim, w, b, eps, red);
}

/* The end of a post-norm block, a block per row: x = LayerNorm(x + (y + bias)) * w + b (bias NULL: none). */
__global__ void __launch_bounds__(256) post_norm_kernel(const float *y, const float *bias, const float *w,
                                                        const float *b, float *x, int dim, float eps)
{
    CU_PDL_ENTRY();
    __shared__ float red[9];
    const float *yr = y + (size_t)blockIdx.x * dim;
    float *xr = x + (size_t)blockIdx.x * dim;
    for (int k = threadIdx.x; k < dim; k += blockDim.x)
        xr[k] += bias != NULL ? yr[k] + bias[k] : yr[k];
    layer_norm_row(xr, dim, w, b, eps, red);
}

/* h = gelu(h + bias), BERT's exact GELU 0.5 x (1 + erf(x / sqrt 2)), over n rows of `cols` floats. */
__global__ void bias_gelu_kernel(float *h, const float *bias, int cols, int n)
{
    CU_PDL_ENTRY();
    const size_t total = (size_t)n * (size_t)cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        float v = h[i] + bias[i % (size_t)cols];
        h[i] = 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
    }
}

/* y[i] = x[rows[i]] for n rows of dim floats (the hidden states copy_hidden sends back). */
__global__ void gather_rows_kernel(const float *x, const int32_t *rows, float *y, int dim)
{
    CU_PDL_ENTRY();
    const float *src = x + (size_t)(rows != NULL ? rows[blockIdx.x] : (int)blockIdx.x) * dim;
    float *dst = y + (size_t)blockIdx.x * dim;
    for (int k = threadIdx.x; k < dim; k += blockDim.x)
        dst[k] = src[k];
}

/* x = LayerNorm(x + W in + bias) * w + b for the n rows of the step: the product into st->xn (free here). */
static int post_block(cu_state *st, const cu_mat *W, const float *in, int ldin, const float *bias, const float *w,
                      const float *b, int n, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    if (cuda_matmul(&st->mm, W, in, ldin, st->xn, c->dim, n, 0, err->msg, sizeof(err->msg)) != 0)
        return -1;
    CU_LAUNCH(post_norm_kernel, n, 256, 0, st->stream, (const float *)st->xn, bias, w, b, st->x, c->dim,
              c->norm_eps);
    return 0;
}

int cuda_encoder_step(cu_state *st, const cu_step *sp, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    cudaStream_t s = st->stream;
    const int n = sp->n;
    CU_LAUNCH(encoder_embed_kernel, n, 256, 0, s, st->tok_embd, st->pos_embd, st->type_embd, sp->d_tok,
              sp->ti.pos, c->sep_id, c->n_types, st->embd_norm, st->embd_norm_b, c->norm_eps, st->x);
    if (cuda_stage_check(st, "embedding", -1, err))
        return -1;
    cu_att_plan plan = sp->plan; /* jina-bert-v2: ALiBi from each token's own position */
    plan.alibi = st->alibi; /* (NULL without ALiBi) */
    plan.qpos = sp->ti.pos;
    plan.sinks = NULL;
    for (int l = 0; l < c->n_layers; l++) {
        const cu_layer *L = &st->layers[l];
        if (cuda_mm_set(st, &L->qkv, st->x, c->dim, st->qkv, st->qkv_ld, n, err) != 0)
            return -1;
        cuda_qkv_prep(st->qkv, st->qkv_ld, n, L->bq, L->bk, L->bv, NULL, NULL, c->n_heads, c->n_kv_heads,
                      c->head_dim, 0, c->norm_eps, NULL, 1, s);
        cuda_rope_kv_write(st->qkv, st->qkv_ld, &sp->ti, n, L->nope ? NULL : st->rope_cos,
                           L->nope ? NULL : st->rope_sin, c->head_dim / 2, c->n_heads, c->n_kv_heads,
                           (int)c->rope_layout, &st->kv, l, st->block_size, s);
        if (cuda_stage_check(st, "qkv + kv write", l, err))
            return -1;
        cuda_attention(&plan, sp->d_items, st->qkv, st->qkv_ld, &sp->ti_att, &st->kv, l, st->ws, st->att, n, s);
        if (cuda_stage_check(st, "attention", l, err) ||
            post_block(st, &L->wo, st->att, st->q_dim, L->bo, L->attn_norm, L->attn_norm_b, n, err) != 0 ||
            cuda_stage_check(st, "output projection + norm", l, err))
            return -1;
        if (cu_has_mat(&st->m->layers[l].w_gate)) { /* nomic-bert: gate|up into gu, SwiGLU into h (jina: GELU) */
            if (cuda_mm_set(st, &L->gate_up, st->x, c->dim, st->gu, st->gu_ld, n, err) != 0)
                return -1;
            cuda_swiglu(st->gu, st->gu_ld, st->h, c->hidden_dim, n, c->act == LLM_ACT_GELU_ERF ? 2 : 0, s);
        } else { /* BERT: up (gate_up's only matrix) into h, bias and GELU */
            if (cuda_matmul(&st->mm, &L->gate_up.m[0], st->x, c->dim, st->h, c->hidden_dim, n, 0, err->msg,
                            sizeof(err->msg)) != 0)
                return -1;
            size_t total = (size_t)n * (size_t)c->hidden_dim, blocks = (total + 255) / 256;
            CU_LAUNCH(bias_gelu_kernel, blocks < 4096 ? (unsigned)blocks : 4096u, 256, 0, s, st->h, L->b_up,
                      c->hidden_dim, n);
        }
        if (cuda_stage_check(st, "up + activation", l, err) ||
            post_block(st, &L->down, st->h, c->hidden_dim, L->b_down, L->ffn_norm, L->ffn_norm_b, n, err) != 0 ||
            cuda_stage_check(st, "down + norm", l, err))
            return -1;
    }
    if (sp->nw > 0) {
        CU_LAUNCH(gather_rows_kernel, sp->nw, 256, 0, s, (const float *)st->x, sp->d_want, st->xn, c->dim);
        if (cuda_stage_check(st, "hidden rows", -1, err))
            return -1;
    }
    return 0;
}
