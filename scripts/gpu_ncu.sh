#!/usr/bin/env bash
# On the GPU machine: Nsight Compute details (speed of light, occupancy,
# warp stalls) of the first N launches of kernels matching REGEX during a
# bench run on a 4-layer llama3-8b-shaped model (decode steps included).
# Usage: scripts/gpu_ncu.sh TYPE PARALLEL REGEX [N]
# RF_NCU_PRESET: another preset, dummy weights (e.g. llama3-8b: 32 layers,
# so that a 64-sequence step's K/V does not fit in L2); RF_NCU_SKIP: launches
# of the kernel to skip first (past the prefill and the first decode steps);
# RF_NCU_LONGEST=N instead: a first pass times the first N matching launches
# and the details are of the first one within 90% of the longest. The
# details include the warps' stall reasons (cycles per issued instruction).
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t=$1; P=$2; re=$3; n=${4:-4}
if [ -n "${RF_NCU_PRESET:-}" ]; then
  model=(--load-format dummy -m "$RF_NCU_PRESET:$t")
else
  M=/tmp/rf-models; mkdir -p $M; f=$M/l4-$t.gguf
  [ -f $f ] || .carry/bin/rocmforge mkmodel --preset llama3-8b-4l --type $t -o $f 2>&1 | tail -1
  model=(-m "$f")
fi
bench=(.carry/bin/rocmforge bench "${model[@]}" -p 512 -n 8 -r 1 --parallel $P)
skip=${RF_NCU_SKIP:-0}
if [ -n "${RF_NCU_LONGEST:-}" ]; then
  # The launch to look at: the first of the matching ones (up to
  # RF_NCU_LONGEST of them) that takes at least 90% of the longest one's
  # time (a full-context decode step, not the warm-up's or a graph's
  # capture run).
  OUT="${OUT:-/tmp/rf-out}"; mkdir -p "$OUT"
  ncu --clock-control none --print-units base --csv --metrics gpu__time_duration.sum -k "regex:$re" \
    -c "$RF_NCU_LONGEST" "${bench[@]}" > "$OUT/ncu-durations.csv" 2>/dev/null
  skip=$(python3 - "$OUT/ncu-durations.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr, rows = rows[0], rows[1:]
v = hdr.index("Metric Value")
d = [float(r[v].replace(",", "")) for r in rows]
print(next(i for i, x in enumerate(d) if x >= 0.9 * max(d)) if d else 0)
PY
)
  echo "launch $skip of the matching ones (durations in $OUT/ncu-durations.csv)"
fi
ncu --clock-control none -k "regex:$re" -s "$skip" -c "$n" --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats \
  --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
  "${bench[@]}" 2>/dev/null |
  grep -E "^  [a-z_]+.*\(|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Stall|stalled|Executed Instructions|Issue Slots|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Grid Size|Shared Memory Configuration Size|Dynamic Shared" | sed 's/  \+/ /g' | cut -c1-160
