#!/usr/bin/env bash
# Second run: which engine needs the barrier before it (KILN_CONV_BARRIER=<regex of the engine name>)?
# Is the wrong ResNet-50 result a race between consecutive cuDNN kernels (a kernel launched early, programmatic
# dependent launch, reading what the kernel before it has not finished writing)? KILN_CONV_BARRIER=1 puts an empty
# kernel before every cuDNN convolution. Predicted, if so: the eng=39-excluded builds (wrong 3 of 3 before) right with
# the barrier and with CUDA_LAUNCH_BLOCKING=1, wrong without.
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
B=$PWD/.bundle/bin; PY=/opt/torch/.venv/bin/python3; R=$OUT/s9c; mkdir -p $R wd
start=$(date +%s)
( cd wd && $PY -c "
import torch, torchvision, numpy as np
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None).eval()
torch.onnx.export(m, torch.randn(1,3,224,224), 'r50.onnx', opset_version=17, input_names=['x'], output_names=['y'],
                  dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}}, dynamo=False)
np.save('in.npy', np.random.default_rng(0).standard_normal((8,3,224,224)).astype(np.float32))
np.save('in32.npy', np.random.default_rng(1).standard_normal((32,3,224,224)).astype(np.float32))
" > $R/export.log 2>&1; $PY -c "import torch; print('torch cudnn', torch.backends.cudnn.version())" >> $R/export.log 2>&1 )
cd wd
c() {  # tag, then env assignments; builds and compares run 2 with the CPU reference
  local tag=$1; shift
  timeout 60 env "$@" $B/kiln compare --onnx=r50.onnx --shapes=x:8x3x224x224 --loadInputs=x:in.npy --compareRun=2 \
    --rtol=1e-2 --atol=1e-2 > $R/$tag.log 2>&1
  echo "$tag rc=$? $(grep -E '^y ' $R/$tag.log)" | tee -a $R/summary.txt
}
for i in 1 2 3; do
  c ex39_b4_$i KILN_TACTIC_EXCLUDE='eng=39;' KILN_CONV_BARRIER='^eng=4;'
  c ex39_b51_$i KILN_TACTIC_EXCLUDE='eng=39;' KILN_CONV_BARRIER='^eng=51;'
done
# FP16, batch profile 1..32, run 3 at batch 32 (session 8's served engine), with and without the barrier.
for bar in "^eng=4;" "^eng=51;" 1 0; do
  timeout 90 env KILN_CONV_BARRIER=$bar $B/kiln compare --onnx=r50.onnx --fp16 --minShapes=x:1x3x224x224 \
    --optShapes=x:32x3x224x224 --maxShapes=x:32x3x224x224 --shapes=x:32x3x224x224 --loadInputs=x:in32.npy \
    --compareRun=3 --rtol=1e-2 --atol=1e-2 > $R/fp16dyn_barrier${bar//[^0-9]/}.log 2>&1
  echo "fp16dyn_barrier${bar//[^0-9]/} rc=$? $(grep -E '^y ' $R/fp16dyn_barrier${bar//[^0-9]/}.log)" | tee -a $R/summary.txt
done
# Cost of the barrier: TF32 b8 and FP16 b32 engines timed with CUDA graphs, with and without.
for bar in "^eng=4;" "^eng=51;" 1 0; do
  timeout 60 env KILN_CONV_BARRIER=$bar $B/kiln --onnx=r50.onnx --shapes=x:32x3x224x224 --fp16 --useCudaGraph \
    --noDataTransfers --duration=3 > $R/bench_fp16_b32_barrier${bar//[^0-9]/}.log 2>&1
  echo "bench fp16 b32 barrier=$bar $(grep -iE 'GPU Compute Time|median' $R/bench_fp16_b32_barrier${bar//[^0-9]/}.log | head -2 | tr '\n' ' ')" | tee -a $R/summary.txt
done
cd ..
tar czf $OUT/s9c.tgz -C $OUT s9c
