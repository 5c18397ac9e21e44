// CPU kernels of the quantized layers (ops/quantized_ops.h has their arithmetic): QConv and QMatMul. The products
// are summed exactly in int32 — the reference every backend's INT8 kernels are checked against — (float8: in
// float32, through OpenBLAS), the epilogue (scales, bias, residual, activation, requantization) runs in float32.
//   QConv:    per image and group, im2col of (x - x_zero_point) as int16 (padding taps are 0, as the float
//             convolution's zero padding of the dequantized input), then acc[M/g, out] += W_g x col, a chunk of
//             input channels at a time (the float kernel's scratch limit).
//   QMatMul:  acc[r, :] += (x[r, k] - x_zero_point) * W[k, :], threaded over rows.
// and WeightOnlyMatMul (a 4-bit packed weight, float activations): the weight dequantized, then a float32 GEMM.
#include <cfenv>
#include <cmath>

#include "backends/cpu/activation.h"
#include "backends/cpu/common.h"
#include "backends/cpu/conv_im2col.h"
#include "backends/cpu/conv_scratch.h"
#include "backends/cpu/families.h"
#include "backends/cpu/gemm_blas.h"
#include "backends/cpu/layout_util.h"
#include "ops/quantized_ops.h"

namespace kiln::cpu {
namespace {

using quant_attrs::Params;

// Writes n outputs from their int32 sums: y = act(acc * scale + bias + r), then requantized when the output is 8-bit.
// A convolution's row has one channel (`scale`, `bias`); a matrix product's row has a channel per element
// (`scales`, `biases` when given: scales[i] = x_scale * w_scale[i], the same float product).
template <fused::Act A, class Acc>
void Finish(const Params& p, const Acc* acc, int64_t n, float scale, float bias, const float* scales,
            const float* biases, const float* res, Tensor& y, int64_t offset) {
  const float a = p.act_alpha, b = p.act_beta;
  auto value = [&](int64_t i) {
    float v = static_cast<float>(acc[i]) * (scales ? scales[i] : scale) + (biases ? biases[i] : bias);
    if (res) v += res[offset + i];
    return Activate<A>(v, a, b);
  };
  if (p.y_type == DataType::kFloat32) {
    float* out = y.data<float>() + offset;
    for (int64_t i = 0; i < n; ++i) out[i] = value(i);
    return;
  }
  if (p.y_type == DataType::kFloat16) {
    uint16_t* out = y.data<uint16_t>() + offset;
    for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalf(value(i));
    return;
  }
  const float inv_scale = 1.f / p.y_scale;
  if (p.y_type == DataType::kFloat8E4M3FN) {
    uint8_t* out = y.data<uint8_t>() + offset;
    for (int64_t i = 0; i < n; ++i) out[i] = FloatToFloat8E4M3(value(i) * inv_scale, /*saturate=*/true);
    return;
  }
  const float lo = p.y_type == DataType::kUInt8 ? 0.f : -128.f, hi = p.y_type == DataType::kUInt8 ? 255.f : 127.f;
  const float zp = static_cast<float>(p.y_zero_point);
  auto q = [&](int64_t i) {
    // Times the reciprocal (ops/quantized_ops.h); nearbyint rounds half to even in the default rounding mode.
    const float v = std::nearbyint(value(i) * inv_scale) + zp;
    return std::isnan(v) ? zp : std::min(hi, std::max(lo, v));
  };
  if (p.y_type == DataType::kUInt8) {
    uint8_t* out = y.data<uint8_t>() + offset;
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(q(i));
  } else {
    int8_t* out = y.data<int8_t>() + offset;
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int8_t>(q(i));
  }
}

void FinishRow(const Params& p, const int32_t* acc, int64_t n, float scale, float bias, const float* res, Tensor& y,
               int64_t offset) {
  WithActivation(p.activation, [&](auto act) {
    Finish<decltype(act)::value, int32_t>(p, acc, n, scale, bias, nullptr, nullptr, res, y, offset);
  });
}

template <class Acc>
void FinishColumns(const Params& p, const Acc* acc, int64_t n, const float* scales, const float* biases,
                   const float* res, Tensor& y, int64_t offset) {
  WithActivation(p.activation, [&](auto act) {
    Finish<decltype(act)::value, Acc>(p, acc, n, 0.f, 0.f, scales, biases, res, y, offset);
  });
}

// x - zero point as int16, for either 8-bit type.
void Centered(const Tensor& x, int64_t begin, int64_t n, int64_t zp, int16_t* dst) {
  if (x.dtype() == DataType::kUInt8) {
    const uint8_t* s = x.data<uint8_t>() + begin;
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<int16_t>(s[i] - zp);
  } else {
    const int8_t* s = x.data<int8_t>() + begin;
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<int16_t>(s[i] - zp);
  }
}

// `res_float` holds an int8 residual read as float32 (r_q * r_scale), which `res` then points to.
Status CheckOperands(const KernelContext& ctx, const Params& p, int64_t channels, const Tensor*& bias,
                     const Tensor*& res, Tensor& res_float) {
  const Node& n = ctx.node;
  bias = ctx.input(2);
  res = ctx.input(3);
  if (static_cast<int64_t>(p.w_scales.size()) != 1 && static_cast<int64_t>(p.w_scales.size()) != channels)
    return Err(StatusCode::kInvalidArgument, "{}: {} weight scales for {} output channels", n.Where(),
               p.w_scales.size(), channels);
  if (bias && (bias->dtype() != DataType::kFloat32 || bias->numel() != channels))
    return Err(StatusCode::kInvalidArgument, "{}: the bias {} must be float32[{}]", n.Where(), bias->Describe(),
               channels);
  const Tensor& y = ctx.outputs[0];
  const DataType rt = p.r_scale > 0 ? DataType::kInt8 : DataType::kFloat32;
  if (res && rt == DataType::kFloat32 && res->dtype() == DataType::kFloat16 && res->shape() == y.shape()) {
    res_float = CastTensor(*res, DataType::kFloat32);  // exact
    res = &res_float;
  }
  if (res && (res->dtype() != rt || res->shape() != y.shape()))
    return Err(StatusCode::kInvalidArgument, "{}: the residual {} must be {} of the output's shape {}{}", n.Where(),
               res->Describe(), DataTypeName(rt), ShapeToString(y.shape()),
               rt == DataType::kInt8 ? " (kiln_r_scale is set)" : "");
  if (res && rt == DataType::kInt8) {
    res_float = Tensor(DataType::kFloat32, res->shape());
    const int8_t* r = res->data<int8_t>();
    float* f = res_float.data<float>();
    for (int64_t i = 0; i < res->numel(); ++i) f[i] = static_cast<float>(r[i]) * p.r_scale;
    res = &res_float;
  }
  return Status::Ok();
}

Status QConvKernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  if (!ctx.input(0) || !ctx.input(1)) return Err(StatusCode::kInvalidArgument, "{}: needs X and W", node.Where());
  KILN_ASSIGN_OR_RETURN(const Params p, quant_attrs::Read(node));
  const Tensor& x = ctx.in(0);
  const Tensor& w = ctx.in(1);
  if (x.rank() < 3 || w.rank() != x.rank() || w.dtype() != DataType::kInt8)
    return Err(StatusCode::kInvalidArgument, "{}: X {} and W {} must have the same rank >= 3, W int8", node.Where(),
               x.Describe(), w.Describe());
  const int64_t nsp = x.rank() - 2;
  std::vector<int64_t> kw(w.shape().begin() + 2, w.shape().end());
  KILN_ASSIGN_OR_RETURN(WindowParams wp, ReadWindowParams(node, nsp, kw, false));
  const int64_t batch = x.dim(0), c = x.dim(1), m = w.dim(0), group = wp.group;
  if (w.dim(1) * group != c || m % group != 0)
    return Err(StatusCode::kInvalidArgument, "{}: channels of X {} and W {} do not match group {}", node.Where(),
               x.Describe(), w.Describe(), group);
  const std::vector<int64_t> in_sp(x.shape().begin() + 2, x.shape().end());
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> out_sp, ForwardOutputSizes(node, wp, in_sp));
  std::vector<int64_t> out_shape{batch, m};
  out_shape.insert(out_shape.end(), out_sp.begin(), out_sp.end());
  Tensor& y = ctx.out(0);
  EnsureOutput(y, p.y_type, out_shape);
  const Tensor *bias = nullptr, *res = nullptr;
  Tensor res_float;
  KILN_RETURN_IF_ERROR(CheckOperands(ctx, p, m, bias, res, res_float));
  if (y.numel() == 0) return Status::Ok();
  const Geo g = MakeGeo(wp, in_sp, out_sp);
  const int64_t cg = c / group, mg = m / group, kdim = cg * g.ksize;
  // Input channels per im2col chunk: the column matrix stays within the float kernel's scratch limit.
  const int64_t limit = ConvScratch().conv_col.load();
  const int64_t chunk = std::max<int64_t>(1, std::min(cg, limit / std::max<int64_t>(1, g.ksize * g.out_size)));
  std::vector<int16_t> xc(static_cast<size_t>(chunk * g.in_size));
  std::vector<int16_t> col(static_cast<size_t>(chunk * g.ksize * g.out_size));
  std::vector<int32_t> acc(static_cast<size_t>(mg * g.out_size));
  const int8_t* wd = w.data<int8_t>();
  const float* rd = res ? res->data<float>() : nullptr;
  const float* bd = bias ? bias->data<float>() : nullptr;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t gi = 0; gi < group; ++gi) {
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t c0 = 0; c0 < cg; c0 += chunk) {
        const int64_t cc = std::min(chunk, cg - c0);
        Centered(x, ((n * c) + gi * cg + c0) * g.in_size, cc * g.in_size, p.x_zero_point, xc.data());
        Im2Col(g, xc.data(), cc, col.data());
        ParallelFor(mg, [&](int64_t b, int64_t e) {
          for (int64_t mi = b; mi < e; ++mi) {
            int32_t* a = acc.data() + mi * g.out_size;
            const int8_t* wr = wd + (gi * mg + mi) * kdim + c0 * g.ksize;
            for (int64_t k = 0; k < cc * g.ksize; ++k) {
              const int32_t wv = wr[k];
              if (wv == 0) continue;
              const int16_t* cr = col.data() + k * g.out_size;
              for (int64_t o = 0; o < g.out_size; ++o) a[o] += wv * cr[o];
            }
          }
        }, 1);
      }
      ParallelFor(mg, [&](int64_t b, int64_t e) {
        for (int64_t mi = b; mi < e; ++mi) {
          const int64_t ch = gi * mg + mi;
          FinishRow(p, acc.data() + mi * g.out_size, g.out_size, p.x_scale * p.w_scale(ch), bd ? bd[ch] : 0.f, rd, y,
                    (n * m + ch) * g.out_size);
        }
      }, 1);
    }
  }
  return Status::Ok();
}

Status QMatMulKernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  if (!ctx.input(0) || !ctx.input(1)) return Err(StatusCode::kInvalidArgument, "{}: needs X and W", node.Where());
  KILN_ASSIGN_OR_RETURN(const Params p, quant_attrs::Read(node));
  const Tensor& x = ctx.in(0);
  const Tensor& w = ctx.in(1);
  const bool fp8 = x.dtype() == DataType::kFloat8E4M3FN;
  const DataType wt = fp8 ? DataType::kFloat8E4M3FN : DataType::kInt8;
  if (x.rank() < 1 || w.rank() != 2 || w.dtype() != wt || x.dim(-1) != w.dim(0))
    return Err(StatusCode::kInvalidArgument, "{}: X {} must be [..., K] and W {} {} [K, N]", node.Where(),
               x.Describe(), w.Describe(), DataTypeName(wt));
  const int64_t k = w.dim(0), ncols = w.dim(1);
  int64_t rows = 1;  // from X's shape, so that K = 0 still writes the epilogue (bias) of every row
  for (int64_t d = 0; d + 1 < x.rank(); ++d) rows *= x.dim(d);
  std::vector<int64_t> out_shape = x.shape();
  out_shape.back() = ncols;
  Tensor& y = ctx.out(0);
  EnsureOutput(y, p.y_type, out_shape);
  const Tensor *bias = nullptr, *res = nullptr;
  Tensor res_float;
  KILN_RETURN_IF_ERROR(CheckOperands(ctx, p, ncols, bias, res, res_float));
  if (y.numel() == 0) return Status::Ok();
  const int8_t* wd = w.data<int8_t>();
  const float* rd = res ? res->data<float>() : nullptr;
  const float* bd = bias ? bias->data<float>() : nullptr;
  std::vector<float> col_scale(static_cast<size_t>(ncols));
  for (int64_t j = 0; j < ncols; ++j) col_scale[j] = p.x_scale * p.w_scale(j);
  if (fp8) {
    // The float8 values widened (exactly) to float32 and multiplied with OpenBLAS: float32 sums.
    std::vector<float> xf = ToFloatBuffer(x), wf = ToFloatBuffer(w);
    std::vector<float> acc(static_cast<size_t>(rows * ncols));
    if (k > 0) GemmF32(false, false, rows, ncols, k, 1.f, xf.data(), k, wf.data(), ncols, 0.f, acc.data(), ncols);
    ParallelFor(rows, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        FinishColumns(p, acc.data() + r * ncols, ncols, col_scale.data(), bd, rd, y, r * ncols);
    }, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, ncols)));
    return Status::Ok();
  }
  ParallelFor(rows, [&](int64_t b, int64_t e) {
    std::vector<int16_t> xr(static_cast<size_t>(k));
    std::vector<int32_t> acc(static_cast<size_t>(ncols));
    for (int64_t r = b; r < e; ++r) {
      Centered(x, r * k, k, p.x_zero_point, xr.data());
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t kk = 0; kk < k; ++kk) {
        const int32_t xv = xr[kk];
        if (xv == 0) continue;
        const int8_t* wr = wd + kk * ncols;
        for (int64_t j = 0; j < ncols; ++j) acc[j] += xv * wr[j];
      }
      FinishColumns(p, acc.data(), ncols, col_scale.data(), bd, rd, y, r * ncols);
    }
  }, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, k * ncols / 64 + 1)));
  return Status::Ok();
}

// kiln.WeightOnlyMatMul: the weight is dequantized (rounded as DequantizeLinear writes it, then to X's type) and
// multiplied with OpenBLAS in float32.
Status WeightOnlyMatMulKernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  if (!ctx.input(0) || !ctx.input(1) || !ctx.input(2))
    return Err(StatusCode::kInvalidArgument, "{}: needs X, the packed weight and its scales", node.Where());
  KILN_ASSIGN_OR_RETURN(const woq_attrs::Params p, woq_attrs::Read(node));
  const Tensor& x = ctx.in(0);
  const Tensor& w = ctx.in(1);
  const Tensor& sc = ctx.in(2);
  const Tensor* z = ctx.input(3) && ctx.input(3)->defined() ? ctx.input(3) : nullptr;
  const int64_t k = p.k, groups = p.groups();
  if (x.rank() < 1 || x.dim(-1) != k || w.dtype() != DataType::kUInt8 || w.rank() != 2 || w.dim(1) != p.row_bytes())
    return Err(StatusCode::kInvalidArgument, "{}: X {} must be [..., {}] and the packed weight {} uint8 [N, {}]",
               node.Where(), x.Describe(), k, w.Describe(), p.row_bytes());
  const int64_t ncols = w.dim(0);
  if (sc.rank() != 2 || sc.dim(0) != ncols || sc.dim(1) != groups || (z && z->shape() != sc.shape()))
    return Err(StatusCode::kInvalidArgument, "{}: the scales {} (and zero points) must be [{}, {}]", node.Where(),
               sc.Describe(), ncols, groups);
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.rank(); ++d) rows *= x.dim(d);
  std::vector<int64_t> out_shape = x.shape();
  out_shape.back() = ncols;
  Tensor& y = ctx.out(0);
  EnsureOutput(y, x.dtype(), out_shape);
  if (y.numel() == 0) return Status::Ok();
  const bool is_signed = p.w_type == DataType::kInt4;
  std::vector<float> wf(static_cast<size_t>(k * ncols));  // [K, N]
  ParallelFor(ncols, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      const uint8_t* row = w.data<uint8_t>() + j * p.row_bytes();
      for (int64_t i = 0; i < k; ++i) {
        const int64_t g = j * groups + i / p.group_size;
        const int q = woq_attrs::Unpack4(row, i, is_signed) - (z ? z->data<int8_t>()[g] : 0);
        const float v = RoundTo(sc.dtype(), static_cast<float>(q) * static_cast<float>(sc.GetAsDouble(g)));
        wf[i * ncols + j] = RoundTo(x.dtype(), v);
      }
    }
  }, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, k)));
  std::vector<float> xf = ToFloatBuffer(x);
  std::vector<float> yf(static_cast<size_t>(rows * ncols));
  GemmF32(false, false, rows, ncols, k, 1.f, xf.data(), k, wf.data(), ncols, 0.f, yf.data(), ncols);
  FromFloatBuffer(yf.data(), y);
  return Status::Ok();
}

}  // namespace

void RegisterQuantizedKernels(KernelRegistry& r) {
  // NHWC (layout planning on backends that run it) through the NCHW kernel; the residual (input 3) is in Y's layout.
  r.Add("kiln.QConv", [](KernelContext& c) { return RunChannelsLast(c, QConvKernel, 3); });
  r.Add("kiln.QMatMul", QMatMulKernel);
  r.Add("kiln.WeightOnlyMatMul", WeightOnlyMatMulKernel);
}

}  // namespace kiln::cpu
