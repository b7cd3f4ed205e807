/* SentencePiece's own model file (tokenizer.model: a ModelProto in protobuf's wire format), as a Hugging Face
 * directory without a tokenizer.json carries it (ERNIE 4.5, older Llama 2 repositories). Read as llama.cpp's
 * converter reads it (_set_vocab_sentencepiece): the pieces with their scores and types, BPE models as the "llama"
 * tokenizer (merges by score, byte fallback through <0xNN> pieces, the dummy prefix from the normalizer spec; its
 * normalization rules left out, as llama.cpp does),
 * Unigram models as the "t5" one (Viterbi over the scores, the normalizer's precompiled charsmap and its
 * whitespace folding); then tokenizer_config.json beside it (BOS / EOS, add_bos_token, the chat template) and its
 * added_tokens_decoder (tokens past the model's pieces, or a piece's type). Only the fields named below are read;
 * every length is checked against the buffer, so a truncated or hostile file is an error, not a crash. */
#include "tokenizer_priv.h"
#include "json_file.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILE (64u << 20)

typedef struct {
    const uint8_t *p, *end;
} pb;

static int pb_varint(pb *b, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end) return -1;
        uint8_t c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return 0;
    }
    return -1;
}

/* The next field: its number, wire type, and (length-delimited) its bytes or (varint / fixed) its value. */
static int pb_field(pb *b, uint32_t *num, int *wt, pb *sub, uint64_t *val)
{
    uint64_t key;
    if (pb_varint(b, &key) != 0 || (key >> 3) == 0 || (key >> 3) > 0x1fffffff) return -1;
    *num = (uint32_t)(key >> 3);
    *wt = (int)(key & 7);
    switch (*wt) {
    case 0: return pb_varint(b, val);
    case 1: if (b->end - b->p < 8) return -1; memcpy(val, b->p, 8); b->p += 8; return 0;
    case 5: { uint32_t v32; if (b->end - b->p < 4) return -1; memcpy(&v32, b->p, 4); b->p += 4; *val = v32; return 0; }
    case 2: {
        uint64_t len;
        if (pb_varint(b, &len) != 0 || len > (uint64_t)(b->end - b->p)) return -1;
        sub->p = b->p;
        sub->end = b->p + len;
        b->p += len;
        return 0;
    }
    default: return -1; /* groups (3, 4) are not in this schema */
    }
}

typedef struct {
    const uint8_t *text;
    size_t len;
    float score;
    int type;
} piece;

typedef struct {
    int model_type;          /* TrainerSpec.model_type: 1 Unigram (the default), 2 BPE */
    int unk, bos, eos;       /* TrainerSpec ids (defaults 0, 1, 2; -1: none) */
    int add_dummy_prefix;    /* NormalizerSpec (defaults true) */
    int remove_extra_ws;
    const uint8_t *charsmap; /* NormalizerSpec.precompiled_charsmap */
    size_t charsmap_len;
} spec;

static int read_piece(pb *b, piece *pc)
{
    pc->text = NULL, pc->len = 0, pc->score = 0.0f, pc->type = TOK_NORMAL;
    while (b->p < b->end) {
        uint32_t num;
        int wt;
        pb sub;
        uint64_t v = 0;
        if (pb_field(b, &num, &wt, &sub, &v) != 0) return -1;
        if (num == 1 && wt == 2) pc->text = sub.p, pc->len = (size_t)(sub.end - sub.p);
        else if (num == 2 && wt == 5) { uint32_t u = (uint32_t)v; memcpy(&pc->score, &u, 4); }
        else if (num == 3 && wt == 0) pc->type = v >= TOK_NORMAL && v <= TOK_BYTE ? (int)v : TOK_NORMAL;
    }
    return pc->text != NULL ? 0 : -1;
}

static void read_trainer(pb b, spec *s)
{
    uint32_t num;
    int wt;
    pb sub;
    uint64_t v = 0;
    while (b.p < b.end && pb_field(&b, &num, &wt, &sub, &v) == 0) {
        if (wt != 0) continue;
        if (num == 3) s->model_type = (int)v;
        else if (num == 40) s->unk = (int)(int32_t)v;
        else if (num == 41) s->bos = (int)(int32_t)v;
        else if (num == 42) s->eos = (int)(int32_t)v;
    }
}

static void read_normalizer(pb b, spec *s)
{
    uint32_t num;
    int wt;
    pb sub;
    uint64_t v = 0;
    while (b.p < b.end && pb_field(&b, &num, &wt, &sub, &v) == 0) {
        if (num == 2 && wt == 2) s->charsmap = sub.p, s->charsmap_len = (size_t)(sub.end - sub.p);
        else if (num == 3 && wt == 0) s->add_dummy_prefix = v != 0;
        else if (num == 4 && wt == 0) s->remove_extra_ws = v != 0;
    }
}

/* tokenizer_config.json's added_tokens_decoder ({"id": {"content", "special"}}), NULL without one. */
static const cJSON *added_tokens(const cJSON *cfg, int *max_id)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder"), *e;
    *max_id = -1;
    if (!cJSON_IsObject(a)) return NULL;
    cJSON_ArrayForEach(e, a) {
        char *endp;
        long id = strtol(e->string, &endp, 10);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (*endp == 0 && id >= 0 && id < (1 << 24) && cJSON_IsString(c) && id > *max_id) *max_id = (int)id;
    }
    return a;
}

llm_tokenizer *llm_tok_load_spm_model(const char *path, llm_err *err)
{
    size_t sz = 0;
    uint8_t *buf = (uint8_t *)llm_read_file(path, MAX_FILE, &sz, err);
    if (buf == NULL)
        return NULL;

    /* pass 1: count the pieces, read the specs */
    spec s = { 1, 0, 1, 2, 1, 1, NULL, 0 };
    int n_pieces = 0;
    pb b = { buf, buf + sz };
    while (b.p < b.end) {
        uint32_t num;
        int wt;
        pb sub;
        uint64_t v = 0;
        if (pb_field(&b, &num, &wt, &sub, &v) != 0) {
            llm_seterr(err, "%s: not a SentencePiece model (a malformed or truncated protobuf)", path);
            goto fail_buf;
        }
        if (num == 1 && wt == 2) n_pieces++;
        else if (num == 2 && wt == 2) read_trainer(sub, &s);
        else if (num == 3 && wt == 2) read_normalizer(sub, &s);
    }
    if (n_pieces == 0 || n_pieces > (1 << 24) || (s.model_type != 1 && s.model_type != 2)) {
        llm_seterr(err, "%s: a SentencePiece model of %d pieces and model_type %d (Unigram 1 or BPE 2 are read)", path,
                   n_pieces, s.model_type);
        goto fail_buf;
    }
    /* (a BPE model's normalization rules and whitespace folding are not applied, as llama.cpp's converter leaves
     * them out of a "llama" vocabulary: its ids are then llama.cpp's, SentencePiece's where the text is already
     * normal) */
    int bpe = s.model_type == 2;

    /* the config beside it: its added tokens may lie past the pieces */
    char *cpath = tok_hf_sibling(path, "tokenizer_config.json");
    cJSON *cfg = NULL;
    if (cpath != NULL) {
        llm_err ignore;
        cfg = llm_json_read_file(cpath, &ignore);
        free(cpath);
    }
    int max_added;
    const cJSON *added = added_tokens(cfg, &max_added);
    int n_vocab = max_added >= n_pieces ? max_added + 1 : n_pieces;
    llm_tokenizer *t = tok_new(bpe ? LLM_TOK_SPM : LLM_TOK_UGM, n_vocab);
    if (t == NULL) {
        llm_seterr(err, "%s: out of memory", path);
        cJSON_Delete(cfg);
        goto fail_buf;
    }

    /* pass 2: the pieces */
    b = (pb){ buf, buf + sz };
    int id = 0;
    while (b.p < b.end) {
        uint32_t num;
        int wt;
        pb sub;
        uint64_t v = 0;
        piece pc;
        pb_field(&b, &num, &wt, &sub, &v); /* (checked in pass 1) */
        if (num != 1 || wt != 2) continue;
        if (read_piece(&sub, &pc) != 0 || tok_set(t, id, (const char *)pc.text, pc.len, pc.score, pc.type) != 0) {
            llm_seterr(err, "%s: piece %d is malformed (or out of memory)", path, id);
            goto fail;
        }
        id++;
    }
    for (int i = n_pieces; i < n_vocab; i++) { /* holes below an added token's id */
        char name[32];
        snprintf(name, sizeof name, "[PAD%d]", i);
        if (tok_set(t, i, name, strlen(name), 0.0f, TOK_UNUSED) != 0) goto oom;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, added) {
        char *endp;
        long aid = strtol(e->string, &endp, 10);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (*endp != 0 || aid < 0 || aid >= n_vocab || !cJSON_IsString(c)) continue;
        int special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"));
        /* one of the model's own pieces keeps its type (<unk> stays unknown, <s> control), but a plain piece the
         * config makes a token of its own (matched whole in text, as transformers does) */
        if (aid < n_pieces && t->type[aid] != TOK_NORMAL)
            continue;
        if (tok_set(t, (int)aid, c->valuestring, strlen(c->valuestring), 0.0f, special ? TOK_CONTROL : TOK_USER) != 0)
            goto oom;
    }
    t->unk = s.unk >= 0 && s.unk < n_vocab ? s.unk : -1;
    if (t->unk < 0 && !bpe) {
        llm_seterr(err, "%s: a Unigram model needs an unknown piece (trainer_spec.unk_id)", path);
        goto fail;
    }
    t->add_space_prefix = s.add_dummy_prefix;
    if (!bpe) {
        if (s.charsmap_len > 0 && tok_ugm_set_charsmap(t, s.charsmap, s.charsmap_len, err) != 0) goto fail;
        t->ugm_merge_spaces = s.remove_extra_ws;
    }
    if (tok_finish(t, err) != 0 || tok_hf_apply_config(t, cfg, NULL, err) != 0 ||
        tok_hf_chat_template_file(t, path, err) != 0) goto fail;
    /* ids the config does not name: the trainer's (BOS added as a Llama's, for a BPE model) */
    if (t->bos < 0 && s.bos >= 0 && s.bos < n_vocab && !cJSON_GetObjectItemCaseSensitive(cfg, "bos_token")) {
        const cJSON *ab = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
        t->bos = s.bos;
        t->add_bos = cJSON_IsBool(ab) ? cJSON_IsTrue(ab) : bpe;
    }
    if (t->eos < 0 && s.eos >= 0 && s.eos < n_vocab && !cJSON_GetObjectItemCaseSensitive(cfg, "eos_token"))
        t->eos = s.eos;
    cJSON_Delete(cfg);
    free(buf);
    return t;
oom:
    llm_seterr(err, "%s: out of memory", path);
fail:
    cJSON_Delete(cfg);
    llm_tok_free(t);
fail_buf:
    free(buf);
    return NULL;
}
