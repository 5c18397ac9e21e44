// Pass simplify-attention-mask: a kiln.Attention's constant masks made as small as their contents allow.
//   - An additive mask (input 3) whose every element is zero adds nothing to any score: it is dropped.
//   - A keep mask (input 4) that keeps every score is dropped, with its fill attributes.
//   - An axis along which every slice of a mask holds the same bits shrinks to 1; the attention broadcasts it back.
//     Exporters often write a mask expanded from the shape the model means: transformers' [B, 1, S, S] padding mask
//     made from a [B, 1, 1, S] one, which a model exported without an attention-mask input turns into a constant of
//     zeros. A mask that does not vary over the query rows lets the CUDA kernel apply it per key from shared memory
//     instead of loading one value per score (BERT-base, batch 32: 0.032 ms a layer with the [B, 1, S, S] mask).
// A mask that is not a constant is dropped where its producers prove it uniform (passes/uniform_value.h: the masks
// transformers builds from a symbolic sequence length, all zeros or all true, which a static build folds away);
// other non-constant masks are left alone. A constant read by several attentions is simplified once.
#include <cstring>
#include <map>

#include "core/error.h"
#include "ops/fused_ops.h"
#include "passes/pass_list.h"
#include "passes/uniform_value.h"

namespace kiln {
namespace {

bool IsFloatMask(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat64;
}

bool AllZero(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.GetAsDouble(i) != 0.0) return false;  // -0 counts as zero: s + -0 == s for every score but -0 itself
  return true;
}

// Whether every element of a bool keep mask keeps its score (nonzero == keep_if_true).
bool KeepsAll(const Tensor& t, bool keep_if_true) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i)
    if ((p[i] != 0) != keep_if_true) return false;
  return true;
}

// `t` with every axis along which all slices hold the same bytes shrunk to 1; `shrunk` lists the axes.
Tensor ShrinkConstantAxes(const Tensor& t, std::vector<int64_t>& shrunk) {
  Tensor cur = t;
  const size_t es = DataTypeSize(t.dtype());
  for (int64_t axis = 0; axis < cur.rank(); ++axis) {
    const std::vector<int64_t>& shape = cur.shape();
    const int64_t n = shape[axis];
    if (n <= 1) continue;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
    for (int64_t i = axis + 1; i < cur.rank(); ++i) inner *= shape[i];
    const auto* src = static_cast<const uint8_t*>(cur.raw());
    const size_t slice = static_cast<size_t>(inner) * es;
    bool same = true;
    for (int64_t o = 0; o < outer && same; ++o) {
      const uint8_t* first = src + static_cast<size_t>(o * n) * slice;
      for (int64_t k = 1; k < n && same; ++k) same = std::memcmp(first, first + k * slice, slice) == 0;
    }
    if (!same) continue;
    std::vector<int64_t> ns = shape;
    ns[axis] = 1;
    Tensor next(cur.dtype(), ns);
    auto* dst = static_cast<uint8_t*>(next.raw());
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * slice, src + static_cast<size_t>(o * n) * slice, slice);
    cur = std::move(next);
    shrunk.push_back(axis);
  }
  return cur;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// A non-constant mask proven uniform may go only where its shape is known to its last dim (each dim a number or a
// symbol): recognize-attention then checked it cannot enlarge the scores, which the kernel's run-time broadcast check
// would otherwise catch for a mask with unknown dims.
bool DroppableUniform(const Value* m, double want) {
  if (!m->has_shape) return false;
  for (const Dim& d : m->shape)
    if (d.unknown()) return false;
  return UniformValue(m) == std::optional<double>(want);
}

}  // namespace

Result<PassReport> SimplifyAttentionMaskPass(Graph& g, const PassOptions& o) {
  (void)o;
  PassReport report;
  std::map<const Value*, Value*> shrunk_of;  // a mask constant -> its shrunk copy (shared by every reader)
  for (const auto& up : g.nodes()) {
    Node* n = up.get();
    if (n->domain != "kiln" || n->op_type != "Attention") continue;
    bool changed = false;
    std::string what;
    Value* mask = n->input(3);
    if (mask && IsFloatMask(mask->dtype) &&
        (mask->is_const() ? AllZero(*mask->const_value) : DroppableUniform(mask, 0.0))) {
      n->inputs[3] = nullptr;
      what = "additive mask '" + mask->name + "' is all zeros: dropped";
      changed = true;
    }
    Value* keep = n->input(4);
    const bool keep_if_true = n->geti("kiln_keep_if_true", 1) != 0;
    if (keep && keep->dtype == DataType::kBool &&
        (keep->is_const() ? KeepsAll(*keep->const_value, keep_if_true)
                          : DroppableUniform(keep, keep_if_true ? 1.0 : 0.0))) {
      n->inputs[4] = nullptr;
      n->attrs.erase("kiln_mask_fill");
      n->attrs.erase("kiln_keep_if_true");
      n->attrs.erase("kiln_where_first");
      what += std::string(what.empty() ? "" : "; ") + "keep mask '" + keep->name + "' keeps every score: dropped";
      changed = true;
    }
    for (int idx : {3, 4}) {
      Value* m = n->input(idx);
      if (!m || !m->is_const() || !(IsFloatMask(m->dtype) || m->dtype == DataType::kBool)) continue;
      auto it = shrunk_of.find(m);
      if (it == shrunk_of.end()) {
        std::vector<int64_t> axes;
        Tensor small = ShrinkConstantAxes(*m->const_value, axes);
        Value* nv = axes.empty() ? m : g.AddConstant(m->name + "/shrunk", std::move(small));
        it = shrunk_of.emplace(m, nv).first;
      }
      Value* nv = it->second;
      if (nv == m) continue;
      n->inputs[idx] = nv;
      what += fmt::format("{}{} mask '{}' {} is the same along the axes of size 1 in {}: reads '{}'",
                          what.empty() ? "" : "; ", idx == 3 ? "additive" : "keep", m->name,
                          ShapeText(m->const_value->shape()), ShapeText(nv->const_value->shape()), nv->name);
      changed = true;
    }
    while (!n->inputs.empty() && !n->inputs.back()) n->inputs.pop_back();
    if (changed) {
      ++report.rewrites;
      report.details.push_back(fmt::format("{}: {}", n->Where(), what));
    }
  }
  return report;
}

}  // namespace kiln
