/* llm-engine subcommands and the small argument helpers they share. */
#ifndef LLM_CLI_H
#define LLM_CLI_H

#include <stdint.h>

#include "backend.h"
#include "scheduler.h"

typedef struct {
    int          argc;
    char       **argv;
} llm_args;

/* Value of --name (NULL when absent). Flags without value: llm_arg_flag. */
const char *llm_arg_str(const llm_args *a, const char *name);
int         llm_arg_flag(const llm_args *a, const char *name);
/* Parse numbers; exit with a message on a malformed value. */
long        llm_arg_long(const llm_args *a, const char *name, long def, long lo, long hi);
double      llm_arg_double(const llm_args *a, const char *name, double def, double lo, double hi);
/* Reject options not in the NULL-terminated list (value options end with '='). */
int         llm_args_check(const llm_args *a, const char *const *known);
/* --kernel-tune on|off and --kernel-tune-file PATH (the CUDA backend's kernel tuning) into o; -1 with a
 * message on a bad value. */
int         llm_kernel_tune_opts(const llm_args *a, llm_backend_opts *o);
/* --tensor-parallel-size N: the model over N GPUs (1-8; --backend cuda; a model the split takes, model_tp.h)
 * into o->tp_size; --expert-parallel (or experts that cannot be split by columns) into o->tp_ep. 0, or -1 after
 * an error line. */
int         llm_tp_opts(const llm_args *a, const char *backend, const llm_model *m, llm_backend_opts *o);
/* --kv-cache-dtype auto|f16|f32 into o, and --ctx-size N (tokens a sequence may hold, prompt and
 * output; at most the model's context, which it lowers) into m's config; -1 with a message on a bad
 * value. */
int         llm_context_opts(const llm_args *a, llm_model *m, llm_backend_opts *o);
/* --lora PATH [--lora-scale S]: a LoRA adapter merged into m's weights (lora.h), before the backend prepares
 * it; -1 with a message when it cannot be. */
int         llm_lora_opts(const llm_args *a, llm_model *m);
/* --pooling last|mean|cls for embeddings, else the model's own (GGUF <arch>.pooling_type), else the last
 * token's (decoder embedding models): LLM_SCHED_EMBED_*; -1 with a message on a bad value. */
int         llm_pooling_opt(const llm_args *a, const llm_model *m);
/* An encoder's steps without --max-batched-tokens: its context (at most 2048), one input's worth, not 2048
 * tokens: they are prompts only, and a step that small keeps its activations in cache (bge-small's shape in
 * Q8_0 on 2 threads: 29.6 inputs/s against 25.0 at 2048). */
void        llm_encoder_step_default(const llm_args *a, const llm_model *m, llm_sched_config *sc);
/* Directory holding the project's shared files (../shared beside the repo). */
const char *llm_shared_dir(void);
double      llm_now_sec(void);
/* "1,2,3" -> ids below vocab (malloc'd). Returns the count, -1 on a malformed list. */
int         llm_parse_ids(const char *s, int vocab, int32_t **out);

int cli_generate(const llm_args *a);
int cli_tokenize(const llm_args *a);
int cli_info(const llm_args *a);
int cli_gen_model(const llm_args *a);
int cli_serve(const llm_args *a);
int cli_embed(const llm_args *a);

#endif
