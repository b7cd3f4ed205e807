/* Tokenizer metadata for GGUF files we write: SentencePiece "llama" vocabularies
 * from llama2.c tokenizer files, byte-level BPE from Hugging Face tokenizer.json,
 * and WordPiece "bert" vocabularies derived from llama2.c tokenizer files or from a
 * loaded WordPiece tokenizer (a Hugging Face BERT directory's tokenizer.json). */
#include "json_file.h"
#include "model_write.h"
#include "tokenizer_priv.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_byte_token(const char *s)
{
    return strlen(s) == 6 && strncmp(s, "<0x", 3) == 0 && s[5] == '>';
}

/* Spaces become U+2581 ('▁'), as SentencePiece vocabularies store them. */
static char *spm_text(const char *raw, size_t n)
{
    size_t sp = 0;
    for (size_t i = 0; i < n; i++)
        sp += raw[i] == ' ';
    char *s = malloc(n + 2 * sp + 1), *o = s;
    if (s == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (raw[i] == ' ') {
            memcpy(o, "\xe2\x96\x81", 3);
            o += 3;
        } else {
            *o++ = raw[i];
        }
    }
    *o = 0;
    return s;
}

int llm_gguf_w_spm_from_llama2c(gguf_writer *w, const char *tok_path, int vocab_size, llm_err *err)
{
    FILE *f = fopen(tok_path, "rb");
    if (f == NULL) {
        llm_seterr(err, "%s: cannot open tokenizer: %s", tok_path, strerror(errno));
        return -1;
    }
    int n = vocab_size, n_file = 0, rc = -1;
    char **tok = calloc((size_t)n, sizeof(char *)), **sorted = NULL;
    float *score = calloc((size_t)n, sizeof(float));
    int32_t *type = calloc((size_t)n, sizeof(int32_t));
    int32_t maxlen;
    if (tok == NULL || score == NULL || type == NULL) {
        llm_seterr(err, "%s: out of memory", tok_path);
        goto out;
    }
    if (fread(&maxlen, 4, 1, f) != 1 || maxlen <= 0 || maxlen > 4096) {
        llm_seterr(err, "%s: not a llama2.c tokenizer file", tok_path);
        goto out;
    }
    char buf[4097];
    float min_score = 0;
    for (; n_file < n; n_file++) {
        int32_t len;
        if (fread(&score[n_file], 4, 1, f) != 1)
            break; /* fewer tokens than the model's vocabulary: synthesized below */
        if (fread(&len, 4, 1, f) != 1 || len < 0 || len > maxlen || fread(buf, 1, (size_t)len, f) != (size_t)len) {
            llm_seterr(err, "%s: truncated tokenizer entry %d", tok_path, n_file);
            goto out;
        }
        buf[len] = 0;
        int id = n_file;
        /* llama2.c stores BOS/EOS text as "\n<s>\n" / "\n</s>\n". */
        const char *fixed = id == 0 ? "<unk>" : id == 1 ? "<s>" : id == 2 ? "</s>" : NULL;
        tok[id] = fixed ? strdup(fixed) : spm_text(buf, (size_t)len);
        if (tok[id] == NULL) {
            llm_seterr(err, "%s: out of memory", tok_path);
            goto out;
        }
        type[id] = id == 0 ? TT_UNKNOWN : id <= 2 ? TT_CONTROL : is_byte_token(tok[id]) ? TT_BYTE : TT_NORMAL;
        if (score[id] < min_score)
            min_score = score[id];
    }
    if (n_file < 259) {
        llm_seterr(err, "%s: has %d tokens; an SPM vocabulary needs <unk>, <s>, </s> and 256 byte tokens",
                   tok_path, n_file);
        goto out;
    }
    /* Distinct synthesized pieces: '▁' + bijective base-26 letters, skipping any the file has. */
    sorted = malloc((size_t)n_file * sizeof(char *));
    if (sorted == NULL) {
        llm_seterr(err, "%s: out of memory", tok_path);
        goto out;
    }
    memcpy(sorted, tok, (size_t)n_file * sizeof(char *));
    qsort(sorted, (size_t)n_file, sizeof(char *), cmp_str);
    uint64_t counter = 26 * 26; /* start at three letters */
    for (int id = n_file; id < n; id++) {
        char cand[32];
        for (;;) {
            char letters[16];
            int k = 0;
            for (uint64_t v = ++counter; v > 0 && k < 15; v = (v - 1) / 26)
                letters[k++] = (char)('a' + (v - 1) % 26);
            memcpy(cand, "\xe2\x96\x81", 3);
            for (int i = 0; i < k; i++)
                cand[3 + i] = letters[k - 1 - i];
            cand[3 + k] = 0;
            const char *key = cand;
            if (bsearch(&key, sorted, (size_t)n_file, sizeof(char *), cmp_str) == NULL)
                break;
        }
        if ((tok[id] = strdup(cand)) == NULL) {
            llm_seterr(err, "%s: out of memory", tok_path);
            goto out;
        }
        score[id] = min_score - 1.0f - (float)(id - n_file) * 0.01f;
        type[id] = TT_NORMAL;
    }
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, NULL, (uint64_t)n);
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, score, (uint64_t)n);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, (uint64_t)n);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1);
    gguf_w_bool(w, "tokenizer.ggml.add_eos_token", 0);
    rc = 0;
out:
    fclose(f);
    if (tok != NULL)
        for (int i = 0; i < n; i++)
            free(tok[i]);
    free(tok);
    free(sorted);
    free(score);
    free(type);
    return rc;
}

/* ---- WordPiece ("bert") from a llama2.c tokenizer file ---- */

static int has_token(char **tok, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(tok[i], s) == 0)
            return 1;
    return 0;
}

/* Append a copy of s unless the vocabulary has it already. */
static int add_token(char ***tok, int *n, int *cap, const char *s)
{
    if (has_token(*tok, *n, s))
        return 0;
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 1024;
        char **p = realloc(*tok, (size_t)nc * sizeof(char *));
        if (p == NULL)
            return -1;
        *tok = p;
        *cap = nc;
    }
    return ((*tok)[*n] = strdup(s)) != NULL ? ((*n)++, 0) : -1;
}

/* A llama2.c piece (spaces as ' ') as WordPiece spells it, lowercased: " word" -> "▁word" (word-initial),
 * "ing" -> "ing" (continuation). 0 with out[0] = 0 for pieces no word can contain (empty, inner spaces,
 * invalid UTF-8); -1 if it does not fit. */
static int wpm_piece(const char *raw, size_t n, char *out, size_t cap)
{
    size_t o = 0, i = raw[0] == ' ';
    out[0] = 0;
    if (i == n) /* " " alone: no word is empty */
        return 0;
    if (i == 1) {
        memcpy(out, "\xe2\x96\x81", 3);
        o = 3;
    }
    while (i < n) {
        int k = tok_utf8_len((const unsigned char *)raw + i, n - i);
        if (k == 0 || raw[i] == ' ') {
            out[0] = 0;
            return 0;
        }
        if (o + 5 > cap)
            return -1;
        if (k <= 2) { /* what tok_wpm_lower changes lies below U+0800, and stays there */
            const unsigned char *u = (const unsigned char *)raw + i;
            uint32_t c = tok_wpm_lower(k == 1 ? u[0] : (uint32_t)(u[0] & 0x1f) << 6 | (u[1] & 0x3f));
            if (c >= 0x80)
                out[o++] = (char)(0xc0 | c >> 6);
            out[o++] = (char)(c >= 0x80 ? 0x80 | (c & 0x3f) : c);
        } else {
            memcpy(out + o, raw + i, (size_t)k);
            o += (size_t)k;
        }
        i += (size_t)k;
    }
    out[o] = 0;
    return 0;
}

void llm_wpm_vocab_free(char **tokens, int n)
{
    if (tokens != NULL)
        for (int i = 0; i < n; i++)
            free(tokens[i]);
    free(tokens);
}

int llm_wpm_vocab_from_llama2c(const char *tok_path, char ***tokens, int *n, llm_err *err)
{
    static const char *const specials[] = { "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]" };
    FILE *f = fopen(tok_path, "rb");
    if (f == NULL) {
        llm_seterr(err, "%s: cannot open tokenizer: %s", tok_path, strerror(errno));
        return -1;
    }
    char **tok = NULL, buf[4097], piece[4 * 4097];
    int nt = 0, cap = 0, rc = -1, n_file = 0;
    int32_t maxlen, len;
    float score;
    if (fread(&maxlen, 4, 1, f) != 1 || maxlen <= 0 || maxlen > 4096) {
        llm_seterr(err, "%s: not a llama2.c tokenizer file", tok_path);
        goto out;
    }
    for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++)
        if (add_token(&tok, &nt, &cap, specials[i]))
            goto oom;
    for (; fread(&score, 4, 1, f) == 1; n_file++) {
        if (fread(&len, 4, 1, f) != 1 || len < 0 || len > maxlen || fread(buf, 1, (size_t)len, f) != (size_t)len) {
            llm_seterr(err, "%s: truncated tokenizer entry %d", tok_path, n_file);
            goto out;
        }
        buf[len] = 0;
        /* <unk>, <s>, </s> (ids 0-2) and the <0xNN> byte tokens have no WordPiece counterpart */
        if (n_file < 3 || len == 0 || is_byte_token(buf))
            continue;
        if (wpm_piece(buf, (size_t)len, piece, sizeof(piece)) != 0 || (piece[0] && add_token(&tok, &nt, &cap, piece)))
            goto oom;
    }
    for (int c = '!'; c <= '~'; c++) { /* every ASCII word spells out; capitals are lowercased away */
        char one[5] = "\xe2\x96\x81";
        if (c >= 'A' && c <= 'Z')
            continue;
        one[3] = (char)c;
        if (add_token(&tok, &nt, &cap, one) || add_token(&tok, &nt, &cap, one + 3))
            goto oom;
    }
    rc = 0;
    goto out;
oom:
    llm_seterr(err, "%s: out of memory", tok_path);
out:
    fclose(f);
    if (rc == 0 && tokens != NULL) {
        *tokens = tok;
        tok = NULL;
    }
    if (rc == 0)
        *n = nt;
    llm_wpm_vocab_free(tok, nt);
    return rc;
}

int llm_gguf_w_wpm_from_llama2c(gguf_writer *w, const char *tok_path, int pad_to, int *n_vocab, llm_err *err)
{
    char **tok;
    int n0, n;
    if (llm_wpm_vocab_from_llama2c(tok_path, &tok, &n0, err))
        return -1;
    n = pad_to > n0 && pad_to <= (1 << 20) ? pad_to : n0;
    char **grown = n > n0 ? realloc(tok, (size_t)n * sizeof(char *)) : tok;
    int32_t *type = grown != NULL ? malloc((size_t)n * sizeof(int32_t)) : NULL;
    if (grown != NULL)
        tok = grown;
    int made = n0;
    for (; type != NULL && made < n; made++) { /* BERT's own spare rows are named so */
        char name[32];
        snprintf(name, sizeof(name), "[unused%d]", made - n0);
        if ((tok[made] = strdup(name)) == NULL)
            break;
    }
    if (type == NULL || made < n) {
        llm_wpm_vocab_free(tok, made);
        free(type);
        llm_seterr(err, "%s: out of memory", tok_path);
        return -1;
    }
    if (n_vocab != NULL)
        *n_vocab = n;
    for (int i = 0; i < n; i++)
        type[i] = i < 5 ? TT_CONTROL : i < n0 ? TT_NORMAL : TT_UNUSED;
    gguf_w_str(w, "tokenizer.ggml.model", "bert");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, NULL, (uint64_t)n);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, (uint64_t)n);
    gguf_w_u32(w, "tokenizer.ggml.token_type_count", 2); /* BERT's segments A and B: token_types.weight's rows */
    /* llama.cpp's converter: BOS / EOS as [CLS] / [SEP], and the BERT names besides */
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 2);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 3);
    gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 1);
    gguf_w_u32(w, "tokenizer.ggml.seperator_token_id", 3);
    gguf_w_u32(w, "tokenizer.ggml.padding_token_id", 0);
    gguf_w_u32(w, "tokenizer.ggml.cls_token_id", 2);
    gguf_w_u32(w, "tokenizer.ggml.mask_token_id", 4);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1);
    gguf_w_bool(w, "tokenizer.ggml.add_eos_token", 1);
    free(type);
    llm_wpm_vocab_free(tok, n);
    return 0;
}

int llm_gguf_w_vocab(gguf_writer *w, const llm_tokenizer *t, llm_err *err)
{
    const char **tok = malloc((size_t)t->n_vocab * sizeof(char *));
    size_t *len = malloc((size_t)t->n_vocab * sizeof(size_t));
    int32_t *type = malloc((size_t)t->n_vocab * sizeof(int32_t));
    if (tok != NULL && len != NULL && type != NULL) {
        for (int i = 0; i < t->n_vocab; i++) { /* the vocabulary's own spelling ("▁word", pieces bare) */
            tok[i] = t->text_arena + t->text_off[i];
            len[i] = t->text_len[i];
            type[i] = t->type[i];
        }
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", tok, len, (uint64_t)t->n_vocab);
        gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, (uint64_t)t->n_vocab);
    } else {
        llm_seterr(err, "out of memory");
    }
    int rc = tok != NULL && len != NULL && type != NULL ? 0 : -1;
    free(tok);
    free(len);
    free(type);
    return rc;
}

int llm_gguf_w_spm_from_tok(gguf_writer *w, const llm_tokenizer *t, llm_err *err)
{
    if (t->kind != LLM_TOK_SPM) {
        llm_seterr(err, "not a SentencePiece BPE tokenizer");
        return -1;
    }
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_str(w, "tokenizer.ggml.pre", "default");
    if (llm_gguf_w_vocab(w, t, err) != 0)
        return -1;
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, t->score, (uint64_t)t->n_vocab);
    const int ids[3] = { t->bos, t->eos, t->unk };
    static const char *const keys[3] = { "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                         "tokenizer.ggml.unknown_token_id" };
    for (int i = 0; i < 3; i++)
        if (ids[i] >= 0)
            gguf_w_u32(w, keys[i], (uint32_t)ids[i]);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", t->add_bos != 0);
    gguf_w_bool(w, "tokenizer.ggml.add_eos_token", t->add_eos != 0);
    gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", t->add_space_prefix != 0);
    if (t->chat_template != NULL)
        gguf_w_str(w, "tokenizer.chat_template", t->chat_template);
    return 0;
}

int llm_gguf_w_wpm_from_tok(gguf_writer *w, const llm_tokenizer *t, int n_types, llm_err *err)
{
    if (t->kind != LLM_TOK_WPM) {
        llm_seterr(err, "a BERT GGUF needs a WordPiece tokenizer");
        return -1;
    }
    gguf_w_str(w, "tokenizer.ggml.model", "bert");
    if (llm_gguf_w_vocab(w, t, err) != 0)
        return -1;
    gguf_w_u32(w, "tokenizer.ggml.token_type_count", (uint32_t)n_types);
    /* as llama.cpp's converter: BOS / EOS are [CLS] / [SEP], and the BERT names besides */
    const int ids[5] = { t->bos, t->eos, t->unk, t->eos, t->bos };
    static const char *const id_keys[5] = { "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                            "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
                                            "tokenizer.ggml.cls_token_id" };
    for (int i = 0; i < 5; i++)
        if (ids[i] >= 0)
            gguf_w_u32(w, id_keys[i], (uint32_t)ids[i]);
    static const char *const names[2] = { "[PAD]", "[MASK]" };
    static const char *const keys[2] = { "tokenizer.ggml.padding_token_id", "tokenizer.ggml.mask_token_id" };
    for (int i = 0; i < 2; i++) {
        int id = llm_tok_find(t, names[i]);
        if (id >= 0)
            gguf_w_u32(w, keys[i], (uint32_t)id);
    }
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", t->add_bos != 0);
    gguf_w_bool(w, "tokenizer.ggml.add_eos_token", t->add_eos != 0);
    gguf_w_bool(w, "tokenizer.ggml.normalizer.lowercase", t->wpm_lower != 0);
    gguf_w_bool(w, "tokenizer.ggml.normalizer.strip_accents", t->wpm_strip != 0);
    return 0;
}

/* tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}. */
static const char *special_text(const cJSON *cfg, const char *key)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(j))
        j = cJSON_GetObjectItemCaseSensitive(j, "content");
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

static int find_id(char **tok, int n, const char *text)
{
    for (int i = 0; text != NULL && i < n; i++)
        if (tok[i] != NULL && strcmp(tok[i], text) == 0)
            return i;
    return -1;
}

/* llm_gguf_w_bpe_from_hf, and with cls_sep (cls, sep: [CLS] and [SEP] ids) a ModernBERT's vocabulary: those as
 * BOS and EOS, both added, the split named "modern-bert" when it is GPT-2's (pre NULL). */
static int bpe_from_hf(gguf_writer *w, const char *tokenizer_json, const char *pre, int cls_sep, int cls, int sep,
                       llm_err *err)
{
    cJSON *root = llm_json_read_file(tokenizer_json, err), *cfg = NULL;
    if (root == NULL)
        return -1;
    char cfg_path[1100];
    snprintf(cfg_path, sizeof(cfg_path), "%.*s/tokenizer_config.json",
             (int)(strrchr(tokenizer_json, '/') ? strrchr(tokenizer_json, '/') - tokenizer_json : 1),
             strrchr(tokenizer_json, '/') ? tokenizer_json : ".");
    llm_err cerr;
    cfg = llm_json_read_file(cfg_path, &cerr); /* optional */
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    int rc = -1, n = 0;
    char **tok = NULL, **mg = NULL;
    int32_t *type = NULL;
    int n_merges = cJSON_GetArraySize(merges);
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges)) {
        llm_seterr(err, "%s: needs model.vocab (object) and model.merges (array): not a BPE tokenizer.json",
                   tokenizer_json);
        goto out;
    }
    if (pre == NULL) { /* the name llama.cpp knows the file's split regex by */
        const char *pattern = tok_hf_pretok_pattern(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"),
                                                    tokenizer_json, err);
        if (pattern == NULL)
            goto out;
        if ((pre = tok_pretok_name(pattern)) == NULL) {
            llm_seterr(err, "%s: the pre-tokenizer's split regex is none GGUF names (llama-bpe, qwen2, gpt2, "
                       "gpt-4o, refact)", tokenizer_json);
            goto out;
        }
        if (cls_sep && strcmp(pre, "gpt2") == 0) /* (ModernBERT's ByteLevel split, as llama.cpp names it) */
            pre = "modern-bert";
    }
    for (const cJSON *e = vocab->child; e; e = e->next)
        if (cJSON_IsNumber(e) && e->valuedouble >= n && e->valuedouble < (1 << 24))
            n = (int)e->valuedouble + 1;
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (cJSON_IsNumber(id) && id->valuedouble >= n && id->valuedouble < (1 << 24))
            n = (int)id->valuedouble + 1;
    }
    tok = calloc((size_t)n + 1, sizeof(char *));
    type = calloc((size_t)n + 1, sizeof(int32_t));
    mg = calloc((size_t)n_merges + 1, sizeof(char *));
    if (tok == NULL || type == NULL || mg == NULL)
        goto oom;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= n)
            continue;
        int id = (int)e->valuedouble;
        free(tok[id]);
        if ((tok[id] = strdup(e->string)) == NULL)
            goto oom;
        type[id] = TT_NORMAL;
    }
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= n || !cJSON_IsString(content))
            continue;
        int i = (int)id->valuedouble;
        free(tok[i]);
        if ((tok[i] = strdup(content->valuestring)) == NULL)
            goto oom;
        type[i] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) ? TT_CONTROL : TT_USER;
    }
    for (int i = 0; i < n; i++) { /* holes, as llama.cpp's converter fills them */
        if (tok[i] == NULL) {
            char pad[32];
            snprintf(pad, sizeof(pad), "[PAD%d]", i);
            if ((tok[i] = strdup(pad)) == NULL)
                goto oom;
            type[i] = TT_UNUSED;
        }
    }
    int k = 0;
    for (const cJSON *e = merges->child; e; e = e->next, k++) {
        if (cJSON_IsString(e)) {
            mg[k] = strdup(e->valuestring);
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) &&
                   cJSON_IsString(e->child->next)) {
            size_t a = strlen(e->child->valuestring), b = strlen(e->child->next->valuestring);
            if ((mg[k] = malloc(a + b + 2)) != NULL) {
                memcpy(mg[k], e->child->valuestring, a);
                mg[k][a] = ' ';
                memcpy(mg[k] + a + 1, e->child->next->valuestring, b + 1);
            }
        } else {
            llm_seterr(err, "%s: merge %d is neither \"a b\" nor [a, b]", tokenizer_json, k);
            goto out;
        }
        if (mg[k] == NULL)
            goto oom;
    }
    const char *bos_t = special_text(cfg, "bos_token"), *eos_t = special_text(cfg, "eos_token");
    int bos = find_id(tok, n, bos_t ? bos_t : "<|begin_of_text|>");
    int eos = find_id(tok, n, eos_t ? eos_t : "<|eot_id|>");
    if (eos < 0)
        eos = find_id(tok, n, "<|end_of_text|>");
    if (cls_sep) { /* the model's own, where the vocabulary has them */
        bos = cls >= 0 && cls < n ? cls : bos;
        eos = sep >= 0 && sep < n ? sep : eos;
    }
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", pre);
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, NULL, (uint64_t)n);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, (uint64_t)n);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)mg, NULL, (uint64_t)n_merges);
    if (bos >= 0)
        gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (eos >= 0)
        gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    /* ModernBERT's converter: BOS and EOS as [CLS] and [SEP], both added */
    int modern = cls_sep || strcmp(pre, "modern-bert") == 0;
    if (modern && eos >= 0)
        gguf_w_u32(w, "tokenizer.ggml.seperator_token_id", (uint32_t)eos);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1);
    gguf_w_bool(w, "tokenizer.ggml.add_eos_token", modern);
    const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    if (cJSON_IsString(tmpl))
        gguf_w_str(w, "tokenizer.chat_template", tmpl->valuestring);
    rc = 0;
    goto out;
oom:
    llm_seterr(err, "%s: out of memory", tokenizer_json);
out:
    if (tok != NULL)
        for (int i = 0; i < n; i++)
            free(tok[i]);
    if (mg != NULL)
        for (int i = 0; i < n_merges; i++)
            free(mg[i]);
    free(tok);
    free(mg);
    free(type);
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    return rc;
}

int llm_gguf_w_bpe_from_hf(gguf_writer *w, const char *tokenizer_json, const char *pre, llm_err *err)
{
    return bpe_from_hf(w, tokenizer_json, pre, 0, -1, -1, err);
}

int llm_gguf_w_bpe_cls_sep_from_hf(gguf_writer *w, const char *tokenizer_json, int cls, int sep, llm_err *err)
{
    return bpe_from_hf(w, tokenizer_json, NULL, 1, cls, sep, err);
}

/* ---------- a Hugging Face tokenizer.json from GGUF metadata ---------- */

/* A GGUF string (not NUL-terminated) as a C string (malloc'd; NULL out of memory). */
static char *gstr_dup(const gguf_str *s)
{
    char *b = malloc((size_t)s->len + 1);
    if (b != NULL) {
        memcpy(b, s->ptr, (size_t)s->len);
        b[s->len] = 0;
    }
    return b;
}

/* One piece of a TemplateProcessing template: {"SpecialToken": {"id": text}} or {"Sequence": {"id": "A"}}. */
static void template_piece(cJSON *arr, const char *kind, const char *id)
{
    cJSON *o = cJSON_CreateObject(), *in = cJSON_AddObjectToObject(o, kind);
    cJSON_AddStringToObject(in, "id", id);
    cJSON_AddNumberToObject(in, "type_id", 0);
    cJSON_AddItemToArray(arr, o);
}

/* A ByteLevel pre-tokenizer (or decoder) step. */
static cJSON *byte_level(int use_regex, int prefix)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", prefix);
    cJSON_AddBoolToObject(o, "trim_offsets", 1);
    cJSON_AddBoolToObject(o, "use_regex", use_regex);
    return o;
}

int llm_hf_w_bpe_from_gguf(const gguf_ctx *g, const char *dir, int cls, int sep, int max_len, llm_err *err)
{
    char model[16] = "", pre[64] = "default", path[1100];
    gguf_get_str(g, "tokenizer.ggml.model", model, sizeof(model));
    gguf_get_str(g, "tokenizer.ggml.pre", pre, sizeof(pre));
    const gguf_kv *toks = gguf_find_kv(g, "tokenizer.ggml.tokens"), *types = gguf_find_kv(g, "tokenizer.ggml.token_type");
    const gguf_kv *merges = gguf_find_kv(g, "tokenizer.ggml.merges");
    const char *pattern = tok_pretok_pattern(pre);
    int ok = strcmp(model, "gpt2") == 0 && pattern != NULL && strstr(pattern, TOK_STAGE) == NULL;
    for (int i = 0; i < 2 && ok; i++) {
        const gguf_kv *kv = i ? merges : toks;
        ok = kv != NULL && kv->type == GGUF_TYPE_ARRAY && kv->arr_type == GGUF_TYPE_STRING && kv->strs != NULL &&
             kv->arr_n < (1u << 26);
    }
    if (!ok || types == NULL || types->type != GGUF_TYPE_ARRAY || types->arr_n != toks->arr_n || cls < 0 ||
        sep < 0 || (uint64_t)cls >= toks->arr_n || (uint64_t)sep >= toks->arr_n) {
        llm_seterr(err, "%s: a tokenizer.json is written from a byte-level BPE GGUF vocabulary with token types, "
                   "a one-regex pre-tokenizer and [CLS] / [SEP] ids only (this one: model \"%s\", pre \"%s\")", dir,
                   model, pre);
        return -1;
    }
    cJSON *j = cJSON_CreateObject(), *cfg = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "version", "1.0");
    cJSON_AddNullToObject(j, "truncation");
    cJSON_AddNullToObject(j, "padding");
    cJSON *added = cJSON_AddArrayToObject(j, "added_tokens");
    cJSON_AddNullToObject(j, "normalizer");
    /* GPT-2's split is ByteLevel's own regex (ModernBERT's); any other a Split before it */
    if (strcmp(pattern, tok_pretok_pattern("gpt2")) == 0) {
        cJSON_AddItemToObject(j, "pre_tokenizer", byte_level(1, 0));
    } else {
        cJSON *seq = cJSON_AddObjectToObject(j, "pre_tokenizer"), *split = cJSON_CreateObject();
        cJSON_AddStringToObject(seq, "type", "Sequence");
        cJSON *steps = cJSON_AddArrayToObject(seq, "pretokenizers");
        cJSON_AddStringToObject(split, "type", "Split");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(split, "pattern"), "Regex", pattern);
        cJSON_AddStringToObject(split, "behavior", "Isolated");
        cJSON_AddBoolToObject(split, "invert", 0);
        cJSON_AddItemToArray(steps, split);
        cJSON_AddItemToArray(steps, byte_level(0, 0));
    }
    /* ModernBERT's post-processor: [CLS] $A [SEP], a pair [CLS] $A [SEP] $B [SEP] */
    cJSON *pp = cJSON_AddObjectToObject(j, "post_processor");
    cJSON_AddStringToObject(pp, "type", "TemplateProcessing");
    cJSON *single = cJSON_AddArrayToObject(pp, "single"), *pair = cJSON_AddArrayToObject(pp, "pair");
    char *ct = gstr_dup(&toks->strs[cls]), *st = gstr_dup(&toks->strs[sep]);
    int rc = ct != NULL && st != NULL ? 0 : -1;
    if (rc == 0) {
        template_piece(single, "SpecialToken", ct);
        template_piece(single, "Sequence", "A");
        template_piece(single, "SpecialToken", st);
        template_piece(pair, "SpecialToken", ct);
        template_piece(pair, "Sequence", "A");
        template_piece(pair, "SpecialToken", st);
        template_piece(pair, "Sequence", "B");
        template_piece(pair, "SpecialToken", st);
        cJSON *sp = cJSON_AddObjectToObject(pp, "special_tokens");
        for (int i = 0; i < 2; i++) {
            const char *text = i ? st : ct;
            cJSON *o = cJSON_AddObjectToObject(sp, text);
            cJSON_AddStringToObject(o, "id", text);
            cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "ids"), cJSON_CreateNumber(i ? sep : cls));
            cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "tokens"), cJSON_CreateString(text));
            cJSON_AddStringToObject(cfg, i ? "sep_token" : "cls_token", text);
        }
    }
    free(ct);
    free(st);
    cJSON_AddItemToObject(j, "decoder", byte_level(1, 1));
    cJSON *mo = cJSON_AddObjectToObject(j, "model");
    cJSON_AddStringToObject(mo, "type", "BPE");
    cJSON_AddNullToObject(mo, "dropout");
    cJSON_AddNullToObject(mo, "unk_token");
    cJSON_AddBoolToObject(mo, "fuse_unk", 0);
    cJSON_AddBoolToObject(mo, "byte_fallback", 0);
    /* (as the GGUF loader reads a Llama 3 vocabulary: a word that is a token skips the merges) */
    cJSON_AddBoolToObject(mo, "ignore_merges", strcmp(pre, "llama-bpe") == 0 || strcmp(pre, "llama3") == 0);
    cJSON *vocab = cJSON_AddObjectToObject(mo, "vocab"), *mg = cJSON_AddArrayToObject(mo, "merges");
    for (uint64_t i = 0; i < toks->arr_n && rc == 0; i++) {
        int64_t ty = TT_NORMAL;
        gguf_arr_i64(types, i, &ty);
        char *text = gstr_dup(&toks->strs[i]);
        if (text == NULL) {
            rc = -1;
        } else if (ty == TT_CONTROL || ty == TT_USER || ty == TT_UNUSED) { /* matched before the split */
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "id", (double)i);
            cJSON_AddStringToObject(o, "content", text);
            static const char *const flags[3] = { "single_word", "lstrip", "rstrip" };
            for (int f = 0; f < 3; f++)
                cJSON_AddBoolToObject(o, flags[f], 0);
            cJSON_AddBoolToObject(o, "normalized", ty == TT_USER);
            cJSON_AddBoolToObject(o, "special", ty != TT_USER);
            cJSON_AddItemToArray(added, o);
        } else {
            cJSON_AddNumberToObject(vocab, text, (double)i);
        }
        free(text);
    }
    for (uint64_t i = 0; i < merges->arr_n && rc == 0; i++) { /* "a b", in rank order */
        char *m = gstr_dup(&merges->strs[i]);
        if (m == NULL)
            rc = -1;
        else
            cJSON_AddItemToArray(mg, cJSON_CreateString(m));
        free(m);
    }
    cJSON_AddNumberToObject(cfg, "model_max_length", max_len);
    cJSON_AddStringToObject(cfg, "tokenizer_class", "PreTrainedTokenizerFast");
    if (rc != 0) {
        llm_seterr(err, "%s: out of memory", dir);
    } else {
        snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
        rc = llm_json_write_file(path, j, 0, err);
        snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
        if (rc == 0)
            rc = llm_json_write_file(path, cfg, 1, err);
    }
    cJSON_Delete(j);
    cJSON_Delete(cfg);
    return rc;
}
