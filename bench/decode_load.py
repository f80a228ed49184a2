#!/usr/bin/env python3
"""Decode throughput of a running server at fixed concurrency: C clients, each with its own prompt
(distinct tokens per stream), ask for exactly M tokens (ignore_eos, greedy) over and over for a fixed
number of rounds; aggregate tok/s is every completion token over the wall time of the level, and the
per-request time splits into TTFT (streamed) and the rest. One server or a replicated front alike.

    python3 bench/decode_load.py --base http://127.0.0.1:8000 [--concurrency 1,16,32,64]
        [--max-tokens 128] [--rounds 2] [--prompt-words 64] [--markdown FILE] [--label NAME]

Also `--parity N`: N greedy prompts one at a time (each decodes alone, as bucket 1), their texts
written as JSON lines to --parity-out, so two servers' answers can be compared token for token.

Only the Python standard library. Exit 1 on any request error or a short answer.
"""
import argparse
import http.client
import json
import os
import random
import statistics
import sys
import threading
import time
import urllib.parse

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def prompt(i, words):
    rng = random.Random(1000 + i)
    return f"Stream {i}: " + " ".join(rng.choice(WORDS) for _ in range(words))


class Client:
    def __init__(self, base, model, api_key):
        u = urllib.parse.urlparse(base)
        self.host, self.port, self.model = u.hostname, u.port, model
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    def complete(self, text, max_tokens):
        """(completion tokens, seconds to the first token, seconds in all, text) of one streamed request."""
        body = {"model": self.model, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
                "temperature": 0, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
        c = http.client.HTTPConnection(self.host, self.port, timeout=600)
        t0 = time.monotonic()
        c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=self.headers)
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {r.read()[:300]!r}")
        ttft, tokens, out = None, 0, []
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for ch in chunk.get("choices", []):
                piece = ch.get("delta", {}).get("content") or ""
                if piece and ttft is None:
                    ttft = time.monotonic() - t0
                out.append(piece)
        c.close()
        return tokens, ttft if ttft is not None else time.monotonic() - t0, time.monotonic() - t0, "".join(out)


def model_of(base, api_key):
    c = Client(base, "", api_key)
    h = http.client.HTTPConnection(c.host, c.port, timeout=30)
    h.request("GET", "/v1/models", headers=c.headers)
    return json.loads(h.getresponse().read())["data"][0]["id"]


def level(client, conc, args):
    """One concurrency level: (aggregate tok/s, [ttft], [inter-token seconds], errors)."""
    tokens, ttfts, itls, errors = [0] * conc, [], [], []
    lock = threading.Lock()

    def run(i):
        for r in range(args.rounds):
            try:
                n, ttft, total, _ = client.complete(prompt(i * 1000 + r, args.prompt_words), args.max_tokens)
                if n != args.max_tokens:
                    raise RuntimeError(f"{n} tokens, asked for {args.max_tokens}")
                with lock:
                    tokens[i] += n
                    ttfts.append(ttft)
                    itls.append((total - ttft) / max(n - 1, 1))
            except Exception as e:  # noqa: BLE001
                with lock:
                    errors.append(repr(e))
                return

    t0 = time.monotonic()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(tokens) / (time.monotonic() - t0), ttfts, itls, errors


def pct(xs, q):
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--api-key", default="")
    ap.add_argument("--model")
    ap.add_argument("--concurrency", default="1,16,32,64")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompt-words", type=int, default=64)
    ap.add_argument("--markdown")
    ap.add_argument("--label", default="")
    ap.add_argument("--parity", type=int, default=0)
    ap.add_argument("--parity-out")
    args = ap.parse_args()
    client = Client(args.base, args.model or model_of(args.base, args.api_key), args.api_key)

    if args.parity:
        with open(args.parity_out, "w") as f:
            for i in range(args.parity):
                n, _, _, text = client.complete(prompt(i, args.prompt_words), args.max_tokens)
                f.write(json.dumps({"prompt": i, "tokens": n, "text": text}) + "\n")
        return 0

    rows, failed = [], False
    for conc in [int(x) for x in args.concurrency.split(",")]:
        tps, ttfts, itls, errors = level(client, conc, args)
        failed |= bool(errors)
        rows.append(f"| {args.label} | {conc} | {tps:.0f} | {tps / conc:.1f} | {statistics.median(ttfts) * 1e3 if ttfts else float('nan'):.0f} "
                    f"| {pct(ttfts, 0.99) * 1e3:.0f} | {statistics.median(itls) * 1e3 if itls else float('nan'):.1f} "
                    f"| {pct(itls, 0.99) * 1e3:.1f} | {len(errors)} |")
        print(rows[-1], flush=True)
        for e in errors[:3]:
            print(f"  error: {e}", file=sys.stderr)
    if args.markdown:  # the table's head once, then each run's rows
        fresh = not os.path.exists(args.markdown) or os.path.getsize(args.markdown) == 0
        with open(args.markdown, "a") as f:
            if fresh:
                f.write("| server | streams | tok/s | tok/s per stream | TTFT p50 ms | TTFT p99 ms | ITL p50 ms "
                        "| ITL p99 ms | errors |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
            f.write("\n".join(rows) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
