"""Build configs in YAML, the format `kiln build --config=kiln.yaml` reads (include/kiln/build_config_file.h: the
same C++ reader and writer): kiln.BuildConfig.from_yaml / to_yaml, fields as attributes, and compile()."""
from __future__ import annotations

import os
from typing import Optional

from . import _kiln
from ._types import KilnError

_FIELDS = ("onnx", "engine", "fp16", "bf16", "int8", "fp8", "best", "tf32", "strongly_typed", "workspace_mb",
           "activations_mb", "shapes", "min_shapes", "opt_shapes", "max_shapes", "min_shape", "opt_shape", "max_shape",
           "max_batch_size", "calibration_cache", "calibration_data", "calibration_algorithm", "timing_cache",
           "backend", "builder_optimization_level", "profiling_verbosity", "avg_timing", "precision_constraints",
           "layer_precisions", "max_aux_streams")


class BuildConfig:
    """A build: model and engine paths, precisions, memory pools, min/opt/max shapes, calibration, timing cache,
    optimization level. ``BuildConfig.from_yaml("kiln.yaml")`` reads kiln's keys or the documents'
    TensorRTBuildConfig names (onnx_path, engine_path, max_workspace_gb, min_shape, ...), at the top level or under
    ``tensorrt:``; a bad key or value raises KilnError naming it and its line. Map fields (shapes, min_shapes, ...,
    layer_precisions) read as copies: assign a whole map to change one."""

    def __init__(self, **fields):
        object.__setattr__(self, "_c", _kiln.BuildConfigFile())
        for k, v in fields.items():
            setattr(self, k, v)

    @classmethod
    def from_yaml(cls, source: str) -> "BuildConfig":
        """From a YAML file's path, or YAML text."""
        c = cls()
        if isinstance(source, os.PathLike):
            source = os.fspath(source)
        if "\n" not in source and (os.path.exists(source) or source.endswith((".yaml", ".yml"))):
            object.__setattr__(c, "_c", _kiln.read_build_config(source))  # a missing file: KilnError naming it
        else:
            object.__setattr__(c, "_c", _kiln.parse_build_config(source, "yaml text"))
        return c

    def to_yaml(self, path: Optional[str] = None) -> str:
        text = _kiln.write_build_config(self._c)
        if path:
            with open(path, "w") as f:
                f.write(text)
        return text

    def __getattr__(self, name):
        if name in _FIELDS:
            return getattr(self._c, name)
        raise AttributeError(f"BuildConfig has no field '{name}' (fields: {', '.join(_FIELDS)})")

    def __setattr__(self, name, value):
        if name not in _FIELDS:
            raise KilnError(f"BuildConfig has no field '{name}' (fields: {', '.join(_FIELDS)})")
        if name.endswith("shape") and value is not None:
            value = [int(d) for d in value]
        if name.endswith("shapes"):
            value = {k: [int(d) for d in v] for k, v in (value or {}).items()}
        setattr(self._c, name, value)

    def __repr__(self) -> str:
        return "BuildConfig(" + ", ".join(f"{k}={getattr(self._c, k)!r}" for k in _FIELDS
                                          if getattr(self._c, k) not in (None, {}, [])) + ")"

    def compile(self, logger=None):
        """Builds the config's model (kiln.compile) and saves the engine where `engine` says; returns the Engine."""
        from ._compile import compile as kiln_compile
        if not self._c.onnx:
            raise KilnError("BuildConfig.compile: the config names no model (onnx / onnx_path)")
        if self._c.calibration_data:
            raise KilnError("BuildConfig.compile: calibration_data is for calibrating (kiln calibrate); build from its "
                            "calibration_cache")
        c = self._c
        kwargs = {k: bool(getattr(c, k)) for k in ("fp16", "bf16", "int8", "fp8", "strongly_typed")
                  if getattr(c, k) is not None}
        if c.best:  # as --best: every reduced float precision (INT8 and FP8 need ranges, and their own keys)
            kwargs.update(fp16=True, bf16=True)
        if c.tf32 is not None:
            kwargs["tf32"] = bool(c.tf32)
        if c.workspace_mb is not None:
            kwargs["workspace"] = int(c.workspace_mb * (1 << 20))
        for k in ("backend", "timing_cache"):
            if getattr(c, k):
                kwargs[k] = getattr(c, k)
        if c.builder_optimization_level is not None:
            kwargs["optimization_level"] = c.builder_optimization_level
        if c.calibration_cache:
            kwargs["calibration_cache"] = c.calibration_cache
        engine = kiln_compile(c.onnx, logger=logger, _config=c, **kwargs)
        if c.engine:
            engine.save(c.engine)
        return engine
