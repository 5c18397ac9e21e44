#!/usr/bin/env bash
# Session 8's second GPU call: kiln serve's throughput (bench/serve_gpu.sh), then the Python tests with torch
# (bench/probe/python_gpu.sh, after the review fixes). Results in $OUT/s8b.tgz.
tar xJf .bundle.txz
P=$OUT/s8b; mkdir -p $P
timeout 420 bash bench/serve_gpu.sh > $P/serve_script.log 2>&1
sed -i 's/^tar xJf .bundle.txz; /true; /; s/timeout 500/timeout 150/' bench/probe/python_gpu.sh
OUT=$P bash bench/probe/python_gpu.sh
mv $OUT/serve $P/ 2>/dev/null
tar czf $OUT/s8b.tgz -C $OUT s8b
