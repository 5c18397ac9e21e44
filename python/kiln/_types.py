"""Element types, shapes and the error type: TensorRT's names for kiln's (``trt.DataType``, ``trt.volume``,
``trt.nptype``) and the numpy mapping the rest of the package uses."""
from __future__ import annotations

import functools
import operator
from typing import Iterable

import numpy as np

from . import _kiln

DataType = _kiln.DataType
TensorIOMode = _kiln.TensorIOMode
KilnError = _kiln.KilnError

# TensorRT's lower-case aliases (trt.float32, trt.float16, ...).
float32 = DataType.FLOAT
float16 = DataType.HALF
bfloat16 = DataType.BF16
int8 = DataType.INT8
uint8 = DataType.UINT8
int32 = DataType.INT32
int64 = DataType.INT64
bool = DataType.BOOL  # noqa: A001  (TensorRT spells it trt.bool)
fp8 = DataType.FP8
int4 = DataType.INT4

_TO_NUMPY = {
    DataType.FLOAT: np.float32,
    DataType.HALF: np.float16,
    DataType.DOUBLE: np.float64,
    DataType.INT8: np.int8,
    DataType.UINT8: np.uint8,
    DataType.INT16: np.int16,
    DataType.UINT16: np.uint16,
    DataType.INT32: np.int32,
    DataType.UINT32: np.uint32,
    DataType.INT64: np.int64,
    DataType.UINT64: np.uint64,
    DataType.BOOL: np.bool_,
    # kiln holds one 4-bit (2-bit) value per byte, sign-extended for int4 (int2): int8 / uint8 arrays.
    DataType.INT4: np.int8,
    DataType.UINT4: np.uint8,
    DataType.INT2: np.int8,
    DataType.UINT2: np.uint8,
}
_FROM_NUMPY = {np.dtype(v): k for k, v in _TO_NUMPY.items()
               if k not in (DataType.INT4, DataType.UINT4, DataType.INT2, DataType.UINT2)}


def nptype(dtype: DataType) -> type:
    """The numpy type of a kiln DataType (trt.nptype). Types numpy lacks (bfloat16, float8) raise TypeError."""
    try:
        return _TO_NUMPY[dtype]
    except KeyError:
        raise TypeError(f"numpy has no type for {_kiln.data_type_name(dtype)}; use torch or ml_dtypes tensors "
                        f"through kiln.compile, or an engine whose inputs and outputs have another type") from None


def from_numpy_dtype(dtype) -> DataType:
    """The kiln DataType of a numpy dtype (TypeError for one kiln does not hold)."""
    d = np.dtype(dtype)
    try:
        return _FROM_NUMPY[d]
    except KeyError:
        raise TypeError(f"kiln has no element type for numpy's {d}") from None


def volume(shape: Iterable[int]) -> int:
    """The number of elements of a shape (trt.volume); 1 for a scalar."""
    return functools.reduce(operator.mul, (int(d) for d in shape), 1)


def itemsize(dtype: DataType) -> int:
    return int(_kiln.data_type_size(dtype))


class Dims(tuple):
    """A shape (TensorRT's trt.Dims): a tuple of ints, -1 where a dimension is dynamic."""

    def __new__(cls, dims: Iterable[int] = ()):
        return super().__new__(cls, (int(d) for d in dims))

    @property
    def nbDims(self) -> int:  # noqa: N802  (TensorRT's name)
        return len(self)
