"""BERT-base encoder (HuggingFace BertModel layout) with an attention mask, random weights.

Written the way torch.onnx (opset <= 16 style) exports it:
- inputs input_ids / attention_mask int64 [batch, seq] with symbolic dims "batch", "seq";
- embeddings: Gather(word) + Gather(position; ids sliced from a [1, max_pos] buffer with a
  Shape->Gather->Unsqueeze->Slice subgraph) + Gather(token type; ids from ConstantOfShape(Shape)),
  then LayerNorm;
- LayerNorm decomposed (ReduceMean, Sub, Pow, ReduceMean, Add eps, Sqrt, Div, Mul, Add);
- GELU decomposed with Erf: x * 0.5 * (1 + erf(x / sqrt(2)));
- extended mask: Unsqueeze -> Cast(float) -> Sub(1 - m) -> Mul(-10000) added to the scores;
- attention: MatMul/Add, Reshape to heads with Shape->Gather->Unsqueeze->Concat shape
  subgraphs, Transpose, MatMul, Div(sqrt(d)), Add mask, Softmax, MatMul, Transpose, Reshape;
- pooler: Gather(token 0) -> MatMul/Add -> Tanh.
Outputs: last_hidden_state [batch, seq, hidden], pooler_output [batch, hidden].

Defaults are BERT-base (12 layers, hidden 768, 12 heads, FFN 3072, vocab 30522); the
parameters allow a smaller model for speed. Weights are N(0, 0.02) as in BERT's init.
"""
import math

import numpy as np
from onnx import TensorProto, numpy_helper

from .common import FLOAT, INT64, GraphBuilder


def _attention(g, x, mask_add, hidden, heads, scope):
    hd = hidden // heads
    # Larger q/k weights than BERT's 0.02 so the softmax is far from uniform.
    q = g.matmul_add(x, hidden, hidden, f"{scope}/attention/self/query", std=0.05)
    k = g.matmul_add(x, hidden, hidden, f"{scope}/attention/self/key", std=0.05)
    v = g.matmul_add(x, hidden, hidden, f"{scope}/attention/self/value")
    s = f"{scope}/attention/self"

    def heads_view(t, perm):
        r = g.reshape_dyn(t, [("dim", t, 0), ("dim", t, 1), [heads, hd]], s)
        return g.op("Transpose", [r], scope=s, perm=perm)

    qh = heads_view(q, [0, 2, 1, 3])  # [B, H, S, d]
    kt = heads_view(k, [0, 2, 3, 1])  # [B, H, d, S]
    vh = heads_view(v, [0, 2, 1, 3])
    scores = g.op("MatMul", [qh, kt], scope=s)
    scores = g.op("Div", [scores, g.const(math.sqrt(hd), np.float32)], scope=s)
    scores = g.op("Add", [scores, mask_add], scope=s)
    probs = g.op("Softmax", [scores], scope=s, axis=-1)
    ctx = g.op("MatMul", [probs, vh], scope=s)
    ctx = g.op("Transpose", [ctx], scope=s, perm=[0, 2, 1, 3])
    ctx = g.reshape_dyn(ctx, [("dim", ctx, 0), ("dim", ctx, 1), [hidden]], s)
    out = g.matmul_add(ctx, hidden, hidden, f"{scope}/attention/output/dense")
    out = g.op("Add", [out, x], scope=f"{scope}/attention/output")
    return g.layer_norm_decomposed(out, hidden, f"{scope}/attention/output/LayerNorm")


def _layer(g, x, mask_add, hidden, heads, ffn, scope):
    a = _attention(g, x, mask_add, hidden, heads, scope)
    h = g.matmul_add(a, hidden, ffn, f"{scope}/intermediate/dense")
    h = g.gelu_erf(h, f"{scope}/intermediate/intermediate_act_fn")
    h = g.matmul_add(h, ffn, hidden, f"{scope}/output/dense")
    h = g.op("Add", [h, a], scope=f"{scope}/output")
    return g.layer_norm_decomposed(h, hidden, f"{scope}/output/LayerNorm")


def build(seed=0, batch=1, seq=128, layers=12, hidden=768, heads=12, ffn=3072,
          vocab=30522, max_pos=512):
    """Returns (model, feeds) for BertModel; feeds have the given batch and seq."""
    g = GraphBuilder(seed)
    ids, mask = "input_ids", "attention_mask"
    # Embeddings.
    e = "/embeddings"
    word = g.op("Gather", [g.normal("embeddings.word_embeddings.weight", (vocab, hidden), 0.02), ids],
                scope=f"{e}/word_embeddings", axis=0)
    pos_buf = g.init("embeddings.position_ids", np.arange(max_pos, dtype=np.int64)[None, :])
    seq_len = g.dim(ids, 1, e)
    pos_ids = g.op("Slice", [pos_buf, g.const([0]), seq_len, g.const([1]), g.const([1])], scope=e)
    pos = g.op("Gather", [g.normal("embeddings.position_embeddings.weight", (max_pos, hidden), 0.02),
                          pos_ids], scope=f"{e}/position_embeddings", axis=0)
    ids_shape = g.op("Shape", [ids], scope=e)
    tt_ids = g.op("ConstantOfShape", [ids_shape], scope=e,
                  value=numpy_helper.from_array(np.array([0], dtype=np.int64)))
    tt = g.op("Gather", [g.normal("embeddings.token_type_embeddings.weight", (2, hidden), 0.02), tt_ids],
              scope=f"{e}/token_type_embeddings", axis=0)
    x = g.op("Add", [word, tt], scope=e)
    x = g.op("Add", [x, pos], scope=e)
    x = g.layer_norm_decomposed(x, hidden, f"{e}/LayerNorm")
    # Extended attention mask: (1 - mask[:, None, None, :]) * -10000.
    m = g.op("Unsqueeze", [mask, g.const([1])], scope="")
    m = g.op("Unsqueeze", [m, g.const([2])], scope="")
    m = g.op("Cast", [m], scope="", to=TensorProto.FLOAT)
    m = g.op("Sub", [g.const(1.0, np.float32), m], scope="")
    mask_add = g.op("Mul", [m, g.const(-10000.0, np.float32)], scope="")
    for i in range(layers):
        x = _layer(g, x, mask_add, hidden, heads, ffn, f"/encoder/layer.{i}")
    g.op("Identity", [x], scope="/encoder", outputs=["last_hidden_state"])
    first = g.op("Gather", ["last_hidden_state", g.const(0)], scope="/pooler", axis=1)
    p = g.matmul_add(first, hidden, hidden, "/pooler/dense")
    g.op("Tanh", [p], scope="/pooler/activation", outputs=["pooler_output"])
    model = g.model(
        "bert",
        [(ids, INT64, ["batch", "seq"]), (mask, INT64, ["batch", "seq"])],
        [("last_hidden_state", FLOAT, ["batch", "seq", hidden]), ("pooler_output", FLOAT, ["batch", hidden])])
    return model, make_feeds(seed, batch, seq, vocab)


def make_feeds(seed, batch, seq, vocab=30522):
    """Random token ids; each row's mask has a random number of trailing padding tokens."""
    rng = np.random.default_rng(seed + 1)
    ids = rng.integers(0, vocab, (batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    for b in range(batch):
        valid = int(rng.integers(max(1, seq // 2), seq + 1)) if b > 0 else seq - seq // 4
        mask[b, valid:] = 0
    return {"input_ids": ids, "attention_mask": mask}
