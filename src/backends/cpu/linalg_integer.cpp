// CPU kernels of MatMulInteger ((A - a_zero_point) x (B - b_zero_point) in int32) and QLinearMatMul (the same, then
// requantized: round(acc * a_scale * b_scale / y_scale) + y_zero_point, saturated), with numpy matmul broadcasting.
// Zero points and scales are scalars, or 1-D: per row of A (M) and per column of B (N).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/common.h"
#include "backends/cpu/tensor_util.h"

namespace kiln::cpu {
namespace {

struct MatMulPlan {
  std::vector<int64_t> out_shape;
  int64_t m = 1, n = 1, k = 1, batches = 1;
  std::vector<int64_t> a_off, b_off;  // per output batch: the element offset of its A and B matrices
};

Result<MatMulPlan> PlanMatMul(const Node& node, const Tensor& a, const Tensor& b) {
  std::vector<int64_t> sa = a.shape(), sb = b.shape();
  if (sa.empty() || sb.empty())
    return Err(StatusCode::kInvalidArgument, "{}: operands must have rank >= 1", node.Where());
  const bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa.insert(sa.begin(), 1);
  if (b1) sb.push_back(1);
  MatMulPlan p;
  p.m = sa[sa.size() - 2];
  p.k = sa.back();
  p.n = sb.back();
  if (sb[sb.size() - 2] != p.k)
    return Err(StatusCode::kInvalidArgument, "{}: inner dimensions differ ({} vs {})", node.Where(), p.k,
               sb[sb.size() - 2]);
  const std::vector<int64_t> ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> batch, BroadcastShape(node, ba, bb));
  const std::vector<int64_t> stra = BroadcastStrides(ba, batch), strb = BroadcastStrides(bb, batch);
  p.batches = 1;
  for (int64_t d : batch) p.batches *= d;
  BroadcastIterator it(batch, {stra, strb});
  for (int64_t i = 0; i < p.batches; ++i) {
    p.a_off.push_back(it.offset(0) * p.m * p.k);
    p.b_off.push_back(it.offset(1) * p.k * p.n);
    it.Next();
  }
  p.out_shape = batch;
  if (!a1) p.out_shape.push_back(p.m);
  if (!b1) p.out_shape.push_back(p.n);
  return p;
}

// A scalar, or a 1-D vector of `len` values indexed by i.
Result<std::vector<double>> PerIndex(const Node& node, const Tensor* t, int64_t len, const char* what) {
  if (!t) return std::vector<double>(static_cast<size_t>(len), 0.0);
  if (t->numel() == 1) return std::vector<double>(static_cast<size_t>(len), t->GetAsDouble(0));
  if (t->rank() == 1 && t->numel() == len) {
    std::vector<double> v(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) v[static_cast<size_t>(i)] = t->GetAsDouble(i);
    return v;
  }
  return Err(StatusCode::kUnsupported, "{}: {} must be a scalar or hold {} values, got {}", node.Where(), what, len,
             t->Describe());
}

// acc[batch][m][n] = sum_k (a - a_zp[m]) * (b - b_zp[n]), in int64.
Result<std::vector<int64_t>> Accumulate(const Node& node, const MatMulPlan& p, const Tensor& a, const Tensor& b,
                                        const std::vector<double>& azp, const std::vector<double>& bzp) {
  for (const Tensor* t : {&a, &b})
    if (t->dtype() != DataType::kInt8 && t->dtype() != DataType::kUInt8)
      return Err(StatusCode::kInvalidArgument, "{}: operands must be int8 or uint8, got {}", node.Where(),
                 t->Describe());
  std::vector<int64_t> acc(static_cast<size_t>(p.batches * p.m * p.n), 0);
  for (int64_t bt = 0; bt < p.batches; ++bt)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        int64_t s = 0;
        const int64_t za = static_cast<int64_t>(azp[static_cast<size_t>(i)]);
        const int64_t zb = static_cast<int64_t>(bzp[static_cast<size_t>(j)]);
        for (int64_t q = 0; q < p.k; ++q)
          s += (a.GetAsInt(p.a_off[bt] + i * p.k + q) - za) * (b.GetAsInt(p.b_off[bt] + q * p.n + j) - zb);
        acc[static_cast<size_t>((bt * p.m + i) * p.n + j)] = s;
      }
  return acc;
}

Status MatMulIntegerKernel(KernelContext& c) {
  const Tensor& a = c.in(0);
  const Tensor& b = c.in(1);
  KILN_ASSIGN_OR_RETURN(MatMulPlan p, PlanMatMul(c.node, a, b));
  KILN_ASSIGN_OR_RETURN(auto azp, PerIndex(c.node, c.input(2), p.m, "a_zero_point"));
  KILN_ASSIGN_OR_RETURN(auto bzp, PerIndex(c.node, c.input(3), p.n, "b_zero_point"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> acc, Accumulate(c.node, p, a, b, azp, bzp));
  Tensor& y = AllocOutput(c, 0, DataType::kInt32, p.out_shape);
  for (size_t i = 0; i < acc.size(); ++i) y.data<int32_t>()[i] = static_cast<int32_t>(acc[i]);
  return Status::Ok();
}

Status QLinearMatMulKernel(KernelContext& c) {
  const Tensor& a = c.in(0);
  const Tensor& b = c.in(3);
  KILN_ASSIGN_OR_RETURN(MatMulPlan p, PlanMatMul(c.node, a, b));
  KILN_ASSIGN_OR_RETURN(auto as, PerIndex(c.node, &c.in(1), p.m, "a_scale"));
  KILN_ASSIGN_OR_RETURN(auto azp, PerIndex(c.node, &c.in(2), p.m, "a_zero_point"));
  KILN_ASSIGN_OR_RETURN(auto bs, PerIndex(c.node, &c.in(4), p.n, "b_scale"));
  KILN_ASSIGN_OR_RETURN(auto bzp, PerIndex(c.node, &c.in(5), p.n, "b_zero_point"));
  const Tensor& ys = c.in(6);
  const Tensor& yzp = c.in(7);
  if (ys.numel() != 1 || yzp.numel() != 1)
    return Err(StatusCode::kUnsupported, "{}: y_scale and y_zero_point must be scalars", c.node.Where());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> acc, Accumulate(c.node, p, a, b, azp, bzp));
  const DataType t = yzp.dtype();
  const float lo = t == DataType::kUInt8 ? 0.f : -128.f, hi = t == DataType::kUInt8 ? 255.f : 127.f;
  const float y_scale = static_cast<float>(ys.GetAsDouble(0)), zp = static_cast<float>(yzp.GetAsDouble(0));
  Tensor& y = AllocOutput(c, 0, t, p.out_shape);
  for (int64_t bt = 0; bt < p.batches; ++bt)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        const size_t o = static_cast<size_t>((bt * p.m + i) * p.n + j);
        // In float32, as the ONNX reference computes it; nearbyint rounds half to even.
        const float mult = static_cast<float>(as[static_cast<size_t>(i)]) * static_cast<float>(bs[static_cast<size_t>(j)]) /
                           y_scale;
        const float v = std::clamp(std::nearbyint(static_cast<float>(acc[o]) * mult) + zp, lo, hi);
        y.SetFromDouble(static_cast<int64_t>(o), v);
      }
  return Status::Ok();
}

}  // namespace

void RegisterIntegerMatMulKernels(KernelRegistry& r) {
  r.Add("MatMulInteger", MatMulIntegerKernel);
  r.Add("QLinearMatMul", QLinearMatMulKernel);
}

}  // namespace kiln::cpu
