"""kiln.compile / kiln.load / Engine on the default backend with numpy arrays: outputs match the model, metadata,
save and load, per-layer profile, benchmark statistics, and bad calls raising KilnError."""
import numpy as np
import pytest

import kiln
from conftest import mlp_model


def test_compile_and_call_with_numpy(tmp_path, mlp):
    model, ref = mlp
    path = tmp_path / "mlp.onnx"
    path.write_bytes(model.SerializeToString())
    engine = kiln.compile(str(path), min_shapes={"x": (1, 8)}, opt_shapes={"x": (4, 8)}, max_shapes={"x": (8, 8)},
                          tf32=False)  # a GPU build computes in float32 too: the tolerance below holds
    assert [i["name"] for i in engine.inputs] == ["x"] and [o["name"] for o in engine.outputs] == ["y"]
    assert engine.inputs[0]["profile"] == [(1, 8), (4, 8), (8, 8)]
    for batch in (1, 3, 8):
        x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
        y = engine(x)
        assert isinstance(y, np.ndarray) and y.shape == (batch, 4)
        np.testing.assert_allclose(y, ref(x), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(engine(x=x), y)
        np.testing.assert_allclose(engine.run({"x": x})["y"], y)
    # a float64 / list input is converted to the input's type
    np.testing.assert_allclose(engine(np.ones((2, 8))), ref(np.ones((2, 8), np.float32)), rtol=1e-4, atol=1e-4)
    engine.save(tmp_path / "mlp.engine")
    again = kiln.load(tmp_path / "mlp.engine")
    x = np.ones((2, 8), np.float32)
    np.testing.assert_array_equal(again(x), engine(x))


def test_compile_from_model_proto_and_bytes(mlp):
    model, ref = mlp
    x = np.ones((2, 8), np.float32)
    for m in (model, model.SerializeToString()):
        engine = kiln.compile(m, shapes={"x": (2, 8)}, tf32=False)
        np.testing.assert_allclose(engine(x), ref(x), rtol=1e-4, atol=1e-4)


def test_profile_and_benchmark(mlp):
    model, _ = mlp
    engine = kiln.compile(model, shapes={"x": (2, 8)})
    x = np.ones((2, 8), np.float32)
    layers = engine.profile(x)
    assert layers and all(isinstance(n, str) and ms >= 0 for n, ms in layers)
    stats = engine.benchmark(x, iterations=5, warmup=1)
    for k in ("min_ms", "median_ms", "mean_ms", "p99_ms", "throughput_qps"):
        assert stats[k] > 0
    assert stats["iterations"] == 5 and stats["min_ms"] <= stats["median_ms"] <= stats["max_ms"]


def test_bad_calls_raise_kiln_errors(mlp):
    model, _ = mlp
    engine = kiln.compile(model, min_shapes={"x": (1, 8)}, opt_shapes={"x": (2, 8)}, max_shapes={"x": (4, 8)})
    with pytest.raises(kiln.KilnError, match="missing"):
        engine()
    with pytest.raises(kiln.KilnError, match="no input 'z'"):
        engine(z=np.ones((2, 8), np.float32))
    with pytest.raises(kiln.KilnError, match="x"):
        engine(np.ones((9, 8), np.float32))  # outside the profile
    with pytest.raises(kiln.KilnError):
        engine(np.ones((2, 9), np.float32))  # wrong shape
    with pytest.raises(kiln.KilnError, match="int32|float32|bool"):
        engine(np.array([["a"] * 8] * 2))  # strings: no conversion
    with pytest.raises(kiln.KilnError, match="2 inputs given"):
        engine(np.ones((2, 8), np.float32), np.ones((2, 8), np.float32))
    with pytest.raises(kiln.KilnError):
        kiln.compile(b"not a model")
    with pytest.raises(kiln.KilnError, match="min_shapes"):
        kiln.compile(model, min_shapes={"x": (1, 8)})
    with pytest.raises(kiln.KilnError, match="int8=True or fp8=True"):
        kiln.compile(model, shapes={"x": (2, 8)}, calibration_cache="c.cache")


def test_build_config_yaml_round_trip_and_compile(tmp_path, mlp, kiln_cli):
    model, ref = mlp
    path = tmp_path / "mlp.onnx"
    path.write_bytes(model.SerializeToString())
    text = (f"tensorrt:\n  onnx_path: {path}\n  engine_path: {tmp_path / 'py.engine'}\n  max_workspace_gb: 1\n"
            "  min_shape: [1, 8]\n  opt_shape: [4, 8]\n  max_shape: [8, 8]\n  max_batch_size: 8\n  backend: cpu\n")
    (tmp_path / "trt.yaml").write_text(text)
    cfg = kiln.BuildConfig.from_yaml(str(tmp_path / "trt.yaml"))
    assert cfg.onnx == str(path) and cfg.workspace_mb == 1024 and cfg.max_shape == [8, 8]
    again = kiln.BuildConfig.from_yaml(cfg.to_yaml())  # kiln's own key names
    assert again.to_yaml() == cfg.to_yaml() and "onnx:" in cfg.to_yaml()
    engine = cfg.compile()
    assert engine.inputs[0]["profile"] == [(1, 8), (4, 8), (8, 8)]
    x = np.ones((3, 8), np.float32)
    np.testing.assert_allclose(engine(x), ref(x), rtol=1e-4, atol=1e-4)
    assert (tmp_path / "py.engine").exists()
    # The same file through the command line builds an engine that runs the same.
    import subprocess
    subprocess.run([kiln_cli, "build", f"--config={tmp_path / 'trt.yaml'}", f"--saveEngine={tmp_path / 'cli.engine'}"],
                   check=True, capture_output=True)
    np.testing.assert_array_equal(kiln.load(tmp_path / "cli.engine")(x), engine(x))
    with pytest.raises(kiln.KilnError, match="unknown key 'fp17'"):
        kiln.BuildConfig.from_yaml("onnx: m.onnx\nfp17: true\n")
    with pytest.raises(kiln.KilnError, match="no field"):
        kiln.BuildConfig(fp17=True)
