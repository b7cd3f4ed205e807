/* JSON mode (OpenAI's response_format {"type": "json_object"}): constrained decoding that lets a request
 * generate only a JSON object (RFC 8259).
 *
 * A byte-level recogniser of one JSON value (llm_json_state, a few dozen bytes, copied freely) says whether
 * a byte string can continue what was generated so far; each step, every token of the vocabulary whose
 * bytes (llm_tok_piece) cannot continue it gets logit -inf before sampling (llm_json_mask), so the request's
 * sampling parameters then act on the tokens that keep the text valid. Control tokens (end-of-generation
 * included) are never allowed: the request ends, finish reason "stop", the moment the top-level object is
 * closed (llm_json_done).
 *
 * Limits: nesting at most LLM_JSON_MAX_DEPTH deep; at most LLM_JSON_MAX_WS whitespace bytes in a row
 * between tokens and LLM_JSON_MAX_DIGITS digits in a number's integer part, fraction or exponent (a model
 * held to a grammar can otherwise emit whitespace or digits forever; llama.cpp's JSON grammar bounds both); string bytes >= 0x80 are taken as they come (UTF-8 is not validated: an invalid
 * sequence reaches the client as U+FFFD, still inside a valid string). */
#ifndef LLM_JSON_MODE_H
#define LLM_JSON_MODE_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

#define LLM_JSON_MAX_DEPTH 64
#define LLM_JSON_MAX_WS    32
#define LLM_JSON_MAX_DIGITS 16

typedef struct {
    uint8_t  st, sub;      /* syntactic state, and the state inside a string / number / literal */
    uint8_t  key;          /* the string being read is an object key */
    uint8_t  depth, ws;    /* open containers; whitespace bytes in a row */
    uint8_t  top_object;   /* the top-level value must be an object */
    uint8_t  digits;       /* digits in the number part being read */
    uint64_t is_obj;       /* bit d: container d is an object (else an array) */
} llm_json_state;

/* Well-formed UTF-8 inside a string (RFC 3629: no overlongs, surrogates or code points past U+10FFFF), one
 * byte at a time. *u is 0 between characters, else the continuation bytes still due (bits 0-1) and, for the
 * first of them, the lead byte's narrower range (bits 2-4: E0, ED, F0, F4). 0: c is taken, -1: it cannot
 * come here. */
static inline int llm_utf8_step(uint8_t *u, uint8_t c)
{
    static const uint8_t lo[5] = { 0x80, 0xa0, 0x80, 0x90, 0x80 }, hi[5] = { 0xbf, 0xbf, 0x9f, 0xbf, 0x8f };
    if (*u != 0) {
        unsigned k = *u >> 2;
        if (c < lo[k] || c > hi[k])
            return -1;
        *u = (uint8_t)((*u & 3) - 1);
        return 0;
    }
    if (c < 0x80)
        return 0;
    if (c < 0xc2 || c > 0xf4)
        return -1; /* a continuation byte with no lead, an overlong lead, past U+10FFFF */
    *u = c < 0xe0 ? 1 : c < 0xf0 ? (uint8_t)(2 | (c == 0xe0 ? 1 << 2 : c == 0xed ? 2 << 2 : 0))
                                 : (uint8_t)(3 | (c == 0xf0 ? 3 << 2 : c == 0xf4 ? 4 << 2 : 0));
    return 0;
}

/* A fresh state before the first byte: top_object 1 asks for an object, 0 for any JSON value. */
void llm_json_init(llm_json_state *s, int top_object);
/* Feed n bytes: 0 when they continue a valid JSON text (s moves on), -1 when one cannot (s unchanged). */
int  llm_json_feed(llm_json_state *s, const char *p, size_t n);
/* 1 once the top-level value is complete (only whitespace may follow; a number never completes alone). */
int  llm_json_done(const llm_json_state *s);
/* One byte: 0, or -1 when it cannot continue the text (s is then left in an unspecified state: step a copy). */
int  llm_json_step(llm_json_state *s, uint8_t c);
/* The text read is a whole value if it stops here: done, or a top-level number that may still grow. */
int  llm_json_can_end(const llm_json_state *s);
/* Inside a string's characters (not an escape): any byte >= 0x20 but '"' and '\\' continues it. */
int  llm_json_in_string(const llm_json_state *s);
/* Between tokens of structure (whitespace leaves the state as it is but for the whitespace count). */
int  llm_json_between_tokens(const llm_json_state *s);

/* Each token's bytes once, for masking: built from a tokenizer at start. */
typedef struct llm_json_vocab llm_json_vocab;
llm_json_vocab *llm_json_vocab_new(const llm_tokenizer *t); /* NULL: no memory */
void            llm_json_vocab_free(llm_json_vocab *v);
int             llm_json_vocab_size(const llm_json_vocab *v);
/* The bytes token id adds (NULL and 0 for control tokens, which JSON mode never allows). */
const char     *llm_json_token_bytes(const llm_json_vocab *v, int32_t id, size_t *len);
/* The tokens with bytes in byte order (ids), with the bytes each shares with the one before it (lcp) and the
 * longest token's bytes (maxlen): how many. */
int             llm_json_vocab_sorted(const llm_json_vocab *v, const int32_t **ids, const uint16_t **lcp,
                                      uint32_t *maxlen);

/* Set logits[id] = -inf for every token that cannot continue s (n_logits entries; ids past the vocabulary
 * are masked too). Returns the number of tokens left. Works in scratch memory of v: one call at a time
 * per vocabulary (the scheduler and generate each hold their own). */
int  llm_json_mask(const llm_json_vocab *v, const llm_json_state *s, float *logits, int n_logits);
/* The mask as any byte-level recogniser can use it (JSON Schema's too, json_schema.h). The recogniser
 * gives, for the state it masks for: first[c], whether byte c may come next; ws_short, whether a
 * whitespace byte leads to a state between tokens of structure, and if so after_ws[c] (byte c may follow
 * that whitespace) and ws_budget (whitespace bytes a token may lead with); in_string, whether tokens with
 * no '"', '\\' or control byte continue the text as they are when they have at most string_room code
 * points (all_in_string: and only then), or, with plain_fits, when plain_fits(plain_ctx, bytes, n) says so
 * (a string held to a pattern); and fits(ctx, bytes, n), the exact test for the candidates these tables
 * leave. The tables only ever pass tokens over to fits: they must never
 * refuse a token fits would take. */
typedef struct {
    uint8_t  first[256], after_ws[256];
    int      ws_short, in_string, all_in_string;
    unsigned ws_budget, string_room;
    int    (*fits)(const void *ctx, const char *p, size_t n);
    const void *ctx;
    int    (*plain_fits)(const void *plain_ctx, const char *p, size_t n); /* 1: fits; NULL: string_room */
    const void *plain_ctx;
    const uint64_t *plain_bits; /* instead of plain_fits: its verdicts, as llm_json_plain_bits made them */
} llm_json_mask_tables;
int  llm_json_mask_with(const llm_json_vocab *v, const llm_json_mask_tables *mt, float *logits, int n_logits);
/* The same as a bitmask: bit id of allow ((n_logits + 63) / 64 words) set when token id is left; the
 * candidates go through cand, scratch of llm_json_scratch_new's size, so threads with their own scratch
 * may mask at once (for different states). Returns the number left. */
int  llm_json_mask_bits(const llm_json_vocab *v, const llm_json_mask_tables *mt, uint64_t *allow, int n_logits,
                        int32_t *cand);
int32_t *llm_json_scratch_new(const llm_json_vocab *v); /* free() it; NULL: no memory */
/* fits's verdict on every plain token (no quote, backslash or control byte) as bits (others 0), for
 * llm_json_mask_tables.plain_bits: a pattern state's verdicts, made once and kept. */
void llm_json_plain_bits(const llm_json_vocab *v, int (*fits)(const void *ctx, const char *p, size_t n),
                         const void *ctx, uint64_t *bits);
/* logits[id] = -inf where allow's bit id is clear. */
void llm_json_mask_apply(const uint64_t *allow, float *logits, int n_logits);

/* Advance s by token id's bytes: 0, or -1 when the token cannot continue s (s unchanged). */
int  llm_json_accept(const llm_json_vocab *v, llm_json_state *s, int32_t id);

#endif
