// CPU kernels of the elementwise family, part 3: Cast, CastLike, QuantizeLinear, DequantizeLinear, and the
// float8 conversions they need (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ; round to nearest even, with the ONNX
// saturate rules: saturate -> out-of-range values and infinities clamp to the largest finite value,
// otherwise they become infinity where the format has one and NaN where it does not). Casts to and from float4e2m1,
// float8e8m0, int2 and uint2 are elementwise_cast_narrow.cpp's. kiln.Reformat (a Cast, Transpose and last-axis zero
// Pad in one node) casts as Cast does, then moves the elements as Transpose does.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/elementwise_internal.h"
#include "backends/cpu/tensor_util.h"
#include "core/narrow_types.h"
#include "ops/fused_ops.h"
#include "ops/quantize_linear.h"

namespace kiln::cpu::elem {

namespace {
struct F8Format {
  int man_bits;
  int bias;
  bool has_inf;   // E5M2 only
  bool uz;        // FNUZ: no negative zero; 0x80 is the only NaN
  float max;      // largest finite value
};

F8Format FormatOf(DataType t) {
  switch (t) {
    case DataType::kFloat8E4M3FN: return {3, 7, false, false, 448.0f};
    case DataType::kFloat8E4M3FNUZ: return {3, 8, false, true, 240.0f};
    case DataType::kFloat8E5M2: return {2, 15, true, false, 57344.0f};
    default: return {2, 16, false, true, 57344.0f};  // E5M2FNUZ
  }
}

// NaN: 0x80 in the FNUZ formats; otherwise the sign kept with 0x7f (E4M3FN's only NaN) or 0x7e (E5M2's quiet NaN,
// what float16 NaN truncates to and ONNX's reference writes).
uint8_t NanCode(const F8Format& f, uint8_t sign) {
  return f.uz ? 0x80 : static_cast<uint8_t>(sign | (f.has_inf ? 0x7e : 0x7f));
}
}  // namespace

bool IsFloat8Type(DataType t) {
  return t == DataType::kFloat8E4M3FN || t == DataType::kFloat8E4M3FNUZ || t == DataType::kFloat8E5M2 ||
         t == DataType::kFloat8E5M2FNUZ;
}

float Float8ToFloat(DataType t, uint8_t v) {
  const F8Format f = FormatOf(t);
  const int exp_bits = 7 - f.man_bits;
  const uint32_t exp = (v >> f.man_bits) & ((1u << exp_bits) - 1);
  const uint32_t man = v & ((1u << f.man_bits) - 1);
  const bool neg = (v & 0x80) != 0;
  if (f.uz) {
    if (v == 0x80) return std::numeric_limits<float>::quiet_NaN();
  } else if (t == DataType::kFloat8E4M3FN) {
    if (exp == 0xf && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0x1f) {  // E5M2
    if (man == 0) return neg ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    return std::numeric_limits<float>::quiet_NaN();
  }
  float r;
  if (exp == 0) r = std::ldexp(static_cast<float>(man), 1 - f.bias - f.man_bits);
  else r = std::ldexp(1.0f + std::ldexp(static_cast<float>(man), -f.man_bits), static_cast<int>(exp) - f.bias);
  return neg ? -r : r;
}

uint8_t FloatToFloat8(DataType t, float x, bool saturate) {
  const F8Format f = FormatOf(t);
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return NanCode(f, sign);
  const float a = std::fabs(x);
  auto overflow = [&]() -> uint8_t {
    if (saturate) return sign | FloatToFloat8(t, f.max, false);
    if (f.has_inf) return sign | 0x7c;
    return NanCode(f, sign);
  };
  if (std::isinf(a)) return overflow();
  if (a == 0.0f) return f.uz ? 0 : sign;
  const int emin = 1 - f.bias;  // exponent of the smallest normal
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  e -= 1;             // a = 1.x * 2^e
  if (e < emin) e = emin;
  const double q = std::ldexp(1.0, e - f.man_bits);  // spacing of representable values at this exponent
  double n = std::nearbyint(static_cast<double>(a) / q);  // round half to even (exact division by 2^k)
  const double v = n * q;
  if (v > f.max) return overflow();
  if (n == 0) return f.uz ? 0 : sign;
  const double one = std::ldexp(1.0, f.man_bits);
  if (n >= 2 * one) {  // rounding carried into the next binade
    n /= 2;
    ++e;
  }
  uint32_t code;
  if (n < one) code = static_cast<uint32_t>(n);  // subnormal (e == emin)
  else code = (static_cast<uint32_t>(e + f.bias) << f.man_bits) | (static_cast<uint32_t>(n) - (1u << f.man_bits));
  return static_cast<uint8_t>(sign | code);
}

double ElementAsDouble(const Tensor& t, int64_t i) {
  if (IsFloat8Type(t.dtype())) return Float8ToFloat(t.dtype(), t.data<uint8_t>()[i]);
  return t.GetAsDouble(i);
}

namespace {

// Converts a compute value to the compute type of the target (ONNX Cast semantics; float -> int truncates
// and clamps to the target range, NaN -> 0; anything -> bool is "!= 0").
template <typename To, typename From>
To ConvertValue(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (std::isnan(v)) return To(0);
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// Rounds a double directly to half (no double rounding through float).
uint16_t DoubleToHalfBits(double v) {
  const float f = static_cast<float>(v);
  uint16_t h = FloatToHalf(f);
  const double hv = HalfToFloat(h);
  if (std::isfinite(v) && std::isfinite(hv) && hv != v) {
    // Pick the nearer neighbour of h in the direction of v (ties are already even-rounded).
    const uint16_t other = static_cast<uint16_t>((v > hv) == !(h & 0x8000) ? h + 1 : h - 1);
    const double ov = HalfToFloat(other);
    if (std::isfinite(ov) && std::fabs(ov - v) < std::fabs(hv - v)) h = other;
  }
  return h;
}

Status CastTo(const Node& n, const Tensor& x, Tensor& y, bool saturate, const std::string& round_mode) {
  const DataType from = x.dtype(), to = y.dtype();
  const int64_t count = x.numel();
  if (from == to) {
    if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
    return Status::Ok();
  }
  if (IsNarrowType(from) || IsNarrowType(to)) return CastNarrow(n, x, y, saturate, round_mode);
  if (Is4BitType(from) || Is4BitType(to)) {
    // int4/uint4 are held one value per byte: read through double. A cast to them keeps the low four bits of the
    // integer (a float truncated toward zero first), as onnx 1.23's reference does; a cast from them to another
    // integer type is an integer conversion (wraps, like every integer Cast).
    std::vector<double> tmp(static_cast<size_t>(count));
    if (IsFloat8Type(from)) {
      for (int64_t i = 0; i < count; ++i) tmp[i] = Float8ToFloat(from, x.data<uint8_t>()[i]);
    } else {
      for (int64_t i = 0; i < count; ++i) tmp[i] = x.GetAsDouble(i);
    }
    if (Is4BitType(to)) {  // integers wrap; floats truncate toward zero, then wrap (as onnx 1.23's reference does)
      const bool int_source = IsIntegerType(from) || from == DataType::kBool;
      for (int64_t i = 0; i < count; ++i)
        y.data<int8_t>()[i] =
            Wrap4Bit(int_source ? x.GetAsInt(i) : TruncatedForWrap(tmp[i]), to == DataType::kInt4);
      return Status::Ok();
    }
    if (IsFloat8Type(to)) {
      for (int64_t i = 0; i < count; ++i) y.data<uint8_t>()[i] = FloatToFloat8(to, static_cast<float>(tmp[i]), saturate);
      return Status::Ok();
    }
    return DispatchAll(to, n, [&]<typename U>() {
      U* q = y.data<U>();
      for (int64_t i = 0; i < count; ++i) {
        if constexpr (std::is_integral_v<U> && !std::is_same_v<U, bool>)
          q[i] = static_cast<U>(static_cast<int64_t>(tmp[i]));  // from a 4-bit integer: exact, then wraps
        else
          Store(q, i, ConvertValue<ComputeT<U>>(tmp[i]));
      }
    });
  }
  if (IsFloat8Type(to) || IsFloat8Type(from)) {
    // Through float: float8 values and every source value that float8 can represent are exact in float.
    if (!IsSupportedType(from) && !IsFloat8Type(from))
      return Err(StatusCode::kUnsupported, "{}: cannot cast from {}", n.Where(), DataTypeName(from));
    if (!IsSupportedType(to) && !IsFloat8Type(to))
      return Err(StatusCode::kUnsupported, "{}: cannot cast to {}", n.Where(), DataTypeName(to));
    std::vector<float> tmp(static_cast<size_t>(count));
    if (IsFloat8Type(from)) {
      const uint8_t* p = x.data<uint8_t>();
      for (int64_t i = 0; i < count; ++i) tmp[i] = Float8ToFloat(from, p[i]);
    } else {
      KILN_RETURN_IF_ERROR(DispatchAll(from, n, [&]<typename T>() {
        const T* p = x.data<T>();
        for (int64_t i = 0; i < count; ++i) tmp[i] = static_cast<float>(Load(p, i));
      }));
    }
    if (IsFloat8Type(to)) {
      uint8_t* q = y.data<uint8_t>();
      for (int64_t i = 0; i < count; ++i) q[i] = FloatToFloat8(to, tmp[i], saturate);
      return Status::Ok();
    }
    return DispatchAll(to, n, [&]<typename U>() {
      U* q = y.data<U>();
      for (int64_t i = 0; i < count; ++i) Store(q, i, ConvertValue<ComputeT<U>>(tmp[i]));
    });
  }
  Status inner = Status::Ok();
  KILN_RETURN_IF_ERROR(DispatchAll(from, n, [&]<typename T>() {
    inner = DispatchAll(to, n, [&]<typename U>() {
      const T* p = x.data<T>();
      U* q = y.data<U>();
      ParallelFor(
          count,
          [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) {
              if constexpr (std::is_same_v<T, double> && std::is_same_v<U, Half>) {
                q[i].bits = DoubleToHalfBits(Load(p, i));
              } else {
                Store(q, i, ConvertValue<ComputeT<U>>(Load(p, i)));
              }
            }
          },
          kElemGrain);
    });
  }));
  return inner;
}

Status CastKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(NeedInput(ctx, 0));
  const DataType to = static_cast<DataType>(ctx.node.geti("to", 0));
  if (!IsSupportedType(to) && !IsFloat8Type(to))
    return Err(StatusCode::kUnsupported, "{}: cannot cast to type {} ({})", ctx.node.Where(),
               static_cast<int>(to), DataTypeName(to));
  EnsureOutput(ctx, 0, to, ctx.in(0).shape());
  return CastTo(ctx.node, ctx.in(0), ctx.out(0), ctx.node.geti("saturate", 1) != 0,
                ctx.node.gets("round_mode", "up"));
}

Status CastLikeKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(NeedInput(ctx, 0));
  KILN_RETURN_IF_ERROR(NeedInput(ctx, 1));
  EnsureOutput(ctx, 0, ctx.in(1).dtype(), ctx.in(0).shape());
  return CastTo(ctx.node, ctx.in(0), ctx.out(0), ctx.node.geti("saturate", 1) != 0,
                ctx.node.gets("round_mode", "up"));
}

// kiln.Reformat (ops/fused_ops.h): X cast into a scratch tensor, then one strided copy of its permuted view into Y,
// whose padded tail of the last axis stays zero.
Status ReformatKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(NeedInput(ctx, 0));
  const Tensor& x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(const fused::ReformatParams p, fused::ReadReformat(ctx.node, x.dtype(), x.rank()));
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> shape, fused::ReformatOutputShape(ctx.node, p, x.shape()));
  Tensor cast(p.to, x.shape());
  KILN_RETURN_IF_ERROR(CastTo(ctx.node, x, cast, true, "up"));
  Tensor& y = AllocOutput(ctx, 0, p.to, shape);
  if (y.numel() == 0) return Status::Ok();
  std::memset(y.raw(), 0, y.nbytes());
  const std::vector<int64_t> xs = Strides(x.shape());
  std::vector<int64_t> moved, src;  // the permuted view of the cast X: Y's shape before the padding
  for (int64_t a : p.perm) {
    moved.push_back(x.shape()[a]);
    src.push_back(xs[a]);
  }
  StridedCopy(cast.raw(), y.raw(), moved, src, Strides(shape), DataTypeSize(p.to));
  return Status::Ok();
}

// How a scale / zero-point tensor maps onto x: param index = o*outer_step + (a/block)*axis_step + j*inner_step
// for x viewed as [outer, D, inner] around `axis`.
struct QuantLayout {
  int64_t outer = 1, dim = 1, inner = 1, block = 1;
  int64_t outer_step = 0, axis_step = 0, inner_step = 0;
};

Result<QuantLayout> MakeQuantLayout(const Node& n, const Tensor& x, const Tensor& param, const char* what) {
  QuantLayout l;
  const int64_t rank = x.rank();
  const int64_t block = n.geti("block_size", 0);
  l.outer = 1;
  l.dim = 1;
  l.inner = x.numel();
  if (param.numel() == 1 && block <= 0) return l;  // per tensor
  auto axis = NormalizeAxis(n.geti("axis", 1), rank);
  if (!axis)
    return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for input of rank {}", n.Where(),
               n.geti("axis", 1), rank);
  l.dim = x.dim(*axis);
  l.outer = 1;
  for (int64_t d = 0; d < *axis; ++d) l.outer *= x.dim(d);
  l.inner = 1;
  for (int64_t d = *axis + 1; d < rank; ++d) l.inner *= x.dim(d);
  if (block <= 0) {
    if (param.rank() != 1 || param.dim(0) != l.dim)
      return Err(StatusCode::kInvalidArgument, "{}: {} of shape {} does not match axis {} of input {}", n.Where(),
                 what, ShapeToString(param.shape()), *axis, x.Describe());
    l.axis_step = 1;
    return l;
  }
  // Blocked: param has x's shape except ceil(D / block) along the axis.
  bool ok = param.rank() == rank;
  for (int64_t d = 0; ok && d < rank; ++d)
    ok = d == *axis ? param.dim(d) == (l.dim + block - 1) / block : param.dim(d) == x.dim(d);
  if (!ok)
    return Err(StatusCode::kInvalidArgument, "{}: {} of shape {} does not fit blocked quantization of {} with "
               "block_size {} on axis {}", n.Where(), what, ShapeToString(param.shape()), x.Describe(), block,
               *axis);
  l.block = block;
  l.inner_step = 1;
  l.axis_step = l.inner;
  l.outer_step = param.dim(*axis) * l.inner;
  return l;
}

// Calls fn(i, param_index) for every element of x.
template <typename Fn>
void ForQuant(const QuantLayout& l, Fn&& fn) {
  ParallelFor(
      l.outer * l.dim,
      [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const int64_t o = r / l.dim, a = r % l.dim;
          const int64_t pbase = o * l.outer_step + (a / l.block) * l.axis_step;
          const int64_t xbase = r * l.inner;
          for (int64_t j = 0; j < l.inner; ++j) fn(xbase + j, pbase + j * l.inner_step);
        }
      },
      std::max<int64_t>(1, kElemGrain / std::max<int64_t>(1, l.inner)));
}

Status Quantize(KernelContext& ctx, const Tensor& x, const Tensor& scale, const Tensor* zp, const QuantLayout& ls,
                const QuantLayout& lz) {
  DataType out = zp ? zp->dtype() : static_cast<DataType>(ctx.node.geti("output_dtype", 0));
  if (out == DataType::kUndefined) out = DataType::kUInt8;
  EnsureOutput(ctx, 0, out, x.shape());
  Tensor& y = ctx.out(0);
  const bool saturate = ctx.node.geti("saturate", 1) != 0;
  // x / scale, rounded to the division's type (ops/quantize_linear.h)
  const DataType div = quant_attrs::QuantizeDivisionType(ctx.node, x.dtype(), scale.dtype());
  std::vector<float> q(static_cast<size_t>(x.numel()));
  auto in_div = [div](float v) { return RoundTo(div, v); };  // v rounded to the division's type
  KILN_RETURN_IF_ERROR(DispatchAll(x.dtype(), ctx.node, [&]<typename T>() {
    const T* px = x.data<T>();
    ForQuant(ls, [&](int64_t i, int64_t s) {
      q[i] = in_div(in_div(static_cast<float>(Load(px, i))) / in_div(static_cast<float>(ElementAsDouble(scale, s))));
    });
  }));
  if (IsFloat8Type(out)) {
    uint8_t* py = y.data<uint8_t>();
    ForQuant(lz, [&](int64_t i, int64_t z) {
      const float zv = zp ? static_cast<float>(ElementAsDouble(*zp, z)) : 0.0f;
      py[i] = FloatToFloat8(out, q[i] + zv, saturate);
    });
    return Status::Ok();
  }
  if (out == DataType::kFloat4E2M1) {  // rounded half to even and saturated to +-6 (saturate has no say)
    uint8_t* py = y.data<uint8_t>();
    ForQuant(lz, [&](int64_t i, int64_t z) {
      // The zero point (a float4 value) is added only when given, as ONNX's reference does: -0 / s stays -0 without.
      py[i] = FloatToFloat4E2M1(zp ? q[i] + static_cast<float>(ElementAsDouble(*zp, z)) : q[i]);
    });
    return Status::Ok();
  }
  auto body = [&]<typename U>() {
    U* py = y.data<U>();
    const auto [ilo, ihi] = IntegerRange(out);  // int4/uint4 (int2/uint2) saturate to [-8, 7] / [0, 15] ([-2, 1] /
                                                // [0, 3]) in int8/uint8 storage
    const double lo = static_cast<double>(ilo), hi = static_cast<double>(ihi);
    ForQuant(lz, [&](int64_t i, int64_t z) {
      const double zv = zp ? static_cast<double>(zp->GetAsInt(z)) : 0.0;
      py[i] = static_cast<U>(QuantizeRounded(static_cast<double>(q[i]), zv, lo, hi));
    });
  };
  switch (out) {
    case DataType::kUInt8: case DataType::kUInt4: case DataType::kUInt2: body.template operator()<uint8_t>(); break;
    case DataType::kInt8: case DataType::kInt4: case DataType::kInt2: body.template operator()<int8_t>(); break;
    case DataType::kUInt16: body.template operator()<uint16_t>(); break;
    case DataType::kInt16: body.template operator()<int16_t>(); break;
    case DataType::kInt32: body.template operator()<int32_t>(); break;
    default:
      return Err(StatusCode::kUnsupported, "{}: quantizing to {} is not supported", ctx.node.Where(),
                 DataTypeName(out));
  }
  return Status::Ok();
}

Status Dequantize(KernelContext& ctx, const Tensor& x, const Tensor& scale, const Tensor* zp, const QuantLayout& ls,
                  const QuantLayout& lz) {
  if (!IsFloatType(scale.dtype()) || IsFloat8Type(scale.dtype()) || scale.dtype() == DataType::kFloat4E2M1)
    return Err(StatusCode::kInvalidArgument, "{}: scale must be float, float16, bfloat16 or float8e8m0, got {}",
               ctx.node.Where(), DataTypeName(scale.dtype()));
  const DataType out = quant_attrs::DequantizeOutputType(ctx.node, scale.dtype());
  EnsureOutput(ctx, 0, out, x.shape());
  Tensor& y = ctx.out(0);
  std::vector<float> d(static_cast<size_t>(x.numel()));  // x - zero point
  const bool f8 = IsFloat8Type(x.dtype()), f4 = x.dtype() == DataType::kFloat4E2M1;
  if (!f8 && !f4 && !IsIntegerType(x.dtype()))
    return Err(StatusCode::kUnsupported, "{}: dequantizing {} is not supported", ctx.node.Where(),
               DataTypeName(x.dtype()));
  ForQuant(lz, [&](int64_t i, int64_t z) {
    // float8: no zero point (ONNX's reference requires it to be 0); float4e2m1: its value, subtracted as the formula
    // says (ONNX's reference ignores it; the two agree on the zero points ONNX's tests use, 0).
    const double zv = !zp || f8 ? 0.0 : f4 ? ElementAsDouble(*zp, z) : static_cast<double>(zp->GetAsInt(z));
    d[i] = static_cast<float>(ElementAsDouble(x, i) - zv);
  });
  // The product in float32, rounded to the output type.
  return DispatchFloat(out, ctx.node, [&]<typename T>() {
    T* py = y.data<T>();
    ForQuant(ls, [&](int64_t i, int64_t s) { Store(py, i, d[i] * static_cast<float>(ElementAsDouble(scale, s))); });
  });
}

using QuantBody = Status (*)(KernelContext& ctx, const Tensor& x, const Tensor& scale, const Tensor* zp,
                             const QuantLayout& ls, const QuantLayout& lz);

// Reads QuantizeLinear/DequantizeLinear's x, scale and zero point (nullptr when omitted), lays scale (ls) and
// zero point (lz) out over x, and runs `body` on them.
template <QuantBody body>
Status QuantKernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(NeedInput(ctx, 0));
  KILN_RETURN_IF_ERROR(NeedInput(ctx, 1));
  const Tensor& x = ctx.in(0);
  const Tensor& scale = ctx.in(1);
  const Tensor* zp = ctx.input(2);
  if (zp && !zp->defined()) zp = nullptr;
  KILN_ASSIGN_OR_RETURN(QuantLayout ls, MakeQuantLayout(ctx.node, x, scale, "scale"));
  QuantLayout lz = ls;
  if (zp) {
    KILN_ASSIGN_OR_RETURN(lz, MakeQuantLayout(ctx.node, x, *zp, "zero point"));
  }
  return body(ctx, x, scale, zp, ls, lz);
}

}  // namespace

void RegisterCastQuantKernels(KernelRegistry& r) {
  r.Add("Cast", CastKernel);
  r.Add("CastLike", CastLikeKernel);
  r.Add("QuantizeLinear", QuantKernel<Quantize>);
  r.Add("DequantizeLinear", QuantKernel<Dequantize>);
  r.Add("kiln.Reformat", ReformatKernel);
}

}  // namespace kiln::cpu::elem
