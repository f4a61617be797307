// gemm.cpp — the project's SGEMM: C = alpha * op(A) * op(B) + beta * C, row-major.
//
// How a fast GEMM works (GotoBLAS / BLIS design), and how this file maps onto it
// -----------------------------------------------------------------------------------------
// A naive triple loop runs at a few GFLOP/s: every multiply-add waits on a memory load.
// The target machine (AMD EPYC, Zen 4) retires one 512-bit FMA per cycle per core, i.e. 16
// single-precision multiply-adds = 32 flops/cycle, ~117 GFLOP/s per core at 3.66 GHz, but it
// can load only ~2 vectors per cycle from L1 and far less from L2/L3/DRAM. The whole design
// is about feeding the FMA unit from registers and L1/L2, with each byte fetched from slower
// memory reused as many times as possible.
//
// 1. Micro-kernel (registers). C is cut into MR x NR = 12 x 32 tiles. A tile lives in
//    12 x 2 = 24 zmm accumulators for the whole k loop. Each k step loads one row of the B
//    sliver (32 floats = 2 zmm), broadcasts 12 values of the A sliver and does 24 FMAs:
//    14 loads for 24 FMAs, and 24 independent accumulators hide the 4-cycle FMA latency
//    (latency x FMAs per cycle = 4 to 8 chains needed). 24 + 2 + 1 = 27 of 32 registers.
//    Alone, with its operands in L1, it runs at 99% of the FMA peak.
// 2. Packing. The kernel wants, for each k, MR consecutive A values and NR consecutive B
//    values. pack_block copies blocks of op(A) and op(B) into exactly that order
//    ("slivers": A as [k][MR], B as [k][NR]), 64-byte aligned and zero-padded at the edges.
//    This is where the transposes are handled (4 x 4 SSE transposes when the source runs
//    along k, masked row copies when it runs along the sliver), so one kernel serves NN,
//    NT, TN and TT, and the kernel streams unit-stride memory, free of TLB and cache-set
//    conflicts whatever the leading dimensions.
// 3. Cache blocking (the loops around the kernel, gemm_serial):
//        for jc in N step NC        B panel columns   (NC = 2048)
//          for pc in K step kc      depth             (kc <= KC = 1024, K cut evenly)
//            pack B[pc:pc+kc, jc:jc+NC]  -> kc x NC panel, L3 (8 MiB)
//            for ic in M step MC    A block rows      (MC = 96)
//              pack A[ic:ic+MC, pc:pc+kc] -> MC x kc block, L2 (384 KiB)
//              for jr in NC step NR       B sliver kc x NR (128 KiB, L2)
//                for ir in MC step MR     A sliver (48 KiB, L2 -> L1)
//                  micro-kernel: C[ir:ir+MR, jr:jr+NR] (+)= A sliver * B sliver
//    kc is the length of the kernel's k loop: C is read and written once per depth block,
//    so long blocks amortise the C traffic (one block for K <= 1024, which covers most of
//    the model's products). The A block is reused from L2 by all NC/NR B slivers, a B
//    sliver by the MC/MR A slivers (L1/L2), the B panel by all M/MC A blocks (L3).
//    Zen 4's L2 feeds L1 fast enough that slivers larger than L1 cost nothing measurable;
//    the sizes were picked by measurement (KC 256..1024 and MC 96..240 are within ~4%).
// 4. Threads (OpenMP). C is cut into one band per thread, by rows or by columns (a small
//    cost model weighs tile rounding against repacking), and each thread runs the serial
//    blocked product on its band: no barriers, no shared buffers (the cost: each thread
//    packs all of B, or all of A; a few percent at most on the model's shapes). Every C
//    element is computed by one thread in one fixed order, so the result is bitwise the
//    same for any thread count. Inside an existing parallel region we stay serial.
// 5. Small products (M*N*K <= 2^20, e.g. attention's 25x25x64 per (batch, head)) skip
//    packing: a register-blocked kernel (up to 8 rows x 32 columns, masked at the edges)
//    reads A and B in place; only a transposed B is first transposed into a per-thread
//    buffer. Packing would cost as much as the product itself at these sizes.
//
// 6. Packed once. A B that many products read unchanged (decoding's weights, every step) can be
//    packed beforehand, all of it: sgemm_pack_b stores, for each depth block, every sliver of
//    op(B) in turn, so that any panel (columns jc.., a multiple of NR) of any thread's band is
//    a contiguous run of it; sgemm_packed then skips pack_block for B and is otherwise sgemm,
//    but for few rows (M <= 16, decoding's small batches: one sentence is one row, or four at
//    beam 4) and one depth block: the small path's tiles then read the packed slivers in place
//    (gemm_packed_rows), the threads splitting the slivers, rather than transposing B again
//    (the small path) or running 12-row micro-tiles mostly of padding (the blocked one). One
//    row against a 1024 x 256 weight went from 4 to 68 GFLOP/s on 2 Zen 4 cores, 4 rows from
//    16 to 157, the same bits.
//
// Instruction sets. The kernels are written once on Simd (below): AVX-512 (16 floats a
// register, 32 registers) or AVX2 + FMA (8 floats, 16 registers: CPUs without AVX-512, e.g.
// AMD Zen 2/3 and Intel's client cores). AVX2's tile is BLIS's Haswell one, MR x NR = 6 x 16:
// 6 x 2 ymm accumulators + 2 B vectors + 1 broadcast = 15 of 16 registers; its small-product
// tiles go up to 6 rows. Each C element is still one fma chain in k order. On a 2-core Zen 3
// VM (fp32 peak 202 GFLOP/s) the AVX2 kernels took the model's products from 45-50 GFLOP/s
// (plain C++, as the compiler vectorised it) to 85-147. Without either the kernels are
// plain C++ loops (12 x 32 tiles; the compiler vectorises them for whatever -march is given).
// make test runs test_gemm built for each (test_gemm.avx512, .avx2, .plain) where the CPU can.
// Without _OPENMP everything is serial; with -DUSE_OPENBLAS sgemm() simply forwards to
// cblas_sgemm.
#include "cpu/gemm.h"

#include <cerrno>   // program_invocation_short_name (GNU)
#include <cstdio>
#include <cstdlib>

void apply_epilogue(int M, int N, float* C, int ldc, const GemmEpilogue& epilogue) {
    if (!epilogue.bias && !epilogue.relu) return;
    for (int i = 0; i < M; i++) {
        float* c = C + (size_t)i * ldc;
        for (int j = 0; j < N; j++) {
            float v = epilogue.bias ? c[j] + epilogue.bias[j] : c[j];
            c[j] = epilogue.relu ? (v > 0.0f ? v : 0.0f) : v;
        }
    }
}

void check_epilogue(float beta, const GemmEpilogue& epilogue, const char* caller) {
    if (epilogue.bias && beta != 0.0f) {
        std::fprintf(stderr, "error: %s: a bias epilogue with beta = %g (a bias takes beta * C's place: beta must be 0)\n",
                     caller, beta);
        std::abort();
    }
}

#ifdef USE_OPENBLAS
#include <cblas.h>

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc, GemmEpilogue epilogue) {
    check_epilogue(beta, epilogue, "sgemm");
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
    apply_epilogue(M, N, C, ldc, epilogue);   // a pass of its own here
}

SgemmPackedB sgemm_pack_b(bool trans_b, int N, int K, const float* B, int ldb) {
    return {trans_b, N, K, ldb, B, {}};   // nothing to pack: cblas_sgemm packs per call
}

void sgemm_packed(bool trans_a, int M, float alpha, const float* A, int lda, const SgemmPackedB& b,
                  float beta, float* C, int ldc, GemmEpilogue epilogue) {
    sgemm(trans_a, b.trans_b, M, b.N, b.K, alpha, A, lda, b.B, b.ldb, beta, C, ldc, epilogue);
}

#else  // our own implementation

#include "cpu/kernel_common.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512F__) || defined(__SSE2__)
#include <immintrin.h>
#endif

namespace {

using cpu_kernels::thread_count;

// ---------------------------------------------------------------------------------------------
// The vector registers the kernels are written on: Simd::W floats, and a mask naming the
// first n lanes for the partial loads and stores at a tile's edge (lanes past n are neither
// read nor written, so the edge never faults).
#if defined(__AVX512F__)
#define GEMM_SIMD 1
struct Simd {   // AVX-512: 16 floats in a zmm
    static constexpr int W = 16;
    static constexpr bool fast_partial_store = true;   // masked stores run at full speed
    using V = __m512;
    using Mask = __mmask16;
    static Mask first(int n) { return cpu_kernels::first_lanes(n); }
    static V zero() { return _mm512_setzero_ps(); }
    static V set1(float x) { return _mm512_set1_ps(x); }
    static V load(const float* p) { return _mm512_load_ps(p); }   // 64-byte aligned
    static V load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
    static void store(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
    // b where a is NaN. (maskz with every lane: _mm512_max_ps's undefined pass-through trips
    // GCC 12.2's "may be used uninitialized" warning, GCC bug 105593.)
    static V max(V a, V b) { return _mm512_maskz_max_ps((__mmask16)0xFFFF, a, b); }
};
#elif defined(__AVX2__) && defined(__FMA__)
#define GEMM_SIMD 1
struct Simd {   // AVX2 + FMA: 8 floats in a ymm
    static constexpr int W = 8;
    static constexpr bool fast_partial_store = false;   // vmaskmovps stores are slow on AMD
    using V = __m256;
    struct Mask {
        __m256i lanes;   // all ones in the lanes taken
        bool all;        // every lane: a plain load or store (vmaskmov stores are slow on AMD)
    };
    static Mask first(int n) {
        return {_mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), n >= 8};
    }
    static V zero() { return _mm256_setzero_ps(); }
    static V set1(float x) { return _mm256_set1_ps(x); }
    static V load(const float* p) { return _mm256_load_ps(p); }   // 32-byte aligned
    static V load(const float* p, Mask m) { return m.all ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m.lanes); }
    static void store(float* p, Mask m, V v) {
        if (m.all) _mm256_storeu_ps(p, v);
        else _mm256_maskstore_ps(p, m.lanes, v);
    }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
    static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
    static V max(V a, V b) { return _mm256_max_ps(a, b); }   // b where a is NaN
};
#endif

// ---------------------------------------------------------------------------------------------
// Block sizes (see the header comment). MC is a multiple of MR, NC of NR.
#if defined(GEMM_SIMD) && !defined(__AVX512F__)
constexpr int MR = 6;      // micro-tile rows (AVX2): 6 broadcasts per k step
constexpr int NR = 16;     // micro-tile columns: 2 ymm vectors of 8 floats
#else
constexpr int MR = 12;     // micro-tile rows: 12 broadcasts per k step
constexpr int NR = 32;     // micro-tile columns: 2 zmm vectors of 16 floats
#endif
constexpr int KC = 1024;   // max depth of a packed block (C is read/written once per block)
constexpr int MC = 96;     // A block MC*KC*4 B = 384 KiB (L2)
constexpr int NC = 2048;   // B panel KC*NC*4 B = 8 MiB (L3)

// The NR-column slivers that cover n columns (the last one partly padding).
constexpr int slivers_of(int n) { return (n + NR - 1) / NR; }

// Products with M*N*K at or below this (~100^3) take the unpacked small-matrix path, always
// single-threaded: measured on Zen 4 it beats packing up to well beyond this size when the
// operands sit in L2 (e.g. 111 vs 102 GFLOP/s at 256^3), and below it a second thread is not
// worth waking. Everything above is blocked, and parallel when threads are available.
constexpr double SMALL_MNK = 1 << 20;

// A packed op(B) of one depth block (K <= KC) meets at most this many rows in the small tiles,
// reading its slivers in place (gemm_packed_rows); on one thread up to PACKED_ROWS_SERIAL_MNK.
constexpr int PACKED_ROWS = 16;
constexpr double PACKED_ROWS_SERIAL_MNK = 1 << 17;

// Strided view of a logical matrix: element (r, c) is at p[r * rs + c * cs].
// op(A) and op(B) are described this way, so transposes are just swapped strides.
struct View {
    const float* p;
    long rs, cs;
    const float* at(long r, long c) const { return p + r * rs + c * cs; }
};

// How the kernels store a block of C: C = relu(alpha * sum + (bias ? bias[j] : beta * C)) for
// column j of the block. Over several depth blocks, the first one takes the caller's beta and
// bias, the later ones add to C (beta 1, no bias), and only the last one applies the ReLU.
struct Update {
    float alpha, beta;
    const float* bias;   // at the block's first column; nullptr: none
    bool relu;
    Update at_column(int j) const { return {alpha, beta, bias ? bias + j : nullptr, relu}; }
};

// ---------------------------------------------------------------------------------------------
// Per-thread, 64-byte aligned scratch that grows on demand and is reused across calls.
class Scratch {
public:
    ~Scratch() { std::free(p_); }
    float* get(size_t n) {
        if (n > cap_) {
            std::free(p_);
            cap_ = (n + 15) & ~size_t(15);
            p_ = static_cast<float*>(std::aligned_alloc(64, cap_ * sizeof(float)));
            if (!p_) {   // (inside OpenMP's parallel regions: an exception could not leave them)
                std::fprintf(stderr, "%s: error: out of memory allocating %.1f MB for sgemm's packing\n",
                             program_invocation_short_name, cap_ * sizeof(float) / 1e6);
                std::exit(1);
            }
        }
        return p_;
    }
private:
    float* p_ = nullptr;
    size_t cap_ = 0;
};
thread_local Scratch tls_a, tls_b, tls_small;

// C = relu(beta * C + bias) on an M x N block: the product when K or alpha is 0 (beta == 0
// writes exact zeros before the bias).
void scale_c(int M, int N, float beta, float* C, int ldc, const GemmEpilogue& epilogue) {
    for (int i = 0; i < M; i++) {
        float* c = C + (size_t)i * ldc;
        if (beta == 0.0f) std::memset(c, 0, sizeof(float) * N);
        else if (beta != 1.0f) for (int j = 0; j < N; j++) c[j] *= beta;
    }
    apply_epilogue(M, N, C, ldc, epilogue);
}

// ---------------------------------------------------------------------------------------------
// Packing. Both operands are packed into slivers of width R (MR for A, NR for B):
// dst[k * R + r] = element r of the sliver at depth k, rows r >= rows zero-filled.
// "Copy" is the case where the R values are contiguous in the source (A transposed,
// B not transposed); "transpose" the case where the k values are (A not transposed,
// B transposed).

// d[0:R] = s[0:n], zero-filled beyond n (n may exceed R: only R values are copied).
template <int R>
inline void copy_row(const float* s, int n, float* d) {
#ifdef GEMM_SIMD
    // R not whole vectors (AVX2's 6-wide A slivers): element by element, where a masked store
    // would be slow (the TN products of the weight gradients on Zen 3: 0.83-0.85 of OpenBLAS's
    // speed on average with masked stores, 0.90-0.95 so)
    if constexpr (R % Simd::W != 0 && !Simd::fast_partial_store) {
        int j = 0;
        for (; j < std::min(n, R); j++) d[j] = s[j];
        for (; j < R; j++) d[j] = 0.0f;
        return;
    }
    for (int j = 0; j < R; j += Simd::W)   // a lane past n loads as zero
        Simd::store(d + j, Simd::first(R - j), Simd::load(s + j, Simd::first(n - j)));
#else
    int j = 0;
    for (; j < std::min(n, R); j++) d[j] = s[j];
    for (; j < R; j++) d[j] = 0.0f;
#endif
}

// Block whose R values at each depth are contiguous: src[k * ld + r]. The source is read
// row by row (long sequential runs) and each row is spread over the slivers.
template <int R>
void pack_copy(const float* src, long ld, int rows, int kc, float* dst) {
#ifdef __AVX512F__
    if constexpr (R < Simd::W) {
        // Records of R < 16 floats (the 12-row A slivers): whole 16-float stores, each spilling
        // over the first lanes of the sliver's next record, which the next depth writes (the
        // last depth masked); whole loads where the source row holds 16 floats from r0.
        for (int k = 0; k < kc; k++, src += ld)
            for (int r0 = 0; r0 < rows; r0 += R) {
                float* d = dst + (size_t)r0 * kc + (size_t)k * R;
                const Simd::V v = rows - r0 >= Simd::W ? _mm512_loadu_ps(src + r0) : Simd::load(src + r0, Simd::first(std::min(R, rows - r0)));
                if (k + 1 < kc) _mm512_storeu_ps(d, v);
                else Simd::store(d, Simd::first(R), v);
            }
        return;
    }
#endif
    for (int k = 0; k < kc; k++, src += ld)
        for (int r0 = 0; r0 < rows; r0 += R)
            copy_row<R>(src + r0, rows - r0, dst + (size_t)r0 * kc + (size_t)k * R);
}

#ifdef __SSE2__
// Transposes 4 source rows x 4 depths: dst[k * R + r] = src[r * ld + k] for r, k < 4.
// (Measured on Zen 4 this 128-bit version is as fast as 256/512-bit shuffle variants, and
// twice as fast as scattering 512-bit lanes with masked stores.)
inline void transpose_4x4(const float* src, long ld, int R, float* dst) {
    __m128 r0 = _mm_loadu_ps(src), r1 = _mm_loadu_ps(src + ld);
    __m128 r2 = _mm_loadu_ps(src + 2 * ld), r3 = _mm_loadu_ps(src + 3 * ld);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(dst, r0);
    _mm_storeu_ps(dst + R, r1);
    _mm_storeu_ps(dst + 2 * R, r2);
    _mm_storeu_ps(dst + 3 * R, r3);
}
#endif

// Block whose k values are contiguous: dst[k * R + r] = src[r * ld + k] for r < rows,
// zero for rows <= r < R. Whole 4 x 4 blocks go through transpose_4x4, walking 12 source
// rows at a time along k (12 sequential streams: measured faster than 4 rows at a time, or
// all rows at once when rows is large); leftover rows and depths are copied one by one.
void pack_transpose(const float* src, long ld, int rows, int kc, int R, float* dst) {
    int r4 = 0, k4 = 0;
#ifdef __SSE2__
    r4 = rows / 4 * 4;
    k4 = kc / 4 * 4;
    for (int g = 0; g < r4; g += 12)
        for (int k0 = 0; k0 < k4; k0 += 4)
            for (int r = g; r < std::min(r4, g + 12); r += 4)
                transpose_4x4(src + r * ld + k0, ld, R, dst + (size_t)k0 * R + r);
#endif
    for (int k = 0; k < kc; k++) {
        float* d = dst + (size_t)k * R;
        for (int r = k < k4 ? r4 : 0; r < rows; r++) d[r] = src[r * ld + k];
        for (int r = rows; r < R; r++) d[r] = 0.0f;
    }
}

// Packs a rows x kc block of a view (rows along the sliver width) into slivers of width R.
template <int R>
void pack_block(const View& v, int rows, int kc, float* dst) {
    if (v.cs != 1) {
        pack_copy<R>(v.p, v.cs, rows, kc, dst);
        return;
    }
    for (int r0 = 0; r0 < rows; r0 += R)
        pack_transpose(v.at(r0, 0), v.rs, std::min(R, rows - r0), kc, R, dst + (size_t)r0 * kc);
}

// ---------------------------------------------------------------------------------------------
// Micro-kernel: C[0:mr, 0:nr] = alpha * (a sliver . b sliver) + beta * C (or + bias, then the
// ReLU: the Update), with the full MR x NR product always computed (padding is zero) and only
// mr x nr stored.
#ifdef GEMM_SIMD
constexpr int NV = NR / Simd::W;   // vectors per tile row

// The value stored for the vector of sums acc at c (masked lanes), column j of the update's
// block: relu(alpha * acc + (bias[j..] or beta * c)); c is not read when beta == 0 (NaN there
// ignored). bias + v equals fma(bias, 1, v): the bits of a bias put in C and beta = 1.
inline Simd::V scaled_update(Simd::V acc, const float* c, Simd::Mask m, const Update& u, int j) {
    Simd::V v = Simd::mul(acc, Simd::set1(u.alpha));
    if (u.bias) v = Simd::add(v, Simd::load(u.bias + j, m));
    else if (u.beta != 0.0f) v = Simd::fma(Simd::load(c, m), Simd::set1(u.beta), v);
    if (u.relu) v = Simd::max(v, Simd::zero());
    return v;
}

void micro_kernel(int kc, const float* __restrict a, const float* __restrict b, float* c,
                  int ldc, int mr, int nr, const Update& u) {
    Simd::V acc[MR][NV];
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) acc[r][v] = Simd::zero();
    for (int r = 0; r < mr; r++)  // the C tile is needed only at the end: fetch it now
        for (int j = 0; j < NR; j += 16) _mm_prefetch((const char*)(c + (size_t)r * ldc + j), _MM_HINT_T0);
#pragma GCC unroll 2
    for (int k = 0; k < kc; k++) {
        _mm_prefetch((const char*)(a + 8 * MR), _MM_HINT_T0);  // A sliver, 8 steps ahead
        Simd::V bv[NV];
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) bv[v] = Simd::load(b + v * Simd::W);
#pragma GCC unroll 12
        for (int r = 0; r < MR; r++) {
            const Simd::V ar = Simd::set1(a[r]);
#pragma GCC unroll 2
            for (int v = 0; v < NV; v++) acc[r][v] = Simd::fma(ar, bv[v], acc[r][v]);
        }
        a += MR;
        b += NR;
    }
    Simd::Mask m[NV];   // columns to store
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) m[v] = Simd::first(nr - v * Simd::W);
    // Fully unrolled with a row test (not a loop to mr), so acc is never spilled to memory.
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) {
        if (r >= mr) break;
        float* cr = c + (size_t)r * ldc;
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            float* cv = cr + v * Simd::W;
            Simd::store(cv, m[v], scaled_update(acc[r][v], cv, m[v], u, v * Simd::W));
        }
    }
}
#else
// The value stored for the sum acc at c, column j of the update's block (the SIMD version's).
inline float scaled_update(float acc, const float* c, const Update& u, int j) {
    float v = u.alpha * acc;
    if (u.bias) v += u.bias[j];
    else if (u.beta != 0.0f) v += u.beta * *c;
    return u.relu ? (v > 0.0f ? v : 0.0f) : v;
}

void micro_kernel(int kc, const float* __restrict a, const float* __restrict b, float* c,
                  int ldc, int mr, int nr, const Update& u) {
    float acc[MR][NR] = {};
    for (int k = 0; k < kc; k++, a += MR, b += NR)
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < NR; j++) acc[r][j] += a[r] * b[j];
    for (int r = 0; r < mr; r++) {
        float* cr = c + (size_t)r * ldc;
        for (int j = 0; j < nr; j++) cr[j] = scaled_update(acc[r][j], cr + j, u, j);
    }
}
#endif

// ---------------------------------------------------------------------------------------------
// One product to compute: C (M x N, row stride ldc) = alpha * op(A) op(B) + beta * C.
struct Problem {
    View a, b;          // op(A) as [M,K], op(B) as [K,N]
    int M, N, K;
    float alpha, beta;
    float* C;
    int ldc;
    GemmEpilogue epilogue;   // its bias at C's first column
    // op(B) already packed (sgemm_packed): its panels, their width (N rounded up to NR) and the
    // column of the packed matrix that column 0 of this (band's) B is
    const float* b_panels = nullptr;
    int b_width = 0, b_col0 = 0;
    // The packed B panel of depths [pc, pc + kc) (kc: depth_block(K), or what is left) and
    // columns [jc, ...), jc a multiple of NR: each depth block holds every sliver in turn
    const float* packed_panel(int pc, int kc, int jc) const {
        return b_panels + (size_t)pc * b_width + (size_t)(b_col0 + jc) * kc;
    }
};

// Runs every micro-tile of one packed A block (mc x kc) against one packed B panel (kc x nc).
void macro_kernel(int mc, int nc, int kc, const float* ap, const float* bp, float* C, int ldc,
                  const Update& u) {
    for (int jr = 0; jr < nc; jr += NR) {
        const Update at = u.at_column(jr);
        for (int ir = 0; ir < mc; ir += MR)
            micro_kernel(kc, ap + (size_t)ir * kc, bp + (size_t)jr * kc,
                         C + (size_t)ir * ldc + jr, ldc, std::min(MR, mc - ir),
                         std::min(NR, nc - jr), at);
    }
}

// Depth of the packed blocks: K cut into equal blocks of at most KC (K = 4100 gives
// 4 x 1025, not 4 x 1024 + 4: a thin last block would cost a whole extra pass over C).
int depth_block(int K) {
    int blocks = (K + KC - 1) / KC;
    return (K + blocks - 1) / blocks;
}

// Single-threaded blocked product (the loops of the header comment).
void gemm_serial(const Problem& p) {
    float* bp = tls_b.get((size_t)KC * std::min(NC, slivers_of(p.N) * NR));
    float* ap = tls_a.get((size_t)KC * MC);  // (depth_block(K) <= KC)
    const int kc_max = depth_block(p.K);
    for (int jc = 0; jc < p.N; jc += NC) {
        int nc = std::min(NC, p.N - jc);
        for (int pc = 0; pc < p.K; pc += kc_max) {
            int kc = std::min(kc_max, p.K - pc);
            // later depth blocks accumulate; the bias goes with the first, the ReLU with the last
            const bool first = pc == 0, last = pc + kc >= p.K;
            const Update u{p.alpha, first ? p.beta : 1.0f, first && p.epilogue.bias ? p.epilogue.bias + jc : nullptr,
                           last && p.epilogue.relu};
            // op(B) rows pc.., columns jc..: slivers run along N, depth along K.
            const float* b_panel = bp;
            if (p.b_panels) b_panel = p.packed_panel(pc, kc, jc);
            else pack_block<NR>(View{p.b.at(pc, jc), p.b.cs, p.b.rs}, nc, kc, bp);
            for (int ic = 0; ic < p.M; ic += MC) {
                int mc = std::min(MC, p.M - ic);
                pack_block<MR>(View{p.a.at(ic, pc), p.a.rs, p.a.cs}, mc, kc, ap);
                macro_kernel(mc, nc, kc, ap, b_panel, p.C + (size_t)ic * p.ldc + jc, p.ldc, u);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Small products: no packing of A; op(B) rows must be unit-stride (b.cs == 1).
#ifdef GEMM_SIMD
// The largest tile: SMALL_ROWS x NV vectors of accumulators, NV vectors of B and a broadcast
// in registers (AVX-512: 8 x 2 + 3 of 32 zmm; AVX2: 6 x 2 + 3 of 16 ymm).
constexpr int SMALL_ROWS = Simd::W == 16 ? 8 : 6;

// R rows x (W * NV) columns of C, columns masked to n (<= W * NV). Up to 16 (AVX2: 12)
// accumulators: enough independent FMA chains to hide the FMA latency.
template <int R, int TV>
void small_tile(const View& a, const float* b, long ldb, int K, int n, const Update& u,
                float* c, int ldc) {
    Simd::Mask m[TV];
#pragma GCC unroll 2
    for (int v = 0; v < TV; v++) m[v] = Simd::first(n - v * Simd::W);
    // (All loops over R and TV fully unrolled, so that acc lives in registers.)
    Simd::V acc[R][TV];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) acc[r][v] = Simd::zero();
    for (int k = 0; k < K; k++) {
        Simd::V bv[TV];
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) bv[v] = Simd::load(b + k * ldb + v * Simd::W, m[v]);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const Simd::V ar = Simd::set1(*a.at(r, k));
#pragma GCC unroll 2
            for (int v = 0; v < TV; v++) acc[r][v] = Simd::fma(ar, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int v = 0; v < TV; v++) {
            float* cr = c + (size_t)r * ldc + v * Simd::W;
            Simd::store(cr, m[v], scaled_update(acc[r][v], cr, m[v], u, v * Simd::W));
        }
}

// rows (1..R) x W*TV columns: the tile with that many rows.
template <int TV, int R = SMALL_ROWS>
void small_rows(int rows, const View& a, const float* b, long ldb, int K, int n, const Update& u,
                float* c, int ldc) {
    if constexpr (R > 1)
        if (rows < R) return small_rows<TV, R - 1>(rows, a, b, ldb, K, n, u, c, ldc);
    small_tile<R, TV>(a, b, ldb, K, n, u, c, ldc);
}

// Rows are cut into equal blocks of at most SMALL_ROWS (25 -> 7, 6, 6, 6 rather than
// 8, 8, 8, 1), columns into chunks of two vectors with a masked last one.
void gemm_small_kernel(const View& a, const float* b, long ldb, int M, int N, int K,
                       const Update& u, float* C, int ldc) {
    int blocks = (M + SMALL_ROWS - 1) / SMALL_ROWS;
    for (int bi = 0, i = 0; bi < blocks; bi++) {
        int rows = (M - i) / (blocks - bi);  // spread the remainder over the last blocks
        View ai{a.at(i, 0), a.rs, a.cs};
        for (int j = 0; j < N; j += 2 * Simd::W) {
            int n = std::min(2 * Simd::W, N - j);
            float* c = C + (size_t)i * ldc + j;
            if (n > Simd::W) small_rows<2>(rows, ai, b + j, ldb, K, n, u.at_column(j), c, ldc);
            else small_rows<1>(rows, ai, b + j, ldb, K, n, u.at_column(j), c, ldc);
        }
        i += rows;
    }
}
#else
void gemm_small_kernel(const View& a, const float* b, long ldb, int M, int N, int K,
                       const Update& u, float* C, int ldc) {
    constexpr int JB = 256;  // row chunk accumulated on the stack
    float acc[JB];
    for (int i = 0; i < M; i++)
        for (int j0 = 0; j0 < N; j0 += JB) {
            int n = std::min(JB, N - j0);
            for (int j = 0; j < n; j++) acc[j] = 0.0f;
            for (int k = 0; k < K; k++) {
                float av = *a.at(i, k);
                const float* bk = b + k * ldb + j0;
                for (int j = 0; j < n; j++) acc[j] += av * bk[j];
            }
            float* c = C + (size_t)i * ldc + j0;
            for (int j = 0; j < n; j++) c[j] = scaled_update(acc[j], c + j, u, j0 + j);
        }
}
#endif

void gemm_small(const Problem& p) {
    const float* b = p.b.p;
    long ldb = p.b.rs;
    if (p.b.cs != 1) {  // transposed B: copy op(B) into a K x N unit-stride buffer first
        float* t = tls_small.get((size_t)p.K * p.N);
        pack_transpose(p.b.p, p.b.cs, p.N, p.K, p.N, t);
        b = t;
        ldb = p.N;
    }
    gemm_small_kernel(p.a, b, ldb, p.M, p.N, p.K, {p.alpha, p.beta, p.epilogue.bias, p.epilogue.relu}, p.C, p.ldc);
}

// Few rows against a packed op(B) of one depth block (decoding's weights at a small batch: a
// sentence is one row in greedy search, four at beam 4): the small tiles read the packed
// slivers in place (K x NR each, unit stride), so B is neither transposed again (gemm_small) nor
// met by micro-tiles of MR rows, most of them padding (gemm_serial). Each C element is the one
// chain of both those paths (from zero, k ascending, then the update): the same bits. Slivers
// [s0, s1) of the panel, each against every row before the next, so that it stays in L1/L2.
void gemm_packed_rows(const Problem& p, int s0, int s1) {
    const Update u{p.alpha, p.beta, p.epilogue.bias, p.epilogue.relu};
    for (int s = s0; s < s1; s++) {
        const int j = s * NR;
        gemm_small_kernel(p.a, p.packed_panel(0, p.K, j), NR, p.M, std::min(NR, p.N - j), p.K,
                          u.at_column(j), p.C + j, p.ldc);
    }
}

#ifdef _OPENMP
// ---------------------------------------------------------------------------------------------
// Threading. C is cut into nth bands, by rows or by columns, and each thread computes its
// band as an independent serial product: no barriers, no shared buffers. The price is that
// one operand is packed by every thread (by rows: each thread packs its rows of A and all of
// B; by columns: all of A and its columns of B): a few percent at most on the model's
// shapes. In exchange the threads never wait for each other, which keeps the product fast
// on a machine shared with other processes (where a descheduled thread stalls every barrier).

// Estimated cycles of the busiest thread: padded micro-tile work plus packing.
double split_cost(const Problem& p, int nth, bool by_rows) {
    auto round_up = [](long x, long m) { return (x + m - 1) / m * m; };
    long rows = by_rows ? round_up((p.M + nth - 1) / nth, MR) : round_up(p.M, MR);
    long cols = by_rows ? round_up(p.N, NR) : round_up((p.N + nth - 1) / nth, NR);
    double compute = (double)rows * cols * p.K / 32.0;            // 32 multiply-adds per cycle
    double pack_a = (double)rows * p.K * ((cols + NC - 1) / NC);  // A repacked per B panel
    double pack_b = p.b_panels ? 0.0 : (double)cols * p.K;       // packed once beforehand
    return compute + 0.5 * (pack_a + pack_b);                      // ~2 packed floats per cycle
}

// Thread t of nth computes its band of C: rows [t*band, ...) or columns [t*band, ...),
// bands being whole micro-tiles.
void gemm_band(const Problem& p, int t, int nth, bool by_rows) {
    int n = by_rows ? p.M : p.N, unit = by_rows ? MR : NR;
    int band = ((n + nth - 1) / nth + unit - 1) / unit * unit;
    int lo = std::min(n, t * band), hi = std::min(n, lo + band);
    if (lo >= hi) return;
    Problem q = p;
    if (by_rows) {
        q.a.p = p.a.at(lo, 0);
        q.C = p.C + (size_t)lo * p.ldc;
        q.M = hi - lo;
    } else {
        q.b.p = p.b.at(0, lo);
        q.b_col0 = p.b_col0 + lo;
        q.C = p.C + lo;
        q.N = hi - lo;
        if (p.epilogue.bias) q.epilogue.bias = p.epilogue.bias + lo;
    }
    gemm_serial(q);
}

void gemm_parallel(const Problem& p, int nth) {
    bool by_rows = split_cost(p, nth, true) <= split_cost(p, nth, false);
#pragma omp parallel num_threads(nth)
    gemm_band(p, omp_get_thread_num(), omp_get_num_threads(), by_rows);
}

// gemm_packed_rows with the slivers cut into nth runs, one a thread.
void gemm_packed_rows_parallel(const Problem& p, int nth) {
    const int slivers = slivers_of(p.N);
#pragma omp parallel num_threads(nth)
    {
        const long t = omp_get_thread_num(), n = omp_get_num_threads();
        gemm_packed_rows(p, (int)(slivers * t / n), (int)(slivers * (t + 1) / n));
    }
}

#endif  // _OPENMP

}  // namespace

// Every entry point's product (caller names it in the epilogue's error): nothing for an empty C,
// C scaled alone when K or alpha is 0; else unpacked when small, else blocked, in parallel
// outside a parallel region.
static void run(const Problem& p, const char* caller) {
    check_epilogue(p.beta, p.epilogue, caller);
    if (p.M <= 0 || p.N <= 0) return;
    if (p.K <= 0 || p.alpha == 0.0f) {
        scale_c(p.M, p.N, p.beta, p.C, p.ldc, p.epilogue);
        return;
    }
    if (p.b_panels && p.M <= PACKED_ROWS && p.K <= KC) {
#ifdef _OPENMP
        const int nth = thread_count();
        if (nth > 1 && (double)p.M * p.N * p.K > PACKED_ROWS_SERIAL_MNK) {
            gemm_packed_rows_parallel(p, nth);
            return;
        }
#endif
        gemm_packed_rows(p, 0, slivers_of(p.N));
        return;
    }
    if ((double)p.M * p.N * p.K <= SMALL_MNK) {
        gemm_small(p);
        return;
    }
#ifdef _OPENMP
    int nth = thread_count();
    if (nth > 1) {
        gemm_parallel(p, nth);
        return;
    }
#endif
    gemm_serial(p);
}

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc, GemmEpilogue epilogue) {
    run(Problem{trans_a ? View{A, 1, lda} : View{A, lda, 1},
                trans_b ? View{B, 1, ldb} : View{B, ldb, 1},
                M, N, K, alpha, beta, C, ldc, epilogue}, "sgemm");
}

SgemmPackedB sgemm_pack_b(bool trans_b, int N, int K, const float* B, int ldb) {
    SgemmPackedB packed{trans_b, N, K, ldb, B, {}};
    if (N <= 0 || K <= 0) return packed;
    const int width = cpu_kernels::round_up(N, NR), kc_max = depth_block(K);
    packed.panels.resize((size_t)width * K);
    const View b = trans_b ? View{B, 1, ldb} : View{B, ldb, 1};
    for (int pc = 0; pc < K; pc += kc_max) {   // as gemm_serial packs them, every column at once
        const int kc = std::min(kc_max, K - pc);
        pack_block<NR>(View{b.at(pc, 0), b.cs, b.rs}, N, kc, packed.panels.data() + (size_t)pc * width);
    }
    return packed;
}

void sgemm_packed(bool trans_a, int M, float alpha, const float* A, int lda, const SgemmPackedB& b,
                  float beta, float* C, int ldc, GemmEpilogue epilogue) {
    Problem p{trans_a ? View{A, 1, lda} : View{A, lda, 1},
              b.trans_b ? View{b.B, 1, b.ldb} : View{b.B, b.ldb, 1},
              M, b.N, b.K, alpha, beta, C, ldc, epilogue};
    p.b_panels = b.panels.data();
    p.b_width = cpu_kernels::round_up(b.N, NR);
    run(p, "sgemm_packed");
}

#endif  // USE_OPENBLAS
