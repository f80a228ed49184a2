#!/usr/bin/env bash
# Images through the server (bench/image_serve.py: sessions that resend one screenshot every turn, and
# the cold / resent / text-only TTFT probe) against `rocket-engine launch` of one engine directory whose
# plan carries a vision tower; appends the table to a results file with the command, commit and
# machine. Fails when a request fails, a resent turn misses the cache past its image, or the server
# does not survive.
#   bash bench/image_serve.sh ENGINE_DIR RESULTS.md [image_serve.py flags ...]
# LAUNCH_FLAGS: more `rocket-engine launch` flags (bench/launched_server.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
engine=${1:?usage: bash bench/image_serve.sh ENGINE_DIR RESULTS.md [image_serve.py flags]}
out=${2:?usage: bash bench/image_serve.sh ENGINE_DIR RESULTS.md [image_serve.py flags]}
shift 2
log=${SERVE_LOG:-/tmp/rocket_image_serve.log}
source bench/launched_server.sh
table=$(mktemp)
rc=0
python3 bench/image_serve.py --base "http://127.0.0.1:$port" --markdown "$table" "$@" || rc=$?
server_survived || rc=1
{
  echo "## Images on $(basename "$engine") ($(python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); print(p["booster"], "booster,", p["max_streams"], "streams")' "$engine/plan.json")), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "commit $commit; machine: $machine${gpu:+, $gpu}"
  echo "command: ${LAUNCH_FLAGS:+LAUNCH_FLAGS='$LAUNCH_FLAGS' }bash bench/image_serve.sh $engine RESULTS.md $*"
  echo
  cat "$table"
  echo
} >>"$out"
rm -f "$table"
echo "appended to $out"
exit "$rc"
