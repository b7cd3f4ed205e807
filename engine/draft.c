/* Draft-model speculation's drafter (draft.h). */
#include <stdlib.h>
#include <string.h>

#include "draft.h"

#define DRAFT_MAX_SEQS 64

struct llm_drafter {
    llm_backend  *be;
    llm_kv_cache *kv;
    int           vocab, target_vocab, max_tokens, bs;
    int32_t      *tok, *pos, *seq;
    uint8_t      *want, *mode;
    llm_seq_view  views[DRAFT_MAX_SEQS];
    int           row_of[DRAFT_MAX_SEQS]; /* this call: the request whose logits row each row is */
    int           seq_req[DRAFT_MAX_SEQS], seq_take[DRAFT_MAX_SEQS]; /* ... each sequence's request, tokens */
    float        *logits;                 /* [DRAFT_MAX_SEQS][vocab] (device argmax: not written) */
    int32_t       ids[DRAFT_MAX_SEQS];
    float         lp[DRAFT_MAX_SEQS];
};

llm_drafter *llm_drafter_create(llm_backend *be, int target_vocab, int max_tokens, llm_err *err)
{
    if (be == NULL || be->model == NULL || be->opts.kv_blocks < 1 || max_tokens < 1) {
        llm_seterr(err, "draft model: no backend or KV pool");
        return NULL;
    }
    llm_drafter *d = calloc(1, sizeof(*d));
    if (d == NULL) {
        llm_seterr(err, "draft model: out of memory");
        return NULL;
    }
    d->be = be;
    d->vocab = be->model->cfg.vocab_size;
    d->target_vocab = target_vocab;
    d->max_tokens = max_tokens;
    d->bs = be->opts.block_size;
    d->kv = llm_kv_create(be->opts.kv_blocks, d->bs);
    size_t n = (size_t)max_tokens;
    d->tok = malloc(n * sizeof(int32_t));
    d->pos = malloc(n * sizeof(int32_t));
    d->seq = malloc(n * sizeof(int32_t));
    d->want = malloc(n);
    d->mode = malloc(n);
    d->logits = malloc((size_t)DRAFT_MAX_SEQS * (size_t)d->vocab * sizeof(float));
    if (d->kv == NULL || d->tok == NULL || d->pos == NULL || d->seq == NULL || d->want == NULL || d->mode == NULL ||
        d->logits == NULL) {
        llm_drafter_destroy(d);
        llm_seterr(err, "draft model: out of memory");
        return NULL;
    }
    memset(d->mode, LLM_ROW_ARGMAX, n);
    return d;
}

void llm_drafter_destroy(llm_drafter *d)
{
    if (d == NULL)
        return;
    llm_kv_destroy(d->kv);
    free(d->tok); free(d->pos); free(d->seq); free(d->want); free(d->mode); free(d->logits);
    free(d);
}

void llm_drafter_release(llm_drafter *d, llm_drafter_seq *q)
{
    llm_kv_seq_release(d->kv, &q->kv);
    q->computed = q->base = q->n = 0;
}

void llm_drafter_confirm(llm_drafter_seq *q, int confirmed)
{
    /* the last draft was never fed back: its KV is not there */
    int kept = confirmed < q->n - 1 ? confirmed : q->n - 1;
    if (kept > 0)
        q->computed = q->base + kept;
    q->n = 0;
}

void llm_drafter_blocks(const llm_drafter *d, int *used, int *total)
{
    llm_kv_stats st;
    llm_kv_get_stats(d->kv, &st);
    *used = st.used;
    *total = st.n_blocks;
}

/* The greedy id of each row of the call just made (lowest id on ties, as the sampler's greedy). */
static int32_t row_argmax(const llm_drafter *d, int row, int on_device)
{
    if (on_device)
        return d->ids[row];
    const float *l = d->logits + (size_t)row * (size_t)d->vocab;
    int32_t best = 0;
    for (int32_t i = 1; i < d->vocab; i++)
        if (l[i] > l[best])
            best = i;
    return best;
}

/* One call over the batch of n tokens (nseq sequences); the greedy ids on the device where the backend can. */
static int draft_forward(llm_drafter *d, int n, int nseq, int *on_device, llm_err *err)
{
    llm_batch b = { n, d->tok, d->pos, d->seq, d->want, nseq, d->views };
    *on_device = d->be->forward_device != NULL;
    if (!*on_device)
        return d->be->ops->forward(d->be, &b, d->logits, err);
    llm_device_out dv;
    memset(&dv, 0, sizeof(dv));
    dv.mode = d->mode;
    dv.ids = d->ids;
    dv.logprob = d->lp;
    return d->be->forward_device(d->be, &b, &dv, d->logits, err);
}

/* Drops every request's state (a failed call): they start over next time. Out of memory: later calls are
 * smaller (catch-up chunks halved, down to 16 tokens). */
static int draft_fail(llm_drafter *d, llm_draft_req **reqs, int n, int rc)
{
    if (rc == LLM_BACKEND_NOMEM && d->max_tokens > 16)
        d->max_tokens = d->max_tokens / 2 > 16 ? d->max_tokens / 2 : 16;
    for (int i = 0; i < n; i++) {
        reqs[i]->n_out = 0;
        llm_drafter_release(d, reqs[i]->seq);
    }
    return -1;
}

int llm_drafter_run(llm_drafter *d, llm_draft_req **reqs, int n, llm_err *err)
{
    if (n > DRAFT_MAX_SEQS)
        n = DRAFT_MAX_SEQS;
    int live = 0, kmax = 0;
    for (int i = 0; i < n; i++) {
        llm_draft_req *r = reqs[i];
        llm_drafter_seq *q = r->seq;
        r->n_out = 0;
        q->n = 0;
        if (r->k < 1 || r->n_tokens < 1 || q->computed >= r->n_tokens) {
            r->k = 0;
            continue;
        }
        if (r->k > LLM_DRAFT_MAX)
            r->k = LLM_DRAFT_MAX;
        long room = (long)d->be->model->cfg.seq_len - r->n_tokens + 1; /* the draft model's own context */
        if (room < r->k)
            r->k = room > 0 ? (int)room : 0;
        if (r->k == 0)
            continue;
        if (q->kv.n_blocks == 0 && q->computed == 0) { /* a new sequence: a prompt prefix another one computed */
            int m = llm_kv_seq_match_prefix(d->kv, &q->kv, r->tokens, r->n_tokens - 1);
            q->computed = m > 0 ? m : 0;
        }
        /* its tokens, then drafts fed back at n_tokens .. n_tokens + k - 2 */
        if (llm_kv_seq_reserve(d->kv, &q->kv, r->n_tokens + r->k - 1) != 0) {
            llm_drafter_release(d, q);
            r->k = 0;
            continue;
        }
        live++;
        if (r->k > kmax)
            kmax = r->k;
    }
    if (live == 0)
        return 0;
    /* catch-up: each sequence's unseen tokens, in calls of at most max_tokens; the first draft from its last */
    for (;;) {
        int nt = 0, nseq = 0, rows = 0;
        for (int i = 0; i < n && nt < d->max_tokens; i++) {
            llm_draft_req *r = reqs[i];
            llm_drafter_seq *q = r->seq;
            if (r->k == 0 || q->computed >= r->n_tokens)
                continue;
            int take = r->n_tokens - q->computed;
            if (take > d->max_tokens - nt)
                take = d->max_tokens - nt;
            d->views[nseq] = (llm_seq_view){ q->kv.blocks, q->kv.n_blocks, NULL };
            d->seq_req[nseq] = i;
            d->seq_take[nseq] = take;
            for (int j = 0; j < take; j++) {
                int p = q->computed + j;
                d->tok[nt] = r->tokens[p];
                d->pos[nt] = p;
                d->seq[nt] = nseq;
                d->want[nt] = p == r->n_tokens - 1;
                if (d->want[nt])
                    d->row_of[rows++] = i;
                nt++;
            }
            nseq++;
        }
        if (nt == 0)
            break;
        int on_device, rc = draft_forward(d, nt, nseq, &on_device, err);
        if (rc != 0)
            return draft_fail(d, reqs, n, rc);
        for (int k = 0; k < nseq; k++) /* each sequence by what it took */
            reqs[d->seq_req[k]]->seq->computed += d->seq_take[k];
        for (int k = 0; k < rows; k++) {
            llm_draft_req *r = reqs[d->row_of[k]];
            r->out[0] = row_argmax(d, k, on_device);
            r->n_out = r->out[0] < d->target_vocab ? 1 : 0;
            if (r->n_out == 0)
                r->k = 0;
        }
        for (int i = 0; i < n; i++)
            if (reqs[i]->k > 0)
                llm_kv_seq_commit(d->kv, &reqs[i]->seq->kv, reqs[i]->tokens, reqs[i]->seq->computed);
    }
    /* the rest: each draft fed back for the next, one call per draft */
    for (int j = 1; j < kmax; j++) {
        int nt = 0;
        for (int i = 0; i < n; i++) {
            llm_draft_req *r = reqs[i];
            if (r->k <= j || r->n_out != j)
                continue;
            d->views[nt] = (llm_seq_view){ r->seq->kv.blocks, r->seq->kv.n_blocks, NULL };
            d->tok[nt] = r->out[j - 1];
            d->pos[nt] = r->n_tokens - 1 + j;
            d->seq[nt] = nt;
            d->want[nt] = 1;
            d->row_of[nt] = i;
            nt++;
        }
        if (nt == 0)
            break;
        int on_device, rc = draft_forward(d, nt, nt, &on_device, err);
        if (rc != 0)
            return draft_fail(d, reqs, n, rc);
        for (int k = 0; k < nt; k++) {
            llm_draft_req *r = reqs[d->row_of[k]];
            int32_t t = row_argmax(d, k, on_device);
            if (t < d->target_vocab)
                r->out[r->n_out++] = t;
        }
    }
    for (int i = 0; i < n; i++) {
        llm_drafter_seq *q = reqs[i]->seq;
        q->base = reqs[i]->n_tokens;
        q->n = reqs[i]->n_out;
    }
    return 0;
}
