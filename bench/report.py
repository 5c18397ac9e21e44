#!/usr/bin/env python3
"""Results of the benchmark: rows, results.json, results.md (tables + kiln-vs-torch.compile ratios), plot.png.

Pure Python (no torch). As a program it merges results.json files and writes the reports again:
    python3 bench/report.py OUT_DIR results.json [more results.json ...]
"""
import json
import os
import re
import sys

# Display order and labels of (system, mode).
MODES = [("torch", "eager"), ("torch", "max-autotune"), ("torch", "reduce-overhead"),
         ("kiln", "engine+cudagraph"), ("kiln", "engine")]
COMPILE_MODES = ("max-autotune", "reduce-overhead")
LABELS = {"eager": "torch eager", "max-autotune": "torch.compile max-autotune",
          "reduce-overhead": "torch.compile reduce-overhead", "engine": "kiln", "engine+cudagraph": "kiln (CUDA graph)"}


def slug(text):
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    s = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")
    return s or "unknown"


def make_row(model, system, mode, precision, batch, **fields):
    row = {"model": model, "system": system, "mode": mode, "precision": precision, "batch": int(batch),
           "status": "ok", "error": None, "median_ms": None, "p99_ms": None, "items_per_s": None,
           "build_s": None, "peak_mib": None, "peak_mib_note": None, "extra": {}}
    row.update(fields)
    return row


def error_row(model, system, mode, precision, batch, error, **fields):
    return make_row(model, system, mode, precision, batch, status="error", error=str(error)[-4000:], **fields)


def row_key(r):
    return (r["model"], r["system"], r["mode"], r["precision"], int(r["batch"]))


def merge_rows(old, new):
    """Rows of `old` not measured again in `new`, then `new`: later runs replace earlier ones."""
    keys = {row_key(r) for r in new}
    return [r for r in old if row_key(r) not in keys] + list(new)


def load_results(path):
    """(meta, rows) of a results.json; ({}, []) where the file does not exist."""
    if not os.path.exists(path):
        return {}, []
    with open(path) as f:
        j = json.load(f)
    return j.get("meta", {}), j.get("rows", [])


def write_json(path, meta, rows):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=2, sort_keys=False)
        f.write("\n")


def _fmt(x, spec):
    return "—" if x is None else format(x, spec)


def _order(r):
    mode_rank = {m: i for i, (_, m) in enumerate(MODES)}
    prec_rank = {"fp32": 0, "fp16": 1}
    return (prec_rank.get(r["precision"], 9), r["batch"], mode_rank.get(r["mode"], 99), r["mode"])


def ratio_lines(rows):
    """Per (precision, batch) of one model: kiln's median latency against the best torch.compile mode's."""
    lines = []
    groups = sorted({(r["precision"], r["batch"]) for r in rows}, key=lambda k: _order({"precision": k[0],
                                                                                          "batch": k[1], "mode": ""}))
    for prec, batch in groups:
        here = [r for r in rows if r["precision"] == prec and r["batch"] == batch and r["status"] == "ok"]
        kiln = [r for r in here if r["system"] == "kiln" and r["median_ms"]]
        comp = [r for r in here if r["system"] == "torch" and r["mode"] in COMPILE_MODES and r["median_ms"]]
        head = f"- kiln vs best torch.compile, {prec} batch {batch}: "
        if not kiln or not comp:
            lines.append(head + "n/a (" + ("no kiln result" if not kiln else "no torch.compile result") + ")")
            continue
        k = min(kiln, key=lambda r: r["median_ms"])
        c = min(comp, key=lambda r: r["median_ms"])
        text = (f"{c['median_ms'] / k['median_ms']:.2f}x (median {k['median_ms']:.3f} ms vs {c['median_ms']:.3f} ms "
                f"{c['mode']})")
        if k["items_per_s"] and c["items_per_s"]:
            text += f"; throughput {k['items_per_s'] / c['items_per_s']:.2f}x"
        lines.append(head + text + " — above 1 means kiln is faster")
    return lines


def utilization(row, floors):
    """How close a row runs to the card's measured floors: (fraction of the FP16 tensor throughput, fraction of the
    memory bandwidth). The first is the model's FLOPs per second against the fastest FP16 GEMM measured on the card; the
    second its least possible memory traffic (weights, input and output, each once) per second against the fastest
    device copy. None where a number is missing."""
    if not floors or row.get("status") != "ok" or not row.get("median_ms"):
        return None, None
    seconds = row["median_ms"] / 1000.0
    tflops, gbs = floors.get("fp16_tflops"), floors.get("bandwidth_gbs")
    flops, traffic = row.get("flops"), row.get("min_bytes")
    compute = flops / seconds / (tflops * 1e12) if flops and tflops else None
    memory = traffic / seconds / (gbs * 1e9) if traffic and gbs else None
    return compute, memory


def _pct(x):
    return "—" if x is None else f"{100 * x:.1f}%"


def header_lines(meta):
    floors = meta.get("floors") or {}
    floor_line = ("- the card's floors, measured in this run: FP16 tensor throughput "
                  f"{_fmt(floors.get('fp16_tflops'), '.0f')} TFLOP/s (the fastest of large FP16 GEMMs), memory "
                  f"bandwidth {_fmt(floors.get('bandwidth_gbs'), ',.0f')} GB/s (device copies, read + write); "
                  "'% FP16 peak' is the model's FLOPs per second against the first, '% BW floor' its least memory "
                  "traffic (weights, input, output once) per second against the second")
    return [f"- card: **{meta.get('card', 'unknown')}**",
            f"- torch {meta.get('torch', '?')}, CUDA {meta.get('cuda', '?')}, cuDNN {meta.get('cudnn', '?')}, "
            f"kiln commit {meta.get('kiln_commit', 'unknown')}, date {meta.get('date', '?')}",
            f"- torch fp32 rows with TF32 allowed (matmul {meta.get('torch_tf32_matmul', '?')}, cuDNN "
            f"{meta.get('torch_tf32_cudnn', '?')}), as kiln's default; torch timed with CUDA events, inputs already on "
            f"the GPU; kiln rows are `--noDataTransfers` (latency with transfers in results.json)",
            f"- torch: {meta.get('warmup', '?')} warm-up + {meta.get('iterations', '?')} timed iterations; kiln bench: "
            f"{meta.get('kiln_bench', '?')}", floor_line]


def run_line(rows):
    """Which runs measured these rows (a results.json keeps the rows of earlier runs): ratios compare rows of one
    run only where this names one run."""
    runs = sorted({(r.get("measured_at") or "an earlier run", r.get("kiln_commit") or "?") for r in rows})
    if len(runs) == 1:
        return f"- measured in one run: {runs[0][0]} (kiln {runs[0][1]})"
    return "- measured in several runs: " + "; ".join(f"{d} (kiln {c})" for d, c in runs)


def markdown(meta, rows):
    out = [f"# kiln benchmark — {meta.get('card', 'unknown')}", ""] + header_lines(meta) + [""]
    models = list(dict.fromkeys(r["model"] for r in rows))
    for model in models:
        mr = sorted((r for r in rows if r["model"] == model), key=_order)
        work = next((r for r in mr if r.get("flops")), None)
        out += [f"## {model}", ""]
        if work:
            out += [f"- work at batch {work['batch']} ({work['precision']}): {work['flops'] / 1e9:,.1f} GFLOP, least "
                    f"memory traffic {work['min_bytes'] / 2**20:,.1f} MiB", ""]
        out += ["| system / mode | precision | batch | median ms | p99 ms | items/s | build/compile s | peak MiB | "
                "% FP16 peak | % BW floor |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        errors = []
        for r in mr:
            label = LABELS.get(r["mode"], f"{r['system']} {r['mode']}")
            if r["status"] != "ok":
                out.append(f"| {label} | {r['precision']} | {r['batch']} | error | — | — | — | — | — | — |")
                lines = (r.get("error") or "").strip().splitlines() or ["(no message)"]
                errors.append(f"- {label} {r['precision']} batch {r['batch']}: {lines[0][:300]}")
                continue
            peak = _fmt(r["peak_mib"], ",.0f") + ("*" if r.get("peak_mib_note") and r["peak_mib"] is not None else "")
            compute, memory = utilization(r, meta.get("floors"))
            out.append(f"| {label} | {r['precision']} | {r['batch']} | {_fmt(r['median_ms'], '.3f')} | "
                       f"{_fmt(r['p99_ms'], '.3f')} | {_fmt(r['items_per_s'], ',.1f')} | {_fmt(r['build_s'], '.1f')} "
                       f"| {peak} | {_pct(compute)} | {_pct(memory)} |")
        out += [""] + ratio_lines(mr) + [run_line(mr)]
        if any(r.get("peak_mib_note") for r in mr if r["status"] == "ok"):
            out.append("- \\* kiln peak MiB approximated as the build report's activation arena + engine size")
        if errors:
            out += ["", "Errors:"] + errors
        out.append("")
    return "\n".join(out)


def plot(meta, rows, path):
    """Throughput at each model's largest batch and latency at batch 1, grouped by system. Returns a message."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: plot.png skipped (results.json and results.md are complete)"
    ok = [r for r in rows if r["status"] == "ok"]
    models = list(dict.fromkeys(r["model"] for r in ok))
    if not models:
        return "no successful rows: plot.png skipped"
    series = sorted({(r["mode"], r["precision"]) for r in ok}, key=lambda s: _order({"precision": s[1], "batch": 0,
                                                                                      "mode": s[0]}))
    largest = {m: max(r["batch"] for r in ok if r["model"] == m) for m in models}
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.6 * len(models) * max(1, len(series)) / 3), 9))
    width = 0.8 / max(1, len(series))
    panels = [(axes[0], "items_per_s", lambda r: r["batch"] == largest[r["model"]] and r["batch"] > 1,
               "throughput at the large batch (items/s, higher is better)"),
              (axes[1], "median_ms", lambda r: r["batch"] == 1, "median latency at batch 1 (ms, lower is better)")]
    for ax, field, keep, title in panels:
        for i, (mode, prec) in enumerate(series):
            vals = []
            for m in models:
                hit = [r for r in ok if r["model"] == m and r["mode"] == mode and r["precision"] == prec and keep(r)]
                vals.append(hit[0][field] if hit and hit[0][field] else 0)
            ax.bar([j + (i - (len(series) - 1) / 2) * width for j in range(len(models))], vals, width,
                   label=f"{LABELS.get(mode, mode)} {prec}")
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels([f"{m}\n(batch {largest[m]})" if field == "items_per_s" else m for m in models])
        ax.set_yscale("log")
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle(f"kiln vs PyTorch on {meta.get('card', 'unknown')} (torch {meta.get('torch', '?')}, "
                 f"kiln {meta.get('kiln_commit', 'unknown')})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"wrote {path}"


def write_all(out_dir, meta, rows):
    """results.json, results.md, plot.png in out_dir; returns the markdown."""
    os.makedirs(out_dir, exist_ok=True)
    write_json(os.path.join(out_dir, "results.json"), meta, rows)
    md = markdown(meta, rows)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(md + "\n")
    print(plot(meta, rows, os.path.join(out_dir, "plot.png")), file=sys.stderr)
    return md


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    meta, rows = {}, []
    for path in argv[1:]:
        m, r = load_results(path)
        meta = {**meta, **m}
        rows = merge_rows(rows, r)
    print(write_all(argv[0], meta, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
