"""kiln against onnxruntime in one process (kiln.compare_frameworks, python -m kiln benchmark, and the command line's
kiln benchmark --compare): one table, the same inputs, outputs agreeing."""
import json
import os
import subprocess
import sys

import pytest

import kiln


def test_compare_with_onnxruntime(tmp_path, mlp):
    model, _ = mlp
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    r = kiln.compare_frameworks(str(path), frameworks=["onnxruntime"], iterations=5, warmup=1, shapes={"x": (4, 8)},
                                tf32=False, print_table=False)
    assert [x["framework"].split()[0] for x in r["results"]] == ["kiln", "onnxruntime"]
    ort = r["results"][1]
    assert ort["rel_l2"] < 1e-5 and ort["median_ms"] > 0 and ort["throughput_qps"] > 0
    assert r["inputs"] == {"x": [4, 8]}
    with pytest.raises(kiln.KilnError, match="torch_module"):
        kiln.compare_frameworks(str(path), frameworks=["torch"], shapes={"x": (4, 8)}, print_table=False)
    with pytest.raises(kiln.KilnError, match="unknown framework"):
        kiln.compare_frameworks(str(path), frameworks=["tvm"], shapes={"x": (4, 8)}, print_table=False)


def test_command_line_compare(tmp_path, mlp, kiln_cli):
    model, _ = mlp
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    env = dict(os.environ, KILN_PYTHON=sys.executable)
    p = subprocess.run([kiln_cli, "benchmark", "--model", str(path), "--compare=onnxruntime", "--iterations", "5",
                        "--shapes", "x:2x8", f"--json={tmp_path / 'c.json'}"], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert "onnxruntime" in p.stdout and "rel L2" in p.stdout
    r = json.loads((tmp_path / "c.json").read_text())
    assert r["operation"] == "benchmark" and r["compare"] == ["onnxruntime"] and len(r["results"]) == 2
    bad = subprocess.run([kiln_cli, "benchmark", "--model", str(path), "--compare=onnxruntime"], capture_output=True,
                         text=True, timeout=60, env=dict(env, KILN_PYTHON="/nonexistent/python"))
    assert bad.returncode != 0 and "KILN_PYTHON" in bad.stderr
