/* x86 SIMD kernel bodies shared by kernels_avx2.c and kernels_avx512.c: each
 * includes this after defining the float vector macros (KX_*) for its width,
 * so both tables run the same tested code. The quantised kernels are 256-bit
 * in both (AVX2 integer dot products: maddubs with the sign trick). */
#ifndef KX_VW
#error "define the KX_* vector macros before including kernels_x86.h"
#endif

#include <immintrin.h>
#include <math.h>

#include "cpu/kernels.h"

#define KX_INLINE static inline __attribute__((always_inline))

/* GEMV (decode) is memory-bound and the hardware prefetcher alone leaves a
 * single core far below bandwidth: the kernels prefetch the rows this far
 * ahead (measured: 1.6x on Q8_0/Q4_0 decode). Prefetching past the end of a
 * matrix is harmless (prefetches never fault). */
#ifndef KX_PREFETCH_ROWS
#define KX_PREFETCH_ROWS 8
#endif

/* Tile shapes (rows of W x tokens), picked by measurement on AVX2 so that the
 * accumulators, weight vectors and activation blocks stay in the 16 ymm
 * registers (a spilled accumulator costs ~40%). Float shapes: KX_FRM/KX_FRN
 * from the including file. */
#ifndef KX_Q8_RM
#define KX_Q8_RM 2
#define KX_Q8_RN 3
#endif
#ifndef KX_Q4_RM
#define KX_Q4_RM 4
#define KX_Q4_RN 2
#endif
#define KX_QMAX 4

KX_INLINE float kx_hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The largest of 8 floats (max_ps's operand order, so a NaN lane is skipped as the scalar comparisons skip it). */
KX_INLINE float kx_hmax256(__m256 m)
{
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* A Q4_0 block's 32 quants as 32 bytes (values 0..15) in element order: the
 * low nibbles hold elements 0..15, the high nibbles 16..31. */
KX_INLINE __m256i kx_q4_nibbles(const uint8_t *qs)
{
    __m128i lo = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(lo, 4), lo), _mm256_set1_epi8(0x0f));
}

enum { KX_W_F32, KX_W_F16, KX_W_BF16 };
#ifndef KX_FPREFETCH
#define KX_FPREFETCH 1
#endif

KX_INLINE KX_VF kx_load_w(int wt, const uint8_t *w, int k)
{
    if (wt == KX_W_F32)
        return KX_LOADF((const float *)w + k);
    if (wt == KX_W_F16)
        return KX_LOAD_F16(w + 2 * (size_t)k);
    return KX_LOAD_BF16(w + 2 * (size_t)k);
}

KX_INLINE float kx_load_w1(int wt, const uint8_t *w, int k)
{
    uint16_t h;
    if (wt == KX_W_F32) {
        float f;
        memcpy(&f, w + 4 * (size_t)k, 4);
        return f;
    }
    memcpy(&h, w + 2 * (size_t)k, 2);
    if (wt == KX_W_F16)
        return _cvtsh_ss(h);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

KX_INLINE void kx_ftile(int wt, int K, const uint8_t *W, size_t ws, const uint8_t *X, size_t xs,
                        float *Y, size_t ldy, int acc, const int RM, const int RN)
{
    KX_VF c[KX_FRM][KX_FRN];
#pragma GCC unroll 8
    for (int i = 0; i < RM; i++)
#pragma GCC unroll 8
        for (int j = 0; j < RN; j++)
            c[i][j] = KX_ZERO();
    int k = 0;
    for (; k + KX_VW <= K; k += KX_VW) {
        KX_VF w[KX_FRM];
        if (RN == 1 && KX_FPREFETCH)
#pragma GCC unroll 8
            for (int i = 0; i < RM; i++)
                _mm_prefetch((const char *)(W + (size_t)(i + KX_PREFETCH_ROWS) * ws) +
                             (size_t)k * (wt == KX_W_F32 ? 4 : 2), _MM_HINT_T0);
#pragma GCC unroll 8
        for (int i = 0; i < RM; i++)
            w[i] = kx_load_w(wt, W + (size_t)i * ws, k);
#pragma GCC unroll 8
        for (int j = 0; j < RN; j++) {
            KX_VF x = KX_LOADF((const float *)(X + (size_t)j * xs) + k);
#pragma GCC unroll 8
            for (int i = 0; i < RM; i++)
                c[i][j] = KX_FMA(w[i], x, c[i][j]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < RM; i++)
#pragma GCC unroll 8
        for (int j = 0; j < RN; j++) {
            float s = KX_HSUM(c[i][j]);
            const float *x = (const float *)(X + (size_t)j * xs);
            for (int kk = k; kk < K; kk++)
                s += kx_load_w1(wt, W + (size_t)i * ws, kk) * x[kk];
            float *y = &Y[(size_t)j * ldy + i];
            *y = acc ? *y + s : s;
        }
}

/* Rows in groups of RM_ and tokens in groups of RN_, then the tails one at a
 * time: TILE(r, t, rows, tokens) per tile (rows and tokens are constants, so
 * each tile shape inlines on its own). */
#define KX_FOR_TILES(nr, nt, RM_, RN_, TILE)                                   \
    do {                                                                      \
        int r_ = 0;                                                           \
        for (; r_ + (RM_) <= (nr); r_ += (RM_)) {                             \
            int t_ = 0;                                                       \
            for (; t_ + (RN_) <= (nt); t_ += (RN_))                           \
                TILE(r_, t_, RM_, RN_);                                       \
            for (; t_ < (nt); t_++)                                           \
                TILE(r_, t_, RM_, 1);                                         \
        }                                                                     \
        for (; r_ < (nr); r_++) {                                             \
            int t_ = 0;                                                       \
            for (; t_ + (RN_) <= (nt); t_ += (RN_))                           \
                TILE(r_, t_, 1, RN_);                                         \
            for (; t_ < (nt); t_++)                                           \
                TILE(r_, t_, 1, 1);                                           \
        }                                                                     \
    } while (0)

KX_INLINE void kx_gemm_float(int wt, int K, const void *W, size_t ws, int nr, const void *X,
                             size_t xs, int nt, float *Y, size_t ldy, int acc)
{
    const uint8_t *w = W, *x = X;
#define KX_FT(r, t, rm, rn) \
    kx_ftile(wt, K, w + (size_t)(r) * ws, ws, x + (size_t)(t) * xs, xs, Y + (size_t)(t) * ldy + (r), ldy, acc, rm, rn)
    KX_FOR_TILES(nr, nt, KX_FRM, KX_FRN, KX_FT);
#undef KX_FT
}

static void gemm_f32(int K, const void *W, size_t ws, int nr, const void *X, size_t xs, int nt,
                     float *Y, size_t ldy, int acc)
{
    kx_gemm_float(KX_W_F32, K, W, ws, nr, X, xs, nt, Y, ldy, acc);
}

static void gemm_f16(int K, const void *W, size_t ws, int nr, const void *X, size_t xs, int nt,
                     float *Y, size_t ldy, int acc)
{
    kx_gemm_float(KX_W_F16, K, W, ws, nr, X, xs, nt, Y, ldy, acc);
}

#ifdef KX_BF16
/* BF16 weights x BF16 activations (the table's bf16_act) on vdpbf16ps: 32
 * products per instruction into 16 fp32 lanes, twice the rate of float
 * FMAs. A (row, token) pair is one chain over K and one horizontal sum
 * whatever the tile, so a token gets the same bits alone or in a batch. */
enum { KX_BM = 4, KX_BN = 6 }; /* 24 accumulators + 4 weight vectors + 1 activation vector */

KX_INLINE float kx_bf16f(const uint8_t *p)
{
    uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The 16 lanes of each of a..d summed, as {sum a, sum b, sum c, sum d}: 13
 * instructions for four sums. A vector's sum takes the same tree whatever
 * its neighbours (zeros for a lone row), so its bits do not depend on them. */
KX_INLINE __m128 kx_reduce4(__m512 a, __m512 b, __m512 c, __m512 d)
{
    __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    __m512 t = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))));
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(t), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t), 1)));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

KX_INLINE void kx_btile(int K, const uint8_t *W, size_t ws, const uint8_t *X, size_t xs, float *Y, size_t ldy,
                        int acc, const int RM, const int RN)
{
    __m512 c[KX_BM][KX_BN];
#pragma GCC unroll 4
    for (int i = 0; i < RM; i++)
#pragma GCC unroll 6
        for (int j = 0; j < RN; j++)
            c[i][j] = _mm512_setzero_ps();
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        __m512bh w[KX_BM];
#pragma GCC unroll 4
        for (int i = 0; i < RM; i++)
            w[i] = (__m512bh)_mm512_loadu_si512((const void *)(W + (size_t)i * ws + 2 * (size_t)k));
#pragma GCC unroll 6
        for (int j = 0; j < RN; j++) {
            __m512bh x = (__m512bh)_mm512_loadu_si512((const void *)(X + (size_t)j * xs + 2 * (size_t)k));
#pragma GCC unroll 4
            for (int i = 0; i < RM; i++)
                c[i][j] = _mm512_dpbf16_ps(c[i][j], w[i], x);
        }
    }
#pragma GCC unroll 6
    for (int j = 0; j < RN; j++) {
        float sums[4];
        __m512 z = _mm512_setzero_ps();
        _mm_storeu_ps(sums, kx_reduce4(c[0][j], RM > 1 ? c[1][j] : z, RM > 2 ? c[2][j] : z, RM > 3 ? c[3][j] : z));
#pragma GCC unroll 4
        for (int i = 0; i < RM; i++) {
            float s = sums[i];
            for (int kk = k; kk < K; kk++)
                s += kx_bf16f(W + (size_t)i * ws + 2 * (size_t)kk) * kx_bf16f(X + (size_t)j * xs + 2 * (size_t)kk);
            float *y = &Y[(size_t)j * ldy + i];
            *y = acc ? *y + s : s;
        }
    }
}

static void gemm_bf16(int K, const void *W, size_t ws, int nr, const void *X, size_t xs, int nt,
                      float *Y, size_t ldy, int acc)
{
    const uint8_t *w = W, *x = X;
#define KX_BT(r, t, rm, rn) \
    kx_btile(K, w + (size_t)(r) * ws, ws, x + (size_t)(t) * xs, xs, Y + (size_t)(t) * ldy + (r), ldy, acc, rm, rn)
    KX_FOR_TILES(nr, nt, KX_BM, KX_BN, KX_BT);
#undef KX_BT
}
#define KX_BF16_ACT 1
#else
static void gemm_bf16(int K, const void *W, size_t ws, int nr, const void *X, size_t xs, int nt,
                      float *Y, size_t ldy, int acc)
{
    kx_gemm_float(KX_W_BF16, K, W, ws, nr, X, xs, nt, Y, ldy, acc);
}
#define KX_BF16_ACT 0
#endif

#ifdef KX_AMX
/* ---- BF16 on AMX tiles (Sapphire Rapids and later): tdpbf16ps multiplies a 16 x 32 bf16 tile by a 32 x 16
 * one into 16 x 16 fp32, 8192 products an instruction where vdpbf16ps does 32. The weights are the first
 * operand as they lie (16 rows of 64 bytes, the row stride apart), the activations the second, in the tile
 * layout matmul.c writes (kernels.h); tiles 0-3 accumulate 32 rows x 32 tokens over the whole of K, 4-5 hold
 * the weight rows, 6-7 the token groups. A result element depends on its row and token only, so a token gets
 * the same bits alone (its group padded with zeros) or in a batch. */
typedef struct {
    uint8_t  palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t  rows[16];
} kx_tilecfg;

/* Tiles 0-7 as 16 rows of 64 bytes (this thread's tile state, until _tile_release). */
KX_INLINE void kx_amx_config(void)
{
    kx_tilecfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    _tile_loadconfig(&cfg);
}

/* An accumulator tile (16 weight rows x 16 tokens) out: Y[t][i] (+)= c[i][t] for the first nt tokens. */
KX_INLINE void kx_amx_out(int tile, float *Y, size_t ldy, int nt, int acc)
{
    float c[16 * 16];
    switch (tile) { /* the tile number is an immediate */
    case 0: _tile_stored(0, c, 64); break;
    case 1: _tile_stored(1, c, 64); break;
    case 2: _tile_stored(2, c, 64); break;
    default: _tile_stored(3, c, 64); break;
    }
    const __m512i col = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32(16));
    for (int t = 0; t < nt && t < 16; t++) { /* token t's 16 rows: column t of c */
        __m512 v = _mm512_i32gather_ps(col, c + t, 4);
        float *y = Y + (size_t)t * ldy;
        _mm512_storeu_ps(y, acc ? _mm512_add_ps(_mm512_loadu_ps(y), v) : v);
    }
}

/* RM (1, 2) tiles of 16 weight rows at W times RN (1, 2) token groups at X (gs bytes apart), nt tokens. */
KX_INLINE void kx_amx_tile(int K, const uint8_t *W, size_t ws, const uint8_t *X, size_t gs, float *Y, size_t ldy,
                           int nt, int acc, const int RM, const int RN)
{
    _tile_zero(0);
    if (RN > 1)
        _tile_zero(1);
    if (RM > 1)
        _tile_zero(2);
    if (RM > 1 && RN > 1)
        _tile_zero(3);
    for (int k = 0; k < K; k += 32) {
        _tile_loadd(4, W + 2 * (size_t)k, (long)ws);
        if (RM > 1)
            _tile_loadd(5, W + 16 * ws + 2 * (size_t)k, (long)ws);
        _tile_loadd(6, X + 32 * (size_t)k, 64); /* a group's rows of 16 pairs for elements k .. k + 31 */
        if (RN > 1)
            _tile_loadd(7, X + gs + 32 * (size_t)k, 64);
        _tile_dpbf16ps(0, 4, 6);
        if (RN > 1)
            _tile_dpbf16ps(1, 4, 7);
        if (RM > 1)
            _tile_dpbf16ps(2, 5, 6);
        if (RM > 1 && RN > 1)
            _tile_dpbf16ps(3, 5, 7);
    }
    kx_amx_out(0, Y, ldy, nt, acc);
    if (RN > 1)
        kx_amx_out(1, Y + 16 * ldy, ldy, nt - 16, acc);
    if (RM > 1)
        kx_amx_out(2, Y + 16, ldy, nt, acc);
    if (RM > 1 && RN > 1)
        kx_amx_out(3, Y + 16 * ldy + 16, ldy, nt - 16, acc);
}

static void gemm_bf16_tiled(int K, const void *W, size_t ws, int nr, const void *X, size_t xs, int nt, float *Y,
                            size_t ldy, int acc)
{
    const uint8_t *w = W, *x = X;
    const size_t gs = CPU_BF16_TILE_T * xs; /* bytes of a token group */
    const int nr16 = nr / 16 * 16;
    kx_amx_config();
    for (int r = 0; r < nr16; r += 32)
        for (int t = 0; t < nt; t += 32) {
            const uint8_t *wr = w + (size_t)r * ws, *xt = x + (size_t)t * xs;
            float *y = Y + (size_t)t * ldy + r;
            int n = nt - t < 32 ? nt - t : 32, two_m = nr16 - r >= 32, two_n = n > 16;
            if (two_m && two_n)
                kx_amx_tile(K, wr, ws, xt, gs, y, ldy, n, acc, 2, 2);
            else if (two_m)
                kx_amx_tile(K, wr, ws, xt, gs, y, ldy, n, acc, 2, 1);
            else if (two_n)
                kx_amx_tile(K, wr, ws, xt, gs, y, ldy, n, acc, 1, 2);
            else
                kx_amx_tile(K, wr, ws, xt, gs, y, ldy, n, acc, 1, 1);
        }
    _tile_release();
    /* the last nr % 16 rows: each (row, token) a float chain over K read from the tile layout */
    for (int r = nr16; r < nr; r++)
        for (int t = 0; t < nt; t++) {
            const uint32_t *g = (const uint32_t *)(const void *)(x + (size_t)(t - t % 16) * xs) + t % 16;
            const uint8_t *wr = w + (size_t)r * ws;
            float s = 0.0f;
            for (int p = 0; p < K / 2; p++) {
                uint32_t pr = g[(size_t)p * 16];
                s += kx_bf16f(wr + 4 * (size_t)p) * kx_bf16f((const uint8_t *)&pr) +
                     kx_bf16f(wr + 4 * (size_t)p + 2) * kx_bf16f((const uint8_t *)&pr + 2);
            }
            float *y = Y + (size_t)t * ldy + r;
            *y = acc ? *y + s : s;
        }
}
#define KX_GEMM_BF16_TILED gemm_bf16_tiled

/* F16 weights x split activations (kernels.h: gemm_f16_tiled): each 16-row tile's weights split once per call
 * into bf16 hi and lo rows (w - hi is exact in bf16: f16 has 3 bits more), then for each token group
 * C += Whi Xhi + Whi Xlo + Wlo Xhi over K, in that order, for two row tiles at a time: tiles 0-1 accumulate,
 * 2-5 hold the weights' hi and lo, 6-7 the group's hi and lo. */
KX_INLINE void kx_amx_split_rows(int K, const uint8_t *W, size_t ws, int nr, uint16_t *hi, uint16_t *lo)
{
    for (int r = 0; r < nr; r++)
        for (int e = 0; e < K; e += 16) {
            __m512 w = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(W + (size_t)r * ws + 2 * (size_t)e)));
            __m256bh h = _mm512_cvtneps_pbh(w);
            __m256bh l = _mm512_cvtneps_pbh(_mm512_sub_ps(w, _mm512_cvtpbh_ps(h)));
            _mm256_storeu_si256((__m256i *)(hi + (size_t)r * K + e), (__m256i)h);
            _mm256_storeu_si256((__m256i *)(lo + (size_t)r * K + e), (__m256i)l);
        }
}

KX_INLINE void kx_amx_split_tile(int K, const uint16_t *hi, const uint16_t *lo, const uint8_t *X, float *Y,
                                 size_t ldy, int nt, int acc, const int RM)
{
    const size_t ws = 2 * (size_t)K, xlo = 32 * (size_t)K; /* a group's lo rows: after its 16 x K hi values */
    const uint8_t *h = (const uint8_t *)hi, *l = (const uint8_t *)lo;
    _tile_zero(0);
    if (RM > 1)
        _tile_zero(1);
    for (int k = 0; k < K; k += 32) {
        _tile_loadd(2, h + 2 * (size_t)k, (long)ws);
        _tile_loadd(3, l + 2 * (size_t)k, (long)ws);
        if (RM > 1) {
            _tile_loadd(4, h + 16 * ws + 2 * (size_t)k, (long)ws);
            _tile_loadd(5, l + 16 * ws + 2 * (size_t)k, (long)ws);
        }
        _tile_loadd(6, X + 32 * (size_t)k, 64);
        _tile_loadd(7, X + xlo + 32 * (size_t)k, 64);
        _tile_dpbf16ps(0, 2, 6);
        _tile_dpbf16ps(0, 2, 7);
        _tile_dpbf16ps(0, 3, 6);
        if (RM > 1) {
            _tile_dpbf16ps(1, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(1, 5, 6);
        }
    }
    kx_amx_out(0, Y, ldy, nt, acc);
    if (RM > 1)
        kx_amx_out(1, Y + 16, ldy, nt, acc);
}

static void gemm_f16_tiled(int K, const void *W, size_t ws, int nr, const void *X, size_t xs, int nt, float *Y,
                           size_t ldy, int acc, uint16_t *scratch)
{
    const uint8_t *w = W, *x = X;
    const int nr16 = nr / 16 * 16;
    uint16_t *hi = scratch, *lo = scratch + (size_t)nr16 * K;
    kx_amx_split_rows(K, w, ws, nr16, hi, lo);
    kx_amx_config();
    for (int r = 0; r < nr16; r += 32)
        for (int t = 0; t < nt; t += 16) {
            const size_t off = (size_t)r * K;
            int n = nt - t < 16 ? nt - t : 16;
            if (nr16 - r >= 32)
                kx_amx_split_tile(K, hi + off, lo + off, x + (size_t)t * xs, Y + (size_t)t * ldy + r, ldy, n, acc, 2);
            else
                kx_amx_split_tile(K, hi + off, lo + off, x + (size_t)t * xs, Y + (size_t)t * ldy + r, ldy, n, acc, 1);
        }
    _tile_release();
    /* the last nr % 16 rows: float chains of w (hi + lo of x) */
    for (int r = nr16; r < nr; r++)
        for (int t = 0; t < nt; t++) {
            const uint32_t *gh = (const uint32_t *)(const void *)(x + (size_t)(t - t % 16) * xs) + t % 16;
            const uint32_t *gl = gh + 8 * (size_t)K;
            float s = 0.0f;
            for (int p = 0; p < K / 2; p++) {
                uint32_t ph = gh[(size_t)p * 16], pl = gl[(size_t)p * 16];
                for (int e = 0; e < 2; e++) {
                    float xv = kx_bf16f((const uint8_t *)&ph + 2 * e) + kx_bf16f((const uint8_t *)&pl + 2 * e);
                    uint16_t wh;
                    memcpy(&wh, w + (size_t)r * ws + 2 * (size_t)(2 * p + e), 2);
                    s += _cvtsh_ss(wh) * xv;
                }
            }
            float *y = Y + (size_t)t * ldy + r;
            *y = acc ? *y + s : s;
        }
}
#define KX_GEMM_F16_TILED gemm_f16_tiled
#endif

/* ---- quantised weights x Q8 activations (256-bit integer dot products) ---- */

/* Q8_0 x Q8: the sign trick (|w| as unsigned times x with w's sign) feeds
 * maddubs; Q4_0 x Q8: the unsigned nibbles q feed maddubs directly and the -8
 * offset comes off as 8*sum(x), computed once per activation block. Per (row,
 * token, block): maddubs, sign or subtract, madd, convert, scale, fma. */
KX_INLINE void kx_qtile(int q4, int nb, const uint8_t *W, size_t ws, const uint8_t *X, size_t xs,
                        float *Y, size_t ldy, int acc, const int RM, const int RN)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 c[KX_QMAX][KX_QMAX];
#pragma GCC unroll 8
    for (int i = 0; i < RM; i++)
#pragma GCC unroll 8
        for (int j = 0; j < RN; j++)
            c[i][j] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256i xv[KX_QMAX], x8[KX_QMAX];
        __m256 dx[KX_QMAX];
#pragma GCC unroll 8
        for (int j = 0; j < RN; j++) {
            const cpu_q8_act *xa = (const cpu_q8_act *)(X + (size_t)j * xs) + b;
            xv[j] = _mm256_loadu_si256((const __m256i *)xa->qs);
            dx[j] = _mm256_set1_ps(xa->d);
            if (q4) /* pairwise 8*(x0+x1) in int16, subtracted from each row's products */
                x8[j] = _mm256_maddubs_epi16(_mm256_set1_epi8(8), xv[j]);
        }
        if (RN == 1) /* GEMV: pull the rows KX_PREFETCH_ROWS ahead into cache */
#pragma GCC unroll 8
            for (int i = 0; i < RM; i++)
                _mm_prefetch((const char *)(W + (size_t)(i + KX_PREFETCH_ROWS) * ws) +
                             (size_t)b * (q4 ? sizeof(llm_block_q4_0) : sizeof(llm_block_q8_0)), _MM_HINT_T0);
#pragma GCC unroll 8
        for (int i = 0; i < RM; i++) {
            __m256i wv;
            __m256 dw;
            if (q4) {
                const llm_block_q4_0 *blk = (const llm_block_q4_0 *)(W + (size_t)i * ws) + b;
                dw = _mm256_set1_ps(_cvtsh_ss(blk->d));
                wv = kx_q4_nibbles(blk->qs);
            } else {
                const llm_block_q8_0 *blk = (const llm_block_q8_0 *)(W + (size_t)i * ws) + b;
                dw = _mm256_set1_ps(_cvtsh_ss(blk->d));
                wv = _mm256_loadu_si256((const __m256i *)blk->qs);
            }
            __m256i aw = q4 ? wv : _mm256_sign_epi8(wv, wv);
#pragma GCC unroll 8
            for (int j = 0; j < RN; j++) {
                __m256i p;
                if (q4)
                    p = _mm256_sub_epi16(_mm256_maddubs_epi16(wv, xv[j]), x8[j]);
                else
                    p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv[j], wv));
                __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
                c[i][j] = _mm256_fmadd_ps(f, _mm256_mul_ps(dw, dx[j]), c[i][j]);
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < RM; i++)
#pragma GCC unroll 8
        for (int j = 0; j < RN; j++) {
            float s = kx_hsum256(c[i][j]);
            float *y = &Y[(size_t)j * ldy + i];
            *y = acc ? *y + s : s;
        }
}

KX_INLINE void kx_gemm_q(int q4, int K, const void *W, size_t ws, int nr, const void *X, size_t xs,
                         int nt, float *Y, size_t ldy, int acc, const int KX_QRM, const int KX_QRN)
{
    const uint8_t *w = W, *x = X;
    int nb = K / LLM_QK, r = 0;
    for (; r + KX_QRM <= nr; r += KX_QRM) {
        int t = 0;
        for (; t + KX_QRN <= nt; t += KX_QRN)
            kx_qtile(q4, nb, w + (size_t)r * ws, ws, x + (size_t)t * xs, xs, Y + (size_t)t * ldy + r, ldy,
                     acc, KX_QRM, KX_QRN);
        for (; t < nt; t++)
            kx_qtile(q4, nb, w + (size_t)r * ws, ws, x + (size_t)t * xs, xs, Y + (size_t)t * ldy + r, ldy,
                     acc, KX_QRM, 1);
    }
    for (; r < nr; r++) {
        int t = 0;
        for (; t + KX_QRN <= nt; t += KX_QRN)
            kx_qtile(q4, nb, w + (size_t)r * ws, ws, x + (size_t)t * xs, xs, Y + (size_t)t * ldy + r, ldy,
                     acc, 1, KX_QRN);
        for (; t < nt; t++)
            kx_qtile(q4, nb, w + (size_t)r * ws, ws, x + (size_t)t * xs, xs, Y + (size_t)t * ldy + r, ldy,
                     acc, 1, 1);
    }
}

#ifdef KX_VNNI
/* ---- AVX-512 VNNI: the same products with vpdpbusd, two tokens a register ----
 * A 512-bit register holds one activation block of token j (low half) and of
 * token j + 1 (high half); a weight block is broadcast to both halves, so one
 * vpdpbusd makes 8 lane sums of 4 products for each of the two tokens.
 * vpdpbusd multiplies unsigned by signed bytes, so the weights go in as
 * unsigned: Q4_0's nibbles q (value q - 8), Q8_0's w + 128 (w xor 0x80). The
 * offset (8 or 128) times the lane's 4 activations comes off through the
 * accumulator's start value, computed once per token block. The lane sums,
 * their conversion, scaling and accumulation and the final horizontal sum are
 * kx_qtile's, operation for operation, so a token gets the same bits through
 * either kernel (decode, one token a step, still runs kx_qtile). */
KX_INLINE void kx_vtile(int q4, int nb, const uint8_t *W, size_t ws, const uint8_t *X, size_t xs,
                        float *Y, size_t ldy, int acc, const int RM, const int RP, int odd)
{
    enum { VMAX_M = 8, VMAX_P = 3 };
    __m512 c[VMAX_M][VMAX_P];
#pragma GCC unroll 8
    for (int i = 0; i < RM; i++)
#pragma GCC unroll 4
        for (int p = 0; p < RP; p++)
            c[i][p] = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512(), offset = _mm512_set1_epi8(q4 ? 8 : (char)0x80);
    for (int b = 0; b < nb; b++) {
        __m512i xv[VMAX_P], start[VMAX_P];
        __m512 dx[VMAX_P];
#pragma GCC unroll 4
        for (int p = 0; p < RP; p++) {
            int t1 = odd && p == RP - 1 ? 2 * p : 2 * p + 1; /* a lone last token fills both halves */
            const cpu_q8_act *a0 = (const cpu_q8_act *)(X + (size_t)(2 * p) * xs) + b;
            const cpu_q8_act *a1 = (const cpu_q8_act *)(X + (size_t)t1 * xs) + b;
            xv[p] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a0->qs)),
                                       _mm256_loadu_si256((const __m256i *)a1->qs), 1);
            dx[p] = _mm512_insertf32x8(_mm512_set1_ps(a0->d), _mm256_set1_ps(a1->d), 1);
            start[p] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, offset, xv[p]));
        }
#pragma GCC unroll 8
        for (int i = 0; i < RM; i++) {
            __m256i w8;
            __m512 dw;
            if (q4) {
                const llm_block_q4_0 *blk = (const llm_block_q4_0 *)(W + (size_t)i * ws) + b;
                w8 = kx_q4_nibbles(blk->qs);
                dw = _mm512_set1_ps(_cvtsh_ss(blk->d));
            } else {
                const llm_block_q8_0 *blk = (const llm_block_q8_0 *)(W + (size_t)i * ws) + b;
                w8 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)blk->qs), _mm256_set1_epi8((char)0x80));
                dw = _mm512_set1_ps(_cvtsh_ss(blk->d));
            }
            __m512i wv = _mm512_broadcast_i64x4(w8);
#pragma GCC unroll 4
            for (int p = 0; p < RP; p++) {
                __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start[p], wv, xv[p]));
                c[i][p] = _mm512_fmadd_ps(f, _mm512_mul_ps(dw, dx[p]), c[i][p]);
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < RM; i++)
#pragma GCC unroll 4
        for (int p = 0; p < RP; p++)
            for (int h = 0; h < 2 - (odd && p == RP - 1); h++) {
                __m256 v = h ? _mm512_extractf32x8_ps(c[i][p], 1) : _mm512_castps512_ps256(c[i][p]);
                float s = kx_hsum256(v);
                float *y = &Y[(size_t)(2 * p + h) * ldy + i];
                *y = acc ? *y + s : s;
            }
}

#ifndef KX_V_RM
#define KX_V_RM 8
#define KX_V_RP 2 /* 4 tokens: 16 accumulators + 2 x (activations, scales, starts) in 32 zmm */
#endif

KX_INLINE void kx_gemm_v(int q4, int K, const void *W, size_t ws, int nr, const void *X, size_t xs,
                         int nt, float *Y, size_t ldy, int acc)
{
    const uint8_t *w = W, *x = X;
    int nb = K / LLM_QK;
    for (int r = 0; r < nr;) {
        int rm = nr - r >= KX_V_RM ? KX_V_RM : 1;
        int t = 0;
        for (; t + 2 * KX_V_RP <= nt; t += 2 * KX_V_RP) {
            if (rm == KX_V_RM)
                kx_vtile(q4, nb, w + (size_t)r * ws, ws, x + (size_t)t * xs, xs, Y + (size_t)t * ldy + r, ldy,
                         acc, KX_V_RM, KX_V_RP, 0);
            else
                kx_vtile(q4, nb, w + (size_t)r * ws, ws, x + (size_t)t * xs, xs, Y + (size_t)t * ldy + r, ldy,
                         acc, 1, KX_V_RP, 0);
        }
        for (; t < nt; t += 2) {
            int odd = nt - t == 1;
            if (rm == KX_V_RM)
                kx_vtile(q4, nb, w + (size_t)r * ws, ws, x + (size_t)t * xs, xs, Y + (size_t)t * ldy + r, ldy,
                         acc, KX_V_RM, 1, odd);
            else
                kx_vtile(q4, nb, w + (size_t)r * ws, ws, x + (size_t)t * xs, xs, Y + (size_t)t * ldy + r, ldy,
                         acc, 1, 1, odd);
        }
        r += rm;
    }
}

/* acc += w (unsigned bytes) . the 4 signed bytes at p, broadcast to every lane,
 * as vpdpbusd's own memory broadcast: written out because GCC otherwise
 * materialises each broadcast in a full register spilled to the stack (the
 * kernel ran at half speed). */
KX_INLINE __m512i kx_dpbusd_bcast(__m512i acc, __m512i w, const int8_t *p)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)(const void *)p));
    return acc;
}

/* ---- over repacked weights (kernels.h: CPU_PK_*): a lane is a row ----
 * A register holds 16 rows' lanes for one token. Step k loads the group's 16 x
 * 4 weight bytes of elements 4k..4k+3 (the unsigned operand: Q4_0 / Q4_M
 * nibbles q, Q8_0 w + 128) and takes the token's 4 activation bytes of those
 * elements as vpdpbusd's broadcast memory operand (signed), so a token costs
 * one instruction per step and nothing to arrange. The offset (8 or 128)
 * times the block's activation sum (cpu_q8_act.isum) is the accumulator's
 * start; Q4_M has no offset but each row's min, taken off after the block as
 * m * dx * isum.
 * After the block: convert, scale by dw * dx, accumulate in float, lane by
 * lane; no horizontal sums, so any number of tokens per call gives a token
 * the same bits. */
KX_INLINE void kx_ptile(const cpu_pk_fmt f, int nb, const uint8_t *P, const uint8_t *X, size_t xs, float *Y,
                        size_t ldy, int acc, int rows, const int RT)
{
    enum { PT = 12 };
    const size_t bb = cpu_pk_block_bytes(f), hb = cpu_pk_head_bytes(f);
    const int q4 = f != CPU_PK_Q8_0, off = f == CPU_PK_Q4_0 ? 8 : f == CPU_PK_Q8_0 ? 128 : f == CPU_PK_MX4 ? 12 : 0;
    /* MX4: a code's value + 12 by a byte shuffle within each 128-bit lane */
    const __m512i mx4 = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)cpu_mx4_values));
    __m512 c[PT];
#pragma GCC unroll 12
    for (int j = 0; j < RT; j++)
        c[j] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = P + (size_t)b * bb;
        const cpu_q8_act *a[PT];
        __m512i s[PT];
#pragma GCC unroll 12
        for (int j = 0; j < RT; j++)
            a[j] = (const cpu_q8_act *)(X + (size_t)j * xs) + b;
        if (f == CPU_PK_Q6 || f == CPU_PK_Q2_M || f == CPU_PK_Q3) { /* two halves of 16 elements, each with
                                                     * its own scale: two accumulators (Q6: q - 32 with 2 high
                                                     * bits; Q3: q - 4; Q2_M: each half's min taken off after the
                                                     * block as m * dx * isum) */
            const int o6 = f == CPU_PK_Q6 ? -32 : f == CPU_PK_Q3 ? -4 : 0;
            __m512i s1[PT];
#pragma GCC unroll 12
            for (int j = 0; j < RT; j++) {
                s[j] = _mm512_set1_epi32(o6 * a[j]->isum_lo);
                s1[j] = _mm512_set1_epi32(o6 * (a[j]->isum - a[j]->isum_lo));
            }
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m512i raw = _mm512_loadu_si512((const void *)(blk + hb + 64 * k));
                __m512i w0 = _mm512_and_si512(raw, _mm512_set1_epi8(0x0f));
                __m512i w1 = _mm512_and_si512(_mm512_srli_epi16(raw, 4), _mm512_set1_epi8(0x0f));
                if (f == CPU_PK_Q6) {
                    __m512i h = _mm512_loadu_si512((const void *)(blk + hb + 256 + 64 * (k / 2)));
                    __m512i h0 = k % 2 ? h : _mm512_slli_epi16(h, 4), h1 = k % 2 ? _mm512_srli_epi16(h, 2) : _mm512_slli_epi16(h, 2);
                    w0 = _mm512_or_si512(w0, _mm512_and_si512(h0, _mm512_set1_epi8(0x30)));
                    w1 = _mm512_or_si512(w1, _mm512_and_si512(h1, _mm512_set1_epi8(0x30)));
                }
#pragma GCC unroll 12
                for (int j = 0; j < RT; j++) {
                    s[j] = kx_dpbusd_bcast(s[j], w0, a[j]->qs + 4 * k);
                    s1[j] = kx_dpbusd_bcast(s1[j], w1, a[j]->qs + 16 + 4 * k);
                }
            }
            /* dx (d0 s0 + d1 s1 - m0 sum(xq[0..15]) - m1 sum(xq[16..31])): the activation's numbers as
             * broadcast memory operands, nothing computed per token outside the vector units */
            __m512 d0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
            __m512 d1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
            __m512 m0 = _mm512_setzero_ps(), m1 = _mm512_setzero_ps();
            if (f == CPU_PK_Q2_M) {
                m0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 64)));
                m1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 96)));
            }
#pragma GCC unroll 12
            for (int j = 0; j < RT; j++) {
                __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(s[j]), d0);
                t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1[j]), d1, t);
                if (f == CPU_PK_Q2_M) {
                    t = _mm512_fnmadd_ps(m0, _mm512_set1_ps(a[j]->fsum_lo), t);
                    t = _mm512_fnmadd_ps(m1, _mm512_set1_ps(a[j]->fsum_hi), t);
                }
                c[j] = _mm512_fmadd_ps(t, _mm512_set1_ps(a[j]->d), c[j]);
            }
            continue;
        }
#pragma GCC unroll 12
        for (int j = 0; j < RT; j++)
            s[j] = _mm512_set1_epi32(-off * a[j]->isum);
        if (q4) {
            __m512i fifth = f == CPU_PK_Q5_M ? _mm512_loadu_si512((const void *)(blk + hb + 256)) : _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m512i raw = _mm512_loadu_si512((const void *)(blk + hb + 64 * k));
                __m512i lo = _mm512_and_si512(raw, _mm512_set1_epi8(0x0f));
                __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), _mm512_set1_epi8(0x0f));
                if (f == CPU_PK_Q5_M) { /* bit k -> 4 for the low element, bit 4+k -> 4 for the high one */
                    lo = _mm512_or_si512(lo, _mm512_and_si512(_mm512_slli_epi16(fifth, 4 - k), _mm512_set1_epi8(0x10)));
                    hi = _mm512_or_si512(hi, _mm512_and_si512(_mm512_srli_epi16(fifth, k), _mm512_set1_epi8(0x10)));
                }
                if (f == CPU_PK_MX4) {
                    lo = _mm512_shuffle_epi8(mx4, lo);
                    hi = _mm512_shuffle_epi8(mx4, hi);
                }
#pragma GCC unroll 12
                for (int j = 0; j < RT; j++) {
                    s[j] = kx_dpbusd_bcast(s[j], lo, a[j]->qs + 4 * k);
                    s[j] = kx_dpbusd_bcast(s[j], hi, a[j]->qs + 16 + 4 * k);
                }
            }
        } else {
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                __m512i w = _mm512_loadu_si512((const void *)(blk + hb + 64 * k));
#pragma GCC unroll 12
                for (int j = 0; j < RT; j++)
                    s[j] = kx_dpbusd_bcast(s[j], w, a[j]->qs + 4 * k);
            }
        }
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
#pragma GCC unroll 12
        for (int j = 0; j < RT; j++)
            c[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[j]), _mm512_mul_ps(dw, _mm512_set1_ps(a[j]->d)), c[j]);
        if (f == CPU_PK_Q4_M || f == CPU_PK_Q5_M) { /* - m * dx * sum(xq) */
            __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
#pragma GCC unroll 12
            for (int j = 0; j < RT; j++) /* d * isum is s: the same product */
                c[j] = _mm512_fnmadd_ps(mw, _mm512_set1_ps(a[j]->s), c[j]);
        }
    }
    __mmask16 m = rows >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << rows) - 1);
#pragma GCC unroll 12
    for (int j = 0; j < RT; j++) {
        float *y = Y + (size_t)j * ldy;
        __m512 v = acc ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, y), c[j]) : c[j];
        _mm512_mask_storeu_ps(y, m, v);
    }
}

/* Token tiles for kx_gemm_p: 12 (12 integer + 12 float accumulators; Q6, Q2_M and Q3 8: 16 + 8, both
 * halves in one pass), then 4, then 1. */
#define KX_PTILE kx_ptile
#define KX_P_T1(f) ((f) == CPU_PK_Q6 || (f) == CPU_PK_Q2_M || (f) == CPU_PK_Q3 ? 8 : 12)
#define KX_P_T2(f) 4
#endif

#ifdef KX_AVXVNNI
/* ---- AVX-VNNI (256-bit, for cores without AVX-512: Alder Lake and later
 * client cores) over the same packed layout as kx_ptile: a group's 16 rows are
 * two registers of 8 lanes; the token's 4 activation bytes are broadcast once
 * (there is no broadcast memory operand in this encoding) and feed both. The
 * lane math is kx_ptile's, so here too a token gets the same bits alone or in
 * a batch. */
KX_INLINE __m256i kx_bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

KX_INLINE void kx_ptile8(const cpu_pk_fmt f, int nb, const uint8_t *P, const uint8_t *X, size_t xs, float *Y,
                         size_t ldy, int acc, int rows, const int RT)
{
    enum { PT = 3 };
    const size_t bb = cpu_pk_block_bytes(f), hb = cpu_pk_head_bytes(f);
    const int q4 = f != CPU_PK_Q8_0, off = f == CPU_PK_Q4_0 ? 8 : f == CPU_PK_Q8_0 ? 128 : f == CPU_PK_MX4 ? 12 : 0;
    const __m256i mx4 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cpu_mx4_values)); /* kx_ptile's */
    __m256 c[PT][2];
#pragma GCC unroll 3
    for (int j = 0; j < RT; j++)
        c[j][0] = c[j][1] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = P + (size_t)b * bb;
        const cpu_q8_act *a[PT];
        __m256i s[PT][2];
#pragma GCC unroll 3
        for (int j = 0; j < RT; j++)
            a[j] = (const cpu_q8_act *)(X + (size_t)j * xs) + b;
        if (f == CPU_PK_Q6 || f == CPU_PK_Q2_M || f == CPU_PK_Q3) { /* kx_ptile's two-half lane math, 8 lanes
                                                                     * a register */
            const int o6 = f == CPU_PK_Q6 ? -32 : f == CPU_PK_Q3 ? -4 : 0;
            __m256 t[PT][2];
#pragma GCC unroll 2
            for (int half = 0; half < 2; half++) {
#pragma GCC unroll 3
                for (int j = 0; j < RT; j++)
                    s[j][0] = s[j][1] = _mm256_set1_epi32(o6 * (half ? a[j]->isum - a[j]->isum_lo : a[j]->isum_lo));
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    __m256i w[2];
#pragma GCC unroll 2
                    for (int v = 0; v < 2; v++) {
                        __m256i raw = _mm256_loadu_si256((const __m256i *)(blk + hb + 64 * k + 32 * v));
                        __m256i q = half ? _mm256_srli_epi16(raw, 4) : raw;
                        w[v] = _mm256_and_si256(q, _mm256_set1_epi8(0x0f));
                        if (f == CPU_PK_Q6) {
                            __m256i h = _mm256_loadu_si256((const __m256i *)(blk + hb + 256 + 64 * (k / 2) + 32 * v));
                            h = half ? (k % 2 ? _mm256_srli_epi16(h, 2) : _mm256_slli_epi16(h, 2))
                                     : (k % 2 ? h : _mm256_slli_epi16(h, 4));
                            w[v] = _mm256_or_si256(w[v], _mm256_and_si256(h, _mm256_set1_epi8(0x30)));
                        }
                    }
#pragma GCC unroll 3
                    for (int j = 0; j < RT; j++) {
                        __m256i x = kx_bcast4(a[j]->qs + 16 * half + 4 * k);
                        s[j][0] = _mm256_dpbusd_avx_epi32(s[j][0], w[0], x);
                        s[j][1] = _mm256_dpbusd_avx_epi32(s[j][1], w[1], x);
                    }
                }
                /* t = d0 s0 + d1 s1 (- m0 sum(xq[0..15]) - m1 sum(xq[16..31]) for Q2_M), then dx t: kx_ptile's
                 * lane math, operation for operation */
                __m256 dw0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 32 * half)));
                __m256 dw1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 32 * half + 16)));
#pragma GCC unroll 3
                for (int j = 0; j < RT; j++) {
                    __m256 x0 = _mm256_cvtepi32_ps(s[j][0]), x1 = _mm256_cvtepi32_ps(s[j][1]);
                    t[j][0] = half ? _mm256_fmadd_ps(x0, dw0, t[j][0]) : _mm256_mul_ps(x0, dw0);
                    t[j][1] = half ? _mm256_fmadd_ps(x1, dw1, t[j][1]) : _mm256_mul_ps(x1, dw1);
                }
            }
            if (f == CPU_PK_Q2_M) {
                __m256 mw[4];
#pragma GCC unroll 4
                for (int v = 0; v < 4; v++)
                    mw[v] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 64 + 16 * v)));
#pragma GCC unroll 3
                for (int j = 0; j < RT; j++) {
                    __m256 lo = _mm256_set1_ps(a[j]->fsum_lo), hi = _mm256_set1_ps(a[j]->fsum_hi);
                    t[j][0] = _mm256_fnmadd_ps(mw[2], hi, _mm256_fnmadd_ps(mw[0], lo, t[j][0]));
                    t[j][1] = _mm256_fnmadd_ps(mw[3], hi, _mm256_fnmadd_ps(mw[1], lo, t[j][1]));
                }
            }
#pragma GCC unroll 3
            for (int j = 0; j < RT; j++) {
                __m256 dx = _mm256_set1_ps(a[j]->d);
                c[j][0] = _mm256_fmadd_ps(t[j][0], dx, c[j][0]);
                c[j][1] = _mm256_fmadd_ps(t[j][1], dx, c[j][1]);
            }
            continue;
        }
#pragma GCC unroll 3
        for (int j = 0; j < RT; j++)
            s[j][0] = s[j][1] = _mm256_set1_epi32(-off * a[j]->isum);
        if (q4) {
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const uint8_t *q = blk + hb + 64 * k;
                __m256i r0 = _mm256_loadu_si256((const __m256i *)q), r1 = _mm256_loadu_si256((const __m256i *)(q + 32));
                __m256i m = _mm256_set1_epi8(0x0f);
                __m256i lo0 = _mm256_and_si256(r0, m), lo1 = _mm256_and_si256(r1, m);
                __m256i hi0 = _mm256_and_si256(_mm256_srli_epi16(r0, 4), m), hi1 = _mm256_and_si256(_mm256_srli_epi16(r1, 4), m);
                if (f == CPU_PK_Q5_M) { /* kx_ptile's fifth bits */
                    __m256i f0 = _mm256_loadu_si256((const __m256i *)(blk + hb + 256));
                    __m256i f1 = _mm256_loadu_si256((const __m256i *)(blk + hb + 288)), b4 = _mm256_set1_epi8(0x10);
                    lo0 = _mm256_or_si256(lo0, _mm256_and_si256(_mm256_slli_epi16(f0, 4 - k), b4));
                    lo1 = _mm256_or_si256(lo1, _mm256_and_si256(_mm256_slli_epi16(f1, 4 - k), b4));
                    hi0 = _mm256_or_si256(hi0, _mm256_and_si256(_mm256_srli_epi16(f0, k), b4));
                    hi1 = _mm256_or_si256(hi1, _mm256_and_si256(_mm256_srli_epi16(f1, k), b4));
                }
                if (f == CPU_PK_MX4) {
                    lo0 = _mm256_shuffle_epi8(mx4, lo0);
                    lo1 = _mm256_shuffle_epi8(mx4, lo1);
                    hi0 = _mm256_shuffle_epi8(mx4, hi0);
                    hi1 = _mm256_shuffle_epi8(mx4, hi1);
                }
#pragma GCC unroll 3
                for (int j = 0; j < RT; j++) {
                    __m256i x0 = kx_bcast4(a[j]->qs + 4 * k), x1 = kx_bcast4(a[j]->qs + 16 + 4 * k);
                    s[j][0] = _mm256_dpbusd_avx_epi32(s[j][0], lo0, x0);
                    s[j][1] = _mm256_dpbusd_avx_epi32(s[j][1], lo1, x0);
                    s[j][0] = _mm256_dpbusd_avx_epi32(s[j][0], hi0, x1);
                    s[j][1] = _mm256_dpbusd_avx_epi32(s[j][1], hi1, x1);
                }
            }
        } else {
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const uint8_t *q = blk + hb + 64 * k;
                __m256i w0 = _mm256_loadu_si256((const __m256i *)q), w1 = _mm256_loadu_si256((const __m256i *)(q + 32));
#pragma GCC unroll 3
                for (int j = 0; j < RT; j++) {
                    __m256i x = kx_bcast4(a[j]->qs + 4 * k);
                    s[j][0] = _mm256_dpbusd_avx_epi32(s[j][0], w0, x);
                    s[j][1] = _mm256_dpbusd_avx_epi32(s[j][1], w1, x);
                }
            }
        }
        __m256 dw0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        __m256 dw1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16)));
#pragma GCC unroll 3
        for (int j = 0; j < RT; j++) {
            __m256 dx = _mm256_set1_ps(a[j]->d);
            c[j][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[j][0]), _mm256_mul_ps(dw0, dx), c[j][0]);
            c[j][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[j][1]), _mm256_mul_ps(dw1, dx), c[j][1]);
        }
        if (f == CPU_PK_Q4_M || f == CPU_PK_Q5_M) { /* - m * dx * sum(xq) */
            __m256 mw0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 32)));
            __m256 mw1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 48)));
#pragma GCC unroll 3
            for (int j = 0; j < RT; j++) {
                __m256 sx = _mm256_set1_ps(a[j]->s); /* d * isum */
                c[j][0] = _mm256_fnmadd_ps(mw0, sx, c[j][0]);
                c[j][1] = _mm256_fnmadd_ps(mw1, sx, c[j][1]);
            }
        }
    }
#pragma GCC unroll 3
    for (int j = 0; j < RT; j++) {
        float v[16], *y = Y + (size_t)j * ldy;
        _mm256_storeu_ps(v, c[j][0]);
        _mm256_storeu_ps(v + 8, c[j][1]);
        for (int r = 0; r < rows && r < 16; r++)
            y[r] = acc ? y[r] + v[r] : v[r];
    }
}

/* Token tiles for kx_gemm_p: Q4_0/Q4_M/Q5_M 2 (4 integer + 4 float accumulators + 4 weight registers in 16
 * ymm), Q8_0, Q6, Q2_M and Q3 3 (6 + 6 accumulators + 2 weight registers), then 1. */
#define KX_PTILE kx_ptile8
#define KX_P_T1(f) ((f) == CPU_PK_Q8_0 || (f) == CPU_PK_Q6 || (f) == CPU_PK_Q2_M || (f) == CPU_PK_Q3 ? 3 : 2)
#define KX_P_T2(f) KX_P_T1(f)
#endif

#ifdef KX_PTILE
/* Packed weights, a group of CPU_PK_ROWS rows at a time, tokens in tiles of KX_P_T1, then KX_P_T2, then 1
 * (constants once f is, so each tile shape inlines on its own). */
KX_INLINE void kx_gemm_p(const cpu_pk_fmt f, int K, const void *P, int nr, const void *X, size_t xs, int nt,
                         float *Y, size_t ldy, int acc)
{
    int nb = K / LLM_QK;
    size_t gstride = (size_t)nb * cpu_pk_block_bytes(f);
    const uint8_t *p = P, *x = X;
    for (int r = 0; r < nr; r += CPU_PK_ROWS) {
        int rows = nr - r < CPU_PK_ROWS ? nr - r : CPU_PK_ROWS;
        const uint8_t *pg = p + (size_t)(r / CPU_PK_ROWS) * gstride;
        int j = 0;
        for (; j + KX_P_T1(f) <= nt; j += KX_P_T1(f))
            KX_PTILE(f, nb, pg, x + (size_t)j * xs, xs, Y + (size_t)j * ldy + r, ldy, acc, rows, KX_P_T1(f));
        for (; j + KX_P_T2(f) <= nt; j += KX_P_T2(f))
            KX_PTILE(f, nb, pg, x + (size_t)j * xs, xs, Y + (size_t)j * ldy + r, ldy, acc, rows, KX_P_T2(f));
        for (; j < nt; j++)
            KX_PTILE(f, nb, pg, x + (size_t)j * xs, xs, Y + (size_t)j * ldy + r, ldy, acc, rows, 1);
    }
}

static void gemm_packed(cpu_pk_fmt f, int K, const void *P, int nr, const void *X, size_t xs, int nt, float *Y,
                        size_t ldy, int acc)
{
    switch (f) { /* one specialised copy per format */
    case CPU_PK_Q8_0: kx_gemm_p(CPU_PK_Q8_0, K, P, nr, X, xs, nt, Y, ldy, acc); break;
    case CPU_PK_Q4_0: kx_gemm_p(CPU_PK_Q4_0, K, P, nr, X, xs, nt, Y, ldy, acc); break;
    case CPU_PK_Q4_M: kx_gemm_p(CPU_PK_Q4_M, K, P, nr, X, xs, nt, Y, ldy, acc); break;
    case CPU_PK_Q6:   kx_gemm_p(CPU_PK_Q6, K, P, nr, X, xs, nt, Y, ldy, acc); break;
    case CPU_PK_Q5_M: kx_gemm_p(CPU_PK_Q5_M, K, P, nr, X, xs, nt, Y, ldy, acc); break;
    case CPU_PK_Q2_M: kx_gemm_p(CPU_PK_Q2_M, K, P, nr, X, xs, nt, Y, ldy, acc); break;
    case CPU_PK_Q3:   kx_gemm_p(CPU_PK_Q3, K, P, nr, X, xs, nt, Y, ldy, acc); break;
    case CPU_PK_MX4:  kx_gemm_p(CPU_PK_MX4, K, P, nr, X, xs, nt, Y, ldy, acc); break;
    }
}
#define KX_GEMM_PACKED gemm_packed
#endif

static void gemm_q8_0(int K, const void *W, size_t ws, int nr, const void *X, size_t xs, int nt,
                      float *Y, size_t ldy, int acc)
{
#ifdef KX_VNNI
    if (nt > 1) {
        kx_gemm_v(0, K, W, ws, nr, X, xs, nt, Y, ldy, acc);
        return;
    }
#endif
    kx_gemm_q(0, K, W, ws, nr, X, xs, nt, Y, ldy, acc, KX_Q8_RM, KX_Q8_RN);
}

static void gemm_q4_0(int K, const void *W, size_t ws, int nr, const void *X, size_t xs, int nt,
                      float *Y, size_t ldy, int acc)
{
#ifdef KX_VNNI
    if (nt > 1) {
        kx_gemm_v(1, K, W, ws, nr, X, xs, nt, Y, ldy, acc);
        return;
    }
#endif
    kx_gemm_q(1, K, W, ws, nr, X, xs, nt, Y, ldy, acc, KX_Q4_RM, KX_Q4_RN);
}

static void quantize_act(const float *x, cpu_q8_act *y, int K)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int b = 0; b < K / LLM_QK; b++) {
        const float *p = x + (size_t)b * LLM_QK;
        __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8);
        __m256 v2 = _mm256_loadu_ps(p + 16), v3 = _mm256_loadu_ps(p + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        float amax = kx_hmax256(m);
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        __m256 s = _mm256_set1_ps(id);
        const int rnd = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, s), rnd));
        __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, s), rnd));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, s), rnd));
        __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, s), rnd));
        __m256i lo = _mm256_add_epi32(i0, i1), sum = _mm256_add_epi32(lo, _mm256_add_epi32(i2, i3));
        /* lanes 0-3: sum's halves; 4-7: lo's (the elements 0..15) */
        __m256i both = _mm256_permute2x128_si256(sum, lo, 0x20), hi = _mm256_permute2x128_si256(sum, lo, 0x31);
        __m256i s8 = _mm256_add_epi32(both, hi);
        s8 = _mm256_add_epi32(s8, _mm256_shuffle_epi32(s8, 0x4e));
        s8 = _mm256_add_epi32(s8, _mm256_shuffle_epi32(s8, 0xb1));
        __m128i s4 = _mm256_castsi256_si128(s8);
        /* pack 32 int32 -> 32 int8 and undo the per-lane interleave of the packs */
        __m256i q = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        q = _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[b].qs, q);
        y[b].d = d;
        y[b].s = d * (float)_mm_cvtsi128_si32(s4);
        y[b].isum = (int16_t)_mm_cvtsi128_si32(s4);
        y[b].isum_lo = (int16_t)_mm_cvtsi128_si32(_mm256_extracti128_si256(s8, 1));
        y[b].fsum_lo = (float)y[b].isum_lo;
        y[b].fsum_hi = (float)(y[b].isum - y[b].isum_lo);
    }
}

static float dot_f32(const float *a, const float *b, int n)
{
    KX_VF s0 = KX_ZERO(), s1 = KX_ZERO();
    int i = 0;
    for (; i + 2 * KX_VW <= n; i += 2 * KX_VW) {
        s0 = KX_FMA(KX_LOADF(a + i), KX_LOADF(b + i), s0);
        s1 = KX_FMA(KX_LOADF(a + i + KX_VW), KX_LOADF(b + i + KX_VW), s1);
    }
    for (; i + KX_VW <= n; i += KX_VW)
        s0 = KX_FMA(KX_LOADF(a + i), KX_LOADF(b + i), s0);
    float s = KX_HSUM(KX_ADD(s0, s1));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void axpy_f32(float a, const float *x, float *y, int n)
{
    KX_VF va = KX_SET1(a);
    int i = 0;
    for (; i + KX_VW <= n; i += KX_VW)
        KX_STOREF(y + i, KX_FMA(va, KX_LOADF(x + i), KX_LOADF(y + i)));
    for (; i < n; i++)
        y[i] += a * x[i];
}

/* Attention over a KV cache of f32 or f16 (KX_ATTN below instantiates both). */
#define KX_LD8_F32(p) _mm256_loadu_ps(p)
#define KX_LD8_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define KX_LDV_F32(p) KX_LOADF(p)
#define KX_LDV_F16(p) KX_LOAD_F16(p)
#define KX_TOF_F32(x) (x)
#define KX_TOF_F16(x) llm_fp16_to_f32(x)

/* dot_f32 over an f16 vector b, in dot_f32's order (the same bits on b widened). */
static float dot_f32_f16(const float *a, const uint16_t *b, int n)
{
    KX_VF s0 = KX_ZERO(), s1 = KX_ZERO();
    int i = 0;
    for (; i + 2 * KX_VW <= n; i += 2 * KX_VW) {
        s0 = KX_FMA(KX_LOADF(a + i), KX_LOAD_F16(b + i), s0);
        s1 = KX_FMA(KX_LOADF(a + i + KX_VW), KX_LOAD_F16(b + i + KX_VW), s1);
    }
    for (; i + KX_VW <= n; i += KX_VW)
        s0 = KX_FMA(KX_LOADF(a + i), KX_LOAD_F16(b + i), s0);
    float s = KX_HSUM(KX_ADD(s0, s1));
    for (; i < n; i++)
        s += a[i] * llm_fp16_to_f32(b[i]);
    return s;
}

/* attn_scores: four keys at a time, their sums reduced together (one
 * horizontal pass per four scores instead of one per score).
 * attn_accum: out stays in registers across positions, 4 vectors at a time. */
#define KX_ATTN(SCORES, ACCUM, T, LD8, LDV, TOF, DOT)                                                          \
static void SCORES(const float *q, const T *k, size_t stride, int n, int hd, float scale, float *out)          \
{                                                                                                              \
    int i = 0;                                                                                                 \
    if ((hd & 7) == 0) {                                                                                       \
        for (; i + 4 <= n; i += 4) {                                                                           \
            const T *k0 = k + (size_t)i * stride, *k1 = k0 + stride, *k2 = k1 + stride, *k3 = k2 + stride;     \
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                        \
            for (int d = 0; d < hd; d += 8) {                                                                  \
                __m256 qv = _mm256_loadu_ps(q + d);                                                            \
                a0 = _mm256_fmadd_ps(qv, LD8(k0 + d), a0);                                                     \
                a1 = _mm256_fmadd_ps(qv, LD8(k1 + d), a1);                                                     \
                a2 = _mm256_fmadd_ps(qv, LD8(k2 + d), a2);                                                     \
                a3 = _mm256_fmadd_ps(qv, LD8(k3 + d), a3);                                                     \
            }                                                                                                  \
            __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));                         \
            __m128 r = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));                     \
            _mm_storeu_ps(out + i, _mm_mul_ps(r, _mm_set1_ps(scale)));                                         \
        }                                                                                                      \
    }                                                                                                          \
    for (; i < n; i++)                                                                                         \
        out[i] = DOT(q, k + (size_t)i * stride, hd) * scale;                                                   \
}                                                                                                              \
                                                                                                               \
static void ACCUM(const float *a, const T *v, size_t stride, int n, int hd, float *out)                        \
{                                                                                                              \
    int d = 0;                                                                                                 \
    for (; d + 4 * KX_VW <= hd; d += 4 * KX_VW) {                                                              \
        KX_VF o0 = KX_LOADF(out + d), o1 = KX_LOADF(out + d + KX_VW);                                          \
        KX_VF o2 = KX_LOADF(out + d + 2 * KX_VW), o3 = KX_LOADF(out + d + 3 * KX_VW);                          \
        for (int i = 0; i < n; i++) {                                                                          \
            const T *vi = v + (size_t)i * stride + d;                                                          \
            KX_VF w = KX_SET1(a[i]);                                                                           \
            o0 = KX_FMA(w, LDV(vi), o0);                                                                       \
            o1 = KX_FMA(w, LDV(vi + KX_VW), o1);                                                               \
            o2 = KX_FMA(w, LDV(vi + 2 * KX_VW), o2);                                                           \
            o3 = KX_FMA(w, LDV(vi + 3 * KX_VW), o3);                                                           \
        }                                                                                                      \
        KX_STOREF(out + d, o0);                                                                                \
        KX_STOREF(out + d + KX_VW, o1);                                                                        \
        KX_STOREF(out + d + 2 * KX_VW, o2);                                                                    \
        KX_STOREF(out + d + 3 * KX_VW, o3);                                                                    \
    }                                                                                                          \
    for (; d + KX_VW <= hd; d += KX_VW) {                                                                      \
        KX_VF o = KX_LOADF(out + d);                                                                           \
        for (int i = 0; i < n; i++)                                                                            \
            o = KX_FMA(KX_SET1(a[i]), LDV(v + (size_t)i * stride + d), o);                                     \
        KX_STOREF(out + d, o);                                                                                 \
    }                                                                                                          \
    for (; d < hd; d++)                                                                                        \
        for (int i = 0; i < n; i++)                                                                            \
            out[d] += a[i] * TOF(v[(size_t)i * stride + d]);                                                   \
}

KX_ATTN(attn_scores, attn_accum, float, KX_LD8_F32, KX_LDV_F32, KX_TOF_F32, dot_f32)
KX_ATTN(attn_scores_h, attn_accum_h, uint16_t, KX_LD8_F16, KX_LDV_F16, KX_TOF_F16, dot_f32_f16)

/* The same for several queries over the same positions (prefill: the queries of a tile, or a GQA group's
 * heads, over a full KV block): KX_ATT_Q queries at a time share each K and V vector load, so the loops
 * run on FMAs instead of loads. Every query's scores and sums take the single-query kernels' operations in
 * their order (the same 8-lane accumulators and horizontal adds, the same FMAs over positions), so its
 * bits are the ones it gets alone; shapes outside the fast path call those kernels. */
#if KX_VW == 16
#define KX_ATT_Q 4 /* 16 + 4 ymm / 16 + 4 zmm accumulators and loads in 32 registers */
#else
#define KX_ATT_Q 2 /* 8 + 4 in 16 ymm */
#endif
#define KX_ATTN_MQ(SCORES_MQ, ACCUM_MQ, SCORES, ACCUM, T, LD8, LDV)                                            \
static void SCORES_MQ(const float *const *q, int nq, const T *k, size_t stride, int n, int hd, float scale,    \
                      float *const *out)                                                                       \
{                                                                                                              \
    int j = 0;                                                                                                 \
    if ((hd & 7) == 0 && (n & 3) == 0) {                                                                       \
        for (; j + KX_ATT_Q <= nq; j += KX_ATT_Q) {                                                            \
            for (int i = 0; i < n; i += 4) {                                                                   \
                const T *k0 = k + (size_t)i * stride, *k1 = k0 + stride, *k2 = k1 + stride, *k3 = k2 + stride; \
                __m256 a[KX_ATT_Q][4];                                                                         \
                _Pragma("GCC unroll 4") for (int u = 0; u < KX_ATT_Q; u++)                                                             \
                    a[u][0] = a[u][1] = a[u][2] = a[u][3] = _mm256_setzero_ps();                               \
                _Pragma("GCC unroll 4") for (int d = 0; d < hd; d += 8) {                                                              \
                    __m256 c0 = LD8(k0 + d), c1 = LD8(k1 + d), c2 = LD8(k2 + d), c3 = LD8(k3 + d);             \
                    _Pragma("GCC unroll 4") for (int u = 0; u < KX_ATT_Q; u++) {                                                       \
                        __m256 qv = _mm256_loadu_ps(q[j + u] + d);                                             \
                        a[u][0] = _mm256_fmadd_ps(qv, c0, a[u][0]);                                            \
                        a[u][1] = _mm256_fmadd_ps(qv, c1, a[u][1]);                                            \
                        a[u][2] = _mm256_fmadd_ps(qv, c2, a[u][2]);                                            \
                        a[u][3] = _mm256_fmadd_ps(qv, c3, a[u][3]);                                            \
                    }                                                                                          \
                }                                                                                              \
                _Pragma("GCC unroll 4") for (int u = 0; u < KX_ATT_Q; u++) {                                                           \
                    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[u][0], a[u][1]), _mm256_hadd_ps(a[u][2], a[u][3])); \
                    __m128 r = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));             \
                    _mm_storeu_ps(out[j + u] + i, _mm_mul_ps(r, _mm_set1_ps(scale)));                          \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }                                                                                                          \
    for (; j < nq; j++)                                                                                        \
        SCORES(q[j], k, stride, n, hd, scale, out[j]);                                                         \
}                                                                                                              \
                                                                                                               \
static void ACCUM_MQ(const float *const *a, int nq, const T *v, size_t stride, int n, int hd, float *const *out) \
{                                                                                                              \
    int j = 0;                                                                                                 \
    if (hd % (4 * KX_VW) == 0) {                                                                               \
        for (; j + KX_ATT_Q <= nq; j += KX_ATT_Q) {                                                            \
            for (int d = 0; d < hd; d += 4 * KX_VW) {                                                          \
                KX_VF o[KX_ATT_Q][4];                                                                          \
                _Pragma("GCC unroll 4") for (int u = 0; u < KX_ATT_Q; u++)                                                             \
                    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)                                                                \
                        o[u][c] = KX_LOADF(out[j + u] + d + c * KX_VW);                                        \
                for (int i = 0; i < n; i++) {                                                                  \
                    const T *vi = v + (size_t)i * stride + d;                                                  \
                    KX_VF v0 = LDV(vi), v1 = LDV(vi + KX_VW), v2 = LDV(vi + 2 * KX_VW), v3 = LDV(vi + 3 * KX_VW); \
                    _Pragma("GCC unroll 4") for (int u = 0; u < KX_ATT_Q; u++) {                                                       \
                        KX_VF w = KX_SET1(a[j + u][i]);                                                        \
                        o[u][0] = KX_FMA(w, v0, o[u][0]);                                                      \
                        o[u][1] = KX_FMA(w, v1, o[u][1]);                                                      \
                        o[u][2] = KX_FMA(w, v2, o[u][2]);                                                      \
                        o[u][3] = KX_FMA(w, v3, o[u][3]);                                                      \
                    }                                                                                          \
                }                                                                                              \
                _Pragma("GCC unroll 4") for (int u = 0; u < KX_ATT_Q; u++)                                                             \
                    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)                                                                \
                        KX_STOREF(out[j + u] + d + c * KX_VW, o[u][c]);                                        \
            }                                                                                                  \
        }                                                                                                      \
    }                                                                                                          \
    for (; j < nq; j++)                                                                                        \
        ACCUM(a[j], v, stride, n, hd, out[j]);                                                                 \
}

KX_ATTN_MQ(attn_scores_mq, attn_accum_mq, attn_scores, attn_accum, float, KX_LD8_F32, KX_LDV_F32)
KX_ATTN_MQ(attn_scores_mq_h, attn_accum_mq_h, attn_scores_h, attn_accum_h, uint16_t, KX_LD8_F16, KX_LDV_F16)

/* exp(x) for 8 floats: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial for
 * e^r (relative error ~2e-7), 2^n through the exponent bits; clamped so huge
 * |x| gives 0 or a large finite value instead of garbage. */
KX_INLINE __m256 kx_exp256(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static void kv_q8_quant(const float *x, int8_t *q, float *d, int g, int n)
{
    for (int i = 0; i < n; i += g) {
        float amax = 0.0f;
        int j = i;
        if (g % 8 == 0) {
            __m256 m = _mm256_setzero_ps();
            for (; j < i + g; j += 8) /* |x| by clearing the sign; max_ps keeps m where x is NaN, as below */
                m = _mm256_max_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x + j)), m);
            amax = kx_hmax256(m);
        }
        for (; j < i + g; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        float s = amax / 127.0f, inv = s > 0.0f ? 1.0f / s : 0.0f;
        d[i / g] = s;
        j = i;
        if (g % 8 == 0)
            for (; j < i + g; j += 8) { /* cvtps rounds to nearest even as lrintf does; |q| <= 127 packs exactly */
                __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j), _mm256_set1_ps(inv)));
                __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
                _mm_storel_epi64((__m128i *)(void *)(q + j), _mm_packs_epi16(w, w));
            }
        for (; j < i + g; j++)
            q[j] = (int8_t)lrintf(x[j] * inv);
    }
}

static void kv_q8_dequant(const int8_t *q, const float *d, int g, int n, float *out)
{
    if (g % 8 != 0) {
        for (int i = 0; i < n; i++)
            out[i] = d[i / g] * (float)q[i];
        return;
    }
#if KX_VW == 16
    if (g % 16 == 0) {
        for (int i = 0; i < n; i += g) {
            __m512 s = _mm512_set1_ps(d[i / g]);
            for (int j = i; j < i + g; j += 16) {
                __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(q + j)));
                _mm512_storeu_ps(out + j, _mm512_mul_ps(_mm512_cvtepi32_ps(v), s));
            }
        }
        return;
    }
#endif
    for (int i = 0; i < n; i += g) {
        __m256 s = _mm256_set1_ps(d[i / g]);
        for (int j = i; j < i + g; j += 8) {
            __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(q + j)));
            _mm256_storeu_ps(out + j, _mm256_mul_ps(_mm256_cvtepi32_ps(v), s));
        }
    }
}

static void f32_to_f16(const float *x, uint16_t *y, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        y[i] = llm_f32_to_fp16(x[i]);
}

/* x = softmax(x): the maximum, exp(x - max) with its sum, then times 1 / sum (max_ps skips NaN as the
 * scalar comparison does, so the maximum is the same value). */
static void softmax(float *x, int n)
{
    __m256 m8 = _mm256_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        m8 = _mm256_max_ps(_mm256_loadu_ps(x + i), m8);
    float mx = kx_hmax256(m8);
    for (; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    __m256 acc = _mm256_setzero_ps(), m = _mm256_set1_ps(mx);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = kx_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = kx_hsum256(acc);
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    __m256 iv = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), iv));
    for (; i < n; i++)
        x[i] *= inv;
}

static void swiglu(float *g, const float *u, int n)
{
    int i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 e = kx_exp256(_mm256_xor_ps(x, sign));
        __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void geglu(float *g, const float *u, int n)
{
    int i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), c = _mm256_set1_ps(-2.0f * 0.7978845608028654f);
    const __m256 a = _mm256_set1_ps(0.044715f);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 y = _mm256_mul_ps(c, _mm256_fmadd_ps(_mm256_mul_ps(a, x), _mm256_mul_ps(x, x), x)); /* -2y */
        __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, kx_exp256(y)));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++)
        g[i] = llm_gelu_tanh(g[i]) * u[i];
}

/* cpu_gelu_erf1 on 8 floats at a time (the same formula; the exponential is kx_exp256's) */
static void gelu_erf(float *x, const float *b, int n)
{
    int i = 0;
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(b + i));
        __m256 z = _mm256_mul_ps(_mm256_andnot_ps(sign, v), _mm256_set1_ps(0.70710678118654752f));
        __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), z, one));
        __m256 p = _mm256_fmadd_ps(t, _mm256_set1_ps(1.061405429f), _mm256_set1_ps(-1.453152027f));
        p = _mm256_fmadd_ps(t, p, _mm256_set1_ps(1.421413741f));
        p = _mm256_fmadd_ps(t, p, _mm256_set1_ps(-0.284496736f));
        p = _mm256_fmadd_ps(t, p, _mm256_set1_ps(0.254829592f));
        p = _mm256_mul_ps(t, p);
        __m256 e = _mm256_fnmadd_ps(p, kx_exp256(_mm256_xor_ps(_mm256_mul_ps(z, z), sign)), one);
        e = _mm256_or_ps(e, _mm256_and_ps(v, sign)); /* erf is odd */
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, e)));
    }
    for (; i < n; i++)
        x[i] = cpu_gelu_erf1(x[i] + b[i]);
}

static void dequant_rows(llm_dtype t, const void *w, size_t ws, int nr, int K, float *out)
{
    for (int r = 0; r < nr; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * ws;
        float *o = out + (size_t)r * K;
        if (t == LLM_Q8_0 || t == LLM_Q4_0) {
            for (int b = 0; b < K / LLM_QK; b++) {
                __m256i q;
                __m256 d;
                if (t == LLM_Q8_0) {
                    const llm_block_q8_0 *blk = (const llm_block_q8_0 *)row + b;
                    d = _mm256_set1_ps(_cvtsh_ss(blk->d));
                    q = _mm256_loadu_si256((const __m256i *)blk->qs);
                } else {
                    const llm_block_q4_0 *blk = (const llm_block_q4_0 *)row + b;
                    d = _mm256_set1_ps(_cvtsh_ss(blk->d));
                    q = _mm256_sub_epi8(kx_q4_nibbles(blk->qs), _mm256_set1_epi8(8));
                }
                __m128i q0 = _mm256_castsi256_si128(q), q1 = _mm256_extracti128_si256(q, 1);
                float *ob = o + (size_t)b * LLM_QK;
                _mm256_storeu_ps(ob, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q0))));
                _mm256_storeu_ps(ob + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q0, 8)))));
                _mm256_storeu_ps(ob + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q1))));
                _mm256_storeu_ps(ob + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q1, 8)))));
            }
        } else if (t == LLM_F16 || t == LLM_BF16) {
            int k = 0;
            for (; k + 8 <= K; k += 8) {
                __m128i h = _mm_loadu_si128((const __m128i *)(row + 2 * (size_t)k));
                __m256 f = t == LLM_F16 ? _mm256_cvtph_ps(h)
                                        : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
                _mm256_storeu_ps(o + k, f);
            }
            for (; k < K; k++)
                o[k] = kx_load_w1(t == LLM_F16 ? KX_W_F16 : KX_W_BF16, row, k);
        } else {
            memcpy(o, row, (size_t)K * sizeof(float));
        }
    }
}

#ifndef KX_INT8_PREFILL
#define KX_INT8_PREFILL 0
#endif
#ifndef KX_GEMM_PACKED
#define KX_GEMM_PACKED NULL
#endif
#ifndef KX_GEMM_BF16_TILED
#define KX_GEMM_BF16_TILED NULL
#endif
#ifndef KX_GEMM_F16_TILED
#define KX_GEMM_F16_TILED NULL
#endif
static const cpu_kernels kx_table = {
    KX_NAME, gemm_f32, gemm_f16, gemm_bf16, gemm_q8_0, gemm_q4_0, quantize_act, dot_f32, axpy_f32,
    attn_scores, attn_accum, attn_scores_h, attn_accum_h, attn_scores_mq, attn_accum_mq, attn_scores_mq_h,
    attn_accum_mq_h, dequant_rows, f32_to_f16, softmax, swiglu, geglu, KX_INT8_PREFILL,
    KX_GEMM_PACKED, KX_BF16_ACT, KX_GEMM_BF16_TILED, KX_GEMM_F16_TILED, kv_q8_quant, kv_q8_dequant, gelu_erf,
};
