#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora into OUT/<target>/ (scripts/fuzz runs this once per build).

onnx_import: small hand-made models (static and dynamic inputs, initializers, external data, subgraph-free
             fusion patterns) and a spread of the ONNX backend node tests' model.onnx files;
engine_load: engines that `kiln build` writes for some of those models (static and with a min/opt/max profile);
npy:         numpy.save of every dtype kiln reads, format versions 1 and 2, odd shapes;
timing_cache: caches in kiln's format; cli_parsers: flag values, the first byte picking the parser;
calib_data:  INT8 calibration caches and .npz archives, the first byte picking the reader.

Usage: fuzz/make_corpus.py OUT --kiln build/bin/kiln
"""
import argparse
import io
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def hand_models():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 4, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32), "b")
    mm = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "mm")
    shape = numpy_helper.from_array(np.array([2, -1], dtype=np.int64), "shape")
    yield "relu", _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [4, 32])], [_vi("y", [4, 32])])
    yield "relu_dynamic", _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", ["batch", 8])],
                                 [_vi("y", ["batch", 8])])
    yield "conv_relu", _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
        [_vi("x", [1, 4, 6, 6])], [_vi("y", [1, 8, 6, 6])], [w, b])
    yield "matmul_add_gelu", _model(
        [helper.make_node("MatMul", ["x", "mm"], ["m"]), helper.make_node("Add", ["m", "m"], ["a"]),
         helper.make_node("Erf", ["a"], ["e"]), helper.make_node("Mul", ["a", "e"], ["y"])],
        [_vi("x", [3, 16])], [_vi("y", [3, 8])], [mm])
    yield "reshape_transpose_softmax", _model(
        [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
         helper.make_node("Softmax", ["t"], ["y"], axis=-1)],
        [_vi("x", [2, 6])], [_vi("y", [6, 2])], [shape])
    yield "split_concat", _model(
        [helper.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2),
         helper.make_node("Concat", ["b", "a"], ["y"], axis=1)],
        [_vi("x", [2, 6])], [_vi("y", [2, 6])], opset=18)
    yield "reduce_mean_layernorm", _model(
        [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1]), helper.make_node("Sub", ["x", "m"], ["d"]),
         helper.make_node("Mul", ["d", "d"], ["s"]), helper.make_node("ReduceMean", ["s"], ["v"], axes=[-1]),
         helper.make_node("Sqrt", ["v"], ["q"]), helper.make_node("Div", ["d", "q"], ["y"])],
        [_vi("x", [2, 3, 8])], [_vi("y", [2, 3, 8])], opset=17)
    # INT4 weight-only: DequantizeLinear(int4 [16, 8], blocks of 8 along K) -> MatMul (kiln.WeightOnlyMatMul).
    q4 = helper.make_tensor("q4", TensorProto.INT4, [16, 8], rng.integers(-8, 8, 128).tolist())
    s4 = numpy_helper.from_array((rng.random((2, 8)) * 0.1 + 0.01).astype(np.float32), "s4")
    yield "matmul_int4_weight_only", _model(
        [helper.make_node("DequantizeLinear", ["q4", "s4"], ["w4"], axis=0, block_size=8),
         helper.make_node("MatMul", ["x", "w4"], ["y"])],
        [_vi("x", [3, 16])], [_vi("y", [3, 8])], [q4, s4], opset=21)
    ext = onnx.TensorProto()
    ext.name, ext.data_type = "e", TensorProto.FLOAT
    ext.dims.extend([4, 32])
    ext.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", "512")):
        ext.external_data.add(key=k, value=v)
    yield "external_data", _model([helper.make_node("Add", ["x", "e"], ["y"])], [_vi("x", [4, 32])],
                                  [_vi("y", [4, 32])], [ext])


def node_test_root():
    """The node tests scripts/setup wrote (KILN_NODE_TESTS, else build/onnx-node-tests), else an onnx <= 1.16
    package's own data."""
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (os.environ.get("KILN_NODE_TESTS", ""), os.path.join(here, "..", "build", "onnx-node-tests"),
                 os.path.join(here, "..", "build-san", "onnx-node-tests"),
                 os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")):
        if root and os.path.isdir(root):
            return root
    return None


def node_test_models(limit):
    root = node_test_root()
    if root is None:
        return
    names = sorted(os.listdir(root))
    step = max(1, len(names) // limit)
    for name in names[::step]:
        path = os.path.join(root, name, "model.onnx")
        if os.path.exists(path):
            with open(path, "rb") as f:
                yield "node_" + name, f.read()


def write(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy_bytes(arr, version):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=(version, 0))
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--kiln", help="a kiln binary, to build the engine seeds (skipped without it)")
    ap.add_argument("--node-tests", type=int, default=150, help="how many ONNX node-test models to take")
    a = ap.parse_args()

    models = {name: m.SerializeToString() for name, m in hand_models()}
    for name, data in models.items():
        write(a.out, "onnx_import", name + ".onnx", data)
    for name, data in node_test_models(a.node_tests):
        write(a.out, "onnx_import", name + ".onnx", data)

    if a.kiln:
        with tempfile.TemporaryDirectory() as tmp:
            builds = [("relu", []), ("conv_relu", []), ("matmul_add_gelu", []), ("reshape_transpose_softmax", []),
                      ("split_concat", []), ("reduce_mean_layernorm", []), ("matmul_int4_weight_only", []),
                      ("relu_dynamic", ["--minShapes=x:1x8", "--optShapes=x:2x8", "--maxShapes=x:4x8"])]
            for name, flags in builds:
                model, engine = os.path.join(tmp, name + ".onnx"), os.path.join(tmp, name + ".engine")
                with open(model, "wb") as f:
                    f.write(models[name])
                # A small tensor cap (kept in the engine, checked at run time) keeps the fuzzer's runs small.
                p = subprocess.run([a.kiln, "build", f"--onnx={model}", f"--saveEngine={engine}",
                                    "--maxTensorElements=4194304", *flags],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    sys.exit(f"make_corpus: kiln build {name} failed:\n{p.stderr}")
                with open(engine, "rb") as f:
                    write(a.out, "engine_load", name + ".engine", f.read())

    arrays = [np.zeros((4, 32), np.float32), np.arange(6, dtype=np.int64).reshape(2, 3), np.ones((0, 3), np.float16),
              np.array(3.5, np.float64), np.array([True, False]), np.arange(5, dtype=np.uint8),
              np.arange(4, dtype=np.int8).reshape(1, 1, 4), np.arange(3, dtype=np.int16), np.arange(3, dtype=np.uint16),
              np.arange(3, dtype=np.int32), np.arange(3, dtype=np.uint32), np.arange(3, dtype=np.uint64)]
    for i, arr in enumerate(arrays):
        for version in (1, 2):
            write(a.out, "npy", f"a{i}_v{version}.npy", npy_bytes(arr, version))

    caches = [
        '{"format": "kiln-timing-cache", "version": 1, "device": "NVIDIA H100|sm_90|cuda 13000|cublasLt 1|cudnn 2", '
        '"entries": {"Conv(kernel_shape=[3,3]) in0:float16[1,3,8,8]": {"tactic": "cudnn:eng=3", "ms": 0.0123, '
        '"candidates": 5}, "MatMul() in0:float32[7,9]": {"tactic": "cublaslt:00ff", "ms": 0.5, "candidates": 8}}}',
        '{"format": "kiln-timing-cache", "version": 1, "device": "", "entries": {}}',
        '{"format": "something-else"}',
    ]
    for i, c in enumerate(caches):
        write(a.out, "timing_cache", f"c{i}.json", c.encode())

    flags = [(0, "x:1x3x224x224"), (0, "input_ids:1x128,attention_mask:1x128"), (0, "'a:b':2x2"), (0, "x:0x4"),
             (1, "fp16:chw"), (1, "fp32:chw,int8:linear,bf16:chw"), (2, "workspace:1024,tacticSharedMem:0.5"),
             (2, "a:b:c"), (3, "fp16"), (3, "bf16"), (3, "fp8")]
    for i, (which, text) in enumerate(flags):
        write(a.out, "cli_parsers", f"f{i}", bytes([which]) + text.encode())

    # calib_data: byte 0 even -> a calibration cache, odd -> a .npz archive (stored and deflated).
    cal = ["TRT-8601-EntropyCalibration2\ninput: 3c010a14\nconv1: 3d1032a6\n(Unnamed ITensor* 3): 3c3604b4\n",
           "TRT-7000-MinMaxCalibration\nx:0: 3f800000\n", "TRT-8601-PercentileCalibration\n"]
    for i, c in enumerate(cal):
        write(a.out, "calib_data", f"cache{i}", bytes([0]) + c.encode())
    for i, compressed in enumerate((False, True)):
        buf = io.BytesIO()
        (np.savez_compressed if compressed else np.savez)(buf, image=np.zeros((2, 1, 8, 8), np.float32),
                                                          ids=np.arange(6, dtype=np.int64).reshape(2, 3))
        write(a.out, "calib_data", f"npz{i}", bytes([1]) + buf.getvalue())


if __name__ == "__main__":
    main()
