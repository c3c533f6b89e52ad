#!/usr/bin/env bash
# End-to-end tests of `rocmforge serve` with the official OpenAI and
# Anthropic clients: installs the pinned clients (tests/server/package-lock.json) with npm ci and
# runs the node tests (tests/server/*.test.mjs) against the given binary on
# the real stories260K model and the tiny model of each family (arch/), on
# the CPU. Builds nothing.
# Usage: scripts/server_test.sh [path/to/rocmforge]   (default build/cpu/src/rocmforge)
# Test data: $ROCMFORGE_TESTDATA, else ../shared/testdata beside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "server_test: FAILED: $*" >&2; exit 1; }

bin="${1:-build/cpu/src/rocmforge}"
[ -x "$bin" ] || fail "$bin is not an executable (build it first)"
export ROCMFORGE_BIN="$(realpath "$bin")"
testdata="${ROCMFORGE_TESTDATA:-../shared/testdata}"
if [ ! -f "$testdata/stories260K.gguf" ]; then
  if [[ ",${ROCMFORGE_REQUIRE:-}," == *,testdata,* ]]; then fail "no $testdata/stories260K.gguf"; fi
  echo "server_test: SKIPPED: no $testdata/stories260K.gguf (set ROCMFORGE_TESTDATA)"
  exit 0
fi
export ROCMFORGE_TESTDATA="$(realpath "$testdata")"
command -v node >/dev/null || fail "node is not installed"
command -v npm >/dev/null || fail "npm is not installed"

cd tests/server
echo "server_test: npm ci (openai and @anthropic-ai/sdk clients from package-lock.json)"
npm ci --no-audit --no-fund --loglevel=error || fail "npm ci"
echo "server_test: node --test with $ROCMFORGE_BIN"
if ! node --test --test-concurrency=1 --test-timeout=120000 \
    e2e.test.mjs concurrency.test.mjs bad_input.test.mjs lifecycle.test.mjs hostile_clients.test.mjs \
    families.test.mjs tools.test.mjs structured.test.mjs reasoning.test.mjs anthropic.test.mjs responses.test.mjs \
    embeddings.test.mjs; then
  fail "node tests (see the failures above)"
fi
echo "server_test: all passed"
