/* SentencePiece Unigram ("t5") vocabularies for the GGUF files gen-model writes (XLM-RoBERTa shapes):
 * XLM-RoBERTa's special tokens around the pieces of a llama2.c tokenizer file, scores made into log
 * probabilities, and a precompiled charsmap holding a few of NFKC's rules (fullwidth forms, compatibility
 * ligatures and digits, combining accents composed, odd spaces made spaces, a zero-width space dropped)
 * compiled into a darts-clone double array, as SentencePiece stores its normaliser. Enough to check the
 * tokenizer's every step against llama.cpp on the same file; a real model's vocabulary and charsmap come
 * from its own file. And a loaded Unigram tokenizer (a Hugging Face XLM-RoBERTa directory's) as GGUF "t5"
 * metadata. */
#include "model_write.h"
#include "tokenizer_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TT_NORMAL = TOK_NORMAL, TT_UNKNOWN = TOK_UNKNOWN, TT_CONTROL = TOK_CONTROL };

/* ---- darts-clone double array ---- */

typedef struct {
    int     child, sibling;
    uint8_t label;
    int64_t value; /* offset of the replacement string, -1 none */
} trie_node;

typedef struct {
    trie_node *n;
    int        count, cap;
} trie;

static int trie_new_node(trie *t, uint8_t label)
{
    if (t->count == t->cap) {
        int nc = t->cap ? t->cap * 2 : 256;
        trie_node *p = realloc(t->n, (size_t)nc * sizeof(*p));
        if (p == NULL)
            return -1;
        t->n = p;
        t->cap = nc;
    }
    t->n[t->count] = (trie_node){ -1, -1, label, -1 };
    return t->count++;
}

static int trie_insert(trie *t, const uint8_t *key, size_t len, int64_t value)
{
    int node = 0;
    for (size_t i = 0; i < len; i++) {
        int c = t->n[node].child;
        while (c >= 0 && t->n[c].label != key[i])
            c = t->n[c].sibling;
        if (c < 0) {
            if ((c = trie_new_node(t, key[i])) < 0)
                return -1;
            t->n[c].sibling = t->n[node].child;
            t->n[node].child = c;
        }
        node = c;
    }
    t->n[node].value = value;
    return 0;
}

typedef struct {
    uint32_t *unit;
    uint8_t  *used, *pos_used;
    size_t    size;
} darts;

static int darts_grow(darts *d, size_t need)
{
    if (need <= d->size)
        return 0;
    size_t ns = d->size ? d->size : 1024;
    while (ns < need)
        ns *= 2;
    uint32_t *u = realloc(d->unit, ns * sizeof(*u));
    if (u != NULL)
        d->unit = u;
    uint8_t *a = realloc(d->used, ns), *b = a ? realloc(d->pos_used, ns) : NULL;
    if (a != NULL)
        d->used = a;
    if (b != NULL)
        d->pos_used = b;
    if (u == NULL || a == NULL || b == NULL)
        return -1;
    memset(d->unit + d->size, 0, (ns - d->size) * sizeof(*u));
    memset(d->used + d->size, 0, ns - d->size);
    memset(d->pos_used + d->size, 0, ns - d->size);
    d->size = ns;
    return 0;
}

/* Place the trie's nodes breadth first: a node's children (and its value, as the label-0 child) go to the
 * slots pos ^ label of a block position pos no other node uses; the node's unit keeps pos ^ its own index. */
static int darts_build(const trie *t, darts *d, size_t *n_units)
{
    int *queue = malloc((size_t)t->count * 2 * sizeof(int)), qh = 0, qt = 0;
    if (queue == NULL || darts_grow(d, 256))
        goto fail;
    d->used[0] = 1;
    queue[qt++] = 0; /* node, unit index */
    queue[qt++] = 0;
    size_t top = 1;
    while (qh < qt) {
        int node = queue[qh++];
        size_t idx = (size_t)queue[qh++];
        uint8_t labels[257];
        int nl = 0;
        if (t->n[node].value >= 0)
            labels[nl++] = 0;
        for (int c = t->n[node].child; c >= 0; c = t->n[c].sibling)
            labels[nl++] = t->n[c].label;
        if (nl == 0)
            continue;
        size_t pos = 1;
        for (;; pos++) {
            if (darts_grow(d, (pos | 255) + 1))
                goto fail;
            if (d->pos_used[pos])
                continue;
            int ok = 1;
            for (int i = 0; i < nl && ok; i++)
                ok = !d->used[pos ^ labels[i]];
            if (ok)
                break;
        }
        if ((idx ^ pos) >= (1u << 21))
            goto fail; /* beyond the base field (no extension bit written): never at these sizes */
        d->pos_used[pos] = 1;
        d->unit[idx] |= (uint32_t)(idx ^ pos) << 10;
        if (t->n[node].value >= 0) {
            d->unit[idx] |= 1u << 8;
            d->unit[pos] = (uint32_t)t->n[node].value | (1u << 31);
            d->used[pos] = 1;
        }
        for (int c = t->n[node].child; c >= 0; c = t->n[c].sibling) {
            size_t slot = pos ^ t->n[c].label;
            d->unit[slot] = t->n[c].label;
            d->used[slot] = 1;
            queue[qt++] = c;
            queue[qt++] = (int)slot;
        }
        if ((pos | 255) + 1 > top)
            top = (pos | 255) + 1;
    }
    free(queue);
    *n_units = top;
    return 0;
fail:
    free(queue);
    return -1;
}

/* ---- the rules ---- */

static size_t utf8_put(uint32_t cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    o[0] = (char)(0xe0 | cp >> 12);
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
}

typedef struct {
    const char *from, *to;
} rule;

static const rule fixed_rules[] = {
    { "\xe3\x80\x80", " " },                 /* ideographic space */
    { "\xc2\xa0", " " },                     /* no-break space */
    { "\xe2\x80\x82", " " },                 /* en space */
    { "\t", " " }, { "\n", " " }, { "\r", " " },
    { "\xe2\x80\x8b", "" },                  /* zero-width space: dropped */
    { "\xef\xac\x81", "fi" }, { "\xef\xac\x82", "fl" },
    { "\xe2\x80\xa6", "..." },               /* horizontal ellipsis */
    { "e\xcc\x81", "\xc3\xa9" }, { "a\xcc\x80", "\xc3\xa0" }, { "u\xcc\x88", "\xc3\xbc" }, { "n\xcc\x83", "\xc3\xb1" },
    { "\xe2\x84\xab", "\xc3\x85" },          /* angstrom sign */
    { "\xc2\xbd", "1\xe2\x81\x84" "2" },     /* one half: 1 fraction-slash 2 */
    { "\xef\xbd\xb6", "\xe3\x82\xab" },      /* halfwidth katakana ka */
    { "\xe2\x84\xa2", "TM" },
};

uint8_t *llm_ugm_charsmap(const char *const (*rules)[2], int n, size_t *len)
{
    trie t = { 0 };
    darts d = { 0 };
    uint8_t *blob = NULL;
    size_t rl = 0, nu;
    for (int i = 0; i < n; i++)
        rl += strlen(rules[i][1]) + 1;
    char *repl = malloc(rl + 1);
    if (repl == NULL || trie_new_node(&t, 0) < 0)
        goto out;
    rl = 0;
    for (int i = 0; i < n; i++) {
        size_t vl = strlen(rules[i][1]);
        if (trie_insert(&t, (const uint8_t *)rules[i][0], strlen(rules[i][0]), (int64_t)rl))
            goto out;
        memcpy(repl + rl, rules[i][1], vl + 1);
        rl += vl + 1;
    }
    if (darts_build(&t, &d, &nu))
        goto out;
    *len = 4 + 4 * nu + rl;
    if ((blob = malloc(*len)) == NULL)
        goto out;
    uint32_t tb = (uint32_t)(4 * nu);
    for (int b = 0; b < 4; b++)
        blob[b] = (uint8_t)(tb >> (8 * b));
    for (size_t i = 0; i < nu; i++)
        for (int b = 0; b < 4; b++)
            blob[4 + 4 * i + (size_t)b] = (uint8_t)(d.unit[i] >> (8 * b));
    memcpy(blob + 4 + 4 * nu, repl, rl);
out:
    free(repl);
    free(t.n);
    free(d.unit);
    free(d.used);
    free(d.pos_used);
    return blob;
}

/* gen-model's rules: the fixed ones, fullwidth ASCII and circled digits one to nine. */
static uint8_t *charsmap_build(size_t *len)
{
    enum { N_FIXED = sizeof(fixed_rules) / sizeof(fixed_rules[0]), N_FULL = 0xff5e - 0xff01 + 1, N_CIRCLED = 9 };
    static char text[N_FULL + N_CIRCLED][2][4];
    const char *rules[N_FIXED + N_FULL + N_CIRCLED][2];
    int n = 0;
    for (int i = 0; i < N_FIXED; i++) {
        rules[n][0] = fixed_rules[i].from;
        rules[n++][1] = fixed_rules[i].to;
    }
    for (int i = 0; i < N_FULL + N_CIRCLED; i++) {
        uint32_t cp = i < N_FULL ? 0xff01 + (uint32_t)i : 0x2460 + (uint32_t)(i - N_FULL);
        text[i][0][utf8_put(cp, text[i][0])] = 0;
        text[i][1][0] = (char)(i < N_FULL ? 0x21 + i : '1' + (i - N_FULL));
        text[i][1][1] = 0;
        rules[n][0] = text[i][0];
        rules[n++][1] = text[i][1];
    }
    return llm_ugm_charsmap((const char *const (*)[2])rules, n, len);
}

/* ---- the vocabulary ---- */

typedef struct {
    char  **tok;
    float  *score;
    int32_t *type;
    int     n, cap;
} vocab;

/* Add s unless one of the first `check` pieces spells it (the made-up padding pieces differ from each other). */
static int vocab_add_n(vocab *v, const char *s, float score, int type, int check)
{
    for (int i = 0; i < check && i < v->n; i++)
        if (strcmp(v->tok[i], s) == 0)
            return 0;
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 1024;
        char **t = realloc(v->tok, (size_t)nc * sizeof(*t));
        float *sc = t ? realloc(v->score, (size_t)nc * sizeof(*sc)) : NULL;
        int32_t *ty = sc ? realloc(v->type, (size_t)nc * sizeof(*ty)) : NULL;
        if (t)
            v->tok = t;
        if (sc)
            v->score = sc;
        if (ty)
            v->type = ty;
        if (ty == NULL)
            return -1;
        v->cap = nc;
    }
    if ((v->tok[v->n] = strdup(s)) == NULL)
        return -1;
    v->score[v->n] = score;
    v->type[v->n++] = type;
    return 0;
}

static int vocab_add(vocab *v, const char *s, float score, int type)
{
    return vocab_add_n(v, s, score, type, v->n);
}

/* A deterministic fraction in [0, 1) per id: scores without ties, so every best path is unique. */
static float jitter(int id)
{
    return (float)(((uint32_t)id * 2654435761u) >> 22) / 1024.0f;
}

int llm_gguf_w_ugm_from_llama2c(gguf_writer *w, const char *tok_path, int pad_to, int *n_vocab, llm_err *err)
{
    FILE *f = fopen(tok_path, "rb");
    if (f == NULL) {
        llm_seterr(err, "%s: cannot open tokenizer: %s", tok_path, strerror(errno));
        return -1;
    }
    vocab v = { 0 };
    uint8_t *cm = NULL;
    int rc = -1, n_file = 0;
    int32_t maxlen, len;
    float score;
    char buf[4097], piece[3 * 4097 + 1];
    if (fread(&maxlen, 4, 1, f) != 1 || maxlen <= 0 || maxlen > 4096) {
        llm_seterr(err, "%s: not a llama2.c tokenizer file", tok_path);
        goto out;
    }
    /* XLM-RoBERTa's ids: <s> 0, <pad> 1, </s> 2, <unk> 3 (fairseq's order), <mask> last */
    if (vocab_add(&v, "<s>", 0, TT_CONTROL) || vocab_add(&v, "<pad>", 0, TT_CONTROL) ||
        vocab_add(&v, "</s>", 0, TT_CONTROL) || vocab_add(&v, "<unk>", 0, TT_UNKNOWN))
        goto oom;
    for (; fread(&score, 4, 1, f) == 1; n_file++) {
        if (fread(&len, 4, 1, f) != 1 || len < 0 || len > maxlen || fread(buf, 1, (size_t)len, f) != (size_t)len) {
            llm_seterr(err, "%s: truncated tokenizer entry %d", tok_path, n_file);
            goto out;
        }
        /* <unk>, <s>, </s> and the <0xNN> byte pieces (a Unigram model without byte fallback has none) */
        if (n_file < 3 || len == 0 || (len == 6 && memcmp(buf, "<0x", 3) == 0))
            continue;
        size_t o = 0;
        for (int i = 0; i < len; i++) {
            if (buf[i] == ' ') {
                memcpy(piece + o, "\xe2\x96\x81", 3);
                o += 3;
            } else {
                piece[o++] = buf[i];
            }
        }
        piece[o] = 0;
        if (vocab_add(&v, piece, -3.0f + 0.02f * score - 0.01f * jitter(v.n), TT_NORMAL))
            goto oom;
    }
    /* pieces beyond ASCII, for the charsmap's outputs and a few scripts (the rest are unknown) */
    static const char *const extra[] = { "\xc3\xa9", "\xe2\x96\x81\xc3\xa9", "\xc3\xa0", "\xc3\xbc", "\xc3\xb1",
                                         "\xc3\x85", "\xe3\x82\xab", "\xe2\x96\x81\xe3\x82\xab", "\xe2\x81\x84",
                                         "\xe6\x97\xa5", "\xe6\x9c\xac", "\xe6\x97\xa5\xe6\x9c\xac",
                                         "\xe2\x96\x81\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "\xd0\xbf\xd1\x80",
                                         "\xe2\x96\x81", "caf\xc3\xa9", "\xe2\x96\x81na\xc3\xaf" };
    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
        if (vocab_add(&v, extra[i], -7.5f - jitter(v.n), TT_NORMAL))
            goto oom;
    /* a piece whose best use depends on the unknown token's score: "Ωhe" is [Ωh][e] (-10 - 8) against
     * [<unk>][he] (-20 - 3) only because the unknown costs the lowest score minus 10 */
    if (vocab_add(&v, "\xce\xa9h", -10.0f, TT_NORMAL))
        goto oom;
    for (int c = '!'; c <= '~'; c++) { /* every ASCII character on its own */
        char one[2] = { (char)c, 0 };
        if (vocab_add(&v, one, -9.0f - jitter(v.n), TT_NORMAL))
            goto oom;
    }
    /* padded to the model's vocabulary (bge-m3's 250,002) with rare made-up pieces: '▁' + letters */
    int base = v.n;
    for (uint64_t k = 26 * 26; v.n < pad_to - 1 && pad_to <= (1 << 20); k++) {
        char cand[32] = "\xe2\x96\x81", letters[16];
        int nl = 0;
        for (uint64_t x = k; x > 0 && nl < 15; x = (x - 1) / 26)
            letters[nl++] = (char)('a' + (x - 1) % 26);
        for (int i = 0; i < nl; i++)
            cand[3 + i] = letters[nl - 1 - i];
        cand[3 + nl] = 0;
        if (vocab_add_n(&v, cand, -12.0f - jitter(v.n), TT_NORMAL, base))
            goto oom;
    }
    if (vocab_add(&v, "<mask>", 0, TT_CONTROL))
        goto oom;
    size_t cm_len;
    if ((cm = charsmap_build(&cm_len)) == NULL)
        goto oom;
    gguf_w_str(w, "tokenizer.ggml.model", "t5");
    gguf_w_str(w, "tokenizer.ggml.pre", "default");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, NULL, (uint64_t)v.n);
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, v.score, (uint64_t)v.n);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v.type, (uint64_t)v.n);
    gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", 1);
    gguf_w_u32(w, "tokenizer.ggml.token_type_count", 1); /* RoBERTa: one segment */
    gguf_w_bool(w, "tokenizer.ggml.remove_extra_whitespaces", 1);
    gguf_w_arr(w, "tokenizer.ggml.precompiled_charsmap", GGUF_TYPE_UINT8, cm, (uint64_t)cm_len);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 0);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 3);
    gguf_w_u32(w, "tokenizer.ggml.seperator_token_id", 2);
    gguf_w_u32(w, "tokenizer.ggml.padding_token_id", 1);
    gguf_w_u32(w, "tokenizer.ggml.cls_token_id", 0);
    gguf_w_u32(w, "tokenizer.ggml.mask_token_id", (uint32_t)(v.n - 1));
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1);
    gguf_w_bool(w, "tokenizer.ggml.add_eos_token", 1);
    if (n_vocab != NULL)
        *n_vocab = v.n;
    rc = 0;
    goto out;
oom:
    llm_seterr(err, "%s: out of memory", tok_path);
out:
    fclose(f);
    for (int i = 0; i < v.n; i++)
        free(v.tok[i]);
    free(v.tok);
    free(v.score);
    free(v.type);
    free(cm);
    return rc;
}

int llm_gguf_w_ugm_from_tok(gguf_writer *w, const llm_tokenizer *t, int n_types, llm_err *err)
{
    if (t->kind != LLM_TOK_UGM) {
        llm_seterr(err, "not a Unigram tokenizer");
        return -1;
    }
    gguf_w_str(w, "tokenizer.ggml.model", "t5");
    gguf_w_str(w, "tokenizer.ggml.pre", "default");
    if (llm_gguf_w_vocab(w, t, err) != 0)
        return -1;
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, t->score, (uint64_t)t->n_vocab);
    gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", t->add_space_prefix != 0);
    gguf_w_u32(w, "tokenizer.ggml.token_type_count", (uint32_t)n_types);
    gguf_w_bool(w, "tokenizer.ggml.remove_extra_whitespaces", t->ugm_merge_spaces != 0);
    if (t->ugm_charsmap_len > 0)
        gguf_w_arr(w, "tokenizer.ggml.precompiled_charsmap", GGUF_TYPE_UINT8, t->ugm_charsmap,
                   (uint64_t)t->ugm_charsmap_len);
    /* as llama.cpp's converter writes XLM-R: <s> is also CLS, </s> also the separator */
    const int ids[6] = { t->bos, t->eos, t->unk, t->eos, t->bos, llm_tok_find(t, "<pad>") };
    static const char *const keys[6] = { "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                         "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
                                         "tokenizer.ggml.cls_token_id", "tokenizer.ggml.padding_token_id" };
    for (int i = 0; i < 6; i++)
        if (ids[i] >= 0)
            gguf_w_u32(w, keys[i], (uint32_t)ids[i]);
    int mask = llm_tok_find(t, "<mask>");
    if (mask >= 0)
        gguf_w_u32(w, "tokenizer.ggml.mask_token_id", (uint32_t)mask);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", t->add_bos != 0);
    gguf_w_bool(w, "tokenizer.ggml.add_eos_token", t->add_eos != 0);
    return 0;
}
