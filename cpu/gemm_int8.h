// gemm_int8.h — int8 linear layers for fast inference (CTranslate2-style), row-major.
//
// An opt-in alternative to the fp32 sgemm() for the linear layers of decoding: the weights
// are quantized once to int8 (symmetric, one scale per output row), the activations per row
// on every call, and the product runs in exact int32 arithmetic (AVX-512 VNNI vpdpbusd,
// 64 multiply-adds per instruction; Intel AMX's tdpbusd, 16,384; on AVX2, vpsignb +
// vpmaddubsw + vpmaddwd). gemm_int8.cpp's header comment explains the design.
//   with __AVX512VNNI__ and __AVX512BW__   the VNNI micro-kernel, and the AMX one (compiled
//                                          on Linux with GCC 11 / clang 12 or later) for
//                                          products of 16 rows or more where the CPU and
//                                          the kernel offer AMX; bitwise the same results
//   else with __AVX2__                     the AVX2 micro-kernel, bitwise the same results
//   otherwise                              portable C++ giving bitwise the same results
//   without -fopenmp                       serial
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu/kernel_common.h"   // Aligned64

// The weights W [N, K] of a linear layer (nn.Linear layout: out_features x in_features),
// quantized per output row n: w[n][k] ~= q[n][k] * scale[n], q in [-127, 127],
// scale[n] = max_k |w[n][k]| / 127, q = round-to-nearest-even(w * (127 / max_k |w[n][k]|)).
// A row whose max |w| is below 1e-30 (e.g. all zeros) gets q = 0 and scale 0.
// `packed` holds q in the micro-kernel's order (gemm_int8.cpp): column slivers of 64 rows of
// W, each [K4 / 4][64][4] bytes, with K rounded up to K4 (a multiple of 4) and N up to a
// multiple of 64, zero-padded.
struct Int8Weights {
    int N = 0, K = 0;
    std::vector<int8_t, Aligned64<int8_t>> packed;  // (ceil(N/64) * 64 * K4)
    std::vector<float> scale;                       // (N)
    std::vector<int32_t> colsum;                    // (N) sum_k q[n][k]
};

// The deepest product linear_int8 sums exactly in int32: 255 * 127 * K < 2^31.
constexpr int kInt8MaxDepth = 66000;

// Quantizes and packs W [N, K] (row-major, row stride K) into *w (previous contents replaced).
void int8_weights_init(Int8Weights* w, const float* W, int N, int K);

// The kernel linear_int8 takes for M rows of depth K: "amx" (Intel AMX tiles, where the CPU
// and the OS offer them, for M >= 16 and K rounded up to 4 a multiple of 64), "avx512-vnni",
// "avx2" or "portable". All give bitwise the same y.
const char* int8_kernel(int M, int K);
// false: never AMX (tests and benchmarks compare it with the VNNI kernel); true: the default.
void int8_allow_amx(bool allow);

// Dequantized weight q[n][k] * scale[n] (for tests and diagnostics; 0 <= n < N, 0 <= k < K).
float int8_weight_at(const Int8Weights& w, int n, int k);

// y[M, N] = x[M, K] W^T + bias[N] (bias may be nullptr), then max(y, 0) when relu.
// x (row stride K) is quantized per row on the fly: sx[m] = max_k |x[m][k]| / 127 and
// qx = round-to-nearest-even(x * (127 / max_k |x[m][k]|)) in [-127, 127] (a row with max |x|
// below 1e-30 gives zeros). acc[m][n] = sum_k qx[m][k] q[n][k], exact in int32 (K <= kInt8MaxDepth):
//     y[m][n] = fma(float(acc[m][n]), sx[m] * scale[n], bias[n])     (bias 0 when nullptr)
// with one rounding for the fma (so any implementation gives bitwise the same y).
// ldy >= N is y's row stride; y's padding is not touched. Inputs must be finite. The quantized
// x goes to a buffer of the calling thread (M x K bytes), grown on demand and reused.
// Called outside an OpenMP parallel region it uses all OpenMP threads; inside one, it runs
// on the calling thread only. Deterministic: bitwise the same y for any thread count.
void linear_int8(float* y, int ldy, const float* x, int M, const Int8Weights& w,
                 const float* bias, bool relu);
