#!/usr/bin/env bash
# Session 7's GPU checks: the gpu label's tests touched (quantized GELU epilogue, workspace limit, attention), BERT
# FP16/INT8/FP8 with the mask pass and the GELU epilogue, BERT's mask path with an attention_mask input, and the
# FFN1 GEMM under ncu. Results in $OUT/s7.tgz.
set -x
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
P=$OUT/s7; mkdir -p $P
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $P/gpu.txt
timeout 400 .bundle/bin/kiln_gpu_tests --gtest_filter='GpuQuantized.*:GpuEngine.*:GpuAttention.*:GpuNorm.*' > $P/gpu_tests.log 2>&1; echo "rc=$?" >> $P/gpu_tests.log
(mkdir -p m && cd m && timeout 200 /opt/torch/.venv/bin/python3 ../bench/probe/bert_mask_graph.py > $P/bert_mask_graph.log 2>&1)
sed -i '1,/^tar xJf/s/^tar xJf .*/true/' bench/int8_gpu_check.sh
KILN_INT8_MODELS=bert bash bench/int8_gpu_check.sh > $P/check.log 2>&1
cd w
timeout 150 ncu --clock-control none --section SpeedOfLight --section LaunchStats --kernel-name regex:device_kernel -c 3 ../.bundle/bin/kiln bench --loadEngine=bint8.engine --iterations=1 --warmUp=0 --duration=0 > $P/ncu_gemm_bint8.log 2>&1
timeout 150 ncu --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy --kernel-name regex:AttentionMma -c 1 ../.bundle/bin/kiln bench --loadEngine=bfp16.engine --iterations=1 --warmUp=0 --duration=0 > $P/ncu_attn_bfp16.log 2>&1
cd ..
tar czf $OUT/s7.tgz -C $OUT s7 r.tgz
