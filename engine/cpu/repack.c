/* Each layer's Q8_0 / Q4_0 matrices copied into the packed layout of the VNNI
 * kernels (kernels.h: CPU_PK_*), once at init, on all threads. Why a copy:
 * with rows interleaved by 16, one 32-bit lane accumulates a whole block's dot
 * product, so a block costs one conversion and one scaling per (row, token)
 * instead of per (row, token, 4 elements) plus horizontal sums
 * (docs/design-notes.md has the figures). The cost is memory: the packed copy
 * has the matrices' size, and they stay mapped (the embedding and the
 * classifier are read from there; the page cache may drop the rest). Matrices the loader converted
 * (K-quants, model_gguf.c) are already in memory and are left as they are,
 * rather than held twice. LLM_CPU_REPACK=0 keeps the stored layout. */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"

typedef struct {
    int n;
    const llm_tensor *t[CPU_PK_MAX];
    uint8_t *dst[CPU_PK_MAX];
} repack_job;

size_t cpu_packed_bytes(const llm_tensor *t)
{
    size_t groups = ((size_t)t->ne[1] + CPU_PK_ROWS - 1) / CPU_PK_ROWS;
    return groups * (size_t)(t->ne[0] / LLM_QK) * cpu_pk_block_bytes(t->type);
}

/* Group g of t (CPU_PK_ROWS rows, zero rows past the end) into dst. */
static void pack_group(const llm_tensor *t, size_t g, uint8_t *dst)
{
    int q4 = t->type == LLM_Q4_0, nb = (int)(t->ne[0] / LLM_QK);
    size_t rb = llm_dtype_row_bytes(t->type, (uint64_t)t->ne[0]), bb = cpu_pk_block_bytes(t->type);
    for (int b = 0; b < nb; b++) {
        uint8_t *o = dst + (size_t)b * bb;
        memset(o, 0, bb);
        for (int r = 0; r < CPU_PK_ROWS; r++) {
            size_t row = g * CPU_PK_ROWS + (size_t)r;
            if (row >= (size_t)t->ne[1])
                break;
            const uint8_t *src = (const uint8_t *)t->data + row * rb;
            if (q4) {
                const llm_block_q4_0 *blk = (const llm_block_q4_0 *)src + b;
                memcpy(o + 2 * r, &blk->d, 2);
                for (int k = 0; k < 4; k++)
                    memcpy(o + CPU_PK_HEAD + 64 * k + 4 * r, blk->qs + 4 * k, 4);
            } else {
                const llm_block_q8_0 *blk = (const llm_block_q8_0 *)src + b;
                memcpy(o + 2 * r, &blk->d, 2);
                for (int k = 0; k < 8; k++)
                    for (int e = 0; e < 4; e++)
                        o[CPU_PK_HEAD + 64 * k + 4 * r + e] = (uint8_t)(blk->qs[4 * k + e] ^ 0x80);
            }
        }
    }
}

void cpu_pack_matrix(const llm_tensor *t, uint8_t *dst)
{
    size_t groups = ((size_t)t->ne[1] + CPU_PK_ROWS - 1) / CPU_PK_ROWS;
    for (size_t g = 0; g < groups; g++)
        pack_group(t, g, dst + g * (size_t)(t->ne[0] / LLM_QK) * cpu_pk_block_bytes(t->type));
}

static void repack_worker(void *ctx, int ith, int nth)
{
    repack_job *j = ctx;
    for (int i = 0; i < j->n; i++) {
        const llm_tensor *t = j->t[i];
        size_t groups = ((size_t)t->ne[1] + CPU_PK_ROWS - 1) / CPU_PK_ROWS;
        size_t gbytes = (size_t)(t->ne[0] / LLM_QK) * cpu_pk_block_bytes(t->type);
        for (size_t g = (size_t)ith; g < groups; g += (size_t)nth)
            pack_group(t, g, j->dst[i] + g * gbytes);
    }
}

int cpu_repack_weights(cpu_state *st)
{
    const char *env = getenv("LLM_CPU_REPACK");
    if (st->kern->gemm_packed == NULL || (env != NULL && strcmp(env, "0") == 0))
        return 0;
    const llm_model *m = st->m;
    int n_layers = m->cfg.n_layers;
    st->packed = calloc((size_t)n_layers * CPU_PK_MATS, sizeof(*st->packed));
    repack_job *j = calloc(1, sizeof(*j));
    if (st->packed == NULL || j == NULL) {
        free(j);
        return -1;
    }
    /* One arena for every packed matrix (64-byte aligned offsets). */
    for (int pass = 0; pass < 2; pass++) {
        size_t off = 0;
        for (int l = 0; l < n_layers; l++) {
            const llm_tensor *mats[CPU_PK_MATS];
            cpu_layer_mats(&m->layers[l], mats);
            for (int i = 0; i < CPU_PK_MATS; i++) {
                const llm_tensor *t = mats[i];
                if ((t->type != LLM_Q8_0 && t->type != LLM_Q4_0) || t->ne[0] % LLM_QK != 0 ||
                    llm_model_owns(m, t->data)) /* converted at load: not a second copy */
                    continue;
                if (pass == 1) {
                    st->packed[l * CPU_PK_MATS + i] = st->packed_arena + off;
                    j->t[j->n] = t;
                    j->dst[j->n++] = st->packed_arena + off;
                    if (j->n == CPU_PK_MAX) {
                        cpu_pool_run(st->pool, repack_worker, j);
                        j->n = 0;
                    }
                }
                off += (cpu_packed_bytes(t) + 63) / 64 * 64;
            }
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

void cpu_repack_free(cpu_state *st)
{
    free(st->packed_arena);
    free(st->packed);
    st->packed_arena = NULL;
    st->packed = NULL;
}
