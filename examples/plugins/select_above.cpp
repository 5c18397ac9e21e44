// SelectAbove: y = the elements of x (float32, any shape) greater than `threshold`, in order. The output's length
// depends on the data: the shape function leaves it unknown with the bound "x's element count" (max_dims), and
// the kernels give the real length through the output allocator.
#include <string>

#include "example_kernels.h"
#include "example_plugins.h"

namespace kiln_examples {

using kiln::DataType;
using kiln::Status;
using kiln::StatusCode;

namespace {

class SelectAbove final : public kiln::IPlugin {
 public:
  explicit SelectAbove(float threshold) : threshold_(threshold) {}

  kiln::PluginFields serializeFields() const override {
    kiln::PluginFields f;
    f.set("threshold", threshold_);
    return f;
  }

  Status inferOutputs(const std::vector<kiln::PluginInputInfo>& inputs, std::vector<kiln::PluginOutputInfo>& outputs,
                      kiln::IDimBuilder& dims) const override {
    if (inputs.size() != 1 || !inputs[0].present || outputs.size() != 1)
      return Status(StatusCode::kInvalidModel, "SelectAbove takes one input and gives one output");
    kiln::PluginDim count = 1;
    for (const kiln::PluginDim& d : inputs[0].dims) count = dims.mul(count, d);
    outputs[0].dtype = inputs[0].dtype;
    outputs[0].dims = {kiln::PluginDim::Unknown()};  // how many pass depends on the values
    outputs[0].max_dims = {count};                   // at most all of them
    return Status::Ok();
  }

  // float32 in and out on both backends (the default supportsTypes).

  Status runCpu(const std::vector<kiln::PluginTensor>& in, std::vector<kiln::PluginTensor>&,
                const kiln::PluginCpuContext& ctx) const override {
    const float* x = in[0].as<const float>();
    const int64_t n = in[0].numel();
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) count += x[i] > threshold_;
    auto* y = static_cast<float*>(ctx.outputs->allocate(0, {count}));
    if (!y) return Status(StatusCode::kInternal, "the output of " + std::to_string(count) + " elements was refused");
    for (int64_t i = 0, k = 0; i < n; ++i)
      if (x[i] > threshold_) y[k++] = x[i];
    return Status::Ok();
  }

#ifdef KILN_EXAMPLE_PLUGINS_CUDA
  bool hasCuda() const override { return true; }
  size_t cudaWorkspaceBytes(const std::vector<kiln::PluginTensor>& in,
                            const std::vector<kiln::PluginTensor>&) const override {
    return SelectAboveWorkspaceBytes(in[0].numel());
  }
  Status enqueueCuda(const std::vector<kiln::PluginTensor>& in, std::vector<kiln::PluginTensor>&,
                     const kiln::PluginCudaContext& ctx) const override {
    const int64_t n = in[0].numel();
    if (ctx.workspace_bytes < SelectAboveWorkspaceBytes(n))
      return Status(StatusCode::kInternal, "SelectAbove: the workspace is smaller than cudaWorkspaceBytes()");
    int64_t count = 0;
    if (const char* err = RunSelectAbove(in[0].as<const float>(), n, threshold_, ctx.workspace, &count, ctx.stream))
      return Status(StatusCode::kCudaError, std::string("SelectAbove kernel: ") + err);
    auto* y = static_cast<float*>(ctx.outputs->allocate(0, {count}));
    if (!y) return Status(StatusCode::kInternal, "the output of " + std::to_string(count) + " elements was refused");
    if (const char* err = CopySelected(ctx.workspace, y, count, ctx.stream))
      return Status(StatusCode::kCudaError, std::string("SelectAbove copy: ") + err);
    return Status::Ok();
  }
#endif

 private:
  float threshold_;
};

}  // namespace

std::vector<kiln::PluginFieldSpec> SelectAboveCreator::fieldSpecs() const {
  return {kiln::PluginFieldSpec::Of("threshold", 0.0f)};
}

kiln::Result<std::unique_ptr<kiln::IPlugin>> SelectAboveCreator::create(const kiln::PluginFields& fields) const {
  auto t = fields.get<float>("threshold");
  if (!t.ok()) return t.status();
  return std::unique_ptr<kiln::IPlugin>(new SelectAbove(*t));
}

}  // namespace kiln_examples
