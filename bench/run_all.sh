#!/usr/bin/env bash
# Exports the zoo and benchmarks it with the defaults: every model, fp32 and fp16, batch 1 and the large batch,
# torch eager / torch.compile (max-autotune, reduce-overhead) / kiln.
# Usage: bench/run_all.sh KILN_BINARY [more run_bench.py flags]
#   e.g. bench/run_all.sh .bundle/bin/kiln --results-dir "$OUT/results"
set -euo pipefail
KILN_BIN=${1:?usage: bench/run_all.sh KILN_BINARY [run_bench.py flags]}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-$([ -x /opt/torch/.venv/bin/python ] && echo /opt/torch/.venv/bin/python || echo python3)}
# kiln loads cuDNN from torch's wheel; a kiln bundle (scripts/gpu-bundle) keeps its other libraries in ../lib.
CUDNN=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
BUNDLE_LIB=$(cd "$(dirname "$KILN_BIN")/.." && pwd)/lib
export LD_LIBRARY_PATH="$CUDNN:$BUNDLE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$PY" "$HERE/export_zoo.py"
"$PY" "$HERE/run_bench.py" --kiln "$KILN_BIN" "$@"
