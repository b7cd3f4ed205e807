/* llm-engine info: architecture, shapes, dtypes, tokenizer, file size. */
#include "cli.h"
#include "model.h"

#include <stdio.h>

int cli_info(const llm_args *a)
{
    static const char *const known[] = { "model=", "tokenizer=", NULL };
    if (llm_args_check(a, known) != 0)
        return 2;
    const char *path = llm_arg_str(a, "model");
    if (path == NULL) {
        fprintf(stderr, "error: info needs --model PATH\n");
        return 2;
    }
    llm_err err = { { 0 } };
    llm_model *m = llm_model_load(path, llm_arg_str(a, "tokenizer"), &err);
    if (m == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    llm_model_describe(m, stdout);
    llm_model_free(m);
    return 0;
}
