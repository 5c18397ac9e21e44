#!/usr/bin/env bash
# For session 15's first GPU call (carry the bundle from scripts/gpu-bundle as .bundle.txz): the gpu label at HEAD
# (b21bb37 and a2ee55e changed tactic timing across dynamic profiles and Concat's "default" tactic without a GPU run),
# then bench/dynamic_shapes.py on the zoo's text models and ResNet-50 (dynamic / static per shape, CUDA graphs, FP16)
# and the dynamic ResNet-50 build's time. Lands in $OUT/r.tgz.
source bench/probe/device_env.sh
R=$OUT/r
mkdir -p $R
nvidia-smi -L > $R/gpu.txt
gpu_label_shards $R
MODELS=${MODELS:-"resnet50,bert_base,distilbert,gpt2_small,llama_decoder"}
timeout 300 $PY bench/export_zoo.py --models "$MODELS" --no-check > $R/export.log 2>&1
wait
gpu_label_alone $R
timeout $((${BUDGET:-560} - SECONDS)) $PY bench/dynamic_shapes.py --kiln $K --models "$MODELS" --out $R/dynamic_shapes.json \
  > $R/dynamic_shapes.log 2>&1
echo "rc=$? t=$SECONDS" >> $R/dynamic_shapes.log
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
