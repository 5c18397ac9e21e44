#!/usr/bin/env bash
# Session 11: the widened zoo (issue 17) on the GPU machine: each new model exported (onnxruntime check at batch 2),
# then a kiln FP16 engine at the model's large batch built and timed (CUDA graph, no transfers); a step past its
# time limit is recorded as such. Everything lands in $OUT/r (zoo.log, per-model build/bench JSON).
tar xJf .bundle.txz
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$NV/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib:$NV/cufft/lib:$NV/cu13/lib
PY=/opt/torch/.venv/bin/python3
R=$OUT/r
mkdir -p $R
nvidia-smi -L > $R/gpu.txt
MODELS="mobilenet_v3_large convnext_tiny swin_t deit_small regnet_y_800mf densenet121 efficientnet_v2_s distilbert t5_encoder llama_decoder"
for m in $MODELS; do
  ( timeout 150 $PY bench/export_zoo.py --models $m > $R/export_$m.log 2>&1; echo "rc=$?" >> $R/export_$m.log ) &
done
wait
for m in $MODELS; do
  [ $SECONDS -gt 520 ] && { echo "$m: skipped (time)" >> $R/zoo.log; continue; }
  shapes=$($PY -c "import sys; sys.path.insert(0,'bench'); import zoo; s=zoo.SPECS['$m']; print(s.kiln_shapes(s.large_batch))")
  timeout 60 .bundle/bin/kiln build --onnx=bench/models/$m.onnx --shapes=$shapes --fp16 --saveEngine=e_$m.engine \
    --json=$R/build_$m.json > $R/build_$m.log 2>&1
  b=$?
  timeout 20 .bundle/bin/kiln bench --loadEngine=e_$m.engine --useCudaGraph --noDataTransfers --duration=2 \
    --json=$R/bench_$m.json > $R/bench_$m.log 2>&1
  echo "$m $shapes build_rc=$b bench_rc=$? $(grep -h -E 'Throughput|GPU Compute Time: min' $R/bench_$m.log | tr '\n' ' ')" >> $R/zoo.log
done
tar czf $OUT/r.tgz -C $OUT r
