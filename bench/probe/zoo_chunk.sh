#!/usr/bin/env bash
# One chunk of the full zoo benchmark on the GPU machine, sized for the device tool's 10-minute calls: exports the
# named models (if missing), then runs bench/run_bench.py on them (all modes unless MODES is set; FP16 unless
# PRECISIONS is set; batch 1 and each model's large batch), merging into $OUT/r/results (carry the previous
# results.json in as bench/results/<card>/results.json to accumulate). Usage:
#   KILN_COMMIT=$(git rev-parse --short HEAD) bash bench/probe/zoo_chunk.sh convnext_tiny swin_t
source bench/probe/device_env.sh
R=$OUT/r
mkdir -p $R/results
nvidia-smi -L > $R/gpu.txt
MODELS=$(echo "$@" | tr ' ' ',')
cp -r bench/results/* $R/results/ 2>/dev/null
timeout 200 $PY bench/export_zoo.py --models "$MODELS" > $R/export.log 2>&1; echo "rc=$?" >> $R/export.log
timeout $((560 - SECONDS)) $PY bench/run_bench.py --kiln $K --models "$MODELS" \
  --precisions "${PRECISIONS:-fp16}" ${MODES:+--modes "$MODES"} --timeout 240 --results-dir $R/results > $R/bench.log 2>&1
echo "rc=$?" >> $R/bench.log
card=$($PY -c "import sys; sys.path.insert(0, 'bench'); import report, torch; print(report.slug(torch.cuda.get_device_name()))")
tar czf $OUT/r.tgz -C $R bench.log export.log gpu.txt results/$card/results.json results/$card/results.md
