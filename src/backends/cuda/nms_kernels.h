// Launcher of NonMaxSuppression (nms.cu). Plain C++ (no IR).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

struct NmsParams {
  int64_t batches = 0, num_boxes = 0, classes = 0;
  int64_t max_output_boxes_per_class = 0;  // >= 0
  float iou_threshold = 0.f;
  float score_threshold = 0.f;
  bool has_score_threshold = false;
  bool center_point_box = false;
};

// Largest batches * classes * num_boxes RunNms accepts (its sort indexes with int32).
constexpr int64_t kNmsMaxItems = (int64_t{1} << 31) - 1;

// Scratch bytes RunNms needs.
size_t NmsWorkspaceBytes(const NmsParams& p);

// NonMaxSuppression of boxes [batches, num_boxes, 4] and scores [batches, classes, num_boxes] (float32, float16 or
// bfloat16; dtypes as DTypeCode): per (batch, class) the boxes sorted by descending score (ties: lower index first)
// are kept greedily when their IoU with every kept box is <= iou_threshold (and, with a score threshold, when their
// score is above it), up to max_output_boxes_per_class. Writes the int64 triples (batch, class, box) to `out` in
// (batch, class, rank) order (out must hold batches * classes * min(max, num_boxes) * 3 elements), then
// SYNCHRONIZES the stream and sets *selected to the number of triples.
cudaError_t RunNms(const void* boxes, int boxes_dtype, const void* scores, int scores_dtype, const NmsParams& p,
                   void* workspace, size_t workspace_bytes, int64_t* out, int64_t* selected, cudaStream_t stream);

}  // namespace kiln::cuda
