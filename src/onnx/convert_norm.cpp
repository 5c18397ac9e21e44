// Converters of the normalization family.
//  - BatchNormalization: opset 7..15 share one kernel; the removed is_test/consumed_inputs attributes are
//    dropped (spatial=0 of opset 7..8 is kept and handled by the kernel).
//  - GroupNormalization: opset 18..20 give scale/bias per GROUP, opset 21 per CHANNEL; the older form is
//    recorded as kiln_scale_per_group = 1 so one kernel handles both.
#include "core/error.h"
#include "onnx/families.h"

namespace kiln {

namespace {

Status ConvertBatchNorm(ConvertContext& c) {
  c.node.attrs.erase("is_test");
  c.node.attrs.erase("consumed_inputs");
  if (c.opset >= 9) c.node.attrs.erase("spatial");
  return Status::Ok();
}

Status ConvertGroupNorm(ConvertContext& c) {
  if (c.opset < 21) c.node.attrs["kiln_scale_per_group"] = Attribute::Int(1);
  return Status::Ok();
}

}  // namespace

void RegisterNormConverters(ConverterRegistry& r) {
  r.Add("BatchNormalization", OpSupport{7, ConvertBatchNorm});
  r.Add("InstanceNormalization", OpSupport{6, {}});
  r.Add("LayerNormalization", OpSupport{17, {}});
  r.Add("GroupNormalization", OpSupport{18, ConvertGroupNorm});
}

}  // namespace kiln
