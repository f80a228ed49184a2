#!/usr/bin/env bash
# Graceful drain of `rocket serve` on the tiny bf16 host engine, synchronised on what the server
# reports (its log lines, /stats, the streams' own events), never on how fast it generates:
#   1) SIGTERM with requests in flight and a deadline they cannot reach (--drain-timeout 600): new
#      requests get 503 with Retry-After and /health 503 {"status": "draining"}; the stream and the
#      non-streamed request running at SIGTERM finish to their last token; the process exits 0 saying
#      0 requests were cut off.
#   2) SIGTERM with a deadline already passed (--drain-timeout 0): a stream and a non-streamed request
#      running then get an SSE error event then [DONE], and a 500 in OpenAI's error shape; the log
#      says 2 were cut off; exit 0.
#   3) SIGINT on an idle server exits 0 without waiting for its 600 s deadline.
# Requests run with ignore_eos, so each generates exactly its max_tokens (or the whole context).
#   drain.sh ROCKET WORK
set -uo pipefail
rocket=$1 work=$2/drain
engine=$2/engines/tiny-bf16 model=tiny-bf16
rm -rf "$work"; mkdir -p "$work"
failures=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; failures=$((failures+1)); }

# launch NAME ARGS...: starts the server (pid in $server, base URL in $base, log in $log) and waits for
# launch (/health 200).
launch() {
  local name=$1; shift
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  base=http://127.0.0.1:$port log=$work/$name.log
  "$rocket" serve "$engine" --host 127.0.0.1 --port "$port" "$@" >"$log" 2>&1 &
  server=$!
  for _ in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health" 2>/dev/null)" = 200 ] && return 0
    kill -0 $server 2>/dev/null || { echo "FAIL $name: server exited:"; cat "$log"; exit 1; }
    sleep 0.1
  done
  echo "FAIL $name: /health never answered 200"; cat "$log"; kill $server; exit 1
}

# wait_exit SECONDS: sets rc to the server's exit status once it has exited, or "timeout" (a bound
# against a hang, not a measure; no subshell: only this shell can wait for its child).
wait_exit() {
  rc=timeout
  for _ in $(seq 1 $(($1 * 10))); do
    kill -0 $server 2>/dev/null || { wait $server; rc=$?; return; }
    sleep 0.1
  done
}

# until_true SECONDS COMMAND...: polls COMMAND until it succeeds (0) or SECONDS pass (1).
until_true() {
  local limit=$1; shift
  for _ in $(seq 1 $((limit * 20))); do "$@" && return 0; sleep 0.05; done
  return 1
}
stats_field() { curl -s "$base/stats" | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])" 2>/dev/null; }
running() { [ "$(stats_field active)" = "$1" ]; }
streamed() { grep -q '"content"' "$1" 2>/dev/null; }
logged() { grep -q "$1" "$log"; }

chat() {  # chat MAX_TOKENS|context STREAM
  local max=',"max_tokens":'$1; [ "$1" = context ] && max=""
  local usage=""; [ "$2" = true ] && usage=',"stream_options":{"include_usage":true}'
  echo '{"model":"'$model'","messages":[{"role":"user","content":"Tell me a long story."}],"temperature":1.0,"seed":3,"ignore_eos":true,"stream":'$2$max$usage'}'
}
post() {  # post BODY OUT [STATUS_FILE]: in the background
  if [ $# = 3 ]; then
    curl -s --max-time 300 -o "$2" -w '%{http_code}' -H 'Content-Type: application/json' -d "$1" \
      "$base/v1/chat/completions" >"$3" 2>/dev/null &
  else
    curl -sN --max-time 300 -H 'Content-Type: application/json' -d "$1" "$base/v1/chat/completions" >"$2" 2>/dev/null &
  fi
}

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

# ---- 1) SIGTERM with requests in flight, the deadline out of reach: they finish ----
launch term --drain-timeout 600
trap 'kill $server 2>/dev/null' EXIT
post "$(chat 1000 true)" "$work/term_stream.out"; term_stream=$!
post "$(chat 1000 false)" "$work/term_whole.out" "$work/term_whole.status"; term_whole=$!
# Both are running: the stream has content, and the scheduler counts two active requests.
until_true 60 streamed "$work/term_stream.out" && until_true 60 running 2 \
  || bad "the two requests never both ran: active $(stats_field active)"
kill -TERM $server
grep -q '\[DONE\]' "$work/term_stream.out" && bad "the stream ended before SIGTERM: nothing was in flight"
# Draining from the moment the server logs it: /health and a new request see it.
until_true 30 logged 'draining, up to 600 s' || bad "the server never logged its drain: $(tail -3 "$log")"
h=$(curl -s -o "$work/health.out" -w '%{http_code}' "$base/health")
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert sys.argv[2]=="503" and j["status"]=="draining", (sys.argv[2], j)' \
  "$work/health.out" "$h" && ok "health while draining: 503 draining" || bad "health while draining: $h $(cat "$work/health.out")"
h=$(curl -s -D "$work/refused.headers" -o "$work/refused.out" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d "$(chat 4 false)" "$base/v1/chat/completions")
if [ "$h" = 503 ] && grep -qi '^Retry-After:' "$work/refused.headers" &&
   python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert e["code"]=="shutting_down" and e["type"]=="server_error", e' "$work/refused.out"
then ok "new request while draining: 503 shutting_down with Retry-After"
else bad "new request while draining: $h $(cat "$work/refused.out")"; fi
wait_exit 300
wait $term_stream $term_whole 2>/dev/null
[ "$rc" = 0 ] && ok "SIGTERM: exit 0" || { bad "SIGTERM: exit $rc"; tail -20 "$log"; }
stream_check "$work/term_stream.out" '
assert last == "data: [DONE]", last
assert chunks[-2]["choices"][0]["finish_reason"] == "length", chunks[-2]
assert chunks[-1]["usage"]["completion_tokens"] == 1000, chunks[-1]' \
  && ok "the stream in flight at SIGTERM ran to its 1000th token" || bad "stream: $(tail -c 400 "$work/term_stream.out")"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert sys.argv[2]=="200" and j["usage"]["completion_tokens"]==1000, j' \
  "$work/term_whole.out" "$(cat "$work/term_whole.status")" \
  && ok "the non-streamed request in flight at SIGTERM ran to its 1000th token" \
  || bad "whole: $(cat "$work/term_whole.status") $(head -c 300 "$work/term_whole.out")"
grep -q '(0 requests cut off at the deadline)' "$log" && ok "log: drained, none cut off" || bad "log: $(tail -3 "$log")"

# ---- 2) SIGTERM with the deadline already passed: what runs is cut off with an error ----
launch cut --drain-timeout 0
post "$(chat context true)" "$work/cut_stream.out"; cut_stream=$!
post "$(chat context false)" "$work/cut_whole.out" "$work/cut_whole.status"; cut_whole=$!
until_true 60 streamed "$work/cut_stream.out" && until_true 60 running 2 \
  || bad "the two requests never both ran: active $(stats_field active)"
kill -TERM $server
wait_exit 60
wait $cut_stream $cut_whole 2>/dev/null
[ "$rc" = 0 ] && ok "SIGTERM past the deadline: exit 0" || { bad "SIGTERM past the deadline: exit $rc"; tail -20 "$log"; }
stream_check "$work/cut_stream.out" '
assert last == "data: [DONE]", last
assert any("content" in c["choices"][0]["delta"] for c in chunks if "choices" in c), "no content before the cut"
e = chunks[-1]["error"]
assert "drain deadline" in e["message"] and e["type"] == "server_error", e' \
  && ok "stream cut at the deadline: error event, then [DONE]" || bad "cut stream: $(tail -c 400 "$work/cut_stream.out")"
python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert sys.argv[2]=="500" and "drain deadline" in e["message"], e' \
  "$work/cut_whole.out" "$(cat "$work/cut_whole.status")" \
  && ok "non-streamed request cut at the deadline: 500" || bad "cut whole: $(cat "$work/cut_whole.status") $(cat "$work/cut_whole.out")"
grep -q 'draining, up to 0 s' "$log" && grep -q '(2 requests cut off at the deadline)' "$log" \
  && ok "log: 2 requests cut off at the deadline" || bad "log: $(tail -5 "$log")"

# ---- 3) SIGINT on an idle server: nothing to wait for, so no wait for the 600 s deadline ----
launch int --drain-timeout 600
kill -INT $server
wait_exit 60
[ "$rc" = 0 ] && grep -q '(0 requests cut off at the deadline)' "$log" && ok "SIGINT idle: exit 0 without waiting" \
  || { bad "SIGINT idle: exit $rc"; tail -5 "$log"; }

echo "drain: $failures failure(s)"
[ "$failures" = 0 ]
