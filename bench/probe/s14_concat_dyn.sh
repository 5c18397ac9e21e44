#!/usr/bin/env bash
# Session 14, second GPU call. (1) Concat in one launch (tactic concat.one beside the per-input copies, concat.copies):
# the Concat gpu tests, DenseNet-121 FP16 b64 built with --verbose (each Concat's two tactics timed side by side in the
# build log), timed with a CUDA graph and profiled per layer, then kiln against torch.compile reduce-overhead in one
# run (run_bench.py, kiln now with CUDA graphs at every batch). (2) Issue 17 item 3 on the text models: each built as an
# FP16 engine with a min/opt/max profile and as static engines at the shapes timed, all timed with CUDA graphs here.
# Lands in $OUT/r.tgz.
source bench/probe/device_env.sh
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
R=$OUT/r
mkdir -p $R/results
nvidia-smi -L > $R/gpu.txt
( timeout 200 .bundle/bin/kiln_gpu_tests --gtest_filter='GpuTensor.*' --gtest_brief=1 > $R/gpu_tests.log 2>&1
  echo "rc=$? t=$SECONDS" >> $R/gpu_tests.log ) &
TEXT=${TEXT:-"bert_base gpt2_small llama_decoder distilbert"}
for m in densenet121 $TEXT; do
  ( timeout 200 $PY bench/export_zoo.py --models $m --no-check > $R/export_$m.log 2>&1; echo "rc=$?" >> $R/export_$m.log ) &
done
wait
echo "tests and exports done t=$SECONDS" >> $R/zoo.log
m=densenet121
timeout 90 $K build --onnx=bench/models/$m.onnx --shapes=input:64x3x224x224 --fp16 --saveEngine=e_$m.engine --verbose \
  --profilingVerbosity=detailed --json=$R/build_$m.json > $R/build_$m.log 2>&1
timeout 30 $K bench --loadEngine=e_$m.engine --useCudaGraph --noDataTransfers --duration=2 \
  --separateProfileRun --exportProfile=$R/profile_$m.json --json=$R/bench_$m.json > $R/bench_$m.log 2>&1
# Item 4's warm rebuild: the same build twice with a timing cache file (the second reads every tactic from it).
for k in cold warm; do
  timeout 90 $K build --onnx=bench/models/$m.onnx --shapes=input:64x3x224x224 --fp16 --timingCacheFile=tc_$m.cache \
    --json=$R/build_${k}_$m.json > $R/build_${k}_$m.log 2>&1
done
echo "$m t=$SECONDS $(grep -h -E 'build time' $R/build_$m.log $R/build_cold_$m.log $R/build_warm_$m.log | tr '\n' ' ') $(grep -h -E 'GPU Compute Time: min' $R/bench_$m.log)" >> $R/zoo.log
timeout 240 $PY bench/run_bench.py --kiln $K --models $m --batches 64 --precisions fp16 \
  --modes reduce-overhead,kiln --timeout 150 --fresh --results-dir $R/results > $R/run_bench.log 2>&1
echo "run_bench rc=$? t=$SECONDS" >> $R/zoo.log
for m in $TEXT; do
  [ $SECONDS -gt ${BUDGET:-500} ] && { echo "$m: skipped (time)" >> $R/zoo.log; continue; }
  case $m in
    llama_decoder) lo=1x16; opt=2x256; hi=4x512; runs="2x256 1x77" ;;
    *) lo=1x16; opt=16x128; hi=32x256; runs="16x128 16x77" ;;
  esac
  timeout 90 $K build --onnx=bench/models/$m.onnx --fp16 --minShapes=input_ids:$lo --optShapes=input_ids:$opt \
    --maxShapes=input_ids:$hi --saveEngine=dyn_$m.engine --json=$R/build_dyn_$m.json > $R/build_dyn_$m.log 2>&1
  for s in $runs; do
    timeout 90 $K build --onnx=bench/models/$m.onnx --fp16 --shapes=input_ids:$s --saveEngine=st_${m}_${s}.engine \
      > $R/build_st_${m}_$s.log 2>&1
    timeout 20 $K bench --loadEngine=st_${m}_${s}.engine --useCudaGraph --noDataTransfers --duration=2 \
      > $R/bench_st_${m}_$s.log 2>&1
    timeout 20 $K bench --loadEngine=dyn_$m.engine --shapes=input_ids:$s --useCudaGraph --noDataTransfers --duration=2 \
      > $R/bench_dyn_${m}_$s.log 2>&1
    echo "$m $s static: $(grep -h 'GPU Compute Time: min' $R/bench_st_${m}_$s.log | grep -o 'median = [0-9.]* ms') \
dynamic: $(grep -h 'GPU Compute Time: min' $R/bench_dyn_${m}_$s.log | grep -o 'median = [0-9.]* ms') \
layers $(grep -h 'layers:' $R/build_st_${m}_$s.log | grep -o '[0-9]* after') / $(grep -h 'layers:' $R/build_dyn_$m.log | grep -o '[0-9]* after')" >> $R/zoo.log
  done
done
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
