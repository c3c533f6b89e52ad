#!/usr/bin/env bash
# scripts/gpu.sh without a GPU: fake test binaries, a fake rocmforge and a
# fake compute-sanitizer stand in for the real ones, so the exit status is
# checked where it matters — 0 only when every shard, the serial tests, the
# golden text and the sanitizer passed; 1 when any failed (a failing shard
# among passing ones, a crashed one, one that prints PASSED but exits 1, a
# filter that matches nothing, a golden mismatch, a sanitizer error, a
# missing binary); 2 for an unknown verb, option or part; 3 when --on names
# another GPU.
# Usage: gpu_script.sh REPO_ROOT
set -uo pipefail
repo="$(cd "$1" && pwd)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

mkdir -p "$tmp/bin" "$tmp/path" "$tmp/td" "$tmp/out"
# test_gpu: gtest's summary lines; FAKE_FAIL_SHARD=i fails shard i (after
# printing PASSED), FAKE_CRASH_SHARD=i kills shard i; a filter "Nothing*"
# matches no test.
cat > "$tmp/bin/test_gpu" <<'EOF'
#!/usr/bin/env bash
for a in "$@"; do
  if [ "$a" = "--gtest_filter=Nothing*" ]; then echo "[==========] 0 tests from 0 test suites ran. (0 ms total)"; exit 0; fi
done
echo "[==========] 3 tests from 1 test suite ran. (1 ms total)"
echo "[  PASSED  ] 3 tests."
[ "${GTEST_SHARD_INDEX:-x}" = "${FAKE_CRASH_SHARD:-none}" ] && kill -SEGV $$
[ "${GTEST_SHARD_INDEX:-x}" = "${FAKE_FAIL_SHARD:-none}" ] && exit 1
exit 0
EOF
cat > "$tmp/bin/test_gpu_serial" <<'EOF'
#!/usr/bin/env bash
echo "[  PASSED  ] 2 tests."
exit "${FAKE_SERIAL_RC:-0}"
EOF
# rocmforge run: the golden text, or with FAKE_WRONG=1 another.
cat > "$tmp/bin/rocmforge" <<'EOF'
#!/usr/bin/env bash
[ "$1" = run ] || exit 1
if [ "${FAKE_WRONG:-0}" = 1 ]; then echo " once more"; else echo " upon a time"; fi
echo "generation: 10 tok/s" >&2
EOF
cat > "$tmp/path/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
while [ "$1" != "--error-exitcode" ]; do shift; done
code=$2; shift 2
"$@" || exit $?
if [ "${FAKE_SANITIZER_ERRORS:-0}" = 1 ]; then echo "========= ERROR SUMMARY: 1 error"; exit "$code"; fi
echo "========= ERROR SUMMARY: 0 errors"
EOF
cat > "$tmp/path/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
echo "NVIDIA H100 80GB HBM3"
EOF
chmod +x "$tmp/bin/"* "$tmp/path/"*
echo '{"prompt": "Once", "greedy_tokens": [1, 2, 3], "greedy_text": " upon a time"}' > "$tmp/td/stories260K.golden.jsonl"

# expect STATUS DESCRIPTION [VAR=VALUE...] -- ARGS...: runs scripts/gpu.sh ARGS.
expect() {
  local want=$1 what=$2 envs=() got
  shift 2
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" PATH="$tmp/path:$PATH" OUT="$tmp/out" ROCMFORGE_TESTDATA="$tmp/td" \
    bash "$repo/scripts/gpu.sh" "$@" > "$tmp/last.log" 2>&1
  got=$?
  if [ "$got" != "$want" ]; then
    fail "$what: exit $got, wanted $want (scripts/gpu.sh $*)"
    sed 's/^/    /' "$tmp/last.log" | tail -15
  fi
}

B=(--bin "$tmp/bin")
expect 0 "help" -- help
grep -q "^usage: scripts/gpu.sh VERB" "$tmp/last.log" || fail "help prints no usage"
for verb in tests bench ab profile tp; do
  grep -qE "^  $verb " "$tmp/last.log" || fail "help does not describe '$verb'"
done
expect 2 "an unknown verb" -- frobnicate
expect 2 "an unknown option" -- tests --frobnicate
expect 2 "an unknown part" -- tests "${B[@]}" --parts gtest,frobnicate
expect 2 "an option without its value" -- tests --shards
expect 2 "--sanitize without --filter" -- tests "${B[@]}" --sanitize memcheck

expect 0 "every shard and the serial tests pass" -- tests "${B[@]}" --parts gtest,serial
expect 1 "one shard of six fails" FAKE_FAIL_SHARD=2 -- tests "${B[@]}" --parts gtest,serial
grep -q "test_gpu shard 2/6" "$tmp/last.log" || fail "the failing shard is not named"
expect 1 "the last shard fails" FAKE_FAIL_SHARD=3 -- tests "${B[@]}" --parts gtest --shards 4
expect 1 "a shard crashes" FAKE_CRASH_SHARD=0 -- tests "${B[@]}" --parts gtest
expect 1 "test_gpu_serial fails" FAKE_SERIAL_RC=1 -- tests "${B[@]}" --parts gtest,serial
expect 0 "the golden text matches" -- tests "${B[@]}" --parts golden
expect 1 "the golden text differs" FAKE_WRONG=1 -- tests "${B[@]}" --parts golden
expect 1 "a filter that matches no test" -- tests "${B[@]}" --filter 'Nothing*'
expect 0 "a filtered run" -- tests "${B[@]}" --filter 'Cuda*'
expect 0 "a clean sanitizer run" -- tests "${B[@]}" --filter 'Cuda*' --sanitize memcheck
expect 1 "a sanitizer error" FAKE_SANITIZER_ERRORS=1 -- tests "${B[@]}" --filter 'Cuda*' --sanitize memcheck
expect 1 "no test binaries" -- tests --bin "$tmp/none" --parts gtest,serial
expect 3 "--on another GPU" -- tests "${B[@]}" --parts gtest --on H200
expect 0 "--on this GPU" -- tests "${B[@]}" --parts gtest --on H100

[ "$fails" -eq 0 ] && echo "gpu.sh: exit statuses as documented" || exit 1
