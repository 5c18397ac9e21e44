// CPU kernel of ONNX's Attention (opsets 23 to 25; shapes and attributes: ops/transformer.cpp). kiln's own
// kiln.Attention (fused_attention.cpp) is another op. Per batch b, query head h and query row i (threaded over the
// rows), reading kv head h / (Hq / Hkv) (grouped-query attention) of the present keys and values (past ++ new):
//   bias[j]  = attn_mask[b, h, i, j] (bool: 0 where true, else -inf; other types: the value; -inf past the mask's
//              last dim) + -inf where j > i + offset (is_causal), where j lies outside the window
//              [i + offset - left_window_size, i + offset + right_window_size], or where j >= nonpad_kv_seqlen[b]
//   score[j] = (sqrt(scale) Q[i]) . (sqrt(scale) K[j]), then softcap * tanh(score / softcap) when softcap > 0
//   P        = softmax(score + bias) in softmax_precision; a row whose bias is -inf everywhere gives P = 0, not NaN
//   Y[i]     = sum_j P[j] V[j]
// offset: the past length with past_key, nonpad_kv_seqlen[b] - Sq with nonpad_kv_seqlen, else 0.
// qk_matmul_output: the scores before softcap (mode 0), after it (1), plus the bias (2), or P (3).
// Values are rounded to Q's type where ONNX's function body holds a tensor of it (scaled Q and K, scores,
// probabilities), so float16/bfloat16 results follow the reference; sums run in float, or double where Q, V or
// softmax_precision is double.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/common.h"
#include "backends/cpu/families.h"
#include "backends/cpu/tensor_util.h"

namespace kiln::cpu {
namespace {

struct AttnDims {
  bool three = false;  // Q, K, V are [B, S, H * d]
  int64_t batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, past = 0, total = 0, head = 0, v_head = 0;
};

struct AttnAttrs {
  bool causal = false;
  int64_t mode = 0, left = -1, right = -1;
  float softcap = 0.f, scale = 0.f;
  DataType softmax_type = DataType::kFloat32;
};

// Element strides of an operand's [batch, head, seq] rows (its last axis, the head's features, is contiguous).
struct RowView {
  int64_t b = 0, h = 0, s = 0;
};
RowView ViewOf(bool three, int64_t heads, int64_t seq, int64_t size) {
  if (three) return {seq * heads * size, size, heads * size};
  return {heads * seq * size, seq * size, size};
}

// Checks Q, K, V, past_key, past_value, nonpad_kv_seqlen and attn_mask against each other; the 4-D sizes.
Result<AttnDims> ReadDims(const KernelContext& c) {
  const Node& n = c.node;
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2);
  const Tensor *pk = c.input(4), *pv = c.input(5), *nonpad = c.input(6), *mask = c.input(3);
  AttnDims d;
  const int64_t r = q.rank();
  if ((r != 3 && r != 4) || k.rank() != r || v.rank() != r)
    return Err(StatusCode::kInvalidArgument, "{}: Q {}, K {} and V {} must all be 3-D or all 4-D", n.Where(),
               q.Describe(), k.Describe(), v.Describe());
  d.three = r == 3;
  if (d.three) {
    d.q_heads = n.geti("q_num_heads", 0);
    d.kv_heads = n.geti("kv_num_heads", 0);
    if (d.q_heads <= 0 || d.kv_heads <= 0 || q.dim(2) % d.q_heads != 0 || k.dim(2) % d.kv_heads != 0 ||
        v.dim(2) % d.kv_heads != 0)
      return Err(StatusCode::kInvalidArgument,
                 "{}: 3-D Q {}, K {}, V {} need hidden sizes that are multiples of q_num_heads {} / kv_num_heads {}",
                 n.Where(), q.Describe(), k.Describe(), v.Describe(), d.q_heads, d.kv_heads);
    d.q_len = q.dim(1), d.kv_len = k.dim(1), d.head = q.dim(2) / d.q_heads, d.v_head = v.dim(2) / d.kv_heads;
    if (k.dim(2) / d.kv_heads != d.head || v.dim(1) != d.kv_len)
      return Err(StatusCode::kInvalidArgument, "{}: Q {}, K {} and V {} do not line up", n.Where(), q.Describe(),
                 k.Describe(), v.Describe());
  } else {
    d.q_heads = q.dim(1), d.kv_heads = k.dim(1), d.q_len = q.dim(2), d.kv_len = k.dim(2), d.head = q.dim(3);
    d.v_head = v.dim(3);
    if (k.dim(3) != d.head || v.dim(1) != d.kv_heads || v.dim(2) != d.kv_len)
      return Err(StatusCode::kInvalidArgument, "{}: Q {}, K {} and V {} do not line up", n.Where(), q.Describe(),
                 k.Describe(), v.Describe());
  }
  d.batch = q.dim(0);
  if (k.dim(0) != d.batch || v.dim(0) != d.batch || d.kv_heads <= 0 || d.q_heads % d.kv_heads != 0)
    return Err(StatusCode::kInvalidArgument,
               "{}: Q {}, K {} and V {} need one batch size, and Q's heads a multiple of K's and V's", n.Where(),
               q.Describe(), k.Describe(), v.Describe());
  if ((pk == nullptr) != (pv == nullptr) || (pk && nonpad))
    return Err(StatusCode::kInvalidArgument, "{}: past_key and past_value go together, and not with nonpad_kv_seqlen",
               n.Where());
  if (pk) {
    d.past = pk->rank() == 4 ? pk->dim(2) : -1;
    const std::vector<int64_t> want_k = {d.batch, d.kv_heads, d.past, d.head};
    const std::vector<int64_t> want_v = {d.batch, d.kv_heads, d.past, d.v_head};
    if (pk->shape() != want_k || pv->shape() != want_v)
      return Err(StatusCode::kInvalidArgument, "{}: past_key {} and past_value {} must be {} and {}", n.Where(),
                 pk->Describe(), pv->Describe(), ShapeToString(want_k), ShapeToString(want_v));
  }
  d.total = d.past + d.kv_len;
  if (nonpad && (nonpad->dtype() != DataType::kInt64 || nonpad->shape() != std::vector<int64_t>{d.batch}))
    return Err(StatusCode::kInvalidArgument, "{}: nonpad_kv_seqlen {} must be int64 [{}]", n.Where(),
               nonpad->Describe(), d.batch);
  if (mask) {
    const std::vector<int64_t> scores = {d.batch, d.q_heads, d.q_len, d.total};
    const int64_t mr = mask->rank();
    bool ok = mr >= 1 && mr <= 4 && mask->dim(-1) <= d.total;
    for (int64_t i = 1; ok && i < mr; ++i) {
      const int64_t m = mask->dim(mr - 1 - i);
      ok = m == 1 || m == scores[3 - i];
    }
    if (!ok)
      return Err(StatusCode::kInvalidArgument, "{}: attn_mask {} does not broadcast to the scores {}", n.Where(),
                 mask->Describe(), ShapeToString(scores));
  }
  return d;
}

// [B, Hkv, P + S, size]: past's rows (may be null), then x's (3-D or 4-D), copied bytes for bytes.
void ConcatKv(const Tensor* past, const Tensor& x, const AttnDims& d, int64_t size, Tensor& out) {
  const size_t es = DataTypeSize(out.dtype());
  const size_t row = static_cast<size_t>(size) * es;
  if (row == 0 || out.numel() == 0) return;
  const RowView xv = ViewOf(d.three, d.kv_heads, d.kv_len, size);
  char* dst = static_cast<char*>(out.raw());
  const char* xs = static_cast<const char*>(x.raw());
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.kv_heads; ++h) {
      char* o = dst + static_cast<size_t>((b * d.kv_heads + h) * d.total) * row;
      if (past && d.past > 0)
        std::memcpy(o, static_cast<const char*>(past->raw()) + static_cast<size_t>((b * d.kv_heads + h) * d.past) * row,
                    static_cast<size_t>(d.past) * row);
      for (int64_t s = 0; s < d.kv_len; ++s)
        std::memcpy(o + static_cast<size_t>(d.past + s) * row,
                    xs + static_cast<size_t>(b * xv.b + h * xv.h + s * xv.s) * es, row);
    }
}

// v rounded to the precision of type t.
template <typename Acc>
Acc RoundAs(DataType t, Acc v) {
  if (t == DataType::kFloat64) return v;
  if (t == DataType::kFloat32) return static_cast<Acc>(static_cast<float>(v));
  return static_cast<Acc>(RoundTo(t, static_cast<float>(v)));
}

// A float tensor's values as Acc, in its layout.
template <typename Acc>
Status ToAcc(const Node& n, const Tensor& t, std::vector<Acc>* out) {
  out->resize(static_cast<size_t>(t.numel()));
  return DispatchFloat(t.dtype(), n, [&]<typename T>() {
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) (*out)[i] = static_cast<Acc>(Load(p, i));
  });
}

template <typename Acc>
Status FromAcc(const Node& n, const std::vector<Acc>& src, Tensor& dst) {
  return DispatchFloat(dst.dtype(), n, [&]<typename T>() {
    T* p = dst.data<T>();
    for (int64_t i = 0; i < dst.numel(); ++i) Store(p, i, static_cast<ComputeT<T>>(src[i]));
  });
}

template <typename Acc>
Status Run(KernelContext& c, const AttnDims& d, const AttnAttrs& a, const Tensor& keys, const Tensor& values) {
  const Node& n = c.node;
  const DataType t1 = c.in(0).dtype();
  constexpr Acc kNegInf = -std::numeric_limits<Acc>::infinity();
  std::vector<Acc> q, k, v;
  KILN_RETURN_IF_ERROR(ToAcc(n, c.in(0), &q));
  KILN_RETURN_IF_ERROR(ToAcc(n, keys, &k));
  KILN_RETURN_IF_ERROR(ToAcc(n, values, &v));
  // Q and K each scaled by sqrt(scale) (in float, then Q's type), as the spec's graph does; a negative scale (no
  // square root) scales Q alone.
  const Acc q_factor = RoundAs(t1, static_cast<Acc>(a.scale >= 0 ? std::sqrt(a.scale) : a.scale));
  const Acc k_factor = a.scale >= 0 ? q_factor : Acc(1);
  for (Acc& x : q) x = RoundAs(t1, x * q_factor);
  for (Acc& x : k) x = RoundAs(t1, x * k_factor);

  // attn_mask as an additive bias, right-aligned to [B, Hq, Sq, T]: strides (0 where broadcast) and its length.
  const Tensor* mask = c.input(3);
  std::vector<Acc> mask_bias;
  int64_t ms[4] = {0, 0, 0, 0}, mask_len = 0;
  if (mask) {
    mask_bias.resize(static_cast<size_t>(mask->numel()));
    const bool boolean = mask->dtype() == DataType::kBool;
    for (int64_t i = 0; i < mask->numel(); ++i)
      mask_bias[i] =
          boolean ? (mask->data<uint8_t>()[i] ? Acc(0) : kNegInf) : RoundAs(t1, static_cast<Acc>(mask->GetAsDouble(i)));
    int64_t stride = 1;
    for (int64_t i = 0; i < mask->rank(); ++i) {
      const int64_t dim = mask->dim(-1 - i);
      ms[3 - i] = dim == 1 && i > 0 ? 0 : stride;
      stride *= dim;
    }
    mask_len = mask->dim(-1);
  }
  // Per batch: the causal/window offset and the number of valid keys.
  const Tensor* nonpad = c.input(6);
  std::vector<int64_t> offset(static_cast<size_t>(d.batch), d.past), valid(static_cast<size_t>(d.batch), d.total);
  if (nonpad)
    for (int64_t b = 0; b < d.batch; ++b) {
      valid[b] = nonpad->data<int64_t>()[b];
      offset[b] = valid[b] - d.q_len;
    }

  const bool want_qk = WantOutput(c, 3);
  std::vector<Acc> y(static_cast<size_t>(d.batch * d.q_heads * d.q_len * d.v_head));
  std::vector<Acc> qk(want_qk ? static_cast<size_t>(d.batch * d.q_heads * d.q_len * d.total) : 0);
  const RowView qv = ViewOf(d.three, d.q_heads, d.q_len, d.head);
  const int64_t group = std::max<int64_t>(1, d.q_heads / d.kv_heads);
  const int64_t rows = d.batch * d.q_heads * d.q_len;
  ParallelFor(
      rows,
      [&](int64_t begin, int64_t end) {
        std::vector<Acc> bias(static_cast<size_t>(d.total)), x(static_cast<size_t>(d.total));
        for (int64_t r = begin; r < end; ++r) {
          const int64_t b = r / (d.q_heads * d.q_len), h = (r / d.q_len) % d.q_heads, i = r % d.q_len;
          const int64_t kvh = h / group, pos = i + offset[b];
          bool all_masked = true;
          for (int64_t j = 0; j < d.total; ++j) {
            Acc bj = 0;
            if (mask) bj = j < mask_len ? mask_bias[b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3]] : kNegInf;
            if ((a.causal && j > pos) || (a.left >= 0 && pos - j > a.left) || (a.right >= 0 && j - pos > a.right) ||
                j >= valid[b])
              bj = kNegInf;
            bias[j] = bj;
            all_masked = all_masked && bj == kNegInf;
          }
          const Acc* qi = q.data() + b * qv.b + h * qv.h + i * qv.s;
          const Acc* kb = k.data() + (b * d.kv_heads + kvh) * d.total * d.head;
          Acc* qk_row = want_qk ? qk.data() + r * d.total : nullptr;
          for (int64_t j = 0; j < d.total; ++j) {
            const Acc* kj = kb + j * d.head;
            Acc s = 0;
            for (int64_t t = 0; t < d.head; ++t) s += qi[t] * kj[t];
            s = RoundAs(t1, s);
            if (qk_row && a.mode == 0) qk_row[j] = s;
            if (a.softcap > 0) s = RoundAs(t1, Acc(a.softcap) * std::tanh(s / Acc(a.softcap)));
            if (qk_row && a.mode == 1) qk_row[j] = s;
            s = RoundAs(t1, s + bias[j]);
            if (qk_row && a.mode == 2) qk_row[j] = s;
            x[j] = RoundAs(a.softmax_type, s);
          }
          if (all_masked) {
            std::fill(x.begin(), x.end(), Acc(0));
          } else {
            Acc mx = kNegInf;
            for (int64_t j = 0; j < d.total; ++j) mx = std::max(mx, x[j]);
            if (mx == kNegInf) mx = 0;
            Acc sum = 0;
            for (int64_t j = 0; j < d.total; ++j) sum += (x[j] = std::exp(x[j] - mx));
            if (sum == 0) sum = 1;
            for (int64_t j = 0; j < d.total; ++j) x[j] = RoundAs(t1, RoundAs(a.softmax_type, x[j] / sum));
          }
          if (qk_row && a.mode == 3) std::copy(x.begin(), x.end(), qk_row);
          // Y's row: [B, Hq, Sq, Dv], or [B, Sq, Hq * Dv] for 3-D inputs.
          Acc* yi = y.data() + (d.three ? ((b * d.q_len + i) * d.q_heads + h) * d.v_head : r * d.v_head);
          const Acc* vb = v.data() + (b * d.kv_heads + kvh) * d.total * d.v_head;
          for (int64_t j = 0; j < d.total; ++j) {
            const Acc p = x[j];
            const Acc* vj = vb + j * d.v_head;
            for (int64_t t = 0; t < d.v_head; ++t) yi[t] += p * vj[t];
          }
        }
      },
      std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d.total * (d.head + d.v_head))));

  const std::vector<int64_t> y_shape = d.three ? std::vector<int64_t>{d.batch, d.q_len, d.q_heads * d.v_head}
                                               : std::vector<int64_t>{d.batch, d.q_heads, d.q_len, d.v_head};
  KILN_RETURN_IF_ERROR(FromAcc(n, y, AllocOutput(c, 0, t1, y_shape)));
  if (want_qk) KILN_RETURN_IF_ERROR(FromAcc(n, qk, AllocOutput(c, 3, t1, {d.batch, d.q_heads, d.q_len, d.total})));
  return Status::Ok();
}

Status OnnxAttentionKernel(KernelContext& c) {
  const Node& n = c.node;
  if (c.num_inputs() < 3 || !c.input(0) || !c.input(1) || !c.input(2))
    return Err(StatusCode::kInvalidArgument, "{}: Attention needs Q, K and V", n.Where());
  KILN_ASSIGN_OR_RETURN(const AttnDims d, ReadDims(c));
  AttnAttrs a;
  a.causal = n.geti("is_causal", 0) != 0;
  a.mode = n.geti("qk_matmul_output_mode", 0);
  a.left = n.geti("left_window_size", -1);
  a.right = n.geti("right_window_size", -1);
  a.softcap = n.getf("softcap", 0.f);
  // The default scale, 1 / sqrt(head_size), in float as the spec's graph computes it.
  a.scale = n.has_attr("scale") ? n.getf("scale", 1.f) : 1.f / std::sqrt(static_cast<float>(d.head));
  const DataType t1 = c.in(0).dtype(), t2 = c.in(2).dtype();
  a.softmax_type = n.has_attr("softmax_precision") ? static_cast<DataType>(n.geti("softmax_precision", 1)) : t1;
  for (DataType t : {t1, t2, a.softmax_type, c.in(1).dtype()})
    if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16 && t != DataType::kFloat64)
      return Err(StatusCode::kInvalidArgument, "{}: Q, K, V and softmax_precision must be float types, not {}",
                 n.Where(), DataTypeName(t));
  if (c.in(1).dtype() != t1 || (c.input(4) && (c.in(4).dtype() != t1 || c.in(5).dtype() != t2)))
    return Err(StatusCode::kInvalidArgument, "{}: K and past_key must be {} like Q, past_value {} like V", n.Where(),
               DataTypeName(t1), DataTypeName(t2));

  // present_key / present_value (past ++ new, [B, Hkv, T, d]): the outputs when wanted, else scratch.
  Tensor key_scratch, value_scratch;
  const std::vector<int64_t> k_shape = {d.batch, d.kv_heads, d.total, d.head};
  const std::vector<int64_t> v_shape = {d.batch, d.kv_heads, d.total, d.v_head};
  Tensor& keys = WantOutput(c, 1) ? AllocOutput(c, 1, t1, k_shape) : (key_scratch = Tensor(t1, k_shape));
  Tensor& values = WantOutput(c, 2) ? AllocOutput(c, 2, t2, v_shape) : (value_scratch = Tensor(t2, v_shape));
  ConcatKv(c.input(4), c.in(1), d, d.head, keys);
  ConcatKv(c.input(5), c.in(2), d, d.v_head, values);
  const bool wide = t1 == DataType::kFloat64 || t2 == DataType::kFloat64 || a.softmax_type == DataType::kFloat64;
  return wide ? Run<double>(c, d, a, keys, values) : Run<float>(c, d, a, keys, values);
}

}  // namespace

void RegisterRotaryEmbeddingKernels(KernelRegistry& r);  // rotary_embedding.cpp

void RegisterTransformerKernels(KernelRegistry& r) {
  r.Add("Attention", OnnxAttentionKernel);
  RegisterRotaryEmbeddingKernels(r);
}

}  // namespace kiln::cpu
