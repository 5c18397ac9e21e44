#!/usr/bin/env bash
# Session 12's graph rewrites on the GPU (for the next session's first call): every zoo model exported, built as a
# CUDA FP16 engine at its large batch (the build report's layer count and fusions kept), compared against
# onnxruntime at batch 2 (FP32 engine, TF32 off, rtol 1e-3; FP16 engine, rel L2 reported), and timed with CUDA
# graphs. MODELS picks a subset (the 16 take two calls); lands in $OUT/r (one log per model, zoo.log a line each).
source bench/probe/device_env.sh
R=$OUT/r
mkdir -p $R
nvidia-smi -L > $R/gpu.txt
MODELS=${MODELS:-"densenet121 convnext_tiny efficientnet_v2_s swin_t deit_small regnet_y_800mf mobilenet_v3_large efficientnet_b0"}
timeout 200 $PY bench/export_zoo.py --models $(echo $MODELS | tr ' ' ',') --no-check > $R/export.log 2>&1
for m in $MODELS; do
  [ $SECONDS -gt ${BUDGET:-540} ] && { echo "$m: skipped (time)" >> $R/zoo.log; continue; }
  big=$($PY -c "import sys; sys.path.insert(0,'bench'); import zoo; s=zoo.SPECS['$m']; print(s.kiln_shapes(s.large_batch))")
  two=$($PY -c "import sys; sys.path.insert(0,'bench'); import zoo; s=zoo.SPECS['$m']; print(s.kiln_shapes(2))")
  timeout 60 $K compare --onnx=bench/models/$m.onnx --backend=cuda --noTF32 --shapes=$two --reference=onnxruntime \
    --rtol=1e-3 --atol=1e-4 > $R/cmp32_$m.log 2>&1; c32=$?
  timeout 60 $K compare --onnx=bench/models/$m.onnx --backend=cuda --fp16 --shapes=$two --reference=onnxruntime \
    --rtol=5e-2 --atol=5e-2 > $R/cmp16_$m.log 2>&1; c16=$?
  timeout 90 $K build --onnx=bench/models/$m.onnx --shapes=$big --fp16 --saveEngine=e_$m.engine \
    --json=$R/build_$m.json > $R/build_$m.log 2>&1; b=$?
  timeout 20 $K bench --loadEngine=e_$m.engine --useCudaGraph --noDataTransfers --duration=2 \
    --separateProfileRun --exportProfile=$R/profile_$m.json --json=$R/bench_$m.json > $R/bench_$m.log 2>&1
  echo "$m $big cmp32_rc=$c32 cmp16_rc=$c16 build_rc=$b $(grep -h -E 'layers:' $R/build_$m.log | head -1) $(grep -h -E 'Throughput|GPU Compute Time: min' $R/bench_$m.log | tr '\n' ' ')" >> $R/zoo.log
done
tar czf $OUT/r.tgz -C $OUT r
