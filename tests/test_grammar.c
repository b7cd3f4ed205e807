/* GBNF grammars (engine/grammar.c, grammar_match.c): what the compiler refuses; texts each grammar derives
 * (whole, and split at every byte) and does not; the vocabulary mask against feeding every token on its own
 * (Llama 3 and stories260K vocabularies); and random walks through the mask whose outputs PCRE2 (the same
 * language written as a regex, recursion for the nested ones) or cJSON (a JSON grammar) checks. */
#include "grammar.h"
#include "json_schema.h"
#include "tap.h"
#include "tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <cjson/cJSON.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TOK512   "../shared/models/stories260K/tok512.bin"
#define TOK_JSON "../shared/tokenizers/llama3/tokenizer.json"

static llm_grammar *parse(const char *src)
{
    char err[256] = "";
    llm_grammar *g = llm_grammar_parse(src, strlen(src), err, sizeof err);
    if (g == NULL)
        diag("refused: %s", err);
    return g;
}

static void test_refusals(void)
{
    static const struct { const char *src, *why; } bad[] = {
        { "", "no rules" },
        { "   # only a comment\n", "no rules" },
        { "start ::= \"a\"", "no rule 'root'" },
        { "root ::= item", "rule 'item' is used but not defined" },
        { "root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive" },
        { "root ::= a\na ::= b \"x\"\nb ::= a | \"y\"", "left-recursive" },
        { "root ::= e? root \"x\" | \"y\"\ne ::= \"z\"", "left-recursive" },
        { "root ::= (\"a\"?)*", "left-recursive" },
        { "root ::= \"a", "without its closing '\"'" },
        { "root ::= [a-z", "without its closing ']'" },
        { "root ::= (\"a\" | \"b\"", "without its closing ')'" },
        { "root ::= \"a\")", "a ')' with no '('" },
        { "root ::= [z-a]", "the wrong way round" },
        { "root ::= \"a\"{3,1}", "the wrong way round" },
        { "root ::= \"a\"{2", "ends with '}'" },
        { "root ::= \"a\"{x}", "wants numbers" },
        { "root ::= \"a\"{100000}", "a repetition past" },
        { "root ::= \"\\q\"", "unknown escape" },
        { "root ::= \"\\x4\"", "hex digits" },
        { "root ::= \"\\U00110000\"", "past U+10FFFF" },
        { "root ::= \"a\"\nroot ::= \"b\"", "defined twice" },
        { "root ::= \"a\" ; \"b\"", "where an item" },
        { "root = \"a\"", "a rule's definition" },
        { "root ::= \"\xc3\x28\"", "not UTF-8" },
        { "root ::= \"a\" [^\\x00-\\U0010FFFF]", "holds no character" },
        { "root ::= x{9000} x{9000} x{9000} x{9000} x{9000} x{9000} x{9000} x{9000}\nx ::= \"a\"", "more than" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        llm_grammar *g = llm_grammar_parse(bad[i].src, strlen(bad[i].src), err, sizeof err);
        ok(g == NULL && strstr(err, bad[i].why) != NULL, "refused: %s -> %s", bad[i].src, err);
        llm_grammar_free(g);
    }
    char nul[] = "root ::= \"a\"";
    nul[10] = '\0';
    char err[256] = "";
    llm_grammar *g = llm_grammar_parse(nul, sizeof nul - 1, err, sizeof err);
    ok(g == NULL && strstr(err, "NUL") != NULL, "a NUL byte refused: %s", err);
    llm_grammar_free(g);
    char *big = malloc(LLM_GRAMMAR_MAX_TEXT + 20);
    memset(big, ' ', LLM_GRAMMAR_MAX_TEXT + 20);
    memcpy(big, "root ::= \"a\"", 12);
    g = llm_grammar_parse(big, LLM_GRAMMAR_MAX_TEXT + 20, err, sizeof err);
    ok(g == NULL && strstr(err, "more than") != NULL, "a text past the limit refused: %s", err);
    llm_grammar_free(g);
    free(big);
    /* a nested group deeper than the parser follows */
    char deep[400] = "root ::= ";
    for (int i = 0; i < 100; i++)
        strcat(deep, "(");
    strcat(deep, "\"a\"");
    for (int i = 0; i < 100; i++)
        strcat(deep, ")");
    g = llm_grammar_parse(deep, strlen(deep), err, sizeof err);
    ok(g == NULL && strstr(err, "nested") != NULL, "groups 100 deep refused: %s", err);
    llm_grammar_free(g);
}

/* Whole-text verdict: every byte fed, then whether it is a whole text. */
static int derives(const llm_grammar *g, const char *text, size_t len, size_t split)
{
    llm_grammar_state *s = llm_grammar_state_new(g);
    int r = s != NULL && llm_grammar_feed(s, text, split) == 0 && llm_grammar_feed(s, text + split, len - split) == 0 &&
            llm_grammar_accepts(s);
    llm_grammar_state_free(s);
    return r;
}

static const char *const G_LIST =
    "# answers, comma-separated\n"
    "root   ::= answer (\",\" ws answer)*\n"
    "answer ::= \"yes\" | \"no\" | [0-9]{1,3}\n"
    "ws     ::= [ \\t]*\n";
static const char *const G_PARENS = "root ::= \"(\" inner* \")\"\ninner ::= [a-z] | root\n";
static const char *const G_UNI =
    "root ::= greek+ \" \" any \"\\u00e9\" [^\"\\\\a-z]? \"!\"{0,2}\n"
    "greek ::= [\\u03b1-\\u03c9]\n"
    "any ::= .\n";
static const char *const G_ARITH =
    "root ::= expr\n"
    "expr ::= term ((\"+\" | \"-\") term)*\n"
    "term ::= factor ((\"*\" | \"/\") factor)*\n"
    "factor ::= [0-9]+ | \"(\" expr \")\" | \"-\" factor\n";
static const char *const G_EMPTY = "root ::= \"\" | \"a\" opt\nopt ::= \"b\"?\n";

static void test_texts(void)
{
    static const struct { const char *const *g; const char *text; int want; } cases[] = {
        { &G_LIST, "yes", 1 }, { &G_LIST, "yes,no, 12,\t\t7", 1 }, { &G_LIST, "1234", 0 }, { &G_LIST, "yes,", 0 },
        { &G_LIST, "maybe", 0 }, { &G_LIST, "", 0 }, { &G_LIST, "no ,yes", 0 }, { &G_LIST, "999,000", 1 },
        { &G_PARENS, "()", 1 }, { &G_PARENS, "(a(b)(c(d))e)", 1 }, { &G_PARENS, "(a(b)", 0 }, { &G_PARENS, "(a))", 0 },
        { &G_PARENS, "(A)", 0 },
        { &G_UNI, "\xce\xb1\xce\xb2 x\xc3\xa9!", 1 },           /* αβ xé! */
        { &G_UNI, "\xcf\x89 \xe2\x82\xac\xc3\xa9\xc3\x9f!!", 1 }, /* ω €éß!! */
        { &G_UNI, "\xcf\x89 \xe2\x82\xac\xc3\xa9q", 0 },         /* a lower-case letter after é: refused */
        { &G_UNI, "a x\xc3\xa9", 0 },                            /* not Greek */
        { &G_UNI, "\xce\xb1 \xf0\x9f\x98\x80\xc3\xa9\"", 0 },    /* '"' refused by the class */
        { &G_UNI, "\xce\xb1 \xf0\x9f\x98\x80\xc3\xa9", 1 },      /* an emoji as '.' */
        { &G_UNI, "\xce\xb1 \xc3\xa9!!!", 0 },                   /* '.' took é, then no é; and three '!' */
        { &G_ARITH, "1+2*(3-4)/-5", 1 }, { &G_ARITH, "((7))", 1 }, { &G_ARITH, "1+", 0 }, { &G_ARITH, "(1", 0 },
        { &G_ARITH, "--3", 1 }, { &G_ARITH, "2**3", 0 },
        { &G_EMPTY, "", 1 }, { &G_EMPTY, "a", 1 }, { &G_EMPTY, "ab", 1 }, { &G_EMPTY, "abb", 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        llm_grammar *g = parse(*cases[i].g);
        size_t len = strlen(cases[i].text);
        int same = 1, whole = g != NULL ? derives(g, cases[i].text, len, 0) : -1;
        for (size_t k = 1; g != NULL && k <= len; k++)
            same &= derives(g, cases[i].text, len, k) == whole;
        ok(whole == cases[i].want && same, "'%s' %s (split at every byte: the same)", cases[i].text,
           cases[i].want ? "derived" : "refused");
        llm_grammar_free(g);
    }
    /* a refused byte leaves the state as it was */
    llm_grammar *g = parse(G_LIST);
    llm_grammar_state *s = g ? llm_grammar_state_new(g) : NULL;
    ok(s && llm_grammar_feed(s, "ye", 2) == 0 && llm_grammar_feed(s, "x", 1) != 0 && llm_grammar_feed(s, "s", 1) == 0 &&
       llm_grammar_accepts(s) && llm_grammar_can_go_on(s), "a refused byte changes nothing; 'yes' whole, ',' may follow");
    llm_grammar_state_free(s);
    llm_grammar_free(g);
    /* through the schema interface: done only where nothing can follow */
    char err[256];
    llm_schema *sc = llm_schema_grammar("root ::= \"ab\" | \"abc\"", 21, err, sizeof err);
    llm_schema_state *st = sc ? llm_schema_state_new(sc) : NULL;
    ok(st && llm_schema_feed(st, "ab", 2) == 0 && llm_schema_can_end(st) && !llm_schema_done(st) &&
       llm_schema_feed(st, "c", 1) == 0 && llm_schema_done(st), "schema interface: 'ab' may end, 'abc' is done");
    llm_schema_state_free(st);
    llm_schema_free(sc);
    sc = llm_schema_grammar("root ::= x", 10, err, sizeof err);
    ok(sc == NULL && strstr(err, "'x'") != NULL, "schema interface: the grammar's message: %s", err);
    g = parse("root ::= \"a\"{2,4} (\"b\" | \"c\")+ d\nd ::= (\"x\" \"y\")?");
    ok(g != NULL && llm_grammar_rules(g) >= 2, "repetitions make rules: %d", llm_grammar_rules(g));
    ok(g && derives(g, "aabx", 4, 0) == 0 && derives(g, "aaaabcbxy", 9, 0) && derives(g, "aac", 3, 0) &&
       !derives(g, "aaaaab", 6, 0), "{2,4}, +, ? as written");
    llm_grammar_free(g);
    /* a derivation nested past LLM_GRAMMAR_MAX_DEPTH is not followed, and nothing crashes */
    g = parse(G_PARENS);
    s = g ? llm_grammar_state_new(g) : NULL;
    int refused_at = -1;
    for (int i = 0; s && i < 2 * LLM_GRAMMAR_MAX_DEPTH && refused_at < 0; i++)
        if (llm_grammar_feed(s, "(", 1) != 0)
            refused_at = i;
    ok(refused_at > 100 && refused_at <= LLM_GRAMMAR_MAX_DEPTH, "nesting refused past the depth limit (at %d)", refused_at);
    llm_grammar_state_free(s);
    llm_grammar_free(g);
}

/* The mask at the state after prefix, against feeding each token on its own. */
static void check_mask(const char *name, const llm_json_vocab *v, const char *src, const char *prefix)
{
    llm_grammar *g = parse(src);
    llm_grammar_state *s = g ? llm_grammar_state_new(g) : NULL, *t = g ? llm_grammar_state_new(g) : NULL;
    int n = llm_json_vocab_size(v), words = (n + 63) / 64, wrong = 0, left = -1, want = 0;
    uint64_t *bits = malloc((size_t)words * sizeof(uint64_t));
    if (s && t && bits && llm_grammar_feed(s, prefix, strlen(prefix)) == 0) {
        left = llm_grammar_mask_bits(s, v, bits, n);
        for (int id = 0; id < n; id++) {
            size_t k;
            const char *p = llm_json_token_bytes(v, id, &k);
            int fits = p != NULL && llm_grammar_state_copy(t, s) == 0 && llm_grammar_feed(t, p, k) == 0;
            want += fits;
            if (fits != (int)((bits[id >> 6] >> (id & 63)) & 1) && wrong++ == 0)
                diag("%s: token %d '%.*s' %s by the mask", name, id, (int)k, p ? p : "", fits ? "refused" : "let through");
        }
    }
    ok(left >= 0 && wrong == 0 && left == want, "%s: mask after '%s' = feeding each token (%d left, %d differ)", name,
       prefix, left, wrong);
    free(bits);
    llm_grammar_state_free(s);
    llm_grammar_state_free(t);
    llm_grammar_free(g);
}

/* A mask kept from an earlier state with the same stacks (a list's next item) = the mask made afresh. */
static void check_memo(const char *name, const llm_json_vocab *v)
{
    llm_grammar *g = parse(G_LIST);
    llm_grammar_state *s = g ? llm_grammar_state_new(g) : NULL, *t = g ? llm_grammar_state_new(g) : NULL;
    int n = llm_json_vocab_size(v), words = (n + 63) / 64, same = 0, a = -1, b = -2;
    uint64_t *kept = malloc((size_t)words * sizeof(uint64_t)), *fresh = malloc((size_t)words * sizeof(uint64_t));
    if (s && t && kept && fresh && llm_grammar_feed(s, "yes, ", 5) == 0 && llm_grammar_mask_bits(s, v, kept, n) > 0 &&
        llm_grammar_feed(s, "no, ", 4) == 0 && llm_grammar_feed(t, "yes, no, ", 9) == 0) {
        a = llm_grammar_mask_bits(s, v, kept, n);  /* the same stacks as after "yes, ": kept */
        b = llm_grammar_mask_bits(t, v, fresh, n); /* a new state: walked */
        same = memcmp(kept, fresh, (size_t)words * sizeof(uint64_t)) == 0;
    }
    ok(same && a == b, "%s: the kept mask of a state met again = the mask made afresh (%d left)", name, a);
    free(kept);
    free(fresh);
    llm_grammar_state_free(s);
    llm_grammar_state_free(t);
    llm_grammar_free(g);
}

/* A JSON grammar written for this test: objects, arrays, strings with escapes, numbers, literals. */
static const char *const G_JSON =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? ws\n"
    "ws     ::= [ \\t\\n]{0,8}\n";

/* Random walks through the mask, ending where the grammar may end half the time (as a model's end token would),
 * else going on until nothing can follow or 200 tokens; each whole output is checked by check(). */
static void walks(const char *name, const llm_json_vocab *v, const char *src, int count,
                  int (*check)(const void *ctx, const char *out, size_t len), const void *ctx)
{
    llm_grammar *g = parse(src);
    int n = llm_json_vocab_size(v), finished = 0, bad = 0, words = (n + 63) / 64;
    uint64_t *bits = malloc((size_t)words * sizeof(uint64_t));
    int32_t *allowed = malloc((size_t)n * sizeof(int32_t));
    char out[8192];
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int w = 0; w < count && g && bits && allowed; w++) {
        llm_grammar_state *s = llm_grammar_state_new(g);
        size_t len = 0;
        int ended = 0;
        for (int step = 0; step < 200 && s != NULL; step++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            if ((llm_grammar_accepts(s) && !llm_grammar_can_go_on(s)) || (llm_grammar_accepts(s) && (rng & 1))) {
                ended = 1;
                break;
            }
            int na = 0;
            if (llm_grammar_mask_bits(s, v, bits, n) > 0)
                for (int id = 0; id < n; id++)
                    if ((bits[id >> 6] >> (id & 63)) & 1)
                        allowed[na++] = id;
            if (na == 0) {
                ended = llm_grammar_accepts(s);
                if (!ended && bad++ == 0)
                    diag("%s: a dead end after %.*s", name, (int)len, out);
                break;
            }
            int id = allowed[(rng >> 8) % (uint64_t)na];
            size_t k;
            const char *p = llm_json_token_bytes(v, id, &k);
            if (llm_grammar_feed(s, p, k) != 0 || len + k >= sizeof out)
                break;
            memcpy(out + len, p, k);
            len += k;
        }
        if (ended) {
            finished++;
            if (!check(ctx, out, len) && bad++ == 0)
                diag("%s: output '%.*s' refused by the checker", name, (int)len, out);
        }
        llm_grammar_state_free(s);
    }
    ok(finished > count / 3 && bad == 0, "%s: %d of %d random walks through the mask ended, %d refused by the checker",
       name, finished, count, bad);
    free(bits);
    free(allowed);
    llm_grammar_free(g);
}

static int pcre_check(const void *ctx, const char *out, size_t len)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)ctx, PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_UTF,
                                  &code, &off, NULL);
    if (c == NULL)
        return 0;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(c, NULL);
    int rc = pcre2_match(c, (PCRE2_SPTR)out, len, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(c);
    return rc >= 0;
}

static int json_check(const void *ctx, const char *out, size_t len)
{
    (void)ctx;
    cJSON *j = cJSON_ParseWithLength(out, len);
    int r = j != NULL && cJSON_IsObject(j);
    cJSON_Delete(j);
    return r;
}

/* Mutated grammar texts (bytes replaced by ones the syntax cares about, cut short, bytes inserted): each compiles
 * or fails with a message; one that compiles is fed random bytes and masked (ASan/UBSan catch the rest). */
static void test_fuzz(const llm_json_vocab *v)
{
    static const char *const *const seeds[] = { &G_LIST, &G_PARENS, &G_UNI, &G_ARITH, &G_EMPTY, &G_JSON };
    static const char alphabet[] = "\"[]()|*+?{},-^.\\:=# \n\tazAZ09\x80\xc3\xff";
    uint64_t rng = 0x243f6a8885a308d3ull;
    int parsed = 0, refused = 0, silent = 0, n = llm_json_vocab_size(v);
    uint64_t *bits = malloc((size_t)(n + 63) / 64 * sizeof(uint64_t));
    char buf[2048];
    for (int i = 0; i < 3000 && bits; i++) {
        const char *seed = *seeds[i % 6];
        size_t len = strlen(seed);
        memcpy(buf, seed, len);
        for (int k = 0; k < 1 + (int)(i % 4); k++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            size_t at = (size_t)(rng >> 20) % len;
            char c = alphabet[(rng >> 8) % (sizeof alphabet - 1)];
            switch (rng % 3) {
            case 0: buf[at] = c; break;
            case 1: len = at + 1; break;
            default:
                if (len + 1 < sizeof buf) {
                    memmove(buf + at + 1, buf + at, len - at);
                    buf[at] = c;
                    len++;
                }
            }
        }
        char err[256] = "";
        llm_grammar *g = llm_grammar_parse(buf, len, err, sizeof err);
        if (g == NULL) {
            refused++;
            silent += err[0] == '\0';
            continue;
        }
        parsed++;
        llm_grammar_state *s = llm_grammar_state_new(g);
        for (int k = 0; s && k < 8; k++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            char b[3] = { (char)(rng >> 8), (char)(rng >> 16), (char)(rng >> 24) };
            (void)llm_grammar_feed(s, b, 1 + rng % 3);
            if (k % 4 == 0)
                (void)llm_grammar_mask_bits(s, v, bits, n);
        }
        llm_grammar_state_free(s);
        llm_grammar_free(g);
    }
    ok(parsed > 100 && refused > 100 && silent == 0, "3000 mutated grammars: %d compiled (fed and masked), %d refused, "
       "%d of those without a message", parsed, refused, silent);
    free(bits);
}

int main(void)
{
    test_refusals();
    test_texts();
    static const char *const files[] = { TOK_JSON, TOK512 }, *const names[] = { "Llama 3", "stories260K" };
    for (int f = 0; f < 2; f++) {
        llm_err err = { { 0 } };
        llm_tokenizer *t = llm_tok_load(files[f], &err);
        llm_json_vocab *v = t != NULL ? llm_json_vocab_new(t) : NULL;
        ok(v != NULL, "%s: vocabulary loaded %s", names[f], err.msg);
        if (v == NULL) {
            llm_tok_free(t);
            continue;
        }
        check_mask(names[f], v, G_LIST, "");
        check_mask(names[f], v, G_LIST, "yes, ");
        check_mask(names[f], v, G_LIST, "12");
        check_mask(names[f], v, G_PARENS, "(a((b");
        check_mask(names[f], v, G_UNI, "\xce");
        check_mask(names[f], v, G_UNI, "\xce\xb1\xce\xb2 ");
        check_mask(names[f], v, G_UNI, "\xce\xb1 \xf0\x9f");
        check_mask(names[f], v, G_ARITH, "(1+");
        check_mask(names[f], v, G_JSON, "");
        check_mask(names[f], v, G_JSON, "{\"a\": [1, \"x");
        check_mask(names[f], v, G_JSON, "{\"a\": -0.5e");
        check_mask(names[f], v, G_EMPTY, "");
        check_memo(names[f], v);
        walks(names[f], v, G_LIST, 40, pcre_check, "(?:yes|no|[0-9]{1,3})(?:,[ \\t]*(?:yes|no|[0-9]{1,3}))*");
        if (f == 1) /* (Llama 3's many tokens of '(' make a random walk nest deeper and deeper) */
            walks(names[f], v, G_PARENS, 40, pcre_check, "(\\((?:[a-z]|(?1))*\\))");
        walks(names[f], v, G_ARITH, 40, pcre_check,
              "(?<e>(?<t>(?<f>[0-9]+|\\((?&e)\\)|-(?&f))(?:[*/](?&f))*)(?:[-+](?&t))*)");
        walks(names[f], v, G_UNI, 40, pcre_check, "(?s)[\\x{3b1}-\\x{3c9}]+ .\\x{e9}[^\"\\\\a-z]?!{0,2}");
        walks(names[f], v, G_JSON, f == 0 ? 12 : 40, json_check, NULL);
        if (f == 1)
            test_fuzz(v);
        llm_json_vocab_free(v);
        llm_tok_free(t);
    }
    return done_testing();
}
