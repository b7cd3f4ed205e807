/* The mixture-of-experts FFN (Qwen 3 MoE, Qwen 2 MoE, Mixtral, Granite MoE, OLMoE, ERNIE 4.5 MoE, GLM-4.5) on the CPU. Per pass of
 * tokens: the router's logits (the FFN norm fused in), each token's
 * n_expert_used best experts, the tokens' normed rows gathered by expert so
 * that each expert's rows are contiguous, one parallel matmul over every
 * chosen expert's gate and up (SwiGLU), one over their down projections, then
 * each token's rows weighted and added to the residual. An expert's weight
 * rows are read once per pass however many of the pass's tokens chose it, and
 * the experts no token chose are not read at all. A shared expert runs on
 * every token of the pass as a dense FFN (two more matmuls), its output scaled
 * by sigmoid(x . shexp_gate) (Qwen 2 MoE) or added as it is (GraniteMoeShared). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"

void cpu_moe_free(cpu_state *st)
{
    free(st->moe_logits); free(st->moe_pos); free(st->moe_w);
    free(st->moe_x); free(st->moe_g); free(st->moe_u); free(st->moe_y); free(st->moe_s);
    st->moe_logits = st->moe_w = st->moe_x = st->moe_g = st->moe_u = st->moe_y = st->moe_s = NULL;
    st->moe_pos = NULL;
    st->moe_cap = 0;
}

static int ensure_moe(cpu_state *st, int tokens)
{
    const llm_config *c = &st->m->cfg;
    if (tokens <= st->moe_cap)
        return 0;
    cpu_moe_free(st);
    size_t T = (size_t)tokens, R = T * (size_t)c->n_expert_used;
    st->moe_logits = malloc(T * (size_t)c->n_expert * sizeof(float));
    st->moe_pos = malloc(R * sizeof(int));
    st->moe_w = malloc(R * sizeof(float));
    st->moe_x = malloc(R * (size_t)c->dim * sizeof(float));
    st->moe_g = malloc(R * (size_t)c->expert_ff * sizeof(float));
    st->moe_u = malloc(R * (size_t)c->expert_ff * sizeof(float));
    st->moe_y = malloc(R * (size_t)c->dim * sizeof(float));
    int shared = llm_layer_has_shared(llm_moe_layer0(st->m));
    st->moe_s = shared ? malloc(T * (size_t)c->dim * sizeof(float)) : NULL;
    if (!st->moe_logits || !st->moe_pos || !st->moe_w || !st->moe_x || !st->moe_g || !st->moe_u || !st->moe_y ||
        (shared && !st->moe_s)) {
        cpu_moe_free(st);
        return -1;
    }
    st->moe_cap = tokens;
    return 0;
}

/* Each of n tokens' k experts of highest router probability (ties: the lower index), in that order, with
 * their probabilities (renormalised over the k when the model says so): softmax probabilities, or GLM-4.5's
 * sigmoids; with a selection bias (ERNIE 4.5 MoE's, GLM-4.5's), the k highest of probability + bias, weighted
 * by their probabilities alone; the weights then scaled by GLM-4.5's moe_w_scale. Then the row each (token,
 * choice) takes: rows grouped by expert (count[e] from off[e]), tokens in order within an expert, and the
 * token's normed activations (st->xb) copied there. */
static void route(cpu_state *st, const float *bias, int n, int *off, int *count)
{
    const llm_config *c = &st->m->cfg;
    int E = c->n_expert, k = c->n_expert_used, dim = c->dim;
    float scale = c->moe_w_scale > 0.0f ? c->moe_w_scale : 1.0f;
    memset(count, 0, (size_t)E * sizeof(int));
    for (int t = 0; t < n; t++) {
        const float *lg = st->moe_logits + (size_t)t * E;
        float mx = lg[0], sum = 0.0f, sel_sum = 0.0f;
        for (int e = 1; e < E; e++)
            mx = lg[e] > mx ? lg[e] : mx;
        float p[LLM_MAX_EXPERTS], score[LLM_MAX_EXPERTS]; /* what chooses: p (or the logits: the same order) + bias */
        for (int e = 0; e < E; e++)
            sum += p[e] = c->moe_sigmoid ? 1.0f / (1.0f + expf(-lg[e])) : expf(lg[e] - mx);
        for (int e = 0; e < E; e++) {
            if (!c->moe_sigmoid)
                p[e] /= sum;
            score[e] = bias == NULL ? lg[e] : p[e] + bias[e];
        }
        int *sel = st->moe_pos + (size_t)t * k; /* expert ids for now, rows below */
        float *w = st->moe_w + (size_t)t * k;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j && !taken; i++)
                    taken = sel[i] == e;
                if (!taken && (best < 0 || score[e] > score[best]))
                    best = e;
            }
            sel[j] = best;
            w[j] = p[best];
            sel_sum += w[j];
            count[best]++;
        }
        for (int j = 0; j < k; j++)
            w[j] = (c->moe_norm_topk ? w[j] / sel_sum : w[j]) * scale;
    }
    off[0] = 0;
    for (int e = 0; e < E; e++)
        off[e + 1] = off[e] + count[e];
    int fill[LLM_MAX_EXPERTS] = { 0 };
    for (int t = 0; t < n; t++)
        for (int j = 0; j < k; j++) {
            int *slot = &st->moe_pos[(size_t)t * k + j], e = *slot;
            *slot = off[e] + fill[e]++;
            memcpy(st->moe_x + (size_t)*slot * dim, st->xb + (size_t)t * dim, (size_t)dim * sizeof(float));
        }
}

typedef struct {
    cpu_state *st;
    int t0, n;
    int shared;              /* with a shared expert (its output in st->moe_s) */
    const float *shexp_gate; /* ... its gate's weights, NULL when ungated */
} combine_ctx;

/* After the down projections (every thread, tokens split): x[t] += sum of its experts' rows, weighted (+ the
 * shared expert's row); with Granite's residual scale, x[t] += that sum times the scale. */
static void combine(void *ctx, int ith, int nth)
{
    combine_ctx *p = ctx;
    cpu_state *st = p->st;
    int k = st->m->cfg.n_expert_used, dim = st->m->cfg.dim;
    float rs = st->m->cfg.residual_scale;
    for (int t = ith; t < p->n; t += nth) {
        float *x = st->x + (size_t)(p->t0 + t) * dim;
        const float *xn = st->xb + (size_t)t * dim, *s = p->shared ? st->moe_s + (size_t)t * dim : NULL;
        float g = p->shexp_gate == NULL ? 1.0f : 1.0f / (1.0f + expf(-st->kern->dot_f32(xn, p->shexp_gate, dim)));
        const int *pos = st->moe_pos + (size_t)t * k;
        const float *w = st->moe_w + (size_t)t * k;
        if (rs > 0.0f) { /* the block's output summed, then scaled, as Granite MoE's */
            for (int i = 0; i < dim; i++) {
                float v = 0.0f;
                for (int j = 0; j < k; j++)
                    v += w[j] * st->moe_y[(size_t)pos[j] * dim + i];
                if (s != NULL)
                    v += g * s[i];
                x[i] += rs * v;
            }
            continue;
        }
        for (int j = 0; j < k; j++) {
            const float *y = st->moe_y + (size_t)pos[j] * dim;
            for (int i = 0; i < dim; i++)
                x[i] += w[j] * y[i];
        }
        for (int i = 0; s != NULL && i < dim; i++)
            x[i] += g * s[i];
    }
}

/* The shared expert over the pass's np normed rows (st->xb): a dense SwiGLU FFN into st->moe_s. */
static void shared_expert(cpu_state *st, int l, int np)
{
    const llm_config *c = &st->m->cfg;
    const llm_layer *L = &st->m->layers[l];
    cpu_mm_out gu[2] = {
        { &L->w_gate, st->hb, (size_t)c->hidden_dim, 0, cpu_packed(st, l, CPU_W_GATE), 0, 0 },
        { &L->w_up, st->hb2, (size_t)c->hidden_dim, 0, cpu_packed(st, l, CPU_W_UP), 0, 0 },
    };
    cpu_mm mg = { .x = st->xb, .xs = (size_t)c->dim, .n = np, .K = c->dim, .outs = gu, .n_outs = 2, .swiglu = 1 };
    cpu_matmul(st, &mg);
    cpu_mm_out dn = { &L->w_down, st->moe_s, (size_t)c->dim, 0, cpu_packed(st, l, CPU_W_DOWN), 0, 0 };
    cpu_mm md = { .x = st->hb, .xs = (size_t)c->hidden_dim, .n = np, .K = c->hidden_dim, .outs = &dn, .n_outs = 1 };
    cpu_matmul(st, &md);
}

int cpu_moe_ffn(cpu_state *st, int l, int n)
{
    const llm_model *m = st->m;
    const llm_config *c = &m->cfg;
    const llm_layer *L = &m->layers[l];
    int P = cpu_moe_pass_tokens(c), dim = c->dim, ff = c->expert_ff;
    if (ensure_moe(st, n < P ? n : P) != 0)
        return -1;
    for (int t0 = 0; t0 < n; t0 += P) {
        int np = n - t0 < P ? n - t0 : P;
        cpu_mm_out r = { &L->ffn_gate_inp, st->moe_logits, (size_t)c->n_expert, 0,
                         cpu_packed(st, l, LLM_MAT_ROUTER), 0, 0 };
        const float *rb[1] = { L->ffn_gate_inp_b.data }; /* (gpt-oss's router bias) */
        cpu_mm mr = { .x = st->x + (size_t)t0 * dim, .xs = (size_t)dim, .n = np, .K = dim,
                      .norm = L->ffn_norm.data, .xn = st->xb, .eps = c->norm_eps, .outs = &r, .n_outs = 1,
                      .bias = rb };
        cpu_matmul(st, &mr);

        int off[LLM_MAX_EXPERTS + 1], count[LLM_MAX_EXPERTS], na = 0;
        route(st, L->exp_probs_b.data, np, off, count);
        if (llm_layer_has_shared(L))
            shared_expert(st, l, np);
        cpu_mm_out gu[CPU_MM_MAX_OUTS], dn[LLM_MAX_EXPERTS];
        const float *gub[CPU_MM_MAX_OUTS], *dnb[LLM_MAX_EXPERTS]; /* gpt-oss's experts' biases */
        int biased = L->exp_b[0].data != NULL;
        for (int e = 0; e < c->n_expert; e++) {
            if (count[e] == 0)
                continue;
            const llm_tensor *x = &L->experts[3 * e];
            if (biased) {
                gub[2 * na] = (const float *)L->exp_b[0].data + (size_t)e * ff;
                gub[2 * na + 1] = (const float *)L->exp_b[1].data + (size_t)e * ff;
                dnb[na] = (const float *)L->exp_b[2].data + (size_t)e * dim;
            }
            gu[2 * na] = (cpu_mm_out){ &x[0], st->moe_g, (size_t)ff, 0, cpu_packed(st, l, llm_mat_expert(e, 0)),
                                       off[e], count[e] };
            gu[2 * na + 1] = (cpu_mm_out){ &x[1], st->moe_u, (size_t)ff, 0,
                                           cpu_packed(st, l, llm_mat_expert(e, 1)), off[e], count[e] };
            dn[na++] = (cpu_mm_out){ &x[2], st->moe_y, (size_t)dim, 0, cpu_packed(st, l, llm_mat_expert(e, 2)),
                                     off[e], count[e] };
        }
        int rows = np * c->n_expert_used;
        cpu_mm mg = { .x = st->moe_x, .xs = (size_t)dim, .n = rows, .K = dim, .outs = gu, .n_outs = 2 * na,
                      .swiglu = 1, .gelu = c->act, .bias = biased ? gub : NULL };
        cpu_matmul(st, &mg);
        combine_ctx cc = { st, t0, np, llm_layer_has_shared(L), L->shexp_gate.data };
        cpu_mm md = { .x = st->moe_g, .xs = (size_t)ff, .n = rows, .K = ff, .outs = dn, .n_outs = na,
                      .post = combine, .post_ctx = &cc, .bias = biased ? dnb : NULL };
        cpu_matmul(st, &md);
    }
    return 0;
}
