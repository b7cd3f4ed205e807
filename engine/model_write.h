/* Re-save a loaded model: GGUF (any dtype, llama.cpp-loadable) or a Hugging
 * Face directory (config.json + model.safetensors, rotate-half Q/K layout).
 * Also the GGUF metadata writers model_gen.c shares. */
#ifndef LLM_MODEL_WRITE_H
#define LLM_MODEL_WRITE_H

#include "model.h"
#include "gguf.h"
#include "tokenizer.h"

/* Matrices (token_embd and output included) converted/quantised to dtype;
 * rows not a multiple of 32 fall back to f16 for q8_0/q4_0; norms stay f32. */
int llm_model_save_gguf(const llm_model *m, llm_dtype dtype, const char *path, llm_err *err);
/* A Qwen3-Reranker-style model as llama.cpp converts it for reranking: pooling type rank, the language-model
 * head's "yes" and "no" rows as a classifier head (model cls, n_cls 2; the GGUF's cls.output and
 * <arch>.classifier.output_labels), and the head itself left out of the file when it is not the embedding
 * (llm_model_save_gguf). 0, or -1 with err (no tokenizer with single "yes" and "no" tokens). */
int llm_model_rank_head(llm_model *m, llm_err *err);
/* dtype: f32, f16 or bf16. Q/K rows permuted to rotate-half layout when the source is adjacent. */
int llm_model_save_hf(const llm_model *m, llm_dtype dtype, const char *dir, llm_err *err);

/* general.* and <arch>.* keys for cfg (file type from dtype); shared: a mixture of experts with a shared
 * expert (hidden_dim wide). */
void llm_gguf_w_meta(gguf_writer *w, const char *arch, const llm_config *c, int shared, const char *name,
                     llm_dtype dtype);
/* SentencePiece "llama" tokenizer from a llama2.c tokenizer file; pads the vocabulary
 * to vocab_size with synthesized distinct pieces (lower scores) when the file has fewer. */
int llm_gguf_w_spm_from_llama2c(gguf_writer *w, const char *tok_path, int vocab_size, llm_err *err);
/* WordPiece vocabulary derived from a llama2.c tokenizer file (SentencePiece pieces): ids 0-4 [PAD] [UNK] [CLS]
 * [SEP] [MASK], then the pieces lowercased (" word" -> "▁word" word-initial, others continuation pieces; byte
 * tokens, <unk> <s> </s> and duplicates dropped), then each printable ASCII character but the capitals as "▁c"
 * and "c" where missing. *n gets the count; *tokens (unless tokens is NULL: count only) the malloc'd spellings,
 * freed with llm_wpm_vocab_free. 0, or -1 with err. */
int  llm_wpm_vocab_from_llama2c(const char *tok_path, char ***tokens, int *n, llm_err *err);
void llm_wpm_vocab_free(char **tokens, int n);
/* That vocabulary as a GGUF "bert" tokenizer (llama.cpp's WPM): tokens, token_type, bos = cls 2, eos = seperator
 * 3, unknown 1, padding 0, mask 4, add_bos_token / add_eos_token true, and token_type_count 2 (llama.cpp sizes
 * token_types.weight by it); padded with unused "[unusedN]" tokens to pad_to tokens when that is more (a model
 * whose hidden size is above 272). *n_vocab (unless NULL) gets the vocabulary size: token_embd's rows. 0, or -1
 * with err. */
int  llm_gguf_w_wpm_from_llama2c(gguf_writer *w, const char *tok_path, int pad_to, int *n_vocab, llm_err *err);
/* A SentencePiece Unigram ("t5") vocabulary in XLM-RoBERTa's layout (<s> <pad> </s> <unk>, pieces, <mask>)
 * made from a llama2.c tokenizer file's pieces, padded to pad_to, with a precompiled charsmap of a few NFKC
 * rules (model_write_ugm.c); *n_vocab gets its size. 0, or -1 with err. */
int  llm_gguf_w_ugm_from_llama2c(gguf_writer *w, const char *tok_path, int pad_to, int *n_vocab, llm_err *err);
/* A precompiled charsmap (SentencePiece's normaliser: [u32 trie bytes][darts-clone units][NUL-terminated
 * replacements]) rewriting each rules[i][0] (a non-empty byte string) to rules[i][1]; malloc'd, *len its size;
 * NULL out of memory. */
uint8_t *llm_ugm_charsmap(const char *const (*rules)[2], int n, size_t *len);
/* A loaded Unigram tokenizer's vocabulary (spellings, scores, types, charsmap, whitespace switches, <s> / </s>
 * / <unk> / <pad> / <mask> ids, add_bos / add_eos) as "t5" metadata, as llama.cpp's converter writes
 * XLM-RoBERTa's; n_types: the model's token types. 0, or -1 + err. */
int  llm_gguf_w_ugm_from_tok(gguf_writer *w, const llm_tokenizer *t, int n_types, llm_err *err);
/* A loaded tokenizer's vocabulary as tokenizer.ggml.tokens (its GGUF spelling) and token_type. 0, or -1 + err. */
int  llm_gguf_w_vocab(gguf_writer *w, const llm_tokenizer *t, llm_err *err);
/* A loaded WordPiece tokenizer's vocabulary (its GGUF spelling, token types, [CLS] / [SEP] / [UNK] / [PAD] /
 * [MASK] ids, add_bos / add_eos, BertNormalizer's switches) as "bert" metadata; n_types: the model's token
 * types. 0, or -1 + err (not a WordPiece tokenizer, out of memory). */
int  llm_gguf_w_wpm_from_tok(gguf_writer *w, const llm_tokenizer *t, int n_types, llm_err *err);
/* A SentencePiece BPE vocabulary (tokenizer.model's) as GGUF's "llama" tokenizer: pieces, scores, types, BOS / EOS /
 * unknown ids, add_bos / add_eos / add_space_prefix, the chat template. */
int  llm_gguf_w_spm_from_tok(gguf_writer *w, const llm_tokenizer *t, llm_err *err);
/* Byte-level BPE ("gpt2") tokenizer from tokenizer.json (+ tokenizer_config.json beside it), with
 * tokenizer.ggml.pre = pre, or (pre NULL) the name of the file's split regex ("llama-bpe", "qwen2", "gpt2"). */
int llm_gguf_w_bpe_from_hf(gguf_writer *w, const char *tokenizer_json, const char *pre, llm_err *err);
/* The same for a ModernBERT (a directory's tokenizer.json, or the --tokenizer given): its [CLS] (cls) and [SEP]
 * (sep) ids as BOS and EOS (and seperator), both added, and the file's GPT-2 split named "modern-bert". */
int llm_gguf_w_bpe_cls_sep_from_hf(gguf_writer *w, const char *tokenizer_json, int cls, int sep, llm_err *err);
/* A GGUF's byte-level BPE vocabulary ("gpt2": tokens, token types, merges, a one-regex tokenizer.ggml.pre) as
 * DIR/tokenizer.json (BPE; control and user tokens as added_tokens) with ModernBERT's post-processor, [CLS]
 * (token cls) $A [SEP] (sep), and DIR/tokenizer_config.json naming them cls_token / sep_token
 * (model_max_length max_len): a ModernBERT directory's. 0, or -1 + err. */
int llm_hf_w_bpe_from_gguf(const gguf_ctx *g, const char *dir, int cls, int sep, int max_len, llm_err *err);
/* Llama 3 rope scaling as llama.cpp's converter computes rope_freqs.weight (head_dim/2 divisors). */
void llm_llama3_rope_freqs(const llm_config *c, float *out);

#endif
