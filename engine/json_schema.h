/* JSON Schema constrained decoding (OpenAI's response_format {"type": "json_schema"}, vLLM's guided_json):
 * the output is one JSON value that the schema accepts.
 *
 * llm_schema_compile turns a schema into a small program of nodes (json_schema.c); a state
 * (json_schema_match.c) reads the output byte by byte against it, and llm_schema_mask sets logit -inf for
 * every token whose bytes cannot continue it, as JSON mode does (json_mode.h, whose vocabulary and mask
 * pass it shares). JSON mode itself is the schema {"type": "object"}.
 *
 * What a schema may say (anything else that constrains a value is refused with a message naming it, so a
 * request never gets output its schema does not describe):
 *   type (a name or a list of names), enum, const, properties, required, additionalProperties, items,
 *   prefixItems (and draft 7's items as a list with additionalItems), minItems, maxItems, minLength, maxLength, pattern (json_regex.h), format (date, time, date-time, uuid,
 *   email, ipv4 followed; the others are annotations, as JSON Schema 2020-12 has every format by default),
 *   minimum, maximum, exclusiveMinimum, exclusiveMaximum, anyOf, oneOf (read as anyOf), allOf of one
 *   schema, $ref to "#" or "#/..." inside the schema ($defs, definitions; recursion allowed), nullable.
 *   Annotations (title, description, default, examples, $schema, $id, ...) are ignored.
 * How the output is laid out:
 *   - an object with properties gets them in the schema's order: every required one, the optional ones
 *     where the model chooses, no others (OpenAI's strict mode: additionalProperties false);
 *   - an object with no properties: any JSON object, or with an additionalProperties schema a map of
 *     keys to such values;
 *   - enum and const values as cJSON prints them unformatted (1, not 1.0; no whitespace);
 *   - the value starts with the output's first byte (no leading whitespace, as llama.cpp's grammars);
 *     between tokens of structure at most LLM_JSON_MAX_WS whitespace bytes in a row;
 *   - string lengths count code points, an escape as one; a string held to a pattern or format has its
 *     characters as they are (no \u escapes), and no minLength / maxLength beside the pattern;
 *   - a number with bounds is written without an exponent, at most 16 digits before the point and 18 in
 *     all; each digit is taken only if a value within the bounds can still follow, so the output never
 *     paints itself into a corner.
 * Limits: LLM_SCHEMA_MAX_NODES nodes, LLM_SCHEMA_MAX_PROPS properties an object, LLM_SCHEMA_MAX_ENUM enum
 * values, values nested LLM_SCHEMA_MAX_DEPTH deep (free-form parts: JSON mode's limit again), and
 * LLM_SCHEMA_MAX_ALT readings of the output followed at once (anyOf alternatives that the bytes so far do
 * not tell apart; past that, later alternatives are not followed: the output still matches the schema). */
#ifndef LLM_JSON_SCHEMA_H
#define LLM_JSON_SCHEMA_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "json_mode.h"

#define LLM_SCHEMA_MAX_NODES 4096
#define LLM_SCHEMA_MAX_PROPS 64
#define LLM_SCHEMA_MAX_ENUM  1024
#define LLM_SCHEMA_MAX_DEPTH 24
#define LLM_SCHEMA_MAX_ALT   16
#define LLM_SCHEMA_MAX_TEXT  65536 /* bytes of schema text a request may carry */

typedef struct llm_schema llm_schema;

/* JSON mode's constraint as a schema: any JSON object. */
#define LLM_SCHEMA_JSON_OBJECT "{\"type\":\"object\"}"

/* Compile a schema (a cJSON object or boolean true). NULL with a message in err (a refused keyword, a bad
 * $ref, a limit, no memory). The schema does not keep s. */
llm_schema *llm_schema_compile(const cJSON *s, char *err, size_t cap);
/* The same from JSON text. */
llm_schema *llm_schema_parse(const char *text, size_t len, char *err, size_t cap);
/* Instead of a schema, a regular expression (json_regex.h's) that the whole output matches (vLLM's
 * guided_regex and guided_choice): the output's bytes as they are, no JSON. Anchored at both ends (its own '^'
 * and '$' are read as that). The request ends when nothing can follow (llm_schema_done); where the output is a
 * whole match that may go on, llm_schema_can_end says so and the caller lets the end-of-generation token
 * through. NULL with a message in err. */
llm_schema *llm_schema_regex(const char *src, size_t len, char *err, size_t cap);
/* Instead of a schema, a GBNF grammar (grammar.h) that the whole output is a text of (llama.cpp's `grammar`):
 * the output's bytes as they are, ended as a regex's (llm_schema_done, llm_schema_can_end). NULL with a
 * message in err. */
llm_schema *llm_schema_grammar(const char *src, size_t len, char *err, size_t cap);
void        llm_schema_free(llm_schema *sc);

/* The output read so far against a schema. The state refers to sc, which must outlive it. */
typedef struct llm_schema_state llm_schema_state;
llm_schema_state *llm_schema_state_new(const llm_schema *sc); /* NULL: no memory */
void              llm_schema_state_free(llm_schema_state *s);
/* Feed n bytes: 0 when they continue a text the schema accepts (s moves on), -1 if not (s unchanged). */
int  llm_schema_feed(llm_schema_state *s, const char *p, size_t n);
/* 1 once the output is a whole value the schema accepts (the request ends there). */
int  llm_schema_done(const llm_schema_state *s);
/* 1 when the output is a whole match of a regex (llm_schema_regex) or a whole text of a grammar
 * (llm_schema_grammar) that could also go on: it may end here. */
int  llm_schema_can_end(const llm_schema_state *s);
/* Set logits[id] = -inf for every token that cannot continue s; the number of tokens left. Uses v's
 * scratch memory (one call at a time per vocabulary). */
int  llm_schema_mask(const llm_schema_state *s, const llm_json_vocab *v, float *logits, int n_logits);
/* The same as a bitmask (llm_json_mask_bits): with its own cand scratch, a thread may mask one state while
 * other threads mask others. s is not changed. */
int  llm_schema_mask_bits(const llm_schema_state *s, const llm_json_vocab *v, uint64_t *allow, int n_logits,
                          int32_t *cand);
/* Advance s by token id's bytes: 0, or -1 (s unchanged). */
int  llm_schema_accept(llm_schema_state *s, const llm_json_vocab *v, int32_t id);

#endif
