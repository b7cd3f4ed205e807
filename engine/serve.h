/* llm-engine serve: the engine process. Creates the shared-memory segment,
 * takes submissions from nginx workers (or llm-client), runs them through the
 * continuous-batching scheduler on a backend and streams tokens back. */
#ifndef LLM_SERVE_H
#define LLM_SERVE_H

#include "backend.h"
#include "model.h"
#include "scheduler.h"

typedef struct {
    const char *shm_name;        /* segment /llm-<name> */
    unsigned    shm_mode;        /* file mode of the segment (0600 default) */
    int         n_slots;         /* concurrent requests the segment holds */
    int         stream_cap;      /* token stream entries per slot (power of two) */
    llm_sched_config sched;      /* batching policy */
    int         pooling;         /* embeddings (LLM_PARAM_EMBED): LLM_SCHED_EMBED_LAST or _MEAN */
} llm_serve_opts;

/* Serves until SIGTERM (stop taking requests, finish the running ones, then
 * remove the segment) or SIGINT (stop at once). 0 on a clean stop. */
int llm_serve(llm_model *m, llm_backend *b, const llm_serve_opts *o, llm_err *err);

#endif
