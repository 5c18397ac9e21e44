"""kiln: an ONNX inference optimizer and runtime.

Code written for TensorRT's Python API runs with ``import kiln as trt``: Logger, Builder, OnnxParser,
create_builder_config, optimization profiles, INT8 calibrators, timing caches, Runtime, ICudaEngine,
IExecutionContext (execute_async_v3, execute_v2), IProfiler, volume, nptype. Where kiln has no counterpart the call
raises KilnError saying so. Beyond TensorRT: ``kiln.compile(model, ...)`` returns an engine callable with numpy
arrays (and CUDA tensors on a GPU), ``kiln.load(path)``.

Without a GPU everything runs on kiln's CPU reference backend (engines report ``backend == "cpu"``, tensor
addresses are host pointers).
"""
from __future__ import annotations

from . import _kiln
from ._builder import (Builder, BuilderFlag, CalibrationAlgoType, IBuilderConfig, IHostMemory,
                       IOptimizationProfile, ITimingCache, MemoryPoolType, ProfilingVerbosity)
from ._calibrator import (IInt8Calibrator, IInt8EntropyCalibrator, IInt8EntropyCalibrator2, IInt8LegacyCalibrator,
                          IInt8MinMaxCalibrator, IInt8PercentileCalibrator)
from ._compile import Engine, compile, load
from ._config import BuildConfig
from ._compare import compare_frameworks
from ._network import (ErrorCode, ILayer, INetworkDefinition, ITensor, NetworkDefinitionCreationFlag, OnnxParser,
                       ParserError)
from ._runtime import (EngineInspector, ICudaEngine, IExecutionContext, IProfiler, LayerInformationFormat,
                       Runtime)
from ._types import (DataType, Dims, KilnError, TensorIOMode, bfloat16, bool, float16, float32, fp8,  # noqa: A004
                     from_numpy_dtype, int4, int8, int32, int64, nptype, uint8, volume)

__version__ = "0.1.0"
__all__ = [
    "BuildConfig", "Builder", "BuilderFlag", "CalibrationAlgoType", "DataType", "Dims", "Engine", "EngineInspector", "ErrorCode",
    "IBuilderConfig", "ICudaEngine", "IExecutionContext", "IHostMemory", "IInt8Calibrator",
    "IInt8EntropyCalibrator", "IInt8EntropyCalibrator2", "IInt8LegacyCalibrator", "IInt8MinMaxCalibrator",
    "IInt8PercentileCalibrator", "ILayer", "ILogger", "INetworkDefinition", "IOptimizationProfile", "IProfiler",
    "ITensor", "ITimingCache", "KilnError", "LayerInformationFormat", "Logger", "MemoryPoolType",
    "NetworkDefinitionCreationFlag", "OnnxParser", "ParserError", "ProfilingVerbosity", "Runtime", "Severity",
    "TensorIOMode", "compile", "compare_frameworks", "load", "nptype", "volume", "default_backend", "backend_names",
]

Severity = _kiln.Severity
ILogger = _kiln.ILogger


class Logger(_kiln.Logger):
    """Prints kiln's messages at min_severity or more severe to stderr (TensorRT's trt.Logger):
    ``trt.Logger(trt.Logger.WARNING)``."""

    Severity = _kiln.Severity
    INTERNAL_ERROR = _kiln.Severity.INTERNAL_ERROR
    ERROR = _kiln.Severity.ERROR
    WARNING = _kiln.Severity.WARNING
    INFO = _kiln.Severity.INFO
    VERBOSE = _kiln.Severity.VERBOSE

    def __init__(self, min_severity: _kiln.Severity = _kiln.Severity.WARNING):
        _kiln.Logger.__init__(self, min_severity)


def default_backend() -> str:
    """The backend builds use when none is named: "cuda" where a GPU is found, else "cpu"."""
    return _kiln.default_backend()


def backend_names():
    return _kiln.backend_names()


def init_libnvinfer_plugins(logger, namespace: str = "") -> bool:
    """TensorRT loads its plugin library here; kiln's plugins register themselves (kiln plugin), so there is nothing
    to load."""
    return True
