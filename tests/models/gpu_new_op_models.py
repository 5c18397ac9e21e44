#!/usr/bin/env python3
"""The new-op models of test_new_op_models.py on a GPU: each built as a CUDA engine in FP32 (TF32 off) and FP16 with
`kiln build --backend=cuda`, run with `kiln run --loadEngine`, and compared with onnxruntime (CPU): FP32 within
rtol 1e-3 (|got - want| <= 1e-3 * (1 + |want|)), FP16 within 1e-2 relative L2 (issue 12's bars). Nodes without a
CUDA layer run by CPU fallback; the build report's fallback section is recorded. Writes a JSON of the results.
Usage: gpu_new_op_models.py --kiln BIN --out DIR"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).parent))
try:
    import pytest  # noqa: F401  (the test modules below decorate with it)
except ImportError:  # a GPU machine's Python may lack pytest: a stand-in whose decorators change nothing
    import types

    class _Mark:
        def __getattr__(self, _name):
            return lambda *a, **k: (lambda f: f)

    stub = types.ModuleType("pytest")
    stub.mark = _Mark()
    stub.fixture = lambda *a, **k: a[0] if a and callable(a[0]) else (lambda f: f)
    sys.modules["pytest"] = stub
from test_new_op_models import CASES as NEW_OP_CASES  # noqa: E402
from test_control_flow import CASES as CONTROL_FLOW_CASES  # noqa: E402
from test_models import ort_run, safe_name  # noqa: E402

# Control flow on the GPU (If/Loop/Scan layers running their bodies on the CUDA layers): the cases whose outputs have
# shapes fixed by the inputs (an early-stopping loop's scan outputs and an If whose branches differ in shape are
# data-dependent, which CUDA engines do not hold yet; sequences stay on the CPU). Each also runs with CUDA graphs.
GPU_CONTROL_FLOW = ["scan_rnn", "counted_loop", "counted_loop_const_cond", "while_loop", "gated_branches_then",
                    "gated_branches_else"]
CASES = dict(NEW_OP_CASES)
CASES.update({name: CONTROL_FLOW_CASES[name] for name in GPU_CONTROL_FLOW})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results, ok = [], True
    for name, (build, kwargs) in CASES.items():
        model, feeds = build(seed=1, **kwargs)
        d = out / name
        d.mkdir(exist_ok=True)
        path = d / "model.onnx"
        onnx.save(model, str(path))
        ref = ort_run(path, feeds)
        specs = []
        for k, v in feeds.items():
            np.save(d / f"in_{safe_name(k)}.npy", v)
            specs.append(f"{k}:{d / f'in_{safe_name(k)}.npy'}")
        for prec in ["fp32", "fp16"]:
            r = {"model": name, "precision": prec}
            flags = ["--noTF32"] if prec == "fp32" else ["--fp16"]
            # Inputs with symbolic dims get a profile fixed at the feeds' shapes (the opset-18 LLaMA's batch, seq).
            dyn = [i.name for i in model.graph.input
                   if any(d.dim_param or not d.HasField("dim_value") for d in i.type.tensor_type.shape.dim)]
            if dyn:
                spec = ",".join(f"{n}:" + "x".join(str(x) for x in feeds[n].shape) for n in dyn)
                flags += [f"--minShapes={spec}", f"--optShapes={spec}", f"--maxShapes={spec}"]
            eng = d / f"{prec}.engine"
            p = subprocess.run([a.kiln, "build", f"--onnx={path}", "--backend=cuda", f"--saveEngine={eng}",
                                f"--json={d / (prec + '_build.json')}", *flags], capture_output=True, text=True,
                               timeout=600)
            if p.returncode != 0:
                r.update(status="build failed", error=(p.stderr + p.stdout)[-800:])
                results.append(r); ok = False; print(name, prec, "BUILD FAILED", p.stderr[-300:]); continue
            try:
                rep = json.loads((d / (prec + "_build.json")).read_text())
                r["fallback"] = [f["layer"] + " (" + f["op"] + ")" for f in rep.get("fallback", [])]
            except Exception as e:  # noqa: BLE001
                r["fallback"] = f"report unreadable: {e}"
            for graphs in ([False, True] if name in GPU_CONTROL_FLOW else [False]):
                rg = dict(r, cuda_graph=graphs)
                od = d / f"out_{prec}{'_graph' if graphs else ''}"
                p = subprocess.run([a.kiln, "run", f"--loadEngine={eng}", "--loadInputs=" + ",".join(specs),
                                    f"--exportOutput={od}", *(["--useCudaGraph"] if graphs else [])],
                                   capture_output=True, text=True, timeout=600)
                if p.returncode != 0:
                    rg.update(status="run failed", error=(p.stderr + p.stdout)[-800:])
                    results.append(rg); ok = False; print(name, prec, graphs, "RUN FAILED", p.stderr[-300:]); continue
                worst = {}
                passed = True
                for oname, want in ref.items():
                    kind = want.dtype.kind
                    got = np.load(od / f"{safe_name(oname)}.npy").astype(np.float64)
                    want = want.astype(np.float64)
                    if got.shape != want.shape:
                        worst[oname] = f"shape {got.shape} vs {want.shape}"; passed = False; continue
                    if prec == "fp32" or kind in "iub":
                        err = float(np.max(np.abs(got - want) / (1 + np.abs(want)))) if want.size else 0.0
                        passed &= err <= 1e-3
                    else:
                        err = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
                        passed &= err <= 1e-2
                    worst[oname] = err
                rg.update(status="passed" if passed else "mismatch", errors=worst)
                ok &= passed
                results.append(rg)
                print(name, prec, "graphs" if graphs else "", rg["status"], worst, "fallback:", rg.get("fallback"))
    (out / "gpu_new_op_models.json").write_text(json.dumps(results, indent=1))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
