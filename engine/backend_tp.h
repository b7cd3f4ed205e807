/* Tensor parallelism: a model over o->tp_size GPUs (devices o->device ...), one process a GPU; see backend_tp.c.
 * llm_backend_create makes it for the "cuda" backend when o->tp_size > 1. */
#ifndef LLM_BACKEND_TP_H
#define LLM_BACKEND_TP_H

#include "backend.h"

/* Forks the other ranks (call it before this process has touched CUDA), then creates rank 0's backend. The
 * backend it returns runs like any other: its forward calls run on every rank. NULL + err on failure (the
 * other ranks then ended). */
llm_backend *llm_tp_backend_create(const llm_model *m, const llm_backend_opts *o, llm_err *err);

/* The same in two steps, for a process that wants a CUDA backend of its own on rank 0's device beside the split
 * one (a draft model: serve's run_worker): llm_tp_fork forks the other ranks (before anything touched CUDA);
 * the caller may then create backends on device o->device; llm_tp_start creates the split backend (it takes
 * the group, on failure too), or llm_tp_abandon ends the other ranks. The model must outlive both. */
typedef struct llm_tp_group llm_tp_group;
llm_tp_group *llm_tp_fork(const llm_model *m, const llm_backend_opts *o, llm_err *err);
llm_backend *llm_tp_start(llm_tp_group *g, llm_err *err);
void llm_tp_abandon(llm_tp_group *g);

#endif
