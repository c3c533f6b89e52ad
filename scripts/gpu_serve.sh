#!/usr/bin/env bash
# On the GPU machine: the serving benchmarks of issues 5 and 6 on a synthetic
# llama3-8b f16 model — the engine's closed-loop benchmark, then
# `rocmforge serve` driven over HTTP by loadgen.py (carried in .carry/tools).
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BIN=.carry/bin
t=${RF_TYPE:-f16}
f=/tmp/rf-models/llama3-8b-$t.gguf; mkdir -p /tmp/rf-models
[ -f $f ] || $BIN/rocmforge mkmodel --preset llama3-8b --type $t -o $f 2>&1 | tail -1
echo "== engine: bench --requests 256 --concurrency 64 --input-len 512 --output-len 128 ($t)"
$BIN/rocmforge bench -m $f --requests 256 --concurrency 64 --input-len 512 --output-len 128 \
  --max-batch-tokens ${RF_BATCH_TOKENS:-2048} 2>&1 | grep -v "^  \|completed"
echo "== server: loadgen.py URL 256 64 512 128 auto 128000 ($t)"
$BIN/rocmforge serve -m $f --port 8080 --max-num-seqs 64 --max-num-batched-tokens ${RF_BATCH_TOKENS:-2048} \
  > /tmp/serve.log 2>&1 &
pid=$!
for i in $(seq 1 120); do
  curl -sf http://127.0.0.1:8080/health >/dev/null 2>&1 && break
  python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:8080/health')" >/dev/null 2>&1 && break
  sleep 1
done
python3 .carry/tools/loadgen.py http://127.0.0.1:8080 256 64 512 128 auto 128000
kill -TERM $pid; wait $pid; echo "server exit: $?"
tail -3 /tmp/serve.log
