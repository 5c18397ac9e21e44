"""The TensorRT-shaped API (import kiln as trt) on the default backend (the CPU one where there is no GPU): the
documents' build / dynamic shapes / inference / timing cache code, network inspection, parser errors, profilers,
loggers, and bad use raising KilnError with kiln's message."""
import numpy as np
import pytest

import kiln as trt
from conftest import mlp_model


class Bound(dict):
    """numpy arrays for every I/O tensor of a context, bound to it: the arrays themselves on a cpu engine (host
    memory), device copies on a cuda one (kiln.DeviceMemory; read() brings the outputs back into the arrays)."""

    def __init__(self, engine, context, feeds):
        super().__init__()
        self.engine, self.mem, self.stream = engine, {}, None
        on_device = engine.backend != "cpu"
        if on_device:
            self.stream = trt._kiln.DeviceStream.create(engine.backend)
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        for name in names:
            if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
                self[name] = np.ascontiguousarray(feeds[name], dtype=trt.nptype(engine.get_tensor_dtype(name)))
                context.set_input_shape(name, self[name].shape)
        for name in names:
            if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
                self[name] = np.empty(tuple(context.get_tensor_shape(name)),
                                      dtype=trt.nptype(engine.get_tensor_dtype(name)))
            a = self[name]
            if on_device:
                self.mem[name] = trt._kiln.DeviceMemory.allocate(engine.backend, max(a.nbytes, 1))
                if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
                    trt._kiln.copy_to_device(self.mem[name].ptr, a.ctypes.data, a.nbytes, self.stream)
                context.set_tensor_address(name, self.mem[name].ptr)
            else:
                context.set_tensor_address(name, a.ctypes.data)
        if self.stream:
            self.stream.synchronize()

    @property
    def stream_handle(self):
        return self.stream.handle if self.stream else 0

    def read(self):
        if self.stream:
            for name, m in self.mem.items():
                if self.engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
                    trt._kiln.copy_to_host(self[name].ctypes.data, m.ptr, self[name].nbytes, self.stream)
            self.stream.synchronize()
        return self


def build(model, profile_shapes=None, logger=None, config_hook=None):
    logger = logger or trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(network, logger)
    assert parser.parse(model.SerializeToString()), [str(parser.get_error(i)) for i in range(parser.num_errors)]
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 30)
    if builder.platform_has_fast_fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    if profile_shapes:
        profile = builder.create_optimization_profile()
        for name, (lo, opt, hi) in profile_shapes.items():
            profile.set_shape(name, lo, opt, hi)
        config.add_optimization_profile(profile)
    if config_hook:
        config_hook(config)
    serialized = builder.build_serialized_network(network, config)
    assert serialized is not None and serialized.nbytes > 0
    return network, trt.Runtime(logger).deserialize_cuda_engine(serialized), serialized


def test_build_and_run_like_the_documents(mlp):
    model, ref = mlp
    _, engine, _ = build(model, {"x": ((1, 8), (4, 8), (16, 8))})
    assert engine.num_io_tensors == 2
    assert [engine.get_tensor_name(i) for i in range(2)] == ["x", "y"]
    assert engine.get_tensor_mode("x") == trt.TensorIOMode.INPUT
    assert engine.get_tensor_mode("y") == trt.TensorIOMode.OUTPUT
    assert engine.get_tensor_dtype("x") == trt.float32
    assert tuple(engine.get_tensor_shape("x")) == (-1, 8)
    assert [tuple(s) for s in engine.get_tensor_profile_shape("x", 0)] == [(1, 8), (4, 8), (16, 8)]
    context = engine.create_execution_context()
    tol = 1e-4 if engine.backend == "cpu" else 1e-2  # a GPU build may use FP16 (platform_has_fast_fp16)
    for batch in (1, 5, 16):  # dynamic shapes: one context, several shapes
        x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
        bufs = Bound(engine, context, {"x": x})
        assert tuple(context.get_tensor_shape("y")) == (batch, 4)
        assert context.execute_async_v3(bufs.stream_handle)
        np.testing.assert_allclose(bufs.read()["y"], ref(x), rtol=tol, atol=tol)
    # execute_v2: one address per I/O tensor in engine order (synchronous)
    x = np.ones((3, 8), np.float32)
    bufs = Bound(engine, context, {"x": x})
    ptrs = [b.ptr for b in bufs.mem.values()] if bufs.mem else [bufs["x"].ctypes.data, bufs["y"].ctypes.data]
    assert context.execute_v2(ptrs)
    np.testing.assert_allclose(bufs.read()["y"], ref(x), rtol=tol, atol=tol)


def test_engine_serializes_and_reloads_identically(mlp):
    model, _ = mlp
    _, engine, serialized = build(model, {"x": ((1, 8), (2, 8), (4, 8))})
    again = trt.Runtime(trt.Logger()).deserialize_cuda_engine(engine.serialize())
    assert bytes(engine.serialize()) == bytes(serialized)
    assert again.num_io_tensors == engine.num_io_tensors
    assert again.num_layers == engine.num_layers > 0
    info = engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON)
    assert "Layers" in info


def test_aux_streams_setting(mlp):
    """max_aux_streams is a builder setting (0..64); a chain has no branches to put beside each other, so its engine
    uses no auxiliary stream, and runs as before; a cpu context takes no streams."""
    model, ref = mlp
    config = trt.Builder(trt.Logger()).create_builder_config()
    assert config.max_aux_streams == 0
    config.max_aux_streams = 3
    assert config.max_aux_streams == 3
    with pytest.raises(trt.KilnError, match="0..64"):
        config.max_aux_streams = 65
    _, engine, _ = build(model, {"x": ((1, 8), (2, 8), (4, 8))},
                         config_hook=lambda c: setattr(c, "max_aux_streams", 2))
    assert engine.num_aux_streams == 0
    context = engine.create_execution_context()
    context.set_aux_streams([])
    if engine.backend == "cpu":
        with pytest.raises(trt.KilnError, match="one layer at a time"):
            context.set_aux_streams([1])
    x = np.ones((2, 8), np.float32)
    bufs = Bound(engine, context, {"x": x})
    assert context.execute_async_v3(bufs.stream_handle)
    tol = 1e-4 if engine.backend == "cpu" else 1e-2
    np.testing.assert_allclose(bufs.read()["y"], ref(x), rtol=tol, atol=tol)


def test_network_inspection(mlp):
    model, _ = mlp
    network, _, _ = build(model, {"x": ((1, 8), (2, 8), (4, 8))})
    assert network.num_inputs == 1 and network.num_outputs == 1
    x = network.get_input(0)
    assert x.name == "x" and x.dtype == trt.float32 and tuple(x.shape) == (-1, 8) and x.is_network_input
    assert network.get_output(0).name == "y"
    assert network.num_layers == 4
    layers = [network.get_layer(i) for i in range(network.num_layers)]
    assert [lay.type for lay in layers] == ["MatMul", "Add", "Relu", "MatMul"]
    assert layers[0].name == "fc1" and layers[0].get_input(0).name == "x" and layers[0].get_output(0).name == "h"
    with pytest.raises(IndexError):
        network.get_layer(4)


def test_parser_reports_every_unsupported_node():
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("NoSuchOp", ["a"], ["b"], name="first_bad"),
             helper.make_node("AlsoMissing", ["b"], ["y"], name="second_bad")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    logger = trt.Logger(trt.Logger.INTERNAL_ERROR)
    network = trt.Builder(logger).create_network()
    parser = trt.OnnxParser(network, logger)
    assert not parser.parse(model.SerializeToString())
    assert parser.num_errors == 2
    errors = [parser.get_error(i) for i in range(parser.num_errors)]
    assert [e.node_name() for e in errors] == ["first_bad", "second_bad"]
    assert [e.node_operator() for e in errors] == ["NoSuchOp", "AlsoMissing"]
    assert all(e.code() == trt.ErrorCode.UNSUPPORTED_NODE for e in errors)
    assert "NoSuchOp" in errors[0].desc()
    assert not parser.parse(b"this is not an onnx model")
    assert parser.num_errors == 1 and parser.get_error(0).desc()


def test_profiler_and_logger_subclasses(mlp):
    model, _ = mlp

    class Log(trt.ILogger):
        def __init__(self):
            trt.ILogger.__init__(self)
            self.seen = []

        def log(self, severity, msg):
            self.seen.append((severity, msg))

    class Prof(trt.IProfiler):
        def __init__(self):
            trt.IProfiler.__init__(self)
            self.layers = []

        def report_layer_time(self, layer_name, ms):
            self.layers.append((layer_name, ms))

    log = Log()
    _, engine, _ = build(model, {"x": ((2, 8), (2, 8), (2, 8))}, logger=log)
    assert log.seen, "the build logged nothing through the Python logger"
    assert all(isinstance(m, str) for _, m in log.seen)
    context = engine.create_execution_context()
    prof = Prof()
    context.profiler = prof
    bufs = Bound(engine, context, {"x": np.ones((2, 8), np.float32)})
    context.execute_async_v3(bufs.stream_handle)
    bufs.read()
    if engine.backend == "cpu":
        assert len(prof.layers) == engine.num_layers
    else:  # layers that launch nothing (views) are not reported
        assert 0 < len(prof.layers) <= engine.num_layers
    assert all(ms >= 0 for _, ms in prof.layers)


def test_timing_cache_round_trip(mlp):
    model, _ = mlp
    holder = {}

    def with_cache(config):
        holder["cache"] = config.create_timing_cache(b"")
        assert config.set_timing_cache(holder["cache"], ignore_mismatch=False)

    build(model, {"x": ((1, 8), (2, 8), (4, 8))}, config_hook=with_cache)
    blob = holder["cache"].serialize()
    assert isinstance(blob, (bytes, bytearray))
    config = trt.Builder(trt.Logger()).create_builder_config()
    if blob:
        assert config.create_timing_cache(blob) is not None
    with pytest.raises(trt.KilnError):
        config.create_timing_cache(b"{not json")


def test_bad_use_raises_with_kilns_message(mlp):
    model, _ = mlp
    _, engine, _ = build(model, {"x": ((1, 8), (2, 8), (4, 8))})
    context = engine.create_execution_context()
    with pytest.raises(trt.KilnError, match="nope"):
        context.set_input_shape("nope", (2, 8))
    with pytest.raises(trt.KilnError, match="x"):
        context.set_input_shape("x", (9, 8))  # outside the profile's 1..4
    with pytest.raises(trt.KilnError):
        context.set_input_shape("x", (2, 8, 1))  # wrong rank
    with pytest.raises(trt.KilnError, match="nope"):
        context.set_tensor_address("nope", 0)
    with pytest.raises(trt.KilnError, match="nope"):
        engine.get_tensor_shape("nope")
    fresh = engine.create_execution_context()
    fresh.set_input_shape("x", (2, 8))
    with pytest.raises(trt.KilnError):
        fresh.execute_async_v3(0)  # no addresses bound
    with pytest.raises(trt.KilnError):
        trt.Runtime(trt.Logger()).deserialize_cuda_engine(b"\x00" * 64)
    config = trt.Builder(trt.Logger()).create_builder_config()
    with pytest.raises(trt.KilnError, match="DLA"):
        config.set_memory_pool_limit(trt.MemoryPoolType.DLA_LOCAL_DRAM, 1 << 20)
    with pytest.raises(trt.KilnError):
        config.builder_optimization_level = 9
    assert isinstance(trt.KilnError("x"), RuntimeError)


def test_flags_profiles_and_helpers():
    config = trt.Builder(trt.Logger()).create_builder_config()
    assert config.get_flag(trt.BuilderFlag.TF32)
    config.set_flag(trt.BuilderFlag.INT8)
    assert config.get_flag(trt.BuilderFlag.INT8)
    config.clear_flag(trt.BuilderFlag.INT8)
    assert not config.get_flag(trt.BuilderFlag.INT8)
    config.set_flag(trt.BuilderFlag.STRICT_TYPES)
    assert config.get_flag(trt.BuilderFlag.STRICT_TYPES)
    config.set_flag(trt.BuilderFlag.PREFER_PRECISION_CONSTRAINTS)
    assert not config.get_flag(trt.BuilderFlag.STRICT_TYPES)
    with pytest.raises(trt.KilnError, match="SPARSE_WEIGHTS"):
        config.set_flag(trt.BuilderFlag.SPARSE_WEIGHTS)
    assert not config.get_flag(trt.BuilderFlag.SPARSE_WEIGHTS)
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    assert config.profiling_verbosity == trt.ProfilingVerbosity.DETAILED
    config.builder_optimization_level = 2
    assert config.builder_optimization_level == 2
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 28)
    assert config.get_memory_pool_limit(trt.MemoryPoolType.WORKSPACE) == 1 << 28
    profile = trt.Builder(trt.Logger()).create_optimization_profile()
    profile.set_shape("x", (1, 3), (2, 3), (4, 3))
    assert [tuple(s) for s in profile.get_shape("x")] == [(1, 3), (2, 3), (4, 3)]
    assert profile
    bad = trt.Builder(trt.Logger()).create_optimization_profile()
    with pytest.raises(trt.KilnError):
        bad.set_shape("x", (4, 3), (2, 3), (1, 3))
        bad._p.validate()
    assert trt.volume((2, 3, 4)) == 24 and trt.volume(()) == 1
    assert trt.nptype(trt.float16) == np.float16 and trt.nptype(trt.int64) == np.int64
    with pytest.raises(TypeError):
        trt.nptype(trt.bfloat16)
    assert trt.Logger(trt.Logger.VERBOSE).min_severity == trt.Logger.VERBOSE


def test_network_built_in_code():
    logger = trt.Logger()
    builder = trt.Builder(logger)
    network = builder.create_network()
    x = network.add_input("x", trt.float32, (2, 3))
    network.add_constant("two", np.full((2, 3), 2.0, np.float32))
    network.add_op("Mul", "scale", ["x", "two"], ["y"])
    network.mark_output("y")
    assert x.name == "x" and network.num_layers == 1
    config = builder.create_builder_config()
    engine = trt.Runtime(logger).deserialize_cuda_engine(builder.build_serialized_network(network, config))
    context = engine.create_execution_context()
    bufs = Bound(engine, context, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})
    context.execute_async_v3(bufs.stream_handle)
    np.testing.assert_array_equal(bufs.read()["y"], 2 * np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(trt.KilnError, match="NoSuchOp"):
        network.add_op("NoSuchOp", "bad", ["y"], ["z"])


def test_package_is_typed():
    import os
    here = os.path.dirname(trt.__file__)
    assert os.path.exists(os.path.join(here, "py.typed"))
    stub = os.path.join(here, "_kiln.pyi")
    assert os.path.exists(stub), "the extension's stubs (nanobind stubgen) are built with it"
    text = open(stub).read()
    for name in ("class NetworkDefinition", "class ExecutionContext", "def set_input_shape", "class BuildConfigFile"):
        assert name in text, name
