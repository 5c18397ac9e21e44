"""kiln serve's system shared memory extension with Triton's Python client (tritonclient.utils.shared_memory, HTTP and
gRPC): inputs read from and outputs written to registered regions give the answers the same request gets without
shared memory; status lists the regions; bad regions, offsets and sizes get Triton's errors; a region unregistered
while a request that uses it is queued stays mapped until it is answered; CUDA shared memory is refused cleanly; and a
server started without --allow-client-shm refuses registration."""
import http.client
import json
import os
import re
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from conftest import Served
from test_serve import grpc_client, http_client, infer_json, mlp_ref


def key(name):
    return f"/kiln_test_{os.getpid()}_{name}"


@pytest.fixture
def region():
    """A shared-memory object of 4 KiB (tritonclient's), destroyed after the test; the server side is unregistered by
    the test (or left for the next: names are the test's own)."""
    handles = []

    def make(name, size=4096):
        h = shm.create_shared_memory_region(name, key(name), size)
        handles.append(h)
        return h

    yield make
    for h in handles:
        shm.destroy_shared_memory_region(h)


def test_inputs_and_outputs_in_shared_memory_match_the_plain_answer(server, repository, region):
    x = np.random.default_rng(11).standard_normal((3, 8)).astype(np.float32)
    want = mlp_ref(repository, x)
    plain = httpclient.InferInput("x", [3, 8], "FP32")
    plain.set_data_from_numpy(x)
    np.testing.assert_allclose(http_client(server).infer("mlp", [plain]).as_numpy("y"), want, rtol=1e-4, atol=1e-4)

    h = region("io")
    shm.set_shared_memory_region(h, [x])  # input at offset 0 (96 bytes); the output at 200 (48 bytes)
    for module, client in ((httpclient, http_client(server)), (grpcclient, grpc_client(server))):
        name = f"io_{module.__name__.split('.')[-1]}"
        client.register_system_shared_memory(name, key("io"), 4096)
        inp = module.InferInput("x", [3, 8], "FP32")
        inp.set_shared_memory(name, x.nbytes)
        out = module.InferRequestedOutput("y")
        out.set_shared_memory(name, 48, offset=200)
        r = client.infer("mlp", [inp], outputs=[out])
        got = shm.get_contents_as_numpy(h, np.float32, [3, 4], offset=200)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        y = r.get_output("y")
        if module is httpclient:
            assert y["shape"] == [3, 4] and "data" not in y
            assert y["parameters"] == {"shared_memory_region": name, "shared_memory_offset": 200,
                                       "shared_memory_byte_size": 48}
        else:
            assert list(y.shape) == [3, 4] and y.parameters["shared_memory_region"].string_param == name
            assert y.parameters["shared_memory_offset"].int64_param == 200
        shm.set_shared_memory_region(h, [np.zeros((3, 4), np.float32)], offset=200)  # for the next protocol's answer
        client.unregister_system_shared_memory(name)


def test_registered_at_an_offset_and_mixed_with_request_data(server, region):
    # The region starts 100 bytes into the object (not page-aligned); "a" and "k" are read from it, "mask" comes in
    # the request (gRPC: raw_input_contents holds only mask's entry); z is written to the region, y is in the response.
    rng = np.random.default_rng(12)
    a = rng.standard_normal((2, 4)).astype(np.float32)
    mask = rng.random((2, 4)) > 0.5
    k = np.array([[3], [-2]], np.int64)
    y = np.where(mask, a, 2 * a) + k.astype(np.float32)
    h = region("typed", 1024)
    shm.set_shared_memory_region(h, [a], offset=100)        # region offset 0: a (32 bytes)
    shm.set_shared_memory_region(h, [k], offset=100 + 64)   # region offset 64: k (16 bytes)
    for module, client in ((httpclient, http_client(server)), (grpcclient, grpc_client(server))):
        name = f"typed_{module.__name__.split('.')[-1]}"
        client.register_system_shared_memory(name, key("typed"), 512, offset=100)
        ia = module.InferInput("a", [2, 4], "FP32")
        ia.set_shared_memory(name, 32)
        im = module.InferInput("mask", [2, 4], "BOOL")
        im.set_data_from_numpy(mask)
        ik = module.InferInput("k", [2, 1], "INT64")
        ik.set_shared_memory(name, 16, offset=64)
        oz = module.InferRequestedOutput("z")
        oz.set_shared_memory(name, 16, offset=128)
        r = client.infer("typed", [ia, im, ik], outputs=[module.InferRequestedOutput("y"), oz])
        np.testing.assert_allclose(r.as_numpy("y"), y, rtol=1e-6)
        z = shm.get_contents_as_numpy(h, np.float16, [2, 4], offset=100 + 128)
        np.testing.assert_allclose(z, y.astype(np.float16), rtol=1e-3)
        client.unregister_system_shared_memory(name)


def test_status_lists_the_regions(server, region):
    region("status")
    c, g = http_client(server), grpc_client(server)
    c.register_system_shared_memory("status_a", key("status"), 1024)
    g.register_system_shared_memory("status_b", key("status"), 2048, offset=1024)
    try:
        listed = {r["name"]: r for r in c.get_system_shared_memory_status()}
        assert listed["status_a"] == {"name": "status_a", "key": key("status"), "offset": 0, "byte_size": 1024}
        assert listed["status_b"] == {"name": "status_b", "key": key("status"), "offset": 1024, "byte_size": 2048}
        assert c.get_system_shared_memory_status("status_b") == [listed["status_b"]]
        regions = g.get_system_shared_memory_status(as_json=True)["regions"]
        assert regions["status_a"]["key"] == key("status") and int(regions["status_b"]["offset"]) == 1024
        assert list(g.get_system_shared_memory_status("status_a").regions) == ["status_a"]
        for client in (c, g):
            with pytest.raises(InferenceServerException, match="Unable to find system shared memory region"):
                client.get_system_shared_memory_status("nope")
        assert "system_shared_memory" in c.get_server_metadata()["extensions"]
    finally:
        c.unregister_system_shared_memory("status_a")
        g.unregister_system_shared_memory("status_b")
    assert not [r for r in c.get_system_shared_memory_status() if r["name"].startswith("status_")]


def shm_input(module, region_name, byte_size=32, offset=0, shape=(1, 8)):
    i = module.InferInput("x", list(shape), "FP32")
    i.set_shared_memory(region_name, byte_size, offset=offset)
    return i


def test_bad_regions_offsets_and_sizes(server, region):
    region("bad", 256)
    c, g = http_client(server), grpc_client(server)
    c.register_system_shared_memory("bad", key("bad"), 256)
    try:
        for module, client in ((httpclient, c), (grpcclient, g)):
            with pytest.raises(InferenceServerException, match="Unable to find shared memory region: 'nope'"):
                client.infer("mlp", [shm_input(module, "nope")])
            with pytest.raises(InferenceServerException, match="Invalid offset for shared memory region: 'bad'"):
                client.infer("mlp", [shm_input(module, "bad", offset=256)])
            with pytest.raises(InferenceServerException, match=r"Invalid offset \+ byte size .* 'bad'"):
                client.infer("mlp", [shm_input(module, "bad", offset=240)])
            with pytest.raises(InferenceServerException, match=r"input 'x': shared_memory_byte_size 28 .*takes 32"):
                client.infer("mlp", [shm_input(module, "bad", byte_size=28)])
            small = module.InferRequestedOutput("y")
            small.set_shared_memory("bad", 8, offset=64)
            with pytest.raises(InferenceServerException, match="should be at least 16 bytes"):
                client.infer("mlp", [shm_input(module, "bad")], outputs=[small])
            # Registration: an object that is not there, past its end, a name taken.
            with pytest.raises(InferenceServerException, match="unable to open shared memory object"):
                client.register_system_shared_memory("ghost", key("ghost"), 64)
            with pytest.raises(InferenceServerException, match="run past the end"):
                client.register_system_shared_memory("big", key("bad"), 512)
            with pytest.raises(InferenceServerException, match="already in manager"):
                client.register_system_shared_memory("bad", key("bad"), 64)
        # Raw HTTP: the status codes, and an input with both data and a region.
        got, data = infer_json(server, "mlp", {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32",
                                                          "parameters": {"shared_memory_region": "nope",
                                                                         "shared_memory_byte_size": 32}}]})
        assert got == 404 and b"Unable to find shared memory region" in data, data
        got, data = infer_json(server, "mlp", {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32",
                                                          "data": [0] * 8,
                                                          "parameters": {"shared_memory_region": "bad",
                                                                         "shared_memory_byte_size": 32}}]})
        assert got == 400 and b"set only one of" in data, data
        got, data = infer_json(server, "mlp", {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32",
                                                          "parameters": {"shared_memory_region": "bad"}}]})
        assert got == 400 and b"'shared_memory_byte_size' must be specified" in data, data
        c2 = http.client.HTTPConnection("127.0.0.1", server.http, timeout=30)
        c2.request("POST", "/v2/systemsharedmemory/region/x/register", body=json.dumps({"byte_size": 8}))
        r = c2.getresponse()
        assert r.status == 400 and b"no 'key'" in r.read()
    finally:
        c.unregister_system_shared_memory("bad")
    # Unregistered: a request naming it fails cleanly, and the server goes on.
    for module, client in ((httpclient, c), (grpcclient, g)):
        with pytest.raises(InferenceServerException, match="Unable to find shared memory region: 'bad'"):
            client.infer("mlp", [shm_input(module, "bad")])
    c.unregister_system_shared_memory("never_registered")  # no error, as Triton answers
    assert c.is_server_live()


def pending(server, model):
    c = http.client.HTTPConnection("127.0.0.1", server.metrics, timeout=5)
    c.request("GET", "/metrics")
    m = re.search(rf'^nv_inference_pending_request_count{{model="{model}",version="1"}} (\d+)',
                  c.getresponse().read().decode(), re.M)
    return int(m.group(1)) if m else 0


def test_unregister_while_a_request_waits_on_the_region(server, repository, region):
    # "slow" batches for 5 s: the request waits in its queue while its region is unregistered; it still reads its
    # input and writes its output there, and the server stays up.
    x = np.random.default_rng(13).standard_normal((1, 8)).astype(np.float32)
    h = region("inflight")
    shm.set_shared_memory_region(h, [x])
    c = http_client(server)
    c.register_system_shared_memory("inflight", key("inflight"), 4096)
    result = []

    def one():
        out = httpclient.InferRequestedOutput("y")
        out.set_shared_memory("inflight", 16, offset=1024)
        try:
            result.append(http_client(server).infer("slow", [shm_input(httpclient, "inflight")], outputs=[out]))
        except Exception as e:  # noqa: BLE001
            result.append(e)

    t = threading.Thread(target=one)
    t.start()
    deadline = time.time() + 30
    while pending(server, "slow") < 1 and time.time() < deadline:
        time.sleep(0.02)
    c.unregister_system_shared_memory("inflight")
    assert not [r for r in c.get_system_shared_memory_status() if r["name"] == "inflight"]
    t.join()
    assert not isinstance(result[0], Exception), result
    np.testing.assert_allclose(shm.get_contents_as_numpy(h, np.float32, [1, 4], offset=1024), mlp_ref(repository, x),
                               rtol=1e-4, atol=1e-4)
    assert c.is_server_live()


def test_cuda_shared_memory_is_not_supported(server):
    for client in (http_client(server), grpc_client(server)):
        client.unregister_cuda_shared_memory()  # nothing to unregister (perf_analyzer clears both kinds)
        with pytest.raises(InferenceServerException, match="does not support CUDA shared memory"):
            client.register_cuda_shared_memory("cuda", b"AAAA" if client.__module__.startswith("tritonclient.grpc")
                                               else "QUFBQQ==", 0, 64)
    assert http_client(server).get_cuda_shared_memory_status() == []
    assert not grpc_client(server).get_cuda_shared_memory_status().regions


def test_client_shared_memory_needs_allow_client_shm(kiln, repository, region):
    region("off", 64)
    s = Served(kiln, repository, "--model-control-mode=explicit", "--load-model=mlp")
    try:
        for client in (http_client(s), grpc_client(s)):
            with pytest.raises(InferenceServerException, match="--allow-client-shm=true"):
                client.register_system_shared_memory("off", key("off"), 64)
            with pytest.raises(InferenceServerException, match="--allow-client-shm=true"):
                client.unregister_system_shared_memory()
            with pytest.raises(InferenceServerException, match="Unable to find shared memory region: 'off'"):
                client.infer("mlp", [shm_input(httpclient if client.__module__.startswith("tritonclient.http")
                                               else grpcclient, "off")])
        assert http_client(s).get_system_shared_memory_status() == []
    finally:
        s.stop()
