/* Argument parsing shared by the subcommands: "--name value" and "--flag". */
#include "backend_util.h"
#include "cli.h"
#include "model_tp.h"
#include "scheduler.h"
#include "lora.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *llm_arg_str(const llm_args *a, const char *name)
{
    for (int i = 0; i < a->argc; i++) {
        if (strncmp(a->argv[i], "--", 2) == 0 && strcmp(a->argv[i] + 2, name) == 0) {
            if (i + 1 >= a->argc) {
                fprintf(stderr, "error: --%s needs a value\n", name);
                exit(2);
            }
            return a->argv[i + 1];
        }
    }
    return NULL;
}

int llm_arg_flag(const llm_args *a, const char *name)
{
    for (int i = 0; i < a->argc; i++)
        if (strncmp(a->argv[i], "--", 2) == 0 && strcmp(a->argv[i] + 2, name) == 0)
            return 1;
    return 0;
}

long llm_arg_long(const llm_args *a, const char *name, long def, long lo, long hi)
{
    const char *s = llm_arg_str(a, name);
    if (s == NULL)
        return def;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "error: --%s must be an integer in [%ld, %ld], got '%s'\n", name, lo, hi, s);
        exit(2);
    }
    return v;
}

double llm_arg_double(const llm_args *a, const char *name, double def, double lo, double hi)
{
    const char *s = llm_arg_str(a, name);
    if (s == NULL)
        return def;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi)) {
        fprintf(stderr, "error: --%s must be a number in [%g, %g], got '%s'\n", name, lo, hi, s);
        exit(2);
    }
    return v;
}

int llm_kernel_tune_opts(const llm_args *a, llm_backend_opts *o)
{
    const char *t = llm_arg_str(a, "kernel-tune");
    if (t != NULL && strcmp(t, "on") != 0 && strcmp(t, "off") != 0) {
        fprintf(stderr, "error: --kernel-tune must be on or off, got '%s'\n", t);
        return -1;
    }
    o->kernel_tune = t == NULL ? 0 : strcmp(t, "on") == 0 ? 1 : -1;
    o->tune_file = llm_arg_str(a, "kernel-tune-file");
    if (o->tune_file != NULL && o->tune_file[0] == '\0') {
        fprintf(stderr, "error: --kernel-tune-file needs a path\n");
        return -1;
    }
    return 0;
}

int llm_tp_opts(const llm_args *a, const char *backend, const llm_model *m, llm_backend_opts *o)
{
    const char *v = llm_arg_str(a, "tensor-parallel-size");
    if (v == NULL && llm_arg_flag(a, "expert-parallel")) {
        fprintf(stderr, "error: --expert-parallel deals experts out to the GPUs of --tensor-parallel-size N\n");
        return -1;
    }
    if (v == NULL)
        return 0;
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (end == v || *end != '\0' || n < 1 || n > LLM_TP_MAX) {
        fprintf(stderr, "error: --tensor-parallel-size must be a number of GPUs from 1 to %d, got '%s'\n", LLM_TP_MAX,
                v);
        return -1;
    }
    if (n > 1 && (backend == NULL || strcmp(backend, "cuda") != 0)) {
        fprintf(stderr, "error: --tensor-parallel-size %ld splits the model over GPUs: it needs --backend cuda\n", n);
        return -1;
    }
    llm_err err = { { 0 } };
    int ep = llm_arg_flag(a, "expert-parallel");
    if (ep && m->cfg.n_expert == 0) {
        fprintf(stderr, "error: --expert-parallel deals a mixture of experts' experts out to the GPUs: %s has no "
                "experts\n", m->path);
        return -1;
    }
    if (n > 1 && llm_model_tp_check(m, (int)n, ep, &err) != 0) {
        /* experts whose columns do not split (a width that does not divide, or K-quant rows whose share is not
         * whole 256-blocks) go whole to the ranks instead, when that works */
        llm_err err2 = { { 0 } };
        if (ep || m->cfg.n_expert == 0 || llm_model_tp_check(m, (int)n, 1, &err2) != 0) {
            fprintf(stderr, "error: %s\n", err.msg);
            return -1;
        }
        fprintf(stderr, "tensor parallel: the experts do not split by columns (%s); dealt out whole instead "
                "(--expert-parallel)\n", err.msg);
        ep = 1;
    }
    o->tp_size = (int)n;
    o->tp_ep = ep;
    return 0;
}

int llm_context_opts(const llm_args *a, llm_model *m, llm_backend_opts *o)
{
    o->kv_dtype = llm_kv_dtype_parse(llm_arg_str(a, "kv-cache-dtype"));
    if (o->kv_dtype < 0) {
        fprintf(stderr, "error: --kv-cache-dtype must be auto, f16, f32 or q8_0, got '%s'\n",
                llm_arg_str(a, "kv-cache-dtype"));
        return -1;
    }
    long n = llm_arg_long(a, "ctx-size", 0, 0, 1L << 30);
    if (n > m->cfg.seq_len) {
        fprintf(stderr, "error: --ctx-size %ld is more than the model's context of %d tokens\n", n, m->cfg.seq_len);
        return -1;
    }
    if (n > 0)
        m->cfg.seq_len = (int)n;
    return 0;
}

int llm_pooling_opt(const llm_args *a, const llm_model *m)
{
    const char *pool = llm_arg_str(a, "pooling");
    if (pool == NULL)
        return m->pooling == LLM_POOL_MEAN  ? LLM_SCHED_EMBED_MEAN
               : m->pooling == LLM_POOL_CLS ? LLM_SCHED_EMBED_CLS
                                            : LLM_SCHED_EMBED_LAST;
    if (strcmp(pool, "mean") == 0)
        return LLM_SCHED_EMBED_MEAN;
    if (strcmp(pool, "cls") == 0)
        return LLM_SCHED_EMBED_CLS;
    if (strcmp(pool, "last") == 0)
        return LLM_SCHED_EMBED_LAST;
    fprintf(stderr, "error: --pooling is last, mean or cls (got '%s')\n", pool);
    return -1;
}

void llm_encoder_step_default(const llm_args *a, const llm_model *m, llm_sched_config *sc)
{
    if (m->cfg.bidirectional && llm_arg_str(a, "max-batched-tokens") == NULL)
        sc->max_batched_tokens = m->cfg.seq_len < 2048 ? m->cfg.seq_len : 2048;
}

int llm_lora_opts(const llm_args *a, llm_model *m)
{
    const char *path = llm_arg_str(a, "lora");
    if (path == NULL) {
        if (llm_arg_str(a, "lora-scale") != NULL) {
            fprintf(stderr, "error: --lora-scale needs --lora\n");
            return -1;
        }
        return 0;
    }
    float scale = (float)llm_arg_double(a, "lora-scale", 1.0, -100.0, 100.0);
    llm_err err = { { 0 } };
    if (llm_lora_apply(m, path, scale, &err) != 0) {
        fprintf(stderr, "error: %s\n", err.msg);
        return -1;
    }
    return 0;
}

int llm_args_check(const llm_args *a, const char *const *known)
{
    for (int i = 0; i < a->argc; i++) {
        const char *arg = a->argv[i];
        if (strncmp(arg, "--", 2) != 0) {
            fprintf(stderr, "error: unexpected argument '%s'\n", arg);
            return -1;
        }
        int found = 0, takes_value = 0;
        for (const char *const *k = known; *k != NULL; k++) {
            size_t n = strlen(*k);
            int val = n > 0 && (*k)[n - 1] == '=';
            if (val)
                n--;
            if (strlen(arg + 2) == n && strncmp(arg + 2, *k, n) == 0) {
                found = 1;
                takes_value = val;
                break;
            }
        }
        if (!found) {
            fprintf(stderr, "error: unknown option '%s'\n", arg);
            return -1;
        }
        if (takes_value) {
            if (i + 1 >= a->argc) {
                fprintf(stderr, "error: %s needs a value\n", arg);
                return -1;
            }
            i++;
        }
    }
    return 0;
}

const char *llm_shared_dir(void)
{
    static char dir[PATH_MAX];
    const char *env = getenv("LLM_SHARED_DIR");
    if (env != NULL && *env != '\0')
        return env;
    /* <repo>/build/llm-engine -> <repo>/../shared */
    char exe[PATH_MAX - 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL) {
            *slash = '\0';
            snprintf(dir, sizeof(dir), "%s/../../shared", exe);
            if (access(dir, R_OK) == 0)
                return dir;
        }
    }
    return "../shared";
}

double llm_now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* "1,2,3" -> ids (malloc'd). Returns count, -1 on a malformed list. */
int llm_parse_ids(const char *s, int vocab, int32_t **out)
{
    size_t cap = 16, n = 0;
    int32_t *ids = malloc(cap * sizeof(*ids));
    if (ids == NULL)
        return -1;
    while (*s != '\0') {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno != 0 || v < 0 || v >= vocab || (*end != ',' && *end != '\0')) {
            free(ids);
            return -1;
        }
        if (n == cap) {
            int32_t *nids = realloc(ids, (cap *= 2) * sizeof(*ids));
            if (nids == NULL) {
                free(ids);
                return -1;
            }
            ids = nids;
        }
        ids[n++] = (int32_t)v;
        s = *end == ',' ? end + 1 : end;
    }
    *out = ids;
    return (int)n;
}
