// transformer.cu — the CUDA backend: every op of transformer.h's Backend as CUDA kernels and
// their launchers, in the order and with the names of the CPU ops in transformer.cpp.
//
// One translation unit, as llm.c's train_gpt2.cu: the kernels are short, and next to each
// other a reader sees one op's forward and backward and the CPU loop they replace. Built by
// the Makefile when nvcc is found (for sm_90 plus PTX; CUDA_ARCH= overrides), linked with
// cuBLASLt for the matrix products and CUB (part of the CUDA Toolkit) for one sort; the fused
// attention kernels (TRANSFORMER_ATTENTION=fused) take their products with WMMA (mma.h).
//
// Precision: each launcher is a template over the element type T of activations and of the
// weights the products read (floatX): float in fp32 mode (TF32 off, checked against the CPU
// with tight tolerances) or __nv_bfloat16 in bf16 mode. In both, parameters, gradients, Adam
// state, LayerNorm statistics, softmax, log-sum-exp and the loss are fp32.
// Determinism: no floating-point atomics. Every reduction over rows (bias, LayerNorm gain and
// embedding gradients, the loss, the gradient norm) runs in a fixed order, so a run and its
// resume are bitwise equal on one GPU. cuBLASLt is asked for algorithms without in-place
// split-K reductions for the same reason.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cerrno>   // program_invocation_short_name (GNU)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include <cub/cub.cuh>

#include "transformer.h"
#include "model/search.h"

// ---------------------------------------------------------------------------------------------
// Errors: the call, file and line, and for out-of-memory the option to lower.
// ---------------------------------------------------------------------------------------------
static void cuda_check(cudaError_t e, const char* call, const char* file, int line) {
    if (e == cudaSuccess) return;
    std::fprintf(stderr, "CUDA error (%s:%d): %s: %s\n", file, line, call, cudaGetErrorString(e));
    if (e == cudaErrorMemoryAllocation)
        std::fprintf(stderr, "  out of GPU memory: lower --max-tokens (training; --accum keeps the step's "
                             "size) or --batch-tokens (translation; or --beam)\n");
    std::exit(1);
}
static void cublas_check(cublasStatus_t s, const char* call, const char* file, int line) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    std::fprintf(stderr, "cuBLAS error (%s:%d): %s: %s\n", file, line, call, cublasLtGetStatusString(s));
    std::exit(1);
}
#define CUDA_CHECK(call) cuda_check((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) cublas_check((call), #call, __FILE__, __LINE__)
#define LAUNCH_CHECK() cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

namespace cuda {

typedef __nv_bfloat16 bf16;
namespace wmma = nvcuda::wmma;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }
template <class T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 from_float<bf16>(float x) { return __float2bfloat16(x); }

// 16 bytes of T, the widest load or store of a thread (8 bf16 or 4 floats): what the kernels that
// only move bytes read and write where their tensors allow (16-byte aligned, whole packs).
template <class T>
struct alignas(16) Pack16 {
    static constexpr int N = 16 / sizeof(T);
    T v[N];
};
// Whether n elements at each pointer are whole 16-byte packs on 16-byte boundaries.
__device__ __forceinline__ uintptr_t address_bits() { return 0; }
template <class... Ps>
__device__ __forceinline__ uintptr_t address_bits(const void* p, Ps... ps) { return (uintptr_t)p | address_bits(ps...); }
template <class T, class... Ps>
__device__ __forceinline__ bool packed(size_t n, Ps... ps) {
    return n % Pack16<T>::N == 0 && address_bits(ps...) % 16 == 0;
}

constexpr int THREADS = 256;       // threads of an elementwise block
constexpr int WARPS = 8;           // warps of a row-per-warp block
constexpr int REDUCE_BLOCKS = 512; // fixed: the order of the gradient-norm sum never changes

static unsigned grid_for(size_t n) {
    return (unsigned)std::min<size_t>((n + THREADS - 1) / THREADS, 1u << 20);
}
static unsigned warp_grid(size_t rows) { return (unsigned)((rows + WARPS - 1) / WARPS); }

// Sum / max over the 32 lanes of a warp, every lane receiving the result (a fixed order).
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// Over a block of blockDim.x (a multiple of 32, at most 1024) threads; every thread gets it.
template <class V, class Op>
__device__ V block_reduce(V v, Op op, V* shared /* 32 */) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    V r = shared[0];
    for (int w = 1; w < warps; w++) r = op(r, shared[w]);
    return r;
}
struct Add { template <class V> __device__ V operator()(V a, V b) const { return a + b; } };
struct Max { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };

// Warp index and lane of a row-per-warp kernel.
__device__ __forceinline__ size_t global_warp() { return (size_t)blockIdx.x * WARPS + threadIdx.x / 32; }
__device__ __forceinline__ int lane_id() { return threadIdx.x % 32; }

// §5.4: v, element i of a tensor under dropout, as every site applies it: kept and multiplied
// by scale = 1 / (1 - p) (or 1 where p is 0), or 0.
__device__ __forceinline__ float dropout_value(float v, uint64_t seed, size_t i, float p, float scale) {
    return p <= 0.0f ? v : dropout_keep(seed, i, p) ? __fmul_rn(v, scale) : 0.0f;
}

// =============================================================================================
// The device and its memory
// =============================================================================================
template <class T>
__global__ void convert_weights_kernel(T* w, const float* p, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        w[i] = from_float<T>(p[i]);
}

// =============================================================================================
// §3.4 Embeddings, §3.5 Positional Encoding
// =============================================================================================
// pe (L, d) = sinusoid(pos, c, d) (numerics.h, the CPU's formula).
template <class T>
__global__ void positional_table_kernel(T* pe, int L, int d) {
    const size_t n = (size_t)L * d;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        pe[i] = from_float<T>(sinusoid((int)(i / d), (int)(i % d), d));
}

// x (B, L, d) = dropout(E[tokens] * sqrt(d) + pe[pos0 + l]).
template <class T>
__global__ void embedding_forward_kernel(T* x, const int* tokens, const T* E, const T* pe, int pos0,
                                         int B, int L, int d, float p, uint64_t seed) {
    const size_t n = (size_t)B * L * d;
    const float emb_scale = sqrtf((float)d), keep_scale = 1.0f / (1.0f - p);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / d;
        const int c = (int)(i % d);
        float v = __fadd_rn(__fmul_rn(to_float(E[(size_t)tokens[r] * d + c]), emb_scale),
                            to_float(pe[(size_t)(pos0 + r % L) * d + c]));
        x[i] = from_float<T>(dropout_value(v, seed, i, p, keep_scale));
    }
}

__global__ void iota_kernel(int* v, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v[i] = i;
}

// dE[token] += sqrt(d) * dropout'(dx) for the rows of one token, in row order (rows sorted by
// token, stably): deterministic, and the same fused multiply-adds in the same order as the
// CPU's loop. A warp takes an item (sorted position i, 32 columns) and works only where i starts
// a token's run: it finds the run's end, 32 positions a ballot, and adds the run's rows. Items
// are numbered column group first (item = group * n_rows + i) and the grid strides over them, so
// that a frequent token's run (</s> ends every sentence: 1,000 rows in a batch of 1,000 pairs)
// goes to d / 32 warps of different blocks rather than to one block (on an H100 a block a
// sorted position, 512 threads for its columns, took 2.3 ms for the base model's two embedding
// backwards; the suspected cause: one SM did all of </s>'s loads and dropout hashes). Each lane
// loads RUN_AHEAD rows' gradients before adding them in order.
constexpr int RUN_AHEAD = 16;
template <class T>
__global__ void embedding_backward_kernel(float* dE, const T* dx, const int* sorted_tokens,
                                          const int* sorted_rows, int n_rows, int d, float p,
                                          uint64_t seed) {
    const int lane = lane_id();
    const size_t items = (size_t)n_rows * ((d + 31) / 32);
    const float emb_scale = sqrtf((float)d), keep_scale = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
    for (size_t item = global_warp(); item < items; item += (size_t)gridDim.x * WARPS) {
        const int i = (int)(item % n_rows), c = (int)(item / n_rows) * 32 + lane;
        const int token = sorted_tokens[i];
        if (i > 0 && sorted_tokens[i - 1] == token) continue;   // not a run's start (the whole warp)
        int end = i + 1;   // one past the run's last sorted position
        for (;;) {
            const int j = end + lane;
            const unsigned same = __ballot_sync(0xffffffffu, j < n_rows && sorted_tokens[j] == token);
            if (same != 0xffffffffu) {
                end += __ffs(~same) - 1;   // the first lane past the run (runs are contiguous)
                break;
            }
            end += 32;
        }
        if (c >= d) continue;
        float acc = dE[(size_t)token * d + c];
        for (int j0 = i; j0 < end; j0 += RUN_AHEAD) {
            float g[RUN_AHEAD];
#pragma unroll
            for (int u = 0; u < RUN_AHEAD; u++) {
                g[u] = 0.0f;
                if (j0 + u >= end) continue;
                const size_t e = (size_t)sorted_rows[j0 + u] * d + c;
                g[u] = dropout_value(to_float(dx[e]), seed, e, p, keep_scale);
            }
#pragma unroll
            for (int u = 0; u < RUN_AHEAD; u++)
                if (j0 + u < end) acc = __fmaf_rn(g[u], emb_scale, acc);
        }
        dE[(size_t)token * d + c] = acc;
    }
}

// dpe[l] += dropout'(dx[b, l]) over b in order (learned positions).
template <class T>
__global__ void position_backward_kernel(float* dpe, const T* dx, int B, int L, int d, float p,
                                         uint64_t seed) {
    const size_t n = (size_t)L * d;
    const float keep_scale = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float acc = dpe[i];
        for (int b = 0; b < B; b++) {
            const size_t e = (size_t)b * n + i;
            acc = __fadd_rn(acc, dropout_value(to_float(dx[e]), seed, e, p, keep_scale));
        }
        dpe[i] = acc;
    }
}

// =============================================================================================
// Linear layers: bias gradients (the products themselves are cuBLASLt's, in CudaBackend)
// =============================================================================================
// Deterministic column sums of (rows, cols) terms: partial[chunk][c] over CHUNK_ROWS rows each
// (a block: 32 columns x 8 row lanes, combined in a fixed order), then the chunks
// (column_finish_kernel).
constexpr int CHUNK_ROWS = 256;

template <class Term>
__global__ void column_partials_kernel(float* partial, Term term, int rows, int cols) {
    __shared__ float s[8][33];
    const int c = blockIdx.x * 32 + threadIdx.x, chunk = blockIdx.y;
    const int r0 = chunk * CHUNK_ROWS, r1 = min(rows, r0 + CHUNK_ROWS);
    float acc = 0.0f;
    if (c < cols)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) acc += term(r, c);
    s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float t = s[0][threadIdx.x];
        for (int k = 1; k < 8; k++) t += s[k][threadIdx.x];
        partial[(size_t)chunk * cols + c] = t;
    }
}

// The same sums for rows of 16-byte packs (cols a multiple of P, the tensors on 16-byte
// boundaries): a thread takes P consecutive columns, 16 bytes a load (bias gradients read the
// widest tensors of the backward, d_ff = 2048 columns in the FFN); the order per column is the
// kernel's above. Rows: the functor that gives pack i of the (rows, cols) tensor summed, a
// PlainRows (bias gradients) or a ReluBackwardRows (which writes the pack it makes).
template <class T>
struct PlainRows {
    const T* y;
    __device__ Pack16<T> operator()(size_t i) const { return reinterpret_cast<const Pack16<T>*>(y)[i]; }
};

template <class T, class Rows>
__global__ void column_partials_packed_kernel(float* partial, Rows pack, int rows, int cols) {
    constexpr int P = Pack16<T>::N;
    __shared__ float s[8][32 * P + 1];
    const int c0 = (blockIdx.x * 32 + threadIdx.x) * P, chunk = blockIdx.y;
    const int r0 = chunk * CHUNK_ROWS, r1 = min(rows, r0 + CHUNK_ROWS);
    float acc[P] = {};
    if (c0 < cols)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) {
            const Pack16<T> v = pack(((size_t)r * cols + c0) / P);
            for (int j = 0; j < P; j++) acc[j] += to_float(v.v[j]);
        }
    for (int j = 0; j < P; j++) s[threadIdx.y][threadIdx.x * P + j] = acc[j];
    __syncthreads();
    for (int e = threadIdx.y * 32 + threadIdx.x; e < 32 * P; e += 256) {   // a thread a column
        const int c = blockIdx.x * 32 * P + e;
        if (c >= cols) continue;
        float t = s[0][e];
        for (int k = 1; k < 8; k++) t += s[k][e];
        partial[(size_t)chunk * cols + c] = t;
    }
}

// out (cols) += the sum over chunks of partial (chunks, cols) in a fixed order: a block of 32 x
// FINISH_LANES threads takes 32 columns, lane y adds chunks y, y + FINISH_LANES, ..., then the
// lanes are added in order (up to FINISH_LANES chunks, the chunks in order). A step makes about a
// hundred of these sums (every bias and LayerNorm gradient), one after another on the stream:
// with a thread a column (the kernel before, not timed alone) the base model's LayerNorm
// gradients were 2 blocks on an H100's 132 SMs, each thread reading 196 chunks in a chain.
constexpr int FINISH_LANES = 32;
__global__ void column_finish_kernel(float* out, const float* partial, int chunks, int cols) {
    __shared__ float s[FINISH_LANES][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    float acc = 0.0f;
    if (c < cols)
        for (int k = threadIdx.y; k < chunks; k += FINISH_LANES) acc += partial[(size_t)k * cols + c];
    s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float t = s[0][threadIdx.x];
        for (int k = 1; k < min(chunks, FINISH_LANES); k++) t += s[k][threadIdx.x];
        out[c] += t;
    }
}

// C (n columns of m, column stride ldc) += b (m) per column, then max(0, .) when relu: the bias
// (and ReLU) of a product whose bias cuBLASLt's epilogue cannot read (CudaBackend::matmul).
template <class T>
__global__ void bias_relu_kernel(T* c, const T* b, int m, int n, int ldc, bool relu) {
    const size_t total = (size_t)m * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        T* ci = c + i / m * ldc + i % m;
        const float v = __fadd_rn(to_float(*ci), to_float(b[i % m]));
        *ci = from_float<T>(relu && v < 0.0f ? 0.0f : v);
    }
}

template <class T>
struct RowTerm {   // dY[r, c]: bias gradients, LayerNorm's db
    const T* y;
    __device__ float operator()(int r, int c) const { return to_float(y[(size_t)r * cols + c]); }
    int cols;
};

// =============================================================================================
// §3.3 Position-wise Feed-Forward Networks: the ReLU (its forward is cuBLASLt's epilogue, in
// CudaBackend::linear_relu_forward)
// =============================================================================================
// The FFN's widest tensors (rows x d_ff, three of them): 16 bytes at a time where they allow.
// Pack i of dx = dy where y > 0, else 0, written and returned.
template <class T>
__device__ __forceinline__ Pack16<T> relu_backward_pack(T* dx, const T* dy, const T* y, size_t i) {
    const Pack16<T> g = reinterpret_cast<const Pack16<T>*>(dy)[i], v = reinterpret_cast<const Pack16<T>*>(y)[i];
    Pack16<T> out;
    for (int j = 0; j < Pack16<T>::N; j++) out.v[j] = to_float(v.v[j]) > 0.0f ? g.v[j] : from_float<T>(0.0f);
    reinterpret_cast<Pack16<T>*>(dx)[i] = out;
    return out;
}

template <class T>
__global__ void relu_backward_kernel(T* dx, const T* dy, const T* y, size_t n) {
    const size_t first = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    if (packed<T>(n, dx, dy, y)) {
        for (size_t i = first; i < n / Pack16<T>::N; i += stride) relu_backward_pack(dx, dy, y, i);
        return;
    }
    for (size_t i = first; i < n; i += stride) dx[i] = to_float(y[i]) > 0.0f ? dy[i] : from_float<T>(0.0f);
}

// With the bias gradient of the FFN's first layer: column_partials_packed_kernel over the packs
// of dx as this writes them (each pack is made once: the kernel's threads cover every pack of
// the tensor exactly once), so dx is not read again for its column sums.
template <class T>
struct ReluBackwardRows {
    T* dx;
    const T* dy;
    const T* y;
    __device__ Pack16<T> operator()(size_t i) const { return relu_backward_pack(dx, dy, y, i); }
};

// =============================================================================================
// §5.4 Residual Dropout, §3.1's residual connection, LayerNorm
// =============================================================================================
template <class T>
__global__ void dropout_forward_kernel(T* y, const T* x, size_t n, float p, uint64_t seed) {
    const float scale = 1.0f / (1.0f - p);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = from_float<T>(dropout_value(to_float(x[i]), seed, i, p, scale));
}

// y = x + dropout(f); y may be f.
template <class T>
__global__ void residual_forward_kernel(T* y, const T* f, const T* x, size_t n, float p, uint64_t seed) {
    const float scale = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        y[i] = from_float<T>(__fadd_rn(dropout_value(to_float(f[i]), seed, i, p, scale), to_float(x[i])));
    }
}

constexpr float LN_EPS = 1e-5f;

// A warp's row of d columns, lane by lane: a lane owns the groups of P = Pack16<T>::N consecutive
// columns that start at lane * P, lane * P + 32 P, ...; `vec` (the row's tensors on 16-byte
// boundaries, d a multiple of P) moves a group as one 16-byte access, else column by column
// (columns past d read as 0 and are not written). Either way the same columns are summed in the
// same order, so the result does not depend on the pointers.
template <class T>
__device__ __forceinline__ void load_group(float* v, const T* row, int c0, int d, bool vec) {
    constexpr int P = Pack16<T>::N;
    if (vec) {
        const Pack16<T> p = *reinterpret_cast<const Pack16<T>*>(row + c0);
        for (int j = 0; j < P; j++) v[j] = to_float(p.v[j]);
    } else {
        for (int j = 0; j < P; j++) v[j] = c0 + j < d ? to_float(row[c0 + j]) : 0.0f;
    }
}
template <class T>
__device__ __forceinline__ void store_group(T* row, const float* v, int c0, int d, bool vec) {
    constexpr int P = Pack16<T>::N;
    if (vec) {
        Pack16<T> p;
        for (int j = 0; j < P; j++) p.v[j] = from_float<T>(v[j]);
        *reinterpret_cast<Pack16<T>*>(row + c0) = p;
    } else {
        for (int j = 0; j < P; j++)
            if (c0 + j < d) row[c0 + j] = from_float<T>(v[j]);
    }
}
// The first column of each group a lane owns: for (int c0 = first_group<T>(); c0 < d; c0 += group_stride<T>()).
template <class T> __device__ __forceinline__ int first_group() { return lane_id() * Pack16<T>::N; }
template <class T> __device__ __forceinline__ int group_stride() { return 32 * Pack16<T>::N; }

// One row by one warp: mean, then the biased variance, in fp32; yr in T. A lane reads only the
// columns it owns, so xr may be what the same lane just wrote, and yr may be xr.
template <class T>
__device__ void layernorm_row(T* yr, float* mean, float* rstd, const T* xr, const T* g, const T* b,
                              int d, bool vec) {
    constexpr int P = Pack16<T>::N;
    float sum = 0.0f, x[P];
    for (int c0 = first_group<T>(); c0 < d; c0 += group_stride<T>()) {
        load_group(x, xr, c0, d, vec);
        for (int j = 0; j < P; j++) sum += x[j];   // past d: 0
    }
    const float mu = warp_sum(sum) / d;
    float sq = 0.0f;
    for (int c0 = first_group<T>(); c0 < d; c0 += group_stride<T>()) {
        load_group(x, xr, c0, d, vec);
        for (int j = 0; j < P; j++)   // a constant count: x stays in registers
            if (c0 + j < d) sq += (x[j] - mu) * (x[j] - mu);
    }
    const float rs = 1.0f / sqrtf(warp_sum(sq) / d + LN_EPS);
    for (int c0 = first_group<T>(); c0 < d; c0 += group_stride<T>()) {
        float gv[P], bv[P];
        load_group(x, xr, c0, d, vec);
        load_group(gv, g, c0, d, vec);
        load_group(bv, b, c0, d, vec);
        for (int j = 0; j < P; j++) x[j] = (x[j] - mu) * rs * gv[j] + bv[j];
        store_group(yr, x, c0, d, vec);
    }
    if (lane_id() == 0) {
        *mean = mu;
        *rstd = rs;
    }
}

// One warp per row.
template <class T>
__global__ void layernorm_forward_kernel(T* y, float* mean, float* rstd, const T* x, const T* g,
                                         const T* b, int rows, int d) {
    const size_t r = global_warp();
    if (r >= (size_t)rows) return;
    layernorm_row(y + r * d, &mean[r], &rstd[r], x + r * d, g, b, d, packed<T>(d, y, x, g, b));
}

// One row by one warp: dxr = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) (+ dxr).
template <class T>
__device__ void layernorm_backward_row(T* dxr, float dx_beta, const T* dyr, const T* xr, float mu,
                                       float rs, const T* g, int d, bool vec) {
    constexpr int P = Pack16<T>::N;
    float s1 = 0.0f, s2 = 0.0f, dy[P], x[P], gv[P];
    for (int c0 = first_group<T>(); c0 < d; c0 += group_stride<T>()) {
        load_group(dy, dyr, c0, d, vec);
        load_group(x, xr, c0, d, vec);
        load_group(gv, g, c0, d, vec);
        for (int j = 0; j < P; j++) {
            if (c0 + j >= d) continue;
            const float dxhat = dy[j] * gv[j];
            s1 += dxhat;
            s2 += dxhat * (x[j] - mu) * rs;
        }
    }
    const float m1 = warp_sum(s1) / d, m2 = warp_sum(s2) / d;
    for (int c0 = first_group<T>(); c0 < d; c0 += group_stride<T>()) {
        float old[P] = {};
        load_group(dy, dyr, c0, d, vec);
        load_group(x, xr, c0, d, vec);
        load_group(gv, g, c0, d, vec);
        if (dx_beta != 0.0f) load_group(old, dxr, c0, d, vec);
        for (int j = 0; j < P; j++) {
            const float xhat = (x[j] - mu) * rs;
            const float v = rs * (dy[j] * gv[j] - m1 - xhat * m2);
            x[j] = dx_beta == 0.0f ? v : v + dx_beta * old[j];
        }
        store_group(dxr, x, c0, d, vec);
    }
}

// One warp per row.
template <class T>
__global__ void layernorm_backward_dx_kernel(T* dx, float dx_beta, const T* dy, const T* x,
                                             const float* mean, const float* rstd, const T* g,
                                             int rows, int d) {
    const size_t r = global_warp();
    if (r >= (size_t)rows) return;
    layernorm_backward_row(dx + r * d, dx_beta, dy + r * d, x + r * d, mean[r], rstd[r], g, d,
                           packed<T>(d, dx, dy, x, g));
}

// Fused, post-LN: r = x + dropout(f) (rounded to T, as residual_forward stores it), then
// y = LN(r) from the row just written; r may be f. One warp per row.
template <class T>
__global__ void residual_layernorm_forward_kernel(T* y, T* r, float* mean, float* rstd, const T* f,
                                                  const T* x, const T* g, const T* b, int rows, int d,
                                                  float p, uint64_t seed) {
    constexpr int P = Pack16<T>::N;
    const size_t row = global_warp();
    if (row >= (size_t)rows) return;
    const bool vec = packed<T>(d, y, r, f, x, g, b);
    const float scale = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
    const size_t base = row * d;
    for (int c0 = first_group<T>(); c0 < d; c0 += group_stride<T>()) {
        float fv[P], xv[P];
        load_group(fv, f + base, c0, d, vec);
        load_group(xv, x + base, c0, d, vec);
        for (int j = 0; j < P; j++) xv[j] = __fadd_rn(dropout_value(fv[j], seed, base + c0 + j, p, scale), xv[j]);
        store_group(r + base, xv, c0, d, vec);
    }
    layernorm_row(y + base, &mean[row], &rstd[row], r + base, g, b, d, vec);
}

// LayerNorm with the row in registers for rows of at most G groups a lane (d <= 32 P G; the
// backend takes it for G <= 4: d_model 1024 in bf16, 512 in fp32): plain, y = LN(x) (f null,
// r unused), or the block end above, r = x + dropout(f), y = LN(r), r kept as stored (rounded
// to T). Each tensor moves once (layernorm_row reads its row three times); the sums are
// layernorm_row's, term by term in the same order, so the bits are the same. One warp per row.
template <class T, int G>
__global__ void layernorm_forward_registers_kernel(T* y, T* r, float* mean, float* rstd, const T* f, const T* x,
                                                   const T* g, const T* b, int rows, int d, float p,
                                                   uint64_t seed) {
    constexpr int P = Pack16<T>::N;
    const size_t row = global_warp();
    if (row >= (size_t)rows) return;
    const bool vec = packed<T>(d, y, r, f, x, g, b);
    const float scale = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
    const size_t base = row * d;
    float v[G][P], sum = 0.0f;   // the row (0 past d)
#pragma unroll
    for (int i = 0; i < G; i++) {
        const int c0 = first_group<T>() + i * group_stride<T>();
        float fv[P] = {};
        for (int j = 0; j < P; j++) v[i][j] = 0.0f;
        if (c0 >= d) continue;
        load_group(v[i], x + base, c0, d, vec);
        if (f) {
            load_group(fv, f + base, c0, d, vec);
#pragma unroll
            for (int j = 0; j < P; j++)   // as stored
                v[i][j] = to_float(from_float<T>(__fadd_rn(dropout_value(fv[j], seed, base + c0 + j, p, scale), v[i][j])));
            store_group(r + base, v[i], c0, d, vec);
        }
#pragma unroll
        for (int j = 0; j < P; j++) sum += v[i][j];
    }
    const float mu = warp_sum(sum) / d;
    float sq = 0.0f;
#pragma unroll
    for (int i = 0; i < G; i++) {
        const int c0 = first_group<T>() + i * group_stride<T>();
        if (c0 >= d) continue;
#pragma unroll
        for (int j = 0; j < P; j++)
            if (c0 + j < d) sq += (v[i][j] - mu) * (v[i][j] - mu);
    }
    const float rs = 1.0f / sqrtf(warp_sum(sq) / d + LN_EPS);
#pragma unroll
    for (int i = 0; i < G; i++) {
        const int c0 = first_group<T>() + i * group_stride<T>();
        if (c0 >= d) continue;
        float gv[P], bv[P];
        load_group(gv, g, c0, d, vec);
        load_group(bv, b, c0, d, vec);
#pragma unroll
        for (int j = 0; j < P; j++) v[i][j] = (v[i][j] - mu) * rs * gv[j] + bv[j];
        store_group(y + base, v[i], c0, d, vec);
    }
    if (lane_id() == 0) {
        mean[row] = mu;
        rstd[row] = rs;
    }
}

// Its backward: dx = LN'(dy), df = dropout'(dx) from dx as stored. One warp per row.
template <class T>
__global__ void residual_layernorm_backward_dx_kernel(T* dx, T* df, const T* dy, const T* r,
                                                      const float* mean, const float* rstd, const T* g,
                                                      int rows, int d, float p, uint64_t seed) {
    constexpr int P = Pack16<T>::N;
    const size_t row = global_warp();
    if (row >= (size_t)rows) return;
    const bool vec = packed<T>(d, dx, df, dy, r, g);
    const size_t base = row * d;
    layernorm_backward_row(dx + base, 0.0f, dy + base, r + base, mean[row], rstd[row], g, d, vec);
    const float scale = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
    for (int c0 = first_group<T>(); c0 < d; c0 += group_stride<T>()) {
        float v[P];
        load_group(v, dx + base, c0, d, vec);   // as stored: rounded to T
        for (int j = 0; j < P; j++) v[j] = dropout_value(v[j], seed, base + c0 + j, p, scale);
        store_group(df + base, v, c0, d, vec);
    }
}

// LayerNorm's backward in one pass for rows of at most G groups a lane (d <= 32 P G; the backend
// takes it for G <= 4: d_model 1024 in bf16, 512 in fp32): a warp holds its row's dy, dy * g
// and xhat in registers, so each tensor is read once and dg, db need no pass of their own. A
// warp takes rows_per_warp rows (below); a lane adds its
// columns' dy * xhat and dy over them in row order, then the block adds its warps in order into
// partial (2, blocks, d): dg's terms, then db's (column_finish_kernel adds the blocks).
// dx = rstd * (dy g - mean(dy g) - xhat mean(dy g xhat)) + dx_beta dx; with df, the residual
// block's end: df = dropout'(dx) from dx as stored (rounded to T), dx_beta 0.
// A warp takes its rows one after another, each a wait on memory, so the backend gives a warp
// as few rows as let the grid fill the GPU once (rows_per_warp, at most LN_ROWS_PER_WARP):
// warp w of block k takes rows k WARPS rows_per_warp + w, + WARPS, ...
constexpr int LN_ROWS_PER_WARP = 16;

template <class T, int G>
__global__ void layernorm_backward_fused_kernel(T* dx, float dx_beta, T* df, float* partial, const T* dy,
                                                const T* x, const float* mean, const float* rstd, const T* g,
                                                int rows, int d, float p, uint64_t seed, int rows_per_warp) {
    constexpr int P = Pack16<T>::N;
    extern __shared__ float ln_block_terms[];   // (WARPS, d)
    const bool vec = packed<T>(d, dx, df, dy, x, g);
    const int warp = threadIdx.x / 32;
    const float scale = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
    float dg_terms[G][P] = {}, db_terms[G][P] = {};
    for (int k = 0; k < rows_per_warp; k++) {
        const int r = (blockIdx.x * rows_per_warp + k) * WARPS + warp;
        if (r >= rows) break;
        const size_t base = (size_t)r * d;
        const float mu = mean[r], rs = rstd[r];
        float gy[G][P], xh[G][P], s1 = 0.0f, s2 = 0.0f;   // dy * g, xhat (0 past d)
#pragma unroll
        for (int i = 0; i < G; i++) {
            const int c0 = first_group<T>() + i * group_stride<T>();
            float dyv[P] = {}, xv[P] = {}, gv[P] = {};
            if (c0 < d) {
                load_group(dyv, dy + base, c0, d, vec);
                load_group(xv, x + base, c0, d, vec);
                load_group(gv, g, c0, d, vec);
            }
#pragma unroll
            for (int j = 0; j < P; j++) {
                xh[i][j] = c0 + j < d ? (xv[j] - mu) * rs : 0.0f;
                gy[i][j] = dyv[j] * gv[j];
                s1 += gy[i][j];
                s2 += gy[i][j] * xh[i][j];
                dg_terms[i][j] += dyv[j] * xh[i][j];
                db_terms[i][j] += dyv[j];
            }
        }
        const float m1 = warp_sum(s1) / d, m2 = warp_sum(s2) / d;
#pragma unroll
        for (int i = 0; i < G; i++) {
            const int c0 = first_group<T>() + i * group_stride<T>();
            if (c0 >= d) continue;
            float v[P], old[P] = {};
            if (dx_beta != 0.0f) load_group(old, dx + base, c0, d, vec);
#pragma unroll
            for (int j = 0; j < P; j++) {
                v[j] = rs * (gy[i][j] - m1 - xh[i][j] * m2);
                if (dx_beta != 0.0f) v[j] += dx_beta * old[j];
            }
            store_group(dx + base, v, c0, d, vec);
            if (!df) continue;
#pragma unroll
            for (int j = 0; j < P; j++)   // from dx as stored
                v[j] = dropout_value(to_float(from_float<T>(v[j])), seed, base + c0 + j, p, scale);
            store_group(df + base, v, c0, d, vec);
        }
    }
    for (int half = 0; half < 2; half++) {   // the warps' dg terms, then their db terms
#pragma unroll
        for (int i = 0; i < G; i++)
#pragma unroll
            for (int j = 0; j < P; j++) {
                const int c = first_group<T>() + i * group_stride<T>() + j;
                if (c < d) ln_block_terms[warp * d + c] = half ? db_terms[i][j] : dg_terms[i][j];
            }
        __syncthreads();
        for (int c = threadIdx.x; c < d; c += blockDim.x) {
            float t = ln_block_terms[c];
            for (int w = 1; w < WARPS; w++) t += ln_block_terms[w * d + c];
            partial[((size_t)half * gridDim.x + blockIdx.x) * d + c] = t;
        }
        __syncthreads();
    }
}

template <class T>
struct GainTerm {   // dy * xhat: LayerNorm's dg
    const T* dy;
    const T* x;
    const float* mean;
    const float* rstd;
    int cols;
    __device__ float operator()(int r, int c) const {
        const size_t i = (size_t)r * cols + c;
        return to_float(dy[i]) * (to_float(x[i]) - mean[r]) * rstd[r];
    }
};

// =============================================================================================
// §3.2.1 Scaled Dot-Product Attention, §3.2.2 Multi-Head Attention: one warp per query row
// (sentence, head, position). Scores go to probs, the softmax is taken in place, then the
// context; lanes run over channels for the products (coalesced) and over keys for the softmax.
// =============================================================================================
// dropout(x) of probs entry e, as the forward applied it: kept and divided by 1 - p, or 0.
__device__ __forceinline__ float attention_dropout(float x, uint64_t seed, size_t e, float p_attn) {
    return p_attn <= 0.0f ? x : dropout_keep(seed, e, p_attn) ? x / (1.0f - p_attn) : 0.0f;
}

// The (sentence b, head h, position i) a warp handles among B * H * L rows.
struct HeadRow {
    int b, h, i;
};
__device__ __forceinline__ HeadRow head_row(size_t w, int L, const AttentionShape& s) {
    return {(int)(w / L / s.H), (int)(w / L % s.H), (int)(w % L)};
}

template <class T>
__global__ void attention_forward_kernel(T* ctx, float* probs, const T* q, const T* kv,
                                         const int* key_tokens, AttentionShape s, float p_attn,
                                         uint64_t seed) {
    const size_t w = global_warp();
    if (w >= (size_t)s.B * s.H * s.Lq) return;
    const HeadRow hr = head_row(w, s.Lq, s);
    const HeadOffsets o = head_offsets(s, hr.b, hr.h);
    const int lane = lane_id(), i = hr.i;
    const float scale = 1.0f / sqrtf((float)s.dk);
    const size_t e0 = o.probs + (size_t)i * s.Lk;   // the row's first entry in probs
    float* P = probs + e0;
    const T* qi = q + o.q + (size_t)i * s.q_stride;
    const T* keys = kv + o.k;
    const T* vals = kv + o.v;
    const int* kt = key_tokens + (size_t)hr.b * s.Lk;
    float mx = -INFINITY;
    for (int j = 0; j < s.Lk; j++) {
        const bool allowed = kt[j] != PAD_ID && !(s.causal && j > i);
        float part = 0.0f;
        for (int c = lane; c < s.dk; c += 32) part += to_float(qi[c]) * to_float(keys[(size_t)j * s.kv_stride + c]);
        const float score = warp_sum(part) * scale;
        if (allowed) mx = fmaxf(mx, score);
        if (lane == 0) P[j] = allowed ? score : -INFINITY;
    }
    __syncwarp();
    float sum = 0.0f;
    for (int j = lane; j < s.Lk; j += 32) {
        const float e = P[j] == -INFINITY ? 0.0f : expf(P[j] - mx);
        P[j] = e;
        sum += e;
    }
    sum = warp_sum(sum);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int j = lane; j < s.Lk; j += 32) P[j] *= inv;
    __syncwarp();
    T* out = ctx + o.ctx + (size_t)i * s.H * s.dv;
    for (int c = lane; c < s.dv; c += 32) {
        float acc = 0.0f;
        for (int j = 0; j < s.Lk; j++) acc += attention_dropout(P[j], seed, e0 + j, p_attn) * to_float(vals[(size_t)j * s.kv_stride + c]);
        out[c] = from_float<T>(acc);
    }
}

// Backward, per query row: dPd = dctx V^T, dP = dropout'(dPd), dS = P (dP - rowsum(P dP)) /
// sqrt(dk) into dS (B, H, Lq, Lk), and dQ = dS K.
template <class T>
__global__ void attention_backward_query_kernel(T* dq, float* dS, const T* dctx, const float* probs,
                                                const T* kv, AttentionShape s, float p_attn,
                                                uint64_t seed) {
    const size_t w = global_warp();
    if (w >= (size_t)s.B * s.H * s.Lq) return;
    const HeadRow hr = head_row(w, s.Lq, s);
    const HeadOffsets o = head_offsets(s, hr.b, hr.h);
    const int lane = lane_id(), i = hr.i;
    const float scale = 1.0f / sqrtf((float)s.dk);
    const size_t e0 = o.probs + (size_t)i * s.Lk;   // the row's first entry in probs and dS
    const float* P = probs + e0;
    float* D = dS + e0;
    const T* dci = dctx + o.ctx + (size_t)i * s.H * s.dv;
    const T* keys = kv + o.k;
    const T* vals = kv + o.v;
    for (int j = 0; j < s.Lk; j++) {
        float part = 0.0f;
        for (int c = lane; c < s.dv; c += 32) part += to_float(dci[c]) * to_float(vals[(size_t)j * s.kv_stride + c]);
        const float dp = attention_dropout(warp_sum(part), seed, e0 + j, p_attn);
        if (lane == 0) D[j] = dp;
    }
    __syncwarp();
    float dot = 0.0f;
    for (int j = lane; j < s.Lk; j += 32) dot += P[j] * D[j];
    dot = warp_sum(dot);
    for (int j = lane; j < s.Lk; j += 32) D[j] = P[j] * (D[j] - dot) * scale;
    __syncwarp();
    T* dqi = dq + o.q + (size_t)i * s.q_stride;
    for (int c = lane; c < s.dk; c += 32) {
        float acc = 0.0f;
        for (int j = 0; j < s.Lk; j++) acc += D[j] * to_float(keys[(size_t)j * s.kv_stride + c]);
        dqi[c] = from_float<T>(acc);
    }
}

// Backward, per key row j: dK = dS^T Q and dV = Pd^T dctx, summed over the queries in order.
template <class T>
__global__ void attention_backward_key_kernel(T* dkv, const float* dS, const float* probs, const T* q,
                                              const T* dctx, AttentionShape s, float p_attn,
                                              uint64_t seed) {
    const size_t w = global_warp();
    if (w >= (size_t)s.B * s.H * s.Lk) return;
    const HeadRow hr = head_row(w, s.Lk, s);   // here i is the key j
    const HeadOffsets o = head_offsets(s, hr.b, hr.h);
    const int lane = lane_id(), j = hr.i;
    T* dk = dkv + o.k + (size_t)j * s.kv_stride;
    T* dv = dkv + o.v + (size_t)j * s.kv_stride;
    for (int c = lane; c < s.dk; c += 32) {
        float acc = 0.0f;
        for (int i = 0; i < s.Lq; i++) acc += dS[o.probs + (size_t)i * s.Lk + j] * to_float(q[o.q + (size_t)i * s.q_stride + c]);
        dk[c] = from_float<T>(acc);
    }
    for (int c = lane; c < s.dv; c += 32) {
        float acc = 0.0f;
        for (int i = 0; i < s.Lq; i++) {
            const size_t e = o.probs + (size_t)i * s.Lk + j;
            acc += attention_dropout(probs[e], seed, e, p_attn) * to_float(dctx[o.ctx + (size_t)i * s.H * s.dv + c]);
        }
        dv[c] = from_float<T>(acc);
    }
}

// ---------------------------------------------------------------------------------------------
// The same three kernels tiled: a block of WARPS warps takes one (sentence, head) and a tile of
// `rows` query rows (forward, backward_query) or key rows (backward_key), a warp `rows / WARPS`
// of them. The other side's rows pass through shared memory `chunk` at a time, as floats in
// rows padded by one (lanes reading consecutive rows hit distinct banks), loaded once for the
// whole tile instead of once per query row; the scores are dot products with the lanes over
// the keys (no reduction per score), the products with V or K with the lanes over the channels.
// The sums over keys (queries) run in ascending order, chunk after chunk, as the row-wise
// kernels' do. Shared memory (floats): chunk * width + rows * (dk + dv) + rows * (chunk + 1) * pd
// (attention_tile), within 48 KB; d_k + d_v too large for that (over about 1,400) keep the
// row-wise kernels above.
struct AttentionTile {
    int rows;    // query (key) rows per block, a multiple of WARPS
    int chunk;   // key (query) rows staged at a time
};

// Loads rows [r0, r0 + n) of src (row stride ld; c < width columns) into dst (n, pitch) as floats.
template <class T>
__device__ void stage_rows(float* dst, int pitch, const T* src, size_t ld, int r0, int n, int width) {
    for (int e = threadIdx.x; e < n * width; e += blockDim.x) {
        const int r = e / width, c = e % width;
        dst[(size_t)r * pitch + c] = to_float(src[(size_t)(r0 + r) * ld + c]);
    }
}

// The tile of block blockIdx.x: (sentence b, head h, first row r0) over L rows.
struct TileOf {
    int b, h, r0, n;
};
__device__ __forceinline__ TileOf tile_of(int L, int rows, int H) {
    const int tiles = (L + rows - 1) / rows, t = (int)(blockIdx.x % tiles);
    const int h = (int)(blockIdx.x / tiles % H), b = (int)(blockIdx.x / tiles / H);
    return {b, h, t * rows, min(rows, L - t * rows)};
}

// The causal mask (query i sees keys j <= i) in index ranges: query i sees keys [0,
// keys_seen(s, i)), P and dS being 0 past them; keys from j on are seen by queries
// [queries_from(s, j), Lq) only. Without the mask: every key, every query.
__device__ __forceinline__ int keys_seen(const AttentionShape& s, int i) { return s.causal ? min(s.Lk, i + 1) : s.Lk; }
__device__ __forceinline__ int queries_from(const AttentionShape& s, int j) { return s.causal ? min(s.Lq, j) : 0; }

// P (Lk) of one query row: scores, masked to -inf, become the softmax (0 where masked).
__device__ void warp_masked_softmax(float* P, int Lk) {
    const int lane = lane_id();
    float mx = -INFINITY;
    for (int j = lane; j < Lk; j += 32) mx = fmaxf(mx, P[j]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j < Lk; j += 32) {
        const float e = P[j] == -INFINITY ? 0.0f : expf(P[j] - mx);
        P[j] = e;
        sum += e;
    }
    sum = warp_sum(sum);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int j = lane; j < Lk; j += 32) P[j] *= inv;
    __syncwarp();
}

template <class T>
__global__ void attention_forward_tiled_kernel(T* ctx, float* probs, const T* q, const T* kv,
                                               const int* key_tokens, AttentionShape s, float p_attn,
                                               uint64_t seed, AttentionTile tl) {
    extern __shared__ float attn_smem[];
    const TileOf tt = tile_of(s.Lq, tl.rows, s.H);
    const HeadOffsets o = head_offsets(s, tt.b, tt.h);
    const int warp = threadIdx.x / 32, lane = lane_id(), W = max(s.dk, s.dv) + 1;
    float* kvs = attn_smem;                          // (chunk, W) keys, then values
    float* qs = kvs + (size_t)tl.chunk * W;          // (rows, dk) the tile's queries
    float* acc = qs + (size_t)tl.rows * s.dk;        // (rows, dv) its context
    float* pd = acc + (size_t)tl.rows * s.dv;        // (rows, chunk) dropout(P) of a chunk
    const float scale = 1.0f / sqrtf((float)s.dk);
    const int* kt = key_tokens + (size_t)tt.b * s.Lk;
    const T* keys = kv + o.k;
    const T* vals = kv + o.v;
    stage_rows(qs, s.dk, q + o.q, s.q_stride, tt.r0, tt.n, s.dk);
    for (int e = threadIdx.x; e < tt.n * s.dv; e += blockDim.x) acc[e] = 0.0f;
    for (int j0 = 0; j0 < s.Lk; j0 += tl.chunk) {   // scores into probs, a chunk of keys at a time
        const int nk = min(tl.chunk, s.Lk - j0);
        __syncthreads();
        stage_rows(kvs, W, keys, s.kv_stride, j0, nk, s.dk);
        __syncthreads();
        for (int r = warp; r < tt.n; r += WARPS) {
            const int i = tt.r0 + r;
            const float* qr = qs + (size_t)r * s.dk;
            for (int j = lane; j < nk; j += 32) {   // masked scores are not computed
                const bool allowed = kt[j0 + j] != PAD_ID && !(s.causal && j0 + j > i);
                float dot = 0.0f;
                if (allowed)
                    for (int c = 0; c < s.dk; c++) dot += qr[c] * kvs[(size_t)j * W + c];
                probs[o.probs + (size_t)i * s.Lk + j0 + j] = allowed ? dot * scale : -INFINITY;
            }
        }
    }
    __syncwarp();
    for (int r = warp; r < tt.n; r += WARPS) warp_masked_softmax(probs + o.probs + (size_t)(tt.r0 + r) * s.Lk, s.Lk);
    const int seen = keys_seen(s, tt.r0 + tt.n - 1);   // keys the tile's queries see: P is 0 past them
    for (int j0 = 0; j0 < seen; j0 += tl.chunk) {   // the context, a chunk of values at a time
        const int nk = min(tl.chunk, s.Lk - j0);
        __syncthreads();
        stage_rows(kvs, W, vals, s.kv_stride, j0, nk, s.dv);
        __syncthreads();
        for (int r = warp; r < tt.n; r += WARPS) {
            const size_t e0 = o.probs + (size_t)(tt.r0 + r) * s.Lk + j0;
            float* pr = pd + (size_t)r * tl.chunk;
            for (int j = lane; j < nk; j += 32) {
                const float p = probs[e0 + j];
                pr[j] = attention_dropout(p, seed, e0 + j, p_attn);
            }
            __syncwarp();
            for (int c = lane; c < s.dv; c += 32) {
                float a = acc[(size_t)r * s.dv + c];
                for (int j = 0; j < nk; j++) a += pr[j] * kvs[(size_t)j * W + c];
                acc[(size_t)r * s.dv + c] = a;
            }
        }
    }
    for (int r = warp; r < tt.n; r += WARPS) {
        T* out = ctx + o.ctx + (size_t)(tt.r0 + r) * s.H * s.dv;
        for (int c = lane; c < s.dv; c += 32) out[c] = from_float<T>(acc[(size_t)r * s.dv + c]);
    }
}

template <class T>
__global__ void attention_backward_query_tiled_kernel(T* dq, float* dS, const T* dctx, const float* probs,
                                                      const T* kv, AttentionShape s, float p_attn,
                                                      uint64_t seed, AttentionTile tl) {
    extern __shared__ float attn_smem[];
    const TileOf tt = tile_of(s.Lq, tl.rows, s.H);
    const HeadOffsets o = head_offsets(s, tt.b, tt.h);
    const int warp = threadIdx.x / 32, lane = lane_id(), W = max(s.dk, s.dv) + 1;
    float* kvs = attn_smem;                          // (chunk, W) values, then keys
    float* dcs = kvs + (size_t)tl.chunk * W;         // (rows, dv) the tile's dctx
    float* acc = dcs + (size_t)tl.rows * s.dv;       // (rows, dk) its dq
    const float scale = 1.0f / sqrtf((float)s.dk);
    const T* keys = kv + o.k;
    const T* vals = kv + o.v;
    stage_rows(dcs, s.dv, dctx + o.ctx, (size_t)s.H * s.dv, tt.r0, tt.n, s.dv);
    for (int e = threadIdx.x; e < tt.n * s.dk; e += blockDim.x) acc[e] = 0.0f;
    for (int j0 = 0; j0 < s.Lk; j0 += tl.chunk) {   // dP = dropout'(dctx V^T) into dS
        const int nk = min(tl.chunk, s.Lk - j0);
        __syncthreads();
        stage_rows(kvs, W, vals, s.kv_stride, j0, nk, s.dv);
        __syncthreads();
        for (int r = warp; r < tt.n; r += WARPS) {
            const size_t e0 = o.probs + (size_t)(tt.r0 + r) * s.Lk + j0;
            const float* dr = dcs + (size_t)r * s.dv;
            for (int j = lane; j < nk; j += 32) {   // 0 where the causal mask makes P 0
                float dp = 0.0f;
                if (!(s.causal && j0 + j > tt.r0 + r))
                    for (int c = 0; c < s.dv; c++) dp += dr[c] * kvs[(size_t)j * W + c];
                dS[e0 + j] = attention_dropout(dp, seed, e0 + j, p_attn);
            }
        }
    }
    __syncwarp();
    for (int r = warp; r < tt.n; r += WARPS) {   // dS = P (dP - rowsum(P dP)) / sqrt(dk)
        const float* P = probs + o.probs + (size_t)(tt.r0 + r) * s.Lk;
        float* D = dS + o.probs + (size_t)(tt.r0 + r) * s.Lk;
        float dot = 0.0f;
        for (int j = lane; j < s.Lk; j += 32) dot += P[j] * D[j];
        dot = warp_sum(dot);
        for (int j = lane; j < s.Lk; j += 32) D[j] = P[j] * (D[j] - dot) * scale;
    }
    __syncwarp();
    const int seen = keys_seen(s, tt.r0 + tt.n - 1);   // keys the tile's queries see: dS is 0 past them
    for (int j0 = 0; j0 < seen; j0 += tl.chunk) {   // dQ = dS K
        const int nk = min(tl.chunk, s.Lk - j0);
        __syncthreads();
        stage_rows(kvs, W, keys, s.kv_stride, j0, nk, s.dk);
        __syncthreads();
        for (int r = warp; r < tt.n; r += WARPS) {
            const float* D = dS + o.probs + (size_t)(tt.r0 + r) * s.Lk + j0;
            for (int c = lane; c < s.dk; c += 32) {
                float a = acc[(size_t)r * s.dk + c];
                for (int j = 0; j < nk; j++) a += D[j] * kvs[(size_t)j * W + c];
                acc[(size_t)r * s.dk + c] = a;
            }
        }
    }
    for (int r = warp; r < tt.n; r += WARPS) {
        T* out = dq + o.q + (size_t)(tt.r0 + r) * s.q_stride;
        for (int c = lane; c < s.dk; c += 32) out[c] = from_float<T>(acc[(size_t)r * s.dk + c]);
    }
}

// Tiles of key rows; the queries (q and dctx rows) pass through shared memory a chunk at a time.
template <class T>
__global__ void attention_backward_key_tiled_kernel(T* dkv, const float* dS, const float* probs, const T* q,
                                                    const T* dctx, AttentionShape s, float p_attn,
                                                    uint64_t seed, AttentionTile tl) {
    extern __shared__ float attn_smem[];
    const TileOf tt = tile_of(s.Lk, tl.rows, s.H);
    const HeadOffsets o = head_offsets(s, tt.b, tt.h);
    const int warp = threadIdx.x / 32, lane = lane_id();
    const int WQ = s.dk + 1, WD = s.dv + 1;
    float* qcs = attn_smem;                          // (chunk, dk + 1) queries
    float* dcs = qcs + (size_t)tl.chunk * WQ;        // (chunk, dv + 1) their dctx
    float* acc_k = dcs + (size_t)tl.chunk * WD;      // (rows, dk) the tile's dK
    float* acc_v = acc_k + (size_t)tl.rows * s.dk;   // (rows, dv) its dV
    const int PC = tl.chunk + 1;                     // ds and pd rows padded: their staging hits distinct banks
    float* ds = acc_v + (size_t)tl.rows * s.dv;      // (rows, chunk + 1) dS of a chunk, per key
    float* pd = ds + (size_t)tl.rows * PC;           // (rows, chunk + 1) dropout(P) of a chunk
    for (int e = threadIdx.x; e < tl.rows * (s.dk + s.dv); e += blockDim.x) acc_k[e] = 0.0f;   // and acc_v
    // A tile whose keys no query sees (causal, its first key past the last query: Lk > Lq) runs
    // no chunk below, whose barriers would otherwise separate these zeros from the warps' reads.
    __syncthreads();
    const int from = queries_from(s, tt.r0);   // queries before it see none of the tile's keys
    for (int i0 = from; i0 < s.Lq; i0 += tl.chunk) {
        const int nq = min(tl.chunk, s.Lq - i0);
        __syncthreads();
        stage_rows(qcs, WQ, q + o.q, s.q_stride, i0, nq, s.dk);
        stage_rows(dcs, WD, dctx + o.ctx, (size_t)s.H * s.dv, i0, nq, s.dv);
        // dS and dropout(P) of the chunk's queries for the tile's keys: consecutive threads take
        // consecutive keys of one query, so that their reads of the (Lq, Lk) rows are coalesced.
        for (int t = threadIdx.x; t < nq * tt.n; t += blockDim.x) {
            const int i = t / tt.n, r = t % tt.n;
            const size_t e = o.probs + (size_t)(i0 + i) * s.Lk + tt.r0 + r;
            ds[(size_t)r * PC + i] = dS[e];
            pd[(size_t)r * PC + i] = attention_dropout(probs[e], seed, e, p_attn);
        }
        __syncthreads();
        for (int r = warp; r < tt.n; r += WARPS) {
            const float* dsr = ds + (size_t)r * PC;
            const float* pdr = pd + (size_t)r * PC;
            for (int c = lane; c < s.dk; c += 32) {
                float a = acc_k[(size_t)r * s.dk + c];
                for (int i = 0; i < nq; i++) a += dsr[i] * qcs[(size_t)i * WQ + c];
                acc_k[(size_t)r * s.dk + c] = a;
            }
            for (int c = lane; c < s.dv; c += 32) {
                float a = acc_v[(size_t)r * s.dv + c];
                for (int i = 0; i < nq; i++) a += pdr[i] * dcs[(size_t)i * WD + c];
                acc_v[(size_t)r * s.dv + c] = a;
            }
        }
    }
    for (int r = warp; r < tt.n; r += WARPS) {
        const size_t row = (size_t)(tt.r0 + r) * s.kv_stride;
        for (int c = lane; c < s.dk; c += 32) dkv[o.k + row + c] = from_float<T>(acc_k[(size_t)r * s.dk + c]);
        for (int c = lane; c < s.dv; c += 32) dkv[o.v + row + c] = from_float<T>(acc_v[(size_t)r * s.dv + c]);
    }
}

// =============================================================================================
// §3.2.1, §3.2.2 on tensor cores (TRANSFORMER_ATTENTION=batched): cuBLASLt takes the four
// products (QK^T, PV; in the backward dctx V^T, dS K, dS^T Q, P^T dctx), batched over the
// sentences, one call per head; these kernels do the rest, one warp per (sentence, head, query)
// row. bf16 only (fp32 takes the tiled kernels, see AttentionKernels): P and dS go to the
// products rounded to bf16 (once more than the tiled kernels, which multiply in fp32).
// =============================================================================================
// The products' operands and results here have rows of ld >= Lk elements (a multiple of 16
// bytes, as tensor-core kernels want their leading dimensions); probs keeps its (B, H, Lq, Lk).
// Warp w takes row w of them all: (sentence, head, query) = head_row(w).
//
// scores (B, H, Lq, ld) hold Q K^T: scaled by 1/sqrt(dk), masked, their softmax into probs;
// pd (B, H, Lq, ld; activation type) = dropout(probs), the left operand of the context's product.
template <class T>
__global__ void attention_softmax_kernel(float* probs, T* pd, const float* scores, int ld, const int* key_tokens,
                                         AttentionShape s, float p_attn, uint64_t seed) {
    const size_t w = global_warp();
    if (w >= (size_t)s.B * s.H * s.Lq) return;
    const HeadRow hr = head_row(w, s.Lq, s);
    const size_t e0 = w * s.Lk;   // the row's first entry in probs
    float* P = probs + e0;
    const float* S = scores + w * ld;
    T* D = pd + w * ld;
    const int* kt = key_tokens + (size_t)hr.b * s.Lk;
    const float scale = 1.0f / sqrtf((float)s.dk);
    for (int j = lane_id(); j < s.Lk; j += 32) {
        const bool allowed = kt[j] != PAD_ID && !(s.causal && j > hr.i);
        P[j] = allowed ? S[j] * scale : -INFINITY;
    }
    __syncwarp();
    warp_masked_softmax(P, s.Lk);
    for (int j = lane_id(); j < s.Lk; j += 32) {
        const float p = P[j];
        D[j] = from_float<T>(attention_dropout(p, seed, e0 + j, p_attn));
    }
}

// dS (B, H, Lq, ld; fp32) holds dctx V^T, the gradient of dropout(P): ds (activation type; may
// be dS itself in fp32) = P (dP - rowsum(P dP)) / sqrt(dk) with dP = dropout'(dS), and pd =
// dropout(P) again (the forward's copy is gone by now), the operands of the other products.
template <class T>
__global__ void attention_softmax_backward_kernel(T* ds, T* pd, const float* dS, int ld, const float* probs,
                                                  AttentionShape s, float p_attn, uint64_t seed) {
    const size_t w = global_warp();
    if (w >= (size_t)s.B * s.H * s.Lq) return;
    const size_t e0 = w * s.Lk;   // the row's first entry in probs: the dropout mask's index
    const float* P = probs + e0;
    const float* G = dS + w * ld;
    T* DS = ds + w * ld;
    T* D = pd + w * ld;
    const float scale = 1.0f / sqrtf((float)s.dk);
    float dot = 0.0f;
    for (int j = lane_id(); j < s.Lk; j += 32) dot += P[j] * attention_dropout(G[j], seed, e0 + j, p_attn);
    dot = warp_sum(dot);
    for (int j = lane_id(); j < s.Lk; j += 32) {
        const float p = P[j], dp = attention_dropout(G[j], seed, e0 + j, p_attn);
        DS[j] = from_float<T>(p * (dp - dot) * scale);
        D[j] = from_float<T>(attention_dropout(p, seed, e0 + j, p_attn));
    }
}

// =============================================================================================
// §3.2.1, §3.2.2 fused on tensor cores (TRANSFORMER_ATTENTION=fused; bf16): the tiled kernels'
// plan, with the products by the warp matrix functions (WMMA: 16x16x16 tiles, bf16 in, fp32
// out). A block of 4 or 8 warps (fused_threads) takes one (sentence, head) and `rows` query rows
// (forward, backward_query) or key rows (backward_key); the other side (every key, or every query) is
// staged whole in shared memory as bf16, so lengths whose stage does not fit the budget
// (fused_rows) take the tiled kernels. Staged matrices have their rows and columns padded to
// multiples of 16 with zeros (padded keys, queries and channels add nothing), and their rows
// 8 elements longer still: WMMA wants leading dimensions in multiples of 16 bytes, and the pad
// spreads a tile's rows over the banks. P and dS enter the products rounded to bf16, as in
// the batched path. Like the tiled kernels, no atomics: each output has one writer. At NMT
// lengths a block's work is small and waits on memory more than it computes, so what counts is
// how many blocks an SM holds at once: the kernels are built for at most 64 registers a thread
// (__launch_bounds__: 4 blocks of 8 warps, 8 of 4), where nvcc gave them 72-80 (3 blocks).
// =============================================================================================
constexpr int FUSED_MAX_THREADS = 256, FUSED_MIN_BLOCKS = 4;
__host__ __device__ constexpr int pad16(int n) { return (n + 15) / 16 * 16; }
__host__ __device__ constexpr int larger(int a, int b) { return a > b ? a : b; }
// A shared-memory region's bytes rounded up to 32: each starts 256-bit aligned, as WMMA wants.
__host__ __device__ constexpr size_t region(size_t bytes) { return (bytes + 31) / 32 * 32; }

// Shared memory of attention_forward_fused_kernel (byte offsets; leading dimensions in
// elements): the tile's queries, the keys and then the values, the scores and then the context
// (fp32), and dropout(P).
struct FusedForward {
    int ldq, ldkv, lds, ldp;
    size_t qs, kvs, sc, pd, bytes;
    __host__ __device__ FusedForward(const AttentionShape& s, int rows) {
        const int Lk = pad16(s.Lk), dk = pad16(s.dk), dv = pad16(s.dv);
        ldq = dk + 8, ldkv = larger(dk, dv) + 8, lds = larger(Lk, dv) + 4, ldp = Lk + 8;
        qs = 0;                                          // (rows, ldq) bf16
        kvs = qs + region((size_t)rows * ldq * 2);       // (Lk, ldkv) bf16
        sc = kvs + region((size_t)Lk * ldkv * 2);        // (rows, lds) fp32
        pd = sc + region((size_t)rows * lds * 4);        // (rows, ldp) bf16
        bytes = pd + region((size_t)rows * ldp * 2);
    }
};
// attention_backward_query_fused_kernel's: the tile's dctx, the values and then the keys,
// dctx V^T and then dQ (fp32), and dS.
struct FusedQuery {
    int ldd, ldkv, lds, ldp;
    size_t dcs, kvs, sc, ds, bytes;
    __host__ __device__ FusedQuery(const AttentionShape& s, int rows) {
        const int Lk = pad16(s.Lk), dk = pad16(s.dk), dv = pad16(s.dv);
        ldd = dv + 8, ldkv = larger(dk, dv) + 8, lds = larger(Lk, dk) + 4, ldp = Lk + 8;
        dcs = 0;                                         // (rows, ldd) bf16
        kvs = dcs + region((size_t)rows * ldd * 2);      // (Lk, ldkv) bf16
        sc = kvs + region((size_t)Lk * ldkv * 2);        // (rows, lds) fp32
        ds = sc + region((size_t)rows * lds * 4);        // (rows, ldp) bf16
        bytes = ds + region((size_t)rows * ldp * 2);
    }
};
// attention_backward_key_fused_kernel's: every query and its dctx, dS and dropout(P) of the
// tile's keys (query-major: (Lq, rows)), and dK or dV (fp32).
struct FusedKey {
    int ldq, ldd, ldr, lds;
    size_t qs, dcs, ds, pd, out, bytes;
    __host__ __device__ FusedKey(const AttentionShape& s, int rows) {
        const int Lq = pad16(s.Lq), dk = pad16(s.dk), dv = pad16(s.dv);
        ldq = dk + 8, ldd = dv + 8, ldr = rows + 8, lds = larger(dk, dv) + 4;
        qs = 0;                                          // (Lq, ldq) bf16
        dcs = qs + region((size_t)Lq * ldq * 2);         // (Lq, ldd) bf16
        ds = dcs + region((size_t)Lq * ldd * 2);         // (Lq, ldr) bf16
        pd = ds + region((size_t)Lq * ldr * 2);          // (Lq, ldr) bf16
        out = pd + region((size_t)Lq * ldr * 2);         // (rows, lds) fp32
        bytes = out + region((size_t)rows * lds * 4);
    }
};

// Rows [r0, r0 + n) of src (row stride ld, `width` columns) into dst (to_rows, to_cols; pitch)
// as bf16, zeros past n rows and past width columns; 16 bytes a thread where the rows are whole
// 16-byte packs on 16-byte boundaries (as the model's are at d_k = d_v = 64; to_cols and pitch
// are multiples of 8 here).
__device__ void stage_padded(bf16* dst, int pitch, int to_rows, int to_cols, const bf16* src, size_t ld, int r0,
                             int n, int width) {
    constexpr int P = Pack16<bf16>::N;
    if (ld % P == 0 && packed<bf16>(width, src)) {
        const int packs = to_cols / P;
        for (int e = threadIdx.x; e < to_rows * packs; e += blockDim.x) {
            const int r = e / packs, c = e % packs * P;
            Pack16<bf16> v;
            if (r < n && c < width) v = *reinterpret_cast<const Pack16<bf16>*>(src + (size_t)(r0 + r) * ld + c);
            else
                for (int j = 0; j < P; j++) v.v[j] = from_float<bf16>(0.0f);
            *reinterpret_cast<Pack16<bf16>*>(dst + (size_t)r * pitch + c) = v;
        }
        return;
    }
    for (int e = threadIdx.x; e < to_rows * to_cols; e += blockDim.x) {
        const int r = e / to_cols, c = e % to_cols;
        dst[(size_t)r * pitch + c] = r < n && c < width ? src[(size_t)(r0 + r) * ld + c] : from_float<bf16>(0.0f);
    }
}

// Element (r, c) of a matrix stored row-major or column-major with leading dimension ld.
template <class Layout> __device__ __forceinline__ size_t element_at(int r, int c, int ld);
template <> __device__ __forceinline__ size_t element_at<wmma::row_major>(int r, int c, int ld) { return (size_t)r * ld + c; }
template <> __device__ __forceinline__ size_t element_at<wmma::col_major>(int r, int c, int ld) { return (size_t)c * ld + r; }

// What the causal mask (query i sees keys j <= i) lets a product skip, for a tile whose row 0
// is query (key) `first`: nothing (NONE); the blocks of C above the diagonal, whose keys no
// query of theirs sees (KEYS_TO_DIAGONAL: C (queries, keys)); the inner terms over keys past a
// row block's last query (INNER_TO_DIAGONAL: A (queries, keys)); or over queries before a row
// block's first key (INNER_FROM_DIAGONAL: A (keys, queries)). Skipped blocks of C are not
// written; skipped terms are zeros of P or dS.
enum class Causal { NONE, KEYS_TO_DIAGONAL, INNER_TO_DIAGONAL, INNER_FROM_DIAGONAL };
__device__ __forceinline__ Causal causal_skip(const AttentionShape& s, Causal skip) { return s.causal ? skip : Causal::NONE; }

// C (M, N; fp32, row-major, ldc) = A (M, K) B (K, N), A and B bf16 in the layouts named, M, N
// and K multiples of 16 (so is `first`). Warp w of the block's W computes the 16x16 tiles of C
// numbered w, w + W, ...
template <class ALayout, class BLayout>
__device__ void warp_tile_product(float* C, int ldc, const bf16* A, int lda, const bf16* B, int ldb, int M, int N, int K,
                                  Causal skip = Causal::NONE, int first = 0) {
    const int tiles_n = N / 16;
    for (int t = threadIdx.x / 32; t < M / 16 * tiles_n; t += blockDim.x / 32) {
        const int i = t / tiles_n * 16, j = t % tiles_n * 16;
        if (skip == Causal::KEYS_TO_DIAGONAL && j > first + i + 15) continue;
        const int k0 = skip == Causal::INNER_FROM_DIAGONAL ? min(K, first + i) : 0;
        const int k1 = skip == Causal::INNER_TO_DIAGONAL ? min(K, first + i + 16) : K;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
        wmma::fill_fragment(c, 0.0f);
        for (int k = k0; k < k1; k += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, ALayout> a;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, BLayout> b;
            wmma::load_matrix_sync(a, A + element_at<ALayout>(i, k, lda), lda);
            wmma::load_matrix_sync(b, B + element_at<BLayout>(k, j, ldb), ldb);
            wmma::mma_sync(c, a, b, c);
        }
        wmma::store_matrix_sync(C + (size_t)i * ldc + j, c, ldc, wmma::mem_row_major);
    }
}

// WMMA takes bf16 from sm_80 on; for older targets these kernels compile empty (the backend
// refuses GPUs before sm_80).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define FUSED_ATTENTION_NEEDS_SM80 1
#endif

__global__ void __launch_bounds__(FUSED_MAX_THREADS, FUSED_MIN_BLOCKS)
attention_forward_fused_kernel(bf16* ctx, float* probs, const bf16* q, const bf16* kv,
                               const int* key_tokens, AttentionShape s, float p_attn,
                               uint64_t seed, int rows) {
#ifdef FUSED_ATTENTION_NEEDS_SM80
    __trap();
#else
    extern __shared__ __align__(128) float fused_smem[];
    const FusedForward m(s, rows);
    bf16* qs = (bf16*)((char*)fused_smem + m.qs);
    bf16* kvs = (bf16*)((char*)fused_smem + m.kvs);
    float* sc = (float*)((char*)fused_smem + m.sc);
    bf16* pd = (bf16*)((char*)fused_smem + m.pd);
    const TileOf tt = tile_of(s.Lq, rows, s.H);
    const HeadOffsets o = head_offsets(s, tt.b, tt.h);
    const int warp = threadIdx.x / 32, warps = blockDim.x / 32, lane = lane_id();
    const int Lk = pad16(s.Lk), dk = pad16(s.dk), dv = pad16(s.dv);
    const float scale = 1.0f / sqrtf((float)s.dk);
    const int* kt = key_tokens + (size_t)tt.b * s.Lk;
    const bf16* keys = kv + o.k;
    const bf16* vals = kv + o.v;
    const int seen = keys_seen(s, tt.r0 + tt.n - 1);   // keys the tile's queries see
    stage_padded(qs, m.ldq, rows, dk, q + o.q, s.q_stride, tt.r0, tt.n, s.dk);
    stage_padded(kvs, m.ldkv, Lk, dk, keys, s.kv_stride, 0, seen, s.dk);
    __syncthreads();
    warp_tile_product<wmma::row_major, wmma::col_major>(sc, m.lds, qs, m.ldq, kvs, m.ldkv, rows, Lk, dk,   // Q K^T
                                                         causal_skip(s, Causal::KEYS_TO_DIAGONAL), tt.r0);
    __syncthreads();
    stage_padded(kvs, m.ldkv, Lk, dv, vals, s.kv_stride, 0, seen, s.dv);   // the values replace the keys
    for (int r = warp; r < rows; r += warps) {   // P = softmax(mask(Q K^T / sqrt(dk))), dropout(P)
        float* S = sc + (size_t)r * m.lds;
        bf16* D = pd + (size_t)r * m.ldp;
        const int i = tt.r0 + r;
        const size_t e0 = o.probs + (size_t)i * s.Lk;
        if (r < tt.n) {
            for (int j = lane; j < s.Lk; j += 32) {
                const bool allowed = kt[j] != PAD_ID && !(s.causal && j > i);
                S[j] = allowed ? S[j] * scale : -INFINITY;
            }
            __syncwarp();
            warp_masked_softmax(S, s.Lk);
        }
        for (int j = lane; j < Lk; j += 32) {   // rows past the tile and keys past Lk: zeros
            const bool real = r < tt.n && j < s.Lk;
            if (real) probs[e0 + j] = S[j];
            D[j] = from_float<bf16>(real ? attention_dropout(S[j], seed, e0 + j, p_attn) : 0.0f);
        }
    }
    __syncthreads();
    warp_tile_product<wmma::row_major, wmma::row_major>(sc, m.lds, pd, m.ldp, kvs, m.ldkv, rows, dv, Lk,   // dropout(P) V
                                                         causal_skip(s, Causal::INNER_TO_DIAGONAL), tt.r0);
    __syncthreads();
    for (int r = warp; r < tt.n; r += warps) {
        bf16* out = ctx + o.ctx + (size_t)(tt.r0 + r) * s.H * s.dv;
        for (int c = lane; c < s.dv; c += 32) out[c] = from_float<bf16>(sc[(size_t)r * m.lds + c]);
    }
#endif
}

// Backward, per tile of query rows: dP = dropout'(dctx V^T), dS = P (dP - rowsum(P dP)) /
// sqrt(dk) into dS (B, H, Lq, Lk; bf16) for the key kernel, and dQ = dS K.
__global__ void __launch_bounds__(FUSED_MAX_THREADS, FUSED_MIN_BLOCKS)
attention_backward_query_fused_kernel(bf16* dq, bf16* dS, const bf16* dctx, const float* probs,
                                      const bf16* kv, AttentionShape s, float p_attn,
                                      uint64_t seed, int rows) {
#ifdef FUSED_ATTENTION_NEEDS_SM80
    __trap();
#else
    extern __shared__ __align__(128) float fused_smem[];
    const FusedQuery m(s, rows);
    bf16* dcs = (bf16*)((char*)fused_smem + m.dcs);
    bf16* kvs = (bf16*)((char*)fused_smem + m.kvs);
    float* sc = (float*)((char*)fused_smem + m.sc);
    bf16* ds = (bf16*)((char*)fused_smem + m.ds);
    const TileOf tt = tile_of(s.Lq, rows, s.H);
    const HeadOffsets o = head_offsets(s, tt.b, tt.h);
    const int warp = threadIdx.x / 32, warps = blockDim.x / 32, lane = lane_id();
    const int Lk = pad16(s.Lk), dk = pad16(s.dk), dv = pad16(s.dv);
    const float scale = 1.0f / sqrtf((float)s.dk);
    const bf16* keys = kv + o.k;
    const bf16* vals = kv + o.v;
    const int seen = keys_seen(s, tt.r0 + tt.n - 1);   // keys the tile's queries see
    stage_padded(dcs, m.ldd, rows, dv, dctx + o.ctx, (size_t)s.H * s.dv, tt.r0, tt.n, s.dv);
    stage_padded(kvs, m.ldkv, Lk, dv, vals, s.kv_stride, 0, seen, s.dv);
    __syncthreads();
    warp_tile_product<wmma::row_major, wmma::col_major>(sc, m.lds, dcs, m.ldd, kvs, m.ldkv, rows, Lk, dv,   // dctx V^T
                                                         causal_skip(s, Causal::KEYS_TO_DIAGONAL), tt.r0);
    __syncthreads();
    stage_padded(kvs, m.ldkv, Lk, dk, keys, s.kv_stride, 0, seen, s.dk);   // the keys replace the values
    for (int r = warp; r < rows; r += warps) {   // dP = dropout'(dctx V^T), dS = P (dP - rowsum(P dP)) / sqrt(dk)
        float* G = sc + (size_t)r * m.lds;
        bf16* D = ds + (size_t)r * m.ldp;
        const size_t e0 = o.probs + (size_t)(tt.r0 + r) * s.Lk;
        const float* P = probs + e0;
        const int seen = r < tt.n ? keys_seen(s, tt.r0 + r) : 0;
        float dot = 0.0f;
        for (int j = lane; j < seen; j += 32) {
            G[j] = attention_dropout(G[j], seed, e0 + j, p_attn);   // dP in place: a lane reads back its own
            dot += P[j] * G[j];
        }
        dot = warp_sum(dot);
        for (int j = lane; j < Lk; j += 32) {   // rows past the tile and keys past those seen: zeros
            D[j] = from_float<bf16>(j < seen ? P[j] * (G[j] - dot) * scale : 0.0f);
            if (r < tt.n && j < s.Lk) dS[e0 + j] = D[j];
        }
    }
    __syncthreads();
    warp_tile_product<wmma::row_major, wmma::row_major>(sc, m.lds, ds, m.ldp, kvs, m.ldkv, rows, dk, Lk,   // dS K
                                                         causal_skip(s, Causal::INNER_TO_DIAGONAL), tt.r0);
    __syncthreads();
    for (int r = warp; r < tt.n; r += warps) {
        bf16* out = dq + o.q + (size_t)(tt.r0 + r) * s.q_stride;
        for (int c = lane; c < s.dk; c += 32) out[c] = from_float<bf16>(sc[(size_t)r * m.lds + c]);
    }
#endif
}

// Per tile of key rows: dK = dS^T Q and dV = dropout(P)^T dctx, every query staged at once;
// dS and dropout(P) staged query-major, (Lq, rows), and read as column-major (rows, Lq).
__global__ void __launch_bounds__(FUSED_MAX_THREADS, FUSED_MIN_BLOCKS)
attention_backward_key_fused_kernel(bf16* dkv, const bf16* dS, const float* probs, const bf16* q,
                                    const bf16* dctx, AttentionShape s, float p_attn,
                                    uint64_t seed, int rows) {
#ifdef FUSED_ATTENTION_NEEDS_SM80
    __trap();
#else
    extern __shared__ __align__(128) float fused_smem[];
    const FusedKey m(s, rows);
    bf16* qs = (bf16*)((char*)fused_smem + m.qs);
    bf16* dcs = (bf16*)((char*)fused_smem + m.dcs);
    bf16* ds = (bf16*)((char*)fused_smem + m.ds);
    bf16* pd = (bf16*)((char*)fused_smem + m.pd);
    float* out = (float*)((char*)fused_smem + m.out);
    const TileOf tt = tile_of(s.Lk, rows, s.H);
    const HeadOffsets o = head_offsets(s, tt.b, tt.h);
    const int warp = threadIdx.x / 32, warps = blockDim.x / 32, lane = lane_id();
    const int Lq = pad16(s.Lq), dk = pad16(s.dk), dv = pad16(s.dv);
    // queries before the tile's first key see none of its keys (causal): neither staged nor read
    const int from = queries_from(s, tt.r0);
    stage_padded(qs + (size_t)from * m.ldq, m.ldq, Lq - from, dk, q + o.q, s.q_stride, from, s.Lq - from, s.dk);
    stage_padded(dcs + (size_t)from * m.ldd, m.ldd, Lq - from, dv, dctx + o.ctx, (size_t)s.H * s.dv, from, s.Lq - from, s.dv);
    // consecutive threads take consecutive keys of one query: coalesced reads of the (Lq, Lk) rows
    for (int t = threadIdx.x + from * rows; t < Lq * rows; t += blockDim.x) {
        const int i = t / rows, r = t % rows;
        const bool real = i < s.Lq && r < tt.n;
        const size_t e = o.probs + (size_t)i * s.Lk + tt.r0 + r;
        ds[(size_t)i * m.ldr + r] = real ? dS[e] : from_float<bf16>(0.0f);
        pd[(size_t)i * m.ldr + r] = from_float<bf16>(real ? attention_dropout(probs[e], seed, e, p_attn) : 0.0f);
    }
    __syncthreads();
    // dK (rows, dk) = dS^T Q, then dV (rows, dv) = dropout(P)^T dctx, each through `out`
    for (int pass = 0; pass < 2; pass++) {
        const bool key = pass == 0;
        const int width = key ? s.dk : s.dv;
        const size_t col = key ? o.k : o.v;
        warp_tile_product<wmma::col_major, wmma::row_major>(out, m.lds, key ? ds : pd, m.ldr, key ? qs : dcs,
                                                            key ? m.ldq : m.ldd, rows, key ? dk : dv, Lq,
                                                            causal_skip(s, Causal::INNER_FROM_DIAGONAL), tt.r0);
        __syncthreads();
        for (int r = warp; r < tt.n; r += warps) {
            bf16* row = dkv + col + (size_t)(tt.r0 + r) * s.kv_stride;
            for (int c = lane; c < width; c += 32) row[c] = from_float<bf16>(out[(size_t)r * m.lds + c]);
        }
        __syncthreads();
    }
#endif
}

// =============================================================================================
// §3.2.3 The decoder one position at a time: a query of length one per (row, head), one warp
// each, its scores in shared memory (no score matrix goes through device memory); the lanes
// take a key each for the scores (no reduction per key), then a value channel each.
// =============================================================================================
// The warp's (row, head) index: these blocks hold step_warps(keys) warps, fewer than WARPS
// once the scores of 8 warps no longer fit 48 KB (over 1536 keys), so global_warp() (which
// assumes WARPS per block) would skip (row, head) pairs there and leave their ctx unwritten.
__device__ __forceinline__ size_t step_warp() { return (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; }

// Softmax over sc[0..n) in shared memory by one warp, in place.
__device__ void warp_softmax(float* sc, int n) {
    const int lane = lane_id();
    float mx = -INFINITY;
    for (int j = lane; j < n; j += 32) mx = fmaxf(mx, sc[j]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j < n; j += 32) {
        sc[j] = expf(sc[j] - mx);
        sum += sc[j];
    }
    const float inv = 1.0f / warp_sum(sum);
    for (int j = lane; j < n; j += 32) sc[j] *= inv;
    __syncwarp();
}

template <class T>
__global__ void attention_step_self_kernel(T* ctx, const T* q, const T* cache, const int* step_row,
                                           const int* slots, int ld_slots, int t, StepShape s) {
    extern __shared__ float step_scores[];
    const size_t w = step_warp();
    const int lane = lane_id(), len = t + 1;
    float* sc = step_scores + (size_t)(threadIdx.x / 32) * len;
    if (w >= (size_t)s.n * s.H) return;
    const int r = (int)(w / s.H), h = (int)(w % s.H), ld = s.H * s.dk + s.H * s.dv;
    const float scale = 1.0f / sqrtf((float)s.dk);
    const T* qr = q + (size_t)r * s.q_stride + h * s.dk;
    for (int j = lane; j < len; j += 32) {   // lanes over the keys: a whole dot product each
        const int row = j < t ? slots[(size_t)r * ld_slots + j] : r;
        const T* k = cache + ((size_t)step_row[j] + row) * ld + h * s.dk;
        float acc = 0.0f;
        for (int c = 0; c < s.dk; c++) acc += to_float(qr[c]) * to_float(k[c]);
        sc[j] = acc * scale;
    }
    __syncwarp();
    warp_softmax(sc, len);
    T* out = ctx + (size_t)r * s.H * s.dv + h * s.dv;
    for (int c = lane; c < s.dv; c += 32) {
        float acc = 0.0f;
        for (int j = 0; j < len; j++) {
            const int row = j < t ? slots[(size_t)r * ld_slots + j] : r;
            acc += sc[j] * to_float(cache[((size_t)step_row[j] + row) * ld + s.H * s.dk + h * s.dv + c]);
        }
        out[c] = from_float<T>(acc);
    }
}

// slots_dst row r = slots_src row parent[r] (columns < t - 1), column t - 1 = parent[r].
__global__ void cache_reorder_kernel(int* dst, const int* src, const int* parent, int n, int t, int ld) {
    const size_t total = (size_t)n * t;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / t), j = (int)(i % t);
        dst[(size_t)r * ld + j] = j < t - 1 ? src[(size_t)parent[r] * ld + j] : parent[r];
    }
}

// kt (B, H, dk, S) = the keys of kv (B*S, ld) transposed.
template <class T>
__global__ void attention_keys_transpose_kernel(T* kt, const T* kv, int B, int S, int H, int dk, int ld) {
    const size_t n = (size_t)B * H * dk * S;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int j = (int)(i % S), c = (int)(i / S % dk), h = (int)(i / S / dk % H), b = (int)(i / S / dk / H);
        kt[i] = kv[((size_t)b * S + j) * ld + h * dk + c];
    }
}

// Row r over its sentence's first len keys: lanes over the keys (the transposed keys make
// their reads coalesced), then lanes over the value channels.
template <class T>
__global__ void attention_step_cross_kernel(T* ctx, const T* q, const T* kt, const T* kv, int ld,
                                            const int* len, const int* sentence, int S, StepShape s) {
    extern __shared__ float step_scores[];
    const size_t w = step_warp();
    const int lane = lane_id();
    float* sc = step_scores + (size_t)(threadIdx.x / 32) * S;
    if (w >= (size_t)s.n * s.H) return;
    const int r = (int)(w / s.H), h = (int)(w % s.H), b = sentence[r], n = len[b];
    const float scale = 1.0f / sqrtf((float)s.dk);
    const T* qh = q + (size_t)r * s.q_stride + h * s.dk;
    const T* k = kt + ((size_t)b * s.H + h) * s.dk * S;
    for (int j = lane; j < n; j += 32) {
        float acc = 0.0f;
        for (int c = 0; c < s.dk; c++) acc += (to_float(qh[c]) * scale) * to_float(k[(size_t)c * S + j]);
        sc[j] = acc;
    }
    __syncwarp();
    warp_softmax(sc, n);
    const T* v = kv + (size_t)b * S * ld + s.H * s.dk + h * s.dv;
    T* out = ctx + (size_t)r * s.H * s.dv + h * s.dv;
    for (int c = lane; c < s.dv; c += 32) {
        float acc = 0.0f;
        for (int j = 0; j < n; j++) acc += sc[j] * to_float(v[(size_t)j * ld + c]);
        out[c] = from_float<T>(acc);
    }
}

// =============================================================================================
// §3.4's logits and §5.4 Label Smoothing: one block per row
// =============================================================================================
// The logits are the largest tensor a step reads (25,000 rows of 37,000 in the base model): a
// thread moves them 16 bytes at a time (8 bf16 or 4 floats), and the loss takes one pass.
// A row z (n) cut for 16-byte accesses: `head` elements before its first 16-byte boundary, then
// `packs` whole packs, then the tail (head + packs * P .. n).
struct RowPacks {
    int head, packs;
};
template <class T>
__device__ __forceinline__ RowPacks row_packs(const T* z, int n) {
    const int head = min(n, (int)((16 - (uintptr_t)z % 16) % 16 / sizeof(T)));
    return {head, (n - head) / Pack16<T>::N};
}

// Row z (n) by a block: f(k, z[k]) for every k, a thread taking whole 16-byte packs, the head and
// the tail element by element.
template <class T, class F>
__device__ void row_for_each(const T* z, int n, F f) {
    constexpr int P = Pack16<T>::N;
    const auto [head, packs] = row_packs(z, n);
    for (int k = threadIdx.x; k < head; k += blockDim.x) f(k, to_float(z[k]));
    const Pack16<T>* zp = reinterpret_cast<const Pack16<T>*>(z + head);
    for (int i = threadIdx.x; i < packs; i += blockDim.x) {
        const Pack16<T> p = zp[i];
        for (int j = 0; j < P; j++) f(head + i * P + j, to_float(p.v[j]));
    }
    for (int k = head + packs * P + threadIdx.x; k < n; k += blockDim.x) f(k, to_float(z[k]));
}

// The same, writing: z[k] = f(k, z[k]).
template <class T, class F>
__device__ void row_update(T* z, int n, F f) {
    constexpr int P = Pack16<T>::N;
    const auto [head, packs] = row_packs(z, n);
    for (int k = threadIdx.x; k < head; k += blockDim.x) z[k] = from_float<T>(f(k, to_float(z[k])));
    Pack16<T>* zp = reinterpret_cast<Pack16<T>*>(z + head);
    for (int i = threadIdx.x; i < packs; i += blockDim.x) {
        Pack16<T> p = zp[i];
        for (int j = 0; j < P; j++) p.v[j] = from_float<T>(f(head + i * P + j, to_float(p.v[j])));
        zp[i] = p;
    }
    for (int k = head + packs * P + threadIdx.x; k < n; k += blockDim.x) z[k] = from_float<T>(f(k, to_float(z[k])));
}

// Row z (V) with label y: lse = log sum exp(z) in one pass, each thread keeping its running
// maximum m and sum of exp(z - m) (rescaled when m grows), then the block joins them at the
// largest m; every thread gets lse (rounded to float, as saved), thread 0 writes the row's loss.
// z[y] is read before the first barrier, so the block may overwrite z once this returns.
template <class T>
__device__ float crossentropy_row(double* row_loss, const T* z, int y, int V, float eps) {
    __shared__ float sf[32];
    __shared__ double sd[32];
    const float zy = threadIdx.x == 0 ? to_float(z[y]) : 0.0f;
    float m = -INFINITY, sum = 0.0f;
    double sum_z = 0.0;
    row_for_each(z, V, [&](int, float v) {
        sum_z += v;
        if (v > m) sum = sum * expf(m - v) + 1.0f, m = v;
        else if (v > -INFINITY) sum += expf(v - m);
    });
    const float mx = block_reduce(m, Max(), sf);
    sum = block_reduce(m == -INFINITY ? 0.0f : sum * expf(m - mx), Add(), sf);
    sum_z = block_reduce(sum_z, Add(), sd);
    const double l = (double)mx + log((double)sum);
    if (threadIdx.x == 0) *row_loss = l - (1.0 - eps) * zy - (double)eps / V * sum_z;
    return (float)l;
}

// Row z (V) becomes dlogits = (softmax(z) - q) * scale in place (0 on a PAD row).
template <class T>
__device__ void crossentropy_row_gradient(T* z, int y, float lse, int V, float eps, float scale) {
    const float off = eps / V;
    row_update(z, V, [&](int k, float v) {
        if (y == PAD_ID) return 0.0f;
        const float g = (expf(v - lse) - off) * scale;
        return k == y ? g - (1.0f - eps) * scale : g;
    });
}

template <class T>
__global__ void crossentropy_forward_kernel(float* lse, double* row_loss, const T* logits,
                                            const int* labels, int V, float eps) {
    const int r = blockIdx.x;
    if (labels[r] == PAD_ID) {
        if (threadIdx.x == 0) lse[r] = 0.0f, row_loss[r] = 0.0;
        return;
    }
    const float l = crossentropy_row(&row_loss[r], logits + (size_t)r * V, labels[r], V, eps);
    if (threadIdx.x == 0) lse[r] = l;
}

// out[0] = sum of v (n) in a fixed order, or out[0] += it when add: one block.
__global__ void sum_kernel(double* out, const double* v, int n, bool add) {
    __shared__ double sd[32];
    double acc = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) acc += v[i];
    acc = block_reduce(acc, Add(), sd);
    if (threadIdx.x == 0) out[0] = add ? out[0] + acc : acc;
}

template <class T>
__global__ void crossentropy_backward_kernel(T* logits, const float* lse, const int* labels, int V,
                                             float eps, float scale) {
    const int r = blockIdx.x;
    crossentropy_row_gradient(logits + (size_t)r * V, labels[r], lse[r], V, eps, scale);
}

// Both in one pass over the logits' memory: a block reads its row for lse, then reads it again
// (from the L2 cache, as a rule) to write the gradient; the same values as the two kernels.
template <class T>
__global__ void crossentropy_forward_backward_kernel(float* lse, double* row_loss, T* logits, const int* labels,
                                                     int V, float eps, float scale) {
    const int r = blockIdx.x, y = labels[r];
    T* z = logits + (size_t)r * V;
    float l = 0.0f;
    if (y != PAD_ID) l = crossentropy_row(&row_loss[r], z, y, V, eps);
    else if (threadIdx.x == 0) row_loss[r] = 0.0;
    if (threadIdx.x == 0) lse[r] = l;
    crossentropy_row_gradient(z, y, l, V, eps, scale);
}

// (value, id) a before b in top-k order: the larger value, on equal values the lower id; id -1
// (no entry) last.
__device__ __forceinline__ bool topk_before(float va, int ia, float vb, int ib) {
    return ia >= 0 && (ib < 0 || va > vb || (va == vb && ia < ib));
}

// The k best of a row, one block per row: one pass for the maximum in which each thread also
// keeps the k best of its own entries, sorted (an entry that does not beat the thread's k-th
// costs one comparison), one pass for the sum of exponentials, then k rounds of a block argmax
// over the threads' list heads (ties to the lowest id), the winner's list advancing.
template <class T>
__global__ void logsoftmax_topk_kernel(int* tokens, float* logp, const T* logits, int V, int ld, int k,
                                       int banned) {
    __shared__ float sf[32];
    __shared__ float best_v[32];
    __shared__ int best_i[32];
    float lv[64];   // this thread's k best values, best first (k <= 64: the launcher checks)
    int li[64];     // and their ids
    const int r = blockIdx.x, lane = lane_id(), warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const T* z = logits + (size_t)r * ld;
    auto value = [&](int i) { return i == banned ? -INFINITY : to_float(z[i]); };
    float mx = -INFINITY;
    int n = 0;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {   // i ascending: an equal value stays behind
        const float v = value(i);
        mx = fmaxf(mx, v);
        // the banned token is never a candidate, as on the CPU (in a row of -inf it would tie)
        if (i == banned || (n == k && !(v > lv[k - 1]))) continue;
        int p = n < k ? n++ : k - 1;
        for (; p > 0 && v > lv[p - 1]; p--) lv[p] = lv[p - 1], li[p] = li[p - 1];
        lv[p] = v, li[p] = i;
    }
    mx = block_reduce(mx, Max(), sf);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) sum += expf(value(i) - mx);
    sum = block_reduce(sum, Add(), sf);
    const float lse = mx + logf(sum);
    int head = 0;   // the first of this thread's entries not yet taken
    for (int round = 0; round < k; round++) {
        float bv = head < n ? lv[head] : -INFINITY;
        int bi = head < n ? li[head] : -1;
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (topk_before(ov, oi, bv, bi)) bv = ov, bi = oi;
        }
        if (lane == 0) best_v[warp] = bv, best_i[warp] = bi;
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < warps; w++)
                if (topk_before(best_v[w], best_i[w], bv, bi)) bv = best_v[w], bi = best_i[w];
            best_i[0] = bi;
            tokens[(size_t)r * k + round] = bi;
            logp[(size_t)r * k + round] = bi < 0 ? -INFINITY : bv - lse;
        }
        __syncthreads();
        const int taken = best_i[0];
        if (taken >= 0 && head < n && li[head] == taken) head++;
        __syncthreads();
    }
}

// log(sum_i exp(z_i)) of a row z (V) by the whole block (a block max, then a block sum); every
// thread gets it.
template <class T>
__device__ float block_logsumexp(const T* z, int V, float* sf /* 32 */) {
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) mx = fmaxf(mx, to_float(z[i]));
    mx = block_reduce(mx, Max(), sf);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) sum += expf(to_float(z[i]) - mx);
    return mx + logf(block_reduce(sum, Add(), sf));
}

// Scoring and forced tokens: logp[r] = z[tokens[r]] - logsumexp(z), one block per row; PAD_ID
// gives 0.
template <class T>
__global__ void logsoftmax_gather_kernel(float* logp, const T* logits, const int* tokens, int V, int ld) {
    __shared__ float sf[32];
    const int r = blockIdx.x, y = tokens[r];
    const T* z = logits + (size_t)r * ld;
    const float lse = block_logsumexp(z, V, sf);
    if (threadIdx.x == 0) logp[r] = y == PAD_ID ? 0.0f : to_float(z[y]) - lse;
}

// The K members' logits of an ensemble, passed by value (a kernel argument, no upload).
template <class T>
struct EnsembleLogits {
    const T* z[Backend::kMaxEnsemble];
};

// Ensembles: out = log((1/K) sum_k softmax(z_k)) per row, one block per row: each member's
// log-sum-exp, then each entry from the members' log-probabilities l_k, max_k l_k +
// log(sum_k exp(l_k - max)) - log K (two reads of each l_k, the second from L1). The loops
// over members are unrolled to the limit with a guard, so that the members' pointers stay
// kernel parameters (indexed by a variable they would be copied to a stack frame). out may be
// z[0]: an entry is read and written by the same thread, after every log-sum-exp is known.
template <class T>
__global__ void logsoftmax_ensemble_kernel(T* out, EnsembleLogits<T> logits, int K, int V, int ld) {
    constexpr int KMAX = Backend::kMaxEnsemble;
    __shared__ float sf[32];
    __shared__ float lse[KMAX];
    const size_t r0 = (size_t)blockIdx.x * ld;
#pragma unroll
    for (int k = 0; k < KMAX; k++)
        if (k < K) {
            const float l = block_logsumexp(logits.z[k] + r0, V, sf);
            if (threadIdx.x == 0) lse[k] = l;
        }
    __syncthreads();
    const float log_k = logf((float)K);
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float mx = -INFINITY, sum = 0.0f;
#pragma unroll
        for (int k = 0; k < KMAX; k++)
            if (k < K) mx = fmaxf(mx, to_float(logits.z[k][r0 + i]) - lse[k]);
#pragma unroll
        for (int k = 0; k < KMAX; k++)
            if (k < K) sum += expf(to_float(logits.z[k][r0 + i]) - lse[k] - mx);
        out[r0 + i] = from_float<T>(mx > -INFINITY ? mx + logf(sum) - log_k : -INFINITY);
    }
}

// Floats as ordered integers (a < b iff float_key(a) < float_key(b) for finite values), so a
// threshold can be bisected exactly in 32 steps.
__device__ __forceinline__ int float_key(float f) {
    const int i = __float_as_int(f);
    return i >= 0 ? i : i ^ 0x7fffffff;
}
__device__ __forceinline__ float key_float(int k) { return __int_as_float(k >= 0 ? k : k ^ 0x7fffffff); }

// Sampling, one block per row (transformer.h: logsoftmax_sample). The threshold is the largest
// key whose kept set passes top-k and top-p, by bisection over keys (a block count and a block
// sum per step); then thread 0 walks per-thread chunk sums in id order to the drawn token.
template <class T>
__global__ void logsoftmax_sample_kernel(int* tokens, float* logp, const float* uniform, const T* logits,
                                         int V, int ld, float temperature, int topk, float topp) {
    __shared__ float sf[32];
    __shared__ int si[32];
    __shared__ float part[THREADS];
    const int r = blockIdx.x;
    const float u = uniform[r];
    const T* z = logits + (size_t)r * ld;
    float mx = -INFINITY, mn = INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        const float v = to_float(z[i]);
        mx = fmaxf(mx, v), mn = fminf(mn, v);
    }
    mx = block_reduce(mx, Max(), sf);
    mn = -block_reduce(-mn, Max(), sf);
    auto weight = [&](int i) { return expf((to_float(z[i]) - mx) / temperature); };
    // Whether the tokens with key >= kk pass both tests (total: the mass of all tokens).
    auto passes = [&](int kk, float total) {
        int count = 0;
        float mass = 0.0f;
        for (int i = threadIdx.x; i < V; i += blockDim.x)
            if (float_key(to_float(z[i])) >= kk) count++, mass += weight(i);
        count = block_reduce(count, Add(), si);
        mass = block_reduce(mass, Add(), sf);
        return (topk <= 0 || count >= topk) && (topp >= 1.0f || mass >= topp * total);
    };
    float total = 0.0f;   // the same sum as passes() computes over every token
    for (int i = threadIdx.x; i < V; i += blockDim.x) total += weight(i);
    total = block_reduce(total, Add(), sf);
    long long lo = float_key(mn), hi = float_key(mx);   // neither cut asked: every token
    if (topk <= 0 && topp >= 1.0f) hi = lo;
    else if (passes((int)hi, total)) lo = hi;
    while (hi - lo > 1) {   // passes(lo), not passes(hi)
        const long long mid = lo + (hi - lo) / 2;
        if (passes((int)mid, total)) lo = mid;
        else hi = mid;
    }
    const float tau = key_float((int)lo);
    float sum = 0.0f;   // logsumexp at temperature 1
    for (int i = threadIdx.x; i < V; i += blockDim.x) sum += expf(to_float(z[i]) - mx);
    sum = block_reduce(sum, Add(), sf);
    const int chunk = (V + blockDim.x - 1) / blockDim.x;
    const int c0 = min(V, (int)threadIdx.x * chunk), c1 = min(V, c0 + chunk);
    float kept = 0.0f;
    for (int i = c0; i < c1; i++)
        if (to_float(z[i]) >= tau) kept += weight(i);
    part[threadIdx.x] = kept;
    __syncthreads();
    if (threadIdx.x != 0) return;
    float all = 0.0f;
    for (int t = 0; t < (int)blockDim.x; t++) all += part[t];
    const float target = u * all;
    float acc = 0.0f;
    int pick = -1;
    for (int t = 0; t < (int)blockDim.x && pick < 0; t++) {
        if (acc + part[t] <= target) { acc += part[t]; continue; }
        for (int i = t * chunk; i < min(V, (t + 1) * chunk) && pick < 0; i++)
            if (to_float(z[i]) >= tau && (acc += weight(i)) > target) pick = i;
    }
    for (int i = V - 1; pick < 0 && i >= 0; i--)   // rounding: the last kept token
        if (to_float(z[i]) >= tau) pick = i;
    if (pick < 0) pick = EOS_ID;   // no token kept (a row of NaN): the sentence ends
    tokens[r] = pick;
    logp[r] = to_float(z[pick]) - (mx + logf(sum));
}

// =============================================================================================
// §6.1 Machine Translation: beam search's bookkeeping (model/search.h), on the device
// =============================================================================================
// One thread per sentence: its selection (a few hundred comparisons at beam 4).
__global__ void search_select_kernel(SearchState st, const int* cand_token, const float* cand_logp,
                                     const int* forced, const float* forced_logp, int t) {
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s < st.B) search_select_sentence(st, s, cand_token, cand_logp, forced, forced_logp, t);
}

// One block: each thread takes a run of consecutive sentences, the runs' row counts are turned
// into offsets in order (an exclusive prefix sum, by one thread: blockDim values), then each
// thread lays its sentences' rows out. *count = the next step's rows.
__global__ void search_emit_kernel(SearchState st, int t) {
    __shared__ int offsets[1024];
    const int per = (st.B + blockDim.x - 1) / blockDim.x;
    const int s0 = min(st.B, (int)threadIdx.x * per), s1 = min(st.B, s0 + per);
    int rows = 0;
    for (int s = s0; s < s1; s++) rows += st.next_n[s];
    offsets[threadIdx.x] = rows;
    __syncthreads();
    if (threadIdx.x == 0) {
        int total = 0;
        for (int i = 0; i < (int)blockDim.x; i++) {
            const int n = offsets[i];
            offsets[i] = total;
            total += n;
        }
        *st.count = total;
    }
    __syncthreads();
    int offset = offsets[threadIdx.x];
    for (int s = s0; s < s1; s++) {
        search_emit(st, s, offset, t);
        offset += st.next_n[s];
    }
}

// =============================================================================================
// §5.3 Optimizer
// =============================================================================================
// partial[block] = sum of g^2 over a fixed stride pattern, in double.
__global__ void sum_squares_kernel(double* partial, const float* g, size_t n) {
    __shared__ double sd[32];
    double acc = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc += (double)g[i] * g[i];
    acc = block_reduce(acc, Add(), sd);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void scale_kernel(float* x, size_t n, float s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

__global__ void add_inplace_kernel(float* y, const float* x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] += x[i];
}

// Adam (PyTorch's formulation); the products' copy w rewritten in the same pass.
template <class T>
__global__ void adam_kernel(float* p, const float* g, float* m, float* v, T* w, size_t n, float lr_t,
                            float beta1, float beta2, float eps, float bc2_sqrt) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float gi = g[i];
        const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        const float pi = p[i] - lr_t * mi / (sqrtf(vi) / bc2_sqrt + eps);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
        if (w) w[i] = from_float<T>(pi);
    }
}

}  // namespace cuda

// =============================================================================================
// CudaBackend: the interface on the kernels above; matrix products by cuBLASLt.
// =============================================================================================
namespace {

using cuda::bf16;

// Which kernels take §3.2's attention over whole sequences (TRANSFORMER_ATTENTION, so that a
// GPU session can time each): fused (the default: one kernel a pass with WMMA's tensor cores
// for the products), tiled (CUDA cores, a block per (sentence, head, up to 32 rows)), rowwise (CUDA
// cores, a warp per row) or batched (cuBLASLt's tensor cores for the products, a kernel for the
// mask and softmax). Fused and batched are bf16 kernels: fp32 takes the tiled ones (fp32 on
// tensor cores would be TF32; cuBLASLt's fp32 algorithms, measured on an H100, summed a
// sentence's keys in an order that changed with the batch's padded length, and fp32 is the mode
// checked bit for bit), and so do lengths the fused kernels cannot stage. On an H100 the base
// model's training step took 41.1 ms with the fused kernels, 42.5 batched, 50.0 tiled and 86.4
// row-wise (bench_train, bf16, 25 + 25-token sentences; bench_attention has each length).
enum class AttentionKernels { Tiled, Rowwise, Batched, Fused };
bool parse_attention_kernels(const char* name, AttentionKernels* out) {
    const std::string n = name ? name : "fused";
    if (n == "tiled") *out = AttentionKernels::Tiled;
    else if (n == "rowwise") *out = AttentionKernels::Rowwise;
    else if (n == "batched") *out = AttentionKernels::Batched;
    else if (n == "fused") *out = AttentionKernels::Fused;
    else return false;
    return true;
}

// The largest power of two (<= 256) dividing an address: cuBLASLt's alignment hint.
uint32_t alignment_of(const void* p, size_t stride_bytes = 0) {
    uint32_t a = 256;
    while (a > 1 && ((uintptr_t)p % a || stride_bytes % a)) a >>= 1;
    return a;
}

// matmul's product as cuBLASLt sees it: (ta, tb, m, n, k, lda, ldb, ldc, C's type, A and B's
// type, epilogue, alignments of A, B, C and the bias, beta != 0, batch count and strides).
using ProductKey = std::tuple<int, int, int, int, int, int, int, int, int, int, int, uint32_t, uint32_t, uint32_t,
                              uint32_t, uint32_t, int, long long, long long, long long>;
// A product's descriptors, made once, and the algorithm cuBLASLt's heuristic chose for it.
struct Product {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulHeuristicResult_t algo{};
};

// A product repeated over `count` matrices, each operand's next matrix a, b, c elements on
// (cuBLASLt's strided batch); a count of 1 is the plain product.
struct Batch {
    int count = 1;
    long long a = 0, b = 0, c = 0;
};
void set_batch(cublasLtMatrixLayout_t layout, int count, long long stride) {
    const int32_t n = count;
    const int64_t st = stride;
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st));
}

class CudaBackend final : public Backend {
public:
    CudaBackend(Precision precision, const cudaDeviceProp& prop, AttentionKernels attention, int fused_warps,
                int gemm_tune, int bucket_steps)
        : precision_(precision), prop_(prop), requested_(attention), fused_warps_(fused_warps), gemm_tune_(gemm_tune),
          bucket_steps_(bucket_steps),
          attention_(attention == AttentionKernels::Rowwise || bf() ? attention : AttentionKernels::Tiled) {
        CUBLAS_CHECK(cublasLtCreate(&lt_));
        workspace_bytes_ = 32u << 20;
        workspace_ = alloc(workspace_bytes_);
    }
    ~CudaBackend() override {
        for (cudaEvent_t e : events_) cudaEventDestroy(e);
        if (staging_) {
            cudaEventSynchronize(staged_);
            cudaEventDestroy(staged_);
            cudaFreeHost(staging_);
        }
        for (void* p : scratch_) release(p);
        release(workspace_);
        for (auto& [key, p] : products_) destroy_product(p);
        cublasLtDestroy(lt_);
        print_plan_stats();
    }

    Device device() const override { return Device::CUDA; }
    Precision precision() const override { return precision_; }
    std::string describe() const override {
        char buf[512];
        std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %d SMs, %.0f GB), %s%s", prop_.name, prop_.major,
                      prop_.minor, prop_.multiProcessorCount, prop_.totalGlobalMem / 1e9,
                      precision_name(precision_),
                      attention_ == AttentionKernels::Rowwise   ? ", row-wise attention kernels"
                      : attention_ == AttentionKernels::Batched ? ", attention's products by cuBLASLt"
                      : attention_ == AttentionKernels::Fused   ? ", fused tensor-core attention kernels"
                      : requested_ == AttentionKernels::Batched ? ", tiled attention kernels (batched ones are bf16's)"
                                                                : ", tiled attention kernels");
        return buf;
    }
    void* alloc(size_t bytes) override {
        if (bytes == 0) return nullptr;
        void* p = nullptr;
        cudaError_t e = cudaMalloc(&p, bytes);
        if (e != cudaSuccess) {
            char what[240];
            std::snprintf(what, sizeof what, "CUDA: cannot allocate %.1f MB of GPU memory (%s; %.1f MB held already)",
                          bytes / 1e6, cudaGetErrorString(e), in_use_ / 1e6);
            if (e == cudaErrorMemoryAllocation && throw_out_of_memory) {
                (void)cudaGetLastError();   // (not sticky: cleared, so that the next launch's check passes)
                throw OutOfMemory(std::string(what) + ": lower --batch-tokens (or --beam)");
            }
            std::fprintf(stderr, "%s\n", what);
            cuda_check(e, "cudaMalloc", __FILE__, __LINE__);
        }
        sizes_[p] = bytes;
        in_use_ += bytes;
        peak_ = std::max(peak_, in_use_);
        return p;
    }
    void release(void* p) override {
        if (!p) return;
        CUDA_CHECK(cudaFree(p));
        auto it = sizes_.find(p);
        if (it != sizes_.end()) in_use_ -= it->second, sizes_.erase(it);
    }
    void synchronize() override { CUDA_CHECK(cudaDeviceSynchronize()); }
    // A mark is an event recorded on the stream (events are made once and reused).
    int time_mark() override {
        if (marks_ == events_.size()) {
            cudaEvent_t e;
            CUDA_CHECK(cudaEventCreate(&e));
            events_.push_back(e);
        }
        CUDA_CHECK(cudaEventRecord(events_[marks_]));
        return (int)marks_++;
    }
    double time_between(int from, int to) override {
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, events_.at(from), events_.at(to)));
        return ms;
    }
    void clear_marks() override { marks_ = 0; }
    size_t peak_memory() const override { return peak_; }
    // A copy from pageable memory first waits for every queued kernel, and the GPU then waits
    // for the copy: a training step's three token arrays, a decoding step's cache row. So
    // copies up to STAGING_BYTES go through a page-locked ring, staging_: the host's bytes are
    // copied there at once (src may change on return, as before) and go up asynchronously, in
    // stream order, while the host goes on queueing work. The ring starts over only once the
    // copy recorded last by staged_ (and so every earlier one) has ended. Larger copies (the
    // parameters at load) go as they did.
    void upload(void* dst, const void* host_src, size_t bytes) override {
        if (!bytes) return;
        if (bytes > STAGING_BYTES) {
            CUDA_CHECK(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice));
            return;
        }
        if (!staging_) {
            CUDA_CHECK(cudaMallocHost((void**)&staging_, STAGING_BYTES));
            CUDA_CHECK(cudaEventCreate(&staged_));
        }
        if (staging_used_ + bytes > STAGING_BYTES) {
            CUDA_CHECK(cudaEventSynchronize(staged_));
            staging_used_ = 0;
        }
        char* stage = staging_ + staging_used_;
        std::memcpy(stage, host_src, bytes);
        CUDA_CHECK(cudaMemcpyAsync(dst, stage, bytes, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaEventRecord(staged_));
        staging_used_ += (bytes + 255) / 256 * 256;
    }
    void download(void* host_dst, const void* src, size_t bytes) override {
        if (bytes) CUDA_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
    }
    void copy(void* dst, const void* src, size_t bytes) override {
        if (bytes && dst != src) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
    }
    void fill_zero(void* dst, size_t bytes) override {
        if (bytes) CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes));
    }
    void copy_rows(floatX* dst, int ld_dst, const floatX* src, int ld_src, int rows, int cols) override {
        const size_t fx = floatx_size();
        if (rows > 0 && cols > 0)
            CUDA_CHECK(cudaMemcpy2DAsync(dst, ld_dst * fx, src, ld_src * fx, cols * fx, rows,
                                         cudaMemcpyDeviceToDevice));
    }
    void convert_weights(floatX* w, const float* p, size_t n) override {
        if (bf()) run(cuda::convert_weights_kernel<bf16>, grid(n), (bf16*)w, p, n);
        else copy(w, p, n * sizeof(float));
    }

    void positional_table(floatX* pe, int L, int d) override {
        const size_t n = (size_t)L * d;
        if (bf()) run(cuda::positional_table_kernel<bf16>, grid(n), (bf16*)pe, L, d);
        else run(cuda::positional_table_kernel<float>, grid(n), (float*)pe, L, d);
    }
    void embedding_forward(floatX* x, const int* tokens, const floatX* E, const floatX* pe, int pos0,
                           int B, int L, int d, float p, uint64_t seed) override {
        const size_t n = (size_t)B * L * d;
        if (bf()) run(cuda::embedding_forward_kernel<bf16>, grid(n), (bf16*)x, tokens, (const bf16*)E, (const bf16*)pe, pos0, B, L, d, p, seed);
        else run(cuda::embedding_forward_kernel<float>, grid(n), (float*)x, tokens, (const float*)E, (const float*)pe, pos0, B, L, d, p, seed);
    }
    // Rows sorted by token (CUB's stable radix sort), then a warp per (token, 32 columns) in row order.
    void embedding_backward(float* dE, float* dpe, const floatX* dx, const int* tokens, int B, int L,
                            int d, float p, uint64_t seed) override {
        const int n = B * L;
        int* rows_in = (int*)scratch(0, 3 * (size_t)n * sizeof(int));
        int* rows_out = rows_in + n;
        int* keys_out = rows_in + 2 * (size_t)n;
        size_t temp_bytes = 0;
        CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens, keys_out, rows_in, rows_out, n));
        void* temp = scratch(1, temp_bytes);
        run(cuda::iota_kernel, grid(n), rows_in, n);
        CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, keys_out, rows_in, rows_out, n));
        // a warp an item (sorted position, 32 columns); a grid the GPU holds at once strides over them
        const size_t items = (size_t)n * ((d + 31) / 32);
        const auto blocks = [&](auto kernel) { return dim3((unsigned)std::min<long>(cuda::warp_grid(items), resident_blocks(kernel, 0))); };
        const dim3 threads(cuda::WARPS * 32);
        if (bf()) {
            auto kernel = cuda::embedding_backward_kernel<bf16>;
            launch(kernel, blocks(kernel), threads, 0, dE, (const bf16*)dx, keys_out, rows_out, n, d, p, seed);
        } else {
            auto kernel = cuda::embedding_backward_kernel<float>;
            launch(kernel, blocks(kernel), threads, 0, dE, (const float*)dx, keys_out, rows_out, n, d, p, seed);
        }
        if (!dpe) return;
        const size_t m = (size_t)L * d;
        if (bf()) run(cuda::position_backward_kernel<bf16>, grid(m), dpe, (const bf16*)dx, B, L, d, p, seed);
        else run(cuda::position_backward_kernel<float>, grid(m), dpe, (const float*)dx, B, L, d, p, seed);
    }

    // Row-major Y (rows, out) = X W^T is column-major Y^T (out, rows) = op(W) X^T with op = T.
    void linear_forward(floatX* Y, const floatX* X, const floatX* W, const floatX* b, int rows, int in,
                        int out) override {
        matmul(true, false, out, rows, in, W, in, X, in, Y, out, act_type(), 0.0f, b);
    }
    // dX^T (in, rows) = W^T-view (in, out) dY^T; dW^T (in, out) += X^T-view (in, rows) dY;
    // db = column sums of dY.
    void linear_backward(floatX* dX, float dX_beta, float* dW, float* db, const floatX* dY,
                         const floatX* X, const floatX* W, int rows, int in, int out) override {
        if (dX) matmul(false, false, in, rows, out, W, in, dY, out, dX, in, act_type(), dX_beta, nullptr);
        matmul(false, true, in, out, rows, X, in, dY, out, dW, in, CUDA_R_32F, 1.0f, nullptr);
        if (db) row_sum(db, dY, rows, out);
    }

    // The bias and the ReLU in cuBLASLt's epilogue (RELU_BIAS): no pass of its own over Y.
    void linear_relu_forward(floatX* Y, const floatX* X, const floatX* W, const floatX* b, int rows,
                             int in, int out) override {
        matmul(true, false, out, rows, in, W, in, X, in, Y, out, act_type(), 0.0f, b, true);
    }
    void relu_backward(floatX* dx, float* db, const floatX* dy, const floatX* y, int rows, int cols) override {
        const size_t n = (size_t)rows * cols;
        if (db && packs(cols, dx, dy, y)) {   // dx and its column sums in one pass
            if (bf()) partials_packed<bf16>(db, cuda::ReluBackwardRows<bf16>{(bf16*)dx, (const bf16*)dy, (const bf16*)y}, rows, cols);
            else partials_packed<float>(db, cuda::ReluBackwardRows<float>{(float*)dx, (const float*)dy, (const float*)y}, rows, cols);
            return;
        }
        // a thread per 16-byte pack (the kernel's loop strides over the rest when they do not fit)
        if (bf()) run(cuda::relu_backward_kernel<bf16>, grid(n / 8 + 1), (bf16*)dx, (const bf16*)dy, (const bf16*)y, n);
        else run(cuda::relu_backward_kernel<float>, grid(n / 4 + 1), (float*)dx, (const float*)dy, (const float*)y, n);
        if (db) row_sum(db, dx, rows, cols);
    }

    void dropout_forward(floatX* y, const floatX* x, size_t n, float p, uint64_t seed) override {
        if (p <= 0.0f) return copy(y, x, n * floatx_size());
        if (bf()) run(cuda::dropout_forward_kernel<bf16>, grid(n), (bf16*)y, (const bf16*)x, n, p, seed);
        else run(cuda::dropout_forward_kernel<float>, grid(n), (float*)y, (const float*)x, n, p, seed);
    }
    void dropout_backward(floatX* dx, const floatX* dy, size_t n, float p, uint64_t seed) override {
        dropout_forward(dx, dy, n, p, seed);
    }
    void residual_forward(floatX* y, const floatX* f, const floatX* x, size_t n, float p,
                          uint64_t seed) override {
        if (bf()) run(cuda::residual_forward_kernel<bf16>, grid(n), (bf16*)y, (const bf16*)f, (const bf16*)x, n, p, seed);
        else run(cuda::residual_forward_kernel<float>, grid(n), (float*)y, (const float*)f, (const float*)x, n, p, seed);
    }
    void layernorm_forward(floatX* y, float* mean, float* rstd, const floatX* x, const floatX* g,
                           const floatX* b, int rows, int d) override {
        if (layernorm_forward_registers(y, nullptr, mean, rstd, nullptr, x, g, b, rows, d, 0.0f, 0)) return;
        const dim3 blocks(cuda::warp_grid(rows)), threads(32 * cuda::WARPS);
        if (bf()) launch(cuda::layernorm_forward_kernel<bf16>, blocks, threads, 0, (bf16*)y, mean, rstd, (const bf16*)x, (const bf16*)g, (const bf16*)b, rows, d);
        else launch(cuda::layernorm_forward_kernel<float>, blocks, threads, 0, (float*)y, mean, rstd, (const float*)x, (const float*)g, (const float*)b, rows, d);
    }
    void layernorm_backward(floatX* dx, float dx_beta, float* dg, float* db, const floatX* dy,
                            const floatX* x, const float* mean, const float* rstd, const floatX* g,
                            int rows, int d) override {
        if (layernorm_backward_fused(dx, dx_beta, nullptr, dg, db, dy, x, mean, rstd, g, rows, d, 0.0f, 0)) return;
        const dim3 blocks(cuda::warp_grid(rows)), threads(32 * cuda::WARPS);
        if (bf()) launch(cuda::layernorm_backward_dx_kernel<bf16>, blocks, threads, 0, (bf16*)dx, dx_beta, (const bf16*)dy, (const bf16*)x, mean, rstd, (const bf16*)g, rows, d);
        else launch(cuda::layernorm_backward_dx_kernel<float>, blocks, threads, 0, (float*)dx, dx_beta, (const float*)dy, (const float*)x, mean, rstd, (const float*)g, rows, d);
        layernorm_parameter_grads(dg, db, dy, x, mean, rstd, rows, d);
    }
    void residual_layernorm_forward(floatX* y, floatX* r, float* mean, float* rstd, const floatX* f,
                                    const floatX* x, const floatX* g, const floatX* b, int rows, int d,
                                    float p, uint64_t seed) override {
        if (layernorm_forward_registers(y, r, mean, rstd, f, x, g, b, rows, d, p, seed)) return;
        const dim3 blocks(cuda::warp_grid(rows)), threads(32 * cuda::WARPS);
        if (bf()) launch(cuda::residual_layernorm_forward_kernel<bf16>, blocks, threads, 0, (bf16*)y, (bf16*)r, mean, rstd, (const bf16*)f, (const bf16*)x, (const bf16*)g, (const bf16*)b, rows, d, p, seed);
        else launch(cuda::residual_layernorm_forward_kernel<float>, blocks, threads, 0, (float*)y, (float*)r, mean, rstd, (const float*)f, (const float*)x, (const float*)g, (const float*)b, rows, d, p, seed);
    }
    void residual_layernorm_backward(floatX* dx, floatX* df, float* dg, float* db, const floatX* dy,
                                     const floatX* r, const float* mean, const float* rstd,
                                     const floatX* g, int rows, int d, float p, uint64_t seed) override {
        if (layernorm_backward_fused(dx, 0.0f, df, dg, db, dy, r, mean, rstd, g, rows, d, p, seed)) return;
        const dim3 blocks(cuda::warp_grid(rows)), threads(32 * cuda::WARPS);
        if (bf()) launch(cuda::residual_layernorm_backward_dx_kernel<bf16>, blocks, threads, 0, (bf16*)dx, (bf16*)df, (const bf16*)dy, (const bf16*)r, mean, rstd, (const bf16*)g, rows, d, p, seed);
        else launch(cuda::residual_layernorm_backward_dx_kernel<float>, blocks, threads, 0, (float*)dx, (float*)df, (const float*)dy, (const float*)r, mean, rstd, (const float*)g, rows, d, p, seed);
        layernorm_parameter_grads(dg, db, dy, r, mean, rstd, rows, d);
    }
    // layernorm_forward_registers_kernel (plain where f is null) where a row fits its registers
    // (false where not: layernorm_forward_kernel or residual_layernorm_forward_kernel then take it).
    bool layernorm_forward_registers(floatX* y, floatX* r, float* mean, float* rstd, const floatX* f, const floatX* x,
                                     const floatX* g, const floatX* b, int rows, int d, float p, uint64_t seed) {
        const int groups = layernorm_groups(d);
        if (groups > 4) return false;
        const dim3 blocks(cuda::warp_grid(rows)), threads(32 * cuda::WARPS);
        if (bf()) {
            auto kernel = groups == 1 ? cuda::layernorm_forward_registers_kernel<bf16, 1>
                        : groups == 2 ? cuda::layernorm_forward_registers_kernel<bf16, 2>
                                      : cuda::layernorm_forward_registers_kernel<bf16, 4>;
            launch(kernel, blocks, threads, 0, (bf16*)y, (bf16*)r, mean, rstd, (const bf16*)f, (const bf16*)x,
                   (const bf16*)g, (const bf16*)b, rows, d, p, seed);
        } else {
            auto kernel = groups == 1 ? cuda::layernorm_forward_registers_kernel<float, 1>
                        : groups == 2 ? cuda::layernorm_forward_registers_kernel<float, 2>
                                      : cuda::layernorm_forward_registers_kernel<float, 4>;
            launch(kernel, blocks, threads, 0, (float*)y, (float*)r, mean, rstd, (const float*)f, (const float*)x,
                   (const float*)g, (const float*)b, rows, d, p, seed);
        }
        return true;
    }
    // Groups of 16 bytes a lane of a warp holds for a row of d columns (the register kernels' G).
    int layernorm_groups(int d) const {
        const int per_group = 32 * (bf() ? 8 : 4);
        return (d + per_group - 1) / per_group;
    }
    // layernorm_backward_fused_kernel where a row fits its registers (false where not: the two
    // kernels below then take it); dg, db += its blocks' partial sums, in block order.
    bool layernorm_backward_fused(floatX* dx, float dx_beta, floatX* df, float* dg, float* db, const floatX* dy,
                                  const floatX* x, const float* mean, const float* rstd, const floatX* g, int rows,
                                  int d, float p, uint64_t seed) {
        const int groups = layernorm_groups(d);
        if (groups > 4 || rows == 0) return groups <= 4;
        const int blocks = bf() ? launch_layernorm_backward_fused<bf16>(groups, dx, dx_beta, df, dy, x, mean, rstd, g, rows, d, p, seed)
                                : launch_layernorm_backward_fused<float>(groups, dx, dx_beta, df, dy, x, mean, rstd, g, rows, d, p, seed);
        const float* partial = layernorm_partials(blocks, d);
        finish_columns(dg, partial, blocks, d);
        finish_columns(db, partial + (size_t)blocks * d, blocks, d);
        return true;
    }
    // layernorm_backward_fused_kernel<T, groups> over the rows, as few rows a warp as fill the
    // GPU (rows_per_warp); its blocks' dg and db terms go to layernorm_partials. Returns the blocks.
    template <class T>
    int launch_layernorm_backward_fused(int groups, floatX* dx, float dx_beta, floatX* df, const floatX* dy,
                                        const floatX* x, const float* mean, const float* rstd, const floatX* g,
                                        int rows, int d, float p, uint64_t seed) {
        auto kernel = groups == 1 ? cuda::layernorm_backward_fused_kernel<T, 1>
                    : groups == 2 ? cuda::layernorm_backward_fused_kernel<T, 2>
                                  : cuda::layernorm_backward_fused_kernel<T, 4>;
        const size_t smem = (size_t)cuda::WARPS * d * sizeof(float);
        const int per_warp = rows_per_warp(kernel, rows, smem);
        const int blocks = (rows + per_warp * cuda::WARPS - 1) / (per_warp * cuda::WARPS);
        launch(kernel, dim3(blocks), dim3(32 * cuda::WARPS), smem, (T*)dx, dx_beta, (T*)df, layernorm_partials(blocks, d),
               (const T*)dy, (const T*)x, mean, rstd, (const T*)g, rows, d, p, seed, per_warp);
        return blocks;
    }
    // The blocks' dg and db terms, (2, blocks, d).
    float* layernorm_partials(int blocks, int d) {
        return (float*)scratch(2, 2 * (size_t)blocks * d * sizeof(float));
    }
    // Rows a warp of a row-at-a-time kernel takes (layernorm_backward_fused_kernel): as few as
    // fill the GPU at once (the blocks of WARPS warps an SM holds, by the occupancy calculator,
    // times the SMs), at most LN_ROWS_PER_WARP. On an H100 the bf16 kernel for d = 512 holds 2
    // blocks an SM (120 registers), 264 in all; the base model's 25,000 rows took 196 blocks of 16
    // rows a warp, so half the SMs held one block and the step waited on 16 rows a warp where 12
    // fill the GPU. The choice depends on the rows and the GPU alone, so it (and the order of dg's
    // and db's sums) is the same in a run and its resume.
    template <class Kernel>
    int rows_per_warp(Kernel kernel, int rows, size_t smem) {
        const long warps = resident_blocks(kernel, smem) * cuda::WARPS;   // at once
        return (int)std::clamp<long>((rows + warps - 1) / warps, 1, cuda::LN_ROWS_PER_WARP);
    }
    // Blocks of WARPS warps (smem bytes of shared memory each) the GPU holds at once: the
    // occupancy calculator's blocks an SM (asked once a kernel and size) times the SMs. A grid
    // that strides over its work is sized by it: one more block would wait for one to end.
    template <class Kernel>
    long resident_blocks(Kernel kernel, size_t smem) {
        const auto key = std::make_pair((const void*)kernel, smem);
        auto it = blocks_per_sm_.find(key);
        if (it == blocks_per_sm_.end()) {
            int n = 0;
            CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, 32 * cuda::WARPS, smem));
            it = blocks_per_sm_.emplace(key, std::max(1, n)).first;
        }
        return (long)it->second * prop_.multiProcessorCount;
    }
    // dg (d) += sum over rows of dy * xhat, db (d) += sum over rows of dy: deterministic sums.
    void layernorm_parameter_grads(float* dg, float* db, const floatX* dy, const floatX* x, const float* mean,
                                   const float* rstd, int rows, int d) {
        if (bf()) column_sum(dg, cuda::GainTerm<bf16>{(const bf16*)dy, (const bf16*)x, mean, rstd, d}, rows, d);
        else column_sum(dg, cuda::GainTerm<float>{(const float*)dy, (const float*)x, mean, rstd, d}, rows, d);
        row_sum(db, dy, rows, d);
    }

    void attention_forward(floatX* ctx, float* probs, const floatX* q, const floatX* kv,
                           const int* key_tokens, const AttentionShape& s, float p_attn,
                           uint64_t seed) override {
        if (attention_ == AttentionKernels::Batched) return attention_forward_batched(ctx, probs, q, kv, key_tokens, s, p_attn, seed);
        if (const int rows = fused_rows<cuda::FusedForward>(s, s.Lq)) {
            launch(cuda::attention_forward_fused_kernel, dim3(tiles(s.B, s.H, s.Lq, rows)), fused_threads(s, rows),
                   cuda::FusedForward(s, rows).bytes, (bf16*)ctx, probs, (const bf16*)q, (const bf16*)kv, key_tokens, s,
                   p_attn, seed, rows);
            return;
        }
        cuda::AttentionTile tl;
        size_t smem;
        if (attention_tile(std::max(s.dk, s.dv) + 1, s.dk, s.dv, 1, &tl, &smem)) {
            const dim3 blocks(tiles(s.B, s.H, s.Lq, tl)), threads(32 * cuda::WARPS);
            if (bf()) launch(cuda::attention_forward_tiled_kernel<bf16>, blocks, threads, smem, (bf16*)ctx, probs, (const bf16*)q, (const bf16*)kv, key_tokens, s, p_attn, seed, tl);
            else launch(cuda::attention_forward_tiled_kernel<float>, blocks, threads, smem, (float*)ctx, probs, (const float*)q, (const float*)kv, key_tokens, s, p_attn, seed, tl);
            return;
        }
        const dim3 blocks(cuda::warp_grid((size_t)s.B * s.H * s.Lq)), threads(32 * cuda::WARPS);
        if (bf()) launch(cuda::attention_forward_kernel<bf16>, blocks, threads, 0, (bf16*)ctx, probs, (const bf16*)q, (const bf16*)kv, key_tokens, s, p_attn, seed);
        else launch(cuda::attention_forward_kernel<float>, blocks, threads, 0, (float*)ctx, probs, (const float*)q, (const float*)kv, key_tokens, s, p_attn, seed);
    }
    void attention_backward(floatX* dq, floatX* dkv, const floatX* dctx, const float* probs,
                            const floatX* q, const floatX* kv, const AttentionShape& s, float p_attn,
                            uint64_t seed) override {
        if (attention_ == AttentionKernels::Batched) return attention_backward_batched(dq, dkv, dctx, probs, q, kv, s, p_attn, seed);
        const int rq = fused_rows<cuda::FusedQuery>(s, s.Lq), rk = fused_rows<cuda::FusedKey>(s, s.Lk);
        if (rq && rk) {   // dS (B, H, Lq, Lk) in bf16 between the two
            bf16* dS = (bf16*)scratch(0, (size_t)s.B * s.H * s.Lq * s.Lk * sizeof(bf16));
            launch(cuda::attention_backward_query_fused_kernel, dim3(tiles(s.B, s.H, s.Lq, rq)), fused_threads(s, rq),
                   cuda::FusedQuery(s, rq).bytes, (bf16*)dq, dS, (const bf16*)dctx, probs, (const bf16*)kv, s, p_attn,
                   seed, rq);
            launch(cuda::attention_backward_key_fused_kernel, dim3(tiles(s.B, s.H, s.Lk, rk)), fused_threads(s, rk),
                   cuda::FusedKey(s, rk).bytes, (bf16*)dkv, (const bf16*)dS, probs, (const bf16*)q, (const bf16*)dctx,
                   s, p_attn, seed, rk);
            return;
        }
        float* dS = (float*)scratch(0, (size_t)s.B * s.H * s.Lq * s.Lk * sizeof(float));
        cuda::AttentionTile tq, tk;
        size_t sq, sk;
        if (attention_tile(std::max(s.dk, s.dv) + 1, s.dk, s.dv, 1, &tq, &sq) &&
            attention_tile(s.dk + s.dv + 2, s.dk, s.dv, 2, &tk, &sk)) {
            const dim3 threads(32 * cuda::WARPS), qblocks(tiles(s.B, s.H, s.Lq, tq)), kblocks(tiles(s.B, s.H, s.Lk, tk));
            if (bf()) {
                launch(cuda::attention_backward_query_tiled_kernel<bf16>, qblocks, threads, sq, (bf16*)dq, dS, (const bf16*)dctx, probs, (const bf16*)kv, s, p_attn, seed, tq);
                launch(cuda::attention_backward_key_tiled_kernel<bf16>, kblocks, threads, sk, (bf16*)dkv, dS, probs, (const bf16*)q, (const bf16*)dctx, s, p_attn, seed, tk);
            } else {
                launch(cuda::attention_backward_query_tiled_kernel<float>, qblocks, threads, sq, (float*)dq, dS, (const float*)dctx, probs, (const float*)kv, s, p_attn, seed, tq);
                launch(cuda::attention_backward_key_tiled_kernel<float>, kblocks, threads, sk, (float*)dkv, dS, probs, (const float*)q, (const float*)dctx, s, p_attn, seed, tk);
            }
            return;
        }
        const dim3 qblocks(cuda::warp_grid((size_t)s.B * s.H * s.Lq)), kblocks(cuda::warp_grid((size_t)s.B * s.H * s.Lk));
        const dim3 threads(32 * cuda::WARPS);
        if (bf()) {
            launch(cuda::attention_backward_query_kernel<bf16>, qblocks, threads, 0, (bf16*)dq, dS, (const bf16*)dctx, probs, (const bf16*)kv, s, p_attn, seed);
            launch(cuda::attention_backward_key_kernel<bf16>, kblocks, threads, 0, (bf16*)dkv, dS, probs, (const bf16*)q, (const bf16*)dctx, s, p_attn, seed);
        } else {
            launch(cuda::attention_backward_query_kernel<float>, qblocks, threads, 0, (float*)dq, dS, (const float*)dctx, probs, (const float*)kv, s, p_attn, seed);
            launch(cuda::attention_backward_key_kernel<float>, kblocks, threads, 0, (float*)dkv, dS, probs, (const float*)q, (const float*)dctx, s, p_attn, seed);
        }
    }

    // §3.2.1 with the products on tensor cores (TRANSFORMER_ATTENTION=batched): per head, one
    // cuBLASLt call batched over the B sentences (a sentence's matrices lie a fixed stride
    // apart; a head's do not, so the heads are the loop), the mask and softmax by a kernel.
    // Row-major (r, c) matrices are column-major (c, r) to cuBLASLt: each product below is
    // written as the column-major one it is. The (Lq, Lk) matrices it reads and writes have
    // rows of ld = Lk rounded up to 8 elements (16 bytes at least), in scratch buffers.
    struct BatchedLayout {
        int ld;                              // a score row: Lk rounded up to 8 elements
        size_t tile;                         // one (sentence, head)'s (Lq, ld) matrix
        long long kv_b, q_b, p_b, ctx_b;     // a sentence's stride in kv, q, the scores, ctx
    };
    static BatchedLayout batched_layout(const AttentionShape& s) {
        const int ld = (s.Lk + 7) / 8 * 8;
        const size_t tile = (size_t)s.Lq * ld;
        return {ld, tile, (long long)s.Lk * s.kv_stride, (long long)s.Lq * s.q_stride, (long long)s.H * (long long)tile,
                (long long)s.Lq * s.H * s.dv};
    }

    void attention_forward_batched(floatX* ctx, float* probs, const floatX* q, const floatX* kv,
                                   const int* key_tokens, const AttentionShape& s, float p_attn, uint64_t seed) {
        const auto [ld, tile, kv_b, q_b, p_b, ctx_b] = batched_layout(s);
        float* scores = (float*)scratch(0, (size_t)s.B * p_b * sizeof(float));   // (B, H, Lq, ld)
        floatX* pd = (floatX*)scratch(3, (size_t)s.B * p_b * floatx_size());    // dropout(P), (B, H, Lq, ld)
        for (int h = 0; h < s.H; h++) {   // S^T (Lk, Lq) = K (Lk, dk) Q^T (dk, Lq), unscaled, fp32
            const HeadOffsets o = head_offsets(s, 0, h);   // sentence 0's; the batch strides step on
            matmul(true, false, s.Lk, s.Lq, s.dk, at(kv, o.k), s.kv_stride, at(q, o.q), s.q_stride,
                   scores + h * tile, ld, CUDA_R_32F, 0.0f, nullptr, false, {s.B, kv_b, q_b, p_b});
        }
        const dim3 blocks(cuda::warp_grid((size_t)s.B * s.H * s.Lq)), threads(32 * cuda::WARPS);
        launch(cuda::attention_softmax_kernel<bf16>, blocks, threads, 0, probs, (bf16*)pd, (const float*)scores, ld, key_tokens, s, p_attn, seed);
        for (int h = 0; h < s.H; h++) {   // ctx^T (dv, Lq) = V^T (dv, Lk) dropout(P)^T (Lk, Lq)
            const HeadOffsets o = head_offsets(s, 0, h);
            matmul(false, false, s.dv, s.Lq, s.Lk, at(kv, o.v), s.kv_stride, at(pd, h * tile), ld, at(ctx, o.ctx),
                   s.H * s.dv, act_type(), 0.0f, nullptr, false, {s.B, kv_b, p_b, ctx_b});
        }
    }
    void attention_backward_batched(floatX* dq, floatX* dkv, const floatX* dctx, const float* probs,
                                    const floatX* q, const floatX* kv, const AttentionShape& s, float p_attn,
                                    uint64_t seed) {
        const auto [ld, tile, kv_b, q_b, p_b, ctx_b] = batched_layout(s);
        const size_t x = floatx_size();
        float* dP = (float*)scratch(0, (size_t)s.B * p_b * sizeof(float));   // (B, H, Lq, ld)
        floatX* ds = (floatX*)scratch(4, (size_t)s.B * p_b * x);   // dS
        floatX* pd = (floatX*)scratch(3, (size_t)s.B * p_b * x);
        for (int h = 0; h < s.H; h++) {   // dP^T (Lk, Lq) = V (Lk, dv) dctx^T (dv, Lq), fp32
            const HeadOffsets o = head_offsets(s, 0, h);
            matmul(true, false, s.Lk, s.Lq, s.dv, at(kv, o.v), s.kv_stride, at(dctx, o.ctx), s.H * s.dv,
                   dP + h * tile, ld, CUDA_R_32F, 0.0f, nullptr, false, {s.B, kv_b, ctx_b, p_b});
        }
        const dim3 blocks(cuda::warp_grid((size_t)s.B * s.H * s.Lq)), threads(32 * cuda::WARPS);
        launch(cuda::attention_softmax_backward_kernel<bf16>, blocks, threads, 0, (bf16*)ds, (bf16*)pd, (const float*)dP, ld, probs, s, p_attn, seed);
        for (int h = 0; h < s.H; h++) {
            const HeadOffsets o = head_offsets(s, 0, h);
            // dQ^T (dk, Lq) = K^T (dk, Lk) dS^T (Lk, Lq)
            matmul(false, false, s.dk, s.Lq, s.Lk, at(kv, o.k), s.kv_stride, at(ds, h * tile), ld, at(dq, o.q),
                   s.q_stride, act_type(), 0.0f, nullptr, false, {s.B, kv_b, p_b, q_b});
            // dK^T (dk, Lk) = Q^T (dk, Lq) dS (Lq, Lk)
            matmul(false, true, s.dk, s.Lk, s.Lq, at(q, o.q), s.q_stride, at(ds, h * tile), ld, at(dkv, o.k),
                   s.kv_stride, act_type(), 0.0f, nullptr, false, {s.B, q_b, p_b, kv_b});
            // dV^T (dv, Lk) = dctx^T (dv, Lq) dropout(P) (Lq, Lk)
            matmul(false, true, s.dv, s.Lk, s.Lq, at(dctx, o.ctx), s.H * s.dv, at(pd, h * tile), ld, at(dkv, o.v),
                   s.kv_stride, act_type(), 0.0f, nullptr, false, {s.B, ctx_b, p_b, kv_b});
        }
    }

    void attention_step_self(floatX* ctx, const floatX* q, const floatX* cache, const int* step_row,
                             const int* slots, int ld_slots, int t, const StepShape& s) override {
        const int warps = step_warps(t + 1);
        const dim3 blocks((unsigned)(((size_t)s.n * s.H + warps - 1) / warps)), threads(32 * warps);
        const size_t smem = (size_t)warps * (t + 1) * sizeof(float);
        if (bf()) launch(cuda::attention_step_self_kernel<bf16>, blocks, threads, smem, (bf16*)ctx, (const bf16*)q, (const bf16*)cache, step_row, slots, ld_slots, t, s);
        else launch(cuda::attention_step_self_kernel<float>, blocks, threads, smem, (float*)ctx, (const float*)q, (const float*)cache, step_row, slots, ld_slots, t, s);
    }
    void cache_reorder(int* slots_dst, const int* slots_src, const int* parent, int n, int t, int ld) override {
        run(cuda::cache_reorder_kernel, grid((size_t)n * t), slots_dst, slots_src, parent, n, t, ld);
    }
    void attention_keys_transpose(floatX* kt, const floatX* kv, int B, int S, int H, int dk, int ld) override {
        const size_t n = (size_t)B * H * dk * S;
        if (bf()) run(cuda::attention_keys_transpose_kernel<bf16>, grid(n), (bf16*)kt, (const bf16*)kv, B, S, H, dk, ld);
        else run(cuda::attention_keys_transpose_kernel<float>, grid(n), (float*)kt, (const float*)kv, B, S, H, dk, ld);
    }
    void attention_step_cross(floatX* ctx, const floatX* q, const floatX* kt, const floatX* kv, int ld,
                              const int* len, const int* sentence, int S, const StepShape& s) override {
        const int warps = step_warps(S);
        const dim3 blocks((unsigned)(((size_t)s.n * s.H + warps - 1) / warps)), threads(32 * warps);
        const size_t smem = (size_t)warps * S * sizeof(float);
        if (bf()) launch(cuda::attention_step_cross_kernel<bf16>, blocks, threads, smem, (bf16*)ctx, (const bf16*)q, (const bf16*)kt, (const bf16*)kv, ld, len, sentence, S, s);
        else launch(cuda::attention_step_cross_kernel<float>, blocks, threads, smem, (float*)ctx, (const float*)q, (const float*)kt, (const float*)kv, ld, len, sentence, S, s);
    }

    void crossentropy_forward(float* lse, double* loss, const floatX* logits, const int* labels, int rows,
                              int V, float eps) override {
        double* row_loss = (double*)scratch(0, (size_t)rows * sizeof(double));
        if (bf()) launch(cuda::crossentropy_forward_kernel<bf16>, dim3(rows), dim3(cuda::THREADS), 0, lse, row_loss, (const bf16*)logits, labels, V, eps);
        else launch(cuda::crossentropy_forward_kernel<float>, dim3(rows), dim3(cuda::THREADS), 0, lse, row_loss, (const float*)logits, labels, V, eps);
        launch(cuda::sum_kernel, dim3(1), dim3(1024), 0, loss, (const double*)row_loss, rows, true);
    }
    void crossentropy_backward(floatX* logits, const float* lse, const int* labels, int rows, int V,
                               float eps, float scale) override {
        if (bf()) launch(cuda::crossentropy_backward_kernel<bf16>, dim3(rows), dim3(cuda::THREADS), 0, (bf16*)logits, lse, labels, V, eps, scale);
        else launch(cuda::crossentropy_backward_kernel<float>, dim3(rows), dim3(cuda::THREADS), 0, (float*)logits, lse, labels, V, eps, scale);
    }
    void crossentropy_forward_backward(float* lse, double* loss, floatX* logits, const int* labels, int rows,
                                       int V, float eps, float scale) override {
        double* row_loss = (double*)scratch(0, (size_t)rows * sizeof(double));
        if (bf()) launch(cuda::crossentropy_forward_backward_kernel<bf16>, dim3(rows), dim3(cuda::THREADS), 0, lse, row_loss, (bf16*)logits, labels, V, eps, scale);
        else launch(cuda::crossentropy_forward_backward_kernel<float>, dim3(rows), dim3(cuda::THREADS), 0, lse, row_loss, (float*)logits, labels, V, eps, scale);
        launch(cuda::sum_kernel, dim3(1), dim3(1024), 0, loss, (const double*)row_loss, rows, true);
    }
    void logsoftmax_topk(int* tokens, float* logp, const floatX* logits, int rows, int V, int ld, int k,
                         int banned) override {
        if (k < 1 || k > 64) {
            std::fprintf(stderr, "error: the GPU top-k takes 1 to 64 candidates (asked %d)\n", k);
            std::exit(1);
        }
        if (bf()) launch(cuda::logsoftmax_topk_kernel<bf16>, dim3(rows), dim3(cuda::THREADS), 0, tokens, logp, (const bf16*)logits, V, ld, k, banned);
        else launch(cuda::logsoftmax_topk_kernel<float>, dim3(rows), dim3(cuda::THREADS), 0, tokens, logp, (const float*)logits, V, ld, k, banned);
    }
    void logsoftmax_gather(float* logp, const floatX* logits, const int* tokens, int rows, int V, int ld) override {
        if (bf()) launch(cuda::logsoftmax_gather_kernel<bf16>, dim3(rows), dim3(cuda::THREADS), 0, logp, (const bf16*)logits, tokens, V, ld);
        else launch(cuda::logsoftmax_gather_kernel<float>, dim3(rows), dim3(cuda::THREADS), 0, logp, (const float*)logits, tokens, V, ld);
    }
    void logsoftmax_ensemble(floatX* out, const floatX* const* logits, int K, int rows, int V, int ld) override {
        if (K < 1 || K > kMaxEnsemble) {
            std::fprintf(stderr, "%s: error: an ensemble of 1 to %d models, not %d\n", program_invocation_short_name,
                         kMaxEnsemble, K);
            std::exit(1);
        }
        if (bf()) launch(cuda::logsoftmax_ensemble_kernel<bf16>, dim3(rows), dim3(cuda::THREADS), 0, (bf16*)out, ensemble_logits<bf16>(logits, K), K, V, ld);
        else launch(cuda::logsoftmax_ensemble_kernel<float>, dim3(rows), dim3(cuda::THREADS), 0, (float*)out, ensemble_logits<float>(logits, K), K, V, ld);
    }
    void logsoftmax_sample(int* tokens, float* logp, const float* uniform, const floatX* logits, int rows, int V,
                           int ld, float temperature, int topk, float topp) override {
        if (bf()) launch(cuda::logsoftmax_sample_kernel<bf16>, dim3(rows), dim3(cuda::THREADS), 0, tokens, logp, uniform, (const bf16*)logits, V, ld, temperature, topk, topp);
        else launch(cuda::logsoftmax_sample_kernel<float>, dim3(rows), dim3(cuda::THREADS), 0, tokens, logp, uniform, (const float*)logits, V, ld, temperature, topk, topp);
    }
    void search_select(const SearchState& st, const int* cand_token, const float* cand_logp, const int* forced,
                       const float* forced_logp, int /*n*/, int t) override {
        launch(cuda::search_select_kernel, dim3((st.B + 127) / 128), dim3(128), 0, st, cand_token, cand_logp, forced, forced_logp, t);
        launch(cuda::search_emit_kernel, dim3(1), dim3(1024), 0, st, t);
    }

    double global_norm(const float* g, size_t n) override {
        double* partial = (double*)scratch(0, (cuda::REDUCE_BLOCKS + 1) * sizeof(double));
        launch(cuda::sum_squares_kernel, dim3(cuda::REDUCE_BLOCKS), dim3(cuda::THREADS), 0, partial, g, n);
        launch(cuda::sum_kernel, dim3(1), dim3(1024), 0, partial + cuda::REDUCE_BLOCKS, (const double*)partial, cuda::REDUCE_BLOCKS, false);
        double total = 0;
        download(&total, partial + cuda::REDUCE_BLOCKS, sizeof(double));
        return std::sqrt(total);
    }
    void scale(float* x, size_t n, float s) override { run(cuda::scale_kernel, grid(n), x, n, s); }
    void add_inplace(float* y, const float* x, size_t n) override {
        run(cuda::add_inplace_kernel, grid(n), y, x, n);
    }
    void adam_step(float* p, const float* g, float* m, float* v, floatX* w, size_t n, float lr,
                   float beta1, float beta2, float eps, int64_t step) override {
        const float lr_t = (float)(lr / (1.0 - std::pow((double)beta1, (double)step)));
        const float bc2_sqrt = (float)std::sqrt(1.0 - std::pow((double)beta2, (double)step));
        if (bf()) run(cuda::adam_kernel<bf16>, grid(n), p, g, m, v, (bf16*)w, n, lr_t, beta1, beta2, eps, bc2_sqrt);
        else run(cuda::adam_kernel<float>, grid(n), p, g, m, v, (float*)w, n, lr_t, beta1, beta2, eps, bc2_sqrt);
    }

private:
    Precision precision_;
    cudaDeviceProp prop_;
    cublasLtHandle_t lt_ = nullptr;
    void* workspace_ = nullptr;
    size_t workspace_bytes_ = 0;
    static constexpr size_t STAGING_BYTES = 8u << 20;   // upload's ring: 8 MB, page-locked
    char* staging_ = nullptr;
    size_t staging_used_ = 0;                           // bytes of the ring handed out since it started over
    cudaEvent_t staged_ = nullptr;                      // recorded behind the last staged copy
    std::map<void*, size_t> sizes_;         // live allocations, for the peak
    size_t in_use_ = 0, peak_ = 0;
    AttentionKernels requested_;            // TRANSFORMER_ATTENTION
    int fused_warps_;                       // TRANSFORMER_FUSED_WARPS: 4, 8, or 0 (fused_threads decides)
    int gemm_tune_;                         // TRANSFORMER_GEMM_TUNE: algorithms timed per shape (0: none, choose_algorithm)
    int bucket_steps_;                      // TRANSFORMER_GEMM_BUCKET_STEPS: planned sizes an octave (planned_shape)
    // What planning the products cost the host (matmul, plan_product, heuristic): printed at the
    // end with TRANSFORMER_GEMM_STATS=1, to tell a run's time spent choosing algorithms for new
    // shapes (decoding's row counts fall step by step) from the products' own.
    struct PlanStats { size_t heuristics = 0, checks = 0; double host_ms = 0; } plans_;
    void print_plan_stats() const {
        const char* env = std::getenv("TRANSFORMER_GEMM_STATS");
        if (!env || !*env || std::strcmp(env, "0") == 0) return;
        std::fflush(stdout);   // after what the program printed
        std::fprintf(stderr, "cuBLASLt plans: %zu product shapes in %zu buckets, %zu heuristic queries, %zu algorithm "
                     "checks, %.1f ms of host time\n", products_.size(), algorithms_.size(), plans_.heuristics,
                     plans_.checks, plans_.host_ms);
    }
    AttentionKernels attention_;            // what this precision runs of it (fp32: tiled or rowwise)
    std::vector<void*> scratch_;            // the backend's own temporaries, by slot, grown
    std::vector<size_t> scratch_bytes_;
    std::vector<cudaEvent_t> events_;       // time_mark's, reused
    size_t marks_ = 0;                      // events recorded since clear_marks
    // Each product's descriptors and algorithm (plan_product), by shape and alignments.
    std::map<ProductKey, Product> products_;
    // The algorithm cuBLASLt's heuristic chose for each planned shape (planned_shape), or none.
    std::map<ProductKey, std::optional<cublasLtMatmulAlgo_t>> algorithms_;
    std::map<const void*, size_t> opted_in_;   // dynamic shared memory each kernel has opted in to
    std::map<std::pair<const void*, size_t>, int> blocks_per_sm_;   // (kernel, shared memory): resident_blocks'

    bool bf() const { return precision_ == Precision::BF16; }
    // The members' logits as the ensemble kernel's argument.
    template <class T>
    static cuda::EnsembleLogits<T> ensemble_logits(const floatX* const* logits, int K) {
        cuda::EnsembleLogits<T> e{};
        for (int k = 0; k < K; k++) e.z[k] = (const T*)logits[k];
        return e;
    }
    cudaDataType act_type() const { return bf() ? CUDA_R_16BF : CUDA_R_32F; }
    static dim3 grid(size_t n) { return dim3(cuda::grid_for(n)); }

    // kernel<<<blocks, THREADS>>>(args...), checked.
    template <class... KArgs, class... Args>
    void run(void (*kernel)(KArgs...), dim3 blocks, Args... args) {
        launch(kernel, blocks, dim3(cuda::THREADS), 0, args...);
    }
    template <class... KArgs, class... Args>
    void launch(void (*kernel)(KArgs...), dim3 blocks, dim3 threads, size_t smem, Args... args) {
        if (blocks.x == 0 || blocks.y == 0 || blocks.z == 0) return;   // no rows: nothing to do
        if (smem > 48 * 1024) allow_shared_memory(kernel, smem);
        kernel<<<blocks, threads, smem>>>(args...);
        LAUNCH_CHECK();
    }
    // Dynamic shared memory above 48 KB fails to launch unless the kernel opts in (up to the
    // device's sharedMemPerBlockOptin, 227 KB on sm_90): one-query attention over more than
    // 12288 keys (a long --max-len-b, or a long source) needs it, and the fused attention
    // kernels at most lengths. A kernel's opt-in is raised only when a launch needs more than
    // it has (opted_in_), not at every launch.
    template <class... KArgs>
    void allow_shared_memory(void (*kernel)(KArgs...), size_t smem) {
        size_t& opted = opted_in_[(const void*)kernel];
        if (smem <= opted) return;
        if (smem > prop_.sharedMemPerBlockOptin) {
            std::fprintf(stderr, "%s: error: a decoding step needs %zu bytes of shared memory per block, more than "
                                 "this GPU's %zu: shorten the input or the output limit (--max-len-a, "
                                 "--max-len-b)\n", program_invocation_short_name, smem,
                         (size_t)prop_.sharedMemPerBlockOptin);
            std::exit(1);
        }
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        opted = smem;
    }

    // The tiled attention kernels' tile: the most rows (32, 16, 8) and then the most staged rows
    // of the other side (64 down to 1) whose shared memory, chunk * width + rows * (dk + dv) +
    // pd_arrays * rows * (chunk + 1) floats, fits 48 KB; false when none does (d_k + d_v over about
    // 1,400: the row-wise kernels), or when TRANSFORMER_ATTENTION=rowwise asks for those (to
    // time both on a GPU).
    bool attention_tile(int width, int dk, int dv, int pd_arrays, cuda::AttentionTile* t, size_t* smem) const {
        if (attention_ == AttentionKernels::Rowwise) return false;
        for (int rows = 32; rows >= cuda::WARPS; rows /= 2)
            for (int chunk = 64; chunk >= 1; chunk /= 2) {
                const size_t floats = (size_t)chunk * width + (size_t)rows * (dk + dv) + (size_t)pd_arrays * rows * (chunk + 1);
                if (floats * sizeof(float) <= 48 * 1024) {
                    *t = {rows, chunk};
                    *smem = floats * sizeof(float);
                    return true;
                }
            }
        return false;
    }
    // Blocks of a tiled or fused attention kernel: one per (sentence, head, tile of L rows).
    static unsigned tiles(int B, int H, int L, int rows) { return (unsigned)((size_t)B * H * ((L + rows - 1) / rows)); }
    static unsigned tiles(int B, int H, int L, const cuda::AttentionTile& t) { return tiles(B, H, L, t.rows); }

    // The fused attention kernels' rows per block (Map: their shared-memory map, for a tile
    // side of L rows): the most of 64, 32, 16, not past L rounded up to 16, whose shared memory
    // fits FUSED_SHARED_BYTES (two blocks an SM on sm_90); 0 when none does (NMT lengths fit:
    // about 200 queries or keys at d_k = d_v = 64), or when other kernels take attention (fp32,
    // TRANSFORMER_ATTENTION).
    static constexpr size_t FUSED_SHARED_BYTES = 96 * 1024;
    // Threads of a fused attention block: 4 warps where each product of the tile is at most 2 x 2
    // tiles of 16 x 16 on the sides it spreads over (sentences of up to 32 tokens; 8 warps would
    // leave half of them idle there, and an SM holds twice the blocks of 4), else 8; or
    // TRANSFORMER_FUSED_WARPS, to time the two.
    dim3 fused_threads(const AttentionShape& s, int rows) const {
        const int warps = fused_warps_ ? fused_warps_ : rows <= 32 && std::max(s.Lq, s.Lk) <= 32 ? 4 : 8;
        return dim3(32 * warps);
    }
    template <class Map>
    int fused_rows(const AttentionShape& s, int L) const {
        if (attention_ != AttentionKernels::Fused) return 0;
        const size_t limit = std::min<size_t>(FUSED_SHARED_BYTES, prop_.sharedMemPerBlockOptin);
        for (int rows = 64; rows >= 16; rows /= 2)
            if (rows <= cuda::pad16(L) && Map(s, rows).bytes <= limit) return rows;
        return 0;
    }

    // Warps per block for one-query attention over n keys: their scores fit 48 KB of shared
    // memory (one warp over more than 12288 keys takes more, see allow_shared_memory).
    static int step_warps(int n) {
        return std::max(1, std::min(cuda::WARPS, (int)(48 * 1024 / (sizeof(float) * std::max(1, n)))));
    }

    // The element i elements into a floatX tensor (2 or 4 bytes an element, by the precision).
    floatX* at(floatX* p, size_t i) const { return (floatX*)((char*)p + i * floatx_size()); }
    const floatX* at(const floatX* p, size_t i) const { return (const floatX*)((const char*)p + i * floatx_size()); }

    void* scratch(int slot, size_t bytes) {
        if ((int)scratch_.size() <= slot) {
            scratch_.resize(slot + 1, nullptr);
            scratch_bytes_.resize(slot + 1, 0);
        }
        if (scratch_bytes_[slot] < bytes) {
            release(scratch_[slot]);
            scratch_[slot] = alloc(bytes);
            scratch_bytes_[slot] = bytes;
        }
        return scratch_[slot];
    }

    // out (cols) += sum over rows of term(r, c), deterministically.
    template <class Term>
    void column_sum(float* out, Term term, int rows, int cols) {
        const int chunks = (rows + cuda::CHUNK_ROWS - 1) / cuda::CHUNK_ROWS;
        float* partial = (float*)scratch(2, (size_t)chunks * cols * sizeof(float));
        launch(cuda::column_partials_kernel<Term>, dim3((cols + 31) / 32, chunks), dim3(32, 8), 0, partial, term, rows, cols);
        finish_columns(out, partial, chunks, cols);
    }
    // out (cols) += partial (chunks, cols) summed over the chunks (column_finish_kernel's order).
    void finish_columns(float* out, const float* partial, int chunks, int cols) {
        launch(cuda::column_finish_kernel, dim3((cols + 31) / 32), dim3(32, cuda::FINISH_LANES), 0, out, partial,
               chunks, cols);
    }
    // out (cols) += column sums of y (rows, cols): 16 bytes a load where y allows.
    void row_sum(float* out, const floatX* y, int rows, int cols) {
        if (!packs(cols, y)) {
            if (bf()) return column_sum(out, cuda::RowTerm<bf16>{(const bf16*)y, cols}, rows, cols);
            return column_sum(out, cuda::RowTerm<float>{(const float*)y, cols}, rows, cols);
        }
        if (bf()) partials_packed<bf16>(out, cuda::PlainRows<bf16>{(const bf16*)y}, rows, cols);
        else partials_packed<float>(out, cuda::PlainRows<float>{(const float*)y}, rows, cols);
    }
    // Can rows of `cols` columns at these pointers be read in 16-byte packs?
    template <class... Ps>
    bool packs(int cols, const Ps*... ps) const {
        return cols % (16 / (int)floatx_size()) == 0 && ((reinterpret_cast<uintptr_t>(ps) | ...) % 16) == 0;
    }
    // out (cols) += column sums of the (rows, cols) packs that `pack` gives (column_partials_packed_kernel).
    template <class T, class Rows>
    void partials_packed(float* out, Rows pack, int rows, int cols) {
        constexpr int P = cuda::Pack16<T>::N;
        const int chunks = (rows + cuda::CHUNK_ROWS - 1) / cuda::CHUNK_ROWS;
        float* partial = (float*)scratch(2, (size_t)chunks * cols * sizeof(float));
        const dim3 blocks((cols + 32 * P - 1) / (32 * P), chunks), threads(32, 8);
        launch(cuda::column_partials_packed_kernel<T, Rows>, blocks, threads, 0, partial, pack, rows, cols);
        finish_columns(out, partial, chunks, cols);
    }

    // Column-major C (m, n; ldc) = op(A) op(B) + beta C (+ bias (m) per column) (then max(0, .)
    // when relu), A and B of the activation type, C of c_type, accumulated in fp32 (TF32 off in
    // fp32 mode); the bias and the ReLU in cuBLASLt's epilogue. The epilogue needs a bias on a
    // 16-byte boundary (Marian NMT saw it fail below on an A100); a bias elsewhere (a parameter
    // layout with sizes that are not multiples of 8 floats) is added by bias_relu_kernel after
    // the plain product: the same sums in fp32, rounded twice in bf16.
    void matmul(bool ta, bool tb, int m, int n, int k, const void* A, int lda, const void* B, int ldb,
                void* C, int ldc, cudaDataType c_type, float beta, const void* bias, bool relu = false,
                const Batch& batch = {}) {
        if (m == 0 || n == 0 || batch.count == 0) return;
        if (bias && alignment_of(bias) < 16) {
            matmul(ta, tb, m, n, k, A, lda, B, ldb, C, ldc, c_type, beta, nullptr);
            if (bf()) run(cuda::bias_relu_kernel<bf16>, grid((size_t)m * n), (bf16*)C, (const bf16*)bias, m, n, ldc, relu);
            else run(cuda::bias_relu_kernel<float>, grid((size_t)m * n), (float*)C, (const float*)bias, m, n, ldc, relu);
            return;
        }
        const cudaDataType ab = act_type();
        const cublasLtEpilogue_t epi = bias ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                            : (relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
        const size_t ab_bytes = floatx_size(), c_bytes = c_type == CUDA_R_32F ? 4 : 2;
        // A batch's later matrices lie a stride on: the alignment all of them share.
        const uint32_t align_a = alignment_of(A, batch.a * ab_bytes), align_b = alignment_of(B, batch.b * ab_bytes);
        const uint32_t align_c = alignment_of(C, batch.c * c_bytes);
        const uint32_t align_bias = bias ? alignment_of(bias) : 256;
        // Each alignment in the key on its own: an algorithm chosen for an aligned A but a
        // 2-byte B must not be reused for the opposite.
        const ProductKey key = std::make_tuple((int)ta, (int)tb, m, n, k, lda, ldb, ldc, (int)c_type, (int)ab, (int)epi,
                                               align_a, align_b, align_c, align_bias, (uint32_t)(beta != 0),
                                               batch.count, batch.a, batch.b, batch.c);
        auto it = products_.find(key);
        if (it == products_.end()) {
            const auto start = std::chrono::steady_clock::now();
            it = products_.emplace(key, plan_product(key)).first;
            plans_.host_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        }
        const Product& pr = it->second;
        // The bias pointer is the one attribute that changes from call to call; cuBLASLt reads
        // the descriptor when the call is made, so the next call may change it again.
        if (bias) CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        const float alpha = 1.0f;
        CUBLAS_CHECK(cublasLtMatmul(lt_, pr.op, &alpha, A, pr.la, B, pr.lb, &beta, C, pr.lc, C, pr.lc, &pr.algo.algo,
                                    workspace_, workspace_bytes_, 0));
    }

    // A product's descriptors and algorithm, made once per key (matmul's shapes, types,
    // epilogue, alignments and batch) and kept: a call then costs one lookup and cublasLtMatmul.
    // The algorithm is the one cuBLASLt's heuristic chose for the planned shape (m, n, k
    // rounded up, planned_shape) when it also runs this one (cublasLtMatmulAlgoCheck), else
    // the heuristic's for this shape. Decoding's row count falls step by step as sentences
    // finish, and training's changes with every batch: one heuristic per exact shape is the
    // suspected cause of bf16 decoding the test set at 2,381 sentences/s on an H100 against
    // fp32's 6,171, where a fixed batch, timed after warm-up runs, decoded twice as fast in bf16
    // (not yet measured with this change). One algorithm across a bucket also keeps a row's
    // sums the same when the rows around it come and go. A shape's algorithm depends on its
    // bucket alone, not on the order of calls, so a run and its resume stay bitwise equal. The
    // heuristic is asked once a bucket, also where the first shape met is the bucket's own.
    Product plan_product(const ProductKey& key) {
        Product p = describe_product(key);
        const ProductKey planned = planned_shape(key);
        auto it = algorithms_.find(planned);
        if (it == algorithms_.end()) {   // the bucket's first product (a shape that is its own bucket too)
            Product q = planned == key ? p : describe_product(planned);
            cublasLtMatmulHeuristicResult_t h;
            const bool found = choose_algorithm(q, planned, &h) == CUBLAS_STATUS_SUCCESS;
            it = algorithms_.emplace(planned, found ? std::optional<cublasLtMatmulAlgo_t>(h.algo) : std::nullopt).first;
            if (planned != key) destroy_product(q);
            else if (found) {   // the bucket's own shape: the heuristic chose for it, no check needed
                p.algo = h;
                return p;
            }
        }
        cublasLtMatmulHeuristicResult_t check{};
        plans_.checks += it->second.has_value();
        if (it->second && cublasLtMatmulAlgoCheck(lt_, p.op, p.la, p.lb, p.lc, p.lc, &*it->second, &check) ==
                              CUBLAS_STATUS_SUCCESS && check.workspaceSize <= workspace_bytes_) {
            p.algo = check;
            p.algo.algo = *it->second;
            return p;
        }
        const cublasStatus_t status = choose_algorithm(p, key, &p.algo);   // the bucket's algorithm cannot run it
        if (status != CUBLAS_STATUS_SUCCESS) {   // no algorithm: say which product
            const auto [ta, tb, m, n, k, lda, ldb, ldc, c_type, ab, epi, align_a, align_b, align_c, align_bias, with_beta,
                        count, stride_a, stride_b, stride_c] = key;
            std::fprintf(stderr, "cuBLASLt: no algorithm for a %d x %d x %d product (%s, op(A) %c op(B) %c, "
                         "epilogue %d, alignments A %u B %u C %u bias %u bytes, batch of %d): %s\n", m, n, k,
                         precision_name(precision_), ta ? 'T' : 'N', tb ? 'T' : 'N', epi, align_a, align_b,
                         align_c, align_bias, count, cublasLtGetStatusString(status));
            std::exit(1);
        }
        return p;
    }

    // The shape a product's algorithm is chosen for: m, n and k each rounded up to 8 steps an
    // octave (17 -> 18, 100 -> 104, 1000 -> 1024; powers of two and at most 16 stay;
    // TRANSFORMER_GEMM_BUCKET_STEPS=1, 2, 4 or 16 sets the steps, fewer making fewer buckets and
    // fewer heuristic queries for decoding's falling row counts), where the leading dimensions
    // leave room (a dimension that is an operand's rows stays when its ld is less than the rounded
    // size); batched products (attention's) keep their own.
    ProductKey planned_shape(const ProductKey& key) const {
        ProductKey planned = key;
        auto& [ta, tb, m, n, k, lda, ldb, ldc, c_type, ab, epi, align_a, align_b, align_c, align_bias, with_beta,
               count, stride_a, stride_b, stride_c] = planned;
        if (count > 1) return key;
        const int pm = rounded_size(m, bucket_steps_), pn = rounded_size(n, bucket_steps_), pk = rounded_size(k, bucket_steps_);
        if (ldc >= pm && (ta || lda >= pm)) m = pm;   // C (m, n); A (m, k), or (k, m) transposed
        if (!tb || ldb >= pn) n = pn;                 // B (k, n), or (n, k) transposed
        if ((!ta || lda >= pk) && (tb || ldb >= pk)) k = pk;
        return planned;
    }
    static int rounded_size(int x, int steps) {   // (8 steps: sizes up to 16 stay, their steps being 1)
        int octave = 1;
        while (octave * 2 <= x) octave *= 2;
        const int step = std::max(1, octave / steps);
        return (x + step - 1) / step * step;
    }

    // The descriptors of a product (key: see ProductKey), its algorithm not yet chosen.
    Product describe_product(const ProductKey& key) {
        const auto [ta, tb, m, n, k, lda, ldb, ldc, c_type_value, ab_value, epi_value, align_a, align_b, align_c,
                    align_bias, with_beta, count, stride_a, stride_b, stride_c] = key;
        const cudaDataType ab = (cudaDataType)ab_value, c_type = (cudaDataType)c_type_value;
        const cublasLtEpilogue_t epi = (cublasLtEpilogue_t)epi_value;
        Product p;
        CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        if (epi & CUBLASLT_EPILOGUE_BIAS) {   // the pointer itself is set by each call
            const void* bias_placeholder = workspace_;
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_placeholder, sizeof bias_placeholder));
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &ab, sizeof ab));
        }
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.la, ab, ta ? k : m, ta ? m : k, lda));
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.lb, ab, tb ? n : k, tb ? k : n, ldb));
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.lc, c_type, m, n, ldc));
        if (count > 1) {
            set_batch(p.la, count, stride_a);
            set_batch(p.lb, count, stride_b);
            set_batch(p.lc, count, stride_c);
        }
        return p;
    }
    static void destroy_product(const Product& p) {
        cublasLtMatrixLayoutDestroy(p.la);
        cublasLtMatrixLayoutDestroy(p.lb);
        cublasLtMatrixLayoutDestroy(p.lc);
        cublasLtMatmulDescDestroy(p.op);
    }

    // The algorithm for product p (key: its shapes and alignments): the heuristic's first, or
    // with TRANSFORMER_GEMM_TUNE=N the fastest of its first N (fastest_algorithm). The tuned
    // choice rests on timings, which vary from run to run, so a run and its resume may then
    // differ in their last bits: it is there to measure what the heuristic's first choice
    // leaves (gpu-check times the base step with it), not for training.
    cublasStatus_t choose_algorithm(const Product& p, const ProductKey& key, cublasLtMatmulHeuristicResult_t* result) {
        std::vector<cublasLtMatmulHeuristicResult_t> found(std::max(1, gemm_tune_));
        int n = 0;
        const cublasStatus_t status = heuristic(p, key, (int)found.size(), found.data(), &n);
        if (status == CUBLAS_STATUS_SUCCESS) *result = found[n > 1 ? fastest_algorithm(p, key, found.data(), n) : 0];
        return status;
    }

    // Which of n algorithms runs product p (key) fastest: each timed over 5 calls after a first,
    // on zeroed operands of the key's shape (not the caller's: a product that accumulates would
    // change them); one line a shape to stderr with the first's time and the fastest's.
    int fastest_algorithm(const Product& p, const ProductKey& key, const cublasLtMatmulHeuristicResult_t* algos, int n) {
        const auto [ta, tb, m, n_cols, k, lda, ldb, ldc, c_type, ab, epi, align_a, align_b, align_c, align_bias,
                    with_beta, count, stride_a, stride_b, stride_c] = key;
        const size_t ab_bytes = ab == CUDA_R_32F ? 4 : 2, c_bytes = c_type == CUDA_R_32F ? 4 : 2;
        const size_t later = (size_t)std::max(count, 1) - 1;
        const size_t sizes[4] = {((size_t)lda * (ta ? m : k) + later * stride_a) * ab_bytes,
                                 ((size_t)ldb * (tb ? k : n_cols) + later * stride_b) * ab_bytes,
                                 ((size_t)ldc * n_cols + later * stride_c) * c_bytes, (size_t)m * ab_bytes};
        void* operands[4] = {};   // A, B, C, the bias
        for (int i = 0; i < 4; i++) {
            CUDA_CHECK(cudaMalloc(&operands[i], sizes[i]));
            CUDA_CHECK(cudaMemsetAsync(operands[i], 0, sizes[i]));
        }
        if (epi & CUBLASLT_EPILOGUE_BIAS)
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &operands[3], sizeof operands[3]));
        const float alpha = 1.0f, beta = with_beta ? 1.0f : 0.0f;
        auto call = [&](int i) {
            return cublasLtMatmul(lt_, p.op, &alpha, operands[0], p.la, operands[1], p.lb, &beta, operands[2], p.lc,
                                  operands[2], p.lc, &algos[i].algo, workspace_, workspace_bytes_, 0);
        };
        cudaEvent_t start, end;
        CUDA_CHECK(cudaEventCreate(&start));
        CUDA_CHECK(cudaEventCreate(&end));
        int best = 0;
        float best_ms = INFINITY, first_ms = INFINITY;
        for (int i = 0; i < n; i++) {
            if (algos[i].workspaceSize > workspace_bytes_ || call(i) != CUBLAS_STATUS_SUCCESS) continue;
            CUDA_CHECK(cudaEventRecord(start));
            for (int r = 0; r < 5; r++) CUBLAS_CHECK(call(i));
            CUDA_CHECK(cudaEventRecord(end));
            CUDA_CHECK(cudaEventSynchronize(end));
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
            if (i == 0) first_ms = ms / 5;
            if (ms / 5 < best_ms) best_ms = ms / 5, best = i;
        }
        cudaEventDestroy(start);
        cudaEventDestroy(end);
        for (void* o : operands) CUDA_CHECK(cudaFree(o));
        // the whole key, so that each line names one product plan
        std::fprintf(stderr, "gemm-tune: %d x %d x %d (op(A) %c op(B) %c, ld %d/%d/%d, C %s, epilogue %d, beta %d, "
                     "alignments %u/%u/%u/%u, batch of %d strides %lld/%lld/%lld): the heuristic's first %.4f ms, "
                     "its #%d of %d %.4f ms\n", m, n_cols, k, ta ? 'T' : 'N', tb ? 'T' : 'N', lda, ldb, ldc,
                     c_type == CUDA_R_32F ? "fp32" : "bf16", epi, (int)with_beta, align_a, align_b, align_c,
                     align_bias, count, stride_a, stride_b, stride_c, first_ms, best + 1, n,
                     best_ms);
        return best;
    }

    // cuBLASLt's heuristic's first algorithms (up to `requested`) for p (key: its alignments)
    // into results, *found of them: within the workspace, without in-place split-K reductions
    // (see Determinism, at the top).
    cublasStatus_t heuristic(const Product& p, const ProductKey& key, int requested,
                             cublasLtMatmulHeuristicResult_t* results, int* found) {
        const auto [ta, tb, m, n, k, lda, ldb, ldc, c_type, ab, epi, align_a, align_b, align_c, align_bias, with_beta,
                    count, stride_a, stride_b, stride_c] = key;
        cublasLtMatmulPreference_t pref;
        CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof workspace_bytes_));
        const uint32_t no_inplace = CUBLASLT_REDUCTION_SCHEME_MASK & ~CUBLASLT_REDUCTION_SCHEME_INPLACE;
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_inplace, sizeof no_inplace));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c));
        *found = 0;
        plans_.heuristics++;
        const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.la, p.lb, p.lc, p.lc, pref, requested,
                                                                     results, found);
        cublasLtMatmulPreferenceDestroy(pref);
        return status == CUBLAS_STATUS_SUCCESS && *found == 0 ? CUBLAS_STATUS_NOT_SUPPORTED : status;
    }
};

}  // namespace

// The checksum of the interface headers this library was built from (the Makefile's
// BACKEND_ABI; 0 outside it), which model/backend.cpp compares with its own before it calls in.
#ifndef BACKEND_ABI
#define BACKEND_ABI 0u
#endif
extern "C" unsigned transformer_cuda_abi() { return BACKEND_ABI; }

// The library's entry point, loaded by model/backend.cpp (dlopen): a CUDA backend for GPU 0 in
// fp32 or bf16 (Precision as an int), or nullptr + *error.
extern "C" Backend* transformer_cuda_backend(int precision_value, std::string* error) {
    const Precision precision = (Precision)precision_value;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        *error = std::string("no CUDA device: ") + (e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        cudaGetLastError();   // clear the sticky error
        return nullptr;
    }
    if (precision != Precision::FP32 && precision != Precision::BF16) {
        *error = std::string("the GPU runs fp32 or bf16, not ") + precision_name(precision);
        return nullptr;
    }
    AttentionKernels attention;
    if (!parse_attention_kernels(std::getenv("TRANSFORMER_ATTENTION"), &attention)) {
        *error = std::string("TRANSFORMER_ATTENTION is tiled, rowwise, batched or fused, not '") +
                 std::getenv("TRANSFORMER_ATTENTION") + "'";
        return nullptr;
    }
    const char* warps = std::getenv("TRANSFORMER_FUSED_WARPS");
    if (warps && std::string(warps) != "4" && std::string(warps) != "8") {
        *error = std::string("TRANSFORMER_FUSED_WARPS is 4 or 8, not '") + warps + "'";
        return nullptr;
    }
    const char* tune = std::getenv("TRANSFORMER_GEMM_TUNE");
    const int gemm_tune = tune ? std::atoi(tune) : 0;
    if (tune && (std::string(tune) != std::to_string(gemm_tune) || gemm_tune < 0 || gemm_tune > 64)) {
        *error = std::string("TRANSFORMER_GEMM_TUNE is a count of algorithms to time, 0 to 64, not '") + tune + "'";
        return nullptr;
    }
    const char* steps = std::getenv("TRANSFORMER_GEMM_BUCKET_STEPS");
    const int bucket_steps = steps ? std::atoi(steps) : 8;
    if (steps && (std::string(steps) != std::to_string(bucket_steps) || bucket_steps < 1 || bucket_steps > 16 ||
                  (bucket_steps & (bucket_steps - 1)))) {
        *error = std::string("TRANSFORMER_GEMM_BUCKET_STEPS is the planned sizes an octave, 1, 2, 4, 8 or 16, not '") +
                 steps + "'";
        return nullptr;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major < 8) {
        *error = std::string(prop.name) + " is compute capability " + std::to_string(prop.major) + "." +
                 std::to_string(prop.minor) + "; this backend needs 8.0 or newer (bf16)";
        return nullptr;
    }
    return new CudaBackend(precision, prop, attention, warps ? std::atoi(warps) : 0, gemm_tune, bucket_steps);
}
