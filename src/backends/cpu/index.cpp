// CPU reference kernels for the gather/scatter family: Gather, GatherElements, GatherND, ScatterND,
// ScatterElements. Gathers move raw bytes (any element type); scatters with a reduction compute in the
// element's compute type. Every index is checked; an out-of-range index is an error naming the node.
// OneHot and NonZero live in index_misc.cpp, NonMaxSuppression in nms.cpp, RoiAlign in roi_align.cpp.
#include <cstring>
#include <string>

#include "backends/cpu/common.h"
#include "backends/cpu/families.h"
#include "backends/cpu/index_util.h"

namespace kiln::cpu {

void RegisterIndexMiscKernels(KernelRegistry& r);  // index_misc.cpp
void RegisterNmsKernels(KernelRegistry& r);        // nms.cpp
void RegisterRoiAlignKernels(KernelRegistry& r);   // roi_align.cpp

namespace idx {

Result<Tensor*> EnsureOutput(KernelContext& ctx, size_t i, DataType dtype, const std::vector<int64_t>& shape) {
  Tensor& o = ctx.out(i);
  if (o.defined() && o.dtype() == dtype && o.shape() == shape) return &o;
  double elems = 1;
  for (int64_t d : shape) {
    if (d < 0) return Err(StatusCode::kInvalidArgument, "{}: negative output dimension in {}", ctx.node.Where(),
                          ShapeToString(shape));
    elems *= static_cast<double>(d);
  }
  if (elems * static_cast<double>(DataTypeSize(dtype)) > static_cast<double>(int64_t{1} << 46))
    return Err(StatusCode::kOutOfRange, "{}: output {} of shape {} is too large", ctx.node.Where(), i,
               ShapeToString(shape));
  o = Tensor(dtype, shape);
  if (o.numel() > 0 && !o.raw())
    return Err(StatusCode::kOutOfRange, "{}: out of memory allocating output {} ({})", ctx.node.Where(), i,
               o.Describe());
  return &o;
}

Result<std::vector<int64_t>> ReadIndices(const Node& n, const Tensor& t) {
  std::vector<int64_t> r(t.numel());
  if (t.dtype() == DataType::kInt64) {
    if (!r.empty()) std::memcpy(r.data(), t.raw(), r.size() * sizeof(int64_t));
  } else if (t.dtype() == DataType::kInt32) {
    const int32_t* p = t.data<int32_t>();
    for (size_t i = 0; i < r.size(); ++i) r[i] = p[i];
  } else {
    return Err(StatusCode::kInvalidArgument, "{}: indices must be int32 or int64, got {}", n.Where(),
               DataTypeName(t.dtype()));
  }
  return r;
}

Result<int64_t> FixIndex(const Node& n, int64_t v, int64_t dim, int64_t axis) {
  const int64_t w = v < 0 ? v + dim : v;
  if (w < 0 || w >= dim)
    return Err(StatusCode::kOutOfRange, "{}: index {} is out of range [{}, {}) on axis {}", n.Where(), v, -dim, dim,
               axis);
  return w;
}

}  // namespace idx

namespace {

using idx::EnsureOutput;
using idx::FixIndex;
using idx::ReadIndices;

int64_t Prod(const std::vector<int64_t>& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < s.size(); ++i) p *= s[i];
  return p;
}

Result<int64_t> AxisOf(const Node& n, int64_t def, int64_t rank) {
  const int64_t a = n.geti("axis", def);
  auto na = NormalizeAxis(a, rank);
  if (!na) return Err(StatusCode::kInvalidModel, "{}: axis {} is out of range for rank {}", n.Where(), a, rank);
  return *na;
}

Status Gather(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& data = ctx.in(0);
  if (data.rank() == 0) return Err(StatusCode::kInvalidArgument, "{}: data must have rank >= 1", n.Where());
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisOf(n, 0, data.rank()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(n, ctx.in(1)));
  const auto& ds = data.shape();
  const int64_t outer = Prod(ds, 0, axis), dim = ds[axis], inner = Prod(ds, axis + 1, ds.size());
  for (int64_t& v : idx) {
    KILN_ASSIGN_OR_RETURN(v, FixIndex(n, v, dim, axis));
  }
  std::vector<int64_t> os(ds.begin(), ds.begin() + axis);
  os.insert(os.end(), ctx.in(1).shape().begin(), ctx.in(1).shape().end());
  os.insert(os.end(), ds.begin() + axis + 1, ds.end());
  KILN_ASSIGN_OR_RETURN(Tensor* out_ptr, EnsureOutput(ctx, 0, data.dtype(), os));
  Tensor& out = *out_ptr;
  const size_t es = DataTypeSize(data.dtype());
  const size_t block = static_cast<size_t>(inner) * es;
  const auto* src = static_cast<const uint8_t*>(data.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  const int64_t nidx = static_cast<int64_t>(idx.size());
  ParallelFor(outer * nidx, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t o = k / nidx, j = k % nidx;
      std::memcpy(dst + k * block, src + (o * dim + idx[j]) * block, block);
    }
  }, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, inner)));
  return Status::Ok();
}

// Copies one element of `es` bytes.
inline void CopyElem(uint8_t* dst, const uint8_t* src, size_t es) {
  switch (es) {
    case 1: *dst = *src; break;
    case 2: std::memcpy(dst, src, 2); break;
    case 4: std::memcpy(dst, src, 4); break;
    case 8: std::memcpy(dst, src, 8); break;
    default: std::memcpy(dst, src, es);
  }
}

// GatherElements/ScatterElements: indices may not exceed data on any axis but `axis`.
Status CheckIndicesFit(const Node& n, const Tensor& data, const Tensor& it, int64_t axis) {
  for (int64_t d = 0; d < data.rank(); ++d)
    if (d != axis && it.dim(d) > data.dim(d))
      return Err(StatusCode::kInvalidArgument, "{}: indices {} exceed data {} on axis {}", n.Where(), it.Describe(),
                 data.Describe(), d);
  return Status::Ok();
}

// GatherElements/ScatterElements: calls fn(i, offset) for each index element i in order, with the offset in
// data (shape `ds`) it selects along `axis`; stops at the first index out of range.
template <typename Fn>
Status ForEachElementOffset(const Node& n, const std::vector<int64_t>& idx, const std::vector<int64_t>& is,
                            const std::vector<int64_t>& ds, int64_t axis, Fn&& fn) {
  const auto dstr = Strides(ds);
  std::vector<int64_t> coord(is.size(), 0);
  int64_t base = 0;  // data offset of `coord` without the axis term
  for (size_t i = 0; i < idx.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t j, FixIndex(n, idx[i], ds[axis], axis));
    fn(static_cast<int64_t>(i), base + j * dstr[axis]);
    for (int64_t d = static_cast<int64_t>(is.size()) - 1; d >= 0; --d) {
      if (++coord[d] < is[d]) {
        if (d != axis) base += dstr[d];
        break;
      }
      if (d != axis) base -= dstr[d] * (is[d] - 1);
      coord[d] = 0;
    }
  }
  return Status::Ok();
}

Status GatherElements(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& data = ctx.in(0);
  const Tensor& it = ctx.in(1);
  if (data.rank() == 0 || data.rank() != it.rank())
    return Err(StatusCode::kInvalidArgument, "{}: data {} and indices {} must have the same rank >= 1", n.Where(),
               data.Describe(), it.Describe());
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisOf(n, 0, data.rank()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(n, it));
  const auto& ds = data.shape();
  const auto& is = it.shape();
  KILN_RETURN_IF_ERROR(CheckIndicesFit(n, data, it, axis));
  KILN_ASSIGN_OR_RETURN(Tensor* out_ptr, EnsureOutput(ctx, 0, data.dtype(), is));
  Tensor& out = *out_ptr;
  const size_t es = DataTypeSize(data.dtype());
  const auto* src = static_cast<const uint8_t*>(data.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  return ForEachElementOffset(n, idx, is, ds, axis,
                              [&](int64_t i, int64_t off) { CopyElem(dst + i * es, src + off * es, es); });
}

Status GatherND(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& data = ctx.in(0);
  const Tensor& it = ctx.in(1);
  const int64_t b = n.geti("batch_dims", 0);
  const int64_t r = data.rank(), q = it.rank();
  if (q < 1 || b < 0 || b >= std::min(r, q))
    return Err(StatusCode::kInvalidArgument, "{}: batch_dims {} is invalid for data {} and indices {}", n.Where(), b,
               data.Describe(), it.Describe());
  const int64_t k = it.shape().back();
  if (k < 1 || k > r - b)
    return Err(StatusCode::kInvalidArgument, "{}: indices.shape[-1] = {} must be in [1, {}]", n.Where(), k, r - b);
  for (int64_t i = 0; i < b; ++i)
    if (data.dim(i) != it.dim(i))
      return Err(StatusCode::kInvalidArgument, "{}: batch dimension {} differs: data {} vs indices {}", n.Where(), i,
                 data.Describe(), it.Describe());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(n, it));
  const auto& ds = data.shape();
  std::vector<int64_t> os(it.shape().begin(), it.shape().end() - 1);
  os.insert(os.end(), ds.begin() + b + k, ds.end());
  KILN_ASSIGN_OR_RETURN(Tensor* out_ptr, EnsureOutput(ctx, 0, data.dtype(), os));
  Tensor& out = *out_ptr;
  const auto dstr = Strides(ds);
  const int64_t batches = Prod(ds, 0, b);
  const int64_t batch_stride = Prod(ds, b, ds.size());
  const int64_t rows_per_batch = Prod(it.shape(), b, q - 1);
  const size_t es = DataTypeSize(data.dtype());
  const size_t slice = static_cast<size_t>(Prod(ds, b + k, ds.size())) * es;
  const auto* src = static_cast<const uint8_t*>(data.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t row = 0; row < rows_per_batch; ++row) {
      const int64_t flat_row = bi * rows_per_batch + row;
      int64_t off = bi * batch_stride;
      for (int64_t j = 0; j < k; ++j) {
        KILN_ASSIGN_OR_RETURN(int64_t v, FixIndex(n, idx[flat_row * k + j], ds[b + j], b + j));
        off += v * dstr[b + j];
      }
      std::memcpy(dst + flat_row * slice, src + off * es, slice);
    }
  }
  return Status::Ok();
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Result<Reduction> ReductionOf(const Node& n) {
  const std::string s = n.gets("reduction", "none");
  if (s == "none") return Reduction::kNone;
  if (s == "add") return Reduction::kAdd;
  if (s == "mul") return Reduction::kMul;
  if (s == "max") return Reduction::kMax;
  if (s == "min") return Reduction::kMin;
  return Err(StatusCode::kInvalidModel, "{}: unknown reduction '{}'", n.Where(), s);
}

template <typename T>
inline void Apply(T* out, int64_t o, const T* upd, int64_t u, Reduction red) {
  if (red == Reduction::kNone) {
    out[o] = upd[u];
    return;
  }
  using C = ComputeT<T>;
  const C a = Load(out, o), b = Load(upd, u);
  C r;
  switch (red) {
    case Reduction::kAdd: r = static_cast<C>(a + b); break;
    case Reduction::kMul: r = static_cast<C>(a * b); break;
    case Reduction::kMax: r = a < b ? b : a; break;
    default: r = b < a ? b : a; break;
  }
  Store(out, o, r);
}

Status ScatterND(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& data = ctx.in(0);
  const Tensor& it = ctx.in(1);
  const Tensor& upd = ctx.in(2);
  KILN_ASSIGN_OR_RETURN(Reduction red, ReductionOf(n));
  if (it.rank() < 1 || upd.dtype() != data.dtype())
    return Err(StatusCode::kInvalidArgument, "{}: invalid indices {} or updates {}", n.Where(), it.Describe(),
               upd.Describe());
  const int64_t k = it.shape().back();
  if (k > data.rank())
    return Err(StatusCode::kInvalidArgument, "{}: indices.shape[-1] = {} exceeds rank of data {}", n.Where(), k,
               data.Describe());
  std::vector<int64_t> us(it.shape().begin(), it.shape().end() - 1);
  us.insert(us.end(), data.shape().begin() + k, data.shape().end());
  if (upd.shape() != us)
    return Err(StatusCode::kInvalidArgument, "{}: updates {} must have shape {}", n.Where(), upd.Describe(),
               ShapeToString(us));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(n, it));
  KILN_ASSIGN_OR_RETURN(Tensor* out_ptr, EnsureOutput(ctx, 0, data.dtype(), data.shape()));
  Tensor& out = *out_ptr;
  std::memcpy(out.raw(), data.raw(), data.nbytes());
  const auto& ds = data.shape();
  const auto dstr = Strides(ds);
  const int64_t rows = Prod(it.shape(), 0, it.rank() - 1);
  const int64_t slice = Prod(ds, k, ds.size());
  std::vector<int64_t> offs(rows);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) {
      KILN_ASSIGN_OR_RETURN(int64_t v, FixIndex(n, idx[row * k + j], ds[j], j));
      off += v * dstr[j];
    }
    offs[row] = off;
  }
  return DispatchAll(data.dtype(), n, [&]<typename T>() {
    T* o = out.data<T>();
    const T* u = upd.data<T>();
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t e = 0; e < slice; ++e) Apply(o, offs[row] + e, u, row * slice + e, red);
  });
}

Status ScatterElements(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& data = ctx.in(0);
  const Tensor& it = ctx.in(1);
  const Tensor& upd = ctx.in(2);
  KILN_ASSIGN_OR_RETURN(Reduction red, ReductionOf(n));
  if (data.rank() == 0 || it.rank() != data.rank() || upd.shape() != it.shape() || upd.dtype() != data.dtype())
    return Err(StatusCode::kInvalidArgument, "{}: data {}, indices {} and updates {} do not fit together", n.Where(),
               data.Describe(), it.Describe(), upd.Describe());
  KILN_ASSIGN_OR_RETURN(int64_t axis, AxisOf(n, 0, data.rank()));
  const auto& ds = data.shape();
  const auto& is = it.shape();
  KILN_RETURN_IF_ERROR(CheckIndicesFit(n, data, it, axis));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(n, it));
  KILN_ASSIGN_OR_RETURN(Tensor* out_ptr, EnsureOutput(ctx, 0, data.dtype(), ds));
  Tensor& out = *out_ptr;
  std::memcpy(out.raw(), data.raw(), data.nbytes());
  // Data offset of every update element, validated before anything is written.
  std::vector<int64_t> offs(idx.size());
  KILN_RETURN_IF_ERROR(ForEachElementOffset(n, idx, is, ds, axis, [&](int64_t i, int64_t off) { offs[i] = off; }));
  return DispatchAll(data.dtype(), n, [&]<typename T>() {
    T* o = out.data<T>();
    const T* u = upd.data<T>();
    for (size_t i = 0; i < offs.size(); ++i) Apply(o, offs[i], u, static_cast<int64_t>(i), red);
  });
}

}  // namespace

void RegisterIndexKernels(KernelRegistry& r) {
  r.Add("Gather", Gather);
  r.Add("GatherElements", GatherElements);
  r.Add("GatherND", GatherND);
  r.Add("ScatterND", ScatterND);
  r.Add("ScatterElements", ScatterElements);
  RegisterIndexMiscKernels(r);
  RegisterNmsKernels(r);
  RegisterRoiAlignKernels(r);
}

}  // namespace kiln::cpu
