/* Minimal TAP producer for C unit tests; run under `prove`. */
#ifndef LLM_TAP_H
#define LLM_TAP_H

#include <stdio.h>
#include <stdlib.h>

static int tap_n, tap_fail;

#define ok(cond, ...) do {                                              \
        int ok_c_ = (cond) ? 1 : 0;                                     \
        tap_n++;                                                        \
        if (!ok_c_) tap_fail++;                                         \
        printf("%sok %d - ", ok_c_ ? "" : "not ", tap_n);               \
        printf(__VA_ARGS__);                                            \
        printf("\n");                                                   \
        if (!ok_c_) printf("#   failed at %s:%d\n", __FILE__, __LINE__); \
        fflush(stdout);                                                 \
    } while (0)

#define is_int(got, want, ...) do {                                     \
        long long is_g_ = (long long)(got), is_w_ = (long long)(want);  \
        ok(is_g_ == is_w_, __VA_ARGS__);                                \
        if (is_g_ != is_w_) printf("#   got %lld, want %lld\n", is_g_, is_w_); \
    } while (0)

#define diag(...) do { printf("# "); printf(__VA_ARGS__); printf("\n"); } while (0)

static inline int done_testing(void)
{
    printf("1..%d\n", tap_n);
    return tap_fail ? 1 : 0;
}

#endif
