/* ngx_http_llm_module: OpenAI-compatible text generation served from NGINX.
 * The workers do text (JSON, chat templates, tokenization, detokenization,
 * stop strings, SSE framing); the engine process does tokens, reached through
 * the shared-memory client (shm/llm_client.h) whose wake-up fd sits in the
 * worker's event loop. Nothing here blocks a worker. */
#ifndef NGX_HTTP_LLM_MODULE_H
#define NGX_HTTP_LLM_MODULE_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "tokenizer.h"
#include "llm_client.h"
#include "llm_api.h"

/* What a location serves (llm_api <what>;). */
enum {
    NGX_LLM_OFF = 0,
    NGX_LLM_AUTO,             /* dispatch on the URI's tail */
    NGX_LLM_COMPLETIONS,
    NGX_LLM_CHAT,
    NGX_LLM_MODELS,
    NGX_LLM_TOKENIZE,
    NGX_LLM_DETOKENIZE,
    NGX_LLM_HEALTH,
    NGX_LLM_METRICS,
    NGX_LLM_EMBEDDINGS,
    NGX_LLM_RESPONSES,        /* OpenAI's Responses API (POST /v1/responses) */
    NGX_LLM_MESSAGES,         /* Anthropic's Messages API (POST /v1/messages) */
    NGX_LLM_COUNT_TOKENS,     /* its POST /v1/messages/count_tokens */
    NGX_LLM_RESPONSE_ITEM,    /* GET / DELETE /v1/responses/<id>: a stored response (llm_responses_store) */
    NGX_LLM_RESPONSE_INPUTS,  /* GET /v1/responses/<id>/input_items */
    NGX_LLM_RERANK,           /* POST /v1/rerank (also /rerank, /v2/rerank) */
    NGX_LLM_OLLAMA_CHAT,      /* Ollama's API: POST /api/chat */
    NGX_LLM_OLLAMA_GENERATE,  /* POST /api/generate */
    NGX_LLM_OLLAMA_EMBED,     /* POST /api/embed */
    NGX_LLM_OLLAMA_EMBEDDINGS, /* POST /api/embeddings (the older one) */
    NGX_LLM_OLLAMA_TAGS,      /* GET /api/tags: the models */
    NGX_LLM_OLLAMA_PS,        /* GET /api/ps: the models loaded (the served one, while the engine is up) */
    NGX_LLM_OLLAMA_SHOW,      /* POST /api/show: one model's details and capabilities */
    NGX_LLM_OLLAMA_VERSION,   /* GET /api/version */
    NGX_LLM_ROOT,             /* GET / (auto only): "ngx_llm is running", the liveness check Ollama's CLI makes */
    NGX_LLM_TGI,              /* TGI's API: POST / (streamed when the body says so) */
    NGX_LLM_TGI_GENERATE,     /* POST /generate */
    NGX_LLM_TGI_STREAM,       /* POST /generate_stream */
    NGX_LLM_TGI_INFO,         /* GET /info: the model and the server's limits */
    NGX_LLM_LCPP_COMPLETION,  /* llama.cpp server's own POST /completion (and /completions) */
    NGX_LLM_LCPP_PROPS,       /* its GET /props: the defaults, the slots, the model file and chat template */
    NGX_LLM_LCPP_INFILL,      /* its POST /infill: code completion between a prefix and a suffix */
    NGX_LLM_N_HANDLERS
};

/* A request waiting on the engine: on its engine's active queue, stepped at each wake-up (and by the
 * one-second check) by its own step function, which returns 1 while it goes on (it is put back on the queue)
 * and 0 once it has finalized the request. */
typedef struct {
    ngx_queue_t queue;
    int       (*step)(void *ctx);
    void       *ctx;
    unsigned    queued:1;
} ngx_http_llm_pending_t;

/* One engine segment a worker talks to (per worker after fork). */
typedef struct {
    ngx_str_t         name;
    llm_client       *client;   /* created in init_process */
    ngx_connection_t *conn;     /* wake-up fd in the event loop */
    ngx_event_t       check;    /* liveness timer */
    ngx_queue_t       active;   /* ngx_http_llm_pending_t of the requests waiting on the engine */
    ngx_log_t        *log;
} ngx_http_llm_engine_t;

/* A tokenizer loaded at configuration time (shared by locations naming the same path). */
typedef struct {
    ngx_str_t      path;
    llm_tokenizer *tok;
    llm_chat_format chat;       /* detected from the tokenizer's metadata */
    unsigned       think:1;     /* its chat template writes <think> (Qwen 3): answers open with reasoning */
    const char    *think_open, *think_close; /* the tags: <think> </think>, Seed-OSS's <seed:think> </seed:think>,
                                              * EXAONE Deep's <thought> </thought> */
    int32_t        think_start, think_end; /* the tags as single tokens, or -1 */
    /* where a JSON answer's mask starts: the thinking's opening id, then the ids that close it (</think>'s one;
     * gpt-oss's <|channel|> final <|message|>, the final channel's header); n_reason_end 0: the mask holds from
     * the first token */
    int32_t        reason_start, reason_end[LLM_SHM_MAX_REASON_END];
    int            n_reason_end;
    const char    *think_after, *think_direct; /* gpt-oss's harmony: the final channel's headers (llm_reasoning.h) */
    const char    *think_preamble; /* ... and a preamble's (a commentary message to the user before a call) */
    unsigned       harmony:1;   /* gpt-oss's format: its <|channel|> <|message|> <|end|> <|start|> kept in answers */
    const char    *bos_text, *eos_text; /* the BOS and EOS tokens' texts (Tulu's template writes them), or NULL */
    const char    *default_system; /* ChatML: the system message its template writes when none is given, or NULL */
    unsigned       granite_system:1; /* a Granite 3.1+ template: its own dated system turn when none is given */
    /* what Ollama's /api/tags and /api/show report of a GGUF (ngx_http_llm_ollama_facts; "" when unknown) */
    char           family[32];      /* general.architecture */
    char           param_size[16];  /* the tensors' elements, as "3.2B", "135M", "260K" */
    char           quant[16];       /* general.file_type's name: "Q4_K_M", "BF16", ... */
    const char    *format;          /* "gguf", "safetensors" (a directory) or "" */
    double         file_size;       /* the file's bytes (0: a directory) */
} ngx_http_llm_tok_t;

/* Module counters in an nginx shared zone, summed over workers, for /metrics. */
typedef struct {
    ngx_atomic_t requests[NGX_LLM_N_HANDLERS];
    ngx_atomic_t status_2xx, status_400, status_401, status_404, status_405, status_413, status_422, status_429,
                 status_503, status_504, status_5xx;
    ngx_atomic_t streams, client_aborts, prompt_tokens, completion_tokens;
} ngx_http_llm_counters_t;

typedef struct {
    ngx_array_t            engines;  /* ngx_http_llm_engine_t */
    ngx_array_t            route_sets; /* llm_models lists, resolved at postconfiguration (ngx_http_llm_route.c) */
    ngx_array_t            toks;     /* ngx_http_llm_tok_t */
    ngx_shm_zone_t        *zone;
    ngx_http_llm_counters_t *counters; /* in the zone, or NULL before init */
    ngx_shm_zone_t        *store;    /* llm_responses_store: the zone of stored responses, or NULL (off) */
    ngx_shm_zone_t        *prefixes; /* llm_balance prefix: which replica last took each prompt block, or NULL */
    uint64_t              *prefix_table; /* in that zone, NGX_LLM_PREFIX_SLOTS entries */
    time_t                 started;
} ngx_http_llm_main_conf_t;

typedef struct ngx_http_llm_loc_conf_s ngx_http_llm_loc_conf_t;

/* llm_engine NAME ...: replicas of one model at most (ngx_http_llm_replicas.c). */
#define NGX_LLM_MAX_REPLICAS 16
/* llm_balance: the replica with the fewest requests in flight, or the least work in tokens
 * (NGX_LLM_PREFIX_PER_REQUEST a request in flight, plus its prompt tokens pending, less what of the prompt it
 * took before) */
#define NGX_LLM_BALANCE_LEAST  0
#define NGX_LLM_BALANCE_PREFIX 1
#define NGX_LLM_PREFIX_SLOTS   65536  /* prompt blocks remembered (512 KB of shared memory) */
#define NGX_LLM_PREFIX_BLOCK   32     /* tokens a block */
#define NGX_LLM_PREFIX_PER_REQUEST 64

/* llm_models: a named location whose model requests may name. */
#define NGX_LLM_MAX_ROUTES 64
typedef struct {
    ngx_str_t                name;  /* "@qwen" */
    ngx_http_llm_loc_conf_t *lcf;   /* its configuration, found at postconfiguration */
} ngx_http_llm_route_t;

struct ngx_http_llm_loc_conf_s {
    ngx_uint_t             handler;
    ngx_array_t           *engine_names; /* llm_engine NAME ... (ngx_str_t); NULL: "default" */
    ngx_uint_t             replicas[NGX_LLM_MAX_REPLICAS]; /* their indexes in the main conf's engines */
    ngx_uint_t             n_replicas;
    ngx_uint_t             balance;     /* llm_balance: NGX_LLM_BALANCE_* */
    uint64_t               prefix_seed; /* where its prompts' block hashes start (llm_balance prefix) */
    ngx_uint_t             engine_idx;  /* the first's */
    ngx_str_t              model_path;
    ngx_http_llm_tok_t    *tok;
    ngx_str_t              model_name;
    ngx_array_t           *model_aliases; /* llm_model_alias: more names requests may give (ngx_str_t; "*": any) */
    ngx_int_t              default_max_tokens;
    ngx_int_t              max_tokens;
    ngx_msec_t             request_timeout;
    ngx_msec_t             queue_timeout;
    size_t                 max_body;
    ngx_uint_t             chat_format;  /* 0 = from the tokenizer */
    ngx_array_t           *api_keys;     /* llm_api_key: ngx_str_t; NULL = no check */
    ngx_int_t              priority;     /* llm_priority: requests' queue priority here, lower first */
    ngx_flag_t             reasoning;    /* llm_reasoning: split <think> off reasoning models' answers */
    ngx_array_t           *routes;       /* llm_models: ngx_http_llm_route_t; NULL = this location's model only */
};

extern ngx_module_t ngx_http_llm_module;

/* replies (ngx_http_llm_reply.c) */
ngx_int_t ngx_http_llm_send_json(ngx_http_request_t *r, ngx_uint_t status, const char *json, size_t len);
ngx_int_t ngx_http_llm_send_cjson(ngx_http_request_t *r, ngx_uint_t status, cJSON *obj); /* frees obj */
ngx_int_t ngx_http_llm_send_error(ngx_http_request_t *r, const llm_api_err *e);
ngx_int_t ngx_http_llm_error(ngx_http_request_t *r, int status, const char *param, const char *code,
                             const char *fmt, ...);
ngx_int_t ngx_http_llm_send_text(ngx_http_request_t *r, ngx_uint_t status, const char *ctype,
                                 u_char *data, size_t len);
void      ngx_http_llm_count_status(ngx_http_request_t *r, ngx_uint_t status);

/* API keys (ngx_http_llm_auth.c) */
char     *ngx_http_llm_api_key_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
/* NGX_OK when endpoint h may go on (no key asked, or the right one); else the 401 (or an error) sent. */
ngx_int_t ngx_http_llm_check_api_key(ngx_http_request_t *r, ngx_uint_t h);

/* The tokens a request's answer may have: its own max_tokens, llm_max_tokens when it asked for as many as allowed
 * (max_tokens_all), else llm_default_max_tokens (unset: 256, at most llm_max_tokens). */
static ngx_inline ngx_int_t ngx_http_llm_answer_tokens(const ngx_http_llm_loc_conf_t *lcf, const llm_api_req *q)
{
    if (q->max_tokens) return q->max_tokens;
    if (q->max_tokens_all) return lcf->max_tokens;
    return lcf->default_max_tokens != NGX_CONF_UNSET ? lcf->default_max_tokens : ngx_min(256, lcf->max_tokens);
}

/* module helpers (ngx_http_llm_module.c) */
/* The endpoint r is served by (NGX_LLM_*): the location's llm_api, or where its URI routes under auto. */
ngx_uint_t ngx_http_llm_endpoint(ngx_http_request_t *r);
ngx_http_llm_engine_t *ngx_http_llm_engine(ngx_http_request_t *r);
/* replicas (ngx_http_llm_replicas.c): llm_engine's directive; replica i of lcf; and the one a new request of r's
 * location goes to (llm_balance: the ready one with the fewest requests in flight, ties in turn, under prefix
 * in tokens of work, what each took of the prompt ids[0..n) before counted off; the first when none is ready),
 * which $llm_engine then names. ids may be NULL (no prompt: nothing counted off); cache_key (a request's
 * prompt_cache_key, or NULL) makes its prefixes its own: they count only for requests with the same key.
 * ngx_http_llm_lcf_engine above gives the first ready replica (the first when none is), for what one engine
 * answers (context length, health). ngx_http_llm_balance_conf makes the shared table llm_balance prefix keeps
 * (at the location's merge). */
char                  *ngx_http_llm_engine_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
ngx_int_t              ngx_http_llm_balance_conf(ngx_conf_t *cf, ngx_http_llm_loc_conf_t *lcf);
ngx_http_llm_engine_t *ngx_http_llm_replica(ngx_http_request_t *r, ngx_http_llm_loc_conf_t *lcf, ngx_uint_t i);
ngx_http_llm_engine_t *ngx_http_llm_pick_engine(ngx_http_request_t *r, const int32_t *ids, size_t n,
                                                const char *cache_key);

/* What a request of the module did, for its variables ($llm_engine, $llm_model, $llm_prompt_tokens,
 * $llm_completion_tokens, $llm_cached_tokens, $llm_ttft, $llm_finish_reason; ngx_http_llm_vars.c), read when they are (the access
 * log: after the response, also of a client that went away). The module's ctx slot holds it from the handler
 * on: first the endpoint until the body is in, then what generation or embedding fills in. */
typedef struct {
    ngx_uint_t             handler;
    ngx_http_llm_engine_t *eng;        /* the engine (replica) that took it, or NULL */
    const char            *model;      /* the model id answered with, or NULL */
    const char            *finish;     /* how it ended: the first choice's finish reason, or the error's code */
    uint32_t               prompt_tokens, completion_tokens, cached_tokens;
    ngx_msec_t             ttft;       /* ms from its submission to the engine to its first token */
    unsigned               started:1, has_ttft:1;
} ngx_http_llm_log_t;

ngx_http_llm_log_t *ngx_http_llm_log(ngx_http_request_t *r); /* r's, made on first use; NULL: out of memory */
ngx_int_t           ngx_http_llm_vars_preconf(ngx_conf_t *cf);
ngx_http_llm_engine_t *ngx_http_llm_lcf_engine(ngx_http_request_t *r, ngx_http_llm_loc_conf_t *lcf);
const char *ngx_http_llm_model_id(ngx_http_request_t *r, char *buf, size_t cap);
/* The model id a location serves: llm_model_name, else its file's name. */
const char *ngx_http_llm_lcf_model_id(ngx_http_llm_loc_conf_t *lcf, char *buf, size_t cap);
/* 2: name is lcf's model id or one of its llm_model_alias names; 1: lcf takes any name (alias "*"); else 0. */
int ngx_http_llm_model_names(ngx_http_llm_loc_conf_t *lcf, const u_char *name, size_t len);
/* 0 ok (the model id or an alias); else a status with e filled (unknown model -> 404). */
int ngx_http_llm_check_model(ngx_http_request_t *r, const char *model, llm_api_err *e);
/* Attach if needed; LLM_SHM_OK or an error code (e filled with 503). */
int ngx_http_llm_engine_ready(ngx_http_llm_engine_t *eng, llm_api_err *e);

/* several models behind one location: llm_models (ngx_http_llm_route.c) */
char     *ngx_http_llm_models_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
ngx_int_t ngx_http_llm_routes_resolve(ngx_conf_t *cf); /* at postconfiguration */
/* The configurations of the models r's location serves into out (NGX_LLM_MAX_ROUTES + 1): its own first, then
 * its llm_models' (none in a named location: a routed request goes no further); their number. */
ngx_uint_t ngx_http_llm_served(ngx_http_request_t *r, ngx_http_llm_loc_conf_t **out);
/* The one of those that serves model name (exact names and aliases first, then one with llm_model_alias *), or
 * NULL. */
ngx_http_llm_loc_conf_t *ngx_http_llm_find_model(ngx_http_request_t *r, const u_char *name, size_t len);
/* Once the body (of endpoint h) is in: NGX_DONE when it names a model of one of the location's llm_models, and
 * the request has been passed to that named location; else NGX_DECLINED (it is served here). */
ngx_int_t ngx_http_llm_route_body(ngx_http_request_t *r, ngx_uint_t h, const u_char *body, size_t len);

/* endpoints */
ngx_int_t ngx_http_llm_health(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_models(ngx_http_request_t *r, ngx_str_t *id);
/* Ollama's GET /api/tags and /api/ps (ps: 1), POST /api/show (name: the body's model, checked by the caller),
 * GET /api/version. */
ngx_int_t ngx_http_llm_ollama_tags(ngx_http_request_t *r, int ps);
ngx_int_t ngx_http_llm_ollama_show(ngx_http_request_t *r, const char *name);
ngx_int_t ngx_http_llm_ollama_version(ngx_http_request_t *r);
/* TGI's GET /info (ngx_http_llm_info.c). */
ngx_int_t ngx_http_llm_tgi_info(ngx_http_request_t *r);
/* llama.cpp server's GET /props (ngx_http_llm_info.c). */
ngx_int_t ngx_http_llm_lcpp_props(ngx_http_request_t *r);
/* POST /api/show with its body; /api/generate without a prompt (Ollama's call that loads the model). */
ngx_int_t ngx_http_llm_ollama_show_body(ngx_http_request_t *r, const char *body, size_t len);
ngx_int_t ngx_http_llm_ollama_load(ngx_http_request_t *r, const llm_api_req *q);
/* At configuration time: t's format and file size, and its family, param_size and quant from the GGUF at path
 * (left "" for anything else), so that no request reads the file. */
void ngx_http_llm_ollama_facts(const char *path, ngx_http_llm_tok_t *t);
ngx_int_t ngx_http_llm_metrics(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_tokenize(ngx_http_request_t *r, llm_api_req *q);
ngx_int_t ngx_http_llm_detokenize(ngx_http_request_t *r, llm_api_req *q);
/* Takes ownership of q on every path. Returns NGX_DONE when it goes on asynchronously. */
ngx_int_t ngx_http_llm_generate(ngx_http_request_t *r, llm_api_req *q);
/* POST /v1/embeddings and POST /v1/rerank (ngx_http_llm_embed.c); the same contract. */
ngx_int_t ngx_http_llm_embeddings(ngx_http_request_t *r, llm_api_req *q);
ngx_int_t ngx_http_llm_rerank(ngx_http_request_t *r, llm_api_req *q);

/* Encodes a prompt: text (add_bos) or chat messages (template) -> malloc'd ids. */
int ngx_http_llm_encode_prompt(ngx_http_request_t *r, llm_api_req *q, int32_t **ids, size_t *n, llm_api_err *e);

/* llm_responses_store: stored responses of the Responses API (ngx_http_llm_store.c) */
char     *ngx_http_llm_store_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
int       ngx_http_llm_store_on(ngx_http_request_t *r);
/* Keeps response id: prev (the previous_response_id, or NULL), this turn's items (n_input input items then the
 * output's, a JSON array's text) and the response object's JSON. NGX_OK, or NGX_DECLINED (off, or too large). */
ngx_int_t ngx_http_llm_store_put(ngx_http_request_t *r, const char *id, const char *prev, const char *items,
                                 uint32_t n_input, const char *response);
/* A kept response's input items (a new array, oldest first), or NULL when it is not kept. */
cJSON    *ngx_http_llm_store_input_items(ngx_http_request_t *r, const u_char *id, size_t len);
/* The response's JSON (malloc'd), or NULL when it is not stored. */
char     *ngx_http_llm_store_get(ngx_http_request_t *r, const u_char *id, size_t len);
/* 1 when it was stored (and is now dropped), else 0. */
int       ngx_http_llm_store_delete(ngx_http_request_t *r, const u_char *id, size_t len);
/* llm_api_history_fn for a request (data: the ngx_http_request_t): the conversation up to response id. */
cJSON    *ngx_http_llm_store_history(void *data, const char *id, llm_api_err *e);
/* GET / DELETE /v1/responses/<id>, GET /v1/responses/<id>/input_items (ngx_http_llm_info.c) */
ngx_int_t ngx_http_llm_response_item(ngx_http_request_t *r, ngx_str_t *id);
ngx_int_t ngx_http_llm_response_inputs(ngx_http_request_t *r, ngx_str_t *id);

/* llm_status: the dashboard's JSON with a shared one-second history (ngx_http_llm_status.c) */
char     *ngx_http_llm_status_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
ngx_int_t ngx_http_llm_status_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_status_init_process(ngx_cycle_t *cycle); /* starts the sampling timer */

/* engine glue (ngx_http_llm_engine.c) */
ngx_int_t ngx_http_llm_engine_init_process(ngx_cycle_t *cycle, ngx_http_llm_engine_t *eng);
void      ngx_http_llm_engine_exit_process(ngx_http_llm_engine_t *eng);
/* Queue p (a request waiting on eng) and have it stepped from the event loop, not from the caller. */
void      ngx_http_llm_pending_add(ngx_http_llm_engine_t *eng, ngx_http_llm_pending_t *p);
void      ngx_http_llm_pending_remove(ngx_http_llm_pending_t *p);
/* The engine's answer to a failed start (shm error rc) as an API error; returns its status. */
int       ngx_http_llm_start_err(int rc, llm_api_err *e);

#endif
