#!/usr/bin/env bash
# For session 14's first GPU call: the gpu label at HEAD (fdd2876's test changes have not run on a GPU), then issue 17
# item 3 on the text models: each built as an FP16 engine with a min/opt/max profile and as a static engine at the
# shape it is timed at, both timed with CUDA graphs in this one call (BUDGET caps the timing part). Lands in $OUT/r.tgz.
source bench/probe/device_env.sh
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
R=$OUT/r
mkdir -p $R
nvidia-smi -L > $R/gpu.txt
for i in 0 1; do
  ( GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i timeout 300 .bundle/bin/kiln_gpu_tests --gtest_filter='-GpuOom*:GpuStress*' \
      --gtest_brief=1 --gtest_output=xml:$R/shard$i.xml > $R/shard$i.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/shard$i.log ) &
done
MODELS=${MODELS:-"bert_base gpt2_small llama_decoder distilbert"}
for m in $MODELS; do
  ( timeout 200 $PY bench/export_zoo.py --models $m --no-check > $R/export_$m.log 2>&1; echo "rc=$?" >> $R/export_$m.log ) &
done
wait
echo "tests and exports done t=$SECONDS" >> $R/zoo.log
for m in $MODELS; do
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
