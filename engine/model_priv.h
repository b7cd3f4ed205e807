/* Helpers shared by the model loaders and the backends' prepare steps (not
 * part of the public interface). */
#ifndef LLM_MODEL_PRIV_H
#define LLM_MODEL_PRIV_H

#include "model.h"

llm_model *llm_model_alloc(const char *format, const char *path, llm_err *err);
/* Record memory the model frees (NULL p: allocation failed -> -1 + err). */
int  llm_model_own(llm_model *m, void *p, llm_err *err);
/* Frees owned buffer old and owns p in its place (p NULL: old just leaves the list). */
void llm_model_replace_owned(llm_model *m, const void *old, void *p);
int  llm_model_add_map(llm_model *m, void *base, size_t size, llm_err *err);
/* Convert a norm vector of n elements to owned F32 into *dst. */
int  llm_model_norm_f32(llm_model *m, llm_tensor *dst, llm_dtype type, const void *data, int64_t n,
                        const char *what, llm_err *err);
/* mmap a whole file read-only (records it in the model). */
const uint8_t *llm_model_map_file(llm_model *m, const char *path, size_t *size, llm_err *err);

#endif
