// CPU kernels of the linear-algebra family: MatMul and Gemm. float32/float64 go through OpenBLAS
// (multi-threaded); float16/bfloat16 are staged through float32; integer types use a plain loop.
// Einsum lives in linalg_einsum.cpp.
#include <algorithm>

#include "backends/cpu/common.h"
#include "backends/cpu/families.h"
#include "backends/cpu/gemm_blas.h"

namespace kiln::cpu {

Status EinsumKernel(KernelContext& ctx);  // linalg_einsum.cpp

namespace {

// Batched-matmul geometry: every output batch's offsets (in matrices) into A and B.
struct MatMulPlan {
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> out_shape;
  std::vector<int64_t> a_batch, b_batch;  // per output batch: matrix index into A and B
  bool b_shared = false;                  // B is one matrix used by every batch (collapse A's batch into M)
};

Result<MatMulPlan> PlanMatMul(const Node& node, std::vector<int64_t> sa, std::vector<int64_t> sb) {
  MatMulPlan p;
  if (sa.empty() || sb.empty())
    return Err(StatusCode::kInvalidArgument, "{}: MatMul operands must have rank >= 1", node.Where());
  const bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa.insert(sa.begin(), 1);
  if (b1) sb.push_back(1);
  p.m = sa[sa.size() - 2];
  p.k = sa.back();
  p.n = sb.back();
  if (sb[sb.size() - 2] != p.k)
    return Err(StatusCode::kInvalidArgument, "{}: inner dimensions differ ({} vs {})", node.Where(), p.k,
               sb[sb.size() - 2]);
  const std::vector<int64_t> ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  KILN_ASSIGN_OR_RETURN(auto batch, BroadcastShape(node, ba, bb));
  p.out_shape = batch;
  if (!a1) p.out_shape.push_back(p.m);
  if (!b1) p.out_shape.push_back(p.n);
  const int64_t nb = NumElements(batch);
  p.b_shared = NumElements(bb) == 1;
  p.a_batch.resize(nb);
  p.b_batch.resize(nb);
  BroadcastIterator it(batch, {BroadcastStrides(ba, batch), BroadcastStrides(bb, batch)});
  for (int64_t i = 0; i < nb; ++i, it.Next()) {
    p.a_batch[i] = it.offset(0);
    p.b_batch[i] = it.offset(1);
  }
  // Collapsing A's batch into M needs A's batches laid out in output order.
  if (p.b_shared)
    for (int64_t i = 0; i < nb; ++i) p.b_shared &= p.a_batch[i] == i;
  return p;
}

template <typename T>
void MatMulFloat(const MatMulPlan& p, const T* a, const T* b, T* y) {
  const int64_t nb = static_cast<int64_t>(p.a_batch.size());
  auto gemm = [](int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c) {
    if constexpr (std::is_same_v<T, float>) GemmF32(false, false, m, n, k, 1.f, a, k, b, n, 0.f, c, n);
    else GemmF64(false, false, m, n, k, 1.0, a, k, b, n, 0.0, c, n);
  };
  if (p.b_shared) {
    gemm(nb * p.m, p.n, p.k, a, b, y);
    return;
  }
  for (int64_t i = 0; i < nb; ++i)
    gemm(p.m, p.n, p.k, a + p.a_batch[i] * p.m * p.k, b + p.b_batch[i] * p.k * p.n, y + i * p.m * p.n);
}

template <typename T>
void MatMulLoop(const MatMulPlan& p, const T* a, const T* b, T* y) {
  const int64_t nb = static_cast<int64_t>(p.a_batch.size());
  ParallelFor(nb * p.m, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t bi = r / p.m, i = r % p.m;
      const T* ar = a + p.a_batch[bi] * p.m * p.k + i * p.k;
      const T* bm = b + p.b_batch[bi] * p.k * p.n;
      T* yr = y + bi * p.m * p.n + i * p.n;
      for (int64_t j = 0; j < p.n; ++j) {
        T acc = 0;
        for (int64_t q = 0; q < p.k; ++q) acc += ar[q] * bm[q * p.n + j];
        yr[j] = acc;
      }
    }
  }, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, p.k * p.n)));
}

Status MatMulKernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  if (!ctx.input(0) || !ctx.input(1))
    return Err(StatusCode::kInvalidArgument, "{}: MatMul needs two inputs", node.Where());
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  if (a.dtype() != b.dtype())
    return Err(StatusCode::kInvalidArgument, "{}: operand types differ ({} vs {})", node.Where(),
               DataTypeName(a.dtype()), DataTypeName(b.dtype()));
  KILN_ASSIGN_OR_RETURN(MatMulPlan p, PlanMatMul(node, a.shape(), b.shape()));
  Tensor& y = ctx.out(0);
  EnsureOutput(y, a.dtype(), p.out_shape);
  switch (a.dtype()) {
    case DataType::kFloat32: MatMulFloat(p, a.data<float>(), b.data<float>(), y.data<float>()); break;
    case DataType::kFloat64: MatMulFloat(p, a.data<double>(), b.data<double>(), y.data<double>()); break;
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const auto fa = ToFloatBuffer(a), fb = ToFloatBuffer(b);
      std::vector<float> fy(static_cast<size_t>(y.numel()));
      MatMulFloat(p, fa.data(), fb.data(), fy.data());
      FromFloatBuffer(fy.data(), y);
      break;
    }
    case DataType::kInt32: MatMulLoop(p, a.data<int32_t>(), b.data<int32_t>(), y.data<int32_t>()); break;
    case DataType::kInt64: MatMulLoop(p, a.data<int64_t>(), b.data<int64_t>(), y.data<int64_t>()); break;
    case DataType::kUInt32: MatMulLoop(p, a.data<uint32_t>(), b.data<uint32_t>(), y.data<uint32_t>()); break;
    case DataType::kUInt64: MatMulLoop(p, a.data<uint64_t>(), b.data<uint64_t>(), y.data<uint64_t>()); break;
    default:
      return Err(StatusCode::kUnsupported, "{}: MatMul does not support element type {}", node.Where(),
                 DataTypeName(a.dtype()));
  }
  return Status::Ok();
}

// ---- Gemm ----

struct GemmDims {
  int64_t m, n, k;
  bool ta, tb;
};

// Writes beta * C broadcast to [M, N] into y (or zeros when C is absent / beta is 0); returns whether the
// GEMM must accumulate onto y.
template <typename T>
bool FillBias(const Tensor* c, double beta, const GemmDims& d, T* y) {
  if (!c || beta == 0.0 || c->numel() == 0) return false;
  const auto& cs = c->shape();
  const int64_t cr = cs.size() >= 2 ? cs[cs.size() - 2] : 1;
  const int64_t cc = cs.empty() ? 1 : cs.back();
  const T* cd = c->data<T>();
  for (int64_t i = 0; i < d.m; ++i)
    for (int64_t j = 0; j < d.n; ++j) {
      const T v = cd[(cr == 1 ? 0 : i) * cc + (cc == 1 ? 0 : j)];
      y[i * d.n + j] = static_cast<T>(beta * static_cast<double>(v));
    }
  return true;
}

template <typename T>
void GemmLoop(const GemmDims& d, double alpha, const T* a, const T* b, bool accumulate, T* y) {
  ParallelFor(d.m, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      for (int64_t j = 0; j < d.n; ++j) {
        T acc = 0;
        for (int64_t q = 0; q < d.k; ++q)
          acc += a[d.ta ? q * d.m + i : i * d.k + q] * b[d.tb ? j * d.k + q : q * d.n + j];
        const T v = static_cast<T>(alpha * static_cast<double>(acc));
        y[i * d.n + j] = accumulate ? static_cast<T>(y[i * d.n + j] + v) : v;
      }
  }, 16);
}

Status GemmKernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  if (!ctx.input(0) || !ctx.input(1))
    return Err(StatusCode::kInvalidArgument, "{}: Gemm needs inputs A and B", node.Where());
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  const Tensor* c = ctx.input(2);
  if (a.rank() != 2 || b.rank() != 2)
    return Err(StatusCode::kInvalidArgument, "{}: Gemm needs 2-D A and B, got {} and {}", node.Where(),
               a.Describe(), b.Describe());
  GemmDims d;
  d.ta = node.geti("transA", 0) != 0;
  d.tb = node.geti("transB", 0) != 0;
  d.m = d.ta ? a.dim(1) : a.dim(0);
  d.k = d.ta ? a.dim(0) : a.dim(1);
  d.n = d.tb ? b.dim(0) : b.dim(1);
  const int64_t kb = d.tb ? b.dim(1) : b.dim(0);
  if (kb != d.k)
    return Err(StatusCode::kInvalidArgument, "{}: inner dimensions differ: A {} and B {}", node.Where(),
               a.Describe(), b.Describe());
  if (c && (c->rank() > 2 || (c->rank() >= 1 && c->shape().back() != 1 && c->shape().back() != d.n) ||
            (c->rank() == 2 && c->dim(0) != 1 && c->dim(0) != d.m)))
    return Err(StatusCode::kInvalidArgument, "{}: C {} does not broadcast to [{},{}]", node.Where(), c->Describe(),
               d.m, d.n);
  const float alpha = node.getf("alpha", 1.f);
  const float beta = node.getf("beta", 1.f);
  Tensor& y = ctx.out(0);
  EnsureOutput(y, a.dtype(), {d.m, d.n});
  const int64_t lda = d.ta ? d.m : d.k, ldb = d.tb ? d.k : d.n;
  switch (a.dtype()) {
    case DataType::kFloat32: {
      const bool acc = FillBias(c, beta, d, y.data<float>());
      GemmF32(d.ta, d.tb, d.m, d.n, d.k, alpha, a.data<float>(), lda, b.data<float>(), ldb, acc ? 1.f : 0.f,
              y.data<float>(), d.n);
      break;
    }
    case DataType::kFloat64: {
      const bool acc = FillBias(c, beta, d, y.data<double>());
      GemmF64(d.ta, d.tb, d.m, d.n, d.k, alpha, a.data<double>(), lda, b.data<double>(), ldb, acc ? 1.0 : 0.0,
              y.data<double>(), d.n);
      break;
    }
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const auto fa = ToFloatBuffer(a), fb = ToFloatBuffer(b);
      std::vector<float> fy(static_cast<size_t>(d.m * d.n));
      bool acc = false;
      if (c) {
        Tensor cf = CastTensor(*c, DataType::kFloat32);
        acc = FillBias(&cf, beta, d, fy.data());
      }
      GemmF32(d.ta, d.tb, d.m, d.n, d.k, alpha, fa.data(), lda, fb.data(), ldb, acc ? 1.f : 0.f, fy.data(), d.n);
      FromFloatBuffer(fy.data(), y);
      break;
    }
#define KILN_GEMM_INT(DT, T)                                                   \
  case DT: {                                                                   \
    const bool acc = FillBias(c, beta, d, y.data<T>());                        \
    GemmLoop(d, alpha, a.data<T>(), b.data<T>(), acc, y.data<T>());            \
    break;                                                                     \
  }
      KILN_GEMM_INT(DataType::kInt32, int32_t)
      KILN_GEMM_INT(DataType::kInt64, int64_t)
      KILN_GEMM_INT(DataType::kUInt32, uint32_t)
      KILN_GEMM_INT(DataType::kUInt64, uint64_t)
#undef KILN_GEMM_INT
    default:
      return Err(StatusCode::kUnsupported, "{}: Gemm does not support element type {}", node.Where(),
                 DataTypeName(a.dtype()));
  }
  return Status::Ok();
}

}  // namespace

void RegisterIntegerMatMulKernels(KernelRegistry& r);  // linalg_integer.cpp: MatMulInteger, QLinearMatMul

void RegisterLinalgKernels(KernelRegistry& r) {
  RegisterIntegerMatMulKernels(r);
  r.Add("MatMul", MatMulKernel);
  r.Add("Gemm", GemmKernel);
  r.Add("Einsum", EinsumKernel);
}

}  // namespace kiln::cpu
