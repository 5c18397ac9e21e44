#!/usr/bin/env bash
# Session 13, third GPU call: tactic inputs filled on the device (build time), the per-channel broadcast path of
# binary arithmetic (squeeze-excitation scales) and kiln's depthwise NHWC kernel. The whole gpu test binary in two
# shards beside the exports; then ConvNeXt, EfficientNetV2 and MobileNetV3 (the models with depthwise convolutions
# and SE scales) against onnxruntime at batch 2 (FP32 without TF32, FP16), and every model built as an FP16 engine at
# its large batch (build time, the tactic each depthwise layer got) and timed with CUDA graphs and a per-layer
# profiling run. Lands in $OUT/r.tgz.
source bench/probe/device_env.sh
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
B=.bundle/bin
R=$OUT/r
mkdir -p $R
nvidia-smi -L > $R/gpu.txt
S=""
for i in 0 1; do
  ( GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i timeout 300 $B/kiln_gpu_tests --gtest_filter='-GpuOom*:GpuStress*' \
      --gtest_brief=1 --gtest_output=xml:$R/shard$i.xml > $R/shard$i.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/shard$i.log ) &
  S="$S $!"
done
MODELS=${MODELS:-"convnext_tiny efficientnet_v2_s mobilenet_v3_large regnet_y_800mf densenet121 resnet50 efficientnet_b0"}
for m in $MODELS; do
  ( timeout 200 $PY bench/export_zoo.py --models $m --no-check > $R/export_$m.log 2>&1; echo "rc=$?" >> $R/export_$m.log ) &
done
wait
echo "tests and exports done t=$SECONDS" >> $R/zoo.log
spec() { $PY -c "import sys; sys.path.insert(0,'bench'); import zoo; s=zoo.SPECS['$1']; print(s.kiln_shapes($2))"; }
for m in convnext_tiny efficientnet_v2_s mobilenet_v3_large; do
  two=$(spec $m 2)
  timeout 60 $K compare --onnx=bench/models/$m.onnx --backend=cuda --noTF32 --shapes=$two --reference=onnxruntime \
    --rtol=1e-3 --atol=1e-4 > $R/cmp32_$m.log 2>&1; c32=$?
  timeout 60 $K compare --onnx=bench/models/$m.onnx --backend=cuda --fp16 --shapes=$two --reference=onnxruntime \
    --rtol=5e-2 --atol=5e-2 > $R/cmp16_$m.log 2>&1; c16=$?
  echo "$m cmp32_rc=$c32 cmp16_rc=$c16 t=$SECONDS" >> $R/zoo.log
done
for m in $MODELS; do
  [ $SECONDS -gt ${BUDGET:-470} ] && { echo "$m: skipped (time)" >> $R/zoo.log; continue; }
  big=$(spec $m s.large_batch)
  timeout 60 $K build --onnx=bench/models/$m.onnx --shapes=$big --fp16 --saveEngine=e_$m.engine --verbose \
    --profilingVerbosity=detailed --json=$R/build_$m.json > $R/build_$m.log 2>&1; b=$?
  timeout 30 $K bench --loadEngine=e_$m.engine --useCudaGraph --noDataTransfers --duration=2 \
    --separateProfileRun --exportProfile=$R/profile_$m.json --json=$R/bench_$m.json > $R/bench_$m.log 2>&1
  echo "$m $big build_rc=$b t=$SECONDS $(grep -h -E 'tactics:|build time' $R/build_$m.log | tr '\n' ' ') $(grep -h -E 'GPU Compute Time: min' $R/bench_$m.log)" >> $R/zoo.log
done
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
