#!/usr/bin/env bash
# INT4 weight-only against FP16 on a GPU machine, from a bundle (scripts/gpu-bundle build .bundle; carry .bundle.txz):
# the gpu tests, then a LLaMA-style decoder (transformers' LlamaForCausalLM, hidden 4096, MLP 11008, 2 layers, random
# weights, FP16) exported at batch 1 and sequence 1 — one decode step, every linear layer a 1-row GEMM —, quantized
# to INT4 weight-only by bench/int4_quantize.py (block 128), built FP16 and INT4+FP16, timed with CUDA graphs and
# profiled; and onnxruntime's own 4-bit QDQ quantization of a float MLP built for the GPU and checked against
# onnxruntime. Results: $OUT/r.tgz.   Usage there: bash bench/int4_gpu_check.sh
set -x
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
B=$PWD/.bundle/bin; PY=/opt/torch/.venv/bin/python3; R=$OUT/r; ROOT=$PWD; mkdir -p $R w
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt
# The GEMVs alone against cuBLAS FP16 (bench/int4_gemv_probe.cu, built beforehand and carried as out/int4_gemv_probe).
[ -x out/int4_gemv_probe ] && timeout 200 out/int4_gemv_probe > $R/int4_gemv_probe.log 2>&1
timeout 300 $B/kiln_gpu_tests --gtest_brief=1 --gtest_filter="${KILN_GPU_FILTER:-*}" > $R/gpu_tests.log 2>&1
echo "rc=$?" >> $R/gpu_tests.log
mkdir -p nt && tar xzf .bundle/node-tests.tgz -C nt && timeout 120 $B/kiln-conformance --backend cuda --data nt/node \
  --filter 'INT4|UINT4|int4|uint4' --json $R/conformance_int4.json --expected-failures tests/conformance/expected_failures \
  > $R/conformance_int4_cuda.log 2>&1
cd w
$PY - <<'PY' > $R/export.log 2>&1
import torch, transformers, numpy as np
cfg = transformers.LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=2, num_attention_heads=32,
                               num_key_value_heads=32, vocab_size=8000, max_position_embeddings=2048)
torch.manual_seed(0)
m = transformers.LlamaForCausalLM(cfg).eval().half().cuda()
class W(torch.nn.Module):
    def __init__(s, m): super().__init__(); s.m = m
    def forward(s, ids): return s.m(input_ids=ids, use_cache=False).logits
ids = torch.randint(0, 8000, (1, 1), device="cuda")
np.save("ids.npy", ids.cpu().numpy())
with torch.no_grad():
    try:  # the TorchScript exporter first; transformers 5's mask code uses aten::diff, which it lacks
        torch.onnx.export(W(m), (ids,), "llama.onnx", opset_version=17, input_names=["input_ids"],
                          output_names=["logits"], dynamo=False)
        print("exported: torchscript")
    except Exception as ex:
        print("torchscript exporter failed:", str(ex)[:300])
        torch.onnx.export(W(m), (ids,), "llama.onnx", opset_version=18, input_names=["input_ids"],
                          output_names=["logits"], dynamo=True, external_data=False)
        print("exported: dynamo")
PY
$PY $ROOT/bench/int4_quantize.py llama.onnx llama_int4.onnx --block 128 > $R/quantize.log 2>&1
# A LLaMA-style decode step written out (no rotary embedding): 2 layers of RMSNorm, Q/K/V/O projections, attention of
# the new token over a KV cache of 511 earlier tokens (inputs), SiLU-gated MLP; hidden 4096, MLP 11008, FP16.
$PY - <<'PY' > $R/export_decode.log 2>&1
import torch, numpy as np
H, I, NH, P = 4096, 11008, 32, 511
class Rms(torch.nn.Module):
    def __init__(s): super().__init__(); s.w = torch.nn.Parameter(torch.ones(H))
    def forward(s, x): return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * s.w
class Layer(torch.nn.Module):
    def __init__(s):
        super().__init__()
        L = lambda a, b: torch.nn.Linear(a, b, bias=False)
        s.n1, s.n2 = Rms(), Rms()
        s.q, s.k, s.v, s.o = L(H, H), L(H, H), L(H, H), L(H, H)
        s.g, s.u, s.d = L(H, I), L(H, I), L(I, H)
    def forward(s, x, pk, pv):
        h = s.n1(x)
        q = s.q(h).view(1, 1, NH, H // NH).transpose(1, 2)
        k = torch.cat([pk, s.k(h).view(1, 1, NH, H // NH).transpose(1, 2)], 2)
        v = torch.cat([pv, s.v(h).view(1, 1, NH, H // NH).transpose(1, 2)], 2)
        a = torch.softmax(q @ k.transpose(-1, -2) / (H // NH) ** 0.5, -1) @ v
        x = x + s.o(a.transpose(1, 2).reshape(1, 1, H))
        h = s.n2(x)
        return x + s.d(torch.nn.functional.silu(s.g(h)) * s.u(h))
class Dec(torch.nn.Module):
    def __init__(s): super().__init__(); s.layers = torch.nn.ModuleList([Layer(), Layer()])
    def forward(s, x, pk, pv):
        for l in s.layers: x = l(x, pk, pv)
        return x
torch.manual_seed(0)
m = Dec().eval().half().cuda()
for p_ in m.parameters():
    if p_.dim() == 2: torch.nn.init.normal_(p_, std=0.02)
x = torch.randn(1, 1, H, device="cuda", dtype=torch.half)
pk = torch.randn(1, NH, P, H // NH, device="cuda", dtype=torch.half)
pv = torch.randn(1, NH, P, H // NH, device="cuda", dtype=torch.half)
with torch.no_grad():
    torch.onnx.export(m, (x, pk, pv), "decode.onnx", opset_version=17, input_names=["x", "past_k", "past_v"],
                      output_names=["y"], dynamo=False)
for n, t in [("x", x), ("past_k", pk), ("past_v", pv)]: np.save(f"{n}.npy", t.cpu().numpy())
# The decode step's GEMMs alone (4 layers of Q, K, V, O, gate, up, down at M = 1; 1.6 GB of FP16 weights, far past
# the L2 cache), timed end to end with CUDA graphs: what the weight-only kernels change, without per-layer events.
class Lin(torch.nn.Module):
    def __init__(s):
        super().__init__()
        L = lambda a, b: torch.nn.Linear(a, b, bias=False)
        s.ls = torch.nn.ModuleList([torch.nn.ModuleList([L(H, H), L(H, H), L(H, H), L(H, H), L(H, I), L(H, I), L(I, H)])
                                    for _ in range(4)])
    def forward(s, x):
        for q, k, v, o, g, u, d in s.ls:
            a = o(v(k(q(x))))
            x = d(g(a) * u(a))
        return x
lm = Lin().eval().half().cuda()
for p_ in lm.parameters(): torch.nn.init.normal_(p_, std=0.02)
with torch.no_grad():
    torch.onnx.export(lm, (x,), "linears.onnx", opset_version=17, input_names=["x"], output_names=["y"], dynamo=False)
print("ok")
PY
$PY $ROOT/bench/int4_quantize.py decode.onnx decode_int4.onnx --block 128 >> $R/quantize.log 2>&1
$PY $ROOT/bench/int4_quantize.py linears.onnx linears_int4.onnx --block 128 >> $R/quantize.log 2>&1
ls -la *.onnx >> $R/quantize.log
DIN="--loadInputs=x:x.npy,past_k:past_k.npy,past_v:past_v.npy"
for M in linears decode llama; do
  IN="--loadInputs=input_ids:ids.npy"; [ $M = decode ] && IN=$DIN; [ $M = linears ] && IN="--loadInputs=x:x.npy"
  timeout 300 $B/kiln build --onnx=$M.onnx --fp16 --saveEngine=${M}16.engine --json=$R/build_${M}16.json > $R/build_${M}16.log 2>&1
  timeout 300 $B/kiln build --onnx=${M}_int4.onnx --fp16 --saveEngine=${M}4.engine --verbose --json=$R/build_${M}4.json > $R/build_${M}4.log 2>&1
  for e in ${M}16 ${M}4; do
    timeout 60 $B/kiln bench --loadEngine=$e.engine --useCudaGraph --noDataTransfers --duration=4 > $R/bench_$e.log 2>&1
    timeout 60 $B/kiln bench --loadEngine=$e.engine --separateProfileRun --dumpProfile --duration=2 > $R/profile_$e.log 2>&1
    timeout 60 $B/kiln run --loadEngine=$e.engine $IN --exportOutput=out_$e > $R/run_$e.log 2>&1
  done
  timeout 300 $B/kiln build --onnx=${M}_int4.onnx --backend=cpu --saveEngine=${M}4cpu.engine > $R/build_${M}4cpu.log 2>&1
  timeout 120 $B/kiln run --loadEngine=${M}4cpu.engine $IN --exportOutput=out_${M}4cpu > $R/run_${M}4cpu.log 2>&1
done
R=$R $PY - <<'PY' > $R/summary.txt 2>&1
import numpy as np, glob, re
def load(d): return np.load(glob.glob(d + "/*.npy")[0]).astype(np.float64)
rel = lambda x, y: np.linalg.norm(x - y) / np.linalg.norm(y)
for M in ["linears", "decode", "llama"]:
    try:
        a, b, c = load(f"out_{M}16"), load(f"out_{M}4"), load(f"out_{M}4cpu")
        print(f"{M}: int4 cuda vs int4 cpu (same model, the oracle): rel-L2 {rel(b, c):.4g}")
        print(f"{M}: int4 cuda vs fp16 cuda (quantization error): rel-L2 {rel(b, a):.4g}")
    except Exception as ex: print(M, "compare failed", ex)
def layers(path):
    out = {}
    for line in open(path):
        m = re.match(r"\s+([\d.]+)\s+([\d.]+)\s+[\d.]+%\s+(\S+)", line)
        if m: out[m.group(3)] = float(m.group(2))
    return out
for e in ["linears16", "linears4", "decode16", "decode4", "llama16", "llama4"]:
    try:
        p = layers(f"{__import__('os').environ['R']}/profile_{e}.log")
        lin = {k: v for k, v in p.items() if re.search(r"proj|linear|MatMul", k) and "Attention" not in k}
        print(f"{e}: {len(p)} layers, {sum(p.values()):.4f} ms summed; linear layers ({len(lin)}): {sum(lin.values()):.4f} ms")
        for k, v in sorted(lin.items()): print(f"   {v:.4f} ms  {k}")
    except Exception as ex: print(e, "profile failed", ex)
PY
# onnxruntime's own INT4 QDQ quantization of a float MLP: built for the GPU, checked against onnxruntime.
B=$B $PY - <<'PY' > $R/ort_int4.txt 2>&1
import numpy as np, onnx, onnxruntime as ort, subprocess, json, os
from onnx import helper, numpy_helper, TensorProto
from onnxruntime.quantization import QuantFormat
try:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer as MatMul4BitsQuantizer
except ImportError:
    from onnxruntime.quantization.matmul_4bits_quantizer import MatMul4BitsQuantizer
B = os.environ.get("B", "../.bundle/bin")
rng = np.random.default_rng(0)
k, h, n = 4096, 1024, 256
w1 = (rng.standard_normal((k, h)) / 64).astype(np.float32); w2 = (rng.standard_normal((h, n)) / 32).astype(np.float32)
g = helper.make_graph([helper.make_node("MatMul", ["x", "w1"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
                       helper.make_node("MatMul", ["b", "w2"], ["y"])], "mlp",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, k])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, n])],
                      [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]); m.ir_version = 10
for sym in (True, False):
    q = MatMul4BitsQuantizer(m, block_size=32, is_symmetric=sym, quant_format=QuantFormat.QDQ); q.process()
    q.model.save_model_to_file("mlp4.onnx", use_external_data_format=False)
    x = rng.standard_normal((3, k)).astype(np.float32); np.save("x.npy", x)
    so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # as written
    want = ort.InferenceSession("mlp4.onnx", so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    fused = ort.InferenceSession("mlp4.onnx", providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    print(f"  onnxruntime's own MatMulNBits rewrite vs the model as written: max |diff| {np.abs(fused - want).max():.3g}")
    subprocess.run([f"{B}/kiln", "build", "--onnx=mlp4.onnx", "--saveEngine=mlp4.engine", "--json=mlp4.json"], check=True)
    subprocess.run([f"{B}/kiln", "run", "--loadEngine=mlp4.engine", "--loadInputs=x:x.npy", "--exportOutput=o4"], check=True)
    got = np.load("o4/y.npy")
    print(f"symmetric={sym}: op_counts {json.load(open('mlp4.json'))['optimization']['op_counts']}")
    print(f"  kiln cuda vs onnxruntime: max |diff| {np.abs(got - want).max():.3g}, max |y| {np.abs(want).max():.3g}, "
          f"rel-L2 {np.linalg.norm(got - want) / np.linalg.norm(want):.3g}")
PY
cd $OUT && tar czf r.tgz r && rm -rf r
