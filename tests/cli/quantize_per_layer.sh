#!/usr/bin/env bash
# `quantize` of a file whose metadata gives values per layer (Gemma 4 MoE's
# head_count_kv array): the copy is written in the target type, keeps the
# array, and evaluates within 1e-2 relative L2 of the original's first-step
# logits on the CPU (f16 weights against f32).
# Usage: quantize_per_layer.sh ROCMFORGE TESTDATA_DIR
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cli_setup "$1" "$2" arch/tiny-gemma4moe.gguf arch/prompts.txt
a="$td/arch"

"$bin" quantize "$a/tiny-gemma4moe.gguf" "$tmp/f16.gguf" f16 > "$tmp/q.out" 2>&1 || fail "quantize f16: $(tail -1 "$tmp/q.out")"
info=$("$bin" info "$tmp/f16.gguf" 2>&1)
[[ "$info" == *"file type:   1 ("* ]] || fail "info file type: $(grep 'file type' <<<"$info")"
[[ "$info" == *"head_count_kv"*"array"* ]] || fail "head_count_kv is no longer an array: $(grep head_count_kv <<<"$info")"
head -1 "$a/prompts.txt" > "$tmp/p.txt"
"$bin" eval -m "$a/tiny-gemma4moe.gguf" --prompts "$tmp/p.txt" -n 1 --device cpu > "$tmp/a.jsonl" 2> "$tmp/a.err" ||
  fail "eval original: $(tail -1 "$tmp/a.err")"
"$bin" eval -m "$tmp/f16.gguf" --prompts "$tmp/p.txt" -n 1 --device cpu > "$tmp/b.jsonl" 2> "$tmp/b.err" ||
  fail "eval f16 copy: $(tail -1 "$tmp/b.err")"
python3 - "$tmp/a.jsonl" "$tmp/b.jsonl" <<'PY' || fail "f16 copy's logits too far from the original's"
import json, math, sys
a, b = (json.loads(open(f).readline())["first_step_logits"] for f in sys.argv[1:3])
err = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)) / sum(x * x for x in a))
print(f"f16 copy: rel. L2 {err:.2e} from the original")
sys.exit(0 if len(a) == len(b) and err < 1e-2 else 1)
PY
cli_finish "quantize of per-layer metadata: ok"
