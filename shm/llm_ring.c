/* Bounded multi-producer single-consumer ring of slot indexes, tolerant of a
 * producer killed at any instruction.
 *
 * Cell word = seq (40 bits) << 24 | slot (24 bits); seq is a position modulo 2^40.
 * For position p (cell p & mask): seq == p means empty and ready for p; seq == p+1
 * means it holds p's slot; seq == p+size means p was taken and the cell waits for
 * p+size. A producer claims p with one CAS on the cell (empty -> full), then moves
 * head p -> p+1; any producer that finds p's cell already claimed moves head for it.
 * So a producer that dies after its CAS has published its entry, and one that dies
 * before it has done nothing: head never sticks on a dead producer. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall(futex), getrandom, abstract sockets; nginx builds us without it */
#endif
#include "llm_shm.h"

#define SEQ_BITS 40
#define SEQ_MASK ((UINT64_C(1) << SEQ_BITS) - 1)
#define SLOT_MASK ((UINT64_C(1) << 24) - 1)
#define CELL(seq, slot) ((((uint64_t)(seq) & SEQ_MASK) << 24) | ((uint64_t)(slot) & SLOT_MASK))
#define CELL_SEQ(w) ((w) >> 24)

void llm_ring_init(llm_shm_ring *r, uint32_t size)
{
    atomic_store(&r->head, 0);
    atomic_store(&r->tail, 0);
    for (uint32_t i = 0; i < size; i++)
        atomic_store(&r->cell[i], CELL(i, 0));
}

int llm_ring_push(llm_shm_ring *r, uint32_t size, uint32_t slot)
{
    const uint64_t mask = size - 1;
    for (;;) {
        uint64_t p = atomic_load(&r->head);
        _Atomic uint64_t *c = &r->cell[p & mask];
        uint64_t w = atomic_load(c);
        uint64_t s = CELL_SEQ(w);
        if (s == (p & SEQ_MASK)) {
            if (atomic_compare_exchange_strong(c, &w, CELL(p + 1, slot))) {
                uint64_t e = p;
                atomic_compare_exchange_strong(&r->head, &e, p + 1);
                return 0;
            }
            continue;
        }
        if (s == ((p + 1 - size) & SEQ_MASK)) {
            /* Still full from the previous lap: the engine has not taken position p - size. */
            if (atomic_load(&r->head) == p)
                return LLM_SHM_E_RING_FULL;
            continue;
        }
        /* p was already claimed (or our p is stale): help head along; a stale CAS just fails. */
        uint64_t e = p;
        atomic_compare_exchange_strong(&r->head, &e, p + 1);
    }
}

int64_t llm_ring_pop(llm_shm_ring *r, uint32_t size)
{
    const uint64_t mask = size - 1;
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    _Atomic uint64_t *c = &r->cell[t & mask];
    uint64_t w = atomic_load_explicit(c, memory_order_acquire);
    if (CELL_SEQ(w) != ((t + 1) & SEQ_MASK))
        return -1;
    atomic_store_explicit(c, CELL(t + size, 0), memory_order_release);
    atomic_store_explicit(&r->tail, t + 1, memory_order_release);
    return (int64_t)(w & SLOT_MASK);
}

uint64_t llm_ring_depth(const llm_shm_ring *r)
{
    uint64_t t = atomic_load_explicit((_Atomic uint64_t *)&r->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit((_Atomic uint64_t *)&r->head, memory_order_relaxed);
    return h > t ? h - t : 0;
}

int llm_ring_contains(llm_shm_ring *r, uint32_t size, uint32_t slot)
{
    /* Only the consumer calls this, so tail is stable; every position in
     * [tail, tail + size) maps to one cell, full when seq == position + 1. */
    uint64_t t = atomic_load(&r->tail);
    for (uint64_t p = t; p < t + size; p++) {
        uint64_t w = atomic_load(&r->cell[p & (size - 1)]);
        if (CELL_SEQ(w) == ((p + 1) & SEQ_MASK) && (w & SLOT_MASK) == slot)
            return 1;
    }
    return 0;
}

int llm_ring_ready(llm_shm_ring *r, uint32_t size)
{
    uint64_t t = atomic_load(&r->tail);
    uint64_t w = atomic_load(&r->cell[t & (size - 1)]);
    return CELL_SEQ(w) == ((t + 1) & SEQ_MASK);
}
