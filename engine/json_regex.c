/* Regex -> syntax tree -> Thompson NFA over bytes -> DFA over byte classes, pruned to states that can still
 * reach a match (json_regex.h). */
#include "json_regex.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- syntax tree ---- */

/* One character of a class: a sequence of 1..4 byte ranges (a UTF-8 encoding). */
typedef struct {
    uint8_t n, lo[4], hi[4];
} seq_t;

enum { T_SET, T_CAT, T_ALT, T_REP, T_EMPTY };

typedef struct node {
    int          type;
    seq_t       *seqs;   /* T_SET: any of these */
    int          n_seqs;
    struct node *a, *b;  /* T_CAT, T_ALT: a then/or b; T_REP: a */
    int          min, max; /* T_REP: max -1 = unbounded */
} node;

typedef struct {
    const char *p;
    char       *err;
    size_t      cap;
    int         failed;
    node      **all;      /* every node, for freeing */
    int         n_all, cap_all;
    int         depth;    /* groups open */
} parser;

static void fail(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(parser *ps, const char *fmt, ...)
{
    if (ps->failed)
        return;
    ps->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err, ps->cap, fmt, ap);
    va_end(ap);
}

static node *mk(parser *ps, int type)
{
    if (ps->failed)
        return NULL;
    if (ps->n_all == ps->cap_all) {
        int cap = ps->cap_all ? ps->cap_all * 2 : 64;
        node **q = realloc(ps->all, (size_t)cap * sizeof(node *));
        if (q == NULL) {
            fail(ps, "pattern: out of memory");
            return NULL;
        }
        ps->all = q;
        ps->cap_all = cap;
    }
    node *n = calloc(1, sizeof(node));
    if (n == NULL) {
        fail(ps, "pattern: out of memory");
        return NULL;
    }
    n->type = type;
    ps->all[ps->n_all++] = n;
    return n;
}

static int add_seq(parser *ps, node *n, int len, const uint8_t *lo, const uint8_t *hi)
{
    seq_t *q = realloc(n->seqs, (size_t)(n->n_seqs + 1) * sizeof(seq_t));
    if (q == NULL) {
        fail(ps, "pattern: out of memory");
        return -1;
    }
    n->seqs = q;
    seq_t *s = &n->seqs[n->n_seqs++];
    s->n = (uint8_t)len;
    memcpy(s->lo, lo, (size_t)len);
    memcpy(s->hi, hi, (size_t)len);
    return 0;
}

static int add_range(parser *ps, node *n, uint8_t lo, uint8_t hi) { return add_seq(ps, n, 1, &lo, &hi); }

/* Every multi-byte UTF-8 character (well-formed: no overlongs, no surrogates), U+2028 and U+2029 (line
 * terminators) left out when no_lt. */
static void add_multibyte(parser *ps, node *n, int no_lt)
{
    static const struct { uint8_t n, lo[4], hi[4]; } utf8[] = {
        { 2, { 0xc2, 0x80 }, { 0xdf, 0xbf } },
        { 3, { 0xe0, 0xa0, 0x80 }, { 0xe0, 0xbf, 0xbf } },
        { 3, { 0xe1, 0x80, 0x80 }, { 0xe1, 0xbf, 0xbf } },
        { 3, { 0xe3, 0x80, 0x80 }, { 0xec, 0xbf, 0xbf } },
        { 3, { 0xed, 0x80, 0x80 }, { 0xed, 0x9f, 0xbf } },
        { 3, { 0xee, 0x80, 0x80 }, { 0xef, 0xbf, 0xbf } },
        { 4, { 0xf0, 0x90, 0x80, 0x80 }, { 0xf0, 0xbf, 0xbf, 0xbf } },
        { 4, { 0xf1, 0x80, 0x80, 0x80 }, { 0xf3, 0xbf, 0xbf, 0xbf } },
        { 4, { 0xf4, 0x80, 0x80, 0x80 }, { 0xf4, 0x8f, 0xbf, 0xbf } },
    };
    for (size_t i = 0; i < sizeof utf8 / sizeof utf8[0]; i++)
        add_seq(ps, n, utf8[i].n, utf8[i].lo, utf8[i].hi);
    /* E2: U+2000..U+2FFF, but for E2 80 A8 / A9 when line terminators are out */
    const uint8_t a_lo[3] = { 0xe2, 0x81, 0x80 }, a_hi[3] = { 0xe2, 0xbf, 0xbf };
    add_seq(ps, n, 3, a_lo, a_hi);
    const uint8_t b_lo[3] = { 0xe2, 0x80, 0x80 }, b_hi[3] = { 0xe2, 0x80, no_lt ? 0xa7 : 0xbf };
    add_seq(ps, n, 3, b_lo, b_hi);
    if (no_lt) {
        const uint8_t c_lo[3] = { 0xe2, 0x80, 0xaa }, c_hi[3] = { 0xe2, 0x80, 0xbf };
        add_seq(ps, n, 3, c_lo, c_hi);
    }
}

/* ASCII members of a class as a 128-bit set. */
typedef struct {
    uint64_t w[2];
} aset;

static void aset_add(aset *s, int lo, int hi)
{
    for (int c = lo; c <= hi; c++)
        s->w[c >> 6] |= 1ull << (c & 63);
}

static int aset_has(const aset *s, int c) { return (int)((s->w[c >> 6] >> (c & 63)) & 1); }

static void set_from_aset(parser *ps, node *n, const aset *s)
{
    for (int c = 0; c < 128;) {
        if (!aset_has(s, c)) {
            c++;
            continue;
        }
        int d = c;
        while (d + 1 < 128 && aset_has(s, d + 1))
            d++;
        add_range(ps, n, (uint8_t)c, (uint8_t)d);
        c = d + 1;
    }
}

/* \d \w \s and their capitals into s (capitals: the ASCII complement). 0, or -1 if e is not one. */
static int class_escape(char e, aset *s)
{
    aset t = { { 0, 0 } };
    switch (e | 0x20) {
    case 'd': aset_add(&t, '0', '9'); break;
    case 'w': aset_add(&t, '0', '9'); aset_add(&t, 'a', 'z'); aset_add(&t, 'A', 'Z'); aset_add(&t, '_', '_'); break;
    case 's': aset_add(&t, '\t', '\r'); aset_add(&t, ' ', ' '); break;
    default: return -1;
    }
    if (e >= 'A' && e <= 'Z') {
        t.w[0] = ~t.w[0];
        t.w[1] = ~t.w[1];
    }
    s->w[0] |= t.w[0];
    s->w[1] |= t.w[1];
    return 0;
}

/* A one-byte escape (\n, \., \\ ...): the byte, or -1. */
static int plain_escape(parser *ps, char e)
{
    switch (e) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    default:
        if (e && strchr("\\^$.|?*+()[]{}/-\"'#:!=<>,&~@%; _`", e) != NULL)
            return (unsigned char)e;
        fail(ps, "pattern: the escape \\%c is not supported", e ? e : '0');
        return -1;
    }
}

static node *parse_alt(parser *ps);

static node *parse_class(parser *ps)
{
    node *n = mk(ps, T_SET);
    int neg = *ps->p == '^';
    if (neg)
        ps->p++;
    aset s = { { 0, 0 } };
    int first = 1;
    while (!ps->failed && (*ps->p != ']' || first)) {
        first = 0;
        int c = (unsigned char)*ps->p;
        if (c == 0) {
            fail(ps, "pattern: a class without its ']'");
            break;
        }
        ps->p++;
        if (c == '\\') {
            char e = *ps->p++;
            if (class_escape(e, &s) == 0)
                continue;
            c = plain_escape(ps, e);
            if (c < 0)
                break;
        } else if (c >= 0x80) {
            fail(ps, "pattern: non-ASCII characters in a class are not supported");
            break;
        }
        int hi = c;
        if (ps->p[0] == '-' && ps->p[1] != ']' && ps->p[1] != 0) {
            ps->p++;
            hi = (unsigned char)*ps->p++;
            if (hi == '\\') {
                hi = plain_escape(ps, *ps->p++);
                if (hi < 0)
                    break;
            }
            if (hi >= 0x80 || hi < c) {
                fail(ps, "pattern: a class range that is backwards or not ASCII");
                break;
            }
        }
        aset_add(&s, c, hi);
    }
    if (ps->failed)
        return NULL;
    ps->p++; /* ']' */
    if (neg) {
        s.w[0] = ~s.w[0];
        s.w[1] = ~s.w[1];
    }
    set_from_aset(ps, n, &s);
    if (n->n_seqs == 0)
        fail(ps, "pattern: a class that matches nothing");
    return n;
}

static node *parse_atom(parser *ps)
{
    int c = (unsigned char)*ps->p;
    if (c == '(') {
        ps->p++;
        if (++ps->depth > LLM_REGEX_MAX_DEPTH) {
            fail(ps, "pattern: groups more than %d deep", LLM_REGEX_MAX_DEPTH);
            return NULL;
        }
        if (ps->p[0] == '?') {
            if (ps->p[1] != ':') {
                fail(ps, "pattern: lookaround and named groups are not supported");
                return NULL;
            }
            ps->p += 2;
        }
        node *n = parse_alt(ps);
        if (!ps->failed && *ps->p != ')')
            fail(ps, "pattern: a group without its ')'");
        ps->p++;
        ps->depth--;
        return n;
    }
    if (c == '[') {
        ps->p++;
        return parse_class(ps);
    }
    node *n = mk(ps, T_SET);
    if (n == NULL)
        return NULL;
    ps->p++;
    if (c == '.') {
        aset s = { { 0, 0 } };
        aset_add(&s, 0, 127);
        s.w[0] &= ~((1ull << '\n') | (1ull << '\r'));
        set_from_aset(ps, n, &s);
        add_multibyte(ps, n, 1);
        return n;
    }
    if (c == '\\') {
        char e = *ps->p++;
        aset s = { { 0, 0 } };
        if (class_escape(e, &s) == 0) {
            set_from_aset(ps, n, &s);
            return n;
        }
        if (e == 'b' || e == 'B' || (e >= '1' && e <= '9') || e == 'k' || e == 'p' || e == 'P' || e == 'u' || e == 'x' ||
            e == 'c') {
            fail(ps, "pattern: \\%c is not supported", e);
            return NULL;
        }
        c = plain_escape(ps, e);
        if (c < 0)
            return NULL;
        add_range(ps, n, (uint8_t)c, (uint8_t)c);
        return n;
    }
    if (c >= 0x80) { /* a literal UTF-8 character: its bytes as they come */
        int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        uint8_t b[4] = { (uint8_t)c };
        for (int i = 1; i < len; i++) {
            if (((unsigned char)*ps->p & 0xc0) != 0x80) {
                fail(ps, "pattern: not valid UTF-8");
                return NULL;
            }
            b[i] = (uint8_t)*ps->p++;
        }
        add_seq(ps, n, len, b, b);
        return n;
    }
    add_range(ps, n, (uint8_t)c, (uint8_t)c);
    return n;
}

static int read_int(parser *ps, int *out)
{
    if (*ps->p < '0' || *ps->p > '9')
        return -1;
    long v = 0;
    while (*ps->p >= '0' && *ps->p <= '9') {
        v = v * 10 + (*ps->p++ - '0');
        if (v > 1000)
            v = 1001;
    }
    *out = (int)v;
    return 0;
}

static node *parse_repeat(parser *ps)
{
    node *a = parse_atom(ps);
    for (;;) {
        if (ps->failed)
            return NULL;
        char c = *ps->p;
        int lo = 0, hi = 0;
        if (c == '*' || c == '+' || c == '?') {
            ps->p++;
            lo = c == '+' ? 1 : 0;
            hi = c == '?' ? 1 : -1;
        } else if (c == '{' && ps->p[1] >= '0' && ps->p[1] <= '9') {
            ps->p++;
            read_int(ps, &lo);
            hi = lo;
            if (*ps->p == ',') {
                ps->p++;
                hi = -1;
                if (*ps->p != '}')
                    read_int(ps, &hi);
            }
            if (*ps->p != '}') {
                fail(ps, "pattern: a {n,m} without its '}'");
                return NULL;
            }
            ps->p++;
            if (lo > 256 || hi > 256 || (hi >= 0 && hi < lo)) {
                fail(ps, "pattern: {n,m} with n above m or above 256");
                return NULL;
            }
        } else {
            return a;
        }
        if (*ps->p == '?')
            ps->p++; /* lazy: the same language */
        node *r = mk(ps, T_REP);
        if (r == NULL)
            return NULL;
        r->a = a;
        r->min = lo;
        r->max = hi;
        a = r;
    }
}

/* A binary node (T_CAT, T_ALT) over a and b. */
static node *pair(parser *ps, int type, node *a, node *b)
{
    node *c = mk(ps, type);
    if (c != NULL) {
        c->a = a;
        c->b = b;
    }
    return c;
}

static node *parse_cat(parser *ps)
{
    node *n = mk(ps, T_EMPTY);
    while (!ps->failed && *ps->p && *ps->p != '|' && *ps->p != ')') {
        if (*ps->p == '^' || *ps->p == '$') {
            fail(ps, "pattern: '%c' is supported at the start / end of the pattern only", *ps->p);
            return NULL;
        }
        node *b = parse_repeat(ps);
        if ((n = pair(ps, T_CAT, n, b)) == NULL)
            return NULL;
    }
    return n;
}

static node *parse_alt(parser *ps)
{
    node *n = parse_cat(ps);
    while (!ps->failed && *ps->p == '|') {
        ps->p++;
        node *b = parse_cat(ps);
        if ((n = pair(ps, T_ALT, n, b)) == NULL)
            return NULL;
    }
    return n;
}

/* ---- NFA ---- */

enum { S_EPS, S_BYTE, S_MATCH };

typedef struct {
    uint8_t type, lo, hi;
    int     out, out2; /* S_EPS: out2 too (-1 none) */
} nstate;

typedef struct {
    nstate *s;
    int     n, cap;
    parser *ps;
} nfa;

static int ns(nfa *a, int type, int lo, int hi, int out, int out2)
{
    if (a->ps->failed)
        return 0;
    if (a->n >= LLM_REGEX_MAX_NFA) {
        fail(a->ps, "pattern: more than %d automaton states (shorten its repetitions)", LLM_REGEX_MAX_NFA);
        return 0;
    }
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 256;
        nstate *q = realloc(a->s, (size_t)cap * sizeof(nstate));
        if (q == NULL) {
            fail(a->ps, "pattern: out of memory");
            return 0;
        }
        a->s = q;
        a->cap = cap;
    }
    a->s[a->n] = (nstate){ (uint8_t)type, (uint8_t)lo, (uint8_t)hi, out, out2 };
    return a->n++;
}

/* Builds n so that it ends in state `next`; returns its start state. */
static int build(nfa *a, const node *n, int next)
{
    if (a->ps->failed || n == NULL)
        return next;
    switch (n->type) {
    case T_EMPTY:
        return next;
    case T_CAT:
        return build(a, n->a, build(a, n->b, next));
    case T_ALT: {
        int x = build(a, n->a, next), y = build(a, n->b, next);
        return ns(a, S_EPS, 0, 0, x, y);
    }
    case T_SET: {
        int start = -1;
        for (int i = 0; i < n->n_seqs; i++) {
            const seq_t *q = &n->seqs[i];
            int s = next;
            for (int k = q->n - 1; k >= 0; k--)
                s = ns(a, S_BYTE, q->lo[k], q->hi[k], s, -1);
            start = start < 0 ? s : ns(a, S_EPS, 0, 0, s, start);
        }
        return start;
    }
    default: { /* T_REP: min copies, then (max - min) optional ones or a loop */
        int s = next;
        if (n->max < 0) {
            int loop = ns(a, S_EPS, 0, 0, -1, next); /* patched: out = the body's start */
            int body = build(a, n->a, loop);
            if (!a->ps->failed)
                a->s[loop].out = body;
            s = loop;
        } else {
            for (int i = n->min; i < n->max; i++)
                s = ns(a, S_EPS, 0, 0, build(a, n->a, s), next);
        }
        for (int i = 0; i < n->min; i++)
            s = build(a, n->a, s);
        return s;
    }
    }
}

/* ---- DFA ---- */

struct llm_regex {
    int      n_states, n_classes, start;
    uint8_t  cls[256];
    int16_t *next;     /* [state * n_classes + class], -1 dead */
    uint8_t *accept;
};

#define DSET_BUCKETS 4096

typedef struct {
    int       words;
    uint64_t *sets;    /* [dfa state][words] */
    int       n, cap;
    int       head[DSET_BUCKETS]; /* hash chains: first state, then link[state]; -1 ends */
    int      *link;
} dset;

static unsigned set_hash(const uint64_t *set, int words)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < words; i++)
        h = (h ^ set[i]) * 1099511628211ull;
    return (unsigned)(h ^ (h >> 32)) % DSET_BUCKETS;
}

static void closure(const nfa *a, uint64_t *set, int *stack)
{
    int sp = 0;
    for (int i = 0; i < a->n; i++)
        if ((set[i >> 6] >> (i & 63)) & 1)
            stack[sp++] = i;
    while (sp > 0) {
        int i = stack[--sp];
        if (a->s[i].type != S_EPS)
            continue;
        int outs[2] = { a->s[i].out, a->s[i].out2 };
        for (int k = 0; k < 2; k++) {
            int o = outs[k];
            if (o >= 0 && !((set[o >> 6] >> (o & 63)) & 1)) {
                set[o >> 6] |= 1ull << (o & 63);
                stack[sp++] = o;
            }
        }
    }
}

static int find_or_add(dset *d, const uint64_t *set, int *added)
{
    unsigned h = set_hash(set, d->words);
    for (int i = d->head[h]; i >= 0; i = d->link[i])
        if (memcmp(d->sets + (size_t)i * (size_t)d->words, set, (size_t)d->words * 8) == 0)
            return i;
    if (d->n >= LLM_REGEX_MAX_DFA)
        return -2;
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 64;
        uint64_t *q = realloc(d->sets, (size_t)cap * (size_t)d->words * 8);
        int *l = q ? realloc(d->link, (size_t)cap * sizeof(int)) : NULL;
        if (q != NULL)
            d->sets = q;
        if (l == NULL)
            return -3;
        d->link = l;
        d->cap = cap;
    }
    memcpy(d->sets + (size_t)d->n * (size_t)d->words, set, (size_t)d->words * 8);
    d->link[d->n] = d->head[h];
    d->head[h] = d->n;
    *added = 1;
    return d->n++;
}

static llm_regex *determinise(nfa *a, int start, parser *ps)
{
    llm_regex *re = calloc(1, sizeof(llm_regex));
    int words = (a->n + 63) / 64;
    dset d = { words, NULL, 0, 0, { 0 }, NULL };
    memset(d.head, 0xff, sizeof d.head);
    uint64_t *set = calloc((size_t)words, 8);
    int *stack = malloc((size_t)a->n * sizeof(int) * 2 + 16);
    int16_t *next = NULL;
    if (re == NULL || set == NULL || stack == NULL) {
        fail(ps, "pattern: out of memory");
        goto out;
    }
    /* byte classes: bytes no transition tells apart share one */
    uint8_t cut[257] = { 0 };
    for (int b = 0; b <= 0x20; b++) /* each control byte a class of its own (see below) */
        cut[b] = 1;
    for (int i = 0; i < a->n; i++)
        if (a->s[i].type == S_BYTE) {
            cut[a->s[i].lo] = 1;
            cut[a->s[i].hi + 1] = 1;
        }
    int nc = -1;
    for (int b = 0; b < 256; b++) {
        nc += cut[b];
        re->cls[b] = (uint8_t)nc;
    }
    re->n_classes = nc + 1;
    uint8_t rep[256];
    for (int b = 255; b >= 0; b--)
        rep[re->cls[b]] = (uint8_t)b;

    set[start >> 6] |= 1ull << (start & 63);
    closure(a, set, stack);
    int added = 0;
    find_or_add(&d, set, &added);
    size_t cap_next = 0;
    for (int i = 0; i < d.n && !ps->failed; i++) {
        if ((size_t)(i + 1) * (size_t)re->n_classes > cap_next) {
            cap_next = cap_next ? cap_next * 2 : (size_t)64 * (size_t)re->n_classes;
            int16_t *q = realloc(next, cap_next * sizeof(int16_t));
            if (q == NULL) {
                fail(ps, "pattern: out of memory");
                break;
            }
            next = q;
        }
        for (int c = 0; c < re->n_classes; c++) {
            const uint64_t *from = d.sets + (size_t)i * (size_t)words;
            /* control bytes a JSON string can only hold as \u escapes (all but \b \t \n \f \r) are
             * never taken: a state they alone continue must not look alive */
            int usable = rep[c] >= 0x20 || rep[c] == '\b' || rep[c] == '\t' || rep[c] == '\n' || rep[c] == '\f' ||
                         rep[c] == '\r';
            memset(set, 0, (size_t)words * 8);
            int any = 0;
            for (int s = 0; s < a->n; s++)
                if (usable && ((from[s >> 6] >> (s & 63)) & 1) && a->s[s].type == S_BYTE && rep[c] >= a->s[s].lo &&
                    rep[c] <= a->s[s].hi) {
                    int o = a->s[s].out;
                    set[o >> 6] |= 1ull << (o & 63);
                    any = 1;
                }
            int to = -1;
            if (any) {
                closure(a, set, stack);
                to = find_or_add(&d, set, &added);
                if (to == -2) {
                    fail(ps, "pattern: more than %d automaton states", LLM_REGEX_MAX_DFA);
                    break;
                }
                if (to == -3) {
                    fail(ps, "pattern: out of memory");
                    break;
                }
            }
            next[(size_t)i * (size_t)re->n_classes + (size_t)c] = (int16_t)to;
        }
    }
    if (ps->failed)
        goto out;
    re->n_states = d.n;
    re->next = next;
    next = NULL;
    re->accept = calloc((size_t)d.n, 1);
    uint8_t *alive = calloc((size_t)d.n, 1);
    if (re->accept == NULL || alive == NULL) {
        free(alive);
        fail(ps, "pattern: out of memory");
        goto out;
    }
    int match = -1;
    for (int s = 0; s < a->n; s++)
        if (a->s[s].type == S_MATCH)
            match = s;
    for (int i = 0; i < d.n; i++)
        alive[i] = re->accept[i] = (uint8_t)((d.sets[(size_t)i * (size_t)words + (size_t)(match >> 6)] >> (match & 63)) & 1);
    /* states that can still reach a match; transitions elsewhere are dead ends */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < d.n; i++)
            for (int c = 0; c < re->n_classes && !alive[i]; c++) {
                int to = re->next[(size_t)i * (size_t)re->n_classes + (size_t)c];
                if (to >= 0 && alive[to])
                    alive[i] = 1, changed = 1;
            }
    }
    for (size_t k = 0; k < (size_t)d.n * (size_t)re->n_classes; k++)
        if (re->next[k] >= 0 && !alive[re->next[k]])
            re->next[k] = -1;
    re->start = 0;
    if (!alive[0])
        fail(ps, "pattern: it matches nothing");
    free(alive);
out:
    free(set);
    free(stack);
    free(next);
    free(d.sets);
    free(d.link);
    if (ps->failed) {
        llm_regex_free(re);
        return NULL;
    }
    return re;
}

void llm_regex_free(llm_regex *re)
{
    if (re == NULL)
        return;
    free(re->next);
    free(re->accept);
    free(re);
}

llm_regex *llm_regex_compile(const char *src, char *err, size_t cap)
{
    char dummy[8];
    parser ps = { NULL, err ? err : dummy, err ? cap : sizeof dummy, 0, NULL, 0, 0, 0 };
    size_t len = strlen(src);
    if (len > LLM_REGEX_MAX_LEN) {
        fail(&ps, "pattern: more than %d bytes", LLM_REGEX_MAX_LEN);
        return NULL;
    }
    int anchored_start = len > 0 && src[0] == '^';
    int anchored_end = len > 0 && src[len - 1] == '$' && (len < 2 || src[len - 2] != '\\');
    char *body = malloc(len + 1);
    llm_regex *re = NULL;
    if (body == NULL) {
        fail(&ps, "pattern: out of memory");
        return NULL;
    }
    size_t from = (size_t)anchored_start, to = len - (size_t)(anchored_end && len > (size_t)anchored_start);
    memcpy(body, src + from, to - from);
    body[to - from] = '\0';
    ps.p = body;
    node *n = parse_alt(&ps);
    if (!ps.failed && *ps.p != '\0')
        fail(&ps, "pattern: an unmatched ')'");
    /* unanchored ends: any characters (line terminators included) before / after */
    node *anyc = NULL;
    if (!ps.failed && (!anchored_start || !anchored_end)) {
        node *set = mk(&ps, T_SET);
        if (set != NULL) {
            add_range(&ps, set, 0, 127);
            add_multibyte(&ps, set, 0);
        }
        anyc = mk(&ps, T_REP);
        if (anyc != NULL) {
            anyc->a = set;
            anyc->min = 0;
            anyc->max = -1;
        }
    }
    nfa a = { NULL, 0, 0, &ps };
    int match = ns(&a, S_MATCH, 0, 0, -1, -1);
    int start = match;
    if (!ps.failed) {
        if (!anchored_end)
            start = build(&a, anyc, start);
        start = build(&a, n, start);
        if (!anchored_start)
            start = build(&a, anyc, start);
    }
    if (!ps.failed)
        re = determinise(&a, start, &ps);
    free(a.s);
    for (int i = 0; i < ps.n_all; i++) {
        free(ps.all[i]->seqs);
        free(ps.all[i]);
    }
    free(ps.all);
    free(body);
    return re;
}

int llm_regex_start(const llm_regex *re) { return re->start; }

int llm_regex_states(const llm_regex *re) { return re->n_states; }

int llm_regex_step(const llm_regex *re, int state, uint8_t b)
{
    return state < 0 ? -1 : re->next[(size_t)state * (size_t)re->n_classes + re->cls[b]];
}

int llm_regex_accepts(const llm_regex *re, int state) { return state >= 0 && re->accept[state]; }

int llm_regex_match(const llm_regex *re, const char *s, size_t n)
{
    int st = re->start;
    for (size_t i = 0; i < n && st >= 0; i++)
        st = llm_regex_step(re, st, (uint8_t)s[i]);
    return llm_regex_accepts(re, st);
}
