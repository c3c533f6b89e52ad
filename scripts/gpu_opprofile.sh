#!/usr/bin/env bash
# On the GPU machine: the op profile (ROCMFORGE_PROFILE=1, graphs off) of
# bench runs on a preset's model (RF_PRESET, default llama3-8b); RF_BENCH_ARGS
# adds bench options (e.g. "--device cuda:0,1 --tp 2": one table per rank).
# The whole profile goes to $OUT/opprofile-TYPE-PARALLEL.txt.
# Usage: scripts/gpu_opprofile.sh TYPE PARALLEL [N_GEN]
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t=$1; P=$2; n=${3:-32}
OUT="${OUT:-/tmp/rf-out}"; mkdir -p "$OUT"
preset=${RF_PRESET:-llama3-8b}
f=/tmp/rf-models/$preset-$t.gguf; mkdir -p /tmp/rf-models
[ -f $f ] || .carry/bin/rocmforge mkmodel --preset $preset --type $t -o $f 2>&1 | tail -1
echo "== $t parallel $P ${RF_BENCH_ARGS:-} (graphs on)"
.carry/bin/rocmforge bench -m $f -p 512 -n $n -r 1 --parallel $P ${RF_BENCH_ARGS:-} 2>&1 | grep "run 1"
echo "== $t parallel $P ${RF_BENCH_ARGS:-} (profiled)"
log="$OUT/opprofile-$t-$P${RF_TAG:-}.txt"
ROCMFORGE_PROFILE=1 .carry/bin/rocmforge bench -m $f -p 512 -n $n -r 1 --parallel $P ${RF_BENCH_ARGS:-} > "$log" 2>&1
grep -A${RF_PROFILE_LINES:-14} "run 1\|GPU op profile" "$log" | head -${RF_PROFILE_LINES:-20}
