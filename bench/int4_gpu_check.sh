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
timeout 300 $B/kiln_gpu_tests --gtest_brief=1 > $R/gpu_tests.log 2>&1; echo "rc=$?" >> $R/gpu_tests.log
cd w
$PY - <<'PY' > $R/export.log 2>&1
import torch, transformers
cfg = transformers.LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=2, num_attention_heads=32,
                               num_key_value_heads=32, vocab_size=8000, max_position_embeddings=2048)
torch.manual_seed(0)
m = transformers.LlamaForCausalLM(cfg).eval().half().cuda()
class W(torch.nn.Module):
    def __init__(s, m): super().__init__(); s.m = m
    def forward(s, ids): return s.m(input_ids=ids, use_cache=False).logits
ids = torch.randint(0, 8000, (1, 1), device="cuda")
with torch.no_grad():
    torch.onnx.export(W(m), (ids,), "llama.onnx", opset_version=17, input_names=["input_ids"],
                      output_names=["logits"], dynamo=False)
import numpy as np; np.save("ids.npy", ids.cpu().numpy())
print("ok")
PY
$PY $ROOT/bench/int4_quantize.py llama.onnx llama_int4.onnx --block 128 > $R/quantize.log 2>&1
ls -la *.onnx >> $R/quantize.log
timeout 400 $B/kiln build --onnx=llama.onnx --fp16 --saveEngine=l16.engine --json=$R/build_fp16.json > $R/build_fp16.log 2>&1
timeout 400 $B/kiln build --onnx=llama_int4.onnx --fp16 --saveEngine=l4.engine --verbose --json=$R/build_int4.json > $R/build_int4.log 2>&1
for e in l16 l4; do
  timeout 120 $B/kiln bench --loadEngine=$e.engine --useCudaGraph --noDataTransfers --duration=5 > $R/bench_$e.log 2>&1
  timeout 120 $B/kiln bench --loadEngine=$e.engine --separateProfileRun --dumpProfile --duration=2 > $R/profile_$e.log 2>&1
  timeout 120 $B/kiln run --loadEngine=$e.engine --loadInputs=input_ids:ids.npy --exportOutput=out_$e > $R/run_$e.log 2>&1
done
timeout 600 $B/kiln build --onnx=llama_int4.onnx --backend=cpu --saveEngine=l4cpu.engine > $R/build_int4_cpu.log 2>&1
timeout 300 $B/kiln run --loadEngine=l4cpu.engine --loadInputs=input_ids:ids.npy --exportOutput=out_l4cpu > $R/run_l4cpu.log 2>&1
R=$R $PY - <<'PY' > $R/summary.txt 2>&1
import numpy as np, glob, re
def load(d): return np.load(glob.glob(d + "/*.npy")[0]).astype(np.float64)
try:
    a, b, c = load("out_l16"), load("out_l4"), load("out_l4cpu")
    rel = lambda x, y: np.linalg.norm(x - y) / np.linalg.norm(y)
    print(f"int4 cuda vs int4 cpu (same model, the oracle): rel-L2 {rel(b, c):.4g}")
    print(f"int4 cuda vs fp16 cuda (quantization error): rel-L2 {rel(b, a):.4g}, argmax agree {int(b.reshape(-1).argmax() == a.reshape(-1).argmax())}")
except Exception as ex: print("compare failed", ex)
def layers(path):
    out = {}
    for line in open(path):
        m = re.match(r"\s+([\d.]+)\s+([\d.]+)\s+[\d.]+%\s+(\S+)", line)
        if m: out[m.group(3)] = float(m.group(2))
    return out
for e in ["l16", "l4"]:
    try:
        p = layers(f"{__import__('os').environ['R']}/profile_{e}.log")
        lin = {k: v for k, v in p.items() if "proj" in k}
        print(f"{e}: {len(p)} layers, {sum(p.values()):.4f} ms summed; linear layers ({len(lin)}): {sum(lin.values()):.4f} ms")
        for k, v in sorted(lin.items()): print(f"   {v:.4f} ms  {k}")
    except Exception as ex: print(e, "profile failed", ex)
PY
# onnxruntime's own INT4 QDQ quantization of a float MLP: built for the GPU, checked against onnxruntime.
B=$B $PY - <<'PY' > $R/ort_int4.txt 2>&1
import numpy as np, onnx, onnxruntime as ort, subprocess, json, os
from onnx import helper, numpy_helper, TensorProto
from onnxruntime.quantization import QuantFormat
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
