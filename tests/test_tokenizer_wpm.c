/* WordPiece (BERT-family models, llama.cpp's "bert" vocabulary): a small vocabulary written to a temporary
 * GGUF and loaded back (words, longest-first pieces, [UNK] words, punctuation / symbol / CJK splitting,
 * lowercasing and accent stripping, whitespace and control characters, special tokens, BOS / EOS, decoding);
 * the WordPiece vocabulary llm_gguf_w_wpm_from_llama2c derives from tok512.bin; a Hugging Face WordPiece
 * tokenizer.json; and random bytes (invalid UTF-8 included): no crash, every id in range. */
#include "tap.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "model_write.h"
#include "tokenizer.h"
#include "tokenizer_priv.h"
#include "tok_check.h"

#define TOK512 "../shared/models/stories260K/tok512.bin"
#define W "\xe2\x96\x81" /* '▁': a word-initial piece */

static char tmpdir[] = "/tmp/llm_tok_wpmXXXXXX";

enum {
    PAD, UNK, CLS, SEP, MASK, HELLO, WORLD, PLAY, ING, P_, LAY, COMMA, BANG, DOT, NI, HAO, A_, B_, PLUS, CLS_W,
    SEP_W, LBR, RBR, CAFE, CAFE_ACUTE, PARA, PRIVET, LAQUO, RAQUO, N_TOKENS
};

static const char *const vocab[N_TOKENS] = {
    [PAD] = "[PAD]", [UNK] = "[UNK]", [CLS] = "[CLS]", [SEP] = "[SEP]", [MASK] = "[MASK]",
    [HELLO] = W "hello", [WORLD] = W "world", [PLAY] = W "play", [ING] = "ing", [P_] = W "p", [LAY] = "lay",
    [COMMA] = W ",", [BANG] = W "!", [DOT] = W ".", [NI] = W "\xe4\xbd\xa0", [HAO] = W "\xe5\xa5\xbd",
    [A_] = W "a", [B_] = W "b", [PLUS] = W "+", [CLS_W] = W "cls", [SEP_W] = W "sep", [LBR] = W "[",
    [RBR] = W "]", [CAFE] = W "cafe", [CAFE_ACUTE] = W "caf\xc3\xa9",
    [PARA] = W "\xcf\x80\xce\xb1\xcf\x81\xce\xb1",                 /* παρα */
    [PRIVET] = W "\xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82", /* привет */
    [LAQUO] = W "\xc2\xab", [RAQUO] = W "\xc2\xbb",
};

static const char *tmp_path(const char *name)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    return path;
}

static llm_tokenizer *load_gguf_file(const char *path, llm_err *err)
{
    gguf_ctx *g = gguf_open(path, err);
    llm_tokenizer *t = g ? llm_tok_load_gguf(g, err) : NULL;
    gguf_close(g);
    return t;
}

/* The vocabulary above as a GGUF converted by llama.cpp: bert model, token types, cls / seperator ids. */
static llm_tokenizer *small_vocab(void)
{
    int32_t type[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++)
        type[i] = i <= MASK ? TOK_CONTROL : TOK_NORMAL;
    gguf_writer *w = gguf_writer_new();
    gguf_w_str(w, "tokenizer.ggml.model", "bert");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", vocab, NULL, N_TOKENS);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, N_TOKENS);
    gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", UNK);
    gguf_w_u32(w, "tokenizer.ggml.cls_token_id", CLS);
    gguf_w_u32(w, "tokenizer.ggml.seperator_token_id", SEP);
    gguf_w_u32(w, "tokenizer.ggml.padding_token_id", PAD);
    llm_err err = { { 0 } };
    const char *path = tmp_path("small.gguf");
    int rc = gguf_writer_write(w, path, &err);
    gguf_writer_free(w);
    llm_tokenizer *t = rc == 0 ? llm_tok_load(path, &err) : NULL;
    ok(t != NULL, "small bert vocabulary written and loaded (%s)", t ? "ok" : err.msg);
    return t;
}

static void test_words(const llm_tokenizer *t)
{
    EXPECT(t, "hello world", 0, "plain words", HELLO, WORLD);
    EXPECT(t, "playing", 0, "a word in pieces, longest first: play + ing (not p + lay + ing)", PLAY, ING);
    EXPECT(t, "play", 0, "a whole-word piece", PLAY);
    EXPECT(t, "zzz", 0, "an unknown word: one [UNK]", UNK);
    EXPECT(t, "helloz world", 0, "a word that matches only in part: one [UNK] for all of it", UNK, WORLD);
    EXPECT(t, "hello,world!", 0, "punctuation is a word of its own", HELLO, COMMA, WORLD, BANG);
    EXPECT(t, "hello ,  world !", 0, "spaces around punctuation change nothing", HELLO, COMMA, WORLD, BANG);
    EXPECT(t, "a+b", 0, "an ASCII symbol is a word of its own", A_, PLUS, B_);
    EXPECT(t, "a\xc2\xa9" "b", 0, "a non-ASCII symbol (\xc2\xa9) is not: a\xc2\xa9" "b one unknown word", UNK);
    EXPECT(t, "\xc2\xabhello\xc2\xbb", 0, "Latin-1 punctuation \xc2\xab \xc2\xbb splits", LAQUO, HELLO, RAQUO);
    EXPECT(t, "hello\xe2\x80\x94world", 0, "an em dash (U+2014) is a word of its own", HELLO, UNK, WORLD);
    EXPECT(t, "hello\xe3\x80\x82world\xef\xbc\x81", 0, "CJK and fullwidth punctuation split", HELLO, UNK, WORLD,
           UNK);
    EXPECT(t, "HELLO World", 0, "uppercase is lowercased", HELLO, WORLD);
    EXPECT(t, "\xce\xa0\xce\x91\xce\xa1\xce\x91 \xd0\x9f\xd0\xa0\xd0\x98\xd0\x92\xd0\x95\xd0\xa2", 0,
           "Greek and Cyrillic capitals lowercased", PARA, PRIVET);
    EXPECT(t, "\xe4\xbd\xa0\xe5\xa5\xbd", 0, "CJK ideographs: one word each", NI, HAO);
    EXPECT(t, "hello\xe4\xbd\xa0\xe5\xa5\xbdworld", 0, "CJK ideographs split words they touch", HELLO, NI, HAO,
           WORLD);
    EXPECT(t, "hello\tworld\nhello\r\n world\xe3\x80\x80hello\xc2\xa0world\xe2\x80\x83hello", 0,
           "whitespace: tab, newline, CR LF, U+3000, NBSP, em space", HELLO, WORLD, HELLO, WORLD, HELLO, WORLD,
           HELLO);
    check(t, "  \t\n ", 5, 0, NULL, 0, "whitespace only: nothing");
    EXPECT(t, "hel\x01lo wor\x7fld hel\xe2\x80\x8blo", 0, "control and format characters dropped inside words",
           HELLO, WORLD, HELLO);
    EXPECT(t, "hel\0lo wor\xef\xbf\xbdld", 0, "NUL and U+FFFD dropped", HELLO, WORLD);
    EXPECT(t, "hel\xfflo wor\xc3ld", 0, "invalid UTF-8 bytes dropped", HELLO, WORLD);
    EXPECT(t, "Caf\xc3\xa9", 0, "strip_accents (on with lowercase): Caf\xc3\xa9 -> cafe", CAFE);
    EXPECT(t, "cafe\xcc\x81", 0, "a combining accent is dropped too", CAFE);
    check(t, "", 0, 0, NULL, 0, "empty text: nothing");
}

static void test_special(const llm_tokenizer *t)
{
    EXPECT(t, "[CLS] hello [SEP]", LLM_TOK_PARSE_SPECIAL, "special-token text parsed with PARSE_SPECIAL", CLS,
           HELLO, SEP);
    EXPECT(t, "[CLS]hello[SEP]world", LLM_TOK_PARSE_SPECIAL, "specials split words they touch", CLS, HELLO, SEP,
           WORLD);
    EXPECT(t, "[CLS] hello [SEP]", 0, "without PARSE_SPECIAL it is text (lowercased, brackets split)", LBR, CLS_W,
           RBR, HELLO, LBR, SEP_W, RBR);
    EXPECT(t, "hello world", LLM_TOK_ADD_BOS, "ADD_BOS prepends [CLS]", CLS, HELLO, WORLD);
    ok(llm_tok_kind_of(t) == LLM_TOK_WPM && llm_tok_bos(t) == CLS && llm_tok_eos(t) == SEP,
       "kind WPM; BOS from cls_token_id, EOS from seperator_token_id");
    ok(llm_tok_add_bos(t) && llm_tok_add_eos(t), "BOS and EOS wanted by default (llama.cpp's [CLS] ... [SEP])");
    ok(llm_tok_is_special(t, CLS) && llm_tok_is_special(t, SEP) && !llm_tok_is_special(t, HELLO),
       "[CLS] and [SEP] are control tokens");
}

static void test_decode(const llm_tokenizer *t)
{
    const char *p;
    size_t n;
    ok(llm_tok_piece(t, HELLO, &p, &n) == 0 && n == 6 && memcmp(p, " hello", 6) == 0,
       "piece of \xe2\x96\x81hello: \" hello\"");
    ok(llm_tok_piece(t, ING, &p, &n) == 0 && n == 3 && memcmp(p, "ing", 3) == 0, "piece of a continuation: its bytes");
    int32_t *ids = NULL;
    const char *text = "hello world, playing";
    int k = llm_tok_encode(t, text, strlen(text), LLM_TOK_ADD_BOS, &ids);
    char *s = k > 0 ? llm_tok_decode(t, ids, (size_t)k) : NULL;
    /* the space before ',' is WordPiece's: a punctuation mark is a word, decoded with its word-initial space */
    ok(s && strcmp(s, "hello world , playing") == 0, "decode(encode(\"%s\")) = \"%s\"", text, s ? s : "(null)");
    free(s);
    s = k > 0 ? llm_tok_decode_ex(t, ids, (size_t)k, 0) : NULL;
    ok(s && strcmp(s, "[CLS]hello world , playing") == 0, "with control tokens: \"%s\"", s ? s : "(null)");
    free(s);
    /* streaming: the first word's space is dropped, later ones kept */
    llm_detok d;
    char out[128];
    size_t len = 0;
    llm_detok_init(&d, t);
    for (int i = 0; i < k; i++)
        len += llm_detok_push(&d, ids[i], out + len, sizeof(out) - len - 1);
    len += llm_detok_flush(&d, out + len, sizeof(out) - len - 1);
    out[len] = 0;
    ok(strcmp(out, "hello world , playing") == 0, "streaming detokenizer: \"%s\"", out);
    free(ids);
    s = llm_tok_decode(t, (const int32_t[]){ CLS, NI, HAO, SEP, PAD }, 5);
    ok(s && strcmp(s, "\xe4\xbd\xa0 \xe5\xa5\xbd") == 0, "CJK decodes a space apart; [SEP] [PAD] skipped: \"%s\"",
       s ? s : "(null)");
    free(s);
}

/* BertNormalizer switches: lowercase off keeps capitals (and accents, as strip_accents follows it). */
static void test_switches(llm_tokenizer *t)
{
    t->wpm_lower = 0;
    t->wpm_strip = 0;
    EXPECT(t, "HELLO hello", 0, "lowercase off: HELLO unknown", UNK, HELLO);
    EXPECT(t, "caf\xc3\xa9", 0, "strip_accents off: caf\xc3\xa9 stays whole", CAFE_ACUTE);
    t->wpm_lower = 1;
    EXPECT(t, "Caf\xc3\xa9", 0, "lowercase on, strip_accents off", CAFE_ACUTE);
    t->wpm_strip = 1;
}

/* The GGUF keys llama.cpp reads: add_bos / add_eos, lowercase and strip_accents, bos over cls. */
static void test_gguf_keys(void)
{
    int32_t type[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++)
        type[i] = i <= MASK ? TOK_CONTROL : TOK_NORMAL;
    gguf_writer *w = gguf_writer_new();
    gguf_w_str(w, "tokenizer.ggml.model", "bert");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", vocab, NULL, N_TOKENS);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, N_TOKENS);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 0);
    gguf_w_bool(w, "tokenizer.ggml.add_eos_token", 0);
    gguf_w_bool(w, "tokenizer.ggml.normalizer.lowercase", 0);
    llm_err err = { { 0 } };
    const char *path = tmp_path("keys.gguf");
    llm_tokenizer *t = gguf_writer_write(w, path, &err) == 0 ? load_gguf_file(path, &err) : NULL;
    gguf_writer_free(w);
    ok(t != NULL, "bert GGUF without special ids loads (%s)", t ? "ok" : err.msg);
    if (t == NULL)
        return;
    ok(llm_tok_bos(t) == CLS && llm_tok_eos(t) == SEP, "no ids in the metadata: [CLS] and [SEP] found by name");
    ok(!llm_tok_add_bos(t) && !llm_tok_add_eos(t), "add_bos_token / add_eos_token false win");
    EXPECT(t, "HELLO caf\xc3\xa9 zz", 0, "normalizer.lowercase false: no lowercasing, no accent stripping", UNK,
           CAFE_ACUTE, UNK);
    llm_tok_free(t);
}

/* ---- the vocabulary derived from tok512.bin ---- */

static void test_writer(void)
{
    char **tok = NULL;
    int n = 0, n_count = 0, n_vocab = 0;
    llm_err err = { { 0 } };
    ok(llm_wpm_vocab_from_llama2c(TOK512, &tok, &n, &err) == 0 && n > 5, "WordPiece vocabulary from tok512.bin: %d "
       "tokens (%s)", n, err.msg);
    ok(llm_wpm_vocab_from_llama2c(TOK512, NULL, &n_count, &err) == 0 && n_count == n, "count-only call: %d", n_count);
    ok(llm_wpm_vocab_from_llama2c("/nonexistent/tok.bin", NULL, &n_count, &err) != 0 && err.msg[0],
       "a missing file is refused: %s", err.msg);
    gguf_writer *w = gguf_writer_new();
    int rc = llm_gguf_w_wpm_from_llama2c(w, TOK512, 0, &n_vocab, &err);
    const char *path = tmp_path("tok512_wpm.gguf");
    ok(rc == 0 && n_vocab == n && gguf_writer_write(w, path, &err) == 0, "GGUF written, n_vocab %d", n_vocab);
    gguf_writer_free(w);
    gguf_ctx *g = gguf_open(path, &err);
    int64_t v[7] = { -1, -1, -1, -1, -1, -1, -1 };
    static const char *const keys[7] = { "bos_token_id", "eos_token_id", "unknown_token_id", "seperator_token_id",
                                         "padding_token_id", "cls_token_id", "mask_token_id" };
    for (int i = 0; g && i < 7; i++) {
        char key[64];
        snprintf(key, sizeof(key), "tokenizer.ggml.%s", keys[i]);
        gguf_get_i64(g, key, &v[i]);
    }
    ok(v[0] == 2 && v[1] == 3 && v[2] == 1 && v[3] == 3 && v[4] == 0 && v[5] == 2 && v[6] == 4,
       "bos 2, eos 3, unknown 1, seperator 3, padding 0, cls 2, mask 4");
    llm_tokenizer *t = g ? llm_tok_load_gguf(g, &err) : NULL;
    gguf_close(g);
    ok(t != NULL && llm_tok_kind_of(t) == LLM_TOK_WPM && llm_tok_vocab_size(t) == n, "loads back as WordPiece");
    if (t == NULL) {
        llm_wpm_vocab_free(tok, n);
        return;
    }
    static const char *const first[5] = { "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]" };
    int good = 1, dup = 0, upper = 0, bare_mark = 0;
    for (int i = 0; i < 5; i++)
        good &= strcmp(tok[i], first[i]) == 0 && llm_tok_is_special(t, i);
    ok(good, "ids 0-4: [PAD] [UNK] [CLS] [SEP] [MASK], control tokens");
    for (int i = 0; i < n; i++) {
        dup += llm_tok_find(t, tok[i]) != i;
        bare_mark += strcmp(tok[i], W) == 0;
        for (const char *c = tok[i] + (i < 5 ? strlen(tok[i]) : 0); *c; c++)
            upper += *c >= 'A' && *c <= 'Z';
    }
    ok(dup == 0 && upper == 0 && bare_mark == 0, "no duplicate spellings (%d), no capitals (%d), no bare mark (%d)",
       dup, upper, bare_mark);
    ok(llm_tok_find(t, W "the") > 4 && llm_tok_find(t, "<0x0A>") < 0 && llm_tok_find(t, "<s>") < 0,
       "\xe2\x96\x81the is a word-initial piece; byte tokens and <s> dropped");
    ok(llm_tok_bos(t) == 2 && llm_tok_eos(t) == 3 && llm_tok_add_bos(t) && llm_tok_add_eos(t), "[CLS] ... [SEP]");
    const char *story = "Once upon a time, there was a little girl named Lily. She LOVED to play outside!";
    int32_t *ids = NULL;
    int k = llm_tok_encode(t, story, strlen(story), LLM_TOK_ADD_BOS, &ids);
    int unk = 0;
    for (int i = 0; i < k; i++)
        unk += ids[i] == 1;
    char *s = k > 0 ? llm_tok_decode(t, ids, (size_t)k) : NULL;
    ok(k > 10 && ids[0] == 2 && unk == 0, "a story encodes without [UNK] (%d tokens)", k);
    ok(s && strcmp(s, "once upon a time , there was a little girl named lily . she loved to play outside !") == 0,
       "decodes to the lowercased words: \"%s\"", s ? s : "(null)");
    free(s);
    free(ids);
    /* every ASCII word spells out */
    unsigned seed = 7;
    int unk_words = 0;
    for (int r = 0; r < 500; r++) {
        char word[24];
        int len = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 20;
        for (int i = 0; i < len; i++)
            word[i] = (char)('!' + ((seed = seed * 1103515245u + 12345u) >> 16) % 94);
        k = llm_tok_encode(t, word, (size_t)len, 0, &ids);
        for (int i = 0; i < k; i++)
            unk_words += ids[i] == 1;
        free(ids);
    }
    ok(unk_words == 0, "500 random printable ASCII words: no [UNK] (%d)", unk_words);
    llm_tok_free(t);
    llm_wpm_vocab_free(tok, n);
}

/* ---- Hugging Face tokenizer.json ---- */

static const char *hf_json(const char *normalizer, const char *post)
{
    static char buf[2048];
    snprintf(buf, sizeof(buf),
             "{\"added_tokens\":["
             "{\"id\":0,\"content\":\"[PAD]\",\"special\":true},{\"id\":100,\"content\":\"[UNK]\",\"special\":true},"
             "{\"id\":101,\"content\":\"[CLS]\",\"special\":true},{\"id\":102,\"content\":\"[SEP]\",\"special\":true},"
             "{\"id\":103,\"content\":\"[MASK]\",\"special\":true}],"
             "\"normalizer\":%s,\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},\"post_processor\":%s,"
             "\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true},"
             "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\","
             "\"max_input_chars_per_word\":100,\"vocab\":{\"[PAD]\":0,\"[unused0]\":1,\"[UNK]\":100,\"[CLS]\":101,"
             "\"[SEP]\":102,\"[MASK]\":103,\"hello\":104,\"world\":105,\"play\":106,\"##ing\":107,\",\":108,"
             "\"##s\":109,\"cafe\":110}}}",
             normalizer, post);
    return buf;
}

static llm_tokenizer *load_hf(const char *name, const char *json, llm_err *err)
{
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(json, f);
        fclose(f);
    }
    return llm_tok_load(path, err);
}

static void test_hf(void)
{
    static const char *const bert_norm = "{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":"
                                         "true,\"strip_accents\":null,\"lowercase\":true}";
    static const char *const template = "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":"
                                        "\"[CLS]\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},"
                                        "{\"SpecialToken\":{\"id\":\"[SEP]\",\"type_id\":0}}]}";
    llm_err err = { { 0 } };
    llm_tokenizer *t = load_hf("bert.json", hf_json(bert_norm, template), &err);
    ok(t != NULL && llm_tok_kind_of(t) == LLM_TOK_WPM, "WordPiece tokenizer.json loads (%s)", t ? "ok" : err.msg);
    if (t == NULL)
        return;
    ok(llm_tok_vocab_size(t) == 111 && llm_tok_bos(t) == 101 && llm_tok_eos(t) == 102 && llm_tok_add_bos(t) &&
       llm_tok_add_eos(t), "111 ids, [CLS] 101 / [SEP] 102 added (TemplateProcessing)");
    ok(llm_tok_find(t, W "hello") == 104 && llm_tok_find(t, "ing") == 107 && llm_tok_find(t, "[unused0]") == 1 &&
       llm_tok_find(t, "##ing") < 0, "respelt as GGUF: \xe2\x96\x81hello, ing (no ##), [unused0] as it is");
    EXPECT(t, "Hello worlds, PLAYING Caf\xc3\xa9", LLM_TOK_ADD_BOS, "encodes with ## pieces", 101, 104, 105, 109,
           108, 106, 107, 110);
    EXPECT(t, "[SEP] hello", LLM_TOK_PARSE_SPECIAL, "added tokens are specials", 102, 104);
    EXPECT(t, "helloxyz", 0, "unknown: model.unk_token", 100);
    int32_t *ids = NULL;
    int k = llm_tok_encode(t, "hello playing,world", 19, LLM_TOK_ADD_BOS, &ids);
    char *s = k > 0 ? llm_tok_decode(t, ids, (size_t)k) : NULL;
    ok(s && strcmp(s, "hello playing , world") == 0, "decodes: \"%s\"", s ? s : "(null)");
    free(s);
    free(ids);
    llm_tok_free(t);

    t = load_hf("cased.json", hf_json("{\"type\":\"BertNormalizer\",\"lowercase\":false}", "null"), &err);
    ok(t != NULL && !llm_tok_add_bos(t) && !llm_tok_add_eos(t), "lowercase false, no post-processor: nothing added");
    if (t != NULL)
        EXPECT(t, "Hello hello caf\xc3\xa9", 0, "cased: Hello unknown, accents kept", 100, 104, 100);
    llm_tok_free(t);

    static const char *const seq_norm = "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFD\"},{\"type\":"
                                        "\"Lowercase\"},{\"type\":\"StripAccents\"}]}";
    static const char *const bert_proc =
        "{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",102],\"cls\":[\"[CLS]\",101]}";
    t = load_hf("bertproc.json", hf_json(seq_norm, bert_proc), &err);
    ok(t != NULL && llm_tok_add_bos(t) && llm_tok_add_eos(t), "BertProcessing; a Sequence normalizer (%s)",
       t ? "ok" : err.msg);
    if (t != NULL)
        EXPECT(t, "CAF\xc3\x89", 0, "NFD + Lowercase + StripAccents", 110);
    llm_tok_free(t);

    t = load_hf("badnorm.json", hf_json("{\"type\":\"Precompiled\"}", "null"), &err);
    ok(t == NULL && strstr(err.msg, "normalizer"), "an unknown normalizer is refused: %s", err.msg);
    llm_tok_free(t);
}

/* ---- random bytes ---- */

static void test_fuzz(const llm_tokenizer *t, const char *label)
{
    static const char *const frags[] = { "hello", " ", ",", "\xe4\xbd\xa0", "[CLS]", "[SEP]", "\xc3\xa9", "\xcc\x81",
                                         "\xe3\x80\x80", "\xf0\x9f\x98\x80", "\xff", "\xc3", "\xe2\x96\x81", "\t",
                                         "ing", "PLAY", "\0", "\xef\xbf\xbd", "\xed\xa0\x80" };
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int bad = 0, fail = 0, n_vocab = llm_tok_vocab_size(t);
    for (int r = 0; r < 4000; r++) {
        char buf[256];
        size_t len = 0;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int parts = (int)(s >> 59);
        for (int p = 0; p < parts && len < sizeof(buf) - 8; p++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            if ((s >> 62) == 0) { /* a random byte */
                buf[len++] = (char)(s >> 40);
            } else {
                const char *f = frags[(s >> 33) % (sizeof(frags) / sizeof(frags[0]))];
                size_t fl = f[0] ? strlen(f) : 1;
                memcpy(buf + len, f, fl);
                len += fl;
            }
        }
        int32_t *ids = NULL;
        int n = llm_tok_encode(t, buf, len, (int)(s >> 20) & 3, &ids);
        if (n < 0) {
            fail++;
            continue;
        }
        for (int i = 0; i < n; i++)
            bad += ids[i] < 0 || ids[i] >= n_vocab;
        char *d = llm_tok_decode_ex(t, ids, (size_t)n, (int)(s >> 30) & 1);
        fail += d == NULL;
        free(d);
        free(ids);
    }
    ok(bad == 0 && fail == 0, "%s: 4000 random byte strings: every id in range (%d out), no failure (%d)", label,
       bad, fail);
}

int main(void)
{
    if (mkdtemp(tmpdir) == NULL) {
        ok(0, "mkdtemp");
        return done_testing();
    }
    llm_tokenizer *t = small_vocab();
    if (t != NULL) {
        test_words(t);
        test_special(t);
        test_decode(t);
        test_switches(t);
        test_fuzz(t, "small vocabulary");
    }
    llm_tok_free(t);
    test_gguf_keys();
    test_writer();
    test_hf();
    llm_err err = { { 0 } };
    gguf_writer *w = gguf_writer_new();
    const char *path = tmp_path("fuzz.gguf");
    if (llm_gguf_w_wpm_from_llama2c(w, TOK512, 0, NULL, &err) == 0 && gguf_writer_write(w, path, &err) == 0 &&
        (t = llm_tok_load(path, &err)) != NULL) {
        test_fuzz(t, "tok512 vocabulary");
        llm_tok_free(t);
    }
    gguf_writer_free(w);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        diag("could not remove %s", tmpdir);
    return done_testing();
}
