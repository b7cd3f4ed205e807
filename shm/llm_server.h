/* Engine side of the shared-memory protocol: create the segment, take
 * submissions, stream tokens back, finish requests, reclaim the slots of dead
 * clients, sleep on the doorbell. Every function except llm_server_create must
 * be called from one engine thread (the single consumer). */
#ifndef LLM_SERVER_H
#define LLM_SERVER_H

#include "llm_shm.h"

typedef struct {
    const char   *name;             /* segment "/llm-<name>" */
    llm_shm_caps  caps;
    llm_shm_model model;
    unsigned      mode;             /* shm file mode; 0 = 0600 (nginx workers must be able to open it) */
    int           force;            /* take the name over even if its engine still looks alive */
    uint64_t      reap_interval_ns; /* how often llm_server_reap scans; 0 = 50 ms */
} llm_server_config;

typedef struct llm_server llm_server;

/* Creates a new segment with a new generation, state STARTING. A stale segment of
 * the same name is marked STOPPED (its clients' in-flight requests end with
 * ENGINE_GONE and their waiters get a wake-up), then unlinked. Refuses (NULL,
 * message) if a live engine serves the name and !force. */
llm_server *llm_server_create(const llm_server_config *cfg, char *err, size_t cap);
/* For a supervisor whose engine died (after waitpid): mark the segment of name
 * STOPPED, wake its clients (their in-flight requests end with ENGINE_GONE at
 * once) and unlink it. Never call while a live engine serves the name. 0, or -1 + err. */
int         llm_server_retire(const char *name, char *err, size_t cap);
/* Marks the segment STOPPED, wakes every waiter, unlinks the name (if still ours), unmaps. */
void        llm_server_destroy(llm_server *s);

llm_shm_map *llm_server_map(llm_server *s);       /* header, metrics block (gauges, histograms) */
uint64_t     llm_server_generation(const llm_server *s);
void         llm_server_set_state(llm_server *s, llm_engine_state st);
void         llm_server_heartbeat(llm_server *s);

/* Sleep on the doorbell until a submission or timeout_ms (-1 = forever; 0 = just check).
 * Returns 1 if submissions are waiting. Also refreshes the heartbeat. */
int  llm_server_wait(llm_server *s, int timeout_ms);
/* Take the next submission: sets *slot and marks it RUNNING; returns 1, or 0 when the ring
 * is empty. Submissions already cancelled, detached or malformed are ended here and skipped. */
int  llm_server_pop(llm_server *s, uint32_t *slot);

const int32_t        *llm_server_prompt(llm_server *s, uint32_t slot, uint32_t *n);
const llm_shm_params *llm_server_params(llm_server *s, uint32_t slot);
/* The request's JSON Schema text (llm_client_fill_schema), or NULL with *len 0 when it has none. */
const char           *llm_server_schema(llm_server *s, uint32_t slot, uint32_t *len);
uint64_t              llm_server_tag(llm_server *s, uint32_t slot);
/* The client cancelled, let go, or died: stop generating and call llm_server_finish. */
int  llm_server_cancelled(llm_server *s, uint32_t slot);
/* Free entries in the slot's token stream (the client reads at its own pace). */
uint32_t llm_server_stream_space(llm_server *s, uint32_t slot);
/* Append a token (top may be NULL when n_top == 0; n_top is clipped to caps.max_top) and wake
 * the owner if it waits. 0, or LLM_SHM_E_STREAM_FULL (nothing written: retry after the client
 * reads), or LLM_SHM_E_INVAL for a slot not RUNNING. */
int  llm_server_push(llm_server *s, uint32_t slot, int32_t id, float logprob,
                     const llm_shm_logprob *top, uint32_t n_top);
/* The same with entry flags (LLM_ENTRY_*): an LLM_ENTRY_PROMPT entry is not a generated token (no
 * count, no latency figures). */
int  llm_server_push_ex(llm_server *s, uint32_t slot, int32_t id, float logprob,
                        const llm_shm_logprob *top, uint32_t n_top, uint32_t flags);
/* The prompt tokens the prefix cache served the request in slot (call before pushing its tokens). */
void llm_server_set_cached(llm_server *s, uint32_t slot, uint32_t n);
/* An embedding's result (LLM_PARAM_EMBED): n floats (at most LLM_SHM_RESULT_MAX) into the slot's stream
 * area, before llm_server_finish publishes them. 0, or LLM_SHM_E_INVAL (slot not RUNNING, n too large). */
int  llm_server_put_result(llm_server *s, uint32_t slot, const float *v, uint32_t n);
/* End a RUNNING request. error is kept for LLM_FINISH_ERROR. A slot the client let go is freed. */
int  llm_server_finish(llm_server *s, uint32_t slot, llm_finish_reason why, int32_t error);

/* Reclaim the slots of clients whose process died (or who detached): RESERVED and finished
 * slots are freed, queued ones freed when popped, RUNNING ones flagged cancelled so the
 * scheduler finishes them. Scans at most every reap_interval_ns unless force.
 * Returns the number of slots reclaimed. */
int  llm_server_reap(llm_server *s, int force);

#endif
