#!/usr/bin/env bash
# The i-quants below 4 bits from the command line: `quantize` of the qtest
# model to iq2_xs with llama.cpp's importance matrix writes llama.cpp's
# IQ2_XS mixture (Q2_K token_embd and attn_v at 2 query heads per KV head,
# Q5_K output), `info` names it, `run` and `eval` generate from it; without
# --imatrix the plan is refused in one line with a non-zero exit, while
# iq3_s (which llama.cpp makes without one) is not.
# Usage: iq_lowbit_quantize.sh ROCMFORGE TESTDATA_DIR
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cli_setup "$1" "$2" quant/qtest-f16.gguf quant/qtest.imatrix
q="$td/quant"

"$bin" quantize "$q/qtest-f16.gguf" "$tmp/iq2xs.gguf" iq2_xs --imatrix "$q/qtest.imatrix" > "$tmp/q.out" 2>&1 ||
  fail "quantize iq2_xs: $(tail -1 "$tmp/q.out")"
info=$("$bin" info "$tmp/iq2xs.gguf" 2>&1)
[[ "$info" == *"types:       f32 x3 iq2_xs x6 q2_K x2 q5_K x1"* ]] || fail "info types: $(grep types: <<<"$info")"
[[ "$info" == *"file type:   20 (mostly IQ2_XS"* ]] || fail "info file type: $(grep 'file type' <<<"$info")"

"$bin" run -m "$tmp/iq2xs.gguf" -p "Once upon a time" -n 8 --temp 0 --ignore-eos > "$tmp/run.out" 2> "$tmp/run.err" ||
  fail "run: $(tail -1 "$tmp/run.err")"
generated=$(sed 's/^Once upon a time//' "$tmp/run.out" | tr -d '[:space:]')
[[ $(head -c 16 "$tmp/run.out") == "Once upon a time" && -n "$generated" ]] || fail "run: $(head -c 200 "$tmp/run.out")"

printf '1 20 30 40 50 60\n1 300 301 302\n' > "$tmp/prompts.txt"
"$bin" eval -m "$tmp/iq2xs.gguf" --prompts "$tmp/prompts.txt" -n 8 > "$tmp/eval.out" 2> "$tmp/eval.err" ||
  fail "eval: $(tail -1 "$tmp/eval.err")"
python3 - "$tmp/eval.out" <<'PY' || fail "eval output: $(head -c 300 "$tmp/eval.out")"
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(recs) == 2, len(recs)
for r in recs:
    assert len(r["greedy_tokens"]) == 8 and all(0 <= t < 1024 for t in r["greedy_tokens"]), r["greedy_tokens"]
    assert len(r["first_step_logits"]) == 1024 and all(math.isfinite(x) for x in r["first_step_logits"])
PY

"$bin" quantize "$q/qtest-f16.gguf" "$tmp/refused.gguf" iq2_xs > "$tmp/r.out" 2>&1
rc=$?
[ "$rc" -ne 0 ] || fail "iq2_xs without --imatrix was not refused"
[ "$(wc -l < "$tmp/r.out")" -eq 1 ] || fail "refusal is not one line: $(cat "$tmp/r.out")"
grep -q "^error: iq2_xs needs an importance matrix .*--imatrix FILE" "$tmp/r.out" || fail "refusal: $(cat "$tmp/r.out")"
[ ! -e "$tmp/refused.gguf" ] || fail "a refused quantization left a file"

"$bin" quantize "$q/qtest-f16.gguf" "$tmp/iq3s.gguf" iq3_s > "$tmp/s.out" 2>&1 || fail "iq3_s: $(tail -1 "$tmp/s.out")"
cli_finish "low-bit i-quants: all as expected"
