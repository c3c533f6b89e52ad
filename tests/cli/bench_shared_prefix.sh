#!/usr/bin/env bash
# `bench` serving mode with --shared-prefix: every prompt starts with the same
# tokens, so after the first requests the prefix cache serves them (a chat
# turn after its history); without it, distinct prompts hardly hit. The
# report counts the shared tokens among the inputs.
# Usage: bench_shared_prefix.sh ROCMFORGE TESTDATA_DIR
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cli_setup "$1" "$2"

run() {  # bench serving mode on the CPU, JSON report to $tmp/$1.json
  local name=$1; shift
  "$bin" bench -m "$m" --device cpu -t 2 --requests 24 --concurrency 4 --input-len 16 --output-len 8 --json "$@" \
    > "$tmp/$name.json" 2> "$tmp/$name.err" || fail "bench $*: $(tail -1 "$tmp/$name.err")"
}
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$tmp/$1.json" "$2"; }

run shared --shared-prefix 200
run plain
[ "$(field shared shared_prefix)" = 200 ] || fail "shared_prefix: $(field shared shared_prefix)"
[ "$(field shared input_tokens)" = $((24 * 216)) ] || fail "input tokens with the prefix: $(field shared input_tokens)"
[ "$(field plain input_tokens)" = $((24 * 16)) ] || fail "input tokens without: $(field plain input_tokens)"
# 20 of 24 requests start after a first one finished: the 192 tokens of the
# prefix's 12 whole blocks hit for each of them at least (> 0.7 of 5,184).
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0.7 else 1)" "$(field shared prefix_cache_hit_rate)" ||
  fail "hit rate with a shared prefix: $(field shared prefix_cache_hit_rate)"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 0.05 else 1)" "$(field plain prefix_cache_hit_rate)" ||
  fail "hit rate of distinct prompts: $(field plain prefix_cache_hit_rate)"
cli_finish "bench --shared-prefix: all as expected"
