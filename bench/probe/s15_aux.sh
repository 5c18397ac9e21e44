#!/usr/bin/env bash
# Session 15, second GPU call: auxiliary streams (issue 17 item 6). The whole gpu label (GpuEngine.AuxStreams* new),
# compute-sanitizer memcheck on the auxiliary-stream test, then GoogLeNet (Inception blocks: four branches each) and
# the YOLOv8-style detector built FP16 with --maxAuxStreams=0/2/4 at batch 1 and 8, timed with CUDA graphs alternated
# twice in this call, and each aux engine's outputs against the aux-0 engine's on the same input. Lands in $OUT/r.tgz.
source bench/probe/device_env.sh
R=$OUT/r
mkdir -p $R m
nvidia-smi -L > $R/gpu.txt
gpu_label_shards $R
zoo_export m $R googlenet yolov8_style
wait
gpu_label_alone $R
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 7 .bundle/bin/kiln_gpu_tests \
  --gtest_filter='GpuEngine.AuxStreams*' > $R/memcheck_aux.log 2>&1; echo "rc=$? t=$SECONDS" >> $R/memcheck_aux.log
med() { grep -h 'GPU Compute Time: min' $1 | grep -o 'median = [0-9.]* ms'; }
for mm in googlenet yolov8_style; do
  in=input; hw=224x224; [ $mm = yolov8_style ] && in=images && hw=640x640
  for b in 1 8; do
    $PY -c "import numpy as np; np.save('x_${mm}_$b.npy', np.random.default_rng(1).standard_normal(($b,3,${hw/x*/}, ${hw/*x/})).astype(np.float32))"
    for a in 0 2 4; do
      timeout 120 $K build --onnx=m/$mm.onnx --fp16 --shapes=$in:${b}x3x$hw --maxAuxStreams=$a --saveEngine=e_${mm}_${b}_$a.engine \
        --json=$R/build_${mm}_${b}_$a.json > $R/build_${mm}_${b}_$a.log 2>&1
      timeout 60 $K run --loadEngine=e_${mm}_${b}_$a.engine --loadInputs=$in:x_${mm}_$b.npy --exportOutput=o_${mm}_${b}_$a \
        > $R/run_${mm}_${b}_$a.log 2>&1
    done
    for round in 1 2; do
      for a in 0 2 4; do
        timeout 30 $K bench --loadEngine=e_${mm}_${b}_$a.engine --useCudaGraph --noDataTransfers --duration=1.5 \
          > $R/bench_${mm}_${b}_${a}_$round.log 2>&1
        echo "$mm b$b aux$a round$round $(med $R/bench_${mm}_${b}_${a}_$round.log)" >> $R/aux.log
      done
    done
    timeout 30 $K bench --loadEngine=e_${mm}_${b}_2.engine --noDataTransfers --duration=1 > $R/bench_nograph_${mm}_${b}_2.log 2>&1
    timeout 30 $K bench --loadEngine=e_${mm}_${b}_0.engine --noDataTransfers --duration=1 > $R/bench_nograph_${mm}_${b}_0.log 2>&1
    echo "$mm b$b no graph aux0 $(med $R/bench_nograph_${mm}_${b}_0.log) aux2 $(med $R/bench_nograph_${mm}_${b}_2.log)" >> $R/aux.log
  done
done
$PY - <<'PY' >> $R/aux.log 2>&1
import glob, numpy as np
for d in sorted(glob.glob("o_*_0")):
    base = d[:-2]
    ref = [np.load(f).astype(np.float64) for f in sorted(glob.glob(d + "/*.npy"))]
    for a in (2, 4):
        got = [np.load(f).astype(np.float64) for f in sorted(glob.glob(f"{base}_{a}/*.npy"))]
        if len(got) != len(ref) or not ref:
            print(base, a, "missing outputs"); continue
        diff = max(float(np.abs(g - r).max()) for g, r in zip(got, ref))
        print(f"{base} aux{a} vs aux0: max abs diff {diff:.3g} over {len(ref)} outputs")
PY
echo "t=$SECONDS" >> $R/aux.log
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
