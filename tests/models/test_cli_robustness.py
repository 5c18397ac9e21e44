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
    ("--device=3", "device 3 does not exist"),
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


def test_aux_streams_on_the_cpu_backend_are_refused(kiln, relu, tmp_path):
    """--maxAuxStreams needs a backend that runs layers side by side: on cpu it is refused with the reason, not
    ignored; outside 0..64 it is refused by the parser."""
    p = _run(kiln, "build", f"--onnx={relu}", "--backend=cpu", "--maxAuxStreams=2", f"--saveEngine={tmp_path / 'e'}")
    assert p.returncode != 0 and "--maxAuxStreams" in p.stderr and "auxiliary streams" in p.stderr, p.stderr
    # Without --backend: refused where the default is the cpu backend (no GPU), built where it is cuda.
    p = subprocess.run([kiln, "build", f"--onnx={relu}", "--maxAuxStreams=2", f"--saveEngine={tmp_path / 'd'}",
                        f"--json={tmp_path / 'd.json'}"], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        assert "--maxAuxStreams" in p.stderr and "no GPU was found" in p.stderr, p.stderr
    else:
        assert '"max": 2' in (tmp_path / "d.json").read_text()
    p = _run(kiln, "build", f"--onnx={relu}", "--backend=cpu", "--maxAuxStreams=65", f"--saveEngine={tmp_path / 'e'}")
    assert p.returncode != 0 and "--maxAuxStreams" in p.stderr, p.stderr
    p = subprocess.run([kiln, "build", f"--onnx={relu}", "--backend=cpu", "--maxAuxStreams=0",
                        f"--saveEngine={tmp_path / 'e'}"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


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
                    "--optShapes=x:1x32", "--maxShapes=x:4294967296x32", "--maxTensorElements=274877906944"],
                   check=True, capture_output=True, timeout=60)
    p = _run(kiln, "run", f"--loadEngine={e}", "--shapes=x:4294967296x32")
    assert "input 'x'" in p.stderr, p.stderr
    # Under the default cap (2^35 elements per tensor) the build itself refuses that profile, naming the input.
    p = _run(kiln, "build", f"--onnx={m}", "--backend=cpu", "--minShapes=x:1x32", "--optShapes=x:1x32",
             "--maxShapes=x:4294967296x32")
    assert "input 'x'" in p.stderr and "--maxTensorElements" in p.stderr, p.stderr


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


def _two_relus(path):
    """x -> Relu -> Softmax -> y: the middle tensor lives in the activation arena."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["h"], name="r1"),
                           helper.make_node("Softmax", ["h"], ["y"], name="s2")], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def _inspect_json(kiln, engine, tmp_path):
    import json
    out = tmp_path / "inspect.json"
    subprocess.run([kiln, "inspect", f"--loadEngine={engine}", f"--json={out}"], check=True, capture_output=True)
    return json.loads(out.read_text())


def test_input_io_format_fp16_gives_the_cpu_engine_a_float16_input(kiln, relu, tmp_path):
    import numpy as np
    engine = tmp_path / "r.engine"
    subprocess.run([kiln, "build", f"--onnx={relu}", "--backend=cpu", "--inputIOFormats=fp16:chw",
                    f"--saveEngine={engine}"], check=True, capture_output=True)
    io = {t["name"]: t for t in _inspect_json(kiln, engine, tmp_path)["io_tensors"]}
    assert io["x"]["dtype"] == "float16" and io["y"]["dtype"] == "float32", io
    x = np.linspace(-2, 2, 128, dtype=np.float16).reshape(4, 32)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([kiln, "run", f"--loadEngine={engine}", f"--loadInputs=x:{tmp_path / 'x.npy'}",
                    f"--exportOutput={tmp_path / 'out'}"], check=True, capture_output=True)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y.npy"), np.maximum(x.astype(np.float32), 0))


@pytest.mark.parametrize("verbosity,keys", [
    ("none", None), ("layer_names_only", {"name", "op_type"}),
    ("detailed", {"name", "op_type", "precision", "tactic", "inputs", "outputs"})])
def test_profiling_verbosity_decides_what_layer_information_tells(kiln, relu, tmp_path, verbosity, keys):
    engine = tmp_path / "r.engine"
    subprocess.run([kiln, "build", f"--onnx={relu}", "--backend=cpu", f"--profilingVerbosity={verbosity}",
                    f"--saveEngine={engine}"], check=True, capture_output=True)
    layers = _inspect_json(kiln, engine, tmp_path)["layers"]
    if keys is None:
        assert layers == []
    else:
        assert layers and set(layers[0]) == keys, layers


@pytest.mark.parametrize("flags,says", [
    (["--stronglyTyped", "--inputIOFormats=fp16:chw"], "--stronglyTyped keeps the network's own types"),
    (["--memPoolSize=dlaSRAM:1"], "no 'dlaSRAM' pool"),
    (["--memPoolSize=tacticSharedMem:1"], "no 'tacticSharedMem' pool"),
    (["--maxTensorElements=100"], "more than the limit of 100 elements"),
])
def test_build_flags_are_applied_or_refused(kiln, relu, flags, says):
    p = _run(kiln, "build", f"--onnx={relu}", "--backend=cpu", *flags)
    assert says in p.stderr, p.stderr


def test_activation_memory_over_the_pool_limit_names_the_tensors(kiln, tmp_path):
    model = _two_relus(tmp_path / "m.onnx")
    p = _run(kiln, "build", f"--onnx={model}", "--backend=cpu", "--memPoolSize=activations:0.0001")
    assert "activations need" in p.stderr and "'h'" in p.stderr, p.stderr
    subprocess.run([kiln, "build", f"--onnx={model}", "--backend=cpu", "--memPoolSize=activations:1"], check=True,
                   capture_output=True)


def _model(tmp_path, nodes, inputs, outputs, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    return path


def test_models_onnxruntime_rejects_are_rejected(kiln, tmp_path):
    f = TensorProto.FLOAT
    # Opset 17 Split without sizes cuts into equal parts: 3 into 2 is invalid.
    split = _model(tmp_path, [helper.make_node("Split", ["x"], ["a", "b"], axis=0, name="split")],
                   [helper.make_tensor_value_info("x", f, [3])],
                   [helper.make_tensor_value_info("a", f, None), helper.make_tensor_value_info("b", f, None)])
    p = _run(kiln, "run", f"--onnx={split}")
    assert "not a multiple of 2" in p.stderr and "split" in p.stderr, p.stderr
    # An output declared int64 that the graph makes float32.
    typed = _model(tmp_path, [helper.make_node("Relu", ["x"], ["y"], name="relu")],
                   [helper.make_tensor_value_info("x", f, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.INT64, [4])])
    p = _run(kiln, "run", f"--onnx={typed}")
    assert "declared int64" in p.stderr and "float32" in p.stderr, p.stderr
    # An attribute Relu's schema does not have; and one that BatchNormalization lost at opset 9 ('spatial').
    extra = _model(tmp_path, [helper.make_node("Relu", ["x"], ["y"], name="relu", alpha=0.5)],
                   [helper.make_tensor_value_info("x", f, [4])], [helper.make_tensor_value_info("y", f, [4])])
    p = _run(kiln, "run", f"--onnx={extra}")
    assert "attribute 'alpha'" in p.stderr and "relu" in p.stderr, p.stderr
    c = [helper.make_tensor_value_info(n, f, [2]) for n in ("s", "b", "m", "v")]
    bn = _model(tmp_path, [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn",
                                            spatial=1)],
                [helper.make_tensor_value_info("x", f, [1, 2, 3])] + c, [helper.make_tensor_value_info("y", f, None)])
    p = _run(kiln, "run", f"--onnx={bn}")
    assert "attribute 'spatial'" in p.stderr and "opset 17" in p.stderr, p.stderr
    # A MaxPool whose pads are as wide as its window (a fuzzer's input; onnxruntime refuses it).
    pool = _model(tmp_path, [helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[5, 5],
                                              pads=[112, 33, 2, 2])],
                  [helper.make_tensor_value_info("x", f, [1, 1, 5, 5])], [helper.make_tensor_value_info("y", f, None)])
    p = _run(kiln, "run", f"--onnx={pool}")
    assert "must be smaller than kernel_shape" in p.stderr and "pool" in p.stderr, p.stderr
    # Still accepted where the schema has it: opset 7's BatchNormalization takes 'spatial'.
    ok = _model(tmp_path, [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn",
                                            spatial=1)],
                [helper.make_tensor_value_info("x", f, [1, 2, 3])] + c, [helper.make_tensor_value_info("y", f, None)],
                opset=7)
    p = subprocess.run([kiln, "inspect", f"--onnx={ok}"], capture_output=True, text=True)
    assert "attribute 'spatial'" not in p.stderr, p.stderr


def _external_model(folder, location):
    """y = x + e, with e [4] stored externally at `location`."""
    e = TensorProto()
    e.name, e.data_type = "e", TensorProto.FLOAT
    e.dims.extend([4])
    e.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "16")):
        e.external_data.add(key=k, value=v)
    g = helper.make_graph([helper.make_node("Add", ["x", "e"], ["y"], name="add")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], initializer=[e])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(m, str(folder / "m.onnx"))
    return folder / "m.onnx"


def test_external_data_dir_allows_another_folder_with_the_same_containment(kiln, tmp_path):
    model = _external_model(tmp_path / "model", "w.bin")
    data = tmp_path / "data"
    data.mkdir()
    (data / "w.bin").write_bytes(struct.pack("<4f", 1, 2, 3, 4))
    p = _run(kiln, "run", f"--onnx={model}")
    assert "--externalDataDir" in p.stderr and "w.bin" in p.stderr, p.stderr
    ok = subprocess.run([kiln, "run", f"--onnx={model}", f"--externalDataDir={data}"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    # A link inside the allowed folder that leads out of it is refused there too.
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\0" * 16)
    os.symlink(secret, data / "leak.bin")
    leak = _external_model(tmp_path / "model2", "leak.bin")
    p = _run(kiln, "run", f"--onnx={leak}", f"--externalDataDir={data}")
    assert "outside the folder" in p.stderr, p.stderr


def test_workspace_pool_on_the_cpu_backend_is_said_not_to_apply(kiln, relu, tmp_path):
    # The CUDA tuner leaves out kernels needing more scratch memory (tests/gpu: GpuEngine.WorkspaceLimit); the cpu
    # backend's kernels use host memory, which the limit does not cover: the build says so.
    p = subprocess.run([kiln, "build", f"--onnx={relu}", "--backend=cpu", "--memPoolSize=workspace:64",
                        f"--saveEngine={tmp_path / 'e'}"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "WORKSPACE limit" in p.stderr and "cpu backend" in p.stderr, p.stderr
