// Converters of the reduction family. Canonical forms the kernels and shape functions see:
//  - Reduce*: axes as int64 input 1 (the attribute form before opset 13 for ReduceSum, 18 for the others).
//  - TopK: K as int64 input 1 of shape [1] (the attribute form before opset 10).
//  - Softmax/LogSoftmax: an explicit `axis`; before opset 13 the op flattened the input to 2-D at `axis`
//    (default 1), recorded as the internal attribute kiln_flatten_2d = 1.
#include "core/error.h"
#include "onnx/families.h"

namespace kiln {

namespace {

// Reduce* whose axes became an input at `input_opset`.
OpSupport ReduceSupport(int64_t input_opset) {
  return OpSupport{1, [input_opset](ConvertContext& c) -> Status {
                     if (c.opset >= input_opset) return Status::Ok();
                     if (c.node.input(1))
                       return Err(StatusCode::kInvalidModel, "{}: opset {} takes axes as an attribute, not an input",
                                  c.node.Where(), c.opset);
                     auto it = c.node.attrs.find("axes");
                     if (it != c.node.attrs.end() && it->second.kind != Attribute::Kind::kInts &&
                         it->second.kind != Attribute::Kind::kInt)
                       return Err(StatusCode::kInvalidModel, "{}: attribute 'axes' must be a list of ints, but the model gives {}",
                                  c.node.Where(), AttributeKindName(it->second.kind));
                     // Before the input form there was no noop_with_empty_axes: missing/empty axes reduce all.
                     c.node.attrs.erase("noop_with_empty_axes");
                     MoveIntsAttrToInput(c, "axes", 1);
                     return Status::Ok();
                   }};
}

Status ConvertTopK(ConvertContext& c) {
  if (c.opset >= 10) return Status::Ok();
  auto it = c.node.attrs.find("k");
  if (it == c.node.attrs.end())
    return Err(StatusCode::kInvalidModel, "{}: opset {} requires the attribute 'k'", c.node.Where(), c.opset);
  if (it->second.kind != Attribute::Kind::kInt)
    return Err(StatusCode::kInvalidModel, "{}: attribute 'k' must be an int, but the model gives {}", c.node.Where(),
               AttributeKindName(it->second.kind));
  MoveIntsAttrToInput(c, "k", 1);
  return Status::Ok();
}

Status ConvertSoftmax(ConvertContext& c) {
  auto it = c.node.attrs.find("axis");
  if (it != c.node.attrs.end() && it->second.kind != Attribute::Kind::kInt)
    return Err(StatusCode::kInvalidModel, "{}: attribute 'axis' must be an int, but the model gives {}",
               c.node.Where(), AttributeKindName(it->second.kind));
  if (c.opset < 13) {
    if (it == c.node.attrs.end()) c.node.attrs["axis"] = Attribute::Int(1);
    c.node.attrs["kiln_flatten_2d"] = Attribute::Int(1);
  } else if (it == c.node.attrs.end()) {
    c.node.attrs["axis"] = Attribute::Int(-1);
  }
  return Status::Ok();
}

}  // namespace

void RegisterReduceConverters(ConverterRegistry& r) {
  r.Add("ReduceSum", ReduceSupport(13));
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"})
    r.Add(op, ReduceSupport(18));
  r.Add("ArgMax");
  r.Add("ArgMin");
  r.Add("TopK", OpSupport{1, ConvertTopK});
  r.Add("CumSum", OpSupport{11, {}});
  r.Add("Softmax", OpSupport{1, ConvertSoftmax});
  r.Add("LogSoftmax", OpSupport{1, ConvertSoftmax});
}

}  // namespace kiln
