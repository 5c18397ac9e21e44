// CPU kernels of Conv and ConvTranspose (1-D/2-D/3-D, groups, dilations, strides, pads, auto_pad, bias).
//  Conv:           per image and group, im2col (threaded over rows) then one OpenBLAS GEMM
//                  Y_g[M/g, out] = W_g[M/g, C/g*K] x col[C/g*K, out]; 1x1/stride-1/no-pad convolutions skip
//                  im2col; depthwise convolutions (C/g == 1) use a direct loop threaded over channels.
//  ConvTranspose:  col[M/g*K, in] = W_g^T x X_g (OpenBLAS), then col2im (threaded over output channels).
// float64 stays double; float16/bfloat16 are computed in float32. Pooling lives in pool.cpp, DeformConv in
// deform_conv.cpp.
#include <algorithm>

#include "backends/cpu/common.h"
#include "backends/cpu/conv_im2col.h"
#include "backends/cpu/conv_scratch.h"
#include "backends/cpu/families.h"
#include "backends/cpu/gemm_blas.h"
#include "backends/cpu/layout_util.h"
#include "ops/conv_geometry.h"

namespace kiln::cpu {

ConvScratchLimits& ConvScratch() {
  static ConvScratchLimits limits;
  return limits;
}

void RegisterPoolKernels(KernelRegistry& r);          // pool.cpp
void RegisterDeformConvKernels(KernelRegistry& r);    // deform_conv.cpp
void RegisterIntegerConvKernels(KernelRegistry& r);  // conv_integer.cpp: ConvInteger, QLinearConv

namespace {

// Adds col rows back into the image: img[c, i] += col[(c, tap), o] (transposed convolution).
template <typename F>
void Col2Im(const Geo& g, const F* col, int64_t channels, F* img) {
  ParallelFor(channels, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> koff(g.nsp);
    for (int64_t c = begin; c < end; ++c) {
      F* dst = img + c * g.in_size;
      for (int64_t kr = 0; kr < g.ksize; ++kr) {
        KernelOffsets(g, kr, koff.data());
        const F* src = col + (c * g.ksize + kr) * g.out_size;
        ForEachTap(g, koff.data(), [&](int64_t o, int64_t i) {
          if (i >= 0) dst[i] += src[o];
        });
      }
    }
  }, 1);
}

template <typename F>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const F* a, int64_t lda, const F* b, int64_t ldb,
          F beta, F* c, int64_t ldc) {
  if constexpr (std::is_same_v<F, float>) GemmF32(ta, tb, m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc);
  else GemmF64(ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

template <typename F>
void AddBias(const F* bias, int64_t batch, int64_t channels, int64_t size, F* y) {
  if (!bias) return;
  ParallelFor(batch * channels, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const F b = bias[r % channels];
      F* row = y + r * size;
      for (int64_t i = 0; i < size; ++i) row[i] += b;
    }
  }, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, size)));
}

// X [N, C, in...], W [M, C/g, k...] -> Y [N, M, out...].
template <typename F>
void ConvForward(const Geo& g, int64_t batch, int64_t c, int64_t m, int64_t group, const F* x, const F* w,
                 const F* bias, F* y) {
  const int64_t cg = c / group, mg = m / group, rows = cg * g.ksize;
  bool pointwise = true;
  for (int64_t d = 0; d < g.nsp; ++d)
    pointwise &= g.kernel[d] == 1 && g.strides[d] == 1 && g.pads[d] == 0 && g.in[d] == g.out[d];
  // The im2col buffer holds at most kMaxColElements: the input channels of a group go through it a chunk at a
  // time (the GEMMs accumulate), so scratch memory stays bounded whatever the shapes. Where even one channel's
  // rows exceed it, the direct loop runs.
  const int64_t kMaxColElements = ConvScratch().conv_col.load();
  const int64_t per_channel = g.ksize * g.out_size;
  const int64_t chunk = per_channel == 0 ? cg : std::min<int64_t>(cg, kMaxColElements / per_channel);
  if ((cg == 1 || chunk == 0) && !pointwise) {
    // Direct loop over (image, output channel): depthwise convolutions, and those with giant single-channel rows.
    ParallelFor(batch * m, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> koff(g.nsp);
      for (int64_t r = begin; r < end; ++r) {
        const int64_t n = r / m, oc = r % m, gi = oc / mg;
        F* yc = y + r * g.out_size;
        std::fill(yc, yc + g.out_size, F(0));
        for (int64_t ci = 0; ci < cg; ++ci) {
          const F* xc = x + (n * c + gi * cg + ci) * g.in_size;
          const F* wc = w + (oc * cg + ci) * g.ksize;
          for (int64_t kr = 0; kr < g.ksize; ++kr) {
            KernelOffsets(g, kr, koff.data());
            const F wv = wc[kr];
            ForEachTap(g, koff.data(), [&](int64_t o, int64_t i) {
              if (i >= 0) yc[o] += wv * xc[i];
            });
          }
        }
      }
    }, 1);
  } else {
    std::vector<F> col(pointwise ? 0 : static_cast<size_t>(chunk * per_channel));
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t gi = 0; gi < group; ++gi) {
        const F* xg = x + (n * c + gi * cg) * g.in_size;
        F* yg = y + (n * m + gi * mg) * g.out_size;
        const F* wg = w + gi * mg * rows;
        if (pointwise) {
          Gemm<F>(false, false, mg, g.out_size, rows, wg, rows, xg, g.out_size, F(0), yg, g.out_size);
          continue;
        }
        for (int64_t c0 = 0; c0 < cg; c0 += chunk) {
          const int64_t cc = std::min(chunk, cg - c0);
          Im2Col(g, xg + c0 * g.in_size, cc, col.data());
          // y += W[:, rows of channels c0..c0+cc) x col
          Gemm<F>(false, false, mg, g.out_size, cc * g.ksize, wg + c0 * g.ksize, rows, col.data(), g.out_size,
                  c0 == 0 ? F(0) : F(1), yg, g.out_size);
        }
      }
    }
  }
  AddBias(bias, batch, m, g.out_size, y);
}

// X [N, C, in...], W [C, M/g, k...] -> Y [N, M, out...]. Here Geo's "in" is the output image (col2im target)
// and "out" the input positions (GEMM columns).
template <typename F>
void ConvTransposeForward(const Geo& g, int64_t batch, int64_t c, int64_t m, int64_t group, const F* x,
                          const F* w, const F* bias, F* y) {
  const int64_t cg = c / group, mg = m / group, rows = mg * g.ksize;
  // The col matrix goes through a chunk of output channels at a time (at most kMaxTransposeCol elements): col rows
  // are (output channel, tap), so each chunk's Col2Im writes its own channels.
  const int64_t kMaxTransposeCol = ConvScratch().transpose_col.load();
  const int64_t per_channel = g.ksize * g.out_size;
  const int64_t chunk = per_channel == 0 ? mg : std::max<int64_t>(1, std::min(mg, kMaxTransposeCol / per_channel));
  std::vector<F> col(static_cast<size_t>(chunk * per_channel));
  std::fill(y, y + batch * m * g.in_size, F(0));
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t gi = 0; gi < group; ++gi) {
      const F* xg = x + (n * c + gi * cg) * g.out_size;
      const F* wg = w + gi * cg * rows;
      for (int64_t m0 = 0; m0 < mg; m0 += chunk) {
        const int64_t mc = std::min(chunk, mg - m0);
        // col = W[:, channels m0..m0+mc)^T x X, W's rows of length `rows` = (output channel, tap)
        Gemm<F>(true, false, mc * g.ksize, g.out_size, cg, wg + m0 * g.ksize, rows, xg, g.out_size, F(0),
                col.data(), g.out_size);
        Col2Im(g, col.data(), mc, y + (n * m + gi * mg + m0) * g.in_size);
      }
    }
  }
  AddBias(bias, batch, m, g.in_size, y);
}

template <typename F>
Status RunTyped(bool transpose, const Geo& g, int64_t batch, int64_t c, int64_t m, int64_t group, const F* x,
                const F* w, const F* b, F* y) {
  if (transpose) {
    // One output channel's rows of the col matrix (kernel x input positions) must fit the chunk bound.
    if (g.ksize > 0 && g.out_size > ConvScratch().transpose_col.load() / g.ksize)
      return Err(StatusCode::kUnsupported,
                 "ConvTranspose on the cpu backend needs a {} x {} scratch matrix per output channel, more than 2^28 "
                 "elements; use smaller inputs or kernels", g.ksize, g.out_size);
    ConvTransposeForward(g, batch, c, m, group, x, w, b, y);
  }
  else ConvForward(g, batch, c, m, group, x, w, b, y);
  return Status::Ok();
}

Status ConvKernel(KernelContext& ctx, bool transpose) {
  const Node& node = ctx.node;
  if (!ctx.input(0) || !ctx.input(1))
    return Err(StatusCode::kInvalidArgument, "{}: needs inputs X and W", node.Where());
  const Tensor& x = ctx.in(0);
  const Tensor& w = ctx.in(1);
  const Tensor* b = ctx.input(2);
  if (x.rank() < 3 || w.rank() != x.rank())
    return Err(StatusCode::kInvalidArgument, "{}: X {} and W {} must have the same rank >= 3", node.Where(),
               x.Describe(), w.Describe());
  const int64_t nsp = x.rank() - 2;
  std::vector<int64_t> kw(w.shape().begin() + 2, w.shape().end());
  KILN_ASSIGN_OR_RETURN(WindowParams p, ReadWindowParams(node, nsp, kw, transpose));
  const int64_t batch = x.dim(0), c = x.dim(1), group = p.group;
  const int64_t m = transpose ? w.dim(1) * group : w.dim(0);
  const bool channels_ok = transpose ? (w.dim(0) == c && c % group == 0)
                                     : (w.dim(1) * group == c && m % group == 0);
  if (!channels_ok)
    return Err(StatusCode::kInvalidArgument, "{}: channels of X {} and W {} do not match group {}", node.Where(),
               x.Describe(), w.Describe(), group);
  if (b && (b->rank() != 1 || b->dim(0) != m))
    return Err(StatusCode::kInvalidArgument, "{}: bias {} must be 1-D of size {}", node.Where(), b->Describe(), m);
  const std::vector<int64_t> in_sp(x.shape().begin() + 2, x.shape().end());
  std::vector<int64_t> out_sp;
  if (transpose) {
    KILN_ASSIGN_OR_RETURN(out_sp, TransposeOutputSizes(node, p, in_sp));
  } else {
    KILN_ASSIGN_OR_RETURN(out_sp, ForwardOutputSizes(node, p, in_sp));
  }
  std::vector<int64_t> out_shape{batch, m};
  out_shape.insert(out_shape.end(), out_sp.begin(), out_sp.end());
  Tensor& y = ctx.out(0);
  EnsureOutput(y, x.dtype(), out_shape);
  if (y.numel() == 0) return Status::Ok();
  const Geo g = transpose ? MakeGeo(p, out_sp, in_sp) : MakeGeo(p, in_sp, out_sp);
  switch (x.dtype()) {
    case DataType::kFloat32:
      return RunTyped<float>(transpose, g, batch, c, m, group, x.data<float>(), w.data<float>(),
                             b ? b->data<float>() : nullptr, y.data<float>());
    case DataType::kFloat64:
      return RunTyped<double>(transpose, g, batch, c, m, group, x.data<double>(), w.data<double>(),
                              b ? b->data<double>() : nullptr, y.data<double>());
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const auto fx = ToFloatBuffer(x), fw = ToFloatBuffer(w);
      std::vector<float> fb = b ? ToFloatBuffer(*b) : std::vector<float>{};
      std::vector<float> fy(static_cast<size_t>(y.numel()));
      KILN_RETURN_IF_ERROR(RunTyped<float>(transpose, g, batch, c, m, group, fx.data(), fw.data(),
                                           b ? fb.data() : nullptr, fy.data()));
      FromFloatBuffer(fy.data(), y);
      return Status::Ok();
    }
    default:
      return Err(StatusCode::kUnsupported, "{}: element type {} is not supported", node.Where(),
                 DataTypeName(x.dtype()));
  }
}

}  // namespace

void RegisterConvKernels(KernelRegistry& r) {
  r.Add("Conv", [](KernelContext& c) {
    return RunChannelsLast(c, [](KernelContext& k) { return ConvKernel(k, false); });
  });
  r.Add("ConvTranspose", [](KernelContext& c) { return ConvKernel(c, true); });
  RegisterPoolKernels(r);
  RegisterDeformConvKernels(r);
  RegisterIntegerConvKernels(r);
}

}  // namespace kiln::cpu
