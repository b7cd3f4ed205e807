/* Random-weight GGUF models of real shapes (for speed work and tests). */
#ifndef LLM_MODEL_GEN_H
#define LLM_MODEL_GEN_H

#include "common.h"

/* preset: tiny, tiny-llama3, stories110m, llama-3.2-1b, llama-3.2-3b, tiny-qwen2, tiny-qwen3,
 * tiny-gemma3, tiny-gemma2, gemma-3-1b, tiny-qwen3moe, tiny-mixtral, qwen3-30b-a3b, qwen2.5-0.5b,
 * qwen3-0.6b. Weights ~N(0, 0.02) (the tiny Qwen ones wider, model_gen.c),
 * norms ~1; tokenizers from shared_dir (models/stories260K/tok512.bin,
 * tokenizers/llama3/). Streams tensors to out_path block by block. 0 ok, -1 + err. */
int llm_model_generate(const char *preset, llm_dtype dtype, uint64_t seed, const char *out_path,
                       const char *shared_dir, llm_err *err);
/* As llm_model_generate with n_layers layers instead of the preset's (0: the preset's). */
int llm_model_generate_layers(const char *preset, llm_dtype dtype, uint64_t seed, int n_layers, const char *out_path,
                              const char *shared_dir, llm_err *err);

#endif
