#!/usr/bin/env python3
"""Exports the benchmark zoo to ONNX (opset 17, TorchScript exporter; the LLaMA-style decoder with torch's default
dynamo exporter at opset 18; random weights from torch.manual_seed(0)).

    python3 bench/export_zoo.py [--models resnet50,bert_base] [--out bench/models] [--batch 1] [--no-check]

Every model gets a dynamic batch axis (text models also a dynamic sequence axis). After export, unless --no-check,
onnxruntime (CPU) runs the file at batch+1 (so the dynamic axis is exercised) and the max abs difference against
PyTorch is printed. One line per model: parameters, file size, attention implementation, check.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="all", help=f"comma list or 'all' ({', '.join(zoo.SPECS)})")
    p.add_argument("--out", default=os.path.join(BENCH_DIR, "models"), help="output folder (default bench/models)")
    p.add_argument("--batch", type=int, default=1, help="batch of the trace input (default 1)")
    p.add_argument("--no-check", action="store_true", help="skip the onnxruntime check")
    p.add_argument("--force", action="store_true", help="export again even where the .onnx file exists")
    a = p.parse_args(argv)
    a.models = zoo.parse_models(a.models)
    if a.batch < 1:
        p.error("--batch must be >= 1")
    return a


_EXPORT_FIXES_DONE = False


def register_export_fixes():
    """ONNX symbolics the TorchScript exporter lacks or gets wrong at opset 17 and the zoo needs. transformers 5's
    causal-mask code looks for packed sequences in position_ids (GPT-2): torch.diff has no opset-17 symbolic (export
    it as Concat(prepend, x, append) then Sub of two Slices; n = 1 only, the case transformers uses), and a cumsum of
    bools was exported as a CumSum of bool, which ONNX does not allow (cast to int64 first, as torch computes it)."""
    global _EXPORT_FIXES_DONE
    if _EXPORT_FIXES_DONE:
        return
    import torch
    from torch.onnx import symbolic_helper as sh

    def diff(g, x, n, dim, prepend, append):
        n = sh._get_const(n, "i", "n")
        dim = sh._get_const(dim, "i", "dim")
        if n != 1:
            return sh._unimplemented("aten::diff", "n != 1", x)
        parts = [t for t in (prepend, x, append) if not sh._is_none(t)]
        whole = parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis_i=dim)

        def const(v):
            return g.op("Constant", value_t=torch.tensor([v], dtype=torch.int64))

        later = g.op("Slice", whole, const(1), const(2**62), const(dim))
        earlier = g.op("Slice", whole, const(0), const(-1), const(dim))
        return g.op("Sub", later, earlier)

    @sh.parse_args("v", "i", "none")
    def cumsum(g, x, dim, dtype=None):
        # ONNX CumSum takes no bool; torch sums bools as int64 (transformers 5: (position_diff != 1).cumsum(-1)).
        onnx_of_torch = {3: 6, 4: 7, 5: 10, 6: 1, 7: 11, 15: 16}  # int32, int64, float16, float32, float64, bf16
        if dtype is not None and dtype.node().kind() != "prim::Constant":
            x = g.op("Cast", x, to_i=onnx_of_torch[sh._get_const(dtype, "i", "dtype")])
        elif x.type().scalarType() == "Bool":
            x = g.op("Cast", x, to_i=7)  # int64
        return g.op("CumSum", x, g.op("Constant", value_t=torch.tensor(dim, dtype=torch.int64)))

    torch.onnx.register_custom_op_symbolic("aten::diff", diff, 17)
    torch.onnx.register_custom_op_symbolic("aten::cumsum", cumsum, 17)
    _EXPORT_FIXES_DONE = True


def export_one(name, out_dir, batch):
    """Exports `name`; returns (path, params, attn_impl). Text models try sdpa attention, then eager."""
    import torch

    register_export_fixes()
    spec = zoo.SPECS[name]
    path = os.path.join(out_dir, f"{name}.onnx")
    impls = ["sdpa", "eager"] if spec.kind == "text" else [None]
    errors = []
    for impl in impls:
        model = zoo.build_model(name, attn_impl=impl or "sdpa")
        x = zoo.make_input(spec, batch, dtype=torch.float32)
        try:
            if spec.exporter == "dynamo":
                # torch's default exporter (opset 18), dynamic batch and sequence; traced at batch 2 so that the batch
                # dim is not specialized to 1.
                x = zoo.make_input(spec, max(batch, 2), dtype=torch.float32)
                dims = {0: torch.export.Dim("batch", min=1, max=256)}
                if spec.kind == "text":
                    dims[1] = torch.export.Dim("seq", min=2, max=4096)
                torch.onnx.export(model, (x,), path, opset_version=18, dynamo=True, input_names=[spec.input_name],
                                  output_names=[spec.output_name], dynamic_shapes={spec.input_name: dims},
                                  external_data=False)
            else:
                # No torch.no_grad(): nn.MultiheadAttention (ViT) would take its fused fast path, which does not
                # export.
                torch.onnx.export(model, (x,), path, opset_version=17, dynamo=False, input_names=[spec.input_name],
                                  output_names=[spec.output_name], dynamic_axes=spec.dynamic_axes())
        except Exception as e:  # noqa: BLE001 - try the next attention implementation, report all at the end
            errors.append(f"{impl or 'default'}: {type(e).__name__}: {e}")
            continue
        params = sum(p.numel() for p in model.parameters())
        return path, params, getattr(model, "attn_impl", None)
    raise RuntimeError("export failed: " + " | ".join(errors))


def check_one(name, path, batch):
    """Max abs difference between onnxruntime (CPU) and PyTorch at `batch`, and the output's max abs value."""
    import numpy as np
    import onnxruntime as ort
    import torch

    spec = zoo.SPECS[name]
    x = zoo.make_input(spec, batch, dtype=torch.float32, seed=1)
    with torch.no_grad():
        ref = zoo.build_model(name).float()(x).numpy()
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {spec.input_name: x.numpy()})[0]
    if got.shape != ref.shape:
        return f"shape mismatch: onnxruntime {got.shape} vs torch {ref.shape}"
    diff = float(np.max(np.abs(got.astype(np.float64) - ref)))
    return f"batch {batch}: max|ort-torch| = {diff:.3g} (max|torch| = {float(np.max(np.abs(ref))):.3g})"


def main(argv=None):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    failed = []
    for name in a.models:
        t0 = time.perf_counter()
        path = os.path.join(a.out, f"{name}.onnx")
        try:
            if os.path.exists(path) and not a.force:
                print(f"{name:16s} exists: {path} ({os.path.getsize(path) / 2**20:.1f} MiB); --force to export again")
                continue
            path, params, impl = export_one(name, a.out, a.batch)
            line = (f"{name:16s} {params / 1e6:8.2f} M params  {os.path.getsize(path) / 2**20:8.1f} MiB  {path}"
                    + (f"  attention={impl}" if impl else ""))
            if not a.no_check:
                line += "  check " + check_one(name, path, a.batch + 1)
            print(f"{line}  ({time.perf_counter() - t0:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001 - one model's failure must not stop the others
            failed.append(name)
            print(f"{name:16s} FAILED: {type(e).__name__}: {e}", flush=True)
    if failed:
        print(f"export failed for: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
