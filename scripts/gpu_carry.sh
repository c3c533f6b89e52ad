#!/usr/bin/env bash
# Here (no GPU): packs into .gpu/ (git-ignored) what a run of scripts/gpu.sh
# on the GPU machine needs, small enough to travel (the test binaries
# xz-packed; gpu.sh unpacks them on first use).
#   scripts/gpu_carry.sh [BUILD]           BUILD's (default build/cuda) stripped rocmforge,
#                                          test_gpu and test_gpu_serial into .gpu/bin, a copy of
#                                          the test data into .gpu/testdata, the load generator
#                                          into .gpu/tools
#   scripts/gpu_carry.sh --as NAME BUILD   the same binaries as .gpu/NAME.tar.xz (another build
#                                          beside .gpu/bin, e.g. NAME=portable for
#                                          build/cuda-portable: gpu.sh tests --bin .gpu/portable)
#   scripts/gpu_carry.sh --base ROCMFORGE  a previous build's rocmforge as .gpu/base/rocmforge.xz
#                                          (gpu.sh ab --base .gpu/base)
# Build first: cmake --build --preset cuda --target rocmforge test_gpu test_gpu_serial.
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '2,14s/^# \{0,1\}//p' "$0" >&2; exit 2; }

if [ "${1:-}" = --base ]; then
  [ $# -eq 2 ] && [ -x "$2" ] || usage
  mkdir -p .gpu/base
  rm -f .gpu/base/rocmforge .gpu/base/rocmforge.xz
  strip -o .gpu/base/rocmforge "$2"
  xz -T2 -3 .gpu/base/rocmforge
  du -sh .gpu/base
  exit 0
fi
name=bin
if [ "${1:-}" = --as ]; then
  [ $# -eq 3 ] && [[ "$2" =~ ^[A-Za-z0-9_-]+$ ]] && [ "$2" != bin ] || usage
  name=$2
  shift 2
fi
[ $# -le 1 ] || usage
case "${1:-}" in -*) usage ;; esac
B="${1:-build/cuda}"
for f in src/rocmforge tests/test_gpu tests/test_gpu_serial; do
  [ -x "$B/$f" ] || { echo "gpu_carry.sh: no $B/$f (build the cuda preset's rocmforge test_gpu test_gpu_serial)" >&2; exit 1; }
done

dir=".gpu/$name"
rm -rf "$dir" "$dir.tar.xz"
mkdir -p "$dir"
cp "$B/src/rocmforge" "$B/tests/test_gpu" "$B/tests/test_gpu_serial" "$dir"/
strip "$dir"/*
xz -T2 -3 "$dir/rocmforge" "$dir/test_gpu" "$dir/test_gpu_serial"
if [ "$name" != bin ]; then
  tar -cJf "$dir.tar.xz" -C .gpu "$name"
  rm -rf "$dir"
  du -sh "$dir.tar.xz"
  exit 0
fi

T=../shared/testdata
rm -rf .gpu/testdata .gpu/tools
mkdir -p .gpu/testdata/quant .gpu/testdata/arch .gpu/tools
cp $T/stories260K.gguf $T/stories260K.golden.jsonl $T/stories.txt .gpu/testdata/
for f in $T/quant/qtest-*.gguf; do case $f in *.deq.gguf) ;; *) cp "$f" .gpu/testdata/quant/ ;; esac; done
cp $T/quant/qtest.logits.jsonl .gpu/testdata/quant/
cp $T/arch/* .gpu/testdata/arch/
cp ../shared/tools/loadgen.py .gpu/tools/
du -sh .gpu
