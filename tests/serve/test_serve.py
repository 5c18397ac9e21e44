"""kiln serve with Triton's Python client: health, metadata, config, infer over HTTP (JSON and binary) and gRPC with
outputs equal to `kiln run`'s; every bad request gets its error; 32 concurrent clients x 100 requests without an
error or cross-talk, merged into batches (the batch-size metric); repository load/unload; graceful shutdown."""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conftest import Served


def weights(repository):
    w = np.load(os.path.join(os.path.dirname(repository), "mlp_weights.npz"))
    return w["w1"], w["b1"], w["w2"]


def mlp_ref(repository, x):
    w1, b1, w2 = weights(repository)
    return np.maximum(x @ w1 + b1, 0) @ w2


def http_client(server, **kw):
    return httpclient.InferenceServerClient(f"127.0.0.1:{server.http}", **kw)


def grpc_client(server):
    return grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc}")


def zeros_input(module, name="x", shape=(1, 8)):
    i = module.InferInput(name, list(shape), "FP32")
    i.set_data_from_numpy(np.zeros(shape, np.float32))
    return i


def raw(server, method, path, body=b"", headers=None):
    c = http.client.HTTPConnection("127.0.0.1", server.http, timeout=30)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def test_health_metadata_and_config(server):
    for c in (http_client(server), grpc_client(server)):
        assert c.is_server_live()
        assert c.is_model_ready("mlp") and c.is_model_ready("mlp_engine") and c.is_model_ready("typed")
        assert not c.is_model_ready("broken")
    assert not http_client(server).is_server_ready()  # "broken" should be loaded and is not
    meta = http_client(server).get_model_metadata("mlp")
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 8]}]
    assert meta["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}]
    gmeta = grpc_client(server).get_model_metadata("typed")
    assert [(t.name, t.datatype, list(t.shape)) for t in gmeta.inputs] == [
        ("a", "FP32", [-1, 4]), ("mask", "BOOL", [-1, 4]), ("k", "INT64", [-1, 1])]
    config = http_client(server).get_model_config("mlp")
    assert config["max_batch_size"] == 8 and config["input"][0]["dims"] == [8]
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 20000
    gconfig = grpc_client(server).get_model_config("mlp_engine").config  # completed from the engine
    assert gconfig.max_batch_size == 16 and [i.name for i in gconfig.input] == ["x"]
    smeta = http_client(server).get_server_metadata()
    assert smeta["name"] == "kiln" and "binary_tensor_data" in smeta["extensions"]


@pytest.mark.parametrize("model", ["mlp", "mlp_engine"])
def test_infer_http_json_binary_and_grpc_match_kiln_run(server, repository, kiln, tmp_path, model):
    x = np.random.default_rng(3).standard_normal((3, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    subprocess.run([kiln, "run", f"--loadEngine={repository}/mlp_engine/1/model.engine", f"--loadInputs=x:{tmp_path}/x.npy",
                    f"--exportOutput={out}"], check=True, stdout=subprocess.DEVNULL)
    want = np.load(out / "y.npy")
    for binary in (False, True):
        inp = httpclient.InferInput("x", [3, 8], "FP32")
        inp.set_data_from_numpy(x, binary_data=binary)
        r = http_client(server).infer(model, [inp], outputs=[httpclient.InferRequestedOutput("y", binary_data=binary)])
        np.testing.assert_allclose(r.as_numpy("y"), want, rtol=1e-5, atol=1e-5)
    ginp = grpcclient.InferInput("x", [3, 8], "FP32")
    ginp.set_data_from_numpy(x)
    r = grpc_client(server).infer(model, [ginp], request_id="abc")
    np.testing.assert_allclose(r.as_numpy("y"), want, rtol=1e-5, atol=1e-5)
    assert r.get_response().id == "abc"


def test_infer_bool_int64_fp16_tensors(server):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 4)).astype(np.float32)
    mask = rng.random((2, 4)) > 0.5
    k = np.array([[3], [-2]], np.int64)
    y = np.where(mask, a, 2 * a) + k.astype(np.float32)
    for binary in (False, True):
        inputs = []
        for name, arr, dt in (("a", a, "FP32"), ("mask", mask, "BOOL"), ("k", k, "INT64")):
            i = httpclient.InferInput(name, list(arr.shape), dt)
            i.set_data_from_numpy(arr, binary_data=binary)
            inputs.append(i)
        r = http_client(server).infer("typed", inputs, outputs=[httpclient.InferRequestedOutput("y", binary),
                                                                httpclient.InferRequestedOutput("z", binary)])
        np.testing.assert_allclose(r.as_numpy("y"), y, rtol=1e-6)
        assert r.as_numpy("z").dtype == np.float16
        np.testing.assert_allclose(r.as_numpy("z"), y.astype(np.float16), rtol=1e-3)
    ginputs = []
    for name, arr, dt in (("a", a, "FP32"), ("mask", mask, "BOOL"), ("k", k, "INT64")):
        i = grpcclient.InferInput(name, list(arr.shape), dt)
        i.set_data_from_numpy(arr)
        ginputs.append(i)
    r = grpc_client(server).infer("typed", ginputs, outputs=[grpcclient.InferRequestedOutput("z")])
    np.testing.assert_allclose(r.as_numpy("z"), y.astype(np.float16), rtol=1e-3)
    assert r.as_numpy("y") is None  # only what was asked for


def infer_json(server, model, body, headers=None):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return raw(server, "POST", f"/v2/models/{model}/infer", data, headers)


def x_input(shape=(1, 8), name="x", datatype="FP32", data=None):
    n = int(np.prod(shape))
    return {"name": name, "shape": list(shape), "datatype": datatype, "data": data if data is not None else [0.5] * n}


@pytest.mark.parametrize("model,body,status,words", [
    ("nope", {"inputs": [x_input()]}, 404, "unknown model 'nope'"),
    ("mlp/versions/7", {"inputs": [x_input()]}, 404, "no version '7'"),
    ("broken", {"inputs": [x_input()]}, 503, "not ready"),
    ("mlp", {"inputs": [x_input(name="z")]}, 400, "no input 'z'"),
    ("mlp", {"inputs": [x_input(datatype="INT32", data=[1] * 8)]}, 400, "is INT32, the model takes FP32"),
    ("mlp", {"inputs": [x_input(shape=(1, 7))]}, 400, "shape [1,7]"),
    ("mlp", {"inputs": [x_input(shape=(9, 8))]}, 400, "outside the model's range [1, 8]"),
    ("mlp", {"inputs": [x_input(data=[0.5] * 7)]}, 400, "data holds 7 elements"),
    ("mlp", {"inputs": [x_input(data=["a"] * 8)]}, 400, "is not a number"),
    ("mlp", {"inputs": [x_input(datatype="BYTES")]}, 400, "BYTES"),
    ("mlp", {"inputs": []}, 400, "non-empty array"),
    ("mlp", {"inputs": [x_input()], "outputs": [{"name": "nope"}]}, 400, "no output 'nope'"),
    ("mlp", {"inputs": [x_input()], "parameters": {"sequence_id": 3}}, 400, "no sequence batching"),
    ("typed", {"inputs": [x_input(shape=(1, 4), name="a")]}, 400, "input 'mask' is missing"),
    ("mlp", b"{\"inputs\": [", 400, "not valid JSON"),
    ("mlp", {"inputs": [x_input(shape=(1099511627776, 8), data=[])]}, 413, "too many elements"),
    ("mlp", {"inputs": [x_input()], "parameters": {"timeout": 10**16}}, 200, None),
    ("mlp", b"[" * 100000, 400, "nests deeper"),
])
def test_bad_requests_get_their_error(server, model, body, status, words):
    got, data = infer_json(server, model, body)
    assert got == status, data
    if words:
        assert words in json.loads(data)["error"], data


def test_bad_binary_payloads(server):
    header = json.dumps({"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 32}}]}).encode()
    body = header + np.zeros(8, np.float32).tobytes()
    ok, _ = infer_json(server, "mlp", body, {"Inference-Header-Content-Length": str(len(header))})
    assert ok == 200
    truncated = header + np.zeros(5, np.float32).tobytes()
    got, data = infer_json(server, "mlp", truncated, {"Inference-Header-Content-Length": str(len(header))})
    assert got == 400 and b"runs past" in data
    got, data = infer_json(server, "mlp", body, {"Inference-Header-Content-Length": str(len(body) + 5)})
    assert got == 400 and b"Inference-Header-Content-Length" in data
    got, data = infer_json(server, "mlp", body + b"xx", {"Inference-Header-Content-Length": str(len(header))})
    assert got == 400 and b"belong to no input" in data
    # More than --http-max-input-size (4 MB here): refused before it is read.
    got, data = infer_json(server, "mlp", b"x" * 5_000_000)
    assert got == 413
    # A client that goes away mid-request: the server is unharmed.
    s = socket.create_connection(("127.0.0.1", server.http))
    s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"inputs\"")
    s.close()
    assert http_client(server).is_server_live()


def test_bool_elements_are_0_or_1_and_output_binary_overrides(server):
    header = json.dumps({"inputs": [
        {"name": "a", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "mask", "shape": [1, 4], "datatype": "BOOL", "parameters": {"binary_data_size": 4}},
        {"name": "k", "shape": [1, 1], "datatype": "INT64", "data": [0]}]}).encode()
    got, data = infer_json(server, "typed", header + bytes([1, 2, 0, 1]),
                           {"Inference-Header-Content-Length": str(len(header))})
    assert got == 400 and b"BOOL elements are 0 or 1" in data, data
    # binary_data_output for the request, binary_data: false for one output: that output comes back as JSON.
    body = {"inputs": [{"name": "a", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]},
                       {"name": "mask", "shape": [1, 4], "datatype": "BOOL", "data": [True, False, True, False]},
                       {"name": "k", "shape": [1, 1], "datatype": "INT64", "data": [1]}],
            "parameters": {"binary_data_output": True},
            "outputs": [{"name": "y", "parameters": {"binary_data": False}}, {"name": "z"}]}
    c = http.client.HTTPConnection("127.0.0.1", server.http, timeout=30)
    c.request("POST", "/v2/models/typed/infer", body=json.dumps(body).encode())
    r = c.getresponse()
    raw_body = r.read()
    n = int(r.getheader("Inference-Header-Content-Length"))
    head = json.loads(raw_body[:n])
    y, z = head["outputs"]
    assert y["data"] == [2, 5, 4, 9] and "data" not in z and z["parameters"]["binary_data_size"] == 8
    assert np.frombuffer(raw_body[n:], np.float16).tolist() == [2, 5, 4, 9]


def test_failed_reload_keeps_the_loaded_model(server, repository):
    import shutil
    src, dst = repository / "mlp_engine", repository / "reloadable"
    shutil.copytree(src, dst)
    c = http_client(server)
    c.load_model("reloadable")
    assert c.is_model_ready("reloadable")
    (dst / "config.pbtxt").write_text("max_batch_size: \"many\"\n")
    with pytest.raises(InferenceServerException, match="keep serving"):
        c.load_model("reloadable")
    assert c.is_model_ready("reloadable")
    assert c.infer("reloadable", [zeros_input(httpclient)]).as_numpy("y").shape == (1, 4)
    c.unload_model("reloadable")
    shutil.rmtree(dst)


def test_instance_group_gpus_are_checked_against_the_devices(server, repository):
    """Each gpus id must be a device the backend has: on the cpu backend (KIND_CPU) that is the host, device 0 only,
    so gpus: [0, 3] is refused naming the model, the id and what there is; gpus: [0] loads and serves."""
    import shutil
    src, dst = repository / "mlp_engine", repository / "gpus_checked"
    shutil.copytree(src, dst)
    c = http_client(server)
    try:
        (dst / "config.pbtxt").write_text("instance_group [ { kind: KIND_CPU gpus: [ 0, 3 ] } ]\n")
        with pytest.raises(InferenceServerException,
                           match=r"model 'gpus_checked': instance_group gpus \[0, 3\]: there is no GPU 3: the cpu "
                                 r"backend runs on the host, which is device 0 only"):
            c.load_model("gpus_checked")
        assert not c.is_model_ready("gpus_checked")
        (dst / "config.pbtxt").write_text("instance_group [ { kind: KIND_CPU gpus: [ 0 ] count: 2 } ]\n")
        c.load_model("gpus_checked")
        assert c.is_model_ready("gpus_checked")
        assert c.infer("gpus_checked", [zeros_input(httpclient)]).as_numpy("y").shape == (1, 4)
        c.unload_model("gpus_checked")
    finally:
        shutil.rmtree(dst)


def test_grpc_errors(server):
    c = grpc_client(server)
    with pytest.raises(InferenceServerException, match="unknown model"):
        c.infer("nope", [zeros_input(grpcclient)])
    bad = grpcclient.InferInput("x", [1, 8], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 8), np.float32))
    with pytest.raises(InferenceServerException, match="no output 'q'"):
        c.infer("mlp", [bad], outputs=[grpcclient.InferRequestedOutput("q")])


def test_request_timeout_while_queued(server):
    # The batching window is 20 ms: a request allowed 1 us in the queue times out there.
    got, data = infer_json(server, "mlp", {"inputs": [x_input()], "parameters": {"timeout": 1}})
    assert got == 504 and b"timed out" in data


def test_concurrent_clients_get_their_own_results_batched(server, repository):
    def metric(name):
        text = raw(server, "GET", "/metrics")[1].decode() if server.metrics == server.http else \
            http.client.HTTPConnection("127.0.0.1", server.metrics)
        if not isinstance(text, str):
            text.request("GET", "/metrics")
            text = text.getresponse().read().decode()
        m = re.search(rf'^{name}{{model="mlp",version="1"}} (\d+)', text, re.M)
        return int(m.group(1))

    before_exec, before_count = metric("nv_inference_exec_count"), metric("nv_inference_count")
    errors, mismatches = [], []

    def client(seed):
        c = http_client(server)
        rng = np.random.default_rng(seed)
        for i in range(100):
            b = 1 + (i % 2)
            x = rng.standard_normal((b, 8)).astype(np.float32)
            inp = httpclient.InferInput("x", [b, 8], "FP32")
            inp.set_data_from_numpy(x, binary_data=bool(i % 3))
            try:
                r = c.infer("mlp", [inp], request_id=f"{seed}-{i}")
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
                continue
            y = r.as_numpy("y")
            if y.shape != (b, 4) or not np.allclose(y, mlp_ref(repository, x), rtol=1e-4, atol=1e-4) or \
                    r.get_response()["id"] != f"{seed}-{i}":
                mismatches.append((seed, i))

    threads = [threading.Thread(target=client, args=(s,)) for s in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert not mismatches, mismatches[:5]
    executions = metric("nv_inference_exec_count") - before_exec
    samples = metric("nv_inference_count") - before_count
    assert samples == 32 * 150
    assert executions < 32 * 100, "requests were never merged into batches"  # batch sizes above 1 on average


def test_statistics_extension(server):
    inp = httpclient.InferInput("x", [2, 8], "FP32")
    inp.set_data_from_numpy(np.ones((2, 8), np.float32))
    http_client(server).infer("mlp", [inp])
    h = http_client(server).get_inference_statistics("mlp")["model_stats"]
    g = grpc_client(server).get_inference_statistics("mlp", as_json=True)["model_stats"]
    for stats in (h, g):
        (m,) = stats
        assert m["name"] == "mlp" and m["version"] == "1"
        success = m["inference_stats"]["success"]
        assert int(success["count"]) >= 1 and int(success["ns"]) > 0
        assert int(m["inference_count"]) >= 2 and int(m["execution_count"]) >= 1
        assert any(int(b["batch_size"]) >= 2 for b in m["batch_stats"])
    everything = http_client(server).get_inference_statistics()["model_stats"]
    assert {"mlp", "mlp_engine", "typed"} <= {m["name"] for m in everything}
    with pytest.raises(InferenceServerException, match="unknown model"):
        grpc_client(server).get_inference_statistics("nope")


def test_repository_load_unload(server):
    c = http_client(server)
    index = {m["name"]: m for m in c.get_model_repository_index()}
    assert index["mlp"]["state"] == "READY" and index["broken"]["state"] == "UNAVAILABLE"
    c.unload_model("mlp_engine")
    assert not c.is_model_ready("mlp_engine")
    with pytest.raises(InferenceServerException):
        c.infer("mlp_engine", [zeros_input(httpclient)])
    grpc_client(server).load_model("mlp_engine")
    assert c.is_model_ready("mlp_engine")
    with pytest.raises(InferenceServerException, match="failed to load model 'broken'"):
        c.load_model("broken")


def test_graceful_shutdown_finishes_requests_in_flight(kiln, repository):
    s = Served(kiln, repository, "--model-control-mode=explicit", "--load-model=slow")
    results = []

    def one():
        inp = httpclient.InferInput("x", [1, 8], "FP32")
        inp.set_data_from_numpy(np.ones((1, 8), np.float32))
        try:
            results.append(http_client(s).infer("slow", [inp]).as_numpy("y").shape)
        except Exception as e:  # noqa: BLE001
            results.append(repr(e))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    # The requests wait in the 5 s batching window: SIGTERM once all four are queued.
    deadline = time.time() + 30
    while time.time() < deadline:
        c = http.client.HTTPConnection("127.0.0.1", s.metrics, timeout=5)
        c.request("GET", "/metrics")
        m = re.search(r'^nv_inference_pending_request_count{model="slow",version="1"} (\d+)',
                      c.getresponse().read().decode(), re.M)
        if m and int(m.group(1)) == 4:
            break
        time.sleep(0.02)
    code, out = s.stop(signal.SIGTERM)
    for t in threads:
        t.join()
    assert code == 0, out
    assert "finishing the requests in flight" in out
    assert results == [(1, 4)] * 4, results
