/* The matrix products of more than one token against a host reference, through cuda_matmul: the
 * tensor-core weight-only GEMM (kernels/cuda_tcgemm.cu, LLM_CUDA_TC_GEMM) and the cuBLAS path (with its
 * dequantisation kernel for the block types), for BF16 / F16 / Q8_0 / Q4_0 / CU_Q4_M (from Q4_K) / CU_Q5_M
 * (from Q5_K) / CU_Q6 (from Q6_K) / CU_IQ4 (from IQ4_NL / IQ4_XS) / CU_MX4 (from MXFP4) / CU_Q2_M (from Q2_K) /
 * CU_Q3 (from Q3_K) weights, row counts that are and are not multiples of the 64-row block, K split over 1 to 16 blocks (the SM count the split is sized for),
 * 2 to 130 tokens (one to three 64-token groups, partial 16-token tiles) and y = W x or y += W x.
 * The reference is exact: activations are multiples of 1/64 (the same in bf16 and f16), weights are the
 * values the device sees (16-bit, or d * q rounded to bf16), sums in double; a product passes when every
 * output is within 2e-5 of the sum of |w x| (float accumulation over K <= 512) of the reference. Then the
 * grouped product of a mixture of experts' matrices (cuda_tcgemm_grouped), every type, the same way; and the
 * int8-activation GEMV of 1-8 tokens (dp4a_check) for every block type.
 * Under the CPU emulation of CUDA (make test-emu) and on a GPU (tests/gpu/run_parity.sh).
 *   tcgemm_check [--quick 1]   (--quick: 4 token counts instead of 8, 2 SM counts instead of 3; "PASS" / "FAIL" at the end, exit status
 *                               1 on a failure) */
#include "cuda_internal.cuh"

#include <math.h>
#include <vector>

static uint64_t rs = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd32(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 32);
}

static float bf16_to_f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t f_to_bf16(float f) /* round to nearest even (no NaN here) */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float f16_to_f(uint16_t h) /* normal and subnormal halves, no inf/NaN here */
{
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(1024 + m), e - 25);
    return (h & 0x8000u) ? -v : v;
}

struct host_mat {
    int type, rows, cols;
    std::vector<uint8_t> w;
    std::vector<uint16_t> scales;
    std::vector<float> val; /* W[r][k] as the device computes with it (16-bit paths: rounded to bf16) */
    std::vector<float> ex;  /* W[r][k] as stored (the int8 GEMVs compute with these) */
};

static host_mat make(int type, int R, int K)
{
    host_mat m;
    m.type = type;
    m.rows = R;
    m.cols = K;
    m.val.resize((size_t)R * K);
    m.ex.resize((size_t)R * K);
    int nb = K / LLM_QK;
    if (type == LLM_BF16 || type == LLM_F16) {
        m.w.resize((size_t)R * K * 2);
        uint16_t *h = (uint16_t *)m.w.data();
        for (size_t i = 0; i < (size_t)R * K; i++) {
            uint32_t r = rnd32();
            /* |w| < 0.06, random sign and mantissa */
            h[i] = (uint16_t)(type == LLM_BF16 ? (0x3c00u | (r & 0x80ffu)) : (0x2400u | (r & 0x87ffu)));
            m.val[i] = type == LLM_BF16 ? bf16_to_f(h[i]) : f16_to_f(h[i]);
        }
        return m;
    }
    m.scales.resize((size_t)R * nb * cu_type_nsc(type));
    for (size_t i = 0; i < m.scales.size(); i++) { /* |d| in [2^-8, 2^-7) (m too); CU_Q5_M / CU_Q6's high bits */
        bool bits = (type == CU_Q6 && i % 6 >= 2) || (type == CU_Q5_M && i % 4 >= 2);
        m.scales[i] = bits ? (uint16_t)rnd32() : (uint16_t)(0x1c00u | (rnd32() & 0x83ffu));
    }
    if (type == LLM_Q8_0) {
        m.w.resize((size_t)R * K);
        for (size_t i = 0; i < m.w.size(); i++)
            m.w[i] = (uint8_t)rnd32();
        for (int r = 0; r < R; r++)
            for (int k = 0; k < K; k++) {
                float d = f16_to_f(m.scales[(size_t)r * nb + k / LLM_QK]);
                m.ex[(size_t)r * K + k] = d * (float)(int8_t)m.w[(size_t)r * K + k];
                m.val[(size_t)r * K + k] = bf16_to_f(f_to_bf16(m.ex[(size_t)r * K + k]));
            }
    } else { /* Q4_0: d (q - 8); CU_Q4_M: d q - m, (d, m) a pair of fp16 per block; CU_Q5_M: q + 16 * bit */
        m.w.resize((size_t)R * K / 2);
        for (size_t i = 0; i < m.w.size(); i++)
            m.w[i] = (uint8_t)rnd32();
        for (int r = 0; r < R; r++)
            for (int k = 0; k < K; k++) {
                const uint8_t *blk = m.w.data() + (size_t)r * K / 2 + (size_t)(k / LLM_QK) * 16;
                int j = k % LLM_QK, q = j < 16 ? (blk[j] & 15) : (blk[j - 16] >> 4);
                size_t b = (size_t)r * nb + k / LLM_QK;
                float v = type == CU_Q4_M ? f16_to_f(m.scales[2 * b]) * (float)q - f16_to_f(m.scales[2 * b + 1])
                                          : f16_to_f(m.scales[b]) * (float)(q - 8);
                if (type == CU_IQ4) { /* d times the level table's entry q (ggml's kvalues_iq4nl) */
                    static const int lv[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                                                1,    13,   25,  38,  53,  69,  89,  113 };
                    v = f16_to_f(m.scales[b]) * (float)lv[q];
                }
                if (type == CU_MX4) { /* d times the FP4 E2M1 code's value, doubled */
                    static const float fp4[8] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f };
                    v = f16_to_f(m.scales[b]) * 2.0f * (q & 8 ? -fp4[q & 7] : fp4[q & 7]);
                }
                if (type == CU_Q5_M) { /* (d, m), then the fifth bits' word: element j at bit j */
                    const uint16_t *w5 = m.scales.data() + b * 4;
                    uint32_t h = (uint32_t)w5[2] | (uint32_t)w5[3] << 16;
                    v = f16_to_f(w5[0]) * (float)(q | (int)((h >> j) & 1u) << 4) - f16_to_f(w5[1]);
                }
                if (type == CU_Q2_M) { /* (d0, d1, m0, m1): the nibble's half picks its (d, m) */
                    const uint16_t *w3 = m.scales.data() + b * 4;
                    v = f16_to_f(w3[j / 16]) * (float)q - f16_to_f(w3[2 + j / 16]);
                }
                if (type == CU_Q3) /* (d0, d1): the nibble's half picks its d */
                    v = f16_to_f(m.scales[b * 2 + j / 16]) * (float)(q - 4);
                if (type == CU_Q6) { /* the nibble, then 2 high bits from the block's words 2-5 */
                    const uint16_t *w6 = m.scales.data() + b * 6;
                    uint32_t hw = (uint32_t)w6[2 + 2 * (j / 16)] | (uint32_t)w6[3 + 2 * (j / 16)] << 16;
                    v = f16_to_f(w6[j / 16]) * (float)((q | cu_q6_hi(hw, j % 16) << 4) - 32);
                }
                m.ex[(size_t)r * K + k] = v;
                m.val[(size_t)r * K + k] = bf16_to_f(f_to_bf16(v));
            }
    }
    return m;
}

static void *up(const void *p, size_t n)
{
    void *d = NULL;
    if (cudaMalloc(&d, n) != cudaSuccess || cudaMemcpy(d, p, n, cudaMemcpyHostToDevice) != cudaSuccess) {
        fprintf(stderr, "tcgemm_check: device allocation / copy failed\n");
        exit(1);
    }
    return d;
}

static const char *tname(int t)
{
    return t == LLM_BF16 ? "bf16" : t == LLM_F16 ? "f16" : t == LLM_Q8_0 ? "q8_0" : t == CU_Q4_M ? "q4_m"
           : t == CU_Q5_M ? "q5_m" : t == CU_Q6 ? "q6" : t == CU_IQ4 ? "iq4" : t == CU_MX4 ? "mx4" : t == CU_Q2_M ? "q2_m" : t == CU_Q3 ? "q3" : "q4_0";
}

static cu_mat dev_mat(const host_mat &h)
{
    cu_mat W;
    memset(&W, 0, sizeof W);
    W.type = h.type;
    W.rows = h.rows;
    W.cols = h.cols;
    W.row_bytes = h.w.size() / (size_t)h.rows;
    W.w = up(h.w.data(), h.w.size());
    W.scales = h.scales.empty() ? NULL : (const uint16_t *)up(h.scales.data(), h.scales.size() * 2);
    return W;
}

/* The grouped product of a MoE layer's experts (cuda_tcgemm_grouped): 5 experts of 3 matrices each, 0, 1,
 * 70, 17 and 130 rows (none, one, two and three 64-row groups, partial tiles), matrix 1 and matrix 2 of each,
 * every weight type; each row of y must be its expert's matrix times its row of x (16-bit, exact), the
 * stride's padding untouched. Returns the failures. */
static const int types[] = { LLM_BF16, LLM_F16, LLM_Q8_0, LLM_Q4_0, CU_Q4_M, CU_Q5_M, CU_Q6, CU_IQ4, CU_MX4, CU_Q2_M,
                             CU_Q3 };
static const int n_types = (int)(sizeof(types) / sizeof(types[0]));

static int grouped_check(cudaStream_t st)
{
    const int E = 5, counts[E] = { 0, 1, 70, 17, 130 }, R = 80, K = 128, ldy = R + 3;
    int off[E + 1] = { 0 };
    for (int e = 0; e < E; e++)
        off[e + 1] = off[e] + counts[e];
    const int rows = off[E];
    int fails = 0;
    for (int type : types) {
        std::vector<host_mat> h;
        std::vector<cu_mat> d;
        for (int i = 0; i < 3 * E; i++) {
            h.push_back(make(type, R, K));
            d.push_back(dev_mat(h.back()));
        }
        std::vector<uint16_t> x16((size_t)rows * K);
        std::vector<float> x(x16.size()), y0((size_t)rows * ldy, 7.0f), y(y0.size());
        for (size_t i = 0; i < x.size(); i++) {
            x[i] = (float)((int)(rnd32() % 257) - 128) / 64.0f;
            uint32_t u;
            memcpy(&u, &x[i], 4);
            /* exact in both: bf16's top half, or the same value as a half */
            x16[i] = type == LLM_F16 ? (uint16_t)(x[i] == 0.0f ? 0 : ((u >> 16) & 0x8000u) |
                                                  ((((u >> 23) & 255) - 112) << 10) | ((u >> 13) & 1023))
                                     : (uint16_t)(u >> 16);
        }
        cu_mat *dm = (cu_mat *)up(d.data(), d.size() * sizeof(cu_mat));
        int32_t *doff = (int32_t *)up(off, sizeof off);
        void *dx = up(x16.data(), x16.size() * 2);
        float *dy = (float *)up(y0.data(), y0.size() * 4);
        for (int which = 1; which <= 2; which++) {
            cu_tg_group G = { dm, which, doff, E };
            cudaMemcpy(dy, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice);
            cuda_tcgemm_grouped(d.data(), &G, dx, rows, dy, ldy, st);
            cudaError_t e = cudaStreamSynchronize(st);
            cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost);
            int bad = e != cudaSuccess;
            double worst = 0.0;
            for (int ex = 0; ex < E && !bad; ex++)
                for (int p = off[ex]; p < off[ex + 1]; p++) {
                    const host_mat &W = h[3 * ex + which];
                    for (int r = 0; r < ldy; r++) {
                        if (r >= R) {
                            bad |= y[(size_t)p * ldy + r] != 7.0f;
                            continue;
                        }
                        double sum = 0.0, mag = 0.0;
                        for (int k = 0; k < K; k++) {
                            double v = (double)W.val[(size_t)r * K + k] * x[(size_t)p * K + k];
                            sum += v;
                            mag += fabs(v);
                        }
                        double dd = fabs(y[(size_t)p * ldy + r] - sum), lim = 2e-5 * mag + 1e-6;
                        worst = dd / lim > worst ? dd / lim : worst;
                        bad |= !(dd <= lim);
                    }
                }
            printf("%-4s grouped: 5 experts of %dx%d, rows 0/1/70/17/130, matrix %d: worst |diff| / limit %.3f%s\n",
                   tname(type), R, K, which, worst, bad ? "  <-- FAIL" : "");
            fails += bad;
        }
        for (auto &m : d) {
            cudaFree((void *)m.w);
            cudaFree((void *)m.scales);
        }
        cudaFree(dm);
        cudaFree(doff);
        cudaFree(dx);
        cudaFree(dy);
    }
    return fails;
}

/* The int8-activation GEMVs (LLM_CUDA_GEMV_DP4A: gemv_dp4a_kernel, 1-8 tokens) for every block type against
 * the stored weights times the activations quantised as the device quantises them (per 32: d = max|x| / 127,
 * q = rint(x / d)), sums in double: the integer dot products are exact, so only the float scaling rounds.
 * Returns the failures, counts the products in *cases. */
static int dp4a_check(cu_mm_ctx *mm, int R, int K, int *cases)
{
    int failed = 0;
    if (cudaMalloc((void **)&mm->xq, (size_t)CU_GEMV_MAX_TOKENS * K) != cudaSuccess ||
        cudaMalloc((void **)&mm->xds, (size_t)CU_GEMV_MAX_TOKENS * (K / LLM_QK) * 2 * sizeof(float)) != cudaSuccess)
        return 1;
    mm->xq_k = K;
    mm->dp4a = 1;
    mm->gemv_max_q8 = mm->gemv_max_q4 = CU_GEMV_MAX_TOKENS;
    for (int type : types) {
        if (!cu_type_q(type))
            continue;
        host_mat h = make(type, R, K);
        cu_mat W = dev_mat(h);
        for (int n : { 1, 3, CU_GEMV_MAX_TOKENS }) {
            const int ldx = K + 4, ldy = R + 3;
            std::vector<float> x((size_t)n * ldx), xd((size_t)n * K), y((size_t)n * ldy, 0.0f);
            for (auto &v : x)
                v = (float)((int)(rnd32() % 2001) - 1000) / 377.0f;
            for (int t = 0; t < n; t++)
                for (int b = 0; b < K / LLM_QK; b++) { /* quant_block's arithmetic */
                    const float *xb = &x[(size_t)t * ldx + (size_t)b * LLM_QK];
                    float amax = 0.0f;
                    for (int i = 0; i < LLM_QK; i++)
                        amax = fmaxf(amax, fabsf(xb[i]));
                    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
                    for (int i = 0; i < LLM_QK; i++)
                        xd[(size_t)t * K + (size_t)b * LLM_QK + i] = d * rintf(xb[i] * id);
                }
            float *dx = (float *)up(x.data(), x.size() * 4), *dy = (float *)up(y.data(), y.size() * 4);
            char msg[256] = "";
            int rc = cuda_matmul(mm, &W, dx, ldx, dy, ldy, n, 0, msg, sizeof msg);
            int bad = rc != 0 || cudaStreamSynchronize(mm->stream) != cudaSuccess;
            cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost);
            double worst = 0.0;
            for (int t = 0; t < n && !bad; t++)
                for (int r = 0; r < R; r++) {
                    double sum = 0.0, mag = 0.0;
                    for (int k = 0; k < K; k++) {
                        double p = (double)h.ex[(size_t)r * K + k] * xd[(size_t)t * K + k];
                        sum += p;
                        mag += fabs(p);
                    }
                    double dd = fabs(y[(size_t)t * ldy + r] - sum), lim = 2e-5 * mag + 1e-6;
                    worst = dd / lim > worst ? dd / lim : worst;
                    bad |= !(dd <= lim);
                }
            if (bad || n == 3)
                printf("%-4s %3dx%-3d n=%d  int8 GEMV (dp4a): worst |diff| / limit %.3f%s\n", tname(type), R, K, n,
                       worst, bad ? "  <-- FAIL" : "");
            (*cases)++;
            failed += bad;
            cudaFree(dx);
            cudaFree(dy);
        }
        cudaFree((void *)W.w);
        cudaFree((void *)W.scales);
    }
    cudaFree(mm->xq);
    cudaFree(mm->xds);
    mm->xq = NULL;
    mm->xds = NULL;
    mm->dp4a = 0;
    return failed;
}

int main(int argc, char **argv)
{
    int quick = argc > 2 && strcmp(argv[1], "--quick") == 0 && atoi(argv[2]) != 0;
    cu_mm_ctx mm;
    memset(&mm, 0, sizeof mm);
    if (cudaStreamCreateWithFlags(&mm.stream, cudaStreamNonBlocking) != cudaSuccess ||
        cublasCreate(&mm.blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(mm.blas, mm.stream) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "tcgemm_check: no CUDA device / cuBLAS\n");
        return 1;
    }
    if (cuda_tcgemm_prepare() != 0) {
        fprintf(stderr, "tcgemm_check: the device refuses the tensor-core GEMM's shared memory\n");
        return 1;
    }
    mm.gemv_max = mm.gemv_max_q8 = mm.gemv_max_q4 = 1;
    struct { int R, K; } shapes[] = { { 80, 128 }, { 200, 64 }, { 48, 512 }, { 16, 1024 } };
    const int ns_all[] = { 2, 9, 16, 17, 40, 64, 65, 130 }, ns_quick[] = { 2, 17, 64, 130 };
    const int *ns = quick ? ns_quick : ns_all, n_ns = quick ? 4 : 8;
    const int sms_list[] = { 1, 8, 132 };
    int cases = 0, failed = 0;
    for (auto sh : shapes)
        for (int type : types) {
            host_mat h = make(type, sh.R, sh.K);
            cu_mat W;
            memset(&W, 0, sizeof W);
            W.type = type;
            W.rows = sh.R;
            W.cols = sh.K;
            W.row_bytes = h.w.size() / (size_t)sh.R;
            W.w = up(h.w.data(), h.w.size());
            W.scales = h.scales.empty() ? NULL : (const uint16_t *)up(h.scales.data(), h.scales.size() * 2);
            for (int ni = 0; ni < n_ns; ni++) {
                const int n = ns[ni];
                const int ldx = sh.K + 4, ldy = sh.R + 3; /* strided rows, as the backend's buffers */
                std::vector<float> x((size_t)n * ldx), y0((size_t)n * ldy), y(y0.size());
                for (auto &v : x)
                    v = (float)((int)(rnd32() % 257) - 128) / 64.0f;
                for (auto &v : y0)
                    v = (float)((int)(rnd32() % 201) - 100) / 32.0f;
                float *dx = (float *)up(x.data(), x.size() * 4), *dy = (float *)up(y0.data(), y0.size() * 4);
                for (int path = 0; path < 2; path++)       /* 0: tensor-core GEMM, 1: cuBLAS */
                    for (int si = 0; si < (path == 0 ? 3 : 1); si += path == 0 && quick ? 2 : 1)
                        for (int acc = 0; acc < 2; acc++) {
                            mm.tc_max = mm.tc_max_q = path == 0 ? 1024 : 0;
                            mm.sms = sms_list[si];
                            char msg[256] = "";
                            cudaMemcpy(dy, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice);
                            int rc = cuda_matmul(&mm, &W, dx, ldx, dy, ldy, n, acc, msg, sizeof msg);
                            cudaError_t e = cudaStreamSynchronize(mm.stream);
                            if (e == cudaSuccess)
                                e = cudaGetLastError();
                            cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost);
                            double worst = 0.0;
                            int bad = rc != 0 || e != cudaSuccess;
                            for (int t = 0; t < n && !bad; t++)
                                for (int r = 0; r < sh.R; r++) {
                                    double s = 0.0, mag = 0.0;
                                    for (int k = 0; k < sh.K; k++) {
                                        double p = (double)h.val[(size_t)r * sh.K + k] * x[(size_t)t * ldx + k];
                                        s += p;
                                        mag += fabs(p);
                                    }
                                    double base = acc ? y0[(size_t)t * ldy + r] : 0.0;
                                    double d = fabs(y[(size_t)t * ldy + r] - (base + s));
                                    double lim = 2e-5 * (mag + fabs(base)) + 1e-6;
                                    worst = d / lim > worst ? d / lim : worst;
                                    if (!(d <= lim)) /* NaN fails too */
                                        bad = 1;
                                }
                            /* rows of y past R (the stride's padding) must not be written */
                            for (int t = 0; t < n && !bad; t++)
                                for (int r = sh.R; r < ldy; r++)
                                    if (y[(size_t)t * ldy + r] != y0[(size_t)t * ldy + r])
                                        bad = 1;
                            cases++;
                            failed += bad;
                            int S = path == 0 && mm.tc_max >= n && cuda_tcgemm_ok(&W) ? cuda_tcgemm_splits(&W, n, mm.sms) : 0;
                            if (bad || (n == 17 && si == 0 && acc == 1))
                                printf("%-4s %3dx%-3d n=%-3d %-6s split %-2d %s: worst |diff| / limit %.3f%s%s%s\n",
                                       tname(type), sh.R, sh.K, n, path == 0 ? "tc" : "cublas", S,
                                       acc ? "y += Wx" : "y = Wx ", worst, bad ? "  <-- FAIL" : "",
                                       rc ? " " : "", rc ? msg : (e != cudaSuccess ? cudaGetErrorString(e) : ""));
                        }
                cudaFree(dx);
                cudaFree(dy);
            }
            cudaFree((void *)W.w);
            cudaFree((void *)W.scales);
        }
    int gfailed = grouped_check(mm.stream);
    cases += 2 * n_types;
    int dcases = 0, dfailed = dp4a_check(&mm, shapes[2].R, shapes[2].K, &dcases) + dp4a_check(&mm, 64, 96, &dcases);
    cases += dcases;
    gfailed += dfailed;
    printf("%d products, %d failed (the lines above: every failure, and one passing case per shape)\n%s\n", cases,
           failed + gfailed, failed + gfailed ? "FAIL" : "PASS");
    failed += gfailed;
    cublasDestroy(mm.blas);
    cudaFree(mm.act16);
    cudaFree(mm.deq);
    cudaFree(mm.tc_part);
    cudaStreamDestroy(mm.stream);
    return failed ? 1 : 0;
}
