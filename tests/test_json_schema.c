/* JSON Schema constrained decoding (engine/json_schema.c, json_schema_match.c, json_regex.c): what the
 * compiler refuses; texts each schema accepts (whole, byte by byte, split anywhere) and refuses; the
 * vocabulary mask against feeding every token (Llama 3 and stories260K vocabularies); and random walks
 * through the mask whose outputs a validator written here, independently of the recogniser (patterns
 * and formats by PCRE2), checks against the schema. */
#include "json_regex.h"
#include "json_schema.h"
#include "tap.h"
#include "tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TOK512   "../shared/models/stories260K/tok512.bin"
#define TOK_JSON "../shared/tokenizers/llama3/tokenizer.json"

static const char *const S_PERSON =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\"},"
    "\"email\":{\"type\":\"string\",\"description\":\"where to write\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"enum\":[\"a\",\"bb\",\"ccc\"]},\"minItems\":1,\"maxItems\":3},"
    "\"admin\":{\"type\":\"boolean\"}},"
    "\"required\":[\"name\",\"age\",\"tags\"]}";
static const char *const S_PETS =
    "{\"$defs\":{"
    "\"cat\":{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"cat\"},\"lives\":{\"type\":\"integer\"}},\"required\":[\"kind\",\"lives\"]},"
    "\"dog\":{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"dog\"},\"good\":{\"type\":\"boolean\"}},\"required\":[\"kind\",\"good\"]}},"
    "\"type\":\"object\",\"properties\":{\"pets\":{\"type\":\"array\",\"items\":{\"anyOf\":[{\"$ref\":\"#/$defs/cat\"},{\"$ref\":\"#/$defs/dog\"}]}}},"
    "\"required\":[\"pets\"]}";
static const char *const S_TREE =
    "{\"type\":\"object\",\"properties\":{\"value\":{\"type\":\"number\"},"
    "\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"},\"maxItems\":2}},\"required\":[\"value\"]}";
static const char *const S_MISC =
    "{\"type\":\"object\",\"properties\":{"
    "\"scores\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"number\"}},"
    "\"note\":{\"type\":[\"string\",\"null\"]},"
    "\"misc\":{},"
    "\"free\":{\"type\":\"object\"},"
    "\"opt\":{\"type\":\"integer\",\"nullable\":true},"
    "\"e\\\"q\":{\"allOf\":[{\"type\":\"null\"}]}},"
    "\"required\":[\"scores\",\"note\",\"misc\",\"free\"]}";
static const char *const S_ENUM = "{\"enum\":[1,12,123,\"x\",null,true,{\"a\":[1]}]}";
static const char *const S_INTS = "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":4}";
static const char *const S_FMT =
    "{\"type\":\"object\",\"properties\":{"
    "\"d\":{\"type\":\"string\",\"format\":\"date\"},"
    "\"code\":{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"},"
    "\"t\":{\"type\":\"string\",\"format\":\"date-time\"},"
    "\"u\":{\"type\":\"string\",\"format\":\"uuid\"},"
    "\"e\":{\"type\":\"string\",\"format\":\"email\"},"
    "\"ip\":{\"type\":\"string\",\"format\":\"ipv4\"},"
    "\"tag\":{\"type\":\"string\",\"pattern\":\"x.y\"},"
    "\"host\":{\"type\":\"string\",\"format\":\"hostname\",\"maxLength\":8}},"
    "\"required\":[\"d\",\"code\"]}";
/* for the random walks: every string anchored at both ends, so a walk ends */
static const char *const S_FMT_WALK =
    "{\"type\":\"object\",\"properties\":{"
    "\"d\":{\"type\":\"string\",\"format\":\"date\"},"
    "\"code\":{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"},"
    "\"t\":{\"type\":\"string\",\"format\":\"date-time\"},"
    "\"u\":{\"type\":\"string\",\"format\":\"uuid\"},"
    "\"ip\":{\"type\":\"string\",\"format\":\"ipv4\"}},"
    "\"required\":[\"d\",\"code\"]}";

static const char *const S_NUM =
    "{\"type\":\"object\",\"properties\":{"
    "\"age\":{\"type\":\"integer\",\"minimum\":18,\"maximum\":120},"
    "\"temp\":{\"type\":\"number\",\"exclusiveMinimum\":-5.5,\"maximum\":40},"
    "\"neg\":{\"type\":\"integer\",\"maximum\":-3},"
    "\"frac\":{\"type\":\"number\",\"minimum\":0.25,\"exclusiveMaximum\":0.5},"
    "\"old\":{\"type\":\"number\",\"minimum\":2,\"exclusiveMinimum\":true},"
    "\"big\":{\"type\":\"integer\",\"minimum\":1000000}},"
    "\"required\":[\"age\",\"temp\"]}";

static llm_schema *compile(const char *text)
{
    char err[256];
    llm_schema *sc = llm_schema_parse(text, strlen(text), err, sizeof err);
    if (sc == NULL)
        diag("compile: %s", err);
    return sc;
}

/* Accepted whole (done at the end), byte by byte, and split in two anywhere. */
static int accepts(const llm_schema *sc, const char *text)
{
    size_t n = strlen(text);
    int good = 1;
    for (size_t cut = 0; cut <= n && good; cut++) {
        llm_schema_state *s = llm_schema_state_new(sc);
        good = s != NULL && llm_schema_feed(s, text, cut) == 0 && llm_schema_feed(s, text + cut, n - cut) == 0 &&
               llm_schema_done(s);
        llm_schema_state_free(s);
    }
    llm_schema_state *s = llm_schema_state_new(sc);
    for (size_t i = 0; i < n && good; i++)
        good = llm_schema_feed(s, text + i, 1) == 0;
    good = good && llm_schema_done(s);
    llm_schema_state_free(s);
    return good;
}

/* Refused: some byte does not continue it, or it ends before the value is whole. */
static int refuses(const llm_schema *sc, const char *text)
{
    llm_schema_state *s = llm_schema_state_new(sc);
    int refused = 0;
    for (size_t i = 0; text[i] && !refused; i++)
        refused = llm_schema_feed(s, text + i, 1) != 0;
    refused = refused || !llm_schema_done(s);
    llm_schema_state_free(s);
    return refused;
}

static void test_compile_refusals(void)
{
    static const struct { const char *schema, *why; } bad[] = {
        { "{\"type\":\"string\",\"pattern\":\"(?=a)\"}", "lookaround" },
        { "{\"type\":\"string\",\"pattern\":\"a\\\\1\"}", "\\1 is not supported" },
        { "{\"type\":\"string\",\"pattern\":\"^[^\\\\x00-\\\\x7f]$\"}", "\\x is not supported" },
        { "{\"type\":\"string\",\"format\":\"date\",\"maxLength\":3}", "'format' together with minLength" },
        { "{\"type\":\"string\",\"pattern\":\"a\",\"format\":\"uuid\"}", "'pattern' and 'format' uuid together" },
        { "{\"type\":\"string\",\"pattern\":\"^a{2}b{3,1}$\"}", "n above m" },
        { "{\"type\":\"integer\",\"multipleOf\":3}", "'multipleOf' is not supported" },
        { "{\"type\":\"number\",\"minimum\":3,\"maximum\":2}", "minimum above maximum" },
        { "{\"type\":\"number\",\"minimum\":2,\"exclusiveMaximum\":2}", "minimum above maximum" },
        { "{\"type\":\"integer\",\"exclusiveMinimum\":1,\"exclusiveMaximum\":2}", "no integer between" },
        { "{\"type\":\"integer\",\"minimum\":1e17}", "beyond what 16 digits write" },
        { "{\"type\":\"integer\",\"minimum\":\"1\"}", "'minimum' must be a number" },
        { "{\"type\":\"array\",\"contains\":{}}", "'contains' is not supported" },
        { "{\"type\":\"array\",\"prefixItems\":[{}],\"items\":false,\"minItems\":2}", "minItems 2 above the 1 items" },
        { "{\"not\":{}}", "'not' is not supported" },
        { "{\"$ref\":\"#/$defs/none\"}", "points at nothing" },
        { "{\"$ref\":\"http://x/y.json\"}", "only references inside the schema" },
        { "{\"$ref\":\"#\"}", "comes back to itself" },
        { "{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}", "comes back to itself" },
        { "{\"enum\":[]}", "accepts nothing" },
        { "{\"anyOf\":[]}", "accepts nothing" },
        { "false", "false accepts nothing" },
        { "{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}", "minLength 3 above maxLength 2" },
        { "{\"type\":\"array\",\"minItems\":-1}", "'minItems' must be a whole number" },
        { "{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "required property 'b'" },
        { "{\"type\":\"strin\"}", "unknown type 'strin'" },
        { "{\"type\":\"string\",\"anyOf\":[{}]}", "anyOf beside other keywords" },
        { "{\"allOf\":[{},{}]}", "allOf is supported with one schema only" },
        { "{\"type\":\"integer\",\"enum\":[\"a\"]}", "no value of the enum" },
        { "{\"type\":\"array\",\"items\":3}", "'items' must be a schema" },
        { "{\"type\":\"array\",\"prefixItems\":{}}", "'prefixItems' must be an array" },
        { "[1]", "must be an object or a boolean" },
        { "{\"type\":", "not valid JSON" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        llm_schema *sc = llm_schema_parse(bad[i].schema, strlen(bad[i].schema), err, sizeof err);
        ok(sc == NULL && strstr(err, bad[i].why) != NULL, "refused %s: %s", bad[i].schema, err);
        llm_schema_free(sc);
    }
    /* more properties than an object may have */
    char big[4096];
    size_t at = (size_t)snprintf(big, sizeof big, "{\"properties\":{");
    for (int i = 0; i <= LLM_SCHEMA_MAX_PROPS; i++)
        at += (size_t)snprintf(big + at, sizeof big - at, "%s\"p%d\":{}", i ? "," : "", i);
    snprintf(big + at, sizeof big - at, "}}");
    char err[256] = "";
    llm_schema *sc = llm_schema_parse(big, strlen(big), err, sizeof err);
    ok(sc == NULL && strstr(err, "more than 64 properties"), "an object of 65 properties is refused: %s", err);
    llm_schema_free(sc);
}

static void check_texts(const char *name, const char *schema, const char *const *good, const char *const *bad)
{
    llm_schema *sc = compile(schema);
    ok(sc != NULL, "%s: compiles", name);
    if (sc == NULL)
        return;
    for (int i = 0; good[i]; i++)
        ok(accepts(sc, good[i]), "%s accepts %s", name, good[i]);
    for (int i = 0; bad[i]; i++)
        ok(refuses(sc, bad[i]), "%s refuses %s", name, bad[i]);
    llm_schema_free(sc);
}

/* Strings hold well-formed UTF-8 only, and maxLength counts characters: once a string is full only its
 * closing quote comes, never a continuation byte (which used to be taken without end). */
static void test_utf8_strings(void)
{
    llm_schema *sc = compile("{\"type\":\"string\",\"maxLength\":2}");
    ok(sc && accepts(sc, "\"\xc3\xa9\xf0\x9f\x98\x80\"") && accepts(sc, "\"a\xe2\x9c\x93\""),
       "maxLength 2: two characters of 2 and 4 bytes, of 1 and 3");
    ok(sc && refuses(sc, "\"ab\x80\"") && refuses(sc, "\"\x80\"") && refuses(sc, "\"\xc3\xa9\xa9\"") &&
       refuses(sc, "\"\xe2\x9c\"") && refuses(sc, "\"\xed\xa0\x80\"") && refuses(sc, "\"\xc0\xaf\""),
       "continuation bytes with no lead, cut characters, surrogates, overlongs: refused");
    llm_schema_free(sc);
    sc = compile("{\"type\":\"object\"}"); /* JSON mode's schema: any value inside */
    ok(sc && accepts(sc, "{\"k\":[\"\xc3\xa9\"]}") && refuses(sc, "{\"k\":[\"\xc3\xa9\xa9\"]}"),
       "any value: the same rule");
    llm_schema_free(sc);
}

static void test_texts(void)
{
    static const char *const person_good[] = {
        "{\"name\":\"Ann\",\"age\":41,\"tags\":[\"a\"]}",
        "{ \"name\" : \"\\u00e9\xc3\xa9\\n\" , \"age\" : -3 , \"email\" : \"a@b\" , \"tags\" : [ \"ccc\" , \"bb\" , \"a\" ] , \"admin\" : false }",
        "{\"name\":\"123456789012\",\"age\":0,\"tags\":[\"bb\",\"bb\"],\"admin\":true}",
        NULL,
    };
    static const char *const person_bad[] = {
        "{\"age\":41,\"name\":\"Ann\",\"tags\":[\"a\"]}",               /* out of order */
        "{\"name\":\"Ann\",\"tags\":[\"a\"]}",                          /* required age skipped */
        "{\"name\":\"Ann\",\"age\":41}",                                 /* required tags missing */
        "{\"name\":\"\",\"age\":1,\"tags\":[\"a\"]}",                   /* minLength */
        "{\"name\":\"1234567890123\",\"age\":1,\"tags\":[\"a\"]}",      /* maxLength */
        "{\"name\":\"A\",\"age\":1.5,\"tags\":[\"a\"]}",                /* integer */
        "{\"name\":\"A\",\"age\":1,\"tags\":[]}",                       /* minItems */
        "{\"name\":\"A\",\"age\":1,\"tags\":[\"a\",\"a\",\"a\",\"a\"]}", /* maxItems */
        "{\"name\":\"A\",\"age\":1,\"tags\":[\"b\"]}",                  /* enum */
        "{\"name\":\"A\",\"age\":1,\"tags\":[\"a\"],\"other\":1}",      /* not a property */
        "{\"name\":\"A\",\"age\":01,\"tags\":[\"a\"]}",
        "[]",
        NULL,
    };
    check_texts("person", S_PERSON, person_good, person_bad);
    static const char *const pets_good[] = {
        "{\"pets\":[]}",
        "{\"pets\":[{\"kind\":\"cat\",\"lives\":9},{\"kind\":\"dog\",\"good\":true}]}",
        NULL,
    };
    static const char *const pets_bad[] = {
        "{\"pets\":[{\"kind\":\"cat\",\"good\":true}]}",
        "{\"pets\":[{\"kind\":\"cow\"}]}",
        "{\"pets\":[{\"kind\":\"dog\",\"good\":1}]}",
        NULL,
    };
    check_texts("pets (anyOf of $refs)", S_PETS, pets_good, pets_bad);
    static const char *const tree_good[] = {
        "{\"value\":1}",
        "{\"value\":1.5e3,\"children\":[{\"value\":-2,\"children\":[]},{\"value\":0,\"children\":[{\"value\":3}]}]}",
        NULL,
    };
    static const char *const tree_bad[] = {
        "{\"value\":1,\"children\":[{\"value\":1},{\"value\":2},{\"value\":3}]}",
        "{\"children\":[]}",
        NULL,
    };
    check_texts("tree ($ref #)", S_TREE, tree_good, tree_bad);
    static const char *const misc_good[] = {
        "{\"scores\":{},\"note\":null,\"misc\":[1,{\"x\":null}],\"free\":{}}",
        "{\"scores\":{\"a b\":1,\"\":-0.5},\"note\":\"n\",\"misc\":\"s\",\"free\":{\"k\":[true]},\"opt\":null,\"e\\\"q\":null}",
        "{\"scores\":{},\"note\":null,\"misc\":3 ,\"free\":{},\"opt\":7}",
        NULL,
    };
    static const char *const misc_bad[] = {
        "{\"scores\":{\"a\":\"1\"},\"note\":null,\"misc\":1,\"free\":{}}",
        "{\"scores\":{},\"note\":1,\"misc\":1,\"free\":{}}",
        "{\"scores\":{},\"note\":null,\"misc\":1,\"free\":[]}",
        "{\"scores\":{},\"note\":null,\"misc\":1,\"free\":{},\"opt\":1.5}",
        NULL,
    };
    check_texts("map, type list, nullable, free values", S_MISC, misc_good, misc_bad);
    static const char *const enum_good[] = { "1 ", "12 ", "123\n", "\"x\"", "null", "true", "{\"a\":[1]}", NULL };
    static const char *const enum_bad[] = { "2 ", "1234 ", "\"y\"", "false", "{\"a\": [1]}", "1", NULL };
    check_texts("enum of any values", S_ENUM, enum_good, enum_bad);
    static const char *const ints_good[] = { "[1,2]", "[ -1 , 0 , 3 , 40 ]", NULL };
    static const char *const ints_bad[] = { "[1]", "[1,2,3,4,5]", "[1,2.0]", "{}", NULL };
    check_texts("array of integers", S_INTS, ints_good, ints_bad);
    static const char *const fmt_good[] = {
        "{\"d\":\"2026-12-02\",\"code\":\"AB-123\"}",
        "{\"d\":\"2024-02-29\",\"code\":\"ZZ-000\",\"t\":\"2026-12-02T03:04:05.25+01:00\",\"u\":"
        "\"123e4567-E89B-12d3-a456-426614174000\",\"e\":\"a.b+c@mail.example.org\",\"ip\":\"192.168.0.255\","
        "\"tag\":\"--x-y--\",\"host\":\"anything\"}",
        NULL,
    };
    static const char *const fmt_bad[] = {
        "{\"d\":\"2026-13-02\",\"code\":\"AB-123\"}", "{\"d\":\"2026-12-32\",\"code\":\"AB-123\"}",
        "{\"d\":\"2026-12-02\",\"code\":\"ab-123\"}", "{\"d\":\"2026-12-02\",\"code\":\"AB-1234\"}",
        "{\"d\":\"2026-12-02\",\"code\":\"AB-12\"}", "{\"d\":\"2026-12-02\",\"code\":\"AB-123\",\"t\":\"2026-12-02 03:04:05Z\"}",
        "{\"d\":\"2026-12-02\",\"code\":\"AB-123\",\"u\":\"123e4567e89b12d3a456426614174000\"}",
        "{\"d\":\"2026-12-02\",\"code\":\"AB-123\",\"ip\":\"256.1.1.1\"}",
        "{\"d\":\"2026-12-02\",\"code\":\"AB-123\",\"e\":\"no-at-sign\"}",
        "{\"d\":\"2026-12-02\",\"code\":\"AB-123\",\"tag\":\"xy\"}",
        "{\"d\":\"2026-12-02\",\"code\":\"AB-123\",\"tag\":\"x\\ny\"}", /* '.' takes no line terminator */
        "{\"d\":\"2026-12-02\",\"code\":\"A\\u0042-123\"}", /* characters come as they are in a pattern string */
        "{\"d\":\"2026-12-02\",\"code\":\"AB-123\",\"host\":\"123456789\"}",
        NULL,
    };
    check_texts("patterns and formats", S_FMT, fmt_good, fmt_bad);
    static const char *const num_good[] = {
        "{\"age\":18,\"temp\":-5.4}", "{\"age\":120,\"temp\":40,\"neg\":-3,\"frac\":0.25,\"old\":2.5,\"big\":1000000}",
        "{\"age\":99,\"temp\":0,\"neg\":-1234567890123456,\"frac\":0.4999,\"old\":2.0000001,\"big\":9999999999999999}",
        "{\"age\":20,\"temp\":-0.5}", NULL,
    };
    static const char *const num_bad[] = {
        "{\"age\":17,\"temp\":0}", "{\"age\":121,\"temp\":0}", "{\"age\":1200,\"temp\":0}", "{\"age\":18.5,\"temp\":0}",
        "{\"age\":18,\"temp\":-5.5}", "{\"age\":18,\"temp\":40.01}", "{\"age\":18,\"temp\":0,\"neg\":-2}",
        "{\"age\":18,\"temp\":0,\"neg\":0}", "{\"age\":18,\"temp\":0,\"frac\":0.5}", "{\"age\":18,\"temp\":0,\"frac\":0.2}",
        "{\"age\":18,\"temp\":0,\"old\":2}", "{\"age\":018,\"temp\":0}", "{\"age\":18,\"temp\":1e1}",
        "{\"age\":18,\"temp\":0,\"big\":999999}", "{\"age\":18,\"temp\":0,\"big\":12345678901234567}",
        "{\"age\":-18,\"temp\":0}", "{\"age\":18,\"temp\":3.}", NULL,
    };
    check_texts("number bounds", S_NUM, num_good, num_bad);
    static const char *const tup_good[] = { "[1,\"ab\"]", "[ -3 , \"\" ]", NULL };
    static const char *const tup_bad[] = { "[1]", "[\"a\",1]", "[1,\"a\",2]", "[1,\"abcd\"]", "[]", NULL };
    check_texts("a tuple (prefixItems, items false)",
                "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":3}],"
                "\"items\":false,\"minItems\":2}", tup_good, tup_bad);
    static const char *const t7_good[] = { "[true,1,2]", "[]", "[false]", NULL };
    static const char *const t7_bad[] = { "[1]", "[true,\"x\"]", "[true,false]", NULL };
    check_texts("a draft-7 tuple (items as a list, additionalItems)",
                "{\"items\":[{\"type\":\"boolean\"}],\"additionalItems\":{\"type\":\"integer\"}}", t7_good, t7_bad);
    /* a number is refused at the first byte after which no value in range can come (no dead ends) */
    static const char *const num_dead[] = {
        "{\"age\":121", "{\"age\":13", "{\"age\":-", "{\"age\":0", "{\"age\":18,\"temp\":40.1",
        "{\"age\":18,\"temp\":-5.5", "{\"age\":18,\"temp\":-6", "{\"age\":18,\"temp\":0,\"frac\":0.5",
        "{\"age\":18,\"temp\":0,\"frac\":1", "{\"age\":18,\"temp\":0,\"neg\":0", "{\"age\":18,\"temp\":0,\"neg\":1",
        "{\"age\":18,\"temp\":0,\"big\":0", NULL,
    };
    static const char *const num_live[] = {
        "{\"age\":1", "{\"age\":12", "{\"age\":9", "{\"age\":18,\"temp\":40.", "{\"age\":18,\"temp\":-5.4",
        "{\"age\":18,\"temp\":-5.", "{\"age\":18,\"temp\":0,\"frac\":0.", "{\"age\":18,\"temp\":0,\"neg\":-",
        "{\"age\":18,\"temp\":0,\"big\":1", NULL,
    };
    llm_schema *nsc = compile(S_NUM);
    for (int i = 0; nsc && num_dead[i]; i++) {
        llm_schema_state *st = llm_schema_state_new(nsc);
        size_t n = strlen(num_dead[i]);
        ok(llm_schema_feed(st, num_dead[i], n - 1) == 0 && llm_schema_feed(st, num_dead[i] + n - 1, 1) != 0,
           "number bounds: the last byte of %s is refused at once", num_dead[i]);
        llm_schema_state_free(st);
    }
    for (int i = 0; nsc && num_live[i]; i++) {
        llm_schema_state *st = llm_schema_state_new(nsc);
        ok(llm_schema_feed(st, num_live[i], strlen(num_live[i])) == 0, "number bounds: %s can still end in range",
           num_live[i]);
        llm_schema_state_free(st);
    }
    llm_schema_free(nsc);
    static const char *const obj_good[] = { "{}", "{\"a\":[1,{\"b\":\"c\"}]}", NULL };
    static const char *const obj_bad[] = { "[]", "1 ", "\"x\"", NULL };
    check_texts("JSON mode's schema", "{\"type\":\"object\"}", obj_good, obj_bad);
}

/* Mutated schemas compile or are refused with a message; what compiles takes random bytes without harm
 * (ASan and UBSan in make san watch). */
static void test_mutations(void)
{
    const char *seeds[] = { S_PERSON, S_PETS, S_TREE, S_MISC, S_ENUM, S_INTS, S_FMT, S_NUM };
    uint64_t x = 0x2545f4914f6cdd1dull;
    int runs = 0, compiled = 0, sane = 1;
    for (int k = 0; k < 3000; k++) {
        const char *seed = seeds[k % 8];
        size_t n = strlen(seed);
        char buf[1024];
        memcpy(buf, seed, n);
        static const char mut[] = "{}[]\",:0123456789-#/$tfn \\x", feed[] = "{}[]\",:0123456789-.etrufalsn \\\"ab";
        for (int j = 0; j < 1 + k % 3; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[(x >> 8) % n] = mut[(x >> 40) % (sizeof mut - 1)];
        }
        char err[256] = "";
        llm_schema *sc = llm_schema_parse(buf, n, err, sizeof err);
        sane &= sc != NULL || err[0] != '\0';
        if (sc != NULL) {
            compiled++;
            llm_schema_state *st = llm_schema_state_new(sc);
            for (int b = 0; st && b < 200; b++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                char c = feed[(x >> 30) % (sizeof feed - 1)];
                (void)llm_schema_feed(st, &c, 1);
            }
            (void)llm_schema_done(st);
            llm_schema_state_free(st);
            llm_schema_free(sc);
        }
        runs++;
    }
    ok(sane && compiled > 0, "%d mutated schemas: %d compiled and took random bytes, the rest refused with a message",
       runs, compiled);
}

/* The mask leaves a token exactly when its bytes continue the text. */
static void check_mask(const char *name, const llm_tokenizer *t, const llm_json_vocab *v, const llm_schema *sc,
                       const char *prefix)
{
    int n = llm_tok_vocab_size(t);
    float *lg = malloc((size_t)n * sizeof(float));
    llm_schema_state *s = llm_schema_state_new(sc), *u = llm_schema_state_new(sc);
    if (lg == NULL || s == NULL || u == NULL || llm_schema_feed(s, prefix, strlen(prefix)) != 0) {
        ok(0, "%s: mask after '%s' (setup)", name, prefix);
        goto out;
    }
    for (int i = 0; i < n; i++)
        lg[i] = 0.0f;
    int left = llm_schema_mask(s, v, lg, n), wrong = 0, kept = 0;
    for (int id = 0; id < n; id++) {
        size_t k;
        const char *p = llm_json_token_bytes(v, id, &k);
        llm_schema_state_free(u);
        u = llm_schema_state_new(sc);
        (void)llm_schema_feed(u, prefix, strlen(prefix));
        int fits = p != NULL && llm_schema_feed(u, p, k) == 0;
        kept += fits;
        if (fits != (lg[id] == 0.0f))
            wrong++;
    }
    ok(wrong == 0 && left == kept && kept > 0, "%s: after '%s' the mask leaves exactly the %d tokens that fit (%d wrong)",
       name, prefix, kept, wrong);
out:
    free(lg);
    llm_schema_state_free(s);
    llm_schema_state_free(u);
}

/* ---- an independent validator for the schemas of this test ---- */

static const cJSON *g_root;

static const cJSON *deref(const cJSON *s)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (!cJSON_IsString(r))
        return s;
    if (!strcmp(r->valuestring, "#"))
        return g_root;
    const char *name = strrchr(r->valuestring, '/') + 1;
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(g_root, "$defs"), name);
}

static size_t code_points(const char *p)
{
    size_t n = 0;
    for (; *p; p++)
        n += ((uint8_t)*p & 0xc0) != 0x80;
    return n;
}

static int valid(const cJSON *v, const cJSON *s);

/* PCRE2's verdict on a whole string (JSON Schema patterns are searches; the formats' are anchored). */
static int pcre_match(const char *re, const char *s)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code, &off, NULL);
    if (c == NULL)
        return 0;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(c, NULL);
    int rc = pcre2_match(c, (PCRE2_SPTR)s, strlen(s), 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(c);
    return rc >= 0;
}

static int valid_format(const char *f, const char *s)
{
    static const struct { const char *name, *re; } fm[] = {
        { "date", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$" },
        { "date-time", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)"
                       "(\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$" },
        { "uuid", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" },
        { "email", "^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$" },
        { "ipv4", "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$" },
    };
    for (size_t i = 0; i < sizeof fm / sizeof fm[0]; i++)
        if (!strcmp(f, fm[i].name)) {
            if (!strcmp(f, "uuid")) { /* case-insensitive */
                char low[64];
                size_t n = strlen(s);
                if (n >= sizeof low)
                    return 0;
                for (size_t k = 0; k <= n; k++)
                    low[k] = (char)(s[k] >= 'A' && s[k] <= 'F' ? s[k] + 32 : s[k]);
                return pcre_match(fm[i].re, low);
            }
            return pcre_match(fm[i].re, s);
        }
    return 1; /* an annotation */
}

static int valid_type(const cJSON *v, const char *t)
{
    if (!strcmp(t, "integer"))
        return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    return (!strcmp(t, "string") && cJSON_IsString(v)) || (!strcmp(t, "number") && cJSON_IsNumber(v)) ||
           (!strcmp(t, "boolean") && cJSON_IsBool(v)) || (!strcmp(t, "null") && cJSON_IsNull(v)) ||
           (!strcmp(t, "object") && cJSON_IsObject(v)) || (!strcmp(t, "array") && cJSON_IsArray(v));
}

static int valid(const cJSON *v, const cJSON *s)
{
    s = deref(s);
    const cJSON *x;
    if ((x = cJSON_GetObjectItemCaseSensitive(s, "allOf")) != NULL)
        return valid(v, x->child);
    if ((x = cJSON_GetObjectItemCaseSensitive(s, "anyOf")) != NULL) {
        for (const cJSON *a = x->child; a; a = a->next)
            if (valid(v, a))
                return 1;
        return 0;
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "nullable")) && cJSON_IsNull(v))
        return 1;
    if ((x = cJSON_GetObjectItemCaseSensitive(s, "enum")) != NULL) {
        for (const cJSON *a = x->child; a; a = a->next)
            if (cJSON_Compare(a, v, 1))
                return 1;
        return 0;
    }
    if ((x = cJSON_GetObjectItemCaseSensitive(s, "const")) != NULL && !cJSON_Compare(x, v, 1))
        return 0;
    if ((x = cJSON_GetObjectItemCaseSensitive(s, "type")) != NULL) {
        int any = 0;
        if (cJSON_IsString(x))
            any = valid_type(v, x->valuestring);
        for (const cJSON *a = cJSON_IsArray(x) ? x->child : NULL; a; a = a->next)
            any |= valid_type(v, a->valuestring);
        if (!any)
            return 0;
    }
    if (cJSON_IsString(v)) {
        if ((x = cJSON_GetObjectItemCaseSensitive(s, "pattern")) != NULL && !pcre_match(x->valuestring, v->valuestring))
            return 0;
        if ((x = cJSON_GetObjectItemCaseSensitive(s, "format")) != NULL && !valid_format(x->valuestring, v->valuestring))
            return 0;
        size_t n = code_points(v->valuestring);
        if ((x = cJSON_GetObjectItemCaseSensitive(s, "minLength")) && n < (size_t)x->valueint) return 0;
        if ((x = cJSON_GetObjectItemCaseSensitive(s, "maxLength")) && n > (size_t)x->valueint) return 0;
    }
    if (cJSON_IsNumber(v)) {
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minimum"), *mx = cJSON_GetObjectItemCaseSensitive(s, "maximum");
        const cJSON *emn = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum");
        const cJSON *emx = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum");
        double d = v->valuedouble;
        if (cJSON_IsNumber(mn) && (cJSON_IsTrue(emn) ? d <= mn->valuedouble : d < mn->valuedouble)) return 0;
        if (cJSON_IsNumber(mx) && (cJSON_IsTrue(emx) ? d >= mx->valuedouble : d > mx->valuedouble)) return 0;
        if (cJSON_IsNumber(emn) && d <= emn->valuedouble) return 0;
        if (cJSON_IsNumber(emx) && d >= emx->valuedouble) return 0;
    }
    if (cJSON_IsArray(v)) {
        int n = cJSON_GetArraySize(v);
        if ((x = cJSON_GetObjectItemCaseSensitive(s, "minItems")) && n < x->valueint) return 0;
        if ((x = cJSON_GetObjectItemCaseSensitive(s, "maxItems")) && n > x->valueint) return 0;
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
        for (const cJSON *a = v->child; a && items; a = a->next)
            if (!valid(a, items))
                return 0;
    }
    if (cJSON_IsObject(v)) {
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
        const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
            if (!cJSON_GetObjectItemCaseSensitive(v, r->valuestring))
                return 0;
        const cJSON *order = props ? props->child : NULL; /* keys in the schema's order, each at most once */
        for (const cJSON *a = v->child; a; a = a->next) {
            if (props != NULL) {
                while (order && strcmp(order->string, a->string))
                    order = order->next;
                if (order == NULL || !valid(a, order))
                    return 0;
                order = order->next;
            } else if (addl != NULL && !valid(a, addl)) {
                return 0;
            }
        }
    }
    return 1;
}

/* Random walks through the mask: structural tokens half the time so values end. Each finished output must
 * parse and be valid, and no walk may reach a state with no token left (a dead end counts as invalid).
 * Returns the walks that finished. */
static int walks(const char *name, const llm_json_vocab *v, const char *schema_text, int count, int *invalid)
{
    llm_schema *sc = compile(schema_text);
    cJSON *schema = cJSON_Parse(schema_text);
    int n = llm_json_vocab_size(v), finished = 0;
    float *lg = malloc((size_t)n * sizeof(float));
    int32_t *allowed = malloc((size_t)n * sizeof(int32_t)), *structural = malloc((size_t)n * sizeof(int32_t));
    char *out = malloc(1 << 16);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    g_root = schema;
    *invalid = 0;
    for (int w = 0; w < count && sc && schema && lg && allowed && structural && out; w++) {
        llm_schema_state *s = llm_schema_state_new(sc);
        size_t len = 0;
        for (int step = 0; step < 400 && s && !llm_schema_done(s); step++) {
            for (int i = 0; i < n; i++)
                lg[i] = 0.0f;
            if (llm_schema_mask(s, v, lg, n) == 0) {
                if ((*invalid)++ == 0)
                    diag("%s: a dead end after %.*s", name, (int)len, out);
                break;
            }
            int na = 0, ns = 0;
            for (int id = 0; id < n; id++) {
                if (lg[id] != 0.0f)
                    continue;
                size_t k;
                const char *p = llm_json_token_bytes(v, id, &k);
                allowed[na++] = id;
                if (strchr("\"}],:", p[0]) != NULL)
                    structural[ns++] = id;
            }
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            int id = ns > 0 && (rng & 1) ? structural[(rng >> 8) % (uint64_t)ns] : allowed[(rng >> 8) % (uint64_t)na];
            size_t k;
            const char *p = llm_json_token_bytes(v, id, &k);
            if (llm_schema_accept(s, v, id) != 0 || len + k >= (1 << 16))
                break;
            memcpy(out + len, p, k);
            len += k;
        }
        if (getenv("WALK_DEBUG"))
            diag("%s: walk %d: %.*s", name, w, (int)len, out);
        if (s != NULL && llm_schema_done(s)) {
            finished++;
            cJSON *got = cJSON_ParseWithLength(out, len);
            if (got == NULL || !valid(got, schema)) {
                if ((*invalid)++ == 0)
                    diag("%s: invalid output %.*s", name, (int)len, out);
            }
            cJSON_Delete(got);
        }
        llm_schema_state_free(s);
    }
    free(lg);
    free(allowed);
    free(structural);
    free(out);
    cJSON_Delete(schema);
    llm_schema_free(sc);
    return finished;
}

/* ---- a regular expression over the whole output (llm_schema_regex: vLLM's guided_regex / guided_choice) ---- */

static llm_schema *regex_of(const char *src)
{
    char err[256];
    llm_schema *sc = llm_schema_regex(src, strlen(src), err, sizeof err);
    if (sc == NULL)
        diag("regex %s: %s", src, err);
    return sc;
}

/* Feed text to a fresh state of sc: -1 if refused, else done * 2 + can_end. */
static int regex_feed(const llm_schema *sc, const char *text)
{
    llm_schema_state *s = llm_schema_state_new(sc);
    int r = s != NULL && llm_schema_feed(s, text, strlen(text)) == 0 ? llm_schema_done(s) * 2 + llm_schema_can_end(s)
                                                                      : -1;
    llm_schema_state_free(s);
    return r;
}

static void test_regex_texts(void)
{
    char err[256];
    ok(llm_schema_regex("(a)\\1", 5, err, sizeof err) == NULL && strstr(err, "not supported") != NULL,
       "regex: a backreference is refused (%s)", err);
    ok(llm_schema_regex("a(?=b)", 6, err, sizeof err) == NULL, "regex: lookahead is refused (%s)", err);
    static const struct { const char *re, *text; int want; } cases[] = {
        /* a whole match nothing can follow: done; one that may go on: may end; a prefix: neither */
        { "[a-z]+@[a-z]+\\.(com|org)", "bob@x.com", 3 },
        { "[a-z]+@[a-z]+\\.(com|org)", "bob@x.co", 0 },
        { "[a-z]+@[a-z]+\\.(com|org)", "bob@x.net", -1 },
        { "\\d+", "12", 1 },
        { "\\d+", "", 0 },
        { "\\d+", "1a", -1 },
        { "\\d{2,3}", "123", 3 },
        /* anchored at both ends, its own ^ and $ the same thing; an escaped $ is a character */
        { "^ab$", "ab", 3 },
        { "^ab$", "abc", -1 },
        { "ab", "xab", -1 },
        { "a\\$", "a$", 3 },
        { "a\\\\$", "a\\", 3 },
        { "(yes|no|maybe \\(perhaps\\))", "maybe (perhaps)", 3 },
        { "(yes|no|maybe \\(perhaps\\))", "ye", 0 },
        /* the output's bytes as they are: quotes and UTF-8, no JSON escaping */
        { "\"[^\"]*\" ?é+", "\"hi\" éé", 1 },
        { "x\\ty", "x\ty", 3 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        llm_schema *sc = regex_of(cases[i].re);
        int got = sc != NULL ? regex_feed(sc, cases[i].text) : -2;
        ok(got == cases[i].want, "regex /%s/ after '%s': %s (want %d, got %d)", cases[i].re, cases[i].text,
           cases[i].want < 0 ? "refused" : cases[i].want == 3 ? "done" : cases[i].want == 1 ? "may end" : "goes on",
           cases[i].want, got);
        llm_schema_free(sc);
    }
}

/* Random walks through a regex's mask, ending where it may end half the time (as a model's end token would),
 * else going on until done; every output must be a whole match by PCRE2's reading of the same pattern, and no
 * walk may meet a state with no token left where it cannot end. */
static void regex_walks(const char *name, const llm_json_vocab *v, const char *re, int count)
{
    llm_schema *sc = regex_of(re);
    int n = llm_json_vocab_size(v), finished = 0, bad = 0;
    float *lg = malloc((size_t)n * sizeof(float));
    int32_t *allowed = malloc((size_t)n * sizeof(int32_t));
    char out[4096];
    int ecode;
    PCRE2_SIZE eoff;
    pcre2_code *pc = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_UTF,
                                   &ecode, &eoff, NULL);
    pcre2_match_data *md = pc != NULL ? pcre2_match_data_create_from_pattern(pc, NULL) : NULL;
    uint64_t rng = 0x2545f4914f6cdd1dull;
    for (int w = 0; w < count && sc && lg && allowed && md; w++) {
        llm_schema_state *s = llm_schema_state_new(sc);
        size_t len = 0;
        int ended = 0;
        for (int step = 0; step < 200 && s != NULL; step++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            if (llm_schema_done(s) || (llm_schema_can_end(s) && (rng & 1))) {
                ended = 1;
                break;
            }
            for (int i = 0; i < n; i++)
                lg[i] = 0.0f;
            int na = 0;
            if (llm_schema_mask(s, v, lg, n) > 0)
                for (int id = 0; id < n; id++)
                    if (lg[id] == 0.0f)
                        allowed[na++] = id;
            if (na == 0) {
                ended = llm_schema_can_end(s);
                if (!ended && bad++ == 0)
                    diag("%s: a dead end after %.*s", name, (int)len, out);
                break;
            }
            int id = allowed[(rng >> 8) % (uint64_t)na];
            size_t k;
            const char *p = llm_json_token_bytes(v, id, &k);
            if (llm_schema_accept(s, v, id) != 0 || len + k >= sizeof out)
                break;
            memcpy(out + len, p, k);
            len += k;
        }
        if (ended) {
            finished++;
            if (pcre2_match(pc, (PCRE2_SPTR)out, len, 0, 0, md, NULL) < 0 && bad++ == 0)
                diag("%s: /%s/ does not match its output '%.*s'", name, re, (int)len, out);
        }
        llm_schema_state_free(s);
    }
    ok(finished > count / 2 && bad == 0, "%s, /%s/: %d random walks through the mask ended, %d not a whole match",
       name, re, finished, bad);
    pcre2_match_data_free(md);
    pcre2_code_free(pc);
    free(lg);
    free(allowed);
    llm_schema_free(sc);
}

int main(void)
{
    test_compile_refusals();
    test_regex_texts();
    test_utf8_strings();
    test_texts();
    test_mutations();
    static const char *const files[] = { TOK_JSON, TOK512 }, *const names[] = { "Llama 3", "stories260K" };
    static const struct { const char *name, *schema; } schemas[] = {
        { "person", NULL }, { "pets", NULL }, { "tree", NULL }, { "misc", NULL }, { "enum", NULL }, { "ints", NULL },
        { "formats", NULL }, { "bounds", NULL },
    };
    const char *texts[] = { S_PERSON, S_PETS, S_TREE, S_MISC, S_ENUM, S_INTS, S_FMT_WALK, S_NUM };
    static const char *const prefixes[][4] = {
        { "", "{\"name\":\"12345678901", "{\"name\":\"Jo\",\"age\":4", "{\"name\":\"J\", \"age\":1, \"tags\":[\"b" },
        { "{", "{\"pets\": [", "{\"pets\":[{\"kind\":\"", "{\"pets\":[{\"kind\":\"dog\"," },
        { "{\"value\":", "{\"value\":1,\"children\":[", "{\"value\":1,\"children\":[{\"value\":2}", "{\"value\":1 " },
        { "{\"scores\":{", "{\"scores\":{\"k\":1},\"note\":", "{\"scores\":{},\"note\":null,\"misc\":{\"a\":[", "{\"scores\":{},\"note\":\"" },
        { "", "1", "{\"a\":", "12" },
        { "[", "[1", "[1, 2", "[1,2,3,4" },
        { "{\"d\":\"20", "{\"d\":\"2026-1", "{\"d\":\"2026-12-02\",\"code\":\"A", "{\"d\":\"2026-12-02\",\"code\":\"AB-123\",\"u\":\"12" },
        { "{\"age\":", "{\"age\":1", "{\"age\":19,\"temp\":-5.", "{\"age\":19,\"temp\":3,\"frac\":0.4" },
    };
    for (int f = 0; f < 2; f++) {
        llm_err err = { { 0 } };
        llm_tokenizer *t = llm_tok_load(files[f], &err);
        llm_json_vocab *v = t != NULL ? llm_json_vocab_new(t) : NULL;
        ok(v != NULL, "%s: vocabulary loaded %s", names[f], err.msg);
        if (v == NULL) {
            llm_tok_free(t);
            continue;
        }
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            llm_schema *sc = compile(texts[i]);
            for (int j = 0; j < 4 && sc; j++)
                check_mask(names[f], t, v, sc, prefixes[i][j]);
            llm_schema_free(sc);
            int invalid = 0, fin = walks(schemas[i].name, v, texts[i], f == 0 ? 12 : 30, &invalid);
            ok(fin > 0 && invalid == 0, "%s, %s: %d random walks through the mask finished, %d invalid", names[f],
               schemas[i].name, fin, invalid);
        }
        /* regexes over the whole output: the mask exactly the tokens that fit, then walks checked by PCRE2 */
        static const char *const res[] = { "[A-Z][a-z]{1,8} (is|was) [0-9]{1,3}( years old)?",
                                           "(yes|no|maybe \\(perhaps\\))", "\\d{3}-[a-z]{2,4}-\\d{2}",
                                           "\"[a-z\\\\]{1,6}\"(, \"[a-z]{1,6}\"){0,2}" };
        static const char *const rx_prefixes[][2] = { { "", "Tim wa" }, { "", "maybe (p" }, { "12", "123-ab" },
                                                      { "\"", "\"a\", " } };
        for (size_t i = 0; i < sizeof res / sizeof res[0]; i++) {
            llm_schema *sc = regex_of(res[i]);
            for (int j = 0; j < 2 && sc; j++)
                check_mask(names[f], t, v, sc, rx_prefixes[i][j]);
            llm_schema_free(sc);
            regex_walks(names[f], v, res[i], f == 0 ? 12 : 30);
        }
        llm_json_vocab_free(v);
        llm_tok_free(t);
    }
    return done_testing();
}
