#!/usr/bin/env bash
# Session 11: the bench harness's new floors and per-model work (issue 17 item 5), on resnet50 and bert_base at their
# large batch in FP16: torch eager, reduce-overhead and kiln, then the table with % FP16 peak and % BW floor.
tar xJf .bundle.txz
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$NV/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib:$NV/cufft/lib:$NV/cu13/lib
PY=/opt/torch/.venv/bin/python3
R=$OUT/r
mkdir -p $R
nvidia-smi -L > $R/gpu.txt
timeout 150 $PY bench/export_zoo.py --models resnet50,bert_base > $R/export.log 2>&1; echo "rc=$?" >> $R/export.log
timeout 220 $PY bench/run_bench.py --kiln .bundle/bin/kiln --models resnet50 --precisions fp16 \
  --modes eager,reduce-overhead,kiln --batches 64 --results-dir $R/results --fresh > $R/bench.log 2>&1
echo "rc=$?" >> $R/bench.log
timeout 200 $PY bench/run_bench.py --kiln .bundle/bin/kiln --models bert_base --precisions fp16 \
  --modes eager,reduce-overhead,kiln --batches 32 --results-dir $R/results >> $R/bench.log 2>&1
echo "rc=$?" >> $R/bench.log
tar czf $OUT/r.tgz -C $OUT r
