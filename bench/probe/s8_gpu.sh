#!/usr/bin/env bash
# Session 8's first GPU call: the whole gpu label (kiln_gpu_tests) on the last commit, then the Python tests with
# torch (bench/probe/python_gpu.sh). Results in $OUT/s8.tgz.
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
P=$OUT/s8; mkdir -p $P
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $P/gpu.txt
start=$(date +%s)
timeout 420 .bundle/bin/kiln_gpu_tests --gtest_brief=1 > $P/gpu_tests.log 2>&1; echo "rc=$? seconds=$(( $(date +%s) - start ))" >> $P/gpu_tests.log
sed -i 's/^tar xJf .bundle.txz; /true; /' bench/probe/python_gpu.sh
left=$(( 540 - ($(date +%s) - start) )); sed -i "s/timeout 500/timeout $left/" bench/probe/python_gpu.sh
OUT=$P bash bench/probe/python_gpu.sh
tar czf $OUT/s8.tgz -C $OUT s8
