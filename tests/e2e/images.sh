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
rm -rf "$work"
set -e
xml_tools_tokenizer "$root" "$work/tokenizer"
# The same seed as the tiny bf16 fixture, so its golden's static-fire token holds (the text model is
# the fixture's; the tower follows it in the blob).
"$rocket" forge --fuel tiny --format bf16 --seed 1 --layout multimodal --expert-layout fused \
  --tokenizer "$work/tokenizer" --out "$work/fuel" --force
# The plan's own pixel bounds: forge writes the releases' preprocessor_config.json (256² to 4096²); a
# minimum of 128² instead makes images.mjs's 96x64 image 20 tokens (70 under the releases' bounds), so the
# answers' token counts show the server resizes by the plan's bounds. A config whose patch size is not
# the tower's is refused at build time, before anything is compiled.
python3 - "$work/fuel/preprocessor_config.json" "$work/bad_preprocessor.json" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
assert cfg["size"] == {"longest_edge": 16777216, "shortest_edge": 65536} and cfg["patch_size"] == 16, cfg
json.dump(dict(cfg, patch_size=14), open(sys.argv[2], "w"))
cfg["size"]["shortest_edge"] = 128 * 128
json.dump(cfg, open(sys.argv[1], "w"), indent=1)
PY
mkdir -p "$work/bad_fuel"
for f in "$work/fuel"/*; do ln -s "$f" "$work/bad_fuel/"; done
rm "$work/bad_fuel/preprocessor_config.json"; cp "$work/bad_preprocessor.json" "$work/bad_fuel/preprocessor_config.json"
if "$rocket" build "$work/bad_fuel" --booster host --out "$work/bad_engine" --force >"$work/bad_build.log" 2>&1 ||
   ! grep -q "preprocessor_config.json: patch_size 14 is not the vision tower's patch_size 16" "$work/bad_build.log"; then
  echo "FAIL a preprocessor_config.json inconsistent with the tower was not refused at build time:"; cat "$work/bad_build.log"
  exit 1
fi
echo "ok a preprocessor_config.json inconsistent with the tower is refused at build time"
"$rocket" build "$work/fuel" --booster host --out "$work/engine" --golden "$root/tests/golden/tiny_bf16.json" --force
python3 - "$work/engine/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["vision"]["processor"]
assert (p["source"], p["min_pixels"], p["max_pixels"], p["patch_size"], p["merge_size"]) == \
    ("preprocessor_config.json", 16384, 16777216, 16, 2), p
print("ok plan.json records the fuel's preprocessor_config.json:", p)
PY
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
