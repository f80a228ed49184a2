#!/usr/bin/env bash
# Speculative decoding on the host engine (docs/speculative.md): the tiny fuel forged with its MTP
# layer, built with --draft 3, gives plain greedy decoding's tokens and logits bit for bit with the
# MTP layer drafting, and with oracle drafts at every acceptance from none to all (the random-weight
# MTP layer rarely guesses right, so the oracle is what exercises the accepted lengths). Then the
# build's refusals: drafting without an MTP layer, past the most tokens, on the h200 engine.
#   speculate.sh ROCKET WORK
set -euo pipefail
rocket=$1 work=$2/speculate
mkdir -p "$work"
"$rocket" forge --fuel tiny --format nvfp4 --seed 1 --mtp --out "$work/fuel" --force
"$rocket" build "$work/fuel" --booster host --out "$work/engine" --draft 3 --force
engine=$work/engine/bin/rocket-engine
grep -q '"draft_tokens": 3' "$work/engine/plan.json"
"$engine" speculate --prompts 4 --tokens 24 | tee "$work/mtp.log"
grep -q 'identical to plain decoding, logits bit for bit' "$work/mtp.log"
"$engine" speculate --prompts 3 --tokens 24 --oracle 0.3 | tee "$work/oracle.log"
grep -q 'identical to plain decoding' "$work/oracle.log"
"$engine" speculate --prompts 2 --tokens 20 --oracle 0 --draft 2 | tee "$work/all.log"
grep -q 'acceptance 1.000' "$work/all.log"
"$engine" speculate --prompts 2 --tokens 12 --oracle 1 | tee "$work/none.log"
grep -q 'acceptance 0.000' "$work/none.log"

# The server on the drafting engine: concurrent greedy requests give the same text with drafting on
# (the default) and off (`speculative: false`), the server drafts for them, and the contract holds.
source "$(dirname "${BASH_SOURCE[0]}")/serve_lib.sh"
port=$(free_port)
"$engine" launch --host 127.0.0.1 --port "$port" >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
wait_healthy "http://127.0.0.1:$port" "$server" "$work/server.log"
python3 - "http://127.0.0.1:$port" <<'PY'
import json, sys, urllib.error, urllib.request
from concurrent.futures import ThreadPoolExecutor
base = sys.argv[1]
def post(body):
    req = urllib.request.Request(base + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
def body(i, speculative):
    b = {"model": "engine", "prompt": [1000 + (i * 7919 + t * 104729) % 50000 for t in range(5 + 11 * i)],
         "max_tokens": 9 + 5 * i, "temperature": 0}
    if speculative is not None:
        b["speculative"] = speculative
    return b
with ThreadPoolExecutor(8) as pool:
    on = list(pool.map(lambda i: post(body(i, None)), range(6)))
    off = list(pool.map(lambda i: post(body(i, False)), range(6)))
for i, ((s1, a), (s2, b)) in enumerate(zip(on, off)):
    assert s1 == 200 and s2 == 200, (s1, a, s2, b)
    assert a["choices"][0]["text"] == b["choices"][0]["text"], (i, a, b)
    assert a["usage"] == b["usage"], (i, a["usage"], b["usage"])
stats = json.load(urllib.request.urlopen(base + "/stats"))
sched = stats
assert sched["verify_steps"] > 0 and sched["drafted_tokens"] > 0 and sched["refused_steps"] == 0, sched
# Logprobs draft too: every token's logprobs come from its verified row, as a decode step's would.
with ThreadPoolExecutor(4) as pool:
    on = list(pool.map(lambda i: post(dict(body(i, None), logprobs=3)), range(4)))
    off = list(pool.map(lambda i: post(dict(body(i, False), logprobs=3)), range(4)))
after = json.load(urllib.request.urlopen(base + "/stats"))
assert after["verify_steps"] > sched["verify_steps"], ("logprobs requests did not draft", sched, after)
for i, ((s1, a), (s2, b)) in enumerate(zip(on, off)):
    assert s1 == 200 and s2 == 200, (s1, a, s2, b)
    la, lb = a["choices"][0]["logprobs"], b["choices"][0]["logprobs"]
    assert la["tokens"] and la == lb, (i, la, lb)
sched = after
metrics = urllib.request.urlopen(base + "/metrics").read().decode()
for name, key in (("rocket_spec_verify_steps_total", "verify_steps"), ("rocket_spec_draft_tokens_total", "drafted_tokens")):
    line = next(l for l in metrics.splitlines() if l.startswith(name))
    assert float(line.split()[-1]) == sched[key], (line, sched)
status, err = post(dict(body(0, None), speculative="yes"))
assert status == 400 and "speculative" in json.dumps(err), (status, err)
print(f"speculate.sh: server: drafting and plain requests gave the same text; {sched['verify_steps']} verify steps, "
      f"{sched['accepted_tokens']} of {sched['drafted_tokens']} drafts accepted")
PY
kill $server; wait $server 2>/dev/null || true
trap - EXIT

refused() {  # refused WHAT EXPECTED-MESSAGE COMMAND...
  local what=$1 expect=$2
  shift 2
  if "$@" 2>"$work/refusal.log"; then echo "speculate.sh: $what was built" >&2; exit 1; fi
  grep -q "$expect" "$work/refusal.log" || { echo "speculate.sh: $what refused without '$expect':" >&2; cat "$work/refusal.log" >&2; exit 1; }
}
"$rocket" forge --fuel tiny --format bf16 --seed 1 --out "$work/plain-fuel" --force
refused "a draft without an MTP layer" "stores no MTP layer" \
  "$rocket" build "$work/plain-fuel" --booster host --out "$work/refused" --draft 2 --force
refused "a draft of 8" "outside \[1, 7\]" "$rocket" build "$work/fuel" --booster host --out "$work/refused" --draft 8 --force
refused "an h200 draft" "the h200 engine has no draft and verify steps" \
  "$rocket" build "$work/fuel" --booster h200 --out "$work/refused" --draft 2 --no-weights --force
echo "speculate.sh: PASS"
