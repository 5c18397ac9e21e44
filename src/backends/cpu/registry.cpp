// The one table of CPU reference kernels: each op family registers its kernels here.
#include "backends/cpu/families.h"

namespace kiln::cpu {

const KernelRegistry& Kernels() {
  static const KernelRegistry reg = [] {
    KernelRegistry r;
    RegisterElementwiseKernels(r);
    RegisterReduceKernels(r);
    RegisterNormKernels(r);
    RegisterLinalgKernels(r);
    RegisterConvKernels(r);
    RegisterTensorKernels(r);
    RegisterIndexKernels(r);
    RegisterResizeKernels(r);
    RegisterRnnKernels(r);
    RegisterTransformerKernels(r);
    RegisterFusedKernels(r);
    RegisterQuantizedKernels(r);
    RegisterControlFlowKernels(r);
    RegisterSequenceKernels(r);
    RegisterLlmKernels(r);
    RegisterSignalKernels(r);
    return r;
  }();
  return reg;
}

const KernelFn* KernelRegistry::Find(const Node& n) const {
  if (const KernelFn* f = Find(QualifiedOpName(n))) return f;
  return PluginKernel(n);
}

std::vector<std::string> KernelRegistry::OpTypes() const {
  std::vector<std::string> r;
  for (const auto& [k, v] : fns_) r.push_back(k);
  return r;
}

}  // namespace kiln::cpu
