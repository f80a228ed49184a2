#!/usr/bin/env python3
"""Scheduler under load: N concurrent streaming clients for a bounded time against a running
server, a share of them hanging up mid-stream, some asking for several choices (n > 1: forks through
the prefix cache), some sending long prompts beside the decoding streams. Every request must either
complete (a finish_reason per choice and [DONE]) or be one we cancelled; afterwards the scheduler must
go idle (no deadlock) with every KV page and snapshot slot either free or held by the prefix cache (no
leaks), and no engine call refused by the step contract (refused_steps).

    serve_load.py BASE_URL API_KEY [--clients 64] [--seconds 20] [--disconnect 0.3] [--fork 0.2]
        [--long 0.1] [--long-words 1500] [--burst 200]

--burst N first opens N connections at once, each with one short request: all must be answered (the
listen backlog; cpp-httplib's own of 5 reset 31 of 200).
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "client"))
from sse import SseStream  # noqa: E402 - tools/client is not a package


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("key")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--disconnect", type=float, default=0.3)
    ap.add_argument("--fork", type=float, default=0.0, help="share of requests with n = 2 or 3")
    ap.add_argument("--long", type=float, default=0.0, help="share of requests with a long prompt")
    ap.add_argument("--long-words", type=int, default=1500)
    ap.add_argument("--burst", type=int, default=0, help="connections opened at once before the load")
    args = ap.parse_args()
    u = urllib.parse.urlparse(args.base)
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + args.key}
    counts = {"completed": 0, "cancelled": 0, "busy_503": 0}
    failures = []
    lock = threading.Lock()
    deadline = time.time() + args.seconds

    def get(path):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        c.request("GET", path, headers=headers)
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, json.loads(body)

    model = get("/v1/models")[1]["data"][0]["id"]

    if args.burst:
        go, burst_errors = threading.Event(), []

        def knock():
            go.wait()
            try:
                c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
                c.request("POST", "/v1/completions", headers=headers,
                          body=json.dumps({"model": model, "prompt": "knock knock", "max_tokens": 2}))
                r = c.getresponse()
                r.read()
                c.close()
                if r.status not in (200, 503):
                    raise RuntimeError(f"HTTP {r.status}")
            except Exception as e:  # noqa: BLE001 - every failure is reported
                with lock:
                    burst_errors.append(repr(e))
        knockers = [threading.Thread(target=knock) for _ in range(args.burst)]
        for t in knockers:
            t.start()
        go.set()
        for t in knockers:
            t.join()
        if burst_errors:
            failures.append(f"{len(burst_errors)} of {args.burst} connections opened at once failed, e.g. {burst_errors[0]}")
        print(f"burst of {args.burst} connections: {len(burst_errors)} failed", flush=True)
        deadline = time.time() + args.seconds

    def one(rng, n):
        length = args.long_words if rng.random() < args.long else rng.randint(3, 400)
        words = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "page", "cache", "token"])
                         for _ in range(length))
        choices = rng.choice([2, 3]) if rng.random() < args.fork else 1
        body = {"model": model, "messages": [{"role": "user", "content": f"client {n}: {words}"}],
                "max_tokens": rng.randint(4, 24), "temperature": 0.8, "seed": rng.randint(0, 1 << 30),
                "stream": True, "n": choices}
        hang_up = rng.random() < args.disconnect
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=headers)
        r = c.getresponse()
        if r.status == 503:
            r.read()
            c.close()
            return "busy_503"
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]!r}")
        finish, chunks = {}, 0
        stream = SseStream(r)
        for chunk in stream:
            chunks += 1
            for ch in chunk.get("choices", []):
                if ch.get("finish_reason"):
                    finish[ch.get("index", 0)] = ch["finish_reason"]
            if hang_up and chunks >= 2:
                c.sock.close()  # the client goes away mid-stream
                c.close()
                return "cancelled"
        c.close()
        if not (stream.done and len(finish) == choices):
            raise RuntimeError(f"stream ended without a finish_reason for each of its {choices} choices and [DONE] "
                               f"(finish={finish}, done={stream.done})")
        return "completed"

    def client(n):
        rng = random.Random(n)
        while time.time() < deadline:
            try:
                outcome = one(rng, n)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                with lock:
                    failures.append(f"client {n}: {e}")
                return
            with lock:
                counts[outcome] += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=args.seconds + 180)
    if any(t.is_alive() for t in threads):
        failures.append("clients still waiting long after the deadline: deadlock?")

    idle = None
    for _ in range(600):
        status, m = get("/stats")
        if status == 200 and m["active"] == 0 and m["waiting"] == 0:
            idle = m
            break
        time.sleep(0.1)
    print(json.dumps({"counts": counts, "metrics": idle}))
    if idle is None:
        failures.append("the scheduler never went idle")
    else:
        # One page stays with the scheduler for good: the padding rows' sink.
        if idle["pages_free"] + idle["pages_cached"] + 1 != idle["pages"]:
            failures.append(f"page leak: {idle['pages_free']} free + {idle['pages_cached']} cached + 1 pad "
                            f"!= {idle['pages']}")
        # The scheduler counts each choice of an n > 1 request as a stream of its own (finished or
        # cancelled), a request once: with forks every request is accounted for at least once.
        ended = idle["finished"] + idle["cancelled"]
        if ended != idle["requests"] and not (args.fork > 0 and ended > idle["requests"]):
            failures.append(f"{idle['requests']} requests but {idle['finished']} finished + {idle['cancelled']} "
                            "cancelled")
        if idle["finished"] < counts["completed"]:
            failures.append(f"clients saw {counts['completed']} completions, the scheduler {idle['finished']}")
        if idle.get("refused_steps", 0) != 0:
            failures.append(f"{idle['refused_steps']} engine calls refused by the step contract (a scheduler bug)")
        if idle["snapshots_free"] + idle["snapshots_cached"] != idle["snapshots"]:
            failures.append(f"snapshot leak: {idle['snapshots_free']} free + {idle['snapshots_cached']} cached "
                            f"!= {idle['snapshots']}")
    if counts["completed"] == 0:
        failures.append("no request completed")
    if counts["cancelled"] == 0 and args.disconnect > 0:
        failures.append("no client hung up: the disconnect path went untested")
    for f in failures:
        print("FAIL", f)
    print("ok" if not failures else "FAILED", counts)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
