/* Incremental stop-string matcher over streamed text. Text goes in piece by
 * piece as the detokenizer produces it; what comes out is safe to send: any
 * tail that could still be the start of a stop string is held back, and when a
 * stop string appears the output is cut right before it and the matcher is
 * done (the stop string itself and anything after it are never emitted). */
#ifndef LLM_STOP_STRINGS_H
#define LLM_STOP_STRINGS_H

#include <stddef.h>

#define LLM_STOP_MAX     16   /* stop strings per request */
#define LLM_STOP_MAX_LEN 256  /* bytes per stop string */

typedef struct {
    char   *stop[LLM_STOP_MAX];
    size_t  stop_len[LLM_STOP_MAX];
    int     n_stop;
    size_t  max_len;     /* longest stop string */
    char   *buf;         /* held-back text, then (transiently) the output */
    size_t  len, cap;
    size_t  emit_off;    /* output of the last call starts here in buf */
    int     done;        /* a stop string matched */
    int     which;       /* index of the matched stop string, -1 if none */
} llm_stop_matcher;

/* Copies the stop strings; empty strings are ignored. Returns 0, or -1 if a
 * string is longer than LLM_STOP_MAX_LEN, n > LLM_STOP_MAX, or no memory. */
int  llm_stop_init(llm_stop_matcher *m, const char *const *stops, const size_t *lens, int n);
void llm_stop_free(llm_stop_matcher *m);

/* Feeds len bytes. *out / *out_len receive the text that can be emitted now
 * (valid until the next call). Returns 1 when a stop string has matched (this
 * call's output is the final text), 0 otherwise, -1 on allocation failure.
 * After a match every further push emits nothing and returns 1. */
int  llm_stop_push(llm_stop_matcher *m, const char *in, size_t len, const char **out, size_t *out_len);
/* End of generation without a match: emits whatever is held back. */
void llm_stop_flush(llm_stop_matcher *m, const char **out, size_t *out_len);

#endif
