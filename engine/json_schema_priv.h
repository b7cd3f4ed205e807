/* A compiled JSON Schema, as json_schema.c builds it and json_schema_match.c reads it. */
#ifndef LLM_JSON_SCHEMA_PRIV_H
#define LLM_JSON_SCHEMA_PRIV_H

#include "grammar.h"
#include "json_regex.h"
#include "json_schema.h"

enum {
    SK_ANY,     /* any JSON value (top_object: any object), read by JSON mode's recogniser */
    SK_OBJECT,  /* props[first .. first+n): in order, required ones present, no others */
    SK_MAP,     /* an object of any keys, each value node item */
    SK_ARRAY,   /* between min and max items (max -1: no bound): the first n of nodes alts[first ..]
                 * (a tuple, prefixItems), the others of node item */
    SK_STRING,  /* min..max code points (max -1: no bound); or a value regexes[pattern] matches */
    SK_NUMBER,
    SK_INTEGER,
    SK_CONST,   /* one of consts[first .. first+n): JSON texts, sorted bytewise, shorter first */
    SK_ANYOF,   /* one of the nodes alts[first .. first+n) */
    SK_REF,     /* the node item (a $ref being compiled when it was met) */
};

typedef struct {
    uint8_t  kind;
    uint8_t  top_object;
    uint32_t first, n;
    uint32_t item;
    int64_t  min, max;
    int32_t  pattern;   /* SK_STRING: index into regexes, or -1 */
    uint8_t  bounds;    /* SK_NUMBER, SK_INTEGER: B_* of lo and hi */
    double   lo, hi;
} llm_schema_node;

enum { B_LO = 1, B_HI = 2, B_LO_EX = 4, B_HI_EX = 8 }; /* a bound; exclusive */

typedef struct {
    uint32_t off, len;  /* the key as JSON text, quotes included, in bytes[] */
    uint32_t node;
    uint8_t  required;
} llm_schema_prop;

typedef struct {
    uint32_t off, len;  /* in bytes[] */
} llm_schema_text;

/* Per pattern and DFA state (the first LLM_SCHEMA_MEMO_STATES), the verdicts of the mask on plain tokens
 * there, kept once made; at most LLM_SCHEMA_MEMO_MAX of them a schema. Written by the one thread that masks
 * the request the schema belongs to (each request compiles its own). */
#define LLM_SCHEMA_MEMO_STATES 32
#define LLM_SCHEMA_MEMO_MAX    64
typedef struct {
    uint64_t ***bits;  /* [regex][state], NULL until made */
    int         used;
} llm_schema_memo;

struct llm_schema {
    llm_schema_node *nodes;
    uint32_t         n_nodes, cap_nodes;
    llm_schema_prop *props;
    uint32_t         n_props, cap_props;
    llm_schema_text *consts;
    uint32_t         n_consts, cap_consts;
    uint32_t        *alts;
    uint32_t         n_alts, cap_alts;
    char            *bytes;
    size_t           n_bytes, cap_bytes;
    llm_regex      **regexes;   /* patterns and formats */
    uint32_t         n_regexes, cap_regexes;
    llm_schema_memo *memo;      /* the mask's kept verdicts in pattern strings (json_schema_match.c) */
    uint32_t         root;
    uint32_t         any_string; /* a map's keys */
    int              raw;        /* llm_schema_regex: the whole output is held to regexes[0] (no JSON, no nodes) */
    llm_grammar     *gram;       /* llm_schema_grammar: the whole output is held to it (no JSON, no nodes) */
};

#endif
