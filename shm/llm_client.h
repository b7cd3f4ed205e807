/* Client side of the shared-memory protocol, for the nginx module (and tests,
 * benches). Never blocks (except llm_client_wait, a convenience for programs
 * without an event loop). One client per process or thread; not thread-safe.
 * Create it after fork (nginx: in init_process), never share it across a fork.
 *
 * Event-loop use: put llm_client_fd() in the loop (readable = wake-up). On a
 * wake-up: llm_client_drain(), then llm_client_read() each in-flight request;
 * before going back to sleep call llm_client_arm(): if it returns 1, read again
 * instead of sleeping. Call llm_client_check() from a timer (e.g. every second):
 * it notices an engine that died without a successor. */
#ifndef LLM_CLIENT_H
#define LLM_CLIENT_H

#include "llm_shm.h"

typedef struct llm_client llm_client;

/* A request handle, by value. Only valid with the client and generation that made it. */
typedef struct {
    uint32_t slot;
    uint32_t ticket;
    uint64_t gen;
} llm_req;

typedef struct {
    int               done;        /* terminal and every token read: release it */
    llm_finish_reason finish;      /* valid when done */
    int32_t           error;       /* engine error code when finish == LLM_FINISH_ERROR */
    uint32_t          n_generated; /* tokens the engine produced so far */
    uint32_t          n_cached;    /* prompt tokens its prefix cache served (valid once a token came) */
} llm_req_status;

/* Creates the client and its wake-up socket; attaching is lazy (the engine may not be up). */
llm_client *llm_client_new(const char *name, char *err, size_t cap);
/* Lets go of every request (queued/running ones are cancelled), leaves the waiter table. */
void        llm_client_free(llm_client *c);
int         llm_client_fd(const llm_client *c);

/* Attach to the engine's current segment if not attached to a live one. Returns
 * LLM_SHM_OK, LLM_SHM_E_NOENT (no engine), LLM_SHM_E_NOT_READY, LLM_SHM_E_BADSEG,
 * LLM_SHM_E_NO_WAITER. Requests of an earlier generation keep failing with ENGINE_GONE. */
int         llm_client_attach(llm_client *c);
/* Mapped segment (header: model, capacities, state; metrics block), or NULL. */
const llm_shm_map *llm_client_map(const llm_client *c);
uint64_t    llm_client_generation(const llm_client *c); /* 0 when not attached */
/* Liveness of the attached engine: OK, NOT_READY (starting/draining), ENGINE_GONE
 * (stopped, replaced, or pid dead with a heartbeat older than stale_ns), NOENT. */
int         llm_client_check(llm_client *c);
void        llm_client_set_stale_ns(llm_client *c, uint64_t ns); /* default 1 s */

/* Step by step: reserve a slot, fill it, submit it. */
int llm_client_reserve(llm_client *c, llm_req *out);         /* NO_SLOT, NOT_READY, ... */
int llm_client_fill(llm_client *c, llm_req r, const int32_t *ids, uint32_t n, const llm_shm_params *p,
                    uint64_t tag);                            /* TOO_LONG, INVAL */
/* After fill: the request's output must match this JSON Schema (its text, len bytes, travels after the
 * prompt ids): TOO_LONG when both do not fit the slot's prompt area. */
int llm_client_fill_schema(llm_client *c, llm_req r, const char *text, uint32_t len);
int llm_client_submit(llm_client *c, llm_req r);             /* RING_FULL (slot stays reserved) */
/* All three; on failure nothing stays reserved. */
int llm_client_start(llm_client *c, const int32_t *ids, uint32_t n, const llm_shm_params *p, uint64_t tag,
                     llm_req *out);
/* The same with a JSON Schema's text (schema NULL or len 0: none). */
int llm_client_start_schema(llm_client *c, const int32_t *ids, uint32_t n, const llm_shm_params *p,
                            const char *schema, uint32_t schema_len, uint64_t tag, llm_req *out);

/* Take up to max tokens that are ready (never waits). Returns the count (>= 0) or an
 * error (ENGINE_GONE, INVAL). st (may be NULL) says whether the request is complete. */
int llm_client_read(llm_client *c, llm_req r, llm_shm_token *out, int max, llm_req_status *st);
/* An embedding's result (LLM_PARAM_EMBED) once the request finished: up to max floats into out; returns how
 * many (0 when it has none), or an error (INVAL: not finished, or a stale handle). */
int llm_client_result(llm_client *c, llm_req r, float *out, uint32_t max);
/* Ask the engine to stop the request; it ends with LLM_FINISH_CANCELLED (or as it was). */
int llm_client_cancel(llm_client *c, llm_req r);
/* Done with the handle. An unfinished request is cancelled and the engine frees its slot. */
int llm_client_release(llm_client *c, llm_req r);

/* Consume pending wake-up datagrams; returns how many. */
int llm_client_drain(llm_client *c);
/* About to sleep on the fd: returns 1 if something is already readable (do not sleep), else 0. */
int llm_client_arm(llm_client *c);
/* arm + poll(fd, timeout_ms) + drain; 1 if woken or something pending, 0 on timeout. */
int llm_client_wait(llm_client *c, int timeout_ms);
/* Number of requests this client holds. */
uint32_t llm_client_in_flight(const llm_client *c);

#endif
