// NonMaxSuppression (see nms_kernels.h): scores are sorted per (batch, class) segment with CUB's stable segmented
// radix sort (descending; -0 is canonicalized to +0 so that equal scores keep their box order), then one block per
// segment walks its sorted boxes and keeps a box when no kept box suppresses it (the block tests the kept list in
// parallel). One block finally packs the per-segment selections into (batch, class, box) triples.
#include <cub/device/device_segmented_radix_sort.cuh>

#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/nms_kernels.h"

namespace kiln::cuda {
namespace {

struct NmsBox {
  float x0, y0, x1, y1, area;
};

constexpr size_t AlignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Where each scratch array lies in the workspace.
struct NmsLayout {
  size_t keys_in, keys_out, vals_in, vals_out, offsets, boxes, kept, counts, starts, total, temp, temp_bytes, bytes;
};

size_t SortTempBytes(int items, int segments) {
  size_t bytes = 0;
  if (cub::DeviceSegmentedRadixSort::SortPairsDescending(nullptr, bytes, static_cast<const float*>(nullptr),
                                                         static_cast<float*>(nullptr), static_cast<const int*>(nullptr),
                                                         static_cast<int*>(nullptr), items, segments,
                                                         static_cast<const int*>(nullptr),
                                                         static_cast<const int*>(nullptr)) != cudaSuccess)
    return 0;
  return bytes;
}

int64_t Cap(const NmsParams& p) {
  return p.max_output_boxes_per_class < p.num_boxes ? p.max_output_boxes_per_class : p.num_boxes;
}

NmsLayout Layout(const NmsParams& p) {
  const size_t segments = static_cast<size_t>(p.batches * p.classes);
  const size_t items = segments * static_cast<size_t>(p.num_boxes);
  NmsLayout l{};
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t r = at;
    at = AlignUp(at + bytes, 256);
    return r;
  };
  l.keys_in = take(items * sizeof(float));
  l.keys_out = take(items * sizeof(float));
  l.vals_in = take(items * sizeof(int));
  l.vals_out = take(items * sizeof(int));
  l.offsets = take((segments + 1) * sizeof(int));
  l.boxes = take(static_cast<size_t>(p.batches * p.num_boxes) * sizeof(NmsBox));
  l.kept = take(segments * static_cast<size_t>(Cap(p)) * sizeof(int));
  l.counts = take(segments * sizeof(int));
  l.starts = take(segments * sizeof(int64_t));
  l.total = take(sizeof(int64_t));
  l.temp_bytes = SortTempBytes(static_cast<int>(items), static_cast<int>(segments));
  l.temp = take(l.temp_bytes);
  l.bytes = at;
  return l;
}

template <typename T>
__global__ void PrepareScoresKernel(const T* __restrict__ scores, float* __restrict__ keys, int* __restrict__ vals,
                                    int64_t items, int64_t num_boxes) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < items;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = ToF32(scores[t]);
    if (s == 0.f) s = 0.f;  // -0 -> +0: the radix sort orders them, the reference treats them as equal
    keys[t] = s;
    vals[t] = static_cast<int>(t % num_boxes);
  }
}

__global__ void SegmentOffsetsKernel(int* offsets, int64_t segments, int64_t num_boxes) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t <= segments;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x)
    offsets[t] = static_cast<int>(t * num_boxes);
}

// The reference's box decoding (float arithmetic).
template <typename T>
__global__ void DecodeBoxesKernel(const T* __restrict__ boxes, NmsBox* __restrict__ out, int64_t count, bool center) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < count;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float b0 = ToF32(boxes[t * 4]), b1 = ToF32(boxes[t * 4 + 1]);
    const float b2 = ToF32(boxes[t * 4 + 2]), b3 = ToF32(boxes[t * 4 + 3]);
    NmsBox r;
    if (center) {
      r.x0 = __fsub_rn(b0, b2 / 2);
      r.x1 = __fadd_rn(b0, b2 / 2);
      r.y0 = __fsub_rn(b1, b3 / 2);
      r.y1 = __fadd_rn(b1, b3 / 2);
    } else {  // [y1, x1, y2, x2], any diagonal
      r.y0 = fminf(b0, b2);
      r.y1 = fmaxf(b0, b2);
      r.x0 = fminf(b1, b3);
      r.x1 = fmaxf(b1, b3);
    }
    r.area = __fmul_rn(__fsub_rn(r.x1, r.x0), __fsub_rn(r.y1, r.y0));
    out[t] = r;
  }
}

// True when the IoU of a and b exceeds the threshold (the reference's float arithmetic, no contractions).
__device__ __forceinline__ bool Suppresses(const NmsBox& a, const NmsBox& b, float iou_threshold) {
  const float ix0 = fmaxf(a.x0, b.x0), ix1 = fminf(a.x1, b.x1);
  if (ix1 <= ix0) return false;
  const float iy0 = fmaxf(a.y0, b.y0), iy1 = fminf(a.y1, b.y1);
  if (iy1 <= iy0) return false;
  const float inter = __fmul_rn(__fsub_rn(ix1, ix0), __fsub_rn(iy1, iy0));
  const float uni = __fsub_rn(__fadd_rn(a.area, b.area), inter);
  if (a.area <= 0 || b.area <= 0 || uni <= 0) return false;
  return __fdiv_rn(inter, uni) > iou_threshold;
}

// One block per (batch, class) segment.
__global__ void NmsSelectKernel(const float* __restrict__ sorted_scores, const int* __restrict__ sorted_boxes,
                                const NmsBox* __restrict__ boxes, NmsParams p, int64_t cap, int* __restrict__ kept,
                                int* __restrict__ counts) {
  const int64_t s = blockIdx.x;
  const int64_t n = p.num_boxes;
  const float* sc = sorted_scores + s * n;
  const int* order = sorted_boxes + s * n;
  const NmsBox* bx = boxes + (s / p.classes) * n;
  int* kp = kept + s * cap;
  __shared__ int nkept;
  if (threadIdx.x == 0) nkept = 0;
  __syncthreads();
  for (int64_t q = 0; q < n; ++q) {
    if (nkept >= cap) break;
    const float score = sc[q];
    if (p.has_score_threshold) {
      if (isnan(score)) continue;              // NaN (sorted first) never passes the threshold
      if (!(score > p.score_threshold)) break;  // sorted: no later box passes either
    }
    const int i = order[q];
    const NmsBox cand = bx[i];
    int suppressed = 0;
    for (int k = threadIdx.x; k < nkept; k += blockDim.x)
      if (Suppresses(cand, bx[kp[k]], p.iou_threshold)) suppressed = 1;
    if (__syncthreads_or(suppressed)) continue;
    if (threadIdx.x == 0) {
      kp[nkept] = i;
      nkept = nkept + 1;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) counts[s] = nkept;
}

// One block: prefix sum of the segment counts (thread 0), then the triples.
__global__ void NmsPackKernel(const int* __restrict__ counts, const int* __restrict__ kept, int64_t segments,
                              int64_t classes, int64_t cap, int64_t* __restrict__ starts, int64_t* __restrict__ total,
                              int64_t* __restrict__ out) {
  if (threadIdx.x == 0) {
    int64_t acc = 0;
    for (int64_t s = 0; s < segments; ++s) {
      starts[s] = acc;
      acc += counts[s];
    }
    *total = acc;
  }
  __syncthreads();
  for (int64_t s = threadIdx.x; s < segments; s += blockDim.x) {
    const int64_t b = s / classes, c = s % classes;
    for (int k = 0; k < counts[s]; ++k) {
      int64_t* o = out + (starts[s] + k) * 3;
      o[0] = b;
      o[1] = c;
      o[2] = kept[s * cap + k];
    }
  }
}

template <typename F>
bool DispatchFloat(int dtype, F&& f) {
  return KILN_DISPATCH_FLOAT(dtype, T, f(static_cast<const T*>(nullptr)));
}

}  // namespace

size_t NmsWorkspaceBytes(const NmsParams& p) {
  const int64_t items = p.batches * p.classes * p.num_boxes;
  if (items <= 0 || items > kNmsMaxItems || p.max_output_boxes_per_class <= 0) return 0;
  return Layout(p).bytes;
}

cudaError_t RunNms(const void* boxes, int boxes_dtype, const void* scores, int scores_dtype, const NmsParams& p,
                   void* workspace, size_t workspace_bytes, int64_t* out, int64_t* selected, cudaStream_t stream) {
  *selected = 0;
  const int64_t segments = p.batches * p.classes;
  const int64_t items = segments * p.num_boxes;
  if (items <= 0 || p.max_output_boxes_per_class <= 0) return cudaSuccess;
  if (items > kNmsMaxItems) return cudaErrorInvalidValue;
  const NmsLayout l = Layout(p);
  if (workspace_bytes < l.bytes || l.temp_bytes == 0) return cudaErrorInvalidValue;
  char* ws = static_cast<char*>(workspace);
  float* keys_in = reinterpret_cast<float*>(ws + l.keys_in);
  float* keys_out = reinterpret_cast<float*>(ws + l.keys_out);
  int* vals_in = reinterpret_cast<int*>(ws + l.vals_in);
  int* vals_out = reinterpret_cast<int*>(ws + l.vals_out);
  int* offsets = reinterpret_cast<int*>(ws + l.offsets);
  NmsBox* bx = reinterpret_cast<NmsBox*>(ws + l.boxes);
  int* kept = reinterpret_cast<int*>(ws + l.kept);
  int* counts = reinterpret_cast<int*>(ws + l.counts);
  int64_t* starts = reinterpret_cast<int64_t*>(ws + l.starts);
  int64_t* total = reinterpret_cast<int64_t*>(ws + l.total);

  bool ok = DispatchFloat(scores_dtype, [&](auto tag) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(tag)>>;
    PrepareScoresKernel<<<GridFor(items), 256, 0, stream>>>(static_cast<const T*>(scores), keys_in, vals_in, items,
                                                            p.num_boxes);
  });
  ok = ok && DispatchFloat(boxes_dtype, [&](auto tag) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(tag)>>;
    const int64_t n = p.batches * p.num_boxes;
    DecodeBoxesKernel<<<GridFor(n), 256, 0, stream>>>(static_cast<const T*>(boxes), bx, n, p.center_point_box);
  });
  if (!ok) return cudaErrorInvalidValue;
  SegmentOffsetsKernel<<<GridFor(segments + 1), 256, 0, stream>>>(offsets, segments, p.num_boxes);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  size_t temp_bytes = l.temp_bytes;
  e = cub::DeviceSegmentedRadixSort::SortPairsDescending(ws + l.temp, temp_bytes, keys_in, keys_out, vals_in, vals_out,
                                                         static_cast<int>(items), static_cast<int>(segments), offsets,
                                                         offsets + 1, 0, 32, stream);
  if (e != cudaSuccess) return e;
  const int64_t cap = Cap(p);
  NmsSelectKernel<<<static_cast<unsigned>(segments), 256, 0, stream>>>(keys_out, vals_out, bx, p, cap, kept, counts);
  NmsPackKernel<<<1, 256, 0, stream>>>(counts, kept, segments, p.classes, cap, starts, total, out);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  int64_t n = 0;
  e = cudaMemcpyAsync(&n, total, sizeof(int64_t), cudaMemcpyDeviceToHost, stream);
  if (e != cudaSuccess) return e;
  e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return e;
  *selected = n;
  return cudaSuccess;
}

}  // namespace kiln::cuda
