/* The <think> splitter (llm_reasoning.h): a byte-level state machine that holds at most one tag. What a
 * feed gives out is gathered per kind, so that a piece becomes one reasoning and one content run at most. */
#include "llm_reasoning.h"

#include <string.h>


static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Whether the n held bytes and then c begin tag. */
static int matches(const char *tag, const char *held, size_t n, char c)
{
    return strlen(tag) > n && memcmp(held, tag, n) == 0 && tag[n] == c;
}

typedef struct {
    llm_think_emit emit;
    void          *user;
    int            kind;      /* of what buf holds */
    char           buf[1024];
    size_t         n;
} gather;

static int flush(gather *g)
{
    int rc = g->n > 0 ? g->emit(g->user, g->kind, g->buf, g->n) : 0;
    g->n = 0;
    return rc;
}

static int put(gather *g, int kind, const char *s, size_t n)
{
    int rc = 0;
    if (g->n > 0 && g->kind != kind && (rc = flush(g)) != 0) return rc;
    g->kind = kind;
    while (n > 0) {
        size_t k = sizeof g->buf - g->n < n ? sizeof g->buf - g->n : n;
        memcpy(g->buf + g->n, s, k);
        g->n += k, s += k, n -= k;
        if (g->n == sizeof g->buf && (rc = flush(g)) != 0) return rc;
    }
    return 0;
}

int llm_think_feed(llm_think *t, const char *s, size_t len, llm_think_emit emit, void *user)
{
    gather g = { emit, user, 0, { 0 }, 0 };
    const char *open = t->open ? t->open : "<think>", *close = t->close ? t->close : "</think>";
    size_t n_open = strlen(open), n_close = strlen(close);
    int rc = 0;
    for (size_t i = 0; i < len && rc == 0; i++) {
        char c = s[i];
        switch (t->state) {
        case LLM_THINK_START: /* "<think>" from the first byte (lead_ws: the first other than whitespace), or content */
            if (t->lead_ws && t->n_held == 0 && is_ws(c)) break;
            if (!t->opened && n_open > t->n_held && c == open[t->n_held] && memcmp(t->held, open, t->n_held) == 0) {
                t->held[t->n_held++] = c;
                if (t->n_held == n_open) { t->n_held = 0; t->state = LLM_THINK_LEAD; }
                break;
            }
            /* the content's header or a preamble's, dropped; a newline after an earlier preamble's text */
            const char *hdr = t->direct && matches(t->direct, t->held, t->n_held, c)       ? t->direct
                              : t->preamble && matches(t->preamble, t->held, t->n_held, c) ? t->preamble
                                                                                           : NULL;
            if (hdr != NULL) {
                t->held[t->n_held++] = c;
                if (t->n_held == strlen(hdr)) {
                    t->n_held = 0;
                    t->state = hdr == t->direct ? LLM_THINK_OUT : LLM_THINK_PRE;
                    if (t->pre_text) rc = put(&g, 0, "\n", 1);
                    t->pre_text = hdr == t->preamble;
                }
                break;
            }
            t->state = LLM_THINK_OUT;
            rc = put(&g, 0, t->held, t->n_held);
            t->n_held = 0;
            if (rc == 0) rc = put(&g, 0, &c, 1);
            break;
        case LLM_THINK_LEAD: /* the whitespace after <think> */
            if (is_ws(c)) break;
            t->state = LLM_THINK_IN;
            /* fall through */
        case LLM_THINK_IN:
        case LLM_THINK_PRE: { /* reasoning, or a preamble's content, up to the close tag */
            int kind = t->state == LLM_THINK_IN;
            if (t->n_held > 0 && c != close[t->n_held]) { /* not the tag after all: its bytes were text */
                rc = put(&g, kind, t->held, t->n_held);
                t->n_held = 0;
            }
            if (c == close[t->n_held]) {
                t->held[t->n_held++] = c;
                if (t->n_held == n_close) { t->n_held = 0; t->state = LLM_THINK_AFTER; }
            } else if (rc == 0) {
                rc = put(&g, kind, &c, 1);
            }
            break;
        }
        case LLM_THINK_AFTER: /* the whitespace after </think> (or the content's header: harmony's) */
            if (t->after && matches(t->after, t->held, t->n_held, c)) {
                t->held[t->n_held++] = c;
                if (t->n_held == strlen(t->after)) { /* then the final channel's header, or another message */
                    t->n_held = 0;
                    t->state = LLM_THINK_START;
                    t->opened = 1;
                }
                break;
            }
            if (t->n_held > 0) { /* not the header after all: content */
                rc = put(&g, 0, t->held, t->n_held);
                t->n_held = 0;
                t->state = LLM_THINK_OUT;
                if (rc == 0) rc = put(&g, 0, &c, 1);
                break;
            }
            if (is_ws(c)) break;
            t->state = LLM_THINK_OUT;
            rc = put(&g, 0, &c, 1);
            break;
        default: /* content */
            rc = put(&g, 0, &c, 1);
        }
    }
    return rc != 0 ? rc : flush(&g);
}

int llm_think_end(llm_think *t, llm_think_emit emit, void *user)
{
    int rc = 0;
    if (t->n_held > 0) /* (held at the start, not <think>: the content's header or plain text) */
        rc = emit(user, t->state == LLM_THINK_IN, t->held, t->n_held);
    t->n_held = 0;
    return rc;
}
