// CPU kernels of the ops the optimizer creates (domain kiln; see shape/fused_ops.h), part 1:
// FusedConv, FusedGemm and FusedMatMul run the reference Conv / Gemm / MatMul kernel (im2col + OpenBLAS
// GEMM) and then apply the bias and activation in one pass over the output, while it is still hot in cache.
// FusedPointwise lives in fused_pointwise.cpp, Attention in fused_attention.cpp.
#include <cmath>

#include "backends/cpu/activation.h"
#include "backends/cpu/common.h"
#include "backends/cpu/families.h"
#include "ops/fused_ops.h"

namespace kiln::cpu {

void RegisterFusedPointwiseKernel(KernelRegistry& r);  // fused_pointwise.cpp
void RegisterAttentionKernel(KernelRegistry& r);       // fused_attention.cpp

namespace {

using fused::Act;

struct ActParams {
  Act act = Act::kNone;
  float alpha = 0.f, beta = 0.f;
};

Result<ActParams> ReadActivation(const Node& n) {
  const std::string name = n.gets("kiln_activation", "None");
  auto act = fused::ParseActivation(name);
  if (!act) return Err(StatusCode::kInvalidModel, "{}: unknown kiln_activation '{}'", n.Where(), name);
  return ActParams{*act, n.getf("kiln_activation_alpha", 0.f), n.getf("kiln_activation_beta", 0.f)};
}

// y[i] = act(y[i] + bias[i % nb] + res[i]) over the whole tensor (bias and res may be null), threaded. The sum
// before the residual is rounded to T, as the graph's separate Add would have read it.
template <typename T, typename F>
void Apply(T* y, int64_t n, const T* bias, int64_t nb, const T* res, F f) {
  using C = ComputeT<T>;
  ParallelFor(n, [&](int64_t b, int64_t e) {
    int64_t j = bias ? b % nb : 0;
    for (int64_t i = b; i < e; ++i) {
      C v = Load(y, i);
      if (bias) {
        v += Load(bias, j);
        if (++j == nb) j = 0;
      }
      if (res) {
        T rounded[1];
        Store(rounded, 0, v);
        v = Load(rounded, 0) + Load(res, i);
      }
      Store(y, i, f(v));
    }
  }, 16384);
}

template <typename T>
void Epilogue(T* y, int64_t n, const T* bias, int64_t nb, const T* res, const ActParams& a) {
  using C = ComputeT<T>;
  const C alpha = static_cast<C>(a.alpha), beta = static_cast<C>(a.beta);
  WithActivation(a.act, [&](auto act) {
    Apply(y, n, bias, nb, res, [=](C x) { return Activate<decltype(act)::value>(x, alpha, beta); });
  });
}

template <typename T>
const T* Data(const Tensor* t) {
  return t ? t->data<T>() : nullptr;
}

// The residual of FusedConv / FusedGemm / FusedMatMul (input 3, optional; see shape/fused_ops.h), or nullptr.
const Tensor* Residual(const KernelContext& ctx) { return ctx.num_inputs() > 3 ? ctx.input(3) : nullptr; }

// Bias (optional, numel nb), activation and residual (optional, the output's shape) over output 0.
Status RunEpilogue(KernelContext& ctx, const Tensor* bias, const ActParams& a, const Tensor* res = nullptr) {
  Tensor& y = ctx.out(0);
  if (!y.defined() || y.numel() == 0) return Status::Ok();
  if (a.act == Act::kNone && !bias && !res) return Status::Ok();
  int64_t nb = 0;
  if (bias) {
    nb = bias->numel();
    if (bias->dtype() != y.dtype() || y.rank() == 0 || nb != y.dim(-1))
      return Err(StatusCode::kInvalidArgument, "{}: bias {} does not match the last axis of the output {}",
                 ctx.node.Where(), bias->Describe(), y.Describe());
  }
  if (res && (res->dtype() != y.dtype() || res->shape() != y.shape()))
    return Err(StatusCode::kInvalidArgument, "{}: the residual {} must have exactly the output's shape and type {}",
               ctx.node.Where(), res->Describe(), y.Describe());
  switch (y.dtype()) {
    case DataType::kFloat32: Epilogue(y.data<float>(), y.numel(), Data<float>(bias), nb, Data<float>(res), a); break;
    case DataType::kFloat64: Epilogue(y.data<double>(), y.numel(), Data<double>(bias), nb, Data<double>(res), a); break;
    case DataType::kFloat16: Epilogue(y.data<Half>(), y.numel(), Data<Half>(bias), nb, Data<Half>(res), a); break;
    case DataType::kBFloat16:
      Epilogue(y.data<BFloat16>(), y.numel(), Data<BFloat16>(bias), nb, Data<BFloat16>(res), a);
      break;
    default:
      return Err(StatusCode::kUnsupported, "{}: fused epilogues run on float types, not {}", ctx.node.Where(),
                 DataTypeName(y.dtype()));
  }
  return Status::Ok();
}

// The reference kernel of `base` on this node's first `n_inputs` inputs (the fused node carries its attributes).
Status RunBase(KernelContext& ctx, const char* base, size_t n_inputs) {
  const KernelFn* fn = Kernels().Find(base);
  if (!fn) return Err(StatusCode::kInternal, "{}: no CPU kernel for {}", ctx.node.Where(), base);
  std::vector<const Tensor*> ins(ctx.inputs.begin(), ctx.inputs.begin() + std::min(n_inputs, ctx.inputs.size()));
  KernelContext sub{ctx.node, ins, ctx.outputs};
  return (*fn)(sub);
}

Status FusedConvOrGemm(KernelContext& ctx, const char* base) {
  KILN_ASSIGN_OR_RETURN(ActParams a, ReadActivation(ctx.node));
  KILN_RETURN_IF_ERROR(RunBase(ctx, base, 3));  // the residual (input 3) is no operand of the base op
  return RunEpilogue(ctx, nullptr, a, Residual(ctx));
}

Status FusedMatMulKernel(KernelContext& ctx) {
  if (ctx.num_inputs() < 3 || !ctx.input(0) || !ctx.input(1) || !ctx.input(2))
    return Err(StatusCode::kInvalidArgument, "{}: FusedMatMul needs A, B and bias", ctx.node.Where());
  KILN_ASSIGN_OR_RETURN(ActParams a, ReadActivation(ctx.node));
  KILN_RETURN_IF_ERROR(RunBase(ctx, "MatMul", 2));
  return RunEpilogue(ctx, ctx.input(2), a, Residual(ctx));
}

}  // namespace

void RegisterFusedKernels(KernelRegistry& r) {
  r.Add("kiln.FusedConv", [](KernelContext& c) { return FusedConvOrGemm(c, "Conv"); });
  r.Add("kiln.FusedGemm", [](KernelContext& c) { return FusedConvOrGemm(c, "Gemm"); });
  r.Add("kiln.FusedMatMul", FusedMatMulKernel);
  RegisterFusedPointwiseKernel(r);
  RegisterAttentionKernel(r);
}

}  // namespace kiln::cpu
