/* Tensor parallelism's split of a model (engine/model_tp.c): each rank's share holds its heads' q/k/v rows and
 * its FFN columns' gate/up rows (views into the model), and the columns of wo / w_down that read them (copies,
 * whole blocks of the row's type), and the configuration a rank runs with; the shares put back together are the
 * model, byte for byte. With expert parallelism each rank's share holds its range of the experts whole (the
 * model's own tensors) and none of the others, every expert on one rank. Models the split cannot take are refused
 * with the reason. The split run on emulated GPUs, against the CPU backend: tests/gpu/emu_quick.sh. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_quants.h"
#include "model.h"
#include "model_gen.h"
#include "model_tp.h"
#include "model_write.h"
#include "tap.h"

/* s's rows are t's from row r0 on. */
static int same_rows(const llm_tensor *t, const llm_tensor *s, int64_t r0)
{
    if (t->data == NULL)
        return s->data == NULL;
    if (t->ne[1] == 1) /* a vector: elements */
        return s->type == LLM_F32 && memcmp(s->data, (const float *)t->data + r0, (size_t)s->ne[0] * 4) == 0;
    size_t rb = gguf_qtype_row_bytes(t->type, (uint64_t)t->ne[0]);
    return s->type == t->type && s->ne[0] == t->ne[0] && rb > 0 &&
           memcmp(s->data, (const char *)t->data + (size_t)r0 * rb, (size_t)s->ne[1] * rb) == 0;
}

/* s's columns are t's from column c0 on, in every row. */
static int same_cols(const llm_tensor *t, const llm_tensor *s, int64_t c0)
{
    size_t rb = gguf_qtype_row_bytes(t->type, (uint64_t)t->ne[0]);
    size_t off = gguf_qtype_row_bytes(t->type, (uint64_t)c0), nb = gguf_qtype_row_bytes(t->type, (uint64_t)s->ne[0]);
    if (s->type != t->type || s->ne[1] != t->ne[1] || nb == 0 || (c0 > 0 && off == 0))
        return 0;
    for (int64_t r = 0; r < t->ne[1]; r++)
        if (memcmp((const char *)s->data + (size_t)r * nb, (const char *)t->data + (size_t)r * rb + off, nb) != 0)
            return 0;
    return 1;
}

static void check_split(const char *what, const llm_model *m, int size)
{
    llm_err err = { { 0 } };
    const llm_config *c = &m->cfg;
    const int hd = c->head_dim;
    int64_t q_cols = 0, ff_cols = 0;
    int all = 1, views = 1, moe_layers = 0;
    for (int r = 0; r < size; r++) {
        llm_model *s = llm_model_tp_shard(m, r, size, 0, &err);
        ok(s != NULL, "%s, rank %d of %d: split (%s)", what, r, size, s ? "" : err.msg);
        if (s == NULL)
            return;
        const llm_config *k = &s->cfg;
        ok(k->n_heads * size == c->n_heads && k->n_kv_heads * size == c->n_kv_heads &&
           k->hidden_dim * size == c->hidden_dim && k->dim == c->dim && k->head_dim == hd &&
           k->n_layers == c->n_layers && k->vocab_size == c->vocab_size,
           "%s, rank %d: %d of %d query heads, %d of %d KV heads, %d of %d FFN columns, the rest as the model's",
           what, r, k->n_heads, c->n_heads, k->n_kv_heads, c->n_kv_heads, k->hidden_dim, c->hidden_dim);
        ok(s->tok_embd.data == m->tok_embd.data && s->output.data == m->output.data &&
           s->out_norm.data == m->out_norm.data && s->tok == m->tok,
           "%s, rank %d: embedding, classifier, final norm and tokenizer whole (shared)", what, r);
        ok(k->expert_ff * size == c->expert_ff && k->dense_ff * size == c->dense_ff && k->n_expert == c->n_expert &&
           k->n_expert_used == c->n_expert_used, "%s, rank %d: %d of %d columns of each of %d experts, %d of %d of "
           "a dense layer's", what, r, k->expert_ff, c->expert_ff, k->n_expert, k->dense_ff, c->dense_ff);
        const int64_t hq = (int64_t)k->n_heads * hd, hkv = (int64_t)k->n_kv_heads * hd, eff = k->expert_ff;
        for (int l = 0; l < c->n_layers; l++) {
            const llm_layer *L = &m->layers[l], *S = &s->layers[l];
            const int64_t ff = llm_layer_ff(k, S);
            all &= same_rows(&L->wq, &S->wq, r * hq) && S->wq.ne[1] == hq;
            all &= same_rows(&L->wk, &S->wk, r * hkv) && S->wk.ne[1] == hkv;
            all &= same_rows(&L->wv, &S->wv, r * hkv) && S->wv.ne[1] == hkv;
            all &= same_rows(&L->bq, &S->bq, r * hq) && same_rows(&L->bk, &S->bk, r * hkv) &&
                   same_rows(&L->bv, &S->bv, r * hkv);
            all &= same_cols(&L->wo, &S->wo, r * hq) && S->wo.ne[0] == hq;
            if (L->w_gate.data != NULL) /* (a layer of experts without a shared one has none) */
                all &= same_rows(&L->w_gate, &S->w_gate, r * ff) && same_rows(&L->w_up, &S->w_up, r * ff) &&
                       same_cols(&L->w_down, &S->w_down, r * ff) && S->w_down.ne[0] == ff;
            else
                all &= S->w_gate.data == NULL && S->w_up.data == NULL && S->w_down.data == NULL;
            all &= S->attn_norm.data == L->attn_norm.data && S->ffn_norm.data == L->ffn_norm.data &&
                   S->post_attn_norm.data == L->post_attn_norm.data;
            /* q / k norms: OLMo 2's over whole rows by element, as the rows; per-head ones whole */
            if (c->qk_norm_full)
                all &= same_rows(&L->q_norm, &S->q_norm, r * hq) && S->q_norm.ne[0] == hq &&
                       same_rows(&L->k_norm, &S->k_norm, r * hkv) && S->k_norm.ne[0] == hkv;
            else
                all &= S->q_norm.data == L->q_norm.data && S->k_norm.data == L->k_norm.data;
            /* rows are views into the model's memory; columns are the share's own copies */
            views &= (const char *)S->wq.data >= (const char *)L->wq.data && S->wo.data != L->wo.data;
            if (!llm_layer_moe(c, L))
                continue;
            /* each expert sliced as a dense FFN; the router whole; the list of experts the share's own */
            all &= S->ffn_gate_inp.data == L->ffn_gate_inp.data && S->experts != L->experts;
            for (int e = 0; e < c->n_expert; e++) {
                const llm_tensor *x = &L->experts[3 * e], *y = &S->experts[3 * e];
                all &= same_rows(&x[0], &y[0], r * eff) && y[0].ne[1] == eff && same_rows(&x[1], &y[1], r * eff) &&
                       y[1].ne[1] == eff && same_cols(&x[2], &y[2], r * eff) && y[2].ne[0] == eff;
                views &= y[0].data != x[0].data || r == 0;
            }
            moe_layers++;
        }
        q_cols += k->n_heads;
        ff_cols += k->hidden_dim;
        llm_model_tp_free(s);
    }
    ok(all && views, "%s over %d ranks: every layer's q/k/v and gate/up rows and wo / w_down columns are the "
       "model's, the rows as views", what, size);
    ok(q_cols == c->n_heads && ff_cols == c->hidden_dim, "%s over %d ranks: the shares cover every head and column",
       what, size);
    if (c->n_expert > 0)
        ok(moe_layers == size * (c->n_layers - c->moe_dense_lead), "%s over %d ranks: the experts of its %d layers "
           "of experts split", what, size, c->n_layers - c->moe_dense_lead);
}

/* Expert parallelism: rank r's share holds experts [r E / size, (r + 1) E / size) whole (the model's tensors, not
 * copies) and no other; its attention, shared expert and dense layers split as without it; gpt-oss's experts'
 * biases whole (a row per expert). Every expert held by exactly one rank. */
static void check_split_ep(const char *what, const llm_model *m, int size)
{
    llm_err err = { { 0 } };
    const llm_config *c = &m->cfg;
    int held[LLM_MAX_EXPERTS] = { 0 }, all = 1;
    for (int r = 0; r < size; r++) {
        llm_model *s = llm_model_tp_shard(m, r, size, 1, &err);
        ok(s != NULL, "%s, rank %d of %d, experts whole: split (%s)", what, r, size, s ? "" : err.msg);
        if (s == NULL)
            return;
        const llm_config *k = &s->cfg;
        const int lo = r * c->n_expert / size, hi = (r + 1) * c->n_expert / size;
        all &= k->expert_lo == lo && k->expert_hi == hi && k->expert_ff == c->expert_ff &&
               k->n_expert == c->n_expert && k->n_heads * size == c->n_heads && k->hidden_dim * size == c->hidden_dim;
        for (int l = 0; l < c->n_layers; l++) {
            const llm_layer *L = &m->layers[l], *S = &s->layers[l];
            const int64_t ff = llm_layer_ff(k, S);
            all &= same_rows(&L->wq, &S->wq, r * (int64_t)k->n_heads * c->head_dim) &&
                   same_cols(&L->wo, &S->wo, r * (int64_t)k->n_heads * c->head_dim);
            if (L->w_gate.data != NULL)
                all &= same_rows(&L->w_gate, &S->w_gate, r * ff) && same_cols(&L->w_down, &S->w_down, r * ff);
            if (!llm_layer_moe(c, L))
                continue;
            all &= S->ffn_gate_inp.data == L->ffn_gate_inp.data && S->experts != L->experts;
            for (int i = 0; i < 3 * c->n_expert; i++) {
                const llm_tensor *x = &L->experts[i], *y = &S->experts[i];
                const int mine = i / 3 >= lo && i / 3 < hi;
                all &= mine ? y->data == x->data && y->ne[0] == x->ne[0] && y->ne[1] == x->ne[1] && y->type == x->type
                            : y->data == NULL && y->src == NULL && !llm_expert_held(k, i / 3);
                held[i / 3] += mine && l == c->n_layers - 1 && i % 3 == 0;
            }
            for (int b = 0; b < 3; b++)
                all &= S->exp_b[b].data == L->exp_b[b].data;
        }
        llm_model_tp_free(s);
    }
    int once = 1;
    for (int e = 0; e < c->n_expert; e++)
        once &= held[e] == 1;
    ok(all && once, "%s over %d ranks, experts whole: each rank's experts the model's own, the others absent, every "
       "expert on one rank; attention, shared expert and biases as without it", what, size);
}

static void refused(const char *what, const llm_model *m, int size, int ep, const char *why)
{
    llm_err err = { { 0 } };
    llm_model *s = llm_model_tp_shard(m, 0, size, ep, &err);
    ok(s == NULL && llm_model_tp_check(m, size, ep, &err) != 0 && strstr(err.msg, why) != NULL,
       "%s over %d%s: refused, \"%s\" (%s)", what, size, ep ? " (experts whole)" : "", why, err.msg);
    llm_model_tp_free(s);
}

static llm_model *gen(const char *dir, const char *preset, llm_dtype t)
{
    llm_err err = { { 0 } };
    char path[600];
    snprintf(path, sizeof(path), "%s/%s-%s.gguf", dir, preset, llm_dtype_name(t));
    llm_model *m = llm_model_generate(preset, t, 5, path, "../shared", &err) == 0 ? llm_model_load(path, NULL, &err)
                                                                                  : NULL;
    ok(m != NULL, "gen-model %s %s: %s", preset, llm_dtype_name(t), m ? "" : err.msg);
    unlink(path);
    return m;
}

int main(void)
{
    llm_err err = { { 0 } };
    llm_model *m = llm_model_load("../shared/models/stories260K/stories260K.bin",
                                  "../shared/models/stories260K/tok512.bin", &err);
    ok(m != NULL, "stories260K loads: %s", m ? "" : err.msg);
    if (m != NULL) {
        check_split("stories260K f32", m, 2);
        check_split("stories260K f32", m, 4);
        refused("stories260K", m, 3, 0, "must each divide by the number of ranks");
        refused("stories260K", m, 9, 0, "out of range");
        llm_model_free(m);
    }
    char dir[64];
    snprintf(dir, sizeof(dir), "/tmp/test_model_tp_%d", (int)getpid());
    mkdir(dir, 0755);
    /* Q8_0 columns in whole 32-weight blocks: Gemma 2's FFN of 192 splits in 96s (3 blocks); a q/k/v bias too */
    if ((m = gen(dir, "tiny-gemma2", LLM_Q8_0)) != NULL) {
        check_split("tiny-gemma2 q8_0", m, 2);
        llm_model_free(m);
    }
    if ((m = gen(dir, "tiny-qwen2", LLM_F32)) != NULL) {
        ok(m->layers[0].bq.data != NULL, "tiny-qwen2 has q/k/v biases");
        check_split("tiny-qwen2 f32 (biases)", m, 2);
        llm_model_free(m);
    }
    /* stories260K in Q8_0 (its FFN rows of 172 stay F16): wo's 64 columns split in 32s over 2 ranks, but 16
     * columns a rank over 4 are not whole blocks */
    llm_model *f = llm_model_load("../shared/models/stories260K/stories260K.bin",
                                  "../shared/models/stories260K/tok512.bin", &err);
    char path[600];
    snprintf(path, sizeof(path), "%s/s260-q8_0.gguf", dir);
    m = f != NULL && llm_model_save_gguf(f, LLM_Q8_0, path, &err) == 0 ? llm_model_load(path, NULL, &err) : NULL;
    ok(m != NULL && m->layers[0].wo.type == LLM_Q8_0, "stories260K as q8_0: %s", m ? "" : err.msg);
    if (m != NULL) {
        check_split("stories260K q8_0", m, 2);
        refused("stories260K q8_0", m, 4, 0, "not whole blocks");
        llm_model_free(m);
    }
    llm_model_free(f);
    unlink(path);
    /* mixtures of experts: every expert split as a dense FFN (Qwen 3 MoE's 8 experts of 64 over 2); ERNIE 4.5 MoE
     * in Q8_0 (a dense first layer 192 wide, experts of 64 in 32s, a shared expert of 128); Mixtral's 4 experts of
     * 256 in Q8_0 over 4 (64 columns a rank, 2 blocks) */
    if ((m = gen(dir, "tiny-qwen3moe", LLM_F32)) != NULL) {
        check_split("tiny-qwen3moe f32", m, 2);
        check_split_ep("tiny-qwen3moe f32", m, 2);
        llm_model_free(m);
    }
    if ((m = gen(dir, "tiny-ernie4_5-moe", LLM_Q8_0)) != NULL) {
        ok(m->layers[0].dense && m->layers[1].w_gate.data != NULL && m->layers[1].experts[2].type == LLM_Q8_0,
           "tiny-ernie4_5-moe q8_0: a dense first layer, a shared expert, Q8_0 experts");
        check_split("tiny-ernie4_5-moe q8_0", m, 2);
        check_split_ep("tiny-ernie4_5-moe q8_0", m, 2);
        llm_model_free(m);
    }
    if ((m = gen(dir, "tiny-mixtral", LLM_Q8_0)) != NULL) {
        check_split("tiny-mixtral q8_0", m, 4);
        check_split_ep("tiny-mixtral q8_0", m, 4);
        llm_model_free(m);
    }
    /* experts of 96 columns in Q8_0: 48 a rank over 2 is not whole blocks, so only dealt out whole */
    if ((m = gen(dir, "tiny-qwen3moe-96", LLM_Q8_0)) != NULL) {
        refused("tiny-qwen3moe-96 q8_0", m, 2, 0, "not whole blocks");
        check_split_ep("tiny-qwen3moe-96 q8_0", m, 2);
        llm_model_free(m);
    }
    /* gpt-oss: a sink per head goes with its head, the experts' gate / up biases with their columns, and the down
     * projection's bias is rank 0's alone (every rank's experts give partial sums); bo and the router's bias whole */
    if ((m = gen(dir, "tiny-gpt-oss", LLM_F32)) != NULL) {
        check_split("tiny-gpt-oss f32", m, 2);
        check_split_ep("tiny-gpt-oss f32", m, 2);
        const llm_config *c = &m->cfg;
        const int hq = c->n_heads / 2, eff = c->expert_ff / 2;
        int good = 1;
        for (int r = 0; r < 2; r++) {
            llm_model *s = llm_model_tp_shard(m, r, 2, 0, &err);
            for (int l = 0; s != NULL && l < c->n_layers; l++) {
                const llm_layer *L = &m->layers[l], *S = &s->layers[l];
                good &= same_rows(&L->attn_sinks, &S->attn_sinks, r * hq) && S->attn_sinks.ne[0] == hq;
                good &= same_cols(&L->exp_b[0], &S->exp_b[0], r * eff) && same_cols(&L->exp_b[1], &S->exp_b[1], r * eff);
                good &= S->bo.data == L->bo.data && S->ffn_gate_inp_b.data == L->ffn_gate_inp_b.data;
                const float *b = S->exp_b[2].data;
                for (int64_t i = 0; i < c->dim * c->n_expert; i++)
                    good &= r == 0 ? b[i] == ((const float *)L->exp_b[2].data)[i] : b[i] == 0.0f;
            }
            good &= s != NULL;
            llm_model_tp_free(s);
        }
        ok(good, "tiny-gpt-oss over 2: sinks by head, experts' gate / up biases by column, down biases on rank 0 only "
           "(zeros on rank 1), bo and the router's bias whole");
        llm_model_free(m);
    }
    /* OLMo 2's q / k norms over whole rows (their weights split as the rows); OLMoE's with experts, over 2 and 4 */
    if ((m = gen(dir, "tiny-olmo2", LLM_F32)) != NULL) {
        ok(m->cfg.qk_norm_full && m->layers[0].q_norm.ne[0] == m->cfg.n_heads * m->cfg.head_dim,
           "tiny-olmo2: q norms over whole rows");
        check_split("tiny-olmo2 f32", m, 2);
        llm_model_free(m);
    }
    if ((m = gen(dir, "tiny-olmoe", LLM_F32)) != NULL) {
        check_split("tiny-olmoe f32", m, 2);
        check_split("tiny-olmoe f32", m, 4);
        check_split_ep("tiny-olmoe f32", m, 4);
        llm_model_free(m);
    }
    if ((m = gen(dir, "tiny-bert", LLM_F32)) != NULL) {
        refused("tiny-bert", m, 2, 0, "encoder");
        llm_model_free(m);
    }
    rmdir(dir);
    return done_testing();
}
