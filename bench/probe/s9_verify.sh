#!/usr/bin/env bash
# Checks the runtime-fusion barrier (c9de37e): the conv/layout gpu tests, the new no-sync test with the barrier left
# out (KILN_CUDNN_RTC_OVERLAP=1: predicted to fail), ResNet-50 builds that were wrong 3 of 3 (eng=39 excluded) and the
# FP16 dynamic-batch engine, then the GPU model tests (TF32 checked on the third run).
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
B=$PWD/.bundle/bin; PY=/opt/torch/.venv/bin/python3; R=$OUT/s9v; mkdir -p $R wd
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt
start=$(date +%s)
timeout 200 $B/kiln_gpu_tests --gtest_filter='GpuLayout.*:GpuConv.*' > $R/gpu_tests_conv_layout.log 2>&1; echo "rc=$?" >> $R/gpu_tests_conv_layout.log
KILN_CUDNN_RTC_OVERLAP=1 timeout 60 $B/kiln_gpu_tests --gtest_filter='GpuLayout.RuntimeFusionAfterConvNoSync' > $R/no_barrier_test.log 2>&1; echo "rc=$?" >> $R/no_barrier_test.log
( cd wd && $PY -c "
import torch, torchvision, numpy as np
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None).eval()
torch.onnx.export(m, torch.randn(1,3,224,224), 'r50.onnx', opset_version=17, input_names=['x'], output_names=['y'],
                  dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}}, dynamo=False)
np.save('in.npy', np.random.default_rng(0).standard_normal((8,3,224,224)).astype(np.float32))
np.save('in32.npy', np.random.default_rng(1).standard_normal((32,3,224,224)).astype(np.float32))
" > $R/export.log 2>&1 )
cd wd
for i in 1 2 3; do
  timeout 60 env KILN_TACTIC_EXCLUDE='eng=39;' $B/kiln compare --onnx=r50.onnx --shapes=x:8x3x224x224 --loadInputs=x:in.npy \
    --compareRun=2 --rtol=1e-2 --atol=1e-2 > $R/ex39_fixed_$i.log 2>&1
  echo "ex39_fixed_$i rc=$? $(grep -E '^y ' $R/ex39_fixed_$i.log)" | tee -a $R/summary.txt
done
timeout 90 $B/kiln compare --onnx=r50.onnx --fp16 --minShapes=x:1x3x224x224 --optShapes=x:32x3x224x224 \
  --maxShapes=x:32x3x224x224 --shapes=x:32x3x224x224 --loadInputs=x:in32.npy --compareRun=3 --rtol=1e-2 --atol=1e-2 \
  > $R/fp16dyn_fixed.log 2>&1
echo "fp16dyn_fixed rc=$? $(grep -E '^y ' $R/fp16dyn_fixed.log)" | tee -a $R/summary.txt
cd ..
left=$(( 560 - ($(date +%s) - start) ))
timeout $left $PY tests/models/test_gpu_models.py --kiln $B/kiln --json $R/gpu_models.json > $R/gpu_models.log 2>&1
echo "gpu_models rc=$? seconds=$(( $(date +%s) - start ))" >> $R/gpu_models.log
tar czf $OUT/s9v.tgz -C $OUT s9v
