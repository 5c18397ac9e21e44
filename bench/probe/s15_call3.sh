#!/usr/bin/env bash
# Session 15, third GPU call: per-shape tactics (issue 17 item 3) and the auxiliary streams' pairwise memory planner.
# The whole gpu label (GpuEngine.PerShapeLayersRunNearTheirPoint new; the aux-stream tests under the new planner),
# then bench/dynamic_shapes.py on ResNet-50 (profile 1/32/64: batch 8 ran 1.143x static in call1) and the dynamic
# ResNet-50 build again with a timing cache (cold, then warm: per-shape tactics come from the cache), and GoogLeNet
# b1 --maxAuxStreams=0/4 again (time and outputs). Lands in $OUT/r.tgz.
source bench/probe/device_env.sh
R=$OUT/r
mkdir -p $R m
nvidia-smi -L > $R/gpu.txt
gpu_label_shards $R
zoo_export m $R resnet50 googlenet
wait
gpu_label_alone $R
timeout 300 $PY bench/dynamic_shapes.py --kiln $K --models resnet50 --models-dir m --out $R/dynamic_shapes.json \
  > $R/dynamic_shapes.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/dynamic_shapes.log
for run in cold warm; do
  timeout 120 $K build --onnx=m/resnet50.onnx --fp16 --minShapes=input:1x3x224x224 --optShapes=input:32x3x224x224 \
    --maxShapes=input:64x3x224x224 --timingCacheFile=tc.json --saveEngine=dyn_$run.engine --json=$R/build_dyn_$run.json \
    --verbose > $R/build_dyn_$run.log 2>&1
  echo "$run rc=$? t=$SECONDS" >> $R/dynamic_shapes.log
done
timeout 60 $K inspect --loadEngine=dyn_cold.engine --dumpLayerInfo > $R/inspect_dyn.log 2>&1
med() { grep -h 'GPU Compute Time: min' $1 | grep -o 'median = [0-9.]* ms'; }
$PY -c "import numpy as np; np.save('x.npy', np.random.default_rng(1).standard_normal((1,3,224,224)).astype(np.float32))"
for a in 0 4; do
  timeout 120 $K build --onnx=m/googlenet.onnx --fp16 --shapes=input:1x3x224x224 --maxAuxStreams=$a --saveEngine=g$a.engine \
    --json=$R/build_g$a.json > $R/build_g$a.log 2>&1
  timeout 60 $K run --loadEngine=g$a.engine --loadInputs=input:x.npy --exportOutput=o$a > $R/run_g$a.log 2>&1
done
for round in 1 2; do
  for a in 0 4; do
    timeout 30 $K bench --loadEngine=g$a.engine --useCudaGraph --noDataTransfers --duration=1.5 > $R/bench_g${a}_$round.log 2>&1
    echo "googlenet b1 aux$a round$round $(med $R/bench_g${a}_$round.log)" >> $R/aux.log
  done
done
$PY -c "
import numpy as np, glob
a=[np.load(f) for f in sorted(glob.glob('o0/*.npy'))]; b=[np.load(f) for f in sorted(glob.glob('o4/*.npy'))]
print('aux4 vs aux0 max abs diff', max(float(np.abs(x.astype(np.float64)-y).max()) for x,y in zip(a,b)))" >> $R/aux.log 2>&1
echo "t=$SECONDS" >> $R/aux.log
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
