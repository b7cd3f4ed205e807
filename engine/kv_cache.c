/* Paged KV cache bookkeeping: free list, reference counts, prefix cache with
 * LRU reuse, per-sequence block tables. See kv_cache.h. */
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

struct llm_kv_cache {
    int n_blocks, bs;
    int32_t *refcnt;
    /* free list: a stack of block ids */
    int32_t *free_stack;
    int n_free;
    /* prefix cache: registered blocks, by chained hash (chained buckets) */
    uint8_t  *registered;
    uint64_t *hash, *parent;
    int32_t  *tokens;          /* [n_blocks][bs], valid while registered */
    int32_t  *hnext;
    int32_t  *buckets;
    uint64_t  bucket_mask;
    /* LRU list of cached blocks (registered, refcount 0): head = least recent */
    int32_t *prev, *next;
    int32_t  lru_head, lru_tail;
    int n_cached, n_used;
    uint64_t lookups, hits, evictions;
};

llm_kv_cache *llm_kv_create(int n_blocks, int block_size)
{
    if (n_blocks < 1 || block_size < 1 || n_blocks > (1 << 28) || block_size > (1 << 16))
        return NULL;
    llm_kv_cache *kv = calloc(1, sizeof(*kv));
    if (kv == NULL)
        return NULL;
    size_t n = (size_t)n_blocks, nb = 1;
    while (nb < n)
        nb <<= 1;
    kv->n_blocks = n_blocks;
    kv->bs = block_size;
    kv->refcnt = calloc(n, sizeof(int32_t));
    kv->free_stack = malloc(n * sizeof(int32_t));
    kv->registered = calloc(n, 1);
    kv->hash = calloc(n, sizeof(uint64_t));
    kv->parent = calloc(n, sizeof(uint64_t));
    kv->tokens = malloc(n * (size_t)block_size * sizeof(int32_t));
    kv->hnext = malloc(n * sizeof(int32_t));
    kv->buckets = malloc(nb * sizeof(int32_t));
    kv->prev = malloc(n * sizeof(int32_t));
    kv->next = malloc(n * sizeof(int32_t));
    if (kv->refcnt == NULL || kv->free_stack == NULL || kv->registered == NULL || kv->hash == NULL ||
        kv->parent == NULL || kv->tokens == NULL || kv->hnext == NULL || kv->buckets == NULL ||
        kv->prev == NULL || kv->next == NULL) {
        llm_kv_destroy(kv);
        return NULL;
    }
    kv->bucket_mask = nb - 1;
    for (size_t i = 0; i < nb; i++)
        kv->buckets[i] = -1;
    /* stack top is block 0, so allocation order is 0, 1, 2, ... */
    for (int i = 0; i < n_blocks; i++)
        kv->free_stack[i] = n_blocks - 1 - i;
    kv->n_free = n_blocks;
    kv->lru_head = kv->lru_tail = -1;
    return kv;
}

void llm_kv_destroy(llm_kv_cache *kv)
{
    if (kv == NULL)
        return;
    free(kv->refcnt);
    free(kv->free_stack);
    free(kv->registered);
    free(kv->hash);
    free(kv->parent);
    free(kv->tokens);
    free(kv->hnext);
    free(kv->buckets);
    free(kv->prev);
    free(kv->next);
    free(kv);
}

int llm_kv_block_size(const llm_kv_cache *kv) { return kv->bs; }
int llm_kv_available(const llm_kv_cache *kv) { return kv->n_free + kv->n_cached; }

void llm_kv_get_stats(const llm_kv_cache *kv, llm_kv_stats *st)
{
    st->n_blocks = kv->n_blocks;
    st->block_size = kv->bs;
    st->used = kv->n_used;
    st->free = kv->n_free;
    st->cached = kv->n_cached;
    st->lookups = kv->lookups;
    st->hits = kv->hits;
    st->evictions = kv->evictions;
}

static int valid_block(const llm_kv_cache *kv, int32_t b) { return b >= 0 && b < kv->n_blocks; }

/* ---- LRU list ---- */
static void lru_push_tail(llm_kv_cache *kv, int32_t b)
{
    kv->prev[b] = kv->lru_tail;
    kv->next[b] = -1;
    if (kv->lru_tail >= 0)
        kv->next[kv->lru_tail] = b;
    else
        kv->lru_head = b;
    kv->lru_tail = b;
    kv->n_cached++;
}

static void lru_unlink(llm_kv_cache *kv, int32_t b)
{
    if (kv->prev[b] >= 0)
        kv->next[kv->prev[b]] = kv->next[b];
    else
        kv->lru_head = kv->next[b];
    if (kv->next[b] >= 0)
        kv->prev[kv->next[b]] = kv->prev[b];
    else
        kv->lru_tail = kv->prev[b];
    kv->n_cached--;
}

/* ---- hash table ---- */
uint64_t llm_kv_block_hash(uint64_t parent, const int32_t *tokens, int n)
{
    uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n; i++) {
        h ^= (uint32_t)tokens[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    /* splitmix64 finaliser: spreads the bits over the bucket index */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

static int32_t table_find(const llm_kv_cache *kv, uint64_t h, uint64_t parent, const int32_t *tokens)
{
    for (int32_t b = kv->buckets[h & kv->bucket_mask]; b >= 0; b = kv->hnext[b])
        if (kv->hash[b] == h && kv->parent[b] == parent &&
            memcmp(kv->tokens + (size_t)b * kv->bs, tokens, (size_t)kv->bs * sizeof(int32_t)) == 0)
            return b;
    return -1;
}

static void table_remove(llm_kv_cache *kv, int32_t b)
{
    int32_t *p = &kv->buckets[kv->hash[b] & kv->bucket_mask];
    while (*p != b)
        p = &kv->hnext[*p];
    *p = kv->hnext[b];
    kv->registered[b] = 0;
}

/* ---- blocks ---- */
int32_t llm_kv_alloc(llm_kv_cache *kv)
{
    int32_t b;
    if (kv->n_free > 0) {
        b = kv->free_stack[--kv->n_free];
    } else if (kv->lru_head >= 0) {
        b = kv->lru_head;
        lru_unlink(kv, b);
        table_remove(kv, b);
        kv->evictions++;
    } else {
        return -1;
    }
    kv->refcnt[b] = 1;
    kv->n_used++;
    return b;
}

void llm_kv_retain(llm_kv_cache *kv, int32_t b)
{
    if (!valid_block(kv, b))
        return;
    if (kv->refcnt[b] == 0) {
        if (!kv->registered[b])
            return; /* a free-list block is only handed out by llm_kv_alloc */
        lru_unlink(kv, b);
        kv->n_used++;
    }
    kv->refcnt[b]++;
}

void llm_kv_release(llm_kv_cache *kv, int32_t b)
{
    if (!valid_block(kv, b) || kv->refcnt[b] == 0)
        return;
    if (--kv->refcnt[b] > 0)
        return;
    kv->n_used--;
    if (kv->registered[b])
        lru_push_tail(kv, b);
    else
        kv->free_stack[kv->n_free++] = b;
}

int llm_kv_refcount(const llm_kv_cache *kv, int32_t b) { return valid_block(kv, b) ? kv->refcnt[b] : -1; }
int llm_kv_is_registered(const llm_kv_cache *kv, int32_t b) { return valid_block(kv, b) && kv->registered[b]; }

/* ---- sequences ---- */
int llm_kv_peek_prefix(const llm_kv_cache *kv, const int32_t *tokens, int max_tokens, int *cached_hits)
{
    uint64_t h = 0;
    int n = 0, cached = 0;
    for (int i = 0; (i + 1) * kv->bs <= max_tokens; i++) {
        const int32_t *t = tokens + (size_t)i * kv->bs;
        uint64_t nh = llm_kv_block_hash(h, t, kv->bs);
        int32_t b = table_find(kv, nh, h, t);
        if (b < 0)
            break;
        cached += kv->refcnt[b] == 0;
        n += kv->bs;
        h = nh;
    }
    if (cached_hits != NULL)
        *cached_hits = cached;
    return n;
}

static int seq_grow(llm_kv_seq *seq, int need)
{
    if (need <= seq->cap)
        return 0;
    int cap = seq->cap > 0 ? seq->cap : 8;
    while (cap < need)
        cap *= 2;
    int32_t *nb = realloc(seq->blocks, (size_t)cap * sizeof(int32_t));
    if (nb == NULL)
        return -1;
    seq->blocks = nb;
    seq->cap = cap;
    return 0;
}

int llm_kv_seq_match_prefix(llm_kv_cache *kv, llm_kv_seq *seq, const int32_t *tokens, int max_tokens)
{
    if (seq->n_blocks != 0)
        return 0;
    int full = max_tokens / kv->bs;
    if (full > 0 && seq_grow(seq, full) != 0)
        return -1;
    uint64_t h = 0;
    for (int i = 0; i < full; i++) {
        const int32_t *t = tokens + (size_t)i * kv->bs;
        uint64_t nh = llm_kv_block_hash(h, t, kv->bs);
        kv->lookups++;
        int32_t b = table_find(kv, nh, h, t);
        if (b < 0)
            break;
        kv->hits++;
        llm_kv_retain(kv, b);
        seq->blocks[seq->n_blocks++] = b;
        h = nh;
    }
    seq->n_hashed = seq->n_blocks;
    seq->hash = h;
    return seq->n_blocks * kv->bs;
}

/* The chained hashes of the first n full blocks of tokens into h[0..n); in found[i] the registered block
 * of hash h[i], or -1. */
static void chain_find(const llm_kv_cache *kv, const int32_t *tokens, int n, uint64_t *h, int32_t *found)
{
    uint64_t prev = 0;
    for (int i = 0; i < n; i++) {
        const int32_t *t = tokens + (size_t)i * kv->bs;
        h[i] = llm_kv_block_hash(prev, t, kv->bs);
        found[i] = table_find(kv, h[i], prev, t);
        prev = h[i];
    }
}

/* The first block a prefix of k blocks needs in a window pool. */
static int window_first(const llm_kv_cache *kv, int k, int reach)
{
    int p = k * kv->bs - reach;
    return p > 0 ? p / kv->bs : 0;
}

int llm_kv_peek_window(const llm_kv_cache *kv, const int32_t *tokens, int max_tokens, int reach, int *cached_hits)
{
    int full = max_tokens / kv->bs, k = 0, cached = 0;
    uint64_t *h = malloc((size_t)(full > 0 ? full : 1) * sizeof(uint64_t));
    int32_t *found = malloc((size_t)(full > 0 ? full : 1) * sizeof(int32_t));
    if (h != NULL && found != NULL) {
        chain_find(kv, tokens, full, h, found);
        /* run: registered blocks in a row ending at block k - 1 */
        for (int i = 0, run = 0; i < full; i++) {
            run = found[i] >= 0 ? run + 1 : 0;
            if (run >= i + 1 - window_first(kv, i + 1, reach))
                k = i + 1;
        }
        for (int i = window_first(kv, k, reach); i < k; i++)
            cached += kv->refcnt[found[i]] == 0;
    }
    free(h);
    free(found);
    if (cached_hits != NULL)
        *cached_hits = cached;
    return k * kv->bs;
}

int llm_kv_seq_match_window(llm_kv_cache *kv, llm_kv_seq *seq, const int32_t *tokens, int m, int reach)
{
    int k = m / kv->bs, first = window_first(kv, k, reach);
    if (seq->n_blocks != 0 || k == 0)
        return seq->n_blocks == 0 && m == 0 ? 0 : -1;
    uint64_t *h = malloc((size_t)k * sizeof(uint64_t));
    int32_t *found = malloc((size_t)k * sizeof(int32_t));
    int ok = h != NULL && found != NULL && seq_grow(seq, k) == 0;
    if (ok) {
        chain_find(kv, tokens, k, h, found);
        for (int i = first; i < k; i++)
            ok &= found[i] >= 0;
    }
    if (ok) {
        for (int i = first; i < k; i++) {
            kv->lookups++;
            kv->hits++;
            llm_kv_retain(kv, found[i]);
        }
        for (int i = 0; i < k; i++) /* (before first: a stale id, held by no one on this table's behalf) */
            seq->blocks[i] = found[i > first ? i : first];
        seq->n_blocks = seq->n_hashed = k;
        seq->n_dropped = first;
        seq->hash = h[k - 1];
    }
    free(h);
    free(found);
    return ok ? m : -1;
}

int llm_kv_seq_blocks_needed(const llm_kv_cache *kv, const llm_kv_seq *seq, int n_tokens)
{
    int need = (n_tokens + kv->bs - 1) / kv->bs - seq->n_blocks;
    return need > 0 ? need : 0;
}

int llm_kv_seq_reserve(llm_kv_cache *kv, llm_kv_seq *seq, int n_tokens)
{
    int need = llm_kv_seq_blocks_needed(kv, seq, n_tokens);
    if (need == 0)
        return 0;
    if (need > llm_kv_available(kv) || seq_grow(seq, seq->n_blocks + need) != 0)
        return -1;
    for (int i = 0; i < need; i++)
        seq->blocks[seq->n_blocks++] = llm_kv_alloc(kv);
    return 0;
}

int llm_kv_seq_commit(llm_kv_cache *kv, llm_kv_seq *seq, const int32_t *tokens, int n_tokens)
{
    int added = 0;
    int full = n_tokens / kv->bs;
    if (full > seq->n_blocks)
        full = seq->n_blocks;
    while (seq->n_hashed < full) {
        int i = seq->n_hashed;
        const int32_t *t = tokens + (size_t)i * kv->bs;
        uint64_t h = llm_kv_block_hash(seq->hash, t, kv->bs);
        int32_t b = seq->blocks[i];
        if (i >= seq->n_dropped && !kv->registered[b] && table_find(kv, h, seq->hash, t) < 0) {
            kv->registered[b] = 1;
            kv->hash[b] = h;
            kv->parent[b] = seq->hash;
            memcpy(kv->tokens + (size_t)b * kv->bs, t, (size_t)kv->bs * sizeof(int32_t));
            size_t bucket = h & kv->bucket_mask;
            kv->hnext[b] = kv->buckets[bucket];
            kv->buckets[bucket] = b;
            added++;
        }
        seq->hash = h;
        seq->n_hashed++;
    }
    return added;
}

int llm_kv_seq_drop_front(llm_kv_cache *kv, llm_kv_seq *seq, int first_pos)
{
    int upto = first_pos > 0 ? first_pos / kv->bs : 0, n = 0;
    if (upto > seq->n_blocks)
        upto = seq->n_blocks;
    for (; seq->n_dropped < upto; seq->n_dropped++, n++)
        llm_kv_release(kv, seq->blocks[seq->n_dropped]);
    return n;
}

void llm_kv_seq_release(llm_kv_cache *kv, llm_kv_seq *seq)
{
    for (int i = seq->n_blocks - 1; i >= seq->n_dropped; i--)
        llm_kv_release(kv, seq->blocks[i]);
    free(seq->blocks);
    memset(seq, 0, sizeof(*seq));
}
