/* Grouped-query attention over the paged KV cache: one work item per
 * (token, query head), taken from a shared counter. */
#include <math.h>
#include <stdatomic.h>

#include "cpu/cpu_backend.h"

typedef struct {
    cpu_state *st;
    const llm_batch *b;
    int layer;
    _Atomic int next;
} att_job;

static void att_worker(void *ctx, int ith, int nth)
{
    (void)nth;
    att_job *j = ctx;
    cpu_state *st = j->st;
    const llm_config *c = &st->m->cfg;
    const cpu_kernels *k = st->kern;
    int hd = c->head_dim, n_heads = c->n_heads, group = c->n_heads / c->n_kv_heads;
    int total = j->b->n_tokens * n_heads;
    size_t layer_off = (size_t)j->layer * (size_t)st->kv_blocks * (size_t)st->block_size * (size_t)st->kv_dim;
    const float *kc = st->kcache + layer_off, *vc = st->vcache + layer_off;
    float *sc = st->scores + (size_t)ith * (size_t)c->seq_len;
    float scale = 1.0f / sqrtf((float)hd);

    for (;;) {
        int item = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (item >= total)
            break;
        int t = item / n_heads, h = item % n_heads;
        int pos = j->b->pos[t];
        const llm_seq_view *s = &j->b->seqs[j->b->seq[t]];
        const float *q = st->q + (size_t)t * st->q_dim + (size_t)h * hd;
        size_t koff = (size_t)(h / group) * hd;
        /* Scores block by block: positions within a KV block are contiguous. */
        int bs = st->block_size, nblk = pos / bs + 1;
        for (int blk = 0; blk < nblk; blk++) {
            int n = blk == nblk - 1 ? pos - blk * bs + 1 : bs;
            size_t base = (size_t)s->blocks[blk] * (size_t)bs * st->kv_dim + koff;
            k->attn_scores(q, kc + base, (size_t)st->kv_dim, n, hd, scale, sc + blk * bs);
        }
        float mx = -INFINITY;
        for (int p = 0; p <= pos; p++)
            mx = sc[p] > mx ? sc[p] : mx;
        float sum = k->exp_sub_sum(sc, pos + 1, mx);
        float inv = 1.0f / sum;
        for (int p = 0; p <= pos; p++)
            sc[p] *= inv;
        float *out = st->att + (size_t)t * st->q_dim + (size_t)h * hd;
        memset(out, 0, (size_t)hd * sizeof(float));
        for (int blk = 0; blk < nblk; blk++) {
            int n = blk == nblk - 1 ? pos - blk * bs + 1 : bs;
            size_t base = (size_t)s->blocks[blk] * (size_t)bs * st->kv_dim + koff;
            k->attn_accum(sc + blk * bs, vc + base, (size_t)st->kv_dim, n, hd, out);
        }
    }
}

void cpu_attention(cpu_state *st, const llm_batch *b, int layer)
{
    att_job j = { .st = st, .b = b, .layer = layer };
    atomic_init(&j.next, 0);
    cpu_pool_run(st->pool, att_worker, &j);
}
