#!/usr/bin/env bash
# Issue 15 on a two-GPU machine: the multi-device gpu tests, then ResNet-50 FP16 served on GPU 0 alone and on GPUs 0
# and 1 (4 instances per GPU), inputs and outputs in system shared memory, batch-8 requests.
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
mkdir -p $OUT/serve
nvidia-smi -L > $OUT/serve/gpus.txt
timeout 120 .bundle/bin/kiln_gpu_tests --gtest_filter='GpuMultiDevice.*' > $OUT/serve/gpu_multi_device.log 2>&1
echo "rc=$?" >> $OUT/serve/gpu_multi_device.log
SERVE_RUNS="g1_i4_b8_shm 4 8 8 4 0 --shared-memory=system
g2_i4_b8_shm 4 8 8 4 0,1 --shared-memory=system
g2_i4_b8_shm_16x4 4 8 16 4 0,1 --shared-memory=system
g1_i4_b8_shm_16x4 4 8 16 4 0 --shared-memory=system" bash bench/serve_gpu.sh > $OUT/serve/serve_gpu.log 2>&1
