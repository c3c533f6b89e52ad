#!/usr/bin/env bash
# The GPU machine's runs as one tool: the GPU tests, benchmarks, A/B
# comparisons, profiles and the two-GPU checks, over the binaries and test
# data scripts/gpu_carry.sh packs into .gpu/. Any failing test, golden
# mismatch, sanitizer error or failed run makes it exit 1 (each is listed
# at the end); usage errors exit 2. `scripts/gpu.sh help` says the rest.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
usage: scripts/gpu.sh VERB [OPTIONS]

Runs on the GPU machine from the repository root, on the binaries in .gpu/bin
and the test data in .gpu/testdata (scripts/gpu_carry.sh packs both here).
Logs and result files go to $OUT (default /tmp/rf-out), models written by
`rocmforge mkmodel` to /tmp/rf-models. Exit status: 0 when everything ran and
passed; 1 when a test, a golden check, a sanitizer or a run failed (listed at
the end); 2 for a usage error; 3 when --on does not match the GPU.

verbs:
  tests    every GPU test with ROCMFORGE_REQUIRE=testdata,gpu (a skip for want of a
           GPU or test data fails): test_gpu in gtest shards at once,
           test_gpu_serial alone, stories260K's golden text through
           `rocmforge run --device cuda`, each family's tiny model through
           `rocmforge eval` against llama.cpp's goldens (relative L2 of the
           first-step logits < 1e-2, or 3x the model's f16 sensitivity), stories260K's perplexity on the GPU
           against the CPU (mean KL divergence < 1e-3), structured output
           through `rocmforge serve`
  bench    synthetic models (`rocmforge mkmodel`, or --dummy) through
           `rocmforge bench`; with --serve also served: the engine's serving
           mode, then `rocmforge serve` under loadgen (64 clients, one client)
  ab       side A against side B (this build, or --base's), alternated
           rounds of `rocmforge bench` (or with --serve of the served rows),
           then each side's mean and the ratio B / A
  profile  ops | kernels | kernel [PRESET:TYPE] (default llama3-8b:f16, dummy
           weights): per-op GPU time (ROCMFORGE_PROFILE=1, graphs off),
           Nsight Compute's time summed by kernel, or one kernel's details
           (speed of light, occupancy, warp stalls)
  tp       two GPUs: the tensor-parallel tests (ROCMFORGE_REQUIRE=...,multi-gpu),
           memcheck on them, `eval` at TP=2 against TP=1, perplexity at TP=2
           against the CPU, llama3-8b bench at TP=1 and TP=2; with --serve
           llama3-70b-shaped dummy weights served at TP=2 under loadgen
  help     this text

options:
  --bin DIR       all: the binaries (default .gpu/bin; DIR.tar.xz is unpacked)
  --on PATTERN    all: run only if the GPU's name contains PATTERN (e.g. H200)
  --parts LIST    tests: comma-separated of gtest,serial,golden,families,ppl,
                  structured (default all; with --filter: gtest)
  --shards N      tests: test_gpu processes at once (default 6)
  --filter F      tests: test_gpu on gtest filter F, one process; a filter
                  that matches no test fails
  --sanitize TOOL tests: that test_gpu run under compute-sanitizer --tool TOOL
                  (memcheck, racecheck, synccheck, initcheck); needs --filter
  --models LIST   bench, ab: PRESET:TYPE words (default "llama3-8b:f16
                  llama3-8b:q4_k_m"); families:TYPE is every family's preset
  --dummy         bench: --load-format dummy, no file (ab and profile always)
  --parallel P    bench, ab, profile: sequences, comma-separated (bench 1,64;
                  ab and profile 1)
  --prompt N      bench, ab, profile: prompt tokens (512)
  --gen N         bench, ab, profile: generated tokens (128; profile 32)
  --reps N        bench: measured runs (3); ab: rounds (2)
  --base DIR      ab: side A runs DIR/rocmforge (or DIR/rocmforge.xz)
  --a S, --b S    ab: one side's settings: VAR=VALUE words go to its
                  environment, other words to its bench (or serve) command
  --args S        bench, ab, profile: words for every bench (ab --serve:
                  serve) command
  --serve         bench, ab, tp: the served rows (see the verbs)
  --kernel REGEX  profile kernel (required), kernels: the kernels to look at
  --skip N        profile: matching launches to skip first (0)
  --count N       profile: launches to profile (kernels 400, kernel 1)
  --longest N     profile kernel: of the first N matching launches, the first
                  within 90% of the longest (e.g. decode at its full context)
EOF
}

die_usage() { echo "gpu.sh: $*" >&2; echo "(scripts/gpu.sh help)" >&2; exit 2; }

verb="${1:-help}"
[ $# -gt 0 ] && shift
case "$verb" in
  tests | bench | ab | profile | tp) ;;
  help | -h | --help) usage; exit 0 ;;
  *) die_usage "unknown verb '$verb'" ;;
esac

BIN=.gpu/bin ON="" PARTS="" SHARDS=6 FILTER="" SANITIZE="" MODELS_ARG="" DUMMY=0 PARALLEL="" PROMPT=512 GEN=""
REPS="" BASE="" SIDE_A="" SIDE_B="" ARGS="" SERVE=0 KERNEL="" SKIP=0 COUNT="" LONGEST="" WHAT=""
if [ "$verb" = profile ]; then
  WHAT="${1:-}"
  case "$WHAT" in ops | kernels | kernel) shift ;; *) die_usage "profile: ops, kernels or kernel, not '$WHAT'" ;; esac
  case "${1:-}" in "" | -*) MODEL="llama3-8b:f16" ;; *) MODEL="$1"; shift ;; esac
fi
value() { [ $# -ge 2 ] || die_usage "$1 needs a value"; }
number() { [[ "$2" =~ ^[0-9]+$ ]] || die_usage "$1 '$2': expected a number"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) value "$@"; BIN="${2%/}" ;;
    --on) value "$@"; ON="$2" ;;
    --parts) value "$@"; PARTS="$2" ;;
    --shards) value "$@"; number "$@"; SHARDS="$2" ;;
    --filter) value "$@"; FILTER="$2" ;;
    --sanitize) value "$@"; SANITIZE="$2" ;;
    --models) value "$@"; MODELS_ARG="$2" ;;
    --dummy) DUMMY=1; shift; continue ;;
    --parallel) value "$@"; [[ "$2" =~ ^[0-9]+(,[0-9]+)*$ ]] || die_usage "--parallel '$2'"; PARALLEL="$2" ;;
    --prompt) value "$@"; number "$@"; PROMPT="$2" ;;
    --gen) value "$@"; number "$@"; GEN="$2" ;;
    --reps) value "$@"; number "$@"; REPS="$2" ;;
    --base) value "$@"; BASE="${2%/}" ;;
    --a) value "$@"; SIDE_A="$2" ;;
    --b) value "$@"; SIDE_B="$2" ;;
    --args) value "$@"; ARGS="$2" ;;
    --serve) SERVE=1; shift; continue ;;
    --kernel) value "$@"; KERNEL="$2" ;;
    --skip) value "$@"; number "$@"; SKIP="$2" ;;
    --count) value "$@"; number "$@"; COUNT="$2" ;;
    --longest) value "$@"; number "$@"; LONGEST="$2" ;;
    *) die_usage "$verb: unknown option '$1'" ;;
  esac
  shift 2
done
[ -n "$SANITIZE" ] && [ -z "$FILTER" ] && die_usage "--sanitize needs --filter (the whole suite under a sanitizer takes hours)"
[ "$verb" = profile ] && [ "$WHAT" = kernel ] && [ -z "$KERNEL" ] && die_usage "profile kernel needs --kernel REGEX"
[ "$SHARDS" -ge 1 ] || die_usage "--shards must be at least 1"
for part in ${PARTS//,/ }; do
  case "$part" in
    gtest | serial | golden | families | ppl | structured) ;;
    *) die_usage "tests: unknown part '$part' (gtest, serial, golden, families, ppl, structured)" ;;
  esac
done

OUT="${OUT:-/tmp/rf-out}"
MODELS=/tmp/rf-models
mkdir -p "$OUT" "$MODELS"
export ROCMFORGE_TESTDATA="${ROCMFORGE_TESTDATA:-$PWD/.gpu/testdata}"
export ROCMFORGE_REQUIRE="${ROCMFORGE_REQUIRE:-testdata,gpu}"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PATH:/usr/local/cuda/bin"  # appended: a compute-sanitizer or ncu earlier in PATH wins
TD="$ROCMFORGE_TESTDATA"
LOADGEN=.gpu/tools/loadgen.py
FAMILIES="llama3-8b qwen2.5-7b qwen3-8b gemma2-9b gemma3-12b phi3-mini glm4-9b"
TINY_FAMILIES="qwen2 qwen3 gemma2 gemma3 phi3 glm4 mixtral qwen3moe gpt-oss qwen35 qwen35moe gemma4 gemma4moe glm4moe deepseek2"

if [ -n "$ON" ]; then
  gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)"
  if [[ "$gpu_name" != *"$ON"* ]]; then echo "gpu.sh: GPU '${gpu_name:-none}' is not '$ON': nothing run"; exit 3; fi
fi

# --- failures, collected ------------------------------------------------------
failures=()
failed() { failures+=("$*"); echo "FAILED: $*"; }
finish() {
  echo
  if [ ${#failures[@]} -gt 0 ]; then
    echo "== gpu.sh $verb: ${#failures[@]} failed"
    printf '  %s\n' "${failures[@]}"
    exit 1
  fi
  echo "== gpu.sh $verb: all passed"
  exit 0
}
section() { echo; echo "== $*"; }
safe() { echo "${1//[^A-Za-z0-9._-]/-}"; }  # a file name without colons or slashes

# The binaries of DIR, unpacked once (gpu_carry.sh packs them with xz).
unpack() {
  local dir="$1" f
  if [ ! -d "$dir" ] && [ -f "$dir.tar.xz" ]; then
    tar -xJf "$dir.tar.xz" -C "$(dirname "$dir")" || echo "gpu.sh: cannot unpack $dir.tar.xz" >&2
  fi
  for f in rocmforge test_gpu test_gpu_serial; do
    if [ -f "$dir/$f.xz" ] && [ ! -f "$dir/$f" ]; then
      { unxz -k "$dir/$f.xz" && chmod +x "$dir/$f"; } || echo "gpu.sh: cannot unpack $dir/$f.xz" >&2
    fi
  done
  return 0
}
unpack "$BIN"
have() { [ -x "$BIN/$1" ] || { failed "$1: not found in $BIN"; return 1; }; }

# Splits settings S into the arrays env_words (VAR=VALUE) and arg_words.
split_settings() {
  env_words=() arg_words=()
  local w
  for w in $1; do
    if [[ "$w" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; then env_words+=("$w"); else arg_words+=("$w"); fi
  done
}

# The model words of --models (families:TYPE expanded).
model_list() {
  local w
  for w in ${MODELS_ARG:-llama3-8b:f16 llama3-8b:q4_k_m}; do
    case "$w" in
      families:*) for p in $FAMILIES; do echo "$p:${w#families:}"; done ;;
      *:*) echo "$w" ;;
      *) echo "$w:f16" ;;
    esac
  done
}

# --- tests ----------------------------------------------------------------------
gtest_log_check() {  # LOG NAME: a run that ran no test fails too
  grep -E "^\[  (PASSED|FAILED)  \]|^\[  SKIPPED \]" "$1" | head -3 || true
  grep -E "^\[  FAILED  \] [A-Za-z]|Failure$" "$1" | head -20 || true
  if grep -q "^\[==========\] 0 tests from" "$1"; then failed "$2: no test matched"; fi
}

tests_gtest_sharded() {
  section "test_gpu in $SHARDS shards at once"
  have test_gpu || return 0
  local i pids=() status
  for ((i = 0; i < SHARDS; i++)); do
    GTEST_TOTAL_SHARDS=$SHARDS GTEST_SHARD_INDEX=$i timeout 900 "$BIN/test_gpu" > "$OUT/test_gpu.$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < SHARDS; i++)); do
    if wait "${pids[$i]}"; then status=0; else status=$?; fi
    echo "shard $i/$SHARDS: exit $status"
    gtest_log_check "$OUT/test_gpu.$i.log" "test_gpu shard $i"
    [ "$status" -eq 0 ] || failed "test_gpu shard $i/$SHARDS (exit $status): $OUT/test_gpu.$i.log"
  done
}

tests_gtest_filtered() {
  local log
  log="$OUT/test_gpu-$(safe "${SANITIZE:-plain}-$FILTER").log"
  section "test_gpu --gtest_filter='$FILTER'${SANITIZE:+ under compute-sanitizer --tool $SANITIZE}"
  have test_gpu || return 0
  local cmd=("$BIN/test_gpu" "--gtest_filter=$FILTER")
  if [ -n "$SANITIZE" ]; then
    command -v compute-sanitizer > /dev/null || { failed "compute-sanitizer: not found"; return 0; }
    cmd=(compute-sanitizer --tool "$SANITIZE" --error-exitcode 9 "${cmd[@]}")
  fi
  if timeout 900 "${cmd[@]}" > "$log" 2>&1; then status=0; else status=$?; fi
  echo "exit $status ($log)"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK SUMMARY" "$log" | tail -2 || true
  gtest_log_check "$log" "test_gpu '$FILTER'"
  [ "$status" -eq 0 ] || failed "test_gpu '$FILTER'${SANITIZE:+ under $SANITIZE} (exit $status): $log"
}

tests_serial() {
  section "test_gpu_serial (alone: allocation counts, graphs)"
  have test_gpu_serial || return 0
  if timeout 600 "$BIN/test_gpu_serial" > "$OUT/test_gpu_serial.log" 2>&1; then status=0; else status=$?; fi
  echo "exit $status"
  gtest_log_check "$OUT/test_gpu_serial.log" test_gpu_serial
  [ "$status" -eq 0 ] || failed "test_gpu_serial (exit $status): $OUT/test_gpu_serial.log"
}

tests_golden() {
  section "stories260K's golden text through rocmforge run --device cuda"
  have rocmforge || return 0
  python3 scripts/gpu_checks.py golden "$BIN/rocmforge" "$TD" || failed "golden text: mismatches (above)"
}

tests_families() {
  section "each family's tiny model: rocmforge eval --device cuda against llama.cpp's goldens"
  have rocmforge || return 0
  python3 scripts/gpu_checks.py families "$BIN/rocmforge" "$TD/arch" $TINY_FAMILIES ||
    failed "families: an eval failed or a model is past its bound (above)"
}

# Mean KL divergence of the CPU's base file against a GPU run (args after
# the base file: the GPU run's device options); fails past 1e-3.
ppl_against_cpu() {
  local base="$MODELS/ppl-cpu.bin" log="$OUT/ppl-$(safe "$*").log" kld
  "$BIN/rocmforge" perplexity -m "$TD/stories260K.gguf" -f "$TD/stories.txt" -c 128 --device cpu \
    --kl-divergence-base "$base" > /dev/null 2>&1 || { failed "perplexity on the CPU"; return 0; }
  if ! "$BIN/rocmforge" perplexity -m "$TD/stories260K.gguf" -f "$TD/stories.txt" -c 128 "$@" \
    --kl-divergence-base "$base" --kl-divergence > "$log" 2>&1; then
    failed "perplexity $*: $(tail -1 "$log")"; return 0
  fi
  grep -E "^Final estimate|^Mean KLD|^Same top" "$log" || true
  kld="$(sed -n 's/^Mean KLD: \([0-9.e+-]*\) .*/\1/p' "$log")"
  awk -v k="${kld:-x}" 'BEGIN { exit !(k + 0 == k && k < 1e-3) }' || failed "perplexity $*: mean KLD '${kld}' against the CPU (>= 1e-3)"
}

tests_ppl() {
  section "stories260K's perplexity: the GPU against the CPU"
  have rocmforge || return 0
  ppl_against_cpu --device cuda
}

tests_structured() {
  section "structured output through rocmforge serve --device cuda"
  have rocmforge || return 0
  python3 scripts/gpu_structured.py "$BIN/rocmforge" "$TD" cuda > "$OUT/structured.log" 2>&1 ||
    failed "structured output: $OUT/structured.log"
  tail -3 "$OUT/structured.log"
}

run_tests() {
  local parts="${PARTS:-$([ -n "$FILTER" ] && echo gtest || echo gtest,serial,golden,families,ppl,structured)}" p
  for p in ${parts//,/ }; do
    case "$p" in
      gtest) if [ -n "$FILTER" ]; then tests_gtest_filtered; else tests_gtest_sharded; fi ;;
      serial) tests_serial ;;
      golden) tests_golden ;;
      families) tests_families ;;
      ppl) tests_ppl ;;
      structured) tests_structured ;;
    esac
  done
}

# --- bench ----------------------------------------------------------------------
# The model source words of PRESET:TYPE: a mkmodel file, or dummy weights.
model_source() {
  local m="$1" f
  if [ "$DUMMY" = 1 ]; then src=(--load-format dummy -m "$m"); return 0; fi
  f="$MODELS/$(safe "$m").gguf"
  if [ ! -f "$f" ]; then
    "$BIN/rocmforge" mkmodel --preset "${m%%:*}" --type "${m#*:}" -o "$f.part" > "$OUT/mkmodel.log" 2>&1 &&
      mv "$f.part" "$f" || { failed "mkmodel $m: $(tail -1 "$OUT/mkmodel.log")"; return 1; }
  fi
  src=(-m "$f")
}

# Serves the model (source words "${src[@]}") with env words E and serve
# args A (two strings), under loadgen: 64 clients, then one.
served_rows() {
  local envs="$1" extra="$2" rf="$3" log port="" pid i status up=0
  [ -f "$LOADGEN" ] || { failed "served: $LOADGEN missing (scripts/gpu_carry.sh copies it)"; return 0; }
  log="$OUT/serve-$(safe "${src[*]: -1}").log"
  split_settings "$envs $extra"
  rm -f "$log"
  env "${env_words[@]}" "$rf" serve "${src[@]}" --port 0 --max-num-seqs 64 "${arg_words[@]}" \
    > "$log" 2>&1 &
  pid=$!
  for i in $(seq 1 600); do  # the port first (503 while loading), then health
    port="$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log" 2> /dev/null | head -1)"
    if [ -n "$port" ] && python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/health')" \
      > /dev/null 2>&1; then up=1; break; fi
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.5
  done
  if [ "$up" = 0 ]; then
    kill -KILL "$pid" 2> /dev/null || true
    wait "$pid" || true
    failed "serve ${src[*]}: not ready within 300 s: $(tail -1 "$log")"
    return 0
  fi
  echo "served, 64 clients, 256 x (512 + 128):"
  timeout 300 python3 "$LOADGEN" "http://127.0.0.1:$port" 256 64 512 128 auto 128000 || failed "loadgen 64 clients"
  echo "served, one client, 16 x (512 + 128):"
  timeout 120 python3 "$LOADGEN" "http://127.0.0.1:$port" 16 1 512 128 auto 128000 || failed "loadgen one client"
  kill -TERM "$pid" 2> /dev/null || true
  if wait "$pid"; then status=0; else status=$?; fi
  [ "$status" -eq 0 ] || failed "serve exited $status after SIGTERM: $log"
}

run_bench() {
  local m name
  split_settings "$ARGS"
  local envs=("${env_words[@]}") args=("${arg_words[@]}")
  have rocmforge || return 0
  for m in $(model_list); do
    section "bench $m -p $PROMPT -n ${GEN:-128} -r ${REPS:-3} --parallel ${PARALLEL:-1,64} ${ARGS}"
    model_source "$m" || continue
    name="$OUT/bench-$(safe "$m")"
    env "${envs[@]}" "$BIN/rocmforge" bench "${src[@]}" -p "$PROMPT" -n "${GEN:-128}" -r "${REPS:-3}" \
      --parallel "${PARALLEL:-1,64}" "${args[@]}" > "$name.md" 2> "$name.err" ||
      failed "bench $m: $(tail -1 "$name.err")"
    cat "$name.md"
    grep -iE "copy bandwidth|all-reduce" "$name.err" | tail -2 || true
    if [ "$SERVE" = 1 ]; then
      section "served $m: the engine's serving mode (bench --requests 256 --concurrency 64)"
      "$BIN/rocmforge" bench "${src[@]}" --requests 256 --concurrency 64 --input-len 512 --output-len 128 \
        --max-batch-tokens 2048 > "$name-serving.md" 2> "$name-serving.err" ||
        failed "bench serving mode $m: $(tail -1 "$name-serving.err")"
      grep -E "throughput|^\| (time|request)" "$name-serving.md" || true
      section "served $m: rocmforge serve under loadgen"
      served_rows "" "" "$BIN/rocmforge"
    fi
  done
}

# --- ab -------------------------------------------------------------------------
run_ab() {
  local rf_a="$BIN/rocmforge" rf_b="$BIN/rocmforge" round m side rf settings rows="$OUT/ab.tsv" line
  have rocmforge || return 0
  if [ -n "$BASE" ]; then
    unpack "$BASE"
    [ -x "$BASE/rocmforge" ] || { failed "ab: no rocmforge in $BASE"; return 0; }
    rf_a="$BASE/rocmforge"
  fi
  echo "A: $rf_a ${SIDE_A}"; echo "B: $rf_b ${SIDE_B}"; echo "both: ${ARGS}"
  : > "$rows"
  DUMMY=1
  for round in $(seq 1 "${REPS:-2}"); do
    for m in $(model_list); do
      model_source "$m"
      for side in A B; do
        if [ $side = A ]; then rf=$rf_a settings="$SIDE_A"; else rf=$rf_b settings="$SIDE_B"; fi
        if [ "$SERVE" = 1 ]; then
          section "round $round, $m, side $side: served"
          served_rows "$settings" "$ARGS" "$rf"
          continue
        fi
        split_settings "$settings $ARGS"
        if ! line="$(env "${env_words[@]}" timeout 300 "$rf" bench "${src[@]}" -p "$PROMPT" -n "${GEN:-128}" -r 1 \
          --parallel "${PARALLEL:-1}" "${arg_words[@]}" 2> "$OUT/ab-last.err")"; then
          failed "ab round $round $m side $side: $(tail -1 "$OUT/ab-last.err")"; continue
        fi
        # Table rows "| P | ppN | tok/s | ..." and "| P | tgN | ...".
        echo "$line" | awk -F'|' -v r="$round" -v m="$m" -v s="$side" -v rows="$rows" \
          '$3 ~ /^ *(pp|tg)[0-9]+ *$/ { gsub(/ /, "", $2); gsub(/ /, "", $3); gsub(/ /, "", $4);
             printf "round %s  %-24s %s  parallel %-3s %-7s %10s tok/s\n", r, m, s, $2, $3, $4;
             print m "\t" $2 "\t" $3 "\t" s "\t" $4 >> rows }'
      done
    done
  done
  [ "$SERVE" = 1 ] && return 0
  section "means over $((${REPS:-2})) rounds"
  python3 scripts/gpu_checks.py ab-means "$rows"
}

# --- profile --------------------------------------------------------------------
run_profile() {
  local m="$MODEL" name p="${PARALLEL:-1}" n="${GEN:-32}"
  have rocmforge || return 0
  split_settings "$ARGS"
  local bench=("$BIN/rocmforge" bench --load-format dummy -m "$m" -p "$PROMPT" -n "$n" -r 1 --parallel "$p"
               "${arg_words[@]}")
  name="$OUT/$WHAT-$(safe "$m-$p${KERNEL:+-$KERNEL}")"
  case "$WHAT" in
    ops)
      section "$m, parallel $p: the graphs' speed, then the op profile (ROCMFORGE_PROFILE=1, graphs off)"
      "${bench[@]}" 2>&1 | grep -E "^\| [0-9]+ \| (pp|tg)" || failed "bench $m"
      ROCMFORGE_PROFILE=1 "${bench[@]}" > "$name.txt" 2>&1 || failed "profiled bench $m: $(tail -1 "$name.txt")"
      grep -A40 "GPU op profile" "$name.txt" | head -60 || true ;;
    kernels)
      command -v ncu > /dev/null || { failed "ncu: not found"; return 0; }
      section "$m, parallel $p: Nsight Compute's GPU time by kernel (launches $SKIP.. +${COUNT:-400})"
      ncu --clock-control none --metrics gpu__time_duration.sum --csv ${KERNEL:+-k "regex:$KERNEL"} -s "$SKIP" \
        -c "${COUNT:-400}" "${bench[@]}" > "$name.csv" 2> "$name.err" || failed "ncu on $m: $(tail -1 "$name.err")"
      python3 scripts/ncu_summary.py "$name.csv" "$m parallel $p" 20 ;;
    kernel)
      command -v ncu > /dev/null || { failed "ncu: not found"; return 0; }
      local skip="$SKIP"
      if [ -n "$LONGEST" ]; then
        ncu --clock-control none --print-units base --csv --metrics gpu__time_duration.sum -k "regex:$KERNEL" \
          -c "$LONGEST" "${bench[@]}" > "$name-durations.csv" 2> /dev/null || failed "ncu durations of $KERNEL"
        skip="$(python3 scripts/gpu_checks.py longest "$name-durations.csv")"
        echo "launch $skip of the matching ones (durations: $name-durations.csv)"
      fi
      section "$m, parallel $p: $KERNEL, launches $skip.. +${COUNT:-1} (Nsight Compute)"
      ncu --clock-control none -k "regex:$KERNEL" -s "$skip" -c "${COUNT:-1}" --section SpeedOfLight \
        --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
        --section InstructionStats --section SchedulerStats \
        --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" "${bench[@]}" \
        > "$name.txt" 2>&1 || failed "ncu on $KERNEL: $(tail -1 "$name.txt")"
      grep -E "^  [a-z_]+.*\(|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|stalled|Executed Instructions|Issue Slots|L1/TEX Hit|L2 Hit|Grid Size|Dynamic Shared" \
        "$name.txt" | sed 's/  \+/ /g' | cut -c1-160 || true ;;
  esac
}

# --- tp -------------------------------------------------------------------------
run_tp() {
  export ROCMFORGE_REQUIRE="testdata,gpu,multi-gpu" NCCL_NVLS_ENABLE=0
  local nccl fam m
  nccl="$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2> /dev/null || true)"
  [ -n "$nccl" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl"
  have rocmforge && have test_gpu || return 0
  nvidia-smi topo -m 2> /dev/null | head -4 || true
  if [ "$SERVE" = 1 ]; then
    section "llama3-70b f16 (dummy weights) served at TP=2"
    src=(--load-format dummy -m llama3-70b:f16)
    served_rows "" "--tp 2 --device cuda:0,1 --max-num-batched-tokens 2048 -c 4096 --gpu-memory-utilization 0.95" \
      "$BIN/rocmforge"
    section "the all-reduce at the 70B shape (8192 wide)"
    timeout 300 "$BIN/rocmforge" bench --load-format dummy -m llama3-70b:f16 --tp 2 --device cuda:0,1 -p 128 -n 32 -r 1 \
      --parallel 1,64 --gpu-memory-utilization 0.95 2>&1 | grep -E "all-reduce|tg|pp|rror" || failed "bench llama3-70b TP=2"
    return 0
  fi
  FILTER='CudaTensorParallel*:*CudaTwoRanks*:-*Abort*' tests_gtest_filtered
  # Alone, last: if an abort did not release a rank, the test exits the binary.
  FILTER='CudaTensorParallel.*Abort*' tests_gtest_filtered
  # (--report-api-errors no: NCCL probes the runtime and clears the errors it expects.)
  section "compute-sanitizer memcheck: the all-reduce, the sampler, one model"
  if timeout 600 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$BIN/test_gpu" \
    --gtest_filter='CudaTensorParallel.AllReduce*:CudaTensorParallel.Vocabulary*:*CudaTwoRanks*/stories260K' \
    > "$OUT/sanitizer-tp.log" 2>&1; then :; else failed "memcheck on the tensor-parallel tests: $OUT/sanitizer-tp.log"; fi
  grep -E "ERROR SUMMARY" "$OUT/sanitizer-tp.log" | tail -1 || true
  section "eval: TP=2 against TP=1 (first-step logits, greedy tokens)"
  for fam in $TINY_FAMILIES; do
    m="$TD/arch/tiny-$fam.gguf"
    "$BIN/rocmforge" eval -m "$m" --prompts "$TD/arch/prompts.txt" -n 16 --device cuda:0 > "$MODELS/tp1-$fam.jsonl" \
      2> /dev/null || failed "eval $fam TP=1"
    "$BIN/rocmforge" eval -m "$m" --prompts "$TD/arch/prompts.txt" -n 16 --device cuda:0,1 --tp 2 \
      > "$MODELS/tp2-$fam.jsonl" 2> "$MODELS/tp2-$fam.err" || failed "eval $fam TP=2: $(tail -1 "$MODELS/tp2-$fam.err")"
    python3 scripts/gpu_checks.py ranks "$MODELS/tp1-$fam.jsonl" "$MODELS/tp2-$fam.jsonl" "$fam" ||
      failed "eval $fam: missing output"
  done
  section "eval: synthetic llama3-8b f16 (a mkmodel file), TP=2 against TP=1"
  DUMMY=0
  if model_source llama3-8b:f16; then
    "$BIN/rocmforge" eval "${src[@]}" --prompts "$TD/arch/prompts.txt" -n 16 --device cuda:0 > "$MODELS/tp1-l8.jsonl" \
      2> /dev/null || failed "eval llama3-8b TP=1"
    "$BIN/rocmforge" eval "${src[@]}" --prompts "$TD/arch/prompts.txt" -n 16 --device cuda:0,1 --tp 2 \
      > "$MODELS/tp2-l8.jsonl" 2> /dev/null || failed "eval llama3-8b TP=2"
    python3 scripts/gpu_checks.py ranks "$MODELS/tp1-l8.jsonl" "$MODELS/tp2-l8.jsonl" llama3-8b ||
      failed "eval llama3-8b: missing output"
  fi
  section "stories260K's perplexity at TP=2 against the CPU"
  ppl_against_cpu --device cuda:0,1 --tp 2
  section "llama3-8b f16 (dummy weights): TP=1 (cuda:0), then TP=2 (cuda:0,1)"
  for m in "--device cuda:0" "--device cuda:0,1 --tp 2"; do
    timeout 300 "$BIN/rocmforge" bench --load-format dummy -m llama3-8b:f16 -p 512 -n 128 -r 3 --parallel 1,64 $m \
      2> "$OUT/bench-tp.err" | grep -E "^\| [0-9]+ \|" || failed "bench llama3-8b $m: $(tail -1 "$OUT/bench-tp.err")"
    grep -E "all-reduce" "$OUT/bench-tp.err" || true
  done
}

case "$verb" in
  tests) run_tests ;;
  bench) run_bench ;;
  ab) run_ab ;;
  profile) run_profile ;;
  tp) run_tp ;;
esac
finish
