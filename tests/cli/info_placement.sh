#!/usr/bin/env bash
# `rocmforge info MODEL [--cpu-moe | --n-cpu-moe N]` says what of a
# mixture-of-experts model lives in host memory and what on the device.
# Usage: info_placement.sh ROCMFORGE TESTDATA_DIR
set -uo pipefail
bin="$1"; td="$2"
[ -f "$td/arch/tiny-qwen3moe.gguf" ] || { echo "test data missing: $td"; [[ ",${ROCMFORGE_REQUIRE:-}," == *,testdata,* ]] && exit 1; exit 0; }
fails=0
expect() {  # model, expected substring of the placement line, flags...
  local model="$1" want="$2" line; shift 2
  line=$("$bin" info "$td/$model" "$@" 2>&1 | grep "^placement:")
  [[ "$line" == *"$want"* ]] || { echo "FAIL $model $*: [$line] (wanted '$want')"; fails=$((fails + 1)); }
}
layers=$("$bin" info "$td/arch/tiny-qwen3moe.gguf" | sed -n 's/.*qwen3moe.block_count *u32 *\([0-9]*\).*/\1/p')
[ -n "$layers" ] || { echo "FAIL: no block count for tiny-qwen3moe"; exit 1; }
expect arch/tiny-qwen3moe.gguf "placement:   all "
expect arch/tiny-qwen3moe.gguf "experts of 1 layer in host memory" --n-cpu-moe 1
expect arch/tiny-qwen3moe.gguf "experts of $layers layers in host memory" --cpu-moe
expect arch/tiny-qwen3moe.gguf "experts of $layers layers in host memory" --n-cpu-moe 999
# Dense models have no placement line.
if "$bin" info "$td/stories260K.gguf" --cpu-moe 2>&1 | grep -q "^placement:"; then
  echo "FAIL: a placement line for a dense model"; fails=$((fails + 1))
fi
[ $fails -eq 0 ] && echo "info placement: all as expected" || exit 1
