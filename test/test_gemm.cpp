// test/test_gemm.cpp — correctness of sgemm() (gemm.h) against a naive double-precision loop.
//
// Covers all four (trans_a, trans_b) combinations on: shapes that are not multiples of the
// 12 x 32 micro-tile or of the MC/KC/NC cache blocks, K = 0, alpha != 1, beta in {0, 1, 0.5}
// (beta = 0 with NaN already in C), leading dimensions larger than the minimum (the padding
// of C must stay untouched), the small-matrix path (attention-like strided views), random
// shapes, calls from inside an OpenMP parallel region, and bitwise determinism; and the linear
// layers' epilogue (bias, ReLU) bitwise against a bias-filled C, beta 1 and a ReLU pass.
#include "cpu/gemm.h"
#include "test/check.h"
#include "test/gemm_case.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

// Naive reference in double: C = alpha * op(A) op(B) + beta * C (padding left as is).
std::vector<float> reference(const Case& c, const Data& d) {
    std::vector<float> C = d.C0;
    for (int i = 0; i < c.M; i++)
        for (int j = 0; j < c.N; j++) {
            double s = 0;
            for (int k = 0; k < c.K; k++) {
                double a = c.ta ? d.A[(size_t)k * d.lda + i] : d.A[(size_t)i * d.lda + k];
                double b = c.tb ? d.B[(size_t)j * d.ldb + k] : d.B[(size_t)k * d.ldb + j];
                s += a * b;
            }
            float& out = C[(size_t)i * d.ldc + j];
            out = (float)(c.alpha * s + (c.beta == 0.0f ? 0.0 : (double)c.beta * out));
        }
    return C;
}

std::vector<float> run(const Case& c, const Data& d) {
    std::vector<float> C = d.C0;
    sgemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, d.A.data(), d.lda, d.B.data(), d.ldb, c.beta,
          C.data(), d.ldc);
    return C;
}

// Whether everything outside the M x N block of C (row padding, the extra last element)
// still holds the sentinel.
bool padding_intact(const Case& c, const Data& d, const std::vector<float>& C) {
    for (size_t idx = 0; idx < C.size(); idx++) {
        bool inside = idx < (size_t)c.M * d.ldc && (int)(idx % d.ldc) < c.N;
        if (!inside && C[idx] != SENTINEL) return false;
    }
    return true;
}

// The M x N block of C, packed (the comparison must not see the padding sentinels).
std::vector<float> block(const Case& c, const Data& d, const std::vector<float>& C) {
    std::vector<float> out((size_t)c.M * c.N);
    for (int i = 0; i < c.M; i++)
        for (int j = 0; j < c.N; j++) out[(size_t)i * c.N + j] = C[(size_t)i * d.ldc + j];
    return out;
}

// Float accumulation error grows ~sqrt(K); the check normalises by max |reference|.
double tolerance(const Case& c) { return 2e-6 * std::sqrt((double)c.K + 1) + 1e-6; }

void describe(const Case& c, const char* tag, char* buf, size_t n) {
    std::snprintf(buf, n, "%s %c%c M=%d N=%d K=%d a=%g b=%g pad=%d/%d/%d", tag, c.ta ? 'T' : 'N',
                  c.tb ? 'T' : 'N', c.M, c.N, c.K, c.alpha, c.beta, c.pad_a, c.pad_b, c.pad_c);
}

// One case outside any parallel region: value, padding, and run-to-run bitwise equality.
void check_case(const Case& c, uint32_t seed) {
    Data d = make_data(c, seed);
    std::vector<float> want = reference(c, d), got = run(c, d), again = run(c, d);
    char what[160];
    describe(c, "", what, sizeof what);
    bool ok_pad = padding_intact(c, d, got);
    bool same = std::memcmp(got.data(), again.data(), got.size() * sizeof(float)) == 0;
    if (!ok_pad || !same)
        check(false, "%s padding_intact=%d deterministic=%d", what, ok_pad, same);
    else
        check_close(what, block(c, d, got).data(), block(c, d, want).data(),
                    (size_t)c.M * c.N, tolerance(c));
}

// Several cases run concurrently, one per thread of a parallel region (sgemm must then
// stay single-threaded); each result must match the reference and be bitwise equal to the
// same product computed outside the region with all threads (our sgemm computes every C
// element in the same order whatever the thread count; not required with -DUSE_OPENBLAS).
void check_inside_parallel(const std::vector<Case>& cases) {
    int n = (int)cases.size();
    std::vector<Data> data;
    std::vector<std::vector<float>> inside(n), outside(n);
    for (int i = 0; i < n; i++) data.push_back(make_data(cases[i], 1000 + i));
    for (int i = 0; i < n; i++) outside[i] = run(cases[i], data[i]);
    int in_parallel = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : in_parallel)
#endif
    for (int i = 0; i < n; i++) {
#ifdef _OPENMP
        in_parallel += omp_in_parallel() ? 1 : 0;
#endif
        inside[i] = run(cases[i], data[i]);
    }
    for (int i = 0; i < n; i++) {
        const Case& c = cases[i];
        char what[160];
        describe(c, "omp-inner", what, sizeof what);
        std::vector<float> want = reference(c, data[i]);
        bool same = std::memcmp(inside[i].data(), outside[i].data(),
                                inside[i].size() * sizeof(float)) == 0;
#ifdef USE_OPENBLAS
        same = true;  // OpenBLAS gives no bitwise guarantee across thread counts
#endif
        bool ok_pad = padding_intact(c, data[i], inside[i]);
        if (!same || !ok_pad)
            check(false, "%s same_as_outside=%d padding_intact=%d", what, same, ok_pad);
        else
            check_close(what, block(c, data[i], inside[i]).data(), block(c, data[i], want).data(),
                        (size_t)c.M * c.N, tolerance(c));
    }
    if (omp_get_max_threads() < 2)
        check_skip("inside-parallel: one OpenMP thread, so no call ran inside an active region");
    else
        check(in_parallel == n, "inside-parallel: %d of %d calls ran inside an active region", in_parallel, n);
}

// The epilogue (bias, and ReLU or not) on one case: bitwise its definition (gemm_case.h).
void check_epilogue_case(const Case& c, bool relu, uint32_t seed) {
    Data d = make_data(c, seed);
    long negative = 0;
    const long differ = epilogue_differences(sgemm, c, d, relu, seed, &negative);
    char what[160];
    describe(c, relu ? "bias+relu" : "bias", what, sizeof what);
    check(differ == 0 && (!relu || c.K == 0 || negative > 0),
          "%s: bitwise bias-filled C, beta 1%s (%ld of %zu elements differ; %ld set to 0)", what,
          relu ? ", ReLU pass" : "", differ, d.C0.size(), negative);
}

// op(B) packed once (sgemm_pack_b), then sgemm_packed twice, one thread and all of them (and
// from inside a parallel region: one thread): C, padding included, bitwise sgemm's on the same
// data, and close to the float64 reference.
void check_packed_case(const Case& c, bool with_bias, bool relu, uint32_t seed) {
    Data d = make_data(c, seed);
    std::vector<float> bias(c.N);
    for (int j = 0; j < c.N; j++) bias[j] = 0.01f * (j % 37) - 0.2f;
    const GemmEpilogue e{with_bias ? bias.data() : nullptr, relu};
    std::vector<float> want = d.C0, all = d.C0, one = d.C0, inner = d.C0;
    sgemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, d.A.data(), d.lda, d.B.data(), d.ldb, c.beta, want.data(), d.ldc, e);
    const SgemmPackedB b = sgemm_pack_b(c.tb, c.N, c.K, d.B.data(), d.ldb);
    sgemm_packed(c.ta, c.M, c.alpha, d.A.data(), d.lda, b, c.beta, all.data(), d.ldc, e);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    sgemm_packed(c.ta, c.M, c.alpha, d.A.data(), d.lda, b, c.beta, one.data(), d.ldc, e);
    omp_set_num_threads(threads);
#ifdef _OPENMP
#pragma omp parallel num_threads(2)
#pragma omp single
#endif
    sgemm_packed(c.ta, c.M, c.alpha, d.A.data(), d.lda, b, c.beta, inner.data(), d.ldc, e);
    auto differ = [&](const std::vector<float>& x) {
        long n = 0;
        for (size_t i = 0; i < x.size(); i++) n += std::memcmp(&x[i], &want[i], sizeof(float)) != 0;
        return n;
    };
    const long d_all = differ(all), d_one = differ(one), d_inner = differ(inner);
    char what[160];
    describe(c, with_bias ? (relu ? "packed B, bias+relu" : "packed B, bias") : (relu ? "packed B, relu" : "packed B"), what, sizeof what);
#ifdef USE_OPENBLAS
    check(d_all == 0, "%s: the same as sgemm (%ld of %zu differ)", what, d_all, want.size());
#else
    check(d_all == 0 && d_one == 0 && d_inner == 0,
          "%s: bitwise sgemm's C, padding included (%ld / %ld / %ld of %zu differ: all threads / one / in a parallel region)",
          what, d_all, d_one, d_inner, want.size());
#endif
    if (!with_bias && !relu) check_close((std::string(what) + " vs float64").c_str(), block(c, d, all).data(),
                             block(c, d, reference(c, d)).data(), (size_t)c.M * c.N, tolerance(c));
}

}  // namespace

int main() {
    const bool T[2] = {false, true};
    uint32_t seed = 1;

    // Edge shapes: around the 12 x 32 micro-tile, tiny, skinny, deep, on both sides of the
    // small-path threshold (M*N*K = 2^20: the first three rows are small), across the
    // MC = 96 / KC = 1024 / NC = 2048 blocks, and (with several threads) both ways of
    // splitting C: by rows and, for the last two, by columns.
    const int shapes[][3] = {
        {1, 1, 1},       {2, 3, 4},       {7, 5, 3},       {11, 31, 15},    {12, 32, 16},
        {13, 33, 17},    {33, 17, 9},     {1, 1000, 7},    {1000, 1, 7},    {13, 37, 1000},
        {25, 25, 32},    {25, 32, 25},    {100, 100, 100}, {1000, 25, 25},  {8, 30, 4000},
        {145, 65, 257},  {300, 70, 520},  {20, 4200, 20},  {161, 97, 513},  {131, 97, 100},
        {61, 45, 2100},  {13, 2100, 50},  {12, 512, 400},  {5, 700, 300}};
    for (auto& s : shapes)
        for (bool ta : T)
            for (bool tb : T) check_case({ta, tb, s[0], s[1], s[2], 1.0f, 0.0f, 0, 0, 0}, seed++);

    // alpha, beta and padded leading dimensions, on a small-path shape and two blocked-path
    // shapes (the second with two depth blocks: beta applies to the first one only).
    const float alphas[] = {1.0f, -0.5f, 2.0f};
    const float betas[] = {0.0f, 1.0f, 0.5f};
    const int mid[][3] = {{9, 19, 23}, {150, 90, 270}, {40, 70, 1100}};
    for (auto& s : mid)
        for (bool ta : T)
            for (bool tb : T)
                for (float al : alphas)
                    for (float be : betas)
                        check_case({ta, tb, s[0], s[1], s[2], al, be, 3, 5, 7}, seed++);

    // K = 0: C = beta * C (beta = 0 clears NaN).
    for (float be : betas)
        for (bool ta : T)
            for (bool tb : T) check_case({ta, tb, 17, 40, 0, 1.5f, be, 1, 2, 3}, seed++);

    // Attention-like: strided views into wider rows (e.g. one head of a (T, 3*d) buffer).
    for (bool ta : T)
        for (bool tb : T) {
            check_case({ta, tb, 25, 25, 32, 0.125f, 0.0f, 1504, 1504, 7}, seed++);
            check_case({ta, tb, 25, 32, 25, 1.0f, 1.0f, 480, 1504, 480}, seed++);
        }

    // Random shapes, transposes, scalars and paddings.
    std::mt19937 rng(42);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    for (int t = 0; t < 40; t++) {
        Case c{pick(0, 1) == 1, pick(0, 1) == 1, pick(1, 260), pick(1, 260), pick(1, 300),
               alphas[pick(0, 2)], betas[pick(0, 2)], pick(0, 9), pick(0, 9), pick(0, 9)};
        check_case(c, seed++);
    }

    // From inside an OpenMP parallel region (small and blocked paths).
    std::vector<Case> inner;
    for (bool ta : T)
        for (bool tb : T) {
            inner.push_back({ta, tb, 25, 25, 32, 0.125f, 0.0f, 40, 40, 3});
            inner.push_back({ta, tb, 25, 32, 25, 1.0f, 0.5f, 8, 3, 1});
            inner.push_back({ta, tb, 130, 70, 300, -1.0f, 1.0f, 2, 0, 5});
            inner.push_back({ta, tb, 12, 512, 400, 1.0f, 0.0f, 1, 1, 1});
        }
    check_inside_parallel(inner);

    // The epilogue: the small path, the blocked path, two depth blocks (K > KC: the bias goes
    // with the first, the ReLU after the last), C split by rows and by columns (the bias
    // follows the column band), the linear layers' NT shapes, K = 0 (C = relu(bias)).
    const int epi_shapes[][3] = {{25, 25, 32}, {7, 45, 9}, {150, 90, 270}, {40, 70, 1100},
                                 {20, 4200, 20}, {300, 1024, 256}, {13, 2100, 50}, {17, 40, 0}};
    for (auto& s : epi_shapes)
        for (bool ta : T)
            for (bool tb : T)
                for (bool relu : T) check_epilogue_case({ta, tb, s[0], s[1], s[2], 1.0f, 0.0f, 2, 1, 3}, relu, seed++);
    check_epilogue_case({false, true, 150, 90, 270, -0.5f, 0.0f, 0, 0, 0}, true, seed++);   // alpha != 1

    // op(B) packed once (decoding's weights): the small path (B read in place), the blocked one,
    // two depth blocks, N past NC = 2048 (several panels; C split by columns), N not a multiple
    // of the 32-wide slivers, the decoder's shapes (few rows against a weight, the logits). Up
    // to 16 rows and one depth block read the packed slivers in place (gemm_packed_rows): on one
    // thread (1 x 256 x 256, 3 x 45 x 9) or the slivers split between threads (one row against
    // the fused projections, 4 rows of beam 4, 16 rows, K = KC = 1024); 17 rows and K past KC
    // (two depth blocks) stay on the blocked path.
    const int packed_shapes[][3] = {{25, 25, 32}, {150, 90, 270}, {40, 70, 1100}, {20, 4200, 20},
                                    {13, 2100, 50}, {300, 1000, 256}, {7, 8000, 256}, {96, 1024, 257},
                                    {1, 256, 256}, {3, 45, 9}, {1, 768, 256}, {4, 1024, 256},
                                    {16, 100, 1024}, {17, 256, 256}, {5, 100, 1100}};
    for (auto& s : packed_shapes)
        for (bool ta : T)
            for (bool tb : T) check_packed_case({ta, tb, s[0], s[1], s[2], 1.0f, 0.0f, 2, 3, 1}, false, false, seed++);
    check_packed_case({false, true, 150, 90, 270, -0.5f, 1.0f, 0, 0, 0}, false, false, seed++);   // alpha, beta
    check_packed_case({false, true, 40, 70, 1100, 2.0f, 0.5f, 1, 0, 2}, false, false, seed++);
    check_packed_case({false, true, 4, 90, 270, -0.5f, 1.0f, 0, 0, 0}, false, false, seed++);
    for (auto& s : packed_shapes)   // the linear layers' epilogue
        for (bool relu : T) check_packed_case({false, true, s[0], s[1], s[2], 1.0f, 0.0f, 0, 0, 0}, true, relu, seed++);

    // A small batch's few rows alone (decoding's: one sentence is one row greedy, four at beam
    // 4): each run of g rows of a 40 x 1,100 x 256 product against a packed B, computed by
    // itself (16 rows or fewer read the packed slivers, 17 and more take the blocked path),
    // bitwise the same rows of the whole product (blocked).
#ifdef USE_OPENBLAS
    check_skip("rows in runs: OpenBLAS does not promise the same bits for another row count");
#else
    {
        const int M = 40, N = 1100, K = 256;
        Data d = make_data({false, true, M, N, K, 1.0f, 0.0f, 0, 0, 0}, seed++);
        const SgemmPackedB b = sgemm_pack_b(true, N, K, d.B.data(), d.ldb);
        std::vector<float> whole((size_t)M * N);
        sgemm_packed(false, M, 1.0f, d.A.data(), d.lda, b, 0.0f, whole.data(), N);
        for (int g : {1, 3, 4, 16, 17}) {
            std::vector<float> runs((size_t)M * N, NAN);
            for (int i = 0; i < M; i += g)
                sgemm_packed(false, std::min(g, M - i), 1.0f, d.A.data() + (size_t)i * d.lda, d.lda, b, 0.0f,
                             runs.data() + (size_t)i * N, N);
            long differ = 0;
            for (size_t i = 0; i < runs.size(); i++) differ += std::memcmp(&runs[i], &whole[i], sizeof(float)) != 0;
            check(differ == 0, "packed B, rows in runs of %d: bitwise the rows of the whole %d x %d x %d product (%ld of %zu differ)",
                  g, M, N, K, differ, runs.size());
        }
    }
#endif

    return check_summary("gemm");
}
