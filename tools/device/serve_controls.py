#!/usr/bin/env python3
"""The decoding controls (issue 23) against a running H200 server, where node and ajv are not installed.

  python3 tools/device/serve_controls.py --engine ENGINE_DIR [--markdown FILE]
  (launches ENGINE_DIR/bin/rocket-engine itself, stops it with SIGTERM at the end; or --port PORT
  --tokenizer FILE against a running server)

Checks, each printed PASS/FAIL with its numbers:
  structured   response_format json_schema, 48 generations at temperature 1 from 16 concurrent clients
               (every decode step holds up to 16 masked rows), streamed and whole; each finished one
               must parse and validate against the schema (the validator below covers exactly the
               keywords the schema uses); json_object must parse as an object.
  logit_bias   +100 on one token forces it: every generated token is that token (logprobs tell);
               -100 on the greedy first token bans it: the first token differs.
  penalties    three tokens biased +100: greedy repeats one of them; with presence and frequency
               penalties it moves between them; a seeded penalised request repeats exactly.
  n            n: 3 on a cold prompt (~3,000 tokens by default): three choices, usage counting the prompt once, and the
               server's prefill counter (/stats) rising by about one prompt, not three; its TTFT against
               n: 1 on another cold prompt of the same length.
Only the Python standard library. Exit 1 on a failure.
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from wait_healthy import wait_healthy  # noqa: E402 - bench/ is not a package

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 16}, "zip": {"type": ["string", "null"]}},
            "required": ["city", "zip"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "age", "tags", "address"],
    "additionalProperties": False,
}


def validate(schema, v, path="$"):
    """The keywords SCHEMA uses, as JSON Schema defines them; raises ValueError naming the path."""
    t = schema.get("type")
    types = t if isinstance(t, list) else [t] if t else []
    kinds = {"object": dict, "array": list, "string": str, "null": type(None)}
    if types:
        ok = any((ty == "integer" and isinstance(v, int) and not isinstance(v, bool)) or
                 (ty in kinds and isinstance(v, kinds[ty])) for ty in types)
        if not ok:
            raise ValueError(f"{path}: {v!r} is not {types}")
    if "enum" in schema and v not in schema["enum"]:
        raise ValueError(f"{path}: {v!r} not in the enum")
    if isinstance(v, str) and "maxLength" in schema and len(v) > schema["maxLength"]:
        raise ValueError(f"{path}: longer than {schema['maxLength']}")
    if isinstance(v, list):
        if len(v) > schema.get("maxItems", len(v)):
            raise ValueError(f"{path}: more than maxItems")
        for i, x in enumerate(v):
            validate(schema.get("items", {}), x, f"{path}[{i}]")
    if isinstance(v, dict):
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in v:
                raise ValueError(f"{path}: missing {k}")
        for k, x in v.items():
            if k not in props:
                if schema.get("additionalProperties") is False:
                    raise ValueError(f"{path}: unexpected {k}")
            else:
                validate(props[k], x, f"{path}.{k}")


class Server:
    def __init__(self, port):
        self.port = port
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/v1/models")
        self.model = json.loads(c.getresponse().read())["data"][0]["id"]

    def post(self, path, body, timeout=600):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"{path}: HTTP {r.status}: {data[:300]!r}")
        return json.loads(data)

    def stream(self, path, body, timeout=600):
        """(content, finish_reason, seconds to the first content chunk)."""
        t0 = time.time()
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        c.request("POST", path, json.dumps(dict(body, stream=True)), {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError(f"{path}: HTTP {r.status}: {r.read()[:300]!r}")
        text, finish, first = [], None, None
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            if line == b"data: [DONE]":
                break
            ev = json.loads(line[6:])
            if "error" in ev:
                raise RuntimeError(f"error event: {ev['error']}")
            for ch in ev.get("choices", []):
                piece = ch.get("delta", {}).get("content") or ""
                if piece and first is None:
                    first = time.time() - t0
                text.append(piece)
                finish = ch.get("finish_reason") or finish
        return "".join(text), finish, first

    def stats(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("GET", "/stats")
        return json.loads(c.getresponse().read())


def check_structured(s, out):
    results, lock = [], threading.Lock()
    messages = [{"role": "user", "content": "Describe a person as JSON."}]
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA, "strict": True}}

    def worker(w):
        for i in range(3):
            body = {"model": s.model, "messages": messages, "response_format": fmt, "max_tokens": 400,
                    "temperature": 1.0, "seed": 100 * w + i}
            try:
                if (w + i) % 2:
                    text, finish, _ = s.stream("/v1/chat/completions", body)
                else:
                    r = s.post("/v1/chat/completions", body)
                    text, finish = r["choices"][0]["message"]["content"], r["choices"][0]["finish_reason"]
                if finish == "stop":
                    validate(SCHEMA, json.loads(text))
                    res = "valid"
                else:
                    res = "length" if finish == "length" else f"finish {finish}"
            except Exception as e:  # noqa: BLE001 - every failure is reported
                res = f"invalid: {e}: {text[:200]!r}" if "text" in locals() else f"error: {e}"
            with lock:
                results.append(res)

    t0 = time.time()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.time() - t0
    valid = results.count("valid")
    cut = results.count("length")
    bad = [r for r in results if r not in ("valid", "length")]
    obj = s.post("/v1/chat/completions", {"model": s.model, "messages": messages, "max_tokens": 200, "temperature": 1.0,
                                         "seed": 5, "response_format": {"type": "json_object"}})
    c = obj["choices"][0]
    obj_ok = c["finish_reason"] != "stop" or isinstance(json.loads(c["message"]["content"]), dict)
    ok = not bad and valid > 0 and obj_ok
    out(f"structured {'PASS' if ok else 'FAIL'}: {valid} valid, {cut} cut by max_tokens, {len(bad)} bad of "
        f"{len(results)} json_schema generations from 16 clients in {dt:.1f} s; json_object "
        f"{'ok' if obj_ok else 'not an object'}")
    for b in bad[:5]:
        out(f"  {b}")
    return ok


def tokens_of(r):
    return [t["token"] for t in r["choices"][0]["logprobs"]["content"]]


def byte_level_ids(tokenizer_json):
    """token bytes -> id, from tokenizer.json's byte-level BPE vocabulary (GPT-2's byte-to-unicode map)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    to_char, extra = {}, 0
    for b in range(256):
        if b in keep:
            to_char[b] = chr(b)
        else:
            to_char[b] = chr(256 + extra)
            extra += 1
    from_char = {c: b for b, c in to_char.items()}
    vocab = json.load(open(tokenizer_json))["model"]["vocab"]
    return {bytes(from_char[c] for c in tok): i for tok, i in vocab.items() if all(c in from_char for c in tok)}


def check_logit_bias(s, out, ids):
    base = {"model": s.model, "messages": [{"role": "user", "content": "Count to ten."}], "max_tokens": 8,
            "temperature": 0, "logprobs": True}
    greedy = s.post("/v1/chat/completions", base)["choices"][0]["logprobs"]["content"]
    first = bytes(greedy[0]["bytes"])
    forced_id = 1000
    ft = tokens_of(s.post("/v1/chat/completions", dict(base, logit_bias={str(forced_id): 100})))
    forced_ok = len(ft) == 8 and len(set(ft)) == 1
    if first not in ids:
        out(f"logit_bias FAIL: the greedy first token {first!r} is not in the vocabulary's byte map")
        return False
    banned = s.post("/v1/chat/completions", dict(base, logit_bias={str(ids[first]): -100}))["choices"][0]["logprobs"]["content"]
    banned_ok = bytes(banned[0]["bytes"]) != first
    ok = forced_ok and banned_ok
    out(f"logit_bias {'PASS' if ok else 'FAIL'}: +100 on id {forced_id}: {ft!r}; -100 on the greedy first token "
        f"{first!r} (id {ids[first]}): first token now {bytes(banned[0]['bytes'])!r}")
    return ok


def longest_run(xs):
    best = run = 0
    for i, x in enumerate(xs):
        run = run + 1 if i and xs[i - 1] == x else 1
        best = max(best, run)
    return best


def check_penalties(s, out, ids):
    # Three tokens biased +100 dominate every row, so greedy repeats the likeliest of them; presence and
    # frequency penalties (2 each: 2 + 2k off a token drawn k times) must move greedy between them
    # unless the model's own logits for them differ by more than that.
    three = [1000, 2000, 3000]
    base = {"model": s.model, "messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": 12,
            "temperature": 0, "logprobs": True, "logit_bias": {str(t): 100 for t in three}}
    ids_of = lambda r: [ids.get(bytes(t["bytes"])) for t in r["choices"][0]["logprobs"]["content"]]  # noqa: E731
    plain = ids_of(s.post("/v1/chat/completions", base))
    pen = ids_of(s.post("/v1/chat/completions", dict(base, presence_penalty=2.0, frequency_penalty=2.0)))
    sampled = dict(base, temperature=0.8, seed=11, presence_penalty=1.5, repetition_penalty=1.2, logit_bias={})
    a = tokens_of(s.post("/v1/chat/completions", sampled))
    b = tokens_of(s.post("/v1/chat/completions", sampled))
    inside = all(t in three for t in plain + pen)
    ok = inside and longest_run(pen) < longest_run(plain) and a == b
    out(f"penalties {'PASS' if ok else 'FAIL'}: three tokens biased +100 {three}, greedy: {plain} (longest run "
        f"{longest_run(plain)}); with presence and frequency penalties 2: {pen} (longest run {longest_run(pen)}); "
        f"seeded penalised repeat {'identical' if a == b else 'DIFFERS'}")
    return ok


def check_n(s, out, words_per_prompt):
    rng = random.Random(3)
    words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta", "lambda", "zeta"]

    def prompt():
        return " ".join(rng.choice(words) + str(rng.randrange(1000)) for _ in range(words_per_prompt))

    def run(n):
        before = s.stats()
        body = {"model": s.model, "messages": [{"role": "user", "content": prompt()}], "max_tokens": 8,
                "temperature": 1.0, "seed": 9, "n": n}
        t0 = time.time()
        r = s.post("/v1/chat/completions", body)
        dt = time.time() - t0
        after = s.stats()
        pre = after["prefill_tokens"] - before["prefill_tokens"]
        return r, dt, pre

    r1, t1, pre1 = run(1)
    r3, t3, pre3 = run(3)
    p = r3["usage"]["prompt_tokens"]
    idx = sorted(c["index"] for c in r3["choices"])
    ok = idx == [0, 1, 2] and r3["usage"]["prompt_tokens"] == p and pre3 < 1.5 * p
    out(f"n {'PASS' if ok else 'FAIL'}: n=3 on a {p}-token prompt: choices {idx}, prefilled {pre3} tokens "
        f"(n=1: {pre1} of {r1['usage']['prompt_tokens']}), request {t3 * 1000:.0f} ms vs n=1 {t1 * 1000:.0f} ms")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", help="an engine directory to launch (else --port)")
    ap.add_argument("--port", type=int)
    ap.add_argument("--tokenizer", help="tokenizer.json (token ids for logit_bias; default: the engine's)")
    ap.add_argument("--n-prompt-words", type=int, default=1000, help="n: 3's cold prompt (~3 tokens a word)")
    ap.add_argument("--log", default="/tmp/rocket_serve_controls.log")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    server = None
    if a.engine:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        a.port = sock.getsockname()[1]
        sock.close()
        server = subprocess.Popen([os.path.join(a.engine, "bin", "rocket-engine"), "launch", "--port", str(a.port)],
                                  stdout=open(a.log, "w"), stderr=subprocess.STDOUT)
        a.tokenizer = a.tokenizer or os.path.join(a.engine, "tokenizer.json")
        if not wait_healthy(a.port, lambda: server.poll() is None):  # 200 once the countdown reaches launch
            sys.exit(f"the engine exited during its countdown (log: {a.log})")
    if not a.port or not a.tokenizer:
        sys.exit("give --engine, or --port and --tokenizer")
    ids = byte_level_ids(a.tokenizer)
    s = Server(a.port)
    lines = []

    def out(line):
        print(line, flush=True)
        lines.append(line)

    ok = True
    for check in (check_structured, lambda s, out: check_logit_bias(s, out, ids), lambda s, out: check_penalties(s, out, ids),
                  lambda s, out: check_n(s, out, a.n_prompt_words)):
        try:
            ok &= check(s, out)
        except Exception as e:  # noqa: BLE001
            out(f"check FAIL: {e!r}")
            ok = False
    if server:
        server.send_signal(signal.SIGTERM)
        rc = server.wait(timeout=120)
        out(f"server drained and exited {rc}")
        ok &= rc == 0
    if a.markdown:
        with open(a.markdown, "a") as f:
            f.write("\n".join(lines) + "\n")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
