// CPU kernels of the elementwise family, part 2: broadcasting binary arithmetic (Add Sub Mul Div Mod Pow PRelu),
// comparisons, logic (And Or Xor), Where, and the variadic Min Max Sum Mean.
// All of them run over a coalesced broadcast plan: contiguous same-shape and scalar cases become one long
// inner loop without index arithmetic, split across threads.
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/elementwise_internal.h"

namespace kiln::cpu::elem {
namespace {

// Wide unsigned type for wrap-around arithmetic on integers (no signed-overflow UB).
template <typename C>
using WideU = std::conditional_t<sizeof(C) == 8, uint64_t, uint32_t>;

// o = f(a, b) over the plan; TA/TB/TO are storage types.
template <typename TA, typename TB, typename TO, typename F>
void RunBinary(const BroadcastPlan& p, const TA* a, const TB* b, TO* o, F f) {
  ParallelRange<2>(p, [&](const std::array<int64_t, 2>& off, int64_t out_off, int64_t n) {
    const TA* pa = a + off[0];
    const TB* pb = b + off[1];
    TO* po = o + out_off;
    const bool sa = p.inner_stride[0] != 0, sb = p.inner_stride[1] != 0;
    if (sa && sb) {
      for (int64_t i = 0; i < n; ++i) Store(po, i, f(Load(pa, i), Load(pb, i)));
    } else if (sa) {
      const auto bv = Load(pb, 0);
      for (int64_t i = 0; i < n; ++i) Store(po, i, f(Load(pa, i), bv));
    } else if (sb) {
      const auto av = Load(pa, 0);
      for (int64_t i = 0; i < n; ++i) Store(po, i, f(av, Load(pb, i)));
    } else {
      const auto v = f(Load(pa, 0), Load(pb, 0));
      for (int64_t i = 0; i < n; ++i) Store(po, i, v);
    }
  });
}

Status NeedSameType(const KernelContext& ctx, size_t i, size_t j) {
  if (ctx.in(i).dtype() != ctx.in(j).dtype())
    return Err(StatusCode::kInvalidArgument, "{}: inputs {} and {} must have the same type, got {} and {}",
               ctx.node.Where(), i, j, DataTypeName(ctx.in(i).dtype()), DataTypeName(ctx.in(j).dtype()));
  return Status::Ok();
}

enum class Cat { kNumeric, kAll, kBool, kInteger };

// Same-type binary op with result type T (arith) or bool (compare).
template <Cat cat, bool kToBool, typename F>
KernelFn Binary(F f) {
  return [f](KernelContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(NeedInput(ctx, 0));
    KILN_RETURN_IF_ERROR(NeedInput(ctx, 1));
    KILN_RETURN_IF_ERROR(NeedSameType(ctx, 0, 1));
    const Tensor& a = ctx.in(0);
    const Tensor& b = ctx.in(1);
    KILN_ASSIGN_OR_RETURN(BroadcastPlan p, MakeBroadcastPlan(ctx.node, {a.shape(), b.shape()}));
    EnsureOutput(ctx, 0, kToBool ? DataType::kBool : a.dtype(), p.out_shape);
    Tensor& y = ctx.out(0);
    auto body = [&]<typename T>() {
      using TO = std::conditional_t<kToBool, bool, T>;
      RunBinary(p, a.data<T>(), b.data<T>(), y.data<TO>(), f);
    };
    if constexpr (cat == Cat::kNumeric) return DispatchNumeric(a.dtype(), ctx.node, body);
    else if constexpr (cat == Cat::kAll) return DispatchAll(a.dtype(), ctx.node, body);
    else if constexpr (cat == Cat::kInteger) {  // the bitwise ops
      if (!IsBitwiseInteger(a.dtype()))
        return Err(StatusCode::kInvalidArgument, "{}: needs integer inputs, got {}", ctx.node.Where(),
                   DataTypeName(a.dtype()));
      return DispatchNumeric(a.dtype(), ctx.node, [&]<typename T>() {
        if constexpr (std::is_integral_v<T>) body.template operator()<T>();
      });
    } else {
      if (a.dtype() != DataType::kBool)
        return Err(StatusCode::kInvalidArgument, "{}: inputs must be bool, got {}", ctx.node.Where(),
                   DataTypeName(a.dtype()));
      body.template operator()<bool>();
      return Status::Ok();
    }
  };
}

// BitShift (ONNX 28's rule for every width): a shift by a negative amount or by the width or more gives what the
// sign alone gives (-1 for a right shift of a negative value, else 0); a right shift of a signed value is
// arithmetic; a left shift drops the bits shifted out.
template <bool kLeft>
struct ShiftOp {
  template <typename C> C operator()(C x, C y) const {
    if constexpr (std::is_integral_v<C>) {
      constexpr int kBits = static_cast<int>(sizeof(C) * 8);
      using U = std::make_unsigned_t<C>;
      const bool out_of_range = (std::is_signed_v<C> && y < C(0)) || static_cast<uint64_t>(y) >= kBits;
      if (out_of_range) return !kLeft && std::is_signed_v<C> && x < C(0) ? C(-1) : C(0);
      const int s = static_cast<int>(y);
      if constexpr (kLeft) return static_cast<C>(static_cast<U>(static_cast<U>(x) << s));
      else return static_cast<C>(x >> s);  // arithmetic for signed C (C++20)
    } else {
      return x;
    }
  }
};

struct AddOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) return static_cast<C>(WideU<C>(a) + WideU<C>(b));
    else return a + b;
  }
};
struct SubOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) return static_cast<C>(WideU<C>(a) - WideU<C>(b));
    else return a - b;
  }
};
struct MulOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) return static_cast<C>(WideU<C>(a) * WideU<C>(b));
    else return a * b;
  }
};
struct DivOp {
  // Integer division truncates toward zero; x/0 gives 0 and MIN/-1 wraps instead of trapping.
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) return C(0);
      if constexpr (std::is_signed_v<C>)
        if (b == C(-1)) return static_cast<C>(WideU<C>(0) - WideU<C>(a));
      return static_cast<C>(a / b);
    } else {
      return a / b;
    }
  }
};
struct MinOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
    }
    return b < a ? b : a;
  }
};
struct MaxOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
    }
    return a < b ? b : a;
  }
};
struct PReluOp {
  template <typename C> C operator()(C x, C slope) const { return x < C(0) ? MulOp()(x, slope) : x; }
};

// ---- Pow: base and exponent may have different types; the result has the base's type ----
template <typename C, typename E>
C PowValue(C a, E b) {
  if constexpr (std::is_integral_v<C> && std::is_integral_v<E>) {
    if constexpr (std::is_signed_v<E>) {
      if (b < 0) {  // only 1 and -1 have integral reciprocals
        if (a == C(1)) return C(1);
        if constexpr (std::is_signed_v<C>)
          if (a == C(-1)) return (b % 2 == 0) ? C(1) : C(-1);
        return C(0);
      }
    }
    WideU<C> r = 1, base = static_cast<WideU<C>>(a);
    for (auto e = static_cast<uint64_t>(b); e; e >>= 1) {
      if (e & 1) r *= base;
      base *= base;
    }
    return static_cast<C>(r);
  } else if constexpr (std::is_integral_v<C>) {
    const double v = std::pow(static_cast<double>(a), static_cast<double>(b));
    if (std::isnan(v)) return C(0);
    if (v <= static_cast<double>(std::numeric_limits<C>::lowest())) return std::numeric_limits<C>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<C>::max())) return std::numeric_limits<C>::max();
    return static_cast<C>(v);
  } else if constexpr (std::is_same_v<C, float> && !std::is_same_v<E, double>) {
    return std::pow(a, static_cast<float>(b));
  } else {
    return static_cast<C>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  }
}

Status PowKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(NeedInput(ctx, 0));
  KILN_RETURN_IF_ERROR(NeedInput(ctx, 1));
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  KILN_ASSIGN_OR_RETURN(BroadcastPlan p, MakeBroadcastPlan(ctx.node, {a.shape(), b.shape()}));
  EnsureOutput(ctx, 0, a.dtype(), p.out_shape);
  Tensor& y = ctx.out(0);
  // Common float cases with a scalar exponent become cheap maps.
  const bool float_base = a.dtype() == DataType::kFloat32 || a.dtype() == DataType::kFloat16 ||
                          a.dtype() == DataType::kBFloat16 || a.dtype() == DataType::kFloat64;
  if (float_base && b.numel() == 1 && IsFloatType(b.dtype()) && b.dtype() != DataType::kFloat8E4M3FN &&
      p.out_shape == a.shape()) {
    const double e = b.GetAsDouble(0);
    if (e == 2.0 || e == 3.0 || e == 1.0 || e == 0.5) {
      return DispatchFloat(a.dtype(), ctx.node, [&]<typename T>() {
        using C = ComputeT<T>;
        const T* pa = a.data<T>();
        T* po = y.data<T>();
        ParallelFor(
            a.numel(),
            [&](int64_t s, int64_t t) {
              for (int64_t i = s; i < t; ++i) {
                const C x = Load(pa, i);
                Store(po, i, e == 2.0 ? x * x : e == 3.0 ? x * x * x : e == 1.0 ? x : std::sqrt(x));
              }
            },
            kElemGrain);
      });
    }
  }
  Status inner = Status::Ok();
  auto base = [&]<typename TA>() {
    if constexpr (std::is_same_v<TA, float> || std::is_same_v<TA, double> || std::is_same_v<TA, Half> ||
                  std::is_same_v<TA, BFloat16> || std::is_same_v<TA, int32_t> || std::is_same_v<TA, int64_t>) {
      inner = DispatchNumeric(b.dtype(), ctx.node, [&]<typename TB>() {
        RunBinary(p, a.data<TA>(), b.data<TB>(), y.data<TA>(),
                  [](ComputeT<TA> x, ComputeT<TB> e) { return PowValue(x, e); });
      });
    } else {
      inner = Err(StatusCode::kUnsupported, "{}: Pow does not support base type {}", ctx.node.Where(),
                  DataTypeName(a.dtype()));
    }
  };
  KILN_RETURN_IF_ERROR(DispatchNumeric(a.dtype(), ctx.node, base));
  return inner;
}

// ---- Mod ----
// fmod=0: the remainder has the sign of the divisor (Python's %, floored division; floats from opset 28, as numpy's
// mod: a zero remainder takes the divisor's sign); fmod=1: the sign of the dividend (C's fmod / %, truncated
// division). For integers, x mod 0 gives 0 (as integer Div gives x/0 = 0) and x mod -1 gives 0 (no MIN % -1 trap).
// Floats start from std::fmod (x mod 0 = NaN).
template <bool kFmod, typename C>
C ModValue(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if (b == C(0)) return C(0);
    if constexpr (std::is_signed_v<C>) {
      if (b == C(-1)) return C(0);
      const C r = static_cast<C>(a % b);
      // Opposite signs and |r| < |b|: r + b cannot overflow.
      if (!kFmod && r != C(0) && ((r < C(0)) != (b < C(0)))) return static_cast<C>(r + b);
      return r;
    } else {
      return static_cast<C>(a % b);
    }
  } else {
    const C r = std::fmod(a, b);
    if (kFmod) return r;
    if (r == C(0)) return std::copysign(C(0), b);
    return (r < C(0)) != (b < C(0)) ? static_cast<C>(r + b) : r;
  }
}

Status ModKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(NeedInput(ctx, 0));
  KILN_RETURN_IF_ERROR(NeedInput(ctx, 1));
  KILN_RETURN_IF_ERROR(NeedSameType(ctx, 0, 1));
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  const int64_t fmod = ctx.node.geti("fmod", 0);
  if (fmod != 0 && fmod != 1)
    return Err(StatusCode::kInvalidArgument, "{}: Mod attribute fmod must be 0 or 1, got {}", ctx.node.Where(),
               fmod);
  KILN_ASSIGN_OR_RETURN(BroadcastPlan p, MakeBroadcastPlan(ctx.node, {a.shape(), b.shape()}));
  EnsureOutput(ctx, 0, a.dtype(), p.out_shape);
  Tensor& y = ctx.out(0);
  return DispatchNumeric(a.dtype(), ctx.node, [&]<typename T>() {
    using C = ComputeT<T>;
    if (fmod) RunBinary(p, a.data<T>(), b.data<T>(), y.data<T>(), [](C x, C z) { return ModValue<true>(x, z); });
    else RunBinary(p, a.data<T>(), b.data<T>(), y.data<T>(), [](C x, C z) { return ModValue<false>(x, z); });
  });
}

Status WhereKernel(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(NeedInput(ctx, i));
  const Tensor& c = ctx.in(0);
  const Tensor& x = ctx.in(1);
  const Tensor& y = ctx.in(2);
  if (c.dtype() != DataType::kBool)
    return Err(StatusCode::kInvalidArgument, "{}: condition must be bool, got {}", ctx.node.Where(),
               DataTypeName(c.dtype()));
  KILN_RETURN_IF_ERROR(NeedSameType(ctx, 1, 2));
  KILN_ASSIGN_OR_RETURN(BroadcastPlan p, MakeBroadcastPlan(ctx.node, {c.shape(), x.shape(), y.shape()}));
  EnsureOutput(ctx, 0, x.dtype(), p.out_shape);
  Tensor& out = ctx.out(0);
  return DispatchAll(x.dtype(), ctx.node, [&]<typename T>() {
    const uint8_t* pc = c.data<uint8_t>();
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    const int64_t sc = p.inner_stride[0], sx = p.inner_stride[1], sy = p.inner_stride[2];
    ParallelRange<3>(p, [&](const std::array<int64_t, 3>& off, int64_t o, int64_t n) {
      const uint8_t* cc = pc + off[0];
      const T* xx = px + off[1];
      const T* yy = py + off[2];
      for (int64_t i = 0; i < n; ++i) po[o + i] = cc[i * sc] ? xx[i * sx] : yy[i * sy];
    });
  });
}

// Min/Max/Sum/Mean over 1..N broadcasting inputs: out = in0 broadcast, then out = f(out, in_k).
template <typename F>
KernelFn Variadic(F f, bool mean, bool float_only) {
  return [f, mean, float_only](KernelContext& ctx) -> Status {
    if (ctx.num_inputs() == 0)
      return Err(StatusCode::kInvalidArgument, "{}: needs at least one input", ctx.node.Where());
    std::vector<std::vector<int64_t>> shapes;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      KILN_RETURN_IF_ERROR(NeedInput(ctx, i));
      KILN_RETURN_IF_ERROR(NeedSameType(ctx, 0, i));
      shapes.push_back(ctx.in(i).shape());
    }
    const DataType dt = ctx.in(0).dtype();
    KILN_ASSIGN_OR_RETURN(BroadcastPlan all, MakeBroadcastPlan(ctx.node, shapes));
    EnsureOutput(ctx, 0, dt, all.out_shape);
    Tensor& y = ctx.out(0);
    Status st = Status::Ok();
    auto body = [&]<typename T>() {
      T* po = y.data<T>();
      for (size_t i = 0; i < ctx.num_inputs() && st.ok(); ++i) {
        auto pr = MakeBroadcastPlan(ctx.node, {all.out_shape, ctx.in(i).shape()});
        if (!pr.ok()) {
          st = pr.status();
          return;
        }
        if (i == 0)
          RunBinary(*pr, po, ctx.in(0).data<T>(), po, [](ComputeT<T>, ComputeT<T> v) { return v; });
        else
          RunBinary(*pr, po, ctx.in(i).data<T>(), po, f);
      }
      if (mean && st.ok()) {
        const auto n = static_cast<ComputeT<T>>(ctx.num_inputs());
        for (int64_t i = 0; i < y.numel(); ++i) Store(po, i, Load(po, i) / n);
      }
    };
    KILN_RETURN_IF_ERROR(float_only ? DispatchFloat(dt, ctx.node, body) : DispatchNumeric(dt, ctx.node, body));
    return st;
  };
}

}  // namespace

void RegisterBinaryElementwiseKernels(KernelRegistry& r) {
  r.Add("Add", Binary<Cat::kNumeric, false>(AddOp()));
  r.Add("Sub", Binary<Cat::kNumeric, false>(SubOp()));
  r.Add("Mul", Binary<Cat::kNumeric, false>(MulOp()));
  r.Add("Div", Binary<Cat::kNumeric, false>(DivOp()));
  r.Add("PRelu", Binary<Cat::kNumeric, false>(PReluOp()));
  r.Add("Pow", PowKernel);
  r.Add("Mod", ModKernel);
  r.Add("Equal", Binary<Cat::kAll, true>([](auto a, auto b) -> bool { return a == b; }));
  r.Add("Less", Binary<Cat::kNumeric, true>([](auto a, auto b) -> bool { return a < b; }));
  r.Add("Greater", Binary<Cat::kNumeric, true>([](auto a, auto b) -> bool { return a > b; }));
  r.Add("LessOrEqual", Binary<Cat::kNumeric, true>([](auto a, auto b) -> bool { return a <= b; }));
  r.Add("GreaterOrEqual", Binary<Cat::kNumeric, true>([](auto a, auto b) -> bool { return a >= b; }));
  r.Add("And", Binary<Cat::kBool, true>([](bool a, bool b) -> bool { return a && b; }));
  r.Add("Or", Binary<Cat::kBool, true>([](bool a, bool b) -> bool { return a || b; }));
  r.Add("Xor", Binary<Cat::kBool, true>([](bool a, bool b) -> bool { return a != b; }));
  r.Add("BitwiseAnd", Binary<Cat::kInteger, false>([](auto a, auto b) { return static_cast<decltype(a)>(a & b); }));
  r.Add("BitwiseOr", Binary<Cat::kInteger, false>([](auto a, auto b) { return static_cast<decltype(a)>(a | b); }));
  r.Add("BitwiseXor", Binary<Cat::kInteger, false>([](auto a, auto b) { return static_cast<decltype(a)>(a ^ b); }));
  r.Add("BitShift", [left = Binary<Cat::kInteger, false>(ShiftOp<true>()),
                     right = Binary<Cat::kInteger, false>(ShiftOp<false>())](KernelContext& ctx) {
    KILN_ASSIGN_OR_RETURN(std::string dir, ctx.node.attr_string("direction", ""));
    if (dir == "LEFT") return left(ctx);
    if (dir == "RIGHT") return right(ctx);
    return Err(StatusCode::kInvalidModel, "{}: direction must be LEFT or RIGHT, not '{}'", ctx.node.Where(), dir);
  });
  r.Add("Where", WhereKernel);
  r.Add("Min", Variadic(MinOp(), false, false));
  r.Add("Max", Variadic(MaxOp(), false, false));
  r.Add("Sum", Variadic(AddOp(), false, true));
  r.Add("Mean", Variadic(AddOp(), true, true));
}

}  // namespace kiln::cpu::elem
