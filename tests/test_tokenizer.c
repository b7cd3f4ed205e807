/* SentencePiece-style tokenizer (stories260K's tok512.bin and the same vocabulary
 * from stories260K.gguf) against a naive re-implementation of llama2.c's encode;
 * the streaming detokenizer; invalid UTF-8; empty input; malformed tokenizer
 * files of every supported format. */
#include "tap.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gguf.h"
#include "tokenizer.h"
#include "tokenizer_priv.h"

#define TOK512 "../shared/models/stories260K/tok512.bin"
#define GGUF260K "../shared/models/stories260K/stories260K.gguf"

/* ---- naive llama2.c encode, straight from its description ---- */

typedef struct {
    int    n;
    char **str;
    float *score;
} ref_vocab;

static int ref_load(ref_vocab *v, const char *path)
{
    FILE *f = fopen(path, "rb");
    int32_t maxlen;
    if (f == NULL || fread(&maxlen, 4, 1, f) != 1)
        return -1;
    v->n = 0;
    v->str = malloc(512 * sizeof(char *));
    v->score = malloc(512 * sizeof(float));
    int32_t len;
    while (v->n < 512 && fread(&v->score[v->n], 4, 1, f) == 1 && fread(&len, 4, 1, f) == 1) {
        v->str[v->n] = calloc((size_t)len + 1, 1);
        if (fread(v->str[v->n], 1, (size_t)len, f) != (size_t)len)
            break;
        v->n++;
    }
    fclose(f);
    return v->n == 512 ? 0 : -1;
}

static int ref_lookup(const ref_vocab *v, const char *s)
{
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->str[i], s) == 0)
            return i;
    return -1;
}

static int ref_encode(const ref_vocab *v, const char *text, int bos, int32_t *tokens)
{
    int n = 0;
    char buf[64];
    if (bos)
        tokens[n++] = 1;
    if (text[0] != 0)
        tokens[n++] = ref_lookup(v, " ");
    for (const char *c = text; *c;) {
        size_t k = 1;
        while ((c[k] & 0xc0) == 0x80 && k < 4)
            k++;
        memcpy(buf, c, k);
        buf[k] = 0;
        int id = ref_lookup(v, buf);
        if (id >= 0)
            tokens[n++] = id;
        else
            for (size_t i = 0; i < k; i++)
                tokens[n++] = (unsigned char)buf[i] + 3;
        c += k;
    }
    for (;;) {
        float best = -1e10f;
        int best_id = -1, best_idx = -1;
        for (int i = 0; i + 1 < n; i++) {
            char cat[128];
            snprintf(cat, sizeof(cat), "%s%s", v->str[tokens[i]], v->str[tokens[i + 1]]);
            int id = ref_lookup(v, cat);
            if (id >= 0 && v->score[id] > best) {
                best = v->score[id];
                best_id = id;
                best_idx = i;
            }
        }
        if (best_idx < 0)
            break;
        tokens[best_idx] = best_id;
        memmove(tokens + best_idx + 1, tokens + best_idx + 2, (size_t)(n - best_idx - 2) * sizeof(int32_t));
        n--;
    }
    return n;
}

static const char *prompts[] = {
    "Once upon a time", "", " ", "a", "Hello world", "The cat sat on the mat.", "  two leading spaces",
    "trailing space ", "Lily and Ben went to the park. They saw a big dog!", "She said, \"Don't go!\"",
    "line one\nline two", "tabs\tand\ttabs", "numbers 12345 and 3.14", "UPPER CASE WORDS", "mIxEd CaSe",
    "caf\xc3\xa9 na\xc3\xafve", "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c", "emoji \xf0\x9f\x98\x80 here",
    "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82", "!!!???...", "a  b   c    d", "\n\n\n", "x\r\ny",
    "supercalifragilisticexpialidocious", "the the the the the", "Tom's ball was red and blue.",
    "One day, a little girl named Lily found a needle in her room.", "happy sad angry tired",
    "He ran, jumped, and played all day long.", "<s> is plain text", "end</s>", "\xe2\x80\x8a hair space",
    "1+1=2", "(parentheses) [brackets] {braces}", "email@example.com", "http://example.com/a?b=c",
    "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "q", "Q", "\xc2\xa0nbsp", "The end.",
};
#define N_PROMPTS (sizeof(prompts) / sizeof(prompts[0]))

static int same_ids(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(int32_t)) == 0);
}

static void check_spm(const llm_tokenizer *t, const ref_vocab *ref, const char *label)
{
    int32_t *ids = NULL;
    int n = llm_tok_encode(t, "Once upon a time", 16, LLM_TOK_ADD_BOS, &ids);
    int32_t want[] = { 1, 403, 407, 261, 378 };
    ok(same_ids(ids, n, want, 5), "%s: \"Once upon a time\" + BOS -> [1, 403, 407, 261, 378]", label);
    free(ids);

    int bad = 0, bad_dec = 0;
    for (size_t i = 0; i < N_PROMPTS; i++) {
        int32_t refids[1024];
        int nr = ref_encode(ref, prompts[i], i % 2, refids);
        n = llm_tok_encode(t, prompts[i], strlen(prompts[i]), i % 2 ? LLM_TOK_ADD_BOS : 0, &ids);
        if (!same_ids(ids, n, refids, nr)) {
            if (bad++ < 3)
                diag("%s: mismatch on \"%s\" (%d vs %d tokens)", label, prompts[i], n, nr);
        }
        char *s = llm_tok_decode(t, ids, (size_t)n);
        if (s == NULL || strcmp(s, prompts[i]) != 0) {
            if (bad_dec++ < 3)
                diag("%s: decode of \"%s\" gave \"%s\"", label, prompts[i], s ? s : "(null)");
        }
        free(s);
        free(ids);
    }
    is_int(bad, 0, "%s: %zu prompts encode as llama2.c's algorithm does", label, N_PROMPTS);
    is_int(bad_dec, 0, "%s: and decode back to the prompt", label);

    /* special tokens */
    const char *sp = "<s>hi</s>";
    n = llm_tok_encode(t, sp, strlen(sp), LLM_TOK_PARSE_SPECIAL, &ids);
    ok(n >= 3 && ids[0] == 1 && ids[n - 1] == 2, "%s: PARSE_SPECIAL turns <s> and </s> into BOS/EOS", label);
    int plain = 1;
    for (int i = 1; i < n - 1; i++)
        plain &= ids[i] > 2;
    ok(plain, "%s: the text between them is ordinary tokens", label);
    free(ids);
    n = llm_tok_encode(t, sp, strlen(sp), 0, &ids);
    plain = 1;
    for (int i = 0; i < n; i++)
        plain &= ids[i] > 2;
    ok(plain, "%s: without PARSE_SPECIAL, <s> is plain text", label);
    free(ids);

    int32_t eog[4];
    int ne = llm_tok_eog_ids(t, eog, 4);
    ok(ne == 1 && eog[0] == 2, "%s: EOG is just </s>", label);
    is_int(llm_tok_find(t, "<s>"), 1, "%s: find <s>", label);
    ok(llm_tok_find(t, "\xe2\x96\x81t") == 259, "%s: find '\xe2\x96\x81t' (SentencePiece spelling)", label);
}

static void check_detok(const llm_tokenizer *t)
{
    llm_detok d;
    char out[256];
    /* "你" is not in the 512-token vocabulary: three byte tokens */
    int32_t *ids = NULL;
    int n = llm_tok_encode(t, "\xe4\xbd\xa0", 3, 0, &ids);
    ok(n == 4 && ids[1] == 0xe4 + 3 && ids[2] == 0xbd + 3 && ids[3] == 0xa0 + 3, "byte fallback: dummy space + 3 byte tokens");
    llm_detok_init(&d, t);
    size_t k0 = llm_detok_push(&d, ids[0], out, sizeof(out));
    size_t k1 = llm_detok_push(&d, ids[1], out, sizeof(out));
    size_t k2 = llm_detok_push(&d, ids[2], out, sizeof(out));
    size_t k3 = llm_detok_push(&d, ids[3], out, sizeof(out));
    ok(k0 == 0 && k1 == 0 && k2 == 0 && k3 == 3 && memcmp(out, "\xe4\xbd\xa0", 3) == 0,
       "split character held back until complete (dummy space dropped)");
    is_int(llm_detok_flush(&d, out, sizeof(out)), 0, "nothing left to flush");
    free(ids);

    /* invalid sequences -> U+FFFD */
    llm_detok_init(&d, t);
    size_t k = llm_detok_push(&d, 0xe4 + 3, out, sizeof(out));
    int32_t a = llm_tok_find(t, "a");
    k += llm_detok_push(&d, a, out + k, sizeof(out) - k);
    ok(a > 0 && k == 4 && memcmp(out, "\xef\xbf\xbd" "a", 4) == 0, "lead byte then ASCII: U+FFFD then the letter");
    k = llm_detok_push(&d, 0xff + 3, out, sizeof(out));
    ok(k == 3 && memcmp(out, "\xef\xbf\xbd", 3) == 0, "byte 0xFF: U+FFFD");
    k = llm_detok_push(&d, 0xf0 + 3, out, sizeof(out));
    k += llm_detok_push(&d, 0x9f + 3, out + k, sizeof(out) - k);
    k += llm_detok_flush(&d, out + k, sizeof(out) - k);
    ok(k == 3 && memcmp(out, "\xef\xbf\xbd", 3) == 0, "truncated sequence flushed as one U+FFFD");
    k = llm_detok_push(&d, 0xed + 3, out, sizeof(out));
    k += llm_detok_push(&d, 0xa0 + 3, out + k, sizeof(out) - k);
    k += llm_detok_flush(&d, out + k, sizeof(out) - k);
    ok(k == 6, "surrogate encoding: two U+FFFD (%zu bytes)", k);

    /* dummy prefix: dropped at the start and after BOS, kept for a continuation */
    int32_t story[] = { 1, 403, 407, 261, 378 };
    char *s = llm_tok_decode(t, story, 5);
    ok(s && strcmp(s, "Once upon a time") == 0, "decode [BOS, Once upon a time] (\"%s\")", s ? s : "");
    free(s);
    llm_detok_init(&d, t);
    d.at_start = 0;
    k = llm_detok_push(&d, 407, out, sizeof(out));
    ok(k > 0 && out[0] == ' ', "a continuation keeps its leading space");
    llm_detok_init(&d, t);
    d.skip_special = 0;
    k = llm_detok_push(&d, 1, out, sizeof(out));
    ok(k == 3 && memcmp(out, "<s>", 3) == 0, "skip_special = 0 shows BOS text");
    is_int(llm_detok_push(&d, -5, out, sizeof(out)), 0, "out-of-range id emits nothing");
    is_int(llm_detok_push(&d, 1 << 20, out, sizeof(out)), 0, "id past the vocabulary emits nothing");
}

static void check_edge_input(const llm_tokenizer *t)
{
    int32_t *ids = NULL;
    int n = llm_tok_encode(t, "", 0, 0, &ids);
    ok(n == 0 && ids != NULL, "empty input: no tokens, non-NULL array");
    free(ids);
    n = llm_tok_encode(t, NULL, 0, LLM_TOK_ADD_BOS, &ids);
    ok(n == 1 && ids[0] == 1, "NULL input with BOS: [BOS]");
    free(ids);
    static const char bad[] = "ok\xff\xfe\x80 \xe4\xbd end\xc3";
    n = llm_tok_encode(t, bad, sizeof(bad) - 1, 0, &ids);
    char buf[128];
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        const char *p;
        size_t pl;
        if (llm_tok_piece(t, ids[i], &p, &pl) == 0 && len + pl < sizeof(buf)) {
            memcpy(buf + len, p, pl);
            len += pl;
        }
    }
    ok(n > 0 && len == sizeof(bad) && buf[0] == ' ' && memcmp(buf + 1, bad, sizeof(bad) - 1) == 0,
       "invalid UTF-8 round-trips through byte tokens (after the dummy space)");
    free(ids);
    /* embedded NUL is just a byte */
    n = llm_tok_encode(t, "a\0b", 3, 0, &ids);
    ok(n >= 3, "embedded NUL encodes (%d tokens)", n);
    free(ids);
}

/* ---- malformed files ---- */

static char tmpdir[] = "/tmp/llm_tok_badXXXXXX";

static const char *write_tmp(const char *name, const void *data, size_t n)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
    return path;
}

static void expect_fail(llm_tokenizer *t, const llm_err *err, const char *what)
{
    ok(t == NULL && err->msg[0] != 0, "%s rejected: %s", what, err->msg);
    llm_tok_free(t);
}

static void check_bad_llama2c(void)
{
    llm_err err = { { 0 } };
    expect_fail(llm_tok_load_llama2c("/nonexistent/tok.bin", 0, &err), &err, "missing file");
    err.msg[0] = 0;
    expect_fail(llm_tok_load_llama2c(write_tmp("empty.bin", "", 0), 0, &err), &err, "empty file");
    int32_t hdr[] = { -1 };
    err.msg[0] = 0;
    expect_fail(llm_tok_load_llama2c(write_tmp("neg.bin", hdr, 4), 0, &err), &err, "negative max_token_length");
    /* a valid prefix of tok512.bin cut in the middle of a record */
    FILE *f = fopen(TOK512, "rb");
    char buf[8192];
    size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0;
    if (f)
        fclose(f);
    ok(n > 4000, "read tok512.bin");
    err.msg[0] = 0;
    expect_fail(llm_tok_load_llama2c(write_tmp("trunc.bin", buf, 4000), 0, &err), &err, "truncated record");
    err.msg[0] = 0;
    expect_fail(llm_tok_load_llama2c(write_tmp("trunc2.bin", buf, 4000), 512, &err), &err, "truncated, with vocab hint");
    /* record with an absurd length */
    char rec[16];
    int32_t maxlen = 16, len = 1 << 30;
    float sc = 0;
    memcpy(rec, &maxlen, 4);
    memcpy(rec + 4, &sc, 4);
    memcpy(rec + 8, &len, 4);
    err.msg[0] = 0;
    expect_fail(llm_tok_load_llama2c(write_tmp("huge.bin", rec, 12), 0, &err), &err, "absurd token length");
    /* only one token */
    len = 1;
    memcpy(rec + 8, &len, 4);
    rec[12] = 'x';
    err.msg[0] = 0;
    expect_fail(llm_tok_load_llama2c(write_tmp("one.bin", rec, 13), 0, &err), &err, "single-token vocabulary");
    /* vocab hint larger than the file: the rest are unused ids */
    llm_tokenizer *t = llm_tok_load_llama2c(TOK512, 600, &err);
    ok(t && llm_tok_vocab_size(t) == 600, "vocab hint past the file pads the vocabulary");
    if (t) {
        char *s = llm_tok_decode(t, (int32_t[]){ 599 }, 1);
        ok(s && s[0] == 0, "a padding id decodes to nothing");
        free(s);
    }
    llm_tok_free(t);
}

static void check_bad_hf(void)
{
    llm_err err = { { 0 } };
    static const struct {
        const char *name, *json;
    } cases[] = {
        { "notjson.json", "{\"model\": {" },
        { "nomodel.json", "{}" },
        { "wordpiece.json", "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}" },
        { "noregex.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":null}" },
        { "badid.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-3},\"merges\":[]},"
                        "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false}}" },
        { "badmerge.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]},"
                           "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false}}" },
        { "badregex.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":"
                           "\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(unclosed\"},"
                           "\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]}}" },
        { "badadded.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"added_tokens\":[{\"id\":\"x\"}],"
                           "\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        err.msg[0] = 0;
        const char *p = write_tmp(cases[i].name, cases[i].json, strlen(cases[i].json));
        expect_fail(llm_tok_load_hf(p, &err), &err, cases[i].name);
    }
    /* a tiny valid one works: merges apply, unknown bytes still encode */
    const char *good = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\xc4\xa0\":3},\"merges\":[\"a b\"]},"
                       "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false}}";
    llm_tokenizer *t = llm_tok_load(write_tmp("tiny.json", good, strlen(good)), &err);
    ok(t != NULL, "tiny byte-level tokenizer.json loads (%s)", t ? "ok" : err.msg);
    if (t) {
        int32_t *ids = NULL;
        int n = llm_tok_encode(t, "ab ab", 5, LLM_TOK_ADD_BOS, &ids);
        ok(n == 3 && ids[0] == 2 && ids[1] == 3 && ids[2] == 2, "tiny: \"ab ab\" -> [ab, space, ab] (no BOS to add)");
        free(ids);
        n = llm_tok_encode(t, "zz", 2, 0, &ids);
        is_int(n, 0, "tiny: bytes without tokens are dropped, no crash");
        free(ids);
    }
    llm_tok_free(t);
}

static const char *write_gguf(const char *name, gguf_writer *w)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    llm_err err;
    int rc = gguf_writer_write(w, path, &err);
    gguf_writer_free(w);
    return rc == 0 ? path : NULL;
}

/* gpt-oss's harmony vocabulary: <|end|> closes its reasoning's message and the answer goes on, so it does not
 * end generation there; <|return|> (its EOS) and <|call|> do. Without <|channel|> (Phi 3's vocabulary) <|end|>
 * still does. */
static void check_harmony_eog(void)
{
    static const char *toks[] = { "a", "b", "ab", "<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>",
                                  "<|call|>" };
    static const int32_t types[] = { 1, 1, 1, 3, 3, 3, 3, 3, 3 };
    for (int harmony = 1; harmony >= 0; harmony--) {
        gguf_writer *w = gguf_writer_new();
        gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_w_str(w, "tokenizer.ggml.pre", "gpt-4o");
        const char *tk[9];
        for (int i = 0; i < 9; i++)
            tk[i] = !harmony && i == 4 ? "<|chan|>" : toks[i];
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", tk, NULL, 9);
        gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 9);
        gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const[]){ "a b" }, NULL, 1);
        gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 7);
        char path[64];
        snprintf(path, sizeof path, "/tmp/test_tok_harmony_%d.gguf", (int)getpid());
        llm_err err = { { 0 } };
        llm_tokenizer *t = NULL;
        if (gguf_writer_write(w, path, &err) == 0) {
            gguf_ctx *g = gguf_open(path, &err);
            t = g ? llm_tok_load_gguf(g, &err) : NULL;
            gguf_close(g);
        }
        gguf_writer_free(w);
        unlink(path);
        int32_t eog[8];
        int ne = t ? llm_tok_eog_ids(t, eog, 8) : 0;
        if (harmony)
            ok(t && ne == 2 && eog[0] == 7 && eog[1] == 8, "harmony: generation ends at <|return|> and <|call|>, not "
               "<|end|> (%d ids): %s", ne, t ? "" : err.msg);
        else
            ok(t && ne == 2 && eog[0] == 7 && eog[1] == 6, "without <|channel|>: <|end|> ends it (%d ids)", ne);
        llm_tok_free(t);
    }
}

static void check_bad_gguf(void)
{
    static const char *toks[] = { "<unk>", "<s>", "</s>", "a", "b", "ab" };
    static const char *merges_bad[] = { "a c" };
    static const int32_t ints[] = { 1, 2, 3 };
    static const float scores[] = { 0, 0, 0, -1, -2 };
    struct {
        const char *name;
        gguf_writer *w;
    } cases[8];
    int nc = 0;
    gguf_writer *w;

    w = gguf_writer_new(); /* no model key */
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 6);
    cases[nc].name = "no-model", cases[nc++].w = w;
    w = gguf_writer_new();
    gguf_w_str(w, "tokenizer.ggml.model", "rwkv");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 6);
    cases[nc].name = "model-rwkv", cases[nc++].w = w;
    w = gguf_writer_new();
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    cases[nc].name = "no-tokens", cases[nc++].w = w;
    w = gguf_writer_new();
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr(w, "tokenizer.ggml.tokens", GGUF_TYPE_INT32, ints, 3);
    cases[nc].name = "int-tokens", cases[nc++].w = w;
    w = gguf_writer_new();
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 6);
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 5);
    cases[nc].name = "short-scores", cases[nc++].w = w;
    w = gguf_writer_new();
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 6);
    cases[nc].name = "gpt2-no-merges", cases[nc++].w = w;
    w = gguf_writer_new();
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 6);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", merges_bad, NULL, 1);
    cases[nc].name = "gpt2-bad-merge", cases[nc++].w = w;
    w = gguf_writer_new();
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "mystery");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 6);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const[]){ "a b" }, NULL, 1);
    cases[nc].name = "gpt2-unknown-pre", cases[nc++].w = w;

    for (int i = 0; i < nc; i++) {
        llm_err err = { { 0 } };
        const char *p = write_gguf(cases[i].name, cases[i].w);
        gguf_ctx *g = p ? gguf_open(p, &err) : NULL;
        ok(g != NULL, "%s: GGUF written and opened", cases[i].name);
        if (g)
            expect_fail(llm_tok_load_gguf(g, &err), &err, cases[i].name);
        gguf_close(g);
    }
}

/* GGUF pre-tokenizer names llama.cpp splits as Llama 3 does (Phi-4's "dbrx", "smaug-bpe") take its pattern. */
static void test_pretok_names(void)
{
    const char *l3 = tok_pretok_pattern("llama-bpe");
    ok(l3 && tok_pretok_pattern("dbrx") == l3 && tok_pretok_pattern("smaug-bpe") == l3 &&
       tok_pretok_pattern("llama3") == l3 && tok_pretok_pattern("qwen2") != l3 && tok_pretok_pattern("mystery") == NULL,
       "pre-tokenizers dbrx, smaug-bpe, llama3: Llama 3's pattern; qwen2 its own; others none");
    const char *rf = tok_pretok_pattern("refact");
    ok(rf && strstr(rf, TOK_STAGE) && tok_pretok_pattern("starcoder") == rf && tok_pretok_pattern("smollm") == rf &&
       !strcmp(tok_pretok_name(rf), "refact"), "pre-tokenizers starcoder, smollm: refact's two stages");
    ok(tok_pretok_pattern("deepseek-r1-qwen") != NULL &&
       tok_pretok_pattern("deepseek-r1-qwen") == tok_pretok_pattern("qwen2"),
       "pre-tokenizer deepseek-r1-qwen: Qwen 2's split (llama.cpp's)");
    const char *tk = tok_pretok_pattern("tekken");
    ok(tk && tk != tok_pretok_pattern("gpt-4o") && !strcmp(tok_pretok_name(tk), "tekken") && strstr(tk, "\\p{N}|"),
       "pre-tokenizer tekken: its own pattern (digits one by one)");
    /* a tokenizer.json's Digits(individual) before ByteLevel is refact's split; other uses of Digits refused */
    cJSON *pt = cJSON_Parse("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":"
                            "true},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}]}");
    cJSON *pt2 = cJSON_Parse("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":"
                             "false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}]}");
    llm_err err = { { 0 } };
    ok(tok_hf_pretok_pattern(pt, "t.json", &err) == rf, "tokenizer.json Digits + ByteLevel: refact");
    ok(tok_hf_pretok_pattern(pt2, "t.json", &err) == NULL && strstr(err.msg, "individual_digits"),
       "Digits without individual_digits refused: %s", err.msg);
    cJSON_Delete(pt);
    cJSON_Delete(pt2);
}

int main(void)
{
    test_pretok_names();
    check_harmony_eog();
    ref_vocab ref;
    ok(ref_load(&ref, TOK512) == 0, "reference reads tok512.bin");
    llm_err err = { { 0 } };
    llm_tokenizer *t = llm_tok_load_llama2c(TOK512, 512, &err);
    ok(t != NULL, "load tok512.bin (%s)", t ? "ok" : err.msg);
    if (t == NULL)
        return done_testing();
    is_int(llm_tok_kind_of(t), LLM_TOK_SPM, "SentencePiece kind");
    is_int(llm_tok_vocab_size(t), 512, "512 tokens");
    ok(llm_tok_bos(t) == 1 && llm_tok_eos(t) == 2 && llm_tok_add_bos(t), "BOS 1, EOS 2, BOS wanted");
    check_spm(t, &ref, "tok512.bin");
    check_detok(t);
    check_edge_input(t);

    llm_tokenizer *sniffed = llm_tok_load(TOK512, &err);
    ok(sniffed && llm_tok_vocab_size(sniffed) == 512, "llm_tok_load sniffs the llama2.c format");
    llm_tok_free(sniffed);

    gguf_ctx *g = gguf_open(GGUF260K, &err);
    llm_tokenizer *tg = g ? llm_tok_load_gguf(g, &err) : NULL;
    ok(tg != NULL, "load stories260K.gguf tokenizer (%s)", tg ? "ok" : err.msg);
    if (tg)
        check_spm(tg, &ref, "GGUF llama");
    llm_tok_free(tg);
    gguf_close(g);
    sniffed = llm_tok_load(GGUF260K, &err);
    ok(sniffed && llm_tok_kind_of(sniffed) == LLM_TOK_SPM, "llm_tok_load sniffs .gguf");
    llm_tok_free(sniffed);

    if (mkdtemp(tmpdir) != NULL) {
        check_bad_llama2c();
        check_bad_hf();
        check_bad_gguf();
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
        if (system(cmd) != 0)
            diag("could not remove %s", tmpdir);
    } else {
        ok(0, "mkdtemp");
    }
    llm_tok_free(t);
    for (int i = 0; i < ref.n; i++)
        free(ref.str[i]);
    free(ref.str);
    free(ref.score);
    return done_testing();
}
