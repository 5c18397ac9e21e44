#!/usr/bin/env python3
"""Timing-cache check: builds each model twice with one fresh timing cache (a cold build, then a rebuild that should
take every tuned tactic from the cache), and reports both build times, their ratio, the build phases and whether
every layer got the same tactic.

    python3 bench/rebuild_check.py --kiln .bundle/bin/kiln [--models resnet50,bert_base] [--precision fp16]
                                   [--json OUT.json]

Models come from bench/models (bench/export_zoo.py), at each model's large batch. Needs a GPU (cuda backend).
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


def layer_tactics(inspect_report):
    """[(layer name, tactic)] of a `kiln inspect --json` report of an engine."""
    return [(layer.get("name"), layer.get("tactic")) for layer in inspect_report.get("layers", [])]


def phases(build_report):
    """{phase: seconds} of a `kiln build --json` report (performance.phases_s)."""
    return {p["phase"]: round(p["s"], 3) for p in build_report.get("performance", {}).get("phases_s", [])}


def compare(cold, rebuild):
    """The summary of two builds: each is {"build": build report, "inspect": inspect report}."""
    ta, tb = layer_tactics(cold["inspect"]), layer_tactics(rebuild["inspect"])
    cold_s = cold["build"]["performance"]["build_time_s"]
    re_s = rebuild["build"]["performance"]["build_time_s"]
    return {"cold_s": cold_s, "rebuild_s": re_s, "ratio": re_s / cold_s if cold_s else None,
            "cold_tuning_s": cold["build"].get("optimization", {}).get("tuning_time_s"),
            "rebuild_tuning_s": rebuild["build"].get("optimization", {}).get("tuning_time_s"),
            "rebuild_cache_hits": rebuild["build"].get("optimization", {}).get("timing_cache_hits"),
            "cold_phases": phases(cold["build"]), "rebuild_phases": phases(rebuild["build"]),
            "layers": len(ta), "same_tactics": bool(ta) and ta == tb,
            "differing": [[list(a), list(b)] for a, b in zip(ta, tb) if a != b][:10]}


def build_twice(kiln, onnx, shapes, precision, work):
    cache = os.path.join(work, "timing.cache")
    out = {}
    for tag in ("cold", "rebuild"):
        engine, bj, ij = (os.path.join(work, f"{tag}.{ext}") for ext in ("engine", "build.json", "inspect.json"))
        subprocess.run([kiln, "build", f"--onnx={onnx}", f"--saveEngine={engine}", f"--shapes={shapes}",
                        f"--timingCacheFile={cache}", f"--json={bj}"] + (["--fp16"] if precision == "fp16" else []),
                       check=True, capture_output=True)
        subprocess.run([kiln, "inspect", f"--loadEngine={engine}", f"--json={ij}"], check=True, capture_output=True)
        with open(bj) as b, open(ij) as i:
            out[tag] = {"build": json.load(b), "inspect": json.load(i)}
    return compare(out["cold"], out["rebuild"])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kiln", required=True)
    p.add_argument("--models", default="resnet50,bert_base")
    p.add_argument("--models-dir", default=os.path.join(BENCH_DIR, "models"))
    p.add_argument("--precision", default="fp16", choices=["fp32", "fp16"])
    p.add_argument("--json", help="write the results here")
    a = p.parse_args(argv)
    results = {}
    for m in zoo.parse_models(a.models):
        spec = zoo.SPECS[m]
        onnx = os.path.join(a.models_dir, f"{m}.onnx")
        if not os.path.exists(onnx):
            sys.exit(f"{onnx} not found: run bench/export_zoo.py first")
        with tempfile.TemporaryDirectory() as work:
            r = build_twice(a.kiln, onnx, spec.kiln_shapes(spec.large_batch), a.precision, work)
        results[m] = r
        print(f"{m:16s} cold {r['cold_s']:.2f} s, rebuild {r['rebuild_s']:.2f} s (ratio {r['ratio']:.3f}), "
              f"{r['layers']} layers, same tactics: {r['same_tactics']}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all(r["same_tactics"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
