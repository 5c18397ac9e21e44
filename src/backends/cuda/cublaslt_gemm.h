// A thin wrapper over cuBLASLt for the matmul family: row-major (batched) GEMMs with optional epilogues,
// heuristic algorithm lists, and algorithms as strings (the tactic names the builder stores in engines).
//
// Row-major trick: a row-major Y[M,N] = op(A)[M,K] op(B)[K,N] is the column-major Y^T[N,M] = op(B)^T op(A)^T, so
// cuBLASLt's "A" is our B and its "B" is our A, with the same transpose flags, and the bias (one value per column
// of row-major Y) runs along the rows of the column-major D, which is what cuBLASLt's bias epilogue expects.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/status.h"

typedef struct CUstream_st* cudaStream_t;
struct cublasLtContext;

namespace kiln::cuda {

// cuBLASLt epilogues used here. GELU is cuBLASLt's tanh approximation (matches kiln's GeluTanh only).
enum class LtEpilogue : int { kNone, kBias, kRelu, kReluBias, kGeluTanh, kGeluTanhBias };
bool LtEpilogueHasBias(LtEpilogue e);

// For each batch b < batch: Y_b[M,N] = epilogue(alpha * op(A_b) op(B_b) + beta * C_b (+ bias[N])), row-major.
struct LtGemmShape {
  int dtype = 0;  // DTypeCode kF32, kF16 or kBF16: A, B, C, Y and bias all in this type; scale/compute float.
                  // kI8: A and B int8, Y int32 (exact sums; compute and scale int32); no epilogue, C or batch
  bool tf32 = false;  // float32 may use TF32 tensor cores
  bool trans_a = false, trans_b = false;  // A stored [K,M] / B stored [N,K]
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0, stride_y = 0;  // elements between batches (0: shared)
  // C_b is an [M,N] row-major matrix read with beta: Y itself (in place), or a separate matrix of Y's layout
  // (cuBLASLt allows C != D with the same type, shape, batch and order; the residual of FusedGemm / FusedMatMul).
  // The bias epilogue still applies: Y = alpha A B + beta C + bias, activations after the whole sum.
  bool has_c = false;
  LtEpilogue epilogue = LtEpilogue::kNone;
  bool operator==(const LtGemmShape&) const = default;
};

struct LtGemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;  // used when shape.has_c
  void* y = nullptr;
  const void* bias = nullptr;  // used when the epilogue has a bias: N elements
  float alpha = 1.f, beta = 0.f;
};

using LtAlgo = std::array<uint64_t, 8>;  // the bytes of a cublasLtMatmulAlgo_t

// Alignment (bytes) tuned algorithms assume for a shape: 16 bytes, or less where the batch strides (in bytes) are
// less aligned. LtGemmRun falls back to a fresh heuristic query when the actual pointers are less aligned.
constexpr uint32_t kLtMaxTunedAlignment = 16;
uint32_t LtTunedAlignment(const LtGemmShape& shape);

// The cuBLASLt handle of the current device for host-only queries (heuristics, checks): one per device, created on
// first use there; thread-safe.
Result<cublasLtContext*> SharedLtHandle();

// Up to max_count algorithms the heuristic proposes for `shape` (best first) within `workspace_limit` bytes of
// workspace, assuming pointers and strides aligned to `alignment` bytes. Empty when none fits.
Result<std::vector<LtAlgo>> LtHeuristicAlgos(cublasLtContext* h, const LtGemmShape& shape, size_t workspace_limit,
                                             int max_count, uint32_t alignment);

// Checks that `algo` can run `shape` (pointers aligned to LtTunedAlignment(shape)); returns the workspace it needs.
Result<size_t> LtCheckAlgo(cublasLtContext* h, const LtGemmShape& shape, const LtAlgo& algo);

// Enqueues the GEMM on `stream`. Uses `tuned` (whose workspace need is tuned_workspace) when it is given, the
// pointers are aligned to LtTunedAlignment(shape) and the workspace suffices; otherwise asks the heuristic (a host-only
// query, no stream work) for the actual alignment and uses its first answer.
Status LtGemmRun(cublasLtContext* h, const LtGemmShape& shape, const LtGemmArgs& args, const LtAlgo* tuned,
                 size_t tuned_workspace, void* workspace, size_t workspace_bytes, cudaStream_t stream);

// "cublaslt:<128 hex digits>" <-> the algorithm.
std::string LtAlgoToTactic(const LtAlgo& algo);
std::optional<LtAlgo> LtAlgoFromTactic(std::string_view tactic);

}  // namespace kiln::cuda
