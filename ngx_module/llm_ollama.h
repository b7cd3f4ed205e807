/* Ollama's API bodies (POST /api/chat, /api/generate, /api/embed) -> the chat-completions, completions or
 * embeddings bodies they mean, so that Ollama's clients (ollama-python / ollama-js, Open WebUI, LangChain's ChatOllama, ...) run on
 * the same path as the OpenAI API. Plain C + cJSON (no nginx headers).
 *
 * /api/chat: model, messages ({"role": system | user | assistant | tool, "content", "thinking",
 * "tool_calls": [{"function": {"name", "arguments": {...}}}], "tool_name"}), tools (OpenAI's shape), format
 * ("json" or a JSON Schema), options, stream (default true), think, keep_alive (ignored).
 * /api/generate: model, prompt, suffix, system, raw (no chat template: a plain completion), format, options,
 * stream, think, keep_alive; without raw the prompt is the user message of a chat (as Ollama applies the
 * model's template). images, a template of the request's own and context are refused.
 * options: temperature, top_p, top_k, min_p, typical_p, seed, num_predict (max_tokens; -1 and -2: llm_max_tokens, up to
 * the context; llm_api.c sets max_tokens_all),
 * stop, repeat_penalty (repetition_penalty), presence_penalty, frequency_penalty; the deployment's knobs
 * (num_ctx, num_batch, num_gpu, main_gpu, num_thread, use_mmap, use_mlock, numa, low_vram, vocab_only,
 * num_keep, repeat_last_n, penalize_newline) are accepted and ignored; mirostat and tfs_z only at
 * their neutral values (off, 1); any other option is a 400 naming it. */
#ifndef LLM_OLLAMA_H
#define LLM_OLLAMA_H

#include <cjson/cJSON.h>

#include "llm_api.h"

/* The chat body (*completion 0) or, for /api/generate with raw, the completions body (*completion 1) that
 * body means; NULL with e (a 400 naming the field) when it is not one. generate: the body is /api/generate's.
 * *load: /api/generate without a prompt (Ollama's "load the model" call): the body holds only the model. The
 * model's name loses Ollama's default tag (":latest"). */
cJSON *llm_ollama_to_body(const cJSON *body, int generate, int *completion, int *load, llm_api_err *e);

/* /api/embed's body (model, input: a string or strings, truncate: default true, dimensions; options and
 * keep_alive ignored) -> the embeddings body it means; NULL with e. legacy: /api/embeddings' (model, prompt: a
 * string; a prompt over the context is a 400). */
cJSON *llm_ollama_embed_body(const cJSON *body, int legacy, llm_api_err *e);

/* The length of a model name without Ollama's default tag (":latest"): "name:latest" is "name". */
size_t llm_ollama_name_len(const char *name);

/* Names an error's param as the Ollama body has it (max_tokens -> options.num_predict, ...). */
void llm_ollama_param(llm_api_err *e);

/* {"error": message}: Ollama's error object; malloc'd text. */
char *llm_ollama_error_json(const llm_api_err *e);

#endif
