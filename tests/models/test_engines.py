"""Engines built from the zoo: `kiln build` optimizes each model (BatchNorm folding, fusions, GELU/LayerNorm/
attention recognition) and writes an engine; `kiln run --loadEngine` runs it. The optimized engine must give the
unoptimized graph's outputs (kiln's reference run) within rtol 1e-4, and onnxruntime's, and the build report's
JSON must show the rewrites each model is known to need.
"""
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from test_models import MODELS, KILN_TIMEOUT_S, ort_run, prepared, safe_name, yolo_grid_units

RTOL = ATOL = 1e-4


def save_feeds(feeds, d):
    specs = []
    for name, value in feeds.items():
        f = d / f"input_{safe_name(name)}.npy"
        np.save(f, value)
        specs.append(f"{name}:{f}")
    return ",".join(specs)


def run(args):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=KILN_TIMEOUT_S)
    assert proc.returncode == 0, f"{' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}\n{proc.stdout}"
    return proc


def build_and_run(kiln, model_dir, name):
    path, feeds, outputs = prepared(model_dir, name)
    d = model_dir / name / "engine"
    d.mkdir(parents=True, exist_ok=True)
    shapes = ",".join(f"{k}:{'x'.join(map(str, v.shape))}" for k, v in feeds.items())
    engine, report = d / "model.engine", d / "build.json"
    run([kiln, "build", "--backend=cpu", f"--onnx={path}", f"--saveEngine={engine}", f"--shapes={shapes}", f"--json={report}"])
    inputs = save_feeds(feeds, d)
    run([kiln, "run", f"--loadEngine={engine}", f"--loadInputs={inputs}", f"--exportOutput={d / 'engine_out'}"])
    run([kiln, "run", f"--onnx={path}", f"--loadInputs={inputs}", f"--exportOutput={d / 'reference_out'}"])
    got = {o: np.load(d / "engine_out" / f"{safe_name(o)}.npy") for o in outputs}
    ref = {o: np.load(d / "reference_out" / f"{safe_name(o)}.npy") for o in outputs}
    return json.loads(report.read_text()), got, ref, ort_run(path, feeds)


@pytest.mark.parametrize("name", list(MODELS))
def test_optimized_engine_matches_unoptimized_graph(kiln, model_dir, name):
    report, got, ref, ort = build_and_run(kiln, model_dir, name)
    transform = yolo_grid_units if name == "yolo" else (lambda n, v: v)
    for o in got:
        assert got[o].shape == ref[o].shape and got[o].dtype == ref[o].dtype, o
        np.testing.assert_allclose(transform(o, got[o]), transform(o, ref[o]), rtol=RTOL, atol=ATOL,
                                   err_msg=f"{name} output '{o}': optimized engine vs unoptimized graph")
        np.testing.assert_allclose(transform(o, got[o]), transform(o, ort[o]), rtol=RTOL, atol=ATOL,
                                   err_msg=f"{name} output '{o}': optimized engine vs onnxruntime")
    opt = report["optimization"]
    assert opt["layers_after"] < opt["layers_before"], opt
    assert report["status"] == "success" and report["input_model"].endswith("model.onnx")
    assert report["memory"]["arena_bytes"] <= report["memory"]["naive_activation_bytes"]

    ops = opt["op_counts"]
    if name == "resnet50":
        assert "BatchNormalization" not in ops, ops
        assert opt["fusions"]["batchnorm_folded"] == 53, opt["fusions"]
        # 33 Conv+Relu pairs (stem + 2 per bottleneck) become FusedConv with a Relu epilogue.
        assert opt["fusions"]["bias_activation"] >= 33, opt["fusions"]
        assert ops.get("kiln.FusedConv", 0) >= 33, ops
        assert report["memory"]["arena_bytes"] <= 0.4 * report["memory"]["naive_activation_bytes"], report["memory"]
    if name in ("bert", "vit", "gpt2"):
        # Every residual Add (after the attention projection and after the MLP) moves into its GEMM's epilogue.
        want = {"bert": 24, "vit": 8, "gpt2": 4}[name]
        assert opt["fusions"]["residual_add"] == want, opt["fusions"]
        assert ops.get("Add", 0) <= 1, ops  # only ViT's/GPT-2's position-embedding Add is left
    if name == "bert":
        assert opt["fusions"]["gelu"] == 12, opt["fusions"]
        assert opt["fusions"]["layernorm"] == 25, opt["fusions"]
        # 12 attentions, each absorbing its 4 head split/merge Transposes (kiln_*_layout = BSHD): none is left.
        assert ops.get("kiln.Attention", 0) == 12, ops
        assert opt["fusions"]["attention"] == 12 * 5, opt["fusions"]
        assert ops.get("Transpose", 0) == 0, ops
        # Each attention's Q, K and V projections are one GEMM whose output the attention reads packed (BS3HD).
        assert opt["fusions"]["qkv_projection"] == 12, opt["fusions"]
        assert ops.get("kiln.FusedMatMul", 0) == 12 * 4 + 1, ops  # QKV, attention output, FFN x2; the pooler


def test_dynamic_profile_engine(kiln, model_dir):
    """GPT-2 built with a min/opt/max profile runs inside the range and refuses a shape outside it by name."""
    path, feeds, outputs = prepared(model_dir, "gpt2")
    d = model_dir / "gpt2" / "dynamic"
    d.mkdir(parents=True, exist_ok=True)
    (name, value), = feeds.items()
    b, s = value.shape
    engine = d / "model.engine"
    run([kiln, "build", "--backend=cpu", f"--onnx={path}", f"--saveEngine={engine}", f"--minShapes={name}:1x8",
         f"--optShapes={name}:{b}x{s}", f"--maxShapes={name}:2x{s}", f"--json={d / 'build.json'}"])
    assert json.loads((d / "build.json").read_text())["configuration"]["dynamic_shapes"] is True
    inputs = save_feeds(feeds, d)
    run([kiln, "run", f"--loadEngine={engine}", f"--loadInputs={inputs}", f"--exportOutput={d / 'out'}"])
    ort = ort_run(path, feeds)
    for o in outputs:
        np.testing.assert_allclose(np.load(d / "out" / f"{safe_name(o)}.npy"), ort[o], rtol=RTOL, atol=ATOL)
    bad = subprocess.run([kiln, "run", f"--loadEngine={engine}", f"--shapes={name}:3x{s}"], capture_output=True,
                         text=True, timeout=KILN_TIMEOUT_S)
    assert bad.returncode != 0
    assert f"'{name}'" in bad.stderr and "[1, 2]" in bad.stderr, bad.stderr


def test_disable_passes(kiln, model_dir):
    """`kiln build --disablePasses` skips the named passes (the engine still matches onnxruntime); an unknown name
    fails the build with the list of pass names."""
    path, feeds, outputs = prepared(model_dir, "bert")
    d = model_dir / "bert" / "no_qkv"
    d.mkdir(parents=True, exist_ok=True)
    shapes = ",".join(f"{k}:{'x'.join(map(str, v.shape))}" for k, v in feeds.items())
    engine, report = d / "model.engine", d / "build.json"
    run([kiln, "build", "--backend=cpu", f"--onnx={path}", f"--saveEngine={engine}", f"--shapes={shapes}",
         f"--json={report}", "--disablePasses=fuse-qkv-projection,fuse-residual-add"])
    fusions = json.loads(report.read_text())["optimization"]["fusions"]
    assert fusions.get("qkv_projection", 0) == 0 and fusions.get("residual_add", 0) == 0, fusions
    assert fusions["attention"] == 12 * 5, fusions  # the other passes still ran
    run([kiln, "run", f"--loadEngine={engine}", f"--loadInputs={save_feeds(feeds, d)}", f"--exportOutput={d / 'out'}"])
    ort = ort_run(path, feeds)
    for o in outputs:
        np.testing.assert_allclose(np.load(d / "out" / f"{safe_name(o)}.npy"), ort[o], rtol=RTOL, atol=ATOL)
    bad = subprocess.run([kiln, "build", "--backend=cpu", f"--onnx={path}", f"--shapes={shapes}",
                          "--disablePasses=fuse-qkv"], capture_output=True, text=True, timeout=KILN_TIMEOUT_S)
    assert bad.returncode != 0
    assert "'fuse-qkv'" in bad.stderr and "fuse-qkv-projection" in bad.stderr, bad.stderr
