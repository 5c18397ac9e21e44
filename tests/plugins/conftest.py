"""pytest setup for the plugin command-line tests: the kiln binary, the example plugin library, and the two
libraries the loader must refuse."""
import os
from pathlib import Path

import pytest


def pytest_addoption(parser):
    parser.addoption("--kiln", required=True, help="path to the kiln binary")
    parser.addoption("--plugins", required=True, help="path to libkiln_example_plugins.so")
    parser.addoption("--bad-abi-plugin", required=True, help="a plugin library of another plugin ABI")
    parser.addoption("--not-a-plugin", required=True, help="a shared library without kiln's entry point")


def _file(request, option):
    path = Path(request.config.getoption(option)).resolve()
    if not path.is_file():
        pytest.fail(f"{option}: {path} does not exist (build the tree first)", pytrace=False)
    return str(path)


@pytest.fixture(scope="session")
def kiln(request):
    path = _file(request, "--kiln")
    assert os.access(path, os.X_OK), path
    return path


@pytest.fixture(scope="session")
def plugins(request):
    return _file(request, "--plugins")


@pytest.fixture(scope="session")
def bad_abi_plugin(request):
    return _file(request, "--bad-abi-plugin")


@pytest.fixture(scope="session")
def not_a_plugin(request):
    return _file(request, "--not-a-plugin")
