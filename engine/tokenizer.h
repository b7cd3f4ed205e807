/* Tokenizers: SentencePiece-style BPE with scores and byte fallback (Llama 2,
 * the stories models), byte-level BPE with a pre-tokenizer regex and merge
 * ranks (Llama 3) and WordPiece (BERT-family embedding models, as llama.cpp's
 * "bert" vocabulary). Pure text code: no engine dependencies besides gguf.h, so
 * the NGINX module compiles it too. */
#ifndef LLM_TOKENIZER_H
#define LLM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "common.h"

struct gguf_ctx;

typedef enum { LLM_TOK_SPM = 1, LLM_TOK_BPE = 2, LLM_TOK_WPM = 3, LLM_TOK_UGM = 4 } llm_tok_kind;

typedef struct llm_tokenizer llm_tokenizer;

/* Loaders. */
llm_tokenizer *llm_tok_load_llama2c(const char *path, int vocab_size_hint, llm_err *err); /* tokenizer.bin / tok512.bin */
llm_tokenizer *llm_tok_load_gguf(const struct gguf_ctx *g, llm_err *err);                 /* tokenizer.ggml.* */
llm_tokenizer *llm_tok_load_hf(const char *tokenizer_json_path, llm_err *err);            /* + tokenizer_config.json beside it */
llm_tokenizer *llm_tok_load_spm_model(const char *tokenizer_model_path, llm_err *err);    /* SentencePiece's tokenizer.model, + the same */
/* Sniff: a directory (tokenizer.json inside), *.json, *.gguf, else llama2.c format. */
llm_tokenizer *llm_tok_load(const char *path, llm_err *err);
void           llm_tok_free(llm_tokenizer *t);

llm_tok_kind llm_tok_kind_of(const llm_tokenizer *t);
int   llm_tok_vocab_size(const llm_tokenizer *t);
int   llm_tok_bos(const llm_tokenizer *t);   /* -1 if none */
int   llm_tok_eos(const llm_tokenizer *t);   /* -1 if none */
/* End-of-generation ids (eos, <|eot_id|>, <|eom_id|> ...); returns count written (<= cap). */
int   llm_tok_eog_ids(const llm_tokenizer *t, int32_t *out, int cap);
int   llm_tok_is_special(const llm_tokenizer *t, int32_t id); /* control tokens */
int   llm_tok_find(const llm_tokenizer *t, const char *text); /* exact token text -> id, -1 if none */
/* Whether the model's metadata asks for BOS in front of prompts (addition). */
int   llm_tok_add_bos(const llm_tokenizer *t);
/* Whether it asks for EOS after them (tokenizer.ggml.add_eos_token, add_eos_token): the embeddings endpoint
 * appends it to text inputs, as llama.cpp's server does (an embedding model pooling the last token). */
int   llm_tok_add_eos(const llm_tokenizer *t);
void  llm_tok_set_add_eos(llm_tokenizer *t, int on); /* gen-model --add-eos: an embedding model's GGUF */
/* BOS and EOS from the model's own config (ModernBERT's config.json: cls_token_id, sep_token_id), each set and
 * added to texts where it is an id of the vocabulary, else left as it was. (addition) */
void  llm_tok_set_bos_eos(llm_tokenizer *t, int bos, int eos);
/* Fill-in-the-middle (code models): the prefix, suffix and middle token ids from the metadata
 * (tokenizer.ggml.fim_pre/suf/mid_token_id, or the older prefix/suffix/middle_token_id), else by their text
 * (<|fim_prefix|> ... as Qwen 2.5-Coder, <fim_prefix> ... as StarCoder). 0 when the model has all three. */
int   llm_tok_fim_ids(const llm_tokenizer *t, int32_t ids[3]);
/* The prompt a code model completes between prefix and suffix, in the PSM order its training used:
 * [BOS where it asks] <prefix id> prefix <suffix id> suffix <middle id>. The count (ids malloc'd), or -1
 * (no FIM tokens, out of memory). */
int   llm_tok_encode_fim(const llm_tokenizer *t, const char *prefix, size_t plen, const char *suffix, size_t slen,
                         int32_t **out);
/* The repository-level fill-in-the-middle ids, repository name and file separator, from the metadata
 * (tokenizer.ggml.fim_rep_token_id / fim_sep_token_id), else by their text (<|repo_name|> <|file_sep|> as
 * Qwen 2.5-Coder, <repo_name> <file_sep> as StarCoder 2). 0 when the model has both. (addition) */
int   llm_tok_fim_repo_ids(const llm_tokenizer *t, int32_t ids[2]);
/* A file beside the one being completed (llama.cpp's input_extra). */
typedef struct { const char *name, *text; size_t name_len, text_len; } llm_tok_file;
/* Fill in the middle with other files as context (llama.cpp server's /infill): [BOS where it asks], the files
 * (with the repository tokens: <repo> "myproject\n", then <sep> name "\n" text for each file and <sep>
 * "filename\n" for the one completed; without them, the files' texts one after another), then <prefix id> prefix
 * <suffix id> suffix <middle id> middle (the middle is text the completion continues). budget > 0: at most that
 * many ids where the parts allow it: the prefix keeps its end and the suffix its start (at most a quarter of
 * what the fixed parts leave), then the last files that still fit, whole (the first ones are left out). The
 * count (ids malloc'd), or -1 (no FIM tokens, out of memory). (addition) */
int   llm_tok_encode_infill(const llm_tokenizer *t, const char *prefix, size_t plen, const char *suffix, size_t slen,
                            const char *middle, size_t mlen, const llm_tok_file *files, int n_files, size_t budget,
                            int32_t **out);
/* Chat template text from the model's metadata (tokenizer.chat_template / tokenizer_config.json), or NULL. */
const char *llm_tok_chat_template(const llm_tokenizer *t);

enum {
    LLM_TOK_ADD_BOS       = 1, /* prepend BOS where the tokenizer has one */
    LLM_TOK_PARSE_SPECIAL = 2, /* turn special-token text into control ids (off: plain text) */
};

/* A cross-encoder's pair, as the model's tokenizer writes one: BERT's [CLS] a [SEP] b [SEP] (the engine takes
 * what follows the first [SEP] as the second text, token type 1), XLM-RoBERTa's (a Unigram vocabulary)
 * <s> a </s></s> b </s>. The count (*out malloc'd; *b_at, unless NULL, the index b's ids start at), or -1
 * (out of memory, no EOS / [SEP] token). */
int llm_tok_encode_pair(const llm_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
                        int32_t **out, int *b_at);

/* Encode len bytes of UTF-8 (invalid bytes are encoded too, via byte tokens).
 * *out is malloc'd (caller frees). Returns token count, -1 on allocation failure. */
int llm_tok_encode(const llm_tokenizer *t, const char *text, size_t len, int flags, int32_t **out);

/* Raw bytes of one token as it appears in decoded text (byte-level BPE unmapped,
 * SPM '▁' -> ' ', <0xNN> -> the byte, WordPiece's word-initial '▁' -> ' ').
 * Special tokens give their text. */
int llm_tok_piece(const llm_tokenizer *t, int32_t id, const char **bytes, size_t *len);

/* Streaming detokenizer: feeds ids, emits complete UTF-8 only (a partial
 * multi-byte sequence is held back until it completes or is proven invalid,
 * then emitted as U+FFFD). SPM: the dummy-prefix space after BOS/start is dropped;
 * WordPiece: likewise the space of the first word. */
#define LLM_DETOK_KEEP 8
typedef struct {
    const llm_tokenizer *tok;
    uint8_t pend[8];
    int     npend;
    int     at_start;   /* no text emitted yet (SPM drops a leading space here); set 0 after
                           init when streaming a continuation of a prompt that was not fed in */
    int     skip_special; /* don't emit text of control tokens (default 1) */
    int32_t keep[LLM_DETOK_KEEP]; /* control tokens whose text is emitted all the same (-1: none; the tags
                             function calls are read by where they are control tokens: Mistral's
                             [TOOL_CALLS], GLM-4.5's <arg_key> ...; a reasoning model's tags, for the
                             reasoning split) */
} llm_detok;

void   llm_detok_init(llm_detok *d, const llm_tokenizer *t);
/* Append the text for id to out (cap bytes); returns bytes written (enough room: cap >= 64 + longest piece). */
size_t llm_detok_push(llm_detok *d, int32_t id, char *out, size_t cap);
/* Emit whatever is held back (as U+FFFD for incomplete sequences). */
size_t llm_detok_flush(llm_detok *d, char *out, size_t cap);

/* Decode a whole sequence into a malloc'd NUL-terminated string. */
char *llm_tok_decode(const llm_tokenizer *t, const int32_t *ids, size_t n);
/* Same, choosing whether control tokens' text is left out (llm_tok_decode: yes). (addition) */
char *llm_tok_decode_ex(const llm_tokenizer *t, const int32_t *ids, size_t n, int skip_special);

#endif
