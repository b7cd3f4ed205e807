/* Deterministic mutation fuzzing of the model-file parsers: byte flips,
 * truncations and corrupted length fields over the real stories260K.gguf, a
 * small safetensors file and a shard index. Every parse must succeed or fail
 * with a message (ASan/UBSan catch the rest). */
#include "gguf.h"
#include "model.h"
#include "safetensors.h"
#include "tap.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next(void)
{
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz);
    if (b != NULL && fread(b, 1, (size_t)sz, f) != (size_t)sz) { free(b); b = NULL; }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

/* Mutate buf (len n) in place within [0, region); returns the size to parse. */
static size_t mutate(uint8_t *buf, size_t n, size_t region)
{
    size_t size = n;
    int kind = (int)(next() % 4);
    int count = 1 + (int)(next() % 4);
    for (int i = 0; i < count; i++) {
        size_t at = (size_t)(next() % region);
        switch (kind) {
        case 0: buf[at] ^= (uint8_t)(1u << (next() % 8)); break;           /* bit flip */
        case 1: buf[at] = (uint8_t)next(); break;                          /* random byte */
        case 2: {                                                          /* length field */
            static const uint64_t evil[] = { 0, 1, 0x7fffffffULL, 0xffffffffULL, 1ULL << 32, 1ULL << 62,
                                             UINT64_MAX, UINT64_MAX - 7, 12345678 };
            uint64_t v = evil[next() % (sizeof(evil) / sizeof(evil[0]))];
            at &= ~(size_t)7;
            if (at + 8 <= region)
                memcpy(buf + at, &v, 8);
            break;
        }
        default: size = (size_t)(next() % n); break;                       /* truncation */
        }
    }
    return size;
}

static void fuzz_gguf(void)
{
    size_t n;
    uint8_t *orig = slurp("../shared/models/stories260K/stories260K.gguf", &n);
    ok(orig != NULL, "read stories260K.gguf");
    if (orig == NULL)
        return;
    llm_err err = { { 0 } };
    gguf_ctx *g = gguf_open_mem(orig, n, &err);
    ok(g != NULL, "pristine file parses");
    /* Mutations target the header (metadata + tensor infos), where the parser reads. */
    size_t region = g ? (size_t)((const uint8_t *)g->tensors[0].data - g->base) : 4096;
    for (uint64_t i = 0; g && i < g->n_tensors; i++)
        if ((size_t)((const uint8_t *)g->tensors[i].data - g->base) < region)
            region = (size_t)((const uint8_t *)g->tensors[i].data - g->base);
    gguf_close(g);
    uint8_t *buf = malloc(n);
    int clean = 1, opened = 0, iters = 6000;
    for (int it = 0; it < iters; it++) {
        memcpy(buf, orig, region);
        memcpy(buf + region, orig + region, it == 0 ? n - region : 0);
        size_t size = mutate(buf, n, region);
        err.msg[0] = 0;
        g = gguf_open_mem(buf, size, &err);
        if (g == NULL) {
            clean &= err.msg[0] != 0;
        } else {
            opened++;
            /* Walk everything the reader exposes. */
            for (uint64_t k = 0; k < g->n_kv; k++) {
                const gguf_kv *kv = &g->kv[k];
                int64_t v; float f;
                for (uint64_t j = 0; kv->type == GGUF_TYPE_ARRAY && j < kv->arr_n && j < 4; j++) {
                    gguf_arr_i64(kv, j, &v);
                    gguf_arr_f32(kv, j, &f);
                    if (kv->strs)
                        clean &= kv->strs[j].ptr >= (const char *)buf && kv->strs[j].ptr + kv->strs[j].len <= (const char *)buf + size;
                }
            }
            for (uint64_t t = 0; t < g->n_tensors; t++)
                clean &= (const uint8_t *)g->tensors[t].data + g->tensors[t].nbytes <= buf + size;
            gguf_close(g);
        }
    }
    ok(clean, "%d mutated GGUF headers: every parse succeeded in bounds or failed with a message (%d opened)",
       iters, opened);

    /* Whole-model loads over a sample of mutated files (loader checks + tokenizer). */
    char path[128];
    snprintf(path, sizeof(path), "/tmp/test_fuzz_%d.gguf", (int)getpid());
    int mclean = 1, loaded = 0;
    for (int it = 0; it < 150; it++) {
        memcpy(buf, orig, n);
        size_t size = mutate(buf, n, region);
        FILE *f = fopen(path, "wb");
        fwrite(buf, 1, size, f);
        fclose(f);
        err.msg[0] = 0;
        llm_model *m = llm_model_load(path, NULL, &err);
        if (m == NULL)
            mclean &= err.msg[0] != 0;
        else
            loaded++;
        llm_model_free(m);
    }
    unlink(path);
    ok(mclean, "150 mutated GGUF model loads fail cleanly or load (%d loaded)", loaded);
    free(buf);
    free(orig);
}

/* A small valid safetensors file: three tensors, BF16 / F16 / F32, plus __metadata__. */
static size_t make_safetensors(uint8_t *out, size_t cap)
{
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
                      "\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[12,20]},"
                      "\"c\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[20,36]}}";
    uint64_t hl = strlen(hdr);
    if (8 + hl + 36 > cap)
        return 0;
    memcpy(out, &hl, 8);
    memcpy(out + 8, hdr, hl);
    for (int i = 0; i < 36; i++)
        out[8 + hl + i] = (uint8_t)(i * 13);
    return 8 + hl + 36;
}

static void fuzz_safetensors(void)
{
    uint8_t orig[1024], buf[1024];
    size_t n = make_safetensors(orig, sizeof(orig));
    llm_err err = { { 0 } };
    st_file *f = st_open_mem(orig, n, "mem.safetensors", &err);
    ok(f && f->n == 3 && st_find(f, "a")->type == LLM_BF16 && st_find(f, "b")->type == LLM_F16 &&
       st_find(f, "c")->nbytes == 16 && st_find(f, "__metadata__") == NULL, "pristine safetensors parses");
    st_close(f);
    /* Specific failures. */
    memcpy(buf, orig, n);
    char *p = strstr((char *)buf + 8, "\"F16\"") + 1;
    memcpy(p, "F64", 3);
    f = st_open_mem(buf, n, "mem.safetensors", &err);
    ok(f == NULL && strstr(err.msg, "unsupported dtype F64"), "unsupported dtype: %s", err.msg);
    memcpy(p, "I64", 3); /* an integer tensor is a buffer (BERT's position_ids): left out, the rest loads */
    f = st_open_mem(buf, n, "mem.safetensors", &err);
    ok(f != NULL && f->n == 2 && st_find(f, "b") == NULL && st_find(f, "c") != NULL, "an I64 buffer is skipped");
    st_close(f);
    { /* integer tensors are kept under the names quantised checkpoints give them (GPTQ's qweight and g_idx,
       * compressed-tensors' I8 weight), raw; the same types under other names are buffers */
        const char *h = "{\"m.qweight\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                        "\"m.weight_shape\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[16,32]},"
                        "\"m.g_idx\":{\"dtype\":\"I32\",\"shape\":[4],\"data_offsets\":[32,48]},"
                        "\"ids\":{\"dtype\":\"I32\",\"shape\":[4],\"data_offsets\":[48,64]},"
                        "\"n.weight\":{\"dtype\":\"I8\",\"shape\":[4],\"data_offsets\":[64,68]},"
                        "\"n.bias\":{\"dtype\":\"I8\",\"shape\":[4],\"data_offsets\":[68,72]}}";
        uint64_t hl = strlen(h);
        memcpy(buf, &hl, 8);
        memcpy(buf + 8, h, hl);
        memset(buf + 8 + hl, 0, 72);
        f = st_open_mem(buf, 8 + hl + 72, "mem.safetensors", &err);
        ok(f != NULL && f->n == 3 && st_find(f, "m.qweight")->kind == ST_I32 && st_find(f, "m.qweight")->nbytes == 16 &&
           st_find(f, "m.g_idx")->kind == ST_I32 && st_find(f, "n.weight")->kind == ST_I8 &&
           st_find(f, "ids") == NULL && st_find(f, "n.bias") == NULL && st_find(f, "m.weight_shape") == NULL,
           "a quantised checkpoint's integer parts kept raw, other integers left out");
        st_close(f);
    }
    f = st_open_mem(orig, n - 1, "mem.safetensors", &err);
    ok(f == NULL && strstr(err.msg, "outside"), "data past the end: %s", err.msg);
    int clean = 1, opened = 0, iters = 4000;
    for (int it = 0; it < iters; it++) {
        memcpy(buf, orig, n);
        size_t size = mutate(buf, n, n);
        err.msg[0] = 0;
        f = st_open_mem(buf, size, "mem.safetensors", &err);
        if (f == NULL) {
            clean &= err.msg[0] != 0;
        } else {
            opened++;
            for (size_t i = 0; i < f->n; i++)
                clean &= (const uint8_t *)f->t[i].data + f->t[i].nbytes <= buf + size;
            st_close(f);
        }
    }
    ok(clean, "%d mutated safetensors files fail cleanly or parse in bounds (%d parsed)", iters, opened);

    const char *ix = "{\"metadata\":{\"total_size\":36},\"weight_map\":{\"a\":\"m-1.safetensors\","
                     "\"b\":\"m-2.safetensors\",\"c\":\"m-1.safetensors\"}}";
    st_index *x = st_index_parse(ix, strlen(ix), "index.json", &err);
    ok(x && x->n == 3 && x->n_shards == 2 && x->shard_of[2] == 0, "pristine index parses");
    st_index_free(x);
    const char *bad = "{\"weight_map\":{\"a\":\"../etc/passwd\"}}";
    x = st_index_parse(bad, strlen(bad), "index.json", &err);
    ok(x == NULL && strstr(err.msg, "shard file"), "index escaping the directory rejected: %s", err.msg);
    clean = 1;
    size_t in = strlen(ix);
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, ix, in);
        size_t size = mutate(buf, in, in);
        err.msg[0] = 0;
        x = st_index_parse((const char *)buf, size, "index.json", &err);
        if (x == NULL)
            clean &= err.msg[0] != 0;
        st_index_free(x);
    }
    ok(clean, "3000 mutated indexes fail cleanly or parse");
}

/* A SentencePiece ModelProto in protobuf's wire format, written by hand: pieces (text, score, type), a
 * TrainerSpec (BPE, ids) and a NormalizerSpec (the dummy prefix). */
static size_t pb_varint(uint8_t *o, uint64_t v)
{
    size_t n = 0;
    do { o[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)); v >>= 7; } while (v);
    return n;
}

static size_t pb_bytes(uint8_t *o, uint32_t field, const void *b, size_t len)
{
    size_t n = pb_varint(o, (uint64_t)field << 3 | 2);
    n += pb_varint(o + n, len);
    memcpy(o + n, b, len);
    return n + len;
}

static size_t make_spm_model(uint8_t *out)
{
    static const struct { const char *t; float score; int type; } pieces[] = {
        { "<unk>", 0, 2 }, { "<s>", 0, 3 }, { "</s>", 0, 3 }, { "<0x41>", 0, 6 }, { "\xe2\x96\x81", -1, 1 },
        { "a", -2, 1 }, { "b", -3, 1 }, { "\xe2\x96\x81" "a", -4, 1 }, { "ab", -5, 1 }, { "\xe2\x96\x81" "ab", -6, 1 } };
    size_t n = 0;
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        uint8_t p[64];
        size_t k = pb_bytes(p, 1, pieces[i].t, strlen(pieces[i].t));
        p[k++] = 2 << 3 | 5;
        memcpy(p + k, &pieces[i].score, 4);
        k += 4;
        p[k++] = 3 << 3 | 0;
        k += pb_varint(p + k, (uint64_t)pieces[i].type);
        n += pb_bytes(out + n, 1, p, k);
    }
    uint8_t ts[16], ns[8];
    size_t k = 0;
    ts[k++] = 3 << 3, ts[k++] = 2; /* model_type BPE */
    k += pb_varint(ts + k, 40 << 3), ts[k++] = 0; /* unk_id 0 */
    n += pb_bytes(out + n, 2, ts, k);
    ns[0] = 3 << 3, ns[1] = 1; /* add_dummy_prefix */
    n += pb_bytes(out + n, 3, ns, 2);
    return n;
}

static void fuzz_spm_model(void)
{
    uint8_t model[1024], buf[1024];
    size_t n = make_spm_model(model);
    char path[] = "/tmp/fuzz_spm_XXXXXX";
    int fd = mkstemp(path);
    ok(fd >= 0, "a scratch tokenizer.model");
    if (fd < 0) return;
    close(fd);
    llm_err err = { "" };
    FILE *f = fopen(path, "wb");
    fwrite(model, 1, n, f);
    fclose(f);
    llm_tokenizer *t = llm_tok_load_spm_model(path, &err);
    int32_t *ids = NULL;
    int k = t ? llm_tok_encode(t, "ab ab", 5, 0, &ids) : -1;
    ok(t != NULL && llm_tok_vocab_size(t) == 10 && llm_tok_bos(t) == 1 && k == 2 && ids[0] == 9 && ids[1] == 9,
       "a hand-written BPE model loads: \"ab ab\" is two \"\xe2\x96\x81" "ab\" (%d ids: %d %d) %s", k,
       k > 0 ? ids[0] : -1, k > 1 ? ids[1] : -1, err.msg);
    free(ids);
    llm_tok_free(t);
    int clean = 1, loaded = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, model, n);
        size_t len = mutate(buf, n, n);
        f = fopen(path, "wb");
        fwrite(buf, 1, len, f);
        fclose(f);
        err.msg[0] = 0;
        t = llm_tok_load_spm_model(path, &err);
        if (t != NULL) {
            loaded++;
            ids = NULL;
            llm_tok_encode(t, "ab A\xc3\xa9", 6, LLM_TOK_ADD_BOS, &ids);
            free(ids);
            llm_tok_free(t);
        } else {
            clean &= err.msg[0] != 0;
        }
    }
    unlink(path);
    ok(clean, "3000 mutated tokenizer.model files fail with a message or load and encode (%d loaded)", loaded);
}

int main(void)
{
    fuzz_gguf();
    fuzz_safetensors();
    fuzz_spm_model();
    return done_testing();
}
