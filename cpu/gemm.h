// gemm.h — the project's own single-precision matrix product (SGEMM), row-major.
//
// Every linear layer, the attention products and their backward passes go through sgemm().
// The implementation (gemm.cpp) is a cache-blocked, AVX-512 or AVX2, OpenMP-parallel GEMM in
// the GotoBLAS/BLIS style; its header comment explains the design. Build options:
//   default        our own kernels (AVX-512 when __AVX512F__ is defined, else AVX2 + FMA when
//                  __AVX2__ and __FMA__ are, portable C++ otherwise)
//   -DUSE_OPENBLAS sgemm forwards to cblas_sgemm (link with -lopenblas)
//   without -fopenmp the product runs serially.
#pragma once
#include <vector>

#include "cpu/kernel_common.h"

// C[M,N] = alpha * op(A) * op(B) + beta * C   (row-major; lda/ldb/ldc in elements)
// op(A) is [M,K]: A is [M,K] (lda >= K) or, with trans_a, A is [K,M] (lda >= M).
// op(B) is [K,N]: B is [K,N] (ldb >= N) or, with trans_b, B is [N,K] (ldb >= K).
// beta == 0 overwrites C (NaN/Inf already in C are ignored). K == 0 gives C = beta * C.
// Called outside an OpenMP parallel region it uses all OpenMP threads; called inside one
// (e.g. attention, parallel over batch x head) it runs single-threaded on the calling thread.
// Deterministic: the same inputs and thread count give bitwise the same C.
//
// The epilogue of the linear layers' forward, applied as C is stored (no pass of its own over C,
// as cuBLASLt's BIAS / RELU_BIAS epilogues on the GPU and the int8 kernels' on the CPU):
//   bias (N; nullptr: none): added to every row of C in place of beta * C, so beta must be 0
//                            (C's old values are not read);
//   relu: C = max(C, 0) once the sum is complete (NaN becomes 0, as x > 0 ? x : 0 would give).
// C = relu(alpha * op(A) op(B) + bias) is then bitwise the product with beta = 1 over C filled
// with the bias, followed by a ReLU pass.
struct GemmEpilogue {
    const float* bias = nullptr;
    bool relu = false;
};

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
           const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc,
           GemmEpilogue epilogue = {});

// op(B) packed once, for products that read the same B many times (decoding's weights: every
// step's product packed them again, 16% of an fp32 decoding run): the layout sgemm packs B into
// for its blocked products, all of it. sgemm_packed gives sgemm's C bit for bit; few rows
// (M <= 16) read the copy's slivers in place, but its other small products (M*N*K <= 2^20) read
// B itself, so B must stay, unchanged, while the copy is used.
struct SgemmPackedB {
    bool trans_b = false;
    int N = 0, K = 0, ldb = 0;
    const float* B = nullptr;
    std::vector<float, Aligned64<float>> panels;   // (depth blocks, slivers of N, depth, sliver width)
};
SgemmPackedB sgemm_pack_b(bool trans_b, int N, int K, const float* B, int ldb);
void sgemm_packed(bool trans_a, int M, float alpha, const float* A, int lda, const SgemmPackedB& b,
                  float beta, float* C, int ldc, GemmEpilogue epilogue = {});

// The epilogue alone, over an M x N block of C (row stride ldc) that holds alpha * op(A) op(B):
// C += bias, then the ReLU. For products that cannot apply it as they store (OpenBLAS's).
void apply_epilogue(int M, int N, float* C, int ldc, const GemmEpilogue& epilogue);

// Stops the program with a message when a bias comes with beta != 0 (a caller's error).
void check_epilogue(float beta, const GemmEpilogue& epilogue, const char* caller);
