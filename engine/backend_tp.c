/* Tensor parallelism: one model over several GPUs, one process each (rank r on device + r).
 *
 * The calling process is rank 0: it forks the other ranks first (before anything here touches CUDA, which a
 * forked child could not use), makes the communicator's id, and creates its own CUDA backend on its share of
 * the model (model_tp.c); each other rank does the same on its share and then follows: every forward call of
 * rank 0 is written into a shared-memory mailbox (the batch: tokens, positions, sequences, block tables) and
 * run by every rank at once, the collectives inside the step (kernels/cuda_tp.cu) keeping them in step. Only
 * rank 0's results are used; the others compute the same logits and keep only their argmax (no copies).
 * Their KV pools hold the same block ids: the pool is the smallest rank's.
 *
 * A rank that dies (or fails a step midway, LLM_BACKEND_BROKEN: the ranks are out of step for good) ends the whole
 * group: rank 0 exits, and the engine's supervisor starts a new worker; the other ranks die with rank 0
 * (PR_SET_PDEATHSIG). */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend_cuda_loader.h"
#include "backend_tp.h"
#include "model_tp.h"

#define BOX_BYTES ((size_t)256 << 20) /* the mailbox's batch area (pages used only as written) */

enum { CMD_FORWARD = 1, CMD_QUIT = 2 };

typedef struct {
    sem_t go[LLM_TP_MAX];       /* rank 0 -> rank r: the id is there (first), then a command is */
    sem_t taken[LLM_TP_MAX];    /* rank r -> rank 0: it has copied the command */
    sem_t ready;                /* each other rank, once its backend is up (or failed) */
    int   status[LLM_TP_MAX];   /* 0 up, -1 failed */
    int   kv_blocks[LLM_TP_MAX], swa_blocks[LLM_TP_MAX];
    char  msg[LLM_TP_MAX][512];
    unsigned char id[LLM_TP_ID_BYTES];
    int   cmd;
    size_t len;
    unsigned char buf[];        /* [BOX_BYTES] the batch */
} tp_box;

struct llm_tp_group {
    const llm_model *model;     /* whole */
    llm_backend_opts opts;
    llm_backend *inner;         /* rank 0's own CUDA backend */
    llm_model   *shard;
    tp_box      *box;
    int          size;
    pid_t        pid[LLM_TP_MAX];
    int          pending;       /* a command the others may not have copied yet */
    pthread_t    watcher;
    int          watching;
    volatile int quitting;
};

/* ---- the batch through the mailbox ---- */
typedef struct {
    unsigned char *p, *end;
} cursor;

static int put(cursor *c, const void *src, size_t n)
{
    if ((size_t)(c->end - c->p) < n)
        return -1;
    if (n > 0)
        memcpy(c->p, src, n);
    c->p += n;
    return 0;
}

static const void *take(cursor *c, size_t n)
{
    if ((size_t)(c->end - c->p) < n)
        return NULL;
    const void *r = c->p;
    c->p += n;
    return r;
}

static int put_batch(tp_box *box, const llm_batch *b)
{
    cursor c = { box->buf, box->buf + BOX_BYTES };
    int head[2] = { b->n_tokens, b->n_seqs };
    size_t n = (size_t)(b->n_tokens > 0 ? b->n_tokens : 0);
    if (put(&c, head, sizeof(head)) || put(&c, b->tokens, n * 4) || put(&c, b->pos, n * 4) ||
        put(&c, b->seq, n * 4) || put(&c, b->want_logits, n))
        return -1;
    for (int s = 0; s < b->n_seqs; s++) {
        const llm_seq_view *v = &b->seqs[s];
        int sh[2] = { v->n_blocks, v->swa_blocks != NULL };
        size_t nb = (size_t)(v->n_blocks > 0 ? v->n_blocks : 0);
        if (put(&c, sh, sizeof(sh)) || put(&c, v->blocks, nb * 4) || (sh[1] && put(&c, v->swa_blocks, nb * 4)))
            return -1;
    }
    box->len = (size_t)(c.p - box->buf);
    return 0;
}

/* A follower's copy of the batch (its arrays point into its own copy of the mailbox bytes). */
typedef struct {
    unsigned char *bytes; size_t cap;
    llm_seq_view  *seqs; int seq_cap;
    llm_batch      b;
} tp_copy;

static int get_batch(const tp_box *box, tp_copy *k)
{
    if (box->len > k->cap) {
        unsigned char *nb = realloc(k->bytes, box->len);
        if (nb == NULL)
            return -1;
        k->bytes = nb;
        k->cap = box->len;
    }
    memcpy(k->bytes, box->buf, box->len);
    cursor c = { k->bytes, k->bytes + box->len };
    const int *head = take(&c, 2 * sizeof(int));
    if (head == NULL || head[0] < 0 || head[1] < 0)
        return -1;
    size_t n = (size_t)head[0];
    llm_batch *b = &k->b;
    b->n_tokens = head[0];
    b->n_seqs = head[1];
    b->tokens = take(&c, n * 4);
    b->pos = take(&c, n * 4);
    b->seq = take(&c, n * 4);
    b->want_logits = take(&c, n);
    if ((n > 0 && (!b->tokens || !b->pos || !b->seq || !b->want_logits)))
        return -1;
    if (b->n_seqs > k->seq_cap) {
        llm_seq_view *ns = realloc(k->seqs, (size_t)b->n_seqs * sizeof(*ns));
        if (ns == NULL)
            return -1;
        k->seqs = ns;
        k->seq_cap = b->n_seqs;
    }
    for (int s = 0; s < b->n_seqs; s++) {
        const int *sh = take(&c, 2 * sizeof(int));
        if (sh == NULL || sh[0] < 0)
            return -1;
        k->seqs[s].n_blocks = sh[0];
        k->seqs[s].blocks = take(&c, (size_t)sh[0] * 4);
        k->seqs[s].swa_blocks = sh[1] ? take(&c, (size_t)sh[0] * 4) : NULL;
        if ((sh[0] > 0 && k->seqs[s].blocks == NULL) || (sh[1] && sh[0] > 0 && k->seqs[s].swa_blocks == NULL))
            return -1;
    }
    b->seqs = k->seqs;
    return 0;
}

/* ---- the other ranks ---- */
static void follower_fail(tp_box *box, int rank, const char *msg)
{
    snprintf(box->msg[rank], sizeof(box->msg[rank]), "%s", msg);
    box->status[rank] = -1;
}

/* One forward call as rank 0 made it: its logits rows are kept only as their argmax on the device. */
static int follower_step(llm_backend *be, const llm_batch *b, float **logits, size_t *lcap, uint8_t **mode,
                         int32_t **ids, float **lp, int *cap, llm_err *err)
{
    int n = b->n_tokens, nw = 0, nl = 0;
    for (int i = 0; i < n; i++) {
        nw += b->want_logits[i] != 0;
        nl += b->want_logits[i] == 1;
    }
    const int vocab = be->model->cfg.vocab_size;
    /* graph steps want an output buffer even where every row stays on the device; hidden rows are written */
    size_t need = (size_t)(nw > 0 ? nw : 1) * (size_t)vocab;
    if (need > *lcap) {
        float *nb = realloc(*logits, need * sizeof(float));
        if (nb == NULL)
            return -1;
        *logits = nb;
        *lcap = need;
    }
    if (n > *cap) {
        uint8_t *m = realloc(*mode, (size_t)n);
        if (m != NULL)
            *mode = m;
        int32_t *d = realloc(*ids, (size_t)n * sizeof(int32_t));
        if (d != NULL)
            *ids = d;
        float *l = realloc(*lp, (size_t)n * sizeof(float));
        if (l != NULL)
            *lp = l;
        if (m == NULL || d == NULL || l == NULL)
            return -1;
        *cap = n;
    }
    if (nl == 0 || be->forward_device == NULL)
        return be->ops->forward(be, b, *logits, err);
    for (int i = 0; i < n; i++)
        (*mode)[i] = b->want_logits[i] == 1 ? LLM_ROW_ARGMAX : LLM_ROW_LOGITS;
    llm_device_out dv;
    memset(&dv, 0, sizeof(dv));
    dv.mode = *mode;
    dv.ids = *ids;
    dv.logprob = *lp;
    return be->forward_device(be, b, &dv, *logits, err);
}

static void follower(tp_box *box, const llm_model *m, const llm_backend_opts *o, int rank)
{
    llm_err err = { { 0 } };
    /* a stop signal for the whole group (systemd's, a terminal's ^C) is rank 0's to act on: it drains the
     * requests, then tells the others to quit (or they die with it) */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    sem_wait(&box->go[rank]); /* the id */
    llm_model *shard = llm_model_tp_shard(m, rank, o->tp_size, o->tp_ep, &err);
    llm_backend_opts ro = *o;
    ro.tp_rank = rank;
    ro.device = o->device + rank;
    memcpy(ro.tp_id, box->id, sizeof(ro.tp_id));
    llm_backend *be = shard != NULL ? llm_backend_create_single("cuda", shard, &ro, &err) : NULL;
    if (be == NULL) {
        follower_fail(box, rank, err.msg);
        sem_post(&box->ready);
        _exit(1);
    }
    box->kv_blocks[rank] = be->opts.kv_blocks;
    box->swa_blocks[rank] = be->opts.swa_blocks;
    box->status[rank] = 0;
    sem_post(&box->ready);
    tp_copy k;
    memset(&k, 0, sizeof(k));
    float *logits = NULL;
    size_t lcap = 0;
    uint8_t *mode = NULL;
    int32_t *ids = NULL;
    float *lp = NULL;
    int cap = 0;
    for (;;) {
        while (sem_wait(&box->go[rank]) != 0 && errno == EINTR)
            ;
        int cmd = box->cmd;
        int ok = cmd != CMD_FORWARD || get_batch(box, &k) == 0;
        sem_post(&box->taken[rank]);
        if (cmd == CMD_QUIT)
            break;
        if (!ok) { /* (cannot happen but out of memory; then this rank cannot follow) */
            follower_fail(box, rank, "out of memory for a copy of the batch");
            _exit(1);
        }
        if (follower_step(be, &k.b, &logits, &lcap, &mode, &ids, &lp, &cap, &err) == LLM_BACKEND_BROKEN) {
            follower_fail(box, rank, err.msg);
            _exit(1);
        }
    }
    llm_backend_free(be);
    llm_model_tp_free(shard);
    _exit(0);
}

/* ---- rank 0 ---- */
static void *watch(void *arg)
{
    llm_tp_group *t = arg;
    while (!t->quitting) {
        for (int r = 1; r < t->size && !t->quitting; r++) {
            int stv = 0;
            if (t->pid[r] > 0 && waitpid(t->pid[r], &stv, WNOHANG) == t->pid[r]) {
                t->pid[r] = -1;
                if (t->quitting)
                    break;
                const char *msg = t->box->status[r] != 0 ? t->box->msg[r] : "";
                fprintf(stderr, "tensor parallel: rank %d (device %d) %s %d%s%s; the ranks cannot go on: exiting\n", r,
                        t->opts.device + r, WIFSIGNALED(stv) ? "was killed by signal" : "exited with status",
                        WIFSIGNALED(stv) ? WTERMSIG(stv) : WEXITSTATUS(stv), msg[0] ? ": " : "", msg);
                _exit(1);
            }
        }
        struct timespec ts = { 0, 100 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void end_followers(llm_tp_group *t, int kill_them)
{
    t->quitting = 1;
    if (t->watching) {
        pthread_join(t->watcher, NULL);
        t->watching = 0;
    }
    for (int r = 1; r < t->size; r++) {
        if (t->pid[r] <= 0)
            continue;
        int done = 0;
        for (int i = 0; i < 50 && !kill_them && !done; i++) { /* up to 5 s to free their devices */
            done = waitpid(t->pid[r], NULL, WNOHANG) == t->pid[r];
            if (!done) {
                struct timespec ts = { 0, 100 * 1000 * 1000 };
                nanosleep(&ts, NULL);
            }
        }
        if (!done) {
            kill(t->pid[r], SIGKILL);
            waitpid(t->pid[r], NULL, 0);
        }
        t->pid[r] = -1;
    }
}

static void tp_free_impl(llm_tp_group *t, int kill_them)
{
    end_followers(t, kill_them);
    llm_backend_free(t->inner);
    llm_model_tp_free(t->shard);
    if (t->box != NULL)
        munmap(t->box, sizeof(tp_box) + BOX_BYTES);
    free(t);
}

/* Waits until every other rank has copied the last command, so the mailbox can take the next. */
static void wait_taken(llm_tp_group *t)
{
    for (int r = 1; r < t->size && t->pending; r++)
        while (sem_wait(&t->box->taken[r]) != 0 && errno == EINTR)
            ;
    t->pending = 0;
}

static void send_cmd(llm_tp_group *t, int cmd)
{
    t->box->cmd = cmd;
    for (int r = 1; r < t->size; r++)
        sem_post(&t->box->go[r]);
    t->pending = 1;
}

/* Hands the batch to the other ranks (0), or -1 + err before any of them saw it. */
static int send_batch(llm_tp_group *t, const llm_batch *batch, llm_err *err)
{
    wait_taken(t);
    if (put_batch(t->box, batch) != 0) {
        llm_seterr(err, "tensor parallel: a batch of %d tokens does not fit the %zu MiB mailbox", batch->n_tokens,
                   BOX_BYTES >> 20);
        return -1;
    }
    send_cmd(t, CMD_FORWARD);
    return 0;
}

/* rank 0's result of a step: a broken group cannot go on (the supervisor starts a new one) */
static int step_done(int rc, llm_err *err)
{
    if (rc == LLM_BACKEND_BROKEN) {
        fprintf(stderr, "tensor parallel: rank 0: %s; the ranks cannot go on: exiting\n", err->msg);
        _exit(1);
    }
    return rc;
}

static int tp_forward(llm_backend *b, const llm_batch *batch, float *logits, llm_err *err)
{
    llm_tp_group *t = b->impl;
    if (send_batch(t, batch, err) != 0)
        return -1;
    return step_done(t->inner->ops->forward(t->inner, batch, logits, err), err);
}

static int tp_forward_device(llm_backend *b, const llm_batch *batch, const llm_device_out *dv, float *logits,
                             llm_err *err)
{
    llm_tp_group *t = b->impl;
    if (send_batch(t, batch, err) != 0)
        return -1;
    return step_done(t->inner->forward_device(t->inner, batch, dv, logits, err), err);
}

static int tp_init(llm_backend *b, llm_err *err)
{
    (void)b;
    llm_seterr(err, "tensor parallel: created by llm_tp_backend_create only");
    return -1;
}

static void tp_destroy(llm_backend *b)
{
    llm_tp_group *t = b->impl;
    if (t == NULL)
        return;
    wait_taken(t);
    t->quitting = 1; /* before the ranks quit: the watcher must not take their exit for a failure */
    send_cmd(t, CMD_QUIT);
    wait_taken(t);
    tp_free_impl(t, 0);
    b->impl = NULL;
}

static const llm_backend_ops tp_ops = { "cuda", tp_init, tp_forward, tp_destroy };

/* Phase one: the mailbox, and the other ranks forked (they wait for the communicator's id). */
llm_tp_group *llm_tp_fork(const llm_model *m, const llm_backend_opts *o, llm_err *err)
{
    const int size = o->tp_size;
    if (llm_model_tp_check(m, size, o->tp_ep, err) != 0)
        return NULL;
    llm_tp_group *t = calloc(1, sizeof(*t));
    void *box = mmap(NULL, sizeof(tp_box) + BOX_BYTES, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t == NULL || box == MAP_FAILED) {
        free(t);
        if (box != MAP_FAILED)
            munmap(box, sizeof(tp_box) + BOX_BYTES);
        llm_seterr(err, "tensor parallel: out of memory");
        return NULL;
    }
    t->box = box;
    t->size = size;
    t->model = m;
    t->opts = *o;
    for (int r = 0; r < LLM_TP_MAX; r++) {
        sem_init(&t->box->go[r], 1, 0);
        sem_init(&t->box->taken[r], 1, 0);
    }
    sem_init(&t->box->ready, 1, 0);
    /* nothing in this process may have touched CUDA before a fork */
    fflush(NULL);
    pid_t leader = getpid();
    for (int r = 1; r < size; r++) {
        pid_t p = fork();
        if (p < 0) {
            llm_seterr(err, "tensor parallel: fork: %s", strerror(errno));
            tp_free_impl(t, 1);
            return NULL;
        }
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != leader)
                _exit(1);
            follower(t->box, m, o, r);
            _exit(0);
        }
        t->pid[r] = p;
    }
    if (pthread_create(&t->watcher, NULL, watch, t) == 0)
        t->watching = 1;
    return t;
}

void llm_tp_abandon(llm_tp_group *g)
{
    if (g != NULL)
        tp_free_impl(g, 1);
}

/* Phase two: the id to every rank, rank 0's own backend, and the others' reports. */
llm_backend *llm_tp_start(llm_tp_group *t, llm_err *err)
{
    const llm_model *m = t->model;
    const llm_backend_opts *o = &t->opts;
    const int size = t->size;
    llm_backend *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        llm_seterr(err, "tensor parallel: out of memory");
        tp_free_impl(t, 1);
        return NULL;
    }
    if (llm_cuda_tp_id(t->box->id, size, err) != 0) {
        tp_free_impl(t, 1);
        free(b);
        return NULL;
    }
    for (int r = 1; r < size; r++)
        sem_post(&t->box->go[r]);
    llm_backend_opts ro = *o;
    ro.tp_rank = 0;
    memcpy(ro.tp_id, t->box->id, sizeof(ro.tp_id));
    t->shard = llm_model_tp_shard(m, 0, size, o->tp_ep, err);
    if (t->shard == NULL || (t->inner = llm_backend_create_single("cuda", t->shard, &ro, err)) == NULL) {
        tp_free_impl(t, 1);
        free(b);
        return NULL;
    }
    for (int r = 1; r < size; r++)
        while (sem_wait(&t->box->ready) != 0 && errno == EINTR)
            ;
    b->ops = &tp_ops;
    b->model = m;
    b->opts = t->inner->opts;
    b->impl = t;
    for (int r = 1; r < size; r++) {
        if (t->box->status[r] != 0) {
            llm_seterr(err, "tensor parallel: rank %d: %s", r, t->box->msg[r]);
            b->impl = NULL;
            tp_free_impl(t, 1);
            free(b);
            return NULL;
        }
        if (t->box->kv_blocks[r] < b->opts.kv_blocks)
            b->opts.kv_blocks = t->box->kv_blocks[r];
        if (t->box->swa_blocks[r] < b->opts.swa_blocks)
            b->opts.swa_blocks = t->box->swa_blocks[r];
    }
    b->forward_device = t->inner->forward_device != NULL ? tp_forward_device : NULL;
    b->device_sampling = t->inner->device_sampling;
    b->tune_s = t->inner->tune_s;
    b->weight_bytes = t->inner->weight_bytes;
    const llm_config *k = &t->shard->cfg;
    char ffn[128];
    int dense = 0; /* a dense FFN or shared expert in some layer */
    for (int l = 0; l < m->cfg.n_layers; l++)
        dense |= m->layers[l].w_gate.data != NULL || m->layers[l].w_gate.src != NULL;
    int at = dense ? snprintf(ffn, sizeof(ffn), "%d of %d FFN columns", k->hidden_dim, m->cfg.hidden_dim) : 0;
    if (m->cfg.n_expert > 0 && k->expert_hi > 0)
        snprintf(ffn + at, sizeof(ffn) - (size_t)at, "%s%d of %d experts whole (expert parallel)", dense ? ", " : "",
                 k->expert_hi - k->expert_lo, m->cfg.n_expert);
    else if (m->cfg.n_expert > 0)
        snprintf(ffn + at, sizeof(ffn) - (size_t)at, "%s%d of %d columns of each of %d experts", dense ? ", " : "",
                 k->expert_ff, m->cfg.expert_ff, m->cfg.n_expert);
    fprintf(stderr, "tensor parallel: %s over %d GPUs (devices %d-%d), %d of %d query heads, %d of %d KV heads and "
            "%s each; KV pool %d blocks (the smallest rank's)\n", m->arch[0] ? m->arch : "model", size, o->device,
            o->device + size - 1, k->n_heads, m->cfg.n_heads, k->n_kv_heads, m->cfg.n_kv_heads, ffn,
            b->opts.kv_blocks);
    return b;
}

llm_backend *llm_tp_backend_create(const llm_model *m, const llm_backend_opts *o, llm_err *err)
{
    llm_tp_group *g = llm_tp_fork(m, o, err);
    return g != NULL ? llm_tp_start(g, err) : NULL;
}
