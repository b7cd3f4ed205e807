/* LoRA adapters, merged into a model's weights at load. */
#ifndef LLM_LORA_H
#define LLM_LORA_H

#include "model.h"

/* Adds the adapter at path to m's layer matrices: W += scale * s * B A for every matrix it adapts, where
 * s = alpha / r (alpha / sqrt(r) for a PEFT rsLoRA; 1 when a GGUF adapter gives no alpha). path is a
 * llama.cpp GGUF adapter (general.type "adapter", adapter.type "lora", tensors blk.N.<name>.weight.lora_a
 * [r x in] and .lora_b [out x r]) or a PEFT directory (adapter_config.json, adapter_model.safetensors).
 * The attention (q, k, v, o) and dense FFN (gate, up, down) matrices of any layer may be adapted; B's q/k
 * rows follow the model's rope layout (a PEFT adapter on a llama.cpp-converted Llama GGUF is permuted as
 * its weights were). Each merged matrix becomes an owned copy: F32 / F16 / BF16 in its own type, a
 * quantised one in Q8_0. Call before a backend prepares the model. 0, or -1 + err (m then unchanged
 * except for matrices already merged). */
int llm_lora_apply(llm_model *m, const char *path, float scale, llm_err *err);

#endif
