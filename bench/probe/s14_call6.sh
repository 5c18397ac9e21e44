#!/usr/bin/env bash
# Session 14, last GPU call: tactics timed across a dynamic profile (SelectTactics' also_at: min, max and the
# geometric midpoints). The engine gpu tests (GpuEngine.TacticsAreTimedAcrossADynamicProfile new), then ResNet-50 FP16
# with a 1/32/64 batch profile against static engines at batches 8, 32 and 64, CUDA graphs (call4: 1.12x at batch 8
# with the opt shape's tactics). A mini bundle (.bundle-m.txz: kiln, kiln_gpu_tests, libraries). Lands in $OUT/r.tgz.
tar xJf .bundle-m.txz
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$NV/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle-m/lib:$NV/cufft/lib:$NV/cu13/lib
PY=/opt/torch/.venv/bin/python3
K=.bundle-m/bin/kiln
R=$OUT/r
mkdir -p $R
nvidia-smi -L > $R/gpu.txt
( timeout 150 .bundle-m/bin/kiln_gpu_tests --gtest_filter='GpuEngine.*' --gtest_brief=1 > $R/gpu_tests.log 2>&1
  echo "rc=$? t=$SECONDS" >> $R/gpu_tests.log ) &
timeout 120 $PY bench/export_zoo.py --models resnet50 --no-check > $R/export.log 2>&1
wait
med() { grep -h 'GPU Compute Time: min' $1 | grep -o 'median = [0-9.]* ms'; }
m=resnet50
timeout 120 $K build --onnx=bench/models/$m.onnx --fp16 --minShapes=input:1x3x224x224 --optShapes=input:32x3x224x224 \
  --maxShapes=input:64x3x224x224 --saveEngine=dyn.engine --verbose --json=$R/build_dyn.json > $R/build_dyn.log 2>&1
echo "dyn build: $(grep -h -E 'build time|across the profile' $R/build_dyn.log | tr '\n' ' ')" >> $R/zoo.log
for b in 8 32 64; do
  timeout 60 $K build --onnx=bench/models/$m.onnx --fp16 --shapes=input:${b}x3x224x224 --saveEngine=st$b.engine \
    > $R/build_st$b.log 2>&1
  timeout 20 $K bench --loadEngine=st$b.engine --useCudaGraph --noDataTransfers --duration=2 > $R/bench_st$b.log 2>&1
  timeout 20 $K bench --loadEngine=dyn.engine --shapes=input:${b}x3x224x224 --useCudaGraph --noDataTransfers --duration=2 \
    > $R/bench_dyn$b.log 2>&1
  echo "$m batch $b static: $(med $R/bench_st$b.log) dynamic: $(med $R/bench_dyn$b.log)" >> $R/zoo.log
done
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
