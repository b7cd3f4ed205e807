/* Regular expressions for JSON Schema's "pattern" and "format" (json_schema.h): a subset of ECMA-262 compiled
 * to a DFA over the UTF-8 bytes of a string's value, so a string can be followed byte by byte.
 *
 * Supported: literals (UTF-8 included), '.', classes [a-z0-9_] and [^...] (ASCII members), \d \w \s \D \W
 * \S, escaped punctuation, \n \t \r \f, groups ( ) and (?: ), alternation |, quantifiers * + ? {n}
 * {n,} {n,m} (lazy forms read as greedy: the same language), '^' at the start and '$' at the end. A
 * pattern without '^' / '$' may have anything before / after it (JSON Schema patterns are not anchored).
 * Everything else (backreferences, lookaround, \b, non-ASCII class members) is refused by name.
 * Where ECMA-262 is wider than bytes can say cheaply, the DFA takes the narrower language (never a wider
 * one): negated classes and \D \W \S match ASCII characters only; '.' matches any character but line
 * terminators; and control characters a JSON string can only hold as \u escapes (all but \b \t \n \f
 * \r) are never taken, since the recogniser has the model write characters as they are.
 * Limits: LLM_REGEX_MAX_LEN bytes, groups LLM_REGEX_MAX_DEPTH deep, LLM_REGEX_MAX_NFA automaton states
 * before and LLM_REGEX_MAX_DFA after determinisation. */
#ifndef LLM_JSON_REGEX_H
#define LLM_JSON_REGEX_H

#include <stddef.h>
#include <stdint.h>

#define LLM_REGEX_MAX_NFA   4096
#define LLM_REGEX_MAX_DFA   2048
#define LLM_REGEX_MAX_LEN   1024 /* bytes of pattern (the compiler recurses over it) */
#define LLM_REGEX_MAX_DEPTH 32   /* groups inside groups */

typedef struct llm_regex llm_regex;

/* NULL with a message in err (what is not supported, a limit, no memory, a pattern that matches nothing). */
llm_regex *llm_regex_compile(const char *src, char *err, size_t cap);
void       llm_regex_free(llm_regex *re);
int        llm_regex_start(const llm_regex *re);
int        llm_regex_states(const llm_regex *re); /* DFA states: a state is 0 .. this - 1 */
/* The state after byte b, or -1 when no string that goes on so can match. */
int        llm_regex_step(const llm_regex *re, int state, uint8_t b);
int        llm_regex_accepts(const llm_regex *re, int state);
/* Whole-string test (for tests): 1 if s[0..n) matches. */
int        llm_regex_match(const llm_regex *re, const char *s, size_t n);

#endif
