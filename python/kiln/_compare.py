"""kiln against other frameworks in one process: the same model and inputs through kiln, onnxruntime and (given a
module) PyTorch, timed alike, with their outputs compared to kiln's. ``kiln.compare_frameworks(...)``,
``python -m kiln benchmark --model M --compare onnxruntime``, and ``kiln benchmark --model M --compare=onnxruntime``
(the command line runs this module)."""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ._compile import Engine, compile as kiln_compile
from ._types import KilnError, nptype


def _time(run: Callable[[], object], iterations: int, warmup: int, sync: Callable[[], None]) -> Dict[str, float]:
    for _ in range(warmup):
        run()
    sync()
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        run()
        sync()
        times.append((time.perf_counter() - t0) * 1000.0)
    s = sorted(times)
    return {"median_ms": statistics.median(s), "mean_ms": statistics.fmean(s), "min_ms": s[0],
            "p99_ms": s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))],
            "throughput_qps": 1000.0 / statistics.fmean(s)}


def _agreement(ref: Mapping[str, np.ndarray], got: Sequence[np.ndarray], names: Sequence[str]) -> Dict[str, float]:
    worst_abs, worst_rel = 0.0, 0.0
    for name, g in zip(names, got):
        r = np.asarray(ref[name], dtype=np.float64)
        g = np.asarray(g, dtype=np.float64).reshape(r.shape)
        worst_abs = max(worst_abs, float(np.max(np.abs(g - r))) if r.size else 0.0)
        den = float(np.linalg.norm(r))
        worst_rel = max(worst_rel, float(np.linalg.norm(g - r)) / den if den > 0 else float(np.linalg.norm(g - r)))
    return {"max_abs_diff": worst_abs, "rel_l2": worst_rel}


def _inputs(engine: Engine, inputs: Optional[Mapping[str, np.ndarray]], seed: int) -> Dict[str, np.ndarray]:
    if inputs is not None:
        return {k: np.asarray(v) for k, v in inputs.items()}
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in engine.inputs:
        shape = i["shape"]
        if any(d < 0 for d in shape):
            shape = i.get("profile", [shape, shape])[1]  # the profile's opt shape
        if any(d < 0 for d in shape):
            raise KilnError(f"input '{i['name']}' has a dynamic shape {tuple(shape)}: give inputs or shapes")
        dt = np.dtype(nptype(i["dtype"]))
        if dt.kind == "f":
            feeds[i["name"]] = rng.standard_normal(shape).astype(dt)
        elif dt.kind == "b":
            feeds[i["name"]] = rng.integers(0, 2, shape).astype(dt)
        else:
            feeds[i["name"]] = rng.integers(0, 8, shape).astype(dt)  # small ids / indices
    return feeds


def compare_frameworks(model, inputs: Optional[Mapping[str, np.ndarray]] = None, *,
                       frameworks: Sequence[str] = ("onnxruntime",), torch_module=None, iterations: int = 50,
                       warmup: int = 5, seed: int = 0, print_table: bool = True, **compile_kwargs) -> dict:
    """Builds `model` with kiln (compile_kwargs: fp16=..., shapes=..., backend=...), runs it and each framework on the
    same inputs (given, or random at the inputs' static or opt shapes), and returns {"inputs": ..., "results": [...]}:
    per framework its latency statistics (host wall time per run, outputs brought to the host) and its outputs'
    agreement with kiln's (max abs difference, relative L2). `frameworks`: "onnxruntime" and/or "torch" (which needs
    `torch_module`, called with the inputs in the engine's order)."""
    path = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
    engine = kiln_compile(model, **compile_kwargs)
    feeds = _inputs(engine, inputs, seed)
    out_names = [o["name"] for o in engine.outputs]
    in_names = [i["name"] for i in engine.inputs]
    kiln_out = engine.run(feeds)
    ref = {k: np.asarray(v) for k, v in kiln_out.items()}
    results = [{"framework": f"kiln ({engine.backend})",
                **_time(lambda: engine.run(feeds), iterations, warmup, lambda: None),
                "max_abs_diff": 0.0, "rel_l2": 0.0}]
    for fw in frameworks:
        if fw == "onnxruntime":
            import onnxruntime as ort
            providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider")
                         if p in ort.get_available_providers()]
            data = path if path else (model.SerializeToString() if hasattr(model, "SerializeToString") else bytes(model))
            sess = ort.InferenceSession(data, providers=providers)
            run = lambda: sess.run(out_names, feeds)  # noqa: E731
            got = run()
            results.append({"framework": f"onnxruntime ({sess.get_providers()[0]})",
                            **_time(run, iterations, warmup, lambda: None), **_agreement(ref, got, out_names)})
        elif fw == "torch":
            if torch_module is None:
                raise KilnError("compare with torch needs torch_module (the model as a torch.nn.Module)")
            import torch
            dev = "cuda" if engine.backend == "cuda" and torch.cuda.is_available() else "cpu"
            args = [torch.from_numpy(np.ascontiguousarray(feeds[n])).to(dev) for n in in_names]
            module = torch_module.to(dev).eval()

            def run_torch():
                with torch.no_grad():
                    y = module(*args)
                ys = y if isinstance(y, (tuple, list)) else [y]
                return [t.detach().float().cpu().numpy() for t in ys]

            sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
            got = run_torch()
            results.append({"framework": f"torch ({dev})", **_time(run_torch, iterations, warmup, sync),
                            **_agreement(ref, got, out_names)})
        else:
            raise KilnError(f"compare: unknown framework '{fw}' (onnxruntime, torch)")
    report = {"operation": "benchmark", "compare": list(frameworks), "iterations": iterations,
              "inputs": {k: list(v.shape) for k, v in feeds.items()}, "results": results}
    if print_table:
        print(f"{'framework':<36} {'median ms':>10} {'p99 ms':>10} {'runs/s':>10} {'max |diff|':>12} {'rel L2':>10}")
        for r in results:
            print(f"{r['framework']:<36} {r['median_ms']:>10.4f} {r['p99_ms']:>10.4f} {r['throughput_qps']:>10.1f} "
                  f"{r['max_abs_diff']:>12.3g} {r['rel_l2']:>10.3g}")
    return report
