// bench/bench_gemm.cpp — GFLOP/s of our sgemm (gemm.cpp) next to OpenBLAS's cblas_sgemm.
//
// Shapes are the model's (d_model 128..512, d_ff up to 2048, vocab 8000/37000, 4100 tokens):
//   NN  Y[4100,N]  = X[4100,K] W[K,N]           (also dX = dY W in backward)
//   NT  Y[4100,N]  = X[4100,K] W[N,K]^T         (nn.Linear forward, W is [out,in])
//   TN  dW[N,K]    = dY[4100,N]^T X[4100,K]     (weight gradient: M=out, N=in, K=tokens)
// plus the attention-sized products (25x25x32 ...) called from inside an OpenMP loop over
// (batch, head), timed per call. Each product is timed as the best of several runs, ours and
// OpenBLAS alternating. With OMP_NUM_THREADS=1 times are thread CPU time (robust to other
// processes on the machine); with more threads they are wall time, so run on a quiet machine.
//
// Build (our sgemm is the default build; OpenBLAS is linked only for the comparison column):
//   g++ -std=c++17 -O3 -march=native -fopenmp -Wall -Wextra gemm.cpp bench/bench_gemm.cpp
//       -o bench_gemm -lopenblas
// Run (OpenBLAS at its best: its OpenMP build, 2 threads, core type auto-detected):
//   env -u OPENBLAS_CORETYPE LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp
//       OMP_NUM_THREADS=2 ./bench_gemm [seconds_per_product=0.15] [filter: NN|NT|TN|small]
#include "cpu/gemm.h"
#include "bench/bench_timing.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <ctime>
#include <random>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

// Best times of two functions, run alternately: at least 2 runs each (the first doubles as
// warm-up: page faults, packing buffers, thread start) and about `budget` seconds in all.
void best_times(const std::function<void()>& f, const std::function<void()>& g, double budget,
                double* tf, double* tg) {
    std::vector<double> a, b;
    alternate_runs(f, g, 2, 100, budget, &a, &b);
    *tf = *std::min_element(a.begin(), a.end());
    *tg = *std::min_element(b.begin(), b.end());
}

struct Product {
    const char* kind;
    bool ta, tb;
    int M, N, K;
};

// Times one product with both libraries and prints a table row.
void bench_product(const Product& p, double budget) {
    int lda = p.ta ? p.M : p.K, ldb = p.tb ? p.K : p.N, ldc = p.N;
    Floats A((size_t)p.M * p.K), B((size_t)p.K * p.N), C((size_t)p.M * p.N), C2((size_t)p.M * p.N);
    fill_uniform(A, 1);
    fill_uniform(B, 2);
    double ours, blas;
    best_times(
        [&] { sgemm(p.ta, p.tb, p.M, p.N, p.K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f,
                    C.data(), ldc); },
        [&] {
            cblas_sgemm(CblasRowMajor, p.ta ? CblasTrans : CblasNoTrans,
                        p.tb ? CblasTrans : CblasNoTrans, p.M, p.N, p.K, 1.0f, A.data(), lda,
                        B.data(), ldb, 0.0f, C2.data(), ldc);
        },
        budget, &ours, &blas);
    double max_diff = 0, max_ref = 0;  // sanity: both libraries agree
    for (size_t i = 0; i < C.size(); i++) {
        max_diff = std::max(max_diff, (double)std::fabs(C[i] - C2[i]));
        max_ref = std::max(max_ref, (double)std::fabs(C2[i]));
    }
    double flop = 2.0 * p.M * p.N * p.K;
    std::printf("%-3s %6d %6d %6d  %8.1f %8.1f  %6.3f  %s\n", p.kind, p.M, p.N, p.K,
                flop / ours * 1e-9, flop / blas * 1e-9, blas / ours,
                max_diff <= 1e-4 * max_ref ? "" : "MISMATCH");
    std::fflush(stdout);
}

// Attention-sized products: `heads` independent calls inside an OpenMP loop (as the model's
// attention does over batch x head); reports nanoseconds per call and GFLOP/s.
void bench_small(const Product& p, int heads, double budget) {
    const int row = 3 * 512;  // operands are views into wider rows (stride like a fused QKV)
    int lda = row, ldb = row, ldc = 64;
    size_t a_rows = p.ta ? p.K : p.M, b_rows = p.tb ? p.N : p.K;
    Floats A(a_rows * row * heads), B(b_rows * row * heads), C((size_t)p.M * ldc * heads);
    fill_uniform(A, 3);
    fill_uniform(B, 4);
    auto run = [&](bool use_blas) {
#pragma omp parallel for schedule(static)
        for (int h = 0; h < heads; h++) {
            const float* a = A.data() + a_rows * row * h;
            const float* b = B.data() + b_rows * row * h;
            float* c = C.data() + (size_t)p.M * ldc * h;
            if (use_blas)
                cblas_sgemm(CblasRowMajor, p.ta ? CblasTrans : CblasNoTrans,
                            p.tb ? CblasTrans : CblasNoTrans, p.M, p.N, p.K, 1.0f, a, lda, b,
                            ldb, 0.0f, c, ldc);
            else
                sgemm(p.ta, p.tb, p.M, p.N, p.K, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
        }
    };
    double ours, blas;
    best_times([&] { run(false); }, [&] { run(true); }, budget, &ours, &blas);
    double flop = 2.0 * p.M * p.N * p.K * heads;
    std::printf("%-3s %6d %6d %6d  %8.1f %8.1f  %6.3f  (x%d calls in omp for; %.0f vs %.0f ns)\n",
                p.kind, p.M, p.N, p.K, flop / ours * 1e-9, flop / blas * 1e-9, blas / ours, heads,
                ours / heads * 1e9, blas / heads * 1e9);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    double budget = argc > 1 ? std::atof(argv[1]) : 0.15;
    const char* filter = argc > 2 ? argv[2] : "";
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    bench_cpu_clock() = threads == 1;
    std::printf("threads=%d (%s)  OpenBLAS: %s (core %s)\n", threads,
                bench_cpu_clock() ? "thread CPU time" : "wall time", openblas_get_config(),
                openblas_get_corename());
    std::printf("%-3s %6s %6s %6s  %8s %8s  %6s\n", "op", "M", "N", "K", "ours", "openblas",
                "ratio");
    std::printf("    (GFLOP/s; ratio = ours / OpenBLAS)\n");

    const int T = 4100;
    const int NK[][2] = {{128, 128},  {384, 128},  {512, 128},  {128, 512},  {8000, 128},
                         {256, 256},  {768, 256},  {1024, 256}, {256, 1024}, {8000, 256},
                         {512, 512},  {1536, 512}, {2048, 512}, {512, 2048}, {37000, 512}};
    std::vector<Product> products;
    products.push_back({"NN", false, false, 2048, 512, 2048});  // the reference point
    for (auto& s : NK) products.push_back({"NN", false, false, T, s[0], s[1]});
    for (auto& s : NK) products.push_back({"NT", false, true, T, s[0], s[1]});
    for (auto& s : NK) products.push_back({"TN", true, false, s[0], s[1], T});
    for (const Product& p : products)
        if (!*filter || std::strcmp(filter, p.kind) == 0) bench_product(p, budget);

    if (!*filter || std::strcmp(filter, "small") == 0) {
        const Product small[] = {{"NT", false, true, 25, 25, 32},   // scores = Q K^T
                                 {"NN", false, false, 25, 32, 25},  // out = P V
                                 {"TN", true, false, 25, 32, 25},   // dV = P^T dO
                                 {"NT", false, true, 25, 25, 64},
                                 {"NN", false, false, 25, 64, 25}};
        for (const Product& p : small) bench_small(p, 256, budget);
    }
    return 0;
}
