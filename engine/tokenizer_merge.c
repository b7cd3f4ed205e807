/* The merge loop both encoders share, plus UTF-8 and byte-level helpers.
 * Symbols form a linked list over a working string; candidate pairs sit in a
 * binary heap and are checked for staleness when popped (a pair is stale when
 * one side has since merged into something else). */
#include "tokenizer_priv.h"

#include <stdlib.h>
#include <string.h>

int tok_utf8_len(const unsigned char *s, size_t avail)
{
    unsigned c = s[0];
    int n;
    uint32_t min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, min = 0x10000;
    else
        return 0;
    if (avail < (size_t)n)
        return 0;
    uint32_t cp = c & (0x3f >> (n - 1));
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* GPT-2's table: printable Latin-1 bytes stand for themselves, the other 68
 * bytes take code points 256.. in byte order. */
static int printable(unsigned b)
{
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
}

uint32_t tok_byte_to_cp(uint8_t b)
{
    if (printable(b))
        return b;
    uint32_t k = 0;
    for (unsigned i = 0; i < b; i++)
        k += !printable(i);
    return 256 + k;
}

int tok_cp_to_byte(uint32_t cp)
{
    if (cp < 256)
        return printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68)
        return -1;
    uint32_t k = cp - 256;
    for (unsigned b = 0; b < 256; b++)
        if (!printable(b) && k-- == 0)
            return (int)b;
    return -1;
}

/* ---- work area ---- */

int tok_work_sym(tok_work *w, int32_t id, uint32_t start, uint32_t len, int nomerge)
{
    if (w->nsym == w->capsym) {
        size_t nc = w->capsym ? w->capsym * 2 : 64;
        tok_sym *p = realloc(w->sym, nc * sizeof(*p));
        if (p == NULL)
            return -1;
        w->sym = p;
        w->capsym = nc;
    }
    int32_t i = (int32_t)w->nsym++;
    w->sym[i] = (tok_sym){ id, start, len, i - 1, i + 1, nomerge };
    return 0;
}

void tok_work_free(tok_work *w)
{
    free(w->sym);
    free(w->heap);
    memset(w, 0, sizeof(*w));
}

/* a before b: higher priority, then leftmost. */
static int before(const tok_pair *a, const tok_pair *b)
{
    return a->pri > b->pri || (a->pri == b->pri && a->left < b->left);
}

static int heap_push(tok_work *w, tok_pair p)
{
    if (w->nheap == w->capheap) {
        size_t nc = w->capheap ? w->capheap * 2 : 64;
        tok_pair *q = realloc(w->heap, nc * sizeof(*q));
        if (q == NULL)
            return -1;
        w->heap = q;
        w->capheap = nc;
    }
    size_t i = w->nheap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!before(&p, &w->heap[up]))
            break;
        w->heap[i] = w->heap[up];
        i = up;
    }
    w->heap[i] = p;
    return 0;
}

static tok_pair heap_pop(tok_work *w)
{
    tok_pair top = w->heap[0], last = w->heap[--w->nheap];
    size_t i = 0, n = w->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(&w->heap[c + 1], &w->heap[c]))
            c++;
        if (!before(&w->heap[c], &last))
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0)
        w->heap[i] = last;
    return top;
}

/* Queue the pair (l, r) if it can merge. */
static int try_pair(const llm_tokenizer *t, tok_work *w, const char *work, int spm, int32_t l, int32_t r)
{
    if (l < 0 || r < 0 || (size_t)r >= w->nsym)
        return 0;
    const tok_sym *a = &w->sym[l], *b = &w->sym[r];
    if (a->nomerge || b->nomerge)
        return 0;
    int32_t merged;
    float pri;
    if (spm) {
        merged = tok_map_get(&t->by_raw, work + a->start, a->len + b->len);
        if (merged < 0)
            return 0;
        pri = t->score[merged];
    } else {
        int rank = tok_merge_get(t, a->id, b->id, &merged);
        if (rank < 0)
            return 0;
        pri = -(float)rank;
    }
    return heap_push(w, (tok_pair){ pri, l, r, merged, a->len + b->len });
}

int tok_work_merge(const llm_tokenizer *t, tok_work *w, const char *work, int spm, tok_vec *out)
{
    w->nheap = 0;
    for (size_t i = 0; i + 1 < w->nsym; i++)
        if (try_pair(t, w, work, spm, (int32_t)i, (int32_t)i + 1))
            return -1;
    while (w->nheap > 0) {
        tok_pair p = heap_pop(w);
        tok_sym *a = &w->sym[p.left], *b = &w->sym[p.right];
        if (a->len == 0 || b->len == 0 || a->len + b->len != p.size || a->next != p.right)
            continue; /* stale */
        a->id = p.merged;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if ((size_t)b->next < w->nsym)
            w->sym[b->next].prev = p.left;
        if (try_pair(t, w, work, spm, a->prev, p.left) || try_pair(t, w, work, spm, p.left, a->next))
            return -1;
    }
    for (int32_t i = 0; w->nsym > 0 && (size_t)i < w->nsym; i = w->sym[i].next)
        if (w->sym[i].id >= 0 && tok_vec_push(out, w->sym[i].id))
            return -1;
    return 0;
}
