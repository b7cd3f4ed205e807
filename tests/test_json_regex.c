/* The pattern compiler (engine/json_regex.c) against PCRE2 (an independent ECMA-like engine): on every
 * string of a small alphabet up to a length, the DFA's verdict equals PCRE2's where json_regex.h promises
 * the same language, and never says yes where PCRE2 says no where it promises a narrower one; what is
 * refused, and why; the control bytes a JSON string cannot hold raw. */
#include "json_regex.h"
#include "tap.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

static int pcre_match(pcre2_code *c, const char *s, size_t n)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(c, NULL);
    int rc = pcre2_match(c, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

/* Every string of up to max_len symbols (each symbol a UTF-8 string) against both engines. exact: the
 * verdicts must be equal; else the DFA may only say yes where PCRE2 does. */
static void compare(const char *pattern, const char *const *alpha, int n_alpha, int max_len, int exact)
{
    char err[200] = "";
    llm_regex *re = llm_regex_compile(pattern, err, sizeof err);
    int code;
    PCRE2_SIZE off;
    pcre2_code *pc = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code, &off, NULL);
    if (re == NULL || pc == NULL) {
        ok(0, "%s compiles in both (%s)", pattern, err);
        llm_regex_free(re);
        pcre2_code_free(pc);
        return;
    }
    long total = 0, yes = 0, wrong = 0;
    int idx[16] = { 0 };
    char s[128];
    for (int len = 0; len <= max_len; len++) {
        memset(idx, 0, sizeof idx);
        for (;;) {
            size_t n = 0;
            for (int i = 0; i < len; i++) {
                size_t k = strlen(alpha[idx[i]]);
                memcpy(s + n, alpha[idx[i]], k);
                n += k;
            }
            int a = llm_regex_match(re, s, n), b = pcre_match(pc, s, n);
            total++;
            yes += a;
            if (exact ? a != b : (a && !b)) {
                if (wrong++ < 3)
                    diag("%s on \"%.*s\": ours %d, PCRE2 %d", pattern, (int)n, s, a, b);
            }
            int i = 0;
            while (i < len && ++idx[i] == n_alpha)
                idx[i++] = 0;
            if (i == len)
                break;
        }
    }
    ok(wrong == 0 && yes > 0, "%s: %s PCRE2 on %ld strings (%ld match)", pattern, exact ? "the same as" : "within", total, yes);
    llm_regex_free(re);
    pcre2_code_free(pc);
}

int main(void)
{
    static const char *const ascii[] = { "a", "b", "0", "1", "-", "_", ".", "Z", " " };
    static const char *const pats[] = {
        "^[a-z]+$", "a0b", "^(ab|b0)*1?$", "^a{2}b{0,2}$", "^a{2,}$", "^[^0-9 ]*$", "^\\d{2}-\\w+$", "^(a|b|)+$",
        "^\\.(?:a|-)?$", "b$", "^a", "^[a-b0-1]{1,3}$", "^(a+)+b$", "^\\s?\\S\\S$", "^(Z*|a.b)$", "^[-_.]{2}$",
        "^(?:a{1,2}b){2}$", "^[\\da]+?$",
    };
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++)
        compare(pats[i], ascii, 9, 5, 1);
    /* UTF-8: '.' and literal characters are exact; negated classes and \S take ASCII only (narrower) */
    static const char *const utf[] = { "a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "1", "\xe2\x80\xa8" };
    compare("^.{2}$", utf, 5, 3, 1); /* U+2028 aside: '.' leaves it out (ECMA-262), PCRE2 does not */
    compare("^.{2}$", utf, 6, 3, 0);
    compare("^a\xc3\xa9*$", utf, 6, 3, 1);
    compare("\xe2\x82\xac", utf, 6, 3, 1);
    compare("^[^a]+$", utf, 6, 3, 0);
    compare("^\\S+$", utf, 6, 3, 0);
    char e0[200] = "";
    llm_regex *dot = llm_regex_compile("^.$", e0, sizeof e0);
    ok(dot != NULL && !llm_regex_match(dot, "\xe2\x80\xa8", 3) && !llm_regex_match(dot, "\xe2\x80\xa9", 3) &&
       llm_regex_match(dot, "\xe2\x80\xa7", 3) && !llm_regex_match(dot, "\n", 1) && !llm_regex_match(dot, "\xc3", 1),
       "'.' takes no line terminator (U+2028, U+2029, \\n) and no broken UTF-8");
    llm_regex_free(dot);

    static const struct { const char *re, *why; } bad[] = {
        { "(?=a)", "lookaround" }, { "(?<n>a)", "lookaround" }, { "(a)\\1", "\\1 is not supported" },
        { "\\bword", "\\b is not supported" }, { "a^b", "'^' is supported at the start / end" },
        { "a$b", "'$' is supported" }, { "^x*$|^ab$", "'$' is supported" }, { "[\xc3\xa9]", "non-ASCII characters in a class" }, { "(ab", "without its ')'" },
        { "ab)", "unmatched ')'" }, { "[ab", "without its ']'" }, { "a{3,1}", "n above m" }, { "a{300}", "above 256" },
        { "[z-a]", "backwards" }, { "\\x41", "\\x is not supported" }, { "\\u0041", "\\u is not supported" },
        { "^\\v$", "\\v is not supported" }, { "^[^\\s\\S]$", "matches nothing" }, { "((a{200}){200})", "automaton states" },
        { "\\q", "\\q is not supported" },
        { "((((((((((((((((((((((((((((((((((a))))))))))))))))))))))))))))))))))", "groups more than 32 deep" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[200] = "";
        llm_regex *re = llm_regex_compile(bad[i].re, err, sizeof err);
        ok(re == NULL && strstr(err, bad[i].why) != NULL, "refused %s: %s", bad[i].re, err);
        llm_regex_free(re);
    }
    {
        char longp[1100];
        memset(longp, 'a', sizeof longp - 1);
        longp[sizeof longp - 1] = '\0';
        char e2[200] = "";
        llm_regex *lr = llm_regex_compile(longp, e2, sizeof e2);
        ok(lr == NULL && strstr(e2, "more than 1024 bytes"), "a pattern of 1,099 bytes is refused: %s", e2);
        llm_regex_free(lr);
    }
    /* control bytes: a JSON string writes \t \n \r \b \f as escapes, others only as \u escapes, which the
     * recogniser does not take: a pattern that needs one matches nothing it can write */
    char err[200] = "";
    llm_regex *re = llm_regex_compile("^a\\tb$", err, sizeof err);
    ok(re != NULL && llm_regex_match(re, "a\tb", 3), "a tab is a character the pattern can have (written \\t)");
    llm_regex_free(re);
    re = llm_regex_compile("^a[\\x01]$", err, sizeof err);
    ok(re == NULL, "\\x escapes are refused (%s)", err);
    re = llm_regex_compile("^[^a-z]$", err, sizeof err);
    ok(re != NULL && !llm_regex_match(re, "\x01", 1) && llm_regex_match(re, "\n", 1) && llm_regex_match(re, "#", 1),
       "a negated class takes no control byte JSON cannot write raw or as a short escape");
    llm_regex_free(re);
    /* random patterns from the syntax's pieces: each compiles or is refused with a message, and a compiled
     * one matches random ASCII strings as PCRE2 does (ASan and UBSan in make san watch) */
    {
        static const char *const piece[] = { "a", "b", "0", ".", "\\d", "\\w", "\\S", "[a-c]", "[^b]", "(", ")", "|",
                                             "*", "+", "?", "{2}", "{1,3}", "(?:", "^", "$", "\\", "[", "]", "-", "{" };
        uint64_t x = 88172645463325252ull;
        int runs = 0, compiled = 0, sane = 1, wrong = 0;
        for (int k = 0; k < 2000; k++) {
            char pat[64] = "";
            int len = 1 + k % 9;
            for (int i = 0; i < len; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                strcat(pat, piece[x % (sizeof piece / sizeof piece[0])]);
            }
            char why[200] = "";
            llm_regex *r = llm_regex_compile(pat, why, sizeof why);
            runs++;
            sane &= r != NULL || why[0] != '\0';
            int code;
            PCRE2_SIZE off;
            pcre2_code *pc = r ? pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code, &off, NULL) : NULL;
            if (r != NULL)
                compiled++;
            for (int t = 0; r != NULL && pc != NULL && t < 40; t++) {
                char str[8];
                int n = t % 6;
                for (int i = 0; i < n; i++) {
                    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                    str[i] = "ab0_ -"[x % 6];
                }
                int a = llm_regex_match(r, str, (size_t)n), b = pcre_match(pc, str, (size_t)n);
                if (a != b && wrong++ < 3) /* ASCII text: the same language */
                    diag("%s on \"%.*s\": ours %d, PCRE2 %d", pat, n, str, a, b);
            }
            pcre2_code_free(pc);
            llm_regex_free(r);
        }
        ok(sane && compiled > 100 && wrong == 0, "%d random patterns: %d compiled and matched ASCII strings exactly as PCRE2 does, "
           "the rest refused with a message", runs, compiled);
    }
    return done_testing();
}
