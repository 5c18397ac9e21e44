#!/usr/bin/env bash
# Which layer of the FP32 ResNet-50 engine drifts on a context's 2nd run (kiln compare --compareRun=2 --markAll)?
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
B=$PWD/.bundle/bin; PY=/opt/torch/.venv/bin/python3; R=$OUT/drift; mkdir -p $R wd; cd wd
[ -f r50.onnx ] || $PY -c "
import torch, torchvision, numpy as np
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None).eval()
torch.onnx.export(m, torch.randn(1,3,224,224), 'r50.onnx', opset_version=17, input_names=['x'], output_names=['y'],
                  dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}}, dynamo=False)
np.save('in.npy', np.random.default_rng(0).standard_normal((8,3,224,224)).astype(np.float32))
" > $R/export.log 2>&1
for run in 1 2; do
  timeout 240 $B/kiln compare --onnx=r50.onnx --shapes=x:8x3x224x224 --loadInputs=x:in.npy --compareRun=$run \
    --markAll --rtol=1e-2 --atol=1e-2 --json=$R/compare_run$run.json > $R/compare_run$run.log 2>&1
  echo "rc=$?" >> $R/compare_run$run.log
done
grep -h -i -E "first|drift|FAIL|PASS" $R/compare_run*.log | head -20
tar czf $OUT/drift.tgz -C $OUT drift
