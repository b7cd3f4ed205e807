/* Engine side of the shared-memory protocol (see llm_server.h, shm/README.md). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall(futex), getrandom, abstract sockets; nginx builds us without it */
#endif
#include "llm_server.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct llm_server {
    llm_shm_map map;
    char        path[80];
    int         sock;            /* unbound datagram socket for wake-ups */
    uint64_t    reap_interval_ns;
    uint64_t    last_reap_ns;
    int         reap_due;        /* a wake-up bounced: scan soon */
    uint32_t    n_slots;
};

/* One datagram to a waiter's abstract socket. Returns 0, or -1 if nobody listens there. */
static int send_wake(int sock, const llm_shm_waiter *w)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t n = strnlen(w->sock, sizeof w->sock);
    if (n == 0 || n >= sizeof w->sock)
        return -1;
    memcpy(a.sun_path + 1, w->sock, n); /* abstract namespace: leading NUL */
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    char b = 1;
    if (sendto(sock, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&a, len) < 0)
        return errno == EAGAIN ? 0 : -1; /* a full queue already holds a wake-up */
    return 0;
}

static void wake_all(int sock, llm_shm_map *m)
{
    for (uint32_t i = 0; i < m->hdr->caps.n_waiters; i++) {
        llm_shm_waiter *w = &m->waiters[i];
        if (LLM_WAITER_STATE(atomic_load(&w->word)) == LLM_WAITER_ACTIVE)
            send_wake(sock, w);
    }
}

/* Wake the owner of a slot if it said it is about to sleep; one datagram per sleep. */
static void notify(llm_server *s, uint32_t owner)
{
    if (owner >= s->map.hdr->caps.n_waiters)
        return;
    llm_shm_waiter *w = &s->map.waiters[owner];
    /* Pairs with llm_client_arm: it stores waiting = 1 then reads the streams. */
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&w->waiting, memory_order_relaxed))
        return;
    if (!atomic_exchange(&w->waiting, 0))
        return;
    atomic_fetch_add_explicit(&s->map.metrics->notifies_sent, 1, memory_order_relaxed);
    if (send_wake(s->sock, w) < 0)
        s->reap_due = 1;
}

static uint64_t new_generation(void)
{
    uint64_t g = 0;
    if (getrandom(&g, sizeof g, GRND_NONBLOCK) != (ssize_t)sizeof g) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        g = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    }
    g ^= (uint64_t)getpid() << 40;
    return g ? g : 1;
}

/* Retire a segment left by an earlier engine. -1 if its engine is alive and !force. */
static int retire_old(llm_server *s, const char *name, int force, char *err, size_t cap)
{
    llm_shm_map old;
    char e[256];
    int rc = llm_shm_open_map(name, &old, e, sizeof e);
    if (rc == LLM_SHM_OK) {
        llm_shm_header *h = old.hdr;
        uint32_t st = atomic_load(&h->state);
        uint64_t age = llm_shm_now_ns() - atomic_load(&h->heartbeat_ns);
        if (!force && st != LLM_ENGINE_STOPPED && h->engine_pid != getpid() &&
            llm_shm_pid_alive(h->engine_pid) && age < 5000000000ull) {
            snprintf(err, cap, "%s: engine pid %d is alive and serving; not taking over", s->path,
                     h->engine_pid);
            llm_shm_unmap(&old);
            return -1;
        }
        /* Its clients see STOPPED and end their requests with ENGINE_GONE. */
        atomic_store(&h->state, LLM_ENGINE_STOPPED);
        wake_all(s->sock, &old);
        llm_shm_unmap(&old);
    }
    if (shm_unlink(s->path) < 0 && errno != ENOENT) {
        snprintf(err, cap, "%s: cannot remove stale segment: %s", s->path, strerror(errno));
        return -1;
    }
    return 0;
}

int llm_server_retire(const char *name, char *err, size_t cap)
{
    llm_server tmp;
    memset(&tmp, 0, sizeof tmp);
    if (llm_shm_path(name, tmp.path, sizeof tmp.path) < 0) {
        snprintf(err, cap, "bad segment name '%s'", name ? name : "(null)");
        return -1;
    }
    tmp.sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (tmp.sock < 0) {
        snprintf(err, cap, "socket: %s", strerror(errno));
        return -1;
    }
    int rc = retire_old(&tmp, name, 1, err, cap);
    close(tmp.sock);
    return rc;
}

llm_server *llm_server_create(const llm_server_config *cfg, char *err, size_t cap)
{
    llm_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    s->map.fd = -1;
    s->sock = -1;
    llm_shm_header lay;
    memset(&lay, 0, sizeof lay);
    if (llm_shm_path(cfg->name, s->path, sizeof s->path) < 0) {
        snprintf(err, cap, "bad segment name '%s' (1..%d chars, no '/')", cfg->name ? cfg->name : "(null)",
                 LLM_SHM_MAX_NAME - 1);
        goto fail;
    }
    if (llm_shm_layout(&cfg->caps, &lay, err, cap) < 0)
        goto fail;
    s->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->sock < 0) {
        snprintf(err, cap, "socket: %s", strerror(errno));
        goto fail;
    }
    if (retire_old(s, cfg->name, cfg->force, err, cap) < 0)
        goto fail;
    int fd = shm_open(s->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, cfg->mode ? cfg->mode : 0600);
    if (fd < 0) {
        snprintf(err, cap, "%s: shm_open: %s", s->path, strerror(errno));
        goto fail;
    }
    s->map.fd = fd;
    if (cfg->mode)
        fchmod(fd, cfg->mode); /* not subject to the umask */
    if (ftruncate(fd, (off_t)lay.total_size) < 0) {
        snprintf(err, cap, "%s: ftruncate %llu: %s", s->path, (unsigned long long)lay.total_size,
                 strerror(errno));
        goto fail_unlink;
    }
    void *p = mmap(NULL, lay.total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        snprintf(err, cap, "%s: mmap: %s", s->path, strerror(errno));
        goto fail_unlink;
    }
    s->map.base = p;
    s->map.size = lay.total_size;
    /* ftruncate zeroed everything: every slot FREE, every waiter FREE, metrics 0. */
    llm_shm_header *h = (llm_shm_header *)p;
    memcpy(h, &lay, sizeof lay);
    h->version = LLM_SHM_VERSION;
    h->generation = new_generation();
    h->engine_pid = getpid();
    h->model = cfg->model;
    h->model.name[sizeof h->model.name - 1] = 0;
    if (h->model.n_eog > LLM_SHM_MAX_EOG)
        h->model.n_eog = LLM_SHM_MAX_EOG;
    snprintf(h->name, sizeof h->name, "%s", cfg->name);
    atomic_store(&h->state, LLM_ENGINE_STARTING);
    atomic_store(&h->heartbeat_ns, llm_shm_now_ns());
    llm_shm_bind(&s->map);
    llm_ring_init(s->map.ring, lay.caps.ring_size);
    s->n_slots = lay.caps.n_slots;
    s->reap_interval_ns = cfg->reap_interval_ns ? cfg->reap_interval_ns : 50000000ull;
    /* magic last: a client that sees it sees a complete header */
    __atomic_store_n(&h->magic, LLM_SHM_MAGIC, __ATOMIC_RELEASE);
    return s;

fail_unlink:
    shm_unlink(s->path);
fail:
    llm_server_destroy(s);
    return NULL;
}

void llm_server_destroy(llm_server *s)
{
    if (!s)
        return;
    if (s->map.base) {
        atomic_store(&s->map.hdr->state, LLM_ENGINE_STOPPED);
        wake_all(s->sock, &s->map);
        /* unlink only if the name still points at our segment (not a successor's) */
        struct stat mine, named;
        int fd = shm_open(s->path, O_RDONLY | O_CLOEXEC, 0);
        if (fd >= 0) {
            if (fstat(fd, &named) == 0 && fstat(s->map.fd, &mine) == 0 && named.st_ino == mine.st_ino &&
                named.st_dev == mine.st_dev)
                shm_unlink(s->path);
            close(fd);
        }
    }
    llm_shm_unmap(&s->map);
    if (s->sock >= 0)
        close(s->sock);
    free(s);
}

llm_shm_map *llm_server_map(llm_server *s) { return &s->map; }
uint64_t llm_server_generation(const llm_server *s) { return s->map.hdr->generation; }

void llm_server_set_state(llm_server *s, llm_engine_state st)
{
    atomic_store(&s->map.hdr->state, (uint32_t)st);
    if (st == LLM_ENGINE_STOPPED)
        wake_all(s->sock, &s->map);
}

void llm_server_heartbeat(llm_server *s)
{
    atomic_store_explicit(&s->map.hdr->heartbeat_ns, llm_shm_now_ns(), memory_order_relaxed);
}

static int ring_ready(llm_server *s)
{
    return llm_ring_ready(s->map.ring, s->map.hdr->caps.ring_size);
}

int llm_server_wait(llm_server *s, int timeout_ms)
{
    llm_shm_header *h = s->map.hdr;
    llm_server_heartbeat(s);
    uint32_t v = atomic_load(&h->doorbell);
    atomic_store(&h->engine_sleeping, 1);
    if (ring_ready(s) || timeout_ms == 0) {
        atomic_store(&h->engine_sleeping, 0);
        return ring_ready(s);
    }
    llm_futex_wait(&h->doorbell, v, timeout_ms);
    atomic_store(&h->engine_sleeping, 0);
    llm_server_heartbeat(s);
    return ring_ready(s);
}

static llm_shm_slot *slot_at(llm_server *s, uint32_t i)
{
    return i < s->n_slots ? llm_shm_slot_at(&s->map, i) : NULL;
}

/* The engine frees a slot the client let go (or whose owner died). */
static void free_slot(llm_server *s, llm_shm_slot *sl, uint32_t expect_word)
{
    if (atomic_compare_exchange_strong(&sl->word, &expect_word, LLM_SLOT_FREE))
        atomic_fetch_sub(&s->map.metrics->slots_in_use, 1);
}

/* End a slot that never ran (cancelled in the queue, malformed). */
static void end_unrun(llm_server *s, llm_shm_slot *sl, uint32_t w, uint32_t st, uint32_t finish, int32_t error)
{
    llm_shm_metrics *m = s->map.metrics;
    atomic_fetch_add(st == LLM_SLOT_CANCELLED ? &m->cancelled : &m->failed, 1);
    if (w & LLM_SLOT_DETACHED) {
        free_slot(s, sl, w);
        return;
    }
    sl->finish = finish;
    sl->error = error;
    uint32_t nw = LLM_SLOT_WORD(st, LLM_SLOT_OWNER(w));
    if (atomic_compare_exchange_strong(&sl->word, &w, nw)) {
        notify(s, LLM_SLOT_OWNER(w));
        return;
    }
    /* the client detached meanwhile: the slot is ours to free */
    free_slot(s, sl, w);
}

int llm_server_pop(llm_server *s, uint32_t *slot)
{
    llm_shm_header *h = s->map.hdr;
    llm_shm_metrics *m = s->map.metrics;
    for (;;) {
        int64_t i = llm_ring_pop(s->map.ring, h->caps.ring_size);
        if (i < 0)
            return 0;
        llm_shm_slot *sl = slot_at(s, (uint32_t)i);
        if (!sl)
            continue; /* a corrupt descriptor: nothing to end */
        uint32_t w = atomic_load(&sl->word);
        for (;;) {
            if (LLM_SLOT_STATE(w) != LLM_SLOT_SUBMITTED)
                break; /* not a live submission (a client bug): ignore the descriptor */
            if ((w & LLM_SLOT_DETACHED) || atomic_load(&sl->cancel)) {
                end_unrun(s, sl, w, LLM_SLOT_CANCELLED, LLM_FINISH_CANCELLED, 0);
                break;
            }
            if (sl->n_prompt == 0 || LLM_SHM_PROMPT_WORDS(sl->n_prompt, sl->params.schema_len) > h->caps.max_prompt ||
                sl->params.max_tokens <= 0 || sl->params.n_stop > LLM_SHM_MAX_STOP) {
                end_unrun(s, sl, w, LLM_SLOT_FAILED, LLM_FINISH_ERROR, LLM_SHM_E_INVAL);
                break;
            }
            uint32_t nw = LLM_SLOT_WORD(LLM_SLOT_RUNNING, LLM_SLOT_OWNER(w));
            if (!atomic_compare_exchange_strong(&sl->word, &w, nw))
                continue; /* client detached or cancelled meanwhile: look again */
            uint64_t now = llm_shm_now_ns();
            sl->start_ns = now;
            sl->first_ns = sl->last_ns = 0;
            sl->n_generated = 0;
            sl->n_cached = 0;
            sl->n_result = 0;
            if (now > sl->submit_ns)
                llm_hist_observe(&m->queue_time, now - sl->submit_ns);
            atomic_fetch_add(&m->running, 1);
            atomic_fetch_add_explicit(&m->tokens_in, sl->n_prompt, memory_order_relaxed);
            *slot = (uint32_t)i;
            return 1;
        }
    }
}

const int32_t *llm_server_prompt(llm_server *s, uint32_t slot, uint32_t *n)
{
    llm_shm_slot *sl = slot_at(s, slot);
    if (!sl) {
        *n = 0;
        return NULL;
    }
    *n = sl->n_prompt;
    return llm_shm_prompt_of(&s->map, sl);
}

const llm_shm_params *llm_server_params(llm_server *s, uint32_t slot)
{
    llm_shm_slot *sl = slot_at(s, slot);
    return sl ? &sl->params : NULL;
}

void llm_server_set_cached(llm_server *s, uint32_t slot, uint32_t n)
{
    llm_shm_slot *sl = slot_at(s, slot);
    if (sl != NULL)
        sl->n_cached = n; /* published to the client by the next push's release */
}

const char *llm_server_schema(llm_server *s, uint32_t slot, uint32_t *len)
{
    llm_shm_slot *sl = slot_at(s, slot);
    *len = 0;
    if (sl == NULL || sl->params.schema_len == 0 ||
        LLM_SHM_PROMPT_WORDS(sl->n_prompt, sl->params.schema_len) > s->map.hdr->caps.max_prompt)
        return NULL;
    *len = sl->params.schema_len;
    return (const char *)(llm_shm_prompt_of(&s->map, sl) + sl->n_prompt);
}

uint64_t llm_server_tag(llm_server *s, uint32_t slot)
{
    llm_shm_slot *sl = slot_at(s, slot);
    return sl ? sl->tag : 0;
}

int llm_server_cancelled(llm_server *s, uint32_t slot)
{
    llm_shm_slot *sl = slot_at(s, slot);
    if (!sl)
        return 1;
    return atomic_load_explicit(&sl->cancel, memory_order_acquire) ||
           (atomic_load_explicit(&sl->word, memory_order_relaxed) & LLM_SLOT_DETACHED);
}

uint32_t llm_server_stream_space(llm_server *s, uint32_t slot)
{
    llm_shm_slot *sl = slot_at(s, slot);
    if (!sl)
        return 0;
    uint64_t hd = atomic_load_explicit(&sl->stream_head, memory_order_relaxed);
    uint64_t tl = atomic_load_explicit(&sl->stream_tail, memory_order_acquire);
    uint64_t used = hd - tl;
    uint32_t capn = s->map.hdr->caps.stream_cap;
    return used >= capn ? 0 : (uint32_t)(capn - used);
}

int llm_server_push(llm_server *s, uint32_t slot, int32_t id, float logprob, const llm_shm_logprob *top,
                    uint32_t n_top)
{
    return llm_server_push_ex(s, slot, id, logprob, top, n_top, 0);
}

int llm_server_push_ex(llm_server *s, uint32_t slot, int32_t id, float logprob, const llm_shm_logprob *top,
                       uint32_t n_top, uint32_t flags)
{
    llm_shm_slot *sl = slot_at(s, slot);
    if (!sl)
        return LLM_SHM_E_INVAL;
    uint32_t w = atomic_load_explicit(&sl->word, memory_order_relaxed);
    if (LLM_SLOT_STATE(w) != LLM_SLOT_RUNNING)
        return LLM_SHM_E_INVAL;
    if (llm_server_stream_space(s, slot) == 0)
        return LLM_SHM_E_STREAM_FULL;
    uint64_t hd = atomic_load_explicit(&sl->stream_head, memory_order_relaxed);
    llm_shm_entry *e = llm_shm_entry_of(&s->map, sl, hd);
    uint32_t nt = n_top < s->map.hdr->caps.max_top ? n_top : s->map.hdr->caps.max_top;
    if (!top)
        nt = 0;
    e->id = id;
    e->logprob = logprob;
    e->n_top = nt;
    e->flags = flags;
    if (nt)
        memcpy(e + 1, top, nt * sizeof *top);
    atomic_store_explicit(&sl->stream_head, hd + 1, memory_order_release);

    llm_shm_metrics *m = s->map.metrics;
    uint64_t now = llm_shm_now_ns();
    if (flags & LLM_ENTRY_PROMPT) {
        /* not a generated token */
    } else if (sl->n_generated == 0) {
        sl->first_ns = now;
        if (now > sl->submit_ns)
            llm_hist_observe(&m->ttft, now - sl->submit_ns);
    } else if (now > sl->last_ns) {
        llm_hist_observe(&m->tpot, now - sl->last_ns);
    }
    if (!(flags & LLM_ENTRY_PROMPT)) {
        sl->last_ns = now;
        sl->n_generated++;
        atomic_fetch_add_explicit(&m->tokens_out, 1, memory_order_relaxed);
    }
    if (!(w & LLM_SLOT_DETACHED))
        notify(s, LLM_SLOT_OWNER(w));
    return 0;
}

int llm_server_put_result(llm_server *s, uint32_t slot, const float *v, uint32_t n)
{
    llm_shm_slot *sl = slot_at(s, slot);
    if (!sl || LLM_SLOT_STATE(atomic_load(&sl->word)) != LLM_SLOT_RUNNING || n > LLM_SHM_RESULT_MAX(s->map.hdr) ||
        atomic_load(&sl->stream_head) != 0)
        return LLM_SHM_E_INVAL; /* the area holds tokens already (not an embedding), or n does not fit */
    memcpy(llm_shm_result_of(s->map.hdr, sl), v, (size_t)n * sizeof(float));
    sl->n_result = n; /* published by llm_server_finish's CAS (seq_cst) */
    return 0;
}

int llm_server_finish(llm_server *s, uint32_t slot, llm_finish_reason why, int32_t error)
{
    llm_shm_slot *sl = slot_at(s, slot);
    if (!sl)
        return LLM_SHM_E_INVAL;
    llm_shm_metrics *m = s->map.metrics;
    uint32_t w = atomic_load(&sl->word);
    if (LLM_SLOT_STATE(w) != LLM_SLOT_RUNNING)
        return LLM_SHM_E_INVAL;
    uint32_t st = why == LLM_FINISH_CANCELLED ? LLM_SLOT_CANCELLED
                : why == LLM_FINISH_ERROR     ? LLM_SLOT_FAILED
                                              : LLM_SLOT_FINISHED;
    atomic_fetch_add(st == LLM_SLOT_FINISHED ? &m->finished : st == LLM_SLOT_CANCELLED ? &m->cancelled : &m->failed, 1);
    atomic_fetch_sub(&m->running, 1);
    sl->finish = (uint32_t)why;
    sl->error = why == LLM_FINISH_ERROR ? error : 0;
    for (;;) {
        if (w & LLM_SLOT_DETACHED) {
            free_slot(s, sl, w);
            return 0;
        }
        uint32_t nw = LLM_SLOT_WORD(st, LLM_SLOT_OWNER(w));
        if (atomic_compare_exchange_strong(&sl->word, &w, nw)) {
            notify(s, LLM_SLOT_OWNER(w));
            return 0;
        }
    }
}

/* Reclaim one slot of a dead owner. Returns 1 if it was the owner's. */
static int reclaim_slot(llm_server *s, llm_shm_slot *sl, uint32_t slot, uint32_t owner)
{
    uint32_t w = atomic_load(&sl->word);
    for (;;) {
        uint32_t st = LLM_SLOT_STATE(w);
        if (st == LLM_SLOT_FREE || LLM_SLOT_OWNER(w) != owner || (w & LLM_SLOT_DETACHED))
            return 0;
        uint32_t nw;
        if (st == LLM_SLOT_RESERVED || LLM_SLOT_TERMINAL(st)) {
            nw = LLM_SLOT_FREE;
        } else if (st == LLM_SLOT_SUBMITTED) {
            /* Queued: the pop will free it. Not queued (owner died before its push, or
             * after a refused push): nobody else will, so free it now. */
            nw = llm_ring_contains(s->map.ring, s->map.hdr->caps.ring_size, slot) ? (w | LLM_SLOT_DETACHED)
                                                                                   : LLM_SLOT_FREE;
        } else { /* RUNNING: the scheduler sees the cancel and finishes it, which frees it */
            atomic_store(&sl->cancel, 1);
            nw = w | LLM_SLOT_DETACHED;
        }
        if (atomic_compare_exchange_strong(&sl->word, &w, nw)) {
            if (nw == LLM_SLOT_FREE)
                atomic_fetch_sub(&s->map.metrics->slots_in_use, 1);
            atomic_fetch_add(&s->map.metrics->reclaimed_slots, 1);
            return 1;
        }
    }
}

static int waiter_dead(llm_shm_waiter *w, uint64_t word)
{
    uint32_t st = LLM_WAITER_STATE(word);
    int pid = LLM_WAITER_PID(word);
    if (st == LLM_WAITER_GONE)
        return 1;
    if (!llm_shm_pid_alive(pid))
        return 1;
    if (st == LLM_WAITER_ACTIVE && w->starttime) {
        uint64_t now_start = llm_shm_proc_starttime(pid);
        if (now_start && now_start != w->starttime)
            return 1; /* the pid now belongs to another process */
    }
    return 0;
}

int llm_server_reap(llm_server *s, int force)
{
    uint64_t now = llm_shm_now_ns();
    if (!force && !s->reap_due && now - s->last_reap_ns < s->reap_interval_ns)
        return 0;
    s->last_reap_ns = now;
    s->reap_due = 0;
    int n = 0;
    llm_shm_header *h = s->map.hdr;
    for (uint32_t i = 0; i < h->caps.n_waiters; i++) {
        llm_shm_waiter *w = &s->map.waiters[i];
        uint64_t word = atomic_load(&w->word);
        if (LLM_WAITER_STATE(word) == LLM_WAITER_FREE || !waiter_dead(w, word))
            continue;
        for (uint32_t j = 0; j < s->n_slots; j++)
            n += reclaim_slot(s, llm_shm_slot_at(&s->map, j), j, i);
        /* Detached slots still name this waiter; they are the engine's now and never notify. */
        /* CLAIMING entries were never counted in the gauge */
        if (atomic_compare_exchange_strong(&w->word, &word, LLM_WAITER_WORD(LLM_WAITER_FREE, 0)) &&
            LLM_WAITER_STATE(word) != LLM_WAITER_CLAIMING)
            atomic_fetch_sub(&s->map.metrics->waiters, 1);
    }
    return n;
}
