/* llm-engine tokenize: ids of a text as a JSON array (no BOS unless --bos). */
#include "cli.h"
#include "model.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_tokenize(const llm_args *a)
{
    static const char *const known[] = { "model=", "tokenizer=", "text=", "bos", "special", NULL };
    if (llm_args_check(a, known) != 0)
        return 2;
    const char *model_path = llm_arg_str(a, "model"), *tok_path = llm_arg_str(a, "tokenizer");
    const char *text = llm_arg_str(a, "text");
    if ((model_path == NULL && tok_path == NULL) || text == NULL) {
        fprintf(stderr, "error: tokenize needs --model PATH or --tokenizer PATH, and --text TEXT\n");
        return 2;
    }
    llm_err err = { { 0 } };
    llm_model *m = NULL;
    llm_tokenizer *own = NULL;
    const llm_tokenizer *tok;
    if (tok_path != NULL && model_path == NULL) {
        own = llm_tok_load(tok_path, &err);
        tok = own;
    } else {
        m = llm_model_load(model_path, tok_path, &err);
        tok = m != NULL ? m->tok : NULL;
        if (m != NULL && tok == NULL)
            snprintf(err.msg, sizeof(err.msg), "%s carries no tokenizer; give one with --tokenizer", model_path);
    }
    if (tok == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        llm_model_free(m);
        return 1;
    }
    int flags = (llm_arg_flag(a, "bos") ? LLM_TOK_ADD_BOS : 0) | (llm_arg_flag(a, "special") ? LLM_TOK_PARSE_SPECIAL : 0);
    int32_t *ids = NULL;
    int n = llm_tok_encode(tok, text, strlen(text), flags, &ids);
    int rc = 0;
    if (n < 0) {
        fprintf(stderr, "error: out of memory\n");
        rc = 1;
    } else {
        putchar('[');
        for (int i = 0; i < n; i++)
            printf(i ? ",%d" : "%d", ids[i]);
        printf("]\n");
    }
    free(ids);
    llm_tok_free(own);
    llm_model_free(m);
    return rc;
}
