/* KV cache bookkeeping: allocation, reference counts, exhaustion, block
 * tables, prefix sharing and LRU reuse of cached blocks. */
#include "kv_cache.h"
#include "tap.h"

#include <string.h>

static void test_alloc_free(void)
{
    ok(llm_kv_create(0, 16) == NULL && llm_kv_create(4, 0) == NULL, "bad sizes refused");
    llm_kv_cache *kv = llm_kv_create(4, 16);
    ok(kv != NULL, "created 4 x 16");
    is_int(llm_kv_available(kv), 4, "all available");
    int32_t b[5];
    for (int i = 0; i < 4; i++)
        b[i] = llm_kv_alloc(kv);
    ok(b[0] == 0 && b[1] == 1 && b[2] == 2 && b[3] == 3, "ids 0..3 in order");
    b[4] = llm_kv_alloc(kv);
    is_int(b[4], -1, "exhausted: -1");
    is_int(llm_kv_available(kv), 0, "none available");
    llm_kv_retain(kv, b[1]);
    is_int(llm_kv_refcount(kv, b[1]), 2, "retain -> 2");
    llm_kv_release(kv, b[1]);
    is_int(llm_kv_available(kv), 0, "still held once");
    llm_kv_release(kv, b[1]);
    is_int(llm_kv_refcount(kv, b[1]), 0, "released -> 0");
    is_int(llm_kv_available(kv), 1, "one back");
    llm_kv_release(kv, b[1]); /* double release is ignored */
    is_int(llm_kv_available(kv), 1, "double release ignored");
    is_int(llm_kv_alloc(kv), b[1], "freed block reused");
    is_int(llm_kv_refcount(kv, 99), -1, "bad id refcount -1");
    llm_kv_release(kv, -3);
    llm_kv_retain(kv, 1000);
    llm_kv_stats st;
    llm_kv_get_stats(kv, &st);
    ok(st.used == 4 && st.free == 0 && st.cached == 0, "stats used 4");
    llm_kv_destroy(kv);
}

static void test_tables(void)
{
    llm_kv_cache *kv = llm_kv_create(6, 4);
    llm_kv_seq a = { 0 }, b = { 0 };
    is_int(llm_kv_seq_blocks_needed(kv, &a, 9), 3, "9 tokens need 3 blocks of 4");
    is_int(llm_kv_seq_reserve(kv, &a, 9), 0, "reserve 9");
    is_int(a.n_blocks, 3, "table of 3");
    is_int(llm_kv_seq_reserve(kv, &a, 12), 0, "12 fits the same table");
    is_int(a.n_blocks, 3, "still 3");
    is_int(llm_kv_seq_reserve(kv, &b, 16), -1, "16 more tokens do not fit (3 left)");
    is_int(b.n_blocks, 0, "all or nothing: table unchanged");
    is_int(llm_kv_available(kv), 3, "nothing taken");
    is_int(llm_kv_seq_reserve(kv, &b, 12), 0, "12 fit");
    is_int(llm_kv_available(kv), 0, "pool full");
    llm_kv_seq_release(kv, &a);
    is_int(llm_kv_available(kv), 3, "release returns 3");
    ok(a.blocks == NULL && a.n_blocks == 0, "table emptied");
    llm_kv_seq_release(kv, &b);
    is_int(llm_kv_available(kv), 6, "all back");
    llm_kv_destroy(kv);
}

static void test_prefix(void)
{
    const int bs = 4;
    llm_kv_cache *kv = llm_kv_create(8, bs);
    int32_t p1[11] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 };
    int32_t p2[11] = { 1, 2, 3, 4, 5, 6, 7, 8, 42, 43, 44 };
    int32_t p3[11] = { 1, 2, 3, 4, 9, 6, 7, 8, 9, 10, 11 };   /* differs in block 1 */
    llm_kv_seq a = { 0 }, b = { 0 }, c = { 0 };

    is_int(llm_kv_seq_match_prefix(kv, &a, p1, 10), 0, "empty cache: no match");
    llm_kv_seq_reserve(kv, &a, 11);
    is_int(llm_kv_seq_commit(kv, &a, p1, 6), 1, "6 computed tokens register 1 full block");
    is_int(llm_kv_seq_commit(kv, &a, p1, 11), 1, "11 register the second (the partial third stays private)");
    ok(llm_kv_is_registered(kv, a.blocks[0]) && llm_kv_is_registered(kv, a.blocks[1]) &&
       !llm_kv_is_registered(kv, a.blocks[2]), "blocks 0,1 registered, 2 not");

    int hc = -1;
    is_int(llm_kv_peek_prefix(kv, p2, 10, &hc), 8, "peek: p2 shares 8 tokens");
    is_int(hc, 0, "both hits are in use (not cached)");
    is_int(llm_kv_seq_match_prefix(kv, &b, p2, 10), 8, "p2 takes 2 shared blocks");
    ok(b.blocks[0] == a.blocks[0] && b.blocks[1] == a.blocks[1], "same block ids");
    is_int(llm_kv_refcount(kv, a.blocks[0]), 2, "shared block refcount 2");
    is_int(llm_kv_seq_match_prefix(kv, &c, p3, 10), 4, "p3 matches only block 0 (chained hash)");
    is_int(llm_kv_refcount(kv, a.blocks[0]), 3, "refcount 3");
    is_int(llm_kv_seq_match_prefix(kv, &c, p1, 10), 0, "a non-empty table takes nothing");
    is_int(llm_kv_peek_prefix(kv, p1, 7, NULL), 4, "max_tokens caps the match to full blocks");

    /* release a and b: block 1 ends up cached, block 0 still held by c */
    int32_t blk0 = a.blocks[0], blk1 = a.blocks[1];
    llm_kv_seq_release(kv, &a);
    llm_kv_seq_release(kv, &b);
    llm_kv_stats st;
    llm_kv_get_stats(kv, &st);
    is_int(st.cached, 1, "one cached block (block 1)");
    is_int(st.used, 1, "one used (block 0 by c)");
    is_int(llm_kv_available(kv), 7, "cached counts as available");
    is_int(llm_kv_peek_prefix(kv, p1, 10, &hc), 8, "p1 still fully matched");
    is_int(hc, 1, "one hit is cached (taking it lowers available)");
    llm_kv_seq d = { 0 };
    is_int(llm_kv_seq_match_prefix(kv, &d, p1, 11), 8, "cached block revived");
    is_int(llm_kv_refcount(kv, blk1), 1, "revived block refcount 1");
    llm_kv_get_stats(kv, &st);
    is_int(st.cached, 0, "no cached left");
    ok(st.hits == 2 + 1 + 2 && st.lookups == 1 + 2 + 2 + 2, "hits %llu lookups %llu", (unsigned long long)st.hits,
       (unsigned long long)st.lookups);

    /* duplicate content computed privately does not replace the registered twin */
    llm_kv_seq e = { 0 };
    llm_kv_seq_reserve(kv, &e, 4);
    is_int(llm_kv_seq_commit(kv, &e, p1, 4), 0, "identical twin: not registered");
    ok(!llm_kv_is_registered(kv, e.blocks[0]), "twin stays private");
    llm_kv_seq_release(kv, &e);
    llm_kv_seq_release(kv, &c);
    llm_kv_seq_release(kv, &d);
    is_int(llm_kv_refcount(kv, blk0), 0, "all released");
    llm_kv_destroy(kv);
}

static void test_lru(void)
{
    const int bs = 2;
    llm_kv_cache *kv = llm_kv_create(4, bs);
    int32_t x[5] = { 1, 2, 3, 4, 5 }, y[5] = { 7, 8, 9, 10, 11 };
    llm_kv_seq a = { 0 }, b = { 0 };
    llm_kv_seq_reserve(kv, &a, 4);
    llm_kv_seq_commit(kv, &a, x, 4);
    llm_kv_seq_reserve(kv, &b, 4);
    llm_kv_seq_commit(kv, &b, y, 4);
    int32_t a0 = a.blocks[0], a1 = a.blocks[1], b0 = b.blocks[0];
    llm_kv_seq_release(kv, &a); /* LRU order: a1, a0 */
    llm_kv_seq_release(kv, &b); /* then b1, b0 */
    llm_kv_stats st;
    llm_kv_get_stats(kv, &st);
    ok(st.cached == 4 && st.free == 0, "4 cached, free list empty");
    int32_t n1 = llm_kv_alloc(kv);
    is_int(n1, a1, "free list dry: the least recently released (a's tail) is evicted first");
    is_int(llm_kv_peek_prefix(kv, x, 4, NULL), 2, "a's head still matches");
    int32_t n2 = llm_kv_alloc(kv);
    is_int(n2, a0, "then a's head");
    is_int(llm_kv_peek_prefix(kv, x, 4, NULL), 0, "a's prefix gone");
    is_int(llm_kv_peek_prefix(kv, y, 4, NULL), 4, "b's prefix intact");
    llm_kv_seq c = { 0 };
    is_int(llm_kv_seq_match_prefix(kv, &c, y, 4), 4, "b revived");
    is_int(llm_kv_alloc(kv), -1, "nothing left to evict while b's blocks are held");
    llm_kv_get_stats(kv, &st);
    ok(st.evictions == 2 && st.used == 4, "2 evictions, 4 used");
    llm_kv_release(kv, n1);
    llm_kv_release(kv, n2);
    llm_kv_seq_release(kv, &c);
    is_int(llm_kv_available(kv), 4, "everything available again");
    (void)b0;
    llm_kv_destroy(kv);
}

/* A sliding window's table: the blocks wholly before a position go back to the pool once, their entries stay;
 * growing and releasing afterwards touch only the blocks still held. */
static void test_drop_front(void)
{
    llm_kv_cache *kv = llm_kv_create(8, 4);
    llm_kv_seq a = { 0 }, b = { 0 };
    ok(llm_kv_seq_reserve(kv, &a, 20) == 0 && a.n_blocks == 5 && llm_kv_available(kv) == 3, "5 blocks for 20 tokens");
    is_int(llm_kv_seq_drop_front(kv, &a, 3), 0, "position 3: block 0 still read");
    is_int(llm_kv_seq_drop_front(kv, &a, 9), 2, "position 9: blocks 0 and 1 given back");
    is_int(llm_kv_seq_drop_front(kv, &a, 9), 0, "again: nothing more");
    ok(a.n_dropped == 2 && a.n_blocks == 5 && llm_kv_available(kv) == 5 && llm_kv_refcount(kv, a.blocks[0]) == 0 &&
       llm_kv_refcount(kv, a.blocks[2]) == 1, "their entries stay, unreferenced; the rest held");
    ok(llm_kv_seq_reserve(kv, &b, 20) == 0, "another sequence takes them");
    ok(llm_kv_seq_reserve(kv, &a, 24) != 0 && llm_kv_seq_reserve(kv, &b, 4) == 0, "the pool is full");
    is_int(llm_kv_seq_drop_front(kv, &a, 1000), 3, "past the table's end: every block given back");
    ok(llm_kv_seq_reserve(kv, &a, 32) == 0 && a.n_blocks == 8 && a.n_dropped == 5, "grows past the dropped ones");
    llm_kv_seq_release(kv, &a);
    llm_kv_seq_release(kv, &b);
    llm_kv_stats st;
    llm_kv_get_stats(kv, &st);
    ok(st.used == 0 && st.free == 8, "all back once, none twice (used %d free %d)", st.used, st.free);
    llm_kv_destroy(kv);
}

/* A window pool's prefix: only the blocks holding the last `reach` positions before m are needed. */
static void test_window_prefix(void)
{
    llm_kv_cache *kv = llm_kv_create(16, 4);
    int32_t tok[40];
    for (int i = 0; i < 40; i++)
        tok[i] = 100 + i;
    llm_kv_seq a = { 0 }, b = { 0 };
    int hits = -1;
    ok(llm_kv_seq_reserve(kv, &a, 32) == 0 && llm_kv_seq_commit(kv, &a, tok, 32) == 8, "8 blocks registered");
    is_int(llm_kv_seq_drop_front(kv, &a, 21), 5, "5 given back (cached: registered)");
    is_int(llm_kv_peek_window(kv, tok, 33, 7, &hits), 32, "33 tokens, reach 7: 32 (blocks 6, 7 needed)");
    is_int(hits, 0, "both held");
    llm_kv_seq_release(kv, &a);
    is_int(llm_kv_peek_window(kv, tok, 40, 7, &hits), 32, "all cached now: still 32 (block 8 never registered)");
    is_int(hits, 2, "2 of them unreferenced");
    int32_t evicted[9];
    for (int i = 0; i < 9; i++) /* the free list (8), then the least recently released cached block: block 0 */
        evicted[i] = llm_kv_alloc(kv);
    is_int(llm_kv_peek_window(kv, tok, 32, 7, &hits), 32, "block 0 evicted: 32 still (it is not in the window)");
    is_int(llm_kv_peek_window(kv, tok, 32, 31, NULL), 0, "reach 31 needs block 0: nothing");
    is_int(llm_kv_seq_match_window(kv, &b, tok, 32, 7), 32, "match 32");
    ok(b.n_blocks == 8 && b.n_dropped == 6 && b.n_hashed == 8 && llm_kv_refcount(kv, b.blocks[6]) == 1 &&
       llm_kv_refcount(kv, b.blocks[7]) == 1 && b.blocks[0] == b.blocks[6], "blocks 6, 7 held, the rest stale");
    ok(llm_kv_seq_reserve(kv, &b, 36) == 0 && llm_kv_seq_commit(kv, &b, tok, 36) == 1, "grows, registers block 8");
    llm_kv_seq_release(kv, &b);
    llm_kv_seq c = { 0 };
    is_int(llm_kv_seq_match_window(kv, &c, tok, 32, 31), -1, "a missing block: refused");
    ok(c.n_blocks == 0, "table left empty");
    llm_kv_seq_release(kv, &c);
    for (int i = 0; i < 9; i++)
        llm_kv_release(kv, evicted[i]);
    llm_kv_stats st;
    llm_kv_get_stats(kv, &st);
    ok(st.used == 0, "nothing held");
    llm_kv_destroy(kv);
}

int main(void)
{
    test_alloc_free();
    test_tables();
    test_prefix();
    test_lru();
    test_drop_front();
    test_window_prefix();
    return done_testing();
}
