// Converters of the convolution/pooling family. All of these keep their attribute form across opsets; the
// kernels read defaults themselves. LpPool-1 gave `p` as a float; it becomes the int of later opsets.
#include <cmath>

#include "onnx/families.h"

namespace kiln {

namespace {

Status ConvertLpPool(ConvertContext& c) {
  auto it = c.node.attrs.find("p");
  if (it != c.node.attrs.end() && it->second.kind == Attribute::Kind::kFloat)
    it->second = Attribute::Int(static_cast<int64_t>(std::lround(it->second.f)));
  return Status::Ok();
}

}  // namespace

void RegisterConvConverters(ConverterRegistry& r) {
  r.Add("Conv", OpSupport{1, {}});
  r.Add("ConvTranspose", OpSupport{1, {}});
  r.Add("MaxPool", OpSupport{1, {}});
  r.Add("AveragePool", OpSupport{1, {}});
  r.Add("LpPool", OpSupport{1, ConvertLpPool});
  r.Add("GlobalAveragePool", OpSupport{1, {}});
  r.Add("GlobalMaxPool", OpSupport{1, {}});
  r.Add("GlobalLpPool", OpSupport{1, ConvertLpPool});
}

}  // namespace kiln
