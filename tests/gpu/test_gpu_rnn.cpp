// Differential tests of the CUDA RNN, GRU and LSTM layers (rnn_layers.cpp, rnn.cu) against the CPU reference:
// every direction and layout, odd sizes (hidden units past a warp, inputs past a GEMM tile), with and without bias,
// sequence_lens (int32 and int64, lengths 0 to seq), initial states, peepholes, input_forget, clip,
// linear_before_reset, non-default activations (per direction, with alpha and beta), weights as constants and as
// runtime inputs, omitted outputs; float32 and float64 tight, float16/bfloat16 against a float32 reference.
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/executor.h"
#include "backends/cuda/graph_runner.h"
#include "gpu_test_util.h"
#include "ops/infer.h"

namespace kiln::gputest {
namespace {

using Shape = std::vector<int64_t>;

struct Geo {
  int64_t seq, batch, input, hidden;
};

struct Features {
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, lens = false, lens64 = false, h0 = false, c0 = false, peepholes = false;
  bool weights_as_inputs = false;
  float clip = 0;  // 0: none
  int64_t linear_before_reset = 0, input_forget = 0;
  std::vector<std::string> activations;
  std::vector<float> alphas, betas;
};

int64_t Gates(const std::string& op) { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }

Attribute Strings(const std::vector<std::string>& v) {
  Attribute a;
  a.kind = Attribute::Kind::kStrings;
  a.strings = v;
  return a;
}

// The node with its inputs (trailing omitted ones left off) and attributes.
OneNode MakeNode(const std::string& op, DataType t, const Geo& g, const Features& f, uint32_t& seed) {
  const int64_t G = Gates(op), H = g.hidden, D = f.direction == "bidirectional" ? 2 : 1;
  const Shape x_shape = f.layout == 1 ? Shape{g.batch, g.seq, g.input} : Shape{g.seq, g.batch, g.input};
  const Shape state = f.layout == 1 ? Shape{g.batch, D, H} : Shape{D, g.batch, H};
  struct In {
    std::optional<Tensor> t;
    bool is_const = false;
  };
  std::vector<In> ins;
  ins.push_back({Random(t, x_shape, seed++, -1, 1), false});
  ins.push_back({Random(t, {D, G * H, g.input}, seed++, -0.5, 0.5), !f.weights_as_inputs});
  ins.push_back({Random(t, {D, G * H, H}, seed++, -0.5, 0.5), !f.weights_as_inputs});
  ins.push_back(f.bias ? In{Random(t, {D, 2 * G * H}, seed++, -0.5, 0.5), !f.weights_as_inputs} : In{});
  if (f.lens) {
    std::vector<double> lens(static_cast<size_t>(g.batch));
    for (int64_t b = 0; b < g.batch; ++b) lens[static_cast<size_t>(b)] = static_cast<double>((b * 7 + 3) % (g.seq + 1));
    if (g.batch > 0) lens[0] = static_cast<double>(g.seq);
    if (g.batch > 2) lens[2] = 0;
    ins.push_back({FromValues(f.lens64 ? DataType::kInt64 : DataType::kInt32, {g.batch}, lens), false});
  } else {
    ins.push_back({});
  }
  ins.push_back(f.h0 ? In{Random(t, state, seed++, -1, 1), false} : In{});
  if (op == "LSTM") {
    ins.push_back(f.c0 ? In{Random(t, state, seed++, -1, 1), false} : In{});
    ins.push_back(f.peepholes ? In{Random(t, {D, 3 * H}, seed++, -0.5, 0.5), true} : In{});
  }
  while (!ins.empty() && !ins.back().t) ins.pop_back();
  OneNode n(op);
  for (const In& in : ins) {
    if (!in.t) n.Omitted();
    else if (in.is_const) n.Const(*in.t);
    else n.Input(*in.t);
  }
  n.Attr("hidden_size", Attribute::Int(H));
  n.Attr("direction", Attribute::String(f.direction));
  if (f.layout) n.Attr("layout", Attribute::Int(f.layout));
  if (f.clip > 0) n.Attr("clip", Attribute::Float(f.clip));
  if (op == "GRU" && f.linear_before_reset) n.Attr("linear_before_reset", Attribute::Int(1));
  if (op == "LSTM" && f.input_forget) n.Attr("input_forget", Attribute::Int(1));
  if (!f.activations.empty()) n.Attr("activations", Strings(f.activations));
  if (!f.alphas.empty()) n.Attr("activation_alpha", Attribute::Floats(f.alphas));
  if (!f.betas.empty()) n.Attr("activation_beta", Attribute::Floats(f.betas));
  n.Outputs(op == "LSTM" ? 3 : 2);
  return n;
}

::testing::AssertionResult Check(OneNode n, DataType t) {
  if (t == DataType::kFloat32) return n.MatchesCpu(1e-4, 1e-4);
  if (t == DataType::kFloat64) return n.MatchesCpu(1e-9, 1e-9);
  return n.ReferenceInFloat32().MatchesCpu(1e-2, 1e-2);
}

std::string Describe(const std::string& op, DataType t, const Geo& g, const Features& f) {
  std::string s = op + " " + DataTypeName(t) + " seq " + std::to_string(g.seq) + " batch " + std::to_string(g.batch) +
                  " input " + std::to_string(g.input) + " hidden " + std::to_string(g.hidden) + " " + f.direction +
                  " layout " + std::to_string(f.layout);
  if (!f.bias) s += " no-bias";
  if (f.lens) s += f.lens64 ? " lens64" : " lens";
  if (f.h0) s += " h0";
  if (f.c0) s += " c0";
  if (f.peepholes) s += " peepholes";
  if (f.weights_as_inputs) s += " weights-as-inputs";
  if (f.clip > 0) s += " clip " + std::to_string(f.clip);
  if (f.linear_before_reset) s += " linear_before_reset";
  if (f.input_forget) s += " input_forget";
  for (const std::string& a : f.activations) s += " " + a;
  return s;
}

const char* const kOps[] = {"RNN", "GRU", "LSTM"};

TEST(GpuRnn, DirectionsLayoutsAndOptionalInputsMatchTheCpuReference) {
  uint32_t seed = 7000;
  const std::vector<Geo> geos = {{5, 3, 7, 9}, {1, 1, 1, 1}, {4, 2, 40, 37}};
  for (const char* op : kOps)
    for (const char* dir : {"forward", "reverse", "bidirectional"})
      for (int64_t layout : {0, 1})
        for (const Geo& g : geos)
          for (int variant = 0; variant < 4; ++variant) {
            Features f;
            f.direction = dir;
            f.layout = layout;
            f.bias = variant != 1;
            f.lens = variant >= 2;
            f.lens64 = variant == 3;
            f.h0 = variant != 0;
            f.c0 = variant >= 2;
            f.peepholes = variant == 1 || variant == 3;
            f.linear_before_reset = variant == 3;
            const DataType t = DataType::kFloat32;
            EXPECT_TRUE(Check(MakeNode(op, t, g, f, seed), t)) << Describe(op, t, g, f);
          }
}

TEST(GpuRnn, ClipGruResetAndLstmInputForget) {
  uint32_t seed = 8000;
  const Geo g{6, 4, 5, 11};
  for (const char* op : kOps)
    for (float clip : {0.f, 0.3f})
      for (int64_t flag : {0, 1})
        for (const char* dir : {"forward", "bidirectional"}) {
          Features f;
          f.direction = dir;
          f.clip = clip;
          f.linear_before_reset = flag;
          f.input_forget = flag;
          f.h0 = f.c0 = true;
          f.lens = true;
          const DataType t = DataType::kFloat32;
          EXPECT_TRUE(Check(MakeNode(op, t, g, f, seed), t)) << Describe(op, t, g, f);
        }
}

TEST(GpuRnn, Activations) {
  uint32_t seed = 9000;
  const Geo g{5, 3, 6, 10};
  struct Case {
    const char* op;
    const char* dir;
    std::vector<std::string> acts;
    std::vector<float> alphas, betas;
  };
  const std::vector<Case> cases = {
      {"RNN", "forward", {"Relu"}, {}, {}},
      {"RNN", "forward", {"Sigmoid"}, {}, {}},
      {"RNN", "bidirectional", {"Affine", "ThresholdedRelu"}, {0.8f, 0.2f}, {0.1f}},
      {"RNN", "reverse", {"Softplus"}, {}, {}},
      {"GRU", "forward", {"HardSigmoid", "Softsign"}, {0.3f}, {0.45f}},
      {"GRU", "bidirectional", {"Sigmoid", "Relu"}, {}, {}},  // one direction's list: both use it
      {"GRU", "bidirectional", {"Sigmoid", "Tanh", "HardSigmoid", "Elu"}, {}, {}},  // operator defaults
      {"LSTM", "forward", {"Sigmoid", "Elu", "ScaledTanh"}, {0.7f, 1.1f}, {0.9f}},
      {"LSTM", "bidirectional", {"Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Softplus", "LeakyRelu"}, {0.25f, 0.1f},
       {0.5f}},
      {"LSTM", "reverse", {"sigmoid", "TANH", "relu"}, {}, {}},  // names in any case
  };
  for (const Case& c : cases)
    for (DataType t : {DataType::kFloat32, DataType::kFloat64}) {
      Features f;
      f.direction = c.dir;
      f.activations = c.acts;
      f.alphas = c.alphas;
      f.betas = c.betas;
      f.h0 = true;
      EXPECT_TRUE(Check(MakeNode(c.op, t, g, f, seed), t)) << Describe(c.op, t, g, f);
    }
}

TEST(GpuRnn, TypesAndLargerSizes) {
  uint32_t seed = 10000;
  const std::vector<Geo> geos = {{7, 5, 45, 70}, {3, 2, 3, 129}};
  for (const char* op : kOps)
    for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64})
      for (const Geo& g : geos)
        for (int64_t layout : {0, 1}) {
          Features f;
          f.direction = "bidirectional";
          f.layout = layout;
          f.h0 = f.c0 = f.peepholes = f.lens = true;
          f.weights_as_inputs = layout == 1;
          EXPECT_TRUE(Check(MakeNode(op, t, g, f, seed), t)) << Describe(op, t, g, f);
        }
}

TEST(GpuRnn, EmptyBatchAndSequence) {
  uint32_t seed = 11000;
  for (const char* op : kOps)
    for (const Geo& g : {Geo{0, 3, 4, 5}, Geo{4, 0, 4, 5}}) {
      Features f;
      f.h0 = g.batch > 0;
      const DataType t = DataType::kFloat32;
      EXPECT_TRUE(Check(MakeNode(op, t, g, f, seed), t)) << Describe(op, t, g, f);
    }
}

// Y (and LSTM's Y_c) omitted: the layer writes only Y_h, which matches the reference.
TEST(GpuRnn, OmittedOutputs) {
  uint32_t seed = 12000;
  for (const char* op : kOps) {
    const int64_t G = Gates(op), S = 4, B = 3, I = 5, H = 6;
    Graph g;
    g.opsets[""] = 21;
    Node* n = g.AddNode(op, "rnn0");
    n->opset = 21;
    n->attrs["hidden_size"] = Attribute::Int(H);
    n->attrs["direction"] = Attribute::String("bidirectional");
    Value* x = g.GetOrAddValue("x");
    x->dtype = DataType::kFloat32;
    x->shape = FromStatic({S, B, I});
    x->has_shape = true;
    x->is_graph_input = true;
    g.inputs.push_back(x);
    std::map<std::string, Tensor> feeds = {{"x", Random(DataType::kFloat32, {S, B, I}, seed++)}};
    n->inputs = {x, g.AddConstant("w", Random(DataType::kFloat32, {2, G * H, I}, seed++, -0.5, 0.5)),
                 g.AddConstant("r", Random(DataType::kFloat32, {2, G * H, H}, seed++, -0.5, 0.5)),
                 g.AddConstant("b", Random(DataType::kFloat32, {2, 2 * G * H}, seed++, -0.5, 0.5))};
    Value* yh = g.GetOrAddValue("yh");
    yh->producer = n;
    yh->is_graph_output = true;
    n->outputs = {nullptr, yh};
    if (std::string(op) == "LSTM") n->outputs.push_back(nullptr);
    g.outputs.push_back(yh);
    ASSERT_TRUE(InferGraph(g, InferOptions{}).ok()) << op;
    auto cpu = cpu::RunGraph(g, feeds);
    ASSERT_TRUE(cpu.ok()) << op << ": " << cpu.status().ToString();
    auto gpu = cuda::RunGraph(g, feeds);
    ASSERT_TRUE(gpu.ok()) << op << ": " << gpu.status().ToString();
    const Tensor& c = cpu->at("yh");
    const Tensor& d = gpu->at("yh");
    ASSERT_EQ(c.shape(), d.shape()) << op;
    for (int64_t i = 0; i < c.numel(); ++i)
      EXPECT_NEAR(c.GetAsDouble(i), d.GetAsDouble(i), 1e-4 + 1e-4 * std::fabs(c.GetAsDouble(i))) << op << " at " << i;
  }
}

// Lengths known on the host (the runtime's copy of a small int32 input) are checked before the kernels run.
TEST(GpuRnn, RefusesLengthsPastTheSequence) {
  Graph g;
  g.opsets[""] = 21;
  Node* n = g.AddNode("GRU", "gru0");
  n->opset = 21;
  n->attrs["hidden_size"] = Attribute::Int(5);
  std::map<std::string, Tensor> feeds = {{"x", Random(DataType::kFloat32, {3, 2, 4}, 1)},
                                         {"lens", FromValues(DataType::kInt32, {2}, {3, 4})}};
  std::vector<Value*> ins;
  for (const char* name : {"x", "lens"}) {
    Value* v = g.GetOrAddValue(name);
    v->dtype = feeds[name].dtype();
    v->shape = FromStatic(feeds[name].shape());
    v->has_shape = true;
    v->is_graph_input = true;
    g.inputs.push_back(v);
    ins.push_back(v);
  }
  n->inputs = {ins[0], g.AddConstant("w", Random(DataType::kFloat32, {1, 15, 4}, 2)),
               g.AddConstant("r", Random(DataType::kFloat32, {1, 15, 5}, 3)), nullptr, ins[1]};
  Value* y = g.GetOrAddValue("y");
  y->producer = n;
  y->is_graph_output = true;
  n->outputs = {y};
  g.outputs.push_back(y);
  ASSERT_TRUE(InferGraph(g, InferOptions{}).ok());
  auto gpu = cuda::RunGraph(g, feeds);
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.status().message().find("sequence_lens"), std::string::npos) << gpu.status().ToString();
  EXPECT_NE(gpu.status().message().find("gru0"), std::string::npos) << gpu.status().ToString();
}

}  // namespace
}  // namespace kiln::gputest
