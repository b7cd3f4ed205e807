/* Client side of the shared-memory protocol (see llm_client.h, shm/README.md). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall(futex), getrandom, abstract sockets; nginx builds us without it */
#endif
#include "llm_client.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

struct llm_client {
    char        name[LLM_SHM_MAX_NAME];
    int         sock;
    char        sockname[56];
    llm_shm_map map;          /* base == NULL when not attached */
    int         dead;         /* the mapped segment's engine is gone */
    uint64_t    gen;
    uint32_t    waiter;
    uint32_t    n_slots;
    uint32_t   *own;          /* slots this client holds, n_own of them */
    int32_t    *own_pos;      /* slot -> index in own[], -1 if not ours */
    uint32_t   *own_ticket;   /* slot -> ticket of our handle */
    uint32_t    n_own;
    uint32_t    hint;         /* where the next reserve scan starts */
    uint64_t    stale_ns;
    uint64_t    last_check_ns;
};

llm_client *llm_client_new(const char *name, char *err, size_t cap)
{
    char path[80];
    if (llm_shm_path(name, path, sizeof path) < 0) {
        snprintf(err, cap, "bad segment name '%s'", name ? name : "(null)");
        return NULL;
    }
    llm_client *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    snprintf(c->name, sizeof c->name, "%s", name);
    c->map.fd = -1;
    c->stale_ns = 1000000000ull;
    c->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->sock < 0) {
        snprintf(err, cap, "socket: %s", strerror(errno));
        free(c);
        return NULL;
    }
    /* Abstract name: disappears with the process, so no file to clean up. */
    static _Atomic unsigned counter;
    uint32_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = (uint32_t)llm_shm_now_ns();
    snprintf(c->sockname, sizeof c->sockname, "llm-%.20s-%d-%u-%08x", name, (int)getpid(), counter++, rnd);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t n = strlen(c->sockname);
    memcpy(a.sun_path + 1, c->sockname, n);
    if (bind(c->sock, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0) {
        snprintf(err, cap, "bind wake-up socket: %s", strerror(errno));
        close(c->sock);
        free(c);
        return NULL;
    }
    c->hint = rnd;
    return c;
}

int llm_client_fd(const llm_client *c) { return c->sock; }
const llm_shm_map *llm_client_map(const llm_client *c) { return c->map.base ? &c->map : NULL; }
uint64_t llm_client_generation(const llm_client *c) { return c->map.base ? c->gen : 0; }
void llm_client_set_stale_ns(llm_client *c, uint64_t ns) { c->stale_ns = ns; }
uint32_t llm_client_in_flight(const llm_client *c) { return c->n_own; }

static void own_add(llm_client *c, uint32_t slot, uint32_t ticket)
{
    c->own_pos[slot] = (int32_t)c->n_own;
    c->own[c->n_own++] = slot;
    c->own_ticket[slot] = ticket;
}

static void own_del(llm_client *c, uint32_t slot)
{
    int32_t p = c->own_pos[slot];
    if (p < 0)
        return;
    uint32_t last = c->own[--c->n_own];
    c->own[p] = last;
    c->own_pos[last] = p;
    c->own_pos[slot] = -1;
}

/* Let go of one slot: free it if nobody else may touch it, else hand it to the engine. */
static void let_go(llm_client *c, llm_shm_slot *sl)
{
    uint32_t w = atomic_load(&sl->word);
    for (;;) {
        uint32_t st = LLM_SLOT_STATE(w);
        if (LLM_SLOT_OWNER(w) != c->waiter || st == LLM_SLOT_FREE || (w & LLM_SLOT_DETACHED))
            return; /* not ours any more (reclaimed) */
        uint32_t nw;
        if (st == LLM_SLOT_RESERVED || LLM_SLOT_TERMINAL(st)) {
            nw = LLM_SLOT_FREE;
        } else {
            atomic_store(&sl->cancel, 1);
            nw = w | LLM_SLOT_DETACHED;
        }
        if (atomic_compare_exchange_strong(&sl->word, &w, nw)) {
            if (nw == LLM_SLOT_FREE)
                atomic_fetch_sub(&c->map.metrics->slots_in_use, 1);
            else
                llm_shm_ring_doorbell(c->map.hdr, c->map.metrics);
            return;
        }
    }
}

/* Forget the mapping; if the segment is still usable, release our slots and waiter first. */
static void detach(llm_client *c, int tidy)
{
    if (!c->map.base)
        return;
    if (tidy) {
        for (uint32_t i = 0; i < c->n_own; i++)
            let_go(c, llm_shm_slot_at(&c->map, c->own[i]));
        llm_shm_waiter *w = &c->map.waiters[c->waiter];
        atomic_store(&w->word, LLM_WAITER_WORD(LLM_WAITER_GONE, getpid())); /* the engine frees it */
    }
    llm_shm_unmap(&c->map);
    free(c->own);
    free(c->own_pos);
    free(c->own_ticket);
    c->own = NULL;
    c->own_pos = NULL;
    c->own_ticket = NULL;
    c->n_own = 0;
}

void llm_client_free(llm_client *c)
{
    if (!c)
        return;
    detach(c, !c->dead);
    if (c->sock >= 0)
        close(c->sock);
    free(c);
}

static int engine_gone(llm_client *c, int force)
{
    llm_shm_header *h = c->map.hdr;
    if (atomic_load(&h->state) == LLM_ENGINE_STOPPED)
        return 1;
    uint64_t now = llm_shm_now_ns();
    if (!force && now - c->last_check_ns < 100000000ull) /* syscalls at most every 100 ms */
        return 0;
    c->last_check_ns = now;
    struct stat st;
    if (fstat(c->map.fd, &st) == 0 && st.st_nlink == 0)
        return 1; /* unlinked: the engine shut down or a successor replaced it */
    uint64_t beat = atomic_load(&h->heartbeat_ns);
    uint64_t age = now > beat ? now - beat : 0;
    return !llm_shm_pid_alive(h->engine_pid) && age >= c->stale_ns;
}

static int register_waiter(llm_client *c)
{
    uint32_t n = c->map.hdr->caps.n_waiters;
    int pid = getpid();
    uint64_t start = llm_shm_proc_starttime(pid);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (c->hint + k) % n;
        llm_shm_waiter *w = &c->map.waiters[i];
        uint64_t word = atomic_load(&w->word);
        if (LLM_WAITER_STATE(word) != LLM_WAITER_FREE)
            continue;
        /* CLAIMING carries our pid, so a reaper can free the entry if we die right here. */
        if (!atomic_compare_exchange_strong(&w->word, &word, LLM_WAITER_WORD(LLM_WAITER_CLAIMING, pid)))
            continue;
        w->gen++;
        w->starttime = start;
        memcpy(w->sock, c->sockname, sizeof w->sock);
        atomic_store(&w->waiting, 0);
        atomic_store(&w->word, LLM_WAITER_WORD(LLM_WAITER_ACTIVE, pid));
        atomic_fetch_add(&c->map.metrics->waiters, 1);
        c->waiter = i;
        return LLM_SHM_OK;
    }
    return LLM_SHM_E_NO_WAITER;
}

int llm_client_attach(llm_client *c)
{
    if (c->map.base && !c->dead) {
        if (!engine_gone(c, 0))
            return LLM_SHM_OK;
        c->dead = 1;
    }
    llm_shm_map m;
    char err[256];
    int rc = llm_shm_open_map(c->name, &m, err, sizeof err);
    if (rc != LLM_SHM_OK)
        return rc;
    if (c->map.base && m.hdr->generation == c->gen) {
        llm_shm_unmap(&m); /* the same dead engine's segment: no successor yet */
        return LLM_SHM_E_NOENT;
    }
    detach(c, 0);
    c->map = m;
    c->dead = 0;
    c->gen = m.hdr->generation;
    if (engine_gone(c, 1)) {
        detach(c, 0);
        return LLM_SHM_E_NOENT;
    }
    c->n_slots = m.hdr->caps.n_slots;
    c->own = calloc(c->n_slots, sizeof *c->own);
    c->own_pos = malloc(c->n_slots * sizeof *c->own_pos);
    c->own_ticket = calloc(c->n_slots, sizeof *c->own_ticket);
    if (!c->own || !c->own_pos || !c->own_ticket) {
        detach(c, 0);
        return LLM_SHM_E_SYS;
    }
    for (uint32_t i = 0; i < c->n_slots; i++)
        c->own_pos[i] = -1;
    rc = register_waiter(c);
    if (rc != LLM_SHM_OK) {
        detach(c, 0);
        return rc;
    }
    return LLM_SHM_OK;
}

int llm_client_check(llm_client *c)
{
    if (!c->map.base)
        return LLM_SHM_E_NOENT;
    if (c->dead || engine_gone(c, 1)) {
        c->dead = 1;
        return LLM_SHM_E_ENGINE_GONE;
    }
    return atomic_load(&c->map.hdr->state) == LLM_ENGINE_READY ? LLM_SHM_OK : LLM_SHM_E_NOT_READY;
}

/* Resolve a handle to its slot, or say why not. */
static int lookup(llm_client *c, llm_req r, llm_shm_slot **out)
{
    if (!c->map.base || r.gen != c->gen)
        return LLM_SHM_E_ENGINE_GONE;
    if (r.slot >= c->n_slots || c->own_pos[r.slot] < 0 || c->own_ticket[r.slot] != r.ticket)
        return LLM_SHM_E_INVAL;
    *out = llm_shm_slot_at(&c->map, r.slot);
    return LLM_SHM_OK;
}

int llm_client_reserve(llm_client *c, llm_req *out)
{
    int rc = llm_client_attach(c);
    if (rc != LLM_SHM_OK)
        return rc;
    llm_shm_metrics *m = c->map.metrics;
    if (atomic_load(&c->map.hdr->state) != LLM_ENGINE_READY) {
        atomic_fetch_add_explicit(&m->rejected_not_ready, 1, memory_order_relaxed);
        return LLM_SHM_E_NOT_READY;
    }
    uint32_t n = c->n_slots;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (c->hint + k) % n;
        llm_shm_slot *sl = llm_shm_slot_at(&c->map, i);
        uint32_t w = atomic_load_explicit(&sl->word, memory_order_relaxed);
        if (w != LLM_SLOT_FREE)
            continue;
        /* owner goes in with the state: a client killed after this CAS is still reclaimable */
        if (!atomic_compare_exchange_strong(&sl->word, &w, LLM_SLOT_WORD(LLM_SLOT_RESERVED, c->waiter)))
            continue;
        atomic_fetch_add(&m->slots_in_use, 1);
        uint32_t t = atomic_fetch_add(&sl->ticket, 1) + 1;
        atomic_store(&sl->cancel, 0);
        atomic_store(&sl->stream_head, 0);
        atomic_store(&sl->stream_tail, 0);
        sl->n_prompt = 0;
        sl->finish = LLM_FINISH_NONE;
        sl->error = 0;
        sl->n_generated = 0;
        llm_shm_params_defaults(&sl->params);
        c->hint = i + 1;
        own_add(c, i, t);
        out->slot = i;
        out->ticket = t;
        out->gen = c->gen;
        return LLM_SHM_OK;
    }
    atomic_fetch_add_explicit(&m->rejected_no_slot, 1, memory_order_relaxed);
    return LLM_SHM_E_NO_SLOT;
}

int llm_client_fill(llm_client *c, llm_req r, const int32_t *ids, uint32_t n, const llm_shm_params *p,
                    uint64_t tag)
{
    llm_shm_slot *sl;
    int rc = lookup(c, r, &sl);
    if (rc != LLM_SHM_OK)
        return rc;
    if (LLM_SLOT_STATE(atomic_load(&sl->word)) != LLM_SLOT_RESERVED)
        return LLM_SHM_E_INVAL;
    if (n > c->map.hdr->caps.max_prompt)
        return LLM_SHM_E_TOO_LONG;
    if (n == 0 || !ids || !p || p->max_tokens <= 0 || p->n_stop > LLM_SHM_MAX_STOP || p->n_logprobs < 0 ||
        (uint32_t)p->n_logprobs > c->map.hdr->caps.max_top || p->n_bias > LLM_SHM_MAX_BIAS ||
        p->n_score > LLM_SHM_MAX_SCORE || p->n_score > c->map.hdr->caps.max_top)
        return LLM_SHM_E_INVAL;
    memcpy(llm_shm_prompt_of(&c->map, sl), ids, (size_t)n * sizeof *ids);
    sl->n_prompt = n;
    memcpy(&sl->params, p, LLM_SHM_PARAMS_USED(p));
    sl->params.schema_len = 0; /* only llm_client_fill_schema sets it */
    sl->tag = tag;
    return LLM_SHM_OK;
}

int llm_client_fill_schema(llm_client *c, llm_req r, const char *text, uint32_t len)
{
    llm_shm_slot *sl;
    int rc = lookup(c, r, &sl);
    if (rc != LLM_SHM_OK)
        return rc;
    if (LLM_SLOT_STATE(atomic_load(&sl->word)) != LLM_SLOT_RESERVED || sl->n_prompt == 0 || text == NULL || len == 0)
        return LLM_SHM_E_INVAL;
    if (LLM_SHM_PROMPT_WORDS(sl->n_prompt, len) > c->map.hdr->caps.max_prompt)
        return LLM_SHM_E_TOO_LONG;
    memcpy(llm_shm_prompt_of(&c->map, sl) + sl->n_prompt, text, len);
    sl->params.schema_len = len;
    return LLM_SHM_OK;
}

int llm_client_submit(llm_client *c, llm_req r)
{
    llm_shm_slot *sl;
    int rc = lookup(c, r, &sl);
    if (rc != LLM_SHM_OK)
        return rc;
    if (c->dead || engine_gone(c, 0)) {
        c->dead = 1;
        return LLM_SHM_E_ENGINE_GONE;
    }
    llm_shm_header *h = c->map.hdr;
    if (atomic_load(&h->state) != LLM_ENGINE_READY) {
        atomic_fetch_add_explicit(&c->map.metrics->rejected_not_ready, 1, memory_order_relaxed);
        return LLM_SHM_E_NOT_READY;
    }
    uint32_t w = LLM_SLOT_WORD(LLM_SLOT_RESERVED, c->waiter);
    if (sl->n_prompt == 0)
        return LLM_SHM_E_INVAL;
    sl->submit_ns = llm_shm_now_ns();
    /* SUBMITTED before the push (release: the engine sees the prompt and params). */
    if (!atomic_compare_exchange_strong(&sl->word, &w, LLM_SLOT_WORD(LLM_SLOT_SUBMITTED, c->waiter)))
        return LLM_SHM_E_INVAL;
    if (llm_ring_push(c->map.ring, h->caps.ring_size, r.slot) != 0) {
        /* not in the ring, so the engine cannot touch it: back to RESERVED */
        atomic_store(&sl->word, LLM_SLOT_WORD(LLM_SLOT_RESERVED, c->waiter));
        atomic_fetch_add_explicit(&c->map.metrics->rejected_ring_full, 1, memory_order_relaxed);
        return LLM_SHM_E_RING_FULL;
    }
    atomic_fetch_add_explicit(&c->map.metrics->submitted, 1, memory_order_relaxed);
    llm_shm_ring_doorbell(h, c->map.metrics);
    return LLM_SHM_OK;
}

int llm_client_start(llm_client *c, const int32_t *ids, uint32_t n, const llm_shm_params *p, uint64_t tag,
                     llm_req *out)
{
    return llm_client_start_schema(c, ids, n, p, NULL, 0, tag, out);
}

int llm_client_start_schema(llm_client *c, const int32_t *ids, uint32_t n, const llm_shm_params *p,
                            const char *schema, uint32_t schema_len, uint64_t tag, llm_req *out)
{
    llm_req r;
    int rc = llm_client_reserve(c, &r);
    if (rc != LLM_SHM_OK)
        return rc;
    rc = llm_client_fill(c, r, ids, n, p, tag);
    if (rc == LLM_SHM_OK && schema != NULL && schema_len > 0)
        rc = llm_client_fill_schema(c, r, schema, schema_len);
    if (rc == LLM_SHM_OK)
        rc = llm_client_submit(c, r);
    if (rc != LLM_SHM_OK) {
        llm_client_release(c, r);
        return rc;
    }
    *out = r;
    return LLM_SHM_OK;
}

int llm_client_read(llm_client *c, llm_req r, llm_shm_token *out, int max, llm_req_status *st)
{
    llm_shm_slot *sl;
    int rc = lookup(c, r, &sl);
    if (st)
        memset(st, 0, sizeof *st);
    if (rc != LLM_SHM_OK)
        return rc;
    /* state first, then head: tokens pushed before the end are all visible */
    uint32_t w = atomic_load_explicit(&sl->word, memory_order_acquire);
    uint32_t s = LLM_SLOT_STATE(w);
    if (LLM_SLOT_OWNER(w) != c->waiter || s == LLM_SLOT_FREE || s == LLM_SLOT_RESERVED)
        return LLM_SHM_E_INVAL;
    uint64_t hd = atomic_load_explicit(&sl->stream_head, memory_order_acquire);
    uint64_t tl = atomic_load_explicit(&sl->stream_tail, memory_order_relaxed);
    uint32_t capn = c->map.hdr->caps.stream_cap, max_top = c->map.hdr->caps.max_top;
    if (hd - tl > capn)
        return LLM_SHM_E_BADSEG;
    int n = 0;
    while (tl < hd && n < max) {
        const llm_shm_entry *e = llm_shm_entry_of(&c->map, sl, tl);
        out[n].id = e->id;
        out[n].logprob = e->logprob;
        out[n].n_top = e->n_top <= max_top ? e->n_top : max_top;
        out[n].flags = e->flags;
        if (out[n].n_top)
            memcpy(out[n].top, e + 1, out[n].n_top * sizeof out[n].top[0]);
        n++;
        tl++;
    }
    if (n)
        atomic_store_explicit(&sl->stream_tail, tl, memory_order_release);
    if (LLM_SLOT_TERMINAL(s)) {
        if (st) {
            st->done = tl == hd;
            st->finish = (llm_finish_reason)sl->finish;
            st->error = sl->error;
            st->n_generated = sl->n_generated;
            st->n_cached = sl->n_cached;
        }
        return n;
    }
    if (st) {
        st->n_generated = (uint32_t)hd;
        st->n_cached = sl->n_cached;
    }
    if (n == 0 && (c->dead || engine_gone(c, 0))) {
        c->dead = 1;
        return LLM_SHM_E_ENGINE_GONE;
    }
    return n;
}

int llm_client_result(llm_client *c, llm_req r, float *out, uint32_t max)
{
    llm_shm_slot *sl;
    int rc = lookup(c, r, &sl);
    if (rc != LLM_SHM_OK)
        return rc;
    uint32_t w = atomic_load_explicit(&sl->word, memory_order_acquire);
    if (LLM_SLOT_OWNER(w) != c->waiter || LLM_SLOT_STATE(w) != LLM_SLOT_FINISHED)
        return LLM_SHM_E_INVAL;
    uint32_t n = sl->n_result; /* the engine's word: held to the area and to max */
    if (n > LLM_SHM_RESULT_MAX(c->map.hdr))
        return LLM_SHM_E_BADSEG;
    n = n < max ? n : max;
    memcpy(out, llm_shm_result_of(c->map.hdr, sl), (size_t)n * sizeof(float));
    return (int)n;
}

int llm_client_cancel(llm_client *c, llm_req r)
{
    llm_shm_slot *sl;
    int rc = lookup(c, r, &sl);
    if (rc != LLM_SHM_OK)
        return rc;
    uint32_t s = LLM_SLOT_STATE(atomic_load(&sl->word));
    if (s == LLM_SLOT_SUBMITTED || s == LLM_SLOT_RUNNING) {
        atomic_store_explicit(&sl->cancel, 1, memory_order_release);
        llm_shm_ring_doorbell(c->map.hdr, c->map.metrics);
    }
    return LLM_SHM_OK;
}

int llm_client_release(llm_client *c, llm_req r)
{
    llm_shm_slot *sl;
    int rc = lookup(c, r, &sl);
    if (rc != LLM_SHM_OK)
        return rc == LLM_SHM_E_ENGINE_GONE ? LLM_SHM_OK : rc; /* old generation: nothing to free */
    if (!c->dead)
        let_go(c, sl);
    own_del(c, r.slot);
    return LLM_SHM_OK;
}

int llm_client_drain(llm_client *c)
{
    char buf[16];
    int n = 0;
    while (recv(c->sock, buf, sizeof buf, MSG_DONTWAIT) >= 0)
        n++;
    return n;
}

int llm_client_arm(llm_client *c)
{
    if (!c->map.base || c->n_own == 0)
        return 0;
    llm_shm_waiter *w = &c->map.waiters[c->waiter];
    atomic_store(&w->waiting, 1);
    atomic_thread_fence(memory_order_seq_cst); /* pairs with the engine's fence in notify() */
    if (atomic_load(&c->map.hdr->state) == LLM_ENGINE_STOPPED || c->dead)
        return 1;
    for (uint32_t i = 0; i < c->n_own; i++) {
        llm_shm_slot *sl = llm_shm_slot_at(&c->map, c->own[i]);
        uint32_t s = LLM_SLOT_STATE(atomic_load(&sl->word));
        if (LLM_SLOT_TERMINAL(s) ||
            atomic_load(&sl->stream_head) != atomic_load_explicit(&sl->stream_tail, memory_order_relaxed))
            return 1;
    }
    return 0;
}

int llm_client_wait(llm_client *c, int timeout_ms)
{
    if (llm_client_arm(c)) {
        llm_client_drain(c);
        return 1;
    }
    struct pollfd pfd = { .fd = c->sock, .events = POLLIN };
    int r = poll(&pfd, 1, timeout_ms);
    llm_client_drain(c);
    return r > 0;
}
