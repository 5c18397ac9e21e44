// Pass fold-batchnorm: folds an inference-mode BatchNormalization into the Conv or Gemm that feeds it.
//   BN(y) = s * (y - mean) + bias,  s = scale / sqrt(var + epsilon)     (per output channel c)
//   Conv:  W'[c,...] = W[c,...] * s[c];   B'[c] = (B[c] - mean[c]) * s[c] + bias[c]     (any group)
//   Gemm:  Y = alpha * A * op(B) + beta * C;  op(B)'[:,c] = op(B)[:,c] * s[c];
//          C' = beta * C * s + (bias - mean * s) (broadcast over the rows), beta' = 1
// Before: x -> Conv(conv1, W) -> y -> BatchNormalization(bn1) -> z   After: x -> Conv(conv1, W', B') -> z
// An inference BN with constant statistics that nothing absorbs becomes z = y * s + t (per-channel Mul and Add).
// Requirements: the Conv/Gemm output is read by the BN only and is not a graph output; weights, bias and
// the BN's scale/bias/mean/var are constants of one float type; the BN is in inference mode (no
// training_mode, spatial absent or 1, running-statistics outputs unused). New weight and bias constants are
// created (the old ones may be shared); constants made unused are left for dead-code elimination.
#include <cmath>
#include <unordered_set>

#include "core/error.h"
#include "passes/pass_list.h"

namespace kiln {

namespace {

bool IsConstOf(const Value* v, DataType dt) { return v && v->is_const() && v->const_value->dtype() == dt; }

// Per-channel factor s and shift t (BN(y) = s * y + t), or nullopt when the BN cannot be folded.
struct Affine {
  std::vector<double> s, t;
};
std::optional<Affine> BatchNormAffine(const Graph& g, const Node& bn, DataType dt, int64_t channels) {
  if (bn.inputs.size() < 5 || bn.geti("training_mode", 0) != 0 || bn.geti("spatial", 1) != 1) return std::nullopt;
  for (size_t i = 1; i < bn.outputs.size(); ++i) {
    const Value* o = bn.outputs[i];
    if (o && (IsGraphOutput(g, o) || !Consumers(g, o).empty())) return std::nullopt;
  }
  for (size_t i = 1; i < 5; ++i) {
    const Value* v = bn.input(i);
    if (!IsConstOf(v, dt) || v->const_value->rank() != 1 || v->const_value->numel() != channels) return std::nullopt;
  }
  auto eps = bn.attr_float("epsilon", 1e-5f);
  if (!eps.ok()) return std::nullopt;
  const Tensor &scale = *bn.input(1)->const_value, &bias = *bn.input(2)->const_value;
  const Tensor &mean = *bn.input(3)->const_value, &var = *bn.input(4)->const_value;
  Affine a;
  a.s.resize(channels);
  a.t.resize(channels);
  for (int64_t c = 0; c < channels; ++c) {
    const double denom = var.GetAsDouble(c) + static_cast<double>(*eps);
    if (!(denom > 0)) return std::nullopt;  // a negative variance: leave the model as it is
    a.s[c] = scale.GetAsDouble(c) / std::sqrt(denom);
    a.t[c] = bias.GetAsDouble(c) - mean.GetAsDouble(c) * a.s[c];
  }
  return a;
}

bool FoldIntoConv(Graph& g, Node& conv, const Affine& a, DataType dt) {
  const Tensor& w = *conv.input(1)->const_value;
  const int64_t m = w.dim(0), per = w.numel() / m;
  Tensor nw(dt, w.shape());
  if (dt == DataType::kFloat32) {  // the common case, without per-element conversions
    const float* src = w.data<float>();
    float* dst = nw.data<float>();
    for (int64_t c = 0; c < m; ++c)
      for (int64_t i = 0; i < per; ++i) dst[c * per + i] = static_cast<float>(src[c * per + i] * a.s[c]);
  } else {
    for (int64_t c = 0; c < m; ++c)
      for (int64_t i = 0; i < per; ++i) nw.SetFromDouble(c * per + i, w.GetAsDouble(c * per + i) * a.s[c]);
  }
  Tensor nb(dt, {m});
  const Value* b = conv.input(2);
  for (int64_t c = 0; c < m; ++c) nb.SetFromDouble(c, (b ? b->const_value->GetAsDouble(c) : 0.0) * a.s[c] + a.t[c]);
  conv.inputs[1] = g.AddConstant(conv.name + "_W_bn", std::move(nw));
  if (conv.inputs.size() < 3) conv.inputs.resize(3, nullptr);
  conv.inputs[2] = g.AddConstant(conv.name + "_B_bn", std::move(nb));
  return true;
}

bool FoldIntoGemm(Graph& g, Node& gemm, const Affine& a, DataType dt) {
  const Tensor& b = *gemm.input(1)->const_value;
  const bool trans_b = gemm.geti("transB", 0) != 0;
  const int64_t n = trans_b ? b.dim(0) : b.dim(1);
  Tensor nbm(dt, b.shape());
  for (int64_t r = 0; r < b.dim(0); ++r)
    for (int64_t c = 0; c < b.dim(1); ++c) {
      const int64_t i = r * b.dim(1) + c;
      nbm.SetFromDouble(i, b.GetAsDouble(i) * a.s[trans_b ? r : c]);
    }
  // C' = beta * C * s + t, shaped [N] or [rows, N].
  const double beta = gemm.getf("beta", 1.f);
  const Value* cv = gemm.input(2);
  const Tensor* ct = cv && beta != 0 ? &*cv->const_value : nullptr;
  const int64_t rows = ct && ct->rank() == 2 ? ct->dim(0) : 1;
  const int64_t ccols = !ct || ct->rank() == 0 ? 1 : ct->dim(-1);
  Tensor nc(dt, ct && ct->rank() == 2 ? std::vector<int64_t>{rows, n} : std::vector<int64_t>{n});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) {
      const double cval = ct ? ct->GetAsDouble(r * ccols + (ccols == 1 ? 0 : c)) : 0.0;
      nc.SetFromDouble(r * n + c, beta * cval * a.s[c] + a.t[c]);
    }
  gemm.inputs[1] = g.AddConstant(gemm.name + "_B_bn", std::move(nbm));
  if (gemm.inputs.size() < 3) gemm.inputs.resize(3, nullptr);
  gemm.inputs[2] = g.AddConstant(gemm.name + "_C_bn", std::move(nc));
  gemm.attrs["beta"] = Attribute::Float(1.f);
  return true;
}

// The number of output channels of `p` when it can absorb a BN of type `dt`; 0 otherwise.
int64_t FoldableChannels(const Node& p, DataType dt) {
  if (!p.domain.empty() || p.outputs.size() != 1) return 0;
  if (p.op_type == "Conv") {
    const Value* w = p.input(1);
    if (!IsConstOf(w, dt) || w->const_value->rank() < 3 || w->const_value->dim(0) <= 0) return 0;
    const Value* b = p.input(2);
    if (b && (!IsConstOf(b, dt) || b->const_value->numel() != w->const_value->dim(0))) return 0;
    return w->const_value->dim(0);
  }
  if (p.op_type == "Gemm") {
    const Value* b = p.input(1);
    if (!IsConstOf(b, dt) || b->const_value->rank() != 2) return 0;
    const int64_t n = p.geti("transB", 0) ? b->const_value->dim(0) : b->const_value->dim(1);
    const Value* c = p.input(2);
    if (c && p.getf("beta", 1.f) != 0) {
      if (!IsConstOf(c, dt) || c->const_value->rank() > 2) return 0;
      const Tensor& ct = *c->const_value;
      if (ct.rank() >= 1 && ct.dim(-1) != 1 && ct.dim(-1) != n) return 0;
      if (ct.rank() == 2 && ct.dim(0) < 1) return 0;
    }
    return n;
  }
  return 0;
}

}  // namespace

Result<PassReport> FoldBatchNormPass(Graph& g, const PassOptions& o) {
  PassReport report;
  std::unordered_set<const Node*> folded;
  for (const auto& node_ptr : g.nodes()) {
    Node& bn = *node_ptr;
    if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || !bn.input(0) || !bn.output(0)) continue;
    Value* y = bn.inputs[0];
    Node* p = y->producer;
    const DataType dt = y->dtype;
    if (!p || !IsFloatType(dt) || IsGraphOutput(g, y) || Consumers(g, y).size() != 1) continue;
    const int64_t channels = FoldableChannels(*p, dt);
    if (channels <= 0) continue;
    // The channel axis of the BN is axis 1 of y.
    if (!y->has_shape || y->shape.size() < 2 || !y->shape[1].known() || y->shape[1].value != channels) continue;
    if (p->op_type == "Gemm" && y->shape.size() != 2) continue;
    auto affine = BatchNormAffine(g, bn, dt, channels);
    if (!affine) continue;
    if (p->op_type == "Conv")
      FoldIntoConv(g, *p, *affine, dt);
    else
      FoldIntoGemm(g, *p, *affine, dt);
    // The Conv/Gemm now writes the BN's output (keeping its name, even when it is a graph output).
    Value* z = bn.outputs[0];
    p->outputs[0] = z;
    z->producer = p;
    y->producer = nullptr;
    folded.insert(&bn);
    ++report.rewrites;
    report.details.push_back(fmt::format("folded {} into {}", bn.name, p->name));
  }
  if (!folded.empty()) RemoveNodes(g, [&](const Node* n) { return folded.count(n) != 0; });

  // The others (DenseNet's pre-activation BN over a concatenation, a BN after a pooling): a per-channel Mul and Add,
  // which fuse-pointwise joins with what follows (the ReLU) and the layout pass runs channels-last (a
  // BatchNormalization layer kept NCHW put two reformats around itself in NHWC networks).
  std::vector<Node*> order;
  for (const auto& n : g.nodes()) order.push_back(n.get());
  for (Node* bn : order) {
    if (bn->op_type != "BatchNormalization" || !bn->domain.empty() || !bn->input(0) || !bn->output(0)) continue;
    Value* x = bn->inputs[0];
    const DataType dt = x->dtype;
    if (!IsFloatType(dt) || !x->has_shape || x->shape.size() < 2 || !x->shape[1].known()) continue;
    const int64_t channels = x->shape[1].value;
    auto a = BatchNormAffine(g, *bn, dt, channels);
    if (!a) continue;
    std::vector<int64_t> pshape(x->shape.size() - 1, 1);
    pshape[0] = channels;
    Tensor sc(dt, pshape), sh(dt, pshape);
    for (int64_t c = 0; c < channels; ++c) {
      sc.SetFromDouble(c, a->s[c]);
      sh.SetFromDouble(c, a->t[c]);
    }
    size_t pos = 0;
    while (g.nodes()[pos].get() != bn) ++pos;
    const std::string name = bn->name;
    Node* mul = g.InsertNode(pos, "Mul", name + "/scale");
    mul->opset = 14;
    Value* scaled = g.AddValue(name + "_scaled");
    scaled->dtype = dt;
    scaled->shape = x->shape;
    scaled->has_shape = true;
    mul->inputs = {x, g.AddConstant(name + "/channel_scale", std::move(sc))};
    mul->outputs = {scaled};
    scaled->producer = mul;
    bn->op_type = "Add";
    bn->opset = 14;
    bn->attrs.clear();
    bn->inputs = {scaled, g.AddConstant(name + "/channel_shift", std::move(sh))};
    for (size_t i = 1; i < bn->outputs.size(); ++i)
      if (bn->outputs[i]) bn->outputs[i]->producer = nullptr;
    bn->outputs.resize(1);
    ++report.rewrites;
    report.details.push_back(fmt::format("{}: no Conv or Gemm to fold into; a per-channel Mul and Add", bn->Where()));
  }
  return report;
}

}  // namespace kiln
