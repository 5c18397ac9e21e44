"""A LLaMA-style decoder (2 layers, small dims) in two layouts sharing one set of weights.

- build_opset23: the new ONNX ops (opset 23): RMSNormalization, RotaryEmbedding with position_ids (cos/sin caches
  [max_pos, head_dim/2], rotate-half layout), Attention with GQA (q_num_heads > kv_num_heads) and is_causal=1, a
  SwiGLU MLP (SiLU as Sigmoid*Mul), residual Adds. Layer 0 feeds RotaryEmbedding and Attention 3-D tensors
  [B, S, heads*head_dim] with num_heads / q_num_heads / kv_num_heads; layer 1 reshapes to 4-D [B, heads, S, D] as
  an exporter of per-head tensors does.
- build_opset18: the same model written with opset-18 primitives the way torch's dynamo exporter emits a
  HuggingFace LlamaModel: RMSNorm as Cast/Pow/ReduceMean/Add/Sqrt/Reciprocal/Mul/Mul, rotary cos/sin from
  inv_freq and position_ids (MatMul, Concat(freqs, freqs), Cos, Sin, Unsqueeze), rotate_half with Slice/Neg/Concat,
  repeat_kv with Unsqueeze/Expand/Reshape, attention as MatMul/Mul(scale)/Add(causal mask)/Softmax/MatMul with the
  mask made by ConstantOfShape/Trilu/Where, SiLU as Sigmoid*Mul.

Both take input_ids and position_ids [B, S] and return the logits [B, S, vocab]; with the same seed both compute
the same function (test_llama.py checks that in onnxruntime too).
"""
import numpy as np
from onnx import TensorProto

from .common import FLOAT, INT64, GraphBuilder

EPS = 1e-6
THETA = 10000.0


def _weights(seed, vocab, hidden, heads, kv_heads, ffn, layers):
    rng = np.random.default_rng(seed)
    d = hidden // heads

    def n(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    w = {"embed": n((vocab, hidden), 1.0), "norm": 1 + n((hidden,), 0.1),
         "lm_head": n((hidden, vocab), hidden ** -0.5)}
    for i in range(layers):
        w[f"{i}.in_norm"] = 1 + n((hidden,), 0.1)
        w[f"{i}.q"] = n((hidden, heads * d), hidden ** -0.5)
        w[f"{i}.k"] = n((hidden, kv_heads * d), hidden ** -0.5)
        w[f"{i}.v"] = n((hidden, kv_heads * d), hidden ** -0.5)
        w[f"{i}.o"] = n((heads * d, hidden), (heads * d) ** -0.5 * 0.5)
        w[f"{i}.post_norm"] = 1 + n((hidden,), 0.1)
        w[f"{i}.gate"] = n((hidden, ffn), hidden ** -0.5)
        w[f"{i}.up"] = n((hidden, ffn), hidden ** -0.5)
        w[f"{i}.down"] = n((ffn, hidden), ffn ** -0.5 * 0.5)
    return w


def _inv_freq(d):
    return (1.0 / THETA ** (np.arange(0, d, 2, dtype=np.float64) / d)).astype(np.float32)


def _feeds(seed, batch, seq, vocab, max_pos):
    rng = np.random.default_rng(seed + 1000)
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int64)
    # Row 0 starts at 0; row 1 continues a prefix (positions offset as in a second chunk of a prompt).
    pos = np.stack([np.arange(seq) + 3 * b for b in range(batch)]).astype(np.int64)
    assert pos.max() < max_pos
    return {"input_ids": ids, "position_ids": pos}


def _mlp(g, h, w, i, scope):
    gate = g.op("MatMul", [h, g.init(f"model.layers.{i}.mlp.gate_proj.weight", w[f"{i}.gate"])], scope=scope)
    up = g.op("MatMul", [h, g.init(f"model.layers.{i}.mlp.up_proj.weight", w[f"{i}.up"])], scope=scope)
    silu = g.op("Mul", [gate, g.op("Sigmoid", [gate], scope=scope)], scope=scope)
    act = g.op("Mul", [silu, up], scope=scope)
    return g.op("MatMul", [act, g.init(f"model.layers.{i}.mlp.down_proj.weight", w[f"{i}.down"])], scope=scope)


def _io(batch, seq, vocab):
    return ([("input_ids", INT64, [batch, seq]), ("position_ids", INT64, [batch, seq])],
            [("logits", FLOAT, [batch, seq, vocab])])


def build_opset23(seed=0, batch=2, seq=16, vocab=64, hidden=32, heads=4, kv_heads=2, ffn=64, layers=2, max_pos=64):
    w = _weights(seed, vocab, hidden, heads, kv_heads, ffn, layers)
    d = hidden // heads
    g = GraphBuilder(seed)
    x = g.op("Gather", [g.init("model.embed_tokens.weight", w["embed"]), "input_ids"], scope="/embed", axis=0)
    freqs = np.arange(max_pos, dtype=np.float32)[:, None] * _inv_freq(d)[None, :]
    cos = g.init("rope.cos_cache", np.cos(freqs).astype(np.float32))
    sin = g.init("rope.sin_cache", np.sin(freqs).astype(np.float32))

    def rms(v, name, weight, scope):
        return g.op("RMSNormalization", [v, g.init(name, weight)], scope=scope, axis=-1, epsilon=EPS)

    for i in range(layers):
        s = f"/model/layers.{i}"
        h = rms(x, f"model.layers.{i}.input_layernorm.weight", w[f"{i}.in_norm"], f"{s}/input_layernorm")
        q = g.op("MatMul", [h, g.init(f"model.layers.{i}.self_attn.q_proj.weight", w[f"{i}.q"])], scope=f"{s}/q")
        k = g.op("MatMul", [h, g.init(f"model.layers.{i}.self_attn.k_proj.weight", w[f"{i}.k"])], scope=f"{s}/k")
        v = g.op("MatMul", [h, g.init(f"model.layers.{i}.self_attn.v_proj.weight", w[f"{i}.v"])], scope=f"{s}/v")
        if i % 2 == 0:  # 3-D: [B, S, heads * d]
            q = g.op("RotaryEmbedding", [q, cos, sin, "position_ids"], scope=f"{s}/rope_q", num_heads=heads)
            k = g.op("RotaryEmbedding", [k, cos, sin, "position_ids"], scope=f"{s}/rope_k", num_heads=kv_heads)
            a = g.op("Attention", [q, k, v], scope=f"{s}/attn", is_causal=1, q_num_heads=heads,
                     kv_num_heads=kv_heads)
        else:  # 4-D: [B, heads, S, d]
            def heads4(t, n):
                r = g.op("Reshape", [t, g.const([batch, seq, n, d])], scope=f"{s}/split")
                return g.op("Transpose", [r], scope=f"{s}/split", perm=[0, 2, 1, 3])
            q = g.op("RotaryEmbedding", [heads4(q, heads), cos, sin, "position_ids"], scope=f"{s}/rope_q")
            k = g.op("RotaryEmbedding", [heads4(k, kv_heads), cos, sin, "position_ids"], scope=f"{s}/rope_k")
            a4 = g.op("Attention", [q, k, heads4(v, kv_heads)], scope=f"{s}/attn", is_causal=1)
            a = g.op("Reshape", [g.op("Transpose", [a4], scope=f"{s}/merge", perm=[0, 2, 1, 3]),
                                 g.const([batch, seq, hidden])], scope=f"{s}/merge")
        o = g.op("MatMul", [a, g.init(f"model.layers.{i}.self_attn.o_proj.weight", w[f"{i}.o"])], scope=f"{s}/o")
        x = g.op("Add", [x, o], scope=f"{s}/residual1")
        h = rms(x, f"model.layers.{i}.post_attention_layernorm.weight", w[f"{i}.post_norm"],
                f"{s}/post_attention_layernorm")
        x = g.op("Add", [x, _mlp(g, h, w, i, f"{s}/mlp")], scope=f"{s}/residual2")
    h = rms(x, "model.norm.weight", w["norm"], "/model/norm")
    g.op("MatMul", [h, g.init("lm_head.weight", w["lm_head"])], scope="/lm_head", outputs=["logits"])
    model = g.model("llama_opset23", *_io(batch, seq, vocab), opset=23)
    model.ir_version = 10
    return model, _feeds(seed, batch, seq, vocab, max_pos)


def build_opset18(seed=0, batch=2, seq=16, vocab=64, hidden=32, heads=4, kv_heads=2, ffn=64, layers=2, max_pos=64):
    w = _weights(seed, vocab, hidden, heads, kv_heads, ffn, layers)
    d = hidden // heads
    f32 = np.float32
    g = GraphBuilder(seed)
    x = g.op("Gather", [g.init("model.embed_tokens.weight", w["embed"]), "input_ids"], scope="/embed", axis=0)

    def rms(v, name, weight, scope):
        v32 = g.op("Cast", [v], scope=scope, to=TensorProto.FLOAT)
        p = g.op("Pow", [v32, g.const(2.0, f32)], scope=scope)
        m = g.op("ReduceMean", [p, g.const([-1])], scope=scope, keepdims=1)
        r = g.op("Reciprocal", [g.op("Sqrt", [g.op("Add", [m, g.const(EPS, f32)], scope=scope)], scope=scope)],
                 scope=scope)
        n = g.op("Mul", [v32, r], scope=scope)
        return g.op("Mul", [g.init(name, weight), g.op("Cast", [n], scope=scope, to=TensorProto.FLOAT)], scope=scope)

    # Rotary embedding: inv_freq[None, :, None] @ position_ids[:, None, :] -> transpose -> cat(freqs, freqs).
    s = "/model/rotary_emb"
    inv = g.init("model.rotary_emb.inv_freq", _inv_freq(d).reshape(1, d // 2, 1))
    shp = g.op("Concat", [g.dim("position_ids", 0, s), g.const([d // 2, 1])], scope=s, axis=0)
    inv_e = g.op("Expand", [inv, shp], scope=s)
    pos = g.op("Cast", [g.op("Unsqueeze", ["position_ids", g.const([1])], scope=s)], scope=s, to=TensorProto.FLOAT)
    fr = g.op("Transpose", [g.op("MatMul", [inv_e, pos], scope=s)], scope=s, perm=[0, 2, 1])   # [B, S, d/2]
    emb = g.op("Concat", [fr, fr], scope=s, axis=-1)
    cos = g.op("Unsqueeze", [g.op("Cos", [emb], scope=s), g.const([1])], scope=s)           # [B, 1, S, d]
    sin = g.op("Unsqueeze", [g.op("Sin", [emb], scope=s), g.const([1])], scope=s)

    # Causal mask [S, S]: 0 on and below the diagonal, float32 min above it.
    s = "/model/mask"
    full = g.op("ConstantOfShape", [g.op("Concat", [g.dim("input_ids", 1, s), g.dim("input_ids", 1, s)], scope=s,
                                         axis=0)], scope=s, value=_tensor(np.array([1.0], f32)))
    upper = g.op("Cast", [g.op("Trilu", [full, g.const(1)], scope=s, upper=1)], scope=s, to=TensorProto.BOOL)
    mask = g.op("Where", [upper, g.const(np.finfo(f32).min, f32), g.const(0.0, f32)], scope=s)

    def rotate(t, scope):
        x1 = g.op("Slice", [t, g.const([0]), g.const([d // 2]), g.const([3]), g.const([1])], scope=scope)
        x2 = g.op("Slice", [t, g.const([d // 2]), g.const([np.iinfo(np.int64).max]), g.const([3]), g.const([1])],
                  scope=scope)
        rot = g.op("Concat", [g.op("Neg", [x2], scope=scope), x1], scope=scope, axis=-1)
        return g.op("Add", [g.op("Mul", [t, cos], scope=scope), g.op("Mul", [rot, sin], scope=scope)], scope=scope)

    def heads4(t, n, scope):
        r = g.reshape_dyn(t, [("dim", t, 0), ("dim", t, 1), [n, d]], scope)
        return g.op("Transpose", [r], scope=scope, perm=[0, 2, 1, 3])

    def repeat_kv(t, scope):
        rep = heads // kv_heads
        u = g.op("Unsqueeze", [t, g.const([2])], scope=scope)                    # [B, kv, 1, S, d]
        shape = g.op("Concat", [g.dim(t, 0, scope), g.const([kv_heads, rep]), g.dim(t, 2, scope), g.const([d])],
                     scope=scope, axis=0)
        e = g.op("Expand", [u, shape], scope=scope)
        return g.reshape_dyn(e, [("dim", t, 0), [heads], ("dim", t, 2), [d]], scope)

    for i in range(layers):
        s = f"/model/layers.{i}"
        h = rms(x, f"model.layers.{i}.input_layernorm.weight", w[f"{i}.in_norm"], f"{s}/input_layernorm")
        q = g.op("MatMul", [h, g.init(f"model.layers.{i}.self_attn.q_proj.weight", w[f"{i}.q"])], scope=f"{s}/q")
        k = g.op("MatMul", [h, g.init(f"model.layers.{i}.self_attn.k_proj.weight", w[f"{i}.k"])], scope=f"{s}/k")
        v = g.op("MatMul", [h, g.init(f"model.layers.{i}.self_attn.v_proj.weight", w[f"{i}.v"])], scope=f"{s}/v")
        q = rotate(heads4(q, heads, f"{s}/q"), f"{s}/rope_q")
        k = repeat_kv(rotate(heads4(k, kv_heads, f"{s}/k"), f"{s}/rope_k"), f"{s}/repeat_k")
        v = repeat_kv(heads4(v, kv_heads, f"{s}/v"), f"{s}/repeat_v")
        sa = f"{s}/attn"
        kt = g.op("Transpose", [k], scope=sa, perm=[0, 1, 3, 2])
        sc = g.op("Mul", [g.op("MatMul", [q, kt], scope=sa), g.const(d ** -0.5, f32)], scope=sa)
        p = g.op("Softmax", [g.op("Add", [sc, mask], scope=sa)], scope=sa, axis=-1)
        a4 = g.op("MatMul", [p, v], scope=sa)
        at = g.op("Transpose", [a4], scope=sa, perm=[0, 2, 1, 3])
        a = g.reshape_dyn(at, [("dim", at, 0), ("dim", at, 1), [hidden]], sa)
        o = g.op("MatMul", [a, g.init(f"model.layers.{i}.self_attn.o_proj.weight", w[f"{i}.o"])], scope=f"{s}/o")
        x = g.op("Add", [x, o], scope=f"{s}/residual1")
        h = rms(x, f"model.layers.{i}.post_attention_layernorm.weight", w[f"{i}.post_norm"],
                f"{s}/post_attention_layernorm")
        x = g.op("Add", [x, _mlp(g, h, w, i, f"{s}/mlp")], scope=f"{s}/residual2")
    h = rms(x, "model.norm.weight", w["norm"], "/model/norm")
    g.op("MatMul", [h, g.init("lm_head.weight", w["lm_head"])], scope="/lm_head", outputs=["logits"])
    model = g.model("llama_opset18",
                    [("input_ids", INT64, ["batch", "seq"]), ("position_ids", INT64, ["batch", "seq"])],
                    [("logits", FLOAT, ["batch", "seq", vocab])], opset=18)
    return model, _feeds(seed, batch, seq, vocab, max_pos)


def _tensor(arr):
    from onnx import numpy_helper
    return numpy_helper.from_array(arr)
