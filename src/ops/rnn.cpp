// The recurrent ops RNN, GRU and LSTM (opset 7; 14 added `layout`; 22 only added bfloat16): their attributes
// (ops/rnn.h) and their shape function. Inputs: X, W, R, B, sequence_lens, initial_h (and LSTM's initial_c, P);
// outputs Y, Y_h (and LSTM's Y_c), any of them omitted.
//   layout 0: X [seq, batch, input], Y [seq, dirs, batch, hidden], initial_h / Y_h / Y_c [dirs, batch, hidden]
//   layout 1: X [batch, seq, input], Y [batch, seq, dirs, hidden], initial_h / Y_h / Y_c [batch, dirs, hidden]
//   W [dirs, gates*hidden, input], R [dirs, gates*hidden, hidden], B [dirs, 2*gates*hidden], sequence_lens [batch],
//   P [dirs, 3*hidden].
#include "ops/rnn.h"

#include <cctype>
#include <string>

#include "core/error.h"
#include "ops/families.h"

namespace kiln {
namespace {

struct ActivationName {
  const char* name;
  RnnActivationKind kind;
  bool takes_alpha, takes_beta;
  double alpha, beta;  // the ONNX operator's defaults
};
constexpr ActivationName kActivations[] = {
    {"Relu", RnnActivationKind::kRelu, false, false, 0, 0},
    {"Tanh", RnnActivationKind::kTanh, false, false, 0, 0},
    {"Sigmoid", RnnActivationKind::kSigmoid, false, false, 0, 0},
    {"Affine", RnnActivationKind::kAffine, true, true, 1.0, 0.0},
    {"LeakyRelu", RnnActivationKind::kLeakyRelu, true, false, 0.01, 0},
    {"ThresholdedRelu", RnnActivationKind::kThresholdedRelu, true, false, 1.0, 0},
    {"ScaledTanh", RnnActivationKind::kScaledTanh, true, true, 1.0, 1.0},
    {"HardSigmoid", RnnActivationKind::kHardSigmoid, true, true, 0.2, 0.5},
    {"Elu", RnnActivationKind::kElu, true, false, 1.0, 0},
    {"Softsign", RnnActivationKind::kSoftsign, false, false, 0, 0},
    {"Softplus", RnnActivationKind::kSoftplus, false, false, 0, 0},
};

bool SameNoCase(const std::string& a, const char* b) {
  size_t i = 0;
  for (; i < a.size() && b[i]; ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return i == a.size() && !b[i];
}

Status ReadActivations(const Node& n, RnnAttrs& a) {
  std::vector<std::string> names;
  if (auto it = n.attrs.find("activations"); it != n.attrs.end()) {
    if (it->second.kind == Attribute::Kind::kStrings) names = it->second.strings;
    else if (it->second.kind == Attribute::Kind::kString) names = {it->second.s};
    else
      return Err(StatusCode::kInvalidModel, "{}: attribute 'activations' must be a list of strings, but it is {}",
                 n.Where(), AttributeKindName(it->second.kind));
  }
  const auto per_dir = static_cast<size_t>(a.activations_per_direction);
  const auto dirs = static_cast<size_t>(a.num_directions);
  if (names.empty()) {
    static const char* kDefaults[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    for (size_t d = 0; d < dirs; ++d)
      for (size_t k = 0; k < per_dir; ++k) names.push_back(kDefaults[per_dir - 1][k]);
  } else if (names.size() != per_dir && names.size() != per_dir * dirs) {
    return Err(StatusCode::kInvalidModel,
               "{}: 'activations' lists {} functions, but this {} takes {} ({} per direction{})", n.Where(),
               names.size(), n.op_type, per_dir * dirs, per_dir,
               dirs == 2 ? "; or list one direction's and both use them" : "");
  }
  KILN_ASSIGN_OR_RETURN(std::vector<float> alphas, n.attr_floats("activation_alpha"));
  KILN_ASSIGN_OR_RETURN(std::vector<float> betas, n.attr_floats("activation_beta"));
  size_t next_alpha = 0, next_beta = 0;
  a.activations.clear();
  for (const std::string& name : names) {
    const ActivationName* found = nullptr;
    for (const ActivationName& c : kActivations)
      if (SameNoCase(name, c.name)) found = &c;
    if (!found)
      return Err(StatusCode::kInvalidModel,
                 "{}: unknown activation '{}' (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, "
                 "HardSigmoid, Elu, Softsign, Softplus)",
                 n.Where(), name);
    RnnActivation act;
    act.kind = found->kind;
    act.alpha = found->alpha;
    act.beta = found->beta;
    if (found->takes_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (found->takes_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    a.activations.push_back(act);
  }
  if (a.activations.size() < per_dir * dirs)  // one direction's list: the reverse direction repeats it
    a.activations.insert(a.activations.end(), a.activations.begin(), a.activations.end());
  return Status::Ok();
}

// One dim of an input's expected shape: `factor` times a quantity (seq_length, hidden_size...) that the checks
// learn as they go (unknown, symbolic, or known).
struct DimRule {
  const char* name;
  int64_t factor;
  Dim* value;
};

std::string DescribeRules(const std::vector<DimRule>& rules) {
  std::string s = "[";
  for (size_t i = 0; i < rules.size(); ++i) {
    if (i) s += ", ";
    if (rules[i].factor != 1) s += std::to_string(rules[i].factor) + "*";
    s += rules[i].name;
    if (rules[i].value->known()) s += "=" + std::to_string(rules[i].factor * rules[i].value->value);
  }
  return s + "]";
}

// Checks input i against its rules (when present and of known rank) and learns the quantities it fixes.
Status CheckInput(const InferContext& ctx, size_t i, const char* what, const std::vector<DimRule>& rules) {
  if (!ctx.has_input(i) || !ctx.in(i).has_shape) return Status::Ok();
  const Shape& s = ctx.in(i).shape;
  auto mismatch = [&] {
    return Err(StatusCode::kInvalidModel, "{}: {} (input {}) must have shape {}, but its shape is {}", ctx.node.Where(),
               what, i, DescribeRules(rules), ShapeToString(s));
  };
  if (s.size() != rules.size()) return mismatch();
  for (size_t k = 0; k < rules.size(); ++k) {
    const Dim& d = s[k];
    Dim& v = *rules[k].value;
    const int64_t f = rules[k].factor;
    if (d.known()) {
      if (d.value % f != 0 || (v.known() && v.value * f != d.value)) return mismatch();
      if (!v.known()) v = Dim(d.value / f);
    } else if (f == 1 && d.symbolic() && v.unknown()) {
      v = d;
    }
  }
  return Status::Ok();
}

bool IsRnnFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kFloat64 || t == DataType::kBFloat16;
}

Status RnnShape(InferContext& ctx) {
  const Node& n = ctx.node;
  KILN_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  KILN_ASSIGN_OR_RETURN(RnnAttrs a, ReadRnnAttrs(n));
  if (n.inputs.size() > a.max_inputs() || n.outputs.size() > a.max_outputs())
    return Err(StatusCode::kInvalidModel, "{}: {} takes at most {} inputs and {} outputs, but the node has {} and {}",
               n.Where(), n.op_type, a.max_inputs(), a.max_outputs(), n.inputs.size(), n.outputs.size());
  static const char* kNames[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  const DataType t = ctx.in(0).dtype;
  if (!IsRnnFloat(t))
    return Err(StatusCode::kInvalidModel, "{}: X must be float16, bfloat16, float32 or float64, but it is {}",
               n.Where(), DataTypeName(t));
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i) || i == 4) continue;
    if (ctx.in(i).dtype != t)
      return Err(StatusCode::kInvalidModel, "{}: {} (input {}) must have X's element type {}, but it is {}", n.Where(),
                 kNames[i], i, DataTypeName(t), DataTypeName(ctx.in(i).dtype));
  }
  if (ctx.has_input(4) && ctx.in(4).dtype != DataType::kInt32 && ctx.in(4).dtype != DataType::kInt64)
    return Err(StatusCode::kInvalidModel, "{}: sequence_lens (input 4) must be int32, but it is {}", n.Where(),
               DataTypeName(ctx.in(4).dtype));

  Dim seq, batch, input, hidden, dirs(a.num_directions);
  if (a.hidden_size > 0) hidden = Dim(a.hidden_size);
  const bool bl = a.layout == 1;  // batch first
  std::vector<DimRule> x_rules = {{"seq_length", 1, &seq}, {"batch_size", 1, &batch}, {"input_size", 1, &input}};
  if (bl) std::swap(x_rules[0], x_rules[1]);
  std::vector<DimRule> state_rules = {{"num_directions", 1, &dirs}, {"batch_size", 1, &batch},
                                      {"hidden_size", 1, &hidden}};
  if (bl) std::swap(state_rules[0], state_rules[1]);
  const int64_t g = a.gates;
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 0, "X", x_rules));
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 2, "R", {{"num_directions", 1, &dirs}, {"hidden_size", g, &hidden},
                                                {"hidden_size", 1, &hidden}}));
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, "W", {{"num_directions", 1, &dirs}, {"hidden_size", g, &hidden},
                                                {"input_size", 1, &input}}));
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 3, "B", {{"num_directions", 1, &dirs}, {"hidden_size", 2 * g, &hidden}}));
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 4, "sequence_lens", {{"batch_size", 1, &batch}}));
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 5, "initial_h", state_rules));
  if (a.op == RnnOp::kLstm) {
    KILN_RETURN_IF_ERROR(CheckInput(ctx, 6, "initial_c", state_rules));
    KILN_RETURN_IF_ERROR(CheckInput(ctx, 7, "P", {{"num_directions", 1, &dirs}, {"hidden_size", 3, &hidden}}));
  }
  // Every length must lie in [0, seq_length] (known at run time; at build time when constant).
  if (const Tensor* lens = ctx.value(4)) {
    for (int64_t b = 0; b < lens->numel(); ++b) {
      const int64_t len = lens->GetAsInt(b);
      if (len < 0 || (seq.known() && len > seq.value))
        return Err(StatusCode::kInvalidArgument, "{}: sequence_lens[{}] is {}, outside [0, seq_length = {}]",
                   n.Where(), b, len, seq.ToString());
    }
  }

  if (n.output(0)) {
    if (bl) ctx.set_output(0, t, {batch, seq, dirs, hidden});
    else ctx.set_output(0, t, {seq, dirs, batch, hidden});
  }
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    if (!n.output(i)) continue;
    if (bl) ctx.set_output(i, t, {batch, dirs, hidden});
    else ctx.set_output(i, t, {dirs, batch, hidden});
  }
  return Status::Ok();
}

}  // namespace

Result<RnnAttrs> ReadRnnAttrs(const Node& n) {
  RnnAttrs a;
  if (n.op_type == "RNN") {
    a.op = RnnOp::kRnn, a.gates = 1, a.activations_per_direction = 1;
  } else if (n.op_type == "GRU") {
    a.op = RnnOp::kGru, a.gates = 3, a.activations_per_direction = 2;
  } else if (n.op_type == "LSTM") {
    a.op = RnnOp::kLstm, a.gates = 4, a.activations_per_direction = 3;
  } else {
    return Err(StatusCode::kInternal, "{}: not a recurrent op", n.Where());
  }
  KILN_ASSIGN_OR_RETURN(std::string direction, n.attr_string("direction", "forward"));
  if (direction == "bidirectional") a.num_directions = 2;
  else if (direction == "reverse") a.reverse = true;
  else if (direction != "forward")
    return Err(StatusCode::kInvalidModel, "{}: direction must be forward, reverse or bidirectional, not '{}'",
               n.Where(), direction);
  KILN_ASSIGN_OR_RETURN(a.hidden_size, n.attr_int("hidden_size", -1));
  if (n.has_attr("hidden_size") && a.hidden_size <= 0)
    return Err(StatusCode::kInvalidModel, "{}: hidden_size must be positive, but it is {}", n.Where(), a.hidden_size);
  KILN_ASSIGN_OR_RETURN(a.layout, n.attr_int("layout", 0));
  if (a.layout != 0 && a.layout != 1)
    return Err(StatusCode::kInvalidModel, "{}: layout must be 0 or 1, but it is {}", n.Where(), a.layout);
  if (n.has_attr("clip")) {
    KILN_ASSIGN_OR_RETURN(float clip, n.attr_float("clip", 0.f));
    if (!(clip > 0))
      return Err(StatusCode::kInvalidModel, "{}: clip must be a positive threshold, but it is {}", n.Where(), clip);
    a.clip = clip;
  }
  if (a.op == RnnOp::kGru) {
    KILN_ASSIGN_OR_RETURN(int64_t lbr, n.attr_int("linear_before_reset", 0));
    a.linear_before_reset = lbr != 0;
  }
  if (a.op == RnnOp::kLstm) {
    KILN_ASSIGN_OR_RETURN(int64_t input_forget, n.attr_int("input_forget", 0));
    a.input_forget = input_forget != 0;
  }
  KILN_RETURN_IF_ERROR(ReadActivations(n, a));
  return a;
}

void RegisterRnnOps(OpRegistry& r) {
  // Versions 14 (layout) and 22 (bfloat16) only add to version 7: one definition covers them all. Versions
  // before 7 (output_sequence) are refused at import (onnx/legacy_opsets.cpp).
  r.Onnx("RNN").Since(7).Shape(RnnShape);
  r.Onnx("GRU").Since(7).Shape(RnnShape);
  r.Onnx("LSTM").Since(7).Shape(RnnShape);
}

}  // namespace kiln
