// CPU kernels of the sequence and optional ops (ops/sequence.cpp has their shapes): sequences are OnnxValues whose
// elements share buffers with the tensors they were made from (kernels never write their inputs; the engine
// executor copies out of its arena whatever a sequence or optional keeps).
#include <cstring>
#include <vector>

#include "backends/cpu/executor.h"
#include "backends/cpu/families.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/tensor_util.h"
#include "core/error.h"
#include "ops/control_flow.h"
#include "ops/sequence.h"

namespace kiln::cpu {
namespace {

Result<const std::vector<Tensor>*> SequenceInput(const KernelContext& c, size_t i) {
  const OnnxValue* v = c.value_input(i);
  if (!v || !v->is_sequence())
    return Err(StatusCode::kInvalidArgument, "{}: input {} must be a sequence, but it is {}", c.node.Where(), i,
               v ? v->Describe() : (c.input(i) ? c.in(i).Describe() : std::string("missing")));
  return &v->sequence;
}

// Position input i (a one-element int tensor) as an index into `size` elements, where valid positions are
// [-size, size + extra) (extra is 1 where a position may be one past the end, as SequenceInsert's).
Result<size_t> Position(const KernelContext& c, size_t i, size_t size, int64_t extra) {
  const Tensor& p = c.in(i);
  if (p.numel() != 1)
    return Err(StatusCode::kInvalidArgument, "{}: the position must hold one element, not {}", c.node.Where(),
               p.Describe());
  const int64_t n = static_cast<int64_t>(size);
  int64_t pos = p.GetAsInt(0);
  if (pos < -n || pos >= n + extra)
    return Err(StatusCode::kOutOfRange, "{}: position {} is outside [{}, {}] for a sequence of {} tensors",
               c.node.Where(), pos, -n, n + extra - 1, n);
  if (pos < 0) pos += n;
  return static_cast<size_t>(pos);
}

// Input i as a value: its sequence or optional, else its tensor (an omitted input is an empty optional).
OnnxValue InputValue(const KernelContext& c, size_t i) {
  if (const OnnxValue* v = c.value_input(i)) return *v;
  const Tensor* t = c.input(i);
  return t ? OnnxValue::FromTensor(*t) : OnnxValue::None();
}

void SetBool(KernelContext& c, size_t i, bool v) {
  Tensor& o = AllocOutput(c, i, DataType::kBool, {});
  o.data<bool>()[0] = v;
}

Status SequenceEmptyKernel(KernelContext& c) {
  c.value_out(0) = OnnxValue::FromSequence({});
  return Status::Ok();
}

Status SequenceConstructKernel(KernelContext& c) {
  std::vector<Tensor> elements;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.input(i)) return Err(StatusCode::kInvalidArgument, "{}: input {} is empty", c.node.Where(), i);
    elements.push_back(c.in(i));
  }
  c.value_out(0) = OnnxValue::FromSequence(std::move(elements));
  return Status::Ok();
}

Status SequenceAtKernel(KernelContext& c) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor>* s, SequenceInput(c, 0));
  KILN_ASSIGN_OR_RETURN(const size_t pos, Position(c, 1, s->size(), 0));
  c.out(0) = (*s)[pos];
  return Status::Ok();
}

Status SequenceInsertKernel(KernelContext& c) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor>* s, SequenceInput(c, 0));
  const Tensor& t = c.in(1);
  if (!s->empty() && t.dtype() != (*s)[0].dtype())
    return Err(StatusCode::kInvalidArgument, "{}: inserts a {} tensor into a sequence of {}", c.node.Where(),
               DataTypeName(t.dtype()), DataTypeName((*s)[0].dtype()));
  size_t pos = s->size();
  if (c.input(2)) {
    KILN_ASSIGN_OR_RETURN(pos, Position(c, 2, s->size(), 1));
  }
  std::vector<Tensor> out = *s;
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(pos), t);
  c.value_out(0) = OnnxValue::FromSequence(std::move(out));
  return Status::Ok();
}

Status SequenceEraseKernel(KernelContext& c) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor>* s, SequenceInput(c, 0));
  if (s->empty()) return Err(StatusCode::kOutOfRange, "{}: erases from an empty sequence", c.node.Where());
  size_t pos = s->size() - 1;
  if (c.input(1)) {
    KILN_ASSIGN_OR_RETURN(pos, Position(c, 1, s->size(), 0));
  }
  std::vector<Tensor> out = *s;
  out.erase(out.begin() + static_cast<std::ptrdiff_t>(pos));
  c.value_out(0) = OnnxValue::FromSequence(std::move(out));
  return Status::Ok();
}

Status SequenceLengthKernel(KernelContext& c) {
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor>* s, SequenceInput(c, 0));
  Tensor& o = AllocOutput(c, 0, DataType::kInt64, {});
  o.data<int64_t>()[0] = static_cast<int64_t>(s->size());
  return Status::Ok();
}

Status SplitToSequenceKernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.in(0);
  const auto ax = NormalizeAxis(n.geti("axis", 0), x.rank());
  if (!ax) return Err(StatusCode::kInvalidArgument, "{}: axis is outside rank {}", n.Where(), x.rank());
  const auto a = static_cast<size_t>(*ax);
  const int64_t len = x.shape()[a];
  std::vector<int64_t> sizes;
  const Tensor* split = c.input(1);
  if (!split) {
    sizes.assign(static_cast<size_t>(len), 1);
  } else if (split->rank() == 0) {  // pieces of this length, the last one shorter where it does not divide
    const int64_t piece = split->GetAsInt(0);
    if (piece <= 0) return Err(StatusCode::kInvalidArgument, "{}: split is {}; it must be positive", n.Where(), piece);
    sizes.assign(static_cast<size_t>(len / piece), piece);
    if (len % piece) sizes.push_back(len % piece);
  } else {
    sizes = split->ToInt64Vector();
    int64_t total = 0;
    for (int64_t v : sizes) {
      if (v < 0) return Err(StatusCode::kInvalidArgument, "{}: split holds the negative size {}", n.Where(), v);
      total += v;
    }
    if (total != len)
      return Err(StatusCode::kInvalidArgument, "{}: split sums to {} but axis {} has {} elements", n.Where(), total,
                 *ax, len);
  }
  const bool squeeze = !split && n.geti("keepdims", 1) == 0;
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < a; ++i) outer *= x.shape()[i];
  for (size_t i = a + 1; i < x.shape().size(); ++i) inner *= x.shape()[i];
  const size_t es = DataTypeSize(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw());
  std::vector<Tensor> pieces;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    std::vector<int64_t> shape = x.shape();
    shape[a] = s;
    Tensor p(x.dtype(), shape);
    auto* dst = static_cast<uint8_t*>(p.raw());
    const size_t run = static_cast<size_t>(s * inner) * es;
    if (run)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + static_cast<size_t>(o) * run, src + static_cast<size_t>((o * len + offset) * inner) * es, run);
    offset += s;
    if (squeeze) {
      shape.erase(shape.begin() + *ax);
      p = p.Reshaped(shape);
    }
    pieces.push_back(std::move(p));
  }
  c.value_out(0) = OnnxValue::FromSequence(std::move(pieces));
  return Status::Ok();
}

Status ConcatFromSequenceKernel(KernelContext& c) {
  const Node& n = c.node;
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor>* s, SequenceInput(c, 0));
  if (s->empty())
    return Err(StatusCode::kInvalidArgument, "{}: the sequence is empty; there is nothing to concatenate", n.Where());
  const bool stack = n.geti("new_axis", 0) == 1;
  const Tensor& first = (*s)[0];
  const int64_t rank = first.rank() + (stack ? 1 : 0);
  const auto ax = NormalizeAxis(n.geti("axis", 0), rank);
  if (!ax || rank == 0)
    return Err(StatusCode::kInvalidArgument, "{}: axis {} is outside rank {}", n.Where(), n.geti("axis", 0), rank);
  const auto a = static_cast<size_t>(*ax);
  // Each element as [outer, len, inner] with len its extent along the axis (1 where a new axis is stacked).
  int64_t outer = 1, inner = 1, total = 0;
  for (size_t i = 0; i < a; ++i) outer *= first.shape()[i];
  for (size_t i = stack ? a : a + 1; i < first.shape().size(); ++i) inner *= first.shape()[i];
  for (const Tensor& t : *s) {
    bool same = t.dtype() == first.dtype() && t.rank() == first.rank();
    for (size_t i = 0; same && i < t.shape().size(); ++i) same = t.shape()[i] == first.shape()[i] || (!stack && i == a);
    if (!same)
      return Err(StatusCode::kInvalidArgument, "{}: elements {} and {} cannot be {} along axis {}", n.Where(),
                 first.Describe(), t.Describe(), stack ? "stacked" : "concatenated", *ax);
    total += stack ? 1 : t.shape()[a];
  }
  std::vector<int64_t> shape = first.shape();
  if (stack) shape.insert(shape.begin() + *ax, total);
  else shape[a] = total;
  Tensor& out = AllocOutput(c, 0, first.dtype(), shape);
  const size_t es = DataTypeSize(first.dtype());
  auto* dst = static_cast<uint8_t*>(out.raw());
  int64_t offset = 0;
  for (const Tensor& t : *s) {
    const int64_t len = stack ? 1 : t.shape()[a];
    const size_t run = static_cast<size_t>(len * inner) * es;
    const auto* src = static_cast<const uint8_t*>(t.raw());
    if (run)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + static_cast<size_t>((o * total + offset) * inner) * es, src + static_cast<size_t>(o) * run,
                    run);
    offset += len;
  }
  return Status::Ok();
}

// SequenceMap: the body runs once per element of input 0; a sequence input gives it its element at that position,
// a tensor input itself; each output collects the body's outputs into a sequence.
Status SequenceMapKernel(KernelContext& c) {
  const Node& n = c.node;
  const Graph* body = BodyOf(n, "body");
  if (!body) return Err(StatusCode::kInvalidModel, "{}: has no body", n.Where());
  const size_t k = CapturedInputCount(n);
  const size_t formal = c.num_inputs() - k;
  KILN_ASSIGN_OR_RETURN(const std::vector<Tensor>* s, SequenceInput(c, 0));
  const size_t count = s->size();
  for (size_t i = 1; i < formal; ++i) {
    const OnnxValue* v = c.value_input(i);
    if (v && v->is_sequence() && v->sequence.size() != count)
      return Err(StatusCode::kInvalidArgument, "{}: input {} holds {} tensors but input 0 holds {}; the sequences must "
                 "have one length", n.Where(), i, v->sequence.size(), count);
  }
  std::vector<OnnxValue> captured;
  for (size_t i = formal; i < c.num_inputs(); ++i) captured.push_back(InputValue(c, i));
  std::vector<std::vector<Tensor>> outs(c.num_outputs());
  for (size_t e = 0; e < count; ++e) {
    std::vector<OnnxValue> in;
    for (size_t i = 0; i < formal; ++i) {
      const OnnxValue* v = c.value_input(i);
      in.push_back(v && v->is_sequence() ? OnnxValue::FromTensor(v->sequence[e]) : InputValue(c, i));
    }
    in.insert(in.end(), captured.begin(), captured.end());
    auto r = RunBodyGraph(*body, std::move(in));
    if (!r.ok()) return r.status().WithContext(n.Where() + " body");
    for (size_t o = 0; o < outs.size() && o < r->size(); ++o) {
      OnnxValue& y = (*r)[o];
      if (!y.is_tensor() || !y.tensor.defined())
        return Err(StatusCode::kInvalidArgument, "{}: body output {} must be a tensor, but it is {}", n.Where(), o,
                   y.Describe());
      outs[o].push_back(std::move(y.tensor));
    }
  }
  for (size_t o = 0; o < outs.size(); ++o) c.value_out(o) = OnnxValue::FromSequence(std::move(outs[o]));
  return Status::Ok();
}

Status OptionalKernel(KernelContext& c) {
  c.value_out(0) = c.num_inputs() > 0 && (c.input(0) || c.value_input(0)) ? InputValue(c, 0) : OnnxValue::None();
  return Status::Ok();
}

Status OptionalHasElementKernel(KernelContext& c) {
  const OnnxValue* v = c.value_input(0);
  SetBool(c, 0, v ? !v->is_none() : c.input(0) != nullptr);
  return Status::Ok();
}

Status OptionalGetElementKernel(KernelContext& c) {
  OnnxValue v = InputValue(c, 0);
  if (v.is_none())
    return Err(StatusCode::kInvalidArgument, "{}: the optional is empty; check it with OptionalHasElement first",
               c.node.Where());
  if (c.output_kind(0) != ValueKind::kTensor) {
    c.value_out(0) = std::move(v);
    return Status::Ok();
  }
  if (!v.is_tensor()) return Err(StatusCode::kInternal, "{}: holds {}, not a tensor", c.node.Where(), v.Describe());
  c.out(0) = std::move(v.tensor);
  return Status::Ok();
}

}  // namespace

void RegisterSequenceKernels(KernelRegistry& r) {
  r.Add("SequenceEmpty", SequenceEmptyKernel);
  r.Add("SequenceConstruct", SequenceConstructKernel);
  r.Add("SequenceAt", SequenceAtKernel);
  r.Add("SequenceInsert", SequenceInsertKernel);
  r.Add("SequenceErase", SequenceEraseKernel);
  r.Add("SequenceLength", SequenceLengthKernel);
  r.Add("SplitToSequence", SplitToSequenceKernel);
  r.Add("ConcatFromSequence", ConcatFromSequenceKernel);
  r.Add("SequenceMap", SequenceMapKernel);
  r.Add("Optional", OptionalKernel);
  r.Add("OptionalHasElement", OptionalHasElementKernel);
  r.Add("OptionalGetElement", OptionalGetElementKernel);
}

}  // namespace kiln::cpu
