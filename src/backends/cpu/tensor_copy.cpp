// CPU kernels of the data-movement ops that are pure strided copies: Transpose, Concat, Split, Slice,
// Expand, Tile, DepthToSpace, SpaceToDepth. Each describes its output as a strided view of its input(s)
// and hands it to StridedCopy, which moves contiguous runs with memcpy across threads. Type-agnostic:
// only the element size matters.
#include "backends/cpu/common.h"
#include "backends/cpu/tensor_util.h"
#include "ops/shape_tensor_params.h"

namespace kiln::cpu {
namespace {

Result<size_t> ElemSize(const Node& n, DataType t) {
  const size_t es = DataTypeSize(t);
  if (es == 0)
    return Err(StatusCode::kUnsupported, "{}: element type {} is not supported by the CPU kernel", n.Where(),
               DataTypeName(t));
  return es;
}

std::vector<int64_t> IntsOr(const Tensor* t, std::vector<int64_t> def = {}) {
  return t ? t->ToInt64Vector() : std::move(def);
}

Status TransposeKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  KILN_ASSIGN_OR_RETURN(size_t es, ElemSize(c.node, x.dtype()));
  KILN_ASSIGN_OR_RETURN(auto perm, TransposePerm(c.node, x.rank()));
  const auto xs = Strides(x.shape());
  std::vector<int64_t> shape, src;
  for (int64_t p : perm) {
    shape.push_back(x.shape()[p]);
    src.push_back(xs[p]);
  }
  Tensor& o = AllocOutput(c, 0, x.dtype(), shape);
  StridedCopy(x.raw(), o.raw(), shape, src, Strides(shape), es);
  return Status::Ok();
}

Status ConcatKernel(KernelContext& c) {
  const Tensor& first = c.in(0);
  KILN_ASSIGN_OR_RETURN(size_t es, ElemSize(c.node, first.dtype()));
  auto ax = NormalizeAxis(c.node.geti("axis", 0), first.rank());
  if (!ax) return Err(StatusCode::kInvalidModel, "{}: axis is out of range for rank {}", c.node.Where(), first.rank());
  std::vector<int64_t> shape = first.shape();
  shape[*ax] = 0;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const Tensor* t = c.input(i);
    if (!t || t->rank() != first.rank() || t->dtype() != first.dtype())
      return Err(StatusCode::kInvalidArgument, "{}: input {} does not match input 0", c.node.Where(), i);
    for (int64_t d = 0; d < first.rank(); ++d)
      if (d != *ax && t->shape()[d] != first.shape()[d])
        return Err(StatusCode::kInvalidArgument, "{}: input shapes {} and {} differ outside the axis", c.node.Where(),
                   ShapeToString(first.shape()), ShapeToString(t->shape()));
    shape[*ax] += t->shape()[*ax];
  }
  Tensor& o = AllocOutput(c, 0, first.dtype(), shape);
  const auto os = Strides(shape);
  int64_t offset = 0;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const Tensor& t = c.in(i);
    StridedCopy(t.raw(), static_cast<uint8_t*>(o.raw()) + offset * os[*ax] * es, t.shape(), Strides(t.shape()), os, es);
    offset += t.shape()[*ax];
  }
  return Status::Ok();
}

Status SplitKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  KILN_ASSIGN_OR_RETURN(size_t es, ElemSize(c.node, x.dtype()));
  auto ax = NormalizeAxis(c.node.geti("axis", 0), x.rank());
  if (!ax) return Err(StatusCode::kInvalidModel, "{}: axis is out of range for rank {}", c.node.Where(), x.rank());
  const Tensor* split = c.input(1);
  KILN_ASSIGN_OR_RETURN(auto sizes, ComputeSplit(c.node, x.shape()[*ax], split != nullptr, IntsOr(split),
                                                 static_cast<int64_t>(c.num_outputs())));
  const auto xs = Strides(x.shape());
  int64_t offset = 0;
  for (size_t i = 0; i < c.num_outputs(); ++i) {
    std::vector<int64_t> shape = x.shape();
    shape[*ax] = sizes[i];
    if (WantOutput(c, i)) {
      Tensor& o = AllocOutput(c, i, x.dtype(), shape);
      StridedCopy(static_cast<const uint8_t*>(x.raw()) + offset * xs[*ax] * es, o.raw(), shape, xs, Strides(shape), es);
    }
    offset += sizes[i];
  }
  return Status::Ok();
}

Status SliceKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  KILN_ASSIGN_OR_RETURN(size_t es, ElemSize(c.node, x.dtype()));
  if (!c.input(1) || !c.input(2))
    return Err(StatusCode::kInvalidModel, "{}: starts and ends are required", c.node.Where());
  KILN_ASSIGN_OR_RETURN(SliceParams p, ComputeSlice(c.node, x.shape(), c.in(1).ToInt64Vector(),
                                                    c.in(2).ToInt64Vector(), IntsOr(c.input(3)), IntsOr(c.input(4))));
  const auto xs = Strides(x.shape());
  std::vector<int64_t> src(x.rank());
  int64_t offset = 0;
  for (int64_t d = 0; d < x.rank(); ++d) {
    offset += p.start[d] * xs[d];
    src[d] = xs[d] * p.step[d];
  }
  Tensor& o = AllocOutput(c, 0, x.dtype(), p.count);
  if (o.numel() == 0) return Status::Ok();
  StridedCopy(static_cast<const uint8_t*>(x.raw()) + offset * static_cast<int64_t>(es), o.raw(), p.count, src,
              Strides(p.count), es);
  return Status::Ok();
}

Status ExpandKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  KILN_ASSIGN_OR_RETURN(size_t es, ElemSize(c.node, x.dtype()));
  KILN_ASSIGN_OR_RETURN(auto shape, BroadcastShape(c.node, x.shape(), c.in(1).ToInt64Vector()));
  Tensor& o = AllocOutput(c, 0, x.dtype(), shape);
  StridedCopy(x.raw(), o.raw(), shape, BroadcastStrides(x.shape(), shape), Strides(shape), es);
  return Status::Ok();
}

Status TileKernel(KernelContext& c) {
  const Tensor& x = c.in(0);
  KILN_ASSIGN_OR_RETURN(size_t es, ElemSize(c.node, x.dtype()));
  const auto reps = c.in(1).ToInt64Vector();
  if (static_cast<int64_t>(reps.size()) != x.rank())
    return Err(StatusCode::kInvalidModel, "{}: repeats has {} entries for rank {}", c.node.Where(), reps.size(),
               x.rank());
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (reps[d] < 0) return Err(StatusCode::kInvalidArgument, "{}: negative repeats", c.node.Where());
    shape.push_back(x.shape()[d] * reps[d]);
  }
  Tensor& o = AllocOutput(c, 0, x.dtype(), shape);
  // View the output as [r0, d0, r1, d1, ...]: the repeat index does not move the source.
  const auto xs = Strides(x.shape()), os = Strides(shape);
  std::vector<int64_t> vshape, vsrc, vdst;
  for (int64_t d = 0; d < x.rank(); ++d) {
    vshape.insert(vshape.end(), {reps[d], x.shape()[d]});
    vsrc.insert(vsrc.end(), {0, xs[d]});
    vdst.insert(vdst.end(), {x.shape()[d] * os[d], os[d]});
  }
  StridedCopy(x.raw(), o.raw(), vshape, vsrc, vdst, es);
  return Status::Ok();
}

// DepthToSpace (to_space) and SpaceToDepth as one 6-D transpose each.
Status BlockKernel(KernelContext& c, bool to_space) {
  const Tensor& x = c.in(0);
  KILN_ASSIGN_OR_RETURN(size_t es, ElemSize(c.node, x.dtype()));
  const int64_t b = c.node.geti("blocksize", 0);
  if (x.rank() != 4 || b <= 0)
    return Err(StatusCode::kInvalidArgument, "{}: needs a 4-D input and a positive blocksize", c.node.Where());
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  std::vector<int64_t> oshape, vshape, vsrc;
  if (to_space) {
    if (C % (b * b) != 0)
      return Err(StatusCode::kInvalidArgument, "{}: channels {} not divisible by {}", c.node.Where(), C, b * b);
    const int64_t Co = C / (b * b);
    oshape = {N, Co, H * b, W * b};
    vshape = {N, Co, H, b, W, b};  // output order; source strides per mode
    if (c.node.gets("mode", "DCR") == "CRD")  // input viewed as [N, Co, b1, b2, H, W]
      vsrc = {C * H * W, b * b * H * W, W, b * H * W, 1, H * W};
    else  // DCR: input viewed as [N, b1, b2, Co, H, W]
      vsrc = {C * H * W, H * W, W, b * Co * H * W, 1, Co * H * W};
  } else {
    if (H % b != 0 || W % b != 0)
      return Err(StatusCode::kInvalidArgument, "{}: spatial size {}x{} not divisible by {}", c.node.Where(), H, W, b);
    const int64_t Ho = H / b, Wo = W / b;
    oshape = {N, C * b * b, Ho, Wo};
    // Output order: DCR, channel (b1 * b + b2) * C + c; CRD (SpaceToDepth-28), c * b * b + b1 * b + b2. The input
    // is viewed as [N, C, Ho, b1, Wo, b2].
    if (c.node.gets("mode", "DCR") == "CRD") {
      vshape = {N, C, b, b, Ho, Wo};
      vsrc = {C * H * W, H * W, W, 1, b * W, b};
    } else {
      vshape = {N, b, b, C, Ho, Wo};
      vsrc = {C * H * W, W, 1, H * W, b * W, b};
    }
  }
  Tensor& o = AllocOutput(c, 0, x.dtype(), oshape);
  StridedCopy(x.raw(), o.raw(), vshape, vsrc, Strides(vshape), es);
  return Status::Ok();
}

}  // namespace

void RegisterTensorCopyKernels(KernelRegistry& r) {
  r.Add("Transpose", TransposeKernel);
  r.Add("Concat", ConcatKernel);
  r.Add("Split", SplitKernel);
  r.Add("Slice", SliceKernel);
  r.Add("Expand", ExpandKernel);
  r.Add("Tile", TileKernel);
  r.Add("DepthToSpace", [](KernelContext& c) { return BlockKernel(c, true); });
  r.Add("SpaceToDepth", [](KernelContext& c) { return BlockKernel(c, false); });
}

}  // namespace kiln::cpu
