#!/usr/bin/env bash
# Is the TF32/NHWC ResNet-50 error a race? The same compare with CUDA_LAUNCH_BLOCKING=1 (every launch waits).
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
B=$PWD/.bundle/bin; PY=/opt/torch/.venv/bin/python3; R=$OUT/blk; mkdir -p $R wd; cd wd
$PY -c "
import torch, torchvision, numpy as np
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None).eval()
torch.onnx.export(m, torch.randn(1,3,224,224), 'r50.onnx', opset_version=17, input_names=['x'], output_names=['y'],
                  dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}}, dynamo=False)
np.save('in.npy', np.random.default_rng(0).standard_normal((8,3,224,224)).astype(np.float32))
" > $R/export.log 2>&1
timeout 90 $B/kiln build --onnx=r50.onnx --shapes=x:8x3x224x224 --saveEngine=t.engine > $R/build.log 2>&1
for blk in 0 1; do for run in 1 2; do
  CUDA_LAUNCH_BLOCKING=$blk timeout 60 $B/kiln compare --loadEngine=t.engine --onnx=r50.onnx --loadInputs=x:in.npy \
    --compareRun=$run > $R/blk${blk}_run$run.log 2>&1
  echo "blocking=$blk run=$run $(grep -E '^y ' $R/blk${blk}_run$run.log)"
done; done
