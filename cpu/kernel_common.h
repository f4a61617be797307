// kernel_common.h — the small helpers the CPU's matrix kernels share (gemm.cpp, gemm_int8.cpp,
// gemm_bf16.cpp): how many threads a product may take, rounding up, and AVX-512's mask of
// the first n lanes.
#pragma once
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace cpu_kernels {

// All OpenMP threads outside a parallel region; 1 inside one (no nested parallelism: the
// caller already is parallel, and the product runs on its thread).
inline int thread_count() {
#ifdef _OPENMP
    if (!omp_in_parallel()) return omp_get_max_threads();
#endif
    return 1;
}

inline int round_up(int x, int m) { return (x + m - 1) / m * m; }

#ifdef __AVX512F__
// The first n of 16 lanes (none for n <= 0, all for n >= 16): loads and stores at an edge.
inline __mmask16 first_lanes(int n) { return n <= 0 ? 0 : n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1); }
#endif

}  // namespace cpu_kernels
