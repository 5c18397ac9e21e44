// Sequences and optionals (Value::kind, TensorInfo::kind): what the shape functions, the importer and the backends
// share about them. A sequence value holds tensors of one element type (its dtype; its shape is the elements' shape
// where they all share one); an optional holds a tensor or a sequence, or nothing. sequence.cpp registers the ops
// that make and read them (Sequence*, SplitToSequence, ConcatFromSequence, SequenceMap, Optional*); Identity, If and
// Loop pass them through.
#pragma once

#include <utility>

#include "ir/graph.h"
#include "kiln/status.h"
#include "ops/infer_context.h"

namespace kiln {

inline bool IsOptionalKind(ValueKind k) { return k == ValueKind::kOptionalTensor || k == ValueKind::kOptionalSequence; }
// A sequence, or an optional that holds one.
inline bool HoldsSequence(ValueKind k) { return k == ValueKind::kSequence || k == ValueKind::kOptionalSequence; }
// What an optional holds (kTensor or kSequence); other kinds are themselves.
inline ValueKind HeldKind(ValueKind k) {
  return k == ValueKind::kOptionalTensor ? ValueKind::kTensor
         : k == ValueKind::kOptionalSequence ? ValueKind::kSequence : k;
}
// The optional of a tensor or sequence kind (optionals are themselves).
inline ValueKind OptionalOf(ValueKind k) {
  return k == ValueKind::kTensor ? ValueKind::kOptionalTensor
         : k == ValueKind::kSequence ? ValueKind::kOptionalSequence : k;
}
// Whether a value declared `declared` may hold one of kind `actual` (an optional takes what it holds).
inline bool KindAccepts(ValueKind declared, ValueKind actual) {
  return declared == actual || (IsOptionalKind(declared) && HeldKind(declared) == HeldKind(actual));
}
// "tensor", "sequence", "optional tensor", "optional sequence"; AValueKind: with "a" / "an" before it.
const char* ValueKindName(ValueKind k);
const char* AValueKind(ValueKind k);

// Whether a node's op reads sequences or optionals (the ops of sequence.cpp, Identity, If, Loop, Scan's captured
// values); InferNode refuses them as inputs of any other op, naming the node.
bool TakesNonTensorInputs(const Node& n);

// Optional's `type` attribute (an ONNX TypeProto) as the importer stores it: ints {ValueKind of the element (kTensor or
// kSequence), DataType of the tensors}.
Attribute TypeAttribute(ValueKind element, DataType dtype);
// Reads it back; an error names the node and the attribute.
Result<std::pair<ValueKind, DataType>> ReadTypeAttribute(const Node& n, const char* attr);

}  // namespace kiln
