"""INT8 calibration through a Python calibrator subclass (TensorRT's IInt8EntropyCalibrator2 shape): it writes the
same cache as `kiln calibrate` on the same batches, and a cache read back skips calibration."""
import os
import subprocess

import numpy as np
import pytest

import kiln as trt
from conftest import mlp_model


def batches(n=3, batch=4, seed=7):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((batch, 8)).astype(np.float32) for _ in range(n)]


class NumpyCalibrator(trt.IInt8EntropyCalibrator2):
    def __init__(self, data, cache_path):
        trt.IInt8EntropyCalibrator2.__init__(self)
        self.data = list(data)
        self.cache_path = cache_path
        self.reads = 0
        self.batches_given = 0

    def get_batch_size(self):
        return 4

    def get_batch(self, names):
        if not self.data:
            return None
        self.batches_given += 1
        return [self.data.pop(0)]

    def read_calibration_cache(self):
        self.reads += 1
        if os.path.exists(self.cache_path):
            with open(self.cache_path, "rb") as f:
                return f.read()
        return None

    def write_calibration_cache(self, cache):
        with open(self.cache_path, "wb") as f:
            f.write(cache)


def build_int8(model, calibrator, backend="cpu"):
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = builder.create_network()
    parser = trt.OnnxParser(network, logger)
    assert parser.parse(model.SerializeToString())
    config = builder.create_builder_config()
    config.backend = backend
    config.set_flag(trt.BuilderFlag.INT8)
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (4, 8), (4, 8), (4, 8))
    config.add_optimization_profile(profile)
    config.int8_calibrator = calibrator
    return builder.build_serialized_network(network, config)


def test_python_calibrator_writes_the_cli_cache(tmp_path, kiln_cli):
    model, _ = mlp_model(batch=4)
    onnx_path = tmp_path / "m.onnx"
    onnx_path.write_bytes(model.SerializeToString())
    data = batches()
    cal = NumpyCalibrator(data, str(tmp_path / "py.cache"))
    first = build_int8(model, cal)
    assert cal.batches_given == 3 and os.path.exists(cal.cache_path)
    os.makedirs(tmp_path / "calib")
    for i, b in enumerate(data):
        np.save(tmp_path / "calib" / f"b{i}.npy", b)
    subprocess.run([kiln_cli, "calibrate", f"--onnx={onnx_path}", f"--data={tmp_path / 'calib'}", "--algo=entropy",
                    f"--calib={tmp_path / 'cli.cache'}", "--backend=cpu"], check=True, capture_output=True)
    assert (tmp_path / "py.cache").read_bytes() == (tmp_path / "cli.cache").read_bytes()
    # The cache read back: no batch is asked for, and the engine is the same bytes.
    again = NumpyCalibrator(batches(), cal.cache_path)
    second = build_int8(model, again)
    assert again.batches_given == 0 and again.reads >= 1
    assert bytes(first) == bytes(second)


def test_calibrator_errors_are_reported(tmp_path):
    model, _ = mlp_model(batch=4)

    class Wrong(NumpyCalibrator):
        def get_batch(self, names):
            return [np.ones((4, 8), np.float32), np.ones((4, 8), np.float32)]  # two arrays for one input

    with pytest.raises(trt.KilnError):
        build_int8(model, Wrong([], str(tmp_path / "w.cache")))

    class Short(NumpyCalibrator):  # a last batch shorter than the calibration shape is refused, not over-read
        def get_batch(self, names):
            return [np.ones((2, 8), np.float32)]

    with pytest.raises(trt.KilnError, match=r"\(2, 8\).*\(4, 8\)"):
        build_int8(model, Short([], str(tmp_path / "s.cache")))
    with pytest.raises(TypeError):
        trt.Builder(trt.Logger()).create_builder_config().int8_calibrator = object()
