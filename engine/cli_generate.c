/* llm-engine generate: one prompt, one sequence, on a backend; the
 * continuation goes to stdout, timing figures to stderr. */
#include "backend.h"
#include "backend_util.h"
#include "cli.h"
#include "grammar.h"
#include "json_file.h"
#include "json_schema.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "13=-100,42=2.5" -> biases (malloc'd): ids below vocab, |bias| <= 100. Returns count, -1 when malformed. */
static int parse_bias(const char *s, int vocab, llm_logit_bias **out)
{
    int n = 0;
    for (const char *c = s; *c; c++)
        n += *c == ',';
    llm_logit_bias *b = malloc(((size_t)n + 1) * sizeof(*b));
    if (b == NULL)
        return -1;
    n = 0;
    while (*s != '\0') {
        char *end;
        errno = 0;
        long id = strtol(s, &end, 10);
        if (end == s || errno != 0 || id < 0 || id >= vocab || *end != '=')
            break;
        s = end + 1;
        float v = strtof(s, &end);
        if (end == s || !(v >= -LLM_SAMPLING_MAX_BIAS && v <= LLM_SAMPLING_MAX_BIAS) || (*end != ',' && *end != '\0'))
            break;
        b[n++] = (llm_logit_bias){ (int32_t)id, v };
        s = *end == ',' ? end + 1 : end;
    }
    if (*s != '\0' || n == 0) {
        free(b);
        return -1;
    }
    *out = b;
    return n;
}

static const char *const known[] = {
    "model=", "tokenizer=", "prompt=", "prompt-ids=", "suffix=", "max-tokens=", "temperature=", "top-p=",
    "top-k=", "min-p=", "typical-p=", "repeat-penalty=", "presence-penalty=", "frequency-penalty=", "seed=",
    "threads=", "ignore-eos", "output-ids", "backend=", "device=", "tensor-parallel-size=", "expert-parallel",
    "gpu-memory-fraction=", "kernel-tune=", "kernel-tune-file=", "batch=", "ctx-size=", "kv-cache-dtype=", "lora=",
    "lora-scale=", "logit-bias=", "json", "json-schema=", "regex=", "grammar=", "grammar-file=",
    "swa-kv=", NULL,
};

int cli_generate(const llm_args *a)
{
    if (llm_args_check(a, known) != 0)
        return 2;
    const char *model_path = llm_arg_str(a, "model"), *prompt = llm_arg_str(a, "prompt");
    const char *prompt_ids = llm_arg_str(a, "prompt-ids");
    if (model_path == NULL || (prompt == NULL) == (prompt_ids == NULL)) {
        fprintf(stderr, "error: generate needs --model and one of --prompt / --prompt-ids\n");
        return 2;
    }
    int max_tokens = (int)llm_arg_long(a, "max-tokens", 128, 0, 1 << 24);
    int ignore_eos = llm_arg_flag(a, "ignore-eos"), output_ids = llm_arg_flag(a, "output-ids");
    int json = llm_arg_flag(a, "json");
    const char *schema_path = llm_arg_str(a, "json-schema"), *regex = llm_arg_str(a, "regex");
    const char *grammar = llm_arg_str(a, "grammar"), *grammar_path = llm_arg_str(a, "grammar-file");
    if (json + (schema_path != NULL) + (regex != NULL) + (grammar != NULL) + (grammar_path != NULL) > 1) {
        fprintf(stderr, "error: --json, --json-schema, --regex, --grammar and --grammar-file: give one\n");
        return 2;
    }
    char *grammar_text = NULL; /* --grammar-file's */
    size_t grammar_len = grammar != NULL ? strlen(grammar) : 0;
    int chunk = (int)llm_arg_long(a, "batch", 512, 1, 1 << 16);

    llm_sampling_params sp;
    llm_sampling_defaults(&sp);
    sp.temperature = (float)llm_arg_double(a, "temperature", 0.0, 0.0, 100.0);
    sp.top_p = (float)llm_arg_double(a, "top-p", 1.0, 0.0, 1.0);
    sp.top_k = (int)llm_arg_long(a, "top-k", 0, 0, 1 << 30);
    sp.min_p = (float)llm_arg_double(a, "min-p", 0.0, 0.0, 1.0);
    sp.typical_p = (float)llm_arg_double(a, "typical-p", 1.0, 0.0, 1.0);
    sp.repetition_penalty = (float)llm_arg_double(a, "repeat-penalty", 1.0, 0.0, 100.0);
    sp.presence_penalty = (float)llm_arg_double(a, "presence-penalty", 0.0, -2.0, 2.0);
    sp.frequency_penalty = (float)llm_arg_double(a, "frequency-penalty", 0.0, -2.0, 2.0);
    sp.seed = (uint64_t)llm_arg_long(a, "seed", 0, 0, (long)(~0UL >> 1));
    char msg[256];
    if (llm_sampling_validate(&sp, msg, sizeof(msg)) != 0) {
        fprintf(stderr, "error: %s\n", msg);
        return 2;
    }

    llm_err err = { { 0 } };
    double t0 = llm_now_sec();
    /* conversions of the types a backend may take from their blocks wait for llm_backend_prepare (model.h) */
    llm_model *m = llm_model_load_ex(model_path, llm_arg_str(a, "tokenizer"), LLM_LOAD_DEFER_KQ, &err);
    if (m == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    if (m->cfg.bidirectional) { /* (the forward pass would say so later, less plainly) */
        fprintf(stderr, "error: %s is an embedding model (%s: every token sees its whole input): it does not "
                "generate; use `llm-engine embed`\n", model_path, m->arch);
        llm_model_free(m);
        return 1;
    }
    if (llm_lora_opts(a, m) != 0) {
        llm_model_free(m);
        return 1;
    }
    const llm_config *c = &m->cfg;
    int rc = 1;
    int32_t *ids = NULL;
    float *logits = NULL;
    llm_backend *be = NULL;
    llm_sampler *smp = NULL;
    llm_logit_bias *bias = NULL;
    int n_prompt, n_bias = 0;
    /* --json / --json-schema: the output is one JSON object / one value the schema accepts (json_schema.h) */
    llm_json_vocab *jv = NULL;
    llm_schema *schema = NULL;
    llm_schema_state *con = NULL;
    llm_backend_opts bo = { 0 };
    if (llm_context_opts(a, m, &bo) != 0)
        goto out;
    if (prompt_ids != NULL) {
        n_prompt = llm_parse_ids(prompt_ids, c->vocab_size, &ids);
        if (n_prompt < 0) {
            fprintf(stderr, "error: --prompt-ids must be a comma-separated list of ids below %d\n", c->vocab_size);
            goto out;
        }
    } else {
        if (m->tok == NULL) {
            fprintf(stderr, "error: %s carries no tokenizer; give one with --tokenizer\n", model_path);
            goto out;
        }
        const char *suffix = llm_arg_str(a, "suffix"); /* fill in the middle: prompt, then suffix, then the middle */
        if (suffix != NULL && suffix[0] != 0) {
            int32_t fim[3];
            if (llm_tok_fim_ids(m->tok, fim) != 0) {
                fprintf(stderr, "error: --suffix: %s has no fill-in-the-middle tokens\n", model_path);
                goto out;
            }
            n_prompt = llm_tok_encode_fim(m->tok, prompt, strlen(prompt), suffix, strlen(suffix), &ids);
        } else {
            n_prompt = llm_tok_encode(m->tok, prompt, strlen(prompt), LLM_TOK_ADD_BOS, &ids);
        }
        if (n_prompt < 0) {
            fprintf(stderr, "error: out of memory tokenizing the prompt\n");
            goto out;
        }
    }
    if (n_prompt == 0) {
        fprintf(stderr, "error: empty prompt\n");
        goto out;
    }
    if (grammar_path != NULL) {
        if ((grammar_text = llm_read_file(grammar_path, LLM_GRAMMAR_MAX_TEXT, &grammar_len, &err)) == NULL) {
            fprintf(stderr, "error: --grammar-file: %s\n", err.msg);
            goto out;
        }
        grammar = grammar_text;
    }
    if (json || schema_path != NULL || regex != NULL || grammar != NULL) {
        char why[256] = "out of memory";
        cJSON *doc = schema_path != NULL ? llm_json_read_file(schema_path, &err)
                     : regex == NULL && grammar == NULL ? cJSON_Parse(LLM_SCHEMA_JSON_OBJECT)
                                         : NULL;
        if (doc != NULL)
            schema = llm_schema_compile(doc, why, sizeof why);
        else if (regex != NULL)
            schema = llm_schema_regex(regex, strlen(regex), why, sizeof why);
        else if (grammar != NULL)
            schema = llm_schema_grammar(grammar, grammar_len, why, sizeof why);
        cJSON_Delete(doc);
        if (schema == NULL) {
            fprintf(stderr, "error: %s\n", doc == NULL && schema_path != NULL ? err.msg : why);
            goto out;
        }
        if (m->tok == NULL || (jv = llm_json_vocab_new(m->tok)) == NULL || (con = llm_schema_state_new(schema)) == NULL) {
            fprintf(stderr, "error: --%s needs the model's tokenizer%s\n",
                    json ? "json" : regex != NULL ? "regex" : grammar != NULL ? "grammar" : "json-schema",
                    m->tok != NULL ? " (out of memory)" : "");
            goto out;
        }
    }
    if (llm_arg_str(a, "logit-bias") != NULL &&
        (n_bias = parse_bias(llm_arg_str(a, "logit-bias"), c->vocab_size, &bias)) < 0) {
        fprintf(stderr, "error: --logit-bias must be a comma-separated list of ID=BIAS, ids below %d, biases "
                "-100..100\n", c->vocab_size);
        goto out;
    }
    if (n_prompt + max_tokens > c->seq_len) {
        if (n_prompt >= c->seq_len) {
            fprintf(stderr, "error: prompt of %d tokens does not fit the context of %d\n", n_prompt, c->seq_len);
            goto out;
        }
        max_tokens = c->seq_len - n_prompt;
    }

    bo.threads = (int)llm_arg_long(a, "threads", 0, 0, 1024);
    bo.block_size = 16;
    bo.kv_blocks = (n_prompt + max_tokens + bo.block_size - 1) / bo.block_size + 1;
    const char *swa = llm_arg_str(a, "swa-kv");
    if (swa != NULL && strcmp(swa, "full") != 0 && strcmp(swa, "window") != 0) {
        fprintf(stderr, "error: --swa-kv is full or window (got '%s')\n", swa);
        goto out;
    }
    if (swa != NULL && strcmp(swa, "window") == 0 && llm_swa_pool_layers(m) > 0) {
        /* one sequence: its window table is a ring, block i of the sequence in block i mod swa_blocks, as
         * long as the window and the largest step (the window start inside a block, and the step's end) */
        long steps = n_prompt < chunk ? n_prompt : chunk;
        long ring = (c->swa_window - 1 + steps) / bo.block_size + 2;
        bo.swa_blocks = (int)(ring < bo.kv_blocks ? ring : bo.kv_blocks);
    }
    bo.device = (int)llm_arg_long(a, "device", 0, 0, 64);
    bo.gpu_memory_fraction = (float)llm_arg_double(a, "gpu-memory-fraction", 0.0, 0.0, 1.0);
    if (llm_kernel_tune_opts(a, &bo) != 0)
        goto out;
    bo.tune_max_batch = 1; /* one sequence: every decode step is one token */
    bo.scratch_tokens = n_prompt < chunk ? n_prompt : chunk; /* the largest step: ready before the clock starts */
    const char *bname = llm_arg_str(a, "backend") != NULL ? llm_arg_str(a, "backend") : "cpu";
    if (llm_tp_opts(a, bname, m, &bo) != 0)
        goto out;
    if (llm_backend_prepare(bname, m, &bo, &err) == 0) {
        llm_backend_prepare_report(m, stderr);
        be = llm_backend_create(bname, m, &bo, &err);
    }
    if (be == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto out;
    }
    double t_loaded = llm_now_sec();

    /* One sequence whose block table is simply 0..n-1. */
    int n_blocks = be->opts.kv_blocks;
    int32_t *table = malloc(2 * (size_t)n_blocks * sizeof(*table)), *ring = table + n_blocks;
    int32_t *pos = malloc((size_t)chunk * sizeof(*pos)), *seq = calloc((size_t)chunk, sizeof(*seq));
    uint8_t *want = calloc((size_t)chunk, 1);
    logits = malloc((size_t)c->vocab_size * sizeof(float));
    smp = llm_sampler_new(&sp, c->vocab_size);
    if (table == NULL || pos == NULL || seq == NULL || want == NULL || logits == NULL || smp == NULL ||
        llm_sampler_set_bias(smp, bias, n_bias) != 0) {
        fprintf(stderr, "error: out of memory\n");
        free(table); free(pos); free(seq); free(want);
        goto out;
    }
    for (int i = 0; i < n_blocks; i++) {
        table[i] = i;
        ring[i] = be->opts.swa_blocks > 0 ? i % be->opts.swa_blocks : 0;
    }
    llm_seq_view view = { table, n_blocks, be->opts.swa_blocks > 0 ? ring : NULL };

    /* Prefill in chunks; only the last prompt token's logits are needed. */
    for (int i = 0; i < n_prompt; i++)
        llm_sampler_accept(smp, ids[i], 1);
    int step_ok = 1;
    for (int start = 0; start < n_prompt && step_ok; start += chunk) {
        int n = n_prompt - start < chunk ? n_prompt - start : chunk;
        for (int i = 0; i < n; i++) {
            pos[i] = start + i;
            want[i] = (start + i == n_prompt - 1);
        }
        llm_batch b = { n, ids + start, pos, seq, want, 1, &view };
        step_ok = be->ops->forward(be, &b, logits, &err) == 0;
    }
    double t_prefilled = llm_now_sec();

    int32_t eog[16];
    int n_eog = m->tok != NULL ? llm_tok_eog_ids(m->tok, eog, 16) : 0;
    if (n_eog == 0 && c->eos_id >= 0)
        eog[n_eog++] = c->eos_id;
    llm_detok dt;
    if (m->tok != NULL) {
        llm_detok_init(&dt, m->tok);
        dt.at_start = 0; /* a continuation: the prompt came first, keep its leading space */
    }
    char text[1024];
    int n_gen = 0;
    while (step_ok && n_gen < max_tokens) {
        /* a regex's whole match that may go on: the end-of-generation ids are kept through the mask */
        int can_end = con != NULL && !ignore_eos && llm_schema_can_end(con);
        float eog_lg[16];
        for (int i = 0; can_end && i < n_eog; i++)
            eog_lg[i] = eog[i] >= 0 && eog[i] < c->vocab_size ? logits[eog[i]] : -INFINITY;
        if (con != NULL && llm_schema_mask(con, jv, logits, c->vocab_size) == 0 && !can_end)
            break; /* no token can continue the JSON text */
        for (int i = 0; can_end && i < n_eog; i++)
            if (eog[i] >= 0 && eog[i] < c->vocab_size)
                logits[eog[i]] = eog_lg[i];
        int32_t next = llm_sampler_sample(smp, logits, NULL);
        int stop = 0;
        for (int i = 0; i < n_eog && !ignore_eos; i++)
            stop |= next == eog[i];
        if (stop)
            break;
        llm_sampler_accept(smp, next, 0);
        if (output_ids || m->tok == NULL) {
            printf(n_gen == 0 ? "%d" : " %d", next);
        } else {
            size_t k = llm_detok_push(&dt, next, text, sizeof(text));
            fwrite(text, 1, k, stdout);
        }
        fflush(stdout);
        if (++n_gen == max_tokens)
            break; /* no need to run the model for a token nobody samples */
        if (con != NULL && (llm_schema_accept(con, jv, next) != 0 || llm_schema_done(con)))
            break; /* the value is whole */
        int32_t p = n_prompt + n_gen - 1;
        uint8_t w = 1;
        int32_t s0 = 0;
        llm_batch b = { 1, &next, &p, &s0, &w, 1, &view };
        step_ok = be->ops->forward(be, &b, logits, &err) == 0;
    }
    if (!output_ids && m->tok != NULL) {
        size_t k = llm_detok_flush(&dt, text, sizeof(text));
        fwrite(text, 1, k, stdout);
    }
    printf("\n");
    double t_end = llm_now_sec();
    free(table); free(pos); free(seq); free(want);
    if (!step_ok) {
        fprintf(stderr, "error: forward pass failed: %s\n", err.msg);
        goto out;
    }
    double pre = t_prefilled - t_loaded, dec = t_end - t_prefilled;
    int kvt = be->opts.kv_dtype;
    fprintf(stderr, "load: %.3f s (%s, %s backend, %d threads, %s KV cache)\n", t_loaded - t0, m->format,
            be->ops->name, be->opts.threads, kvt == LLM_KV_F16 ? "f16" : kvt == LLM_KV_Q8_0 ? "q8_0" : "f32");
    if (be->opts.swa_blocks > 0)
        fprintf(stderr, "kv: the %d sliding-window layers' KV in a ring of %d blocks of %d tokens (--swa-kv window), "
                "the other layers' in %d\n", llm_swa_pool_layers(m), be->opts.swa_blocks, be->opts.block_size,
                be->opts.kv_blocks);
    fprintf(stderr, "prompt: %d tokens in %.3f s, %.2f tokens/s\n", n_prompt, pre, pre > 0 ? n_prompt / pre : 0.0);
    fprintf(stderr, "generated: %d tokens in %.3f s, %.2f tokens/s\n", n_gen, dec,
            dec > 0 && n_gen > 1 ? (n_gen - 1) / dec : 0.0);
    rc = 0;
out:
    llm_sampler_free(smp);
    llm_backend_free(be);
    free(logits);
    free(ids);
    free(bias);
    llm_schema_state_free(con);
    llm_schema_free(schema);
    free(grammar_text);
    llm_json_vocab_free(jv);
    llm_model_free(m);
    return rc;
}
