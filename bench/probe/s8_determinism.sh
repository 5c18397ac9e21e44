#!/usr/bin/env bash
# Does a ResNet-50 engine give the same outputs on the 1st and the 10th run of one context (same input)? kiln serve's
# load showed 7-25% relative L2 between two answers for one input. Results in $OUT/det.tgz.
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
B=$PWD/.bundle/bin; PY=/opt/torch/.venv/bin/python3; R=$OUT/det; mkdir -p $R wd; cd wd
$PY -c "
import torch, torchvision, numpy as np
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None).eval()
torch.onnx.export(m, torch.randn(1,3,224,224), 'r50.onnx', opset_version=17, input_names=['x'], output_names=['y'],
                  dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}}, dynamo=False)
np.save('in.npy', np.random.default_rng(0).standard_normal((8,3,224,224)).astype(np.float32))
" > $R/export.log 2>&1
for p in fp16 fp32; do
  flag=""; [ $p = fp16 ] && flag=--fp16
  timeout 200 $B/kiln build --onnx=r50.onnx $flag --minShapes=x:1x3x224x224 --optShapes=x:32x3x224x224 --maxShapes=x:32x3x224x224 --saveEngine=$p.engine > $R/build_$p.log 2>&1
  for it in 1 2 10; do
    timeout 60 $B/kiln run --loadEngine=$p.engine --loadInputs=x:in.npy --iterations=$it --exportOutput=o_${p}_$it > $R/run_${p}_$it.log 2>&1
  done
done
$PY -c "
import numpy as np
for p in ('fp16','fp32'):
    a = np.load(f'o_{p}_1/y.npy')
    for it in (2, 10):
        b = np.load(f'o_{p}_{it}/y.npy')
        print(p, it, 'rel_l2', float(np.linalg.norm(a-b)/np.linalg.norm(a)), 'max', float(np.abs(a-b).max()), 'absmax', float(np.abs(a).max()))
" > $R/compare.txt 2>&1
cat $R/compare.txt
tar czf $OUT/det.tgz -C $OUT det
