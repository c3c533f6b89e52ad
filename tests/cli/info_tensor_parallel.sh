#!/usr/bin/env bash
# `rocmforge info MODEL --tp N` says how a model splits over N
# tensor-parallel ranks, or why it does not (the loader's own checks).
# Usage: info_tensor_parallel.sh ROCMFORGE TESTDATA_DIR
set -uo pipefail
bin="$1"; td="$2"
[ -f "$td/stories260K.gguf" ] || { echo "test data missing: $td"; [[ ",${ROCMFORGE_REQUIRE:-}," == *,testdata,* ]] && exit 1; exit 0; }
fails=0
expect() {  # model, ranks, expected substring of the tensor-parallel line
  local line
  line=$("$bin" info "$td/$1" --tp "$2" 2>&1 | grep "^tensor parallel:")
  [[ "$line" == *"$3"* ]] || { echo "FAIL $1 --tp $2: [$line] (wanted '$3')"; fails=$((fails + 1)); }
}
expect stories260K.gguf 2 "each 4 query heads, 2 KV heads"
expect stories260K.gguf 3 "does not divide the model's attention heads (8)"
expect quant/qtest-q4_k.gguf 2 "tensor 'blk.0.attn_output.weight' (q4_K, blocks of 256 values) cannot be split"
expect quant/qtest-q8_0.gguf 2 "each 2 query heads, 1 KV head,"
expect arch/tiny-phi3.gguf 4 "1 KV head (replicated)"
[ $fails -eq 0 ] && echo "info --tp: all as expected" || exit 1
