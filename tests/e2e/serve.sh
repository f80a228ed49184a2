#!/usr/bin/env bash
# The OpenAI-compatible server on the tiny bf16 host engine, driven with curl over loopback:
# /health through the countdown, chat (whole and streamed), completions, seeds, the 400/401/404/503
# paths (keys from --api-key-file and ROCKET_API_KEY) and a client that hangs up mid-stream.
# (openai_client.sh drives it with the OpenAI client.)
#   serve.sh ROCKET WORK
set -uo pipefail
rocket=$1 work=$2/serve
engine=$2/engines/tiny-bf16 model=tiny-bf16 key=sekrit
rm -rf "$work"; mkdir -p "$work"
failures=0
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base=http://127.0.0.1:$port

# Keys from a file (not in ps) and from the environment, both accepted.
printf '# e2e keys\n\n  %s  \nsk-second-from-file\n' "$key" >"$work/keys"
ROCKET_API_KEY=sk-from-env "$rocket" serve "$engine" --host 127.0.0.1 --port "$port" --api-key-file "$work/keys" --queue 1 \
  >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT

ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; failures=$((failures+1)); }

# /health during the countdown: 503 with the phase (the server listens before the engine loads), then
# 200 {"status": "ok", "phase": "launch"}. Whether a poll lands before launch is timing.
early=""
for _ in $(seq 1 600); do
  h=$(curl -s -o "$work/health.out" -w '%{http_code}' "$base/health" 2>/dev/null)
  [ "$h" = 200 ] && break
  [ "$h" = 503 ] && [ -z "$early" ] && early=$(cat "$work/health.out")
  kill -0 $server 2>/dev/null || { echo "FAIL server exited:"; cat "$work/server.log"; exit 1; }
  sleep 0.1
done
[ "$h" = 200 ] || { echo "FAIL /health never answered 200"; cat "$work/server.log"; exit 1; }
python3 -c 'import json, sys; assert json.loads(sys.argv[1]) == {"status": "ok", "phase": "launch"}, sys.argv[1]' "$(cat "$work/health.out")" \
  && ok "health: launch" || bad "health: $(cat "$work/health.out")"
if [ -z "$early" ]; then echo "note health: no poll landed before launch (timing)"
elif python3 -c 'import json, sys; j = json.loads(sys.argv[1]); assert j["status"] == "starting" and j["phase"] in ("upright", "fuel", "static_fire"), j' "$early"
then ok "health: 503 with the phase before launch ($early)"; else bad "health before launch: $early"; fi

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
s=$(req n_streams POST /v1/chat/completions "$chat"',"n":1000}')
check n_streams 400 "$s" 'assert j["error"]["param"]=="n", j'
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
for other in sk-second-from-file sk-from-env; do
  s=$(curl -s -o "$work/otherkey.out" -w '%{http_code}' -H "Authorization: Bearer $other" "$base/v1/models")
  check otherkey 200 "$s" 'assert j["data"]'
done
s=$(curl -s -o "$work/prefixkey.out" -w '%{http_code}' -H "Authorization: Bearer ${key:0:3}" "$base/v1/models")
check prefixkey 401 "$s" 'assert "error" in j'

# Bounded inputs: a body over the limit is a 413 from its Content-Length, JSON nested past the depth
# limit a 400 (a 20000-level tool schema used to overflow an HTTP thread's stack), and a prompt past
# the context a 400 in milliseconds; the server serves on after each.
head -c $((64 << 20)) /dev/zero | tr '\0' 'a' >"$work/huge.body"
s=$(curl -s -o "$work/huge_body.out" -w '%{http_code}' -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
      --data-binary @"$work/huge.body" --max-time 60 "$base/v1/chat/completions")
check huge_body 413 "$s" 'assert j["error"]["code"]=="request_too_large", j'
python3 - "$model" >"$work/deep.body" <<'PY'
import sys
levels = 20000
schema = '{"type": "object", "properties": {"x": ' * levels + '{}' + '}}' * levels
print('{"model": "%s", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", '
      '"function": {"name": "f", "parameters": %s}}]}' % (sys.argv[1], schema), end="")
PY
s=$(curl -s -o "$work/deep_json.out" -w '%{http_code}' -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
      --data-binary @"$work/deep.body" --max-time 60 "$base/v1/chat/completions")
check deep_json 400 "$s" 'assert j["error"]["code"]=="json_too_deep", j'
python3 - "$model" >"$work/long.body" <<'PY'
import json, sys
print(json.dumps({"model": sys.argv[1], "messages": [{"role": "user", "content": "lorem ipsum " * 80000}]}), end="")
PY
t0=$(date +%s%N)
s=$(curl -s -o "$work/long_prompt.out" -w '%{http_code}' -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
      --data-binary @"$work/long.body" --max-time 60 "$base/v1/chat/completions")
check long_prompt 400 "$s" 'assert j["error"]["code"]=="context_length_exceeded", j'
echo "note long_prompt: 960 kB of prompt refused in $((($(date +%s%N) - t0) / 1000000)) ms"
s=$(req after_bounds POST /v1/chat/completions "$chat"',"max_tokens":4}' --max-time 20)
check after_bounds 200 "$s" 'assert j["choices"][0]["finish_reason"] in ("stop","length")'

# A client that hangs up mid-stream: its request is cancelled in the loop (the scheduler's /stats
# count it) and its slot freed. (openai_client.mjs covers the 503 of a full queue: it needs more
# concurrent streams than curl here is worth.)
cancelled() { curl -s "$base/stats" | python3 -c 'import json, sys; m = json.load(sys.stdin); print(m["cancelled"], m["active"])'; }
read -r c0 _ <<<"$(cancelled)"
# The client hangs up once its first chunk has come, whatever the machine's speed: with ignore_eos the
# request has ~1,500 tokens still to go then.
long="$chat"',"max_tokens":1500,"temperature":1.0,"seed":7,"ignore_eos":true,"stream":true}'
python3 - "${base#http://}" "$key" "$long" >"$work/hangup.out" <<'EOF'
import http.client, sys
c = http.client.HTTPConnection(sys.argv[1], timeout=60)
c.request("POST", "/v1/chat/completions", body=sys.argv[3],
          headers={"Authorization": "Bearer " + sys.argv[2], "Content-Type": "application/json"})
r = c.getresponse()
line = b""
while not line.startswith(b"data: {"):
    line = r.fp.readline()
    if not line:
        break
print(line.decode().strip())
r.close()  # the hang-up: the connection closes with the stream unread
c.close()
EOF
grep -q '^data: {' "$work/hangup.out" || bad "hangup: no chunk before the hang-up"
# Until the scheduler counts the cancel (30 s only bounds a server that never notices).
for _ in $(seq 1 300); do read -r c1 active <<<"$(cancelled)"; [ "$c1" -gt "$c0" ] && [ "$active" = 0 ] && break; sleep 0.1; done
if [ "$c1" = $((c0 + 1)) ] && [ "$active" = 0 ]; then ok "hangup: request cancelled in the loop, slot freed"
else bad "hangup: cancelled $c0 -> $c1, active $active"; fi
s=$(req after_hangup POST /v1/chat/completions "$chat"',"max_tokens":4}' --max-time 20)
check after_hangup 200 "$s" 'assert j["choices"][0]["finish_reason"] in ("stop","length")'

kill -0 $server 2>/dev/null || bad "the server died"
echo "--- server log"; cat "$work/server.log"
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
