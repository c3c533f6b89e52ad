#!/usr/bin/env bash
# On the GPU machine: run the GPU tests, the golden check through
# `rocmforge run --device cuda`, and benchmarks on synthetic llama3-8b models
# (stage bench-families: every family's preset, issue 12's table; stages tp,
# tp-serve and tp-speed: tensor parallelism on two GPUs, issue 17; stage
# portable: the portable kernel variants beside the normal build, issue 18;
# stage fp8: FP8 weights, stage prefill-mma: tensor-core prefill attention,
# stage issue16: the issue's table beside a previous build; stage
# decode-pv: decode attention's P.V on tensor cores, issue 16; stage
# attn-splits: batch-1 decode against the attention's split count; stage
# attn-cluster: the splits summed by a cluster of their blocks; stage
# moe-profile: per-kernel time of MoE steps, issue 13; stage fused-q8:
# 8-bit activations written by the norm / combine, issue 16; stages
# fusions and fusions-bench: q/k norms inside RoPE, the MoE router with its
# routing, one token's expert down GEMVs streaming; stage short-rows:
# short expert down rows in lane groups; stage router: the MoE router
# kernel beside a previous build; stage moe-down: one token's expert down
# projections and their weighted sum in one launch, off against on; stage
# serve-budget: the serving benchmark against the engine's token budget
# per step; stage prefill-split: prefill query tiles split over their
# keys, off against on; stage wgmma: 64-sequence q4_k_m decode of each
# family on the wgmma matmul against the mma.sync one; stage ab: batch-1
# decode of a build against the one before it, alternated; stage
# expert-groups: one token's 2,048-wide expert rows in lane groups of 16
# against whole warps; stage switch: batch-1 decode under settings of any
# switch, alternated; stage h200-table: the tests, issue 16's table and
# issue 12's batch-1 table, only on an H200; stage attn-profile: decode
# attention's stall reasons and SASS).
# Expects binaries in .carry/bin and test data in .carry/testdata (see
# docs/GPU.md). Results go to $OUT (or /tmp/rf-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/rf-out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export ROCMFORGE_TESTDATA="$PWD/.carry/testdata" ROCMFORGE_REQUIRE_GPU=1
BIN="${RF_BIN:-.carry/bin}"  # RF_BIN: another build's binaries (before/after comparisons)
stage="${1:-all}"
MODELS="${RF_MODELS:-/tmp/rf-models}"
mkdir -p "$MODELS"

# stories260K's golden text through `rocmforge run --device cuda` of the
# binaries in directory $1.
golden_check() {
  RF_BIN="$1" python3 - <<'PY'
import json, subprocess, os
bad = 0
for line in open(os.environ["ROCMFORGE_TESTDATA"] + "/stories260K.golden.jsonl"):
    g = json.loads(line)
    out = subprocess.run([os.environ["RF_BIN"] + "/rocmforge", "run", "--device", "cuda", "--temp", "0", "-n", str(len(g["greedy_tokens"])),
                          "--no-display-prompt", "-p", g["prompt"],
                          "-m", os.environ["ROCMFORGE_TESTDATA"] + "/stories260K.gguf"], capture_output=True, text=True)
    text = out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout
    ok = text == g["greedy_text"]
    bad += not ok
    print("MATCH" if ok else "DIFF", repr(g["prompt"]), out.stderr.strip().splitlines()[-1:] )
print("golden mismatches:", bad)
PY
}

# A previous build's rocmforge in directory $1, carried xz-packed
# (rocmforge.xz) to fit a call's 64 MB: unpacked once, made executable.
previous_build() {
  if [ -f "$1/rocmforge.xz" ] && [ ! -f "$1/rocmforge" ]; then unxz -k "$1/rocmforge.xz"; fi
  chmod +x "$1/rocmforge"
}

# The GPU tests matching gtest filter $1 (attention and the models over it).
attention_tests() {
  echo "== attention tests"
  "$BIN/test_gpu" --gtest_filter="$1" > "$OUT/test_gpu_attn.log" 2>&1
  echo "test_gpu attention rc=$?"
  grep -E "^\[  FAILED|PASSED|Failure|tests ran" "$OUT/test_gpu_attn.log" | head -30
}

# compute-sanitizer racecheck and memcheck over two attention cases with
# prefill on tensor cores (their small steps split tiles over their keys);
# logs named after $1.
sanitize_prefill() {
  echo "== compute-sanitizer racecheck and memcheck, tensor-core prefill"
  for tool in racecheck memcheck; do
    ROCMFORGE_PREFILL_MMA=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/test_gpu" \
      --gtest_filter='*CudaAttention.MatchesCpuOnMixedBatch/hd128_h32_kv8:*CudaAttention.MatchesCpuOnMixedBatch/hd256_h16_kv8_win100_cap' \
      > "$OUT/sanitizer-$1-$tool.log" 2>&1
    echo "$tool rc=$?"; grep -E "ERROR SUMMARY|hazard" "$OUT/sanitizer-$1-$tool.log" | tail -2
  done
}

# Batch-1 decode (tg128 after a prompt of $1 tokens) of each model in $2,
# two rounds, with each of the environment settings "$3" ... alternated
# (each setting: space-separated VAR=VALUE words).
alternated_b1() {
  local prompt=$1 models=$2 round model setting
  shift 2
  for round in 1 2; do
    for model in $models; do
      for setting in "$@"; do
        printf "round %s %-22s %s " "$round" "$model" "$setting"
        env $setting "$BIN/rocmforge" bench --load-format dummy -m "$model" -p "$prompt" -n 128 -r 1 --parallel 1 \
          2>/dev/null | grep -E "^\| [0-9]+ \| tg" | awk -F'|' '{print $4 " tok/s"}'
      done
    done
  done
}

# gpu_carry.sh packs the test binaries with xz: unpacked beside them once
# (here, for every stage).
unpack_tests() {
  local t
  for t in test_gpu test_gpu_serial; do
    if [ -f "$BIN/$t.xz" ] && [ ! -f "$BIN/$t" ]; then
      unxz -k "$BIN/$t.xz" && chmod +x "$BIN/$t"
    fi
  done
}
unpack_tests

# test_gpu in RF_TEST_SHARDS (default 6) processes at once, gtest's shards
# (the GPU tests may run in parallel and in any order: this checks that
# too; one process took ~5 minutes, three 166 s for the slowest shard on the
# H100). Logs
# $OUT/test_gpu.N.log; prints each shard's result; fails if any failed.
sharded_test_gpu() {
  local n="${RF_TEST_SHARDS:-6}" i rc=0 pids=()
  unpack_tests
  for i in $(seq 0 $((n - 1))); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i "$BIN/test_gpu" > "$OUT/test_gpu.$i.log" 2>&1 &
    pids+=($!)
  done
  for i in $(seq 0 $((n - 1))); do
    wait "${pids[$i]}" || rc=1
    echo "test_gpu shard $i/$n: $(grep -E "^\[  (PASSED|FAILED)  \]" "$OUT/test_gpu.$i.log" | head -1)"
    grep -E "^\[  FAILED  \] [A-Za-z]|Failure" "$OUT/test_gpu.$i.log" | head -20
  done
  return $rc
}

if [ "$stage" = ctest ]; then
  # ctest -L gpu over the build tree's test lists (carried in .carry/ctest;
  # they hold this checkout's absolute paths).
  mkdir -p build/cuda && cp -r .carry/ctest/. build/cuda/
  unpack_tests
  mkdir -p build/cuda/tests && cp "$BIN/test_gpu" "$BIN/test_gpu_serial" build/cuda/tests/
  ctest --test-dir build/cuda -L gpu -j 4 --output-on-failure > "$OUT/ctest_gpu.log" 2>&1; echo "ctest -L gpu rc=$?"
  grep -E "tests passed|tests failed|Total Test" "$OUT/ctest_gpu.log"
fi

if [ "$stage" = all ] || [ "$stage" = tests ]; then
  echo "== gpu tests"
  sharded_test_gpu; echo "test_gpu rc=$?"
  # test_gpu_serial (allocation counting, graphs: one process alone), carried
  # as is or xz-packed (gpu_carry.sh's binaries fill most of a call's 64 MB).
  unpack_tests
  if [ -f "$BIN/test_gpu_serial" ]; then
    timeout 300 "$BIN/test_gpu_serial" > "$OUT/test_gpu_serial.log" 2>&1; echo "test_gpu_serial rc=$?"
    grep -E "^\[  (PASSED|FAILED)  \]" "$OUT/test_gpu_serial.log" | head -5
  else
    echo "test_gpu_serial rc=1 (not carried)"
  fi
  echo "== golden through rocmforge run --device cuda"
  golden_check "$BIN"
  echo "== perplexity of stories.txt (stories260K): the GPU against the CPU"
  "$BIN/rocmforge" perplexity -m "$ROCMFORGE_TESTDATA/stories260K.gguf" -f "$ROCMFORGE_TESTDATA/stories.txt" -c 128 \
    --device cpu --kl-divergence-base "$MODELS/ppl-cpu.bin" 2>/dev/null | tail -1
  "$BIN/rocmforge" perplexity -m "$ROCMFORGE_TESTDATA/stories260K.gguf" -f "$ROCMFORGE_TESTDATA/stories.txt" -c 128 \
    --device cuda --kl-divergence-base "$MODELS/ppl-cpu.bin" --kl-divergence 2>&1 | tail -4
fi

if [ "$stage" = all ] || [ "$stage" = bench ]; then
  for t in ${RF_TYPES:-f16 q4_k_m}; do
    f="$MODELS/llama3-8b-$t.gguf"
    [ -f "$f" ] || { /usr/bin/time -f "mkmodel $t: %e s" "$BIN/rocmforge" mkmodel --preset llama3-8b --type "$t" -o "$f" 2>&1 | tail -2; ls -la "$f"; }
    echo "== bench llama3-8b $t"
    "$BIN/rocmforge" bench -m "$f" -p 512 -n 128 -r "${RF_REPS:-3}" --parallel "${RF_PARALLEL:-1,64}" 2>"$OUT/bench-$t.err" | tee "$OUT/bench-$t.md"
    tail -3 "$OUT/bench-$t.err"
  done
fi

if [ "$stage" = fp8 ]; then
  # FP8 weights (issue 16): their GPU tests, then llama3-8b-shaped dummy
  # weights in f16 and FP8 (batches past 256 rows, prefill, by dequantize +
  # BLAS and by FP8 tensor cores), and the KL divergence of FP8 against f16.
  echo "== FP8 GPU tests"
  "$BIN/test_gpu" --gtest_filter='*f8_e4m3_row*:*fp8*:*Fp8*' > "$OUT/test_gpu_fp8.log" 2>&1; echo "test_gpu fp8 rc=$?"
  grep -E "^\[  FAILED|PASSED|Failure|tests ran" "$OUT/test_gpu_fp8.log" | head -30
  for run in ${RF_FP8_RUNS:-"f16 0" "fp8 0" "fp8 9" "fp8 257"}; do
    set -- $run
    echo "== bench llama3-8b:$1 (ROCMFORGE_FP8_GEMM_ROWS=$2)"
    ROCMFORGE_FP8_GEMM_ROWS=$2 "$BIN/rocmforge" bench --load-format dummy -m "llama3-8b:$1" -p 512 -n 128 \
      -r "${RF_REPS:-2}" --parallel "${RF_PARALLEL:-1,64}" 2>"$OUT/bench-fp8-$1-$2.err" | tee "$OUT/bench-fp8-$1-$2.md"
    tail -2 "$OUT/bench-fp8-$1-$2.err"
  done
  # FP8 rows are half as wide in bytes as f16 ones: the bulk-copying GEMV's
  # rows-per-block rule (by bytes) gives them 2 per block; 4 beside it.
  echo "== bench llama3-8b:fp8 batch 1, ROCMFORGE_GEMV_TMA_ROWS=4"
  ROCMFORGE_GEMV_TMA_ROWS=4 "$BIN/rocmforge" bench --load-format dummy -m llama3-8b:fp8 -p 64 -n 128 \
    -r "${RF_REPS:-2}" --parallel 1 2>/dev/null | grep -E "^\| [0-9]+ \| tg"
  text="$MODELS/ppl.txt"
  for i in $(seq 1 40); do cat "$ROCMFORGE_TESTDATA/stories.txt"; done > "$text"
  "$BIN/rocmforge" perplexity --load-format dummy -m llama3-8b:f16 -f "$text" -c 512 --chunks 8 \
    --kl-divergence-base "$MODELS/kld-f16.bin" 2>&1 | tail -1
  for rows in 0 9; do
    echo "== KL divergence of llama3-8b:fp8 against :f16 (ROCMFORGE_FP8_GEMM_ROWS=$rows)"
    ROCMFORGE_FP8_GEMM_ROWS=$rows "$BIN/rocmforge" perplexity --load-format dummy -m llama3-8b:fp8 -f "$text" -c 512 \
      --chunks 8 --kl-divergence-base "$MODELS/kld-f16.bin" --kl-divergence 2>&1 | tail -3
  done
fi

if [ "$stage" = h200-table ]; then
  # The tables the issues measure on an H200, in one call: a call that names
  # nvidia-h200 may still get an H100, so any other card stops here at once
  # (only the machine's start spent). RF_OLD as for issue16.
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  case "$name" in
    *H200*) echo "== $name" ;;
    *) echo "$name: not an H200, nothing run"; exit 0 ;;
  esac
  bash scripts/gpu_check.sh tests
  RF_REPS="${RF_REPS:-2}" bash scripts/gpu_check.sh issue16
  RF_PARALLEL=1 RF_REPS=1 bash scripts/gpu_check.sh bench-families
fi

if [ "$stage" = issue16 ]; then
  # Issue 16's table in one call, this build beside a previous one
  # (RF_OLD, default .carry/old: its rocmforge, carried by hand): llama3-8b
  # dummy weights f16 and q4_k_m, bench -p 512 -n 128 --parallel 1,64, then
  # served through `serve` + loadgen (64 clients, 256 x (512 + 128); one
  # client, 16 requests).
  OLD="${RF_OLD:-.carry/old}"
  previous_build "$OLD"
  for t in f16 q4_k_m; do
    for b in "$OLD" "$BIN"; do
      echo "== $b llama3-8b:$t"
      timeout 100 "$b/rocmforge" bench --load-format dummy -m "llama3-8b:$t" -p 512 -n 128 -r "${RF_REPS:-2}" \
        --parallel 1,64 2>/dev/null | grep -E "^\| [0-9]+ \| (pp|tg)"
    done
  done
  for b in "$OLD" "$BIN"; do
    echo "== $b served, llama3-8b:f16"
    "$b/rocmforge" serve --load-format dummy -m llama3-8b:f16 --port 8080 --max-num-seqs 64 > "$OUT/serve.log" 2>&1 &
    pid=$!
    for i in $(seq 1 120); do
      python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/health')" >/dev/null 2>&1 && break
      sleep 1
    done
    python3 .carry/tools/loadgen.py http://127.0.0.1:8080 256 64 512 128 auto 128000
    python3 .carry/tools/loadgen.py http://127.0.0.1:8080 16 1 512 128 auto 128000
    kill -TERM $pid; wait $pid
  done
fi

if [ "$stage" = prefill-mma ]; then
  # Prefill attention on tensor cores (issue 16): the attention tests (both
  # kernels), then prefill speed with ROCMFORGE_PREFILL_MMA=0 and 1 alternated.
  attention_tests '*CudaAttention*:*CudaKvFp8*:*CudaModel*:*CudaEngineBatch*'
  sanitize_prefill prefill
  for round in 1 2; do
    for mma in 0 1; do
      for shape in "512 1,64" "4096 1"; do
        set -- $shape
        echo "== round $round, ROCMFORGE_PREFILL_MMA=$mma, prompt $1, parallel $2"
        ROCMFORGE_PREFILL_MMA=$mma "$BIN/rocmforge" bench --load-format dummy -m "${RF_PRESET:-llama3-8b}:f16" -p "$1" \
          -n 16 -r 1 --parallel "$2" 2>/dev/null | grep -E "^\| [0-9]+ \| pp"
      done
    done
  done
fi

if [ "$stage" = decode-pv ]; then
  # Decode attention's P.V on tensor cores (issue 16): the attention, model
  # and engine tests, memcheck and racecheck on the decode kernel (head sizes
  # 128 and 256 with window + soft-cap), then decode beside a previous build
  # (RF_OLD, default .carry/old) alternated: llama3-8b f16 and q4_k_m, and
  # phi3-mini (MHA, head size 96) and gemma2-9b (256, soft-cap) f16.
  # RF_KV=fp8: the e4m3 cache's kernels under the sanitizers, and every
  # bench with --kv-cache-dtype fp8.
  OLD="${RF_OLD:-.carry/old}"
  previous_build "$OLD"
  kv_args=() sanitize_cases='*CudaAttention.MatchesCpuOnMixedBatch/hd128_h32_kv8:*CudaAttention.MatchesCpuOnMixedBatch/hd256_h16_kv8_win100_cap'
  if [ "${RF_KV:-}" = fp8 ]; then
    kv_args=(--kv-cache-dtype fp8)
    sanitize_cases='*CudaKvFp8Attention.MatchesCpuOverTheSameCache/hd128_h32_kv8:*CudaKvFp8Attention.MatchesCpuOverTheSameCache/hd256_h16_kv8_win100_cap'
  fi
  "$BIN/test_gpu" --gtest_filter='*CudaAttention*:*CudaKvFp8*:*CudaModel*:*CudaEngineBatch*' > "$OUT/test_gpu_decode_pv.log" 2>&1
  echo "attention, model and engine tests rc=$?"; grep -E "^\[  FAILED|PASSED|Failure" "$OUT/test_gpu_decode_pv.log" | head -10
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/test_gpu" --gtest_filter="$sanitize_cases" \
      > "$OUT/sanitizer-decode-pv-$tool.log" 2>&1
    echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer-decode-pv-$tool.log" | tail -1
  done
  run_bench() {  # binary dir, model, parallel
    printf "%-12s %-18s " "$1" "$2"
    timeout 100 "$1/rocmforge" bench --load-format dummy -m "$2" -p 512 -n 128 -r 1 --parallel "$3" "${kv_args[@]}" 2>/dev/null |
      grep -E "^\| [0-9]+ \| tg" | awk -F'|' '{printf "%s seqs %s tok/s  ", $2, $4}'
    echo
  }
  for round in 1 2; do
    for t in f16 q4_k_m; do
      for b in "$OLD" "$BIN"; do run_bench "$b" "llama3-8b:$t" 1,16,64; done
    done
  done
  for p in phi3-mini gemma2-9b; do
    for b in "$OLD" "$BIN"; do run_bench "$b" "$p:f16" 1,64; done
  done
fi

if [ "$stage" = fused-q8 ]; then
  # Batch-1 k-quant GEMVs reading 8-bit activations written by the add +
  # RMSNorm and the attention combine before them (ROCMFORGE_FUSED_Q8,
  # issue 16): the test, memcheck on it, batch-1 perplexity of a llama3-8b
  # q4_k_m with it off and on (the same bits: KL divergence 0), then
  # batch-1 decode alternated on dense and MoE q4_k_m presets and f16
  # (RF_MODELS_Q8). ~6 minutes.
  "$BIN/test_gpu" --gtest_filter='*CudaFusedQ8*:*KQuantGemv*' > "$OUT/test_gpu_fused_q8.log" 2>&1
  echo "tests rc=$?"; grep -E "^\[  FAILED|PASSED|Failure" "$OUT/test_gpu_fused_q8.log" | head -10
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu" --gtest_filter='*CudaFusedQ8*' \
    > "$OUT/sanitizer-fused-q8.log" 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/sanitizer-fused-q8.log" | tail -1
  text="$MODELS/ppl.txt"
  for i in $(seq 1 40); do cat "$ROCMFORGE_TESTDATA/stories.txt"; done > "$text"
  ROCMFORGE_FUSED_Q8=0 "$BIN/rocmforge" perplexity --load-format dummy -m llama3-8b:q4_k_m -f "$text" -c 128 -b 1 \
    --chunks 2 --kl-divergence-base "$MODELS/q8-base.bin" 2>&1 | tail -1
  ROCMFORGE_FUSED_Q8=1 "$BIN/rocmforge" perplexity --load-format dummy -m llama3-8b:q4_k_m -f "$text" -c 128 -b 1 \
    --chunks 2 --kl-divergence-base "$MODELS/q8-base.bin" --kl-divergence 2>&1 | tail -3
  # (f16: the norms write quants no GEMV reads; what that costs.)
  alternated_b1 64 "${RF_MODELS_Q8:-llama3-8b:q4_k_m qwen3-30b-a3b:q4_k_m llama3-8b:f16}" \
    ROCMFORGE_FUSED_Q8=0 ROCMFORGE_FUSED_Q8=1
fi

if [ "$stage" = fusions ]; then
  # Three launch savers (issues 12, 13, 16; on by default since measured):
  # the per-head q/k norms inside the RoPE + KV store kernel
  # (ROCMFORGE_FUSED_QK_ROPE: Qwen3, Gemma 3) and one token's MoE router
  # GEMV + routing in one launch (ROCMFORGE_FUSED_MOE_ROUTER), and one
  # token's expert down GEMVs on the streaming kernel
  # (ROCMFORGE_KQ_STREAM_EXPERT_ROWS). Their unit tests, the model tests
  # with all on (the env overrides every backend's options), memcheck
  # (~3 minutes); stage fusions-bench: batch-1 decode alternated off / on
  # (~7 minutes).
  "$BIN/test_gpu" --gtest_filter='*CudaQkNormRope*:*RouterAndRouteInOneLaunch*:*CudaFusedQ8*:*CudaMoeFfn*' \
    > "$OUT/test_gpu_fusions.log" 2>&1
  echo "unit tests rc=$?"; grep -E "^\[  FAILED|PASSED|Failure" "$OUT/test_gpu_fusions.log" | head -10
  ROCMFORGE_FUSED_QK_ROPE=1 ROCMFORGE_FUSED_MOE_ROUTER=1 ROCMFORGE_KQ_STREAM_EXPERT_ROWS=1 "$BIN/test_gpu" \
    --gtest_filter='*CudaModelVsCpu*qwen3*:*CudaModelVsCpu*gemma3*:*CudaModelVsCpu*mixtral*:*CudaFamilyWidths*qwen3*:*CudaFamilyWidths*gemma3*:*CudaFamilyWidths*mixtral*:*Engine*' \
    > "$OUT/test_gpu_fusions_on.log" 2>&1
  echo "model tests with all on rc=$?"; grep -E "^\[  FAILED|PASSED|Failure" "$OUT/test_gpu_fusions_on.log" | head -10
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu" \
    --gtest_filter='*CudaQkNormRope*:*RouterAndRouteInOneLaunch*:*MoeGateUp*:*CudaMoeFfn*stream_rows*' \
    > "$OUT/sanitizer-fusions.log" 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/sanitizer-fusions.log" | tail -1
fi

if [ "$stage" = fusions-bench ]; then
  # (llama3-8b: none of the three applies, the noise level.)
  alternated_b1 64 "${RF_MODELS_FUSIONS:-llama3-8b:q4_k_m qwen3-8b:q4_k_m qwen3-30b-a3b:q4_k_m mixtral-8x7b-4l:q4_k_m}" \
    "ROCMFORGE_FUSED_QK_ROPE=0 ROCMFORGE_FUSED_MOE_ROUTER=0 ROCMFORGE_KQ_STREAM_EXPERT_ROWS=0" \
    "ROCMFORGE_FUSED_QK_ROPE=1 ROCMFORGE_FUSED_MOE_ROUTER=1 ROCMFORGE_KQ_STREAM_EXPERT_ROWS=1"
fi


if [ "$stage" = short-rows ]; then
  # One token's expert down GEMVs on rows shorter than a warp's lanes have
  # chunks (Qwen3-MoE's 768), the warp in lane groups
  # (ROCMFORGE_KQ_STREAM_SHORT_ROWS, on by default): its MoE FFN cases, the
  # MoE model tests with it on, memcheck, then batch-1 decode alternated
  # (~4 minutes).
  "$BIN/test_gpu" --gtest_filter='*CudaMoeFfn*' > "$OUT/test_gpu_short.log" 2>&1
  echo "MoE FFN tests rc=$?"; grep -E "^\[  FAILED|PASSED|Failure|_short|rel. L2" "$OUT/test_gpu_short.log" | head -20
  ROCMFORGE_KQ_STREAM_SHORT_ROWS=1 "$BIN/test_gpu" --gtest_filter='*qwen3moe*:*mixtral*:*Engine*' \
    > "$OUT/test_gpu_short_on.log" 2>&1
  echo "MoE model tests with it on rc=$?"; grep -E "^\[  FAILED|PASSED|Failure" "$OUT/test_gpu_short_on.log" | head -10
  # Batch-1 next-token distributions of qwen3-30b-a3b (768-wide down rows)
  # on against off: KL divergence (8-bit GLU outputs: small, not 0).
  text="$MODELS/ppl.txt"
  for i in $(seq 1 40); do cat "$ROCMFORGE_TESTDATA/stories.txt"; done > "$text"
  ROCMFORGE_KQ_STREAM_SHORT_ROWS=0 "$BIN/rocmforge" perplexity --load-format dummy -m qwen3-30b-a3b:q4_k_m -f "$text" \
    -c 128 -b 1 --chunks 2 --kl-divergence-base "$MODELS/short-base.bin" 2>&1 | tail -1
  ROCMFORGE_KQ_STREAM_SHORT_ROWS=1 "$BIN/rocmforge" perplexity --load-format dummy -m qwen3-30b-a3b:q4_k_m -f "$text" \
    -c 128 -b 1 --chunks 2 --kl-divergence-base "$MODELS/short-base.bin" --kl-divergence 2>&1 | tail -3
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu" --gtest_filter='*CudaMoeFfn*short*' \
    > "$OUT/memcheck-short.log" 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck-short.log" | tail -1
  alternated_b1 64 "${RF_MODELS_SHORT:-qwen3-30b-a3b:q4_k_m}" ROCMFORGE_KQ_STREAM_SHORT_ROWS=0 ROCMFORGE_KQ_STREAM_SHORT_ROWS=1
fi

if [ "$stage" = attn-splits ]; then
  # Batch-1 decode against the decode attention's slicing of the context:
  # by default 2 blocks per SM (ROCMFORGE_ATTN_BLOCKS), at least 32 keys a
  # slice (ROCMFORGE_ATTN_MIN_SPLIT) and at most 8 slices, summed by a
  # cluster of their blocks (ROCMFORGE_ATTN_CLUSTER; stage attn-cluster).
  # Alternated, f16.
  alternated_b1 512 "$(for p in ${RF_PRESETS:-llama3-8b phi3-mini}; do echo "$p:f16"; done)" \
    $(for m in ${RF_MIN_SPLITS:-32 64 128}; do echo "ROCMFORGE_ATTN_MIN_SPLIT=$m"; done)
fi

if [ "$stage" = attn-cluster ]; then
  # Decode attention's key slices summed by a thread-block cluster of
  # their blocks (ROCMFORGE_ATTN_CLUSTER, default 8) against the combine
  # kernel (0): the attention and 8-bit-activation tests, memcheck and
  # racecheck of the cluster's own test, then batch-1 decode after 512
  # prompt tokens alternated 0 / 8 / 16.
  "$BIN/test_gpu" --gtest_filter='*CudaAttention*:*CudaFusedQ8*:*Fp8*' > "$OUT/test_gpu_attn.log" 2>&1
  echo "attention tests rc=$?"; grep -E "^\[  FAILED|PASSED|Failure" "$OUT/test_gpu_attn.log" | head -10
  cluster_tests='*DecodeClusterSum*/hd128_h32_kv8:*DecodeClusterSum*/hd96_h32_kv32:*DecodeClusterSum*/hd256_h16_kv8_win100_cap'
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu" \
    --gtest_filter="$cluster_tests" > "$OUT/memcheck-attn-cluster.log" 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck-attn-cluster.log" | tail -1
  timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_gpu" \
    --gtest_filter='*DecodeClusterSum*/hd64_h8_kv8' > "$OUT/racecheck-attn-cluster.log" 2>&1
  echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY" "$OUT/racecheck-attn-cluster.log" | tail -1
  alternated_b1 512 "${RF_CLUSTER_MODELS:-llama3-8b:q4_k_m phi3-mini:f16 qwen3-30b-a3b:q4_k_m}" \
    ROCMFORGE_ATTN_CLUSTER=0 ROCMFORGE_ATTN_CLUSTER=8 ROCMFORGE_ATTN_CLUSTER=16
fi

if [ "$stage" = moe-profile ]; then
  # Where a mixture-of-experts step's GPU time goes (issue 13): Nsight
  # Compute's per-kernel time, summed by kernel, on the 4-layer
  # qwen3-30b-a3b preset (q4_k_m dummy weights): decode steps at batch 1
  # and 64 (launches 2000..2600, past the weights' fill and the warm-up's
  # prefill), then the expert kernels of the first prefill chunks of 64 x
  # 512 tokens.
  m=qwen3-30b-a3b-4l:q4_k_m
  for P in 1 64; do
    ncu --clock-control none --metrics gpu__time_duration.sum --csv -s 2000 -c 600 \
      "$BIN/rocmforge" bench --load-format dummy -m $m -p 512 -n 64 -r 1 --parallel $P > "$OUT/ncu-moe-$P.csv" 2>/dev/null
    python3 scripts/ncu_summary.py "$OUT/ncu-moe-$P.csv" "$m decode, parallel $P" 14
  done
  ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:"mma_matmul|moe_" -c 60 \
    "$BIN/rocmforge" bench --load-format dummy -m $m -p 512 -n 8 -r 1 --parallel 64 > "$OUT/ncu-moe-prefill.csv" 2>/dev/null
  python3 scripts/ncu_summary.py "$OUT/ncu-moe-prefill.csv" "$m prefill 64 x 512, expert kernels" 14
fi

if [ "$stage" = wgmma ]; then
  # Batched decode on k-quant weights (issues 16 and 12): each family's
  # q4_k_m preset (RF_PRESETS; dummy weights) at 64 sequences on Hopper's
  # wgmma matmul (gemm_wgmma.cu) and on the mma.sync one (ROCMFORGE_WGMMA=0),
  # alternated; then the kernels' test under compute-sanitizer memcheck.
  # About 40 s a run, mostly the dummy weights' fill: pick presets to fit.
  for p in ${RF_PRESETS:-llama3-8b qwen2.5-7b qwen3-8b gemma2-9b gemma3-12b phi3-mini glm4-9b}; do
    for w in 1 0; do
      timeout 90 env ROCMFORGE_WGMMA=$w "$BIN/rocmforge" bench --load-format dummy -m "$p:q4_k_m" -p 512 -n 128 \
        -r 1 --parallel 64 2>&1 | grep -E "generation" | sed "s/^/$p wgmma=$w /"
    done
  done
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu" \
    --gtest_filter='*KQuantTensorCoreMatmulKernels*' > "$OUT/sanitizer-wgmma.log" 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/sanitizer-wgmma.log" | tail -1
fi

if [ "$stage" = ab ]; then
  # A build against the one before it (any issue): batch-1 decode (or
  # RF_PARALLEL sequences) of RF_PRESETS (preset:type), two rounds, the
  # previous build's rocmforge (RF_BASE, default .carry/base; an xz-packed
  # rocmforge.xz there is unpacked) alternated with $BIN's.
  base="${RF_BASE:-.carry/base}"
  previous_build "$base"
  for round in 1 2; do
    for model in ${RF_PRESETS:-llama3-8b:q4_k_m}; do
      for b in "$base" "$BIN"; do
        printf "round %s %-22s %-12s " "$round" "$model" "$b"
        timeout 120 "$b/rocmforge" bench --load-format dummy -m "$model" -p 512 -n 128 -r 1 \
          --parallel "${RF_PARALLEL:-1}" 2>/dev/null | grep -E "^\| [0-9]+ \| tg" | awk -F'|' '{print $4 " tok/s"}'
      done
    done
  done
fi

if [ "$stage" = expert-groups ]; then
  # ROCMFORGE_KQ_STREAM_EXPERT_GROUPS (issue 13): the MoE tests with lane
  # groups and whole warps under compute-sanitizer memcheck, each expert
  # GEMV alone (Nsight Compute, qwen3-30b-a3b-4l batch 1), batch-1 decode
  # alternated.
  for g in 1 0; do
    ROCMFORGE_KQ_STREAM_EXPERT_GROUPS=$g timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$BIN/test_gpu" --gtest_filter='*Moe*' > "$OUT/sanitizer-expert-groups-$g.log" 2>&1
    echo "memcheck groups=$g rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer-expert-groups-$g.log" | tail -3
  done
  for g in 0 1; do
    ROCMFORGE_KQ_STREAM_EXPERT_GROUPS=$g timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      -k regex:gemv_stream -s 100 -c 24 "$BIN/rocmforge" bench --load-format dummy -m qwen3-30b-a3b-4l:q4_k_m -p 64 \
      -n 64 -r 1 --parallel 1 > "$OUT/ncu-expert-groups-$g.csv" 2>/dev/null
    python3 scripts/ncu_summary.py "$OUT/ncu-expert-groups-$g.csv" "streaming GEMVs, expert groups=$g" 8
  done
  alternated_b1 512 "qwen3-30b-a3b:q4_k_m mixtral-8x7b-4l:q4_k_m" ROCMFORGE_KQ_STREAM_EXPERT_GROUPS=0 \
    ROCMFORGE_KQ_STREAM_EXPERT_GROUPS=1
fi

if [ "$stage" = switch ]; then
  # Any switch (issues 12, 13, 16): batch-1 decode of RF_PRESETS
  # (preset:type) under each of RF_SETTINGS (space-separated VAR=value, one
  # setting each), alternated, two rounds; RF_PROMPT prompt tokens (512).
  alternated_b1 "${RF_PROMPT:-512}" "${RF_PRESETS:-llama3-8b:q4_k_m}" ${RF_SETTINGS:-ROCMFORGE_PDL=1}
fi

if [ "$stage" = attn-profile ]; then
  # Decode attention alone under Nsight Compute (issues 12, 16): throughput,
  # warp states, instruction counts and source counters of one launch a
  # case (RF_CASES: preset:type:sequences; output file names without the
  # colons, which a call does not bring back), and the SASS of the f16
  # decode kernels (the key loop's instructions a tile).
  # Any other kernel: RF_KERNEL (an ncu -k regex), RF_SKIP launches of it
  # skipped, RF_COUNT profiled (stage kernel-profile sets them; no SASS).
  for c in ${RF_CASES:-gemma2-9b-4l:f16:1 llama3-8b-4l:f16:1 llama3-8b-4l:f16:64}; do
    IFS=: read -r p t n <<< "$c"
    f="$OUT/${RF_KERNEL_TAG:-attn}-$p-$t-$n.txt"
    timeout 150 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
      --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section SourceCounters \
      --section InstructionStats -k regex:"${RF_KERNEL:-attention_decode}" -s "${RF_SKIP:-40}" -c "${RF_COUNT:-1}" \
      "$BIN/rocmforge" bench --load-format dummy -m "$p:$t" -p 512 -n 32 -r 1 --parallel "$n" > "$f" 2>&1
    echo "== $c"
    grep -E ", Context [0-9]+, Stream|^    (Duration|DRAM Throughput|Memory Throughput|Warp Cycles Per Issued|Executed Instructions  |Grid Size|Registers Per|Achieved Occupancy|Theoretical Occupancy)" "$f" \
      | sed -E 's/, Context.*//; s/rf::gpu::|\(anonymous namespace\)::|void //g' | cut -c1-220
  done
  [ -n "${RF_KERNEL:-}" ] && exit 0
  cuobjdump -sass "$BIN/rocmforge" | awk '/Function : /{p = ($0 ~ /attention_decode_kernel.*6__half/)} p' > "$OUT/sass-attn.txt"
  grep "Function :" "$OUT/sass-attn.txt"
fi

if [ "$stage" = bench-families ]; then
  # Issue 12's speed table: each family's 7-12B preset against llama3-8b in
  # one call (RF_PRESETS, RF_TYPES pick; dummy weights of the preset's
  # shapes and types: the same bytes read as a written file's).
  for t in ${RF_TYPES:-f16 q4_k_m}; do
    for p in ${RF_PRESETS:-llama3-8b qwen2.5-7b qwen3-8b gemma2-9b gemma3-12b phi3-mini glm4-9b}; do
      echo "== bench $p $t"
      timeout 120 "$BIN/rocmforge" bench --load-format dummy -m "$p:$t" -p 512 -n 128 -r "${RF_REPS:-2}" \
        --parallel "${RF_PARALLEL:-1,64}" 2>"$OUT/bench-$p-$t.err" | tee "$OUT/bench-$p-$t.md" | grep -E "^\| [0-9]+ \|"
      grep -iE "bandwidth|share" "$OUT/bench-$p-$t.err" | tail -3
    done
  done
fi

if [ "$stage" = all ] || [ "$stage" = families ]; then
  # Every family's tiny model through `rocmforge eval --device cuda` against
  # llama.cpp's goldens (the CPU matches them within 1e-3 of the largest
  # logit; the GPU computes in f16).
  echo "== model families: eval --device cuda vs the goldens"
  RF_BIN="$BIN" python3 - <<'PY'
import json, math, os, subprocess
td = os.environ["ROCMFORGE_TESTDATA"] + "/arch"
worst = 0.0
for fam in ["qwen2", "qwen3", "gemma2", "gemma3", "phi3", "glm4", "mixtral", "qwen3moe"]:
    out = subprocess.run([os.environ["RF_BIN"] + "/rocmforge", "eval", "-m", f"{td}/tiny-{fam}.gguf",
                          "--prompts", f"{td}/prompts.txt", "--device", "cuda"], capture_output=True, text=True)
    if out.returncode != 0:
        print(fam, "FAILED", out.stderr.strip().splitlines()[-1:]); worst = math.inf; continue
    got = [json.loads(l) for l in out.stdout.splitlines() if l.strip()]
    gold = [json.loads(l) for l in open(f"{td}/tiny-{fam}.golden.jsonl")]
    for i, (g, w) in enumerate(zip(got, gold)):
        a, b = g["first_step_logits"], w["first_step_logits"]
        err = max(abs(x - y) for x, y in zip(a, b)) / max(abs(y) for y in b)
        l2 = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)) / sum(y * y for y in b))
        same = next((k for k, (x, y) in enumerate(zip(g["greedy_tokens"], w["greedy_tokens"])) if x != y), None)
        worst = max(worst, l2)
        print(f"{fam} prompt {i}: max err / max logit {err:.2e}, rel L2 {l2:.2e}, greedy "
              + ("identical" if same is None and len(g["greedy_tokens"]) == len(w["greedy_tokens"]) else f"parts at {same}"))
print("worst rel L2:", worst, "(DESIGN.md f16 tolerance ~1e-3 per op; whole model < 1e-2)")
PY
fi

if [ "$stage" = structured ]; then
  # Issue 15: structured output through serve --device cuda (stories260K,
  # every reply checked), then 64 clients with and without a JSON schema on
  # synthetic llama3-8b (RF_TYPES, default f16) in one server.
  echo "== structured output through serve --device cuda"
  python3 scripts/gpu_structured.py "$BIN/rocmforge" "$ROCMFORGE_TESTDATA" cuda 2>&1 | tail -3
  for t in ${RF_TYPES:-f16}; do
    f="$MODELS/llama3-8b-$t.gguf"
    [ -f "$f" ] || { /usr/bin/time -f "mkmodel $t: %e s" "$BIN/rocmforge" mkmodel --preset llama3-8b --type "$t" -o "$f" 2>&1 | tail -2; }
    echo "== 64 clients, 256 x (512 + 128), free vs JSON schema, llama3-8b $t"
    python3 scripts/structured_load.py "$BIN/rocmforge" "$f" -n 256 -c 64 -p 512 -m 128 --vocab 128256 \
      --rounds "${RF_ROUNDS:-3}" | tee "$OUT/structured-$t.jsonl"
  done
fi

if [ "$stage" = portable ]; then
  # Issue 18, one call: the portable kernel variants (what AMD runs; carried
  # in .carry/portable by RF_BUILD=build/cuda-portable
  # RF_CARRY_BIN=.carry/portable scripts/gpu_carry.sh) through the GPU tests,
  # the golden text, every family's goldens and compute-sanitizer, and the
  # normal build (.carry/bin) through its tests and llama3-8b f16 decode in
  # the same call.
  P=.carry/portable
  [ -d "$P" ] || tar -xJf "$P.tar.xz" -C .carry
  echo "== portable build: test_gpu"
  timeout 200 "$P/test_gpu" > "$OUT/test_gpu_portable.log" 2>&1; echo "test_gpu (portable) rc=$?"
  grep -E "^\[  FAILED|PASSED|Failure" "$OUT/test_gpu_portable.log" | head -20
  timeout 60 "$P/test_gpu_serial" > "$OUT/test_gpu_serial_portable.log" 2>&1; echo "test_gpu_serial (portable) rc=$?"
  echo "== portable build: golden text, families"
  golden_check "$P" 2>&1 | tail -3
  RF_BIN=$P bash "$0" families 2>&1 | grep -E "worst|DIFF|MISSING|parts" | head -12
  echo "== portable build: compute-sanitizer (kernels of one model end to end, the sampler, attention)"
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$P/test_gpu" \
    --gtest_filter='*Golden*:*Attention*:*Sample*' > "$OUT/sanitizer_portable.log" 2>&1
  echo "rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer_portable.log" | head -5
  echo "== normal build: test_gpu and llama3-8b f16 decode"
  sharded_test_gpu; echo "test_gpu rc=$?"
  f="$MODELS/llama3-8b-f16.gguf"
  [ -f "$f" ] || "$BIN/rocmforge" mkmodel --preset llama3-8b --type f16 -o "$f" 2>&1 | tail -1
  timeout 60 "$BIN/rocmforge" bench -m "$f" -p 512 -n 128 -r 3 --parallel 1,64 2>/dev/null | grep "| tg\|| pp"
fi

if [ "$stage" = tp ] || [ "$stage" = tp-serve ] || [ "$stage" = tp-speed ]; then
  # Issue 17, on a two-GPU kind (nvidia-h100-x2 or -h200-x2), in two calls of < 10 min:
  # stage tp: the two-GPU tests (they fail instead of skipping here),
  # compute-sanitizer on them, every tiny family at TP=2 against TP=1
  # through `eval`, llama3-8b f16 decode at TP=1 and TP=2 (batch 1 and 64,
  # with the all-reduce time per step); stage tp-serve: llama3-70b-shaped
  # dummy weights served at TP=2 under loadgen (fits two 80 GB H100s too,
  # with ~8 GB a GPU of KV cache).
  export ROCMFORGE_REQUIRE_MULTI_GPU=1 NCCL_NVLS_ENABLE=0
  # NCCL: the system's, else PyTorch's wheel.
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$nccl" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl"
fi

if [ "$stage" = tp ]; then
  nvidia-smi topo -m 2>/dev/null | head -4
  echo "== two-GPU tests"
  timeout 240 "$BIN/test_gpu" --gtest_filter='CudaTensorParallel*:*CudaTwoRanks*:-*Abort*' > "$OUT/test_tp.log" 2>&1
  echo "rc=$?"; grep -E "^\[  FAILED|PASSED|Failure|error" "$OUT/test_tp.log" | head -20
  # Alone, last: if the abort did not release a rank, the test exits the
  # binary (a thread stuck in the driver would hang it).
  timeout 90 "$BIN/test_gpu" --gtest_filter='CudaTensorParallel.*Abort*' > "$OUT/test_tp_abort.log" 2>&1
  echo "abort test rc=$?"; grep -E "^\[  FAILED|PASSED|Failure|still waits" "$OUT/test_tp_abort.log" | head -5
  echo "== compute-sanitizer on the all-reduce, the sampler and one model"
  # (--report-api-errors no: NCCL probes the runtime and clears the errors it
  # expects — kernel images for other GPUs, peer access already enabled.)
  # (~35 s a test under the sanitizer, most of it setting up NCCL.)
  timeout 260 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$BIN/test_gpu" \
    --gtest_filter='CudaTensorParallel.AllReduce*:CudaTensorParallel.Vocabulary*:*CudaTwoRanks*/stories260K' \
    > "$OUT/sanitizer_tp.log" 2>&1
  echo "rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer_tp.log" | head -5
  echo "== eval: TP=2 against TP=1 on the GPUs"
  for fam in qwen2 qwen3 gemma2 gemma3 phi3 glm4 mixtral qwen3moe; do
    m="$ROCMFORGE_TESTDATA/arch/tiny-$fam.gguf"
    "$BIN/rocmforge" eval -m "$m" --prompts "$ROCMFORGE_TESTDATA/arch/prompts.txt" -n 16 --device cuda:0 > "$MODELS/tp1-$fam.jsonl" 2>/dev/null
    "$BIN/rocmforge" eval -m "$m" --prompts "$ROCMFORGE_TESTDATA/arch/prompts.txt" -n 16 --device cuda:0,1 --tp 2 \
      > "$MODELS/tp2-$fam.jsonl" 2>"$MODELS/tp2-$fam.err" || tail -2 "$MODELS/tp2-$fam.err"
    python3 - "$MODELS/tp1-$fam.jsonl" "$MODELS/tp2-$fam.jsonl" "$fam" <<'PY'
import json, math, sys
a = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
b = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
for i, (x, y) in enumerate(zip(a, b)):
    p, q = x["first_step_logits"], y["first_step_logits"]
    l2 = math.sqrt(sum((u - v) ** 2 for u, v in zip(p, q)) / sum(u * u for u in p))
    part = next((k for k, (u, v) in enumerate(zip(x["greedy_tokens"], y["greedy_tokens"])) if u != v), None)
    print(f"{sys.argv[3]} prompt {i}: rel L2 {l2:.2e}, greedy " + ("identical" if part is None else f"parts at {part}"))
if len(a) != len(b) or not a: print(sys.argv[3], "MISSING OUTPUT")
PY
  done
  f="$MODELS/llama3-8b-f16.gguf"
  [ -f "$f" ] || "$BIN/rocmforge" mkmodel --preset llama3-8b --type f16 -o "$f" 2>&1 | tail -1
  echo "== eval: synthetic llama3-8b f16, TP=2 against TP=1"
  "$BIN/rocmforge" eval -m "$f" --prompts "$ROCMFORGE_TESTDATA/arch/prompts.txt" -n 16 --device cuda:0 > "$MODELS/tp1-l8.jsonl" 2>/dev/null
  "$BIN/rocmforge" eval -m "$f" --prompts "$ROCMFORGE_TESTDATA/arch/prompts.txt" -n 16 --device cuda:0,1 --tp 2 \
    > "$MODELS/tp2-l8.jsonl" 2>/dev/null
  python3 - "$MODELS/tp1-l8.jsonl" "$MODELS/tp2-l8.jsonl" <<'PY'
import json, math, sys
a = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
b = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
for i, (x, y) in enumerate(zip(a, b)):
    p, q = x["first_step_logits"], y["first_step_logits"]
    l2 = math.sqrt(sum((u - v) ** 2 for u, v in zip(p, q)) / sum(u * u for u in p))
    err = max(abs(u - v) for u, v in zip(p, q)) / max(abs(u) for u in p)
    part = next((k for k, (u, v) in enumerate(zip(x["greedy_tokens"], y["greedy_tokens"])) if u != v), None)
    print(f"llama3-8b prompt {i}: max err / max logit {err:.2e}, rel L2 {l2:.2e}, greedy "
          + ("identical" if part is None else f"parts at {part}"))
if len(a) != len(b) or not a: print("llama3-8b MISSING OUTPUT")
PY
  echo "== perplexity of stories.txt (stories260K): TP=2 on the GPUs against the CPU"
  "$BIN/rocmforge" perplexity -m "$ROCMFORGE_TESTDATA/stories260K.gguf" -f "$ROCMFORGE_TESTDATA/stories.txt" -c 128 \
    --device cpu --kl-divergence-base "$MODELS/ppl-cpu.bin" 2>/dev/null | tail -1
  "$BIN/rocmforge" perplexity -m "$ROCMFORGE_TESTDATA/stories260K.gguf" -f "$ROCMFORGE_TESTDATA/stories.txt" -c 128 \
    --device cuda:0,1 --tp 2 --kl-divergence-base "$MODELS/ppl-cpu.bin" --kl-divergence 2>&1 | tail -4
  echo "== llama3-8b f16: TP=1 (cuda:0) then TP=2 (cuda:0,1)"
  timeout 120 "$BIN/rocmforge" bench -m "$f" -p 512 -n 128 -r 3 --parallel 1,64 --device cuda:0 \
    2>"$OUT/bench-tp1.err" | tee "$OUT/bench-tp1.md"
  timeout 150 "$BIN/rocmforge" bench -m "$f" -p 512 -n 128 -r 3 --parallel 1,64 --device cuda:0,1 --tp 2 \
    2>"$OUT/bench-tp2.err" | tee "$OUT/bench-tp2.md"
  grep -E "all-reduce|error" "$OUT/bench-tp2.err"
  echo "== the same at TP=2 with every all-reduce through NCCL (ROCMFORGE_PEER_ALL_REDUCE=0)"
  ROCMFORGE_PEER_ALL_REDUCE=0 timeout 150 "$BIN/rocmforge" bench -m "$f" -p 512 -n 128 -r 3 --parallel 1,64 \
    --device cuda:0,1 --tp 2 2>"$OUT/bench-tp2-nccl.err" | tee "$OUT/bench-tp2-nccl.md"
  grep -E "all-reduce|error" "$OUT/bench-tp2-nccl.err"
fi

if [ "$stage" = tp-speed ]; then
  # Issue 17's batch-1 ratio, one call: llama3-8b f16 decode at TP=1 and at
  # TP=2 in each all-reduce variant (NCCL only, the peer kernel without the
  # fused norm, without the early launch, the default), then per-op
  # profiles of TP=1 and TP=2 into $OUT (one table per rank).
  f="$MODELS/llama3-8b-f16.gguf"
  [ -f "$f" ] || "$BIN/rocmforge" mkmodel --preset llama3-8b --type f16 -o "$f" 2>&1 | tail -1
  speed() { timeout 60 "$BIN/rocmforge" bench -m "$f" -p 512 -n 128 -r 3 --parallel 1 "$@" 2>&1 | grep -E "^\| 1 \| tg|all-reduce"; }
  echo "== TP=1"; speed --device cuda:0
  echo "== TP=2, NCCL only"; ROCMFORGE_PEER_ALL_REDUCE=0 speed --device cuda:0,1 --tp 2
  echo "== TP=2, peer kernel, not fused with the norm"; ROCMFORGE_PEER_FUSED_NORM=0 speed --device cuda:0,1 --tp 2
  echo "== TP=2, peer kernel, next kernel launched after the exchange"
  ROCMFORGE_PEER_EARLY_TRIGGER=0 speed --device cuda:0,1 --tp 2
  echo "== TP=2 (default: peer kernel fused with the norm, early launch)"; speed --device cuda:0,1 --tp 2
  echo "== TP=1 again"; speed --device cuda:0
  RF_PROFILE_LINES=24 bash scripts/gpu_opprofile.sh f16 1 64 | tail -24
  RF_TAG=-tp2 RF_BENCH_ARGS="--device cuda:0,1 --tp 2" RF_PROFILE_LINES=24 bash scripts/gpu_opprofile.sh f16 1 64 | tail -24
fi

if [ "$stage" = tp-serve ]; then
  echo "== llama3-70b f16 (dummy weights) served at TP=2: loadgen 256 requests, 64 clients, 512 + 128"
  "$BIN/rocmforge" serve --load-format dummy -m llama3-70b:f16 --tp 2 --device cuda:0,1 --port 8080 \
    --max-num-seqs 64 --max-num-batched-tokens 2048 -c 4096 --gpu-memory-utilization 0.95 > "$OUT/serve-70b.log" 2>&1 &
  pid=$!
  # (141 GB of weights leave ~8 GB a GPU for the KV cache on 80 GB cards.)
  for i in $(seq 1 200); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/health')" >/dev/null 2>&1 && break
    kill -0 $pid 2>/dev/null || break
    sleep 1
  done
  timeout 240 python3 .carry/tools/loadgen.py http://127.0.0.1:8080 256 64 512 128 auto 128000
  kill -TERM $pid; wait $pid; echo "server exit: $?"
  tail -3 "$OUT/serve-70b.log"
  echo "== all-reduce at the 70B shape (8192 wide), dummy weights: bench --parallel 1,64 -n 16"
  timeout 110 "$BIN/rocmforge" bench --load-format dummy -m llama3-70b:f16 --tp 2 --device cuda:0,1 -p 128 -n 32 -r 1 \
    --parallel 1,64 --gpu-memory-utilization 0.95 2>&1 | grep -E "all-reduce|tg|pp|error"
fi

# An MoE stage's tests: test_gpu on filter $2, then memcheck on filter $3
# (logs named after stage $1).
moe_tests_memcheck() {
  "$BIN/test_gpu" --gtest_filter="$2" > "$OUT/test_gpu_$1.log" 2>&1
  echo "MoE tests rc=$?"; grep -E "^\[  FAILED|PASSED|Failure" "$OUT/test_gpu_$1.log" | head -10
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_gpu" \
    --gtest_filter="$3" > "$OUT/memcheck-$1.log" 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck-$1.log" | tail -1
}

if [ "$stage" = router ]; then
  # The MoE router + routing kernel (issue 13): its tests and the MoE model
  # tests, memcheck, then batch-1 decode of this build alternated with a
  # previous one (RF_OLD, default .carry/old; RF_OLD_ENV: settings that
  # make the old build match this one's other defaults).
  OLD="${RF_OLD:-.carry/old}"
  previous_build "$OLD"
  moe_tests_memcheck router '*CudaMoe*:*qwen3moe*:*mixtral*:*CudaFusedQ8*' '*RouterAndRouteInOneLaunch*'
  for round in 1 2; do
    for model in ${RF_MODELS_ROUTER:-qwen3-30b-a3b:q4_k_m mixtral-8x7b-4l:q4_k_m}; do
      for b in "$OLD" "$BIN"; do
        printf "round %s %-24s %-12s " "$round" "$model" "$b"
        env ${RF_OLD_ENV:-} "$b/rocmforge" bench --load-format dummy -m "$model" -p 64 -n 128 -r 1 --parallel 1 \
          2>/dev/null | grep -E "^\| [0-9]+ \| tg" | awk -F'|' '{print $4 " tok/s"}'
      done
    done
  done
fi

if [ "$stage" = moe-down ]; then
  # One token's expert down projections + weighted sum in one launch
  # (moe_down.cu, issue 13): the MoE tests, memcheck of the kernel's own
  # tests, then batch-1 decode with ROCMFORGE_FUSED_MOE_DOWN off and on,
  # alternated.
  moe_tests_memcheck moe-down '*CudaMoe*:*qwen3moe*:*mixtral*' 'CudaMoe.DownAndCombineInOneLaunch:*combined*'
  for round in 1 2; do
    for model in qwen3-30b-a3b:q4_k_m mixtral-8x7b-4l:q4_k_m; do
      for on in 0 1; do
        printf "round %s %-24s FUSED_MOE_DOWN=%s " "$round" "$model" "$on"
        ROCMFORGE_FUSED_MOE_DOWN=$on "$BIN/rocmforge" bench --load-format dummy -m "$model" -p 64 -n 128 -r 1 \
          --parallel 1 2>/dev/null | grep -E "^\| [0-9]+ \| tg" | awk -F'|' '{print $4 " tok/s"}'
      done
    done
  done
fi

if [ "$stage" = prefill-split ]; then
  # Prefill query tiles split over their keys where the GPU idles
  # (query_tiles.h, issue 16): the attention and model tests, the sanitizers
  # on split tiles, then prefill speed with ROCMFORGE_PREFILL_SPLIT=0 and the
  # default alternated: pp512 (no split: its tiles fill the GPU) and a
  # 4096-token prompt in chunks of 128 and 256 tokens (its later chunks split).
  attention_tests '*CudaAttention*:*CudaKvFp8*:*CudaModel*'
  sanitize_prefill split
  for round in 1 2; do
    for split in 0 64; do
      echo "== round $round, ROCMFORGE_PREFILL_SPLIT=$split"
      ROCMFORGE_PREFILL_SPLIT=$split "$BIN/rocmforge" bench --load-format dummy -m "${RF_PRESET:-llama3-8b}:f16" -p 512 \
        -n 16 -r 1 --parallel 1,64 2>/dev/null | grep -E "^\| [0-9]+ \| pp"
      for budget in 128 256; do
        ROCMFORGE_PREFILL_SPLIT=$split "$BIN/rocmforge" bench --load-format dummy -m "${RF_PRESET:-llama3-8b}:f16" \
          -p 4096 -n 16 -r 1 --parallel 1 --max-batch-tokens $budget 2>/dev/null | grep -E "^\| [0-9]+ \| pp" |
          sed "s/^/budget $budget /"
      done
    done
  done
fi

if [ "$stage" = serve-budget ]; then
  # Issue 16's served workload (64 clients, 256 x (512 + 128), llama3-8b
  # f16 dummy weights) through bench's serving mode, against the engine's
  # token budget per step (RF_BUDGETS): smaller budgets spread the prompts
  # over more steps, each carrying every running sequence's decode token.
  for budget in ${RF_BUDGETS:-2048 1024 512 384}; do
    echo "== budget $budget"
    "$BIN/rocmforge" bench --load-format dummy -m "${RF_SERVE_MODEL:-llama3-8b:f16}" --requests 256 --concurrency 64 \
      --input-len 512 --output-len 128 --max-batch-tokens "$budget" 2>/dev/null | grep -E "throughput|duration|^\| (time|request)"
  done
fi
