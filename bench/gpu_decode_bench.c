/* Drives a backend directly (no scheduler) to time the GPU paths:
 *   gpu_decode_bench --model PATH [--backend cuda|cpu] [--batches 1,8,32,128,256] [--prompt 128]
 *                    [--steps 32] [--prefill 1x2048,8x512] [--argmax 1] [--sample 1]
 * Prints the load time, prefill tokens/s per shape (N sequences x L tokens in one step, logits of each
 * sequence's last token), and for each batch size B: B sequences prefilled with --prompt tokens, then
 * --steps decode steps of B tokens (by default the logits of all B copied to a pageable host buffer, as the
 * engine's plain forward returns them: 65 MB a step at batch 128 with Llama 3's vocabulary; with --argmax 1
 * only each row's argmax id and logprob come back, through the backend's forward_device, as for plain
 * greedy requests in the server and as the peer keeps its argmax on the device; with --sample 1 every row is sampled on the
 * device instead, temperature 0.8 + top-p 0.95 + 5 top logprobs, as a sampled request runs); median time per step = time per output token, and B / that = tokens/s. The bandwidth floor
 * is the model's weight bytes read once per step at 4.2 TB/s (H200; a mixture of experts: the experts a step
 * of that many tokens chooses under uniform routing, step_floor_ms). Figures, never pass/fail. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "backend_cuda_loader.h"
#include "model.h"
#include "model_tp.h"

#define BS 16

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return def;
}

/* The bandwidth floor of a decode step of B tokens: the weight bytes it reads at 4.2 TB/s. A dense model
 * reads all of them; a mixture of experts its other weights and, per layer, the experts its tokens chose:
 * E (1 - (1 - k/E)^B) of them on average if the router spread tokens uniformly (a model of the routing, not
 * a measurement: a real router's favourites make it fewer). */
static double step_floor_ms(const llm_model *m, const llm_backend *be, int B)
{
    const llm_config *c = &m->cfg;
    /* the bytes the backend holds (a Q4_K file's matrices take 5 bits a weight on the device, not the loaded
     * Q8_0 copy's 8.5); the experts' share scaled alike */
    double wb = (double)(be->weight_bytes ? be->weight_bytes : m->weight_bytes), held = wb / (double)m->weight_bytes;
    if (c->n_expert > 0) {
        double exp_bytes = 0.0;
        for (int l = 0; l < c->n_layers; l++)
            for (int i = 0; i < 3 * c->n_expert; i++) {
                const llm_tensor *t = &m->layers[l].experts[i];
                exp_bytes += (double)llm_dtype_row_bytes(t->type, (uint64_t)t->ne[0]) * (double)t->ne[1];
            }
        double chosen = c->n_expert * (1.0 - pow(1.0 - (double)c->n_expert_used / c->n_expert, B));
        wb -= held * exp_bytes * (1.0 - chosen / c->n_expert);
    }
    return wb / 4.2e12 * 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    llm_backend *be;
    int V, bpseq;            /* blocks per sequence slot */
    int32_t *tables;         /* [max_seqs][bpseq] */
    llm_seq_view *views;
    int32_t *tok, *pos, *seq;
    uint8_t *want;
    float *logits;
    int cap;
    int argmax;              /* decode through be->forward_device (ids only, as greedy requests run) */
    int sample;              /* ... with every row sampled on the device (LLM_ROW_SAMPLE) */
    llm_device_out am;
    llm_sampling_row *rows;
    int draws;
} bench;

/* One step: sequences s0..s0+ns-1, each with `len` tokens starting at position p0; logits of the last
 * token of each (all of them when len == 1). */
static int step(bench *b, int s0, int ns, int p0, int len, llm_err *err)
{
    int n = ns * len;
    if (n > b->cap) {
        llm_seterr(err, "bench: step of %d tokens over capacity %d", n, b->cap);
        return -1;
    }
    for (int s = 0; s < ns; s++)
        for (int i = 0; i < len; i++) {
            int k = s * len + i;
            b->tok[k] = (int32_t)((1000003u * (unsigned)(s0 + s) + 7919u * (unsigned)(p0 + i)) % (unsigned)b->V);
            b->pos[k] = p0 + i;
            b->seq[k] = s0 + s;
            b->want[k] = i == len - 1;
        }
    llm_batch bt = { n, b->tok, b->pos, b->seq, b->want, s0 + ns, b->views };
    if (b->sample && len == 1) {
        for (int k = 0; k < n; k++) {
            llm_sampling_row *r = &b->rows[k];
            memset(r, 0, sizeof(*r));
            r->p.temperature = 0.8f;
            r->p.top_p = 0.95f;
            r->p.min_p = 0.0f;
            r->p.repetition_penalty = 1.0f;
            r->p.n_logprobs = 5;
            r->row = k;
            r->u = (double)((b->draws++ * 2654435761u) % 1000003u) / 1000003.0;
        }
        b->am.n_sample = n;
    }
    if ((b->argmax || b->sample) && len == 1)
        return b->be->forward_device(b->be, &bt, &b->am, b->logits, err);
    return b->be->ops->forward(b->be, &bt, b->logits, err);
}

int main(int argc, char **argv)
{
    const char *path = arg(argc, argv, "--model", NULL), *bname = arg(argc, argv, "--backend", "cuda");
    const char *batches = arg(argc, argv, "--batches", "1,8,32,128,256");
    const char *prefills = arg(argc, argv, "--prefill", "1x2048,8x512");
    int prompt = atoi(arg(argc, argv, "--prompt", "128")), steps = atoi(arg(argc, argv, "--steps", "32"));
    int argmax = atoi(arg(argc, argv, "--argmax", "0")), sample = atoi(arg(argc, argv, "--sample", "0"));
    int tp = atoi(arg(argc, argv, "--tp", "1")), ep = atoi(arg(argc, argv, "--ep", "0"));
    if (path == NULL || prompt < 1 || steps < 1 || tp < 1 || tp > LLM_TP_MAX) {
        fprintf(stderr, "usage: gpu_decode_bench --model PATH [--backend cuda|cpu] [--batches 1,8,32,128,256] "
                        "[--prompt 128] [--steps 32] [--prefill 1x2048,8x512] [--argmax 1] [--sample 1] "
                        "[--tp N (1-%d: split over N GPUs) [--ep 1 (experts dealt out whole)]]\n", LLM_TP_MAX);
        return 2;
    }
    int bl[32], nb = 0, max_b = 1, pn[16], pl[16], np = 0, max_tok = 1, max_len = prompt + steps + 8;
    for (const char *s = batches; *s && nb < 32; s = strchr(s, ',') ? strchr(s, ',') + 1 : s + strlen(s)) {
        bl[nb] = atoi(s);
        if (bl[nb] > 0) {
            max_b = bl[nb] > max_b ? bl[nb] : max_b;
            nb++;
        }
    }
    for (const char *s = prefills; *s && np < 16; s = strchr(s, ',') ? strchr(s, ',') + 1 : s + strlen(s))
        if (sscanf(s, "%dx%d", &pn[np], &pl[np]) == 2 && pn[np] > 0 && pl[np] > 0) {
            max_b = pn[np] > max_b ? pn[np] : max_b;
            max_len = pl[np] > max_len ? pl[np] : max_len;
            max_tok = pn[np] * pl[np] > max_tok ? pn[np] * pl[np] : max_tok;
            np++;
        }
    int chunk_seqs = 4096 / prompt > 0 ? 4096 / prompt : 1; /* decode prompts go in steps of ~4096 tokens */
    if (chunk_seqs * prompt > max_tok)
        max_tok = chunk_seqs * prompt;
    if (max_b > max_tok)
        max_tok = max_b;

    llm_err err = { { 0 } };
    double t0 = now();
    llm_model *m = llm_model_load(path, NULL, &err);
    if (m == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    if (max_len > m->cfg.seq_len) {
        fprintf(stderr, "error: sequences of %d tokens exceed the context of %d\n", max_len, m->cfg.seq_len);
        return 1;
    }
    bench b = { 0 };
    b.V = m->cfg.vocab_size;
    /* Block tables: the first max_pn sequences hold prefill shapes (long), the rest decode only (short). */
    int max_pn = 0, dec_blocks = (prompt + steps + 8 + BS - 1) / BS;
    for (int i = 0; i < np; i++)
        max_pn = pn[i] > max_pn ? pn[i] : max_pn;
    b.bpseq = (max_len + BS - 1) / BS;
    llm_backend_opts o = { 0 };
    o.block_size = BS;
    o.kv_blocks = max_pn * b.bpseq + (max_b - max_pn) * dec_blocks;
    o.tune_max_batch = max_b; /* the CUDA backend's kernel tuning: up to the largest decode batch run here */
    o.tp_size = tp;
    o.tp_ep = ep;
    if (strcmp(bname, "cuda") == 0 && tp == 1) {
        const llm_backend_ops *ops = llm_cuda_ops_load(&err);
        if (ops != NULL && (b.be = calloc(1, sizeof(*b.be))) != NULL) {
            b.be->ops = ops;
            b.be->model = m;
            b.be->opts = o;
            if (ops->init(b.be, &err) != 0) {
                free(b.be);
                b.be = NULL;
            }
        }
    } else {
        b.be = llm_backend_create(bname, m, &o, &err);
    }
    if (b.be == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    double t_load = now() - t0;
    b.cap = max_tok;
    b.tables = malloc((size_t)max_b * b.bpseq * sizeof(int32_t));
    b.views = malloc((size_t)max_b * sizeof(llm_seq_view));
    b.tok = malloc((size_t)max_tok * sizeof(int32_t));
    b.pos = malloc((size_t)max_tok * sizeof(int32_t));
    b.seq = malloc((size_t)max_tok * sizeof(int32_t));
    b.want = malloc((size_t)max_tok);
    b.logits = malloc((size_t)max_b * b.V * sizeof(float));
    b.argmax = argmax && b.be != NULL && b.be->forward_device != NULL;
    if (argmax && !b.argmax)
        fprintf(stderr, "bench: this backend has no on-device argmax; --argmax ignored\n");
    b.sample = sample && b.be != NULL && b.be->device_sampling;
    if (sample && !b.sample)
        fprintf(stderr, "bench: this backend does not sample on the device; --sample ignored\n");
    b.argmax &= !b.sample;
    uint8_t *am_only = malloc((size_t)max_tok);
    if (am_only != NULL)
        memset(am_only, b.sample ? LLM_ROW_SAMPLE : LLM_ROW_ARGMAX, (size_t)max_tok);
    b.rows = calloc((size_t)max_tok, sizeof(llm_sampling_row));
    b.am.sample = b.rows;
    b.am.top = malloc((size_t)max_tok * LLM_SAMPLING_MAX_LOGPROBS * sizeof(llm_token_logprob));
    b.am.n_top = malloc((size_t)max_tok * sizeof(int32_t));
    b.am.mode = am_only;
    b.am.ids = malloc((size_t)max_tok * sizeof(int32_t));
    b.am.logprob = malloc((size_t)max_tok * sizeof(float));
    if (!b.tables || !b.views || !b.tok || !b.pos || !b.seq || !b.want || !b.logits || !am_only || !b.am.ids ||
        !b.am.logprob || !b.rows || !b.am.top || !b.am.n_top) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    for (int s = 0, next = 0; s < max_b; s++) {
        int nblk = s < max_pn ? b.bpseq : dec_blocks;
        for (int k = 0; k < nblk; k++)
            b.tables[s * b.bpseq + k] = next++;
        b.views[s] = (llm_seq_view){ b.tables + s * b.bpseq, nblk, NULL };
    }
    double wb = (double)(b.be->weight_bytes ? b.be->weight_bytes : m->weight_bytes), floor_ms = step_floor_ms(m, b.be, 1);
    /* (split over GPUs: the weights rank 0 holds, its share; every GPU reads its own at once, so the floor is
     * one share's) */
    char split[64] = "";
    if (tp > 1)
        snprintf(split, sizeof(split), " split over %d GPUs%s, each holding", tp, ep ? " (experts whole)" : "");
    printf("model: %s, %s,%s %.2f GB of weights; load %.2f s (+ kernel tuning %.2f s); bandwidth floor per step "
           "%.3f ms (%.0f tok/s at batch 1); decode steps return %s\n", path, b.be->ops->name, split, wb / 1e9,
           t_load - b.be->tune_s, b.be->tune_s, floor_ms, 1e3 / floor_ms,
           b.sample ? "each row sampled on the device" : b.argmax ? "each row's argmax (on the device)"
                                                                : "every row's logits (copied to the host)");

    for (int i = 0; i < np; i++) {
        double best = 1e30;
        for (int rep = 0; rep < 3; rep++) { /* first run warms up (cuBLAS heuristics, buffers) */
            double t = now();
            if (step(&b, 0, pn[i], 0, pl[i], &err) != 0) {
                fprintf(stderr, "error: prefill: %s\n", err.msg);
                return 1;
            }
            t = now() - t;
            if (rep > 0 && t < best)
                best = t;
        }
        printf("prefill %dx%d: %.2f ms, %.0f tokens/s\n", pn[i], pl[i], best * 1e3, pn[i] * pl[i] / best);
    }
    double *ts = malloc((size_t)steps * sizeof(double));
    for (int i = 0; i < nb; i++) {
        int B = bl[i];
        for (int s0 = 0; s0 < B; s0 += chunk_seqs) {
            int ns = B - s0 < chunk_seqs ? B - s0 : chunk_seqs;
            if (step(&b, s0, ns, 0, prompt, &err) != 0) {
                fprintf(stderr, "error: prompt prefill: %s\n", err.msg);
                return 1;
            }
        }
        for (int w = 0; w < 3; w++) /* warm-up steps */
            if (step(&b, 0, B, prompt + w, 1, &err) != 0) {
                fprintf(stderr, "error: decode: %s\n", err.msg);
                return 1;
            }
        for (int k = 0; k < steps; k++) {
            double t = now();
            if (step(&b, 0, B, prompt + 3 + k, 1, &err) != 0) {
                fprintf(stderr, "error: decode: %s\n", err.msg);
                return 1;
            }
            ts[k] = now() - t;
        }
        qsort(ts, (size_t)steps, sizeof(double), cmp_d);
        double med = ts[steps / 2];
        double fl = step_floor_ms(m, b.be, B);
        printf("decode batch %3d (context %d..%d): %.3f ms/step, %.0f tokens/s (floor %.3f ms: %.0f%% of it)\n", B,
               prompt + 3, prompt + 3 + steps, med * 1e3, B / med, fl, 100.0 * fl / (med * 1e3));
    }
    free(ts);
    free(b.tables); free(b.views); free(b.tok); free(b.pos); free(b.seq); free(b.want); free(b.logits);
    free(am_only); free(b.am.ids); free(b.am.logprob); free(b.rows); free(b.am.top); free(b.am.n_top);
    llm_backend_free(b.be);
    llm_model_free(m);
    return 0;
}
