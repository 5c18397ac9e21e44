// CPU kernel of kiln.Attention (created by recognize-attention; see shape/fused_ops.h):
//   Y[b, i, :] = sum_j softmax_j(scale * Q[b,i,:] . K[b,j,:]  (+ mask[b,i,j])  (keep[b,i,j] ? . : fill)) V[b,j,:]
// One query row at a time (threaded over batch x rows): the scores row lives in a small scratch buffer and is
// never written to memory. Accumulation in float; float16/bfloat16 inputs are converted to float first.
// K^T inputs (kiln_k_transposed = 1) are transposed once so every dot product reads contiguous rows.
#include <cmath>

#include "backends/cpu/common.h"
#include "backends/cpu/families.h"
#include "backends/cpu/gemm_blas.h"

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

Status AttentionKernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  if (ctx.num_inputs() < 3 || !ctx.input(0) || !ctx.input(1) || !ctx.input(2))
    return Err(StatusCode::kInvalidArgument, "{}: Attention needs Q, K and V", n.Where());
  const Tensor &q = ctx.in(0), &k = ctx.in(1), &v = ctx.in(2);
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
  const int64_t sq = q.dim(-2), d = q.dim(-1);
  const int64_t sk = kt ? k.dim(-1) : k.dim(-2), dk = kt ? k.dim(-2) : k.dim(-1);
  const int64_t dv = v.dim(-1);
  if (dk != d || v.dim(-2) != sk)
    return Err(StatusCode::kInvalidArgument, "{}: Q {}, K {} and V {} do not line up", n.Where(), q.Describe(),
               k.Describe(), v.Describe());
  std::vector<int64_t> bq(q.shape().begin(), q.shape().end() - 2), bk(k.shape().begin(), k.shape().end() - 2),
      bv(v.shape().begin(), v.shape().end() - 2);
  KILN_ASSIGN_OR_RETURN(auto batch, BroadcastShape(n, bq, bk));
  KILN_ASSIGN_OR_RETURN(batch, BroadcastShape(n, batch, bv));
  std::vector<int64_t> out_shape = batch;
  out_shape.push_back(sq);
  out_shape.push_back(dv);
  Tensor& y = ctx.out(0);
  if (!y.defined() || y.shape() != out_shape || y.dtype() != q.dtype()) y = Tensor(q.dtype(), out_shape);
  if (y.numel() == 0) return Status::Ok();
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
  const int64_t kmats = k.numel() / std::max<int64_t>(1, sk * d);
  std::vector<float> k_rows;
  if (kt) {  // [.., d, Sk] -> [.., Sk, d]
    k_rows.resize(k.numel());
    for (int64_t m = 0; m < kmats; ++m)
      for (int64_t t = 0; t < d; ++t)
        for (int64_t j = 0; j < sk; ++j) k_rows[(m * sk + j) * d + t] = kp[(m * d + t) * sk + j];
    kp = k_rows.data();
  }
  const auto qoff = BatchOffsets(q.shape(), 2, batch, sq * d);
  const auto koff = BatchOffsets(k.shape(), 2, batch, sk * d);
  const auto voff = BatchOffsets(v.shape(), 2, batch, sk * dv);
  MaskView mv, kv;
  if (mask) mv = ViewMask(*mask, batch, sq, sk);
  if (keep) kv = ViewMask(*keep, batch, sq, sk);
  const uint8_t* keep_p = keep ? keep->data<uint8_t>() : nullptr;
  const int64_t nb = NumElements(batch);
  std::vector<float> ys;
  const bool direct = y.dtype() == DataType::kFloat32;
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
  if (!direct) FromFloatBuffer(ys.data(), y);
  return Status::Ok();
}

}  // namespace

void RegisterAttentionKernel(KernelRegistry& r) { r.Add("Attention", AttentionKernel); }

}  // namespace kiln::cpu
