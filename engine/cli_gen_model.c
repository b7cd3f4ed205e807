/* llm-engine gen-model: a GGUF with random weights of a real model's shape
 * (--preset), or an existing model re-saved in another dtype (--from), as GGUF
 * or (--format hf) as a Hugging Face directory. */
#include "cli.h"
#include "model.h"
#include "model_gen.h"
#include "model_write.h"
#include "gguf_quants.h"
#include "tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int cli_gen_model(const llm_args *a)
{
    static const char *const known[] = { "preset=", "from=", "tokenizer=", "dtype=", "out=", "seed=", "format=",
                                         "pooling=", "add-eos", "rope-scaling=", "rope-factor=", "rope-orig-ctx=",
                                         "layers=", "lora=", "lora-scale=", "rank-head", NULL };
    if (llm_args_check(a, known) != 0)
        return 2;
    const char *preset = llm_arg_str(a, "preset"), *from = llm_arg_str(a, "from");
    const char *dtype_s = llm_arg_str(a, "dtype"), *out = llm_arg_str(a, "out");
    if ((preset == NULL) == (from == NULL) || out == NULL) {
        fprintf(stderr, "error: gen-model needs one of --preset NAME / --from MODEL, and --out FILE.gguf\n");
        return 2;
    }
    const char *format = llm_arg_str(a, "format");
    int hf = format != NULL && strcmp(format, "hf") == 0;
    if ((format != NULL && !hf && strcmp(format, "gguf") != 0) || (hf && from == NULL)) {
        fprintf(stderr, "error: --format is gguf or hf (hf: with --from)\n");
        return 2;
    }
    llm_dtype dt = LLM_F32;
    /* GGUF's Q2_K / Q3_K / Q4_K / Q5_K, every matrix they fit */
    static const uint32_t kqs[] = { GGML_Q2_K, GGML_Q3_K, GGML_Q4_K, GGML_Q5_K };
    int kq = 0;
    for (size_t i = 0; i < sizeof(kqs) / sizeof(kqs[0]) && dtype_s != NULL; i++)
        if (strcasecmp(dtype_s, gguf_qtype_name(kqs[i])) == 0) {
            dt = (llm_dtype)kqs[i];
            kq = 1;
        }
    if (dtype_s != NULL && !kq && llm_dtype_from_name(dtype_s, &dt) != 0) {
        fprintf(stderr, "error: --dtype must be one of f32, f16, bf16, q8_0, q4_0, q2_K, q3_K, q4_K, q5_K (got '%s')\n",
                dtype_s);
        return 2;
    }
    if (kq && hf) {
        fprintf(stderr, "error: --format hf takes f32, f16 or bf16\n");
        return 2;
    }
    uint64_t seed = (uint64_t)llm_arg_long(a, "seed", 1, 0, (long)(~0UL >> 1));
    llm_err err = { { 0 } };
    double t0 = llm_now_sec();
    int rc;
    if (preset != NULL) {
        int layers = (int)llm_arg_long(a, "layers", 0, 0, 4096); /* 0: the preset's */
        rc = llm_model_generate_layers(preset, dt, seed, layers, out, llm_shared_dir(), &err);
    } else {
        llm_model *m = llm_model_load(from, llm_arg_str(a, "tokenizer"), &err);
        if (m != NULL && llm_lora_opts(a, m) != 0) { /* a merged copy: --lora ADAPTER --out merged.gguf */
            llm_model_free(m);
            return 1;
        }
        const char *pool = llm_arg_str(a, "pooling"); /* the pooling an embedding model declares */
        if (m != NULL && pool != NULL) {
            if (strcmp(pool, "mean") != 0 && strcmp(pool, "last") != 0) {
                fprintf(stderr, "error: --pooling is mean or last\n");
                llm_model_free(m);
                return 2;
            }
            m->pooling = strcmp(pool, "mean") == 0 ? LLM_POOL_MEAN : LLM_POOL_LAST;
        }
        const char *rs = llm_arg_str(a, "rope-scaling"); /* a long-context variant: YaRN or linear */
        if (m != NULL && rs != NULL) {
            llm_config *c = &m->cfg;
            if (strcmp(rs, "yarn") != 0 && strcmp(rs, "linear") != 0) {
                fprintf(stderr, "error: --rope-scaling is yarn or linear\n");
                llm_model_free(m);
                return 2;
            }
            if (c->rope_scaling != LLM_ROPE_SCALING_NONE || m->rope_freqs != NULL) {
                fprintf(stderr, "error: --rope-scaling: %s already scales its rope\n", from);
                llm_model_free(m);
                return 2;
            }
            c->rope_scaling = rs[0] == 'y' ? LLM_ROPE_SCALING_YARN : LLM_ROPE_SCALING_LINEAR;
            c->rope_factor = (float)llm_arg_double(a, "rope-factor", 4.0, 1.0, 1024.0);
            c->rope_orig_ctx = (int)llm_arg_long(a, "rope-orig-ctx", c->seq_len, 1, 1 << 24);
            c->rope_mscale = llm_yarn_mscale(c->rope_factor);
            c->yarn_beta_fast = 32.0f;
            c->yarn_beta_slow = 1.0f;
        }
        if (m != NULL && llm_arg_flag(a, "add-eos")) { /* its texts end in EOS (an embedding model's last token) */
            if (m->tok == NULL || llm_tok_eos(m->tok) < 0) {
                fprintf(stderr, "error: --add-eos: %s has no tokenizer with an EOS token\n", from);
                llm_model_free(m);
                return 2;
            }
            llm_tok_set_add_eos(m->tok, 1);
        }
        if (m != NULL && llm_arg_flag(a, "rank-head") && (hf || llm_model_rank_head(m, &err) != 0)) {
            fprintf(stderr, "error: --rank-head: %s\n", hf ? "a GGUF's (not with --format hf)" : err.msg);
            llm_model_free(m);
            return 2;
        }
        rc = m == NULL ? -1 : hf ? llm_model_save_hf(m, dt, out, &err) : llm_model_save_gguf(m, dt, out, &err);
        llm_model_free(m);
    }
    if (rc != 0) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s (%s) in %.2f s\n", out, gguf_qtype_name((uint32_t)dt), llm_now_sec() - t0);
    return 0;
}
