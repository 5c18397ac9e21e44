#!/usr/bin/env bash
# Session 11, second run: the whole gpu test binary in two shards at once (the out-of-memory and stress tests after, alone), the
# ONNX 1.23 node tests on the CUDA layers, and the new-op and control-flow models as CUDA engines (with CUDA graphs),
# after control flow, the integer ops, Det and DFT/STFT/MelWeightMatrix moved onto the GPU.
tar xJf .bundle.txz
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$NV/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib:$NV/cufft/lib:$NV/cu13/lib
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
B=.bundle/bin
R=$OUT/r
mkdir -p $R nt
nvidia-smi -L > $R/gpu.txt
tar xzf .bundle/node-tests.tgz -C nt
( timeout 450 $B/kiln-conformance --backend cuda -j 12 --data nt/node --scope tests/conformance/out_of_scope.txt \
    --expected-failures tests/conformance/expected_failures --json $R/conformance_cuda.json > $R/conformance_cuda.log 2>&1
  echo "rc=$?" >> $R/conformance_cuda.log ) &
C=$!
( # NVTX ranges per layer (engines built with --profilingVerbosity=detailed), where Nsight Systems is installed
  NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  echo "nsys: $NSYS" > $R/nvtx.log
  if [ -n "$NSYS" ]; then
    M=nt/node/test_linear_attention_gated_delta_expanded/model.onnx
    timeout 120 $B/kiln build --onnx=$M --backend=cuda --profilingVerbosity=detailed --saveEngine=p.engine >> $R/nvtx.log 2>&1
    timeout 120 $NSYS profile -t cuda,nvtx -o prof --force-overwrite true $B/kiln --loadEngine=p.engine --iterations=5 >> $R/nvtx.log 2>&1
    timeout 120 $NSYS stats --report nvtx_sum prof.nsys-rep 2>&1 | head -40 >> $R/nvtx.log
  fi ) &
( cd tests/models && timeout 400 /opt/torch/.venv/bin/python3 gpu_new_op_models.py --kiln ../../$B/kiln --out ../../newop \
    > $R/new_op_models.log 2>&1; echo "rc=$?" >> $R/new_op_models.log; cp ../../newop/gpu_new_op_models.json $R/ ) &
S=""
for i in 0 1; do
  ( GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i timeout 520 $B/kiln_gpu_tests --gtest_filter='-GpuOom*:GpuStress*' \
      --gtest_brief=1 --gtest_output=xml:$R/shard$i.xml > $R/shard$i.log 2>&1; echo "rc=$?" >> $R/shard$i.log ) &
  S="$S $!"
done
wait
timeout 200 $B/kiln_gpu_tests --gtest_filter='GpuOom*:GpuStress*' --gtest_brief=1 --gtest_output=xml:$R/alone.xml \
  > $R/alone.log 2>&1; echo "rc=$?" >> $R/alone.log
wait
tar czf $OUT/r.tgz -C $OUT r
