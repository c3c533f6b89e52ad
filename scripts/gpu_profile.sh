#!/usr/bin/env bash
# On the GPU machine: per-kernel GPU time (ncu) of decode and prefill steps
# on a 4-layer llama3-8b-shaped model, summed by kernel name. Usage:
#   scripts/gpu_profile.sh [TYPE...]   (default: f16 q4_k_m)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/rf-out}"; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BIN=.carry/bin
M=/tmp/rf-models; mkdir -p $M
prompt512=$(python3 -c "print(' '.join('w%d' % i for i in range(170)))")
for t in "${@:-f16 q4_k_m}"; do
  f=$M/l4-$t.gguf
  [ -f $f ] || $BIN/rocmforge mkmodel --preset llama3-8b-4l --type $t -o $f 2>&1 | tail -1
  for mode in decode prefill; do
    if [ $mode = decode ]; then args=(-p "hi" -n 4); else args=(-p "$prompt512" -n 1); fi
    ncu --clock-control none --metrics gpu__time_duration.sum --csv -c 400 \
      $BIN/rocmforge run -m $f --temp 0 --no-display-prompt "${args[@]}" > $OUT/ncu-$t-$mode.csv 2>$OUT/ncu-$t-$mode.err
    python3 scripts/ncu_summary.py "$OUT/ncu-$t-$mode.csv" "$t $mode"
  done
done
