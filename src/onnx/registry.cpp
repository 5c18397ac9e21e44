// The one table of ONNX ops kiln imports, with their converters; each op family registers its ops here.
#include "onnx/families.h"

namespace kiln {

const ConverterRegistry& Converters() {
  static const ConverterRegistry reg = [] {
    ConverterRegistry r;
    RegisterElementwiseConverters(r);
    RegisterReduceConverters(r);
    RegisterNormConverters(r);
    RegisterLinalgConverters(r);
    RegisterConvConverters(r);
    RegisterTensorConverters(r);
    RegisterIndexConverters(r);
    RegisterResizeConverters(r);
    return r;
  }();
  return reg;
}

std::vector<std::string> ConverterRegistry::OpTypes() const {
  std::vector<std::string> r;
  for (const auto& [k, v] : ops_) r.push_back(k);
  return r;
}

}  // namespace kiln
