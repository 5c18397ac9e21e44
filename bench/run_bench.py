#!/usr/bin/env python3
"""Benchmarks the zoo on one GPU, in one process: PyTorch eager, torch.compile (max-autotune, reduce-overhead) and
kiln (the CLI, as a subprocess), at fp32 (TF32 allowed everywhere) and fp16, at batch 1 and a large batch.

    python3 bench/run_bench.py --kiln build/bin/kiln [--models resnet50,bert_base] [--modes eager,kiln] ...

Writes <results-dir>/<card-slug>/results.json, results.md, plot.png and prints the tables. Rows of earlier runs in
that results.json are kept unless measured again (--fresh starts over), so the zoo can be run a few models at a time.
A configuration that fails is recorded with its error and the run goes on.
"""
import argparse
import contextlib
import datetime
import gc
import json
import math
import os
import signal
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
import report  # noqa: E402
import zoo  # noqa: E402

ALL_MODES = ["eager", "max-autotune", "reduce-overhead", "kiln"]
CUDNN_LIB_DIRS = ["/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="all", help=f"comma list or 'all' ({', '.join(zoo.SPECS)})")
    p.add_argument("--models-dir", default=os.path.join(BENCH_DIR, "models"), help="where export_zoo.py wrote .onnx")
    p.add_argument("--batches", default=None, help="comma list for every model (default: 1 and 64 vision / 32 text)")
    p.add_argument("--precisions", default="fp32,fp16", help="comma list of fp32, fp16")
    p.add_argument("--modes", default=",".join(ALL_MODES), help=f"comma list of {', '.join(ALL_MODES)}")
    p.add_argument("--skip-torch-compile", action="store_true", help="drop max-autotune and reduce-overhead")
    p.add_argument("--skip-kiln", action="store_true", help="drop kiln")
    p.add_argument("--only-kiln", action="store_true", help="kiln only")
    p.add_argument("--timeout", type=float, default=480, help="seconds per configuration (default 480)")
    p.add_argument("--iterations", type=int, default=100, help="timed torch iterations (default 100)")
    p.add_argument("--warmup", type=int, default=20, help="torch warm-up iterations (default 20)")
    p.add_argument("--kiln", default=os.environ.get("KILN", os.path.join(REPO, "build", "bin", "kiln")),
                   help="the kiln binary (default $KILN or build/bin/kiln)")
    p.add_argument("--kiln-iterations", type=int, default=200)
    p.add_argument("--kiln-duration", type=float, default=3, help="kiln bench --duration, seconds")
    p.add_argument("--kiln-warmup-ms", type=float, default=500, help="kiln bench --warmUp, ms")
    p.add_argument("--kiln-aux-streams", type=int, default=0,
                   help="kiln build --maxAuxStreams (default 0): independent branches on auxiliary streams")
    p.add_argument("--results-dir", default=os.path.join(BENCH_DIR, "results"))
    p.add_argument("--work-dir", default=os.path.join(BENCH_DIR, "work"),
                   help="per card: kiln's timing caches and JSON reports, engines (deleted after use)")
    p.add_argument("--keep-engines", action="store_true")
    p.add_argument("--fresh", action="store_true", help="ignore the rows of an earlier results.json")
    p.add_argument("--fresh-timing-cache", action="store_true", help="delete kiln's timing caches first (cold builds)")
    a = p.parse_args(argv)
    a.models = zoo.parse_models(a.models)
    try:
        a.batches = [int(b) for b in a.batches.split(",")] if a.batches else None
    except ValueError:
        p.error(f"--batches: '{a.batches}' is not a comma list of integers")
    if a.batches is not None and any(b < 1 for b in a.batches):
        p.error("--batches must be >= 1")
    a.precisions = [x.strip() for x in a.precisions.split(",") if x.strip()]
    if bad := [x for x in a.precisions if x not in ("fp32", "fp16")]:
        p.error(f"--precisions: unknown {', '.join(bad)} (fp32, fp16)")
    modes = [x.strip() for x in a.modes.split(",") if x.strip()]
    if bad := [x for x in modes if x not in ALL_MODES]:
        p.error(f"--modes: unknown {', '.join(bad)} ({', '.join(ALL_MODES)})")
    if a.skip_torch_compile:
        modes = [m for m in modes if m not in report.COMPILE_MODES]
    if a.skip_kiln:
        modes = [m for m in modes if m != "kiln"]
    if a.only_kiln:
        modes = ["kiln"]
    if not modes:
        p.error("no mode left to run")
    if not 0 <= a.kiln_aux_streams <= 64:
        p.error("--kiln-aux-streams must be 0..64")
    a.modes = modes
    return a


def plan(args):
    """(model, mode, precision, batch) in run order: per model, kiln first (before torch holds GPU memory)."""
    out = []
    for m in args.models:
        batches = args.batches or [1, zoo.SPECS[m].large_batch]
        order = (["kiln"] if "kiln" in args.modes else []) + [x for x in args.modes if x != "kiln"]
        for mode in order:
            for prec in args.precisions:
                for b in batches:
                    out.append((m, mode, prec, b))
    return out


# ---- kiln ----

def kiln_commands(kiln, spec, onnx, engine, precision, batch, cache, build_json, run_json, args, transfers):
    """(build argv, bench argv) of one configuration. CUDA graphs at every batch, as torch.compile's reduce-overhead
    mode replays graphs at every batch (issue 17's table was measured this way)."""
    shapes = f"--shapes={spec.kiln_shapes(batch)}"
    build = [kiln, "build", f"--onnx={onnx}", f"--saveEngine={engine}", shapes, f"--timingCacheFile={cache}",
             f"--json={build_json}"] + (["--fp16"] if precision == "fp16" else []) + \
        ([f"--maxAuxStreams={args.kiln_aux_streams}"] if args.kiln_aux_streams > 0 else [])
    bench = [kiln, "bench", f"--loadEngine={engine}", shapes, f"--iterations={args.kiln_iterations}",
             f"--duration={args.kiln_duration:g}", f"--warmUp={args.kiln_warmup_ms:g}", "--percentile=50,99",
             f"--json={run_json}", "--useCudaGraph"] + \
        ([] if transfers else ["--noDataTransfers"])
    return build, bench


def kiln_fields(build, run_gpu, run_xfer, batch):
    """Row fields from kiln's build report and its two bench reports (--noDataTransfers, and with transfers)."""
    inf = run_gpu["inference"]
    perf, mem, opt = build.get("performance", {}), build.get("memory", {}), build.get("optimization", {})
    engine_bytes = perf.get("engine_size_mb", 0) * 2**20
    fields = {"median_ms": inf["latency_ms"]["median"], "p99_ms": inf["latency_ms"].get("p99"),
              "items_per_s": inf["throughput_qps"] * batch, "build_s": perf.get("build_time_s"),
              "peak_mib": (mem.get("arena_bytes", 0) + engine_bytes) / 2**20,
              "peak_mib_note": "approximation: activation arena + engine size (no nvidia-smi)",
              "extra": {"compute_ms_median": inf["compute_ms"]["median"], "compute_ms_p99": inf["compute_ms"].get("p99"),
                        "cuda_graph": inf.get("cuda_graph"), "inferences": inf.get("inferences"),
                        "backend": inf.get("backend"), "tf32": build.get("configuration", {}).get("tf32"),
                        "engine_mib": perf.get("engine_size_mb"), "layers_after": opt.get("layers_after"),
                        "timing_cache_hits": opt.get("timing_cache_hits"), "tuning_time_s": opt.get("tuning_time_s")}}
    if run_xfer is not None:
        x = run_xfer["inference"]
        fields["extra"].update({"with_transfers_median_ms": x["latency_ms"]["median"],
                                "with_transfers_p99_ms": x["latency_ms"].get("p99"),
                                "with_transfers_items_per_s": x["throughput_qps"] * batch})
    return fields


def kiln_env(kiln):
    env = dict(os.environ)
    extra = [d for d in CUDNN_LIB_DIRS + [os.path.join(os.path.dirname(os.path.abspath(kiln)), "..", "lib")]
             if os.path.isdir(d)]
    env["LD_LIBRARY_PATH"] = ":".join(extra + [p for p in [env.get("LD_LIBRARY_PATH")] if p])
    return env


def _run(argv, timeout, env):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {timeout:g} s: {' '.join(argv)}") from None
    if p.returncode != 0:
        said = [ln for ln in (p.stdout + "\n" + p.stderr).splitlines() if ln.strip()] or ["(no output)"]
        raise RuntimeError(f"kiln {argv[1]} exit {p.returncode}: {said[-1]}\n$ {' '.join(argv)}\n"
                           + "\n".join(said[-40:]))


def measure_kiln(spec, precision, batch, args, work):
    """One kiln row; `work` (per card) holds the engine, the timing cache and kiln's JSON reports."""
    mode = "engine+cudagraph" if batch == 1 else "engine"
    onnx = os.path.join(args.models_dir, f"{spec.name}.onnx")
    tag = f"{spec.name}_{precision}_b{batch}"
    engine = os.path.join(work, tag + ".engine")
    files = {k: os.path.join(work, f"{tag}_{k}.json") for k in ("build", "run", "run_transfers")}
    try:
        if not os.path.exists(args.kiln):
            raise RuntimeError(f"kiln binary not found at {args.kiln} (give --kiln or $KILN)")
        if not os.path.exists(onnx):
            raise RuntimeError(f"{onnx} not found: run bench/export_zoo.py first")
        os.makedirs(work, exist_ok=True)
        cache = os.path.join(work, f"timing_cache_{spec.name}.json")
        env = kiln_env(args.kiln)
        build, bench = kiln_commands(args.kiln, spec, onnx, engine, precision, batch, cache, files["build"],
                                     files["run"], args, transfers=False)
        _run(build, args.timeout, env)
        _run(bench, args.timeout, env)
        _, bench_x = kiln_commands(args.kiln, spec, onnx, engine, precision, batch, cache, files["build"],
                                   files["run_transfers"], args, transfers=True)
        _run(bench_x, args.timeout, env)
        reports = {}
        for k, path in files.items():
            with open(path) as f:
                reports[k] = json.load(f)
        fields = kiln_fields(reports["build"], reports["run"], reports["run_transfers"], batch)
        fields["extra"]["commands"] = [" ".join(build), " ".join(bench), " ".join(bench_x)]
        return report.make_row(spec.name, "kiln", mode, precision, batch, **fields)
    except Exception as e:  # noqa: BLE001 - recorded in the results, the run goes on
        return report.error_row(spec.name, "kiln", mode, precision, batch, f"{type(e).__name__}: {e}")
    finally:
        if not args.keep_engines and os.path.exists(engine):
            os.remove(engine)


# ---- PyTorch ----

@contextlib.contextmanager
def time_limit(seconds):
    """Raises TimeoutError in the main thread after `seconds` (SIGALRM); no limit for 0 or None."""
    if not seconds:
        yield
        return

    def on_alarm(signum, frame):
        raise TimeoutError(f"timed out after {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def percentile(values, p):
    """Nearest-rank percentile, as kiln computes it."""
    v = sorted(values)
    idx = math.ceil(p / 100.0 * len(v))
    return v[min(len(v) - 1, max(idx - 1, 0))]


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def measure_torch(spec, mode, precision, batch, args):
    import torch

    model = fn = x = None
    try:
        torch._dynamo.reset()
        gc.collect()
        torch.cuda.empty_cache()
        with time_limit(args.timeout), torch.no_grad():
            model = zoo.build_model(spec.name, attn_impl="sdpa").cuda()
            attn_impl = getattr(model, "attn_impl", None)
            dtype = torch.float16 if precision == "fp16" else torch.float32
            if precision == "fp16":
                model = model.half()
            x = zoo.make_input(spec, batch, "cuda", dtype)
            fn = model if mode == "eager" else torch.compile(model, mode=mode, dynamic=False)
            t0 = time.perf_counter()
            for _ in range(1 if mode == "eager" else 3):  # compiling, and reduce-overhead's graph recording
                fn(x)
            torch.cuda.synchronize()
            first_s = time.perf_counter() - t0
            for _ in range(args.warmup):
                fn(x)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()  # steady state: weights + activations (+ CUDA graph pools)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            times = []
            for _ in range(args.iterations):
                start.record()
                fn(x)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            peak = torch.cuda.max_memory_allocated() / 2**20
        med = median(times)
        return report.make_row(spec.name, "torch", mode, precision, batch, median_ms=med, p99_ms=percentile(times, 99),
                               items_per_s=batch * 1000.0 / med, build_s=None if mode == "eager" else first_s,
                               peak_mib=peak, extra={"first_calls_s": first_s, "attn_impl": attn_impl})
    except Exception as e:  # noqa: BLE001 - recorded in the results, the run goes on
        return report.error_row(spec.name, "torch", mode, precision, batch, f"{type(e).__name__}: {e}")
    finally:
        del model, fn, x
        gc.collect()
        try:
            torch._dynamo.reset()
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - a broken CUDA context shows in the next rows' errors
            pass


def measure_floors():
    """The card's floors, measured: FP16 tensor throughput (the fastest of a few large FP16 GEMMs, TFLOP/s) and memory
    bandwidth (the fastest large device-to-device copy, read + write bytes, GB/s). None without a GPU."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        best_tflops = 0.0
        for n in (8192, 12288):
            a = torch.randn(n, n, device="cuda", dtype=torch.float16)
            b = torch.randn(n, n, device="cuda", dtype=torch.float16)
            for _ in range(3):
                torch.matmul(a, b)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for _ in range(10):
                start.record()
                torch.matmul(a, b)
                end.record()
                end.synchronize()
                best_tflops = max(best_tflops, 2.0 * n ** 3 / (start.elapsed_time(end) / 1e3) / 1e12)
            del a, b
        src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        dst.copy_(src)
        best_gbs = 0.0
        for _ in range(10):
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            best_gbs = max(best_gbs, 2.0 * src.numel() / (start.elapsed_time(end) / 1e3) / 1e9)
        del src, dst
        torch.cuda.empty_cache()
        return {"fp16_tflops": best_tflops, "bandwidth_gbs": best_gbs}
    except Exception as e:  # noqa: BLE001 - the tables then show no fractions
        print(f"[bench] measuring the card's floors failed: {type(e).__name__}: {e}", flush=True)
        return None


def model_work(spec, batch, precision):
    """A model's work at one batch and precision: its FLOPs (torch's FlopCounterMode over one forward, on the meta
    device: shapes only) and its least memory traffic in bytes (parameters, input and output, each once)."""
    try:
        import torch
        from torch.utils.flop_counter import FlopCounterMode

        dtype = torch.float16 if precision == "fp16" else torch.float32
        with torch.no_grad():
            model = zoo.build_model(spec.name, attn_impl="sdpa").to(dtype).to("meta")
            x = zoo.make_input(spec, batch, "cpu", dtype).to("meta")
            counter = FlopCounterMode(display=False)
            with counter:
                y = model(x)
        if isinstance(y, (tuple, list)):
            y = y[0]
        elem = 2 if precision == "fp16" else 4
        params = sum(p.numel() * p.element_size() for p in model.parameters())
        buffers = sum(b.numel() * b.element_size() for b in model.buffers())
        traffic = params + buffers + x.numel() * x.element_size() + y.numel() * elem
        return {"flops": float(counter.get_total_flops()), "min_bytes": float(traffic)}
    except Exception as e:  # noqa: BLE001 - the row then shows no fractions
        print(f"[bench] counting {spec.name}'s work failed: {type(e).__name__}: {e}", flush=True)
        return {}


def git_commit():
    """$KILN_COMMIT, else `git rev-parse --short HEAD` (+ '-dirty' with uncommitted changes), else 'unknown'. On a
    machine that received a copy of the tree, set KILN_COMMIT from the machine that built the binary: a copied .git
    may name an older commit."""
    if os.environ.get("KILN_COMMIT"):
        return os.environ["KILN_COMMIT"]
    try:
        git = ["git", "-C", REPO]
        r = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        if r.returncode == 0 and r.stdout.strip():
            dirty = subprocess.run(git + ["status", "--porcelain", "-uno"], capture_output=True, text=True, timeout=10)
            return r.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def collect_meta(args):
    meta = {"card": "unknown", "torch": None, "cuda": None, "cudnn": None, "kiln_commit": git_commit(),
            "kiln": args.kiln, "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "python": sys.version.split()[0], "iterations": args.iterations, "warmup": args.warmup,
            "kiln_bench": f"--iterations={args.kiln_iterations} --duration={args.kiln_duration:g} "
                          f"--warmUp={args.kiln_warmup_ms:g} (ms), --useCudaGraph",
            "kiln_aux_streams": args.kiln_aux_streams,
            "torch_tf32_matmul": None, "torch_tf32_cudnn": None}
    try:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = True  # the "fp32" rows: TF32 allowed, as kiln's default
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True  # cuDNN picks its fastest conv algorithms, as kiln times tactics
        meta.update(torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                    torch_tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
                    torch_tf32_cudnn=torch.backends.cudnn.allow_tf32, torch_cudnn_benchmark=True)
        if torch.cuda.is_available():
            meta["card"] = torch.cuda.get_device_name()
    except ImportError:
        pass
    return meta


def main(argv=None):
    args = parse_args(argv)
    meta = collect_meta(args)
    out_dir = os.path.join(args.results_dir, report.slug(meta["card"]))
    work = os.path.join(args.work_dir, report.slug(meta["card"]))
    os.makedirs(out_dir, exist_ok=True)
    if args.fresh_timing_cache:
        for m in args.models:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(work, f"timing_cache_{m}.json"))
    old_meta, rows = ({}, []) if args.fresh else report.load_results(os.path.join(out_dir, "results.json"))
    if old_meta.get("card") not in (None, meta["card"]):
        rows = []
    configs = plan(args)
    if meta["card"] != "unknown":
        meta["floors"] = measure_floors() or old_meta.get("floors")
        print(f"[bench] floors: {meta['floors']}", flush=True)
    works = {}
    print(f"[bench] {meta['card']}, torch {meta['torch']}, kiln {meta['kiln_commit']}: {len(configs)} configurations "
          f"-> {out_dir}", flush=True)
    for i, (m, mode, prec, b) in enumerate(configs, 1):
        spec = zoo.SPECS[m]
        t0 = time.perf_counter()
        if mode == "kiln":
            row = measure_kiln(spec, prec, b, args, work)
        elif meta["card"] == "unknown":
            row = report.error_row(m, "torch", mode, prec, b, "no CUDA device (or no torch) in this process")
        else:
            row = measure_torch(spec, mode, prec, b, args)
        row["card"] = meta["card"]
        if meta["card"] != "unknown":
            if (m, prec, b) not in works:
                works[(m, prec, b)] = model_work(spec, b, prec)
            row.update(works[(m, prec, b)])
        # Which run measured the row: rows of earlier runs are kept, so the file can mix runs (and commits).
        row["kiln_commit"], row["measured_at"] = meta["kiln_commit"], meta["date"]
        rows = report.merge_rows(rows, [row])
        report.write_json(os.path.join(out_dir, "results.json"), meta, rows)  # after every row: a crash loses one
        what = (f"median {row['median_ms']:.3f} ms, {row['items_per_s']:,.1f} items/s" if row["status"] == "ok"
                else "error: " + ((row["error"] or "").strip().splitlines() or [""])[0][:200])
        print(f"[bench] {i}/{len(configs)} {m} {mode} {prec} b{b}: {what} ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    print(report.write_all(out_dir, meta, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
