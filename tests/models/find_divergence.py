"""Finds the first node whose output differs between kiln and onnxruntime.

Makes every node output (float tensors) a graph output, runs both, and prints, in graph order,
each value with its max abs / relative error; the first one over the tolerance is flagged.

    python3 tests/models/find_divergence.py --kiln build/bin/kiln --model bert --args "seq=16,layers=2"
    python3 tests/models/find_divergence.py --kiln build/bin/kiln --onnx some.onnx  (random inputs)
"""
import argparse
import importlib
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))


def safe_name(name):
    for c in "/:\\":
        name = name.replace(c, "_")
    return name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--model", help="builder name in tests/models/builders")
    ap.add_argument("--args", default="", help="builder keyword arguments, e.g. 'seq=16,layers=2'")
    ap.add_argument("--onnx", help="an existing model instead of a builder (random float inputs)")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--all", action="store_true", help="print every value, not only up to the first bad one")
    a = ap.parse_args()

    if a.model:
        kwargs = eval(f"dict({a.args})")  # noqa: S307 - a developer tool
        model, feeds = importlib.import_module(f"builders.{a.model}").build(**kwargs)
    else:
        model = onnx.load(a.onnx)
        rng = np.random.default_rng(0)
        feeds = {}
        for i in model.graph.input:
            shape = [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)

    existing = {o.name for o in model.graph.output}
    order = []
    for node in model.graph.node:
        for o in node.output:
            if o and o not in existing:
                model.graph.output.append(onnx.ValueInfoProto(name=o))
            if o:
                order.append((o, node))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = tmp / "model.onnx"
        onnx.save(model, str(path))
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        ref = dict(zip(names, sess.run(names, feeds)))
        specs = []
        for name, value in feeds.items():
            np.save(tmp / f"in_{safe_name(name)}.npy", value)
            specs.append(f"{name}:{tmp / f'in_{safe_name(name)}.npy'}")
        proc = subprocess.run([a.kiln, "run", f"--onnx={path}", "--loadInputs=" + ",".join(specs),
                               f"--exportOutput={tmp / 'out'}"], capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout, proc.stderr)
            return 1
        for name, node in order:
            f = tmp / "out" / f"{safe_name(name)}.npy"
            want = ref.get(name)
            if want is None or not f.is_file():
                print(f"{node.op_type:20s} {name}: missing ({'kiln' if want is not None else 'ort'})")
                continue
            got = np.load(f)
            if got.shape != want.shape or got.dtype != want.dtype:
                print(f"BAD {node.op_type:16s} {name}: kiln {got.dtype}{got.shape} vs ort {want.dtype}{want.shape}")
                if not a.all:
                    return 1
                continue
            if want.dtype.kind in "fc":
                err = np.abs(got.astype(np.float64) - want)
                bad = bool((err > a.tol + a.tol * np.abs(want)).any()) or (np.isnan(got) != np.isnan(want)).any()
                msg = f"max abs err {np.nanmax(err) if err.size else 0:.3g}"
            else:
                bad = not np.array_equal(got, want)
                msg = "exact" if not bad else f"{int((got != want).sum())} elements differ"
            print(f"{'BAD' if bad else 'ok '} {node.op_type:16s} {name} {want.dtype}{list(want.shape)} {msg}")
            if bad and not a.all:
                print(f"node: {node.name} inputs: {list(node.input)}")
                print(f"attributes: {[onnx.helper.printable_attribute(x) for x in node.attribute]}")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
