#!/usr/bin/env bash
# INT8 and FP8 against FP16 on a GPU machine, from a bundle (scripts/gpu-bundle build .bundle; carry .bundle.txz): the
# quantized gpu tests, then ResNet-50 (batch 64) and BERT-base (batch 32, sequence 128) exported with random
# weights, calibrated on the GPU, built FP16 and INT8+FP16 (BERT also FP8+FP16, from a max calibration), timed with
# CUDA graphs and profiled, and their outputs compared with the FP32 reference and (ResNet) the cpu backend's INT8
# engine. Results: $OUT/r.tgz.
# Usage there: bash bench/int8_gpu_check.sh  (needs $OUT; the torch venv of the GPU machine; KILN_INT8_MODELS=bert
# runs BERT only, =resnet ResNet-50 only)
set -x
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
B=$PWD/.bundle/bin; PY=/opt/torch/.venv/bin/python3; R=$OUT/r; mkdir -p $R w
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt
timeout 300 $B/kiln_gpu_tests --gtest_filter='GpuQuantized.*' > $R/gpu_quantized.log 2>&1; echo "rc=$?" >> $R/gpu_quantized.log
cd w
if [ "${KILN_INT8_MODELS:-all}" != bert ]; then
$PY - <<'PY' > $R/export.log 2>&1
import torch, torchvision, numpy as np, os
torch.manual_seed(0)  # the random weights, the same every run
m = torchvision.models.resnet50(weights=None).eval()
x = torch.randn(64, 3, 224, 224)
torch.onnx.export(m, x, "r50.onnx", opset_version=17, input_names=["x"], output_names=["y"], dynamo=False)
os.makedirs("calib", exist_ok=True)
rng = np.random.default_rng(0)
for i in range(2): np.save(f"calib/b{i}.npy", rng.standard_normal((64, 3, 224, 224), dtype=np.float32))
np.save("in.npy", rng.standard_normal((64, 3, 224, 224), dtype=np.float32))
print("ok")
PY
timeout 300 $B/kiln calibrate --onnx=r50.onnx --data=calib --algo=entropy --calib=r50.cache --backend=cuda > $R/calibrate.log 2>&1
timeout 300 $B/kiln build --onnx=r50.onnx --fp16 --saveEngine=fp16.engine > $R/build_fp16.log 2>&1
timeout 300 $B/kiln build --onnx=r50.onnx --int8 --fp16 --calib=r50.cache --saveEngine=int8.engine --verbose --json=$R/build_int8.json > $R/build_int8.log 2>&1
timeout 300 $B/kiln build --onnx=r50.onnx --int8 --calib=r50.cache --backend=cpu --saveEngine=int8cpu.engine > $R/build_int8cpu.log 2>&1
for e in fp16 int8; do
  timeout 120 $B/kiln bench --loadEngine=$e.engine --useCudaGraph --noDataTransfers --duration=5 > $R/bench_$e.log 2>&1
done
timeout 120 $B/kiln bench --loadEngine=int8.engine --separateProfileRun --dumpProfile --duration=2 > $R/profile_int8.log 2>&1
timeout 120 $B/kiln bench --loadEngine=fp16.engine --separateProfileRun --dumpProfile --duration=2 > $R/profile_fp16.log 2>&1
for e in fp16 int8 int8cpu; do
  timeout 300 $B/kiln run --loadEngine=$e.engine --loadInputs=x:in.npy --exportOutput=out_$e > $R/run_$e.log 2>&1
done
timeout 300 $B/kiln run --onnx=r50.onnx --loadInputs=x:in.npy --exportOutput=out_ref > $R/run_ref.log 2>&1
fi
if [ "${KILN_INT8_MODELS:-all}" != resnet ]; then
# BERT-base, batch 32, sequence 128
$PY - <<'PY' > $R/export_bert.log 2>&1
import torch, transformers, numpy as np, os
class W(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.m = transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False).eval()
    def forward(s, ids): return s.m(input_ids=ids).last_hidden_state
torch.manual_seed(0)  # the random weights, the same every run
ids = torch.randint(0, 30522, (32, 128))
torch.onnx.export(W().eval(), (ids,), "bert.onnx", opset_version=17, input_names=["input_ids"], output_names=["y"], dynamo=False)
os.makedirs("calib_b", exist_ok=True)
rng = np.random.default_rng(1)
for i in range(2): np.save(f"calib_b/b{i}.npy", rng.integers(0, 30522, (32, 128), dtype=np.int64))
np.save("ids.npy", rng.integers(0, 30522, (32, 128), dtype=np.int64))
print("ok")
PY
timeout 300 $B/kiln calibrate --onnx=bert.onnx --data=calib_b --algo=entropy --calib=bert.cache --backend=cuda > $R/calibrate_bert.log 2>&1
timeout 300 $B/kiln build --onnx=bert.onnx --fp16 --saveEngine=bfp16.engine > $R/build_bert_fp16.log 2>&1
timeout 300 $B/kiln build --onnx=bert.onnx --int8 --fp16 --calib=bert.cache --saveEngine=bint8.engine --verbose > $R/build_bert_int8.log 2>&1
# FP8 (E4M3) from max calibration: each range spread over E4M3's largest value, 448
timeout 300 $B/kiln calibrate --onnx=bert.onnx --data=calib_b --algo=minmax --calib=bert_mm.cache --backend=cuda > $R/calibrate_bert_minmax.log 2>&1
timeout 300 $B/kiln build --onnx=bert.onnx --fp8 --fp16 --calib=bert_mm.cache --saveEngine=bfp8.engine --verbose > $R/build_bert_fp8.log 2>&1
for e in bfp16 bint8 bfp8; do
  timeout 120 $B/kiln bench --loadEngine=$e.engine --useCudaGraph --noDataTransfers --duration=5 > $R/bench_$e.log 2>&1
  timeout 120 $B/kiln run --loadEngine=$e.engine --loadInputs=input_ids:ids.npy --exportOutput=out_$e > $R/run_$e.log 2>&1
done
timeout 120 $B/kiln bench --loadEngine=bint8.engine --separateProfileRun --dumpProfile --duration=2 > $R/profile_bint8.log 2>&1
timeout 120 $B/kiln bench --loadEngine=bfp16.engine --separateProfileRun --dumpProfile --duration=2 > $R/profile_bfp16.log 2>&1
timeout 120 $B/kiln bench --loadEngine=bfp8.engine --separateProfileRun --dumpProfile --duration=2 > $R/profile_bfp8.log 2>&1
timeout 300 $B/kiln run --onnx=bert.onnx --loadInputs=input_ids:ids.npy --exportOutput=out_bref > $R/run_bref.log 2>&1
fi
$PY - <<'PY' > $R/accuracy.txt 2>&1
import numpy as np, glob
def load(d): return np.load(glob.glob(d + "/*.npy")[0]).astype(np.float64)
for e in ["fp16", "int8", "int8cpu"]:
    try:
        ref = load("out_ref")
        y = load("out_" + e)
        rel = np.linalg.norm(y - ref) / np.linalg.norm(ref)
        top1 = (y.argmax(1) == ref.argmax(1)).mean()
        print(f"{e}: rel-L2 vs fp32 reference {rel:.4g}, top-1 agreement {top1:.3f}")
    except Exception as ex: print(e, "failed", ex)
try:
    a, b = load("out_int8"), load("out_int8cpu")
    print(f"int8 cuda vs int8 cpu: rel-L2 {np.linalg.norm(a-b)/np.linalg.norm(b):.4g}, top-1 agreement {(a.argmax(1)==b.argmax(1)).mean():.3f}")
except Exception as ex: print("cmp failed", ex)
try:
    ref = load("out_bref")
    for e in ["bfp16", "bint8", "bfp8"]:
        y = load("out_" + e)
        print(f"bert {e}: rel-L2 vs fp32 reference {np.linalg.norm(y-ref)/np.linalg.norm(ref):.4g}")
except Exception as ex: print("bert cmp failed", ex)
PY
cd ..
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
