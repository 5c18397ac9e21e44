"""kiln for PyTorch modules (what Torch-TensorRT gives):

    import kiln.torch
    trt_model = kiln.torch.compile(model, (x,), fp16=True)      # exports through torch.onnx (dynamo), builds
    y = trt_model(x)                                           # CUDA tensors in, CUDA tensors out
    trt_model.save("model.kiln"); trt_model = kiln.torch.load("model.kiln")   # no torch export on load

    compiled = torch.compile(model, backend="kiln")           # kiln as a torch.compile backend

The torch.compile backend hands each graph dynamo captures to kiln through ONNX. A graph kiln cannot take (an export
failure, an op kiln refuses, symbolic shapes) runs eagerly instead, and a warning says why. kiln runs inference
only: outputs carry no autograd history.
"""
from __future__ import annotations

import io
import json
import os
import struct
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from ._compile import Engine, compile as _kiln_compile, load as _kiln_load
from ._types import KilnError

__all__ = ["KilnModule", "compile", "load", "kiln_backend"]

_MAGIC = b"KILNTORCH1\n"


def _as_tuple(example_inputs) -> Tuple:
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    return tuple(example_inputs)


def _spec_dumps(spec) -> Optional[str]:
    try:
        return torch.utils._pytree.treespec_dumps(spec)
    except Exception:  # noqa: BLE001 - a structure pytree cannot write: outputs come back as a tuple
        return None


class KilnModule(torch.nn.Module):
    """A kiln engine as a torch module: forward takes the exported module's positional tensor inputs and returns
    its outputs in the module's structure (a tensor, a tuple, a dict...), as torch tensors on the inputs' device."""

    def __init__(self, engine: Engine, input_names: Sequence[str], output_spec=None):
        super().__init__()
        self.engine = engine
        self.input_names = list(input_names)
        if isinstance(output_spec, str):
            self._spec_text, self._spec = output_spec, torch.utils._pytree.treespec_loads(output_spec)
        else:  # a TreeSpec (kept as it is: namedtuples and other types pytree cannot write keep their structure)
            self._spec, self._spec_text = output_spec, _spec_dumps(output_spec) if output_spec is not None else None

    def forward(self, *args):
        if len(args) != len(self.input_names):
            raise KilnError(f"{len(args)} inputs given, the compiled module takes {len(self.input_names)} "
                            f"({', '.join(self.input_names)})")
        feeds = {}
        device = None
        for name, a in zip(self.input_names, args):
            if not isinstance(a, torch.Tensor):
                raise KilnError(f"input '{name}' is a {type(a).__name__}; the compiled module takes tensors")
            if device is None:
                device = a.device
            if not a.is_cuda and a.dtype == torch.bfloat16:
                raise KilnError(f"input '{name}' is a bfloat16 CPU tensor, which numpy cannot carry: pass a CUDA "
                                "tensor, or float32")
            feeds[name] = a.detach().contiguous() if a.is_cuda else a.detach().cpu().numpy()
        outs = self.engine.run(feeds)
        flat = [self._to_torch(outs[o["name"]], device) for o in self.engine.outputs]
        if self._spec is None:
            return flat[0] if len(flat) == 1 else tuple(flat)
        if self._spec.num_leaves != len(flat):
            raise KilnError(f"the engine has {len(flat)} outputs but the module returned {self._spec.num_leaves} "
                            "tensors; the export changed the outputs")
        return torch.utils._pytree.tree_unflatten(flat, self._spec)

    @staticmethod
    def _to_torch(v, device):
        if isinstance(v, torch.Tensor):
            return v
        t = torch.from_numpy(np.ascontiguousarray(v))
        return t.to(device) if device is not None and device.type != "cpu" else t

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes the engine and what the module needs around it (input names, output structure) to one file."""
        if self._spec is not None and self._spec_text is None:
            warnings.warn("kiln.torch: the module's output structure cannot be written (pytree cannot serialize one of "
                          "its types); the loaded module returns a flat tuple", RuntimeWarning, stacklevel=2)
        header = json.dumps({"inputs": self.input_names, "output_spec": self._spec_text}).encode()
        blob = bytes(self.engine.trt_engine.serialize())
        with open(os.fspath(path), "wb") as f:
            f.write(_MAGIC + struct.pack("<Q", len(header)) + header + blob)


def load(path: Union[str, os.PathLike], logger=None) -> KilnModule:
    """A KilnModule saved with KilnModule.save; nothing is exported or built again."""
    with open(os.fspath(path), "rb") as f:
        data = f.read()
    if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + 8:
        raise KilnError(f"{os.fspath(path)} is not a module saved by kiln.torch (KilnModule.save); engine files "
                        "load with kiln.load")
    (n,) = struct.unpack_from("<Q", data, len(_MAGIC))
    start = len(_MAGIC) + 8
    if start + n > len(data):
        raise KilnError(f"{os.fspath(path)} is truncated")
    try:
        header = json.loads(data[start:start + n])
        inputs, spec = list(header["inputs"]), header.get("output_spec")
    except (ValueError, KeyError, TypeError) as e:
        raise KilnError(f"{os.fspath(path)}: its header is damaged ({e})") from None
    from ._runtime import Runtime
    from ._compile import _logger
    engine = Engine(Runtime(_logger(logger)).deserialize_cuda_engine(data[start + n:]))
    return KilnModule(engine, inputs, spec)


# ---------------------------------------------------------------------------------------------- export + build
def _export(module, args: Tuple, dynamic_shapes, exporter: str, opset: Optional[int]) -> bytes:
    if exporter == "dynamo":
        kw = {"dynamo": True, "verbose": False}
        if dynamic_shapes is not None:
            kw["dynamic_shapes"] = dynamic_shapes
        if opset is not None:
            kw["opset_version"] = opset
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(module, args, **kw)
        return program.model_proto.SerializeToString()
    if exporter == "torchscript":
        buf = io.BytesIO()
        names = [f"input_{i}" for i in range(len(args))]
        kw = {"dynamo": False, "input_names": names}
        if dynamic_shapes is not None:
            kw["dynamic_axes"] = {names[i]: sorted(_dynamic_dims(s))
                                  for i, s in enumerate(_per_input(dynamic_shapes, len(args), module)) if s}
        if opset is not None:
            kw["opset_version"] = opset
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, args, buf, **kw)
        return buf.getvalue()
    raise KilnError(f"exporter '{exporter}' is not one of dynamo, torchscript")


def _per_input(dynamic_shapes, n: int, module=None) -> List[Any]:
    """dynamic_shapes (torch.export's: a tuple/list per positional input, or a dict by forward's argument names,
    each a {dim: Dim} dict or a per-dim sequence) as one spec per positional input."""
    if isinstance(dynamic_shapes, Mapping):
        import inspect
        fn = getattr(module, "forward", module)
        try:
            names = [p.name for p in inspect.signature(fn).parameters.values()
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            names = []
        unknown = [k for k in dynamic_shapes if k not in names]
        if unknown:
            raise KilnError(f"dynamic_shapes names {unknown}, which are not arguments of the module's forward "
                            f"({', '.join(names)})")
        specs = [dynamic_shapes.get(k) for k in names]
    else:
        specs = list(dynamic_shapes)
    return (specs + [None] * n)[:n]


def _dynamic_dims(spec) -> Dict[int, Any]:
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return {int(k): v for k, v in spec.items() if v is not None}
    return {i: v for i, v in enumerate(spec) if v is not None}


def _dim_bounds(dim, example: int) -> Tuple[int, int]:
    lo = getattr(dim, "min", None)
    hi = getattr(dim, "max", None)
    lo = int(lo) if isinstance(lo, int) and lo >= 0 else 1
    hi = int(hi) if isinstance(hi, int) and hi < (1 << 31) else None
    if hi is None:
        raise KilnError(f"a dynamic dimension ({dim}) has no upper bound: give it one (torch.export.Dim(name, "
                        f"max=N)) or pass max_shapes")
    return max(lo, 1), hi


def _profile(args: Tuple, names: Sequence[str], dynamic_shapes, min_shapes, max_shapes, module=None):
    """min/opt/max shapes per input: opt is the example's shape; dynamic dims span their Dim bounds (or the
    min_shapes/max_shapes given, by input position or name)."""
    def pick(given, i, name):
        if given is None:
            return None
        if isinstance(given, Mapping):
            return given.get(name, given.get(i))
        return given[i] if i < len(given) else None

    lo, opt, hi = {}, {}, {}
    specs = _per_input(dynamic_shapes, len(args), module) if dynamic_shapes is not None else [None] * len(args)
    for i, (a, name) in enumerate(zip(args, names)):
        shape = list(a.shape)
        mn, mx = list(shape), list(shape)
        for d, dim in _dynamic_dims(specs[i]).items():
            if pick(max_shapes, i, name) is None:
                mn[d], mx[d] = _dim_bounds(dim, shape[d])
            else:
                mn[d] = 1
        if pick(min_shapes, i, name) is not None:
            mn = list(pick(min_shapes, i, name))
        if pick(max_shapes, i, name) is not None:
            mx = list(pick(max_shapes, i, name))
        if mn == shape and mx == shape:
            continue  # a static input (scalars included) needs no profile
        lo[name], opt[name], hi[name] = mn, shape, mx
    return lo, opt, hi


def _onnx_input_names(model: bytes) -> List[str]:
    import onnx
    m = onnx.load_from_string(model)
    inits = {t.name for t in m.graph.initializer}
    return [i.name for i in m.graph.input if i.name not in inits]


def compile(module: torch.nn.Module, example_inputs, *, dynamic_shapes=None,  # noqa: A001
            min_shapes: Optional[Union[Sequence, Mapping]] = None, max_shapes: Optional[Union[Sequence, Mapping]] = None,
            fp16: bool = False, bf16: bool = False, int8: bool = False, fp8: bool = False, tf32: bool = True,
            calibration_data=None, calibration_cache: Optional[str] = None, timing_cache: Optional[str] = None,
            exporter: str = "dynamo", opset: Optional[int] = None, backend: Optional[str] = None,
            optimization_level: int = 3, workspace: Optional[int] = None, logger=None, _output_spec=None) -> KilnModule:
    """Exports `module` with torch's ONNX exporter (dynamo by default; exporter="torchscript" for the older one) on
    `example_inputs` (a tensor or a tuple of positional tensors), builds it with kiln and returns a KilnModule.

    The engine is built for the examples' shapes. dynamic_shapes (torch.export's form: per input, a {dim:
    torch.export.Dim(name, min=, max=)} dict) makes those dims dynamic over the Dims' bounds, or over
    min_shapes/max_shapes (per input position or ONNX input name). backend defaults to "cuda" for CUDA example
    inputs and "cpu" for host ones. The other arguments are kiln.compile's."""
    args = _as_tuple(example_inputs)
    if not args or not all(isinstance(a, torch.Tensor) for a in args):
        raise KilnError("example_inputs must be a tensor or a tuple of tensors")
    if dynamic_shapes is not None:
        _per_input(dynamic_shapes, len(args), module)  # names checked before the export spends its time
    was_training = bool(getattr(module, "training", False))
    if hasattr(module, "eval"):
        module.eval()
    try:
        spec = _output_spec
        if spec is None:  # the output structure, from a run on copies of the examples (the caller's stay untouched)
            with torch.no_grad():
                reference = module(*[a.clone() for a in args])
            leaves, spec = torch.utils._pytree.tree_flatten(reference)
            if not all(isinstance(v, torch.Tensor) for v in leaves):
                raise KilnError("the module returns values that are not tensors; kiln engines return tensors only")
        model = _export(module, args, dynamic_shapes, exporter, opset)
    finally:
        if was_training and hasattr(module, "train"):
            module.train()
    names = _onnx_input_names(model)
    if len(names) != len(args):
        raise KilnError(f"the exported model has {len(names)} inputs ({', '.join(names)}) for {len(args)} example "
                        "inputs: non-tensor or unused arguments are not supported")
    lo, opt, hi = _profile(args, names, dynamic_shapes, min_shapes, max_shapes, module)
    if backend is None:
        backend = "cuda" if args[0].is_cuda else "cpu"
    engine = _kiln_compile(model, fp16=fp16, bf16=bf16, int8=int8, fp8=fp8, tf32=tf32, min_shapes=lo,
                           opt_shapes=opt, max_shapes=hi, calibration_data=calibration_data,
                           calibration_cache=calibration_cache, timing_cache=timing_cache, backend=backend,
                           optimization_level=optimization_level, workspace=workspace, logger=logger)
    return KilnModule(engine, names, spec)


# ------------------------------------------------------------------------------------------ torch.compile backend
class _ParamsAsConstants(torch.nn.Module):
    """A dynamo graph whose parameters and buffers arrive as inputs (inline_inbuilt_nn_modules), with those fixed:
    the export sees them as constants (ONNX initializers), and kiln folds and fuses them (BatchNorm into its conv)."""

    def __init__(self, gm, example_inputs, fixed: Dict[int, torch.Tensor]):
        super().__init__()
        self.gm = gm
        self.n = len(example_inputs)
        self.fixed = fixed
        for i, t in fixed.items():
            self.register_buffer(f"c{i}", t.detach(), persistent=False)

    def forward(self, *free):
        it = iter(free)
        full = [getattr(self, f"c{i}") if i in self.fixed else next(it) for i in range(self.n)]
        return self.gm(*full)


_warned_grad = False


_BACKEND_OPTIONS = ("fp16", "bf16", "int8", "fp8", "tf32", "calibration_cache", "timing_cache", "exporter", "opset",
                    "backend", "optimization_level", "workspace", "logger")


def _mutates(gm: torch.fx.GraphModule) -> Optional[str]:
    """The first node of the graph that writes a tensor in place (an ONNX export would drop the write), or None."""
    for node in gm.graph.nodes:
        if node.op == "call_method" and node.target.endswith("_") and not node.target.startswith("_"):
            return f"{node.target} (in-place method)"
        if node.op == "call_function":
            schema = getattr(node.target, "_schema", None)
            if schema is not None and getattr(schema, "is_mutable", False):
                return str(node.target)
            name = getattr(node.target, "__name__", "")
            if name.endswith("_") and not name.startswith("_") and name not in ("setitem",):
                return name
            if name == "setitem":
                return "setitem (assignment into a tensor)"
    return None


def _output_spec(gm: torch.fx.GraphModule):
    """The graph's output structure without running it (fx nodes as leaves), and whether every leaf is a node."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    leaves, spec = torch.utils._pytree.tree_flatten(out.args[0])
    return spec, all(isinstance(v, torch.fx.Node) for v in leaves), leaves


def _is_constant_input(gm: torch.fx.GraphModule, index: int, x) -> bool:
    """A parameter or buffer that dynamo lifted into an input (inline_inbuilt_nn_modules): fixed for the build."""
    if isinstance(x, torch.nn.Parameter):
        return True
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if index < len(placeholders):
        grapharg = placeholders[index].meta.get("grapharg")
        source = getattr(grapharg, "source", None)
        name = getattr(source, "name", "") if source is not None else ""
        name = name() if callable(name) else str(name)
        return "_buffers[" in name or "_parameters[" in name
    return False


def kiln_backend(gm: torch.fx.GraphModule, example_inputs: List[Any], options: Optional[Mapping] = None, **kw):
    """torch.compile(model, backend="kiln", options={...}): builds each captured graph with kiln (options are
    kiln.torch.compile's: fp16, bf16, tf32, timing_cache, exporter, optimization_level, workspace...). Graphs kiln
    cannot take run eagerly, with a warning saying why: in-place writes (an engine has no state to write), symbolic
    sizes, no ONNX export, an op kiln refuses. Parameters and buffers become constants of the engine; when one
    changes afterwards (a weight update, load_state_dict), the graph runs eagerly from then on, with a warning."""
    options = {**(options or {}), **kw}
    unknown = sorted(k for k in options if k not in _BACKEND_OPTIONS)
    if unknown:
        raise KilnError(f"torch.compile backend 'kiln' has no option {unknown[0]!r} (it takes "
                        f"{', '.join(_BACKEND_OPTIONS)})")

    def eager(reason: str):
        warnings.warn(f"kiln: running this graph eagerly: {reason}", RuntimeWarning, stacklevel=2)
        return gm.forward

    if any(not isinstance(x, torch.Tensor) for x in example_inputs):
        return eager("it takes symbolic sizes or other non-tensor inputs (dynamic shapes); compile with "
                     "dynamic=False, or use kiln.torch.compile with dynamic_shapes")
    mutation = _mutates(gm)
    if mutation:
        return eager(f"it writes tensors in place ({mutation}), which an engine cannot do")
    spec, all_nodes, leaves = _output_spec(gm)
    placeholders = {n for n in gm.graph.nodes if n.op == "placeholder"}
    if not all_nodes or any(v in placeholders for v in leaves):
        return eager("it returns an input unchanged or a value that is not a tensor")
    fixed = {i: x for i, x in enumerate(example_inputs) if _is_constant_input(gm, i, x)}
    free_idx = [i for i in range(len(example_inputs)) if i not in fixed]
    if not free_idx:
        return eager("the graph has no tensor inputs besides its parameters and buffers")
    examples = tuple(_materialize(example_inputs[i]) for i in free_idx)
    try:
        wrapped = _ParamsAsConstants(gm, example_inputs, fixed)
        compiled = compile(wrapped, examples, _output_spec=spec, **options)
    except Exception as e:  # noqa: BLE001 - any failure means the graph runs eagerly, said in the warning
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return eager(f"{type(e).__name__}: {first}")
    versions = {i: (t._version, t.data_ptr()) for i, t in fixed.items()}
    state = {"stale": False}

    def run(*args):
        global _warned_grad
        if not state["stale"] and any((args[i]._version, args[i].data_ptr()) != v for i, v in versions.items()):
            state["stale"] = True
            warnings.warn("kiln: a parameter or buffer of this graph changed after it was built; it runs eagerly "
                          "from now on (torch._dynamo.reset() and call again to rebuild)", RuntimeWarning,
                          stacklevel=2)
        if state["stale"]:
            return gm.forward(*args)
        if not _warned_grad and torch.is_grad_enabled() and any(
                isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            _warned_grad = True
            warnings.warn("kiln runs inference only: outputs of kiln-compiled graphs carry no autograd history "
                          "(run under torch.no_grad() or torch.inference_mode())", RuntimeWarning, stacklevel=2)
        return compiled(*[args[i] for i in free_idx])

    return run


def _materialize(x: torch.Tensor) -> torch.Tensor:
    """A real tensor for a fake one (dynamo may hand FakeTensors): export needs only its shape and dtype."""
    if type(x).__name__ == "FakeTensor":
        return torch.zeros(tuple(int(d) for d in x.shape), dtype=x.dtype, device=x.device)
    return x


def _register() -> None:
    try:
        from torch._dynamo import list_backends, register_backend
        if "kiln" not in list_backends(exclude_tags=()):
            register_backend(name="kiln")(kiln_backend)
    except Exception:  # noqa: BLE001 - a torch without dynamo: kiln.torch.compile still works
        pass


_register()
