#!/usr/bin/env bash
# Session 13's first GPU call: session 12's graph rewrites checked on a card. The gpu test binary in two shards (the
# out-of-memory and stress tests left out) runs beside every zoo model's export and its comparison against
# onnxruntime at batch 2 (FP32 engine with TF32 off, rtol 1e-3; FP16 engine, rel L2 reported); then, with the GPU
# to itself, each model is built as an FP16 engine at its large batch and timed with CUDA graphs (no torch rows:
# the ratios are zoo_chunk.sh's). Lands in $OUT/r.
source bench/probe/device_env.sh
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
B=.bundle/bin
R=$OUT/r
mkdir -p $R
nvidia-smi -L > $R/gpu.txt
S=""
for i in 0 1; do
  ( GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i timeout 400 $B/kiln_gpu_tests --gtest_filter='-GpuOom*:GpuStress*' \
      --gtest_brief=1 --gtest_output=xml:$R/shard$i.xml > $R/shard$i.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/shard$i.log ) &
  S="$S $!"
done
MODELS=${MODELS:-"resnet50 efficientnet_b0 vit_b_16 bert_base gpt2_small yolov8_style mobilenet_v3_large convnext_tiny swin_t deit_small regnet_y_800mf densenet121 efficientnet_v2_s distilbert t5_encoder llama_decoder"}
E=""
for m in $MODELS; do
  ( timeout 200 $PY bench/export_zoo.py --models $m --no-check > $R/export_$m.log 2>&1; echo "rc=$?" >> $R/export_$m.log ) &
  E="$E $!"
done
wait $E
echo "exported t=$SECONDS" >> $R/zoo.log
spec() { $PY -c "import sys; sys.path.insert(0,'bench'); import zoo; s=zoo.SPECS['$1']; print(s.kiln_shapes($2))"; }
for m in $MODELS; do
  two=$(spec $m 2)
  timeout 60 $K compare --onnx=bench/models/$m.onnx --backend=cuda --noTF32 --shapes=$two --reference=onnxruntime \
    --rtol=1e-3 --atol=1e-4 > $R/cmp32_$m.log 2>&1; c32=$?
  timeout 60 $K compare --onnx=bench/models/$m.onnx --backend=cuda --fp16 --shapes=$two --reference=onnxruntime \
    --rtol=5e-2 --atol=5e-2 > $R/cmp16_$m.log 2>&1; c16=$?
  echo "$m cmp32_rc=$c32 cmp16_rc=$c16 t=$SECONDS" >> $R/zoo.log
done
wait $S
echo "tests done t=$SECONDS" >> $R/zoo.log
for m in $MODELS; do
  [ $SECONDS -gt ${BUDGET:-540} ] && { echo "$m: skipped (time)" >> $R/zoo.log; continue; }
  big=$(spec $m s.large_batch)
  timeout 90 $K build --onnx=bench/models/$m.onnx --shapes=$big --fp16 --saveEngine=e_$m.engine \
    --json=$R/build_$m.json > $R/build_$m.log 2>&1; b=$?
  timeout 20 $K bench --loadEngine=e_$m.engine --useCudaGraph --noDataTransfers --duration=2 \
    --json=$R/bench_$m.json > $R/bench_$m.log 2>&1
  echo "$m $big build_rc=$b $(grep -h -E 'layers' $R/build_$m.log | head -1) $(grep -h -E 'Throughput|GPU Compute Time: min' $R/bench_$m.log | tr '\n' ' ')" >> $R/zoo.log
done
tar czf $OUT/r.tgz -C $OUT r
