// Converters for Resize and Upsample. Both end as Resize with inputs (X, roi, scales, sizes):
//  - Resize-10 (X, scales) moves scales to slot 2 and spells out its fixed behaviour (asymmetric
//    coordinates, nearest rounds down);
//  - Upsample-7 (scales attribute) and Upsample-9 (scales input) become Resize with asymmetric coordinates
//    and nearest_mode floor (output(i) = input(floor(i / scale))).
#include "core/error.h"
#include "onnx/families.h"

namespace kiln {
namespace {

Status ConvertResize(ConvertContext& c) {
  Node& n = c.node;
  const int64_t opset = n.opset > 0 ? n.opset : c.opset;
  if (opset < 11) {
    if (n.inputs.size() < 2 || !n.inputs[1])
      return Err(StatusCode::kInvalidModel, "{}: Resize-10 needs inputs (X, scales)", n.Where());
    Value* scales = n.inputs[1];
    n.inputs.resize(1);
    SetInput(n, 1, nullptr);
    SetInput(n, 2, scales);
    n.attrs["coordinate_transformation_mode"] = Attribute::String("asymmetric");
    n.attrs["nearest_mode"] = Attribute::String("floor");
  }
  return Status::Ok();
}

Status ConvertUpsample(ConvertContext& c) {
  Node& n = c.node;
  const int64_t opset = n.opset > 0 ? n.opset : c.opset;
  std::string mode = n.gets("mode", "nearest");
  if (mode == "bilinear") mode = "linear";
  if (mode != "nearest" && mode != "linear")
    return Err(StatusCode::kUnsupported, "{}: Upsample mode '{}' is not supported (nearest, linear)", n.Where(), mode);
  Value* scales = nullptr;
  if (opset < 9 || n.has_attr("scales")) {
    auto it = n.attrs.find("scales");
    if (it == n.attrs.end() || it->second.kind != Attribute::Kind::kFloats)
      return Err(StatusCode::kInvalidModel, "{}: Upsample-{} needs a 'scales' float-list attribute", n.Where(), opset);
    std::vector<float> s = it->second.floats;
    n.attrs.erase(it);
    scales = c.graph.AddConstant(n.name + "_scales", Tensor::FromFloat(s, {static_cast<int64_t>(s.size())}));
  } else {
    if (n.inputs.size() < 2 || !n.inputs[1])
      return Err(StatusCode::kInvalidModel, "{}: Upsample-9 needs inputs (X, scales)", n.Where());
    scales = n.inputs[1];
  }
  n.op_type = "Resize";
  n.inputs.resize(1);
  SetInput(n, 1, nullptr);
  SetInput(n, 2, scales);
  n.attrs.clear();
  n.attrs["mode"] = Attribute::String(mode);
  n.attrs["coordinate_transformation_mode"] = Attribute::String("asymmetric");
  n.attrs["nearest_mode"] = Attribute::String("floor");
  return Status::Ok();
}

}  // namespace

void RegisterResizeConverters(ConverterRegistry& r) {
  r.Add("Resize", OpSupport{10, ConvertResize});
  r.Add("Upsample", OpSupport{7, ConvertUpsample});
}

}  // namespace kiln
