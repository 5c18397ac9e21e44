// CUDA layers of RotaryEmbedding (23), TensorScatter (24), LinearAttention and CausalConvWithState (27), kernels in
// llm_ops.cu, with the CPU references' semantics (cpu/rotary_embedding.cpp, cpu/bitcast_scatter.cpp,
// cpu/linear_attention.cpp, cpu/causal_conv.cpp). Shapes are checked here as the CPU kernels check them; index values
// cannot be checked without a synchronization, so out-of-range position_ids are clamped into the caches and
// TensorScatter's linear writes that fall outside the cache are skipped (the CPU refuses both).
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/layer.h"
#include "backends/cuda/llm_kernels.h"
#include "core/dims.h"
#include "core/error.h"

namespace kiln::cuda {

void RegisterLlmLayers(LayerRegistry& r);

namespace {

Status Launched(const std::string& where, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Err(StatusCode::kCudaError, "{}: launching the {} kernel failed: {} ({})", where, what,
             cudaGetErrorString(e), cudaGetErrorName(e));
}

const DeviceTensor* Opt(const std::vector<DeviceTensor>& v, size_t i) {
  return i < v.size() && v[i].present() ? &v[i] : nullptr;
}

bool IsLowFloat(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16; }

Status CheckTypes(const Node& n, std::initializer_list<size_t> inputs, bool f64) {
  for (size_t i : inputs)
    if (const Value* x = n.input(i); x && !(IsLowFloat(x->dtype) || (f64 && x->dtype == DataType::kFloat64)))
      return Err(StatusCode::kUnsupported, "{}: the CUDA {} takes float32, float16, bfloat16{} inputs, not {} ({})",
                 n.Where(), n.op_type, f64 ? " or float64" : "", DataTypeName(x->dtype), x->name);
  return Status::Ok();
}

// ---- RotaryEmbedding ----

Result<std::unique_ptr<Layer>> CreateRotary(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckTypes(n, {0, 1, 2}, true));
  KILN_ASSIGN_OR_RETURN(const int64_t interleaved, n.attr_int("interleaved", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t num_heads, n.attr_int("num_heads", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t rot_attr, n.attr_int("rotary_embedding_dim", 0));
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in, std::vector<DeviceTensor>& out) -> Status {
        auto bad = [&](const std::string& what) { return Err(StatusCode::kInvalidArgument, "{}: {}", where, what); };
        if (in.size() < 3 || !in[0].present() || !in[1].present() || !in[2].present())
          return bad("RotaryEmbedding needs X, cos_cache and sin_cache");
        const DeviceTensor &x = in[0], &cs = in[1], &sn = in[2];
        const DeviceTensor* pos = Opt(in, 3);
        const size_t r = x.shape.size();
        if (r != 3 && r != 4) return bad("X " + ShapeToString(x.shape) + " must be 3-D or 4-D");
        const bool three = r == 3;
        if (three && (num_heads <= 0 || x.shape[2] % num_heads != 0))
          return bad("a 3-D X needs num_heads (> 0) dividing its hidden size");
        RotaryArgs a;
        a.batch = x.shape[0], a.heads = three ? num_heads : x.shape[1], a.seq = three ? x.shape[1] : x.shape[2];
        a.head = three ? x.shape[2] / num_heads : x.shape[3];
        const int64_t rot = rot_attr == 0 ? a.head : rot_attr;
        if (rot < 0 || rot % 2 != 0 || rot > a.head)
          return bad("the rotary dimension " + std::to_string(rot) + " must be even and at most the head size");
        a.half = rot / 2;
        if (cs.dtype != x.dtype || sn.dtype != x.dtype || cs.shape != sn.shape || cs.shape.size() != (pos ? 2u : 3u) ||
            cs.shape.back() != a.half)
          return bad("cos_cache " + ShapeToString(cs.shape) + " and sin_cache " + ShapeToString(sn.shape) +
                     " must have X's type and end in rotary dimension / 2");
        if (pos) {
          if (pos->dtype != DataType::kInt64 || pos->shape.size() != 2 ||
              (pos->shape[0] != a.batch && pos->shape[0] != 1) || (pos->shape[1] != a.seq && pos->shape[1] != 1))
            return bad("position_ids " + ShapeToString(pos->shape) + " must be int64 [batch, seq]");
          a.pos = static_cast<const int64_t*>(pos->data);
          a.row_b = pos->shape[0] == 1 ? 0 : pos->shape[1];
          a.row_t = pos->shape[1] == 1 ? 0 : 1;
          a.cache_rows = cs.shape[0];
          if (a.cache_rows <= 0) {
            if (x.numel() > 0 && a.half > 0) return bad("position ids index caches of no rows");
            a.cache_rows = 1;  // nothing is read
          }
        } else {
          if ((cs.shape[0] != a.batch && cs.shape[0] != 1) || (cs.shape[1] != a.seq && cs.shape[1] != 1))
            return bad("cos_cache " + ShapeToString(cs.shape) + " must be [batch, seq, rot / 2] without position_ids");
          a.row_b = cs.shape[0] == 1 ? 0 : cs.shape[1] * a.half;
          a.row_t = cs.shape[1] == 1 ? 0 : a.half;
        }
        if (out.empty() || out[0].shape != x.shape || out[0].dtype != x.dtype)
          return Err(StatusCode::kInternal, "{}: Y does not have X's type and shape", where);
        a.x = x.data, a.cos = cs.data, a.sin = sn.data, a.y = out[0].data;
        a.dtype = static_cast<int>(x.dtype);
        a.three = three ? 1 : 0;
        a.interleaved = interleaved != 0 ? 1 : 0;
        return Launched(where, LaunchRotaryEmbedding(a, ctx.stream), "RotaryEmbedding");
      }));
}

// ---- TensorScatter ----

Result<std::unique_ptr<Layer>> CreateTensorScatter(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_ASSIGN_OR_RETURN(const std::string mode, n.attr_string("mode", "linear"));
  if (mode != "linear" && mode != "circular")
    return Err(StatusCode::kInvalidModel, "{}: mode must be 'linear' or 'circular', got '{}'", n.Where(), mode);
  KILN_ASSIGN_OR_RETURN(const int64_t axis_attr, n.attr_int("axis", -2));
  const bool circular = mode == "circular";
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in, std::vector<DeviceTensor>& out) -> Status {
        auto bad = [&](const std::string& what) { return Err(StatusCode::kInvalidArgument, "{}: {}", where, what); };
        if (in.size() < 2 || !in[0].present() || !in[1].present()) return bad("TensorScatter needs past_cache and update");
        const DeviceTensor &past = in[0], &update = in[1];
        const DeviceTensor* indices = Opt(in, 2);
        const int64_t rank = static_cast<int64_t>(past.shape.size());
        const auto axis = NormalizeAxis(axis_attr, rank);
        if (!axis || *axis == 0)
          return bad("axis " + std::to_string(axis_attr) + " must name a dim of past_cache " +
                     ShapeToString(past.shape) + " other than 0");
        bool same = update.dtype == past.dtype && static_cast<int64_t>(update.shape.size()) == rank;
        for (int64_t d = 0; same && d < rank; ++d)
          same = d == *axis ? update.shape[d] <= past.shape[d] : update.shape[d] == past.shape[d];
        if (!same)
          return bad("update " + ShapeToString(update.shape) + " must match past_cache " + ShapeToString(past.shape) +
                     " in every dim but the axis, and be no longer there");
        const int64_t batch = past.shape[0], max_len = past.shape[*axis], len = update.shape[*axis];
        if (indices && (indices->dtype != DataType::kInt64 || indices->shape != std::vector<int64_t>{batch}))
          return bad("write_indices " + ShapeToString(indices->shape) + " must be int64 [batch]");
        if (out.empty() || out[0].shape != past.shape || out[0].dtype != past.dtype)
          return Err(StatusCode::kInternal, "{}: the output does not have past_cache's type and shape", where);
        if (past.numel() == 0) return Status::Ok();
        if (out[0].data != past.data)
          KILN_CUDA_RETURN_IF_ERROR(
              cudaMemcpyAsync(out[0].data, past.data, past.nbytes(), cudaMemcpyDeviceToDevice, ctx.stream));
        int64_t prefix = 1, inner = 1;
        for (int64_t d = 0; d < *axis; ++d) prefix *= past.shape[d];
        for (int64_t d = *axis + 1; d < rank; ++d) inner *= past.shape[d];
        return Launched(where,
                        LaunchTensorScatter(static_cast<int>(DataTypeSize(past.dtype)), update.data,
                                            indices ? static_cast<const int64_t*>(indices->data) : nullptr, prefix,
                                            prefix / batch, max_len, len, inner, circular ? 1 : 0, out[0].data,
                                            ctx.stream),
                        "TensorScatter");
      }));
}

// ---- LinearAttention ----

Status CheckLinearAttention(const LayerSpec& spec) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckTypes(n, {0, 1, 2, 3, 4, 5}, false));
  KILN_ASSIGN_OR_RETURN(const int64_t hq, n.attr_int("q_num_heads", 0));
  if (!spec.input_shapes.empty() && spec.input_shapes[0].size() == 3 && hq > 0 &&
      spec.input_shapes[0][2] / hq > kLinearAttnMaxDk)
    return Err(StatusCode::kUnsupported,
               "{}: key head size {} is above {}, the most the CUDA LinearAttention kernel keeps in registers; run "
               "this node on the CPU backend",
               n.Where(), spec.input_shapes[0][2] / hq, kLinearAttnMaxDk);
  return Status::Ok();
}

Result<std::vector<std::string>> LinearAttentionTactics(const LayerSpec& spec) {
  KILN_RETURN_IF_ERROR(CheckLinearAttention(spec));
  return std::vector<std::string>{"default"};
}

Result<std::unique_ptr<Layer>> CreateLinearAttention(const LayerSpec& spec, const std::string&) {
  KILN_RETURN_IF_ERROR(CheckLinearAttention(spec));
  const Node& n = spec.node;
  KILN_ASSIGN_OR_RETURN(const int64_t hq, n.attr_int("q_num_heads", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t hkv, n.attr_int("kv_num_heads", 0));
  KILN_ASSIGN_OR_RETURN(const std::string rule, n.attr_string("update_rule", "gated_delta"));
  KILN_ASSIGN_OR_RETURN(const float attr_scale, n.attr_float("scale", 0.f));
  const bool gated = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in, std::vector<DeviceTensor>& out) -> Status {
        auto bad = [&](const std::string& what) { return Err(StatusCode::kInvalidArgument, "{}: {}", where, what); };
        if (in.size() < 3 || !in[0].present() || !in[1].present() || !in[2].present())
          return bad("LinearAttention needs query, key and value");
        const DeviceTensor &q = in[0], &k = in[1], &v = in[2];
        const DeviceTensor *past = Opt(in, 3), *decay = Opt(in, 4), *beta = Opt(in, 5);
        if (hq <= 0 || hkv <= 0 || hq % hkv != 0 || gated != (decay != nullptr) || delta != (beta != nullptr))
          return bad("the heads or update_rule '" + rule + "' do not fit the inputs");
        if (q.shape.size() != 3 || k.shape.size() != 3 || v.shape.size() != 3)
          return bad("query, key and value must be 3-D (B, T, H*D)");
        LinearAttentionArgs a;
        a.batch = q.shape[0], a.len = q.shape[1], a.q_heads = hq, a.kv_heads = hkv;
        a.dk = q.shape[2] / hq, a.dv = v.shape[2] / hkv;
        if (q.shape[2] % hq != 0 || v.shape[2] % hkv != 0 || k.shape[2] != hkv * a.dk || k.shape[0] != a.batch ||
            v.shape[0] != a.batch || k.shape[1] != a.len || v.shape[1] != a.len)
          return bad("query, key and value do not fit the heads");
        if (a.dk > kLinearAttnMaxDk)
          return Err(StatusCode::kUnsupported, "{}: key head size {} is above the CUDA kernel's {}", where, a.dk,
                     kLinearAttnMaxDk);
        auto fits = [&](const DeviceTensor* t, int64_t x, int64_t y) {
          return !t || (t->shape.size() == 3 && t->shape[0] == a.batch && t->shape[1] == a.len &&
                        (t->shape[2] == x || t->shape[2] == y));
        };
        if (!fits(decay, hkv, hkv * a.dk) || !fits(beta, hkv, 1))
          return bad("decay must be (B, T, H_kv or H_kv*d_k), beta (B, T, H_kv or 1)");
        const std::vector<int64_t> state = {a.batch, hkv, a.dk, a.dv};
        if (past && past->shape != state) return bad("past_state " + ShapeToString(past->shape) + " must be " +
                                                     ShapeToString(state));
        for (const DeviceTensor* t : {&k, &v, decay, beta})
          if (t && t->dtype != q.dtype) return bad("key, value, decay and beta must have query's type");
        if (out.size() < 2 || !out[0].present() || !out[1].present() ||
            out[0].shape != std::vector<int64_t>{a.batch, a.len, hq * a.dv} || out[1].shape != state ||
            out[1].dtype != (past ? past->dtype : q.dtype))
          return Err(StatusCode::kInternal, "{}: the outputs do not fit the inputs", where);
        a.q = q.data, a.k = k.data, a.v = v.data, a.past = past ? past->data : nullptr;
        a.decay = decay ? decay->data : nullptr, a.beta = beta ? beta->data : nullptr;
        a.out = out[0].data, a.present = out[1].data;
        a.dtype = static_cast<int>(q.dtype), a.state_dtype = static_cast<int>(out[1].dtype);
        a.decay_last = decay ? decay->shape[2] : 0, a.beta_last = beta ? beta->shape[2] : 0;
        a.gated = gated ? 1 : 0, a.delta = delta ? 1 : 0;
        a.scale = attr_scale == 0.f ? 1.0 / std::sqrt(static_cast<double>(a.dk)) : static_cast<double>(attr_scale);
        // With no tokens the state passes through; with no state the output is all there is (zeros when dk is 0).
        if (a.len == 0 || a.dk == 0) {
          if (out[1].numel() > 0) {
            if (past)
              KILN_CUDA_RETURN_IF_ERROR(
                  cudaMemcpyAsync(out[1].data, past->data, past->nbytes(), cudaMemcpyDeviceToDevice, ctx.stream));
            else
              KILN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out[1].data, 0, out[1].nbytes(), ctx.stream));
          }
          if (out[0].numel() > 0) KILN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out[0].data, 0, out[0].nbytes(), ctx.stream));
          return Status::Ok();
        }
        return Launched(where, LaunchLinearAttention(a, ctx.stream), "LinearAttention");
      }));
}

// ---- CausalConvWithState ----

Result<std::unique_ptr<Layer>> CreateCausalConv(const LayerSpec& spec, const std::string&) {
  const Node& n = spec.node;
  KILN_RETURN_IF_ERROR(CheckTypes(n, {0, 1, 2, 3}, false));
  KILN_ASSIGN_OR_RETURN(const std::string act, n.attr_string("activation", "none"));
  if (act != "none" && act != "silu" && act != "swish")
    return Err(StatusCode::kInvalidModel, "{}: activation must be 'none', 'silu' or 'swish', got '{}'", n.Where(), act);
  const bool silu = act != "none";
  const std::string where = n.Where();
  return std::unique_ptr<Layer>(std::make_unique<FnLayer>(
      [=](const LaunchContext& ctx, const std::vector<DeviceTensor>& in, std::vector<DeviceTensor>& out) -> Status {
        auto bad = [&](const std::string& what) { return Err(StatusCode::kInvalidArgument, "{}: {}", where, what); };
        if (in.size() < 2 || !in[0].present() || !in[1].present())
          return bad("CausalConvWithState needs input and weight");
        const DeviceTensor &x = in[0], &w = in[1];
        const DeviceTensor *bias = Opt(in, 2), *past = Opt(in, 3);
        if (x.shape.size() != 3 || w.shape.size() != 3 || w.shape[0] != x.shape[1] || w.shape[1] != 1 ||
            w.shape[2] < 1)
          return bad("input " + ShapeToString(x.shape) + " must be (batch, channels, length), weight " +
                     ShapeToString(w.shape) + " (channels, 1, k)");
        const int64_t batch = x.shape[0], ch = x.shape[1], len = x.shape[2], k = w.shape[2];
        const std::vector<int64_t> state = {batch, ch, k - 1};
        if ((bias && bias->shape != std::vector<int64_t>{ch}) || (past && past->shape != state))
          return bad("bias must be (channels) and past_state " + ShapeToString(state));
        for (const DeviceTensor* t : {&w, bias, past})
          if (t && t->dtype != x.dtype) return bad("weight, bias and past_state must have input's type");
        if (out.size() < 2 || !out[0].present() || !out[1].present() || out[0].shape != x.shape ||
            out[1].shape != state)
          return Err(StatusCode::kInternal, "{}: the outputs do not fit the inputs", where);
        return Launched(where,
                        LaunchCausalConvWithState(static_cast<int>(x.dtype), x.data, w.data,
                                                  bias ? bias->data : nullptr, past ? past->data : nullptr,
                                                  out[0].data, out[1].data, batch, ch, len, k, silu ? 1 : 0,
                                                  ctx.stream),
                        "CausalConvWithState");
      }));
}

}  // namespace

void RegisterLlmLayers(LayerRegistry& r) {
  LayerFactory rotary, scatter, linear, conv;
  rotary.create = CreateRotary;
  scatter.create = CreateTensorScatter;
  linear.tactics = LinearAttentionTactics;
  linear.create = CreateLinearAttention;
  conv.create = CreateCausalConv;
  r.Add("RotaryEmbedding", std::move(rotary));
  r.Add("TensorScatter", std::move(scatter));
  r.Add("LinearAttention", std::move(linear));
  r.Add("CausalConvWithState", std::move(conv));
}

}  // namespace kiln::cuda
