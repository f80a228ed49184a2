#!/usr/bin/env bash
# Telemetry end to end (tests/e2e/telemetry.mjs): Prometheus, promtool and an OTLP receiver against
# the tiny bf16 host engine's server.
#   telemetry.sh ROCKET WORK
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v prometheus >/dev/null && command -v promtool >/dev/null ||
  { echo "telemetry: Debian's prometheus package (prometheus, promtool) is missing: scripts/setup.sh installs it" >&2; exit 1; }
cd "$here/../.." && exec node tests/e2e/telemetry.mjs "$1" "$2"
