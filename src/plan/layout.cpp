// Layout planning (see layout.h).
#include "plan/layout.h"

#include "ops/op_def.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "core/error.h"

namespace kiln {

namespace {

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};
// Where NCHW axis i sits in NHWC.
constexpr int64_t kNhwcAxisOf[4] = {0, 3, 1, 2};

// Runs unchanged in any layout (OpDef traits layout_neutral, or layout_neutral_scalar_params with every input
// but the first a scalar constant).
bool IsElementwise(const Node& n) {
  const OpTraits& t = TraitsOf(n);
  if (t.layout_neutral) return true;
  if (!t.layout_neutral_scalar_params || n.inputs.empty() || !n.input(0) || n.input(0)->is_const()) return false;
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    const Value* v = n.input(i);
    if (v && (!v->is_const() || v->const_value->numel() != 1)) return false;
  }
  return true;
}

bool IsReducedFloat(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

bool Rank4(const Value* v) { return v && v->has_shape && v->shape.size() == 4; }

bool SameShape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].known() != b[i].known()) return false;
    if (a[i].known() ? a[i].value != b[i].value : (a[i].sym.empty() || a[i].sym != b[i].sym)) return false;
  }
  return true;
}

Shape Permuted(const Shape& s, const std::vector<int64_t>& perm) {
  Shape r;
  for (int64_t p : perm) r.push_back(s[p]);
  return r;
}

// [N,C,1,1] with C known: NCHW and NHWC have the same memory order.
bool IsUnitSpatial(const Value* v) {
  return Rank4(v) && v->shape[1].known() && v->shape[2].known() && v->shape[2].value == 1 && v->shape[3].known() &&
         v->shape[3].value == 1;
}

// v is [N or 1, C or 1, 1, 1] and broadcasts into `out` [N, C, H, W] (known dims): per image and channel.
bool PerImageChannels(const Value* v, const Shape& out) {
  if (!IsUnitSpatial(v) || out.size() != 4) return false;
  for (int i = 0; i < 2; ++i) {
    const Dim& d = v->shape[i];
    if (d.known() && d.value == 1) continue;
    if (!(d.known() ? out[i].known() && out[i].value == d.value : d.same(out[i]))) return false;
  }
  return true;
}

// The axes of a Slice of a rank-4 NCHW tensor, as NHWC axes (0 -> 0, 1 -> 3, 2 -> 1, 3 -> 2), when its starts, ends,
// axes and steps are constants (axes absent: the first len(starts) axes).
std::optional<std::vector<int64_t>> SliceAxesNhwc(const Node& n) {
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (n.input(i) && !n.input(i)->is_const()) return std::nullopt;
  if (!n.input(1) || !n.input(2)) return std::nullopt;
  const int64_t k = n.input(1)->const_value->numel();
  std::vector<int64_t> axes(k);
  if (n.input(3)) {
    axes = n.input(3)->const_value->ToInt64Vector();
    if (static_cast<int64_t>(axes.size()) != k) return std::nullopt;
  } else {
    for (int64_t i = 0; i < k; ++i) axes[i] = i;
  }
  for (int64_t& a : axes) {
    if (a < -4 || a > 3) return std::nullopt;
    a = kNhwcAxisOf[a < 0 ? a + 4 : a];
  }
  return axes;
}

// Rewrites a Resize of a rank-4 NCHW tensor's per-axis operands (roi, scales, sizes: constants) or its axes
// attribute for the NHWC twin; false (and nothing changed) when they are not constants of the expected lengths.
bool ResizeParamsNhwc(Graph& g, Node& n) {
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (n.input(i) && !n.input(i)->is_const()) return false;
  if (n.has_attr("axes")) {
    std::vector<int64_t> axes = n.getints("axes", {});
    for (int64_t& a : axes) {
      if (a < -4 || a > 3) return false;
      a = kNhwcAxisOf[a < 0 ? a + 4 : a];
    }
    n.attrs["axes"] = Attribute::Ints(axes);
    return true;
  }
  // Per-axis operands in NCHW order: value j of the NHWC operand is value kToNhwc[j] of the NCHW one.
  auto permuted = [&](const Value* v, int64_t per_axis) -> std::optional<Tensor> {
    const Tensor& t = *v->const_value;
    if (t.rank() != 1 || t.numel() != 4 * per_axis) return std::nullopt;
    Tensor r(t.dtype(), t.shape());
    const size_t es = DataTypeSize(t.dtype());
    for (int64_t part = 0; part < per_axis; ++part)
      for (int64_t j = 0; j < 4; ++j)
        std::memcpy(static_cast<char*>(r.raw()) + (part * 4 + j) * es,
                    static_cast<const char*>(t.raw()) + (part * 4 + kToNhwc[j]) * es, es);
    return r;
  };
  std::vector<std::pair<size_t, Tensor>> updates;
  const int64_t per_axis[4] = {0, 2, 1, 1};  // roi: starts then ends
  for (size_t i = 1; i < n.inputs.size() && i < 4; ++i) {
    const Value* v = n.input(i);
    if (!v || v->const_value->numel() == 0) continue;  // omitted, or the empty placeholder of older exporters
    auto t = permuted(v, per_axis[i]);
    if (!t) return false;
    updates.emplace_back(i, std::move(*t));
  }
  for (auto& [i, t] : updates) n.inputs[i] = g.AddConstant(n.inputs[i]->name + "_nhwc", std::move(t));
  return true;
}

// Symmetric explicit pads (or none / VALID): the cuDNN NHWC path needs no zero-padding copy.
bool SymmetricPads(const Node& n) {
  const std::string ap = n.gets("auto_pad", "NOTSET");
  if (ap == "VALID") return true;
  if (ap != "NOTSET" && !ap.empty()) return false;
  const std::vector<int64_t> pads = n.getints("pads", {0, 0, 0, 0});
  if (pads.size() != 4) return false;
  return pads[0] == pads[2] && pads[1] == pads[3];
}

bool IsConv2d(const Node& n, const LayoutOptions& o) {
  const bool conv = (n.domain.empty() && n.op_type == "Conv") || (n.domain == "kiln" && n.op_type == "FusedConv");
  if (!conv || n.has_attr("kiln_layout")) return false;
  const Value* x = n.input(0);
  const Value* w = n.input(1);
  if (!Rank4(x) || !w || !w->is_const() || w->const_value->rank() != 4) return false;
  if (!(IsReducedFloat(x->dtype) || (o.float32 && x->dtype == DataType::kFloat32))) return false;
  if (n.input(2) && !n.input(2)->is_const()) return false;
  if (n.input(3) && (n.input(3)->is_const() || !Rank4(n.input(3)))) return false;  // FusedConv's residual
  if (o.channel_multiple > 1 && (!x->shape[1].known() || x->shape[1].value % o.channel_multiple != 0)) return false;
  if (n.outputs.size() != 1 || !Rank4(n.output(0))) return false;
  return SymmetricPads(n);
}

// kiln.QConv (ops/quantized_ops.h) with int8 input of zero point 0 (so that zero padding is the zero point),
// ungrouped, 2-D, symmetric pads: the int8 tensor-core convolution reads NHWC with channels a multiple of 16.
constexpr int64_t kInt8ChannelMultiple = 16;
bool IsQConv2d(const Node& n) {
  if (n.domain != "kiln" || n.op_type != "QConv" || n.has_attr("kiln_layout")) return false;
  const Value* x = n.input(0);
  const Value* w = n.input(1);
  if (!Rank4(x) || x->dtype != DataType::kInt8 || !w || !w->is_const() || w->const_value->rank() != 4) return false;
  if (n.geti("kiln_x_zero_point", 0) != 0 || n.geti("group", 1) != 1) return false;
  if (n.input(2) && !n.input(2)->is_const()) return false;
  if (n.input(3) && (n.input(3)->is_const() || !Rank4(n.input(3)))) return false;
  const int64_t c = w->const_value->dim(1);
  if (!x->shape[1].known() || x->shape[1].value != c) return false;
  if (c % kInt8ChannelMultiple != 0 && c > kInt8ChannelMultiple) return false;
  if (n.outputs.size() != 1 || !Rank4(n.output(0))) return false;
  return SymmetricPads(n);
}

// The permutation of a rank-4 default-domain Transpose with one output (its default reverses the axes).
std::optional<std::vector<int64_t>> TransposePerm(const Node& n) {
  if (!n.domain.empty() || n.op_type != "Transpose" || n.inputs.size() != 1 || n.outputs.size() != 1 ||
      !Rank4(n.input(0)) || !Rank4(n.output(0)))
    return std::nullopt;
  std::vector<int64_t> p = n.getints("perm", {3, 2, 1, 0});
  if (p.size() != 4) return std::nullopt;
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != std::vector<int64_t>{0, 1, 2, 3}) return std::nullopt;
  return p;
}

// W [K, C, kh, kw] with axis 1 zero-extended to c channels.
Tensor PadAxis1(const Tensor& w, int64_t c) {
  std::vector<int64_t> shape = w.shape();
  const int64_t k = shape[0], c0 = shape[1];
  shape[1] = c;
  Tensor r(w.dtype(), shape);  // zero-filled
  const size_t inner = static_cast<size_t>(NumElements(w.shape()) / std::max<int64_t>(k * c0, 1)) * DataTypeSize(w.dtype());
  const char* src = static_cast<const char*>(w.raw());
  char* dst = static_cast<char*>(r.raw());
  for (int64_t i = 0; i < k; ++i) std::memcpy(dst + i * c * inner, src + i * c0 * inner, c0 * inner);
  return r;
}

}  // namespace

std::vector<int64_t> NchwToNhwc(const std::vector<int64_t>& s) {
  return s.size() == 4 ? std::vector<int64_t>{s[0], s[2], s[3], s[1]} : s;
}
std::vector<int64_t> NhwcToNchw(const std::vector<int64_t>& s) {
  return s.size() == 4 ? std::vector<int64_t>{s[0], s[3], s[1], s[2]} : s;
}

Tensor PermuteTensor(const Tensor& t, const std::vector<int64_t>& perm) {
  const std::vector<int64_t>& in = t.shape();
  const size_t rank = in.size();
  std::vector<int64_t> out(rank), in_strides(rank, 1), src_strides(rank);
  for (size_t i = rank; i-- > 1;) in_strides[i - 1] = in_strides[i] * in[i];
  for (size_t i = 0; i < rank; ++i) {
    out[i] = in[perm[i]];
    src_strides[i] = in_strides[perm[i]];
  }
  Tensor r(t.dtype(), out);
  const size_t es = DataTypeSize(t.dtype());
  const int64_t total = r.numel();
  if (total == 0) return r;
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(r.raw());
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < total; ++i) {
    std::memcpy(dst + i * es, src + off * es, es);
    for (size_t d = rank; d-- > 0;) {  // odometer over the output dims
      off += src_strides[d];
      if (++idx[d] < out[d]) break;
      off -= src_strides[d] * out[d];
      idx[d] = 0;
    }
  }
  return r;
}

Result<LayoutReport> AssignLayout(Graph& g, const LayoutOptions& opts) {
  LayoutReport rep;
  std::vector<std::unique_ptr<Node>> old_nodes;
  old_nodes.swap(g.mutable_nodes());
  std::vector<std::unique_ptr<Node>>& out_nodes = g.mutable_nodes();
  const int64_t opset = g.opsets.count("") ? g.opsets.at("") : 18;
  int fresh = 0;

  std::map<const Value*, Value*> nhwc;    // NCHW value -> its NHWC twin
  std::set<const Value*> moved;           // NCHW values whose producer now writes only the twin
  std::map<const Value*, Value*> consts;  // constant -> its permuted copy

  auto add_node = [&](const std::string& op, const std::string& tag, Value* in, Value* out) -> Node* {
    auto node = std::make_unique<Node>();
    node->name = fmt::format("kiln_{}_{}_{}", tag, fresh++, in->name);
    node->op_type = op;
    node->opset = opset;
    node->inputs = {in};
    node->outputs = {out};
    out->producer = node.get();
    Node* raw = node.get();
    out_nodes.push_back(std::move(node));
    return raw;
  };
  // A Reshape of `in` to `target` (0 copies the input's dim).
  auto add_reshape = [&](Value* in, Value* out, std::vector<int64_t> target) {
    Node* r = add_node("Reshape", "view", in, out);
    r->inputs.push_back(g.AddConstant(in->name + "_view_shape", Tensor::FromInt64(target)));
    ++rep.views_inserted;
  };
  auto new_twin = [&](Value* v) {
    Value* t = g.AddValue(v->name + "_nhwc");
    t->dtype = v->dtype;
    t->has_shape = v->has_shape;
    if (Rank4(v)) t->shape = Permuted(v->shape, kToNhwc);
    return t;
  };
  // The NHWC twin of v, inserting the reformat when there is none yet.
  auto to_nhwc = [&](Value* v) -> Value* {
    if (auto it = nhwc.find(v); it != nhwc.end()) return it->second;
    Value* t = new_twin(v);
    if (IsUnitSpatial(v)) {
      add_reshape(v, t, {0, 1, 1, v->shape[1].value});
    } else {
      add_node("Transpose", "to_nhwc", v, t)->attrs["perm"] = Attribute::Ints(kToNhwc);
      ++rep.reformats_inserted;
    }
    nhwc[v] = t;
    return t;
  };
  // Makes v (moved to NHWC) available in NCHW again, once.
  auto to_nchw = [&](Value* v) {
    if (!v || !moved.count(v)) return;
    moved.erase(v);
    Value* t = nhwc.at(v);
    if (IsUnitSpatial(v)) {
      add_reshape(t, v, {0, v->shape[1].value, 1, 1});
    } else {
      add_node("Transpose", "to_nchw", t, v)->attrs["perm"] = Attribute::Ints(kToNchw);
      ++rep.reformats_inserted;
    }
  };
  // Output 0 of n now writes the NHWC twin of its old value.
  auto move_output = [&](Node& n) {
    Value* y = n.outputs[0];
    Value* t = new_twin(y);
    t->producer = &n;
    n.outputs[0] = t;
    y->producer = nullptr;
    nhwc[y] = t;
    moved.insert(y);
  };
  // Constant operand of an elementwise node in NHWC: scalars stay, others are lifted to rank 4 and permuted.
  auto permuted_const = [&](Value* c) -> Value* {
    const Tensor& t = *c->const_value;
    if (t.numel() == 1) return c;
    if (auto it = consts.find(c); it != consts.end()) return it->second;
    std::vector<int64_t> lifted(4 - t.rank(), 1);
    lifted.insert(lifted.end(), t.shape().begin(), t.shape().end());
    Value* r = g.AddConstant(c->name + "_nhwc", PermuteTensor(t.Reshaped(lifted), kToNhwc));
    consts[c] = r;
    return r;
  };

  // The NHWC value v with its channels zero-padded to c (once per value), and padded weights (once per W).
  std::map<std::pair<const Value*, int64_t>, Value*> padded;
  std::map<const Value*, Value*> padded_weights;
  auto pad_channels = [&](Value* v, int64_t c) -> Value* {
    if (auto it = padded.find({v, c}); it != padded.end()) return it->second;
    Value* t = g.AddValue(fmt::format("{}_c{}", v->name, c));
    t->dtype = v->dtype;
    t->has_shape = true;
    t->shape = v->shape;
    t->shape[3] = Dim(c);
    Node* p = add_node("Pad", "pad_channels", v, t);
    const std::vector<int64_t> pads = {0, 0, 0, 0, 0, 0, 0, c - v->shape[3].value};
    if (opset >= 11) p->inputs.push_back(g.AddConstant(t->name + "_pads", Tensor::FromInt64(pads)));
    else p->attrs["pads"] = Attribute::Ints(pads);
    padded[{v, c}] = t;
    return t;
  };

  // Values that are another value exactly (a Transpose undoing a reformat): readers read the other one.
  std::map<const Value*, Value*> same;

  for (auto& np : old_nodes) {
    Node& n = *np;
    for (Value*& v : n.inputs)
      if (auto it = same.find(v); it != same.end()) v = it->second;
    // The model's own Transposes next to NHWC values (ConvNeXt's permutes around its LayerNorms and MLPs):
    //   Transpose(v, p) where v has the NHWC twin t  ==>  Transpose(t, kToNchw o p), nothing when that is the
    //   identity ([0,2,3,1] of a moved value is its twin);
    //   Transpose(v, [0,3,1,2]) of a plain rank-4 v  ==>  nothing: v is the NHWC twin of the result, which gets
    //   its NCHW form only where a reader needs one.
    if (auto p = TransposePerm(n)) {
      Value* v = n.inputs[0];
      Value* y = n.outputs[0];
      if (nhwc.count(v)) {
        std::vector<int64_t> q(4);
        for (size_t j = 0; j < 4; ++j) q[j] = kToNchw[(*p)[j]];
        Value* t = nhwc.at(v);
        if (q == std::vector<int64_t>{0, 1, 2, 3} && !y->is_graph_output) {
          same[y] = t;
          y->producer = nullptr;
          ++rep.transposes_absorbed;
          continue;  // the node goes
        }
        n.inputs[0] = t;
        n.attrs["perm"] = Attribute::Ints(q);
        out_nodes.push_back(std::move(np));
        continue;
      }
      if (*p == kToNchw && !v->is_const()) {
        y->producer = nullptr;
        nhwc[y] = v;
        moved.insert(y);
        ++rep.transposes_absorbed;
        continue;  // the node goes; to_nchw makes y where a reader needs it
      }
    }
    bool rewritten = false;
    const bool qconv = IsQConv2d(n);
    if (qconv || (opts.float_convs && IsConv2d(n, opts))) {
      n.inputs[0] = to_nhwc(n.inputs[0]);
      const Value* w = n.input(1);
      const int64_t c = w->const_value->dim(1);
      const int64_t pad_to = qconv ? (c % kInt8ChannelMultiple == 0 ? 0 : kInt8ChannelMultiple) : opts.pad_channels;
      // (Pad-1 names its attribute differently: no padding in opset-1 graphs.)
      if (pad_to > 0 && c < pad_to && n.geti("group", 1) == 1 && opset >= 2 && n.inputs[0]->shape[3].known() &&
          n.inputs[0]->shape[3].value == c) {
        n.inputs[0] = pad_channels(n.inputs[0], pad_to);
        auto& pw = padded_weights[w];
        if (!pw) pw = g.AddConstant(w->name + "_cpad", PadAxis1(*w->const_value, pad_to));
        n.inputs[1] = pw;
        ++rep.channels_padded;
      }
      if (n.input(3)) n.inputs[3] = to_nhwc(n.inputs[3]);  // the residual has Y's layout
      n.attrs["kiln_layout"] = Attribute::String("NHWC");
      move_output(n);
      ++rep.convs_nhwc;
      rewritten = true;
    } else if (IsElementwise(n) && n.outputs.size() == 1 && Rank4(n.output(0))) {
      const Shape& os = n.output(0)->shape;
      bool ok = true, any = false;
      for (Value* v : n.inputs) {
        if (!v) continue;
        if (v->is_const()) {
          ok &= v->const_value->rank() <= 4;
        } else if (nhwc.count(v) && SameShape(v->shape, os)) {
          any = true;
        } else if (!PerImageChannels(v, os)) {
          ok = false;
        }
      }
      if (ok && any) {
        for (Value*& v : n.inputs) {
          if (!v) continue;
          // A per-image, per-channel operand [N, C, 1, 1] (squeeze-excitation's scale) reads as its [N, 1, 1, C]
          // view, which broadcasts over NHWC's H and W the same way.
          v = v->is_const() ? permuted_const(v) : to_nhwc(v);
        }
        move_output(n);
        ++rep.nodes_nhwc;
        rewritten = true;
      }
    } else if (n.domain.empty() && (n.op_type == "MaxPool" || n.op_type == "AveragePool") &&
               !n.has_attr("kiln_layout") && nhwc.count(n.input(0)) && Rank4(n.input(0)) &&
               (n.outputs.size() == 1 || !n.output(1)) && Rank4(n.output(0))) {
      n.inputs[0] = nhwc.at(n.inputs[0]);
      n.attrs["kiln_layout"] = Attribute::String("NHWC");
      move_output(n);
      ++rep.nodes_nhwc;
      rewritten = true;
    } else if (n.domain.empty() && (n.op_type == "GlobalAveragePool" || n.op_type == "GlobalMaxPool") &&
               nhwc.count(n.input(0)) && Rank4(n.input(0)) && Rank4(n.output(0))) {
      n.op_type = n.op_type == "GlobalAveragePool" ? "ReduceMean" : "ReduceMax";
      n.opset = std::max<int64_t>(opset, 18);
      n.inputs = {nhwc.at(n.inputs[0]), g.AddConstant(n.name + "_axes", Tensor::FromInt64({1, 2}))};
      n.attrs.clear();
      n.attrs["keepdims"] = Attribute::Int(1);
      move_output(n);
      ++rep.nodes_nhwc;
      rewritten = true;
    } else if (n.domain.empty() && n.op_type == "Slice" && n.outputs.size() == 1 && Rank4(n.output(0)) &&
               Rank4(n.input(0)) && nhwc.count(n.input(0)) && SliceAxesNhwc(n)) {
      // YOLOv8's C2f chunk: a slice over channels is a slice over NHWC's last axis.
      const std::vector<int64_t> axes = *SliceAxesNhwc(n);
      n.inputs[0] = nhwc.at(n.inputs[0]);
      if (n.inputs.size() < 4) n.inputs.resize(4, nullptr);
      // In the starts' integer type: ONNX wants starts, ends, axes and steps of one type.
      n.inputs[3] = g.AddConstant(n.name + "_axes_nhwc",
                                  CastTensor(Tensor::FromInt64(axes), n.input(1)->const_value->dtype()));
      move_output(n);
      ++rep.nodes_nhwc;
      rewritten = true;
    } else if (n.domain.empty() && n.op_type == "Resize" && n.outputs.size() == 1 && Rank4(n.output(0)) &&
               Rank4(n.input(0)) && nhwc.count(n.input(0)) && ResizeParamsNhwc(g, n)) {
      // The FPN's upsampling (YOLO, detection necks): Resize works on any axes, so its per-axis operands (or its
      // axes attribute) are permuted to NHWC's order.
      n.inputs[0] = nhwc.at(n.inputs[0]);
      move_output(n);
      ++rep.nodes_nhwc;
      rewritten = true;
    } else if (n.domain.empty() && n.op_type == "Concat" && Rank4(n.output(0)) &&
               (n.geti("axis", 0) == 1 || n.geti("axis", 0) == -3) && !n.inputs.empty()) {
      bool ok = true;
      for (Value* v : n.inputs) ok &= v && !v->is_const() && nhwc.count(v) && Rank4(v);
      if (ok) {
        for (Value*& v : n.inputs) v = nhwc.at(v);
        n.attrs["axis"] = Attribute::Int(3);
        move_output(n);
        ++rep.nodes_nhwc;
        rewritten = true;
      }
    }
    if (!rewritten)
      for (Value* v : n.inputs) to_nchw(v);
    out_nodes.push_back(std::move(np));
  }
  for (Value* o : g.outputs) to_nchw(o);
  // Converting each convolution on its own would put a reformat before and after every one.
  rep.reformats_eliminated = std::max(0, 2 * rep.convs_nhwc - rep.reformats_inserted);
  if (rep.convs_nhwc > 0)
    rep.details.push_back(fmt::format("{} convolution(s) and {} other layer(s) in NHWC; {} reformat(s) and {} view(s) "
                                      "inserted, {} per-layer reformat(s) avoided, {} of the model's Transposes "
                                      "absorbed",
                                      rep.convs_nhwc, rep.nodes_nhwc, rep.reformats_inserted, rep.views_inserted,
                                      rep.reformats_eliminated, rep.transposes_absorbed));
  if (rep.channels_padded > 0)
    rep.details.push_back(fmt::format("{} convolution input(s) zero-padded to {} channels (int8 ones to {})",
                                      rep.channels_padded, opts.pad_channels, kInt8ChannelMultiple));
  return rep;
}

}  // namespace kiln
