#!/usr/bin/env bash
# Qwen3.5's XML tool calls end to end: the tiny fuel forged with our Qwen3.5-shaped chat template
# (tests/fixtures/xml_tools: content parts, namespace counters, XML calls written with |items, tool
# results grouped), its host engine built and served, driven by the `openai` npm client
# (tests/e2e/xml_tools.mjs says what each test checks).
#   xml_tools.sh ROCKET WORK
# The server runs with the TEST-ONLY --force-tokens option: the sequences below are produced only for
# requests whose `user` names them; every other request samples.
set -uo pipefail
rocket=$1 work=$2/xml_tools
here=$(cd "$(dirname "$0")" && pwd) root=$(cd "$(dirname "$0")/../.." && pwd)
. "$here/serve_lib.sh"
rm -rf "$work"
set -e
xml_tools_tokenizer "$root" "$work/tokenizer"
# The same seed as the tiny bf16 fixture, so its golden's static-fire token holds.
"$rocket" forge --fuel tiny --format bf16 --seed 1 --tokenizer "$work/tokenizer" --out "$work/fuel" --force
"$rocket" build "$work/fuel" --booster host --out "$work/engine" --golden "$root/tests/golden/tiny_bf16.json" --force
set +e
port=$(free_port)
base=http://127.0.0.1:$port

# With thinking on, the template's generation prompt opens <think>: each sequence starts inside
# reasoning. *_continues sequences continue the opening of a call that tool_choice puts in the prompt.
cat >"$work/forced.json" <<'JSON'
{
  "typed": "The user wants a file.\n</think>\n\n<tool_call>\n<function=write_file>\n<parameter=path>\nnotes/a.txt\n</parameter>\n<parameter=text>\nline one\n\n  line two\n</parameter>\n<parameter=count>\n3\n</parameter>\n<parameter=mode>\n{\"append\": true, \"perm\": 420}\n</parameter>\n<parameter=tags>\n[\"x\", 2, null]\n</parameter>\n<parameter=force>\nfalse\n</parameter>\n</function>\n</tool_call>",
  "loose": "Sloppy.\n</think>\n\n<tool_call>\n<function=write_file>\n<parameter=count>\nthree\n</parameter>\n<parameter=note>\n{\"a\": 1}\n</parameter>\n<parameter=path>\n42\n</parameter>\n</function>\n</tool_call>",
  "two_calls": "Two cities.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
  "in_reasoning": "I should look it up.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>",
  "malformed": "Hm.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>",
  "answer": "Paris is sunny.\n</think>\n\nIt is sunny in Paris, 21 degrees.",
  "named_continues": "<parameter=city>\nLyon\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNice\n</parameter>\n</function>\n</tool_call>",
  "required_continues": "get_weather>\n<parameter=city>\nBrest\n</parameter>\n</function>\n</tool_call>"
}
JSON

"$rocket" serve "$work/engine" --host 127.0.0.1 --port "$port" --force-tokens "$work/forced.json" >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
wait_healthy "$base" $server "$work/server.log"

page_tokens=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["kv_cache"]["page_tokens"])' "$work/engine/plan.json")
node "$here/xml_tools.mjs" "$base" engine "$root/tests/fixtures/xml_tools/chat_template.jinja" "$work/tokenizer" "$page_tokens"
rc=$?
kill -0 $server 2>/dev/null || { echo "FAIL the server died"; rc=1; }
echo "--- server log"; cat "$work/server.log"
exit $rc
