"""Writes one-GEMM explicitly quantized models shaped like BERT-base's FFN1 at batch 32, sequence 128 (X [4096, 768]
times W [768, 3072], bias, an activation, the output quantized): int8 and float8e4m3fn, with GELU (erf form, as
exporters write it), Relu or no activation. Timing each (kiln bench --dumpProfile) shows what the epilogue costs.

    python3 bench/qgemm_epilogue_probe.py DIR
"""
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

M, K, N = 4096, 768, 3072


def model(kind, act, path):
    rng = np.random.default_rng(0)
    fp8 = kind == "fp8"
    qt = TensorProto.FLOAT8E4M3FN if fp8 else TensorProto.INT8
    levels = 448.0 if fp8 else 127.0
    w = rng.standard_normal((K, N)).astype(np.float32) * 0.05
    sw = (np.abs(w).max(axis=0) / levels).astype(np.float32)
    wq = w / sw
    wq = wq if fp8 else np.clip(np.rint(wq), -127, 127)
    init = [
        (helper.make_tensor("wq", qt, [K, N], wq.astype(np.float32).flatten().tolist()) if fp8
         else numpy_helper.from_array(wq.astype(np.int8), "wq")),
        numpy_helper.from_array(sw, "sw"),
        numpy_helper.from_array(np.array(3.0 / levels, np.float32), "sx"),
        numpy_helper.from_array(np.array(2.0 / levels, np.float32), "sy"),
        helper.make_tensor("z", qt, [], [0]),
        helper.make_tensor("zw", qt, [N], [0] * N),
        numpy_helper.from_array(rng.standard_normal(N).astype(np.float32) * 0.1, "b"),
        numpy_helper.from_array(np.array(np.sqrt(2.0), np.float32), "sqrt2"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
        numpy_helper.from_array(np.array(0.5, np.float32), "half"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "z"], ["xq"], "qx"),
        helper.make_node("DequantizeLinear", ["xq", "sx", "z"], ["xd"], "dqx"),
        helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], "dqw", axis=1),
        helper.make_node("MatMul", ["xd", "wd"], ["mm"], "ffn1"),
        helper.make_node("Add", ["mm", "b"], ["h"], "bias"),
    ]
    cur = "h"
    if act == "gelu":  # x * 0.5 * (1 + erf(x / sqrt 2)), as torch's exporter writes it
        nodes += [helper.make_node("Div", ["h", "sqrt2"], ["g1"], "gelu_div"),
                  helper.make_node("Erf", ["g1"], ["g2"], "gelu_erf"),
                  helper.make_node("Add", ["g2", "one"], ["g3"], "gelu_add"),
                  helper.make_node("Mul", ["h", "g3"], ["g4"], "gelu_mul"),
                  helper.make_node("Mul", ["g4", "half"], ["a"], "gelu_half")]
        cur = "a"
    elif act == "relu":
        nodes.append(helper.make_node("Relu", ["h"], ["a"], "relu"))
        cur = "a"
    nodes += [helper.make_node("QuantizeLinear", [cur, "sy", "z"], ["yq"], "qy"),
              helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["y"], "dqy")]
    g = helper.make_graph(nodes, f"ffn1_{kind}_{act}",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [M, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    onnx.save(m, str(path))


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for kind in ("int8", "fp8"):
        for act in ("gelu", "relu", "none"):
            model(kind, act, out / f"ffn1_{kind}_{act}.onnx")
    print("ok")
