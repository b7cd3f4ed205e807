/* Publishing engine metrics, events and tuning state to Redis (hiredis),
 * from the supervisor process only: never on the serving path. Every call is
 * best effort and bounded in time: short connect/command timeouts, and while
 * Redis is unreachable reconnects are tried with exponential backoff (250 ms
 * up to 5 s) and samples are dropped; events wait in a small bounded queue
 * (oldest dropped). Keys (see engine/README-ops.md):
 *   llm:<name>:metrics  hash, the latest sample
 *   llm:<name>:history  stream of samples, MAXLEN ~ 3600
 *   llm:<name>:events   stream of events (type, detail), MAXLEN ~ 10000
 *   llm:<name>:tuning   hash, the tuner's knobs (read back at start) */
#ifndef LLM_REDIS_PUB_H
#define LLM_REDIS_PUB_H

#include <stddef.h>

typedef struct llm_redis llm_redis;

/* url: redis://host[:port][/db]. Does not connect yet. NULL + err on a bad url. */
llm_redis *llm_redis_new(const char *url, const char *name, char *err, size_t cap);
void       llm_redis_free(llm_redis *r);
/* Close the connection (reopened on the next call), e.g. so a forked child holds no copy of it. */
void       llm_redis_disconnect(llm_redis *r);

/* One sample: n (field, value) pairs into the metrics hash and the history
 * stream. 0 sent, -1 dropped. */
int  llm_redis_publish(llm_redis *r, const char *const *fields, const char *const *values, int n);
/* Queue an event and send what is queued. 0 all sent, -1 some still queued. */
int  llm_redis_event(llm_redis *r, const char *type, const char *detail);
/* Tuning state: save the knobs; load them (1 found, 0 none stored, -1 unreachable). */
int  llm_redis_save_tuning(llm_redis *r, int max_batch_size, int batch_timeout_ms, int max_batched_tokens);
int  llm_redis_load_tuning(llm_redis *r, int *max_batch_size, int *batch_timeout_ms, int *max_batched_tokens);

#endif
