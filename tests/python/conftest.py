"""The Python package's tests: kiln imported from the build tree (ctest sets PYTHONPATH to build/python) or from
an installed package; models made with onnx.helper; the kiln CLI (--kiln) for the cross-checks."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def pytest_addoption(parser):
    parser.addoption("--kiln", default=None, help="the kiln command line (for CLI cross-checks)")


@pytest.fixture
def kiln_cli(request):
    path = request.config.getoption("--kiln")
    if not path:
        pytest.skip("--kiln not given")
    return path


def mlp_model(batch="batch", seed=0, opset=17):
    """x [batch, 8] -> MatMul [8, 16] + b -> Relu -> MatMul [16, 4] -> y; random weights."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((8, 16)).astype(np.float32)
    b1 = rng.standard_normal(16).astype(np.float32)
    w2 = rng.standard_normal((16, 4)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
        helper.make_node("Relu", ["hb"], ["r"], name="relu1"),
        helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8

    def reference(x):
        return np.maximum(x @ w1 + b1, 0) @ w2

    return model, reference


@pytest.fixture
def mlp():
    return mlp_model()
