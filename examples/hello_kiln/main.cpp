// hello_kiln: the public API from outside the tree. Defines y = softmax(relu(x W + b)) op by op, builds an engine
// with a dynamic batch (1..8), saves and reloads it, runs a batch of 3 and checks the result by hand.
// Usage: hello_kiln [model.onnx]   (with a model: parse it instead, build and print its tensors)
#include <cmath>
#include <cstdio>
#include <vector>

#include <kiln/kiln.h>

int main(int argc, char** argv) {
  kiln::StderrLogger logger(kiln::Severity::kWarning);
  kiln::Builder builder(logger);
  auto network = builder.createNetwork();
  auto config = builder.createBuilderConfig();
  const int64_t kIn = 4, kOut = 3, kBatch = 3;
  std::vector<float> w(kIn * kOut), b(kOut);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(i) - 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.05f * static_cast<float>(i);

  if (argc > 1) {
    kiln::OnnxParser parser(*network, logger);
    if (kiln::Status st = parser.parseFromFile(argv[1]); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
  } else {
    auto check = [](const kiln::Status& st) {
      if (!st.ok()) std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return st.ok();
    };
    if (!check(network->addInput("x", kiln::DataType::kFloat32, {-1, kIn}, {"batch", ""})) ||
        !check(network->addConstant("W", kiln::DataType::kFloat32, {kIn, kOut}, w.data())) ||
        !check(network->addConstant("b", kiln::DataType::kFloat32, {kOut}, b.data())) ||
        !check(network->addOp("MatMul", "fc", {"x", "W"}, {"xw"})) ||
        !check(network->addOp("Add", "bias", {"xw", "b"}, {"h"})) ||
        !check(network->addOp("Relu", "relu", {"h"}, {"r"})) ||
        !check(network->addOp("Softmax", "softmax", {"r"}, {"y"}, {{"axis", int64_t{-1}}})) ||
        !check(network->markOutput("y")))
      return 1;
    kiln::OptimizationProfile profile;
    profile.setDimensions("x", kiln::ProfileSelector::kMin, {1, kIn});
    profile.setDimensions("x", kiln::ProfileSelector::kOpt, {4, kIn});
    profile.setDimensions("x", kiln::ProfileSelector::kMax, {8, kIn});
    if (!config->addOptimizationProfile(profile).ok()) return 1;
  }

  kiln::BuildReport report;
  auto bytes = builder.buildSerializedNetwork(*network, *config, &report);
  if (!bytes.ok()) {
    std::fprintf(stderr, "build failed: %s\n", bytes.status().ToString().c_str());
    return 1;
  }
  std::printf("built: %zu layers -> %zu, engine %zu bytes\n", report.layers_before, report.layers_after, bytes->size());
  kiln::Runtime runtime(logger);
  auto engine = runtime.deserializeEngine(bytes->data(), bytes->size());
  if (!engine.ok()) {
    std::fprintf(stderr, "load failed: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  for (int i = 0; i < (*engine)->getNbIOTensors(); ++i) std::printf("tensor: %s\n", (*engine)->getIOTensorName(i).c_str());
  if (argc > 1) return 0;

  auto context = (*engine)->createExecutionContext();
  if (!context.ok()) return 1;
  std::vector<float> x(kBatch * kIn), y(kBatch * kOut, 0.f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
  kiln::ExecutionContext& ctx = **context;
  if (!ctx.setInputShape("x", {kBatch, kIn}).ok() || !ctx.setTensorAddress("x", x.data()).ok() ||
      !ctx.setTensorAddress("y", y.data()).ok()) return 1;
  if (kiln::Status st = ctx.enqueue(); !st.ok()) {
    std::fprintf(stderr, "enqueue failed: %s\n", st.ToString().c_str());
    return 1;
  }
  double worst = 0;
  for (int64_t r = 0; r < kBatch; ++r) {
    double h[kOut], sum = 0;
    for (int64_t c = 0; c < kOut; ++c) {
      double acc = b[c];
      for (int64_t k = 0; k < kIn; ++k) acc += x[r * kIn + k] * w[k * kOut + c];
      h[c] = std::exp(std::max(0.0, acc));
      sum += h[c];
    }
    for (int64_t c = 0; c < kOut; ++c) worst = std::max(worst, std::fabs(h[c] / sum - y[r * kOut + c]));
  }
  std::printf("y[0] = %.6f %.6f %.6f; max error vs hand computation %.2g\n", y[0], y[1], y[2], worst);
  return worst < 1e-5 ? 0 : 1;
}
