/* Segment layout, mapping and validation, and the small OS helpers both sides use. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall(futex), getrandom, abstract sockets; nginx builds us without it */
#endif
#include "llm_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free to live in shared memory");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "32-bit atomics must be lock-free to live in shared memory");
_Static_assert(sizeof(_Atomic uint64_t) == 8 && sizeof(_Atomic uint32_t) == 4, "atomic sizes");

const char *llm_shm_strerror(int rc)
{
    switch (rc) {
    case LLM_SHM_OK:            return "ok";
    case LLM_SHM_E_NOENT:       return "engine not running (no shared-memory segment)";
    case LLM_SHM_E_BADSEG:      return "shared-memory segment has a wrong magic, version or size";
    case LLM_SHM_E_NOT_READY:   return "engine not ready";
    case LLM_SHM_E_ENGINE_GONE: return "engine stopped or restarted; request lost";
    case LLM_SHM_E_NO_SLOT:     return "all request slots are in use";
    case LLM_SHM_E_RING_FULL:   return "submission queue is full";
    case LLM_SHM_E_TOO_LONG:    return "prompt too long for a request slot";
    case LLM_SHM_E_INVAL:       return "invalid argument or request handle";
    case LLM_SHM_E_SYS:         return "system call failed";
    case LLM_SHM_E_NO_WAITER:   return "too many attached clients";
    case LLM_SHM_E_STREAM_FULL: return "token stream full";
    case LLM_SHM_E_BUSY:        return "another live engine serves this name";
    case LLM_SHM_E_QUEUE_FULL:  return "engine queue full";
    case LLM_SHM_E_BACKEND:     return "engine forward pass failed";
    case LLM_SHM_E_NOMEM:       return "engine out of memory";
    default:                    return "unknown error";
    }
}

void llm_shm_params_defaults(llm_shm_params *p)
{
    memset(p, 0, sizeof *p);
    p->temperature = 0.0f;
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
    p->max_tokens = 16;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
static int is_pow2(uint32_t x) { return x >= 2 && (x & (x - 1)) == 0; }

int llm_shm_layout(const llm_shm_caps *c, llm_shm_header *h, char *err, size_t cap)
{
    if (c->n_slots == 0 || c->n_slots > LLM_SHM_MAX_SLOTS) {
        snprintf(err, cap, "n_slots %u out of range 1..%u", c->n_slots, LLM_SHM_MAX_SLOTS);
        return -1;
    }
    if (!is_pow2(c->ring_size) || c->ring_size > (1u << 24)) {
        snprintf(err, cap, "ring_size %u must be a power of two in 2..2^24", c->ring_size);
        return -1;
    }
    if (!is_pow2(c->stream_cap) || c->stream_cap > (1u << 24)) {
        snprintf(err, cap, "stream_cap %u must be a power of two in 2..2^24", c->stream_cap);
        return -1;
    }
    if (c->max_prompt == 0 || c->max_prompt > (1u << 24)) {
        snprintf(err, cap, "max_prompt %u out of range 1..2^24", c->max_prompt);
        return -1;
    }
    if (c->max_top > LLM_SHM_MAX_TOP) {
        snprintf(err, cap, "max_top %u above %d", c->max_top, LLM_SHM_MAX_TOP);
        return -1;
    }
    if (c->n_waiters == 0 || c->n_waiters > LLM_SHM_MAX_WAITERS) {
        snprintf(err, cap, "n_waiters %u out of range 1..%u", c->n_waiters, LLM_SHM_MAX_WAITERS);
        return -1;
    }
    h->caps = *c;
    h->header_size = sizeof(llm_shm_header);
    h->entry_size = sizeof(llm_shm_entry) + (uint64_t)c->max_top * sizeof(llm_shm_logprob);
    h->off_prompt = align_up(sizeof(llm_shm_slot), LLM_CACHELINE);
    h->off_stream = align_up(h->off_prompt + (uint64_t)c->max_prompt * sizeof(int32_t), LLM_CACHELINE);
    h->slot_stride = align_up(h->off_stream + (uint64_t)c->stream_cap * h->entry_size, LLM_CACHELINE);
    h->off_metrics = align_up(sizeof(llm_shm_header), 4096);
    h->off_waiters = align_up(h->off_metrics + sizeof(llm_shm_metrics), LLM_CACHELINE);
    h->off_ring = align_up(h->off_waiters + (uint64_t)c->n_waiters * sizeof(llm_shm_waiter), 4096);
    h->off_slots = align_up(h->off_ring + sizeof(llm_shm_ring) + (uint64_t)c->ring_size * 8, 4096);
    h->total_size = align_up(h->off_slots + (uint64_t)c->n_slots * h->slot_stride, 4096);
    if (h->total_size > ((uint64_t)1 << 40)) {
        snprintf(err, cap, "segment would be %llu bytes", (unsigned long long)h->total_size);
        return -1;
    }
    return 0;
}

int llm_shm_path(const char *name, char *out, size_t cap)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n >= LLM_SHM_MAX_NAME || strchr(name, '/'))
        return -1;
    if ((size_t)snprintf(out, cap, "/llm-%s", name) >= cap)
        return -1;
    return 0;
}

void llm_shm_bind(llm_shm_map *m)
{
    m->hdr = (llm_shm_header *)m->base;
    m->metrics = (llm_shm_metrics *)(m->base + m->hdr->off_metrics);
    m->waiters = (llm_shm_waiter *)(m->base + m->hdr->off_waiters);
    m->ring = (llm_shm_ring *)(m->base + m->hdr->off_ring);
    m->slots = m->base + m->hdr->off_slots;
}

int llm_shm_open_map(const char *name, llm_shm_map *m, char *err, size_t cap)
{
    char path[80];
    memset(m, 0, sizeof *m);
    m->fd = -1;
    if (llm_shm_path(name, path, sizeof path) < 0) {
        snprintf(err, cap, "bad segment name '%s'", name ? name : "(null)");
        return LLM_SHM_E_INVAL;
    }
    int fd = shm_open(path, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        return errno == ENOENT ? LLM_SHM_E_NOENT : LLM_SHM_E_SYS;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(llm_shm_header)) {
        snprintf(err, cap, "%s: segment too small (%lld bytes)", path, (long long)st.st_size);
        close(fd);
        /* an engine between ftruncate and its header write looks like this: not ready yet */
        return LLM_SHM_E_NOT_READY;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        snprintf(err, cap, "%s: mmap: %s", path, strerror(errno));
        close(fd);
        return LLM_SHM_E_SYS;
    }
    m->base = p;
    m->size = (size_t)st.st_size;
    m->fd = fd;
    llm_shm_header *h = (llm_shm_header *)p;
    /* The engine writes magic last (release), so a valid magic means a complete header. */
    uint64_t magic = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE);
    int rc = LLM_SHM_OK;
    if (magic == 0) {
        snprintf(err, cap, "%s: engine still initialising", path);
        rc = LLM_SHM_E_NOT_READY;
    } else if (magic != LLM_SHM_MAGIC || h->version != LLM_SHM_VERSION ||
               h->header_size != sizeof(llm_shm_header)) {
        snprintf(err, cap, "%s: magic/version mismatch (magic %016llx version %u, want %u)", path,
                 (unsigned long long)magic, h->version, LLM_SHM_VERSION);
        rc = LLM_SHM_E_BADSEG;
    } else {
        /* Recompute the layout from the capacities and insist on the same numbers. */
        llm_shm_header want;
        memset(&want, 0, sizeof want);
        char e2[128];
        if (llm_shm_layout(&h->caps, &want, e2, sizeof e2) < 0) {
            snprintf(err, cap, "%s: bad capacities: %s", path, e2);
            rc = LLM_SHM_E_BADSEG;
        } else if (want.total_size != h->total_size || want.total_size > m->size ||
                   want.off_metrics != h->off_metrics || want.off_waiters != h->off_waiters ||
                   want.off_ring != h->off_ring || want.off_slots != h->off_slots ||
                   want.slot_stride != h->slot_stride || want.entry_size != h->entry_size ||
                   want.off_prompt != h->off_prompt || want.off_stream != h->off_stream) {
            snprintf(err, cap, "%s: layout does not match its capacities", path);
            rc = LLM_SHM_E_BADSEG;
        }
    }
    if (rc != LLM_SHM_OK) {
        llm_shm_unmap(m);
        return rc;
    }
    llm_shm_bind(m);
    return LLM_SHM_OK;
}

void llm_shm_unmap(llm_shm_map *m)
{
    if (m->base)
        munmap(m->base, m->size);
    if (m->fd >= 0)
        close(m->fd);
    memset(m, 0, sizeof *m);
    m->fd = -1;
}

uint64_t llm_shm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t llm_shm_proc_starttime(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    /* comm may hold spaces and parens: fields resume after the last ')' */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    p++;
    /* p is at the space before field 3 (state); each step moves one field on: starttime is field 22 */
    for (int field = 3; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    if (!p)
        return 0;
    return strtoull(p + 1, NULL, 10);
}

/* 1 if /proc says pid is a zombie (or dead): exited, not yet reaped. A
 * supervised engine's worker killed with its supervisor stays one until
 * something reaps it, and must not count as a live engine. */
static int pid_zombie(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* comm may hold parens: the state follows the last one */
    return p != NULL && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

int llm_shm_pid_alive(int pid)
{
    if (pid <= 0)
        return 0;
    if (kill(pid, 0) == 0)
        return !pid_zombie(pid);
    return errno != ESRCH; /* EPERM: alive, owned by another user */
}

int llm_futex_wait(_Atomic uint32_t *w, uint32_t expect, int timeout_ms)
{
    struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
    /* shared (non-private) futex: the waker is another process */
    long r = syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, expect, timeout_ms >= 0 ? &ts : NULL, NULL, 0);
    return r == 0 ? 0 : 1;
}

void llm_futex_wake(_Atomic uint32_t *w, int n)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, n, NULL, NULL, 0);
}

void llm_shm_ring_doorbell(llm_shm_header *h, llm_shm_metrics *m)
{
    /* Pairs with llm_server_wait: it sets engine_sleeping then re-checks the ring (both seq_cst). */
    if (atomic_load(&h->engine_sleeping)) {
        atomic_fetch_add(&h->doorbell, 1);
        llm_futex_wake(&h->doorbell, 1);
        atomic_fetch_add_explicit(&m->doorbell_wakes, 1, memory_order_relaxed);
    }
}
