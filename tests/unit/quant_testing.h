// Helpers of the quantization tests (test_quantized.cpp, test_fp8.cpp): a logger that keeps the last warning,
// constants from tensors, building a network for the cpu backend, running an engine on host inputs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/builder.h"
#include "kiln/runtime.h"

namespace kiln::quant_testing {

class QuietLogger : public ILogger {
 public:
  void log(Severity s, const char* msg) noexcept override {
    if (s <= Severity::kWarning) last_warning = msg;
  }
  std::string last_warning;
};

inline Status AddTensor(NetworkDefinition& net, const std::string& name, const Tensor& t) {
  return net.addConstant(name, t.dtype(), t.shape(), t.raw());
}

struct Built {
  std::unique_ptr<Engine> engine;
  BuildReport report;
  std::vector<uint8_t> bytes;
  Status status = Status::Ok();  // the build's (the engine is null when it failed)
};

// Builds `net` for the cpu backend with `cfg` (a default config when null) and deserializes the engine.
inline Built TryBuild(const NetworkDefinition& net, BuilderConfig* cfg_in = nullptr, ILogger* logger = nullptr) {
  static QuietLogger quiet;
  Builder b(logger ? *logger : quiet);
  auto own = b.createBuilderConfig();
  BuilderConfig& cfg = cfg_in ? *cfg_in : *own;
  cfg.setBackend("cpu");
  Built r;
  auto bytes = b.buildSerializedNetwork(net, cfg, &r.report);
  if (!bytes.ok()) {
    r.status = bytes.status();
    return r;
  }
  r.bytes = *bytes;
  Runtime rt(quiet);
  auto e = rt.deserializeEngine(bytes->data(), bytes->size());
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (e.ok()) r.engine = std::move(*e);
  return r;
}

// Runs the engine on host inputs; returns the float32 output `out`.
inline Tensor RunEngine(const Engine& e, const std::map<std::string, Tensor>& inputs, const std::string& out) {
  auto ctx = e.createExecutionContext();
  EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
  for (const auto& [name, t] : inputs) {
    EXPECT_TRUE((*ctx)->setInputShape(name, t.shape()).ok());
    EXPECT_TRUE((*ctx)->setTensorAddress(name, const_cast<void*>(t.raw())).ok());
  }
  auto shape = (*ctx)->getTensorShape(out);
  EXPECT_TRUE(shape.ok());
  Tensor y(DataType::kFloat32, *shape);
  EXPECT_TRUE((*ctx)->setTensorAddress(out, y.raw()).ok());
  Status st = (*ctx)->enqueue(nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return y;
}

inline double RelL2(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = a.GetAsDouble(i) - b.GetAsDouble(i);
    num += d * d;
    den += b.GetAsDouble(i) * b.GetAsDouble(i);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace kiln::quant_testing
