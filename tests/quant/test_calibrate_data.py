"""kiln calibrate's data folder: .npz batches holding an array per input (multi-input models), arrays of several
batches cut to the model's static batch size, and the errors a person can act on (a missing array, a wrong dtype or
shape, an empty folder, a malformed archive) naming the file and input."""
import json
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("calib_data")
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("MatMul", ["s", "w"], ["y"])], "two_inputs",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 6]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = d / "two_inputs.onnx"
    onnx.save(m, path)
    return d, path


def test_npz_batches_per_input_and_split(kiln, model):
    d, path = model
    data = d / "data"
    data.mkdir()
    rng = np.random.default_rng(1)
    for i in range(3):  # 8 rows per file: two batches of the model's 4
        np.savez(data / f"b{i}.npz", a=rng.standard_normal((8, 6)).astype(np.float32),
                 b=(rng.standard_normal((8, 6)) * 10).astype(np.float32))
    np.savez_compressed(data / "b3.npz", a=np.ones((4, 6), np.float32), b=np.full((4, 6), 100, np.float32))
    r = run([kiln, "calibrate", f"--onnx={path}", f"--data={data}", "--algo=minmax", f"--calib={d / 'c.cache'}",
             "--backend=cpu", f"--json={d / 'r.json'}"])
    assert r.returncode == 0, r.stderr
    rep = json.loads((d / "r.json").read_text())
    assert rep["batches"] == 7  # 3 files x 2 + 1
    t = {x["name"]: x for x in rep["tensors"]}
    assert set(t) >= {"a", "b", "s", "y"}
    assert t["b"]["amax"] == 100.0  # minmax sees the compressed archive's constant
    assert t["b"]["values"] == 7 * 24
    # --calibBatches stops early
    r = run([kiln, "calibrate", f"--onnx={path}", f"--data={data}", f"--calib={d / 'c2.cache'}", "--backend=cpu",
             "--calibBatches=2", f"--json={d / 'r2.json'}"])
    assert r.returncode == 0 and json.loads((d / "r2.json").read_text())["batches"] == 2


@pytest.mark.parametrize("case,expect", [
    ("missing", "has no array for input 'b'"),
    ("dtype", "is float64 but input 'a' takes float32"),
    ("rows", "holds 5 rows along the batch axis"),
    ("npy", "a .npy file feeds a model with one input"),
    ("corrupt", "is not a readable .npz"),
    ("empty", "holds no .npz or .npy file"),
])
def test_bad_data_is_named(kiln, model, case, expect):
    d, path = model
    data = d / f"bad_{case}"
    data.mkdir()
    f32 = np.zeros((4, 6), np.float32)
    if case == "missing":
        np.savez(data / "x.npz", a=f32)
    elif case == "dtype":
        np.savez(data / "x.npz", a=np.zeros((4, 6)), b=f32)
    elif case == "rows":
        np.savez(data / "x.npz", a=np.zeros((5, 6), np.float32), b=np.zeros((5, 6), np.float32))
    elif case == "npy":
        np.save(data / "x.npy", f32)
    elif case == "corrupt":
        (data / "x.npz").write_bytes(b"PK\x03\x04 not really a zip")
    r = run([kiln, "calibrate", f"--onnx={path}", f"--data={data}", f"--calib={d / 'bad.cache'}", "--backend=cpu"])
    assert r.returncode != 0
    assert expect in r.stderr, r.stderr
    if case not in ("empty",):
        assert str(data) in r.stderr
