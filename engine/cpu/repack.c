/* Each layer's Q8_0 / Q4_0 matrices copied into the packed layout of the VNNI
 * kernels (kernels.h: CPU_PK_*), once at init, on all threads. Why a copy:
 * with rows interleaved by 16, one 32-bit lane accumulates a whole block's dot
 * product, so a block costs one conversion and one scaling per (row, token)
 * instead of per (row, token, 4 elements) plus horizontal sums
 * (docs/design-notes.md has the figures). The cost is memory: the packed copy
 * has the matrices' size, and they stay mapped (the embedding and the
 * classifier are read from there; the page cache may drop the rest).
 * Matrices the loader converted (K-quants, model_gguf.c) are already in
 * memory: llm_cpu_prepare_model packs those before serve forks its worker, so
 * that no copy-on-write page is ever duplicated. Q4_K, Q5_K, Q6_K, Q2_K and
 * Q3_K ones are packed from the file's blocks into CPU_PK_Q4_M (5 bits a
 * weight), CPU_PK_Q5_M (6), CPU_PK_Q6 (7), CPU_PK_Q2_M (6) and CPU_PK_Q3 (5):
 * their conversion was deferred
 * (LLM_LOAD_DEFER_KQ), or its Q8_0 copy is replaced; the others in place
 * (16 stored rows occupy the bytes of one packed group). Unprepared, they
 * run as stored. LLM_CPU_REPACK=0 keeps the stored layout. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_util.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_features.h"
#include "gguf_quants.h"
#include "model_priv.h"

_Static_assert(CPU_PK_MX4 < LLM_CPU_PK_KINDS, "llm_model_cpu_packed counts every format");

typedef struct {
    int n;
    const llm_tensor *t[CPU_PK_MAX];
    uint8_t *dst[CPU_PK_MAX];
} repack_job;

size_t cpu_packed_bytes(const llm_tensor *t, cpu_pk_fmt f)
{
    size_t groups = ((size_t)t->ne[1] + CPU_PK_ROWS - 1) / CPU_PK_ROWS;
    return groups * (size_t)(t->ne[0] / LLM_QK) * cpu_pk_block_bytes(f);
}

static size_t group_bytes(const llm_tensor *t, cpu_pk_fmt f)
{
    return (size_t)(t->ne[0] / LLM_QK) * cpu_pk_block_bytes(f);
}

/* Q8_0 / Q4_0: the n stored rows from rows (zero rows past those) into dst. */
static void pack_stored(const llm_tensor *t, const uint8_t *rows, size_t n, uint8_t *dst)
{
    cpu_pk_fmt f = cpu_pk_fmt_of(t->type);
    int nb = (int)(t->ne[0] / LLM_QK);
    size_t rb = llm_dtype_row_bytes(t->type, (uint64_t)t->ne[0]), bb = cpu_pk_block_bytes(f), hb = cpu_pk_head_bytes(f);
    for (int b = 0; b < nb; b++) {
        uint8_t *o = dst + (size_t)b * bb;
        if (n < CPU_PK_ROWS)
            memset(o, 0, bb);
        for (size_t r = 0; r < n; r++) {
            const uint8_t *src = rows + r * rb;
            if (f == CPU_PK_Q4_0) {
                const llm_block_q4_0 *blk = (const llm_block_q4_0 *)src + b;
                memcpy(o + 2 * r, &blk->d, 2);
                for (int k = 0; k < 4; k++)
                    memcpy(o + hb + 64 * k + 4 * r, blk->qs + 4 * k, 4);
            } else {
                const llm_block_q8_0 *blk = (const llm_block_q8_0 *)src + b;
                memcpy(o + 2 * r, &blk->d, 2);
                for (int k = 0; k < 8; k++) { /* 4 bytes at a time, each + 128 */
                    uint32_t v;
                    memcpy(&v, blk->qs + 4 * k, 4);
                    v ^= 0x80808080u;
                    memcpy(o + hb + 64 * k + 4 * r, &v, 4);
                }
            }
        }
    }
}

/* CPU_PK_MX4 from n rows of MXFP4 blocks (e, then 16 bytes of codes in Q4_0's order), zero rows past those:
 * d = 2^(e - 128) in fp16 (native_fmt checked every e fits), the codes as they are. */
static void pack_mxfp4(const llm_tensor *t, const uint8_t *src, size_t n, uint8_t *dst)
{
    int nb = (int)(t->ne[0] / LLM_QK);
    size_t rb = gguf_qtype_row_bytes(GGML_MXFP4, (uint64_t)t->ne[0]), bb = cpu_pk_block_bytes(CPU_PK_MX4);
    for (int b = 0; b < nb; b++) {
        uint8_t *o = dst + (size_t)b * bb;
        if (n < CPU_PK_ROWS)
            memset(o, 0, bb);
        for (size_t r = 0; r < n; r++) {
            const uint8_t *blk = src + r * rb + (size_t)b * 17;
            uint16_t d = llm_f32_to_fp16(ldexpf(1.0f, (int)blk[0] - 128));
            memcpy(o + 2 * r, &d, 2);
            for (int k = 0; k < 4; k++)
                memcpy(o + 32 + 64 * k + 4 * r, blk + 1 + 4 * k, 4);
        }
    }
}

/* CPU_PK_Q4_M (five 0) from n rows of Q4_K blocks, or CPU_PK_Q5_M (five 1)
 * from Q5_K ones (zero rows past those). Both have Q4_K's header (d, dmin,
 * 12 bytes of 6-bit scales and mins); Q5_K's nibbles are at +48 instead of
 * +16, after qh[32], whose bit g of byte l is the fifth bit of element l of
 * sub-block g. */
static void pack_q45_K(const llm_tensor *t, const uint8_t *rows, size_t n, uint8_t *dst, int five)
{
    uint32_t qt = five ? GGML_Q5_K : GGML_Q4_K;
    int nb = (int)(t->ne[0] / LLM_QK);
    size_t rb = gguf_qtype_row_bytes(qt, (uint64_t)t->ne[0]), bb = cpu_pk_block_bytes(five ? CPU_PK_Q5_M : CPU_PK_Q4_M);
    size_t sbb = gguf_qtype_row_bytes(qt, LLM_QK_K);
    for (int b = 0; b < nb; b++) {
        uint8_t *o = dst + (size_t)b * bb;
        int g = b % 8;
        if (n < CPU_PK_ROWS)
            memset(o, 0, bb);
        for (size_t r = 0; r < n; r++) {
            const uint8_t *sb = rows + r * rb + (size_t)(b / 8) * sbb, *qs = sb + (five ? 48 : 16) + 32 * (g / 2);
            float scale, min;
            gguf_q4_K_sub(sb, g, &scale, &min, NULL);
            uint16_t d = llm_f32_to_fp16(scale), m = llm_f32_to_fp16(min);
            memcpy(o + 2 * r, &d, 2);
            memcpy(o + 32 + 2 * r, &m, 2);
            /* byte e of step k: element 4k+e in the low nibble, 16+4k+e in the high one (Q4_0's order) */
            for (int k = 0; k < 4; k++) {
                uint32_t w0, w1, v;
                memcpy(&w0, qs + 4 * k, 4);
                memcpy(&w1, qs + 16 + 4 * k, 4);
                v = g % 2 ? ((w0 >> 4) & 0x0F0F0F0Fu) | (w1 & 0xF0F0F0F0u)
                          : (w0 & 0x0F0F0F0Fu) | ((w1 & 0x0F0F0F0Fu) << 4);
                memcpy(o + 64 + 64 * k + 4 * r, &v, 4);
            }
            if (!five)
                continue;
            /* fifth bits: byte e holds element 4k+e's in bit k and 16+4k+e's in bit 4+k */
            const uint8_t *qh = sb + 16;
            for (int e = 0; e < 4; e++) {
                uint8_t fb = 0;
                for (int k = 0; k < 4; k++)
                    fb |= (uint8_t)(((qh[4 * k + e] >> g) & 1) << k | ((qh[16 + 4 * k + e] >> g) & 1) << (4 + k));
                o[64 + 256 + 4 * r + (size_t)e] = fb;
            }
        }
    }
}

/* CPU_PK_Q6 from n rows of Q6_K blocks, zero rows past those. Block b is
 * elements 32g.. of super-block b / 8 (g = b % 8): in its half g / 4, those
 * with k' = g % 4 in gguf_quants.c's block_q6_K; their groups of 16 take the
 * int8 scales 2k' and 2k'+1 of that half. */
static void pack_q6_K(const llm_tensor *t, const uint8_t *rows, size_t n, uint8_t *dst)
{
    int nb = (int)(t->ne[0] / LLM_QK);
    size_t rb = gguf_qtype_row_bytes(GGML_Q6_K, (uint64_t)t->ne[0]), bb = cpu_pk_block_bytes(CPU_PK_Q6);
    size_t sbb = gguf_qtype_row_bytes(GGML_Q6_K, LLM_QK_K);
    for (int b = 0; b < nb; b++) {
        uint8_t *o = dst + (size_t)b * bb;
        int g = b % 8, half = g / 4, kq = g % 4;
        if (n < CPU_PK_ROWS)
            memset(o, 0, bb);
        memset(o + 64 + 256, 0, 128); /* the high bits are or-ed in below */
        for (size_t r = 0; r < n; r++) {
            const uint8_t *sb = rows + r * rb + (size_t)(b / 8) * sbb;
            const uint8_t *ql = sb + 64 * half, *qh = sb + 128 + 32 * half;
            const int8_t *sc = (const int8_t *)(sb + 192) + 8 * half + 2 * kq;
            float d = llm_fp16_to_f32((uint16_t)(sb[208] | sb[209] << 8));
            uint16_t d0 = llm_f32_to_fp16(d * (float)sc[0]), d1 = llm_f32_to_fp16(d * (float)sc[1]);
            memcpy(o + 2 * r, &d0, 2);
            memcpy(o + 32 + 2 * r, &d1, 2);
            uint8_t q[LLM_QK]; /* 0..63 */
            for (int l = 0; l < LLM_QK; l++)
                q[l] = (uint8_t)(((ql[l + 32 * (kq % 2)] >> (4 * (kq / 2))) & 0xF) | ((qh[l] >> (2 * kq)) & 3) << 4);
            for (int k = 0; k < 4; k++)
                for (int e = 0; e < 4; e++) {
                    uint8_t lo = q[4 * k + e], hi = q[16 + 4 * k + e];
                    o[64 + 64 * k + 4 * r + (size_t)e] = (uint8_t)((lo & 0xF) | (hi & 0xF) << 4);
                    o[64 + 256 + 64 * (k / 2) + 4 * r + (size_t)e] |= (uint8_t)(((lo >> 4) | (hi >> 4) << 2) << (4 * (k % 2)));
                }
        }
    }
}

/* CPU_PK_Q2_M from n rows of Q2_K blocks (q2 1), or CPU_PK_Q3 from Q3_K ones, zero rows past those: each
 * row's super-block folded once (gguf_q23_K_fold: quants 0..7, an fp16 (d, m) per group of 16; Q3 keeps the
 * d, its m being 4 d), then block b = 32g.. of it takes groups 2g and 2g + 1 as its halves. */
static void pack_q23_K(const llm_tensor *t, const uint8_t *rows, size_t n, uint8_t *dst, int q2)
{
    int nb = (int)(t->ne[0] / LLM_QK);
    uint32_t ft = q2 ? GGML_Q2_K : GGML_Q3_K;
    cpu_pk_fmt f = q2 ? CPU_PK_Q2_M : CPU_PK_Q3;
    size_t rb = gguf_qtype_row_bytes(ft, (uint64_t)t->ne[0]), bb = cpu_pk_block_bytes(f), hb = cpu_pk_head_bytes(f);
    size_t sbb = gguf_qtype_row_bytes(ft, LLM_QK_K);
    uint8_t q[CPU_PK_ROWS][LLM_QK_K];
    uint16_t dm[CPU_PK_ROWS][16][2];
    for (int b = 0; b < nb; b++) {
        uint8_t *o = dst + (size_t)b * bb;
        int g = b % 8;
        if (n < CPU_PK_ROWS)
            memset(o, 0, bb);
        for (size_t r = 0; r < n; r++) {
            if (g == 0)
                gguf_q23_K_fold(rows + r * rb + (size_t)(b / 8) * sbb, q2, q[r], dm[r]);
            for (int h = 0; h < 2; h++) {
                memcpy(o + 32 * h + 2 * r, &dm[r][2 * g + h][0], 2);
                if (q2)
                    memcpy(o + 64 + 32 * h + 2 * r, &dm[r][2 * g + h][1], 2);
            }
            const uint8_t *qb = q[r] + 32 * g;
            for (int k = 0; k < 4; k++) /* byte e of step k: element 4k+e low, 16+4k+e high (Q4_0's order) */
                for (int e = 0; e < 4; e++)
                    o[hb + 64 * k + 4 * r + (size_t)e] = (uint8_t)(qb[4 * k + e] | qb[16 + 4 * k + e] << 4);
        }
    }
}

/* Group g of t in format f into dst: Q4_M / Q5_M / Q6 / Q2_M / Q3 / MX4 from the file's Q4_K / Q5_K / Q6_K /
 * Q2_K / Q3_K / MXFP4 blocks (t->src), the others from t's rows. */
static void pack_group(const llm_tensor *t, cpu_pk_fmt f, size_t g, uint8_t *dst)
{
    size_t r0 = g * CPU_PK_ROWS, rows = (size_t)t->ne[1];
    size_t n = rows - r0 < CPU_PK_ROWS ? rows - r0 : CPU_PK_ROWS;
    if (f >= CPU_PK_Q4_M) { /* from the file's blocks */
        const uint8_t *src = (const uint8_t *)t->src + r0 * gguf_qtype_row_bytes(t->src_type, (uint64_t)t->ne[0]);
        if (f == CPU_PK_Q6)
            pack_q6_K(t, src, n, dst);
        else if (f == CPU_PK_MX4)
            pack_mxfp4(t, src, n, dst);
        else if (f == CPU_PK_Q2_M || f == CPU_PK_Q3)
            pack_q23_K(t, src, n, dst, f == CPU_PK_Q2_M);
        else
            pack_q45_K(t, src, n, dst, f == CPU_PK_Q5_M);
    } else {
        pack_stored(t, (const uint8_t *)t->data + r0 * llm_dtype_row_bytes(t->type, (uint64_t)t->ne[0]), n, dst);
    }
}

void cpu_pack_matrix(const llm_tensor *t, cpu_pk_fmt f, uint8_t *dst)
{
    size_t groups = ((size_t)t->ne[1] + CPU_PK_ROWS - 1) / CPU_PK_ROWS;
    for (size_t g = 0; g < groups; g++)
        pack_group(t, f, g, dst + g * group_bytes(t, f));
}

void cpu_pk_row_to_f32(cpu_pk_fmt f, const uint8_t *P, int K, size_t row, float *out)
{
    size_t bb = cpu_pk_block_bytes(f), hb = cpu_pk_head_bytes(f), r = row % CPU_PK_ROWS;
    const uint8_t *g = P + row / CPU_PK_ROWS * (size_t)(K / LLM_QK) * bb;
    for (int b = 0; b < K / LLM_QK; b++, g += bb, out += LLM_QK) {
        uint16_t dh, mh = 0;
        memcpy(&dh, g + 2 * r, 2);
        if (cpu_pk_head_bytes(f) >= 64)
            memcpy(&mh, g + 32 + 2 * r, 2);
        float d = llm_fp16_to_f32(dh), mn = llm_fp16_to_f32(mh);
        if (f == CPU_PK_Q2_M || f == CPU_PK_Q3) { /* mh is the second half's scale; Q2_M's mins follow, Q3's
                                                   * are 4 d (d q - 4 d is d (q - 4) exactly) */
            float m0 = 4.0f * d, m1 = 4.0f * mn;
            if (f == CPU_PK_Q2_M) {
                uint16_t h0, h1;
                memcpy(&h0, g + 64 + 2 * r, 2);
                memcpy(&h1, g + 96 + 2 * r, 2);
                m0 = llm_fp16_to_f32(h0);
                m1 = llm_fp16_to_f32(h1);
            }
            for (int k = 0; k < 4; k++)
                for (int e = 0; e < 4; e++) {
                    uint8_t v = g[hb + 64 * (size_t)k + 4 * r + (size_t)e];
                    out[4 * k + e] = d * (float)(v & 15) - m0;
                    out[16 + 4 * k + e] = mn * (float)(v >> 4) - m1;
                }
            continue;
        }
        if (f == CPU_PK_Q6) { /* mh is the second half's scale */
            for (int k = 0; k < 4; k++)
                for (int e = 0; e < 4; e++) {
                    uint8_t v = g[hb + 64 * (size_t)k + 4 * r + (size_t)e];
                    uint8_t h = (uint8_t)(g[hb + 256 + 64 * (size_t)(k / 2) + 4 * r + (size_t)e] >> (4 * (k % 2)));
                    out[4 * k + e] = d * (float)(((v & 15) | (h & 3) << 4) - 32);
                    out[16 + 4 * k + e] = mn * (float)(((v >> 4) | (h >> 2 & 3) << 4) - 32);
                }
            continue;
        }
        for (int k = 0; k < (f == CPU_PK_Q8_0 ? 8 : 4); k++)
            for (int e = 0; e < 4; e++) {
                uint8_t v = g[hb + 64 * (size_t)k + 4 * r + (size_t)e];
                if (f == CPU_PK_Q8_0) {
                    out[4 * k + e] = d * (float)(int8_t)(v ^ 0x80);
                } else if (f == CPU_PK_MX4) {
                    out[4 * k + e] = d * (float)(cpu_mx4_values[v & 15] - 12);
                    out[16 + 4 * k + e] = d * (float)(cpu_mx4_values[v >> 4] - 12);
                } else {
                    int off = f == CPU_PK_Q4_0 ? 8 : 0;
                    uint8_t h = f == CPU_PK_Q5_M ? g[hb + 256 + 4 * r + (size_t)e] : 0;
                    out[4 * k + e] = d * (float)(((v & 15) | (h >> k & 1) << 4) - off) - mn;
                    out[16 + 4 * k + e] = d * (float)(((v >> 4) | (h >> (4 + k) & 1) << 4) - off) - mn;
                }
            }
    }
}

static void repack_worker(void *ctx, int ith, int nth)
{
    repack_job *j = ctx;
    for (int i = 0; i < j->n; i++) {
        const llm_tensor *t = j->t[i];
        cpu_pk_fmt f = cpu_pk_fmt_of(t->type);
        size_t groups = ((size_t)t->ne[1] + CPU_PK_ROWS - 1) / CPU_PK_ROWS;
        for (size_t g = (size_t)ith; g < groups; g += (size_t)nth)
            pack_group(t, f, g, j->dst[i] + g * group_bytes(t, f));
    }
}

int cpu_packing_on(const cpu_kernels *k)
{
    const char *env = getenv("LLM_CPU_REPACK");
    return k->gemm_packed != NULL && !(env != NULL && strcmp(env, "0") == 0);
}

static int packable(const llm_tensor *t)
{
    return (t->type == LLM_Q8_0 || t->type == LLM_Q4_0) && t->ne[0] % LLM_QK == 0;
}

int cpu_repack_weights(cpu_state *st)
{
    if (!cpu_packing_on(st->kern))
        return 0;
    const llm_model *m = st->m;
    int n_layers = m->cfg.n_layers;
    int per = llm_layer_n_mats(&m->cfg);
    st->packed = calloc((size_t)n_layers * (size_t)per, sizeof(*st->packed));
    repack_job *j = calloc(1, sizeof(*j));
    if (st->packed == NULL || j == NULL) {
        free(j);
        return -1;
    }
    /* One arena for every packed copy (64-byte aligned offsets). */
    for (int pass = 0; pass < 2; pass++) {
        size_t off = 0;
        for (int l = 0; l < n_layers; l++) {
            const llm_tensor *mats[LLM_LAYER_MATS_MAX];
            cpu_layer_mats(m, l, mats);
            for (int i = 0; i < per; i++) {
                const llm_tensor *t = mats[i];
                cpu_pk_mat *pm = &st->packed[l * per + i];
                if (t->cpu_packed) { /* packed by llm_cpu_prepare_model */
                    pm->data = t->data;
                    pm->fmt = (cpu_pk_fmt)(t->cpu_packed - 1);
                    continue;
                }
                if (!packable(t) || llm_model_owns(m, t->data)) /* converted at load: not a second copy */
                    continue;
                if (pass == 1) {
                    pm->data = st->packed_arena + off;
                    pm->fmt = cpu_pk_fmt_of(t->type);
                    j->t[j->n] = t;
                    j->dst[j->n++] = st->packed_arena + off;
                    if (j->n == CPU_PK_MAX) {
                        cpu_pool_run(st->pool, repack_worker, j);
                        j->n = 0;
                    }
                }
                off += (cpu_packed_bytes(t, cpu_pk_fmt_of(t->type)) + 63) / 64 * 64;
            }
        }
        const llm_tensor *cls = llm_classifier(m); /* the last slot */
        if (cls->cpu_packed) {
            st->packed_cls.data = cls->data;
            st->packed_cls.fmt = (cpu_pk_fmt)(cls->cpu_packed - 1);
        } else if (packable(cls) && !llm_model_owns(m, cls->data)) {
            if (pass == 1) {
                if (j->n == CPU_PK_MAX) {
                    cpu_pool_run(st->pool, repack_worker, j);
                    j->n = 0;
                }
                st->packed_cls.data = st->packed_arena + off;
                st->packed_cls.fmt = cpu_pk_fmt_of(cls->type);
                j->t[j->n] = cls;
                j->dst[j->n++] = st->packed_arena + off;
            }
            off += (cpu_packed_bytes(cls, cpu_pk_fmt_of(cls->type)) + 63) / 64 * 64;
        }
        if (pass == 0) {
            if (off == 0)
                break;
            if ((st->packed_arena = cpu_alloc_huge(off)) == NULL) {
                free(j);
                return -1;
            }
        }
    }
    if (j->n > 0)
        cpu_pool_run(st->pool, repack_worker, j);
    free(j);
    return 0;
}

/* llm_cpu_prepare_model's work list: each matrix packed into dst (Q4_M, a
 * new buffer, carved from one arena on huge pages: a mixture of experts'
 * thousands of matrices of a few MiB each would otherwise fault in 4 KiB at a
 * time) or in place (dst NULL: each thread packs a group into its own
 * scratch, then copies it back over the rows it came from). */
typedef struct {
    llm_tensor *t;
    const void *id;     /* its data, or its source while its conversion is deferred (model.h) */
    cpu_pk_fmt  fmt;
    uint8_t    *dst;
    size_t      off;    /* new: dst's offset in the arena of the new buffers */
    int         new_buf;
} prep_item;

typedef struct {
    int n;
    prep_item *it;       /* [n] */
    uint8_t *scratch;    /* [nth][scratch_bytes] */
    size_t scratch_bytes;
} prep_job;

static void prep_worker(void *ctx, int ith, int nth)
{
    prep_job *j = ctx;
    uint8_t *tmp = j->scratch + (size_t)ith * j->scratch_bytes;
    for (int i = 0; i < j->n; i++) {
        const prep_item *it = &j->it[i];
        size_t groups = ((size_t)it->t->ne[1] + CPU_PK_ROWS - 1) / CPU_PK_ROWS, gb = group_bytes(it->t, it->fmt);
        uint8_t *data = (uint8_t *)(uintptr_t)it->t->data;
        for (size_t g = (size_t)ith; g < groups; g += (size_t)nth) {
            if (it->dst != NULL) {
                pack_group(it->t, it->fmt, g, it->dst + g * gb);
            } else {
                pack_group(it->t, it->fmt, g, tmp);
                memcpy(data + g * gb, tmp, gb);
            }
        }
    }
}

static const void *ident(const llm_tensor *t)
{
    return t->data != NULL ? t->data : t->src;
}

static int listed(const prep_job *j, const void *id)
{
    for (int i = 0; i < j->n; i++)
        if (j->it[i].id == id)
            return 1;
    return 0;
}

/* The packed format t's file blocks go to (-1: none), when the folded scales and mins fit fp16 (finite and
 * in range in every super-block): Q4_K / Q5_K (d and dmin times 6-bit factors, 63) to Q4_M / Q5_M; Q6_K (d
 * times int8 scales, 128) to Q6; Q3_K (d times 6-bit scales - 32: 32) to Q3; Q2_K (d and dmin times 4-bit
 * factors, 15) to Q2_M; MXFP4 to MX4 where every block's power of two, 2^(e - 128), is exact in fp16 (e in
 * 104 .. 143, subnormals included). */
static int native_fmt(const llm_tensor *t)
{
    uint32_t ft = t->src_type;
    if (t->src != NULL && ft == GGML_MXFP4 && t->ne[0] % LLM_QK == 0) {
        size_t n = (size_t)(t->ne[0] / LLM_QK) * (size_t)t->ne[1];
        for (size_t i = 0; i < n; i++) {
            uint8_t e = ((const uint8_t *)t->src)[i * 17];
            if (e < 104 || e > 143)
                return -1;
        }
        return CPU_PK_MX4;
    }
    if (t->src == NULL || (ft != GGML_Q4_K && ft != GGML_Q5_K && ft != GGML_Q6_K && ft != GGML_Q3_K &&
                           ft != GGML_Q2_K) || t->ne[0] % LLM_QK_K != 0)
        return -1;
    int q4 = ft == GGML_Q4_K || ft == GGML_Q5_K, mins = q4 || ft == GGML_Q2_K;
    size_t n = (size_t)(t->ne[0] / LLM_QK_K) * (size_t)t->ne[1], bb = gguf_qtype_row_bytes(ft, LLM_QK_K);
    /* where d (and dmin after it) sit: Q4_K / Q5_K first, Q2_K at 80, Q6_K and Q3_K last */
    const size_t d_at = q4 ? 0 : ft == GGML_Q2_K ? 80 : bb - 2;
    const float most = q4 ? 63.0f : ft == GGML_Q2_K ? 15.0f : ft == GGML_Q3_K ? 32.0f : 128.0f;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *b = (const uint8_t *)t->src + i * bb + d_at;
        float d = llm_fp16_to_f32((uint16_t)(b[0] | b[1] << 8));
        float dmin = mins ? llm_fp16_to_f32((uint16_t)(b[2] | b[3] << 8)) : 0.0f;
        if (!(fabsf(d) * most <= 65504.0f) || !(fabsf(dmin) * most <= 65504.0f))
            return -1;
    }
    return ft == GGML_Q4_K ? CPU_PK_Q4_M : ft == GGML_Q5_K ? CPU_PK_Q5_M : ft == GGML_Q6_K ? CPU_PK_Q6
         : ft == GGML_Q2_K ? CPU_PK_Q2_M : CPU_PK_Q3;
}

int llm_cpu_prepare_model(llm_model *m, const llm_backend_opts *o, llm_err *err)
{
    const cpu_kernels *kern = cpu_kernels_select(err);
    if (kern == NULL)
        return -1;
    if (!cpu_packing_on(kern))
        return 0;
    prep_job job = { 0 }, *j = &job;
    cpu_threadpool *pool = NULL;
    uint8_t *arena = NULL;
    size_t arena_bytes = 0;
    /* Every layer matrix, then the embedding and the classifier (the classifier is packed; a tied
     * embedding is the same bytes, so its lookups then read the packed rows). */
    int n_slots = llm_model_n_mats(m);
    llm_tensor **slots = calloc((size_t)n_slots, sizeof(*slots));
    if (slots == NULL || (j->it = calloc((size_t)n_slots, sizeof(*j->it))) == NULL)
        goto oom;
    llm_model_mats(m, slots);
    llm_tensor *cls = (llm_tensor *)(uintptr_t)llm_classifier(m);
    for (int si = 0; si < n_slots; si++) {
        llm_tensor *t = slots[si];
        if (si >= n_slots - 2 && t != cls)
            continue;
        int deferred = t->data == NULL;
        if (t->cpu_packed || !packable(t) || listed(j, ident(t)) || (!deferred && !llm_model_owns(m, t->data)))
            continue;
        prep_item *it = &j->it[j->n];
        int nf = native_fmt(t);
        if (nf >= 0) {
            it->fmt = (cpu_pk_fmt)nf;
            it->off = arena_bytes;
            it->new_buf = 1;
            arena_bytes += (cpu_packed_bytes(t, it->fmt) + 63) / 64 * 64;
        } else if (deferred) { /* llm_model_finish_deferred_except converts it */
            continue;
        } else if (t->ne[1] % CPU_PK_ROWS == 0) { /* in place needs whole groups; else it stays as stored */
            it->fmt = cpu_pk_fmt_of(t->type);
            if (group_bytes(t, it->fmt) > j->scratch_bytes)
                j->scratch_bytes = group_bytes(t, it->fmt);
        } else {
            continue;
        }
        it->t = t;
        it->id = ident(t);
        j->n++;
    }
    if (arena_bytes > 0) {
        if ((arena = cpu_alloc_huge(arena_bytes)) == NULL)
            goto oom;
        for (int i = 0; i < j->n; i++)
            if (j->it[i].new_buf)
                j->it[i].dst = arena + j->it[i].off;
    }
    if (j->n > 0) {
        int nth = o != NULL && o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
        nth = nth < 1 ? 1 : nth;
        pool = cpu_pool_create(nth);
        j->scratch = malloc((size_t)nth * (j->scratch_bytes > 0 ? j->scratch_bytes : 1));
        if (pool == NULL || j->scratch == NULL)
            goto oom;
        cpu_pool_run(pool, prep_worker, j);
        cpu_pool_destroy(pool);
        pool = NULL;
    }
    if (arena != NULL) {
        uint8_t *a = arena;
        arena = NULL;
        if (llm_model_own(m, a, err) != 0) /* frees it */
            goto fail;
    }
    /* Every layer tensor over those bytes (aliases included) now reads the packed format. */
    for (int i = 0; i < j->n; i++) {
        prep_item *it = &j->it[i];
        const void *now = it->t->data;
        if (it->dst != NULL) {
            if (it->t->data != NULL)
                llm_model_replace_owned(m, it->t->data, NULL); /* frees the Q8_0 conversion */
            now = it->dst;
            it->dst = NULL;
        }
        for (int k = 0; k < n_slots; k++)
            if (!slots[k]->cpu_packed && ident(slots[k]) == it->id) {
                slots[k]->data = now;
                slots[k]->cpu_packed = (int)it->fmt + 1;
            }
    }
    free(slots);
    free(j->scratch);
    free(j->it);
    return 0;
oom:
    llm_seterr(err, "cpu backend: out of memory (or threads) packing the converted weights");
fail:
    cpu_pool_destroy(pool);
    free(arena);
    free(slots);
    free(j->scratch);
    free(j->it);
    return -1;
}

void cpu_repack_free(cpu_state *st)
{
    free(st->packed_arena);
    free(st->packed);
    st->packed_arena = NULL;
    st->packed = NULL;
}
