/* Kernel by kernel on the GPU, outside the engine (figures only, never pass/fail):
 *   gpu_kernels_bench [--small 1] [--reps 50] [--parts designs,matrices,attention,elementwise,sampler]
 *                     [--types bf16,q8_0,q4_0]
 * Shapes of the llama-3.2-3b preset (dim 3072, hidden 8192, 24 heads, 8 kv heads, head_dim 128, vocab
 * 128,256), or tiny ones with --small (for the CPU emulation). For each weight matrix of a layer and the
 * classifier, in bf16, q8_0 and q4_0: the GEMV with float activations and with int8 activations (dp4a,
 * Q8_0/Q4_0) at 1, 2, 4 and 8 tokens, cuBLAS and the tensor-core weight-only GEMM (LLM_CUDA_TC_GEMM,
 * its output checked against cuBLAS's) at 8 to 256, as µs per call, the weight bytes read per second and
 * TFLOP/s; decode attention (f16 KV) for B sequences x C positions as µs and KV bytes
 * per second; prefill attention over one 2048-token sequence on tensor cores (mma.sync, wmma) and on the
 * scalar kernel;
 * RMSNorm, SwiGLU and RoPE + KV write at 1 and 256 tokens; the device sampler per row. Timed with CUDA
 * events over --reps back-to-back launches after one warm-up: a launch-bound kernel shows the launch rate.
 * What a weight row costs against the HBM bandwidth is the question this answers: the step-level figures
 * (bench/gpu_decode.sh) cannot say which kernel is slow. Part `designs` times the one-token GEMV shapes that
 * LLM_CUDA_GEMV_SHAPE selects (bf16, and Q4_0 on int8 activations) beside the default kernel. */
#include "cuda_internal.cuh"

#include <vector>

typedef struct {
    int dim, hidden, n_heads, n_kv, head_dim, vocab;
} shape;

static int reps = 50;
static int small = 0; /* --small: tiny shapes and few cases, for the emulation */
static const char *types_arg = "bf16,q8_0,q4_0";
static cudaStream_t S;

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* Deterministic pseudo-random fill, on the device. */
__global__ void fill_f32(float *p, size_t n, float scale, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        p[i] = ((float)(h & 0xffffff) / 16777216.0f - 0.5f) * scale;
    }
}
__global__ void fill_u16(uint16_t *p, size_t n, int bf16, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        /* |w| < 0.03: bf16 0x3c.. / fp16 0x24.. exponents, random sign and mantissa */
        p[i] = (uint16_t)(bf16 ? (0x3c00u | (h & 0x80ffu)) : (0x2400u | (h & 0x83ffu)));
    }
}
__global__ void fill_u8(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        p[i] = (uint8_t)(h * 2246822519u >> 24);
    }
}

static void *dev(size_t bytes)
{
    void *p = NULL;
    CK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

static float *dev_f32(size_t n, float scale)
{
    float *p = (float *)dev(n * 4);
    CU_LAUNCH(fill_f32, 1024, 256, 0, S, p, n, scale, (uint32_t)n);
    return p;
}

static cu_mat make_mat(int type, int rows, int cols)
{
    cu_mat M;
    memset(&M, 0, sizeof M);
    M.type = type;
    M.rows = rows;
    M.cols = cols;
    size_t n = (size_t)rows * cols;
    switch (type) {
    case LLM_BF16:
    case LLM_F16:
        M.row_bytes = (size_t)cols * 2;
        M.w = dev(n * 2);
        CU_LAUNCH(fill_u16, 1024, 256, 0, S, (uint16_t *)M.w, n, type == LLM_BF16, 7u);
        break;
    case LLM_Q8_0:
    case LLM_Q4_0:
        M.row_bytes = type == LLM_Q8_0 ? (size_t)cols : (size_t)cols / 2;
        M.w = dev(M.row_bytes * rows);
        CU_LAUNCH(fill_u8, 1024, 256, 0, S, (uint8_t *)M.w, M.row_bytes * rows, 11u);
        M.scales = (const uint16_t *)dev(n / LLM_QK * 2);
        CU_LAUNCH(fill_u16, 1024, 256, 0, S, (uint16_t *)M.scales, n / LLM_QK, 0, 13u);
        break;
    default:
        M.row_bytes = (size_t)cols * 4;
        M.w = dev_f32(n, 0.05f);
    }
    return M;
}

static size_t mat_bytes(const cu_mat &M)
{
    return M.row_bytes * M.rows + (M.scales ? (size_t)M.rows * (M.cols / LLM_QK) * 2 : 0);
}

/* µs per call of f over `reps` back-to-back calls after one. */
template <typename F> static double time_us(F f)
{
    f();
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaStreamSynchronize(S));
    CK(cudaEventRecord(a, S));
    for (int i = 0; i < reps; i++)
        f();
    CK(cudaEventRecord(b, S));
    CK(cudaEventSynchronize(b));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, a, b));
    CK(cudaGetLastError());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return 1e3 * (double)ms / reps;
}

static const char *tname(int t)
{
    return t == LLM_BF16 ? "bf16" : t == LLM_Q8_0 ? "q8_0" : t == LLM_Q4_0 ? "q4_0" : t == LLM_F16 ? "f16" : "f32";
}

/* The matrices of one layer and the classifier. */
typedef struct {
    const char *name;
    int rows, cols;
} mat_shape;

static int layer_mats(const shape &sh, mat_shape *m)
{
    m[0] = mat_shape{ "qkv", sh.n_heads * sh.head_dim + 2 * sh.n_kv * sh.head_dim, sh.dim };
    m[1] = mat_shape{ "wo", sh.dim, sh.n_heads * sh.head_dim };
    m[2] = mat_shape{ "gate_up", 2 * sh.hidden, sh.dim };
    m[3] = mat_shape{ "down", sh.dim, sh.hidden };
    m[4] = mat_shape{ "classifier", sh.vocab, sh.dim };
    return 5;
}

/* ---- GEMV designs, one token: the shapes LLM_CUDA_GEMV_SHAPE selects in the model (R rows per warp, U
 * loads in flight per lane; cuda_kernels.cu), each timed beside the default kernel and its output checked
 * against the default's: bf16 on float activations, Q4_0 on int8 activations (dp4a). ---- */
static void bench_gemv_designs(const shape &sh, cu_mm_ctx *mm)
{
    mat_shape mats[5];
    int nm = layer_mats(sh, mats), kmax = sh.hidden > sh.dim ? sh.hidden : sh.dim;
    float *x = dev_f32((size_t)kmax, 2.0f);
    size_t ny = (size_t)sh.vocab + (size_t)2 * sh.hidden;
    float *y = (float *)dev(ny * 4), *ref = (float *)dev(ny * 4);
    std::vector<float> a(ny), b(ny);
    char msg[256];
    for (int type : { LLM_BF16, LLM_Q4_0 }) {
        int dp4a = type == LLM_Q4_0;
        if (dp4a && mm->xq == NULL)
            continue;
        printf("== GEMV designs, %s, one token%s: RxU = rows per warp x loads in flight per lane\n", tname(type),
               dp4a ? ", int8 activations (dp4a)" : "");
        mm->dp4a = dp4a;
        mm->gemv_max = mm->gemv_max_q8 = mm->gemv_max_q4 = CU_GEMV_MAX_TOKENS;
        for (int k = 0; k < nm; k++) {
            const mat_shape &m = mats[k];
            cu_mat W = make_mat(type, m.rows, m.cols);
            double gb = (double)mat_bytes(W) / 1e9;
            mm->shape_r = mm->shape_u = 0;
            double us = time_us([&] { cuda_matmul(mm, &W, x, m.cols, ref, m.rows, 1, 0, msg, sizeof msg); });
            printf("%-10s %6d x %-5d default %.1f us %.0f GB/s |", m.name, m.rows, m.cols, us, gb / (us * 1e-6));
            CK(cudaMemcpy(b.data(), ref, (size_t)m.rows * 4, cudaMemcpyDeviceToHost));
            for (int sr = 1; sr <= 4; sr++)
            for (int su = 1; su <= 16; su++) {
                if (!cuda_gemv_shape_ok(sr, su))
                    continue;
                mm->shape_r = sr;
                mm->shape_u = su;
                us = time_us([&] { cuda_matmul(mm, &W, x, m.cols, y, m.rows, 1, 0, msg, sizeof msg); });
                CK(cudaMemcpy(a.data(), y, (size_t)m.rows * 4, cudaMemcpyDeviceToHost));
                double d = 0.0;
                for (int i = 0; i < m.rows; i++)
                    d = !(fabs((double)a[i] - b[i]) <= d) ? fabs((double)a[i] - b[i]) : d; /* NaN shows */
                printf(" %dx%d %.1f us %.0f GB/s (|diff| %.1e);", sr, su, us, gb / (us * 1e-6), d);
            }
            printf("\n");
            cudaFree((void *)W.w);
            cudaFree((void *)W.scales);
        }
    }
    mm->shape_r = mm->shape_u = 0;
    mm->dp4a = 0;
    cudaFree(x);
    cudaFree(y);
    cudaFree(ref);
}

static void bench_matrices(const shape &sh, cu_mm_ctx *mm)
{
    mat_shape mats[5];
    layer_mats(sh, mats);
    const int types[] = { LLM_BF16, LLM_Q8_0, LLM_Q4_0 };
    int kmax = sh.hidden > sh.dim ? sh.hidden : sh.dim;
    float *x = dev_f32((size_t)256 * kmax, 2.0f);
    size_t rmax = 0;
    for (auto &m : mats)
        rmax = (size_t)m.rows > rmax ? (size_t)m.rows : rmax;
    float *y = (float *)dev((size_t)256 * rmax * 4);
    char msg[256];
    printf("== matrices: us per call, weight GB/s; TFLOP/s for cuBLAS and the tensor-core weight GEMM\n");
    for (int ti = 0; ti < 3; ti++) {
        if (!strstr(types_arg, tname(types[ti])))
            continue;
        for (auto &m : mats) {
            cu_mat W = make_mat(types[ti], m.rows, m.cols);
            double gb = (double)mat_bytes(W) / 1e9;
            printf("%-4s %-10s %6d x %-5d %7.1f MB |", tname(W.type), m.name, m.rows, m.cols, gb * 1e3);
            for (int dp = 0; dp < (W.type == LLM_BF16 ? 1 : 2); dp++) {
                mm->dp4a = dp && mm->xq != NULL;
                mm->gemv_max = mm->gemv_max_q8 = mm->gemv_max_q4 = CU_GEMV_MAX_TOKENS;
                printf(" gemv%s", dp ? "(dp4a)" : "");
                for (int n : { 1, 2, 4, 8 }) {
                    double us = time_us([&] { cuda_matmul(mm, &W, x, m.cols, y, m.rows, n, 0, msg, sizeof msg); });
                    printf(" n%d %.1f us %.0f GB/s;", n, us, gb / (us * 1e-6));
                }
            }
            mm->dp4a = 0;
            mm->gemv_max = mm->gemv_max_q8 = mm->gemv_max_q4 = 0;
            /* cuBLAS, then the tensor-core weight-only GEMM (LLM_CUDA_TC_GEMM) with its output checked
             * against cuBLAS's: largest |diff| over the largest |y| */
            for (int tc = 0; tc < 2; tc++) {
                mm->tc_max = mm->tc_max_q = tc ? 1 << 20 : 0;
                printf(tc ? " tc-gemm" : " cublas");
                for (int n : { 8, 16, 32, 64, 128, 256 }) {
                    if (cuda_matmul_reserve(mm, &W, n) != 0) {
                        printf(" n%d (no memory);", n);
                        continue;
                    }
                    double us = time_us([&] { cuda_matmul(mm, &W, x, m.cols, y, m.rows, n, 0, msg, sizeof msg); });
                    printf(" n%d %.1f us %.0f GB/s %.1f TFLOP/s", n, us, gb / (us * 1e-6),
                           2.0 * m.rows * (double)m.cols * n / (us * 1e-6) / 1e12);
                    size_t cnt = (size_t)n * m.rows;
                    std::vector<float> got(cnt), want(cnt);
                    CK(cudaMemcpy(got.data(), y, cnt * 4, cudaMemcpyDeviceToHost));
                    if (tc) {
                        mm->tc_max = mm->tc_max_q = 0;
                        cuda_matmul(mm, &W, x, m.cols, y, m.rows, n, 0, msg, sizeof msg);
                        mm->tc_max = mm->tc_max_q = 1 << 20;
                        CK(cudaMemcpy(want.data(), y, cnt * 4, cudaMemcpyDeviceToHost));
                        double d = 0.0, big = 0.0;
                        for (size_t i = 0; i < cnt; i++) {
                            d = !(fabs((double)got[i] - want[i]) <= d) ? fabs((double)got[i] - want[i]) : d;
                            big = fabs((double)want[i]) > big ? fabs((double)want[i]) : big;
                        }
                        printf(" (|diff| %.1e of %.1e)", d, big);
                    }
                    printf(";");
                }
            }
            mm->tc_max = mm->tc_max_q = 0;
            printf("\n");
            cudaFree((void *)W.w);
            cudaFree((void *)W.scales);
        }
    }
    cudaFree(x);
    cudaFree(y);
}

/* Decode: B sequences, one token each at position C-1 (C positions read); prefill: one sequence of P tokens. */
static void bench_attention(const shape &sh, int n_sms, size_t smem_max)
{
    const int bs = 16, kv_dim = sh.n_kv * sh.head_dim, ld = sh.n_heads * sh.head_dim + 2 * kv_dim;
    std::vector<int> Bs = { 1, 32, 128, 256 }, Cs = { 150, 1024 };
    if (small) {
        Bs = { 1, 4 };
        Cs = { 40 };
    }
    int maxB = 256, maxC = 2048;
    int blocks_per = (maxC + bs - 1) / bs;
    size_t nblk = (size_t)maxB * ((1024 + bs - 1) / bs) > (size_t)blocks_per ? (size_t)maxB * ((1024 + bs - 1) / bs)
                                                                            : (size_t)blocks_per;
    size_t elems = nblk * bs * kv_dim;
    cu_kv kv = {};
    kv.kv16 = 1;
    kv.pool[0].k = dev(elems * 2);
    kv.pool[0].v = dev(elems * 2);
    kv.at = &kv.pool[0]; /* one layer, the whole pool */
    CU_LAUNCH(fill_u16, 1024, 256, 0, S, (uint16_t *)kv.pool[0].k, elems, 0, 3u);
    CU_LAUNCH(fill_u16, 1024, 256, 0, S, (uint16_t *)kv.pool[0].v, elems, 0, 5u);
    float *qkv = dev_f32((size_t)maxC * ld, 1.0f);
    float *out = (float *)dev((size_t)maxC * sh.n_heads * sh.head_dim * 4);
    if (cuda_att_prepare(smem_max) != 0)
        printf("(cuda_att_prepare failed)\n");
    printf("== attention (f16 KV): us per call (with the merge), KV GB/s or TFLOP/s\n");
    for (int C : Cs) {
        for (int B : Bs) {
            int per = (C + bs - 1) / bs;
            std::vector<int32_t> h(3 * (size_t)B + (size_t)B * per);
            std::vector<cu_att_item> items(B);
            for (int t = 0; t < B; t++) {
                h[t] = C - 1;                 /* pos */
                h[B + t] = 2 * B + t * per;   /* table offset within the same array (tables follow) */
                for (int k = 0; k < per; k++)
                    h[2 * B + (size_t)t * per + k] = t * per + k;
                items[t].t0 = t;
                items[t].nq = 1;
                items[t].n_pos = C;
            }
            int32_t *d = (int32_t *)dev(h.size() * 4);
            cu_att_item *di = (cu_att_item *)dev(items.size() * sizeof(cu_att_item));
            CK(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(di, items.data(), items.size() * sizeof(cu_att_item), cudaMemcpyHostToDevice));
            cu_tokinfo ti = { d, d + B, d, NULL };
            /* tab[t] is an offset into `tables`: point tables at the array start, offsets include 2B */
            cu_att_plan p;
            p.n_heads = sh.n_heads;
            p.n_kv_heads = sh.n_kv;
            p.head_dim = sh.head_dim;
            p.block_size = bs;
            p.scale = 1.0f / sqrtf((float)sh.head_dim);
            p.window = 0;
            p.softcap = 0.0f;
            p.q_tile = 1;
            p.tc = 0;
            p.mma = 0;
            long work = (long)B * sh.n_kv, want = (2L * n_sms + work - 1) / work;
            long chunk = ((C + want - 1) / want + 31) / 32 * 32;
            p.chunk = (int)chunk;
            p.n_splits = (int)((C + chunk - 1) / chunk);
            p.n_items = B;
            float *ws = (float *)dev(cuda_att_ws_floats(&p, B) * 4);
            double us = time_us([&] { cuda_attention(&p, di, qkv, ld, &ti, &kv, 0, ws, out, B, S); });
            double bytes = 2.0 * B * (double)C * kv_dim * 2;
            printf("decode B %3d x C %4d: %.1f us, %.0f GB/s of KV (%d splits of %d)\n", B, C, us, bytes / (us * 1e-6) / 1e9,
                   p.n_splits, p.chunk);
            cudaFree(ws);
            cudaFree(d);
            cudaFree(di);
        }
    }
    /* prefill: one sequence of P tokens in items of q_tile tokens; kernel 2: mma.sync, 1: wmma, 0: scalar */
    int P = small ? 64 : 2048, group = sh.n_heads / sh.n_kv;
    static const char *const kname[3] = { "scalar kernel", "tensor cores (wmma)", "tensor cores (mma.sync)" };
    for (int kern = 2; kern >= 0; kern--) {
        int tc = kern > 0;
        int qt = tc ? cuda_att_tc_q_tile(group, sh.head_dim, smem_max) : cuda_att_q_tile(group, sh.head_dim, smem_max);
        if ((tc && (qt < 2 || !cuda_att_tc_enabled(sh.head_dim))) ||
            (kern == 2 && (!cuda_att_mma_ok(sh.head_dim, kv.kv16) || cuda_att_mma_prepare(sh.head_dim) != 0))) {
            printf("prefill 1 x %d, %s: not usable here\n", P, kname[kern]);
            continue;
        }
        int per = (P + bs - 1) / bs, ni = (P + qt - 1) / qt;
        std::vector<int32_t> h(2 * (size_t)P + per);
        std::vector<cu_att_item> items(ni);
        for (int t = 0; t < P; t++) {
            h[t] = t;
            h[P + t] = 2 * P;
        }
        for (int k = 0; k < per; k++)
            h[2 * (size_t)P + k] = k;
        int max_npos = 1;
        for (int i = 0; i < ni; i++) {
            items[i].t0 = i * qt;
            items[i].nq = P - i * qt < qt ? P - i * qt : qt;
            items[i].n_pos = items[i].t0 + items[i].nq;
            max_npos = items[i].n_pos;
        }
        int32_t *d = (int32_t *)dev(h.size() * 4);
        cu_att_item *di = (cu_att_item *)dev(items.size() * sizeof(cu_att_item));
        CK(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(di, items.data(), items.size() * sizeof(cu_att_item), cudaMemcpyHostToDevice));
        cu_tokinfo ti = { d, d + P, d, NULL };
        cu_att_plan p;
        p.n_heads = sh.n_heads;
        p.n_kv_heads = sh.n_kv;
        p.head_dim = sh.head_dim;
        p.block_size = bs;
        p.scale = 1.0f / sqrtf((float)sh.head_dim);
        p.window = 0;
        p.softcap = 0.0f;
        p.q_tile = qt;
        p.tc = tc;
        p.mma = kern == 2;
        long work = (long)ni * sh.n_kv, want = (2L * n_sms + work - 1) / work;
        long chunk = ((max_npos + want - 1) / want + 31) / 32 * 32;
        p.chunk = (int)chunk;
        p.n_splits = (int)((max_npos + chunk - 1) / chunk);
        p.n_items = ni;
        float *ws = (float *)dev(cuda_att_ws_floats(&p, P) * 4);
        int saved = reps;
        reps = reps > 5 ? 5 : reps;
        double us = time_us([&] { cuda_attention(&p, di, qkv, ld, &ti, &kv, 0, ws, out, P, S); });
        reps = saved;
        double flop = 4.0 * sh.n_heads * sh.head_dim * (double)P * (P + 1) / 2.0;
        printf("prefill 1 x %d, %s (q_tile %d, %d splits): %.1f us, %.1f TFLOP/s (causal)\n", P, kname[kern],
               qt, p.n_splits, us, flop / (us * 1e-6) / 1e12);
        cudaFree(ws);
        cudaFree(d);
        cudaFree(di);
    }
    cudaFree(kv.pool[0].k);
    cudaFree(kv.pool[0].v);
    cudaFree(qkv);
    cudaFree(out);
}

static void bench_small_kernels(const shape &sh)
{
    printf("== element-wise kernels: us per call\n");
    int n_max = 256, ld = sh.n_heads * sh.head_dim + 2 * sh.n_kv * sh.head_dim;
    float *x = dev_f32((size_t)n_max * (2 * sh.hidden > ld ? 2 * sh.hidden : ld), 1.0f);
    float *y = (float *)dev((size_t)n_max * 2 * sh.hidden * 4);
    float *w = dev_f32((size_t)sh.dim, 1.0f);
    for (int n : { 1, 256 }) {
        double a = time_us([&] { cuda_rmsnorm(x, sh.dim, w, y, sh.dim, n, sh.dim, 1e-5f, NULL, S); });
        double b = time_us([&] { cuda_swiglu(x, 2 * sh.hidden, y, sh.hidden, n, 0, S); });
        printf("n %3d: rmsnorm %.1f us, swiglu %.1f us\n", n, a, b);
    }
    cudaFree(x);
    cudaFree(y);
    cudaFree(w);
}

static void bench_sampler(const shape &sh)
{
    printf("== device sampler (vocab %d): us per launch\n", sh.vocab);
    int maxB = 256;
    float *lg = dev_f32((size_t)maxB * sh.vocab, 16.0f);
    std::vector<llm_sampling_row> rows(maxB);
    llm_sampling_row *dr = (llm_sampling_row *)dev(maxB * sizeof(llm_sampling_row));
    int32_t *ids = (int32_t *)dev(maxB * 4), *nt = (int32_t *)dev(maxB * 4), *pen = (int32_t *)dev(8);
    float *lps = (float *)dev(maxB * 4);
    llm_token_logprob *top = (llm_token_logprob *)dev((size_t)maxB * LLM_SAMPLING_MAX_LOGPROBS * sizeof(llm_token_logprob));
    const char *names[] = { "greedy + 5 logprobs", "temperature 1", "temperature 0.8, top-p 0.95, 5 logprobs",
                            "temperature 0.7, top-k 40, top-p 0.9, min-p 0.05" };
    for (int c = 0; c < 4; c++) {
        for (int B : { 1, 32, 256 }) {
            for (int r = 0; r < B; r++) {
                llm_sampling_row &q = rows[r];
                memset(&q, 0, sizeof q);
                q.p.temperature = c == 0 ? 0.0f : c == 2 ? 0.8f : c == 3 ? 0.7f : 1.0f;
                q.p.top_p = c == 2 ? 0.95f : c == 3 ? 0.9f : 1.0f;
                q.p.top_k = c == 3 ? 40 : 0;
                q.p.min_p = c == 3 ? 0.05f : 0.0f;
                q.p.repetition_penalty = 1.0f;
                q.p.n_logprobs = c == 0 || c == 2 ? 5 : 0;
                q.row = r;
                q.u = (r * 0.618034) - (int)(r * 0.618034);
            }
            CK(cudaMemcpy(dr, rows.data(), B * sizeof(llm_sampling_row), cudaMemcpyHostToDevice));
            for (int th : { 256, 1024 }) {
                double us = time_us([&] { cuda_sample(lg, sh.vocab, B, dr, pen, ids, lps, top, nt, th, S); });
                printf("%-48s B %3d, %4d threads a row: %.1f us (%.2f us a row)\n", names[c], B, th, us, us / B);
            }
        }
    }
    cudaFree(lg); cudaFree(dr); cudaFree(ids); cudaFree(nt); cudaFree(pen); cudaFree(lps); cudaFree(top);
}

int main(int argc, char **argv)
{
    shape sh = { 3072, 8192, 24, 8, 128, 128256 };
    const char *parts = "designs,matrices,attention,elementwise,sampler";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--small") == 0 && atoi(argv[i + 1]))
            {
            sh = shape{ 256, 512, 8, 2, 32, 1000 };
            small = 1;
        }
        else if (strcmp(argv[i], "--parts") == 0)
            parts = argv[i + 1];
        else if (strcmp(argv[i], "--types") == 0)
            types_arg = argv[i + 1];
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : reps;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* each line as it is measured, whatever stops the run */
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaStreamCreateWithFlags(&S, cudaStreamNonBlocking));
    printf("%s, %d SMs; dim %d, hidden %d, heads %d/%d x %d, vocab %d; %d reps\n", prop.name,
           prop.multiProcessorCount, sh.dim, sh.hidden, sh.n_heads, sh.n_kv, sh.head_dim, sh.vocab, reps);
    cu_mm_ctx mm;
    memset(&mm, 0, sizeof mm);
    mm.stream = S;
    mm.sms = prop.multiProcessorCount;
    if (cublasCreate(&mm.blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(mm.blas, S) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublas init failed\n");
        return 1;
    }
    if (cuda_tcgemm_prepare() != 0)
        printf("(cuda_tcgemm_prepare failed: the tensor-core GEMM rows are cuBLAS)\n");
    void *blas_ws = dev(32 << 20);
    cublasSetWorkspace(mm.blas, blas_ws, 32 << 20);
    int kmax = sh.hidden > sh.dim ? sh.hidden : sh.dim;
    mm.xq = (int8_t *)dev((size_t)CU_GEMV_MAX_TOKENS * kmax);
    mm.xds = (float *)dev((size_t)CU_GEMV_MAX_TOKENS * (kmax / LLM_QK) * 2 * sizeof(float));
    mm.xq_k = kmax;
    if (strstr(parts, "designs"))
        bench_gemv_designs(sh, &mm);
    if (strstr(parts, "matrices"))
        bench_matrices(sh, &mm);
    if (strstr(parts, "attention"))
        bench_attention(sh, prop.multiProcessorCount, prop.sharedMemPerBlockOptin);
    if (strstr(parts, "elementwise"))
        bench_small_kernels(sh);
    if (strstr(parts, "sampler"))
        bench_sampler(sh);
    cublasDestroy(mm.blas);
    cudaFree(blas_ws);
    cudaFree(mm.xq);
    cudaFree(mm.xds);
    cudaFree(mm.act16);
    cudaFree(mm.deq);
    CK(cudaStreamDestroy(S));
    printf("done\n");
    return 0;
}
