"""kiln build --config=kiln.yaml (include/kiln/build_config_file.h): a YAML config builds the same engine, byte for
byte, as the equivalent flags (kiln's keys, and the documents' TensorRTBuildConfig names under `tensorrt:`); flags on
the command line override the file; bad keys and values are errors naming the key and the line."""
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(path, inputs=1):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"), helper.make_node("Relu", ["h"], ["y"], name="relu")]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])]
    if inputs == 2:
        nodes.append(helper.make_node("Relu", ["x2"], ["y2"], name="relu2"))
        ins.append(helper.make_tensor_value_info("x2", TensorProto.FLOAT, ["batch", 3]))
        outs.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, ["batch", 3]))
    m = helper.make_model(helper.make_graph(nodes, "m", ins, outs, [numpy_helper.from_array(w, "w")]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def _kiln(kiln, *args):
    return subprocess.run([kiln, *args], capture_output=True, text=True, timeout=120)


def test_config_builds_the_same_engine_as_the_flags(kiln, tmp_path):
    model = _model(tmp_path / "m.onnx")
    flags = _kiln(kiln, "build", f"--onnx={model}", "--backend=cpu", "--minShapes=x:1x8", "--optShapes=x:4x8",
                  "--maxShapes=x:16x8", "--builderOptimizationLevel=2", f"--saveEngine={tmp_path / 'flags.engine'}")
    assert flags.returncode == 0, flags.stderr
    (tmp_path / "kiln.yaml").write_text(
        f"onnx: {model}\nengine: {tmp_path / 'kiln.engine'}\nbackend: cpu\nbuilder_optimization_level: 2\n"
        "min_shapes: {x: [1, 8]}\nopt_shapes: {x: [4, 8]}\nmax_shapes: {x: [16, 8]}\n")
    p = _kiln(kiln, "build", f"--config={tmp_path / 'kiln.yaml'}")
    assert p.returncode == 0, p.stderr
    (tmp_path / "trt.yaml").write_text(  # the documents' names, under tensorrt:
        f"tensorrt:\n  onnx_path: {model}\n  engine_path: {tmp_path / 'trt.engine'}\n  fp16: false\n  int8: false\n"
        "  max_batch_size: 16\n  min_shape: [1, 8]\n  opt_shape: [4, 8]\n  max_shape: [16, 8]\n"
        "  optimization_level: 2\n  backend: cpu\n")
    p = _kiln(kiln, "build", f"--config={tmp_path / 'trt.yaml'}")
    assert p.returncode == 0, p.stderr
    want = (tmp_path / "flags.engine").read_bytes()
    assert (tmp_path / "kiln.engine").read_bytes() == want
    assert (tmp_path / "trt.engine").read_bytes() == want
    # Flags override the file: another engine path, and other shapes (the file's shapes are all replaced).
    p = _kiln(kiln, "build", f"--config={tmp_path / 'kiln.yaml'}", f"--saveEngine={tmp_path / 'over.engine'}",
              "--shapes=x:2x8", "--json", str(tmp_path / "over.json"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "over.engine").exists()
    assert '"dynamic_shapes": false' in (tmp_path / "over.json").read_text()


def test_config_errors_name_the_key(kiln, tmp_path):
    model = _model(tmp_path / "m.onnx")
    two = _model(tmp_path / "two.onnx", inputs=2)
    cases = [
        (f"onnx: {model}\nbackend: cpu\nfp17: true\n", ["unknown key 'fp17'", ":3:"]),
        (f"onnx: {model}\nfp16: maybe\n", ["'fp16' takes true or false", ":2:"]),
        (f"onnx: {model}\nbackend: tpu\n", ["'backend' takes one of cpu, cuda"]),
        (f"onnx: {model}\nmin_shapes: [1, 8]\n", ["'min_shapes' takes a map"]),
        (f"onnx: {model}\nbuilder_optimization_level: 9\n", ["builder_optimization_level", "0 to 5"]),
        (f"onnx: {model}\nmax_aux_streams: 65\n", ["max_aux_streams", "0 to 64"]),
        (f"tensorrt:\n  onnx_path: {model}\n  engine_path: e\n  onnx: {model}\n", ["given twice"]),
        (f"onnx: {two}\nbackend: cpu\nmin_shape: [1, 8]\nopt_shape: [1, 8]\nmax_shape: [1, 8]\n",
         ["min_shape", "2 inputs (x, x2)"]),
        (f"onnx: {model}\nbackend: cpu\nmax_batch_size: 8\nshapes: {{x: [4, 8]}}\n", ["max_batch_size is 8", "[4,8]"]),
        ("onnx: [unclosed\n", ["not valid YAML"]),
        (f"onnx: {model}\nmax_workspace_gb: 4\nworkspace_mb: 10\n", ["given twice"]),
        (f"onnx: {model}\n? [a, b]\n: 1\n", ["a key must be a name"]),
        (f"onnx: {model}\nshapes: {{[x]: [1, 8]}}\n", ["bad.yaml:2"]),
    ]
    for text, wants in cases:
        (tmp_path / "bad.yaml").write_text(text)
        p = _kiln(kiln, "build", f"--config={tmp_path / 'bad.yaml'}", f"--saveEngine={tmp_path / 'bad.engine'}")
        assert p.returncode != 0, text
        for w in wants:
            assert w in p.stderr, (text, p.stderr)
    p = _kiln(kiln, "build", f"--config={tmp_path / 'missing.yaml'}")
    assert p.returncode != 0 and "missing.yaml" in p.stderr


def test_calibrate_from_a_config(kiln, tmp_path):
    model = _model(tmp_path / "m.onnx")
    (tmp_path / "calib").mkdir()
    np.save(tmp_path / "calib" / "b0.npy", np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32))
    (tmp_path / "c.yaml").write_text(
        f"onnx: {model}\nbackend: cpu\ncalibration_data: {tmp_path / 'calib'}\ncalibration_algorithm: minmax\n"
        f"calibration_cache: {tmp_path / 'c.cache'}\n")
    p = _kiln(kiln, "calibrate", f"--config={tmp_path / 'c.yaml'}")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "c.cache").read_text().startswith("TRT-") and "MinMax" in (tmp_path / "c.cache").read_text()
    flags = _kiln(kiln, "calibrate", f"--onnx={model}", "--backend=cpu", f"--data={tmp_path / 'calib'}", "--algo=minmax",
                  f"--calib={tmp_path / 'flags.cache'}")
    assert flags.returncode == 0, flags.stderr
    assert (tmp_path / "flags.cache").read_bytes() == (tmp_path / "c.cache").read_bytes()
    # The build refuses calibration_data (it calibrates no data); calibrate without data says what it needs.
    p = _kiln(kiln, "build", f"--config={tmp_path / 'c.yaml'}")
    assert p.returncode != 0 and "kiln calibrate" in p.stderr
    (tmp_path / "nodata.yaml").write_text(f"onnx: {model}\nbackend: cpu\n")
    p = _kiln(kiln, "calibrate", f"--config={tmp_path / 'nodata.yaml'}", f"--calib={tmp_path / 'x.cache'}")
    assert p.returncode != 0 and "--data" in p.stderr
