#!/usr/bin/env bash
# Session 10 on one GPU: the whole gpu test binary (new CUDA layers of issue 12, CPU fallback), the ONNX 1.23 node tests
# on the CUDA layers (issue 12's scope list), and CPU fallback through the CLI (a Det model, a Scan model) against the
# CPU backend.
tar xJf .bundle.txz
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
export KILN_EXAMPLE_PLUGINS_LIB=$PWD/.bundle/lib/libkiln_example_plugins.so
PY=/opt/torch/.venv/bin/python3
B=.bundle/bin
R=$OUT/r
mkdir -p $R nt
nvidia-smi -L > $R/gpu.txt
tar xzf .bundle/node-tests.tgz -C nt
( timeout 480 $B/kiln-conformance --backend cuda -j 16 --data nt/node --scope tests/conformance/out_of_scope.txt \
    --expected-failures tests/conformance/expected_failures --json $R/conformance_cuda.json > $R/conformance_cuda.log 2>&1
  echo "rc=$?" >> $R/conformance_cuda.log ) &
timeout 420 $B/kiln_gpu_tests --gtest_brief=1 --gtest_output=xml:$R/gpu_tests.xml > $R/gpu_tests.log 2>&1
echo "rc=$?" >> $R/gpu_tests.log
wait
# CPU fallback through the CLI: models written here with the test builders.
mkdir -p fb && (cd tests/models && $PY - <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, TensorProto
sys.path.insert(0, '.')
from builders import control_flow as c
m, f = c.scan_rnn(seed=1, batch=4, seq=7, d=16)
onnx.save(m, '../../fb/scan_rnn.onnx')
for k, v in f.items(): np.save(f'../../fb/scan_{k}.npy', v)
g = helper.make_graph([helper.make_node('Relu', ['x'], ['r']), helper.make_node('Det', ['r'], ['d']),
                       helper.make_node('Sigmoid', ['d'], ['y'])], 'det',
                      [helper.make_tensor_value_info('x', TensorProto.FLOAT, [3, 8, 8])],
                      [helper.make_tensor_value_info('y', TensorProto.FLOAT, [3])])
mm = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)]); mm.ir_version = 8
onnx.save(mm, '../../fb/det.onnx')
np.save('../../fb/det_x.npy', np.random.default_rng(0).standard_normal((3, 8, 8)).astype(np.float32))
PYEOF
) > $R/fallback.log 2>&1
for m in det scan_rnn; do
  if [ $m = det ]; then IN="x:fb/det_x.npy"; else IN="s0:fb/scan_s0.npy,x:fb/scan_x.npy,r:fb/scan_r.npy"; fi
  echo "== $m: reference run (cpu)" >> $R/fallback.log
  timeout 120 $B/kiln run --onnx=fb/$m.onnx --loadInputs=$IN --exportOutput=fb/out_${m}_cpu >> $R/fallback.log 2>&1
  echo "rc=$?" >> $R/fallback.log
  echo "== $m: cuda engine (CPU fallback)" >> $R/fallback.log
  timeout 120 $B/kiln build --onnx=fb/$m.onnx --backend=cuda --saveEngine=fb/$m.engine --json=$R/${m}_build.json \
    >> $R/fallback.log 2>&1; echo "rc=$?" >> $R/fallback.log
  for g in "" "--useCudaGraph"; do
    tag=cuda; [ -n "$g" ] && tag=graph
    echo "== $m: run the cuda engine $g" >> $R/fallback.log
    timeout 120 $B/kiln run --loadEngine=fb/$m.engine $g --loadInputs=$IN --exportOutput=fb/out_${m}_$tag \
      >> $R/fallback.log 2>&1; echo "rc=$?" >> $R/fallback.log
  done
  echo "== $m: cuda --noFallback" >> $R/fallback.log
  timeout 120 $B/kiln build --onnx=fb/$m.onnx --backend=cuda --noFallback >> $R/fallback.log 2>&1; echo "rc=$?" >> $R/fallback.log
done
$PY - >> $R/fallback.log 2>&1 <<'PYEOF'
import numpy as np, glob, os
for m in ['det', 'scan_rnn']:
    for f in sorted(glob.glob(f'fb/out_{m}_cpu/*.npy')):
        a = np.load(f)
        for v in ['cuda', 'graph']:
            g = f.replace('_cpu/', f'_{v}/')
            if os.path.exists(g):
                b = np.load(g); print(m, v, os.path.basename(f), a.shape, 'max abs diff', float(np.abs(a - b).max()))
            else: print(m, v, os.path.basename(f), 'MISSING')
PYEOF
tar czf $OUT/r.tgz -C $OUT r
