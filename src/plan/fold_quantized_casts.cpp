// FoldQuantizedCasts (see fold_quantized_casts.h).
#include "plan/fold_quantized_casts.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "ops/op_def.h"
#include "ops/quantized_ops.h"

namespace kiln {
namespace {

bool IsCastTo(const Node* n, DataType to) {
  return n && n->domain.empty() && n->op_type == "Cast" && n->geti("to", 0) == static_cast<int64_t>(to);
}

// A QuantizeLinear as the kernels' quantized outputs (kiln_q_*) take it: per tensor (a constant float32 scale, a
// constant zero point or none), to int8, uint8 or float8e4m3fn (saturated, zero point 0); nullopt otherwise.
std::optional<quant_attrs::QuantizedCopy> PerTensorQuantize(const Node& q) {
  const Value* s = q.input(1);
  const Value* z = q.input(2);
  const Value* y = q.output(0);
  if (!s || !s->is_const() || s->const_value->numel() != 1 || s->dtype != DataType::kFloat32 || !y)
    return std::nullopt;
  if (z && (!z->is_const() || z->const_value->numel() != 1)) return std::nullopt;
  if (y->dtype != DataType::kInt8 && y->dtype != DataType::kUInt8 && y->dtype != DataType::kFloat8E4M3FN)
    return std::nullopt;
  if (y->dtype == DataType::kFloat8E4M3FN && (q.geti("saturate", 1) != 1 || (z && z->const_value->GetAsDouble(0) != 0)))
    return std::nullopt;  // the kernels write float8 saturated, with zero point 0
  if (q.geti("block_size", 0) != 0) return std::nullopt;
  quant_attrs::QuantizedCopy c;
  c.scale = static_cast<float>(s->const_value->GetAsDouble(0));
  if (!(c.scale > 0) || !std::isfinite(c.scale)) return std::nullopt;
  c.type = y->dtype;
  c.zero_point = z && y->dtype != DataType::kFloat8E4M3FN ? z->const_value->GetAsInt(0) : 0;
  return c;
}

}  // namespace

QuantizedCastFolds FoldQuantizedCasts(Graph& g, const std::function<bool(const Node&)>& takes_float16) {
  QuantizedCastFolds r;
  std::map<const Value*, std::vector<Node*>> readers;
  for (const auto& n : g.nodes())
    for (Value* v : n->inputs)
      if (v) readers[v].push_back(n.get());
  std::set<const Node*> dead;
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    if (n.domain != kKilnDomain || n.op_type != "QMatMul" || !takes_float16(n)) continue;
    Value* y = n.output(0);
    if (!y || y->dtype != DataType::kFloat32 || y->is_graph_output) continue;
    // The output folds with the residual only (a float16 output with a float32 or int8 residual has no fused
    // kernel on the GPU): none, or a float32 Cast of a 16-bit value.
    Value* res = n.input(3);
    Value* res16 = nullptr;
    if (res) {
      if (res->dtype != DataType::kFloat32 || n.has_attr(quant_attrs::kRScale) ||
          !IsCastTo(res->producer, DataType::kFloat32))
        continue;
      res16 = res->producer->input(0);
      if (!res16 || res16->dtype != DataType::kFloat16) continue;
    }
    const auto& rs = readers[y];
    bool all_casts = !rs.empty();
    for (const Node* c : rs) all_casts &= IsCastTo(c, DataType::kFloat16) && c->inputs.size() == 1;
    if (!all_casts) continue;
    // The first Cast's output becomes the layer's; the other Casts' readers read it too.
    Value* y16 = rs[0]->output(0);
    const bool others_rewirable = std::all_of(rs.begin() + 1, rs.end(), [](const Node* c) {
      return c->output(0) && !c->output(0)->is_graph_output;
    });
    if (!y16 || !others_rewirable) continue;
    for (size_t i = 1; i < rs.size(); ++i) {
      Value* other = rs[i]->output(0);
      for (Node* m : readers[other])
        for (Value*& in : m->inputs)
          if (in == other) in = y16;
      other->producer = nullptr;  // its Cast goes
      dead.insert(rs[i]);
    }
    dead.insert(rs[0]);
    n.outputs[0] = y16;
    y16->producer = &n;
    y->producer = nullptr;  // read by nothing now
    n.attrs[quant_attrs::kYType] = Attribute::Int(static_cast<int64_t>(DataType::kFloat16));
    ++r.outputs;
    if (res16) {  // the residual: the float16 value the Cast widened
      n.inputs[3] = res16;
      ++r.residuals;
    }
  }
  // A QuantizeLinear of a float32 Cast of a 16-bit float value quantizes that value, read as its float32 widening.
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    if (!n.domain.empty() || n.op_type != "QuantizeLinear" || !takes_float16(n)) continue;
    Value* x = n.input(0);
    if (!x || x->dtype != DataType::kFloat32 || !IsCastTo(x->producer, DataType::kFloat32)) continue;
    Value* src = x->producer->input(0);
    if (!src || (src->dtype != DataType::kFloat16 && src->dtype != DataType::kBFloat16)) continue;
    n.inputs[0] = src;
    n.attrs[quant_attrs::kXWidened] = Attribute::Int(1);
    ++r.quantize_inputs;
  }
  // A per-tensor QuantizeLinear of a LayerNormalization's Y (widened, or X float32) becomes the LayerNormalization's
  // output 3: the kernel quantizes each value as it writes it.
  for (const auto& np : g.nodes()) {
    Node& q = *np;
    if (!q.domain.empty() || q.op_type != "QuantizeLinear" || dead.count(&q)) continue;
    Value* x = q.input(0);
    Node* ln = x ? x->producer : nullptr;
    if (!ln || !ln->domain.empty() || ln->op_type != "LayerNormalization" || ln->output(0) != x || ln->output(3) ||
        !takes_float16(*ln))
      continue;
    if (x->dtype != DataType::kFloat32 && q.geti(quant_attrs::kXWidened, 0) == 0) continue;  // ONNX's 16-bit rounding
    const auto c = PerTensorQuantize(q);
    if (!c) continue;
    Value* y = q.output(0);
    ln->outputs.resize(4, nullptr);
    ln->outputs[3] = y;
    y->producer = ln;
    ln->attrs[quant_attrs::kQScale] = Attribute::Float(c->scale);
    ln->attrs[quant_attrs::kQZeroPoint] = Attribute::Int(c->zero_point);
    ln->attrs[quant_attrs::kQType] = Attribute::Int(static_cast<int64_t>(c->type));
    dead.insert(&q);
    ++r.norm_quantizes;
  }
  // A per-tensor QuantizeLinear that alone reads a kiln.Attention's Y (widened, or Y float32): the attention writes
  // Y quantized instead, half the bytes of float16 (the float Y is not kept). Readers are counted afresh (the loop
  // above rewired QuantizeLinears past their Casts), leaving out nodes already dropped and Casts nothing reads.
  std::map<const Value*, std::vector<const Node*>> now;  // readers as the graph stands
  for (const auto& n : g.nodes())
    if (!dead.count(n.get()))
      for (Value* v : n->inputs)
        if (v) now[v].push_back(n.get());
  auto unread_cast = [&](const Node* n) {  // a Cast a widened QuantizeLinear left behind
    const Value* o = n->output(0);
    return IsCastTo(n, DataType::kFloat32) && o && !o->is_graph_output && now[o].empty();
  };
  auto readers_of = [&](const Value* v) {
    int c = 0;
    for (const Node* n : now[v]) c += !unread_cast(n);
    return c;
  };
  for (const auto& np : g.nodes()) {
    Node& q = *np;
    if (!q.domain.empty() || q.op_type != "QuantizeLinear" || dead.count(&q)) continue;
    Value* x = q.input(0);
    Node* at = x ? x->producer : nullptr;
    if (!at || at->domain != "kiln" || at->op_type != "Attention" || at->output(0) != x ||
        at->has_attr(quant_attrs::kQType) || x->is_graph_output || readers_of(x) != 1)
      continue;
    if (x->dtype != DataType::kFloat32 && q.geti(quant_attrs::kXWidened, 0) == 0) continue;  // ONNX's 16-bit rounding
    const auto c = PerTensorQuantize(q);
    if (!c) continue;
    Value* y = q.output(0);
    at->outputs[0] = y;
    y->producer = at;
    x->producer = nullptr;  // read by nothing now
    at->attrs[quant_attrs::kQScale] = Attribute::Float(c->scale);
    at->attrs[quant_attrs::kQZeroPoint] = Attribute::Int(c->zero_point);
    at->attrs[quant_attrs::kQType] = Attribute::Int(static_cast<int64_t>(c->type));
    dead.insert(&q);
    ++r.attention_quantizes;
  }
  if (dead.empty() && r.quantize_inputs == 0) return r;  // (a folded residual comes with a folded output)
  auto casts = [&g] {
    int c = 0;
    for (const auto& n : g.nodes()) c += n->domain.empty() && n->op_type == "Cast";
    return c;
  };
  const int before = casts();
  auto& nodes = g.mutable_nodes();
  std::vector<std::unique_ptr<Node>> kept;
  kept.reserve(nodes.size());
  for (auto& n : nodes)
    if (!dead.count(n.get())) kept.push_back(std::move(n));
  nodes.swap(kept);
  g.RemoveDeadNodes();  // residual Casts no one reads now
  r.casts_removed = before - casts();
  return r;
}

}  // namespace kiln
