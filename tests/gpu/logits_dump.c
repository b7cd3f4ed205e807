/* Logits of a token sequence from one backend, for comparisons with other
 * implementations (tests/gpu/hf_parity.py): reads int32 ids from --ids, runs
 * positions 0..P-D-1 as prefill chunks of --chunk and the last --decode D
 * positions one token per step (both code paths), and writes P rows of
 * vocab_size float32 logits to --out. --lora: a LoRA adapter merged first; --kv-cache-dtype as the engine's;
 * --no-defer 1: the model's conversions all made at load (as info and gen-model load it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cuda_loader.h"
#include "backend_util.h"
#include "lora.h"
#include "model.h"

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return def;
}

int main(int argc, char **argv)
{
    const char *model = arg(argc, argv, "--model", NULL), *ids_path = arg(argc, argv, "--ids", NULL);
    const char *out_path = arg(argc, argv, "--out", NULL), *bname = arg(argc, argv, "--backend", "cuda");
    int D = atoi(arg(argc, argv, "--decode", "16")), chunk = atoi(arg(argc, argv, "--chunk", "0"));
    if (model == NULL || ids_path == NULL || out_path == NULL) {
        fprintf(stderr, "usage: logits_dump --model PATH --ids FILE.i32 --out FILE.f32 [--decode 16] [--chunk N] "
                        "[--backend cuda|cpu] [--kv-cache-dtype auto|f16|f32|q8_0] [--lora ADAPTER [--lora-scale S]] [--no-defer 1]\n");
        return 2;
    }
    FILE *f = fopen(ids_path, "rb");
    if (f == NULL) {
        perror(ids_path);
        return 1;
    }
    int32_t ids[65536];
    int P = (int)fread(ids, sizeof(int32_t), 65536, f);
    fclose(f);
    if (P <= 0) {
        fprintf(stderr, "error: %s holds no ids\n", ids_path);
        return 1;
    }
    if (D < 0 || D > P)
        D = P;
    if (chunk <= 0)
        chunk = P;

    llm_err err = { { 0 } };
    /* as generate and serve; --no-defer 1: every conversion at load, as info and gen-model */
    unsigned flags = atoi(arg(argc, argv, "--no-defer", "0")) ? 0u : LLM_LOAD_DEFER_KQ;
    llm_model *m = llm_model_load_ex(model, NULL, flags, &err);
    const char *lora = arg(argc, argv, "--lora", NULL); /* a LoRA adapter merged in, as --lora does */
    if (m != NULL && lora != NULL && llm_lora_apply(m, lora, (float)atof(arg(argc, argv, "--lora-scale", "1")), &err)) {
        llm_model_free(m);
        m = NULL;
    }
    if (m == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    int V = m->cfg.vocab_size, bs = 16;
    llm_backend_opts o = { 0 };
    o.kv_dtype = llm_kv_dtype_parse(arg(argc, argv, "--kv-cache-dtype", "auto"));
    if (o.kv_dtype < 0) {
        fprintf(stderr, "error: --kv-cache-dtype must be auto, f16, f32 or q8_0\n");
        llm_model_free(m);
        return 2;
    }
    o.block_size = bs;
    o.kv_blocks = (P + bs - 1) / bs + 1;
    llm_backend *b = NULL;
    if (llm_backend_prepare(bname, m, &o, &err) != 0) { /* as generate and serve do */
        ;
    } else if (strcmp(bname, "cuda") == 0) {
        const llm_backend_ops *ops = llm_cuda_ops_load(&err);
        if (ops != NULL && (b = calloc(1, sizeof(*b))) != NULL) {
            b->ops = ops;
            b->model = m;
            b->opts = o;
            if (ops->init(b, &err) != 0) {
                free(b);
                b = NULL;
            }
        }
    } else {
        b = llm_backend_create(bname, m, &o, &err);
    }
    if (b == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        llm_model_free(m);
        return 1;
    }
    int32_t *table = malloc((size_t)o.kv_blocks * sizeof(int32_t)), *pos = malloc((size_t)P * sizeof(int32_t));
    int32_t *seq = calloc((size_t)P, sizeof(int32_t));
    uint8_t *want = malloc((size_t)P);
    float *logits = malloc((size_t)P * V * sizeof(float));
    if (!table || !pos || !seq || !want || !logits) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    for (int i = 0; i < o.kv_blocks; i++)
        table[i] = o.kv_blocks - 1 - i;
    llm_seq_view v = { table, o.kv_blocks, NULL };
    for (int i = 0; i < P; i++) {
        pos[i] = i;
        want[i] = 1;
    }
    int rc = 0;
    for (int s = 0; s < P && rc == 0;) {
        int n = s < P - D ? (P - D - s < chunk ? P - D - s : chunk) : 1;
        llm_batch bt = { n, ids + s, pos + s, seq, want, 1, &v };
        if (b->ops->forward(b, &bt, logits + (size_t)s * V, &err) != 0) {
            fprintf(stderr, "error: forward at position %d: %s\n", s, err.msg);
            rc = 1;
        }
        s += n;
    }
    if (rc == 0) {
        FILE *o_f = fopen(out_path, "wb");
        if (o_f == NULL || fwrite(logits, sizeof(float), (size_t)P * V, o_f) != (size_t)P * V || fclose(o_f) != 0) {
            perror(out_path);
            rc = 1;
        } else {
            fprintf(stderr, "wrote %d x %d logits (%d prefill, %d decode steps) to %s\n", P, V, P - D, D, out_path);
        }
    }
    free(table); free(pos); free(seq); free(want); free(logits);
    llm_backend_free(b);
    llm_model_free(m);
    return rc;
}
