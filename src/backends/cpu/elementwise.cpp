// CPU kernels of the elementwise family, part 1: shared helpers (output allocation, broadcast plan), the unary
// formula ops (one templated kernel per row of ops/pointwise_formulas.h, with typed integer paths), Gelu, Clip,
// IsNaN/IsInf/Not, and the family's registration function.
// Binary/compare/logic/variadic ops live in elementwise_binary.cpp, Cast and Q/DQ in elementwise_cast.cpp.
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/elementwise_internal.h"
#include "backends/cpu/families.h"
#include "ops/pointwise_op.h"

namespace kiln::cpu::elem {

// ---------------------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------------------

void EnsureOutput(KernelContext& ctx, size_t i, DataType dtype, const std::vector<int64_t>& shape) {
  // An output the node does not list (a node from a file may list fewer) is still allocated, in ctx.discarded,
  // so that a kernel writing it writes memory that is thrown away.
  Tensor& t = ctx.out(i);
  if (t.defined() && t.dtype() == dtype && t.shape() == shape && (t.raw() || t.numel() == 0)) return;
  t = Tensor(dtype, shape);
}

Status NeedInput(const KernelContext& ctx, size_t i) {
  if (ctx.input(i) == nullptr || !ctx.input(i)->defined())
    return Err(StatusCode::kInvalidArgument, "{}: input {} is missing", ctx.node.Where(), i);
  return Status::Ok();
}

Result<BroadcastPlan> MakeBroadcastPlan(const Node& n, const std::vector<std::vector<int64_t>>& shapes) {
  BroadcastPlan p;
  const size_t k = shapes.size();
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  // Output shape, numpy rules.
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    const size_t off = rank - s.size();
    for (size_t d = 0; d < s.size(); ++d) {
      const int64_t v = s[d];
      int64_t& o = out[off + d];
      if (v == o || v == 1) continue;
      if (o == 1) {
        o = v;
        continue;
      }
      std::string all;
      for (const auto& t : shapes) all += (all.empty() ? "" : " and ") + ShapeToString(t);
      return Err(StatusCode::kInvalidArgument, "{}: shapes {} cannot be broadcast together", n.Where(), all);
    }
  }
  p.out_shape = out;
  p.outer_strides.assign(k, {});
  p.inner_stride.assign(k, 0);
  if (NumElements(out) == 0) {
    p.rows = 0;
    p.inner = 1;
    return p;
  }
  // Per operand strides over the output dims (0 where broadcast); dims of extent 1 are dropped.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides(k);
  std::vector<std::vector<int64_t>> full(k);
  for (size_t j = 0; j < k; ++j) {
    std::vector<int64_t> padded(rank, 1);
    const size_t off = rank - shapes[j].size();
    for (size_t d = 0; d < shapes[j].size(); ++d) padded[off + d] = shapes[j][d];
    const auto st = Strides(padded);
    full[j].resize(rank);
    for (size_t d = 0; d < rank; ++d) full[j][d] = padded[d] == 1 ? 0 : st[d];
  }
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    dims.push_back(out[d]);
    for (size_t j = 0; j < k; ++j) strides[j].push_back(full[j][d]);
  }
  if (dims.empty()) {  // scalar output
    p.rows = 1;
    p.inner = 1;
    return p;
  }
  // Coalesce adjacent dims where every operand is contiguous (or broadcast) across the pair.
  std::vector<int64_t> cd{dims.back()};
  std::vector<std::vector<int64_t>> cs(k);
  for (size_t j = 0; j < k; ++j) cs[j].push_back(strides[j].back());
  for (int64_t d = static_cast<int64_t>(dims.size()) - 2; d >= 0; --d) {
    bool merge = true;
    for (size_t j = 0; j < k && merge; ++j) merge = strides[j][d] == cs[j].back() * cd.back();
    if (merge) {
      cd.back() *= dims[d];
    } else {
      cd.push_back(dims[d]);
      for (size_t j = 0; j < k; ++j) cs[j].push_back(strides[j][d]);
    }
  }
  // cd/cs are innermost-first; the first entry is the inner run.
  p.inner = cd.front();
  p.rows = 1;
  for (size_t d = cd.size(); d-- > 1;) {
    p.outer.push_back(cd[d]);
    p.rows *= cd[d];
  }
  for (size_t j = 0; j < k; ++j) {
    p.inner_stride[j] = cs[j].front();
    for (size_t d = cd.size(); d-- > 1;) p.outer_strides[j].push_back(cs[j][d]);
  }
  return p;
}

namespace {

// ---------------------------------------------------------------------------------------------------------
// Unary maps
// ---------------------------------------------------------------------------------------------------------

template <typename T, typename F>
void MapUnary(const Tensor& x, Tensor& y, F f) {
  const T* a = x.data<T>();
  T* o = y.data<T>();
  ParallelFor(
      x.numel(),
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) Store(o, i, static_cast<ComputeT<T>>(f(Load(a, i))));
      },
      kElemGrain);
}

// The kernel of a unary formula F (ops/pointwise_formulas.h) with its attributes a and b read from the node:
// float inputs compute F in ComputeT<T> (float for float16/bfloat16); integer inputs run `int_path` where the
// op has one.
template <typename F>
KernelFn FormulaKernel(PwOp op, KernelFn int_path = nullptr) {
  return [op, int_path](KernelContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(NeedInput(ctx, 0));
    const Tensor& x = ctx.in(0);
    if (int_path && IsIntegerType(x.dtype())) return int_path(ctx);
    const PwOpInfo& info = PwInfo(op);
    const float a = *info.attr_a ? ctx.node.getf(info.attr_a, info.default_a) : 0.f;
    const float b = *info.attr_b ? ctx.node.getf(info.attr_b, info.default_b) : 0.f;
    EnsureOutput(ctx, 0, x.dtype(), x.shape());
    return DispatchFloat(x.dtype(), ctx.node, [&]<typename T>() {
      using C = ComputeT<T>;
      MapUnary<T>(x, ctx.out(0), [ca = C(a), cb = C(b)](C v) { return F{}(v, ca, cb); });
    });
  };
}

// Integer inputs of the unary ops that take them: f computes one element in its own type.
template <bool kSignedOnly, typename F>
KernelFn IntegerUnary(F f) {
  return [f](KernelContext& ctx) -> Status {
    const Tensor& x = ctx.in(0);
    EnsureOutput(ctx, 0, x.dtype(), x.shape());
    auto body = [&]<typename T>() { MapUnary<T>(x, ctx.out(0), f); };
    switch (x.dtype()) {
      case DataType::kInt8: body.template operator()<int8_t>(); return Status::Ok();
      case DataType::kInt16: body.template operator()<int16_t>(); return Status::Ok();
      case DataType::kInt32: body.template operator()<int32_t>(); return Status::Ok();
      case DataType::kInt64: body.template operator()<int64_t>(); return Status::Ok();
      default: break;
    }
    if constexpr (!kSignedOnly) {
      switch (x.dtype()) {
        case DataType::kUInt8: body.template operator()<uint8_t>(); return Status::Ok();
        case DataType::kUInt16: body.template operator()<uint16_t>(); return Status::Ok();
        case DataType::kUInt32: body.template operator()<uint32_t>(); return Status::Ok();
        case DataType::kUInt64: body.template operator()<uint64_t>(); return Status::Ok();
        default: break;
      }
    }
    return Err(StatusCode::kUnsupported, "{}: {} does not take {} inputs", ctx.node.Where(), ctx.node.op_type,
               DataTypeName(x.dtype()));
  };
}

// Shrink of an integer x: the formula in double (x + bias below -lambd, x - bias above lambd, else 0), truncated
// toward zero and saturated to T's range (as kiln's Cast of a double). The CUDA layer computes the same (ShrinkInt
// in backends/cuda/pointwise_unary.cu).
template <typename T>
T ShrinkInteger(T x, float lambd, float bias) {
  const double v = static_cast<double>(x), l = lambd;
  const double r = v < -l ? v + bias : (v > l ? v - bias : 0.0);
  using Lim = std::numeric_limits<T>;
  if (r <= static_cast<double>(Lim::min())) return Lim::min();
  if (r >= static_cast<double>(Lim::max())) return Lim::max();
  return static_cast<T>(r);
}

// The integer paths of the formula ops whose types include integers (Signed: Relu, Neg; Numeric: Abs, Sign, Erf,
// Shrink).
KernelFn IntegerPath(const std::string& op) {
  if (op == "Shrink")
    return [](KernelContext& ctx) -> Status {
      const float lambd = ctx.node.getf("lambd", 0.5f), bias = ctx.node.getf("bias", 0.f);
      return IntegerUnary<false>([=](auto x) { return ShrinkInteger(x, lambd, bias); })(ctx);
    };
  if (op == "Relu") return IntegerUnary<true>([](auto x) { return x < decltype(x)(0) ? decltype(x)(0) : x; });
  if (op == "Neg") return IntegerUnary<true>([](auto x) { return static_cast<decltype(x)>(-x); });
  if (op == "Abs")
    return IntegerUnary<false>([](auto x) {
      using C = decltype(x);
      if constexpr (std::is_unsigned_v<C>) return x;
      else return x < C(0) ? static_cast<C>(-x) : x;
    });
  if (op == "Sign")
    return IntegerUnary<false>([](auto x) {
      using C = decltype(x);
      return x > C(0) ? C(1) : (x < C(0) ? static_cast<C>(-1) : x);
    });
  if (op == "Erf")
    return IntegerUnary<false>([](auto x) { return static_cast<decltype(x)>(std::erf(static_cast<double>(x))); });
  return nullptr;
}

// Result of an element-to-bool predicate over a float tensor.
template <typename Pred>
Status FloatPredicate(KernelContext& ctx, Pred pred) {
  KILN_RETURN_IF_ERROR(NeedInput(ctx, 0));
  const Tensor& x = ctx.in(0);
  EnsureOutput(ctx, 0, DataType::kBool, x.shape());
  bool* o = ctx.out(0).data<bool>();
  return DispatchFloat(x.dtype(), ctx.node, [&]<typename T>() {
    const T* a = x.data<T>();
    ParallelFor(
        x.numel(),
        [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) o[i] = pred(Load(a, i));
        },
        kElemGrain);
  });
}

Status ClipKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(NeedInput(ctx, 0));
  const Tensor& x = ctx.in(0);
  const Tensor* lo_t = ctx.input(1);
  const Tensor* hi_t = ctx.input(2);
  if (lo_t && !lo_t->defined()) lo_t = nullptr;
  if (hi_t && !hi_t->defined()) hi_t = nullptr;
  for (const Tensor* b : {lo_t, hi_t})
    if (b && b->numel() != 1)
      return Err(StatusCode::kInvalidArgument, "{}: min and max must be scalars, got {}", ctx.node.Where(),
                 b->Describe());
  EnsureOutput(ctx, 0, x.dtype(), x.shape());
  return DispatchNumeric(x.dtype(), ctx.node, [&]<typename T>() {
    using C = ComputeT<T>;
    using Lim = std::numeric_limits<C>;
    // An absent bound clamps nothing: -inf/+inf for floats, the type's range for integers.
    auto bound = [&](const Tensor* b, C def) -> C {
      if (!b) return def;
      if (b->dtype() == x.dtype()) return Load(b->data<T>(), 0);
      if constexpr (std::is_integral_v<C>) return static_cast<C>(b->GetAsInt(0));
      return static_cast<C>(b->GetAsDouble(0));
    };
    const C lo = bound(lo_t, Lim::has_infinity ? -Lim::infinity() : Lim::lowest());
    const C hi = bound(hi_t, Lim::has_infinity ? Lim::infinity() : Lim::max());
    MapUnary<T>(x, ctx.out(0), [=](C v) { return pwf::Clip{}(v, lo, hi); });
  });
}

Status NotKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(NeedInput(ctx, 0));
  const Tensor& x = ctx.in(0);
  if (x.dtype() != DataType::kBool)
    return Err(StatusCode::kInvalidArgument, "{}: Not needs a bool input, got {}", ctx.node.Where(),
               x.Describe());
  EnsureOutput(ctx, 0, DataType::kBool, x.shape());
  const uint8_t* a = x.data<uint8_t>();
  uint8_t* o = ctx.out(0).data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = a[i] ? 0 : 1;
  return Status::Ok();
}

void RegisterUnaryKernels(KernelRegistry& r) {
  // One kernel per row of KILN_POINTWISE_UNARY_OPS (ops/pointwise_formulas.h).
#define KILN_CPU_FORMULA_KERNEL(Name, ...) r.Add(#Name, FormulaKernel<pwf::Name>(PwOp::k##Name, IntegerPath(#Name)));
  KILN_POINTWISE_UNARY_OPS(KILN_CPU_FORMULA_KERNEL)
#undef KILN_CPU_FORMULA_KERNEL
  // Gelu: approximate="none" is the Gelu formula, "tanh" GeluTanh.
  r.Add("Gelu", [exact = FormulaKernel<pwf::Gelu>(PwOp::kGelu),
                 approx = FormulaKernel<pwf::GeluTanh>(PwOp::kGeluTanh)](KernelContext& ctx) {
    return ctx.node.gets("approximate", "none") == "tanh" ? approx(ctx) : exact(ctx);
  });
  r.Add("Clip", ClipKernel);
  r.Add("Not", NotKernel);
  r.Add("BitwiseNot", [](KernelContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(NeedInput(ctx, 0));
    const Tensor& x = ctx.in(0);
    if (!IsBitwiseInteger(x.dtype()))
      return Err(StatusCode::kInvalidArgument, "{}: BitwiseNot needs an integer input, got {}", ctx.node.Where(),
                 x.Describe());
    EnsureOutput(ctx, 0, x.dtype(), x.shape());
    Tensor& y = ctx.out(0);
    return DispatchNumeric(x.dtype(), ctx.node, [&]<typename T>() {
      if constexpr (std::is_integral_v<T>)
        for (int64_t i = 0; i < x.numel(); ++i) y.data<T>()[i] = static_cast<T>(~x.data<T>()[i]);
    });
  });
  r.Add("IsNaN", [](KernelContext& ctx) { return FloatPredicate(ctx, [](auto v) { return std::isnan(v); }); });
  r.Add("IsInf", [](KernelContext& ctx) {
    const bool neg = ctx.node.geti("detect_negative", 1) != 0;
    const bool pos = ctx.node.geti("detect_positive", 1) != 0;
    return FloatPredicate(ctx, [neg, pos](auto v) {
      return std::isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
    });
  });
}

}  // namespace
}  // namespace kiln::cpu::elem

namespace kiln::cpu {

void RegisterElementwiseKernels(KernelRegistry& r) {
  elem::RegisterUnaryKernels(r);
  elem::RegisterBinaryElementwiseKernels(r);
  elem::RegisterCastQuantKernels(r);
}

}  // namespace kiln::cpu
