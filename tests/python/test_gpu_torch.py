"""kiln with PyTorch on a GPU (skipped without torch or CUDA): kiln.compile on torch-exported models called with CUDA
tensors returns CUDA tensors with no host copy and matches eager PyTorch; execute_async_v3 on a torch stream; a
Python calibrator fed CUDA tensors writes the same cache as `kiln calibrate` on the GPU."""
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import kiln  # noqa: E402

if kiln.default_backend() != "cuda":
    pytest.skip("kiln finds no GPU", allow_module_level=True)


def export(module, example, path, dynamo=False):
    torch.onnx.export(module.eval(), (example,), str(path), input_names=["x"], output_names=["y"],
                      opset_version=18 if dynamo else 17, dynamo=dynamo)
    return str(path)


def small_cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(32, 10))


class Block(torch.nn.Module):
    """A pre-norm transformer block: LayerNorm, 4-head attention (SDPA), LayerNorm, GELU MLP, residuals."""

    def __init__(self, d=64, heads=4):
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
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


def small_transformer():
    torch.manual_seed(0)
    return Block()


@pytest.mark.parametrize("make,shape,dynamo", [(small_cnn, (4, 3, 32, 32), False), (small_transformer, (2, 16, 64), False),
                                               (small_transformer, (2, 16, 64), True)])
def test_compile_with_cuda_tensors_matches_eager_without_host_copies(tmp_path, make, shape, dynamo):
    m = make().cuda().eval()
    x = torch.randn(*shape, device="cuda")
    engine = kiln.compile(export(m, x, tmp_path / "m.onnx", dynamo), tf32=False)
    assert engine.backend == "cuda"
    y = engine(x)  # first call: plans launches
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        y = engine(x)
        torch.cuda.synchronize()
    assert isinstance(y, torch.Tensor) and y.is_cuda and y.device == x.device
    names = [e.name for e in prof.events()]
    assert not any("Memcpy HtoD" in n or "Memcpy DtoH" in n for n in names), names
    with torch.no_grad():
        want = m(x)
    torch.testing.assert_close(y, want, rtol=1e-3, atol=1e-3)


def test_execute_async_v3_on_a_torch_stream(tmp_path):
    m = small_cnn().cuda().eval()
    x = torch.randn(4, 3, 32, 32, device="cuda")
    path = export(m, x, tmp_path / "m.onnx")
    logger = kiln.Logger(kiln.Logger.ERROR)
    builder = kiln.Builder(logger)
    network = builder.create_network()
    parser = kiln.OnnxParser(network, logger)
    assert parser.parse_from_file(path)
    config = builder.create_builder_config()
    config.clear_flag(kiln.BuilderFlag.TF32)
    engine = kiln.Runtime(logger).deserialize_cuda_engine(builder.build_serialized_network(network, config))
    context = engine.create_execution_context()
    y = torch.empty(tuple(context.get_tensor_shape("y")), device="cuda")
    context.set_tensor_address("x", x.data_ptr())
    context.set_tensor_address("y", y.data_ptr())
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        assert context.execute_async_v3(stream.cuda_stream)
    stream.synchronize()
    with torch.no_grad():
        torch.testing.assert_close(y, m(x), rtol=1e-3, atol=1e-3)


class TorchCalibrator(kiln.IInt8EntropyCalibrator2):
    def __init__(self, batches, cache):
        kiln.IInt8EntropyCalibrator2.__init__(self)
        self.batches, self.cache = list(batches), cache

    def get_batch(self, names):
        return [self.batches.pop(0)] if self.batches else None

    def read_calibration_cache(self):
        return None

    def write_calibration_cache(self, blob):
        with open(self.cache, "wb") as f:
            f.write(blob)


def test_python_calibrator_on_the_gpu_matches_kiln_calibrate(tmp_path, kiln_cli):
    m = small_cnn().cuda().eval()
    rng = np.random.default_rng(3)
    data = [rng.standard_normal((4, 3, 32, 32)).astype(np.float32) for _ in range(3)]
    path = export(m, torch.from_numpy(data[0]).cuda(), tmp_path / "m.onnx")
    logger = kiln.Logger(kiln.Logger.ERROR)
    builder = kiln.Builder(logger)
    network = builder.create_network()
    assert kiln.OnnxParser(network, logger).parse_from_file(path)
    config = builder.create_builder_config()
    config.set_flag(kiln.BuilderFlag.INT8)
    config.set_flag(kiln.BuilderFlag.FP16)
    config.int8_calibrator = TorchCalibrator([torch.from_numpy(d).cuda() for d in data], str(tmp_path / "py.cache"))
    try:
        builder.build_serialized_network(network, config)
    except kiln.KilnError as e:  # a GPU without INT8 kernels refuses the engine after calibrating
        assert "int8" in str(e).lower(), e
    os.makedirs(tmp_path / "calib")
    for i, d in enumerate(data):
        np.save(tmp_path / "calib" / f"b{i}.npy", d)
    subprocess.run([kiln_cli, "calibrate", f"--onnx={path}", f"--data={tmp_path / 'calib'}", "--algo=entropy",
                    f"--calib={tmp_path / 'cli.cache'}", "--backend=cuda"], check=True, capture_output=True)
    assert (tmp_path / "py.cache").read_bytes() == (tmp_path / "cli.cache").read_bytes()


class DlpackOnly:
    """A CUDA tensor seen only through DLPack (no __cuda_array_interface__), as JAX or TensorFlow arrays are."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, **kw):
        return self._t.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_cuda_dlpack_objects_in_place_and_out(tmp_path):
    m = small_cnn().cuda().eval()
    x = torch.randn(4, 3, 32, 32, device="cuda")
    engine = kiln.compile(export(m, x, tmp_path / "m.onnx"), tf32=False)
    y = engine(DlpackOnly(x))
    assert not isinstance(y, (np.ndarray, torch.Tensor)) and y.__dlpack_device__()[0] == 2  # a CUDA DLPack object
    yt = torch.from_dlpack(y)
    assert yt.is_cuda
    with torch.no_grad():
        torch.testing.assert_close(yt, m(x), rtol=1e-3, atol=1e-3)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        engine(DlpackOnly(x))
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    assert not any("Memcpy HtoD" in n or "Memcpy DtoH" in n for n in names), names
    with pytest.raises(kiln.KilnError, match="not contiguous"):
        engine(DlpackOnly(x.transpose(2, 3)))
    with pytest.raises(kiln.KilnError, match="float16, the engine takes float32"):
        engine(DlpackOnly(x.half()))
