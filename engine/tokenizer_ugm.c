/* Unigram (SentencePiece's "unigram" models: XLM-RoBERTa and what is trained from it, bge-m3,
 * multilingual-e5, bge-reranker-v2-m3; GGUF tokenizer.ggml.model "t5"), tokenized as llama.cpp's UGM
 * vocabulary tokenizes, so that the ids equal its ids on the same file:
 *   - normalisation, one input prefix at a time: the longest prefix found in the precompiled charsmap
 *     (SentencePiece's normalisation rules, NFKC and the like, compiled into a darts-clone double array
 *     whose leaves index NUL-terminated replacement strings) is replaced by its string; otherwise one
 *     UTF-8 character is kept, an invalid byte becomes U+FFFD. Then whitespace: each space is written
 *     '▁', one '▁' opens the text (add_space_prefix), and with remove_extra_whitespaces every run of
 *     spaces becomes a single '▁' in front of the next word, none at the end.
 *   - segmentation: Viterbi over the normalised bytes, the path with the highest sum of piece scores
 *     (double precision, as SentencePiece; user-defined pieces score 0); a character that no piece covers
 *     on its own is the unknown token, scored at the lowest normal score minus 10, and a run of unknowns
 *     becomes one unknown token.
 * User-defined tokens never reach this code: llm_tok_encode splits them out first, as llama.cpp does, so
 * the normaliser's pass-through of them is not needed. */
#include "tokenizer_priv.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

static uint32_t unit(const llm_tokenizer *t, size_t i)
{
    const uint8_t *p = t->ugm_units + 4 * i;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* darts-clone's unit fields */
static uint32_t unit_base(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xffu); }
static int      unit_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }

int tok_ugm_set_charsmap(llm_tokenizer *t, const uint8_t *blob, size_t n, llm_err *err)
{
    free(t->ugm_charsmap);
    t->ugm_charsmap = NULL;
    t->ugm_charsmap_len = t->ugm_n_units = t->ugm_repl_len = 0;
    if (n == 0)
        return 0;
    uint32_t tsize = n >= 4 ? (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 |
                                  (uint32_t)blob[3] << 24
                            : 0;
    if (n < 4 || tsize % 4 != 0 || tsize > n - 4) {
        llm_seterr(err, "tokenizer: precompiled charsmap of %zu bytes is malformed (%s)", n,
                   n < 4 ? "no trie size" : tsize % 4 ? "a trie size not a multiple of 4" : "its trie does not fit");
        return -1;
    }
    if ((t->ugm_charsmap = malloc(n)) == NULL) {
        llm_seterr(err, "tokenizer: out of memory");
        return -1;
    }
    memcpy(t->ugm_charsmap, blob, n);
    t->ugm_charsmap_len = n;
    t->ugm_units = t->ugm_charsmap + 4;
    t->ugm_n_units = tsize / 4;
    t->ugm_repl = (const char *)t->ugm_charsmap + 4 + tsize;
    t->ugm_repl_len = n - 4 - tsize;
    return 0;
}

void tok_ugm_prepare(llm_tokenizer *t)
{
    float lo = FLT_MAX;
    for (int id = 0; id < t->n_vocab; id++)
        if (t->type[id] == TOK_NORMAL && t->score[id] < lo)
            lo = t->score[id];
    t->ugm_unk_score = lo - 10.0f;
}

/* The longest input prefix at s[0..n) that the charsmap rewrites: its length (0: none) and replacement. */
static size_t charsmap_match(const llm_tokenizer *t, const unsigned char *s, size_t n, const char **repl,
                             size_t *repl_len)
{
    size_t nu = t->ugm_n_units, best = 0;
    if (nu == 0)
        return 0;
    size_t node = unit_base(unit(t, 0));
    for (size_t i = 0; i < n && s[i] != 0; i++) {
        node ^= s[i];
        if (node >= nu || unit_label(unit(t, node)) != s[i])
            break;
        int leaf = unit_leaf(unit(t, node));
        node ^= unit_base(unit(t, node));
        if (!leaf)
            continue;
        if (node >= nu)
            break;
        size_t off = unit_value(unit(t, node));
        const char *end = off < t->ugm_repl_len ? memchr(t->ugm_repl + off, 0, t->ugm_repl_len - off) : NULL;
        if (end == NULL) /* a leaf outside the strings (a hostile file): not a rule */
            continue;
        best = i + 1;
        *repl = t->ugm_repl + off;
        *repl_len = (size_t)(end - *repl);
    }
    return best;
}

/* One UTF-8 character's length, with llama.cpp's checks (a lead byte, continuation bytes with the high bit
 * set, inside the text); 0 if invalid. */
static size_t utf8_char(const unsigned char *s, size_t n)
{
    if (!(s[0] & 0x80))
        return 1;
    if (!(s[0] & 0x40))
        return 0;
    size_t k = !(s[0] & 0x20) ? 2 : !(s[0] & 0x10) ? 3 : !(s[0] & 0x08) ? 4 : 0;
    if (k == 0 || k > n)
        return 0;
    for (size_t i = 1; i < k; i++)
        if (!(s[i] & 0x80))
            return 0;
    return k;
}

typedef struct {
    char  *p;
    size_t n, cap;
} buf;

static int put(buf *b, const char *s, size_t n)
{
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n)
            nc *= 2;
        char *p = realloc(b->p, nc);
        if (p == NULL)
            return -1;
        b->p = p;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

static const char SPACE[] = "\xe2\x96\x81"; /* '▁' */

static int normalize(const llm_tokenizer *t, const char *s, size_t len, buf *out)
{
    int merge = t->ugm_merge_spaces, prepended = 0, in_word = 0, rc = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len && rc == 0;) {
        const char *r;
        size_t rn, used = charsmap_match(t, u + i, len - i, &r, &rn);
        if (used == 0) {
            used = rn = utf8_char(u + i, len - i);
            r = s + i;
            if (used == 0) {
                used = 1;
                r = "\xef\xbf\xbd";
                rn = 3;
            }
        }
        for (size_t k = 0; k < rn && rc == 0; k++) {
            if (r[k] != ' ') {
                if (!in_word) {
                    in_word = 1;
                    if ((t->add_space_prefix && !prepended) || merge) {
                        rc |= put(out, SPACE, 3);
                        prepended = 1;
                    }
                }
                rc |= put(out, r + k, 1);
            } else {
                in_word = 0;
                if (!merge)
                    rc |= put(out, SPACE, 3);
            }
        }
        i += used;
    }
    return rc;
}

typedef struct {
    int32_t id;
    size_t  from;
    double  score;
} best_path;

int tok_ugm_encode(const llm_tokenizer *t, const char *s, size_t len, tok_vec *out)
{
    buf nb = { 0 };
    if (normalize(t, s, len, &nb)) {
        free(nb.p);
        return -1;
    }
    size_t n = nb.n;
    const char *w = nb.p;
    if (n == 0) {
        free(nb.p);
        return 0;
    }
    best_path *bp = malloc((n + 1) * sizeof(*bp));
    if (bp == NULL) {
        free(nb.p);
        return -1;
    }
    for (size_t i = 0; i <= n; i++)
        bp[i] = (best_path){ t->unk, 0, -FLT_MAX };
    bp[0].score = 0;
    static const unsigned char lead_len[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    for (size_t i = 0; i < n;) {
        size_t ch = lead_len[(unsigned char)w[i] >> 4];
        if (ch > n - i)
            ch = n - i;
        int whole = 0;
        double base = bp[i].score;
        size_t top = n - i < t->max_text_len ? n - i : t->max_text_len;
        uint64_t h = TOK_HASH_INIT;
        for (size_t k = 1; k <= top; k++) {
            h = tok_hash_step(h, (unsigned char)w[i + k - 1]);
            int32_t id = tok_map_get_h(&t->by_text, w + i, k, tok_hash_end(h));
            if (id < 0 || (t->type[id] != TOK_NORMAL && t->type[id] != TOK_USER && t->type[id] != TOK_UNUSED))
                continue;
            whole |= k == ch;
            double sc = base + (t->type[id] == TOK_USER ? 0.0 : (double)t->score[id]);
            if (sc > bp[i + k].score)
                bp[i + k] = (best_path){ id, i, sc };
        }
        if (!whole) {
            double sc = base + (double)t->ugm_unk_score;
            if (sc > bp[i + ch].score)
                bp[i + ch] = (best_path){ t->unk, i, sc };
        }
        i += ch;
    }
    /* back from the end; consecutive unknowns become one */
    size_t first = out->n;
    int rc = 0, prev_unk = 0;
    for (size_t at = n;;) {
        int unk = bp[at].id == t->unk;
        if (!(prev_unk && unk))
            rc |= tok_vec_push(out, bp[at].id);
        if (bp[at].from == 0)
            break;
        prev_unk = unk;
        at = bp[at].from;
    }
    for (size_t a = first, b = out->n; rc == 0 && a + 1 < b; a++, b--) {
        int32_t x = out->v[a];
        out->v[a] = out->v[b - 1];
        out->v[b - 1] = x;
    }
    free(bp);
    free(nb.p);
    return rc;
}
