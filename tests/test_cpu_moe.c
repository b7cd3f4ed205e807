/* The CPU backend's mixture-of-experts FFN (engine/cpu/moe.c) on gen-model's
 * tiny-qwen3moe (8 experts, 2 per token): a long prompt in one step (several
 * passes of CPU_MOE_ROWS rows) == the same prompt in chunks == token by token
 * at the end; thread counts agree; the loader's view of the experts; the
 * same on tiny-qwen2moe (a shared expert); ERNIE 4.5 MoE's dense first layer and its experts chosen with a
 * bias (tiny-ernie4_5-moe). The agreement with llama.cpp is
 * tests/parity/moe.t's; the CUDA backend's against this one, tests/gpu/emu_quick.sh's. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "cpu/cpu_backend.h"
#include "model.h"
#include "model_gen.h"
#include "model_write.h"
#include "tap.h"

enum { BLOCK = 16 };

static int32_t *table;
static llm_seq_view view;

/* The block table of a sequence of n positions (view): blocks in order, or reversed. */
static void set_table(int n, int reversed)
{
    table = malloc((size_t)(n / BLOCK + 1) * sizeof(int32_t));
    for (int i = 0; i <= n / BLOCK; i++)
        table[i] = reversed ? n / BLOCK - i : i;
    view = (llm_seq_view){ table, n / BLOCK + 1, NULL };
}

static llm_backend *make_backend(const llm_model *m, int threads, int n_pos)
{
    llm_err err = { { 0 } };
    llm_backend_opts o = { .threads = threads, .kv_blocks = n_pos / BLOCK + 1, .block_size = BLOCK };
    llm_backend *b = llm_backend_create("cpu", m, &o, &err);
    if (b == NULL)
        diag("backend: %s", err.msg);
    return b;
}

/* Positions [p0, p0 + n) of toks in one step; the logits of the last one into out. */
static int step(llm_backend *b, const int32_t *toks, int p0, int n, float *out)
{
    int32_t *pos = malloc((size_t)n * sizeof(int32_t)), *seq = calloc((size_t)n, sizeof(int32_t));
    uint8_t *want = calloc((size_t)n, 1);
    for (int i = 0; i < n; i++)
        pos[i] = p0 + i;
    want[n - 1] = 1;
    llm_batch bt = { n, toks + p0, pos, seq, want, 1, &view };
    llm_err err = { { 0 } };
    int rc = b->ops->forward(b, &bt, out, &err);
    if (rc != 0)
        diag("forward: %s", err.msg);
    free(pos); free(seq); free(want);
    return rc;
}

static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double mx = 0.0, scale = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        mx = d > mx ? d : mx;
        scale = fabs(b[i]) > scale ? fabs(b[i]) : scale;
    }
    return mx / scale;
}

static void test_moe(const char *preset, llm_dtype t, const char *dir)
{
    llm_err err = { { 0 } };
    char path[600];
    int shared = strcmp(preset, "tiny-qwen2moe") == 0;
    snprintf(path, sizeof(path), "%s/moe-%s.gguf", dir, llm_dtype_name(t));
    ok(llm_model_generate(preset, t, 9, path, "../shared", &err) == 0, "gen %s %s: %s", preset,
       llm_dtype_name(t), err.msg);
    llm_model *m = llm_model_load(path, NULL, &err);
    ok(m != NULL, "it loads: %s", m ? "" : err.msg);
    if (m == NULL)
        return;
    const llm_config *c = &m->cfg;
    size_t eb = llm_dtype_row_bytes(m->layers[1].experts[0].type, 64) * 64;
    ok(c->n_expert == 8 && c->n_expert_used == 2 && c->expert_ff == 64 && c->moe_norm_topk == !shared &&
       (m->layers[1].w_gate.data != NULL) == shared && (m->layers[1].shexp_gate.data != NULL) == shared &&
       m->layers[1].ffn_gate_inp.type == LLM_F32 &&
       (const uint8_t *)m->layers[1].experts[3 * 5 + 2].data - (const uint8_t *)m->layers[1].experts[2].data ==
           (ptrdiff_t)(5 * eb),
       "%s %s: 8 experts of 64, 2 per token, %s; an F32 router; expert 5's down matrix is the 3-D tensor's sixth",
       preset, llm_dtype_name(t), shared ? "a shared expert, not renormalised" : "renormalised");

    /* More tokens than one pass takes (cpu_moe_pass_tokens), in one step, in chunks, and the last few one by
     * one: the last token's logits agree. */
    int pass = cpu_moe_pass_tokens(c), n = pass + 300, V = c->vocab_size;
    int32_t *toks = malloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++)
        toks[i] = i == 0 ? c->bos_id : 300 + (i * 37) % 5000;
    set_table(n, 1); /* not in order */
    float *one = malloc((size_t)V * sizeof(float)), *chunked = malloc((size_t)V * sizeof(float));
    float *tail = malloc((size_t)V * sizeof(float));
    llm_backend *b = make_backend(m, 2, n);
    ok(b && step(b, toks, 0, n, one) == 0, "%s: %d tokens in one step (passes of %d)", llm_dtype_name(t), n, pass);
    llm_backend_free(b);
    b = make_backend(m, 3, n);
    int rc = 0;
    for (int p0 = 0; p0 < n - 4 && rc == 0; p0 += 700)
        rc = step(b, toks, p0, (n - 4 - p0 < 700 ? n - 4 - p0 : 700), chunked);
    for (int p = n - 4; p < n && rc == 0; p++)
        rc = step(b, toks, p, 1, tail);
    ok(rc == 0, "%s: in chunks of 700 on 3 threads, then the last 4 one by one", llm_dtype_name(t));
    llm_backend_free(b);
    /* Q8_0: a single token's experts multiply Q8 activations, a long step's float ones (or int8 on
     * CPUs with packed kernels): equal up to that rounding */
    float lo = one[0], hi = one[0];
    for (int i = 1; i < V; i++) {
        lo = one[i] < lo ? one[i] : lo;
        hi = one[i] > hi ? one[i] : hi;
    }
    ok(isfinite(lo) && isfinite(hi) && hi - lo > 1.0f, "%s: the logits spread over [%.2f, %.2f]", llm_dtype_name(t),
       lo, hi);
    double d = max_rel_diff(tail, one, (size_t)V), tol = t == LLM_F32 ? 1e-4 : 5e-2;
    ok(d < tol, "%s: the last token's logits agree (rel diff %.2g < %g)", llm_dtype_name(t), d, tol);

    free(one); free(chunked); free(tail); free(toks); free(table);
    llm_model_free(m);
    unlink(path);
}

/* The logits after n tokens given whole to a fresh backend: 0, or -1. */
static int run_whole(llm_model *m, const int32_t *toks, int n, float *out)
{
    llm_backend *b = make_backend(m, 2, n);
    int rc = b == NULL || step(b, toks, 0, n, out) != 0 ? -1 : 0;
    llm_backend_free(b);
    return rc;
}

/* ERNIE 4.5 MoE (tiny-ernie4_5-moe): its dense first layer (192 wide, wider than the shared expert's 128) beside
 * the experts' layers; the experts chosen with a bias: the same prompt whole and token by token agree, and
 * without the bias the logits move (it chooses other experts). */
static void test_ernie_moe(const char *dir)
{
    llm_err err = { { 0 } };
    char path[600];
    snprintf(path, sizeof(path), "%s/ernie-moe.gguf", dir);
    ok(llm_model_generate("tiny-ernie4_5-moe", LLM_F32, 9, path, "../shared", &err) == 0, "gen tiny-ernie4_5-moe: %s",
       err.msg);
    llm_model *m = llm_model_load(path, NULL, &err);
    ok(m != NULL, "it loads: %s", m ? "" : err.msg);
    if (m == NULL)
        return;
    const llm_config *c = &m->cfg;
    const llm_layer *L0 = &m->layers[0], *L1 = &m->layers[1];
    ok(c->moe_dense_lead == 1 && c->dense_ff == 192 && c->hidden_dim == 128 && L0->dense && !L1->dense &&
       llm_layer_ff(c, L0) == 192 && llm_layer_ff(c, L1) == 128 && L0->w_gate.ne[1] == 192 && L1->w_gate.ne[1] == 128 &&
       L0->ffn_gate_inp.data == NULL && L0->experts != NULL && L0->experts[0].data == NULL &&
       L1->exp_probs_b.data != NULL && L1->exp_probs_b.ne[0] == 8 && llm_moe_layer0(m) == L1,
       "layer 0 dense (192 wide, no router, its experts absent), layer 1 experts with a bias and a shared one of 128");
    int n = 40, V = c->vocab_size;
    int32_t *toks = malloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++)
        toks[i] = i == 0 ? c->bos_id : 300 + (i * 37) % 5000;
    set_table(n, 0);
    float *one = malloc((size_t)V * sizeof(float)), *tail = malloc((size_t)V * sizeof(float));
    float *nob = malloc((size_t)V * sizeof(float));
    llm_backend *b = make_backend(m, 2, n);
    int rc = b == NULL || step(b, toks, 0, n, one) != 0;
    llm_backend_free(b);
    b = make_backend(m, 2, n);
    rc |= b == NULL || step(b, toks, 0, n - 3, tail) != 0;
    for (int p = n - 3; p < n && rc == 0; p++)
        rc = step(b, toks, p, 1, tail);
    llm_backend_free(b);
    ok(rc == 0 && max_rel_diff(tail, one, (size_t)V) < 1e-4, "%d tokens whole and the last 3 one by one agree (%.2g)",
       n, max_rel_diff(tail, one, (size_t)V));
    const void *keep[8] = { NULL };
    for (int l = 1; l < c->n_layers; l++) {
        keep[l] = m->layers[l].exp_probs_b.data;
        m->layers[l].exp_probs_b.data = NULL;
    }
    rc = run_whole(m, toks, n, nob);
    ok(rc == 0 && max_rel_diff(nob, one, (size_t)V) > 1e-2,
       "control: without the selection bias the logits move (rel diff %.2g)", max_rel_diff(nob, one, (size_t)V));
    for (int l = 1; l < c->n_layers; l++)
        m->layers[l].exp_probs_b.data = keep[l];
    free(one); free(tail); free(nob); free(toks); free(table);
    llm_model_free(m);
    unlink(path);
}

/* A control's baseline: n prompt tokens (BOS, then a spread of ids), their block table, the model's logits of
 * the whole prompt in *one, and room for the altered model's in *alt. 0, or -1. */
static int control_base(llm_model *m, int32_t *toks, int n, float **one, float **alt)
{
    for (int i = 0; i < n; i++)
        toks[i] = i == 0 ? m->cfg.bos_id : 500 + (i * 53) % 4000;
    set_table(n, 0);
    *one = malloc((size_t)m->cfg.vocab_size * sizeof(float));
    *alt = malloc((size_t)m->cfg.vocab_size * sizeof(float));
    return *one == NULL || *alt == NULL ? -1 : run_whole(m, toks, n, *one);
}

/* GLM-4.5 (tiny-glm4moe): the experts' weights are the router's sigmoids (chosen with a bias), renormalised and
 * times 2.5; the agreement with llama.cpp is tests/parity/moe.t's. Controls: a softmax router, or no scale,
 * moves the logits. */
static void test_glm_moe(const char *dir)
{
    llm_err err = { { 0 } };
    char path[600];
    snprintf(path, sizeof(path), "%s/glm-moe.gguf", dir);
    ok(llm_model_generate("tiny-glm4moe", LLM_F32, 9, path, "../shared", &err) == 0, "gen tiny-glm4moe: %s", err.msg);
    llm_model *m = llm_model_load(path, NULL, &err);
    ok(m != NULL && m->cfg.moe_sigmoid && m->cfg.moe_w_scale == 2.5f, "it loads, its router sigmoid times 2.5: %s",
       m ? "" : err.msg);
    if (m == NULL)
        return;
    int n = 24, V = m->cfg.vocab_size;
    int32_t toks[24];
    float *one, *alt;
    int rc = control_base(m, toks, n, &one, &alt);
    m->cfg.moe_sigmoid = 0;
    rc |= run_whole(m, toks, n, alt);
    ok(rc == 0 && max_rel_diff(alt, one, (size_t)V) > 1e-2, "control: a softmax router moves the logits (%.2g)",
       max_rel_diff(alt, one, (size_t)V));
    m->cfg.moe_sigmoid = 1;
    m->cfg.moe_w_scale = 1.0f;
    rc |= run_whole(m, toks, n, alt);
    ok(rc == 0 && max_rel_diff(alt, one, (size_t)V) > 1e-2, "control: without the scale the logits move (%.2g)",
       max_rel_diff(alt, one, (size_t)V));
    free(one); free(alt); free(table);
    llm_model_free(m);
    unlink(path);
}

/* gpt-oss (tiny-gpt-oss): controls for what tests/parity/gptoss.t holds to llama.cpp: without the sinks, with
 * the plain SwiGLU, without the experts' biases, without the output projection's bias, the logits move. */
static void test_gptoss(const char *dir)
{
    llm_err err = { { 0 } };
    char path[600];
    snprintf(path, sizeof(path), "%s/gpt-oss.gguf", dir);
    ok(llm_model_generate("tiny-gpt-oss", LLM_F32, 9, path, "../shared", &err) == 0, "gen tiny-gpt-oss: %s",
       err.msg);
    llm_model *m = llm_model_load(path, NULL, &err);
    ok(m != NULL && m->cfg.act == LLM_ACT_SWIGLU_OAI && m->layers[0].swa && !m->layers[1].swa &&
       m->layers[1].attn_sinks.data != NULL && m->layers[1].exp_b[2].data != NULL,
       "it loads: the clamped SwiGLU, a window on layer 0 not 1, sinks, experts' biases: %s", m ? "" : err.msg);
    if (m == NULL)
        return;
    int n = 24, V = m->cfg.vocab_size;
    int32_t toks[24];
    float *one, *alt;
    int rc = control_base(m, toks, n, &one, &alt);
    llm_layer keep[4];
    for (int l = 0; l < 4; l++)
        keep[l] = m->layers[l];
    for (int l = 0; l < 4; l++)
        m->layers[l].attn_sinks.data = NULL;
    rc |= run_whole(m, toks, n, alt);
    ok(rc == 0 && max_rel_diff(alt, one, (size_t)V) > 1e-2, "control: without the sinks the logits move (%.2g)",
       max_rel_diff(alt, one, (size_t)V));
    for (int l = 0; l < 4; l++)
        m->layers[l] = keep[l];
    m->cfg.act = LLM_ACT_SILU;
    rc |= run_whole(m, toks, n, alt);
    ok(rc == 0 && max_rel_diff(alt, one, (size_t)V) > 1e-2, "control: with the plain SwiGLU they move (%.2g)",
       max_rel_diff(alt, one, (size_t)V));
    m->cfg.act = LLM_ACT_SWIGLU_OAI;
    for (int l = 0; l < 4; l++)
        for (int i = 0; i < 3; i++)
            m->layers[l].exp_b[i].data = NULL;
    for (int l = 0; l < 4; l++)
        m->layers[l].ffn_gate_inp_b.data = NULL;
    rc |= run_whole(m, toks, n, alt);
    ok(rc == 0 && max_rel_diff(alt, one, (size_t)V) > 1e-2, "control: without the router's and experts' biases "
       "(%.2g)", max_rel_diff(alt, one, (size_t)V));
    for (int l = 0; l < 4; l++)
        m->layers[l] = keep[l];
    for (int l = 0; l < 4; l++)
        m->layers[l].bo.data = NULL;
    rc |= run_whole(m, toks, n, alt);
    ok(rc == 0 && max_rel_diff(alt, one, (size_t)V) > 1e-2, "control: without the output projection's bias (%.2g)",
       max_rel_diff(alt, one, (size_t)V));
    for (int l = 0; l < 4; l++)
        m->layers[l] = keep[l];
    rc |= run_whole(m, toks, n, alt);
    ok(rc == 0 && max_rel_diff(alt, one, (size_t)V) == 0.0, "and restored, the same logits");
    /* re-saved (gen-model --from): in F32 the same logits, sinks and biases included; Q8_0 loads */
    char back[640];
    snprintf(back, sizeof(back), "%s/gpt-oss-back.gguf", dir);
    ok(llm_model_save_gguf(m, LLM_F32, back, &err) == 0, "re-saved in F32: %s", err.msg);
    llm_model *b = llm_model_load(back, NULL, &err);
    rc = b == NULL || run_whole(b, toks, n, alt);
    ok(rc == 0 && b->layers[2].swa && !b->layers[3].swa && max_rel_diff(alt, one, (size_t)V) == 0.0,
       "... and reloaded: its windows, the same logits (%s)", b ? "" : err.msg);
    llm_model_free(b);
    ok(llm_model_save_gguf(m, LLM_Q8_0, back, &err) == 0 && (b = llm_model_load(back, NULL, &err)) != NULL &&
       b->layers[0].experts[0].type == LLM_Q8_0 && b->layers[0].exp_b[0].type == LLM_F32,
       "re-saved in Q8_0: its experts in Q8_0, their biases in F32: %s", err.msg);
    llm_model_free(b);
    unlink(back);
    free(one); free(alt); free(table);
    llm_model_free(m);
    unlink(path);
}

int main(void)
{
    char dir[64];
    snprintf(dir, sizeof(dir), "/tmp/test_cpu_moe_%d", (int)getpid());
    mkdir(dir, 0755);
    test_moe("tiny-qwen3moe", LLM_F32, dir);
    test_moe("tiny-qwen3moe", LLM_Q8_0, dir);
    test_moe("tiny-qwen2moe", LLM_Q8_0, dir);
    test_ernie_moe(dir);
    test_glm_moe(dir);
    test_gptoss(dir);
    rmdir(dir);
    return done_testing();
}
