// CUDA layers of the pointwise family, part 1: the unary formulas (ops/pointwise_formulas.h) and Gelu, Clip,
// IsNaN/IsInf/Not/BitwiseNot, broadcasting binary arithmetic, comparisons and logic, Mod, BitwiseAnd/Or/Xor,
// BitShift, Pow, Where, variadic Sum/Mean/Max/Min, and the family's registration.
// Casts, Q/DQ and kiln.FusedPointwise are in pointwise_cast_layers.cpp; kernels in pointwise_*.cu.
// Semantics follow the CPU reference (src/backends/cpu/elementwise*.cpp). One tactic each ("default").
#include <algorithm>
#include <memory>

#include "backends/cuda/families.h"
#include "backends/cuda/pointwise_layers_util.h"

namespace kiln::cuda {
namespace pwl {

Result<PwBroadcast> MakePwBroadcast(const std::string& where, const std::vector<int64_t>& out,
                                    const std::vector<std::vector<int64_t>>& inputs) {
  PwBroadcast b;
  const size_t k = inputs.size();
  if (k < 1 || k > static_cast<size_t>(kPwMaxOperands))
    return Err(StatusCode::kUnsupported, "{}: the CUDA pointwise kernels take 1 to {} operands per launch, not {}",
               where, kPwMaxOperands, k);
  b.num_operands = static_cast<int>(k);
  const size_t rank = out.size();
  b.numel = 1;
  for (int64_t d : out) b.numel *= d;
  // Per operand strides over the output dims (0 where broadcast).
  std::vector<std::vector<int64_t>> full(k, std::vector<int64_t>(rank, 0));
  for (size_t j = 0; j < k; ++j) {
    const auto& s = inputs[j];
    bool ok = s.size() <= rank;
    for (size_t d = 0; ok && d < s.size(); ++d) ok = s[d] == 1 || s[d] == out[rank - s.size() + d];
    if (!ok)
      return Err(StatusCode::kInvalidArgument, "{}: input {} of shape {} does not broadcast to the output shape {}",
                 where, j, ShapeToString(s), ShapeToString(out));
    int64_t stride = 1;
    for (size_t d = s.size(); d-- > 0;) {
      full[j][rank - s.size() + d] = s[d] == 1 ? 0 : stride;
      stride *= s[d];
    }
  }
  if (b.numel == 0) return b;
  // Drop output dims of extent 1; merge a dim into the inner group where every operand continues contiguously
  // (or stays broadcast) across it. cd/cs are innermost-first.
  std::vector<int64_t> cd;
  std::vector<std::vector<int64_t>> cs(k);
  for (size_t d = rank; d-- > 0;) {
    if (out[d] == 1) continue;
    bool merge = !cd.empty();
    for (size_t j = 0; j < k && merge; ++j) merge = full[j][d] == cs[j].back() * cd.back();
    if (merge) {
      cd.back() *= out[d];
    } else {
      cd.push_back(out[d]);
      for (size_t j = 0; j < k; ++j) cs[j].push_back(full[j][d]);
    }
  }
  if (cd.size() > static_cast<size_t>(kPwMaxRank))
    return Err(StatusCode::kUnsupported, "{}: the broadcast needs {} dims after merging, above the CUDA kernels' {}",
               where, cd.size(), kPwMaxRank);
  b.rank = static_cast<int>(cd.size());
  for (int r = 0; r < b.rank; ++r) {
    b.dims[r] = cd[cd.size() - 1 - r];
    for (size_t j = 0; j < k; ++j) b.strides[j][r] = cs[j][cd.size() - 1 - r];
  }
  // Fast path: every operand is one element or has the output's element count (then, broadcastable, its shape).
  for (size_t j = 0; j < k; ++j) {
    int64_t n = 1;
    for (int64_t d : inputs[j]) n *= d;
    if (n == 1) b.step[j] = 0;
    else if (n == b.numel) b.step[j] = 1;
    else b.general = true;
  }
  return b;
}

Status NotSupported(const Node& n, const std::string& what, const std::string& hint) {
  return Err(StatusCode::kUnsupported, "{}: the CUDA layer does not support {}; {}", n.Where(), what, hint);
}

}  // namespace pwl

namespace {

using pwl::Code;
using pwl::Factory;
using pwl::InNode;
using pwl::InputType;
using pwl::MakeLayer;
using pwl::NotSupported;

bool IsLowFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}
bool IsNumeric(DataType t) { return IsIntegerType(t) || IsLowFloat(t) || t == DataType::kFloat64; }

std::string TypeName(DataType t) { return DataTypeName(t); }

// ---- unary formulas ----
// The layer of a unary formula (ops/pointwise_formulas.h): float32/float16/bfloat16 inputs run the formula's
// kernel (in float32; float64 inputs in double) with the attributes its row names; integer inputs run `int_op`
// (a PwIntUnaryOp, -1: none).
struct UnaryOp {
  PwOp op;
  int int_op = -1;
  bool unsigned_ok = true;  // with int_op: unsigned integers too
};

LayerFactory UnaryFactory(UnaryOp u) {
  return Factory([u](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    const DataType t = InputType(n, 0);
    PwOp op = u.op;
    if (n.op_type == "Gelu") {
      const std::string ap = n.gets("approximate", "none");
      if (ap == "tanh") op = PwOp::kGeluTanh;
      else if (ap != "none")
        return NotSupported(n, "approximate='" + ap + "'", "use 'none' or 'tanh'");
    }
    const PwOpInfo& info = PwInfo(op);
    const float alpha = *info.attr_a ? n.getf(info.attr_a, info.default_a) : 0.f;
    const float beta = *info.attr_b ? n.getf(info.attr_b, info.default_b) : 0.f;
    const std::string where = n.Where();
    if (IsLowFloat(t) || t == DataType::kFloat64) {
      return MakeLayer([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                           std::vector<DeviceTensor>& out) -> Status {
        return InNode(where, KILN_CUDA_STATUS(LaunchPwUnary(op, alpha, beta, Code(in[0].dtype), in[0].data,
                                                            out[0].data, out[0].numel(), ctx.stream)));
      });
    }
    if (u.int_op >= 0 && IsIntegerType(t) && (u.unsigned_ok || IsSignedType(t))) {
      const int iop = u.int_op;
      return MakeLayer([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                           std::vector<DeviceTensor>& out) -> Status {
        return InNode(where, KILN_CUDA_STATUS(LaunchIntUnary(iop, Code(in[0].dtype), in[0].data, out[0].data,
                                                             out[0].numel(), ctx.stream, alpha, beta)));
      });
    }
    return NotSupported(n, "input dtype " + TypeName(t),
                        u.int_op >= 0
                            ? "it runs float32/float16/bfloat16/float64 and integer inputs; cast the input first"
                            : "it runs float32/float16/bfloat16/float64; cast the input first");
  });
}

// The integer path of a formula op whose types include integers (typed code in pointwise_unary.cu).
UnaryOp WithIntegerPath(PwOp op) {
  switch (op) {
    case PwOp::kAbs: return {op, kPwIntAbs, true};
    case PwOp::kNeg: return {op, kPwIntNeg, false};
    case PwOp::kSign: return {op, kPwIntSign, true};
    case PwOp::kRelu: return {op, kPwIntRelu, false};
    case PwOp::kErf: return {op, kPwIntErf, true};
    case PwOp::kShrink: return {op, kPwIntShrink, true};
    default: return {op};
  }
}

LayerFactory ClipFactory() {
  return Factory([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    const DataType t = InputType(n, 0);
    if (!IsNumeric(t)) return NotSupported(n, "input dtype " + TypeName(t), "use a numeric type");
    for (size_t i = 1; i < 3; ++i) {
      const DataType b = InputType(n, i);
      if (b != DataType::kUndefined && b != t)
        return NotSupported(n, fmt::format("a {} bound with a {} input", TypeName(b), TypeName(t)),
                            "give min/max the input's dtype");
    }
    const std::string where = n.Where();
    return MakeLayer([where](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                             std::vector<DeviceTensor>& out) -> Status {
      const void* bound[2] = {nullptr, nullptr};
      for (size_t i = 1; i < 3 && i < in.size(); ++i) {
        if (!in[i].present()) continue;
        if (in[i].numel() != 1 || in[i].dtype != in[0].dtype)
          return Err(StatusCode::kInvalidArgument, "{}: min and max must be scalars of the input's dtype, got {} {}",
                     where, DataTypeName(in[i].dtype), ShapeToString(in[i].shape));
        bound[i - 1] = in[i].data;
      }
      return InNode(where, KILN_CUDA_STATUS(LaunchClip(Code(in[0].dtype), in[0].data, bound[0], bound[1],
                                                       out[0].data, out[0].numel(), ctx.stream)));
    });
  });
}

LayerFactory PredicateFactory(bool is_inf) {
  return Factory([is_inf](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    const DataType t = InputType(n, 0);
    if (!IsLowFloat(t) && t != DataType::kFloat64)
      return NotSupported(n, "input dtype " + TypeName(t), "it runs float32/float16/bfloat16/float64");
    const bool neg = n.geti("detect_negative", 1) != 0, pos = n.geti("detect_positive", 1) != 0;
    const std::string where = n.Where();
    return MakeLayer([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                         std::vector<DeviceTensor>& out) -> Status {
      if (is_inf)
        return InNode(where, KILN_CUDA_STATUS(LaunchIsInf(Code(in[0].dtype), neg, pos, in[0].data, out[0].data,
                                                          out[0].numel(), ctx.stream)));
      return InNode(where, KILN_CUDA_STATUS(
                               LaunchIsNaN(Code(in[0].dtype), in[0].data, out[0].data, out[0].numel(), ctx.stream)));
    });
  });
}

LayerFactory NotFactory() {
  return Factory([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    if (InputType(n, 0) != DataType::kBool)
      return NotSupported(n, "input dtype " + TypeName(InputType(n, 0)), "Not takes bool");
    const std::string where = n.Where();
    return MakeLayer([where](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                             std::vector<DeviceTensor>& out) -> Status {
      return InNode(where, KILN_CUDA_STATUS(LaunchNot(in[0].data, out[0].data, out[0].numel(), ctx.stream)));
    });
  });
}

// ---- binary ----
enum class BinKind { kArith, kCompare };
enum class TypeSet { kNumeric, kAll, kBool };

bool InSet(TypeSet s, DataType t) {
  switch (s) {
    case TypeSet::kNumeric: return IsNumeric(t);
    case TypeSet::kAll: return IsNumeric(t) || t == DataType::kBool;
    default: return t == DataType::kBool;
  }
}
const char* SetName(TypeSet s) {
  switch (s) {
    case TypeSet::kNumeric: return "integer and float32/float16/bfloat16/float64 inputs";
    case TypeSet::kAll: return "integer, float and bool inputs";
    default: return "bool inputs";
  }
}

LayerFactory BinaryFactory(BinKind kind, int op, TypeSet set) {
  return Factory([=](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    const DataType a = InputType(n, 0), b = InputType(n, 1);
    if (a != b)
      return NotSupported(n, fmt::format("inputs of different dtypes ({} and {})", TypeName(a), TypeName(b)),
                          "cast them to one dtype");
    if (!InSet(set, a)) return NotSupported(n, "input dtype " + TypeName(a), std::string("it takes ") + SetName(set));
    const std::string where = n.Where();
    return MakeLayer([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                         std::vector<DeviceTensor>& out) -> Status {
      KILN_ASSIGN_OR_RETURN(PwBroadcast bc, pwl::MakePwBroadcast(where, out[0].shape, {in[0].shape, in[1].shape}));
      if (kind == BinKind::kArith)
        return InNode(where, KILN_CUDA_STATUS(LaunchArith(op, Code(in[0].dtype), in[0].data, in[1].data,
                                                          out[0].data, bc, ctx.stream)));
      return InNode(where, KILN_CUDA_STATUS(LaunchCompare(op, Code(in[0].dtype), in[0].data, in[1].data,
                                                          out[0].data, bc, ctx.stream)));
    });
  });
}

// Mod: same-dtype numeric inputs; integers with fmod 0 (floored) or 1 (truncated), floats with fmod=1 only.
LayerFactory ModFactory() {
  return Factory([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    const DataType a = InputType(n, 0), b = InputType(n, 1);
    if (a != b)
      return NotSupported(n, fmt::format("inputs of different dtypes ({} and {})", TypeName(a), TypeName(b)),
                          "cast them to one dtype");
    if (!IsNumeric(a))
      return NotSupported(n, "input dtype " + TypeName(a),
                          "Mod takes integer and float32/float16/bfloat16/float64 inputs");
    const int64_t fmod = n.geti("fmod", 0);
    if (fmod != 0 && fmod != 1) return NotSupported(n, fmt::format("fmod={}", fmod), "fmod must be 0 or 1");
    const bool truncated = fmod == 1;
    const std::string where = n.Where();
    return MakeLayer([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                         std::vector<DeviceTensor>& out) -> Status {
      KILN_ASSIGN_OR_RETURN(PwBroadcast bc, pwl::MakePwBroadcast(where, out[0].shape, {in[0].shape, in[1].shape}));
      return InNode(where, KILN_CUDA_STATUS(LaunchMod(Code(in[0].dtype), truncated, in[0].data, in[1].data,
                                                      out[0].data, bc, ctx.stream)));
    });
  });
}

// BitwiseAnd/Or/Xor (op >= 0) and BitShift (op < 0: the direction attribute picks the shift): same-dtype integers.
bool IsBitwiseInt(DataType t) { return IsIntegerType(t) && !IsSubByteIntegerType(t); }

LayerFactory BitwiseFactory(int op) {
  return Factory([op](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    const DataType a = InputType(n, 0), b = InputType(n, 1);
    if (a != b)
      return NotSupported(n, fmt::format("inputs of different dtypes ({} and {})", TypeName(a), TypeName(b)),
                          "cast them to one dtype");
    if (!IsBitwiseInt(a))
      return NotSupported(n, "input dtype " + TypeName(a), "it takes 8- to 64-bit integer inputs");
    int kind = op;
    if (op < 0) {
      const std::string dir = n.gets("direction", "");
      if (dir != "LEFT" && dir != "RIGHT")
        return Err(StatusCode::kInvalidModel, "{}: direction must be LEFT or RIGHT, not '{}'", n.Where(), dir);
      kind = dir == "LEFT" ? kPwShiftLeft : kPwShiftRight;
    }
    const std::string where = n.Where();
    return MakeLayer([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                         std::vector<DeviceTensor>& out) -> Status {
      KILN_ASSIGN_OR_RETURN(PwBroadcast bc, pwl::MakePwBroadcast(where, out[0].shape, {in[0].shape, in[1].shape}));
      return InNode(where, KILN_CUDA_STATUS(LaunchBitwise(kind, Code(in[0].dtype), in[0].data, in[1].data,
                                                          out[0].data, bc, ctx.stream)));
    });
  });
}

LayerFactory BitwiseNotFactory() {
  return Factory([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    if (!IsBitwiseInt(InputType(n, 0)))
      return NotSupported(n, "input dtype " + TypeName(InputType(n, 0)), "BitwiseNot takes 8- to 64-bit integers");
    const std::string where = n.Where();
    return MakeLayer([where](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                             std::vector<DeviceTensor>& out) -> Status {
      return InNode(where, KILN_CUDA_STATUS(LaunchIntUnary(kPwIntBitNot, Code(in[0].dtype), in[0].data, out[0].data,
                                                           out[0].numel(), ctx.stream)));
    });
  });
}

LayerFactory PowFactory() {
  return Factory([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    const DataType a = InputType(n, 0), b = InputType(n, 1);
    if (!(IsLowFloat(a) || a == DataType::kFloat64 || a == DataType::kInt32 || a == DataType::kInt64))
      return NotSupported(n, "base dtype " + TypeName(a), "Pow takes float32/float16/bfloat16/float64/int32/int64");
    if (!IsNumeric(b)) return NotSupported(n, "exponent dtype " + TypeName(b), "use an integer or float exponent");
    const std::string where = n.Where();
    return MakeLayer([where](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                             std::vector<DeviceTensor>& out) -> Status {
      KILN_ASSIGN_OR_RETURN(PwBroadcast bc, pwl::MakePwBroadcast(where, out[0].shape, {in[0].shape, in[1].shape}));
      const bool float_base = IsLowFloat(in[0].dtype) || in[0].dtype == DataType::kFloat64;
      const bool float_exp = IsLowFloat(in[1].dtype) || in[1].dtype == DataType::kFloat64;
      const bool simple = float_base && float_exp && in[1].numel() == 1 && out[0].shape == in[0].shape;
      return InNode(where, KILN_CUDA_STATUS(LaunchPow(Code(in[0].dtype), Code(in[1].dtype), simple, in[0].data,
                                                      in[1].data, out[0].data, bc, ctx.stream)));
    });
  });
}

LayerFactory WhereFactory() {
  return Factory([](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    const DataType c = InputType(n, 0), x = InputType(n, 1), y = InputType(n, 2);
    if (c != DataType::kBool) return NotSupported(n, "condition dtype " + TypeName(c), "the condition must be bool");
    if (x != y)
      return NotSupported(n, fmt::format("branches of different dtypes ({} and {})", TypeName(x), TypeName(y)),
                          "cast them to one dtype");
    const size_t bytes = DataTypeSize(x);
    if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8)
      return NotSupported(n, "dtype " + TypeName(x), "use a numeric or bool dtype");
    const std::string where = n.Where();
    return MakeLayer([where](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                             std::vector<DeviceTensor>& out) -> Status {
      KILN_ASSIGN_OR_RETURN(PwBroadcast bc, pwl::MakePwBroadcast(where, out[0].shape,
                                                                 {in[0].shape, in[1].shape, in[2].shape}));
      return InNode(where, KILN_CUDA_STATUS(LaunchWhere(static_cast<int>(DataTypeSize(in[1].dtype)), in[0].data,
                                                        in[1].data, in[2].data, out[0].data, bc, ctx.stream)));
    });
  });
}

// Sum / Mean / Max / Min over any number of inputs: up to 8 per launch; further launches fold 7 more inputs
// into the output (operand 0), the last one divides for Mean.
LayerFactory VariadicFactory(int op, bool mean, bool float_only) {
  return Factory([=](const LayerSpec& spec) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    if (n.inputs.empty()) return NotSupported(n, "zero inputs", "give at least one input");
    const DataType t = InputType(n, 0);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!n.inputs[i]) return NotSupported(n, fmt::format("an omitted input {}", i), "give every input");
      if (InputType(n, i) != t)
        return NotSupported(n, fmt::format("inputs of different dtypes ({} and {})", TypeName(t),
                                           TypeName(InputType(n, i))), "cast them to one dtype");
    }
    const bool ok = float_only ? IsLowFloat(t) || t == DataType::kFloat64 : IsNumeric(t);
    if (!ok)
      return NotSupported(n, "input dtype " + TypeName(t),
                          float_only ? "it takes float32/float16/bfloat16/float64" : "it takes numeric inputs");
    const std::string where = n.Where();
    return MakeLayer([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                         std::vector<DeviceTensor>& out) -> Status {
      const size_t total = in.size();
      size_t next = 0;
      while (next < total) {
        std::vector<std::vector<int64_t>> shapes;
        std::vector<const void*> ptrs;
        if (next > 0) {  // fold into the partial result
          shapes.push_back(out[0].shape);
          ptrs.push_back(out[0].data);
        }
        const size_t take = std::min(total - next, static_cast<size_t>(kPwMaxOperands) - ptrs.size());
        for (size_t i = next; i < next + take; ++i) {
          shapes.push_back(in[i].shape);
          ptrs.push_back(in[i].data);
        }
        next += take;
        const float divisor = mean && next == total ? static_cast<float>(total) : 1.f;
        KILN_ASSIGN_OR_RETURN(PwBroadcast bc, pwl::MakePwBroadcast(where, out[0].shape, shapes));
        KILN_RETURN_IF_ERROR(InNode(where, KILN_CUDA_STATUS(LaunchVariadic(op, Code(in[0].dtype), ptrs.data(),
                                                                           out[0].data, divisor, bc, ctx.stream))));
      }
      return Status::Ok();
    });
  });
}

}  // namespace

void RegisterPointwiseLayers(LayerRegistry& r) {
  // unary formulas: one layer per row of KILN_POINTWISE_UNARY_OPS (float32/float16/bfloat16/float64; the ops whose
  // types include integers also integers), and Gelu
  for (const PwOpInfo& p : kPwOps)
    if (p.onnx_unary) r.Add(p.name, UnaryFactory(WithIntegerPath(p.op)));
  r.Add("Gelu", UnaryFactory({PwOp::kGelu}));
  r.Add("Clip", ClipFactory());
  r.Add("Not", NotFactory());
  r.Add("IsNaN", PredicateFactory(false));
  r.Add("IsInf", PredicateFactory(true));

  // broadcasting binary ops
  r.Add("Add", BinaryFactory(BinKind::kArith, kPwArAdd, TypeSet::kNumeric));
  r.Add("Sub", BinaryFactory(BinKind::kArith, kPwArSub, TypeSet::kNumeric));
  r.Add("Mul", BinaryFactory(BinKind::kArith, kPwArMul, TypeSet::kNumeric));
  r.Add("Div", BinaryFactory(BinKind::kArith, kPwArDiv, TypeSet::kNumeric));
  r.Add("PRelu", BinaryFactory(BinKind::kArith, kPwArPRelu, TypeSet::kNumeric));
  r.Add("Equal", BinaryFactory(BinKind::kCompare, kPwEqual, TypeSet::kAll));
  r.Add("Less", BinaryFactory(BinKind::kCompare, kPwLess, TypeSet::kNumeric));
  r.Add("LessOrEqual", BinaryFactory(BinKind::kCompare, kPwLessOrEqual, TypeSet::kNumeric));
  r.Add("Greater", BinaryFactory(BinKind::kCompare, kPwGreater, TypeSet::kNumeric));
  r.Add("GreaterOrEqual", BinaryFactory(BinKind::kCompare, kPwGreaterOrEqual, TypeSet::kNumeric));
  r.Add("And", BinaryFactory(BinKind::kCompare, kPwAnd, TypeSet::kBool));
  r.Add("Or", BinaryFactory(BinKind::kCompare, kPwOr, TypeSet::kBool));
  r.Add("Xor", BinaryFactory(BinKind::kCompare, kPwXor, TypeSet::kBool));
  r.Add("Mod", ModFactory());
  r.Add("BitwiseAnd", BitwiseFactory(kPwBitAnd));
  r.Add("BitwiseOr", BitwiseFactory(kPwBitOr));
  r.Add("BitwiseXor", BitwiseFactory(kPwBitXor));
  r.Add("BitShift", BitwiseFactory(-1));
  r.Add("BitwiseNot", BitwiseNotFactory());
  r.Add("Pow", PowFactory());
  r.Add("Where", WhereFactory());
  r.Add("Sum", VariadicFactory(kPwVarSum, false, true));
  r.Add("Mean", VariadicFactory(kPwVarSum, true, true));
  r.Add("Max", VariadicFactory(kPwVarMax, false, false));
  r.Add("Min", VariadicFactory(kPwVarMin, false, false));

  pwl::RegisterCastQuantLayers(r);
  pwl::RegisterFusedPointwiseLayer(r);
}

}  // namespace kiln::cuda
