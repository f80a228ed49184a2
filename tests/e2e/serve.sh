#!/usr/bin/env bash
# The OpenAI-compatible server on the tiny bf16 host engine, driven with curl over loopback:
# chat (whole and streamed), completions, seeds, the 400/401/404/503 paths and a client that hangs
# up mid-stream.
#   serve.sh ROCKET WORK
set -uo pipefail
rocket=$1 work=$2/serve
engine=$2/engines/tiny-bf16 model=tiny-bf16 key=sekrit
rm -rf "$work"; mkdir -p "$work"
failures=0
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base=http://127.0.0.1:$port

"$rocket" serve "$engine" --host 127.0.0.1 --port "$port" --api-key "$key" --queue 1 >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT

for _ in $(seq 1 600); do
  curl -sf "$base/health" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { echo "FAIL server exited:"; cat "$work/server.log"; exit 1; }
  sleep 0.1
done
curl -sf "$base/health" >/dev/null || { echo "FAIL /health never answered"; cat "$work/server.log"; exit 1; }

ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; failures=$((failures+1)); }

# req NAME METHOD PATH [BODY] [CURL ARGS...]: writes the body to $work/NAME.out, prints the status.
req() {
  local name=$1 method=$2 path=$3 body=${4:-}; shift 4 2>/dev/null || shift $#
  local args=(-s -o "$work/$name.out" -w '%{http_code}' -X "$method" -H "Authorization: Bearer $key"
              -H 'Content-Type: application/json' --max-time 60)
  [ -n "$body" ] && args+=(--data-binary "$body")
  curl "${args[@]}" "$@" "$base$path"
}

# check NAME EXPECTED_STATUS STATUS PYTHON_ASSERTIONS: the assertions see the response as `j`.
check() {
  local name=$1 want=$2 got=$3 py=${4:-}
  if [ "$got" != "$want" ]; then bad "$name: status $got, expected $want: $(head -c 400 "$work/$name.out")"; return; fi
  if [ -n "$py" ] && ! python3 -c "import json,sys; j=json.load(open(sys.argv[1])); $py" "$work/$name.out" 2>"$work/$name.err"; then
    bad "$name: $(tail -1 "$work/$name.err"): $(head -c 400 "$work/$name.out")"; return
  fi
  ok "$name"
}

chat='{"model":"'$model'","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello, who are you?"}]'

s=$(req models GET /v1/models)
check models 200 "$s" 'm=j["data"][0]; assert m["id"]=="'$model'"; assert m["rocket"]["fingerprint"]; assert m["rocket"]["max_context"]>0'
ctx=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["data"][0]["rocket"]["max_context"])' "$work/models.out")

s=$(req chat POST /v1/chat/completions "$chat"',"max_tokens":12,"temperature":0}')
check chat 200 "$s" 'assert j["object"]=="chat.completion"; c=j["choices"][0]; assert c["message"]["role"]=="assistant"
assert isinstance(c["message"]["content"], str); assert c["finish_reason"] in ("stop","length")
u=j["usage"]; assert u["prompt_tokens"]>0 and 0<=u["completion_tokens"]<=12 and u["total_tokens"]==u["prompt_tokens"]+u["completion_tokens"]'

s=$(req stream POST /v1/chat/completions "$chat"',"max_tokens":12,"stream":true,"stream_options":{"include_usage":true}}')
if [ "$s" = 200 ] && python3 - "$work/stream.out" <<'EOF'
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l and not l.startswith(":")]  # ": keep-alive"
assert all(l.startswith("data: ") for l in lines), lines
assert lines[-1] == "data: [DONE]", lines[-1]
chunks = [json.loads(l[6:]) for l in lines[:-1]]
assert all(c["object"] == "chat.completion.chunk" for c in chunks)
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
assert chunks[-2]["choices"][0]["finish_reason"] in ("stop", "length"), chunks[-2]
assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] <= 12, chunks[-1]
EOF
then ok stream; else bad "stream: status $s: $(head -c 600 "$work/stream.out")"; fi

s=$(req completion POST /v1/completions '{"model":"'$model'","prompt":"The capital of France is","max_tokens":8,"temperature":0}')
check completion 200 "$s" 'assert j["object"]=="text_completion"; assert isinstance(j["choices"][0]["text"], str)
assert 0<j["usage"]["prompt_tokens"] and j["usage"]["completion_tokens"]<=8'

s=$(req completion_stream POST /v1/completions '{"model":"'$model'","prompt":[1,2,3],"max_tokens":5,"stream":true}')
if [ "$s" = 200 ] && grep -q '^data: {' "$work/completion_stream.out" && [ "$(tail -n 2 "$work/completion_stream.out" | head -1)" = "data: [DONE]" ]
then ok completion_stream; else bad "completion_stream: status $s: $(head -c 400 "$work/completion_stream.out")"; fi

seeded="$chat"',"max_tokens":24,"temperature":1.0,"top_p":0.9,"seed":1234}'
s1=$(req seed1 POST /v1/chat/completions "$seeded"); s2=$(req seed2 POST /v1/chat/completions "$seeded")
if [ "$s1$s2" = 200200 ] && python3 -c '
import json, sys
a, b = (json.load(open(p))["choices"][0]["message"] for p in sys.argv[1:])
assert a == b, (a, b)' "$work/seed1.out" "$work/seed2.out"; then ok "seed: identical outputs"; else bad "seed: outputs differ"; fi

s=$(req malformed POST /v1/chat/completions '{"model": "'$model'", "messages": [')
check malformed 400 "$s" 'assert j["error"]["type"]=="invalid_request_error"'
s=$(req n2 POST /v1/chat/completions "$chat"',"n":2}')
check n2 400 "$s" 'assert j["error"]["param"]=="n", j'
s=$(req badtype POST /v1/chat/completions "$chat"',"temperature":"hot"}')
check badtype 400 "$s" 'assert j["error"]["param"]=="temperature", j'
s=$(req context POST /v1/chat/completions "$chat"',"max_tokens":'$ctx'}')
check context 400 "$s" 'assert j["error"]["param"]=="max_tokens" and "'$ctx'" in j["error"]["message"], j'
s=$(req unknown_model POST /v1/chat/completions '{"model":"nope","messages":[{"role":"user","content":"hi"}]}')
check unknown_model 404 "$s" 'assert j["error"]["code"]=="model_not_found"'
s=$(curl -s -o "$work/nokey.out" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$chat}" "$base/v1/chat/completions")
check nokey 401 "$s" 'assert "error" in j'
s=$(curl -s -o "$work/wrongkey.out" -w '%{http_code}' -H 'Authorization: Bearer wrong' "$base/v1/models")
check wrongkey 401 "$s" 'assert "error" in j'

# A client that hangs up mid-stream: its request is cancelled in the loop, which then serves the next.
long="$chat"',"max_tokens":1500,"temperature":1.0,"seed":7,"stream":true}'
curl -s -N --max-time 2 -H "Authorization: Bearer $key" -H 'Content-Type: application/json' --data-binary "$long" \
  "$base/v1/chat/completions" >"$work/hangup.out" 2>/dev/null
grep -q '^data: {' "$work/hangup.out" || bad "hangup: no chunk before the hang-up"
t0=$(date +%s.%N)
s=$(req after_hangup POST /v1/chat/completions "$chat"',"max_tokens":4}' --max-time 20)
check after_hangup 200 "$s" 'assert j["choices"][0]["finish_reason"] in ("stop","length")'
for _ in $(seq 1 50); do grep -q 'cancelled (client gone)' "$work/server.log" && break; sleep 0.1; done
if grep -q 'cancelled (client gone)' "$work/server.log"; then ok "hangup: request cancelled in the loop"
elif grep -q '1500 completion tokens' "$work/server.log"; then bad "hangup: the request ran to the end"
else echo "note hangup: the request ended before the hang-up was seen"; fi

# Queue full (--queue 1): one request running, one queued, the third gets 503 with Retry-After.
curl -s -N --max-time 3 -H "Authorization: Bearer $key" -H 'Content-Type: application/json' --data-binary "$long" \
  "$base/v1/chat/completions" >/dev/null 2>&1 &
a=$!
sleep 0.7
curl -s -N --max-time 3 -H "Authorization: Bearer $key" -H 'Content-Type: application/json' --data-binary "$long" \
  "$base/v1/chat/completions" >/dev/null 2>&1 &
b=$!
sleep 0.7
s=$(req busy POST /v1/chat/completions "$chat"',"max_tokens":4}' -D "$work/busy.headers")
if [ "$s" = 503 ] && grep -qi '^retry-after:' "$work/busy.headers"; then ok "busy: 503 with Retry-After"
elif [ "$s" = 200 ]; then echo "note busy: the queue drained before the third request (timing)"
else bad "busy: status $s: $(head -c 300 "$work/busy.out")"; fi
wait $a $b
s=$(req after_busy POST /v1/chat/completions "$chat"',"max_tokens":4}' --max-time 30)
check after_busy 200 "$s" ''

kill -0 $server 2>/dev/null || bad "the server died"
echo "--- server log"; cat "$work/server.log"
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
