/* Grouped-query attention over the paged KV cache (f32, f16, or Q8_0 read through floats). Work items
 * are (tile, query heads): a tile is up to CPU_ATT_TILE consecutive tokens of
 * one sequence at consecutive positions (a prefill chunk; a decode token is a
 * tile of one), with one query head, or in decode a GQA group's heads. Within
 * an item each KV block is read once for all its queries while it sits in
 * L1, instead of once per query from L2/L3: at 1000 prompt tokens that
 * traffic was most of prefill's time; over blocks every query sees whole, the
 * several-query kernels (kernels.h, *_mq) share each vector load among them.
 * Each query still runs the single-query kernels' operations in their order,
 * so its bits do not depend on the tiling or the grouping. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend_util.h"
#include "cpu/cpu_backend.h"

typedef struct {
    cpu_state *st;
    const llm_batch *b;
    int layer;
    int n_tiles;
    int heads;      /* query heads per work item: 1, or a GQA group (they share their KV head's reads) */
    _Atomic int next;
} att_job;

/* Rows of block blk a tile reads whose queries see positions up to `end`. */
static int rows_read(int end, int blk, int bs)
{
    int n = end + 1 - blk * bs;
    return n < bs ? n : bs;
}

/* A Q8_0 cache's rows: n rows of one KV head from element base on (kv_dim apart) as floats into out (hd apart),
 * which the float kernels then read: each row is read once per work item, as from an f32 / f16 cache. */
static const float *dequant_block(const cpu_state *st, const void *cache, const float *scale, size_t base, int n,
                                  float *out)
{
    int hd = st->m->cfg.head_dim, g = st->kv_g;
    for (int r = 0; r < n; r++) {
        size_t at = base + (size_t)r * st->kv_dim;
        st->kern->kv_q8_dequant((const int8_t *)cache + at, scale + at / (size_t)g, g, hd, out + (size_t)r * hd);
    }
    return out;
}

/* Softmax of x[0..n) with a sink (gpt-oss): one more logit in the sum, whose probability goes to nothing. */
static void softmax_sink(float *x, int n, float sink)
{
    float mx = sink, sum;
    for (int i = 0; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    sum = expf(sink - mx);
    for (int i = 0; i < n; i++)
        sum += x[i] = expf(x[i] - mx);
    for (int i = 0; i < n; i++)
        x[i] /= sum;
}

static void att_worker(void *ctx, int ith, int nth)
{
    (void)nth;
    att_job *j = ctx;
    cpu_state *st = j->st;
    const llm_config *c = &st->m->cfg;
    const cpu_kernels *k = st->kern;
    int hd = c->head_dim, n_heads = c->n_heads, group = c->n_heads / c->n_kv_heads, nh = j->heads;
    int per_tile = n_heads / nh, total = j->n_tiles * per_tile;
    size_t layer_off = st->layer_off[j->layer];
    const float *kc = (const float *)st->kcache + layer_off, *vc = (const float *)st->vcache + layer_off;
    const uint16_t *kh = (const uint16_t *)st->kcache + layer_off, *vh = (const uint16_t *)st->vcache + layer_off;
    float *scores = st->scores + (size_t)ith * CPU_ATT_TILE * (size_t)c->seq_len;
    float *kdq = st->kvq8 ? st->kvdq + (size_t)ith * 2 * (size_t)st->block_size * (size_t)hd : NULL;
    float *vdq = st->kvq8 ? kdq + (size_t)st->block_size * (size_t)hd : NULL;
    float scale = llm_attn_scale(c), cap = c->attn_softcap;
    int bs = st->block_size;
    /* a sliding-window layer: query position p sees p - win + 1 .. p (Gemma 2 / 3); without the causal mask
     * (EmbeddingGemma) p - win / 2 .. p + win / 2, as llama.cpp's symmetric window and transformers' */
    int win = st->m->layers[j->layer].swa ? c->swa_window : 0, causal = !c->bidirectional;
    int half = causal ? 0 : win / 2;
    const float *sinks = st->m->layers[j->layer].attn_sinks.data; /* gpt-oss's, per query head */

    for (;;) {
        int item = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (item >= total)
            break;
        int t0 = st->att_tiles[item / per_tile], h0 = item % per_tile * nh;
        int nt = st->att_tiles[item / per_tile + 1] - t0, rows = nt * nh; /* score row r: head h0 + r / nt */
        /* causal: query i of the tile sees positions up to pos0 + i; an encoder's see their whole input, up to
         * end (the first query's last position is `first`), or, in a symmetric window, up to the last query's
         * pos + half: the blocks past that are not read (a long input's window layers: O(n w), not O(n^2)) */
        int pos0 = j->b->pos[t0], end = causal ? pos0 + nt - 1 : st->att_end[item / per_tile];
        if (!causal && win > 0 && pos0 + nt - 1 + half < end)
            end = pos0 + nt - 1 + half;
        int first = causal ? pos0 : end, nblk = end / bs + 1;
        /* the first block any of the tile's queries sees (its first query's window starts first) */
        int reach = causal ? win - 1 : half; /* how far back the first query sees */
        int blk0 = win > 0 && pos0 - reach > 0 ? (pos0 - reach) / bs : 0;
        const int32_t *table = cpu_kv_table(st, &j->b->seqs[j->b->seq[t0]], j->layer);
        size_t koff = (size_t)(h0 / group) * hd; /* the item's heads share one KV head */
        const float *qr[CPU_ATT_TILE];
        float *sr[CPU_ATT_TILE], *orow[CPU_ATT_TILE]; /* per score row: its query, its block's scores, its output */
        for (int r = 0; r < rows; r++) {
            size_t at = (size_t)(t0 + r % nt) * st->q_dim + (size_t)(h0 + r / nt) * hd;
            qr[r] = st->q + at;
            orow[r] = st->att + at;
        }
        /* Scores block by block (positions within a KV block are contiguous), all queries per block; a block
         * every query sees whole goes to the several-query kernels. */
        for (int blk = blk0; blk < nblk; blk++) {
            size_t base = (size_t)table[blk] * (size_t)bs * st->kv_dim + koff, ks = st->kv_dim;
            const float *kb = kc + base;
            if (st->kvq8) {
                kb = dequant_block(st, st->kcache, st->kscale, layer_off + base, rows_read(end, blk, bs), kdq);
                ks = (size_t)hd;
            }
            if (first - blk * bs + 1 >= bs) {
                for (int r = 0; r < rows; r++)
                    sr[r] = scores + (size_t)r * c->seq_len + blk * bs;
                if (st->kv16)
                    k->attn_scores_mq_h(qr, rows, kh + base, (size_t)st->kv_dim, bs, hd, scale, sr);
                else
                    k->attn_scores_mq(qr, rows, kb, ks, bs, hd, scale, sr);
                continue;
            }
            for (int r = 0; r < rows; r++) {
                int n = (causal ? pos0 + r % nt : end) - blk * bs + 1;
                if (n <= 0)
                    continue;
                float *out = scores + (size_t)r * c->seq_len + blk * bs;
                if (st->kv16)
                    k->attn_scores_h(qr[r], kh + base, (size_t)st->kv_dim, n < bs ? n : bs, hd, scale, out);
                else
                    k->attn_scores(qr[r], kb, ks, n < bs ? n : bs, hd, scale, out);
            }
        }
        for (int r = 0; r < rows; r++) {
            /* the row's query at q sees from lo to hi; its scores run from `from` to p */
            int q = pos0 + r % nt, p = causal ? q : end, from = blk0 * bs;
            int lo = win > 0 && q - reach > from ? q - reach : from, hi = win > 0 && !causal && q + half < p ? q + half : p;
            float *sc = scores + (size_t)r * c->seq_len;
            if (cap > 0.0f) /* Gemma 2's soft cap, on the scaled scores */
                for (int i = lo; i <= hi; i++)
                    sc[i] = cap * tanhf(sc[i] / cap);
            if (c->alibi_max_bias > 0.0f) { /* jina-bert-v2's ALiBi: the head's slope times the distance */
                float slope = llm_alibi_slope(c, h0 + r / nt);
                for (int i = lo; i <= hi; i++)
                    sc[i] -= slope * (float)abs(i - q);
            }
            /* the softmax over the window alone: starting it at the tile's `from` would move where the vector
             * kernel's lanes split the sum with the tile, so a token's bits with its batch */
            if (sinks != NULL)
                softmax_sink(sc + lo, hi + 1 - lo, sinks[h0 + r / nt]);
            else
                k->softmax(sc + lo, hi + 1 - lo);
            for (int i = from; i < lo; i++) /* before the window, in a block the tile reads */
                sc[i] = 0.0f;
            for (int i = hi + 1; i <= p; i++) /* after a symmetric window */
                sc[i] = 0.0f;
            memset(orow[r], 0, (size_t)hd * sizeof(float));
        }
        for (int blk = blk0; blk < nblk; blk++) {
            size_t base = (size_t)table[blk] * (size_t)bs * st->kv_dim + koff, vs = st->kv_dim;
            const float *vb = vc + base;
            if (st->kvq8) {
                vb = dequant_block(st, st->vcache, st->vscale, layer_off + base, rows_read(end, blk, bs), vdq);
                vs = (size_t)hd;
            }
            if (first - blk * bs + 1 >= bs) {
                for (int r = 0; r < rows; r++)
                    sr[r] = scores + (size_t)r * c->seq_len + blk * bs;
                const float *const *ar = (const float *const *)sr;
                if (st->kv16)
                    k->attn_accum_mq_h(ar, rows, vh + base, (size_t)st->kv_dim, bs, hd, orow);
                else
                    k->attn_accum_mq(ar, rows, vb, vs, bs, hd, orow);
                continue;
            }
            for (int r = 0; r < rows; r++) {
                int n = (causal ? pos0 + r % nt : end) - blk * bs + 1;
                if (n <= 0)
                    continue;
                const float *a = scores + (size_t)r * c->seq_len + blk * bs;
                if (st->kv16)
                    k->attn_accum_h(a, vh + base, (size_t)st->kv_dim, n < bs ? n : bs, hd, orow[r]);
                else
                    k->attn_accum(a, vb, vs, n < bs ? n : bs, hd, orow[r]);
            }
        }
    }
}

void cpu_attention(cpu_state *st, const llm_batch *b, int layer)
{
    /* Tiles: att_tiles[i] is the first token of tile i; att_tiles[n_tiles] = n_tokens. */
    int n_tiles = 0, longest = 0;
    for (int t = 0; t < b->n_tokens; t++) {
        int t0 = n_tiles > 0 ? st->att_tiles[n_tiles - 1] : -1;
        if (t0 < 0 || t - t0 >= CPU_ATT_TILE || b->seq[t] != b->seq[t - 1] || b->pos[t] != b->pos[t - 1] + 1)
            st->att_tiles[n_tiles++] = t;
        int len = t - st->att_tiles[n_tiles - 1] + 1;
        longest = len > longest ? len : longest;
    }
    st->att_tiles[n_tiles] = b->n_tokens;
    if (st->m->cfg.bidirectional) /* each tile's sequence's last position in this step (its tokens are consecutive) */
        for (int i = n_tiles - 1, last = -1; i >= 0; i--) {
            int t1 = st->att_tiles[i + 1] - 1;
            if (i == n_tiles - 1 || b->seq[t1] != b->seq[t1 + 1])
                last = b->pos[t1];
            st->att_end[i] = last;
        }
    /* A GQA group's heads in one item (decode, short tiles): their KV head's blocks are read once instead of
     * once per query head, where that still leaves two items a thread. Each query's kernel calls and their
     * order stay the same, so its bits do too. */
    const llm_config *c = &st->m->cfg;
    int group = c->n_heads / c->n_kv_heads;
    int heads = group > 1 && longest * group <= CPU_ATT_TILE && n_tiles * c->n_kv_heads >= 2 * st->nth ? group : 1;
    att_job j = { .st = st, .b = b, .layer = layer, .n_tiles = n_tiles, .heads = heads };
    atomic_init(&j.next, 0);
    cpu_pool_run(st->pool, att_worker, &j);
}
