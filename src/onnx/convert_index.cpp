// Converters of the indexing ops. Most are already canonical; the deprecated opset 9-10 "Scatter" is
// ScatterElements under another name.
#include "onnx/families.h"

namespace kiln {

void RegisterIndexConverters(ConverterRegistry& r) {
  r.Add("Gather", OpSupport{1, {}});
  r.Add("GatherElements", OpSupport{11, {}});
  r.Add("GatherND", OpSupport{11, {}});
  r.Add("ScatterND", OpSupport{11, {}});
  r.Add("ScatterElements", OpSupport{11, {}});
  r.Add("Scatter", OpSupport{9, [](ConvertContext& c) {
                               c.node.op_type = "ScatterElements";
                               return Status::Ok();
                             }});
  r.Add("OneHot", OpSupport{9, {}});
  r.Add("NonZero", OpSupport{9, {}});
  r.Add("NonMaxSuppression", OpSupport{10, {}});
}

}  // namespace kiln
