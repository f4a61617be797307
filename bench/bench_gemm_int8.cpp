// bench/bench_gemm_int8.cpp — speed of linear_int8 (gemm_int8.h) against the fp32 sgemm.
//
// Shapes are the decoder's linear layers: M = batch x beam tokens, (K, N) = (d_model, 3 d)
// (the self-attention QKV), (d, d) (output projections), (d, d_ff) and (d_ff, d) (the
// feed-forward pair), (d, vocab) (the logits). Both compute y[M, N] = x[M, K] W^T:
//     fp32   sgemm(false, true, M, N, K, 1, x, K, W, K, 0, y, N)
//     int8   linear_int8(y, N, x, M, Wq, nullptr, false)   (quantizing x is included)
// Where linear_int8 takes the AMX kernel (gemm_int8.h: int8_kernel), the same product is timed
// again with AMX turned off (the VNNI kernel, bitwise the same y), against AMX in alternation.
// Each product is run alternately (so that load from other processes hits both alike), the
// reported time is the median of the runs; GOP/s counts 2 M N K operations. With
// OMP_NUM_THREADS=1 times are the thread's CPU time (robust to other processes on the
// machine); with more threads they are wall time, so run on a quiet machine (a descheduled
// thread stalls the whole product).
//
// Run: make bench-gemm-int8, or [OMP_NUM_THREADS=1] build/bench_gemm_int8 [seconds=0.1] [all]
// (seconds per shape; "all" adds small-M decoding steps and larger layers).
#include "cpu/gemm.h"
#include "cpu/gemm_int8.h"
#include "bench/bench_timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

// Median times of f and g run alternately: at least 5 runs each after one warm-up run
// (page faults, buffers, thread start), about `budget` seconds in all.
void median_times(const std::function<void()>& f, const std::function<void()>& g,
                  double budget, double* tf, double* tg) {
    f();
    g();
    std::vector<double> a, b;
    alternate_runs(f, g, 5, 1000, budget, &a, &b);
    *tf = median(a);
    *tg = median(b);
}

// Times one shape and prints a table row.
void bench_shape(int M, int K, int N, double budget) {
    Floats x((size_t)M * K), W((size_t)N * K), y32((size_t)M * N), y8((size_t)M * N);
    fill_uniform(x, 1, 1.0f);
    fill_uniform(W, 2, 1.0f / std::sqrt((float)K));
    Int8Weights wq;
    int8_weights_init(&wq, W.data(), N, K);
    double t32, t8;
    median_times(
        [&] { sgemm(false, true, M, N, K, 1.0f, x.data(), K, W.data(), K, 0.0f, y32.data(), N); },
        [&] { linear_int8(y8.data(), N, x.data(), M, wq, nullptr, false); }, budget, &t32, &t8);
    double max_err = 0, max_ref = 0;  // sanity: int8 close to fp32
    for (size_t i = 0; i < y32.size(); i++) {
        max_err = std::max(max_err, (double)std::fabs(y8[i] - y32[i]));
        max_ref = std::max(max_ref, (double)std::fabs(y32[i]));
    }
    double op = 2.0 * M * N * K;
    const std::string kernel = int8_kernel(M, K);
    char vnni[64] = "        -        -";
    if (kernel == "amx") {   // the VNNI kernel on the same product, alternating with AMX
        double t_vnni, t_amx;
        Floats yv((size_t)M * N);
        median_times(
            [&] {
                int8_allow_amx(false);
                linear_int8(yv.data(), N, x.data(), M, wq, nullptr, false);
                int8_allow_amx(true);
            },
            [&] { linear_int8(y8.data(), N, x.data(), M, wq, nullptr, false); }, budget, &t_vnni,
            &t_amx);
        std::snprintf(vnni, sizeof vnni, "%9.4f %7.2fx", t_vnni * 1e3, t_vnni / t_amx);
    }
    std::printf("%5d %5d %6d  %9.4f %7.1f  %9.4f %7.1f %-11s %6.2fx  %s  %.1e%s\n", M, K, N,
                t32 * 1e3, op / t32 * 1e-9, t8 * 1e3, op / t8 * 1e-9, kernel.c_str(), t32 / t8,
                vnni, max_err / max_ref, max_err <= 2e-2 * max_ref ? "" : "  MISMATCH");
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    double budget = argc > 1 ? std::atof(argv[1]) : 0.1;
    bool all = argc > 2 && std::strcmp(argv[2], "all") == 0;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    bench_cpu_clock() = threads == 1;
    std::printf("threads=%d (%s); median ms, GOP/s = 2MNK / time; int8's kernel per shape, and "
                "where it is AMX the VNNI kernel's time and AMX's speed-up over it\n", threads,
                bench_cpu_clock() ? "thread CPU time" : "wall time");
    std::printf("%5s %5s %6s  %9s %7s  %9s %7s %-11s %7s  %9s %8s  %s\n", "M", "K", "N", "fp32 ms",
                "GOP/s", "int8 ms", "GOP/s", "kernel", "vs fp32", "vnni ms", "amx/vnni", "rel.err");
    const int KN[][2] = {{256, 768}, {256, 256}, {256, 1024}, {1024, 256}, {256, 8000}};
    const int Ms[] = {100, 200, 400, 800};
    for (int M : Ms)
        for (auto& s : KN) bench_shape(M, s[0], s[1], budget);
    if (all) {
        const int small[] = {1, 5, 20};
        for (int M : small)
            for (auto& s : KN) bench_shape(M, s[0], s[1], budget);
        const int big[][2] = {{512, 1536}, {512, 2048}, {2048, 512}, {512, 37000}};
        for (auto& s : big) bench_shape(400, s[0], s[1], budget);
    }
    return 0;
}
