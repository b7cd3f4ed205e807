/* GBNF text into a compiled grammar (grammar.h). A recursive-descent parser writes each rule's alternatives as
 * element sequences; groups and repetitions become rules of their own (x* is R ::= x R | "", x? is
 * R ::= x | "", x{m,n} is m copies then n - m nested optional rules); then the rules are laid out one after
 * another in el[], and left recursion, which the stacks of grammar_match.c would follow forever, is refused. */
#include "grammar_priv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NEST   64      /* groups inside groups */
#define MAX_REPEAT 10000   /* m and n of {m,n} */
#define MAX_CP     0x10ffffu

typedef struct {
    uint32_t *v;
    uint32_t  n, cap;
} u32vec;

typedef struct {
    const char *name;   /* in the text; for a group or repetition, the rule it was written in */
    uint32_t    name_len;
    u32vec      body;   /* alternatives, each ended by G_END */
    uint32_t    nalt;
    int         defined;
} prule;

typedef struct {
    const char  *src, *p, *end;
    prule       *rules;
    uint32_t     n_rules, cap_rules;
    llm_grammar *g;
    uint32_t     cap_sets, cap_rng;
    int32_t      ascii_set[128]; /* the set of one ASCII character, once made */
    uint32_t     elems;
    uint32_t     cur;            /* the named rule being read */
    char        *err;
    size_t       cap;
    int          failed;
} parser;

static int fail(parser *ps, const char *fmt, ...)
{
    if (ps->failed)
        return -1;
    ps->failed = 1;
    int line = 1;
    for (const char *q = ps->src; q < ps->p && q < ps->end; q++)
        line += *q == '\n';
    int k = snprintf(ps->err, ps->cap, "grammar: line %d: ", line);
    if (k >= 0 && (size_t)k < ps->cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->err + k, ps->cap - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return -1;
}


static int push(parser *ps, u32vec *v, uint32_t x)
{
    if (++ps->elems > LLM_GRAMMAR_MAX_ELEMS)
        return fail(ps, "more than %d elements (repetitions written out)", LLM_GRAMMAR_MAX_ELEMS);
    if (llm_grow((void **)&v->v, &v->cap, v->n + 1, sizeof(uint32_t)) != 0)
        return fail(ps, "out of memory");
    v->v[v->n++] = x;
    return 0;
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static void skip_space(parser *ps)
{
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n')
                ps->p++;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            ps->p++;
        } else {
            break;
        }
    }
}

static size_t name_len(const parser *ps, const char *at)
{
    const char *q = at;
    while (q < ps->end && is_name_char(*q))
        q++;
    return (size_t)(q - at);
}

/* A rule's definition starts at p: a name, then "::=". */
static int at_definition(parser *ps)
{
    size_t k = name_len(ps, ps->p);
    if (k == 0)
        return 0;
    const char *save = ps->p;
    ps->p += k;
    skip_space(ps);
    int yes = ps->end - ps->p >= 3 && memcmp(ps->p, "::=", 3) == 0;
    ps->p = save;
    return yes;
}

static int64_t new_rule(parser *ps, const char *name, uint32_t len)
{
    if (ps->n_rules >= (1u << 29))
        return fail(ps, "too many rules");
    if (llm_grow((void **)&ps->rules, &ps->cap_rules, ps->n_rules + 1, sizeof(prule)) != 0)
        return fail(ps, "out of memory");
    prule *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof(*r));
    r->name = name;
    r->name_len = len;
    return ps->n_rules++;
}

/* A named rule's id (made on first use). */
static int64_t rule_id(parser *ps, const char *name, size_t len)
{
    for (uint32_t i = 0; i < ps->n_rules; i++)
        if (ps->rules[i].name_len == len && memcmp(ps->rules[i].name, name, len) == 0 &&
            (ps->rules[i].defined != 2))
            return i;
    return new_rule(ps, name, (uint32_t)len);
}

/* An anonymous rule (a group, a repetition), named after the rule it is written in for messages. */
static int64_t anon_rule(parser *ps)
{
    int64_t id = new_rule(ps, ps->rules[ps->cur].name, ps->rules[ps->cur].name_len);
    if (id >= 0)
        ps->rules[id].defined = 2;
    return id;
}

/* ---- character sets ---- */

static int cmp_range(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* A set of the n ranges r (pairs lo, hi), or of their complement: its id, or -1. */
static int64_t make_set(parser *ps, uint32_t *r, uint32_t n, int negate)
{
    qsort(r, n, 2 * sizeof(uint32_t), cmp_range);
    uint32_t m = 0; /* merged in place */
    for (uint32_t i = 0; i < n; i++) {
        if (m > 0 && r[2 * i] <= r[2 * (m - 1) + 1] + 1) {
            if (r[2 * i + 1] > r[2 * (m - 1) + 1])
                r[2 * (m - 1) + 1] = r[2 * i + 1];
        } else {
            r[2 * m] = r[2 * i];
            r[2 * m + 1] = r[2 * i + 1];
            m++;
        }
    }
    llm_grammar *g = ps->g;
    if (llm_grow((void **)&g->sets, &ps->cap_sets, g->n_sets + 1, sizeof(llm_grammar_set)) != 0 ||
        llm_grow((void **)&g->rng, &ps->cap_rng, 2 * (g->n_rng + m + 1), sizeof(uint32_t)) != 0)
        return fail(ps, "out of memory");
    llm_grammar_set *s = &g->sets[g->n_sets];
    memset(s, 0, sizeof(*s));
    s->off = g->n_rng;
    uint32_t next = 0; /* for the complement: the first code point not yet covered */
    for (uint32_t i = 0; i <= m; i++) {
        uint32_t lo, hi;
        if (negate) {
            lo = next;
            hi = i < m ? (r[2 * i] == 0 ? 0 : r[2 * i] - 1) : MAX_CP;
            int empty = i < m ? r[2 * i] <= next : next > MAX_CP;
            if (i < m)
                next = r[2 * i + 1] + 1;
            if (empty)
                continue;
        } else {
            if (i == m)
                break;
            lo = r[2 * i];
            hi = r[2 * i + 1];
        }
        for (uint32_t c = lo; c <= hi && c < 128; c++)
            s->ascii[c >> 6] |= 1ull << (c & 63);
        if (hi >= 128) {
            g->rng[2 * g->n_rng] = lo < 128 ? 128 : lo;
            g->rng[2 * g->n_rng + 1] = hi;
            g->n_rng++;
            s->n++;
        }
    }
    if (s->ascii[0] == 0 && s->ascii[1] == 0 && s->n == 0) /* [^\x00-\U0010FFFF]: nothing could follow */
        return fail(ps, "a class that holds no character");
    return g->n_sets++;
}

static int64_t char_set(parser *ps, uint32_t cp)
{
    if (cp < 128 && ps->ascii_set[cp] >= 0)
        return ps->ascii_set[cp];
    uint32_t r[2] = { cp, cp };
    int64_t id = make_set(ps, r, 1, 0);
    if (cp < 128 && id >= 0)
        ps->ascii_set[cp] = (int32_t)id;
    return id;
}

/* ---- characters ---- */

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One character of a literal or a class, an escape or UTF-8: its code point, or -1. */
static int64_t read_char(parser *ps)
{
    if (ps->p >= ps->end)
        return fail(ps, "the text ends inside a literal or a class");
    uint8_t c = (uint8_t)*ps->p;
    if (c == '\\') {
        if (ps->end - ps->p < 2)
            return fail(ps, "the text ends inside an escape");
        char e = ps->p[1];
        ps->p += 2;
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits > 0) {
            uint32_t v = 0;
            for (int i = 0; i < digits; i++) {
                int h = ps->p < ps->end ? hex_value(*ps->p) : -1;
                if (h < 0)
                    return fail(ps, "\\%c wants %d hex digits", e, digits);
                v = v * 16 + (uint32_t)h;
                ps->p++;
            }
            if (v > MAX_CP)
                return fail(ps, "\\%c: U+%X is past U+10FFFF", e, v);
            return v;
        }
        switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '/': case '^': case '.':
            return (uint8_t)e;
        default:
            return fail(ps, "unknown escape \\%c", e);
        }
    }
    if (c < 0x80) {
        ps->p++;
        return c;
    }
    uint8_t u = 0;
    uint32_t cp = 0;
    int k = 0;
    do {
        if (ps->p >= ps->end || llm_utf8_step(&u, (uint8_t)*ps->p) != 0)
            return fail(ps, "bytes that are not UTF-8");
        uint8_t b = (uint8_t)*ps->p++;
        cp = k == 0 ? (uint32_t)(b < 0xe0 ? b & 0x1f : b < 0xf0 ? b & 0x0f : b & 0x07) : cp << 6 | (b & 0x3fu);
        k++;
    } while ((u & 3) != 0);
    return cp;
}

/* ---- rules ---- */

static int parse_alternates(parser *ps, uint32_t rule, int nest);

/* The item at rule's body[from..] as one element: left alone when it is one, else moved into a rule of its own.
 * -1: error, 0: no element at all (an empty literal). */
static int single(parser *ps, uint32_t rule, uint32_t from, uint32_t *x)
{
    uint32_t n = ps->rules[rule].body.n - from;
    if (n == 0)
        return 0;
    if (n == 1) {
        *x = ps->rules[rule].body.v[from];
        ps->rules[rule].body.n = from;
        return 1;
    }
    int64_t r = anon_rule(ps); /* (ps->rules may move) */
    if (r < 0)
        return -1;
    const u32vec *body = &ps->rules[rule].body;
    for (uint32_t i = from; i < body->n; i++)
        if (push(ps, &ps->rules[r].body, body->v[i]) != 0)
            return -1;
    if (push(ps, &ps->rules[r].body, G_END) != 0)
        return -1;
    ps->rules[r].nalt = 1;
    ps->rules[rule].body.n = from;
    *x = G_REF | (uint32_t)r;
    return 1;
}

/* A rule R ::= x tail | "" (tail: R itself for x*, nothing for x?): G_REF of it. */
static int64_t loop_rule(parser *ps, uint32_t x, int64_t tail)
{
    int64_t r = anon_rule(ps);
    if (r < 0)
        return -1;
    prule *pr = &ps->rules[r];
    if (push(ps, &pr->body, x) != 0 || (tail == -2 && push(ps, &pr->body, G_REF | (uint32_t)r) != 0) ||
        (tail >= 0 && push(ps, &pr->body, G_REF | (uint32_t)tail) != 0) || push(ps, &pr->body, G_END) != 0 ||
        push(ps, &pr->body, G_END) != 0)
        return -1;
    pr->nalt = 2;
    return r;
}

static int read_count(parser *ps, uint32_t *v)
{
    skip_space(ps);
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
        return fail(ps, "a repetition {m,n} wants numbers");
    uint32_t x = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        x = x * 10 + (uint32_t)(*ps->p++ - '0');
        if (x > MAX_REPEAT)
            return fail(ps, "a repetition past %d", MAX_REPEAT);
    }
    skip_space(ps);
    *v = x;
    return 0;
}

/* The repetition after the item at body[from..], if any, written out. */
static int repetition(parser *ps, uint32_t rule, uint32_t from)
{
    if (ps->p >= ps->end || strchr("*+?{", *ps->p) == NULL)
        return 0;
    char op = *ps->p++;
    uint32_t m = 0, n = 0; /* {m,n}; n UINT32_MAX: no bound */
    if (op == '*')
        m = 0, n = UINT32_MAX;
    else if (op == '+')
        m = 1, n = UINT32_MAX;
    else if (op == '?')
        m = 0, n = 1;
    else {
        if (read_count(ps, &m) != 0)
            return -1;
        n = m;
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            skip_space(ps);
            n = UINT32_MAX;
            if (ps->p < ps->end && *ps->p != '}' && read_count(ps, &n) != 0)
                return -1;
        }
        if (ps->p >= ps->end || *ps->p != '}')
            return fail(ps, "a repetition {m,n} ends with '}'");
        ps->p++;
        if (n < m)
            return fail(ps, "a repetition {%u,%u} with its bounds the wrong way round", m, n);
    }
    uint32_t x;
    int one = single(ps, rule, from, &x);
    if (one <= 0)
        return one; /* nothing repeated: an empty literal stays empty */
    for (uint32_t i = 0; i < m; i++)
        if (push(ps, &ps->rules[rule].body, x) != 0)
            return -1;
    if (n == UINT32_MAX) {
        int64_t r = loop_rule(ps, x, -2);
        return r < 0 ? -1 : push(ps, &ps->rules[rule].body, G_REF | (uint32_t)r);
    }
    int64_t opt = -1; /* x (x (x)?)? ... n - m deep */
    for (uint32_t i = m; i < n; i++)
        if ((opt = loop_rule(ps, x, opt)) < 0)
            return -1;
    return opt < 0 ? 0 : push(ps, &ps->rules[rule].body, G_REF | (uint32_t)opt);
}

/* Items until '|', ')', the end or the next rule's definition. */
static int parse_sequence(parser *ps, uint32_t rule, int nest)
{
    for (;;) {
        skip_space(ps);
        if (ps->p >= ps->end || *ps->p == '|' || *ps->p == ')' || at_definition(ps))
            return 0;
        uint32_t from = ps->rules[rule].body.n;
        char c = *ps->p;
        if (c == '"') {
            ps->p++;
            while (ps->p < ps->end && *ps->p != '"') {
                int64_t cp = read_char(ps), s = cp < 0 ? -1 : char_set(ps, (uint32_t)cp);
                if (s < 0 || push(ps, &ps->rules[rule].body, G_SET | (uint32_t)s) != 0)
                    return -1;
            }
            if (ps->p >= ps->end)
                return fail(ps, "a literal without its closing '\"'");
            ps->p++;
        } else if (c == '[') {
            ps->p++;
            int negate = ps->p < ps->end && *ps->p == '^';
            ps->p += negate;
            uint32_t *r = NULL, nr = 0, cap = 0;
            while (ps->p < ps->end && *ps->p != ']') {
                int64_t lo = read_char(ps), hi = lo;
                if (lo >= 0 && ps->end - ps->p >= 2 && *ps->p == '-' && ps->p[1] != ']') {
                    ps->p++;
                    hi = read_char(ps);
                    if (hi >= 0 && hi < lo)
                        hi = fail(ps, "a class range the wrong way round");
                }
                if (hi < 0 || llm_grow((void **)&r, &cap, 2 * (nr + 1), sizeof(uint32_t)) != 0) {
                    free(r);
                    return fail(ps, "out of memory");
                }
                r[2 * nr] = (uint32_t)lo;
                r[2 * nr + 1] = (uint32_t)hi;
                nr++;
            }
            if (ps->p >= ps->end) {
                free(r);
                return fail(ps, "a class without its closing ']'");
            }
            ps->p++;
            int64_t s = make_set(ps, r, nr, negate);
            free(r);
            if (s < 0 || push(ps, &ps->rules[rule].body, G_SET | (uint32_t)s) != 0)
                return -1;
        } else if (c == '.') {
            ps->p++;
            uint32_t r[2] = { 0, MAX_CP };
            int64_t s = make_set(ps, r, 1, 0);
            if (s < 0 || push(ps, &ps->rules[rule].body, G_SET | (uint32_t)s) != 0)
                return -1;
        } else if (c == '(') {
            if (nest >= MAX_NEST)
                return fail(ps, "groups nested more than %d deep", MAX_NEST);
            ps->p++;
            int64_t r = anon_rule(ps);
            if (r < 0 || parse_alternates(ps, (uint32_t)r, nest + 1) != 0)
                return -1;
            if (ps->p >= ps->end || *ps->p != ')')
                return fail(ps, "a group without its closing ')'");
            ps->p++;
            if (push(ps, &ps->rules[rule].body, G_REF | (uint32_t)r) != 0)
                return -1;
        } else if (is_name_char(c)) {
            size_t k = name_len(ps, ps->p);
            int64_t r = rule_id(ps, ps->p, k);
            ps->p += k;
            if (r < 0 || push(ps, &ps->rules[rule].body, G_REF | (uint32_t)r) != 0)
                return -1;
        } else {
            return fail(ps, "'%c' where an item (a literal, a class, a rule, a group) was wanted", c);
        }
        skip_space(ps);
        if (repetition(ps, rule, from) != 0)
            return -1;
    }
}

static int parse_alternates(parser *ps, uint32_t rule, int nest)
{
    for (;;) {
        if (parse_sequence(ps, rule, nest) != 0 || push(ps, &ps->rules[rule].body, G_END) != 0)
            return -1;
        ps->rules[rule].nalt++;
        skip_space(ps);
        if (ps->p >= ps->end || *ps->p != '|')
            return 0;
        ps->p++;
    }
}

/* ---- checks and layout ---- */

/* Left recursion: a rule that can reach itself at its start (through the rules it starts with, or those after
 * empty ones). Depth-first search over those "starts with" edges, with a stack of its own. */
static int check_left_recursion(parser *ps, const uint8_t *nullable)
{
    uint32_t n = ps->n_rules, ne = 0;
    uint32_t *eoff = malloc(((size_t)n + 1) * sizeof(uint32_t)), *edst = malloc(((size_t)ps->elems + 1) * sizeof(uint32_t));
    uint8_t *color = calloc(n, 1);                            /* 0 new, 1 on the path, 2 done */
    uint32_t *stk = malloc(2 * (size_t)n * sizeof(uint32_t)); /* pairs: rule, its next edge */
    int rc = 0;
    if (eoff == NULL || edst == NULL || color == NULL || stk == NULL)
        rc = fail(ps, "out of memory");
    for (uint32_t r = 0; rc == 0 && r < n; r++) {
        eoff[r] = ne;
        int start = 1; /* everything before in this alternative may be empty */
        for (uint32_t i = 0; i < ps->rules[r].body.n; i++) {
            uint32_t e = ps->rules[r].body.v[i];
            if (e == G_END)
                start = 1;
            else if (start && G_KIND(e) == G_SET)
                start = 0;
            else if (start) {
                edst[ne++] = G_ARG(e);
                start = nullable[G_ARG(e)];
            }
        }
    }
    if (rc == 0)
        eoff[n] = ne;
    for (uint32_t s = 0; rc == 0 && s < n; s++) {
        if (color[s])
            continue;
        uint32_t top = 1;
        stk[0] = s, stk[1] = eoff[s];
        color[s] = 1;
        while (top > 0 && rc == 0) {
            uint32_t r = stk[2 * (top - 1)], i = stk[2 * (top - 1) + 1];
            if (i == eoff[r + 1]) {
                color[r] = 2;
                top--;
                continue;
            }
            stk[2 * (top - 1) + 1] = i + 1;
            uint32_t next = edst[i];
            if (color[next] == 1) {
                const prule *pr = &ps->rules[next];
                snprintf(ps->err, ps->cap, "grammar: rule '%.*s' is left-recursive (it can start with itself, "
                         "directly, through other rules or after empty ones), which this server does not follow: "
                         "write the repetition with * or +", (int)pr->name_len, pr->name);
                ps->failed = 1;
                rc = -1;
            } else if (color[next] == 0) {
                color[next] = 1;
                stk[2 * top] = next, stk[2 * top + 1] = eoff[next];
                top++;
            }
        }
    }
    free(eoff);
    free(edst);
    free(color);
    free(stk);
    return rc;
}

static int layout(parser *ps, uint32_t root)
{
    llm_grammar *g = ps->g;
    uint8_t *nullable = calloc(ps->n_rules ? ps->n_rules : 1, 1);
    if (nullable == NULL)
        return fail(ps, "out of memory");
    for (int changed = 1; changed;) { /* a rule with an alternative of empty rules only */
        changed = 0;
        for (uint32_t r = 0; r < ps->n_rules; r++) {
            const u32vec *b = &ps->rules[r].body;
            int all = 1;
            for (uint32_t i = 0; i < b->n && !nullable[r]; i++) {
                uint32_t e = b->v[i];
                if (e == G_END) {
                    if (all)
                        nullable[r] = 1, changed = 1;
                    all = 1;
                } else if (G_KIND(e) == G_SET || !nullable[G_ARG(e)]) {
                    all = 0;
                }
            }
        }
    }
    int rc = check_left_recursion(ps, nullable);
    free(nullable);
    if (rc != 0)
        return -1;
    g->n_rules = ps->n_rules;
    g->n_el = 2 + ps->elems;
    g->el = malloc((size_t)g->n_el * sizeof(uint32_t));
    g->rule_start = malloc((size_t)(g->n_rules + 1) * sizeof(uint32_t));
    g->rule_nalt = malloc((size_t)(g->n_rules + 1) * sizeof(uint32_t));
    if (g->el == NULL || g->rule_start == NULL || g->rule_nalt == NULL)
        return fail(ps, "out of memory");
    g->el[0] = G_REF | root;
    g->el[1] = G_END;
    uint32_t at = 2;
    for (uint32_t r = 0; r < ps->n_rules; r++) {
        g->rule_start[r] = at;
        g->rule_nalt[r] = ps->rules[r].nalt;
        memcpy(g->el + at, ps->rules[r].body.v, (size_t)ps->rules[r].body.n * sizeof(uint32_t));
        at += ps->rules[r].body.n;
    }
    g->n_el = at;
    return 0;
}

llm_grammar *llm_grammar_parse(const char *src, size_t len, char *err, size_t cap)
{
    parser ps;
    memset(&ps, 0, sizeof(ps));
    ps.src = ps.p = src;
    ps.end = src + len;
    ps.err = err;
    ps.cap = cap;
    memset(ps.ascii_set, 0xff, sizeof(ps.ascii_set));
    if (len > LLM_GRAMMAR_MAX_TEXT) {
        snprintf(err, cap, "grammar: more than %d bytes", LLM_GRAMMAR_MAX_TEXT);
        return NULL;
    }
    if (memchr(src, '\0', len) != NULL) {
        snprintf(err, cap, "grammar: a NUL byte");
        return NULL;
    }
    ps.g = calloc(1, sizeof(llm_grammar));
    if (ps.g == NULL) {
        snprintf(err, cap, "grammar: out of memory");
        return NULL;
    }
    int rc = 0;
    skip_space(&ps);
    if (ps.p >= ps.end)
        rc = fail(&ps, "no rules");
    while (rc == 0 && ps.p < ps.end) {
        size_t k = name_len(&ps, ps.p);
        if (k == 0 || !at_definition(&ps)) {
            rc = fail(&ps, "a rule's definition (name ::= ...) was wanted");
            break;
        }
        int64_t r = rule_id(&ps, ps.p, k);
        if (r < 0) {
            rc = -1;
            break;
        }
        if (ps.rules[r].defined) {
            rc = fail(&ps, "rule '%.*s' defined twice", (int)k, ps.p);
            break;
        }
        ps.rules[r].defined = 1;
        ps.cur = (uint32_t)r;
        ps.p += k;
        skip_space(&ps);
        ps.p += 3; /* ::= */
        if (parse_alternates(&ps, (uint32_t)r, 0) != 0)
            rc = -1;
        else if (ps.p < ps.end && *ps.p == ')')
            rc = fail(&ps, "a ')' with no '(' before it");
        skip_space(&ps);
    }
    int64_t root = -1;
    for (uint32_t i = 0; rc == 0 && i < ps.n_rules; i++) {
        const prule *r = &ps.rules[i];
        if (!r->defined) {
            ps.p = ps.src;
            snprintf(err, cap, "grammar: rule '%.*s' is used but not defined", (int)r->name_len, r->name);
            rc = -1;
        } else if (r->defined == 1 && r->name_len == 4 && memcmp(r->name, "root", 4) == 0) {
            root = i;
        }
    }
    if (rc == 0 && root < 0) {
        snprintf(err, cap, "grammar: no rule 'root' (where the output starts)");
        rc = -1;
    }
    if (rc == 0)
        rc = layout(&ps, (uint32_t)root);
    for (uint32_t i = 0; i < ps.n_rules; i++)
        free(ps.rules[i].body.v);
    free(ps.rules);
    if (rc != 0) {
        llm_grammar_free(ps.g);
        return NULL;
    }
    return ps.g;
}

void llm_grammar_free(llm_grammar *g)
{
    if (g == NULL)
        return;
    free(g->el);
    free(g->rule_start);
    free(g->rule_nalt);
    free(g->sets);
    free(g->rng);
    free(g);
}

int llm_grammar_rules(const llm_grammar *g) { return g != NULL ? (int)g->n_rules : 0; }
