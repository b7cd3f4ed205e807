/* CUDA vs CPU backend parity on a small real model (stories260K), run on the
 * GPU machine by tests/gpu/run_parity.sh:
 *  1. greedy: --gen tokens from the same prompt on each backend, identical ids;
 *  2. logits at every position of a --positions token text (the CPU's greedy
 *     continuation), prefilled in chunks of --chunk (cuBLAS path), all rows;
 *  3. a mixed batch: 4 sequences' prompts in one step, then 16 steps decoding
 *     all 4 together (GEMV path), with scattered block tables;
 *  4. (--graph-cycles N) decode steps of 1, 3, 6, 13 and 20 of 20 sequences
 *     (the CUDA backend's graph buckets 1, 4, 8, 16, 32), N rounds, whose
 *     longest sequences cross 64, 128 and 256 positions (attention split
 *     classes) and KV block edges; --only-graph 1 skips parts 2 and 3. Where
 *     the backend offers forward_device, every other row asks for the greedy
 *     id only: it must equal the CPU's argmax, its logprob the CPU's
 *     log-softmax, and its logits row must stay unwritten.
 *  (--tp N: the CUDA backend splits the model over N devices, tensor parallelism, for every part but 5.)
 *  5. (--window-pool N) a model with sliding-window layers, their KV in a
 *     window pool of N blocks (llm_backend_opts.swa_blocks) on a second CPU
 *     and CUDA backend: window_part below.
 * Prints max |diff| and top-1 agreement per part; exit 0 when all are within
 * --max-diff / --min-top1 and the greedy ids match. --vocab N: both backends
 * run the model with only the first N rows of its classifier (and embedding):
 * under the CPU emulation of CUDA a one-token GEMV over Llama 3's 128,256 rows
 * takes ~3 s, and the tiny presets with that vocabulary (tiny-gemma3, ...) are
 * otherwise the same model. --attn-scale S: attention scores scaled by S
 * instead of the model's (llm_config.attn_scale, as Gemma's
 * query_pre_attn_scalar sets it), on both backends. --cpu-model PATH: the
 * CPU backend runs that file (the same model in other weight types, e.g.
 * the dequantised F32 copy of a quantised --model; or the same file, which
 * the CPU then prepares as `generate` does: K-quants packed where it can). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_util.h"
#include "backend_cuda_loader.h"
#include "model.h"

#define BS 16

static int argmax(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

typedef struct {
    double max_diff;
    long   rows, top1_same;
} cmp_t;

static void compare(cmp_t *c, const float *a, const float *b, int rows, int vocab)
{
    for (int r = 0; r < rows; r++) {
        const float *x = a + (size_t)r * vocab, *y = b + (size_t)r * vocab;
        for (int i = 0; i < vocab; i++) {
            double d = fabs((double)x[i] - (double)y[i]);
            if (!(d <= c->max_diff)) /* NaN counts as infinitely far */
                c->max_diff = isnan(d) ? INFINITY : d;
        }
        c->top1_same += argmax(x, vocab) == argmax(y, vocab);
        c->rows++;
    }
}

static llm_backend *make_cuda(const llm_model *m, const llm_backend_opts *o, llm_err *err)
{
    const llm_backend_ops *ops = llm_cuda_ops_load(err);
    if (ops == NULL)
        return NULL;
    llm_backend *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->ops = ops;
    b->model = m;
    b->opts = *o;
    if (ops->init(b, err) != 0) {
        free(b);
        return NULL;
    }
    return b;
}

static int fwd(llm_backend *b, int n, const int32_t *tok, const int32_t *pos, const int32_t *seq,
               const uint8_t *want, int n_seqs, const llm_seq_view *v, float *logits)
{
    llm_err err = { { 0 } };
    llm_batch bt = { n, tok, pos, seq, want, n_seqs, v };
    if (b->ops->forward(b, &bt, logits, &err) != 0) {
        fprintf(stderr, "%s forward failed: %s\n", b->ops->name, err.msg);
        return -1;
    }
    return 0;
}

/* Log-softmax of row x at id, as engine/sampler.c computes a logprob. */
static double log_softmax_at(const float *x, int n, int id)
{
    float m = x[argmax(x, n)];
    double z = 0.0;
    for (int i = 0; i < n; i++)
        z += expf(x[i] - m);
    return (double)x[id] - ((double)m + log(z));
}

/* Greedy decode of `gen` tokens after the prompt; ids into out (prompt first). */
static int greedy(llm_backend *b, const llm_seq_view *v, const int32_t *prompt, int np, int gen, int vocab,
                  int32_t *out)
{
    float *lg = malloc((size_t)vocab * sizeof(float));
    int32_t *pos = malloc((size_t)np * sizeof(int32_t)), *seq = calloc((size_t)np, sizeof(int32_t));
    uint8_t *want = calloc((size_t)np, 1);
    int rc = -1;
    if (lg == NULL || pos == NULL || seq == NULL || want == NULL)
        goto out;
    memcpy(out, prompt, (size_t)np * sizeof(int32_t));
    for (int i = 0; i < np; i++)
        pos[i] = i;
    want[np - 1] = 1;
    if (fwd(b, np, prompt, pos, seq, want, 1, v, lg) != 0)
        goto out;
    for (int g = 0; g < gen; g++) {
        int32_t next = argmax(lg, vocab), p = np + g, s0 = 0;
        uint8_t w = 1;
        out[np + g] = next;
        if (g + 1 < gen && fwd(b, 1, &next, &p, &s0, &w, 1, v, lg) != 0)
            goto out;
    }
    rc = 0;
out:
    free(lg); free(pos); free(seq); free(want);
    return rc;
}

/* Part 4; 0 when within the bounds (or skipped: too short a context), 1 when not, -1 on error. */
static int graph_part(llm_backend *cpu, llm_backend *gpu, const int32_t *text, int text_len, int pool, int cycles,
                      int V, double max_diff, double min_top1, float *lc, float *lgp)
{
    enum { NS = 20, NSUB = 5 };
    static const int sub_n[NSUB] = { 1, 3, 6, 13, 20 };
    static const int subs[NSUB][NS] = { { 2 }, { 1, 3, 4 }, { 0, 5, 6, 7, 8, 9 },
                                        { 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 },
                                        { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19 } };
    int len[NS], cur[NS], nb[NS], total_blocks = 0, total_tok = 0;
    for (int s = 0; s < NS; s++) {
        len[s] = s == 0 ? 250 : s == 1 ? 120 : s == 2 ? 60 : 5 + (s * 7) % 20;
        cur[s] = len[s];
        nb[s] = (len[s] + 3 * cycles + BS) / BS; /* a sequence is in at most 3 of the 5 subsets */
        total_blocks += nb[s];
        total_tok += len[s];
    }
    if (len[0] + 3 * cycles + 3 * NS >= text_len || total_blocks > pool) {
        printf("graph decode: skipped (context or KV pool too small)\n");
        return 0;
    }
    int32_t *tc = malloc((size_t)total_blocks * sizeof(int32_t)), *tg = malloc((size_t)total_blocks * sizeof(int32_t));
    int32_t *tok = malloc((size_t)total_tok * sizeof(int32_t)), *pos = malloc((size_t)total_tok * sizeof(int32_t));
    int32_t *seq = malloc((size_t)total_tok * sizeof(int32_t));
    uint8_t *want = calloc((size_t)total_tok, 1);
    llm_seq_view vc[NS], vg[NS];
    int rc = -1;
    if (!tc || !tg || !tok || !pos || !seq || !want)
        goto out;
    /* CPU: blocks in order; GPU: a stride through the pool (coprime with it unless the pool is tiny). */
    for (int s = 0, k = 0; s < NS; s++) {
        vc[s] = (llm_seq_view){ tc + k, nb[s], NULL };
        vg[s] = (llm_seq_view){ tg + k, nb[s], NULL };
        k += nb[s];
    }
    for (int k = 0, stride = pool % 37 != 0 ? 37 : 1; k < total_blocks; k++) {
        tc[k] = k;
        tg[k] = (int32_t)(((long)k * stride) % pool);
    }
    int n = 0;
    for (int s = 0; s < NS; s++)
        for (int i = 0; i < len[s]; i++, n++) {
            pos[n] = i;
            seq[n] = s;
            tok[n] = text[i + 3 * s];
        }
    if (fwd(cpu, n, tok, pos, seq, want, NS, vc, lc) != 0 || fwd(gpu, n, tok, pos, seq, want, NS, vg, lgp) != 0)
        goto out;
    cmp_t c4 = { 0, 0, 0 };
    int steps = 0, max_pos = 0;
    long am_rows = 0, am_same = 0, am_untouched = 0;
    double am_lp_diff = 0.0;
    uint8_t am_only[NS];
    int32_t am_ids[NS];
    float am_lp[NS];
    for (int r = 0; r < cycles; r++)
        for (int u = 0; u < NSUB; u++) {
            int m = sub_n[u];
            for (int j = 0; j < m; j++) {
                int s = subs[u][m - 1 - j]; /* batch order: the subset reversed */
                seq[j] = s;
                pos[j] = cur[s];
                tok[j] = text[cur[s] + 3 * s];
                want[j] = 1;
                max_pos = cur[s] > max_pos ? cur[s] : max_pos;
                cur[s]++;
            }
            if (fwd(cpu, m, tok, pos, seq, want, NS, vc, lc) != 0)
                goto out;
            if (gpu->forward_device == NULL) {
                if (fwd(gpu, m, tok, pos, seq, want, NS, vg, lgp) != 0)
                    goto out;
                compare(&c4, lc, lgp, m, V);
            } else { /* every other row: greedy id only (rows poisoned first: they must stay so) */
                for (int j = 0; j < m; j++)
                    am_only[j] = (uint8_t)((steps + j) % 2 == 0);
                for (size_t k = 0; k < (size_t)m * V; k++)
                    lgp[k] = NAN;
                llm_err err = { { 0 } };
                llm_batch bt = { m, tok, pos, seq, want, NS, vg };
                llm_device_out am = { .mode = am_only, .ids = am_ids, .logprob = am_lp };
                if (gpu->forward_device(gpu, &bt, &am, lgp, &err) != 0) {
                    fprintf(stderr, "%s forward_device failed: %s\n", gpu->ops->name, err.msg);
                    goto out;
                }
                for (int j = 0; j < m; j++) {
                    const float *x = lc + (size_t)j * V, *y = lgp + (size_t)j * V;
                    if (!am_only[j]) {
                        compare(&c4, x, y, 1, V);
                        continue;
                    }
                    int ref = argmax(x, V);
                    double d = fabs((double)am_lp[j] - log_softmax_at(x, V, ref));
                    am_lp_diff = d <= am_lp_diff ? am_lp_diff : (isnan(d) ? INFINITY : d);
                    am_same += am_ids[j] == ref;
                    am_untouched += isnan(y[0]) && isnan(y[V - 1]);
                    am_rows++;
                }
            }
            steps++;
        }
    double t4 = (double)(c4.top1_same + am_same) / (double)(c4.rows + am_rows);
    int bad = !(c4.max_diff <= max_diff && am_lp_diff <= max_diff && t4 >= min_top1 && am_untouched == am_rows);
    printf("graph decode (%d steps of 1/3/6/13/20 of %d sequences, positions up to %d): max |diff| %.3g, "
           "greedy ids (top-1) %ld of %ld identical%s\n", steps, NS, max_pos, c4.max_diff, c4.top1_same + am_same,
           c4.rows + am_rows, bad ? "  <-- FAIL" : "");
    if (am_rows > 0)
        printf("  on-device argmax rows: %ld, ids identical %ld, logprob max |diff| %.3g, logits rows left "
               "unwritten %ld\n", am_rows, am_same, am_lp_diff, am_untouched);
    rc = bad;
out:
    free(tc); free(tg); free(tok); free(pos); free(seq); free(want);
    return rc;
}

/* Part 5: 3 sequences prefilled in chunks of `chunk` side by side, then decoded (the CUDA backend's graphs once
 * every sequence decodes), to several windows past the window. Their window tables come from a pool of wblocks
 * blocks: before each step, the blocks wholly before a sequence's earliest window start in the step are given
 * back, then the step's new blocks are taken, the last given back first, so that a sequence's stale entries
 * name blocks another sequence writes in that very step. The CUDA backend with the window pool against the CPU
 * backend with it on the same tables (max_diff, min_top1), and against the CUDA backend without it (the
 * same arithmetic on other addresses: identical logits; both without kernel tuning, which could choose other
 * product paths for each). 0 within the bounds, 1 not, -1 on an error. */
static int window_part(const llm_model *m, const llm_model *mc, const llm_backend_opts *o0, const int32_t *text,
                       int text_len, int wblocks, int chunk, int V, double max_diff, double min_top1)
{
    enum { WS = 3 };
    const int W = m->cfg.swa_window, per_seq = (m->cfg.seq_len + BS - 1) / BS;
    const int U = W > BS ? W : BS; /* lengths in windows, or in blocks where a window is shorter */
    int plen[WS], len[WS], first[WS] = { 0, 0, 1 }; /* (the third sequence starts a step later) */
    for (int s = 0; s < WS; s++) {
        plen[s] = (4 - s) * U + 5 - 2 * s;
        len[s] = plen[s] + U + 3 + 4 * s;
        if (len[s] + 3 * s > text_len) {
            printf("window pool: skipped (context too short)\n");
            return 0;
        }
    }
    llm_backend_opts o = *o0, op = *o0;
    o.swa_blocks = wblocks;
    o.kernel_tune = op.kernel_tune = -1;
    llm_err err = { { 0 } };
    llm_backend *cw = llm_backend_create("cpu", mc, &o, &err), *gw = cw != NULL ? make_cuda(m, &o, &err) : NULL;
    llm_backend *gpu = gw != NULL ? make_cuda(m, &op, &err) : NULL;
    size_t nt = (size_t)WS * (size_t)chunk, rows = nt * (size_t)V; /* tokens in a step at most, their logits */
    int32_t *tok = malloc(nt * sizeof(int32_t)), *pos = malloc(nt * sizeof(int32_t));
    int32_t *seq = malloc(nt * sizeof(int32_t)), *mtab = malloc((size_t)WS * per_seq * sizeof(int32_t));
    int32_t *wtab = calloc((size_t)WS * per_seq, sizeof(int32_t));
    int32_t *freel = malloc((size_t)wblocks * sizeof(int32_t)), *owner = malloc((size_t)wblocks * sizeof(int32_t));
    uint8_t *want = malloc(nt);
    float *lc = malloc(rows * sizeof(float)), *lw = malloc(rows * sizeof(float)), *lg = malloc(rows * sizeof(float));
    int rc = -1;
    if (cw == NULL || gw == NULL || gpu == NULL) {
        fprintf(stderr, "window pool: %s\n", err.msg);
        goto out;
    }
    if (!tok || !pos || !seq || !mtab || !wtab || !freel || !owner || !want || !lc || !lw || !lg)
        goto out;
    if (cw->opts.swa_blocks != wblocks || gw->opts.swa_blocks != wblocks) {
        printf("window pool: asked for %d blocks, the CPU backend has %d, the CUDA one %d  <-- FAIL\n", wblocks,
               cw->opts.swa_blocks, gw->opts.swa_blocks);
        rc = 1;
        goto out;
    }
    /* main tables interleaved across the sequences; the window pool's free blocks in a stride through it */
    for (int s = 0; s < WS; s++)
        for (int k = 0; k < per_seq; k++)
            mtab[s * per_seq + k] = k * WS + (WS - 1 - s);
    int nfree = 0;
    for (int i = 0, stride = wblocks % 5 != 0 ? 5 : 1; i < wblocks; i++) {
        freel[nfree++] = (int32_t)((long)i * stride % wblocks);
        owner[i] = -1;
    }
    llm_seq_view vw[WS], vm[WS];
    for (int s = 0; s < WS; s++) {
        vw[s] = (llm_seq_view){ mtab + s * per_seq, per_seq, wtab + s * per_seq };
        vm[s] = (llm_seq_view){ mtab + s * per_seq, per_seq, NULL };
    }
    int cur[WS] = { 0 }, held[WS] = { 0 }, got[WS] = { 0 }, lo[WS], hi[WS];
    int steps = 0, dsteps = 0, max_pos = 0;
    long taken_stale = 0;
    cmp_t c_cpu = { 0, 0, 0 }, c_gpu = { 0, 0, 0 };
    for (;; steps++) {
        int n = 0, decode = 1;
        for (int s = WS - 1; s >= 0; s--) { /* batch order: the sequences reversed */
            lo[s] = -1;
            if (steps < first[s] || cur[s] >= len[s])
                continue;
            int k = cur[s] < plen[s] ? (plen[s] - cur[s] < chunk ? plen[s] - cur[s] : chunk) : 1;
            decode &= k == 1 && cur[s] >= plen[s];
            lo[s] = cur[s];
            hi[s] = cur[s] + k - 1;
            for (int i = 0; i < k; i++, n++) {
                tok[n] = text[cur[s] + i + 3 * s];
                pos[n] = cur[s] + i;
                seq[n] = s;
                want[n] = 1;
            }
            max_pos = hi[s] > max_pos ? hi[s] : max_pos;
        }
        if (n == 0)
            break;
        /* give back what no window of this step reaches, then take the blocks it writes */
        for (int s = 0; s < WS; s++)
            for (; lo[s] >= 0 && (held[s] + 1) * BS <= lo[s] - W + 1; held[s]++)
                freel[nfree++] = wtab[s * per_seq + held[s]];
        for (int s = 0; s < WS; s++)
            for (; lo[s] >= 0 && got[s] <= hi[s] / BS; got[s]++) {
                if (nfree == 0) {
                    fprintf(stderr, "window pool: %d blocks are too few for step %d\n", wblocks, steps);
                    goto out;
                }
                int32_t id = freel[--nfree];
                taken_stale += owner[id] >= 0 && owner[id] != s; /* still named by that sequence's table */
                owner[id] = s;
                wtab[s * per_seq + got[s]] = id;
            }
        if (fwd(cw, n, tok, pos, seq, want, WS, vw, lc) != 0 || fwd(gw, n, tok, pos, seq, want, WS, vw, lw) != 0 ||
            fwd(gpu, n, tok, pos, seq, want, WS, vm, lg) != 0)
            goto out;
        compare(&c_cpu, lc, lw, n, V);
        compare(&c_gpu, lg, lw, n, V);
        dsteps += decode;
        for (int s = 0; s < WS; s++) {
            cur[s] = lo[s] >= 0 ? hi[s] + 1 : cur[s];
            for (; lo[s] >= 0 && cur[s] == len[s] && held[s] < got[s]; held[s]++) /* done: all given back */
                freel[nfree++] = wtab[s * per_seq + held[s]];
        }
    }
    double t = (double)c_cpu.top1_same / (double)c_cpu.rows;
    int bad = !(c_cpu.max_diff <= max_diff && t >= min_top1 && c_gpu.max_diff == 0.0 && taken_stale > 0);
    printf("window pool (%d blocks, window %d; %d sequences, %d steps, %d of them decode only, positions up to %d; "
           "%ld blocks taken while another table still named them): vs the CPU max |diff| %.3g, top-1 %.4f; "
           "vs CUDA without the pool max |diff| %.3g%s\n", wblocks, W, WS, steps, dsteps, max_pos, taken_stale,
           c_cpu.max_diff, t, c_gpu.max_diff, bad ? "  <-- FAIL" : "");
    rc = bad;
out:
    free(tok); free(pos); free(seq); free(mtab); free(wtab); free(freel); free(owner); free(want);
    free(lc); free(lw); free(lg);
    llm_backend_free(gpu);
    llm_backend_free(gw);
    llm_backend_free(cw);
    return rc;
}

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return def;
}

/* A model with the command line's --vocab and --attn-scale applied. */
static llm_model *load(const char *path, int argc, char **argv, llm_err *err)
{
    llm_model *m = llm_model_load(path, NULL, err);
    if (m == NULL)
        return NULL;
    int nv = atoi(arg(argc, argv, "--vocab", "0"));
    if (nv >= 512 && nv < m->cfg.vocab_size) { /* the tensors are views: their first nv rows (prompt ids < 512) */
        llm_config *c = &m->cfg;
        if (m->output.data != NULL && m->output.data != m->tok_embd.data)
            m->output.ne[1] = nv;
        m->tok_embd.ne[1] = nv;
        c->vocab_size = nv;
        c->bos_id = c->bos_id < nv ? c->bos_id : -1;
        c->eos_id = c->eos_id < nv ? c->eos_id : -1;
    }
    if (atof(arg(argc, argv, "--attn-scale", "0")) > 0)
        m->cfg.attn_scale = (float)atof(arg(argc, argv, "--attn-scale", "0"));
    return m;
}

int main(int argc, char **argv)
{
    const char *path = arg(argc, argv, "--model", NULL);
    if (path == NULL) {
        fprintf(stderr, "usage: parity_logits --model PATH [--positions 512] [--gen 200] [--chunk 128] "
                        "[--max-diff 0.01] [--min-top1 0.99] [--mixed 0] [--only-graph 1] [--graph-cycles N] "
                        "[--vocab N] [--attn-scale S] [--cpu-model PATH] [--window-pool N] [--tp N [--ep 1]]\n");
        return 2;
    }
    int P = atoi(arg(argc, argv, "--positions", "512")), gen = atoi(arg(argc, argv, "--gen", "200"));
    int chunk = atoi(arg(argc, argv, "--chunk", "128"));
    double max_diff = atof(arg(argc, argv, "--max-diff", "0.01")), min_top1 = atof(arg(argc, argv, "--min-top1", "0.99"));
    int graph_cycles = atoi(arg(argc, argv, "--graph-cycles", "0")), only_graph = atoi(arg(argc, argv, "--only-graph", "0"));
    int mixed = atoi(arg(argc, argv, "--mixed", "1")), window_pool = atoi(arg(argc, argv, "--window-pool", "0"));
    llm_err err = { { 0 } };
    llm_model *m = load(path, argc, argv, &err);
    if (m == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    /* --cpu-model: the CPU backend runs this file instead (the same model in other weight types: e.g. the
     * dequantised copy of a quantised one, which takes the CPU's int8 activations out of the comparison) */
    const char *cpu_path = arg(argc, argv, "--cpu-model", NULL);
    llm_model *mc = cpu_path != NULL ? load(cpu_path, argc, argv, &err) : m;
    if (mc == NULL || mc->cfg.dim != m->cfg.dim || mc->cfg.n_layers != m->cfg.n_layers ||
        mc->cfg.vocab_size != m->cfg.vocab_size) {
        fprintf(stderr, "error: %s\n", mc == NULL ? err.msg : "--cpu-model is not the same shape as --model");
        if (mc != NULL)
            llm_model_free(mc);
        llm_model_free(m);
        return 1;
    }
    int V = m->cfg.vocab_size, ctx = m->cfg.seq_len;
    if (P > ctx)
        P = ctx;
    if (chunk < 1)
        chunk = 1;
    int per_seq = (ctx + BS - 1) / BS, pool = 4 * per_seq;
    llm_backend_opts o = { 0 };
    o.block_size = BS;
    o.kv_blocks = pool;
    o.kv_dtype = llm_kv_dtype_parse(getenv("LLM_CUDA_KV")); /* the same cache type on both sides */
    if (o.kv_dtype < 0)
        o.kv_dtype = LLM_KV_AUTO;
    /* a --cpu-model of its own is prepared as `generate --backend cpu` prepares it (K-quant matrices packed
     * from their blocks where this CPU has the kernels); --model's, shared with CUDA, stays as loaded */
    llm_backend *cpu = mc == m || llm_backend_prepare("cpu", mc, &o, &err) == 0 ? llm_backend_create("cpu", mc, &o, &err)
                                                                              : NULL;
    /* --tp N: the CUDA side split over N devices (engine/backend_tp.c: N processes, forked before this one
     * touches CUDA; under the emulation CU_EMU_DEVICES=N) */
    llm_backend_opts og = o;
    og.tp_size = atoi(arg(argc, argv, "--tp", "1"));
    og.tp_ep = atoi(arg(argc, argv, "--ep", "0")); /* (--ep 1: experts dealt out whole) */
    llm_backend *gpu = cpu == NULL ? NULL : og.tp_size > 1 ? llm_backend_create("cuda", m, &og, &err)
                                                           : make_cuda(m, &o, &err);
    if (cpu == NULL || gpu == NULL) {
        fprintf(stderr, "error: %s\n", err.msg);
        llm_backend_free(cpu);
        if (mc != m)
            llm_model_free(mc);
        llm_model_free(m);
        return 1;
    }
    int fails = 0;
    /* Tables: the CPU's in order; the GPU's blocks taken backwards from the pool's end (paging exercised). */
    int32_t *tab_c = malloc((size_t)pool * sizeof(int32_t)), *tab_g = malloc((size_t)pool * sizeof(int32_t));
    /* Part 3 reads the text up to position 100 + 16 + 3 * 3: the CPU's greedy run makes at least that much. */
    int P3 = P > 140 ? P : (ctx < 140 ? ctx : 140);
    if (graph_cycles > 0 && P3 < 360) /* part 4 reads the text up to 250 + 3 * cycles + 3 * 20 */
        P3 = ctx < 360 ? ctx : 360;
    int32_t *ids_c = malloc((size_t)(P3 + gen + 8) * sizeof(int32_t)), *ids_g = malloc((size_t)(P3 + gen + 8) * sizeof(int32_t));
    int rows = P > 256 ? P : 256; /* part 3 asks for up to 206 rows */
    float *lc = malloc((size_t)rows * V * sizeof(float)), *lgp = malloc((size_t)rows * V * sizeof(float));
    int32_t *pos = malloc((size_t)rows * sizeof(int32_t)), *seq = calloc((size_t)rows, sizeof(int32_t));
    uint8_t *want = malloc((size_t)rows);
    if (!tab_c || !tab_g || !ids_c || !ids_g || !lc || !lgp || !pos || !seq || !want) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    for (int i = 0; i < pool; i++) {
        tab_c[i] = i;
        tab_g[i] = pool - 1 - i;
    }
    llm_seq_view vc = { tab_c, per_seq, NULL }, vg = { tab_g, per_seq, NULL };

    /* 1. greedy */
    const int32_t prompt[] = { 1, 403, 407, 261, 378 };
    int np = 5;
    if (gen > ctx - np)
        gen = ctx - np;
    int cpu_gen = P3 - np > gen ? P3 - np : gen;
    if (greedy(cpu, &vc, prompt, np, cpu_gen, V, ids_c) != 0 || greedy(gpu, &vg, prompt, np, gen, V, ids_g) != 0)
        return 1;
    int same = 0;
    while (same < gen && ids_c[np + same] == ids_g[np + same])
        same++;
    printf("greedy: %d of %d generated ids identical%s\n", same, gen, same == gen ? "" : "  <-- MISMATCH");
    if (same != gen) {
        printf("  cpu:"); for (int i = same; i < same + 8 && i < gen; i++) printf(" %d", ids_c[np + i]);
        printf("\n  gpu:"); for (int i = same; i < same + 8 && i < gen; i++) printf(" %d", ids_g[np + i]);
        printf("\n");
        fails++;
    }

    if (only_graph)
        goto part4;
    /* 2. logits at every position, chunked prefill */
    for (int b = 0; b < 2; b++) {
        llm_backend *be = b == 0 ? cpu : gpu;
        float *out = b == 0 ? lc : lgp;
        for (int s = 0; s < P; s += chunk) {
            int n = P - s < chunk ? P - s : chunk;
            for (int i = 0; i < n; i++) {
                pos[i] = s + i;
                want[i] = 1;
            }
            if (fwd(be, n, ids_c + s, pos, seq, want, 1, b == 0 ? &vc : &vg, out + (size_t)s * V) != 0)
                return 1;
        }
    }
    cmp_t c2 = { 0, 0, 0 };
    compare(&c2, lc, lgp, P, V);
    double t2 = (double)c2.top1_same / (double)c2.rows;
    printf("logits over %d positions (chunks of %d): max |diff| %.3g, top-1 agreement %.4f%s\n", P, chunk,
           c2.max_diff, t2, c2.max_diff <= max_diff && t2 >= min_top1 ? "" : "  <-- FAIL");
    fails += !(c2.max_diff <= max_diff && t2 >= min_top1);

    /* 3. mixed batch: 4 prompts in one step, then 16 joint decode steps (--mixed 0 skips it: its prompt
     * step runs the GPU's cuBLAS path, whose rounding a tight --max-diff for the GEMV paths would fail) */
    if (!mixed)
        goto part4;
    enum { NS = 4, STEPS = 16 };
    int len[NS] = { 37, 64, 100, 5 };
    for (int s = 0; s < NS; s++)
        if (len[s] + STEPS + 3 * (NS - 1) > P3)
            len[s] = P3 / 2 > STEPS + 3 * NS ? P3 / 2 - STEPS - 3 * NS : 1;
    int32_t *t4c = malloc((size_t)NS * per_seq * sizeof(int32_t)), *t4g = malloc((size_t)NS * per_seq * sizeof(int32_t));
    llm_seq_view v4c[NS], v4g[NS];
    for (int s = 0; s < NS; s++) {
        for (int k = 0; k < per_seq; k++) {
            t4c[s * per_seq + k] = s * per_seq + k;
            t4g[s * per_seq + k] = k * NS + (NS - 1 - s); /* interleaved across sequences */
        }
        v4c[s] = (llm_seq_view){ t4c + s * per_seq, per_seq, NULL };
        v4g[s] = (llm_seq_view){ t4g + s * per_seq, per_seq, NULL };
    }
    int n = 0;
    for (int s = 0; s < NS; s++)
        for (int i = 0; i < len[s]; i++) {
            pos[n] = i;
            seq[n] = s;
            want[n] = 1;
            n++;
        }
    int32_t *tok = malloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++)
        tok[i] = ids_c[pos[i] + 3 * seq[i]]; /* each sequence a different slice of the text */
    cmp_t c3 = { 0, 0, 0 };
    if (fwd(cpu, n, tok, pos, seq, want, NS, v4c, lc) != 0 || fwd(gpu, n, tok, pos, seq, want, NS, v4g, lgp) != 0)
        return 1;
    compare(&c3, lc, lgp, n, V);
    for (int st = 0; st < STEPS; st++) {
        int32_t tk[NS], ps[NS], sq[NS];
        uint8_t w[NS];
        for (int s = 0; s < NS; s++) {
            sq[s] = NS - 1 - s; /* batch order differs from sequence order */
            w[s] = 1;
            ps[s] = len[sq[s]] + st;
            tk[s] = ids_c[ps[s] + 3 * sq[s]];
        }
        if (fwd(cpu, NS, tk, ps, sq, w, NS, v4c, lc) != 0 || fwd(gpu, NS, tk, ps, sq, w, NS, v4g, lgp) != 0)
            return 1;
        compare(&c3, lc, lgp, NS, V);
    }
    double t3 = (double)c3.top1_same / (double)c3.rows;
    printf("mixed batch (%d prompt tokens of %d sequences, %d decode steps): max |diff| %.3g, top-1 %.4f%s\n", n,
           NS, STEPS, c3.max_diff, t3, c3.max_diff <= max_diff && t3 >= min_top1 ? "" : "  <-- FAIL");
    fails += !(c3.max_diff <= max_diff && t3 >= min_top1);

    free(tok); free(t4c); free(t4g);
part4:
    if (graph_cycles > 0) {
        int r4 = graph_part(cpu, gpu, ids_c, np + cpu_gen, pool, graph_cycles, V, max_diff, min_top1, lc, lgp);
        if (r4 < 0)
            return 1;
        fails += r4;
    }
    if (window_pool > 0) {
        int r5 = window_part(m, mc, &o, ids_c, np + cpu_gen, window_pool, chunk, V, max_diff, min_top1);
        if (r5 < 0)
            return 1;
        fails += r5;
    }
    free(tab_c); free(tab_g); free(ids_c); free(ids_g); free(lc); free(lgp); free(pos); free(seq); free(want);
    llm_backend_free(gpu);
    llm_backend_free(cpu);
    if (mc != m)
        llm_model_free(mc);
    llm_model_free(m);
    printf("%s\n", fails == 0 ? "PASS" : "FAIL");
    return fails == 0 ? 0 : 1;
}
