/* llm-engine embed: embeddings of one text, one list of ids, or every line of a file, through the
 * continuous-batching scheduler (all inputs in flight at once, as serve runs them): one JSON array of
 * floats per input on stdout (of unit length unless --no-normalize), the figures on stderr. With
 * --query, a cross-encoder's scores instead: each text is a document paired with the query as the model's
 * tokenizer pairs texts, and the line holds the classifier head's outputs (logits, as /v1/rerank reads them). */
#include "backend.h"
#include "cli.h"
#include "model.h"
#include "scheduler.h"
#include "tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t **ids;
    int      *n_ids;
    int       n, cap;
} inputs;

static int inputs_add(inputs *in, int32_t *ids, int n)
{
    if (in->n == in->cap) {
        int cap = in->cap ? 2 * in->cap : 16;
        int32_t **i2 = realloc(in->ids, (size_t)cap * sizeof(*i2));
        if (i2 == NULL)
            return -1;
        in->ids = i2;
        int *n2 = realloc(in->n_ids, (size_t)cap * sizeof(*n2));
        if (n2 == NULL)
            return -1;
        in->n_ids = n2;
        in->cap = cap;
    }
    in->ids[in->n] = ids;
    in->n_ids[in->n++] = n;
    return 0;
}

static void inputs_free(inputs *in)
{
    for (int i = 0; i < in->n; i++)
        free(in->ids[i]);
    free(in->ids);
    free(in->n_ids);
}

/* A text's ids as the server encodes an input: BOS as the tokenizer says, EOS where it asks for it; with a
 * query, the pair query + text as /v1/rerank encodes it for a cross-encoder. */
static int encode(const llm_tokenizer *tok, const char *query, const char *text, size_t len, inputs *in)
{
    int32_t *ids = NULL;
    int n = query != NULL ? llm_tok_encode_pair(tok, query, strlen(query), text, len, &ids, NULL)
                          : llm_tok_encode(tok, text, len, LLM_TOK_ADD_BOS, &ids);
    if (n < 0)
        return -1;
    if (query == NULL && llm_tok_add_eos(tok)) {
        int32_t *m = realloc(ids, ((size_t)n + 1) * sizeof(*m));
        if (m == NULL) {
            free(ids);
            return -1;
        }
        ids = m;
        ids[n++] = llm_tok_eos(tok);
    }
    if (inputs_add(in, ids, n) != 0) {
        free(ids);
        return -1;
    }
    return 0;
}

/* The inputs: --prompt, --prompt-ids or --input-file (one text a line, empty lines skipped). */
static int read_inputs(const llm_args *a, const llm_model *m, inputs *in)
{
    const char *prompt = llm_arg_str(a, "prompt"), *pids = llm_arg_str(a, "prompt-ids");
    const char *file = llm_arg_str(a, "input-file"), *query = llm_arg_str(a, "query");
    if ((prompt != NULL) + (pids != NULL) + (file != NULL) != 1) {
        fprintf(stderr, "error: embed needs one of --prompt TEXT, --prompt-ids 1,2,3, --input-file FILE\n");
        return -1;
    }
    if (query != NULL && (pids != NULL || !m->cfg.bidirectional || m->n_cls == 0)) {
        fprintf(stderr, "error: --query scores texts with a cross-encoder (an encoder with a classifier head: a "
                "BERT, XLM-RoBERTa or ModernBERT reranker), given as --prompt or --input-file%s\n",
                pids != NULL ? "" : "; this model has none");
        return -1;
    }
    if (pids != NULL) {
        int32_t *ids = NULL;
        int n = llm_parse_ids(pids, m->cfg.vocab_size, &ids);
        if (n <= 0 || inputs_add(in, ids, n) != 0) {
            free(ids);
            fprintf(stderr, "error: --prompt-ids must be a comma-separated list of ids below %d\n", m->cfg.vocab_size);
            return -1;
        }
        return 0;
    }
    if (m->tok == NULL) {
        fprintf(stderr, "error: %s carries no tokenizer; give one with --tokenizer\n", m->path);
        return -1;
    }
    if (prompt != NULL)
        return encode(m->tok, query, prompt, strlen(prompt), in);
    FILE *f = fopen(file, "r");
    if (f == NULL) {
        fprintf(stderr, "error: cannot open %s\n", file);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        if (len > 0)
            rc = encode(m->tok, query, line, (size_t)len, in);
    }
    free(line);
    fclose(f);
    if (rc != 0)
        fprintf(stderr, "error: out of memory reading %s\n", file);
    return rc;
}

typedef struct {
    float **vec;   /* [n] each n_embd floats, once done */
    int     n_embd, done, failed;
} results;

static void on_output(void *ctx, const llm_sched_output *o)
{
    results *r = ctx;
    if (o->finish == LLM_SCHED_FINISH_NONE)
        return;
    r->done++;
    if (o->embedding == NULL || (r->vec[o->id] = malloc((size_t)r->n_embd * sizeof(float))) == NULL) {
        r->failed++;
        return;
    }
    memcpy(r->vec[o->id], o->embedding, (size_t)r->n_embd * sizeof(float));
}

/* Input i as an embedding request of the scheduler (id i). 0, or -1 with the reason printed. */
static int submit(llm_sched *s, const inputs *in, int i, int pooling)
{
    llm_sched_request q = { 0 };
    q.id = (uint64_t)i;
    q.prompt = in->ids[i];
    q.n_prompt = in->n_ids[i];
    llm_sampling_defaults(&q.sampling);
    q.max_tokens = 1;
    q.embed = pooling;
    llm_err err = { { 0 } };
    if (llm_sched_submit(s, &q, &err) != 0) {
        fprintf(stderr, "error: input %d: %s\n", i, err.msg);
        return -1;
    }
    return 0;
}

int cli_embed(const llm_args *a)
{
    static const char *const known[] = { "model=", "tokenizer=", "prompt=", "prompt-ids=", "input-file=",
                                         "pooling=", "no-normalize", "backend=", "device=", "threads=",
                                         "max-batch-size=", "max-batched-tokens=", "kv-blocks=", "ctx-size=",
                                         "kv-cache-dtype=", "gpu-memory-fraction=", "kernel-tune=",
                                         "kernel-tune-file=", "warmup", "lora=", "lora-scale=", "query=", NULL };
    if (llm_args_check(a, known) != 0)
        return 2;
    const char *model_path = llm_arg_str(a, "model");
    if (model_path == NULL) {
        fprintf(stderr, "error: embed needs --model PATH\n");
        return 2;
    }
    llm_err err = { { 0 } };
    llm_backend_opts bo;
    memset(&bo, 0, sizeof(bo));
    llm_model *m = llm_model_load(model_path, llm_arg_str(a, "tokenizer"), &err);
    if (m == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    if (llm_lora_opts(a, m) != 0) {
        llm_model_free(m);
        return 1;
    }
    int rc = 1, pooling = llm_pooling_opt(a, m), rank = llm_arg_str(a, "query") != NULL;
    if (pooling < 0) {
        llm_model_free(m);
        return 2;
    }
    if (rank) /* the head reads [CLS]'s hidden state (ModernBERT's: its own pooling's) */
        pooling = llm_model_rank_pool(m) == LLM_POOL_MEAN ? LLM_SCHED_EMBED_MEAN : LLM_SCHED_EMBED_CLS;
    inputs in = { 0 };
    results res = { 0 };
    llm_backend *be = NULL;
    llm_sched *s = NULL;
    if (llm_context_opts(a, m, &bo) != 0 || read_inputs(a, m, &in) != 0)
        goto out;
    if (in.n == 0) {
        fprintf(stderr, "error: no input\n");
        goto out;
    }
    long total = 0;
    int longest = 0;
    for (int i = 0; i < in.n; i++) {
        total += in.n_ids[i];
        longest = in.n_ids[i] > longest ? in.n_ids[i] : longest;
    }
    llm_sched_config sc = { 0 };
    sc.max_batch_size = (int)llm_arg_long(a, "max-batch-size", 32, 1, 4096);
    sc.max_batched_tokens = (int)llm_arg_long(a, "max-batched-tokens", 2048, 1, 1 << 20);
    llm_encoder_step_default(a, m, &sc);
    sc.on_output = on_output;
    sc.cb_ctx = &res;
    bo.threads = (int)llm_arg_long(a, "threads", 0, 0, 1024);
    bo.block_size = 16;
    bo.device = (int)llm_arg_long(a, "device", 0, 0, 64);
    bo.gpu_memory_fraction = (float)llm_arg_double(a, "gpu-memory-fraction", 0.0, 0.0, 1.0);
    /* room for the batch's longest inputs at once (CUDA: 0 leaves the pool to the backend) */
    long blocks = ((long)longest + 1 + bo.block_size - 1) / bo.block_size * sc.max_batch_size;
    bo.kv_blocks = (int)llm_arg_long(a, "kv-blocks", blocks < (1 << 20) ? blocks : (1 << 20), 0, 1 << 24);
    if (llm_kernel_tune_opts(a, &bo) != 0)
        goto out;
    bo.tune_max_batch = sc.max_batched_tokens;
    const char *bname = llm_arg_str(a, "backend") != NULL ? llm_arg_str(a, "backend") : "cpu";
    if (llm_backend_prepare(bname, m, &bo, &err) == 0)
        be = llm_backend_create(bname, m, &bo, &err);
    if (be == NULL || (s = llm_sched_create(be, &sc, &err)) == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto out;
    }
    res.n_embd = m->cfg.dim;
    if ((res.vec = calloc((size_t)in.n, sizeof(*res.vec))) == NULL)
        goto out;
    if (llm_arg_flag(a, "warmup")) { /* the first input once, off the clock: weights paged in, scratch grown */
        if (submit(s, &in, 0, pooling) != 0)
            goto out;
        while (res.done < 1 && llm_sched_step(s) >= 0)
            ;
        free(res.vec[0]);
        res.vec[0] = NULL;
        res.done = res.failed = 0;
    }
    double t0 = llm_now_sec();
    for (int i = 0; i < in.n; i++)
        if (submit(s, &in, i, pooling) != 0)
            goto out;
    while (res.done < in.n) {
        if (llm_sched_step(s) < 0) {
            fprintf(stderr, "error: %s\n", llm_sched_last_error(s));
            goto out;
        }
    }
    double dt = llm_now_sec() - t0;
    if (res.failed > 0) {
        fprintf(stderr, "error: %d inputs gave no embedding\n", res.failed);
        goto out;
    }
    int normalize = !llm_arg_flag(a, "no-normalize") && !rank;
    for (int i = 0; i < in.n; i++) {
        const float *v = res.vec[i];
        if (rank) {
            float sc[LLM_MODEL_MAX_CLS];
            llm_model_rank_apply(m, v, sc);
            for (int k = 0; k < m->n_cls; k++)
                printf("%s%.9g", k ? "," : "[", (double)sc[k]);
            puts("]");
            continue;
        }
        double ss = 0.0;
        for (int k = 0; k < res.n_embd; k++)
            ss += (double)v[k] * v[k];
        float sc_ = normalize && ss > 0.0 ? (float)(1.0 / sqrt(ss)) : 1.0f;
        putchar('[');
        for (int k = 0; k < res.n_embd; k++)
            printf("%s%.9g", k ? "," : "", (double)(v[k] * sc_));
        puts("]");
    }
    fprintf(stderr, "%s %d inputs (%ld tokens, %s pooling, %d floats each) in %.3f s: %.1f inputs/s, "
            "%.0f tokens/s\n", rank ? "scored" : "embedded", in.n, total,
            rank ? "rank" : pooling == LLM_SCHED_EMBED_MEAN ? "mean" : pooling == LLM_SCHED_EMBED_CLS ? "cls" : "last",
            rank ? m->n_cls : res.n_embd, dt, in.n / dt, (double)total / dt);
    rc = 0;
out:
    for (int i = 0; res.vec != NULL && i < in.n; i++)
        free(res.vec[i]);
    free(res.vec);
    llm_sched_destroy(s);
    llm_backend_free(be);
    inputs_free(&in);
    llm_model_free(m);
    return rc;
}
