#!/usr/bin/env bash
# Session 9's first GPU call: the whole gpu label (kiln_gpu_tests, with the new ResNet-shape NHWC tactic test that
# repeats each layer on a poisoned workspace), then the ResNet-50 wrong-result bisection: FP32+TF32 NHWC at batch 8,
# built three times per tactic exclusion (KILN_TACTIC_EXCLUDE), each compared with the CPU reference on run 2.
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
B=$PWD/.bundle/bin; PY=/opt/torch/.venv/bin/python3; R=$OUT/s9; mkdir -p $R wd
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt
start=$(date +%s)
( cd wd && $PY -c "
import torch, torchvision, numpy as np
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None).eval()
torch.onnx.export(m, torch.randn(1,3,224,224), 'r50.onnx', opset_version=17, input_names=['x'], output_names=['y'],
                  dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}}, dynamo=False)
np.save('in.npy', np.random.default_rng(0).standard_normal((8,3,224,224)).astype(np.float32))
" > $R/export.log 2>&1 )
timeout ${GPU_TESTS_S:-260} $B/kiln_gpu_tests --gtest_brief=1 ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} > $R/gpu_tests.log 2>&1
echo "rc=$? seconds=$(( $(date +%s) - start ))" >> $R/gpu_tests.log
cd wd
c() {  # tag, then env assignments; builds and compares run 2 with the CPU reference
  local tag=$1; shift
  timeout 60 env "$@" $B/kiln compare --onnx=r50.onnx --shapes=x:8x3x224x224 --loadInputs=x:in.npy --compareRun=2 \
    --rtol=1e-2 --atol=1e-2 ${VERBOSE:+--verbose} > $R/$tag.log 2>&1
  echo "$tag rc=$? $(grep -E '^y ' $R/$tag.log)" | tee -a $R/summary.txt
}
for i in 1 2 3; do
  VERBOSE=1 c all_$i KILN_X=1
  c nofused_$i KILN_TACTIC_EXCLUDE='^cudnn-fused:'
  c noeng4_$i KILN_TACTIC_EXCLUDE='^cudnn-fused:eng=4;'
  c noeng51_$i KILN_TACTIC_EXCLUDE='eng=51;'
  c noeng39_$i KILN_TACTIC_EXCLUDE='eng=39;'
  c onlyfused_$i KILN_TACTIC_EXCLUDE='^cudnn:'
  [ $(( $(date +%s) - start )) -gt 540 ] && break
done
cd ..
tar czf $OUT/s9.tgz -C $OUT s9
