// The CPU reference backend (see cpu_backend.h): which settings it takes, its tactics (a kernel per node, no
// timing), and node-by-node graph runs.
#include "backends/cpu/cpu_backend.h"

#include <unistd.h>

#include <thread>

#include "backends/cpu/executor.h"
#include "core/error.h"

namespace kiln::cpu {

namespace {

constexpr std::string_view kName = "cpu";

// The one report of the nodes without a CPU kernel (empty: every node has one).
Status CheckKernels(const Graph& g) {
  const auto missing = MissingKernels(g);
  if (missing.empty()) return Status::Ok();
  std::string msg = fmt::format("the {} backend has no kernel for:", kName);
  for (const auto& m : missing) msg += "\n  - " + m;
  return Status(StatusCode::kUnsupported, msg);
}

std::string TacticFor(const Node& n) {
  static const char* kBlas[] = {"Conv", "ConvTranspose", "MatMul", "Gemm", "FusedConv", "FusedGemm", "FusedMatMul"};
  for (const char* op : kBlas)
    if (n.op_type == op) return "cpu.openblas";
  return "cpu.reference";
}

class CpuBackendImpl final : public Backend {
 public:
  std::string_view Name() const override { return kName; }
  Status CheckAvailable() const override { return Status::Ok(); }
  std::string Description() const override {
    return fmt::format("the host CPU, {} hardware threads (reference kernels; GEMM and convolution through OpenBLAS)",
                       std::thread::hardware_concurrency());
  }
  BackendTraits Traits() const override { return {}; }
  // The reference kernels take every float type (reduced types computed in float32).
  bool ComputesIn(const Node& n, DataType t) const override { return true; }
  const DeviceApi* Device() const override { return nullptr; }

  bool HasKernel(const std::string& op) const override { return Kernels().Find(op) != nullptr; }
  bool Prefers(const Node& n) const override { return Kernels().Find(n) != nullptr; }

  Status CheckConfig(const BuilderConfig& cfg) const override {
    // INT8 runs here (QConv/QMatMul with exact int32 sums), and FP8 matrix products (QMatMul, float32 sums);
    // FP16/BF16 kernels do not.
    const std::pair<BuilderFlag, const char*> flags[] = {{BuilderFlag::kFP16, "--fp16"},
                                                         {BuilderFlag::kBF16, "--bf16"}};
    for (const auto& [f, name] : flags)
      if (cfg.getFlag(f))
        return Err(StatusCode::kUnsupported,
                   "{} is not available yet: the {} backend computes in the network's own types, and "
                   "reduced-precision kernels come with the CUDA backend; build without {}",
                   name, kName, name);
    if (!cfg.layerOutputTypes().empty())
      return Err(StatusCode::kUnsupported, "--layerOutputTypes needs reduced-precision kernels, which the {} backend "
                                           "does not have", kName);
    for (const auto& [layer, t] : cfg.layerPrecisions())
      if (t != DataType::kFloat32 && t != DataType::kInt8)
        return Err(StatusCode::kUnsupported,
                   "--layerPrecisions={}:{}: the {} backend computes in float32 and int8 only; give fp32 or int8",
                   layer, DataTypeName(t), kName);
    return Status::Ok();
  }

  Result<std::vector<std::string>> ChooseTactics(const BuildRequest& r) const override {
    const Graph& g = *r.engine.graph;
    KILN_RETURN_IF_ERROR(CheckKernels(g));
    std::vector<std::string> tactics;
    for (const auto& n : g.nodes()) tactics.push_back(TacticFor(*n));
    return tactics;
  }

  Result<DeviceTarget> Target() const override {
    DeviceTarget t;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page > 0) t.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
    return t;
  }

  Result<std::shared_ptr<BackendEngine>> CreateEngine(const EngineDesc& engine) const override {
    return MakeEngine(engine);
  }

  Result<std::map<std::string, Tensor>> RunGraph(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                                 const GraphRunOptions& options) const override {
    KILN_RETURN_IF_ERROR(CheckKernels(g));
    RunOptions ro;
    ro.keep_all = options.keep_all;
    ro.observe_float = options.observe_float;
    return cpu::RunGraph(g, inputs, ro);
  }

  Result<std::map<std::string, OnnxValue>> RunGraphValues(const Graph& g,
                                                          const std::map<std::string, OnnxValue>& inputs,
                                                          const GraphRunOptions& options) const override {
    KILN_RETURN_IF_ERROR(CheckKernels(g));
    RunOptions ro;
    ro.keep_all = options.keep_all;
    ro.observe_float = options.observe_float;
    return cpu::RunGraphValues(g, inputs, ro);
  }
};

}  // namespace

const Backend& CpuBackend() {
  static const CpuBackendImpl backend;
  return backend;
}

}  // namespace kiln::cpu
