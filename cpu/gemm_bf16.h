// gemm_bf16.h — the matrix product of --precision bf16 on the CPU: bf16 inputs, fp32 sums.
//
// sgemm_bf16 takes sgemm()'s arguments (gemm.h) and computes
//     C[M,N] = alpha * bf16(op(A)) * bf16(op(B)) + beta * C
// where bf16(x) rounds each element to bfloat16 (8 bits of mantissa, round to nearest even), the
// products and their sums stay fp32 (a product of two bf16 values is exact in fp32), and C is
// fp32. It is the mixed precision that PyTorch's CPU autocast and the GPU backend's bf16 use for
// their matrix products; everything else in the model stays fp32 on the CPU.
//
// The paths, the first the CPU and the build have taken (gemm_bf16.cpp says how each works):
//   "amx"         Intel AMX (AMX-BF16; Sapphire Rapids and later, Linux 5.16+): tdpbf16ps tiles,
//                 16 x 32 by 32 x 16 products, 8,192 multiply-adds an instruction
//   "avx512bf16"  AVX512-BF16 without AMX (AMD Zen 4 and later, Intel Cooper Lake): vdpbf16ps,
//                 32 multiply-adds an instruction, twice a 512-bit fp32 FMA's (on AMD Zen 5 at
//                 the FMA's rate; on an AMX Xeon at half of it, so not chosen there by itself)
//   "sgemm"       elsewhere: the operands rounded to bf16 into fp32 buffers, then sgemm(): the
//                 same values multiplied at fp32 speed (no faster than --precision fp32)
// Each sums in its own order, so their results differ in the last bits. AMX and vdpbf16ps treat
// bf16 subnormal inputs as zero and flush subnormal sums to zero (Intel's definition; an AMD Zen 5
// does the same, and adds a pair's two products to the sum one after the other, each rounded, as
// Intel's definition says); sgemm keeps subnormals. Deterministic: bitwise the same
// C for any thread count (sgemm's path as far as sgemm is: ours is, BLAS=openblas's
// cblas_sgemm does not promise it).
#pragma once
#include "cpu/gemm.h"

#include <cstdint>
#include <string>
#include <vector>

// The epilogue (gemm.h's: the linear layers' bias and ReLU) is applied as C is stored, as sgemm's.
void sgemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                int lda, const float* B, int ldb, float beta, float* C, int ldc,
                GemmEpilogue epilogue = {});

// op(B) rounded to bf16 and packed once, for products that read the same B many times (bf16
// decoding's weights: every step's products packed them again, 10% of a bf16 decoding run). It
// is packed for the path current when sgemm_bf16_pack_b runs (AMX and vdpbf16ps share one
// layout of tiles: every depth block's slivers of all N columns; the sgemm path keeps op(B)
// rounded to bf16 in fp32 and sgemm_pack_b's copy of it), and sgemm_bf16_packed takes that
// path: its C is sgemm_bf16's bit for bit on that path. Owns everything it reads (B itself may
// go); moved, never copied (the sgemm copy points into `rounded`).
struct Bf16PackedB {
    int N = 0, K = 0;
    std::string kernel;                                  // the path it was packed for
    std::vector<uint16_t, Aligned64<uint16_t>> tiles;    // "amx", "avx512bf16": (depth blocks, slivers, steps, tile)
    std::vector<float> rounded;                          // "sgemm": B rounded to bf16 (as B, dense)
    SgemmPackedB sgemm;                                  // "sgemm": `rounded` packed
    Bf16PackedB() = default;
    Bf16PackedB(Bf16PackedB&&) = default;
    Bf16PackedB& operator=(Bf16PackedB&&) = default;
    Bf16PackedB(const Bf16PackedB&) = delete;
    Bf16PackedB& operator=(const Bf16PackedB&) = delete;
};
Bf16PackedB sgemm_bf16_pack_b(bool trans_b, int N, int K, const float* B, int ldb);
void sgemm_bf16_packed(bool trans_a, int M, float alpha, const float* A, int lda, const Bf16PackedB& b,
                       float beta, float* C, int ldc, GemmEpilogue epilogue = {});

// The path sgemm_bf16 takes: "amx", "avx512bf16" or "sgemm". Unless bf16_use_kernel chose one,
// TRANSFORMER_BF16_KERNEL's (one of the three; not one this build and CPU have stops the
// program with a message), else the first this build and CPU have (AMX not with
// TRANSFORMER_AMX=0, cpu/amx.h; "avx512bf16" not on a CPU that lists AMX-BF16, whose vdpbf16ps
// is slower than its FMAs).
const char* bf16_kernel();
// Why sgemm_bf16 takes its path, in a few words for the programs' notes: the variable that chose
// it, or what this build or CPU has or lacks (e.g. "this CPU has neither AMX-BF16 nor
// AVX512-BF16", "TRANSFORMER_AMX=0"; on a CPU listing AMX-BF16 vdpbf16ps is never chosen by
// itself, so without AMX such a CPU takes sgemm).
std::string bf16_kernel_reason();
// Whether this build has path `name`: "avx512bf16" needs an AVX-512 build (x86-64, GCC 10 / clang
// 9 or later), "amx" that and GCC 11 / clang 12 on Linux; "sgemm" is always built.
bool bf16_kernel_built(const std::string& name);
// Whether this build and CPU have path `name` (the CPU's AVX512-BF16 or AMX-BF16 flags).
bool bf16_kernel_available(const std::string& name);
// Take path `name` from now on (tests and benchmarks compare them), or, with "", the first
// available as above. false, and nothing changed, when the path is not available.
bool bf16_use_kernel(const std::string& name);

// x rounded to the nearest bfloat16 (ties to even), returned as a float; NaN stays NaN.
float round_bf16(float x);
