"""Control flow (If, Loop, Scan) and sequences on the CPU backend against onnxruntime, through `kiln run` (which
builds an engine), and through a saved engine file loaded again (bodies are stored in the engine)."""
import subprocess

import numpy as np
import onnx
import pytest

from builders import control_flow
from test_models import check_against_ort, ort_run, safe_name

CASES = {
    "greedy_decode": (control_flow.greedy_decode, {}),
    "greedy_decode_no_early_stop": (control_flow.greedy_decode, dict(stop_after=100)),
    "scan_rnn": (control_flow.scan_rnn, {}),
    "branches_then": (control_flow.branches, dict(flag=True)),
    "branches_else": (control_flow.branches, dict(flag=False)),
    "sequence_loop": (control_flow.sequence_loop, {}),
    "sequence_loop_stops_early": (control_flow.sequence_loop, dict(stop_after=3)),
    "counted_loop": (control_flow.counted_loop, {}),
    "counted_loop_const_cond": (control_flow.counted_loop, dict(const_cond=True)),
    "while_loop": (control_flow.while_loop, {}),
    "gated_branches_then": (control_flow.gated_branches, dict(sign=1.0)),
    "gated_branches_else": (control_flow.gated_branches, dict(sign=-1.0)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_control_flow_matches_onnxruntime(kiln, tmp_path, name):
    build, kwargs = CASES[name]
    model, feeds = build(seed=1, **kwargs)
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    check_against_ort(kiln, path, feeds, [o.name for o in model.graph.output], tmp_path / "run")


def test_greedy_decode_stops_early(tmp_path):
    """The builder's early stop is real: onnxruntime runs 4 of the 6 steps (the kiln test above then checks it too)."""
    model, feeds = control_flow.greedy_decode(seed=1)
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    assert ort_run(path, feeds)["tokens"].shape[0] == 4


@pytest.mark.parametrize("kwargs", [{}, dict(stop_after=3)])
def test_sequence_loop_builder_matches_numpy(tmp_path, kwargs):
    """The sequence builder computes what it says (onnxruntime against a numpy loop), so the kiln test above checks
    the recurrence, the collected states and the sequence reads."""
    model, feeds = control_flow.sequence_loop(seed=1, **kwargs)
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    got = ort_run(path, feeds)
    want = control_flow.sequence_loop_reference(feeds, seed=1, **kwargs)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5, err_msg=name)


def check_saved_engine(kiln, tmp_path, model, feeds, engine_name):
    """Builds `model` into an engine file, loads and runs it with `kiln run --loadEngine`, and compares every output
    with onnxruntime (rtol = atol = 1e-4)."""
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    engine = tmp_path / engine_name
    p = subprocess.run([kiln, "build", f"--onnx={path}", f"--saveEngine={engine}"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr + p.stdout
    ref = ort_run(path, feeds)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    specs = []
    for name, value in feeds.items():
        np.save(run_dir / f"input_{name}.npy", value)
        specs.append(f"{name}:{run_dir / f'input_{name}.npy'}")
    proc = subprocess.run([kiln, "run", f"--loadEngine={engine}", "--loadInputs=" + ",".join(specs),
                           f"--exportOutput={run_dir / 'out'}"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    for name, want in ref.items():
        got = np.load(run_dir / "out" / f"{safe_name(name)}.npy")
        assert got.shape == want.shape and got.dtype == want.dtype, name
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)


def test_saved_engine_with_sequences_runs(kiln, tmp_path):
    """A Loop-carried sequence, SplitToSequence and ConcatFromSequence in an engine file, loaded and run again."""
    model, feeds = control_flow.sequence_loop(seed=2, stop_after=4)
    check_saved_engine(kiln, tmp_path, model, feeds, "seq.engine")


def test_sequence_output_is_refused_by_engines(kiln, tmp_path):
    """An engine's outputs are tensors: a model whose output is a sequence fails the build with a sentence."""
    model, _ = control_flow.sequence_loop(seed=0)
    model.graph.output.append(onnx.helper.make_tensor_sequence_value_info("hs", onnx.TensorProto.FLOAT, None))
    path = tmp_path / "seq_out.onnx"
    onnx.save(model, str(path))
    p = subprocess.run([kiln, "build", f"--onnx={path}"], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "an engine's inputs and outputs are tensors" in (p.stderr + p.stdout)


def test_saved_engine_with_bodies_runs(kiln, tmp_path):
    model, feeds = control_flow.greedy_decode(seed=2)
    check_saved_engine(kiln, tmp_path, model, feeds, "decode.engine")


def test_loop_without_end_is_refused(kiln, tmp_path):
    model, _ = control_flow.greedy_decode(seed=0)
    loop = model.graph.node[0]
    loop.input[0] = ""
    loop.input[1] = ""
    path = tmp_path / "endless.onnx"
    onnx.save(model, str(path))
    p = subprocess.run([kiln, "build", f"--onnx={path}"], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "would never end" in (p.stderr + p.stdout)
