#!/usr/bin/env bash
# --kv-cache-dtype outside perplexity (perplexity.sh has its KL divergence):
# `info` says what a full-context sequence holds in the f16 and the 8-bit
# cache (figures worked out by hand below); `run` generates with the 8-bit
# cache on the CPU, the engine says which cache it made, and an element type
# the CPU does not have (fp16) is refused before anything loads.
# Usage: kv_cache_dtype.sh ROCMFORGE TESTDATA_DIR
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cli_setup "$1" "$2"

# stories260K: 5 layers, 4 KV heads of 8, context 2048. A token's K or V
# row of one layer: f16 64 bytes; e4m3 32 + 4 scales of 4 bytes = 48. So
# 2 * 5 * 2048 * 64 = 1.25 MiB, and * 48 = 960 KiB.
line=$("$bin" info "$m" 2>&1 | grep '^kv cache:')
[[ "$line" == *"a 2048-token sequence holds 1.25 MiB of f16 K/V decoding (960.00 KiB with --kv-cache-dtype fp8)"* ]] ||
  fail "info: [$line]"

"$bin" run -v -m "$m" -p "Once upon a time" -n 24 --temp 0 --kv-cache-dtype fp8 > "$tmp/f8.out" 2> "$tmp/f8.err" ||
  fail "run with fp8: $(tail -1 "$tmp/f8.err")"
grep -q 'KV blocks of 16 tokens x 5 layers (f8_e4m3, ' "$tmp/f8.err" ||
  fail "run with fp8: the engine did not report an f8_e4m3 cache: $(grep 'engine:' "$tmp/f8.err")"
# Greedy: the first words as with the f32 cache (llama.cpp's golden text).
grep -q '^Once upon a time, there was a little girl named Lily' "$tmp/f8.out" ||
  fail "run with fp8: $(head -c 200 "$tmp/f8.out")"

if "$bin" run -m "$m" -p "x" -n 1 --kv-cache-dtype fp16 > "$tmp/e.out" 2>&1; then
  fail "run --kv-cache-dtype fp16 succeeded"
else
  grep -q -- "--kv-cache-dtype: fp16 not in {auto,fp8,fp8_e4m3}" "$tmp/e.out" || fail "fp16: [$(tail -1 "$tmp/e.out")]"
fi
cli_finish "--kv-cache-dtype: all as expected"
