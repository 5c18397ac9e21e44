// CPU kernels of the elementwise family, part 1: shared helpers (output allocation, broadcast plan),
// unary math, activations, Clip, IsNaN/IsInf/Not, and the family's registration function.
// Binary/compare/logic/variadic ops live in elementwise_binary.cpp, Cast and Q/DQ in elementwise_cast.cpp.
#include <cmath>
#include <type_traits>

#include "backends/cpu/elementwise_internal.h"
#include "backends/cpu/families.h"

namespace kiln::cpu::elem {

// ---------------------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------------------

void EnsureOutput(KernelContext& ctx, size_t i, DataType dtype, const std::vector<int64_t>& shape) {
  if (i >= ctx.outputs.size()) return;
  Tensor& t = ctx.outputs[i];
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

enum class Cat { kFloat, kSigned, kNumeric };

// Builds a same-type unary kernel: `make(node)` returns a generic lambda computing one element.
template <Cat cat, typename Make>
KernelFn Unary(Make make) {
  return [make](KernelContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(NeedInput(ctx, 0));
    const Tensor& x = ctx.in(0);
    EnsureOutput(ctx, 0, x.dtype(), x.shape());
    auto f = make(ctx.node);
    auto body = [&]<typename T>() { MapUnary<T>(x, ctx.out(0), f); };
    if constexpr (cat == Cat::kFloat) return DispatchFloat(x.dtype(), ctx.node, body);
    else if constexpr (cat == Cat::kSigned) return DispatchSigned(x.dtype(), ctx.node, body);
    else return DispatchNumeric(x.dtype(), ctx.node, body);
  };
}

template <typename C>
C StableSigmoid(C x) {
  if (x >= C(0)) return C(1) / (C(1) + std::exp(-x));
  const C e = std::exp(x);
  return e / (C(1) + e);
}

template <typename C>
C Softplus(C x) {
  return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
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
    auto bound = [&](const Tensor* b, C def) -> C {
      if (!b) return def;
      if (b->dtype() == x.dtype()) return Load(b->data<T>(), 0);
      if constexpr (std::is_integral_v<C>) return static_cast<C>(b->GetAsInt(0));
      return static_cast<C>(b->GetAsDouble(0));
    };
    const C lo = bound(lo_t, std::numeric_limits<C>::lowest());
    const C hi = bound(hi_t, std::numeric_limits<C>::max());
    const bool has_lo = lo_t != nullptr, has_hi = hi_t != nullptr;
    MapUnary<T>(x, ctx.out(0), [=](C v) {
      if (has_lo && v < lo) v = lo;
      if (has_hi && v > hi) v = hi;
      return v;
    });
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
  auto simple = [](auto f) { return [f](const Node&) { return f; }; };
  r.Add("Sqrt", Unary<Cat::kFloat>(simple([](auto x) { return std::sqrt(x); })));
  r.Add("Exp", Unary<Cat::kFloat>(simple([](auto x) { return std::exp(x); })));
  r.Add("Log", Unary<Cat::kFloat>(simple([](auto x) { return std::log(x); })));
  r.Add("Tanh", Unary<Cat::kFloat>(simple([](auto x) { return std::tanh(x); })));
  r.Add("Floor", Unary<Cat::kFloat>(simple([](auto x) { return std::floor(x); })));
  r.Add("Ceil", Unary<Cat::kFloat>(simple([](auto x) { return std::ceil(x); })));
  r.Add("Round", Unary<Cat::kFloat>(simple([](auto x) { return std::nearbyint(x); })));  // half to even
  r.Add("Reciprocal", Unary<Cat::kFloat>(simple([](auto x) { return decltype(x)(1) / x; })));
  r.Add("Sigmoid", Unary<Cat::kFloat>(simple([](auto x) { return StableSigmoid(x); })));
  r.Add("Softplus", Unary<Cat::kFloat>(simple([](auto x) { return Softplus(x); })));
  r.Add("Mish", Unary<Cat::kFloat>(simple([](auto x) { return x * std::tanh(Softplus(x)); })));
  r.Add("HardSwish", Unary<Cat::kFloat>(simple([](auto x) {
          using C = decltype(x);
          const C t = x / C(6) + C(0.5);
          return x * (t < C(0) ? C(0) : (t > C(1) ? C(1) : t));
        })));
  r.Add("Erf", Unary<Cat::kNumeric>(simple([](auto x) {
          using C = decltype(x);
          if constexpr (std::is_integral_v<C>) return static_cast<C>(std::erf(static_cast<double>(x)));
          else return std::erf(x);
        })));
  r.Add("Abs", Unary<Cat::kNumeric>(simple([](auto x) {
          using C = decltype(x);
          if constexpr (std::is_unsigned_v<C>) return x;
          else return x < C(0) ? static_cast<C>(-x) : x;
        })));
  r.Add("Neg", Unary<Cat::kSigned>(simple([](auto x) { return static_cast<decltype(x)>(-x); })));
  r.Add("Sign", Unary<Cat::kNumeric>(simple([](auto x) {
          using C = decltype(x);
          return x > C(0) ? C(1) : (x < C(0) ? static_cast<C>(-1) : x);
        })));
  r.Add("Relu", Unary<Cat::kSigned>(simple([](auto x) { return x < decltype(x)(0) ? decltype(x)(0) : x; })));

  // Activations with attributes (read with the plain getters: shape inference checked their types).
  r.Add("LeakyRelu", Unary<Cat::kFloat>([](const Node& n) {
          const float alpha = n.getf("alpha", 0.01f);
          return [alpha](auto x) { using C = decltype(x); return x < C(0) ? C(alpha) * x : x; };
        }));
  r.Add("Elu", Unary<Cat::kFloat>([](const Node& n) {
          const float alpha = n.getf("alpha", 1.0f);
          return [alpha](auto x) {
            using C = decltype(x);
            return x < C(0) ? C(alpha) * (std::exp(x) - C(1)) : x;
          };
        }));
  r.Add("Selu", Unary<Cat::kFloat>([](const Node& n) {
          const float alpha = n.getf("alpha", 1.67326319217681884765625f);
          const float gamma = n.getf("gamma", 1.05070102214813232421875f);
          return [alpha, gamma](auto x) {
            using C = decltype(x);
            return x <= C(0) ? C(gamma) * (C(alpha) * std::exp(x) - C(alpha)) : C(gamma) * x;
          };
        }));
  r.Add("HardSigmoid", Unary<Cat::kFloat>([](const Node& n) {
          const float alpha = n.getf("alpha", 0.2f);
          const float beta = n.getf("beta", 0.5f);
          return [alpha, beta](auto x) {
            using C = decltype(x);
            const C t = C(alpha) * x + C(beta);
            return t < C(0) ? C(0) : (t > C(1) ? C(1) : t);
          };
        }));
  r.Add("Gelu", Unary<Cat::kFloat>([](const Node& n) {
          const bool tanh_approx = n.gets("approximate", "none") == "tanh";
          return [tanh_approx](auto x) {
            using C = decltype(x);
            if (tanh_approx) {
              const C k = static_cast<C>(0.7978845608028654);  // sqrt(2/pi)
              return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
            }
            return C(0.5) * x * (C(1) + std::erf(x * static_cast<C>(0.7071067811865476)));
          };
        }));

  r.Add("Clip", ClipKernel);
  r.Add("Not", NotKernel);
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
