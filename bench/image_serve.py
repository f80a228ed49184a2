#!/usr/bin/env python3
"""Images through a running Rocket server (issue 43): an agent that resends the same screenshot.

Each session is a conversation whose first user turn carries one synthetic screenshot (a PNG data URL,
SIDE x SIDE pixels, distinct per session) and a question; every later turn appends the assistant's reply
and a short new question, resending the whole history, image included, as an OpenAI client does. Per
turn the streamed TTFT and the prompt tokens the prefix cache served
(usage.prompt_tokens_details.cached_tokens). The same sessions run at each concurrency level, with
fresh images per level (no level reads another's cache). Then the probe the issue's target names: on
one idle server, a cold image turn, the resent turn, and the same resent turn of a text-only session
of about the same length (its image replaced by text), TTFT each the median of --probes runs.

    python3 bench/image_serve.py --base http://127.0.0.1:8000 [--side 1024] [--concurrency 1,8,32]
        [--sessions-per-stream 2] [--turns 3] [--max-tokens 16] [--markdown FILE]

Only the Python standard library (the PNG is written with zlib). Exit 1 on any request error or when a
resent turn is not served from the cache up to the first turn's last whole page (the cache holds page
boundaries: a boundary inside the image's last page recomputes that page, and the engine encodes the
image again for it).
"""
import argparse
import base64
import random
import statistics
import struct
import sys
import threading
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_agents import Client, pct  # noqa: E402 - the agent workload's streaming client


def screenshot_png(side, seed):
    """A deterministic screenshot-like RGB PNG: window bars, text-like runs of dark pixels on light
    panels, a few coloured blocks; distinct per seed. Compresses like a real screenshot (~1/10)."""
    rng = random.Random(seed)
    base = [rng.randrange(200, 256) for _ in range(3)]
    rows = []
    blocks = [(rng.randrange(side), rng.randrange(side), rng.randrange(20, side // 3), rng.randrange(10, side // 6),
               [rng.randrange(256) for _ in range(3)]) for _ in range(6)]
    for y in range(side):
        row = bytearray(b"\x00")  # filter: none
        line = bytearray(bytes(base) * side)
        if y % 24 < 2 or y < 32:
            line[:] = bytes([40, 44, 52]) * side
        elif y % 24 in range(8, 18):
            x = 16 + rng.randrange(8)
            while x < side - 16:
                run = rng.randrange(3, 40)
                for xx in range(x, min(x + run, side)):
                    line[3 * xx:3 * xx + 3] = bytes([30, 30, 30])
                x += run + rng.randrange(4, 12)
        for bx, by, bw, bh, c in blocks:
            if by <= y < by + bh:
                for xx in range(bx, min(bx + bw, side)):
                    line[3 * xx:3 * xx + 3] = bytes(c)
        row += line
        rows.append(bytes(row))
    raw = zlib.compress(b"".join(rows), 6)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
    return png + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def data_url(png):
    return "data:image/png;base64," + base64.b64encode(png).decode()


def ttft_of(res):
    """serve_agents' streamed result with its time to the first token; errors pass through."""
    if "error" in res:
        return res
    first = res["stamps"][0] if res["stamps"] else res["end"]
    return dict(res, ttft=first - res["t0"])


def cached(res):
    return (res["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)


QUESTIONS = ["What does this screenshot show?", "Which panel holds the error?", "Where would you click next?",
             "Summarise the window's state.", "Is anything highlighted?"]


def body(messages, args):
    return {"model": args.model, "messages": messages, "max_tokens": args.max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}


def session_turns(client, args, png, seed, rows, errors, lock):
    rng = random.Random(seed)
    messages = [{"role": "system", "content": "You are a coding agent looking at the user's screen."},
                {"role": "user", "content": [{"type": "text", "text": rng.choice(QUESTIONS)},
                                             {"type": "image_url", "image_url": {"url": data_url(png)}}]}]
    for turn in range(args.turns):
        res = ttft_of(client.chat_stream(body(messages, args)))
        with lock:
            if "error" in res:
                errors.append(res["error"])
                return
            rows.append({"turn": turn, "ttft": res["ttft"], "prompt": res["usage"]["prompt_tokens"], "cached": cached(res)})
        messages.append({"role": "assistant", "content": res["text"]})
        messages.append({"role": "user", "content": rng.choice(QUESTIONS)})


def run_level(client, args, concurrency, level):
    sessions = concurrency * args.sessions_per_stream
    pngs = [screenshot_png(args.side, 1000 * level + s) for s in range(sessions)]
    rows, errors, lock = [], [], threading.Lock()
    queue = list(range(sessions))

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                s = queue.pop()
            session_turns(client, args, pngs[s], 7919 * level + s, rows, errors, lock)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    first = [r for r in rows if r["turn"] == 0]
    later = [r for r in rows if r["turn"] > 0]
    # A resent turn is served from the cache: it holds every whole page of the first turn's prompt
    # (the cache keeps page boundaries, so the first turn's last partial page is computed again).
    first_prompt = min(r["prompt"] for r in first) if first else 0
    past_image = sum(1 for r in later if r["cached"] >= first_prompt // args.page_tokens * args.page_tokens)
    return {"concurrency": concurrency, "sessions": sessions, "requests": len(rows), "errors": errors, "wall": wall,
            "ttft_first_p50": pct([r["ttft"] for r in first], 50), "ttft_first_p99": pct([r["ttft"] for r in first], 99),
            "ttft_later_p50": pct([r["ttft"] for r in later], 50), "ttft_later_p99": pct([r["ttft"] for r in later], 99),
            "first_prompt": first_prompt, "later": len(later), "past_image": past_image,
            "hit": sum(r["cached"] for r in later) / max(1, sum(r["prompt"] for r in later))}


def probe(client, args):
    """Cold image turn, its resend, and a text-only session's resend of about the same length."""
    out = {"cold": [], "resent": [], "text_resent": []}
    for i in range(args.probes):
        png = screenshot_png(args.side, 900000 + i)
        messages = [{"role": "user", "content": [{"type": "text", "text": "What does this screenshot show?"},
                                                 {"type": "image_url", "image_url": {"url": data_url(png)}}]}]
        cold = ttft_of(client.chat_stream(body(messages, args)))
        if "error" in cold:
            return {"error": cold["error"]}
        messages += [{"role": "assistant", "content": cold["text"]}, {"role": "user", "content": "Where would you click next?"}]
        resent = ttft_of(client.chat_stream(body(messages, args)))
        if "error" in resent:
            return {"error": resent["error"]}
        # The text-only twin: the image's tokens as words (one token each, about), distinct per probe.
        rng = random.Random(i)
        words = " ".join(rng.choice(["screen", "panel", "button", "error", "window", "menu"]) for _ in range(cold["usage"]["prompt_tokens"]))
        text_msgs = [{"role": "user", "content": "What does this describe? " + words}]
        text_cold = ttft_of(client.chat_stream(body(text_msgs, args)))
        if "error" in text_cold:
            return {"error": text_cold["error"]}
        text_msgs += [{"role": "assistant", "content": cold["text"]}, {"role": "user", "content": "Where would you click next?"}]
        text_resent = ttft_of(client.chat_stream(body(text_msgs, args)))
        if "error" in text_resent:
            return {"error": text_resent["error"]}
        out["cold"].append(cold["ttft"])
        out["resent"].append(resent["ttft"])
        out["text_resent"].append(text_resent["ttft"])
        out.update(image_prompt=cold["usage"]["prompt_tokens"], resent_prompt=resent["usage"]["prompt_tokens"],
                   resent_cached=cached(resent), text_prompt=text_resent["usage"]["prompt_tokens"],
                   text_cached=cached(text_resent))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True)
    ap.add_argument("--api-key")
    ap.add_argument("--side", type=int, default=1024)
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--sessions-per-stream", type=int, default=2)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--probes", type=int, default=5)
    ap.add_argument("--markdown")
    args = ap.parse_args()
    client = Client(args.base, args.api_key)
    args.model = client.get_json("/v1/models")[1]["data"][0]["id"]
    args.page_tokens = (client.get_json("/stats")[1] or {}).get("page_tokens") or 1
    lines = [f"{args.side}x{args.side} PNG screenshots (synthetic, {len(screenshot_png(args.side, 0)) // 1024} KiB each), "
             f"{args.turns} turns a session, {args.sessions_per_stream} sessions a stream, max_tokens {args.max_tokens}", "",
             "| clients | requests | errors | first turn TTFT p50 / p99 (ms) | resent turns TTFT p50 / p99 (ms) | "
             "resent turns served from the cache (every whole page of the first turn) | resent hit rate | wall (s) |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    failed = False
    for level, c in enumerate(int(x) for x in args.concurrency.split(",")):
        r = run_level(client, args, c, level + 1)
        failed |= bool(r["errors"]) or r["past_image"] != r["later"]
        lines.append(f"| {c} | {r['requests']} | {len(r['errors'])} | {1e3 * r['ttft_first_p50']:.1f} / "
                     f"{1e3 * r['ttft_first_p99']:.1f} | {1e3 * r['ttft_later_p50']:.1f} / {1e3 * r['ttft_later_p99']:.1f} | "
                     f"{r['past_image']} / {r['later']} | {100 * r['hit']:.1f}% | {r['wall']:.1f} |")
        for e in r["errors"][:3]:
            print("error:", e, file=sys.stderr)
        print(lines[-1], flush=True)
    p = probe(client, args)
    if "error" in p:
        print("probe error:", p["error"], file=sys.stderr)
        failed = True
    else:
        cold, resent, text = (statistics.median(p[k]) for k in ("cold", "resent", "text_resent"))
        lines += ["", f"Probe (idle server, median of {args.probes}): a cold {args.side}x{args.side} image turn "
                  f"({p['image_prompt']} prompt tokens) **{1e3 * cold:.1f} ms** TTFT; the turn resending it "
                  f"({p['resent_prompt']} tokens, {p['resent_cached']} from the cache) **{1e3 * resent:.1f} ms**; a "
                  f"text-only session's resent turn ({p['text_prompt']} tokens, {p['text_cached']} cached) "
                  f"**{1e3 * text:.1f} ms** (resent image / text: {resent / text:.2f})"]
        failed |= p["resent_cached"] < p["image_prompt"] // args.page_tokens * args.page_tokens
        print(lines[-1], flush=True)
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
