// CPU kernels of two data-movement ops of onnx 1.23: BitCast (an element's bits read as another type of the same
// width) and TensorScatter (a KV-cache update: update's rows written into a copy of past_cache at each batch's
// write index along the sequence axis, linear or wrapping around).
#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cpu/common.h"
#include "backends/cpu/tensor_util.h"
#include "core/element_bits.h"

namespace kiln::cpu {
namespace {

Status BitCastKernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.in(0);
  KILN_ASSIGN_OR_RETURN(const int64_t code, n.attr_int("to", 0));
  const DataType to = static_cast<DataType>(code), from = x.dtype();
  if (!IsSupportedType(to) || !IsSupportedType(from) || ElementBits(to) != ElementBits(from))
    return Err(StatusCode::kInvalidArgument, "{}: cannot bitcast {} to {} (types of the same width only)", n.Where(),
               DataTypeName(from), DataTypeName(to));
  Tensor& y = AllocOutput(c, 0, to, x.shape());
  if (x.numel() == 0) return Status::Ok();
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  uint8_t* dst = static_cast<uint8_t*>(y.raw());
  const int bits = ElementBits(from);
  if (bits < 8) {
    // Sub-byte types are held one value per byte: the value's bits are the byte's low bits (int4 and int2 are stored
    // sign-extended, so the target's sign is extended again).
    const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
    const bool is_signed = to == DataType::kInt4 || to == DataType::kInt2;
    for (int64_t i = 0; i < x.numel(); ++i) {
      uint8_t v = src[i] & mask;
      if (is_signed && ((v >> (bits - 1)) & 1)) v = static_cast<uint8_t>(v | ~mask);
      dst[i] = v;
    }
  } else if (to == DataType::kBool) {
    // kiln's bools are the bytes 0 and 1: any nonzero byte reads as true.
    for (int64_t i = 0; i < x.numel(); ++i) dst[i] = src[i] != 0 ? 1 : 0;
  } else {
    std::memcpy(dst, src, x.nbytes());  // the host is little-endian, as ONNX's byte order
  }
  return Status::Ok();
}

Status TensorScatterKernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& past = c.in(0);
  const Tensor& update = c.in(1);
  const Tensor* indices = c.input(2);
  const std::string mode = n.gets("mode", "linear");
  if (mode != "linear" && mode != "circular")
    return Err(StatusCode::kInvalidArgument, "{}: mode must be 'linear' or 'circular', got '{}'", n.Where(), mode);
  const bool circular = mode == "circular";
  const int64_t rank = past.rank(), axis_attr = n.geti("axis", -2);
  const auto axis = NormalizeAxis(axis_attr, rank);
  if (!axis || *axis == 0)
    return Err(StatusCode::kInvalidArgument, "{}: axis {} must name a dim of past_cache {} other than 0 (the batch)",
               n.Where(), axis_attr, past.Describe());
  bool same = update.dtype() == past.dtype() && update.rank() == rank;
  for (int64_t d = 0; same && d < rank; ++d)
    same = d == *axis ? update.dim(d) <= past.dim(d) : update.dim(d) == past.dim(d);
  if (!same)
    return Err(StatusCode::kInvalidArgument,
               "{}: update {} must be past_cache's type and match past_cache {} in every dim but axis {}, and be no "
               "longer there", n.Where(), update.Describe(), past.Describe(), *axis);
  const size_t es = DataTypeSize(past.dtype());
  if (es == 0)
    return Err(StatusCode::kUnsupported, "{}: element type {} is not supported", n.Where(),
               DataTypeName(past.dtype()));
  const int64_t batch = past.dim(0), max_len = past.dim(*axis), len = update.dim(*axis);
  if (indices && (indices->dtype() != DataType::kInt64 || indices->rank() != 1 || indices->dim(0) != batch))
    return Err(StatusCode::kInvalidArgument, "{}: write_indices {} must be int64[{}] (one per batch)", n.Where(),
               indices->Describe(), batch);
  auto start = [&](int64_t b) { return indices ? indices->data<int64_t>()[b] : int64_t{0}; };
  if (!circular && len > 0)
    for (int64_t b = 0; b < batch; ++b)
      if (start(b) < 0 || start(b) > max_len - len)
        return Err(StatusCode::kInvalidArgument,
                   "{}: batch {} writes {} rows at index {} of a cache of {} (linear mode needs 0 <= index and "
                   "index + rows <= the cache length; use mode 'circular' to wrap)", n.Where(), b, len, start(b),
                   max_len);
  Tensor& y = AllocOutput(c, 0, past.dtype(), past.shape());
  if (past.numel() == 0) return Status::Ok();
  std::memcpy(y.raw(), past.raw(), past.nbytes());
  if (len == 0) return Status::Ok();
  int64_t prefix = 1, inner = 1;
  for (int64_t d = 0; d < *axis; ++d) prefix *= past.dim(d);
  for (int64_t d = *axis + 1; d < rank; ++d) inner *= past.dim(d);
  const int64_t per_batch = prefix / batch;
  const uint8_t* src = static_cast<const uint8_t*>(update.raw());
  uint8_t* dst = static_cast<uint8_t*>(y.raw());
  const size_t row = static_cast<size_t>(inner) * es;
  ParallelFor(prefix, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t first = start(p / per_batch);
      for (int64_t s = 0; s < len; ++s) {
        int64_t at = first + s;
        if (circular) at = ((at % max_len) + max_len) % max_len;
        std::memcpy(dst + static_cast<size_t>(p * max_len + at) * row, src + static_cast<size_t>(p * len + s) * row,
                    row);
      }
    }
  }, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, len * inner)));
  return Status::Ok();
}

}  // namespace

void RegisterBitCastScatterKernels(KernelRegistry& r) {
  r.Add("BitCast", BitCastKernel);
  r.Add("TensorScatter", TensorScatterKernel);
}

}  // namespace kiln::cpu
