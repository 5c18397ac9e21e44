// CPU kernels of the integer convolutions of opset 10 (1-D/2-D/3-D, groups, dilations, strides, pads, auto_pad, as
// Conv):
//  ConvInteger:  (x - x_zero_point) conv (w - w_zero_point), summed exactly (int64), stored as int32.
//  QLinearConv:  the same sum plus the int32 bias B, requantized as the ONNX reference does: the multiplier
//                x_scale * w_scale / y_scale in float32, the product with the sum in double, + y_zero_point, rounded
//                half to even and saturated to the output's 8-bit range.
// x's zero point is per tensor; w's zero point and scale per tensor or per output channel (1-D of W's dim 0). Padding
// taps are 0 in the centered (x - x_zero_point) domain, as the reference pads. A direct loop over (image, output
// channel), threaded, with the float kernels' geometry (conv_im2col.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/common.h"
#include "backends/cpu/conv_im2col.h"
#include "backends/cpu/tensor_util.h"

namespace kiln::cpu {
namespace {

bool Is8Bit(const Tensor& t) { return t.dtype() == DataType::kInt8 || t.dtype() == DataType::kUInt8; }

// An 8-bit tensor's values as int32 minus a zero point per block of `block` elements (zp[i / block]).
std::vector<int32_t> Centered(const Tensor& t, const std::vector<int32_t>& zp, int64_t block) {
  std::vector<int32_t> r(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int32_t v = t.dtype() == DataType::kUInt8 ? t.data<uint8_t>()[i] : t.data<int8_t>()[i];
    r[static_cast<size_t>(i)] = v - zp[static_cast<size_t>(block > 0 ? i / block : 0)];
  }
  return r;
}

// A per-tensor scalar (one element) as a double.
Result<double> ScalarOf(const Node& n, const Tensor* t, const char* what, double def) {
  if (!t) return def;
  if (t->numel() != 1)
    return Err(StatusCode::kInvalidArgument, "{}: {} must be a scalar (per tensor), got {}", n.Where(), what,
               t->Describe());
  return t->GetAsDouble(0);
}

// A scalar or a 1-D tensor of m values (per output channel), as m doubles; `def` where omitted.
Result<std::vector<double>> PerChannel(const Node& n, const Tensor* t, int64_t m, const char* what, double def) {
  std::vector<double> r(static_cast<size_t>(m), def);
  if (!t) return r;
  if (t->numel() == 1) {
    std::fill(r.begin(), r.end(), t->GetAsDouble(0));
  } else if (t->rank() == 1 && t->numel() == m) {
    for (int64_t i = 0; i < m; ++i) r[static_cast<size_t>(i)] = t->GetAsDouble(i);
  } else {
    return Err(StatusCode::kInvalidArgument,
               "{}: {} must be a scalar or hold one value per output channel ({}), got {}", n.Where(), what, m,
               t->Describe());
  }
  return r;
}

struct IntConv {
  Geo g;
  int64_t batch = 0, c = 0, m = 0, group = 1;
  std::vector<int64_t> out_shape;
};

Result<IntConv> PlanIntConv(const Node& node, const Tensor& x, const Tensor& w) {
  if (!Is8Bit(x) || !Is8Bit(w))
    return Err(StatusCode::kInvalidArgument, "{}: x {} and w {} must be int8 or uint8", node.Where(), x.Describe(),
               w.Describe());
  if (x.rank() < 3 || w.rank() != x.rank())
    return Err(StatusCode::kInvalidArgument, "{}: x {} and w {} must have the same rank >= 3", node.Where(),
               x.Describe(), w.Describe());
  const int64_t nsp = x.rank() - 2;
  const std::vector<int64_t> kw(w.shape().begin() + 2, w.shape().end());
  KILN_ASSIGN_OR_RETURN(WindowParams p, ReadWindowParams(node, nsp, kw, false));
  IntConv r;
  r.batch = x.dim(0);
  r.c = x.dim(1);
  r.m = w.dim(0);
  r.group = p.group;
  if (p.kernel != kw || w.dim(1) * r.group != r.c || r.m % r.group != 0)
    return Err(StatusCode::kInvalidArgument, "{}: x {} and w {} do not match (group {}, kernel_shape {})",
               node.Where(), x.Describe(), w.Describe(), r.group, p.kernel);
  const std::vector<int64_t> in_sp(x.shape().begin() + 2, x.shape().end());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out_sp, ForwardOutputSizes(node, p, in_sp));
  r.g = MakeGeo(p, in_sp, out_sp);
  r.out_shape = {r.batch, r.m};
  r.out_shape.insert(r.out_shape.end(), out_sp.begin(), out_sp.end());
  return r;
}

// acc[n, oc, o] = sum over the input channels of oc's group and the kernel taps of xc * wc (centered values).
std::vector<int64_t> Accumulate(const IntConv& p, const std::vector<int32_t>& xc, const std::vector<int32_t>& wc) {
  const Geo& g = p.g;
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  std::vector<int64_t> acc(static_cast<size_t>(p.batch * p.m * g.out_size), 0);
  ParallelFor(p.batch * p.m, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> koff(static_cast<size_t>(g.nsp));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / p.m, oc = r % p.m, gi = oc / mg;
      int64_t* row = acc.data() + r * g.out_size;
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int32_t* xr = xc.data() + (n * p.c + gi * cg + ci) * g.in_size;
        const int32_t* wr = wc.data() + (oc * cg + ci) * g.ksize;
        for (int64_t kr = 0; kr < g.ksize; ++kr) {
          const int64_t wv = wr[kr];
          if (wv == 0) continue;
          KernelOffsets(g, kr, koff.data());
          ForEachTap(g, koff.data(), [&](int64_t o, int64_t i) {
            if (i >= 0) row[o] += wv * xr[i];
          });
        }
      }
    }
  }, 1);
  return acc;
}

// w's zero points as int32, one per output channel (0 where omitted).
Result<std::vector<int32_t>> ZeroPoints(const Node& n, const Tensor* t, int64_t count, const char* what) {
  KILN_ASSIGN_OR_RETURN(std::vector<double> v, PerChannel(n, t, count, what, 0.0));
  return std::vector<int32_t>(v.begin(), v.end());
}

Status ConvIntegerKernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.in(0);
  const Tensor& w = c.in(1);
  KILN_ASSIGN_OR_RETURN(const IntConv p, PlanIntConv(n, x, w));
  KILN_ASSIGN_OR_RETURN(const double xzp, ScalarOf(n, c.input(2), "x_zero_point", 0.0));
  KILN_ASSIGN_OR_RETURN(const std::vector<int32_t> wzp, ZeroPoints(n, c.input(3), p.m, "w_zero_point"));
  Tensor& y = AllocOutput(c, 0, DataType::kInt32, p.out_shape);
  if (y.numel() == 0) return Status::Ok();
  const std::vector<int64_t> acc = Accumulate(p, Centered(x, {static_cast<int32_t>(xzp)}, 0),
                                              Centered(w, wzp, w.numel() / std::max<int64_t>(1, p.m)));
  int32_t* yp = y.data<int32_t>();
  for (size_t i = 0; i < acc.size(); ++i) yp[i] = static_cast<int32_t>(acc[i]);
  return Status::Ok();
}

Status QLinearConvKernel(KernelContext& c) {
  const Node& n = c.node;
  for (size_t i = 0; i < 8; ++i)
    if (!c.input(i)) return Err(StatusCode::kInvalidArgument, "{}: input {} is required", n.Where(), i);
  const Tensor& x = c.in(0);
  const Tensor& w = c.in(3);
  KILN_ASSIGN_OR_RETURN(const IntConv p, PlanIntConv(n, x, w));
  KILN_ASSIGN_OR_RETURN(const double x_scale, ScalarOf(n, &c.in(1), "x_scale", 1.0));
  KILN_ASSIGN_OR_RETURN(const double xzp, ScalarOf(n, &c.in(2), "x_zero_point", 0.0));
  KILN_ASSIGN_OR_RETURN(const std::vector<double> w_scale, PerChannel(n, &c.in(4), p.m, "w_scale", 1.0));
  KILN_ASSIGN_OR_RETURN(const std::vector<int32_t> wzp, ZeroPoints(n, &c.in(5), p.m, "w_zero_point"));
  KILN_ASSIGN_OR_RETURN(const double y_scale, ScalarOf(n, &c.in(6), "y_scale", 1.0));
  const Tensor& yzp_t = c.in(7);
  KILN_ASSIGN_OR_RETURN(const double yzp, ScalarOf(n, &yzp_t, "y_zero_point", 0.0));
  if (!Is8Bit(yzp_t))
    return Err(StatusCode::kInvalidArgument, "{}: y_zero_point {} must be int8 or uint8", n.Where(),
               yzp_t.Describe());
  const Tensor* bias = c.input(8);
  if (bias && (bias->dtype() != DataType::kInt32 || bias->numel() != p.m))
    return Err(StatusCode::kInvalidArgument, "{}: B {} must be int32[{}]", n.Where(), bias->Describe(), p.m);
  const DataType t = yzp_t.dtype();
  Tensor& y = AllocOutput(c, 0, t, p.out_shape);
  if (y.numel() == 0) return Status::Ok();
  const std::vector<int64_t> acc = Accumulate(p, Centered(x, {static_cast<int32_t>(xzp)}, 0),
                                              Centered(w, wzp, w.numel() / std::max<int64_t>(1, p.m)));
  const double lo = t == DataType::kUInt8 ? 0.0 : -128.0, hi = t == DataType::kUInt8 ? 255.0 : 127.0;
  const int64_t out_size = p.g.out_size;
  for (int64_t r = 0; r < p.batch * p.m; ++r) {
    const int64_t oc = r % p.m;
    // float32, as the reference multiplies the float32 scales.
    const float mult = static_cast<float>(x_scale) * static_cast<float>(w_scale[static_cast<size_t>(oc)]) /
                       static_cast<float>(y_scale);
    const int64_t b = bias ? bias->data<int32_t>()[oc] : 0;
    for (int64_t o = 0; o < out_size; ++o) {
      const int64_t i = r * out_size + o;
      const int32_t sum = static_cast<int32_t>(acc[static_cast<size_t>(i)] + b);  // the reference's int32 result
      double v = std::nearbyint(static_cast<double>(sum) * static_cast<double>(mult) + yzp);
      if (std::isnan(v)) v = yzp;
      y.SetFromDouble(i, std::clamp(v, lo, hi));
    }
  }
  return Status::Ok();
}

}  // namespace

void RegisterIntegerConvKernels(KernelRegistry& r) {
  r.Add("ConvInteger", ConvIntegerKernel);
  r.Add("QLinearConv", QLinearConvKernel);
}

}  // namespace kiln::cpu
