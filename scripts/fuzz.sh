#!/usr/bin/env bash
# Runs each libFuzzer target in build/fuzz for SECONDS (default 30), seeded
# from the test data (GGUF files, tokenizer inputs). Fails on any crash.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
testdata="${ROCMFORGE_TESTDATA:-$PWD/../shared/testdata}"
corpus_root="build/fuzz/corpus"
mkdir -p "$corpus_root"
for bin in build/fuzz/tests/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  corpus="$corpus_root/$name"
  mkdir -p "$corpus"
  case "$name" in
    fuzz_gguf)
      # Seeds: the small real files (the vocab-only ones are large; skip them).
      for f in "$testdata"/stories260K.gguf "$testdata"/quant/qtest-q4_0.deq.gguf; do
        [ -f "$f" ] && cp -f "$f" "$corpus/" ;
      done ;;
    fuzz_tokenizer*)
      # Vocabularies to fuzz (':'-separated); byte 0 of an input picks one.
      export ROCMFORGE_FUZZ_VOCAB="${ROCMFORGE_FUZZ_VOCAB:-$testdata/vocab/ggml-vocab-llama-spm.gguf:$testdata/vocab/ggml-vocab-gpt-2.gguf:$testdata/vocab/ggml-vocab-deepseek-coder.gguf}"
      for f in "$testdata"/vocab/*.inp; do [ -f "$f" ] && cp -f "$f" "$corpus/"; done ;;
  esac
  echo "fuzz: $name for ${seconds}s"
  "$bin" "$corpus" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 2>&1 | tail -n 12
done
