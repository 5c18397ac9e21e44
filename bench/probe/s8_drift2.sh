#!/usr/bin/env bash
# Localize the FP32 ResNet-50 error (rel L2 0.27-0.41 vs the CPU reference, different on each run): TF32 off, the
# NCHW layout, FP16, batch 32.
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
B=$PWD/.bundle/bin; PY=/opt/torch/.venv/bin/python3; R=$OUT/drift2; mkdir -p $R wd; cd wd
[ -f r50.onnx ] || $PY -c "
import torch, torchvision, numpy as np
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None).eval()
torch.onnx.export(m, torch.randn(1,3,224,224), 'r50.onnx', opset_version=17, input_names=['x'], output_names=['y'],
                  dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}}, dynamo=False)
np.save('in.npy', np.random.default_rng(0).standard_normal((8,3,224,224)).astype(np.float32))
" > $R/export.log 2>&1
c() { tag=$1; shift; timeout 120 env "$@" --loadInputs=x:in.npy --rtol=1e-2 --atol=1e-2 > $R/$tag.log 2>&1; echo "$tag rc=$? $(grep -E '^y ' $R/$tag.log)"; }
c notf32_r2 $B/kiln compare --onnx=r50.onnx --shapes=x:8x3x224x224 --noTF32 --compareRun=2
c nchw_r1 KILN_LAYOUT=nchw $B/kiln compare --onnx=r50.onnx --shapes=x:8x3x224x224 --compareRun=1
c nchw_r2 KILN_LAYOUT=nchw $B/kiln compare --onnx=r50.onnx --shapes=x:8x3x224x224 --compareRun=2
c fp16_r1 $B/kiln compare --onnx=r50.onnx --shapes=x:8x3x224x224 --fp16 --compareRun=1
c fp16_r2 $B/kiln compare --onnx=r50.onnx --shapes=x:8x3x224x224 --fp16 --compareRun=2
c tf32_verbose $B/kiln compare --onnx=r50.onnx --shapes=x:8x3x224x224 --compareRun=1 --verbose
tar czf $OUT/drift2.tgz -C $OUT drift2
