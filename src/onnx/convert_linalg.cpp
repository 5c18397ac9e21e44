// Converters of the linear-algebra family. MatMul and Einsum are already canonical; Gemm before opset 7
// carried a `broadcast` attribute (C broadcasting is always on in kiln's Gemm), which is dropped.
#include "onnx/families.h"

namespace kiln {

void RegisterLinalgConverters(ConverterRegistry& r) {
  r.Add("MatMul", OpSupport{1, {}});
  r.Add("Gemm", OpSupport{6, [](ConvertContext& c) -> Status {
                            c.node.attrs.erase("broadcast");
                            return Status::Ok();
                          }});
  r.Add("Einsum", OpSupport{12, {}});
}

}  // namespace kiln
