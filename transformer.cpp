// transformer.cpp — the CPU backend: every op of transformer.h's Backend, forward and backward
// side by side, in plain C++17 loops with OpenMP across rows (or across (sentence, head) pairs
// in attention) and the project's own GEMM (cpu/gemm.cpp) for every matrix product.
// transformer.cu is the same list for the GPU: same names, same argument order, same order.
//
// The ops are written on float (namespace cpu); class CpuBackend at the end maps the
// interface onto them (floatX is float here) and adds int8 products (cpu/gemm_int8.h).
// Backward functions ACCUMULATE into parameter gradients (dW, db, dg, dE) and, unless a beta
// argument says otherwise, overwrite activation gradients.
//
// Order: §3.4/§3.5 embedding + positional encoding, linear layers, §3.3 ReLU, §5.4 dropout and
// the residual connection, LayerNorm, §3.2 attention, §3.2.3 attention over the decoding
// cache, the loss and decoding's top-k, §5.3 Adam.
#include <algorithm>
#include <cerrno>   // program_invocation_short_name (GNU)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "cpu/gemm.h"
#include "cpu/gemm_bf16.h"
#include "cpu/gemm_int8.h"
#include "cpu/kernel_common.h"
#include "model/search.h"
#include "transformer.h"

#ifdef _OPENMP
#include <omp.h>
static int max_threads() { return omp_get_max_threads(); }
static int thread_id() { return omp_get_thread_num(); }
static int team_size() { return omp_get_num_threads(); }   // the threads of this region
#else
static int max_threads() { return 1; }
static int thread_id() { return 0; }
static int team_size() { return 1; }
#endif

namespace cpu {

// Whether a loop of `pieces` independent pieces, `elements` floats in all, is worth the
// threads: one piece leaves the others idle, and below PARALLEL_MIN_ELEMENTS the fork and join
// (0.25-0.5 µs with the threads awake, Zen 4) cost about what they save. Decoding one sentence
// meets both: a LayerNorm over one row of d_model floats, 0.1-0.3 µs of work. Each piece is
// computed alike on any thread, so the bits do not depend on it.
constexpr size_t PARALLEL_MIN_ELEMENTS = 1 << 12;
[[maybe_unused]] static bool worth_threads(long pieces, size_t elements) {   // (unused without OpenMP)
    return pieces > 1 && elements >= PARALLEL_MIN_ELEMENTS;
}

// exp(x), vectorisable (no libm call; its clamps become vector min/max selects, which GCC
// allows only with -fno-trapping-math, as the Makefile builds: otherwise the comparisons stay
// branches and the loops over the vocabulary stay scalar, 5-10x slower):
// Cephes' expf polynomial on x - n ln 2, times 2^n built from the exponent bits. Relative
// error about 2e-7 (1-2 ulp). Inputs are clamped to [-87, 88]: below, the result is a tiny
// positive value, so callers zero masked entries themselves, never through exp(-inf).
// NaN stays NaN (a diverged step must show as one) by arithmetic alone: the clamps' compares
// are false for it and every step after passes it on. n is read off the bits of the rounded
// sum t (its low bits hold n two's-complement, as t and the magic constant share a binade),
// not converted from the float n, which would be undefined for NaN: no NaN test, no blend
// (the loss's and softmax's loops run 1.4x faster than with them, the same bits otherwise).
static inline float exp_fast(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float round_magic = 12582912.0f;   // 1.5 * 2^23: adding it rounds to an integer
    const float t = x * 1.44269504088896341f + round_magic;
    const float n = t - round_magic;   // round(x / ln 2)
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;   // x - n ln 2, two-part constant
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const uint32_t bits = (__builtin_bit_cast(uint32_t, t) - __builtin_bit_cast(uint32_t, round_magic) + 127u) << 23;
    return p * __builtin_bit_cast(float, bits);   // p * 2^n
}

#ifdef __AVX512F__
// (The maskz forms with every lane, not the plain ones: those pass an undefined value through,
// which trips GCC 12's "may be used uninitialized" warning, GCC bug 105593, as in gemm_bf16.cpp.)
constexpr __mmask16 ALL16 = 0xFFFF;

// exp_fast on 16 lanes, step for step as GCC compiles the scalar one (its products and sums
// contracted into FMAs); max(c, x) and min(c, x) return x when x is NaN, as the clamps do.
static inline __m512 exp_fast16(__m512 x) {
    const __m512 round_magic = _mm512_set1_ps(12582912.0f);
    x = _mm512_maskz_min_ps(ALL16, _mm512_set1_ps(88.0f), _mm512_maskz_max_ps(ALL16, _mm512_set1_ps(-87.0f), x));
    const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), round_magic);
    const __m512 n = _mm512_sub_ps(t, round_magic);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
    p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
    const __m512i n_bits = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_castps_si512(round_magic));
    const __m512i two_n = _mm512_maskz_slli_epi32(ALL16, _mm512_add_epi32(n_bits, _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(two_n));   // p * 2^n
}

// The largest of v's lanes and their sum, in every lane: four rounds of adding (or taking the
// larger of) each lane and its partner 8, 4, 2, then 1 lanes away (a fixed tree: the same
// bits every time).
template <class Op>
static inline __m512 all_lanes(__m512 v, Op op) {
    v = op(v, _mm512_maskz_shuffle_f32x4(ALL16, v, v, 0x4E));   // 256-bit halves swapped
    v = op(v, _mm512_maskz_shuffle_f32x4(ALL16, v, v, 0xB1));   // 128-bit quarters
    v = op(v, _mm512_maskz_permute_ps(ALL16, v, 0x4E));         // 64-bit pairs
    return op(v, _mm512_maskz_permute_ps(ALL16, v, 0xB1));      // neighbours
}
static inline __m512 all_lanes_max(__m512 v) {
    return all_lanes(v, [](__m512 a, __m512 b) { return _mm512_maskz_max_ps(ALL16, a, b); });
}
static inline __m512 all_lanes_sum(__m512 v) {   // (a lambda: an intrinsic has no address at -O1)
    return all_lanes(v, [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); });
}
#endif

// The loops over long rows of exp_fast (the loss, decoding's log-softmax over the vocabulary)
// ask GCC for 512-bit vectors where the CPU has AVX-512 (its default for -march=native is 256
// bits): exp_fast's ~20 vector instructions then cover 16 floats, not 8. (Attention's rows, 10
// to 100 keys, do better at 256.)
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#define WIDE_VECTORS __attribute__((target("prefer-vector-width=512")))
#else
#define WIDE_VECTORS
#endif

// ============================================================================================
// §3.4 Embeddings, §3.5 Positional Encoding: E[token] * sqrt(d_model) + PE, then dropout.
// ============================================================================================
// §3.5 Positional Encoding: pe (L, d) = sinusoid(pos, c, d) (numerics.h).
void positional_table(float* pe, int L, int d) {
#pragma omp parallel for schedule(static)
    for (int pos = 0; pos < L; pos++)
        for (int c = 0; c < d; c++) pe[(size_t)pos * d + c] = sinusoid(pos, c, d);
}

// y (n) = x * keep / (1 - p) (§5.4); in place allowed.
void dropout_forward(float* y, const float* x, size_t n, float p, uint64_t seed) {
    if (p <= 0.0f) {
        if (y != x) std::memcpy(y, x, n * sizeof(float));
        return;
    }
    const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static) if (worth_threads((long)n, n))
    for (size_t i = 0; i < n; i++) y[i] = dropout_keep(seed, i, p) ? x[i] * scale : 0.0f;
}

// §3.4 Embeddings and Softmax (the embedding half), §3.5 Positional Encoding:
// x (B, L, d) = dropout(E[tokens] * sqrt(d) + pe[pos0 + l]); tokens (B, L), E (V, d).
void embedding_forward(float* x, const int* tokens, const float* E, const float* pe, int pos0,
                       int B, int L, int d, float p, uint64_t seed) {
    const float emb_scale = std::sqrt((float)d);
#pragma omp parallel for schedule(static) if (worth_threads(B * L, (size_t)B * L * d))
    for (int r = 0; r < B * L; r++) {
        const float* e = E + (size_t)tokens[r] * d;   // (d)
        const float* pr = pe + (size_t)(pos0 + r % L) * d;
        float* out = x + (size_t)r * d;
        for (int c = 0; c < d; c++) out[c] = e[c] * emb_scale + pr[c];
    }
    dropout_forward(x, x, (size_t)B * L * d, p, seed);
}

// dE[tokens] += sqrt(d) * dropout'(dx); dpe[position] += dropout'(dx) (learned PE only).
// Serial over rows: rows that share a token add into the same row of dE.
void embedding_backward(float* dE, float* dpe, const float* dx, const int* tokens, int B, int L,
                        int d, float p, uint64_t seed) {
    const float emb_scale = std::sqrt((float)d);
    const float keep_scale = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
    for (int r = 0; r < B * L; r++) {
        float* de = dE + (size_t)tokens[r] * d;
        float* dp = dpe ? dpe + (size_t)(r % L) * d : nullptr;
        const float* g = dx + (size_t)r * d;
        for (int c = 0; c < d; c++) {
            size_t i = (size_t)r * d + c;
            float gi = (p <= 0 || dropout_keep(seed, i, p)) ? g[c] * keep_scale : 0.0f;
            de[c] = std::fma(gi, emb_scale, de[c]);   // one rounding, as the GPU's __fmaf_rn
            if (dp) dp[c] += gi;
        }
    }
}

// ============================================================================================
// Linear layers: Y = X W^T + b with W [out, in], as nn.Linear. Their products go through `gemm`:
// sgemm (fp32), or sgemm_bf16 (--precision bf16: operands rounded to bf16, fp32 sums).
// ============================================================================================
using Gemm = decltype(&sgemm);

// Y (rows, out) = X (rows, in) W^T + b (b may be nullptr); the bias added as the product stores
// Y (gemm.h's epilogue), and with relu (the FFN's first layer, below) the ReLU too.
void linear_forward(float* Y, const float* X, const float* W, const float* b, int rows, int in,
                    int out, Gemm gemm = sgemm, bool relu = false) {
    gemm(false, true, rows, out, in, 1.0f, X, in, W, in, 0.0f, Y, out, {b, relu});
}

// Inside a parallel region: the columns [c0, c1) of `cols` this thread owns; false if none.
// Reductions over rows split by columns need no combining step, so they are deterministic.
// Split among the region's threads, which may be fewer than max_threads() (OMP_THREAD_LIMIT,
// OMP_DYNAMIC, a region nested in a caller's): columns of threads that never came were not summed.
static bool owned_columns(int cols, int* c0, int* c1) {
    const int nt = team_size() > cols ? 1 : team_size(), t = thread_id();
    if (t >= nt) return false;
    *c0 = (int)((long)cols * t / nt);
    *c1 = (int)((long)cols * (t + 1) / nt);
    return true;
}

// db (cols) += sum over rows of dY (rows, cols).
static void column_sum_accumulate(float* db, const float* dY, int rows, int cols) {
#pragma omp parallel
    {
        int c0, c1;
        if (owned_columns(cols, &c0, &c1)) {
            for (int r = 0; r < rows; r++) {
                const float* row = dY + (size_t)r * cols;
                for (int c = c0; c < c1; c++) db[c] += row[c];
            }
        }
    }
}

// dX (rows, in) = dY W + dX_beta * dX; dW (out, in) += dY^T X; db (out) += sum_rows dY.
void linear_backward(float* dX, float dX_beta, float* dW, float* db, const float* dY,
                     const float* X, const float* W, int rows, int in, int out, Gemm gemm = sgemm) {
    if (dX) gemm(false, false, rows, in, out, 1.0f, dY, out, W, in, dX_beta, dX, in, {});
    gemm(true, false, out, in, rows, 1.0f, dY, out, X, in, 1.0f, dW, in, {});
    if (db) column_sum_accumulate(db, dY, rows, out);
}

// ============================================================================================
// §3.3 Position-wise Feed-Forward Networks: the ReLU between the two linear layers.
// ============================================================================================
// Fused: Y (rows, out) = max(0, X (rows, in) W^T + b), the FFN's first layer: the ReLU in the
// product's epilogue (NaN gives 0, as x > 0 ? x : 0).
void linear_relu_forward(float* Y, const float* X, const float* W, const float* b, int rows,
                         int in, int out, Gemm gemm = sgemm) {
    linear_forward(Y, X, W, b, rows, in, out, gemm, true);
}

// The same with W^T packed beforehand (Backend::pack_weights: inference's fixed weights), the
// same bits: Y (rows, out) = relu?(X (rows, in) W^T + b).
void linear_forward_packed(float* Y, const float* X, const SgemmPackedB& Wt, const float* b, int rows,
                           bool relu) {
    sgemm_packed(false, rows, 1.0f, X, Wt.K, Wt, 0.0f, Y, Wt.N, {b, relu});
}
// --precision bf16's: W^T rounded to bf16 and packed beforehand, sgemm_bf16's bits.
void linear_forward_packed(float* Y, const float* X, const Bf16PackedB& Wt, const float* b, int rows, bool relu) {
    sgemm_bf16_packed(false, rows, 1.0f, X, Wt.K, Wt, 0.0f, Y, Wt.N, {b, relu});
}

// dx = dy where the forward output was positive.
void relu_backward(float* dx, const float* dy, const float* y, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

// The same over (rows, cols), with db (cols) += the column sums of dx in the same pass (the
// FFN's first bias gradient, without a second read of dx): a thread owns columns and runs down
// the rows, so each column's sum is column_sum_accumulate's, term by term (the same bits).
void relu_backward_bias(float* dx, float* db, const float* dy, const float* y, int rows, int cols) {
#pragma omp parallel
    {
        int c0, c1;
        if (owned_columns(cols, &c0, &c1)) {
            for (int r = 0; r < rows; r++) {
                const size_t o = (size_t)r * cols;
#pragma omp simd
                for (int c = c0; c < c1; c++) {
                    const float v = y[o + c] > 0.0f ? dy[o + c] : 0.0f;
                    dx[o + c] = v;
                    db[c] += v;
                }
            }
        }
    }
}

// ============================================================================================
// §5.4 Residual Dropout and §3.1's residual connection, LayerNorm over the last dimension.
// ============================================================================================
// dx (n) = dy * keep / (1 - p), the forward's mask recomputed.
void dropout_backward(float* dx, const float* dy, size_t n, float p, uint64_t seed) {
    dropout_forward(dx, dy, n, p, seed);
}

// §5.4 Residual Dropout: y (n) = x + dropout(f), a sub-layer's output joining the residual
// stream (§3.1); y may be f.
void residual_forward(float* y, const float* f, const float* x, size_t n, float p,
                      uint64_t seed) {
    if (p <= 0.0f) {
#pragma omp parallel for simd schedule(static) if (worth_threads((long)n, n))
        for (size_t i = 0; i < n; i++) y[i] = f[i] + x[i];
        return;
    }
    const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static) if (worth_threads((long)n, n))
    for (size_t i = 0; i < n; i++)
        y[i] = (dropout_keep(seed, i, p) ? f[i] * scale : 0.0f) + x[i];
}

static const float LN_EPS = 1e-5f;

// One row: yr (d) = (xr - mean) * rstd * g + b; *mean, *rstd saved for backward.
static void layernorm_row(float* yr, float* mean, float* rstd, const float* xr, const float* g,
                          const float* b, int d) {
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < d; c++) sum += xr[c];
    const float mu = sum / d;
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < d; c++) sq += (xr[c] - mu) * (xr[c] - mu);
    const float rs = 1.0f / std::sqrt(sq / d + LN_EPS);
#pragma omp simd
    for (int c = 0; c < d; c++) yr[c] = (xr[c] - mu) * rs * g[c] + b[c];
    *mean = mu;
    *rstd = rs;
}

// y (rows, d) = (x - mean) * rstd * g + b; mean, rstd (rows) saved for backward.
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* g,
                       const float* b, int rows, int d) {
#pragma omp parallel for schedule(static) if (worth_threads(rows, (size_t)rows * d))
    for (int r = 0; r < rows; r++)
        layernorm_row(y + (size_t)r * d, &mean[r], &rstd[r], x + (size_t)r * d, g, b, d);
}

// Rows per block of LayerNorm's parameter gradients: one thread sums a block's rows, then the
// blocks' sums are added in block order, so dg and db are the same bits for any thread count.
constexpr int LN_GRAD_ROWS = 32;

// With xhat = (x - mean) * rstd and dxhat = dy * g:
//   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  dg += sum dy * xhat,
//   db += sum dy.   dx is overwritten (dx_beta 0) or dx_beta * dx is added. With df (the
//   fused residual's backward, below): df = dropout'(dx) of seed, p in the same pass.
// One pass over the rows: each row's dx, df and its terms of dg and db while it is in cache.
static void layernorm_backward_rows(float* dx, float dx_beta, float* df, float p, uint64_t seed,
                                    float* dg, float* db, const float* dy, const float* x,
                                    const float* mean, const float* rstd, const float* g, int rows,
                                    int d) {
    const int blocks = (rows + LN_GRAD_ROWS - 1) / LN_GRAD_ROWS;
    std::vector<float> block_sums((size_t)blocks * 2 * d, 0.0f);   // (blocks, 2, d): dg, db terms
    const float keep_scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; blk++) {
        float* bdg = block_sums.data() + (size_t)blk * 2 * d;   // (d)
        float* bdb = bdg + d;                                    // (d)
        for (int r = blk * LN_GRAD_ROWS; r < std::min(rows, (blk + 1) * LN_GRAD_ROWS); r++) {
            const float* xr = x + (size_t)r * d;
            const float* dyr = dy + (size_t)r * d;
            const float mu = mean[r], rs = rstd[r];
            float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
            for (int c = 0; c < d; c++) {
                const float dxhat = dyr[c] * g[c];
                sum_dxhat += dxhat;
                sum_dxhat_xhat += dxhat * (xr[c] - mu) * rs;
            }
            const float m1 = sum_dxhat / d, m2 = sum_dxhat_xhat / d;
            float* dxr = dx + (size_t)r * d;
#pragma omp simd
            for (int c = 0; c < d; c++) {
                const float xhat = (xr[c] - mu) * rs;
                const float v = rs * (dyr[c] * g[c] - m1 - xhat * m2);
                dxr[c] = dx_beta == 0.0f ? v : v + dx_beta * dxr[c];
                bdg[c] += dyr[c] * xhat;
                bdb[c] += dyr[c];
            }
            if (!df) continue;
            float* dfr = df + (size_t)r * d;
            if (p <= 0.0f) {
                if (dfr != dxr) std::memcpy(dfr, dxr, d * sizeof(float));
                continue;
            }
            for (int c = 0; c < d; c++)
                dfr[c] = dropout_keep(seed, (size_t)r * d + c, p) ? dxr[c] * keep_scale : 0.0f;
        }
    }
#pragma omp parallel
    {
        int c0, c1;
        if (owned_columns(d, &c0, &c1))
            for (int blk = 0; blk < blocks; blk++) {
                const float* bdg = block_sums.data() + (size_t)blk * 2 * d;
                for (int c = c0; c < c1; c++) {
                    dg[c] += bdg[c];
                    db[c] += bdg[d + c];
                }
            }
    }
}

void layernorm_backward(float* dx, float dx_beta, float* dg, float* db, const float* dy,
                        const float* x, const float* mean, const float* rstd, const float* g,
                        int rows, int d) {
    layernorm_backward_rows(dx, dx_beta, nullptr, 0.0f, 0, dg, db, dy, x, mean, rstd, g, rows, d);
}

// Fused, post-LN (§3.1 LayerNorm(x + Sublayer(x)) with §5.4's dropout on the sub-layer):
// r (rows, d) = x + dropout(f), y (rows, d) = LN(r), row by row while the row is in cache;
// r may be f. Element (row, c) keeps residual_forward's mask of element row * d + c.
void residual_layernorm_forward(float* y, float* r, float* mean, float* rstd, const float* f,
                                const float* x, const float* g, const float* b, int rows, int d,
                                float p, uint64_t seed) {
    const float scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
#pragma omp parallel for schedule(static) if (worth_threads(rows, (size_t)rows * d))
    for (int row = 0; row < rows; row++) {
        const size_t i0 = (size_t)row * d;
        for (size_t i = i0; i < i0 + d; i++)
            r[i] = (p <= 0.0f ? f[i] : dropout_keep(seed, i, p) ? f[i] * scale : 0.0f) + x[i];
        layernorm_row(y + i0, &mean[row], &rstd[row], r + i0, g, b, d);
    }
}

// Its backward: dx (rows, d) = LN'(dy), the gradient of r, which reaches x unchanged;
// df (rows, d) = dropout'(dx), the sub-layer's; dg, db (d) accumulate.
void residual_layernorm_backward(float* dx, float* df, float* dg, float* db, const float* dy,
                                 const float* r, const float* mean, const float* rstd,
                                 const float* g, int rows, int d, float p, uint64_t seed) {
    layernorm_backward_rows(dx, 0.0f, df, p, seed, dg, db, dy, r, mean, rstd, g, rows, d);
}

// ============================================================================================
// §3.2.1 Scaled Dot-Product Attention, §3.2.2 Multi-Head Attention. One (sentence, head) pair
// per task; the products are small GEMMs on strided views of the projection outputs (no
// copies, no transposes).
// ============================================================================================
// Floats of scratch attention_forward/backward need: two (Lq, Lk) tiles per thread.
size_t attention_scratch_floats(int Lq, int Lk) {
    return (size_t)max_threads() * 2 * Lq * Lk;
}

static bool key_allowed(const int* key_tokens, int i, int j, bool causal) {
    return key_tokens[j] != PAD_ID && !(causal && j > i);
}

// The keys up to the last one that is not PAD. A sentence's attention runs over these alone,
// so its sums (the softmax's above all, whose vector loop and scalar remainder split the keys
// by their count) are the same however far its batch pads it: a sentence decodes bit for bit
// alike alone and in any batch (int8's quantization would turn a last-bit difference into a
// different token now and then).
static int keys_end(const int* key_tokens, int Lk) {
    int n = Lk;
    while (n > 0 && key_tokens[n - 1] == PAD_ID) n--;
    return n;
}

// Whether none of the first n keys is PAD: then row i attends to keys 0 .. allowed_keys - 1
// (the usual case; PAD inside a sentence comes only from odd inputs).
static bool no_pad_before(const int* key_tokens, int n) {
    for (int j = 0; j < n; j++)
        if (key_tokens[j] == PAD_ID) return false;
    return true;
}
static int allowed_keys(int i, int n, bool causal) { return causal ? std::min(n, i + 1) : n; }

// x (rows, n) -> softmax of each row, in place (serial: the callers run it per thread).
static void softmax_rows(float* x, int rows, int n) {
    for (int r = 0; r < rows; r++) {
        float* z = x + (size_t)r * n;
        float mx = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : mx)
        for (int k = 0; k < n; k++) mx = z[k] > mx ? z[k] : mx;
#pragma omp simd reduction(+ : sum)
        for (int k = 0; k < n; k++) {
            z[k] = exp_fast(z[k] - mx);
            sum += z[k];
        }
        const float inv = 1.0f / sum;
#pragma omp simd
        for (int k = 0; k < n; k++) z[k] *= inv;
    }
}

// row (ld) -> softmax over the keys j < n with allowed(j), in place; the others and columns
// n .. ld - 1 become 0 (all of them when no key is allowed).
template <class Allowed>
static void masked_softmax_row(float* row, int n, int ld, Allowed allowed) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < n; j++) mx = allowed(j) && row[j] > mx ? row[j] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; j++) {
        float e = allowed(j) ? exp_fast(row[j] - mx) : 0.0f;
        row[j] = e;
        sum += e;
    }
    float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma omp simd
    for (int j = 0; j < n; j++) row[j] *= inv;
    std::fill(row + n, row + ld, 0.0f);
}

// row (ld) -> softmax of its first m, in place; columns m .. ld - 1 become 0 (all when m is 0).
// With AVX-512, for runs up to SOFTMAX_RUN keys: 16 keys a vector, the last one masked, so
// that a row of 10 to 100 keys has no scalar remainder (at 25 keys half the exps had been
// scalar), and the exps kept in whole vectors aside until the sum is known (a load of what a
// masked store has just written waits for the store to complete). The sums' order depends on
// m alone: a sentence's attention is the same bits in any batch.
constexpr int SOFTMAX_RUN = 256;
static void softmax_run(float* row, int m, int ld) {
#ifdef __AVX512F__
    if (m <= SOFTMAX_RUN) {
        using cpu_kernels::first_lanes;
        __m512 e[SOFTMAX_RUN / 16];
        const int vectors = (m + 15) / 16;
        __m512 vmx = _mm512_set1_ps(-INFINITY), vsum = _mm512_setzero_ps();
        for (int v = 0; v < vectors; v++) {
            e[v] = _mm512_maskz_loadu_ps(first_lanes(m - 16 * v), row + 16 * v);
            vmx = _mm512_mask_max_ps(vmx, first_lanes(m - 16 * v), vmx, e[v]);
        }
        const __m512 mx = all_lanes_max(vmx);
        for (int v = 0; v < vectors; v++) {
            e[v] = _mm512_maskz_mov_ps(first_lanes(m - 16 * v), exp_fast16(_mm512_sub_ps(e[v], mx)));
            vsum = _mm512_add_ps(vsum, e[v]);
        }
        const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), all_lanes_sum(vsum));
        for (int v = 0; v < vectors; v++)
            _mm512_mask_storeu_ps(row + 16 * v, first_lanes(m - 16 * v), _mm512_mul_ps(e[v], inv));
        std::fill(row + m, row + ld, 0.0f);
        return;
    }
#endif
    masked_softmax_row(row, m, ld, [](int) { return true; });
}

// scores (Lq, ld) -> softmax over the allowed keys among the first n, in place; the others
// and columns n .. ld - 1 become 0. Keys without PAD among them are masked by position alone
// (softmax_run over each row's first allowed_keys), not looked up element by element.
static void masked_softmax_rows(float* scores, const int* key_tokens, int Lq, int n, int ld,
                                bool causal) {
    const bool no_pad = no_pad_before(key_tokens, n);
    for (int i = 0; i < Lq; i++) {
        float* row = scores + (size_t)i * ld;
        if (no_pad) {
            softmax_run(row, allowed_keys(i, n, causal), ld);
        } else {
            masked_softmax_row(row, n, ld, [&](int j) { return key_allowed(key_tokens, i, j, causal); });
        }
    }
}

// §3.2.1 Scaled Dot-Product Attention, per (sentence, head) of §3.2.2:
// ctx (B, Lq, H*dv) = dropout(softmax(mask(Q K^T / sqrt(dk)))) V; probs (B, H, Lq, Lk) saved.
void attention_forward(float* ctx, float* probs, const float* q, const float* kv,
                       const int* key_tokens, const AttentionShape& s, float p_attn,
                       uint64_t seed, float* scratch) {
    const float scale = 1.0f / std::sqrt((float)s.dk);
    const size_t LL = (size_t)s.Lq * s.Lk;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.H; h++) {
            const HeadOffsets o = head_offsets(s, b, h);
            float* P = probs + o.probs;   // (Lq, Lk)
            const int* keys = key_tokens + (size_t)b * s.Lk;
            const int n = keys_end(keys, s.Lk);   // the keys before the sentence's padding
            sgemm(false, true, s.Lq, n, s.dk, scale, q + o.q, s.q_stride, kv + o.k, s.kv_stride,
                  0.0f, P, s.Lk);
            masked_softmax_rows(P, keys, s.Lq, n, s.Lk, s.causal);
            const float* Pd = P;
            if (p_attn > 0.0f) {
                float* buf = scratch + (size_t)thread_id() * 2 * LL;
                for (size_t i = 0; i < LL; i++)
                    buf[i] = dropout_keep(seed, o.probs + i, p_attn)
                                 ? P[i] / (1.0f - p_attn) : 0.0f;
                Pd = buf;
            }
            sgemm(false, false, s.Lq, s.dv, n, 1.0f, Pd, s.Lk, kv + o.v, s.kv_stride, 0.0f,
                  ctx + o.ctx, s.H * s.dv);
        }
}

// Given dctx: dPd = dctx V^T, dV = Pd^T dctx, dP = dropout'(dPd),
// dS = P * (dP - rowsum(P * dP)) / sqrt(dk), dQ = dS K, dK = dS^T Q.
void attention_backward(float* dq, float* dkv, const float* dctx, const float* probs,
                        const float* q, const float* kv, const AttentionShape& s, float p_attn,
                        uint64_t seed, float* scratch) {
    const float scale = 1.0f / std::sqrt((float)s.dk);
    const size_t LL = (size_t)s.Lq * s.Lk;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.H; h++) {
            const HeadOffsets o = head_offsets(s, b, h);
            const float* P = probs + o.probs;
            float* dP = scratch + (size_t)thread_id() * 2 * LL;   // (Lq, Lk)
            float* Pd_buf = dP + LL;
            const float* dctx_h = dctx + o.ctx;
            const int ctx_stride = s.H * s.dv;
            const float* Pd = P;
            if (p_attn > 0.0f) {
                for (size_t i = 0; i < LL; i++)
                    Pd_buf[i] = dropout_keep(seed, o.probs + i, p_attn)
                                    ? P[i] / (1.0f - p_attn) : 0.0f;
                Pd = Pd_buf;
            }
            sgemm(false, true, s.Lq, s.Lk, s.dv, 1.0f, dctx_h, ctx_stride, kv + o.v, s.kv_stride,
                  0.0f, dP, s.Lk);
            sgemm(true, false, s.Lk, s.dv, s.Lq, 1.0f, Pd, s.Lk, dctx_h, ctx_stride, 0.0f,
                  dkv + o.v, s.kv_stride);
            for (int i = 0; i < s.Lq; i++) {
                float* dpr = dP + (size_t)i * s.Lk;
                const float* pr = P + (size_t)i * s.Lk;
                if (p_attn > 0.0f)
                    for (int j = 0; j < s.Lk; j++)
                        dpr[j] = dropout_keep(seed, o.probs + (size_t)i * s.Lk + j,
                                              p_attn) ? dpr[j] / (1.0f - p_attn) : 0.0f;
                float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                for (int j = 0; j < s.Lk; j++) dot += pr[j] * dpr[j];
#pragma omp simd
                for (int j = 0; j < s.Lk; j++) dpr[j] = pr[j] * (dpr[j] - dot) * scale;
            }
            sgemm(false, false, s.Lq, s.dk, s.Lk, 1.0f, dP, s.Lk, kv + o.k, s.kv_stride, 0.0f,
                  dq + o.q, s.q_stride);
            sgemm(true, false, s.Lk, s.dk, s.Lq, 1.0f, dP, s.Lk, q + o.q, s.q_stride, 0.0f,
                  dkv + o.k, s.kv_stride);
        }
}

// ============================================================================================
// §3.2.3 The decoder one position at a time: one query per row over cached keys and values.
// ============================================================================================
// ctx (n, H*dv): row r's query over the keys/values of steps 0..t, found through step_row and
// slots (see Backend::attention_step_self). Key-major scores, so that each cached row is read
// once.
void attention_step_self(float* ctx, const float* q, const float* cache, const int* step_row,
                         const int* slots, int ld_slots, int t, const StepShape& s) {
    const int H = s.H, dk = s.dk, dv = s.dv, ld = H * dk + H * dv, len = t + 1;
    const float scale = 1.0f / std::sqrt((float)dk);
#pragma omp parallel if (worth_threads(s.n, (size_t)s.n * len * ld))
    {
        std::vector<float> scores((size_t)H * (len + 3));   // (H, len + 3): four steps at a time
#pragma omp for schedule(static)
        for (int r = 0; r < s.n; r++) {
            // Steps j .. j + 3 (past the last: the last again, its weight 0): their keys; the
            // values follow at column H*dk. Four rows read at once keep four loads in flight.
            auto entries = [&](int j, const float* e[4]) {
                for (int i = 0; i < 4; i++) {
                    const int step = std::min(j + i, t);
                    const int row = step < t ? slots[(size_t)r * ld_slots + step] : r;
                    e[i] = cache + ((size_t)step_row[step] + row) * ld;
                }
            };
            // Steps j .. j + 3's columns [from, from + count) on their way (when there are steps).
            auto prefetch = [&](int j, int from, int count) {
                if (j >= len) return;
                const float* nx[4];
                entries(j, nx);
                for (int i = 0; i < 4; i++)
                    for (int c = 0; c < count; c += 16) __builtin_prefetch(nx[i] + from + c);
            };
            const float* qr = q + (size_t)r * s.q_stride;
            const float* e[4];
            for (int j = 0; j < len; j += 4) {   // scores: four independent sums a head
                entries(j, e);
                prefetch(j + 4, 0, H * dk);   // the next four steps' keys meanwhile
                for (int h = 0; h < H; h++) {
                    const float *qh = qr + h * dk, *k0 = e[0] + h * dk, *k1 = e[1] + h * dk,
                                *k2 = e[2] + h * dk, *k3 = e[3] + h * dk;
                    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
                    for (int c = 0; c < dk; c++) {
                        s0 += qh[c] * k0[c];
                        s1 += qh[c] * k1[c];
                        s2 += qh[c] * k2[c];
                        s3 += qh[c] * k3[c];
                    }
                    float* sc = scores.data() + (size_t)h * (len + 3) + j;
                    sc[0] = s0 * scale, sc[1] = s1 * scale, sc[2] = s2 * scale, sc[3] = s3 * scale;
                }
            }
            for (int h = 0; h < H; h++) {
                float* sc = scores.data() + (size_t)h * (len + 3);
                softmax_rows(sc, 1, len);
                sc[len] = sc[len + 1] = sc[len + 2] = 0.0f;
            }
            float* out = ctx + (size_t)r * H * dv;
            std::fill(out, out + (size_t)H * dv, 0.0f);
            for (int j = 0; j < len; j += 4) {   // ctx += p_j v_j, four steps a pass over ctx
                entries(j, e);
                prefetch(j + 4, H * dk, H * dv);   // the next four steps' values meanwhile
                for (int h = 0; h < H; h++) {
                    const float* p = scores.data() + (size_t)h * (len + 3) + j;
                    const float p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
                    const int o = H * dk + h * dv;
                    const float *v0 = e[0] + o, *v1 = e[1] + o, *v2 = e[2] + o, *v3 = e[3] + o;
                    float* oh = out + h * dv;
#pragma omp simd
                    for (int c = 0; c < dv; c++) oh[c] += p0 * v0[c] + p1 * v1[c] + p2 * v2[c] + p3 * v3[c];
                }
            }
        }
    }
}

// slots_dst row r = slots_src row parent[r] (columns < t - 1), column t - 1 = parent[r].
void cache_reorder(int* slots_dst, const int* slots_src, const int* parent, int n, int t,
                   int ld) {
#pragma omp parallel for schedule(static) if (worth_threads(n, (size_t)n * t))
    for (int r = 0; r < n; r++) {
        const int* from = slots_src + (size_t)parent[r] * ld;
        int* to = slots_dst + (size_t)r * ld;
        std::copy(from, from + (t - 1), to);
        to[t - 1] = parent[r];
    }
}

// kt (B, H, dk, S) = the keys of kv (B*S, ld) transposed, so that a query's scores over all S
// keys are a sum of dk vectors of length S (vectorised over the keys).
void attention_keys_transpose(float* kt, const float* kv, int B, int S, int H, int dk, int ld) {
#pragma omp parallel for collapse(2) schedule(static) if (worth_threads(B * H, (size_t)B * S * H * dk))
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int j = 0; j < S; j++)
                for (int c = 0; c < dk; c++)
                    kt[(((size_t)b * H + h) * dk + c) * S + j] = kv[((size_t)b * S + j) * ld + h * dk + c];
}

#ifdef __AVX512F__
// Small products side by side: each LaneSum is out[lane] = alpha * sum over k < K of
// a[k] * b[k * ldb + lane], 16 lanes (masked), summed as sgemm's unpacked kernel sums (cpu/gemm.cpp:
// from zero, k ascending, one FMA a step, then times alpha), so the same bits (as our sgemm's, not
// OpenBLAS's under BLAS=openblas). Alone, a sum is one chain of dependent FMAs, waiting out each
// one's latency; up to 8 side by side overlap them.
struct LaneSum {
    const float* a;   // (K)
    const float* b;   // (K, ldb): the lanes' 16 columns
    __mmask16 lanes;
    float* out;       // (16)
};
template <int U>
static void lane_sums(const LaneSum* s, int K, long ldb, float alpha) {
    __m512 acc[U];
#pragma GCC unroll 8
    for (int i = 0; i < U; i++) acc[i] = _mm512_setzero_ps();
    for (int k = 0; k < K; k++)
#pragma GCC unroll 8
        for (int i = 0; i < U; i++)
            acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(s[i].a[k]), _mm512_maskz_loadu_ps(s[i].lanes, s[i].b + k * ldb),
                                     acc[i]);
#pragma GCC unroll 8
    for (int i = 0; i < U; i++) _mm512_mask_storeu_ps(s[i].out, s[i].lanes, _mm512_mul_ps(acc[i], _mm512_set1_ps(alpha)));
}
static void lane_sums(const std::vector<LaneSum>& s, int K, long ldb, float alpha) {
    for (size_t i = 0; i < s.size(); i += 8) {
        const LaneSum* g = s.data() + i;
        switch (std::min<size_t>(8, s.size() - i)) {
            case 8: lane_sums<8>(g, K, ldb, alpha); break;
            case 7: lane_sums<7>(g, K, ldb, alpha); break;
            case 6: lane_sums<6>(g, K, ldb, alpha); break;
            case 5: lane_sums<5>(g, K, ldb, alpha); break;
            case 4: lane_sums<4>(g, K, ldb, alpha); break;
            case 3: lane_sums<3>(g, K, ldb, alpha); break;
            case 2: lane_sums<2>(g, K, ldb, alpha); break;
            default: lane_sums<1>(g, K, ldb, alpha); break;
        }
    }
}

// One row alone in its run (greedy decoding), every head at once: ctx_r (H*dv) from q_r over
// its sentence's n keys, kt_b (H, dk, S), and values v_b (n, H*dv), rows ld floats apart.
// Per head the two products of attention_step_cross's runs, P (n) = softmax(q K^T / sqrt(dk)),
// ctx (dv) = P V, in the same order: the same bits, the heads' sums side by side (25% less
// time than head by head on Zen 4). p (H, n), sums: the caller's scratch.
static void attention_row_all_heads(float* ctx_r, const float* q_r, const float* kt_b, const float* v_b,
                                    int ld, int n, int S, const StepShape& s, float scale,
                                    std::vector<float>& p, std::vector<LaneSum>& sums) {
    using cpu_kernels::first_lanes;
    const int H = s.H, dk = s.dk, dv = s.dv;
    p.resize((size_t)H * n);
    sums.clear();
    for (int h = 0; h < H; h++)
        for (int j = 0; j < n; j += 16)
            sums.push_back({q_r + h * dk, kt_b + (size_t)h * dk * S + j, first_lanes(n - j), p.data() + h * n + j});
    lane_sums(sums, dk, S, scale);
    softmax_rows(p.data(), H, n);
    sums.clear();
    for (int h = 0; h < H; h++)
        for (int c = 0; c < dv; c += 16)
            sums.push_back({p.data() + h * n, v_b + h * dv + c, first_lanes(dv - c), ctx_r + h * dv + c});
    lane_sums(sums, n, ld, 1.0f);
}
#endif

// ctx (n, H*dv): row r attends over the first len[b] keys of its sentence b = sentence[r]. The
// rows of a sentence (its beam's hypotheses) are consecutive and share its keys and values, so
// each run of them and each head is two small products (gemm.cpp's unpacked kernel, every row
// of the run against the keys at once):
//   P (m, len) = softmax(Q K^T / sqrt(dk)) from the transposed keys (dk, S),  ctx (m, dv) = P V.
// Greedy decoding, a row a sentence, takes each row's heads at once (attention_row_all_heads).
void attention_step_cross(float* ctx, const float* q, const float* kt, const float* kv, int ld,
                          const int* len, const int* sentence, int S, const StepShape& s) {
    const int H = s.H, dk = s.dk, dv = s.dv;
    const float scale = 1.0f / std::sqrt((float)dk);
    std::vector<int> runs;   // first row of each run of rows with one sentence, then n
    for (int r = 0; r < s.n; r++)
        if (r == 0 || sentence[r] != sentence[r - 1]) runs.push_back(r);
    const int n_runs = (int)runs.size();
    runs.push_back(s.n);
    const size_t elements = (size_t)s.n * S * (H * dk + H * dv);   // at most: keys and values
#ifdef __AVX512F__
    if (n_runs == s.n) {
#pragma omp parallel if (worth_threads(s.n, elements))
        {
            std::vector<float> p;   // (H, len)
            std::vector<LaneSum> sums;
#pragma omp for schedule(static)
            for (int r = 0; r < s.n; r++) {
                const int b = sentence[r];
                attention_row_all_heads(ctx + (size_t)r * H * dv, q + (size_t)r * s.q_stride,
                                        kt + (size_t)b * H * dk * S, kv + (size_t)b * S * ld + H * dk, ld,
                                        len[b], S, s, scale, p, sums);
            }
        }
        return;
    }
#endif
#pragma omp parallel if (worth_threads(n_runs * H, elements))
    {
        std::vector<float> p;   // (m, len)
#pragma omp for schedule(static)
        for (int uh = 0; uh < n_runs * H; uh++) {
            const int u = uh / H, h = uh % H, r0 = runs[u], m = runs[u + 1] - r0;
            const int b = sentence[r0], n = len[b];
            p.resize((size_t)m * n);
            const float* k = kt + ((size_t)b * H + h) * dk * S;          // (dk, S)
            const float* v = kv + (size_t)b * S * ld + H * dk + h * dv;   // (n, ld)
            sgemm(false, false, m, n, dk, scale, q + (size_t)r0 * s.q_stride + h * dk, s.q_stride, k, S, 0.0f,
                  p.data(), n);
            softmax_rows(p.data(), m, n);
            sgemm(false, false, m, dv, n, 1.0f, p.data(), n, v, ld, 0.0f, ctx + (size_t)r0 * H * dv + h * dv, H * dv);
        }
    }
}

// ============================================================================================
// §3.4's logits and §5.4 Label Smoothing: cross-entropy against q(y) = 1 - eps + eps/V,
// q(k) = eps/V, as PyTorch's CrossEntropyLoss(label_smoothing=eps, ignore_index=PAD): per row,
// loss = lse - (1 - eps) z_y - (eps / V) sum_k z_k.  Decoding's log-softmax + top-k.
// ============================================================================================
// The loss's passes over the logits: (rows, V) floats, 131 MB for the small config's batch, far
// beyond the caches. Their loop bodies are long (exp_fast), and the hardware prefetcher alone
// left them waiting on memory: crossentropy_backward took 33 ms on 2 cores of the Xeon VM for
// 4,100 x 8,000 logits (about 8 GB/s) and 8.5 ms when each block of 256 logits first asks for
// the lines 512 floats (2 KiB) ahead. A prefetch never faults, so asking past the row's (or the
// tensor's) end is harmless.
constexpr int LOGIT_BLOCK = 256, PREFETCH_AHEAD = 512;

// Requests the lines of the block of LOGIT_BLOCK floats PREFETCH_AHEAD floats after p.
static inline void prefetch_block_ahead(const float* p) {
    for (int k = 0; k < LOGIT_BLOCK; k += 16) __builtin_prefetch(p + PREFETCH_AHEAD + k, 1);
}

// §5.4 Label Smoothing: *loss += the sum of the rows' losses; lse (rows) saved.
WIDE_VECTORS void crossentropy_forward(float* lse, double* loss, const float* logits, const int* labels,
                          int rows, int V, float eps) {
    std::vector<double> row_loss(rows, 0.0);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        if (labels[r] == PAD_ID) { lse[r] = 0.0f; continue; }
        const float* z = logits + (size_t)r * V;   // (V)
        // One pass over the row (online softmax): per block its maximum, the sum so far
        // rescaled when the maximum grows, then the block's terms while it is in L1.
        float mx = -INFINITY, sum = 0.0f, sum_z = 0.0f;
        for (int k0 = 0; k0 < V; k0 += LOGIT_BLOCK) {
            prefetch_block_ahead(z + k0);
            const int k1 = std::min(V, k0 + LOGIT_BLOCK);
            float block_mx = -INFINITY, block_sum = 0.0f, block_sum_z = 0.0f;
#pragma omp simd reduction(max : block_mx)
            for (int k = k0; k < k1; k++) block_mx = z[k] > block_mx ? z[k] : block_mx;
            if (block_mx > mx) {
                sum *= exp_fast(mx - block_mx);   // 0 while mx is -inf (exp_fast clamps)
                mx = block_mx;
            }
#pragma omp simd reduction(+ : block_sum, block_sum_z)
            for (int k = k0; k < k1; k++) {
                block_sum += exp_fast(z[k] - mx);
                block_sum_z += z[k];
            }
            sum += block_sum;
            sum_z += block_sum_z;
        }
        double l = (double)mx + std::log((double)sum);
        lse[r] = (float)l;
        row_loss[r] = l - (1.0 - eps) * z[labels[r]] - (double)eps / V * sum_z;
    }
    double total = 0.0;
    for (int r = 0; r < rows; r++) total += row_loss[r];
    *loss += total;
}

// logits (rows, V) -> (softmax - q) * scale in place; PAD rows -> 0.
WIDE_VECTORS void crossentropy_backward(float* logits, const float* lse, const int* labels, int rows, int V,
                           float eps, float scale) {
    const float off = eps / V;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        float* z = logits + (size_t)r * V;
        if (labels[r] == PAD_ID) { std::memset(z, 0, (size_t)V * sizeof(float)); continue; }
        const float l = lse[r];
        for (int k0 = 0; k0 < V; k0 += LOGIT_BLOCK) {
            prefetch_block_ahead(z + k0);
            const int k1 = std::min(V, k0 + LOGIT_BLOCK);
#pragma omp simd
            for (int k = k0; k < k1; k++) z[k] = (exp_fast(z[k] - l) - off) * scale;
        }
        z[labels[r]] -= (1.0f - eps) * scale;
    }
}

// Decoding's passes over a row of logits (V = 8,000 to 37,000 floats) run once a step for
// every hypothesis. A single running maximum or sum is one chain of dependent vector
// operations, each waiting out the latency of the one before (4 cycles): these loops keep
// ROW_LANES running values instead (a few vector registers' worth, independent chains), and
// the top-k scan tests a block of entries at once, so that it looks entry by entry only at the
// few blocks that hold a candidate.
constexpr int ROW_LANES = 64;

// max_k z_k of z (n), NaN ignored (-inf when n == 0).
WIDE_VECTORS static float max_of(const float* z, int n) {
    float part[ROW_LANES];
    std::fill(part, part + ROW_LANES, -INFINITY);
    int k0 = 0;
    for (; k0 + ROW_LANES <= n; k0 += ROW_LANES)
#pragma omp simd
        for (int l = 0; l < ROW_LANES; l++) part[l] = z[k0 + l] > part[l] ? z[k0 + l] : part[l];
    float mx = -INFINITY;
    for (int k = k0; k < n; k++) mx = z[k] > mx ? z[k] : mx;
    for (int l = 0; l < ROW_LANES; l++) mx = part[l] > mx ? part[l] : mx;
    return mx;
}

// sum_k exp(z_k - mx) of z (n).
WIDE_VECTORS static float sum_exp(const float* z, int n, float mx) {
    float part[ROW_LANES] = {};
    int k0 = 0;
    for (; k0 + ROW_LANES <= n; k0 += ROW_LANES)
#pragma omp simd
        for (int l = 0; l < ROW_LANES; l++) part[l] += exp_fast(z[k0 + l] - mx);
    float sum = 0.0f;
    for (int k = k0; k < n; k++) sum += exp_fast(z[k] - mx);
    for (int l = 0; l < ROW_LANES; l++) sum += part[l];
    return sum;
}

// log(sum_k exp(z_k)) of z (V).
static float logsumexp(const float* z, int V) {
    const float mx = max_of(z, V);
    return mx + std::log(sum_exp(z, V, mx));
}

// Whether an entry of z (N) is above t: one compare a vector, no branch.
template <int N>
WIDE_VECTORS static inline bool any_above(const float* z, float t) {
    int count = 0;
#pragma omp simd reduction(+ : count)
    for (int l = 0; l < N; l++) count += z[l] > t ? 1 : 0;
    return count > 0;
}

// The k best entries of z (V) into best[0..k), best first (ties: lowest id), z[banned] never
// among them (banned < 0: none); returns how many (k, or fewer when V is smaller). Once the
// list is full, a block of ROW_LANES entries none of which beats its last is skipped whole, and
// inside a block that has one, each 16 entries likewise.
WIDE_VECTORS static int top_k(const float* z, int V, int k, int banned, int* best) {
    int n = 0;
    for (int b0 = 0; b0 < V; b0 += ROW_LANES) {
        const int b1 = std::min(V, b0 + ROW_LANES);
        if (n == k && b1 - b0 == ROW_LANES && !any_above<ROW_LANES>(z + b0, z[best[n - 1]])) continue;
        for (int w0 = b0; w0 < b1; w0 += 16) {
            const int w1 = std::min(b1, w0 + 16);
            if (n == k && w1 - w0 == 16 && !any_above<16>(z + w0, z[best[n - 1]])) continue;
            for (int w = w0; w < w1; w++) {
                if (w == banned || (n == k && z[w] <= z[best[n - 1]])) continue;
                int pos = (int)(std::upper_bound(best, best + n, w, [&](int a, int b) { return z[a] > z[b]; }) - best);
                if (n < k) n++;
                for (int i = n - 1; i > pos; i--) best[i] = best[i - 1];
                best[pos] = w;
            }
        }
    }
    return n;
}

// tokens, logp (rows, k): each row's k best tokens and their z - logsumexp(z), best first;
// `banned` counts as -inf. Rows of logits have stride ld. The best token's logit is the row's
// maximum (the log-sum-exp's shift): two passes over the row, the scan and the sum.
void logsoftmax_topk(int* tokens, float* logp, const float* logits, int rows, int V, int ld,
                     int k, int banned) {
#pragma omp parallel for schedule(static) if (worth_threads(rows, (size_t)rows * V))
    for (int r = 0; r < rows; r++) {
        const float* z = logits + (size_t)r * ld;
        int* best = tokens + (size_t)r * k;
        const int found = top_k(z, V, k, banned, best);
        float lse = 0.0f;
        if (found > 0) {
            const float mx = z[best[0]];
            const float sum = banned >= 0 && banned < V
                                  ? sum_exp(z, banned, mx) + sum_exp(z + banned + 1, V - banned - 1, mx)
                                  : sum_exp(z, V, mx);
            lse = mx + std::log(sum);
        }
        for (int i = 0; i < k; i++)   // fewer than k tokens (V < k): token -1, -inf
            logp[(size_t)r * k + i] = i < found ? z[best[i]] - lse : -INFINITY;
        for (int i = found; i < k; i++) best[i] = -1;
    }
}

// logp (rows) = z[tokens[r]] - logsumexp(z) per row (stride ld); PAD_ID tokens give 0.
void logsoftmax_gather(float* logp, const float* logits, const int* tokens, int rows, int V, int ld) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float* z = logits + (size_t)r * ld;
        logp[r] = tokens[r] == PAD_ID ? 0.0f : z[tokens[r]] - logsumexp(z, V);
    }
}

// log(s) for s >= 1, vectorisable (the ensemble's sums of exponentials, 1 <= s <= K): s = 2^e *
// m with m in [sqrt(1/2), sqrt(2)) from the bits, then Cephes' logf polynomial in m - 1 plus e
// ln 2 (two-part constant). Relative error about 1e-7 (1-2 ulp).
static inline float log_fast(float s) {
    const uint32_t bits = __builtin_bit_cast(uint32_t, s);
    float e = (float)((int)(bits >> 23) - 127);
    float m = __builtin_bit_cast(float, (bits & 0x007fffffu) | 0x3f800000u);   // [1, 2)
    const bool high = m > 1.41421356f;
    m = high ? m * 0.5f : m;
    e = high ? e + 1.0f : e;
    const float x = m - 1.0f, z = x * x;
    float y = 7.0376836292e-2f;
    y = y * x - 1.1514610310e-1f;
    y = y * x + 1.1676998740e-1f;
    y = y * x - 1.2420140846e-1f;
    y = y * x + 1.4249322787e-1f;
    y = y * x - 1.6668057665e-1f;
    y = y * x + 2.0000714765e-1f;
    y = y * x - 2.4999993993e-1f;
    y = y * x + 3.3333331174e-1f;
    y = y * x * z + e * -2.12194440e-4f - 0.5f * z;
    return x + y + e * 0.693359375f;
}

// Ensembles: out (rows, V; stride ld) = log((1/K) sum_k exp(z_k - logsumexp(z_k))) per row of
// the K models' logits z_k; out may be logits[0]. Per entry, the members' log-probabilities
// l_k: max_k l_k + log(sum_k exp(l_k - max)) - log K, the sum between 1 and K. A row goes in
// pieces of ENSEMBLE_PIECE entries, each pass over a piece one vector loop (member by member:
// a loop over members inside would keep GCC from vectorising, 10x slower).
constexpr int ENSEMBLE_PIECE = 256;
WIDE_VECTORS void logsoftmax_ensemble(float* out, const float* const* logits, int K, int rows, int V, int ld) {
    const float log_k = std::log((float)K);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        float lse[Backend::kMaxEnsemble];
        for (int k = 0; k < K; k++) lse[k] = logsumexp(logits[k] + (size_t)r * ld, V);
        float mx[ENSEMBLE_PIECE], sum[ENSEMBLE_PIECE];
        for (int v0 = 0; v0 < V; v0 += ENSEMBLE_PIECE) {
            const int n = std::min(ENSEMBLE_PIECE, V - v0);
            const size_t at = (size_t)r * ld + v0;
            std::fill(mx, mx + n, -INFINITY);
            std::fill(sum, sum + n, 0.0f);
            for (int k = 0; k < K; k++) {
                const float* l = logits[k] + at;
                const float shift = lse[k];
#pragma omp simd
                for (int i = 0; i < n; i++) mx[i] = l[i] - shift > mx[i] ? l[i] - shift : mx[i];
            }
            for (int k = 0; k < K; k++) {
                const float* l = logits[k] + at;
                const float shift = lse[k];
#pragma omp simd
                for (int i = 0; i < n; i++) sum[i] += exp_fast(l[i] - shift - mx[i]);
            }
            float* o = out + at;
#pragma omp simd
            for (int i = 0; i < n; i++) o[i] = mx[i] > -INFINITY ? mx[i] + log_fast(sum[i]) - log_k : -INFINITY;
        }
    }
}

// The sampling threshold of z (V): the largest value tau such that the tokens with z >= tau
// number at least topk (topk > 0) and hold at least topp of the mass w (topp < 1); the
// smallest value (every token) when neither cut is asked. w[i] = exp((z[i] - max) /
// temperature), total its sum.
static float sampling_threshold(const float* z, const float* w, int V, double total, int topk, float topp) {
    std::vector<int> order(V);
    for (int i = 0; i < V; i++) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return z[a] > z[b]; });
    if (topk <= 0 && topp >= 1.0f) return z[order[V - 1]];
    float tau_k = z[order[0]], tau_p = z[order[0]];
    if (topk > 0) tau_k = z[order[std::min(topk, V) - 1]];
    if (topp < 1.0f) {
        double mass = 0;
        for (int j = 0; j < V; j++) {
            mass += w[order[j]];
            tau_p = z[order[j]];
            if (mass >= topp * total) break;
        }
    }
    return std::min(tau_k, tau_p);
}

// tokens, logp (rows): one token per row drawn with uniform[r] from softmax(z / temperature)
// over the tokens at or above the sampling threshold (transformer.h); logp its z - lse.
// logp may alias uniform.
void logsoftmax_sample(int* tokens, float* logp, const float* uniform, const float* logits, int rows,
                       int V, int ld, float temperature, int topk, float topp) {
#pragma omp parallel
    {
        std::vector<float> w(V);
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            const float* z = logits + (size_t)r * ld;
            const float u = uniform[r];
            float mx = -INFINITY;
            for (int i = 0; i < V; i++) mx = std::max(mx, z[i]);
            double total = 0;
            for (int i = 0; i < V; i++) total += w[i] = std::exp((z[i] - mx) / temperature);
            const float tau = sampling_threshold(z, w.data(), V, total, topk, topp);
            double kept = 0;
            int last = -1;
            for (int i = 0; i < V; i++)
                if (z[i] >= tau) kept += w[i], last = i;
            const double target = u * kept;
            double acc = 0;
            int pick = last;   // rounding: the last kept token
            for (int i = 0; i < V; i++) {
                if (z[i] < tau) continue;
                acc += w[i];
                if (acc > target) { pick = i; break; }
            }
            if (pick < 0) pick = EOS_ID;   // no token kept (a row of NaN): the sentence ends
            tokens[r] = pick;
            logp[r] = z[pick] - logsumexp(z, V);
        }
    }
}

// ============================================================================================
// §6.1 Machine Translation: beam search's bookkeeping (model/search.h), every sentence at once
// ============================================================================================
// Each sentence selects from its own rows (in parallel), then the next step's rows are laid out
// sentence by sentence.
void search_select(const SearchState& st, const int* cand_token, const float* cand_logp,
                   const int* forced, const float* forced_logp, int t) {
#pragma omp parallel for schedule(dynamic, 8)
    for (int s = 0; s < st.B; s++)
        search_select_sentence(st, s, cand_token, cand_logp, forced, forced_logp, t);
    int offset = 0;
    for (int s = 0; s < st.B; s++) {
        search_emit(st, s, offset, t);
        offset += st.next_n[s];
    }
    *st.count = offset;
}

// ============================================================================================
// §5.3 Optimizer: Adam, PyTorch's formulation: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). Gradient norm for clipping.
// ============================================================================================
// sqrt(sum g^2): 64 fixed chunks summed in double, so the result is the same for any threads.
double global_norm(const float* g, size_t n) {
    const size_t chunks = 64;
    double part[chunks];
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        size_t i0 = n * c / chunks, i1 = n * (c + 1) / chunks;
        double s = 0;
        for (size_t i = i0; i < i1; i++) s += (double)g[i] * g[i];
        part[c] = s;
    }
    double total = 0;
    for (double p : part) total += p;
    return std::sqrt(total);
}

void scale(float* x, size_t n, float s) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

void add_inplace(float* y, const float* x, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

// §5.3 Optimizer: Adam over p, g, m, v (n).
void adam_step(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
               float beta2, float eps, int64_t step) {
    const float step_size = (float)(lr / (1.0 - std::pow((double)beta1, (double)step)));
    const float bc2_sqrt = (float)std::sqrt(1.0 - std::pow((double)beta2, (double)step));
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
        v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
        p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
    }
}

}  // namespace cpu

// =============================================================================================
// CpuBackend: the interface on the ops above. floatX is float; memory is host memory.
// =============================================================================================
namespace {

float* F(floatX* p) { return reinterpret_cast<float*>(p); }
const float* F(const floatX* p) { return reinterpret_cast<const float*>(p); }

class CpuBackend final : public Backend {
public:
    // bf16: the linear layers' products with bf16 operands (sgemm_bf16); floatX stays float.
    explicit CpuBackend(bool bf16) : bf16_(bf16), gemm_(bf16 ? sgemm_bf16 : sgemm) {}
    Device device() const override { return Device::CPU; }
    Precision precision() const override {
        return !int8_.empty() ? Precision::INT8 : bf16_ ? Precision::BF16 : Precision::FP32;
    }
    size_t floatx_size() const override { return sizeof(float); }
    std::string describe() const override {
        return "CPU, " + std::to_string(max_threads()) + " OpenMP thread" +
               (max_threads() > 1 ? "s, " : ", ") + precision_name(precision()) + kernels();
    }
    // Which kernel takes the products: int8, e.g. " (amx from 16 rows, avx512-vnni below)";
    // bf16, " (amx products)", " (avx512bf16 products)" or " (products: sgemm on bf16-rounded
    // operands)".
    std::string kernels() const {
        if (precision() == Precision::BF16)
            return std::string(bf16_kernel()) == "sgemm" ? " (products: sgemm on bf16-rounded operands)"
                                                          : " (" + std::string(bf16_kernel()) + " products)";
        if (precision() != Precision::INT8) return "";
        const std::string rows = int8_kernel(64, 256), few = int8_kernel(1, 256);
        return " (" + (rows == few ? rows : rows + " from 16 rows, " + few + " below") + ")";
    }
    void* alloc(size_t bytes) override {
        if (bytes == 0) return nullptr;
        void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
        if (p) return p;
        char what[200];
        std::snprintf(what, sizeof what, "out of memory allocating %.1f MB on the CPU: lower --max-tokens "
                      "(training; --accum keeps the step's size) or --batch-tokens (translation; or --beam)", bytes / 1e6);
        if (throw_out_of_memory) throw OutOfMemory(what);
        std::fprintf(stderr, "%s: error: %s\n", program_invocation_short_name, what);
        std::exit(1);
    }
    void release(void* p) override { std::free(p); }
    int time_mark() override {
        marks_.push_back(std::chrono::steady_clock::now());
        return (int)marks_.size() - 1;
    }
    double time_between(int from, int to) override {
        return std::chrono::duration<double, std::milli>(marks_.at(to) - marks_.at(from)).count();
    }
    void clear_marks() override { marks_.clear(); }
    void upload(void* dst, const void* host_src, size_t bytes) override { copy(dst, host_src, bytes); }
    void download(void* host_dst, const void* src, size_t bytes) override { copy(host_dst, src, bytes); }
    void copy(void* dst, const void* src, size_t bytes) override {
        if (bytes && dst != src) std::memcpy(dst, src, bytes);
    }
    void fill_zero(void* dst, size_t bytes) override {
        if (bytes) std::memset(dst, 0, bytes);
    }
    void copy_rows(floatX* dst, int ld_dst, const floatX* src, int ld_src, int rows,
                   int cols) override {   // (decoding's keys and values into the cache: ~1 MB a step)
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= (1u << 16))
        for (int r = 0; r < rows; r++)
            std::memcpy(F(dst) + (size_t)r * ld_dst, F(src) + (size_t)r * ld_src, cols * sizeof(float));
    }
    void convert_weights(floatX* w, const float* p, size_t n) override {
        copy(w, p, n * sizeof(float));
    }

    void positional_table(floatX* pe, int L, int d) override { cpu::positional_table(F(pe), L, d); }
    void embedding_forward(floatX* x, const int* tokens, const floatX* E, const floatX* pe,
                           int pos0, int B, int L, int d, float p, uint64_t seed) override {
        cpu::embedding_forward(F(x), tokens, F(E), F(pe), pos0, B, L, d, p, seed);
    }
    void embedding_backward(float* dE, float* dpe, const floatX* dx, const int* tokens, int B,
                            int L, int d, float p, uint64_t seed) override {
        cpu::embedding_backward(dE, dpe, F(dx), tokens, B, L, d, p, seed);
    }

    void linear_forward(floatX* Y, const floatX* X, const floatX* W, const floatX* b, int rows,
                        int in, int out) override {
        if (!int8_.empty()) return linear_int8(F(Y), out, F(X), rows, int8_at(F(W), out, in), F(b), false);
        if (const SgemmPackedB* w = packed_at(packed_, F(W), out, in)) return cpu::linear_forward_packed(F(Y), F(X), *w, F(b), rows, false);
        if (const Bf16PackedB* w = packed_at(packed_bf16_, F(W), out, in)) return cpu::linear_forward_packed(F(Y), F(X), *w, F(b), rows, false);
        cpu::linear_forward(F(Y), F(X), F(W), F(b), rows, in, out, gemm_);
    }
    void linear_backward(floatX* dX, float dX_beta, float* dW, float* db, const floatX* dY,
                         const floatX* X, const floatX* W, int rows, int in, int out) override {
        cpu::linear_backward(F(dX), dX_beta, dW, db, F(dY), F(X), F(W), rows, in, out, gemm_);
    }

    void linear_relu_forward(floatX* Y, const floatX* X, const floatX* W, const floatX* b,
                             int rows, int in, int out) override {
        if (!int8_.empty()) return linear_int8(F(Y), out, F(X), rows, int8_at(F(W), out, in), F(b), true);
        if (const SgemmPackedB* w = packed_at(packed_, F(W), out, in)) return cpu::linear_forward_packed(F(Y), F(X), *w, F(b), rows, true);
        if (const Bf16PackedB* w = packed_at(packed_bf16_, F(W), out, in)) return cpu::linear_forward_packed(F(Y), F(X), *w, F(b), rows, true);
        cpu::linear_relu_forward(F(Y), F(X), F(W), F(b), rows, in, out, gemm_);
    }
    void relu_backward(floatX* dx, float* db, const floatX* dy, const floatX* y, int rows, int cols) override {
        if (db) return cpu::relu_backward_bias(F(dx), db, F(dy), F(y), rows, cols);
        cpu::relu_backward(F(dx), F(dy), F(y), (size_t)rows * cols);
    }

    void dropout_forward(floatX* y, const floatX* x, size_t n, float p, uint64_t seed) override {
        cpu::dropout_forward(F(y), F(x), n, p, seed);
    }
    void dropout_backward(floatX* dx, const floatX* dy, size_t n, float p, uint64_t seed) override {
        cpu::dropout_backward(F(dx), F(dy), n, p, seed);
    }
    void residual_forward(floatX* y, const floatX* f, const floatX* x, size_t n, float p,
                          uint64_t seed) override {
        cpu::residual_forward(F(y), F(f), F(x), n, p, seed);
    }
    void layernorm_forward(floatX* y, float* mean, float* rstd, const floatX* x, const floatX* g,
                           const floatX* b, int rows, int d) override {
        cpu::layernorm_forward(F(y), mean, rstd, F(x), F(g), F(b), rows, d);
    }
    void layernorm_backward(floatX* dx, float dx_beta, float* dg, float* db, const floatX* dy,
                            const floatX* x, const float* mean, const float* rstd,
                            const floatX* g, int rows, int d) override {
        cpu::layernorm_backward(F(dx), dx_beta, dg, db, F(dy), F(x), mean, rstd, F(g), rows, d);
    }
    void residual_layernorm_forward(floatX* y, floatX* r, float* mean, float* rstd, const floatX* f,
                                    const floatX* x, const floatX* g, const floatX* b, int rows, int d,
                                    float p, uint64_t seed) override {
        cpu::residual_layernorm_forward(F(y), F(r), mean, rstd, F(f), F(x), F(g), F(b), rows, d, p, seed);
    }
    void residual_layernorm_backward(floatX* dx, floatX* df, float* dg, float* db, const floatX* dy,
                                     const floatX* r, const float* mean, const float* rstd,
                                     const floatX* g, int rows, int d, float p, uint64_t seed) override {
        cpu::residual_layernorm_backward(F(dx), F(df), dg, db, F(dy), F(r), mean, rstd, F(g), rows, d, p, seed);
    }

    void attention_forward(floatX* ctx, float* probs, const floatX* q, const floatX* kv,
                           const int* key_tokens, const AttentionShape& s, float p_attn,
                           uint64_t seed) override {
        cpu::attention_forward(F(ctx), probs, F(q), F(kv), key_tokens, s, p_attn, seed,
                               scratch(s.Lq, s.Lk));
    }
    void attention_backward(floatX* dq, floatX* dkv, const floatX* dctx, const float* probs,
                            const floatX* q, const floatX* kv, const AttentionShape& s,
                            float p_attn, uint64_t seed) override {
        cpu::attention_backward(F(dq), F(dkv), F(dctx), probs, F(q), F(kv), s, p_attn, seed,
                                scratch(s.Lq, s.Lk));
    }

    void attention_step_self(floatX* ctx, const floatX* q, const floatX* cache, const int* step_row,
                             const int* slots, int ld_slots, int t, const StepShape& s) override {
        cpu::attention_step_self(F(ctx), F(q), F(cache), step_row, slots, ld_slots, t, s);
    }
    void cache_reorder(int* slots_dst, const int* slots_src, const int* parent, int n, int t,
                       int ld) override {
        cpu::cache_reorder(slots_dst, slots_src, parent, n, t, ld);
    }
    void attention_keys_transpose(floatX* kt, const floatX* kv, int B, int S, int H, int dk,
                                  int ld) override {
        cpu::attention_keys_transpose(F(kt), F(kv), B, S, H, dk, ld);
    }
    void attention_step_cross(floatX* ctx, const floatX* q, const floatX* kt, const floatX* kv,
                              int ld, const int* len, const int* sentence, int S,
                              const StepShape& s) override {
        cpu::attention_step_cross(F(ctx), F(q), F(kt), F(kv), ld, len, sentence, S, s);
    }

    void crossentropy_forward(float* lse, double* loss, const floatX* logits, const int* labels,
                              int rows, int V, float eps) override {
        cpu::crossentropy_forward(lse, loss, F(logits), labels, rows, V, eps);
    }
    void crossentropy_backward(floatX* logits, const float* lse, const int* labels, int rows,
                               int V, float eps, float scale) override {
        cpu::crossentropy_backward(F(logits), lse, labels, rows, V, eps, scale);
    }
    void logsoftmax_topk(int* tokens, float* logp, const floatX* logits, int rows, int V, int ld,
                         int k, int banned) override {
        cpu::logsoftmax_topk(tokens, logp, F(logits), rows, V, ld, k, banned);
    }
    void logsoftmax_gather(float* logp, const floatX* logits, const int* tokens, int rows, int V,
                           int ld) override {
        cpu::logsoftmax_gather(logp, F(logits), tokens, rows, V, ld);
    }
    void logsoftmax_ensemble(floatX* out, const floatX* const* logits, int K, int rows, int V,
                             int ld) override {
        if (K < 1 || K > kMaxEnsemble) {
            std::fprintf(stderr, "%s: error: an ensemble of 1 to %d models, not %d\n", program_invocation_short_name,
                         kMaxEnsemble, K);
            std::exit(1);
        }
        const float* z[kMaxEnsemble];
        for (int k = 0; k < K; k++) z[k] = F(logits[k]);
        cpu::logsoftmax_ensemble(F(out), z, K, rows, V, ld);
    }
    void logsoftmax_sample(int* tokens, float* logp, const float* uniform, const floatX* logits,
                           int rows, int V, int ld, float temperature, int topk, float topp) override {
        cpu::logsoftmax_sample(tokens, logp, uniform, F(logits), rows, V, ld, temperature, topk, topp);
    }
    void search_select(const SearchState& st, const int* cand_token, const float* cand_logp,
                       const int* forced, const float* forced_logp, int /*n*/, int t) override {
        cpu::search_select(st, cand_token, cand_logp, forced, forced_logp, t);
    }

    double global_norm(const float* g, size_t n) override { return cpu::global_norm(g, n); }
    void scale(float* x, size_t n, float s) override { cpu::scale(x, n, s); }
    void add_inplace(float* y, const float* x, size_t n) override { cpu::add_inplace(y, x, n); }
    void adam_step(float* p, const float* g, float* m, float* v, floatX* w, size_t n, float lr,
                   float beta1, float beta2, float eps, int64_t step) override {
        cpu::adam_step(p, g, m, v, n, lr, beta1, beta2, eps, step);
        if (w && F(w) != p) copy(w, p, n * sizeof(float));
    }

    bool quantize_weights(const float* W, int N, int K, std::string* error) override {
        if (K > kInt8MaxDepth) {   // (past it the int32 sums could wrap: a wrong product, silently)
            *error = "int8 products sum at most " + std::to_string(kInt8MaxDepth) + " inputs exactly; this model has a " +
                     std::to_string(N) + " x " + std::to_string(K) + " matrix: translate in fp32 or bf16";
            return false;
        }
        int8_weights_init(&int8_[W], W, N, K);
        return true;
    }
    void drop_quantized_weights() override { int8_.clear(); }

    // W^T, the products' op(B): for sgemm, or rounded to bf16 for sgemm_bf16 (cpu/gemm_bf16.h).
    void pack_weights(const float* W, int N, int K) override {
        if (bf16_) packed_bf16_[W] = sgemm_bf16_pack_b(true, N, K, W, K);
        else packed_[W] = sgemm_pack_b(true, N, K, W, K);
    }
    void drop_packed_weights() override {
        packed_.clear();
        packed_bf16_.clear();
    }
    bool has_packed_weights() const override { return !packed_.empty() || !packed_bf16_.empty(); }

private:
    const bool bf16_;
    const cpu::Gemm gemm_;                        // the linear layers' products
    std::vector<float> scratch_;                  // attention's per-thread tiles
    std::map<const float*, Int8Weights> int8_;    // quantized weight matrices, by address
    std::map<const float*, SgemmPackedB> packed_; // packed weight matrices (W^T), by address
    std::map<const float*, Bf16PackedB> packed_bf16_;   // the same for bf16
    std::vector<std::chrono::steady_clock::time_point> marks_;   // time_mark's

    float* scratch(int Lq, int Lk) {
        const size_t n = cpu::attention_scratch_floats(Lq, Lk);
        if (scratch_.size() < n) scratch_.resize(n);
        return scratch_.data();
    }
    // W's packed copy in `packed` when it has one of that shape (pack_weights), else nullptr.
    template <class Packed>
    static const Packed* packed_at(const std::map<const float*, Packed>& packed, const float* W, int N, int K) {
        auto it = packed.find(W);
        return it != packed.end() && it->second.N == N && it->second.K == K ? &it->second : nullptr;
    }
    const Int8Weights& int8_at(const float* W, int N, int K) const {
        auto it = int8_.find(W);
        if (it == int8_.end() || it->second.N != N || it->second.K != K) {
            std::fprintf(stderr, "error (%s:%d): no int8 weights for the %d x %d matrix at %p "
                         "(model_quantize covers every product)\n", __FILE__, __LINE__, N, K,
                         (const void*)W);
            std::exit(1);
        }
        return it->second;
    }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(Precision precision) {
    return std::make_unique<CpuBackend>(precision == Precision::BF16);
}
