/* llm-engine serve's supervisor: the parent process forks the engine worker
 * (the serve loop), restarts it when it dies, and once a second reads the
 * segment's metrics block to run the adaptive tuner and publish to Redis, so
 * none of that runs in the worker's step loop.
 *
 * Restarts: a worker that ends other than by a clean stop (exit 0) is
 * restarted after a backoff of 0 s for the first restart in the window, then
 * 100 ms doubling up to 2 s; more than max_restarts within restart_window_s
 * makes the supervisor give up (exit 1, message on stderr). A worker that
 * fails before its first READY is a configuration error: no restart. Before a
 * restart the dead worker's segment is retired (llm_server_retire): its
 * clients' in-flight requests end with ENGINE_GONE at once.
 * SIGTERM / SIGINT are forwarded to the worker (drain / stop now); the
 * supervisor exits with the worker's status once it has ended. If the
 * supervisor itself dies the worker is killed too (PR_SET_PDEATHSIG SIGKILL):
 * killing the supervisor is killing the engine, as before supervision. */
#ifndef LLM_SUPERVISOR_H
#define LLM_SUPERVISOR_H

#include "tuner.h"

typedef struct {
    const char *shm_name;
    const char *pid_file;          /* worker pid, rewritten at each start; NULL = none */
    int         max_restarts;      /* within restart_window_s; then give up */
    int         restart_window_s;
    const char *redis_url;         /* NULL = no Redis */
    int         tune;              /* run the tuner (cfg below) */
    llm_tuner_config tuner;
    llm_tuner_knobs  knobs;        /* the command line's knobs: the starting point */
} llm_supervisor_opts;

/* Runs in the forked worker; its return value is the worker's exit status. */
typedef int (*llm_worker_fn)(void *ctx);

/* Supervise until a clean stop. Returns the exit status for llm-engine. */
int llm_supervise(const llm_supervisor_opts *o, llm_worker_fn worker, void *ctx);

#endif
