#!/usr/bin/env bash
# The README's test command: installs dependencies, builds every preset CI
# covers, and runs the tests. Stages can be picked with ROCMFORGE_STAGES
# (space-separated; default: all).
set -euo pipefail
cd "$(dirname "$0")/.."

stages="${ROCMFORGE_STAGES:-layers cpu asan fuzz cuda cuda-portable hip}"
has_stage() { [[ " $stages " == *" $1 "* ]]; }
jobs="${ROCMFORGE_JOBS:-$(nproc)}"

export CCACHE_BASEDIR="$PWD"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/rocmforge-ccache}"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
export CCACHE_NOHASHDIR=1

step() { echo; echo "=== $* ($(date +%T))"; }

bash scripts/install-deps.sh

if has_stage layers; then
  step "layers: every #include within its layer's reach (DESIGN.md), and the check catches planted violations"
  python3 scripts/check_layers.py
  python3 scripts/check_layers.py --self-test
fi

if has_stage cpu; then
  step "cpu: build and test"
  cmake --preset cpu >/dev/null
  cmake --build --preset cpu -j "$jobs"
  ctest --preset cpu -j "$jobs"
  step "server: rocmforge serve on stories260K and the tiny models driven by the openai and @anthropic-ai/sdk npm clients"
  bash scripts/server_test.sh build/cpu/src/rocmforge
  step "soak: ${ROCMFORGE_SOAK_SECONDS:-60} s of streamed, dropped and bad requests against rocmforge serve"
  model="${ROCMFORGE_TESTDATA:-../shared/testdata}/stories260K.gguf"
  if [ -f "$model" ]; then
    python3 scripts/soak.py --bin build/cpu/src/rocmforge --model "$model" --max-num-seqs 32 \
      --duration "${ROCMFORGE_SOAK_SECONDS:-60}" --server-args "--threads 2"
  elif [ "${ROCMFORGE_REQUIRE_TESTDATA:-0}" = 1 ]; then
    echo "soak: FAILED: no $model" >&2; exit 1
  else
    echo "soak: SKIPPED: no $model (set ROCMFORGE_TESTDATA)"
  fi
fi

if has_stage asan; then
  step "asan: parsers under ASan + UBSan"
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan -j "$jobs"
fi

if has_stage fuzz; then
  step "fuzz: short libFuzzer runs on the parsers"
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$jobs"
  bash scripts/fuzz.sh "${ROCMFORGE_FUZZ_SECONDS:-30}"
fi

if has_stage cuda; then
  step "cuda: compile the CUDA backend (sm_90a)"
  cmake --preset cuda >/dev/null
  cmake --build --preset cuda -j "$jobs"
fi

if has_stage cuda-portable; then
  step "cuda-portable: the CUDA backend with the kernel variants AMD uses (rocmforge, GPU tests)"
  cmake --preset cuda-portable >/dev/null
  cmake --build --preset cuda-portable -j "$jobs"
fi

if has_stage hip; then
  step "hip: rocmforge and the GPU tests for gfx1030 and gfx90a, linked against the HIP runtime"
  cmake --preset hip >/dev/null
  cmake --build --preset hip -j "$jobs"
  # Linked, dynamically against Debian's HIP runtime, and the CLI starts.
  # (ldd's output is captured first: `ldd | grep -q` under pipefail fails
  # whenever grep exits on the match before ldd writes its next line.)
  linked="$(ldd build/hip/src/rocmforge)"
  [[ "$linked" == *libamdhip64* ]] || { echo "hip: rocmforge is not linked against libamdhip64" >&2; exit 1; }
  build/hip/src/rocmforge --help >/dev/null
fi

step "all stages passed: $stages"
