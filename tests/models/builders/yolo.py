"""YOLOv8n-style detector (ultralytics layout, export format), random weights.

- input images float32 [1, 3, S, S] (S = 320 default, 640 works too), output "output0"
  [1, 4 + classes, anchors] with anchors = (S/8)^2 + (S/16)^2 + (S/32)^2 (2100 at 320);
- Conv blocks: Conv (BN folded into weight/bias as ultralytics exports, or fold_bn=False for a
  separate BatchNormalization) + SiLU written as Sigmoid * Mul;
- backbone: Conv/2 x2, C2f (1x1 conv -> Split in two -> bottlenecks with residual Add ->
  Concat -> 1x1 conv), Conv/2 ... , SPPF (three chained MaxPool 5x5 s1 p2 + Concat);
- neck (FPN/PAN): Resize (nearest, scales [1,1,2,2], asymmetric/floor as torch exports
  nn.Upsample) + Concat, C2f, stride-2 Conv + Concat, C2f;
- detect head: per level two 3x3 Conv + 1x1 Conv2d for box (4*16 DFL bins) and for classes,
  Concat, Reshape [1, C, -1], Concat over levels, Split into box/cls, DFL (Reshape, Transpose,
  Softmax, 1x1 Conv with weights 0..15), dist2bbox decode with anchor points (Slice, Sub, Add,
  Div, Concat, Mul strides), Sigmoid of class scores, final Concat.
Width is YOLOv8n's (channels 16..256), depths [1, 2, 2, 1] as in yolov8n.

Weights: random convs make a deep SiLU network drift to tiny or huge activations, so the builder
evaluates the network eagerly in numpy on the test input while it writes the nodes and sets
each conv's output channels to std 1 plus a small random offset (what trained BatchNorm does):
with BN folded that scales the weights and sets the bias, with BN kept separate the measured
statistics become the BN running mean/var. All activations stay O(1) and the DFL softmax and
class sigmoid are not saturated.
"""
import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .common import FLOAT, GraphBuilder

REG_MAX = 16


def _np_conv(x, w, stride, pad):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k = w.shape[2]
    win = sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("nchwij,ocij->nohw", win, w, optimize=True)


def _np_silu(x):
    return x / (1.0 + np.exp(-x))


class _Yolo:
    """Writes the nodes and evaluates them in numpy (self.v: value name -> array)."""

    def __init__(self, g, fold_bn, x_name, x):
        self.g = g
        self.fold_bn = fold_bn
        self.v = {x_name: x.astype(np.float64)}

    def conv(self, x, c1, c2, k, s, scope, act=True, target_mean=0.0):
        """Conv (+ BatchNormalization unless folded) (+ SiLU as Sigmoid * Mul)."""
        g = self.g
        pname = scope.lstrip("/").replace("/", ".")  # parameter names as in the state dict
        w = g.rng.standard_normal((c2, c1, k, k)) / math.sqrt(c1 * k * k)
        y = _np_conv(self.v[x], w, s, k // 2)
        mu, sd = y.mean(axis=(0, 2, 3)), y.std(axis=(0, 2, 3))
        sd = np.maximum(sd, 0.5 * np.median(sd) + 1e-6)  # no huge gain on a near-constant channel
        beta = target_mean + g.rng.normal(0.0, 0.2, c2)
        attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4, dilations=[1, 1], group=1)
        if self.fold_bn or not act:
            w = w / sd[:, None, None, None]
            b = beta - mu / sd
            out = g.op("Conv", [x, g.init(f"{pname}.conv.weight", w.astype(np.float32)),
                                g.init(f"{pname}.conv.bias", b.astype(np.float32))],
                       scope=f"{scope}/conv", **attrs)
            y = (y - mu[None, :, None, None]) / sd[None, :, None, None] + beta[None, :, None, None]
        else:
            gamma = g.rng.uniform(0.8, 1.2, c2)
            eps = 1e-3
            var = np.maximum(sd * sd - eps, 1e-6)
            out = g.op("Conv", [x, g.init(f"{pname}.conv.weight", w.astype(np.float32))],
                       scope=f"{scope}/conv", **attrs)
            bn = [g.init(f"{pname}.bn.{n}", a.astype(np.float32)) for n, a in
                  (("weight", gamma), ("bias", beta), ("running_mean", mu), ("running_var", var))]
            out = g.op("BatchNormalization", [out] + bn, scope=f"{scope}/bn", epsilon=eps)
            y = (gamma[None, :, None, None] * (y - mu[None, :, None, None]) /
                 np.sqrt(var + eps)[None, :, None, None] + beta[None, :, None, None])
        if act:
            sig = g.op("Sigmoid", [out], scope=f"{scope}/act")
            out = g.op("Mul", [out, sig], scope=f"{scope}/act")
            y = _np_silu(y)
        self.v[out] = y
        return out

    def split(self, x, sizes, scope):
        outs = self.g.op("Split", [x, self.g.const(sizes)], scope=scope, n_out=len(sizes), axis=1)
        for o, a in zip(outs, np.split(self.v[x], np.cumsum(sizes)[:-1], axis=1)):
            self.v[o] = a
        return list(outs)

    def concat(self, xs, scope):
        out = self.g.op("Concat", xs, scope=scope, axis=1)
        self.v[out] = np.concatenate([self.v[x] for x in xs], axis=1)
        return out

    def add(self, a, b, scope):
        out = self.g.op("Add", [a, b], scope=scope)
        self.v[out] = self.v[a] + self.v[b]
        return out

    def c2f(self, x, c1, c2, n, shortcut, scope):
        c = c2 // 2
        parts = self.split(self.conv(x, c1, 2 * c, 1, 1, f"{scope}/cv1"), [c, c], scope)
        for i in range(n):
            b = f"{scope}/m.{i}"
            h = self.conv(parts[-1], c, c, 3, 1, f"{b}/cv1")
            h = self.conv(h, c, c, 3, 1, f"{b}/cv2")
            parts.append(self.add(parts[-1], h, b) if shortcut else h)
        return self.conv(self.concat(parts, scope), (2 + n) * c, c2, 1, 1, f"{scope}/cv2")

    def sppf(self, x, c1, c2, scope):
        c = c1 // 2
        y = [self.conv(x, c1, c, 1, 1, f"{scope}/cv1")]
        for _ in range(3):
            out = self.g.op("MaxPool", [y[-1]], scope=f"{scope}/m", kernel_shape=[5, 5], strides=[1, 1],
                            pads=[2, 2, 2, 2], ceil_mode=0, dilations=[1, 1])
            xp = np.pad(self.v[y[-1]], ((0, 0), (0, 0), (2, 2), (2, 2)), constant_values=-np.inf)
            self.v[out] = sliding_window_view(xp, (5, 5), axis=(2, 3)).max(axis=(4, 5))
            y.append(out)
        return self.conv(self.concat(y, scope), 4 * c, c2, 1, 1, f"{scope}/cv2")

    def upsample(self, x, scope):
        out = self.g.op("Resize", [x, "", self.g.const([1.0, 1.0, 2.0, 2.0], np.float32)], scope=scope,
                        mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        self.v[out] = self.v[x].repeat(2, axis=2).repeat(2, axis=3)
        return out


def _anchors(image_size, strides):
    points, stride_col = [], []
    for s in strides:
        n = image_size // s
        sy, sx = np.meshgrid(np.arange(n) + 0.5, np.arange(n) + 0.5, indexing="ij")
        points.append(np.stack([sx.ravel(), sy.ravel()], 0))
        stride_col.append(np.full((1, n * n), s))
    return (np.concatenate(points, 1)[None].astype(np.float32),
            np.concatenate(stride_col, 1)[None].astype(np.float32))


def build(seed=0, batch=1, image_size=320, num_classes=80, fold_bn=True):
    """Returns (model, feeds): input "images", output "output0"."""
    g = GraphBuilder(seed)
    x_in = "images"
    rng = np.random.default_rng(seed + 1)
    feeds = {x_in: rng.uniform(0.0, 1.0, (batch, 3, image_size, image_size)).astype(np.float32)}
    y = _Yolo(g, fold_bn, x_in, feeds[x_in])
    x = y.conv(x_in, 3, 16, 3, 2, "/model.0")
    x = y.conv(x, 16, 32, 3, 2, "/model.1")
    x = y.c2f(x, 32, 32, 1, True, "/model.2")
    x = y.conv(x, 32, 64, 3, 2, "/model.3")
    p3 = y.c2f(x, 64, 64, 2, True, "/model.4")
    x = y.conv(p3, 64, 128, 3, 2, "/model.5")
    p4 = y.c2f(x, 128, 128, 2, True, "/model.6")
    x = y.conv(p4, 128, 256, 3, 2, "/model.7")
    x = y.c2f(x, 256, 256, 1, True, "/model.8")
    p5 = y.sppf(x, 256, 256, "/model.9")
    x = y.concat([y.upsample(p5, "/model.10"), p4], "/model.11")
    h12 = y.c2f(x, 384, 128, 1, False, "/model.12")
    x = y.concat([y.upsample(h12, "/model.13"), p3], "/model.14")
    out3 = y.c2f(x, 192, 64, 1, False, "/model.15")
    x = y.concat([y.conv(out3, 64, 64, 3, 2, "/model.16"), h12], "/model.17")
    out4 = y.c2f(x, 192, 128, 1, False, "/model.18")
    x = y.concat([y.conv(out4, 128, 128, 3, 2, "/model.19"), p5], "/model.20")
    out5 = y.c2f(x, 384, 256, 1, False, "/model.21")

    # Detect head.
    d = "/model.22"
    c2, c3 = max(16, 64 // 4, REG_MAX * 4), max(64, min(num_classes, 100))
    no = 4 * REG_MAX + num_classes
    levels = []
    for i, (feat, ch) in enumerate([(out3, 64), (out4, 128), (out5, 256)]):
        b = y.conv(feat, ch, c2, 3, 1, f"{d}/cv2.{i}/cv2.{i}.0")
        b = y.conv(b, c2, c2, 3, 1, f"{d}/cv2.{i}/cv2.{i}.1")
        b = y.conv(b, c2, 4 * REG_MAX, 1, 1, f"{d}/cv2.{i}/cv2.{i}.2", act=False)
        c = y.conv(feat, ch, c3, 3, 1, f"{d}/cv3.{i}/cv3.{i}.0")
        c = y.conv(c, c3, c3, 3, 1, f"{d}/cv3.{i}/cv3.{i}.1")
        c = y.conv(c, c3, num_classes, 1, 1, f"{d}/cv3.{i}/cv3.{i}.2", act=False, target_mean=-2.0)
        lvl = g.op("Concat", [b, c], scope=d, axis=1)
        levels.append(g.op("Reshape", [lvl, g.const([batch, no, -1])], scope=d))
    cat = g.op("Concat", levels, scope=d, axis=2)
    box, cls = g.op("Split", [cat, g.const([4 * REG_MAX, num_classes])], scope=d, n_out=2, axis=1)
    # DFL: softmax over the 16 bins, expectation via a fixed 1x1 conv.
    dfl = f"{d}/dfl"
    t = g.op("Reshape", [box, g.const([batch, 4, REG_MAX, -1])], scope=dfl)
    t = g.op("Transpose", [t], scope=dfl, perm=[0, 2, 1, 3])
    t = g.op("Softmax", [t], scope=dfl, axis=1)
    dw = g.init("model.22.dfl.conv.weight", np.arange(REG_MAX, dtype=np.float32).reshape(1, REG_MAX, 1, 1))
    t = g.op("Conv", [t, dw], scope=f"{dfl}/conv", kernel_shape=[1, 1])
    dist = g.op("Reshape", [t, g.const([batch, 4, -1])], scope=dfl)
    # dist2bbox (xywh) and scaling by the stride.
    lt = g.op("Slice", [dist, g.const([0]), g.const([2]), g.const([1])], scope=d)
    rb = g.op("Slice", [dist, g.const([2]), g.const([4]), g.const([1])], scope=d)
    anchors, strides = _anchors(image_size, [8, 16, 32])
    anc = g.init("anchors", anchors)
    x1y1 = g.op("Sub", [anc, lt], scope=d)
    x2y2 = g.op("Add", [anc, rb], scope=d)
    cxy = g.op("Div", [g.op("Add", [x1y1, x2y2], scope=d), g.const(2.0, np.float32)], scope=d)
    wh = g.op("Sub", [x2y2, x1y1], scope=d)
    dbox = g.op("Mul", [g.op("Concat", [cxy, wh], scope=d, axis=1), g.init("strides", strides)], scope=d)
    scores = g.op("Sigmoid", [cls], scope=d)
    g.op("Concat", [dbox, scores], scope=d, outputs=["output0"], axis=1)
    n_anchors = anchors.shape[2]
    model = g.model("yolov8n", [(x_in, FLOAT, [batch, 3, image_size, image_size])],
                    [("output0", FLOAT, [batch, 4 + num_classes, n_anchors])])
    return model, feeds
