#!/usr/bin/env python3
"""Where a kiln engine's GPU time goes: builds one model (or takes an engine), runs `kiln bench --separateProfileRun
--exportProfile`, joins the per-layer times with `kiln inspect` (op type, precision, tactic), and prints the time per
op type and the slowest layers.

    python3 bench/profile_layers.py --kiln .bundle/bin/kiln --onnx bench/models/resnet50.onnx \
        --shapes input:64x3x224x224 [--fp16] [--top 25] [--json OUT.json]

Environment variables reach kiln unchanged (KILN_LAYOUT=..., for A/B runs). Needs a GPU.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def summarize(profile, layer_info, top=25):
    """(per op type [(op, precision, ms)], slowest layers [(ms, percent, op, precision, tactic, name)], total ms)."""
    info = {layer["name"]: layer for layer in layer_info.get("layers", [])}
    layers = [p for p in profile if isinstance(p, dict) and "averageMs" in p]
    by_type = {}
    for p in layers:
        i = info.get(p["name"], {})
        key = (i.get("op_type", "?"), i.get("precision", "?"))
        by_type[key] = by_type.get(key, 0.0) + p["averageMs"]
    types = sorted(((op, prec, ms) for (op, prec), ms in by_type.items()), key=lambda t: -t[2])
    slow = [(p["averageMs"], p.get("percentage", 0.0), info.get(p["name"], {}).get("op_type", "?"),
             info.get(p["name"], {}).get("precision", "?"), info.get(p["name"], {}).get("tactic", ""), p["name"])
            for p in sorted(layers, key=lambda p: -p["averageMs"])[:top]]
    return types, slow, sum(p["averageMs"] for p in layers)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kiln", required=True)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--onnx")
    src.add_argument("--loadEngine")
    p.add_argument("--shapes", required=True, help="name:NxCxHxW[,...], as kiln's --shapes")
    p.add_argument("--fp16", action="store_true")
    p.add_argument("--timingCacheFile")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--json", help="write the joined profile here")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        engine = a.loadEngine or os.path.join(work, "model.engine")
        if a.onnx:
            subprocess.run([a.kiln, "build", f"--onnx={a.onnx}", f"--saveEngine={engine}", f"--shapes={a.shapes}",
                            "--profilingVerbosity=detailed"]
                           + (["--fp16"] if a.fp16 else [])
                           + ([f"--timingCacheFile={a.timingCacheFile}"] if a.timingCacheFile else []),
                           check=True, capture_output=True)
        prof, insp = os.path.join(work, "profile.json"), os.path.join(work, "inspect.json")
        subprocess.run([a.kiln, "bench", f"--loadEngine={engine}", f"--shapes={a.shapes}", "--noDataTransfers",
                        "--duration=2", "--separateProfileRun", f"--exportProfile={prof}"], check=True,
                       capture_output=True)
        subprocess.run([a.kiln, "inspect", f"--loadEngine={engine}", f"--json={insp}"], check=True, capture_output=True)
        with open(prof) as f, open(insp) as g:
            profile, info = json.load(f), json.load(g)
    types, slow, total = summarize(profile, info, a.top)
    print(f"{len(profile)} layers, sum of per-layer averages {total:.3f} ms")
    for op, prec, ms in types:
        print(f"  {ms * 1000:9.1f} us  {op} {prec}")
    print("slowest layers:")
    for ms, pct, op, prec, tactic, name in slow:
        print(f"  {ms * 1000:8.1f} us {pct:5.1f}%  {op} {prec} [{tactic[:50]}] {name[-60:]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"total_ms": total, "by_type": types, "slowest": slow}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
