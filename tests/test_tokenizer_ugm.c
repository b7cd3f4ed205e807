/* Unigram (SentencePiece "unigram" models, llama.cpp's "t5" vocabulary: XLM-RoBERTa, bge-m3): a small
 * vocabulary with scores and a precompiled charsmap (llm_ugm_charsmap) written to a temporary GGUF and loaded
 * back: the best-scoring segmentation, the charsmap's rewrites (longest match, a rule dropping a character),
 * whitespace (merged runs, leading and trailing spaces, and kept runs without remove_extra_whitespaces),
 * unknown characters (a run of them one unknown token), invalid UTF-8, special tokens, pairs, decoding; hostile
 * charsmaps (a trie that does not fit refused; units pointing anywhere, leaves outside the strings, random
 * blobs: no crash, ids in range); gen-model's tiny-xlm-r vocabulary (fullwidth text tokenizes as ASCII); a
 * Hugging Face Unigram tokenizer.json (Precompiled charsmap in base64, Replace of runs of spaces, Metaspace,
 * <s> ... </s>) tokenizing as the GGUF, and malformed ones refused with a message. */
#include "tap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "model_write.h"
#include "tokenizer.h"
#include "tokenizer_priv.h"
#include "tok_check.h"

#define TOK512 "../shared/models/stories260K/tok512.bin"
#define W "\xe2\x96\x81" /* '▁' */

static char tmpdir[] = "/tmp/llm_tok_ugmXXXXXX";

enum { BOS, PAD, EOS, UNK, AB, A_, B, SP, A, C, ABC, E_ACUTE, FI, X, MASK, N_TOKENS };

static const char *const vocab[N_TOKENS] = {
    [BOS] = "<s>", [PAD] = "<pad>", [EOS] = "</s>", [UNK] = "<unk>", [AB] = W "ab", [A_] = W "a", [B] = "b",
    [SP] = W, [A] = "a", [C] = "c", [ABC] = W "abc", [E_ACUTE] = "\xc3\xa9", [FI] = "fi", [X] = "x",
    [MASK] = "<mask>",
};
static const float scores[N_TOKENS] = {
    [AB] = -1.0f, [A_] = -1.5f, [B] = -1.2f, [SP] = -4.0f, [A] = -4.5f, [C] = -3.0f, [ABC] = -3.9f,
    [E_ACUTE] = -2.0f, [FI] = -2.0f, [X] = -5.0f,
};

static const char *const rules[][2] = {
    { "\xef\xac\x81", "fi" },             /* the ligature */
    { "e\xcc\x81", "\xc3\xa9" },          /* e + combining acute: a longer match than a rule-less "e" */
    { "\xef\xbc\xa1", "a" },              /* fullwidth A (made lowercase to reach the vocabulary) */
    { "\t", " " },
    { "\xe2\x80\x8b", "" },               /* zero-width space: dropped */
};

static const char *tmp_path(const char *name)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    return path;
}

/* The vocabulary with a charsmap blob (NULL: none) and remove_extra_whitespaces. */
static llm_tokenizer *small_vocab(const uint8_t *cm, size_t cm_len, int merge, llm_err *err)
{
    int32_t type[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++)
        type[i] = i == UNK ? TOK_UNKNOWN : i <= UNK || i == MASK ? TOK_CONTROL : TOK_NORMAL;
    gguf_writer *w = gguf_writer_new();
    gguf_w_str(w, "tokenizer.ggml.model", "t5");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", vocab, NULL, N_TOKENS);
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, N_TOKENS);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, N_TOKENS);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", BOS);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", EOS);
    gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", UNK);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1);
    gguf_w_bool(w, "tokenizer.ggml.remove_extra_whitespaces", merge != 0);
    if (cm != NULL)
        gguf_w_arr(w, "tokenizer.ggml.precompiled_charsmap", GGUF_TYPE_UINT8, cm, cm_len);
    const char *path = tmp_path("small.gguf");
    int rc = gguf_writer_write(w, path, err);
    gguf_writer_free(w);
    return rc == 0 ? llm_tok_load(path, err) : NULL;
}

static void test_small(void)
{
    size_t n;
    uint8_t *cm = llm_ugm_charsmap(rules, (int)(sizeof(rules) / sizeof(rules[0])), &n);
    llm_err err = { { 0 } };
    llm_tokenizer *t = cm ? small_vocab(cm, n, 1, &err) : NULL;
    ok(t != NULL, "small t5 vocabulary with a charsmap written and loaded (%s)", t ? "ok" : err.msg);
    if (t == NULL) {
        free(cm);
        return;
    }
    ok(llm_tok_kind_of(t) == LLM_TOK_UGM && llm_tok_add_eos(t) && llm_tok_add_bos(t), "kind unigram, BOS and EOS");
    EXPECT(t, "ab", 0, "the best path: " W "ab (-1), not " W "a + b (-2.7)", AB);
    EXPECT(t, "abc", 0, W "abc (-3.9) beats " W "ab + c (-4.0)", ABC);
    EXPECT(t, "ab c", 0, "a word after a space opens with " W, AB, SP, C);
    EXPECT(t, "  ab   c  ", 0, "runs of spaces merged, leading and trailing ones dropped", AB, SP, C);
    EXPECT(t, "a\tb", 0, "the charsmap writes a tab as a space", A_, SP, B);
    EXPECT(t, "\xef\xbc\xa1" "b", 0, "fullwidth A rewritten to a", AB);
    EXPECT(t, "\xef\xac\x81", 0, "the ligature rewritten to fi", SP, FI);
    EXPECT(t, "e\xcc\x81", 0, "e + combining acute composed (the longest match)", SP, E_ACUTE);
    EXPECT(t, "a\xe2\x80\x8b" "b", 0, "a zero-width space dropped", AB);
    EXPECT(t, "zz", 0, "two unknown characters: one unknown token", SP, UNK);
    EXPECT(t, "zbz", 0, "unknowns around a piece stay apart", SP, UNK, B, UNK);
    EXPECT(t, "a\xff" "b", 0, "an invalid byte is U+FFFD, unknown", A_, UNK, B);
    EXPECT(t, "e", 0, "e alone: no rule, no piece", SP, UNK);
    check(t, "", 0, 0, NULL, 0, "empty text: nothing");
    check(t, "   ", 3, 0, NULL, 0, "spaces only: nothing");
    EXPECT(t, "<s>ab</s>", LLM_TOK_PARSE_SPECIAL, "special-token text parsed", BOS, AB, EOS);
    EXPECT(t, "x<mask>x", LLM_TOK_PARSE_SPECIAL, "each fragment opens with its own " W, SP, X, MASK, SP, X);
    EXPECT(t, "ab", LLM_TOK_ADD_BOS, "BOS added", BOS, AB);
    int32_t *pair = NULL;
    int np = llm_tok_encode_pair(t, "ab", 2, "c", 1, &pair, NULL);
    static const int32_t want_pair[] = { BOS, AB, EOS, EOS, SP, C, EOS };
    ok(np == 7 && memcmp(pair, want_pair, sizeof want_pair) == 0, "a pair as XLM-R's: <s> a </s></s> b </s>");
    free(pair);
    static const int32_t seq[] = { BOS, AB, SP, C, EOS };
    char *s = llm_tok_decode_ex(t, seq, 5, 1);
    ok(s != NULL && strcmp(s, "ab c") == 0, "decoded: \"%s\" (the opening space dropped)", s ? s : "(null)");
    free(s);
    llm_tok_free(t);

    t = small_vocab(cm, n, 0, &err);
    ok(t != NULL, "the same without remove_extra_whitespaces");
    if (t != NULL) {
        EXPECT(t, "ab  c", 0, "each space kept", AB, SP, SP, C);
        EXPECT(t, " ab", 0, "a leading space kept, after the opening one", SP, AB);
        llm_tok_free(t);
    }
    t = small_vocab(NULL, 0, 1, &err);
    ok(t != NULL, "no charsmap: loads");
    if (t != NULL) {
        EXPECT(t, "\xef\xac\x81", 0, "no charsmap: the ligature unknown", SP, UNK);
        llm_tok_free(t);
    }
    free(cm);
}

static int ids_in_range(const llm_tokenizer *t, const char *text, size_t len)
{
    int32_t *ids = NULL;
    int n = llm_tok_encode(t, text, len, LLM_TOK_PARSE_SPECIAL, &ids), good = n >= 0;
    for (int i = 0; i < n; i++)
        good &= ids[i] >= 0 && ids[i] < N_TOKENS;
    free(ids);
    return good;
}

static void test_hostile(void)
{
    llm_err err = { { 0 } };
    uint8_t tiny[3] = { 1, 2, 3 };
    llm_tokenizer *t = small_vocab(tiny, sizeof tiny, 1, &err);
    ok(t == NULL && strstr(err.msg, "charsmap") != NULL, "a 3-byte charsmap refused: %s", err.msg);
    llm_tok_free(t);
    uint8_t big[12] = { 64, 0, 0, 0 }; /* a trie of 64 bytes in a 12-byte blob */
    t = small_vocab(big, sizeof big, 1, &err);
    ok(t == NULL && strstr(err.msg, "malformed") != NULL, "a trie larger than the blob refused: %s", err.msg);
    llm_tok_free(t);
    uint8_t odd[12] = { 6, 0, 0, 0 };
    t = small_vocab(odd, sizeof odd, 1, &err);
    ok(t == NULL, "a trie size not a multiple of 4 refused");
    llm_tok_free(t);

    /* a valid charsmap whose replacement strings are cut off: the leaves point past them */
    size_t n;
    uint8_t *cm = llm_ugm_charsmap(rules, (int)(sizeof(rules) / sizeof(rules[0])), &n);
    uint32_t tb = cm ? (uint32_t)cm[0] | (uint32_t)cm[1] << 8 : 0;
    t = cm ? small_vocab(cm, 4 + tb + 2, 1, &err) : NULL; /* "fi" without its NUL */
    ok(t != NULL, "a charsmap with its strings cut off loads");
    if (t != NULL) {
        EXPECT(t, "\xef\xac\x81 a\tb", 0, "its rules are ignored, not read past the end", SP, UNK, A_, UNK, B);
        llm_tok_free(t);
    }
    free(cm);

    /* random blobs: units pointing anywhere */
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int good = 1, loaded = 0;
    for (int k = 0; k < 200; k++) {
        uint8_t blob[4 + 4 * 64 + 32];
        size_t units = 1 + (size_t)(k % 64);
        for (size_t i = 0; i < sizeof blob; i++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            blob[i] = (uint8_t)s;
        }
        blob[0] = (uint8_t)(4 * units);
        blob[1] = blob[2] = blob[3] = 0;
        if (k % 3 == 0) /* small bases keep walks inside the array more often */
            for (size_t i = 0; i < units; i++)
                blob[4 + 4 * i + 2] = 0, blob[4 + 4 * i + 3] = 0;
        t = small_vocab(blob, 4 + 4 * units + (size_t)(k % 32), 1, &err);
        if (t == NULL)
            continue;
        loaded++;
        for (int j = 0; j < 8; j++) {
            char text[24];
            for (size_t i = 0; i < sizeof text; i++) {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                text[i] = (char)(j < 4 ? 0x20 + s % 0x60 : s);
            }
            good &= ids_in_range(t, text, sizeof text);
        }
        llm_tok_free(t);
    }
    ok(loaded == 200 && good, "200 random charsmaps: %d loaded, every text tokenized with ids in range", loaded);
}

static void test_generated(void)
{
    gguf_writer *w = gguf_writer_new();
    llm_err err = { { 0 } };
    int n_vocab = 0;
    int rc = llm_gguf_w_ugm_from_llama2c(w, TOK512, 0, &n_vocab, &err);
    const char *path = tmp_path("xlmr.gguf");
    if (rc == 0)
        rc = gguf_writer_write(w, path, &err);
    gguf_writer_free(w);
    llm_tokenizer *t = rc == 0 ? llm_tok_load(path, &err) : NULL;
    ok(t != NULL && llm_tok_vocab_size(t) == n_vocab, "gen-model's XLM-R vocabulary loads: %d tokens (%s)", n_vocab,
       t ? "ok" : err.msg);
    if (t == NULL)
        return;
    int32_t *a = NULL, *b = NULL;
    const char full[] = "\xef\xbc\xa8\xef\xbd\x85\xef\xbd\x8c\xef\xbd\x8c\xef\xbd\x8f world\xef\xbc\x81";
    int na = llm_tok_encode(t, full, sizeof full - 1, 0, &a), nb = llm_tok_encode(t, "Hello world!", 12, 0, &b);
    ok(na > 0 && na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0, "fullwidth Hello world! tokenizes as ASCII");
    char *s = nb > 0 ? llm_tok_decode_ex(t, b, (size_t)nb, 1) : NULL;
    ok(s != NULL && strcmp(s, "Hello world!") == 0, "and decodes back: \"%s\"", s ? s : "(null)");
    ok(llm_tok_find(t, "<mask>") == n_vocab - 1 && llm_tok_bos(t) == 0 && llm_tok_eos(t) == 2,
       "XLM-R's ids: <s> 0, </s> 2, <mask> last");
    free(s);
    free(a);
    free(b);
    llm_tok_free(t);
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs(text, f);
    return fclose(f);
}

/* tokenizer.json around the small vocabulary: normalizer and extra model fields given. */
static llm_tokenizer *hf_json(const char *normalizer, const char *model_extra, llm_err *err)
{
    char buf[8192];
    int o = snprintf(buf, sizeof buf, "{\"added_tokens\":[{\"id\":0,\"content\":\"<s>\",\"special\":true},"
                     "{\"id\":2,\"content\":\"</s>\",\"special\":true}],\"normalizer\":%s,"
                     "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\u2581\","
                     "\"prepend_scheme\":\"always\"},\"post_processor\":{\"type\":\"RobertaProcessing\","
                     "\"sep\":[\"</s>\",2],\"cls\":[\"<s>\",0]},\"model\":{\"type\":\"Unigram\"%s,\"vocab\":[",
                     normalizer, model_extra);
    for (int i = 0; i < N_TOKENS; i++)
        o += snprintf(buf + o, sizeof buf - (size_t)o, "%s[\"%s\",%g]", i ? "," : "", vocab[i], (double)scores[i]);
    snprintf(buf + o, sizeof buf - (size_t)o, "]}}");
    const char *path = tmp_path("tokenizer.json");
    if (write_file(path, buf) != 0)
        return NULL;
    return llm_tok_load(path, err);
}

static void test_hf(void)
{
    size_t n;
    uint8_t *cm = llm_ugm_charsmap(rules, (int)(sizeof(rules) / sizeof(rules[0])), &n);
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *enc = cm ? malloc(n / 3 * 4 + 8) : NULL, norm[8192];
    size_t o = 0;
    for (size_t i = 0; enc != NULL && i < n; i += 3) {
        uint32_t v = (uint32_t)cm[i] << 16 | (i + 1 < n ? (uint32_t)cm[i + 1] << 8 : 0) | (i + 2 < n ? cm[i + 2] : 0);
        enc[o++] = b64[v >> 18];
        enc[o++] = b64[(v >> 12) & 63];
        enc[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        enc[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    if (enc == NULL) {
        ok(0, "out of memory");
        free(cm);
        return;
    }
    enc[o] = 0;
    snprintf(norm, sizeof norm, "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Precompiled\","
             "\"precompiled_charsmap\":\"%s\"},{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" {2,}\"},"
             "\"content\":\" \"}]}", enc);
    llm_err err = { { 0 } };
    llm_tokenizer *t = hf_json(norm, ",\"unk_id\":3", &err);
    ok(t != NULL, "a Unigram tokenizer.json loads (%s)", t ? "ok" : err.msg);
    if (t != NULL) {
        ok(llm_tok_kind_of(t) == LLM_TOK_UGM && llm_tok_bos(t) == BOS && llm_tok_eos(t) == EOS && llm_tok_add_eos(t),
           "kind unigram, <s> / </s> from RobertaProcessing");
        EXPECT(t, "  \xef\xbc\xa1" "b   c\t", 0, "its charsmap and merged spaces: as the GGUF", AB, SP, C);
        EXPECT(t, "zz", 0, "unknowns merged: unk_id", SP, UNK);
        llm_tok_free(t);
    }
    static const struct {
        const char *norm, *extra, *want, *what;
    } bad[] = {
        { "{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"@@@@\"}", ",\"unk_id\":3", "not base64",
          "a charsmap that is not base64" },
        { "{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"AQID\"}", ",\"unk_id\":3", "malformed",
          "a charsmap too short for its trie" },
        { "{\"type\":\"NFKC\"}", ",\"unk_id\":3", "unsupported normalizer step NFKC", "an NFKC normalizer" },
        { "{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":\"b\"}", ",\"unk_id\":3",
          "Replace other than", "another Replace" },
        { "null", "", "needs unk_id", "no unk_id" },
        { "null", ",\"unk_id\":3,\"byte_fallback\":true", "byte_fallback", "byte_fallback" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err.msg[0] = 0;
        t = hf_json(bad[i].norm, bad[i].extra, &err);
        ok(t == NULL && strstr(err.msg, bad[i].want) != NULL, "refused: %s (%s)", bad[i].what, err.msg);
        llm_tok_free(t);
    }
    write_file(tmp_path("tokenizer.json"), "{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\"]]}}");
    t = llm_tok_load(tmp_path("tokenizer.json"), &err);
    ok(t == NULL && strstr(err.msg, "[piece, score]") != NULL, "refused: a vocab entry without a score (%s)", err.msg);
    llm_tok_free(t);
    write_file(tmp_path("tokenizer.json"), "{\"added_tokens\":[{\"id\":9,\"content\":\"x\"}],\"model\":{\"type\":"
               "\"Unigram\",\"unk_id\":0,\"vocab\":[[\"a\",-1]]}}");
    t = llm_tok_load(tmp_path("tokenizer.json"), &err);
    ok(t == NULL && strstr(err.msg, "added_tokens") != NULL, "refused: an added token outside the vocab (%s)",
       err.msg);
    llm_tok_free(t);
    free(enc);
    free(cm);
}

int main(void)
{
    if (mkdtemp(tmpdir) == NULL)
        return 1;
    test_small();
    test_hostile();
    test_generated();
    test_hf();
    unlink(tmp_path("tokenizer.json"));
    unlink(tmp_path("small.gguf"));
    unlink(tmp_path("xlmr.gguf"));
    rmdir(tmpdir);
    return done_testing();
}
