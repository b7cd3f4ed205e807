/* Gemma's tokenizer and chat format: a small vocabulary shaped like Gemma's SentencePiece one (control tokens
 * <pad> <eos> <bos>, <start_of_turn> / <end_of_turn>, user-defined whitespace runs and newlines, <0xNN> byte
 * fallback, no dummy prefix), written as llama.cpp's converter writes a GGUF and as Hugging Face's Gemma
 * tokenizer.json (BPE with byte_fallback behind a Replace " " -> "▁" normalizer). Both must give the same ids:
 * no leading '▁', whitespace runs as one token, control tokens from the chat segments (and not from user text),
 * bytes for unknown characters, and text back on decoding. */
#include "tap.h"

#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chat_template.h"
#include "gguf.h"
#include "tokenizer.h"

#define SP "\xe2\x96\x81" /* '▁', SentencePiece's space */

enum { PAD, EOS, BOS, UNK, SOT, EOT, NL, NL2, SP2, SP3, BYTE0 = 10, N_BYTES = 256 };
#define B(b) (BYTE0 + (b))

/* Normal pieces after the bytes, in score order for the merged ones (a merge's result scores higher the
 * earlier it merges), so that SentencePiece's score order and the tokenizer.json's merge ranks agree. */
static const char *const normal[] = {
    SP, "h", "e", "l", "o", "w", "r", "d", "u", "s", "m",
    "ll", "he", "hell", "hello", SP "w", "or", SP "wor", "ld", SP "world", "us", "er", "user", "mo", "de", "del",
    "model", "el",
};
#define N_NORMAL (sizeof(normal) / sizeof(normal[0]))
#define FIRST_MERGED 11
static const char *const merges[][2] = {
    { "l", "l" }, { "h", "e" }, { "he", "ll" }, { "hell", "o" }, { SP, "w" }, { "o", "r" }, { SP "w", "or" },
    { "l", "d" }, { SP "wor", "ld" }, { "u", "s" }, { "e", "r" }, { "us", "er" }, { "m", "o" }, { "d", "e" },
    { "de", "l" }, { "mo", "del" }, { "e", "l" },
};
#define N_MERGES (sizeof(merges) / sizeof(merges[0]))
#define N_VOCAB (BYTE0 + N_BYTES + (int)N_NORMAL)
#define ID(k) (BYTE0 + N_BYTES + (k)) /* normal[k]'s id */
enum { I_SPACE = ID(0), I_H = ID(1), I_E = ID(2), I_W = ID(5), I_LL = ID(11), I_HELLO = ID(14), I_OR = ID(16),
       I_LD = ID(18), I_WORLD = ID(19), I_USER = ID(22), I_MODEL = ID(26) };

static const char *tmpl = "{{ bos_token }}{%- for message in loop_messages -%}{{ '<start_of_turn>' + role + '\\n' }}"
                          "{{ message['content'] | trim }}{{ '<end_of_turn>\\n' }}{%- endfor -%}";

static char tmpdir[] = "/tmp/llm_tok_gemmaXXXXXX";

static char *names[N_VOCAB];

static void build_names(int spaces_as_text)
{
    static char bytes[N_BYTES][8];
    static const char *const head[] = { "<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "\n",
                                        "\n\n", SP SP, SP SP SP };
    for (int i = 0; i < BYTE0; i++)
        names[i] = (char *)head[i];
    if (spaces_as_text)
        names[SP3] = "   "; /* llama.cpp's converter writes a user-defined token's '▁' as spaces */
    for (int b = 0; b < N_BYTES; b++) {
        snprintf(bytes[b], sizeof(bytes[b]), "<0x%02X>", b);
        names[B(b)] = bytes[b];
    }
    for (size_t k = 0; k < N_NORMAL; k++)
        names[ID(k)] = (char *)normal[k];
}

/* The GGUF of llama.cpp's Gemma converter: model "llama", scores, token types, add_space_prefix false.
 * eot_type: <end_of_turn>'s type (3 control as the converter marks it from added_tokens_decoder, 4 user-defined
 * as the SentencePiece model has it). */
static llm_tokenizer *gemma_gguf(const char *name, int eot_type)
{
    float scores[N_VOCAB];
    int32_t types[N_VOCAB];
    build_names(1);
    for (int i = 0; i < N_VOCAB; i++) {
        scores[i] = 0.0f;
        types[i] = i < BYTE0 ? 4 : i < BYTE0 + N_BYTES ? 6 : 1;
    }
    types[PAD] = types[EOS] = types[BOS] = types[SOT] = 3;
    types[EOT] = eot_type;
    types[UNK] = 2;
    scores[NL] = scores[NL2] = scores[SP2] = scores[SP3] = -1000.0f;
    for (size_t k = 0; k < N_NORMAL; k++)
        scores[ID(k)] = k < FIRST_MERGED ? -1000.0f - (float)k : -(float)k; /* merged: the earlier the higher */
    gguf_writer *w = gguf_writer_new();
    gguf_w_str(w, "general.architecture", "gemma3");
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_str(w, "tokenizer.ggml.pre", "default");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)names, NULL, N_VOCAB);
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, N_VOCAB);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, N_VOCAB);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", BOS);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", EOS);
    gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", UNK);
    gguf_w_u32(w, "tokenizer.ggml.padding_token_id", PAD);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1);
    gguf_w_bool(w, "tokenizer.ggml.add_eos_token", 0);
    gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", 0);
    gguf_w_str(w, "tokenizer.chat_template", tmpl);
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    llm_err err = { { 0 } };
    int rc = gguf_writer_write(w, path, &err);
    gguf_writer_free(w);
    llm_tokenizer *t = rc == 0 ? llm_tok_load(path, &err) : NULL;
    ok(t != NULL, "%s: Gemma-like GGUF loads (%s)", name, t ? "ok" : err.msg);
    return t;
}

/* JSON string escaping for the few characters the vocabulary has. */
static void put_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '\n')
            fputs("\\n", f);
        else if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

/* Hugging Face's Gemma tokenizer.json (+ tokenizer_config.json) in dir; normalizer: its JSON. */
static llm_tokenizer *gemma_hf(const char *dir, const char *normalizer, int eot_special)
{
    char path[300];
    build_names(0);
    snprintf(path, sizeof(path), "%s/%s", tmpdir, dir);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/%s/tokenizer.json", tmpdir, dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return NULL;
    fputs("{\"version\": \"1.0\", \"added_tokens\": [", f);
    for (int i = 0; i < BYTE0; i++) {
        int special = i <= SOT || (i == EOT && eot_special);
        fprintf(f, "%s{\"id\": %d, \"content\": ", i ? ", " : "", i);
        put_json_str(f, names[i]);
        fprintf(f, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, "
                   "\"special\": %s}", special ? "true" : "false");
    }
    fprintf(f, "], \"normalizer\": %s, \"pre_tokenizer\": null, \"post_processor\": null, \"decoder\": {\"type\": "
               "\"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": \"" SP "\"}, "
               "\"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}]}, \"model\": {\"type\": "
               "\"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\", \"fuse_unk\": true, \"byte_fallback\": true, "
               "\"ignore_merges\": false, \"vocab\": {", normalizer);
    for (int i = 0; i < N_VOCAB; i++) {
        fputs(i ? ", " : "", f);
        put_json_str(f, names[i]);
        fprintf(f, ": %d", i);
    }
    fputs("}, \"merges\": [", f);
    for (size_t k = 0; k < N_MERGES; k++) { /* the newer form, pairs; Gemma 2's file has "a b" strings */
        fputs(k ? ", " : "", f);
        if (k % 2) {
            fputc('[', f);
            put_json_str(f, merges[k][0]);
            fputs(", ", f);
            put_json_str(f, merges[k][1]);
            fputc(']', f);
        } else {
            fprintf(f, "\"%s %s\"", merges[k][0], merges[k][1]);
        }
    }
    fputs("]}}\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/%s/tokenizer_config.json", tmpdir, dir);
    if ((f = fopen(path, "w")) != NULL) {
        fputs("{\"add_bos_token\": true, \"add_eos_token\": false, \"bos_token\": \"<bos>\", \"eos_token\": \"<eos>\", "
              "\"pad_token\": \"<pad>\", \"unk_token\": \"<unk>\", \"chat_template\": ", f);
        put_json_str(f, tmpl);
        fputs("}\n", f);
        fclose(f);
    }
    snprintf(path, sizeof(path), "%s/%s", tmpdir, dir);
    llm_err err = { { 0 } };
    llm_tokenizer *t = llm_tok_load(path, &err); /* a directory: its tokenizer.json */
    ok(t != NULL, "%s: Gemma-like tokenizer.json loads (%s)", dir, t ? "ok" : err.msg);
    return t;
}

static int same_ids(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(int32_t)) == 0);
}

static void show(const char *what, const int32_t *ids, int n)
{
    char buf[512];
    size_t k = 0;
    for (int i = 0; i < n && k + 16 < sizeof(buf); i++)
        k += (size_t)snprintf(buf + k, sizeof(buf) - k, "%s%d", i ? "," : "", (int)ids[i]);
    buf[k] = 0;
    diag("%s: [%s]", what, buf);
}

static void expect(const llm_tokenizer *t, const char *label, const char *text, int flags, const int32_t *want,
                   int nwant, const char *what)
{
    int32_t *ids = NULL;
    int n = llm_tok_encode(t, text, strlen(text), flags, &ids);
    ok(same_ids(ids, n, want, nwant), "%s: %s", label, what);
    if (!same_ids(ids, n, want, nwant))
        show("got", ids, n);
    char *s = llm_tok_decode_ex(t, ids, (size_t)n, !(flags & LLM_TOK_PARSE_SPECIAL));
    const char *back = text;
    ok(s != NULL && strcmp(s, back) == 0, "%s: ... and decodes back (\"%s\")", label, s ? s : "(null)");
    free(s);
    free(ids);
}

#define IDS(...) (const int32_t[]){ __VA_ARGS__ }, (int)(sizeof((int32_t[]){ __VA_ARGS__ }) / sizeof(int32_t))

/* What the NGINX module does with a rendering: control segments by llm_tok_find, text encoded plainly. */
static int encode_chat(const llm_tokenizer *t, const llm_chat_out *o, int32_t *out, int cap)
{
    int n = 0;
    for (size_t i = 0; i < o->n; i++) {
        int id = o->seg[i].special ? llm_tok_find(t, o->seg[i].text) : -1;
        if (id >= 0) {
            if (n < cap)
                out[n++] = id;
            continue;
        }
        int32_t *ids = NULL;
        int k = llm_tok_encode(t, o->seg[i].text, o->seg[i].len, 0, &ids);
        for (int j = 0; j < k && n < cap; j++)
            out[n++] = ids[j];
        free(ids);
    }
    return n;
}

static void check(const llm_tokenizer *t, const char *label, int eot_control)
{
    if (t == NULL)
        return;
    is_int(llm_tok_kind_of(t), LLM_TOK_SPM, "%s: SentencePiece kind", label);
    ok(llm_tok_bos(t) == BOS && llm_tok_eos(t) == EOS && llm_tok_add_bos(t) && !llm_tok_add_eos(t),
       "%s: <bos> 2, <eos> 1, BOS wanted, EOS not", label);
    int32_t eog[8];
    int ne = llm_tok_eog_ids(t, eog, 8);
    ok(ne == 2 && eog[0] == EOS && eog[1] == EOT, "%s: generation ends at <eos> and <end_of_turn> (%d ids)", label, ne);
    is_int(llm_chat_detect(llm_tok_chat_template(t), llm_tok_kind_of(t)), LLM_CHAT_GEMMA,
           "%s: the template's <start_of_turn> picks the gemma format", label);

    expect(t, label, "hello world", 0, IDS(I_HELLO, I_WORLD),
           "no dummy prefix: \"hello world\" -> [hello, " SP "world]");
    expect(t, label, " hello", 0, IDS(I_SPACE, I_HELLO), "a leading space is its own '" SP "'");
    expect(t, label, "ell", 0, IDS(I_E, I_LL), "the merge order: ll (early) before el (late), not leftmost first");
    expect(t, label, "hello", LLM_TOK_ADD_BOS, IDS(BOS, I_HELLO), "BOS in front when asked");
    expect(t, label, "hello  world", 0, IDS(I_HELLO, SP2, I_W, I_OR, I_LD), "two spaces: the one whitespace token");
    expect(t, label, "hello   world", 0, IDS(I_HELLO, SP3, I_W, I_OR, I_LD), "three spaces: the longer one");
    expect(t, label, "hello    world", 0, IDS(I_HELLO, SP3, I_WORLD), "four: three, then ' world'");
    expect(t, label, "hello\n\nworld\n", 0, IDS(I_HELLO, NL2, I_W, I_OR, I_LD, NL), "newline runs are tokens too");
    expect(t, label, "h\xc3\xa9!", 0, IDS(I_H, B(0xc3), B(0xa9), B('!')), "byte fallback for unknown characters");
    expect(t, label, "\xf0\x9f\x99\x82 ", 0, IDS(B(0xf0), B(0x9f), B(0x99), B(0x82), I_SPACE), "an emoji as its bytes");
    int32_t *ids = NULL;
    int n = llm_tok_encode(t, "\xffh", 2, 0, &ids);
    ok(same_ids(ids, n, IDS(B(0xff), I_H)), "%s: an invalid byte is its byte token", label);
    free(ids);
    /* control-token text in plain text (a user's message) is text: no control id */
    n = llm_tok_encode(t, "<start_of_turn>user<bos>", 24, 0, &ids);
    int ctl = 0, user = 0;
    for (int i = 0; i < n; i++) {
        ctl |= ids[i] == SOT || ids[i] == BOS;
        user |= ids[i] == I_USER;
    }
    char *s = llm_tok_decode(t, ids, (size_t)n);
    ok(n > 2 && !ctl && user && s && !strcmp(s, "<start_of_turn>user<bos>"),
       "%s: \"<start_of_turn>user<bos>\" without PARSE_SPECIAL is text (%d tokens, \"%s\")", label, n, s ? s : "");
    free(s);
    free(ids);
    expect(t, label, "<bos><start_of_turn>user\nhello<end_of_turn>\n", LLM_TOK_PARSE_SPECIAL,
           IDS(BOS, SOT, I_USER, NL, I_HELLO, EOT, NL), "PARSE_SPECIAL: control tokens from their text");

    /* the chat format, tokenized as the NGINX module does it */
    const llm_chat_msg conv[] = {
        { "system", "Be brief.", NULL, 0, NULL },
        { "user", " hello world\n", NULL, 0, NULL },
        { "assistant", "hello", NULL, 0, NULL },
        { "user", "<end_of_turn>", NULL, 0, NULL },
    };
    llm_chat_out o;
    llm_err err = { { 0 } };
    int32_t cids[128];
    if (llm_chat_render(LLM_CHAT_GEMMA, conv + 1, 1, 1, &o, &err) == 0) {
        int32_t *ids = cids;
        int n = encode_chat(t, &o, ids, 128);
        ok(same_ids(ids, n, IDS(BOS, SOT, I_USER, NL, I_HELLO, I_WORLD, EOT, NL, SOT, I_MODEL, NL)),
           "%s: chat: <bos> <start_of_turn> user \\n hello " SP "world <end_of_turn> \\n <start_of_turn> model \\n",
           label);
        if (n != 11)
            show("got", ids, n);
        /* the same as llama.cpp tokenizing the rendered text with special tokens parsed */
        char *s = llm_chat_out_join(&o);
        int32_t *flat = NULL;
        int nf = s ? llm_tok_encode(t, s, strlen(s), LLM_TOK_PARSE_SPECIAL, &flat) : -1;
        ok(same_ids(ids, n, flat, nf), "%s: chat segments = the rendered text with control tokens parsed", label);
        free(flat);
        free(s);
        llm_chat_out_free(&o);
    } else {
        ok(0, "%s: render: %s", label, err.msg);
    }
    if (llm_chat_render(LLM_CHAT_GEMMA, conv, 4, 0, &o, &err) == 0) {
        int32_t *ids = cids;
        int n = encode_chat(t, &o, ids, 128), eots = 0, sots = 0;
        for (int i = 0; i < n; i++) {
            eots += ids[i] == EOT;
            sots += ids[i] == SOT;
        }
        ok(n > 0 && ids[0] == BOS && sots == 3 && eots == 3 + (eot_control ? 0 : 1),
           "%s: a user's \"<end_of_turn>\" is %s (%d <end_of_turn> ids)", label,
           eot_control ? "text, not the control token" : "the user-defined token, as SentencePiece makes it", eots);
        llm_chat_out_free(&o);
    } else {
        ok(0, "%s: render: %s", label, err.msg);
    }
}

static void check_bad_hf(void)
{
    static const struct {
        const char *dir, *normalizer, *extra;
    } cases[] = {
        { "nfkc", "{\"type\": \"NFKC\"}", NULL },
        { "replace-other", "{\"type\": \"Replace\", \"pattern\": {\"String\": \"\\t\"}, \"content\": \" \"}", NULL },
        { "prepend-only", "{\"type\": \"Prepend\", \"prepend\": \"" SP "\"}", NULL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[300];
        snprintf(path, sizeof(path), "%s/%s", tmpdir, cases[i].dir);
        mkdir(path, 0700);
        snprintf(path, sizeof(path), "%s/%s/tokenizer.json", tmpdir, cases[i].dir);
        FILE *f = fopen(path, "w");
        if (f == NULL)
            continue;
        fprintf(f, "{\"normalizer\": %s, \"pre_tokenizer\": null, \"model\": {\"type\": \"BPE\", \"byte_fallback\": "
                   "true, \"vocab\": {\"a\": 0, \"" SP "\": 1}, \"merges\": []}}", cases[i].normalizer);
        fclose(f);
        llm_err err = { { 0 } };
        llm_tokenizer *t = llm_tok_load_hf(path, &err);
        ok(t == NULL && strstr(err.msg, "normalizer"), "%s: refused: %s", cases[i].dir, err.msg);
        llm_tok_free(t);
    }
    char path[300];
    snprintf(path, sizeof(path), "%s/metaspace.json", tmpdir);
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fputs("{\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"" SP "\"}, "
              "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"" SP "\", \"split\": true}, "
              "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}", f);
        fclose(f);
        llm_err err = { { 0 } };
        llm_tokenizer *t = llm_tok_load_hf(path, &err);
        ok(t == NULL && strstr(err.msg, "pre-tokenizer"), "SentencePiece-style with a pre-tokenizer refused: %s",
           err.msg);
        llm_tok_free(t);
    }
}

int main(void)
{
    if (mkdtemp(tmpdir) == NULL) {
        ok(0, "mkdtemp");
        return done_testing();
    }
    llm_tokenizer *t = gemma_gguf("gemma.gguf", 3);
    check(t, "GGUF", 1);
    llm_tok_free(t);
    /* <end_of_turn> user-defined (the SentencePiece model's own type): still where generation ends */
    t = gemma_gguf("gemma-user-eot.gguf", 4);
    check(t, "GGUF, user-defined <end_of_turn>", 0);
    llm_tok_free(t);

    const char *replace = "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"" SP "\"}";
    t = gemma_hf("gemma-hf", replace, 1);
    check(t, "tokenizer.json", 1);
    llm_tok_free(t);

    /* Llama 2's tokenizer.json: Prepend "▁" then the same Replace: the dummy prefix, dropped on decoding */
    t = gemma_hf("llama2-hf", "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \""
                              SP "\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \""
                              SP "\"}]}", 1);
    if (t != NULL) {
        int32_t *ids = NULL;
        int n = llm_tok_encode(t, "hello world", 11, 0, &ids);
        ok(same_ids(ids, n, IDS(I_SPACE, I_HELLO, I_WORLD)), "Prepend: the dummy prefix opens the text");
        char *s = llm_tok_decode(t, ids, (size_t)n);
        ok(s && !strcmp(s, "hello world"), "Prepend: ... and is dropped on decoding (\"%s\")", s ? s : "");
        free(s);
        free(ids);
    }
    llm_tok_free(t);
    check_bad_hf();

    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        diag("could not remove %s", tmpdir);
    return done_testing();
}
