// CUDA layers of the index family (placeholder registration, filled in by the family's implementation).
#include "backends/cuda/families.h"

namespace kiln::cuda {
void RegisterIndexLayers(LayerRegistry& r) {}
}  // namespace kiln::cuda
