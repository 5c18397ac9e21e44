// CUDA layers of the tensor family (placeholder registration, filled in by the family's implementation).
#include "backends/cuda/families.h"

namespace kiln::cuda {
void RegisterTensorLayers(LayerRegistry& r) {}
}  // namespace kiln::cuda
