/* Tokenizer unit tests' shared check: a text's ids against the expected ones (TAP, the ids printed on a
 * mismatch). Include after tap.h and tokenizer.h. */
#ifndef LLM_TESTS_TOK_CHECK_H
#define LLM_TESTS_TOK_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_ids(const char *what, const int32_t *v, int n)
{
    printf("#   %s:", what);
    for (int i = 0; i < n && i < 40; i++)
        printf(" %d", v[i]);
    printf("\n");
}

static int check(const llm_tokenizer *t, const char *text, size_t len, int flags, const int32_t *want, int nwant,
                 const char *label)
{
    int32_t *ids = NULL;
    int n = llm_tok_encode(t, text, len, flags, &ids);
    int good = n == nwant && (n == 0 || memcmp(ids, want, (size_t)n * sizeof(int32_t)) == 0);
    ok(good, "%s", label);
    if (!good) {
        print_ids("got ", ids, n);
        print_ids("want", want, nwant);
    }
    free(ids);
    return good;
}

#define IDS(...) (const int32_t[]){ __VA_ARGS__ }, (int)(sizeof((const int32_t[]){ __VA_ARGS__ }) / sizeof(int32_t))
#define EXPECT(t, text, flags, label, ...) check(t, text, sizeof(text) - 1, flags, IDS(__VA_ARGS__), label)

#endif
