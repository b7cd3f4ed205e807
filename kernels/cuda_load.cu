/* Weight upload: the memory-mapped tensors stream through two pinned staging
 * buffers, one per copy stream, so the host's reads of the mapping (page faults,
 * repacking of quantised blocks) overlap the DMA of the previous chunk.
 * Quantised blocks are split into quants and scales on the host while staging
 * (layout in cuda_internal.cuh), each chunk's rows shared among the load
 * threads (the repacking of K-quant blocks costs 1-2 ns a weight on one core:
 * seconds for a 3B model, where the copy takes a tenth of one). Also builds
 * the rope cos/sin tables. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cuda_internal.cuh"
#include "gguf_quants.h"
#include "parallel.h"

#define STAGE_BYTES ((size_t)64 << 20)

typedef struct {
    cudaStream_t st[2];
    uint8_t     *pin[2];
    cudaEvent_t  ev[2];
    int          used[2], cur;
    size_t       bytes;
    int          n_kq[16];    /* matrices uploaded from file blocks, by kq_types entry */
    unsigned     kq_on;       /* the kq_types entries LLM_CUDA_KQ leaves in (bit i: entry i) */
    int          threads;     /* host threads that stage a chunk */
} uploader;

#define LOAD_ROWS_MIN 64 /* rows a thread at least: fewer are not worth a thread */

/* f(r0, r1) over rows [0, n), split among up to u->threads threads (llm_parallel_run: the caller's one of
 * them; a thread that cannot be started leaves its rows to the caller). */
template <class F> static void par_rows(const uploader *u, int n, F f)
{
    struct job {
        F  *f;
        int r0, r1;
    } jobs[LLM_PARALLEL_MAX];
    int t = n / LOAD_ROWS_MIN < u->threads ? n / LOAD_ROWS_MIN : u->threads;
    t = t < 1 ? 1 : t;
    for (int i = 0; i < t; i++)
        jobs[i] = { &f, (int)((long)n * i / t), (int)((long)n * (i + 1) / t) };
    llm_parallel_run(t, [](void *a) -> void * {
        const job *j = (const job *)a;
        (*j->f)(j->r0, j->r1);
        return NULL;
    }, jobs, sizeof(job));
}

static int fail(llm_err *err, const char *what, cudaError_t e)
{
    llm_err_set(err, "cuda backend: %s: %s", what, cudaGetErrorString(e));
    return -1;
}

static void up_free(uploader *u)
{
    for (int i = 0; i < 2; i++) {
        if (u->st[i] != NULL)
            cudaStreamSynchronize(u->st[i]);
        if (u->ev[i] != NULL)
            cudaEventDestroy(u->ev[i]);
        if (u->st[i] != NULL)
            cudaStreamDestroy(u->st[i]);
        if (u->pin[i] != NULL)
            cudaFreeHost(u->pin[i]);
    }
}

static int up_init(uploader *u, llm_err *err)
{
    memset(u, 0, sizeof(*u));
    for (int i = 0; i < 2; i++) {
        cudaError_t e;
        if ((e = cudaStreamCreateWithFlags(&u->st[i], cudaStreamNonBlocking)) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&u->ev[i], cudaEventDisableTiming)) != cudaSuccess ||
            (e = cudaHostAlloc((void **)&u->pin[i], STAGE_BYTES, cudaHostAllocDefault)) != cudaSuccess) {
            up_free(u);
            return fail(err, "cannot set up pinned staging buffers", e);
        }
    }
    return 0;
}

/* The next free staging buffer (waits for the copy that last used it). */
static uint8_t *up_next(uploader *u)
{
    int i = u->cur;
    if (u->used[i])
        cudaEventSynchronize(u->ev[i]);
    return u->pin[i];
}

static int up_send(uploader *u, void *dst, size_t n, void *dst2, size_t off2, size_t n2, llm_err *err)
{
    int i = u->cur;
    cudaError_t e = cudaMemcpyAsync(dst, u->pin[i], n, cudaMemcpyHostToDevice, u->st[i]);
    if (e == cudaSuccess && dst2 != NULL)
        e = cudaMemcpyAsync(dst2, u->pin[i] + off2, n2, cudaMemcpyHostToDevice, u->st[i]);
    if (e == cudaSuccess)
        e = cudaEventRecord(u->ev[i], u->st[i]);
    if (e != cudaSuccess)
        return fail(err, "host-to-device copy", e);
    u->used[i] = 1;
    u->cur ^= 1;
    u->bytes += n + (dst2 != NULL ? n2 : 0);
    return 0;
}

static void *dev_alloc(cu_state *st, size_t bytes, llm_err *err)
{
    if (st->n_allocs == st->cap_allocs) {
        int nc = st->cap_allocs ? 2 * st->cap_allocs : 64;
        void **na = (void **)realloc(st->allocs, (size_t)nc * sizeof(void *));
        if (na == NULL) {
            llm_err_set(err, "cuda backend: out of host memory");
            return NULL;
        }
        st->allocs = na;
        st->cap_allocs = nc;
    }
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes > 0 ? bytes : 1);
    if (e != cudaSuccess) {
        llm_err_set(err, "cuda backend: out of device memory for weights (%zu MiB more after %zu MiB): %s",
                    bytes >> 20, st->weight_bytes >> 20, cudaGetErrorString(e));
        return NULL;
    }
    st->allocs[st->n_allocs++] = p;
    st->weight_bytes += bytes;
    return p;
}

static size_t dev_row_bytes(int type, int cols)
{
    switch (type) {
    case LLM_F32:  return (size_t)cols * 4;
    case LLM_F16:
    case LLM_BF16: return (size_t)cols * 2;
    case LLM_Q8_0: return (size_t)cols;
    case LLM_Q4_0:
    case CU_IQ4:
    case CU_MX4:
    case CU_Q4_M:
    case CU_Q5_M:
    case CU_Q6:
    case CU_Q2_M:
    case CU_Q3:    return (size_t)cols / 2;
    default:       return 0;
    }
}

/* Allocate a device matrix of `rows` rows of `cols` elements. */
static int mat_alloc(cu_state *st, cu_mat *M, int type, int rows, int cols, llm_err *err)
{
    M->type = type;
    M->rows = rows;
    M->cols = cols;
    M->row_bytes = dev_row_bytes(type, cols);
    M->scales = NULL;
    if ((M->w = dev_alloc(st, M->row_bytes * (size_t)rows, err)) == NULL)
        return -1;
    if (cu_type_q(type)) {
        M->scales = (const uint16_t *)dev_alloc(st, (size_t)rows * (size_t)(cols / LLM_QK) * 2 * cu_type_nsc(type),
                                                err);
        if (M->scales == NULL)
            return -1;
    }
    return 0;
}

/* The GGUF types uploaded from the file's own blocks (t->src: matrices the loader would convert to Q8_0 for
 * the other backends): the device type each becomes, its block (elements, bytes), its names and the bits a
 * weight it takes on the device. */
static const struct {
    uint32_t    src;
    int         dev, qk, bytes;
    const char *file, *dev_name, *bits;
} kq_types[] = {
    { GGML_Q2_K, CU_Q2_M, LLM_QK_K, 84, "q2_K", "q2_m", "6" },
    { GGML_Q3_K, CU_Q3, LLM_QK_K, 110, "q3_K", "q3", "5" },
    { GGML_Q4_K, CU_Q4_M, LLM_QK_K, 144, "q4_K", "q4_m", "5" },
    { GGML_Q5_K, CU_Q5_M, LLM_QK_K, 176, "q5_K", "q5_m", "6" },
    { GGML_Q6_K, CU_Q6, LLM_QK_K, 210, "q6_K", "q6", "7" },
    { GGML_IQ4_XS, CU_IQ4, LLM_QK_K, 136, "iq4_xs", "iq4", "4.5" },
    { GGML_IQ4_NL, CU_IQ4, LLM_QK, 18, "iq4_nl", "iq4", "4.5" },
    { GGML_MXFP4, CU_MX4, LLM_QK, 17, "mxfp4", "mx4", "4.5" },
    { GGML_Q4_1, CU_Q4_M, LLM_QK, 20, "q4_1", "q4_m", "5" },
    { GGML_Q5_0, CU_Q5_M, LLM_QK, 22, "q5_0", "q5_m", "6" },
    { GGML_Q5_1, CU_Q5_M, LLM_QK, 24, "q5_1", "q5_m", "6" },
};
#define N_KQ ((int)(sizeof(kq_types) / sizeof(kq_types[0])))
static_assert(N_KQ <= (int)(sizeof(((uploader *)0)->n_kq) / sizeof(int)), "uploader.n_kq: one per kq_types entry");

/* The kq_types entries LLM_CUDA_KQ (a list of file types; q8_0: none) leaves in: all when unset
 * (engine/backend.c keeps the same ones). */
static unsigned kq_listed(void)
{
    const char *list = getenv("LLM_CUDA_KQ");
    unsigned on = 0;
    for (int i = 0; i < N_KQ; i++)
        on |= gguf_type_listed(list, kq_types[i].file) ? 1u << i : 0u;
    return on;
}

/* kq_types' entry for matrix t: the file type of blocks it kept, when its rows take them and the entry is on;
 * else -1. */
static int kq_find(const uploader *u, const llm_tensor *t)
{
    for (int i = 0; i < N_KQ && t->src != NULL; i++)
        if (kq_types[i].src == t->src_type)
            return t->ne[0] % kq_types[i].qk == 0 && (u->kq_on >> i & 1u) ? i : -1;
    return -1;
}

/* The device type of matrix t: kq_types' for the blocks it kept, else its type. */
static int dev_type(const uploader *u, const llm_tensor *t)
{
    int i = kq_find(u, t);
    return i >= 0 ? kq_types[i].dev : (int)t->type;
}

/* The converters below: nr rows (cols elements each) of the file's blocks at s, of kq_types' bytes each (the
 * parameter sbb or bb), to a device type's quants [nr][cols/2] (qs) and its
 * cu_type_nsc scale words a 32-block (sc). */

/* Q4_K (five 0) or Q5_K (five 1) super-blocks to CU_Q4_M / CU_Q5_M: quants' low 4 bits; (d, m) fp16 pairs,
 * for CU_Q5_M then the fifth bits' 32-bit word; a sub-block's 6-bit scale and min times the super-block's
 * d / dmin, rounded to fp16 once (engine/cpu/repack.c's Q4_M / Q5_M do the same). Q4_K: fp16 d and dmin, 12
 * bytes of 6-bit scales and mins, 128 of nibbles; Q5_K: the same with 32 bytes of fifth bits (bit g of byte
 * l: element l of sub-block g) before the nibbles. */
static void q45k_to_q4m(const uint8_t *s, size_t sbb, int nr, int cols, uint8_t *qs, uint16_t *sc, int five)
{
    const size_t srow = sbb * (size_t)(cols / LLM_QK_K);
    const int nb = cols / LLM_QK, nsc = five ? 4 : 2;
    for (int i = 0; i < nr; i++)
        for (int b = 0; b < nb; b++) {
            const uint8_t *sb = s + (size_t)i * srow + (size_t)(b / 8) * sbb, *nib = sb + (five ? 48 : 16);
            const int g = b % 8;
            float scale, min;
            gguf_q4_K_sub(sb, g, &scale, &min, NULL);
            uint16_t *o = sc + ((size_t)i * nb + b) * (size_t)nsc;
            o[0] = llm_f32_to_fp16(scale);
            o[1] = llm_f32_to_fp16(min);
            uint8_t q[LLM_QK];
            uint32_t h = 0;
            for (int l = 0; l < LLM_QK; l++) {
                uint8_t v = nib[32 * (g / 2) + l];
                q[l] = (uint8_t)(g % 2 ? v >> 4 : v & 0xF);
                h |= five ? (uint32_t)((sb[16 + l] >> g) & 1) << l : 0u;
            }
            if (five) {
                o[2] = (uint16_t)(h & 0xffffu);
                o[3] = (uint16_t)(h >> 16);
            }
            uint8_t *d = qs + (size_t)i * (size_t)(cols / 2) + (size_t)b * 16;
            for (int j = 0; j < 16; j++)
                d[j] = (uint8_t)(q[j] | q[j + 16] << 4);
        }
}

/* Q6_K super-blocks (128 bytes of low nibbles, 64 of high 2 bits, 16 int8 scales, fp16 d) to CU_Q6
 * (cuda_internal.cuh): 6 words a block. 32-block g of a super-block is its half g / 4's elements with k = g % 4
 * (gguf_quants.c's block_q6_K); their groups of 16 take the int8 scales 2k and 2k + 1 of that half, times d,
 * rounded to fp16 once (engine/cpu/repack.c's Q6 does the same). */
static void q6k_to_q6(const uint8_t *s, size_t sbb, int nr, int cols, uint8_t *qs, uint16_t *sc)
{
    const size_t srow = sbb * (size_t)(cols / LLM_QK_K);
    const int nb = cols / LLM_QK;
    for (int i = 0; i < nr; i++)
        for (int b = 0; b < nb; b++) {
            const uint8_t *sb = s + (size_t)i * srow + (size_t)(b / 8) * sbb;
            const int g = b % 8, half = g / 4, k = g % 4;
            const uint8_t *ql = sb + 64 * half, *qh = sb + 128 + 32 * half;
            const int8_t *gs = (const int8_t *)(sb + 192) + 8 * half + 2 * k;
            const float d = llm_fp16_to_f32((uint16_t)(sb[208] | sb[209] << 8));
            uint16_t *o = sc + ((size_t)i * nb + b) * 6;
            o[0] = llm_f32_to_fp16(d * (float)gs[0]);
            o[1] = llm_f32_to_fp16(d * (float)gs[1]);
            uint32_t hw[2] = { 0, 0 };
            uint8_t *q4 = qs + (size_t)i * (size_t)(cols / 2) + (size_t)b * 16;
            for (int l = 0; l < LLM_QK; l++) {
                int lo = (ql[l + 32 * (k % 2)] >> (4 * (k / 2))) & 0xF, hi = (qh[l] >> (2 * k)) & 3;
                if (l < 16)
                    q4[l] = (uint8_t)lo;
                else
                    q4[l - 16] |= (uint8_t)(lo << 4);
                hw[l / 16] |= (uint32_t)hi << (8 * (l % 4) + 2 * (l % 16 / 4)); /* cu_q6_hi's order */
            }
            o[2] = (uint16_t)(hw[0] & 0xffffu);
            o[3] = (uint16_t)(hw[0] >> 16);
            o[4] = (uint16_t)(hw[1] & 0xffffu);
            o[5] = (uint16_t)(hw[1] >> 16);
        }
}

/* Q2_K super-blocks (q2 1) to CU_Q2_M, or Q3_K ones to CU_Q3 (cuda_internal.cuh): each super-block folded once
 * (gguf_q23_K_fold: its quants as 0..7, its 16 groups' fp16 (d, m); CU_Q3 keeps the d, its m being 4 d), then
 * 32-block g takes groups 2g and 2g + 1 as its halves. */
static void q23k_to_q3m(const uint8_t *s, size_t sbb, int nr, int cols, uint8_t *qs, uint16_t *sc, int q2)
{
    const size_t srow = sbb * (size_t)(cols / LLM_QK_K);
    const int nb = cols / LLM_QK;
    uint8_t q[LLM_QK_K];
    uint16_t dm[16][2];
    for (int i = 0; i < nr; i++)
        for (int b = 0; b < nb; b++) {
            const int g = b % 8;
            if (g == 0)
                gguf_q23_K_fold(s + (size_t)i * srow + (size_t)(b / 8) * sbb, q2, q, dm);
            uint16_t *o = sc + ((size_t)i * nb + b) * (q2 ? 4 : 2);
            o[0] = dm[2 * g][0];
            o[1] = dm[2 * g + 1][0];
            if (q2) {
                o[2] = dm[2 * g][1];
                o[3] = dm[2 * g + 1][1];
            }
            uint8_t *d4 = qs + (size_t)i * (size_t)(cols / 2) + (size_t)b * 16;
            for (int j = 0; j < 16; j++)
                d4[j] = (uint8_t)(q[32 * g + j] | q[32 * g + 16 + j] << 4);
        }
}

/* IQ4_NL (xs 0: blocks of 32, fp16 d then 16 bytes of nibbles) or IQ4_XS (xs 1: super-blocks of 256, fp16 d,
 * 16-bit scales_h, 4 bytes scales_l, 128 of nibbles) to CU_IQ4: the nibbles as they are (ggml's order is
 * Q4_0's), an fp16 d a 32-block (IQ4_XS: d times its 6-bit scale - 32, rounded once). */
static void iq4_to_dev(const uint8_t *s, size_t bb, int nr, int cols, uint8_t *qs, uint16_t *sc, int xs)
{
    const int nb = cols / LLM_QK;
    const size_t srow = bb * (size_t)(cols / (xs ? LLM_QK_K : LLM_QK));
    for (int i = 0; i < nr; i++)
        for (int b = 0; b < nb; b++) {
            const uint8_t *row = s + (size_t)i * srow, *nib;
            uint16_t d;
            if (xs) {
                const uint8_t *sb = row + (size_t)(b / 8) * bb;
                const int g = b % 8, sh = sb[2] | sb[3] << 8;
                const int ls = ((sb[4 + g / 2] >> (4 * (g % 2))) & 0xF) | ((sh >> (2 * g)) & 3) << 4;
                d = llm_f32_to_fp16(llm_fp16_to_f32((uint16_t)(sb[0] | sb[1] << 8)) * (float)(ls - 32));
                nib = sb + 8 + 16 * g;
            } else {
                const uint8_t *blk = row + (size_t)b * bb;
                d = (uint16_t)(blk[0] | blk[1] << 8);
                nib = blk + 2;
            }
            sc[(size_t)i * nb + b] = d;
            memcpy(qs + (size_t)i * (size_t)(cols / 2) + (size_t)b * 16, nib, 16);
        }
}

/* MXFP4 (e, then 16 bytes of FP4 codes in Q4_0's order) to CU_MX4: the codes as they are, d = 2^(e - 128) in
 * fp16 (exact: upload_rows checked every e first). */
static void mxfp4_to_dev(const uint8_t *s, int nr, int cols, uint8_t *qs, uint16_t *sc)
{
    const int nb = cols / LLM_QK;
    for (int i = 0; i < nr; i++)
        for (int b = 0; b < nb; b++) {
            const uint8_t *blk = s + ((size_t)i * nb + b) * 17;
            sc[(size_t)i * nb + b] = llm_f32_to_fp16(ldexpf(1.0f, (int)blk[0] - 128));
            memcpy(qs + (size_t)i * (size_t)(cols / 2) + (size_t)b * 16, blk + 1, 16);
        }
}

/* 0 when every MXFP4 block of rows x cols at s has a power of two fp16 holds exactly (e 104 .. 143: no released
 * gpt-oss file has another); else -1 with err saying how to run the matrix as Q8_0 instead. */
static int mxfp4_check(const uint8_t *s, int rows, int cols, llm_err *err)
{
    size_t n = (size_t)rows * (size_t)(cols / LLM_QK);
    for (size_t i = 0; i < n; i++)
        if (s[i * 17] < 104 || s[i * 17] > 143) {
            llm_err_set(err, "cuda backend: an MXFP4 block's scale 2^%d is outside fp16's range; set LLM_CUDA_KQ to "
                        "the other file types (or q8_0) to run MXFP4 matrices as Q8_0", (int)s[i * 17] - 127);
            return -1;
        }
    return 0;
}

/* Q4_1 (d, m, 16 bytes of nibbles; w = d q + m), Q5_0 (d, 32 fifth bits, nibbles; w = d (q - 16)) or Q5_1
 * (d, m, fifth bits, nibbles; w = d q + m) blocks to CU_Q4_M / CU_Q5_M, exactly: the nibbles as they are
 * (ggml's order is Q4_0's), the min as -m or 16 d (a power of two: exact), Q5's fifth bits as they are (bit
 * j: element j, CU_Q5_M's order). */
static void q451_to_dev(const uint8_t *s, size_t bb, int nr, int cols, uint8_t *qs, uint16_t *sc, uint32_t t)
{
    const int nb = cols / LLM_QK, five = t != GGML_Q4_1, nsc = five ? 4 : 2, min = t != GGML_Q5_0;
    for (int i = 0; i < nr; i++)
        for (int b = 0; b < nb; b++) {
            const uint8_t *blk = s + ((size_t)i * nb + b) * bb;
            uint16_t *o = sc + ((size_t)i * nb + b) * (size_t)nsc;
            const uint16_t d = (uint16_t)(blk[0] | blk[1] << 8);
            o[0] = d;
            o[1] = min ? (uint16_t)((blk[2] | blk[3] << 8) ^ 0x8000) : llm_f32_to_fp16(16.0f * llm_fp16_to_f32(d));
            const uint8_t *h = blk + (min ? 4 : 2);
            if (five) {
                o[2] = (uint16_t)(h[0] | h[1] << 8);
                o[3] = (uint16_t)(h[2] | h[3] << 8);
            }
            memcpy(qs + (size_t)i * (size_t)(cols / 2) + (size_t)b * 16, five ? h + 4 : blk + 4, 16);
        }
}

/* Copy tensor src into rows [row0, row0 + src rows) of M (from its file blocks for the kq_types). */
static int upload_rows(uploader *u, const cu_mat *M, int row0, const llm_tensor *src, llm_err *err)
{
    int rows = (int)src->ne[1], cols = M->cols, type = M->type;
    size_t drow = M->row_bytes;
    const int k = kq_find(u, src), kq = k >= 0;
    const uint8_t *s = (const uint8_t *)(kq ? src->src : src->data);
    if (drow == 0 || drow + (size_t)(cols / LLM_QK) * 12 > STAGE_BYTES) {
        llm_err_set(err, "cuda backend: a row of %d elements does not fit the %zu MiB staging buffer", cols,
                    STAGE_BYTES >> 20);
        return -1;
    }
    if (kq) { /* repacked from the file's super-blocks */
        const int nb = cols / LLM_QK;
        const size_t scb = (size_t)nb * 2 * cu_type_nsc(type); /* scale bytes a row */
        const uint32_t ft = kq_types[k].src;
        const size_t bb = (size_t)kq_types[k].bytes, srow = bb * (size_t)(cols / kq_types[k].qk);
        if (ft == GGML_MXFP4 && mxfp4_check(s, rows, cols, err) != 0)
            return -1;
        int per = (int)(STAGE_BYTES / (drow + scb));
        u->n_kq[k]++;
        for (int r = 0; r < rows; r += per) {
            int nr = rows - r < per ? rows - r : per;
            uint8_t *pin = up_next(u);
            uint16_t *sc = (uint16_t *)(pin + (size_t)nr * drow);
            const size_t nsw = (size_t)nb * cu_type_nsc(type); /* scale words a row */
            par_rows(u, nr, [&](int r0, int r1) {
                const uint8_t *sr = s + (size_t)(r + r0) * srow;
                uint8_t *q = pin + (size_t)r0 * drow;
                uint16_t *w = sc + (size_t)r0 * nsw;
                if (ft == GGML_Q6_K)
                    q6k_to_q6(sr, bb, r1 - r0, cols, q, w);
                else if (ft == GGML_Q2_K || ft == GGML_Q3_K)
                    q23k_to_q3m(sr, bb, r1 - r0, cols, q, w, ft == GGML_Q2_K);
                else if (ft == GGML_IQ4_XS || ft == GGML_IQ4_NL)
                    iq4_to_dev(sr, bb, r1 - r0, cols, q, w, ft == GGML_IQ4_XS);
                else if (ft == GGML_MXFP4)
                    mxfp4_to_dev(sr, r1 - r0, cols, q, w);
                else if (ft == GGML_Q4_K || ft == GGML_Q5_K)
                    q45k_to_q4m(sr, bb, r1 - r0, cols, q, w, ft == GGML_Q5_K);
                else
                    q451_to_dev(sr, bb, r1 - r0, cols, q, w, ft);
            });
            if (up_send(u, (uint8_t *)M->w + (size_t)(row0 + r) * drow, (size_t)nr * drow,
                        (uint8_t *)M->scales + (size_t)(row0 + r) * scb, (size_t)nr * drow, (size_t)nr * scb, err))
                return -1;
        }
        return 0;
    }
    if (!cu_type_q(type)) {
        int per = (int)(STAGE_BYTES / drow);
        for (int r = 0; r < rows; r += per) {
            int nr = rows - r < per ? rows - r : per;
            uint8_t *pin = up_next(u);
            par_rows(u, nr, [&](int r0, int r1) {
                memcpy(pin + (size_t)r0 * drow, s + (size_t)(r + r0) * drow, (size_t)(r1 - r0) * drow);
            });
            if (up_send(u, (uint8_t *)M->w + (size_t)(row0 + r) * drow, (size_t)nr * drow, NULL, 0, 0, err))
                return -1;
        }
        return 0;
    }
    int nb = cols / LLM_QK;
    size_t bb = type == LLM_Q8_0 ? sizeof(llm_block_q8_0) : sizeof(llm_block_q4_0);
    size_t qb = type == LLM_Q8_0 ? LLM_QK : LLM_QK / 2;   /* quant bytes per block */
    size_t srow = bb * (size_t)nb, srow_dev = drow + (size_t)nb * 2;
    int per = (int)(STAGE_BYTES / srow_dev);
    for (int r = 0; r < rows; r += per) {
        int nr = rows - r < per ? rows - r : per;
        uint8_t *pin = up_next(u);
        uint8_t *qs = pin, *sc = pin + (size_t)nr * drow;
        par_rows(u, nr, [&](int r0, int r1) {
            for (int i = r0; i < r1; i++) {
                const uint8_t *row = s + (size_t)(r + i) * srow;
                for (int b = 0; b < nb; b++) {
                    const uint8_t *blk = row + (size_t)b * bb;
                    memcpy(sc + ((size_t)i * nb + b) * 2, blk, 2);               /* fp16 d */
                    memcpy(qs + (size_t)i * drow + (size_t)b * qb, blk + 2, qb);  /* quants */
                }
            }
        });
        if (up_send(u, (uint8_t *)M->w + (size_t)(row0 + r) * drow, (size_t)nr * drow,
                    (uint8_t *)M->scales + (size_t)(row0 + r) * nb * 2, (size_t)nr * drow, (size_t)nr * nb * 2,
                    err))
            return -1;
    }
    return 0;
}

static int upload_mat(cu_state *st, uploader *u, cu_mat *M, const llm_tensor *t, llm_err *err)
{
    if (mat_alloc(st, M, dev_type(u, t), (int)t->ne[1], (int)t->ne[0], err) != 0)
        return -1;
    return upload_rows(u, M, 0, t, err);
}

/* One device matrix when the dtypes agree (rows stacked), else one per tensor. */
static int upload_set(cu_state *st, uploader *u, cu_matset *S, const llm_tensor *const *t, int n, llm_err *err)
{
    int same = 1, rows = 0;
    for (int i = 0; i < n; i++) {
        same &= dev_type(u, t[i]) == dev_type(u, t[0]);
        rows += (int)t[i]->ne[1];
    }
    if (!same) {
        S->n = n;
        for (int i = 0; i < n; i++)
            if (upload_mat(st, u, &S->m[i], t[i], err) != 0)
                return -1;
        return 0;
    }
    S->n = 1;
    if (mat_alloc(st, &S->m[0], dev_type(u, t[0]), rows, (int)t[0]->ne[0], err) != 0)
        return -1;
    for (int i = 0, r0 = 0; i < n; r0 += (int)t[i]->ne[1], i++)
        if (upload_rows(u, &S->m[0], r0, t[i], err) != 0)
            return -1;
    return 0;
}

static const float *upload_vec(cu_state *st, uploader *u, const llm_tensor *t, llm_err *err)
{
    cu_mat M;
    if (upload_mat(st, u, &M, t, err) != 0)
        return NULL;
    return (const float *)M.w;
}

/* A mixture of experts' router, experts (each its own device matrix; their descriptions copied to the device
 * for the kernels, the first held expert's kept in D->exp0: expert 0's, or with expert parallelism the device's
 * first, the others' descriptions zero) and Qwen 2 MoE's shared expert gate (GraniteMoeShared's shared expert
 * has none). */
static int upload_experts(cu_state *st, uploader *u, const llm_layer *L, cu_layer *D, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    int n = 3 * c->n_expert, e0, e1;
    llm_experts_held(c, &e0, &e1);
    cu_mat *h = (cu_mat *)calloc((size_t)n, sizeof(cu_mat));
    if (h == NULL) {
        llm_err_set(err, "cuda backend: out of host memory");
        return -1;
    }
    int rc = upload_mat(st, u, &D->router, &L->ffn_gate_inp, err);
    for (int i = 0; i < n && rc == 0; i++)
        rc = i / 3 >= e0 && i / 3 < e1 ? upload_mat(st, u, &h[i], &L->experts[i], err) : 0;
    if (rc == 0 && L->shexp_gate.data != NULL && (D->shexp_gate = upload_vec(st, u, &L->shexp_gate, err)) == NULL)
        rc = -1;
    cu_mat *d = rc == 0 ? (cu_mat *)dev_alloc(st, (size_t)n * sizeof(cu_mat), err) : NULL;
    if (d != NULL) {
        cudaError_t e = cudaMemcpy(d, h, (size_t)n * sizeof(cu_mat), cudaMemcpyHostToDevice);
        if (e != cudaSuccess)
            rc = fail(err, "expert table upload", e);
        memcpy(D->exp0, h + 3 * e0, sizeof(D->exp0));
        D->experts = d;
    } else
        rc = -1;
    free(h);
    return rc;
}

/* Rope tables [seq_len][head_dim/2] of cos and sin: the model's (llm_rope_freq, llm_rope_mscale), or with swa
 * the sliding-window layers' (llm_rope_freq_swa, unscaled), as engine/cpu/rope.c builds them. */
static int upload_rope(cu_state *st, int swa, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    int half = c->head_dim / 2;
    size_t n = (size_t)c->seq_len * (size_t)half;
    float *cs = (float *)malloc(2 * n * sizeof(float));
    double *freq = (double *)malloc((size_t)half * sizeof(double));
    if (cs == NULL || freq == NULL) {
        free(cs);
        free(freq);
        llm_err_set(err, "cuda backend: out of host memory for rope tables");
        return -1;
    }
    for (int i = 0; i < half; i++)
        freq[i] = swa ? llm_rope_freq_swa(st->m, i) : llm_rope_freq(st->m, i);
    double ms = swa ? 1.0 : llm_rope_mscale(st->m);
    for (int p = 0; p < c->seq_len; p++)
        for (int i = 0; i < half; i++) {
            double a = p * freq[i], rot = llm_rope_rotates(c, i);
            cs[(size_t)p * half + i] = (float)(rot ? cos(a) * ms : 1.0);
            cs[n + (size_t)p * half + i] = (float)(rot ? sin(a) * ms : 0.0);
        }
    free(freq);
    float *d = (float *)dev_alloc(st, 2 * n * sizeof(float), err);
    cudaError_t e = d != NULL ? cudaMemcpy(d, cs, 2 * n * sizeof(float), cudaMemcpyHostToDevice) : cudaSuccess;
    free(cs);
    if (d == NULL)
        return -1;
    if (e != cudaSuccess)
        return fail(err, "rope table upload", e);
    *(swa ? &st->rope_cos_swa : &st->rope_cos) = d;
    *(swa ? &st->rope_sin_swa : &st->rope_sin) = d + n;
    return 0;
}

/* ALiBi's per-head slopes (jina-bert-v2), llm_alibi_slope's: n_heads floats on the device, read by the attention
 * kernels (cu_att_plan.alibi) rather than each of them recomputing the formula for every score. */
static int upload_alibi(cu_state *st, llm_err *err)
{
    const llm_config *c = &st->m->cfg;
    float *h = (float *)malloc((size_t)c->n_heads * sizeof(float));
    if (h == NULL) {
        llm_err_set(err, "cuda backend: out of host memory");
        return -1;
    }
    for (int i = 0; i < c->n_heads; i++)
        h[i] = llm_alibi_slope(c, i);
    float *d = (float *)dev_alloc(st, (size_t)c->n_heads * sizeof(float), err);
    cudaError_t e = d != NULL ? cudaMemcpy(d, h, (size_t)c->n_heads * sizeof(float), cudaMemcpyHostToDevice)
                              : cudaSuccess;
    free(h);
    if (d == NULL)
        return -1;
    if (e != cudaSuccess)
        return fail(err, "ALiBi slopes upload", e);
    st->alibi = d;
    return 0;
}

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cuda_load_weights(cu_state *st, int threads, llm_err *err)
{
    const llm_model *m = st->m;
    const llm_config *c = &m->cfg;
    uploader u;
    double t0 = now_sec();
    if (up_init(&u, err) != 0)
        return -1;
    u.kq_on = kq_listed();
    if (threads <= 0) { /* all cores */
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    u.threads = threads < LLM_PARALLEL_MAX ? threads : LLM_PARALLEL_MAX;
    int rc = -1;
    st->layers = (cu_layer *)calloc((size_t)c->n_layers, sizeof(cu_layer));
    if (st->layers == NULL) {
        llm_err_set(err, "cuda backend: out of host memory");
        goto out;
    }
    if (upload_mat(st, &u, &st->tok_embd, &m->tok_embd, err) != 0 ||
        (!c->encoder && (st->out_norm = upload_vec(st, &u, &m->out_norm, err)) == NULL) ||
        (c->layer_norm && (st->embd_norm = upload_vec(st, &u, &m->embd_norm, err)) == NULL)) /* ModernBERT */
        goto out;
    if (c->encoder && /* learned positions (BERT; nomic-bert rotates), token types, the embedding's LayerNorm */
        ((m->pos_embd.data != NULL && upload_mat(st, &u, &st->pos_embd, &m->pos_embd, err) != 0) ||
         upload_mat(st, &u, &st->type_embd, &m->type_embd, err) != 0 ||
         (st->embd_norm = upload_vec(st, &u, &m->embd_norm, err)) == NULL ||
         (st->embd_norm_b = upload_vec(st, &u, &m->embd_norm_b, err)) == NULL))
        goto out;
    if (c->tied_embeddings || m->output.data == NULL || m->output.data == m->tok_embd.data)
        st->output = st->tok_embd;
    else if (upload_mat(st, &u, &st->output, &m->output, err) != 0)
        goto out;
    for (int l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &m->layers[l];
        cu_layer *D = &st->layers[l];
        /* (BERT's FFN has no gate: gate_up is up alone; nomic-bert's has one) */
        const llm_tensor *qkv[3] = { &L->wq, &L->wk, &L->wv }, *gu[2] = { &L->w_gate, &L->w_up };
        const int n_gu = c->encoder && !cu_has_mat(&L->w_gate) ? 1 : 2;
        /* (ModernBERT's first layer has no attention norm, OLMo 2's layers neither it nor an FFN norm) */
        if ((L->attn_norm.data != NULL && (D->attn_norm = upload_vec(st, &u, &L->attn_norm, err)) == NULL) ||
            (L->ffn_norm.data != NULL && (D->ffn_norm = upload_vec(st, &u, &L->ffn_norm, err)) == NULL) ||
            upload_set(st, &u, &D->qkv, qkv, 3, err) != 0 || upload_mat(st, &u, &D->wo, &L->wo, err) != 0)
            goto out;
        /* the dense FFN, or a mixture of experts' shared expert where it has one */
        D->moe = llm_layer_moe(c, L);
        D->ff = llm_layer_ff(c, L);
        if ((!D->moe || cu_has_mat(&L->w_gate)) &&
            (upload_set(st, &u, &D->gate_up, gu + 2 - n_gu, n_gu, err) != 0 ||
             upload_mat(st, &u, &D->down, &L->w_down, err) != 0))
            goto out;
        if (D->moe && (upload_experts(st, &u, L, D, err) != 0 ||
                       (L->exp_probs_b.data != NULL && (D->exp_bias = upload_vec(st, &u, &L->exp_probs_b, err)) == NULL)))
            goto out;
        D->shared = D->moe && cu_has_mat(&L->w_gate);
        const llm_tensor *opt[] = { &L->bq, &L->bk, &L->bv, &L->q_norm, &L->k_norm, &L->post_attn_norm,
                                    &L->post_ffn_norm, &L->bo, &L->b_up, &L->b_down, &L->attn_norm_b,
                                    &L->ffn_norm_b, &L->attn_sinks, &L->ffn_gate_inp_b, &L->exp_b[0], &L->exp_b[1],
                                    &L->exp_b[2] };
        const float **dst[] = { &D->bq, &D->bk, &D->bv, &D->q_norm, &D->k_norm, &D->post_attn_norm,
                                &D->post_ffn_norm, &D->bo, &D->b_up, &D->b_down, &D->attn_norm_b,
                                &D->ffn_norm_b, &D->sinks, &D->router_b, &D->exp_b[0], &D->exp_b[1], &D->exp_b[2] };
        static_assert(sizeof(opt) / sizeof(opt[0]) == sizeof(dst) / sizeof(dst[0]), "one destination a tensor");
        for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++)
            if (opt[i]->data != NULL && (*dst[i] = upload_vec(st, &u, opt[i], err)) == NULL)
                goto out;
        D->swa = L->swa;
        D->nope = L->nope;
    }
    for (int i = 0; i < 2; i++) {
        cudaError_t e = cudaStreamSynchronize(u.st[i]);
        if (e != cudaSuccess) {
            fail(err, "weight upload", e);
            goto out;
        }
    }
    {
        double dt = now_sec() - t0;
        fprintf(stderr, "cuda: uploaded %.2f GB of weights in %.2f s (%.2f GB/s, %d host thread%s)\n",
                (double)u.bytes / 1e9, dt, dt > 0 ? (double)u.bytes / 1e9 / dt : 0.0, u.threads,
                u.threads == 1 ? "" : "s");
        for (int i = 0; i < N_KQ; i++)
            if (u.n_kq[i] > 0)
                fprintf(stderr, "cuda: %d %s matrices from their own blocks, at %s bits a weight (%s)\n", u.n_kq[i],
                        kq_types[i].file, kq_types[i].bits, kq_types[i].dev_name);
    }
    rc = upload_rope(st, 0, err);
    /* Gemma 3's sliding-window layers rotate with their own base; elsewhere they share the tables above. */
    if (rc == 0 && c->rope_theta_swa > 0.0f)
        rc = upload_rope(st, 1, err);
    else if (rc == 0) {
        st->rope_cos_swa = st->rope_cos;
        st->rope_sin_swa = st->rope_sin;
    }
    if (rc == 0 && c->alibi_max_bias > 0.0f)
        rc = upload_alibi(st, err);
out:
    up_free(&u);
    return rc;
}

void cuda_free_weights(cu_state *st)
{
    for (int i = 0; i < st->n_allocs; i++)
        cudaFree(st->allocs[i]);
    free(st->allocs);
    st->allocs = NULL;
    st->n_allocs = st->cap_allocs = 0;
    free(st->layers);
    st->layers = NULL;
}
