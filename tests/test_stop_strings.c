/* Stop-string matcher: matches across piece boundaries, holds back partial
 * matches, cuts at the earliest stop, releases held text at the end. */
#include "tap.h"
#include "stop_strings.h"

#include <string.h>

/* Feeds pieces, returns the concatenated output in got (and whether a stop hit). */
static int run(const char *const *stops, int ns, const char *const *pieces, int np, char *got, size_t cap)
{
    llm_stop_matcher m;
    if (llm_stop_init(&m, stops, NULL, ns)) return -1;
    size_t n = 0;
    int hit = 0;
    for (int i = 0; i < np && !hit; i++) {
        const char *o; size_t ol;
        hit = llm_stop_push(&m, pieces[i], strlen(pieces[i]), &o, &ol);
        if (hit < 0) { llm_stop_free(&m); return -1; }
        if (n + ol < cap) { memcpy(got + n, o, ol); n += ol; }
    }
    if (!hit) {
        const char *o; size_t ol;
        llm_stop_flush(&m, &o, &ol);
        if (n + ol < cap) { memcpy(got + n, o, ol); n += ol; }
    }
    got[n] = 0;
    llm_stop_free(&m);
    return hit;
}

int main(void)
{
    char got[512];

    const char *s1[] = { "\n\n" };
    const char *p1[] = { "Hello", " world", "\n", "\nmore" };
    is_int(run(s1, 1, p1, 4, got, sizeof got), 1, "stop across two pieces hits");
    ok(!strcmp(got, "Hello world"), "output cut before the stop (got '%s')", got);

    const char *p2[] = { "a\n", "b\n", "c" };
    is_int(run(s1, 1, p2, 3, got, sizeof got), 0, "lone newlines do not hit");
    ok(!strcmp(got, "a\nb\nc"), "held newline released when the next piece disproves it");

    /* Partial match held back, then released at the end. */
    {
        const char *stops[] = { "STOP" };
        llm_stop_matcher m;
        llm_stop_init(&m, stops, NULL, 1);
        const char *o; size_t ol;
        is_int(llm_stop_push(&m, "abcST", 5, &o, &ol), 0, "partial: no hit");
        ok(ol == 3 && !memcmp(o, "abc", 3), "partial: 'ST' held back");
        is_int(llm_stop_push(&m, "O", 1, &o, &ol), 0, "partial: still no hit");
        is_int((int)ol, 0, "partial: 'STO' held back");
        llm_stop_flush(&m, &o, &ol);
        ok(ol == 3 && !memcmp(o, "STO", 3), "flush releases 'STO'");
        llm_stop_free(&m);
    }

    /* Earliest of several stops wins; the stop can be inside one piece. */
    const char *s3[] = { "world", "lo w" };
    const char *p3[] = { "Hello world!" };
    is_int(run(s3, 2, p3, 1, got, sizeof got), 1, "several stops: hit");
    ok(!strcmp(got, "Hel"), "earliest stop position wins (got '%s')", got);

    /* Overlapping prefixes: "aab" in "aaab" streamed byte by byte. */
    const char *s4[] = { "aab" };
    const char *p4[] = { "a", "a", "a", "b", "c" };
    is_int(run(s4, 1, p4, 5, got, sizeof got), 1, "overlapping prefix: hit");
    ok(!strcmp(got, "a"), "overlapping prefix: emits only the first 'a' (got '%s')", got);

    /* No stop strings: pass-through. Empty strings are ignored. */
    const char *s5[] = { "" };
    const char *p5[] = { "x", "y" };
    is_int(run(s5, 1, p5, 2, got, sizeof got), 0, "empty stop ignored");
    ok(!strcmp(got, "xy"), "pass-through");

    /* Stop at the very start; nothing after a hit is emitted. */
    {
        const char *stops[] = { "#" };
        llm_stop_matcher m;
        llm_stop_init(&m, stops, NULL, 1);
        const char *o; size_t ol;
        is_int(llm_stop_push(&m, "#tail", 5, &o, &ol), 1, "stop at start hits");
        is_int((int)ol, 0, "nothing before it");
        is_int(llm_stop_push(&m, "more", 4, &o, &ol), 1, "after a hit: still done");
        is_int((int)ol, 0, "after a hit: nothing emitted");
        is_int(m.which, 0, "which stop matched");
        llm_stop_free(&m);
    }

    /* UTF-8 stop string split across pieces. */
    const char *s6[] = { "\xc3\xa9t\xc3\xa9" };
    const char *p6[] = { "un \xc3\xa9", "t", "\xc3\xa9 chaud" };
    is_int(run(s6, 1, p6, 3, got, sizeof got), 1, "utf-8 stop hit");
    ok(!strcmp(got, "un "), "utf-8 cut (got '%s')", got);

    /* Limits. */
    {
        llm_stop_matcher m;
        char big[LLM_STOP_MAX_LEN + 2];
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = 0;
        const char *stops[] = { big };
        is_int(llm_stop_init(&m, stops, NULL, 1), -1, "overlong stop string refused");
        const char *many[LLM_STOP_MAX + 1];
        for (int i = 0; i <= LLM_STOP_MAX; i++) many[i] = "s";
        is_int(llm_stop_init(&m, many, NULL, LLM_STOP_MAX + 1), -1, "too many stop strings refused");
    }

    /* Long stream: held text stays bounded by the longest stop. */
    {
        const char *stops[] = { "<end>" };
        llm_stop_matcher m;
        llm_stop_init(&m, stops, NULL, 1);
        size_t total = 0;
        const char *o; size_t ol;
        for (int i = 0; i < 10000; i++) {
            llm_stop_push(&m, "<en", 3, &o, &ol);
            total += ol;
        }
        ok(m.len <= 8, "held text bounded (len %zu)", m.len);
        ok(total == 3 * 10000 - 3, "all but the held tail emitted (%zu)", total);
        llm_stop_free(&m);
    }
    return done_testing();
}
