// The attributes of the recurrent ops RNN, GRU and LSTM (opsets 7, 14 and 22), read and checked in one place: the
// shape function (ops/rnn.cpp) and the CPU kernel (backends/cpu/rnn.cpp) both use ReadRnnAttrs.
//
// Activations: each direction has its own list of functions (RNN: f; GRU: f, g; LSTM: f, g, h), by default
// Tanh; Sigmoid, Tanh; Sigmoid, Tanh, Tanh. Names are matched without regard to case. activation_alpha and
// activation_beta are consumed in list order by the functions that take them (Affine, LeakyRelu, ThresholdedRelu,
// ScaledTanh, HardSigmoid, Elu take alpha; Affine, ScaledTanh, HardSigmoid take beta), as onnxruntime reads them;
// a function the lists run out for takes the default of the ONNX operator of its name (LeakyRelu 0.01,
// ThresholdedRelu 1, HardSigmoid 0.2 and 0.5, Elu 1, Affine 1 and 0, ScaledTanh 1 and 1). A bidirectional node
// may list one direction's functions only: the reverse direction then uses the same ones.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ir/graph.h"

namespace kiln {

enum class RnnOp { kRnn, kGru, kLstm };

enum class RnnActivationKind {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus,
};

struct RnnActivation {
  RnnActivationKind kind = RnnActivationKind::kTanh;
  double alpha = 0;
  double beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case RnnActivationKind::kRelu: return x > 0 ? x : 0.0;
      case RnnActivationKind::kTanh: return std::tanh(x);
      case RnnActivationKind::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
      case RnnActivationKind::kAffine: return alpha * x + beta;
      case RnnActivationKind::kLeakyRelu: return x >= 0 ? x : alpha * x;
      case RnnActivationKind::kThresholdedRelu: return x >= alpha ? x : 0.0;
      case RnnActivationKind::kScaledTanh: return alpha * std::tanh(beta * x);
      case RnnActivationKind::kHardSigmoid: return std::min(std::max(alpha * x + beta, 0.0), 1.0);
      case RnnActivationKind::kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1.0);
      case RnnActivationKind::kSoftsign: return x / (1.0 + std::fabs(x));
      case RnnActivationKind::kSoftplus: return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    }
    return x;
  }
};

struct RnnAttrs {
  RnnOp op = RnnOp::kRnn;
  int64_t gates = 1;                    // gate blocks per direction in W and R: 1 (RNN), 3 (GRU: z r h), 4 (LSTM: i o f c)
  int64_t activations_per_direction = 1;  // 1 (RNN), 2 (GRU), 3 (LSTM)
  int64_t num_directions = 1;           // 2 when bidirectional
  bool reverse = false;                 // direction "reverse"
  int64_t hidden_size = -1;             // -1 when the attribute is absent (R's last dim gives it)
  int64_t layout = 0;                   // 0: X [seq, batch, input]; 1: X [batch, seq, input] (opset 14)
  double clip = std::numeric_limits<double>::infinity();  // bound of every activation's input; inf: no clip
  bool linear_before_reset = false;     // GRU
  bool input_forget = false;            // LSTM: the forget gate is 1 - the input gate
  // activations[d * activations_per_direction + k]: function k (f, g, h) of direction d.
  std::vector<RnnActivation> activations;

  // Direction d runs backwards in time: the reverse direction, or the second one of a bidirectional node.
  bool backwards(int64_t d) const { return reverse || d == 1; }
  const RnnActivation& activation(int64_t d, int64_t k) const {
    return activations[static_cast<size_t>(d * activations_per_direction + k)];
  }
  double Clip(double v) const { return std::min(std::max(v, -clip), clip); }
  // Most inputs and outputs each op takes: RNN and GRU (X W R B sequence_lens initial_h; Y Y_h), LSTM (+ initial_c
  // P; + Y_c).
  size_t max_inputs() const { return op == RnnOp::kLstm ? 8 : 6; }
  size_t max_outputs() const { return op == RnnOp::kLstm ? 3 : 2; }
};

// Reads and checks the node's attributes (direction, hidden_size, layout, clip, activations and their alpha and
// beta, linear_before_reset, input_forget); errors name the node.
Result<RnnAttrs> ReadRnnAttrs(const Node& n);

}  // namespace kiln
