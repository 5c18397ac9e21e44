// Launchers of ReverseSequence, MaxUnpool and Col2Im (rearrange.cu). Plain C++ (no IR). ReverseSequence and
// MaxUnpool move raw elements of elem_size bytes (1, 2, 4 or 8); Col2Im sums values of a numeric dtype (DTypeCode).
// Every launcher only enqueues work on `stream` and launches nothing for 0 elements.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

// ReverseSequence of x seen as [d0, d1, inner]: batch along dim 0 (batch_first) or 1, time along the other. In batch
// entry b, step t < len reads step len - 1 - t and later steps are copied, len = lens[b] (device int64[batch])
// clamped to [0, steps]: the layer checks lengths it knows on the host as the CPU reference does.
cudaError_t LaunchReverseSequence(const void* x, void* y, const int64_t* lens, int64_t d0, int64_t d1, int64_t inner,
                                  bool batch_first, int elem_size, cudaStream_t stream);

// MaxUnpool: the unpooled tensor (unpooled[0..rank), zeros) gets x[i] at flat index idx[i] (idx: device int32 or
// int64, DTypeCode idx_dtype); when several i name one index the last i wins, as in the CPU reference's loop, and
// indices outside [0, unpooled volume) are skipped. y (out[0..rank)) is a zero tensor holding the unpooled one at
// the start of each dim (cut where out is smaller). Scratch: MaxUnpoolWorkspaceBytes(unpooled volume).
size_t MaxUnpoolWorkspaceBytes(int64_t unpooled_volume);
cudaError_t LaunchMaxUnpool(const void* x, const void* idx, int idx_dtype, int64_t count, void* y, int rank,
                            const int64_t* unpooled, const int64_t* out, int elem_size, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream);

// Col2Im: x [n, c * prod(block), L] holds the columns of L block positions; each output element of y [n, c, image]
// sums, in double, the column values that land on it (block offsets in order, as the CPU reference adds them):
// position p (per dim, over `blocks`) with block offset k covers p * stride + k * dilation - pad_begin.
constexpr int kCol2ImMaxDims = 6;
struct Col2ImArgs {
  const void* x = nullptr;
  void* y = nullptr;
  int dtype = 0;
  int rank = 0;  // spatial dims, 1..kCol2ImMaxDims
  int64_t n = 0, c = 0;
  int64_t image[kCol2ImMaxDims] = {}, block[kCol2ImMaxDims] = {}, blocks[kCol2ImMaxDims] = {};
  int64_t stride[kCol2ImMaxDims] = {}, dilation[kCol2ImMaxDims] = {}, pad[kCol2ImMaxDims] = {};
};
// True where Col2Im supports the dtype (integers and float32/float16/bfloat16/float64).
bool Col2ImSupports(int dtype);
cudaError_t LaunchCol2Im(const Col2ImArgs& a, cudaStream_t stream);

}  // namespace kiln::cuda
