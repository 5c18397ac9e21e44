// Shape functions of the signal-processing family: DFT (opset 17 gives the axis as an attribute, which the converter
// moves to input 2, opset 20's form), STFT and MelWeightMatrix. Complex tensors are real ones with a last dimension
// of 2 (real, imaginary); a real signal has a last dimension of 1. The window generators (HannWindow...) are in
// tensor_more.cpp.
#include "core/error.h"
#include "ops/families.h"

namespace kiln {

namespace {

bool IsIndexType(DataType t) {
  return t == DataType::kInt32 || t == DataType::kInt64 || t == DataType::kUndefined;
}

// Input i, an int32/int64 scalar (or one-element tensor): its value when known, nullopt when omitted or unknown.
Result<std::optional<int64_t>> ScalarInput(const InferContext& c, size_t i, const char* what) {
  if (!c.has_input(i)) return std::optional<int64_t>();
  const TensorInfo& t = c.in(i);
  if (!IsIndexType(t.dtype))
    return Err(StatusCode::kInvalidModel, "{}: {} (input {}) must be int32 or int64, got {}", c.node.Where(), what, i,
               DataTypeName(t.dtype));
  if (t.has_shape && t.rank() > 1)
    return Err(StatusCode::kInvalidModel, "{}: {} (input {}) must be a scalar, got shape {}", c.node.Where(), what, i,
               ShapeToString(t.shape));
  if (!t.value) return std::optional<int64_t>();
  if (t.value->numel() != 1)
    return Err(StatusCode::kInvalidModel, "{}: {} (input {}) must hold one value, it holds {}", c.node.Where(), what,
               i, t.value->numel());
  return std::optional<int64_t>(t.value->GetAsInt(0));
}

Result<bool> FlagAttr(const Node& n, const char* name, int64_t def) {
  KILN_ASSIGN_OR_RETURN(int64_t v, n.attr_int(name, def));
  if (v != 0 && v != 1) return Err(StatusCode::kInvalidModel, "{}: {} must be 0 or 1, got {}", n.Where(), name, v);
  return v != 0;
}

// DFT(input, dft_length?, axis?): input [..., 1] (real) or [..., 2] (complex); the axis dim becomes dft_length
// (floor(dft_length / 2) + 1 for a one-sided forward transform), the last dim 2 (1 for the inverse one-sided, IRFFT).
Status DftShape(InferContext& c) {
  const Node& n = c.node;
  KILN_RETURN_IF_ERROR(RequireInputs(c, 1));
  KILN_RETURN_IF_ERROR(RequireFloat(c, 0));
  KILN_ASSIGN_OR_RETURN(const bool inverse, FlagAttr(n, "inverse", 0));
  KILN_ASSIGN_OR_RETURN(const bool onesided, FlagAttr(n, "onesided", 0));
  KILN_ASSIGN_OR_RETURN(const std::optional<int64_t> length, ScalarInput(c, 1, "dft_length"));
  if (length && *length < 1)
    return Err(StatusCode::kInvalidModel, "{}: dft_length must be at least 1, got {}", n.Where(), *length);
  std::optional<int64_t> axis;
  if (c.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(axis, ScalarInput(c, 2, "axis"));
  } else {
    // Opset 20's default; a DFT-17 node's axis attribute (default 1) is input 2 once imported.
    KILN_ASSIGN_OR_RETURN(const int64_t a, n.attr_int("axis", -2));
    axis = a;
  }
  const TensorInfo& x = c.in(0);
  const int64_t out_last = onesided && inverse ? 1 : 2;
  if (!x.has_shape) {
    c.set_output_rank_unknown(0, x.dtype);
    return Status::Ok();
  }
  const int64_t r = x.rank();
  if (r < 2)
    return Err(StatusCode::kInvalidModel, "{}: the input must have rank >= 2 ([signal dims..., 1 or 2]), got {}",
               n.Where(), ShapeToString(x.shape));
  const Dim& last = x.shape[r - 1];
  if (last.known() && last.value != 1 && last.value != 2)
    return Err(StatusCode::kInvalidModel,
               "{}: the input's last dim must be 1 (real) or 2 (complex: real, imaginary), got shape {}", n.Where(),
               ShapeToString(x.shape));
  Shape out = x.shape;
  out[r - 1] = Dim(out_last);
  if (!axis) {
    // The transformed dim is not known: every signal dim may change, unless the transform keeps its length.
    if (c.has_input(1) || onesided)
      for (int64_t d = 0; d < r - 1; ++d) out[d] = Dim::Unknown();
    c.set_output(0, x.dtype, out);
    return Status::Ok();
  }
  const int64_t a = *axis < 0 ? *axis + r : *axis;
  if (a < 0 || a > r - 2)
    return Err(StatusCode::kInvalidModel,
               "{}: axis {} is out of range for an input of rank {} (the last dim holds the complex parts)", n.Where(),
               *axis, r);
  const Dim m = x.shape[a];
  Dim len;
  if (length) {
    len = Dim(*length);
  } else if (c.has_input(1)) {
    len = Dim::Unknown();
  } else if (onesided && inverse) {
    if (m.known() && m.value < 2)
      return Err(StatusCode::kInvalidModel,
                 "{}: an inverse one-sided DFT without dft_length needs at least 2 bins along axis {} "
                 "(dft_length = 2 * (bins - 1)), got {}",
                 n.Where(), a, m.value);
    len = DimMul(DimSub(m, Dim(1)), Dim(2));
  } else {
    len = m;
  }
  out[a] = onesided && !inverse ? DimAdd(DimDiv(len, Dim(2)), Dim(1)) : len;
  c.set_output(0, x.dtype, out);
  return Status::Ok();
}

// STFT(signal [batch, length, 1 or 2], frame_step, window?, frame_length?) -> [batch, frames, bins, 2].
Status StftShape(InferContext& c) {
  const Node& n = c.node;
  KILN_RETURN_IF_ERROR(RequireInputs(c, 2));
  KILN_RETURN_IF_ERROR(RequireFloat(c, 0));
  KILN_ASSIGN_OR_RETURN(const bool onesided, FlagAttr(n, "onesided", 1));
  KILN_ASSIGN_OR_RETURN(const std::optional<int64_t> step, ScalarInput(c, 1, "frame_step"));
  if (step && *step < 1)
    return Err(StatusCode::kInvalidModel, "{}: frame_step must be at least 1, got {}", n.Where(), *step);
  KILN_ASSIGN_OR_RETURN(const std::optional<int64_t> length, ScalarInput(c, 3, "frame_length"));
  if (length && *length < 1)
    return Err(StatusCode::kInvalidModel, "{}: frame_length must be at least 1, got {}", n.Where(), *length);
  const TensorInfo& x = c.in(0);
  Dim batch = Dim::Unknown(), signal = Dim::Unknown();
  if (x.has_shape) {
    if (x.rank() != 3)
      return Err(StatusCode::kInvalidModel, "{}: the signal must be [batch, length, 1 or 2], got shape {}", n.Where(),
                 ShapeToString(x.shape));
    if (x.shape[2].known() && x.shape[2].value != 1 && x.shape[2].value != 2)
      return Err(StatusCode::kInvalidModel,
                 "{}: the signal's last dim must be 1 (real) or 2 (complex: real, imaginary), got shape {}",
                 n.Where(), ShapeToString(x.shape));
    batch = x.shape[0];
    signal = x.shape[1];
  }
  Dim window = Dim::Unknown();
  if (c.has_input(2)) {
    const TensorInfo& w = c.in(2);
    if (w.dtype != x.dtype)
      return Err(StatusCode::kInvalidModel, "{}: the window is {} but the signal is {}", n.Where(),
                 DataTypeName(w.dtype), DataTypeName(x.dtype));
    if (w.has_shape && w.rank() != 1)
      return Err(StatusCode::kInvalidModel, "{}: the window must be 1-D, got shape {}", n.Where(),
                 ShapeToString(w.shape));
    if (w.has_shape) window = w.shape[0];
  }
  if (length && window.known() && window.value != *length)
    return Err(StatusCode::kInvalidModel, "{}: the window has {} elements but frame_length is {}; they must match",
               n.Where(), window.value, *length);
  Dim frame = Dim::Unknown();
  if (length) frame = Dim(*length);
  else if (c.has_input(2)) frame = window;
  else if (!c.has_input(3)) frame = signal;
  if (signal.known() && frame.known() && frame.value > signal.value)
    return Err(StatusCode::kInvalidModel, "{}: frame_length {} is longer than the signal ({} samples)", n.Where(),
               frame.value, signal.value);
  const Dim frames = DimAdd(DimDiv(DimSub(signal, frame), step ? Dim(*step) : Dim::Unknown()), Dim(1));
  const Dim bins = onesided ? DimAdd(DimDiv(frame, Dim(2)), Dim(1)) : frame;
  c.set_output(0, x.dtype, {batch, frames, bins, Dim(2)});
  return Status::Ok();
}

// MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz) ->
// [floor(dft_length / 2) + 1, num_mel_bins] of output_datatype.
Status MelWeightMatrixShape(InferContext& c) {
  const Node& n = c.node;
  KILN_RETURN_IF_ERROR(RequireInputs(c, 5));
  KILN_ASSIGN_OR_RETURN(const std::optional<int64_t> mels, ScalarInput(c, 0, "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(const std::optional<int64_t> length, ScalarInput(c, 1, "dft_length"));
  KILN_ASSIGN_OR_RETURN(const std::optional<int64_t> rate, ScalarInput(c, 2, "sample_rate"));
  for (size_t i : {3, 4}) KILN_RETURN_IF_ERROR(RequireFloat(c, i));
  if (mels && *mels < 1)
    return Err(StatusCode::kInvalidModel, "{}: num_mel_bins must be at least 1, got {}", n.Where(), *mels);
  if (length && *length < 1)
    return Err(StatusCode::kInvalidModel, "{}: dft_length must be at least 1, got {}", n.Where(), *length);
  if (rate && *rate < 1)
    return Err(StatusCode::kInvalidModel, "{}: sample_rate must be at least 1, got {}", n.Where(), *rate);
  KILN_ASSIGN_OR_RETURN(const int64_t code, n.attr_int("output_datatype", 1));
  const DataType t = static_cast<DataType>(code);
  const bool ok = t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 ||
                  t == DataType::kBFloat16 || (IsIntegerType(t) && !IsSubByteIntegerType(t));
  if (!ok)
    return Err(StatusCode::kInvalidModel, "{}: output_datatype {} is not an 8- to 64-bit integer or a float type",
               n.Where(), code);
  c.set_output(0, t, {length ? Dim(*length / 2 + 1) : Dim::Unknown(), mels ? Dim(*mels) : Dim::Unknown()});
  return Status::Ok();
}

// DFT-17: the axis attribute (default 1) becomes input 2, as opset 20 gives it.
Status ConvertDft(ConvertContext& c) {
  if (c.opset >= 20) return Status::Ok();
  KILN_ASSIGN_OR_RETURN(const int64_t axis, c.node.attr_int("axis", 1));
  c.node.attrs.erase("axis");
  Value* v = c.graph.AddConstant(c.node.name + "_axis", Tensor::Scalar(DataType::kInt64, static_cast<double>(axis)));
  SetInput(c.node, 2, v);
  return Status::Ok();
}

}  // namespace

void RegisterSignalOps(OpRegistry& r) {
  r.Onnx("DFT").Since(17).Convert(ConvertDft).Shape(DftShape);
  r.Onnx("STFT").Since(17).Shape(StftShape);
  r.Onnx("MelWeightMatrix").Since(17).Shape(MelWeightMatrixShape).KeepsFp32();
}

}  // namespace kiln
