/* OpenAI-style request bodies -> one validated request struct, and the JSON
 * shapes of responses. Plain C + cJSON (no nginx headers), so it is unit-tested
 * on its own. */
#ifndef LLM_API_H
#define LLM_API_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "chat_template.h"
#include "stop_strings.h"

#define LLM_API_MAX_N        8
#define LLM_API_MAX_CHOICES  64    /* completions: prompts x n in one request */
#define LLM_API_MAX_LOGPROBS 20
#define LLM_API_MAX_BIAS     1024  /* logit_bias entries (OpenAI allows 300) */
#define LLM_API_BIAS_LIMIT   100.0 /* |bias| at most this, as OpenAI */
#define LLM_API_MAX_PRIORITY 1000000
#define LLM_API_MAX_STOP_IDS 8     /* stop_token_ids (beside the model's end-of-generation ids) */

typedef enum {
    LLM_API_COMPLETIONS = 1, /* POST /v1/completions */
    LLM_API_CHAT        = 2, /* POST /v1/chat/completions */
    LLM_API_TOKENIZE    = 3, /* POST /tokenize */
    LLM_API_DETOKENIZE  = 4, /* POST /detokenize */
    LLM_API_EMBEDDINGS  = 5, /* POST /v1/embeddings */
    LLM_API_RESPONSES   = 6, /* POST /v1/responses: parsed as the chat body it means (llm_responses.h); the
                              * request's kind is then LLM_API_CHAT, its api LLM_API_RESPONSES */
    LLM_API_MESSAGES    = 7, /* POST /v1/messages (Anthropic's): the same way (llm_messages.h) */
    LLM_API_RERANK      = 8, /* POST /v1/rerank: a query and documents (batch[], one a document) */
    LLM_API_OLLAMA_CHAT = 9, /* POST /api/chat (Ollama's): parsed as the chat body it means (llm_ollama.h) */
    LLM_API_OLLAMA_GENERATE = 10, /* POST /api/generate: as a chat body, or (raw, suffix) a completions one */
    LLM_API_OLLAMA_EMBED = 11, /* POST /api/embed: as an embeddings body */
    LLM_API_OLLAMA_EMBEDDINGS = 12, /* POST /api/embeddings (Ollama's older one): the same, one prompt */
    LLM_API_TGI          = 13, /* POST / (TGI's): parsed as the completions body it means (llm_tgi.h); streamed
                                * when the body says "stream": true, else a list of one answer */
    LLM_API_TGI_GENERATE = 14, /* POST /generate: the same, one answer */
    LLM_API_TGI_STREAM   = 15, /* POST /generate_stream: the same, streamed */
    LLM_API_LCPP         = 16, /* POST /completion (llama.cpp server's own): as the completions body it means
                                * (llm_lcpp.h) */
    LLM_API_LCPP_INFILL  = 17, /* POST /infill (its code completion): the same, the prompt made of the files,
                                * prefix, suffix and middle (the request's api is then LLM_API_LCPP, infill 1) */
} llm_api_kind;

#define LLM_API_IS_TGI(api) ((api) >= LLM_API_TGI && (api) <= LLM_API_TGI_STREAM)
/* APIs whose answers go token by token, each with its id and logprob (TGI's, llama.cpp's /completion) */
#define LLM_API_TOKENWISE(api) (LLM_API_IS_TGI(api) || (api) == LLM_API_LCPP || (api) == LLM_API_LCPP_INFILL)

#define LLM_API_MAX_INPUTS 2048 /* embeddings: inputs in one request (OpenAI's limit) */
#define LLM_API_MAX_DOCUMENTS 1024 /* rerank: documents in one request */

/* A 4xx/5xx answer: HTTP status + OpenAI error object. */
typedef struct {
    int  status;
    char message[512];
    char type[48];    /* invalid_request_error, not_found_error, ... */
    char param[48];   /* offending field, "" if none */
    char code[48];    /* machine-readable code, "" if none */
} llm_api_err;

void llm_api_seterr(llm_api_err *e, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

typedef struct {
    llm_api_kind kind;
    cJSON       *root;        /* owns every string below */
    int          ollama_load; /* /api/generate without a prompt: Ollama's "load the model" (nothing parsed) */
    int          api;         /* LLM_API_RESPONSES, _MESSAGES or _OLLAMA_*: a body of that API, parsed as the chat
                               * body it means (root), body the request's own (the Responses API's response
                               * echoes its fields); 0 for the others */
    cJSON       *body;
    const char  *model;       /* NULL if absent */

    /* prompt: completions (text or ids), chat (messages), tokenize (text or messages), embeddings (input: the
     * same shapes as a completion's prompt) */
    const char  *prompt;      /* NULL if ids or messages */
    size_t       prompt_len;
    int32_t     *ids;         /* malloc'd; completions with a token-id prompt, detokenize */
    size_t       n_ids;
    /* completions with a list of prompts (OpenAI's batched form): n_prompts > 1 and prompt / ids unset;
     * each one a text (batch[i], batch_len[i]) or token ids (batch_ids[i], batch_n_ids[i]) */
    int          n_prompts;   /* 1 for one prompt */
    const char **batch;       /* malloc'd, or NULL */
    size_t      *batch_len;
    int32_t    **batch_ids;   /* malloc'd, each malloc'd; or NULL */
    size_t      *batch_n_ids;
    llm_chat_msg *msgs;       /* malloc'd */
    size_t       n_msgs;
    int          add_special; /* tokenize: add BOS (default 1; llama.cpp's {"content"} shape: 0) */
    int          with_pieces; /* tokenize (llama.cpp's with_pieces): each token as {"id", "piece"} */
    int          add_generation_prompt; /* chat / tokenize with messages (default 1) */

    /* generation */
    int          max_tokens;  /* 0: not given */
    int          max_tokens_all; /* Ollama's num_predict -1 / -2: as many as the server allows (llm_max_tokens),
                                  * up to the context */
    double       temperature; /* default 1 */
    double       top_p;       /* default 1 */
    int          top_k;       /* 0 = off */
    double       min_p;
    double       typical_p;   /* locally typical sampling (llama.cpp's, TGI's, Ollama's typical_p): 1 = off */
    double       presence_penalty, frequency_penalty, repetition_penalty;
    int          has_seed;
    uint64_t     seed;
    int          n;           /* 1..8 */
    const char  *stop[LLM_STOP_MAX];
    size_t       stop_len[LLM_STOP_MAX];
    int          n_stop;
    int          logprobs;    /* 0 off, 1 on */
    int          top_logprobs; /* 0..20 */
    int          stream;
    int          include_usage;
    int          ignore_eos;
    int          json;        /* response_format {"type": "json_object"}: JSON mode */
    char        *schema;      /* response_format {"type": "json_schema"} or vLLM's guided_json: the schema,
                               * checked by compiling it (json_schema.h) and printed compactly; or the
                               * calls' schema of tool_choice required / named (llm_tools.h); cJSON_free */
    size_t       schema_len;
    int          regex;       /* schema is instead a regular expression the whole output matches (vLLM's
                               * guided_regex, guided_choice as the alternation of its strings) */
    int          grammar;     /* schema is instead a GBNF grammar the whole output is a text of (llama.cpp's
                               * grammar, vLLM's guided_grammar and structured_outputs.grammar; grammar.h) */
    /* function calling (chat, llm_tools.h) */
    int          chat_format; /* the model's chat format (llm_chat_format), given to llm_api_parse_chat: the
                               * format tools and tool calls are written in */
    int          parallel_calls; /* parallel_tool_calls (default 1): more than one call an answer (ChatML) */
    int          enable_thinking; /* chat_template_kwargs.enable_thinking: -1 not given (the template's default:
                                   * Qwen 3 thinks, EXAONE 4 does not), 0, 1 (llm_chat_thinks) */
    int          thinking_budget; /* chat_template_kwargs.thinking_budget (Seed-OSS's): -1 not given, 0 (as
                                   * enable_thinking false), or a budget in tokens */
    const char  *reasoning_effort; /* "low", "medium" or "high" (OpenAI's reasoning_effort, or
                                    * chat_template_kwargs.reasoning_effort: gpt-oss's template reads it), or NULL */
    int          think;       /* set by the module: split the answer's <think> part off (the model reasons in
                               * <think> tags and llm_reasoning is on; llm_reasoning.h) */
    int          tool_mode;   /* LLM_TOOLS_*: OFF without tools or with tool_choice "none" */
    const cJSON *tools;       /* the request's tools (in root), when tool_mode is not OFF */
    char        *tool_defs;   /* the tools as the chat format's prompt lists them; malloc'd */
    int          min_tokens;  /* vLLM's: no end-of-generation or stop token id before this many */
    int32_t      stop_token_ids[LLM_API_MAX_STOP_IDS]; /* vLLM's: token ids that end the generation */
    int          n_stop_token_ids;
    int          has_priority;
    int          priority;    /* lower first (vLLM's sense); llm_priority is the lowest a request gets */
    int          echo;        /* completions: the prompt comes back before the completion (with logprobs: its
                               * tokens' logprobs too) */
    int          echo_only;   /* max_tokens 0 with echo: the prompt (and its logprobs) and nothing generated */
    const char  *user;
    const char  *cache_key;   /* prompt_cache_key (OpenAI's): with replicas, combined with the prompt's prefix to
                               * pick one (llm_balance prefix); NULL: none */
    /* completions: fill-in-the-middle (a code model completes between prompt and suffix) */
    const char  *suffix;      /* NULL: none (an empty suffix is none) */
    size_t       suffix_len;
    /* embeddings */
    int          base64;      /* encoding_format "base64": each vector as base64 of little-endian float32 */
    int          dimensions;  /* 0, or the leading dimensions kept (then normalised again; Matryoshka models) */
    int          truncate;    /* embeddings, rerank ("truncate", as TEI): an input over the context is cut to it
                               * (its closing EOS / separator kept) instead of a 400 */
    /* rerank (Jina's, Cohere's, vLLM's shape): the query, the documents in batch[] (n_prompts of them) */
    const char  *query;
    const char  *instruction; /* Qwen3-Reranker's <Instruct> (NULL: its default) */
    int          top_n;       /* 0: all */
    int          return_documents; /* default 1 */
    /* TGI's API (llm_tgi.h) */
    int          keep_last;   /* parameters.truncate: only the prompt's last N tokens are read (0: all) */
    int          tgi_details; /* parameters.details: the answer's details (finish reason, tokens, seed) */
    int          tgi_full_text; /* parameters.return_full_text: generated_text starts with the prompt */
    /* llama.cpp's /completion (llm_lcpp.h) */
    int          lcpp_tokens; /* return_tokens: the answer lists the generated ids */
    int          penalty_last_n; /* repeat_last_n: the penalties' window, N tokens (0: the whole context) */
    int          n_indent;    /* a line after the first indented less than this ends the answer (0: off) */
    int          t_max_predict_ms; /* once a newline is out, the answer ends after this long since its first
                                    * token (0: off) */
    const cJSON *response_fields; /* the answer's fields kept ("a/b": b of a, under that name), or NULL: all */
    int          infill;      /* /infill: the prompt is made of the files, prefix, suffix and middle (prompt) */
    const char  *infill_prefix, *infill_suffix;
    size_t       infill_prefix_len, infill_suffix_len;
    const cJSON *infill_extra; /* input_extra: [{"filename", "text"}, ...] (in body), or NULL */
    /* logit_bias: {"<token id>": bias}, in the body's order (a repeated id: the last one counts) */
    int32_t     *bias_ids;    /* malloc'd; ids not yet checked against the vocabulary */
    float       *bias;        /* malloc'd */
    int          n_bias;
} llm_api_req;

/* Prompt i of a completions request as a one-prompt view of r (for encoding): prompt / ids set, no batch. */
void llm_api_prompt_at(const llm_api_req *r, int i, llm_api_req *one);

/* o's member name, or NULL when absent or null (the parser's rule: null means absent). */
const cJSON *llm_api_field(const cJSON *o, const char *name);

/* The Responses API's previous_response_id: the conversation up to that response as input items (a new cJSON
 * array), or NULL with e set. The module gives one when it keeps responses (llm_responses_store). */
typedef cJSON *(*llm_api_history_fn)(void *data, const char *id, llm_api_err *e);

/* Parses and validates a body. Unknown fields are ignored; null means absent.
 * Returns 0, or -1 with e filled (status 400). Free with llm_api_req_free in both cases. */
int  llm_api_parse(llm_api_kind kind, const char *body, size_t len, llm_api_req *r, llm_api_err *e);
/* The same for a model whose chat format (llm_chat_format) is chat_format: tools and the tool calls of
 * the history are written in it (llm_api_parse: Llama 3's). */
int  llm_api_parse_chat(llm_api_kind kind, const char *body, size_t len, int chat_format, llm_api_req *r,
                        llm_api_err *e);
/* The same, a Responses API body's previous_response_id resolved by history(data, ...) (NULL: refused). */
int  llm_api_parse_with_history(llm_api_kind kind, const char *body, size_t len, int chat_format,
                                llm_api_history_fn history, void *data, llm_api_req *r, llm_api_err *e);
void llm_api_req_free(llm_api_req *r);

/* {"error":{"message","type","param","code"}} as a malloc'd string. */
char *llm_api_error_json(const llm_api_err *e);

#endif
