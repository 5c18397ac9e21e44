#!/usr/bin/env bash
# Counters of BERT-base's attention and FFN1 (GELU) kernels, FP16 and INT8 engines, plus PyTorch's attention
# kernels at the same shape. Usage on the GPU machine (bundle carried): bash bench/probe/ncu_bert.sh ; results in
# $OUT/probe.tgz
set -x
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
P=$OUT/p; mkdir -p $P
/opt/torch/.venv/bin/python3 bench/probe/attn_torch_ref.py > $P/torch_attention.log 2>&1
sed -i '1,/^tar xJf/s/^tar xJf .*/true/' bench/int8_gpu_check.sh
KILN_INT8_MODELS=bert bash bench/int8_gpu_check.sh > $P/check.log 2>&1
B=$PWD/.bundle/bin
NCU="ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
cd w
for e in bfp16 bint8 bfp8; do
  timeout 150 $NCU --kernel-name regex:AttentionMma -c 1 $B/kiln bench --loadEngine=$e.engine --iterations=1 --warmUp=0 --duration=0 > $P/ncu_attn_$e.log 2>&1
done
timeout 200 $NCU --kernel-name regex:device_kernel -c 4 $B/kiln bench --loadEngine=bint8.engine --iterations=1 --warmUp=0 --duration=0 > $P/ncu_gemm_bint8.log 2>&1
cd ..
tar czf $OUT/probe.tgz -C $OUT p r.tgz
