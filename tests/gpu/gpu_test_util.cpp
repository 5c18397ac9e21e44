#include "gpu_test_util.h"

#include <cmath>
#include <cstdlib>
#include <random>

#include "backends/cpu/executor.h"
#include "backends/cuda/graph_runner.h"
#include "ops/infer.h"

namespace kiln::gputest {

Tensor Random(DataType dtype, const std::vector<int64_t>& shape, uint32_t seed, double lo, double hi) {
  Tensor t(dtype, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = u(rng);
    if (dtype == DataType::kBool) v = v > (lo + hi) / 2 ? 1 : 0;
    else if (!IsFloatType(dtype)) v = std::round(v);
    t.SetFromDouble(i, v);
  }
  return t;
}

Tensor FromValues(DataType dtype, const std::vector<int64_t>& shape, const std::vector<double>& values) {
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.numel() && i < static_cast<int64_t>(values.size()); ++i) t.SetFromDouble(i, values[i]);
  return t;
}

OneNode::OneNode(std::string op_type, std::string domain) : op_(std::move(op_type)), domain_(std::move(domain)) {}
OneNode& OneNode::Input(Tensor t) { inputs_.emplace_back(std::move(t)); is_const_.push_back(false); return *this; }
OneNode& OneNode::Const(Tensor t) { inputs_.emplace_back(std::move(t)); is_const_.push_back(true); return *this; }
OneNode& OneNode::Omitted() { inputs_.emplace_back(std::nullopt); is_const_.push_back(false); return *this; }
OneNode& OneNode::Attr(const std::string& name, Attribute a) { attrs_[name] = std::move(a); return *this; }
OneNode& OneNode::Outputs(int n) { outputs_ = n; return *this; }
OneNode& OneNode::ReferenceInFloat32() { ref_f32_ = true; return *this; }
OneNode& OneNode::Tactic(std::string t) { tactic_ = std::move(t); return *this; }
OneNode& OneNode::IntegersOneOff(double fraction) { one_off_fraction_ = fraction; return *this; }
OneNode& OneNode::Float8ByValue() { f8_by_value_ = true; return *this; }
OneNode& OneNode::NoTF32() { tf32_ = false; return *this; }
OneNode& OneNode::Opset(int64_t opset) { opset_ = opset; return *this; }
OneNode& OneNode::Repeat(int n) { repeat_ = n; return *this; }

namespace {

bool IsLowFloat(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

// The graph with the given input tensors; `to_f32` converts FP16/BF16 inputs (runtime and constant) to float32.
Result<std::unique_ptr<Graph>> BuildGraph(const std::string& op, const std::string& domain,
                                          const std::vector<std::optional<Tensor>>& inputs,
                                          const std::vector<bool>& is_const,
                                          const std::map<std::string, Attribute>& attrs, int outputs, bool to_f32,
                                          std::map<std::string, Tensor>* feeds, int64_t opset) {
  auto g = std::make_unique<Graph>();
  g->opsets[""] = opset;
  g->opsets["kiln"] = 1;
  Node* n = g->AddNode(op, "node0");
  n->domain = domain;
  n->opset = domain.empty() ? opset : 1;
  n->attrs = attrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      n->inputs.push_back(nullptr);
      continue;
    }
    Tensor t = *inputs[i];
    if (to_f32 && IsLowFloat(t.dtype())) t = CastTensor(t, DataType::kFloat32);
    const std::string name = "in" + std::to_string(i);
    Value* v;
    if (is_const[i]) {
      v = g->AddConstant(name, t);
    } else {
      v = g->GetOrAddValue(name);
      v->dtype = t.dtype();
      v->shape = FromStatic(t.shape());
      v->has_shape = true;
      v->is_graph_input = true;
      g->inputs.push_back(v);
      (*feeds)[name] = t;
    }
    n->inputs.push_back(v);
  }
  for (int i = 0; i < outputs; ++i) {
    Value* o = g->GetOrAddValue("out" + std::to_string(i));
    o->producer = n;
    o->is_graph_output = true;
    n->outputs.push_back(o);
    g->outputs.push_back(o);
  }
  KILN_RETURN_IF_ERROR(InferGraph(*g, InferOptions{}));
  return g;
}

// Integers match exactly, but for up to `one_off_fraction` of them, which may differ by one step.
// Float8 outputs compare by code, or by value (decoded, as other floats) with `f8_by_value`.
::testing::AssertionResult Compare(const std::string& name, const Tensor& cpu_in, const Tensor& gpu_in, double atol,
                                   double rtol, bool to_f32, double one_off_fraction, bool f8_by_value) {
  Tensor gpu = gpu_in, cpu = cpu_in;
  if (to_f32 && IsLowFloat(gpu.dtype())) gpu = CastTensor(gpu, DataType::kFloat32);
  if (f8_by_value && cpu.dtype() == DataType::kFloat8E4M3FN && gpu.dtype() == cpu.dtype()) {
    cpu = CastTensor(cpu, DataType::kFloat32);
    gpu = CastTensor(gpu, DataType::kFloat32);
  }
  if (gpu.dtype() != cpu.dtype())
    return ::testing::AssertionFailure() << name << ": GPU dtype " << DataTypeName(gpu.dtype()) << " vs CPU "
                                         << DataTypeName(cpu.dtype());
  if (gpu.shape() != cpu.shape())
    return ::testing::AssertionFailure() << name << ": GPU shape " << ShapeToString(gpu.shape()) << " vs CPU "
                                         << ShapeToString(cpu.shape());
  const bool exact = !IsFloatType(cpu.dtype());
  if (cpu.dtype() == DataType::kFloat4E2M1 || cpu.dtype() == DataType::kFloat8E8M0) {
    // float4e2m1 / float8e8m0 (one value per byte): the codes must be equal (float4's signed zeros, e8m0's NaN).
    int bad_code = 0;
    std::string first_code;
    for (int64_t i = 0; i < cpu.numel(); ++i) {
      const int c = cpu.data<uint8_t>()[i], g = gpu.data<uint8_t>()[i];
      if (c != g && bad_code++ == 0)
        first_code = "index " + std::to_string(i) + ": gpu code " + std::to_string(g) + " cpu code " + std::to_string(c);
    }
    if (bad_code)
      return ::testing::AssertionFailure() << name << ": " << bad_code << " of " << cpu.numel() << " "
                                           << DataTypeName(cpu.dtype()) << " codes differ (first at " << first_code
                                           << ")";
    return ::testing::AssertionSuccess();
  }
  if (cpu.dtype() == DataType::kFloat8E4M3FN) {
    // Float8 codes: equal, or (for up to `one_off_fraction`) the next code of the same sign; NaN is any NaN code.
    int bad8 = 0;
    int64_t apart = 0;
    std::string first8;
    for (int64_t i = 0; i < cpu.numel(); ++i) {
      const int c = cpu.data<uint8_t>()[i], g = gpu.data<uint8_t>()[i];
      const bool c_nan = (c & 0x7f) == 0x7f, g_nan = (g & 0x7f) == 0x7f;
      bool ok = c_nan || g_nan ? c_nan && g_nan
                               : c == g || ((c & 0x7f) == 0 && (g & 0x7f) == 0) ||
                                     ((c & 0x80) == (g & 0x80) && std::abs(c - g) == 1 && apart++ < one_off_fraction * cpu.numel());
      if (!ok && bad8++ == 0)
        first8 = "index " + std::to_string(i) + ": gpu code " + std::to_string(g) + " cpu code " + std::to_string(c);
    }
    if (bad8)
      return ::testing::AssertionFailure() << name << ": " << bad8 << " of " << cpu.numel()
                                           << " float8 elements differ (first at " << first8 << ")";
    return ::testing::AssertionSuccess();
  }
  int bad = 0;
  int64_t one_off = 0;
  const auto one_off_allowed = static_cast<int64_t>(one_off_fraction * static_cast<double>(cpu.numel()));
  std::string first;
  double worst = 0;
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    const double c = cpu.GetAsDouble(i), g = gpu.GetAsDouble(i);
    bool ok;
    if (std::isnan(c) || std::isnan(g)) ok = std::isnan(c) && std::isnan(g);
    else if (std::isinf(c) || std::isinf(g)) ok = c == g;
    else ok = exact ? c == g || (std::fabs(g - c) == 1 && one_off++ < one_off_allowed)
                    : std::fabs(g - c) <= atol + rtol * std::fabs(c);
    if (!ok) {
      if (bad++ == 0) first = "index " + std::to_string(i) + ": gpu " + std::to_string(g) + " cpu " + std::to_string(c);
      if (!std::isnan(c) && !std::isnan(g)) worst = std::max(worst, std::fabs(g - c));
    }
  }
  if (bad)
    return ::testing::AssertionFailure() << name << ": " << bad << " of " << cpu.numel()
                                         << " elements differ (first at " << first << "; max abs diff " << worst
                                         << ", shape " << ShapeToString(cpu.shape()) << ")";
  return ::testing::AssertionSuccess();
}

}  // namespace

StderrLogger& Logger() {
  static StderrLogger logger(Severity::kError);
  return logger;
}

std::vector<float> RandomVec(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

::testing::AssertionResult OneNode::MatchesCpu(double atol, double rtol) {
  return MatchesCpuWithEachTactic({tactic_}, atol, rtol);
}

::testing::AssertionResult OneNode::MatchesCpuWithEachTactic(const std::vector<std::string>& tactics, double atol,
                                                             double rtol) {
  std::map<std::string, Tensor> gpu_feeds, cpu_feeds;
  auto gg = BuildGraph(op_, domain_, inputs_, is_const_, attrs_, outputs_, false, &gpu_feeds, opset_);
  if (!gg.ok()) return ::testing::AssertionFailure() << "building the graph: " << gg.status().ToString();
  auto cg = BuildGraph(op_, domain_, inputs_, is_const_, attrs_, outputs_, ref_f32_, &cpu_feeds, opset_);
  if (!cg.ok()) return ::testing::AssertionFailure() << "building the reference graph: " << cg.status().ToString();
  auto cpu = cpu::RunGraph(**cg, cpu_feeds);
  if (!cpu.ok()) return ::testing::AssertionFailure() << "CPU reference: " << cpu.status().ToString();
  for (const std::string& tactic : tactics) {
    const std::string where = tactic.empty() ? std::string() : " (tactic " + tactic + ")";
    cuda::GpuRunOptions o;
    o.tactic = tactic;
    o.allow_tf32 = tf32_;
    o.repeat = repeat_;
    o.poison_workspace = repeat_ > 1;
    auto gpu = cuda::RunGraph(**gg, gpu_feeds, o);
    if (!gpu.ok()) return ::testing::AssertionFailure() << "GPU" << where << ": " << gpu.status().ToString();
    for (int i = 0; i < outputs_; ++i) {
      const std::string name = "out" + std::to_string(i);
      auto r = Compare(op_ + " " + name + where, cpu->at(name), gpu->at(name), atol, rtol, ref_f32_,
                       one_off_fraction_, f8_by_value_);
      if (!r) return r;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::gputest
