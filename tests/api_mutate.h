/* Mutated request bodies for the API parser tests (test_llm_api.c, test_llm_responses.c, test_llm_messages.c):
 * seeds with 1-4 bytes replaced by JSON-ish characters, every fifth one cut short; each parse must end in 0 or
 * an error status 400 (500: out of memory), never anything else (ASan / UBSan in make san catch the rest). */
#ifndef TESTS_API_MUTATE_H
#define TESTS_API_MUTATE_H

#include <stdint.h>
#include <string.h>

/* The kind body k is parsed as (k: its number, seed: the index of its seed). */
typedef llm_api_kind (*api_mutate_kind)(int k, int seed);

/* runs bodies from seeds[0..n_seeds) in turn; 1 when every one parsed or was refused with a 400. */
static int api_mutate(const char *const *seeds, int n_seeds, int runs, uint64_t x, api_mutate_kind kind_of,
                      int chat_format)
{
    int sane = 1;
    for (int k = 0; k < runs; k++) {
        const char *seed = seeds[k % n_seeds];
        size_t n = strlen(seed);
        char buf[1024];
        if (n > sizeof buf) return 0;
        memcpy(buf, seed, n);
        for (int j = 0; j < 1 + k % 4; j++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            buf[(size_t)(x >> 33) % n] = "{}[]\",:0123456789-.eEtruefalsn \\x"[(x >> 20) % 34];
        }
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t len = k % 5 == 0 ? (size_t)(x >> 33) % n : n; /* some truncated */
        llm_api_req r;
        llm_api_err e;
        int rc = llm_api_parse_chat(kind_of(k, k % n_seeds), buf, len, chat_format, &r, &e);
        sane &= rc == 0 || (rc == -1 && (e.status == 400 || e.status == 500));
        llm_api_req_free(&r);
    }
    return sane;
}

#endif
