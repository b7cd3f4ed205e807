/* Internals shared by the tokenizer files (not part of the public API). */
#ifndef LLM_TOKENIZER_PRIV_H
#define LLM_TOKENIZER_PRIV_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer.h"

/* Token types, GGUF's tokenizer.ggml.token_type values. */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5, TOK_BYTE = 6 };

/* Open-addressing map from a byte string to a token id; keys live in the
 * tokenizer's arenas (looked up through off/len of one of its two forms). */
typedef struct {
    int32_t    *slots; /* -1 empty */
    uint32_t    mask;
    const char *arena;
    const uint32_t *off, *len;
} tok_strmap;

/* Merge table: (left id, right id) -> (rank, merged id). */
typedef struct {
    uint64_t *keys;  /* UINT64_MAX empty */
    int32_t  *rank;
    int32_t  *merged;
    uint32_t  mask;
} tok_mergemap;

/* A token that input text is split on before the model sees it. */
typedef struct {
    int32_t id;
    int     control; /* only with LLM_TOK_PARSE_SPECIAL */
} tok_special;

struct llm_tokenizer {
    llm_tok_kind kind;
    int      n_vocab;
    /* text: the vocabulary's own spelling (SPM '▁', byte-level BPE's unicode
     * stand-ins); raw: the bytes the token stands for in decoded text. */
    char    *text_arena, *raw_arena;
    uint32_t *text_off, *text_len, *raw_off, *raw_len;
    size_t   text_used, text_cap, raw_used, raw_cap; /* arena fill while building */
    float   *score;
    uint8_t *type;
    tok_strmap by_text;   /* every token */
    tok_strmap by_raw;    /* tokens the model encoder may produce (normal / user) */
    int32_t  byte_id[256]; /* SPM: <0xNN> tokens; BPE: single-byte tokens; -1 none */
    int      bos, eos, unk;
    int      add_bos;         /* metadata says BOS belongs in front */
    int      add_eos;         /* metadata says EOS belongs at the end (embedding models: Qwen3-Embedding) */
    int      add_space_prefix; /* SPM dummy prefix */
    int32_t  fim[3];          /* fill-in-the-middle prefix / suffix / middle ids from the metadata, or -1 */
    int32_t  fim_repo[2];     /* repository-level FIM: repository name and file separator ids, or -1 */
    char    *chat_template;
    /* byte-level BPE */
    tok_mergemap merges;
    pcre2_code *re;
    pcre2_code *re_first;     /* a two-stage pre-tokenizer's first split (refact: each digit), or NULL */
    int      ignore_merges;   /* a word that is itself a token skips the merges (HF) */
    /* WordPiece: BertNormalizer's lowercase and strip_accents (default: as lowercase) */
    int      wpm_lower, wpm_strip;
    uint32_t max_text_len;    /* longest vocabulary spelling in bytes (WordPiece's and Unigram's match bound) */
    /* Unigram: the precompiled charsmap as the file has it ([u32 trie bytes][darts-clone units][NUL-terminated
     * replacements]), the unknown token's score, remove_extra_whitespaces */
    uint8_t *ugm_charsmap;
    size_t   ugm_charsmap_len, ugm_n_units, ugm_repl_len;
    const uint8_t *ugm_units;
    const char *ugm_repl;
    float    ugm_unk_score;
    int      ugm_merge_spaces;
    /* tokens input is split on (control / user-defined), sorted by first
     * byte then longest first; spec_start/spec_count index them by first byte */
    tok_special *specials;
    int      n_specials;
    int      spec_start[256], spec_count[256];
};

/* Building (loaders). */
llm_tokenizer *tok_new(llm_tok_kind kind, int n_vocab);
/* Add token id with its vocabulary spelling (copied); computes raw from text. */
int  tok_set(llm_tokenizer *t, int id, const char *text, size_t len, float score, int type);
/* After all tokens are set: maps, byte table, specials. -1 + err on failure. */
int  tok_finish(llm_tokenizer *t, llm_err *err);
int  tok_set_merges_capacity(llm_tokenizer *t, size_t n);
/* Add a merge "a b" (vocabulary spellings); -1 if a, b or a+b is not a token. */
int  tok_add_merge(llm_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen, int rank);
/* Between the two stages of a two-stage pre-tokenizer pattern (the first splits, the second splits each piece). */
#define TOK_STAGE "\x1f"
/* Named pre-tokenizer patterns; NULL if unknown. */
const char *tok_pretok_pattern(const char *name);
/* The GGUF name (tokenizer.ggml.pre) of a known pattern; NULL if none. */
const char *tok_pretok_name(const char *pattern);
/* A tokenizer.json's pre_tokenizer: its split regex (a Split's, or ByteLevel's
 * built-in GPT-2 one); NULL + err when it is not byte-level BPE. */
struct cJSON;
const char *tok_hf_pretok_pattern(const struct cJSON *pt, const char *path, llm_err *err);
int  tok_compile_regex(llm_tokenizer *t, const char *pattern, llm_err *err);
/* A tokenizer.json post-processor's opening and closing special tokens (BertProcessing / RobertaProcessing's
 * cls / sep, TemplateProcessing's single template; within a Sequence too): their texts, and that they are
 * added. */
void tok_hf_post_specials(const struct cJSON *pp, const char **cls, const char **sep, int *add_bos, int *add_eos);
/* A tokenizer.json whose model is Unigram (tokenizer_load_hf_ugm.c); NULL + err. */
llm_tokenizer *tok_hf_load_unigram(const struct cJSON *j, const char *path, llm_err *err);
/* A tokenizer_config.json (c, NULL: none) applied to a built vocabulary: BOS / EOS (SentencePiece kinds default to
 * <s> / </s>), add_bos_token / add_eos_token, the chat template; post: a tokenizer.json's post_processor or NULL. */
int tok_hf_apply_config(llm_tokenizer *t, const struct cJSON *c, const struct cJSON *post, llm_err *err);
/* A chat template in a file of its own beside the file `beside` (the model directory's tokenizer.json or
 * tokenizer.model): chat_template.jinja (its text), else chat_template.json ({"chat_template": "..."}), as
 * transformers saves them since 4.43; it replaces tokenizer_config.json's, as transformers lets it. 0 when
 * there is none; -1 + err for an unreadable or malformed one. */
int tok_hf_chat_template_file(llm_tokenizer *t, const char *beside, llm_err *err);
/* The path of the file `name` in the directory of the file `beside` (malloc'd; NULL: out of memory). */
char *tok_hf_sibling(const char *beside, const char *name);

/* Rank of the merge a+b (result in *merged), -1 if none. */
int tok_merge_get(const llm_tokenizer *t, int32_t a, int32_t b, int32_t *merged);
int32_t tok_map_get(const tok_strmap *m, const char *s, size_t len);
/* The same with the key's hash given: tok_hash_step over its bytes from TOK_HASH_INIT, then tok_hash_end (a
 * caller looking up every prefix of a string hashes each byte once). */
int32_t tok_map_get_h(const tok_strmap *m, const char *s, size_t len, uint64_t hash);
#define TOK_HASH_INIT 1469598103934665603ull
static inline uint64_t tok_hash_step(uint64_t h, unsigned char c) { return (h ^ c) * 1099511628211ull; }
static inline uint64_t tok_hash_end(uint64_t h) { return h ^ (h >> 29); }

/* Encoders for one plain-text fragment; append to *out (growable). */
typedef struct {
    int32_t *v;
    size_t   n, cap;
} tok_vec;
int tok_vec_push(tok_vec *v, int32_t id);
int tok_spm_encode(const llm_tokenizer *t, const char *s, size_t len, int prefix_space, tok_vec *out);
int tok_bpe_encode(const llm_tokenizer *t, const char *s, size_t len, tok_vec *out);
int tok_wpm_encode(const llm_tokenizer *t, const char *s, size_t len, tok_vec *out);
int tok_ugm_encode(const llm_tokenizer *t, const char *s, size_t len, tok_vec *out);
/* Unigram: keep a copy of the precompiled charsmap (n 0: none); -1 + err if its trie does not fit. */
int  tok_ugm_set_charsmap(llm_tokenizer *t, const uint8_t *blob, size_t n, llm_err *err);
/* Unigram: the unknown token's score from the normal ones' (after the types are set). */
void tok_ugm_prepare(llm_tokenizer *t);
/* WordPiece's lowercasing of one code point (also the vocabulary writer's). */
uint32_t tok_wpm_lower(uint32_t cp);

/* Merge loop shared by both encoders: symbols in a doubly linked list over a
 * working string, candidate pairs in a heap (higher pri first, then leftmost). */
typedef struct {
    int32_t  id;
    uint32_t start, len;
    int32_t  prev, next;
    int      nomerge; /* SPM byte-fallback pieces never merge */
} tok_sym;
typedef struct {
    float    pri;
    int32_t  left, right, merged;
    uint32_t size;
} tok_pair;
typedef struct {
    tok_sym  *sym;
    size_t    nsym, capsym;
    tok_pair *heap;
    size_t    nheap, capheap;
} tok_work;
int  tok_work_sym(tok_work *w, int32_t id, uint32_t start, uint32_t len, int nomerge);
/* Run the merges over w->sym[0..nsym) and append the surviving ids to out.
 * spm: pairs looked up by concatenated raw text, priority = score;
 * else: by (left id, right id) in the merge table, priority = -rank. */
int  tok_work_merge(const llm_tokenizer *t, tok_work *w, const char *work, int spm, tok_vec *out);
void tok_work_free(tok_work *w);

/* UTF-8 helpers. */
/* Length of a valid UTF-8 sequence at s (1..4), 0 if invalid/truncated. */
int tok_utf8_len(const unsigned char *s, size_t avail);
/* Byte-level BPE's byte <-> code point table. */
uint32_t tok_byte_to_cp(uint8_t b);
int      tok_cp_to_byte(uint32_t cp); /* -1 if not a stand-in */

#endif
