// OpenBLAS GEMM wrappers (see gemm_blas.h).
#include "backends/cpu/gemm_blas.h"

#include <cblas.h>

#include <algorithm>

#include "backends/cpu/common.h"

namespace kiln::cpu {

namespace {

template <typename T>
void ScaleOnly(int64_t m, int64_t n, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
}

// Row-major GEMM through `blas` (cblas_sgemm or cblas_dgemm); m or n <= 0 is a no-op, k <= 0 scales C by beta.
template <typename T, typename Blas>
void BlasGemm(Blas blas, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
              const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return ScaleOnly(m, n, beta, c, ldc);
  blas(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
       static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(std::max<int64_t>(1, lda)), b,
       static_cast<int>(std::max<int64_t>(1, ldb)), beta, c, static_cast<int>(std::max<int64_t>(1, ldc)));
}

}  // namespace

void GemmF32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  BlasGemm(cblas_sgemm, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void GemmF64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
             const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  BlasGemm(cblas_dgemm, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

std::vector<float> ToFloatBuffer(const Tensor& t) {
  const int64_t n = t.numel();
  std::vector<float> r(static_cast<size_t>(n));
  if (t.dtype() == DataType::kFloat32) {
    std::copy(t.data<float>(), t.data<float>() + n, r.begin());
  } else if (t.dtype() == DataType::kFloat16) {
    for (int64_t i = 0; i < n; ++i) r[i] = Load(t.data<Half>(), i);
  } else if (t.dtype() == DataType::kBFloat16) {
    for (int64_t i = 0; i < n; ++i) r[i] = Load(t.data<BFloat16>(), i);
  } else {
    for (int64_t i = 0; i < n; ++i) r[i] = static_cast<float>(t.GetAsDouble(i));
  }
  return r;
}

void FromFloatBuffer(const float* src, Tensor& t) {
  const int64_t n = t.numel();
  if (t.dtype() == DataType::kFloat32) {
    std::copy(src, src + n, t.data<float>());
  } else if (t.dtype() == DataType::kFloat16) {
    for (int64_t i = 0; i < n; ++i) Store(t.data<Half>(), i, src[i]);
  } else if (t.dtype() == DataType::kBFloat16) {
    for (int64_t i = 0; i < n; ++i) Store(t.data<BFloat16>(), i, src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) t.SetFromDouble(i, src[i]);
  }
}

void EnsureOutput(Tensor& t, DataType dtype, const std::vector<int64_t>& shape) {
  if (!t.defined() || t.dtype() != dtype || t.shape() != shape) t = Tensor(dtype, shape);
}

}  // namespace kiln::cpu
