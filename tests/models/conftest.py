"""pytest setup for the model tests: the --kiln option and a session folder for generated models."""
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))  # so that `import builders` works whatever the rootdir


def pytest_addoption(parser):
    parser.addoption("--kiln", default=str(REPO_ROOT / "build" / "bin" / "kiln"),
                     help="path to the kiln binary (default: build/bin/kiln under the repo root)")
    parser.addoption("--keep-models", default=None,
                     help="write the generated models, inputs and outputs to this folder and keep them")


@pytest.fixture(scope="session")
def kiln(request):
    path = Path(request.config.getoption("--kiln"))
    if not path.is_absolute():
        path = (Path.cwd() / path).resolve()
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"kiln binary not found at {path}: build it (cmake + ninja) or pass --kiln PATH",
                    pytrace=False)
    return str(path)


@pytest.fixture(scope="session")
def model_dir(request, tmp_path_factory):
    keep = request.config.getoption("--keep-models")
    if keep:
        d = Path(keep).resolve()
        d.mkdir(parents=True, exist_ok=True)
        return d
    return tmp_path_factory.mktemp("models")
