// CUDA layers of the attention family (placeholder registration, filled in by the family's implementation).
#include "backends/cuda/families.h"

namespace kiln::cuda {
void RegisterAttentionLayers(LayerRegistry& r) {}
}  // namespace kiln::cuda
