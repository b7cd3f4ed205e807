/* JSON mode (engine/json_mode.c): the recogniser against valid and invalid JSON texts, fed whole, byte by
 * byte and split at every point; the limits (depth, whitespace); the vocabulary mask on the real Llama 3
 * and stories260K tokenizers (a token is left exactly when its bytes continue the text, control tokens
 * never); and a walk that builds a document token by token through the mask. */
#include "json_mode.h"
#include "tap.h"
#include "tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOK512   "../shared/models/stories260K/tok512.bin"
#define TOK_JSON "../shared/tokenizers/llama3/tokenizer.json"

static int feed_str(llm_json_state *s, const char *p) { return llm_json_feed(s, p, strlen(p)); }

/* 1 when the text is accepted whole, byte by byte and in two parts split anywhere, ending done or not as
 * want_done says. */
static int accepts(const char *text, int top_object, int want_done)
{
    size_t n = strlen(text);
    llm_json_state s;
    llm_json_init(&s, top_object);
    if (feed_str(&s, text) != 0 || llm_json_done(&s) != want_done)
        return 0;
    llm_json_init(&s, top_object);
    for (size_t i = 0; i < n; i++)
        if (llm_json_feed(&s, text + i, 1) != 0)
            return 0;
    if (llm_json_done(&s) != want_done)
        return 0;
    for (size_t cut = 0; cut <= n; cut++) {
        llm_json_init(&s, top_object);
        if (llm_json_feed(&s, text, cut) != 0 || llm_json_feed(&s, text + cut, n - cut) != 0 ||
            llm_json_done(&s) != want_done)
            return 0;
    }
    return 1;
}

/* 1 when some prefix is refused, and the refusal leaves the state as it was. */
static int refuses(const char *text, int top_object)
{
    llm_json_state s, before;
    llm_json_init(&s, top_object);
    for (size_t i = 0; text[i]; i++) {
        before = s;
        if (llm_json_feed(&s, text + i, 1) != 0)
            return memcmp(&s, &before, sizeof s) == 0;
    }
    return 0;
}

static void test_recogniser(void)
{
    static const char *const objects[] = {
        "{}", " {\n}", "{\"a\":1}", "{\"a\" : -0.5e+10, \"b\":[true,false,null,{}], \"c\":\"x\\\"\\\\\\/\\b\\f\\n\\r\\t\"}",
        "{\"\\u00e9\\uD83D\\uDE00\":[[[]]],\"n\":[0,-1,12.25,1E3,2e-2,0.0]}", "{\"k\":{\"k\":{\"k\":\"\xc3\xa9 \xe2\x9c\x93\"}}}",
        "{\"a\":\"\"}\n", "{\"x\":[1 , 2\t,\r3]}",
    };
    int ok_all = 1;
    for (size_t i = 0; i < sizeof objects / sizeof objects[0]; i++)
        if (!accepts(objects[i], 1, 1)) {
            diag("refused: %s", objects[i]);
            ok_all = 0;
        }
    ok(ok_all, "%zu JSON objects accepted whole, byte by byte and split anywhere, and complete",
       sizeof objects / sizeof objects[0]);
    ok(accepts("{\"a\":[1,{\"b\":", 1, 0) && accepts("{\"a\":\"unfinished", 1, 0) && accepts(" ", 1, 0),
       "prefixes are accepted and not complete");
    ok(accepts("[1,2]", 0, 1) && accepts("\"s\"", 0, 1) && accepts("true", 0, 1) && accepts("-12.5e3 ", 0, 1) &&
       accepts("-12.5e3", 0, 0), "any value at the top when no object is asked for; a number completes at "
       "the byte after it");

    static const char *const bad_obj[] = {
        "[]", "\"s\"", "1", "{,}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{a:1}", "{\"a\":01}", "{\"a\":1.}",
        "{\"a\":.5}", "{\"a\":1e}", "{\"a\":-}", "{\"a\":+1}", "{\"a\":tru}", "{\"a\":trux}", "{\"a\":nul1}",
        "{\"a\":\"\\x\"}", "{\"a\":\"\\u12g4\"}", "{\"a\":\"tab\there\"}", "{\"a\":[1,]}", "{\"a\":[1}", "{\"a\":1]",
        "{\"a\":1}}", "{\"a\":1} x", "{\"a\":1},", "{\"a\" 1}", "{\"a\"::1}", "{'a':1}", "{\"a\":True}",
    };
    int refused_all = 1;
    for (size_t i = 0; i < sizeof bad_obj / sizeof bad_obj[0]; i++)
        if (!refuses(bad_obj[i], 1)) {
            diag("accepted: %s", bad_obj[i]);
            refused_all = 0;
        }
    ok(refused_all, "%zu invalid texts refused at their first wrong byte, the state left as it was",
       sizeof bad_obj / sizeof bad_obj[0]);

    /* limits */
    char deep[2 * LLM_JSON_MAX_DEPTH + 8];
    size_t n = 0;
    deep[n++] = '{';
    deep[n++] = '"';
    deep[n++] = '"';
    deep[n++] = ':';
    for (int i = 1; i < LLM_JSON_MAX_DEPTH; i++)
        deep[n++] = '[';
    deep[n] = '\0';
    llm_json_state s;
    llm_json_init(&s, 1);
    ok(feed_str(&s, deep) == 0 && feed_str(&s, "[") != 0, "nesting: %d levels accepted, one more refused",
       LLM_JSON_MAX_DEPTH);
    char ws[LLM_JSON_MAX_WS + 2];
    memset(ws, ' ', sizeof ws - 1);
    ws[sizeof ws - 1] = '\0';
    llm_json_init(&s, 1);
    ok(llm_json_feed(&s, ws, LLM_JSON_MAX_WS) == 0 && llm_json_feed(&s, " ", 1) != 0 && feed_str(&s, "{") == 0 &&
       llm_json_feed(&s, ws, LLM_JSON_MAX_WS) == 0 && feed_str(&s, "}") == 0,
       "whitespace: %d bytes in a row, not one more; the count starts again after each token", LLM_JSON_MAX_WS);
    /* digits: 16 in each part of a number, not one more */
    ok(accepts("{\"n\":-1234567890123456.1234567890123456e+1234567890123456}", 1, 1),
       "a number with %d digits in its integer part, fraction and exponent", LLM_JSON_MAX_DIGITS);
    ok(refuses("{\"n\":12345678901234567}", 1) && refuses("{\"n\":1.12345678901234567}", 1) &&
       refuses("{\"n\":1e12345678901234567}", 1) && refuses("[-12345678901234567]", 0),
       "... %d digits in any part are refused", LLM_JSON_MAX_DIGITS + 1);
    llm_json_init(&s, 1);
    ok(feed_str(&s, "{\"") == 0 && llm_json_feed(&s, ws, sizeof ws - 1) == 0, "inside a string spaces are text");
}

/* Every token's fate under the mask agrees with feeding its bytes; control tokens are masked. */
static void check_mask(const char *name, const llm_tokenizer *t, const llm_json_vocab *v, const char *prefix)
{
    int n = llm_tok_vocab_size(t);
    float *lg = malloc((size_t)n * sizeof(float));
    llm_json_state s;
    llm_json_init(&s, 1);
    feed_str(&s, prefix);
    for (int i = 0; i < n; i++)
        lg[i] = 0.5f;
    int left = llm_json_mask(v, &s, lg, n), agree = 1, counted = 0, specials_masked = 1;
    for (int id = 0; id < n; id++) {
        const char *p;
        size_t k;
        llm_json_state u = s;
        int fits = llm_tok_piece(t, id, &p, &k) == 0 && k > 0 && !llm_tok_is_special(t, id) &&
                   llm_json_feed(&u, p, k) == 0;
        agree &= fits == (lg[id] == 0.5f) && (fits || lg[id] == -INFINITY);
        counted += fits;
        if (llm_tok_is_special(t, id))
            specials_masked &= lg[id] == -INFINITY;
    }
    ok(agree && counted == left && left > 0 && specials_masked,
       "%s after '%s': the mask leaves exactly the %d tokens whose bytes continue the text, no control token",
       name, prefix, left);
    free(lg);
}

/* Greedy over made-up logits that prefer long tokens: every pick is accepted, and the text is JSON. */
static void walk(const char *name, const llm_json_vocab *v, int n)
{
    float *lg = malloc((size_t)n * sizeof(float));
    llm_json_state s;
    llm_json_init(&s, 1);
    int steps = 0, fine = 1;
    uint64_t x = 99;
    for (; steps < 400 && !llm_json_done(&s); steps++) {
        for (int i = 0; i < n; i++) {
            size_t k;
            llm_json_token_bytes(v, i, &k);
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            lg[i] = (float)((x >> 40) & 0xffff) / 65536.0f + (float)k * 0.05f;
        }
        for (int i = 0; i < n; i++) { /* no closing for 40 steps, then steer toward it */
            size_t k;
            const char *p = llm_json_token_bytes(v, i, &k);
            if (k > 0 && (memchr(p, '}', k) || memchr(p, ']', k) || (steps > 40 && memchr(p, '"', k))))
                lg[i] += steps > 40 ? 10.0f : -10.0f;
        }
        if (llm_json_mask(v, &s, lg, n) == 0) {
            fine = 0;
            break;
        }
        int best = 0;
        for (int i = 1; i < n; i++)
            best = lg[i] > lg[best] ? i : best;
        fine &= llm_json_accept(v, &s, best) == 0;
    }
    ok(fine && llm_json_done(&s), "%s: a greedy walk through the mask closes its object after %d tokens", name,
       steps);
    free(lg);
}

/* Strings hold well-formed UTF-8 only (RFC 8259 texts are UTF-8): a byte that cannot continue the
 * character so far is refused, so a mask never lets a model run on in continuation bytes. */
static void test_utf8(void)
{
    static const char *const good[] = { "{\"a\":\"\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\xed\x9f\xbf\"}",
                                        "{\"\xe4\xbd\xa0\":\"\xe0\xa0\x80\xf0\x90\x80\x80\"}" };
    static const char *const bad[] = { "{\"a\":\"\x80\"}", "{\"a\":\"\xc3\"}", "{\"a\":\"\xc3\xa9\xa9\"}",
                                       "{\"a\":\"\xc0\xaf\"}", "{\"a\":\"\xe0\x9f\xbf\"}", "{\"a\":\"\xed\xa0\x80\"}",
                                       "{\"a\":\"\xf0\x8f\xbf\xbf\"}", "{\"a\":\"\xf4\x90\x80\x80\"}", "{\"a\":\"\xf5\x80\"}",
                                       "{\"\xff\":1}", "{\"a\":\"\xe2\x9c\"}" };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ok(accepts(good[i], 1, 1), "UTF-8 accepted: text %zu", i);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ok(refuses(bad[i], 1), "ill-formed UTF-8 refused: text %zu", i);
}

int main(void)
{
    test_recogniser();
    test_utf8();
    static const char *const prefixes[] = { "", "{", "{\"", "{\"k\"", "{\"k\":", "{\"k\":-1", "{\"k\":[tr",
                                            "{\"k\":\"\\", "{\"k\":\"\\u0" };
    static const char *const files[] = { TOK_JSON, TOK512 }, *const names[] = { "Llama 3", "stories260K" };
    for (int f = 0; f < 2; f++) {
        llm_err err = { { 0 } };
        llm_tokenizer *t = llm_tok_load(files[f], &err);
        if (t == NULL) {
            ok(0, "load %s: %s", files[f], err.msg);
            continue;
        }
        llm_json_vocab *v = llm_json_vocab_new(t);
        ok(v != NULL && llm_json_vocab_size(v) == llm_tok_vocab_size(t), "%s: JSON vocabulary of %d tokens",
           names[f], llm_json_vocab_size(v));
        for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
            check_mask(names[f], t, v, prefixes[i]);
        /* ids past the tokenizer's vocabulary (a padded embedding) are masked */
        int n = llm_tok_vocab_size(t);
        float *lg = calloc((size_t)n + 8, sizeof(float));
        llm_json_state s;
        llm_json_init(&s, 1);
        llm_json_mask(v, &s, lg, n + 8);
        int tail = 1;
        for (int i = n; i < n + 8; i++)
            tail &= lg[i] == -INFINITY;
        ok(tail, "%s: logits past the tokenizer's vocabulary are masked", names[f]);
        free(lg);
        walk(names[f], v, n);
        llm_json_vocab_free(v);
        llm_tok_free(t);
    }
    return done_testing();
}
