"""Model tests: kiln's CPU reference backend against onnxruntime (CPU, float32, rtol = atol = 1e-4).

Each model is built with the onnx helper (tests/models/builders), saved, run in onnxruntime with
graph optimizations disabled, then run with
    kiln run --onnx=model.onnx --loadInputs=name:file.npy,... --exportOutput=OUTDIR
which writes OUTDIR/<output name with '/', ':' and '\\' replaced by '_'>.npy per graph output.
"""
import subprocess
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from builders import bert, gpt2, resnet50, vit, yolo

RTOL = ATOL = 1e-4
KILN_TIMEOUT_S = 900

# name -> (builder, keyword arguments). Sizes are the documented test defaults (README.md).
MODELS = {
    "resnet50": (resnet50.build, dict(batch=1, image_size=224)),
    "bert": (bert.build, dict(batch=1, seq=128)),
    "yolo": (yolo.build, dict(image_size=320)),
    "vit": (vit.build, dict(batch=1, layers=4)),
    "gpt2": (gpt2.build, dict(batch=1, seq=64, layers=2, vocab=8192)),
}

_cache = {}


def prepared(model_dir, name):
    """Builds (once per session) and saves a model; returns (model path, feeds, graph outputs)."""
    if name not in _cache:
        build, kwargs = MODELS[name]
        model, feeds = build(seed=0, **kwargs)
        path = model_dir / name / "model.onnx"
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(model, str(path))
        _cache[name] = (path, feeds, [o.name for o in model.graph.output])
    return _cache[name]


def ort_run(path, feeds):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def safe_name(name):
    for c in "/:\\":
        name = name.replace(c, "_")
    return name


def kiln_run(kiln, path, feeds, out_dir, extra=()):
    """Runs `kiln run` with the feeds saved as .npy; returns the CompletedProcess."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    args = [kiln, "run", f"--onnx={path}"]
    if feeds:
        specs = []
        for name, value in feeds.items():
            f = out_dir / f"input_{safe_name(name)}.npy"
            np.save(f, value)
            specs.append(f"{name}:{f}")
        args.append("--loadInputs=" + ",".join(specs))
    args += [f"--exportOutput={out_dir / 'out'}", *extra]
    return subprocess.run(args, capture_output=True, text=True, timeout=KILN_TIMEOUT_S)


def yolo_grid_units(name, value):
    """YOLO's decoded boxes (rows 0:4 of output0) divided by their anchor's stride (8/16/32).

    The box decode multiplies grid-unit distances by the stride, so pixel-unit boxes carry 32x
    the float32 noise of the ~45 layers before them: measured against kiln in float64, both
    onnxruntime and kiln in float32 are off by ~4e-3 px, more than 1e-4 relative. In grid
    units (an exact rescaling by known constants) the 1e-4 tolerance holds for a correct engine.
    """
    if name != "output0":
        return value
    _, strides = yolo._anchors(MODELS["yolo"][1]["image_size"], [8, 16, 32])
    value = value.copy()
    value[:, :4, :] /= strides
    return value


def check_against_ort(kiln, path, feeds, output_names, out_dir, transform=None):
    ref = ort_run(path, feeds)
    t = time.time()
    proc = kiln_run(kiln, path, feeds, out_dir)
    elapsed = time.time() - t
    assert proc.returncode == 0, f"kiln run failed (exit {proc.returncode}):\n{proc.stderr}\n{proc.stdout}"
    print(f"kiln run: {elapsed:.1f}s\n{proc.stdout}")
    for name in output_names:
        f = Path(out_dir) / "out" / f"{safe_name(name)}.npy"
        assert f.is_file(), f"kiln wrote no {f.name} for output '{name}'; stdout:\n{proc.stdout}"
        got, want = np.load(f), ref[name]
        assert got.dtype == want.dtype, f"output '{name}': dtype {got.dtype}, onnxruntime {want.dtype}"
        assert got.shape == want.shape, f"output '{name}': shape {got.shape}, onnxruntime {want.shape}"
        if transform is not None:
            got, want = transform(name, got), transform(name, want)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"output '{name}'")


@pytest.mark.parametrize("name", list(MODELS))
def test_builder_is_sane(model_dir, name):
    """The generated model runs in onnxruntime with finite outputs of sane magnitude."""
    path, feeds, outputs = prepared(model_dir, name)
    for out_name, value in ort_run(path, feeds).items():
        assert np.isfinite(value).all(), out_name
        assert 1e-2 < float(np.std(value)) < 1e3, f"{out_name}: std {np.std(value)}"


@pytest.mark.parametrize("name", list(MODELS))
def test_model_matches_onnxruntime(kiln, model_dir, name):
    path, feeds, outputs = prepared(model_dir, name)
    transform = yolo_grid_units if name == "yolo" else None
    check_against_ort(kiln, path, feeds, outputs, model_dir / name / "run", transform)


@pytest.mark.parametrize("name,kwargs", [
    ("yolo", dict(image_size=320, fold_bn=False)),   # BatchNormalization kept separate
    ("vit", dict(batch=2, layers=2, ln_op=False)),   # LayerNorm decomposed, batch 2
])
def test_model_variants(kiln, model_dir, name, kwargs):
    build, _ = MODELS[name]
    model, feeds = build(seed=3, **kwargs)
    tag = "_".join(f"{k}{v}" for k, v in kwargs.items())
    path = model_dir / f"{name}_{tag}" / "model.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    transform = yolo_grid_units if name == "yolo" else None
    check_against_ort(kiln, path, feeds, [o.name for o in model.graph.output], path.parent / "run", transform)


@pytest.mark.parametrize("name,batch,seq", [("bert", 2, 40), ("gpt2", 3, 17)])
def test_symbolic_batch_and_seq(kiln, model_dir, name, batch, seq):
    """The same files with other values for the symbolic "batch" and "seq" dims."""
    path, _, outputs = prepared(model_dir, name)
    if name == "bert":
        feeds = bert.make_feeds(seed=5, batch=batch, seq=seq)
    else:
        vocab = MODELS["gpt2"][1]["vocab"]
        feeds = {"input_ids": np.random.default_rng(5).integers(0, vocab, (batch, seq), dtype=np.int64)}
    check_against_ort(kiln, path, feeds, outputs, model_dir / name / f"run_b{batch}_s{seq}")


def test_resnet50_random_inputs(kiln, model_dir):
    """`kiln run` without --loadInputs makes random inputs and succeeds."""
    path, _, _ = prepared(model_dir, "resnet50")
    out = model_dir / "resnet50" / "run_random"
    proc = kiln_run(kiln, path, None, out)
    assert proc.returncode == 0, f"kiln run failed (exit {proc.returncode}):\n{proc.stderr}\n{proc.stdout}"
    y = np.load(out / "out" / "output.npy")
    assert y.shape == (1, 1000) and y.dtype == np.float32
    assert np.isfinite(y).all()


def _small_model(nodes, outputs, extra_opsets=()):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph(nodes, "small", [x], outputs)
    opsets = [helper.make_opsetid("", 17)] + [helper.make_opsetid(d, 1) for d in extra_opsets]
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = 8
    return m


def test_output_names_with_slash_and_colon(kiln, model_dir):
    """Output files are named after the output with '/' and ':' replaced by '_'."""
    m = _small_model([helper.make_node("Relu", ["x"], ["block/relu:0"], name="/block/Relu")],
                     [helper.make_tensor_value_info("block/relu:0", TensorProto.FLOAT, [2, 3])])
    path = model_dir / "names" / "model.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(m, str(path))
    x = np.array([[-1.0, 0.5, 2.0], [3.0, -0.25, 0.0]], dtype=np.float32)
    check_against_ort(kiln, path, {"x": x}, ["block/relu:0"], path.parent / "run")
    assert (path.parent / "run" / "out" / "block_relu_0.npy").is_file()


# ImageDecoder stands for an op outside kiln's set: issue 12's exclusion list keeps it out (it decodes image files).
@pytest.mark.parametrize("kind", ["ImageDecoder", "custom_domain"])
def test_unsupported_op_is_reported(kiln, model_dir, kind):
    """An op outside kiln's set: non-zero exit, and stderr names the node and its op type."""
    if kind == "ImageDecoder":
        node = helper.make_node("ImageDecoder", ["b"], ["y"], name="my_decoder_node")
        out = helper.make_tensor_value_info("y", TensorProto.UINT8, None)
        m = _small_model([helper.make_node("Relu", ["x"], ["r"], name="relu0"),
                          helper.make_node("Cast", ["r"], ["b"], name="to_bytes", to=TensorProto.UINT8), node],
                         [out])
        op_type = "ImageDecoder"
    else:
        node = helper.make_node("FancyOp", ["r"], ["y"], name="my_custom_node", domain="com.example")
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
        m = _small_model([helper.make_node("Relu", ["x"], ["r"], name="relu0"), node], [out],
                         extra_opsets=["com.example"])
        op_type = "FancyOp"
    path = model_dir / f"unsupported_{kind}" / "model.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(m, str(path))
    proc = kiln_run(kiln, path, None, path.parent / "run")
    assert proc.returncode != 0, f"kiln accepted a model with {op_type}:\n{proc.stdout}"
    assert node.name in proc.stderr, proc.stderr
    assert op_type in proc.stderr, proc.stderr


def test_every_unsupported_node_is_listed(kiln, model_dir):
    """One report names every unsupported node, not only the first (DESIGN.md)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu0"),
             helper.make_node("Cast", ["r"], ["b"], name="to_bytes", to=TensorProto.UINT8),
             helper.make_node("ImageDecoder", ["b"], ["u"], name="first_decoder"),
             helper.make_node("FancyOp", ["u"], ["y"], name="second_custom", domain="com.example")]
    m = _small_model(nodes, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                     extra_opsets=["com.example"])
    path = model_dir / "unsupported_two" / "model.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(m, str(path))
    proc = kiln_run(kiln, path, None, path.parent / "run")
    assert proc.returncode != 0
    for name, op in (("first_decoder", "ImageDecoder"), ("second_custom", "FancyOp")):
        assert name in proc.stderr and op in proc.stderr, proc.stderr
