/* Constrained decoding's per-step cost: one mask over a whole vocabulary (Llama 3's 128,256 tokens by
 * default) in the states an output goes through, beside the plain way to the same mask (every token's
 * bytes fed to a copy of the state, no first-byte table, no whitespace or plain-string shortcuts), which
 * must leave the same tokens (checked: the run fails if they differ). Median of reps calls, one thread.
 * A step of a constrained request costs one mask on the host.
 *   Table 1, JSON mode: JSON mode's own recogniser (engine/json_mode.c) and the same constraint as the
 *   schema {"type": "object"} (engine/json_schema*.c, what the server runs; its output starts with the
 *   object, so "before the object" leaves fewer tokens there), each checked against its plain way.
 *   Table 2, a JSON Schema with required and optional properties, an enum, a length, a format (a pattern)
 *   and a nested array. In a pattern string a state's verdicts on plain tokens are kept once made: the
 *   table's e-mail row is a state met before; the last row, a state's first mask.
 *   Table 3, a regular expression over the whole output (guided_regex, and guided_choice's alternation): a
 *   state's first mask and the same state again.
 *   Table 4, a GBNF grammar over the whole output (llama.cpp's grammar; engine/grammar*.c): a JSON grammar
 *   and a nested arithmetic one; a state's first mask (the vocabulary walked in byte order) and the same
 *   state again (its mask kept).
 * Build: make build/libllm.a && cc -O2 -std=c11 -D_GNU_SOURCE -Iengine -Ishm bench/json_mask_bench.c
 *          build/libllm.a -lcjson -lpcre2-8 -lhiredis -lpthread -lm -o build/json_mask_bench
 * Run:   build/json_mask_bench [tokenizer=../shared/tokenizers/llama3/tokenizer.json] [reps=31] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json_schema.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The same mask the plain way. */
static int plain_mask(const llm_json_vocab *v, const llm_json_state *s, float *logits, int n)
{
    int left = 0;
    for (int id = 0; id < n; id++) {
        size_t k;
        const char *p = llm_json_token_bytes(v, id, &k);
        llm_json_state t = *s;
        if (p == NULL || llm_json_feed(&t, p, k) != 0)
            logits[id] = -INFINITY;
        else
            left++;
    }
    return left;
}

static int plain_schema_mask(const llm_json_vocab *v, const llm_schema *sc, const char *prefix, float *logits, int n)
{
    int left = 0;
    for (int id = 0; id < n; id++) {
        size_t k;
        const char *p = llm_json_token_bytes(v, id, &k);
        llm_schema_state *t = llm_schema_state_new(sc);
        llm_schema_feed(t, prefix, strlen(prefix));
        if (p == NULL || llm_schema_feed(t, p, k) != 0)
            logits[id] = -INFINITY;
        else
            left++;
        llm_schema_state_free(t);
    }
    return left;
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof(double), cmp_d);
    return t[n / 2];
}

static const char *const PERSON =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":40},"
    "\"age\":{\"type\":\"integer\"},\"email\":{\"type\":\"string\",\"format\":\"email\"},"
    "\"role\":{\"enum\":[\"admin\",\"editor\",\"viewer\"]},"
    "\"pets\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"kind\":{\"type\":\"string\"},"
    "\"age\":{\"type\":\"number\"}},\"required\":[\"kind\"]},\"maxItems\":8}},"
    "\"required\":[\"name\",\"age\",\"role\"]}";

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "../shared/tokenizers/llama3/tokenizer.json";
    int reps = argc > 2 ? atoi(argv[2]) : 31;
    if (reps < 1)
        reps = 1;
    llm_err err = { { 0 } };
    llm_tokenizer *tok = llm_tok_load(path, &err);
    if (tok == NULL) {
        fprintf(stderr, "json_mask_bench: %s\n", err.msg);
        return 1;
    }
    llm_json_vocab *v = llm_json_vocab_new(tok);
    int n = llm_json_vocab_size(v);
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    double *ta = malloc((size_t)reps * sizeof(double)), *tb = malloc((size_t)reps * sizeof(double));
    if (v == NULL || a == NULL || b == NULL || ta == NULL || tb == NULL) {
        fprintf(stderr, "json_mask_bench: out of memory\n");
        return 1;
    }
    { /* the byte order grammars walk is made on first use: made here, so no timed mask pays for it */
        const int32_t *ids;
        const uint16_t *lcp;
        uint32_t maxlen;
        (void)llm_json_vocab_sorted(v, &ids, &lcp, &maxlen);
    }
    static const struct { const char *name, *text; } states[] = {
        { "before the object", "" },
        { "after '{'", "{" },
        { "in a key", "{\"na" },
        { "after a key", "{\"name\"" },
        { "after ':'", "{\"name\":" },
        { "in a string value", "{\"name\": \"some text" },
        { "in a number", "{\"n\": 12" },
        { "after a value", "{\"n\": 12," },
        { "in an array", "{\"a\": [1, " },
    };
    char msg[256];
    llm_schema *obj = llm_schema_parse(LLM_SCHEMA_JSON_OBJECT, strlen(LLM_SCHEMA_JSON_OBJECT), msg, sizeof msg);
    llm_schema *person = llm_schema_parse(PERSON, strlen(PERSON), msg, sizeof msg);
    double *tc = malloc((size_t)reps * sizeof(double));
    float *c = malloc((size_t)n * sizeof(float));
    if (obj == NULL || person == NULL || tc == NULL || c == NULL) {
        fprintf(stderr, "json_mask_bench: %s\n", obj == NULL || person == NULL ? msg : "out of memory");
        return 1;
    }
    printf("JSON mode mask, %d tokens (%s), one thread, median of %d calls\n", n, path, reps);
    printf("%-20s %8s %10s %12s %14s\n", "state", "left", "JSON ms", "schema ms", "plain way ms");
    int bad = 0;
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
        llm_json_state s;
        llm_json_init(&s, 1);
        llm_json_feed(&s, states[i].text, strlen(states[i].text));
        llm_schema_state *ss = llm_schema_state_new(obj);
        llm_schema_feed(ss, states[i].text, strlen(states[i].text));
        int la = 0, lb = 0, lc = 0;
        for (int r = 0; r < reps; r++) {
            memset(a, 0, (size_t)n * sizeof(float));
            memset(b, 0, (size_t)n * sizeof(float));
            memset(c, 0, (size_t)n * sizeof(float));
            double t0 = now_ms();
            la = llm_json_mask(v, &s, a, n);
            double t1 = now_ms();
            lc = llm_schema_mask(ss, v, c, n);
            double t2 = now_ms();
            lb = plain_mask(v, &s, b, n);
            double t3 = now_ms();
            ta[r] = t1 - t0;
            tc[r] = t2 - t1;
            tb[r] = t3 - t2;
        }
        bad |= la != lb || memcmp(a, b, (size_t)n * sizeof(float)) != 0;
        /* the schema's own plain way (its root takes no leading whitespace, JSON mode's recogniser does) */
        memset(b, 0, (size_t)n * sizeof(float));
        bad |= plain_schema_mask(v, obj, states[i].text, b, n) != lc || memcmp(c, b, (size_t)n * sizeof(float)) != 0;
        printf("%-20s %8d %10.3f %12.3f %14.3f\n", states[i].name, la, median(ta, reps), median(tc, reps),
               median(tb, reps));
        llm_schema_state_free(ss);
    }
    static const struct { const char *name, *text; } pstates[] = {
        { "before the object", "" },
        { "after '{'", "{" },
        { "in a key", "{\"na" },
        { "in a string value", "{\"name\": \"some text" },
        { "in a number", "{\"name\": \"x\", \"age\": 12" },
        { "in an e-mail format", "{\"name\": \"x\", \"age\": 12, \"email\": \"jo" },
        { "in an enum", "{\"name\": \"x\", \"age\": 12, \"role\": \"ed" },
        { "after a value", "{\"name\": \"x\", \"age\": 12, \"role\": \"editor\"" },
        { "in an array", "{\"name\": \"x\", \"age\": 12, \"role\": \"editor\", \"pets\": [{\"kind\": \"cat\"}, " },
    };
    int reps2 = reps < 5 ? reps : 5; /* the plain way builds a state per token */
    printf("\nJSON Schema mask (a person: 5 properties, an enum, a maxLength, an e-mail format, an array of objects)\n");
    printf("%-20s %8s %12s %14s\n", "state", "left", "schema ms", "plain way ms");
    for (size_t i = 0; i < sizeof pstates / sizeof pstates[0]; i++) {
        llm_schema_state *ss = llm_schema_state_new(person);
        if (llm_schema_feed(ss, pstates[i].text, strlen(pstates[i].text)) != 0) {
            fprintf(stderr, "json_mask_bench: the person schema refuses %s\n", pstates[i].text);
            return 1;
        }
        int lb = 0, lc = 0;
        for (int r = 0; r < reps; r++) {
            memset(c, 0, (size_t)n * sizeof(float));
            double t0 = now_ms();
            lc = llm_schema_mask(ss, v, c, n);
            tc[r] = now_ms() - t0;
        }
        for (int r = 0; r < reps2; r++) {
            memset(b, 0, (size_t)n * sizeof(float));
            double t0 = now_ms();
            lb = plain_schema_mask(v, person, pstates[i].text, b, n);
            tb[r] = now_ms() - t0;
        }
        bad |= lb != lc || memcmp(b, c, (size_t)n * sizeof(float)) != 0;
        printf("%-20s %8d %12.3f %14.3f\n", pstates[i].name, lc, median(tc, reps), median(tb, reps2));
        llm_schema_state_free(ss);
    }
    /* a pattern state's first mask: its verdicts on the plain tokens are made then, and kept */
    {
        const char *pre = "{\"name\": \"x\", \"age\": 12, \"email\": \"jo";
        for (int r = 0; r < reps2; r++) {
            llm_schema *fresh = llm_schema_parse(PERSON, strlen(PERSON), msg, sizeof msg);
            llm_schema_state *ss = llm_schema_state_new(fresh);
            llm_schema_feed(ss, pre, strlen(pre));
            memset(c, 0, (size_t)n * sizeof(float));
            double t0 = now_ms();
            llm_schema_mask(ss, v, c, n);
            tc[r] = now_ms() - t0;
            llm_schema_state_free(ss);
            llm_schema_free(fresh);
        }
        printf("%-20s %8s %12.3f %14s\n", "e-mail, first time", "", median(tc, reps2), "");
    }
    /* Table 3: a regex over the whole output (guided_regex; guided_choice is the regex of its alternation): a
     * state's first mask (a fresh compile each call), then the same state again (its plain verdicts kept) */
    static const char *const JSON_G =
        "root   ::= object\n"
        "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
        "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
        "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
        "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
        "number ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? ws\n"
        "ws     ::= [ \\t\\n]{0,8}\n";
    static const char *const ARITH_G =
        "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= factor ((\"*\" | \"/\") factor)*\n"
        "factor ::= [0-9]+ | \"(\" expr \")\" | \"-\" factor\n";
    static const struct { const char *name, *re, *text; int grammar; } rstates[] = {
        { "choice, start", "(positive|negative|neutral|mixed feelings)", "", 0 },
        { "choice, in one", "(positive|negative|neutral|mixed feelings)", "mixed f", 0 },
        { "regex, start", "[A-Z][a-z]{1,8} (is|was) [0-9]{1,3}( years old)?", "", 0 },
        { "regex, in a word", "[A-Z][a-z]{1,8} (is|was) [0-9]{1,3}( years old)?", "Tim", 0 },
        { "regex, whole match", "[A-Z][a-z]{1,8} (is|was) [0-9]{1,3}( years old)?", "Tim was 4", 0 },
        { "JSON, start", NULL, "", 1 },
        { "JSON, after a key", NULL, "{\"name\": ", 1 },
        { "JSON, in a string", NULL, "{\"name\": \"Tom", 1 },
        { "JSON, in a number", NULL, "{\"name\": \"Tom\", \"age\": 1", 1 },
        { "arith, start", NULL, "", 2 },
        { "arith, 8 deep", NULL, "((((((((1+2*", 2 },
    };
    printf("\nRegex mask (guided_regex / guided_choice: the whole output)\n");
    printf("%-20s %8s %12s %12s %14s\n", "state", "left", "first ms", "again ms", "plain way ms");
    for (size_t i = 0; i < sizeof rstates / sizeof rstates[0]; i++) {
        int lb = 0, lc = 0;
        const char *src = rstates[i].grammar == 1 ? JSON_G : rstates[i].grammar == 2 ? ARITH_G : rstates[i].re;
        if (rstates[i].grammar && (i == 0 || !rstates[i - 1].grammar)) {
            printf("\nGrammar mask (llama.cpp's GBNF: a JSON grammar, a nested arithmetic one)\n");
            printf("%-20s %8s %12s %12s %14s\n", "state", "left", "first ms", "again ms", "plain way ms");
        }
        for (int r = 0; r < reps2; r++) {
            llm_schema *fresh = rstates[i].grammar ? llm_schema_grammar(src, strlen(src), msg, sizeof msg)
                                                   : llm_schema_regex(src, strlen(src), msg, sizeof msg);
            llm_schema_state *ss = fresh != NULL ? llm_schema_state_new(fresh) : NULL;
            if (ss == NULL || llm_schema_feed(ss, rstates[i].text, strlen(rstates[i].text)) != 0) {
                fprintf(stderr, "json_mask_bench: %s: %s\n", rstates[i].name, fresh ? "refuses its text" : msg);
                return 1;
            }
            memset(c, 0, (size_t)n * sizeof(float));
            double t0 = now_ms();
            lc = llm_schema_mask(ss, v, c, n);
            tc[r] = now_ms() - t0;
            for (int k = 0; k < reps; k++) {
                memset(c, 0, (size_t)n * sizeof(float));
                t0 = now_ms();
                lc = llm_schema_mask(ss, v, c, n);
                ta[k] = now_ms() - t0;
            }
            if (r == 0) {
                memset(b, 0, (size_t)n * sizeof(float));
                t0 = now_ms();
                lb = plain_schema_mask(v, fresh, rstates[i].text, b, n);
                tb[0] = now_ms() - t0;
                bad |= lb != lc || memcmp(b, c, (size_t)n * sizeof(float)) != 0;
            }
            llm_schema_state_free(ss);
            llm_schema_free(fresh);
        }
        printf("%-20s %8d %12.3f %12.3f %14.3f\n", rstates[i].name, lc, median(tc, reps2), median(ta, reps), tb[0]);
    }
    llm_schema_free(obj);
    llm_schema_free(person);
    free(tc);
    free(c);
    if (bad)
        fprintf(stderr, "json_mask_bench: the mask and the plain way left different tokens\n");
    llm_json_vocab_free(v);
    llm_tok_free(tok);
    free(a);
    free(b);
    free(ta);
    free(tb);
    return bad;
}
