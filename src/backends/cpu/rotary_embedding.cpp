// CPU kernel of ONNX's RotaryEmbedding (opset 23; shape checks in ops/transformer.cpp). X is [B, H, S, head] or
// [B, S, H * head] (num_heads); the first rot = rotary_embedding_dim (0: head) features of each head are rotated
// in rot / 2 pairs, the rest copied. Pair k is (x[k], x[k + rot / 2]), or (x[2k], x[2k + 1]) when interleaved; with
// c = cos_cache, s = sin_cache at row position_ids[b, t] ([max_pos, rot / 2]), or at [b, t] without position_ids
// ([B, S, rot / 2]; a cache or position_ids dim of 1 broadcasts):
//   x1' = c x1 - s x2,   x2' = s x1 + c x2
// computed in float (double for double inputs).
#include <algorithm>
#include <vector>

#include "backends/cpu/common.h"
#include "backends/cpu/families.h"
#include "backends/cpu/tensor_util.h"

namespace kiln::cpu {
namespace {

Status RotaryEmbeddingKernel(KernelContext& c) {
  const Node& n = c.node;
  if (c.num_inputs() < 3 || !c.input(0) || !c.input(1) || !c.input(2))
    return Err(StatusCode::kInvalidArgument, "{}: RotaryEmbedding needs X, cos_cache and sin_cache", n.Where());
  const Tensor &x = c.in(0), &cos = c.in(1), &sin = c.in(2);
  const Tensor* pos = c.input(3);
  const bool interleaved = n.geti("interleaved", 0) != 0;
  const int64_t num_heads = n.geti("num_heads", 0);
  if (x.rank() != 3 && x.rank() != 4)
    return Err(StatusCode::kInvalidArgument, "{}: X {} must be 3-D or 4-D", n.Where(), x.Describe());
  const bool three = x.rank() == 3;
  if (three && (num_heads <= 0 || x.dim(2) % num_heads != 0))
    return Err(StatusCode::kInvalidArgument, "{}: 3-D X {} needs num_heads (> 0) dividing its hidden size, not {}",
               n.Where(), x.Describe(), num_heads);
  const int64_t batch = x.dim(0), heads = three ? num_heads : x.dim(1), seq = three ? x.dim(1) : x.dim(2);
  const int64_t head = three ? x.dim(2) / num_heads : x.dim(3);
  const int64_t rot = n.geti("rotary_embedding_dim", 0) == 0 ? head : n.geti("rotary_embedding_dim", 0);
  if (rot < 0 || rot % 2 != 0 || rot > head)
    return Err(StatusCode::kInvalidArgument, "{}: the rotary dimension {} must be even and at most the head size {}",
               n.Where(), rot, head);
  const int64_t half = rot / 2;
  if (cos.dtype() != x.dtype() || sin.dtype() != x.dtype() || cos.shape() != sin.shape() ||
      cos.rank() != (pos ? 2 : 3) || cos.dim(-1) != half)
    return Err(StatusCode::kInvalidArgument, "{}: cos_cache {} and sin_cache {} must be X's type and {} [.., {}]",
               n.Where(), cos.Describe(), sin.Describe(), pos ? "[max_position + 1," : "[batch, seq,", half);
  // The cache row of (b, t): its element offset; strides 0 where a dim of 1 broadcasts.
  int64_t row_b = 0, row_t = 0;
  std::vector<int64_t> ids;
  if (pos) {
    if (pos->dtype() != DataType::kInt64 || pos->rank() != 2 || (pos->dim(0) != batch && pos->dim(0) != 1) ||
        (pos->dim(1) != seq && pos->dim(1) != 1))
      return Err(StatusCode::kInvalidArgument, "{}: position_ids {} must be int64 [{}, {}]", n.Where(), pos->Describe(),
                 batch, seq);
    ids.assign(pos->data<int64_t>(), pos->data<int64_t>() + pos->numel());
    for (int64_t id : ids)
      if (id < 0 || id >= cos.dim(0))
        return Err(StatusCode::kInvalidArgument, "{}: position id {} is outside the caches' {} rows", n.Where(), id,
                   cos.dim(0));
    row_b = pos->dim(0) == 1 ? 0 : pos->dim(1);
    row_t = pos->dim(1) == 1 ? 0 : 1;
  } else {
    if ((cos.dim(0) != batch && cos.dim(0) != 1) || (cos.dim(1) != seq && cos.dim(1) != 1))
      return Err(StatusCode::kInvalidArgument, "{}: cos_cache {} must be [{}, {}, {}] without position_ids", n.Where(),
                 cos.Describe(), batch, seq, half);
    row_b = cos.dim(0) == 1 ? 0 : cos.dim(1) * half;
    row_t = cos.dim(1) == 1 ? 0 : half;
  }
  Tensor& y = AllocOutput(c, 0, x.dtype(), x.shape());
  if (y.numel() == 0) return Status::Ok();
  // Element strides of X's (b, h, t) rows.
  const int64_t sb = three ? seq * heads * head : heads * seq * head;
  const int64_t sh = three ? head : seq * head, st = three ? heads * head : head;
  return DispatchFloat(x.dtype(), n, [&]<typename T>() {
    const T *xp = x.data<T>(), *cp = cos.data<T>(), *sp = sin.data<T>();
    T* yp = y.data<T>();
    ParallelFor(
        batch * heads * seq,
        [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            const int64_t b = r / (heads * seq), h = (r / seq) % heads, t = r % seq;
            const int64_t cache = pos ? ids[b * row_b + t * row_t] * half : b * row_b + t * row_t;
            const int64_t base = b * sb + h * sh + t * st;
            const T* xi = xp + base;
            T* yi = yp + base;
            for (int64_t k = 0; k < half; ++k) {
              const int64_t i1 = interleaved ? 2 * k : k, i2 = interleaved ? 2 * k + 1 : k + half;
              const ComputeT<T> x1 = Load(xi, i1), x2 = Load(xi, i2);
              const ComputeT<T> cv = Load(cp, cache + k), sv = Load(sp, cache + k);
              Store(yi, i1, cv * x1 - sv * x2);
              Store(yi, i2, sv * x1 + cv * x2);
            }
            for (int64_t k = rot; k < head; ++k) Store(yi, k, Load(xi, k));
          }
        },
        std::max<int64_t>(1, 4096 / std::max<int64_t>(1, head)));
  });
}

}  // namespace

void RegisterRotaryEmbeddingKernels(KernelRegistry& r) { r.Add("RotaryEmbedding", RotaryEmbeddingKernel); }

}  // namespace kiln::cpu
