#!/usr/bin/env python3
"""Agent-style workload driver for a running Rocket server (issue 5).

Replays a forked-prefix trace against the OpenAI-compatible HTTP API: every session shares one long
system prompt and a set of tool definitions; each turn appends the assistant's reply as an OpenAI client
sends it back (content, tool calls with string arguments, reasoning_content only with --keep-reasoning),
one tool result per call and a new user message to the session's own history; some sessions fork from
another session's history mid-way (an agent branching). Runs the trace at each concurrency level and
reports, per level: aggregate and per-stream tok/s, TTFT and inter-token latency p50/p99, the prefix-
cache hit rate in prompt tokens (usage.prompt_tokens_details.cached_tokens / prompt_tokens), the cache's
resident pages (GET /stats) and errors; per turn, the hit rate and how many of the previous turn's
tokens the cache could not reuse because the re-rendered history diverged from what the model generated.
Then one probe: TTFT of a long prompt served from the cache vs. a cold short prompt.

    python3 bench/serve_agents.py --base http://127.0.0.1:8000 [--concurrency 1,4,16,32,64]
        [--sessions-per-stream 2] [--turns 3] [--max-tokens 16] [--system-words 900]
        [--api-key K] [--keep-reasoning] [--markdown FILE] [--min-hit-rate X]

Only the Python standard library; one thread per concurrent client. Exit 1 on any request error (or
a hit rate below --min-hit-rate), so CI can run it at small scale.
"""
import argparse
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "client"))
from server import Server  # noqa: E402 - tools/client is not a package
from sse import SseStream  # noqa: E402

WORDS = ("agent tool call result plan step file search query answer context memory page cache token stream "
         "branch merge review test build deploy config value error retry budget latency schedule queue").split()


def system_prompt(words, seed):
    rng = random.Random(seed)
    body = " ".join(rng.choice(WORDS) for _ in range(words))
    return "You are a coding agent. Follow the rules below exactly.\n" + body


def tools():
    def tool(name, desc, props):
        return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
            "type": "object", "properties": {k: {"type": "string", "description": v} for k, v in props.items()},
            "required": list(props)}}}
    return [tool("read_file", "Read a file from the workspace.", {"path": "file path"}),
            tool("search", "Search the code base for a pattern.", {"pattern": "regular expression", "path": "dir"}),
            tool("run_tests", "Run the test suite and report failures.", {"filter": "test name filter"})]


class Client(Server):
    def chat_stream(self, body):
        """One streamed chat completion. Returns a dict of timings, text and usage (or error)."""
        t0 = time.perf_counter()
        c, r = self.post("/v1/chat/completions", body)
        if r.status != 200:
            err = r.read().decode(errors="replace")
            c.close()
            return {"error": f"HTTP {r.status}: {err[:200]}"}
        stamps, text, reasoning, calls, usage, finish = [], [], [], [], None, None
        for chunk in SseStream(r):
            if chunk.get("usage"):
                usage = chunk["usage"]
            for ch in chunk.get("choices", []):
                d = ch.get("delta", {})
                piece = (d.get("content") or "") + (d.get("reasoning_content") or "")
                for tc in d.get("tool_calls") or []:
                    piece += json.dumps(tc)
                    if tc.get("id"):  # the first delta of a call: id, type and name
                        calls.append({"id": tc["id"], "type": "function",
                                      "function": {"name": tc["function"]["name"], "arguments": ""}})
                    calls[tc["index"]]["function"]["arguments"] += (tc.get("function") or {}).get("arguments") or ""
                if piece:
                    stamps.append(time.perf_counter())
                    text.append(d.get("content") or "")
                    reasoning.append(d.get("reasoning_content") or "")
                if ch.get("finish_reason"):
                    finish = ch["finish_reason"]
        c.close()
        if usage is None:
            return {"error": "no usage chunk"}
        return {"t0": t0, "stamps": stamps, "text": "".join(text), "reasoning": "".join(reasoning), "calls": calls,
                "usage": usage, "finish": finish, "end": time.perf_counter()}


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def assistant_turn(res, keep_reasoning):
    """The assistant message as an OpenAI client sends it back: content (null when the turn was only
    calls), the calls with their arguments as the JSON strings the server sent, reasoning_content only
    when asked (most clients drop it)."""
    m = {"role": "assistant", "content": res["text"] if res["text"] or not res["calls"] else None}
    if res["calls"]:
        m["tool_calls"] = res["calls"]
    if keep_reasoning and res["reasoning"]:
        m["reasoning_content"] = res["reasoning"]
    return m


def run_level(client, args, concurrency, sys_prompt, tool_defs, seed):
    """`concurrency` clients, each driving sessions_per_stream sessions of `turns` turns in sequence."""
    results, lock = [], threading.Lock()
    # The cache's page size: from /stats, or (a replicated front keeps no pages) the model's metadata.
    page_tokens = (client.get_json("/stats")[1] or {}).get("page_tokens") or \
        ((client.get_json("/v1/models")[1] or {}).get("data") or [{}])[0].get("rocket", {}).get("kv_page_tokens", 1)
    page_tokens = max(1, int(page_tokens))
    histories = {}  # session key -> messages after its last turn, for forks

    def session(worker, s):
        rng = random.Random(seed * 1000 + worker * 10 + s)
        key = (worker, s)
        with lock:
            donors = [k for k in histories if k != key]
        if donors and rng.random() < args.fork_rate:
            with lock:
                msgs = list(histories[rng.choice(donors)])  # fork: branch from another session's history
        else:
            msgs = [{"role": "system", "content": sys_prompt}]
        prev = None  # this session's previous turn: what the cache could hold of it
        for turn in range(args.turns):
            msgs.append({"role": "user", "content": f"Task {worker}.{s}.{turn}: " +
                         " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40)))})
            body = {"model": args.model, "messages": msgs, "tools": tool_defs, "max_tokens": args.max_tokens,
                    "temperature": 0.7, "seed": rng.randint(0, 2**31), "stream": True,
                    "stream_options": {"include_usage": True}}
            res = client.chat_stream(body)
            res["turn"] = turn
            if prev and "error" not in res:
                # Everything the previous turn computed (its prompt, and its completion less the last
                # token) is in the cache, resumable up to its last page boundary; a shortfall is where
                # the re-rendered history diverged from what the model generated.
                reusable = prev["usage"]["prompt_tokens"] + prev["usage"]["completion_tokens"] - 1
                cached = (res["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                res["diverged_tokens"] = max(0, reusable // page_tokens * page_tokens - cached)
            with lock:
                results.append(res)
            if "error" in res:
                return
            msgs.append(assistant_turn(res, args.keep_reasoning))
            for i, call in enumerate(res["calls"]):
                msgs.append({"role": "tool", "tool_call_id": call["id"],
                             "content": f"result {i} of {call['function']['name']}: ok"})
            prev = res
            with lock:
                histories[key] = list(msgs)

    def worker(w):
        for s in range(args.sessions_per_stream):
            session(w, s)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in results if "error" not in r]
    errors = [r["error"] for r in results if "error" in r]
    gen = sum(r["usage"]["completion_tokens"] for r in ok)
    prompt = sum(r["usage"]["prompt_tokens"] for r in ok)
    cached = sum((r["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0) for r in ok)
    ttft = [(r["stamps"][0] - r["t0"]) * 1e3 for r in ok if r["stamps"]]
    itl = [(b - a) * 1e3 for r in ok for a, b in zip(r["stamps"], r["stamps"][1:])]
    per_stream = [r["usage"]["completion_tokens"] / (r["end"] - r["t0"]) for r in ok if r["end"] > r["t0"]]
    by_turn = []
    for t in range(args.turns):
        rs = [r for r in ok if r["turn"] == t]
        tp = sum(r["usage"]["prompt_tokens"] for r in rs)
        tc = sum((r["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0) for r in rs)
        dv = [r["diverged_tokens"] for r in rs if "diverged_tokens" in r]
        by_turn.append({"turn": t, "requests": len(rs), "hit_rate": tc / tp if tp else 0.0,
                        "calls": sum(len(r["calls"]) for r in rs),
                        "diverged_turns": sum(1 for d in dv if d), "diverged_tokens_mean": statistics.mean(dv) if dv else 0.0})
    status, metrics = client.get_json("/stats")
    return {"by_turn": by_turn, "concurrency": concurrency, "requests": len(results), "errors": len(errors), "error_samples": errors[:3],
            "wall_s": wall, "completion_tokens": gen, "agg_tok_s": gen / wall if wall else 0,
            "stream_tok_s": statistics.mean(per_stream) if per_stream else 0,
            "ttft_p50_ms": pct(ttft, 50), "ttft_p99_ms": pct(ttft, 99), "itl_p50_ms": pct(itl, 50),
            "itl_p99_ms": pct(itl, 99), "prompt_tokens": prompt, "cached_tokens": cached,
            "hit_rate": cached / prompt if prompt else 0.0,
            "pages_resident": (metrics or {}).get("pages_cached") if status == 200 else None,
            "pages": (metrics or {}).get("pages") if status == 200 else None}


def probe_ttft(client, args, sys_prompt, tool_defs):
    """TTFT of a cold short prompt vs. the same long prompt twice (second: from the cache)."""
    def ttft(messages):
        res = client.chat_stream({"model": args.model, "messages": messages, "max_tokens": 1, "temperature": 0,
                                  "stream": True, "stream_options": {"include_usage": True}})
        if "error" in res:
            raise RuntimeError(res["error"])
        first = res["stamps"][0] if res["stamps"] else res["end"]
        cached = (res["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        return (first - res["t0"]) * 1e3, res["usage"]["prompt_tokens"], cached

    nonce = random.Random(time.time()).randint(0, 10**9)
    short = ttft([{"role": "user", "content": f"Hello {nonce}, what is a page cache?"}])
    long_msgs = [{"role": "system", "content": system_prompt(args.system_words * 2, nonce)},
                 {"role": "user", "content": "Summarise the rules."}]
    cold = ttft(long_msgs)
    warm = ttft(long_msgs)
    return {"short_cold": short, "long_cold": cold, "long_cached": warm}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default="")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--concurrency", default="1,4,16,32,64")
    ap.add_argument("--sessions-per-stream", type=int, default=2)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--system-words", type=int, default=900)
    ap.add_argument("--fork-rate", type=float, default=0.3)
    ap.add_argument("--keep-reasoning", action="store_true",
                    help="send reasoning_content back with the assistant turns (most clients drop it)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--markdown", default="")
    ap.add_argument("--min-hit-rate", type=float, default=0.0)
    args = ap.parse_args()

    client = Client(args.base, args.api_key)
    status, models = client.get_json("/v1/models")
    if status != 200:
        sys.exit(f"GET /v1/models: HTTP {status}")
    if not args.model:
        args.model = models["data"][0]["id"]
    sys_prompt, tool_defs = system_prompt(args.system_words, args.seed), tools()

    rows = []
    for level in [int(x) for x in args.concurrency.split(",")]:
        r = run_level(client, args, level, sys_prompt, tool_defs, args.seed + level)
        rows.append(r)
        print(json.dumps(r), flush=True)
    probe = probe_ttft(client, args, sys_prompt, tool_defs)
    print(json.dumps({"probe": probe}), flush=True)

    lines = ["| clients | requests | errors | agg tok/s | per-stream tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms "
             "| hit rate (tokens) | pages resident |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['concurrency']} | {r['requests']} | {r['errors']} | {r['agg_tok_s']:.1f} | "
                     f"{r['stream_tok_s']:.1f} | {r['ttft_p50_ms']:.1f} / {r['ttft_p99_ms']:.1f} | "
                     f"{r['itl_p50_ms']:.1f} / {r['itl_p99_ms']:.1f} | {100 * r['hit_rate']:.1f}% "
                     f"({r['cached_tokens']}/{r['prompt_tokens']}) | {r['pages_resident']} / {r['pages']} |")
    lines += ["", "Per turn (the next turn sends the assistant message back as an OpenAI client does, calls with "
              "string arguments, then one tool result per call; diverged = tokens of the previous turn's prompt "
              "and completion, up to its last cache page boundary, that the cache could not reuse):", "",
              "| clients | turn | requests | hit rate | tool calls | turns diverged | mean tokens lost |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        for t in r["by_turn"]:
            lines.append(f"| {r['concurrency']} | {t['turn']} | {t['requests']} | {100 * t['hit_rate']:.1f}% | "
                         f"{t['calls']} | {t['diverged_turns']} | {t['diverged_tokens_mean']:.1f} |")
    p = probe
    lines.append("")
    lines.append(f"TTFT probe: cold short prompt ({p['short_cold'][1]} tokens) {p['short_cold'][0]:.1f} ms; "
                 f"long prompt ({p['long_cold'][1]} tokens) cold {p['long_cold'][0]:.1f} ms, "
                 f"cached ({p['long_cached'][2]} tokens from the cache) {p['long_cached'][0]:.1f} ms")
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    total_errors = sum(r["errors"] for r in rows)
    if total_errors:
        print(f"FAIL: {total_errors} request errors, e.g. {[r['error_samples'] for r in rows if r['errors']]}",
              file=sys.stderr)
        return 1
    status, stats = client.get_json("/stats")
    if status == 200 and (stats or {}).get("refused_steps", 0):
        print(f"FAIL: the engine refused {stats['refused_steps']} steps the scheduler built (the step contract)",
              file=sys.stderr)
        return 1
    overall = sum(r["cached_tokens"] for r in rows) / max(1, sum(r["prompt_tokens"] for r in rows))
    if overall < args.min_hit_rate:
        print(f"FAIL: prefix-cache hit rate {overall:.3f} below {args.min_hit_rate}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
