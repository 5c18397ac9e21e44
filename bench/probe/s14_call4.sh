#!/usr/bin/env bash
# Session 14, fourth GPU call. (1) Dynamic text engines after uniform masks are dropped (simplify-attention-mask with
# passes/uniform_value): DistilBERT and BERT-base FP16, profile 1x16/16x128/32x256 vs static engines at 16x128 and
# 16x77, CUDA graphs; the attention gpu tests. (2) Why ResNet-50 with a 1/32/64 batch profile runs 15% slower at batch 8
# than a static batch-8 engine: a dynamic engine with opt 8, and per-layer profiles of the dynamic (opt 32) and static
# engines at batch 8 with the tactics each build chose (--verbose). Lands in $OUT/r.tgz.
source bench/probe/device_env.sh
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
R=$OUT/r
mkdir -p $R
nvidia-smi -L > $R/gpu.txt
( timeout 200 .bundle/bin/kiln_gpu_tests --gtest_filter="GpuAttention*:GpuTensor.Concat*:${EXTRA_TESTS:-NONE}" --gtest_brief=1 \
    > $R/gpu_tests.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/gpu_tests.log ) &
for m in distilbert bert_base resnet50; do
  ( timeout 200 $PY bench/export_zoo.py --models $m --no-check > $R/export_$m.log 2>&1; echo "rc=$?" >> $R/export_$m.log ) &
done
wait
echo "tests and exports done t=$SECONDS" >> $R/zoo.log
med() { grep -h 'GPU Compute Time: min' $1 | grep -o 'median = [0-9.]* ms'; }
for m in distilbert bert_base; do
  timeout 90 $K build --onnx=bench/models/$m.onnx --fp16 --minShapes=input_ids:1x16 --optShapes=input_ids:16x128 \
    --maxShapes=input_ids:32x256 --saveEngine=dyn_$m.engine --verbose > $R/build_dyn_$m.log 2>&1
  for s in 16x128 16x77; do
    timeout 90 $K build --onnx=bench/models/$m.onnx --fp16 --shapes=input_ids:$s --saveEngine=st_${m}_$s.engine \
      > $R/build_st_${m}_$s.log 2>&1
    timeout 30 $K bench --loadEngine=st_${m}_$s.engine --useCudaGraph --noDataTransfers --duration=2 > $R/bench_st_${m}_$s.log 2>&1
    timeout 30 $K bench --loadEngine=dyn_$m.engine --shapes=input_ids:$s --useCudaGraph --noDataTransfers --duration=2 \
      > $R/bench_dyn_${m}_$s.log 2>&1
    echo "$m $s static: $(med $R/bench_st_${m}_$s.log) dynamic: $(med $R/bench_dyn_${m}_$s.log) layers $(grep -h 'layers:' $R/build_st_${m}_$s.log | grep -o '[0-9]* after') / $(grep -h 'layers:' $R/build_dyn_$m.log | grep -o '[0-9]* after')" >> $R/zoo.log
  done
done
m=resnet50
timeout 90 $K build --onnx=bench/models/$m.onnx --fp16 --minShapes=input:1x3x224x224 --optShapes=input:32x3x224x224 \
  --maxShapes=input:64x3x224x224 --profilingVerbosity=detailed --saveEngine=dyn32.engine --verbose > $R/build_dyn32_$m.log 2>&1
timeout 90 $K build --onnx=bench/models/$m.onnx --fp16 --minShapes=input:1x3x224x224 --optShapes=input:8x3x224x224 \
  --maxShapes=input:64x3x224x224 --saveEngine=dyn8.engine > $R/build_dyn8_$m.log 2>&1
timeout 90 $K build --onnx=bench/models/$m.onnx --fp16 --shapes=input:8x3x224x224 --profilingVerbosity=detailed \
  --saveEngine=st8.engine --verbose > $R/build_st8_$m.log 2>&1
for e in st8 dyn8 dyn32; do
  timeout 30 $K bench --loadEngine=$e.engine --shapes=input:8x3x224x224 --useCudaGraph --noDataTransfers --duration=2 \
    > $R/bench_${e}_$m.log 2>&1
done
for e in st8 dyn32; do
  timeout 30 $K bench --loadEngine=$e.engine --shapes=input:8x3x224x224 --useCudaGraph --noDataTransfers --duration=1 \
    --separateProfileRun --exportProfile=$R/profile_${e}_$m.json > /dev/null 2>&1
done
echo "$m batch 8: static $(med $R/bench_st8_$m.log) dynamic-opt8 $(med $R/bench_dyn8_$m.log) dynamic-opt32 $(med $R/bench_dyn32_$m.log)" >> $R/zoo.log
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
