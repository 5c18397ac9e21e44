// ScaleShift: y = act(alpha * x + beta), act = identity ("none") or relu. An elementwise op with fields of three
// types, a CPU implementation and a CUDA one that also takes float16.
#include <string>

#include "example_kernels.h"
#include "example_plugins.h"

namespace kiln_examples {

using kiln::DataType;
using kiln::PluginBackend;
using kiln::Status;
using kiln::StatusCode;

namespace {

class ScaleShift final : public kiln::IPlugin {
 public:
  ScaleShift(float alpha, float beta, bool relu) : alpha_(alpha), beta_(beta), relu_(relu) {}

  kiln::PluginFields serializeFields() const override {
    kiln::PluginFields f;
    f.set("alpha", alpha_);
    f.set("beta", beta_);
    f.set("activation", std::string(relu_ ? "relu" : "none"));
    return f;
  }

  Status inferOutputs(const std::vector<kiln::PluginInputInfo>& inputs, std::vector<kiln::PluginOutputInfo>& outputs,
                      kiln::IDimBuilder&) const override {
    if (inputs.size() != 1 || !inputs[0].present || outputs.size() != 1)
      return Status(StatusCode::kInvalidModel, "ScaleShift takes one input and gives one output");
    outputs[0].dtype = inputs[0].dtype;
    outputs[0].dims = inputs[0].dims;
    return Status::Ok();
  }

  bool supportsTypes(PluginBackend backend, const std::vector<DataType>& in,
                     const std::vector<DataType>& out) const override {
    if (in.size() != 1 || out.size() != 1 || in[0] != out[0]) return false;
    return in[0] == DataType::kFloat32 || (backend == PluginBackend::kCuda && in[0] == DataType::kFloat16);
  }

  Status runCpu(const std::vector<kiln::PluginTensor>& in, std::vector<kiln::PluginTensor>& out,
                const kiln::PluginCpuContext&) const override {
    const float* x = in[0].as<const float>();
    float* y = out[0].as<float>();
    const int64_t n = in[0].numel();
    for (int64_t i = 0; i < n; ++i) {
      const float v = alpha_ * x[i] + beta_;
      y[i] = relu_ ? (v > 0.f ? v : 0.f) : v;
    }
    return Status::Ok();
  }

#ifdef KILN_EXAMPLE_PLUGINS_CUDA
  bool hasCuda() const override { return true; }
  Status enqueueCuda(const std::vector<kiln::PluginTensor>& in, std::vector<kiln::PluginTensor>& out,
                     const kiln::PluginCudaContext& ctx) const override {
    const char* err = LaunchScaleShift(in[0].data, out[0].data, in[0].numel(), in[0].dtype == DataType::kFloat16,
                                       alpha_, beta_, relu_, ctx.stream);
    return err ? Status(StatusCode::kCudaError, std::string("ScaleShift kernel: ") + err) : Status::Ok();
  }
#endif

 private:
  float alpha_, beta_;
  bool relu_;
};

}  // namespace

std::vector<kiln::PluginFieldSpec> ScaleShiftCreator::fieldSpecs() const {
  return {kiln::PluginFieldSpec::Of("alpha", 1.0f), kiln::PluginFieldSpec::Of("beta", 0.0f),
          kiln::PluginFieldSpec::Of("activation", std::string("none"))};
}

std::vector<DataType> ScaleShiftCreator::floatTypes(PluginBackend backend) const {
  if (backend == PluginBackend::kCuda) return {DataType::kFloat32, DataType::kFloat16};
  return {DataType::kFloat32};
}

kiln::Result<std::unique_ptr<kiln::IPlugin>> ScaleShiftCreator::create(const kiln::PluginFields& fields) const {
  auto alpha = fields.get<float>("alpha");
  auto beta = fields.get<float>("beta");
  auto act = fields.get<std::string>("activation");
  if (!alpha.ok()) return alpha.status();
  if (!beta.ok()) return beta.status();
  if (!act.ok()) return act.status();
  if (*act != "none" && *act != "relu")
    return Status(StatusCode::kInvalidArgument, "activation must be 'none' or 'relu', not '" + *act + "'");
  return std::unique_ptr<kiln::IPlugin>(new ScaleShift(*alpha, *beta, *act == "relu"));
}

}  // namespace kiln_examples
