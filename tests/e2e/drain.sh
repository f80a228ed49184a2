#!/usr/bin/env bash
# Graceful drain of `rocket serve` on the tiny bf16 host engine. SIGTERM with requests in flight: new
# requests get 503 with Retry-After and /health 503 {"status": "draining"}; a short stream finishes
# normally; a long stream and a long non-streamed request still running at --drain-timeout get an SSE
# error event then [DONE], and a 500 in OpenAI's error shape; the process exits 0. SIGINT on an idle
# server exits 0 at once.
#   drain.sh ROCKET WORK
set -uo pipefail
rocket=$1 work=$2/drain
engine=$2/engines/tiny-bf16 model=tiny-bf16
rm -rf "$work"; mkdir -p "$work"
failures=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; failures=$((failures+1)); }

# launch NAME ARGS...: starts the server (pid in $server, base URL in $base) and waits for launch.
launch() {
  local name=$1; shift
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  base=http://127.0.0.1:$port
  "$rocket" serve "$engine" --host 127.0.0.1 --port "$port" "$@" >"$work/$name.log" 2>&1 &
  server=$!
  for _ in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health" 2>/dev/null)" = 200 ] && return 0
    kill -0 $server 2>/dev/null || { echo "FAIL $name: server exited:"; cat "$work/$name.log"; exit 1; }
    sleep 0.1
  done
  echo "FAIL $name: /health never answered 200"; cat "$work/$name.log"; kill $server; exit 1
}

# wait_exit SECONDS: sets rc to the server's exit status once it has exited, or "timeout" (no
# subshell: only this shell can wait for its child).
wait_exit() {
  rc=timeout
  for _ in $(seq 1 $(($1 * 10))); do
    kill -0 $server 2>/dev/null || { wait $server; rc=$?; return; }
    sleep 0.1
  done
}

chat() {  # chat MAX_TOKENS STREAM
  echo '{"model":"'$model'","messages":[{"role":"user","content":"Tell me a long story."}],"max_tokens":'$1',"temperature":1.0,"seed":3,"stream":'$2'}'
}

# ---- SIGTERM with requests in flight ----
launch term --drain-timeout 6
trap 'kill $server 2>/dev/null' EXIT
curl -sN --max-time 60 -H 'Content-Type: application/json' -d "$(chat 1800 true)" "$base/v1/chat/completions" \
  >"$work/long_stream.out" 2>/dev/null &
long_stream=$!
curl -s --max-time 60 -o "$work/long_whole.out" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d "$(chat 1800 false)" "$base/v1/chat/completions" >"$work/long_whole.status" 2>/dev/null &
long_whole=$!
# The long stream is running once its first chunk arrived.
for _ in $(seq 1 100); do grep -q '"content"' "$work/long_stream.out" 2>/dev/null && break; sleep 0.1; done
curl -sN --max-time 60 -H 'Content-Type: application/json' -d "$(chat 100 true)" "$base/v1/chat/completions" \
  >"$work/short_stream.out" 2>/dev/null &
short_stream=$!
for _ in $(seq 1 100); do grep -q '"content"' "$work/short_stream.out" 2>/dev/null && break; sleep 0.05; done
t0=$(date +%s.%N)
kill -TERM $server

sleep 0.3
h=$(curl -s -o "$work/health.out" -w '%{http_code}' "$base/health")
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert sys.argv[2]=="503" and j["status"]=="draining", (sys.argv[2], j)' \
  "$work/health.out" "$h" && ok "health while draining: 503 draining" || bad "health while draining: $h $(cat "$work/health.out")"
h=$(curl -s -D "$work/refused.headers" -o "$work/refused.out" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d "$(chat 4 false)" "$base/v1/chat/completions")
if [ "$h" = 503 ] && grep -qi '^Retry-After:' "$work/refused.headers" &&
   python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert e["code"]=="shutting_down" and e["type"]=="server_error", e' "$work/refused.out"
then ok "new request while draining: 503 shutting_down with Retry-After"
else bad "new request while draining: $h $(cat "$work/refused.out")"; fi

wait_exit 20
t1=$(date +%s.%N)
wait $long_stream $long_whole $short_stream 2>/dev/null
[ "$rc" = 0 ] && ok "SIGTERM: exit 0 after $(python3 -c "print(round($t1-$t0,1))") s (--drain-timeout 6)" \
  || { bad "SIGTERM: exit $rc"; tail -20 "$work/term.log"; }
python3 -c "import sys; t=$t1-$t0; assert 5.5 < t < 16, t" && ok "drain waited for the deadline" \
  || bad "drain took $(python3 -c "print($t1-$t0)") s with a stream running past a 6 s deadline"

# stream_check FILE PYTHON: the SSE body's data lines as `chunks` (JSON) and `last` (the final line).
stream_check() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ")]
last = lines[-1] if lines else None
chunks = [json.loads(l[6:]) for l in lines if l != "data: [DONE]"]
exec(sys.argv[2])
EOF
}
stream_check "$work/short_stream.out" '
assert last == "data: [DONE]", last
assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length"), chunks[-1]' \
  && ok "short stream in flight finished normally" || bad "short stream: $(tail -c 400 "$work/short_stream.out")"
stream_check "$work/long_stream.out" '
assert last == "data: [DONE]", last
assert any("content" in c["choices"][0]["delta"] for c in chunks if "choices" in c), "no content before the cut"
e = chunks[-1]["error"]
assert "drain deadline" in e["message"] and e["type"] == "server_error", e' \
  && ok "long stream cut at the deadline: error event, then [DONE]" || bad "long stream: $(tail -c 400 "$work/long_stream.out")"
python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert sys.argv[2]=="500" and "drain deadline" in e["message"], e' \
  "$work/long_whole.out" "$(cat "$work/long_whole.status")" \
  && ok "long non-streamed request cut at the deadline: 500" || bad "long whole: $(cat "$work/long_whole.status") $(cat "$work/long_whole.out")"
grep -q 'draining, up to 6 s' "$work/term.log" && grep -q 'requests cut off at the deadline' "$work/term.log" \
  && ok "log says it drained" || bad "log: $(tail -5 "$work/term.log")"

# ---- SIGINT on an idle server ----
launch int
t0=$(date +%s.%N)
kill -INT $server
wait_exit 10
t1=$(date +%s.%N)
[ "$rc" = 0 ] && python3 -c "import sys; assert $t1-$t0 < 5" && ok "SIGINT idle: exit 0 at once" \
  || { bad "SIGINT idle: exit $rc after $(python3 -c "print($t1-$t0)") s"; tail -5 "$work/int.log"; }

echo "drain: $failures failure(s)"
[ "$failures" = 0 ]
