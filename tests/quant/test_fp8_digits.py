"""FP8 (float8e4m3fn) on a model trained on real data, on the CPU backend: the digits CNN (digits.py) calibrated by
`kiln calibrate --algo=minmax` and built with `kiln build --fp8 --calib` makes its matrix product an FP8 layer (its
convolutions stay float: FP8 layers are matrix products) and keeps held-out top-1 within 0.5 points of FP32; and the
same model with float8 Q/DQ nodes written around its Gemm (an explicitly quantized FP8 model, as NVIDIA ModelOpt
writes them) builds into one FP8 layer whose outputs match onnxruntime's run of that model."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from digits_cli import build, predict, prepare, run


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return prepare(tmp_path_factory.mktemp("digits_fp8"))


def test_calibrated_fp8_keeps_accuracy(kiln, setup):
    d, n = setup["dir"], len(setup["xte"])
    cache = d / "digits_minmax.cache"
    run([kiln, "calibrate", f"--onnx={setup['fp32']}", f"--data={setup['calib']}", "--algo=minmax",
         f"--calib={cache}", "--backend=cpu"])
    build(kiln, setup["fp32"], d / "fp32.engine", n)
    rep = build(kiln, setup["fp32"], d / "fp8.engine", n, "--fp8", f"--calib={cache}")
    counts = rep["optimization"]["op_counts"]
    assert counts.get("kiln.QMatMul") == 1 and "kiln.QConv" not in counts, counts
    images = d / "test_images.npy"
    fp32 = predict(kiln, d / "fp32.engine", images, d / "out_fp32").argmax(1)
    fp8_logits = predict(kiln, d / "fp8.engine", images, d / "out_fp8")
    fp8 = fp8_logits.argmax(1)
    acc32, acc8 = (fp32 == setup["yte"]).mean(), (fp8 == setup["yte"]).mean()
    assert acc32 > 0.9, acc32
    assert acc8 >= acc32 - 0.005, (acc32, acc8)
    assert not np.array_equal(predict(kiln, d / "fp32.engine", images, d / "out_fp32b"), fp8_logits)  # quantized


def explicit_fp8_model(fp32_path, images, out_path):
    """The float model with float8 Q/DQ around its Gemm: the activation per tensor (max |x| over `images` / 448), the
    weight per output channel (axis 0 of the transposed [10, 256] weight), zero points float8 zeros; opset 19."""
    m = onnx.load(str(fp32_path))
    g = m.graph
    w = next(numpy_helper.to_array(t) for t in g.initializer if t.name == "fc.w")
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    inter = onnx.helper.make_tensor_value_info("flat", TensorProto.FLOAT, None)
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    probe.graph.output.append(inter)
    flat = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        ["flat"], {"image": images})[0]
    sx = np.float32(np.abs(flat).max() / 448.0)
    sw = (np.abs(w).max(axis=1) / 448.0).astype(np.float32)
    wq = helper.make_tensor("fc.w_fp8", TensorProto.FLOAT8E4M3FN, list(w.shape),
                            (w / sw[:, None]).astype(np.float32).flatten().tolist())
    zero = helper.make_tensor("zp", TensorProto.FLOAT8E4M3FN, [], [0.0])
    zero_w = helper.make_tensor("zp_w", TensorProto.FLOAT8E4M3FN, [10], [0.0] * 10)
    g.initializer.extend([wq, zero, zero_w, numpy_helper.from_array(np.array(sx), "sx"),
                          numpy_helper.from_array(sw, "sw")])
    gemm = next(n for n in g.node if n.op_type == "Gemm")
    gemm.input[0] = "flat_dq"
    gemm.input[1] = "fc.w_dq"
    at = list(g.node).index(gemm)
    for k, node in enumerate([
            helper.make_node("QuantizeLinear", ["flat", "sx", "zp"], ["flat_q"], "flat_quantize"),
            helper.make_node("DequantizeLinear", ["flat_q", "sx", "zp"], ["flat_dq"], "flat_dequantize"),
            helper.make_node("DequantizeLinear", ["fc.w_fp8", "sw", "zp_w"], ["fc.w_dq"], "fc_w_dequantize", axis=0)]):
        g.node.insert(at + k, node)
    keep = [t for t in g.initializer if t.name != "fc.w"]
    del g.initializer[:]
    g.initializer.extend(keep)
    del m.opset_import[:]
    m.opset_import.append(helper.make_opsetid("", 19))
    m.ir_version = 9
    onnx.checker.check_model(m)
    onnx.save(m, str(out_path))
    del sess


def test_explicit_fp8_qdq_matches_onnxruntime(kiln, setup):
    d, n = setup["dir"], len(setup["xte"])
    qdq = d / "digits_fp8_qdq.onnx"
    explicit_fp8_model(setup["fp32"], setup["xte"][:256], qdq)
    rep = build(kiln, qdq, d / "qdq.engine", n)
    counts = rep["optimization"]["op_counts"]
    assert counts.get("kiln.QMatMul") == 1 and "DequantizeLinear" not in counts, counts
    got = predict(kiln, d / "qdq.engine", d / "test_images.npy", d / "out_qdq")
    want = ort.InferenceSession(str(qdq), providers=["CPUExecutionProvider"]).run(
        ["logits"], {"image": setup["xte"]})[0]
    # The same float8 values; the sums and the scale products are rounded in another order.
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert (got.argmax(1) == want.argmax(1)).mean() >= 0.99
