"""pytest setup for the quantization tests: the --kiln binary and the --backend that calibrates."""
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def pytest_addoption(parser):
    parser.addoption("--kiln", default=str(HERE.parent.parent / "build" / "bin" / "kiln"),
                     help="path to the kiln binary (default: build/bin/kiln under the repo root)")
    parser.addoption("--calibrate-backend", default="cpu",
                     help="backend kiln calibrate runs the float model on (cpu, or cuda on a GPU machine)")


@pytest.fixture(scope="session")
def kiln(request):
    path = Path(request.config.getoption("--kiln")).resolve()
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"kiln binary not found at {path}: build it or pass --kiln PATH", pytrace=False)
    return str(path)


@pytest.fixture(scope="session")
def calibrate_backend(request):
    return request.config.getoption("--calibrate-backend")
