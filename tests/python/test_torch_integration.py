"""kiln.torch (skipped without torch): kiln.torch.compile on a CNN and a transformer with both exporters, dynamic
shapes, save/load without re-export, and torch.compile(backend="kiln") with its eager fallback. On a GPU the
modules take and return CUDA tensors; without one they run on kiln's CPU backend with CPU tensors."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")  # torch.onnx's dynamo exporter

import kiln  # noqa: E402
import kiln.torch  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() and kiln.default_backend() == "cuda" else "cpu"


def small_cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(16, 10))


class Block(torch.nn.Module):
    """A pre-norm transformer block (SDPA attention, GELU MLP) returning a dict, to check output structure."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(a)
        y = x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))
        return {"hidden": y, "pooled": y.mean(dim=1)}


def small_transformer():
    torch.manual_seed(0)
    return Block()


def close(got, want):
    torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_compile_cnn_matches_eager(exporter):
    m = small_cnn().to(DEVICE).eval()
    x = torch.randn(2, 3, 16, 16, device=DEVICE)
    km = kiln.torch.compile(m, (x,), exporter=exporter, tf32=False)
    assert isinstance(km, torch.nn.Module) and km.engine.backend == DEVICE
    y = km(x)
    assert isinstance(y, torch.Tensor) and y.device == x.device
    with torch.no_grad():
        close(y, m(x))


def test_compile_transformer_keeps_the_output_structure():
    m = small_transformer().to(DEVICE).eval()
    x = torch.randn(2, 8, 32, device=DEVICE)
    km = kiln.torch.compile(m, x, tf32=False)
    y = km(x)
    with torch.no_grad():
        want = m(x)
    assert isinstance(y, dict) and set(y) == {"hidden", "pooled"}
    close(y["hidden"], want["hidden"])
    close(y["pooled"], want["pooled"])


def test_dynamic_batch_from_a_dim_and_save_load(tmp_path):
    m = small_cnn().to(DEVICE).eval()
    x = torch.randn(2, 3, 16, 16, device=DEVICE)
    batch = torch.export.Dim("batch", min=1, max=8)
    km = kiln.torch.compile(m, (x,), dynamic_shapes=({0: batch},), tf32=False)
    (inp,) = km.engine.inputs
    assert inp["profile"][0][0] == 1 and inp["profile"][2][0] == 8, inp
    for b in (1, 5, 8):
        xb = torch.randn(b, 3, 16, 16, device=DEVICE)
        with torch.no_grad():
            close(km(xb), m(xb))
    path = tmp_path / "cnn.kiln"
    km.save(path)
    loaded = kiln.torch.load(path)  # no export: the engine and the module's structure come from the file
    close(loaded(x), km(x))
    with pytest.raises(kiln.KilnError, match="outside|profile|range"):
        loaded(torch.randn(9, 3, 16, 16, device=DEVICE))
    (tmp_path / "bad.kiln").write_bytes(b"not a module")
    with pytest.raises(kiln.KilnError, match="not a module saved by kiln.torch"):
        kiln.torch.load(tmp_path / "bad.kiln")


def test_unbounded_dynamic_dim_asks_for_a_bound():
    m = small_cnn().to(DEVICE).eval()
    x = torch.randn(2, 3, 16, 16, device=DEVICE)
    with pytest.raises(kiln.KilnError, match="no upper bound"):
        kiln.torch.compile(m, (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))


def test_bad_calls_raise():
    m = small_cnn().to(DEVICE).eval()
    x = torch.randn(2, 3, 16, 16, device=DEVICE)
    km = kiln.torch.compile(m, (x,))
    with pytest.raises(kiln.KilnError, match="1 inputs|takes 1"):
        km(x, x)
    with pytest.raises(kiln.KilnError, match="example_inputs"):
        kiln.torch.compile(m, (3,))
    with pytest.raises(kiln.KilnError, match="exporter"):
        kiln.torch.compile(m, (x,), exporter="jit")


def test_torch_compile_backend_matches_eager():
    m = small_transformer().to(DEVICE).eval()
    x = torch.randn(2, 8, 32, device=DEVICE)
    torch._dynamo.reset()
    compiled = torch.compile(m, backend="kiln", options={"tf32": False})
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no eager fallback for this graph
        y = compiled(x)
        want = m(x)
    close(y["hidden"], want["hidden"])
    close(y["pooled"], want["pooled"])


class WithEigh(torch.nn.Module):
    """torch.linalg.eigh has no ONNX export: the graph must run eagerly, with a warning."""

    def forward(self, x):
        a = x @ x.transpose(-1, -2)
        return torch.linalg.eigh(a).eigenvalues + 1


def test_torch_compile_backend_falls_back_to_eager_with_a_warning():
    m = WithEigh()
    x = torch.randn(3, 4, 4, device=DEVICE)
    torch._dynamo.reset()
    compiled = torch.compile(m, backend="kiln")
    with torch.no_grad(), pytest.warns(RuntimeWarning, match="kiln: running this graph eagerly"):
        y = compiled(x)
    close(y, m(x))


def test_dlpack_only_objects_on_the_cpu_backend():
    """A host object that only speaks DLPack (no numpy or torch type) is read through DLPack."""

    class DlpackOnly:
        def __init__(self, t):
            self._t = t

        def __dlpack__(self, **kw):
            return self._t.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self._t.__dlpack_device__()

    m = small_cnn().eval()
    x = torch.randn(2, 3, 16, 16)
    engine = kiln.compile(kiln.torch._export(m, (x,), None, "dynamo", None), backend="cpu")
    y = engine(DlpackOnly(x))
    assert isinstance(y, np.ndarray)
    with torch.no_grad():
        close(torch.from_numpy(y), m(x))


def test_torch_compile_backend_runs_in_place_writes_eagerly():
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(1))

        def forward(self, x):
            self.count.add_(1)
            return x * self.count

    m = Counter().to(DEVICE)
    x = torch.ones(2, 3, device=DEVICE)
    torch._dynamo.reset()
    compiled = torch.compile(m, backend="kiln")
    with torch.no_grad(), pytest.warns(RuntimeWarning, match="in place"):
        first = compiled(x)
    second = compiled(x)
    assert float(first[0, 0]) == 1 and float(second[0, 0]) == 2 and float(m.count) == 2


def test_torch_compile_backend_notices_changed_weights():
    m = small_cnn().to(DEVICE).eval()
    x = torch.randn(2, 3, 16, 16, device=DEVICE)
    torch._dynamo.reset()
    compiled = torch.compile(m, backend="kiln", options={"tf32": False})
    with torch.no_grad():
        close(compiled(x), m(x))
        m[0].weight.mul_(2)
        with pytest.warns(RuntimeWarning, match="changed after it was built"):
            y = compiled(x)
        close(y, m(x))


def test_dynamic_shapes_by_argument_name_and_scalar_inputs():
    class Two(torch.nn.Module):
        def forward(self, x, m, s):
            return (x * s).sum(dim=1), m.sum(dim=1)

    mod = Two().to(DEVICE)
    x, m, s = torch.randn(2, 4, device=DEVICE), torch.randn(3, 5, device=DEVICE), torch.tensor(2.0, device=DEVICE)
    km = kiln.torch.compile(mod, (x, m, s), dynamic_shapes={"m": {0: torch.export.Dim("rows", max=16)},
                                                             "x": {0: torch.export.Dim("batch", max=8)}, "s": None},
                            tf32=False)
    prof = {i["name"]: i.get("profile") for i in km.engine.inputs}
    xs = [p for n, p in prof.items() if p and p[1][1] == 4]
    ms = [p for n, p in prof.items() if p and p[1][1] == 5]
    assert xs and xs[0][2][0] == 8 and ms and ms[0][2][0] == 16, prof
    got = km(torch.randn(7, 4, device=DEVICE), torch.randn(11, 5, device=DEVICE), s)
    assert got[0].shape == (7,) and got[1].shape == (11,)
    with pytest.raises(kiln.KilnError, match="not arguments"):
        kiln.torch.compile(mod, (x, m, s), dynamic_shapes={"y": {0: torch.export.Dim("b", max=4)}})


def test_torch_compile_backend_folds_buffers():
    m = small_cnn().to(DEVICE).eval()  # BatchNorm's running stats are buffers: constants of the engine
    x = torch.randn(2, 3, 16, 16, device=DEVICE)
    torch._dynamo.reset()
    seen = []
    orig = kiln.torch.compile

    def spy(module, examples, **kw):
        seen.append(len(examples))
        return orig(module, examples, **kw)

    kiln.torch.compile = spy
    try:
        compiled = torch.compile(m, backend="kiln", options={"tf32": False})
        with torch.no_grad():
            close(compiled(x), m(x))
    finally:
        kiln.torch.compile = orig
    assert seen == [1], seen  # only x is an engine input


def test_damaged_save_file(tmp_path):
    p = tmp_path / "bad.kiln"
    p.write_bytes(kiln.torch._MAGIC + (5).to_bytes(8, "little") + b"{oops" + b"x")
    with pytest.raises(kiln.KilnError, match="damaged"):
        kiln.torch.load(p)
