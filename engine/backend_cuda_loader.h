/* Finds and loads the CUDA backend (build/libllm_cuda.so) at run time, so
 * llm-engine runs on machines without CUDA libraries. */
#ifndef LLM_BACKEND_CUDA_LOADER_H
#define LLM_BACKEND_CUDA_LOADER_H

#include "backend.h"

/* The library's one entry point (kernels/cuda_backend.cu). */
#define LLM_CUDA_OPS_SYMBOL   "llm_cuda_backend_get_ops"
#define LLM_CUDA_PROBE_SYMBOL "llm_cuda_backend_probe"
#define LLM_CUDA_TP_ID_SYMBOL "llm_cuda_tp_id"

/* Loads $LLM_CUDA_LIB, else libllm_cuda.so beside the running executable, and
 * checks that a CUDA device is present. The library stays loaded; later calls
 * return the same ops. NULL + err (naming the file and the reason) on failure. */
const llm_backend_ops *llm_cuda_ops_load(llm_err *err);
/* A new communicator id for size ranks (kernels/cuda_tp.cu: NCCL's unique id) into id[LLM_TP_ID_BYTES], through
 * the loaded library. 0, or -1 + err. */
int llm_cuda_tp_id(unsigned char *id, int size, llm_err *err);

#endif
