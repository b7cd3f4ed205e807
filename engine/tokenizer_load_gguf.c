/* GGUF tokenizer metadata (tokenizer.ggml.*): model "llama" (SentencePiece
 * vocabulary with scores and token types), "gpt2" (byte-level BPE with merges
 * "a b" and a named pre-tokenizer), "bert" (WordPiece: word-initial pieces
 * spelt "▁...", continuation pieces bare, no scores) or "t5" (SentencePiece
 * Unigram: pieces with log-probability scores and the precompiled charsmap). */
#include "tokenizer_priv.h"

#include "gguf.h"

#include <stdlib.h>
#include <string.h>

/* An array entry: *out NULL if absent; -1 if present with the wrong element
 * type (want, or any for GGUF_TYPE_ARRAY) or count (n, 0 = any). */
static int array_kv(const gguf_ctx *g, const char *key, gguf_type want, uint64_t n, const gguf_kv **out, llm_err *err)
{
    const gguf_kv *kv = gguf_find_kv(g, key);
    *out = NULL;
    if (kv == NULL)
        return 0;
    if (kv->type != GGUF_TYPE_ARRAY || (want != GGUF_TYPE_ARRAY && kv->arr_type != want) || (n && kv->arr_n != n) ||
        (kv->arr_type == GGUF_TYPE_STRING && kv->arr_n > 0 && kv->strs == NULL)) {
        llm_seterr(err, "GGUF: %s has the wrong type or length", key);
        return -1;
    }
    *out = kv;
    return 0;
}

static int get_id(const gguf_ctx *g, const char *key, int n_vocab, int dflt)
{
    int64_t v;
    if (gguf_get_i64(g, key, &v) != 0 || v < 0 || v >= n_vocab)
        return dflt;
    return (int)v;
}

static int is_byte_text(const char *s, size_t n)
{
    return n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>';
}

/* WordPiece: special ids missing from the metadata found by their BERT names (llama.cpp assumes BERT's own
 * ids 100-103 instead), and BertNormalizer's switches (strip_accents follows lowercase unless given). */
static int wpm_defaults(const gguf_ctx *g, llm_tokenizer *t, llm_err *err)
{
    if (tok_finish(t, err)) /* the text map, to look names up */
        return -1;
    if (t->bos < 0)
        t->bos = llm_tok_find(t, "[CLS]");
    if (t->eos < 0)
        t->eos = llm_tok_find(t, "[SEP]");
    if (t->unk < 0)
        t->unk = llm_tok_find(t, "[UNK]");
    int flag;
    t->wpm_lower = gguf_get_bool(g, "tokenizer.ggml.normalizer.lowercase", &flag) == 0 ? flag : 1;
    t->wpm_strip = gguf_get_bool(g, "tokenizer.ggml.normalizer.strip_accents", &flag) == 0 ? flag : t->wpm_lower;
    return 0;
}

llm_tokenizer *llm_tok_load_gguf(const struct gguf_ctx *g, llm_err *err)
{
    char model[32] = "", pre[64] = "default";
    if (gguf_get_str(g, "tokenizer.ggml.model", model, sizeof(model)) != 0) {
        llm_seterr(err, "GGUF: no tokenizer.ggml.model");
        return NULL;
    }
    llm_tok_kind kind;
    if (strcmp(model, "llama") == 0)
        kind = LLM_TOK_SPM;
    else if (strcmp(model, "gpt2") == 0)
        kind = LLM_TOK_BPE;
    else if (strcmp(model, "bert") == 0)
        kind = LLM_TOK_WPM;
    else if (strcmp(model, "t5") == 0)
        kind = LLM_TOK_UGM;
    else {
        llm_seterr(err, "GGUF: unsupported tokenizer model \"%s\" (llama, gpt2, bert and t5 are)", model);
        return NULL;
    }
    const gguf_kv *toks, *scores, *types, *merges = NULL;
    if (array_kv(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, 0, &toks, err))
        return NULL;
    if (toks == NULL || toks->arr_n == 0 || toks->arr_n > (1u << 24)) {
        llm_seterr(err, "GGUF: tokenizer.ggml.tokens missing, empty or too large");
        return NULL;
    }
    int n = (int)toks->arr_n;
    if (array_kv(g, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY, (uint64_t)n, &scores, err) ||
        array_kv(g, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY, (uint64_t)n, &types, err) ||
        (kind == LLM_TOK_BPE && array_kv(g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, 0, &merges, err)))
        return NULL;
    if (kind == LLM_TOK_BPE && merges == NULL) {
        llm_seterr(err, "GGUF: gpt2 tokenizer without tokenizer.ggml.merges");
        return NULL;
    }
    llm_tokenizer *t = tok_new(kind, n);
    if (t == NULL) {
        llm_seterr(err, "GGUF: out of memory");
        return NULL;
    }
    int bos = get_id(g, "tokenizer.ggml.bos_token_id", n, kind == LLM_TOK_SPM && n > 1 ? 1 : -1);
    int eos = get_id(g, "tokenizer.ggml.eos_token_id", n, kind == LLM_TOK_SPM && n > 2 ? 2 : -1);
    int unk = get_id(g, "tokenizer.ggml.unknown_token_id", n, -1);
    if (kind == LLM_TOK_UGM) { /* llama.cpp's defaults for "t5": no BOS, EOS 1, unknown 2 */
        bos = get_id(g, "tokenizer.ggml.bos_token_id", n, -1);
        eos = get_id(g, "tokenizer.ggml.eos_token_id", n, n > 1 ? 1 : -1);
        unk = get_id(g, "tokenizer.ggml.unknown_token_id", n, n > 2 ? 2 : -1);
    }
    if (kind == LLM_TOK_WPM) { /* [CLS] text [SEP]: older converters name them cls / seperator (sic) only */
        bos = get_id(g, "tokenizer.ggml.bos_token_id", n, get_id(g, "tokenizer.ggml.cls_token_id", n, -1));
        eos = get_id(g, "tokenizer.ggml.seperator_token_id", n, eos);
    }
    for (int id = 0; id < n; id++) {
        float sc = 0.0f;
        int64_t ty = TOK_NORMAL;
        const gguf_str *s = &toks->strs[id];
        if ((scores && gguf_arr_f32(scores, (uint64_t)id, &sc) != 0) ||
            (types && gguf_arr_i64(types, (uint64_t)id, &ty) != 0)) {
            llm_seterr(err, "GGUF: tokenizer.ggml.scores / token_type have non-numeric elements");
            goto fail;
        }
        if (types == NULL) { /* infer what the file does not say */
            if (id == bos || id == eos)
                ty = TOK_CONTROL;
            else if (id == unk)
                ty = TOK_UNKNOWN;
            else if (kind == LLM_TOK_SPM && is_byte_text(s->ptr, (size_t)s->len))
                ty = TOK_BYTE;
        }
        if (ty < TOK_NORMAL || ty > TOK_BYTE)
            ty = TOK_NORMAL;
        if (s->len > (1u << 20) || tok_set(t, id, s->ptr, (size_t)s->len, sc, (int)ty)) {
            llm_seterr(err, "GGUF: token %d is too long or out of memory", id);
            goto fail;
        }
    }
    t->bos = bos;
    t->eos = eos;
    t->unk = unk;
    if (kind == LLM_TOK_WPM && wpm_defaults(g, t, err))
        goto fail;
    int flag;
    if (kind == LLM_TOK_UGM) {
        const gguf_kv *cm = gguf_find_kv(g, "tokenizer.ggml.precompiled_charsmap");
        if (cm != NULL && (cm->type != GGUF_TYPE_ARRAY || (cm->arr_type != GGUF_TYPE_UINT8 && cm->arr_type != GGUF_TYPE_INT8))) {
            llm_seterr(err, "GGUF: tokenizer.ggml.precompiled_charsmap is not an array of bytes");
            goto fail;
        }
        if (cm != NULL && tok_ugm_set_charsmap(t, cm->data, (size_t)cm->arr_n, err))
            goto fail;
        t->ugm_merge_spaces = gguf_get_bool(g, "tokenizer.ggml.remove_extra_whitespaces", &flag) == 0 && flag;
        if (unk < 0) {
            llm_seterr(err, "GGUF: a t5 (Unigram) vocabulary needs an unknown token");
            goto fail;
        }
    }
    t->add_bos = gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &flag) == 0 ? flag
                 : kind == LLM_TOK_UGM                                          ? 0
                                                                                : (t->bos >= 0);
    static const char *const fim_keys[2][3] = {
        { "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.fim_mid_token_id" },
        { "tokenizer.ggml.prefix_token_id", "tokenizer.ggml.suffix_token_id", "tokenizer.ggml.middle_token_id" },
    };
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 3; i++) {
            int64_t id;
            if (t->fim[i] < 0 && gguf_get_i64(g, fim_keys[k][i], &id) == 0 && id >= 0 && id < n)
                t->fim[i] = (int32_t)id;
        }
    static const char *const repo_keys[2] = { "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id" };
    for (int i = 0; i < 2; i++) {
        int64_t id;
        if (gguf_get_i64(g, repo_keys[i], &id) == 0 && id >= 0 && id < n)
            t->fim_repo[i] = (int32_t)id;
    }
    t->add_eos = gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &flag) == 0 ? flag
                                                                               : kind == LLM_TOK_WPM || kind == LLM_TOK_UGM;
    t->add_space_prefix = gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &flag) == 0 ? flag : 1;
    const gguf_kv *tmpl = gguf_find_kv(g, "tokenizer.chat_template");
    if (tmpl != NULL && tmpl->type == GGUF_TYPE_STRING && tmpl->strs != NULL) {
        t->chat_template = malloc((size_t)tmpl->strs[0].len + 1);
        if (t->chat_template == NULL) {
            llm_seterr(err, "GGUF: out of memory");
            goto fail;
        }
        memcpy(t->chat_template, tmpl->strs[0].ptr, (size_t)tmpl->strs[0].len);
        t->chat_template[tmpl->strs[0].len] = 0;
    }
    if (tok_finish(t, err))
        goto fail;
    if (kind == LLM_TOK_BPE) {
        gguf_get_str(g, "tokenizer.ggml.pre", pre, sizeof(pre));
        const char *pattern = tok_pretok_pattern(pre);
        if (pattern == NULL) {
            llm_seterr(err, "GGUF: unsupported pre-tokenizer \"%s\" (tokenizer.ggml.pre)", pre);
            goto fail;
        }
        t->ignore_merges = strcmp(pre, "llama-bpe") == 0 || strcmp(pre, "llama3") == 0;
        if (tok_compile_regex(t, pattern, err))
            goto fail;
        if (merges->arr_n > (1u << 26) || tok_set_merges_capacity(t, (size_t)merges->arr_n)) {
            llm_seterr(err, "GGUF: too many merges or out of memory");
            goto fail;
        }
        for (uint64_t i = 0; i < merges->arr_n; i++) {
            const gguf_str *m = &merges->strs[i];
            const char *sp = m->len ? memchr(m->ptr, ' ', (size_t)m->len) : NULL;
            if (sp == NULL || sp == m->ptr || sp == m->ptr + m->len - 1 ||
                tok_add_merge(t, m->ptr, (size_t)(sp - m->ptr), sp + 1, (size_t)(m->ptr + m->len - sp - 1), (int)i)) {
                llm_seterr(err, "GGUF: merge %llu is malformed or names unknown tokens", (unsigned long long)i);
                goto fail;
            }
        }
    }
    return t;
fail:
    llm_tok_free(t);
    return NULL;
}
