"""A small CNN trained on scikit-learn's bundled handwritten digits (1797 real 8x8 scans) with numpy, seed fixed, and
written as ONNX: the INT8 accuracy tests' model. Training takes a few seconds on one core.

    image [N,1,8,8] -> Conv 3x3 (8) -> Relu -> Conv 3x3 stride 2 (16) -> Relu -> Flatten -> Gemm (10) -> logits
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits


def load_split(seed=0, n_train=1200):
    """(train images, train labels, test images, test labels); images float32 [N,1,8,8] in [0, 1]."""
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    y = d.target.astype(np.int64)
    p = np.random.default_rng(seed).permutation(len(x))
    return x[p[:n_train]], y[p[:n_train]], x[p[n_train:]], y[p[n_train:]]


def _im2col(x, k, stride, pad):
    n, c, h, w = x.shape
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    cols = np.empty((n, c, k, k, oh, ow), x.dtype)
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
    return cols.reshape(n, c * k * k, oh * ow), oh, ow


def _col2im(dcols, shape, k, stride, pad, oh, ow):
    n, c, h, w = shape
    dxp = np.zeros((n, c, h + 2 * pad, w + 2 * pad), dcols.dtype)
    d = dcols.reshape(n, c, k, k, oh, ow)
    for i in range(k):
        for j in range(k):
            dxp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride] += d[:, :, i, j]
    return dxp[:, :, pad:pad + h, pad:pad + w]


class _Conv:
    def __init__(self, rng, cin, cout, k, stride, pad):
        self.k, self.stride, self.pad = k, stride, pad
        self.w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        self.b = np.zeros(cout, np.float32)

    def forward(self, x):
        self.shape = x.shape
        self.cols, self.oh, self.ow = _im2col(x, self.k, self.stride, self.pad)
        y = np.einsum("mk,nkp->nmp", self.w.reshape(len(self.w), -1), self.cols) + self.b[None, :, None]
        return y.reshape(x.shape[0], len(self.w), self.oh, self.ow)

    def backward(self, dy):
        dy = dy.reshape(dy.shape[0], dy.shape[1], -1)
        self.dw = np.einsum("nmp,nkp->mk", dy, self.cols).reshape(self.w.shape)
        self.db = dy.sum(axis=(0, 2))
        dcols = np.einsum("mk,nmp->nkp", self.w.reshape(len(self.w), -1), dy)
        return _col2im(dcols, self.shape, self.k, self.stride, self.pad, self.oh, self.ow)


class DigitsCnn:
    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.c1 = _Conv(rng, 1, 8, 3, 1, 1)
        self.c2 = _Conv(rng, 8, 16, 3, 2, 1)
        self.w3 = (rng.standard_normal((10, 256)) * np.sqrt(1.0 / 256)).astype(np.float32)
        self.b3 = np.zeros(10, np.float32)

    def forward(self, x):
        self.a1 = np.maximum(self.c1.forward(x), 0)
        self.a2 = np.maximum(self.c2.forward(self.a1), 0)
        self.f = self.a2.reshape(len(x), -1)
        return self.f @ self.w3.T + self.b3

    def train(self, x, y, epochs=25, batch=32, lr=0.05, momentum=0.9, seed=0):
        rng = np.random.default_rng(seed)
        params = [(self.c1, "w"), (self.c1, "b"), (self.c2, "w"), (self.c2, "b"), (self, "w3"), (self, "b3")]
        vel = [np.zeros_like(getattr(o, n)) for o, n in params]
        for _ in range(epochs):
            order = rng.permutation(len(x))
            for s in range(0, len(x), batch):
                idx = order[s:s + batch]
                logits = self.forward(x[idx])
                p = np.exp(logits - logits.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                p[np.arange(len(idx)), y[idx]] -= 1
                dlogits = p / len(idx)
                self.dw3, self.db3 = dlogits.T @ self.f, dlogits.sum(axis=0)
                da2 = (dlogits @ self.w3).reshape(self.a2.shape) * (self.a2 > 0)
                da1 = self.c2.backward(da2) * (self.a1 > 0)
                self.c1.backward(da1)
                grads = [self.c1.dw, self.c1.db, self.c2.dw, self.c2.db, self.dw3, self.db3]
                for i, ((o, n), g) in enumerate(zip(params, grads)):
                    vel[i] = momentum * vel[i] - lr * g.astype(np.float32)
                    setattr(o, n, (getattr(o, n) + vel[i]).astype(np.float32))
        return self

    def to_onnx(self, path):
        init = [numpy_helper.from_array(a, n) for a, n in [(self.c1.w, "conv1.w"), (self.c1.b, "conv1.b"),
                                                           (self.c2.w, "conv2.w"), (self.c2.b, "conv2.b"),
                                                           (self.w3, "fc.w"), (self.b3, "fc.b")]]
        nodes = [
            helper.make_node("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], "conv1", kernel_shape=[3, 3],
                             pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c1"], ["r1"], "relu1"),
            helper.make_node("Conv", ["r1", "conv2.w", "conv2.b"], ["c2"], "conv2", kernel_shape=[3, 3],
                             pads=[1, 1, 1, 1], strides=[2, 2]),
            helper.make_node("Relu", ["c2"], ["r2"], "relu2"),
            helper.make_node("Flatten", ["r2"], ["flat"], "flatten"),
            helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], "fc", transB=1),
        ]
        graph = helper.make_graph(
            nodes, "digits_cnn",
            [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 8, 8])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], init)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, path)
