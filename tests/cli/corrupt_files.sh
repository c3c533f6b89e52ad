#!/usr/bin/env bash
# `rocmforge info` on corrupted copies of a real GGUF file: each must exit
# non-zero with exactly one line on stderr that names what is invalid, and
# never crash. Usage: corrupt_files.sh ROCMFORGE MODEL.gguf
set -uo pipefail
bin="$1"; model="$2"
[ -f "$model" ] || { echo "test data missing: $model"; [[ ",${ROCMFORGE_REQUIRE:-}," == *,testdata,* ]] && exit 1; exit 0; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
size=$(stat -c %s "$model")
fails=0
check() {  # file, expected substring
  local err rc
  err=$("$bin" info "$1" 2>&1 >/dev/null); rc=$?
  if [ $rc -eq 0 ] || [ $rc -ge 128 ] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] || [[ "$err" != *"$2"* ]]; then
    echo "FAIL $1: rc=$rc stderr=[$err] (wanted one line with '$2')"; fails=$((fails + 1))
  fi
}
# Truncations: inside the header, the metadata, the tensor infos, the data.
for n in 0 3 7 15 23 100 1000 5000 14000 14176 200000 $((size - 1)); do
  head -c "$n" "$model" > "$work/trunc-$n.gguf"; check "$work/trunc-$n.gguf" "gguf"
done
# Bad magic, bad version, a huge tensor count, a huge key length.
cp "$model" "$work/magic.gguf"; printf 'XGUF' | dd of="$work/magic.gguf" conv=notrunc status=none; check "$work/magic.gguf" "magic"
cp "$model" "$work/version.gguf"; printf '\x07' | dd of="$work/version.gguf" bs=1 seek=4 conv=notrunc status=none; check "$work/version.gguf" "version"
cp "$model" "$work/count.gguf"; printf '\xff\xff\xff\xff\xff\xff\xff\x7f' | dd of="$work/count.gguf" bs=1 seek=8 conv=notrunc status=none; check "$work/count.gguf" "tensor_count"
cp "$model" "$work/keylen.gguf"; printf '\xff\xff\xff\xff\xff\xff\x00\x00' | dd of="$work/keylen.gguf" bs=1 seek=24 conv=notrunc status=none; check "$work/keylen.gguf" "metadata key #0"
check "$work/does-not-exist.gguf" "cannot open"
[ $fails -eq 0 ] && echo "corrupt files: all rejected cleanly" || exit 1
