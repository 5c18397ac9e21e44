// CPU kernel of kiln.FusedPointwise: runs a small program of elementwise ops (ops/fused_ops.h) in one pass
// over memory. The output is cut into blocks of kBlock elements; per block every operand is loaded once into
// a float buffer (following its broadcast strides), each step runs as a tight loop over the block, and the
// last step's result is stored. Intermediates never leave the cache.
#include <cmath>

#include "backends/cpu/common.h"
#include "backends/cpu/families.h"
#include "ops/fused_ops.h"
#include "ops/pointwise_op.h"

namespace kiln::cpu {
namespace {

using fused::PwOp;

constexpr int64_t kBlock = 512;

// How one input is read: contiguous like the output, one scalar, or through broadcast strides.
struct Operand {
  enum Kind { kContiguous, kScalar, kStrided } kind = kStrided;
  const Tensor* t = nullptr;
  std::vector<int64_t> strides;  // over the output dims (0 where broadcast)
};

template <typename T>
void LoadBlock(const Operand& op, const std::vector<int64_t>& shape, int64_t begin, int64_t len, float* dst) {
  const T* p = op.t->data<T>();
  if (op.kind == Operand::kContiguous) {
    for (int64_t i = 0; i < len; ++i) dst[i] = static_cast<float>(Load(p, begin + i));
    return;
  }
  if (op.kind == Operand::kScalar) {
    const float v = static_cast<float>(Load(p, 0));
    for (int64_t i = 0; i < len; ++i) dst[i] = v;
    return;
  }
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t idx[16] = {0};
  int64_t off = 0, r = begin;
  for (int64_t d = rank - 1; d >= 0; --d) {
    idx[d] = r % shape[d];
    r /= shape[d];
    off += idx[d] * op.strides[d];
  }
  for (int64_t i = 0; i < len; ++i) {
    dst[i] = static_cast<float>(Load(p, off));
    for (int64_t d = rank - 1; d >= 0; --d) {
      off += op.strides[d];
      if (++idx[d] < shape[d]) break;
      off -= op.strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

// One step over a block, in float: the formula's functor (ops/pointwise_formulas.h) in a tight loop.
void RunStep(PwOp op, float alpha, float beta, const float* a, const float* b, float* r, int64_t n) {
  if (PwIsBinary(op)) {
    VisitBinary(op, [&](auto f) {
      for (int64_t i = 0; i < n; ++i) r[i] = f(a[i], b[i]);
    });
  } else {
    VisitUnary(op, [&](auto f) {
      for (int64_t i = 0; i < n; ++i) r[i] = f(a[i], alpha, beta);
    });
  }
}

template <typename T>
void Run(const fused::PwProgram& prog, const std::vector<Operand>& ops, const std::vector<int64_t>& shape, Tensor& y) {
  const int64_t total = y.numel();
  const size_t steps = prog.ops.size(), nin = ops.size();
  T* out = y.data<T>();
  ParallelFor(total, [&](int64_t b, int64_t e) {
    std::vector<float> buf((nin + steps) * kBlock);
    for (int64_t s = b; s < e; s += kBlock) {
      const int64_t len = std::min(kBlock, e - s);
      for (size_t i = 0; i < nin; ++i) LoadBlock<T>(ops[i], shape, s, len, buf.data() + i * kBlock);
      auto operand = [&](int64_t a) -> const float* {
        return buf.data() + (a >= 0 ? a : static_cast<int64_t>(nin) + (-1 - a)) * kBlock;
      };
      for (size_t j = 0; j < steps; ++j)
        RunStep(prog.ops[j], prog.alpha[j], prog.beta[j], operand(prog.args[2 * j]), operand(prog.args[2 * j + 1]),
                buf.data() + (nin + j) * kBlock, len);
      const float* r = buf.data() + (nin + steps - 1) * kBlock;
      for (int64_t i = 0; i < len; ++i) Store(out, s + i, static_cast<ComputeT<T>>(r[i]));
    }
  }, 8192);
}

Status FusedPointwiseKernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  KILN_ASSIGN_OR_RETURN(fused::PwProgram prog, fused::ParseProgram(n, ctx.num_inputs()));
  std::vector<int64_t> shape;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.input(i)) return Err(StatusCode::kInvalidArgument, "{}: input {} is missing", n.Where(), i);
    if (i == 0) {
      shape = ctx.in(0).shape();
    } else {
      KILN_ASSIGN_OR_RETURN(shape, BroadcastShape(n, shape, ctx.in(i).shape()));
    }
  }
  if (shape.size() > 16)
    return Err(StatusCode::kUnsupported, "{}: rank {} is above the 16 dims FusedPointwise supports", n.Where(),
               shape.size());
  Tensor& y = ctx.out(0);
  const DataType t = ctx.in(0).dtype();
  if (!y.defined() || y.shape() != shape || y.dtype() != t) y = Tensor(t, shape);
  if (y.numel() == 0) return Status::Ok();
  std::vector<Operand> ops(ctx.num_inputs());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Tensor& in = ctx.in(i);
    if (in.dtype() != t)
      return Err(StatusCode::kInvalidArgument, "{}: input {} is {} but input 0 is {}", n.Where(), i,
                 DataTypeName(in.dtype()), DataTypeName(t));
    ops[i].t = &in;
    if (in.shape() == shape) ops[i].kind = Operand::kContiguous;
    else if (in.numel() == 1) ops[i].kind = Operand::kScalar;
    else ops[i].strides = BroadcastStrides(in.shape(), shape);
  }
  switch (t) {
    case DataType::kFloat32: Run<float>(prog, ops, shape, y); break;
    case DataType::kFloat16: Run<Half>(prog, ops, shape, y); break;
    case DataType::kBFloat16: Run<BFloat16>(prog, ops, shape, y); break;
    default:
      return Err(StatusCode::kUnsupported, "{}: FusedPointwise runs float32/float16/bfloat16, not {}", n.Where(),
                 DataTypeName(t));
  }
  return Status::Ok();
}

}  // namespace

void RegisterFusedPointwiseKernel(KernelRegistry& r) { r.Add("kiln.FusedPointwise", FusedPointwiseKernel); }

}  // namespace kiln::cpu
