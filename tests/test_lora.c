/* LoRA adapters merged at load (engine/lora.c) on the real stories260K GGUF (F32, and a Q8_0 copy): a GGUF
 * adapter written here adds exactly scale * alpha / r * B A to the matrices it adapts (the others untouched,
 * the F32 ones kept F32, the Q8_0 ones re-quantised to Q8_0 within its rounding); q/k rows of an adapter in
 * another rope layout are permuted; bad adapters (wrong shape, one tensor of a pair, not an adapter, nothing
 * this model has) are refused with the model left usable. Under ASan in `make san`: nothing leaks. The
 * agreement with llama.cpp is tests/parity/lora.t's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "lora.h"
#include "model.h"
#include "model_write.h"
#include "tap.h"

#define S260 "../shared/models/stories260K/stories260K.gguf"

static float rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return ((float)((*s >> 8) & 0xffff) / 65535.0f - 0.5f) * 0.2f;
}

/* An adapter of layer 1's wq (rank 2) and layer 3's ffn_down (rank 3) into path; A, B returned for checks.
 * arch: general.architecture; bad: 0 good, 1 wrong width, 2 lora_b missing, 3 a layer the model lacks. */
typedef struct { float a1[2 * 64], b1[64 * 2], a3[3 * 172], b3[64 * 3]; } pairs;
static int write_adapter(const char *path, const char *arch, int bad, pairs *p)
{
    unsigned s = 7;
    for (size_t i = 0; i < sizeof(*p) / sizeof(float); i++)
        ((float *)p)[i] = rnd(&s);
    gguf_writer *w = gguf_writer_new();
    gguf_w_str(w, "general.architecture", arch);
    gguf_w_str(w, "general.type", "adapter");
    gguf_w_str(w, "adapter.type", "lora");
    gguf_w_f32(w, "adapter.lora.alpha", 4.0f);
    uint64_t na1[2] = { bad == 1 ? 32 : 64, 2 }, nb1[2] = { 2, 64 }, na3[2] = { 172, 3 }, nb3[2] = { 3, 64 };
    gguf_w_tensor(w, bad == 3 ? "blk.7.attn_q.weight.lora_a" : "blk.1.attn_q.weight.lora_a", LLM_F32, 2, na1, p->a1);
    gguf_w_tensor(w, bad == 3 ? "blk.7.attn_q.weight.lora_b" : "blk.1.attn_q.weight.lora_b", LLM_F32, 2, nb1, p->b1);
    gguf_w_tensor(w, "blk.3.ffn_down.weight.lora_a", LLM_F32, 2, na3, p->a3);
    if (bad != 2)
        gguf_w_tensor(w, "blk.3.ffn_down.weight.lora_b", LLM_F32, 2, nb3, p->b3);
    llm_err err = { { 0 } };
    int rc = gguf_writer_write(w, path, &err);
    gguf_writer_free(w);
    return rc;
}

/* max |W'[r][c] - (W[r][c] + s sum_k B[r][k] A[k][c])| over an F32 matrix; perm maps W' rows to B rows. */
static double merge_err(const llm_tensor *after, const llm_tensor *before, const float *a, const float *b, int r,
                        float s, const int *perm)
{
    int rows = (int)before->ne[1], cols = (int)before->ne[0];
    double worst = 0.0;
    for (int i = 0; i < rows; i++)
        for (int c = 0; c < cols; c++) {
            double d = 0.0;
            for (int k = 0; k < r; k++)
                d += (double)b[(perm ? perm[i] : i) * r + k] * a[k * cols + c];
            double want = ((const float *)before->data)[i * cols + c] + s * d;
            double got = ((const float *)after->data)[i * cols + c];
            worst = fmax(worst, fabs(got - want));
        }
    return worst;
}

int main(void)
{
    if (access(S260, R_OK) != 0) {
        printf("1..0 # SKIP %s missing\n", S260);
        return 0;
    }
    char dir[64], path[128], q8[128];
    snprintf(dir, sizeof(dir), "/tmp/test_lora_%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(path, sizeof(path), "%s/a.gguf", dir);
    llm_err err = { { 0 } };
    pairs p;

    /* 1. exact merge on F32, llama layout (no permutation) */
    ok(write_adapter(path, "llama", 0, &p) == 0, "adapter written");
    llm_model *base = llm_model_load(S260, NULL, &err), *m = llm_model_load(S260, NULL, &err);
    ok(base != NULL && m != NULL, "stories260K loaded twice");
    if (base == NULL || m == NULL)
        return done_testing();
    ok(llm_lora_apply(m, path, 0.5f, &err) == 0, "adapter applied at scale 0.5: %s", err.msg);
    float s1 = 0.5f * 4.0f / 2.0f, s3 = 0.5f * 4.0f / 3.0f; /* scale * alpha / r */
    ok(m->layers[1].wq.type == LLM_F32 &&
       merge_err(&m->layers[1].wq, &base->layers[1].wq, p.a1, p.b1, 2, s1, NULL) < 1e-6,
       "layer 1 wq == W + scale * alpha / 2 * B A, still F32");
    ok(merge_err(&m->layers[3].w_down, &base->layers[3].w_down, p.a3, p.b3, 3, s3, NULL) < 1e-6,
       "layer 3 ffn_down == W + scale * alpha / 3 * B A");
    ok(memcmp(m->layers[0].wq.data, base->layers[0].wq.data, 64 * 64 * 4) == 0, "layer 0 wq untouched");
    ok(memcmp(m->layers[3].w_gate.data, base->layers[3].w_gate.data, 172 * 64 * 4) == 0, "layer 3 ffn_gate untouched");
    llm_model_free(m);

    /* 2. an adapter in Hugging Face's q/k layout (a qwen2 GGUF adapter) on llama's pairs: B's rows permuted */
    ok(write_adapter(path, "qwen2", 0, &p) == 0, "adapter in the other rope layout written");
    m = llm_model_load(S260, NULL, &err);
    ok(m != NULL && llm_lora_apply(m, path, 1.0f, &err) == 0, "applied: %s", err.msg);
    int perm[64];
    for (int h = 0; h < 8; h++) /* head_dim 8: llama.cpp's row 2i + j is Hugging Face's j * 4 + i */
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
                perm[h * 8 + 2 * i + j] = h * 8 + j * 4 + i;
    ok(m != NULL && merge_err(&m->layers[1].wq, &base->layers[1].wq, p.a1, p.b1, 2, 2.0f, perm) < 1e-6,
       "q rows permuted to the model's rope pairs");
    ok(m != NULL && merge_err(&m->layers[3].w_down, &base->layers[3].w_down, p.a3, p.b3, 3, 4.0f / 3.0f, NULL) < 1e-6,
       "ffn_down rows as they are");
    llm_model_free(m);

    /* 3. a Q8_0 base: the merged matrices re-quantised to Q8_0, within its rounding */
    snprintf(q8, sizeof(q8), "%s/q8.gguf", dir);
    ok(llm_model_save_gguf(base, LLM_Q8_0, q8, &err) == 0, "q8_0 copy written");
    ok(write_adapter(path, "llama", 0, &p) == 0, "adapter written again");
    llm_model *bq = llm_model_load(q8, NULL, &err);
    m = llm_model_load(q8, NULL, &err);
    ok(m != NULL && bq != NULL && llm_lora_apply(m, path, 1.0f, &err) == 0, "applied to the q8_0 model: %s", err.msg);
    if (m != NULL && bq != NULL) {
        /* both dequantised: merged == base + B A up to one Q8_0 rounding (half a step of the row's block) */
        float *deq[2] = { malloc(64 * 64 * sizeof(float)), malloc(64 * 64 * sizeof(float)) };
        const llm_tensor *src[2] = { &m->layers[1].wq, &bq->layers[1].wq };
        for (int i = 0; i < 2; i++)
            for (int r = 0; r < 64; r++)
                llm_row_to_f32(src[i]->type, (const char *)src[i]->data + r * llm_dtype_row_bytes(src[i]->type, 64),
                               deq[i] + r * 64, 64);
        /* the merged blocks' own steps: every element within half of its block's */
        double worst = 0.0;
        const llm_block_q8_0 *blk = (const llm_block_q8_0 *)src[0]->data;
        for (int r = 0; r < 64 && src[0]->type == LLM_Q8_0; r++)
            for (int c = 0; c < 64; c++) {
                double want = deq[1][r * 64 + c];
                for (int k = 0; k < 2; k++)
                    want += 2.0 * p.b1[r * 2 + k] * p.a1[k * 64 + c];
                double step = llm_fp16_to_f32(blk[r * 2 + c / 32].d);
                worst = fmax(worst, fabs(deq[0][r * 64 + c] - want) / step);
            }
        ok(src[0]->type == LLM_Q8_0 && worst <= 0.6, /* half a step, and the step itself rounded to fp16 */
           "q8_0 layer 1 wq: W + B A re-quantised to Q8_0 (max |diff| %.3f of its block's step)", worst);
        free(deq[0]);
        free(deq[1]);
    }
    llm_model_free(m);
    llm_model_free(bq);

    /* 4. refusals */
    const struct { int bad; const char *arch, *want; } cases[] = {
        { 1, "llama", "the adapter is" }, { 2, "llama", "needs both" }, { 3, "llama", "adapt nothing" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ok(write_adapter(path, cases[i].arch, cases[i].bad, &p) == 0, "bad adapter %d written", cases[i].bad);
        m = llm_model_load(S260, NULL, &err);
        err.msg[0] = '\0';
        ok(m != NULL && llm_lora_apply(m, path, 1.0f, &err) != 0 && strstr(err.msg, cases[i].want) != NULL,
           "bad adapter %d refused: %s", cases[i].bad, err.msg);
        llm_model_free(m);
    }
    m = llm_model_load(S260, NULL, &err);
    err.msg[0] = '\0';
    ok(m != NULL && llm_lora_apply(m, S260, 1.0f, &err) != 0 && strstr(err.msg, "not a LoRA adapter") != NULL,
       "a model given as the adapter refused: %s", err.msg);
    llm_model_free(m);

    llm_model_free(base);
    unlink(path);
    unlink(q8);
    rmdir(dir);
    return done_testing();
}
