// CPU kernels of pooling: MaxPool (with the optional int64 Indices output, storage_order, dilations,
// ceil_mode), AveragePool (count_include_pad, ceil_mode, dilations), LpPool, and the Global* pools.
// One loop nest for every rank: planes (N*C) are split across threads; each output position walks its
// window taps, skipping the ones in the padding.
#include <cmath>
#include <limits>

#include "backends/cpu/common.h"
#include "backends/cpu/families.h"
#include "backends/cpu/gemm_blas.h"
#include "backends/cpu/layout_util.h"
#include "ops/conv_geometry.h"

namespace kiln::cpu {

namespace {

enum class PoolKind { kMax, kAvg, kLp };

struct PoolGeo {
  int64_t nsp, planes, in_size, out_size, ksize;
  std::vector<int64_t> in, out, kernel, strides, dil, pads;
  // AveragePool-22 with count_include_pad: taps past the end pads (a ceil_mode window's overhang) are not counted.
  bool uncount_overhang = false;
  std::vector<int64_t> pads_end;
  std::vector<int64_t> colmajor;  // column-major strides of the input's spatial dims (storage_order = 1)
};

template <typename T>
void PoolLoop(const PoolGeo& g, PoolKind kind, bool count_pad, int64_t p, int64_t storage_order, const T* x, T* y,
              int64_t* indices) {
  using C = ComputeT<T>;
  ParallelFor(g.planes, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> o(g.nsp), k(g.nsp), coord(g.nsp);
    for (int64_t pl = begin; pl < end; ++pl) {
      const T* xp = x + pl * g.in_size;
      std::fill(o.begin(), o.end(), 0);
      for (int64_t op = 0; op < g.out_size; ++op) {
        double acc = 0;
        C best = std::numeric_limits<C>::lowest();
        int64_t best_idx = -1, count = 0, padded = 0;
        std::fill(k.begin(), k.end(), 0);
        for (int64_t t = 0; t < g.ksize; ++t) {
          bool valid = true, in_pads = true;
          int64_t flat = 0;
          for (int64_t d = 0; d < g.nsp; ++d) {
            coord[d] = o[d] * g.strides[d] - g.pads[d] + k[d] * g.dil[d];
            valid &= coord[d] >= 0 && coord[d] < g.in[d];
            if (g.uncount_overhang) in_pads &= coord[d] < g.in[d] + g.pads_end[d];
            flat = flat * g.in[d] + coord[d];
          }
          padded += in_pads ? 1 : 0;
          if (valid) {
            const C v = Load(xp, flat);
            ++count;
            if (kind == PoolKind::kMax) {
              if (best_idx < 0 || v > best) {
                best = v;
                best_idx = flat;
                if (storage_order == 1) {
                  best_idx = 0;
                  for (int64_t d = 0; d < g.nsp; ++d) best_idx += coord[d] * g.colmajor[d];
                }
              }
            } else if (kind == PoolKind::kAvg) {
              acc += static_cast<double>(v);
            } else {
              acc += std::pow(std::fabs(static_cast<double>(v)), static_cast<double>(p));
            }
          }
          for (int64_t d = g.nsp - 1; d >= 0; --d) {
            if (++k[d] < g.kernel[d]) break;
            k[d] = 0;
          }
        }
        const int64_t yi = pl * g.out_size + op;
        if (kind == PoolKind::kMax) {
          Store(y, yi, best_idx < 0 ? C(0) : best);
          if (indices) indices[yi] = best_idx < 0 ? 0 : pl * g.in_size + best_idx;
        } else if (kind == PoolKind::kAvg) {
          const int64_t div = !count_pad ? count : g.uncount_overhang ? padded : g.ksize;
          Store(y, yi, static_cast<C>(div > 0 ? acc / static_cast<double>(div) : 0.0));
        } else {
          Store(y, yi, static_cast<C>(std::pow(acc, 1.0 / static_cast<double>(p))));
        }
        for (int64_t d = g.nsp - 1; d >= 0; --d) {
          if (++o[d] < g.out[d]) break;
          o[d] = 0;
        }
      }
    }
  }, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g.out_size * g.ksize)));
}

bool PoolTypeOk(DataType t, PoolKind kind) {
  if (t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 || t == DataType::kBFloat16)
    return true;
  return kind == PoolKind::kMax && (t == DataType::kInt8 || t == DataType::kUInt8);
}

// The float types and int8/uint8 (PoolTypeOk has already rejected any other type).
template <typename Fn>
Status DispatchPool(DataType t, const Node& node, Fn&& fn) {
  if (t == DataType::kInt8) fn.template operator()<int8_t>();
  else if (t == DataType::kUInt8) fn.template operator()<uint8_t>();
  else return DispatchFloat(t, node, fn);
  return Status::Ok();
}

Status PoolKernel(KernelContext& ctx, PoolKind kind, bool global) {
  const Node& node = ctx.node;
  if (!ctx.input(0)) return Err(StatusCode::kInvalidArgument, "{}: input X is missing", node.Where());
  const Tensor& x = ctx.in(0);
  if (x.rank() < 3)
    return Err(StatusCode::kInvalidArgument, "{}: X {} must have rank >= 3", node.Where(), x.Describe());
  if (!PoolTypeOk(x.dtype(), kind))
    return Err(StatusCode::kUnsupported, "{}: element type {} is not supported", node.Where(),
               DataTypeName(x.dtype()));
  const int64_t nsp = x.rank() - 2;
  PoolGeo g;
  g.nsp = nsp;
  g.in.assign(x.shape().begin() + 2, x.shape().end());
  g.planes = x.dim(0) * x.dim(1);
  g.in_size = NumElements(g.in);
  if (global) {
    g.kernel = g.in;
    g.out.assign(nsp, 1);
    g.strides.assign(nsp, 1);
    g.dil.assign(nsp, 1);
    g.pads.assign(nsp, 0);
  } else {
    KILN_ASSIGN_OR_RETURN(WindowParams p, ReadWindowParams(node, nsp, {}, false));
    KILN_ASSIGN_OR_RETURN(g.out, ForwardOutputSizes(node, p, g.in));
    g.kernel = p.kernel;
    g.strides = p.strides;
    g.dil = p.dilations;
    g.pads.assign(p.pads.begin(), p.pads.begin() + nsp);
    g.pads_end.assign(p.pads.begin() + nsp, p.pads.end());
    g.uncount_overhang = kind == PoolKind::kAvg && UncountsPoolOverhang(node, p);
  }
  g.out_size = NumElements(g.out);
  g.ksize = NumElements(g.kernel);
  g.colmajor.assign(nsp, 1);
  for (int64_t d = 1; d < nsp; ++d) g.colmajor[d] = g.colmajor[d - 1] * g.in[d - 1];
  std::vector<int64_t> out_shape{x.dim(0), x.dim(1)};
  out_shape.insert(out_shape.end(), g.out.begin(), g.out.end());
  Tensor& y = ctx.out(0);
  EnsureOutput(y, x.dtype(), out_shape);
  int64_t* indices = nullptr;
  if (kind == PoolKind::kMax && ctx.num_outputs() > 1 && node.output(1)) {
    EnsureOutput(ctx.out(1), DataType::kInt64, out_shape);
    indices = ctx.out(1).data<int64_t>();
  }
  const bool count_pad = node.geti("count_include_pad", 0) != 0;
  const int64_t p = node.geti("p", 2);
  const int64_t storage_order = node.geti("storage_order", 0);
  if (kind == PoolKind::kLp && p < 1)
    return Err(StatusCode::kInvalidArgument, "{}: p must be >= 1, got {}", node.Where(), p);
  return DispatchPool(x.dtype(), node, [&]<typename T>() {
    PoolLoop<T>(g, kind, count_pad, p, storage_order, x.data<T>(), y.data<T>(), indices);
  });
}

}  // namespace

void RegisterPoolKernels(KernelRegistry& r) {
  r.Add("MaxPool", [](KernelContext& c) {
    return RunChannelsLast(c, [](KernelContext& k) { return PoolKernel(k, PoolKind::kMax, false); });
  });
  r.Add("AveragePool", [](KernelContext& c) {
    return RunChannelsLast(c, [](KernelContext& k) { return PoolKernel(k, PoolKind::kAvg, false); });
  });
  r.Add("LpPool", [](KernelContext& c) { return PoolKernel(c, PoolKind::kLp, false); });
  r.Add("GlobalMaxPool", [](KernelContext& c) { return PoolKernel(c, PoolKind::kMax, true); });
  r.Add("GlobalAveragePool", [](KernelContext& c) { return PoolKernel(c, PoolKind::kAvg, true); });
  r.Add("GlobalLpPool", [](KernelContext& c) { return PoolKernel(c, PoolKind::kLp, true); });
}

}  // namespace kiln::cpu
