#!/usr/bin/env bash
# Session 15, fourth GPU call: cuBLASLt algorithms rebuilt from their configuration (one tactic name per
# configuration; call3's GpuEngine.TimingCacheRebuildPicksTheSameTacticsWithoutTiming failed when the heuristic gave
# other bytes for the same algorithm). The whole gpu label, then GEMM-bound engines built by the kiln before the change
# (bundle bin/kiln_before, d79eeac) and after, alternated twice in this call: BERT-base FP16 b32x128 and GPT-2 FP16
# b16x128, CUDA graphs. Lands in $OUT/r.tgz.
source bench/probe/device_env.sh
R=$OUT/r
mkdir -p $R m
nvidia-smi -L > $R/gpu.txt
gpu_label_shards $R
zoo_export m $R bert_base gpt2_small
wait
gpu_label_alone $R
med() { grep -h 'GPU Compute Time: min' $1 | grep -o 'median = [0-9.]* ms'; }
for mm in bert_base gpt2_small; do
  s=input_ids:32x128; [ $mm = gpt2_small ] && s=input_ids:16x128
  for k in kiln_before kiln; do
    timeout 120 .bundle/bin/$k build --onnx=m/$mm.onnx --fp16 --shapes=$s --saveEngine=${mm}_$k.engine > $R/build_${mm}_$k.log 2>&1
  done
  for round in 1 2; do
    for k in kiln_before kiln; do
      timeout 30 $K bench --loadEngine=${mm}_$k.engine --useCudaGraph --noDataTransfers --duration=1.5 > $R/bench_${mm}_${k}_$round.log 2>&1
      echo "$mm $k round$round $(med $R/bench_${mm}_${k}_$round.log)" >> $R/ab.log
    done
  done
done
echo "t=$SECONDS" >> $R/ab.log
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
