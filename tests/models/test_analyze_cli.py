"""kiln analyze: the optimizer's fusions by pass, and each pointwise layer left after a layer with a fusable epilogue
with the reason (other readers, an engine output, a fused pointwise program), as text and JSON."""
import json
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(path):
    rng = np.random.default_rng(0)
    init = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
            for n, s in (("W", (8, 8)), ("B", (8,)), ("W2", (8, 8)), ("W3", (8, 8)))]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="fc"),
             helper.make_node("Add", ["h", "B"], ["hb"], name="bias"),
             helper.make_node("Relu", ["hb"], ["r"], name="relu"),                 # fuses into fc
             helper.make_node("MatMul", ["r", "W2"], ["h2"], name="fc2"),
             helper.make_node("Sigmoid", ["h2"], ["s"], name="sig"),              # h2 also an output: stays apart
             helper.make_node("MatMul", ["s", "W3"], ["h3"], name="fc3"),
             helper.make_node("Sigmoid", ["h3"], ["s3"], name="sig3"),
             helper.make_node("Tanh", ["h3"], ["t3"], name="tanh3"),
             helper.make_node("Add", ["s3", "t3"], ["y"], name="sum")]            # one pointwise program
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8]),
                           helper.make_tensor_value_info("h2", TensorProto.FLOAT, [4, 8])], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def test_analyze_reports_fusions_and_reasons(kiln, tmp_path):
    model = _model(tmp_path / "m.onnx")
    p = subprocess.run([kiln, "analyze", f"--onnx={model}", "--backend=cpu", f"--json={tmp_path / 'a.json'}"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    r = json.loads((tmp_path / "a.json").read_text())
    assert r["operation"] == "analyze" and r["layers_before"] == 9
    assert any(f["pass"] == "fuse-bias-activation" and "fc" in f["rewrite"] for f in r["fused"])
    pairs = {(n["producer"], n["consumer"]): n["reason"] for n in r["not_fused"]}
    assert "output of the engine" in pairs[("fc2", "sig")]
    program = [reason for (prod, _), reason in pairs.items() if prod == "fc3"]
    assert program and "program" in program[0]
    assert "not fused (" in p.stdout and "fused (" in p.stdout
    p = subprocess.run([kiln, "analyze", f"--loadEngine={tmp_path / 'x.engine'}"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode != 0 and "--onnx" in p.stderr
