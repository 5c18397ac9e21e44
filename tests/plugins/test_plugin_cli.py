"""The kiln command line with plugins (cpu backend): a model using the example plugins builds and runs with
--dynamicPlugins or --staticPlugins and matches the plugins' semantics; engines round-trip; every subcommand that
loads an engine takes the flags; every bad plugin library, and an engine without its plugin, gives an error that
says what to do, never a crash; `kiln plugin new` and `kiln plugin list` do what they say."""
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

ALPHA, BETA, THRESHOLD = 1.5, -0.25, 0.5


def run(*args, ok=True):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300)
    assert p.returncode >= 0, f"killed by signal {-p.returncode}: {args}\n{p.stderr}"
    if ok:
        assert p.returncode == 0, f"{args} failed:\n{p.stdout}\n{p.stderr}"
    else:
        assert p.returncode == 1, f"{args} should fail with an error (exit 1), got {p.returncode}:\n{p.stdout}"
    return p


def make_model(path, domain="com.example"):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 7])
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [3, 7])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    scale = helper.make_node("ScaleShift", ["x"], ["s"], name="scale", domain=domain, alpha=ALPHA, beta=BETA,
                             activation="relu")
    select = helper.make_node("SelectAbove", ["s"], ["y"], name="select", domain=domain, threshold=THRESHOLD)
    graph = helper.make_graph([scale, select], "plugins", [x], [s, y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(domain, 1)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def expected(x):
    s = np.maximum(np.float32(ALPHA) * x + np.float32(BETA), np.float32(0))
    return s, s[s > THRESHOLD].reshape(-1)


@pytest.fixture()
def model(tmp_path):
    return make_model(tmp_path / "plugins.onnx")


@pytest.fixture()
def inputs(tmp_path):
    x = (np.sin(np.arange(21, dtype=np.float32) * 1.3) * 2).reshape(3, 7).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    return x, tmp_path / "x.npy"


def check_outputs(folder, x):
    s, y = expected(x)
    np.testing.assert_allclose(np.load(folder / "s.npy"), s, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.load(folder / "y.npy"), y, rtol=1e-6, atol=1e-6)
    assert 0 < y.size < x.size, "the data-dependent output is strictly inside its bound"


def test_build_save_load_run_with_dynamic_plugins(kiln, plugins, model, inputs, tmp_path):
    x, xfile = inputs
    engine = tmp_path / "m.engine"
    p = run(kiln, "build", f"--onnx={model}", f"--dynamicPlugins={plugins}", "--backend=cpu", f"--saveEngine={engine}")
    assert "com.example.ScaleShift (version 1)" in p.stdout
    run(kiln, "run", f"--loadEngine={engine}", f"--dynamicPlugins={plugins}", f"--loadInputs=x:{xfile}",
        f"--exportOutput={tmp_path / 'engine_out'}")
    check_outputs(tmp_path / "engine_out", x)
    # The reference run (the imported graph on the CPU backend) agrees.
    run(kiln, "run", f"--onnx={model}", f"--dynamicPlugins={plugins}", f"--loadInputs=x:{xfile}",
        f"--exportOutput={tmp_path / 'ref_out'}")
    check_outputs(tmp_path / "ref_out", x)
    # trtexec-style invocation, inspect and compare take the flags too.
    run(kiln, f"--loadEngine={engine}", f"--dynamicPlugins={plugins}", "--iterations=2", "--duration=0", "--warmUp=0")
    p = run(kiln, "inspect", f"--loadEngine={engine}", f"--dynamicPlugins={plugins}", "--dumpLayerInfo")
    assert "ScaleShift" in p.stdout and "SelectAbove" in p.stdout
    run(kiln, "compare", f"--onnx={model}", f"--dynamicPlugins={plugins}", "--backend=cpu")


def test_linked_in_plugins_with_static_plugins(kiln, model, inputs, tmp_path):
    x, xfile = inputs
    engine = tmp_path / "s.engine"
    run(kiln, "build", f"--onnx={model}", "--staticPlugins=com.example.ScaleShift,com.example.SelectAbove",
        "--backend=cpu", f"--saveEngine={engine}")
    run(kiln, "run", f"--loadEngine={engine}", "--staticPlugins=all", f"--loadInputs=x:{xfile}",
        f"--exportOutput={tmp_path / 'out'}")
    check_outputs(tmp_path / "out", x)
    p = run(kiln, "run", f"--loadEngine={engine}", ok=False)
    assert "plugin com.example.ScaleShift" in p.stderr and "--staticPlugins=com.example.ScaleShift" in p.stderr
    p = run(kiln, "build", f"--onnx={model}", "--staticPlugins=com.example.Nope", "--backend=cpu", ok=False)
    assert "no linked-in plugin is called 'com.example.Nope'" in p.stderr
    assert "com.example.ScaleShift" in p.stderr, "the error lists the linked-in plugins"
    # A name with ".so" inside a domain label (com.sony, org.someco) is a plugin name, not a library path.
    p = run(kiln, "build", f"--onnx={model}", "--staticPlugins=com.sony.Foo", "--backend=cpu", ok=False)
    assert "no linked-in plugin is called 'com.sony.Foo'" in p.stderr, p.stderr


def test_engine_without_its_plugin_names_the_library(kiln, plugins, model, tmp_path):
    engine = tmp_path / "m.engine"
    run(kiln, "build", f"--onnx={model}", f"--dynamicPlugins={plugins}", "--backend=cpu", f"--saveEngine={engine}")
    for sub in ("run", "inspect"):
        p = run(kiln, sub, f"--loadEngine={engine}", ok=False)
        assert "plugin com.example.ScaleShift (version 1)" in p.stderr, p.stderr
        assert "libkiln_example_plugins.so" in p.stderr and "--dynamicPlugins" in p.stderr, p.stderr


def test_model_without_its_plugin_names_the_way_out(kiln, model):
    p = run(kiln, "build", f"--onnx={model}", "--backend=cpu", ok=False)
    assert "kiln plugin new ScaleShift --domain com.example" in p.stderr
    assert "--dynamicPlugins" in p.stderr
    assert "'scale'" in p.stderr and "'select'" in p.stderr, "one report lists every unsupported node"


def test_bad_plugin_libraries_are_errors_not_crashes(kiln, model, bad_abi_plugin, not_a_plugin, tmp_path):
    text = tmp_path / "libtext.so"
    text.write_text("not a shared library\n")
    cases = {
        str(tmp_path / "libmissing.so"): "does not exist",
        str(text): "cannot load plugin library",
        not_a_plugin: "is not a kiln plugin library",
        bad_abi_plugin: "was built against kiln plugin ABI version",
    }
    for lib, words in cases.items():
        for sub in ("build", "run"):
            p = run(kiln, sub, f"--onnx={model}", f"--dynamicPlugins={lib}", "--backend=cpu", ok=False)
            assert words in p.stderr and lib in p.stderr, p.stderr


def test_plugin_list(kiln, plugins):
    p = run(kiln, "plugin", "list", f"--dynamicPlugins={plugins}")
    assert "com.example.ScaleShift" in p.stdout and "alpha:float" in p.stdout and "activation:string" in p.stdout
    assert "linked in (register with --staticPlugins)" in p.stdout


def test_plugin_new_writes_a_project(kiln, tmp_path):
    out = tmp_path / "proj"
    p = run(kiln, "plugin", "new", "MyFancyOp", "--domain", "com.acme", "--output", out)
    for f in ["CMakeLists.txt", "README.md", "src/my_fancy_op_plugin.cpp", "src/my_fancy_op_kernels.cu",
              "src/my_fancy_op_kernels.h", "tools/make_model.cpp", "test/my_fancy_op_test.cpp"]:
        assert (out / f).is_file(), f
    src = (out / "src/my_fancy_op_plugin.cpp").read_text()
    assert 'return "com.acme";' in src and "KILN_PLUGIN_LIBRARY(MyFancyOpCreator)" in src
    assert "@" not in src, "every placeholder is filled"
    assert "find_package(kiln REQUIRED)" in (out / "CMakeLists.txt").read_text()
    p = run(kiln, "plugin", "new", "3bad", "--output", tmp_path / "bad", ok=False)
    assert "must be an identifier" in p.stderr
    p = run(kiln, "plugin", "new", "Fine", "--domain", "kiln", "--output", tmp_path / "bad2", ok=False)
    assert "cannot be a plugin's domain" in p.stderr
