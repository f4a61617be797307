// gemm_int8.cpp — int8 linear layers: y = dequant(quant(x) * quant(W)^T) + bias, row-major.
//
// Why int8, and how the numbers stay exact
// -----------------------------------------------------------------------------------------
// Zen 4 retires one 512-bit vpdpbusd per cycle per core: 16 lanes x 4 byte products summed
// into int32 = 64 multiply-adds per cycle, against 16 for a 512-bit fp32 FMA. So a linear
// layer quantized to int8 can run up to ~4x faster than sgemm(). The quantization
// (gemm_int8.h) is symmetric: weights per output row (once, int8_weights_init), activations
// per row (on every call), both to [-127, 127]. The integer product is exact (the kernel's
// sums stay below 255 * 127 * K < 2^31 for K <= 66000), and the only roundings after it are
// float(acc), sx[m] * scale[n] and one fma with the bias: every path (AVX-512 VNNI, AVX2,
// portable C++, any thread count) gives bitwise the same y. (make test checks each path where
// the CPU has it: test_gemm_int8.avx512, .avx2, .plain; and AMX where the CPU has amx_int8.)
// On CPUs with Intel AMX (Sapphire Rapids and later) the products of 16 rows or more take the
// AMX kernel further below: the same operands and epilogue, one tile instruction for 256
// vpdpbusd. On one core of a Xeon VM with AMX it did 1.7-2.5x the VNNI kernel's work a second
// on the decoder's shapes, quantization included (make bench-gemm-int8); its tile loads and
// the epilogue, not the tile products, bound it.
//
// vpdpbusd multiplies UNSIGNED bytes by SIGNED bytes. The activations are therefore stored
// as u8 = qx + 128 (in [1, 255]) and the offset removed at the end, exactly:
//     sum_k (qx + 128) q = acc + 128 * colsum[n],   colsum[n] = sum_k q[n][k].
//
// Layouts
// -----------------------------------------------------------------------------------------
// Weights (packed once): K is rounded up to K4 (a multiple of 4) and N cut into slivers of
// NR = 64 columns (rows of W); sliver s is a [K4/4][64][4] byte array:
//     packed[s * 64 * K4 + (k / 4) * 256 + (n % 64) * 4 + k % 4] = q[s * 64 + n % 64][k]
// so that one aligned 64-byte load at depth k/4 gives 16 output columns x 4 consecutive k
// (exactly one vpdpbusd operand), and a sliver is one contiguous stream. Padding is zero.
// Activations (per call): the u8 rows of quant(x), row stride lda = K4 rounded up to 64,
// bytes K..K4 = 128 (their weights are zero, so their value does not matter).
//
// Micro-kernel (registers): MR x NR = 6 x 64 tiles of y, 6 x 4 = 24 zmm int32 accumulators.
// Each depth step (4 k values) loads 4 zmm of the weight sliver, broadcasts one int32
// (4 u8 activations) per row and does 24 vpdpbusd: 10 loads for 24 products, 24 independent
// chains to hide vpdpbusd's latency, 24 + 4 + 1 = 29 registers. The epilogue subtracts
// 128 * colsum, converts, scales, adds the bias, applies ReLU and stores (masked at N's end).
// (Without VNNI, the AVX2 micro-kernel further below takes the same 6 x 64 tile in sub-tiles of
// 2 x 32 and the same operands; it explains how it stays exact. On a 2-core Zen 3 VM it does
// 134-157 GOP/s on the decoder's shapes, 1.2-1.7x our fp32 sgemm there; the portable C++ did 29.)
// Tails in M use the same kernel with fewer rows (a template per row count 1..6), so M = 1
// (greedy decoding of one sentence) does not pay for 6 rows; N's tail computes the zero
// padding and stores masked. Measured alternatives (8 x 48, 12 x 32) were equal or slower.
//
// Blocking: the weight slivers are taken in blocks of WB_BYTES = 256 KiB (16 slivers =
// 1024 columns at K = 256), which stay in L2; for each block, for each 6-row tile of x
// (6 x K4 bytes, L1), for each sliver of the block: kernel. Each weight byte comes from
// memory/L3 once per call and thread, the activations once per block, and y is written in
// runs of 6 rows x 1024 columns. (The other order, each sliver against all row tiles, was measured
// ~20% slower at N = 8000, where y is large and its rows far apart.) K is not blocked:
// a tile's accumulators live for the whole K (up to 2048 here), so y is written once.
//
// Threads (OpenMP): the output is cut into one band per thread, by 6-row tile ranges (rows)
// or by sliver ranges (columns). Rows are preferred (within 10% of the columns' busiest-thread
// work): each thread then quantizes just its own rows of x, keeps them in its own cache and
// needs no barrier. Small M (e.g. one decoding step of a few hypotheses) splits by columns:
// the threads quantize a share of the rows each into a buffer of the calling thread, meet at
// one barrier, and compute their slivers. Each y element is computed by one thread with exact
// integer sums, so the result cannot depend on the split. Products of at most 2^18
// multiply-adds (and calls inside a parallel region) run serially.
#include "cpu/gemm_int8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512F__)
#define GEMM_INT8_VNNI 1
// GCC 12.2 warns "'__Y' may be used uninitialized" inside the intrinsics that take an
// _mm512_undefined_*() pass-through (GCC bug 105593, fixed in 12.3): silence that warning.
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#elif defined(__AVX2__)
#define GEMM_INT8_AVX2 1
#include <immintrin.h>
#endif
// The AMX kernel is compiled wherever the VNNI one is, on Linux x86-64 with a compiler that knows
// AMX's intrinsics (GCC 11, clang 12: cpu/amx.h), and runs where the CPU and the kernel offer
// the tiles.
#include "cpu/amx.h"
#include "cpu/kernel_common.h"
#if defined(GEMM_INT8_VNNI) && defined(CPU_AMX)
#define GEMM_INT8_AMX 1
#define AMX_TARGET __attribute__((target("amx-tile,amx-int8")))
#endif

namespace {

constexpr int NV = 4;                 // zmm vectors (16 int32 columns each) per tile row
constexpr int NR = 16 * NV;           // tile columns = sliver width of the packed weights
constexpr int MR = 6;                 // tile rows
constexpr long WB_BYTES = 256 << 10;  // block of weight slivers kept in L2
constexpr float TINY = 1e-30f;        // rows with max |v| below this quantize to zero
// Products with M * N * K at or below this (~1 microsecond on one core) run serially.
constexpr double SERIAL_MNK = 1 << 18;

using cpu_kernels::round_up;
using cpu_kernels::thread_count;

// Per-row quantization constants: q = rne(v * inv), v ~= q * scale.
struct RowScale {
    float inv, scale;
};
RowScale row_scale(float amax) {
    if (!(amax >= TINY)) return {0.0f, 0.0f};
    return {127.0f / amax, amax / 127.0f};
}

// rne(v * inv) clamped to [-127, 127] (std::nearbyint rounds to nearest even by default).
inline int quantize(float v, float inv) {
    float r = std::nearbyint(v * inv);
    return (int)std::min(127.0f, std::max(-127.0f, r));
}

// ---------------------------------------------------------------------------------------------
// Activation quantization, in two passes over the rows (row_amax for every row, then
// quantize_row): the rows' max -> divide -> convert latency chains then overlap.
#ifdef GEMM_INT8_VNNI
using cpu_kernels::first_lanes;

// max_k |x[k]| of one row of K floats.
float row_amax(const float* x, int K) {
    __m512 m0 = _mm512_setzero_ps(), m1 = _mm512_setzero_ps();
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        m0 = _mm512_max_ps(m0, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
        m1 = _mm512_max_ps(m1, _mm512_abs_ps(_mm512_loadu_ps(x + k + 16)));
    }
    for (; k < K; k += 16)
        m0 = _mm512_max_ps(m0, _mm512_abs_ps(_mm512_maskz_loadu_ps(first_lanes(K - k), x + k)));
    return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

// The 16 floats of x[0..16) (lanes >= n read as 0) times inv, rounded to int32 (rne under
// the default MXCSR rounding).
inline __m512i scaled_int32(const float* x, int n, __m512 inv) {
    return _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(first_lanes(n), x), inv));
}

// One row of K floats -> u8 = rne(x * inv) + 128 (k4 bytes, K..k4 = 128). 64 values per
// step: converted to int32, packed with signed saturation to int16 and int8 (each 128-bit
// lane then holds 4 values of each of the 4 vectors, put back in order by one dword
// permutation), clamped to -127, plus 128 (xor of the sign bit).
void quantize_row(const float* x, int K, int k4, float inv_s, uint8_t* dst) {
    const __m512 inv = _mm512_set1_ps(inv_s);
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i lo = _mm512_set1_epi8(-127), bias = _mm512_set1_epi8((char)0x80);
    for (int k = 0; k < k4; k += 64) {
        __m512i a = scaled_int32(x + k, K - k, inv), b = scaled_int32(x + k + 16, K - k - 16, inv),
                c = scaled_int32(x + k + 32, K - k - 32, inv),
                d = scaled_int32(x + k + 48, K - k - 48, inv);
        __m512i q = _mm512_packs_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
        q = _mm512_permutexvar_epi32(order, q);
        q = _mm512_xor_si512(_mm512_max_epi8(q, lo), bias);
        int n = k4 - k;
        _mm512_mask_storeu_epi8(dst + k, n >= 64 ? ~0ull : (1ull << n) - 1, q);
    }
}
#elif defined(GEMM_INT8_AVX2)
// max_k |x[k]| of one row of K floats (the maximum is exact in any order).
float row_amax(const float* x, int K) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
    int k = 0;
    for (; k + 16 <= K; k += 16) {
        m0 = _mm256_max_ps(m0, _mm256_and_ps(abs_mask, _mm256_loadu_ps(x + k)));
        m1 = _mm256_max_ps(m1, _mm256_and_ps(abs_mask, _mm256_loadu_ps(x + k + 8)));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_max_ps(m0, m1));
    float amax = 0.0f;
    for (float v : lanes) amax = std::max(amax, v);
    for (; k < K; k++) amax = std::max(amax, std::fabs(x[k]));
    return amax;
}

// One row of K floats -> u8 = rne(x * inv) + 128 (k4 bytes, K..k4 = 128), as the VNNI version:
// 32 values per step converted to int32 (rne under the default MXCSR rounding, as
// std::nearbyint), packed with signed saturation to int16 and int8 (each 128-bit lane then
// holds 4 values of each vector, put back in order by one dword permutation), clamped to
// -127, plus 128. The last K % 32 values go through the scalar quantize().
void quantize_row(const float* x, int K, int k4, float inv_s, uint8_t* dst) {
    const __m256 inv = _mm256_set1_ps(inv_s);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i lo = _mm256_set1_epi8(-127), bias = _mm256_set1_epi8((char)0x80);
    auto scaled = [&](const float* p) { return _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(p), inv)); };
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        __m256i q = _mm256_packs_epi16(_mm256_packs_epi32(scaled(x + k), scaled(x + k + 8)),
                                       _mm256_packs_epi32(scaled(x + k + 16), scaled(x + k + 24)));
        q = _mm256_permutevar8x32_epi32(q, order);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), _mm256_xor_si256(_mm256_max_epi8(q, lo), bias));
    }
    for (; k < K; k++) dst[k] = (uint8_t)(quantize(x[k], inv_s) + 128);
    for (; k < k4; k++) dst[k] = 128;
}
#else
float row_amax(const float* x, int K) {
    float amax = 0.0f;
    for (int k = 0; k < K; k++) amax = std::max(amax, std::fabs(x[k]));
    return amax;
}

void quantize_row(const float* x, int K, int k4, float inv, uint8_t* dst) {
    for (int k = 0; k < K; k++) dst[k] = (uint8_t)(quantize(x[k], inv) + 128);
    for (int k = K; k < k4; k++) dst[k] = 128;
}
#endif

// Rows [m0, m1) of x [M, K] -> u8 rows of qa (stride lda) and their scales sx.
void quantize_rows(const float* x, int K, int k4, int m0, int m1, uint8_t* qa, long lda,
                   float* sx) {
    for (int m = m0; m < m1; m++) sx[m] = row_amax(x + (size_t)m * K, K);
    for (int m = m0; m < m1; m++) {
        RowScale s = row_scale(sx[m]);
        quantize_row(x + (size_t)m * K, K, k4, s.inv, qa + m * lda);
        sx[m] = s.scale;
    }
}

// ---------------------------------------------------------------------------------------------
// One call's operands: the quantized activations and everything the epilogue needs.
struct Problem {
    const uint8_t* qa;  // [M, lda] u8 activations
    long lda;
    const float* sx;    // (M)
    const Int8Weights* w;
    int M, N, kq;       // kq = K4 / 4 depth steps
    const float* bias;  // (N) or nullptr
    float* y;
    long ldy;
    bool relu;
    bool amx;           // the AMX kernel (use_amx)
};

// Micro-kernel: y[0:R, 0:n] for one 6-row (R <= MR) x 64-column tile, n <= 64 valid columns.
// a: the tile's first activation row; b: the sliver; n0: the tile's first column.
#ifdef GEMM_INT8_VNNI
// The epilogue of 16 columns from c (the VNNI and the AMX kernels share it, so their y are
// bitwise the same): its constants once (128 * colsum, scale, bias; lanes past N masked), then
// per row y = fma(float(acc - 128 * colsum), sx[m] * scale, bias), ReLU, a masked store.
struct Columns16 {
    __mmask16 mask;
    __m512i off;
    __m512 sc, bi;
};
inline Columns16 columns16(const Problem& p, int c, int n) {
    const __mmask16 m = first_lanes(n);
    return {m, _mm512_slli_epi32(_mm512_maskz_loadu_epi32(m, p.w->colsum.data() + c), 7),
            _mm512_maskz_loadu_ps(m, p.w->scale.data() + c),
            p.bias ? _mm512_maskz_loadu_ps(m, p.bias + c) : _mm512_setzero_ps()};
}
// y: the row's first of the 16 columns; sx: the row's scale.
inline void store16(const Columns16& k, float sx, bool relu, float* y, __m512i acc) {
    __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc, k.off));
    __m512 s = _mm512_mul_ps(_mm512_set1_ps(sx), k.sc);
    __m512 yv = _mm512_fmadd_ps(f, s, k.bi);
    if (relu) yv = _mm512_max_ps(yv, _mm512_setzero_ps());  // yv > 0 ? yv : 0
    _mm512_mask_storeu_ps(y, k.mask, yv);
}

template <int R>
void micro_kernel(const Problem& p, const uint8_t* a, const int8_t* b, int m0, int n0, int n) {
    __m512i acc[R][NV];
#pragma GCC unroll 12
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_si512();
    const long lda = p.lda;
#pragma GCC unroll 2
    for (int k = 0; k < p.kq; k++, a += 4, b += 4 * NR) {
        __m512i bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) bv[v] = _mm512_load_si512(b + 64 * v);
#pragma GCC unroll 12
        for (int r = 0; r < R; r++) {
            int32_t a4;
            std::memcpy(&a4, a + r * lda, 4);
            __m512i ar = _mm512_set1_epi32(a4);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], ar, bv[v]);
        }
    }
    // Epilogue, one 16-column vector at a time (keeps the 24 accumulators in registers).
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
        if (n <= 16 * v) break;
        const Columns16 k = columns16(p, n0 + 16 * v, n - 16 * v);
#pragma GCC unroll 12
        for (int r = 0; r < R; r++)
            store16(k, p.sx[m0 + r], p.relu, p.y + (m0 + r) * p.ldy + n0 + 16 * v, acc[r][v]);
    }
}
#elif defined(GEMM_INT8_AVX2)
// AVX2 has no vpdpbusd, and its vpmaddubsw (u8 x s8, pairs summed to int16 with saturation)
// would saturate on (qx + 128) q: 2 x 255 x 127 > 32767. So the offset comes off first
// (qx = u8 ^ 0x80) and the sign moves to the weights: vpsignb gives q * sign(qx), vpmaddubsw
// multiplies it by |qx| <= 127 (pairs at most 2 x 127 x 127 = 32258: no saturation), vpmaddwd by
// ones sums the pairs into int32. acc is then sum_k qx q exactly, with no 128 * colsum to remove.
// Registers (16 ymm): a sub-tile of 2 rows x 32 columns, 8 accumulators + 2 x 2 activations
// (qx, |qx|) + a weight vector + a product + the ones = 15; the 6 x 64 tile is 3 x 2 of them,
// each a pass over its half of the sliver (L1 / L2).
inline __m256i first_lanes(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <int R>
void sub_tile(const Problem& p, const uint8_t* a, const int8_t* b, int m0, int n0, int n) {
    constexpr int V = 4;   // vectors of 8 int32 columns
    const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8((char)0x80);
    __m256i acc[R][V];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) acc[r][v] = _mm256_setzero_si256();
    for (int k = 0; k < p.kq; k++, a += 4, b += 4 * NR) {
        __m256i qx[R], mag[R];
        for (int r = 0; r < R; r++) {
            int32_t a4;
            std::memcpy(&a4, a + r * p.lda, 4);
            qx[r] = _mm256_xor_si256(_mm256_set1_epi32(a4), flip);
            mag[r] = _mm256_abs_epi8(qx[r]);
        }
        for (int v = 0; v < V; v++) {
            const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 32 * v));
            for (int r = 0; r < R; r++) {
                __m256i t = _mm256_maddubs_epi16(mag[r], _mm256_sign_epi8(w, qx[r]));
                acc[r][v] = _mm256_add_epi32(acc[r][v], _mm256_madd_epi16(t, ones));
            }
        }
    }
    for (int v = 0; v < V && 8 * v < n; v++) {
        const int c = n0 + 8 * v;
        const __m256i m = first_lanes(n - 8 * v);
        const __m256 sc = _mm256_maskload_ps(p.w->scale.data() + c, m);
        const __m256 bi = p.bias ? _mm256_maskload_ps(p.bias + c, m) : _mm256_setzero_ps();
        for (int r = 0; r < R; r++) {
            const __m256 s = _mm256_mul_ps(_mm256_set1_ps(p.sx[m0 + r]), sc);
            __m256 yv = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][v]), s, bi);
            if (p.relu) yv = _mm256_max_ps(yv, _mm256_setzero_ps());
            float* dst = p.y + (m0 + r) * p.ldy + c;
            if (n - 8 * v >= 8) _mm256_storeu_ps(dst, yv);   // (vmaskmov stores are slow on AMD)
            else _mm256_maskstore_ps(dst, m, yv);
        }
    }
}

template <int R>
void micro_kernel(const Problem& p, const uint8_t* a, const int8_t* b, int m0, int n0, int n) {
    for (int r = 0; r < R; r += 2)
        for (int h = 0; h < 2 && 32 * h < n; h++) {
            const uint8_t* ar = a + r * p.lda;
            const int8_t* bh = b + 32 * 4 * h;   // columns 32h.. of each depth step's 64 x 4 bytes
            if (R - r >= 2) sub_tile<2>(p, ar, bh, m0 + r, n0 + 32 * h, n - 32 * h);
            else sub_tile<1>(p, ar, bh, m0 + r, n0 + 32 * h, n - 32 * h);
        }
}
#else
// The dequantization of one output: fma(float(acc), sx * scale, bias), then ReLU (the vector
// kernels' epilogues do the same operations on 16 or 8 outputs at a time).
inline float dequant(int32_t acc, float sx, float scale, float bias, bool relu) {
    float v = std::fma((float)acc, sx * scale, bias);
    return relu ? (v > 0.0f ? v : 0.0f) : v;
}

template <int R>
void micro_kernel(const Problem& p, const uint8_t* a, const int8_t* b, int m0, int n0, int n) {
    int32_t acc[R][NR] = {};
    for (int k = 0; k < p.kq; k++, a += 4, b += 4 * NR)
        for (int r = 0; r < R; r++)
            for (int j = 0; j < NR; j++)
                for (int i = 0; i < 4; i++) acc[r][j] += (int32_t)a[r * p.lda + i] * b[4 * j + i];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < n; j++) {
            int c = n0 + j;
            int32_t q = acc[r][j] - 128 * p.w->colsum[c];
            p.y[(m0 + r) * p.ldy + c] =
                dequant(q, p.sx[m0 + r], p.w->scale[c], p.bias ? p.bias[c] : 0.0f, p.relu);
        }
}
#endif

#ifdef GEMM_INT8_AMX
// ---------------------------------------------------------------------------------------------
// AMX (Intel's Advanced Matrix Extensions, Sapphire Rapids and later): eight tile registers of
// 16 rows x 64 bytes, and tdpbusd, which multiplies a 16 x 64 u8 tile (16 rows of 64 k) by a
// 64 x 16 s8 tile stored as 16 rows of (16 columns x 4 consecutive k) and adds the 16 x 16
// int32 sums to a third tile: 16,384 multiply-adds an instruction, against vpdpbusd's 64. That
// B layout is the packed sliver's own: 16 depth steps of a sliver, read at a row stride of
// 4 * NR bytes, are one B tile for 16 of its columns. So AMX takes the same operands as the
// VNNI kernel (u8 = qx + 128, the packed weights unchanged), sums the same exact integers and
// ends in the same epilogue (store16): y is bitwise the VNNI kernel's.
// Tiles: C 0..3 (2 x 2 blocks of 16 x 16 int32), A 4..5 (16 rows x 64 k), B 6..7 (64 k x 16
// columns): a block of y of up to 32 rows x 32 columns (half a sliver), k in steps of 64, so
// the path needs K4 % 64 == 0 (every layer of the model's configs; other K take the VNNI
// kernel). A block reads whole 16-row A tiles: the rows past M are in the buffer (linear_int8
// sizes it in 32-row units) and their sums are never stored.
constexpr int AMX_MR = 32;          // rows of a block, and of the row bands of a split
constexpr int AMX_MIN_ROWS = 16;    // fewer rows take the VNNI kernel (an A tile is 16 rows)

// A block of y: rows [m0, m0 + rows) x columns [n0, n0 + n), rows <= 32, n <= 32.
struct AmxBlock {
    int m0, rows, n0, n;
};
using AmxSums = int32_t[4][16][16];   // tile 2 * (r / 16) + v: rows r, columns 16 v ..

// The block's sums into tiles 0..1 (rows 0..15) and 2..3 (rows 16..31, TM = 2): a, the block's
// first activation row; b, column n0's bytes in its sliver's first depth step.
template <int TM>
AMX_TARGET void amx_sums(const Problem& p, const uint8_t* a, const int8_t* b) {
    _tile_zero(0);
    _tile_zero(1);
    if (TM == 2) {
        _tile_zero(2);
        _tile_zero(3);
    }
    const long lda = p.lda, ldb = 4 * NR;
    for (int k = 0; k < p.kq; k += 16, a += 64, b += 16 * ldb) {
        _tile_loadd(6, b, ldb);        // columns n0 .. n0 + 15, 64 k
        _tile_loadd(7, b + 64, ldb);   // columns n0 + 16 .. n0 + 31
        _tile_loadd(4, a, lda);        // rows m0 .. m0 + 15, 64 k
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 4, 7);
        if (TM == 2) {
            _tile_loadd(5, a + 16 * lda, lda);
            _tile_dpbusd(2, 5, 6);
            _tile_dpbusd(3, 5, 7);
        }
    }
}

template <int TM>
AMX_TARGET void amx_store(AmxSums& acc) {
    _tile_stored(0, acc[0], 64);
    _tile_stored(1, acc[1], 64);
    if (TM == 2) {
        _tile_stored(2, acc[2], 64);
        _tile_stored(3, acc[3], 64);
    }
}

// The block's y from its stored sums (the VNNI kernel's epilogue, store16), with what the
// loop reads in locals (the stores through y may alias anything, so the compiler would reload
// the Problem's fields at every row).
void amx_epilogue(const Problem& p, const AmxBlock& blk, const AmxSums& acc) {
    const float* sx = p.sx + blk.m0;
    const long ldy = p.ldy;
    const bool relu = p.relu;
    for (int v = 0; v < 2 && 16 * v < blk.n; v++) {
        const Columns16 k = columns16(p, blk.n0 + 16 * v, blk.n - 16 * v);
        float* y = p.y + blk.m0 * ldy + blk.n0 + 16 * v;
        for (int t = 0; 16 * t < blk.rows; t++) {
            const int rows = std::min(16, blk.rows - 16 * t);
            const int32_t(*c)[16] = acc[2 * t + v];
            for (int r = 0; r < rows; r++)
                store16(k, sx[16 * t + r], relu, y + (16 * t + r) * ldy, _mm512_load_si512(c[r]));
        }
    }
}

// compute_band's loops with AMX blocks (32 rows x 32 columns) in place of the 6 x 64 tiles.
// The tiles are configured on entry and released on return (each thread has its own). (Issuing
// a block's epilogue after the next block's tile instructions, so that the two might overlap,
// was measured no faster.)
AMX_TARGET void compute_band_amx(const Problem& p, int m0, int m1, int s0, int s1) {
    static const TileConfig config;
    _tile_loadconfig(&config);
    alignas(64) AmxSums sums;
    const int sc = std::max<long>(1, WB_BYTES / (4L * NR * std::max(1, p.kq)));  // per L2 block
    for (int jc = s0; jc < s1; jc += sc) {
        const int je = std::min(s1, jc + sc);
        for (int i = m0; i < m1; i += AMX_MR) {
            const int rows = std::min(AMX_MR, m1 - i);
            for (int s = jc; s < je; s++)
                for (int h = 0; h < 2 && s * NR + 32 * h < p.N; h++) {
                    const AmxBlock blk{i, rows, s * NR + 32 * h, std::min(32, p.N - s * NR - 32 * h)};
                    const int8_t* b = p.w->packed.data() + (size_t)s * NR * 4 * p.kq + 32 * 4 * h;
                    const uint8_t* a = p.qa + i * p.lda;
                    if (rows > 16) {
                        amx_sums<2>(p, a, b);
                        amx_store<2>(sums);
                    } else {
                        amx_sums<1>(p, a, b);
                        amx_store<1>(sums);
                    }
                    amx_epilogue(p, blk, sums);
                }
        }
    }
    _tile_release();
}
#endif

// Runs the micro-kernel instantiated for `rows` (1..R) rows.
template <int R>
void kernel_rows(int rows, const Problem& p, const uint8_t* a, const int8_t* b, int m0, int n0,
                 int n) {
    if constexpr (R > 1)
        if (rows < R) return kernel_rows<R - 1>(rows, p, a, b, m0, n0, n);
    micro_kernel<R>(p, a, b, m0, n0, n);
}

// One tile of `rows` (1..MR) rows at row m0 and sliver s.
void tile(const Problem& p, int m0, int rows, int s) {
    const uint8_t* a = p.qa + m0 * p.lda;
    const int8_t* b = p.w->packed.data() + (size_t)s * NR * 4 * p.kq;
    int n0 = s * NR;
    kernel_rows<MR>(rows, p, a, b, m0, n0, std::min(NR, p.N - n0));
}

// y rows [m0, m1) x slivers [s0, s1), blocked as in the header comment.
void compute_band(const Problem& p, int m0, int m1, int s0, int s1) {
#ifdef GEMM_INT8_AMX
    if (p.amx) return compute_band_amx(p, m0, m1, s0, s1);
#endif
    const int sc = std::max<long>(1, WB_BYTES / (4L * NR * std::max(1, p.kq)));  // per L2 block
    for (int jc = s0; jc < s1; jc += sc) {
        const int je = std::min(s1, jc + sc);
        for (int i = m0; i < m1; i += MR)
            for (int s = jc; s < je; s++) tile(p, i, std::min(MR, m1 - i), s);
    }
}

// Per-calling-thread buffers for the quantized activations, grown on demand and reused.
thread_local std::vector<uint8_t, Aligned64<uint8_t>> tls_qa;
thread_local std::vector<float> tls_sx;

#ifndef GEMM_INT8_AMX
constexpr int AMX_MR = MR;
#endif
// TRANSFORMER_AMX (cpu/amx.h), read on first use (not in a static initializer, which another
// translation unit's might precede), then int8_allow_amx's.
bool& amx_allowed() {
    static bool allowed = amx_from_environment();
    return allowed;
}
constexpr int AMX_ROWS = AMX_MR;

// Whether linear_int8 takes the AMX kernel for M rows of depth K.
bool use_amx(int M, int K) {
#ifdef GEMM_INT8_AMX
    return amx_allowed() && M >= AMX_MIN_ROWS && round_up(K, 4) % 64 == 0 && amx_available(AmxType::INT8);
#else
    (void)M, (void)K;
    return false;
#endif
}

}  // namespace

// ---------------------------------------------------------------------------------------------
void int8_weights_init(Int8Weights* w, const float* W, int N, int K) {
    const int k4 = round_up(K, 4), slivers = (N + NR - 1) / NR;
    w->N = N;
    w->K = K;
    w->packed.assign((size_t)slivers * NR * k4, 0);
    w->scale.assign(N, 0.0f);
    w->colsum.assign(N, 0);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (thread_count() > 1 && (double)N * K > 1e6)
#endif
    for (int n = 0; n < N; n++) {
        const float* row = W + (size_t)n * K;
        float amax = 0.0f;
        for (int k = 0; k < K; k++) amax = std::max(amax, std::fabs(row[k]));
        RowScale s = row_scale(amax);
        int8_t* dst = w->packed.data() + (size_t)(n / NR) * NR * k4 + (n % NR) * 4;
        int32_t sum = 0;
        for (int k = 0; k < K; k++) {
            int q = quantize(row[k], s.inv);
            dst[(k / 4) * 4 * NR + k % 4] = (int8_t)q;
            sum += q;
        }
        w->scale[n] = s.scale;
        w->colsum[n] = sum;
    }
}

void int8_allow_amx(bool allow) { amx_allowed() = allow; }

const char* int8_kernel(int M, int K) {
#if defined(GEMM_INT8_VNNI)
    return use_amx(M, K) ? "amx" : "avx512-vnni";
#elif defined(GEMM_INT8_AVX2)
    (void)M, (void)K;
    return "avx2";
#else
    (void)M, (void)K;
    return "portable";
#endif
}

float int8_weight_at(const Int8Weights& w, int n, int k) {
    const int k4 = round_up(w.K, 4);
    int8_t q = w.packed[(size_t)(n / NR) * NR * k4 + (k / 4) * 4 * NR + (n % NR) * 4 + k % 4];
    return q * w.scale[n];
}

void linear_int8(float* y, int ldy, const float* x, int M, const Int8Weights& w,
                 const float* bias, bool relu) {
    if (M <= 0 || w.N <= 0) return;
    const int K = w.K, k4 = round_up(K, 4), slivers = (w.N + NR - 1) / NR;
    const long lda = std::max(64, round_up(k4, 64));
    const bool amx = use_amx(M, K);
    const int mr = amx ? AMX_ROWS : MR;   // the row unit of a band (and of the buffer, for AMX)
    const size_t rows = amx ? (size_t)round_up(M, mr) : (size_t)M;
    if (tls_qa.size() < rows * lda) tls_qa.resize(rows * lda);
    if (tls_sx.size() < (size_t)M) tls_sx.resize(M);
    Problem p{tls_qa.data(), lda, tls_sx.data(), &w, M, w.N, k4 / 4, bias, y, ldy, relu, amx};
    uint8_t* qa = tls_qa.data();
    float* sx = tls_sx.data();

    int nth = (double)M * w.N * K <= SERIAL_MNK ? 1 : thread_count();
    if (nth == 1) {
        quantize_rows(x, K, k4, 0, M, qa, lda, sx);
        compute_band(p, 0, M, 0, slivers);
        return;
    }
#ifdef _OPENMP
    // The busiest thread's work (rows x slivers) for each split; rows unless that is more
    // than 10% worse (a row split needs no barrier and keeps each thread's rows in its cache).
    const int tiles_m = (M + mr - 1) / mr;
    const double rows_work = (double)std::min(M, (tiles_m + nth - 1) / nth * mr) * slivers;
    const double cols_work = (double)M * ((slivers + nth - 1) / nth);
    const bool by_rows = rows_work <= 1.1 * cols_work;
#pragma omp parallel num_threads(nth)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        if (by_rows) {  // tiles [t * tiles_m / nt, ...): quantize those rows, then compute
            int m0 = std::min(M, (int)((long)tiles_m * t / nt) * mr);
            int m1 = std::min(M, (int)((long)tiles_m * (t + 1) / nt) * mr);
            quantize_rows(x, K, k4, m0, m1, qa, lda, sx);
            compute_band(p, m0, m1, 0, slivers);
        } else {  // everyone quantizes a share of all rows, then computes its slivers
            quantize_rows(x, K, k4, (int)((long)M * t / nt), (int)((long)M * (t + 1) / nt), qa,
                          lda, sx);
#pragma omp barrier
            compute_band(p, 0, M, (int)((long)slivers * t / nt),
                         (int)((long)slivers * (t + 1) / nt));
        }
    }
#endif
}
