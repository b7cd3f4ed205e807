/* llm-engine serve: load the model, create the backend, serve the ring. */
#include "backend.h"
#include "backend_tp.h"
#include "backend_util.h"
#include "cli.h"
#include "model.h"
#include "serve.h"
#include "supervisor.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* What the worker needs: the model is loaded (and prepared for its backend)
 * before the fork (its mmap and pages are shared with every worker, so a
 * restart costs only the backend and KV cache); the backend (threads, KV
 * memory) is created in the worker. */
typedef struct {
    llm_model          *model;
    const char         *backend;
    llm_backend_opts    bo;
    llm_serve_opts      o;
    llm_model          *draft;  /* --draft-model, or NULL */
    llm_backend_opts    dbo;
} worker_ctx;

static int run_worker(void *arg)
{
    worker_ctx *w = arg;
    llm_err err = { { 0 } };
    llm_backend *b = NULL, *db = NULL;
    int cpu = strcmp(w->backend, "cpu") == 0;
    /* a model split over GPUs: its other ranks forked before this process touches CUDA (for the draft) */
    llm_tp_group *tp = NULL;
    if (w->draft != NULL && w->bo.tp_size > 1 && (tp = llm_tp_fork(w->model, &w->bo, &err)) == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    /* a draft model: on the CPU, after the target and on its threads; on a GPU, first, so that the target's
     * KV pool is sized from what the draft leaves (a split target's: on rank 0's device, not split) */
    if (w->draft != NULL && !cpu && (db = llm_backend_create(w->backend, w->draft, &w->dbo, &err)) == NULL) {
        fprintf(stderr, "error: draft model: %s\n", err.msg);
        llm_tp_abandon(tp);
        return 1;
    }
    b = tp != NULL ? llm_tp_start(tp, &err) : llm_backend_create(w->backend, w->model, &w->bo, &err);
    if (b == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        llm_backend_free(db);
        return 1;
    }
    if (w->draft != NULL && cpu) {
        w->dbo.share_threads = b;
        if ((db = llm_backend_create(w->backend, w->draft, &w->dbo, &err)) == NULL) {
            fprintf(stderr, "error: draft model: %s\n", err.msg);
            llm_backend_free(b);
            return 1;
        }
    }
    if (db != NULL)
        fprintf(stderr, "serve: draft model %s: %s%d drafts a step%s, its KV pool %d blocks of %d\n",
                w->draft->arch[0] ? w->draft->arch : "model", w->o.sched.draft_fixed ? "" : "up to ",
                w->o.sched.spec_tokens, w->o.sched.draft_fixed ? " (fixed)" : "", db->opts.kv_blocks,
                db->opts.block_size);
    w->o.sched.draft = db;
    int rc = llm_serve(w->model, b, &w->o, &err);
    if (rc != 0)
        fprintf(stderr, "error: %s\n", err.msg);
    llm_backend_free(b);
    llm_backend_free(db);
    return rc == 0 ? 0 : 1;
}

/* Supervisor options: restarts, pid file, Redis, adaptive tuning bounds
 * (defaults: the command line's knobs as upper bounds, 1 / 0 ms / the batch
 * size as lower bounds). */
static void supervisor_opts(const llm_args *a, const llm_sched_config *sc, llm_supervisor_opts *so)
{
    memset(so, 0, sizeof(*so));
    so->pid_file = llm_arg_str(a, "pid-file");
    so->redis_url = llm_arg_str(a, "redis");
    so->max_restarts = (int)llm_arg_long(a, "max-restarts", 20, 0, 1000000);
    so->restart_window_s = (int)llm_arg_long(a, "restart-window-s", 60, 1, 86400);
    so->knobs.max_batch_size = sc->max_batch_size;
    so->knobs.batch_timeout_ms = sc->batch_timeout_ms;
    so->knobs.max_batched_tokens = sc->max_batched_tokens;
    llm_tuner_config *t = &so->tuner;
    t->slo_ttft_ms = llm_arg_double(a, "slo-ttft-ms", 0, 0, 1e7);
    t->slo_tpot_ms = llm_arg_double(a, "slo-tpot-ms", 0, 0, 1e7);
    so->tune = t->slo_ttft_ms > 0 || t->slo_tpot_ms > 0;
    t->max.max_batch_size = (int)llm_arg_long(a, "tune-max-batch", sc->max_batch_size, 1, sc->max_batch_size);
    t->min.max_batch_size = (int)llm_arg_long(a, "tune-min-batch", 1, 1, t->max.max_batch_size);
    t->max.batch_timeout_ms = (int)llm_arg_long(a, "tune-max-timeout-ms", sc->batch_timeout_ms, 0, 60000);
    t->min.batch_timeout_ms = (int)llm_arg_long(a, "tune-min-timeout-ms", 0, 0, t->max.batch_timeout_ms);
    t->max.max_batched_tokens =
        (int)llm_arg_long(a, "tune-max-tokens", sc->max_batched_tokens, 1, sc->max_batched_tokens);
    t->min.max_batched_tokens = (int)llm_arg_long(a, "tune-min-tokens", t->min.max_batch_size, 1,
                                                  t->max.max_batched_tokens);
    t->cooldown = (int)llm_arg_long(a, "tune-cooldown", 2, 0, 3600);
}

/* MemAvailable from /proc/meminfo in bytes (0 when unknown). */
static long long mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kb = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kb * 1024;
}

/* --kv-blocks auto on the CPU: room for every batch slot at a quarter of the
 * context (at least one full-context sequence) within 1 GiB, and never more
 * than half the memory available now. Where one full context does not fit in
 * that half (Llama 3.2 3B's 131,072 tokens take 14 GiB in f16), the pool is
 * what fits and the scheduler's context limit comes down to it; --ctx-size
 * and --kv-blocks choose otherwise. Pages past the first blocks are taken only
 * when used (cpu/prefault.c). -1 with a message when not even 256 tokens fit. */
static int cpu_kv_auto(const llm_model *m, llm_backend_opts *bo, int max_batch)
{
    const llm_config *c = &m->cfg;
    /* with a window pool (swa_kv_blocks, sized first) the main pool holds the other layers only, in what
     * the window pool leaves */
    int main_layers = c->n_layers - (bo->swa_blocks > 0 ? llm_swa_pool_layers(m) : 0);
    long long per_token = llm_kv_layers_token_bytes(m, bo->kv_dtype, main_layers);
    long long window_bytes = (long long)bo->swa_blocks * bo->block_size *
                             llm_kv_layers_token_bytes(m, bo->kv_dtype, c->n_layers - main_layers);
    if (main_layers == 0) { /* (every layer slides: the main pool is only the tables' bookkeeping) */
        long long blocks = ((long long)max_batch * c->seq_len + bo->block_size - 1) / bo->block_size;
        bo->kv_blocks = (int)(blocks < (1LL << 24) ? blocks : 1LL << 24);
        return 0;
    }
    long long want = (long long)max_batch * (c->seq_len / 4 > 256 ? c->seq_len / 4 : 256);
    if (want < c->seq_len)
        want = c->seq_len;
    long long cap = (1LL << 30) / per_token;
    if (want > cap)
        want = cap > c->seq_len ? cap : c->seq_len;
    long long mem = mem_available(), avail = (mem / 2 - window_bytes) / per_token, bs = bo->block_size;
    int limited = avail > 0 && want > avail;
    if (limited) {
        if (avail < 256) {
            fprintf(stderr, "error: %lld MiB of memory available: not enough for a KV cache of 256 tokens "
                    "(%lld KiB a token); give --kv-blocks to insist\n", mem >> 20, per_token >> 10);
            return -1;
        }
        fprintf(stderr, "serve: the model's context of %d tokens needs %lld MiB of KV cache, more than half the "
                "%lld MiB available: the pool and the context are %lld tokens (--ctx-size, --kv-blocks)\n",
                c->seq_len, (long long)c->seq_len * per_token >> 20, mem >> 20, avail / bs * bs);
        want = avail;
    }
    /* whole blocks: within the limit where memory sets it, else at least want tokens */
    bo->kv_blocks = (int)(limited ? want / bs : (want + bs - 1) / bs);
    return 0;
}

/* --swa-kv window: the sliding-window layers' KV in a pool of their own (llm_backend_opts.swa_blocks) where
 * a sequence holds only its window: room for every batch slot's window (whole blocks, the window start
 * inside the first) plus one step's new tokens, so it never binds before the main pool does (the caller caps
 * it at the main pool's blocks: a context shorter than the window). 0: off, or a model
 * without such layers (said on stderr when asked for). -1: a bad value. */
static int swa_kv_opt(const llm_args *a, const llm_model *m, const llm_sched_config *sc, llm_backend_opts *bo)
{
    const char *v = llm_arg_str(a, "swa-kv");
    if (v == NULL || strcmp(v, "full") == 0)
        return 0;
    if (strcmp(v, "window") != 0) {
        fprintf(stderr, "error: --swa-kv is full or window (got '%s')\n", v);
        return -1;
    }
    int n = llm_swa_pool_layers(m);
    if (n == 0) {
        fprintf(stderr, "serve: --swa-kv window: this model has no causal sliding-window layers; every layer's KV "
                "stays in one pool\n");
        return 0;
    }
    long bs = bo->block_size, per_seq = (m->cfg.swa_window - 1) / bs + 3;
    long blocks = (long)sc->max_batch_size * per_seq + (sc->max_batched_tokens + bs - 1) / bs;
    bo->swa_blocks = (int)(blocks < (1L << 24) ? blocks : 1L << 24);
    return 0;
}

/* --draft-model PATH [--draft-tokens K] [--draft-fixed]: a smaller model over the same vocabulary drafts for speculation
 * (scheduler.h). Loaded (and prepared for the backend) before the fork like the target; its context no longer
 * than the target's; its KV pool room for every speculating request (LLM_SCHED_SPEC_SEQS) at the full
 * context on a GPU, as --kv-blocks auto sizes a pool on the CPU (pages taken when used). 0, or 1 / 2 on an
 * error (said). */
static int draft_opts(const llm_args *a, const llm_model *m, const char *backend, llm_sched_config *sc,
                      worker_ctx *w)
{
    const char *path = llm_arg_str(a, "draft-model");
    if (path == NULL) {
        if (llm_arg_str(a, "draft-tokens") != NULL || llm_arg_flag(a, "draft-fixed")) {
            fprintf(stderr, "error: --draft-tokens and --draft-fixed need --draft-model\n");
            return 2;
        }
        return 0;
    }
    if (llm_arg_str(a, "spec-ngram") != NULL) {
        fprintf(stderr, "error: --spec-ngram and --draft-model are two ways of drafting: give one\n");
        return 2;
    }
    sc->spec_tokens = (int)llm_arg_long(a, "draft-tokens", 8, 1, LLM_SCHED_MAX_SPEC);
    sc->draft_fixed = llm_arg_flag(a, "draft-fixed");
    llm_err err = { { 0 } };
    llm_model *d = llm_model_load_ex(path, NULL, LLM_LOAD_DEFER_KQ, &err);
    if (d == NULL) {
        fprintf(stderr, "error: draft model: %s\n", err.msg);
        return 1;
    }
    w->draft = d;
    if (d->cfg.bidirectional || m->cfg.bidirectional) {
        fprintf(stderr, "error: --draft-model: speculation is for decoders, not encoders\n");
        return 2;
    }
    /* the same vocabulary: ids drafted are the target's ids (a few padding ids more or less, as llama.cpp
     * allows; a draft id past the target's vocabulary ends that draft) */
    int nv = d->cfg.vocab_size < m->cfg.vocab_size ? d->cfg.vocab_size : m->cfg.vocab_size;
    int diff = abs(d->cfg.vocab_size - m->cfg.vocab_size), bad = -1;
    for (int i = 0; m->tok != NULL && d->tok != NULL && i < nv && bad < 0; i++) {
        const char *x, *y;
        size_t xl, yl;
        int hx = llm_tok_piece(m->tok, i, &x, &xl) == 0, hy = llm_tok_piece(d->tok, i, &y, &yl) == 0;
        if (hx != hy || (hx && (xl != yl || memcmp(x, y, xl) != 0)))
            bad = i;
    }
    if (diff > 128 || bad >= 0) {
        fprintf(stderr, "error: --draft-model: not the target's vocabulary (%d and %d tokens%s%d)\n",
                m->cfg.vocab_size, d->cfg.vocab_size, bad >= 0 ? ", first different token " : "", bad);
        return 2;
    }
    if (d->cfg.seq_len > m->cfg.seq_len)
        d->cfg.seq_len = m->cfg.seq_len;
    llm_backend_opts *o = &w->dbo;
    *o = w->bo;
    o->tp_size = 1; /* (a split target's draft runs whole on rank 0's device) */
    o->swa_blocks = 0;
    o->tune_file = NULL; /* (the target's file holds the target's choices) */
    if (strcmp(backend, "cpu") == 0) {
        o->kv_blocks = 0;
        if (cpu_kv_auto(d, o, LLM_SCHED_SPEC_SEQS) != 0)
            return 1;
    } else {
        long blocks = (long)LLM_SCHED_SPEC_SEQS * ((d->cfg.seq_len + o->block_size - 1) / o->block_size);
        o->kv_blocks = (int)(blocks < (1L << 24) ? blocks : 1L << 24);
    }
    if (llm_backend_prepare(backend, d, o, &err) != 0) {
        fprintf(stderr, "error: draft model: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int cli_serve(const llm_args *a)
{
    static const char *const known[] = {
        "model=", "tokenizer=", "shm=", "max-batch-size=", "preferred-batch-sizes=", "batch-timeout-ms=",
        "max-batched-tokens=", "kv-blocks=", "block-size=", "threads=", "slots=", "backend=", "device=",
        "tensor-parallel-size=", "expert-parallel", "gpu-memory-fraction=", "kernel-tune=", "kernel-tune-file=",
        "shm-mode=", "max-waiting=", "stream-cap=", "no-supervise", "pid-file=", "redis=", "max-restarts=",
        "restart-window-s=", "slo-ttft-ms=", "slo-tpot-ms=", "tune-min-batch=", "tune-max-batch=",
        "tune-min-timeout-ms=", "tune-max-timeout-ms=", "tune-min-tokens=", "tune-max-tokens=", "tune-cooldown=",
        "oom-recover-ms=", "ctx-size=", "kv-cache-dtype=", "lora=", "lora-scale=", "mask-threads=", "pooling=",
        "spec-ngram=", "swa-kv=", "draft-model=", "draft-tokens=", "draft-fixed", NULL,
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
    sc->oom_recover_ms = (int)llm_arg_long(a, "oom-recover-ms", 1000, 1, 3600000);
    sc->mask_threads = (int)llm_arg_long(a, "mask-threads", 2, 0, 64);
    sc->spec_tokens = (int)llm_arg_long(a, "spec-ngram", 0, 0, LLM_SCHED_MAX_SPEC);
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
    bo.gpu_memory_fraction = (float)llm_arg_double(a, "gpu-memory-fraction", 0.0, 0.0, 1.0);
    if (llm_kernel_tune_opts(a, &bo) != 0)
        return 2;
    bo.tune_max_batch = sc->max_batch_size; /* decode steps never hold more tokens than that */
    const char *kvb = llm_arg_str(a, "kv-blocks");
    if (kvb == NULL || strcmp(kvb, "auto") == 0) {
        bo.kv_blocks = 0; /* resolved below from the model and the batch size */
    } else {
        bo.kv_blocks = (int)llm_arg_long(a, "kv-blocks", 0, 1, 1 << 24);
    }

    llm_err err = { { 0 } };
    /* conversions of the types a backend may take from their blocks wait for llm_backend_prepare (model.h) */
    llm_model *m = llm_model_load_ex(model_path, llm_arg_str(a, "tokenizer"), LLM_LOAD_DEFER_KQ, &err);
    if (m == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    if (llm_context_opts(a, m, &bo) != 0) {
        llm_model_free(m);
        return 2;
    }
    if (llm_lora_opts(a, m) != 0) {
        llm_model_free(m);
        return 1;
    }
    o.pooling = llm_pooling_opt(a, m); /* /v1/embeddings */
    if (o.pooling < 0) {
        llm_model_free(m);
        return 2;
    }
    llm_encoder_step_default(a, m, sc);
    const char *backend = llm_arg_str(a, "backend") != NULL ? llm_arg_str(a, "backend") : "cpu";
    if (swa_kv_opt(a, m, sc, &bo) != 0 || llm_tp_opts(a, backend, m, &bo) != 0) {
        llm_model_free(m);
        return 2;
    }
    if (bo.kv_blocks == 0 && strcmp(backend, "cpu") == 0 && cpu_kv_auto(m, &bo, sc->max_batch_size) != 0) {
        llm_model_free(m);
        return 1;
    }
    if (bo.swa_blocks > bo.kv_blocks && bo.kv_blocks > 0) /* (--kv-blocks, or the CPU's automatic pool) */
        bo.swa_blocks = bo.kv_blocks;
    worker_ctx w;
    memset(&w, 0, sizeof(w));
    w.model = m;
    w.backend = backend;
    if (llm_backend_prepare(w.backend, m, &bo, &err) != 0) { /* in place, before the fork: no page copied */
        fprintf(stderr, "error: %s\n", err.msg);
        llm_model_free(m);
        return 1;
    }
    llm_backend_prepare_report(m, stderr);
    w.bo = bo;
    int drc = draft_opts(a, m, backend, &o.sched, &w);
    if (drc != 0) {
        llm_model_free(w.draft);
        llm_model_free(m);
        return drc;
    }
    w.o = o;
    int rc;
    if (llm_arg_flag(a, "no-supervise")) {
        const char *pf = llm_arg_str(a, "pid-file");
        FILE *f = pf != NULL ? fopen(pf, "w") : NULL;
        if (f != NULL) {
            fprintf(f, "%d\n", (int)getpid());
            fclose(f);
        }
        rc = run_worker(&w);
        if (pf != NULL)
            unlink(pf);
    } else {
        llm_supervisor_opts so;
        supervisor_opts(a, sc, &so);
        so.shm_name = name;
        rc = llm_supervise(&so, run_worker, &w);
    }
    llm_model_free(w.draft);
    llm_model_free(m);
    return rc;
}
