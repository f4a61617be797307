// bench/fp32_peak.cpp — this machine's fp32 peak, measured: every thread runs independent
// chains of fused multiply-adds on the widest vectors the build targets (AVX-512, else AVX2
// + FMA, else scalar), enough chains to hide the FMA latency on two FMA ports. The benchmark
// scripts compare PyTorch's large matrix product with it (bench/torch_check.py).
//
//   make build/fp32_peak && OMP_NUM_THREADS=2 build/fp32_peak
//   prints: fp32_peak gflops=X threads=T isa=avx512|avx2|scalar one_thread=Y all_threads=Z
//
// Each rate is the best of 5 runs of ~0.2 s. The peak X is the larger of T x the one-thread
// rate and the all-thread rate: load from elsewhere lowers the all-thread run first, and a
// peak measured too low would let a slow anchor pass.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace {

// Independent accumulators per thread: 16 fill AVX-512's 32 registers by half; AVX2 has 16
// registers, and 16 chains plus the two constants spilled to the stack (the loop then ran at
// half the FMA rate, below what sgemm reaches), so it takes 12.
#if defined(__AVX512F__)
constexpr int kChains = 16;
#else
constexpr int kChains = 12;
#endif
constexpr long kIterations = 20000000;  // per thread and run

#if defined(__AVX512F__)
constexpr const char* kIsa = "avx512";
constexpr int kLanes = 16;
float chains(long iterations) {
    __m512 acc[kChains];
    for (int c = 0; c < kChains; c++) acc[c] = _mm512_set1_ps(1.0f + c * 1e-3f);
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
    for (long i = 0; i < iterations; i++)
        for (int c = 0; c < kChains; c++) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
    float out[16], sum = 0;
    __m512 s = acc[0];
    for (int c = 1; c < kChains; c++) s = _mm512_add_ps(s, acc[c]);
    _mm512_storeu_ps(out, s);
    for (float v : out) sum += v;
    return sum;
}
#elif defined(__AVX2__) && defined(__FMA__)
constexpr const char* kIsa = "avx2";
constexpr int kLanes = 8;
float chains(long iterations) {
    __m256 acc[kChains];
    for (int c = 0; c < kChains; c++) acc[c] = _mm256_set1_ps(1.0f + c * 1e-3f);
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
    for (long i = 0; i < iterations; i++)
        for (int c = 0; c < kChains; c++) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    float out[8], sum = 0;
    __m256 s = acc[0];
    for (int c = 1; c < kChains; c++) s = _mm256_add_ps(s, acc[c]);
    _mm256_storeu_ps(out, s);
    for (float v : out) sum += v;
    return sum;
}
#else
constexpr const char* kIsa = "scalar";
constexpr int kLanes = 1;
float chains(long iterations) {
    float acc[kChains];
    for (int c = 0; c < kChains; c++) acc[c] = 1.0f + c * 1e-3f;
    for (long i = 0; i < iterations; i++)
        for (int c = 0; c < kChains; c++) acc[c] = acc[c] * 0.999999f + 1e-6f;
    float sum = 0;
    for (float v : acc) sum += v;
    return sum;
}
#endif

// GFLOP/s of one run on the current OpenMP threads (2 FLOP per lane per FMA).
double run_once(float* sink) {
    auto t0 = std::chrono::steady_clock::now();
    int threads = 1;
    float total = 0;
#pragma omp parallel reduction(+ : total)
    {
#pragma omp single
        threads = omp_get_num_threads();
        total += chains(kIterations);
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    *sink += total;
    return 2.0 * kLanes * kChains * (double)kIterations * threads / s / 1e9;
}

double best_of_5(int threads, float* sink) {
    omp_set_num_threads(threads);
    double best = 0;
    for (int r = 0; r < 5; r++) best = std::max(best, run_once(sink));
    return best;
}

}  // namespace

int main() {
    float sink = 0;
    const int threads = omp_get_max_threads();
    double one = best_of_5(1, &sink), all = best_of_5(threads, &sink);
    std::printf("fp32_peak gflops=%.1f threads=%d isa=%s one_thread=%.1f all_threads=%.1f  # checksum %g\n",
                std::max(all, threads * one), threads, kIsa, one, all, (double)sink);
    return 0;
}
