// bench/bench_timing.h — the clock, the alternating timer, the matrices and the random fill
// shared by the matrix-product benchmarks (bench_gemm.cpp, bench_gemm_int8.cpp,
// bench_gemm_bf16.cpp).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <random>
#include <vector>

#include "cpu/kernel_common.h"   // Aligned64

// The benchmarks' matrices start on a 64-byte boundary, as the model's arena slices do (a
// plain std::vector of this size comes from mmap 16 bytes past a page: every 64-byte store of
// a row then straddles two cache lines, which cost the 4,100 x 8,000 logits product half its
// speed, 32 against 20 ms in bf16).
using Floats = std::vector<float, Aligned64<float>>;

// With one thread the clock is the thread's CPU time, so that other processes competing for
// the core do not distort the numbers; with several threads it has to be wall time.
inline bool& bench_cpu_clock() {
    static bool cpu = false;
    return cpu;
}

inline double bench_now() {
    if (bench_cpu_clock()) {
        timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return ts.tv_sec + 1e-9 * ts.tv_nsec;
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Runs f and g alternately (so that load from other processes hits both alike): at least
// min_runs each, then more until about `budget` seconds were spent (at most max_runs).
// Returns each one's times in *tf, *tg.
inline void alternate_runs(const std::function<void()>& f, const std::function<void()>& g,
                           int min_runs, int max_runs, double budget, std::vector<double>* tf,
                           std::vector<double>* tg) {
    double spent = 0;
    for (int r = 0; r < min_runs || (spent < budget && r < max_runs); r++) {
        double t0 = bench_now();
        f();
        double t1 = bench_now();
        g();
        double t2 = bench_now();
        tf->push_back(t1 - t0);
        tg->push_back(t2 - t1);
        spent += t2 - t0;
    }
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// v = uniform(-amp, amp), deterministic in seed.
inline void fill_uniform(Floats& v, uint32_t seed, float amp = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-amp, amp);
    for (auto& x : v) x = u(rng);
}
