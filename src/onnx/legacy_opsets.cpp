// Opsets 1 to 6 (legacy_opsets.h). What changed, from onnx's operator schemas (the versions 2..7 whose attributes,
// inputs or outputs differ from the version before):
//  - consumed_inputs (an in-place hint of versions 1..5, removed in 6) on the unary/pointwise ops, BatchNormalization,
//    Dropout, InstanceNormalization, Sum/Max/Min/Mean: dropped, it never changed a result;
//  - broadcast/axis of the binary ops before 7 (and Gemm's broadcast before 7): broadcast=1 with an axis aligns the
//    second input at that axis, which numpy broadcasting (7+) does only when the axis lines it up with the end: that
//    case is refused; otherwise the attributes are dropped (equal shapes and suffix broadcasts mean the same);
//  - is_test of Dropout and BatchNormalization (inference either way): dropped;
//  - Cast-1's `to` is a type name string: translated to the type code;
//  - Concat before 4 had a default axis of 1: made explicit;
//  - AveragePool before 7 has no count_include_pad (its default, 0, is the old behaviour); PRelu-6 broadcast less:
//    both taken as they are;
//  - Pad-1 (paddings), Reshape-1 (shape as an attribute), Split-1 (split as an input), Tile-1 (tiles/axis inputs),
//    Upsample-1 (height/width scales),
//    LpPool/GlobalLpPool-1 (float p), and the RNNs before 7: refused, naming the change.
#include "onnx/legacy_opsets.h"

#include <fmt/format.h>

#include <cstring>
#include <map>

#include "onnx.pb.h"

namespace kiln::onnx_import {
namespace {

bool OneOf(const std::string& op, std::initializer_list<const char*> ops) {
  for (const char* o : ops)
    if (op == o) return true;
  return false;
}

}  // namespace

std::string RewriteLegacyNode(Node& n) {
  if (!n.domain.empty() || n.opset >= 7) return "";
  const std::string& op = n.op_type;
  if (n.opset < 6) n.attrs.erase("consumed_inputs");
  if (OneOf(op, {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"})) {
    auto b = n.attrs.find("broadcast");
    const bool broadcast = b != n.attrs.end() && b->second.i != 0;
    if (broadcast && n.attrs.count("axis"))
      return fmt::format("{}-{}: broadcast=1 with an axis aligns the second input at axis {}, which opset 7's numpy "
                         "broadcasting does not express; convert the model to opset 7 or later with "
                         "onnx.version_converter (it inserts the reshape)",
                         op, n.opset < 6 && !OneOf(op, {"Add", "Sub", "Mul", "Div"}) ? 1 : 6, n.attrs["axis"].i);
    n.attrs.erase("broadcast");
    n.attrs.erase("axis");
    return "";
  }
  if (op == "Gemm") {
    n.attrs.erase("broadcast");
    return "";
  }
  if (op == "Dropout" || op == "BatchNormalization") {
    n.attrs.erase("is_test");
    return "";
  }
  if (op == "Cast" && n.opset < 6) {
    auto it = n.attrs.find("to");
    if (it != n.attrs.end() && it->second.kind == Attribute::Kind::kString) {
      ::onnx::TensorProto_DataType t;
      if (!::onnx::TensorProto_DataType_Parse(it->second.s, &t))
        return fmt::format("Cast-1: 'to' is '{}', which is not an ONNX type name", it->second.s);
      it->second = Attribute::Int(static_cast<int64_t>(t));
    }
    return "";
  }
  if (op == "Concat" && n.opset < 4) {
    if (!n.attrs.count("axis")) n.attrs["axis"] = Attribute::Int(1);
    return "";
  }
  struct Refused {
    const char* op;
    int64_t version;  // the version that changed it, at or below 7
    const char* what;
  };
  static constexpr Refused kRefused[] = {
      {"Pad", 2, "'paddings' became 'pads'"},
      {"Reshape", 5, "the 'shape' attribute became an input"},
      {"Split", 2, "the split sizes moved from an input to an attribute"},
      {"Tile", 6, "'tiles' and 'axis' became one 'repeats' input"},
      {"Upsample", 7, "'height_scale'/'width_scale' became 'scales'"},
      {"LpPool", 2, "'p' became an integer"},
      {"GlobalLpPool", 2, "'p' became an integer"},
      {"GRU", 7, "'output_sequence' was removed (and version 3 added linear_before_reset)"},
      {"LSTM", 7, "'output_sequence' was removed"},
      {"RNN", 7, "'output_sequence' was removed"},
  };
  for (const Refused& r : kRefused)
    if (op == r.op && n.opset < r.version)
      return fmt::format("{}-{}: {} (from the version of opset {}); convert the model to opset {} or later with "
                         "onnx.version_converter",
                         op, r.version, r.what, n.opset, r.version);
  return "";
}

}  // namespace kiln::onnx_import
