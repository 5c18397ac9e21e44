"""Bad input to the command line gets a sentence and a non-zero exit, never a crash, a hang or a silent misread
(issue 11): malformed .npy headers, special files as inputs, and numeric flags that CLI11's range checks let
through."""
import os
import struct
import subprocess

import onnx
import pytest
from onnx import TensorProto, helper


def _relu_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def _npy(path, shape_text, data=b"\0" * 512, descr="<f4"):
    """A version-1 .npy file whose header declares `shape_text` verbatim."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, shape_text)
    header = header.ljust(118) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
    return path


def _run(kiln, *args, timeout=60):
    p = subprocess.run([kiln, *args], capture_output=True, text=True, timeout=timeout)
    assert p.returncode > 0, f"expected an error exit, got {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p


@pytest.fixture()
def relu(tmp_path):
    return _relu_model(tmp_path / "relu.onnx")


@pytest.mark.parametrize("shape,says", [
    ("-4, -32", "not a non-negative integer"),
    ("4, 32x", "separated by commas"),
    ("a7b, 3c2", "not a non-negative integer"),
    ("12345678901234567890123, 1", "larger than 2^40"),
    ("1048576, 1048576", "is truncated"),
    ("4, 33", "is truncated"),
])
def test_malformed_npy_headers_are_errors(kiln, relu, tmp_path, shape, says):
    f = _npy(tmp_path / "x.npy", shape)
    p = _run(kiln, "run", f"--onnx={relu}", f"--loadInputs=x:{f}")
    assert says in p.stderr, p.stderr
    assert "x.npy" in p.stderr, "the error names the file"


def test_a_well_formed_npy_still_loads(kiln, relu, tmp_path):
    f = _npy(tmp_path / "x.npy", "4, 32", data=b"\0" * (4 * 32 * 4))
    p = subprocess.run([kiln, "run", f"--onnx={relu}", f"--loadInputs=x:{f}"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr


def test_a_fifo_as_input_is_refused_not_waited_on(kiln, relu, tmp_path):
    fifo = tmp_path / "x.npy"
    os.mkfifo(fifo)
    p = _run(kiln, "run", f"--onnx={relu}", f"--loadInputs=x:{fifo}", timeout=30)
    assert "not a regular file" in p.stderr, p.stderr


@pytest.mark.parametrize("flag,says", [
    ("--duration=nan", "--duration must be a finite number"),
    ("--warmUp=nan", "--warmUp must be a finite number"),
    ("--avgTiming=-3", "--avgTiming must be at least 1"),
    ("--device=3", "CUDA_VISIBLE_DEVICES=3"),
])
def test_numeric_flags_out_of_range_are_errors(kiln, relu, flag, says):
    p = _run(kiln, f"--onnx={relu}", flag, "--backend=cpu")
    assert says in p.stderr, p.stderr


def test_negative_workspace_pool_is_an_error(kiln, relu, tmp_path):
    p = _run(kiln, "build", f"--onnx={relu}", "--memPoolSize=workspace:-1", f"--saveEngine={tmp_path / 'e'}")
    assert "--memPoolSize" in p.stderr and "-1" in p.stderr, p.stderr


@pytest.mark.parametrize("flag", ["--dumpProfile", "--exportTimes=t.json", "--infStreams=2", "--useCudaGraph",
                                  "--exportProfile=p.json"])
def test_reference_run_refuses_engine_flags(kiln, relu, flag):
    """kiln run --onnx runs the graph as imported, once: timing and engine flags are refused, not ignored."""
    p = _run(kiln, "run", f"--onnx={relu}", flag)
    assert "reference run" in p.stderr and flag.split("=")[0] in p.stderr, p.stderr


def test_load_engine_then_save_engine_writes_it(kiln, relu, tmp_path):
    a, b = tmp_path / "a.engine", tmp_path / "b.engine"
    subprocess.run([kiln, "build", f"--onnx={relu}", f"--saveEngine={a}", "--backend=cpu"], check=True,
                   capture_output=True, timeout=60)
    p = subprocess.run([kiln, f"--loadEngine={a}", f"--saveEngine={b}", "--iterations=1", "--duration=0",
                        "--warmUp=0"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert b.read_bytes() == a.read_bytes()


def test_export_times_holds_every_stream(kiln, relu, tmp_path):
    import json
    e, times = tmp_path / "e.engine", tmp_path / "times.json"
    subprocess.run([kiln, "build", f"--onnx={relu}", f"--saveEngine={e}", "--backend=cpu"], check=True,
                   capture_output=True, timeout=60)
    p = subprocess.run([kiln, "bench", f"--loadEngine={e}", "--infStreams=2", "--iterations=5", "--duration=0",
                        "--warmUp=0", f"--exportTimes={times}"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    records = json.loads(times.read_text())
    assert {r["stream"] for r in records} == {0, 1}, records
    assert sum(r["stream"] == 1 for r in records) >= 5


def _relu_at(path, dims):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


@pytest.mark.parametrize("dims,extra", [
    (["n", 32], ["--shapes=x:2147483648x32"]),   # 256 GiB at the opt shape: std::bad_alloc escaped before
    ([1048576, 1048576], []),                     # a static 4 TiB input: the timed run wrote through a null buffer
])
def test_huge_input_shapes_are_errors_not_crashes(kiln, tmp_path, dims, extra):
    m = _relu_at(tmp_path / "m.onnx", dims)
    p = _run(kiln, "build", f"--onnx={m}", f"--saveEngine={tmp_path / 'e'}", "--backend=cpu", *extra)
    assert "input 'x'" in p.stderr and "shapes" in p.stderr, p.stderr


def test_run_at_a_huge_profile_shape_is_an_error(kiln, tmp_path):
    m = _relu_at(tmp_path / "m.onnx", ["n", 32])
    e = tmp_path / "e.engine"
    subprocess.run([kiln, "build", f"--onnx={m}", f"--saveEngine={e}", "--backend=cpu", "--minShapes=x:1x32",
                    "--optShapes=x:1x32", "--maxShapes=x:4294967296x32"], check=True, capture_output=True, timeout=60)
    p = _run(kiln, "run", f"--loadEngine={e}", "--shapes=x:4294967296x32")
    assert "input 'x'" in p.stderr, p.stderr


def test_a_zero_size_dim_builds_and_runs(kiln, tmp_path):
    """An empty input (a 0 dim) needs no memory: the engine runs and the output is empty, not 'has no address'."""
    import numpy as np
    m = _relu_at(tmp_path / "m.onnx", ["n", 32])
    e, out = tmp_path / "e.engine", tmp_path / "out"
    subprocess.run([kiln, "build", f"--onnx={m}", f"--saveEngine={e}", "--backend=cpu", "--shapes=x:0x32"],
                   check=True, capture_output=True, timeout=60)
    p = subprocess.run([kiln, "run", f"--loadEngine={e}", "--shapes=x:0x32", f"--exportOutput={out}"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert np.load(out / "y.npy").shape == (0, 32)


def test_an_unsupported_element_type_is_named(kiln, tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [2, 3])
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="id")], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "c.onnx"))
    p = _run(kiln, "run", f"--onnx={tmp_path / 'c.onnx'}")
    assert "COMPLEX64" in p.stderr and "'x'" in p.stderr, p.stderr


def test_an_input_listed_twice_is_a_malformed_model_not_a_corrupt_engine(kiln, tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x, x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "twice.onnx"))
    p = _run(kiln, f"--onnx={tmp_path / 'twice.onnx'}", "--backend=cpu")
    assert "listed twice" in p.stderr and "twice.onnx" in p.stderr and "engine" not in p.stderr, p.stderr
