#!/usr/bin/env bash
# Session 13, last GPU call: the NHWC global-average-pool reduction with narrower blocks (gpu tests of the reduce,
# pooling, layout and pointwise layers beside the exports), then kiln against torch.compile reduce-overhead in one
# run for the models that trailed it most (FP16, the large batch): bench/run_bench.py, fresh results. Lands in
# $OUT/r.tgz.
source bench/probe/device_env.sh
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
R=$OUT/r
mkdir -p $R/results
nvidia-smi -L > $R/gpu.txt
( timeout 150 .bundle/bin/kiln_gpu_tests --gtest_filter='GpuReduce.*:GpuNormPool*:GpuLayout.*:GpuPointwise.FloatArith*' \
    --gtest_brief=1 > $R/gpu_tests.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/gpu_tests.log ) &
MODELS=${MODELS:-"densenet121,convnext_tiny,efficientnet_v2_s,regnet_y_800mf"}
timeout 150 $PY bench/export_zoo.py --models "$MODELS" --no-check > $R/export.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/export.log
wait
timeout $((${BUDGET:-400} - SECONDS)) $PY bench/run_bench.py --kiln $K --models "$MODELS" --batches 64 --precisions fp16 \
  --modes reduce-overhead,kiln --timeout 150 --fresh --results-dir $R/results > $R/bench.log 2>&1
echo "rc=$? t=$SECONDS" >> $R/bench.log
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
