/* Reasoning models (Qwen 3 and other chat templates that write <think>...</think>; Seed-OSS's
 * <seed:think>...</seed:think>): an answer opens with the model's reasoning inside those tags. It is split off, as vLLM's reasoning parsers and DeepSeek's API
 * do, into message.reasoning_content (streamed: delta.reasoning_content); what follows </think> (after its
 * whitespace) is the content. The text is fed as it comes, in pieces of any size: a tag split across pieces
 * is held until it is whole or cannot be one. Plain C (no nginx headers). */
#ifndef LLM_REASONING_H
#define LLM_REASONING_H

#include <stddef.h>

enum { LLM_THINK_START = 0, LLM_THINK_LEAD, LLM_THINK_IN, LLM_THINK_AFTER, LLM_THINK_OUT, LLM_THINK_PRE };

typedef struct {
    int    state;     /* LLM_THINK_*: before <think>, its leading whitespace, inside, after </think>, content,
                       * inside a preamble */
    char   held[64];  /* the first bytes of a tag */
    size_t n_held;
    const char *open, *close; /* the tags (NULL: <think> and </think>), up to 63 bytes each */
    /* gpt-oss's harmony: a header dropped where the content starts after the reasoning ("<|start|>assistant":
     * the next message's), and one dropped where the content opens with it, at the start or after that
     * ("<|channel|>final<|message|>"); NULL: none. Up to 63 bytes each. What is not the final channel (a call's
     * "<|channel|>commentary to=functions...") stays in the content. */
    const char *after, *direct;
    /* harmony's preamble: a commentary message without a recipient ("<|channel|>commentary<|message|>", the
     * header dropped), written for the user before a call; its text is content up to the close tag ("<|end|>"),
     * then the next message's header is looked for as after the reasoning; a final message's text after it
     * follows a newline. NULL: none. */
    const char *preamble;
    int    opened;    /* the reasoning was there: the opening tag is not looked for again */
    int    pre_text;  /* a preamble's text went out: a newline before the next visible message's (vLLM's join) */
    int    lead_ws;   /* whitespace before the opening tag is the turn's layout, dropped (GLM-4.5 answers
                       * "\n<think>"; without reasoning, "\n" and the content) */
} llm_think;

/* Receives a run of reasoning (reasoning 1) or content (0) bytes; nonzero stops the feed with that value. */
typedef int (*llm_think_emit)(void *user, int reasoning, const char *s, size_t n);

/* Feeds len bytes. An answer that does not open with "<think>" is all content. 0, or emit's nonzero. */
int llm_think_feed(llm_think *t, const char *s, size_t len, llm_think_emit emit, void *user);
/* The answer is over: held bytes go out as what they were part of. */
int llm_think_end(llm_think *t, llm_think_emit emit, void *user);

#endif
