// CUDA layers of the conv family (placeholder registration, filled in by the family's implementation).
#include "backends/cuda/families.h"

namespace kiln::cuda {
void RegisterConvLayers(LayerRegistry& r) {}
}  // namespace kiln::cuda
