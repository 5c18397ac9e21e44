// Channels-last (kiln_layout = "NHWC", src/plan/layout.h) for the reference kernels of Conv, FusedConv,
// MaxPool, AveragePool and kiln.QConv: X is permuted to NCHW (and the input `also` when given: QConv's residual,
// in Y's layout), the NCHW kernel runs, and Y is permuted back into output 0.
#pragma once

#include <cstring>
#include <vector>

#include "backends/cpu/kernel.h"
#include "core/error.h"
#include "plan/layout.h"

namespace kiln::cpu {

inline Status RunChannelsLast(KernelContext& ctx, const KernelFn& nchw, int also = -1) {
  const std::string layout = ctx.node.gets("kiln_layout", "NCHW");
  if (layout == "NCHW") return nchw(ctx);
  if (layout != "NHWC")
    return Err(StatusCode::kInvalidModel, "{}: kiln_layout must be NCHW or NHWC, got '{}'", ctx.node.Where(), layout);
  if (!ctx.input(0) || ctx.in(0).rank() != 4)
    return Err(StatusCode::kInvalidArgument, "{}: kiln_layout NHWC needs X of rank 4 ([N,H,W,C])", ctx.node.Where());
  const Tensor x = PermuteTensor(ctx.in(0), {0, 3, 1, 2});
  std::vector<const Tensor*> ins = ctx.inputs;
  ins[0] = &x;
  Tensor other;
  if (also > 0 && also < static_cast<int>(ins.size()) && ins[also] && ins[also]->defined()) {
    if (ins[also]->rank() != 4)
      return Err(StatusCode::kInvalidArgument, "{}: kiln_layout NHWC needs input {} of rank 4", ctx.node.Where(), also);
    other = PermuteTensor(*ins[also], {0, 3, 1, 2});
    ins[also] = &other;
  }
  std::vector<Tensor> outs(ctx.num_outputs());
  KernelContext sub{ctx.node, ins, outs};
  KILN_RETURN_IF_ERROR(nchw(sub));
  Tensor y = PermuteTensor(outs[0], {0, 2, 3, 1});
  Tensor& dst = ctx.out(0);
  if (dst.defined() && dst.dtype() == y.dtype() && dst.shape() == y.shape()) {
    if (y.nbytes() > 0) std::memcpy(dst.raw(), y.raw(), y.nbytes());
  } else {
    dst = std::move(y);
  }
  return Status::Ok();
}

}  // namespace kiln::cpu
