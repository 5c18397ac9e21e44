"""Writes the model repository the serve tests use (run with the build's Python, which has onnx):

  mlp/         model.onnx (x FP32 [b,8] -> y FP32 [b,4]) with config.pbtxt: max_batch_size 8, dynamic batching
               (20 ms window), two CPU instances; weights also in mlp_weights.npz for the tests' reference
  mlp_engine/  the same network as a model.engine built by `kiln build` (no config.pbtxt: completed from the engine)
  typed/       a, mask, k -> y = Where(mask, a, 2a) + float(k) (FP32), z = FP16(y); BOOL, INT64, FP16 tensors
  slow/        mlp again with a 5 s batching window (requests wait in the queue: the graceful-shutdown test)
  broken/      a config.pbtxt that does not parse (the model is UNAVAILABLE; the server starts anyway)

Usage: make_repository.py DIR KILN"""
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def mlp(path):
    rng = np.random.default_rng(7)
    w1 = rng.standard_normal((8, 16)).astype(np.float32)
    b1 = rng.standard_normal(16).astype(np.float32)
    w2 = rng.standard_normal((16, 4)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                               numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return w1, b1, w2


def typed(path):
    nodes = [helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2, np.float32))),
             helper.make_node("Mul", ["a", "two"], ["a2"]),
             helper.make_node("Where", ["mask", "a", "a2"], ["w"]),
             helper.make_node("Cast", ["k"], ["kf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["w", "kf"], ["y"]),
             helper.make_node("Cast", ["y"], ["z"], to=TensorProto.FLOAT16)]
    graph = helper.make_graph(nodes, "typed", [
        helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4]),
        helper.make_tensor_value_info("mask", TensorProto.BOOL, ["batch", 4]),
        helper.make_tensor_value_info("k", TensorProto.INT64, ["batch", 1])], [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4]),
        helper.make_tensor_value_info("z", TensorProto.FLOAT16, ["batch", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def main(root, kiln):
    for d in ("mlp/1", "mlp_engine/1", "typed/1", "broken/1", "slow/1"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    w1, b1, w2 = mlp(os.path.join(root, "mlp/1/model.onnx"))
    np.savez(os.path.join(os.path.dirname(root), "mlp_weights.npz"), w1=w1, b1=b1, w2=w2)
    with open(os.path.join(root, "mlp/config.pbtxt"), "w") as f:
        f.write('name: "mlp"\nmax_batch_size: 8\n'
                'input [ { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]\n'
                'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
                'dynamic_batching { max_queue_delay_microseconds: 20000 }\n'
                'instance_group [ { count: 2 kind: KIND_CPU } ]\n')
    subprocess.run([kiln, "build", "--onnx=" + os.path.join(root, "mlp/1/model.onnx"), "--backend=cpu",
                    "--minShapes=x:1x8", "--optShapes=x:4x8", "--maxShapes=x:16x8",
                    "--saveEngine=" + os.path.join(root, "mlp_engine/1/model.engine")], check=True,
                   stdout=subprocess.DEVNULL)
    mlp(os.path.join(root, "slow/1/model.onnx"))
    with open(os.path.join(root, "slow/config.pbtxt"), "w") as f:
        f.write('max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 5000000 }\n'
                'instance_group [ { kind: KIND_CPU } ]\n')
    typed(os.path.join(root, "typed/1/model.onnx"))
    with open(os.path.join(root, "typed/config.pbtxt"), "w") as f:
        f.write('max_batch_size: 4\ninstance_group [ { kind: KIND_CPU } ]\n')
    with open(os.path.join(root, "broken/config.pbtxt"), "w") as f:
        f.write('max_batch_size: "many"\n')


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
