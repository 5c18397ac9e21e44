#!/usr/bin/env python3
"""Two kiln binaries side by side on the same GPU, in one run: is B within X% of A?

For each model/batch (FP16 by default) both binaries build an engine from the same ONNX file with ONE shared timing
cache (A builds first and fills it, B reads it), so both engines get the same tactics and the comparison measures
the code, not the tuner's noise. Then the benches alternate A, B, A, B ... (--rounds each) with CUDA graphs at batch 1
and no transfers, and the median of each binary's per-round medians is compared.

    python3 bench/ab_compare.py --a old/kiln --b .bundle/bin/kiln --models resnet50,bert_base --json ab.json

Models come from bench/export_zoo.py (bench/models/<name>.onnx). Prints a table; writes JSON.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402
from run_bench import _run, kiln_env  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="baseline kiln binary")
    p.add_argument("--b", required=True, help="candidate kiln binary")
    p.add_argument("--models", default="resnet50,bert_base")
    p.add_argument("--batches", default="", help="comma list for every model (default: 1 and the model's large batch)")
    p.add_argument("--precision", default="fp16", choices=["fp16", "fp32"])
    p.add_argument("--rounds", type=int, default=3, help="benches per binary, alternating")
    p.add_argument("--duration", type=float, default=3, help="kiln bench --duration, seconds")
    p.add_argument("--models-dir", default=os.path.join(BENCH_DIR, "models"))
    p.add_argument("--json", default="")
    p.add_argument("--timeout", type=float, default=600)
    return p.parse_args(argv)


def bench_once(kiln, engine, shapes, batch, duration, work, tag, timeout):
    out = os.path.join(work, f"{tag}.json")
    argv = [kiln, "bench", f"--loadEngine={engine}", shapes, "--iterations=200", f"--duration={duration:g}",
            "--warmUp=500", "--percentile=50,99", f"--json={out}", "--noDataTransfers"]
    if batch == 1:
        argv.append("--useCudaGraph")
    _run(argv, timeout, kiln_env(kiln))
    with open(out) as f:
        return json.load(f)["inference"]["latency_ms"]["median"]


def main(argv=None):
    args = parse_args(argv)
    rows = []
    work = tempfile.mkdtemp(prefix="kiln-ab-")
    for name in [m for m in args.models.split(",") if m]:
        spec = zoo.SPECS[name]
        onnx = os.path.join(args.models_dir, f"{name}.onnx")
        batches = [int(b) for b in args.batches.split(",") if b] or [1, spec.large_batch]
        for batch in batches:
            shapes = f"--shapes={spec.kiln_shapes(batch)}"
            cache = os.path.join(work, f"{name}_b{batch}.cache")
            engines = {}
            for tag, kiln in (("a", args.a), ("b", args.b)):
                engines[tag] = os.path.join(work, f"{name}_b{batch}_{tag}.engine")
                build = [kiln, "build", f"--onnx={onnx}", f"--saveEngine={engines[tag]}", shapes,
                         f"--timingCacheFile={cache}"] + (["--fp16"] if args.precision == "fp16" else [])
                _run(build, args.timeout, kiln_env(kiln))
            times = {"a": [], "b": []}
            for r in range(args.rounds):
                for tag, kiln in (("a", args.a), ("b", args.b)):
                    times[tag].append(bench_once(kiln, engines[tag], shapes, batch, args.duration, work,
                                                 f"{name}_b{batch}_{tag}_{r}", args.timeout))
            a, b = statistics.median(times["a"]), statistics.median(times["b"])
            rows.append({"model": name, "batch": batch, "precision": args.precision, "a_median_ms": a,
                         "b_median_ms": b, "b_over_a": b / a, "a_rounds_ms": times["a"], "b_rounds_ms": times["b"]})
            print(f"{name:12s} b{batch:<3d} A {a:8.4f} ms  B {b:8.4f} ms  B/A {b / a:6.3f}", flush=True)
    print("\n| model | batch | A median ms | B median ms | B/A |\n| --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['model']} | {r['batch']} | {r['a_median_ms']:.4f} | {r['b_median_ms']:.4f} | {r['b_over_a']:.3f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"a": args.a, "b": args.b, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
