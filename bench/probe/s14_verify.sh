#!/usr/bin/env bash
# Session 14, first GPU call: HEAD checked on the card (nothing here is timed). The gpu label in two shards (the
# out-of-memory and stress tests alone after), the ONNX 1.23 node tests on the CUDA layers (issue 12's bar, last run in
# session 11, before sessions 12-13 rewrote many passes), and the new-op / control-flow models as CUDA engines against
# onnxruntime. Lands in $OUT/r.tgz.
source bench/probe/device_env.sh
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
B=.bundle/bin
R=$OUT/r
mkdir -p $R nt
nvidia-smi -L > $R/gpu.txt
tar xzf .bundle/node-tests.tgz -C nt
( timeout 540 $B/kiln-conformance --backend cuda -j 10 --data nt/node --scope tests/conformance/out_of_scope.txt \
    --expected-failures tests/conformance/expected_failures --json $R/conformance_cuda.json > $R/conformance_cuda.log 2>&1
  echo "rc=$? t=$SECONDS" >> $R/conformance_cuda.log ) &
( cd tests/models && timeout 500 $PY gpu_new_op_models.py --kiln ../../$B/kiln --out ../../newop \
    > $R/new_op_models.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/new_op_models.log; cp ../../newop/gpu_new_op_models.json $R/ ) &
for i in 0 1; do
  ( GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i timeout 480 $B/kiln_gpu_tests --gtest_filter='-GpuOom*:GpuStress*' \
      --gtest_brief=1 --gtest_output=xml:$R/shard$i.xml > $R/shard$i.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/shard$i.log ) &
done
wait
timeout 45 $B/kiln_gpu_tests --gtest_filter='GpuOom*:GpuStress*' --gtest_brief=1 --gtest_output=xml:$R/alone.xml \
  > $R/alone.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/alone.log
tar czf $OUT/r.tgz -C $OUT r
