"""kiln serve's tests: a model repository (make_repository.py, run with --model-python, which has onnx) served by
`kiln serve` (--kiln) on loopback ports the system picks, driven with Triton's own Python client (tritonclient) and
raw HTTP for malformed requests. Run with a Python that has tritonclient[http,grpc] and pytest (scripts/deps makes
one: the client venv)."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest


def pytest_addoption(parser):
    parser.addoption("--kiln", required=True, help="the kiln command line")
    parser.addoption("--model-python", default=sys.executable, help="a Python with onnx (writes the models)")


class Served:
    """A running `kiln serve`: its ports and process."""

    def __init__(self, kiln, repo, *extra):
        self.proc = subprocess.Popen(
            [kiln, "serve", f"--model-repository={repo}", "--http-port=0", "--grpc-port=0", "--metrics-port=0",
             "--http-address=127.0.0.1", "--grpc-address=127.0.0.1", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        deadline = time.time() + 120
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line.rstrip())
            if line.startswith("kiln serve: ready"):
                break
        text = "\n".join(self.lines)
        ports = {k: int(v) for k, v in re.findall(r"kiln serve: (HTTP/REST|gRPC|metrics) at [\d.]+:(\d+)", text)}
        if "HTTP/REST" not in ports:
            self.proc.kill()
            raise RuntimeError("kiln serve did not start:\n" + text)
        self.http, self.grpc, self.metrics = ports["HTTP/REST"], ports.get("gRPC"), ports.get("metrics")

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rest = self.proc.stdout.read() if self.proc.stdout else ""
        return self.proc.returncode, rest


@pytest.fixture(scope="session")
def kiln(request):
    return request.config.getoption("--kiln")


@pytest.fixture(scope="session")
def repository(tmp_path_factory, kiln, request):
    root = tmp_path_factory.mktemp("serve")
    repo = root / "models"
    subprocess.run([request.config.getoption("--model-python"), os.path.join(os.path.dirname(__file__),
                                                                              "make_repository.py"), str(repo), kiln],
                   check=True)
    return repo


@pytest.fixture(scope="session")
def server(kiln, repository):
    s = Served(kiln, repository, "--exit-on-error=false", "--model-control-mode=explicit", "--load-model=*",
               "--http-max-input-size=4000000", "--allow-client-shm=true")
    yield s
    s.stop()
