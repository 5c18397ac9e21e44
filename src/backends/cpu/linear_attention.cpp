// CPU reference kernel of LinearAttention (opset 27): the token-by-token recurrence the spec defines, per batch and
// key/value head, on a float32 state S [d_k, d_v] (as the ONNX reference keeps it), sums in double:
//   gated, gated_delta:  S <- exp(g_t) * S            (g_t per key dim, or one per head)
//   delta, gated_delta:  u_t = beta_t * (v_t - S^T k_t), else u_t = v_t
//                        S <- S + k_t u_t^T
//   o_t = scale * S^T q_t for each query head of the group (q_num_heads / kv_num_heads query heads share a kv head)
// scale 0 means 1 / sqrt(d_k). present_state takes past_state's type (query's when there is none). chunk_size is a
// tuning hint of chunked implementations and changes nothing here. CausalConvWithState lives in causal_conv.cpp.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/common.h"
#include "backends/cpu/families.h"
#include "backends/cpu/tensor_util.h"

namespace kiln::cpu {

void RegisterCausalConvKernels(KernelRegistry& r);  // causal_conv.cpp

namespace {

// Writes float values into a float32/float16/bfloat16 tensor of as many elements.
void WriteFloats(Tensor& t, const std::vector<float>& v) {
  if (t.dtype() == DataType::kFloat32) {
    if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < t.numel(); ++i) t.SetFromDouble(i, v[static_cast<size_t>(i)]);
}

Status LinearAttentionKernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& q = c.in(0);
  const Tensor& k = c.in(1);
  const Tensor& v = c.in(2);
  const Tensor* past = c.input(3);
  const Tensor* decay = c.input(4);
  const Tensor* beta = c.input(5);
  const int64_t hq = n.geti("q_num_heads", 0), hkv = n.geti("kv_num_heads", 0);
  const std::string rule = n.gets("update_rule", "gated_delta");
  const bool gated = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0 || (gated != (decay != nullptr)) || (delta != (beta != nullptr)))
    return Err(StatusCode::kInvalidArgument, "{}: heads {} / {} or update_rule '{}' do not fit the inputs", n.Where(),
               hq, hkv, rule);
  if (q.rank() != 3 || k.rank() != 3 || v.rank() != 3)
    return Err(StatusCode::kInvalidArgument, "{}: query {}, key {} and value {} must be 3-D (B, T, H*D)", n.Where(),
               q.Describe(), k.Describe(), v.Describe());
  const int64_t bs = q.dim(0), len = q.dim(1);
  const int64_t dk = q.dim(2) / hq, dv = v.dim(2) / hkv, group = hq / hkv;
  if (q.dim(2) % hq != 0 || v.dim(2) % hkv != 0 || k.dim(2) != hkv * dk || k.dim(0) != bs || v.dim(0) != bs ||
      k.dim(1) != len || v.dim(1) != len)
    return Err(StatusCode::kInvalidArgument, "{}: query {}, key {} and value {} do not fit {} query and {} kv heads",
               n.Where(), q.Describe(), k.Describe(), v.Describe(), hq, hkv);
  auto fits = [&](const Tensor* t, int64_t a, int64_t b) {
    return !t || (t->rank() == 3 && t->dim(0) == bs && t->dim(1) == len && (t->dim(2) == a || t->dim(2) == b));
  };
  if (!fits(decay, hkv, hkv * dk) || !fits(beta, hkv, 1))
    return Err(StatusCode::kInvalidArgument, "{}: decay must be (B, T, H_kv or H_kv*d_k), beta (B, T, H_kv or 1)",
               n.Where());
  const std::vector<int64_t> state_shape = {bs, hkv, dk, dv};
  if (past && past->shape() != state_shape)
    return Err(StatusCode::kInvalidArgument, "{}: past_state {} must be {}", n.Where(), past->Describe(),
               ShapeToString(state_shape));
  Tensor& out = AllocOutput(c, 0, q.dtype(), {bs, len, hq * dv});
  Tensor& present = AllocOutput(c, 1, past ? past->dtype() : q.dtype(), state_shape);

  const float attr_scale = n.getf("scale", 0.0f);
  const double scale = attr_scale == 0.0f ? 1.0 / std::sqrt(static_cast<double>(dk)) : attr_scale;
  const std::vector<float> qf = q.ToFloatVector(), kf = k.ToFloatVector(), vf = v.ToFloatVector();
  const std::vector<float> gf = decay ? decay->ToFloatVector() : std::vector<float>();
  const std::vector<float> bf = beta ? beta->ToFloatVector() : std::vector<float>();
  const int64_t g_last = decay ? decay->dim(2) : 0, b_last = beta ? beta->dim(2) : 0;
  const bool g_per_head = g_last == hkv;  // else one decay per key dim (the same when d_k is 1)
  std::vector<float> state = past ? past->ToFloatVector() : std::vector<float>(static_cast<size_t>(bs * hkv * dk * dv));
  std::vector<float> of(static_cast<size_t>(bs * len * hq * dv));

  // Each (batch, kv head) runs its own recurrence.
  ParallelFor(
      bs * hkv,
      [&](int64_t begin, int64_t end) {
        std::vector<double> u(static_cast<size_t>(dv));
        for (int64_t item = begin; item < end; ++item) {
          const int64_t b = item / hkv, h = item % hkv;
          float* s = state.data() + item * dk * dv;  // s[i * dv + j]
          for (int64_t t = 0; t < len; ++t) {
            const int64_t bt = b * len + t;
            const float* kt = kf.data() + (bt * hkv + h) * dk;
            const float* vt = vf.data() + (bt * hkv + h) * dv;
            if (gated)
              for (int64_t i = 0; i < dk; ++i) {
                const float g = gf[static_cast<size_t>(bt * g_last + (g_per_head ? h : h * dk + i))];
                const float f = std::exp(g);
                for (int64_t j = 0; j < dv; ++j) s[i * dv + j] *= f;
              }
            for (int64_t j = 0; j < dv; ++j) u[static_cast<size_t>(j)] = vt[j];
            if (delta) {
              const double bt_rate = bf[static_cast<size_t>(bt * b_last + (b_last == 1 ? 0 : h))];
              for (int64_t j = 0; j < dv; ++j) {
                double retrieved = 0;
                for (int64_t i = 0; i < dk; ++i) retrieved += static_cast<double>(s[i * dv + j]) * kt[i];
                u[static_cast<size_t>(j)] = static_cast<float>(bt_rate * (vt[j] - retrieved));
              }
            }
            for (int64_t i = 0; i < dk; ++i)
              for (int64_t j = 0; j < dv; ++j)
                s[i * dv + j] =
                    static_cast<float>(s[i * dv + j] + static_cast<double>(kt[i]) * u[static_cast<size_t>(j)]);
            for (int64_t qh = h * group; qh < (h + 1) * group; ++qh) {
              const float* qt = qf.data() + (bt * hq + qh) * dk;
              float* ot = of.data() + (bt * hq + qh) * dv;
              for (int64_t j = 0; j < dv; ++j) {
                double acc = 0;
                for (int64_t i = 0; i < dk; ++i) acc += static_cast<double>(qt[i]) * s[i * dv + j];
                ot[j] = static_cast<float>(scale * acc);
              }
            }
          }
        }
      },
      1);
  WriteFloats(out, of);
  WriteFloats(present, state);
  return Status::Ok();
}

}  // namespace

void RegisterLlmKernels(KernelRegistry& r) {
  r.Add("LinearAttention", LinearAttentionKernel);
  RegisterCausalConvKernels(r);
}

}  // namespace kiln::cpu
