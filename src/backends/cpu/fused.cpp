#include "backends/cpu/families.h"

namespace kiln::cpu {

void RegisterFusedKernels(KernelRegistry& r) {}

}  // namespace kiln::cpu
