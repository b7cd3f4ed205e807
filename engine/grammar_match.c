/* Reading output against a compiled grammar (grammar.h), and the vocabulary mask built on it.
 *
 * A derivation is a stack of positions in el[]: what the grammar still wants, the next element on top. A
 * stack is kept "expanded": its top is a character class (a rule on top is replaced by each of its
 * alternatives, an empty alternative pops it), or it is empty (the output is a whole text). A code point
 * moves every stack whose top class holds it and drops the others; the output is valid while one stack
 * lives. A code point's bytes may come in different tokens: while one is partly read, the stacks stay and
 * the bytes so far must leave a code point some top class holds.
 *
 * The mask walks the vocabulary in byte order (llm_json_vocab_sorted): a token's state after each of its
 * bytes is kept by depth, so the next token starts from the state after the prefix they share, and once a
 * prefix fails every token after it with that prefix is refused without a step. */
#include "grammar_priv.h"

#include <stdlib.h>
#include <string.h>

/* Bounds on one step's work, so that no grammar can make a mask cost without end: expansions of one stack
 * (MAX_WORK) and positions in all the stacks of a set (MAX_POSITIONS); past them, later derivations are not
 * followed (the output stays inside the grammar). Ordinary grammars hold a few dozen positions. */
#define MAX_WORK      65536
#define MAX_POSITIONS 8192

typedef struct {
    uint32_t *pos;              /* the stacks' positions, one stack after another, bottom first */
    uint32_t  n_pos, cap_pos;
    uint32_t *off, *len;        /* stack i: pos[off[i] .. off[i] + len[i]) */
    uint64_t *hash;
    uint32_t  n, cap;
    uint8_t   u;                /* a code point partly read: llm_utf8_step's state (0: none) */
    uint8_t   need;             /* its bytes in all */
    uint32_t  part;             /* its bits so far */
} gset;

/* A mask made before, kept with the state it was made for: a text the grammar repeats (a string's characters,
 * a list's items) comes back to the same stacks, whose mask is then a copy. */
#define MEMO 8
typedef struct {
    gset                  key;
    uint64_t             *bits;
    int                   left, n_logits;
    const llm_json_vocab *v;
} gmemo;

struct llm_grammar_state {
    const llm_grammar *g;
    gset  cur;
    gset  a, b, work;           /* feed's and expansion's scratch */
    gset *depth;                /* the mask's states by depth */
    uint32_t n_depth;
    gmemo memo[MEMO];
    uint32_t memo_next;         /* the entry replaced next */
};

static void gset_free(gset *s)
{
    free(s->pos);
    free(s->off);
    free(s->len);
    free(s->hash);
    memset(s, 0, sizeof(*s));
}

static int reserve(gset *s, uint32_t stacks, uint32_t pos)
{
    if (pos > s->cap_pos) {
        uint32_t c = s->cap_pos ? s->cap_pos : 64;
        while (c < pos)
            c *= 2;
        uint32_t *p = realloc(s->pos, (size_t)c * sizeof(uint32_t));
        if (p == NULL)
            return -1;
        s->pos = p;
        s->cap_pos = c;
    }
    if (stacks > s->cap) {
        uint32_t c = s->cap ? s->cap : 8;
        while (c < stacks)
            c *= 2;
        uint32_t *o = realloc(s->off, (size_t)c * sizeof(uint32_t));
        if (o != NULL)
            s->off = o;
        uint32_t *l = realloc(s->len, (size_t)c * sizeof(uint32_t));
        if (l != NULL)
            s->len = l;
        uint64_t *h = realloc(s->hash, (size_t)c * sizeof(uint64_t));
        if (h != NULL)
            s->hash = h;
        if (o == NULL || l == NULL || h == NULL)
            return -1;
        s->cap = c;
    }
    return 0;
}

static int same_words(const uint32_t *a, const uint32_t *b, uint32_t n)
{
    return n == 0 || memcmp(a, b, n * sizeof(uint32_t)) == 0; /* (an empty stack's pointer may be NULL) */
}

static uint64_t hash_stack(const uint32_t *p, uint32_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Add a stack unless it is there already (or the set is full). 0, or -1: no memory. */
static int gset_add(gset *s, const uint32_t *p, uint32_t n, int dedupe)
{
    uint64_t h = dedupe ? hash_stack(p, n) : 0;
    if (dedupe) {
        if (s->n >= LLM_GRAMMAR_MAX_STACKS || s->n_pos + n > MAX_POSITIONS)
            return 0;
        for (uint32_t i = 0; i < s->n; i++)
            if (s->hash[i] == h && s->len[i] == n && same_words(s->pos + s->off[i], p, n))
                return 0;
    }
    if (reserve(s, s->n + 1, s->n_pos + n) != 0)
        return -1;
    if (n > 0)
        memcpy(s->pos + s->n_pos, p, n * sizeof(uint32_t));
    s->off[s->n] = s->n_pos;
    s->len[s->n] = n;
    s->hash[s->n] = h;
    s->n++;
    s->n_pos += n;
    return 0;
}

static int gset_copy(gset *dst, const gset *src)
{
    if (reserve(dst, src->n, src->n_pos) != 0)
        return -1;
    if (src->n_pos > 0) /* (an empty set's arrays may be NULL) */
        memcpy(dst->pos, src->pos, src->n_pos * sizeof(uint32_t));
    if (src->n > 0) {
        memcpy(dst->off, src->off, src->n * sizeof(uint32_t));
        memcpy(dst->len, src->len, src->n * sizeof(uint32_t));
        memcpy(dst->hash, src->hash, src->n * sizeof(uint64_t));
    }
    dst->n = src->n;
    dst->n_pos = src->n_pos;
    dst->u = src->u;
    dst->need = src->need;
    dst->part = src->part;
    return 0;
}

/* Every expanded form of stack stk (n deep) into out. */
static int expand(const llm_grammar *g, gset *out, gset *work, const uint32_t *stk, uint32_t n)
{
    if (n == 0 || G_KIND(g->el[stk[n - 1]]) == G_SET) /* expanded already: most steps inside a rule */
        return gset_add(out, stk, n, 1);
    uint32_t tmp[LLM_GRAMMAR_MAX_DEPTH + 1];
    work->n = work->n_pos = 0;
    if (gset_add(work, stk, n, 0) != 0)
        return -1;
    for (int steps = 0; work->n > 0 && steps < MAX_WORK; steps++) {
        uint32_t k = work->len[--work->n];
        if (k > 0)
            memcpy(tmp, work->pos + work->off[work->n], k * sizeof(uint32_t));
        work->n_pos = work->off[work->n];
        if (k == 0 || G_KIND(g->el[tmp[k - 1]]) == G_SET) {
            if (gset_add(out, tmp, k, 1) != 0)
                return -1;
            continue;
        }
        uint32_t top = tmp[--k], r = G_ARG(g->el[top]), a = g->rule_start[r];
        if (g->el[top + 1] != G_END)
            tmp[k++] = top + 1; /* what follows the rule, under it */
        for (uint32_t i = 0; i < g->rule_nalt[r]; i++) {
            if (g->el[a] == G_END) {
                if (gset_add(work, tmp, k, 0) != 0)
                    return -1;
            } else if (k < LLM_GRAMMAR_MAX_DEPTH) { /* deeper: not followed */
                tmp[k] = a;
                if (gset_add(work, tmp, k + 1, 0) != 0)
                    return -1;
            }
            while (g->el[a] != G_END)
                a++;
            a++;
        }
    }
    return 0;
}

/* The stacks of from whose top holds code point cp, moved past it, into to. 0, or -1: none. */
static int advance(const llm_grammar *g, const gset *from, gset *to, gset *work, uint32_t cp)
{
    uint32_t tmp[LLM_GRAMMAR_MAX_DEPTH + 1];
    to->n = to->n_pos = 0;
    to->u = to->need = 0;
    to->part = 0;
    for (uint32_t i = 0; i < from->n; i++) {
        uint32_t k = from->len[i];
        if (k == 0)
            continue;
        const uint32_t *p = from->pos + from->off[i];
        uint32_t top = p[k - 1];
        if (!llm_grammar_set_has(g, &g->sets[G_ARG(g->el[top])], cp))
            continue;
        memcpy(tmp, p, (k - 1) * sizeof(uint32_t));
        k--;
        if (g->el[top + 1] != G_END)
            tmp[k++] = top + 1;
        if (expand(g, to, work, tmp, k) != 0)
            return -1;
    }
    return to->n > 0 ? 0 : -1;
}

/* from after byte c, into to: 0, or -1 when c cannot come. */
static int step_byte(const llm_grammar *g, const gset *from, gset *to, gset *work, uint8_t c)
{
    if (from->u == 0 && c < 0x80)
        return advance(g, from, to, work, c);
    uint8_t u = from->u;
    if (llm_utf8_step(&u, c) != 0)
        return -1;
    uint32_t part = from->u == 0 ? (uint32_t)(c < 0xe0 ? c & 0x1f : c < 0xf0 ? c & 0x0f : c & 0x07)
                                 : from->part << 6 | (c & 0x3fu);
    uint8_t need = from->u == 0 ? (uint8_t)(c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4) : from->need;
    if ((u & 3) == 0)
        return advance(g, from, to, work, part);
    /* partly read: the code points it may still become */
    unsigned rest = 6u * (u & 3);
    uint32_t lo = part << rest, hi = lo | ((1u << rest) - 1);
    uint32_t least = need == 2 ? 0x80 : need == 3 ? 0x800 : 0x10000;
    if (lo < least)
        lo = least;
    if (hi > 0x10ffff)
        hi = 0x10ffff;
    int any = 0;
    for (uint32_t i = 0; i < from->n && !any; i++)
        if (from->len[i] > 0) {
            uint32_t top = from->pos[from->off[i] + from->len[i] - 1];
            any = llm_grammar_set_meets(g, &g->sets[G_ARG(g->el[top])], lo, hi);
        }
    if (!any || gset_copy(to, from) != 0)
        return -1;
    to->u = u;
    to->need = need;
    to->part = part;
    return 0;
}

llm_grammar_state *llm_grammar_state_new(const llm_grammar *g)
{
    llm_grammar_state *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->g = g;
    uint32_t start = 0; /* el[0]: root */
    if (expand(g, &s->cur, &s->work, &start, 1) != 0) {
        llm_grammar_state_free(s);
        return NULL;
    }
    return s;
}

void llm_grammar_state_free(llm_grammar_state *s)
{
    if (s == NULL)
        return;
    gset_free(&s->cur);
    gset_free(&s->a);
    gset_free(&s->b);
    gset_free(&s->work);
    for (uint32_t i = 0; i < s->n_depth; i++)
        gset_free(&s->depth[i]);
    for (int i = 0; i < MEMO; i++) {
        gset_free(&s->memo[i].key);
        free(s->memo[i].bits);
    }
    free(s->depth);
    free(s);
}

int llm_grammar_state_copy(llm_grammar_state *dst, const llm_grammar_state *src)
{
    if (gset_copy(&dst->a, &src->cur) != 0)
        return -1;
    gset t = dst->cur;
    dst->cur = dst->a;
    dst->a = t;
    return 0;
}

int llm_grammar_feed(llm_grammar_state *s, const char *p, size_t n)
{
    if (gset_copy(&s->a, &s->cur) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (step_byte(s->g, &s->a, &s->b, &s->work, (uint8_t)p[i]) != 0)
            return -1;
        gset t = s->a;
        s->a = s->b;
        s->b = t;
    }
    gset t = s->cur;
    s->cur = s->a;
    s->a = t;
    return 0;
}

int llm_grammar_accepts(const llm_grammar_state *s)
{
    if (s->cur.u != 0)
        return 0;
    for (uint32_t i = 0; i < s->cur.n; i++)
        if (s->cur.len[i] == 0)
            return 1;
    return 0;
}

int llm_grammar_can_go_on(const llm_grammar_state *s)
{
    if (s->cur.u != 0)
        return 1;
    for (uint32_t i = 0; i < s->cur.n; i++)
        if (s->cur.len[i] > 0)
            return 1;
    return 0;
}

/* The same stacks (in any order) and the same code point partly read. */
static int same_state(const gset *x, const gset *y)
{
    if (x->n != y->n || x->n_pos != y->n_pos || x->u != y->u || x->part != y->part)
        return 0;
    for (uint32_t i = 0; i < x->n; i++) {
        uint32_t j = i < y->n && y->hash[i] == x->hash[i] ? i : 0;
        while (j < y->n && !(y->hash[j] == x->hash[i] && y->len[j] == x->len[i] &&
                             same_words(y->pos + y->off[j], x->pos + x->off[i], x->len[i])))
            j++;
        if (j == y->n)
            return 0;
    }
    return 1;
}

static int walk_mask(llm_grammar_state *s, const llm_json_vocab *v, uint64_t *allow, int n_logits);

int llm_grammar_mask_bits(const llm_grammar_state *cs, const llm_json_vocab *v, uint64_t *allow, int n_logits)
{
    llm_grammar_state *s = (llm_grammar_state *)cs; /* its scratch and kept masks only */
    size_t bytes = (size_t)(n_logits + 63) / 64 * sizeof(uint64_t);
    for (int i = 0; i < MEMO; i++) {
        gmemo *m = &s->memo[i];
        if (m->bits != NULL && m->v == v && m->n_logits == n_logits && same_state(&m->key, &s->cur)) {
            memcpy(allow, m->bits, bytes);
            return m->left;
        }
    }
    int left = walk_mask(s, v, allow, n_logits);
    gmemo *m = &s->memo[s->memo_next];
    if (m->bits == NULL || m->n_logits != n_logits) {
        free(m->bits);
        m->bits = malloc(bytes);
    }
    if (m->bits != NULL && gset_copy(&m->key, &s->cur) == 0) {
        memcpy(m->bits, allow, bytes);
        m->left = left;
        m->n_logits = n_logits;
        m->v = v;
        s->memo_next = (s->memo_next + 1) % MEMO;
    } else {
        free(m->bits);
        m->bits = NULL;
    }
    return left;
}

static int walk_mask(llm_grammar_state *s, const llm_json_vocab *v, uint64_t *allow, int n_logits)
{
    int words = (n_logits + 63) / 64, left = 0;
    memset(allow, 0, (size_t)words * sizeof(uint64_t));
    const int32_t *ids;
    const uint16_t *lcp;
    uint32_t maxlen;
    int ns = llm_json_vocab_sorted(v, &ids, &lcp, &maxlen);
    if (s->n_depth < maxlen + 2) { /* (depth[1] is also the loop test's scratch) */
        gset *d = realloc(s->depth, (size_t)(maxlen + 2) * sizeof(gset));
        if (d == NULL)
            return 0; /* no memory: nothing allowed, as a state nothing continues */
        memset(d + s->n_depth, 0, (size_t)(maxlen + 2 - s->n_depth) * sizeof(gset));
        s->depth = d;
        s->n_depth = maxlen + 2;
    }
    if (gset_copy(&s->depth[0], &s->cur) != 0)
        return 0;
    /* the ASCII characters that lead back to these very stacks (a string's or a word's characters, read
     * in a loop): a token of only those is taken with no step at all */
    uint8_t loop[128] = { 0 };
    for (int c = 0; c < 128 && s->cur.u == 0 && s->cur.n <= 16; c++)
        loop[c] = advance(s->g, &s->cur, &s->depth[1], &s->work, (uint32_t)c) == 0 && same_state(&s->depth[1], &s->cur);
    uint32_t have = 0, dead = UINT32_MAX; /* depth[0..have] hold a prefix of the last token stepped; a
                                           * prefix of `dead` bytes failed */
    for (int i = 0; i < ns; i++) {
        int32_t id = ids[i];
        uint32_t shared = i > 0 ? lcp[i] : 0;
        if (dead <= shared)
            continue; /* it starts with the prefix that failed */
        dead = UINT32_MAX;
        if (have > shared)
            have = shared;
        size_t len, k = 0;
        const uint8_t *p = (const uint8_t *)llm_json_token_bytes(v, id, &len);
        while (k < len && p[k] < 128 && loop[p[k]])
            k++;
        while (k < len && have < len) {
            if (step_byte(s->g, &s->depth[have], &s->depth[have + 1], &s->work, p[have]) != 0) {
                dead = have + 1;
                break;
            }
            have++;
        }
        if (dead == UINT32_MAX && id < n_logits) {
            allow[id >> 6] |= 1ull << (id & 63);
            left++;
        }
    }
    return left;
}
