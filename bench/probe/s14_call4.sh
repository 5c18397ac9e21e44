#!/usr/bin/env bash
# Session 14, fourth GPU call. (1) Dynamic text engines after uniform masks are dropped (simplify-attention-mask with
# passes/uniform_value): DistilBERT and BERT-base FP16, profile 1x16/16x128/32x256 vs static engines at 16x128 and
# 16x77, CUDA graphs; the whole gpu label first. (2) Why ResNet-50 with a 1/32/64 batch profile runs 15% slower at batch 8
# than a static batch-8 engine: a dynamic engine with opt 8, and per-layer profiles of the dynamic (opt 32) and static
# engines at batch 8 with the tactics each build chose (--verbose). (3) kiln.Reformat (the input's Cast, NCHW->NHWC
# Transpose and channel Pad in one kernel): its gpu tests, ResNet-50 / RegNetY / MobileNetV3 against onnxruntime
# (FP32 without TF32, FP16), and FP16 b64 GPU time of the same models built by this bundle's kiln and by the kiln before
# the merge (451b722, carried in the bundle as bin/kiln_before), alternated twice in this one call. Lands in $OUT/r.tgz.
source bench/probe/device_env.sh
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
R=$OUT/r
mkdir -p $R
nvidia-smi -L > $R/gpu.txt
for i in 0 1; do  # the whole gpu label (before any timing), the out-of-memory and stress tests alone after
  ( GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i timeout 400 .bundle/bin/kiln_gpu_tests --gtest_filter='-GpuOom*:GpuStress*' \
      --gtest_brief=1 --gtest_output=xml:$R/shard$i.xml > $R/shard$i.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/shard$i.log ) &
done
cp .bundle/bin/kiln_before kiln_before
for m in distilbert bert_base resnet50 regnet_y_800mf mobilenet_v3_large; do
  ( timeout 200 $PY bench/export_zoo.py --models $m --no-check > $R/export_$m.log 2>&1; echo "rc=$?" >> $R/export_$m.log ) &
done
wait
timeout 45 .bundle/bin/kiln_gpu_tests --gtest_filter='GpuOom*:GpuStress*' --gtest_brief=1 --gtest_output=xml:$R/alone.xml \
  > $R/alone.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/alone.log
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
for m in resnet50 regnet_y_800mf mobilenet_v3_large; do
  timeout 60 $K compare --onnx=bench/models/$m.onnx --backend=cuda --noTF32 --shapes=input:2x3x224x224 --reference=onnxruntime \
    --rtol=1e-3 --atol=1e-4 > $R/cmp32_$m.log 2>&1; c32=$?
  timeout 60 $K compare --onnx=bench/models/$m.onnx --backend=cuda --fp16 --shapes=input:2x3x224x224 --reference=onnxruntime \
    --rtol=5e-2 --atol=5e-2 > $R/cmp16_$m.log 2>&1; c16=$?
  for k in before after; do
    KB=$K; [ $k = before ] && KB=./kiln_before
    timeout 60 $KB build --onnx=bench/models/$m.onnx --fp16 --shapes=input:64x3x224x224 --saveEngine=${k}_$m.engine \
      > $R/build_${k}_$m.log 2>&1
  done
  line="$m cmp32_rc=$c32 cmp16_rc=$c16 $(grep -h -o 'reformats_merged[^,]*' $R/build_after_$m.log | head -1)"
  for rep in 1 2; do
    for k in before after; do
      KB=$K; [ $k = before ] && KB=./kiln_before
      timeout 30 $KB bench --loadEngine=${k}_$m.engine --useCudaGraph --noDataTransfers --duration=2 > $R/bench_${k}${rep}_$m.log 2>&1
      line="$line $k$rep: $(med $R/bench_${k}${rep}_$m.log)"
    done
  done
  echo "$line" >> $R/zoo.log
done
timeout 30 $K bench --loadEngine=after_resnet50.engine --useCudaGraph --noDataTransfers --duration=1 --separateProfileRun \
  --exportProfile=$R/profile_after_resnet50.json > /dev/null 2>&1
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
