#!/usr/bin/env python3
"""Soak benchmark (issue 25; not CI): many streaming clients for minutes against one engine.

Launches `ENGINE/bin/rocket-engine launch` itself (so it can read the process's resident memory) and
runs --clients threads until --minutes have passed. Each client sends a mix of well-formed requests
(chat and completions, streamed and whole, prompts from a few words to ~1500 tokens, outputs of 1 to
300 tokens, greedy or seeded sampling) and hangs up at a random point on --hangup of them; one client
in --hostile-every sends malformed requests between its well-formed ones (JSON nested 20,000 deep, a
body over the size limit, bad parameters, a prompt over the context, broken JSON), each of which must
get its 4xx in OpenAI's error shape.

At the end, with every client gone:
  - errors: well-formed requests that were not hung up and did not complete (non-200, an error event,
    no finish_reason, no [DONE]); malformed ones answered with anything but their 4xx;
  - leaks: the loop's page and snapshot counters (read_counters) must account for every page (free,
    cached by the prefix cache, or the one padding page) and every snapshot (free or cached);
  - resident memory of the server at launch, after warm-up, at each minute and at the end (VmRSS, VmHWM);
  - exactness: greedy requests come from a fixed pool of prompts; every completed greedy response must
    be token-identical (the logprobs' tokens where asked for, else the text and its token count) to a
    cold run of the same prompt, each on a freshly launched server with nothing cached and no
    neighbours (stopped with SIGTERM, which must exit 0 after draining).

    nice -n 10 python3 bench/soak.py --engine build/e2e/engines/tiny-bf16 [--clients 64] [--minutes 10]
        [--markdown bench/results/host-soak.md]

Only the Python standard library. Exit 1 on any error, leak or mismatch.
"""
import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "client"))
from sse import SseStream  # noqa: E402 - tools/client is not a package

WORDS = ("the of and to in is was for on that with as by at from it an be this are or his which had not "
         "rocket engine booster fuel plan cache page token stream stage orbit thrust nozzle valve pump "
         "tank launch countdown ignition static fire upright telemetry guidance apogee perigee").split()


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


# ---- the server ----

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    def __init__(self, engine, log, extra=()):
        self.port = free_port()
        self.log = open(log, "w")
        self.proc = subprocess.Popen([str(Path(engine) / "bin" / "rocket-engine"), "launch", "--host", "127.0.0.1",
                                      "--port", str(self.port), "--queue", "256", *extra],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        while True:
            if self.proc.poll() is not None:
                sys.exit(f"the engine exited during its countdown (log: {log})")
            try:
                if get(self.port, "/health")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)

    def rss(self):
        """VmRSS and VmHWM in MiB."""
        fields = dict(line.split(":", 1) for line in open(f"/proc/{self.proc.pid}/status"))
        return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))

    def stop(self, timeout=60):
        """SIGTERM (a graceful drain); the exit status."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return "killed after timeout"


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


# The loop's counters, from GET /stats (JSON; /metrics is the Prometheus exposition, whose names
# differ): requests in flight and every page and state snapshot by where it is.
COUNTERS = ("active", "waiting", "pages", "pages_free", "pages_cached", "snapshots", "snapshots_free",
            "snapshots_cached", "refused_steps")


def read_counters(port):
    status, body = get(port, "/stats")
    if status != 200:
        raise RuntimeError(f"/stats answered {status}")
    m = json.loads(body)
    missing = [k for k in COUNTERS if k not in m]
    if missing:
        raise RuntimeError(f"/stats lacks {missing}")
    return {k: m[k] for k in COUNTERS}


# ---- requests ----

def greedy_pool(seed, n, context):
    """Fixed greedy prompts of mixed lengths; some share a system prompt (prefix-cache hits)."""
    rng = random.Random(seed)
    systems = [words(rng, k) for k in (40, 300, 900)]
    pool = []
    for i in range(n):
        max_tokens = rng.choice([1, 4, 16, 64, 200])
        logprobs = i % 2 == 0
        if i % 3 == 0:
            toks = min(rng.choice([5, 60, 400, 1200]), context - max_tokens - 64)
            body = {"model": None, "prompt": words(rng, toks), "max_tokens": max_tokens, "temperature": 0}
            if logprobs:
                body["logprobs"] = 0
            pool.append(("/v1/completions", body))
        else:
            msgs = []
            if i % 3 == 1:
                msgs.append({"role": "system", "content": rng.choice(systems)})
            msgs.append({"role": "user", "content": words(rng, rng.choice([3, 30, 150]))})
            body = {"model": None, "messages": msgs, "max_tokens": max_tokens, "temperature": 0}
            if logprobs:
                body["logprobs"] = True
            pool.append(("/v1/chat/completions", body))
    return pool


def sampled(rng, context):
    """A fresh seeded-sampling request."""
    max_tokens = rng.choice([1, 8, 32, 120, 300])
    if rng.random() < 0.3:
        toks = min(rng.choice([3, 50, 500, 1400]), context - max_tokens - 64)
        return "/v1/completions", {"model": None, "prompt": words(rng, toks), "max_tokens": max_tokens,
                                   "temperature": 0.9, "top_p": 0.95, "seed": rng.randint(0, 2**31)}
    msgs = [{"role": "user", "content": words(rng, rng.choice([2, 20, 200, 800]))}]
    return "/v1/chat/completions", {"model": None, "messages": msgs, "max_tokens": max_tokens, "temperature": 0.8,
                                    "seed": rng.randint(0, 2**31)}


def malformed(rng, model, context, body_limit):
    """(name, path, raw body, expected status)."""
    chat = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    kind = rng.randrange(9)
    if kind == 0:
        deep = '{"a":' * 20000 + "1" + "}" * 20000
        return ("deep tool schema", "/v1/chat/completions",
                '{"model":"%s","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",'
                '"function":{"name":"f","parameters":%s}}]}' % (model, deep), 400)
    if kind == 1:
        return "deep messages", "/v1/chat/completions", '{"messages":' + "[" * 50000 + "]" * 50000 + "}", 400
    if kind == 2:
        pad = "x" * (body_limit + 1024)
        return "huge body", "/v1/chat/completions", json.dumps({**chat, "user": pad}), 413
    if kind == 3:
        return "broken JSON", "/v1/chat/completions", '{"model": "%s", "messages": [' % model, 400
    if kind == 4:
        bad = rng.choice([{"temperature": 7}, {"top_p": 0}, {"max_tokens": -5}, {"max_tokens": 2**63 - 1},
                          {"n": 100000}, {"logprobs": True, "top_logprobs": 50}, {"stop": ["a", "b", "c", "d", "e"]},
                          {"stream_options": 5}, {"messages": []}, {"seed": "x"}])
        return f"bad param {list(bad)[0]}", "/v1/chat/completions", json.dumps({**chat, **bad}), 400
    if kind == 5:
        return "unknown model", "/v1/chat/completions", json.dumps({**chat, "model": "nope"}), 404
    if kind == 6:
        return ("prompt over the context", "/v1/completions",
                json.dumps({"model": model, "prompt": "token " * (context + 500), "max_tokens": 1}), 400)
    if kind == 7:
        return ("token id outside the vocabulary", "/v1/completions",
                json.dumps({"model": model, "prompt": [1, 2, 999999999], "max_tokens": 1}), 400)
    return "max_tokens past the context", "/v1/chat/completions", json.dumps({**chat, "max_tokens": context}), 400


def post(port, path, body, stream, hangup_after=None):
    """One request. Returns (status, outcome): outcome is {"hung_up": True}, or the parsed result with
    "text", "tokens" (logprobs' tokens or None), "completion_tokens", "finish", "error"."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    raw = body if isinstance(body, str) else json.dumps(body)
    try:
        c.request("POST", path, body=raw.encode(), headers={"Content-Type": "application/json"})
        if hangup_after == 0:
            c.close()
            return None, {"hung_up": True}
        r = c.getresponse()
    except (BrokenPipeError, ConnectionResetError) as e:
        # The server may answer an oversized body before reading it and close the connection.
        c.close()
        return None, {"error": f"connection: {e}"}
    if r.status != 200 or not stream:
        data = r.read()
        c.close()
        try:
            j = json.loads(data)
        except ValueError:
            return r.status, {"error": f"not JSON: {data[:200]!r}"}
        if r.status != 200:
            return r.status, {"error": j.get("error"), "body": j}
        ch = j["choices"][0]
        if "message" in ch:
            m = ch["message"]
            text = (m.get("reasoning_content") or "") + "|" + (m.get("content") or "")
        else:
            text = ch["text"]
        return r.status, {"text": text, "tokens": logprob_tokens(ch), "finish": ch["finish_reason"],
                          "completion_tokens": j["usage"]["completion_tokens"], "error": None}
    # Chat: the reasoning, then the content (no request has tools), as the whole response is compared.
    reasoning, text, tokens, finish, usage, error, chunks = [], [], [], None, None, None, 0
    sse = SseStream(r)
    for chunk in sse:
        if "error" in chunk:
            error = chunk["error"]
            continue
        chunks += 1
        if hangup_after is not None and chunks >= hangup_after:
            c.close()
            return 200, {"hung_up": True}
        if chunk.get("usage"):
            usage = chunk["usage"]
        for ch in chunk.get("choices", []):
            d = ch.get("delta")
            if d is None:
                text.append(ch.get("text") or "")
            else:
                reasoning.append(d.get("reasoning_content") or "")
                text.append(d.get("content") or "")
            t = logprob_tokens(ch)
            if t:
                tokens += t
            if ch.get("finish_reason"):
                finish = ch["finish_reason"]
    c.close()
    if not sse.done:
        error = error or "stream ended without [DONE]"
    joined = "".join(reasoning) + "|" + "".join(text) if path.endswith("chat/completions") else "".join(text)
    return 200, {"text": joined, "tokens": tokens or None, "finish": finish, "error": error,
                 "completion_tokens": usage["completion_tokens"] if usage else None}


def logprob_tokens(choice):
    lp = choice.get("logprobs")
    if not lp:
        return None
    if "content" in lp:  # chat
        return [t["token"] for t in lp["content"] or []]
    return list(lp.get("tokens") or [])  # completions


# ---- the soak ----

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", required=True)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--hangup", type=float, default=0.3, help="fraction of requests hung up at a random point")
    ap.add_argument("--hostile-every", type=int, default=8, help="one client in this many sends malformed requests")
    ap.add_argument("--greedy", type=float, default=0.5, help="fraction of requests from the greedy pool")
    ap.add_argument("--pool", type=int, default=24, help="distinct greedy prompts")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log", default="/tmp/rocket_soak.log")
    ap.add_argument("--markdown")
    ap.add_argument("--mismatch-ok", action="store_true",
                    help="report greedy responses that differ from their cold run without failing: for engines whose "
                         "kernels are not batch-invariant (the h200's: bench/results/h200-soak.md says why)")
    args = ap.parse_args()

    server = Server(args.engine, args.log)
    status, body = get(server.port, "/v1/models")
    meta = json.loads(body)["data"][0]
    model, context = meta["id"], meta["rocket"]["max_context"]
    body_limit = (1 << 20) + 64 * context  # default_max_body_bytes (src/http/server.h)
    pool = greedy_pool(args.seed, args.pool, context)
    for _, b in pool:
        b["model"] = model
    rss_start = server.rss()
    print(f"soak: {args.clients} clients for {args.minutes} min against {model} (context {context}), "
          f"RSS {rss_start[0]:.0f} MiB", flush=True)

    lock = threading.Lock()
    tally = {"requests": 0, "completed": 0, "hung_up": 0, "errors": 0, "malformed": 0, "malformed_wrong": 0,
             "greedy_completed": 0, "tokens": 0}
    errors, wrong = [], []
    greedy_seen = {}  # pool index -> list of outcomes
    deadline = time.monotonic() + args.minutes * 60
    rss_warm = [None]

    def client(w):
        rng = random.Random(args.seed * 7919 + w)
        hostile = args.hostile_every > 0 and w % args.hostile_every == args.hostile_every - 1
        while time.monotonic() < deadline:
            if hostile and rng.random() < 0.5:
                name, path, raw, want = malformed(rng, model, context, body_limit)
                st, out = post(server.port, path, raw, stream=False)
                shaped = isinstance(out.get("error"), dict) and "message" in out["error"] and "type" in out["error"]
                # An oversized body may be refused before it is read, the reset reaching the client first.
                reset_413 = want == 413 and st is None
                with lock:
                    tally["malformed"] += 1
                    if not ((st == want and shaped) or reset_413):
                        tally["malformed_wrong"] += 1
                        wrong.append(f"{name}: wanted {want}, got {st} {str(out)[:200]}")
                continue
            g = rng.random() < args.greedy
            if g:
                gi = rng.randrange(len(pool))
                path, body = pool[gi]
            else:
                path, body = sampled(rng, context)
                body["model"] = model
            stream = rng.random() < 0.85
            body = {**body, "stream": stream}
            if stream:
                body["stream_options"] = {"include_usage": True}
            hang = None
            if rng.random() < args.hangup:
                hang = rng.choice([0, 1, 2, 5, 20]) if stream else 0
            st, out = post(server.port, path, body, stream, hang)
            with lock:
                tally["requests"] += 1
                if out.get("hung_up"):
                    tally["hung_up"] += 1
                elif st != 200 or out.get("error") or not out.get("finish"):
                    tally["errors"] += 1
                    errors.append(f"{path} {st}: {str(out.get('error'))[:300]}")
                else:
                    tally["completed"] += 1
                    tally["tokens"] += out["completion_tokens"] or 0
                    if g:
                        tally["greedy_completed"] += 1
                        greedy_seen.setdefault(gi, []).append(out)

    threads = [threading.Thread(target=client, args=(w,), daemon=True) for w in range(args.clients)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    rss_minutes = []  # VmRSS at the end of each whole minute: the shape between launch and end
    while any(t.is_alive() for t in threads):
        time.sleep(5)
        if rss_warm[0] is None and time.monotonic() - t0 > 60:
            rss_warm[0] = server.rss()
        if time.monotonic() - t0 > 60 * (len(rss_minutes) + 1):
            rss_minutes.append(server.rss()[0])
        if server.proc.poll() is not None:
            sys.exit(f"the server exited during the soak with {server.proc.returncode} (log: {args.log})")
        with lock:
            print(f"  {time.monotonic() - t0:6.0f} s: {tally}", flush=True)
    elapsed = time.monotonic() - t0

    # Every client is gone; a hung-up stream leaves the loop at its next token.
    for _ in range(100):
        c = read_counters(server.port)
        if c["active"] == 0 and c["waiting"] == 0:
            break
        time.sleep(0.1)
    leaks = []
    if c["active"] or c["waiting"]:
        leaks.append(f"{c['active']} streams active and {c['waiting']} waiting with no client left")
    if c["pages_free"] + c["pages_cached"] + 1 != c["pages"]:
        leaks.append(f"pages: {c['pages_free']} free + {c['pages_cached']} cached + 1 padding != {c['pages']}")
    if c["snapshots_free"] + c["snapshots_cached"] != c["snapshots"]:
        leaks.append(f"snapshots: {c['snapshots_free']} free + {c['snapshots_cached']} cached != {c['snapshots']}")
    if c["refused_steps"]:
        leaks.append(f"{c['refused_steps']} engine calls refused by the step contract (a scheduler bug)")
    rss_end = server.rss()
    soak_exit = server.stop()

    # Cold runs: each greedy prompt alone on a fresh server.
    mismatches, cold_exits = [], []
    for gi in sorted(greedy_seen):
        path, body = pool[gi]
        cold = Server(args.engine, args.log + ".cold")
        st, ref = post(cold.port, path, {**body, "stream": False}, stream=False)
        cold_exits.append(cold.stop())
        if st != 200 or ref.get("error"):
            mismatches.append(f"greedy {gi}: the cold run failed: {st} {ref.get('error')}")
            continue
        for out in greedy_seen[gi]:
            same = (out["tokens"] == ref["tokens"]) if ref["tokens"] is not None else \
                (out["text"] == ref["text"] and out["completion_tokens"] == ref["completion_tokens"])
            if not same:
                mismatches.append(f"greedy {gi}: {out['text'][:80]!r} ({out['completion_tokens']} tokens) vs cold "
                                  f"{ref['text'][:80]!r} ({ref['completion_tokens']})")
                break
    bad_exits = [e for e in [soak_exit] + cold_exits if e != 0]

    checked = sum(len(greedy_seen[g]) for g in greedy_seen)
    lines = [
        f"clients {args.clients}, {elapsed / 60:.1f} min, hang-up rate {args.hangup}, one hostile client in "
        f"{args.hostile_every}, greedy pool {args.pool}",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| well-formed requests | {tally['requests']} ({tally['completed']} completed, {tally['hung_up']} hung up) |",
        f"| errors on well-formed requests | {tally['errors']} |",
        f"| completion tokens | {tally['tokens']} ({tally['tokens'] / elapsed:.1f} tok/s) |",
        f"| malformed requests | {tally['malformed']} ({tally['malformed_wrong']} answered wrongly) |",
        f"| audit at the end | {'; '.join(leaks) or 'exact'}: pages {c['pages_free']} free + "
        f"{c['pages_cached']} cached + 1 padding of {c['pages']}; snapshots {c['snapshots_free']} free + "
        f"{c['snapshots_cached']} cached of {c['snapshots']} |",
        f"| server RSS MiB (launch / after 1 min / end; peak) | {rss_start[0]:.0f} / "
        f"{rss_warm[0][0] if rss_warm[0] else float('nan'):.0f} / {rss_end[0]:.0f}; {rss_end[1]:.0f} |",
        f"| server RSS MiB at each minute | {' '.join(f'{r:.0f}' for r in rss_minutes) or '-'} |",
        f"| greedy responses checked against a cold run | {checked} of {len(greedy_seen)} prompts, "
        f"{len(mismatches)} mismatching |",
        f"| exit status after SIGTERM (soak server, {len(cold_exits)} cold servers) | "
        f"{'all 0' if not bad_exits else bad_exits} |",
    ]
    for e in (errors[:10] + wrong[:10] + mismatches[:10]):
        lines.append(f"- {e}")
    report = "\n".join(lines)
    print(report)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(report + "\n")
    ok = not (tally["errors"] or tally["malformed_wrong"] or leaks or (mismatches and not args.mismatch_ok) or bad_exits)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
