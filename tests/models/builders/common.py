"""Small graph-building helper shared by the model builders.

Every model in tests/models is written node by node with onnx.helper, the way
PyTorch's exporter lays them out (node names like "/layer1/0/conv1/Conv", value
names "<node>_output_0", weights as initializers), with random weights drawn
from one seeded numpy Generator so that a (seed, size) pair always gives the
same model.
"""
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class GraphBuilder:
    """Accumulates nodes and initializers; op() returns the output name(s)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.initializers = []
        self._names = set()
        self._const_cache = {}

    # -- naming -------------------------------------------------------------
    def _unique(self, name):
        base, i = name, 1
        while name in self._names:
            name = f"{base}_{i}"
            i += 1
        self._names.add(name)
        return name

    # -- tensors ------------------------------------------------------------
    def init(self, name, array):
        """Adds an initializer (weights) and returns its name."""
        name = self._unique(name)
        self.initializers.append(numpy_helper.from_array(np.array(array, order="C"), name))
        return name

    def const(self, value, dtype=np.int64):
        """A small constant (shape vector, scalar, axes) as an initializer.

        Identical constants share one initializer, as exporters do.
        """
        arr = np.array(value, dtype=dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._const_cache:
            self._const_cache[key] = self.init(f"onnx::Const_{len(self._const_cache)}", arr)
        return self._const_cache[key]

    def const_node(self, value, dtype=np.int64, scope="/Constant"):
        """A constant written as a Constant node (the other form exporters use)."""
        arr = np.array(value, dtype=dtype)
        return self.op("Constant", [], scope=scope, value=numpy_helper.from_array(arr))

    def normal(self, name, shape, std):
        return self.init(name, self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    def uniform(self, name, shape, lo, hi):
        return self.init(name, self.rng.random(shape, dtype=np.float32) * np.float32(hi - lo) + np.float32(lo))

    # -- nodes --------------------------------------------------------------
    def op(self, op_type, inputs, scope="", n_out=1, domain=None, outputs=None, **attrs):
        """Adds one node named '<scope>/<op_type>'; returns its output name(s).

        outputs: explicit output names (graph outputs); default '<node name>_output_<i>'.
        """
        name = self._unique(f"{scope}/{op_type}")
        if outputs is None:
            outputs = [f"{name}_output_{i}" for i in range(n_out)]
        n_out = len(outputs)
        node = helper.make_node(op_type, list(inputs), outputs, name=name, **attrs)
        if domain is not None:
            node.domain = domain
        self.nodes.append(node)
        return outputs[0] if n_out == 1 else outputs

    # -- common exporter patterns -------------------------------------------
    def dim(self, x, axis, scope):
        """Shape(x) -> Gather(axis) -> Unsqueeze(0): a 1-element int64 tensor."""
        shape = self.op("Shape", [x], scope=scope)
        d = self.op("Gather", [shape, self.const(axis)], scope=scope, axis=0)
        return self.op("Unsqueeze", [d, self.const([0])], scope=scope)

    def reshape_dyn(self, x, parts, scope):
        """Reshape with a shape built by Concat of dims taken from tensors at run time.

        parts: list of either ('dim', tensor, axis) or a list of constant ints.
        """
        pieces = []
        for p in parts:
            if isinstance(p, tuple):
                pieces.append(self.dim(p[1], p[2], scope))
            else:
                pieces.append(self.const(list(p)))
        shape = self.op("Concat", pieces, scope=scope, axis=0)
        return self.op("Reshape", [x, shape], scope=scope)

    def matmul_add(self, x, k_in, k_out, scope, std=0.02):
        """Linear layer as exporters write it for 3-D inputs: MatMul + Add(bias)."""
        w = self.normal(f"{scope}.weight", (k_in, k_out), std)
        b = self.normal(f"{scope}.bias", (k_out,), 0.02)
        y = self.op("MatMul", [x, w], scope=scope)
        return self.op("Add", [b, y], scope=scope)

    def layer_norm_decomposed(self, x, dim, scope, eps=1e-12):
        """LayerNorm as the pre-opset-17 PyTorch exporter writes it."""
        gamma = self.uniform(f"{scope}.weight", (dim,), 0.8, 1.2)
        beta = self.normal(f"{scope}.bias", (dim,), 0.05)
        mean = self.op("ReduceMean", [x], scope=scope, axes=[-1], keepdims=1)
        d = self.op("Sub", [x, mean], scope=scope)
        sq = self.op("Pow", [d, self.const(2.0, np.float32)], scope=scope)
        var = self.op("ReduceMean", [sq], scope=scope, axes=[-1], keepdims=1)
        ve = self.op("Add", [var, self.const(eps, np.float32)], scope=scope)
        sd = self.op("Sqrt", [ve], scope=scope)
        n = self.op("Div", [d, sd], scope=scope)
        m = self.op("Mul", [n, gamma], scope=scope)
        return self.op("Add", [m, beta], scope=scope)

    def layer_norm_op(self, x, dim, scope, eps=1e-5):
        """LayerNorm as the opset-17 exporter writes it: one LayerNormalization node."""
        gamma = self.uniform(f"{scope}.weight", (dim,), 0.8, 1.2)
        beta = self.normal(f"{scope}.bias", (dim,), 0.05)
        return self.op("LayerNormalization", [x, gamma, beta], scope=scope, axis=-1, epsilon=eps)

    def gelu_erf(self, x, scope):
        """x * 0.5 * (1 + erf(x / sqrt(2))), node for node as torch.onnx writes it."""
        d = self.op("Div", [x, self.const(math.sqrt(2.0), np.float32)], scope=scope)
        e = self.op("Erf", [d], scope=scope)
        a = self.op("Add", [e, self.const(1.0, np.float32)], scope=scope)
        m = self.op("Mul", [x, a], scope=scope)
        return self.op("Mul", [m, self.const(0.5, np.float32)], scope=scope)

    def gelu_tanh(self, x, scope):
        """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) (GPT-2's gelu_new)."""
        half = self.op("Mul", [self.const(0.5, np.float32), x], scope=scope)
        cube = self.op("Pow", [x, self.const(3.0, np.float32)], scope=scope)
        c = self.op("Mul", [self.const(0.044715, np.float32), cube], scope=scope)
        s = self.op("Add", [x, c], scope=scope)
        k = self.op("Mul", [self.const(math.sqrt(2.0 / math.pi), np.float32), s], scope=scope)
        t = self.op("Tanh", [k], scope=scope)
        one = self.op("Add", [self.const(1.0, np.float32), t], scope=scope)
        return self.op("Mul", [half, one], scope=scope)

    # -- model --------------------------------------------------------------
    def model(self, name, inputs, outputs, opset=OPSET, extra_opsets=None):
        """Builds and checks the ModelProto.

        inputs/outputs: lists of (name, elem_type, shape) with str entries for symbolic dims.
        """
        vi_in = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs]
        vi_out = [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs]
        graph = helper.make_graph(self.nodes, name, vi_in, vi_out, initializer=self.initializers)
        imports = [helper.make_opsetid("", opset)]
        for domain, version in (extra_opsets or {}).items():
            imports.append(helper.make_opsetid(domain, version))
        m = helper.make_model(graph, opset_imports=imports, producer_name="kiln-tests")
        m.ir_version = 8
        onnx.checker.check_model(m, full_check=True)
        return m


FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
