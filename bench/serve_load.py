"""A load generator for kiln serve (or any KServe v2 HTTP server): P processes x T threads, each thread with its own
keep-alive connection, send infer requests with Triton's binary tensor data extension for D seconds. Every response
is checked against its own input's reference output (taken from one request per distinct input before the run), so
batching cross-talk shows up as mismatches. Needs only the standard library and numpy.

  python3 serve_load.py --url 127.0.0.1:8000 --model resnet50 --input x:8x3x224x224:FP32 --processes 8 --threads 4 \
      --duration 20 --json load.json

With --shared-memory system (Triton's system shared memory extension; the server must allow it: kiln serve
--allow-client-shm=true), each thread puts its inputs in a shared-memory region of its own (/dev/shm), registers it
over HTTP, and its requests name the region for the input and for the output (read back from the region), so no tensor
travels in the HTTP bodies; the references are still taken with tensors in the body.

Prints one line and writes JSON: requests/s, inferences/s (requests x batch), latency p50/p90/p99 (ms), errors,
mismatches."""
import argparse
import http.client
import json
import mmap
import multiprocessing as mp
import os
import threading
import time

import numpy as np

DTYPES = {"FP32": np.float32, "FP16": np.float16, "INT64": np.int64, "INT32": np.int32, "UINT8": np.uint8}


def body_for(name, dtype, arr):
    raw = arr.tobytes()
    header = json.dumps({"inputs": [{"name": name, "shape": list(arr.shape), "datatype": dtype,
                                     "parameters": {"binary_data_size": len(raw)}}],
                         "parameters": {"binary_data_output": True}}).encode()
    return header + raw, len(header)


def infer_head(conn, model, body, header_len):
    """The response's JSON header and the binary part after it."""
    conn.request("POST", f"/v2/models/{model}/infer", body=body,
                 headers={"Inference-Header-Content-Length": str(header_len),
                          "Content-Type": "application/octet-stream"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data[:200]!r}")
    n = int(r.getheader("Inference-Header-Content-Length", len(data)))
    return json.loads(data[:n]), data[n:]


def first_output(head, binary):
    """The response's first output (the binary part starts with it)."""
    out = head["outputs"][0]
    n = out.get("parameters", {}).get("binary_data_size", len(binary))
    return np.frombuffer(binary[:n], dtype=DTYPES[out["datatype"]]).reshape(out["shape"])


def infer(conn, model, body, header_len):
    return first_output(*infer_head(conn, model, body, header_len))


def post_json(conn, path, body):
    conn.request("POST", path, body=json.dumps(body).encode() if body is not None else b"",
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"POST {path}: HTTP {r.status}: {data[:300]!r}")


class SystemShmRegion:
    """One thread's system shared-memory region (/dev/shm/<name>): its distinct inputs one after another, then a slot
    for the output (64-byte aligned), registered with the server under <name>. Requests name the region for both."""

    def __init__(self, conn, name, input_name, dtype, inputs, output_name, output_dtype, output_shape):
        self.name, self.key = name, "/" + name
        self.in_bytes = inputs[0].nbytes
        self.out_dtype = DTYPES[output_dtype]
        self.out_count = int(np.prod(output_shape))
        self.out_offset = (len(inputs) * self.in_bytes + 63) // 64 * 64
        out_bytes = self.out_count * np.dtype(self.out_dtype).itemsize
        size = self.out_offset + out_bytes
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize < size:  # (tmpfs: writing past what it holds would be SIGBUS)
            raise RuntimeError(f"/dev/shm has {st.f_bavail * st.f_frsize} bytes free, a thread's region needs {size}: "
                               "use fewer --distinct inputs or threads, or a larger /dev/shm")
        fd = os.open("/dev/shm/" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, size)
            self.mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        for k, x in enumerate(inputs):
            self.mm[k * self.in_bytes:(k + 1) * self.in_bytes] = x.tobytes()
        post_json(conn, f"/v2/systemsharedmemory/region/{name}/register", {"key": self.key, "offset": 0,
                                                                            "byte_size": size})
        self.bodies = [json.dumps({
            "inputs": [{"name": input_name, "shape": list(x.shape), "datatype": dtype,
                        "parameters": {"shared_memory_region": name, "shared_memory_offset": k * self.in_bytes,
                                       "shared_memory_byte_size": self.in_bytes}}],
            "outputs": [{"name": output_name,
                         "parameters": {"shared_memory_region": name, "shared_memory_offset": self.out_offset,
                                        "shared_memory_byte_size": out_bytes}}]}).encode()
            for k, x in enumerate(inputs)]

    def infer(self, conn, model, k):
        """Runs input k; the output as the region holds it after the answer."""
        conn.request("POST", f"/v2/models/{model}/infer", body=self.bodies[k],
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {data[:200]!r}")
        out = json.loads(data)["outputs"][0]
        return np.frombuffer(self.mm, dtype=self.out_dtype, count=self.out_count,
                             offset=self.out_offset).reshape(out["shape"]).copy()

    def close(self, conn):
        try:
            post_json(conn, f"/v2/systemsharedmemory/region/{self.name}/unregister", None)
        finally:
            self.mm.close()
            os.unlink("/dev/shm/" + self.name)


def worker(args, seed, results):
    host, port = args.url.split(":")
    name, shape, dtype = args.input.split(":")
    shape = [int(d) for d in shape.split("x")]
    rng = np.random.default_rng(seed)
    if np.issubdtype(DTYPES[dtype], np.integer):  # token ids and the like: small non-negative integers
        inputs = [rng.integers(0, args.int_high, shape).astype(DTYPES[dtype]) for _ in range(args.distinct)]
    else:
        inputs = [rng.standard_normal(shape).astype(DTYPES[dtype]) for _ in range(args.distinct)]
    bodies = [body_for(name, dtype, x) for x in inputs]
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    heads = [infer_head(conn, args.model, b, n) for b, n in bodies]  # each input's own answer, tensors in the body
    refs = [first_output(h, binary) for h, binary in heads]
    region = None
    if args.shared_memory == "system":
        out = heads[0][0]["outputs"][0]
        region = SystemShmRegion(conn, f"kiln_load_{os.getpid()}_{seed}", name, dtype, inputs, out["name"],
                                 out["datatype"], out["shape"])
    try:
        run(args, conn, host, port, bodies, refs, region, results)
    finally:
        if region:
            region.close(http.client.HTTPConnection(host, int(port), timeout=120))


def run(args, conn, host, port, bodies, refs, region, results):
    lat, errors, mismatches = [], 0, 0
    start_at = results["start"]
    while time.time() < start_at:
        time.sleep(0.001)
    # A fresh connection: the server closes one left idle while the others took their references (kiln serve: after
    # 5 s), which would count as an error.
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    end = start_at + args.duration
    i = 0
    while time.time() < end:
        k = i % len(bodies)
        t0 = time.perf_counter()
        try:
            y = region.infer(conn, args.model, k) if region else infer(conn, args.model, *bodies[k])
        except Exception:  # noqa: BLE001 - counted; the connection is reopened
            errors += 1
            conn = http.client.HTTPConnection(host, int(port), timeout=120)
            continue
        lat.append(time.perf_counter() - t0)
        yf, rf = y.astype(np.float32), refs[k].astype(np.float32)
        bad = yf.shape != rf.shape
        if not bad:
            diff = np.nan_to_num(yf - rf) if np.array_equal(np.isnan(yf), np.isnan(rf)) else np.full_like(yf, np.inf)
            bad = float(np.linalg.norm(diff)) > args.max_rel_l2 * max(float(np.linalg.norm(np.nan_to_num(rf))), 1e-30)
        if bad:
            mismatches += 1
            if len(results["details"]) < 8 and yf.shape == rf.shape:
                # Which of this thread's inputs does the answer fit best (another one's: cross-talk)?
                dist = [float(np.nanmax(np.abs(yf - r.astype(np.float32)))) if r.shape == yf.shape else float("inf")
                        for r in refs]
                results["details"].append({"own": k, "closest": int(np.argmin(dist)), "max_abs_diff": dist[k],
                                           "max_abs_ref": float(np.nanmax(np.abs(rf))),
                                           "nonfinite_y": int((~np.isfinite(yf)).sum()),
                                           "nonfinite_ref": int((~np.isfinite(rf)).sum()),
                                           "rel_l2": float(np.linalg.norm(np.nan_to_num(yf - rf)) /
                                                           max(np.linalg.norm(np.nan_to_num(rf)), 1e-30))})
        i += 1
    results["lat"].extend(lat)
    results["errors"] += errors
    results["mismatches"] += mismatches


def process(args, pid, start_at, queue):
    shared = {"lat": [], "errors": 0, "mismatches": 0, "start": start_at, "details": []}
    threads = [threading.Thread(target=worker, args=(args, pid * 1000 + t, shared)) for t in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queue.put((shared["lat"], shared["errors"], shared["mismatches"], shared["details"]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", default="127.0.0.1:8000")
    p.add_argument("--model", required=True)
    p.add_argument("--input", required=True, help="name:AxBxC:DATATYPE")
    p.add_argument("--processes", type=int, default=4)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--distinct", type=int, default=3, help="distinct inputs per thread")
    p.add_argument("--int-high", type=int, default=1000, help="integer inputs are drawn from [0, this)")
    p.add_argument("--max-rel-l2", type=float, default=1e-2,
                   help="an answer further than this (relative L2) from its input's reference is a mismatch; FP16 "
                        "engines differ by about 4e-4 between batch sizes, another input's answer by about 1")
    p.add_argument("--shared-memory", choices=["none", "system"], default="none",
                   help="system: inputs and outputs in a registered system shared-memory region per thread")
    p.add_argument("--json")
    args = p.parse_args()
    batch = int(args.input.split(":")[1].split("x")[0])
    start_at = time.time() + 5 + 0.2 * args.processes * args.threads  # after every thread has its references
    q = mp.Queue()
    procs = [mp.Process(target=process, args=(args, i, start_at, q)) for i in range(args.processes)]
    for pr in procs:
        pr.start()
    lat, errors, mismatches, details = [], 0, 0, []
    for _ in procs:
        l_, e, m, d = q.get()
        lat += l_
        errors += e
        mismatches += m
        details += d
    for pr in procs:
        pr.join()
    lat = np.array(lat) * 1000
    res = {"model": args.model, "request_batch": batch, "concurrency": args.processes * args.threads,
           "shared_memory": args.shared_memory,
           "duration_s": args.duration, "requests": int(lat.size), "requests_per_s": lat.size / args.duration,
           "inferences_per_s": lat.size * batch / args.duration,
           "p50_ms": float(np.percentile(lat, 50)) if lat.size else None,
           "p90_ms": float(np.percentile(lat, 90)) if lat.size else None,
           "p99_ms": float(np.percentile(lat, 99)) if lat.size else None, "errors": errors, "mismatches": mismatches, "mismatch_details": details[:8]}
    print(json.dumps(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
