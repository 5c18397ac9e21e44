"""Vision models built around RoiAlign and AffineGrid/GridSample, laid out as torch.onnx exports them.

- roi_head (opset 17): a small conv backbone (two stride-2 Conv + Relu, so features are 1/4 of the image) ->
  torchvision.ops.roi_align (RoiAlign, avg, half_pixel i.e. aligned=True, spatial_scale 1/4, sampling_ratio 2) on
  boxes given as an input ([K, 4] x1,y1,x2,y2 in image pixels) with their batch indices -> Flatten -> Gemm + Relu ->
  Gemm -> Softmax over the classes (a Fast R-CNN box head). Outputs the class scores and the pooled features.
  coordinate_transformation_mode="output_half_pixel" is torchvision's aligned=False; mode="max" the max pooling.
- spatial_transformer (opset 20): the STN of the PyTorch tutorial, small: a localization net (Conv, MaxPool, Relu,
  Conv, MaxPool, Relu, Flatten, Gemm, Relu, Gemm to 6 values initialized near the identity) -> Reshape to theta
  [N, 2, 3] -> F.affine_grid (AffineGrid, align_corners=0) -> F.grid_sample (GridSample, linear, zeros padding) ->
  Conv + Relu. Outputs the features and the resampled image.
"""
import numpy as np

from .common import FLOAT, INT64, GraphBuilder


def _conv(g, x, c_in, c_out, k, scope, stride=1, pad=None):
    pad = k // 2 if pad is None else pad
    w = g.normal(f"{scope}.weight", (c_out, c_in, k, k), np.sqrt(2.0 / (c_in * k * k)))
    b = g.normal(f"{scope}.bias", (c_out,), 0.05)
    return g.op("Conv", [x, w, b], scope=scope, kernel_shape=[k, k], strides=[stride, stride],
                pads=[pad] * 4, dilations=[1, 1], group=1)


def roi_head(seed=0, batch=2, image=32, channels=8, pooled=4, rois=6, classes=5, mode="avg",
             coordinate_transformation_mode="half_pixel"):
    g = GraphBuilder(seed)
    x = g.op("Relu", [_conv(g, "images", 3, channels, 3, "/backbone/conv1", stride=2)], scope="/backbone/relu1")
    feat = g.op("Relu", [_conv(g, x, channels, channels, 3, "/backbone/conv2", stride=2)], scope="/backbone/relu2")
    pooled_feat = g.op("RoiAlign", [feat, "boxes", "box_batch_idx"], scope="/roi_align",
                       outputs=["pooled"], mode=mode, output_height=pooled, output_width=pooled,
                       sampling_ratio=2, spatial_scale=0.25,
                       coordinate_transformation_mode=coordinate_transformation_mode)
    flat = g.op("Flatten", [pooled_feat], scope="/Flatten", axis=1)
    d = channels * pooled * pooled
    w6 = g.normal("fc6.weight", (32, d), np.sqrt(2.0 / d))
    h = g.op("Relu", [g.op("Gemm", [flat, w6, g.normal("fc6.bias", (32,), 0.05)], scope="/fc6", transB=1)],
             scope="/relu6")
    w7 = g.normal("cls_score.weight", (classes, 32), np.sqrt(2.0 / 32))
    logits = g.op("Gemm", [h, w7, g.normal("cls_score.bias", (classes,), 0.05)], scope="/cls_score", transB=1)
    g.op("Softmax", [logits], scope="/Softmax", outputs=["scores"], axis=-1)
    model = g.model("roi_head", [("images", FLOAT, [batch, 3, image, image]), ("boxes", FLOAT, [rois, 4]),
                                 ("box_batch_idx", INT64, [rois])],
                    [("scores", FLOAT, [rois, classes]), ("pooled", FLOAT, [rois, channels, pooled, pooled])],
                    opset=17)
    rng = np.random.default_rng(seed + 1000)
    xy = rng.uniform(0, image * 0.6, (rois, 2))
    wh = rng.uniform(3, image * 0.5, (rois, 2))
    boxes = np.concatenate([xy, np.minimum(xy + wh, image - 1)], axis=1).astype(np.float32)
    boxes[0] = [-2.0, -2.0, 5.0, 6.0]  # a box partly outside the image (samples beyond the edge)
    feeds = {"images": rng.standard_normal((batch, 3, image, image)).astype(np.float32),
             "boxes": boxes, "box_batch_idx": (np.arange(rois) % batch).astype(np.int64)}
    return model, feeds


def spatial_transformer(seed=0, batch=2, channels=1, image=20, align_corners=0):
    g = GraphBuilder(seed)
    x = _conv(g, "images", channels, 8, 5, "/localization/0", pad=0)                          # 16
    x = g.op("MaxPool", [x], scope="/localization/1", kernel_shape=[2, 2], strides=[2, 2])  # 8
    x = g.op("Relu", [x], scope="/localization/2")
    x = _conv(g, x, 8, 10, 3, "/localization/3", pad=0)                                     # 6
    x = g.op("MaxPool", [x], scope="/localization/4", kernel_shape=[2, 2], strides=[2, 2])  # 3
    x = g.op("Relu", [x], scope="/localization/5")
    x = g.op("Flatten", [x], scope="/Flatten", axis=1)
    w1 = g.normal("fc_loc.0.weight", (16, 90), np.sqrt(2.0 / 90))
    x = g.op("Relu", [g.op("Gemm", [x, w1, g.normal("fc_loc.0.bias", (16,), 0.05)], scope="/fc_loc/0", transB=1)],
             scope="/fc_loc/1")
    # The tutorial zero-initializes this layer with an identity bias; small weights make theta depend on the image.
    w2 = g.normal("fc_loc.2.weight", (6, 16), 0.05)
    b2 = g.init("fc_loc.2.bias", np.array([0.9, 0.15, 0.05, -0.1, 0.85, -0.08], np.float32))
    t = g.op("Gemm", [x, w2, b2], scope="/fc_loc/2", transB=1)
    theta = g.op("Reshape", [t, g.const([-1, 2, 3])], scope="/Reshape", outputs=["theta"])
    grid = g.op("AffineGrid", [theta, g.const([batch, channels, image, image])], scope="/AffineGrid",
                align_corners=align_corners)
    warped = g.op("GridSample", ["images", grid], scope="/GridSample", outputs=["warped"], mode="linear",
                  padding_mode="zeros", align_corners=align_corners)
    y = g.op("Relu", [_conv(g, warped, channels, 6, 3, "/conv1")], scope="/relu1")
    y = g.op("MaxPool", [y], scope="/pool1", kernel_shape=[2, 2], strides=[2, 2])
    g.op("Identity", [y], scope="/out", outputs=["features"])
    model = g.model("spatial_transformer", [("images", FLOAT, [batch, channels, image, image])],
                    [("features", FLOAT, [batch, 6, image // 2, image // 2]),
                     ("warped", FLOAT, [batch, channels, image, image]), ("theta", FLOAT, [batch, 2, 3])],
                    opset=20)
    rng = np.random.default_rng(seed + 1000)
    return model, {"images": rng.standard_normal((batch, channels, image, image)).astype(np.float32)}
