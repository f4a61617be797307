// test/test_gemm_int8.cpp — correctness of the int8 linear layer (gemm_int8.h).
//
// 1. Exact: linear_int8 against a plain scalar reference written here from the header's
//    definition (per-row quantization of x and W, an integer product, then
//    y = fma(float(acc), sx * scale, bias) and ReLU). The comparison is BITWISE: the integer
//    product is exact, and the three roundings after it are the same IEEE operations in both
//    (float(acc), one float product, one fused multiply-add). The reference calls std::fma
//    explicitly, so whether g++ contracts a*b+c into an fma elsewhere cannot change it.
//    Shapes around the 6 x 64 micro-tile (M = 1, 5, 13, 100; N = 1, 17, 100, 768, 8000;
//    K = 4, 7, 256, 1000, 1024), with and without bias and ReLU, ldy > N (the padding of y
//    must stay untouched), zero and tiny rows of x and of W, K = 0.
// 2. Accuracy: the int8 result against the fp32 product of the unquantized operands (in
//    double): max |error| / max |y| below 2e-2, printed.
// 3. Determinism: bitwise the same y with 1 and 2 OpenMP threads (both ways of splitting the
//    output), and for calls made from inside an OpenMP parallel region.
// 4. AMX (where the CPU has amx_int8 and the build the VNNI kernel): the calls take the AMX
//    kernel and give the reference's y bitwise on the shapes around its 32 x 32 blocks (M from
//    16, K a multiple of 64), with 1 and 2 threads; with AMX turned off the same calls take the
//    VNNI kernel. A CPU with amx_int8 whose calls do not take AMX fails (the detection broke);
//    elsewhere the section says SKIP and why.
#include "cpu/gemm_int8.h"
#include "test/check.h"
#include "test/cpu_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

constexpr float SENTINEL = -12345.0f;

// One linear layer and its input: x [M, K], W [N, K], bias (N) or empty.
struct Case {
    int M, N, K;
    bool bias, relu;
    int pad_y;  // ldy = N + pad_y
};

struct Data {
    std::vector<float> x, W, bias;
};

// Random operands; every 7th row of x and every 5th row of W (when there are several) are set
// to zero, and one row of each to tiny values (below the 1e-30 zero threshold).
Data make_data(const Case& c, uint32_t seed, bool zero_rows) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    Data d;
    d.x.resize((size_t)c.M * c.K);
    d.W.resize((size_t)c.N * c.K);
    for (auto& v : d.x) v = u(rng);
    for (auto& v : d.W) v = u(rng) / std::sqrt((float)c.K + 1);
    if (c.bias) {
        d.bias.resize(c.N);
        for (auto& v : d.bias) v = u(rng);
    }
    if (zero_rows) {
        for (int m = 3; m < c.M; m += 7) std::fill_n(d.x.data() + (size_t)m * c.K, c.K, 0.0f);
        for (int n = 2; n < c.N; n += 5) std::fill_n(d.W.data() + (size_t)n * c.K, c.K, 0.0f);
        if (c.M > 1) std::fill_n(d.x.data() + c.K, c.K, 1e-35f);
        if (c.N > 1) std::fill_n(d.W.data() + c.K, c.K, -1e-35f);
    }
    return d;
}

// The header's quantization of `rows` rows of length K: q (row-major) and one scale per row.
void quantize_ref(const float* a, int rows, int K, std::vector<int8_t>* q, std::vector<float>* s) {
    q->assign((size_t)rows * K, 0);
    s->assign(rows, 0.0f);
    for (int r = 0; r < rows; r++) {
        const float* row = a + (size_t)r * K;
        float amax = 0.0f;
        for (int k = 0; k < K; k++) amax = std::max(amax, std::fabs(row[k]));
        if (amax < 1e-30f) continue;  // zero (or tiny) row: q = 0, scale 0
        float inv = 127.0f / amax;
        (*s)[r] = amax / 127.0f;
        for (int k = 0; k < K; k++) {
            float v = std::nearbyint(row[k] * inv);
            (*q)[(size_t)r * K + k] = (int8_t)std::min(127.0f, std::max(-127.0f, v));
        }
    }
}

// Scalar reference of linear_int8: y [M, ldy], padding left as it is.
void reference(const Case& c, const Data& d, std::vector<float>* y) {
    std::vector<int8_t> qx, qw;
    std::vector<float> sx, sw;
    quantize_ref(d.x.data(), c.M, c.K, &qx, &sx);
    quantize_ref(d.W.data(), c.N, c.K, &qw, &sw);
    const int ldy = c.N + c.pad_y;
    for (int m = 0; m < c.M; m++)
        for (int n = 0; n < c.N; n++) {
            int32_t acc = 0;
            const int8_t* a = qx.data() + (size_t)m * c.K;  // (K may be 0)
            const int8_t* b = qw.data() + (size_t)n * c.K;
            for (int k = 0; k < c.K; k++) acc += (int32_t)a[k] * b[k];
            float v = std::fma((float)acc, sx[m] * sw[n], c.bias ? d.bias[n] : 0.0f);
            if (c.relu) v = v > 0.0f ? v : 0.0f;
            (*y)[(size_t)m * ldy + n] = v;
        }
}

// linear_int8 on a sentinel-filled y [M, ldy] (+1 element past the end).
std::vector<float> run(const Case& c, const Data& d, const Int8Weights& w) {
    std::vector<float> y((size_t)c.M * (c.N + c.pad_y) + 1, SENTINEL);
    linear_int8(y.data(), c.N + c.pad_y, d.x.data(), c.M, w, c.bias ? d.bias.data() : nullptr,
                c.relu);
    return y;
}

// Number of elements of y that differ bitwise (padding included).
size_t bit_diffs(const std::vector<float>& a, const std::vector<float>& b) {
    size_t n = 0;
    for (size_t i = 0; i < a.size(); i++) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return n;
}

void describe(const Case& c, const char* tag, char* buf, size_t n) {
    std::snprintf(buf, n, "%s M=%d N=%d K=%d bias=%d relu=%d ldy=N+%d", tag, c.M, c.N, c.K,
                  c.bias, c.relu, c.pad_y);
}

// 1. Bitwise equality with the reference (the sentinel padding is compared too).
void check_exact(const Case& c, uint32_t seed, bool zero_rows) {
    Data d = make_data(c, seed, zero_rows);
    Int8Weights w;
    int8_weights_init(&w, d.W.data(), c.N, c.K);
    std::vector<float> want((size_t)c.M * (c.N + c.pad_y) + 1, SENTINEL);
    reference(c, d, &want);
    std::vector<float> got = run(c, d, w);
    char what[128];
    describe(c, zero_rows ? "exact, zero rows" : "exact", what, sizeof what);
    size_t diffs = bit_diffs(got, want);
    check(diffs == 0, "%-54s bitwise differences: %zu of %zu", what, diffs, got.size());
}

// 2. The int8 product against the fp32 product of the unquantized operands (in double),
// compared on the M x N block of y only.
void check_accuracy(const Case& c, uint32_t seed) {
    Data d = make_data(c, seed, false);
    Int8Weights w;
    int8_weights_init(&w, d.W.data(), c.N, c.K);
    std::vector<float> y = run(c, d, w), got, want;
    const int ldy = c.N + c.pad_y;
    for (int m = 0; m < c.M; m++)
        for (int n = 0; n < c.N; n++) {
            double s = c.bias ? d.bias[n] : 0.0;
            for (int k = 0; k < c.K; k++)
                s += (double)d.x[(size_t)m * c.K + k] * d.W[(size_t)n * c.K + k];
            want.push_back((float)(c.relu ? std::max(s, 0.0) : s));
            got.push_back(y[(size_t)m * ldy + n]);
        }
    char what[128];
    describe(c, "vs fp32", what, sizeof what);
    check_close(what, got.data(), want.data(), got.size(), 2e-2);
}

// The dequantized weights are within half a quantization step of W.
void check_weights(int N, int K, uint32_t seed) {
    Data d = make_data({1, N, K, false, false, 0}, seed, true);
    Int8Weights w;
    int8_weights_init(&w, d.W.data(), N, K);
    double worst = 0;  // max error in units of the row's step
    bool zero_ok = true;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            float e = std::fabs(int8_weight_at(w, n, k) - d.W[(size_t)n * K + k]);
            if (w.scale[n] > 0) worst = std::max(worst, (double)e / w.scale[n]);
            else zero_ok = zero_ok && std::fabs(d.W[(size_t)n * K + k]) < 1e-30f;
        }
    check(worst <= 0.5 + 1e-3 && zero_ok,
          "weights N=%d K=%d: max |dequant(q) - w| = %.4f steps (<= 0.5), scale 0 only on "
          "zero rows: %d", N, K, worst, zero_ok);
}

#ifdef _OPENMP
// 3a. Bitwise the same y with 1 and with 2 threads.
void check_thread_counts(const Case& c, uint32_t seed) {
    Data d = make_data(c, seed, true);
    Int8Weights w;
    int8_weights_init(&w, d.W.data(), c.N, c.K);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    std::vector<float> one = run(c, d, w);
    omp_set_num_threads(2);
    std::vector<float> two = run(c, d, w);
    omp_set_num_threads(saved);
    char what[128];
    describe(c, "1 vs 2 threads", what, sizeof what);
    size_t diffs = bit_diffs(one, two);
    check(diffs == 0, "%-54s bitwise differences: %zu", what, diffs);
}

// 3b. Calls from inside a parallel region (each runs on its thread, with that thread's
// buffers) give bitwise the results of the same calls made outside.
void check_inside_parallel(const std::vector<Case>& cases) {
    int n = (int)cases.size();
    std::vector<Data> data;
    std::vector<Int8Weights> w(n);
    std::vector<std::vector<float>> outside(n), inside(n);
    for (int i = 0; i < n; i++) {
        data.push_back(make_data(cases[i], 500 + i, true));
        int8_weights_init(&w[i], data[i].W.data(), cases[i].N, cases[i].K);
        outside[i] = run(cases[i], data[i], w[i]);
    }
    int in_parallel = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(2) reduction(+ : in_parallel)
    for (int i = 0; i < n; i++) {
        in_parallel += omp_in_parallel() ? 1 : 0;
        inside[i] = run(cases[i], data[i], w[i]);
    }
    for (int i = 0; i < n; i++) {
        char what[128];
        describe(cases[i], "omp-inner", what, sizeof what);
        size_t diffs = bit_diffs(inside[i], outside[i]);
        check(diffs == 0, "%-54s bitwise differences from outside: %zu", what, diffs);
    }
    check(in_parallel == n, "inside-parallel calls ran (%d of %d inside an active region)",
          in_parallel, n);
}
#endif

// 4. The AMX kernel against the reference, the kernel each call takes, and 1 vs 2 threads.
void check_amx(uint32_t* seed) {
    const std::string probe = int8_kernel(32, 64);
    if (probe != "amx" && probe != "avx512-vnni") {
        check_skip("AMX kernel: this build's int8 kernel is %s (AMX is compiled with the VNNI one)",
                   probe.c_str());
        return;
    }
    if (!cpu_has("amx_int8")) {
        check_skip("AMX kernel: this CPU has no amx_int8 (/proc/cpuinfo)");
        return;
    }
    const char* env = std::getenv("TRANSFORMER_AMX");
    if (env && std::strcmp(env, "0") == 0) {
        check_skip("AMX kernel: TRANSFORMER_AMX=0 turns it off in this process");
        return;
    }
    check(probe == "amx", "AMX: the CPU has amx_int8 and a 32 x 64 product takes the %s kernel",
          probe.c_str());
    // K = 62 and 254: K4 a multiple of 64 with K itself not (the u8 padding at 128 inside a tile)
    const int Ms[] = {16, 17, 31, 32, 33, 48, 100, 257}, Ns[] = {1, 17, 32, 33, 64, 65, 100, 768},
              Ks[] = {62, 64, 254, 256, 1024, 2048};
    int variant = 0;
    for (int M : Ms)
        for (int N : Ns)
            for (int K : Ks) {
                if ((double)M * N * K > 5e7 || (variant++ % 3 != 0 && M > 33 && N > 65)) continue;
                const int v = variant;
                check_exact({M, N, K, (v & 1) != 0, (v & 2) != 0, (v % 3) * 3}, (*seed)++, v % 2 == 0);
            }
    check(std::string(int8_kernel(16, 256)) == "amx" && std::string(int8_kernel(15, 256)) != "amx" &&
              std::string(int8_kernel(100, 1000)) != "amx",
          "AMX: taken from 16 rows on, not for 15 rows or K = 1000 (%s, %s, %s)", int8_kernel(16, 256),
          int8_kernel(15, 256), int8_kernel(100, 1000));
#ifdef _OPENMP
    // Row split in 32-row bands (M = 100, 257), column split (M = 16 N = 8000).
    const Case thr_cases[] = {{100, 768, 256, true, true, 1}, {257, 100, 1024, false, false, 0},
                              {16, 8000, 256, true, false, 2}};
    for (const Case& c : thr_cases) check_thread_counts(c, (*seed)++);
#endif
    int8_allow_amx(false);
    check(std::string(int8_kernel(32, 64)) == "avx512-vnni",
          "AMX turned off: a 32 x 64 product takes the %s kernel", int8_kernel(32, 64));
    check_exact({100, 768, 256, true, false, 3}, (*seed)++, true);
    int8_allow_amx(true);
}

}  // namespace

int main() {
    uint32_t seed = 1;

    // 1. Exact, on the cross product of the edge sizes (the largest products skipped to keep
    // the test fast; N = 8000 still runs with M = 1, 5, 13), bias/ReLU/padding rotating.
    const int Ms[] = {1, 5, 13, 100}, Ns[] = {1, 17, 100, 768, 8000},
              Ks[] = {4, 7, 256, 1000, 1024};
    int variant = 0;
    for (int M : Ms)
        for (int N : Ns)
            for (int K : Ks) {
                if ((double)M * N * K > 1.1e8) continue;
                int v = variant++;
                Case c{M, N, K, (v & 1) != 0, (v & 2) != 0, (v % 3) * 5};
                check_exact(c, seed++, v % 2 == 0);
            }
    // All four bias/ReLU combinations on two multi-tile shapes; K = 0 (y = bias).
    for (int v = 0; v < 4; v++) {
        check_exact({100, 768, 256, (v & 1) != 0, (v & 2) != 0, 3}, seed++, true);
        check_exact({37, 130, 61, (v & 1) != 0, (v & 2) != 0, 0}, seed++, false);
        check_exact({9, 70, 0, (v & 1) != 0, (v & 2) != 0, 2}, seed++, false);
    }

    // Weight quantization itself.
    check_weights(100, 257, seed++);
    check_weights(8000, 8, seed++);

    // 2. Close to the fp32 product.
    const Case acc_cases[] = {{100, 768, 256, true, false, 0}, {200, 256, 1024, false, false, 0},
                              {13, 1000, 100, true, true, 0},   {5, 8000, 256, true, false, 0},
                              {1, 17, 7, false, false, 0}};
    for (const Case& c : acc_cases) check_accuracy(c, seed++);

#ifdef _OPENMP
    // 3. Thread counts: column split (M=5 N=768, M=13 N=8000), row split (M=100 N=100,
    // N=17, M=400), serial small product (M=1 N=17 K=7).
    const Case thr_cases[] = {{5, 768, 256, true, true, 1},    {100, 100, 1000, true, false, 0},
                              {13, 8000, 256, false, false, 0}, {100, 17, 1024, true, false, 2},
                              {1, 17, 7, true, false, 0},      {400, 256, 1024, false, true, 0}};
    for (const Case& c : thr_cases) check_thread_counts(c, seed++);
    std::vector<Case> inner = {{25, 256, 256, true, false, 0}, {5, 768, 256, false, true, 3},
                               {100, 100, 100, true, true, 0}, {7, 1000, 64, false, false, 1}};
    check_inside_parallel(inner);
#endif

    check_amx(&seed);

    return check_summary("gemm_int8");
}
