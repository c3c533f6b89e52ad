#!/usr/bin/env bash
# Installs ROCmForge's build and test dependencies from Debian 12 packages.
# Safe to re-run (nothing to do when every package is present); uses sudo
# when not root. `bash scripts/test.sh --no-install` skips it.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkgconf git
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libboost1.81-dev libpcre2-dev libcli11-dev
  clang libclang-rt-14-dev            # libFuzzer and sanitizers
  hipcc libamdhip64-dev rocm-device-libs  # the HIP (AMD) build: compiler, runtime, device bitcode
  python3
)

missing=()
for p in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
  [[ "$status" == *"install ok installed"* ]] || missing+=("$p")
done
# Node.js and npm run the server tests' OpenAI client; a machine may already
# have its own Node (then Debian's would conflict).
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
