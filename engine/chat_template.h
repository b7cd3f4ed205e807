/* Chat templates: Llama 3, Llama 2, ChatML, Gemma, Phi 3 and Phi 4, Granite, Mistral's, picked from the model's
 * chat template text (tokenizer.chat_template / tokenizer_config.json) or, when
 * the model has none, from the tokenizer kind. Pure text code (no tokenizer
 * calls), shared by the NGINX module and the engine CLI.
 *
 * A rendering is a list of segments: control-token text (to be mapped to one
 * token id with llm_tok_find) and plain text (to be encoded WITHOUT turning any
 * special-token text in it into control ids). That keeps user content that
 * contains "<|eot_id|>" from injecting control tokens. */
#ifndef LLM_CHAT_TEMPLATE_H
#define LLM_CHAT_TEMPLATE_H

#include <stddef.h>
#include "common.h"

typedef enum {
    LLM_CHAT_LLAMA3 = 1, /* <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> */
    LLM_CHAT_LLAMA2 = 2, /* <s>[INST] <<SYS>>\n..\n<</SYS>>\n\nuser [/INST] answer </s> */
    LLM_CHAT_CHATML = 3, /* <|im_start|>role\ncontent<|im_end|>\n */
    LLM_CHAT_GEMMA  = 4, /* <bos><start_of_turn>user\ncontent<end_of_turn>\n<start_of_turn>model\n */
    LLM_CHAT_PHI3   = 5, /* <|user|>\ncontent<|end|>\n<|assistant|>\n */
    LLM_CHAT_PHI4   = 6, /* <|im_start|>user<|im_sep|>content<|im_end|><|im_start|>assistant<|im_sep|> */
    LLM_CHAT_PHI4_MINI = 7, /* <|user|>content<|end|><|assistant|> (Phi 3's without the newlines) */
    LLM_CHAT_GRANITE = 8, /* <|start_of_role|>user<|end_of_role|>content<|end_of_text|>\n (Granite 3) */
    /* Mistral's (llama.cpp's names and renderings of them): v1 " [INST] sys\n\nuser [/INST] answer</s>" (7B v0.1 /
     * v0.2), v3 "[INST] user[/INST] answer</s>" (7B v0.3, Mixtral 8x22B), v3-tekken the same without the spaces
     * (Nemo), v7 "[SYSTEM_PROMPT] sys[/SYSTEM_PROMPT][INST] user[/INST] answer</s>" (Large 2411, Small 3) */
    LLM_CHAT_MISTRAL_V1 = 9,
    LLM_CHAT_MISTRAL_V3 = 10,
    LLM_CHAT_MISTRAL_V3_TEKKEN = 11,
    LLM_CHAT_MISTRAL_V7 = 12,
    /* SmolLM3's (ChatML turns behind a system turn of its own: "## Metadata" with the date and the reasoning
     * mode, "## Custom Instructions", "## Tools"; see llm_chat_render_ex) */
    LLM_CHAT_SMOLLM3 = 13,
    /* DeepSeek's (V3, R1 and R1's distills of Qwen and Llama): <｜begin▁of▁sentence｜>system text<｜User｜>user
     * <｜Assistant｜>answer<｜end▁of▁sentence｜>, then <｜Assistant｜> (deepseek-r1: and <think>\n, the reasoning
     * opened by the prompt, as R1's template does) */
    LLM_CHAT_DEEPSEEK3 = 14,
    LLM_CHAT_DEEPSEEK_R1 = 15,
    /* EXAONE 3.0 / 3.5 (and EXAONE Deep's turns): [|system|]text[|endofturn|]\n (an empty one when the conversation
     * has none), [|user|]text\n, [|assistant|]answer[|endofturn|]\n, then [|assistant|] */
    LLM_CHAT_EXAONE3 = 16,
    /* EXAONE 4.0: [|role|]\ntext[|endofturn|]\n, each answer behind an empty think block, tools, tool results; the
     * generation prompt [|assistant|]\n then <think>\n (enable_thinking true) or an empty think block */
    LLM_CHAT_EXAONE4 = 17,
    /* ERNIE 4.5: <|begin_of_sentence|>, a system text and "\n", "User: text\n", "Assistant: answer<|end_of_sentence|>",
     * then "Assistant: " */
    LLM_CHAT_ERNIE = 18,
    /* Tulu (OLMo 2 Instruct, Tulu 3): BOS, <|system|>\ntext\n, <|user|>\ntext\n, <|assistant|>\nanswer EOS\n, then
     * <|assistant|>\n */
    LLM_CHAT_TULU = 19,
    /* Seed-OSS: <seed:bos>role\ntext<seed:eos> per message, then <seed:bos>assistant\n; enable_thinking false is the
     * template's thinking_budget 0 (its budget system turn, and a closed <seed:think> block in the prompt) */
    LLM_CHAT_SEED_OSS = 20,
    /* EXAONE Deep: EXAONE 3's turns, an earlier answer's reasoning (up to its last </thought>) left out, the generation
     * prompt [|assistant|]<thought>\n (the answer starts inside the reasoning) */
    LLM_CHAT_EXAONE_DEEP = 21,
    /* Qwen3-Coder: ChatML, its tools and calls in XML (<function=name><parameter=key>value</parameter>) */
    LLM_CHAT_QWEN3_CODER = 22,
    /* GLM-4.5 (GLM-4.5-Air, GLM-4.6): [gMASK]<sop>, then <|system|>\ntext, <|user|>\ntext, <|assistant|>\n<think>...
     * </think> and \nanswer, its calls in XML (<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>), tool results
     * behind <|observation|>; then <|assistant|> */
    LLM_CHAT_GLM45 = 23,
    /* gpt-oss's harmony: <|start|>system<|message|>(its own text: identity, knowledge cutoff, date, reasoning
     * effort, channels)<|end|>, a system message as <|start|>developer<|message|># Instructions\n\ntext\n\n<|end|>,
     * <|start|>user<|message|>text<|end|>, an answer as <|start|>assistant<|channel|>final<|message|>text<|end|>;
     * then <|start|>assistant. The model answers <|channel|>analysis<|message|>reasoning<|end|> then
     * <|start|>assistant<|channel|>final<|message|>answer<|return|>. */
    LLM_CHAT_GPT_OSS = 24,
} llm_chat_format;

/* A tool call in an assistant message of the history: the function's name (letters, digits, '_', '-')
 * and its arguments as the text of a JSON object, as the template's tojson prints it. */
typedef struct {
    const char *name;
    const char *args;  /* (qwen3-coder: the <parameter=key>\nvalue\n</parameter>\n lines its template writes;
                        * seed-oss: <parameter=key>value</parameter>\n; glm4.5: \n<arg_key>key</arg_key>\n<arg_value>value
                        * </arg_value> each) */
    const char *id;   /* the call's id (Mistral's formats write its last 9 characters), or NULL */
} llm_chat_call;

typedef struct {
    const char *role;    /* "system", "user", "assistant" (others allowed by Llama 3 / ChatML) */
    const char *content; /* UTF-8, NUL-terminated */
    const llm_chat_call *calls; /* assistant: the tool calls it made (content may be ""), or NULL */
    size_t      n_calls;
    const char *call_id; /* a tool result: the id of the call it answers (Mistral's formats), or NULL */
} llm_chat_msg;

typedef struct {
    int    special;      /* 1: text is one control token's text; 0: plain text */
    char  *text;         /* malloc'd, NUL-terminated */
    size_t len;
} llm_chat_seg;

typedef struct {
    llm_chat_seg *seg;
    size_t        n, cap;
} llm_chat_out;

/* Picks the format from the template text (NULL allowed), falling back on the
 * tokenizer kind (1 SentencePiece -> Llama 2, 2 byte-level BPE -> Llama 3). */
llm_chat_format llm_chat_detect(const char *template_text, int tok_kind);
const char     *llm_chat_format_name(llm_chat_format f); /* "llama3", "llama2", "chatml", "gemma" */
/* "llama3" / "llama2" / "chatml" / "gemma" -> format; 0 if unknown. */
llm_chat_format llm_chat_format_from_name(const char *name);

/* Function calling, in these families of formats:
 * - Llama 3 (Llama 3.1 / 3.2's tool prompt, "JSON based tool calling"): a system turn that opens
 *   "Environment: ipython", the knowledge and today's dates, then the system message; the tools (defs:
 *   each tool's JSON as the template prints it, tojson(indent=4), followed by "\n\n") with the instruction
 *   to answer with {"name": ..., "parameters": ...} go in the first user message; "tool" (or "ipython")
 *   messages become ipython turns; an assistant message's call (one) is that JSON.
 * - ChatML (Hermes 2 Pro, Qwen 2.5, Qwen 3): the system turn is the system message, then "# Tools" with
 *   the tools inside <tools></tools> (defs: "\n" and each tool's one-line JSON) and the instruction to
 *   answer each call as <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>; an assistant
 *   message's calls are written so; "tool" messages go into user turns as <tool_response> blocks.
 *   open_call: the generation prompt opens a <tool_call> (tool_choice required / named, whose answer is
 *   then the call's JSON). The tags are control-token segments: one token where the vocabulary has them
 *   (Qwen), text elsewhere.
 * - Mistral (v3: 7B v0.3, Mixtral 8x22B; v3-tekken: Nemo; v7: Small 3.1), after their templates: the tools
 *   as [AVAILABLE_TOOLS] [defs][/AVAILABLE_TOOLS] before the last user turn (defs: each tool as
 *   {"type": "function", "function": {...}} on one line, joined by ", "; tekken without the space), the
 *   system text in that last user turn (v7: in [SYSTEM_PROMPT], after the instruction for parallel calls);
 *   an assistant message's calls as [TOOL_CALLS] [{"name": ..., "arguments": ..., "id": "<last 9 of the id>"},
 *   ...]</s>; a tool result as [TOOL_RESULTS] {"content": <its text>, "call_id": "..."}[/TOOL_RESULTS].
 *   open_call: the generation prompt ends with [TOOL_CALLS] (the answer is then the calls' JSON array).
 * - Granite (3.3's template): without a system message, Granite's own system turn (the knowledge cutoff,
 *   date_long and the instruction to answer with <|tool_call|> and a JSON list of calls); then an
 *   available_tools turn with the tools (defs: the list as tojson(indent=4) prints it); an assistant
 *   message's calls as <|tool_call|>[{"name": ..., "arguments": ...}, ...] after its content; tool results
 *   as "tool" turns. open_call: the generation prompt ends with <|tool_call|>.
 * - EXAONE 4: the tools in the first system turn (after the system message and a blank line, or alone) under
 *   "# Available Tools", each inside <tool></tool> (defs: each tool's one-line JSON on a line of its own), with
 *   the instruction to answer <tool_call>{"name": ..., "arguments": ...}</tool_call>; an assistant message's
 *   calls so, one a line, after its content; consecutive "tool" messages make one [|tool|] turn of
 *   <tool_result>{"result": <the text as a JSON string>}</tool_result> lines. open_call: the generation prompt
 *   (after its empty think block) ends with <tool_call>.
 * - Qwen3-Coder: ChatML whose system turn (the system message, or Qwen's own line when there is none) ends with
 *   "# Tools" and the tools in XML inside <tools></tools> (defs: each tool's <function> block, as the template
 *   writes it) and the instruction to answer <tool_call>\n<function=name>\n<parameter=key>\nvalue\n
 *   </parameter>\n</function>\n</tool_call>; an assistant message's calls so after its trimmed content (each
 *   call's args already in that form); "tool" messages go into user turns as <tool_response> blocks.
 *   open_call is not taken (a held answer is a JSON array of calls, no tag opened).
 * - Seed-OSS: the first system turn (the system message, or Seed's "You are Doubao ..." line) holds the tools
 *   (defs: each tool as its template's Python function doc, "\n\nFunction:\ndef name(...):" and its docstring)
 *   and the call format; an assistant message's calls after its trimmed content as \n<seed:tool_call>\n
 *   <function=name>\n<parameter=key>value</parameter>\n...</function>\n</seed:tool_call> (args: those parameter
 *   lines); "tool" messages as tool turns. open_call is not taken (XML calls).
 * - GLM-4.5: a system turn of its own before the messages holds the tools inside <tools></tools> (defs: each tool's
 *   whole object as one-line JSON, each followed by "\n") and the call format; an assistant message's calls after its
 *   answer as \n<tool_call>name\n<arg_key>key</arg_key>\n<arg_value>value</arg_value>...\n</tool_call> (args: those
 *   \n<arg_key>... lines; a string value as it is, another as its JSON); the call XML's tags are control segments
 *   wherever they stand, as the model's tokenizer reads them. open_call is not taken (XML calls). */
typedef struct {
    const char *defs;
    const char *date;  /* "2 Dec 2026" (Llama 3) */
    int         open_call;
    const char *date_long; /* "December 02, 2026" (Granite) */
} llm_chat_tools;

/* Renders n messages. add_generation_prompt opens an assistant turn at the end.
 * Llama 2 and Gemma require system? then alternating user/assistant (Gemma also takes "model" for
 * "assistant"); other formats accept any role names that are non-empty and free of control characters.
 * Returns 0, or -1 with a message in err (bad role order, empty list, no memory). */
int  llm_chat_render(llm_chat_format f, const llm_chat_msg *msgs, size_t n, int add_generation_prompt,
                     llm_chat_out *out, llm_err *err);
/* The same with tools (NULL: none). The Llama 3, ChatML, Granite and Mistral v3 / v3-tekken / v7 formats have a
 * tool prompt (-1 for the others); in Llama 3's the first message after an optional system message must be the
 * user's, and an assistant message holds at most one call; Mistral's need each call's id (9 or more
 * characters) and each result's call_id. */
int  llm_chat_render_tools(llm_chat_format f, const llm_chat_msg *msgs, size_t n, const llm_chat_tools *tools,
                           int add_generation_prompt, llm_chat_out *out, llm_err *err);
/* The system message a ChatML template writes when the conversation has none (Qwen 2.5's "You are Qwen,
 * created by Alibaba Cloud. ..."): the literal text of its '<|im_start|>system\n...<|im_end|>' string, malloc'd,
 * or NULL when the template has no such literal (or is NULL). */
char *llm_chat_default_system(const char *template_text);
/* 1 when tmpl is a Granite 3.1+ template, which writes a system turn of its own when the conversation has
 * none: llm_chat_granite_system_text(date_long) (malloc'd; NULL: no memory), "Knowledge Cutoff Date: April
 * 2024.\nToday's Date: December 04, 2026.\nYou are Granite, developed by IBM. You are a helpful AI assistant."
 * (with tools, llm_chat_render_tools writes the tool-instruction variant itself). */
int   llm_chat_granite_own_system(const char *template_text);
char *llm_chat_granite_system_text(const char *date_long);
/* Variables some templates read besides the messages (NULL: their defaults). */
typedef struct {
    const char *date_dmy;  /* today as "04 December 2026" (SmolLM3) */
    int         no_think;  /* chat_template_kwargs enable_thinking false (SmolLM3: "Reasoning Mode: /no_think";
                            * Seed-OSS: thinking_budget 0; GLM-4.5: /nothink after each user message, an empty think
                            * block in the generation prompt) */
    int         think;     /* enable_thinking true, given (EXAONE 4 thinks only then) */
    const char *bos, *eos; /* the model's BOS and EOS token texts (Tulu's template writes them), or NULL */
    int         thinking_budget; /* > 0: Seed-OSS's chat_template_kwargs.thinking_budget (its template's system turn
                                  * naming it); 0: none given (a budget of 0 is no_think) */
    const char *date_iso;  /* today as "2026-12-05" (gpt-oss) */
    const char *reasoning_effort; /* gpt-oss's "low", "medium" (NULL: the default) or "high" */
} llm_chat_vars;

/* Whether the answer to a chat in format f opens with the model's reasoning, for chat_template_kwargs
 * enable_thinking (-1: not given, 0, 1): EXAONE 4 thinks only when asked to, the others unless told not to. */
int  llm_chat_thinks(llm_chat_format f, int enable_thinking);
/* Whether the generation prompt itself opens the reasoning (DeepSeek R1's <think>\n, EXAONE 4's with
 * enable_thinking true): the answer then starts inside it. */
int  llm_chat_prompt_opens_think(llm_chat_format f, int enable_thinking);
/* Whether an answer opens with whitespace that is the turn's layout, before its reasoning or text (GLM-4.5's
 * template writes <|assistant|>\n<think>...</think>\ntext): the reasoning splitter drops it. */
int  llm_chat_answer_leads_ws(llm_chat_format f);

/* llm_chat_render_tools with the template variables. SmolLM3's format, after its template: the system turn is
 * always written: "## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: <date_dmy>\nReasoning Mode:
 * /think" (or /no_think: no_think, or "/no_think" in the system message; "/think" there turns it back), then
 * "## Custom Instructions" with the system message (the mode markers taken out; without one, SmolLM's own
 * text for the mode), then "## Tools" with the tools in XML (defs: each tool's one-line JSON then "\n") or
 * None; a system message with "/system_override" is the whole system turn instead. Tool results are user
 * turns; with /no_think each answer (and the generation prompt) opens with an empty think block; an
 * assistant message's calls follow its content as <tool_call> blocks (Qwen's way; the template drops them). */
int  llm_chat_render_ex(llm_chat_format f, const llm_chat_msg *msgs, size_t n, const llm_chat_tools *tools,
                        const llm_chat_vars *vars, int add_generation_prompt, llm_chat_out *out, llm_err *err);
/* Qwen 3's generation prompt with enable_thinking false: an empty <think></think> block after it, so that
 * the model answers at once. 0, or -1 (no memory). */
int  llm_chat_no_think(llm_chat_out *out);
void llm_chat_out_free(llm_chat_out *out);
/* The segments concatenated into one malloc'd string (for display and tests). */
char *llm_chat_out_join(const llm_chat_out *out);

#endif
