"""GPT-2-style causal decoder (HuggingFace GPT2LMHeadModel layout), random weights.

- input input_ids int64 [batch, seq] (symbolic "batch", "seq"), output logits [batch, seq, vocab];
- token embedding Gather(wte) + position embedding Gather(wpe, Unsqueeze(Range(0, seq, 1)));
- per block (pre-LN): LayerNormalization (opset-17 op), fused QKV MatMul [h, 3h] + Add bias,
  Split into q/k/v (split sizes as an input), Reshape/Transpose to heads (shape subgraphs),
  MatMul q.kT, Div sqrt(d), causal mask built at run time with
  Shape -> Concat -> ConstantOfShape -> Trilu(lower) -> Cast(bool) -> Where(mask, scores, float32 min),
  Softmax, MatMul v, merge heads, projection, residual Add; MLP with GPT-2's tanh GELU written
  decomposed (0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))), residual Add;
- final LayerNormalization, LM head tied to wte: MatMul(x, Transpose(wte)).

Defaults: 2 blocks, hidden 768, 12 heads, vocab 8192 (GPT-2's 50257 makes the LM-head
weight and output large for a test; pass vocab=50257 for the real size), max positions 1024.
"""
import math

import numpy as np
from onnx import TensorProto, numpy_helper

from .common import FLOAT, INT64, GraphBuilder


def _attention(g, x, hidden, heads, n_layers, scope):
    hd = hidden // heads
    s = f"{scope}/attn"
    qkv = g.matmul_add(x, hidden, 3 * hidden, f"{s}/c_attn", std=0.05)
    q, k, v = g.op("Split", [qkv, g.const([hidden] * 3)], scope=s, n_out=3, axis=2)

    def heads_view(t, perm):
        r = g.reshape_dyn(t, [("dim", t, 0), ("dim", t, 1), [heads, hd]], s)
        return g.op("Transpose", [r], scope=s, perm=perm)

    qh = heads_view(q, [0, 2, 1, 3])
    kt = heads_view(k, [0, 2, 3, 1])
    vh = heads_view(v, [0, 2, 1, 3])
    w = g.op("MatMul", [qh, kt], scope=s)
    w = g.op("Div", [w, g.const(math.sqrt(hd), np.float32)], scope=s)
    # Causal mask [seq, seq]: lower triangle (including the diagonal) is kept.
    n = g.dim(x, 1, s)
    ones = g.op("ConstantOfShape", [g.op("Concat", [n, n], scope=s, axis=0)], scope=s,
                value=numpy_helper.from_array(np.array([1.0], dtype=np.float32)))
    tri = g.op("Trilu", [ones], scope=s, upper=0)
    keep = g.op("Cast", [tri], scope=s, to=TensorProto.BOOL)
    w = g.op("Where", [keep, w, g.const(np.finfo(np.float32).min, np.float32)], scope=s)
    p = g.op("Softmax", [w], scope=s, axis=-1)
    a = g.op("MatMul", [p, vh], scope=s)
    a = g.op("Transpose", [a], scope=s, perm=[0, 2, 1, 3])
    a = g.reshape_dyn(a, [("dim", a, 0), ("dim", a, 1), [hidden]], s)
    return g.matmul_add(a, hidden, hidden, f"{s}/c_proj", std=0.02 / math.sqrt(2 * n_layers) * 4)


def _block(g, x, hidden, heads, n_layers, scope):
    h = g.layer_norm_op(x, hidden, f"{scope}/ln_1")
    x = g.op("Add", [x, _attention(g, h, hidden, heads, n_layers, scope)], scope=scope)
    h = g.layer_norm_op(x, hidden, f"{scope}/ln_2")
    h = g.matmul_add(h, hidden, 4 * hidden, f"{scope}/mlp/c_fc")
    h = g.gelu_tanh(h, f"{scope}/mlp/act")
    h = g.matmul_add(h, 4 * hidden, hidden, f"{scope}/mlp/c_proj", std=0.02 / math.sqrt(2 * n_layers) * 4)
    return g.op("Add", [x, h], scope=scope)


def build(seed=0, batch=1, seq=64, layers=2, hidden=768, heads=12, vocab=8192, max_pos=1024):
    """Returns (model, feeds); feeds have the given batch and seq."""
    g = GraphBuilder(seed)
    ids = "input_ids"
    wte = g.normal("transformer.wte.weight", (vocab, hidden), 0.02)
    wpe = g.normal("transformer.wpe.weight", (max_pos, hidden), 0.01)
    tok = g.op("Gather", [wte, ids], scope="/transformer/wte", axis=0)
    seq_len = g.op("Gather", [g.op("Shape", [ids], scope="/transformer"), g.const(1)],
                   scope="/transformer", axis=0)
    pos_ids = g.op("Range", [g.const(0), seq_len, g.const(1)], scope="/transformer")
    pos_ids = g.op("Unsqueeze", [pos_ids, g.const([0])], scope="/transformer")
    pos = g.op("Gather", [wpe, pos_ids], scope="/transformer/wpe", axis=0)
    x = g.op("Add", [tok, pos], scope="/transformer")
    for i in range(layers):
        x = _block(g, x, hidden, heads, layers, f"/transformer/h.{i}")
    x = g.layer_norm_op(x, hidden, "/transformer/ln_f")
    wte_t = g.op("Transpose", [wte], scope="/lm_head", perm=[1, 0])
    g.op("MatMul", [x, wte_t], scope="/lm_head", outputs=["logits"])
    model = g.model("gpt2", [(ids, INT64, ["batch", "seq"])],
                    [("logits", FLOAT, ["batch", "seq", vocab])])
    rng = np.random.default_rng(seed + 1)
    feeds = {ids: rng.integers(0, vocab, (batch, seq), dtype=np.int64)}
    return model, feeds
