/* JSON Schema constrained decoding (engine/json_schema.c, json_schema_match.c): what the compiler refuses;
 * texts each schema accepts (whole, byte by byte, split anywhere) and refuses; the vocabulary mask
 * against feeding every token (Llama 3 and stories260K vocabularies); and random walks through the mask
 * whose outputs a validator written here, independently of the recogniser, checks against the schema. */
#include "json_schema.h"
#include "tap.h"
#include "tokenizer.h"

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
        { "{\"type\":\"string\",\"pattern\":\"^a\"}", "'pattern' is not supported" },
        { "{\"type\":\"string\",\"format\":\"date\"}", "'format' is not supported" },
        { "{\"type\":\"integer\",\"minimum\":0}", "'minimum' is not supported" },
        { "{\"type\":\"array\",\"prefixItems\":[{}]}", "'prefixItems' is not supported" },
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
        { "{\"type\":\"array\",\"items\":[{}]}", "tuples" },
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
    static const char *const obj_good[] = { "{}", "{\"a\":[1,{\"b\":\"c\"}]}", NULL };
    static const char *const obj_bad[] = { "[]", "1 ", "\"x\"", NULL };
    check_texts("JSON mode's schema", "{\"type\":\"object\"}", obj_good, obj_bad);
}

/* Mutated schemas compile or are refused with a message; what compiles takes random bytes without harm
 * (ASan and UBSan in make san watch). */
static void test_mutations(void)
{
    const char *seeds[] = { S_PERSON, S_PETS, S_TREE, S_MISC, S_ENUM, S_INTS };
    uint64_t x = 0x2545f4914f6cdd1dull;
    int runs = 0, compiled = 0, sane = 1;
    for (int k = 0; k < 3000; k++) {
        const char *seed = seeds[k % 6];
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
        size_t n = code_points(v->valuestring);
        if ((x = cJSON_GetObjectItemCaseSensitive(s, "minLength")) && n < (size_t)x->valueint) return 0;
        if ((x = cJSON_GetObjectItemCaseSensitive(s, "maxLength")) && n > (size_t)x->valueint) return 0;
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
 * parse and be valid. Returns the walks that finished. */
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
            if (llm_schema_mask(s, v, lg, n) == 0)
                break;
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

int main(void)
{
    test_compile_refusals();
    test_texts();
    test_mutations();
    static const char *const files[] = { TOK_JSON, TOK512 }, *const names[] = { "Llama 3", "stories260K" };
    static const struct { const char *name, *schema; } schemas[] = {
        { "person", NULL }, { "pets", NULL }, { "tree", NULL }, { "misc", NULL }, { "enum", NULL }, { "ints", NULL },
    };
    const char *texts[] = { S_PERSON, S_PETS, S_TREE, S_MISC, S_ENUM, S_INTS };
    static const char *const prefixes[][4] = {
        { "", "{\"name\":\"12345678901", "{\"name\":\"Jo\",\"age\":4", "{\"name\":\"J\", \"age\":1, \"tags\":[\"b" },
        { "{", "{\"pets\": [", "{\"pets\":[{\"kind\":\"", "{\"pets\":[{\"kind\":\"dog\"," },
        { "{\"value\":", "{\"value\":1,\"children\":[", "{\"value\":1,\"children\":[{\"value\":2}", "{\"value\":1 " },
        { "{\"scores\":{", "{\"scores\":{\"k\":1},\"note\":", "{\"scores\":{},\"note\":null,\"misc\":{\"a\":[", "{\"scores\":{},\"note\":\"" },
        { "", "1", "{\"a\":", "12" },
        { "[", "[1", "[1, 2", "[1,2,3,4" },
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
        llm_json_vocab_free(v);
        llm_tok_free(t);
    }
    return done_testing();
}
