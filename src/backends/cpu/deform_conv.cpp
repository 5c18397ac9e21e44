// CPU reference kernel of DeformConv (opsets 19, 22), any number of spatial dims. Output point o of output channel m:
//   Y[n, m, o] = B[m] + sum over input channels c of m's group and kernel points k of
//                W[m, c mod C/group, k] * mask[n, g, k, o] * X[n, c](p),  p = o * strides - pads_begin + k * dilations
//                                                                             + offset[n, g, k, :, o]
// where g = c / (C / offset_group) is c's offset group, offset holds one coordinate per spatial dim (in order) for
// each kernel point, and X[n, c](p) interpolates linearly along each spatial dim between the two pixels around p, a
// pixel outside X reading 0 (as GridSample with align_corners=1 and zeros padding, which the ONNX reference uses).
// Sums run in double; each thread keeps the sampled values of one output point for all channels.
#include <cmath>
#include <vector>

#include "backends/cpu/common.h"
#include "backends/cpu/tensor_util.h"
#include "ops/conv_geometry.h"

namespace kiln::cpu {
namespace {

Status DeformConvKernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.in(0);
  const Tensor& w = c.in(1);
  const Tensor& off = c.in(2);
  const Tensor* bias = c.input(3);
  const Tensor* mask = c.input(4);
  const int64_t rank = x.rank(), nsp = rank - 2;
  if (nsp < 1 || w.rank() != rank || off.rank() != rank || (mask && mask->rank() != rank) ||
      (bias && bias->rank() != 1))
    return Err(StatusCode::kInvalidArgument, "{}: X {}, W {} and offset {} (and mask) must share a rank >= 3",
               n.Where(), x.Describe(), w.Describe(), off.Describe());
  std::vector<int64_t> kw(w.shape().begin() + 2, w.shape().end());
  KILN_ASSIGN_OR_RETURN(WindowParams p, ReadWindowParams(n, nsp, kw, false));
  std::vector<int64_t> in_sp(x.shape().begin() + 2, x.shape().end());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out_sp, ForwardOutputSizes(n, p, in_sp));
  const int64_t batch = x.dim(0), ch = x.dim(1), m_out = w.dim(0), group = p.group;
  const int64_t og = n.geti("offset_group", 1);
  int64_t kpoints = 1, in_points = 1, out_points = 1;
  for (int64_t d = 0; d < nsp; ++d) {
    kpoints *= p.kernel[d];
    in_points *= in_sp[d];
    out_points *= out_sp[d];
  }
  if (og < 1 || ch % og != 0 || ch != w.dim(1) * group || m_out % group != 0)
    return Err(StatusCode::kInvalidArgument, "{}: X {} and W {} do not fit group {} and offset_group {}", n.Where(),
               x.Describe(), w.Describe(), group, og);
  std::vector<int64_t> want_off = {batch, og * kpoints * nsp}, want_mask = {batch, og * kpoints};
  want_off.insert(want_off.end(), out_sp.begin(), out_sp.end());
  want_mask.insert(want_mask.end(), out_sp.begin(), out_sp.end());
  if (off.shape() != want_off || (mask && mask->shape() != want_mask) || (bias && bias->dim(0) != m_out))
    return Err(StatusCode::kInvalidArgument, "{}: offset {} must be {}, mask [{}] and bias [{}]", n.Where(),
               off.Describe(), ShapeToString(want_off), fmt::join(want_mask, ","), m_out);
  std::vector<int64_t> out_shape = {batch, m_out};
  out_shape.insert(out_shape.end(), out_sp.begin(), out_sp.end());
  Tensor& y = AllocOutput(c, 0, x.dtype(), out_shape);
  if (y.numel() == 0) return Status::Ok();

  const int64_t cpg = ch / group, mpg = m_out / group, cpog = ch / og;
  // Kernel point k's index along each spatial dim.
  std::vector<int64_t> kidx(static_cast<size_t>(kpoints * nsp));
  for (int64_t k = 0; k < kpoints; ++k)
    for (int64_t d = nsp - 1, rem = k; d >= 0; --d) {
      kidx[static_cast<size_t>(k * nsp + d)] = rem % p.kernel[d];
      rem /= p.kernel[d];
    }
  std::vector<int64_t> in_strides(static_cast<size_t>(nsp));
  for (int64_t d = nsp - 1, s = 1; d >= 0; --d) {
    in_strides[static_cast<size_t>(d)] = s;
    s *= in_sp[d];
  }
  const int64_t corners = int64_t{1} << nsp;

  return DispatchFloat(x.dtype(), n, [&]<typename T>() {
    const T* xp = x.data<T>();
    const T* wp = w.data<T>();
    const T* op = off.data<T>();
    const T* mp = mask ? mask->data<T>() : nullptr;
    const T* bp = bias ? bias->data<T>() : nullptr;
    T* yp = y.data<T>();
    ParallelFor(
        batch * out_points,
        [&](int64_t begin, int64_t end) {
          std::vector<double> sampled(static_cast<size_t>(ch * kpoints));  // [c, k] at one output point
          std::vector<int64_t> o(static_cast<size_t>(nsp)), lo(static_cast<size_t>(nsp));
          std::vector<double> frac(static_cast<size_t>(nsp));
          for (int64_t item = begin; item < end; ++item) {
            const int64_t b = item / out_points, q = item % out_points;
            for (int64_t d = nsp - 1, rem = q; d >= 0; --d) {
              o[static_cast<size_t>(d)] = rem % out_sp[d];
              rem /= out_sp[d];
            }
            for (int64_t g = 0; g < og; ++g)
              for (int64_t k = 0; k < kpoints; ++k) {
                // Where kernel point k of offset group g samples, and its interpolation corners.
                bool outside = false;
                for (int64_t d = 0; d < nsp; ++d) {
                  const int64_t oc = ((b * og + g) * kpoints + k) * nsp + d;
                  const double pos = static_cast<double>(o[static_cast<size_t>(d)] * p.strides[d] - p.pads[d] +
                                                         kidx[static_cast<size_t>(k * nsp + d)] * p.dilations[d]) +
                                     static_cast<double>(Load(op, oc * out_points + q));
                  // Both corners lie outside (or pos is NaN): the sample is 0.
                  if (!(pos > -1.0 && pos < static_cast<double>(in_sp[d]))) {
                    outside = true;
                    break;
                  }
                  const double f = std::floor(pos);
                  lo[static_cast<size_t>(d)] = static_cast<int64_t>(f);
                  frac[static_cast<size_t>(d)] = pos - f;
                }
                const double mk =
                    mp ? static_cast<double>(Load(mp, ((b * og + g) * kpoints + k) * out_points + q)) : 1.0;
                for (int64_t cc = g * cpog; cc < (g + 1) * cpog; ++cc) {
                  double v = 0;
                  if (!outside) {
                    const T* plane = xp + (b * ch + cc) * in_points;
                    for (int64_t corner = 0; corner < corners; ++corner) {
                      double wt = 1;
                      int64_t at = 0;
                      bool in = true;
                      for (int64_t d = 0; d < nsp; ++d) {
                        const bool hi = ((corner >> d) & 1) != 0;
                        const int64_t i = lo[static_cast<size_t>(d)] + (hi ? 1 : 0);
                        const double t = frac[static_cast<size_t>(d)];
                        wt *= hi ? t : 1.0 - t;
                        if (i < 0 || i >= in_sp[d])
                          in = false;
                        else
                          at += i * in_strides[static_cast<size_t>(d)];
                      }
                      if (in && wt != 0) v += wt * static_cast<double>(Load(plane, at));
                    }
                  }
                  sampled[static_cast<size_t>(cc * kpoints + k)] = v * mk;
                }
              }
            for (int64_t m = 0; m < m_out; ++m) {
              const int64_t gi = m / mpg;
              double acc = bp ? static_cast<double>(Load(bp, m)) : 0.0;
              const T* wm = wp + m * cpg * kpoints;
              const double* sm = sampled.data() + gi * cpg * kpoints;
              for (int64_t i = 0; i < cpg * kpoints; ++i) acc += static_cast<double>(Load(wm, i)) * sm[i];
              Store(yp, (b * m_out + m) * out_points + q, static_cast<ComputeT<T>>(acc));
            }
          }
        },
        64);
  });
}

}  // namespace

void RegisterDeformConvKernels(KernelRegistry& r) { r.Add("DeformConv", DeformConvKernel); }

}  // namespace kiln::cpu
