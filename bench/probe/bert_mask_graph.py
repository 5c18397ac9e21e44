# How BERT's attention mask reaches the attention when the model is exported with an attention_mask input
# (transformers 5; the TorchScript exporter and dynamo): the nodes between the input and the first layer's
# score Add, with their output shapes.
import torch, transformers, onnx, sys
from onnx import shape_inference
class W(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.m = transformers.BertModel(transformers.BertConfig(num_hidden_layers=2), add_pooling_layer=False).eval()
    def forward(s, ids, am): return s.m(input_ids=ids, attention_mask=am).last_hidden_state
torch.manual_seed(0)
ids = torch.randint(0, 30522, (4, 16)); am = torch.ones(4, 16, dtype=torch.int64); am[1, 10:] = 0
for dynamo in (False, True):
    path = f"bert_am_{'dynamo' if dynamo else 'ts'}.onnx"
    try:
        torch.onnx.export(W().eval(), (ids, am), path, opset_version=17 if not dynamo else 18, input_names=["input_ids", "attention_mask"],
                          output_names=["y"], dynamo=dynamo,
                          dynamic_axes=None if dynamo else {"input_ids": {0: "B", 1: "S"}, "attention_mask": {0: "B", 1: "S"}})
    except Exception as ex:
        print(path, "export failed:", ex); continue
    m = shape_inference.infer_shapes(onnx.load(path))
    shapes = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in list(m.graph.value_info) + list(m.graph.input)}
    prod = {o: n for n in m.graph.node for o in n.output}
    # backwards from every Add whose other input is a Softmax-bound score: find nodes reachable from attention_mask
    reach, order = {"attention_mask"}, []
    for n in m.graph.node:
        if any(i in reach for i in n.input):
            reach.update(n.output); order.append(n)
    print(f"== {path}: {len(order)} nodes downstream of attention_mask (first 40)")
    for n in order[:40]:
        print(f"  {n.op_type:12s} {n.name:60s} -> {[shapes.get(o) for o in n.output]}")
