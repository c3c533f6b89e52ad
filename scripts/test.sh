#!/usr/bin/env bash
# The README's test command: installs dependencies, builds every preset CI
# covers, and runs the tests. `bash scripts/test.sh [STAGE...] [OPTIONS]`
# (no stage: all of them); `--help` lists the stages and options.
set -euo pipefail
cd "$(dirname "$0")/.."

all_stages="layers cpu asan fuzz cuda cuda-portable hip"
usage() {
  cat <<EOF
usage: bash scripts/test.sh [STAGE...] [OPTIONS]

stages (default: all, in this order):
  layers         every #include within its layer's reach (DESIGN.md), and the check catches planted violations
  cpu            build the cpu preset and run its tests, the server tests and a soak of rocmforge serve
  asan           the parsers and their tests under ASan + UBSan
  fuzz           short libFuzzer runs on the parsers
  cuda           compile the CUDA backend (sm_90a)
  cuda-portable  the CUDA backend with the kernel variants AMD uses
  hip            rocmforge and the GPU tests for gfx1030 and gfx90a, linked against the HIP runtime

options:
  -j N               parallel jobs (default: the machine's cores)
  --soak-seconds S   the soak's length (default 60)
  --fuzz-seconds S   each fuzzer's run (default 30)
  --no-install       skip scripts/install-deps.sh

The tests read the test data from \$ROCMFORGE_TESTDATA (default
../shared/testdata); ROCMFORGE_REQUIRE=testdata makes a missing file fail.
EOF
}
bad_usage() { echo "test.sh: $*" >&2; echo "(bash scripts/test.sh --help)" >&2; exit 2; }

stages="" jobs="$(nproc)" soak_seconds=60 fuzz_seconds=30 install=1
number() { [[ "${2:-}" =~ ^[0-9]+$ ]] || bad_usage "$1 needs a number"; }
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    -j) number "$@"; jobs=$2; shift ;;
    --soak-seconds) number "$@"; soak_seconds=$2; shift ;;
    --fuzz-seconds) number "$@"; fuzz_seconds=$2; shift ;;
    --no-install) install=0 ;;
    -*) bad_usage "unknown option '$1'" ;;
    *) [[ " $all_stages " == *" $1 "* ]] || bad_usage "unknown stage '$1' (stages: $all_stages)"
       stages="$stages $1" ;;
  esac
  shift
done
# The stages were once picked by an environment variable: refuse it loudly
# rather than run every stage when it is set.
[ -z "${ROCMFORGE_STAGES:-}" ] || bad_usage "name the stages as arguments: bash scripts/test.sh $ROCMFORGE_STAGES"
stages="${stages:-$all_stages}"
has_stage() { [[ " $stages " == *" $1 "* ]]; }

export CCACHE_BASEDIR="$PWD"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/rocmforge-ccache}"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
export CCACHE_NOHASHDIR=1

step() { echo; echo "=== $* ($(date +%T))"; }

[ "$install" = 1 ] && bash scripts/install-deps.sh

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
  step "soak: $soak_seconds s of streamed, dropped and bad requests against rocmforge serve"
  model="${ROCMFORGE_TESTDATA:-../shared/testdata}/stories260K.gguf"
  if [ -f "$model" ]; then
    python3 scripts/soak.py --bin build/cpu/src/rocmforge --model "$model" --max-num-seqs 32 \
      --duration "$soak_seconds" --server-args "--threads 2"
  elif [[ ",${ROCMFORGE_REQUIRE:-}," == *,testdata,* ]]; then
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
  bash scripts/fuzz.sh "$fuzz_seconds"
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

step "all stages passed:$stages"
