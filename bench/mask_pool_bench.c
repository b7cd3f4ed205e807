/* Constrained decoding in the scheduler: N requests held to a JSON Schema (or JSON mode) decoded together,
 * with their masks made on the scheduler thread after each forward (--mask-threads 0) beside made by the
 * mask pool while the forward runs (1 and 2 threads). Same seeds, so the same tokens (checked: the run
 * fails if they differ); wall time from submit to the last token, best of reps. A model with a large
 * vocabulary and a small body makes the masks' share visible on a CPU (on a GPU the forward is that
 * short anyway).
 * Build: make build/libllm.a && cc -O2 -std=c11 -D_GNU_SOURCE -Iengine -Ishm bench/mask_pool_bench.c
 *          build/libllm.a -lcjson -lpcre2-8 -lhiredis -lpthread -lm -o build/mask_pool_bench
 * Run:   build/llm-engine gen-model --preset tiny-llama3 --dtype q8_0 --out build/tiny-llama3-q8_0.gguf
 *        build/mask_pool_bench [model=build/tiny-llama3-q8_0.gguf] [requests=16] [tokens=48] [reps=3] [backend=cpu]
 * (backend cuda: the CUDA backend, whose library the engine loads as `serve --backend cuda` does) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "model.h"
#include "scheduler.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const char *const SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":24},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},\"email\":{\"type\":\"string\",\"format\":\"email\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":4}},\"required\":[\"name\",\"age\",\"email\",\"tags\"]}";

/* One run: seconds, tokens out; the tokens go to out[n_req][n_tok] (-1 padded). */
static double run(llm_backend *be, const llm_json_vocab *v, int mask_threads, int json_mode, int n_req, int n_tok,
                  int32_t *out, long *tokens)
{
    llm_sched_config cfg = { 0 };
    cfg.json_vocab = v;
    cfg.mask_threads = mask_threads;
    cfg.max_batch_size = n_req;
    llm_err err = { { 0 } };
    llm_sched *s = llm_sched_create(be, &cfg, &err);
    if (s == NULL) {
        fprintf(stderr, "mask_pool_bench: %s\n", err.msg);
        exit(1);
    }
    for (int i = 0; i < n_req * n_tok; i++)
        out[i] = -1;
    int32_t prompt[8] = { 128000, 791, 1828, 374, 264, 1732, 439, 4823 };
    double t0 = now_s();
    for (int i = 0; i < n_req; i++) {
        llm_sched_request rq = { 0 };
        rq.id = (uint64_t)i;
        rq.prompt = prompt;
        rq.n_prompt = 8;
        llm_sampling_defaults(&rq.sampling);
        rq.sampling.temperature = 1.0f;
        rq.sampling.seed = 7 + (uint64_t)i;
        rq.max_tokens = n_tok;
        rq.json = json_mode;
        rq.schema = json_mode ? NULL : SCHEMA;
        rq.schema_len = json_mode ? 0 : strlen(SCHEMA);
        if (llm_sched_submit(s, &rq, &err) != 0) {
            fprintf(stderr, "mask_pool_bench: %s\n", err.msg);
            exit(1);
        }
    }
    int more = 1, got[256] = { 0 };
    *tokens = 0;
    while (more) {
        more = llm_sched_step(s) > 0;
        llm_sched_output o;
        while (llm_sched_next_output(s, &o))
            if (o.token >= 0 && o.id < 256 && got[o.id] < n_tok) {
                out[(int)o.id * n_tok + got[o.id]++] = o.token;
                (*tokens)++;
            }
    }
    double t = now_s() - t0;
    llm_sched_destroy(s);
    return t;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "build/tiny-llama3-q8_0.gguf";
    int n_req = argc > 2 ? atoi(argv[2]) : 16, n_tok = argc > 3 ? atoi(argv[3]) : 48, reps = argc > 4 ? atoi(argv[4]) : 3;
    const char *backend = argc > 5 ? argv[5] : "cpu";
    if (n_req < 1 || n_req > 256 || n_tok < 1 || reps < 1) {
        fprintf(stderr, "usage: mask_pool_bench [model] [requests 1..256] [tokens] [reps]\n");
        return 2;
    }
    llm_err err = { { 0 } };
    llm_model *m = llm_model_load(path, NULL, &err);
    if (m == NULL || m->tok == NULL) {
        fprintf(stderr, "mask_pool_bench: %s\n", m == NULL ? err.msg : "the model has no tokenizer");
        return 1;
    }
    llm_backend_opts bo = { 0 };
    bo.threads = 1;
    bo.block_size = 16;
    bo.kv_blocks = n_req * ((8 + n_tok) / 16 + 2);
    llm_backend *be = llm_backend_create(backend, m, &bo, &err);
    llm_json_vocab *v = llm_json_vocab_new(m->tok);
    int32_t *ref = malloc((size_t)n_req * (size_t)n_tok * sizeof(int32_t));
    int32_t *cur = malloc((size_t)n_req * (size_t)n_tok * sizeof(int32_t));
    if (be == NULL || v == NULL || ref == NULL || cur == NULL) {
        fprintf(stderr, "mask_pool_bench: %s\n", be == NULL ? err.msg : "out of memory");
        return 1;
    }
    printf("%d requests x up to %d tokens, %s (vocabulary %d), %s backend (CPU: 1 thread), best of %d\n", n_req, n_tok,
           path, m->cfg.vocab_size, backend, reps);
    printf("%-12s %14s %10s %12s %10s\n", "constraint", "mask threads", "tokens", "tokens/s", "vs 0");
    int bad = 0;
    for (int jm = 0; jm < 2; jm++) {
        double base = 0;
        for (int mt = 0; mt <= 2; mt++) {
            double best = 1e30;
            long tokens = 0;
            for (int r = 0; r < reps; r++) {
                double t = run(be, v, mt, jm, n_req, n_tok, mt == 0 && r == 0 ? ref : cur, &tokens);
                if (t < best)
                    best = t;
                if (!(mt == 0 && r == 0))
                    bad |= memcmp(ref, cur, (size_t)n_req * (size_t)n_tok * sizeof(int32_t)) != 0;
            }
            double tps = (double)tokens / best;
            if (mt == 0)
                base = tps;
            printf("%-12s %14d %10ld %12.1f %9.2fx\n", jm ? "JSON mode" : "JSON Schema", mt, tokens, tps, tps / base);
        }
    }
    if (bad)
        fprintf(stderr, "mask_pool_bench: the runs gave different tokens\n");
    llm_json_vocab_free(v);
    llm_backend_free(be);
    llm_model_free(m);
    free(ref);
    free(cur);
    return bad;
}
