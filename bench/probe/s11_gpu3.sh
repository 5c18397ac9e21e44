#!/usr/bin/env bash
# Session 11, third run: the GPU tests of control flow, fallback, Compress/BatchNorm training, norms and narrow casts
# after the nested-If fix; the control-flow node tests on the CUDA layers; the control-flow models as CUDA engines;
# an engine built with detailed profiling verbosity (NVTX ranges on) run with and without CUDA graphs.
tar xJf .bundle.txz
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$NV/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib:$NV/cufft/lib:$NV/cu13/lib
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
B=.bundle/bin
R=$OUT/r
mkdir -p $R nt
nvidia-smi -L > $R/gpu.txt
tar xzf .bundle/node-tests.tgz -C nt
( timeout 300 $B/kiln-conformance --backend cuda -j 12 --data nt/node --scope tests/conformance/out_of_scope.txt \
    --filter 'if|loop|scan|affine_grid|range|window|linear_attention|compress|batchnorm' \
    --json $R/conformance_cf.json > $R/conformance_cf.log 2>&1; echo "rc=$?" >> $R/conformance_cf.log ) &
( timeout 400 $B/kiln_gpu_tests --gtest_filter='GpuControlFlow*:GpuFallback*:GpuCompress*:GpuBatchNorm*:GpuNorm*:GpuCastNarrow*:OpTables*' \
    --gtest_brief=1 > $R/gtests.log 2>&1; echo "rc=$?" >> $R/gtests.log ) &
( cd tests/models && timeout 400 /opt/torch/.venv/bin/python3 gpu_new_op_models.py --kiln ../../$B/kiln --out ../../newop \
    > $R/new_op_models.log 2>&1; echo "rc=$?" >> $R/new_op_models.log; cp ../../newop/gpu_new_op_models.json $R/ ) &
M=nt/node/test_linear_attention_gated_delta_expanded/model.onnx
( timeout 120 $B/kiln build --onnx=$M --backend=cuda --profilingVerbosity=detailed --saveEngine=p.engine > $R/nvtx.log 2>&1
  echo "rc=$?" >> $R/nvtx.log
  timeout 60 $B/kiln --loadEngine=p.engine --iterations=20 >> $R/nvtx.log 2>&1; echo "rc=$?" >> $R/nvtx.log
  timeout 60 $B/kiln --loadEngine=p.engine --iterations=20 --useCudaGraph >> $R/nvtx.log 2>&1; echo "rc=$?" >> $R/nvtx.log ) &
wait
tar czf $OUT/r.tgz -C $OUT r
