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
    python3 - "$OUT/ncu-$t-$mode.csv" "$t $mode" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; rows = rows[1:]
ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows:
    v = float(r[vi].replace(",", "")); u = r[ui]
    v = v / 1000 if u == "nsecond" else (v if u == "usecond" else v * 1000)
    name = r[ki].split("(")[0][:70]
    tot[name] += v; cnt[name] += 1
allt = sum(tot.values())
print(f"== {sys.argv[2]}: {len(rows)} kernels, {allt:.0f} us total")
for n, v in sorted(tot.items(), key=lambda x: -x[1])[:12]:
    print(f"{v:10.0f} us {cnt[n]:5d}x  {n}")
PY
  done
done
