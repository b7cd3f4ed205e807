/* The paged KV cache's bookkeeping (the memory itself lives in the backend):
 * a pool of n_blocks blocks of block_size token slots, a free list, per-block
 * reference counts, per-sequence block tables, and a prefix cache.
 *
 * Prefix cache: a full block of prompt tokens whose KV has been computed is
 * registered under a chained hash, hash(parent block's hash, its token ids),
 * so a later sequence starting with the same full blocks of tokens takes the
 * same blocks (reference count > 1) instead of recomputing them. Only full
 * blocks are ever registered or shared, and a sequence only writes positions
 * past its shared prefix, so a shared block is never written again.
 * A registered block whose last user lets go keeps its content and its hash
 * entry ("cached") on an LRU list; allocation takes plain free blocks first and
 * then evicts the least recently released cached block. */
#ifndef LLM_KV_CACHE_H
#define LLM_KV_CACHE_H

#include <stdint.h>

typedef struct llm_kv_cache llm_kv_cache;

typedef struct {
    int      n_blocks, block_size;
    int      used;       /* blocks held by at least one sequence */
    int      free;       /* blocks on the free list (no content worth keeping) */
    int      cached;     /* unreferenced blocks kept for the prefix cache (reusable) */
    uint64_t lookups;    /* full blocks looked up by llm_kv_seq_match_prefix */
    uint64_t hits;       /* ... of which found (shared instead of recomputed) */
    uint64_t evictions;  /* cached blocks reused for new content */
} llm_kv_stats;

/* NULL when n_blocks < 1, block_size < 1 or out of memory. */
llm_kv_cache *llm_kv_create(int n_blocks, int block_size);
void          llm_kv_destroy(llm_kv_cache *kv);

int  llm_kv_block_size(const llm_kv_cache *kv);
/* Blocks an allocation can get now: free + cached. */
int  llm_kv_available(const llm_kv_cache *kv);
void llm_kv_get_stats(const llm_kv_cache *kv, llm_kv_stats *st);

/* ---- blocks ---- */
/* A block with reference count 1 (free list first, else the LRU cached block,
 * whose hash entry is dropped); -1 when every block is in use. */
int32_t llm_kv_alloc(llm_kv_cache *kv);
void    llm_kv_retain(llm_kv_cache *kv, int32_t b);
/* At 0 references a registered block becomes cached (most recently used end of
 * the LRU list), any other goes back to the free list. */
void    llm_kv_release(llm_kv_cache *kv, int32_t b);
int     llm_kv_refcount(const llm_kv_cache *kv, int32_t b);   /* -1 for a bad id */
int     llm_kv_is_registered(const llm_kv_cache *kv, int32_t b);

/* Chained hash of one full block: parent = previous block's hash (0 for the first). */
uint64_t llm_kv_block_hash(uint64_t parent, const int32_t *tokens, int n);

/* ---- sequences ---- */
typedef struct {
    int32_t *blocks;     /* block table: blocks[i] holds positions [i*bs, (i+1)*bs) */
    int      n_blocks, cap;
    int      n_hashed;   /* leading blocks whose chained hash is known (matched or registered) */
    uint64_t hash;       /* chained hash of block n_hashed-1 (0 when n_hashed == 0) */
    int      n_dropped;  /* leading blocks already given back (a sliding window's table, llm_kv_seq_drop_front):
                          * their entries are stale ids the sequence no longer holds */
} llm_kv_seq;

/* What llm_kv_seq_match_prefix would take, without taking it: the number of
 * tokens matched (a multiple of block_size, at most max_tokens) and in
 * *cached_hits how many of the matched blocks are currently unreferenced
 * (taking them lowers llm_kv_available by that much). */
int llm_kv_peek_prefix(const llm_kv_cache *kv, const int32_t *tokens, int max_tokens, int *cached_hits);
/* For an empty seq: take the longest run of registered full blocks matching
 * tokens[0..max_tokens) (reference +1 each) as the start of its table.
 * Returns the number of tokens matched (a multiple of block_size), -1 on out of memory. */
int llm_kv_seq_match_prefix(llm_kv_cache *kv, llm_kv_seq *seq, const int32_t *tokens, int max_tokens);
/* Blocks the table lacks to hold positions [0, n_tokens). */
int llm_kv_seq_blocks_needed(const llm_kv_cache *kv, const llm_kv_seq *seq, int n_tokens);
/* Grow the table to hold positions [0, n_tokens): all or nothing.
 * 0 ok, -1 not enough blocks (or out of memory), table unchanged. */
int llm_kv_seq_reserve(llm_kv_cache *kv, llm_kv_seq *seq, int n_tokens);
/* Register the sequence's full blocks lying inside tokens[0..n_tokens) (those
 * tokens' KV must be computed). A block whose identical twin is already
 * registered stays private, and so does one given back already (n_dropped).
 * Returns the number of blocks newly registered. */
int llm_kv_seq_commit(llm_kv_cache *kv, llm_kv_seq *seq, const int32_t *tokens, int n_tokens);
/* A sliding window's pool (a second cache whose sequences give back the blocks behind their window,
 * llm_kv_seq_drop_front): what a prefix of m tokens needs there is only the blocks the next query, at
 * position m, reads: those holding m - reach .. m - 1 (reach = window - 1). The largest m <= max_tokens, a
 * multiple of block_size, whose such blocks are all registered (m = 0 always qualifies), with in
 * *cached_hits how many of them are unreferenced. */
int llm_kv_peek_window(const llm_kv_cache *kv, const int32_t *tokens, int max_tokens, int reach, int *cached_hits);
/* For an empty seq: take those blocks for a prefix of exactly m tokens (as llm_kv_peek_window found it) as
 * its table; the entries before them are stale (n_dropped), the chained hash carried on so that
 * llm_kv_seq_commit registers what follows. Returns m, or -1 (a block missing, out of memory: seq empty). */
int llm_kv_seq_match_window(llm_kv_cache *kv, llm_kv_seq *seq, const int32_t *tokens, int m, int reach);
/* A sliding window's table: give back the blocks wholly before position
 * first_pos, which no later step reads. Their entries stay (stale ids: block ids in the pool, of
 * another sequence or free). Returns the number of blocks given back. */
int llm_kv_seq_drop_front(llm_kv_cache *kv, llm_kv_seq *seq, int first_pos);
/* Drop every block (last block first, so its tail is evicted before its head)
 * and free the table. The seq may be reused afterwards. */
void llm_kv_seq_release(llm_kv_cache *kv, llm_kv_seq *seq);

#endif
