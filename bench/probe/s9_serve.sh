#!/usr/bin/env bash
# Session 9, after merging multi-GPU placement and the shared-memory extension: the whole gpu label, then kiln serve
# (ResNet-50 FP16) with the threaded gather, more instances, and inputs in system shared memory.
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
mkdir -p $OUT/serve
start=$(date +%s)
timeout 230 .bundle/bin/kiln_gpu_tests --gtest_brief=1 > $OUT/serve/gpu_tests.log 2>&1
echo "rc=$? seconds=$(( $(date +%s) - start ))" >> $OUT/serve/gpu_tests.log
SERVE_RUNS="i2_b8 2 8 8 4
i4_b8 4 8 8 4
i2_b8_shm 2 8 8 4 --shared-memory=system
i4_b8_shm 4 8 8 4 --shared-memory=system
i4_b32_shm 4 32 4 2 --shared-memory=system" bash bench/serve_gpu.sh > $OUT/serve/serve_gpu.log 2>&1
