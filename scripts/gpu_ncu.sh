#!/usr/bin/env bash
# On the GPU machine: Nsight Compute details (speed of light, occupancy,
# warp stalls) of the first N launches of kernels matching REGEX during a
# bench run on a 4-layer llama3-8b-shaped model (decode steps included).
# Usage: scripts/gpu_ncu.sh TYPE PARALLEL REGEX [N]
# RF_NCU_PRESET: another preset, dummy weights (e.g. llama3-8b: 32 layers,
# so that a 64-sequence step's K/V does not fit in L2); RF_NCU_SKIP: launches
# of the kernel to skip first (past the prefill and the first decode steps).
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
ncu --clock-control none -k "regex:$re" -s "${RF_NCU_SKIP:-0}" -c "$n" --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
  .carry/bin/rocmforge bench "${model[@]}" -p 512 -n 8 -r 1 --parallel $P 2>/dev/null |
  grep -E "^  [a-z_]+.*\(|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Stall|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Grid Size|Shared Memory Configuration Size|Dynamic Shared" | sed 's/  \+/ /g' | cut -c1-160
