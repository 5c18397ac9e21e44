"""`kiln compare`: an engine against the reference on the same inputs. On the CPU backend (CI) an optimized engine
must pass against the unoptimized graph and onnxruntime, report per-output metrics in its JSON, name the tensors
it compared with --markAll, and fail (exit 1) when the tolerance is impossible to meet. On a GPU machine the same
command compares the cuda engine (tests/models/test_gpu_models.py covers the zoo there).
"""
import json
import subprocess

import numpy as np
import pytest

from test_models import KILN_TIMEOUT_S, prepared


def compare(kiln, path, out, *extra):
    return subprocess.run([kiln, "compare", "--backend=cpu", f"--onnx={path}", f"--json={out}", *extra],
                          capture_output=True, text=True, timeout=KILN_TIMEOUT_S)


@pytest.mark.parametrize("name", ["resnet50", "bert"])
def test_compare_passes_against_the_cpu_reference(kiln, model_dir, name):
    path, feeds, outputs = prepared(model_dir, name)
    shapes = ",".join(f"{k}:{'x'.join(map(str, v.shape))}" for k, v in feeds.items())
    out = model_dir / name / "compare.json"
    p = compare(kiln, path, out, f"--shapes={shapes}", "--atol=1e-4", "--rtol=1e-4", "--markAll")
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(out.read_text())
    assert rep["pass"] is True and rep["backend"] == "cpu" and rep["reference"] == "cpu"
    assert {o["name"] for o in rep["outputs"]} == set(outputs)
    for o in rep["outputs"]:
        assert o["pass"] and o["shape_ok"] and o["rel_l2"] < 1e-5, o
    mark = rep["mark_all"]
    assert mark["compared"] > 10 and mark["first_drift"] == "", mark["compared"]
    assert "PASS" in p.stdout


def test_compare_against_onnxruntime(kiln, model_dir):
    path, feeds, _ = prepared(model_dir, "resnet50")
    shapes = ",".join(f"{k}:{'x'.join(map(str, v.shape))}" for k, v in feeds.items())
    out = model_dir / "resnet50" / "compare_ort.json"
    p = compare(kiln, path, out, f"--shapes={shapes}", "--reference=onnxruntime", "--atol=1e-4", "--rtol=1e-4")
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(out.read_text())["reference"] == "onnxruntime"


def test_compare_fails_on_an_impossible_tolerance_and_names_the_output(kiln, model_dir):
    path, feeds, outputs = prepared(model_dir, "resnet50")
    shapes = ",".join(f"{k}:{'x'.join(map(str, v.shape))}" for k, v in feeds.items())
    out = model_dir / "resnet50" / "compare_strict.json"
    # fp32 reassociation (BatchNorm folded into the conv weights) cannot match to 1e-12 relative.
    p = compare(kiln, path, out, f"--shapes={shapes}", "--atol=0", "--rtol=1e-12")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL" in p.stdout and outputs[0] in p.stdout
    assert "beyond atol" in p.stderr


def test_compare_rejects_inputs_of_the_wrong_type(kiln, model_dir, tmp_path):
    path, feeds, _ = prepared(model_dir, "resnet50")
    (name, value), = feeds.items()
    f = tmp_path / "x64.npy"
    np.save(f, value.astype(np.float64))
    p = compare(kiln, path, tmp_path / "c.json", f"--shapes={name}:{'x'.join(map(str, value.shape))}",
                f"--loadInputs={name}:{f}")
    assert p.returncode == 1
    assert "float32" in p.stderr and "float64" in p.stderr, p.stderr
