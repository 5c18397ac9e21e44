// CUDA layers of the reduce family (placeholder registration, filled in by the family's implementation).
#include "backends/cuda/families.h"

namespace kiln::cuda {
void RegisterReduceLayers(LayerRegistry& r) {}
}  // namespace kiln::cuda
