/* Chat template rendering into special / plain segments (see chat_template.h).
 * The formats follow the Jinja templates that ship with the models:
 * Llama 3 (Meta-Llama-3-*-Instruct), Llama 2 (Llama-2-*-chat), ChatML,
 * Gemma (gemma-2-*-it, gemma-3-*-it), Phi 3 (Phi-3-*-instruct, Phi-3.5),
 * Phi-4-mini and Phi 4 (phi-4), Granite 3 (granite-3.x-*-instruct), Mistral's (v1, v3, v3-tekken, v7, told
 * apart by their templates' text as llama.cpp tells them apart), SmolLM3 (SmolLM3-3B), DeepSeek V3 / R1 and
 * R1's distills. */
#include "chat_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

llm_chat_format llm_chat_detect(const char *tmpl, int tok_kind)
{
    if (tmpl) {
        /* Gemma's marker first: a Gemma template that also spells another format's markers is still Gemma's */
        if (strstr(tmpl, "<start_of_turn>")) return LLM_CHAT_GEMMA;
        if (strstr(tmpl, "<｜User｜>")) /* DeepSeek's; R1's generation prompt opens the reasoning */
            return strstr(tmpl, "<｜Assistant｜><think>") ? LLM_CHAT_DEEPSEEK_R1 : LLM_CHAT_DEEPSEEK3;
        if (strstr(tmpl, "[|system|]") && strstr(tmpl, "[|endofturn|]")) /* EXAONE 4's has a tool role */
            return strstr(tmpl, "[|tool|]")    ? LLM_CHAT_EXAONE4
                   : strstr(tmpl, "<thought>") ? LLM_CHAT_EXAONE_DEEP
                                               : LLM_CHAT_EXAONE3;
        if (strstr(tmpl, "<seed:bos>")) return LLM_CHAT_SEED_OSS;
        if (strstr(tmpl, "<|channel|>") && strstr(tmpl, "<|start|>") && strstr(tmpl, "<|message|>"))
            return LLM_CHAT_GPT_OSS; /* gpt-oss's harmony */
        /* GLM-4.5's (GLM-4's templates spell these too: they get these turns, the nearest format here) */
        if (strstr(tmpl, "[gMASK]<sop>") && strstr(tmpl, "<|assistant|>")) return LLM_CHAT_GLM45;
        if (strstr(tmpl, "<|begin_of_sentence|>") && strstr(tmpl, "User: ")) return LLM_CHAT_ERNIE;
        /* Tulu's user turn, as its Jinja source spells it ('\n': a backslash, an n); Zephyr's, which has EOS after
         * each turn, is not */
        if (strstr(tmpl, "'<|user|>\\n' + message['content'] + '\\n'")) return LLM_CHAT_TULU;
        if (strstr(tmpl, "<|im_sep|>")) return LLM_CHAT_PHI4; /* before ChatML, whose markers it shares */
        if (strstr(tmpl, "<|im_start|>") && strstr(tmpl, "<function=") && strstr(tmpl, "<parameter="))
            return LLM_CHAT_QWEN3_CODER; /* likewise */
        if (strstr(tmpl, "<|im_start|>") && strstr(tmpl, "Reasoning Mode: ")) return LLM_CHAT_SMOLLM3; /* likewise */
        if (strstr(tmpl, "<|end|>") && strstr(tmpl, "'<|' + message['role'] + '|>'")) return LLM_CHAT_PHI4_MINI;
        if (strstr(tmpl, "<|assistant|>") && strstr(tmpl, "<|end|>")) return LLM_CHAT_PHI3;
        if (strstr(tmpl, "<|start_header_id|>")) return LLM_CHAT_LLAMA3;
        if (strstr(tmpl, "<|start_of_role|>")) return LLM_CHAT_GRANITE;
        if (strstr(tmpl, "<|im_start|>")) return LLM_CHAT_CHATML;
        if (strstr(tmpl, "[INST]")) { /* Mistral's official templates, else Llama 2's */
            if (strstr(tmpl, "[SYSTEM_PROMPT]")) return LLM_CHAT_MISTRAL_V7;
            if (strstr(tmpl, "' [INST] ' + system_message") || strstr(tmpl, "[AVAILABLE_TOOLS]")) {
                if (strstr(tmpl, " [INST]")) return LLM_CHAT_MISTRAL_V1;
                if (strstr(tmpl, "\"[INST]\"")) return LLM_CHAT_MISTRAL_V3_TEKKEN;
                return LLM_CHAT_MISTRAL_V3;
            }
            return LLM_CHAT_LLAMA2;
        }
    }
    return tok_kind == 2 ? LLM_CHAT_LLAMA3 : LLM_CHAT_LLAMA2;
}

const char *llm_chat_format_name(llm_chat_format f)
{
    switch (f) {
    case LLM_CHAT_LLAMA3: return "llama3";
    case LLM_CHAT_LLAMA2: return "llama2";
    case LLM_CHAT_CHATML: return "chatml";
    case LLM_CHAT_GEMMA: return "gemma";
    case LLM_CHAT_PHI3: return "phi3";
    case LLM_CHAT_PHI4: return "phi4";
    case LLM_CHAT_PHI4_MINI: return "phi4-mini";
    case LLM_CHAT_GRANITE: return "granite";
    case LLM_CHAT_MISTRAL_V1: return "mistral-v1";
    case LLM_CHAT_MISTRAL_V3: return "mistral-v3";
    case LLM_CHAT_MISTRAL_V3_TEKKEN: return "mistral-v3-tekken";
    case LLM_CHAT_MISTRAL_V7: return "mistral-v7";
    case LLM_CHAT_SMOLLM3: return "smollm3";
    case LLM_CHAT_DEEPSEEK3: return "deepseek3";
    case LLM_CHAT_DEEPSEEK_R1: return "deepseek-r1";
    case LLM_CHAT_EXAONE3: return "exaone3";
    case LLM_CHAT_EXAONE4: return "exaone4";
    case LLM_CHAT_ERNIE: return "ernie";
    case LLM_CHAT_TULU: return "tulu";
    case LLM_CHAT_SEED_OSS: return "seed-oss";
    case LLM_CHAT_EXAONE_DEEP: return "exaone-deep";
    case LLM_CHAT_QWEN3_CODER: return "qwen3-coder";
    case LLM_CHAT_GLM45: return "glm4.5";
    case LLM_CHAT_GPT_OSS: return "gpt-oss";
    }
    return "unknown";
}

llm_chat_format llm_chat_format_from_name(const char *name)
{
    const char *known; /* the names llm_chat_format_name gives, formats 1, 2, ... until "unknown" */
    for (int f = 1; name != NULL && strcmp(known = llm_chat_format_name((llm_chat_format)f), "unknown"); f++)
        if (!strcmp(name, known)) return (llm_chat_format)f;
    return 0;
}

void llm_chat_out_free(llm_chat_out *out)
{
    for (size_t i = 0; i < out->n; i++) free(out->seg[i].text);
    free(out->seg);
    out->seg = NULL;
    out->n = out->cap = 0;
}

/* Appends len bytes as a segment; plain text merges into a preceding plain segment. */
static int push(llm_chat_out *out, int special, const char *s, size_t len)
{
    if (!special && len == 0) return 0;
    if (!special && out->n && !out->seg[out->n - 1].special) {
        llm_chat_seg *g = &out->seg[out->n - 1];
        char *t = realloc(g->text, g->len + len + 1);
        if (!t) return -1;
        memcpy(t + g->len, s, len);
        g->len += len;
        t[g->len] = 0;
        g->text = t;
        return 0;
    }
    if (out->n == out->cap) {
        size_t nc = out->cap ? out->cap * 2 : 16;
        llm_chat_seg *ns = realloc(out->seg, nc * sizeof *ns);
        if (!ns) return -1;
        out->seg = ns;
        out->cap = nc;
    }
    char *t = malloc(len + 1);
    if (!t) return -1;
    memcpy(t, s, len);
    t[len] = 0;
    out->seg[out->n++] = (llm_chat_seg){ special, t, len };
    return 0;
}

static int sp(llm_chat_out *o, const char *s) { return push(o, 1, s, strlen(s)); }
static int tx(llm_chat_out *o, const char *s) { return push(o, 0, s, strlen(s)); }

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Jinja's |trim and Python's str.strip() on ASCII whitespace, of the first b bytes of s. */
static int push_trim(llm_chat_out *o, const char *s, size_t b)
{
    size_t a = 0;
    while (a < b && is_ws(s[a])) a++;
    while (b > a && is_ws(s[b - 1])) b--;
    return push(o, 0, s + a, b - a);
}

static int tx_trim(llm_chat_out *o, const char *s) { return push_trim(o, s, strlen(s)); }

static int role_ok(const char *r)
{
    if (!r || !*r) return 0;
    for (const unsigned char *p = (const unsigned char *)r; *p; p++)
        if (*p < 0x20 || *p == 0x7f) return 0;
    return 1;
}

static int header(llm_chat_out *o, const char *role)
{
    return sp(o, "<|start_header_id|>") | tx(o, role) | sp(o, "<|end_header_id|>") | tx(o, "\n\n");
}

static int is_tool_role(const char *role) { return !strcmp(role, "tool") || !strcmp(role, "ipython"); }

/* Llama 3.1's tool prompt (see chat_template.h): the system turn and the first user turn, which carry the
 * tools. *used: the messages they took. */
static int render_llama3_tools(const llm_chat_msg *m, size_t n, const llm_chat_tools *t, llm_chat_out *o,
                               size_t *used, llm_err *err)
{
    size_t i = 0;
    const char *sys = "";
    if (n > 0 && !strcmp(m[0].role, "system")) sys = m[i++].content;
    if (i == n || strcmp(m[i].role, "user") != 0) {
        llm_seterr(err, "with tools, the first message after the system message must be the user's");
        return -2;
    }
    int rc = header(o, "system");
    rc |= tx(o, "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: ");
    rc |= tx(o, t->date);
    rc |= tx(o, "\n\n");
    rc |= tx_trim(o, sys);
    rc |= sp(o, "<|eot_id|>");
    rc |= header(o, "user");
    rc |= tx(o, "Given the following functions, please respond with a JSON for a function call with its proper "
                "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
                "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n");
    rc |= tx(o, t->defs);
    rc |= tx_trim(o, m[i++].content);
    rc |= sp(o, "<|eot_id|>");
    *used = i;
    return rc;
}

/* {"name": "N", "<key>": ARGS}: a call as the templates print it (names need no escaping); with id (Mistral's)
 * {"name": "N", "arguments": ARGS, "id": "ID"}. */
static int call_json_id(llm_chat_out *o, const llm_chat_call *c, const char *key, const char *id)
{
    int rc = tx(o, "{\"name\": \"") | tx(o, c->name) | tx(o, "\", \"") | tx(o, key) | tx(o, "\": ") | tx(o, c->args);
    if (id != NULL)
        rc |= tx(o, ", \"id\": \"") | tx(o, id) | tx(o, "\"");
    return rc | tx(o, "}");
}

static int call_json(llm_chat_out *o, const llm_chat_call *c, const char *key) { return call_json_id(o, c, key, NULL); }

static int render_llama3(const llm_chat_msg *m, size_t n, const llm_chat_tools *tools, int gen, llm_chat_out *o,
                         llm_err *err)
{
    int rc = sp(o, "<|begin_of_text|>");
    size_t i = 0;
    if (tools != NULL && !rc)
        rc = render_llama3_tools(m, n, tools, o, &i, err);
    for (; i < n && !rc; i++) {
        if (is_tool_role(m[i].role)) { /* a tool's result, as it came */
            rc |= header(o, "ipython");
            rc |= tx(o, m[i].content);
        } else if (m[i].n_calls > 0) { /* the call is the whole answer */
            if (m[i].n_calls > 1) {
                llm_seterr(err, "message %zu: the Llama 3 format has one tool call a message", i);
                return -2;
            }
            rc |= header(o, m[i].role);
            rc |= call_json(o, &m[i].calls[0], "parameters");
        } else {
            rc |= header(o, m[i].role);
            rc |= tx_trim(o, m[i].content);
        }
        rc |= sp(o, "<|eot_id|>");
    }
    if (gen && !rc)
        rc |= header(o, "assistant");
    return rc;
}

/* ChatML's tool prompt (see chat_template.h), in the system turn; *used: 1 if it took the system message. */
static int render_chatml_tools(const llm_chat_msg *m, size_t n, const llm_chat_tools *t, llm_chat_out *o,
                               size_t *used)
{
    int rc = sp(o, "<|im_start|>") | tx(o, "system\n");
    *used = 0;
    if (n > 0 && !strcmp(m[0].role, "system")) {
        rc |= tx(o, m[0].content) | tx(o, "\n\n");
        *used = 1;
    }
    rc |= tx(o, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
                "with function signatures within <tools></tools> XML tags:\n<tools>");
    rc |= tx(o, t->defs) | tx(o, "\n</tools>\n\nFor each function call, return a json object with function name and "
                                "arguments within ");
    rc |= sp(o, "<tool_call>") | sp(o, "</tool_call>") | tx(o, " XML tags:\n") | sp(o, "<tool_call>");
    rc |= tx(o, "\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n") | sp(o, "</tool_call>");
    return rc | sp(o, "<|im_end|>") | tx(o, "\n");
}

static int render_chatml(const llm_chat_msg *m, size_t n, const llm_chat_tools *tools, int gen, llm_chat_out *o)
{
    int rc = 0;
    size_t i = 0;
    if (tools != NULL)
        rc = render_chatml_tools(m, n, tools, o, &i);
    for (; i < n && !rc; i++) {
        if (is_tool_role(m[i].role)) { /* results of one turn's calls: one user turn of <tool_response>s */
            if (i == 0 || !is_tool_role(m[i - 1].role))
                rc |= sp(o, "<|im_start|>") | tx(o, "user");
            rc |= tx(o, "\n") | sp(o, "<tool_response>") | tx(o, "\n") | tx(o, m[i].content) | tx(o, "\n");
            rc |= sp(o, "</tool_response>");
            if (i + 1 == n || !is_tool_role(m[i + 1].role))
                rc |= sp(o, "<|im_end|>") | tx(o, "\n");
            continue;
        }
        rc |= sp(o, "<|im_start|>");
        rc |= tx(o, m[i].role);
        if (m[i].n_calls > 0) { /* Qwen's template: the content, then "\n<tool_call>..." for each call */
            if (m[i].content[0])
                rc |= tx(o, "\n") | tx(o, m[i].content);
            for (size_t k = 0; k < m[i].n_calls; k++) {
                rc |= tx(o, "\n") | sp(o, "<tool_call>") | tx(o, "\n") | call_json(o, &m[i].calls[k], "arguments");
                rc |= tx(o, "\n") | sp(o, "</tool_call>");
            }
        } else {
            rc |= tx(o, "\n");
            rc |= tx(o, m[i].content);
        }
        rc |= sp(o, "<|im_end|>");
        rc |= tx(o, "\n");
    }
    if (gen && !rc) {
        rc |= sp(o, "<|im_start|>");
        rc |= tx(o, "assistant\n");
        if (tools != NULL && tools->open_call)
            rc |= sp(o, "<tool_call>") | tx(o, "\n");
    }
    return rc;
}

static const char QWEN3_CODER_OWN[] =
    "You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks.";
static const char QWEN3_CODER_HOW[] =
    "\n\nIf you choose to call a tool ONLY reply in the following format with NO suffix:\n\n";
static const char QWEN3_CODER_EXAMPLE[] =
    "\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nvalue_2\n</parameter>\n</function>\n";
static const char QWEN3_CODER_REMINDER[] =
    "\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: the tool calling block MUST "
    "begin with an opening <tool_call> tag and end with a closing </tool_call> tag.\n- Required parameters MUST be "
    "specified\n- You may provide optional reasoning for your function call in natural language BEFORE the "
    "function call, but NOT after\n- If there is no function call available, answer the question like normal with "
    "your current knowledge and do not tell the user about function calls\n</IMPORTANT>";

/* Qwen3-Coder, after its template (see chat_template.h). A tool message that opens the conversation gets no user
 * turn of its own, as the template writes it. */
static int render_qwen3_coder(const llm_chat_msg *m, size_t n, const llm_chat_tools *t, int gen, llm_chat_out *o)
{
    int rc = 0, sys = !strcmp(m[0].role, "system");
    size_t i = sys;
    if (sys || t != NULL)
        rc |= sp(o, "<|im_start|>") | tx(o, "system\n") | tx(o, sys ? m[0].content : QWEN3_CODER_OWN);
    if (t != NULL) {
        rc |= tx(o, "\n\n# Tools\n\nYou have access to the following tools:\n\n<tools>") | tx(o, t->defs);
        rc |= tx(o, "\n</tools>") | tx(o, QWEN3_CODER_HOW) | sp(o, "<tool_call>") | tx(o, QWEN3_CODER_EXAMPLE);
        rc |= sp(o, "</tool_call>") | tx(o, QWEN3_CODER_REMINDER);
    }
    if (sys || t != NULL)
        rc |= sp(o, "<|im_end|>") | tx(o, "\n");
    for (size_t first = i; i < n && !rc; i++) {
        const char *role = m[i].role, *c = m[i].content;
        if (!strcmp(role, "tool")) {
            if (i > first && strcmp(m[i - 1].role, "tool")) rc |= sp(o, "<|im_start|>") | tx(o, "user\n");
            rc |= sp(o, "<tool_response>") | tx(o, "\n") | tx(o, c) | tx(o, "\n") | sp(o, "</tool_response>");
            rc |= tx(o, "\n");
            if (i + 1 == n || strcmp(m[i + 1].role, "tool")) rc |= sp(o, "<|im_end|>") | tx(o, "\n");
            continue;
        }
        rc |= sp(o, "<|im_start|>") | tx(o, role);
        if (!strcmp(role, "assistant") && m[i].n_calls > 0) {
            const char *a = c;
            while (is_ws(*a)) a++;
            if (*a) rc |= tx(o, "\n") | tx_trim(o, a) | tx(o, "\n");
            for (size_t k = 0; k < m[i].n_calls; k++) {
                rc |= tx(o, "\n") | sp(o, "<tool_call>") | tx(o, "\n<function=") | tx(o, m[i].calls[k].name);
                rc |= tx(o, ">\n") | tx(o, m[i].calls[k].args) | tx(o, "</function>\n") | sp(o, "</tool_call>");
            }
        } else {
            rc |= tx(o, "\n") | tx(o, c);
        }
        rc |= sp(o, "<|im_end|>") | tx(o, "\n");
    }
    return gen && !rc ? sp(o, "<|im_start|>") | tx(o, "assistant\n") : rc;
}

/* Llama 2 chat: an optional leading system message folds into the first user
 * turn; then user and assistant must alternate, starting with user. The
 * generation prompt is implicit (a user turn ends with "[/INST]"). */
static int render_llama2(const llm_chat_msg *m, size_t n, llm_chat_out *o, llm_err *err)
{
    const char *sys = NULL;
    size_t i0 = 0;
    if (n && !strcmp(m[0].role, "system")) { sys = m[0].content; i0 = 1; }
    if (i0 == n) { llm_seterr(err, "llama2 chat format needs at least one user message"); return -2; }
    for (size_t i = i0; i < n; i++) {
        const char *want = (i - i0) % 2 == 0 ? "user" : "assistant";
        if (strcmp(m[i].role, want)) {
            llm_seterr(err, "llama2 chat format: message %zu has role '%s', expected '%s' "
                       "(roles must alternate user/assistant after an optional system message)",
                       i, m[i].role, want);
            return -2;
        }
    }
    int rc = 0;
    for (size_t i = i0; i < n && !rc; i++) {
        if (!strcmp(m[i].role, "user")) {
            rc |= sp(o, "<s>");
            rc |= tx(o, "[INST] ");
            if (i == i0 && sys) {
                /* The template strips the whole "<<SYS>>..user" content: only the user end is trimmed. */
                size_t a = 0;
                while (sys[a] && is_ws(sys[a])) a++;
                rc |= tx(o, "<<SYS>>\n");
                rc |= tx(o, sys + a);
                rc |= tx(o, "\n<</SYS>>\n\n");
                const char *u = m[i].content;
                size_t b = strlen(u);
                while (b && is_ws(u[b - 1])) b--;
                rc |= push(o, 0, u, b);
            } else {
                rc |= tx_trim(o, m[i].content);
            }
            rc |= tx(o, " [/INST]");
        } else {
            rc |= tx(o, " ");
            rc |= tx_trim(o, m[i].content);
            rc |= tx(o, " ");
            rc |= sp(o, "</s>");
        }
    }
    return rc;
}

/* Gemma (gemma-3-*-it's template; Gemma 2's is the same but refuses a system message): <bos>, then per message
 * <start_of_turn>role\n, the content trimmed, <end_of_turn>\n, with "assistant" written "model". A leading
 * system message is no turn: its text (as it is: the template does not trim it) and "\n\n" open the first user
 * turn (first_user_prefix). The template raises "Conversation roles must alternate user/assistant/user/
 * assistant/..." on any other order; other roles would only be turns the model never saw, so they are refused. */
static int render_gemma(const llm_chat_msg *m, size_t n, int gen, llm_chat_out *o, llm_err *err)
{
    const char *sys = NULL;
    size_t i0 = 0;
    if (n && !strcmp(m[0].role, "system")) { sys = m[0].content; i0 = 1; }
    if (i0 == n) { llm_seterr(err, "gemma chat format needs at least one user message"); return -2; }
    for (size_t i = i0; i < n; i++) {
        int user = (i - i0) % 2 == 0;
        if (user ? strcmp(m[i].role, "user") != 0 : strcmp(m[i].role, "assistant") && strcmp(m[i].role, "model")) {
            llm_seterr(err, "gemma chat format: message %zu has role '%s', expected '%s' "
                       "(roles must alternate user/assistant after an optional system message)",
                       i, m[i].role, user ? "user" : "assistant");
            return -2;
        }
    }
    int rc = sp(o, "<bos>");
    for (size_t i = i0; i < n && !rc; i++) {
        rc |= sp(o, "<start_of_turn>");
        rc |= tx(o, (i - i0) % 2 == 0 ? "user\n" : "model\n");
        if (i == i0 && sys)
            rc |= tx(o, sys) | tx(o, "\n\n");
        rc |= tx_trim(o, m[i].content);
        rc |= sp(o, "<end_of_turn>");
        rc |= tx(o, "\n");
    }
    if (gen && !rc)
        rc |= sp(o, "<start_of_turn>") | tx(o, "model\n");
    return rc;
}

/* 0 when every message's role is system, user or assistant; else -1 naming the first that is not (the formats
 * whose templates know no other role). */
static int roles_plain(const llm_chat_msg *m, size_t n, llm_chat_format f, llm_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].role, "system") && strcmp(m[i].role, "user") && strcmp(m[i].role, "assistant")) {
            llm_seterr(err, "%s chat format: message %zu has role '%s' (system, user or assistant)",
                       llm_chat_format_name(f), i, m[i].role);
            return -1;
        }
    return 0;
}

/* Phi 3 (Phi-3 / Phi-3.5 instruct: <|role|>\ncontent<|end|>\n), Phi-4-mini (the same without the newlines)
 * and Phi 4 (<|im_start|>role<|im_sep|>content<|im_end|>, no newlines): the models' templates render system,
 * user and assistant turns in order and skip any other role silently; here another role is refused. */
static int render_phi(const llm_chat_msg *m, size_t n, int gen, llm_chat_format f, llm_chat_out *o, llm_err *err)
{
    if (roles_plain(m, n, f, err) != 0)
        return -2;
    int rc = 0, phi4 = f == LLM_CHAT_PHI4;
    const char *nl = f == LLM_CHAT_PHI3 ? "\n" : "";
    char open[32];
    for (size_t i = 0; i < n && !rc; i++) {
        if (phi4) {
            rc |= sp(o, "<|im_start|>") | tx(o, m[i].role) | sp(o, "<|im_sep|>") | tx(o, m[i].content);
            rc |= sp(o, "<|im_end|>");
        } else {
            snprintf(open, sizeof open, "<|%s|>", m[i].role);
            rc |= sp(o, open) | tx(o, nl) | tx(o, m[i].content) | sp(o, "<|end|>") | tx(o, nl);
        }
    }
    if (gen && !rc)
        rc |= phi4 ? sp(o, "<|im_start|>") | tx(o, "assistant") | sp(o, "<|im_sep|>")
                   : sp(o, "<|assistant|>") | tx(o, nl);
    return rc;
}

/* Granite 3: <|start_of_role|>role<|end_of_role|>content<|end_of_text|>\n per message, as it comes (its
 * template neither trims nor reorders), then <|start_of_role|>assistant<|end_of_role|>. The template's default
 * system turn (its knowledge cutoff and the date) is not written, as llama.cpp's built-in Granite format
 * does not; a system message given is. With tools (Granite 3.3's template): the default system turn with the
 * tool instruction when no system message is given, then the available_tools turn; an assistant message's
 * calls after its content as <|tool_call|> and a JSON list (how the model answers them). */
static int granite_turn(llm_chat_out *o, const char *role, const char *content)
{
    return sp(o, "<|start_of_role|>") | tx(o, role) | sp(o, "<|end_of_role|>") | tx(o, content);
}

static const char GRANITE_OWN[] = "You are Granite, developed by IBM.";

int llm_chat_granite_own_system(const char *tmpl)
{
    return tmpl != NULL && strstr(tmpl, "<|start_of_role|>") != NULL && strstr(tmpl, GRANITE_OWN) != NULL;
}

/* Granite's own system text for today (date_long), plain (tools 0) or with the tool instruction, whose
 * <|tool_call|> is a control segment. */
static int granite_system(llm_chat_out *o, const char *date_long, int tools)
{
    int rc = tx(o, "Knowledge Cutoff Date: April 2024.\nToday's Date: ") | tx(o, date_long ? date_long : "");
    rc |= tx(o, ".\n") | tx(o, GRANITE_OWN);
    if (!tools)
        return rc | tx(o, " You are a helpful AI assistant.");
    return rc | tx(o, " You are a helpful assistant with access to the following tools. When a tool is required to "
                      "answer the user's query, respond only with ") | sp(o, "<|tool_call|>") |
           tx(o, " followed by a JSON list of tools used. If a tool does not exist in the provided list of tools, "
                 "notify the user that you do not have the ability to fulfill the request.");
}

char *llm_chat_granite_system_text(const char *date_long)
{
    llm_chat_out o = { NULL, 0, 0 };
    char *s = granite_system(&o, date_long, 0) == 0 ? llm_chat_out_join(&o) : NULL;
    llm_chat_out_free(&o);
    return s;
}

static int render_granite(const llm_chat_msg *m, size_t n, const llm_chat_tools *t, int gen, llm_chat_out *o)
{
    int rc = 0;
    size_t i = 0;
    if (t != NULL) {
        if (strcmp(m[0].role, "system") != 0) {
            rc |= granite_turn(o, "system", "") | granite_system(o, t->date_long, 1);
        } else {
            rc |= granite_turn(o, "system", m[i++].content);
        }
        rc |= sp(o, "<|end_of_text|>") | tx(o, "\n") | granite_turn(o, "available_tools", t->defs);
        rc |= sp(o, "<|end_of_text|>") | tx(o, "\n");
    }
    for (; i < n && !rc; i++) {
        rc |= granite_turn(o, m[i].role, m[i].content);
        if (m[i].n_calls > 0) {
            rc |= sp(o, "<|tool_call|>") | tx(o, "[");
            for (size_t c = 0; c < m[i].n_calls; c++)
                rc |= tx(o, c ? ", " : "") | call_json(o, &m[i].calls[c], "arguments");
            rc |= tx(o, "]");
        }
        rc |= sp(o, "<|end_of_text|>") | tx(o, "\n");
    }
    if (gen && !rc)
        rc |= granite_turn(o, "assistant", "");
    if (t != NULL && t->open_call && !rc)
        rc |= sp(o, "<|tool_call|>");
    return rc;
}

/* DeepSeek V3 / R1 and R1's distills (see chat_template.h), after their template: the system text (the last
 * system message's: the template keeps one) right after BOS, each user message behind <｜User｜>, each answer
 * behind <｜Assistant｜> with <｜end▁of▁sentence｜> after it and its reasoning (up to its last </think>) left
 * out. Other roles (the template's tool outputs) are refused. */
static int render_deepseek(const llm_chat_msg *m, size_t n, int gen, llm_chat_format f, llm_chat_out *o,
                           llm_err *err)
{
    if (roles_plain(m, n, f, err) != 0)
        return -2;
    const char *sys = "";
    for (size_t i = 0; i < n; i++)
        if (!strcmp(m[i].role, "system")) sys = m[i].content;
    int rc = sp(o, "<｜begin▁of▁sentence｜>") | tx(o, sys);
    for (size_t i = 0; i < n && !rc; i++) {
        if (!strcmp(m[i].role, "user")) {
            rc |= sp(o, "<｜User｜>") | tx(o, m[i].content);
        } else if (!strcmp(m[i].role, "assistant")) {
            const char *c = m[i].content;
            for (const char *p = strstr(c, "</think>"); p != NULL; p = strstr(p + 1, "</think>"))
                c = p + strlen("</think>");
            rc |= sp(o, "<｜Assistant｜>") | tx(o, c) | sp(o, "<｜end▁of▁sentence｜>");
        }
    }
    if (gen && !rc) {
        rc |= sp(o, "<｜Assistant｜>");
        if (f == LLM_CHAT_DEEPSEEK_R1)
            rc |= sp(o, "<think>") | tx(o, "\n");
    }
    return rc;
}

/* EXAONE 3.0 / 3.5, after their template: an empty system turn first when the conversation opens with no system
 * message; a user turn ends with "\n" alone (the answer's [|assistant|] follows it). The template writes any role
 * as [|role|], but the vocabulary has system, user and assistant only: other roles are refused. EXAONE Deep's
 * (deep): an earlier message's text after its last </thought> (newlines stripped from its start, as Python's
 * lstrip('\n')), "\n" between turns but not after the last, then "\n[|assistant|]<thought>\n". */
static int render_exaone3(const llm_chat_msg *m, size_t n, int gen, int deep, llm_chat_out *o, llm_err *err)
{
    if (roles_plain(m, n, deep ? LLM_CHAT_EXAONE_DEEP : LLM_CHAT_EXAONE3, err) != 0)
        return -2;
    int rc = strcmp(m[0].role, "system") ? sp(o, "[|system|]") | sp(o, "[|endofturn|]") | tx(o, "\n") : 0;
    char open[32];
    for (size_t i = 0; i < n && !rc; i++) {
        const char *c = m[i].content;
        for (const char *p = deep ? strstr(c, "</thought>") : NULL; p != NULL; p = strstr(p + 1, "</thought>"))
            c = p + strlen("</thought>");
        while (c != m[i].content && *c == '\n') c++;
        snprintf(open, sizeof open, "[|%s|]", m[i].role);
        rc |= sp(o, open) | tx(o, c);
        if (strcmp(m[i].role, "user")) rc |= sp(o, "[|endofturn|]");
        if (!deep || i + 1 < n || gen) rc |= tx(o, "\n");
    }
    if (gen && !rc)
        rc |= sp(o, "[|assistant|]") | (deep ? sp(o, "<thought>") | tx(o, "\n") : 0);
    return rc;
}

/* A string as Python's json.dumps(s, ensure_ascii=False) writes it (the templates' tojson). */
static int tx_json_string(llm_chat_out *o, const char *s)
{
    int rc = tx(o, "\"");
    const char *run = s;
    for (const unsigned char *p = (const unsigned char *)s; *p && !rc; p++) {
        const char *esc = *p == '"' ? "\\\"" : *p == '\\' ? "\\\\" : *p == '\n' ? "\\n" : *p == '\r' ? "\\r"
                        : *p == '\t' ? "\\t" : *p == '\b' ? "\\b" : *p == '\f' ? "\\f" : NULL;
        char u[8];
        if (esc == NULL && *p < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", *p);
            esc = u;
        }
        if (esc == NULL) continue;
        rc |= push(o, 0, run, (size_t)((const char *)p - run)) | tx(o, esc);
        run = (const char *)p + 1;
    }
    return rc | tx(o, run) | tx(o, "\"");
}

static const char EXAONE4_TOOLS_HEAD[] =
    "# Available Tools\nYou can use none, one, or multiple of the following tools by calling them as functions to help "
    "with the user\xe2\x80\x99s query.\nHere are the tools available to you in JSON format within ";
static const char EXAONE4_TOOLS_TAIL[] =
    "For each function call you want to make, return a JSON object with function name and arguments within ";
static const char EXAONE4_TOOLS_LIKE[] =
    "{\"name\": function_1_name, \"arguments\": {argument_1_name: argument_1_value, argument_2_name: "
    "argument_2_value}}";
static const char EXAONE4_TOOLS_NOTE[] =
    "\n...\nNote that if no argument name is specified for a tool, you can just print the argument value directly, "
    "without the argument name or JSON formatting.";

/* EXAONE 4's available_tools: defs holds each tool's JSON on a line of its own. */
static int exaone4_tools(llm_chat_out *o, const char *defs)
{
    int rc = tx(o, EXAONE4_TOOLS_HEAD) | sp(o, "<tool>") | tx(o, " and ") | sp(o, "</tool>") | tx(o, " tags:\n");
    for (const char *p = defs; *p && !rc;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > 0)
            rc |= sp(o, "<tool>") | push(o, 0, p, len) | sp(o, "</tool>") | tx(o, "\n");
        p += len + (nl != NULL);
    }
    rc |= tx(o, "\n") | tx(o, EXAONE4_TOOLS_TAIL) | sp(o, "<tool_call>") | tx(o, " and ") | sp(o, "</tool_call>");
    rc |= tx(o, " tags, like:\n") | sp(o, "<tool_call>") | tx(o, EXAONE4_TOOLS_LIKE) | sp(o, "</tool_call>");
    rc |= tx(o, "\n") | sp(o, "<tool_call>") | tx(o, "{\"name\": function_2_name, \"arguments\": {...}}");
    return rc | sp(o, "</tool_call>") | tx(o, EXAONE4_TOOLS_NOTE);
}

/* EXAONE 4.0, after its template (skip_think left at its default: earlier answers' reasoning is left out, each
 * answer behind an empty think block). Roles: system, user, assistant, tool. */
static int render_exaone4(const llm_chat_msg *m, size_t n, const llm_chat_tools *t, const llm_chat_vars *v, int gen,
                          llm_chat_out *o, llm_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].role, "system") && strcmp(m[i].role, "user") && strcmp(m[i].role, "assistant") &&
            strcmp(m[i].role, "tool")) {
            llm_seterr(err, "exaone4 chat format: message %zu has role '%s' (system, user, assistant or tool)", i,
                       m[i].role);
            return -2;
        }
    int rc = 0;
    size_t i = 0;
    if (!strcmp(m[0].role, "system") || t != NULL) {
        rc |= sp(o, "[|system|]") | tx(o, "\n");
        if (!strcmp(m[0].role, "system")) {
            rc |= tx(o, m[0].content) | (t != NULL ? tx(o, "\n\n") : 0);
            i = 1;
        }
        rc |= (t != NULL ? exaone4_tools(o, t->defs) : 0) | sp(o, "[|endofturn|]") | tx(o, "\n");
    }
    for (; i < n && !rc; i++) {
        const char *role = m[i].role, *c = m[i].content;
        if (!strcmp(role, "assistant")) {
            rc |= sp(o, "[|assistant|]") | tx(o, "\n");
            if (*c) {
                const char *last = NULL;
                for (const char *p = strstr(c, "</think>"); p != NULL; p = strstr(p + 1, "</think>")) last = p;
                rc |= llm_chat_no_think(o) | (last ? tx_trim(o, last + strlen("</think>")) : tx(o, c));
            }
            if (m[i].n_calls > 0)
                rc |= *c ? tx(o, "\n") : llm_chat_no_think(o);
            for (size_t k = 0; k < m[i].n_calls; k++)
                rc |= (k ? tx(o, "\n") : 0) | sp(o, "<tool_call>") | call_json(o, &m[i].calls[k], "arguments") |
                      sp(o, "</tool_call>");
            rc |= sp(o, "[|endofturn|]") | tx(o, "\n");
        } else if (!strcmp(role, "tool")) {
            if (i == 0 || strcmp(m[i - 1].role, "tool")) rc |= sp(o, "[|tool|]") | tx(o, "\n");
            rc |= sp(o, "<tool_result>") | tx(o, "{\"result\": ") | tx_json_string(o, c) | tx(o, "}");
            rc |= sp(o, "</tool_result>");
            rc |= i + 1 == n || strcmp(m[i + 1].role, "tool") ? sp(o, "[|endofturn|]") | tx(o, "\n") : tx(o, "\n");
        } else {
            char open[32];
            snprintf(open, sizeof open, "[|%s|]", role);
            rc |= sp(o, open) | tx(o, "\n") | tx(o, c) | sp(o, "[|endofturn|]") | tx(o, "\n");
        }
    }
    if (gen && !rc) {
        rc |= sp(o, "[|assistant|]") | tx(o, "\n");
        rc |= v != NULL && v->think ? sp(o, "<think>") | tx(o, "\n") : llm_chat_no_think(o);
    }
    if (t != NULL && t->open_call && !rc)
        rc |= sp(o, "<tool_call>");
    return rc;
}

/* ERNIE 4.5, after its template: <|begin_of_sentence|>, then each message in order (a system text with "\n"
 * after it, "User: text\n", "Assistant: answer<|end_of_sentence|>"), then "Assistant: ". The template skips other
 * roles silently; here they are refused. */
static int render_ernie(const llm_chat_msg *m, size_t n, int gen, llm_chat_out *o, llm_err *err)
{
    if (roles_plain(m, n, LLM_CHAT_ERNIE, err) != 0)
        return -2;
    int rc = sp(o, "<|begin_of_sentence|>");
    for (size_t i = 0; i < n && !rc; i++) {
        if (!strcmp(m[i].role, "user")) rc |= tx(o, "User: ") | tx(o, m[i].content) | tx(o, "\n");
        else if (!strcmp(m[i].role, "assistant"))
            rc |= tx(o, "Assistant: ") | tx(o, m[i].content) | sp(o, "<|end_of_sentence|>");
        else rc |= tx(o, m[i].content) | tx(o, "\n");
    }
    return gen && !rc ? tx(o, "Assistant: ") : rc;
}

/* gpt-oss's harmony, after its template (openai/gpt-oss-20b's chat_template.jinja): a system message of its own
 * (identity, knowledge cutoff, today's date, the reasoning effort, the channels; with tools, that calls go to the
 * commentary channel), the conversation's system (or developer) message, when first and not empty, as the
 * developer's "# Instructions", then the tools (defs: their TypeScript namespace, llm_tools.c); user messages;
 * earlier answers in the final channel without their reasoning (it drops the chain of thought of every earlier
 * turn), the last one closed by <|return|> when no answer follows; an answer's call (its first: harmony has one a
 * message) as <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>ARGS<|call|>, after its
 * text as an analysis message unless a later answer has no calls; a tool result as <|start|>functions.NAME
 * to=assistant<|channel|>commentary<|message|>"TEXT"<|end|> (its text as a JSON string). Like the template, other
 * roles and a system message past the first are left out. */
static int render_gpt_oss(const llm_chat_msg *m, size_t n, const llm_chat_tools *tools, const llm_chat_vars *v,
                          int gen, llm_chat_out *o, llm_err *err)
{
    const char *effort = v && v->reasoning_effort ? v->reasoning_effort : "medium";
    const char *date = v && v->date_iso ? v->date_iso : "2026-01-01";
    char sys[512];
    snprintf(sys, sizeof sys, "You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
             "2024-06\nCurrent date: %s\n\nReasoning: %s\n\n# Valid channels: analysis, commentary, final. "
             "Channel must be included for every message.%s", date, effort,
             tools ? "\nCalls to these tools must go to the commentary channel: 'functions'." : "");
    int rc = sp(o, "<|start|>") | tx(o, "system") | sp(o, "<|message|>") | tx(o, sys) | sp(o, "<|end|>");
    size_t i = 0;
    const char *dev = n > 0 && (!strcmp(m[0].role, "system") || !strcmp(m[0].role, "developer")) ? m[0].content : NULL;
    if (dev != NULL) i = 1;
    if ((dev && dev[0]) || tools) {
        rc |= sp(o, "<|start|>") | tx(o, "developer") | sp(o, "<|message|>");
        if (dev && dev[0]) rc |= tx(o, "# Instructions\n\n") | tx(o, dev) | tx(o, "\n\n");
        if (tools) rc |= tx(o, "# Tools\n\n") | tx(o, tools->defs ? tools->defs : "");
        rc |= sp(o, "<|end|>");
    }
    const char *last_call = NULL;
    for (; i < n && !rc; i++) {
        if (!strcmp(m[i].role, "user")) {
            rc |= sp(o, "<|start|>") | tx(o, "user") | sp(o, "<|message|>") | tx(o, m[i].content) | sp(o, "<|end|>");
        } else if (!strcmp(m[i].role, "assistant") && m[i].n_calls > 0) {
            int later_final = 0; /* a later answer without calls: then this one's text is dropped */
            for (size_t j = i + 1; j < n; j++) later_final |= !strcmp(m[j].role, "assistant") && m[j].n_calls == 0;
            if (m[i].content[0] && !later_final)
                rc |= sp(o, "<|start|>") | tx(o, "assistant") | sp(o, "<|channel|>") | tx(o, "analysis") |
                      sp(o, "<|message|>") | tx(o, m[i].content) | sp(o, "<|end|>");
            char to[160];
            snprintf(to, sizeof to, "assistant to=functions.%s", m[i].calls[0].name);
            rc |= sp(o, "<|start|>") | tx(o, to) | sp(o, "<|channel|>") | tx(o, "commentary json") |
                  sp(o, "<|message|>") | tx(o, m[i].calls[0].args ? m[i].calls[0].args : "{}") | sp(o, "<|call|>");
            last_call = m[i].calls[0].name;
        } else if (!strcmp(m[i].role, "assistant")) {
            rc |= sp(o, "<|start|>") | tx(o, "assistant") | sp(o, "<|channel|>") | tx(o, "final") |
                  sp(o, "<|message|>") | tx(o, m[i].content) | sp(o, i + 1 == n && !gen ? "<|return|>" : "<|end|>");
            if (!(i + 1 == n && !gen)) last_call = NULL;
        } else if (is_tool_role(m[i].role)) {
            if (last_call == NULL) {
                llm_seterr(err, "gpt-oss chat format: message %zu is a tool result without an earlier call", i);
                return -2;
            }
            char from[160];
            snprintf(from, sizeof from, "functions.%s to=assistant", last_call);
            rc |= sp(o, "<|start|>") | tx(o, from) | sp(o, "<|channel|>") | tx(o, "commentary") |
                  sp(o, "<|message|>") | tx_json_string(o, m[i].content) | sp(o, "<|end|>");
        }
    }
    return gen && !rc ? sp(o, "<|start|>") | tx(o, "assistant") : rc;
}

/* Tulu (OLMo 2 Instruct, Tulu 3), after its template: the model's BOS, then <|role|>\ntext\n per message, an answer
 * with the model's EOS after it (and "\n" but after the last message), then <|assistant|>\n. The template skips
 * other roles silently; here they are refused. */
static int render_tulu(const llm_chat_msg *m, size_t n, const llm_chat_vars *v, int gen, llm_chat_out *o,
                       llm_err *err)
{
    if (roles_plain(m, n, LLM_CHAT_TULU, err) != 0)
        return -2;
    const char *bos = v ? v->bos : NULL, *eos = v ? v->eos : NULL;
    int rc = bos && *bos ? sp(o, bos) : 0;
    char open[32];
    for (size_t i = 0; i < n && !rc; i++) {
        snprintf(open, sizeof open, "<|%s|>", m[i].role);
        rc |= sp(o, open) | tx(o, "\n") | tx(o, m[i].content);
        if (strcmp(m[i].role, "assistant")) rc |= tx(o, "\n");
        else rc |= (eos && *eos ? sp(o, eos) : 0) | (i + 1 < n ? tx(o, "\n") : 0);
    }
    return gen && !rc ? sp(o, "<|assistant|>") | tx(o, "\n") : rc;
}

static const char SEED_NO_THINK[] =
    "You are an intelligent assistant that can answer questions in one step without the need for reasoning and "
    "thinking, that is, your thinking budget is 0. Next, please skip the thinking process and directly start "
    "answering the user's questions.";

static const char SEED_TOOLS_INTRO[] =
    "You are Doubao, a helpful AI assistant. You may call one or more functions to assist with the user query.";
/* the call format its tool prompt shows, around a <seed:tool_call> ... </seed:tool_call> (control tokens) */
static const char SEED_TOOLS_FORMAT[] =
    "\n\u5de5\u5177\u8c03\u7528\u8bf7\u9075\u5faa\u5982\u4e0b\u683c\u5f0f:\n"; /* 工具调用请遵循如下格式 */
static const char SEED_TOOLS_EXAMPLE[] =
    "\n<function=example_function_name>\n<parameter=example_parameter_1>value_1</parameter>\n"
    "<parameter=example_parameter_2>This is the value for the second parameter\nthat can span\nmultiple lines"
    "</parameter>\n</function>\n";

/* Seed-OSS, after its template: a first system message as <seed:bos>system\ntext<seed:eos> (with tools: the system
 * message or its "You are Doubao ..." line, the tools as Python function docs (defs, the module's), the call
 * format, then <seed:eos>); with no_think (its thinking_budget 0) a system turn telling the model so, with a
 * thinking budget one naming it and how often to reflect on it; then each
 * message as <seed:bos>role\ntext<seed:eos>, an answer trimmed (an empty one leaves its turn open, as the template
 * does), an answer with calls its text trimmed between newlines then each call as
 * \n<seed:tool_call>\n<function=NAME>\n<parameter=KEY>VALUE</parameter>\n...</function>\n</seed:tool_call> (the
 * args: those parameter lines), then <seed:eos>; the generation prompt <seed:bos>assistant\n, with no_think a closed
 * <seed:think> block that says the budget is 0. */
static int render_seed(const llm_chat_msg *m, size_t n, const llm_chat_tools *t, const llm_chat_vars *v, int gen,
                       llm_chat_out *o)
{
    int no_think = v != NULL && v->no_think, rc = 0, sys = !strcmp(m[0].role, "system");
    size_t i = sys;
    if (sys || t != NULL)
        rc |= sp(o, "<seed:bos>") | tx(o, "system\n") | tx(o, sys ? m[0].content : SEED_TOOLS_INTRO);
    if (t != NULL)
        rc |= tx(o, t->defs ? t->defs : "") | tx(o, SEED_TOOLS_FORMAT) | sp(o, "<seed:tool_call>") |
              tx(o, SEED_TOOLS_EXAMPLE) | sp(o, "</seed:tool_call>") | tx(o, "\n");
    if (sys || t != NULL)
        rc |= sp(o, "<seed:eos>");
    if (no_think)
        rc |= sp(o, "<seed:bos>") | tx(o, "system\n") | tx(o, SEED_NO_THINK) | tx(o, "\n") | sp(o, "<seed:eos>");
    else if (v != NULL && v->thinking_budget > 0) {
        /* its template's reflection interval: that of the first gear at or above the budget (16384's past them) */
        static const int gear[6][2] = { { 512, 128 }, { 1024, 256 }, { 2048, 512 }, { 4096, 512 }, { 8192, 1024 },
                                        { 16384, 1024 } };
        int every = 1024;
        for (int g = 5; g >= 0; g--)
            if (v->thinking_budget <= gear[g][0]) every = gear[g][1];
        char text[640];
        snprintf(text, sizeof text, "You are an intelligent assistant with reflective ability. In the process of "
                 "thinking and reasoning, you need to strictly follow the thinking budget, which is %d. That is, you "
                 "need to complete your thinking within %d tokens and start answering the user's questions. You will "
                 "reflect on your thinking process every %d tokens, stating how many tokens have been used and how "
                 "many are left.\n", v->thinking_budget, v->thinking_budget, every);
        rc |= sp(o, "<seed:bos>") | tx(o, "system\n") | tx(o, text) | sp(o, "<seed:eos>");
    }
    for (; i < n && !rc; i++) {
        rc |= sp(o, "<seed:bos>") | tx(o, m[i].role);
        if (strcmp(m[i].role, "assistant")) {
            rc |= tx(o, "\n") | tx(o, m[i].content) | sp(o, "<seed:eos>");
            continue;
        }
        const char *c = m[i].content;
        while (is_ws(*c)) c++;
        if (m[i].n_calls > 0) {
            if (*c) rc |= tx(o, "\n") | tx_trim(o, c) | tx(o, "\n");
            for (size_t k = 0; k < m[i].n_calls; k++)
                rc |= tx(o, "\n") | sp(o, "<seed:tool_call>") | tx(o, "\n<function=") | tx(o, m[i].calls[k].name) |
                      tx(o, ">\n") | tx(o, m[i].calls[k].args) | tx(o, "</function>\n") | sp(o, "</seed:tool_call>");
            rc |= sp(o, "<seed:eos>");
            continue;
        }
        if (*c) rc |= tx(o, "\n") | tx_trim(o, c) | sp(o, "<seed:eos>");
    }
    if (gen && !rc) {
        rc |= sp(o, "<seed:bos>") | tx(o, "assistant\n");
        if (no_think)
            rc |= sp(o, "<seed:think>") | tx(o, "\n") | sp(o, "<seed:cot_budget_reflect>") |
                  tx(o, "The current thinking budget is 0, so I will directly start answering the question.") |
                  sp(o, "</seed:cot_budget_reflect>") | tx(o, "\n") | sp(o, "</seed:think>");
    }
    return rc;
}

/* A GLM-4.5 answer as its template splits it at </think> (the project's messages carry no reasoning_content): the
 * reasoning is what precedes the first </think>, after the last <think> before that, kept only when keep (an answer
 * after the last user message); the text is what follows the last </think>. Both trimmed; "\n" and the text only
 * when some is left. */
static int glm45_answer(llm_chat_out *o, const char *c, int keep)
{
    const char *close = strstr(c, "</think>"), *text = c;
    int rc = sp(o, "<|assistant|>") | tx(o, "\n") | sp(o, "<think>");
    if (close != NULL) {
        const char *r = c;
        for (const char *p = strstr(c, "<think>"); p != NULL && p < close; p = strstr(p + 1, "<think>"))
            r = p + strlen("<think>");
        if (keep) rc |= push_trim(o, r, (size_t)(close - r));
        for (const char *p = close; p != NULL; p = strstr(p + 1, "</think>")) text = p + strlen("</think>");
    }
    rc |= sp(o, "</think>");
    while (is_ws(*text)) text++;
    return *text ? rc | tx(o, "\n") | tx_trim(o, text) : rc;
}

/* GLM-4.5's call XML: its tags are tokens of the model's vocabulary (added tokens, which its tokenizer finds anywhere
 * in the rendering), so they go as control segments wherever they stand in s; the rest is text. */
static int glm45_xml(llm_chat_out *o, const char *s)
{
    static const char *const tags[] = { "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>",
                                        "</arg_value>" };
    int rc = 0;
    const char *p = s;
    while (*p && !rc) {
        const char *hit = NULL;
        size_t hl = 0;
        for (size_t k = 0; k < sizeof tags / sizeof tags[0]; k++) {
            const char *h = strstr(p, tags[k]);
            if (h != NULL && (hit == NULL || h < hit)) hit = h, hl = strlen(tags[k]);
        }
        if (hit == NULL) return tx(o, p);
        rc |= push(o, 0, p, (size_t)(hit - p)) | push(o, 1, hit, hl);
        p = hit + hl;
    }
    return rc;
}

static const char GLM45_TOOLS_HEAD[] =
    "\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function "
    "signatures within <tools></tools> XML tags:\n<tools>\n";
static const char GLM45_TOOLS_HOW[] =
    "</tools>\n\nFor each function call, output the function name and arguments within the following XML format:\n"
    "<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>\n"
    "<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>";

/* GLM-4.5 (GLM-4.5-Air, GLM-4.6), after its template: [gMASK]<sop>; with tools a system turn of its own,
 * <|system|>\n# Tools ... <tools>\n, the tools (defs: each tool's one-line JSON and "\n"), </tools> and the call format;
 * then each message: <|system|>\ntext, <|user|>\ntext (no_think: /nothink after it, unless it ends so), an answer
 * (glm45_answer) and its calls, each \n<tool_call>NAME, its args (the \n<arg_key>K</arg_key>\n<arg_value>V</arg_value>
 * lines) and \n</tool_call>; consecutive tool messages behind one <|observation|>, each as
 * \n<tool_response>\ntext\n</tool_response>; the generation prompt <|assistant|> (no_think: and \n<think></think>).
 * The template skips other roles silently; here they are refused. */
static int render_glm45(const llm_chat_msg *m, size_t n, const llm_chat_tools *t, const llm_chat_vars *v, int gen,
                        llm_chat_out *o, llm_err *err)
{
    size_t last_user = n; /* none: every answer keeps its reasoning */
    for (size_t i = 0; i < n; i++) {
        const char *r = m[i].role;
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool")) {
            llm_seterr(err, "glm4.5 chat format: message %zu has role '%s' (system, user, assistant or tool)", i, r);
            return -2;
        }
        if (!strcmp(r, "user")) last_user = i;
    }
    int no_think = v != NULL && v->no_think;
    int rc = sp(o, "[gMASK]") | sp(o, "<sop>");
    if (t != NULL)
        rc |= sp(o, "<|system|>") | tx(o, GLM45_TOOLS_HEAD) | tx(o, t->defs ? t->defs : "") | glm45_xml(o, GLM45_TOOLS_HOW);
    for (size_t i = 0; i < n && !rc; i++) {
        const char *r = m[i].role, *c = m[i].content;
        if (!strcmp(r, "assistant")) {
            rc |= glm45_answer(o, c, last_user == n || i > last_user);
            for (size_t k = 0; k < m[i].n_calls; k++)
                rc |= tx(o, "\n") | sp(o, "<tool_call>") | tx(o, m[i].calls[k].name) | glm45_xml(o, m[i].calls[k].args) |
                      tx(o, "\n") | sp(o, "</tool_call>");
        } else if (!strcmp(r, "tool")) {
            if (i == 0 || strcmp(m[i - 1].role, "tool")) rc |= sp(o, "<|observation|>");
            rc |= tx(o, "\n") | sp(o, "<tool_response>") | tx(o, "\n") | tx(o, c) | tx(o, "\n") |
                  sp(o, "</tool_response>");
        } else {
            size_t len = strlen(c);
            rc |= sp(o, strcmp(r, "user") ? "<|system|>" : "<|user|>") | tx(o, "\n") | tx(o, c);
            if (!strcmp(r, "user") && no_think && (len < 8 || strcmp(c + len - 8, "/nothink")))
                rc |= sp(o, "/nothink");
        }
    }
    if (gen && !rc)
        rc |= sp(o, "<|assistant|>") | (no_think ? tx(o, "\n") | sp(o, "<think>") | sp(o, "</think>") : 0);
    return rc;
}

int llm_chat_thinks(llm_chat_format f, int enable_thinking)
{
    return f == LLM_CHAT_EXAONE4 ? enable_thinking == 1 : enable_thinking != 0;
}

int llm_chat_prompt_opens_think(llm_chat_format f, int enable_thinking)
{
    return f == LLM_CHAT_DEEPSEEK_R1 || f == LLM_CHAT_EXAONE_DEEP || (f == LLM_CHAT_EXAONE4 && enable_thinking == 1);
}

int llm_chat_answer_leads_ws(llm_chat_format f) { return f == LLM_CHAT_GLM45; }

/* Mistral's formats as llama.cpp renders them (after Mistral's tokenization cookbook), behind <s>: v1, v3 and
 * v3-tekken open a turn with [INST] (v1: " [INST] ", v3: "[INST] ", tekken: "[INST]"), a system message's text
 * and "\n\n" go into it before the user's, the user's text closes it with [/INST] (v1: " [/INST]"), and an
 * answer follows (after a space, but for tekken; v3 trims it) with </s>; v7 writes the system message as
 * [SYSTEM_PROMPT] text[/SYSTEM_PROMPT] and each user message as [INST] text[/INST]. The generation prompt is
 * implicit (a user turn ends with [/INST]). Roles other than system, user and assistant are refused here (a
 * conversation with tools, calls or their results goes to render_mistral_tools). */
static int render_mistral(const llm_chat_msg *m, size_t n, llm_chat_format f, llm_chat_out *o, llm_err *err)
{
    if (roles_plain(m, n, f, err) != 0)
        return -2;
    int rc = sp(o, "<s>");
    if (f == LLM_CHAT_MISTRAL_V7) {
        for (size_t i = 0; i < n && !rc; i++) {
            if (!strcmp(m[i].role, "system"))
                rc |= sp(o, "[SYSTEM_PROMPT]") | tx(o, " ") | tx(o, m[i].content) | sp(o, "[/SYSTEM_PROMPT]");
            else if (!strcmp(m[i].role, "user"))
                rc |= sp(o, "[INST]") | tx(o, " ") | tx(o, m[i].content) | sp(o, "[/INST]");
            else
                rc |= tx(o, " ") | tx(o, m[i].content) | sp(o, "</s>");
        }
        return rc;
    }
    const char *lead = f == LLM_CHAT_MISTRAL_V1 ? " " : "", *trail = f == LLM_CHAT_MISTRAL_V3_TEKKEN ? "" : " ";
    int inside = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (!inside) {
            rc |= tx(o, lead) | sp(o, "[INST]") | tx(o, trail);
            inside = 1;
        }
        if (!strcmp(m[i].role, "system")) {
            rc |= tx(o, m[i].content) | tx(o, "\n\n");
        } else if (!strcmp(m[i].role, "user")) {
            rc |= tx(o, m[i].content) | tx(o, lead) | sp(o, "[/INST]");
        } else {
            rc |= tx(o, trail) | (f == LLM_CHAT_MISTRAL_V3 ? tx_trim(o, m[i].content) : tx(o, m[i].content));
            rc |= sp(o, "</s>");
            inside = 0;
        }
    }
    return rc;
}

/* SmolLM3 (see chat_template.h): its template's system turn, then ChatML turns. */
static const char SMOLLM3_THINK[] =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves "
    "thoroughly exploring questions through a systematic thinking process before providing the final precise and "
    "accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, "
    "reassessment, reflection, backtracking, and iteration to develop well-considered thinking process. Please "
    "structure your response into two main sections: Thought and Solution using the specified format: ";
static const char SMOLLM3_THINK2[] =
    " Solution section. In the Thought section, detail your reasoning process in steps. Each step should include "
    "detailed considerations such as analysing questions, summarizing relevant findings, brainstorming new ideas, "
    "verifying the accuracy of the current steps, refining any errors, and revisiting previous steps. In the "
    "Solution section, based on various attempts, explorations, and reflections from the Thought section, "
    "systematically present the final solution that you deem correct. The Solution section should be logical, "
    "accurate, and concise and detail necessary steps needed to reach the conclusion.\n\n";

/* s without every occurrence of the markers, then right-stripped (str.replace(...).rstrip()); malloc'd */
static char *smollm3_strip(const char *s)
{
    static const char *const marks[] = { "/no_think", "/think", "/system_override" };
    char *t = strdup(s);
    if (t == NULL) return NULL;
    for (size_t k = 0; k < 3; k++)
        for (char *p; (p = strstr(t, marks[k])) != NULL;)
            memmove(p, p + strlen(marks[k]), strlen(p + strlen(marks[k])) + 1);
    size_t n = strlen(t);
    while (n > 0 && is_ws(t[n - 1])) t[--n] = 0;
    return t;
}

static int render_smollm3(const llm_chat_msg *m, size_t n, const llm_chat_tools *t, const llm_chat_vars *v, int gen,
                          llm_chat_out *o)
{
    const char *sys = !strcmp(m[0].role, "system") ? m[0].content : NULL;
    int think = !(v != NULL && v->no_think);
    if (sys != NULL && strstr(sys, "/no_think")) think = 0;
    else if (sys != NULL && strstr(sys, "/think")) think = 1;
    char *custom = sys ? smollm3_strip(sys) : NULL;
    if (sys != NULL && custom == NULL) return -1;
    int rc = sp(o, "<|im_start|>") | tx(o, "system\n");
    if (sys != NULL && strstr(sys, "/system_override")) {
        rc |= tx(o, custom);
    } else {
        rc |= tx(o, "## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: ");
        rc |= tx(o, v && v->date_dmy ? v->date_dmy : "") | tx(o, "\nReasoning Mode: ");
        rc |= tx(o, think ? "/think" : "/no_think") | tx(o, "\n\n## Custom Instructions\n\n");
        if (custom != NULL && custom[0])
            rc |= tx(o, custom) | tx(o, "\n\n");
        else if (think)
            rc |= tx(o, SMOLLM3_THINK) | sp(o, "<think>") | tx(o, " Thought section ") | sp(o, "</think>") |
                  tx(o, SMOLLM3_THINK2);
        else
            rc |= tx(o, "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n");
        rc |= tx(o, "## Tools\n\n### XML Tools\n\n");
        if (t != NULL)
            rc |= tx(o, "You may call one or more functions to assist with the user query.\n\nYou are provided with "
                        "function signatures within <tools></tools> XML tags:\n\n<tools>\n") | tx(o, t->defs) |
                  tx(o, "</tools>\n\nFor each function call, return a json object with function name and arguments "
                        "within ") | sp(o, "<tool_call>") | sp(o, "</tool_call>") | tx(o, " XML tags.");
        else
            rc |= tx(o, "None");
        rc |= tx(o, "\n\n### Python Tools\n\nNone\n\n");
    }
    free(custom);
    rc |= sp(o, "<|im_end|>") | tx(o, "\n");
    for (size_t i = 0; i < n && !rc; i++) {
        int answer = !strcmp(m[i].role, "assistant");
        if (!answer && strcmp(m[i].role, "user") != 0 && !is_tool_role(m[i].role))
            continue; /* system messages are the system turn's; the template renders no other role */
        rc |= sp(o, "<|im_start|>") | tx(o, answer ? "assistant\n" : "user\n");
        if (answer && !think)
            rc |= sp(o, "<think>") | tx(o, "\n\n") | sp(o, "</think>") | tx(o, "\n");
        const char *c = m[i].content;
        while (answer && *c == '\n') c++; /* content.lstrip("\n") */
        rc |= tx(o, c);
        for (size_t k = 0; answer && k < m[i].n_calls; k++)
            rc |= tx(o, "\n") | sp(o, "<tool_call>") | tx(o, "\n") | call_json(o, &m[i].calls[k], "arguments") |
                  tx(o, "\n") | sp(o, "</tool_call>");
        rc |= sp(o, "<|im_end|>") | tx(o, "\n");
    }
    if (gen && !rc) {
        rc |= sp(o, "<|im_start|>") | tx(o, "assistant\n");
        if (!think)
            rc |= sp(o, "<think>") | tx(o, "\n\n") | sp(o, "</think>") | tx(o, "\n");
        if (t != NULL && t->open_call)
            rc |= sp(o, "<tool_call>") | tx(o, "\n");
    }
    return rc;
}

/* Mistral's function calling (v3, v3-tekken, v7; see chat_template.h), after the templates of Mistral 7B v0.3,
 * Nemo and Small 3.1. The last 9 characters of a call's id are the model's (the v3 templates take ids of
 * exactly 9, Small 3.1's the last 9 of longer ones, as vLLM does). */
static const char MISTRAL_PARALLEL_PROMPT[] =
    "You are a helpful assistant that can call tools. If you call one or more tools, format them in a single JSON "
    "array or objects, where each object is a tool call, not as separate objects outside of an array or multiple "
    "arrays. Use the format [{\"name\": tool call name, \"arguments\": tool call arguments}, additional tool calls] "
    "if you call more than one tool. If you call tools, do not attempt to interpret them or otherwise provide a "
    "response until you receive a tool call result that you can interpret for the user.";

static const char *mistral_id(const char *id, size_t i, llm_err *err)
{
    size_t len = id ? strlen(id) : 0;
    if (len < 9) {
        llm_seterr(err, "message %zu: Mistral's format needs each tool call's id (9 or more characters; the model "
                   "sees the last 9)", i);
        return NULL;
    }
    return id + len - 9;
}

static int render_mistral_tools(const llm_chat_msg *m, size_t n, llm_chat_format f, const llm_chat_tools *t,
                                llm_chat_out *o, llm_err *err)
{
    int v3 = f == LLM_CHAT_MISTRAL_V3, v7 = f == LLM_CHAT_MISTRAL_V7;
    const char *gap = f == LLM_CHAT_MISTRAL_V3_TEKKEN ? "" : " "; /* "[AVAILABLE_TOOLS] [", "[TOOL_CALLS] [" */
    const char *sys = NULL;
    size_t i0 = 0, last_user = n, k = 0;
    if (!strcmp(m[0].role, "system")) { sys = m[0].content; i0 = 1; }
    for (size_t i = i0; i < n; i++) { /* tool results and calls aside, user and assistant alternate */
        if (!strcmp(m[i].role, "user")) last_user = i;
        if (is_tool_role(m[i].role) || (m[i].n_calls > 0 && !strcmp(m[i].role, "assistant"))) continue;
        const char *want = k++ % 2 == 0 ? "user" : "assistant";
        if (strcmp(m[i].role, want) != 0) {
            llm_seterr(err, "%s chat format: message %zu has role '%s', expected '%s' (after an optional system "
                       "message user and assistant alternate, with tool calls and results between them)",
                       llm_chat_format_name(f), i, m[i].role, want);
            return -2;
        }
    }
    if (last_user == n) {
        llm_seterr(err, "%s chat format needs a user message", llm_chat_format_name(f));
        return -2;
    }
    int rc = sp(o, "<s>");
    if (v7 && (t != NULL || sys != NULL)) { /* Small 3.1: the parallel-calls instruction before the system text */
        rc |= sp(o, "[SYSTEM_PROMPT]");
        if (t != NULL) rc |= tx(o, MISTRAL_PARALLEL_PROMPT) | tx(o, sys ? "\n\n" : "");
        rc |= tx(o, sys ? sys : "") | sp(o, "[/SYSTEM_PROMPT]");
    }
    for (size_t i = i0; i < n && !rc; i++) {
        if (!strcmp(m[i].role, "user")) {
            if (t != NULL && i == last_user)
                rc |= sp(o, "[AVAILABLE_TOOLS]") | tx(o, gap) | tx(o, "[") | tx(o, t->defs) | tx(o, "]") |
                      sp(o, "[/AVAILABLE_TOOLS]");
            rc |= sp(o, "[INST]") | tx(o, v3 ? " " : "");
            if (!v7 && sys != NULL && i == last_user) /* the templates' system text, in the last user turn */
                rc |= tx(o, sys) | tx(o, "\n\n");
            rc |= tx(o, m[i].content) | sp(o, "[/INST]");
        } else if (m[i].n_calls > 0) { /* the calls are the whole answer */
            rc |= sp(o, "[TOOL_CALLS]") | tx(o, gap) | tx(o, "[");
            for (size_t c = 0; c < m[i].n_calls && !rc; c++) {
                const char *id = mistral_id(m[i].calls[c].id, i, err);
                if (id == NULL) return -2;
                rc |= tx(o, c ? ", " : "") | call_json_id(o, &m[i].calls[c], "arguments", id);
            }
            rc |= tx(o, "]") | sp(o, "</s>");
        } else if (is_tool_role(m[i].role)) { /* the result as it came, not quoted (the templates' content|string) */
            const char *id = mistral_id(m[i].call_id, i, err);
            if (id == NULL) return -2;
            rc |= sp(o, "[TOOL_RESULTS]") | tx(o, gap) | tx(o, "{\"content\": ") | tx(o, m[i].content);
            rc |= tx(o, ", \"call_id\": \"") | tx(o, id) | tx(o, "\"}") | sp(o, "[/TOOL_RESULTS]");
        } else {
            rc |= v3 ? tx(o, " ") | tx_trim(o, m[i].content) : tx(o, m[i].content);
            rc |= sp(o, "</s>");
        }
    }
    if (t != NULL && t->open_call && !rc)
        rc |= sp(o, "[TOOL_CALLS]");
    return rc;
}

static int is_mistral_tools(llm_chat_format f)
{
    return f == LLM_CHAT_MISTRAL_V3 || f == LLM_CHAT_MISTRAL_V3_TEKKEN || f == LLM_CHAT_MISTRAL_V7;
}

int llm_chat_render(llm_chat_format f, const llm_chat_msg *msgs, size_t n, int gen,
                    llm_chat_out *out, llm_err *err)
{
    return llm_chat_render_tools(f, msgs, n, NULL, gen, out, err);
}

int llm_chat_render_tools(llm_chat_format f, const llm_chat_msg *msgs, size_t n, const llm_chat_tools *tools,
                          int gen, llm_chat_out *out, llm_err *err)
{
    return llm_chat_render_ex(f, msgs, n, tools, NULL, gen, out, err);
}

int llm_chat_render_ex(llm_chat_format f, const llm_chat_msg *msgs, size_t n, const llm_chat_tools *tools,
                       const llm_chat_vars *vars, int gen, llm_chat_out *out, llm_err *err)
{
    memset(out, 0, sizeof *out);
    if (n == 0) { llm_seterr(err, "messages must not be empty"); return -1; }
    for (size_t i = 0; i < n; i++) {
        if (!role_ok(msgs[i].role)) { llm_seterr(err, "message %zu has an empty or invalid role", i); return -1; }
        if (!msgs[i].content) { llm_seterr(err, "message %zu has no content", i); return -1; }
    }
    int calls = 0, results = 0;
    for (size_t i = 0; i < n; i++) calls |= msgs[i].n_calls > 0, results |= is_tool_role(msgs[i].role);
    if ((tools != NULL || calls) && f != LLM_CHAT_LLAMA3 && f != LLM_CHAT_CHATML && f != LLM_CHAT_SMOLLM3 &&
        f != LLM_CHAT_GRANITE && f != LLM_CHAT_EXAONE4 && f != LLM_CHAT_QWEN3_CODER && f != LLM_CHAT_SEED_OSS &&
        f != LLM_CHAT_GLM45 && f != LLM_CHAT_GPT_OSS && !is_mistral_tools(f)) {
        llm_seterr(err, "function calling needs the Llama 3, ChatML, SmolLM3, Granite, EXAONE 4, Qwen3-Coder, "
                   "Seed-OSS, GLM-4.5, gpt-oss or Mistral (v3, v3-tekken, v7) chat format; this model's is %s",
                   llm_chat_format_name(f));
        return -1;
    }
    int rc;
    switch (f) {
    case LLM_CHAT_LLAMA3: rc = render_llama3(msgs, n, tools, gen, out, err); break;
    case LLM_CHAT_CHATML: rc = render_chatml(msgs, n, tools, gen, out); break;
    case LLM_CHAT_SMOLLM3: rc = render_smollm3(msgs, n, tools, vars, gen, out); break;
    case LLM_CHAT_LLAMA2: rc = render_llama2(msgs, n, out, err); break;
    case LLM_CHAT_GEMMA: rc = render_gemma(msgs, n, gen, out, err); break;
    case LLM_CHAT_PHI3:
    case LLM_CHAT_PHI4:
    case LLM_CHAT_PHI4_MINI: rc = render_phi(msgs, n, gen, f, out, err); break;
    case LLM_CHAT_GRANITE: rc = render_granite(msgs, n, tools, gen, out); break;
    case LLM_CHAT_DEEPSEEK3:
    case LLM_CHAT_DEEPSEEK_R1: rc = render_deepseek(msgs, n, gen, f, out, err); break;
    case LLM_CHAT_EXAONE3:
    case LLM_CHAT_EXAONE_DEEP: rc = render_exaone3(msgs, n, gen, f == LLM_CHAT_EXAONE_DEEP, out, err); break;
    case LLM_CHAT_EXAONE4: rc = render_exaone4(msgs, n, tools, vars, gen, out, err); break;
    case LLM_CHAT_QWEN3_CODER: rc = render_qwen3_coder(msgs, n, tools, gen, out); break;
    case LLM_CHAT_ERNIE: rc = render_ernie(msgs, n, gen, out, err); break;
    case LLM_CHAT_TULU: rc = render_tulu(msgs, n, vars, gen, out, err); break;
    case LLM_CHAT_SEED_OSS: rc = render_seed(msgs, n, tools, vars, gen, out); break;
    case LLM_CHAT_GLM45: rc = render_glm45(msgs, n, tools, vars, gen, out, err); break;
    case LLM_CHAT_GPT_OSS: rc = render_gpt_oss(msgs, n, tools, vars, gen, out, err); break;
    case LLM_CHAT_MISTRAL_V1:
    case LLM_CHAT_MISTRAL_V3:
    case LLM_CHAT_MISTRAL_V3_TEKKEN:
    case LLM_CHAT_MISTRAL_V7:
        rc = is_mistral_tools(f) && (tools != NULL || calls || results)
                 ? render_mistral_tools(msgs, n, f, tools, out, err)
                 : render_mistral(msgs, n, f, out, err);
        break;
    default: llm_seterr(err, "unknown chat format %d", (int)f); return -1;
    }
    if (rc) {
        if (rc != -2) llm_seterr(err, "out of memory rendering the chat template");
        llm_chat_out_free(out);
        return -1;
    }
    return 0;
}

char *llm_chat_default_system(const char *tmpl)
{
    static const char open[] = "<|im_start|>system\\n"; /* as the Jinja source spells it: a backslash, an n */
    for (const char *p = tmpl ? strstr(tmpl, open) : NULL; p != NULL; p = strstr(p + 1, open)) {
        const char *a = p + sizeof open - 1, *b = strstr(a, "<|im_end|>");
        if (b == NULL || b == a) continue;
        size_t n = (size_t)(b - a);
        if (memchr(a, '\'', n) || memchr(a, '"', n) || memchr(a, '{', n) || memchr(a, '\\', n)) continue;
        char *s = malloc(n + 1); /* a literal: no quote (no "' + messages..."), no Jinja, no escapes */
        if (s == NULL) return NULL;
        memcpy(s, a, n);
        s[n] = 0;
        return s;
    }
    return NULL;
}

int llm_chat_no_think(llm_chat_out *out)
{
    return sp(out, "<think>") | tx(out, "\n\n") | sp(out, "</think>") | tx(out, "\n\n");
}

char *llm_chat_out_join(const llm_chat_out *out)
{
    size_t len = 0;
    for (size_t i = 0; i < out->n; i++) len += out->seg[i].len;
    char *s = malloc(len + 1), *p = s;
    if (!s) return NULL;
    for (size_t i = 0; i < out->n; i++) { memcpy(p, out->seg[i].text, out->seg[i].len); p += out->seg[i].len; }
    *p = 0;
    return s;
}
