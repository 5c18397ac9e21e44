#!/usr/bin/env bash
# Session 12: per-layer profiles of the widened zoo's slowest models (issue 17), FP16 at the large batch, CUDA graph
# timing plus a separate profiling run; build reports (the layers and their tactics) kept. Lands in $OUT/r.
source bench/probe/device_env.sh
R=$OUT/r
mkdir -p $R
nvidia-smi -L > $R/gpu.txt
MODELS=${MODELS:-"densenet121 convnext_tiny efficientnet_v2_s swin_t deit_small regnet_y_800mf"}
for m in $MODELS; do
  ( timeout 150 $PY bench/export_zoo.py --models $m > $R/export_$m.log 2>&1; echo "rc=$?" >> $R/export_$m.log ) &
done
wait
for m in $MODELS; do
  [ $SECONDS -gt ${BUDGET:-500} ] && { echo "$m: skipped (time)" >> $R/zoo.log; continue; }
  shapes=$($PY -c "import sys; sys.path.insert(0,'bench'); import zoo; s=zoo.SPECS['$m']; print(s.kiln_shapes(s.large_batch))")
  timeout 90 $K build --onnx=bench/models/$m.onnx --shapes=$shapes --fp16 --saveEngine=e_$m.engine \
    --profilingVerbosity=detailed --json=$R/build_$m.json > $R/build_$m.log 2>&1
  b=$?
  timeout 30 $K bench --loadEngine=e_$m.engine --useCudaGraph --noDataTransfers --duration=2 \
    --separateProfileRun --exportProfile=$R/profile_$m.json --json=$R/bench_$m.json > $R/bench_$m.log 2>&1
  echo "$m $shapes build_rc=$b bench_rc=$? $(grep -h -E 'Throughput|GPU Compute Time: min' $R/bench_$m.log | tr '\n' ' ')" >> $R/zoo.log
done
tar czf $OUT/r.tgz -C $OUT r
