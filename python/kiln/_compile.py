"""kiln's high-level API: compile(model, ...) builds an engine and returns it callable; load(path) reads one back.

    engine = kiln.compile("resnet50.onnx", fp16=True, shapes={"x": (8, 3, 224, 224)})
    y = engine(x)                      # numpy in, numpy out; CUDA torch tensors in, CUDA torch tensors out;
                                       # other CUDA DLPack objects in, DLPack objects out
    engine.save("r50.engine"); engine = kiln.load("r50.engine")
"""
from __future__ import annotations

import ctypes
import os
import statistics
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

import numpy as np

from . import _kiln
from ._builder import Builder, BuilderFlag, IBuilderConfig, MemoryPoolType
from ._calibrator import IInt8EntropyCalibrator2, IInt8MinMaxCalibrator, IInt8PercentileCalibrator
from ._network import OnnxParser
from ._runtime import ICudaEngine, IProfiler, Runtime
from ._types import KilnError, TensorIOMode, nptype


def _logger(logger):
    if logger is not None:
        return logger
    from . import Logger
    return Logger(Logger.WARNING)


def _shape_map(shapes: Optional[Mapping[str, Sequence[int]]]) -> Dict[str, List[int]]:
    return {k: [int(d) for d in v] for k, v in (shapes or {}).items()}


class _DataCalibrator:
    """calibration_data (an iterable of {input name: array} dicts, or of arrays for a one-input model) as a
    calibrator of the chosen algorithm."""

    @staticmethod
    def make(data: Iterable, algorithm: str, cache: Optional[str], percentile: float):
        base = {"entropy": IInt8EntropyCalibrator2, "minmax": IInt8MinMaxCalibrator,
                "percentile": IInt8PercentileCalibrator}.get(algorithm)
        if base is None:
            raise KilnError(f"calibration_algorithm '{algorithm}' is not one of entropy, minmax, percentile")

        class DataCalibrator(base):
            def __init__(self):
                base.__init__(self)
                self._it = iter(data) if data is not None else iter(())
                self.percentile = percentile

            def get_batch(self, names):
                try:
                    b = next(self._it)
                except StopIteration:
                    return None
                if isinstance(b, Mapping):
                    missing = [n for n in names if n not in b]
                    if missing:
                        raise KilnError(f"calibration batch lacks the inputs {missing}")
                    return [b[n] for n in names]
                if len(names) != 1:
                    raise KilnError(f"the model has {len(names)} inputs: give calibration batches as dicts by name")
                return [b]

            def read_calibration_cache(self):
                if cache and os.path.exists(cache):
                    with open(cache, "rb") as f:
                        return f.read()
                return None

            def write_calibration_cache(self, blob):
                if cache:
                    with open(cache, "wb") as f:
                        f.write(blob)

        return DataCalibrator()


def compile(model, *, fp16: bool = False, bf16: bool = False, int8: bool = False, fp8: bool = False,  # noqa: A001
            tf32: bool = True, shapes: Optional[Mapping[str, Sequence[int]]] = None,
            min_shapes: Optional[Mapping[str, Sequence[int]]] = None,
            opt_shapes: Optional[Mapping[str, Sequence[int]]] = None,
            max_shapes: Optional[Mapping[str, Sequence[int]]] = None,
            calibration_data: Optional[Iterable] = None, calibration_cache: Optional[str] = None,
            calibration_algorithm: str = "entropy", calibration_percentile: float = 99.99,
            timing_cache: Optional[str] = None, backend: Optional[str] = None, optimization_level: int = 3,
            workspace: Optional[int] = None, strongly_typed: bool = False, logger=None, _config=None) -> "Engine":
    """Builds `model` (an ONNX path, its bytes, or an onnx.ModelProto) into an Engine.

    shapes fixes dynamic inputs' shapes (min = opt = max); min/opt/max_shapes give a range instead. int8 needs
    calibration_data (or a calibration_cache written before) unless the model has Q/DQ nodes. timing_cache is a
    file path, read and updated. backend: "cuda" or "cpu" (default: cuda where a GPU is found)."""
    log = _logger(logger)
    builder = Builder(log)
    network = builder.create_network()
    parser = OnnxParser(network, log)
    if shapes:
        parser.set_input_shapes(_shape_map(shapes))
    if isinstance(model, (str, os.PathLike)):
        ok = parser.parse_from_file(os.fspath(model))
    else:
        ok = parser.parse(model)
    if not ok:
        raise KilnError("\n".join(parser.get_error(i).desc() for i in range(parser.num_errors)))
    config = builder.create_builder_config()
    if backend:
        config.backend = backend
    for flag, on in ((BuilderFlag.FP16, fp16), (BuilderFlag.BF16, bf16), (BuilderFlag.INT8, int8),
                     (BuilderFlag.FP8, fp8), (BuilderFlag.STRONGLY_TYPED, strongly_typed)):
        if on:
            config.set_flag(flag)
    if not tf32:
        config.clear_flag(BuilderFlag.TF32)
    config.builder_optimization_level = optimization_level
    if workspace is not None:
        config.set_memory_pool_limit(MemoryPoolType.WORKSPACE, int(workspace))
    lo, mid, hi = _shape_map(min_shapes), _shape_map(opt_shapes), _shape_map(max_shapes)
    if _config is not None and not (shapes or lo or mid or hi):  # a BuildConfig's shapes, by the model's inputs
        names = [network.get_input(i).name for i in range(network.num_inputs)]
        lo, mid, hi = (dict(m) for m in _config.resolve_shapes(names))
    if shapes:
        for k, v in _shape_map(shapes).items():
            lo.setdefault(k, v), mid.setdefault(k, v), hi.setdefault(k, v)
    if lo or mid or hi:
        names = set(lo) | set(mid) | set(hi)
        incomplete = [n for n in names if not (n in lo and n in mid and n in hi)]
        if incomplete:
            raise KilnError(f"min_shapes, opt_shapes and max_shapes must each name the inputs {sorted(incomplete)}")
        profile = builder.create_optimization_profile()
        for n in sorted(names):
            profile.set_shape(n, lo[n], mid[n], hi[n])
        config.add_optimization_profile(profile)
    if calibration_data is not None or calibration_cache:
        if not (int8 or fp8):
            raise KilnError("calibration_data / calibration_cache give INT8 or FP8 ranges: set int8=True or fp8=True")
        config.int8_calibrator = _DataCalibrator.make(calibration_data, calibration_algorithm, calibration_cache,
                                                      calibration_percentile)
    if _config is not None:  # a BuildConfig's other fields
        _apply_config(config, _config)
    if timing_cache:
        config._c.timing_cache_file = os.fspath(timing_cache)
    serialized = builder.build_serialized_network(network, config)
    engine = Engine(Runtime(log).deserialize_cuda_engine(serialized))
    engine.build_report = builder.last_build_report
    return engine


_PRECISIONS = {"fp32": "FLOAT", "fp16": "HALF", "bf16": "BF16", "int8": "INT8", "fp8": "FP8"}


def _apply_config(config: IBuilderConfig, c) -> None:
    """A BuildConfig's fields that compile() has no argument for, as `kiln build --config` applies them."""
    from ._types import DataType
    if c.activations_mb is not None:
        config.set_memory_pool_limit(MemoryPoolType.ACTIVATIONS, int(c.activations_mb * (1 << 20)))
    if c.profiling_verbosity:
        config.profiling_verbosity = {"layer_names_only": _kiln.ProfilingVerbosity.LAYER_NAMES_ONLY,
                                      "detailed": _kiln.ProfilingVerbosity.DETAILED,
                                      "none": _kiln.ProfilingVerbosity.NONE}[c.profiling_verbosity]
    if c.avg_timing is not None:
        config.avg_timing_iterations = c.avg_timing
    if c.max_aux_streams is not None:
        config.max_aux_streams = c.max_aux_streams
    if c.precision_constraints == "obey":
        config.set_flag(BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
    for layer, p in c.layer_precisions.items():
        config.set_layer_precision(layer, getattr(DataType, _PRECISIONS[p]))


def load(path: str, logger=None) -> "Engine":
    """An Engine from an engine file (Engine.save, kiln build --saveEngine)."""
    return Engine(Runtime(_logger(logger)).load_engine_file(os.fspath(path)))


class _Collect(IProfiler):
    def __init__(self):
        IProfiler.__init__(self)
        self.layers: List[tuple] = []

    def report_layer_time(self, layer_name, ms):
        self.layers.append((layer_name, float(ms)))


def _cuda_pointer(x) -> Optional[int]:
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0])
    return None


# DLPack's dtype (code, bits) and kiln's numpy spelling of it; device types CUDA (2) and CUDA managed (13).
_DLPACK_DTYPES = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64", (1, 8): "uint8",
                  (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64", (2, 16): "float16", (2, 32): "float32",
                  (2, 64): "float64", (4, 16): "bfloat16", (6, 8): "bool"}
_DLPACK_CODES = {v: k for k, v in _DLPACK_DTYPES.items()}
_DL_CUDA, _DL_CUDA_MANAGED = 2, 13


def _dlpack_device(x):
    """(device type, id) of a DLPack object that is not numpy/torch/CuPy-shaped, or None."""
    if _cuda_pointer(x) is not None or isinstance(x, np.ndarray) or not hasattr(x, "__dlpack__"):
        return None
    try:
        return tuple(int(v) for v in x.__dlpack_device__())
    except Exception:  # noqa: BLE001 - a producer without __dlpack_device__: let numpy try it
        return None


def _is_cuda_dlpack(x) -> bool:
    d = _dlpack_device(x)
    return d is not None and d[0] in (_DL_CUDA, _DL_CUDA_MANAGED)


def _dlpack_input(name: str, x, stream_handle: int):
    """(address, shape, kiln dtype name, owner) of a CUDA DLPack object, read in place (hold `owner` until the run
    is done); the producer orders its work before `stream_handle` (the DLPack stream handshake; the legacy default
    stream, 1, stands for stream 0, which the protocol does not allow)."""
    stream = stream_handle if stream_handle else 1
    try:
        try:
            capsule = x.__dlpack__(stream=stream)
        except TypeError:  # a producer predating the stream argument
            capsule = x.__dlpack__()
        ptr, shape, strides, code, bits, lanes, dev_type, dev_id, owner = _kiln.dlpack_view(capsule)
    except KilnError:
        raise
    except Exception as e:  # noqa: BLE001 - the producer's refusal, as kiln's error
        raise KilnError(f"input '{name}': its DLPack export failed: {type(e).__name__}: {e}") from None
    if dev_id != 0:
        raise KilnError(f"input '{name}' is on CUDA device {dev_id}; kiln runs on the first visible GPU (device 0): "
                        "move it there, or set CUDA_VISIBLE_DEVICES")
    dtype = _DLPACK_DTYPES.get((code, bits)) if lanes == 1 else None
    if dtype is None:
        raise KilnError(f"input '{name}' has DLPack dtype code {code} with {bits} bits x {lanes} lanes, which kiln "
                        "does not take")
    expect, step = [], 1
    for d in reversed(shape):
        expect.append(step)
        step *= max(int(d), 1)
    expect.reverse()
    if any(s != e and d > 1 for s, e, d in zip(strides, expect, shape)):
        raise KilnError(f"input '{name}' is not contiguous (strides {tuple(strides)} for shape {tuple(shape)}): "
                        "pass a contiguous copy")
    return ptr, tuple(shape), dtype, owner


class Engine:
    """A built engine, callable: ``engine(x)``, ``engine(x=..., mask=...)`` or ``engine.run({"x": x})``.

    Inputs are numpy arrays (or anything numpy converts, host DLPack objects included) on either backend, or CUDA
    arrays on cuda, read in place: torch tensors, CuPy arrays, anything with __cuda_array_interface__, and any
    DLPack object on a CUDA device (JAX, TensorFlow, ...). Outputs come back as the inputs came: numpy arrays for
    host inputs, torch tensors on the inputs' device for torch inputs, CuPy arrays for CuPy, and DLPack objects
    (read them with your framework's from_dlpack) for other DLPack inputs."""

    def __init__(self, engine: ICudaEngine):
        self._engine = engine
        self._context = engine.create_execution_context()
        self._stream = None
        self._held: List[Any] = []
        self._sync = None  # how to wait for the last run (device arrays: their framework's stream)
        self.build_report: Optional[dict] = None
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self._inputs = [n for n in names if engine.get_tensor_mode(n) == TensorIOMode.INPUT]
        self._outputs = [n for n in names if engine.get_tensor_mode(n) == TensorIOMode.OUTPUT]

    @property
    def backend(self) -> str:
        return self._engine.backend

    @property
    def inputs(self) -> List[dict]:
        return [self._describe(n) for n in self._inputs]

    @property
    def outputs(self) -> List[dict]:
        return [self._describe(n) for n in self._outputs]

    def _describe(self, name: str) -> dict:
        e = self._engine
        d = {"name": name, "dtype": e.get_tensor_dtype(name), "shape": tuple(e.get_tensor_shape(name))}
        if e.get_tensor_mode(name) == TensorIOMode.INPUT and e.num_optimization_profiles > 0 and -1 in d["shape"]:
            d["profile"] = [tuple(s) for s in e.get_tensor_profile_shape(name, 0)]
        return d

    @property
    def trt_engine(self) -> ICudaEngine:
        """The TensorRT-shaped engine underneath."""
        return self._engine

    def save(self, path: str) -> None:
        with open(os.fspath(path), "wb") as f:
            f.write(self._engine.serialize())

    def __call__(self, *args, **kwargs):
        if len(args) > len(self._inputs):
            raise KilnError(f"{len(args)} inputs given, the engine takes {len(self._inputs)} ({', '.join(self._inputs)})")
        feeds = dict(zip(self._inputs, args))
        for k, v in kwargs.items():
            if k in feeds:
                raise KilnError(f"input '{k}' given twice (by position and by name)")
            feeds[k] = v
        outs = self.run(feeds)
        values = [outs[n] for n in self._outputs]
        return values[0] if len(values) == 1 else tuple(values)

    def run(self, feeds: Mapping[str, Any]) -> Dict[str, Any]:
        """Runs once; returns {output name: array}."""
        unknown = [k for k in feeds if k not in self._inputs]
        if unknown:
            raise KilnError(f"the engine has no input {unknown[0]!r} (its inputs: {', '.join(self._inputs)})")
        missing = [n for n in self._inputs if n not in feeds]
        if missing:
            raise KilnError(f"input {missing[0]!r} is missing (the engine's inputs: {', '.join(self._inputs)})")
        if self._engine.backend == "cuda":
            return self._run_cuda(feeds)
        return self._run_host(feeds)

    # -- the cpu backend: host memory throughout
    def _host_input(self, name: str, value) -> np.ndarray:
        if _cuda_pointer(value) is not None or _is_cuda_dlpack(value):
            raise KilnError(f"input '{name}' is in GPU memory, but this engine runs on the {self.backend} backend")
        if hasattr(value, "detach") and hasattr(value, "numpy"):
            value = value.detach().numpy()
        elif not isinstance(value, np.ndarray) and _dlpack_device(value) is not None:
            value = np.from_dlpack(value)  # a host DLPack object (CUDA ones are refused above or read in place)
        want = nptype(self._engine.get_tensor_dtype(name))
        a = np.asarray(value)
        if a.dtype != want and (a.dtype.kind != np.dtype(want).kind or
                                not np.can_cast(a.dtype, want, casting="same_kind")):
            raise KilnError(f"input '{name}' is {a.dtype}, the engine takes {np.dtype(want)}")
        a = np.asarray(a, dtype=want)  # (np.ascontiguousarray would make a 0-d array 1-d)
        return a if a.flags.c_contiguous else a.copy(order="C")

    def _run_host(self, feeds):
        ctx = self._context
        arrays = {n: self._host_input(n, feeds[n]) for n in self._inputs}
        for n, a in arrays.items():
            ctx.set_input_shape(n, a.shape)
            ctx.set_tensor_address(n, a.ctypes.data)
        outs = {}
        for n in self._outputs:
            shape = self._known_shape(n)
            if shape is not None:
                outs[n] = np.empty(shape, dtype=nptype(self._engine.get_tensor_dtype(n)))
                ctx.set_tensor_address(n, outs[n].ctypes.data)
        ctx.execute_async_v3(0)
        for n in self._outputs:
            if n not in outs:  # a size that depends on the data: read the context's own buffer
                shape = tuple(ctx.get_tensor_shape(n))
                dt = np.dtype(nptype(self._engine.get_tensor_dtype(n)))
                count = int(np.prod(shape, dtype=np.int64))
                buf = (ctypes.c_char * (count * dt.itemsize)).from_address(ctx.get_output_buffer(n))
                outs[n] = np.frombuffer(bytes(buf), dtype=dt).reshape(shape)
        return outs

    def _known_shape(self, name: str):
        try:
            shape = tuple(self._context.get_tensor_shape(name))
        except KilnError:
            return None
        return None if any(d < 0 for d in shape) else shape

    # -- the cuda backend: device arrays in place, host arrays copied
    def _run_cuda(self, feeds):
        ctx = self._context
        device_inputs = {n: _cuda_pointer(v) for n, v in feeds.items()}
        kind = "numpy"
        for v in feeds.values():
            if _cuda_pointer(v) is not None:
                kind = "torch" if type(v).__module__.startswith("torch") else "cupy"
                break
        if kind == "numpy" and any(_is_cuda_dlpack(v) for v in feeds.values()):
            kind = "dlpack"  # outputs come back as DLPack objects (jax.dlpack.from_dlpack, torch.from_dlpack...)
        if kind == "torch":
            import torch  # noqa: F811
            stream_handle = torch.cuda.current_stream().cuda_stream
        elif kind == "cupy":
            import cupy
            stream_handle = cupy.cuda.get_current_stream().ptr
        else:
            if self._stream is None:
                self._stream = _kiln.DeviceStream.create("cuda")
            stream_handle = self._stream.handle
        held = []
        for n in self._inputs:
            v = feeds[n]
            want = self._engine.get_tensor_dtype(n)
            if device_inputs[n] is None and _is_cuda_dlpack(v):
                ptr, shape, got, owner = _dlpack_input(n, v, stream_handle)
                if got != _kiln.data_type_name(want):
                    raise KilnError(f"input '{n}' is {got}, the engine takes {_kiln.data_type_name(want)}")
                ctx.set_input_shape(n, shape)
                ctx.set_tensor_address(n, ptr)
                held.append((v, owner))  # until the run is done (kind "dlpack" synchronizes before returning)
            elif device_inputs[n] is not None:
                ctx.set_input_shape(n, tuple(v.shape))
                self._check_device_dtype(n, v, want)
                if hasattr(v, "is_contiguous") and not v.is_contiguous():
                    raise KilnError(f"input '{n}' is not contiguous: pass x.contiguous()")
                ctx.set_tensor_address(n, device_inputs[n])
            else:
                a = self._host_input(n, v)
                mem = _kiln.DeviceMemory.allocate("cuda", max(a.nbytes, 1))
                stream = self._stream or _kiln.DeviceStream.create("cuda")
                self._stream = stream
                _kiln.copy_to_device(mem.ptr, a.ctypes.data, a.nbytes, stream)
                stream.synchronize()
                held.append((a, mem))
                ctx.set_input_shape(n, a.shape)
                ctx.set_tensor_address(n, mem.ptr)
        self._held = held  # inputs' owners and copies live until the next run (device work may still read them)
        outs, mems = {}, {}
        for n in self._outputs:
            shape = self._known_shape(n)
            if shape is None:
                raise KilnError(f"output '{n}' has a size that depends on the data; run this engine through "
                                "IExecutionContext and read it with get_output_buffer")
            dt = self._engine.get_tensor_dtype(n)
            if kind == "torch":
                dev = next(v.device for v in feeds.values() if _cuda_pointer(v) is not None)
                outs[n] = torch.empty(shape, dtype=_torch_dtype(torch, dt), device=dev)
                ctx.set_tensor_address(n, outs[n].data_ptr())
            elif kind == "cupy":
                outs[n] = cupy.empty(shape, dtype=nptype(dt))
                ctx.set_tensor_address(n, outs[n].data.ptr)
            else:
                count = int(np.prod(shape, dtype=np.int64)) * _kiln.data_type_size(dt)
                mems[n] = _kiln.DeviceMemory.allocate("cuda", max(count, 1))
                ctx.set_tensor_address(n, mems[n].ptr)
        ctx.execute_async_v3(stream_handle)
        if kind == "dlpack":  # the consumer reads them on its own stream: finish here
            self._stream.synchronize()
            self._sync = None
            device_id = 0  # kiln's memory is on the first visible GPU
            for n, mem in mems.items():
                name = _kiln.data_type_name(self._engine.get_tensor_dtype(n))
                if name not in _DLPACK_CODES:
                    raise KilnError(f"output '{n}' is {name}, which DLPack cannot carry")
                code, bits = _DLPACK_CODES[name]
                outs[n] = _kiln.dlpack_export(mem, mem.ptr, list(self._known_shape(n)), code, bits, _DL_CUDA,
                                              device_id)
            return outs
        self._sync = (torch.cuda.current_stream().synchronize if kind == "torch" else
                      cupy.cuda.get_current_stream().synchronize if kind == "cupy" else None)
        if kind == "numpy":
            for n, mem in mems.items():
                a = np.empty(self._known_shape(n), dtype=nptype(self._engine.get_tensor_dtype(n)))
                _kiln.copy_to_host(a.ctypes.data, mem.ptr, a.nbytes, self._stream)
                outs[n] = a
            self._stream.synchronize()
        return outs

    @staticmethod
    def _check_device_dtype(name, v, want):
        got = str(getattr(v, "dtype", "")).replace("torch.", "")
        names = {"float32": "float32", "float": "float32", "float16": "float16", "half": "float16",
                 "bfloat16": "bfloat16", "int64": "int64", "long": "int64", "int32": "int32", "int": "int32",
                 "int8": "int8", "uint8": "uint8", "bool": "bool"}
        if names.get(got, got) != _kiln.data_type_name(want):
            raise KilnError(f"input '{name}' is {got}, the engine takes {_kiln.data_type_name(want)}")

    # -- measuring
    def profile(self, *args, **kwargs) -> List[tuple]:
        """Runs once with a per-layer profiler; returns [(layer name, ms)] in execution order."""
        p = _Collect()
        self._context.profiler = p
        try:
            self(*args, **kwargs)
        finally:
            self._context.profiler = None
        return p.layers

    def benchmark(self, *args, iterations: int = 100, warmup: int = 10, **kwargs) -> dict:
        """Runs the engine `iterations` times after `warmup` runs; returns trtexec-style latency statistics (ms,
        host wall time per run including transfers of host inputs) and throughput (runs per second)."""
        if iterations < 1:
            raise KilnError("benchmark: iterations must be at least 1")
        def once():
            self(*args, **kwargs)
            if self._sync is not None:  # device arrays: the run is asynchronous, wait for it
                self._sync()

        for _ in range(max(0, warmup)):
            once()
        times = []
        for _ in range(iterations):
            t0 = time.perf_counter()
            once()
            times.append((time.perf_counter() - t0) * 1000.0)
        s = sorted(times)

        def pct(p):
            return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]

        return {"iterations": iterations, "backend": self.backend, "min_ms": s[0], "max_ms": s[-1],
                "mean_ms": statistics.fmean(s), "median_ms": statistics.median(s), "p90_ms": pct(90),
                "p95_ms": pct(95), "p99_ms": pct(99), "throughput_qps": 1000.0 / statistics.fmean(s)}


def _torch_dtype(torch, dt):
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int64": torch.int64,
            "int32": torch.int32, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
            "float64": torch.float64}[_kiln.data_type_name(dt)]

