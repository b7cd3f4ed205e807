/* llm-engine serve: load the model, create the backend, serve the ring. */
#include "backend.h"
#include "cli.h"
#include "model.h"
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "8,16" -> sizes; -1 on a malformed list. */
static int parse_sizes(const char *s, int *out, int cap)
{
    int n = 0;
    while (*s != '\0') {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 65536 || (*end != ',' && *end != '\0') || n == cap)
            return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

int cli_serve(const llm_args *a)
{
    static const char *const known[] = {
        "model=", "tokenizer=", "shm=", "max-batch-size=", "preferred-batch-sizes=", "batch-timeout-ms=",
        "max-batched-tokens=", "kv-blocks=", "block-size=", "threads=", "slots=", "backend=", "device=",
        "shm-mode=", "max-waiting=", "stream-cap=", NULL,
    };
    if (llm_args_check(a, known) != 0)
        return 2;
    const char *model_path = llm_arg_str(a, "model"), *name = llm_arg_str(a, "shm");
    if (model_path == NULL || name == NULL) {
        fprintf(stderr, "error: serve needs --model PATH and --shm NAME\n");
        return 2;
    }
    llm_serve_opts o;
    memset(&o, 0, sizeof(o));
    o.shm_name = name;
    o.n_slots = (int)llm_arg_long(a, "slots", 256, 1, 65536);
    o.stream_cap = (int)llm_arg_long(a, "stream-cap", 1024, 2, 1 << 20);
    if ((o.stream_cap & (o.stream_cap - 1)) != 0) {
        fprintf(stderr, "error: --stream-cap must be a power of two\n");
        return 2;
    }
    const char *mode = llm_arg_str(a, "shm-mode");
    o.shm_mode = mode != NULL ? (unsigned)strtoul(mode, NULL, 8) : 0600;
    llm_sched_config *sc = &o.sched;
    sc->max_batch_size = (int)llm_arg_long(a, "max-batch-size", 32, 1, 4096);
    sc->batch_timeout_ms = (int)llm_arg_long(a, "batch-timeout-ms", 5, 0, 60000);
    sc->max_batched_tokens = (int)llm_arg_long(a, "max-batched-tokens", 2048, 1, 1 << 20);
    sc->max_waiting = (int)llm_arg_long(a, "max-waiting", 0, 0, 1 << 20);
    const char *pref = llm_arg_str(a, "preferred-batch-sizes");
    if (pref != NULL) {
        sc->n_preferred = parse_sizes(pref, sc->preferred_batch_sizes, LLM_SCHED_MAX_PREFERRED);
        if (sc->n_preferred < 0) {
            fprintf(stderr, "error: --preferred-batch-sizes must be a list like 8,16 (at most %d sizes)\n",
                    LLM_SCHED_MAX_PREFERRED);
            return 2;
        }
    }

    llm_backend_opts bo;
    memset(&bo, 0, sizeof(bo));
    bo.threads = (int)llm_arg_long(a, "threads", 0, 0, 1024);
    bo.block_size = (int)llm_arg_long(a, "block-size", 16, 1, 1024);
    bo.device = (int)llm_arg_long(a, "device", 0, 0, 64);
    const char *kvb = llm_arg_str(a, "kv-blocks");
    if (kvb == NULL || strcmp(kvb, "auto") == 0) {
        bo.kv_blocks = 0; /* resolved below from the model and the batch size */
    } else {
        bo.kv_blocks = (int)llm_arg_long(a, "kv-blocks", 0, 1, 1 << 24);
    }

    llm_err err = { { 0 } };
    llm_model *m = llm_model_load(model_path, llm_arg_str(a, "tokenizer"), &err);
    if (m == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    if (bo.kv_blocks == 0) {
        /* auto: room for every batch slot at a quarter of the context (at
         * least one full-context sequence), bounded to 1 GiB of CPU KV. */
        const llm_config *c = &m->cfg;
        long per_token = 2L * c->n_layers * c->n_kv_heads * c->head_dim * (long)sizeof(float);
        long want = (long)sc->max_batch_size * (c->seq_len / 4 > 256 ? c->seq_len / 4 : 256);
        if (want < c->seq_len)
            want = c->seq_len;
        long cap = (1L << 30) / (per_token > 0 ? per_token : 1);
        if (want > cap)
            want = cap > c->seq_len ? cap : c->seq_len;
        bo.kv_blocks = (int)((want + bo.block_size - 1) / bo.block_size);
    }
    const char *bname = llm_arg_str(a, "backend");
    llm_backend *b = llm_backend_create(bname != NULL ? bname : "cpu", m, &bo, &err);
    if (b == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        llm_model_free(m);
        return 1;
    }
    int rc = llm_serve(m, b, &o, &err);
    if (rc != 0)
        fprintf(stderr, "error: %s\n", err.msg);
    llm_backend_free(b);
    llm_model_free(m);
    return rc == 0 ? 0 : 1;
}
