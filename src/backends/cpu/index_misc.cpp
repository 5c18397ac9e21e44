// CPU reference kernels for OneHot and NonZero (whose output size depends on the data: the kernel
// allocates it).
#include <cmath>
#include <cstring>

#include "backends/cpu/common.h"
#include "backends/cpu/index_util.h"

namespace kiln::cpu {
namespace {

using idx::EnsureOutput;

Status OneHot(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& ind = ctx.in(0);
  const Tensor& depth_t = ctx.in(1);
  const Tensor& values = ctx.in(2);
  if (depth_t.numel() != 1)
    return Err(StatusCode::kInvalidArgument, "{}: depth must hold one value, got {}", n.Where(), depth_t.Describe());
  if (values.numel() != 2)
    return Err(StatusCode::kInvalidArgument, "{}: values must hold [off, on], got {}", n.Where(), values.Describe());
  const double dd = depth_t.GetAsDouble(0);
  if (!(dd >= 1) || dd > 1e12)
    return Err(StatusCode::kInvalidArgument, "{}: depth must be >= 1, got {}", n.Where(), dd);
  const int64_t depth = static_cast<int64_t>(dd);
  const int64_t a = n.geti("axis", -1);
  auto axis = NormalizeAxis(a, ind.rank() + 1);
  if (!axis) return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", n.Where(), a, ind.rank() + 1);
  std::vector<int64_t> os = ind.shape();
  os.insert(os.begin() + *axis, depth);
  KILN_ASSIGN_OR_RETURN(Tensor* out_ptr, EnsureOutput(ctx, 0, values.dtype(), os));
  Tensor& out = *out_ptr;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < ind.rank(); ++d) (d < *axis ? outer : inner) *= ind.dim(d);
  const size_t es = DataTypeSize(values.dtype());
  const auto* off = static_cast<const uint8_t*>(values.raw());
  const uint8_t* on = off + es;
  auto* dst = static_cast<uint8_t*>(out.raw());
  const int64_t total = out.numel();
  for (int64_t i = 0; i < total; ++i) std::memcpy(dst + i * es, off, es);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const double raw = ind.GetAsDouble(o * inner + i);
      if (!std::isfinite(raw)) continue;
      int64_t v = static_cast<int64_t>(raw);
      if (v < 0) v += depth;
      if (v < 0 || v >= depth) continue;  // out-of-range indices give an all-off row (ONNX semantics)
      std::memcpy(dst + ((o * depth + v) * inner + i) * es, on, es);
    }
  }
  return Status::Ok();
}

Status NonZero(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.in(0);
  const int64_t total = x.numel();
  std::vector<uint8_t> nz(total);
  KILN_RETURN_IF_ERROR(DispatchAll(x.dtype(), n, [&]<typename T>() {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < total; ++i) nz[i] = Load(p, i) != ComputeT<T>(0);
  }));
  int64_t count = 0;
  for (uint8_t v : nz) count += v;
  const int64_t rank = x.rank();
  const int64_t rows = rank == 0 ? 1 : rank;
  KILN_ASSIGN_OR_RETURN(Tensor* out_ptr, EnsureOutput(ctx, 0, DataType::kInt64, {rows, count}));
  Tensor& out = *out_ptr;
  int64_t* o = out.data<int64_t>();
  if (rank == 0) {
    if (count) o[0] = 0;
    return Status::Ok();
  }
  std::vector<int64_t> coord(rank, 0);
  int64_t c = 0;
  for (int64_t i = 0; i < total; ++i) {
    if (nz[i]) {
      for (int64_t d = 0; d < rank; ++d) o[d * count + c] = coord[d];
      ++c;
    }
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++coord[d] < x.dim(d)) break;
      coord[d] = 0;
    }
  }
  return Status::Ok();
}

}  // namespace

void RegisterIndexMiscKernels(KernelRegistry& r) {
  r.Add("OneHot", OneHot);
  r.Add("NonZero", NonZero);
}

}  // namespace kiln::cpu
