/* Kernel tuning at start: which product path each decode batch size takes is measured on this device and
 * this model instead of being a constant in the code.
 *
 * For every batch-size bucket B (1, 2, 4, ..., up to the serving batch limit) the tuner times all-padding
 * decode steps of B tokens, through CUDA Graphs when the backend uses them, exactly as a decode step of
 * that bucket runs (padding tokens sit at position 0 of the backend's scratch KV block, so the products,
 * norms and classifier cost what they cost in a real step and attention costs next to nothing). It walks
 * the choices one at a time, keeping each that beats the best so far by more than 1%:
 *  - quantised weights (Q8_0/Q4_0): float GEMV, int8-activation GEMV (dp4a), tensor-core GEMM, cuBLAS;
 *  - 16-bit weights (F16/BF16): GEMV, tensor-core GEMM, cuBLAS;
 *  - with a GEMV: fused (norm/RoPE/SwiGLU folded in) or not; at one token, each GEMV shape.
 * GEMVs are tried up to CU_GEMV_MAX_TOKENS tokens. Then programmatic dependent launch, one switch for all
 * kernels, is kept when it makes the tuned steps more than 2% faster on average. Last, where the model
 * allows it, the prefill attention kernel (wmma, or mma.sync with S and P in registers) is timed on one
 * prefill step (LLM_CUDA_TUNE_PREFILL tokens, 512 by default). Each result is one line on stderr with
 * every time measured, so a log shows what each path costs here.
 *
 * The choice can be kept in a file (--kernel-tune-file): it is reused when its key (device, SM count, the
 * library file's size and time, the model's shape and weight types, KV type, block size, graphs, batch
 * limit) matches, so a restart does not time again; anything else in the file makes the tuner run and
 * rewrite it. Values read from it are range-checked like any other input. */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cuda_internal.cuh"

#define TUNE_MAX_REPS 64
#define TUNE_MAX_TRIED 48
#define TUNE_FILE_MAGIC "ngx_llm cuda kernel tuning 2"

cu_knobs cuda_knobs_get(const cu_state *st)
{
    const cu_mm_ctx *c = &st->mm;
    cu_knobs k = { c->gemv_max, c->gemv_max_q8, c->gemv_max_q4, c->dp4a, c->shape_r, c->shape_u, c->tc_max,
                   c->tc_max_q, c->fuse };
    return k;
}

void cuda_knobs_set(cu_state *st, const cu_knobs *k)
{
    cu_mm_ctx *c = &st->mm;
    c->gemv_max = k->gemv_max;
    c->gemv_max_q8 = k->gemv_max_q8;
    c->gemv_max_q4 = k->gemv_max_q4;
    c->dp4a = k->dp4a && c->xq != NULL;
    c->shape_r = k->shape_r;
    c->shape_u = k->shape_u;
    c->tc_max = k->tc_max;
    c->tc_max_q = k->tc_max_q;
    c->fuse = k->fuse;
}

enum { CL_HALF = 1, CL_Q = 2 };

static int mat_class(const cu_mat *W)
{
    return W->type == LLM_F16 || W->type == LLM_BF16 ? CL_HALF
           : cu_type_q(W->type) ? CL_Q : 0;
}

/* Which weight classes the model's products use. */
static int model_classes(const cu_state *st)
{
    int cl = mat_class(&st->output);
    for (int l = 0; l < st->m->cfg.n_layers; l++) {
        const cu_layer *L = &st->layers[l];
        for (int i = 0; i < L->qkv.n; i++)
            cl |= mat_class(&L->qkv.m[i]);
        for (int i = 0; i < L->gate_up.n; i++)
            cl |= mat_class(&L->gate_up.m[i]);
        cl |= mat_class(&L->wo) | mat_class(&L->down) | mat_class(&L->router);
    }
    return cl;
}

/* Paths of one weight class for bucket B. */
enum { P_GEMV, P_DP4A, P_TC, P_BLAS, P_N };
static const char *const path_name[P_N] = { "gemv", "dp4a", "tc", "cublas" };

static void set_path(cu_knobs *k, int cls, int path, int B)
{
    int g = path == P_GEMV || path == P_DP4A ? B : 0, t = path == P_TC ? B : 0;
    if (cls == CL_HALF) {
        k->gemv_max = g;
        k->tc_max = t;
    } else {
        k->gemv_max_q8 = k->gemv_max_q4 = g;
        k->dp4a = path == P_DP4A;
        k->tc_max_q = t;
    }
}

static int get_path(const cu_knobs *k, int cls, int B)
{
    if (cls == CL_HALF)
        return B <= k->gemv_max ? P_GEMV : B <= k->tc_max ? P_TC : P_BLAS;
    if (B <= k->gemv_max_q8 && B <= k->gemv_max_q4)
        return k->dp4a ? P_DP4A : P_GEMV;
    return B <= k->tc_max_q ? P_TC : P_BLAS;
}

/* "quant dp4a, half cublas, unfused, shape 2x4" for the classes the model has. */
static void describe(const cu_knobs *k, int classes, int B, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    if (classes == 0)
        o += (size_t)snprintf(out, len, "f32 weights: no choice");
    if (classes & CL_Q)
        o += (size_t)snprintf(out + o, len - o, "quant %s", path_name[get_path(k, CL_Q, B)]);
    if ((classes & CL_HALF) && o < len)
        o += (size_t)snprintf(out + o, len - o, "%shalf %s", o ? ", " : "", path_name[get_path(k, CL_HALF, B)]);
    if (B <= CU_GEMV_MAX_TOKENS && !k->fuse && o < len)
        o += (size_t)snprintf(out + o, len - o, ", unfused");
    if (B == 1 && k->shape_r > 0 && o < len)
        snprintf(out + o, len - o, ", shape %dx%d", k->shape_r, k->shape_u);
}

typedef struct {
    cu_state   *st;
    int         reps, classes;
    cudaEvent_t e0, e1;
    /* knob sets timed for the bucket in progress */
    cu_knobs    tried[TUNE_MAX_TRIED];
    float       tried_ms[TUNE_MAX_TRIED];
    int         n_tried;
    char        log[2048];
    size_t      log_len;
} tuner;

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Median time (ms) of t->reps all-padding decode steps of B tokens under k (`label` names it), after one
 * untimed run. 0; 1 when this choice cannot run here (out of memory, a capture refused, a launch the device
 * rejects: skipped, the reason in why); -1 on an error that leaves the device unusable, with err filled. */
static int time_step(tuner *t, int B, const cu_knobs *k, const char *label, float *ms, char *why, size_t why_len,
                     llm_err *err)
{
    cu_state *st = t->st;
    cuda_knobs_set(st, k);
    st->mm.nomem = 0;
    cu_step sp;
    llm_err qerr;
    if (cuda_graph_dummy_step(st, B, &sp, &qerr) != 0) {
        cudaGetLastError();
        snprintf(why, why_len, "%.150s", qerr.msg);
        return 1;
    }
    cudaGraphExec_t ex = NULL;
    if (st->graphs.enabled && cuda_graph_capture(st, &sp, &ex, why, why_len) != 0)
        return 1;
    float v[TUNE_MAX_REPS];
    int rc = 0;
    for (int r = -1; r < t->reps && rc == 0; r++) {
        cudaEventRecord(t->e0, st->stream);
        cudaError_t e = ex != NULL ? cudaGraphLaunch(ex, st->stream) : cudaSuccess;
        if (ex == NULL && cuda_enqueue_step(st, &sp, &qerr) != 0) {
            snprintf(why, why_len, "%.150s", qerr.msg);
            rc = 1;
        }
        cudaEventRecord(t->e1, st->stream);
        if (e == cudaSuccess)
            e = cudaEventSynchronize(t->e1);
        if (e == cudaSuccess)
            e = cudaGetLastError();
        if (e != cudaSuccess) {
            /* A launch the device refuses is reported once; an error that is still there after a
             * synchronisation (a fault) has lost the context, and the backend cannot go on. */
            cudaError_t again = cudaDeviceSynchronize();
            if (again == cudaSuccess)
                again = cudaGetLastError();
            if (again != cudaSuccess) {
                llm_err_set(err, "cuda backend: kernel tuning, %s on a step of %d tokens: %s (start with "
                            "--kernel-tune off to skip the tuning)", label, B, cudaGetErrorString(e));
                rc = -1;
            } else {
                snprintf(why, why_len, "%s", cudaGetErrorString(e));
                rc = 1;
            }
        }
        if (rc == 0 && r >= 0 && cudaEventElapsedTime(&v[r], t->e0, t->e1) != cudaSuccess) {
            snprintf(why, why_len, "no event time");
            rc = 1;
        }
    }
    if (ex != NULL)
        cudaGraphExecDestroy(ex);
    cudaGetLastError();
    st->mm.nomem = 0;
    if (rc != 0)
        return rc;
    qsort(v, (size_t)t->reps, sizeof(float), cmp_float);
    *ms = v[t->reps / 2];
    return 0;
}

/* Times candidate k (once per bucket: a knob set already timed is not timed again) and makes it *best
 * when it is more than 1% faster. 0 or -1 (device error). */
static int consider(tuner *t, int B, const cu_knobs *k, const char *label, cu_knobs *best, float *best_ms,
                    llm_err *err)
{
    for (int i = 0; i < t->n_tried; i++)
        if (memcmp(&t->tried[i], k, sizeof(*k)) == 0)
            return 0;
    float ms = 0.0f;
    char why[160] = "";
    int rc = time_step(t, B, k, label, &ms, why, sizeof(why), err);
    if (rc < 0)
        return -1;
    if (t->n_tried < TUNE_MAX_TRIED) {
        t->tried[t->n_tried] = *k;
        t->tried_ms[t->n_tried++] = rc == 0 ? ms : INFINITY;
    }
    if (t->log_len < sizeof(t->log))
        t->log_len += rc == 0 ? (size_t)snprintf(t->log + t->log_len, sizeof(t->log) - t->log_len, "%s%s %.3f",
                                                 t->log_len ? ", " : "", label, ms)
                              : (size_t)snprintf(t->log + t->log_len, sizeof(t->log) - t->log_len,
                                                 "%s%s (cannot run: %s)", t->log_len ? ", " : "", label, why);
    if (rc == 0 && (*best_ms < 0 || ms < 0.99f * *best_ms)) {
        *best = *k;
        *best_ms = ms;
    }
    return 0;
}

/* The fastest knobs for bucket B, starting from the defaults; *ms its step time (-1: nothing could run). */
static int tune_bucket(tuner *t, int B, cu_knobs *best, float *ms, llm_err *err)
{
    const int classes = t->classes, gemv_ok = B <= CU_GEMV_MAX_TOKENS;
    const int dp4a_ok = t->st->mm.xq != NULL;
    t->n_tried = 0;
    t->log_len = 0;
    *ms = -1.0f;
    cu_knobs k = *best;
    if (consider(t, B, &k, "default", best, ms, err) != 0)
        return -1;
    static const int cls_order[2] = { CL_Q, CL_HALF };
    for (int ci = 0; ci < 2; ci++) {
        int cls = cls_order[ci];
        if (!(classes & cls))
            continue;
        for (int p = 0; p < P_N; p++) {
            if ((p == P_GEMV && !gemv_ok) || (p == P_DP4A && (cls != CL_Q || !gemv_ok || !dp4a_ok)))
                continue;
            k = *best;
            set_path(&k, cls, p, B);
            char label[32];
            snprintf(label, sizeof(label), "%s %s", cls == CL_Q ? "quant" : "half", path_name[p]);
            if (consider(t, B, &k, label, best, ms, err) != 0)
                return -1;
        }
    }
    int any_gemv = ((classes & CL_HALF) && get_path(best, CL_HALF, B) == P_GEMV) ||
                   ((classes & CL_Q) && get_path(best, CL_Q, B) <= P_DP4A);
    if (gemv_ok && any_gemv) {
        k = *best;
        k.fuse = !k.fuse;
        if (consider(t, B, &k, k.fuse ? "fused" : "unfused", best, ms, err) != 0)
            return -1;
    }
    /* One-token shapes: they serve the F16/BF16 GEMV and the dp4a one (not the float GEMV on Q8_0/Q4_0). */
    int shaped = ((classes & CL_HALF) && get_path(best, CL_HALF, 1) == P_GEMV) ||
                 ((classes & CL_Q) && get_path(best, CL_Q, 1) == P_DP4A);
    if (B == 1 && shaped) {
        const int shapes[][2] = {
#define SHAPE_ROW(R_, U_) { R_, U_ },
            GEMV_SHAPES(SHAPE_ROW)
#undef SHAPE_ROW
        };
        cu_knobs base = *best;
        for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
            k = base;
            k.shape_r = shapes[i][0];
            k.shape_u = shapes[i][1];
            char label[32];
            snprintf(label, sizeof(label), "shape %dx%d", k.shape_r, k.shape_u);
            if (consider(t, B, &k, label, best, ms, err) != 0)
                return -1;
        }
    }
    return 0;
}

/* ---- the tuning file ---- */
static void tune_key(const cu_state *st, int max_batch, char *key, size_t len)
{
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, st->device) != cudaSuccess) {
        cudaGetLastError();
        snprintf(prop.name, sizeof(prop.name), "unknown");
    }
    Dl_info di;
    struct stat sb;
    long long lib_size = -1, lib_time = -1;
    if (dladdr((void *)&cuda_tune_run, &di) != 0 && di.dli_fname != NULL && stat(di.dli_fname, &sb) == 0) {
        lib_size = (long long)sb.st_size;
        lib_time = (long long)sb.st_mtime;
    }
    const llm_config *c = &st->m->cfg;
    const cu_layer *L = &st->layers[0];
    for (char *p = prop.name; *p != '\0'; p++)
        if (*p == ' ' || *p == '\n')
            *p = '_';
    snprintf(key, len, "%s sms=%d lib=%lld/%lld dim=%d hidden=%d layers=%d heads=%d/%d head_dim=%d vocab=%d "
             "types=%d,%d,%d,%d,%d,%d experts=%d/%d/%d dense=%d/%d kv=%s block=%d graphs=%d max_batch=%d", prop.name, st->n_sms,
             lib_size, lib_time, c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim,
             c->vocab_size, L->qkv.m[0].type, L->wo.type, L->gate_up.m[0].type, L->down.type, st->output.type,
             L->router.type, c->n_expert, c->n_expert_used, c->expert_ff, c->moe_dense_lead, c->dense_ff, cu_kv_name(&st->kv), st->block_size,
             st->graphs.enabled, max_batch);
}

static int knob_ok(int v, int lo, int hi) { return v >= lo && v <= hi; }

/* 0 when `file` holds a tuning under `key`: knobs per bucket (up to n_buckets), *pdl and *att_mma, written only
 * then. */
static int tune_read(const char *file, const char *key, cu_knobs *k, int n_buckets, int *pdl, int *att_mma)
{
    FILE *f = fopen(file, "r");
    if (f == NULL) {
        if (errno != ENOENT)
            fprintf(stderr, "cuda: cannot read the kernel tuning file %s: %s\n", file, strerror(errno));
        return -1;
    }
    char line[1024];
    int ok = fgets(line, sizeof(line), f) != NULL && strncmp(line, TUNE_FILE_MAGIC "\n", sizeof(line)) == 0;
    size_t kl = strlen(key);
    ok = ok && fgets(line, sizeof(line), f) != NULL && strncmp(line, "key ", 4) == 0 &&
         strncmp(line + 4, key, kl) == 0 && line[4 + kl] == '\n';
    int p = 0;
    ok = ok && fgets(line, sizeof(line), f) != NULL && sscanf(line, "pdl %d", &p) == 1 && knob_ok(p, 0, 1);
    int am = 0;
    ok = ok && fgets(line, sizeof(line), f) != NULL && sscanf(line, "att_mma %d", &am) == 1 && knob_ok(am, 0, 1);
    cu_knobs got[CU_GRAPH_BUCKETS];
    for (int bi = 0; bi < n_buckets && ok; bi++) {
        int B = 0;
        cu_knobs v;
        ok = fgets(line, sizeof(line), f) != NULL &&
             sscanf(line, "bucket %d %d %d %d %d %d %d %d %d %d", &B, &v.gemv_max, &v.gemv_max_q8, &v.gemv_max_q4,
                    &v.dp4a, &v.shape_r, &v.shape_u, &v.tc_max, &v.tc_max_q, &v.fuse) == 10 &&
             B == cuda_bucket_size(bi) && knob_ok(v.gemv_max, 0, 1 << 20) && knob_ok(v.gemv_max_q8, 0, 1 << 20) &&
             knob_ok(v.gemv_max_q4, 0, 1 << 20) && knob_ok(v.dp4a, 0, 1) && knob_ok(v.tc_max, 0, 1 << 20) &&
             knob_ok(v.tc_max_q, 0, 1 << 20) && knob_ok(v.fuse, 0, 1) &&
             ((v.shape_r == 0 && v.shape_u == 0) || cuda_gemv_shape_ok(v.shape_r, v.shape_u));
        if (ok)
            got[bi] = v;
    }
    fclose(f);
    if (!ok) {
        fprintf(stderr, "cuda: %s holds no kernel tuning for this device, library, model and batch limit (or is "
                "damaged): timing again\n", file);
        return -1;
    }
    memcpy(k, got, (size_t)n_buckets * sizeof(*k));
    *pdl = p;
    *att_mma = am;
    return 0;
}

static void tune_write(const char *file, const char *key, const cu_knobs *k, const float *ms, int n_buckets,
                       int pdl, int att_mma)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", file, (int)getpid()) >= (int)sizeof(tmp))
        return;
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        fprintf(stderr, "cuda: cannot write the kernel tuning file %s: %s\n", tmp, strerror(errno));
        return;
    }
    fprintf(f, TUNE_FILE_MAGIC "\nkey %s\npdl %d\natt_mma %d\n", key, pdl, att_mma);
    for (int bi = 0; bi < n_buckets; bi++)
        fprintf(f, "bucket %d %d %d %d %d %d %d %d %d %d %.4f\n", cuda_bucket_size(bi), k[bi].gemv_max,
                k[bi].gemv_max_q8, k[bi].gemv_max_q4, k[bi].dp4a, k[bi].shape_r, k[bi].shape_u, k[bi].tc_max,
                k[bi].tc_max_q, k[bi].fuse, (double)ms[bi]);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, file) != 0) {
        fprintf(stderr, "cuda: cannot write the kernel tuning file %s\n", file);
        remove(tmp);
    }
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Prefill attention: the wmma kernel, or the mma.sync one when it is more than 1% faster, on one prefill step of
 * n tokens of one sequence (token 0 at positions 0..n-1 in the pool's first blocks, and in the window pool's
 * where there is one, which nothing holds yet at init; the last token's logits copied back), the median of
 * t->reps after one untimed run each. Sets st->att_mma. 0, or -1 on an error that leaves the device unusable. */
static int tune_prefill(tuner *t, llm_err *err)
{
    cu_state *st = t->st;
    const char *pe = getenv("LLM_CUDA_TUNE_PREFILL");
    int n = pe != NULL ? atoi(pe) : 512, bs = st->block_size;
    if (n > st->kv_blocks * bs)
        n = st->kv_blocks * bs;
    if (st->swa_blocks > 0 && n > st->swa_blocks * bs)
        n = st->swa_blocks * bs;
    if (n > st->m->cfg.seq_len)
        n = st->m->cfg.seq_len;
    st->att_mma = 0;
    if (n < 2)
        return 0;
    int nb = (n + bs - 1) / bs;
    int32_t *ints = (int32_t *)calloc((size_t)(3 * n + nb), sizeof(int32_t));
    uint8_t *want = (uint8_t *)calloc((size_t)n, 1);
    float *logits = (float *)malloc((size_t)st->m->cfg.vocab_size * sizeof(float));
    if (ints == NULL || want == NULL || logits == NULL) {
        free(ints);
        free(want);
        free(logits);
        fprintf(stderr, "cuda: tune prefill attention: out of host memory -> wmma\n");
        return 0;
    }
    int32_t *tok = ints, *pos = ints + n, *seq = ints + 2 * n, *blocks = ints + 3 * n;
    for (int i = 0; i < n; i++)
        pos[i] = i;
    for (int i = 0; i < nb; i++)
        blocks[i] = i;
    want[n - 1] = 1;
    llm_seq_view sv = { blocks, nb, st->swa_blocks > 0 ? blocks : NULL };
    llm_batch b = { n, tok, pos, seq, want, 1, &sv };
    cuda_knobs_set(st, &st->tune.def);
    static const char *const name[2] = { "wmma", "mma" };
    float ms[2] = { -1.0f, -1.0f };
    char why[160] = "";
    int rc = 0;
    for (int v = 0; v < 2 && rc == 0; v++) {
        st->att_mma = v;
        float tv[TUNE_MAX_REPS];
        for (int r = -1; r < t->reps && rc == 0; r++) {
            llm_err qerr;
            double a = wall_s();
            if (cuda_forward_eager(st, &b, logits, &qerr) != 0) {
                cudaError_t e = cudaDeviceSynchronize();
                if (e == cudaSuccess)
                    e = cudaGetLastError();
                if (e != cudaSuccess) {
                    llm_err_set(err, "cuda backend: kernel tuning, prefill attention (%s kernel, %d tokens): %s "
                                "(start with --kernel-tune off to skip the tuning)", name[v], n, cudaGetErrorString(e));
                    rc = -1;
                } else {
                    snprintf(why, sizeof(why), "%s: %.140s", name[v], qerr.msg);
                    rc = 1;
                }
            } else if (r >= 0) {
                tv[r] = (float)((wall_s() - a) * 1e3);
            }
        }
        if (rc == 0) {
            qsort(tv, (size_t)t->reps, sizeof(float), cmp_float);
            ms[v] = tv[t->reps / 2];
        }
    }
    st->mm.nomem = 0;
    free(ints);
    free(want);
    free(logits);
    st->att_mma = rc == 0 && ms[1] < 0.99f * ms[0];
    if (rc > 0)
        fprintf(stderr, "cuda: tune prefill attention, %d tokens: cannot run (%s) -> wmma\n", n, why);
    else if (rc == 0)
        fprintf(stderr, "cuda: tune prefill attention, %d tokens, ms a step: wmma %.3f, mma %.3f -> %s\n", n,
                (double)ms[0], (double)ms[1], name[st->att_mma]);
    return rc < 0 ? -1 : 0;
}

int cuda_tune_run(cu_state *st, int max_batch, int reps, const char *file, llm_err *err)
{
    const double t0 = wall_s();
    int n_buckets = cuda_bucket_index(max_batch < 1 ? 1 : max_batch) + 1;
    cu_tune *T = &st->tune;
    for (int bi = 0; bi < CU_GRAPH_BUCKETS; bi++)
        T->k[bi] = T->def;
    char key[768];
    tune_key(st, max_batch, key, sizeof(key));
    int pdl = 0, att_mma = 0;
    if (file != NULL && tune_read(file, key, T->k, n_buckets, &pdl, &att_mma) == 0) {
        cuda_set_pdl(pdl);
        if (st->att_mma_tune)
            st->att_mma = att_mma;
        T->on = 1;
        T->seconds = wall_s() - t0;
        fprintf(stderr, "cuda: kernel tuning read from %s (batch sizes 1-%d, programmatic dependent launch %s, "
                "prefill attention %s)\n", file, cuda_bucket_size(n_buckets - 1), pdl ? "on" : "off",
                st->att_mma ? "mma" : "wmma");
        return 0;
    }
    tuner t;
    memset(&t, 0, sizeof(t));
    t.st = st;
    t.reps = reps < 1 ? 1 : reps > TUNE_MAX_REPS ? TUNE_MAX_REPS : reps;
    t.classes = model_classes(st);
    if (cudaEventCreate(&t.e0) != cudaSuccess || cudaEventCreate(&t.e1) != cudaSuccess) {
        llm_err_set(err, "cuda backend: kernel tuning: cannot create events");
        return -1;
    }
    float ms[CU_GRAPH_BUCKETS];
    int rc = 0;
    cuda_set_pdl(0);
    for (int bi = 0; bi < n_buckets && rc == 0; bi++) {
        int B = cuda_bucket_size(bi);
        rc = tune_bucket(&t, B, &T->k[bi], &ms[bi], err);
        float def_ms = t.n_tried > 0 ? t.tried_ms[0] : -1.0f;
        if (rc == 0 && ms[bi] < 0) {
            fprintf(stderr, "cuda: tune %d token%s: %s -> nothing could run, the defaults stay\n", B,
                    B == 1 ? "" : "s", t.log);
        } else if (rc == 0) {
            char d[128];
            describe(&T->k[bi], t.classes, B, d, sizeof(d));
            fprintf(stderr, "cuda: tune %d token%s, ms a step: %s -> %s (%.3f ms, %.2fx the default)\n", B,
                    B == 1 ? "" : "s", t.log, d, (double)ms[bi],
                    def_ms > 0 && isfinite(def_ms) ? (double)(def_ms / ms[bi]) : 0.0);
        }
    }
    /* Programmatic dependent launch: one switch for every kernel; kept when the tuned steps are more than 2%
     * faster on average with it. */
    double ratio = 0.0;
    int n_ratio = 0;
    cuda_set_pdl(1);
    for (int bi = 0; bi < n_buckets && rc == 0; bi++) {
        if (ms[bi] <= 0)
            continue;
        float v = 0.0f;
        char why[160] = "";
        int r = time_step(&t, cuda_bucket_size(bi), &T->k[bi], "programmatic dependent launch", &v, why,
                          sizeof(why), err);
        if (r < 0)
            rc = -1;
        if (r != 0) { /* cannot run with it (e.g. a capture refused): off */
            if (r > 0)
                fprintf(stderr, "cuda: tune programmatic dependent launch: cannot run (%s) -> off\n", why);
            n_ratio = 0;
            break;
        }
        ratio += (double)(v / ms[bi]);
        n_ratio++;
    }
    pdl = rc == 0 && n_ratio > 0 && ratio / n_ratio < 0.98;
    cuda_set_pdl(pdl);
    cudaEventDestroy(t.e0);
    cudaEventDestroy(t.e1);
    if (rc != 0)
        return -1;
    if (n_ratio > 0)
        fprintf(stderr, "cuda: tune programmatic dependent launch: steps take %.3fx the time with it -> %s\n",
                ratio / n_ratio, pdl ? "on" : "off");
    if (st->att_mma_tune && tune_prefill(&t, err) != 0)
        return -1;
    /* The paths that lost may have grown the products' scratch (a dequantised copy of the largest matrix):
     * let it grow again to what the chosen ones need. */
    cuda_matmul_release(&st->mm);
    st->launches_b1 = st->launches_bn = 0; /* LLM_CUDA_STATS counts the steps served, not these */
    st->bn = 0;
    T->on = 1;
    T->seconds = wall_s() - t0;
    fprintf(stderr, "cuda: kernel tuning took %.2f s\n", T->seconds);
    if (file != NULL)
        tune_write(file, key, T->k, ms, n_buckets, pdl, st->att_mma);
    return 0;
}
