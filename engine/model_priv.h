/* Helpers shared by the model loaders and the backends' prepare steps (not
 * part of the public interface). */
#ifndef LLM_MODEL_PRIV_H
#define LLM_MODEL_PRIV_H

#include "model.h"
#include "safetensors.h"

#include <stdio.h>

llm_model *llm_model_alloc(const char *format, const char *path, llm_err *err);
/* Record memory the model frees (NULL p: allocation failed -> -1 + err). */
int  llm_model_own(llm_model *m, void *p, llm_err *err);
/* Frees owned buffer old and owns p in its place (p NULL: old just leaves the list). */
void llm_model_replace_owned(llm_model *m, const void *old, void *p);
int  llm_model_add_map(llm_model *m, void *base, size_t size, llm_err *err);
/* Convert a norm vector of n elements to owned F32 into *dst. */
int  llm_model_norm_f32(llm_model *m, llm_tensor *dst, llm_dtype type, const void *data, int64_t n,
                        const char *what, llm_err *err);
/* A rows x cols tensor (a vector: rows 1) of any type as owned F32 into *out (a cross-encoder's head); a wrong
 * shape or type is an error naming it. */
int  llm_model_f32_copy(llm_model *m, const llm_tensor *t, const char *name, int64_t cols, int64_t rows,
                        const float **out, llm_err *err);
/* An encoder's embeddings once taken (token rows, token types, position rows where it has them): their sizes
 * checked, vocab_size and n_types set from them, the position rows cut to the context. 0, or -1 + err. */
int  llm_encoder_embeddings(llm_model *m, llm_err *err);
/* mmap a whole file read-only (records it in the model). */
const uint8_t *llm_model_map_file(llm_model *m, const char *path, size_t *size, llm_err *err);

/* GGUF loading steps shared by the loaders of model_gguf.c (m->gguf open): an integer key (def when absent
 * and not required), a 1-D / 2-D tensor as an llm_tensor (absent and not required: left zero), a norm
 * vector as owned F32, an optional one. 0 ok, -1 + err. */
int llm_gguf_get_int(llm_model *m, const char *key, int *out, int def, int required, llm_err *err);
int llm_gguf_take(llm_model *m, const char *name, llm_tensor *dst, int required, llm_err *err);
int llm_gguf_take_norm(llm_model *m, const char *name, llm_tensor *dst, llm_err *err);
int llm_gguf_take_vec(llm_model *m, const char *name, llm_tensor *dst, int required, llm_err *err);
/* rows x cols elements of a GGUF block type (a read-only one of gguf_quants.h: MXFP4) at data, memory the model
 * owns or maps, as dst: what a GGUF tensor of that type becomes (Q8_0 at load, or deferred for a backend that
 * takes the blocks; data stays its src). name: for messages. Hugging Face's MXFP4 experts, repacked. */
int llm_gguf_use_blocks(llm_model *m, const char *name, uint32_t type, const void *data, int64_t cols, int64_t rows,
                        llm_tensor *dst, llm_err *err);
/* Phi 3's (and nomic-bert's) fused blk.L.SUFFIX.weight as the n matrices it stacks by rows (rows[i] each):
 * views into the file. */
int llm_gguf_take_fused(llm_model *m, int l, const char *suffix, const int64_t *rows, int n, llm_tensor *const *dst,
                        llm_err *err);
/* Partial rotary on rotate-half heads (cfg.rope_dims of head_dim): q / k rows, biases and norms reordered
 * (model_gguf.c; a Hugging Face directory's GLM-4.5 too). 0, or -1 + err. */
int llm_model_partial_rotary(llm_model *m, llm_err *err);
/* The rest of a "bert" or "nomic-bert" GGUF's loading (model_gguf_bert.c), after general.architecture. */
int llm_gguf_load_bert(llm_model *m, llm_err *err);
/* ... and of a "modern-bert" GGUF's (model_gguf_modernbert.c). Both start with llm_gguf_encoder_dims: the
 * name, a causal file refused, the shapes (<arch>.embedding_length, block_count, feed_forward_length,
 * attention.head_count, head_count_kv, context_length: def_ctx when absent) checked, head_dim set. */
int llm_gguf_encoder_dims(llm_model *m, int def_ctx, llm_err *err);
int llm_gguf_load_modern_bert(llm_model *m, llm_err *err);
/* ModernBERT's hidden_activation as LLM_ACT_* ("gelu": the erf one; "gelu_pytorch_tanh", "gelu_new",
 * "gelu_fast"; "silu", "swish"), -1 for any other (both formats name it as transformers does). */
int llm_modern_bert_act(const char *name);

/* Hugging Face directory loading steps shared by model_hf.c and model_hf_bert.c: a config.json integer (def
 * when absent and not required; a list: its first) or float, a safetensors tensor as an llm_tensor ([out, in]
 * row-major: ne[0] = in; absent and not required: left zero), a 1-D tensor as owned F32 (norms, biases). */
struct cJSON;
int   llm_hf_cfg_int(const struct cJSON *root, const char *key, int *out, int def, int required, const char *path,
                     llm_err *err);
float llm_hf_cfg_float(const struct cJSON *root, const char *key, float def);
int   llm_hf_take(llm_model *m, const st_set *s, const char *name, llm_tensor *dst, int required, llm_err *err);
int   llm_hf_take_norm(llm_model *m, const st_set *s, const char *name, llm_tensor *dst, llm_err *err);
/* EXAONE 3.x's own checkpoint names (ExaoneForCausalLM, remote code: transformer.wte, transformer.h.N.ln_1,
 * attn.attention.q_proj ... out_proj, ln_2, mlp.c_fc_0 (gate), c_fc_1 (up), c_proj (down), transformer.ln_f) for
 * a Llama name (model.embed_tokens, model.layers.N.input_layernorm, self_attn.q_proj, ...), rewritten in place
 * (cap bytes); names without a counterpart are left as they are. Shared by the reader and the writer. */
void  llm_hf_exaone_name(char *name, size_t cap);
/* A tensor of rows x cols (a vector: rows 1) as owned F32 (a classifier head's, llm_model_rank_apply's); absent
 * and not required: *out NULL. */
int   llm_hf_take_f32(llm_model *m, const st_set *s, const char *name, int64_t cols, int64_t rows, int required,
                      const float **out, llm_err *err);
/* A fused [sum of rows x dim] tensor (ModernBERT's Wqkv and Wi) as the n matrices it stacks by rows (rows[i]
 * each): views into the file; a missing tensor or another shape is an error naming it. */
int   llm_hf_take_fused(llm_model *m, const st_set *s, const char *name, const int64_t *rows, int n,
                        llm_tensor *const *dst, llm_err *err);
/* gpt-oss's directories (model_hf_gptoss.c): its config.json keys (num_local_experts, sliding_window, ...);
 * layer l's router and experts (MXFP4 blocks repacked, or unquantised ones transposed) with their biases.
 * 0, or -1 + err. */
int   llm_hf_gptoss_config(llm_model *m, const struct cJSON *root, const char *path, llm_err *err);
int   llm_hf_gptoss_experts(llm_model *m, const st_set *s, int l, llm_layer *L, llm_err *err);
/* A checkpoint's quantization_config into m->hfq (model_hf_qconfig.c): none; block-wise FP8; GPTQ (4 or 8 bits);
 * AWQ (GEMM packing, 4 bits); compressed-tensors (pack-quantized, int-quantized, float-quantized); gpt-oss's
 * mxfp4. Any other method, or a form of these the loader cannot carry, is refused by name. 0, or -1 + err. */
enum { LLM_HFQ_NONE = 0, LLM_HFQ_FP8, LLM_HFQ_MXFP4, LLM_HFQ_GPTQ, LLM_HFQ_AWQ, LLM_HFQ_CT };
int   llm_hf_quant_config(llm_model *m, const struct cJSON *root, const char *path, llm_err *err);
const char *llm_hfq_name(int method); /* "gptq", ... */
/* An F8_E4M3 matrix t (its name) with its scale (NULL: absent) as owned BF16 into *dst (model_hf_fp8.c). block:
 * the rows and columns each scale covers (block-wise FP8's weight_block_size), or NULL to read them off the
 * scale's shape (compressed-tensors: [rows, 1] per channel, [1] per tensor, [ceil(rows / b0), ceil(cols / b1)]).
 * 0, or -1 + err. */
int   llm_hf_fp8_take(llm_model *m, const char *name, const st_tensor *t, const st_tensor *scale, const int *block,
                      llm_tensor *dst, llm_err *err);
/* A Linear's integer-quantised weight (model_hf_intq.c) under the .weight name the loader asks for: GPTQ's and
 * AWQ's qweight / qzeros / scales (/ g_idx), compressed-tensors' weight_packed or I8 weight with weight_scale
 * (/ weight_zero_point / weight_g_idx), repacked into owned Q4_0 or Q8_0 rows in *dst. 1 taken, 0 no such form
 * (the caller goes on to a float .weight), -1 + err. */
int   llm_hf_intq_take(llm_model *m, const st_set *s, const char *name, llm_tensor *dst, llm_err *err);
/* A language-model tensor by its "model." name, under multimodal prefixes too (model_hf.c). */
const st_tensor *llm_hf_find(const st_set *s, const char *name);
/* ... and written (model_write_gptoss.c): 1 when every expert kept the file's MXFP4 blocks (then written as
 * blocks and scales); its config.json keys; the shape (dtype name, NULL for the directory's; dims; bytes) and
 * bytes of each kind of its experts' tensors. */
enum { LLM_HF_OSS_NONE = 0, LLM_HF_OSS_GU, LLM_HF_OSS_DOWN, LLM_HF_OSS_GU_BIAS, LLM_HF_OSS_GU_BLOCKS,
       LLM_HF_OSS_GU_SCALES, LLM_HF_OSS_DOWN_BLOCKS, LLM_HF_OSS_DOWN_SCALES };
int      llm_hf_gptoss_mx(const llm_model *m);
void     llm_hf_gptoss_config_json(struct cJSON *j, const llm_model *m, int mx);
uint64_t llm_hf_gptoss_shape(const llm_model *m, int kind, llm_dtype dtype, uint64_t *shape, int *nd, const char **st);
int      llm_hf_gptoss_write(FILE *f, const llm_model *m, const llm_layer *L, int kind, llm_dtype dtype, llm_err *err);
/* A BERT directory (model_type "bert", model_hf_bert.c): its config.json into m->cfg; then, with the
 * safetensors open, its tensors (validated); after the tokenizer loaded, [CLS] / [SEP] from it. */
int   llm_hf_bert_config(llm_model *m, const struct cJSON *root, const char *path, llm_err *err);
int   llm_hf_bert_tensors(llm_model *m, const st_set *s, llm_err *err);
void  llm_hf_bert_tokens(llm_model *m);
/* A ModernBERT directory (model_type "modernbert", model_hf_modernbert.c): its config.json into m->cfg
 * (arch "modern-bert"); then its tensors, the windowed layers from the same config (root). */
int   llm_hf_modern_bert_config(llm_model *m, const struct cJSON *root, const char *path, llm_err *err);
int   llm_hf_modern_bert_tensors(llm_model *m, const st_set *s, const struct cJSON *root, llm_err *err);
/* Its tokenizer (the directory's, or a --tokenizer given in its place) adds the config's [CLS] (cfg.bos_id) in
 * front and [SEP] (cfg.eos_id) at the end, each where the vocabulary has that id (ModernBERT's post-processor,
 * as GGUF add_bos / add_eos say it). */
void  llm_modern_bert_tokens(llm_model *m);

#endif
