/* JSON mode's per-step cost (engine/json_mode.c): one llm_json_mask call over a whole vocabulary (Llama 3's
 * 128,256 tokens by default) in the states a JSON object goes through, beside the plain way to the same
 * mask (every token's bytes fed to a copy of the state, no first-byte table, no whitespace or plain-string
 * shortcuts), which must leave the same tokens (checked: the run fails if they differ). Median of reps
 * calls, one thread. A step of a JSON-mode request costs one mask on the host.
 * Build: make build/libllm.a && cc -O2 -std=c11 -D_GNU_SOURCE -Iengine -Ishm bench/json_mask_bench.c
 *          build/libllm.a -lcjson -lpcre2-8 -lhiredis -lpthread -lm -o build/json_mask_bench
 * Run:   build/json_mask_bench [tokenizer=../shared/tokenizers/llama3/tokenizer.json] [reps=31] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json_mode.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The same mask the plain way. */
static int plain_mask(const llm_json_vocab *v, const llm_json_state *s, float *logits, int n)
{
    int left = 0;
    for (int id = 0; id < n; id++) {
        size_t k;
        const char *p = llm_json_token_bytes(v, id, &k);
        llm_json_state t = *s;
        if (p == NULL || llm_json_feed(&t, p, k) != 0)
            logits[id] = -INFINITY;
        else
            left++;
    }
    return left;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "../shared/tokenizers/llama3/tokenizer.json";
    int reps = argc > 2 ? atoi(argv[2]) : 31;
    if (reps < 1)
        reps = 1;
    llm_err err = { { 0 } };
    llm_tokenizer *tok = llm_tok_load(path, &err);
    if (tok == NULL) {
        fprintf(stderr, "json_mask_bench: %s\n", err.msg);
        return 1;
    }
    llm_json_vocab *v = llm_json_vocab_new(tok);
    int n = llm_json_vocab_size(v);
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    double *ta = malloc((size_t)reps * sizeof(double)), *tb = malloc((size_t)reps * sizeof(double));
    if (v == NULL || a == NULL || b == NULL || ta == NULL || tb == NULL) {
        fprintf(stderr, "json_mask_bench: out of memory\n");
        return 1;
    }
    static const struct { const char *name, *text; } states[] = {
        { "before the object", "" },
        { "after '{'", "{" },
        { "in a key", "{\"na" },
        { "after a key", "{\"name\"" },
        { "after ':'", "{\"name\":" },
        { "in a string value", "{\"name\": \"some text" },
        { "in a number", "{\"n\": 12" },
        { "after a value", "{\"n\": 12," },
        { "in an array", "{\"a\": [1, " },
    };
    printf("JSON mode mask, %d tokens (%s), one thread, median of %d calls\n", n, path, reps);
    printf("%-20s %8s %12s %14s %8s\n", "state", "left", "mask ms", "plain way ms", "ratio");
    int bad = 0;
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
        llm_json_state s;
        llm_json_init(&s, 1);
        llm_json_feed(&s, states[i].text, strlen(states[i].text));
        int la = 0, lb = 0;
        for (int r = 0; r < reps; r++) {
            memset(a, 0, (size_t)n * sizeof(float));
            memset(b, 0, (size_t)n * sizeof(float));
            double t0 = now_ms();
            la = llm_json_mask(v, &s, a, n);
            double t1 = now_ms();
            lb = plain_mask(v, &s, b, n);
            double t2 = now_ms();
            ta[r] = t1 - t0;
            tb[r] = t2 - t1;
        }
        bad |= la != lb || memcmp(a, b, (size_t)n * sizeof(float)) != 0;
        qsort(ta, (size_t)reps, sizeof(double), cmp_d);
        qsort(tb, (size_t)reps, sizeof(double), cmp_d);
        printf("%-20s %8d %12.3f %14.3f %7.1fx\n", states[i].name, la, ta[reps / 2], tb[reps / 2],
               tb[reps / 2] / ta[reps / 2]);
    }
    if (bad)
        fprintf(stderr, "json_mask_bench: the mask and the plain way left different tokens\n");
    llm_json_vocab_free(v);
    llm_tok_free(tok);
    free(a);
    free(b);
    free(ta);
    free(tb);
    return bad;
}
