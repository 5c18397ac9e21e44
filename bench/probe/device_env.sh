# Sourced by the GPU-machine probes (bench/probe/*.sh run through the device tool from the repository root): unpacks
# the carried bundle (scripts/gpu-bundle) and sets the library path (torch's cuDNN, cuFFT and CUDA 13 libraries
# beside the bundle's), PY (the machine's python with torch) and K (the bundle's kiln).
tar xJf .bundle.txz
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$NV/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib:$NV/cufft/lib:$NV/cu13/lib
PY=/opt/torch/.venv/bin/python3
K=.bundle/bin/kiln
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so  # the plugin tests of the gpu label
# Exports zoo models into $1 (logs $2/export_<model>.log), each in the background (`wait` for them): zoo_export DIR LOGS M...
zoo_export() {
  local out=$1 logs=$2
  shift 2
  for mm in "$@"; do
    ( timeout 200 $PY bench/export_zoo.py --models $mm --out $out --no-check > $logs/export_$mm.log 2>&1
      echo "rc=$?" >> $logs/export_$mm.log ) &
  done
}
# The whole gpu label into $1: two shards at once (in the background; `wait` for them), then, after the caller's
# wait, `gpu_label_alone $1` for the out-of-memory and stress tests, which need the card to themselves.
gpu_label_shards() {
  for i in 0 1; do
    ( GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i timeout ${2:-400} .bundle/bin/kiln_gpu_tests \
        --gtest_filter='-GpuOom*:GpuStress*' --gtest_brief=1 --gtest_output=xml:$1/shard$i.xml > $1/shard$i.log 2>&1
      echo "rc=$? t=$SECONDS" >> $1/shard$i.log ) &
  done
}
gpu_label_alone() {
  timeout 45 .bundle/bin/kiln_gpu_tests --gtest_filter='GpuOom*:GpuStress*' --gtest_brief=1 \
    --gtest_output=xml:$1/alone.xml > $1/alone.log 2>&1
  echo "rc=$? t=$SECONDS" >> $1/alone.log
}
