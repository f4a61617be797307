// test/cuda_emulator/emulator.h — the CUDA emulator: enough of the CUDA runtime, the device
// built-ins, bf16, cuBLASLt and CUB for g++ to compile transformer.cu as ordinary C++ and run
// its kernels on the CPU. It is a test tool for machines without a GPU (this one, CI): it runs
// every kernel's indexing, warp and block logic and the host code around it, so that the GPU
// tests (test_ops --device cuda, test_cuda) can run here. It is not a GPU: it says nothing of
// timing, of the memory model, of races between blocks or of the real cuBLASLt's choices.
//
// How a launch runs (emulator.cpp): the blocks of the grid are shared out among a few CPU
// threads; each runs its blocks one at a time, and a block's CUDA threads as fibers (a
// stack each), warp by warp in thread order, each until it ends or reaches a barrier. __syncthreads waits for
// every thread of the block, __syncwarp and the shuffles for the 32 lanes of a warp
// (CUDA_EMULATOR_ORDER=reverse: blocks, warps and lanes last first, emulator.cpp). A barrier
// that can never be passed (threads of one warp at different barriers, a full-mask shuffle in
// a warp with a lane that has returned) stops the program with the kernel's name: on a GPU it
// would hang or be undefined.
//
// The launch limits are checked (block size, grid y and z, 48 KB of dynamic shared memory);
// __shared__ arrays are per-CPU-thread statics, dynamic shared memory a heap buffer of the
// launch's size, so that AddressSanitizer (make test-emulated builds the emulated library with
// it) sees a kernel that reads past either or past a cudaMalloc. CUDA_EMULATOR_LAUNCHES=1
// prints at the program's end how many kernels it launched and how many cuBLASLt products it
// asked for (what compute-sanitizer's racecheck costs on a GPU grows with the launches).
//
// transformer.cu is compiled through build/emu/transformer_emu.cpp, a copy in which each
// `kernel<<<grid, block, smem>>>(args...)` and `extern __shared__ T name[]` is rewritten to the
// calls below (the Makefile's sed; the build fails if anything is left unrewritten). The
// headers include/cuda_runtime.h, cuda_bf16.h, cublasLt.h and cub/cub.cuh stand in for the
// CUDA Toolkit's and only include this file; include/mma.h (WMMA) adds its fragments.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

// ---------------------------------------------------------------------------------------------
// Qualifiers and built-in variables
// ---------------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static thread_local

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace cuda_emulator {
// What a CUDA thread knows of itself. Each fiber's stack is aligned to its size and starts with
// a pointer to its Place, so that threadIdx costs a mask of the stack pointer, not a lookup.
struct Place {
    uint3 thread_index;
    int linear;                   // the thread's index in its block, x fastest
    const uint3* block_index;
    const dim3* block_dim;
    const dim3* grid_dim;
    uint64_t* exchange;           // the block's shuffle slots: two sets of 1024, used in turn,
    unsigned* exchange_number;    // and which shuffle of its thread wrote each (0: none yet)
    int block_threads;
    unsigned shuffles;            // this thread's shuffles so far
};
constexpr size_t STACK_BYTES = 128 << 10;
constexpr uint64_t STACK_MAGIC = 0x6375646146696265ull;
struct StackBase {
    uint64_t magic;
    Place* place;
    size_t top_offset;   // the stack's first byte below its end (emulator.cpp: cache sets)
};
[[noreturn]] void not_in_kernel();
inline Place& here() {
    uintptr_t sp;
    asm("movq %%rsp, %0" : "=r"(sp));
    const StackBase* base = (const StackBase*)(sp & ~(uintptr_t)(STACK_BYTES - 1));
    if (base->magic != STACK_MAGIC) not_in_kernel();
    return *base->place;
}
void syncthreads();
void syncwarp();
void* dynamic_shared();                       // this block's extern __shared__ buffer
[[noreturn]] void partial_mask();              // a warp op's mask is not 0xffffffff
[[noreturn]] void lane_not_running(int linear); // a shuffle's source lane is not at the same shuffle
[[noreturn]] void wmma_misuse(const char* op, const char* why);   // include/mma.h's checks
}  // namespace cuda_emulator

#define threadIdx (::cuda_emulator::here().thread_index)
#define blockIdx (*::cuda_emulator::here().block_index)
#define blockDim (*::cuda_emulator::here().block_dim)
#define gridDim (*::cuda_emulator::here().grid_dim)
#define __syncthreads() ::cuda_emulator::syncthreads()
#define __syncwarp(...) ::cuda_emulator::syncwarp()

// v from lane (this lane ^ lane_mask) of the warp; all 32 lanes take part (the full mask is
// the only one transformer.cu uses). The source lane must be at the same shuffle, counted from
// the kernel's start: one that has returned, or does not exist, stops the emulator. One warp
// barrier a shuffle: the slots alternate between two sets, so a lane that has gone on to the
// next shuffle cannot overwrite a value another lane has still to read.
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
    static_assert(sizeof(T) <= 8, "the emulator exchanges values of at most 8 bytes");
    if (mask != 0xffffffffu) ::cuda_emulator::partial_mask();
    ::cuda_emulator::Place& p = ::cuda_emulator::here();
    const unsigned number = ++p.shuffles, set = 1024 * (number & 1u);
    const int partner = (p.linear & ~31) | ((p.linear & 31) ^ (lane_mask & 31));
    std::memcpy(p.exchange + set + p.linear, &v, sizeof(T));
    p.exchange_number[set + p.linear] = number;
    ::cuda_emulator::syncwarp();
    if (partner >= p.block_threads || p.exchange_number[set + partner] != number)
        ::cuda_emulator::lane_not_running(partner);
    T r;
    std::memcpy(&r, p.exchange + set + partner, sizeof(T));
    return r;
}

// Bit k set where lane k of the warp passes a true predicate; all 32 lanes take part, each
// shuffle a barrier as above.
inline unsigned __ballot_sync(unsigned mask, int predicate) {
    unsigned v = predicate ? 1u << (::cuda_emulator::here().linear & 31) : 0u;
    for (int o = 16; o > 0; o >>= 1) v |= __shfl_xor_sync(mask, v, o);
    return v;
}

// ---------------------------------------------------------------------------------------------
// Device math
// ---------------------------------------------------------------------------------------------
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }   // one rounding
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
template <class T> T __ldg(const T* p) { return *p; }
inline int __ffs(int x) { return x ? __builtin_ctz((unsigned)x) + 1 : 0; }   // lowest set bit, from 1

// ---------------------------------------------------------------------------------------------
// bf16 (cuda_bf16.h): round to nearest even, NaN kept a NaN
// ---------------------------------------------------------------------------------------------
struct __nv_bfloat16 {
    unsigned short x;
};
inline float __bfloat162float(__nv_bfloat16 b) { return __uint_as_float((unsigned)b.x << 16); }
inline __nv_bfloat16 __float2bfloat16(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{(unsigned short)((u >> 16) | 0x40)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return __nv_bfloat16{(unsigned short)(u >> 16)};
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }

// ---------------------------------------------------------------------------------------------
// The runtime (cuda_runtime.h), the part transformer.cu calls
// ---------------------------------------------------------------------------------------------
enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorLaunchFailure = 719,
};
typedef cudaError_t cudaError;
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};
typedef struct cuda_emulator_stream* cudaStream_t;
enum cudaDataType { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_32I = 10, CUDA_R_16BF = 14 };
typedef cudaDataType cudaDataType_t;

struct cudaDeviceProp {
    char name[256];
    int major, minor, multiProcessorCount, maxThreadsPerBlock, warpSize;
    size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerBlockOptin;
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaMalloc(void** p, size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaMallocHost(void** p, size_t bytes);   // page-locked on a GPU; ordinary memory here
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                              size_t height, cudaMemcpyKind kind, cudaStream_t stream = nullptr);
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaGetLastError();
cudaError_t cudaFuncSetAttribute_erased(const void* kernel, cudaFuncAttribute attr, int value);
template <class F>
cudaError_t cudaFuncSetAttribute(F* kernel, cudaFuncAttribute attr, int value) {
    return cudaFuncSetAttribute_erased((const void*)kernel, attr, value);
}
// The occupancy calculator: 1 block an SM here (an emulated SM, a CPU thread, runs one block at a
// time), 0 where the block would not launch (its size, or shared memory past the kernel's limit).
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor_erased(int* blocks, const void* kernel, int threads,
                                                                 size_t smem);
template <class F>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, F* kernel, int threads, size_t smem) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor_erased(blocks, (const void*)kernel, threads, smem);
}
const char* cudaGetErrorString(cudaError_t e);
// Events: a launch here runs to its end before it returns, so an event holds the time it was
// recorded; the elapsed time between two needs both recorded (as on a GPU).
typedef struct cuda_emulator_event* cudaEvent_t;
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventSynchronize(cudaEvent_t event);   // here every copy and launch has ended already
cudaError_t cudaEventDestroy(cudaEvent_t event);

namespace cuda_emulator {
// Runs `body(payload)` as every thread of every block of the grid; cudaGetLastError reports a
// launch that breaks the limits.
void launch_erased(const void* kernel, void (*body)(void*), void* payload, dim3 grid, dim3 block,
                   size_t dynamic_shared_bytes);

// kernel<<<grid, block, smem, stream>>>(args...), which the Makefile's sed rewrites to
// launch(kernel, Config{grid, block, smem, stream}, args...): the arguments converted to the
// kernel's parameter types once, as a launch copies them, and each CUDA thread calls the kernel
// with them.
struct Config {
    dim3 grid, block;
    size_t shared_bytes = 0;
    cudaStream_t stream = nullptr;
};
template <class... KArgs, class... Args>
void launch(void (*kernel)(KArgs...), Config config, Args... args) {
    struct Payload {
        void (*kernel)(KArgs...);
        std::tuple<KArgs...> args;
    } payload{kernel, std::tuple<KArgs...>(args...)};
    launch_erased((const void*)kernel, [](void* p) {
        Payload* pl = (Payload*)p;
        std::apply(pl->kernel, pl->args);
    }, &payload, config.grid, config.block, config.shared_bytes);
}
}  // namespace cuda_emulator

// ---------------------------------------------------------------------------------------------
// cuBLASLt (cublasLt.h): one column-major product D = alpha op(A) op(B) + beta C (+ bias), in
// fp32 arithmetic over fp32 or bf16 matrices, or a strided batch of them; the layouts are
// checked against the operation.
// ---------------------------------------------------------------------------------------------
enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
enum cublasLtMatmulDescAttributes_t {
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,
};
enum cublasLtEpilogue_t {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_RELU = 2,
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_RELU_BIAS = 6,   // RELU | BIAS, as in cublasLt.h
};
enum cublasLtMatrixLayoutAttribute_t {
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,            // int32_t
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,   // int64_t, in elements
};
enum cublasLtMatmulPreferenceAttributes_t {
    CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};
enum cublasLtReductionScheme_t {
    CUBLASLT_REDUCTION_SCHEME_NONE = 0,
    CUBLASLT_REDUCTION_SCHEME_INPLACE = 1,
    CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2,
    CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE = 4,
    CUBLASLT_REDUCTION_SCHEME_MASK = 7,
};
typedef struct cuda_emulator_lt* cublasLtHandle_t;
typedef struct cuda_emulator_matmul_desc* cublasLtMatmulDesc_t;
typedef struct cuda_emulator_layout* cublasLtMatrixLayout_t;
typedef struct cuda_emulator_preference* cublasLtMatmulPreference_t;
struct cublasLtMatmulAlgo_t { uint64_t data[8]; };
struct cublasLtMatmulHeuristicResult_t {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);
const char* cublasLtGetStatusString(cublasStatus_t status);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale_type);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* value, size_t bytes);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* value, size_t bytes);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* found);
cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                       cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                       const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result);
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b,
                              const void* beta, const void* C, cublasLtMatrixLayout_t c, void* D,
                              cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// CUB (cub/cub.cuh): the stable radix sort of (key, value) pairs by key
// ---------------------------------------------------------------------------------------------
namespace cub {
struct DeviceRadixSort {
    template <class K, class V>
    static cudaError_t SortPairs(void* temp, size_t& temp_bytes, const K* keys_in, K* keys_out,
                                 const V* values_in, V* values_out, int n, int begin_bit = 0,
                                 int end_bit = (int)(sizeof(K) * 8), cudaStream_t stream = nullptr) {
        (void)stream;
        if (begin_bit != 0 || end_bit != (int)(sizeof(K) * 8)) return cudaErrorInvalidValue;
        const size_t need = 256 + (size_t)n * (sizeof(K) + sizeof(V) + sizeof(int));
        if (!temp) {
            temp_bytes = need;
            return cudaSuccess;
        }
        if (temp_bytes < need || n < 0) return cudaErrorInvalidValue;
        std::vector<int> order((size_t)n);
        for (int i = 0; i < n; i++) order[(size_t)i] = i;
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys_in[a] < keys_in[b]; });
        std::vector<K> k((size_t)n);
        std::vector<V> v((size_t)n);
        for (int i = 0; i < n; i++) k[(size_t)i] = keys_in[order[(size_t)i]], v[(size_t)i] = values_in[order[(size_t)i]];
        std::copy(k.begin(), k.end(), keys_out);
        std::copy(v.begin(), v.end(), values_out);
        return cudaSuccess;
    }
};
}  // namespace cub
