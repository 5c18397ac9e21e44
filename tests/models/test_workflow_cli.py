"""The documents' workflow commands (tools/kiln/workflow.h): convert, optimize, calibrate --model, benchmark each
run the kiln command they stand for and print its JSON report last on stdout; missing or bad arguments are errors
naming them."""
import json
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
                           helper.make_node("Relu", ["h"], ["y"], name="relu")], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
                          [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def _report(stdout):
    """The JSON object that ends stdout (human-readable lines come before it)."""
    start = stdout.rfind("\n{")
    return json.loads(stdout[start + 1:] if start >= 0 else stdout)


def _ok(kiln, *args):
    p = subprocess.run([kiln, *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return _report(p.stdout)


def test_convert_optimize_benchmark_calibrate(kiln, tmp_path):
    model = _model(tmp_path / "m.onnx")
    r = _ok(kiln, "convert", "--input", model, "--output", str(tmp_path / "m.engine"), "--backend=cpu")
    assert r["operation"] == "convert" and r["status"] == "success"
    assert r["input_model"] == model and r["output_engine"] == str(tmp_path / "m.engine")
    for k in ("precision", "workspace_mb", "dynamic_shapes"):
        assert k in r["configuration"]
    for k in ("layer_fusions", "reformats_eliminated", "tactics_selected"):
        assert k in r["optimization"]
    for k in ("build_time_s", "engine_size_mb", "estimated_latency_ms"):
        assert k in r["performance"]
    assert (tmp_path / "m.engine").stat().st_size > 0

    r = _ok(kiln, "optimize", "--model", model, "--precision", "fp32", "--backend=cpu")
    assert r["operation"] == "optimize" and r["configuration"]["precision"] == "fp32"
    assert (tmp_path / "m.fp32.engine").exists() and r["output_engine"] == str(tmp_path / "m.fp32.engine")

    r = _ok(kiln, "benchmark", "--engine", str(tmp_path / "m.engine"), "--iterations", "5", "--duration=0",
            "--warmUp=0")
    assert r["operation"] == "benchmark" and r["inference"]["throughput_qps"] > 0 and "latency_ms" in r["inference"]

    (tmp_path / "calib").mkdir()
    np.save(tmp_path / "calib" / "b0.npy", np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32))
    r = _ok(kiln, "calibrate", "--model", model, "--data", str(tmp_path / "calib"), "--backend=cpu")
    assert r["operation"] == "calibrate" and (tmp_path / "m.cache").exists()


def test_workflow_errors_name_what_is_wrong(kiln, tmp_path):
    model = _model(tmp_path / "m.onnx")
    for args, want in [(["convert", "--input", model], "--output"),
                       (["optimize", "--model", model, "--precision", "fp64"], "fp64"),
                       (["optimize", "--precision", "fp16"], "--model"),
                       (["benchmark"], "--engine")]:
        p = subprocess.run([kiln, *args], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and want in p.stderr, (args, p.stderr)
