"""The run side, TensorRT-shaped: Runtime, ICudaEngine, IExecutionContext, IProfiler and EngineInspector.
Tensor addresses are integers: device pointers for a cuda engine, host pointers (numpy's ``a.ctypes.data``) for a
cpu one."""
from __future__ import annotations

import enum
import json
from typing import List, Optional

from . import _kiln
from ._builder import IHostMemory
from ._types import DataType, Dims, KilnError, TensorIOMode

IProfiler = _kiln.IProfiler


class LayerInformationFormat(enum.IntEnum):
    ONELINE = 0
    JSON = 1


class EngineInspector:
    """The engine's layers as its profiling verbosity allows (names and op types; with DETAILED also precision,
    tactic, inputs and outputs)."""

    def __init__(self, engine: "ICudaEngine"):
        self._engine = engine
        self.execution_context = None

    def _info(self) -> dict:
        """TensorRT's shape ({"Layers": [...], "Bindings": [...]}) with kiln's other keys beside."""
        info = json.loads(self._engine._e.get_layer_information_json())
        out = {"Layers": info.pop("layers", []),
               "Bindings": [self._engine.get_tensor_name(i) for i in range(self._engine.num_io_tensors)]}
        out.update(info)
        return out

    def get_engine_information(self, format: LayerInformationFormat = LayerInformationFormat.JSON) -> str:  # noqa: A002
        info = self._info()
        if LayerInformationFormat(format) == LayerInformationFormat.JSON:
            return json.dumps(info, indent=2)
        return "\n".join(json.dumps(layer) for layer in info["Layers"])

    def get_layer_information(self, layer: int, format: LayerInformationFormat = LayerInformationFormat.JSON) -> str:  # noqa: A002
        layers = self._info()["Layers"]
        if not 0 <= layer < len(layers):
            raise IndexError(f"layer {layer} is out of range: the engine has {len(layers)} layers")
        return json.dumps(layers[layer])


class IExecutionContext:
    """One in-flight inference of an engine (TensorRT's IExecutionContext). Calls that fail raise KilnError with
    kiln's message (an unknown tensor name, a shape outside the profile, a missing input address...)."""

    def __init__(self, engine: "ICudaEngine", ctx: _kiln.ExecutionContext):
        self._engine = engine
        self._c = ctx
        self._profiler = None
        self._stream = None
        self._addresses = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @property
    def engine(self) -> "ICudaEngine":
        return self._engine

    # -- shapes and addresses
    def set_input_shape(self, name: str, shape) -> bool:
        self._c.set_input_shape(name, [int(d) for d in shape])
        return True

    def get_tensor_shape(self, name: str) -> Dims:
        return Dims(self._c.get_tensor_shape(name))

    def set_tensor_address(self, name: str, memory: int) -> bool:
        self._c.set_tensor_address(name, int(memory))
        self._addresses[name] = int(memory)
        return True

    def get_tensor_address(self, name: str) -> int:
        return self._addresses.get(name, 0)

    @property
    def all_binding_shapes_specified(self) -> bool:
        try:
            for i in range(self._engine.num_io_tensors):
                self._c.get_tensor_shape(self._engine.get_tensor_name(i))
            return True
        except KilnError:
            return False

    @property
    def all_shape_inputs_specified(self) -> bool:
        return True  # kiln's engines have no shape-tensor inputs

    # -- profiles
    def set_optimization_profile_async(self, profile_index: int, stream_handle: int) -> bool:
        self._c.set_optimization_profile(int(profile_index))
        return True

    @property
    def active_optimization_profile(self) -> int:
        return self._c.active_optimization_profile

    # -- running
    def execute_async_v3(self, stream_handle: int = 0) -> bool:
        """Runs the engine on a stream (a CUDA stream handle: torch.cuda.current_stream().cuda_stream, a CuPy
        stream's ptr; 0 is the default stream). The cpu backend computes before returning."""
        self._c.enqueue(int(stream_handle))
        return True

    def set_aux_streams(self, aux_streams: List[int]) -> None:
        """The CUDA streams (handles) later runs launch the auxiliary streams' layers on; without it the context
        uses streams of its own. Every run makes them wait for its stream at the start, and its stream for them at
        the end."""
        self._c.set_aux_streams([int(s) for s in aux_streams])

    def execute_v2(self, bindings: List[int]) -> bool:
        """Runs synchronously with one address per I/O tensor, in the engine's tensor order."""
        n = self._engine.num_io_tensors
        if len(bindings) != n:
            raise KilnError(f"execute_v2: {len(bindings)} bindings given, the engine has {n} I/O tensors")
        for i in range(n):
            self.set_tensor_address(self._engine.get_tensor_name(i), int(bindings[i]))
        if self._engine.backend == "cuda":
            if self._stream is None:
                self._stream = _kiln.DeviceStream.create("cuda")
            self._c.enqueue(self._stream.handle)
            self._stream.synchronize()
        else:
            self._c.enqueue(0)
        return True

    def get_output_buffer(self, name: str) -> int:
        """kiln's: the address of an output as the context holds it after a run (outputs whose size depends on the
        data are read this way)."""
        return self._c.get_output_buffer(name)

    @property
    def profiler(self) -> Optional[IProfiler]:
        return self._profiler

    @profiler.setter
    def profiler(self, p: Optional[IProfiler]) -> None:
        self._profiler = p
        self._c.set_profiler(p)

    def set_use_cuda_graph(self, on: bool) -> None:
        """kiln's: capture the launches in a CUDA graph on the first run and replay it after."""
        self._c.set_use_cuda_graph(bool(on))


class ICudaEngine:
    """A built engine (TensorRT's ICudaEngine); `backend` says where it runs ("cuda" or "cpu")."""

    def __init__(self, engine: _kiln.Engine, serialized: bytes):
        self._e = engine
        self._bytes = serialized

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @property
    def num_io_tensors(self) -> int:
        return self._e.num_io_tensors

    def get_tensor_name(self, index: int) -> str:
        if not 0 <= index < self.num_io_tensors:
            raise IndexError(f"tensor index {index} is out of range: the engine has {self.num_io_tensors} I/O tensors")
        return self._e.get_tensor_name(index)

    def _known(self, name: str) -> str:
        if self._e.get_tensor_mode(name) == TensorIOMode.NONE:
            names = [self._e.get_tensor_name(i) for i in range(self.num_io_tensors)]
            raise KilnError(f"the engine has no input or output '{name}' (its tensors: {', '.join(names)})")
        return name

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        return self._e.get_tensor_mode(name)

    def get_tensor_dtype(self, name: str) -> DataType:
        return self._e.get_tensor_dtype(self._known(name))

    def get_tensor_shape(self, name: str) -> Dims:
        return Dims(self._e.get_tensor_shape(self._known(name)))

    def get_tensor_profile_shape(self, name: str, profile_index: int) -> List[Dims]:
        self._known(name)
        if not 0 <= profile_index < self.num_optimization_profiles:
            raise IndexError(f"profile {profile_index} is out of range: the engine has "
                             f"{self.num_optimization_profiles} profiles")
        return [Dims(d) for d in self._e.get_tensor_profile_shape(name, int(profile_index))]

    def is_shape_inference_io(self, name: str) -> bool:
        return False

    @property
    def num_optimization_profiles(self) -> int:
        return self._e.num_optimization_profiles

    @property
    def num_layers(self) -> int:
        return self._e.num_layers

    @property
    def num_aux_streams(self) -> int:
        """The auxiliary streams the engine runs layers on besides the caller's stream."""
        return self._e.num_aux_streams

    @property
    def device_memory_size(self) -> int:
        return self._e.device_memory_size

    @property
    def backend(self) -> str:
        return self._e.backend

    @property
    def name(self) -> str:
        return "kiln-engine"

    def create_execution_context(self) -> IExecutionContext:
        return IExecutionContext(self, self._e.create_execution_context())

    def create_engine_inspector(self) -> EngineInspector:
        return EngineInspector(self)

    def serialize(self) -> IHostMemory:
        return IHostMemory(self._bytes)

    def __getitem__(self, index: int) -> str:
        return self.get_tensor_name(index)


class Runtime:
    """Loads engines (TensorRT's trt.Runtime)."""

    def __init__(self, logger):
        self._logger = logger
        self._r = _kiln.Runtime(logger)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def deserialize_cuda_engine(self, serialized_engine) -> ICudaEngine:
        """An engine from its bytes (any buffer). A file built for another backend, GPU or kiln version raises
        KilnError saying what does not match."""
        data = bytes(serialized_engine)
        return ICudaEngine(self._r.deserialize_engine(data), data)

    def load_engine_file(self, path: str) -> ICudaEngine:
        with open(path, "rb") as f:
            return self.deserialize_cuda_engine(f.read())
