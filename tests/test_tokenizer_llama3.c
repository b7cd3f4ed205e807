/* Llama 3 byte-level BPE against the reference vectors (tools/gen_tok_vectors.mjs):
 * every vector encodes to the reference ids and decodes back to its text, from
 * tokenizer.json and from the same vocabulary converted to GGUF. Plus special
 * tokens, invalid UTF-8, EOG ids, the chat template and timing figures. */
#include "tap.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf.h"
#include "model_write.h"
#include "tokenizer.h"

#define TOK_JSON "../shared/tokenizers/llama3/tokenizer.json"
#define VECTORS  "tests/data/llama3_tok_vectors.json"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static cJSON *read_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    cJSON *j = got == (size_t)n ? cJSON_ParseWithLength(buf, got) : NULL;
    free(buf);
    return j;
}

static int same_ids(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(int32_t)) == 0);
}

static void print_ids(const char *what, const int32_t *v, int n)
{
    printf("#   %s:", what);
    for (int i = 0; i < n && i < 40; i++)
        printf(" %d", v[i]);
    printf("\n");
}

/* Every vector: encode == reference, decode(encode) == text. Returns failures. */
static int check_vectors(const llm_tokenizer *t, const cJSON *vec, const char *label)
{
    int bad_enc = 0, bad_dec = 0, n = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, vec) {
        const char *text = cJSON_GetObjectItem(v, "text")->valuestring;
        const cJSON *jids = cJSON_GetObjectItem(v, "ids");
        int nw = cJSON_GetArraySize(jids);
        int32_t *want = malloc(sizeof(int32_t) * (size_t)(nw + 1));
        int k = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, jids) want[k++] = e->valueint;
        int32_t *got = NULL;
        int ng = llm_tok_encode(t, text, strlen(text), 0, &got);
        if (!same_ids(got, ng, want, nw)) {
            if (bad_enc++ < 5) {
                diag("%s: encode mismatch for \"%s\"", label, text);
                print_ids("got ", got, ng);
                print_ids("want", want, nw);
            }
        }
        char *back = llm_tok_decode(t, got, ng > 0 ? (size_t)ng : 0);
        if (back == NULL || strcmp(back, text) != 0) {
            if (bad_dec++ < 5)
                diag("%s: decode mismatch for \"%s\": \"%s\"", label, text, back ? back : "(null)");
        }
        free(back);
        free(got);
        free(want);
        n++;
    }
    ok(n >= 320, "%s: %d vectors", label, n);
    is_int(bad_enc, 0, "%s: every vector encodes to the reference ids", label);
    is_int(bad_dec, 0, "%s: every vector decodes back to its text", label);
    return bad_enc + bad_dec;
}

static void check_special(const llm_tokenizer *t)
{
    int eot = llm_tok_find(t, "<|eot_id|>");
    is_int(eot, 128009, "<|eot_id|> is 128009");
    is_int(llm_tok_bos(t), 128000, "BOS is <|begin_of_text|>");
    is_int(llm_tok_eos(t), 128001, "EOS is <|end_of_text|>");
    ok(llm_tok_is_special(t, 128006) && !llm_tok_is_special(t, 9906), "control tokens are special, words are not");

    const char *chat = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
    int32_t *ids = NULL;
    int n = llm_tok_encode(t, chat, strlen(chat), LLM_TOK_PARSE_SPECIAL | LLM_TOK_ADD_BOS, &ids);
    int32_t want[] = { 128000, 128006, 882, 128007, 271, 13347, 128009 };
    ok(same_ids(ids, n, want, 7), "PARSE_SPECIAL + BOS: chat header splits into control tokens");
    if (!same_ids(ids, n, want, 7))
        print_ids("got", ids, n);
    char *s = llm_tok_decode_ex(t, ids, (size_t)n, 0);
    ok(s && strcmp(s, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>") == 0,
       "decode keeping control tokens restores the text");
    free(s);
    s = llm_tok_decode(t, ids, (size_t)n);
    ok(s && strcmp(s, "user\n\nHi") == 0, "decode skips control tokens by default (\"%s\")", s ? s : "");
    free(s);
    free(ids);

    const char *mid = "a<|eot_id|>b<|eot_id";
    n = llm_tok_encode(t, mid, strlen(mid), LLM_TOK_PARSE_SPECIAL, &ids);
    ok(n >= 3 && ids[0] == 64 && ids[1] == 128009 && ids[2] == 65, "PARSE_SPECIAL: special text between words; partial tag stays text");
    int plain = 1;
    for (int i = 3; i < n; i++)
        plain &= ids[i] < 128000;
    ok(plain, "an unterminated tag is plain text");
    free(ids);
    n = llm_tok_encode(t, mid, strlen(mid), 0, &ids);
    plain = 1;
    for (int i = 0; i < n; i++)
        plain &= ids[i] < 128000;
    ok(plain && n > 5, "without PARSE_SPECIAL special-token text stays plain text");
    free(ids);

    n = llm_tok_encode(t, "", 0, LLM_TOK_ADD_BOS, &ids);
    ok(n == 1 && ids[0] == 128000, "empty input with BOS gives [BOS]");
    free(ids);

    int32_t eog[8];
    int ne = llm_tok_eog_ids(t, eog, 8), has_eot = 0, has_eom = 0, has_end = 0;
    for (int i = 0; i < ne; i++) {
        has_eot |= eog[i] == 128009;
        has_eom |= eog[i] == 128008;
        has_end |= eog[i] == 128001;
    }
    /* Llama 3.0's vocabulary has no <|eom_id|> (128008 is a reserved token) */
    ok(has_eot && has_end && !has_eom && ne == 2, "EOG ids: <|end_of_text|> and <|eot_id|> (%d)", ne);
}

static void check_invalid_utf8(const llm_tokenizer *t)
{
    static const char *cases[] = { "\xff", "a\x80z", "\xe4\xbd", "ok \xe4\xbd\xa0\xe5 end", "\xc0\xaf", "\xed\xa0\x80x",
                                   "\xf4\x90\x80\x80", "caf\xc3", "\xfe\xfe\xff hello \x80\x81" };
    int bad = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int32_t *ids = NULL;
        int n = llm_tok_encode(t, cases[i], strlen(cases[i]), 0, &ids);
        /* raw bytes of the pieces must give the input back exactly */
        size_t len = 0;
        char buf[256];
        for (int k = 0; k < n; k++) {
            const char *p;
            size_t pl;
            if (llm_tok_piece(t, ids[k], &p, &pl) == 0 && len + pl < sizeof(buf)) {
                memcpy(buf + len, p, pl);
                len += pl;
            }
        }
        bad += n <= 0 || len != strlen(cases[i]) || memcmp(buf, cases[i], len) != 0;
        free(ids);
    }
    is_int(bad, 0, "invalid UTF-8 encodes and its pieces round-trip byte for byte");
    int32_t *ids = NULL;
    int n = llm_tok_encode(t, "a\xff" "b", 3, 0, &ids);
    char *s = llm_tok_decode(t, ids, (size_t)n);
    ok(s && strcmp(s, "a\xef\xbf\xbd" "b") == 0, "decode shows an invalid byte as U+FFFD");
    free(s);
    free(ids);
}

static void check_stream(const llm_tokenizer *t)
{
    /* "你好😀" through the streaming detokenizer: no partial characters leak */
    const char *text = "\xe4\xbd\xa0\xe5\xa5\xbd\xf0\x9f\x98\x80!";
    int32_t *ids = NULL;
    int n = llm_tok_encode(t, text, strlen(text), 0, &ids);
    llm_detok d;
    llm_detok_init(&d, t);
    char out[512];
    size_t len = 0;
    int partial = 0;
    for (int i = 0; i < n; i++) {
        size_t k = llm_detok_push(&d, ids[i], out + len, sizeof(out) - len);
        for (size_t j = 0; j < k;) { /* each chunk is whole characters */
            unsigned char c = (unsigned char)out[len + j];
            size_t cl = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
            partial |= j + cl > k;
            j += cl;
        }
        len += k;
    }
    len += llm_detok_flush(&d, out + len, sizeof(out) - len);
    ok(!partial && len == strlen(text) && memcmp(out, text, len) == 0, "streaming detok emits whole characters only");
    free(ids);
    /* a control token's text is left out, but for the one kept (the tag function calls open with) */
    int32_t tag = llm_tok_find(t, "<|start_header_id|>"), eot = llm_tok_find(t, "<|eot_id|>"), seq[3] = { 0, tag, eot };
    for (int keep = 0; keep < 2; keep++) {
        llm_detok_init(&d, t);
        if (keep) d.keep[1] = tag;
        len = 0;
        for (int i = 0; i < 3; i++) len += llm_detok_push(&d, seq[i], out + len, sizeof(out) - len);
        out[len] = 0;
        ok(!strcmp(out, keep ? "!<|start_header_id|>" : "!"), "detok: control tokens %s: '%s'",
           keep ? "left out but the one kept" : "left out", out);
    }
}

static void timing(const llm_tokenizer *t, const cJSON *vec)
{
    /* concatenate all vector texts a few times and measure encode throughput (reported, not asserted) */
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    for (int rep = 0; rep < 8; rep++) {
        const cJSON *v;
        cJSON_ArrayForEach(v, vec) {
            const char *s = cJSON_GetObjectItem(v, "text")->valuestring;
            size_t k = strlen(s);
            if (len + k + 1 < cap) {
                memcpy(buf + len, s, k);
                len += k;
                buf[len++] = ' ';
            }
        }
    }
    int32_t *ids = NULL;
    double t0 = now();
    int n = llm_tok_encode(t, buf, len, 0, &ids);
    double dt = now() - t0;
    diag("encode: %zu bytes -> %d tokens in %.3f s (%.0f tokens/s, %.1f MB/s)", len, n, dt, n / dt, len / dt / 1e6);
    free(ids);
    free(buf);
}

/* Fill in the middle: the ids from GGUF keys, or by text from a tokenizer.json whose reserved tokens are named
 * as Qwen 2.5-Coder's; the prompt is [BOS] <prefix> prefix <suffix> suffix <middle>; a vocabulary without them
 * has none. */
static void check_fim(llm_tokenizer *plain)
{
    int32_t fim[3], *ids = NULL, *p = NULL, *q = NULL;
    llm_err err = { { 0 } };
    ok(llm_tok_fim_ids(plain, fim) == -1 && llm_tok_encode_fim(plain, "a", 1, "b", 1, &ids) == -1,
       "Llama 3's vocabulary has no fill-in-the-middle tokens");
    char path[] = "/tmp/llm_tok_fimXXXXXX";
    int fd = mkstemp(path);
    gguf_writer *w = gguf_writer_new();
    int wrote = fd >= 0 && w && llm_gguf_w_bpe_from_hf(w, TOK_JSON, NULL, &err) == 0;
    if (wrote) {
        gguf_w_u32(w, "tokenizer.ggml.fim_pre_token_id", 128014);
        gguf_w_u32(w, "tokenizer.ggml.fim_suf_token_id", 128015);
        gguf_w_u32(w, "tokenizer.ggml.fim_mid_token_id", 128016);
        wrote = gguf_writer_write(w, path, &err) == 0;
    }
    gguf_writer_free(w);
    gguf_ctx *g = wrote ? gguf_open(path, &err) : NULL;
    llm_tokenizer *tg = g ? llm_tok_load_gguf(g, &err) : NULL;
    ok(tg && llm_tok_fim_ids(tg, fim) == 0 && fim[0] == 128014 && fim[1] == 128015 && fim[2] == 128016,
       "ids from tokenizer.ggml.fim_pre/suf/mid_token_id");
    const char *pre = "def add(a, b):\n    ", *suf = "\n\nprint(add(1, 2))\n";
    int n = tg ? llm_tok_encode_fim(tg, pre, strlen(pre), suf, strlen(suf), &ids) : -1;
    int np = llm_tok_encode(plain, pre, strlen(pre), 0, &p), nq = llm_tok_encode(plain, suf, strlen(suf), 0, &q);
    ok(n == np + nq + 4 && ids[0] == 128000 && ids[1] == 128014 && !memcmp(ids + 2, p, (size_t)np * 4) &&
       ids[2 + np] == 128015 && !memcmp(ids + 3 + np, q, (size_t)nq * 4) && ids[n - 1] == 128016,
       "[BOS] <prefix> prefix <suffix> suffix <middle> (%d ids)", n);
    free(ids);
    llm_tok_free(tg);
    gguf_close(g);
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    /* by text: a tokenizer.json with the reserved tokens named <|fim_prefix|> ... */
    cJSON *j = read_json(TOK_JSON);
    const cJSON *a;
    static const char *const names[3] = { "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>" };
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(j, "added_tokens")) {
        int id = (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(a, "id"));
        if (id >= 128014 && id <= 128016)
            cJSON_ReplaceItemInObjectCaseSensitive((cJSON *)a, "content", cJSON_CreateString(names[id - 128014]));
    }
    char dir[] = "/tmp/llm_tok_fimdirXXXXXX", tj[64];
    char *txt = j && mkdtemp(dir) ? cJSON_PrintUnformatted(j) : NULL;
    snprintf(tj, sizeof(tj), "%s/tokenizer.json", dir);
    FILE *f = txt ? fopen(tj, "w") : NULL;
    if (f != NULL) {
        fputs(txt, f);
        fclose(f);
    }
    free(txt);
    cJSON_Delete(j);
    llm_tokenizer *th = f ? llm_tok_load_hf(tj, &err) : NULL;
    ok(th && llm_tok_fim_ids(th, fim) == 0 && fim[0] == 128014 && fim[2] == 128016, "ids by their text: %s",
       th ? "found" : err.msg);
    llm_tok_free(th);
    unlink(tj);
    rmdir(dir);
    free(p);
    free(q);
}

/* A file's bytes copied to dir/name. */
static int copy_to(const char *from, const char *dir, const char *name)
{
    llm_err err;
    size_t len;
    char *b = llm_read_file(from, (size_t)1 << 26, &len, &err), to[128];
    snprintf(to, sizeof(to), "%s/%s", dir, name);
    FILE *f = b ? fopen(to, "wb") : NULL;
    int ok = f != NULL && fwrite(b, 1, len, f) == len;
    if (f != NULL)
        ok &= fclose(f) == 0;
    free(b);
    return ok ? 0 : -1;
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
}

/* The chat template in a file of its own beside tokenizer.json (chat_template.jinja, else chat_template.json),
 * as transformers saves it since 4.43 (openai/gpt-oss-20b's, Mistral Small 3.2's): it replaces
 * tokenizer_config.json's; a malformed one is an error. */
static void check_template_files(void)
{
    char dir[] = "/tmp/llm_tok_tpldirXXXXXX", tj[64], p[128];
    llm_err err = { { 0 } };
    int made = mkdtemp(dir) != NULL && copy_to(TOK_JSON, dir, "tokenizer.json") == 0 &&
               copy_to("../shared/tokenizers/llama3/tokenizer_config.json", dir, "tokenizer_config.json") == 0;
    snprintf(tj, sizeof(tj), "%s/tokenizer.json", dir);
    const char *jinja = "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}";
    write_text(dir, "chat_template.jinja", jinja);
    llm_tokenizer *t = made ? llm_tok_load_hf(tj, &err) : NULL;
    ok(t && llm_tok_chat_template(t) && strcmp(llm_tok_chat_template(t), jinja) == 0,
       "chat_template.jinja replaces tokenizer_config.json's template: %s", t ? "ok" : err.msg);
    llm_tok_free(t);
    snprintf(p, sizeof(p), "%s/chat_template.jinja", dir);
    unlink(p);
    write_text(dir, "chat_template.json", "{\"chat_template\": \"[SYSTEM_PROMPT]{{ x }}[/SYSTEM_PROMPT]\"}");
    t = made ? llm_tok_load_hf(tj, &err) : NULL;
    ok(t && llm_tok_chat_template(t) && strcmp(llm_tok_chat_template(t), "[SYSTEM_PROMPT]{{ x }}[/SYSTEM_PROMPT]") == 0,
       "chat_template.json's chat_template too: %s", t ? "ok" : err.msg);
    llm_tok_free(t);
    write_text(dir, "chat_template.json", "[\"not an object\"]");
    t = made ? llm_tok_load_hf(tj, &err) : NULL;
    ok(made && t == NULL && strstr(err.msg, "not a JSON object with a chat_template string"),
       "a malformed chat_template.json: %s", t ? "loaded" : err.msg);
    llm_tok_free(t);
    static const char *const names[3] = { "chat_template.json", "tokenizer.json", "tokenizer_config.json" };
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

int main(void)
{
    cJSON *vec = read_json(VECTORS);
    ok(vec != NULL && cJSON_IsArray(vec), "read %s", VECTORS);
    if (vec == NULL)
        return done_testing();

    llm_err err = { { 0 } };
    double t0 = now();
    llm_tokenizer *t = llm_tok_load_hf(TOK_JSON, &err);
    double dt = now() - t0;
    ok(t != NULL, "load %s (%s)", TOK_JSON, t ? "ok" : err.msg);
    if (t == NULL) {
        cJSON_Delete(vec);
        return done_testing();
    }
    diag("tokenizer.json load: %.3f s", dt);
    is_int(llm_tok_kind_of(t), LLM_TOK_BPE, "byte-level BPE");
    is_int(llm_tok_vocab_size(t), 128256, "vocabulary of 128256");
    ok(llm_tok_chat_template(t) != NULL && strstr(llm_tok_chat_template(t), "start_header_id") != NULL,
       "chat template from tokenizer_config.json");
    ok(llm_tok_add_bos(t), "BOS wanted");
    check_vectors(t, vec, "tokenizer.json");
    check_special(t);
    check_invalid_utf8(t);
    check_stream(t);
    check_fim(t);
    check_template_files();
    timing(t, vec);

    /* The same vocabulary as GGUF metadata (tokenizer.ggml.model gpt2, pre llama-bpe). */
    char path[] = "/tmp/llm_tok_testXXXXXX";
    int fd = mkstemp(path);
    gguf_writer *w = gguf_writer_new();
    int wrote = fd >= 0 && w && llm_gguf_w_bpe_from_hf(w, TOK_JSON, NULL, &err) == 0 && gguf_writer_write(w, path, &err) == 0;
    gguf_writer_free(w);
    ok(wrote, "write the tokenizer as GGUF (%s)", wrote ? "ok" : err.msg);
    gguf_ctx *g = wrote ? gguf_open(path, &err) : NULL;
    t0 = now();
    llm_tokenizer *tg = g ? llm_tok_load_gguf(g, &err) : NULL;
    dt = now() - t0;
    ok(tg != NULL, "load GGUF gpt2 tokenizer (%s)", tg ? "ok" : err.msg);
    if (tg != NULL) {
        diag("GGUF tokenizer load: %.3f s", dt);
        check_vectors(tg, vec, "GGUF");
        is_int(llm_tok_find(tg, "<|eot_id|>"), 128009, "GGUF: <|eot_id|> found");
        is_int(llm_tok_bos(tg), 128000, "GGUF: BOS");
    }
    llm_tok_free(tg);
    gguf_close(g);
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    llm_tok_free(t);
    cJSON_Delete(vec);
    return done_testing();
}
