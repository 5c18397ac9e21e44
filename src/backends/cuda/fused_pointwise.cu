// kiln.FusedPointwise: a chain of elementwise ops run in one launch. Per output element, a thread loads each
// operand once through its broadcast offsets (no index arithmetic when every operand is shaped like the output
// or is a single element), runs the program's steps in float32 over a small slot file, and stores the last
// step's result. The program travels by value as a kernel argument (constant bank), so one launch needs no
// device memory besides the tensors.
#include "backends/cuda/pointwise_device.cuh"

namespace kiln::cuda {
namespace {

struct InputPtrs {
  const void* p[kPwMaxOperands];
};

constexpr int kSlots = kPwMaxOperands + kPwMaxSteps;

// K: operands rounded up to 2, 4 or 8 (unused ones have zero strides and are never read).
template <typename T, typename I, int K>
__global__ void FusedPointwiseKernel(const PwProgramArgs prog, const InputPtrs in, T* __restrict__ y,
                                     const PwBroadcast bc) {
  const int num_in = bc.num_operands;
  const int last = kPwMaxOperands + prog.num_steps - 1;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bc.numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    I off[K];
    pw::Offsets<K, I>(bc, static_cast<I>(i), off);
    float slot[kSlots];
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (k < num_in) slot[k] = ToF32(static_cast<const T*>(in.p[k])[off[k]]);
    for (int s = 0; s < prog.num_steps; ++s) {
      const int op = prog.op[s];
      const float a = slot[prog.arg0[s]];
      float r;
      if (PwIsBinary(op)) r = pw::FloatBinary(op, a, slot[prog.arg1[s]]);
      else r = pw::FloatUnary(op, a, prog.alpha[s], prog.beta[s]);
      slot[kPwMaxOperands + s] = r;
    }
    y[i] = FromF32<T>(slot[last]);
  }
}

template <typename T, typename I>
void LaunchFor(const PwProgramArgs& prog, const InputPtrs& in, T* y, const PwBroadcast& bc, cudaStream_t stream) {
  const unsigned grid = GridFor(bc.numel, pw::kBlock);
  if (bc.num_operands <= 2) FusedPointwiseKernel<T, I, 2><<<grid, pw::kBlock, 0, stream>>>(prog, in, y, bc);
  else if (bc.num_operands <= 4) FusedPointwiseKernel<T, I, 4><<<grid, pw::kBlock, 0, stream>>>(prog, in, y, bc);
  else FusedPointwiseKernel<T, I, 8><<<grid, pw::kBlock, 0, stream>>>(prog, in, y, bc);
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
  const bool ok = pw::DispatchLowFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (pw::Fits32(bc)) LaunchFor<T, uint32_t>(prog, in, static_cast<T*>(y), bc, stream);
    else LaunchFor<T, int64_t>(prog, in, static_cast<T*>(y), bc, stream);
  });
  return pw::LaunchResult(ok);
}

}  // namespace kiln::cuda
