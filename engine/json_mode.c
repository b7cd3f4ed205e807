/* JSON mode: a byte-level JSON recogniser and the vocabulary mask built on it (json_mode.h). */
#include "json_mode.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum {
    J_VALUE,     /* a value must come (top level, after ':' or after ',' in an array) */
    J_ARR_FIRST, /* after '[': a value or ']' */
    J_OBJ_FIRST, /* after '{': a key or '}' */
    J_OBJ_KEY,   /* after ',' in an object: a key */
    J_COLON,     /* after a key */
    J_AFTER,     /* after a value inside a container: ',' or the container's closing bracket */
    J_DONE,      /* the top-level value is complete: whitespace only */
    J_STR,       /* inside a string (key says whether it is an object key) */
    J_STR_ESC,   /* after '\' */
    J_STR_U,     /* in \uXXXX, sub hex digits read */
    J_NUM,       /* inside a number, sub one of N_* */
    J_LIT,       /* inside true / false / null: sub = literal << 4 | bytes matched */
};

enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static const char *const literal[3] = { "true", "false", "null" };

void llm_json_init(llm_json_state *s, int top_object)
{
    memset(s, 0, sizeof(*s));
    s->st = J_VALUE;
    s->top_object = top_object != 0;
}

int llm_json_done(const llm_json_state *s) { return s->st == J_DONE; }

static int is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
static int is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static void value_done(llm_json_state *s) { s->st = s->depth == 0 ? J_DONE : J_AFTER; }

static int top_is_obj(const llm_json_state *s) { return (int)((s->is_obj >> (s->depth - 1)) & 1u); }

static int open_container(llm_json_state *s, int obj)
{
    if (s->depth >= LLM_JSON_MAX_DEPTH)
        return -1;
    if (obj)
        s->is_obj |= 1ull << s->depth;
    else
        s->is_obj &= ~(1ull << s->depth);
    s->depth++;
    s->st = obj ? J_OBJ_FIRST : J_ARR_FIRST;
    return 0;
}

static int close_container(llm_json_state *s)
{
    s->depth--;
    value_done(s);
    return 0;
}

static int begin_value(llm_json_state *s, uint8_t c)
{
    if (s->depth == 0 && s->top_object && c != '{')
        return -1;
    switch (c) {
    case '{': return open_container(s, 1);
    case '[': return open_container(s, 0);
    case '"': s->st = J_STR; s->key = 0; s->sub = 0; return 0;
    case '-': s->st = J_NUM; s->sub = N_MINUS; s->digits = 0; return 0;
    case 't': s->st = J_LIT; s->sub = 0 << 4 | 1; return 0;
    case 'f': s->st = J_LIT; s->sub = 1 << 4 | 1; return 0;
    case 'n': s->st = J_LIT; s->sub = 2 << 4 | 1; return 0;
    default:
        if (!is_digit(c))
            return -1;
        s->st = J_NUM;
        s->sub = c == '0' ? N_ZERO : N_INT;
        s->digits = 1;
        return 0;
    }
}

/* A digit more in the part of the number being read: 1, or -1 past LLM_JSON_MAX_DIGITS. */
static int digit(llm_json_state *s)
{
    return ++s->digits <= LLM_JSON_MAX_DIGITS ? 1 : -1;
}

/* 1: c continues the number; 0: the number is complete and c belongs to what follows; -1: invalid. */
static int number_step(llm_json_state *s, uint8_t c)
{
    int e = c == 'e' || c == 'E';
    switch (s->sub) {
    case N_MINUS:
        if (!is_digit(c))
            return -1;
        s->sub = c == '0' ? N_ZERO : N_INT;
        return digit(s);
    case N_ZERO:
    case N_INT:
        if (is_digit(c))
            return s->sub == N_ZERO ? -1 : digit(s); /* no leading zeros */
        if (c == '.' || e) {
            s->sub = c == '.' ? N_DOT : N_E;
            s->digits = 0;
            return 1;
        }
        return 0;
    case N_DOT:
        if (!is_digit(c))
            return -1;
        s->sub = N_FRAC;
        return digit(s);
    case N_FRAC:
        if (is_digit(c))
            return digit(s);
        if (e) {
            s->sub = N_E;
            s->digits = 0;
            return 1;
        }
        return 0;
    case N_E:
        if (c == '+' || c == '-') {
            s->sub = N_ESIGN;
            return 1;
        }
        /* fall through */
    case N_ESIGN:
        if (!is_digit(c))
            return -1;
        s->sub = N_EXP;
        return digit(s);
    default: /* N_EXP */
        return is_digit(c) ? digit(s) : 0;
    }
}

static int step(llm_json_state *s, uint8_t c)
{
    switch (s->st) {
    case J_STR: /* sub: the UTF-8 character being read (llm_utf8_step) */
        if (s->sub != 0 || c >= 0x80)
            return llm_utf8_step(&s->sub, c);
        if (c == '"') {
            if (s->key)
                s->st = J_COLON;
            else
                value_done(s);
        } else if (c == '\\') {
            s->st = J_STR_ESC;
        } else if (c < 0x20) {
            return -1; /* control characters must be escaped */
        }
        return 0;
    case J_STR_ESC:
        if (c == 'u') {
            s->st = J_STR_U;
            s->sub = 0;
            return 0;
        }
        if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' && c != 't')
            return -1;
        s->st = J_STR;
        s->sub = 0;
        return 0;
    case J_STR_U:
        if (!is_hex(c))
            return -1;
        if (++s->sub == 4) {
            s->st = J_STR;
            s->sub = 0;
        }
        return 0;
    case J_LIT: {
        const char *w = literal[s->sub >> 4];
        int pos = s->sub & 15;
        if (c != (uint8_t)w[pos])
            return -1;
        if (w[++pos] == '\0')
            value_done(s);
        else
            s->sub = (uint8_t)((s->sub & 0xf0) | pos);
        return 0;
    }
    case J_NUM: {
        int r = number_step(s, c);
        if (r != 0)
            return r > 0 ? 0 : -1;
        value_done(s); /* the number ended before c: c is structural */
        break;
    }
    default:
        break;
    }
    if (is_ws(c)) {
        if (s->ws >= LLM_JSON_MAX_WS)
            return -1;
        s->ws++;
        return 0;
    }
    s->ws = 0;
    switch (s->st) {
    case J_COLON:
        if (c != ':')
            return -1;
        s->st = J_VALUE;
        return 0;
    case J_OBJ_FIRST:
        if (c == '}')
            return close_container(s);
        /* fall through */
    case J_OBJ_KEY:
        if (c != '"')
            return -1;
        s->st = J_STR;
        s->key = 1;
        s->sub = 0;
        return 0;
    case J_AFTER:
        if (c == ',') {
            s->st = top_is_obj(s) ? J_OBJ_KEY : J_VALUE;
            return 0;
        }
        if (c == (top_is_obj(s) ? '}' : ']'))
            return close_container(s);
        return -1;
    case J_ARR_FIRST:
        if (c == ']')
            return close_container(s);
        return begin_value(s, c);
    case J_VALUE:
        return begin_value(s, c);
    default: /* J_DONE */
        return -1;
    }
}

int llm_json_step(llm_json_state *s, uint8_t c) { return step(s, c); }

int llm_json_can_end(const llm_json_state *s)
{
    if (s->st == J_DONE)
        return 1;
    return s->st == J_NUM && s->depth == 0 &&
           (s->sub == N_ZERO || s->sub == N_INT || s->sub == N_FRAC || s->sub == N_EXP);
}

int llm_json_in_string(const llm_json_state *s) { return s->st == J_STR && s->sub == 0; }

int llm_json_between_tokens(const llm_json_state *s) { return s->st <= J_DONE; }

int llm_json_feed(llm_json_state *s, const char *p, size_t n)
{
    llm_json_state t = *s;
    for (size_t i = 0; i < n; i++)
        if (step(&t, (uint8_t)p[i]) != 0)
            return -1;
    *s = t;
    return 0;
}

/* ---- the vocabulary ---- */

struct llm_json_vocab {
    int       n;
    uint32_t *off, *len;
    char     *bytes;
    uint32_t *info;  /* a token's first bytes, packed (I_*): one load decides most tokens */
    uint8_t  *cps;   /* a token's code points (255: that many or more) */
    int32_t  *cand;  /* llm_json_mask's scratch: tokens to feed */
    /* the tokens with bytes in byte order (a grammar's mask walks them so), made when a grammar first asks
     * (most engines never serve one): sort_state 0 not yet, 1 made, -1 no memory; sort_lock makes it once for
     * the mask threads that share the vocabulary */
    int32_t  *sorted;
    uint16_t *lcp;    /* bytes sorted[i] shares with sorted[i - 1] */
    int       n_sorted;
    uint32_t  maxlen;
    int       sort_state;
    pthread_mutex_t sort_lock;
};

static int cmp_bytes(const void *a, const void *b, void *ctx)
{
    const llm_json_vocab *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = v->len[x], ly = v->len[y];
    int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], lx < ly ? lx : ly);
    return c != 0 ? c : lx < ly ? -1 : lx > ly ? 1 : (x > y) - (x < y);
}

/* The byte order of the tokens and the prefixes neighbours share. */
static int sort_tokens(llm_json_vocab *v)
{
    v->sorted = malloc(((size_t)v->n + 1) * sizeof(int32_t));
    v->lcp = malloc(((size_t)v->n + 1) * sizeof(uint16_t));
    if (v->sorted == NULL || v->lcp == NULL)
        return -1;
    for (int id = 0; id < v->n; id++)
        if (v->len[id] > 0 && v->len[id] < 65536) {
            v->sorted[v->n_sorted++] = id;
            if (v->len[id] > v->maxlen)
                v->maxlen = v->len[id];
        }
    qsort_r(v->sorted, (size_t)v->n_sorted, sizeof(int32_t), cmp_bytes, v); /* (about 30 ms for 128K tokens) */
    for (int i = 0; i < v->n_sorted; i++) {
        uint32_t k = 0;
        if (i > 0) {
            int32_t x = v->sorted[i - 1], y = v->sorted[i];
            const char *a = v->bytes + v->off[x], *b = v->bytes + v->off[y];
            while (k < v->len[x] && k < v->len[y] && a[k] == b[k])
                k++;
        }
        v->lcp[i] = (uint16_t)k;
    }
    return 0;
}

int llm_json_vocab_sorted(const llm_json_vocab *cv, const int32_t **ids, const uint16_t **lcp, uint32_t *maxlen)
{
    llm_json_vocab *v = (llm_json_vocab *)cv; /* (the order is made once, on first use) */
    if (__atomic_load_n(&v->sort_state, __ATOMIC_ACQUIRE) == 0) {
        pthread_mutex_lock(&v->sort_lock);
        if (v->sort_state == 0) {
            int st = sort_tokens(v) == 0 ? 1 : -1;
            if (st < 0)
                v->n_sorted = 0; /* no memory: no token is walked (the grammar's mask allows none) */
            __atomic_store_n(&v->sort_state, st, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&v->sort_lock);
    }
    *ids = v->sorted;
    *lcp = v->lcp;
    *maxlen = v->maxlen;
    return v->n_sorted;
}

/* info: first byte | first byte after the leading whitespace << 8 | leading whitespace bytes (at most 255)
 * << 16 | I_PLAIN (whole UTF-8 characters, none of them '"', '\\' or a control byte: it continues any
 * string between characters as it is) | I_ALLWS (whitespace only). A control token (never allowed) has first byte 0, which no state takes. */
#define I_PLAIN (1u << 24)
#define I_ALLWS (1u << 25)

llm_json_vocab *llm_json_vocab_new(const llm_tokenizer *t)
{
    llm_json_vocab *v = calloc(1, sizeof(*v));
    if (v == NULL || t == NULL) {
        free(v);
        return NULL;
    }
    pthread_mutex_init(&v->sort_lock, NULL);
    v->n = llm_tok_vocab_size(t);
    v->off = calloc((size_t)v->n + 1, sizeof(uint32_t));
    v->len = calloc((size_t)v->n + 1, sizeof(uint32_t));
    size_t total = 0;
    for (int id = 0; id < v->n; id++) {
        const char *p;
        size_t k;
        if (!llm_tok_is_special(t, id) && llm_tok_piece(t, id, &p, &k) == 0)
            total += k;
    }
    v->bytes = malloc(total + 1);
    v->info = calloc((size_t)v->n + 1, sizeof(uint32_t));
    v->cps = calloc((size_t)v->n + 1, 1);
    v->cand = malloc(((size_t)v->n + 1) * sizeof(int32_t));
    if (v->off == NULL || v->len == NULL || v->bytes == NULL || v->info == NULL || v->cps == NULL || v->cand == NULL ||
        total > UINT32_MAX) {
        llm_json_vocab_free(v);
        return NULL;
    }
    size_t at = 0;
    for (int id = 0; id < v->n; id++) {
        const char *p;
        size_t k;
        v->off[id] = (uint32_t)at;
        if (llm_tok_is_special(t, id) || llm_tok_piece(t, id, &p, &k) != 0)
            continue; /* control tokens: length 0, never allowed */
        memcpy(v->bytes + at, p, k);
        v->len[id] = (uint32_t)k;
        at += k;
        if (k == 0)
            continue;
        uint32_t plain = I_PLAIN, cps = 0;
        uint8_t u = 0;
        for (size_t i = 0; i < k; i++) {
            if ((uint8_t)p[i] < 0x20 || p[i] == '"' || p[i] == '\\' || llm_utf8_step(&u, (uint8_t)p[i]) != 0)
                plain = 0;
            cps += ((uint8_t)p[i] & 0xc0) != 0x80;
        }
        if (u != 0)
            plain = 0; /* ends inside a character: the recogniser reads it byte by byte */
        v->cps[id] = (uint8_t)(cps < 255 ? cps : 255);
        size_t w = 0;
        while (w < k && is_ws((uint8_t)p[w]))
            w++;
        v->info[id] = (uint8_t)p[0] | (uint32_t)(w < k ? (uint8_t)p[w] : 0) << 8 | (uint32_t)(w < 255 ? w : 255) << 16 |
                      plain | (w == k ? I_ALLWS : 0);
    }
    return v;
}

void llm_json_vocab_free(llm_json_vocab *v)
{
    if (v == NULL)
        return;
    free(v->off);
    free(v->len);
    free(v->bytes);
    free(v->info);
    free(v->cps);
    free(v->cand);
    free(v->sorted);
    free(v->lcp);
    pthread_mutex_destroy(&v->sort_lock);
    free(v);
}

int llm_json_vocab_size(const llm_json_vocab *v) { return v != NULL ? v->n : 0; }

const char *llm_json_token_bytes(const llm_json_vocab *v, int32_t id, size_t *len)
{
    if (v == NULL || id < 0 || id >= v->n || v->len[id] == 0) {
        *len = 0;
        return NULL;
    }
    *len = v->len[id];
    return v->bytes + v->off[id];
}

int llm_json_mask_bits(const llm_json_vocab *v, const llm_json_mask_tables *mt, uint64_t *allow, int n_logits,
                       int32_t *cand)
{
    /* A first pass decides every token from its packed first bytes without a branch: refused, or kept as
     * a candidate; where whitespace leads to a state between tokens of structure (after '{', after a
     * value, at the end of a number), a token's leading whitespace is checked against its budget and the
     * byte after it against after_ws; inside a string, tokens with no quote, backslash or control byte are
     * taken as they are if they fit the string's room (and when every reading is in a string, refused
     * if not). The candidates (a few thousand at most outside strings) then go to fits. The bits of 64
     * tokens are gathered in a register and stored once. */
    const uint8_t *first = mt->first, *after_ws = mt->after_ws;
    unsigned ws_short = mt->ws_short != 0, budget = mt->ws_budget;
    int n = n_logits < v->n ? n_logits : v->n, m = 0, left = 0, words = (n_logits + 63) / 64;
    unsigned room = mt->string_room, all = mt->all_in_string != 0;
    /* one loop per kind of state; each gathers 64 tokens' bits in a register (ids past the vocabulary
     * stay 0) */
    if (mt->in_string && (mt->plain_bits != NULL || mt->plain_fits != NULL)) {
        /* a pattern decides plain tokens (every reading in it): its kept verdicts, or asked one by one */
        const uint64_t *pb = mt->plain_bits;
        for (int w = 0; w < words; w++) {
            uint64_t bits = 0;
            for (int id = w * 64, end = id + 64 < n ? id + 64 : n; id < end; id++) {
                uint32_t x = v->info[id];
                unsigned keep;
                if (x & I_PLAIN) {
                    keep = pb != NULL ? (unsigned)(pb[id >> 6] >> (id & 63)) & 1u
                                      : mt->plain_fits(mt->plain_ctx, v->bytes + v->off[id], v->len[id]) != 0;
                    left += (int)keep;
                } else {
                    keep = first[x & 255];
                    cand[m] = id;
                    m += (int)keep;
                }
                bits |= (uint64_t)keep << (id & 63);
            }
            allow[w] = bits;
        }
    } else if (mt->in_string) {
        for (int w = 0; w < words; w++) {
            uint64_t bits = 0;
            for (int id = w * 64, end = id + 64 < n ? id + 64 : n; id < end; id++) {
                uint32_t x = v->info[id];
                unsigned plain = (x & I_PLAIN) != 0, fit = plain & (v->cps[id] <= room);
                unsigned maybe = (plain ? (fit ^ 1u) & (all ^ 1u) : first[x & 255]);
                cand[m] = id;
                m += (int)maybe;
                left += (int)fit;
                bits |= (uint64_t)(fit | maybe) << (id & 63);
            }
            allow[w] = bits;
        }
    } else {
        for (int w = 0; w < words; w++) {
            uint64_t bits = 0;
            for (int id = w * 64, end = id + 64 < n ? id + 64 : n; id < end; id++) {
                uint32_t x = v->info[id];
                unsigned ws = (x >> 16) & 255, keep = first[x & 255];
                if (ws_short) /* structural after whitespace: its budget, then the byte after it */
                    keep &= (ws == 0) | ((ws <= budget) & (((x & I_ALLWS) != 0) | after_ws[(x >> 8) & 255]));
                cand[m] = id;
                m += (int)keep;
                bits |= (uint64_t)keep << (id & 63);
            }
            allow[w] = bits;
        }
    }
    for (int j = 0; j < m; j++) {
        int id = cand[j];
        if (mt->fits(mt->ctx, v->bytes + v->off[id], v->len[id]) != 0)
            allow[id >> 6] &= ~(1ull << (id & 63));
        else
            left++;
    }
    return left;
}

void llm_json_plain_bits(const llm_json_vocab *v, int (*fits)(const void *ctx, const char *p, size_t n),
                         const void *ctx, uint64_t *bits)
{
    memset(bits, 0, (size_t)(v->n + 63) / 64 * sizeof(uint64_t));
    for (int id = 0; id < v->n; id++)
        if ((v->info[id] & I_PLAIN) && fits(ctx, v->bytes + v->off[id], v->len[id]))
            bits[id >> 6] |= 1ull << (id & 63);
}

void llm_json_mask_apply(const uint64_t *allow, float *logits, int n_logits)
{
    int full = n_logits / 64;
    for (int w = 0; w < full; w++) {
        uint64_t x = allow[w];
        float *l = logits + (size_t)w * 64;
        if (x == 0) { /* most words of a structural state: a plain store loop */
            for (int k = 0; k < 64; k++)
                l[k] = -INFINITY;
        } else if (x != ~0ull) {
            for (int k = 0; k < 64; k++)
                l[k] = (x >> k) & 1 ? l[k] : -INFINITY;
        }
    }
    for (int id = full * 64; id < n_logits; id++)
        if (!((allow[id >> 6] >> (id & 63)) & 1))
            logits[id] = -INFINITY;
}

int32_t *llm_json_scratch_new(const llm_json_vocab *v)
{
    return malloc(((size_t)v->n + 1) * sizeof(int32_t));
}

int llm_json_mask_with(const llm_json_vocab *v, const llm_json_mask_tables *mt, float *logits, int n_logits)
{
    uint64_t stack_bits[2048]; /* 131,072 tokens: Llama 3's vocabulary fits */
    uint64_t *allow = n_logits <= 2048 * 64 ? stack_bits : malloc((size_t)(n_logits + 63) / 64 * sizeof(uint64_t));
    if (allow == NULL) { /* no memory: every token refused, as a vocabulary that nothing continues */
        for (int id = 0; id < n_logits; id++)
            logits[id] = -INFINITY;
        return 0;
    }
    int left = llm_json_mask_bits(v, mt, allow, n_logits, v->cand);
    llm_json_mask_apply(allow, logits, n_logits);
    if (allow != stack_bits)
        free(allow);
    return left;
}

static int json_fits(const void *ctx, const char *p, size_t n)
{
    llm_json_state t = *(const llm_json_state *)ctx;
    return llm_json_feed(&t, p, n);
}

int llm_json_mask(const llm_json_vocab *v, const llm_json_state *s, float *logits, int n_logits)
{
    llm_json_mask_tables mt;
    for (int c = 0; c < 256; c++) {
        llm_json_state t = *s;
        mt.first[c] = step(&t, (uint8_t)c) == 0;
    }
    llm_json_state sw = *s;
    mt.ws_short = step(&sw, ' ') == 0 && sw.st <= J_DONE;
    for (int c = 0; c < 256; c++) {
        llm_json_state t = sw;
        mt.after_ws[c] = mt.ws_short && step(&t, (uint8_t)c) == 0;
    }
    mt.ws_budget = LLM_JSON_MAX_WS + 1 - sw.ws; /* leading whitespace bytes a token may have */
    mt.in_string = mt.all_in_string = llm_json_in_string(s);
    mt.string_room = UINT32_MAX;
    mt.plain_fits = NULL;
    mt.plain_bits = NULL;
    mt.fits = json_fits;
    mt.ctx = s;
    return llm_json_mask_with(v, &mt, logits, n_logits);
}

int llm_json_accept(const llm_json_vocab *v, llm_json_state *s, int32_t id)
{
    size_t k;
    const char *p = llm_json_token_bytes(v, id, &k);
    return p == NULL ? -1 : llm_json_feed(s, p, k);
}
