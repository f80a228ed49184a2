#!/usr/bin/env bash
# The launch countdown's refusal paths, each of which must exit non-zero naming its phase:
# a plan of another chemistry and a plan over the memory budget (upright), a golden token the
# engine does not produce (static_fire); a mistyped flag is refused. Then a good launch reaches phase
# launch on /health.
#   countdown.sh ROCKET WORK
set -uo pipefail
rocket=$1 work=$2/countdown
engines=$2/engines
rm -rf "$work"; mkdir -p "$work"
failures=0
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# expect_phase NAME PHASE ENGINE_DIR [ARGS...]: launch must fail within 60 s saying "countdown: PHASE:".
expect_phase() {
  local name=$1 phase=$2 dir=$3; shift 3
  timeout 60 "$rocket" launch "$dir" --host 127.0.0.1 --port "$(port)" "$@" >"$work/$name.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "countdown: $phase:" "$work/$name.log"; then
    echo "ok   $name: exit $rc, $(grep -o "countdown: $phase:.*" "$work/$name.log" | head -c 200)"
  else
    echo "FAIL $name: exit $rc, expected a '$phase' refusal:"; tail -n 5 "$work/$name.log"; failures=$((failures+1))
  fi
}

# A copy of the bf16 engine whose plan.json is edited by the given python statement (on `p`).
edited() {
  local name=$1 py=$2 dir=$work/$1
  mkdir -p "$dir/bin"
  cp "$engines/tiny-bf16/bin/rocket-engine" "$dir/bin/"
  for f in "$engines"/tiny-bf16/*; do [ -f "$f" ] && ln -sf "$f" "$dir/"; done
  rm -f "$dir/plan.json"
  python3 -c "import json,sys; p=json.load(open(sys.argv[1])); $py; json.dump(p, open(sys.argv[2],'w'))" \
    "$engines/tiny-bf16/plan.json" "$dir/plan.json"
  echo "$dir"
}

foreign=$(edited foreign "p.clear(); p.update(json.load(open('$engines/tiny-fp8/plan.json')))")
expect_phase foreign-chemistry upright "$foreign"
expect_phase over-budget upright "$engines/tiny-bf16" --reserve 100000G
wrong=$(edited wrong-token "p['static_fire']['token'] = (p['static_fire']['token'] + 1) % 151936")
expect_phase static-fire-token static_fire "$wrong"

# A mistyped flag is refused before the countdown starts, not ignored.
timeout 60 "$engines/tiny-bf16/bin/rocket-engine" launch --prot 8080 >"$work/bad-flag.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "rocket-engine launch: unknown arguments: --prot 8080" "$work/bad-flag.log"; then
  echo "ok   bad flag: exit $rc, $(head -c 120 "$work/bad-flag.log")"
else
  echo "FAIL bad flag: exit $rc, expected an unknown-argument refusal:"; tail -n 5 "$work/bad-flag.log"; failures=$((failures+1))
fi

# A good launch: /health goes to 200 with phase launch.
p=$(port)
"$rocket" launch "$engines/tiny-bf16" --host 127.0.0.1 --port "$p" >"$work/good.log" 2>&1 &
server=$!
health=""
for _ in $(seq 1 600); do
  health=$(curl -s "http://127.0.0.1:$p/health")
  case "$health" in *'"launch"'*) break;; esac
  sleep 0.1
done
kill $server 2>/dev/null; wait $server 2>/dev/null
case "$health" in
  *'"launch"'*) echo "ok   good launch: /health $health; $(grep -c '\[countdown\]' "$work/good.log") countdown lines";;
  *) echo "FAIL good launch never reached phase launch: $health"; tail -n 5 "$work/good.log"; failures=$((failures+1));;
esac
grep '\[countdown\]' "$work/good.log"
exit $failures
