# Sourced by the serving benchmarks (bench/serve.sh, bench/random_serve.sh), with $engine and $log set:
# launches `$engine/bin/rocket-engine ${SERVE_CMD:-launch}` on a free port with a queue of 256 and
# LAUNCH_FLAGS, stops it on exit, waits for its countdown; then $port, $server, and the results' header
# fields $commit, $machine and $gpu are set. Only bash and python3 (the GPU machine has no curl).
[ -x "$engine/bin/rocket-engine" ] || { echo "no engine binary at $engine/bin/rocket-engine"; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# shellcheck disable=SC2086
"$engine/bin/rocket-engine" ${SERVE_CMD:-launch} --port "$port" --queue 256 ${LAUNCH_FLAGS:-} >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
python3 bench/wait_healthy.py "$port" "$server" || { cat "$log"; exit 1; }
grep '^\[countdown\]\|countdown' "$log" | head -5 || true
commit=$(cat "$engine/../COMMIT" 2>/dev/null || cat "${CARRY:-.carry/h200}/COMMIT" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo '?')
machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true)

# server_survived: fails (and says why) when the server died or logged a refused step or a failed check.
server_survived() {
  local ok=0
  if ! kill -0 "$server" 2>/dev/null; then echo "FAIL: the server died"; tail -n 30 "$log"; ok=1; fi
  if grep -E "STEP REFUSED|CHECK failed|engine failed" "$log"; then echo "FAIL: the server log above"; ok=1; fi
  return $ok
}
