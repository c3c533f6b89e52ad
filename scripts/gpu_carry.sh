#!/usr/bin/env bash
# Here (no GPU): fills .carry/ (git-ignored) with what a GPU-machine run
# needs — stripped binaries of the cuda build, the ctest lists of
# build/cuda (tests of label gpu only need those; gpu_check.sh ctest puts
# the carried binaries beside them) and a copy of the test data. Run after
# `cmake --build build/cuda --target rocmforge test_gpu test_gpu_serial`.
# RF_BUILD=build/cuda-portable carries the portable-kernel build instead
# (docs/AMD.md: the kernel variants AMD runs, tested on NVIDIA);
# RF_CARRY_BIN=.carry/portable puts its binaries there, beside .carry/bin,
# packed as .carry/portable.tar.xz (both builds in one call within the
# 64 MB a call carries: scripts/gpu_check.sh portable unpacks it).
set -euo pipefail
cd "$(dirname "$0")/.."
B="${RF_BUILD:-build/cuda}"
BIN_DIR="${RF_CARRY_BIN:-.carry/bin}"
mkdir -p "$BIN_DIR" .carry/testdata/quant .carry/testdata/arch .carry/tools
cp $B/src/rocmforge $B/tests/test_gpu $B/tests/test_gpu_serial "$BIN_DIR"/
strip "$BIN_DIR"/*
if [ -n "${RF_CARRY_BIN:-}" ]; then
  tar -cJf "$BIN_DIR.tar.xz" -C "$(dirname "$BIN_DIR")" "$(basename "$BIN_DIR")"
  rm -rf "$BIN_DIR"
else  # the test binaries xz-packed (gpu_check.sh unpacks them): within a call's 64 MB
  rm -f "$BIN_DIR/test_gpu.xz" "$BIN_DIR/test_gpu_serial.xz" && xz -T2 -3 "$BIN_DIR/test_gpu" "$BIN_DIR/test_gpu_serial"
fi
T=../shared/testdata
cp $T/stories260K.gguf $T/stories260K.golden.jsonl $T/stories.txt .carry/testdata/
for f in $T/quant/qtest-*.gguf; do case $f in *.deq.gguf) ;; *) cp "$f" .carry/testdata/quant/ ;; esac; done
cp $T/quant/qtest.logits.jsonl .carry/testdata/quant/
cp $T/arch/* .carry/testdata/arch/
cp ../shared/tools/loadgen.py .carry/tools/
# ctest lists: the files CTest reads, with this checkout's absolute paths.
rm -rf .carry/ctest && mkdir -p .carry/ctest
(cd $B && find . -path ./_deps -prune -o \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' \) -print |
  tar -cf - -T -) | tar -C .carry/ctest -xf -
mkdir -p .carry/ctest/src && touch .carry/ctest/src/CTestTestfile.cmake
du -sh .carry
