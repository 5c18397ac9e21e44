// The one table of shape functions: each op family registers its ops here, in this order.
#include "shape/families.h"

namespace kiln {

const ShapeRegistry& Shapes() {
  static const ShapeRegistry reg = [] {
    ShapeRegistry r;
    RegisterElementwiseShapes(r);
    RegisterReduceShapes(r);
    RegisterNormShapes(r);
    RegisterLinalgShapes(r);
    RegisterConvShapes(r);
    RegisterTensorShapes(r);
    RegisterIndexShapes(r);
    RegisterResizeShapes(r);
    RegisterFusedShapes(r);
    return r;
  }();
  return reg;
}

std::vector<std::string> ShapeRegistry::OpTypes() const {
  std::vector<std::string> r;
  for (const auto& [k, v] : fns_) r.push_back(k);
  return r;
}

}  // namespace kiln
