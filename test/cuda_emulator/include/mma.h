// Stands in for the CUDA Toolkit's mma.h (the warp matrix functions, nvcuda::wmma) in the
// emulator build (../emulator.h says why): the 16x16x16 shape with bf16 inputs and fp32
// accumulators, the only one transformer.cu uses.
//
// On a GPU a fragment is spread over the warp's 32 lanes in an unspecified order; here each
// lane holds the whole tile in row-major order, so that mma_sync needs no exchange between
// lanes. Code that treats the elements of a fragment uniformly (x[i] for every i < num_elements,
// as the CUDA guide allows) behaves the same. Each operation checks what the hardware requires
// and stops the emulator otherwise: all 32 lanes take part with the same pointer, leading
// dimension and layout; the pointer is 256-bit aligned; the leading dimension is a multiple of
// 16 bytes (8 bf16, 4 floats).
#pragma once
#include <cstring>
#include <type_traits>

#include "../emulator.h"

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment;

// Rows and columns of the tile a fragment holds.
template <class Use, int M, int N, int K> struct tile_shape;
template <int M, int N, int K> struct tile_shape<matrix_a, M, N, K> { static constexpr int rows = M, cols = K; };
template <int M, int N, int K> struct tile_shape<matrix_b, M, N, K> { static constexpr int rows = K, cols = N; };
template <int M, int N, int K> struct tile_shape<accumulator, M, N, K> { static constexpr int rows = M, cols = N; };

template <class Use, int M, int N, int K, class T, class Layout>
struct fragment {
    static constexpr int rows = tile_shape<Use, M, N, K>::rows, cols = tile_shape<Use, M, N, K>::cols;
    static constexpr int num_elements = rows * cols;
    T x[num_elements];   // element (r, c) at x[r * cols + c]
};

namespace detail {
inline float as_float(float v) { return v; }
inline float as_float(__nv_bfloat16 v) { return __bfloat162float(v); }
inline void assign(float& d, float v) { d = v; }
inline void assign(__nv_bfloat16& d, float v) { d = __float2bfloat16(v); }

// The warp's lanes must agree on an operation's arguments (and all be there: the shuffles stop
// the emulator otherwise); the pointer must be 32-byte aligned, the leading dimension a
// multiple of 16 bytes.
inline void check(const void* ptr, unsigned ldm, size_t element_bytes, int layout, const char* op) {
    const uint64_t mine = (uint64_t)(uintptr_t)ptr ^ ((uint64_t)ldm << 48) ^ ((uint64_t)layout << 47);
    for (int m = 1; m < 32; m *= 2)
        if (__shfl_xor_sync(0xffffffffu, mine, m) != mine) ::cuda_emulator::wmma_misuse(op, "the warp's lanes pass different pointers, leading dimensions or layouts");
    if ((uintptr_t)ptr % 32) ::cuda_emulator::wmma_misuse(op, "the pointer is not 256-bit aligned");
    if ((ldm * element_bytes) % 16) ::cuda_emulator::wmma_misuse(op, "the leading dimension is not a multiple of 16 bytes");
}
}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout, class V>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, V v) {
    for (int i = 0; i < f.num_elements; i++) detail::assign(f.x[i], (float)v);
}

// A or B from memory in the fragment's own layout (row_major: (r, c) at ptr[r * ldm + c]).
template <class Use, int M, int N, int K, class T, class Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const T* ptr, unsigned ldm) {
    static_assert(sizeof(Layout) > 0, "matrix_a and matrix_b fragments name their layout");
    constexpr bool row = std::is_same<Layout, row_major>::value;
    detail::check(ptr, ldm, sizeof(T), row, "load_matrix_sync");
    for (int r = 0; r < f.rows; r++)
        for (int c = 0; c < f.cols; c++) f.x[r * f.cols + c] = row ? ptr[(size_t)r * ldm + c] : ptr[(size_t)c * ldm + r];
}

// The accumulator from memory in the layout given.
template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* ptr, unsigned ldm, layout_t layout) {
    detail::check(ptr, ldm, sizeof(float), layout, "load_matrix_sync");
    for (int r = 0; r < f.rows; r++)
        for (int c = 0; c < f.cols; c++)
            f.x[r * f.cols + c] = layout == mem_row_major ? ptr[(size_t)r * ldm + c] : ptr[(size_t)c * ldm + r];
}

// Every lane holds the whole tile; each stores its 32nd share of the elements.
template <int M, int N, int K>
void store_matrix_sync(float* ptr, const fragment<accumulator, M, N, K, float>& f, unsigned ldm, layout_t layout) {
    detail::check(ptr, ldm, sizeof(float), layout, "store_matrix_sync");
    for (int i = (int)(::cuda_emulator::here().linear & 31); i < f.num_elements; i += 32) {
        const int r = i / f.cols, c = i % f.cols;
        (layout == mem_row_major ? ptr[(size_t)r * ldm + c] : ptr[(size_t)c * ldm + r]) = f.x[i];
    }
}

// d = a b + c in fp32, the products of the 16-bit inputs exact, summed in k order.
// Every lane holds the whole tile, so the 32 lanes of a warp multiply the same fragments: the
// last product's inputs and result are kept (per CPU thread: a warp's lanes run on one), and a
// lane whose a, b and c equal them bit for bit copies the result (the same bits it would
// compute) instead of doing the M N K multiply-adds again: 1 product a warp, not 32.
template <int M, int N, int K, class T, class LA, class LB>
void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, T, LA>& a,
              const fragment<matrix_b, M, N, K, T, LB>& b, const fragment<accumulator, M, N, K, float>& c) {
    ::cuda_emulator::syncwarp();
    struct Last { bool valid; T a[M * K], b[K * N]; float c[M * N], d[M * N]; };
    static thread_local Last last = {};
    if (!last.valid || std::memcmp(last.a, a.x, sizeof last.a) || std::memcmp(last.b, b.x, sizeof last.b) ||
        std::memcmp(last.c, c.x, sizeof last.c)) {
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                float acc = c.x[m * N + n];
                for (int k = 0; k < K; k++) acc += detail::as_float(a.x[m * K + k]) * detail::as_float(b.x[k * N + n]);
                last.d[m * N + n] = acc;
            }
        std::memcpy(last.a, a.x, sizeof last.a), std::memcpy(last.b, b.x, sizeof last.b);
        std::memcpy(last.c, c.x, sizeof last.c), last.valid = true;
    }
    std::memcpy(d.x, last.d, sizeof last.d);   // d may be c: c was read above
}
}  // namespace wmma
}  // namespace nvcuda
