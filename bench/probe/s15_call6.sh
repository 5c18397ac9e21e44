#!/usr/bin/env bash
# Session 15, sixth GPU call (the last of the device budget): per-shape tactics' constants budget also counted for
# repeated layers (0995665 + budget fix). The whole gpu label, then ResNet-50 dynamic vs static. Results are tarred
# after each step (the call may be cut short). Lands in $OUT/r.tgz.
source bench/probe/device_env.sh
R=$OUT/r
mkdir -p $R m
nvidia-smi -L > $R/gpu.txt
gpu_label_shards $R 150
zoo_export m $R resnet50
wait
gpu_label_alone $R
tar czf $OUT/r.tgz -C $OUT r
timeout 150 $PY bench/dynamic_shapes.py --kiln $K --models resnet50 --models-dir m --duration 1 --out $R/dynamic_shapes.json \
  > $R/dynamic_shapes.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/dynamic_shapes.log
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
