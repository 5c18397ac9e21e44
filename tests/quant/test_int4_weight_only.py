"""INT4 weight-only from a model quantized elsewhere (issue 13): onnxruntime's 4-bit weight quantizer in QDQ format
(DequantizeLinear of int4/uint4 blocked weights -> MatMul, opset 21) turns a float MLP into an INT4 weight-only model;
kiln builds every MatMul of it into one kiln.WeightOnlyMatMul on the CPU backend and its outputs match onnxruntime's
run of the same model (as written: DequantizeLinear then MatMul), for symmetric (int4) and asymmetric (uint4 with zero points) blocks of 32 and 128."""
import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxruntime.quantization import QuantFormat  # noqa: E402

try:  # onnxruntime 1.20 renamed the module
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer as MatMul4BitsQuantizer
except ImportError:
    from onnxruntime.quantization.matmul_4bits_quantizer import MatMul4BitsQuantizer


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{' '.join(cmd)}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def mlp(path, k=256, hidden=384, n=96, seed=0):
    """x [B, k] -> MatMul -> Relu -> MatMul -> Add(bias) -> y [B, n]: two weights ORT's quantizer takes."""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((k, hidden)) / np.sqrt(k)).astype(np.float32)
    w2 = (rng.standard_normal((hidden, n)) / np.sqrt(hidden)).astype(np.float32)
    b2 = rng.standard_normal(n).astype(np.float32) * 0.1
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["hr"], name="relu"),
             helper.make_node("MatMul", ["hr", "w2"], ["p"], name="fc2"),
             helper.make_node("Add", ["p", "b2"], ["y"], name="bias")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", n])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
                           numpy_helper.from_array(b2, "b2")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.save(m, path)


@pytest.mark.parametrize("block,symmetric", [(32, True), (128, False)])
def test_onnxruntime_int4_qdq_model_builds_weight_only_and_matches(kiln, tmp_path, block, symmetric):
    fp32 = tmp_path / "mlp.onnx"
    mlp(str(fp32))
    q = MatMul4BitsQuantizer(onnx.load(str(fp32)), block_size=block, is_symmetric=symmetric,
                             quant_format=QuantFormat.QDQ)
    q.process()
    int4 = tmp_path / "mlp_int4.onnx"
    q.model.save_model_to_file(str(int4), use_external_data_format=False)
    dq = [n for n in onnx.load(str(int4)).graph.node if n.op_type == "DequantizeLinear"]
    assert len(dq) == 2, "onnxruntime's quantizer no longer writes DequantizeLinear -> MatMul"

    x = np.random.default_rng(1).standard_normal((5, 256)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    # onnxruntime runs the model as written with its graph optimizations off: on, it rewrites DQ -> MatMul into its
    # MatMulNBits kernel, whose arithmetic differs from the ops' (about 1% here; ONNX defines the DQ then MatMul).
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(str(int4), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]

    engine, report = tmp_path / "int4.engine", tmp_path / "int4.json"
    r = run([kiln, "build", f"--onnx={int4}", "--backend=cpu", "--shapes=x:5x256", f"--saveEngine={engine}",
             f"--json={report}", "--profilingVerbosity=detailed"])
    assert "int4 weight-only: 2 layer(s)" in r.stdout, r.stdout
    rep = json.loads(report.read_text())
    counts = rep["optimization"]["op_counts"]
    assert counts.get("kiln.WeightOnlyMatMul") == 2, counts
    assert "DequantizeLinear" not in counts, counts
    assert rep["int4_weight_only"] == {"layers": 2, "fallbacks": []}, rep["int4_weight_only"]
    want_type = "int4" if symmetric else "uint4"
    info = run([kiln, "inspect", f"--loadEngine={engine}", "--dumpLayerInfo"]).stdout
    assert f"float32 ({want_type} weights)" in info and f"{want_type} weights, " in info, info
    out = tmp_path / "out"
    run([kiln, "run", f"--loadEngine={engine}", f"--loadInputs=x:{tmp_path / 'x.npy'}", f"--exportOutput={out}"])
    got = np.load(out / "y.npy")
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # and the quantization is real: the float model differs from both by more than the tolerance above
    ref = ort.InferenceSession(str(fp32), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.abs(ref - want).max() > 1e-3


def test_int4_weights_flag_quantizes_a_float_model_at_build_time(kiln, tmp_path):
    fp32 = tmp_path / "mlp.onnx"
    mlp(str(fp32))
    x = np.random.default_rng(2).standard_normal((5, 256)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    engine, report = tmp_path / "w4.engine", tmp_path / "w4.json"
    r = run([kiln, "build", f"--onnx={fp32}", "--backend=cpu", "--shapes=x:5x256", "--int4Weights=32",
             f"--saveEngine={engine}", f"--json={report}"])
    assert "int4 weight-only: 2 layer(s)" in r.stdout, r.stdout
    rep = json.loads(report.read_text())
    assert rep["configuration"]["int4_weight_block_size"] == 32
    assert rep["int4_weight_only"]["layers"] == 2
    out = tmp_path / "out"
    run([kiln, "run", f"--loadEngine={engine}", f"--loadInputs=x:{tmp_path / 'x.npy'}", f"--exportOutput={out}"])
    got = np.load(out / "y.npy")
    ref = ort.InferenceSession(str(fp32), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert 1e-3 < rel < 0.2, rel  # int4 round-to-nearest noise on random weights: real, and bounded
