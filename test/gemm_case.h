// test/gemm_case.h — one matrix product's case for the tests of sgemm (test_gemm) and sgemm_bf16
// (test_gemm_bf16): its shape, transposes, scalars and padded leading dimensions, and random
// operands with C's padding holding a sentinel (so a test sees a store past N); and the check of
// the linear layers' epilogue (gemm.h) both share.
#pragma once
#include "cpu/gemm.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

struct Case {
    bool ta, tb;
    int M, N, K;
    float alpha, beta;
    int pad_a, pad_b, pad_c;  // extra elements per row beyond the minimum leading dimension
};

// Operands and C for one case, with random contents; C's padding holds a sentinel.
struct Data {
    int lda, ldb, ldc;
    std::vector<float> A, B, C0;
};

constexpr float SENTINEL = -12345.0f;

inline Data make_data(const Case& c, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    Data d;
    d.lda = (c.ta ? c.M : c.K) + c.pad_a;
    d.ldb = (c.tb ? c.K : c.N) + c.pad_b;
    d.ldc = c.N + c.pad_c;
    d.A.resize((size_t)(c.ta ? c.K : c.M) * d.lda + 1);
    d.B.resize((size_t)(c.tb ? c.N : c.K) * d.ldb + 1);
    d.C0.assign((size_t)c.M * d.ldc + 1, SENTINEL);
    for (auto& x : d.A) x = u(rng);
    for (auto& x : d.B) x = u(rng);
    for (int i = 0; i < c.M; i++)
        for (int j = 0; j < c.N; j++)
            d.C0[(size_t)i * d.ldc + j] = c.beta == 0.0f ? NAN : u(rng);  // beta=0 ignores NaN
    return d;
}

// The epilogue against its definition in gemm.h: C = relu(alpha * op(A) op(B) + bias) (beta 0,
// C's NaN ignored) must be bitwise the same product with beta = 1 over C filled with the bias,
// followed by a ReLU pass (x > 0 ? x : 0), C's padding untouched by both. Returns how many of
// C's elements (padding included) differ; *negative counts the ReLU's zeros (so a caller can
// see that the ReLU had work to do).
template <class Gemm>
long epilogue_differences(Gemm gemm, const Case& c, const Data& d, bool relu, uint32_t seed, long* negative) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> bias(c.N);
    for (float& b : bias) b = u(rng);
    std::vector<float> got = d.C0, want = d.C0;
    gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, d.A.data(), d.lda, d.B.data(), d.ldb, 0.0f, got.data(), d.ldc,
         GemmEpilogue{bias.data(), relu});
    for (int i = 0; i < c.M; i++) std::memcpy(&want[(size_t)i * d.ldc], bias.data(), c.N * sizeof(float));
    gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, d.A.data(), d.lda, d.B.data(), d.ldb, 1.0f, want.data(), d.ldc,
         GemmEpilogue{});
    *negative = 0;
    for (int i = 0; i < c.M && relu; i++)
        for (int j = 0; j < c.N; j++) {
            float& x = want[(size_t)i * d.ldc + j];
            *negative += !(x > 0.0f);
            x = x > 0.0f ? x : 0.0f;
        }
    long differ = 0;
    for (size_t i = 0; i < got.size(); i++) differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
    return differ;
}
