// CPU kernel of kiln.Attention (created by recognize-attention; see shape/fused_ops.h; with kiln_q_* its output is
// written quantized, times the scale's float reciprocal: ops/quantized_ops.h):
//   Y[b, i, :] = sum_j softmax_j(scale * Q[b,i,:] . K[b,j,:]  (+ mask[b,i,j])  (keep[b,i,j] ? . : fill)) V[b,j,:]
// One query row at a time (threaded over batch x rows): the scores row lives in a small scratch buffer and is
// never written to memory. Accumulation in float; float16/bfloat16 inputs are converted to float first.
// K^T inputs (kiln_k_transposed = 1) are transposed once so every dot product reads contiguous rows.
// kiln_{q,k,v,out}_layout = "BSHD" (axes -3 and -2 of that tensor swapped: [B, S, H, D] for the logical
// [B, H, S, D]) is applied by copying the input to the logical layout first / the output back last.
#include <cmath>
#include <cstring>

#include "backends/cpu/common.h"
#include "backends/cpu/families.h"
#include "backends/cpu/gemm_blas.h"
#include "backends/cpu/quantized_copy.h"
#include "ops/fused_ops.h"

namespace kiln::cpu {
namespace {

// Float view of a float32/float16/bfloat16 tensor (no copy for float32).
const float* AsFloat(const Tensor& t, std::vector<float>& store) {
  if (t.dtype() == DataType::kFloat32) return t.data<float>();
  store = ToFloatBuffer(t);
  return store.data();
}

// Per output batch: the element offset of each operand's matrix (its leading dims broadcast to `batch`).
std::vector<int64_t> BatchOffsets(const std::vector<int64_t>& shape, size_t trailing, const std::vector<int64_t>& batch,
                                  int64_t matrix) {
  std::vector<int64_t> lead(shape.begin(), shape.end() - static_cast<std::ptrdiff_t>(trailing));
  const int64_t nb = NumElements(batch);
  std::vector<int64_t> off(nb, 0);
  if (batch.empty()) return off;
  BroadcastIterator it(batch, {BroadcastStrides(lead, batch)});
  for (int64_t b = 0; b < nb; ++b, it.Next()) off[b] = it.offset(0) * matrix;
  return off;
}

// A mask broadcast to the scores [batch..., Sq, Sk]: per-batch base offset and the row/column strides.
struct MaskView {
  std::vector<int64_t> base;
  int64_t row = 0, col = 0;
};
MaskView ViewMask(const Tensor& m, const std::vector<int64_t>& batch, int64_t sq, int64_t sk) {
  std::vector<int64_t> scores = batch;
  scores.push_back(sq);
  scores.push_back(sk);
  const auto st = BroadcastStrides(m.shape(), scores);
  MaskView v;
  const size_t nbd = batch.size();
  v.row = st[nbd];
  v.col = st[nbd + 1];
  const int64_t nb = NumElements(batch);
  v.base.assign(nb, 0);
  std::vector<int64_t> idx(nbd, 0);
  for (int64_t b = 0; b < nb; ++b) {
    int64_t off = 0;
    for (size_t d = 0; d < nbd; ++d) off += idx[d] * st[d];
    v.base[b] = off;
    for (size_t d = nbd; d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return v;
}

// Whether the layout attribute `name` is BSHD (else BHSD, the default). BS3HD (Q, K or V packed, see
// shape/fused_ops.h) is BSHD once UnpackSlot has taken the operand out.
Result<bool> IsBshd(const Node& n, const char* name) {
  KILN_ASSIGN_OR_RETURN(const fused::AttnLayout l, fused::ReadAttentionLayout(n, name));
  return l != fused::AttnLayout::kBHSD;
}

// Input `slot` (0 = Q, 1 = K, 2 = V) as the kernel reads it: a BS3HD input [.., S, 3, H, D] gives its part
// `slot` as a BSHD tensor [.., S, H, D] (copied into *buf); others are returned as they are.
Result<const Tensor*> UnpackSlot(const Node& n, const Tensor& x, int slot, Tensor* buf) {
  KILN_ASSIGN_OR_RETURN(const fused::AttnLayout l, fused::ReadAttentionLayout(n, fused::kAttentionInputLayouts[slot]));
  if (l != fused::AttnLayout::kBS3HD) return &x;
  if (x.rank() < 4 || x.dim(-3) != 3)
    return Err(StatusCode::kInvalidArgument, "{}: a BS3HD input must be [.., S, 3, H, D], not {}", n.Where(),
               x.Describe());
  std::vector<int64_t> shape = x.shape();
  shape.erase(shape.end() - 3);
  const int64_t part = x.dim(-2) * x.dim(-1), rows = x.numel() / std::max<int64_t>(1, 3 * part);
  const size_t es = DataTypeSize(x.dtype());
  *buf = Tensor(x.dtype(), shape);
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(buf->raw());
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * part * es, src + (r * 3 + slot) * part * es, part * es);
  return buf;
}

// `shape` with axes -3 and -2 swapped (rank >= 3).
std::vector<int64_t> SwapHeadAxes(std::vector<int64_t> shape) {
  std::swap(shape[shape.size() - 3], shape[shape.size() - 2]);
  return shape;
}

// Copies the float buffer `x` of `shape` to `shape` with axes -3 and -2 swapped.
std::vector<float> SwapHeadAxes(const float* x, const std::vector<int64_t>& shape) {
  const size_t r = shape.size();
  const int64_t a = shape[r - 3], b = shape[r - 2], inner = shape[r - 1];
  const int64_t outer = NumElements(shape) / std::max<int64_t>(1, a * b * inner);
  std::vector<float> y(static_cast<size_t>(NumElements(shape)));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        std::copy(x + ((o * a + i) * b + j) * inner, x + ((o * a + i) * b + j + 1) * inner,
                  y.data() + ((o * b + j) * a + i) * inner);
  return y;
}

Status AttentionKernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  if (ctx.num_inputs() < 3 || !ctx.input(0) || !ctx.input(1) || !ctx.input(2))
    return Err(StatusCode::kInvalidArgument, "{}: Attention needs Q, K and V", n.Where());
  Tensor packed[3];
  KILN_ASSIGN_OR_RETURN(const Tensor* qt, UnpackSlot(n, ctx.in(0), 0, &packed[0]));
  KILN_ASSIGN_OR_RETURN(const Tensor* kt_, UnpackSlot(n, ctx.in(1), 1, &packed[1]));
  KILN_ASSIGN_OR_RETURN(const Tensor* vt, UnpackSlot(n, ctx.in(2), 2, &packed[2]));
  const Tensor &q = *qt, &k = *kt_, &v = *vt;
  const Tensor* mask = ctx.input(3);
  const Tensor* keep = ctx.input(4);
  const bool kt = n.geti("kiln_k_transposed", 0) != 0;
  const float scale = n.getf("scale", 1.f);
  const float fill = n.getf("kiln_mask_fill", 0.f);
  const bool keep_true = n.geti("kiln_keep_if_true", 1) != 0;
  const bool where_first = n.geti("kiln_where_first", 0) != 0;
  const bool nan_to_zero = n.geti("kiln_nan_to_zero", 0) != 0;  // Where(IsNaN(P), 0, P) was absorbed
  if (q.rank() < 2 || k.rank() < 2 || v.rank() < 2)
    return Err(StatusCode::kInvalidArgument, "{}: Q, K and V must have rank >= 2", n.Where());
  KILN_ASSIGN_OR_RETURN(const bool q_bshd, IsBshd(n, fused::kAttentionInputLayouts[0]));
  KILN_ASSIGN_OR_RETURN(const bool k_bshd, IsBshd(n, fused::kAttentionInputLayouts[1]));
  KILN_ASSIGN_OR_RETURN(const bool v_bshd, IsBshd(n, fused::kAttentionInputLayouts[2]));
  KILN_ASSIGN_OR_RETURN(const bool out_bshd, IsBshd(n, fused::kAttentionOutputLayout));
  if ((q_bshd && q.rank() < 3) || (k_bshd && k.rank() < 3) || (v_bshd && v.rank() < 3))
    return Err(StatusCode::kInvalidArgument, "{}: a BSHD layout needs rank >= 3 (Q {}, K {}, V {})", n.Where(),
               q.Describe(), k.Describe(), v.Describe());
  // The logical shapes (BSHD inputs are copied to that layout below).
  const std::vector<int64_t> qsh = q_bshd ? SwapHeadAxes(q.shape()) : q.shape();
  const std::vector<int64_t> ksh = k_bshd ? SwapHeadAxes(k.shape()) : k.shape();
  const std::vector<int64_t> vsh = v_bshd ? SwapHeadAxes(v.shape()) : v.shape();
  const size_t qr = qsh.size(), kr = ksh.size(), vr = vsh.size();
  const int64_t sq = qsh[qr - 2], d = qsh[qr - 1];
  const int64_t sk = kt ? ksh[kr - 1] : ksh[kr - 2], dk = kt ? ksh[kr - 2] : ksh[kr - 1];
  const int64_t dv = vsh[vr - 1];
  if (dk != d || vsh[vr - 2] != sk)
    return Err(StatusCode::kInvalidArgument, "{}: Q {}, K {} and V {} do not line up", n.Where(), q.Describe(),
               k.Describe(), v.Describe());
  std::vector<int64_t> bq(qsh.begin(), qsh.end() - 2), bk(ksh.begin(), ksh.end() - 2),
      bv(vsh.begin(), vsh.end() - 2);
  KILN_ASSIGN_OR_RETURN(auto batch, BroadcastShape(n, bq, bk));
  KILN_ASSIGN_OR_RETURN(batch, BroadcastShape(n, batch, bv));
  std::vector<int64_t> out_shape = batch;  // logical
  out_shape.push_back(sq);
  out_shape.push_back(dv);
  if (out_bshd && out_shape.size() < 3)
    return Err(StatusCode::kInvalidArgument, "{}: kiln_out_layout = BSHD needs an output of rank >= 3, not {}",
               n.Where(), ShapeToString(out_shape));
  const std::vector<int64_t> y_shape = out_bshd ? SwapHeadAxes(out_shape) : out_shape;  // physical
  // kiln_q_* (plan/fold_quantized_casts.cpp): output 0 is Y as written in Q's type, quantized per tensor.
  const bool quantized = n.has_attr(quant_attrs::kQType);
  Tensor y_float;
  Tensor& y = quantized ? y_float : ctx.out(0);
  if (!y.defined() || y.shape() != y_shape || y.dtype() != q.dtype()) y = Tensor(q.dtype(), y_shape);
  if (y.numel() == 0) return quantized ? WriteQuantizedCopy(ctx, 0, y, true) : Status::Ok();
  for (const Tensor* m : {mask, keep}) {
    if (!m) continue;
    std::vector<int64_t> scores = batch;
    scores.push_back(sq);
    scores.push_back(sk);
    auto b = BroadcastShape(n, scores, m->shape());
    if (!b.ok() || *b != scores)
      return Err(StatusCode::kInvalidArgument, "{}: mask {} does not broadcast to the scores {}", n.Where(),
                 m->Describe(), ShapeToString(scores));
  }
  if (keep && keep->dtype() != DataType::kBool)
    return Err(StatusCode::kInvalidArgument, "{}: the keep mask must be bool, not {}", n.Where(),
               DataTypeName(keep->dtype()));

  std::vector<float> qs, ks, vs, ms;
  const float* qp = AsFloat(q, qs);
  const float* kp = AsFloat(k, ks);
  const float* vp = AsFloat(v, vs);
  const float* mp = mask ? AsFloat(*mask, ms) : nullptr;
  std::vector<float> q_log, k_log, v_log;  // BSHD inputs in the logical layout
  if (q_bshd) q_log = SwapHeadAxes(qp, q.shape()), qp = q_log.data();
  if (k_bshd) k_log = SwapHeadAxes(kp, k.shape()), kp = k_log.data();
  if (v_bshd) v_log = SwapHeadAxes(vp, v.shape()), vp = v_log.data();
  const int64_t kmats = k.numel() / std::max<int64_t>(1, sk * d);
  std::vector<float> k_rows;
  if (kt) {  // [.., d, Sk] -> [.., Sk, d]
    k_rows.resize(k.numel());
    for (int64_t m = 0; m < kmats; ++m)
      for (int64_t t = 0; t < d; ++t)
        for (int64_t j = 0; j < sk; ++j) k_rows[(m * sk + j) * d + t] = kp[(m * d + t) * sk + j];
    kp = k_rows.data();
  }
  const auto qoff = BatchOffsets(qsh, 2, batch, sq * d);
  const auto koff = BatchOffsets(ksh, 2, batch, sk * d);
  const auto voff = BatchOffsets(vsh, 2, batch, sk * dv);
  MaskView mv, kv;
  if (mask) mv = ViewMask(*mask, batch, sq, sk);
  if (keep) kv = ViewMask(*keep, batch, sq, sk);
  const uint8_t* keep_p = keep ? keep->data<uint8_t>() : nullptr;
  const int64_t nb = NumElements(batch);
  std::vector<float> ys;
  const bool direct = y.dtype() == DataType::kFloat32 && !out_bshd;
  if (!direct) ys.resize(y.numel());
  float* yp = direct ? y.data<float>() : ys.data();

  ParallelFor(nb * sq, [&](int64_t begin, int64_t end) {
    std::vector<float> s(sk), acc(dv);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / sq, i = r % sq;
      const float* qi = qp + qoff[b] + i * d;
      const float* kb = kp + koff[b];
      for (int64_t j = 0; j < sk; ++j) {
        const float* kj = kb + j * d;
        float dot = 0.f;
        for (int64_t t = 0; t < d; ++t) dot += qi[t] * kj[t];
        s[j] = dot * scale;
      }
      auto add = [&] {
        if (!mp) return;
        const float* m = mp + mv.base[b] + i * mv.row;
        for (int64_t j = 0; j < sk; ++j) s[j] += m[j * mv.col];
      };
      auto where = [&] {
        if (!keep_p) return;
        const uint8_t* c = keep_p + kv.base[b] + i * kv.row;
        for (int64_t j = 0; j < sk; ++j)
          if ((c[j * kv.col] != 0) != keep_true) s[j] = fill;
      };
      if (where_first) {
        where();
        add();
      } else {
        add();
        where();
      }
      float mx = -INFINITY;
      for (int64_t j = 0; j < sk; ++j) mx = std::max(mx, s[j]);
      float sum = 0.f;
      for (int64_t j = 0; j < sk; ++j) {
        s[j] = std::exp(s[j] - mx);
        sum += s[j];
      }
      const float inv = 1.f / sum;
      std::fill(acc.begin(), acc.end(), 0.f);
      const float* vb = vp + voff[b];
      for (int64_t j = 0; j < sk; ++j) {
        float p = s[j] * inv;
        if (nan_to_zero && std::isnan(p)) p = 0.f;
        const float* vj = vb + j * dv;
        for (int64_t t = 0; t < dv; ++t) acc[t] += p * vj[t];
      }
      std::copy(acc.begin(), acc.end(), yp + r * dv);
    }
  }, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, sk * (d + dv))));
  if (out_bshd) ys = SwapHeadAxes(ys.data(), out_shape);  // logical -> the BSHD output
  if (!direct) FromFloatBuffer(ys.data(), y);
  return quantized ? WriteQuantizedCopy(ctx, 0, y, true) : Status::Ok();
}

}  // namespace

void RegisterAttentionKernel(KernelRegistry& r) { r.Add("kiln.Attention", AttentionKernel); }

}  // namespace kiln::cpu
