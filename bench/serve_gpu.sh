#!/usr/bin/env bash
# kiln serve on a GPU machine (issue 14): ResNet-50 FP16 (random weights, dynamic batch 1..32) served with dynamic
# batching against `kiln bench` on the same engine at batch 32, under bench/serve_load.py (HTTP, binary tensors).
# Also ResNet-50 on two instances vs one, and the engine's own throughput with and without data transfers; the *_shm
# runs put inputs and outputs in system shared memory (serve_load.py --shared-memory system), so no tensor travels in
# the HTTP bodies.
# Usage there: bash bench/serve_gpu.sh   (needs $OUT and an unpacked bundle in .bundle; results in $OUT/serve)
set -x
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
B=$PWD/.bundle/bin; PY=/opt/torch/.venv/bin/python3; R=$OUT/serve; mkdir -p $R ws
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt
cd ws
$PY - <<'PY' > $R/export.log 2>&1
import torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None).eval()
torch.onnx.export(m, torch.randn(1, 3, 224, 224), "r50.onnx", opset_version=17, input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, dynamo=False)
print("ok")
PY
mkdir -p repo/resnet50/1
timeout 300 $B/kiln build --onnx=r50.onnx --fp16 --minShapes=x:1x3x224x224 --optShapes=x:32x3x224x224 \
  --maxShapes=x:32x3x224x224 --saveEngine=repo/resnet50/1/model.engine > $R/build.log 2>&1
for extra in "" "--noDataTransfers" "--useCudaGraph --noDataTransfers"; do
  timeout 60 $B/kiln bench --loadEngine=repo/resnet50/1/model.engine --shapes=x:32x3x224x224 --duration=5 $extra \
    > "$R/bench_b32${extra// /_}.log" 2>&1
done
timeout 60 $B/kiln bench --loadEngine=repo/resnet50/1/model.engine --shapes=x:32x3x224x224 --duration=5 --infStreams=2 \
  > $R/bench_b32_2streams.log 2>&1
serve_run() {  # $1 tag, $2 instances per GPU, $3 request batch, $4 processes, $5 threads, $6 GPUs (0 or 0,1), $7 more flags
  cat > repo/resnet50/config.pbtxt <<CFG
max_batch_size: 32
dynamic_batching { preferred_batch_size: [ 32 ] max_queue_delay_microseconds: 3000 }
instance_group [ { count: $2 kind: KIND_GPU gpus: [ ${6//,/, } ] } ]
CFG
  $B/kiln serve --model-repository=repo --http-port=8000 --grpc-port=8001 --metrics-port=8002 --http-thread-count=128 \
    --allow-client-shm=true > $R/serve_$1.log 2>&1 &
  local pid=$!
  for i in $(seq 60); do curl -sf localhost:8000/v2/health/ready && break; sleep 1; done
  timeout 120 $PY ../bench/serve_load.py --url 127.0.0.1:8000 --model resnet50 --input x:$3x3x224x224:FP32 \
    --processes $4 --threads $5 --duration 20 $7 --json $R/load_$1.json > $R/load_$1.log 2>&1
  curl -s localhost:8002/metrics > $R/metrics_$1.txt
  kill -TERM $pid; wait $pid; echo "serve exit $?" >> $R/serve_$1.log
}
# One run per line: tag, instances per GPU, request batch, processes, threads, GPUs, more serve_load.py flags
# (SERVE_RUNS overrides).
RUNS=${SERVE_RUNS:-"i2_b8 2 8 8 4 0
i4_b8 4 8 8 4 0
i2_b1 2 1 12 8 0
i2_b8_shm 2 8 8 4 0 --shared-memory=system
i4_b8_shm 4 8 8 4 0 --shared-memory=system
i4_b32_shm 4 32 4 2 0 --shared-memory=system"}
while read -r tag n b p t gpus extra; do
  [ -n "$tag" ] && serve_run "$tag" "$n" "$b" "$p" "$t" "$gpus" "$extra"
done <<< "$RUNS"
cd ..
tar czf $OUT/serve.tgz -C $OUT serve
