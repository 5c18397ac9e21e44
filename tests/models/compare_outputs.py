#!/usr/bin/env python3
"""Compares kiln's exported outputs (one .npy per output) with onnxruntime's on the same inputs.

    python3 tests/models/compare_outputs.py MODEL.onnx INPUTS_SPEC_FILE KILN_OUTDIR [--rtol 1e-4 --atol 1e-4]
Prints max abs / rel error per output; exits 1 when an output differs beyond the tolerances.
"""
import argparse
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("inputs", help="file holding the --loadInputs value (name:file.npy,...)")
    p.add_argument("outdir")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-4)
    a = p.parse_args()
    feeds = {}
    for item in Path(a.inputs).read_text().strip().split(","):
        name, f = item.rsplit(":", 1)
        feeds[name] = np.load(f)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    ok = True
    for name, ref in zip(names, sess.run(names, feeds)):
        safe = name.replace("/", "_").replace(":", "_").replace("\\", "_")
        got = np.load(Path(a.outdir) / f"{safe}.npy")
        if got.shape != ref.shape:
            print(f"[compare] {name}: shape {got.shape} != onnxruntime's {ref.shape}")
            ok = False
            continue
        diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        rel = diff / np.maximum(np.abs(ref.astype(np.float64)), 1e-12)
        good = np.allclose(got, ref, rtol=a.rtol, atol=a.atol)
        ok &= bool(good)
        print(f"[compare] {name}: {ref.shape} max abs err {diff.max():.3g}, max rel err {rel.max():.3g} "
              f"-> {'matches' if good else 'DIFFERS'} onnxruntime (rtol {a.rtol}, atol {a.atol})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
