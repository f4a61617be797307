// bench/bench_gemm_bf16.cpp — speed of sgemm_bf16 (gemm_bf16.h: --precision bf16's products on
// the CPU) against the fp32 sgemm, on the linear layers' products of a training step.
//
// Shapes (4,100 tokens, the small and base configs' widths):
//   NT  Y[4100,N]  = X[4100,K] W[N,K]^T       the forward (QKV, FFN, the tied classifier)
//   NN  dX[4100,N] = dY[4100,K] W[K,N]        the input gradient
//   TN  dW[M,N]    = dY[4100,M]^T X[4100,N]   the weight gradient (K = tokens)
// Each product is run alternately with the two functions (so that load from other processes
// hits both alike); the reported time is the median of the runs, GFLOP/s counts 2 M N K. With
// OMP_NUM_THREADS=1 times are the thread's CPU time; with more threads wall time, so run on a
// quiet machine. The path of sgemm_bf16 ("amx", "avx512bf16", or "sgemm" on rounded operands;
// TRANSFORMER_BF16_KERNEL picks one) is printed.
//
// Run: make bench-gemm-bf16, or [OMP_NUM_THREADS=1] build/bench_gemm_bf16 [seconds=0.3]
#include "cpu/gemm.h"
#include "cpu/gemm_bf16.h"
#include "bench/bench_timing.h"

#include <cstdio>
#include <cstdlib>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

void bench_shape(const char* what, bool ta, bool tb, int M, int N, int K, double budget) {
    Floats A((size_t)M * K), B((size_t)K * N), C32((size_t)M * N), C16((size_t)M * N);
    fill_uniform(A, 1);
    fill_uniform(B, 2);
    const int lda = ta ? M : K, ldb = tb ? K : N;
    auto fp32 = [&] { sgemm(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C32.data(), N); };
    auto bf16 = [&] { sgemm_bf16(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C16.data(), N); };
    fp32();
    bf16();
    std::vector<double> t32, t16;
    alternate_runs(fp32, bf16, 3, 1000, budget, &t32, &t16);
    const double a = median(t32), b = median(t16), op = 2.0 * M * N * K;
    std::printf("%-28s %c%c %5d %5d %5d  %9.3f %7.1f  %9.3f %7.1f  %6.2fx\n", what, ta ? 'T' : 'N', tb ? 'T' : 'N',
                M, N, K, a * 1e3, op / a * 1e-9, b * 1e3, op / b * 1e-9, a / b);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    const double budget = argc > 1 ? std::atof(argv[1]) : 0.3;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    bench_cpu_clock() = threads == 1;
    std::printf("threads=%d (%s); sgemm_bf16 path: %s; median ms, GFLOP/s = 2MNK / time\n", threads,
                bench_cpu_clock() ? "thread CPU time" : "wall time", bf16_kernel());
    std::printf("%-28s %2s %5s %5s %5s  %9s %7s  %9s %7s  %7s\n", "product", "", "M", "N", "K", "fp32 ms",
                "GFLOP/s", "bf16 ms", "GFLOP/s", "speedup");
    const int T = 4100;
    bench_shape("small: QKV projection", false, true, T, 768, 256, budget);
    bench_shape("small: FFN in (X W1^T)", false, true, T, 1024, 256, budget);
    bench_shape("small: dX = dY W2", false, false, T, 256, 1024, budget);
    bench_shape("small: dW2 = dY^T H", true, false, 256, 1024, T, budget);
    bench_shape("small: dW1 = dY^T X", true, false, 1024, 256, T, budget);
    bench_shape("small: logits (X E^T)", false, true, T, 8000, 256, budget);
    bench_shape("small: dX = dlogits E", false, false, T, 256, 8000, budget);
    bench_shape("small: dE = dlogits^T X", true, false, 8000, 256, T, budget);
    bench_shape("base: FFN in (X W1^T)", false, true, T, 2048, 512, budget);
    bench_shape("base: dX = dY W2", false, false, T, 512, 2048, budget);
    bench_shape("base: dW1 = dY^T X", true, false, 2048, 512, T, budget);
    return 0;
}
