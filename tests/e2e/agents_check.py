#!/usr/bin/env python3
# The checks of one agent's session (tests/e2e/agents.sh), over the exchanges agent_recorder.mjs logged:
#   - every exchange was answered 200 with no API error in it (a stream's events read one by one);
#   - the scripted turns ran: a first turn (no tool result yet) and a turn after one;
#   - the note's secret reached the server in a later request: the agent ran the tool and sent back
#     what it read; Claude Code's and Codex's next request carries the first turn's sealed reasoning;
#   - the last turn's answer reached the agent's output.
# Then prints what the agent's requests carried: top-level fields, tool types, input item and block
# types, headers (docs/agents.md lists them).
#   agents_check.py AGENT EXCHANGES.jsonl SECRET OUTPUT_FILE FINAL_TEXT
import json
import sys

agent, log, secret, output, final = sys.argv[1:]
exchanges = [json.loads(line) for line in open(log) if line.strip()]
failures = []
if not exchanges:
    failures.append("the agent sent no request")
for i, x in enumerate(exchanges):
    if x["status"] != 200 or x["errors"]:
        failures.append(f"exchange {i} {x['method']} {x['path']}: status {x['status']}, errors {x['errors']}")
    elif isinstance(x.get("body"), dict) and x["body"].get("stream") and x.get("events", 0) == 0:
        failures.append(f"exchange {i} {x['method']} {x['path']}: a stream asked for, no event read from the answer")

forced = [x for x in exchanges if "x-rocket-force" in x.get("headers", {})]
if len(forced) < len(exchanges):
    failures.append(f"{len(exchanges) - len(forced)} requests without the x-rocket-force header: the agent's header "
                    "setting did not reach every request")
with_secret = [i for i, x in enumerate(exchanges) if secret in json.dumps(x.get("body"))]
if not with_secret:
    failures.append(f"no request carried the note's secret {secret}: the tool did not run, or its result was not sent")
# Claude Code and Codex carry reasoning between turns as the server sealed it (a thinking block's
# signature, a reasoning item's encrypted_content): it must come back, for the template to render it.
if agent in ("claude", "codex") and not any("rocket.r1." in json.dumps(x.get("body")) for x in exchanges):
    failures.append("the first turn's sealed reasoning did not come back in the next request")
out = open(output, errors="replace").read()
if final not in out:
    failures.append(f"the agent's output lacks the last turn's answer {final!r}")


# What the requests carried.
def kinds(body):
    fields = sorted(body) if isinstance(body, dict) else []
    tools = sorted({t.get("type", "(none)") for t in body.get("tools", [])}) if isinstance(body, dict) else []
    items = set()
    for m in body.get("messages", []) + (body.get("input") if isinstance(body.get("input"), list) else []):
        if not isinstance(m, dict):
            continue
        items.add(f"{m.get('type', 'message')}:{m.get('role', '')}")
        if isinstance(m.get("content"), list):
            items.update(f"  block {c.get('type')}" for c in m["content"] if isinstance(c, dict))
    return fields, tools, sorted(items)


print(f"--- what {agent} sent ({len(exchanges)} requests)")
seen = set()
for x in exchanges:
    if not isinstance(x.get("body"), dict):
        continue
    fields, tools, items = kinds(x["body"])
    line = f"{x['method']} {x['path']}\n  fields: {', '.join(fields)}\n  tools: {', '.join(tools)}\n  items: {'; '.join(items)}"
    settings = {k: x["body"][k] for k in fields if k not in ("messages", "input", "tools", "system", "instructions")}
    line += "\n  values: " + json.dumps(settings)[:1500]
    line += "\n  headers: " + json.dumps(x.get("headers", {}))
    if line not in seen:
        seen.add(line)
        print(line)
for f in failures:
    print("FAIL", f)
if not failures:
    print(f"OK {agent}: {len(exchanges)} requests answered 200, the tool's result came back "
          f"(request {with_secret[0]}), the answer reached the output")
sys.exit(1 if failures else 0)
