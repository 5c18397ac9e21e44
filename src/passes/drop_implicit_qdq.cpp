// Pass drop-implicit-qdq: after fuse-quantized, the QuantizeLinear -> DequantizeLinear pairs that implicit INT8
// inserted (quant/insert_qdq.h marks them kiln_implicit) and that no INT8 layer took are only a round trip through
// int8 in front of a layer that computes in float: its readers read the float value itself again, as TensorRT's
// implicit INT8 runs a layer without an INT8 kernel in float (ResNet-50's RGB stem on the cuda backend: two kernels
// and a quantization error fewer). The Quantize stays while an INT8 layer reads it. Explicit Q/DQ (a model's own)
// are never touched: they say what the model computes.
//   x ─► Q ─► DQ ─► Conv (float)      =>   x ─► Conv (float)
#include "core/error.h"
#include "passes/fusion_util.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

bool IsImplicit(const Node* n, const char* op) {
  return n && n->domain.empty() && n->op_type == op && n->geti("kiln_implicit", 0) == 1;
}

}  // namespace

Result<PassReport> DropImplicitQdqPass(Graph& g, const PassOptions& o) {
  PassReport report;
  const fusion::Uses u(g);
  std::vector<Node*> dead;
  for (const auto& np : g.nodes()) {
    Node* dq = np.get();
    if (!IsImplicit(dq, "DequantizeLinear") || dq->outputs.size() != 1 || !dq->outputs[0]) continue;
    Node* q = u.Producer(dq->input(0));
    Value* y = dq->outputs[0];
    if (!IsImplicit(q, "QuantizeLinear") || !q->input(0) || u.IsOutput(y) || q->input(0)->dtype != y->dtype) continue;
    Value* x = q->input(0);
    for (Node* r : u.Readers(y))
      for (Value*& in : r->inputs)
        if (in == y) in = x;
    dead.push_back(dq);
    dead.push_back(q);
    ++report.rewrites;
    report.details.push_back(fmt::format("{}: no INT8 layer reads it; its readers read '{}' in float", dq->name,
                                         x->name));
  }
  fusion::RemoveUnread(g, dead);
  return report;
}

}  // namespace kiln
