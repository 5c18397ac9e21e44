#!/usr/bin/env bash
# Data-parallel scaling of kiln serve over every GPU of the machine (issue 15): ResNet-50 FP16 and BERT-base FP16
# (random weights, batch profile 1..32, BERT at sequence 128), `kiln bench --device=N` on each GPU alone at batch 32,
# then the server with instances on the first 1, 2, ..., N GPUs (4 instances per GPU, dynamic batching up to 32),
# driven by bench/serve_load.py with 8 load processes x 4 threads per GPU, batch-8 requests whose inputs and outputs
# are in system shared memory; every answer is checked against its input's reference. The GPU list comes from
# nvidia-smi, so it runs unchanged on any number of GPUs.
# Usage there: bash bench/serve_scaling.sh   (needs $OUT and an unpacked bundle in .bundle; results in $OUT/scaling)
set -x
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64:$PWD/.bundle/lib
B=$PWD/.bundle/bin; PY=/opt/torch/.venv/bin/python3; R=$OUT/scaling; mkdir -p $R ws
DUR=${SCALING_DURATION:-12}
nvidia-smi -L > $R/gpus.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $R/gpu.txt
NG=$(nvidia-smi -L | wc -l)
cd ws
$PY - <<'PY' > $R/export.log 2>&1
import torch, torchvision, transformers
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None).eval()
torch.onnx.export(m, torch.randn(1, 3, 224, 224), "r50.onnx", opset_version=17, input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, dynamo=False)
class Bert(torch.nn.Module):  # the last hidden state only (one output, like the load generator reads)
    def __init__(self):
        super().__init__()
        self.m = transformers.BertModel(transformers.BertConfig()).eval()
    def forward(self, input_ids):
        return self.m(input_ids=input_ids).last_hidden_state
torch.onnx.export(Bert().eval(), torch.zeros(1, 128, dtype=torch.int64), "bert.onnx", opset_version=17,
                  input_names=["input_ids"], output_names=["hidden"],
                  dynamic_axes={"input_ids": {0: "batch"}, "hidden": {0: "batch"}}, dynamo=False)
print("ok")
PY
mkdir -p repo/resnet50/1 repo/bert/1
timeout 240 $B/kiln build --onnx=r50.onnx --fp16 --minShapes=x:1x3x224x224 --optShapes=x:32x3x224x224 \
  --maxShapes=x:32x3x224x224 --saveEngine=repo/resnet50/1/model.engine > $R/build_resnet50.log 2>&1
timeout 240 $B/kiln build --onnx=bert.onnx --fp16 --minShapes=input_ids:1x128 --optShapes=input_ids:32x128 \
  --maxShapes=input_ids:32x128 --saveEngine=repo/bert/1/model.engine > $R/build_bert.log 2>&1
for g in $(seq 0 $((NG - 1))); do
  timeout 60 $B/kiln bench --loadEngine=repo/resnet50/1/model.engine --device=$g --shapes=x:32x3x224x224 --duration=3 \
    > $R/bench_resnet50_gpu$g.log 2>&1
  timeout 60 $B/kiln bench --loadEngine=repo/bert/1/model.engine --device=$g --shapes=input_ids:32x128 --duration=3 \
    > $R/bench_bert_gpu$g.log 2>&1
done
for n in $(seq 1 $NG); do
  gpus=$(seq -s, 0 $((n - 1)))
  for m in resnet50 bert; do
    cat > repo/$m/config.pbtxt <<CFG
max_batch_size: 32
dynamic_batching { preferred_batch_size: [ 32 ] max_queue_delay_microseconds: 3000 }
instance_group [ { count: 4 kind: KIND_GPU gpus: [ ${gpus//,/, } ] } ]
CFG
  done
  $B/kiln serve --model-repository=repo --http-port=8000 --grpc-port=8001 --metrics-port=8002 --http-thread-count=256 \
    --allow-client-shm=true > $R/serve_g$n.log 2>&1 &
  pid=$!
  for i in $(seq 120); do curl -sf localhost:8000/v2/health/ready && break; sleep 1; done
  timeout 120 $PY ../bench/serve_load.py --url 127.0.0.1:8000 --model resnet50 --input x:8x3x224x224:FP32 \
    --processes $((8 * n)) --threads 4 --duration $DUR --shared-memory=system --json $R/load_resnet50_g$n.json \
    > $R/load_resnet50_g$n.log 2>&1
  timeout 120 $PY ../bench/serve_load.py --url 127.0.0.1:8000 --model bert --input input_ids:8x128:INT64 \
    --processes $((8 * n)) --threads 4 --duration $DUR --shared-memory=system --json $R/load_bert_g$n.json \
    > $R/load_bert_g$n.log 2>&1
  curl -s localhost:8002/metrics > $R/metrics_g$n.txt
  kill -TERM $pid; wait $pid; echo "serve exit $?" >> $R/serve_g$n.log
done
cd ..
$PY - "$R" <<'PY' | tee $R/summary.md
import json, sys, glob, re, os
r = sys.argv[1]
print("| model | GPUs | inferences/s | p50 ms | p99 ms | scaling | errors | mismatches |")
print("|---|---|---|---|---|---|---|---|")
for m in ("resnet50", "bert"):
    base = None
    for n in range(1, 65):
        f = os.path.join(r, f"load_{m}_g{n}.json")
        if not os.path.exists(f):
            break
        j = json.load(open(f))
        base = base or j["inferences_per_s"]
        print(f"| {m} | {n} | {j['inferences_per_s']:.0f} | {j['p50_ms']:.2f} | {j['p99_ms']:.2f} | "
              f"{j['inferences_per_s'] / base:.2f}x | {j['errors']} | {j['mismatches']} |")
for f in sorted(glob.glob(os.path.join(r, "bench_*_gpu*.log"))):
    t = re.search(r"Throughput: ([0-9.]+) qps", open(f).read())
    print(f"{os.path.basename(f)}: {t.group(1) if t else '?'} qps at batch 32")
PY
tar czf $OUT/scaling.tgz -C $OUT scaling
