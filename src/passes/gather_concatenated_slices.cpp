// Pass gather-concatenated-slices: a Concat of slices of one tensor along the axis they slice is one Gather of that
// tensor with the slices' index ranges one after another. torch.roll exports as exactly this (Swin's cyclic shift:
// x[:, -3:] and x[:, :-3] concatenated along H, then the same along W):
//   Concat(Slice(x, [s, n), axis a), Slice(x, [0, s), axis a); axis a)  =>  Gather(x, [s .. n-1, 0 .. s-1], axis a)
// One pass over the data instead of one per slice plus the concatenation. Only slices with constant starts, ends
// and steps over that axis alone (x's size there known), each read by the Concat alone; at most 2^20 indices.
#include <unordered_set>

#include "core/error.h"
#include "passes/cleanup_util.h"
#include "passes/pass_list.h"
#include "ops/shape_tensor_params.h"

namespace kiln {
namespace {

constexpr int64_t kMaxIndices = int64_t{1} << 20;

// The indices `s` (a Slice of `x` over axis `axis` only) takes along that axis, or nothing; at most `budget` of them.
// The start, step and count come from Slice's own shape arithmetic (ONNX's clamping), over that axis alone.
std::optional<std::vector<int64_t>> SliceIndices(const Node& s, const Value* x, int64_t axis, int64_t budget) {
  if (!s.domain.empty() || s.op_type != "Slice" || s.input(0) != x || s.outputs.size() != 1) return std::nullopt;
  auto starts = ConstInts(s.input(1));
  auto ends = ConstInts(s.input(2));
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  int64_t a = 0;
  if (s.input(3)) {
    auto axes = ConstInts(s.input(3));
    if (!axes || axes->size() != 1) return std::nullopt;
    a = (*axes)[0] < 0 ? (*axes)[0] + rank : (*axes)[0];
  }
  std::vector<int64_t> steps;
  if (s.input(4)) {
    auto st = ConstInts(s.input(4));
    if (!st || st->size() != 1) return std::nullopt;
    steps = *st;
  }
  if (a != axis) return std::nullopt;
  auto p = ComputeSlice(s, {x->shape[axis].value}, *starts, *ends, {0}, steps);
  if (!p.ok() || p->count[0] > budget) return std::nullopt;
  std::vector<int64_t> idx(static_cast<size_t>(p->count[0]));
  for (int64_t k = 0; k < p->count[0]; ++k) idx[k] = p->start[0] + k * p->step[0];
  return idx;
}

}  // namespace

Result<PassReport> GatherConcatenatedSlicesPass(Graph& g, const PassOptions&) {
  PassReport report;
  std::unordered_set<const Node*> dead;
  std::vector<Node*> order;
  for (const auto& n : g.nodes()) order.push_back(n.get());
  for (Node* cat : order) {
    if (!cat->domain.empty() || cat->op_type != "Concat" || cat->inputs.size() < 2 || cat->outputs.size() != 1)
      continue;
    const Value* first = cat->input(0);
    const Node* p0 = first ? first->producer : nullptr;
    if (!p0 || p0->op_type != "Slice" || !p0->input(0)) continue;
    Value* x = p0->inputs[0];
    if (!x->has_shape || x->shape.empty()) continue;
    const int64_t rank = static_cast<int64_t>(x->shape.size());
    auto axis_attr = cat->attr_int("axis", 0);
    if (!axis_attr.ok()) continue;
    const int64_t axis = *axis_attr < 0 ? *axis_attr + rank : *axis_attr;
    if (axis < 0 || axis >= rank || !x->shape[axis].known()) continue;
    std::vector<int64_t> indices;
    std::vector<Node*> slices;
    bool ok = true;
    for (Value* in : cat->inputs) {
      Node* s = in ? in->producer : nullptr;
      const int64_t budget = kMaxIndices - static_cast<int64_t>(indices.size());
      auto idx = s && !dead.count(s) ? SliceIndices(*s, x, axis, budget) : std::nullopt;
      if (!idx || IsGraphOutput(g, in) || LiveConsumers(g, in, dead).size() != 1) {
        ok = false;
        break;
      }
      indices.insert(indices.end(), idx->begin(), idx->end());
      slices.push_back(s);
    }
    if (!ok) continue;
    const std::string desc = fmt::format("{}: {} slices of '{}' along axis {} -> one Gather of {} indices",
                                         cat->Where(), slices.size(), x->name, axis, indices.size());
    cat->op_type = "Gather";
    cat->opset = std::max<int64_t>(cat->opset, 13);
    cat->attrs.clear();
    cat->attrs["axis"] = Attribute::Int(axis);
    cat->inputs = {x, g.AddConstant(cat->name + "/indices", Tensor::FromInt64(indices))};
    for (Node* s : slices) dead.insert(s);
    report.details.push_back(desc);
    ++report.rewrites;
  }
  return report;  // the slices are left unread for dead-code elimination
}

}  // namespace kiln
