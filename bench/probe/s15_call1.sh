#!/usr/bin/env bash
# Session 15's first GPU call: s15_first.sh (the gpu label at HEAD and bench/dynamic_shapes.py; into $OUT/r.tgz), then
# bench/int8_gpu_check.sh on ResNet-50 only (INT8 vs FP16 at batch 64 with profiles: where issue 13's ResNet bar
# stands after session 14's FP16 changes), into $OUT/i8/r.tgz, within the call's time.
set -x
BUDGET=${BUDGET:-420} bash bench/probe/s15_first.sh
mkdir -p $OUT/i8
sed -i 's/^tar xJf .bundle.txz/true/' bench/int8_gpu_check.sh   # unpacked by s15_first.sh already
OUT=$OUT/i8 KILN_INT8_MODELS=resnet timeout $((570 - SECONDS)) bash bench/int8_gpu_check.sh > $OUT/i8/script.log 2>&1
echo "int8 rc=$? t=$SECONDS" >> $OUT/i8/script.log
