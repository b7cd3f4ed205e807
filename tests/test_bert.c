/* BERT encoders (llm_config.encoder) on the CPU backend: the `tiny-bert` preset written by gen-model and
 * loaded back, its hidden states against a plain reference forward written here from the definition (every
 * token sees its whole input; post-norm blocks with biases; erf GELU), two inputs in one step against each
 * alone, quantised weights near F32, and the scheduler's pooling (mean, CLS), its one-step rule and its
 * refusals (generation, an input longer than a step). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "backend_util.h"
#include "gguf.h"
#include "model.h"
#include "model_gen.h"
#include "scheduler.h"
#include "tap.h"

static void row_f32(const llm_tensor *t, int64_t r, float *out)
{
    size_t rb = llm_dtype_row_bytes(t->type, (uint64_t)t->ne[0]);
    llm_row_to_f32(t->type, (const uint8_t *)t->data + (size_t)r * rb, out, (size_t)t->ne[0]);
}

/* y[rows] = W x + b */
static void ref_linear(const llm_tensor *w, const llm_tensor *b, const float *x, float *y)
{
    float *row = malloc((size_t)w->ne[0] * sizeof(float));
    for (int64_t r = 0; r < w->ne[1]; r++) {
        row_f32(w, r, row);
        double s = 0.0;
        for (int64_t i = 0; i < w->ne[0]; i++)
            s += (double)row[i] * x[i];
        y[r] = (float)s + ((const float *)b->data)[r];
    }
    free(row);
}

static void ref_ln(float *x, int n, const llm_tensor *w, const llm_tensor *b, float eps)
{
    double m = 0.0, v = 0.0;
    for (int i = 0; i < n; i++)
        m += x[i];
    m /= n;
    for (int i = 0; i < n; i++)
        v += (x[i] - m) * (x[i] - m);
    v /= n;
    for (int i = 0; i < n; i++)
        x[i] = (float)((x[i] - m) / sqrt(v + eps)) * ((const float *)w->data)[i] + ((const float *)b->data)[i];
}

/* Hidden states [n][dim] of one input of n tokens of token types `types` (NULL: all 0), from the model's
 * definition. */
static float *ref_forward_types(const llm_model *m, const int32_t *ids, const int *types, int n)
{
    const llm_config *c = &m->cfg;
    int d = c->dim, hd = c->head_dim;
    float *x = calloc((size_t)n * d, sizeof(float)), *tmp = malloc((size_t)d * sizeof(float));
    float *q = malloc((size_t)n * d * sizeof(float)), *k = malloc((size_t)n * d * sizeof(float));
    float *v = malloc((size_t)n * d * sizeof(float)), *att = malloc((size_t)n * d * sizeof(float));
    float *h = malloc((size_t)c->hidden_dim * sizeof(float)), *sc = malloc((size_t)n * sizeof(float));
    for (int t = 0; t < n; t++) {
        float *xt = x + (size_t)t * d;
        row_f32(&m->tok_embd, ids[t], xt);
        row_f32(&m->pos_embd, t, tmp);
        for (int i = 0; i < d; i++)
            xt[i] += tmp[i];
        row_f32(&m->type_embd, types != NULL ? types[t] : 0, tmp);
        for (int i = 0; i < d; i++)
            xt[i] += tmp[i];
        ref_ln(xt, d, &m->embd_norm, &m->embd_norm_b, c->norm_eps);
    }
    for (int l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &m->layers[l];
        for (int t = 0; t < n; t++) {
            ref_linear(&L->wq, &L->bq, x + (size_t)t * d, q + (size_t)t * d);
            ref_linear(&L->wk, &L->bk, x + (size_t)t * d, k + (size_t)t * d);
            ref_linear(&L->wv, &L->bv, x + (size_t)t * d, v + (size_t)t * d);
        }
        for (int t = 0; t < n; t++)
            for (int hh = 0; hh < c->n_heads; hh++) {
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j < n; j++) { /* no mask: the whole input */
                    double s = 0.0;
                    for (int i = 0; i < hd; i++)
                        s += (double)q[(size_t)t * d + hh * hd + i] * k[(size_t)j * d + hh * hd + i];
                    sc[j] = (float)(s / sqrt((double)hd));
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                for (int j = 0; j < n; j++)
                    sum += exp(sc[j] - mx);
                for (int i = 0; i < hd; i++) {
                    double o = 0.0;
                    for (int j = 0; j < n; j++)
                        o += exp(sc[j] - mx) / sum * v[(size_t)j * d + hh * hd + i];
                    att[(size_t)t * d + hh * hd + i] = (float)o;
                }
            }
        for (int t = 0; t < n; t++) {
            float *xt = x + (size_t)t * d;
            ref_linear(&L->wo, &L->bo, att + (size_t)t * d, tmp);
            for (int i = 0; i < d; i++)
                xt[i] += tmp[i];
            ref_ln(xt, d, &L->attn_norm, &L->attn_norm_b, c->norm_eps);
            ref_linear(&L->w_up, &L->b_up, xt, h);
            for (int i = 0; i < c->hidden_dim; i++)
                h[i] = 0.5f * h[i] * (1.0f + erff(h[i] / sqrtf(2.0f)));
            ref_linear(&L->w_down, &L->b_down, h, tmp);
            for (int i = 0; i < d; i++)
                xt[i] += tmp[i];
            ref_ln(xt, d, &L->ffn_norm, &L->ffn_norm_b, c->norm_eps);
        }
    }
    free(tmp); free(q); free(k); free(v); free(att); free(h); free(sc);
    return x;
}

static float *ref_forward(const llm_model *m, const int32_t *ids, int n)
{
    return ref_forward_types(m, ids, NULL, n);
}

/* One step over the inputs (each at positions 0..n-1, blocks bs tokens apart in a fresh cache), every row
 * wanted as a hidden state; rows[dim] per token into out (in batch order). 0 ok. */
static int run_step(llm_backend *be, const int32_t *const *ids, const int *n, int n_in, float *out, llm_err *err)
{
    const llm_model *m = be->model;
    int total = 0, bs = be->opts.block_size;
    for (int i = 0; i < n_in; i++)
        total += n[i];
    int32_t *tok = malloc((size_t)total * sizeof(int32_t)), *pos = malloc((size_t)total * sizeof(int32_t));
    int32_t *seq = malloc((size_t)total * sizeof(int32_t)), *blocks = malloc(64 * sizeof(int32_t));
    uint8_t *want = malloc((size_t)total);
    llm_seq_view views[8];
    float *logits = malloc((size_t)total * (size_t)m->cfg.vocab_size * sizeof(float));
    int t = 0, nb = 0;
    for (int i = 0; i < n_in; i++) {
        views[i].blocks = blocks + nb;
        views[i].n_blocks = (n[i] + bs - 1) / bs;
        for (int b = 0; b < views[i].n_blocks; b++, nb++)
            blocks[nb] = nb;
        for (int p = 0; p < n[i]; p++, t++) {
            tok[t] = ids[i][p];
            pos[t] = p;
            seq[t] = i;
            want[t] = LLM_WANT_HIDDEN;
        }
    }
    llm_batch b = { .n_tokens = total, .tokens = tok, .pos = pos, .seq = seq, .want_logits = want,
                    .n_seqs = n_in, .seqs = views };
    int rc = be->ops->forward(be, &b, logits, err);
    for (int r = 0; r < total && rc == 0; r++)
        memcpy(out + (size_t)r * m->cfg.dim, logits + (size_t)r * m->cfg.vocab_size, m->cfg.dim * sizeof(float));
    free(tok); free(pos); free(seq); free(blocks); free(want); free(logits);
    return rc;
}

static float max_diff(const float *a, const float *b, size_t n)
{
    float d = 0.0f;
    for (size_t i = 0; i < n; i++)
        d = fabsf(a[i] - b[i]) > d ? fabsf(a[i] - b[i]) : d;
    return d;
}

static const int32_t in_a[40] = { 2, 40, 41, 30, 12, 77, 90, 5, 6, 7, 8, 9, 10, 11, 100, 101, 102, 103, 104, 105,
                                  200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215,
                                  216, 217, 218, 3 };
static const int32_t in_b[9] = { 2, 150, 151, 152, 153, 154, 155, 156, 3 };

static void test_forward(const char *path)
{
    llm_err err = { { 0 } };
    llm_model *m = llm_model_load(path, NULL, &err);
    ok(m != NULL, "load tiny-bert: %s", err.msg);
    if (m == NULL)
        return;
    ok(m->cfg.encoder && m->cfg.n_types == 2 && m->pooling == LLM_POOL_MEAN && m->tok != NULL,
       "an encoder: 2 token types, mean pooling, a tokenizer");
    llm_backend_opts o = { .threads = 2, .kv_blocks = 16, .block_size = 16 };
    llm_backend *be = llm_backend_create("cpu", m, &o, &err);
    ok(be != NULL, "cpu backend: %s", err.msg);
    if (be == NULL) {
        llm_model_free(m);
        return;
    }
    int d = m->cfg.dim;
    float *ra = ref_forward(m, in_a, 40), *rb = ref_forward(m, in_b, 9);
    float *both = malloc((size_t)49 * d * sizeof(float)), *alone = malloc((size_t)49 * d * sizeof(float));
    const int32_t *ids[2] = { in_a, in_b };
    int ns[2] = { 40, 9 };
    ok(run_step(be, ids, ns, 2, both, &err) == 0, "a step of two inputs: %s", err.msg);
    float da = max_diff(both, ra, (size_t)40 * d), db = max_diff(both + (size_t)40 * d, rb, (size_t)9 * d);
    ok(da < 2e-4f && db < 2e-4f, "hidden states = the reference forward (max diff %g, %g)", (double)da, (double)db);
    ok(run_step(be, ids, ns, 1, alone, &err) == 0 && run_step(be, ids + 1, ns + 1, 1, alone + (size_t)40 * d,
                                                               &err) == 0, "each input alone");
    ok(memcmp(both, alone, (size_t)49 * d * sizeof(float)) == 0, "two inputs in one step = each alone (bit for bit)");
    /* the first token's state depends on the last token (no causal mask) */
    int32_t changed[9];
    memcpy(changed, in_b, sizeof(changed));
    changed[7] = 160;
    const int32_t *idc[1] = { changed };
    float *c9 = malloc((size_t)9 * d * sizeof(float));
    ok(run_step(be, idc, ns + 1, 1, c9, &err) == 0 && max_diff(c9, alone + (size_t)40 * d, (size_t)d) > 1e-3f,
       "position 0 sees a later token");
    llm_batch gen = { 0 };
    int32_t t0 = 2, p0 = 0, s0 = 0, blk = 0;
    uint8_t w1 = 1;
    llm_seq_view v = { &blk, 1, NULL };
    gen = (llm_batch){ .n_tokens = 1, .tokens = &t0, .pos = &p0, .seq = &s0, .want_logits = &w1, .n_seqs = 1,
                       .seqs = &v };
    float *lg = malloc((size_t)m->cfg.vocab_size * sizeof(float));
    err.msg[0] = 0;
    ok(be->ops->forward(be, &gen, lg, &err) == -1 && strstr(err.msg, "no language-model head") != NULL,
       "logits refused: %s", err.msg);
    int32_t p1 = 1; /* a second chunk of an input: refused (its first tokens would not have seen it) */
    uint8_t wh = LLM_WANT_HIDDEN;
    gen = (llm_batch){ .n_tokens = 1, .tokens = &t0, .pos = &p1, .seq = &s0, .want_logits = &wh, .n_seqs = 1,
                       .seqs = &v };
    err.msg[0] = 0;
    ok(be->ops->forward(be, &gen, lg, &err) == -1 && strstr(err.msg, "whole in one step") != NULL,
       "an input not whole in its step refused: %s", err.msg);
    free(lg); free(c9); free(ra); free(rb); free(both); free(alone);
    llm_backend_free(be);
    llm_model_free(m);
}

/* Quantised weights: near the F32 model's states (same seed, same values before rounding). */
static void test_dtypes(const char *f32_path)
{
    llm_err err = { { 0 } };
    llm_model *mf = llm_model_load(f32_path, NULL, &err);
    llm_dtype types[3] = { LLM_F16, LLM_Q8_0, LLM_Q4_0 };
    float tol[3] = { 0.02f, 0.15f, 1.0f };
    for (int i = 0; i < 3 && mf != NULL; i++) {
        char path[] = "/tmp/test_bert_qXXXXXX";
        int fd = mkstemp(path);
        close(fd);
        int rc = llm_model_generate("tiny-bert", types[i], 11, path, "../shared", &err);
        llm_model *m = rc == 0 ? llm_model_load(path, NULL, &err) : NULL;
        llm_backend_opts o = { .threads = 2, .kv_blocks = 16, .block_size = 16 };
        llm_backend *be = m != NULL ? llm_backend_create("cpu", m, &o, &err) : NULL;
        float *ref = ref_forward(mf, in_a, 40), *got = malloc((size_t)40 * mf->cfg.dim * sizeof(float));
        const int32_t *ids[1] = { in_a };
        int n = 40;
        int ran = be != NULL && run_step(be, ids, &n, 1, got, &err) == 0;
        float dd = ran ? max_diff(got, ref, (size_t)40 * mf->cfg.dim) : INFINITY;
        ok(ran && dd < tol[i], "%s weights: hidden states within %g of F32's (%g) %s", llm_dtype_name(types[i]),
           (double)tol[i], (double)dd, err.msg);
        free(ref); free(got);
        llm_backend_free(be);
        llm_model_free(m);
        unlink(path);
    }
    llm_model_free(mf);
}

typedef struct {
    float emb[3][256];
    int   got[3], err[3];
} sched_res;

static void on_out(void *ctx, const llm_sched_output *o)
{
    sched_res *r = ctx;
    if (o->id >= 3)
        return;
    if (o->finish == LLM_SCHED_FINISH_ERROR)
        r->err[o->id] = 1;
    if (o->embedding != NULL) {
        memcpy(r->emb[o->id], o->embedding, (size_t)o->n_embd * sizeof(float));
        r->got[o->id] = 1;
    }
}

static void test_scheduler(const char *path)
{
    llm_err err = { { 0 } };
    llm_model *m = llm_model_load(path, NULL, &err);
    llm_backend_opts o = { .threads = 2, .kv_blocks = 16, .block_size = 16 };
    llm_backend *be = m != NULL ? llm_backend_create("cpu", m, &o, &err) : NULL;
    if (be == NULL) {
        ok(0, "scheduler model: %s", err.msg);
        llm_model_free(m);
        return;
    }
    int d = m->cfg.dim;
    float *ra = ref_forward(m, in_a, 40), *rb = ref_forward(m, in_b, 9);
    sched_res res;
    memset(&res, 0, sizeof(res));
    /* a step of 16 tokens: the 40-token input passes it alone (a one-step input is never chunked) */
    llm_sched_config c = { .max_batch_size = 4, .max_batched_tokens = 64, .on_output = on_out, .cb_ctx = &res };
    llm_sched *s = llm_sched_create(be, &c, &err);
    ok(s != NULL, "scheduler: %s", err.msg);
    if (s == NULL)
        goto out;
    ok(llm_sched_set_knobs(s, 0, -1, 16) == 0, "step budget lowered to 16 tokens");
    llm_sched_request q = { .id = 0, .prompt = in_a, .n_prompt = 40, .max_tokens = 1, .embed = LLM_SCHED_EMBED_MEAN };
    llm_sampling_defaults(&q.sampling);
    ok(llm_sched_submit(s, &q, &err) == 0, "mean-pooled request: %s", err.msg);
    q.id = 1, q.prompt = in_b, q.n_prompt = 9, q.embed = LLM_SCHED_EMBED_CLS;
    ok(llm_sched_submit(s, &q, &err) == 0, "CLS-pooled request: %s", err.msg);
    q.id = 2, q.embed = LLM_SCHED_EMBED_NONE;
    err.msg[0] = 0;
    ok(llm_sched_submit(s, &q, &err) != 0 && strstr(err.msg, "does not generate") != NULL, "generation refused: %s",
       err.msg);
    int32_t *longer = calloc(80, sizeof(int32_t));
    q.prompt = longer, q.n_prompt = 80, q.embed = LLM_SCHED_EMBED_MEAN;
    err.msg[0] = 0;
    ok(llm_sched_submit(s, &q, &err) != 0 && strstr(err.msg, "one step") != NULL, "longer than a step refused: %s",
       err.msg);
    free(longer);
    /* CLS pooling on a decoder is one step too: longer than a step is refused, not left waiting */
    llm_model *dm = llm_model_load("../shared/models/stories260K/stories260K.gguf", NULL, &err);
    llm_backend *dbe = dm != NULL ? llm_backend_create("cpu", dm, &o, &err) : NULL;
    llm_sched_config dc = { .max_batch_size = 2, .max_batched_tokens = 8 };
    llm_sched *ds = dbe != NULL ? llm_sched_create(dbe, &dc, &err) : NULL;
    int32_t ten[10] = { 1, 403, 407, 261, 378, 1, 403, 407, 261, 378 };
    llm_sched_request dq = { .id = 9, .prompt = ten, .n_prompt = 10, .max_tokens = 1, .embed = LLM_SCHED_EMBED_CLS };
    llm_sampling_defaults(&dq.sampling);
    err.msg[0] = 0;
    ok(ds != NULL && llm_sched_submit(ds, &dq, &err) != 0 && strstr(err.msg, "one step") != NULL,
       "a decoder's CLS-pooled input longer than a step refused: %s", err.msg);
    llm_sched_destroy(ds);
    llm_backend_free(dbe);
    llm_model_free(dm);
    for (int i = 0; i < 20 && llm_sched_step(s) == 1; i++)
        ;
    float mean[256] = { 0 };
    for (int t = 0; t < 40; t++)
        for (int i = 0; i < d; i++)
            mean[i] += ra[(size_t)t * d + i] / 40.0f;
    ok(res.got[0] && max_diff(res.emb[0], mean, (size_t)d) < 2e-4f, "mean pooling = the reference's mean (%g)",
       (double)max_diff(res.emb[0], mean, (size_t)d));
    ok(res.got[1] && max_diff(res.emb[1], rb, (size_t)d) < 2e-4f, "CLS pooling = the reference's first state");
    llm_sched_destroy(s);
out:
    free(ra); free(rb);
    llm_backend_free(be);
    llm_model_free(m);
}

/* A cross-encoder (tiny-bert-rerank: pooler, tanh, one output): the score of [CLS] query [SEP] document [SEP]
 * through the scheduler (CLS pooling, as serve runs a rank request) and llm_model_rank_apply, against the
 * reference forward with the document's tokens as type 1 and the head written out here; with every token of
 * type 0 (what llama.cpp feeds BERT) the score differs. */
static void test_cross_encoder(void)
{
    char path[] = "/tmp/test_bert_rrXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    llm_err err = { { 0 } };
    int rc = llm_model_generate("tiny-bert-rerank", LLM_F32, 13, path, "../shared", &err);
    llm_model *m = rc == 0 ? llm_model_load(path, NULL, &err) : NULL;
    ok(m != NULL && m->n_cls == 1 && m->cls_dense != NULL && m->cls_b != NULL && m->cfg.sep_id == 3,
       "tiny-bert-rerank: a one-output head with a pooler; [SEP] is 3 %s", err.msg);
    llm_backend_opts o = { .threads = 2, .kv_blocks = 16, .block_size = 16 };
    llm_backend *be = m != NULL ? llm_backend_create("cpu", m, &o, &err) : NULL;
    if (be == NULL) {
        llm_model_free(m);
        unlink(path);
        return;
    }
    static const int32_t pair[12] = { 2, 25, 38, 40, 3, 146, 62, 11, 29, 38, 230, 3 };
    int types[12], zeros[12] = { 0 }, d = m->cfg.dim;
    for (int t = 0; t < 12; t++)
        types[t] = t > 4; /* after the first [SEP] */
    sched_res res;
    memset(&res, 0, sizeof(res));
    llm_sched_config c = { .max_batch_size = 4, .max_batched_tokens = 64, .on_output = on_out, .cb_ctx = &res };
    llm_sched *s = llm_sched_create(be, &c, &err);
    llm_sched_request q = { .id = 0, .prompt = pair, .n_prompt = 12, .max_tokens = 1, .embed = LLM_SCHED_EMBED_CLS };
    llm_sampling_defaults(&q.sampling);
    ok(s != NULL && llm_sched_submit(s, &q, &err) == 0, "rank request: %s", err.msg);
    for (int i = 0; s != NULL && i < 10 && llm_sched_step(s) == 1; i++)
        ;
    llm_sched_destroy(s);
    float got = NAN, want[2];
    if (res.got[0])
        llm_model_rank_apply(m, res.emb[0], &got);
    for (int k = 0; k < 2; k++) { /* the head from the definition: tanh(Wp h + bp), then w . p + b */
        float *h = ref_forward_types(m, pair, k == 0 ? types : zeros, 12);
        double out = m->cls_b[0];
        for (int r = 0; r < d; r++) {
            double a = m->cls_dense_b[r];
            for (int i = 0; i < d; i++)
                a += (double)m->cls_dense[(size_t)r * d + i] * h[i];
            out += (double)m->cls[r] * tanh(a);
        }
        want[k] = (float)out;
        free(h);
    }
    ok(fabsf(got - want[0]) < 1e-4f * (1.0f + fabsf(want[0])), "score %g = the reference's %g (document as type 1)",
       (double)got, (double)want[0]);
    ok(fabsf(want[0] - want[1]) > 1e-3f, "types matter: %g with every token of type 0", (double)want[1]);
    llm_backend_free(be);
    llm_model_free(m);
    unlink(path);
}

/* A hostile file: bytes of the metadata and tensor table (the first 8 KiB) changed at random, 300 times:
 * each load fails with a message or gives a model that passes its checks; nothing crashes (ASan in
 * `make san`). */
static void test_mutated(const char *path)
{
    FILE *f = fopen(path, "rb");
    static unsigned char buf[1 << 20], mut[1 << 20];
    size_t n = f != NULL ? fread(buf, 1, sizeof(buf), f) : 0;
    if (f != NULL)
        fclose(f);
    char tmp[] = "/tmp/test_bert_mutXXXXXX";
    int fd = mkstemp(tmp);
    close(fd);
    uint64_t s = 12345;
    int refused = 0, loaded = 0, bad_ids = 0;
    for (int i = 0; i < 300 && n > 8192; i++) {
        memcpy(mut, buf, n);
        for (int k = 0; k < 4; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            mut[(s >> 33) % 8192] = (unsigned char)(s >> 17);
        }
        FILE *o = fopen(tmp, "wb");
        fwrite(mut, 1, n, o);
        fclose(o);
        llm_err err = { { 0 } };
        llm_model *m = llm_model_load(tmp, NULL, &err);
        if (m == NULL)
            refused += err.msg[0] != 0;
        else
            loaded++;
        if (m != NULL && m->tok != NULL) { /* a mutated vocabulary (or charsmap) still tokenizes in bounds */
            static const char text[] = "Hello  \xef\xbc\xa8\xe2\x91\xa0 caf\xc3\xa9 e\xcc\x81 [CLS] <s> zz\xff\t";
            int32_t *ids = NULL;
            int nt = llm_tok_encode(m->tok, text, sizeof(text) - 1, LLM_TOK_ADD_BOS | LLM_TOK_PARSE_SPECIAL, &ids);
            for (int k = 0; k < nt; k++)
                bad_ids += ids[k] < 0 || ids[k] >= llm_tok_vocab_size(m->tok);
            free(ids);
        }
        llm_model_free(m);
    }
    unlink(tmp);
    ok(n > 8192 && refused + loaded == 300 && bad_ids == 0,
       "300 mutated files: %d refused with a message, %d loaded (each tokenizes a text, ids in range)", refused,
       loaded);
}

/* tiny-modernbert's file written again with one change (a key replaced or left out, or a tensor left out) and
 * loaded: each refused with a message naming what is wrong; the unchanged copy loads. */
typedef struct {
    const char *key;  /* the key replaced (by kind: 'u' u32, 'f' f32, 's' string, 'b' bool), or NULL */
    char kind;
    uint32_t u;
    float f;
    const char *s;
    const char *drop; /* a tensor left out, or NULL */
    const char *want; /* in the message */
} mb_case;

static void test_modernbert_refusals(void)
{
    char src[] = "/tmp/test_mbXXXXXX", dst[] = "/tmp/test_mb2XXXXXX";
    close(mkstemp(src));
    close(mkstemp(dst));
    llm_err err = { { 0 } };
    ok(llm_model_generate("tiny-modernbert", LLM_F32, 11, src, "../shared", &err) == 0, "gen-model tiny-modernbert: %s",
       err.msg);
    gguf_ctx *g = gguf_open(src, &err);
    static const mb_case cases[] = {
        { NULL, 0, 0, 0, NULL, NULL, NULL },
        { "modern-bert.attention.sliding_window_pattern", 'u', 0, 0, NULL, NULL, "sliding_window_pattern" },
        { "modern-bert.attention.sliding_window", 'u', 0x7fffffff, 0, NULL, NULL, "bad sliding window" },
        { "modern-bert.rope.freq_base", 'f', 0, NAN, NULL, NULL, "rope.freq_base" },
        { "modern-bert.rope.freq_base_swa", 'f', 0, 0.0f, NULL, NULL, "freq_base_swa" },
        { "modern-bert.attention.layer_norm_epsilon", 'f', 0, -1.0f, NULL, NULL, "layer_norm_epsilon" },
        { "modern-bert.hidden_activation", 's', 0, 0, "relu", NULL, "\"relu\" is not supported" },
        { "modern-bert.pooling_type", 'u', 4, 0, NULL, NULL, "reranker" },
        { "modern-bert.attention.causal", 'b', 1, 0, NULL, NULL, "causal" },
        { "modern-bert.feed_forward_length", 'u', 100, 0, NULL, NULL, "ffn_up" },
        { "modern-bert.attention.head_count", 'u', 5, 0, NULL, NULL, "bad modern-bert config" },
        { NULL, 0, 0, 0, NULL, "blk.1.attn_norm.weight", "blk.1.attn_norm.weight" },
        { NULL, 0, 0, 0, NULL, "token_embd_norm.weight", "token_embd_norm.weight" },
        { NULL, 0, 0, 0, NULL, "blk.2.attn_qkv.weight", "blk.2.attn_qkv.weight" },
    };
    for (size_t c = 0; g != NULL && c < sizeof(cases) / sizeof(cases[0]); c++) {
        const mb_case *k = &cases[c];
        gguf_writer *w = gguf_writer_new();
        for (uint64_t i = 0; i < g->n_kv; i++) {
            const gguf_kv *kv = &g->kv[i];
            if (k->key == NULL || strlen(k->key) != kv->key.len || memcmp(k->key, kv->key.ptr, kv->key.len) != 0)
                gguf_w_kv_copy(w, kv);
        }
        if (k->kind == 'u')
            gguf_w_u32(w, k->key, k->u);
        else if (k->kind == 'f')
            gguf_w_f32(w, k->key, k->f);
        else if (k->kind == 's')
            gguf_w_str(w, k->key, k->s);
        else if (k->kind == 'b')
            gguf_w_bool(w, k->key, (int)k->u);
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const gguf_tensor *t = &g->tensors[i];
            char name[96];
            snprintf(name, sizeof(name), "%.*s", (int)t->name.len, t->name.ptr);
            if (k->drop == NULL || strcmp(name, k->drop) != 0)
                gguf_w_tensor(w, name, (llm_dtype)t->type, t->n_dims, t->ne, t->data);
        }
        llm_err e = { { 0 } };
        int wrote = gguf_writer_write(w, dst, &e) == 0;
        gguf_writer_free(w);
        llm_model *m = wrote ? llm_model_load(dst, NULL, &e) : NULL;
        if (k->want == NULL)
            ok(m != NULL, "tiny-modernbert copied unchanged: loads (%s)", e.msg);
        else
            ok(wrote && m == NULL && strstr(e.msg, k->want) != NULL, "%s%s: refused: %s", k->key ? k->key : "without ",
               k->key ? "" : k->drop, e.msg);
        llm_model_free(m);
    }
    gguf_close(g);
    unlink(src);
    unlink(dst);
}

int main(void)
{
    char path[] = "/tmp/test_bertXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    llm_err err = { { 0 } };
    ok(llm_model_generate("tiny-bert", LLM_F32, 11, path, "../shared", &err) == 0, "gen-model tiny-bert: %s",
       err.msg);
    test_forward(path);
    test_dtypes(path);
    test_scheduler(path);
    test_mutated(path);
    test_cross_encoder();
    test_modernbert_refusals();
    /* hostile files of the other encoders (their vectors against llama.cpp: tests/parity/bert.t): nomic-bert
     * (fused q|k|v, SwiGLU, rope, no biases), XLM-RoBERTa (one token type, a Unigram vocabulary and its
     * precompiled charsmap in the metadata the mutations hit), jina-bert-v2 (ALiBi, a GELU-gated FFN) */
    static const char *const others[3] = { "tiny-nomic-bert", "tiny-xlm-r", "tiny-jina-bert" };
    for (int i = 0; i < 3; i++) {
        char opath[] = "/tmp/test_encXXXXXX";
        fd = mkstemp(opath);
        close(fd);
        ok(llm_model_generate(others[i], LLM_F32, 11, opath, "../shared", &err) == 0, "gen-model %s: %s", others[i],
           err.msg);
        test_mutated(opath);
        unlink(opath);
    }
    /* ALiBi's slopes as the paper gives them: 2^-1 .. 2^-8 for eight heads; for twelve those eight then 2^-0.5,
     * 2^-1.5, 2^-2.5, 2^-3.5 (the odd ones of sixteen heads') */
    llm_config ac = { .n_heads = 8, .alibi_max_bias = 8.0f };
    int slopes_ok = 1;
    for (int h = 0; h < 8; h++)
        slopes_ok &= fabsf(llm_alibi_slope(&ac, h) - powf(2.0f, (float)-(h + 1))) < 1e-7f;
    ac.n_heads = 12;
    for (int h = 0; h < 12; h++)
        slopes_ok &= fabsf(llm_alibi_slope(&ac, h) - powf(2.0f, h < 8 ? (float)-(h + 1) : -0.5f - (float)(h - 8))) <
                     1e-7f;
    ok(slopes_ok, "ALiBi slopes for 8 and 12 heads");
    /* the decoders stay decoders */
    llm_model *m = llm_model_load("../shared/models/stories260K/stories260K.gguf", NULL, &err);
    ok(m != NULL && !m->cfg.encoder, "a decoder is not an encoder");
    llm_model_free(m);
    unlink(path);
    return done_testing();
}
