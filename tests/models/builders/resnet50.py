"""ResNet-50 with torchvision's exact topology (resnet50, v1.5) and random weights.

7x7/2 stem conv + BN + ReLU, 3x3/2 max pool, bottleneck stages [3, 4, 6, 3]
(stride on the 3x3 conv, 1x1 conv + BN downsample on the first block of each
stage), global average pool, Flatten, Gemm 2048 -> 1000. BatchNormalization is
kept as separate nodes (as torch.onnx.export(training=TrainingMode.PRESERVE)
or an unfused exporter writes them). Convs use He (fan_out) init as torchvision
does; BN statistics are random but sane and the last BN of each block has a
smaller gamma, so activations stay O(1) through the 16 residual additions.
"""
import math

import numpy as np

from .common import FLOAT, GraphBuilder


def _conv(g, x, cin, cout, k, stride, scope):
    std = math.sqrt(2.0 / (cout * k * k))  # kaiming_normal_, mode="fan_out"
    w = g.normal(f"{scope}.weight", (cout, cin, k, k), std)
    pad = k // 2
    return g.op("Conv", [x, w], scope=scope, kernel_shape=[k, k], strides=[stride, stride],
                pads=[pad] * 4, dilations=[1, 1], group=1)


def _bn(g, x, c, scope, gamma_scale=1.0):
    gamma = g.uniform(f"{scope}.weight", (c,), 0.7 * gamma_scale, 1.1 * gamma_scale)
    beta = g.normal(f"{scope}.bias", (c,), 0.1)
    mean = g.normal(f"{scope}.running_mean", (c,), 0.1)
    var = g.uniform(f"{scope}.running_var", (c,), 0.7, 1.4)
    return g.op("BatchNormalization", [x, gamma, beta, mean, var], scope=scope,
                epsilon=1e-5, momentum=0.9)


def _bottleneck(g, x, inplanes, planes, stride, scope):
    out = _conv(g, x, inplanes, planes, 1, 1, f"{scope}/conv1")
    out = _bn(g, out, planes, f"{scope}/bn1")
    out = g.op("Relu", [out], scope=f"{scope}/relu")
    out = _conv(g, out, planes, planes, 3, stride, f"{scope}/conv2")
    out = _bn(g, out, planes, f"{scope}/bn2")
    out = g.op("Relu", [out], scope=f"{scope}/relu_1")
    out = _conv(g, out, planes, planes * 4, 1, 1, f"{scope}/conv3")
    out = _bn(g, out, planes * 4, f"{scope}/bn3", gamma_scale=0.5)
    identity = x
    if stride != 1 or inplanes != planes * 4:
        identity = _conv(g, x, inplanes, planes * 4, 1, stride, f"{scope}/downsample/0")
        identity = _bn(g, identity, planes * 4, f"{scope}/downsample/1")
    out = g.op("Add", [out, identity], scope=scope)
    return g.op("Relu", [out], scope=f"{scope}/relu_2")


def build(seed=0, batch=1, image_size=224, num_classes=1000):
    """Returns (model, feeds): input "input" [batch,3,H,W] float32, output "output"."""
    g = GraphBuilder(seed)
    x = "input"
    y = _conv(g, x, 3, 64, 7, 2, "/conv1")
    y = _bn(g, y, 64, "/bn1")
    y = g.op("Relu", [y], scope="/relu")
    y = g.op("MaxPool", [y], scope="/maxpool", kernel_shape=[3, 3], strides=[2, 2],
             pads=[1, 1, 1, 1], ceil_mode=0, dilations=[1, 1])
    inplanes = 64
    for li, (planes, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
        for bi in range(blocks):
            s = stride if bi == 0 else 1
            y = _bottleneck(g, y, inplanes, planes, s, f"/layer{li + 1}/{bi}")
            inplanes = planes * 4
    y = g.op("GlobalAveragePool", [y], scope="/avgpool")
    y = g.op("Flatten", [y], scope="", axis=1)
    w = g.uniform("fc.weight", (num_classes, 2048), -1 / math.sqrt(2048), 1 / math.sqrt(2048))
    b = g.uniform("fc.bias", (num_classes,), -1 / math.sqrt(2048), 1 / math.sqrt(2048))
    g.op("Gemm", [y, w, b], scope="/fc", outputs=["output"], alpha=1.0, beta=1.0, transB=1)
    model = g.model("resnet50", [(x, FLOAT, [batch, 3, image_size, image_size])],
                    [("output", FLOAT, [batch, num_classes])])
    rng = np.random.default_rng(seed + 1)
    feeds = {x: rng.standard_normal((batch, 3, image_size, image_size)).astype(np.float32)}
    return model, feeds
