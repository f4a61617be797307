// gemm_bf16.cpp — C = alpha * bf16(op(A)) * bf16(op(B)) + beta * C, row-major (gemm_bf16.h).
//
// With Intel AMX: the GotoBLAS loops of gemm.cpp around AMX's tdpbf16ps
// -----------------------------------------------------------------------------------------
// tdpbf16ps multiplies a 16 x 32 bf16 tile A (16 rows of 32 k, 64 bytes a row) by a 32 x 16
// bf16 tile B stored as 16 rows of k pairs (row p holds, for each of the 16 columns, the
// elements k = 2p and 2p + 1 side by side) and adds the 16 x 16 fp32 results into a third tile:
// 8,192 multiply-adds an instruction, where a 512-bit fp32 FMA does 16. So the operands are
// packed (and rounded to bf16 on the way, vcvtne2ps2bf16) into exactly those tiles:
//   A block (mc x kc): strips of 16 rows; strip s, depth step t (32 k) is one 1 KiB tile:
//       Ap[((s * steps + t) * 16 + r) * 32 + k % 32]
//   B panel (kc x nc): slivers of 16 columns; sliver j, depth step t is one 1 KiB tile:
//       Bp[((j * steps + t) * 16 + (k % 32) / 2) * 32 + c * 2 + k % 2]
// rows, columns and depths past the edges zero. The kernel keeps a 32 x 32 block of C in four
// tiles (2 strips x 2 slivers: tiles 0..3), loads two A tiles (4, 5) and two B tiles (6, 7) a
// depth step and issues four tdpbf16ps. With alpha 1 and beta 0 or 1 (every product of the
// model) a whole block is summed in C itself: its tiles start from zero, from C (beta 1, or a
// later depth block) or from the bias (one row loaded 16 times: stride 0), and are stored into C
// (the ReLU of the linear layers' epilogue then runs over the block after the last depth block).
// Otherwise, and on the edges, the tiles are stored aside and C updated from them (alpha * sum +
// beta * C, or + bias, on the first depth block, C + alpha * sum on the next ones). A C far
// larger than the caches and written once (the classifier's logits, 131 MB on the small config)
// is stored past the caches (streaming stores): it would not stay in them, and each plain store
// reads its line first; this halved the logits' time on a 2-core Xeon with AMX.
// Loops (each thread on its band of C, as gemm.cpp's): for NC columns, for KC depths, pack the
// B panel; for MC rows, pack the A block; for each 32-column pair of slivers (in L1), for each
// 32-row pair of strips: the kernel. Packing converts 32 floats to bf16 at a time; where the
// source runs the other way (A transposed: the weight gradients' dY^T; B transposed: the
// forward's W^T) 16 x 16 blocks of 32-bit values are transposed in registers first. A B that
// many products read (decoding's weights) can be packed once, whole (sgemm_bf16_pack_b: every
// depth block's slivers of all columns, in order); a panel is then a run of it, read in place.
//
// With AVX512-BF16 and no AMX: the same packing, loops and tiles around vdpbf16ps
// -----------------------------------------------------------------------------------------
// vdpbf16ps adds the two products of a bf16 pair with another pair to each of 16 fp32 lanes, so
// a B tile's row of pairs is already one operand; the other is an A row's pair for the same k,
// broadcast. The kernel keeps 8 rows x 32 columns of C in 16 registers (kernel_dp below); the
// B panel is 2,048 columns wide. Measured on a 2-core AMD Zen 5 (make bench-gemm-bf16, the 11
// products of a training step): 660-930 GFLOP/s where our fp32 sgemm does 400-480, 1.65-1.97x.
//
// Elsewhere: each operand rounded to bf16 into an fp32 buffer, then sgemm.
#include "cpu/gemm_bf16.h"

#include "cpu/amx.h"
#include "cpu/gemm.h"
#include "cpu/kernel_common.h"

#include <algorithm>
#include <atomic>
#include <cerrno>   // program_invocation_short_name (GNU)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    ((defined(__clang__) && __clang_major__ >= 9) || (!defined(__clang__) && __GNUC__ >= 10))
#define GEMM_BF16_AVX512 1   // the packing and the vdpbf16ps kernel (AVX512-BF16) are compiled
#define BF16_TARGET __attribute__((target("avx512bf16")))
#if defined(CPU_AMX)
#define GEMM_BF16_AMX 1      // and the AMX kernels
#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512bf16")))
#endif
// GCC 12.2 warns "'__Y' may be used uninitialized" inside the intrinsics that take an
// _mm512_undefined_*() pass-through (GCC bug 105593, fixed in 12.3): silence that warning.
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

float round_bf16(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) {   // NaN: quiet, truncated
        u = (u | 0x00400000u) & 0xffff0000u;
    } else {
        u += 0x7fffu + ((u >> 16) & 1u);   // round to nearest, ties to even
        u &= 0xffff0000u;
    }
    std::memcpy(&x, &u, 4);
    return x;
}

namespace {

// The paths, by bf16_kernel's names.
enum class Kernel { AMX, AVX512BF16, SGEMM, AUTOMATIC };
const char* const KERNEL_NAMES[] = {"amx", "avx512bf16", "sgemm"};

// bf16_use_kernel's choice.
Kernel& chosen_kernel() {
    static Kernel chosen = Kernel::AUTOMATIC;
    return chosen;
}

Kernel kernel_named(const std::string& name) {
    for (int k = 0; k < 3; k++)
        if (name == KERNEL_NAMES[k]) return (Kernel)k;
    return Kernel::AUTOMATIC;
}

// TRANSFORMER_BF16_KERNEL's path; unset: the fastest available, AMX only if TRANSFORMER_AMX
// allows it (cpu/amx.h), vdpbf16ps not on a CPU that lists AMX-BF16 whether or not the OS lets
// this process use it (on such a Xeon, Sapphire Rapids, vdpbf16ps measured half the multiply-adds
// a second of fp32 FMAs, so there the choice without AMX stays sgemm). A name that is not a path
// this build and CPU have stops the program.
Kernel kernel_from_environment() {
    const char* v = std::getenv("TRANSFORMER_BF16_KERNEL");
    if (v && !bf16_kernel_available(v)) {
        std::fprintf(stderr, "%s: error: TRANSFORMER_BF16_KERNEL=%s: %s\n", program_invocation_short_name, v,
                     kernel_named(v) == Kernel::AUTOMATIC ? "amx, avx512bf16 or sgemm"
                                                          : "this build or CPU has no such path");
        std::exit(1);
    }
    if (v) return kernel_named(v);
    if (amx_from_environment() && bf16_kernel_available("amx")) return Kernel::AMX;
    return bf16_kernel_available("avx512bf16") && !cpu_lists_amx_bf16() ? Kernel::AVX512BF16 : Kernel::SGEMM;
}

// bf16_use_kernel's path, or the environment's (read on first use, not in a static initializer,
// which another translation unit's might precede).
Kernel current_kernel() {
    if (chosen_kernel() != Kernel::AUTOMATIC) return chosen_kernel();
    static const Kernel automatic = kernel_from_environment();
    return automatic;
}

// ---------------------------------------------------------------------------------------------
// Without AMX: rows x cols of a (row stride ld) rounded into dst (row stride cols).
void round_into(const float* a, int rows, int cols, int ld, float* dst) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) dst[(size_t)r * cols + c] = round_bf16(a[(size_t)r * ld + c]);
}

// op(X) (rows x cols) stored as X (cols x rows when transposed) rounded into a dense copy (row
// stride *ld: its stored width).
std::vector<float> rounded_copy(bool trans, int rows, int cols, const float* X, int ldx, int* ld) {
    const int sr = trans ? cols : rows, sc = trans ? rows : cols;
    std::vector<float> x((size_t)sr * sc);
    round_into(X, sr, sc, ldx, x.data());
    *ld = sc;
    return x;
}

void gemm_rounded(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                  int lda, const float* B, int ldb, float beta, float* C, int ldc, GemmEpilogue epilogue) {
    int la, lb;
    const std::vector<float> a = rounded_copy(trans_a, M, K, A, lda, &la), b = rounded_copy(trans_b, K, N, B, ldb, &lb);
    sgemm(trans_a, trans_b, M, N, K, alpha, a.data(), la, b.data(), lb, beta, C, ldc, epilogue);
}

#ifdef GEMM_BF16_AVX512
// ---------------------------------------------------------------------------------------------
using cpu_kernels::round_up;
using cpu_kernels::thread_count;

// Block sizes, measured (make bench-gemm-bf16, 2 threads, the geometric mean of its 11 products:
// MC 64 / NC 512 1,069 GFLOP/s, MC 128 / NC 1024 931-950; KC 1024 or 2048 no better). KC is
// also the numerics' depth blocking: each depth block's products are added to C in turn.
constexpr int KC = 512;    // depth of a packed block: 16 steps of 32
constexpr int MC = 64;     // A block 64 x 512 bf16 = 64 KiB (L2)
constexpr int NC = 512;    // B panel 512 x 512 bf16 = 512 KiB (L2)
constexpr int TILE = 512;  // bf16 elements of a tile (16 rows x 64 bytes)
constexpr int PACK_AHEAD = 512;   // pack_a's row-wise prefetch distance in floats: one block row
// The depths (source rows) ahead that a tile packed across rows asks for, into L2 only: rows
// lda apart map to few L1 sets (4 KiB apart, all to one set of Zen 5's 12-way L1), so 32 rows
// prefetched into L1 were evicted by the 32 being read; into L2, two steps ahead, the weight
// gradients' TN products took 5-10% less time (make bench-gemm-bf16, Zen 5: small dW2 2.86 ->
// 2.72 ms, dW1 2.87 -> 2.66, base dW1 10.66 -> 9.80; the others within 1%).
constexpr int PREFETCH_DEPTHS = 64;
constexpr double STREAM_BYTES = 64e6;   // a C larger than this, written once, streams (see above)

// Strided view of a logical matrix: element (r, c) at p[r * rs + c * cs]; one stride is 1.
struct View {
    const float* p;
    long rs, cs;
    const float* at(long r, long c) const { return p + r * rs + c * cs; }
};

using cpu_kernels::first_lanes;

// 16 x 16 32-bit values transposed in registers: r[i] lane j <-> r[j] lane i.
BF16_TARGET inline void transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; i++) {   // (r0 r1) interleaved: lane L: r0[4L] r1[4L] r0[4L+1] r1[4L+1]
        // (maskz with every lane: the plain form's undefined pass-through trips GCC 12's "used
        // uninitialized" warning at -O1, GCC bug 105593, as gemm.cpp's max)
        t[2 * i] = _mm512_maskz_unpacklo_epi32((__mmask16)0xFFFF, r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 4; g++) {   // u[4g + j], 128-bit lane L: column 4L + j of rows 4g..4g+3
        r[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
        r[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
        r[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
        r[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    for (int j = 0; j < 4; j++) {   // the 128-bit lanes of u[j], u[4+j], u[8+j], u[12+j] transposed
        const __m512i p = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x44), q = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xEE);
        const __m512i s = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x44), u = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xEE);
        t[j] = _mm512_shuffle_i32x4(p, s, 0x88);
        t[4 + j] = _mm512_shuffle_i32x4(p, s, 0xDD);
        t[8 + j] = _mm512_shuffle_i32x4(q, u, 0x88);
        t[12 + j] = _mm512_shuffle_i32x4(q, u, 0xDD);
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

// 32 floats (lanes past n zero) as 32 bf16, in order.
BF16_TARGET inline __m512i bf16x32(const float* x, int n) {
    const __m512 lo = _mm512_maskz_loadu_ps(first_lanes(n), x), hi = _mm512_maskz_loadu_ps(first_lanes(n - 16), x + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

// Two rows of 16 floats (k and k + 1; lanes past n zero) as 16 pairs: (a[c], b[c]) for c = 0..15.
BF16_TARGET inline __m512i bf16_pairs(const float* a, const float* b, int n) {
    const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(first_lanes(n), b),
                                                      _mm512_maskz_loadu_ps(first_lanes(n), a));
    const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                           23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(order, both);
}

// A block: rows x kc of op(A) into strips of 16 rows x steps tiles (Ap's layout above), read
// along the source's rows. When a row's k values are contiguous, row by row, each row from start
// to end (the order the hardware prefetchers follow best: 2-3% of the products' time against
// strip by strip). When A is transposed (the weight gradients' dY^T), depth step by depth step, so
// that the 32 source rows of a step are read across all the strips at once, not 64 bytes of each
// at a stride of lda per strip; each tile prefetches its strip's next two steps (those rows come
// from memory, and the packing waited for them) into L2 (PREFETCH_DEPTHS).
BF16_TARGET void pack_a(const View& a, int rows, int kc, uint16_t* dst) {
    const int steps = round_up(kc, 32) / 32, strips = round_up(rows, 16) / 16;
    if (a.cs == 1) {
        for (int r = 0; r < 16 * strips; r++)
            for (int t = 0; t < steps; t++) {
                // the two lines PACK_AHEAD floats on (in a later row past this one's end) on
                // their way: the rows' 2 KiB runs are too short for the hardware prefetcher to
                // catch up with (Zen 5, NN 4,100 x 256 x 1,024 on one core: 380 -> 460 GFLOP/s)
                const int ahead = 32 * t + PACK_AHEAD, ar = r + ahead / kc, ac = ahead % kc;
                if (ar < rows) {
                    _mm_prefetch((const char*)a.at(ar, ac), _MM_HINT_T0);
                    _mm_prefetch((const char*)a.at(ar, ac + 16), _MM_HINT_T0);
                }
                uint16_t* row = dst + ((size_t)(r / 16) * steps + t) * TILE + 32 * (r % 16);
                _mm512_store_si512(row, r < rows ? bf16x32(a.at(r, 32 * t), std::min(32, kc - 32 * t)) : _mm512_setzero_si512());
            }
        return;
    }
    for (int t = 0; t < steps; t++)   // a.rs == 1: 16 rows of a depth are contiguous; transposed 16 x 16
        for (int s = 0; s < strips; s++) {
            uint16_t* tile = dst + ((size_t)s * steps + t) * TILE;
            const int k0 = 32 * t, nk = std::min(32, kc - k0), r0 = 16 * s, nr = std::min(16, rows - r0);
            for (int k = k0 + 32; k < std::min(k0 + 32 + PREFETCH_DEPTHS, kc); k++) _mm_prefetch((const char*)a.at(r0, k), _MM_HINT_T1);
            __m512i lo[16], hi[16];
            for (int k = 0; k < 16; k++) {
                lo[k] = k < nk ? _mm512_castps_si512(_mm512_maskz_loadu_ps(first_lanes(nr), a.at(r0, k0 + k))) : _mm512_setzero_si512();
                hi[k] = k + 16 < nk ? _mm512_castps_si512(_mm512_maskz_loadu_ps(first_lanes(nr), a.at(r0, k0 + 16 + k))) : _mm512_setzero_si512();
            }
            transpose16(lo);
            transpose16(hi);
            for (int r = 0; r < 16; r++)
                _mm512_store_si512(tile + 32 * r, (__m512i)_mm512_cvtne2ps_pbh(_mm512_castsi512_ps(hi[r]), _mm512_castsi512_ps(lo[r])));
        }
}

// B panel: kc x cols of op(B) into slivers of 16 columns x steps tiles (Bp's layout above), taken
// along the source's rows as pack_a's; when a depth's columns are contiguous (B not transposed:
// W in dX = dY W, X in dW = dY^T X) each tile prefetches its sliver's next two steps into L2.
BF16_TARGET void pack_b(const View& b, int kc, int cols, uint16_t* dst) {
    const int steps = round_up(kc, 32) / 32, slivers = round_up(cols, 16) / 16;
    for (int i = 0; i < slivers * steps; i++) {
        const int j = b.rs == 1 ? i / steps : i % slivers, t = b.rs == 1 ? i % steps : i / slivers;
        uint16_t* tile = dst + ((size_t)j * steps + t) * TILE;
        const int k0 = 32 * t, nk = std::min(32, kc - k0), c0 = 16 * j, nc = std::min(16, cols - c0);
        if (b.cs == 1) {   // a depth's columns are contiguous: rows k, k + 1 paired
            for (int k = k0 + 32; k < std::min(k0 + 32 + PREFETCH_DEPTHS, kc); k++) _mm_prefetch((const char*)b.at(k, c0), _MM_HINT_T1);
            for (int p = 0; p < 16; p++) {
                const int k = k0 + 2 * p;
                __m512i v = _mm512_setzero_si512();
                if (2 * p + 1 < nk) v = bf16_pairs(b.at(k, c0), b.at(k + 1, c0), nc);
                else if (2 * p < nk) v = bf16_pairs(b.at(k, c0), b.at(k, c0), nc) & _mm512_set1_epi32(0xffff);
                _mm512_store_si512(tile + 32 * p, v);
            }
            continue;
        }
        // b.rs == 1 (B transposed): a column's k values are contiguous, 32 of them are the
        // column's 16 pairs; 16 columns x 16 pairs transposed
        __m512i col[16];
        for (int c = 0; c < 16; c++) col[c] = c < nc ? bf16x32(b.at(k0, c0 + c), nk) : _mm512_setzero_si512();
        transpose16(col);
        for (int p = 0; p < 16; p++) _mm512_store_si512(tile + 32 * p, col[p]);
    }
}

// How a block of C is stored (gemm.cpp's Update): on the first depth block alpha * sum + (bias
// or beta * C) (C not read when beta == 0), after it C + alpha * sum; the ReLU after the last.
struct Update {
    float alpha, beta;
    bool first_block, last_block;
    const float* bias;   // at the block's first column; nullptr: none
    bool relu;
    bool stream;         // 16 floats on a 64-byte line stored past the caches
};

// C[0:rows, 0:cols] (cols <= 32) from the kernel's sums (sums(r, v): row r's 16 sums of columns
// 16 v to 16 v + 15), as u says.
template <class Sums>
void update_c(Sums sums, int rows, int cols, const Update& u, float* C, long ldc) {
    const __m512 va = _mm512_set1_ps(u.alpha), vb = _mm512_set1_ps(u.beta), zero = _mm512_setzero_ps();
    const bool bias = u.first_block && u.bias, relu = u.last_block && u.relu;
    for (int v = 0; v < 2 && 16 * v < cols; v++) {
        const __mmask16 m = first_lanes(cols - 16 * v);
        const __m512 b = bias ? _mm512_maskz_loadu_ps(m, u.bias + 16 * v) : zero;
        for (int r = 0; r < rows; r++) {
            float* c = C + r * ldc + 16 * v;
            __m512 y = _mm512_mul_ps(_mm512_load_ps(sums(r, v)), va);
            if (!u.first_block) y = _mm512_add_ps(_mm512_maskz_loadu_ps(m, c), y);
            else if (bias) y = _mm512_add_ps(y, b);   // fma(bias, 1, y): a bias put in C, beta 1
            else if (u.beta != 0.0f) y = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, c), vb, y);
            if (relu) y = _mm512_max_ps(y, zero);   // zero where y is NaN, as x > 0 ? x : 0
            if (u.stream && m == 0xFFFF && reinterpret_cast<uintptr_t>(c) % 64 == 0) _mm512_stream_ps(c, y);
            else _mm512_mask_storeu_ps(c, m, y);
        }
    }
}

// One product: the views, sizes and scalars, and C.
struct Problem {
    View a, b;
    int M, N, K;
    float alpha, beta;
    float* C;
    long ldc;
    GemmEpilogue epilogue;   // its bias at C's first column
    // op(B) packed beforehand (sgemm_bf16_pack_b), else nullptr: every depth block's slivers of
    // all `b_slivers` slivers, so a panel is the run starting at its first column's sliver
    const uint16_t* b_tiles = nullptr;
    int b_slivers = 0;

    // A C far larger than the caches (the classifier's logits), written once and with no bias:
    // stored past the caches
    bool stream() const { return (double)M * N * sizeof(float) > STREAM_BYTES && K <= KC && beta == 0.0f && !epilogue.bias; }
    // How the block of C at (row i, column j) of depth block [pc, pc + kc) is stored.
    Update update(int j, int pc, int kc) const {
        return {alpha, beta, pc == 0, pc + kc >= K, epilogue.bias ? epilogue.bias + j : nullptr, epilogue.relu, stream()};
    }
    // The packed panel of depths [pc, pc + 32 * steps) from column jc (a multiple of 16) on.
    const uint16_t* packed_panel(int pc, int steps, int jc) const {
        return b_tiles + ((size_t)(pc / 32) * b_slivers + (size_t)(jc / 16) * steps) * TILE;
    }
};

// Per-thread packing buffers, 64-byte aligned, grown on demand.
struct Buffer {
    uint16_t* p = nullptr;
    size_t n = 0;
    ~Buffer() { std::free(p); }
    uint16_t* get(size_t elements) {
        if (elements > n) {
            std::free(p);
            n = (elements + 31) / 32 * 32;
            p = static_cast<uint16_t*>(std::aligned_alloc(64, n * sizeof(uint16_t)));
            if (!p) {
                std::fprintf(stderr, "%s: error: out of memory allocating %.1f MB for sgemm_bf16's packing\n",
                             program_invocation_short_name, n * sizeof(uint16_t) / 1e6);
                std::exit(1);
            }
        }
        return p;
    }
};
thread_local Buffer tls_a, tls_b;

// A packed A block and B panel: C rows [ic, ic + mc) x columns [jc, jc + nc), depths [pc, pc + kc)
// in `steps` depth steps of 32.
struct Packed {
    const uint16_t *a, *b;
    int ic, mc, jc, nc, pc, kc, steps;
    // The tiles of the strip holding row ir of the block (its first step), and of the sliver
    // holding column jr; the next strip or sliver is next() elements on.
    const uint16_t* strip(int ir) const { return a + (size_t)(ir / 16) * steps * TILE; }
    const uint16_t* sliver(int jr) const { return b + (size_t)(jr / 16) * steps * TILE; }
    size_t next() const { return (size_t)steps * TILE; }
};

// The loops of the header comment over C rows [m0, m1) x columns [n0, n1): for NC columns (nc_max;
// AMX's NC), for KC depths, pack the B panel; for MC rows, pack the A block and hand both to
// blocks(Packed).
template <class Blocks>
BF16_TARGET void for_each_packed(const Problem& p, int m0, int m1, int n0, int n1, int nc_max, Blocks blocks) {
    uint16_t* ap = tls_a.get((size_t)MC * KC);
    uint16_t* panel = p.b_tiles ? nullptr : tls_b.get((size_t)nc_max * KC);
    for (int jc = n0; jc < n1; jc += nc_max) {
        const int nc = std::min(nc_max, n1 - jc);
        for (int pc = 0; pc < p.K; pc += KC) {
            const int kc = std::min(KC, p.K - pc), steps = round_up(kc, 32) / 32;
            const uint16_t* bp = p.b_tiles ? p.packed_panel(pc, steps, jc) : panel;
            if (!p.b_tiles) pack_b({p.b.at(pc, jc), p.b.rs, p.b.cs}, kc, nc, panel);
            for (int ic = m0; ic < m1; ic += MC) {
                const int mc = std::min(MC, m1 - ic);
                pack_a({p.a.at(ic, pc), p.a.rs, p.a.cs}, mc, kc, ap);
                // GCC's _tile_loadd is an asm statement that does not name the memory it reads:
                // keep the compiler from moving the packing's stores past the tile loads
                std::atomic_signal_fence(std::memory_order_seq_cst);
                blocks(Packed{ap, bp, ic, mc, jc, nc, pc, kc, steps});
            }
        }
    }
    if (p.stream()) _mm_sfence();
}

// ---------------------------------------------------------------------------------------------
// With AVX512-BF16 (no AMX: AMD Zen 4 and later, Intel Cooper Lake): vdpbf16ps on the same tiles
// vdpbf16ps adds to each of 16 fp32 lanes the two products of a bf16 pair with another: 32
// multiply-adds an instruction, twice a 512-bit FMA's at the same rate (Zen 5: 545 against 273
// GFLOP/s a core, measured). Row p of a B tile holds, lane c, column c's pair (k = 2p, 2p + 1);
// row r of an A tile holds the row's 32 k in order, so its pair for the same k is the 4 bytes at
// 32 r + 2 p, broadcast to every lane. A block of DP_ROWS = 8 rows x 32 columns (two slivers)
// keeps its 16 sums in registers: a pair step loads 2 B vectors, broadcasts 8 A pairs and
// issues 16 vdpbf16ps. The sums start from zero and C is updated from them after each depth
// block, as update_c says (the same rule for every block, edges or not).
constexpr int DP_ROWS = 8;
// The B panel's width: 2,048 columns (2 MiB, L3), so that an A block is packed a quarter as often
// as with AMX's 512; a sliver pair (32 KiB) is read from it once per A block, into L1. Measured
// (make bench-gemm-bf16, 2 threads, Zen 5): the 11 products' GFLOP/s 1-6% above NC 512 or 1024,
// and MC 128 no better than 64.
constexpr int NC_DP = 2048;

// The R x 16 TN block (R <= DP_ROWS) whose A rows start at a (an A tile's row, first step) and
// whose B slivers start at b (first step; the next sliver `next` elements on), over `steps` depth
// steps, into sums (row r: columns 0..16 TN - 1). Each sum's chain is the same for any R.
template <int TN, int R = DP_ROWS>
BF16_TARGET void kernel_dp(const uint16_t* a, const uint16_t* b, size_t next, int steps, float (*sums)[32]) {
    __m512 acc[R][TN];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < TN; v++) acc[r][v] = _mm512_setzero_ps();
    for (int t = 0; t < steps; t++, a += TILE, b += TILE)
        for (int q = 0; q < 16; q++) {
            __m512bh bv[TN];
            for (int v = 0; v < TN; v++) bv[v] = (__m512bh)_mm512_load_si512(b + v * next + 32 * q);
            for (int r = 0; r < R; r++) {
                int32_t pair;
                std::memcpy(&pair, a + 32 * r + 2 * q, 4);
                const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
                for (int v = 0; v < TN; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
            }
        }
    for (int r = 0; r < R; r++)
        for (int v = 0; v < TN; v++) _mm512_store_ps(sums[r] + 16 * v, acc[r][v]);
}

// kernel_dp over the first `rows` rows, in a block of 1, 2, 4 or DP_ROWS rows: a small batch's few
// rows (one sentence is one row in greedy decoding, four at beam 4) not summed as 8, most of them
// the strip's zero padding. With the two threads from 2^17 multiply-adds against a packed B
// (gemm_parallel), on 2 Zen 4 cores: one row against the small model's weights 25-52 -> 57-144
// GFLOP/s, four rows 99-210 -> 201-425.
template <int TN>
BF16_TARGET void kernel_dp_rows(int rows, const uint16_t* a, const uint16_t* b, size_t next, int steps,
                                float (*sums)[32]) {
    if (rows == 1) kernel_dp<TN, 1>(a, b, next, steps, sums);
    else if (rows == 2) kernel_dp<TN, 2>(a, b, next, steps, sums);
    else if (rows <= 4) kernel_dp<TN, 4>(a, b, next, steps, sums);
    else kernel_dp<TN>(a, b, next, steps, sums);
}

// C rows [m0, m1) x columns [n0, n1) with vdpbf16ps: for each 32-column pair of slivers (in L1),
// for each 8 rows of the A block, the kernel, then C updated.
BF16_TARGET void gemm_band_dp(const Problem& p, int m0, int m1, int n0, int n1) {
    alignas(64) float sums[DP_ROWS][32];
    for_each_packed(p, m0, m1, n0, n1, NC_DP, [&](const Packed& k) {
        for (int jr = 0; jr < k.nc; jr += 32)
            for (int ir = 0; ir < k.mc; ir += DP_ROWS) {
                const uint16_t* a = k.strip(ir) + 32 * (ir % 16);
                const int rows = std::min(DP_ROWS, k.mc - ir), cols = std::min(32, k.nc - jr);
                float* c = p.C + (size_t)(k.ic + ir) * p.ldc + k.jc + jr;
                for (int r = 0; r < rows; r++)   // C's lines on their way while the kernel runs
                    for (int j = 0; j < cols; j += 16) _mm_prefetch((const char*)(c + r * p.ldc + j), _MM_HINT_T0);
                if (cols > 16) kernel_dp_rows<2>(rows, a, k.sliver(jr), k.next(), k.steps, sums);
                else kernel_dp_rows<1>(rows, a, k.sliver(jr), k.next(), k.steps, sums);
                update_c([&](int r, int v) { return sums[r] + 16 * v; }, rows, cols, p.update(k.jc + jr, k.pc, k.kc), c,
                         p.ldc);
            }
    });
}

#ifdef GEMM_BF16_AMX
// ---------------------------------------------------------------------------------------------
// With AMX: the tile kernels

// A 32 x 32 block (TM strips x TN slivers of 16) of the product over `steps` depth steps: a, the
// first strip's tiles; b, the first sliver's (the next strip or sliver is `steps` tiles on).
template <int TM, int TN>
AMX_TARGET void kernel(const uint16_t* a, const uint16_t* b, int steps, float (*acc)[16][16]) {
    _tile_zero(0);
    if (TN == 2) _tile_zero(1);
    if (TM == 2) {
        _tile_zero(2);
        if (TN == 2) _tile_zero(3);
    }
    const size_t next = (size_t)steps * TILE;
    for (int t = 0; t < steps; t++, a += TILE, b += TILE) {
        _tile_loadd(6, b, 64);
        if (TN == 2) _tile_loadd(7, b + next, 64);
        _tile_loadd(4, a, 64);
        _tile_dpbf16ps(0, 4, 6);
        if (TN == 2) _tile_dpbf16ps(1, 4, 7);
        if (TM == 2) {
            _tile_loadd(5, a + next, 64);
            _tile_dpbf16ps(2, 5, 6);
            if (TN == 2) _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, acc[0], 64);
    if (TN == 2) _tile_stored(1, acc[1], 64);
    if (TM == 2) {
        _tile_stored(2, acc[2], 64);
        if (TN == 2) _tile_stored(3, acc[3], 64);
    }
}

// A whole 32 x 32 block summed in C itself (alpha 1): the four tiles start from `from` (C for
// beta 1 or a later depth block; the bias, one row read 16 times with stride 0) or from zero
// when it is null, take the `steps` depth steps and are stored into C. No round trip through
// memory for the sums and no pass over C besides the tiles' loads and stores.
AMX_TARGET void kernel_in_c(const uint16_t* a, const uint16_t* b, int steps, const float* from, long from_ld,
                            float* C, long ldc) {
    if (from) {
        const float* low = from + 16 * from_ld;
        _tile_loadd(0, from, from_ld * 4);
        _tile_loadd(1, from + 16, from_ld * 4);
        _tile_loadd(2, low, from_ld * 4);
        _tile_loadd(3, low + 16, from_ld * 4);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    const size_t next = (size_t)steps * TILE;
    for (int t = 0; t < steps; t++, a += TILE, b += TILE) {
        _tile_loadd(6, b, 64);
        _tile_loadd(7, b + next, 64);
        _tile_loadd(4, a, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a + next, 64);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, C, ldc * 4);
    _tile_stored(1, C + 16, ldc * 4);
    _tile_stored(2, C + 16 * ldc, ldc * 4);
    _tile_stored(3, C + 16 * ldc + 16, ldc * 4);
}

// The ReLU over a 32 x 32 block of C, in place (zero where C is NaN, as x > 0 ? x : 0).
void relu_block(float* C, long ldc) {
    const __m512 zero = _mm512_setzero_ps();
    for (int r = 0; r < 32; r++)
        for (int v = 0; v < 32; v += 16) _mm512_storeu_ps(C + r * ldc + v, _mm512_max_ps(_mm512_loadu_ps(C + r * ldc + v), zero));
}

// A 32 x 32 block of the packed operands (rows ir, columns jr of k's block) with the tiles.
// With alpha 1 and beta 0 or 1 (every product of the model) and no streaming, a whole block is
// summed in C itself (kernel_in_c); otherwise, and on the edges, through update_c.
AMX_TARGET void amx_block(const Problem& p, const Packed& k, int ir, int jr) {
    alignas(64) float acc[4][16][16];
    const int rows = std::min(32, k.mc - ir), cols = std::min(32, k.nc - jr);
    const uint16_t *a = k.strip(ir), *b = k.sliver(jr);
    float* c = p.C + (size_t)(k.ic + ir) * p.ldc + k.jc + jr;
    const bool in_c = !p.stream() && p.alpha == 1.0f && (p.beta == 0.0f || p.beta == 1.0f);
    if (in_c && rows == 32 && cols == 32) {
        const float* bias = p.epilogue.bias ? p.epilogue.bias + k.jc + jr : nullptr;
        if (k.pc > 0 || p.beta != 0.0f) kernel_in_c(a, b, k.steps, c, p.ldc, c, p.ldc);
        else kernel_in_c(a, b, k.steps, bias, 0, c, p.ldc);
        if (p.epilogue.relu && k.pc + k.kc >= p.K) relu_block(c, p.ldc);
        return;
    }
    if (rows > 16 && cols > 16) kernel<2, 2>(a, b, k.steps, acc);
    else if (rows > 16) kernel<2, 1>(a, b, k.steps, acc);
    else if (cols > 16) kernel<1, 2>(a, b, k.steps, acc);
    else kernel<1, 1>(a, b, k.steps, acc);
    update_c([&](int r, int v) { return acc[2 * (r / 16) + v][r % 16]; }, rows, cols, p.update(k.jc + jr, k.pc, k.kc),
             c, p.ldc);
}

// C rows [m0, m1) x columns [n0, n1) with the tiles, configured on entry and released on return:
// for each 32-column pair of slivers (in L1), for each 32-row pair of strips, amx_block.
AMX_TARGET void gemm_band_amx(const Problem& p, int m0, int m1, int n0, int n1) {
    static const TileConfig config;
    _tile_loadconfig(&config);
    for_each_packed(p, m0, m1, n0, n1, NC, [&](const Packed& k) {
        for (int jr = 0; jr < k.nc; jr += 32)
            for (int ir = 0; ir < k.mc; ir += 32) amx_block(p, k, ir, jr);
    });
    _tile_release();
}
#endif

// C cut into one band per thread, by rows (32-row units) when M >= N, else by columns, each
// band computed by band(p, m0, m1, n0, n1). A block's place in its band's loops starts on a
// multiple of 32 rows and columns of C whatever the thread count, so C is bitwise the same.
void gemm_parallel(const Problem& p, void (*band)(const Problem&, int, int, int, int)) {
    // (a packed B, decoding's weights, not packed again by each thread: two threads from fewer
    // multiply-adds, as sgemm_packed's few rows)
    const int nth = (double)p.M * p.N * p.K <= (p.b_tiles ? 1 << 17 : 1 << 20) ? 1 : thread_count();
    (void)nth;   // without OpenMP
    const bool by_rows = p.M >= p.N;
    const int units = round_up(by_rows ? p.M : p.N, 32) / 32;
#ifdef _OPENMP
#pragma omp parallel num_threads(nth) if (nth > 1)
#endif
    {
        int t = 0, nt = 1;
#ifdef _OPENMP
        t = omp_get_thread_num(), nt = omp_get_num_threads();
#endif
        const int u0 = (int)((long)units * t / nt) * 32, u1 = (int)((long)units * (t + 1) / nt) * 32;
        if (u0 < u1 && by_rows && u0 < p.M) band(p, u0, std::min(p.M, u1), 0, p.N);
        if (u0 < u1 && !by_rows && u0 < p.N) band(p, 0, p.M, u0, std::min(p.N, u1));
    }
}
#endif

}  // namespace

const char* bf16_kernel() { return KERNEL_NAMES[(int)current_kernel()]; }

bool bf16_kernel_built(const std::string& name) {
    if (name == "sgemm") return true;
#ifdef GEMM_BF16_AVX512
    if (name == "avx512bf16") return true;
#endif
#ifdef GEMM_BF16_AMX
    if (name == "amx") return true;
#endif
    return false;
}

bool bf16_kernel_available(const std::string& name) {
    if (!bf16_kernel_built(name)) return false;
    if (name == "amx") return amx_available(AmxType::BF16);
    if (name == "avx512bf16") return cpu_lists_avx512_bf16();
    return true;
}

std::string bf16_kernel_reason() {
    if (const char* v = std::getenv("TRANSFORMER_BF16_KERNEL")) return std::string("TRANSFORMER_BF16_KERNEL=") + v;
    if (!bf16_kernel_built("avx512bf16")) return "this build has no bf16 kernels (they need AVX-512 and GCC 10 or clang 9)";
    if (bf16_kernel_available("amx") && current_kernel() != Kernel::AMX) return "TRANSFORMER_AMX=0";
    if (cpu_lists_amx_bf16())
        return current_kernel() == Kernel::AMX ? "AMX-BF16"
                                               : "this CPU's AMX-BF16 is closed to this process (Linux 5.16 or later opens it)";
    return bf16_kernel_available("avx512bf16") ? "AVX512-BF16" : "this CPU has neither AMX-BF16 nor AVX512-BF16";
}

bool bf16_use_kernel(const std::string& name) {
    if (!name.empty() && !bf16_kernel_available(name)) return false;
    chosen_kernel() = kernel_named(name);
    return true;
}

void sgemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                int lda, const float* B, int ldb, float beta, float* C, int ldc, GemmEpilogue epilogue) {
    check_epilogue(beta, epilogue, "sgemm_bf16");
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {   // sgemm scales C alone when K or alpha is 0
        sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, epilogue);
        return;
    }
#ifdef GEMM_BF16_AVX512
    const Kernel kernel = current_kernel();
    const Problem p{trans_a ? View{A, 1, lda} : View{A, lda, 1}, trans_b ? View{B, 1, ldb} : View{B, ldb, 1},
                    M, N, K, alpha, beta, C, ldc, epilogue};
#ifdef GEMM_BF16_AMX
    if (kernel == Kernel::AMX) return gemm_parallel(p, gemm_band_amx);
#endif
    if (kernel == Kernel::AVX512BF16) return gemm_parallel(p, gemm_band_dp);
#endif
    gemm_rounded(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, epilogue);
}

Bf16PackedB sgemm_bf16_pack_b(bool trans_b, int N, int K, const float* B, int ldb) {
    Bf16PackedB packed;
    packed.N = N, packed.K = K, packed.kernel = bf16_kernel();
    if (N <= 0 || K <= 0) return packed;
#ifdef GEMM_BF16_AVX512
    if (current_kernel() != Kernel::SGEMM) {   // as for_each_packed packs its panels, every column at once
        const int slivers = round_up(N, 16) / 16, steps = K / KC * (KC / 32) + round_up(K % KC, 32) / 32;
        packed.tiles.resize((size_t)slivers * steps * TILE);
        const View b = trans_b ? View{B, 1, ldb} : View{B, ldb, 1};
        for (int pc = 0; pc < K; pc += KC)
            pack_b({b.at(pc, 0), b.rs, b.cs}, std::min(KC, K - pc), N, packed.tiles.data() + (size_t)(pc / 32) * slivers * TILE);
        return packed;
    }
#endif
    int ld;
    packed.rounded = rounded_copy(trans_b, K, N, B, ldb, &ld);
    packed.sgemm = sgemm_pack_b(trans_b, N, K, packed.rounded.data(), ld);
    return packed;
}

void sgemm_bf16_packed(bool trans_a, int M, float alpha, const float* A, int lda, const Bf16PackedB& b,
                       float beta, float* C, int ldc, GemmEpilogue epilogue) {
    check_epilogue(beta, epilogue, "sgemm_bf16_packed");
    if (M <= 0 || b.N <= 0) return;
    if (b.K <= 0 || alpha == 0.0f) {   // C scaled alone, B not read
        sgemm(trans_a, false, M, b.N, b.K, alpha, A, lda, nullptr, b.N, beta, C, ldc, epilogue);
        return;
    }
#ifdef GEMM_BF16_AVX512
    const Kernel kernel = kernel_named(b.kernel);
    if (kernel != Kernel::SGEMM) {
        Problem p{trans_a ? View{A, 1, lda} : View{A, lda, 1}, View{nullptr, 0, 1}, M, b.N, b.K, alpha, beta, C, ldc, epilogue};
        p.b_tiles = b.tiles.data();
        p.b_slivers = round_up(b.N, 16) / 16;
#ifdef GEMM_BF16_AMX
        if (kernel == Kernel::AMX) return gemm_parallel(p, gemm_band_amx);
#endif
        return gemm_parallel(p, gemm_band_dp);
    }
#endif
    int la;
    const std::vector<float> a = rounded_copy(trans_a, M, b.K, A, lda, &la);
    sgemm_packed(trans_a, M, alpha, a.data(), la, b.sgemm, beta, C, ldc, epilogue);
}
