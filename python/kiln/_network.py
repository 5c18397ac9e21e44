"""The network definition and the ONNX parser, TensorRT-shaped (INetworkDefinition, ITensor, ILayer, OnnxParser)."""
from __future__ import annotations

import enum
import os
import re
from typing import Dict, List, Optional

import numpy as np

from . import _kiln
from ._types import DataType, Dims, KilnError, from_numpy_dtype


class NetworkDefinitionCreationFlag(enum.IntEnum):
    """Flags of Builder.create_network. Every kiln network has explicit batch dimensions; STRONGLY_TYPED builds
    exactly the types the network says (BuilderFlag.STRONGLY_TYPED)."""

    EXPLICIT_BATCH = 0
    STRONGLY_TYPED = 1
    PREFER_AOT_PYTHON_PLUGINS = 2
    PREFER_JIT_PYTHON_PLUGINS = 3


class ITensor:
    """A tensor of a network: its name, shape (-1 for dynamic dimensions), type and dynamic range."""

    def __init__(self, network: "INetworkDefinition", name: str, info: Optional[_kiln.NetworkTensor] = None):
        self._network = network
        self._name = name
        self._info = info

    @property
    def name(self) -> str:
        return self._name

    @property
    def shape(self) -> Optional[Dims]:
        """The shape (-1 where dynamic); None for a tensor inside the network, whose shape the network does not
        report."""
        return Dims(self._info.shape) if self._info is not None else None

    @property
    def dtype(self) -> Optional[DataType]:
        return self._info.dtype if self._info is not None else None

    @property
    def is_network_input(self) -> bool:
        return any(self._network._net.get_input(i).name == self._name for i in range(self._network.num_inputs))

    @property
    def is_network_output(self) -> bool:
        return any(self._network._net.get_output(i).name == self._name for i in range(self._network.num_outputs))

    def set_dynamic_range(self, min: float, max: float) -> bool:  # noqa: A002  (TensorRT's argument names)
        """The range INT8 quantizes this tensor to (TensorRT's ITensor.set_dynamic_range)."""
        self._network._net.set_dynamic_range(self._name, float(min), float(max))
        return True

    @property
    def dynamic_range(self) -> Optional[tuple]:
        r = self._network._net.get_dynamic_range(self._name)
        return None if r < 0 else (-r, r)

    def __repr__(self) -> str:
        return f"ITensor(name={self._name!r}, shape={self.shape}, dtype={self.dtype})"


class ILayer:
    """A layer (an ONNX node) of a network. `type` is its op type ("Conv", "kiln.Attention" after a build's
    fusion is not visible here: a network holds the model's nodes). Setting `precision` or an output type pins
    the layer's precision for the build (IBuilderConfig's layer precisions)."""

    def __init__(self, network: "INetworkDefinition", info: _kiln.NetworkLayer):
        self._network = network
        self._info = info

    @property
    def name(self) -> str:
        return self._info.name

    @property
    def type(self) -> str:
        return self._info.op_type if not self._info.domain else f"{self._info.domain}.{self._info.op_type}"

    @property
    def num_inputs(self) -> int:
        return len(self._info.inputs)

    @property
    def num_outputs(self) -> int:
        return len(self._info.outputs)

    def get_input(self, index: int) -> Optional[ITensor]:
        name = self._info.inputs[index]
        return self._network._tensor(name) if name else None

    def get_output(self, index: int) -> ITensor:
        return self._network._tensor(self._info.outputs[index])

    @property
    def precision(self) -> Optional[DataType]:
        return self._network._layer_precisions.get(self.name)

    @precision.setter
    def precision(self, dtype: DataType) -> None:
        self._network._layer_precisions[self.name] = dtype

    @property
    def precision_is_set(self) -> bool:
        return self.name in self._network._layer_precisions

    def reset_precision(self) -> None:
        self._network._layer_precisions.pop(self.name, None)

    def set_output_type(self, index: int, dtype: DataType) -> None:
        if index != 0:
            raise KilnError(f"layer '{self.name}': kiln sets one output type per layer (output 0), not output {index}")
        self._network._layer_output_types[self.name] = dtype

    def get_output_type(self, index: int) -> Optional[DataType]:
        return self._network._layer_output_types.get(self.name) if index == 0 else None

    def __repr__(self) -> str:
        return f"ILayer(name={self.name!r}, type={self.type!r})"


class INetworkDefinition:
    """A network: filled by OnnxParser, or tensor by tensor with add_input / add_constant / add_op (ONNX ops)."""

    def __init__(self, flags: int = 0):
        self._net = _kiln.NetworkDefinition()
        self._flags = int(flags)
        self._layer_precisions: Dict[str, DataType] = {}
        self._layer_output_types: Dict[str, DataType] = {}
        self.name = "network"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def get_flag(self, flag: NetworkDefinitionCreationFlag) -> bool:
        return bool(self._flags & (1 << int(flag)))

    @property
    def flags(self) -> int:
        return self._flags

    @property
    def num_layers(self) -> int:
        return self._net.num_layers

    @property
    def num_inputs(self) -> int:
        return self._net.num_inputs

    @property
    def num_outputs(self) -> int:
        return self._net.num_outputs

    def get_layer(self, index: int) -> ILayer:
        self._check_index(index, self.num_layers, "layer")
        return ILayer(self, self._net.get_layer(index))

    def get_input(self, index: int) -> ITensor:
        self._check_index(index, self.num_inputs, "input")
        info = self._net.get_input(index)
        return ITensor(self, info.name, info)

    def get_output(self, index: int) -> ITensor:
        self._check_index(index, self.num_outputs, "output")
        info = self._net.get_output(index)
        return ITensor(self, info.name, info)

    def __len__(self) -> int:
        return self.num_layers

    def __getitem__(self, index: int) -> ILayer:
        return self.get_layer(index)

    def __iter__(self):
        return (self.get_layer(i) for i in range(self.num_layers))

    def add_input(self, name: str, dtype: DataType, shape, dim_names: Optional[List[str]] = None) -> ITensor:
        """Declares an input; -1 dimensions are dynamic (name them with dim_names for optimization profiles)."""
        self._net.add_input(name, dtype, [int(d) for d in shape], list(dim_names or []))
        return self._tensor(name)

    def add_constant(self, name: str, array) -> ITensor:
        """A constant (weights) from a numpy array (copied)."""
        a = np.ascontiguousarray(array)
        self._net.add_constant(name, from_numpy_dtype(a.dtype), list(a.shape), a.tobytes())
        return ITensor(self, name)

    def add_op(self, op_type: str, name: str, inputs: List[str], outputs: List[str],
               attributes: Optional[dict] = None) -> ILayer:
        """An ONNX op of the network's opset reading and writing the named tensors; checked at once."""
        self._net.add_op(op_type, name, list(inputs), list(outputs), dict(attributes or {}))
        return ILayer(self, self._net.get_layer(self.num_layers - 1))

    def mark_output(self, tensor) -> None:
        self._net.mark_output(tensor.name if isinstance(tensor, ITensor) else str(tensor))

    def to_string(self) -> str:
        return self._net.to_string()

    @property
    def opset(self) -> int:
        return self._net.opset

    def _tensor(self, name: str) -> ITensor:
        for i in range(self.num_inputs):
            info = self._net.get_input(i)
            if info.name == name:
                return ITensor(self, name, info)
        for i in range(self.num_outputs):
            info = self._net.get_output(i)
            if info.name == name:
                return ITensor(self, name, info)
        return ITensor(self, name)

    @staticmethod
    def _check_index(index: int, n: int, what: str) -> None:
        if not 0 <= index < n:
            raise IndexError(f"{what} index {index} is out of range: the network has {n} {what}s")


class ErrorCode(enum.IntEnum):
    """TensorRT's parser error codes, as kiln's failures map onto them."""

    SUCCESS = 0
    INTERNAL_ERROR = 1
    MEM_ALLOC_FAILED = 2
    MODEL_DESERIALIZE_FAILED = 3
    INVALID_VALUE = 4
    INVALID_GRAPH = 5
    INVALID_NODE = 6
    UNSUPPORTED_GRAPH = 7
    UNSUPPORTED_NODE = 8
    UNSUPPORTED_NODE_ATTR = 9
    UNSUPPORTED_NODE_INPUT = 10
    UNSUPPORTED_NODE_DATATYPE = 11
    UNSUPPORTED_NODE_DYNAMIC = 12
    UNSUPPORTED_NODE_SHAPE = 13
    REFIT_FAILED = 14


class ParserError:
    """One error of a parse (TensorRT's IParserError): desc(), node() (its index, -1 when unknown), node_name(),
    node_operator(), code()."""

    def __init__(self, desc: str, code: ErrorCode, node_name: str = "", node_operator: str = "", node: int = -1):
        self._desc, self._code, self._name, self._op, self._node = desc, code, node_name, node_operator, node

    def desc(self) -> str:
        return self._desc

    def code(self) -> ErrorCode:
        return self._code

    def node(self) -> int:
        return self._node

    def node_name(self) -> str:
        return self._name

    def node_operator(self) -> str:
        return self._op

    def file(self) -> str:
        return ""

    def line(self) -> int:
        return -1

    def func(self) -> str:
        return ""

    def __str__(self) -> str:
        return self._desc

    __repr__ = __str__


_NODE = re.compile(r"node '([^']*)' \(([^)]*)\)")


def _split_errors(message: str) -> List[ParserError]:
    """kiln reports every unsupported node of a model in one message ("'m.onnx' has 2 unsupported nodes:" then a
    "  - node 'x' (Op) opset N: why" line each): one ParserError per node; any other failure is one error."""
    lines = message.split("\n")
    if len(lines) > 1 and "unsupported node" in lines[0]:
        errors = []
        for ln in lines[1:]:
            ln = ln.strip()
            if not ln.startswith("- "):
                continue
            m = _NODE.search(ln)
            errors.append(ParserError(ln[2:], ErrorCode.UNSUPPORTED_NODE, m.group(1) if m else "",
                                      m.group(2) if m else ""))
        if errors:
            return errors
    m = _NODE.search(message)
    code = ErrorCode.UNSUPPORTED_NODE if "unsupported" in message or "not supported" in message else (
        ErrorCode.INVALID_NODE if m else ErrorCode.MODEL_DESERIALIZE_FAILED)
    return [ParserError(message, code, m.group(1) if m else "", m.group(2) if m else "")]


class OnnxParser:
    """Fills a network from an ONNX model (TensorRT's trt.OnnxParser). parse / parse_from_file return False on a
    model kiln cannot take; num_errors / get_error(i) then tell which node and why (every unsupported node at
    once)."""

    def __init__(self, network: INetworkDefinition, logger):
        self._network = network
        self._logger = logger
        self._parser = _kiln.OnnxParser(network._net, logger)
        self._errors: List[ParserError] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def set_input_shapes(self, shapes: Dict[str, List[int]]) -> None:
        """Parse at these input shapes (shape inference and folding run at them)."""
        self._parser.set_input_shapes({k: [int(d) for d in v] for k, v in shapes.items()})

    def parse(self, model, path: Optional[str] = None) -> bool:
        """Parses a serialized model (bytes, a buffer, or an onnx.ModelProto); external data is read next to `path`
        (a file or folder) or the working folder."""
        if hasattr(model, "SerializeToString"):
            model = model.SerializeToString()
        base = "."
        if path:
            base = path if os.path.isdir(path) else (os.path.dirname(path) or ".")
        return self._record(self._parser.parse(bytes(model), base))

    def parse_from_file(self, model: str) -> bool:
        return self._record(self._parser.parse_from_file(os.fspath(model)))

    def _record(self, message: str) -> bool:
        self._errors = _split_errors(message) if message else []  # (kiln logged them through the logger already)
        return not self._errors

    @property
    def num_errors(self) -> int:
        return len(self._errors)

    def get_error(self, index: int) -> ParserError:
        if not 0 <= index < len(self._errors):
            raise IndexError(f"error index {index} is out of range: {len(self._errors)} errors")
        return self._errors[index]

    def clear_errors(self) -> None:
        self._errors = []
