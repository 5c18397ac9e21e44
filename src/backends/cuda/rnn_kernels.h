// Launchers of the recurrent ops RNN, GRU and LSTM (rnn.cu). Plain C++ (no IR); dtypes are DTypeCode ints (float32,
// float16, bfloat16, float64: X, W, R, B, initial states, P and the outputs all of one type). Every launcher only
// enqueues work on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

enum RnnCellKind : int { kRnnCellRnn = 0, kRnnCellGru = 1, kRnnCellLstm = 2 };

// The activation functions of ops/rnn.h (the same formulas; alpha and beta as read there).
enum RnnActCode : int {
  kRnnActRelu = 0, kRnnActTanh, kRnnActSigmoid, kRnnActAffine, kRnnActLeakyRelu, kRnnActThresholdedRelu,
  kRnnActScaledTanh, kRnnActHardSigmoid, kRnnActElu, kRnnActSoftsign, kRnnActSoftplus,
};

struct RnnAct {
  int code = kRnnActTanh;
  double alpha = 0, beta = 0;
};

// One node's run. Layouts as ONNX: layout 0 X [seq, batch, input], Y [seq, dirs, batch, hidden], states
// [dirs, batch, hidden]; layout 1 X [batch, seq, input], Y [batch, seq, dirs, hidden], states [batch, dirs, hidden].
// W [dirs, gates*hidden, input], R [dirs, gates*hidden, hidden], B [dirs, 2*gates*hidden], P [dirs, 3*hidden].
struct RnnArgs {
  int dtype = 0;
  int cell = kRnnCellRnn;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool batch_first = false;       // layout 1
  bool reverse = false;           // direction "reverse" (a bidirectional node's direction 1 always runs backwards)
  bool linear_before_reset = false;  // GRU
  bool input_forget = false;         // LSTM
  double clip = 0;                // bound of every activation's input; <= 0 or inf: none
  RnnAct acts[2][3];              // [direction][f, g, h]
  const void* x = nullptr;
  const void* w = nullptr;
  const void* r = nullptr;
  const void* b = nullptr;        // nullptr: zeros
  const void* lens = nullptr;     // sequence_lens [batch] (int32 or int64, lens_dtype); nullptr: seq for every entry
  int lens_dtype = 0;
  const void* h0 = nullptr;       // nullptr: zeros
  const void* c0 = nullptr;       // LSTM; nullptr: zeros
  const void* p = nullptr;        // LSTM peepholes; nullptr: zeros
  void* y = nullptr;              // each output may be nullptr (not wanted)
  void* yh = nullptr;
  void* yc = nullptr;
};

// Scratch bytes LaunchRnn needs: the input projection of every step, and the states.
size_t RnnWorkspaceBytes(const RnnArgs& a);
// Lengths outside [0, seq] are clamped on the device (the layer checks them where they are known on the host).
cudaError_t LaunchRnn(const RnnArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace kiln::cuda
