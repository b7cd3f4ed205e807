/* Hugging Face tokenizer.json, model.type "BPE" in two kinds: byte-level BPE
 * (a ByteLevel pre-tokenizer, optionally behind a Split regex: Llama 3, Qwen)
 * and SentencePiece-style BPE (a normalizer that writes spaces as '▁', no
 * pre-tokenizer, <0xNN> byte-fallback tokens: Gemma, Llama 2). Plus
 * tokenizer_config.json beside it for the chat template, BOS/EOS and
 * add_bos_token. And model.type "WordPiece" (BERT-family embedding models),
 * respelt as GGUF has it (word-initial pieces "▁x", continuation pieces without
 * their "##"); the file alone says all it needs. model.type "Unigram": tokenizer_load_hf_ugm.c. */
#include "json_file.h"
#include "tokenizer_priv.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

/* A token given as "text" or {"content": "text"}. */
static const char *token_text(const cJSON *v)
{
    if (cJSON_IsString(v))
        return v->valuestring;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

const char *tok_hf_pretok_pattern(const cJSON *pt, const char *path, llm_err *err)
{
    const char *split = NULL;
    int byte_level = 0, digits = 0;
    const cJSON *list = NULL, *one = pt;
    if (!cJSON_IsObject(pt)) {
        llm_seterr(err, "%s: no pre-tokenizer (byte-level BPE needs a ByteLevel one)", path);
        return NULL;
    }
    if (cJSON_IsObject(pt) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(pt, "type")) &&
        strcmp(cJSON_GetObjectItemCaseSensitive(pt, "type")->valuestring, "Sequence") == 0) {
        list = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
        one = list ? list->child : NULL;
    }
    for (; one != NULL; one = list ? one->next : NULL) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(one, "type");
        const char *ty = cJSON_IsString(type) ? type->valuestring : "";
        if (strcmp(ty, "ByteLevel") == 0) {
            const cJSON *ur = cJSON_GetObjectItemCaseSensitive(one, "use_regex");
            const cJSON *ap = cJSON_GetObjectItemCaseSensitive(one, "add_prefix_space");
            if (cJSON_IsTrue(ap)) {
                llm_seterr(err, "%s: ByteLevel add_prefix_space is not supported", path);
                return NULL;
            }
            if (!cJSON_IsFalse(ur)) {
                if (split != NULL) {
                    llm_seterr(err, "%s: a Split regex and ByteLevel use_regex together are not supported", path);
                    return NULL;
                }
                split = tok_pretok_pattern("gpt2");
            }
            byte_level = 1;
        } else if (strcmp(ty, "Digits") == 0) { /* StarCoder / Granite: each digit its own piece, first */
            if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(one, "individual_digits")) || byte_level ||
                split != NULL) {
                llm_seterr(err, "%s: a Digits pre-tokenizer is supported first and with individual_digits", path);
                return NULL;
            }
            digits = 1;
        } else if (strcmp(ty, "Split") == 0) {
            const cJSON *re = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(one, "pattern"), "Regex");
            const cJSON *beh = cJSON_GetObjectItemCaseSensitive(one, "behavior");
            if (!cJSON_IsString(re) || split != NULL || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(one, "invert")) ||
                (cJSON_IsString(beh) && strcmp(beh->valuestring, "Isolated") != 0)) {
                llm_seterr(err, "%s: unsupported Split pre-tokenizer (need one Regex, behavior Isolated)", path);
                return NULL;
            }
            split = re->valuestring;
        } else {
            llm_seterr(err, "%s: unsupported pre-tokenizer \"%s\" (byte-level BPE only)", path, ty);
            return NULL;
        }
        if (list == NULL)
            break;
    }
    if (!byte_level || split == NULL) {
        llm_seterr(err, "%s: not a byte-level BPE tokenizer (no ByteLevel pre-tokenizer with a split pattern)", path);
        return NULL;
    }
    if (digits && split != tok_pretok_pattern("gpt2")) {
        llm_seterr(err, "%s: Digits before a Split regex is not supported (before ByteLevel's own: refact)", path);
        return NULL;
    }
    return digits ? tok_pretok_pattern("refact") : split;
}

/* A normalizer step of SentencePiece-style BPE: Replace " " -> "▁" (*replace), or Prepend "▁" (*prepend: the
 * dummy prefix, Llama 2's; Gemma has none). 0, or -1 for any other. */
static int spm_norm_step(const cJSON *n, int *replace, int *prepend)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(n, "type");
    const char *ty = cJSON_IsString(type) ? type->valuestring : "";
    if (strcmp(ty, "Replace") == 0) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "String");
        const cJSON *to = cJSON_GetObjectItemCaseSensitive(n, "content");
        if (!cJSON_IsString(pat) || !cJSON_IsString(to) || strcmp(pat->valuestring, " ") != 0 ||
            strcmp(to->valuestring, "\xe2\x96\x81") != 0)
            return -1;
        *replace = 1;
        return 0;
    }
    if (strcmp(ty, "Prepend") == 0) {
        const cJSON *pre = cJSON_GetObjectItemCaseSensitive(n, "prepend");
        if (!cJSON_IsString(pre) || strcmp(pre->valuestring, "\xe2\x96\x81") != 0)
            return -1;
        *prepend = 1;
        return 0;
    }
    return -1;
}

/* Whether the file is SentencePiece-style BPE: 1 (*prefix: a dummy prefix), 0 (no normalizer: byte-level BPE
 * decides), -1 + err (a normalizer or pre-tokenizer this code would not follow). */
static int spm_style(const cJSON *j, int *prefix, const char *path, llm_err *err)
{
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(j, "normalizer");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(j, "pre_tokenizer");
    int replace = 0, prepend = 0, bad = 0;
    if (norm == NULL || cJSON_IsNull(norm))
        return 0;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(norm, "type"), *list, *n;
    if (cJSON_IsString(type) && strcmp(type->valuestring, "Sequence") == 0 &&
        cJSON_IsArray(list = cJSON_GetObjectItemCaseSensitive(norm, "normalizers"))) {
        cJSON_ArrayForEach(n, list)
            bad |= spm_norm_step(n, &replace, &prepend);
    } else {
        bad = spm_norm_step(norm, &replace, &prepend);
    }
    if (bad || !replace) {
        llm_seterr(err, "%s: unsupported normalizer (only SentencePiece's: Replace \" \" with \"\xe2\x96\x81\", "
                        "and optionally Prepend \"\xe2\x96\x81\")", path);
        return -1;
    }
    if (pre != NULL && !cJSON_IsNull(pre)) {
        llm_seterr(err, "%s: a SentencePiece-style tokenizer with a pre-tokenizer is not supported", path);
        return -1;
    }
    *prefix = prepend;
    return 1;
}

/* tokenizer_config.json beside json_path: BOS / EOS, add_bos_token / add_eos_token, the chat template (or
 * chat_template.jinja / chat_template.json beside it: tok_hf_chat_template_file). Where it
 * says nothing of adding them, a post-processor `post` that wraps each text (ModernBERT's TemplateProcessing
 * "[CLS] $A [SEP]") decides, as llama.cpp's converter reads it: its first token as BOS, its last as EOS,
 * added. */
char *tok_hf_sibling(const char *beside, const char *name)
{
    const char *slash = strrchr(beside, '/');
    size_t dir = slash ? (size_t)(slash - beside + 1) : 0;
    char *p = malloc(dir + strlen(name) + 1);
    if (p != NULL) {
        memcpy(p, beside, dir);
        strcpy(p + dir, name);
    }
    return p;
}

static int load_config(llm_tokenizer *t, const char *json_path, const cJSON *post, llm_err *err)
{
    char *p = tok_hf_sibling(json_path, "tokenizer_config.json");
    if (p == NULL) {
        llm_seterr(err, "out of memory");
        return -1;
    }
    llm_err ignore;
    cJSON *c = llm_json_read_file(p, &ignore);
    free(p);
    int rc = tok_hf_apply_config(t, c, post, err);
    cJSON_Delete(c);
    return rc == 0 ? tok_hf_chat_template_file(t, json_path, err) : rc;
}

int tok_hf_chat_template_file(llm_tokenizer *t, const char *beside, llm_err *err)
{
    static const char *const names[2] = { "chat_template.jinja", "chat_template.json" };
    char *p = NULL;
    int i = 0;
    for (; i < 2; i++) { /* the first of the two that is there */
        free(p);
        if ((p = tok_hf_sibling(beside, names[i])) == NULL) {
            llm_seterr(err, "out of memory");
            return -1;
        }
        if (access(p, R_OK) == 0)
            break;
    }
    if (i == 2) {
        free(p);
        return 0;
    }
    size_t len;
    char *text = llm_read_file(p, (size_t)1 << 22, &len, err); /* (templates are tens of KB) */
    const char *bad = NULL;
    if (text != NULL && i == 1) { /* {"chat_template": "..."} */
        cJSON *j = cJSON_ParseWithLength(text, len);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
        free(text);
        text = cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
        bad = !cJSON_IsString(v) ? "not a JSON object with a chat_template string" : text == NULL ? "out of memory" : NULL;
        cJSON_Delete(j);
    } else if (text != NULL && strlen(text) != len) {
        bad = "a NUL byte in the template";
        free(text);
        text = NULL;
    }
    if (bad != NULL)
        llm_seterr(err, "%s: %s", p, bad);
    free(p);
    if (text == NULL)
        return -1;
    free(t->chat_template);
    t->chat_template = text;
    return 0;
}

int tok_hf_apply_config(llm_tokenizer *t, const cJSON *c, const cJSON *post, llm_err *err)
{
    const char *bos = t->kind == LLM_TOK_SPM ? "<s>" : "<|begin_of_text|>";
    const char *eos = t->kind == LLM_TOK_SPM ? "</s>" : "<|end_of_text|>";
    t->add_bos = -1;
    if (c != NULL) {
        const cJSON *v;
        if ((v = cJSON_GetObjectItemCaseSensitive(c, "bos_token")) != NULL)
            bos = token_text(v);
        if ((v = cJSON_GetObjectItemCaseSensitive(c, "eos_token")) != NULL)
            eos = token_text(v);
        if (cJSON_IsBool(v = cJSON_GetObjectItemCaseSensitive(c, "add_bos_token")))
            t->add_bos = cJSON_IsTrue(v);
        if (cJSON_IsBool(v = cJSON_GetObjectItemCaseSensitive(c, "add_eos_token")))
            t->add_eos = cJSON_IsTrue(v);
        v = cJSON_GetObjectItemCaseSensitive(c, "chat_template");
        if (cJSON_IsArray(v)) { /* [{name, template}]: "default", else the first */
            const cJSON *pick = NULL, *e;
            cJSON_ArrayForEach(e, v) {
                const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
                if (pick == NULL || (cJSON_IsString(nm) && strcmp(nm->valuestring, "default") == 0))
                    pick = e;
            }
            v = pick ? cJSON_GetObjectItemCaseSensitive(pick, "template") : NULL;
        }
        if (cJSON_IsString(v) && (t->chat_template = strdup(v->valuestring)) == NULL) {
            llm_seterr(err, "out of memory");
            return -1;
        }
    }
    const char *pre = NULL, *post_eos = NULL;
    int post_bos_on = 0, post_eos_on = 0;
    tok_hf_post_specials(post, &pre, &post_eos, &post_bos_on, &post_eos_on);
    int say_bos = cJSON_GetObjectItemCaseSensitive(c, "add_bos_token") != NULL,
        say_eos = cJSON_GetObjectItemCaseSensitive(c, "add_eos_token") != NULL;
    if (!say_bos && post_bos_on && pre != NULL && llm_tok_find(t, pre) >= 0) {
        bos = pre;
        t->add_bos = 1;
    }
    if (!say_eos && post_eos_on && post_eos != NULL && llm_tok_find(t, post_eos) >= 0) {
        eos = post_eos;
        t->add_eos = 1;
    }
    t->bos = bos ? llm_tok_find(t, bos) : -1;
    t->eos = eos ? llm_tok_find(t, eos) : -1;
    if (t->add_bos < 0)
        t->add_bos = t->bos >= 0;
    return 0;
}

static int load_merges(llm_tokenizer *t, const cJSON *merges, const char *path, llm_err *err)
{
    int n = cJSON_GetArraySize(merges);
    if (tok_set_merges_capacity(t, (size_t)n)) {
        llm_seterr(err, "%s: out of memory", path);
        return -1;
    }
    int rank = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges) {
        const char *a = NULL, *b = NULL;
        size_t alen = 0, blen = 0;
        if (cJSON_IsString(m)) { /* "a b" */
            const char *sp = strchr(m->valuestring, ' ');
            if (sp != NULL && sp != m->valuestring) {
                a = m->valuestring;
                alen = (size_t)(sp - a);
                b = sp + 1;
                blen = strlen(b);
            }
        } else if (cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
            a = m->child->valuestring;
            alen = strlen(a);
            b = m->child->next->valuestring;
            blen = strlen(b);
        }
        if (a == NULL || blen == 0 || tok_add_merge(t, a, alen, b, blen, rank) != 0) {
            llm_seterr(err, "%s: merge %d is malformed or names tokens missing from the vocabulary", path, rank);
            return -1;
        }
        rank++;
    }
    return 0;
}

/* A WordPiece vocabulary entry as llama.cpp's converter respells it: "##x" -> "x", "[...]" as it is,
 * any other "x" -> "▁x" (a word-initial piece). malloc'd. */
static char *wpm_spelling(const char *tok, const char *cont)
{
    size_t n = strlen(tok), k = strlen(cont);
    if (k > 0 && n > k && strncmp(tok, cont, k) == 0)
        return strdup(tok + k);
    if (n >= 2 && tok[0] == '[' && tok[n - 1] == ']')
        return strdup(tok);
    char *s = malloc(n + 4);
    if (s != NULL) {
        memcpy(s, "\xe2\x96\x81", 3);
        memcpy(s + 3, tok, n + 1);
    }
    return s;
}

/* BertNormalizer's lowercase and strip_accents (null: as lowercase), or a Sequence of Lowercase /
 * StripAccents / Unicode normal forms (these last read as nothing: the encoder does no normalisation).
 * -1 for any other step. No normalizer: neither. */
static int wpm_normalizer(const cJSON *n, int *lower, int *strip)
{
    if (n == NULL || cJSON_IsNull(n))
        return 0;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(n, "type"), *e;
    const char *ty = cJSON_IsString(type) ? type->valuestring : "";
    if (strcmp(ty, "Sequence") == 0) {
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(n, "normalizers"))
            if (wpm_normalizer(e, lower, strip))
                return -1;
        return 0;
    }
    if (strcmp(ty, "BertNormalizer") == 0) {
        const cJSON *lc = cJSON_GetObjectItemCaseSensitive(n, "lowercase");
        const cJSON *sa = cJSON_GetObjectItemCaseSensitive(n, "strip_accents");
        *lower = !cJSON_IsFalse(lc);
        *strip = cJSON_IsBool(sa) ? cJSON_IsTrue(sa) : *lower;
    } else if (strcmp(ty, "Lowercase") == 0) {
        *lower = 1;
    } else if (strcmp(ty, "StripAccents") == 0) {
        *strip = 1;
    } else if (strcmp(ty, "NFD") != 0 && strcmp(ty, "NFC") != 0 && strcmp(ty, "NFKD") != 0 &&
               strcmp(ty, "NFKC") != 0) {
        return -1;
    }
    return 0;
}

/* The post-processor's [CLS] ... [SEP] (BertProcessing / RobertaProcessing, or TemplateProcessing's single
 * template opening / closing with special tokens; within a Sequence too): their texts, and that they are
 * added. */
void tok_hf_post_specials(const cJSON *pp, const char **cls, const char **sep, int *add_bos, int *add_eos)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(pp, "type"), *e;
    const char *ty = cJSON_IsString(type) ? type->valuestring : "";
    if (strcmp(ty, "Sequence") == 0) {
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(pp, "processors"))
            tok_hf_post_specials(e, cls, sep, add_bos, add_eos);
    } else if (strcmp(ty, "BertProcessing") == 0 || strcmp(ty, "RobertaProcessing") == 0) {
        const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pp, "cls"), 0);
        const cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pp, "sep"), 0);
        if (cJSON_IsString(c))
            *cls = c->valuestring;
        if (cJSON_IsString(s))
            *sep = s->valuestring;
        *add_bos = *add_eos = 1;
    } else if (strcmp(ty, "TemplateProcessing") == 0) {
        const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
        int n = cJSON_GetArraySize(single);
        const cJSON *first = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, 0), "SpecialToken");
        const cJSON *last = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, n - 1), "SpecialToken");
        const cJSON *fid = cJSON_GetObjectItemCaseSensitive(first, "id");
        const cJSON *lid = cJSON_GetObjectItemCaseSensitive(last, "id");
        if (n > 1 && cJSON_IsString(fid)) {
            *cls = fid->valuestring;
            *add_bos = 1;
        }
        if (n > 1 && cJSON_IsString(lid)) {
            *sep = lid->valuestring;
            *add_eos = 1;
        }
    }
}

/* The vocabulary's size (its highest id, of vocab and added_tokens, plus one), every entry checked; 0 (empty)
 * or -1 with err. */
static int vocab_ids(const cJSON *vocab, const cJSON *added, const char *path, llm_err *err)
{
    long max_id = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= (1 << 24) || e->string == NULL) {
            llm_seterr(err, "%s: vocab entry \"%s\" has no valid id", path, e->string ? e->string : "?");
            return -1;
        }
        if (e->valueint > max_id)
            max_id = e->valueint;
    }
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= (1 << 24) ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "content"))) {
            llm_seterr(err, "%s: malformed added_tokens entry", path);
            return -1;
        }
        if (id->valueint > max_id)
            max_id = id->valueint;
    }
    if (max_id < 0)
        llm_seterr(err, "%s: empty vocabulary", path);
    return (int)max_id + 1;
}

static llm_tokenizer *load_wordpiece(const cJSON *j, const char *path, llm_err *err)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(j, "added_tokens");
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    const cJSON *cont = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix"), *e;
    const char *cls = "[CLS]", *sep = "[SEP]";
    int lower = 0, strip = 0, add_bos = 0, add_eos = 0, n;
    llm_tokenizer *t = NULL;
    if (!cJSON_IsObject(vocab)) {
        llm_seterr(err, "%s: WordPiece model without a vocab", path);
        return NULL;
    }
    if (wpm_normalizer(cJSON_GetObjectItemCaseSensitive(j, "normalizer"), &lower, &strip)) {
        llm_seterr(err, "%s: unsupported normalizer for WordPiece (BertNormalizer, Lowercase, StripAccents are)", path);
        return NULL;
    }
    if ((n = vocab_ids(vocab, added, path, err)) <= 0)
        return NULL;
    if ((t = tok_new(LLM_TOK_WPM, n)) == NULL) {
        llm_seterr(err, "%s: out of memory", path);
        return NULL;
    }
    cJSON_ArrayForEach(e, vocab) {
        char *text = wpm_spelling(e->string, cJSON_IsString(cont) ? cont->valuestring : "##");
        int ty = cJSON_IsString(unk) && strcmp(e->string, unk->valuestring) == 0 ? TOK_UNKNOWN : TOK_NORMAL;
        int rc = text == NULL || tok_set(t, e->valueint, text, strlen(text), 0.0f, ty);
        free(text);
        if (rc)
            goto oom;
    }
    cJSON_ArrayForEach(e, added) { /* [CLS], [SEP], [PAD], [MASK], [UNK]: spelt as themselves */
        const char *s = cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring;
        int special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"));
        if (tok_set(t, cJSON_GetObjectItemCaseSensitive(e, "id")->valueint, s, strlen(s), 0.0f,
                    special ? TOK_CONTROL : TOK_USER))
            goto oom;
    }
    if (tok_finish(t, err))
        goto fail;
    tok_hf_post_specials(cJSON_GetObjectItemCaseSensitive(j, "post_processor"), &cls, &sep, &add_bos, &add_eos);
    t->bos = llm_tok_find(t, cls);
    t->eos = llm_tok_find(t, sep);
    t->unk = llm_tok_find(t, cJSON_IsString(unk) ? unk->valuestring : "[UNK]");
    t->add_bos = add_bos && t->bos >= 0;
    t->add_eos = add_eos;
    t->wpm_lower = lower;
    t->wpm_strip = strip;
    return t;
oom:
    llm_seterr(err, "%s: out of memory", path);
fail:
    llm_tok_free(t);
    return NULL;
}

llm_tokenizer *llm_tok_load_hf(const char *path, llm_err *err)
{
    cJSON *j = llm_json_read_file(path, err);
    if (j == NULL)
        return NULL;
    llm_tokenizer *t = NULL;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    const cJSON *mtype = cJSON_GetObjectItemCaseSensitive(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(j, "added_tokens");
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    const cJSON *e;
    const char *pattern = NULL;
    int prefix = 0, byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"));
    if (cJSON_IsString(mtype) && strcmp(mtype->valuestring, "WordPiece") == 0) {
        t = load_wordpiece(j, path, err);
        cJSON_Delete(j);
        return t;
    }
    if (cJSON_IsString(mtype) && strcmp(mtype->valuestring, "Unigram") == 0) {
        t = tok_hf_load_unigram(j, path, err);
        cJSON_Delete(j);
        return t;
    }
    if (!cJSON_IsString(mtype) || strcmp(mtype->valuestring, "BPE") != 0 || !cJSON_IsObject(vocab) ||
        !cJSON_IsArray(merges)) {
        llm_seterr(err, "%s: model is not a BPE model with vocab and merges", path);
        goto fail;
    }
    int spm = spm_style(j, &prefix, path, err);
    if (spm < 0)
        goto fail;
    if (!spm)
        pattern = tok_hf_pretok_pattern(cJSON_GetObjectItemCaseSensitive(j, "pre_tokenizer"), path, err);
    if (!spm && pattern == NULL)
        goto fail;
    int n_vocab = vocab_ids(vocab, added, path, err);
    if (n_vocab <= 0)
        goto fail;
    if ((t = tok_new(spm ? LLM_TOK_SPM : LLM_TOK_BPE, n_vocab)) == NULL) {
        llm_seterr(err, "%s: out of memory", path);
        goto fail;
    }
    cJSON_ArrayForEach(e, vocab) {
        size_t len = strlen(e->string);
        int ty = TOK_NORMAL;
        if (spm && cJSON_IsString(unk) && strcmp(e->string, unk->valuestring) == 0) {
            ty = TOK_UNKNOWN; /* what a byte without a <0xNN> token becomes */
            t->unk = e->valueint;
        } else if (spm && byte_fallback && len == 6 && memcmp(e->string, "<0x", 3) == 0 && e->string[5] == '>') {
            ty = TOK_BYTE;
        }
        if (tok_set(t, e->valueint, e->string, len, 0.0f, ty)) {
            llm_seterr(err, "%s: out of memory", path);
            goto fail;
        }
    }
    cJSON_ArrayForEach(e, added) {
        const char *s = cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring;
        int special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"));
        if (tok_set(t, cJSON_GetObjectItemCaseSensitive(e, "id")->valueint, s, strlen(s), 0.0f,
                    special ? TOK_CONTROL : TOK_USER)) {
            llm_seterr(err, "%s: out of memory", path);
            goto fail;
        }
    }
    t->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
    if (spm)
        t->add_space_prefix = prefix;
    if (spm && t->ignore_merges) { /* a whole fragment taken as one token: not what SentencePiece does */
        llm_seterr(err, "%s: ignore_merges with a SentencePiece-style tokenizer is not supported", path);
        goto fail;
    }
    if (tok_finish(t, err) || (!spm && tok_compile_regex(t, pattern, err)) || load_merges(t, merges, path, err) ||
        load_config(t, path, cJSON_GetObjectItemCaseSensitive(j, "post_processor"), err))
        goto fail;
    cJSON_Delete(j);
    return t;
fail:
    llm_tok_free(t);
    cJSON_Delete(j);
    return NULL;
}
