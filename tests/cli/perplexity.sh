#!/usr/bin/env bash
# `rocmforge perplexity` on stories260K and the stories text of the test
# data: a plausible perplexity (the model was trained on such stories: a
# broken forward pass or scoring gives hundreds, the vocabulary is 512);
# the same with other step sizes and at two tensor-parallel ranks; KL divergence of a run against its own
# base is 0 with every top token the same; a quantized model against its
# f16 original has a small positive KL, and so has the 8-bit KV cache
# (--kv-cache-dtype fp8) against the default one; mismatches and bad input
# fail with one line naming the problem.
# Usage: perplexity.sh ROCMFORGE TESTDATA_DIR
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cli_setup "$1" "$2" stories.txt
ppl_of() { sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$1"; }

"$bin" perplexity -m "$td/stories260K.gguf" -f "$td/stories.txt" -c 128 --kl-divergence-base "$tmp/base.bin" \
  > "$tmp/a.out" 2> "$tmp/a.err" || fail "base run: $(tail -1 "$tmp/a.err")"
p=$(ppl_of "$tmp/a.out")
awk -v p="$p" 'BEGIN { exit !(p > 2 && p < 10) }' || fail "stories260K PPL on stories.txt: '$p' (wanted 2..10)"
grep -q '^\[1\][0-9.]*,\[2\]' "$tmp/a.out" || fail "no per-chunk progress: $(head -c 200 "$tmp/a.out")"

"$bin" perplexity -m "$td/stories260K.gguf" -f "$td/stories.txt" -c 128 -b 5 --kl-divergence-base "$tmp/base.bin" \
  --kl-divergence > "$tmp/b.out" 2> "$tmp/b.err" || fail "KL run: $(tail -1 "$tmp/b.err")"
[ "$(ppl_of "$tmp/b.out")" = "$p" ] || fail "steps of 5 tokens: PPL $(ppl_of "$tmp/b.out"), steps of 128: $p"
grep -q '^Mean KLD: 0.000000 ' "$tmp/b.out" || fail "KL against its own base: $(grep KLD "$tmp/b.out")"
grep -q '^Same top token: 100.00% of 378 positions' "$tmp/b.out" || fail "$(grep 'Same top' "$tmp/b.out")"

"$bin" perplexity -m "$td/stories260K.gguf" -f "$td/stories.txt" -c 128 --tp 2 > "$tmp/tp.out" 2> "$tmp/tp.err" ||
  fail "--tp 2: $(tail -1 "$tmp/tp.err")"
[ "$(ppl_of "$tmp/tp.out")" = "$p" ] || fail "--tp 2: PPL $(ppl_of "$tmp/tp.out"), one rank: $p"

"$bin" perplexity -m "$td/quant/qtest-f16.gguf" -f "$td/stories.txt" -c 128 --kl-divergence-base "$tmp/q.bin" \
  > /dev/null 2>&1 || fail "qtest f16 base run"
"$bin" perplexity -m "$td/quant/qtest-q4_0.gguf" -f "$td/stories.txt" -c 128 --kl-divergence-base "$tmp/q.bin" \
  --kl-divergence > "$tmp/q.out" 2>&1 || fail "qtest q4_0 KL run: $(tail -1 "$tmp/q.out")"
kld=$(sed -n 's/^Mean KLD: \([0-9.]*\) .*/\1/p' "$tmp/q.out")
awk -v k="$kld" 'BEGIN { exit !(k > 0 && k < 0.05) }' || fail "q4_0 against f16: mean KLD '$kld' (wanted 0 < KLD < 0.05)"

# The 8-bit KV cache against the base of the f32 (auto) cache. Measured on
# the CPU: PPL 4.2865 -> 4.3244, mean KLD 0.0116, same top token 92.59%.
# The bounds leave ~2.5x room; a cache whose V scales were read as 1 gives
# a mean KLD of several nats. fp8_e4m3 is the same cache.
"$bin" perplexity -m "$td/stories260K.gguf" -f "$td/stories.txt" -c 128 --kl-divergence-base "$tmp/base.bin" \
  --kl-divergence --kv-cache-dtype fp8 > "$tmp/f8.out" 2> "$tmp/f8.err" || fail "fp8 KV cache: $(tail -1 "$tmp/f8.err")"
p8=$(ppl_of "$tmp/f8.out")
kld=$(sed -n 's/^Mean KLD: \([0-9.]*\) .*/\1/p' "$tmp/f8.out")
top=$(sed -n 's/^Same top token: \([0-9.]*\)% .*/\1/p' "$tmp/f8.out")
awk -v k="$kld" 'BEGIN { exit !(k > 0.001 && k < 0.03) }' || fail "fp8 KV cache: mean KLD '$kld' (wanted 0.001..0.03)"
awk -v t="$top" 'BEGIN { exit !(t >= 85) }' || fail "fp8 KV cache: same top token '$top'% (wanted >= 85)"
awk -v a="$p8" -v b="$p" 'BEGIN { r = a / b; exit !(r > 0.97 && r < 1.03 && a != b) }' ||
  fail "fp8 KV cache: PPL '$p8', auto cache $p (wanted within 3%, not equal)"
"$bin" perplexity -m "$td/stories260K.gguf" -f "$td/stories.txt" -c 128 --kv-cache-dtype fp8_e4m3 > "$tmp/e4.out" \
  2>&1 || fail "--kv-cache-dtype fp8_e4m3: $(tail -1 "$tmp/e4.out")"
[ "$(ppl_of "$tmp/e4.out")" = "$p8" ] || fail "fp8_e4m3: PPL $(ppl_of "$tmp/e4.out"), fp8: $p8"

expect_error() {  # expected substring, then the command's arguments
  local want="$1"; shift
  if "$bin" perplexity "$@" > "$tmp/e.out" 2>&1; then fail "succeeded: $*"; return; fi
  grep -q -- "$want" "$tmp/e.out" || fail "$*: [$(tail -1 "$tmp/e.out")] (wanted '$want')"
}
expect_error "made with chunks of 128 tokens, this run uses 64 (-c)" -m "$td/stories260K.gguf" -f "$td/stories.txt" \
  -c 64 --kl-divergence-base "$tmp/base.bin" --kl-divergence
expect_error "made with a vocabulary of 512, this model has 1024" -m "$td/quant/qtest-f16.gguf" -f "$td/stories.txt" \
  -c 128 --kl-divergence-base "$tmp/base.bin" --kl-divergence
expect_error "--kl-divergence needs --kl-divergence-base" -m "$td/stories260K.gguf" -f "$td/stories.txt" --kl-divergence
expect_error "fewer than one chunk of 1024" -m "$td/stories260K.gguf" -f "$td/stories.txt" -c 1024
expect_error "must be between 4 and the model's context (2048)" -m "$td/stories260K.gguf" -f "$td/stories.txt" -c 4096
expect_error "cannot read the text file" -m "$td/stories260K.gguf" -f "$tmp/none.txt"
head -c 100 "$tmp/base.bin" > "$tmp/short.bin"
expect_error "truncated" -m "$td/stories260K.gguf" -f "$td/stories.txt" -c 128 --kl-divergence-base "$tmp/short.bin" \
  --kl-divergence
expect_error "--kv-cache-dtype: fp16 not in {auto,fp8,fp8_e4m3}" -m "$td/stories260K.gguf" -f "$td/stories.txt" \
  -c 128 --kv-cache-dtype fp16
cli_finish "perplexity: all as expected (stories260K PPL $p; fp8 KV cache $p8, mean KLD $kld)"
