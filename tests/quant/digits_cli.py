"""What the digits accuracy tests (test_int8_digits.py, test_fp8_digits.py) share: the trained model and its data
written to a folder, and the kiln commands they run on them (CPU backend)."""
import json
import subprocess
from pathlib import Path

import numpy as np

import digits


def run(cmd, expect_ok=True):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if expect_ok:
        assert r.returncode == 0, f"{' '.join(cmd)}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def prepare(d):
    """Trains the digits CNN (seed fixed) and writes it as ONNX, the held-out images, and 320 training images in 10
    calibration batches, to folder `d`."""
    xtr, ytr, xte, yte = digits.load_split()
    model = digits.DigitsCnn(seed=0).train(xtr, ytr)
    fp32 = d / "digits_fp32.onnx"
    model.to_onnx(str(fp32))
    np.save(d / "test_images.npy", xte)
    calib = d / "calib"
    calib.mkdir()
    for i in range(10):  # 320 training images in 10 batches
        np.save(calib / f"batch_{i:02d}.npy", xtr[i * 32:(i + 1) * 32])
    return {"dir": d, "fp32": fp32, "xtr": xtr, "xte": xte, "yte": yte, "calib": calib}


def build(kiln, onnx_path, engine, n, *flags):
    report = Path(str(engine) + ".json")
    run([kiln, "build", f"--onnx={onnx_path}", "--backend=cpu", f"--shapes=image:{n}x1x8x8",
         f"--saveEngine={engine}", f"--json={report}", *flags])
    return json.loads(report.read_text())


def predict(kiln, engine, images_npy, out_dir):
    run([kiln, "run", f"--loadEngine={engine}", f"--loadInputs=image:{images_npy}", f"--exportOutput={out_dir}"])
    return np.load(Path(out_dir) / "logits.npy")
