// Thin wrappers over OpenBLAS (cblas_sgemm / cblas_dgemm) for row-major GEMM, plus float16/bfloat16
// staging helpers. OpenBLAS runs its own thread pool, so large GEMMs use every core.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace kiln::cpu {

// Row-major C[M,N] = alpha * op(A) * op(B) + beta * C, op(A) is [M,K] (A is [K,M] when ta), op(B) is [K,N].
void GemmF32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void GemmF64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
             const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// Every element of a float16/bfloat16/float32 tensor as float.
std::vector<float> ToFloatBuffer(const Tensor& t);
// Writes `src` (numel floats) into a float16/bfloat16/float32 tensor, rounding to nearest even.
void FromFloatBuffer(const float* src, Tensor& t);
// Makes `t` a tensor of this dtype and shape (reallocating only when it is not already one).
void EnsureOutput(Tensor& t, DataType dtype, const std::vector<int64_t>& shape);

}  // namespace kiln::cpu
