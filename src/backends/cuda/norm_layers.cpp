// CUDA layers of the norm family (placeholder registration, filled in by the family's implementation).
#include "backends/cuda/families.h"

namespace kiln::cuda {
void RegisterNormLayers(LayerRegistry& r) {}
}  // namespace kiln::cuda
