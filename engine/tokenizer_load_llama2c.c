/* llama2.c tokenizer files (tokenizer.bin, tok512.bin): int32 max_token_length,
 * then per token f32 score, int32 byte length, bytes. '▁' is stored as a plain
 * space; id 0 is <unk>, 1 BOS, 2 EOS (spelt "\n<s>\n" / "\n</s>\n" by llama2.c's
 * exporter). */
#include "tokenizer_priv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILE (256u << 20)
#define MAX_TOKEN_BYTES 4096

/* Spell spaces as '▁' so the vocabulary reads like every SentencePiece one. */
static int set_token(llm_tokenizer *t, int id, const char *s, size_t n, float score, int type)
{
    char small[3 * 64], *sp = n * 3 <= sizeof(small) ? small : malloc(n * 3 + 1);
    if (sp == NULL)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(sp + k, "\xe2\x96\x81", 3);
            k += 3;
        } else {
            sp[k++] = s[i];
        }
    }
    int rc = tok_set(t, id, sp, k, score, type);
    if (sp != small)
        free(sp);
    return rc;
}

static int token_type(int id, const char *s, size_t n)
{
    if (id == 0 && n == 5 && memcmp(s, "<unk>", 5) == 0)
        return TOK_UNKNOWN;
    if (id == 1 || id == 2)
        return TOK_CONTROL;
    if (n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>')
        return TOK_BYTE;
    return TOK_NORMAL;
}

llm_tokenizer *llm_tok_load_llama2c(const char *path, int vocab_size_hint, llm_err *err)
{
    size_t size = 0;
    char *buf = llm_read_file(path, MAX_FILE, &size, err);
    if (buf == NULL)
        return NULL;
    llm_tokenizer *t = NULL;
    int32_t maxlen;
    if (size < 4 || (memcpy(&maxlen, buf, 4), maxlen <= 0 || maxlen > MAX_TOKEN_BYTES)) {
        llm_seterr(err, "%s: not a llama2.c tokenizer file (bad max_token_length)", path);
        goto fail;
    }
    /* First pass: count and validate the records. */
    int n_file = 0;
    size_t off = 4;
    while (off < size && (vocab_size_hint <= 0 || n_file < vocab_size_hint)) {
        int32_t len;
        float score;
        if (size - off < 8) {
            llm_seterr(err, "%s: truncated at token %d (record header)", path, n_file);
            goto fail;
        }
        memcpy(&score, buf + off, 4);
        memcpy(&len, buf + off + 4, 4);
        if (len < 0 || len > maxlen || !isfinite(score)) {
            llm_seterr(err, "%s: token %d has a bad length (%d, max %d) or score", path, n_file, (int)len, (int)maxlen);
            goto fail;
        }
        if (size - off - 8 < (size_t)len) {
            llm_seterr(err, "%s: truncated at token %d (%d bytes announced)", path, n_file, (int)len);
            goto fail;
        }
        off += 8 + (size_t)len;
        n_file++;
    }
    if (n_file < 3) {
        llm_seterr(err, "%s: only %d tokens (need <unk>, BOS, EOS at least)", path, n_file);
        goto fail;
    }
    int n_vocab = vocab_size_hint > n_file ? vocab_size_hint : n_file; /* model rows past the file: unused */
    t = tok_new(LLM_TOK_SPM, n_vocab);
    if (t == NULL) {
        llm_seterr(err, "%s: out of memory (or absurd vocabulary size %d)", path, n_vocab);
        goto fail;
    }
    off = 4;
    for (int id = 0; id < n_file; id++) {
        int32_t len;
        float score;
        memcpy(&score, buf + off, 4);
        memcpy(&len, buf + off + 4, 4);
        const char *s = buf + off + 8;
        size_t n = (size_t)len;
        off += 8 + n;
        int type = token_type(id, s, n);
        if (type == TOK_CONTROL) { /* "\n<s>\n" -> "<s>" */
            while (n > 0 && (s[0] == '\n' || s[0] == ' '))
                s++, n--;
            while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
                n--;
        }
        if (set_token(t, id, s, n, score, type)) {
            llm_seterr(err, "%s: out of memory", path);
            goto fail;
        }
    }
    t->unk = 0;
    t->bos = 1;
    t->eos = 2;
    t->add_bos = 1;
    t->add_space_prefix = 1;
    if (tok_finish(t, err))
        goto fail;
    free(buf);
    return t;
fail:
    llm_tok_free(t);
    free(buf);
    return NULL;
}
