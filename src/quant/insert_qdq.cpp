#include "quant/insert_qdq.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "ops/op_def.h"

namespace kiln::quant {

bool HasQdq(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->domain.empty() && (n->op_type == "QuantizeLinear" || n->op_type == "DequantizeLinear")) return true;
  return false;
}

QdqReport InsertActivationQdq(Graph& g, const std::map<std::string, float>& scales,
                              const std::set<std::string>& keep_float, DataType type) {
  QdqReport rep;
  const bool fp8 = type == DataType::kFloat8E4M3FN;
  const std::string tag = fp8 ? "fp8" : "int8";
  // The INT8 layers' activation inputs, with the position of their first reader.
  struct Site {
    size_t first_reader;
    std::vector<std::pair<Node*, size_t>> readers;  // (node, input index)
  };
  std::unordered_map<Value*, Site> sites;
  std::vector<Value*> order;
  const auto& nodes = g.nodes();
  for (size_t k = 0; k < nodes.size(); ++k) {
    Node* n = nodes[k].get();
    if (!TraitsOf(*n).int8_layer) continue;
    Value* x = n->input(0);
    const Value* w = n->input(1);
    if (!x || x->is_const() || x->dtype != DataType::kFloat32 || !w || !w->is_const()) continue;
    if (keep_float.count(n->name)) {
      rep.layers_pinned.push_back(n->name);
      continue;
    }
    auto it = scales.find(x->name);
    if (it == scales.end() || !(it->second > 0) || !std::isfinite(it->second)) {
      rep.layers_without_range.push_back(n->name);
      continue;
    }
    auto [s, fresh] = sites.try_emplace(x, Site{k, {}});
    if (fresh) order.push_back(x);
    s->second.readers.push_back({n, 0});
    rep.layers.push_back(n->name);
  }
  // Residual adds: Add(layer output, shortcut) with the layer an INT8 layer getting a Q/DQ above.
  std::set<const Node*> int8_layers;
  for (const auto& [x, site] : sites)
    for (const auto& [r, i] : site.readers) int8_layers.insert(r);
  for (size_t k = 0; k < nodes.size() && !fp8; ++k) {
    Node* n = nodes[k].get();
    if (!n->domain.empty() || n->op_type != "Add" || n->inputs.size() != 2 || keep_float.count(n->name)) continue;
    for (size_t side = 0; side < 2; ++side) {
      Value* a = n->input(side);
      Value* b = n->input(1 - side);
      if (!a || !b || a->is_const() || b->is_const() || !int8_layers.count(a->producer)) continue;
      if (b->dtype != DataType::kFloat32 || !a->has_shape || !b->has_shape || a->shape.size() != b->shape.size())
        continue;
      bool same = true;
      for (size_t d = 0; d < a->shape.size(); ++d) same &= a->shape[d].same(b->shape[d]);  // sizes or symbols
      auto it = scales.find(b->name);
      if (!same || it == scales.end() || !(it->second > 0) || !std::isfinite(it->second)) continue;
      auto [s, fresh] = sites.try_emplace(b, Site{k, {}});
      if (fresh) order.push_back(b);
      s->second.first_reader = std::min(s->second.first_reader, k);
      s->second.readers.push_back({n, 1 - side});
      ++rep.residuals_quantized;
      break;
    }
  }
  // Insert from the last position backwards so earlier positions stay valid.
  std::sort(order.begin(), order.end(),
            [&](Value* a, Value* b) { return sites[a].first_reader > sites[b].first_reader; });
  for (Value* x : order) {
    const Site& site = sites[x];
    const float scale = scales.at(x->name);
    Value* s = g.AddConstant(x->name + "/" + tag + "_scale", Tensor::FromFloat({scale}, {}));
    Value* zp = g.AddConstant(x->name + "/" + tag + "_zero_point", Tensor(type, {}));  // zeros
    Value* xq = g.AddValue(x->name + "/" + tag);
    xq->dtype = type;
    xq->shape = x->shape;
    xq->has_shape = x->has_shape;
    Value* xd = g.AddValue(x->name + "/dequantized");
    xd->dtype = DataType::kFloat32;
    xd->shape = x->shape;
    xd->has_shape = x->has_shape;
    Node* dq = g.InsertNode(site.first_reader, "DequantizeLinear", x->name + "/dequantize");
    Node* q = g.InsertNode(site.first_reader, "QuantizeLinear", x->name + "/quantize");
    q->opset = dq->opset = std::max<int64_t>(fp8 ? 19 : 13, g.opsets.count("") ? g.opsets.at("") : 13);
    q->attrs["kiln_implicit"] = dq->attrs["kiln_implicit"] = Attribute::Int(1);  // (passes/drop_implicit_qdq.cpp)
    q->inputs = {x, s, zp};
    q->outputs = {xq};
    xq->producer = q;
    dq->inputs = {xq, s, zp};
    dq->outputs = {xd};
    xd->producer = dq;
    for (const auto& [r, i] : site.readers) {
      r->inputs[i] = xd;
      rep.layers_quantized += i == 0 && TraitsOf(*r).int8_layer ? 1 : 0;
    }
    ++rep.tensors_quantized;
  }
  return rep;
}

}  // namespace kiln::quant
