#!/usr/bin/env bash
# Session 13, second GPU call: tactic selection's cost and the slow models' profiles. The new GpuEngine tests (an
# identical layer takes its twin's tactic without timing) run beside the exports; then each model is built as an
# FP16 engine at its large batch with --verbose (the tactic lines and the creating/timing split of tuning) and
# --profilingVerbosity=detailed, and timed with CUDA graphs plus a separate per-layer profiling run. Lands in
# $OUT/r.tgz only (the device tool returns 8 files).
source bench/probe/device_env.sh
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
R=$OUT/r
mkdir -p $R
nvidia-smi -L > $R/gpu.txt
( timeout 200 .bundle/bin/kiln_gpu_tests --gtest_filter='GpuEngine.*' --gtest_brief=1 > $R/gpu_engine_tests.log 2>&1
  echo "rc=$?" >> $R/gpu_engine_tests.log ) &
MODELS=${MODELS:-"resnet50 vit_b_16 convnext_tiny densenet121 efficientnet_v2_s swin_t mobilenet_v3_large regnet_y_800mf"}
E=""
for m in $MODELS; do
  ( timeout 200 $PY bench/export_zoo.py --models $m --no-check > $R/export_$m.log 2>&1; echo "rc=$?" >> $R/export_$m.log ) &
  E="$E $!"
done
wait
echo "ready t=$SECONDS" >> $R/zoo.log
for m in $MODELS; do
  [ $SECONDS -gt ${BUDGET:-520} ] && { echo "$m: skipped (time)" >> $R/zoo.log; continue; }
  big=$($PY -c "import sys; sys.path.insert(0,'bench'); import zoo; s=zoo.SPECS['$m']; print(s.kiln_shapes(s.large_batch))")
  timeout 90 $K build --onnx=bench/models/$m.onnx --shapes=$big --fp16 --saveEngine=e_$m.engine --verbose \
    --profilingVerbosity=detailed --json=$R/build_$m.json > $R/build_$m.log 2>&1; b=$?
  timeout 30 $K bench --loadEngine=e_$m.engine --useCudaGraph --noDataTransfers --duration=2 \
    --separateProfileRun --exportProfile=$R/profile_$m.json --json=$R/bench_$m.json > $R/bench_$m.log 2>&1
  echo "$m $big build_rc=$b t=$SECONDS $(grep -h -E 'tactics:|build time' $R/build_$m.log | tr '\n' ' ') $(grep -h -E 'Throughput|GPU Compute Time: min' $R/bench_$m.log | tr '\n' ' ')" >> $R/zoo.log
done
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
