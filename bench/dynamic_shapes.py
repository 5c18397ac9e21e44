#!/usr/bin/env python3
"""Dynamic-shape engines against static ones (issue 17 item 3): for each zoo model, one engine built with a
min/opt/max profile and one static engine per timed shape, both timed by `kiln bench` in this one run (CUDA graphs on
the cuda backend), and the ratio dynamic / static per shape, with each build's time. Prints a table and writes JSON.

Profiles (batch x sequence for text models, batch for vision models):
  text:   1x16 / 16x128 / 32x256 (the LLaMA-style decoder 1x16 / 2x256 / 4x512), timed at opt and one shape off it
  vision: 1 / 32 / 64, timed at 8, 32 and 64

  python3 bench/dynamic_shapes.py --kiln .bundle/bin/kiln --models bert_base,resnet50 --out dyn.json
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
import zoo  # noqa: E402


def profile_for(spec):
    """(min, opt, max) leading dims and the leading dims to time at."""
    if spec.kind == "text":
        if spec.name == "llama_decoder":
            return ((1, 16), (2, 256), (4, 512)), [(2, 256), (1, 77)]
        return ((1, 16), (16, 128), (32, 256)), [(16, 128), (16, 77)]
    return ((1,), (32,), (64,)), [(8,), (32,), (64,)]


def shape_arg(spec, lead):
    rest = tuple(spec.sample_shape)[len(lead) - 1:]
    return f"{spec.input_name}:" + "x".join(str(d) for d in tuple(lead) + rest)


def run(argv, timeout):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:2])} failed ({r.returncode}): {(r.stderr or r.stdout)[-400:]}")
    return r


def bench(kiln, engine, shapes, backend, duration, work):
    out = os.path.join(work, "bench.json")
    argv = [kiln, "bench", f"--loadEngine={engine}", f"--shapes={shapes}", "--noDataTransfers",
            f"--duration={duration:g}", f"--json={out}"] + (["--useCudaGraph"] if backend == "cuda" else [])
    run(argv, 300)
    with open(out) as f:
        return json.load(f)["inference"]["compute_ms"]["median"]


def build(argv, work, timeout, fields=None):
    """Runs a kiln build; returns its build time (s) from the JSON report (and copies the report's `optimization`
    counters named in `fields` into that dict)."""
    report = os.path.join(work, "build.json")
    run(argv + [f"--json={report}"], timeout)
    with open(report) as f:
        r = json.load(f)
    if fields is not None:
        for k in list(fields):
            fields[k] = r.get("optimization", {}).get(k)
    return r.get("performance", {}).get("build_time_s")


def measure(kiln, spec, onnx, backend, args, work):
    (lo, opt, hi), timed = profile_for(spec)
    common = [kiln, "build", f"--onnx={onnx}", f"--backend={backend}"] + (["--fp16"] if args.fp16 else [])
    dyn = os.path.join(work, "dyn.engine")
    counters = {"tactics_across_profile": None, "tactic_variants": None}
    dyn_s = build(common + [f"--minShapes={shape_arg(spec, lo)}", f"--optShapes={shape_arg(spec, opt)}",
                            f"--maxShapes={shape_arg(spec, hi)}", f"--saveEngine={dyn}"], work, args.timeout, counters)
    rows = []
    for lead in timed:
        shapes = shape_arg(spec, lead)
        st = os.path.join(work, "static.engine")
        st_s = build(common + [f"--shapes={shapes}", f"--saveEngine={st}"], work, args.timeout)
        s_ms = bench(kiln, st, shapes, backend, args.duration, work)
        d_ms = bench(kiln, dyn, shapes, backend, args.duration, work)
        rows.append({"model": spec.name, "shape": shapes, "profile": [shape_arg(spec, p) for p in (lo, opt, hi)],
                     "static_ms": s_ms, "dynamic_ms": d_ms, "ratio": d_ms / s_ms if s_ms > 0 else None,
                     "static_build_s": st_s, "dynamic_build_s": dyn_s, **counters})
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kiln", default=os.environ.get("KILN", os.path.join(BENCH_DIR, "..", "build", "bin", "kiln")))
    p.add_argument("--models", required=True, help=f"comma list of {', '.join(zoo.SPECS)}")
    p.add_argument("--models-dir", default=os.path.join(BENCH_DIR, "models"))
    p.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--fp32", dest="fp16", action="store_false", help="float32 engines (default FP16)")
    p.add_argument("--duration", type=float, default=2, help="kiln bench --duration, seconds")
    p.add_argument("--timeout", type=float, default=300, help="seconds per build")
    p.add_argument("--out", default="dynamic_shapes.json")
    args = p.parse_args(argv)
    rows, failures = [], []
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            spec = zoo.SPECS.get(name)
            if spec is None:
                p.error(f"unknown model {name}")
            onnx = os.path.join(args.models_dir, f"{name}.onnx")
            try:
                rows += measure(args.kiln, spec, onnx, args.backend, args, work)
            except (RuntimeError, subprocess.TimeoutExpired, OSError, KeyError) as e:
                failures.append({"model": name, "error": str(e)})
    print(f"{'model':<20} {'shape':<28} {'static ms':>10} {'dynamic ms':>11} {'dyn/static':>10} {'build s (st/dyn)':>17}")
    for r in rows:
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
        builds = f"{r['static_build_s'] or 0:.1f} / {r['dynamic_build_s'] or 0:.1f}"
        print(f"{r['model']:<20} {r['shape']:<28} {r['static_ms']:>10.4f} {r['dynamic_ms']:>11.4f} {ratio:>10} "
              f"{builds:>17}")
    for f in failures:
        print(f"{f['model']}: FAILED: {f['error']}")
    with open(args.out, "w") as f:
        json.dump({"backend": args.backend, "precision": "fp16" if args.fp16 else "fp32", "rows": rows,
                   "failures": failures}, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
