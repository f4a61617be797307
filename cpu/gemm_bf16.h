// gemm_bf16.h — the matrix product of --precision bf16 on the CPU: bf16 inputs, fp32 sums.
//
// sgemm_bf16 takes sgemm()'s arguments (gemm.h) and computes
//     C[M,N] = alpha * bf16(op(A)) * bf16(op(B)) + beta * C
// where bf16(x) rounds each element to bfloat16 (8 bits of mantissa, round to nearest even), the
// products and their sums stay fp32 (a product of two bf16 values is exact in fp32), and C is
// fp32. It is the mixed precision that PyTorch's CPU autocast and the GPU backend's bf16 use for
// their matrix products; everything else in the model stays fp32 on the CPU.
//
//   with Intel AMX (AMX-BF16; Sapphire Rapids and later, Linux 5.16+)   tdpbf16ps tiles:
//       16 x 32 by 32 x 16 products, 8,192 multiply-adds an instruction (gemm_bf16.cpp)
//   elsewhere   the operands rounded to bf16 into fp32 buffers, then sgemm(): the same
//               values multiplied, summed in another order (so not bitwise AMX's), at fp32
//               speed (no faster than --precision fp32: bf16 pays only with AMX)
// AMX treats bf16 subnormal inputs as zero and flushes subnormal sums to zero; the other path
// keeps them. Deterministic: bitwise the same C for any thread count (the fallback as far as
// sgemm is: ours is, BLAS=openblas's cblas_sgemm does not promise it).
#pragma once
#include "cpu/gemm.h"

// The epilogue (gemm.h's: the linear layers' bias and ReLU) is applied as C is stored, as sgemm's.
void sgemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                int lda, const float* B, int ldb, float beta, float* C, int ldc,
                GemmEpilogue epilogue = {});

// The path sgemm_bf16 takes: "amx" or "sgemm" (bf16-rounded operands through sgemm).
const char* bf16_kernel();
// Whether this build has the AMX path (x86-64 Linux, AVX-512, GCC 11 / clang 12 or later).
bool bf16_amx_built();
// false: never AMX (tests compare both paths); true: AMX where the CPU has it (the default).
void bf16_allow_amx(bool allow);

// x rounded to the nearest bfloat16 (ties to even), returned as a float; NaN stays NaN.
float round_bf16(float x);
