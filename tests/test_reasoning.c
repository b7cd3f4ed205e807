/* The <think> splitter (ngx_module/llm_reasoning.c): reasoning and content out of answers fed whole, byte
 * by byte and in every two-piece split, tags split anywhere, false starts, answers cut short. */
#include "tap.h"
#include "../ngx_module/llm_reasoning.c"

#include <stdio.h>
#include <string.h>

typedef struct {
    char r[4096], c[4096];
    size_t rn, cn;
    int emits, last_kind;
} sink;

static int collect(void *user, int reasoning, const char *s, size_t n)
{
    sink *k = user;
    if (n == 0) return 7; /* never called empty */
    char *d = reasoning ? k->r + k->rn : k->c + k->cn;
    memcpy(d, s, n);
    *(reasoning ? &k->rn : &k->cn) += n;
    k->emits++;
    k->last_kind = reasoning;
    return 0;
}

static const char *tag_open, *tag_close; /* NULL: <think> and </think> */
static int lead_ws; /* the splitter's lead_ws (GLM-4.5) */
static const char *hdr_after, *hdr_direct, *hdr_pre; /* harmony's headers (gpt-oss) */

/* The answer split at cut points: the pieces fed one by one. */
static int split(const char *a, const size_t *cuts, int n_cuts, sink *k)
{
    llm_think t = { .open = tag_open, .close = tag_close, .lead_ws = lead_ws, .after = hdr_after,
                    .direct = hdr_direct, .preamble = hdr_pre };
    memset(k, 0, sizeof *k);
    size_t at = 0, len = strlen(a);
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        if (llm_think_feed(&t, a + at, end - at, collect, k)) return -1;
        at = end;
    }
    if (llm_think_end(&t, collect, k)) return -1;
    k->r[k->rn] = 0;
    k->c[k->cn] = 0;
    return 0;
}

static void check(const char *answer, const char *reasoning, const char *content, const char *what)
{
    sink k;
    size_t len = strlen(answer);
    int ok_whole = split(answer, NULL, 0, &k) == 0 && !strcmp(k.r, reasoning) && !strcmp(k.c, content);
    ok(ok_whole, "%s, whole: [%s] [%s]", what, k.r, k.c);
    int bad = 0;
    for (size_t cut = 0; cut <= len; cut++) { /* every two-piece split */
        size_t c1[1] = { cut };
        if (split(answer, c1, 1, &k) != 0 || strcmp(k.r, reasoning) || strcmp(k.c, content)) bad++;
    }
    size_t bytes[256];
    for (size_t i = 0; i < len && i < 256; i++) bytes[i] = i + 1;
    if (len > 0 && (split(answer, bytes, (int)(len < 256 ? len - 1 : 255), &k) != 0 || strcmp(k.r, reasoning) ||
                    strcmp(k.c, content)))
        bad++;
    ok(bad == 0, "%s: split anywhere, byte by byte (%d wrong)", what, bad);
}

int main(void)
{
    check("<think>\nThe user greets me.\n</think>\n\nHello!", "The user greets me.\n", "Hello!", "Qwen 3's shape");
    check("Hello <think>x</think>", "", "Hello <think>x</think>", "no <think> first: all content");
    check("<think>a < b and </thin k> is not it</think>ok", "a < b and </thin k> is not it", "ok", "false starts");
    check("<think>x <</think>y", "x <", "y", "a '<' just before the tag");
    check("<think>x </</think>y", "x </", "y", "a broken tag then the tag");
    check("<think>still thinking", "still thinking", "", "cut short inside: all reasoning");
    check("<think>still </thi", "still </thi", "", "cut short inside a tag: its bytes are reasoning");
    check("<thi", "", "<thi", "cut short in the opening tag: content");
    check("<thinker>", "", "<thinker>", "not the tag");
    check("<think></think>", "", "", "empty");
    check("<think>\n\n</think>\n\n", "", "", "empty, as enable_thinking false writes it");
    check("", "", "", "nothing");
    check("{\"a\": 1}", "", "{\"a\": 1}", "JSON");
    llm_think t = { 0 };
    sink k = { 0 };
    ok(llm_think_feed(&t, "", 0, collect, &k) == 0 && k.emits == 0, "an empty piece emits nothing");
    /* a piece gives one run of each kind at most, however its tags fell (a stream chunk each) */
    ok(llm_think_feed(&t, "<think>", 7, collect, &k) == 0 && k.emits == 0, "the opening tag alone: nothing");
    ok(llm_think_feed(&t, "<think>", 7, collect, &k) == 0 && k.emits == 1 && k.rn == 7, "a false '<' and the rest: one run");
    ok(llm_think_feed(&t, "a</think>\n\nb", 12, collect, &k) == 0 && k.emits == 3 && k.cn == 1,
       "reasoning, the tag, content: two runs (%d in all)", k.emits);
    char big[3000];
    memset(big, 'x', sizeof big);
    llm_think t2 = { 0 };
    sink k2 = { 0 };
    ok(llm_think_feed(&t2, big, sizeof big, collect, &k2) == 0 && k2.cn == sizeof big, "a piece larger than the "
       "gathering buffer: all of it");
    /* Seed-OSS's tags */
    tag_open = "<seed:think>", tag_close = "</seed:think>";
    check("<seed:think>Hmm.</seed:think>Answer", "Hmm.", "Answer", "seed-oss: reasoning, then content");
    check("<seed:think>a </think> b</seed:think>\nc", "a </think> b", "c", "seed-oss: another model's tag is reasoning");
    check("<think>x</think>y", "", "<think>x</think>y", "seed-oss: <think> is content");
    check("<seed:think>still </seed:thi", "still </seed:thi", "", "seed-oss: cut short inside its closing tag");
    tag_open = tag_close = NULL;
    check("\n<think>x</think>y", "", "\n<think>x</think>y", "without lead_ws: whitespace first is content");
    /* GLM-4.5's answers: "\n" (its template's layout) before <think>, or before the text when it does not think */
    lead_ws = 1;
    check("\n<think>Hmm.</think>\nAnswer", "Hmm.", "Answer", "glm4.5: the newline before <think> dropped");
    check("\nAnswer <think>", "", "Answer <think>", "glm4.5 not thinking: the text after its newline");
    lead_ws = 0;
    /* gpt-oss's harmony: the analysis channel's message is the reasoning, the final channel's the content (the
     * control tokens' text as the detokenizer keeps it) */
    tag_open = "<|channel|>analysis<|message|>", tag_close = "<|end|>";
    hdr_after = "<|start|>assistant", hdr_direct = "<|channel|>final<|message|>";
    check("<|channel|>analysis<|message|>User says hi.<|end|><|start|>assistant<|channel|>final<|message|>Hello!",
          "User says hi.", "Hello!", "gpt-oss: analysis, then final");
    check("<|channel|>final<|message|>Hello!", "", "Hello!", "gpt-oss: final at once");
    check("<|channel|>analysis<|message|>a <|en b<|end|>", "a <|en b", "", "gpt-oss: cut short after the reasoning");
    check("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>fin", "a",
          "<|channel|>fin", "gpt-oss: cut short in the final channel's header: its bytes are content");
    check("<|channel|>analysis<|message|>a<|end|><|start|>assis", "a", "<|start|>assis",
          "gpt-oss: cut short in the next message's start: content");
    check("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>"
          "json<|message|>{}", "a", "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}",
          "gpt-oss: a call after the reasoning: its channel and the rest are content (for the call reader)");
    check("<|channel|>analysis<|message|>a<|end|><|start|>assistant to=functions.f<|channel|>commentary json"
          "<|message|>{}", "a", " to=functions.f<|channel|>commentary json<|message|>{}",
          "gpt-oss: the recipient first: content from it");
    check("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b", "a",
          "<|channel|>analysis<|message|>b", "gpt-oss: a second analysis message is not reasoning again (content)");
    check("<|channel|>fina", "", "<|channel|>fina", "gpt-oss: cut short in the opening header: content");
    /* a preamble (a commentary message without a recipient, for the user) before a call: its text is content */
    hdr_pre = "<|channel|>commentary<|message|>";
    check("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>commentary<|message|>Let me check."
          "<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}", "a",
          "Let me check.<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}",
          "gpt-oss: a preamble after the reasoning, then a call: its text, then the call, are content");
    check("<|channel|>commentary<|message|>On it <|en.<|end|><|start|>assistant to=functions.f<|channel|>commentary"
          " json<|message|>{}", "", "On it <|en. to=functions.f<|channel|>commentary json<|message|>{}",
          "gpt-oss: a preamble first (no reasoning), a broken close in it, then the recipient first");
    check("<|channel|>commentary<|message|>Still wri", "", "Still wri", "gpt-oss: cut short in a preamble: content");
    check("<|channel|>commentary<|message|>Hm<|end|><|start|>assistant<|channel|>final<|message|>Done.", "",
          "Hm\nDone.", "gpt-oss: a preamble, then the final message: both content, a newline between (vLLM's)");
    check("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}", "",
          "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}",
          "gpt-oss: a call at once is not a preamble (its header has a recipient)");
    hdr_pre = NULL;
    check("Plain text", "", "Plain text", "gpt-oss: no header: content");
    tag_open = tag_close = hdr_after = hdr_direct = NULL;
    return done_testing();
}
