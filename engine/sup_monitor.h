/* The supervisor's view of its worker's segment: maps each generation
 * read-write (only the tuning block is written), samples the metrics block
 * once a second, runs the tuner, pushes knob changes, publishes samples,
 * events and tuning state to Redis when configured. */
#ifndef LLM_SUP_MONITOR_H
#define LLM_SUP_MONITOR_H

#include "supervisor.h"

typedef struct llm_monitor llm_monitor;

/* NULL + err on a bad Redis url or tuner bounds. Reads the stored tuning
 * state from Redis when there is one. */
llm_monitor *llm_monitor_new(const llm_supervisor_opts *o, char *err, size_t cap);
void         llm_monitor_free(llm_monitor *m);

/* Often (every ~100 ms): attach to the worker's segment once it is READY and
 * hand it the current knobs. Returns 1 while attached to a READY segment. */
int  llm_monitor_poll(llm_monitor *m, int worker_pid);
/* Once a second: sample, tune, publish. */
void llm_monitor_tick(llm_monitor *m);
/* The worker is gone: let go of its segment. */
void llm_monitor_detach(llm_monitor *m);
/* An event: to stderr and to the events stream. */
void llm_monitor_event(llm_monitor *m, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void llm_monitor_count_restart(llm_monitor *m);
/* Before fork: the worker must not inherit the Redis connection. */
void llm_monitor_before_fork(llm_monitor *m);

#endif
