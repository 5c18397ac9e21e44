#!/usr/bin/env python3
"""Writes the ONNX backend node tests of the onnx package it runs with into OUT (one directory per test: model.onnx and
test_data_set_*/{input,output}_*.pb), the layout kiln-conformance reads with --data OUT.

onnx wheels since 1.17 no longer ship the node test data (1.16 did); the test cases (onnx.backend.test.case.node)
still do, with their expected outputs, so the data is generated from them, as onnx's own tooling does. Issue 12 moves
the conformance tests to the newest onnx this way. Usage, with that onnx installed apart from the pinned 1.16:
    python3 -m pip install --target /tmp/onnx-new onnx==1.23.2
    PYTHONPATH=/tmp/onnx-new python3 scripts/onnx_node_tests.py /tmp/onnx-new-node
    build/bin/kiln-conformance --data /tmp/onnx-new-node --json out/conformance.json
"""
import os
import shutil
import sys

import onnx
from onnx import TensorProto, numpy_helper
from onnx.backend.test.case import node as node_cases


def proto_of(value, info):
    """The value of one input or output as the protobuf its graph's type asks for."""
    t = info.type
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, info.name)
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, info.name)
    if t.HasField("map_type"):
        return numpy_helper.from_dict(value, info.name)
    if isinstance(value, TensorProto):
        return value
    return numpy_helper.from_array(value, info.name)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: onnx_node_tests.py OUT_DIR")
    out = sys.argv[1]
    cases = node_cases.collect_testcases()
    for case in cases:
        d = os.path.join(out, case.name)
        if os.path.exists(d):
            shutil.rmtree(d)
        os.makedirs(d)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            dd = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(dd)
            for kind, values, infos in (("input", inputs, case.model.graph.input),
                                        ("output", outputs, case.model.graph.output)):
                for j, v in enumerate(values):
                    with open(os.path.join(dd, f"{kind}_{j}.pb"), "wb") as f:
                        f.write(proto_of(v, infos[j]).SerializeToString())
    print(f"onnx {onnx.__version__} (opset {onnx.defs.onnx_opset_version()}): {len(cases)} node tests in {out}")


if __name__ == "__main__":
    main()
