"""INT8 calibrators, TensorRT-shaped: subclass IInt8EntropyCalibrator2 (or IInt8MinMaxCalibrator, ...) and
implement get_batch_size(), get_batch(names), read_calibration_cache() and write_calibration_cache(cache).

get_batch(names) returns, for each input name in order, the next batch: an integer address (device memory on a
GPU build, host memory on the cpu backend, as TensorRT takes it), a numpy array, or any object with
``__cuda_array_interface__`` (a CUDA torch tensor, a CuPy array); or None / [] when there are no more batches.
Arrays are converted to the input's type and, for a GPU build, copied to the device; kiln keeps them until the next
call."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from . import _kiln
from ._types import KilnError, nptype

CalibrationAlgoType = _kiln.CalibrationAlgoType


class IInt8Calibrator(_kiln._Calibrator):
    """The base of every calibrator; derive from one of the typed ones below."""

    _algorithm_type = CalibrationAlgoType.ENTROPY_CALIBRATION_2

    def __init__(self):
        _kiln._Calibrator.__init__(self)
        self._backend = "cpu"
        self._input_types = {}
        self._held = []
        self._error = None
        self._input_types = {}
        self._input_shapes = {}

    # -- what a subclass implements (TensorRT's names)
    def get_batch_size(self) -> int:
        return 1

    def get_batch(self, names: List[str]):
        raise NotImplementedError("a calibrator implements get_batch(names)")

    def read_calibration_cache(self) -> Optional[bytes]:
        return None

    def write_calibration_cache(self, cache: bytes) -> None:
        return None

    def get_algorithm(self) -> CalibrationAlgoType:
        return self._algorithm_type

    # -- the C++ side's calls
    def _batch_size(self) -> int:
        return int(self.get_batch_size())

    def _algorithm(self) -> CalibrationAlgoType:
        return self.get_algorithm()

    def _percentile(self) -> float:
        return float(getattr(self, "percentile", 99.99))

    def _read_cache(self):
        cache = self.read_calibration_cache()
        return None if cache is None or len(cache) == 0 else bytes(cache)

    def _write_cache(self, cache: bytes) -> None:
        self.write_calibration_cache(cache)

    def _next_batch(self, names: List[str]):
        try:
            return self._next_batch_or_raise(names)
        except Exception as e:  # raised again from build_serialized_network, not lost in the C++ call
            self._error = self._error or e
            return None

    def _next_batch_or_raise(self, names: List[str]):
        batch = self.get_batch(list(names))
        self._held = []
        if batch is None or len(batch) == 0:
            return None
        if len(batch) != len(names):
            raise KilnError(f"get_batch returned {len(batch)} arrays for the {len(names)} inputs {list(names)}")
        return [self._address(name, b) for name, b in zip(names, batch)]

    def _address(self, name: str, b) -> int:
        if isinstance(b, (int, np.integer)):
            return int(b)
        if hasattr(b, "__cuda_array_interface__"):
            if self._backend != "cuda":
                raise KilnError(f"calibration batch for '{name}' is in GPU memory, but the build is for the "
                                f"{self._backend} backend: give a numpy array")
            cai = b.__cuda_array_interface__
            shape = self._input_shapes.get(name)
            if shape is not None and tuple(cai["shape"]) != tuple(shape):
                raise KilnError(f"calibration batch for '{name}' has shape {tuple(cai['shape'])}; the calibration "
                                f"shape is {tuple(shape)}")
            if cai.get("strides") is not None:
                itemsize = np.dtype(cai["typestr"]).itemsize
                dense = tuple(int(np.prod(cai["shape"][i + 1:], dtype=np.int64)) * itemsize
                              for i in range(len(cai["shape"])))
                if tuple(cai["strides"]) != dense:
                    raise KilnError(f"calibration batch for '{name}' is not contiguous: pass x.contiguous()")
            self._held.append(b)
            return int(b.__cuda_array_interface__["data"][0])
        if hasattr(b, "detach") and hasattr(b, "numpy"):  # a CPU torch tensor
            b = b.detach().numpy()
        shape = self._input_shapes.get(name)
        want = self._input_types.get(name)
        a = np.ascontiguousarray(b, dtype=nptype(want) if want is not None else None)
        if shape is not None and tuple(a.shape) != tuple(shape):
            raise KilnError(f"calibration batch for '{name}' has shape {tuple(a.shape)}; the calibration shape is "
                            f"{tuple(shape)} (the calibration profile's opt shape, or the first profile's): give "
                            "batches of that shape (drop a short last batch)")
        if self._backend == "cuda":
            mem = _kiln.DeviceMemory.allocate("cuda", max(a.nbytes, 1))
            stream = _kiln.DeviceStream.create("cuda")
            _kiln.copy_to_device(mem.ptr, a.ctypes.data, a.nbytes, stream)
            stream.synchronize()
            self._held.append(mem)
            return mem.ptr
        self._held.append(a)
        return int(a.ctypes.data)

    # -- set up and torn down around a build (Builder.build_serialized_network)
    def _prepare(self, network, backend: str, shapes=None) -> None:
        """`shapes`: each input's calibration shape where known (the builder checks the rest)."""
        self._error = None
        self._backend = backend
        self._input_types = {network.get_input(i).name: network.get_input(i).dtype for i in range(network.num_inputs)}
        self._input_shapes = dict(shapes or {})

    def _release(self) -> None:
        self._held = []

    def _take_error(self):
        # Handed over, not kept: an exception held by the calibrator while its traceback holds the calibrator would be
        # a reference cycle through the C++ object, which the garbage collector cannot break.
        err, self._error = self._error, None
        return err


class IInt8EntropyCalibrator2(IInt8Calibrator):
    """Entropy calibration (TensorRT's recommended one: the threshold minimizing the KL divergence)."""

    _algorithm_type = CalibrationAlgoType.ENTROPY_CALIBRATION_2


class IInt8EntropyCalibrator(IInt8Calibrator):
    """TensorRT's first entropy calibrator: kiln reads its caches; a calibration run uses entropy-2."""

    _algorithm_type = CalibrationAlgoType.ENTROPY_CALIBRATION


class IInt8MinMaxCalibrator(IInt8Calibrator):
    """Max calibration: the largest |x| seen."""

    _algorithm_type = CalibrationAlgoType.MINMAX_CALIBRATION


class IInt8LegacyCalibrator(IInt8Calibrator):
    """TensorRT's legacy calibrator: kiln reads its caches only."""

    _algorithm_type = CalibrationAlgoType.LEGACY_CALIBRATION


class IInt8PercentileCalibrator(IInt8Calibrator):
    """kiln's: the |x| below which `percentile` percent of the values lie (default 99.99)."""

    _algorithm_type = CalibrationAlgoType.PERCENTILE_CALIBRATION
    percentile = 99.99
