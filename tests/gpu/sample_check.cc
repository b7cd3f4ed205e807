/* The device sampler (kernels/cuda_sample.cu, under the CPU emulation of CUDA) against engine/sampler.c:
 * for each case (a logits pattern x sampling parameters x penalty history; block sizes 256 and 1024 in turn),
 * 24 rows in one launch, each with
 * the draw u its own seeded sampler would make next; the device must pick the same token as
 * llm_sampler_sample, with the same logprob and the same top-n (ids exactly, logprobs within 1e-5).
 * Vocabularies of 512 and 128,256 (Llama 3's); patterns with ties, NaN / +-inf, all -inf, flat and peaked.
 * Under emulation expf is the C library's on both sides, so everything must be identical; on a GPU its expf
 * may differ from glibc's in the last bit, so a weight can differ by one unit and a draw right at a boundary
 * pick the neighbour: --min-same (fraction of ids) and --max-lp loosen the check there.
 *   sample_check [--min-same 1] [--max-lp 1e-5] [--quick 1]   (one line per case, "PASS" / "FAIL" at the end) */
#include "cuda_internal.cuh"

#include <math.h>
#include <vector>

extern "C" {
#include "sampler.h"
}

static uint64_t rs = 88172645463325252ULL;
static double rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) * 0x1.0p-53;
}

/* pattern 0: peaked (a few large logits); 1: flat with many exact ties; 2: with NaN, +inf and -inf;
 * 3: every logit -inf or NaN; 4: normal-ish spread (sizeable nucleus). */
static void fill(std::vector<float> &l, int pattern)
{
    int v = (int)l.size();
    for (int i = 0; i < v; i++) {
        switch (pattern) {
        case 0: l[i] = (float)(10.0 * pow(rnd(), 40.0) + rnd()); break;
        case 1: l[i] = (float)((int)(rnd() * 16) / 8.0); break;
        case 2: l[i] = (float)(rnd() * 4.0); break;
        case 3: l[i] = i % 3 == 0 ? NAN : -INFINITY; break;
        default: l[i] = (float)(sqrt(-2.0 * log(rnd() + 1e-12)) * cos(6.283185307 * rnd()) * 2.0); break;
        }
    }
    if (pattern == 2) {
        l[v / 3] = NAN;
        l[v / 2] = INFINITY;
        l[v / 2 + 1] = INFINITY; /* two +inf: FLT_MAX each, the lower id first */
        for (int i = 0; i < v; i += 5)
            l[i] = -INFINITY;
    }
}

typedef struct {
    const char *name;
    llm_sampling_params p;
    int bias; /* 1: logit biases on every row (the best token banned, others raised, one id given twice) */
} pcase;

static llm_sampling_params P(float t, int k, float tp, float mp, float rep, float pres, float freq, int last_n,
                             int nlp)
{
    llm_sampling_params p;
    llm_sampling_defaults(&p);
    p.temperature = t;
    p.top_k = k;
    p.top_p = tp;
    p.min_p = mp;
    p.repetition_penalty = rep;
    p.presence_penalty = pres;
    p.frequency_penalty = freq;
    p.penalty_last_n = last_n;
    p.n_logprobs = nlp;
    return p;
}

int main(int argc, char **argv)
{
    double min_same = 1.0, max_lp = 1e-5;
    int quick = 0; /* --quick 1: the 512-token vocabulary only (for compute-sanitizer, which slows kernels a lot) */
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--min-same") == 0)
            min_same = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--max-lp") == 0)
            max_lp = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--quick") == 0)
            quick = atoi(argv[i + 1]);
    }
    long ids_same = 0, ids_all = 0;
    const pcase cases[] = {
        { "greedy + 5 logprobs", P(0.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, -1, 5), 0 },
        { "temperature 1 (whole vocabulary)", P(1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, -1, 0), 0 },
        { "temperature 2", P(2.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, -1, 0), 0 },
        { "temperature 0.7, top_k 40", P(0.7f, 40, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, -1, 0), 0 },
        { "top_k 1", P(1.0f, 1, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, -1, 0), 0 },
        { "top_p 0.9", P(1.0f, 0, 0.9f, 0.0f, 1.0f, 0.0f, 0.0f, -1, 0), 0 },
        { "top_p 0.3", P(1.3f, 0, 0.3f, 0.0f, 1.0f, 0.0f, 0.0f, -1, 0), 0 },
        { "min_p 0.05", P(1.0f, 0, 1.0f, 0.05f, 1.0f, 0.0f, 0.0f, -1, 0), 0 },
        { "top_k 50 + top_p 0.95 + min_p 0.02 + 20 logprobs", P(0.9f, 50, 0.95f, 0.02f, 1.0f, 0.0f, 0.0f, -1, 20), 0 },
        { "top_p 0.8 + min_p 0.3 (min_p inside the nucleus)", P(1.0f, 0, 0.8f, 0.3f, 1.0f, 0.0f, 0.0f, -1, 0), 0 },
        { "penalties (rep 1.3, presence 0.4, frequency 0.6, window all) + 3 logprobs",
          P(0.8f, 0, 1.0f, 0.0f, 1.3f, 0.4f, 0.6f, 0, 3), 0 },
        { "greedy with penalties (rep 1.5, presence -1, window 32)", P(0.0f, 0, 1.0f, 0.0f, 1.5f, -1.0f, 0.0f, 32, 0), 0 },
        { "greedy + logit bias + 4 logprobs", P(0.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, -1, 4), 1 },
        { "logit bias + penalties (rep 1.2, frequency 0.5) + top_p 0.9", P(0.9f, 0, 0.9f, 0.0f, 1.2f, 0.0f, 0.5f, 0, 2), 1 },
    };
    const int vocabs[] = { 512, 128256 };
    enum { ROWS = 24, HIST = 200 };
    int fails = 0, n_cases = 0;
    for (int vi = 0; vi < (quick ? 1 : 2); vi++) {
        int v = vocabs[vi];
        for (int pat = 0; pat < 5; pat++) {
            for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
                if (v > 512 && (pat == 3 || ci % 2 == 1)) /* the big vocabulary: half the cases */
                    continue;
                n_cases++;
                std::vector<float> logits((size_t)ROWS * v), cpu_l((size_t)v);
                std::vector<llm_sampling_row> rows(ROWS);
                std::vector<int32_t> pen;
                std::vector<llm_sampler *> smp(ROWS);
                for (int r = 0; r < ROWS; r++) {
                    std::vector<float> l((size_t)v);
                    fill(l, pat);
                    memcpy(&logits[(size_t)r * v], l.data(), (size_t)v * 4);
                    llm_sampling_params p = cases[ci].p;
                    p.seed = 1000 + (uint64_t)r * 7 + ci;
                    smp[r] = llm_sampler_new(&p, v);
                    for (int h = 0; h < HIST; h++) /* history: the penalties' window; a few ids repeat */
                        llm_sampler_accept(smp[r], (int32_t)(pow(rnd(), 3.0) * v), h < HIST / 2);
                    if (cases[ci].bias) {
                        int best = 0;
                        for (int i = 1; i < v; i++)
                            best = l[i] > l[best] ? i : best;
                        llm_logit_bias b[8];
                        b[0] = { best, -100.0f };
                        for (int j = 1; j < 7; j++)
                            b[j] = { (int32_t)(rnd() * v), (float)(rnd() * 30.0 - 10.0) };
                        b[7] = { b[3].id, 7.25f }; /* given twice: the last counts */
                        if (llm_sampler_set_bias(smp[r], b, 8) != 0) {
                            printf("set_bias failed\n");
                            return 1;
                        }
                    }
                    int np = llm_sampler_device_pairs(smp[r]);
                    size_t at = pen.size() / 2;
                    pen.resize(pen.size() + 2 * (size_t)np);
                    if (llm_sampler_device_row(smp[r], &rows[r], pen.data() + 2 * at, np) != np) {
                        printf("device_row failed\n");
                        return 1;
                    }
                    rows[r].pen_off = (int32_t)at;
                    rows[r].row = r;
                }
                /* device: one launch over all rows */
                float *d_l;
                llm_sampling_row *d_rows;
                int32_t *d_pen, *d_ids, *d_nt;
                float *d_lp;
                llm_token_logprob *d_top;
                cudaMalloc(&d_l, logits.size() * 4);
                cudaMalloc(&d_rows, ROWS * sizeof(llm_sampling_row));
                cudaMalloc(&d_pen, (pen.size() + 2) * 4);
                cudaMalloc(&d_ids, ROWS * 4);
                cudaMalloc(&d_nt, ROWS * 4);
                cudaMalloc(&d_lp, ROWS * 4);
                cudaMalloc(&d_top, ROWS * LLM_SAMPLING_MAX_LOGPROBS * sizeof(llm_token_logprob));
                cudaMemcpy(d_l, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice);
                cudaMemcpy(d_rows, rows.data(), ROWS * sizeof(llm_sampling_row), cudaMemcpyHostToDevice);
                if (!pen.empty())
                    cudaMemcpy(d_pen, pen.data(), pen.size() * 4, cudaMemcpyHostToDevice);
                int threads = n_cases % 2 ? 1024 : 256; /* both block sizes of the kernel */
                cuda_sample(d_l, v, ROWS, d_rows, d_pen, d_ids, d_lp, d_top, d_nt, threads, NULL);
                std::vector<int32_t> ids(ROWS), nt(ROWS);
                std::vector<float> lp(ROWS);
                std::vector<llm_token_logprob> top((size_t)ROWS * LLM_SAMPLING_MAX_LOGPROBS);
                cudaMemcpy(ids.data(), d_ids, ROWS * 4, cudaMemcpyDeviceToHost);
                cudaMemcpy(nt.data(), d_nt, ROWS * 4, cudaMemcpyDeviceToHost);
                cudaMemcpy(lp.data(), d_lp, ROWS * 4, cudaMemcpyDeviceToHost);
                cudaMemcpy(top.data(), d_top, top.size() * sizeof(llm_token_logprob), cudaMemcpyDeviceToHost);
                cudaFree(d_l); cudaFree(d_rows); cudaFree(d_pen); cudaFree(d_ids); cudaFree(d_nt); cudaFree(d_lp);
                cudaFree(d_top);
                /* CPU: the same calls */
                int same_id = 0, same_top = 1, distinct = 0;
                double lp_diff = 0.0;
                std::vector<int32_t> seen;
                for (int r = 0; r < ROWS; r++) {
                    memcpy(cpu_l.data(), &logits[(size_t)r * v], (size_t)v * 4);
                    llm_sample_result res;
                    int32_t id = llm_sampler_sample(smp[r], cpu_l.data(), &res);
                    llm_sampler_free(smp[r]);
                    same_id += id == ids[r];
                    int fresh = 1;
                    for (int32_t x : seen)
                        fresh &= x != id;
                    if (fresh) {
                        seen.push_back(id);
                        distinct++;
                    }
                    double d = res.logprob == lp[r] ? 0.0 : fabs((double)res.logprob - (double)lp[r]);
                    lp_diff = d > lp_diff || d != d ? d : lp_diff;
                    same_top &= res.n_top == nt[r];
                    for (int k = 0; same_top && k < res.n_top; k++) {
                        const llm_token_logprob &g = top[(size_t)r * LLM_SAMPLING_MAX_LOGPROBS + k];
                        same_top &= g.id == res.top[k].id;
                        double e = g.logprob == res.top[k].logprob ? 0.0 : fabs((double)g.logprob - res.top[k].logprob);
                        lp_diff = e > lp_diff || e != e ? e : lp_diff;
                    }
                }
                ids_same += same_id;
                ids_all += ROWS;
                int bad = (min_same >= 1.0 && same_id != ROWS) || !same_top || !(lp_diff <= max_lp);
                fails += bad;
                printf("vocab %6d, pattern %d, %-72s %4d threads: ids %2d/%d (%2d distinct), top-n %s, logprob max "
                       "|diff| %.2g%s\n", v, pat, cases[ci].name, threads, same_id, ROWS, distinct,
                       same_top ? "same" : "DIFFER", lp_diff, bad ? "  <-- FAIL" : "");
            }
        }
    }
    if ((double)ids_same < min_same * (double)ids_all)
        fails++;
    printf("device sampler vs engine/sampler.c: %d cases, %d failed; ids identical %ld of %ld\n%s\n", n_cases, fails,
           ids_same, ids_all, fails ? "FAIL" : "PASS");
    return fails != 0;
}
