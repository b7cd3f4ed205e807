/* Model loaders and writers over the real stories260K files: llama2.c and GGUF
 * load to the same config and weights; GGUF (f16/q8_0) and HF re-saves reload;
 * the tiny random preset loads; broken models give clear errors. */
#include "gguf.h"
#include "backend_util.h"
#include "model.h"
#include "model_gen.h"
#include "model_write.h"
#include "safetensors.h"
#include "tap.h"
#include "tokenizer.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIR260 "../shared/models/stories260K"
static char tmpdir[256];

static void check_260k_cfg(const llm_model *m, const char *what)
{
    const llm_config *c = &m->cfg;
    ok(c->dim == 64 && c->hidden_dim == 172 && c->n_layers == 5 && c->n_heads == 8 && c->n_kv_heads == 4 &&
       c->head_dim == 8 && c->vocab_size == 512 && c->seq_len == 512 && c->tied_embeddings &&
       c->rope_layout == (strcmp(m->format, "hf") == 0 ? LLM_ROPE_HALF : LLM_ROPE_ADJACENT) && fabsf(c->rope_theta - 10000.0f) < 1e-3f &&
       fabsf(c->norm_eps - 1e-5f) < 1e-9f, "%s: stories260K config", what);
    ok(m->tok != NULL, "%s: tokenizer loaded", what);
    ok(c->bos_id == 1 && c->eos_id == 2, "%s: bos/eos 1/2", what);
}

/* Max abs difference between two tensors of the same shape, after dequantisation. */
static double tensor_diff(const llm_tensor *a, const llm_tensor *b, int (*rowmap)(int, int), int hd)
{
    if (a->ne[0] != b->ne[0] || a->ne[1] != b->ne[1])
        return 1e9;
    size_t n = (size_t)a->ne[0];
    float *x = malloc(n * 4), *y = malloc(n * 4);
    double md = 0;
    for (int64_t r = 0; r < a->ne[1]; r++) {
        int rb = rowmap ? rowmap((int)r, hd) : (int)r;
        llm_row_to_f32(a->type, (const uint8_t *)a->data + r * llm_dtype_row_bytes(a->type, n), x, n);
        llm_row_to_f32(b->type, (const uint8_t *)b->data + rb * llm_dtype_row_bytes(b->type, n), y, n);
        for (size_t i = 0; i < n; i++)
            md = fmax(md, fabs((double)x[i] - y[i]));
    }
    free(x);
    free(y);
    return md;
}

/* HF row p = j*hd/2 + i of a head holds the adjacent-layout row 2i + j. */
static int half_to_adjacent(int r, int hd)
{
    int base = r - r % hd, p = r % hd, half = hd / 2;
    return base + 2 * (p % half) + p / half;
}

static double model_diff(const llm_model *a, const llm_model *b, int permuted)
{
    double d = tensor_diff(&a->tok_embd, &b->tok_embd, NULL, 0);
    d = fmax(d, tensor_diff(&a->out_norm, &b->out_norm, NULL, 0));
    for (int l = 0; l < a->cfg.n_layers; l++) {
        const llm_layer *x = &a->layers[l], *y = &b->layers[l];
        d = fmax(d, tensor_diff(&x->wq, &y->wq, permuted ? half_to_adjacent : NULL, a->cfg.head_dim));
        d = fmax(d, tensor_diff(&x->wk, &y->wk, permuted ? half_to_adjacent : NULL, a->cfg.head_dim));
        d = fmax(d, tensor_diff(&x->wv, &y->wv, NULL, 0));
        d = fmax(d, tensor_diff(&x->wo, &y->wo, NULL, 0));
        d = fmax(d, tensor_diff(&x->w_gate, &y->w_gate, NULL, 0));
        d = fmax(d, tensor_diff(&x->w_up, &y->w_up, NULL, 0));
        d = fmax(d, tensor_diff(&x->w_down, &y->w_down, NULL, 0));
        d = fmax(d, tensor_diff(&x->attn_norm, &y->attn_norm, NULL, 0));
        d = fmax(d, tensor_diff(&x->ffn_norm, &y->ffn_norm, NULL, 0));
    }
    return d;
}

static void test_load_and_save(void)
{
    llm_err err = { { 0 } };
    llm_model *bin = llm_model_load(DIR260 "/stories260K.bin", NULL, &err);
    ok(bin != NULL, "load stories260K.bin: %s", bin ? "ok" : err.msg);
    llm_model *gg = llm_model_load(DIR260 "/stories260K.gguf", NULL, &err);
    ok(gg != NULL, "load stories260K.gguf: %s", gg ? "ok" : err.msg);
    if (bin == NULL || gg == NULL)
        return;
    check_260k_cfg(bin, "llama2c");
    check_260k_cfg(gg, "gguf");
    ok(strcmp(bin->format, "llama2c") == 0 && strcmp(gg->format, "gguf") == 0, "formats sniffed");
    ok(strstr(bin->tok_path, "tok512.bin") != NULL, "llama2c tokenizer found beside the checkpoint");
    ok(model_diff(bin, gg, 0) == 0, "llama2c and GGUF weights identical");
    ok(gg->tok_embd.data != NULL && (const uint8_t *)gg->tok_embd.data >= gg->gguf->base &&
       (const uint8_t *)gg->tok_embd.data < gg->gguf->base + gg->gguf->size, "matrices stay in the mapping");
    ok(bin->weight_bytes > 0 && bin->file_bytes > bin->weight_bytes / 2, "sizes recorded");

    char path[512];
    static const llm_dtype dts[] = { LLM_F16, LLM_Q8_0, LLM_Q4_0, LLM_BF16 };
    static const double tol[] = { 1e-3, 0.02, 0.2, 0.01 };
    for (int i = 0; i < 4; i++) {
        const llm_model *src = i % 2 ? gg : bin; /* both sources */
        snprintf(path, sizeof(path), "%s/re_%s.gguf", tmpdir, llm_dtype_name(dts[i]));
        ok(llm_model_save_gguf(src, dts[i], path, &err) == 0, "save_gguf %s from %s: %s", llm_dtype_name(dts[i]),
           src->format, err.msg);
        llm_model *re = llm_model_load(path, NULL, &err);
        ok(re != NULL, "reload %s: %s", llm_dtype_name(dts[i]), re ? "ok" : err.msg);
        if (re == NULL)
            continue;
        check_260k_cfg(re, llm_dtype_name(dts[i]));
        ok(re->layers[0].wq.type == dts[i] && re->tok_embd.type == dts[i] && re->out_norm.type == LLM_F32,
           "%s: matrices in dtype, norms f32", llm_dtype_name(dts[i]));
        ok(re->layers[0].w_down.type == (llm_dtype_block_elems(dts[i]) == 32 ? LLM_F16 : dts[i]),
           "%s: 172-wide rows fall back to f16 when quantised", llm_dtype_name(dts[i]));
        double d = model_diff(bin, re, 0);
        ok(d < tol[i], "%s: weights within %g (max diff %g)", llm_dtype_name(dts[i]), tol[i], d);
        const gguf_kv *toks = gguf_find_kv(re->gguf, "tokenizer.ggml.tokens");
        ok(toks && toks->arr_n == 512 && toks->strs[1].len == 3 && memcmp(toks->strs[1].ptr, "<s>", 3) == 0,
           "%s: SPM tokens written (<s> at 1)", llm_dtype_name(dts[i]));
        int spaced = 0;
        for (uint64_t t = 0; toks && t < toks->arr_n; t++)
            spaced += toks->strs[t].len >= 3 && memcmp(toks->strs[t].ptr, "\xe2\x96\x81", 3) == 0;
        ok(spaced > 50, "%s: spaces stored as U+2581 (%d tokens)", llm_dtype_name(dts[i]), spaced);
        int64_t tt;
        ok(gguf_arr_i64(gguf_find_kv(re->gguf, "tokenizer.ggml.token_type"), 3, &tt) == 0 && tt == 6,
           "%s: <0x00> is a byte token", llm_dtype_name(dts[i]));
        llm_model_free(re);
        unlink(path);
    }

    /* Hugging Face directory: Q/K permuted to rotate-half; reload gives the same weights permuted. */
    snprintf(path, sizeof(path), "%s/hf", tmpdir);
    ok(llm_model_save_hf(bin, LLM_F32, path, &err) == 0, "save_hf f32: %s", err.msg);
    llm_model *hf = llm_model_load(path, DIR260 "/tok512.bin", &err);
    ok(hf != NULL, "load HF dir: %s", hf ? "ok" : err.msg);
    if (hf != NULL) {
        check_260k_cfg(hf, "hf");
        ok(hf->cfg.rope_layout == LLM_ROPE_HALF && strcmp(hf->format, "hf") == 0, "hf: rotate-half layout");
        ok(model_diff(hf, bin, 1) == 0, "hf: weights equal with Q/K rows permuted");
        ok(model_diff(hf, bin, 0) > 0, "hf: Q/K really permuted");
        /* HF -> GGUF permutes back to the adjacent layout. */
        char p2[600];
        snprintf(p2, sizeof(p2), "%s/from_hf.gguf", tmpdir);
        ok(llm_model_save_gguf(hf, LLM_F32, p2, &err) == 0, "save_gguf from hf: %s", err.msg);
        llm_model *back = llm_model_load(p2, NULL, &err);
        ok(back && model_diff(back, bin, 0) == 0 && back->cfg.rope_layout == LLM_ROPE_ADJACENT,
           "hf -> gguf restores adjacent layout exactly");
        llm_model_free(back);
        unlink(p2);
        llm_model_free(hf);
    }
    /* config.json variants: eos as a list, llama3 rope scaling, explicit head_dim; bad rope type. */
    char cfgp[600], saved[4096];
    snprintf(cfgp, sizeof(cfgp), "%s/config.json", path);
    FILE *cf = fopen(cfgp, "r");
    size_t cl = cf ? fread(saved, 1, sizeof(saved) - 1, cf) : 0;
    if (cf) fclose(cf);
    saved[cl] = 0;
    cf = fopen(cfgp, "w");
    fprintf(cf, "{\"hidden_size\": 64, \"intermediate_size\": 172, \"num_hidden_layers\": 5, "
                "\"num_attention_heads\": 8, \"num_key_value_heads\": 4, \"head_dim\": 8, \"vocab_size\": 512, "
                "\"max_position_embeddings\": 4096, \"rope_theta\": 500000.0, \"rms_norm_eps\": 1e-05, "
                "\"tie_word_embeddings\": true, \"bos_token_id\": 1, \"eos_token_id\": [2, 0], "
                "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 32.0, \"low_freq_factor\": 1.0, "
                "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}");
    fclose(cf);
    hf = llm_model_load(path, NULL, &err);
    ok(hf && hf->cfg.eos_id == 2 && hf->cfg.rope_scaling == 1 && hf->cfg.rope_factor == 32.0f &&
       hf->cfg.rope_high_freq_factor == 4.0f && hf->cfg.rope_orig_ctx == 8192 && hf->cfg.seq_len == 4096 &&
       hf->cfg.rope_theta == 500000.0f, "HF config: eos list, llama3 rope scaling: %s", hf ? "ok" : err.msg);
    if (hf != NULL) {
        /* GGUF from an HF llama3 model carries rope_freqs.weight as llama.cpp computes it. */
        char p3[600];
        snprintf(p3, sizeof(p3), "%s/rs.gguf", tmpdir);
        ok(llm_model_save_gguf(hf, LLM_F32, p3, &err) == 0, "save llama3-scaled model: %s", err.msg);
        llm_model *rs = llm_model_load(p3, DIR260 "/tok512.bin", &err);
        ok(rs && rs->rope_freqs != NULL && rs->rope_freqs[0] == 1.0f && rs->rope_freqs[3] > 1.0f &&
           rs->rope_freqs[3] <= 32.0f, "rope_freqs written (%g %g %g %g)", rs ? rs->rope_freqs[0] : 0,
           rs ? rs->rope_freqs[1] : 0, rs ? rs->rope_freqs[2] : 0, rs ? rs->rope_freqs[3] : 0);
        llm_model_free(rs);
        unlink(p3);
    }
    llm_model_free(hf);
    cf = fopen(cfgp, "w");
    fprintf(cf, "{\"hidden_size\": 64, \"intermediate_size\": 172, \"num_hidden_layers\": 5, "
                "\"num_attention_heads\": 8, \"vocab_size\": 512, \"rope_scaling\": {\"type\": \"longrope\"}}");
    fclose(cf);
    hf = llm_model_load(path, NULL, &err);
    ok(hf == NULL && strstr(err.msg, "longrope"), "unsupported rope scaling: %s", err.msg);
    cf = fopen(cfgp, "w");
    fprintf(cf, "{\"hidden_size\": 64, \"intermediate_size\": 172, \"num_hidden_layers\": 5, "
                "\"num_attention_heads\": 8, \"vocab_size\": 512, \"rope_scaling\": {\"type\": \"yarn\"}}");
    fclose(cf);
    hf = llm_model_load(path, NULL, &err);
    ok(hf == NULL && strstr(err.msg, "bad yarn rope_scaling values"), "yarn without a factor: %s", err.msg);
    cf = fopen(cfgp, "w");
    fprintf(cf, "{\"hidden_size\": 64, \"intermediate_size\": 172, \"num_hidden_layers\": 5, "
                "\"num_attention_heads\": 8, \"vocab_size\": 512, \"rope_scaling\": {\"type\": \"yarn\", "
                "\"factor\": 4.0, \"mscale\": 0.707, \"mscale_all_dim\": 0.707}}");
    fclose(cf);
    hf = llm_model_load(path, NULL, &err);
    ok(hf == NULL && strstr(err.msg, "DeepSeek"), "DeepSeek's YaRN refused: %s", err.msg);
    cf = fopen(cfgp, "w");
    fputs(saved, cf);
    fclose(cf);
    /* Sharded: the same file behind an index. */
    char a[600], b[600];
    snprintf(a, sizeof(a), "%s/model.safetensors", path);
    snprintf(b, sizeof(b), "%s/model-00001-of-00001.safetensors", path);
    rename(a, b);
    st_file *sf = st_open(b, &err);
    snprintf(a, sizeof(a), "%s/model.safetensors.index.json", path);
    FILE *f = fopen(a, "w");
    fprintf(f, "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {");
    for (size_t i = 0; sf && i < sf->n; i++)
        fprintf(f, "%s\"%s\": \"model-00001-of-00001.safetensors\"", i ? ", " : "", sf->t[i].name);
    fprintf(f, "}}");
    fclose(f);
    st_close(sf);
    hf = llm_model_load(path, NULL, &err);
    ok(hf != NULL && model_diff(hf, bin, 1) == 0, "sharded HF dir loads: %s", hf ? "ok" : err.msg);
    llm_model_free(hf);
    /* An index naming a tensor its shard lacks is an error. */
    f = fopen(a, "w");
    fprintf(f, "{\"weight_map\": {\"model.norm.weight\": \"model-00001-of-00001.safetensors\", "
               "\"ghost\": \"model-00001-of-00001.safetensors\"}}");
    fclose(f);
    hf = llm_model_load(path, NULL, &err);
    ok(hf == NULL && strstr(err.msg, "ghost"), "index with missing tensor: %s", err.msg);
    unlink(a); unlink(b);
    snprintf(a, sizeof(a), "%s/config.json", path);
    unlink(a);
    rmdir(path);

    llm_model_describe(gg, stdout == NULL ? stderr : fopen("/dev/null", "w"));
    llm_model_free(bin);
    llm_model_free(gg);
}

static void test_generate(void)
{
    llm_err err = { { 0 } };
    char path[512];
    snprintf(path, sizeof(path), "%s/tiny.gguf", tmpdir);
    ok(llm_model_generate("tiny", LLM_Q8_0, 7, path, "../shared", &err) == 0, "gen tiny q8_0: %s", err.msg);
    llm_model *m = llm_model_load(path, NULL, &err);
    ok(m != NULL, "tiny loads: %s", m ? "ok" : err.msg);
    if (m != NULL) {
        const llm_config *c = &m->cfg;
        ok(c->dim == 64 && c->n_layers == 2 && c->n_heads == 4 && c->n_kv_heads == 2 && c->hidden_dim == 172 &&
           c->vocab_size == 512 && m->tok != NULL, "tiny config");
        ok(m->layers[1].wq.type == LLM_Q8_0 && m->layers[1].w_down.type == LLM_F16, "tiny dtypes");
        float x[64];
        llm_row_to_f32(LLM_F32, m->layers[0].attn_norm.data, x, 64);
        double mean = 0;
        for (int i = 0; i < 64; i++)
            mean += x[i] / 64;
        ok(fabs(mean - 1.0) < 0.05, "norms ~1 (mean %g)", mean);
        float *e = malloc(64 * 512 * sizeof(float));
        double s2 = 0;
        for (int r = 0; r < 512; r++)
            llm_row_to_f32(LLM_Q8_0, (const uint8_t *)m->tok_embd.data + r * llm_dtype_row_bytes(LLM_Q8_0, 64),
                           e + r * 64, 64);
        for (int i = 0; i < 64 * 512; i++)
            s2 += (double)e[i] * e[i];
        double sd = sqrt(s2 / (64 * 512));
        ok(sd > 0.018 && sd < 0.022, "matrices ~N(0, 0.02) (sd %g)", sd);
        free(e);
    }
    llm_model_free(m);
    /* Same seed, same bytes. */
    char p2[600];
    snprintf(p2, sizeof(p2), "%s/tiny2.gguf", tmpdir);
    llm_model_generate("tiny", LLM_Q8_0, 7, p2, "../shared", &err);
    FILE *f1 = fopen(path, "rb"), *f2 = fopen(p2, "rb");
    int same = f1 && f2;
    for (int ch1 = 0, ch2 = 0; same && ch1 != EOF;) {
        ch1 = fgetc(f1); ch2 = fgetc(f2);
        same = ch1 == ch2;
    }
    if (f1) fclose(f1);
    if (f2) fclose(f2);
    ok(same, "generation is deterministic for a seed");
    unlink(p2);
    ok(llm_model_generate("nope", LLM_F32, 1, p2, "../shared", &err) == -1 && strstr(err.msg, "unknown preset"),
       "unknown preset rejected");

    /* Broken models: a GGUF missing one tensor, one with a wrong shape. */
    gguf_ctx *g = gguf_open(path, &err);
    for (int mode = 0; g && mode < 2; mode++) {
        gguf_writer *w = gguf_writer_new();
        for (uint64_t i = 0; i < g->n_kv; i++)
            gguf_w_kv_copy(w, &g->kv[i]);
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const gguf_tensor *t = &g->tensors[i];
            char name[64];
            snprintf(name, sizeof(name), "%.*s", (int)t->name.len, t->name.ptr);
            if (strcmp(name, "blk.1.ffn_up.weight") == 0 && mode == 0)
                continue;
            uint64_t ne[4] = { t->ne[0], t->ne[1], t->ne[2], t->ne[3] };
            if (strcmp(name, "blk.0.attn_k.weight") == 0 && mode == 1)
                ne[1] /= 2; /* half the rows */
            gguf_w_tensor(w, name, t->type, t->n_dims, ne, t->data);
        }
        gguf_writer_write(w, p2, &err);
        gguf_writer_free(w);
        llm_model *bad = llm_model_load(p2, NULL, &err);
        ok(bad == NULL && strstr(err.msg, mode == 0 ? "missing tensor blk.1.ffn_up.weight" : "layer 0 wk") &&
           strstr(err.msg, p2), "%s: %s", mode == 0 ? "missing tensor" : "inconsistent shape", err.msg);
        llm_model_free(bad);
    }
    gguf_close(g);
    unlink(p2);
    unlink(path);

    /* A llama2.c checkpoint with a separate classifier (negative vocab_size, wcls appended). */
    snprintf(p2, sizeof(p2), "%s/sep.bin", tmpdir);
    {
        FILE *in = fopen(DIR260 "/stories260K.bin", "rb");
        fseek(in, 0, SEEK_END);
        long sz = ftell(in);
        fseek(in, 0, SEEK_SET);
        uint8_t *all = malloc((size_t)sz);
        size_t got = fread(all, 1, (size_t)sz, in);
        fclose(in);
        int32_t vocab;
        memcpy(&vocab, all + 20, 4);
        vocab = -vocab;
        memcpy(all + 20, &vocab, 4);
        FILE *out = fopen(p2, "wb");
        fwrite(all, 1, got, out);
        for (int i = 0; i < 512 * 64; i++) { /* wcls = 2 * embedding */
            float x;
            memcpy(&x, all + 28 + 4 * i, 4);
            x *= 2;
            fwrite(&x, 4, 1, out);
        }
        fclose(out);
        free(all);
    }
    m = llm_model_load(p2, DIR260 "/tok512.bin", &err);
    ok(m && !m->cfg.tied_embeddings && m->cfg.vocab_size == 512 && m->output.data != m->tok_embd.data &&
       ((const float *)m->output.data)[5] == 2 * ((const float *)m->tok_embd.data)[5],
       "llama2.c separate classifier: %s", m ? "ok" : err.msg);
    llm_model_free(m);
    unlink(p2);

    /* A truncated llama2.c checkpoint. */
    snprintf(p2, sizeof(p2), "%s/trunc.bin", tmpdir);
    FILE *in = fopen(DIR260 "/stories260K.bin", "rb"), *out = fopen(p2, "wb");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf), in);
    fwrite(buf, 1, n, out);
    fclose(in);
    fclose(out);
    m = llm_model_load(p2, DIR260 "/tok512.bin", &err);
    ok(m == NULL && strstr(err.msg, "truncated"), "truncated checkpoint: %s", err.msg);
    unlink(p2);
}

/* Copy GGUF src to dst, leaving out tensor `drop`, with tensor `halve` at half its length (1-D) or rows,
 * a zero tensor `add` (1-D, 64 floats) added (or, "key=value", a string key; "key#N", a u32 one), and
 * general.architecture set to `arch` (NULL: kept). */
static void rewrite(const char *src, const char *dst, const char *drop, const char *halve, const char *add,
                    const char *arch)
{
    llm_err err = { { 0 } };
    gguf_ctx *g = gguf_open(src, &err);
    gguf_writer *w = gguf_writer_new();
    static const float zeros[64];
    for (uint64_t i = 0; g && i < g->n_kv; i++) {
        if (arch != NULL && g->kv[i].key.len == 20 && memcmp(g->kv[i].key.ptr, "general.architecture", 20) == 0)
            gguf_w_str(w, "general.architecture", arch);
        else if (drop == NULL || strncmp(drop, "kv:", 3) != 0 || g->kv[i].key.len != strlen(drop + 3) ||
                 memcmp(g->kv[i].key.ptr, drop + 3, g->kv[i].key.len) != 0) /* "kv:KEY" drops that key */
            gguf_w_kv_copy(w, &g->kv[i]);
    }
    if (add != NULL && strchr(add, '=') != NULL) { /* "key=value": a string key instead of a tensor */
        char key[96];
        snprintf(key, sizeof(key), "%.*s", (int)(strchr(add, '=') - add), add);
        gguf_w_str(w, key, strchr(add, '=') + 1);
        add = NULL;
    } else if (add != NULL && strchr(add, '#') != NULL) {
        char key[96];
        snprintf(key, sizeof(key), "%.*s", (int)(strchr(add, '#') - add), add);
        gguf_w_u32(w, key, (uint32_t)strtoul(strchr(add, '#') + 1, NULL, 10));
        add = NULL;
    }
    for (uint64_t i = 0; g && i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)t->name.len, t->name.ptr);
        if (drop != NULL && strcmp(name, drop) == 0)
            continue;
        uint64_t ne[4] = { t->ne[0], t->ne[1], t->ne[2], t->ne[3] };
        if (halve != NULL && strcmp(name, halve) == 0)
            ne[t->n_dims - 1] /= 2;
        gguf_w_tensor(w, name, t->type, t->n_dims, ne, t->data);
    }
    if (add != NULL) {
        uint64_t ne[1] = { 64 };
        gguf_w_tensor(w, add, LLM_F32, 1, ne, zeros);
    }
    gguf_writer_write(w, dst, &err);
    gguf_writer_free(w);
    gguf_close(g);
}

/* SmolLM3's NoPE layers (every fourth) and Granite's scales, from GGUF and through a Hugging Face directory. */
static void test_smollm3_granite(void)
{
    llm_err err = { { 0 } };
    char f[512], bad[512], hf[512];
    snprintf(f, sizeof(f), "%s/sm3.gguf", tmpdir);
    snprintf(bad, sizeof(bad), "%s/bad-gr.gguf", tmpdir);
    snprintf(hf, sizeof(hf), "%s/hf-sm3", tmpdir);
    ok(llm_model_generate("tiny-smollm3", LLM_F32, 3, f, "../shared", &err) == 0, "gen tiny-smollm3: %s", err.msg);
    llm_model *m = llm_model_load(f, NULL, &err);
    int pattern = m != NULL && m->cfg.n_layers == 8 && m->cfg.rope_layout == LLM_ROPE_ADJACENT;
    for (int l = 0; pattern && l < 8; l++)
        pattern &= m->layers[l].nope == (l == 3 || l == 7);
    ok(pattern, "smollm3: layers 3 and 7 without rope, pairs rotated (a llama's GGUF)");
    ok(m && llm_model_save_hf(m, LLM_F32, hf, &err) == 0, "smollm3: saved as a Hugging Face directory: %s", err.msg);
    llm_model_free(m);
    m = llm_model_load(hf, NULL, &err);
    pattern = m != NULL && !strcmp(m->arch, "smollm3") && m->cfg.rope_layout == LLM_ROPE_HALF;
    for (int l = 0; pattern && l < 8; l++)
        pattern &= m->layers[l].nope == (l == 3 || l == 7);
    ok(pattern, "smollm3: read back from no_rope_layers: %s", m ? "the same layers" : err.msg);
    llm_model_free(m);

    ok(llm_model_generate("tiny-granite", LLM_F32, 3, f, "../shared", &err) == 0, "gen tiny-granite: %s", err.msg);
    m = llm_model_load(f, NULL, &err);
    ok(m && m->cfg.embd_scale == 3.0f && m->cfg.attn_scale == 0.4f && m->cfg.residual_scale == 0.6f &&
       m->cfg.logit_scale == 0.5f && m->cfg.rope_layout == LLM_ROPE_ADJACENT, "granite: its four scales read");
    llm_model_free(m);
    rewrite(f, bad, "kv:granite.residual_scale", NULL, NULL, NULL);
    m = llm_model_load(bad, NULL, &err);
    ok(m == NULL && strstr(err.msg, "missing or bad granite.residual_scale"), "granite: a scale missing: %s",
       m ? "loaded" : err.msg);
    llm_model_free(m);
}

/* A reranker as llama.cpp converts one (gen-model --rank-head): the classifier head's rows are the untied
 * language-model head's "yes" and "no" rows, the head is left out of the file, pooling type rank; a head of
 * the wrong width or labels in another order is refused. */
static void test_rank_head(void)
{
    llm_err err = { { 0 } };
    char f[512], r[512], bad[512];
    snprintf(f, sizeof(f), "%s/phi.gguf", tmpdir);
    snprintf(r, sizeof(r), "%s/phi-rank.gguf", tmpdir);
    snprintf(bad, sizeof(bad), "%s/bad-rank.gguf", tmpdir);
    ok(llm_model_generate("tiny-phi3", LLM_F32, 5, f, "../shared", &err) == 0, "gen tiny-phi3: %s", err.msg);
    llm_model *m = llm_model_load(f, NULL, &err);
    int yes = m && m->tok ? llm_tok_find(m->tok, "yes") : -1, no = m && m->tok ? llm_tok_find(m->tok, "no") : -1;
    ok(m && !m->cfg.tied_embeddings && yes >= 0 && no >= 0 && llm_model_rank_head(m, &err) == 0 &&
       llm_model_save_gguf(m, LLM_F32, r, &err) == 0, "rank head written: %s", err.msg);
    llm_model *k = llm_model_load(r, NULL, &err);
    int same = m && k && k->n_cls == 2 && k->cls != NULL && k->cfg.tied_embeddings;
    const float *out = m ? (const float *)m->output.data : NULL;
    for (int i = 0; same && i < m->cfg.dim; i++)
        same &= k->cls[i] == out[(size_t)yes * m->cfg.dim + i] && k->cls[m->cfg.dim + i] == out[(size_t)no * m->cfg.dim + i];
    ok(same, "rank head read back: the \"yes\" and \"no\" rows of the head, which the file leaves out: %s",
       k ? "read" : err.msg);
    llm_model_free(k);
    llm_model_free(m);
    rewrite(r, bad, NULL, "cls.output.weight", NULL, NULL); /* one row: fine (labels must then match it) */
    k = llm_model_load(bad, NULL, &err);
    ok(k == NULL && strstr(err.msg, "classifier.output_labels must be"), "one row against two labels: %s",
       k ? "loaded" : err.msg);
    llm_model_free(k);
    rewrite(r, bad, "kv:phi3.classifier.output_labels", "cls.output.weight", NULL, NULL);
    k = llm_model_load(bad, NULL, &err);
    ok(k != NULL && k->n_cls == 1, "a one-row head without labels loads: %s", k ? "n_cls 1" : err.msg);
    llm_model_free(k);
    unlink(f);
    unlink(r);
    unlink(bad);
}

/* Phi 3 (GGUF phi3): the fused q|k|v and gate|up matrices read as views of their rows; a fused matrix of the
 * wrong height, LongRoPE factors of the wrong size and a Hugging Face re-save are refused; LongRoPE picks its
 * factors by the context. */
static void test_phi3(void)
{
    llm_err err = { { 0 } };
    char p3[512], bad[512], hf[512];
    snprintf(p3, sizeof(p3), "%s/p3.gguf", tmpdir);
    snprintf(bad, sizeof(bad), "%s/bad3.gguf", tmpdir);
    snprintf(hf, sizeof(hf), "%s/hf3", tmpdir);
    ok(llm_model_generate("tiny-phi3", LLM_Q8_0, 3, p3, "../shared", &err) == 0, "gen tiny-phi3: %s", err.msg);
    llm_model *m = llm_model_load(p3, NULL, &err);
    const gguf_tensor *qkv = m ? gguf_find_tensor(m->gguf, "blk.1.attn_qkv.weight") : NULL;
    const gguf_tensor *up = m ? gguf_find_tensor(m->gguf, "blk.1.ffn_up.weight") : NULL;
    size_t rb = qkv ? llm_dtype_row_bytes((llm_dtype)qkv->type, qkv->ne[0]) : 0;
    ok(m && !strcmp(m->arch, "phi3") && m->cfg.rope_layout == LLM_ROPE_HALF && qkv && up && qkv->ne[1] == 128 &&
       m->layers[1].wq.ne[1] == 64 && m->layers[1].wk.ne[1] == 32 && m->layers[1].wv.ne[1] == 32 &&
       m->layers[1].wq.data == qkv->data && m->layers[1].wk.data == (const uint8_t *)qkv->data + 64 * rb &&
       m->layers[1].wv.data == (const uint8_t *)qkv->data + 96 * rb &&
       m->layers[1].w_gate.data == up->data && m->layers[1].w_up.data == (const uint8_t *)up->data + 192 * rb &&
       m->layers[1].w_up.ne[1] == 192, "phi3: wq, wk, wv and w_gate, w_up are the fused matrices' rows, in place");
    /* as a Hugging Face directory (Phi3ForCausalLM): qkv_proj and gate_up_proj, read back as row views too */
    llm_model *h = m && llm_model_save_hf(m, LLM_F32, hf, &err) == 0 ? llm_model_load(hf, NULL, &err) : NULL;
    ok(h && !strcmp(h->arch, "phi3") && h->layers[1].wk.data == (const uint8_t *)h->layers[1].wq.data + 64 * 64 * 4 &&
       h->layers[1].wv.data == (const uint8_t *)h->layers[1].wq.data + 96 * 64 * 4 &&
       h->layers[1].w_up.data == (const uint8_t *)h->layers[1].w_gate.data + 192 * 64 * 4 &&
       h->layers[1].w_up.ne[1] == 192, "phi3: saved as HF and read back, q|k|v and gate|up as row views: %s",
       h ? "ok" : err.msg);
    llm_model_free(h);
    llm_model_free(m);
    {
        char f[600];
        snprintf(f, sizeof(f), "%s/config.json", hf); unlink(f);
        snprintf(f, sizeof(f), "%s/model.safetensors", hf); unlink(f);
        rmdir(hf);
    }
    rewrite(p3, bad, NULL, "blk.0.attn_qkv.weight", NULL, NULL);
    m = llm_model_load(bad, NULL, &err);
    ok(m == NULL && strstr(err.msg, "blk.0.attn_qkv.weight is [64 x 64], the config needs [128 x 64]"),
       "phi3: a fused matrix of the wrong height: %s", m ? "loaded" : err.msg);
    llm_model_free(m);
    rewrite(p3, bad, NULL, NULL, "rope_factors_long.weight", NULL);
    m = llm_model_load(bad, NULL, &err);
    ok(m == NULL && strstr(err.msg, "LongRoPE needs rope_factors_long and rope_factors_short"),
       "phi3: LongRoPE factors of the wrong size, or one set only: %s", m ? "loaded" : err.msg);
    llm_model_free(m);
    /* LongRoPE: the long divisors where the context exceeds the original one, else the short ones; cos and sin
     * times the attention factor either way */
    ok(llm_model_generate("tiny-phi3-longrope", LLM_F32, 3, p3, "../shared", &err) == 0, "gen tiny-phi3-longrope: %s",
       err.msg);
    m = llm_model_load(p3, NULL, &err);
    int picks = m != NULL && m->rope_long != NULL && m->rope_short != NULL &&
                m->cfg.rope_scaling == LLM_ROPE_SCALING_LONGROPE && m->cfg.rope_orig_ctx == 32;
    for (int ctx = 512; picks && ctx >= 32; ctx -= 480) {
        m->cfg.seq_len = ctx;
        const float *want = ctx > 32 ? m->rope_long : m->rope_short;
        for (int i = 0; i < m->cfg.head_dim / 2; i++)
            picks &= fabs(llm_rope_freq(m, i) * want[i] - pow(10000.0, -2.0 * i / m->cfg.head_dim)) < 1e-12 &&
                     fabs(llm_rope_mscale(m) - 1.34164079) < 1e-6;
    }
    ok(picks, "phi3 LongRoPE: long factors at a context of 512, short at 32 (the original), attention factor 1.342");
    llm_model_free(m);
    /* partial rotary (Phi-4-mini's way, 12 of 16): q / k rows reordered so that the rotated pairs lie at (i, i + 8),
     * the passing dims at frequency 0 (identity rows of the tables) */
    ok(llm_model_generate("tiny-phi4-mini", LLM_Q8_0, 3, p3, "../shared", &err) == 0, "gen tiny-phi4-mini: %s",
       err.msg);
    m = llm_model_load(p3, NULL, &err);
    qkv = m ? gguf_find_tensor(m->gguf, "blk.0.attn_qkv.weight") : NULL;
    rb = qkv ? llm_dtype_row_bytes((llm_dtype)qkv->type, qkv->ne[0]) : 0;
    /* our slot -> the file's dim, head 1 of q and head 0 of k: 0-5 stay, 6-7 <- 12-13, 8-13 <- 6-11, 14-15 stay */
    static const int want_from[16] = { 0, 1, 2, 3, 4, 5, 12, 13, 6, 7, 8, 9, 10, 11, 14, 15 };
    int moved = m != NULL && qkv != NULL && m->cfg.rope_dims == 12 && m->layers[0].wq.data != qkv->data;
    for (int j = 0; moved && j < 16; j++) {
        const uint8_t *f = qkv->data;
        moved &= !memcmp((const uint8_t *)m->layers[0].wq.data + (16 + j) * rb, f + (16 + want_from[j]) * rb, rb) &&
                 !memcmp((const uint8_t *)m->layers[0].wk.data + j * rb, f + (64 + want_from[j]) * rb, rb) &&
                 llm_rope_rotates(&m->cfg, j % 8) == (j % 8 < 6) && (j % 8 < 6 || llm_rope_freq(m, j % 8) == 0.0);
    }
    ok(moved, "phi4-mini: q / k rows reordered for 12 rotating dims of 16, the other 4 at frequency 0");
    /* re-saved in its own type: the rows back in the file's order, so the fused q|k|v is the file's, byte for byte */
    int same = m != NULL && llm_model_save_gguf(m, LLM_Q8_0, bad, &err) == 0;
    gguf_ctx *g2 = same ? gguf_open(bad, &err) : NULL;
    for (int l = 0; same && l < m->cfg.n_layers; l++) {
        char tn[64];
        snprintf(tn, sizeof(tn), "blk.%d.attn_qkv.weight", l);
        const gguf_tensor *a = gguf_find_tensor(m->gguf, tn), *b = g2 ? gguf_find_tensor(g2, tn) : NULL;
        same = a && b && a->type == b->type && a->ne[1] == b->ne[1] && !memcmp(a->data, b->data, a->ne[1] * rb);
    }
    ok(same, "phi4-mini re-saved: q|k|v in the file's row order again: %s", same ? "byte for byte" : err.msg);
    gguf_close(g2);
    llm_model_free(m);
    unlink(bad);
    unlink(p3);
}

/* Qwen 2 (q/k/v biases) and Qwen 3 (q/k norms) files: what loads, what is refused, what survives a re-save. */
static void test_qwen(void)
{
    llm_err err = { { 0 } };
    char q2[512], q3[512], bad[512], back[512], hf[512];
    snprintf(q2, sizeof(q2), "%s/q2.gguf", tmpdir);
    snprintf(q3, sizeof(q3), "%s/q3.gguf", tmpdir);
    snprintf(bad, sizeof(bad), "%s/bad.gguf", tmpdir);
    snprintf(back, sizeof(back), "%s/back.gguf", tmpdir);
    snprintf(hf, sizeof(hf), "%s/hf", tmpdir);
    ok(llm_model_generate("tiny-qwen2", LLM_Q8_0, 3, q2, "../shared", &err) == 0 &&
       llm_model_generate("tiny-qwen3", LLM_Q8_0, 3, q3, "../shared", &err) == 0, "gen tiny-qwen2/3: %s", err.msg);
    llm_model *m2 = llm_model_load(q2, NULL, &err), *m3 = llm_model_load(q3, NULL, &err);
    ok(m2 && !strcmp(m2->arch, "qwen2") && m2->cfg.rope_layout == LLM_ROPE_HALF && m2->layers[1].bv.data &&
       m2->layers[1].bq.ne[0] == 64 && m2->layers[1].bk.ne[0] == 32 && !m2->layers[0].q_norm.data,
       "qwen2: biases, rotate-half");
    ok(m3 && !strcmp(m3->arch, "qwen3") && m3->cfg.head_dim == 32 && m3->cfg.n_heads * m3->cfg.head_dim == 128 &&
       m3->layers[1].k_norm.ne[0] == 32 && !m3->layers[0].bq.data, "qwen3: q/k norms, head_dim 32 beside dim 64");
    /* re-saved as GGUF and as a Hugging Face directory: the same vectors */
    if (m2 && m3) {
        ok(llm_model_save_gguf(m2, LLM_F32, back, &err) == 0, "qwen2 re-saved: %s", err.msg);
        llm_model *b = llm_model_load(back, NULL, &err);
        ok(b && !strcmp(b->arch, "qwen2") && !memcmp(b->layers[1].bk.data, m2->layers[1].bk.data, 32 * 4),
           "qwen2 GGUF round trip keeps arch and biases");
        llm_model_free(b);
        m3->pooling = LLM_POOL_LAST; /* an embedding model: its pooling travels both ways */
        ok(llm_model_save_hf(m3, LLM_F32, hf, &err) == 0, "qwen3 saved as HF: %s", err.msg);
        b = llm_model_load(hf, NULL, &err);
        ok(b && !strcmp(b->arch, "qwen3") && b->cfg.head_dim == 32 &&
           !memcmp(b->layers[1].q_norm.data, m3->layers[1].q_norm.data, 32 * 4), "qwen3 HF round trip: %s",
           b ? "ok" : err.msg);
        ok(b && b->pooling == LLM_POOL_LAST, "pooling through 1_Pooling/config.json (sentence-transformers)");
        if (b != NULL) {
            ok(llm_model_save_gguf(b, LLM_F32, back, &err) == 0, "and on to GGUF: %s", err.msg);
            llm_model *g = llm_model_load(back, NULL, &err);
            ok(g && g->pooling == LLM_POOL_LAST, "pooling through qwen3.pooling_type");
            llm_model_free(g);
        }
        llm_model_free(b);
        m3->pooling = LLM_POOL_NONE;
        char f[600];
        snprintf(f, sizeof(f), "%s/1_Pooling/config.json", hf);
        FILE *pc = fopen(f, "w");
        fputs("{\"pooling_mode_mean_tokens\": true}", pc);
        fclose(pc);
        b = llm_model_load(hf, NULL, &err);
        ok(b && b->pooling == LLM_POOL_MEAN, "a sentence-transformers mean-pooling config read");
        llm_model_free(b);
        pc = fopen(f, "w");
        fputs("{\"pooling_mode_mean_tokens\": tru", pc);
        fclose(pc);
        b = llm_model_load(hf, NULL, &err);
        ok(b == NULL && strstr(err.msg, "1_Pooling/config.json"), "a broken pooling config: %s", err.msg);
        llm_model_free(b);
        unlink(f);
        snprintf(f, sizeof(f), "%s/1_Pooling", hf); rmdir(f);
        snprintf(f, sizeof(f), "%s/config.json", hf); unlink(f);
        snprintf(f, sizeof(f), "%s/model.safetensors", hf); unlink(f);
        rmdir(hf);
    }
    /* YaRN and linear rope scaling: through GGUF (llama.cpp's keys) and Hugging Face (rope_scaling) and back,
     * the frequencies as transformers' _compute_yarn_parameters makes them, cos / sin scaled by 1 + 0.1 ln 4 */
    if (m2 != NULL) {
        llm_config *c = &m2->cfg;
        c->rope_scaling = LLM_ROPE_SCALING_YARN;
        c->rope_factor = 4.0f;
        c->rope_orig_ctx = 256;
        c->rope_mscale = 0.1f * logf(4.0f) + 1.0f;
        c->yarn_beta_fast = 32.0f;
        c->yarn_beta_slow = 1.0f;
        int hd = c->head_dim, same = 1;
        double base = c->rope_theta, lo = floor(hd * log(256 / (32 * 2 * M_PI)) / (2 * log(base)));
        double hi = ceil(hd * log(256 / (1 * 2 * M_PI)) / (2 * log(base)));
        lo = lo < 0 ? 0 : lo;
        hi = hi > hd - 1 ? hd - 1 : hi;
        for (int i = 0; i < hd / 2; i++) {
            double extrap = 1.0 / pow(base, 2.0 * i / hd), interp = extrap / 4.0;
            double ramp = (i - lo) / (hi == lo ? 0.001 : hi - lo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            double want = interp * ramp + extrap * (1 - ramp);
            same &= fabs(llm_rope_freq(m2, i) - want) <= 1e-12 * want;
        }
        ok(same && fabs(llm_rope_mscale(m2) - 1.1386294) < 1e-6, "yarn: frequencies and attention factor as "
           "transformers makes them (correction range %g..%g of %d)", lo, hi, hd);
        /* gpt-oss's "truncate": false: the same ramp over the unrounded range (transformers skips its floor /
         * ceil); with this model's range the rounding moves some frequencies */
        c->yarn_no_truncate = 1;
        double ulo = hd * log(256 / (32 * 2 * M_PI)) / (2 * log(base)), uhi = hd * log(256 / (2 * M_PI)) / (2 * log(base));
        ulo = ulo < 0 ? 0 : ulo;
        uhi = uhi > hd - 1 ? hd - 1 : uhi;
        int usame = 1, moved = 0;
        for (int i = 0; i < hd / 2; i++) {
            double extrap = 1.0 / pow(base, 2.0 * i / hd), interp = extrap / 4.0;
            double ramp = (i - ulo) / (uhi - ulo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            double want = interp * ramp + extrap * (1 - ramp);
            usame &= fabs(llm_rope_freq(m2, i) - want) <= 1e-12 * want;
            c->yarn_no_truncate = 0;
            moved += fabs(llm_rope_freq(m2, i) - want) > 1e-6 * want;
            c->yarn_no_truncate = 1;
        }
        ok(usame && moved > 0, "yarn, truncate false: the unrounded range %g..%g (%d frequencies differ from the "
           "rounded one's)", ulo, uhi, moved);
        ok(llm_model_save_hf(m2, LLM_F32, hf, &err) == 0, "yarn (truncate false) saved as HF: %s", err.msg);
        llm_model *b = llm_model_load(hf, NULL, &err);
        ok(b && b->cfg.yarn_no_truncate == 1, "truncate false through config.json: %s", b ? "ok" : err.msg);
        llm_model_free(b);
        c->yarn_no_truncate = 0;
        ok(llm_model_save_gguf(m2, LLM_F32, back, &err) == 0, "yarn re-saved: %s", err.msg);
        b = llm_model_load(back, NULL, &err);
        ok(b && b->cfg.rope_scaling == LLM_ROPE_SCALING_YARN && b->cfg.rope_factor == 4.0f &&
           b->cfg.rope_orig_ctx == 256 && fabsf(b->cfg.rope_mscale - c->rope_mscale) < 1e-6f,
           "yarn through GGUF (rope.scaling.type / factor / original_context_length)");
        llm_model_free(b);
        ok(llm_model_save_hf(m2, LLM_F32, hf, &err) == 0, "yarn saved as HF: %s", err.msg);
        b = llm_model_load(hf, NULL, &err);
        ok(b && b->cfg.rope_scaling == LLM_ROPE_SCALING_YARN && b->cfg.rope_factor == 4.0f &&
           b->cfg.rope_orig_ctx == 256 && fabsf(b->cfg.rope_mscale - c->rope_mscale) < 1e-6f &&
           b->cfg.yarn_no_truncate == 0, "yarn through config.json rope_scaling: %s", b ? "ok" : err.msg);
        llm_model_free(b);
        c->rope_scaling = LLM_ROPE_SCALING_LINEAR;
        ok(llm_rope_freq(m2, 3) == pow(base, -6.0 / hd) / 4.0 && llm_rope_mscale(m2) == 1.0,
           "linear: every frequency / factor");
        ok(llm_model_save_gguf(m2, LLM_F32, back, &err) == 0, "linear re-saved: %s", err.msg);
        b = llm_model_load(back, NULL, &err);
        ok(b && b->cfg.rope_scaling == LLM_ROPE_SCALING_LINEAR && b->cfg.rope_factor == 4.0f, "linear through GGUF");
        llm_model_free(b);
        c->rope_scaling = LLM_ROPE_SCALING_NONE;
        char f[600];
        snprintf(f, sizeof(f), "%s/config.json", hf); unlink(f);
        snprintf(f, sizeof(f), "%s/model.safetensors", hf); unlink(f);
        rmdir(hf);
    }
    /* a Mistral Hugging Face directory is a Llama one; v0.1's sliding window slides on every layer, and a
     * re-save keeps it (as mistral in HF, as llama.attention.sliding_window in GGUF) */
    if (m2 != NULL && llm_model_save_hf(m2, LLM_F32, hf, &err) == 0) {
        char f[600];
        snprintf(f, sizeof(f), "%s/config.json", hf);
        for (int sw = 0; sw < 2; sw++) {
            FILE *c = fopen(f, "w");
            fprintf(c, "{\"model_type\": \"mistral\", \"hidden_size\": 64, \"intermediate_size\": 172, "
                       "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                       "\"vocab_size\": 128256, \"tie_word_embeddings\": true, \"sliding_window\": %s}",
                    sw ? "4096" : "null");
            fclose(c);
            llm_model *x = llm_model_load(hf, NULL, &err);
            if (sw == 0)
                ok(x && !strcmp(x->arch, "llama") && x->cfg.rope_layout == LLM_ROPE_HALF, "mistral: loads as llama: %s",
                   x ? "ok" : err.msg);
            else
                ok(x && x->cfg.swa_window == 4096 && x->layers[0].swa && x->layers[1].swa &&
                   x->cfg.rope_theta_swa == 0.0f, "mistral with a sliding window: 4096 on both layers: %s",
                   x ? "ok" : err.msg);
            if (sw == 1 && x != NULL) {
                char g[700], h2[600];
                snprintf(g, sizeof(g), "%s/sw.gguf", tmpdir);
                snprintf(h2, sizeof(h2), "%s/sw-hf", tmpdir);
                llm_model *y = llm_model_save_gguf(x, LLM_F32, g, &err) == 0 ? llm_model_load(g, NULL, &err) : NULL;
                ok(y && y->cfg.swa_window == 4096 && y->layers[1].swa, "the window through GGUF: %s",
                   y ? "ok" : err.msg);
                llm_model_free(y);
                y = llm_model_save_hf(x, LLM_F32, h2, &err) == 0 ? llm_model_load(h2, NULL, &err) : NULL;
                ok(y && y->cfg.swa_window == 4096 && y->layers[1].swa, "and through HF (model_type mistral): %s",
                   y ? "ok" : err.msg);
                llm_model_free(y);
                unlink(g);
                snprintf(g, sizeof(g), "%s/config.json", h2); unlink(g);
                snprintf(g, sizeof(g), "%s/model.safetensors", h2); unlink(g);
                rmdir(h2);
            }
            llm_model_free(x);
        }
        unlink(f);
        snprintf(f, sizeof(f), "%s/model.safetensors", hf);
        unlink(f);
        rmdir(hf);
    }
    llm_model_free(m2);
    llm_model_free(m3);
    /* broken ones */
    static const struct {
        const char *src_is_q3, *drop, *halve, *add, *arch, *want;
    } cases[] = {
        { NULL, "blk.1.attn_v.bias", NULL, NULL, NULL, "some of the q/k/v biases" },
        { NULL, NULL, "blk.0.attn_q.bias", NULL, NULL, "layer 0 bq" },
        { NULL, NULL, NULL, "blk.0.attn_output.bias", NULL, "blk.0.attn_output.bias is not supported" },
        { "", "blk.0.attn_k_norm.weight", NULL, NULL, NULL, "missing tensor blk.0.attn_k_norm.weight" },
        { "", NULL, "blk.1.attn_q_norm.weight", NULL, NULL, "layer 1 q_norm" },
        { "", NULL, NULL, NULL, "starcoder2", "unsupported architecture 'starcoder2'" },
        { "", NULL, NULL, NULL, "qwen2", "missing or non-integer metadata key qwen2.embedding_length" },
        { NULL, NULL, NULL, "qwen2.rope.scaling.type=longrope", NULL, "rope scaling 'longrope' (qwen2.rope.scaling.type) "
          "is not supported" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rewrite(cases[i].src_is_q3 ? q3 : q2, bad, cases[i].drop, cases[i].halve, cases[i].add, cases[i].arch);
        llm_model *x = llm_model_load(bad, NULL, &err);
        ok(x == NULL && strstr(err.msg, cases[i].want), "refused (%s): %s", cases[i].want, x ? "loaded" : err.msg);
        llm_model_free(x);
    }
    unlink(bad);
    unlink(back);
    unlink(q2);
    unlink(q3);
}

/* Replace config.json's member key (a JSON text) in HF directory dir, or drop it (json NULL). */
static void edit_config(const char *dir, const char *key, const char *json)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    FILE *f = fopen(path, "r");
    char buf[8192] = "";
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    cJSON_DeleteItemFromObjectCaseSensitive(j, key);
    if (json != NULL)
        cJSON_AddItemToObject(j, key, cJSON_Parse(json));
    char *t = cJSON_Print(j);
    f = fopen(path, "w");
    if (f && t) fputs(t, f);
    if (f) fclose(f);
    free(t);
    cJSON_Delete(j);
}

/* Gemma 3 and Gemma 2 files: their settings as loaded, kept through a re-save as HF, and the refusals. */
static void test_gemma(void)
{
    llm_err err = { { 0 } };
    char g3[512], g2[512], bad[512], hf[512];
    snprintf(g3, sizeof(g3), "%s/g3.gguf", tmpdir);
    snprintf(g2, sizeof(g2), "%s/g2.gguf", tmpdir);
    snprintf(bad, sizeof(bad), "%s/bad.gguf", tmpdir);
    snprintf(hf, sizeof(hf), "%s/hfg", tmpdir);
    ok(llm_model_generate("tiny-gemma3", LLM_Q8_0, 3, g3, "../shared", &err) == 0 &&
       llm_model_generate("tiny-gemma2", LLM_Q8_0, 3, g2, "../shared", &err) == 0, "gen tiny-gemma3/2: %s", err.msg);
    llm_model *m3 = llm_model_load(g3, NULL, &err), *m2 = llm_model_load(g2, NULL, &err);
    ok(m3 && m3->cfg.act == LLM_ACT_GELU_TANH && m3->cfg.embd_scale == 8.0f && m3->cfg.swa_window == 16 &&
       m3->cfg.rope_theta_swa == 10000.0f && m3->cfg.attn_softcap == 0.0f && m3->layers[0].q_norm.data &&
       m3->layers[5].post_ffn_norm.data && m3->cfg.rope_layout == LLM_ROPE_HALF,
       "gemma3: GeGLU, embedding scale, window, local rope base, q/k and post norms");
    int pat3 = 0, pat2 = 0;
    for (int l = 0; m3 && l < 6; l++) pat3 |= m3->layers[l].swa << l;
    for (int l = 0; m2 && l < 4; l++) pat2 |= m2->layers[l].swa << l;
    ok(pat3 == 0x1f && pat2 == 0x5, "sliding layers: gemma3 0-4 of 6 (%#x), gemma2 the even ones (%#x)", pat3, pat2);
    ok(m2 && m2->cfg.attn_softcap == 2.0f && m2->cfg.final_softcap == 30.0f && !m2->layers[0].q_norm.data &&
       m2->cfg.rope_theta_swa == 0.0f, "gemma2: soft caps, no q/k norms, one rope base");
    /* through a Hugging Face directory: the same settings and norms (1 + w in memory, w in the file) */
    if (m3) {
        ok(llm_model_save_hf(m3, LLM_F32, hf, &err) == 0, "gemma3 saved as HF: %s", err.msg);
        llm_model *h = llm_model_load(hf, NULL, &err);
        int same = h && h->cfg.swa_window == 16 && h->cfg.embd_scale == 8.0f && h->cfg.rope_theta_swa == 10000.0f &&
                   !strcmp(h->arch, "gemma3") && h->layers[4].swa && !h->layers[5].swa;
        for (int l = 0; same && l < 6; l++)
            same = fabsf(((const float *)h->layers[l].post_attn_norm.data)[3] -
                         ((const float *)m3->layers[l].post_attn_norm.data)[3]) < 1e-6f &&
                   fabsf(((const float *)h->layers[l].q_norm.data)[7] - ((const float *)m3->layers[l].q_norm.data)[7]) <
                       1e-6f;
        ok(same, "gemma3 from HF: the same settings, sliding layers and norm weights: %s", h ? "" : err.msg);
        llm_model_free(h);
        /* what a Hugging Face config may say wrong */
        static const struct { const char *key, *json, *want; } cases[] = {
            { "layer_types", "[\"sliding_attention\"]", "layer_types must list the 6 layers" },
            { "layer_types", "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\"]", "layer_types[0] is not" },
            { "hidden_activation", "\"silu\"", "hidden_activation 'silu' is not supported" },
            { "sliding_window", "0", "bad sliding_window" },
            { "sliding_window", NULL, "config.json lacks sliding_window" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            ok(llm_model_save_hf(m3, LLM_F32, hf, &err) == 0, "re-saved");
            edit_config(hf, cases[i].key, cases[i].json);
            llm_model *x = llm_model_load(hf, NULL, &err);
            ok(x == NULL && strstr(err.msg, cases[i].want), "HF refused (%s): %s", cases[i].want, x ? "loaded" : err.msg);
            llm_model_free(x);
        }
        char f[600];
        snprintf(f, sizeof(f), "%s/config.json", hf);
        unlink(f);
        snprintf(f, sizeof(f), "%s/model.safetensors", hf);
        unlink(f);
        rmdir(hf);
    }
    /* a GGUF without one of a Gemma 3 layer's norms, or the window key under another architecture's name */
    rewrite(g3, bad, "blk.2.post_ffw_norm.weight", NULL, NULL, NULL);
    llm_model *x = llm_model_load(bad, NULL, &err);
    ok(x == NULL && strstr(err.msg, "missing tensor blk.2.post_ffw_norm.weight"), "no post_ffw_norm: %s", x ? "loaded" : err.msg);
    llm_model_free(x);
    rewrite(g3, bad, "blk.0.attn_q_norm.weight", NULL, NULL, NULL);
    x = llm_model_load(bad, NULL, &err);
    ok(x == NULL && strstr(err.msg, "missing tensor blk.0.attn_q_norm.weight"), "no q norm: %s", x ? "loaded" : err.msg);
    llm_model_free(x);
    llm_model_free(m3);
    llm_model_free(m2);
    unlink(bad);
    unlink(g3);
    unlink(g2);
}

/* Qwen 3 MoE's experts as loaded, kept through a Hugging Face directory, and what a file may get wrong. */
static void test_moe(void)
{
    llm_err err = { { 0 } };
    char q[512], bad[512], hf[512];
    snprintf(q, sizeof(q), "%s/q3m.gguf", tmpdir);
    snprintf(bad, sizeof(bad), "%s/bad.gguf", tmpdir);
    snprintf(hf, sizeof(hf), "%s/hfm", tmpdir);
    ok(llm_model_generate("tiny-qwen3moe", LLM_Q8_0, 4, q, "../shared", &err) == 0, "gen tiny-qwen3moe: %s", err.msg);
    llm_model *m = llm_model_load(q, NULL, &err);
    ok(m && !strcmp(m->arch, "qwen3moe") && m->cfg.n_expert == 8 && m->cfg.n_expert_used == 2 &&
       m->cfg.expert_ff == 64 && m->cfg.moe_norm_topk && m->layers[0].q_norm.data && m->layers[1].experts &&
       m->layers[1].experts[23].type == LLM_Q8_0 && m->layers[1].experts[23].ne[1] == 64,
       "qwen3moe: 8 experts of 64, 2 per token, q/k norms: %s", m ? "" : err.msg);
    if (m) {
        ok(llm_model_save_hf(m, LLM_F32, hf, &err) == 0, "saved as HF: %s", err.msg);
        llm_model *h = llm_model_load(hf, NULL, &err);
        float a[64], b[64];
        if (h) {
            llm_row_to_f32(LLM_Q8_0, m->layers[1].experts[3 * 6 + 2].data, a, 64);
            llm_row_to_f32(h->layers[1].experts[3 * 6 + 2].type, h->layers[1].experts[3 * 6 + 2].data, b, 64);
        }
        ok(h && !strcmp(h->arch, "qwen3moe") && h->cfg.n_expert == 8 && h->cfg.n_expert_used == 2 &&
           h->cfg.expert_ff == 64 && h->cfg.moe_norm_topk && !memcmp(a, b, sizeof(a)),
           "from HF: the same experts (expert 6's down matrix, row 0): %s", h ? "" : err.msg);
        llm_model_free(h);
        static const struct { const char *key, *json, *want; } cases[] = {
            { "num_experts_per_tok", "9", "bad mixture of experts" },
            { "mlp_only_layers", "[0]", "dense layers among the experts" },
            { "num_experts", NULL, "config.json lacks num_experts" },
            { "norm_topk_prob", "false", NULL },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            llm_model_save_hf(m, LLM_F32, hf, &err);
            edit_config(hf, cases[i].key, cases[i].json);
            llm_model *x = llm_model_load(hf, NULL, &err);
            if (cases[i].want)
                ok(x == NULL && strstr(err.msg, cases[i].want), "HF refused (%s): %s", cases[i].want,
                   x ? "loaded" : err.msg);
            else /* kept, and said so in a GGUF re-save (expert_weights_norm) */
                ok(x && !x->cfg.moe_norm_topk && llm_model_save_gguf(x, LLM_F32, bad, &err) == 0 &&
                   (llm_model_free(x), x = llm_model_load(bad, NULL, &err)) && !x->cfg.moe_norm_topk,
                   "norm_topk_prob false is kept, through GGUF too: %s", x ? "" : err.msg);
            llm_model_free(x);
        }
        char f[600];
        snprintf(f, sizeof(f), "%s/config.json", hf);
        unlink(f);
        snprintf(f, sizeof(f), "%s/model.safetensors", hf);
        unlink(f);
        rmdir(hf);
    }
    static const struct { const char *drop, *halve, *arch, *want; } files[] = {
        { "blk.1.ffn_down_exps.weight", NULL, NULL, "missing tensor blk.1.ffn_down_exps.weight" },
        { NULL, "blk.0.ffn_up_exps.weight", NULL, "the config needs [8 experts x 64 x 64]" },
        { NULL, "blk.1.ffn_gate_inp.weight", NULL, "ffn_gate_inp" },
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        rewrite(q, bad, files[i].drop, files[i].halve, NULL, files[i].arch);
        llm_model *x = llm_model_load(bad, NULL, &err);
        ok(x == NULL && strstr(err.msg, files[i].want), "GGUF refused (%s): %s", files[i].want,
           x ? "loaded" : err.msg);
        llm_model_free(x);
    }
    llm_model_free(m);
    unlink(bad);
    unlink(q);

    /* ERNIE 4.5 MoE: a dense first layer beside the experts' layers, a selection bias; what a file may get wrong */
    ok(llm_model_generate("tiny-ernie4_5-moe", LLM_Q8_0, 4, q, "../shared", &err) == 0, "gen tiny-ernie4_5-moe: %s",
       err.msg);
    m = llm_model_load(q, NULL, &err);
    ok(m && !strcmp(m->arch, "ernie4_5-moe") && m->cfg.moe_dense_lead == 1 && m->cfg.dense_ff == 192 &&
       m->layers[0].dense && m->layers[0].w_up.ne[1] == 192 && !m->layers[1].dense &&
       m->layers[1].w_up.ne[1] == 128 && m->layers[2].exp_probs_b.ne[0] == 8 && m->cfg.n_expert_used == 3,
       "ernie4_5-moe: layer 0 dense of 192, then experts with a bias and a shared expert of 128: %s",
       m ? "" : err.msg);
    llm_model_free(m);
    static const struct { const char *drop, *halve, *add, *want; } ernie[] = {
        { "blk.0.ffn_gate.weight", NULL, NULL, "missing tensor blk.0.ffn_gate.weight" },
        { NULL, "blk.0.ffn_up.weight", NULL, "layer 0 w_up" },
        { "blk.1.exp_probs_b.bias", NULL, NULL, "a bias choosing experts in some layers and not in others" },
        { NULL, "blk.2.exp_probs_b.bias", NULL, "layer 2 exp_probs_b" },
        { "kv:ernie4_5-moe.leading_dense_block_count", NULL, "ernie4_5-moe.leading_dense_block_count=3",
          "leading_dense_block_count" },
        { "kv:ernie4_5-moe.interleave_moe_layer_step", NULL, "ernie4_5-moe.interleave_moe_layer_step=2",
          "interleave_moe_layer_step" },
    };
    for (size_t i = 0; i < sizeof(ernie) / sizeof(ernie[0]); i++) {
        rewrite(q, bad, ernie[i].drop, ernie[i].halve, ernie[i].add, NULL);
        llm_model *x = llm_model_load(bad, NULL, &err);
        ok(x == NULL && strstr(err.msg, ernie[i].want), "ERNIE MoE GGUF refused (%s): %s", ernie[i].want,
           x ? "loaded" : err.msg);
        llm_model_free(x);
    }

    /* GLM-4.5: ERNIE's layout with q/k/v biases, a sigmoid router scaled by 2.5 and rope on half of each head; a
     * NextN layer (block_count counts it) is left out; what a file may get wrong */
    ok(llm_model_generate("tiny-glm4moe", LLM_Q8_0, 3, q, "../shared", &err) == 0, "gen tiny-glm4moe: %s", err.msg);
    m = llm_model_load(q, NULL, &err);
    ok(m && !strcmp(m->arch, "glm4moe") && m->cfg.moe_sigmoid && m->cfg.moe_w_scale == 2.5f && m->cfg.rope_dims == 16 &&
       m->cfg.moe_norm_topk && m->layers[0].dense && m->layers[1].bq.ne[0] == 128 && m->layers[2].exp_probs_b.ne[0] == 8
       && m->cfg.hidden_dim == 64, "glm4moe: sigmoid router times 2.5, rope on 16 of 32, q bias, one shared expert: %s",
       m ? "" : err.msg);
    llm_model_free(m);
    rewrite(q, bad, "kv:glm4moe.nextn_predict_layers", NULL, "glm4moe.nextn_predict_layers#1", NULL);
    m = llm_model_load(bad, NULL, &err);
    ok(m && m->cfg.n_layers == 2, "glm4moe: nextn_predict_layers 1: its last layer left out (%d layers): %s",
       m ? m->cfg.n_layers : 0, m ? "" : err.msg);
    llm_model_free(m);
    static const struct { const char *drop, *halve, *add, *want; } glm[] = {
        { "kv:glm4moe.nextn_predict_layers", NULL, "glm4moe.nextn_predict_layers#3", "leaves no layer of 3" },
        { "kv:glm4moe.expert_gating_func", NULL, "glm4moe.expert_gating_func#3", "expert_gating_func 3" },
        { "kv:glm4moe.rope.dimension_count", NULL, "glm4moe.rope.dimension_count#15", "partial rope" },
        { NULL, "blk.1.attn_q.bias", NULL, "bq" },
    };
    for (size_t i = 0; i < sizeof(glm) / sizeof(glm[0]); i++) {
        rewrite(q, bad, glm[i].drop, glm[i].halve, glm[i].add, NULL);
        llm_model *x = llm_model_load(bad, NULL, &err);
        ok(x == NULL && strstr(err.msg, glm[i].want), "GLM-4.5 GGUF refused (%s): %s", glm[i].want,
           x ? "loaded" : err.msg);
        llm_model_free(x);
    }
    unlink(bad);
    unlink(q);
}

/* OLMo 3 (post norms only, whole-row q/k norms, windows on three layers of four) and Granite MoE files: their
 * settings as loaded, kept through a Hugging Face directory, and what a file may get wrong. */
static void test_olmo_granitemoe(void)
{
    llm_err err = { { 0 } };
    char f[512], bad[512], hf[512];
    snprintf(f, sizeof(f), "%s/olmo3.gguf", tmpdir);
    snprintf(bad, sizeof(bad), "%s/bad-olmo.gguf", tmpdir);
    snprintf(hf, sizeof(hf), "%s/hf-olmo3", tmpdir);
    ok(llm_model_generate("tiny-olmo3", LLM_F32, 3, f, "../shared", &err) == 0, "gen tiny-olmo3: %s", err.msg);
    for (int pass = 0; pass < 2; pass++) {
        llm_model *m = llm_model_load(pass ? hf : f, NULL, &err);
        int good = m != NULL && !strcmp(m->arch, "olmo2") && m->cfg.post_norm_only && m->cfg.qk_norm_full &&
                   m->cfg.swa_window == 16 && m->cfg.rope_theta_swa == m->cfg.rope_theta &&
                   m->cfg.rope_layout == LLM_ROPE_HALF && m->layers[0].attn_norm.data == NULL &&
                   m->layers[0].ffn_norm.data == NULL && m->layers[0].q_norm.ne[0] == 64 &&
                   m->layers[0].k_norm.ne[0] == 32;
        for (int l = 0; good && l < 4; l++)
            good &= m->layers[l].swa == (l < 3);
        ok(good, "olmo3 %s: post norms only, q/k norms of 64 and 32, windows on layers 0-2: %s",
           pass ? "from its HF directory" : "GGUF", m ? "" : err.msg);
        if (m != NULL && !pass)
            ok(llm_model_save_hf(m, LLM_F32, hf, &err) == 0, "olmo3: saved as HF: %s", err.msg);
        llm_model_free(m);
    }
    edit_config(hf, "clip_qkv", "8");
    llm_model *x = llm_model_load(hf, NULL, &err);
    ok(x == NULL && strstr(err.msg, "clip_qkv is not supported"), "olmo3: clip_qkv refused: %s",
       x ? "loaded" : err.msg);
    llm_model_free(x);
    static const struct { const char *drop, *halve, *add, *want; } files[] = {
        { NULL, NULL, "blk.0.attn_norm.weight", "blk.0.attn_norm.weight is not supported (architecture olmo2)" },
        { NULL, "blk.1.attn_q_norm.weight", NULL, "q_norm" },
        { "blk.2.post_ffw_norm.weight", NULL, NULL, "post_ffw_norm" },
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        rewrite(f, bad, files[i].drop, files[i].halve, files[i].add, NULL);
        x = llm_model_load(bad, NULL, &err);
        ok(x == NULL && strstr(err.msg, files[i].want), "olmo3 GGUF refused (%s): %s", files[i].want,
           x ? "loaded" : err.msg);
        llm_model_free(x);
    }

    /* EXAONE 4's 64-layer layout: windows on three layers of four, the fourth global without rope; the same
     * from its Hugging Face directory (layer_types) */
    ok(llm_model_generate("tiny-exaone4-swa", LLM_F32, 3, f, "../shared", &err) == 0, "gen tiny-exaone4-swa: %s",
       err.msg);
    for (int pass = 0; pass < 2; pass++) {
        llm_model *e = llm_model_load(pass ? hf : f, NULL, &err);
        int good = e != NULL && !strcmp(e->arch, "exaone4") && e->cfg.post_norm_only && !e->cfg.qk_norm_full &&
                   e->cfg.swa_window == 16 && e->cfg.rope_theta_swa == 0.0f && e->layers[5].q_norm.ne[0] == 16;
        for (int l = 0; good && l < 64; l++)
            good &= e->layers[l].swa == (l % 4 < 3) && e->layers[l].nope == (l % 4 == 3);
        ok(good, "exaone4 %s: per-head q/k norms, windows on 48 layers, the 16 others without rope: %s",
           pass ? "from its HF directory" : "GGUF", e ? "" : err.msg);
        if (e != NULL && !pass)
            ok(llm_model_save_hf(e, LLM_F32, hf, &err) == 0, "exaone4: saved as HF: %s", err.msg);
        llm_model_free(e);
    }

    /* Granite MoE with GraniteMoeShared's shared expert: no gate; a Qwen-style gate on it is refused */
    ok(llm_model_generate("tiny-granitemoe-shared", LLM_F32, 3, f, "../shared", &err) == 0,
       "gen tiny-granitemoe-shared: %s", err.msg);
    llm_model *m = llm_model_load(f, NULL, &err);
    ok(m && !strcmp(m->arch, "granitemoe") && m->cfg.n_expert == 8 && m->cfg.expert_ff == 64 &&
       m->cfg.hidden_dim == 128 && m->cfg.moe_norm_topk && llm_layer_has_shared(&m->layers[1]) &&
       m->layers[1].shexp_gate.data == NULL && m->cfg.residual_scale == 0.6f,
       "granitemoe: 8 experts of 64, an ungated shared expert of 128, Granite's scales: %s", m ? "" : err.msg);
    llm_model_free(m);
    rewrite(f, bad, NULL, NULL, "blk.0.ffn_gate_inp_shexp.weight", NULL);
    x = llm_model_load(bad, NULL, &err);
    ok(x == NULL && strstr(err.msg, "ffn_gate_inp_shexp.weight is not supported (architecture granitemoe)"),
       "granitemoe: a gate on the shared expert refused: %s", x ? "loaded" : err.msg);
    llm_model_free(x);
    rewrite(f, bad, "blk.1.ffn_down_shexp.weight", NULL, NULL, NULL);
    x = llm_model_load(bad, NULL, &err);
    ok(x == NULL && strstr(err.msg, "blk.1.ffn_down_shexp.weight"), "granitemoe: a shared expert's part missing: %s",
       x ? "loaded" : err.msg);
    llm_model_free(x);
    char p[600];
    snprintf(p, sizeof(p), "%s/config.json", hf);
    unlink(p);
    snprintf(p, sizeof(p), "%s/model.safetensors", hf);
    unlink(p);
    snprintf(p, sizeof(p), "%s/tokenizer.json", hf);
    unlink(p);
    snprintf(p, sizeof(p), "%s/tokenizer_config.json", hf);
    unlink(p);
    rmdir(hf);
    unlink(bad);
    unlink(f);
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_model_%d", (int)getpid());
    mkdir(tmpdir, 0755);
    test_load_and_save();
    test_generate();
    test_qwen();
    test_phi3();
    test_smollm3_granite();
    test_rank_head();
    test_gemma();
    test_moe();
    test_olmo_granitemoe();
    rmdir(tmpdir);
    return done_testing();
}
