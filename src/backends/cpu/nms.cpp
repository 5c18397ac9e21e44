// CPU reference kernel for NonMaxSuppression: per batch and class, greedily keeps the highest-scoring
// boxes whose IoU with every kept box is <= iou_threshold, among boxes scoring above score_threshold
// (when given), up to max_output_boxes_per_class. Output: int64 [N, 3] of (batch, class, box), allocated here.
#include <algorithm>
#include <numeric>

#include "backends/cpu/common.h"
#include "backends/cpu/index_util.h"

namespace kiln::cpu {
namespace {

using idx::EnsureOutput;

struct Box {
  float x0, y0, x1, y1;  // x0 <= x1, y0 <= y1
  float area;
};

Box MakeBox(const float* b, bool center) {
  Box r;
  if (center) {
    r.x0 = b[0] - b[2] / 2;
    r.x1 = b[0] + b[2] / 2;
    r.y0 = b[1] - b[3] / 2;
    r.y1 = b[1] + b[3] / 2;
  } else {  // [y1, x1, y2, x2], any diagonal
    r.y0 = std::min(b[0], b[2]);
    r.y1 = std::max(b[0], b[2]);
    r.x0 = std::min(b[1], b[3]);
    r.x1 = std::max(b[1], b[3]);
  }
  r.area = (r.x1 - r.x0) * (r.y1 - r.y0);
  return r;
}

// True when the IoU of a and b exceeds the threshold.
bool Suppresses(const Box& a, const Box& b, float iou_threshold) {
  const float ix0 = std::max(a.x0, b.x0), ix1 = std::min(a.x1, b.x1);
  if (ix1 <= ix0) return false;
  const float iy0 = std::max(a.y0, b.y0), iy1 = std::min(a.y1, b.y1);
  if (iy1 <= iy0) return false;
  const float inter = (ix1 - ix0) * (iy1 - iy0);
  const float uni = a.area + b.area - inter;
  if (a.area <= 0 || b.area <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

Status NonMaxSuppression(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& boxes_t = ctx.in(0);
  const Tensor& scores_t = ctx.in(1);
  if (boxes_t.rank() != 3 || boxes_t.dim(2) != 4 || scores_t.rank() != 3 || boxes_t.dim(0) != scores_t.dim(0) ||
      boxes_t.dim(1) != scores_t.dim(2))
    return Err(StatusCode::kInvalidArgument,
               "{}: boxes must be [batch, boxes, 4] and scores [batch, classes, boxes], got {} and {}", n.Where(),
               boxes_t.Describe(), scores_t.Describe());
  const bool center = n.geti("center_point_box", 0) == 1;
  auto scalar = [&](size_t i) -> const Tensor* {
    const Tensor* t = ctx.input(i);
    return t && t->numel() > 0 ? t : nullptr;
  };
  int64_t max_out = 0;
  float iou_thr = 0.f, score_thr = 0.f;
  if (const Tensor* t = scalar(2)) max_out = std::max<int64_t>(0, t->GetAsInt(0));
  if (const Tensor* t = scalar(3)) iou_thr = static_cast<float>(t->GetAsDouble(0));
  const bool has_score_thr = scalar(4) != nullptr;
  if (has_score_thr) score_thr = static_cast<float>(scalar(4)->GetAsDouble(0));
  if (iou_thr < 0.f || iou_thr > 1.f)
    return Err(StatusCode::kInvalidArgument, "{}: iou_threshold {} must be in [0, 1]", n.Where(), iou_thr);

  const std::vector<float> boxes = boxes_t.ToFloatVector();
  const std::vector<float> scores = scores_t.ToFloatVector();
  const int64_t batches = boxes_t.dim(0), nboxes = boxes_t.dim(1), classes = scores_t.dim(1);
  std::vector<int64_t> selected;  // triples
  std::vector<Box> bx(nboxes);
  std::vector<int64_t> order;
  std::vector<int64_t> kept;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < nboxes; ++i) bx[i] = MakeBox(&boxes[(b * nboxes + i) * 4], center);
    for (int64_t c = 0; c < classes; ++c) {
      const float* sc = &scores[(b * classes + c) * nboxes];
      order.clear();
      for (int64_t i = 0; i < nboxes; ++i)
        if (!has_score_thr || sc[i] > score_thr) order.push_back(i);
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return sc[x] > sc[y]; });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool keep = true;
        for (int64_t k : kept)
          if (Suppresses(bx[i], bx[k], iou_thr)) {
            keep = false;
            break;
          }
        if (!keep) continue;
        kept.push_back(i);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  const int64_t count = static_cast<int64_t>(selected.size() / 3);
  KILN_ASSIGN_OR_RETURN(Tensor* out_ptr, EnsureOutput(ctx, 0, DataType::kInt64, {count, 3}));
  Tensor& out = *out_ptr;
  std::copy(selected.begin(), selected.end(), out.data<int64_t>());
  return Status::Ok();
}

}  // namespace

void RegisterNmsKernels(KernelRegistry& r) { r.Add("NonMaxSuppression", NonMaxSuppression); }

}  // namespace kiln::cpu
