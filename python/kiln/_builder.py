"""The builder side, TensorRT-shaped: Builder, IBuilderConfig, BuilderFlag, MemoryPoolType, IOptimizationProfile,
ITimingCache and IHostMemory."""
from __future__ import annotations

import enum
import json
import os
import tempfile
from typing import Dict, List, Optional

from . import _kiln
from ._calibrator import IInt8Calibrator
from ._network import INetworkDefinition, NetworkDefinitionCreationFlag
from ._types import DataType, Dims, KilnError


class IHostMemory(bytes):
    """Serialized bytes (an engine, a timing cache): a bytes object, with TensorRT's nbytes and dtype."""

    @property
    def nbytes(self) -> int:
        return len(self)

    @property
    def dtype(self) -> DataType:
        return DataType.UINT8


class BuilderFlag(enum.IntEnum):
    """TensorRT's builder flags. STRICT_TYPES (TensorRT's older name) means OBEY_PRECISION_CONSTRAINTS;
    PREFER_PRECISION_CONSTRAINTS is kiln's default behaviour (layer precisions are preferences) and clears OBEY. The
    flags kiln has no counterpart for exist so that code naming them runs up to set_flag, which raises KilnError
    saying why."""

    FP16 = 0
    BF16 = 1
    INT8 = 2
    FP8 = 3
    TF32 = 4
    STRONGLY_TYPED = 5
    OBEY_PRECISION_CONSTRAINTS = 6
    PREFER_PRECISION_CONSTRAINTS = 100
    STRICT_TYPES = 101
    # TensorRT's flags kiln has no counterpart for: set_flag raises KilnError saying why (_UNSUPPORTED_FLAGS).
    GPU_FALLBACK = 200
    REFIT = 201
    DISABLE_TIMING_CACHE = 202
    SPARSE_WEIGHTS = 203
    SAFETY_SCOPE = 204
    DIRECT_IO = 205
    REJECT_EMPTY_ALGORITHMS = 206
    VERSION_COMPATIBLE = 207
    EXCLUDE_LEAN_RUNTIME = 208
    ERROR_ON_TIMING_CACHE_MISS = 209
    WEIGHTLESS = 210
    STRIP_PLAN = 211
    WEIGHT_STREAMING = 212
    INT4 = 213
    DEBUG = 214


_UNSUPPORTED_FLAGS = {
    BuilderFlag.GPU_FALLBACK: "kiln has no DLA to fall back from",
    BuilderFlag.REFIT: "kiln engines are not refittable: rebuild with the new weights",
    BuilderFlag.DISABLE_TIMING_CACHE: "kiln uses a timing cache only when one is set (set_timing_cache): leave it unset",
    BuilderFlag.SPARSE_WEIGHTS: "kiln has no structured-sparsity kernels",
    BuilderFlag.SAFETY_SCOPE: "kiln has no safety runtime",
    BuilderFlag.DIRECT_IO: "kiln's engines always read and write their I/O tensors in place",
    BuilderFlag.REJECT_EMPTY_ALGORITHMS: "kiln has no algorithm selector",
    BuilderFlag.VERSION_COMPATIBLE: "kiln engines load in the kiln version that built them",
    BuilderFlag.EXCLUDE_LEAN_RUNTIME: "kiln has no lean runtime",
    BuilderFlag.ERROR_ON_TIMING_CACHE_MISS: "kiln times a layer the cache lacks; it has no miss error",
    BuilderFlag.WEIGHTLESS: "kiln engines carry their weights",
    BuilderFlag.STRIP_PLAN: "kiln engines carry their weights",
    BuilderFlag.WEIGHT_STREAMING: "kiln keeps every weight on the device",
    BuilderFlag.INT4: "INT4 in kiln is weight-only: give 4-bit DequantizeLinear weights or kiln build --int4Weights",
    BuilderFlag.DEBUG: "kiln has no debug tensors: compare runs with kiln compare --markAll",
}


class MemoryPoolType(enum.IntEnum):
    """Memory pools: WORKSPACE (kernels' scratch memory) and kiln's ACTIVATIONS (one execution context's activation
    memory). The DLA and tactic shared-memory pools do not exist in kiln."""

    WORKSPACE = 0
    DLA_MANAGED_SRAM = 1
    DLA_LOCAL_DRAM = 2
    DLA_GLOBAL_DRAM = 3
    TACTIC_DRAM = 4
    TACTIC_SHARED_MEMORY = 5
    ACTIVATIONS = 100


ProfilingVerbosity = _kiln.ProfilingVerbosity
CalibrationAlgoType = _kiln.CalibrationAlgoType


class IOptimizationProfile:
    """min / opt / max shapes of the dynamic inputs (TensorRT's IOptimizationProfile)."""

    def __init__(self):
        self._p = _kiln.OptimizationProfile()

    def set_shape(self, input: str, min, opt, max) -> None:  # noqa: A002  (TensorRT's argument names)
        self._p.set_shape(input, [int(d) for d in min], [int(d) for d in opt], [int(d) for d in max])

    def get_shape(self, input: str) -> List[Dims]:  # noqa: A002
        return [Dims(d) for d in self._p.get_shape(input)]

    def set_shape_input(self, input: str, min, opt, max) -> None:  # noqa: A002
        raise KilnError(f"set_shape_input('{input}'): kiln's profiles give input shapes, not the values of shape "
                        "tensors; make the shape input a constant or compute it inside the network")

    def __bool__(self) -> bool:
        try:
            self._p.validate()
            return True
        except KilnError:
            return False


class ITimingCache:
    """A timing cache (the tactic each layer signature timed fastest): created from serialized bytes (empty for a
    new one) and updated by the builds whose config holds it; serialize() returns its bytes (kiln's JSON)."""

    def __init__(self, blob: bytes = b""):
        fd, self._path = tempfile.mkstemp(prefix="kiln-timing-", suffix=".json")
        with os.fdopen(fd, "wb") as f:
            f.write(bytes(blob))
        if not blob:  # a new cache: no file, which the builder takes as empty (an empty file is not a cache)
            os.unlink(self._path)
        else:
            try:
                json.loads(bytes(blob))
            except ValueError:
                raise KilnError("create_timing_cache: the bytes are not a kiln timing cache (JSON)") from None

    def serialize(self) -> IHostMemory:
        if not os.path.exists(self._path):
            return IHostMemory(b"")
        with open(self._path, "rb") as f:
            return IHostMemory(f.read())

    def combine(self, input_cache: "ITimingCache", ignore_mismatch: bool = False) -> bool:
        raise KilnError("ITimingCache.combine: kiln does not merge timing caches; build with one cache")

    def reset(self) -> bool:
        if os.path.exists(self._path):
            os.unlink(self._path)
        return True

    def __del__(self):
        try:
            os.unlink(self._path)
        except OSError:
            pass


class IBuilderConfig:
    """How to build (TensorRT's IBuilderConfig): precision flags, memory pools, optimization profiles, the INT8
    calibrator, the timing cache, profiling verbosity, the optimization level, and kiln's backend choice."""

    def __init__(self):
        self._c = _kiln.BuilderConfig()
        self._flags = set()
        self._profiles: List[IOptimizationProfile] = []
        self._calibrator: Optional[IInt8Calibrator] = None
        self._timing_cache: Optional[ITimingCache] = None
        self._pools: Dict[MemoryPoolType, int] = {}
        self.set_flag(BuilderFlag.TF32)  # on by default, as in TensorRT

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    # -- flags
    def set_flag(self, flag: BuilderFlag) -> None:
        flag = BuilderFlag(flag)
        if flag in _UNSUPPORTED_FLAGS:
            raise KilnError(f"BuilderFlag.{flag.name}: {_UNSUPPORTED_FLAGS[flag]}")
        if flag in (BuilderFlag.STRICT_TYPES, BuilderFlag.OBEY_PRECISION_CONSTRAINTS):
            self._flags.discard(BuilderFlag.PREFER_PRECISION_CONSTRAINTS)
            self._c.set_flag(_kiln.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
        elif flag == BuilderFlag.PREFER_PRECISION_CONSTRAINTS:
            self._flags.discard(BuilderFlag.STRICT_TYPES)
            self._flags.discard(BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
            self._c.clear_flag(_kiln.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
        else:
            self._c.set_flag(_kiln.BuilderFlag(int(flag)))
        self._flags.add(flag)

    def clear_flag(self, flag: BuilderFlag) -> None:
        flag = BuilderFlag(flag)
        self._flags.discard(flag)
        if flag in _UNSUPPORTED_FLAGS:
            return  # never set
        if flag in (BuilderFlag.STRICT_TYPES, BuilderFlag.OBEY_PRECISION_CONSTRAINTS):
            if not ({BuilderFlag.STRICT_TYPES, BuilderFlag.OBEY_PRECISION_CONSTRAINTS} & self._flags):
                self._c.clear_flag(_kiln.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
        elif flag != BuilderFlag.PREFER_PRECISION_CONSTRAINTS:
            self._c.clear_flag(_kiln.BuilderFlag(int(flag)))

    def get_flag(self, flag: BuilderFlag) -> bool:
        return BuilderFlag(flag) in self._flags

    @property
    def flags(self) -> int:
        return sum(1 << int(f) for f in self._flags if int(f) < 32)

    @flags.setter
    def flags(self, value: int) -> None:
        for f in list(self._flags):
            self.clear_flag(f)
        for f in BuilderFlag:
            if int(f) < 32 and value & (1 << int(f)):
                self.set_flag(f)

    # -- memory pools
    def set_memory_pool_limit(self, pool: MemoryPoolType, pool_size: int) -> None:
        pool = MemoryPoolType(pool)
        if pool in (MemoryPoolType.DLA_MANAGED_SRAM, MemoryPoolType.DLA_LOCAL_DRAM, MemoryPoolType.DLA_GLOBAL_DRAM):
            raise KilnError(f"set_memory_pool_limit({pool.name}): kiln has no DLA; drop it")
        if pool in (MemoryPoolType.TACTIC_SHARED_MEMORY, MemoryPoolType.TACTIC_DRAM):
            raise KilnError(f"set_memory_pool_limit({pool.name}): kiln's kernels take no budget from this pool; "
                            "drop it (WORKSPACE limits their scratch memory)")
        if int(pool_size) < 0:
            raise KilnError(f"set_memory_pool_limit({pool.name}): {pool_size} is not a size in bytes")
        name = "workspace" if pool == MemoryPoolType.WORKSPACE else "activations"
        self._c.set_memory_pool_limit(name, int(pool_size))
        self._pools[pool] = int(pool_size)

    def get_memory_pool_limit(self, pool: MemoryPoolType) -> int:
        pool = MemoryPoolType(pool)
        return self._c.get_memory_pool_limit("workspace" if pool == MemoryPoolType.WORKSPACE else "activations")

    # -- profiles
    def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
        index = self._c.add_optimization_profile(profile._p)
        self._profiles.append(profile)
        return index

    @property
    def num_optimization_profiles(self) -> int:
        return len(self._profiles)

    def set_calibration_profile(self, profile: IOptimizationProfile) -> bool:
        self._c.set_calibration_profile(profile._p)
        self._calibration_profile = profile
        return True

    def _calibration_shapes(self, network) -> dict:
        """Each input's calibration shape: the calibration profile's opt shape, else the first profile's, else the
        input's own static shape (as the builder takes them)."""
        shapes = {}
        for i in range(network.num_inputs):
            t = network.get_input(i)
            for prof in (getattr(self, "_calibration_profile", None), self._profiles[0] if self._profiles else None):
                if prof is not None and t.name in prof._p.shapes:
                    shapes[t.name] = tuple(prof.get_shape(t.name)[1])
                    break
            else:
                if t.shape is not None and all(d >= 0 for d in t.shape):
                    shapes[t.name] = tuple(t.shape)
        return shapes

    # -- INT8 calibration
    @property
    def int8_calibrator(self) -> Optional[IInt8Calibrator]:
        return self._calibrator

    @int8_calibrator.setter
    def int8_calibrator(self, calibrator: Optional[IInt8Calibrator]) -> None:
        if calibrator is not None and not isinstance(calibrator, IInt8Calibrator):
            raise TypeError("int8_calibrator must derive from kiln.IInt8EntropyCalibrator2, IInt8MinMaxCalibrator, "
                            "IInt8EntropyCalibrator, IInt8LegacyCalibrator or IInt8PercentileCalibrator")
        self._calibrator = calibrator
        self._c.set_int8_calibrator(calibrator)

    # -- timing cache
    def create_timing_cache(self, serialized_timing_cache: bytes = b"") -> ITimingCache:
        return ITimingCache(serialized_timing_cache)

    def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool = False) -> bool:
        """The cache the build reads and updates. kiln always behaves as TensorRT's ignore_mismatch=True: a cache
        written on another device or kiln version is ignored with a warning in the build log and every layer is timed
        again; ignore_mismatch=False does not turn that into an error."""
        self._timing_cache = cache
        self._c.timing_cache_file = cache._path if cache is not None else ""
        return True

    def get_timing_cache(self) -> Optional[ITimingCache]:
        return self._timing_cache

    # -- the rest
    @property
    def profiling_verbosity(self) -> ProfilingVerbosity:
        return self._c.profiling_verbosity

    @profiling_verbosity.setter
    def profiling_verbosity(self, v: ProfilingVerbosity) -> None:
        self._c.profiling_verbosity = v

    @property
    def builder_optimization_level(self) -> int:
        return self._c.builder_optimization_level

    @builder_optimization_level.setter
    def builder_optimization_level(self, level: int) -> None:
        if not 0 <= int(level) <= 5:
            raise KilnError(f"builder_optimization_level {level} is outside 0..5")
        self._c.builder_optimization_level = int(level)

    @property
    def avg_timing_iterations(self) -> int:
        return self._c.avg_timing_iterations

    @avg_timing_iterations.setter
    def avg_timing_iterations(self, n: int) -> None:
        self._c.avg_timing_iterations = int(n)

    @property
    def max_aux_streams(self) -> int:
        """The most auxiliary streams independent branches of the graph may run on beside the main one (0..64;
        default 0: every layer on the caller's stream)."""
        return self._c.max_aux_streams

    @max_aux_streams.setter
    def max_aux_streams(self, n: int) -> None:
        if not 0 <= int(n) <= 64:
            raise KilnError(f"max_aux_streams {n} is outside 0..64")
        self._c.max_aux_streams = int(n)

    @property
    def backend(self) -> str:
        """kiln's: the backend to build for ("cpu" or "cuda"); empty: cuda where a GPU is found, else cpu."""
        return self._c.backend

    @backend.setter
    def backend(self, name: str) -> None:
        self._c.backend = name

    def set_io_type(self, tensor: str, dtype: DataType) -> None:
        """kiln's: the type of an input or output at the engine's boundary."""
        self._c.set_io_type(tensor, dtype)

    def set_layer_precision(self, layer: str, dtype: DataType) -> None:
        self._c.set_layer_precision(layer, dtype)

    def _resolved_backend(self) -> str:
        return self._c.backend or _kiln.default_backend()


class Builder:
    """Builds engines (TensorRT's trt.Builder): create_network, create_builder_config, create_optimization_profile,
    build_serialized_network."""

    def __init__(self, logger):
        self._logger = logger
        self._b = _kiln.Builder(logger)
        self.last_build_report: Optional[dict] = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def create_network(self, flags: int = 0) -> INetworkDefinition:
        return INetworkDefinition(flags)

    def create_builder_config(self) -> IBuilderConfig:
        return IBuilderConfig()

    def create_optimization_profile(self) -> IOptimizationProfile:
        return IOptimizationProfile()

    @property
    def platform_has_fast_fp16(self) -> bool:
        return _kiln.default_backend() == "cuda"

    @property
    def platform_has_fast_int8(self) -> bool:
        # Whether a GPU is found; kiln's INT8 GPU kernels also need compute capability 9.0 (elsewhere the build
        # refuses INT8 with the reason).
        return _kiln.default_backend() == "cuda"

    @property
    def platform_has_tf32(self) -> bool:
        return _kiln.default_backend() == "cuda"

    def is_network_supported(self, network: INetworkDefinition, config: IBuilderConfig) -> bool:
        raise KilnError("is_network_supported: kiln answers by building; call build_serialized_network")

    def build_serialized_network(self, network: INetworkDefinition, config: IBuilderConfig) -> IHostMemory:
        """The engine's bytes. A network or config kiln cannot build raises KilnError with kiln's reason (TensorRT
        returns None and logs it)."""
        c = config._c
        typed_by_network = (network.get_flag(NetworkDefinitionCreationFlag.STRONGLY_TYPED) and
                            not config.get_flag(BuilderFlag.STRONGLY_TYPED))
        if typed_by_network:
            c.set_flag(_kiln.BuilderFlag.STRONGLY_TYPED)
        for layer, dtype in network._layer_precisions.items():
            c.set_layer_precision(layer, dtype)
        for layer, dtype in network._layer_output_types.items():
            c.set_layer_output_type(layer, dtype)
        if config._calibrator is not None:
            config._calibrator._prepare(network, config._resolved_backend(), config._calibration_shapes(network))
        cal = config._calibrator
        try:
            engine, report = self._b.build_serialized_network(network._net, c)
        except KilnError as e:
            err = cal._take_error() if cal is not None else None
            if err is not None:
                raise err from e  # the calibrator's own exception says more than "no batches"
            raise
        finally:
            if cal is not None:
                cal._release()
            if typed_by_network:  # the network's flag, not the config's: the config stays as the caller set it
                c.clear_flag(_kiln.BuilderFlag.STRONGLY_TYPED)
        err = cal._take_error() if cal is not None else None
        if err is not None:
            raise err
        self.last_build_report = json.loads(report) if report else None
        return IHostMemory(engine)
