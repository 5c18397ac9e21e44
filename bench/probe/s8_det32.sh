#!/usr/bin/env bash
# kiln serve's ResNet-50 engine (FP16, batch 1..32, opt 32) outside the server: run 1 against run 10 at batch 32.
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
B=$PWD/.bundle/bin; PY=/opt/torch/.venv/bin/python3; R=$OUT/det32; mkdir -p $R wd; cd wd
[ -f r50.onnx ] || $PY -c "
import torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None).eval()
torch.onnx.export(m, torch.randn(1,3,224,224), 'r50.onnx', opset_version=17, input_names=['x'], output_names=['y'],
                  dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}}, dynamo=False)
" > $R/export.log 2>&1
$PY -c "import numpy as np; np.save('in32.npy', np.random.default_rng(1).standard_normal((32,3,224,224)).astype(np.float32))"
timeout 150 $B/kiln build --onnx=r50.onnx --fp16 --minShapes=x:1x3x224x224 --optShapes=x:32x3x224x224 --maxShapes=x:32x3x224x224 --saveEngine=s.engine > $R/build.log 2>&1
for it in 1 10; do timeout 60 $B/kiln run --loadEngine=s.engine --loadInputs=x:in32.npy --iterations=$it --exportOutput=o$it > $R/run$it.log 2>&1; done
timeout 90 $B/kiln compare --loadEngine=s.engine --onnx=r50.onnx --loadInputs=x:in32.npy --compareRun=3 > $R/compare.log 2>&1
$PY -c "
import numpy as np
a, b = np.load('o1/y.npy'), np.load('o10/y.npy')
print('run1 vs run10 rel_l2', float(np.linalg.norm(a-b)/np.linalg.norm(a)), 'max', float(np.abs(a-b).max()))
" | tee $R/det.txt
grep -E "^y " $R/compare.log
