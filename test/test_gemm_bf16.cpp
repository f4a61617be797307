// test/test_gemm_bf16.cpp — sgemm_bf16 (gemm_bf16.h): bf16 inputs, fp32 sums.
//
// 1. round_bf16 on chosen values: exact ones, ties to even, carries into the exponent, the
//    largest float (rounds to infinity), infinities, NaN, subnormals.
// 2. Each path sgemm_bf16 has here (AMX where the CPU has amx_bf16, vdpbf16ps where it has
//    avx512_bf16, and always the sgemm path; bf16_use_kernel picks each in turn) against a
//    double-precision loop over the bf16-ROUNDED operands:
//    all four (trans_a, trans_b) cases, shapes off the 16 x 32 tiles and the 32 x 32 blocks,
//    depths past one 512 block, alpha and beta (beta 0 over NaN in C), leading dimensions past
//    the minimum (C's padding must stay untouched). The error is bounded by fp32 summation:
//    |C - ref| <= 1e-5 * (|alpha| sum_k |a b| + |beta c|) element by element. And the
//    rounding is really there: against the UNROUNDED operands the same bound fails.
// 3. Bitwise the same C with 1 and 2 OpenMP threads (row and column splits).
// 4. The linear layers' epilogue (bias, ReLU; gemm.h) bitwise against a bias-filled C, beta 1
//    and a ReLU pass, on each path: one and two depth blocks, C split by rows and by columns.
// 5. A C over 64 MB (the logits; the AMX and vdpbf16ps paths stream it past the caches) bitwise the same
//    product in row chunks, aligned and not.
// 6. op(B) packed once (sgemm_bf16_pack_b): sgemm_bf16_packed bitwise sgemm_bf16 on the path
//    it was packed for, whatever the thread count, from a parallel region, and after a switch of
//    path; B itself not read after packing. And runs of 1 to 8 rows (a small batch's) bitwise
//    the same rows of a larger product, B packed and not (check_rows_alone).
// 7. Unless told otherwise sgemm_bf16 takes the fastest path (AMX, then vdpbf16ps where the CPU
//    does not list AMX-BF16, then sgemm).
// A CPU with amx_bf16 or avx512_bf16 whose path is not available fails (the detection broke);
// elsewhere that path says SKIP and why.
#include "cpu/gemm_bf16.h"
#include "test/check.h"
#include "test/cpu_flags.h"
#include "test/gemm_case.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

uint32_t bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
}
float from_bits(uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}

// 1. round_bf16.
void check_rounding() {
    struct Rounding { uint32_t in, want; const char* what; };
    const Rounding cases[] = {
        {0x3f800000u, 0x3f800000u, "1.0 is a bf16"},
        {0x3f808000u, 0x3f800000u, "1 + 2^-8 (a tie) rounds to even: 1.0"},
        {0x3f818000u, 0x3f820000u, "1 + 3 * 2^-8 (a tie) rounds to even: 1 + 2^-6"},
        {0x3f808001u, 0x3f810000u, "just past the tie rounds up"},
        {0x3f807fffu, 0x3f800000u, "just below the tie rounds down"},
        {0xbf80c000u, 0xbf810000u, "negative values round by magnitude"},
        {0x3fffffffu, 0x40000000u, "a carry into the exponent: 2 - 2^-23 -> 2.0"},
        {0x7f7fffffu, 0x7f800000u, "the largest float rounds to infinity"},
        {0x7f800000u, 0x7f800000u, "infinity stays"},
        {0xff800000u, 0xff800000u, "-infinity stays"},
        {0x00000001u, 0x00000000u, "the smallest subnormal rounds to 0"},
        {0x00008000u, 0x00000000u, "a subnormal tie rounds to even (0)"},
        {0x00018000u, 0x00020000u, "a subnormal tie rounds to even (up)"},
    };
    for (const Rounding& c : cases) {
        const uint32_t got = bits(round_bf16(from_bits(c.in)));
        check(got == c.want, "round_bf16(0x%08x) = 0x%08x, want 0x%08x: %s", c.in, got, c.want, c.what);
    }
    const float nan = round_bf16(from_bits(0x7f800001u));
    check(std::isnan(nan) && (bits(nan) & 0xffffu) == 0, "round_bf16(a signalling NaN) = 0x%08x: a NaN with 16 low zero bits",
          bits(nan));
}

// The result of sgemm_bf16 on a copy of C0.
std::vector<float> run(const Case& c, const Data& d) {
    std::vector<float> C = d.C0;
    sgemm_bf16(c.ta, c.tb, c.M, c.N, c.K, c.alpha, d.A.data(), d.lda, d.B.data(), d.ldb, c.beta,
               C.data(), d.ldc);
    return C;
}

// Whether C is within fp32 summation's bound of the double product of the operands, rounded to
// bf16 first (rounded) or not; counts the elements out of bounds and C's touched padding.
struct Compare { int out = 0, padding = 0; double worst = 0; };
Compare compare(const Case& c, const Data& d, const std::vector<float>& C, bool rounded) {
    auto r = [&](float x) { return rounded ? (double)round_bf16(x) : (double)x; };
    Compare cmp;
    for (int i = 0; i < c.M; i++)
        for (int j = 0; j < c.N; j++) {
            double s = 0, mag = 0;
            for (int k = 0; k < c.K; k++) {
                const double a = r(c.ta ? d.A[(size_t)k * d.lda + i] : d.A[(size_t)i * d.lda + k]);
                const double b = r(c.tb ? d.B[(size_t)j * d.ldb + k] : d.B[(size_t)k * d.ldb + j]);
                s += a * b;
                mag += std::fabs(a * b);
            }
            const double c0 = c.beta == 0.0f ? 0.0 : d.C0[(size_t)i * d.ldc + j];
            const double want = c.alpha * s + c.beta * c0;
            const double bound = 1e-5 * (std::fabs(c.alpha) * mag + std::fabs(c.beta * c0)) + 1e-30;
            const double err = std::fabs(C[(size_t)i * d.ldc + j] - want);
            cmp.worst = std::max(cmp.worst, err / bound);
            cmp.out += !(err <= bound);
        }
    for (int i = 0; i < c.M; i++)
        for (int j = c.N; j < d.ldc; j++) cmp.padding += bits(C[(size_t)i * d.ldc + j]) != bits(SENTINEL);
    cmp.padding += bits(C.back()) != bits(SENTINEL);
    return cmp;
}

void describe(const Case& c, char* buf, size_t n) {
    std::snprintf(buf, n, "%c%c M=%d N=%d K=%d alpha=%g beta=%g pads=%d,%d,%d", c.ta ? 'T' : 'N',
                  c.tb ? 'T' : 'N', c.M, c.N, c.K, c.alpha, c.beta, c.pad_a, c.pad_b, c.pad_c);
}

// 2. One case on the current path: within the bound of the rounded product, C's padding kept.
void check_case(const Case& c, uint32_t seed, const char* path) {
    Data d = make_data(c, seed);
    std::vector<float> C = run(c, d);
    Compare cmp = compare(c, d, C, true);
    char what[160];
    describe(c, what, sizeof what);
    check(cmp.out == 0 && cmp.padding == 0, "%-10s %-48s out of bound: %d (worst err/bound %.3f), padding changed: %d",
          path, what, cmp.out, cmp.worst, cmp.padding);
}

void check_path(const char* path) {
    uint32_t seed = 1;
    const int sizes[] = {1, 15, 16, 17, 31, 33, 64, 100};
    int v = 0;
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (int M : sizes)
                for (int N : sizes) {
                    const int K = sizes[(v * 3 + 1) % 8] + (v % 5 == 0 ? 512 : 0);   // some past one block
                    const float alpha = v % 3 == 0 ? 1.0f : 0.75f, beta = v % 4 == 0 ? 0.0f : v % 4 == 1 ? 1.0f : 0.5f;
                    if (v++ % 4 != 0 && M > 16 && N > 16) continue;   // a quarter of the larger pairs
                    check_case({ta, tb, M, N, K, alpha, beta, v % 3, (v + 1) % 3, v % 2 * 3}, seed++, path);
                }
    // The model's products: Y = X W^T, dX = dY W, dW = dY^T X (tokens 300, d 256, d_ff 1024).
    check_case({false, true, 300, 1024, 256, 1.0f, 0.0f, 0, 0, 0}, seed++, path);
    check_case({false, false, 300, 256, 1024, 1.0f, 1.0f, 0, 0, 0}, seed++, path);
    check_case({true, false, 1024, 256, 300, 1.0f, 1.0f, 0, 0, 0}, seed++, path);
    check_case({true, false, 64, 80, 1300, 1.0f, 1.0f, 0, 0, 0}, seed++, path);   // three depth blocks
    check_case({false, true, 20, 30, 0, 1.0f, 0.5f, 1, 1, 2}, seed++, path);     // K = 0: C = beta C
    check_case({false, false, 20, 30, 40, 0.0f, 0.5f, 0, 0, 1}, seed++, path);   // alpha = 0
}

// The rounding is there: the product of the unrounded operands is out of the bound.
void check_rounds(const char* path) {
    const Case c{false, true, 40, 50, 256, 1.0f, 0.0f, 0, 0, 0};
    Data d = make_data(c, 99);
    std::vector<float> C = run(c, d);
    Compare exact = compare(c, d, C, false);
    check(exact.out > c.M * c.N / 2, "%-10s the operands are rounded: against the unrounded product %d of %d "
          "elements are out of the fp32 bound (worst err/bound %.1f)", path, exact.out, c.M * c.N, exact.worst);
}

#ifdef _OPENMP
// Calls from inside a parallel region (each on its thread, serial) give the calls made outside.
void check_inside_parallel(const char* path) {
    const Case cases[] = {{false, true, 300, 200, 256, 1.0f, 0.0f, 0, 0, 0}, {true, false, 64, 700, 300, 1.0f, 1.0f, 0, 0, 0}};
    std::vector<Data> data;
    std::vector<std::vector<float>> outside, inside(2);
    for (int i = 0; i < 2; i++) {
        data.push_back(make_data(cases[i], 20 + i));
        outside.push_back(run(cases[i], data[i]));
    }
    int in_parallel = 0;
#pragma omp parallel for num_threads(2) reduction(+ : in_parallel)
    for (int i = 0; i < 2; i++) {
        in_parallel += omp_in_parallel() ? 1 : 0;
        inside[i] = run(cases[i], data[i]);
    }
    const bool same = std::memcmp(inside[0].data(), outside[0].data(), inside[0].size() * 4) == 0 &&
                      std::memcmp(inside[1].data(), outside[1].data(), inside[1].size() * 4) == 0;
    check(same, "%-10s 2 calls inside a parallel region (%d of 2 inside an active one) bitwise the calls outside",
          path, in_parallel);
}

// 3. Bitwise the same C with 1 and 2 threads.
void check_threads(const Case& c, uint32_t seed, const char* path) {
    Data d = make_data(c, seed);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    std::vector<float> one = run(c, d);
    omp_set_num_threads(2);
    std::vector<float> two = run(c, d);
    omp_set_num_threads(saved);
    char what[160];
    describe(c, what, sizeof what);
    check(std::memcmp(one.data(), two.data(), one.size() * 4) == 0, "%-10s %-48s 1 and 2 threads bitwise equal", path, what);
}
#endif

// 4. The epilogue on one case: bitwise its definition (gemm_case.h).
void check_epilogue_case(const Case& c, bool relu, uint32_t seed, const char* path) {
    Data d = make_data(c, seed);
    long negative = 0;
    const long differ = epilogue_differences(sgemm_bf16, c, d, relu, seed, &negative);
    char what[160];
    describe(c, what, sizeof what);
    check(differ == 0 && (!relu || negative > 0),
          "%-10s %-48s %s: bitwise bias-filled C, beta 1%s (%ld of %zu elements differ; %ld set to 0)", path, what,
          relu ? "bias+relu" : "bias", relu ? ", ReLU pass" : "", differ, d.C0.size(), negative);
}

void check_epilogue(const char* path) {
    uint32_t seed = 500;
    const int shapes[][3] = {{17, 33, 40}, {300, 1024, 256}, {64, 80, 1300}, {40, 700, 60}};
    for (auto& s : shapes)
        for (bool tb : {false, true})
            for (bool relu : {false, true}) check_epilogue_case({false, tb, s[0], s[1], s[2], 1.0f, 0.0f, 1, 2, 3}, relu, seed++, path);
}

// 5. A C of more than 64 MB written once (the classifier's logits), which the AMX and vdpbf16ps paths store
//    past the caches: bitwise the same C as the product cut into row chunks of 256 (C under that
//    size), on a 64-byte-aligned C and on one 16 bytes off it, and sampled rows within the bound
//    of the rounded product.
void check_streaming(const char* path) {
    const int M = 4100, N = 4112, K = 40;   // NT, as the logits X E^T; C 67.4 MB
    std::mt19937 rng(900);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> A((size_t)M * K), B((size_t)N * K);
    for (float& x : A) x = u(rng);
    for (float& x : B) x = u(rng);
    std::vector<float> whole_buf((size_t)M * N + 32), chunks_buf((size_t)M * N + 32), packed_buf((size_t)M * N + 32);
    const Bf16PackedB packed_b = sgemm_bf16_pack_b(true, N, K, B.data(), K);
    for (int offset : {0, 4}) {
        auto at64 = [&](std::vector<float>& v) {
            const uintptr_t p = reinterpret_cast<uintptr_t>(v.data());
            return v.data() + ((64 - p % 64) % 64) / sizeof(float) + offset;
        };
        float* whole = at64(whole_buf);
        float* chunks = at64(chunks_buf);
        float* packed = at64(packed_buf);
        sgemm_bf16(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, whole, N);
        sgemm_bf16_packed(false, M, 1.0f, A.data(), K, packed_b, 0.0f, packed, N);
        for (int r0 = 0; r0 < M; r0 += 256)
            sgemm_bf16(false, true, std::min(256, M - r0), N, K, 1.0f, A.data() + (size_t)r0 * K, K, B.data(), K, 0.0f,
                       chunks + (size_t)r0 * N, N);
        long differ = 0, differ_packed = 0;
        for (size_t i = 0; i < (size_t)M * N; i++) differ += bits(whole[i]) != bits(chunks[i]);
        for (size_t i = 0; i < (size_t)M * N; i++) differ_packed += bits(whole[i]) != bits(packed[i]);
        int out = 0;
        for (int i : {0, 1, 17, 2047, M - 1})
            for (int j = 0; j < N; j++) {
                double s = 0, mag = 0;
                for (int k = 0; k < K; k++) {
                    const double p = (double)round_bf16(A[(size_t)i * K + k]) * round_bf16(B[(size_t)j * K + k]);
                    s += p;
                    mag += std::fabs(p);
                }
                out += !(std::fabs(whole[(size_t)i * N + j] - s) <= 1e-5 * mag + 1e-30);
            }
        check(differ == 0 && differ_packed == 0 && out == 0,
              "%-10s NT M=%d N=%d K=%d, C %.1f MB %s: bitwise the product in chunks of 256 rows (%ld differ) and "
              "with B packed once (%ld differ); 5 rows within the bound (%d out)", path, M, N, K, (double)M * N * 4 / 1e6,
              offset ? "16 bytes off a 64-byte line" : "64-byte aligned", differ, differ_packed, out);
    }
}

// 6. op(B) packed once (sgemm_bf16_pack_b, from a copy of B that is then overwritten: the packed
//    B owns what it reads), then sgemm_bf16_packed with all threads, one, and from inside a
//    parallel region: C, padding included, bitwise sgemm_bf16's on the same path, and within the
//    bound of the rounded product. After a switch to the sgemm path the packed B keeps its own.
void check_packed_case(const Case& c, bool with_bias, bool relu, uint32_t seed, const char* path) {
    Data d = make_data(c, seed);
    std::vector<float> bias(c.N);
    for (int j = 0; j < c.N; j++) bias[j] = 0.01f * (j % 37) - 0.2f;
    const GemmEpilogue e{with_bias ? bias.data() : nullptr, relu};
    std::vector<float> want = d.C0, all = d.C0, one = d.C0, inner = d.C0, switched = d.C0;
    sgemm_bf16(c.ta, c.tb, c.M, c.N, c.K, c.alpha, d.A.data(), d.lda, d.B.data(), d.ldb, c.beta, want.data(), d.ldc, e);
    std::vector<float> B = d.B;
    const Bf16PackedB b = sgemm_bf16_pack_b(c.tb, c.N, c.K, B.data(), d.ldb);
    std::fill(B.begin(), B.end(), NAN);
    sgemm_bf16_packed(c.ta, c.M, c.alpha, d.A.data(), d.lda, b, c.beta, all.data(), d.ldc, e);
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    sgemm_bf16_packed(c.ta, c.M, c.alpha, d.A.data(), d.lda, b, c.beta, one.data(), d.ldc, e);
    omp_set_num_threads(threads);
#pragma omp parallel num_threads(2)
#pragma omp single
#endif
    sgemm_bf16_packed(c.ta, c.M, c.alpha, d.A.data(), d.lda, b, c.beta, inner.data(), d.ldc, e);
#ifndef _OPENMP
    one = all;
#endif
    bf16_use_kernel("sgemm");
    sgemm_bf16_packed(c.ta, c.M, c.alpha, d.A.data(), d.lda, b, c.beta, switched.data(), d.ldc, e);
    bf16_use_kernel(path);
    auto differ = [&](const std::vector<float>& x) {
        long n = 0;
        for (size_t i = 0; i < x.size(); i++) n += bits(x[i]) != bits(want[i]);
        return n;
    };
    const long d_all = differ(all), d_one = differ(one), d_inner = differ(inner), d_switched = differ(switched);
    char what[160];
    describe(c, what, sizeof what);
    check(d_all == 0 && d_one == 0 && d_inner == 0 && d_switched == 0 && b.kernel == path,
          "%-10s %-48s packed B%s: bitwise sgemm_bf16's C, padding included (%ld / %ld / %ld / %ld of %zu differ: all "
          "threads / one / in a parallel region / after a switch to sgemm; packed for %s)", path, what,
          with_bias ? (relu ? ", bias+relu" : ", bias") : relu ? ", relu" : "", d_all, d_one, d_inner, d_switched,
          want.size(), b.kernel.c_str());
    if (!with_bias && !relu) {
        const Compare cmp = compare(c, d, all, true);
        check(cmp.out == 0 && cmp.padding == 0, "%-10s %-48s packed B: out of the rounded product's bound: %d (worst "
              "err/bound %.3f)", path, what, cmp.out, cmp.worst);
    }
}

void check_packed(const char* path) {
    uint32_t seed = 700;
    // small, one block, three depth blocks (the last partial), N past the vdpbf16ps panel (2,048)
    // split by columns, a decoder step (M 64 < N: columns) and its classifier, N off 16 and 32
    const int shapes[][3] = {{25, 25, 32}, {150, 90, 270}, {40, 70, 1100}, {20, 4200, 20}, {64, 1024, 256}, {96, 2100, 520}, {33, 47, 49}};
    for (auto& s : shapes)
        for (bool ta : {false, true})
            for (bool tb : {false, true}) check_packed_case({ta, tb, s[0], s[1], s[2], 1.0f, 0.0f, 2, 3, 1}, false, false, seed++, path);
    check_packed_case({false, true, 150, 90, 270, -0.5f, 1.0f, 0, 0, 0}, false, false, seed++, path);   // alpha, beta
    check_packed_case({true, false, 40, 70, 1100, 2.0f, 0.5f, 1, 0, 2}, false, false, seed++, path);
    check_packed_case({false, true, 20, 30, 0, 1.0f, 0.5f, 1, 1, 2}, false, false, seed++, path);       // K = 0
    check_packed_case({false, true, 20, 30, 40, 0.0f, 0.5f, 0, 0, 1}, false, false, seed++, path);      // alpha = 0
    for (auto& s : shapes)   // the linear layers' epilogue
        for (bool relu : {false, true}) check_packed_case({false, true, s[0], s[1], s[2], 1.0f, 0.0f, 0, 0, 0}, true, relu, seed++, path);
}

// 8. A small batch's few rows (one sentence is one row in greedy decoding, four at beam 4) alone:
//    each run of g rows of a 13 x 1,100 x 600 product (two depth blocks), computed by itself, B
//    packed once and not, bitwise the same rows of the whole product: the sums do not depend on
//    how many rows share the kernel (vdpbf16ps's blocks of 1, 2, 4 and 8 rows, AMX's tiles), nor
//    on the threads (a row against a packed B splits between them, unpacked it does not).
void check_rows_alone(const char* path) {
    const int M = 13, N = 1100, K = 600;
    std::mt19937 rng(1300);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> A((size_t)M * K), B((size_t)N * K), whole((size_t)M * N);
    for (float& x : A) x = u(rng);
    for (float& x : B) x = u(rng);
    const Bf16PackedB packed = sgemm_bf16_pack_b(true, N, K, B.data(), K);
    sgemm_bf16(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, whole.data(), N);
    for (int g : {1, 2, 3, 5, 8})
        for (bool use_packed : {false, true}) {
            std::vector<float> runs((size_t)M * N, NAN);
            for (int i = 0; i < M; i += g) {
                const int rows = std::min(g, M - i);
                if (use_packed) sgemm_bf16_packed(false, rows, 1.0f, A.data() + (size_t)i * K, K, packed, 0.0f, runs.data() + (size_t)i * N, N);
                else sgemm_bf16(false, true, rows, N, K, 1.0f, A.data() + (size_t)i * K, K, B.data(), K, 0.0f, runs.data() + (size_t)i * N, N);
            }
            long differ = 0;
            for (size_t i = 0; i < runs.size(); i++) differ += bits(runs[i]) != bits(whole[i]);
            check(differ == 0, "%-10s rows in runs of %d%s: bitwise the rows of the whole %d x %d x %d product (%ld of %zu differ)",
                  path, g, use_packed ? ", B packed" : "", M, N, K, differ, runs.size());
        }
}

void check_all(const char* path) {
    check_path(path);
    check_packed(path);
    check_rows_alone(path);
    check_epilogue(path);
    check_rounds(path);
    check_streaming(path);
#ifdef _OPENMP
    check_threads({false, true, 300, 200, 256, 1.0f, 0.0f, 0, 0, 0}, 7, path);   // rows split
    check_threads({true, false, 64, 700, 300, 1.0f, 1.0f, 0, 0, 0}, 8, path);    // columns split
    check_inside_parallel(path);
#endif
}

// The path `name` ("amx" or "avx512bf16"): checked where this build and CPU have it, else SKIP
// and why. A CPU with the flags whose path is not available fails (the detection broke).
void check_kernel(const char* name, bool cpu_flags, const char* flags, bool turned_off) {
    if (!bf16_kernel_built(name)) {
        check_skip("sgemm_bf16's %s path: not in this build (it needs AVX-512 and GCC 10 / clang 9 on x86-64%s)", name,
                   std::strcmp(name, "amx") == 0 ? ", for AMX GCC 11 / clang 12 on Linux" : "");
    } else if (!cpu_flags) {
        check_skip("sgemm_bf16's %s path: this CPU has no %s (/proc/cpuinfo)", name, flags);
    } else if (turned_off) {
        check_skip("sgemm_bf16's %s path: TRANSFORMER_AMX=0 turns it off in this process", name);
    } else {
        check(bf16_kernel_available(name) && bf16_use_kernel(name) && std::string(bf16_kernel()) == name,
              "the CPU has %s: sgemm_bf16 can take the %s path (it takes %s)", flags, name, bf16_kernel());
        if (std::string(bf16_kernel()) == name) check_all(name);
    }
}

}  // namespace

int main() {
    check_rounding();
    const char* env = std::getenv("TRANSFORMER_AMX");
    const bool amx_off = env && std::strcmp(env, "0") == 0;
    const bool cpu_amx = cpu_has("amx_bf16") && cpu_has("avx512_bf16"), cpu_dp = cpu_has("avx512_bf16");
    // Unless told otherwise, sgemm_bf16 takes the fastest path this build and CPU have.
    // (vdpbf16ps not on a CPU that lists AMX-BF16: slower there than its FMAs)
    const char* fastest = bf16_kernel_built("amx") && cpu_amx && !amx_off                      ? "amx"
                          : bf16_kernel_built("avx512bf16") && cpu_dp && !cpu_has("amx_bf16") ? "avx512bf16"
                                                                                             : "sgemm";
    const char* env_kernel = std::getenv("TRANSFORMER_BF16_KERNEL");
    if (env_kernel) fastest = env_kernel;   // the variable's path instead
    check(std::string(bf16_kernel()) == fastest, "sgemm_bf16 takes the %s path by itself (want %s: %s)", bf16_kernel(),
          fastest, env_kernel ? "TRANSFORMER_BF16_KERNEL's" : amx_off ? "the fastest of this build and CPU, TRANSFORMER_AMX=0"
                                                                      : "the fastest of this build and CPU");
    const std::string reason = bf16_kernel_reason();
    check(env_kernel ? reason == std::string("TRANSFORMER_BF16_KERNEL=") + env_kernel
          : std::strcmp(fastest, "amx") == 0        ? reason == "AMX-BF16"
          : std::strcmp(fastest, "avx512bf16") == 0 ? reason == "AVX512-BF16"
          : amx_off && cpu_amx                      ? reason == "TRANSFORMER_AMX=0"
                                                    : reason.find("AVX512-BF16") != std::string::npos ||
                                                          reason.find("AMX-BF16") != std::string::npos ||
                                                          reason.find("this build") != std::string::npos,
          "why the %s path: \"%s\"", bf16_kernel(), reason.c_str());
    check_kernel("amx", cpu_amx, "amx_bf16 (with avx512_bf16)", amx_off);
    check_kernel("avx512bf16", cpu_dp, "avx512_bf16", false);
    check(bf16_use_kernel("sgemm") && std::string(bf16_kernel()) == "sgemm", "sgemm_bf16 can take the sgemm path (it takes %s)",
          bf16_kernel());
    check_all("sgemm");
    check(!bf16_use_kernel("no-such-path") && std::string(bf16_kernel()) == "sgemm",
          "an unknown path is refused and the choice kept (%s)", bf16_kernel());
    bf16_use_kernel("");
    check(std::string(bf16_kernel()) == fastest, "back to the fastest path: %s", bf16_kernel());
    return check_summary("gemm_bf16");
}
