/* Byte-level BPE (GPT-2 / Llama 3): the pre-tokenizer regex splits text into
 * words (text between matches is a word too, as HF's "Isolated" split keeps
 * it), each word starts as one symbol per byte and merges by lowest rank.
 * Matching works on raw bytes, so the byte-to-unicode mapping only matters for
 * reading vocabularies. Invalid UTF-8 never matches (PCRE2_MATCH_INVALID_UTF)
 * and so lands in between-match words, which encode byte by byte. */
#include "tokenizer_priv.h"

#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name, *pattern;
} pretok[] = {
    /* Llama 3 (tokenizer.ggml.pre "llama-bpe"; tokenizer.json's Split regex) */
    { "llama-bpe",
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
      "\\s+(?!\\S)|\\s+" },
    /* GPT-2 and the ByteLevel pre-tokenizer's built-in pattern */
    { "gpt2", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+" },
    { "default", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+" },
    /* GPT-4o's (o200k; tokenizer.ggml.pre "gpt-4o": Phi-4-mini): words split at case changes, contractions
     * kept on their word, "/" after punctuation kept */
    { "gpt-4o",
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
      "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
    /* StarCoder's and Granite's (tokenizer.ggml.pre "refact"; tokenizer.json: Digits then ByteLevel): two
     * stages, TOK_STAGE between them: every digit its own piece, then GPT-2's split within each piece
     * (whose ends are then ends of text for its lookahead) */
    { "refact",
      "\\p{N}" TOK_STAGE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+" },
    /* Mistral's Tekken (tokenizer.ggml.pre "tekken": Mistral Nemo, Small 3, Pixtral): GPT-4o's split without
     * its contractions, digits one by one (tokenizer.json's regex; llama.cpp runs an ASCII approximation of
     * its letter classes, which splits the same wherever the lowercase letters are ASCII) */
    { "tekken",
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}|"
      " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
    /* Qwen 2: like Llama 3 but single digits */
    { "qwen2",
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
      "\\s+(?!\\S)|\\s+" },
};

const char *tok_pretok_pattern(const char *name)
{
    for (size_t i = 0; i < sizeof(pretok) / sizeof(pretok[0]); i++)
        if (strcmp(pretok[i].name, name) == 0)
            return pretok[i].pattern;
    /* llama.cpp splits these as Llama 3 does (dbrx: cl100k-style vocabularies, Phi-4's among them) */
    if (strcmp(name, "llama3") == 0 || strcmp(name, "smaug-bpe") == 0 || strcmp(name, "dbrx") == 0)
        return pretok[0].pattern;
    if (strcmp(name, "starcoder") == 0 || strcmp(name, "smollm") == 0) /* ... and these as refact */
        return tok_pretok_pattern("refact");
    if (strcmp(name, "deepseek-r1-qwen") == 0) /* ... and DeepSeek's R1 distills of Qwen as Qwen 2 */
        return tok_pretok_pattern("qwen2");
    /* ... and ModernBERT's (OLMo's vocabulary) and OLMo's own as GPT-2 */
    if (strcmp(name, "modern-bert") == 0 || strcmp(name, "olmo") == 0)
        return tok_pretok_pattern("gpt2");
    return NULL;
}

const char *tok_pretok_name(const char *pattern)
{
    for (size_t i = 0; i < sizeof(pretok) / sizeof(pretok[0]); i++)
        if (strcmp(pretok[i].pattern, pattern) == 0)
            return pretok[i].name; /* gpt2 before default: same pattern */
    return NULL;
}

static pcre2_code *compile_one(const char *pattern, size_t len, llm_err *err)
{
    int code;
    PCRE2_SIZE at;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code,
                                   &at, NULL);
    if (re == NULL) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof(msg));
        llm_seterr(err, "pre-tokenizer regex: %s at offset %zu", (const char *)msg, (size_t)at);
        return NULL;
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: the interpreter is the fallback */
    return re;
}

int tok_compile_regex(llm_tokenizer *t, const char *pattern, llm_err *err)
{
    const char *stage = strstr(pattern, TOK_STAGE);
    if (stage != NULL) { /* a first stage: its pieces are split again by the rest */
        if ((t->re_first = compile_one(pattern, (size_t)(stage - pattern), err)) == NULL)
            return -1;
        pattern = stage + strlen(TOK_STAGE);
    }
    t->re = compile_one(pattern, PCRE2_ZERO_TERMINATED, err);
    return t->re != NULL ? 0 : -1;
}

static int encode_word(const llm_tokenizer *t, tok_work *w, const char *s, size_t n, tok_vec *out)
{
    if (n == 1 && t->byte_id[(unsigned char)s[0]] >= 0)
        return tok_vec_push(out, t->byte_id[(unsigned char)s[0]]);
    if (t->ignore_merges) {
        int32_t id = tok_map_get(&t->by_raw, s, n);
        if (id >= 0)
            return tok_vec_push(out, id);
    }
    w->nsym = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[(unsigned char)s[i]];
        if (tok_work_sym(w, id >= 0 ? id : t->unk, (uint32_t)i, 1, id < 0))
            return -1;
    }
    return tok_work_merge(t, w, s, 0, out);
}

/* The pieces of s[0..len) by t->re_first (stage 0, when the pre-tokenizer has two stages) or t->re: matches and
 * the text between them, each encoded (or, from the first stage, split again by t->re). */
static int split_encode(const llm_tokenizer *t, int stage, pcre2_match_data *md, tok_work *w, const char *s,
                        size_t len, tok_vec *out);

static int piece(const llm_tokenizer *t, int stage, pcre2_match_data *md, tok_work *w, const char *s, size_t n,
                 tok_vec *out)
{
    return stage == 0 ? split_encode(t, 1, md, w, s, n, out) : encode_word(t, w, s, n, out);
}

static int split_encode(const llm_tokenizer *t, int stage, pcre2_match_data *md, tok_work *w, const char *s,
                        size_t len, tok_vec *out)
{
    const pcre2_code *re = stage == 0 ? t->re_first : t->re;
    int rc = 0;
    size_t off = 0;
    while (off < len && rc == 0) {
        int m = pcre2_match(re, (PCRE2_SPTR)s, len, off, 0, md, NULL);
        if (m < 0 && m != PCRE2_ERROR_NOMATCH) /* JIT stack or match limit: retry interpreted */
            m = pcre2_match(re, (PCRE2_SPTR)s, len, off, PCRE2_NO_JIT, md, NULL);
        size_t ms = len, me = len;
        if (m >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            ms = ov[0];
            me = ov[1];
        } else if (m != PCRE2_ERROR_NOMATCH) {
            /* still failing (pathological input): take the rest one character at a time */
            int k = tok_utf8_len((const unsigned char *)s + off, len - off);
            ms = me = off + (k > 0 ? (size_t)k : 1);
            rc = piece(t, stage, md, w, s + off, ms - off, out);
            off = ms;
            continue;
        }
        /* (the pieces are encoded after ms / me are read: a second stage reuses md) */
        if (ms > off)
            rc = piece(t, stage, md, w, s + off, ms - off, out);
        if (rc == 0 && me > ms)
            rc = piece(t, stage, md, w, s + ms, me - ms, out);
        if (me == ms && ms < len) { /* empty match: step over one character as its own word */
            int k = tok_utf8_len((const unsigned char *)s + ms, len - ms);
            me = ms + (k > 0 ? (size_t)k : 1);
            if (rc == 0)
                rc = piece(t, stage, md, w, s + ms, me - ms, out);
        }
        off = me;
    }
    return rc;
}

int tok_bpe_encode(const llm_tokenizer *t, const char *s, size_t len, tok_vec *out)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re, NULL);
    if (md == NULL)
        return -1;
    tok_work w = { 0 };
    int rc = split_encode(t, t->re_first != NULL ? 0 : 1, md, &w, s, len, out);
    tok_work_free(&w);
    pcre2_match_data_free(md);
    return rc;
}
