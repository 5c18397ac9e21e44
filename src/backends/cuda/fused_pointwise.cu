// kiln.FusedPointwise, tactic "interp": a chain of elementwise ops run in one launch by one precompiled kernel
// that interprets the program (the "nvrtc" tactic compiles each program instead: fused_pointwise_codegen.cpp).
// Each thread takes E output elements (E*blockDim apart, so loads stay coalesced), loads every operand once
// through its broadcast offsets (no index arithmetic when every operand is shaped like the output or is a
// single element), runs the program step by step over its E elements in float32, and stores the last step's
// result. Operands and step results live in shared memory, one column per thread ([slot][e][thread]: no bank
// conflicts, no local memory, runtime slot indices are free), so the op dispatch of a step is paid once per E
// elements. The program travels by value as a kernel argument (constant bank). Each step's formula is the functor
// of ops/pointwise_formulas.h that EvalUnary/EvalBinary (ops/pointwise_op.h) switch to.
#include "backends/cuda/pointwise_device.cuh"

namespace kiln::cuda {
namespace {

struct InputPtrs {
  const void* p[kPwMaxOperands];
};

// K: operands rounded up to 2, 4 or 8 (unused ones have zero strides and are never read). E: elements per
// thread; dynamic shared memory holds (num_operands + num_steps) * E * blockDim floats.
template <typename T, typename I, int K>
__global__ void FusedPointwiseKernel(const PwProgramArgs prog, const InputPtrs in, T* __restrict__ y,
                                     const PwBroadcast bc, const int E) {
  extern __shared__ float smem[];
  const int num_in = bc.num_operands;
  const int B = blockDim.x;
  const int last = num_in + prog.num_steps - 1;
  float* col = smem + threadIdx.x;  // slot j, element e at col[(j * E + e) * B]
  const int64_t tile = static_cast<int64_t>(B) * E;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * tile; base < bc.numel;
       base += static_cast<int64_t>(gridDim.x) * tile) {
    for (int e = 0; e < E; ++e) {
      const int64_t i = base + static_cast<int64_t>(e) * B + threadIdx.x;
      if (i >= bc.numel) break;
      I off[K];
      pw::Offsets<K, I>(bc, static_cast<I>(i), off);
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (k < num_in) col[(k * E + e) * B] = ToF32(static_cast<const T*>(in.p[k])[off[k]]);
    }
    // Elements past the end compute on stale values and are never stored.
    for (int s = 0; s < prog.num_steps; ++s) {
      const PwOp op = static_cast<PwOp>(prog.op[s]);
      const int a0 = prog.arg0[s] < kPwMaxOperands ? prog.arg0[s] : prog.arg0[s] - kPwMaxOperands + num_in;
      const int a1 = prog.arg1[s] < kPwMaxOperands ? prog.arg1[s] : prog.arg1[s] - kPwMaxOperands + num_in;
      const float* x0 = col + a0 * E * B;
      const float* x1 = col + a1 * E * B;
      float* r = col + (num_in + s) * E * B;
      if (PwIsBinary(op)) {
        for (int e = 0; e < E; ++e) r[e * B] = EvalBinary(op, x0[e * B], x1[e * B]);
      } else {
        const float alpha = prog.alpha[s], beta = prog.beta[s];
        for (int e = 0; e < E; ++e) r[e * B] = EvalUnary(op, x0[e * B], alpha, beta);
      }
    }
    for (int e = 0; e < E; ++e) {
      const int64_t i = base + static_cast<int64_t>(e) * B + threadIdx.x;
      if (i >= bc.numel) break;
      y[i] = FromF32<T>(col[(last * E + e) * B]);
    }
  }
}

template <typename T, typename I>
void LaunchFor(const PwProgramArgs& prog, const InputPtrs& in, T* y, const PwBroadcast& bc, cudaStream_t stream) {
  // Elements per thread and block size so that the slot file fits 48 KiB of shared memory.
  const int slots = bc.num_operands + prog.num_steps;
  int block = pw::kBlock, e = 4;
  while (e > 1 && static_cast<size_t>(slots) * e * block * sizeof(float) > 48 * 1024) e /= 2;
  while (block > 32 && static_cast<size_t>(slots) * e * block * sizeof(float) > 48 * 1024) block /= 2;
  const size_t shmem = static_cast<size_t>(slots) * e * block * sizeof(float);
  const unsigned grid = GridFor((bc.numel + e - 1) / e, block);
  if (bc.num_operands <= 2) FusedPointwiseKernel<T, I, 2><<<grid, block, shmem, stream>>>(prog, in, y, bc, e);
  else if (bc.num_operands <= 4) FusedPointwiseKernel<T, I, 4><<<grid, block, shmem, stream>>>(prog, in, y, bc, e);
  else FusedPointwiseKernel<T, I, 8><<<grid, block, shmem, stream>>>(prog, in, y, bc, e);
}

}  // namespace

cudaError_t LaunchFusedPointwise(int dtype, const PwProgramArgs& prog, const void* const* inputs, void* y,
                                 const PwBroadcast& bc, cudaStream_t stream) {
  if (bc.numel <= 0) return cudaSuccess;
  if (bc.num_operands < 1 || bc.num_operands > kPwMaxOperands || prog.num_steps < 1 ||
      prog.num_steps > kPwMaxSteps)
    return cudaErrorInvalidValue;
  for (int s = 0; s < prog.num_steps; ++s)  // every read slot must be an input or an earlier step
    for (int a : {prog.arg0[s], prog.arg1[s]})
      if (!(a < bc.num_operands || (a >= kPwMaxOperands && a < kPwMaxOperands + s))) return cudaErrorInvalidValue;
  InputPtrs in{};
  for (int k = 0; k < bc.num_operands; ++k) in.p[k] = inputs[k];
  const bool ok = DispatchLowFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (pw::Fits32(bc)) LaunchFor<T, uint32_t>(prog, in, static_cast<T*>(y), bc, stream);
    else LaunchFor<T, int64_t>(prog, in, static_cast<T*>(y), bc, stream);
  });
  return pw::LaunchResult(ok);
}

}  // namespace kiln::cuda
