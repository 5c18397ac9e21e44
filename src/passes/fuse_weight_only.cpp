// Pass fuse-weight-only: a MatMul whose weight is a DequantizeLinear of a 4-bit constant becomes one weight-only
// layer that reads the weight packed (ops/quantized_ops.h, kiln.WeightOnlyMatMul), where the build's backend runs it.
//   DequantizeLinear(W_q int4/uint4 [K, N], scale, [zero point]) ─► MatMul(X [..., K], ·)
//     =>  kiln.WeightOnlyMatMul(X, W_packed uint8 [N, ceil(K/2)], scales [N, G], [zero points int8 [N, G]])
// The scales may be per tensor, per axis (either axis) or blocked along either axis (opset 21's block_size); they are
// regrouped along K: group size block_size when blocked along K, K when they do not vary along K, else 1. The weight
// keeps every value it had (the packing is lossless) and the arithmetic is DequantizeLinear's then MatMul's, so the
// engine computes what the unfused graph computes. This is how models quantized elsewhere for INT4 weight-only
// (onnxruntime's 4-bit quantizer in QDQ format, NVIDIA ModelOpt's INT4 AWQ export) reach a GEMM that reads a quarter of
// FP16's weight bytes. The DequantizeLinear stays while others read it.
// With PassOptions::int4_weight_block (kiln build --int4Weights=B), a MatMul's float [K, N] constant weight is
// quantized here too (QuantizeFloat: symmetric int4, round to nearest, one scale per B of K per column) unless
// --layerPrecisions pins the layer to a float type.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>

#include "core/error.h"
#include "ops/quantized_ops.h"
#include "passes/fusion_util.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

using fusion::Uses;

bool IsDequantize(const Node* n) { return fusion::IsOp(n, "DequantizeLinear"); }

// The packed weight, scales and zero points of a DequantizeLinear of a 4-bit [K, N] constant; nullopt when its
// parameters are not constants or do not fit the weight.
struct Packed {
  Tensor w, scales, zeros;  // zeros: only when has_zeros
  bool has_zeros = false;   // some zero point is not 0
  int64_t k = 0, n = 0, group = 0;
  DataType w_type = DataType::kInt4;
};

std::optional<Packed> Pack(const Node& dq) {
  const Value* qv = dq.input(0);
  const Value* sv = dq.input(1);
  const Value* zv = dq.input(2);
  if (!qv || !qv->is_const() || !Is4BitType(qv->dtype) || !sv || !sv->is_const() || !fusion::IsFloatType(sv->dtype))
    return std::nullopt;
  if (zv && (!zv->is_const() || zv->dtype != qv->dtype)) return std::nullopt;
  const Tensor& q = *qv->const_value;
  const Tensor& s = *sv->const_value;
  const Tensor* z = zv ? &*zv->const_value : nullptr;
  if (q.rank() != 2 || q.dim(0) < 1 || q.dim(1) < 1) return std::nullopt;
  const int64_t k = q.dim(0), cols = q.dim(1);
  int64_t axis = dq.geti("axis", 1);
  if (axis < 0) axis += 2;
  const int64_t block = dq.geti("block_size", 0);
  if (axis < 0 || axis > 1 || block < 0) return std::nullopt;
  // Where the scale (and zero point) of element (k, n) is, and the group size along K.
  std::function<int64_t(int64_t, int64_t)> at;
  int64_t group = 1;
  if (block == 0 && s.numel() == 1) {
    at = [](int64_t, int64_t) { return int64_t{0}; };
    group = k;
  } else if (block == 0) {
    if (s.rank() != 1 || s.dim(0) != q.dim(axis)) return std::nullopt;
    if (axis == 1) {
      at = [](int64_t, int64_t j) { return j; };
      group = k;
    } else {
      at = [](int64_t i, int64_t) { return i; };
    }
  } else {
    const int64_t blocks = (q.dim(axis) + block - 1) / block;
    if (s.rank() != 2 || s.dim(axis) != blocks || s.dim(1 - axis) != q.dim(1 - axis)) return std::nullopt;
    if (axis == 0) {
      at = [block, cols](int64_t i, int64_t j) { return i / block * cols + j; };
      group = block;
    } else {
      at = [block, blocks](int64_t i, int64_t j) { return i * blocks + j / block; };
    }
  }
  if (z && z->numel() != s.numel()) return std::nullopt;
  if (group > k) group = k;
  Packed p;
  p.k = k;
  p.n = cols;
  p.group = group;
  p.w_type = qv->dtype;
  const int64_t groups = (k + group - 1) / group, row_bytes = (k + 1) / 2;
  p.w = Tensor(DataType::kUInt8, {cols, row_bytes});
  uint8_t* w = p.w.data<uint8_t>();
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < cols; ++j)
      w[j * row_bytes + i / 2] |= static_cast<uint8_t>((q.data<uint8_t>()[i * cols + j] & 0xf) << ((i % 2) * 4));
  p.scales = Tensor(s.dtype(), {cols, groups});
  const size_t es = DataTypeSize(s.dtype());
  bool any_zero_point = false;
  Tensor zeros(DataType::kInt8, {cols, groups});
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t src = at(g * group, j);
      std::memcpy(static_cast<uint8_t*>(p.scales.raw()) + (j * groups + g) * es,
                  static_cast<const uint8_t*>(s.raw()) + src * es, es);
      const int64_t zp = z ? z->GetAsInt(src) : 0;
      zeros.data<int8_t>()[j * groups + g] = static_cast<int8_t>(zp);
      any_zero_point |= zp != 0;
    }
  if (any_zero_point) p.zeros = std::move(zeros), p.has_zeros = true;
  return p;
}

// A float [K, N] constant quantized to int4 here: per column, blocks of `block` K, scale max |w| / 7 in `scale_type`
// (1 where that is 0 or not finite), q = round half to even (w / scale) clamped to [-8, 7].
Packed QuantizeFloat(const Tensor& w, int64_t block, DataType scale_type) {
  const int64_t k = w.dim(0), cols = w.dim(1), group = std::min(block, k), groups = (k + group - 1) / group;
  Packed p;
  p.k = k;
  p.n = cols;
  p.group = group;
  p.w_type = DataType::kInt4;
  const int64_t row_bytes = (k + 1) / 2;
  p.w = Tensor(DataType::kUInt8, {cols, row_bytes});
  p.scales = Tensor(scale_type, {cols, groups});
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t k0 = gi * group, k1 = std::min(k, k0 + group);
      double amax = 0;
      for (int64_t i = k0; i < k1; ++i) amax = std::max(amax, std::fabs(w.GetAsDouble(i * cols + j)));
      p.scales.SetFromDouble(j * groups + gi, amax / 7.0);  // rounded to the weight's type
      double s = p.scales.GetAsDouble(j * groups + gi);
      if (!(s > 0) || !std::isfinite(s)) {
        p.scales.SetFromDouble(j * groups + gi, 1.0);
        s = 1.0;
      }
      const float sf = static_cast<float>(s);
      for (int64_t i = k0; i < k1; ++i) {
        float q = std::nearbyint(static_cast<float>(w.GetAsDouble(i * cols + j)) / sf);
        q = std::isnan(q) ? 0.f : std::min(7.f, std::max(-8.f, q));
        p.w.data<uint8_t>()[j * row_bytes + i / 2] |=
            static_cast<uint8_t>((static_cast<int>(q) & 0xf) << ((i % 2) * 4));
      }
    }
  return p;
}

bool TryFuse(Graph& g, const Uses& u, Node* n, const PassOptions& o, PassReport& report) {
  if (!fusion::Is(n, "MatMul", 2) || n->outputs.size() != 1) return false;
  Value* x = n->input(0);
  Value* wv = n->input(1);
  Node* dq = wv ? u.Producer(wv) : nullptr;
  if (!x || !wv || !fusion::IsFloatType(x->dtype) || wv->dtype != x->dtype) return false;
  std::optional<Packed> p;
  if (IsDequantize(dq)) {
    p = Pack(*dq);
  } else if (o.int4_weight_block > 0 && wv->is_const() && wv->const_value->rank() == 2 &&
             wv->const_value->dim(0) > 0 && wv->const_value->dim(1) > 0 && !o.keep_float_layers.count(n->name) &&
             !IsDequantize(u.Producer(x))) {  // a quantized activation: the layer is fuse-quantized's (INT8)
    const Tensor& w = *wv->const_value;
    bool finite = true;  // Inf / NaN weights stay float: no int4 scale represents them
    for (int64_t i = 0; finite && i < w.numel(); ++i) finite = std::isfinite(w.GetAsDouble(i));
    const DataType st = w.dtype() == DataType::kFloat32 && o.int4_scale_type != DataType::kUndefined
                            ? o.int4_scale_type : w.dtype();
    if (finite) p = QuantizeFloat(w, o.int4_weight_block, st);
  }
  if (!p) return false;
  if (x->has_shape && (x->shape.empty() || (x->shape.back().known() && x->shape.back().value != p->k))) return false;
  std::map<std::string, Attribute> attrs;
  attrs[woq_attrs::kK] = Attribute::Int(p->k);
  attrs[woq_attrs::kGroupSize] = Attribute::Int(p->group);
  attrs[woq_attrs::kWType] = Attribute::Int(static_cast<int64_t>(p->w_type));
  const std::string name = n->name;
  // Stand-ins for the constants, made in the graph once the backend accepts the node.
  Value ws = fusion::ConstantStandIn(name + "/weight_packed4", p->w),
        ss = fusion::ConstantStandIn(name + "/weight_scales", p->scales),
        zs = p->has_zeros ? fusion::ConstantStandIn(name + "/weight_zero_points", p->zeros) : Value();
  if (o.supports) {
    Node cand;
    cand.name = name;
    cand.op_type = "WeightOnlyMatMul";
    cand.domain = "kiln";
    cand.opset = 1;
    cand.attrs = attrs;
    cand.inputs = {x, &ws, &ss};
    if (p->has_zeros) cand.inputs.push_back(&zs);
    cand.outputs = {n->outputs[0]};
    if (!o.supports(cand)) return false;
  }
  const bool zeros = p->has_zeros;
  const std::string dq_name = dq ? dq->name : "float weight " + wv->name, w_type = DataTypeName(p->w_type);
  Value* w = g.AddConstant(name + "/weight_packed4", std::move(p->w));
  Value* s = g.AddConstant(name + "/weight_scales", std::move(p->scales));
  Value* z = zeros ? g.AddConstant(name + "/weight_zero_points", std::move(p->zeros)) : nullptr;
  n->op_type = "WeightOnlyMatMul";
  n->domain = "kiln";
  n->opset = 1;
  n->attrs = std::move(attrs);
  n->inputs = {x, w, s};
  if (z) n->inputs.push_back(z);
  fusion::UseKilnDomain(g);
  if (dq) fusion::RemoveUnread(g, {dq});
  report.details.push_back(fmt::format("{} + {} -> WeightOnlyMatMul '{}' ({} [{}, {}], group size {}{})", dq_name,
                                       name, name, w_type, p->k, p->n, p->group, zeros ? ", zero points" : ""));
  return true;
}

}  // namespace

Result<PassReport> FuseWeightOnlyPass(Graph& g, const PassOptions& o) {
  PassReport report;
  report.rewrites = fusion::RewriteToFixpoint(g, [&](const Uses& u, Node* n) { return TryFuse(g, u, n, o, report); });
  return report;
}

}  // namespace kiln
