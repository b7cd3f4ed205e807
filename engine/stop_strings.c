/* Stop-string matching over streamed text (see stop_strings.h).
 *
 * Invariant between calls: buf holds only text that has not been emitted, and
 * it is the longest suffix of everything seen that is a proper prefix of some
 * stop string. A stop occurrence that is not yet complete must start inside
 * that suffix, so searching buf + new text finds every match at its earliest
 * position. */
#include "stop_strings.h"

#include <stdlib.h>
#include <string.h>

int llm_stop_init(llm_stop_matcher *m, const char *const *stops, const size_t *lens, int n)
{
    memset(m, 0, sizeof *m);
    m->which = -1;
    if (n < 0 || n > LLM_STOP_MAX) return -1;
    for (int i = 0; i < n; i++) {
        size_t l = lens ? lens[i] : strlen(stops[i]);
        if (l == 0) continue;
        if (l > LLM_STOP_MAX_LEN) { llm_stop_free(m); return -1; }
        char *s = malloc(l + 1);
        if (!s) { llm_stop_free(m); return -1; }
        memcpy(s, stops[i], l);
        s[l] = 0;
        m->stop[m->n_stop] = s;
        m->stop_len[m->n_stop++] = l;
        if (l > m->max_len) m->max_len = l;
    }
    return 0;
}

void llm_stop_free(llm_stop_matcher *m)
{
    for (int i = 0; i < m->n_stop; i++) free(m->stop[i]);
    free(m->buf);
    memset(m, 0, sizeof *m);
    m->which = -1;
}

/* Earliest position in h[0..n) where a stop string occurs whole; n if none. */
static size_t find_stop(const llm_stop_matcher *m, const char *h, size_t n, int *which)
{
    size_t best = n;
    for (int i = 0; i < m->n_stop; i++) {
        size_t l = m->stop_len[i];
        if (l > n) continue;
        const char *p = memmem(h, n, m->stop[i], l);
        if (p && (size_t)(p - h) < best) { best = (size_t)(p - h); *which = i; }
    }
    return best;
}

/* Length of the longest suffix of h[0..n) that is a proper prefix of a stop string. */
static size_t partial_suffix(const llm_stop_matcher *m, const char *h, size_t n)
{
    size_t maxk = m->max_len ? m->max_len - 1 : 0;
    if (maxk > n) maxk = n;
    for (size_t k = maxk; k > 0; k--)
        for (int i = 0; i < m->n_stop; i++)
            if (m->stop_len[i] > k && memcmp(h + n - k, m->stop[i], k) == 0) return k;
    return 0;
}

int llm_stop_push(llm_stop_matcher *m, const char *in, size_t len, const char **out, size_t *out_len)
{
    *out = "";
    *out_len = 0;
    if (m->done) return 1;
    if (m->n_stop == 0) { *out = in; *out_len = len; return 0; }
    /* Drop what the previous call emitted. */
    if (m->emit_off) {
        memmove(m->buf, m->buf + m->emit_off, m->len - m->emit_off);
        m->len -= m->emit_off;
        m->emit_off = 0;
    }
    /* The bytes the previous call emitted are gone; buf starts with held text. */
    if (m->len + len + 1 > m->cap) {
        size_t nc = m->cap ? m->cap : 64;
        while (nc < m->len + len + 1) nc *= 2;
        char *nb = realloc(m->buf, nc);
        if (!nb) return -1;
        m->buf = nb;
        m->cap = nc;
    }
    if (len) memcpy(m->buf + m->len, in, len);
    m->len += len;

    int which = -1;
    size_t pos = find_stop(m, m->buf, m->len, &which);
    if (which >= 0) {
        m->done = 1;
        m->which = which;
        *out = m->buf;
        *out_len = pos;
        m->len = pos; /* nothing is held after the end */
        m->emit_off = pos;
        return 1;
    }
    size_t keep = partial_suffix(m, m->buf, m->len);
    size_t emit = m->len - keep;
    *out = m->buf;
    *out_len = emit;
    /* buf[0..emit) is handed out now; removed at the start of the next call. */
    m->emit_off = emit;
    return 0;
}

void llm_stop_flush(llm_stop_matcher *m, const char **out, size_t *out_len)
{
    *out = "";
    *out_len = 0;
    if (m->done || m->n_stop == 0 || !m->buf) return;
    *out = m->buf + m->emit_off;
    *out_len = m->len - m->emit_off;
    m->emit_off = m->len;
}
