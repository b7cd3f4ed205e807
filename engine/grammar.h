/* Grammars in llama.cpp's GBNF (its server's `grammar`, vLLM's `guided_grammar` in that form): the whole output
 * is a text the grammar's rule `root` derives.
 *
 *   root   ::= answer ("," ws answer)*     # a comment
 *   answer ::= "yes" | "no" | [0-9]{1,3}
 *   ws     ::= [ \t\n]*
 *
 * What a grammar may hold: rules `name ::= alternatives` (names of letters, digits, '-' and '_'; a rule goes on
 * over newlines until the next `name ::=`), literals "..." (escapes \n \r \t \\ \" \' \[ \] \- \/ \xHH \uHHHH
 * \UHHHHHHHH), character classes [a-z0-9_] and [^...] (the same escapes), '.' (any character), rule names,
 * groups ( ... ), alternatives |, and repetition *, +, ?, {m}, {m,}, {m,n}; `#` starts a comment. Characters are
 * Unicode code points, read from the output's UTF-8 (a token may end inside one).
 *
 * grammar.c compiles the text into rules of alternatives, each a sequence of elements (a character class, or a
 * rule); a repetition or a group becomes a rule of its own. grammar_match.c reads the output against it as a
 * set of stacks (a pushdown automaton followed along every derivation at once), and masks the vocabulary by
 * walking it in byte order, so tokens that share a prefix share its steps.
 *
 * Refused, with a message naming the rule: left recursion (`a ::= a "x"`, or through other rules or an empty
 * prefix, which the stacks could not follow), a rule used but not defined, no rule root. Limits:
 * LLM_GRAMMAR_MAX_TEXT bytes of text, LLM_GRAMMAR_MAX_ELEMS elements after repetitions are written out,
 * stacks LLM_GRAMMAR_MAX_DEPTH deep (a derivation nested deeper is not followed), LLM_GRAMMAR_MAX_STACKS
 * derivations at once and 8,192 positions in all (past that, later ones are not followed: the output still
 * matches the grammar; a step's cost stays bounded whatever the grammar). */
#ifndef LLM_GRAMMAR_H
#define LLM_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "json_mode.h"

#define LLM_GRAMMAR_MAX_TEXT   65536
#define LLM_GRAMMAR_MAX_ELEMS  65536
#define LLM_GRAMMAR_MAX_DEPTH  512
#define LLM_GRAMMAR_MAX_STACKS 256

typedef struct llm_grammar llm_grammar;

/* Compile GBNF text. NULL with a message in err. */
llm_grammar *llm_grammar_parse(const char *src, size_t len, char *err, size_t cap);
void         llm_grammar_free(llm_grammar *g);
/* Rules after compiling (those written and those made for groups and repetitions). */
int          llm_grammar_rules(const llm_grammar *g);

/* The output read so far against g, which must outlive it. */
typedef struct llm_grammar_state llm_grammar_state;
llm_grammar_state *llm_grammar_state_new(const llm_grammar *g); /* NULL: no memory */
void               llm_grammar_state_free(llm_grammar_state *s);
/* dst (of the same grammar) becomes a copy of src: 0, or -1 (no memory; dst unchanged). */
int                llm_grammar_state_copy(llm_grammar_state *dst, const llm_grammar_state *src);
/* Feed n bytes: 0 when they continue a text the grammar derives (s moves on), -1 if not (s unchanged). */
int  llm_grammar_feed(llm_grammar_state *s, const char *p, size_t n);
/* 1 when the output so far is a whole text of the grammar. */
int  llm_grammar_accepts(const llm_grammar_state *s);
/* 1 when some byte can still follow. */
int  llm_grammar_can_go_on(const llm_grammar_state *s);
/* Bit id of allow ((n_logits + 63) / 64 words) set for every token whose bytes continue s; the number set.
 * Control tokens are never set. s is not changed (its scratch is: one call at a time per state). */
int  llm_grammar_mask_bits(const llm_grammar_state *s, const llm_json_vocab *v, uint64_t *allow, int n_logits);

#endif
