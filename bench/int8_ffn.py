#!/usr/bin/env python3
"""Writes a BERT-base feed-forward block (768 -> 3072 -> ReLU -> 768, 4096 rows: batch 32 x sequence 128) twice, for
INT8 against FP16 measurements of kiln's quantized GEMMs:

    OUT/ffn_qdq.onnx   explicitly quantized: Q/DQ on the activations, int8 weights per output channel (DQ axis 1)
    OUT/ffn_fp.onnx    the same weights dequantized, no Q/DQ (build it with --fp16)

    python3 bench/int8_ffn.py OUT
    kiln build --onnx=OUT/ffn_qdq.onnx --saveEngine=i8.engine && kiln bench --loadEngine=i8.engine --useCudaGraph
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

ROWS, HIDDEN, FFN = 4096, 768, 3072


def quantize_columns(w):
    s = (np.abs(w).max(axis=0) / 127).astype(np.float32)
    return np.clip(np.round(w / s), -127, 127).astype(np.int8), s


def save(nodes, init, path):
    g = helper.make_graph(nodes, "ffn", [helper.make_tensor_value_info("x", T.FLOAT, [ROWS, HIDDEN])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [ROWS, HIDDEN])], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    q1, s1 = quantize_columns(rng.standard_normal((HIDDEN, FFN)).astype(np.float32) * 0.03)
    q2, s2 = quantize_columns(rng.standard_normal((FFN, HIDDEN)).astype(np.float32) * 0.02)
    b1 = (rng.standard_normal(FFN) * 0.1).astype(np.float32)
    b2 = (rng.standard_normal(HIDDEN) * 0.1).astype(np.float32)
    arrays = [(q1, "q1"), (s1, "s1"), (q2, "q2"), (s2, "s2"), (b1, "b1"), (b2, "b2"),
              (np.array(0.02, np.float32), "sx"), (np.array(0, np.int8), "z"), (np.array(0.05, np.float32), "sh")]
    n = helper.make_node
    save([n("QuantizeLinear", ["x", "sx", "z"], ["xq"]), n("DequantizeLinear", ["xq", "sx", "z"], ["xd"]),
          n("DequantizeLinear", ["q1", "s1"], ["w1"], axis=1), n("MatMul", ["xd", "w1"], ["m1"]),
          n("Add", ["m1", "b1"], ["a1"]), n("Relu", ["a1"], ["r1"]),
          n("QuantizeLinear", ["r1", "sh", "z"], ["hq"]), n("DequantizeLinear", ["hq", "sh", "z"], ["hd"]),
          n("DequantizeLinear", ["q2", "s2"], ["w2"], axis=1), n("MatMul", ["hd", "w2"], ["m2"]),
          n("Add", ["m2", "b2"], ["y"])],
         [numpy_helper.from_array(a, k) for a, k in arrays], os.path.join(out, "ffn_qdq.onnx"))
    floats = [((q1 * s1).astype(np.float32), "w1"), ((q2 * s2).astype(np.float32), "w2"), (b1, "b1"), (b2, "b2")]
    save([n("MatMul", ["x", "w1"], ["m1"]), n("Add", ["m1", "b1"], ["a1"]), n("Relu", ["a1"], ["r1"]),
          n("MatMul", ["r1", "w2"], ["m2"]), n("Add", ["m2", "b2"], ["y"])],
         [numpy_helper.from_array(a, k) for a, k in floats], os.path.join(out, "ffn_fp.onnx"))
    print(f"wrote {out}/ffn_qdq.onnx and {out}/ffn_fp.onnx ({ROWS} rows, {HIDDEN} -> {FFN} -> {HIDDEN})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/models")
