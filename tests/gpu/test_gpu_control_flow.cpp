// If, Loop and Scan on the CUDA backend: their bodies run on the CUDA layers. Each model (written with the protobuf
// API, imported like a user's file) runs node by node on the CUDA layers and as a CUDA engine (with and without CUDA
// graphs), and must match the CPU reference. A Loop whose body shapes follow the iteration number is planned once per
// iteration; past the layer's limit it falls back to the CPU whole inside the engine (the build report names it).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/executor.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/graph_runner.h"
#include "gpu_test_util.h"
#include "kiln/kiln.h"
#include "onnx.pb.h"
#include "onnx/importer.h"
#include "onnx_testing.h"

namespace kiln {
namespace {

using gputest::Logger;
using gputest::Random;
using testing::AddInitializer;
using testing::AddNode;
using testing::IntAttr;
using testing::IntsAttr;
using testing::SetValueInfo;

void GraphAttr(onnx::NodeProto* n, const std::string& name, const onnx::GraphProto& g) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}
void TypedInfo(onnx::ValueInfoProto* vi, const std::string& name, int elem, std::vector<std::string> dims) {
  SetValueInfo(vi, name, std::move(dims));
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
}
void FloatInit(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
               const std::vector<float>& v) {
  auto* t = AddInitializer(g, name, onnx::TensorProto::FLOAT, dims);
  for (float x : v) t->add_float_data(x);
}
void Int64Init(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
               const std::vector<int64_t>& v) {
  auto* t = AddInitializer(g, name, onnx::TensorProto::INT64, dims);
  for (int64_t x : v) t->add_int64_data(x);
}

constexpr int64_t kB = 3, kS = 5, kD = 7;

// s0[B,D], x[B,S,D], r[B,S,D] -> Scan (x along axis 1, r reversed; body: tanh(x_t W + s + r_t), a captured weight)
// -> s_final[B,D], ys[B,S,D] (axis 1), sums[S,B] (reversed).
std::string ScanModel() {
  onnx::ModelProto m;
  auto* g = testing::StartModel(m, "scan");
  SetValueInfo(g->add_input(), "s0", {"3", "7"});
  SetValueInfo(g->add_input(), "x", {"3", "5", "7"});
  SetValueInfo(g->add_input(), "r", {"3", "5", "7"});
  SetValueInfo(g->add_output(), "s_final", {"3", "7"});
  SetValueInfo(g->add_output(), "ys", {"3", "5", "7"});
  SetValueInfo(g->add_output(), "sums", {"5", "3"});
  FloatInit(g, "W", {kD, kD}, gputest::RandomVec(kD * kD, 5, 0.4f));
  onnx::GraphProto body;
  body.set_name("cell");
  SetValueInfo(body.add_input(), "s_in", {"3", "7"});
  SetValueInfo(body.add_input(), "x_t", {"3", "7"});
  SetValueInfo(body.add_input(), "r_t", {"3", "7"});
  SetValueInfo(body.add_output(), "s_out", {"3", "7"});
  SetValueInfo(body.add_output(), "y_t", {"3", "7"});
  SetValueInfo(body.add_output(), "sum_t", {"3"});
  Int64Init(&body, "axes1", {1}, {1});
  AddNode(&body, "MatMul", "mm", {"x_t", "W"}, {"xw"});
  AddNode(&body, "Add", "a1", {"xw", "s_in"}, {"a"});
  AddNode(&body, "Add", "a2", {"a", "r_t"}, {"b"});
  AddNode(&body, "Tanh", "t", {"b"}, {"s_out"});
  AddNode(&body, "Neg", "neg", {"s_out"}, {"y_t"});
  IntAttr(AddNode(&body, "ReduceSum", "rs", {"s_out", "axes1"}, {"sum_t"}), "keepdims", 0);
  auto* scan = AddNode(g, "Scan", "scan", {"s0", "x", "r"}, {"s_final", "ys", "sums"});
  IntAttr(scan, "num_scan_inputs", 2);
  IntsAttr(scan, "scan_input_axes", {1, 1});
  IntsAttr(scan, "scan_input_directions", {0, 1});
  IntsAttr(scan, "scan_output_axes", {1, 0});
  IntsAttr(scan, "scan_output_directions", {0, 1});
  GraphAttr(scan, "body", body);
  return m.SerializeAsString();
}

// h0[B,D], x[B,D] -> Loop (a constant trip count, no condition; body: h*0.9 + x*iter, scan output ReduceSum over D)
// -> h_final[B,D], sums[trips,B]. With slice_by_iter, the body also adds ReduceSum(Slice(v, iter, iter+1)) of a
// captured [100] vector, a value whose shape inference knows only once the iteration number is known.
std::string CountedLoopModel(bool slice_by_iter, int64_t trips = 4) {
  onnx::ModelProto m;
  auto* g = testing::StartModel(m, "loop");
  SetValueInfo(g->add_input(), "h0", {"3", "7"});
  SetValueInfo(g->add_input(), "x", {"3", "7"});
  SetValueInfo(g->add_output(), "h_final", {"3", "7"});
  SetValueInfo(g->add_output(), "sums", {std::to_string(trips), "3"});
  Int64Init(g, "trips", {}, {trips});
  FloatInit(g, "v", {100}, gputest::RandomVec(100, 7, 2.f));
  onnx::GraphProto body;
  body.set_name("step");
  TypedInfo(body.add_input(), "iter", onnx::TensorProto::INT64, {});
  TypedInfo(body.add_input(), "cond_in", onnx::TensorProto::BOOL, {});
  SetValueInfo(body.add_input(), "h_in", {"3", "7"});
  TypedInfo(body.add_output(), "cond_out", onnx::TensorProto::BOOL, {});
  SetValueInfo(body.add_output(), "h_out", {"3", "7"});
  SetValueInfo(body.add_output(), "sum_t", {"3"});
  FloatInit(&body, "decay", {}, {0.9f});
  Int64Init(&body, "axes1", {1}, {1});
  Int64Init(&body, "one", {}, {1});
  Int64Init(&body, "zero1", {1}, {0});
  AddNode(&body, "Identity", "c", {"cond_in"}, {"cond_out"});
  auto* cast = AddNode(&body, "Cast", "cast", {"iter"}, {"it_f"});
  IntAttr(cast, "to", onnx::TensorProto::FLOAT);
  AddNode(&body, "Mul", "m1", {"h_in", "decay"}, {"hd"});
  AddNode(&body, "Mul", "m2", {"x", "it_f"}, {"xi"});
  if (slice_by_iter) {
    AddNode(&body, "Add", "a0", {"hd", "xi"}, {"pre"});
    AddNode(&body, "Add", "end", {"iter", "one"}, {"it1"});
    AddNode(&body, "Unsqueeze", "u0", {"iter", "zero1"}, {"starts"});
    AddNode(&body, "Unsqueeze", "u1", {"it1", "zero1"}, {"ends"});
    AddNode(&body, "Slice", "sl", {"v", "starts", "ends"}, {"piece"});
    IntAttr(AddNode(&body, "ReduceSum", "rsp", {"piece"}, {"piece_sum"}), "keepdims", 0);
    AddNode(&body, "Add", "a1", {"pre", "piece_sum"}, {"h_out"});
  } else {
    AddNode(&body, "Add", "a1", {"hd", "xi"}, {"h_out"});
  }
  IntAttr(AddNode(&body, "ReduceSum", "rs", {"h_out", "axes1"}, {"sum_t"}), "keepdims", 0);
  auto* loop = AddNode(g, "Loop", "loop", {"trips", "", "h0"}, {"h_final", "sums"});
  GraphAttr(loop, "body", body);
  return m.SerializeAsString();
}

// x[B,D] -> If(ReduceSum(x) > 0): then Relu(x) then a nested If(ReduceMax(x) > 1.5: x*2 | x); else -x - 1 -> y[B,D].
std::string IfModel() {
  onnx::ModelProto m;
  auto* g = testing::StartModel(m, "branches");
  SetValueInfo(g->add_input(), "x", {"3", "7"});
  SetValueInfo(g->add_output(), "y", {"3", "7"});
  FloatInit(g, "zero", {}, {0.f});
  FloatInit(g, "limit", {}, {1.5f});
  onnx::GraphProto inner_then, inner_else, then_g, else_g;
  inner_then.set_name("inner_then");
  FloatInit(&inner_then, "two", {}, {2.f});
  AddNode(&inner_then, "Mul", "dbl", {"r", "two"}, {"it"});
  SetValueInfo(inner_then.add_output(), "it", {"3", "7"});
  inner_else.set_name("inner_else");
  AddNode(&inner_else, "Identity", "id", {"r"}, {"ie"});
  SetValueInfo(inner_else.add_output(), "ie", {"3", "7"});
  then_g.set_name("then");
  AddNode(&then_g, "Relu", "relu", {"x"}, {"r"});
  IntAttr(AddNode(&then_g, "ReduceMax", "rmax", {"r"}, {"rm"}), "keepdims", 0);
  AddNode(&then_g, "Greater", "gt", {"rm", "limit"}, {"big"});
  auto* nested = AddNode(&then_g, "If", "nested", {"big"}, {"t_out"});
  GraphAttr(nested, "then_branch", inner_then);
  GraphAttr(nested, "else_branch", inner_else);
  SetValueInfo(then_g.add_output(), "t_out", {"3", "7"});
  else_g.set_name("else");
  FloatInit(&else_g, "one", {}, {1.f});
  AddNode(&else_g, "Neg", "neg", {"x"}, {"nx"});
  AddNode(&else_g, "Sub", "sub", {"nx", "one"}, {"e_out"});
  SetValueInfo(else_g.add_output(), "e_out", {"3", "7"});
  IntAttr(AddNode(g, "ReduceSum", "total", {"x"}, {"t"}), "keepdims", 0);
  AddNode(g, "Greater", "pos", {"t", "zero"}, {"positive"});
  auto* iff = AddNode(g, "If", "gate", {"positive"}, {"y"});
  GraphAttr(iff, "then_branch", then_g);
  GraphAttr(iff, "else_branch", else_g);
  return m.SerializeAsString();
}

Result<std::unique_ptr<Graph>> Import(const std::string& bytes) {
  ImportOptions o;
  o.infer.evaluator = cpu::MakeConstEvaluator();
  return ImportOnnxBytes(bytes, ".", "model.onnx", o);
}

::testing::AssertionResult Close(const std::string& what, const Tensor& got, const Tensor& want, double tol) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << what << ": got " << got.Describe() << ", want " << want.Describe();
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.GetAsDouble(i), w = want.GetAsDouble(i);
    if (!(std::fabs(g - w) <= tol * (1 + std::fabs(w))))
      return ::testing::AssertionFailure() << what << "[" << i << "]: got " << g << ", want " << w;
  }
  return ::testing::AssertionSuccess();
}

// Node by node: the If/Loop/Scan layers (bodies on the CUDA layers) against the CPU reference.
void ExpectNodeByNodeMatches(const std::string& model, const std::map<std::string, Tensor>& feeds) {
  auto g = Import(model);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto want = cpu::RunGraph(**g, feeds);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  cuda::GpuRunOptions o;
  o.allow_tf32 = false;
  auto got = cuda::RunGraph(**g, feeds, o);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (const auto& [name, t] : *want) EXPECT_TRUE(Close(name, got->at(name), t, 1e-5));
}

struct Built {
  std::unique_ptr<Engine> engine;
  BuildReport report;
};

Built BuildEngine(const std::string& model, const std::string& backend) {
  Built r;
  Builder b(Logger());
  auto net = b.createNetwork();
  OnnxParser parser(*net, Logger());
  Status st = parser.parse(model.data(), model.size());
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto cfg = b.createBuilderConfig();
  cfg->setBackend(backend);
  cfg->clearFlag(BuilderFlag::kTF32);
  auto bytes = b.buildSerializedNetwork(*net, *cfg, &r.report);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  if (!bytes.ok()) return r;
  Runtime rt(Logger());
  auto e = rt.deserializeEngine(bytes->data(), bytes->size());
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (e.ok()) r.engine = std::move(*e);
  return r;
}

// Runs an engine whose inputs and outputs are float32 with static shapes; device engines get device buffers.
std::map<std::string, Tensor> RunEngine(const Engine& e, const std::map<std::string, Tensor>& feeds, bool graphs,
                                        int runs = 1) {
  std::map<std::string, Tensor> out;
  auto ctx = e.createExecutionContext();
  EXPECT_TRUE(ctx.ok());
  if (!ctx.ok()) return out;
  const bool device = e.getBackend() == "cuda";
  (*ctx)->setUseCudaGraph(graphs);
  std::vector<cuda::DeviceBuffer> buffers;
  auto stream = cuda::Stream::Create();
  EXPECT_TRUE(stream.ok());
  for (int i = 0; i < e.getNbIOTensors(); ++i) {
    const std::string name = e.getIOTensorName(i);
    const Dims shape = e.getTensorShape(name);
    Tensor host(e.getTensorDataType(name), std::vector<int64_t>(shape.begin(), shape.end()));
    if (e.getTensorIOMode(name) == TensorIOMode::kInput) host = feeds.at(name);
    void* p = host.raw();
    if (device) {
      auto b = cuda::DeviceBuffer::Allocate(std::max<size_t>(host.nbytes(), 1));
      EXPECT_TRUE(b.ok());
      if (!b.ok()) return out;
      p = b->get();
      if (e.getTensorIOMode(name) == TensorIOMode::kInput)
        EXPECT_EQ(cudaMemcpy(p, host.raw(), host.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
      buffers.push_back(std::move(*b));
    }
    EXPECT_TRUE((*ctx)->setTensorAddress(name, p).ok());
    if (e.getTensorIOMode(name) == TensorIOMode::kOutput) out.emplace(name, host);
  }
  for (int r = 0; r < runs; ++r) {
    Status st = (*ctx)->enqueue(device ? static_cast<void*>(stream->get()) : nullptr);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  if (device) {
    EXPECT_EQ(cudaStreamSynchronize(stream->get()), cudaSuccess);
    size_t k = 0;
    for (int i = 0; i < e.getNbIOTensors(); ++i) {
      const std::string name = e.getIOTensorName(i);
      if (e.getTensorIOMode(name) == TensorIOMode::kInput) {
        ++k;
        continue;
      }
      Tensor& h = out.at(name);
      EXPECT_EQ(cudaMemcpy(h.raw(), buffers[k++].get(), h.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    }
  }
  return out;
}

// As a CUDA engine (FP32, TF32 off): the node runs on the GPU (no fallback), with and without CUDA graphs (a layer
// that needs the host mid-run makes the engine run that plan without a graph), twice in a row.
void ExpectEngineMatches(const std::string& model, const std::map<std::string, Tensor>& feeds) {
  Built cpu = BuildEngine(model, "cpu");
  Built gpu = BuildEngine(model, "cuda");
  ASSERT_TRUE(cpu.engine && gpu.engine);
  EXPECT_TRUE(gpu.report.cpu_fallbacks.empty()) << gpu.report.cpu_fallbacks[0].layer << ": "
                                                << gpu.report.cpu_fallbacks[0].reason;
  const auto want = RunEngine(*cpu.engine, feeds, false);
  for (bool graphs : {false, true}) {
    const auto got = RunEngine(*gpu.engine, feeds, graphs, 2);
    for (const auto& [name, t] : want)
      EXPECT_TRUE(Close(name + (graphs ? " (CUDA graph)" : ""), got.at(name), t, 1e-5));
  }
}

std::map<std::string, Tensor> ScanFeeds(uint32_t seed) {
  return {{"s0", Random(DataType::kFloat32, {kB, kD}, seed)},
          {"x", Random(DataType::kFloat32, {kB, kS, kD}, seed + 1)},
          {"r", Random(DataType::kFloat32, {kB, kS, kD}, seed + 2, -0.2, 0.2)}};
}

TEST(GpuControlFlow, ScanMatchesTheCpu) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  ExpectNodeByNodeMatches(ScanModel(), ScanFeeds(11));
  ExpectEngineMatches(ScanModel(), ScanFeeds(21));
}

TEST(GpuControlFlow, CountedLoopMatchesTheCpu) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::map<std::string, Tensor> feeds = {{"h0", Random(DataType::kFloat32, {kB, kD}, 31)},
                                               {"x", Random(DataType::kFloat32, {kB, kD}, 32)}};
  ExpectNodeByNodeMatches(CountedLoopModel(false), feeds);
  ExpectEngineMatches(CountedLoopModel(false), feeds);
}

TEST(GpuControlFlow, IfTakesEachBranchOnTheDevice) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  for (double sign : {1.0, -1.0}) {
    Tensor x = Random(DataType::kFloat32, {kB, kD}, 41, 0.0, 2.0);
    for (int64_t i = 0; i < x.numel(); ++i) x.SetFromDouble(i, sign * x.GetAsDouble(i));
    ExpectNodeByNodeMatches(IfModel(), {{"x", x}});
    ExpectEngineMatches(IfModel(), {{"x", x}});
  }
}

TEST(GpuControlFlow, ALoopWhoseShapesFollowTheIterationIsPlannedPerIteration) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::map<std::string, Tensor> feeds = {{"h0", Random(DataType::kFloat32, {kB, kD}, 51)},
                                               {"x", Random(DataType::kFloat32, {kB, kD}, 52)}};
  ExpectNodeByNodeMatches(CountedLoopModel(true, 5), feeds);
  ExpectEngineMatches(CountedLoopModel(true, 5), feeds);
}

TEST(GpuControlFlow, ALoopTooLongToPlanPerIterationFallsBackToTheCpu) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string model = CountedLoopModel(true, 80);  // more iterations than the layer plans one by one
  const std::map<std::string, Tensor> feeds = {{"h0", Random(DataType::kFloat32, {kB, kD}, 53)},
                                               {"x", Random(DataType::kFloat32, {kB, kD}, 54, -0.01, 0.01)}};
  Built cpu = BuildEngine(model, "cpu");
  Built gpu = BuildEngine(model, "cuda");
  ASSERT_TRUE(cpu.engine && gpu.engine);
  ASSERT_EQ(gpu.report.cpu_fallbacks.size(), 1u);
  EXPECT_EQ(gpu.report.cpu_fallbacks[0].op, "Loop");
  EXPECT_NE(gpu.report.cpu_fallbacks[0].reason.find("depends on data computed in the body"), std::string::npos)
      << gpu.report.cpu_fallbacks[0].reason;
  const auto want = RunEngine(*cpu.engine, feeds, false);
  const auto got = RunEngine(*gpu.engine, feeds, true);
  for (const auto& [name, t] : want) EXPECT_TRUE(Close(name, got.at(name), t, 1e-5));
}

}  // namespace
}  // namespace kiln
