/* Tensor parallelism: one rank's share of a model (model_tp.c) and the backend that runs a model over several
 * GPUs, one process a GPU (backend_tp.c). */
#ifndef LLM_MODEL_TP_H
#define LLM_MODEL_TP_H

#include "model.h"

#define LLM_TP_MAX 8 /* ranks at most */

/* 0 when m can be split over size ranks, else -1 + err saying why not. ep: a mixture of experts' experts dealt
 * out whole (expert parallelism) instead of each split by columns (no effect on a dense model). */
int        llm_model_tp_check(const llm_model *m, int size, int ep, llm_err *err);
/* Rank rank's share of m (0 <= rank < size): n_heads, n_kv_heads and hidden_dim divided by size, the layers'
 * q/k/v (and their biases) and gate/up rows of its heads and FFN columns (views into m), wo's and w_down's
 * columns that read them (copies); each expert's columns likewise, or with ep its experts
 * [cfg.expert_lo, cfg.expert_hi) whole (views) and the others absent. m must outlive it. NULL + err when m
 * cannot be split. */
llm_model *llm_model_tp_shard(const llm_model *m, int rank, int size, int ep, llm_err *err);
void       llm_model_tp_free(llm_model *shard);

#endif
