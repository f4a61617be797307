// test/cuda_emulator/test_emulator.cu — the CUDA emulator checked on its own, before it is
// trusted with transformer.cu: kernels whose results are known (block and warp reductions
// through __syncthreads, __syncwarp and shuffles, 3-D indices, dynamic shared memory), the
// launch limits and the runtime's refusals, cuBLASLt's product and WMMA's against a plain
// loop, CUB's sort, and, each in a child process, the faults it must stop on (a deadlock between
// __syncwarp and __syncthreads, a shuffle reading a lane that returned, threadIdx outside a
// kernel). Built by g++ against the emulator's headers, like build/emu/transformer_emu.cpp.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cub/cub.cuh>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include "test/check.h"

using cuda_emulator::launch;

// ---------------------------------------------------------------------------------------------
// Kernels with known results
// ---------------------------------------------------------------------------------------------
// out[block] = sum of in[block * n .. + n) by a shared-memory tree over blockDim.x threads.
__global__ void block_sum_kernel(int* out, const int* in, int n) {
    __shared__ int part[1024];
    int acc = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) acc += in[(size_t)blockIdx.x * n + i];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if ((int)threadIdx.x < stride) part[threadIdx.x] += part[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

// out[warp] = sum over its 32 lanes of (lane + 1) * (warp + 1), through shuffles; every lane
// checks that it received the same sum.
__global__ void warp_sum_kernel(int* out, int* disagreements) {
    const int lane = threadIdx.x % 32, warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int v = (lane + 1) * (warp + 1);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) out[warp] = v;
    __syncwarp();
    const int again = __shfl_xor_sync(0xffffffffu, v, 5);
    if (again != v) disagreements[warp] = 1;
}

// out[warp] = the ballot of "lane % (warp + 2) == 0" and, from lane 0, __ffs of its complement.
__global__ void ballot_kernel(unsigned* out, int* first_clear) {
    const int lane = threadIdx.x % 32, warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const unsigned b = __ballot_sync(0xffffffffu, lane % (warp + 2) == 0);
    if (lane == 0) out[warp] = b, first_clear[warp] = __ffs(~b);
}

// Every thread of a 3-D grid of 3-D blocks writes its global coordinates once.
__global__ void coordinates_kernel(int* out, int width, int height) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z = blockIdx.z * blockDim.z + threadIdx.z;
    out[((size_t)z * height + y) * width + x] = x + 1000 * y + 1000000 * z;
}

// Dynamic shared memory: each thread writes its index, then reads its neighbour's.
__global__ void shared_rotate_kernel(int* out) {
    extern __shared__ int ring[];
    ring[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = ring[(threadIdx.x + 1) % blockDim.x];
}
__global__ void nothing_kernel() {}

// Barriers missing on purpose: thread t writes ring[t], then at once reads the other warp's
// entry (t + 32) % 64 and its neighbour lane's t ^ 1. What it reads depends on the order the
// emulator runs the warps and lanes in (-1: not written yet).
__global__ void missing_barrier_kernel(int* other_warp, int* other_lane) {
    extern __shared__ int ring[];
    ring[threadIdx.x] = threadIdx.x;
    other_warp[threadIdx.x] = ring[(threadIdx.x + 32) % blockDim.x];
    other_lane[threadIdx.x] = ring[threadIdx.x ^ 1];
}

// Faults the emulator must stop on.
__global__ void deadlock_kernel() {   // warp 0 at __syncwarp, warp 0's lane 31 at __syncthreads
    if (threadIdx.x == 31) __syncthreads();
    else __syncwarp();
}
__global__ void early_return_shuffle_kernel(int* out) {   // lane 3 returns before the shuffle
    if (threadIdx.x == 3) return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}

__global__ void write_past_kernel(int* p, int n) { p[n + threadIdx.x] = 1; }   // n .. n + 31

// C (32, 32; fp32) = A (32, 32) B (32, 32) in bf16 by WMMA, one warp a 16x16 tile of C: A
// row-major, B column-major (b_col) or row-major, staged in shared memory (ld 40, as
// transformer.cu pads); `shift` moves the shared A by that many elements (misaligned if odd).
namespace wmma = nvcuda::wmma;
__global__ void wmma_product_kernel(float* C, const __nv_bfloat16* A, const __nv_bfloat16* B, bool b_col, int shift) {
    __shared__ __align__(32) __nv_bfloat16 a[32 * 40 + 16], b[32 * 40];
    for (int e = threadIdx.x; e < 32 * 32; e += blockDim.x) {
        a[shift + e / 32 * 40 + e % 32] = A[e];
        b[e / 32 * 40 + e % 32] = B[e];
    }
    __syncthreads();
    const int warp = threadIdx.x / 32, i = warp / 2 * 16, j = warp % 2 * 16;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.0f);
    for (int k = 0; k < 32; k += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
        wmma::load_matrix_sync(fa, a + shift + i * 40 + k, 40);
        if (b_col) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
            wmma::load_matrix_sync(fb, b + j * 40 + k, 40);
            wmma::mma_sync(c, fa, fb, c);
        } else {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
            wmma::load_matrix_sync(fb, b + k * 40 + j, 40);
            wmma::mma_sync(c, fa, fb, c);
        }
    }
    wmma::store_matrix_sync(C + i * 32 + j, c, 32, wmma::mem_row_major);
}
// Lane 0 loads its fragment from another row than the other lanes.
__global__ void wmma_lanes_disagree_kernel() {
    __shared__ __align__(32) __nv_bfloat16 a[32 * 16];
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, a + (threadIdx.x == 0 ? 16 : 0), 16);
}

// ---------------------------------------------------------------------------------------------
static std::vector<int> download_ints(const int* d, size_t n) {
    std::vector<int> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost);
    return h;
}
static int* device_ints(const std::vector<int>& h) {
    void* d = nullptr;
    cudaMalloc(&d, h.size() * sizeof(int));
    cudaMemcpy(d, h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice);
    return (int*)d;
}

static void reductions() {
    const int blocks = 37, n = 1000;
    std::vector<int> in((size_t)blocks * n);
    for (size_t i = 0; i < in.size(); i++) in[i] = (int)(i * 7 % 101) - 50;
    int* din = device_ints(in);
    int* dout = device_ints(std::vector<int>(blocks, 0));
    for (unsigned threads : {32u, 256u, 1024u}) {
        block_sum_kernel<<<blocks, threads>>>(dout, (const int*)din, n);
        std::vector<int> got = download_ints(dout, blocks);
        int wrong = 0;
        for (int b = 0; b < blocks; b++) {
            int want = 0;
            for (int i = 0; i < n; i++) want += in[(size_t)b * n + i];
            wrong += got[(size_t)b] != want;
        }
        check(wrong == 0 && cudaGetLastError() == cudaSuccess,
              "__syncthreads tree sum, %d blocks x %u threads: %d of %d block sums wrong", blocks, threads, wrong, blocks);
    }
    const int warps = 5 * 8;
    int* sums = device_ints(std::vector<int>(warps, 0));
    int* dis = device_ints(std::vector<int>(warps, 0));
    warp_sum_kernel<<<5, 256>>>(sums, dis);
    std::vector<int> got = download_ints(sums, warps), bad = download_ints(dis, warps);
    int wrong = 0, disagree = 0;
    for (int w = 0; w < warps; w++) wrong += got[(size_t)w] != 528 * (w + 1), disagree += bad[(size_t)w];
    check(wrong == 0 && disagree == 0, "shuffle sum over 40 warps: %d sums wrong, %d warps whose lanes disagree", wrong,
          disagree);
    unsigned* ballots;
    cudaMalloc((void**)&ballots, warps * sizeof(unsigned));
    int* clear = device_ints(std::vector<int>(warps, 0));
    ballot_kernel<<<5, 256>>>(ballots, clear);
    std::vector<unsigned> bal(warps);
    cudaMemcpy(bal.data(), ballots, warps * sizeof(unsigned), cudaMemcpyDeviceToHost);
    std::vector<int> first = download_ints(clear, warps);
    int wrong_ballots = 0;
    for (int w = 0; w < warps; w++) {
        unsigned want = 0;
        for (int l = 0; l < 32; l++) want |= (l % (w + 2) == 0 ? 1u : 0u) << l;
        wrong_ballots += bal[(size_t)w] != want || first[(size_t)w] != 2;   // lane 1 is never set
    }
    check(wrong_ballots == 0, "__ballot_sync and __ffs over 40 warps: %d wrong", wrong_ballots);
    cudaFree(din), cudaFree(dout), cudaFree(sums), cudaFree(dis), cudaFree(ballots), cudaFree(clear);
}

static void indices_and_shared_memory() {
    const int W = 8 * 3, H = 4 * 5, D = 2 * 3;
    int* d = device_ints(std::vector<int>((size_t)W * H * D, -1));
    coordinates_kernel<<<dim3(3, 5, 3), dim3(8, 4, 2)>>>(d, W, H);
    std::vector<int> got = download_ints(d, (size_t)W * H * D);
    int wrong = 0;
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) wrong += got[((size_t)z * H + y) * W + x] != x + 1000 * y + 1000000 * z;
    check(wrong == 0, "3-D grid of 3-D blocks: every thread once, coordinates right (%d wrong of %d)", wrong, W * H * D);
    int* r = device_ints(std::vector<int>(96, -1));
    shared_rotate_kernel<<<1, 96, 96 * sizeof(int)>>>(r);
    std::vector<int> rot = download_ints(r, 96);
    wrong = 0;
    for (int i = 0; i < 96; i++) wrong += rot[(size_t)i] != (i + 1) % 96;
    check(wrong == 0, "dynamic shared memory shared by a block's threads (%d wrong of 96)", wrong);
    cudaFree(d), cudaFree(r);
}

static void launch_limits_and_runtime() {
    cudaGetLastError();
    nothing_kernel<<<1, 1025>>>();
    check(cudaGetLastError() == cudaErrorInvalidConfiguration, "a block of 1025 threads is refused");
    nothing_kernel<<<dim3(1, 65536), 32>>>();
    check(cudaGetLastError() == cudaErrorInvalidConfiguration, "a grid with y = 65536 is refused");
    nothing_kernel<<<1, 32, 48 * 1024 + 4>>>();
    check(cudaGetLastError() == cudaErrorInvalidValue, "over 48 KB of dynamic shared memory is refused without the attribute");
    check(cudaFuncSetAttribute(nothing_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024) == cudaSuccess,
          "cudaFuncSetAttribute raises the kernel's limit to 100 KB");
    nothing_kernel<<<1, 32, 100 * 1024>>>();
    check(cudaGetLastError() == cudaSuccess, "100 KB of dynamic shared memory then launches");
    check(cudaFuncSetAttribute(nothing_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) == cudaErrorInvalidValue,
          "the attribute above sm_90's 227 KB is refused");
    int fits = -1, too_big = -1, too_many = -1;
    const bool queried = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, nothing_kernel, 256, 100 * 1024) == cudaSuccess &&
                         cudaOccupancyMaxActiveBlocksPerMultiprocessor(&too_big, nothing_kernel, 256, 101 * 1024) == cudaSuccess &&
                         cudaOccupancyMaxActiveBlocksPerMultiprocessor(&too_many, nothing_kernel, 1025, 0) == cudaSuccess;
    check(queried && fits == 1 && too_big == 0 && too_many == 0 && cudaGetLastError() == cudaSuccess,
          "the occupancy calculator: 1 block an SM that fits (%d), 0 past the shared memory (%d) or 1024 threads (%d), no error left",
          fits, too_big, too_many);
    void* p = nullptr;
    cudaMalloc(&p, 100);
    std::vector<unsigned char> h(200);
    check(cudaMemcpy(h.data(), p, 100, cudaMemcpyDeviceToHost) == cudaSuccess && h[0] == 0xff && h[99] == 0xff,
          "cudaMalloc'ed memory is not zeroed: it reads as 0xff bytes (NaN, -1)");
    check(cudaMemcpy(h.data(), p, 101, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue,
          "a copy one byte past an allocation is refused");
    check(cudaMemsetAsync((char*)p + 50, 0, 51) == cudaErrorInvalidValue, "a memset past an allocation is refused");
    check(cudaFree(h.data()) == cudaErrorInvalidValue, "cudaFree of a pointer it did not allocate is refused");
    check(cudaFree(p) == cudaSuccess, "cudaFree of an allocation");
}

static float bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }

static void bf16_conversions() {
    check(bf16_round(1.0f) == 1.0f && bf16_round(1.00390625f) == 1.0f && bf16_round(1.01171875f) == 1.015625f,
          "bf16 rounds to nearest, ties to even (1+2^-8 -> 1, 1+3*2^-8 -> 1+2^-6)");
    check(std::isnan(bf16_round(NAN)) && std::isinf(bf16_round(INFINITY)) && bf16_round(3.4e38f) == INFINITY,
          "bf16 keeps NaN a NaN and infinity; 3.4e38 rounds to infinity");
}

// Column-major D = op(A) op(B) + beta C + bias (then max(0, .) with relu) against a plain loop,
// both transposes, bf16 and fp32.
static void matmul(bool ta, bool tb, cudaDataType type, bool bias, float beta, bool relu = false) {
    const int m = 7, n = 5, k = 9, lda = (ta ? k : m) + 2, ldb = (tb ? n : k) + 1, ldc = m + 3;
    const size_t es = type == CUDA_R_16BF ? 2 : 4;
    std::vector<float> A((size_t)lda * (ta ? m : k)), B((size_t)ldb * (tb ? k : n)), C((size_t)ldc * n), bv(m);
    for (size_t i = 0; i < A.size(); i++) A[i] = bf16_round((float)((i * 37) % 19) / 8 - 1);
    for (size_t i = 0; i < B.size(); i++) B[i] = bf16_round((float)((i * 11) % 23) / 8 - 1.5f);
    for (size_t i = 0; i < C.size(); i++) C[i] = bf16_round((float)(i % 7) - 3);
    for (int i = 0; i < m; i++) bv[(size_t)i] = bf16_round(0.25f * i);
    auto put = [&](const std::vector<float>& h, cudaDataType t) {
        void* d = nullptr;
        cudaMalloc(&d, h.size() * (t == CUDA_R_16BF ? 2 : 4));
        std::vector<unsigned char> raw(h.size() * (t == CUDA_R_16BF ? 2 : 4));
        for (size_t i = 0; i < h.size(); i++) {
            if (t == CUDA_R_16BF) {
                __nv_bfloat16 b = __float2bfloat16(h[i]);
                std::memcpy(&raw[2 * i], &b, 2);
            } else {
                std::memcpy(&raw[4 * i], &h[i], 4);
            }
        }
        cudaMemcpy(d, raw.data(), raw.size(), cudaMemcpyHostToDevice);
        return d;
    };
    void *dA = put(A, type), *dB = put(B, type), *dC = put(C, type), *dbias = put(bv, type);
    cublasLtHandle_t lt;
    cublasLtCreate(&lt);
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob);
    const cublasLtEpilogue_t e = bias ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                      : (relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    if (bias) cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof dbias);
    cublasLtMatrixLayout_t la, lb, lc, wrong;
    cublasLtMatrixLayoutCreate(&la, type, ta ? k : m, ta ? m : k, lda);
    cublasLtMatrixLayoutCreate(&lb, type, tb ? n : k, tb ? k : n, ldb);
    cublasLtMatrixLayoutCreate(&lc, type, m, n, ldc);
    cublasLtMatrixLayoutCreate(&wrong, type, m + 1, n, ldc);
    const float alpha = 1.0f;
    const cublasStatus_t st = cublasLtMatmul(lt, op, &alpha, dA, la, dB, lb, &beta, dC, lc, dC, lc, nullptr, nullptr, 0, nullptr);
    const cublasStatus_t refused = cublasLtMatmul(lt, op, &alpha, dA, la, dB, lb, &beta, dC, wrong, dC, wrong, nullptr, nullptr, 0, nullptr);
    std::vector<unsigned char> raw((size_t)ldc * n * es);
    cudaMemcpy(raw.data(), dC, raw.size(), cudaMemcpyDeviceToHost);
    double worst = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double want = beta * C[(size_t)i + (size_t)j * ldc] + (bias ? bv[(size_t)i] : 0);
            for (int l = 0; l < k; l++)
                want += (double)A[ta ? (size_t)l + (size_t)i * lda : (size_t)i + (size_t)l * lda] *
                        B[tb ? (size_t)j + (size_t)l * ldb : (size_t)l + (size_t)j * ldb];
            if (relu) want = std::max(want, 0.0);
            float got;
            if (type == CUDA_R_16BF) {
                __nv_bfloat16 b;
                std::memcpy(&b, &raw[2 * ((size_t)i + (size_t)j * ldc)], 2);
                got = __bfloat162float(b);
            } else {
                std::memcpy(&got, &raw[4 * ((size_t)i + (size_t)j * ldc)], 4);
            }
            worst = std::max(worst, std::fabs(got - want) / std::max(1.0, std::fabs(want)));
        }
    const double tol = type == CUDA_R_16BF ? 8e-3 : 1e-6;
    check(st == CUBLAS_STATUS_SUCCESS && refused == CUBLAS_STATUS_INVALID_VALUE && worst <= tol,
          "cuBLASLt product %s%s %s%s%s beta=%g: max rel error %.2e (<= %.0e); a C layout of the wrong shape refused",
          ta ? "T" : "N", tb ? "T" : "N", type == CUDA_R_16BF ? "bf16" : "fp32", bias ? " +bias" : "",
          relu ? " relu" : "", beta, worst, tol);
    for (cublasLtMatrixLayout_t l : {la, lb, lc, wrong}) cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(lt);
    for (void* p : {dA, dB, dC, dbias}) cudaFree(p);
}

// An algorithm from the heuristic runs its product and smaller ones (cublasLtMatmulAlgoCheck
// says so), not larger ones; a zeroed one the heuristic never made is refused.
static void algorithm_checks() {
    float* d = nullptr;
    cudaMalloc((void**)&d, 3 * 64 * sizeof(float));
    cudaMemsetAsync(d, 0, 3 * 64 * sizeof(float));
    cublasLtHandle_t lt;
    cublasLtCreate(&lt);
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayout_t six, eight;   // (6, 6) and (8, 8) in an ld of 8
    cublasLtMatrixLayoutCreate(&six, CUDA_R_32F, 6, 6, 8);
    cublasLtMatrixLayoutCreate(&eight, CUDA_R_32F, 8, 8, 8);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulHeuristicResult_t h, c6, c8;
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, op, six, six, six, six, pref, 1, &h, &found);
    const cublasStatus_t small = cublasLtMatmulAlgoCheck(lt, op, six, six, six, six, &h.algo, &c6);
    const cublasStatus_t large = cublasLtMatmulAlgoCheck(lt, op, eight, eight, eight, eight, &h.algo, &c8);
    const float alpha = 1.0f, beta = 0.0f;
    const cublasStatus_t runs = cublasLtMatmul(lt, op, &alpha, d, six, d + 64, six, &beta, d + 128, six, d + 128, six,
                                               &h.algo, nullptr, 0, nullptr);
    const cublasStatus_t beyond = cublasLtMatmul(lt, op, &alpha, d, eight, d + 64, eight, &beta, d + 128, eight, d + 128,
                                                 eight, &h.algo, nullptr, 0, nullptr);
    cublasLtMatmulAlgo_t zero{};
    const cublasStatus_t unmade = cublasLtMatmul(lt, op, &alpha, d, six, d + 64, six, &beta, d + 128, six, d + 128, six,
                                                 &zero, nullptr, 0, nullptr);
    check(found == 1 && small == CUBLAS_STATUS_SUCCESS && runs == CUBLAS_STATUS_SUCCESS &&
              large == CUBLAS_STATUS_NOT_SUPPORTED && beyond == CUBLAS_STATUS_NOT_SUPPORTED &&
              unmade == CUBLAS_STATUS_INVALID_VALUE,
          "an algorithm chosen for 6 x 6 x 6: checked and run there (%s, %s), not at 8 x 8 x 8 (%s, %s); "
          "a zeroed one refused (%s)", cublasLtGetStatusString(small), cublasLtGetStatusString(runs),
          cublasLtGetStatusString(large), cublasLtGetStatusString(beyond), cublasLtGetStatusString(unmade));
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(six);
    cublasLtMatrixLayoutDestroy(eight);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(lt);
    cudaFree(d);
}

// The bias epilogue with its vector off a 16-byte boundary is refused (as a GPU may), on it it runs.
static void bias_alignment() {
    float* d = nullptr;
    cudaMalloc((void**)&d, 64 * sizeof(float));
    cudaMemsetAsync(d, 0, 64 * sizeof(float));
    cublasLtHandle_t lt;
    cublasLtCreate(&lt);
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    cublasLtMatrixLayout_t l;
    cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 4, 4, 4);
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t st[2];
    for (int shift = 0; shift < 2; shift++) {
        const float* bias = d + 48 + shift;
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
        st[shift] = cublasLtMatmul(lt, op, &alpha, d, l, d + 16, l, &beta, d + 32, l, d + 32, l, nullptr, nullptr, 0, nullptr);
    }
    check(st[0] == CUBLAS_STATUS_SUCCESS && st[1] == CUBLAS_STATUS_NOT_SUPPORTED,
          "the bias epilogue runs with a bias on a 16-byte boundary (%s) and is refused 4 bytes off it (%s)",
          cublasLtGetStatusString(st[0]), cublasLtGetStatusString(st[1]));
    cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(lt);
    cudaFree(d);
}

// A strided batch of 3 products (m, n, k) = (4, 3, 5), A transposed, each operand's next matrix
// a stride on (padding between them): each of its results equals the plain product of that
// matrix, the bytes between them untouched; operands with different batch counts are refused.
static void strided_batch() {
    const int m = 4, n = 3, k = 5, count = 3, sa = k * m + 3, sb = k * n + 1, sc = m * n + 2;
    std::vector<float> A((size_t)sa * count), B((size_t)sb * count), C((size_t)sc * count, -7.0f);
    for (size_t i = 0; i < A.size(); i++) A[i] = (float)((i * 13) % 11) / 4 - 1;
    for (size_t i = 0; i < B.size(); i++) B[i] = (float)((i * 7) % 9) / 4 - 1;
    float *dA, *dB, *dC, *dP;
    cudaMalloc((void**)&dA, A.size() * 4);
    cudaMalloc((void**)&dB, B.size() * 4);
    cudaMalloc((void**)&dC, C.size() * 4);
    cudaMalloc((void**)&dP, (size_t)m * n * 4);
    cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dC, C.data(), C.size() * 4, cudaMemcpyHostToDevice);
    cublasLtHandle_t lt;
    cublasLtCreate(&lt);
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t t = CUBLAS_OP_T;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    cublasLtMatrixLayout_t la, lb, lc, one_a, one_b, one_c;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, k);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m);
    cublasLtMatrixLayoutCreate(&one_a, CUDA_R_32F, k, m, k);
    cublasLtMatrixLayoutCreate(&one_b, CUDA_R_32F, k, n, k);
    cublasLtMatrixLayoutCreate(&one_c, CUDA_R_32F, m, n, m);
    const int32_t c32 = count;
    const int64_t strides[3] = {sa, sb, sc};
    cublasLtMatrixLayout_t batched[3] = {la, lb, lc};
    for (int i = 0; i < 3; i++) {
        cublasLtMatrixLayoutSetAttribute(batched[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &c32, sizeof c32);
        cublasLtMatrixLayoutSetAttribute(batched[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                         sizeof strides[i]);
    }
    const float alpha = 1.0f, beta = 0.0f;
    const cublasStatus_t st = cublasLtMatmul(lt, op, &alpha, dA, la, dB, lb, &beta, dC, lc, dC, lc, nullptr, nullptr, 0, nullptr);
    const cublasStatus_t refused = cublasLtMatmul(lt, op, &alpha, dA, la, dB, one_b, &beta, dC, lc, dC, lc, nullptr, nullptr, 0, nullptr);
    std::vector<float> got(C.size()), plain((size_t)m * n);
    cudaMemcpy(got.data(), dC, got.size() * 4, cudaMemcpyDeviceToHost);
    int wrong = 0, touched = 0;
    for (int z = 0; z < count; z++) {
        cublasLtMatmul(lt, op, &alpha, dA + z * sa, one_a, dB + z * sb, one_b, &beta, dP, one_c, dP, one_c, nullptr,
                       nullptr, 0, nullptr);
        cudaMemcpy(plain.data(), dP, plain.size() * 4, cudaMemcpyDeviceToHost);
        for (int i = 0; i < m * n; i++) wrong += got[(size_t)z * sc + i] != plain[(size_t)i];
        for (int i = m * n; i < sc; i++) touched += got[(size_t)z * sc + i] != -7.0f;
    }
    check(st == CUBLAS_STATUS_SUCCESS && wrong == 0 && touched == 0 && refused == CUBLAS_STATUS_INVALID_VALUE,
          "cuBLASLt strided batch of %d: %d of %d results differ from the plain products, %d padding values "
          "written; B of another batch count refused (%s)", count, wrong, count * m * n, touched,
          cublasLtGetStatusString(refused));
    for (cublasLtMatrixLayout_t l : {la, lb, lc, one_a, one_b, one_c}) cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(lt);
    for (float* p : {dA, dB, dC, dP}) cudaFree(p);
}

// Events hold the time they were recorded: elapsed time from one to a later one is >= 0, and
// an event never recorded is refused.
// WMMA (include/mma.h) against a plain loop, B in each layout: the bf16 products are exact in
// fp32 and the emulator sums in k order, so the loop in the same order agrees bit for bit.
static void wmma_products() {
    std::vector<__nv_bfloat16> A(32 * 32), B(32 * 32);
    for (int e = 0; e < 32 * 32; e++) {
        A[e] = __float2bfloat16((float)((e * 37) % 19 - 9) / 8.0f);
        B[e] = __float2bfloat16((float)((e * 11) % 23 - 11) / 16.0f);
    }
    void *dA, *dB, *dC;
    cudaMalloc(&dA, A.size() * 2);
    cudaMalloc(&dB, B.size() * 2);
    cudaMalloc(&dC, 32 * 32 * sizeof(float));
    cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice);
    for (bool b_col : {true, false}) {
        wmma_product_kernel<<<1, 128>>>((float*)dC, (const __nv_bfloat16*)dA, (const __nv_bfloat16*)dB, b_col, 0);
        std::vector<float> C(32 * 32);
        cudaMemcpy(C.data(), dC, C.size() * sizeof(float), cudaMemcpyDeviceToHost);
        int wrong = 0;
        for (int i = 0; i < 32; i++)
            for (int j = 0; j < 32; j++) {
                float want = 0.0f;   // B column-major: B[j][k] is B^T's (k, j)
                for (int k = 0; k < 32; k++)
                    want += __bfloat162float(A[i * 32 + k]) * __bfloat162float(b_col ? B[j * 32 + k] : B[k * 32 + j]);
                wrong += C[i * 32 + j] != want;
            }
        check(wrong == 0, "wmma: (32, 32) = (32, 32) (32, 32) in bf16, B %s-major, 4 warps: %d of 1024 differ from a loop",
              b_col ? "column" : "row", wrong);
    }
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
}

// CUDA_EMULATOR_ORDER (forward or reverse; make test runs this test both ways) decides which
// warp and which lane runs first; a kernel missing a barrier shows it, which is how the GPU
// tests run in reverse find one.
static void run_order() {
    const char* env = std::getenv("CUDA_EMULATOR_ORDER");
    const bool reverse = env && std::string(env) == "reverse";
    int* d = device_ints(std::vector<int>(128, 0));
    missing_barrier_kernel<<<1, 64, 64 * sizeof(int)>>>(d, d + 64);
    const std::vector<int> got = download_ints(d, 128);
    int wrong = 0;
    for (int t = 0; t < 64; t++) {
        const bool first_warp = t < 32, even_lane = t % 2 == 0;   // which ran first: forward order
        const int warp_want = first_warp != reverse ? -1 : (t + 32) % 64;
        const int lane_want = even_lane != reverse ? -1 : t ^ 1;
        wrong += (got[t] != warp_want) + (got[64 + t] != lane_want);
    }
    check(wrong == 0, "CUDA_EMULATOR_ORDER=%s: a kernel missing its barriers reads what only the %s warp and lane wrote (%d of 128 reads otherwise)",
          reverse ? "reverse" : "forward (default)", reverse ? "last" : "first", wrong);
    cudaFree(d);
}

static void events() {
    cudaEvent_t a, b, never;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventCreate(&never);
    cudaEventRecord(a);
    nothing_kernel<<<64, 256>>>();
    cudaEventRecord(b);
    float ms = -1, unused = 0;
    const cudaError_t ok = cudaEventElapsedTime(&ms, a, b);
    const cudaError_t refused = cudaEventElapsedTime(&unused, a, never);
    check(ok == cudaSuccess && ms >= 0 && refused == cudaErrorInvalidResourceHandle,
          "events: %.3f ms between two records around a launch; an event never recorded refused (%s)", ms,
          cudaGetErrorString(refused));
    for (cudaEvent_t e : {a, b, never}) cudaEventDestroy(e);
}

static void radix_sort() {
    const std::vector<int> keys = {5, 3, 5, 0, 3, 9, 5, 1}, vals = {0, 1, 2, 3, 4, 5, 6, 7};
    int *k = device_ints(keys), *v = device_ints(vals), *ko = device_ints(keys), *vo = device_ints(vals);
    size_t bytes = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, ko, v, vo, 8);
    void* temp = nullptr;
    cudaMalloc(&temp, bytes);
    const cudaError_t e = cub::DeviceRadixSort::SortPairs(temp, bytes, k, ko, v, vo, 8);
    const std::vector<int> sk = download_ints(ko, 8), sv = download_ints(vo, 8);
    check(e == cudaSuccess && sk == std::vector<int>({0, 1, 3, 3, 5, 5, 5, 9}) && sv == std::vector<int>({3, 7, 1, 4, 0, 2, 6, 5}),
          "CUB SortPairs: keys sorted, equal keys keep their order (stable)");
    for (void* p : {(void*)k, (void*)v, (void*)ko, (void*)vo, temp}) cudaFree(p);
}

// The child runs `fault`; the emulator must stop it (abort) with a message containing `says`.
static void must_stop(const char* what, void (*fault)(), const char* says) {
    char path[] = "/tmp/test_emulator.XXXXXX";
    const int fd = mkstemp(path);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 2);
        fault();
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    std::string text;
    char buf[4096];
    lseek(fd, 0, SEEK_SET);
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) text.append(buf, (size_t)n);
    close(fd);
    unlink(path);
    const bool stopped = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
    const size_t at = text.find(says);   // the line that says it (else the first)
    const size_t begin = at == std::string::npos ? 0 : text.rfind('\n', at) + 1;   // npos + 1 == 0
    const std::string line = text.substr(begin, text.find('\n', begin) - begin);
    check(stopped && at != std::string::npos, "%s: stopped (%s)", what, line.c_str());
}

int main() {
    setvbuf(stdout, nullptr, _IOLBF, 0);   // PASS lines and the emulator's messages in order
    reductions();
    indices_and_shared_memory();
    launch_limits_and_runtime();
    bf16_conversions();
    for (cudaDataType t : {CUDA_R_32F, CUDA_R_16BF})
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) matmul(ta, tb, t, (ta + tb) % 2 == 1, ta ? 0.5f : 0.0f);
    for (cudaDataType t : {CUDA_R_32F, CUDA_R_16BF}) {   // the ReLU epilogues, with and without the bias
        matmul(true, false, t, true, 0.0f, true);
        matmul(false, true, t, false, 0.5f, true);
    }
    bias_alignment();
    algorithm_checks();
    strided_batch();
    events();
    radix_sort();
    wmma_products();
    run_order();
    must_stop("lanes of a warp at __syncwarp and __syncthreads", [] { deadlock_kernel<<<1, 64>>>(); },
              "deadlock");
    must_stop("a shuffle reading a lane that returned", [] {
        void* d = nullptr;
        cudaMalloc(&d, 32 * sizeof(int));
        early_return_shuffle_kernel<<<1, 32>>>((int*)d);
    }, "shuffle reads thread 3");
    must_stop("a WMMA load from a pointer not 256-bit aligned", [] {
        void* d = nullptr;
        cudaMalloc(&d, 32 * 32 * 4);
        wmma_product_kernel<<<1, 128>>>((float*)d, (const __nv_bfloat16*)d, (const __nv_bfloat16*)d, true, 1);
    }, "not 256-bit aligned");
    must_stop("a WMMA load whose lanes pass different pointers", [] { wmma_lanes_disagree_kernel<<<1, 32>>>(); },
              "lanes pass different pointers");
    must_stop("threadIdx read outside a kernel", [] { std::printf("%u\n", threadIdx.x); }, "outside a kernel");
#ifdef __SANITIZE_ADDRESS__
    must_stop("a kernel writing past its cudaMalloc allocation (AddressSanitizer)", [] {
        void* d = nullptr;
        cudaMalloc(&d, 100 * sizeof(int));
        write_past_kernel<<<1, 32>>>((int*)d, 100);
    }, "heap-buffer-overflow");
#else
    check_skip("a kernel writing past its allocation: AddressSanitizer sees it in a SANITIZE=1 build (make test-asan)");
#endif
    return check_summary("emulator");
}
