// kernel_common.h — the small helpers the CPU's matrix kernels share (gemm.cpp, gemm_int8.cpp,
// gemm_bf16.cpp): how many threads a product may take, rounding up, AVX-512's mask of the
// first n lanes, and std::vector storage on 64-byte boundaries (the int8 weights, the
// benchmarks' matrices).
#pragma once
#include <cstddef>
#include <cstdlib>
#include <new>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __AVX512F__
#include <immintrin.h>
#endif

// Minimal allocator for 64-byte aligned std::vector storage (one zmm / one cache line).
template <class T>
struct Aligned64 {
    using value_type = T;
    Aligned64() = default;
    template <class U>
    Aligned64(const Aligned64<U>&) {}
    T* allocate(size_t n) {
        size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
        void* p = std::aligned_alloc(64, bytes ? bytes : 64);
        if (!p) throw std::bad_alloc();
        return static_cast<T*>(p);
    }
    void deallocate(T* p, size_t) { std::free(p); }
    template <class U>
    bool operator==(const Aligned64<U>&) const { return true; }
    template <class U>
    bool operator!=(const Aligned64<U>&) const { return false; }
};

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
