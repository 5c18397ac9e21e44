#!/usr/bin/env python3
"""Writes one zoo model (random weights, fixed seed) and its inputs for `kiln run` (used by scripts/demo).

    python3 tests/models/make_model.py resnet50 OUTDIR
writes OUTDIR/resnet50.onnx, one OUTDIR/resnet50.input.<name>.npy per input, and OUTDIR/resnet50.inputs,
which holds the --loadInputs value (name:file,...).
"""
import sys
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_models import MODELS  # noqa: E402  (name -> (builder, kwargs))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in MODELS:
        sys.exit(f"usage: make_model.py {{{'|'.join(MODELS)}}} OUTDIR")
    name, out = sys.argv[1], Path(sys.argv[2]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    build, kwargs = MODELS[name]
    model, feeds = build(seed=0, **kwargs)
    onnx.save(model, str(out / f"{name}.onnx"))
    spec = []
    for k, v in feeds.items():
        f = out / f"{name}.input.{k.replace('/', '_').replace(':', '_')}.npy"
        np.save(f, np.ascontiguousarray(v))
        spec.append(f"{k}:{f}")
    (out / f"{name}.inputs").write_text(",".join(spec))
    print(f"[demo] wrote {out / (name + '.onnx')} ({(out / (name + '.onnx')).stat().st_size / 1e6:.1f} MB) and its inputs")


if __name__ == "__main__":
    main()
