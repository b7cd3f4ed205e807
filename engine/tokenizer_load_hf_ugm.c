/* Hugging Face tokenizer.json, model.type "Unigram" (XLM-RoBERTa's, as the tokenizers library converts a
 * SentencePiece unigram model: bge-m3, multilingual-e5, bge-reranker-v2-m3): the vocab's [piece, score]
 * pairs, unk_id, added_tokens; the normalizer's Precompiled charsmap (base64) and Replace of " {2,}" with
 * " " (SentencePiece's remove_extra_whitespaces); the Metaspace pre-tokenizer's '▁' in front of the text;
 * the post-processor's <s> ... </s>. Loaded into the tokenizer a GGUF "t5" vocabulary makes, so both
 * tokenize alike (tokenizer_ugm.c). Anything else in those places is refused rather than followed loosely. */
#include "tokenizer_priv.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static int b64_value(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A'
         : c >= 'a' && c <= 'z' ? c - 'a' + 26
         : c >= '0' && c <= '9' ? c - '0' + 52
         : c == '+'             ? 62
         : c == '/'             ? 63
                                : -1;
}

/* Standard base64 (padding optional); NULL if malformed or out of memory. */
static uint8_t *b64_decode(const char *s, size_t *n)
{
    size_t len = strlen(s);
    while (len > 0 && s[len - 1] == '=')
        len--;
    uint8_t *out = malloc(len / 4 * 3 + 3);
    if (out == NULL || len % 4 == 1) {
        free(out);
        return NULL;
    }
    uint32_t acc = 0;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = acc << 6 | (uint32_t)v;
        if (i % 4 == 3) {
            out[o++] = (uint8_t)(acc >> 16);
            out[o++] = (uint8_t)(acc >> 8);
            out[o++] = (uint8_t)acc;
        }
    }
    if (len % 4 == 2)
        out[o++] = (uint8_t)(acc >> 4);
    else if (len % 4 == 3) {
        out[o++] = (uint8_t)(acc >> 10);
        out[o++] = (uint8_t)(acc >> 2);
    }
    *n = o;
    return out;
}

static const char *type_of(const cJSON *o)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : "";
}

/* One normalizer step (a Sequence's steps in turn): the charsmap kept, remove_extra_whitespaces set. */
static int normalizer(llm_tokenizer *t, const cJSON *n, const char *path, llm_err *err)
{
    const char *ty = type_of(n), *e;
    const cJSON *x;
    if (n == NULL || cJSON_IsNull(n))
        return 0;
    if (strcmp(ty, "Sequence") == 0) {
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(n, "normalizers"))
            if (normalizer(t, x, path, err))
                return -1;
        return 0;
    }
    if (strcmp(ty, "Precompiled") == 0) {
        x = cJSON_GetObjectItemCaseSensitive(n, "precompiled_charsmap");
        if (cJSON_IsNull(x) || (cJSON_IsString(x) && x->valuestring[0] == 0))
            return 0;
        size_t len = 0;
        uint8_t *blob = cJSON_IsString(x) ? b64_decode(x->valuestring, &len) : NULL;
        if (blob == NULL) {
            llm_seterr(err, "%s: precompiled_charsmap is not base64", path);
            return -1;
        }
        int rc = tok_ugm_set_charsmap(t, blob, len, err);
        free(blob);
        return rc;
    }
    if (strcmp(ty, "Replace") == 0) { /* " {2,}" -> " ": runs of spaces become one */
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(n, "pattern"), *content;
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
        content = cJSON_GetObjectItemCaseSensitive(n, "content");
        if (cJSON_IsString(re) && strcmp(re->valuestring, " {2,}") == 0 && cJSON_IsString(content) &&
            strcmp(content->valuestring, " ") == 0) {
            t->ugm_merge_spaces = 1;
            return 0;
        }
        e = "a Replace other than \" {2,}\" -> \" \"";
    } else {
        e = ty[0] ? ty : "(no type)";
    }
    llm_seterr(err, "%s: unsupported normalizer step %s for a Unigram tokenizer (Precompiled and Replace of runs "
               "of spaces are supported)", path, e);
    return -1;
}

/* The pre-tokenizer: Metaspace (its '▁' in front of the text or not), in a Sequence with WhitespaceSplit. */
static int pre_tokenizer(llm_tokenizer *t, const cJSON *p, const char *path, llm_err *err)
{
    const char *ty = type_of(p);
    const cJSON *x;
    if (strcmp(ty, "Sequence") == 0) {
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(p, "pretokenizers"))
            if (pre_tokenizer(t, x, path, err))
                return -1;
        return 0;
    }
    if (strcmp(ty, "WhitespaceSplit") == 0)
        return 0;
    if (strcmp(ty, "Metaspace") == 0) {
        const cJSON *rep = cJSON_GetObjectItemCaseSensitive(p, "replacement");
        const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(p, "prepend_scheme");
        const cJSON *add = cJSON_GetObjectItemCaseSensitive(p, "add_prefix_space");
        if (cJSON_IsString(rep) && strcmp(rep->valuestring, "\xe2\x96\x81") != 0) {
            llm_seterr(err, "%s: Metaspace replacement other than U+2581 is not supported", path);
            return -1;
        }
        t->add_space_prefix = cJSON_IsString(scheme) ? strcmp(scheme->valuestring, "never") != 0
                              : cJSON_IsBool(add)    ? cJSON_IsTrue(add)
                                                     : 1;
        return 0;
    }
    llm_seterr(err, "%s: unsupported pre-tokenizer %s for a Unigram tokenizer (Metaspace is)", path,
               ty[0] ? ty : "(no type)");
    return -1;
}

llm_tokenizer *tok_hf_load_unigram(const cJSON *j, const char *path, llm_err *err)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(j, "added_tokens");
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_id"), *e;
    int n = cJSON_GetArraySize(vocab), id = 0, add_bos = 0, add_eos = 0;
    const char *bos = "<s>", *eos = "</s>";
    if (!cJSON_IsArray(vocab) || n <= 0 || n > (1 << 24)) {
        llm_seterr(err, "%s: Unigram model without a vocab of [piece, score] pairs", path);
        return NULL;
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"))) {
        llm_seterr(err, "%s: a Unigram model with byte_fallback is not supported", path);
        return NULL;
    }
    cJSON_ArrayForEach(e, added) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble >= n ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "content"))) {
            llm_seterr(err, "%s: an added_tokens entry outside the vocab or malformed", path);
            return NULL;
        }
    }
    llm_tokenizer *t = tok_new(LLM_TOK_UGM, n);
    if (t == NULL) {
        llm_seterr(err, "%s: out of memory", path);
        return NULL;
    }
    cJSON_ArrayForEach(e, vocab) {
        const cJSON *piece = cJSON_GetArrayItem(e, 0), *score = cJSON_GetArrayItem(e, 1);
        if (cJSON_GetArraySize(e) != 2 || !cJSON_IsString(piece) || !cJSON_IsNumber(score)) {
            llm_seterr(err, "%s: vocab entry %d is not a [piece, score] pair", path, id);
            goto fail;
        }
        int ty = cJSON_IsNumber(unk) && unk->valueint == id ? TOK_UNKNOWN : TOK_NORMAL;
        if (tok_set(t, id, piece->valuestring, strlen(piece->valuestring), (float)score->valuedouble, ty))
            goto oom;
        id++;
    }
    cJSON_ArrayForEach(e, added) { /* <s>, <pad>, </s>, <mask>: control; others the user's */
        int aid = cJSON_GetObjectItemCaseSensitive(e, "id")->valueint;
        const char *s = cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring;
        int ty = cJSON_IsNumber(unk) && unk->valueint == aid ? TOK_UNKNOWN
               : cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) ? TOK_CONTROL
                                                                              : TOK_USER;
        if (tok_set(t, aid, s, strlen(s), t->score[aid], ty))
            goto oom;
    }
    t->unk = cJSON_IsNumber(unk) && unk->valueint >= 0 && unk->valueint < n ? unk->valueint : -1;
    if (t->unk < 0) {
        llm_seterr(err, "%s: a Unigram model needs unk_id", path);
        goto fail;
    }
    t->add_space_prefix = 1;
    if (normalizer(t, cJSON_GetObjectItemCaseSensitive(j, "normalizer"), path, err) ||
        pre_tokenizer(t, cJSON_GetObjectItemCaseSensitive(j, "pre_tokenizer"), path, err) || tok_finish(t, err))
        goto fail;
    tok_hf_post_specials(cJSON_GetObjectItemCaseSensitive(j, "post_processor"), &bos, &eos, &add_bos, &add_eos);
    t->bos = llm_tok_find(t, bos);
    t->eos = llm_tok_find(t, eos);
    t->add_bos = add_bos && t->bos >= 0;
    t->add_eos = add_eos && t->eos >= 0;
    return t;
oom:
    llm_seterr(err, "%s: out of memory", path);
fail:
    llm_tok_free(t);
    return NULL;
}
