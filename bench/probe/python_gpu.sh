#!/usr/bin/env bash
# The Python package on the GPU machine: the bundle's libraries, the _kiln module built for its Python 3.12 (carried
# in .pybundle.txz: cmake -S python against an installed kiln), and pytest (wheels in .whl/ when the venv lacks it).
# Runs tests/python with torch. Results in $OUT/py.log.
tar xJf .bundle.txz; tar xJf .pybundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
PY=/opt/torch/.venv/bin/python3
mkdir -p gpu_py/kiln && cp python/kiln/*.py python/kiln/py.typed gpu_py/kiln/ && cp .pybundle/kiln/_kiln*.so .pybundle/kiln/_kiln.pyi gpu_py/kiln/
$PY -c "import pytest" 2>/dev/null || { mkdir -p pydeps && $PY -m pip install -q --no-index --target pydeps .whl/*.whl; }
export PYTHONPATH=$PWD/gpu_py:$PWD/pydeps
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/py.log
timeout 500 $PY -m pytest -q -rs tests/python --kiln $PWD/.bundle/bin/kiln >> $OUT/py.log 2>&1; echo "rc=$?" >> $OUT/py.log
