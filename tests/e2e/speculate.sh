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
