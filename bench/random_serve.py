#!/usr/bin/env python3
"""Random-prompt serving benchmark, in the shape of the published tables users compare against
(SGLang's bench_serving `--dataset-name random --random-range-ratio 1`, as in its Qwen3.5-35B-A3B page:
8,192-token prompts, 1,024 output tokens, ignore_eos, concurrency 1, 16, 64, 100).

Each request is a streamed /v1/completions of a prompt of random token ids (so no two prompts share a
cached prefix) with max_tokens OUTPUT and ignore_eos, greedy. Per concurrency level, --num-prompts
requests (default 2 per client of the level, at least 8) run with at most that many in flight; reported as SGLang
reports them:
  TTFT       time to the first streamed token, median and p99 (ms)
  TPOT       per request, (end - first token) / (output tokens - 1), median and p99 (ms)
  ITL        gaps between streamed tokens, median and p99 (ms)
  output tok/s, total tok/s (prompt + output tokens over the level's wall time)

    python3 bench/random_serve.py --base http://127.0.0.1:8000 [--input-len 8192] [--output-len 1024]
        [--concurrency 1,16,64,100] [--num-prompts N] [--range-ratio 1.0] [--api-key K]
        [--markdown FILE] [--seed 1]

Only the Python standard library. Exit 1 when any request fails (an HTTP error, an error event, fewer
output tokens than asked for, or no [DONE]).
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


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


class Client(Server):
    def completion(self, model, ids, output_len):
        """One streamed completion; the arrival time of every chunk that carried tokens."""
        body = {"model": model, "prompt": ids, "max_tokens": output_len, "ignore_eos": True, "temperature": 0,
                "stream": True, "stream_options": {"include_usage": True}}
        t0 = time.perf_counter()
        c, r = self.post("/v1/completions", body, timeout=3600)
        if r.status != 200:
            err = r.read().decode(errors="replace")
            c.close()
            return {"error": f"HTTP {r.status}: {err[:200]}"}
        stamps, usage = [], None
        stream = SseStream(r)
        for chunk in stream:
            if chunk.get("error"):
                c.close()
                return {"error": json.dumps(chunk["error"])[:200]}
            if chunk.get("usage"):
                usage = chunk["usage"]
            if any(ch.get("text") for ch in chunk.get("choices", [])):
                stamps.append(time.perf_counter())
        c.close()
        end = time.perf_counter()
        if not stream.done or usage is None:
            return {"error": "the stream ended without usage and [DONE]"}
        if usage["completion_tokens"] != output_len:
            return {"error": f"{usage['completion_tokens']} output tokens, asked for {output_len} with ignore_eos"}
        return {"t0": t0, "stamps": stamps, "end": end, "usage": usage}


def run_level(client, model, args, concurrency, vocab, seed):
    rng = random.Random(seed)
    n = args.num_prompts or max(8, int(args.prompts_per_client * concurrency))
    lo = max(1, int(args.input_len * args.range_ratio))
    prompts = [[rng.randrange(vocab) for _ in range(rng.randint(lo, args.input_len))] for _ in range(n)]
    results, errors, lock = [], [], threading.Lock()
    queue = list(range(n))

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                i = queue.pop(0)
            res = client.completion(model, prompts[i], args.output_len)
            with lock:
                (errors if "error" in res else results).append(res.get("error", res))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(min(concurrency, n))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttft = [(r["stamps"][0] - r["t0"]) * 1e3 for r in results if r["stamps"]]
    tpot = [(r["end"] - r["stamps"][0]) * 1e3 / (r["usage"]["completion_tokens"] - 1)
            for r in results if r["stamps"] and r["usage"]["completion_tokens"] > 1]
    itl = [(b - a) * 1e3 for r in results for a, b in zip(r["stamps"], r["stamps"][1:])]
    out = sum(r["usage"]["completion_tokens"] for r in results)
    inp = sum(r["usage"]["prompt_tokens"] for r in results)
    return {"concurrency": concurrency, "requests": n, "errors": len(errors), "error_samples": errors[:3],
            "wall_s": wall, "input_tokens": inp, "output_tokens": out,
            "ttft_p50_ms": pct(ttft, 50), "ttft_p99_ms": pct(ttft, 99),
            "tpot_p50_ms": pct(tpot, 50), "tpot_p99_ms": pct(tpot, 99),
            "itl_p50_ms": pct(itl, 50), "itl_p99_ms": pct(itl, 99),
            "output_tok_s": out / wall if wall else 0.0, "total_tok_s": (inp + out) / wall if wall else 0.0,
            "tpot_mean_ms": statistics.mean(tpot) if tpot else float("nan")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default="")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--input-len", type=int, default=8192)
    ap.add_argument("--output-len", type=int, default=1024)
    ap.add_argument("--range-ratio", type=float, default=1.0, help="prompt lengths drawn from [ratio x len, len]")
    ap.add_argument("--concurrency", default="1,16,64,100")
    ap.add_argument("--num-prompts", type=int, default=0, help="requests per level (0: --prompts-per-client x the level)")
    ap.add_argument("--prompts-per-client", type=float, default=2.0, help="requests per client of a level (at least 8 in all)")
    ap.add_argument("--vocab", type=int, default=0, help="token ids drawn below this (0: 150,000, inside every Qwen vocabulary)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--markdown", default="")
    args = ap.parse_args()

    client = Client(args.base, args.api_key)
    status, models = client.get_json("/v1/models")
    if status != 200:
        sys.exit(f"GET /v1/models: HTTP {status}")
    model = args.model or models["data"][0]["id"]
    # Random ids from the ordinary tokens (below Qwen's specials), as bench_serving samples its random set.
    vocab = args.vocab or 150000
    rows = []
    for level in [int(x) for x in args.concurrency.split(",")]:
        r = run_level(client, model, args, level, vocab, args.seed + level)
        rows.append(r)
        print(json.dumps(r), flush=True)
    lines = [f"Random prompts of {args.input_len} tokens (range ratio {args.range_ratio}), {args.output_len} output "
             "tokens, ignore_eos, greedy:", "",
             "| concurrency | requests | errors | TTFT p50 / p99 ms | TPOT p50 / p99 ms | ITL p50 / p99 ms "
             "| output tok/s | total tok/s |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['concurrency']} | {r['requests']} | {r['errors']} | {r['ttft_p50_ms']:.1f} / "
                     f"{r['ttft_p99_ms']:.1f} | {r['tpot_p50_ms']:.2f} / {r['tpot_p99_ms']:.2f} | "
                     f"{r['itl_p50_ms']:.2f} / {r['itl_p99_ms']:.2f} | {r['output_tok_s']:.0f} | {r['total_tok_s']:.0f} |")
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(table + "\n")
    errors = sum(r["errors"] for r in rows)
    if errors:
        print(f"FAIL: {errors} requests failed, e.g. {[r['error_samples'] for r in rows if r['errors']]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
