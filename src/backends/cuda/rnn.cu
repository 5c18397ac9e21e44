// RNN, GRU and LSTM kernels (see rnn_kernels.h), the CPU reference's recurrence (backends/cpu/rnn.cpp) in float32
// (double for float64 data):
//  1. the input projection of every step and direction in one GEMM: xw[row, d*G*H + g*H + j] = W[d, g*H + j, :] .
//     X[row, :] (rows of X in its own layout; biases are added per step);
//  2. per step, one warp per (direction, batch entry, hidden unit) takes the dot products of the unit's R rows with
//     the previous hidden state (ping-pong buffers) and applies the gates; GRU without linear_before_reset needs
//     r . h before its hidden gate's product, so it runs two such kernels per step (z and r . h, then the rest);
//     an entry whose sequence has ended keeps its state;
//  3. Y_h and Y_c from the final states (zeros for an entry of length 0). Y is cleared first where sequence_lens is
//     given (steps past an entry's length stay 0).
// The states stay in float32 (double) from step to step; only Y, Y_h and Y_c are rounded to the data type.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "backends/cuda/rnn_kernels.h"
#include "backends/cuda/simple_gemm.cuh"
#include "backends/cuda/type_dispatch.cuh"

namespace kiln::cuda {
namespace {

template <typename T>
using RnnAcc = std::conditional_t<std::is_same_v<T, double>, double, float>;

__device__ __forceinline__ float Tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double Tanh(double x) { return tanh(x); }
__device__ __forceinline__ float Exp(float x) { return expf(x); }
__device__ __forceinline__ double Exp(double x) { return exp(x); }
__device__ __forceinline__ float Log1p(float x) { return log1pf(x); }
__device__ __forceinline__ double Log1p(double x) { return log1p(x); }
__device__ __forceinline__ float Abs(float x) { return fabsf(x); }
__device__ __forceinline__ double Abs(double x) { return fabs(x); }

// ops/rnn.h's RnnActivation, comparisons written as std::min / std::max evaluate them (NaN passes through).
template <typename A>
__device__ __forceinline__ A Activate(const RnnAct& f, A x) {
  const A alpha = static_cast<A>(f.alpha), beta = static_cast<A>(f.beta);
  switch (f.code) {
    case kRnnActRelu: return x > A(0) ? x : A(0);
    case kRnnActTanh: return Tanh(x);
    case kRnnActSigmoid: return A(1) / (A(1) + Exp(-x));
    case kRnnActAffine: return alpha * x + beta;
    case kRnnActLeakyRelu: return x >= A(0) ? x : alpha * x;
    case kRnnActThresholdedRelu: return x >= alpha ? x : A(0);
    case kRnnActScaledTanh: return alpha * Tanh(beta * x);
    case kRnnActHardSigmoid: {
      const A v = alpha * x + beta;
      const A lo = v < A(0) ? A(0) : v;
      return A(1) < lo ? A(1) : lo;
    }
    case kRnnActElu: return x >= A(0) ? x : alpha * (Exp(x) - A(1));
    case kRnnActSoftsign: return x / (A(1) + Abs(x));
    case kRnnActSoftplus: return x > A(0) ? x + Log1p(Exp(-x)) : Log1p(Exp(x));
    default: return x;
  }
}

template <typename A>
__device__ __forceinline__ A WarpSum(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// What every kernel of one run shares.
template <typename A>
struct RnnParams {
  int cell = 0;
  int64_t seq = 0, batch = 0, hidden = 0, dirs = 1, gh = 0;  // gh: gates * hidden (rows of W and R per direction)
  bool batch_first = false, reverse = false, lbr = false, input_forget = false;
  A clip = 0;  // infinity: none
  RnnAct acts[2][3];
  const void* lens = nullptr;
  int lens_dtype = 0;

  __device__ __forceinline__ int64_t Len(int64_t b) const {
    if (!lens) return seq;
    const int64_t v = lens_dtype == kI32 ? static_cast<int64_t>(static_cast<const int32_t*>(lens)[b])
                                         : static_cast<const int64_t*>(lens)[b];
    return v < 0 ? 0 : (v > seq ? seq : v);
  }
  __device__ __forceinline__ int64_t State(int64_t d, int64_t b, int64_t j) const {
    return (batch_first ? b * dirs + d : d * batch + b) * hidden + j;
  }
  __device__ __forceinline__ int64_t YIndex(int64_t t, int64_t d, int64_t b, int64_t j) const {
    return (batch_first ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * hidden + j;
  }
  __device__ __forceinline__ int64_t XRow(int64_t t, int64_t b) const { return batch_first ? b * seq + t : t * batch + b; }
  __device__ __forceinline__ A Clip(A v) const {
    const A lo = v < -clip ? -clip : v;
    return clip < lo ? clip : lo;
  }
};

template <typename A>
struct XwStore {
  A* xw;
  int64_t ld;
  __device__ __forceinline__ void operator()(int64_t, int64_t m, int64_t n, A v) const { xw[m * ld + n] = v; }
};

// States of every (direction, batch entry) in the kernels' order [dirs, batch, hidden] from the initial states.
template <typename T, typename A>
__global__ void RnnInitKernel(RnnParams<A> p, const T* __restrict__ h0, const T* __restrict__ c0, A* __restrict__ h,
                              A* __restrict__ c) {
  const int64_t total = p.dirs * p.batch * p.hidden;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % p.hidden, db = i / p.hidden, b = db % p.batch, d = db / p.batch;
    const int64_t s = p.State(d, b, j);
    h[i] = h0 ? LoadAcc<A>(h0, s) : A(0);
    if (c) c[i] = c0 ? LoadAcc<A>(c0, s) : A(0);
  }
}

enum StepPhase : int {
  kStepFull = 0,     // RNN, LSTM, GRU with linear_before_reset: the whole step
  kStepGruGates = 1,  // GRU without linear_before_reset: z, and r . h
  kStepGruHidden = 2,  // then R_h (r . h), the hidden gate and the new state
};

// Step k of every (direction, batch entry): one warp per hidden unit j.
template <typename T, typename A, int kPhase>
__global__ void RnnStepKernel(RnnParams<A> p, int64_t k, const T* __restrict__ r, const T* __restrict__ bias,
                              const T* __restrict__ peep, const A* __restrict__ xw, const A* __restrict__ h_in,
                              A* __restrict__ h_out, A* __restrict__ c, A* __restrict__ gru_z,
                              A* __restrict__ gru_rh, T* __restrict__ y) {
  const int lane = threadIdx.x & 31;
  const int64_t H = p.hidden, gh = p.gh;
  const int64_t total = p.dirs * p.batch * H;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; w < total; w += warps) {
    const int64_t j = w % H, db = w / H, b = db % p.batch, d = db / p.batch;
    const int64_t len = p.Len(b);
    if (k >= len) {  // the entry's sequence has ended: its state stays
      if (kPhase != kStepGruGates && lane == 0) h_out[w] = h_in[w];
      continue;
    }
    const int64_t t = p.reverse || d == 1 ? len - 1 - k : k;
    const A* xr = xw + p.XRow(t, b) * (p.dirs * gh) + d * gh;
    // The gates whose R rows multiply a vector here, and the vector: h, or GRU's r . h.
    const int g0 = kPhase == kStepGruHidden ? 2 : 0;
    const int ng = kPhase == kStepGruHidden ? 1 : kPhase == kStepGruGates ? 2 : (p.cell == kRnnCellLstm ? 4 : p.cell == kRnnCellGru ? 3 : 1);
    const A* v = (kPhase == kStepGruHidden ? gru_rh : h_in) + db * H;
    const T* rrow = r + (d * gh + j) * H;  // gate g's row: rrow + g * H * H
    A dot[4] = {A(0), A(0), A(0), A(0)};
    for (int64_t q = lane; q < H; q += 32) {
      const A vq = v[q];
#pragma unroll
      for (int g = 0; g < 4; ++g)
        if (g < ng) dot[g] += LoadAcc<A>(rrow + (g0 + g) * H * H, q) * vq;
    }
#pragma unroll
    for (int g = 0; g < 4; ++g) dot[g] = WarpSum(dot[g]);
    if (lane != 0) continue;
    // xg(g) = W_g x + Wb_g; rg(i) = R_g v + Rb_g for the i-th gate multiplied here (g = g0 + i).
    auto wb = [&](int g) { return bias ? LoadAcc<A>(bias, d * 2 * gh + g * H + j) : A(0); };
    auto rb = [&](int g) { return bias ? LoadAcc<A>(bias, d * 2 * gh + gh + g * H + j) : A(0); };
    auto xg = [&](int g) { return xr[g * H + j] + wb(g); };
    const RnnAct& f = p.acts[d][0];
    const A h_prev = h_in[w];
    A h;
    if (kPhase == kStepGruGates) {
      const A z = Activate(f, p.Clip(xg(0) + (dot[0] + rb(0))));
      const A rr = Activate(f, p.Clip(xg(1) + (dot[1] + rb(1))));
      gru_z[w] = z;
      gru_rh[w] = rr * h_prev;
      continue;
    } else if (kPhase == kStepGruHidden) {
      const A n = Activate(p.acts[d][1], p.Clip(xg(2) + (dot[0] + rb(2))));
      const A z = gru_z[w];
      h = (A(1) - z) * n + z * h_prev;
    } else if (p.cell == kRnnCellRnn) {
      h = Activate(f, p.Clip(xg(0) + (dot[0] + rb(0))));
    } else if (p.cell == kRnnCellGru) {  // linear_before_reset
      const A z = Activate(f, p.Clip(xg(0) + (dot[0] + rb(0))));
      const A rr = Activate(f, p.Clip(xg(1) + (dot[1] + rb(1))));
      const A n = Activate(p.acts[d][1], p.Clip(xg(2) + rr * (dot[2] + rb(2))));
      h = (A(1) - z) * n + z * h_prev;
    } else {  // LSTM: gates i, o, f, c; peepholes i, o, f
      const A c_prev = c[w];
      const A pi = peep ? LoadAcc<A>(peep, d * 3 * H + j) : A(0);
      const A po = peep ? LoadAcc<A>(peep, d * 3 * H + H + j) : A(0);
      const A pf = peep ? LoadAcc<A>(peep, d * 3 * H + 2 * H + j) : A(0);
      const A i = Activate(f, p.Clip(xg(0) + (dot[0] + rb(0)) + pi * c_prev));
      const A fg = p.input_forget ? A(1) - i : Activate(f, p.Clip(xg(2) + (dot[2] + rb(2)) + pf * c_prev));
      const A cand = Activate(p.acts[d][1], p.Clip(xg(3) + (dot[3] + rb(3))));
      const A cn = fg * c_prev + i * cand;
      const A o = Activate(f, p.Clip(xg(1) + (dot[1] + rb(1)) + po * cn));
      c[w] = cn;
      h = o * Activate(p.acts[d][2], cn);
    }
    h_out[w] = h;
    if (y) y[p.YIndex(t, d, b, j)] = StoreFromAcc<T>(h);
  }
}

template <typename T, typename A>
__global__ void RnnFinalKernel(RnnParams<A> p, const A* __restrict__ h, const A* __restrict__ c, T* __restrict__ yh,
                               T* __restrict__ yc) {
  const int64_t total = p.dirs * p.batch * p.hidden;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % p.hidden, db = i / p.hidden, b = db % p.batch, d = db / p.batch;
    const bool ran = p.Len(b) > 0;
    const int64_t s = p.State(d, b, j);
    if (yh) yh[s] = StoreFromAcc<T>(ran ? h[i] : A(0));
    if (yc) yc[s] = StoreFromAcc<T>(ran ? c[i] : A(0));
  }
}

constexpr size_t AlignUp(size_t v) { return (v + 255) / 256 * 256; }

int Gates(int cell) { return cell == kRnnCellLstm ? 4 : cell == kRnnCellGru ? 3 : 1; }

// Workspace pieces in elements of the accumulator: xw, the two h buffers, c (LSTM), z and r . h (GRU).
struct RnnScratch {
  size_t xw = 0, state = 0;
  bool c = false, gru = false;
};

RnnScratch ScratchOf(const RnnArgs& a) {
  RnnScratch s;
  s.xw = static_cast<size_t>(a.seq * a.batch * a.dirs * Gates(a.cell) * a.hidden);
  s.state = static_cast<size_t>(a.dirs * a.batch * a.hidden);
  s.c = a.cell == kRnnCellLstm;
  s.gru = a.cell == kRnnCellGru && !a.linear_before_reset;
  return s;
}

size_t ScratchBytes(const RnnScratch& s, size_t elem) {
  const size_t state = AlignUp(s.state * elem);
  return AlignUp(s.xw * elem) + 2 * state + (s.c ? state : 0) + (s.gru ? 2 * state : 0);
}

bool ValidArgs(const RnnArgs& a) {
  return a.seq >= 0 && a.batch >= 0 && a.input >= 0 && a.hidden >= 0 && (a.dirs == 1 || a.dirs == 2) &&
         (a.cell == kRnnCellRnn || a.cell == kRnnCellGru || a.cell == kRnnCellLstm) &&
         (!a.lens || a.lens_dtype == kI32 || a.lens_dtype == kI64);
}

template <typename T>
cudaError_t RunRnn(const RnnArgs& a, void* workspace, cudaStream_t stream) {
  using A = RnnAcc<T>;
  const RnnScratch s = ScratchOf(a);
  char* ws = static_cast<char*>(workspace);
  A* xw = reinterpret_cast<A*>(ws);
  ws += AlignUp(s.xw * sizeof(A));
  const size_t state_bytes = AlignUp(s.state * sizeof(A));
  A* hbuf[2] = {reinterpret_cast<A*>(ws), reinterpret_cast<A*>(ws + state_bytes)};
  ws += 2 * state_bytes;
  A* c = nullptr;
  if (s.c) {
    c = reinterpret_cast<A*>(ws);
    ws += state_bytes;
  }
  A *gru_z = nullptr, *gru_rh = nullptr;
  if (s.gru) {
    gru_z = reinterpret_cast<A*>(ws);
    gru_rh = reinterpret_cast<A*>(ws + state_bytes);
  }

  RnnParams<A> p;
  p.cell = a.cell;
  p.seq = a.seq;
  p.batch = a.batch;
  p.hidden = a.hidden;
  p.dirs = a.dirs;
  p.gh = Gates(a.cell) * a.hidden;
  p.batch_first = a.batch_first;
  p.reverse = a.reverse;
  p.lbr = a.linear_before_reset;
  p.input_forget = a.input_forget;
  p.clip = a.clip > 0 && a.clip < std::numeric_limits<double>::infinity() ? static_cast<A>(a.clip)
                                                                          : std::numeric_limits<A>::infinity();
  for (int d = 0; d < 2; ++d)
    for (int f = 0; f < 3; ++f) p.acts[d][f] = a.acts[d][f];
  p.lens = a.lens;
  p.lens_dtype = a.lens_dtype;

  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const T* r = static_cast<const T*>(a.r);
  const T* bias = static_cast<const T*>(a.b);
  const T* peep = static_cast<const T*>(a.p);
  T* y = static_cast<T*>(a.y);
  const int64_t rows = a.seq * a.batch;
  if (y && a.lens && rows > 0) {
    const cudaError_t e = cudaMemsetAsync(y, 0, static_cast<size_t>(rows * a.dirs * a.hidden) * sizeof(T), stream);
    if (e != cudaSuccess) return e;
  }
  if (s.state == 0) return cudaGetLastError();

  RnnInitKernel<T, A><<<GridFor(static_cast<int64_t>(s.state)), 256, 0, stream>>>(
      p, static_cast<const T*>(a.h0), static_cast<const T*>(a.c0), hbuf[0], c);
  int cur = 0;
  if (rows > 0) {
    SimpleGemmGeom g;
    g.m = rows;
    g.n = a.dirs * p.gh;
    g.k = a.input;
    g.a_m = a.input;
    g.a_k = 1;
    g.b_k = 1;
    g.b_n = a.input;
    SimpleGemmKernel<A, T, T, XwStore<A>><<<SimpleGemmBlocks(g), kSimpleGemmThreads, 0, stream>>>(
        x, w, g, XwStore<A>{xw, g.n});
    const unsigned blocks = GridFor(static_cast<int64_t>(s.state) * 32);
    for (int64_t k = 0; k < a.seq; ++k) {
      const A* h_in = hbuf[cur];
      A* h_out = hbuf[1 - cur];
      if (s.gru) {
        RnnStepKernel<T, A, kStepGruGates><<<blocks, 256, 0, stream>>>(p, k, r, bias, peep, xw, h_in, h_out, c, gru_z,
                                                                       gru_rh, y);
        RnnStepKernel<T, A, kStepGruHidden><<<blocks, 256, 0, stream>>>(p, k, r, bias, peep, xw, h_in, h_out, c,
                                                                        gru_z, gru_rh, y);
      } else {
        RnnStepKernel<T, A, kStepFull><<<blocks, 256, 0, stream>>>(p, k, r, bias, peep, xw, h_in, h_out, c, gru_z,
                                                                   gru_rh, y);
      }
      cur = 1 - cur;
    }
  }
  if (a.yh || a.yc)
    RnnFinalKernel<T, A><<<GridFor(static_cast<int64_t>(s.state)), 256, 0, stream>>>(
        p, hbuf[cur], c, static_cast<T*>(a.yh), s.c ? static_cast<T*>(a.yc) : nullptr);
  return cudaGetLastError();
}

size_t AccSize(int dtype) { return dtype == kF64 ? sizeof(double) : sizeof(float); }

}  // namespace

size_t RnnWorkspaceBytes(const RnnArgs& a) {
  if (!ValidArgs(a)) return 0;
  return ScratchBytes(ScratchOf(a), AccSize(a.dtype));
}

cudaError_t LaunchRnn(const RnnArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (!ValidArgs(a)) return cudaErrorInvalidValue;
  if (workspace_bytes < RnnWorkspaceBytes(a) || (RnnWorkspaceBytes(a) > 0 && !workspace)) return cudaErrorInvalidValue;
  cudaError_t err = cudaErrorInvalidValue;
  DispatchFloat(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    err = RunRnn<T>(a, workspace, stream);
  });
  return err;
}

}  // namespace kiln::cuda
