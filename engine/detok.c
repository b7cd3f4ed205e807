/* Detokenizing: token pieces -> UTF-8 text, streaming or whole. Bytes are
 * assembled into characters here so that a character split across tokens
 * (byte-level BPE, SPM byte fallback) is emitted only once complete, and an
 * invalid sequence becomes U+FFFD (one per maximal invalid subpart, as the
 * Unicode standard recommends). */
#include "tokenizer_priv.h"

#include <stdlib.h>
#include <string.h>

static const char REPLACEMENT[3] = { (char)0xef, (char)0xbf, (char)0xbd };

typedef struct {
    char  *out;
    size_t cap, n;
} sink;

static void put(sink *s, const void *p, size_t k)
{
    if (k > s->cap - s->n) /* caller's buffer too small: truncate rather than overrun */
        k = s->cap - s->n;
    memcpy(s->out + s->n, p, k);
    s->n += k;
}

/* Bytes a lead byte announces (0: not a lead byte). */
static int seq_len(uint8_t b)
{
    return b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
}

/* May c follow the pending bytes p[0..n)? (second-byte limits exclude
 * overlongs, surrogates and code points past U+10FFFF) */
static int continues(const uint8_t *p, int n, uint8_t c)
{
    if ((c & 0xc0) != 0x80)
        return 0;
    if (n == 1) {
        if (p[0] == 0xe0)
            return c >= 0xa0;
        if (p[0] == 0xed)
            return c <= 0x9f;
        if (p[0] == 0xf0)
            return c >= 0x90;
        if (p[0] == 0xf4)
            return c <= 0x8f;
    }
    return 1;
}

static void feed_byte(llm_detok *d, uint8_t b, sink *s)
{
    if (d->npend > 0) {
        if (continues(d->pend, d->npend, b)) {
            d->pend[d->npend++] = b;
            if (d->npend == seq_len(d->pend[0])) {
                put(s, d->pend, (size_t)d->npend);
                d->npend = 0;
            }
            return;
        }
        put(s, REPLACEMENT, 3);
        d->npend = 0;
    }
    if (b < 0x80)
        put(s, &b, 1);
    else if (seq_len(b))
        d->pend[d->npend++] = b;
    else
        put(s, REPLACEMENT, 3);
}

void llm_detok_init(llm_detok *d, const llm_tokenizer *t)
{
    memset(d, 0, sizeof(*d));
    d->tok = t;
    d->at_start = 1;
    d->skip_special = 1;
    for (int i = 0; i < LLM_DETOK_KEEP; i++)
        d->keep[i] = -1;
}

size_t llm_detok_push(llm_detok *d, int32_t id, char *out, size_t cap)
{
    const llm_tokenizer *t = d->tok;
    sink s = { out, cap, 0 };
    const char *p;
    size_t n;
    if (llm_tok_piece(t, id, &p, &n) != 0)
        return 0;
    if (id == t->bos) { /* what follows BOS starts the text again (SPM dummy prefix) */
        d->at_start = 1;
        if (d->skip_special)
            return 0;
    }
    if (d->skip_special && t->type[id] == TOK_CONTROL) {
        int kept = 0;
        for (int i = 0; i < LLM_DETOK_KEEP && !kept; i++)
            kept = id == d->keep[i];
        if (!kept)
            return 0;
    }
    int lead_space = ((t->kind == LLM_TOK_SPM || t->kind == LLM_TOK_UGM) && t->add_space_prefix) || t->kind == LLM_TOK_WPM; /* the first word's */
    if (lead_space && d->at_start && n > 0 && p[0] == ' ' && t->type[id] != TOK_BYTE && t->type[id] != TOK_CONTROL) {
        p++;
        n--;
    }
    if (t->type[id] != TOK_CONTROL) /* even a piece that was only the dummy space */
        d->at_start = 0;
    if (t->type[id] == TOK_CONTROL || t->type[id] == TOK_USER) {
        /* their text is literal: finish any pending character first */
        if (d->npend > 0) {
            put(&s, REPLACEMENT, 3);
            d->npend = 0;
        }
    }
    for (size_t i = 0; i < n; i++)
        feed_byte(d, (uint8_t)p[i], &s);
    return s.n;
}

size_t llm_detok_flush(llm_detok *d, char *out, size_t cap)
{
    sink s = { out, cap, 0 };
    if (d->npend > 0)
        put(&s, REPLACEMENT, 3);
    d->npend = 0;
    return s.n;
}

char *llm_tok_decode_ex(const llm_tokenizer *t, const int32_t *ids, size_t n, int skip_special)
{
    size_t cap = 16, len = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p;
        size_t k;
        if (llm_tok_piece(t, ids[i], &p, &k) == 0)
            cap += 3 * k + 3; /* worst case: every byte a U+FFFD */
    }
    char *out = malloc(cap);
    if (out == NULL)
        return NULL;
    llm_detok d;
    llm_detok_init(&d, t);
    d.skip_special = skip_special;
    for (size_t i = 0; i < n; i++)
        len += llm_detok_push(&d, ids[i], out + len, cap - len - 1);
    len += llm_detok_flush(&d, out + len, cap - len - 1);
    out[len] = 0;
    return out;
}

char *llm_tok_decode(const llm_tokenizer *t, const int32_t *ids, size_t n)
{
    return llm_tok_decode_ex(t, ids, n, 1);
}
