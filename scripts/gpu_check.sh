#!/usr/bin/env bash
# On the GPU machine: run the GPU tests, the golden check through
# `rocmforge run --device cuda`, and benchmarks on synthetic llama3-8b models
# (stage bench-families: every family's preset, issue 12's table).
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

if [ "$stage" = ctest ]; then
  # ctest -L gpu over the build tree's test lists (carried in .carry/ctest;
  # they hold this checkout's absolute paths).
  mkdir -p build/cuda && cp -r .carry/ctest/. build/cuda/
  ctest --test-dir build/cuda -L gpu -j 4 --output-on-failure > "$OUT/ctest_gpu.log" 2>&1; echo "ctest -L gpu rc=$?"
  grep -E "tests passed|tests failed|Total Test" "$OUT/ctest_gpu.log"
fi

if [ "$stage" = all ] || [ "$stage" = tests ]; then
  echo "== gpu tests"
  "$BIN/test_gpu" > "$OUT/test_gpu.log" 2>&1; echo "test_gpu rc=$?"
  grep -E "^\[  FAILED|PASSED|Failure" "$OUT/test_gpu.log" | head -30
  echo "== golden through rocmforge run --device cuda"
  python3 - <<'PY'
import json, subprocess, os
bad = 0
for line in open(os.environ["ROCMFORGE_TESTDATA"] + "/stories260K.golden.jsonl"):
    g = json.loads(line)
    out = subprocess.run([os.environ.get("RF_BIN", ".carry/bin") + "/rocmforge", "run", "--device", "cuda", "--temp", "0", "-n", str(len(g["greedy_tokens"])),
                          "--no-display-prompt", "-p", g["prompt"],
                          "-m", os.environ["ROCMFORGE_TESTDATA"] + "/stories260K.gguf"], capture_output=True, text=True)
    text = out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout
    ok = text == g["greedy_text"]
    bad += not ok
    print("MATCH" if ok else "DIFF", repr(g["prompt"]), out.stderr.strip().splitlines()[-1:] )
print("golden mismatches:", bad)
PY
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

if [ "$stage" = bench-families ]; then
  # Issue 12's speed table: each family's 7-12B preset against llama3-8b in
  # one call (RF_PRESETS, RF_TYPES pick; models are generated, then removed).
  for t in ${RF_TYPES:-f16}; do
    for p in ${RF_PRESETS:-llama3-8b qwen2.5-7b qwen3-8b gemma2-9b gemma3-12b phi3-mini glm4-9b}; do
      f="$MODELS/$p-$t.gguf"
      [ -f "$f" ] || "$BIN/rocmforge" mkmodel --preset "$p" --type "$t" -o "$f" > "$OUT/mkmodel-$p-$t.log" 2>&1 ||
        { echo "mkmodel $p $t failed"; tail -3 "$OUT/mkmodel-$p-$t.log"; continue; }
      echo "== bench $p $t"
      "$BIN/rocmforge" bench -m "$f" -p 512 -n 128 -r "${RF_REPS:-2}" --parallel "${RF_PARALLEL:-1,64}" \
        2>"$OUT/bench-$p-$t.err" | tee "$OUT/bench-$p-$t.md"
      grep -iE "bandwidth|share|kv" "$OUT/bench-$p-$t.err" | tail -3
      [ "${RF_KEEP_MODELS:-0}" = 1 ] || rm -f "$f"
    done
  done
fi

if [ "$stage" = all ] || [ "$stage" = families ]; then
  # Every family's tiny model through `rocmforge eval --device cuda` against
  # llama.cpp's goldens (the CPU matches them within 1e-3 of the largest
  # logit; the GPU computes in f16).
  echo "== model families: eval --device cuda vs the goldens"
  python3 - <<'PY'
import json, math, os, subprocess
td = os.environ["ROCMFORGE_TESTDATA"] + "/arch"
worst = 0.0
for fam in ["qwen2", "qwen3", "gemma2", "gemma3", "phi3", "glm4", "mixtral", "qwen3moe"]:
    out = subprocess.run([os.environ.get("RF_BIN", ".carry/bin") + "/rocmforge", "eval", "-m", f"{td}/tiny-{fam}.gguf",
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
