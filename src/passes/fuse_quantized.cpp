// Pass fuse-quantized: turns a convolution or GEMM between quantize/dequantize nodes into one INT8 layer
// (ops/quantized_ops.h), where the build's backend has its kernel; a GEMM's float8e4m3fn Q/DQ into one FP8 layer.
//   DequantizeLinear(x_q, sx, zx) ─┐
//   DequantizeLinear(W_q, sw) ─────┴► Conv / FusedConv (bias, residual, activation) ─► [QuantizeLinear(sy, zy)]
//     =>  kiln.QConv(x_q, W_q, bias, residual; scales, activation)  ─► int8 (when the Quantize is fused) or float32
//   the same with MatMul / FusedMatMul / Gemm / FusedGemm  =>  kiln.QMatMul(x_q, W_q [K, N], bias [N], residual)
// Conditions: x_q is int8/uint8 with one scale and zero point (constants); W_q an int8 constant, symmetric (zero
// point 0 or absent) — or, for a GEMM, x_q and W_q float8e4m3fn (zero points 0; a float8 output Quantize only) —,
// with one scale or one per output channel (Conv's axis 0; MatMul's [K, N] axis 1; Gemm's B transposed at build time
// when transB); a convolution has 1 to 3 spatial dims; a GEMM's weight is 2-D and a Gemm has alpha 1, beta 1, transA
// 0 and a bias [N] or none; every float operand is float32. The output's Quantize is fused when it alone reads the
// layer's output (which is no graph output) and has constant scalar scale and zero point. With
// PassOptions::quantize_float_weights (implicit INT8/FP8), a float32 constant weight is quantized per output channel
// here (max |w| / 127, float8: / 448; a zero channel gets scale 1). Not fused: layers whose int32 sums could overflow
// (the input type's largest |x - zero point| times a channel's sum of |w|, past 2^31; K over about 66,000). A Gemm's constant
// [1, N] bias becomes [N]. A residual read through a per-tensor symmetric int8 DequantizeLinear becomes an int8
// residual with its scale. The dequantize nodes stay while others read them.
#include <climits>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "ops/quantized_ops.h"
#include "passes/fusion_util.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

using fusion::Uses;

bool Is8Bit(DataType t) { return t == DataType::kInt8 || t == DataType::kUInt8; }

// A constant holding one element (any shape with one element) of a float or integer type.
const Tensor* OneConst(const Value* v) {
  return v && v->is_const() && v->const_value->numel() == 1 ? &*v->const_value : nullptr;
}

// Scale and zero point of a per-tensor QuantizeLinear/DequantizeLinear (inputs 1 and 2), or false.
bool PerTensorParams(const Node* n, float* scale, int64_t* zp, DataType* zp_type) {
  const Tensor* s = OneConst(n->input(1));
  if (!s || s->dtype() != DataType::kFloat32) return false;
  *scale = static_cast<float>(s->GetAsDouble(0));
  if (!(*scale > 0) || !std::isfinite(*scale)) return false;
  const Value* z = n->input(2);
  if (!z) {
    *zp = 0;
    *zp_type = DataType::kUInt8;  // ONNX: an omitted zero point means uint8
    return true;
  }
  const Tensor* zt = OneConst(z);
  if (!zt) return false;
  if (zt->dtype() == DataType::kFloat8E4M3FN) {  // float8: the zero point must be 0 (as every float8 kernel has it)
    if (zt->GetAsDouble(0) != 0) return false;
    *zp = 0;
    *zp_type = zt->dtype();
    return true;
  }
  if (!Is8Bit(zt->dtype())) return false;
  *zp = zt->GetAsInt(0);
  *zp_type = zt->dtype();
  return true;
}

bool IsDequantize(const Node* n) { return fusion::IsOp(n, "DequantizeLinear"); }
bool IsQuantize(const Node* n) { return fusion::IsOp(n, "QuantizeLinear"); }

struct Weight {
  Tensor q;                   // int8 or float8e4m3fn [M, ...] (conv) or [K, N] (GEMM)
  std::vector<float> scales;  // 1 or one per output channel
};

// Symmetric per-channel int8 (max |w| / 127) or float8e4m3fn (max |w| / 448) of a float32 weight; `axis` is the
// output-channel axis.
Weight QuantizeWeight(const Tensor& w, int64_t axis, DataType type) {
  const bool fp8 = type == DataType::kFloat8E4M3FN;
  const float levels = fp8 ? 448.f : 127.f;
  const int64_t channels = w.dim(axis);
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
  const int64_t outer = channels == 0 ? 0 : w.numel() / (channels * inner);
  const float* src = w.data<float>();
  std::vector<float> amax(static_cast<size_t>(channels), 0.f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i)
        amax[c] = std::max(amax[c], std::fabs(src[(o * channels + c) * inner + i]));
  Weight r{Tensor(type, w.shape()), {}};
  for (float a : amax) r.scales.push_back(a > 0 && std::isfinite(a) ? a / levels : 1.f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = (o * channels + c) * inner + i;
        if (fp8) {
          const float v = src[k] / r.scales[c];
          r.q.data<uint8_t>()[k] = FloatToFloat8E4M3(std::isnan(v) ? 0.f : v, /*saturate=*/true);
          continue;
        }
        const float v = std::nearbyint(src[k] / r.scales[c]);
        r.q.data<int8_t>()[k] = static_cast<int8_t>(std::isnan(v) ? 0.f : std::min(127.f, std::max(-127.f, v)));
      }
  return r;
}

// The quantized weight of input 1: a DequantizeLinear of a `type` (int8 or float8e4m3fn) constant (symmetric; scales
// per tensor or along `axis`), or — with quantize_float — a float32 constant quantized here. nullopt otherwise.
std::optional<Weight> ReadWeight(const Uses& u, const Value* w, int64_t axis, bool quantize_float, DataType type) {
  if (!w || !w->has_shape) return std::nullopt;
  if (Node* dq = u.Producer(w); IsDequantize(dq)) {
    const Value* q = dq->input(0);
    const Value* s = dq->input(1);
    if (!q || !q->is_const() || q->dtype != type || !s || !s->is_const() ||
        s->dtype != DataType::kFloat32 || w->dtype != DataType::kFloat32)
      return std::nullopt;
    if (const Value* z = dq->input(2)) {
      if (!z->is_const()) return std::nullopt;
      for (int64_t i = 0; i < z->const_value->numel(); ++i)
        if (z->const_value->GetAsDouble(i) != 0) return std::nullopt;
    }
    const Tensor& st = *s->const_value;
    Weight r{*q->const_value, {}};
    if (st.numel() != 1) {
      const int64_t rank = r.q.rank();
      int64_t dq_axis = dq->geti("axis", 1);
      if (dq_axis < 0) dq_axis += rank;
      if (dq->getints("block_size").size() > 0 || dq->geti("block_size", 0) != 0) return std::nullopt;
      if (st.rank() != 1 || dq_axis != axis || st.numel() != r.q.dim(axis)) return std::nullopt;
    }
    for (int64_t i = 0; i < st.numel(); ++i) r.scales.push_back(static_cast<float>(st.GetAsDouble(i)));
    for (float v : r.scales)
      if (!(v > 0) || !std::isfinite(v)) return std::nullopt;
    return r;
  }
  if (quantize_float && w->is_const() && w->dtype == DataType::kFloat32 && w->const_value->rank() > axis)
    return QuantizeWeight(*w->const_value, axis, type);
  return std::nullopt;
}

// [N, K] -> [K, N] (a one-byte type).
Tensor Transposed(const Tensor& t) {
  const int64_t r = t.dim(0), c = t.dim(1);
  Tensor out(t.dtype(), {c, r});
  const uint8_t* s = t.data<uint8_t>();
  uint8_t* d = out.data<uint8_t>();
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) d[j * r + i] = s[i * c + j];
  return out;
}

bool FloatOrAbsent(const Value* v) { return !v || v->dtype == DataType::kFloat32; }

// The int32 sums cannot overflow: the largest |x - zero point| the input type allows times the largest sum of |w| over
// one output channel (a conv weight [M, ...] by rows, a GEMM weight [K, N] by columns) stays within int32.
bool SumsFitInt32(const Tensor& w, bool conv, DataType x_type, int64_t zx) {
  const int64_t lo = x_type == DataType::kUInt8 ? 0 : -128, hi = x_type == DataType::kUInt8 ? 255 : 127;
  const int64_t x_max = std::max(std::abs(lo - zx), std::abs(hi - zx));
  const int8_t* d = w.data<int8_t>();
  int64_t worst = 0;
  if (conv) {
    const int64_t m = w.dim(0), k = m == 0 ? 0 : w.numel() / m;
    for (int64_t r = 0; r < m; ++r) {
      int64_t s = 0;
      for (int64_t i = 0; i < k; ++i) s += std::abs(static_cast<int64_t>(d[r * k + i]));
      worst = std::max(worst, s);
    }
  } else {
    const int64_t k = w.dim(0), n = w.dim(1);
    std::vector<int64_t> s(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) s[j] += std::abs(static_cast<int64_t>(d[i * n + j]));
    for (int64_t v : s) worst = std::max(worst, v);
  }
  return x_max * worst <= INT32_MAX;
}

bool TryFuse(Graph& g, const Uses& u, Node* n, const PassOptions& o, PassReport& report) {
  const bool kiln = n->domain == "kiln";
  const bool conv = (n->domain.empty() && n->op_type == "Conv") || (kiln && n->op_type == "FusedConv");
  const bool matmul = (n->domain.empty() && n->op_type == "MatMul") || (kiln && n->op_type == "FusedMatMul");
  const bool gemm = (n->domain.empty() && n->op_type == "Gemm") || (kiln && n->op_type == "FusedGemm");
  if (!conv && !matmul && !gemm) return false;
  if (o.keep_float_layers.count(n->name)) return false;
  if (n->outputs.size() != 1 || !n->outputs[0] || n->outputs[0]->dtype != DataType::kFloat32) return false;
  const std::string qop = conv ? "kiln.QConv" : "kiln.QMatMul";

  // x: a per-tensor DequantizeLinear of an 8-bit tensor.
  Node* dqx = u.Producer(n->input(0));
  float sx = 0;
  int64_t zx = 0;
  DataType zx_type = DataType::kUndefined;
  if (!IsDequantize(dqx) || !dqx->input(0) || !quant_attrs::IsQuantizedInput(dqx->input(0)->dtype) ||
      !PerTensorParams(dqx, &sx, &zx, &zx_type) || zx_type != dqx->input(0)->dtype)
    return false;
  // FP8 (float8e4m3fn x and weight, float32 sums): GEMMs only.
  const bool fp8 = zx_type == DataType::kFloat8E4M3FN;
  if (fp8 && conv) return false;
  const DataType w_type = fp8 ? DataType::kFloat8E4M3FN : DataType::kInt8;

  // The GEMM's form: Gemm needs alpha 1, transA 0, and C a bias [N] with beta 1.
  bool trans_b = false;
  if (gemm) {
    if (n->getf("alpha", 1.f) != 1.f || n->geti("transA", 0) != 0) return false;
    trans_b = n->geti("transB", 0) != 0;
    if (n->input(2) && n->getf("beta", 1.f) != 1.f) return false;
  }
  const Value* wv = n->input(1);
  if (!conv && (!wv || !wv->has_shape || wv->shape.size() != 2)) return false;
  if (conv && (!wv || !wv->has_shape || wv->shape.size() < 3 || wv->shape.size() > 5)) return false;  // 1-3 spatial dims
  const int64_t axis = conv ? 0 : (trans_b ? 0 : 1);
  std::optional<Weight> w = ReadWeight(u, wv, axis, o.quantize_float_weights, w_type);
  if (!w) return false;
  if (gemm && trans_b) w->q = Transposed(w->q);
  if (!fp8 && !SumsFitInt32(w->q, conv, dqx->input(0)->dtype, zx)) return false;

  // Bias and residual: float32; a GEMM's bias is [N]. A residual that is a per-tensor symmetric DequantizeLinear of
  // an int8 tensor is read as that tensor (kiln_r_scale), so the tensors between residual blocks stay int8.
  Value* bias = n->input(2);
  Value* residual = n->input(3);
  if (matmul && !kiln) bias = nullptr;  // MatMul has no bias
  if (!FloatOrAbsent(bias) || !FloatOrAbsent(residual)) return false;
  Node* dqr = residual ? u.Producer(residual) : nullptr;
  float sr = 0;
  int64_t zr = 0;
  DataType zr_type = DataType::kUndefined;
  const bool int8_residual = !fp8 && IsDequantize(dqr) && dqr->input(0) && dqr->input(0)->dtype == DataType::kInt8 &&
                             PerTensorParams(dqr, &sr, &zr, &zr_type) && zr == 0 && zr_type == DataType::kInt8 &&
                             dqr->outputs.size() == 1;
  if (int8_residual) residual = dqr->input(0);
  std::optional<Tensor> flat_bias;  // a Gemm's constant [1, N] bias as the [N] the layer takes
  if (bias && !conv) {
    const int64_t cols = w->q.dim(1);
    if (!bias->has_shape) return false;
    int64_t numel = 1;
    for (const Dim& d : bias->shape) numel *= d.known() ? d.value : -1;
    if (numel != cols) return false;
    if (bias->shape.size() == 2) {
      if (!bias->is_const()) return false;
      flat_bias = bias->const_value->Reshaped({cols});
    } else if (bias->shape.size() != 1) {
      return false;
    }
  }
  Value bias_standin;
  if (flat_bias) bias_standin = fusion::ConstantStandIn(bias->name + "/flat", *flat_bias);

  // The output's QuantizeLinear, when it alone reads the output.
  Value* y = n->outputs[0];
  Node* q = u.Single(y);
  float sy = 0;
  int64_t zy = 0;
  DataType zy_type = DataType::kUndefined;
  const bool fuse_q = IsQuantize(q) && q->input(0) == y && q->outputs.size() == 1 && q->outputs[0] &&
                      !u.IsOutput(y) && PerTensorParams(q, &sy, &zy, &zy_type) && q->geti("saturate", 1) == 1 &&
                      !q->has_attr("output_dtype") && q->outputs[0]->dtype == zy_type &&
                      (zy_type == DataType::kFloat8E4M3FN) == fp8;

  // The new node replaces n in place (its name and position stay); the backend is asked first, about a candidate
  // that reads the weight from a stand-in value (the graph's constant is made once the node is accepted).
  const std::string name = n->name;
  const std::string w_name = name + (fp8 ? "/weight_fp8" : "/weight_int8");
  Value w_standin = fusion::ConstantStandIn(w_name, w->q);
  Node* qn = n;
  std::map<std::string, Attribute> attrs;
  for (const auto& [k, a] : n->attrs)
    if (conv || k.rfind("kiln_activation", 0) == 0) attrs[k] = a;  // a GEMM keeps only its activation
  attrs[quant_attrs::kXScale] = Attribute::Float(sx);
  attrs[quant_attrs::kXZeroPoint] = Attribute::Int(zx);
  attrs[quant_attrs::kWScales] = Attribute::Floats(w->scales);
  if (int8_residual) attrs[quant_attrs::kRScale] = Attribute::Float(sr);
  if (fuse_q) {
    attrs[quant_attrs::kYType] = Attribute::Int(static_cast<int64_t>(zy_type));
    attrs[quant_attrs::kYScale] = Attribute::Float(sy);
    attrs[quant_attrs::kYZeroPoint] = Attribute::Int(zy);
  }
  Value* xq = dqx->input(0);
  if (o.supports) {
    Node cand;
    cand.name = name;
    cand.op_type = conv ? "QConv" : "QMatMul";
    cand.domain = "kiln";
    cand.opset = 1;
    cand.attrs = attrs;
    cand.inputs = {xq, &w_standin, flat_bias ? &bias_standin : bias};
    if (residual) cand.inputs.push_back(residual);
    cand.outputs = {fuse_q ? q->outputs[0] : y};
    if (!o.supports(cand)) return false;
  }
  Value* wq = g.AddConstant(w_name, std::move(w->q));
  if (flat_bias) bias = g.AddConstant(bias->name + "/flat", std::move(*flat_bias));
  qn->op_type = conv ? "QConv" : "QMatMul";
  qn->domain = "kiln";
  qn->opset = 1;
  qn->attrs = std::move(attrs);
  qn->inputs = {xq, wq, bias};
  if (residual) qn->inputs.push_back(residual);
  while (!qn->inputs.empty() && !qn->inputs.back()) qn->inputs.pop_back();
  std::vector<Node*> dead{dqx};
  if (Node* dqw = u.Producer(wv); IsDequantize(dqw)) dead.push_back(dqw);
  if (int8_residual) dead.push_back(dqr);
  std::string q_note;
  if (fuse_q) {
    // The layer now writes the Quantize's output; the Quantize goes.
    Value* out = q->outputs[0];
    q->outputs[0] = y;  // q is dead: it keeps reading y, which nothing else reads, and is removed below
    q->inputs.clear();
    qn->outputs[0] = out;
    out->producer = qn;
    dead.push_back(q);
    q_note = fmt::format(", output {} (scale {:.6g}, zero point {})", DataTypeName(zy_type), sy, zy);
  }
  fusion::UseKilnDomain(g);
  fusion::RemoveUnread(g, dead);
  if (int8_residual) q_note += fmt::format(", int8 residual (scale {:.6g})", sr);
  report.details.push_back(fmt::format("{} -> {} '{}' (x scale {:.6g}, {} weight scale(s){})", name, qop, name, sx,
                                       qn->getfloats(quant_attrs::kWScales).size(), q_note));
  return true;
}

}  // namespace

Result<PassReport> FuseQuantizedPass(Graph& g, const PassOptions& o) {
  PassReport report;
  report.rewrites =
      fusion::RewriteToFixpoint(g, [&](const Uses& u, Node* n) { return TryFuse(g, u, n, o, report); });
  return report;
}

}  // namespace kiln
