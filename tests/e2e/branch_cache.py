#!/usr/bin/env python3
"""Branch points of the prefix cache through a running server: three conversations share a long system
prompt and differ in their user message, sent one after another. The first computes everything. The
second shares the system prompt with the first, but the cache holds a state only near where the
first's prompt ended, past the shared part, so it cannot resume there; it must capture the state where the two diverge. The third
must then resume from that branch point: its usage.prompt_tokens_details.cached_tokens > 0.

    branch_cache.py BASE_URL API_KEY [--system-words 900] [--user-words 600]
"""
import argparse
import http.client
import json
import random
import sys
import urllib.parse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("key")
    ap.add_argument("--system-words", type=int, default=900)
    ap.add_argument("--user-words", type=int, default=600)
    args = ap.parse_args()
    u = urllib.parse.urlparse(args.base)
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + args.key}
    rng = random.Random(7)
    words = "branch point cache state prompt agent tool page token shared system rule".split()
    # A fresh system prompt, so nothing from earlier tests is cached under it.
    system = f"Branch test {rng.getrandbits(64):x}. " + " ".join(rng.choice(words) for _ in range(args.system_words))

    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.request("GET", "/v1/models", headers=headers)
    model = json.loads(c.getresponse().read())["data"][0]["id"]
    cached = []
    # Each user message runs for pages past the system prompt, so that where the first prompt's state
    # is kept (its last page boundary) lies beyond the point where the others diverge from it.
    for n in range(3):
        user = f"Question {n}: " + " ".join(rng.choice(words) for _ in range(args.user_words))
        body = {"model": model, "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                "max_tokens": 2, "temperature": 0}
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=headers)
        r = c.getresponse()
        data = r.read()
        if r.status != 200:
            sys.exit(f"FAIL HTTP {r.status}: {data[:300]!r}")
        usage = json.loads(data)["usage"]
        cached.append((usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]))
    print("prompt / cached tokens per request:", cached)
    if cached[0][1] != 0:
        sys.exit("FAIL the first request found its fresh system prompt cached")
    if cached[2][1] <= 0:
        sys.exit("FAIL the third request resumed nothing: the branch point after the shared system prompt has no state")
    print("branch cache PASS")


if __name__ == "__main__":
    main()
