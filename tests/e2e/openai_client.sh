#!/usr/bin/env bash
# The OpenAI-compatible server on the tiny bf16 host engine, driven by the official `openai` npm client
# (tests/e2e/openai_client.mjs says what each test checks), then /v1/responses and /v1/messages through
# the OpenAI and Anthropic clients (responses_api.mjs, messages_api.mjs).
#   openai_client.sh ROCKET WORK
# The server runs with the TEST-ONLY --force-tokens option: the sequences below are produced only for
# requests whose `user` names them (the tool-call and reasoning tests); every other test samples.
set -uo pipefail
rocket=$1 work=$2/openai_client
engine=$2/engines/tiny-bf16 key=sekrit
here=$(cd "$(dirname "$0")" && pwd)
. "$here/serve_lib.sh"
rm -rf "$work"; mkdir -p "$work"
port=$(free_port)
base=http://127.0.0.1:$port

# Strings are encoded with the engine's tokenizer, so <think>, <tool_call> and friends are the added
# tokens the model itself would emit. The *_continues sequences continue the opening of a call that
# tool_choice puts at the end of the prompt.
cat >"$work/forced.json" <<'EOF'
{
  "tool_call": "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>",
  "two_calls": "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"Europe/Paris\"}}\n</tool_call>",
  "malformed": "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>",
  "think_then_call": "<think>\nThe user wants the weather in Paris.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
  "reasoning": "<think>\nTwo plus two is four.\n</think>\n\nThe answer is 4.",
  "stop_split": "Alpha beta gamma delta epsilon",
  "eos_inside": "First part.<|im_end|> Second part.",
  "named_continues": "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
  "required_continues": "get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>",
  "calls_then_text": "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"Europe/Paris\"}}\n</tool_call>\nBoth calls are out; what follows is a long tail that a stopped request never computes. It goes on for a while, sentence after sentence, so that the engine would need many more steps to reach its end: one, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve, thirteen, fourteen, fifteen, sixteen, seventeen, eighteen, nineteen, twenty, and then it says the numbers again, one, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve, thirteen, fourteen, fifteen, sixteen, seventeen, eighteen, nineteen, twenty, and ends here."
}
EOF

# Served under the engine directory's name and an alias (--served-model-name, vLLM's flag).
"$rocket" serve "$engine" --host 127.0.0.1 --port "$port" --api-key "$key" --queue 1 --force-tokens "$work/forced.json" \
  --served-model-name tiny-bf16 qwen3.5-tiny \
  >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT

wait_healthy "$base" $server "$work/server.log"

node "$here/openai_client.mjs" "$base" "$key" tiny-bf16 "$work/server.log" qwen3.5-tiny
rc=$?
node "$here/responses_api.mjs" "$base" "$key" tiny-bf16 || rc=1
node "$here/messages_api.mjs" "$base" "$key" tiny-bf16 || rc=1
grep -q 'TEST-ONLY' "$work/server.log" || { echo "FAIL the log does not mark --force-tokens as test-only"; rc=1; }
kill -0 $server 2>/dev/null || { echo "FAIL the server died"; rc=1; }
echo "--- server log"; cat "$work/server.log"
exit $rc
