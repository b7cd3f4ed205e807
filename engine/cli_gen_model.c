/* llm-engine gen-model: a GGUF with random weights of a real model's shape
 * (--preset), or an existing model re-saved in another dtype (--from). */
#include "cli.h"
#include "model.h"
#include "model_gen.h"
#include "model_write.h"

#include <stdio.h>

int cli_gen_model(const llm_args *a)
{
    static const char *const known[] = { "preset=", "from=", "tokenizer=", "dtype=", "out=", "seed=", NULL };
    if (llm_args_check(a, known) != 0)
        return 2;
    const char *preset = llm_arg_str(a, "preset"), *from = llm_arg_str(a, "from");
    const char *dtype_s = llm_arg_str(a, "dtype"), *out = llm_arg_str(a, "out");
    if ((preset == NULL) == (from == NULL) || out == NULL) {
        fprintf(stderr, "error: gen-model needs one of --preset NAME / --from MODEL, and --out FILE.gguf\n");
        return 2;
    }
    llm_dtype dt = LLM_F32;
    if (dtype_s != NULL && llm_dtype_from_name(dtype_s, &dt) != 0) {
        fprintf(stderr, "error: --dtype must be one of f32, f16, bf16, q8_0, q4_0 (got '%s')\n", dtype_s);
        return 2;
    }
    uint64_t seed = (uint64_t)llm_arg_long(a, "seed", 1, 0, (long)(~0UL >> 1));
    llm_err err = { { 0 } };
    double t0 = llm_now_sec();
    int rc;
    if (preset != NULL) {
        rc = llm_model_generate(preset, dt, seed, out, llm_shared_dir(), &err);
    } else {
        llm_model *m = llm_model_load(from, llm_arg_str(a, "tokenizer"), &err);
        rc = m != NULL ? llm_model_save_gguf(m, dt, out, &err) : -1;
        llm_model_free(m);
    }
    if (rc != 0) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s (%s) in %.2f s\n", out, llm_dtype_name(dt), llm_now_sec() - t0);
    return 0;
}
