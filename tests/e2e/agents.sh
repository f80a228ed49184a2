#!/usr/bin/env bash
# A coding agent's own CLI (the version package-lock.json pins), run headless against `rocket serve` of
# the tiny host engine, completes a tool-using session: the first turn calls the agent's file-reading
# tool on a note in a scratch directory, the agent runs it and sends the result back, the next turn
# answers. The server's TEST-ONLY --force-tokens scripts the turns: the agent's requests carry the
# header x-rocket-force (its own custom-header setting), and the server takes the sequence
# "AGENT.N", N the tool results in the conversation (http/server.h).
#   agents.sh ROCKET WORK AGENT          # AGENT: claude | codex | qwen | opencode
#   agents.sh ROCKET WORK --engine       # fixture: the 32K-context engine every agent's test serves
# Every exchange goes through agent_recorder.mjs; agents_check.py then asserts that each answer was a
# 200 without an API error, that the note's random secret came back to the server in a tool result
# (the tool ran), that the last turn's answer reached the agent's output, and prints what each request
# carried (docs/agents.md lists it).
set -uo pipefail
rocket=$1 work=$2 agent=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
engine=$work/engines/tiny-agents
# The agents' prompts (system prompt and ~20 tool schemas) run to 15-25K tokens, and Qwen Code asks for
# max_tokens 32000 on top (chat completions refuse a prompt plus max_tokens past the context, as OpenAI does).
if [ "$agent" = --engine ]; then
  exec "$rocket" build "$work/fuels/tiny-bf16" --booster host --out "$engine" --max-context 65536 --prefill-chunk 256 \
    --max-streams 4 --golden "$root/tests/golden/tiny_bf16.json" --force
fi
. "$here/serve_lib.sh"
work=$work/agents/$agent
rm -rf "$work"; mkdir -p "$work/home" "$work/scratch"
bin=$root/node_modules/.bin
[ -x "$bin/$agent" ] || { echo "FAIL $bin/$agent is not installed: run npm install (scripts/setup.sh does)"; exit 1; }
port=$(free_port)
base=http://127.0.0.1:$port
key=sekrit
secret=note-$RANDOM-$RANDOM-$RANDOM
scratch=$work/scratch
echo "$secret" >"$scratch/note.txt"
final="The note is read: this agent session is complete."

# Turn 0: reason, then call the agent's file reader; turn 1 (one tool result back): answer.
case $agent in
  claude) call='{"name": "Read", "arguments": {"file_path": "'$scratch'/note.txt"}}' ;;
  codex) call='{"name": "exec_command", "arguments": {"cmd": "cat note.txt", "workdir": "'$scratch'"}}' ;;
  qwen) call='{"name": "read_file", "arguments": {"file_path": "'$scratch'/note.txt"}}' ;;
  opencode) call='{"name": "read", "arguments": {"filePath": "'$scratch'/note.txt"}}' ;;
  *) echo "FAIL unknown agent $agent"; exit 2 ;;
esac
python3 - "$work/forced.json" "$agent" "$call" "$final" <<'EOF'
import json, sys
path, agent, call, final = sys.argv[1:]
json.dump({f"{agent}.0": "<think>\nThe user wants the note: read it.\n</think>\n\n<tool_call>\n" + call + "\n</tool_call>",
           f"{agent}.1": "<think>\nThe tool returned the note.\n</think>\n\n" + final}, open(path, "w"))
EOF

"$rocket" serve "$engine" --host 127.0.0.1 --port "$port" --api-key "$key" --force-tokens "$work/forced.json" \
  --served-model-name tiny-bf16 claude-sonnet-4-5 >"$work/server.log" 2>&1 &
server=$!
recorder=""
trap 'kill $server $recorder 2>/dev/null; wait $server $recorder 2>/dev/null' EXIT
wait_healthy "$base" $server "$work/server.log"
node "$here/agent_recorder.mjs" "$base" "$work/exchanges.jsonl" >"$work/recorder.port" &
recorder=$!
for _ in $(seq 1 100); do [ -s "$work/recorder.port" ] && break; sleep 0.1; done
proxy=http://127.0.0.1:$(cat "$work/recorder.port")

prompt="Read the file note.txt in the current directory and tell me what it says."
# A first turn prefills ~20K tokens on the host engine, minutes on a loaded 2-core machine: every agent
# is told to wait for it (request and stream-idle timeouts) instead of retrying.
export HOME=$work/home XDG_CONFIG_HOME=$work/home/.config XDG_DATA_HOME=$work/home/.local/share \
  XDG_CACHE_HOME=$work/home/.cache XDG_STATE_HOME=$work/home/.local/state
cd "$scratch"
case $agent in
  claude)
    # Headless (-p), offline: no telemetry, error reports, update checks or other non-essential traffic.
    ANTHROPIC_BASE_URL=$proxy ANTHROPIC_API_KEY=$key ANTHROPIC_CUSTOM_HEADERS="x-rocket-force: claude" API_TIMEOUT_MS=900000 \
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 \
      timeout 900 "$bin/claude" -p "$prompt" --model claude-sonnet-4-5 --output-format json --allowedTools Read </dev/null \
      >"$work/out.txt" 2>"$work/agent.log"
    ;;
  codex)
    mkdir -p "$HOME/.codex"
    cat >"$HOME/.codex/config.toml" <<EOF
model = "tiny-bf16"
model_provider = "rocket"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.rocket]
name = "Rocket"
base_url = "$proxy/v1"
wire_api = "responses"
env_key = "ROCKET_API_KEY"
http_headers = { "x-rocket-force" = "codex" }
stream_idle_timeout_ms = 900000
EOF
    CODEX_HOME=$HOME/.codex ROCKET_API_KEY=$key timeout 900 "$bin/codex" exec --skip-git-repo-check \
      --output-last-message "$work/out.txt" "$prompt" </dev/null >"$work/agent.log" 2>&1
    ;;
  qwen)
    mkdir -p "$HOME/.qwen"
    cat >"$HOME/.qwen/settings.json" <<'EOF'
{"security": {"auth": {"selectedType": "openai"}},
 "model": {"generationConfig": {"customHeaders": {"x-rocket-force": "qwen"}, "timeout": 900000}},
 "privacy": {"usageStatisticsEnabled": false},
 "telemetry": {"enabled": false}}
EOF
    OPENAI_BASE_URL=$proxy/v1 OPENAI_API_KEY=$key OPENAI_MODEL=tiny-bf16 QWEN_CODE_SUPPRESS_YOLO_WARNING=1 \
      QWEN_STREAM_IDLE_TIMEOUT_MS=900000 QWEN_STREAM_MAX_LIFETIME_MS=900000 \
      timeout 900 "$bin/qwen" -p "$prompt" --yolo </dev/null >"$work/out.txt" 2>"$work/agent.log"
    ;;
  opencode)
    mkdir -p "$XDG_CONFIG_HOME/opencode"
    cat >"$XDG_CONFIG_HOME/opencode/opencode.json" <<EOF
{"\$schema": "https://opencode.ai/config.json",
 "provider": {"rocket": {"npm": "@ai-sdk/openai-compatible", "name": "Rocket",
   "options": {"baseURL": "$proxy/v1", "apiKey": "$key", "headers": {"x-rocket-force": "opencode"}, "timeout": 900000},
   "models": {"tiny-bf16": {"name": "tiny-bf16"}}}},
 "model": "rocket/tiny-bf16", "small_model": "rocket/tiny-bf16",
 "autoupdate": false, "share": "disabled"}
EOF
    OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1 \
      timeout 900 "$bin/opencode" run --model rocket/tiny-bf16 "$prompt" </dev/null >"$work/out.txt" 2>"$work/agent.log"
    ;;
esac
rc=$?
echo "--- $agent exited $rc; its output:"; cat "$work/out.txt"; echo
echo "--- its log (tail)"; tail -n 30 "$work/agent.log"
[ $rc -eq 0 ] || echo "FAIL $agent exited $rc"
python3 "$here/agents_check.py" "$agent" "$work/exchanges.jsonl" "$secret" "$work/out.txt" "$final" || rc=1
kill -0 $server 2>/dev/null || { echo "FAIL the server died"; rc=1; }
[ $rc -eq 0 ] || { echo "--- server log"; tail -n 50 "$work/server.log"; }
exit $rc
