// CUDA layers of the pointwise family (placeholder registration, filled in by the family's implementation).
#include "backends/cuda/families.h"

namespace kiln::cuda {
void RegisterPointwiseLayers(LayerRegistry& r) {}
}  // namespace kiln::cuda
