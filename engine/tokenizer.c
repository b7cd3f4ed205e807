/* Tokenizer core: vocabulary storage and maps, accessors, the format sniffing
 * loader and the encode entry point (special-token splitting, BOS). */
#include "tokenizer_priv.h"

#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- growable arenas and vectors ---- */

static int arena_put(char **arena, size_t *used, size_t *cap, const char *s, size_t n, uint32_t *off)
{
    if (*used + n > UINT32_MAX)
        return -1;
    if (*used + n > *cap) {
        size_t nc = *cap ? *cap : 4096;
        while (nc < *used + n)
            nc *= 2;
        char *p = realloc(*arena, nc);
        if (p == NULL)
            return -1;
        *arena = p;
        *cap = nc;
    }
    if (n)
        memcpy(*arena + *used, s, n);
    *off = (uint32_t)*used;
    *used += n;
    return 0;
}

int tok_vec_push(tok_vec *v, int32_t id)
{
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 64;
        int32_t *p = realloc(v->v, nc * sizeof(*p));
        if (p == NULL)
            return -1;
        v->v = p;
        v->cap = nc;
    }
    v->v[v->n++] = id;
    return 0;
}

/* ---- construction ---- */

llm_tokenizer *tok_new(llm_tok_kind kind, int n_vocab)
{
    if (n_vocab <= 0 || n_vocab > (1 << 24))
        return NULL;
    llm_tokenizer *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->kind = kind;
    t->n_vocab = n_vocab;
    t->text_off = calloc((size_t)n_vocab, sizeof(uint32_t));
    t->text_len = calloc((size_t)n_vocab, sizeof(uint32_t));
    t->raw_off = calloc((size_t)n_vocab, sizeof(uint32_t));
    t->raw_len = calloc((size_t)n_vocab, sizeof(uint32_t));
    t->score = calloc((size_t)n_vocab, sizeof(float));
    t->type = malloc((size_t)n_vocab);
    t->bos = t->eos = t->unk = -1;
    t->fim[0] = t->fim[1] = t->fim[2] = -1;
    t->fim_repo[0] = t->fim_repo[1] = -1;
    t->add_space_prefix = 1;
    t->wpm_lower = t->wpm_strip = 1;
    if (t->text_off == NULL || t->text_len == NULL || t->raw_off == NULL || t->raw_len == NULL || t->score == NULL ||
        t->type == NULL) {
        llm_tok_free(t);
        return NULL;
    }
    memset(t->type, TOK_UNUSED, (size_t)n_vocab);
    return t;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* "<0xNN>" -> NN, else -1. */
static int byte_token_value(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int h = hexval((unsigned char)s[3]), l = hexval((unsigned char)s[4]);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
}

int tok_set(llm_tokenizer *t, int id, const char *text, size_t len, float score, int type)
{
    if (id < 0 || id >= t->n_vocab || len > (1u << 20))
        return -1;
    if (arena_put(&t->text_arena, &t->text_used, &t->text_cap, text, len, &t->text_off[id]))
        return -1;
    t->text_len[id] = (uint32_t)len;
    t->score[id] = score;
    t->type[id] = (uint8_t)type;

    /* raw form: at most len bytes (every mapping shrinks or keeps size) */
    char small[256], *raw = len <= sizeof(small) ? small : malloc(len ? len : 1);
    if (raw == NULL)
        return -1;
    size_t n = 0;
    int bv;
    int spm = t->kind == LLM_TOK_SPM || t->kind == LLM_TOK_UGM; /* '▁' for a space, <0xNN> byte pieces */
    if (spm && (bv = byte_token_value(text, len)) >= 0 && type == TOK_BYTE) {
        raw[n++] = (char)bv;
    } else if (spm) {
        for (size_t i = 0; i < len; i++) {
            if (i + 2 < len && memcmp(text + i, "\xe2\x96\x81", 3) == 0) {
                raw[n++] = ' ';
                i += 2;
            } else {
                raw[n++] = text[i];
            }
        }
    } else if (t->kind == LLM_TOK_WPM) { /* a word-initial piece's '▁' is the space before its word */
        size_t skip = type != TOK_CONTROL && type != TOK_USER && len >= 3 && memcmp(text, "\xe2\x96\x81", 3) == 0;
        if (skip)
            raw[n++] = ' ';
        memcpy(raw + n, text + 3 * skip, len - 3 * skip);
        n += len - 3 * skip;
    } else if (type == TOK_CONTROL || type == TOK_USER) {
        memcpy(raw, text, len); /* added tokens are spelt as themselves */
        n = len;
    } else {
        for (size_t i = 0; i < len;) {
            const unsigned char *u = (const unsigned char *)text + i;
            int k = tok_utf8_len(u, len - i), byte = -1;
            if (k > 0) {
                uint32_t cp = k == 1 ? u[0]
                            : k == 2 ? (uint32_t)(u[0] & 0x1f) << 6 | (u[1] & 0x3f)
                            : k == 3 ? (uint32_t)(u[0] & 0x0f) << 12 | (uint32_t)(u[1] & 0x3f) << 6 | (u[2] & 0x3f)
                                     : (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3f) << 12 |
                                           (uint32_t)(u[2] & 0x3f) << 6 | (u[3] & 0x3f);
                byte = tok_cp_to_byte(cp);
            }
            if (byte >= 0) {
                raw[n++] = (char)byte;
                i += (size_t)k;
            } else { /* not a byte stand-in: keep the text as it is */
                size_t c = k > 0 ? (size_t)k : 1;
                memcpy(raw + n, text + i, c);
                n += c;
                i += c;
            }
        }
    }
    int rc = arena_put(&t->raw_arena, &t->raw_used, &t->raw_cap, raw, n, &t->raw_off[id]);
    t->raw_len[id] = (uint32_t)n;
    if (raw != small)
        free(raw);
    return rc;
}

/* ---- maps ---- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = TOK_HASH_INIT;
    for (size_t i = 0; i < n; i++)
        h = tok_hash_step(h, (unsigned char)s[i]);
    return h ^ (h >> 29);
}

static int map_build(tok_strmap *m, const llm_tokenizer *t, int raw, int (*want)(const llm_tokenizer *, int))
{
    size_t cap = 16;
    while (cap < (size_t)t->n_vocab * 2)
        cap *= 2;
    m->slots = malloc(cap * sizeof(int32_t));
    if (m->slots == NULL)
        return -1;
    memset(m->slots, 0xff, cap * sizeof(int32_t));
    m->mask = (uint32_t)(cap - 1);
    m->arena = raw ? t->raw_arena : t->text_arena;
    m->off = raw ? t->raw_off : t->text_off;
    m->len = raw ? t->raw_len : t->text_len;
    for (int id = 0; id < t->n_vocab; id++) {
        if (!want(t, id))
            continue;
        const char *s = m->arena + m->off[id];
        size_t n = m->len[id];
        uint32_t h = (uint32_t)hash_bytes(s, n) & m->mask;
        for (;; h = (h + 1) & m->mask) {
            int32_t o = m->slots[h];
            if (o < 0) {
                m->slots[h] = id;
                break;
            }
            if (m->len[o] == n && memcmp(m->arena + m->off[o], s, n) == 0)
                break; /* duplicate spelling: the lowest id wins */
        }
    }
    return 0;
}

int32_t tok_map_get(const tok_strmap *m, const char *s, size_t len)
{
    return tok_map_get_h(m, s, len, hash_bytes(s, len));
}

int32_t tok_map_get_h(const tok_strmap *m, const char *s, size_t len, uint64_t hash)
{
    if (m->slots == NULL)
        return -1;
    for (uint32_t h = (uint32_t)hash & m->mask;; h = (h + 1) & m->mask) {
        int32_t o = m->slots[h];
        if (o < 0)
            return -1;
        if (m->len[o] == len && memcmp(m->arena + m->off[o], s, len) == 0)
            return o;
    }
}

static int want_text(const llm_tokenizer *t, int id)
{
    return t->type[id] != TOK_UNUSED || t->text_len[id] > 0;
}

static int want_raw(const llm_tokenizer *t, int id)
{
    return (t->type[id] == TOK_NORMAL || t->type[id] == TOK_USER) && t->raw_len[id] > 0;
}

static int cmp_special(const void *a, const void *b, void *ctx)
{
    const tok_special *x = a, *y = b;
    const llm_tokenizer *t = ctx;
    unsigned char fx = (unsigned char)t->raw_arena[t->raw_off[x->id]], fy = (unsigned char)t->raw_arena[t->raw_off[y->id]];
    if (fx != fy)
        return fx < fy ? -1 : 1;
    if (t->raw_len[x->id] != t->raw_len[y->id])
        return t->raw_len[x->id] > t->raw_len[y->id] ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int tok_finish(llm_tokenizer *t, llm_err *err)
{
    free(t->specials); /* tok_finish may run again after a loader changes types */
    t->specials = NULL;
    t->n_specials = 0;
    memset(t->spec_count, 0, sizeof(t->spec_count));
    free(t->by_text.slots);
    free(t->by_raw.slots);
    t->by_text.slots = t->by_raw.slots = NULL;
    if (map_build(&t->by_text, t, 0, want_text) || map_build(&t->by_raw, t, 1, want_raw)) {
        llm_seterr(err, "tokenizer: out of memory");
        return -1;
    }
    t->max_text_len = 0;
    for (int id = 0; id < t->n_vocab; id++)
        if (t->text_len[id] > t->max_text_len)
            t->max_text_len = t->text_len[id];
    for (int b = 0; b < 256; b++)
        t->byte_id[b] = -1;
    for (int id = t->n_vocab - 1; id >= 0; id--) {
        if (t->raw_len[id] != 1)
            continue;
        unsigned char b = (unsigned char)t->raw_arena[t->raw_off[id]];
        if (t->kind == LLM_TOK_SPM || t->kind == LLM_TOK_UGM ? t->type[id] == TOK_BYTE : t->type[id] == TOK_NORMAL)
            t->byte_id[b] = id;
    }
    int n = 0;
    for (int id = 0; id < t->n_vocab; id++)
        n += (t->type[id] == TOK_CONTROL || t->type[id] == TOK_USER || t->type[id] == TOK_UNKNOWN) && t->raw_len[id] > 0;
    t->specials = calloc((size_t)n + 1, sizeof(tok_special));
    if (t->specials == NULL) {
        llm_seterr(err, "tokenizer: out of memory");
        return -1;
    }
    for (int id = 0; id < t->n_vocab; id++)
        if ((t->type[id] == TOK_CONTROL || t->type[id] == TOK_USER || t->type[id] == TOK_UNKNOWN) && t->raw_len[id] > 0)
            t->specials[t->n_specials++] = (tok_special){ id, t->type[id] != TOK_USER };
    qsort_r(t->specials, (size_t)t->n_specials, sizeof(tok_special), cmp_special, t);
    for (int i = t->n_specials - 1; i >= 0; i--) {
        unsigned char f = (unsigned char)t->raw_arena[t->raw_off[t->specials[i].id]];
        t->spec_start[f] = i;
        t->spec_count[f]++;
    }
    if (t->kind == LLM_TOK_UGM)
        tok_ugm_prepare(t);
    return 0;
}

/* ---- merges ---- */

static uint64_t pair_key(int32_t a, int32_t b)
{
    return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

static uint32_t pair_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

int tok_set_merges_capacity(llm_tokenizer *t, size_t n)
{
    size_t cap = 16;
    while (cap < n * 2)
        cap *= 2;
    tok_mergemap *m = &t->merges;
    m->keys = malloc(cap * sizeof(uint64_t));
    m->rank = malloc(cap * sizeof(int32_t));
    m->merged = malloc(cap * sizeof(int32_t));
    if (m->keys == NULL || m->rank == NULL || m->merged == NULL)
        return -1;
    memset(m->keys, 0xff, cap * sizeof(uint64_t));
    m->mask = (uint32_t)(cap - 1);
    return 0;
}

int tok_add_merge(llm_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen, int rank)
{
    int32_t ia = tok_map_get(&t->by_text, a, alen), ib = tok_map_get(&t->by_text, b, blen);
    if (ia < 0 || ib < 0)
        return -1;
    char small[512], *cat = alen + blen <= sizeof(small) ? small : malloc(alen + blen);
    if (cat == NULL)
        return -1;
    memcpy(cat, a, alen);
    memcpy(cat + alen, b, blen);
    int32_t im = tok_map_get(&t->by_text, cat, alen + blen);
    if (cat != small)
        free(cat);
    if (im < 0)
        return -1;
    tok_mergemap *m = &t->merges;
    uint64_t k = pair_key(ia, ib);
    for (uint32_t h = pair_hash(k) & m->mask;; h = (h + 1) & m->mask) {
        if (m->keys[h] == UINT64_MAX) {
            m->keys[h] = k;
            m->rank[h] = rank;
            m->merged[h] = im;
            return 0;
        }
        if (m->keys[h] == k)
            return 0; /* repeated merge: the first (best) rank stays */
    }
}

/* Rank and result of merging a then b; -1 if no such merge. */
int tok_merge_get(const llm_tokenizer *t, int32_t a, int32_t b, int32_t *merged)
{
    const tok_mergemap *m = &t->merges;
    if (m->keys == NULL)
        return -1;
    uint64_t k = pair_key(a, b);
    for (uint32_t h = pair_hash(k) & m->mask;; h = (h + 1) & m->mask) {
        if (m->keys[h] == k) {
            *merged = m->merged[h];
            return m->rank[h];
        }
        if (m->keys[h] == UINT64_MAX)
            return -1;
    }
}

/* ---- public accessors ---- */

void llm_tok_free(llm_tokenizer *t)
{
    if (t == NULL)
        return;
    free(t->text_arena);
    free(t->raw_arena);
    free(t->text_off);
    free(t->text_len);
    free(t->raw_off);
    free(t->raw_len);
    free(t->score);
    free(t->type);
    free(t->by_text.slots);
    free(t->by_raw.slots);
    free(t->merges.keys);
    free(t->merges.rank);
    free(t->merges.merged);
    free(t->specials);
    free(t->chat_template);
    free(t->ugm_charsmap);
    if (t->re != NULL)
        pcre2_code_free(t->re);
    if (t->re_first != NULL)
        pcre2_code_free(t->re_first);
    free(t);
}

llm_tok_kind llm_tok_kind_of(const llm_tokenizer *t) { return t->kind; }
int llm_tok_vocab_size(const llm_tokenizer *t) { return t->n_vocab; }
int llm_tok_bos(const llm_tokenizer *t) { return t->bos; }
int llm_tok_eos(const llm_tokenizer *t) { return t->eos; }
int llm_tok_add_bos(const llm_tokenizer *t) { return t->add_bos; }
int llm_tok_add_eos(const llm_tokenizer *t) { return t->add_eos && t->eos >= 0; }

int llm_tok_fim_ids(const llm_tokenizer *t, int32_t ids[3])
{
    static const char *const names[][3] = { { "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>" },
                                            { "<fim_prefix>", "<fim_suffix>", "<fim_middle>" } };
    if (t->fim[0] >= 0 && t->fim[1] >= 0 && t->fim[2] >= 0) {
        memcpy(ids, t->fim, 3 * sizeof(int32_t));
        return 0;
    }
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        for (int i = 0; i < 3; i++)
            ids[i] = llm_tok_find(t, names[k][i]);
        if (ids[0] >= 0 && ids[1] >= 0 && ids[2] >= 0)
            return 0;
    }
    return -1;
}

int llm_tok_encode_fim(const llm_tokenizer *t, const char *prefix, size_t plen, const char *suffix, size_t slen,
                       int32_t **out)
{
    int32_t fim[3], *p = NULL, *s = NULL;
    *out = NULL;
    if (llm_tok_fim_ids(t, fim) != 0)
        return -1;
    int np = llm_tok_encode(t, prefix, plen, 0, &p), ns = np < 0 ? -1 : llm_tok_encode(t, suffix, slen, 0, &s);
    int bos = t->add_bos && t->bos >= 0, n = -1;
    int32_t *ids = ns >= 0 ? malloc(((size_t)np + (size_t)ns + 4) * sizeof(int32_t)) : NULL;
    if (ids != NULL) {
        n = 0;
        if (bos)
            ids[n++] = t->bos;
        ids[n++] = fim[0];
        memcpy(ids + n, p, (size_t)np * sizeof(int32_t));
        n += np;
        ids[n++] = fim[1];
        memcpy(ids + n, s, (size_t)ns * sizeof(int32_t));
        n += ns;
        ids[n++] = fim[2];
        *out = ids;
    }
    free(p);
    free(s);
    return n;
}
int llm_tok_fim_repo_ids(const llm_tokenizer *t, int32_t ids[2])
{
    static const char *const names[][2] = { { "<|repo_name|>", "<|file_sep|>" }, { "<repo_name>", "<file_sep>" } };
    if (t->fim_repo[0] >= 0 && t->fim_repo[1] >= 0) {
        memcpy(ids, t->fim_repo, 2 * sizeof(int32_t));
        return 0;
    }
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        ids[0] = llm_tok_find(t, names[k][0]);
        ids[1] = llm_tok_find(t, names[k][1]);
        if (ids[0] >= 0 && ids[1] >= 0)
            return 0;
    }
    return -1;
}

/* A growing list of ids: one id, or a text's. 0, or -1 out of memory. */
typedef struct { int32_t *v; size_t n, cap; } id_list;

static int ids_reserve(id_list *l, size_t more)
{
    if (l->n + more <= l->cap)
        return 0;
    size_t c = l->cap ? l->cap : 64;
    while (c < l->n + more)
        c *= 2;
    int32_t *v = realloc(l->v, c * sizeof(int32_t));
    if (v == NULL)
        return -1;
    l->v = v;
    l->cap = c;
    return 0;
}

static int ids_push(id_list *l, int32_t id)
{
    if (ids_reserve(l, 1) != 0)
        return -1;
    l->v[l->n++] = id;
    return 0;
}

/* text (and, when `nl`, a newline after it) encoded without BOS. */
static int ids_text(id_list *l, const llm_tokenizer *t, const char *s, size_t len, int nl)
{
    char *buf = NULL;
    if (nl) {
        if ((buf = malloc(len + 1)) == NULL)
            return -1;
        memcpy(buf, s, len);
        buf[len++] = '\n';
        s = buf;
    }
    int32_t *p = NULL;
    int k = llm_tok_encode(t, s, len, 0, &p);
    free(buf);
    if (k < 0 || ids_reserve(l, (size_t)k) != 0) {
        free(p);
        return -1;
    }
    if (k > 0)
        memcpy(l->v + l->n, p, (size_t)k * sizeof(int32_t));
    l->n += (size_t)k;
    free(p);
    return 0;
}

/* One part's ids: an id (one >= 0) and a text's. */
static int ids_part(id_list *l, const llm_tokenizer *t, int32_t id, const char *s, size_t len, int nl)
{
    return (id >= 0 && ids_push(l, id) != 0) || (s != NULL && ids_text(l, t, s, len, nl) != 0) ? -1 : 0;
}

int llm_tok_encode_infill(const llm_tokenizer *t, const char *prefix, size_t plen, const char *suffix, size_t slen,
                          const char *middle, size_t mlen, const llm_tok_file *files, int n_files, size_t budget,
                          int32_t **out)
{
    int32_t fim[3], repo[2];
    *out = NULL;
    if (llm_tok_fim_ids(t, fim) != 0 || n_files < 0)
        return -1;
    int has_repo = llm_tok_fim_repo_ids(t, repo) == 0, n = -1;
    /* the parts: head (BOS, the repository's name), each file, tail (the completed file's separator), prefix,
     * suffix, middle */
    id_list head = { 0 }, tail = { 0 }, pre = { 0 }, suf = { 0 }, mid = { 0 };
    id_list *file = n_files > 0 ? calloc((size_t)n_files, sizeof(id_list)) : NULL;
    int bad = n_files > 0 && file == NULL;
    if (!bad && t->add_bos && t->bos >= 0)
        bad = ids_push(&head, t->bos);
    if (!bad && has_repo)
        bad = ids_part(&head, t, repo[0], "myproject", 9, 1) || ids_part(&tail, t, repo[1], "filename", 8, 1);
    for (int i = 0; i < n_files && !bad; i++)
        bad = ids_part(&file[i], t, has_repo ? repo[1] : -1, has_repo ? files[i].name : NULL, files[i].name_len, 1) ||
              ids_part(&file[i], t, -1, files[i].text, files[i].text_len, 0);
    if (!bad)
        bad = ids_part(&pre, t, fim[0], prefix, plen, 0) || ids_part(&suf, t, fim[1], suffix, slen, 0) ||
              ids_part(&mid, t, fim[2], middle, mlen, 0);
    if (bad)
        goto done;
    /* over the budget: the prefix keeps its end and the suffix its start (a quarter of what is left at most, as
     * llama.cpp splits them), then the files closest to the end (the most recent) that still fit */
    size_t fixed = head.n + tail.n + mid.n + 2, kp = pre.n - 1, ks = suf.n - 1, files_in = 0;
    int from = n_files;
    if (budget > 0) {
        size_t avail = budget > fixed ? budget - fixed : 0;
        if (kp + ks > avail) {
            ks = ks < avail / 4 ? ks : avail / 4;
            kp = kp < avail - ks ? kp : avail - ks;
        }
        avail -= kp + ks;
        while (from > 0 && files_in + file[from - 1].n <= avail)
            files_in += file[--from].n;
    } else {
        for (from = 0; from < n_files; from++)
            files_in += file[from].n;
        from = 0;
    }
    id_list all = { 0 };
    bad = ids_reserve(&all, fixed + kp + ks + files_in);
    if (!bad) {
        memcpy(all.v, head.v, head.n * sizeof(int32_t));
        all.n = head.n;
        for (int i = from; i < n_files; i++) {
            memcpy(all.v + all.n, file[i].v, file[i].n * sizeof(int32_t));
            all.n += file[i].n;
        }
        memcpy(all.v + all.n, tail.v, tail.n * sizeof(int32_t));
        all.n += tail.n;
        all.v[all.n++] = fim[0];
        memcpy(all.v + all.n, pre.v + pre.n - kp, kp * sizeof(int32_t));
        all.n += kp;
        all.v[all.n++] = fim[1];
        memcpy(all.v + all.n, suf.v + 1, ks * sizeof(int32_t));
        all.n += ks;
        memcpy(all.v + all.n, mid.v, mid.n * sizeof(int32_t));
        all.n += mid.n;
        if (all.n <= INT32_MAX) {
            *out = all.v;
            n = (int)all.n;
        } else {
            free(all.v);
        }
    }
done:
    for (int i = 0; file != NULL && i < n_files; i++)
        free(file[i].v);
    free(file);
    free(head.v);
    free(tail.v);
    free(pre.v);
    free(suf.v);
    free(mid.v);
    return n;
}

void llm_tok_set_add_eos(llm_tokenizer *t, int on) { t->add_eos = on != 0; }
void llm_tok_set_bos_eos(llm_tokenizer *t, int bos, int eos)
{
    if (bos >= 0 && bos < t->n_vocab) {
        t->bos = bos;
        t->add_bos = 1;
    }
    if (eos >= 0 && eos < t->n_vocab) {
        t->eos = eos;
        t->add_eos = 1;
    }
}
const char *llm_tok_chat_template(const llm_tokenizer *t) { return t->chat_template; }

int llm_tok_is_special(const llm_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && t->type[id] == TOK_CONTROL;
}

int llm_tok_find(const llm_tokenizer *t, const char *text)
{
    return tok_map_get(&t->by_text, text, strlen(text));
}

int llm_tok_eog_ids(const llm_tokenizer *t, int32_t *out, int cap)
{
    static const char *const names[] = { "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>",
                                         "<end_of_turn>", "<|end|>", "[|endofturn|]", "<|end_of_sentence|>",
                                         "<seed:eos>" };
    /* the next turn's opener ends the answer (GLM-4.5's <|user|> and <|observation|>, its generation_config's
     * eos_token_id), as an added token only: as an ordinary piece it would cut a model that merely spells it */
    static const char *const opens[] = { "<|user|>", "<|observation|>" };
    /* gpt-oss's harmony format: <|end|> closes a message (its reasoning's) and the answer goes on; <|return|>
     * ends it, <|call|> ends it with a tool call */
    static const char *const harmony[] = { "<|return|>", "<|call|>" };
    int is_harmony = llm_tok_find(t, "<|channel|>") >= 0 && llm_tok_find(t, "<|return|>") >= 0;
    int n = 0;
    int32_t cand[1 + sizeof(names) / sizeof(names[0]) + sizeof(opens) / sizeof(opens[0]) + 2];
    int nc = 0;
    if (t->eos >= 0)
        cand[nc++] = t->eos;
    for (size_t i = 0; is_harmony && i < 2; i++) {
        int id = llm_tok_find(t, harmony[i]);
        if (id >= 0 && t->type[id] == TOK_CONTROL)
            cand[nc++] = id;
    }
    /* by name whatever the type, as llama.cpp does: a Gemma GGUF may have <end_of_turn> as a user-defined (or,
     * from older converters, normal) token, and generation must still end there */
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (is_harmony && strcmp(names[i], "<|end|>") == 0)
            continue;
        int id = llm_tok_find(t, names[i]);
        if (id >= 0 && (t->type[id] == TOK_CONTROL || t->type[id] == TOK_USER || t->type[id] == TOK_NORMAL))
            cand[nc++] = id;
    }
    for (size_t i = 0; i < sizeof(opens) / sizeof(opens[0]); i++) {
        int id = llm_tok_find(t, opens[i]);
        if (id >= 0 && (t->type[id] == TOK_CONTROL || t->type[id] == TOK_USER))
            cand[nc++] = id;
    }
    for (int i = 0; i < nc && n < cap; i++) {
        int dup = 0;
        for (int j = 0; j < n; j++)
            dup |= out[j] == cand[i];
        if (!dup)
            out[n++] = cand[i];
    }
    return n;
}

int llm_tok_piece(const llm_tokenizer *t, int32_t id, const char **bytes, size_t *len)
{
    if (id < 0 || id >= t->n_vocab)
        return -1;
    *bytes = t->raw_arena + t->raw_off[id];
    *len = t->raw_len[id];
    return 0;
}

int llm_tok_encode_pair(const llm_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
                        int32_t **out, int *b_at)
{
    int32_t *x = NULL, *y = NULL, *ids = NULL;
    int seps = t->kind == LLM_TOK_UGM ? 2 : 1; /* RoBERTa's </s></s> between the texts, BERT's one [SEP] */
    int nx = llm_tok_encode(t, a, alen, LLM_TOK_ADD_BOS, &x);
    int ny = nx >= 0 ? llm_tok_encode(t, b, blen, 0, &y) : -1;
    if (ny >= 0 && t->eos >= 0 && (ids = malloc(((size_t)nx + (size_t)ny + 3) * sizeof(*ids))) != NULL) {
        memcpy(ids, x, (size_t)nx * sizeof(*ids));
        for (int i = 0; i < seps; i++)
            ids[nx + i] = t->eos;
        memcpy(ids + nx + seps, y, (size_t)ny * sizeof(*ids));
        ids[nx + seps + ny] = t->eos;
    }
    free(x);
    free(y);
    *out = ids;
    if (b_at != NULL)
        *b_at = nx + seps;
    return ids != NULL ? nx + seps + ny + 1 : -1;
}

/* ---- loading dispatch ---- */

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

llm_tokenizer *llm_tok_load(const char *path, llm_err *err)
{
    struct stat st;
    if (path == NULL || stat(path, &st) != 0) {
        llm_seterr(err, "%s: no such tokenizer file", path ? path : "(null)");
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        size_t n = strlen(path) + sizeof("/tokenizer.json");
        char *p = malloc(n);
        if (p == NULL) {
            llm_seterr(err, "out of memory");
            return NULL;
        }
        snprintf(p, n, "%s/tokenizer.json", path);
        llm_tokenizer *t = NULL;
        if (access(p, R_OK) == 0) {
            t = llm_tok_load_hf(p, err);
        } else { /* SentencePiece's own file, where a directory has no tokenizer.json */
            snprintf(p, n, "%s/tokenizer.model", path);
            t = access(p, R_OK) == 0 ? llm_tok_load_spm_model(p, err) : NULL;
            if (t == NULL && access(p, R_OK) != 0)
                llm_seterr(err, "%s: no tokenizer.json nor tokenizer.model", path);
        }
        free(p);
        return t;
    }
    if (ends_with(path, ".json"))
        return llm_tok_load_hf(path, err);
    if (ends_with(path, ".model"))
        return llm_tok_load_spm_model(path, err);
    if (ends_with(path, ".gguf")) {
        gguf_ctx *g = gguf_open(path, err);
        if (g == NULL)
            return NULL;
        llm_tokenizer *t = llm_tok_load_gguf(g, err);
        gguf_close(g);
        return t;
    }
    return llm_tok_load_llama2c(path, 0, err);
}

/* ---- encoding ---- */

static int encode_fragment(const llm_tokenizer *t, const char *s, size_t n, int after_special, tok_vec *out)
{
    if (n == 0)
        return 0;
    if (t->kind == LLM_TOK_SPM)
        return tok_spm_encode(t, s, n, t->add_space_prefix && after_special, out);
    if (t->kind == LLM_TOK_WPM)
        return tok_wpm_encode(t, s, n, out);
    if (t->kind == LLM_TOK_UGM) /* each fragment opens with its own '▁', as llama.cpp normalises them */
        return tok_ugm_encode(t, s, n, out);
    return tok_bpe_encode(t, s, n, out);
}

int llm_tok_encode(const llm_tokenizer *t, const char *text, size_t len, int flags, int32_t **out)
{
    tok_vec v = { 0 };
    int rc = 0;
    *out = NULL;
    if (text == NULL)
        len = 0;
    if ((flags & LLM_TOK_ADD_BOS) && t->bos >= 0)
        rc |= tok_vec_push(&v, t->bos);
    int parse_special = (flags & LLM_TOK_PARSE_SPECIAL) != 0;
    size_t frag = 0, i = 0;
    int after_special = 1; /* SPM: a dummy space opens the text and follows each special token */
    while (i < len && rc == 0) {
        unsigned char c = (unsigned char)text[i];
        int hit = -1;
        for (int k = t->spec_start[c], e = k + t->spec_count[c]; k < e; k++) {
            const tok_special *sp = &t->specials[k];
            size_t n = t->raw_len[sp->id];
            if ((!sp->control || parse_special) && n <= len - i &&
                memcmp(text + i, t->raw_arena + t->raw_off[sp->id], n) == 0) {
                hit = sp->id;
                break;
            }
        }
        if (hit < 0) {
            i++;
            continue;
        }
        if (i > frag) {
            rc |= encode_fragment(t, text + frag, i - frag, after_special, &v);
            after_special = 0;
        }
        rc |= tok_vec_push(&v, hit);
        after_special = 1;
        i += t->raw_len[hit];
        frag = i;
    }
    if (rc == 0 && len > frag)
        rc |= encode_fragment(t, text + frag, len - frag, after_special, &v);
    if (rc != 0 || tok_vec_push(&v, 0) != 0) { /* the extra slot keeps *out non-NULL for 0 tokens */
        free(v.v);
        return -1;
    }
    *out = v.v;
    return (int)(v.n - 1);
}
