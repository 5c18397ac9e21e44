#!/usr/bin/env bash
# The attention writing its quantized output: GpuAttention/GpuQuantized/GpuNorm tests, then BERT FP16/INT8/FP8
# (bench/int8_gpu_check.sh). Results in $OUT/aq.tgz.
set -x
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
P=$OUT/aq; mkdir -p $P
nvidia-smi --query-gpu=name,driver_version --format=csv > $P/gpu.txt
timeout 300 .bundle/bin/kiln_gpu_tests --gtest_filter='GpuAttention.*:GpuQuantized.*:GpuNorm.*' > $P/gpu_tests.log 2>&1; echo "rc=$?" >> $P/gpu_tests.log
sed -i '1,/^tar xJf/s/^tar xJf .*/true/' bench/int8_gpu_check.sh
KILN_INT8_MODELS=bert bash bench/int8_gpu_check.sh > $P/check.log 2>&1
tar czf $OUT/aq.tgz -C $OUT aq r.tgz
