// CUDA layers of the pool family (placeholder registration, filled in by the family's implementation).
#include "backends/cuda/families.h"

namespace kiln::cuda {
void RegisterPoolLayers(LayerRegistry& r) {}
}  // namespace kiln::cuda
