"""GPU model tests: every zoo model built for the cuda backend and checked against kiln's CPU reference run of the
unoptimized graph (the oracle) on the same inputs:
  - FP32 with TF32 off (--noTF32): elementwise within rtol 1e-3 (atol 1e-4),
  - FP32 with TF32 (the default build): relative L2 error below 1e-2 per output,
  - FP16 (--fp16, I/O in float32): relative L2 error below 1e-2 per output.
Each engine runs three times in one context and the third run's outputs are checked, so a layer whose result depends
on what an earlier run left behind fails too.
Skipped where no NVIDIA GPU is present. Also runnable without pytest (the GPU machine may lack it):
    python3 tests/models/test_gpu_models.py --kiln PATH [--models resnet50,bert] [--out DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_models import MODELS, KILN_TIMEOUT_S, prepared, safe_name, yolo_grid_units  # noqa: E402

HAVE_GPU = os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")
PRECISIONS = {"fp32": ["--noTF32"], "tf32": [], "fp16": ["--fp16"]}


def rel_l2(got, ref):
    got, ref = got.astype(np.float64), ref.astype(np.float64)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def run(args):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=KILN_TIMEOUT_S)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}\n{proc.stdout}")
    return proc


def check_model(kiln, model_dir, name, precision):
    """Builds `name` for cuda at `precision`, runs it and the reference; returns per-output metrics."""
    path, feeds, outputs = prepared(model_dir, name)
    d = model_dir / name / f"cuda_{precision}"
    d.mkdir(parents=True, exist_ok=True)
    shapes = ",".join(f"{k}:{'x'.join(map(str, v.shape))}" for k, v in feeds.items())
    specs = []
    for k, v in feeds.items():
        f = d / f"input_{safe_name(k)}.npy"
        np.save(f, v)
        specs.append(f"{k}:{f}")
    inputs = ",".join(specs)
    engine = d / "model.engine"
    run([kiln, "build", "--backend=cuda", f"--onnx={path}", f"--saveEngine={engine}", f"--shapes={shapes}",
         f"--json={d / 'build.json'}", *PRECISIONS[precision]])
    run([kiln, "run", f"--loadEngine={engine}", f"--loadInputs={inputs}", "--iterations=3",
         f"--exportOutput={d / 'engine_out'}"])
    ref_dir = model_dir / name / "reference_out"
    if not ref_dir.exists():
        run([kiln, "run", "--backend=cpu", f"--onnx={path}", f"--loadInputs={inputs}", f"--exportOutput={ref_dir}"])
    transform = yolo_grid_units if name == "yolo" else (lambda n, v: v)
    results = {}
    for o in outputs:
        got = transform(o, np.load(d / "engine_out" / f"{safe_name(o)}.npy"))
        ref = transform(o, np.load(ref_dir / f"{safe_name(o)}.npy"))
        assert got.shape == ref.shape, f"{name} {precision} output '{o}': shape {got.shape} vs {ref.shape}"
        diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        within = bool(np.all(diff <= 1e-4 + 1e-3 * np.abs(ref.astype(np.float64))))
        results[o] = {"max_abs": float(diff.max()) if diff.size else 0.0, "rel_l2": rel_l2(got, ref),
                      "within_rtol_1e-3": within}
    build = json.loads((d / "build.json").read_text())
    return results, build


def assert_ok(name, precision, results):
    for o, r in results.items():
        if precision == "fp32":
            assert r["within_rtol_1e-3"], f"{name} fp32 output '{o}': {r}"
        else:
            assert r["rel_l2"] < 1e-2, f"{name} {precision} output '{o}': {r}"


try:
    import pytest

    @pytest.mark.skipif(not HAVE_GPU, reason="no NVIDIA GPU on this machine")
    @pytest.mark.parametrize("precision", list(PRECISIONS))
    @pytest.mark.parametrize("name", list(MODELS))
    def test_gpu_engine_matches_reference(kiln, model_dir, name, precision):
        results, _ = check_model(kiln, model_dir, name, precision)
        assert_ok(name, precision, results)
except ImportError:  # the GPU machine's python may have no pytest: use main()
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--out", default=None, help="keep models and outputs here (default: a temporary folder)")
    ap.add_argument("--json", default=None, help="write the metrics here")
    a = ap.parse_args()
    model_dir = Path(a.out or tempfile.mkdtemp(prefix="kiln-gpu-models-"))
    failures, report = 0, {}
    for name in a.models.split(","):
        for precision in a.precisions.split(","):
            key = f"{name}/{precision}"
            try:
                results, build = check_model(a.kiln, model_dir, name, precision)
                assert_ok(name, precision, results)
                status = "pass"
            except Exception as e:  # report and go on
                results, build, status = {}, {}, f"FAIL: {str(e)[:2000]}"
                failures += 1
            report[key] = {"status": status, "outputs": results,
                           "build_time_s": build.get("performance", {}).get("build_time_s")}
            worst = max((r["rel_l2"] for r in results.values()), default=float("nan"))
            print(f"{key:16s} {status.splitlines()[0][:100]:100s} worst rel L2 {worst:.3g}", flush=True)
            if status != "pass":
                print(status)
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
