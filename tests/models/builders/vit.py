"""ViT-B/16-like image classifier (HuggingFace ViTForImageClassification layout), random weights.

- input pixel_values float32 [batch, 3, H, W] ("batch" symbolic), output logits [batch, classes];
- patch embedding: Conv 16x16 stride 16 (3 -> hidden) -> Reshape [B, hidden, N] (shape subgraph) ->
  Transpose [B, N, hidden];
- class token: Expand([1, 1, hidden] initializer to [B, 1, hidden]) -> Concat axis 1;
  position embedding Add ([1, N + 1, hidden]);
- pre-LN encoder layers: LayerNorm, self-attention (three MatMul/Add projections, heads via
  Reshape/Transpose, q scaled by Mul(1/sqrt(d)) before q.kT, Softmax), residual Add; LayerNorm,
  MLP with GELU written decomposed with Erf, residual Add;
- final LayerNorm, token 0 via Gather(axis 1), Gemm classifier head.
LayerNorm is the opset-17 LayerNormalization op by default (ln_op=False writes it decomposed).

Defaults: hidden 768, 12 heads, MLP 3072, 224x224 input (196 patches + class token), but only
4 encoder layers instead of ViT-B's 12 to keep the test fast (layers=12 gives the full depth).
"""
import math

import numpy as np

from .common import FLOAT, GraphBuilder


def _ln(g, x, hidden, scope, ln_op):
    if ln_op:
        return g.layer_norm_op(x, hidden, scope, eps=1e-12)
    return g.layer_norm_decomposed(x, hidden, scope, eps=1e-12)


def _attention(g, x, hidden, heads, scope):
    hd = hidden // heads
    s = f"{scope}/attention/attention"
    q = g.matmul_add(x, hidden, hidden, f"{s}/query", std=0.05)
    k = g.matmul_add(x, hidden, hidden, f"{s}/key", std=0.05)
    v = g.matmul_add(x, hidden, hidden, f"{s}/value")

    def heads_view(t, perm):
        r = g.reshape_dyn(t, [("dim", t, 0), [-1, heads, hd]], s)
        return g.op("Transpose", [r], scope=s, perm=perm)

    qh = g.op("Mul", [heads_view(q, [0, 2, 1, 3]), g.const(1.0 / math.sqrt(hd), np.float32)], scope=s)
    kt = heads_view(k, [0, 2, 3, 1])
    vh = heads_view(v, [0, 2, 1, 3])
    p = g.op("Softmax", [g.op("MatMul", [qh, kt], scope=s)], scope=s, axis=-1)
    a = g.op("MatMul", [p, vh], scope=s)
    a = g.op("Transpose", [a], scope=s, perm=[0, 2, 1, 3])
    a = g.reshape_dyn(a, [("dim", a, 0), ("dim", a, 1), [hidden]], s)
    return g.matmul_add(a, hidden, hidden, f"{scope}/attention/output/dense")


def _layer(g, x, hidden, heads, mlp, scope, ln_op):
    h = _ln(g, x, hidden, f"{scope}/layernorm_before", ln_op)
    x = g.op("Add", [_attention(g, h, hidden, heads, scope), x], scope=scope)
    h = _ln(g, x, hidden, f"{scope}/layernorm_after", ln_op)
    h = g.matmul_add(h, hidden, mlp, f"{scope}/intermediate/dense")
    h = g.gelu_erf(h, f"{scope}/intermediate/intermediate_act_fn")
    h = g.matmul_add(h, mlp, hidden, f"{scope}/output/dense")
    return g.op("Add", [h, x], scope=f"{scope}/output")


def build(seed=0, batch=1, image_size=224, patch=16, layers=4, hidden=768, heads=12, mlp=3072,
          num_classes=1000, ln_op=True):
    """Returns (model, feeds): input "pixel_values", output "logits"."""
    g = GraphBuilder(seed)
    x_in = "pixel_values"
    n_patches = (image_size // patch) ** 2
    e = "/vit/embeddings"
    pw = g.normal(f"{e}.patch_embeddings.projection.weight", (hidden, 3, patch, patch),
                  math.sqrt(1.0 / (3 * patch * patch)))
    pb = g.normal(f"{e}.patch_embeddings.projection.bias", (hidden,), 0.02)
    y = g.op("Conv", [x_in, pw, pb], scope=f"{e}/patch_embeddings/projection",
             kernel_shape=[patch, patch], strides=[patch, patch], pads=[0, 0, 0, 0])
    y = g.reshape_dyn(y, [("dim", y, 0), ("dim", y, 1), [-1]], f"{e}/patch_embeddings")
    y = g.op("Transpose", [y], scope=f"{e}/patch_embeddings", perm=[0, 2, 1])
    cls = g.normal(f"{e}.cls_token", (1, 1, hidden), 0.5)
    cls_shape = g.op("Concat", [g.dim(x_in, 0, e), g.const([1, 1])], scope=e, axis=0)
    cls = g.op("Expand", [cls, cls_shape], scope=e)
    y = g.op("Concat", [cls, y], scope=e, axis=1)
    y = g.op("Add", [y, g.normal(f"{e}.position_embeddings", (1, n_patches + 1, hidden), 0.5)], scope=e)
    for i in range(layers):
        y = _layer(g, y, hidden, heads, mlp, f"/vit/encoder/layer.{i}", ln_op)
    y = _ln(g, y, hidden, "/vit/layernorm", ln_op)
    y = g.op("Gather", [y, g.const(0)], scope="", axis=1)
    w = g.normal("classifier.weight", (num_classes, hidden), 0.02)
    b = g.normal("classifier.bias", (num_classes,), 0.02)
    g.op("Gemm", [y, w, b], scope="/classifier", outputs=["logits"], transB=1)
    model = g.model("vit", [(x_in, FLOAT, ["batch", 3, image_size, image_size])],
                    [("logits", FLOAT, ["batch", num_classes])])
    rng = np.random.default_rng(seed + 1)
    feeds = {x_in: rng.standard_normal((batch, 3, image_size, image_size)).astype(np.float32)}
    return model, feeds
