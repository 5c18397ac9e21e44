// CUDA layers of the recurrent ops RNN, GRU and LSTM (kernels in rnn.cu) with the CPU reference's semantics
// (backends/cpu/rnn.cpp; attributes read by ops/rnn.h): every direction (forward, reverse, bidirectional),
// sequence_lens (int32 or int64), initial states, LSTM's peepholes and input_forget, clip, GRU's
// linear_before_reset, layout 0 and 1, and every activation ops/rnn.h knows. X and the other float inputs share one
// type: float32, float16, bfloat16 (computed in float32) or float64 (in double).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/families.h"
#include "backends/cuda/rnn_kernels.h"
#include "core/error.h"
#include "ops/rnn.h"

namespace kiln::cuda {
namespace {

bool IsRnnData(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat64;
}

int ActCode(RnnActivationKind k) {
  switch (k) {
    case RnnActivationKind::kRelu: return kRnnActRelu;
    case RnnActivationKind::kTanh: return kRnnActTanh;
    case RnnActivationKind::kSigmoid: return kRnnActSigmoid;
    case RnnActivationKind::kAffine: return kRnnActAffine;
    case RnnActivationKind::kLeakyRelu: return kRnnActLeakyRelu;
    case RnnActivationKind::kThresholdedRelu: return kRnnActThresholdedRelu;
    case RnnActivationKind::kScaledTanh: return kRnnActScaledTanh;
    case RnnActivationKind::kHardSigmoid: return kRnnActHardSigmoid;
    case RnnActivationKind::kElu: return kRnnActElu;
    case RnnActivationKind::kSoftsign: return kRnnActSoftsign;
    case RnnActivationKind::kSoftplus: return kRnnActSoftplus;
  }
  return -1;
}

// The node's attributes as the kernels take them (everything but shapes and pointers); errors name the node.
Result<RnnArgs> BaseArgs(const Node& n, const RnnAttrs& a) {
  RnnArgs r;
  r.cell = a.op == RnnOp::kLstm ? kRnnCellLstm : a.op == RnnOp::kGru ? kRnnCellGru : kRnnCellRnn;
  r.dirs = a.num_directions;
  r.reverse = a.reverse;
  r.batch_first = a.layout == 1;
  r.linear_before_reset = a.linear_before_reset;
  r.input_forget = a.input_forget;
  r.clip = a.clip;
  for (int64_t d = 0; d < a.num_directions; ++d)
    for (int64_t k = 0; k < a.activations_per_direction; ++k) {
      const RnnActivation& f = a.activation(d, k);
      const int code = ActCode(f.kind);
      if (code < 0)
        return Err(StatusCode::kUnsupported, "{}: activation {} of direction {} has no CUDA kernel; run the node on "
                   "the CPU", n.Where(), k, d);
      r.acts[d][k] = RnnAct{code, f.alpha, f.beta};
    }
  return r;
}

Status CheckNode(const Node& n) {
  const Value* x = n.input(0);
  if (!x || !n.input(1) || !n.input(2))
    return Err(StatusCode::kInvalidModel, "{}: X, W and R (inputs 0 to 2) are required", n.Where());
  if (!IsRnnData(x->dtype))
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA {} takes float32, float16, bfloat16 or float64 data, not {}; cast it or run the node on "
               "the CPU",
               n.Where(), n.op_type, DataTypeName(x->dtype));
  return Status::Ok();
}

class RnnLayer : public Layer {
 public:
  RnnLayer(std::string where, RnnAttrs attrs, RnnArgs base)
      : where_(std::move(where)), attrs_(std::move(attrs)), base_(base) {}

  size_t WorkspaceBytes(const std::vector<DeviceTensor>& in, const std::vector<DeviceTensor>&) const override {
    auto a = Args(in);
    return a.ok() ? RnnWorkspaceBytes(*a) : 0;
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    KILN_ASSIGN_OR_RETURN(RnnArgs a, Args(in));
    auto output = [&out](size_t i) -> void* { return i < out.size() && out[i].present() ? out[i].data : nullptr; };
    a.y = output(0);
    a.yh = output(1);
    a.yc = attrs_.op == RnnOp::kLstm ? output(2) : nullptr;
    const size_t need = RnnWorkspaceBytes(a);
    if (ctx.workspace_bytes < need)
      return Err(StatusCode::kInternal, "{}: workspace of {} bytes is smaller than the {} needed", where_,
                 ctx.workspace_bytes, need);
    const cudaError_t e = LaunchRnn(a, ctx.workspace, ctx.workspace_bytes, ctx.stream);
    if (e == cudaSuccess) return Status::Ok();
    return Err(StatusCode::kCudaError, "{}: launching the {} kernels failed: {} ({})", where_,
               attrs_.op == RnnOp::kLstm ? "LSTM" : attrs_.op == RnnOp::kGru ? "GRU" : "RNN", cudaGetErrorString(e),
               cudaGetErrorName(e));
  }

 private:
  static const DeviceTensor* In(const std::vector<DeviceTensor>& in, size_t i) {
    return i < in.size() && in[i].present() ? &in[i] : nullptr;
  }

  // The kernels' arguments at these inputs, checked as the CPU reference checks them.
  Result<RnnArgs> Args(const std::vector<DeviceTensor>& in) const {
    RnnArgs a = base_;
    const DeviceTensor* x = In(in, 0);
    const DeviceTensor* w = In(in, 1);
    const DeviceTensor* r = In(in, 2);
    if (!x || !w || !r) return Err(StatusCode::kInvalidArgument, "{}: X, W and R are required", where_);
    for (size_t i = attrs_.max_inputs(); i < in.size(); ++i)
      if (In(in, i))
        return Err(StatusCode::kInvalidArgument, "{}: this op takes {} inputs", where_, attrs_.max_inputs());
    if (x->shape.size() != 3 || r->shape.size() != 3)
      return Err(StatusCode::kInvalidArgument, "{}: X {} and R {} must be 3-D", where_, ShapeToString(x->shape),
                 ShapeToString(r->shape));
    if (!IsRnnData(x->dtype))
      return Err(StatusCode::kUnsupported, "{}: X of type {} is not supported by the CUDA kernels", where_,
                 DataTypeName(x->dtype));
    a.dtype = static_cast<int>(x->dtype);
    a.seq = x->shape[a.batch_first ? 1 : 0];
    a.batch = x->shape[a.batch_first ? 0 : 1];
    a.input = x->shape[2];
    a.hidden = attrs_.hidden_size > 0 ? attrs_.hidden_size : r->shape[2];
    const int64_t G = attrs_.gates, H = a.hidden, D = a.dirs;
    const std::vector<int64_t> state = a.batch_first ? std::vector<int64_t>{a.batch, D, H}
                                                     : std::vector<int64_t>{D, a.batch, H};
    const bool lstm = attrs_.op == RnnOp::kLstm;
    const DeviceTensor* b = In(in, 3);
    const DeviceTensor* h0 = In(in, 5);
    const DeviceTensor* c0 = lstm ? In(in, 6) : nullptr;
    const DeviceTensor* p = lstm ? In(in, 7) : nullptr;
    const std::pair<const DeviceTensor*, std::vector<int64_t>> expected[] = {
        {w, {D, G * H, a.input}}, {r, {D, G * H, H}}, {b, {D, 2 * G * H}}, {h0, state}, {c0, state}, {p, {D, 3 * H}}};
    for (const auto& [t, shape] : expected) {
      if (!t) continue;
      if (t->shape != shape || t->dtype != x->dtype)
        return Err(StatusCode::kInvalidArgument, "{}: with X {} {}, an input is {} {} where {} of shape {} was expected",
                   where_, DataTypeName(x->dtype), ShapeToString(x->shape), DataTypeName(t->dtype),
                   ShapeToString(t->shape), DataTypeName(x->dtype), ShapeToString(shape));
    }
    if (const DeviceTensor* sl = In(in, 4)) {
      if (sl->dtype != DataType::kInt32 && sl->dtype != DataType::kInt64)
        return Err(StatusCode::kInvalidArgument, "{}: sequence_lens must be int32, not {}", where_,
                   DataTypeName(sl->dtype));
      if (sl->shape != std::vector<int64_t>{a.batch})
        return Err(StatusCode::kInvalidArgument, "{}: sequence_lens is {}, expected [{}] (batch_size)", where_,
                   ShapeToString(sl->shape), a.batch);
      if (sl->host) {  // known on the host (a constant, or the runtime's copy): checked as the CPU does
        for (int64_t i = 0; i < a.batch; ++i) {
          const int64_t len = sl->host->GetAsInt(i);
          if (len < 0 || len > a.seq)
            return Err(StatusCode::kInvalidArgument, "{}: sequence_lens[{}] is {}, outside [0, seq_length = {}]",
                       where_, i, len, a.seq);
        }
      }
      a.lens = sl->data;
      a.lens_dtype = static_cast<int>(sl->dtype);
    }
    a.x = x->data;
    a.w = w->data;
    a.r = r->data;
    a.b = b ? b->data : nullptr;
    a.h0 = h0 ? h0->data : nullptr;
    a.c0 = c0 ? c0->data : nullptr;
    a.p = p ? p->data : nullptr;
    return a;
  }

  std::string where_;
  RnnAttrs attrs_;
  RnnArgs base_;
};

Result<std::vector<std::string>> RnnTactics(const LayerSpec& spec) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckNode(n));
  KILN_ASSIGN_OR_RETURN(const RnnAttrs attrs, ReadRnnAttrs(n));
  KILN_RETURN_IF_ERROR(BaseArgs(n, attrs).status());
  return std::vector<std::string>{"default"};
}

Result<std::unique_ptr<Layer>> CreateRnn(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckNode(n));
  KILN_ASSIGN_OR_RETURN(RnnAttrs attrs, ReadRnnAttrs(n));
  KILN_ASSIGN_OR_RETURN(const RnnArgs base, BaseArgs(n, attrs));
  return std::unique_ptr<Layer>(std::make_unique<RnnLayer>(n.Where(), std::move(attrs), base));
}

}  // namespace

void RegisterRnnLayers(LayerRegistry& r) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    LayerFactory f;
    f.tactics = RnnTactics;
    f.create = CreateRnn;
    r.Add(op, std::move(f));
  }
}

}  // namespace kiln::cuda
