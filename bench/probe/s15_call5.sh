#!/usr/bin/env bash
# Session 15, fifth GPU call, after the review of the per-shape tactics: cuBLASLt canonicalization reverted (it never
# copied a configuration), a cached tactic the factory can still make counts as a hit, per-shape tactics capped at
# the engine's own weight bytes (none under a WORKSPACE limit, none for layers over 16 MiB of constants), every timed
# point kept. The whole gpu label, then ResNet-50 dynamic vs static (bench/dynamic_shapes.py) and a dynamic build cold
# then warm with a timing cache. Lands in $OUT/r.tgz.
source bench/probe/device_env.sh
R=$OUT/r
mkdir -p $R m
nvidia-smi -L > $R/gpu.txt
gpu_label_shards $R
zoo_export m $R resnet50
wait
gpu_label_alone $R
timeout 230 $PY bench/dynamic_shapes.py --kiln $K --models resnet50 --models-dir m --out $R/dynamic_shapes.json \
  > $R/dynamic_shapes.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/dynamic_shapes.log
for run in cold warm; do
  timeout 60 $K build --onnx=m/resnet50.onnx --fp16 --minShapes=input:1x3x224x224 --optShapes=input:32x3x224x224 \
    --maxShapes=input:64x3x224x224 --timingCacheFile=tc.json --saveEngine=dyn_$run.engine --json=$R/build_dyn_$run.json \
    > $R/build_dyn_$run.log 2>&1
  echo "$run rc=$? t=$SECONDS" >> $R/dynamic_shapes.log
done
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
