#!/usr/bin/env bash
# Session 14, third GPU call. (1) Concat's one-launch tactic with (columns, rows) blocks: the Concat gpu tests and
# DenseNet-121 FP16 b64 (--verbose: both tactics timed per Concat; CUDA-graph timing). (2) Where dynamic engines lose
# time: DistilBERT and BERT-base FP16 with a 1x16/16x128/32x256 profile and static at 16x128, each profiled per layer at
# 16x128 (CUDA graph timing beside it); their exported graphs without weights (external data left behind) so the
# planner's dynamic graph can be read on the CPU. (3) ResNet-50 with a batch profile 1/32/64 against static engines
# at 64 and 8 (issue 17 item 3 names ResNet-50 +12% away from the opt shape). Lands in $OUT/r.tgz.
source bench/probe/device_env.sh
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
R=$OUT/r
mkdir -p $R
nvidia-smi -L > $R/gpu.txt
( timeout 200 .bundle/bin/kiln_gpu_tests --gtest_filter="GpuTensor.Concat*:${EXTRA_TESTS:-NONE}" --gtest_brief=1 > $R/gpu_tests.log 2>&1
  echo "rc=$? t=$SECONDS" >> $R/gpu_tests.log ) &
for m in densenet121 distilbert bert_base resnet50; do
  ( timeout 200 $PY bench/export_zoo.py --models $m --no-check > $R/export_$m.log 2>&1; echo "rc=$?" >> $R/export_$m.log ) &
done
wait
echo "tests and exports done t=$SECONDS" >> $R/zoo.log
for m in distilbert bert_base; do
  $PY -c "
import onnx
m = onnx.load('bench/models/$m.onnx')
onnx.save_model(m, '$R/${m}_graph.onnx', save_as_external_data=True, all_tensors_to_one_file=True,
                location='${m}_w.bin', size_threshold=1024)" >> $R/zoo.log 2>&1
  rm -f $R/${m}_w.bin
done
m=densenet121
timeout 90 $K build --onnx=bench/models/$m.onnx --shapes=input:64x3x224x224 --fp16 --saveEngine=e_$m.engine --verbose \
  > $R/build_$m.log 2>&1
timeout 30 $K bench --loadEngine=e_$m.engine --useCudaGraph --noDataTransfers --duration=2 > $R/bench_$m.log 2>&1
echo "$m t=$SECONDS $(grep -h -E 'GPU Compute Time: min' $R/bench_$m.log)" >> $R/zoo.log
for m in distilbert bert_base; do
  timeout 90 $K build --onnx=bench/models/$m.onnx --fp16 --minShapes=input_ids:1x16 --optShapes=input_ids:16x128 \
    --maxShapes=input_ids:32x256 --profilingVerbosity=detailed --saveEngine=dyn_$m.engine --verbose > $R/build_dyn_$m.log 2>&1
  timeout 90 $K build --onnx=bench/models/$m.onnx --fp16 --shapes=input_ids:16x128 --profilingVerbosity=detailed \
    --saveEngine=st_$m.engine --verbose > $R/build_st_$m.log 2>&1
  for k in st dyn; do
    timeout 30 $K bench --loadEngine=${k}_$m.engine --shapes=input_ids:16x128 --useCudaGraph --noDataTransfers --duration=2 \
      --separateProfileRun --exportProfile=$R/profile_${k}_$m.json > $R/bench_${k}_$m.log 2>&1
  done
  echo "$m 16x128 static: $(grep -h 'GPU Compute Time: min' $R/bench_st_$m.log | grep -o 'median = [0-9.]* ms') dynamic: $(grep -h 'GPU Compute Time: min' $R/bench_dyn_$m.log | grep -o 'median = [0-9.]* ms')" >> $R/zoo.log
done
m=resnet50
timeout 90 $K build --onnx=bench/models/$m.onnx --fp16 --minShapes=input:1x3x224x224 --optShapes=input:32x3x224x224 \
  --maxShapes=input:64x3x224x224 --saveEngine=dyn_$m.engine > $R/build_dyn_$m.log 2>&1
for b in 64 32 8; do
  timeout 90 $K build --onnx=bench/models/$m.onnx --fp16 --shapes=input:${b}x3x224x224 --saveEngine=st_${m}_$b.engine \
    > $R/build_st_${m}_$b.log 2>&1
  timeout 30 $K bench --loadEngine=st_${m}_$b.engine --useCudaGraph --noDataTransfers --duration=2 > $R/bench_st_${m}_$b.log 2>&1
  timeout 30 $K bench --loadEngine=dyn_$m.engine --shapes=input:${b}x3x224x224 --useCudaGraph --noDataTransfers --duration=2 \
    > $R/bench_dyn_${m}_$b.log 2>&1
  echo "$m $b static: $(grep -h 'GPU Compute Time: min' $R/bench_st_${m}_$b.log | grep -o 'median = [0-9.]* ms') dynamic: $(grep -h 'GPU Compute Time: min' $R/bench_dyn_${m}_$b.log | grep -o 'median = [0-9.]* ms')" >> $R/zoo.log
done
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
