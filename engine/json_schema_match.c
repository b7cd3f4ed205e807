/* Reading output against a compiled JSON Schema (json_schema.h), and the vocabulary mask built on it.
 *
 * A reading ("thread") is a stack of frames, one a value being read: the root, then the object, array or
 * scalar inside it, and so on. A byte goes to the top frame, which takes it, refuses it, or says its value
 * ended (with that byte, or before it: a number or an enum value that another byte could have grown; the
 * byte then goes to the frame below), or asks for a child value to be opened for it. Opening an anyOf
 * forks the thread, one a alternative; a thread that refuses a byte is dropped; the output is valid while
 * one thread lives. Free-form values (SK_ANY) and numbers are read by JSON mode's recogniser inside their
 * frame. */
#include "json_schema_priv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NO_NODE 0xffffu

typedef struct {
    uint16_t node;  /* NO_NODE: the root frame */
    uint8_t  ph;    /* phase (P_*) */
    uint8_t  sub;   /* string: \u digits read */
    union {
        struct {
            uint32_t a;  /* object: the first property that may still come; array: items; string: code
                          * points; enum: the first candidate */
            uint32_t b;  /* object: bytes of the key matched, then the key's property; enum: the last */
            uint64_t m;  /* object: properties whose key still matches; enum: bytes matched */
        } g;
        llm_json_state js; /* SK_ANY, SK_NUMBER, SK_INTEGER */
    } u;
} sframe;

typedef struct {
    uint8_t depth, ws;  /* frames; whitespace bytes in a row between tokens of structure */
    uint8_t dead;
    sframe  f[LLM_SCHEMA_MAX_DEPTH];
} sthread;

typedef struct {
    int     n;
    sthread t[LLM_SCHEMA_MAX_ALT];
} sset;

struct llm_schema_state {
    const llm_schema *sc;
    int   rst;  /* a regex over the whole output (sc->raw): its DFA state; the rest is unused */
    llm_grammar_state *gst; /* a grammar (sc->gram): the output against it; the rest is unused */
    sset  cur;
    sset *scratch, *scratch_ws; /* working copies for feed and the mask */
};

enum {
    P_OPEN,        /* nothing read: the value's first byte comes */
    P_FIRST,       /* object / array: after '{' or '[' */
    P_KEY,         /* object: inside a key */
    P_COLON,       /* object: after a key */
    P_VALUE,       /* object: after ':' */
    P_AFTER,       /* object / array: after a value */
    P_NEXT,        /* object / array: after ',' */
    P_IN, P_ESC, P_HEX, /* string */
    P_BODY,        /* number, any value, enum: inside */
    P_DONE,        /* root: the value is complete */
    P_SIGN, P_INT, P_DOT, P_FRAC, /* a number with bounds: after '-', in the integer part, after '.', after */
};

enum { R_TAKE, R_FAIL, R_END, R_PASS, R_PUSH };

static int is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int ws_take(sthread *t)
{
    if (t->ws >= LLM_JSON_MAX_WS)
        return R_FAIL;
    t->ws++;
    return R_TAKE;
}

/* Properties of an object from index `from` on (relative) that a key may name now: each one up to and
 * including the first required one. */
static uint64_t key_candidates(const llm_schema *sc, const llm_schema_node *nd, uint32_t from)
{
    uint64_t m = 0;
    for (uint32_t i = from; i < nd->n; i++) {
        m |= 1ull << i;
        if (sc->props[nd->first + i].required)
            break;
    }
    return m;
}

static int required_left(const llm_schema *sc, const llm_schema_node *nd, uint32_t from)
{
    if (nd->kind != SK_OBJECT)
        return 0;
    for (uint32_t i = from; i < nd->n; i++)
        if (sc->props[nd->first + i].required)
            return 1;
    return 0;
}

/* An object's or array's first byte. */
static int open_bracket(sframe *f, uint8_t c, uint8_t want)
{
    if (c != want)
        return R_FAIL;
    f->ph = P_FIRST;
    f->u.g.a = 0;
    return R_TAKE;
}

static int step_object(const llm_schema *sc, sthread *t, sframe *f, const llm_schema_node *nd, uint8_t c,
                       uint32_t *child)
{
    switch (f->ph) {
    case P_OPEN:
        return open_bracket(f, c, '{');
    case P_FIRST:
    case P_NEXT:
        if (is_ws(c))
            return ws_take(t);
        if (c == '}' && f->ph == P_FIRST && !required_left(sc, nd, f->u.g.a))
            return R_END;
        if (c != '"')
            return R_FAIL;
        if (nd->kind == SK_MAP) {
            f->ph = P_COLON;
            *child = sc->any_string;
            return R_PUSH;
        }
        f->u.g.m = key_candidates(sc, nd, f->u.g.a);
        if (f->u.g.m == 0)
            return R_FAIL;
        f->ph = P_KEY;
        f->u.g.b = 1; /* the opening quote */
        return R_TAKE;
    case P_KEY: {
        uint64_t m = f->u.g.m, nm = 0;
        uint32_t pos = f->u.g.b, done = UINT32_MAX;
        for (uint32_t i = 0; m != 0; i++, m >>= 1) {
            const llm_schema_prop *p = &sc->props[nd->first + i];
            if ((m & 1) && pos < p->len && (uint8_t)sc->bytes[p->off + pos] == c) {
                nm |= 1ull << i;
                if (pos + 1 == p->len)
                    done = i;
            }
        }
        if (nm == 0)
            return R_FAIL;
        if (done != UINT32_MAX) { /* the closing quote: only this key can end here */
            f->ph = P_COLON;
            f->u.g.a = done + 1;
            f->u.g.b = done;
            return R_TAKE;
        }
        f->u.g.m = nm;
        f->u.g.b = pos + 1;
        return R_TAKE;
    }
    case P_COLON:
        if (is_ws(c))
            return ws_take(t);
        if (c != ':')
            return R_FAIL;
        f->ph = P_VALUE;
        return R_TAKE;
    case P_VALUE:
        if (is_ws(c))
            return ws_take(t);
        f->ph = P_AFTER;
        *child = nd->kind == SK_MAP ? nd->item : sc->props[nd->first + f->u.g.b].node;
        return R_PUSH;
    case P_AFTER:
        if (is_ws(c))
            return ws_take(t);
        if (c == ',' && (nd->kind == SK_MAP || f->u.g.a < nd->n)) {
            f->ph = P_NEXT;
            return R_TAKE;
        }
        if (c == '}' && !required_left(sc, nd, f->u.g.a))
            return R_END;
        return R_FAIL;
    default:
        return R_FAIL;
    }
}

static int step_array(const llm_schema *sc, sthread *t, sframe *f, const llm_schema_node *nd, uint8_t c,
                      uint32_t *child)
{
    switch (f->ph) {
    case P_OPEN:
        return open_bracket(f, c, '[');
    case P_FIRST:
    case P_NEXT:
        if (is_ws(c))
            return ws_take(t);
        if (c == ']' && f->ph == P_FIRST && nd->min == 0)
            return R_END;
        if (nd->max >= 0 && f->u.g.a >= nd->max)
            return R_FAIL;
        *child = f->u.g.a < nd->n ? sc->alts[nd->first + f->u.g.a] : nd->item; /* a tuple's place, or items */
        f->u.g.a++;
        f->ph = P_AFTER;
        return R_PUSH;
    case P_AFTER:
        if (is_ws(c))
            return ws_take(t);
        if (c == ',' && (nd->max < 0 || f->u.g.a < nd->max)) {
            f->ph = P_NEXT;
            return R_TAKE;
        }
        if (c == ']' && f->u.g.a >= nd->min)
            return R_END;
        return R_FAIL;
    default:
        return R_FAIL;
    }
}

static int is_hex(uint8_t c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* JSON's one-character escapes and the bytes they stand for */
static const char esc_chr[] = "\"\\/bfnrt", esc_val[] = "\"\\/\b\f\n\r\t";

/* A string held to a regex: the value's bytes (escapes decoded; \u escapes refused: characters come as
 * they are) go through the DFA (state in b), the closing quote only in an accepting state. */
static int step_pattern(const llm_schema *sc, sframe *f, const llm_schema_node *nd, uint8_t c)
{
    const llm_regex *re = sc->regexes[nd->pattern];
    int st = (int)f->u.g.b;
    switch (f->ph) {
    case P_OPEN:
        if (c != '"')
            return R_FAIL;
        f->ph = P_IN;
        f->u.g.b = (uint32_t)llm_regex_start(re);
        return R_TAKE;
    case P_IN:
        if (c == '"')
            return llm_regex_accepts(re, st) ? R_END : R_FAIL;
        if (c == '\\') { /* only when an escaped character can go on */
            for (const char *v = esc_val; *v; v++)
                if (llm_regex_step(re, st, (uint8_t)*v) >= 0) {
                    f->ph = P_ESC;
                    return R_TAKE;
                }
            return R_FAIL;
        }
        if (c < 0x20)
            return R_FAIL;
        break;
    default: { /* P_ESC */
        const char *e = c != 0 ? strchr(esc_chr, c) : NULL;
        if (e == NULL)
            return R_FAIL;
        c = (uint8_t)esc_val[e - esc_chr];
        f->ph = P_IN;
        break;
    }
    }
    st = llm_regex_step(re, st, c);
    if (st < 0)
        return R_FAIL;
    f->u.g.b = (uint32_t)st;
    return R_TAKE;
}

static int step_string(const llm_schema *sc, sframe *f, const llm_schema_node *nd, uint8_t c)
{
    if (nd->pattern >= 0)
        return step_pattern(sc, f, nd, c);
    switch (f->ph) {
    case P_OPEN:
        if (c != '"')
            return R_FAIL;
        f->ph = P_IN;
        f->u.g.a = 0;
        f->u.g.b = 0; /* the UTF-8 character being read (llm_utf8_step) */
        return R_TAKE;
    case P_IN:
        if (f->u.g.b != 0) { /* a character's continuation bytes */
            uint8_t u = (uint8_t)f->u.g.b;
            if (llm_utf8_step(&u, c) != 0)
                return R_FAIL;
            f->u.g.b = u;
            return R_TAKE;
        }
        if (c == '"')
            return f->u.g.a >= nd->min ? R_END : R_FAIL;
        if (c < 0x20)
            return R_FAIL;
        {
            uint8_t u = 0;
            if (llm_utf8_step(&u, c) != 0) /* a continuation byte with no lead, a lead no character has */
                return R_FAIL;
            if (nd->max >= 0 && f->u.g.a >= nd->max) /* a code point (or an escape) starts */
                return R_FAIL;
            f->u.g.a++;
            f->u.g.b = u;
        }
        if (c == '\\')
            f->ph = P_ESC;
        return R_TAKE;
    case P_ESC:
        if (c == 'u') {
            f->ph = P_HEX;
            f->sub = 0;
            return R_TAKE;
        }
        if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' && c != 't')
            return R_FAIL;
        f->ph = P_IN;
        return R_TAKE;
    default: /* P_HEX */
        if (!is_hex(c))
            return R_FAIL;
        if (++f->sub == 4)
            f->ph = P_IN;
        return R_TAKE;
    }
}

/* ---- numbers with bounds ----
 * Read as -?(0|[1-9]d*)(.d+)? (no exponent), at most 16 digits before the point and 18 in all, the digits
 * so far in g.m and (sign, digit counts) in g.a. After every byte the values the text can still become
 * must meet the bounds, so a prefix is only taken when some value in range completes it; the value ends
 * (a byte that is not part of it) only inside the bounds. */
#define N_NEG  (1u << 16)
#define N_ZERO (1u << 17)
#define N_INTD(a)  ((a) & 255u)
#define N_FRACD(a) (((a) >> 8) & 255u)

static long double pow10l_(int n)
{
    long double p = 1;
    while (n-- > 0)
        p *= 10;
    return p;
}

/* Some x of [x0, x1] (ends open as said) meets nd's bounds. integer: integers only (ends closed). */
static int meets(const llm_schema_node *nd, long double x0, long double x1, int open0, int open1, int integer)
{
    long double lo = nd->lo, hi = nd->hi;
    if (integer) {
        long double ilo = (nd->bounds & B_LO_EX) ? floorl(lo) + 1 : ceill(lo);
        long double ihi = (nd->bounds & B_HI_EX) ? ceill(hi) - 1 : floorl(hi);
        return (!(nd->bounds & B_HI) || x0 <= ihi) && (!(nd->bounds & B_LO) || x1 >= ilo);
    }
    int up = !(nd->bounds & B_HI) || ((open0 || (nd->bounds & B_HI_EX)) ? x0 < hi : x0 <= hi);
    int down = !(nd->bounds & B_LO) || ((open1 || (nd->bounds & B_LO_EX)) ? x1 > lo : x1 >= lo);
    return up && down;
}

/* The same for a magnitude interval [m0, m1) (closed when exact) of a signed number. */
static int meets_signed(const llm_schema_node *nd, int neg, long double m0, long double m1, int exact, int integer)
{
    if (integer)
        return neg ? meets(nd, -m1, -m0, 0, 0, 1) : meets(nd, m0, m1, 0, 0, 1);
    return neg ? meets(nd, -m1, -m0, !exact, 0, 0) : meets(nd, m0, m1, 0, !exact, 0);
}

/* Whether the text read so far can still end as a value within the bounds. */
static int bounded_feasible(const llm_schema_node *nd, const sframe *f)
{
    int integer = nd->kind == SK_INTEGER, neg = (f->u.g.a & N_NEG) != 0;
    unsigned k = N_INTD(f->u.g.a), fd = N_FRACD(f->u.g.a);
    long double m = (long double)f->u.g.m;
    switch (f->ph) {
    case P_SIGN: /* -0 up to -(10^16 - 1) */
        return meets_signed(nd, 1, 0, integer ? 1e16L - 1 : 1e16L, integer, integer);
    case P_INT:
        if (f->u.g.a & N_ZERO) /* 0, or 0.x */
            return meets_signed(nd, neg, 0, integer ? 0 : 1, integer, integer);
        for (unsigned j = 0; k + j <= 16; j++) { /* j more digits, then maybe a fraction */
            long double p = pow10l_((int)j);
            if (meets_signed(nd, neg, m * p, integer ? (m + 1) * p - 1 : (m + 1) * p, integer, integer))
                return 1;
        }
        return 0;
    default: { /* P_DOT, P_FRAC: the integer part is fixed */
        long double scale = pow10l_((int)fd), v = m / scale;
        int more = k + fd < 18 && fd < 16;
        return meets_signed(nd, neg, v, more ? v + 1 / scale : v, !more, 0);
    }
    }
}

static int bounded_value_ok(const llm_schema_node *nd, const sframe *f)
{
    long double v = (long double)f->u.g.m / pow10l_((int)N_FRACD(f->u.g.a));
    if (f->u.g.a & N_NEG)
        v = -v;
    return meets(nd, v, v, 0, 0, 0);
}

static int step_bounded(const llm_schema_node *nd, sframe *f, uint8_t c)
{
    int digit = c >= '0' && c <= '9';
    unsigned a = f->u.g.a;
    switch (f->ph) {
    case P_OPEN:
        if (c == '-') {
            f->ph = P_SIGN;
            f->u.g.a = N_NEG;
            f->u.g.m = 0;
            return bounded_feasible(nd, f) ? R_TAKE : R_FAIL;
        }
        a = 0;
        /* fall through */
    case P_SIGN:
        if (!digit)
            return R_FAIL;
        f->ph = P_INT;
        f->u.g.m = (uint64_t)(c - '0');
        f->u.g.a = (a & N_NEG) | (c == '0' ? N_ZERO : 0) | 1u;
        break;
    case P_INT:
        if (digit) {
            if ((a & N_ZERO) || N_INTD(a) >= 16)
                return R_FAIL;
            f->u.g.m = f->u.g.m * 10 + (uint64_t)(c - '0');
            f->u.g.a = a + 1;
            break;
        }
        if (c == '.' && nd->kind == SK_NUMBER) {
            f->ph = P_DOT;
            break;
        }
        return bounded_value_ok(nd, f) ? R_PASS : R_FAIL;
    case P_DOT:
    case P_FRAC:
        if (digit) {
            if (N_FRACD(a) >= 16 || N_INTD(a) + N_FRACD(a) >= 18)
                return R_FAIL;
            f->ph = P_FRAC;
            f->u.g.m = f->u.g.m * 10 + (uint64_t)(c - '0');
            f->u.g.a = a + (1u << 8);
            break;
        }
        if (f->ph == P_DOT)
            return R_FAIL;
        return bounded_value_ok(nd, f) ? R_PASS : R_FAIL;
    default:
        return R_FAIL;
    }
    return bounded_feasible(nd, f) ? R_TAKE : R_FAIL;
}

/* A number or a free-form value, by JSON mode's recogniser. */
static int step_json(sframe *f, const llm_schema_node *nd, uint8_t c)
{
    if (nd->kind != SK_ANY) {
        if (f->ph == P_OPEN && c != '-' && !(c >= '0' && c <= '9'))
            return R_FAIL;
        if (nd->kind == SK_INTEGER && (c == '.' || c == 'e' || c == 'E'))
            return R_FAIL;
    }
    f->ph = P_BODY;
    llm_json_state t = f->u.js;
    if (llm_json_step(&t, c) == 0) {
        if (llm_json_done(&t))
            return R_END;
        f->u.js = t;
        return R_TAKE;
    }
    return llm_json_can_end(&f->u.js) ? R_PASS : R_FAIL;
}

/* An enum: the candidates consts[a..b] share the a..b prefix of m bytes read so far. */
static int step_const(const llm_schema *sc, sframe *f, uint8_t c)
{
    uint32_t lo = f->u.g.a, hi = f->u.g.b, pos = (uint32_t)f->u.g.m, nlo = UINT32_MAX, nhi = 0;
    for (uint32_t i = lo; i <= hi; i++) {
        const llm_schema_text *x = &sc->consts[i];
        if (pos < x->len && (uint8_t)sc->bytes[x->off + pos] == c) {
            if (nlo == UINT32_MAX)
                nlo = i;
            nhi = i;
        }
    }
    if (nlo == UINT32_MAX) /* a candidate read whole sorts first in the range */
        return sc->consts[lo].len == pos && f->ph == P_BODY ? R_PASS : R_FAIL;
    f->ph = P_BODY;
    f->u.g.a = nlo;
    f->u.g.b = nhi;
    f->u.g.m = pos + 1;
    return nlo == nhi && sc->consts[nlo].len == pos + 1 ? R_END : R_TAKE;
}

static int frame_step(const llm_schema *sc, sthread *t, sframe *f, uint8_t c, uint32_t *child)
{
    if (f->node == NO_NODE) { /* the root: one value, starting at once (whitespace only after it) */
        if (f->ph != P_OPEN)
            return is_ws(c) ? ws_take(t) : R_FAIL;
        f->ph = P_DONE;
        *child = sc->root;
        return R_PUSH;
    }
    const llm_schema_node *nd = &sc->nodes[f->node];
    switch (nd->kind) {
    case SK_OBJECT:
    case SK_MAP:
        return step_object(sc, t, f, nd, c, child);
    case SK_ARRAY:
        return step_array(sc, t, f, nd, c, child);
    case SK_STRING:
        return step_string(sc, f, nd, c);
    case SK_CONST:
        return step_const(sc, f, c);
    default: /* SK_ANY, SK_NUMBER, SK_INTEGER */
        return nd->bounds ? step_bounded(nd, f, c) : step_json(f, nd, c);
    }
}

static void push_frame(const llm_schema *sc, sthread *t, uint32_t node)
{
    const llm_schema_node *nd = &sc->nodes[node];
    sframe *f = &t->f[t->depth++];
    memset(f, 0, sizeof(*f));
    f->node = (uint16_t)node;
    f->ph = P_OPEN;
    if (nd->kind == SK_CONST) {
        f->u.g.a = nd->first;
        f->u.g.b = nd->first + nd->n - 1;
    } else if ((nd->kind == SK_ANY || nd->kind == SK_NUMBER || nd->kind == SK_INTEGER) && !nd->bounds) {
        llm_json_init(&f->u.js, nd->top_object);
    }
}

static int advance(const llm_schema *sc, sset *s, sthread *t, uint8_t c);

/* Open node for byte c on thread t: forks for an anyOf (into free places of s). 1 if t lives. */
static int open_value(const llm_schema *sc, sset *s, sthread *t, uint32_t node, uint8_t c)
{
    while (sc->nodes[node].kind == SK_REF) /* the compiler refused $ref cycles */
        node = sc->nodes[node].item;
    const llm_schema_node *nd = &sc->nodes[node];
    if (nd->kind == SK_ANYOF) {
        /* alternatives after the first go to copies of t (as many as there is room for) */
        for (uint32_t k = 1; k < nd->n && s->n < LLM_SCHEMA_MAX_ALT; k++) {
            sthread *u = &s->t[s->n++];
            memcpy(u, t, offsetof(sthread, f) + (size_t)t->depth * sizeof(sframe));
            if (!open_value(sc, s, u, sc->alts[nd->first + k], c))
                u->dead = 1;
        }
        return open_value(sc, s, t, sc->alts[nd->first], c);
    }
    if (t->depth >= LLM_SCHEMA_MAX_DEPTH)
        return 0;
    push_frame(sc, t, node);
    return advance(sc, s, t, c);
}

/* Byte c to thread t: 1 if it takes it. */
static int advance(const llm_schema *sc, sset *s, sthread *t, uint8_t c)
{
    if (!is_ws(c))
        t->ws = 0;
    for (;;) {
        uint32_t child = 0;
        int r = frame_step(sc, t, &t->f[t->depth - 1], c, &child);
        switch (r) {
        case R_TAKE:
            return 1;
        case R_END:
            t->depth--;
            return 1;
        case R_PASS:
            t->depth--;
            continue;
        case R_PUSH:
            return open_value(sc, s, t, child, c);
        default:
            return 0;
        }
    }
}

/* Byte c to every thread of s; 0 if one lives (the dead are dropped), -1 if none. */
static int feed_byte(const llm_schema *sc, sset *s, uint8_t c)
{
    int n0 = s->n;
    for (int i = 0; i < n0; i++)
        if (!advance(sc, s, &s->t[i], c))
            s->t[i].dead = 1;
    int w = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->t[i].dead)
            continue;
        if (w != i)
            memcpy(&s->t[w], &s->t[i], offsetof(sthread, f) + (size_t)s->t[i].depth * sizeof(sframe));
        w++;
    }
    s->n = w;
    return w > 0 ? 0 : -1;
}

static void set_copy(sset *dst, const sset *src)
{
    dst->n = src->n;
    for (int i = 0; i < src->n; i++)
        memcpy(&dst->t[i], &src->t[i], offsetof(sthread, f) + (size_t)src->t[i].depth * sizeof(sframe));
}

static int feed_set(const llm_schema *sc, sset *s, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (feed_byte(sc, s, (uint8_t)p[i]) != 0)
            return -1;
    return 0;
}

llm_schema_state *llm_schema_state_new(const llm_schema *sc)
{
    llm_schema_state *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->scratch = malloc(sizeof(sset))) == NULL || (s->scratch_ws = malloc(sizeof(sset))) == NULL) {
        llm_schema_state_free(s);
        return NULL;
    }
    s->sc = sc;
    if (sc->gram != NULL && (s->gst = llm_grammar_state_new(sc->gram)) == NULL) {
        llm_schema_state_free(s);
        return NULL;
    }
    s->rst = sc->raw ? llm_regex_start(sc->regexes[0]) : 0;
    s->cur.n = 1;
    s->cur.t[0].depth = 1;
    s->cur.t[0].f[0].node = NO_NODE;
    s->cur.t[0].f[0].ph = P_OPEN;
    return s;
}

void llm_schema_state_free(llm_schema_state *s)
{
    if (s == NULL)
        return;
    free(s->scratch);
    free(s->scratch_ws);
    llm_grammar_state_free(s->gst);
    free(s);
}

/* A regex's state after n bytes from st, or -1. */
static int raw_feed(const llm_regex *re, int st, const char *p, size_t n)
{
    for (size_t i = 0; i < n && st >= 0; i++)
        st = llm_regex_step(re, st, (uint8_t)p[i]);
    return st;
}

int llm_schema_feed(llm_schema_state *s, const char *p, size_t n)
{
    if (s->gst != NULL)
        return llm_grammar_feed(s->gst, p, n);
    if (s->sc->raw) {
        int st = raw_feed(s->sc->regexes[0], s->rst, p, n);
        if (st < 0)
            return -1;
        s->rst = st;
        return 0;
    }
    set_copy(s->scratch, &s->cur);
    if (feed_set(s->sc, s->scratch, p, n) != 0)
        return -1;
    set_copy(&s->cur, s->scratch);
    return 0;
}

int llm_schema_can_end(const llm_schema_state *s)
{
    if (s->gst != NULL)
        return llm_grammar_accepts(s->gst);
    return s->sc->raw && llm_regex_accepts(s->sc->regexes[0], s->rst);
}

int llm_schema_done(const llm_schema_state *s)
{
    if (s->gst != NULL) /* a whole text that nothing can follow */
        return llm_grammar_accepts(s->gst) && !llm_grammar_can_go_on(s->gst);
    if (s->sc->raw) { /* a whole match that nothing can follow */
        if (!llm_schema_can_end(s))
            return 0;
        for (int c = 0; c < 256; c++)
            if (llm_regex_step(s->sc->regexes[0], s->rst, (uint8_t)c) >= 0)
                return 0;
        return 1;
    }
    for (int i = 0; i < s->cur.n; i++)
        if (s->cur.t[i].depth == 1 && s->cur.t[i].f[0].ph == P_DONE)
            return 1;
    return 0;
}

int llm_schema_accept(llm_schema_state *s, const llm_json_vocab *v, int32_t id)
{
    size_t k;
    const char *p = llm_json_token_bytes(v, id, &k);
    return p == NULL ? -1 : llm_schema_feed(s, p, k);
}

/* ---- the mask ---- */

/* Whitespace leaves the thread where it is (but for the count): the top frame sits between tokens. */
static int between_tokens(const llm_schema *sc, const sthread *t)
{
    const sframe *f = &t->f[t->depth - 1];
    if (f->node == NO_NODE)
        return 1;
    switch (sc->nodes[f->node].kind) {
    case SK_OBJECT:
    case SK_MAP:
        return f->ph != P_OPEN && f->ph != P_KEY;
    case SK_ARRAY:
        return f->ph != P_OPEN;
    case SK_ANY:
        return f->ph == P_BODY && llm_json_between_tokens(&f->u.js);
    default:
        return 0;
    }
}

/* Whitespace bytes in a row so far at thread t's place. */
static unsigned ws_run(const llm_schema *sc, const sthread *t)
{
    const sframe *f = &t->f[t->depth - 1];
    return f->node != NO_NODE && sc->nodes[f->node].kind == SK_ANY ? f->u.js.ws : t->ws;
}

/* Inside a string any plain byte (>= 0x20, no quote or backslash) continues it while there is room: 1
 * with the code points left in *room, or 0 when thread t is not in a string's characters. */
static int in_plain_string(const llm_schema *sc, const sthread *t, unsigned *room)
{
    const sframe *f = &t->f[t->depth - 1];
    if (f->node == NO_NODE)
        return 0;
    const llm_schema_node *nd = &sc->nodes[f->node];
    *room = UINT32_MAX;
    if (nd->kind == SK_ANY)
        return f->ph == P_BODY && llm_json_in_string(&f->u.js);
    if (nd->kind != SK_STRING || f->ph != P_IN || nd->pattern >= 0 || f->u.g.b != 0)
        return 0; /* (inside a character: tokens go byte by byte) */
    if (nd->max >= 0)
        *room = (unsigned)(nd->max - (int64_t)f->u.g.a);
    return 1;
}

typedef struct {
    const llm_schema *sc;
    const sset       *from;
    sset             *work;
} fit_ctx;

static int schema_fits(const void *ctx, const char *p, size_t n)
{
    const fit_ctx *x = ctx;
    set_copy(x->work, x->from);
    return feed_set(x->sc, x->work, p, n);
}

typedef struct {
    const llm_regex *re;
    int              state;
} pattern_ctx;

/* A plain token (no quote, backslash or control byte) inside a pattern string: its bytes are the value's. */
static int pattern_fits(const void *ctx, const char *p, size_t n)
{
    const pattern_ctx *pc = ctx;
    return raw_feed(pc->re, pc->state, p, n) >= 0;
}

/* Any token, against a regex over the whole output: 0 when it continues it (fits' sense). */
static int raw_fits(const void *ctx, const char *p, size_t n)
{
    return !pattern_fits(ctx, p, n);
}

/* Pattern state pc's verdicts on the plain tokens, made once for each of the first states met and kept. */
static const uint64_t *memo_bits(const llm_schema *sc, int rx, const pattern_ctx *pc, const llm_json_vocab *v)
{
    uint64_t **memo = sc->memo != NULL ? sc->memo->bits[rx] : NULL;
    if (memo == NULL || pc->state >= LLM_SCHEMA_MEMO_STATES)
        return NULL;
    if (memo[pc->state] == NULL && sc->memo->used < LLM_SCHEMA_MEMO_MAX &&
        (memo[pc->state] = malloc((size_t)(llm_json_vocab_size(v) + 63) / 64 * sizeof(uint64_t))) != NULL) {
        llm_json_plain_bits(v, pattern_fits, pc, memo[pc->state]);
        sc->memo->used++;
    }
    return memo[pc->state];
}

/* The mask of a regex over the whole output: plain tokens by the DFA (their verdicts kept), the others by their
 * first byte, then whole. */
static int raw_mask(const llm_schema_state *s, const llm_json_vocab *v, float *logits, uint64_t *allow,
                    int n_logits, int32_t *cand)
{
    const llm_schema *sc = s->sc;
    pattern_ctx pc = { sc->regexes[0], s->rst };
    llm_json_mask_tables mt;
    memset(&mt, 0, sizeof(mt));
    for (int c = 0; c < 256; c++)
        mt.first[c] = llm_regex_step(pc.re, pc.state, (uint8_t)c) >= 0;
    mt.in_string = mt.all_in_string = 1;
    mt.plain_fits = pattern_fits;
    mt.plain_ctx = &pc;
    mt.plain_bits = memo_bits(sc, 0, &pc, v);
    mt.fits = raw_fits;
    mt.ctx = &pc;
    return allow != NULL ? llm_json_mask_bits(v, &mt, allow, n_logits, cand)
                         : llm_json_mask_with(v, &mt, logits, n_logits);
}

/* The mask of a grammar: its own walk over the vocabulary (grammar_match.c). */
static int grammar_mask(const llm_schema_state *s, const llm_json_vocab *v, float *logits, uint64_t *allow,
                        int n_logits)
{
    if (allow != NULL)
        return llm_grammar_mask_bits(s->gst, v, allow, n_logits);
    uint64_t *bits = malloc((size_t)(n_logits + 63) / 64 * sizeof(uint64_t));
    int left = bits != NULL ? llm_grammar_mask_bits(s->gst, v, bits, n_logits) : 0;
    if (bits != NULL)
        llm_json_mask_apply(bits, logits, n_logits);
    else
        for (int id = 0; id < n_logits; id++)
            logits[id] = -INFINITY;
    free(bits);
    return left;
}

/* The mask of s as logits (-inf) or, with allow, as bits (cand: the caller's scratch). */
static int schema_mask(const llm_schema_state *s, const llm_json_vocab *v, float *logits, uint64_t *allow,
                       int n_logits, int32_t *cand)
{
    const llm_schema *sc = s->sc;
    if (sc->raw)
        return raw_mask(s, v, logits, allow, n_logits, cand);
    if (sc->gram != NULL)
        return grammar_mask(s, v, logits, allow, n_logits);
    sset *w = s->scratch;
    llm_json_mask_tables mt;
    memset(&mt, 0, sizeof(mt));
    for (int c = 0; c < 256; c++) {
        set_copy(w, &s->cur);
        mt.first[c] = feed_byte(sc, w, (uint8_t)c) == 0;
    }
    /* one whitespace byte: if it leaves every reading between tokens, the byte after a token's leading
     * whitespace decides as after one (the readings' whitespace budgets aside: the largest one counts) */
    sset *sw = s->scratch_ws;
    set_copy(sw, &s->cur);
    mt.ws_short = feed_byte(sc, sw, ' ') == 0;
    for (int i = 0; mt.ws_short && i < sw->n; i++) {
        unsigned run = ws_run(sc, &sw->t[i]);
        mt.ws_short = between_tokens(sc, &sw->t[i]);
        if (run <= LLM_JSON_MAX_WS && LLM_JSON_MAX_WS + 1 - run > mt.ws_budget)
            mt.ws_budget = LLM_JSON_MAX_WS + 1 - run;
    }
    for (int c = 0; mt.ws_short && c < 256; c++) {
        set_copy(w, sw);
        mt.after_ws[c] = feed_byte(sc, w, (uint8_t)c) == 0;
    }
    mt.all_in_string = 1;
    for (int i = 0; i < s->cur.n; i++) {
        unsigned room = 0;
        int in = in_plain_string(sc, &s->cur.t[i], &room);
        mt.in_string |= in;
        mt.all_in_string &= in;
        if (in && room > mt.string_room)
            mt.string_room = room;
    }
    /* one reading, inside a string held to a pattern: plain tokens go through the pattern's DFA alone */
    pattern_ctx pc = { NULL, 0 };
    const sframe *top = &s->cur.t[0].f[s->cur.t[0].depth - 1];
    if (s->cur.n == 1 && top->node != NO_NODE && sc->nodes[top->node].kind == SK_STRING &&
        sc->nodes[top->node].pattern >= 0 && top->ph == P_IN) {
        int rx = sc->nodes[top->node].pattern;
        pc.re = sc->regexes[rx];
        pc.state = (int)top->u.g.b;
        mt.in_string = mt.all_in_string = 1;
        mt.plain_fits = pattern_fits;
        mt.plain_ctx = &pc;
        /* a state met before: its verdicts were kept (the loop of an e-mail's local part, a date's digits) */
        mt.plain_bits = memo_bits(sc, rx, &pc, v);
    }
    fit_ctx x = { sc, &s->cur, w };
    mt.fits = schema_fits;
    mt.ctx = &x;
    return allow != NULL ? llm_json_mask_bits(v, &mt, allow, n_logits, cand) : llm_json_mask_with(v, &mt, logits, n_logits);
}

int llm_schema_mask(const llm_schema_state *s, const llm_json_vocab *v, float *logits, int n_logits)
{
    return schema_mask(s, v, logits, NULL, n_logits, NULL);
}

int llm_schema_mask_bits(const llm_schema_state *s, const llm_json_vocab *v, uint64_t *allow, int n_logits,
                         int32_t *cand)
{
    return schema_mask(s, v, NULL, allow, n_logits, cand);
}
