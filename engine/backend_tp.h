/* Tensor parallelism: a model over o->tp_size GPUs (devices o->device ...), one process a GPU; see backend_tp.c.
 * llm_backend_create makes it for the "cuda" backend when o->tp_size > 1. */
#ifndef LLM_BACKEND_TP_H
#define LLM_BACKEND_TP_H

#include "backend.h"

/* Forks the other ranks (call it before this process has touched CUDA), then creates rank 0's backend. The
 * backend it returns runs like any other: its forward calls run on every rank. NULL + err on failure (the
 * other ranks then ended). */
llm_backend *llm_tp_backend_create(const llm_model *m, const llm_backend_opts *o, llm_err *err);

#endif
