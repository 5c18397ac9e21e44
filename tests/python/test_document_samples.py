"""TensorRT Python code as people write it from the guides, run with `import kiln as trt`: building an engine from
ONNX, dynamic shapes with an optimization profile, inference with execute_async_v3, INT8 calibration with an
IInt8EntropyCalibrator2 subclass, and a timing cache kept in a file. The only other change is pointer handling:
`cuda` below stands in for pycuda.driver (mem_alloc, memcpy_*_async, Stream), over kiln's device memory on a GPU and
host memory on the CPU backend, so the samples run on either.

Each sample is a standalone function written the way the guides lay the code out; they share nothing but the model
file and `cuda`."""
import os

import numpy as np
import pytest

import kiln as trt
from conftest import mlp_model

ON_DEVICE = trt.default_backend() != "cpu"
TOL = 1e-2 if ON_DEVICE else 1e-4  # TF32 is on by default on a GPU, as in TensorRT


class cuda:  # noqa: N801 - pycuda.driver's spelling
    """The part of pycuda.driver the samples use."""

    class DeviceAllocation:
        def __init__(self, nbytes):
            if ON_DEVICE:
                self._mem = trt._kiln.DeviceMemory.allocate(trt.default_backend(), max(int(nbytes), 1))
                self.ptr = self._mem.ptr
            else:
                self._mem = np.empty(max(int(nbytes), 1), np.uint8)
                self.ptr = self._mem.ctypes.data

        def __int__(self):
            return self.ptr

    class Stream:
        def __init__(self):
            self._s = trt._kiln.DeviceStream.create(trt.default_backend()) if ON_DEVICE else None
            self.handle = self._s.handle if self._s else 0

        def synchronize(self):
            if self._s:
                self._s.synchronize()

    @staticmethod
    def mem_alloc(nbytes):
        return cuda.DeviceAllocation(nbytes)

    @staticmethod
    def memcpy_htod_async(dst, src, stream):
        src = np.ascontiguousarray(src)
        if ON_DEVICE:
            trt._kiln.copy_to_device(int(dst), src.ctypes.data, src.nbytes, stream._s)
        else:
            dst._mem[:src.nbytes] = src.view(np.uint8).reshape(-1)

    @staticmethod
    def memcpy_dtoh_async(dst, src, stream):
        if ON_DEVICE:
            trt._kiln.copy_to_host(dst.ctypes.data, int(src), dst.nbytes, stream._s)
        else:
            dst.view(np.uint8).reshape(-1)[:] = src._mem[:dst.nbytes]


@pytest.fixture
def onnx_file(tmp_path):
    model, ref = mlp_model()
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return str(path), ref


# ---- Building an engine ----
def build_engine(onnx_path, engine_path):
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(network, logger)
    success = parser.parse_from_file(onnx_path)
    for idx in range(parser.num_errors):
        print(parser.get_error(idx))
    if not success:
        return None
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 30)  # 1 GiB
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 8), (4, 8), (16, 8))
    config.add_optimization_profile(profile)
    serialized_engine = builder.build_serialized_network(network, config)
    with open(engine_path, "wb") as f:
        f.write(serialized_engine)
    return serialized_engine


def test_build_an_engine(onnx_file, tmp_path):
    path, _ = onnx_file
    engine_path = str(tmp_path / "sample.engine")
    serialized = build_engine(path, engine_path)
    assert serialized is not None and os.path.getsize(engine_path) == serialized.nbytes


# ---- Dynamic shapes ----
def test_dynamic_shapes(onnx_file, tmp_path):
    path, ref = onnx_file
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(network, logger)
    with open(path, "rb") as model:
        assert parser.parse(model.read())
    input_tensor = network.get_input(0)
    assert tuple(input_tensor.shape) == (-1, 8)
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape(input_tensor.name, min=(1, 8), opt=(8, 8), max=(32, 8))
    config.add_optimization_profile(profile)
    engine = trt.Runtime(logger).deserialize_cuda_engine(builder.build_serialized_network(network, config))
    context = engine.create_execution_context()
    stream = cuda.Stream()
    for batch in (1, 7, 32):
        context.set_input_shape("x", (batch, 8))
        assert tuple(context.get_tensor_shape("y")) == (batch, 4)
        h_input = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
        h_output = np.empty(tuple(context.get_tensor_shape("y")), dtype=trt.nptype(engine.get_tensor_dtype("y")))
        d_input, d_output = cuda.mem_alloc(h_input.nbytes), cuda.mem_alloc(h_output.nbytes)
        context.set_tensor_address("x", int(d_input))
        context.set_tensor_address("y", int(d_output))
        cuda.memcpy_htod_async(d_input, h_input, stream)
        context.execute_async_v3(stream_handle=stream.handle)
        cuda.memcpy_dtoh_async(h_output, d_output, stream)
        stream.synchronize()
        np.testing.assert_allclose(h_output, ref(h_input), rtol=TOL, atol=TOL)
    with pytest.raises(trt.KilnError):  # outside the profile
        context.set_input_shape("x", (33, 8))


# ---- Inference execution ----
def test_inference_execution(onnx_file, tmp_path):
    path, ref = onnx_file
    engine_path = str(tmp_path / "sample.engine")
    build_engine(path, engine_path)

    logger = trt.Logger(trt.Logger.WARNING)
    runtime = trt.Runtime(logger)
    with open(engine_path, "rb") as f:
        engine = runtime.deserialize_cuda_engine(f.read())
    context = engine.create_execution_context()

    inputs, outputs, allocations = [], [], {}
    context.set_input_shape("x", (4, 8))
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        dtype = trt.nptype(engine.get_tensor_dtype(name))
        shape = tuple(context.get_tensor_shape(name))
        host = np.zeros(shape, dtype=dtype)
        device = cuda.mem_alloc(host.nbytes)
        allocations[name] = device
        context.set_tensor_address(name, int(device))
        (inputs if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT else outputs).append((name, host, device))

    stream = cuda.Stream()
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    np.copyto(inputs[0][1], x)
    for _, host, device in inputs:
        cuda.memcpy_htod_async(device, host, stream)
    context.execute_async_v3(stream_handle=stream.handle)
    for _, host, device in outputs:
        cuda.memcpy_dtoh_async(host, device, stream)
    stream.synchronize()
    np.testing.assert_allclose(outputs[0][1], ref(x), rtol=TOL, atol=TOL)

    # execute_v2: synchronous, one address per I/O tensor in engine order
    bindings = [int(allocations[engine.get_tensor_name(i)]) for i in range(engine.num_io_tensors)]
    outputs[0][1].fill(0)
    assert context.execute_v2(bindings)
    cuda.memcpy_dtoh_async(outputs[0][1], outputs[0][2], stream)
    stream.synchronize()
    np.testing.assert_allclose(outputs[0][1], ref(x), rtol=TOL, atol=TOL)


# ---- INT8 calibration ----
class EntropyCalibrator(trt.IInt8EntropyCalibrator2):
    def __init__(self, batches, cache_file):
        trt.IInt8EntropyCalibrator2.__init__(self)
        self.batches = iter(batches)
        self.cache_file = cache_file
        self.batch_size = 4
        self.device_input = cuda.mem_alloc(4 * 8 * 4)
        self.stream = cuda.Stream()

    def get_batch_size(self):
        return self.batch_size

    def get_batch(self, names):
        try:
            batch = next(self.batches)
        except StopIteration:
            return None
        cuda.memcpy_htod_async(self.device_input, batch, self.stream)
        self.stream.synchronize()
        return [int(self.device_input)]

    def read_calibration_cache(self):
        if os.path.exists(self.cache_file):
            with open(self.cache_file, "rb") as f:
                return f.read()
        return None

    def write_calibration_cache(self, cache):
        with open(self.cache_file, "wb") as f:
            f.write(cache)


def test_int8_calibration(onnx_file, tmp_path):
    path, ref = onnx_file
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(8)]
    cache_file = str(tmp_path / "calibration.cache")

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(network, logger)
    assert parser.parse_from_file(path)
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    config.int8_calibrator = EntropyCalibrator(batches, cache_file)
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (4, 8), (4, 8), (4, 8))
    config.add_optimization_profile(profile)
    config.set_calibration_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    assert serialized is not None
    # The INT8 engine runs and stays close to the float reference (8-bit activations: a few percent).
    engine = trt.Runtime(logger).deserialize_cuda_engine(serialized)
    context = engine.create_execution_context()
    x = batches[0]
    y = np.empty((4, 4), np.float32)
    d_x, d_y, stream = cuda.mem_alloc(x.nbytes), cuda.mem_alloc(y.nbytes), cuda.Stream()
    context.set_tensor_address("x", int(d_x))
    context.set_tensor_address("y", int(d_y))
    cuda.memcpy_htod_async(d_x, x, stream)
    context.execute_async_v3(stream_handle=stream.handle)
    cuda.memcpy_dtoh_async(y, d_y, stream)
    stream.synchronize()
    want = ref(x)
    assert np.linalg.norm(y - want) / np.linalg.norm(want) < 0.1
    with open(cache_file, "rb") as f:
        lines = f.read().decode().splitlines()
    assert lines[0].startswith("TRT-") and lines[0].endswith("EntropyCalibration2")
    assert any(line.startswith("x: ") for line in lines[1:])

    # A second build reads the cache instead of calibrating again.
    config.int8_calibrator = EntropyCalibrator([], cache_file)
    assert builder.build_serialized_network(network, config) is not None


# ---- Timing cache ----
def test_timing_cache(onnx_file, tmp_path):
    path, _ = onnx_file
    cache_path = str(tmp_path / "timing.cache")

    def build(logger):
        builder = trt.Builder(logger)
        network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
        parser = trt.OnnxParser(network, logger)
        assert parser.parse_from_file(path)
        config = builder.create_builder_config()
        profile = builder.create_optimization_profile()
        profile.set_shape("x", (1, 8), (8, 8), (16, 8))
        config.add_optimization_profile(profile)
        serialized_cache = b""
        if os.path.exists(cache_path):
            with open(cache_path, "rb") as f:
                serialized_cache = f.read()
        timing_cache = config.create_timing_cache(serialized_cache)
        config.set_timing_cache(timing_cache, ignore_mismatch=False)
        engine = builder.build_serialized_network(network, config)
        cache = config.get_timing_cache()
        with open(cache_path, "wb") as f:
            f.write(memoryview(cache.serialize()))
        return engine

    logger = trt.Logger(trt.Logger.WARNING)
    first = build(logger)
    assert first is not None and os.path.exists(cache_path)
    if ON_DEVICE:  # GPU tactics were timed (the CPU backend times nothing: its cache stays empty)
        assert os.path.getsize(cache_path) > 0
    second = build(logger)  # reads the cache the first build wrote
    assert second is not None
