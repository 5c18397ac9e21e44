"""A YOLOv8-style detector (about yolov8n's width and depth), written here so the zoo needs no download.

Conv-BN-SiLU blocks, C2f blocks, SPPF, a PAN neck (nearest 2x upsample + concat), and a decoupled, DFL-free head:
4 box + 80 class channels per anchor over strides 8/16/32, decoded to [N, 84, 8400] at 640x640
(cx, cy, w, h in pixels, then 80 sigmoid class scores).
"""
import torch
from torch import nn


class Conv(nn.Module):
    """Conv2d (no bias) + BatchNorm + SiLU."""

    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True):
        super().__init__()
        self.cv1 = Conv(c1, c2, 3)
        self.cv2 = Conv(c2, c2, 3)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    """Split in two, run n bottlenecks on the second half keeping every intermediate, concat, 1x1 conv."""

    def __init__(self, c1, c2, n=1, shortcut=False):
        super().__init__()
        self.c = c2 // 2
        self.cv1 = Conv(c1, 2 * self.c, 1)
        self.cv2 = Conv((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(Bottleneck(self.c, self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1)
        self.cv2 = Conv(c_ * 4, c2, 1)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))


class Detect(nn.Module):
    def __init__(self, nc=80, ch=(64, 128, 256), strides=(8, 16, 32), img=640):
        super().__init__()
        self.nc = nc
        c2, c3 = max(16, ch[0] // 4, 64), max(ch[0], min(nc, 100))
        self.box = nn.ModuleList(nn.Sequential(Conv(c, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4, 1)) for c in ch)
        self.cls = nn.ModuleList(nn.Sequential(Conv(c, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for c in ch)
        points, stride = [], []
        for s in strides:  # anchor points at cell centres, in grid units of each level
            n = img // s
            ys, xs = torch.meshgrid(torch.arange(n) + 0.5, torch.arange(n) + 0.5, indexing="ij")
            points.append(torch.stack([xs.flatten(), ys.flatten()]))
            stride.append(torch.full((1, n * n), float(s)))
        self.register_buffer("anchors", torch.cat(points, 1).unsqueeze(0), persistent=False)  # [1, 2, 8400]
        self.register_buffer("strides", torch.cat(stride, 1).unsqueeze(0), persistent=False)  # [1, 1, 8400]

    def forward(self, feats):
        y = torch.cat([torch.cat([b(f), c(f)], 1).flatten(2) for f, b, c in zip(feats, self.box, self.cls)], 2)
        box, cls = y.split([4, self.nc], 1)
        lt, rb = box.chunk(2, 1)  # distances left-top / right-bottom of the anchor point
        x1y1, x2y2 = self.anchors - lt, self.anchors + rb
        xywh = torch.cat([(x1y1 + x2y2) / 2, x2y2 - x1y1], 1) * self.strides
        return torch.cat([xywh, cls.sigmoid()], 1)  # [N, 84, 8400]


class YOLOv8Style(nn.Module):
    def __init__(self, widths=(16, 32, 64, 128, 256), depths=(1, 2, 2, 1), nc=80):
        super().__init__()
        w0, w1, w2, w3, w4 = widths
        self.stem = nn.Sequential(Conv(3, w0, 3, 2), Conv(w0, w1, 3, 2), C2f(w1, w1, depths[0], True))  # P2/4
        self.p3 = nn.Sequential(Conv(w1, w2, 3, 2), C2f(w2, w2, depths[1], True))  # P3/8
        self.p4 = nn.Sequential(Conv(w2, w3, 3, 2), C2f(w3, w3, depths[2], True))  # P4/16
        self.p5 = nn.Sequential(Conv(w3, w4, 3, 2), C2f(w4, w4, depths[3], True), SPPF(w4, w4))  # P5/32
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.td4 = C2f(w4 + w3, w3)  # top-down
        self.td3 = C2f(w3 + w2, w2)
        self.down3 = Conv(w2, w2, 3, 2)  # bottom-up
        self.bu4 = C2f(w2 + w3, w3)
        self.down4 = Conv(w3, w3, 3, 2)
        self.bu5 = C2f(w3 + w4, w4)
        self.detect = Detect(nc, (w2, w3, w4))

    def forward(self, x):
        p3 = self.p3(self.stem(x))
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        t4 = self.td4(torch.cat([self.up(p5), p4], 1))
        o3 = self.td3(torch.cat([self.up(t4), p3], 1))
        o4 = self.bu4(torch.cat([self.down3(o3), t4], 1))
        o5 = self.bu5(torch.cat([self.down4(o4), p5], 1))
        return self.detect([o3, o4, o5])
