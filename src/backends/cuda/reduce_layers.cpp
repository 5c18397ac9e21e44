// CUDA layers of the reduce family: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp, ArgMax/ArgMin,
// Softmax/LogSoftmax/Hardmax, TopK and CumSum, in their canonical forms (axes / K / axis as input 1; Softmax with an
// explicit axis and kiln_flatten_2d for the opset < 13 semantics). Kernels are in reduce.cu, softmax.cu, topk.cu
// and cumsum.cu (reduce_kernels.h). Values carried by inputs (axes, K, axis) come from the node's constants, or
// at run time from the host copy the runtime keeps of small integer tensors.
#include <cstring>
#include <optional>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/families.h"
#include "backends/cuda/reduce_kernels.h"
#include "core/error.h"

namespace kiln::cuda {

namespace {

int Code(DataType t) { return static_cast<int>(t); }

DataType InputType(const Node& n, size_t i) {
  const Value* v = n.input(i);
  return v ? v->dtype : DataType::kUndefined;
}

// What storage types a layer accepts.
enum class Accepts { kFloat, kFloatOr64, kNumeric, kNumericAndBool };

Status CheckInput(const Node& n, Accepts accepts) {
  const DataType t = InputType(n, 0);
  const bool is_float = t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
  bool ok = false;
  const char* list = "";
  switch (accepts) {
    case Accepts::kFloat:
      ok = is_float;
      list = "float32, float16, bfloat16";
      break;
    case Accepts::kFloatOr64:
      ok = is_float || t == DataType::kFloat64;
      list = "float32, float16, bfloat16, float64";
      break;
    case Accepts::kNumeric:
      ok = ReduceDTypeSupported(Code(t)) && t != DataType::kBool;
      list = "float32, float16, bfloat16, float64, int32, int64, int8, uint8";
      break;
    case Accepts::kNumericAndBool:
      ok = ReduceDTypeSupported(Code(t));
      list = "float32, float16, bfloat16, float64, int32, int64, int8, uint8, bool";
      break;
  }
  if (!ok)
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA {} layer does not support {} input (it supports {}); cast the input to a supported type "
               "or run this node on the CPU",
               n.Where(), n.op_type, DataTypeName(t), list);
  const Value* x = n.input(0);
  if (x && x->has_shape && x->shape.size() > 8 && n.op_type.rfind("Reduce", 0) == 0)
    return Err(StatusCode::kUnsupported, "{}: the CUDA {} layer supports inputs of rank <= 8, this one has rank {}",
               n.Where(), n.op_type, x->shape.size());
  return Status::Ok();
}

// The values of input i when it is a constant of the node.
std::optional<std::vector<int64_t>> ConstInts(const Node& n, size_t i) {
  const Value* v = n.input(i);
  if (v && v->is_const()) return v->const_value->ToInt64Vector();
  return std::nullopt;
}

// The values of input i: the constant captured at creation, else the runtime's host copy.
Result<std::vector<int64_t>> HostInts(const std::string& where, const char* what,
                                      const std::optional<std::vector<int64_t>>& constant,
                                      const std::vector<DeviceTensor>& inputs, size_t i) {
  if (constant) return *constant;
  if (i >= inputs.size() || !inputs[i].present()) return std::vector<int64_t>{};
  if (!inputs[i].host)
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA layer needs {} (input {}) on the host, but it is computed on the device; make it a "
               "constant (fold the subgraph that computes it)",
               where, what, i);
  return inputs[i].host->ToInt64Vector();
}

// [outer, n, inner] around `axis` (already normalized).
struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};
Split SplitAt(const std::vector<int64_t>& shape, int64_t axis) {
  Split s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) s.outer *= shape[d];
    else if (d == axis) s.n = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

// A factory whose tactics() validates the node (so an unsupported node is reported before timing) and whose
// create() validates again and builds the layer.
LayerFactory MakeFactory(std::function<Status(const Node&)> validate,
                         std::function<std::unique_ptr<Layer>(const Node&, const std::string&)> make,
                         std::vector<std::string> tactics = {"default"}) {
  LayerFactory f;
  f.tactics = [validate, tactics](const LayerSpec& spec) -> Result<std::vector<std::string>> {
    KILN_RETURN_IF_ERROR(validate(spec.node));
    return tactics;
  };
  f.create = [validate, make, tactics](const LayerSpec& spec,
                                       const std::string& tactic) -> Result<std::unique_ptr<Layer>> {
    KILN_RETURN_IF_ERROR(validate(spec.node));
    bool known = false;
    for (const auto& t : tactics) known = known || t == tactic;
    if (!known)
      return Err(StatusCode::kInvalidArgument, "{}: unknown CUDA tactic '{}' for {}", spec.node.Where(), tactic,
                 spec.node.op_type);
    return make(spec.node, tactic);
  };
  return f;
}

// ---------------- Reduce* ----------------
void AddReduce(LayerRegistry& r, const char* op_type, ReduceOpCode op) {
  const bool bool_ok = op == ReduceOpCode::kMax || op == ReduceOpCode::kMin;
  auto validate = [bool_ok](const Node& n) {
    return CheckInput(n, bool_ok ? Accepts::kNumericAndBool : Accepts::kNumeric);
  };
  auto make = [op](const Node& n, const std::string&) -> std::unique_ptr<Layer> {
    const std::string where = n.Where();
    const bool noop_empty = n.geti("noop_with_empty_axes", 0) != 0;
    const std::optional<std::vector<int64_t>> axes_const = ConstInts(n, 1);
    return std::make_unique<FnLayer>([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                                         std::vector<DeviceTensor>& out) -> Status {
      const DeviceTensor& x = in[0];
      DeviceTensor& y = out[0];
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, HostInts(where, "axes", axes_const, in, 1));
      const int64_t rank = static_cast<int64_t>(x.shape.size());
      if (axes.empty() && noop_empty) {
        if (x.nbytes() == 0) return Status::Ok();
        return KILN_CUDA_STATUS(cudaMemcpyAsync(y.data, x.data, x.nbytes(), cudaMemcpyDeviceToDevice, ctx.stream));
      }
      if (rank > 8)
        return Err(StatusCode::kUnsupported, "{}: the CUDA reduce layer supports inputs of rank <= 8, not {}", where,
                   rank);
      uint32_t mask = axes.empty() ? (1u << rank) - 1u : 0u;
      for (int64_t a : axes) {
        const std::optional<int64_t> na = NormalizeAxis(a, rank);
        if (!na) return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", where, a, rank);
        mask |= 1u << *na;
      }
      int64_t out_count = 1;
      for (int64_t d = 0; d < rank; ++d)
        if (!((mask >> d) & 1u)) out_count *= x.shape[d];
      if (out_count != y.numel())
        return Err(StatusCode::kInternal, "{}: output has {} elements, the reduction gives {}", where, y.numel(),
                   out_count);
      return KILN_CUDA_STATUS(LaunchReduce(op, Code(x.dtype), x.data, y.data, x.shape.data(), static_cast<int>(rank),
                                           mask, false, ctx.stream));
    });
  };
  r.Add(op_type, MakeFactory(validate, make));
}

// ---------------- ArgMax / ArgMin ----------------
void AddArg(LayerRegistry& r, const char* op_type, ReduceOpCode op) {
  auto validate = [](const Node& n) { return CheckInput(n, Accepts::kNumericAndBool); };
  auto make = [op](const Node& n, const std::string&) -> std::unique_ptr<Layer> {
    const std::string where = n.Where();
    const int64_t axis = n.geti("axis", 0);
    const bool last = n.geti("select_last_index", 0) != 0;
    return std::make_unique<FnLayer>([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                                         std::vector<DeviceTensor>& out) -> Status {
      const DeviceTensor& x = in[0];
      const int64_t rank = static_cast<int64_t>(x.shape.size());
      const std::optional<int64_t> na = NormalizeAxis(axis, rank);
      if (!na) return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", where, axis, rank);
      const Split s = SplitAt(x.shape, *na);
      if (s.n == 0 && s.outer * s.inner > 0)
        return Err(StatusCode::kInvalidArgument, "{}: cannot take the arg{} of an empty axis", where,
                   op == ReduceOpCode::kArgMax ? "max" : "min");
      const int64_t shape3[3] = {s.outer, s.n, s.inner};
      return KILN_CUDA_STATUS(
          LaunchReduce(op, Code(x.dtype), x.data, out[0].data, shape3, 3, 0b010u, last, ctx.stream));
    });
  };
  r.Add(op_type, MakeFactory(validate, make));
}

// ---------------- Softmax / LogSoftmax / Hardmax ----------------
enum class RowOp { kSoftmax, kLogSoftmax, kHardmax };

void AddSoftmax(LayerRegistry& r, const char* op_type, RowOp op) {
  // Softmax/LogSoftmax run float64 too (in double); Hardmax's kernel is float32/float16/bfloat16.
  auto validate = [op](const Node& n) {
    return CheckInput(n, op == RowOp::kHardmax ? Accepts::kFloat : Accepts::kFloatOr64);
  };
  auto make = [op](const Node& n, const std::string& tactic) -> std::unique_ptr<Layer> {
    const std::string where = n.Where();
    const int64_t axis = n.geti("axis", -1);
    const bool flatten = n.geti("kiln_flatten_2d", 0) != 0;
    const bool block_rows = tactic == "block_rows";
    return std::make_unique<FnLayer>([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                                         std::vector<DeviceTensor>& out) -> Status {
      const DeviceTensor& x = in[0];
      const int64_t rank = static_cast<int64_t>(x.shape.size());
      Split s;
      if (flatten) {  // opset < 13: the input flattened to 2-D at the axis
        if (axis < -rank || axis > rank)
          return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", where, axis, rank);
        const int64_t a = axis < 0 ? axis + rank : axis;
        for (int64_t d = 0; d < rank; ++d) (d < a ? s.outer : s.n) *= x.shape[d];
      } else if (rank > 0) {
        const std::optional<int64_t> na = NormalizeAxis(axis, rank);
        if (!na) return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", where, axis, rank);
        s = SplitAt(x.shape, *na);
      }
      if (op == RowOp::kHardmax)
        return KILN_CUDA_STATUS(LaunchHardmax(Code(x.dtype), x.data, out[0].data, s.outer, s.n, s.inner, ctx.stream));
      return KILN_CUDA_STATUS(LaunchSoftmax(Code(x.dtype), op == RowOp::kLogSoftmax, x.data, out[0].data, s.outer,
                                            s.n, s.inner, block_rows, ctx.stream));
    });
  };
  if (op == RowOp::kHardmax) r.Add(op_type, MakeFactory(validate, make));
  else r.Add(op_type, MakeFactory(validate, make, {"default", "block_rows"}));
}

// ---------------- TopK ----------------
class TopKLayer : public Layer {
 public:
  TopKLayer(std::string where, int64_t axis, bool largest) : where_(std::move(where)), axis_(axis), largest_(largest) {}

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>& out) const override {
    auto s = SplitOf(in[0]);
    return s.ok() ? TopKWorkspaceBytes(s->outer, s->n, s->inner) : 0;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    const DeviceTensor& x = in[0];
    KILN_ASSIGN_OR_RETURN(Split s, SplitOf(x));
    const int64_t axis = *NormalizeAxis(axis_, static_cast<int64_t>(x.shape.size()));
    // K is the size of the outputs' axis (shape inference read it from input 1).
    const DeviceTensor* shaped = nullptr;
    for (const DeviceTensor& o : out)
      if (o.present() && o.shape.size() == x.shape.size()) shaped = &o;
    if (!shaped) return Err(StatusCode::kInternal, "{}: TopK has no output with the input's rank", where_);
    const int64_t k = shaped->shape[axis];
    if (k < 0 || k > s.n)
      return Err(StatusCode::kInvalidArgument, "{}: K = {} must lie in [0, {}] (the size of axis {})", where_, k, s.n,
                 axis_);
    if (s.n > (int64_t{1} << 30))
      return Err(StatusCode::kUnsupported, "{}: the CUDA TopK layer supports axes of at most 2^30 elements, not {}",
                 where_, s.n);
    void* values = out.size() > 0 && out[0].present() ? out[0].data : nullptr;
    int64_t* indices = out.size() > 1 && out[1].present() ? static_cast<int64_t*>(out[1].data) : nullptr;
    const size_t need = TopKWorkspaceBytes(s.outer, s.n, s.inner);
    if (need > ctx.workspace_bytes)
      return Err(StatusCode::kInternal, "{}: TopK needs {} bytes of workspace, {} were given", where_, need,
                 ctx.workspace_bytes);
    return KILN_CUDA_STATUS(LaunchTopK(Code(x.dtype), x.data, values, indices, s.outer, s.n, s.inner, k, largest_,
                                       ctx.workspace, ctx.workspace_bytes, ctx.stream));
  }

 private:
  Result<Split> SplitOf(const DeviceTensor& x) const {
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    const std::optional<int64_t> na = NormalizeAxis(axis_, rank);
    if (!na) return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", where_, axis_, rank);
    return SplitAt(x.shape, *na);
  }

  std::string where_;
  int64_t axis_;
  bool largest_;
};

void AddTopK(LayerRegistry& r) {
  auto validate = [](const Node& n) -> Status {
    const DataType t = InputType(n, 0);
    if (TopKDTypeSupported(Code(t))) return Status::Ok();
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA TopK layer does not support {} input (it supports float32, float16, bfloat16, float64 "
               "and the 8- to 64-bit integers); cast the input or run this node on the CPU",
               n.Where(), DataTypeName(t));
  };
  auto make = [](const Node& n, const std::string&) -> std::unique_ptr<Layer> {
    return std::make_unique<TopKLayer>(n.Where(), n.geti("axis", -1), n.geti("largest", 1) != 0);
  };
  r.Add("TopK", MakeFactory(validate, make));
}

// ---------------- CumSum ----------------
void AddCumSum(LayerRegistry& r) {
  auto validate = [](const Node& n) { return CheckInput(n, Accepts::kNumeric); };
  auto make = [](const Node& n, const std::string&) -> std::unique_ptr<Layer> {
    const std::string where = n.Where();
    const bool exclusive = n.geti("exclusive", 0) != 0, reverse = n.geti("reverse", 0) != 0;
    const std::optional<std::vector<int64_t>> axis_const = ConstInts(n, 1);
    return std::make_unique<FnLayer>([=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                                         std::vector<DeviceTensor>& out) -> Status {
      const DeviceTensor& x = in[0];
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axis, HostInts(where, "axis", axis_const, in, 1));
      if (axis.size() != 1)
        return Err(StatusCode::kInvalidArgument, "{}: axis (input 1) must hold exactly one value", where);
      const int64_t rank = static_cast<int64_t>(x.shape.size());
      const std::optional<int64_t> na = NormalizeAxis(axis[0], rank);
      if (!na)
        return Err(StatusCode::kInvalidArgument, "{}: axis {} is out of range for rank {}", where, axis[0], rank);
      const Split s = SplitAt(x.shape, *na);
      return KILN_CUDA_STATUS(
          LaunchCumSum(Code(x.dtype), x.data, out[0].data, s.outer, s.n, s.inner, exclusive, reverse, ctx.stream));
    });
  };
  r.Add("CumSum", MakeFactory(validate, make));
}

}  // namespace

void RegisterReduceLayers(LayerRegistry& r) {
  AddReduce(r, "ReduceSum", ReduceOpCode::kSum);
  AddReduce(r, "ReduceMean", ReduceOpCode::kMean);
  AddReduce(r, "ReduceMax", ReduceOpCode::kMax);
  AddReduce(r, "ReduceMin", ReduceOpCode::kMin);
  AddReduce(r, "ReduceProd", ReduceOpCode::kProd);
  AddReduce(r, "ReduceL1", ReduceOpCode::kL1);
  AddReduce(r, "ReduceL2", ReduceOpCode::kL2);
  AddReduce(r, "ReduceSumSquare", ReduceOpCode::kSumSquare);
  AddReduce(r, "ReduceLogSum", ReduceOpCode::kLogSum);
  AddReduce(r, "ReduceLogSumExp", ReduceOpCode::kLogSumExp);
  AddArg(r, "ArgMax", ReduceOpCode::kArgMax);
  AddArg(r, "ArgMin", ReduceOpCode::kArgMin);
  AddSoftmax(r, "Softmax", RowOp::kSoftmax);
  AddSoftmax(r, "LogSoftmax", RowOp::kLogSoftmax);
  AddSoftmax(r, "Hardmax", RowOp::kHardmax);
  AddTopK(r);
  AddCumSum(r);
}

}  // namespace kiln::cuda
