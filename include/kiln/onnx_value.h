// kiln — a value of an ONNX graph as ONNX types it: a tensor, a sequence of tensors (ONNX's seq(tensor) types) or an
// empty optional (ONNX's optional types; an optional that holds a value is that tensor or sequence). Engines take
// and give tensors only; sequences and optionals run on the reference backend (kiln/debug_values.h) and flow inside
// graphs (Loop-carried sequences, If branches, SequenceMap).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

struct OnnxValue {
  enum class Kind : uint8_t { kTensor = 0, kSequence = 1, kNone = 2 };
  Kind kind = Kind::kTensor;
  Tensor tensor;                 // kTensor (undefined in a default-constructed value: nothing yet)
  std::vector<Tensor> sequence;  // kSequence: the elements in order (possibly none)

  static OnnxValue FromTensor(Tensor t) {
    OnnxValue v;
    v.tensor = std::move(t);
    return v;
  }
  static OnnxValue FromSequence(std::vector<Tensor> elements) {
    OnnxValue v;
    v.kind = Kind::kSequence;
    v.sequence = std::move(elements);
    return v;
  }
  static OnnxValue None() {
    OnnxValue v;
    v.kind = Kind::kNone;
    return v;
  }
  bool is_tensor() const { return kind == Kind::kTensor; }
  bool is_sequence() const { return kind == Kind::kSequence; }
  bool is_none() const { return kind == Kind::kNone; }
  // Set at all: a sequence, an empty optional, or a defined tensor.
  bool has_value() const { return kind != Kind::kTensor || tensor.defined(); }

  // "float32[2,3]", "seq(float32[4], float32[3])", "none".
  std::string Describe() const {
    if (kind == Kind::kNone) return "none";
    if (kind == Kind::kTensor) return tensor.defined() ? tensor.Describe() : "(unset)";
    std::string s = "seq(";
    for (size_t i = 0; i < sequence.size(); ++i) {
      if (i == 8) {
        s += ", ... " + std::to_string(sequence.size()) + " in all";
        break;
      }
      s += (i ? ", " : "") + sequence[i].Describe();
    }
    return s + ")";
  }
};

}  // namespace kiln
