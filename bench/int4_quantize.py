"""Quantizes the constant weights of an ONNX model's MatMul nodes to INT4 weight-only, in QDQ form (what onnxruntime's
4-bit quantizer writes with QuantFormat.QDQ and what kiln's fuse-weight-only pass reads): W [K, N] becomes
DequantizeLinear(int4 [K, N], scale [K / block, N], axis 0, block_size) -> MatMul, round to nearest, symmetric
(scale = max |w| of the block / 7; a zero block gets scale 1), scales in the weight's float type. The model moves to
opset 21 (block_size needs it) with onnx's version converter. Weights of fewer than --min-elements stay float.

Usage: python bench/int4_quantize.py IN.onnx OUT.onnx [--block 128] [--min-elements 65536]"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, version_converter


def pack_int4(q):
    flat = q.astype(np.int8).reshape(-1)
    if flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.int8)])
    lo, hi = flat[0::2] & 0xF, flat[1::2] & 0xF
    return (lo | (hi << 4)).astype(np.uint8).tobytes()


def quantize(w, block):
    k, n = w.shape
    blocks = (k + block - 1) // block
    pad = blocks * block - k
    wf = np.concatenate([w.astype(np.float32), np.zeros((pad, n), np.float32)]) if pad else w.astype(np.float32)
    amax = np.abs(wf.reshape(blocks, block, n)).max(axis=1)
    scale = np.where(amax > 0, amax / 7.0, 1.0).astype(w.dtype)
    scale = np.where(scale > 0, scale, np.ones_like(scale))  # a block too small for the scale's type: scale 1
    s = np.repeat(scale.astype(np.float32), block, axis=0)[:k]
    q = np.clip(np.rint(w.astype(np.float32) / s), -8, 7).astype(np.int8)
    return q, scale


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--min-elements", type=int, default=65536)
    a = ap.parse_args()
    m = onnx.load(a.src)
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 21:
        m = version_converter.convert_version(m, 21)
    m.ir_version = max(m.ir_version, 10)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    readers = {}
    for node in g.node:
        for i in node.input:
            readers[i] = readers.get(i, 0) + 1
    new_nodes, done = [], 0
    for node in g.node:
        w = inits.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if w is not None and len(w.dims) == 2 and readers[w.name] == 1 and \
                w.data_type in (TensorProto.FLOAT, TensorProto.FLOAT16) and w.dims[0] * w.dims[1] >= a.min_elements:
            arr = numpy_helper.to_array(w)
            q, scale = quantize(arr, a.block)
            qname, sname, dname = w.name + "_int4", w.name + "_scale", w.name + "_dq"
            g.initializer.remove(w)
            g.initializer.append(helper.make_tensor(qname, TensorProto.INT4, list(q.shape), pack_int4(q), raw=True))
            g.initializer.append(numpy_helper.from_array(scale, sname))
            new_nodes.append(helper.make_node("DequantizeLinear", [qname, sname], [dname], name=w.name + "/dq",
                                              axis=0, block_size=a.block))
            node.input[1] = dname
            done += 1
        new_nodes.append(node)
    del g.node[:]
    g.node.extend(new_nodes)
    onnx.save(m, a.dst)
    print(f"int4_quantize: {done} MatMul weights to INT4 (block {a.block}) -> {a.dst}")


if __name__ == "__main__":
    main()
